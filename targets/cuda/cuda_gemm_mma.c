/* targets/cuda/cuda_gemm_mma.c: 16-bit dots whose operand a fused prologue computes (an int8
 * weight converted and scaled: W8A16) on the tensor cores, the prologue run as the tiles load.
 *
 * cuBLAS reads operands from memory, so a dequantized weight would first be written out in
 * full (3 bytes of HBM traffic per s8 element) and read again; here each element is generated
 * where the kernel loads it. out[m, n] = sum_k L[m, k] R[k, n] (the dot's lhs and rhs, any
 * free dims, one contracting dim, no batch dims). A block takes BM rows (16 to 128, by M) and
 * GM_BN = 128 columns: warps of 16 * tm rows by 32 columns, mma.sync m16n8k16 with f32 sums.
 * Per GM_BK = 32 k, each operand's tile goes into shared memory as rows of 16-byte chunks
 * along its minor dim (k for an operand whose contracting dim is minor, read by ldmatrix;
 * else its free dim, read by ldmatrix.trans), swizzled (chunk ^ a function of the row) so
 * that the eight rows one ldmatrix reads fall in different banks. An operand that is an entry
 * value of the operands' type (the activation) is copied by cp.async, two tiles ahead. For the
 * other (the prologue's), a chunk is 8 elements of its expression: the entry values of its
 * dims (the s8 weight: the leaves) are read by one vector access each, GM_AHEAD tiles ahead
 * of the tile being stored (held in registers across iterations, so that the loads' latency
 * overlaps two tiles' products); entered in the elemental cache, the prologue's generator
 * (convert, multiply) finds them there, and broadcasts that do not read along k (per-column
 * scales) are generated once before the loop. GM_STAGES tiles live in shared memory: while the
 * warps multiply one, the next is being stored and the one after copied; one barrier a tile.
 * Where the entry values' addresses do not allow vector accesses (checked at run time) the
 * same loop reads elements. With one split of K the block writes each sum through the
 * fusion's elementwise epilogue; with several (chosen with the tile shape to fill the SMs'
 * slots) it writes f32 partials and cuda_dot_finish sums them. Launch bounds cap the
 * registers at two 256-thread blocks an SM. Chosen over staging plus cuBLAS where a cost model
 * (its measured rates) says it is faster; --gemm-prologues=fused|staged overrides. */
#include "cuda_impl.h"

#include <math.h>
#include <string.h>

#define GM_BN 128                /* columns per block */
#define GM_BK 32                 /* k per tile */
#define GM_WN 4                  /* warps along n (32 columns each) */
#define GM_MAX_LEAVES 4          /* vector-read entry values per operand */
#define GM_MAX_PER 4             /* chunks per thread per operand tile */
#define GM_MAX_INV 4             /* values of an operand's expression the same at every k */
#define GM_AHEAD 2               /* tiles whose leaves are in registers ahead */
#define GM_STAGES 3              /* tiles in shared memory: one multiplied, two being filled */
#define GM_MIN_SPLIT (8 * GM_BK) /* k per split, at least */
#define GM_MIN_ELEMS (1 << 16)   /* elements of the prologue's operand, at least */

/* The cost model (H200, measured with bench/cuda/w8a16_pair.sh: docs/benchmarks.md): this
 * kernel's and cuBLAS's bf16 FLOP/s, the bytes/s of HBM that staging (read and written) and
 * cuBLAS's reading reach. */
#define GM_RATE 250e12
#define GM_CUBLAS_RATE 650e12
#define GM_HBM_BW 3.0e12

typedef struct GmSide {
  const HInstr *x;          /* the dot's operand (a fusion member) */
  DotSide d;                /* its dims */
  int64_t fe[HLO_MAX_RANK]; /* its free dims' extents, in order */
  int64_t T;                /* tile extent along its free elements (BM or GM_BN) */
  bool kminor;              /* its contracting dim is minor: shared rows of free elements */
  int64_t nch;              /* 16-byte chunks per shared row */
  int per;                  /* chunks per thread */
  int64_t off;              /* byte offset of its tile in a stage */
  bool staged;              /* cuBLAS would stage it (not read in place) */
  const HInstr *src;        /* the entry value it is, in the operands' type: its tiles are
                               copied by cp.async where the address allows (NULL: generated) */
  int nleaf;                /* entry values of its dims, read by vector accesses */
  const HInstr *leaf[GM_MAX_LEAVES];
  /* broadcasts in its expression not reading along k (per-column scales): generated once */
  int ninv;
  const HInstr *inv[GM_MAX_INV];
} GmSide;

typedef struct GmPlan {
  const HInstr *dot, *root;
  GmSide s[2];                   /* lhs (rows m), rhs (columns n) */
  DType ty;                      /* the operands' 16-bit type */
  int64_t M, N, K;               /* sizes */
  int tm, wm;                    /* m16 tiles per warp, warps along m */
  int64_t threads, stage;        /* block size; bytes of a stage */
  int64_t resident;              /* blocks resident per SM (estimated) */
  double est;                    /* estimated seconds */
  int64_t mt, nt, nsplit, chunk; /* row and column tiles, splits of K, k per split */
} GmPlan;

/* ------------------------------------------------------------------ matching */

/* Side j of the dot with tile extent T; false when its minor dim is neither its contracting
 * dim nor its last free one, or not a multiple of 8 (chunks). */
static bool gm_side(GmSide *s, const HInstr *dot, int j, int64_t T) {
  s->x = dot->ops[j];
  cuda_dot_side(dot, j, &s->d);
  const Shape *sh = &s->x->shape;
  for (int i = 0; i < s->d.nf; i++)
    s->fe[i] = sh->dims[s->d.f[i]];
  s->T = T;
  int minor = sh->rank - 1;
  s->kminor = s->d.c[0] == minor;
  if (!s->kminor && (s->d.nf == 0 || s->d.f[s->d.nf - 1] != minor)) return false;
  s->nch = s->kminor ? GM_BK / 8 : T / 8;
  return sh->dims[minor] % 8 == 0;
}

/* The broadcasts x's value reads at x's own index through elementwise ops, whose operand has
 * no contracting dim (dim c of x): their values do not change along k. */
static void gm_invariants(GmSide *s, const HInstr *x, int c, int depth) {
  if (depth > 8 || s->ninv == GM_MAX_INV || !hlo_shape_same_dims(&x->shape, &s->x->shape)) return;
  if (x->op == OP_BROADCAST) {
    for (int i = 0; i < s->ninv; i++)
      if (s->inv[i] == x) return;
    if (!hlo_ilist_has(&x->dims, c)) s->inv[s->ninv++] = x;
    return;
  }
  if (!(hlo_op_flags(x->op) & OPF_ELEM)) return;
  for (int j = 0; j < x->nops; j++)
    gm_invariants(s, x->ops[j], c, depth + 1);
}

/* Bytes of side s's leaves. */
static double gm_leaf_bytes(const GmSide *s) {
  double b = 0;
  for (int l = 0; l < s->nleaf; l++)
    b += (double)hlo_shape_bytes(&s->leaf[l]->shape);
  return b;
}

/* Row tiles by M: 128 rows on 8 warps, else 64, 32 or 16 on 4; the blocks resident per SM
 * (by their registers: ~128 a thread for four m16 tiles a warp, under 100 for fewer). */
static void gm_shape(GmPlan *p) {
  p->tm = p->M > 32 ? 4 : p->M > 16 ? 2 : 1;
  p->wm = p->M > 64 ? 2 : 1;
  p->threads = 32 * GM_WN * p->wm;
  p->resident = 65536 / (p->threads * (p->tm == 4 ? 128 : 100));
}

/* The estimated time with n splits of K: the tensor-core work at GM_RATE stretched by the last
 * wave's idle slots, or the leaves' reading at HBM's rate, slower with fewer than two blocks
 * per SM in flight; plus writing and reading the f32 partials. */
static double gm_time(const GmPlan *p, int64_t n) {
  double tiles = (double)(p->mt * p->nt), slots = (double)(CU_SMS * p->resident);
  double padded = 2.0 * (double)(p->mt * p->s[0].T) * (double)(p->nt * GM_BN) * (double)p->K;
  double read = gm_leaf_bytes(&p->s[0]) + gm_leaf_bytes(&p->s[1]);
  double blocks = tiles * (double)n, waves = ceil(blocks / slots);
  double comp = padded / GM_RATE * waves * slots / blocks;
  double mem = read / GM_HBM_BW * (blocks < 2 * CU_SMS ? 2 * CU_SMS / blocks : 1);
  double part = n > 1 ? (double)n * (double)(p->M * p->N) * 8 / GM_HBM_BW : 0;
  return (comp > mem ? comp : mem) + part;
}

/* Splits of K: the count of least estimated time, each split at least GM_MIN_SPLIT k. */
static void gm_splits(GmPlan *p) {
  int64_t steps = (p->K + GM_BK - 1) / GM_BK, cap = p->K / GM_MIN_SPLIT, best = 1;
  for (int64_t n = 2; n <= cap && n <= 64; n++)
    if (gm_time(p, n) < gm_time(p, best)) best = n;
  p->chunk = (steps + best - 1) / best * GM_BK;
  p->nsplit = (p->K + p->chunk - 1) / p->chunk;
  p->est = gm_time(p, p->nsplit);
}

/* Whether this kernel is estimated faster than staging the prologue's operands for cuBLAS:
 * staging reads the leaves and writes the operand, cuBLAS computes or reads both operands. */
static bool gm_faster(const GmPlan *p) {
  double flops = 2.0 * (double)p->M * (double)p->N * (double)p->K, stage = 0, read = 0;
  for (int j = 0; j < 2; j++) {
    double own = (double)hlo_shape_bytes(&p->s[j].x->shape);
    read += own;
    if (p->s[j].staged) stage += (gm_leaf_bytes(&p->s[j]) + own) / GM_HBM_BW;
  }
  double gemm =
      flops / GM_CUBLAS_RATE > read / GM_HBM_BW ? flops / GM_CUBLAS_RATE : read / GM_HBM_BW;
  return p->est < stage + gemm;
}

/* How side s is read: copied (an entry value of the operands' type) or generated (its leaves,
 * its invariants), chunks per thread; whether cuBLAS would stage it (a large prologue). */
static bool gm_side_reads(CudaCg *cc, const HInstr *in, const GmPlan *p, GmSide *s) {
  s->per = (int)((s->T * GM_BK / 8 + p->threads - 1) / p->threads);
  s->nleaf = cuda_vec_leaves(cc, in, &s->x->shape, s->leaf, GM_MAX_LEAVES);
  gm_invariants(s, s->x, (int)s->d.c[0], 0);
  const HInstr *d = cuda_direct_value(in, s->x);
  CuPtr ptr;
  if (d && d->shape.dt == p->ty && hlo_shape_same_dims(&d->shape, &s->x->shape) &&
      cuda_ptr_of(cc, d, &ptr))
    s->src = d;
  s->staged = !d;
  return s->staged && hlo_shape_elems(&s->x->shape) >= GM_MIN_ELEMS;
}

static bool gm_match(CudaCg *cc, const HInstr *in, GmPlan *p) {
  memset(p, 0, sizeof *p);
  if (cc->o->gemm_prologues == CUDA_PROLOGUES_STAGED || cc->o->no_cublas) return false;
  const HInstr *dot = in->op == OP_FUSION ? gen_fusion_hero(in) : NULL;
  if (!dot || dot->op != OP_DOT || dot->nops != 2 || in->shape.dt == DT_TUPLE) return false;
  p->dot = dot, p->root = in->calls[0]->root;
  DType t = dot->ops[0]->shape.dt, rt = dot->shape.dt;
  if ((t != DT_BF16 && t != DT_F16) || dot->ops[1]->shape.dt != t ||
      (rt != t && rt != DT_F32 && rt != DT_BF16 && rt != DT_F16))
    return false;
  p->ty = t;
  DotSide l;
  cuda_dot_side(dot, 0, &l);
  p->M = l.F;
  gm_shape(p);
  if (!gm_side(&p->s[0], dot, 0, 16 * p->tm * p->wm) || !gm_side(&p->s[1], dot, 1, GM_BN))
    return false;
  const DotSide *L = &p->s[0].d, *R = &p->s[1].d;
  p->N = R->F, p->K = L->K;
  if (L->nb || L->nc != 1 || R->nc != 1 || p->K < GM_BK || p->N < 8 || p->M < 1) return false;
  HArena *a = cc->cg.scratch;
  const HComp *c = in->calls[0];
  if (!cuda_dot_epi_ok(a, c, dot) || !cuda_dot_operands_ok(a, c, dot->ops[1], dot->ops[0]) ||
      !cuda_dot_operands_ok(a, c, dot->ops[0], dot->ops[1]))
    return false;
  bool any = false;
  for (int j = 0; j < 2; j++)
    any = gm_side_reads(cc, in, p, &p->s[j]) || any;
  if (!any) return false; /* cuBLAS reads both in place */
  p->s[1].off = p->s[0].T * GM_BK * 2;
  p->stage = (p->s[0].T + p->s[1].T) * GM_BK * 2;
  p->mt = (p->M + p->s[0].T - 1) / p->s[0].T;
  p->nt = (p->N + GM_BN - 1) / GM_BN;
  gm_splits(p);
  return cc->o->gemm_prologues == CUDA_PROLOGUES_FUSED || gm_faster(p);
}

/* ------------------------------------------------------------------ the kernel */

typedef struct GmThread {
  LLVMValueRef tid, lane, g, q; /* thread, lane, the lane's group (row) and quad place */
  LLVMValueRef wmi, wni;        /* the warp's place along m and n */
  LLVMValueRef f0[2];           /* the block's first row and column */
  LLVMValueRef kfirst, nk;      /* the split's first k and its tiles */
  LLVMValueRef smem;            /* the stages (i8, shared) */
  LLVMValueRef acc[4][4][4];    /* f32 sums (allocas): [m16 tile][n8 tile][element] */
  LLVMValueRef ring[GM_AHEAD][2][GM_MAX_PER][GM_MAX_LEAVES]; /* leaves' vectors ahead */
  LLVMValueRef inv[2][GM_MAX_PER][GM_MAX_INV][8];            /* the invariants' values (allocas) */
  bool vec;                                                  /* this copy reads vectors */
} GmThread;

typedef LLVMValueRef GmVals[2][GM_MAX_PER][GM_MAX_LEAVES]; /* a tile's leaf vectors */

static LLVMValueRef gm_add(GenKern *k, LLVMValueRef a, int64_t b) {
  return b ? LLVMBuildNSWAdd(k->B, a, gen_i64(k, b), "") : a;
}

static LLVMValueRef gm_mul(GenKern *k, LLVMValueRef a, int64_t b) {
  return LLVMBuildNSWMul(k->B, a, gen_i64(k, b), "");
}

static LLVMValueRef gm_byte(GenKern *k, LLVMValueRef p, LLVMValueRef off) {
  return LLVMBuildInBoundsGEP2(k->B, k->cg->i8, p, &off, 1, "");
}

/* Byte offset of chunk c of shared row r in side s's tile: the chunk xor'ed with the row's
 * place among the eight rows one ldmatrix reads (rows of fewer than 8 chunks share 128 bytes:
 * their group's place). */
static LLVMValueRef gm_swz(GenKern *k, const GmSide *s, LLVMValueRef r, LLVMValueRef c) {
  LLVMBuilderRef B = k->B;
  int64_t span = s->nch >= 8 ? 1 : 8 / s->nch, m = (s->nch < 8 ? s->nch : 8) - 1;
  LLVMValueRef x = LLVMBuildUDiv(B, r, gen_i64(k, span), "");
  x = LLVMBuildXor(B, c, LLVMBuildAnd(B, x, gen_i64(k, m), ""), "");
  return gm_add(k, gm_mul(k, cuda_lin(k, r, s->nch, x), 16), s->off);
}

/* Stage x % GM_STAGES's base. */
static LLVMValueRef gm_stage(GenKern *k, const GmPlan *p, const GmThread *t, LLVMValueRef x) {
  LLVMValueRef r = LLVMBuildURem(k->B, x, gen_i64(k, GM_STAGES), "");
  return gm_byte(k, t->smem, gm_mul(k, r, p->stage));
}

/* Whether side s's tiles are copied by cp.async in this copy of the loop. */
static bool gm_async(const GmPlan *p, const GmThread *t, int s) { return t->vec && p->s[s].src; }

typedef struct GmChunk {
  LLVMValueRef idx[8][HLO_MAX_RANK]; /* its elements' operand indices (clamped in bounds) */
  LLVMValueRef valid;                /* i1: its k is below K */
  LLVMValueRef at;                   /* byte offset in a stage */
  LLVMValueRef exists;               /* i1: the tile has it (NULL: always) */
} GmChunk;

/* Chunk i of the thread in side s's tile number kt of the split. */
static void gm_chunk(GenKern *k, const GmPlan *p, const GmThread *t, int s, int i, LLVMValueRef kt,
                     GmChunk *ch) {
  LLVMBuilderRef B = k->B;
  const GmSide *sd = &p->s[s];
  int64_t chunks = sd->T * GM_BK / 8;
  LLVMValueRef u = gm_add(k, t->tid, i * p->threads);
  ch->exists = (i + 1) * p->threads > chunks
                   ? LLVMBuildICmp(B, LLVMIntSLT, u, gen_i64(k, chunks), "")
                   : NULL;
  if (ch->exists) u = gen_smin(k, u, gen_i64(k, chunks - 1));
  LLVMValueRef r = LLVMBuildUDiv(B, u, gen_i64(k, sd->nch), "");
  LLVMValueRef c = LLVMBuildURem(B, u, gen_i64(k, sd->nch), "");
  LLVMValueRef k0 = cuda_lin(k, kt, GM_BK, t->kfirst), f, kk;
  if (sd->kminor)
    f = LLVMBuildNSWAdd(B, t->f0[s], r, ""), kk = LLVMBuildNSWAdd(B, k0, gm_mul(k, c, 8), "");
  else
    kk = LLVMBuildNSWAdd(B, k0, r, ""), f = LLVMBuildNSWAdd(B, t->f0[s], gm_mul(k, c, 8), "");
  ch->valid = LLVMBuildICmp(B, LLVMIntSLT, kk, gen_i64(k, p->K), "");
  f = gen_smin(k, f, gen_i64(k, sd->d.F - (sd->kminor ? 1 : 8)));
  kk = gen_smin(k, kk, gen_i64(k, p->K - (sd->kminor ? 8 : 1)));
  ch->at = gm_swz(k, sd, r, c);
  LLVMValueRef fi[HLO_MAX_RANK];
  gen_delin(k, f, sd->fe, sd->d.nf, fi);
  int rank = sd->x->shape.rank;
  for (int d = 0; d < rank; d++)
    ch->idx[0][d] = gen_i64(k, 0);
  for (int d = 0; d < sd->d.nf; d++)
    ch->idx[0][sd->d.f[d]] = fi[d];
  ch->idx[0][sd->d.c[0]] = kk;
  cuda_vec_indices(k, ch->idx, rank, 8);
}

/* The leaves' vectors of the thread's chunks of tile kt (the split's last one past it). */
static void gm_fetch(GenKern *k, const GmPlan *p, const GmThread *t, LLVMValueRef kt, GmVals v) {
  if (!t->vec) return;
  kt = gen_smin(k, kt, LLVMBuildNSWSub(k->B, t->nk, gen_i64(k, 1), ""));
  for (int s = 0; s < 2; s++)
    for (int i = 0; i < p->s[s].per && !gm_async(p, t, s); i++) {
      GmChunk ch;
      gm_chunk(k, p, t, s, i, kt, &ch);
      for (int l = 0; l < p->s[s].nleaf; l++)
        v[s][i][l] = cuda_vec_load(k, p->s[s].leaf[l], ch.idx[0], 8);
    }
}

/* The thread's chunks of tile kt generated from the leaves' vectors v (through the operands'
 * expressions) and stored into the stage at base; zeros past K. */
static void gm_put(GenKern *k, const GmPlan *p, const GmThread *t, LLVMValueRef kt,
                   LLVMValueRef base, GmVals v) {
  LLVMBuilderRef B = k->B;
  LLVMTypeRef v4 = LLVMVectorType(k->cg->i32, 4);
  for (int s = 0; s < 2 && !k->failed; s++)
    for (int i = 0; i < p->s[s].per && !k->failed && !gm_async(p, t, s); i++) {
      const GmSide *sd = &p->s[s];
      GmChunk ch;
      gm_chunk(k, p, t, s, i, kt, &ch);
      int mark = k->ncache;
      LLVMBasicBlockRef join = ch.exists ? cuda_if(k, ch.exists, &mark) : NULL;
      for (int v2 = 0; v2 < sd->ninv; v2++)
        for (int j = 0; j < 8; j++) {
          LLVMValueRef a = t->inv[s][i][v2][j];
          gen_cache_add(k, sd->inv[v2], sd->inv[v2]->shape.rank, ch.idx[j],
                        LLVMBuildLoad2(B, LLVMGetAllocatedType(a), a, ""));
        }
      for (int l = 0; t->vec && l < sd->nleaf; l++)
        cuda_vec_cache(k, sd->leaf[l], v[s][i][l], ch.idx, 8);
      LLVMValueRef e[8], w = LLVMGetUndef(v4);
      for (int j = 0; j < 8 && !k->failed; j++)
        e[j] = gen_value(k, sd->x, ch.idx[j]);
      k->ncache = mark;
      if (k->failed) return;
      for (int h = 0; h < 4; h++)
        w = LLVMBuildInsertElement(B, w, cuda_pack16(k, e[2 * h], e[2 * h + 1]),
                                   LLVMConstInt(k->cg->i32, (unsigned)h, 0), "");
      if (p->K % GM_BK) w = LLVMBuildSelect(B, ch.valid, w, LLVMConstNull(v4), "");
      LLVMSetAlignment(LLVMBuildStore(B, w, gm_byte(k, base, ch.at)), 16);
      if (join) cuda_endif(k, join, mark);
    }
}

/* The lane's ldmatrix address for the x4 load of 16 free elements from fbase by 16 k from
 * 16 ks of side s's tile at stage base. The lhs's four matrices are (rows 0-7, k 0-7),
 * (8-15, 0-7), (0-7, 8-15), (8-15, 8-15): an A fragment; the rhs's (columns 0-7, k 0-7),
 * (0-7, 8-15), (8-15, 0-7), (8-15, 8-15): the B fragments of two n8 tiles. */
static LLVMValueRef gm_frag(GenKern *k, const GmPlan *p, const GmThread *t, int s,
                            LLVMValueRef base, int ks, LLVMValueRef fbase) {
  LLVMBuilderRef B = k->B;
  const GmSide *sd = &p->s[s];
  LLVMValueRef j = LLVMBuildLShr(B, t->lane, gen_i64(k, 3), "");
  LLVMValueRef r8 = LLVMBuildAnd(B, t->lane, gen_i64(k, 7), "");
  LLVMValueRef lo = LLVMBuildAnd(B, j, gen_i64(k, 1), ""),
               hi = LLVMBuildLShr(B, j, gen_i64(k, 1), "");
  LLVMValueRef fo = s == 0 ? lo : hi, ko = s == 0 ? hi : lo, row, c;
  if (sd->kminor) {
    row = LLVMBuildNSWAdd(B, fbase, LLVMBuildNSWAdd(B, gm_mul(k, fo, 8), r8, ""), "");
    c = gm_add(k, ko, 2 * ks);
  } else {
    row = gm_add(k, LLVMBuildNSWAdd(B, gm_mul(k, ko, 8), r8, ""), 16 * ks);
    c = LLVMBuildNSWAdd(B, LLVMBuildUDiv(B, fbase, gen_i64(k, 8), ""), fo, "");
  }
  return gm_byte(k, base, gm_swz(k, sd, row, c));
}

/* The warp's products of the tile at stage base into its sums. */
static void gm_compute(GenKern *k, const GmPlan *p, const GmThread *t, LLVMValueRef base) {
  LLVMBuilderRef B = k->B;
  LLVMValueRef acc[4][4][4];
  for (int i = 0; i < p->tm; i++)
    for (int j = 0; j < 4; j++)
      for (int e = 0; e < 4; e++)
        acc[i][j][e] = LLVMBuildLoad2(B, k->cg->f32, t->acc[i][j][e], "");
  LLVMValueRef mrow = gm_mul(k, t->wmi, 16 * p->tm), ncol = gm_mul(k, t->wni, 32);
  for (int ks = 0; ks < GM_BK / 16; ks++) {
    LLVMValueRef a[4][4], b[4][2], r[4];
    for (int i = 0; i < p->tm; i++)
      cuda_ldsm(k, gm_frag(k, p, t, 0, base, ks, gm_add(k, mrow, 16 * i)), !p->s[0].kminor, 4,
                a[i]);
    for (int h = 0; h < 2; h++) {
      cuda_ldsm(k, gm_frag(k, p, t, 1, base, ks, gm_add(k, ncol, 16 * h)), !p->s[1].kminor, 4, r);
      b[2 * h][0] = r[0], b[2 * h][1] = r[1], b[2 * h + 1][0] = r[2], b[2 * h + 1][1] = r[3];
    }
    for (int i = 0; i < p->tm; i++)
      for (int j = 0; j < 4; j++)
        cuda_mma(k, p->ty, a[i], b[j], acc[i][j]);
  }
  for (int i = 0; i < p->tm; i++)
    for (int j = 0; j < 4; j++)
      for (int e = 0; e < 4; e++)
        LLVMBuildStore(B, acc[i][j][e], t->acc[i][j][e]);
}

/* The ring slot's vectors stored from v, or loaded into it. */
static void gm_ring_io(GenKern *k, const GmPlan *p, const GmThread *t,
                       LLVMValueRef (*ring)[GM_MAX_PER][GM_MAX_LEAVES], GmVals v, bool store) {
  for (int s = 0; s < 2; s++)
    for (int i = 0; i < p->s[s].per && !gm_async(p, t, s); i++)
      for (int l = 0; l < p->s[s].nleaf; l++) {
        if (store)
          LLVMBuildStore(k->B, v[s][i][l], ring[s][i][l]);
        else
          v[s][i][l] = LLVMBuildLoad2(k->B, LLVMGetAllocatedType(ring[s][i][l]), ring[s][i][l], "");
      }
}

/* The cp.async copies of the thread's chunks of tile kt of the copied sides into the stage at
 * base (zeros past K), one commit group. */
static void gm_copy(GenKern *k, const GmPlan *p, const GmThread *t, LLVMValueRef kt,
                    LLVMValueRef base) {
  LLVMBuilderRef B = k->B;
  LLVMTypeRef g1 = LLVMPointerTypeInContext(k->cg->C, 1);
  for (int s = 0; s < 2; s++)
    for (int i = 0; i < p->s[s].per && gm_async(p, t, s); i++) {
      const HInstr *x = p->s[s].src;
      GmChunk ch;
      gm_chunk(k, p, t, s, i, kt, &ch);
      int mark;
      LLVMBasicBlockRef join = ch.exists ? cuda_if(k, ch.exists, &mark) : NULL;
      LLVMValueRef lin = gen_linear(k, &x->shape, ch.idx[0]);
      LLVMValueRef src = LLVMBuildInBoundsGEP2(B, gen_mem_type(k->cg, x->shape.dt),
                                               k->cg->buffer_fn(k, x), &lin, 1, "");
      LLVMValueRef n = LLVMBuildSelect(B, ch.valid, LLVMConstInt(k->cg->i32, 16, 0),
                                       LLVMConstInt(k->cg->i32, 0, 0), "");
      LLVMValueRef args[3] = {gm_byte(k, base, ch.at), LLVMBuildAddrSpaceCast(B, src, g1, ""), n};
      cuda_intrinsic(k, "llvm.nvvm.cp.async.cg.shared.global.16.s", NULL, args, 3);
      if (join) cuda_endif(k, join, mark);
    }
  cuda_intrinsic(k, "llvm.nvvm.cp.async.commit.group", NULL, NULL, 0);
}

/* Wait until at most n of the thread's copy groups are pending. */
static void gm_wait(GenKern *k, int n) {
  LLVMValueRef a = LLVMConstInt(k->cg->i32, (unsigned)n, 0);
  cuda_intrinsic(k, "llvm.nvvm.cp.async.wait.group", NULL, &a, 1);
}

/* The invariants' values at the thread's chunks, generated once (at the split's first tile). */
static void gm_hoist(GenKern *k, const GmPlan *p, GmThread *t) {
  for (int s = 0; s < 2 && !k->failed; s++)
    for (int i = 0; i < p->s[s].per && p->s[s].ninv; i++) {
      GmChunk ch;
      gm_chunk(k, p, t, s, i, gen_i64(k, 0), &ch);
      for (int v = 0; v < p->s[s].ninv && !k->failed; v++)
        for (int j = 0; j < 8 && !k->failed; j++) {
          int mark = k->ncache;
          LLVMValueRef x = gen_value(k, p->s[s].inv[v], ch.idx[j]);
          k->ncache = mark;
          if (!x) return;
          t->inv[s][i][v][j] = gen_alloca(k, LLVMTypeOf(x));
          LLVMBuildStore(k->B, x, t->inv[s][i][v][j]);
        }
    }
}

/* The split's tiles, GM_STAGES in shared memory: per tile kt, the copied sides' tile kt + 2
 * issued, the generated sides' leaves of tile kt + GM_AHEAD + 1 loaded, tile kt multiplied,
 * tile kt + 1 generated from the ring's oldest slot and stored, the ring shifted. */
static void gm_loop(GenKern *k, const GmPlan *p, GmThread *t) {
  GmVals v = {{{0}}}, old = {{{0}}};
  LLVMValueRef zero = gen_i64(k, 0), one = gen_i64(k, 1);
  int mark = k->ncache;
  gm_hoist(k, p, t);
  if (k->failed) return;
  gm_copy(k, p, t, zero, gm_stage(k, p, t, zero));
  gm_copy(k, p, t, one, gm_stage(k, p, t, one));
  gm_fetch(k, p, t, zero, v);
  gm_put(k, p, t, zero, gm_stage(k, p, t, zero), v);
  for (int a = 0; a < GM_AHEAD && t->vec; a++) {
    gm_fetch(k, p, t, gen_i64(k, a + 1), v);
    gm_ring_io(k, p, t, t->ring[a], v, true);
  }
  gm_wait(k, 1);
  cuda_barrier(k);
  GenLoop l;
  LLVMValueRef kt = gen_loop_open(k, &l, zero, t->nk);
  LLVMValueRef next = gm_add(k, kt, 1), after = gm_add(k, kt, 2);
  gm_copy(k, p, t, after, gm_stage(k, p, t, after));
  gm_fetch(k, p, t, gm_add(k, kt, GM_AHEAD + 1), v);
  gm_compute(k, p, t, gm_stage(k, p, t, kt));
  if (t->vec) gm_ring_io(k, p, t, t->ring[0], old, false);
  gm_put(k, p, t, next, gm_stage(k, p, t, next), old);
  for (int a = 0; a + 1 < GM_AHEAD && t->vec; a++) {
    GmVals x = {{{0}}};
    gm_ring_io(k, p, t, t->ring[a + 1], x, false);
    gm_ring_io(k, p, t, t->ring[a], x, true);
  }
  if (t->vec) gm_ring_io(k, p, t, t->ring[GM_AHEAD - 1], v, true);
  gm_wait(k, 1);
  cuda_barrier(k);
  gen_loop_close(k, &l);
  gm_wait(k, 0);
  k->ncache = mark;
}

/* The dot's index of row m, column n: the lhs's free dims, then the rhs's. */
static void gm_dot_idx(GenKern *k, const GmPlan *p, LLVMValueRef m, LLVMValueRef n,
                       LLVMValueRef *idx) {
  gen_delin(k, m, p->s[0].fe, p->s[0].d.nf, idx);
  gen_delin(k, n, p->s[1].fe, p->s[1].d.nf, idx + p->s[0].d.nf);
}

/* The thread's sums written (one split: through the epilogue; else as f32 partials). */
static void gm_write(GenKern *k, const GmPlan *p, HInstr *in, const GmThread *t, LLVMValueRef part,
                     LLVMValueRef z) {
  LLVMBuilderRef B = k->B;
  LLVMValueRef r0 = LLVMBuildNSWAdd(B, t->f0[0], cuda_lin(k, t->wmi, 16 * p->tm, t->g), "");
  LLVMValueRef c0 = LLVMBuildNSWAdd(B, t->f0[1], cuda_lin(k, t->wni, 32, gm_mul(k, t->q, 2)), "");
  for (int i = 0; i < p->tm && !k->failed; i++)
    for (int j = 0; j < 4 && !k->failed; j++)
      for (int e = 0; e < 4 && !k->failed; e++) {
        LLVMValueRef m = gm_add(k, r0, 16 * i + 8 * (e / 2)), n = gm_add(k, c0, 8 * j + e % 2);
        LLVMValueRef ok = LLVMBuildAnd(B, LLVMBuildICmp(B, LLVMIntSLT, m, gen_i64(k, p->M), ""),
                                       LLVMBuildICmp(B, LLVMIntSLT, n, gen_i64(k, p->N), ""), "");
        int mark;
        LLVMBasicBlockRef join = cuda_if(k, ok, &mark);
        LLVMValueRef idx[HLO_MAX_RANK], sum = LLVMBuildLoad2(B, k->cg->f32, t->acc[i][j][e], "");
        gm_dot_idx(k, p, m, n, idx);
        cuda_dot_store(k, in, p->dot, p->root, part, z, idx, sum);
        cuda_endif(k, join, mark);
      }
}

/* The thread's place, its zeroed sums, the ring, the split's tiles. */
static void gm_thread(GenKern *k, CuStep *st, const GmPlan *p, GmThread *t) {
  LLVMBuilderRef B = k->B;
  memset(t, 0, sizeof *t);
  t->tid = cuda_sreg(k, "llvm.nvvm.read.ptx.sreg.tid.x");
  LLVMValueRef bid = cuda_sreg(k, "llvm.nvvm.read.ptx.sreg.ctaid.x");
  t->lane = LLVMBuildAnd(B, t->tid, gen_i64(k, 31), "");
  t->g = LLVMBuildLShr(B, t->lane, gen_i64(k, 2), "");
  t->q = LLVMBuildAnd(B, t->lane, gen_i64(k, 3), "");
  LLVMValueRef warp = LLVMBuildLShr(B, t->tid, gen_i64(k, 5), "");
  t->wmi = LLVMBuildUDiv(B, warp, gen_i64(k, GM_WN), "");
  t->wni = LLVMBuildURem(B, warp, gen_i64(k, GM_WN), "");
  /* neighbouring blocks: the row tiles of one column tile (the rhs's tile shared in L2) */
  LLVMValueRef z = LLVMBuildURem(B, bid, gen_i64(k, p->nsplit), "");
  LLVMValueRef rest = LLVMBuildUDiv(B, bid, gen_i64(k, p->nsplit), "");
  t->f0[0] = gm_mul(k, LLVMBuildURem(B, rest, gen_i64(k, p->mt), ""), p->s[0].T);
  t->f0[1] = gm_mul(k, LLVMBuildUDiv(B, rest, gen_i64(k, p->mt), ""), GM_BN);
  t->kfirst = gm_mul(k, z, p->chunk);
  LLVMValueRef kend = gen_smin(k, gm_add(k, t->kfirst, p->chunk), gen_i64(k, p->K));
  LLVMValueRef span = LLVMBuildNSWSub(B, kend, t->kfirst, "");
  t->nk = LLVMBuildUDiv(B, gm_add(k, span, GM_BK - 1), gen_i64(k, GM_BK), "");
  LLVMValueRef smem = cuda_smem(k, st, k->cg->i8, GM_STAGES * p->stage);
  LLVMValueRef zero[2] = {gen_i64(k, 0), gen_i64(k, 0)};
  t->smem = LLVMBuildInBoundsGEP2(B, LLVMGlobalGetValueType(smem), smem, zero, 2, "");
  for (int i = 0; i < p->tm; i++)
    for (int j = 0; j < 4; j++)
      for (int e = 0; e < 4; e++) {
        t->acc[i][j][e] = gen_alloca(k, k->cg->f32);
        LLVMBuildStore(B, LLVMConstReal(k->cg->f32, 0), t->acc[i][j][e]);
      }
  for (int a = 0; a < GM_AHEAD; a++)
    for (int s = 0; s < 2; s++)
      for (int i = 0; i < p->s[s].per; i++)
        for (int l = 0; l < p->s[s].nleaf; l++) {
          LLVMTypeRef et = gen_mem_type(k->cg, p->s[s].leaf[l]->shape.dt);
          t->ring[a][s][i][l] = gen_alloca(k, LLVMVectorType(et, 8));
        }
}

/* i1: every leaf's and copied side's address allows its vector accesses. */
static LLVMValueRef gm_aligned(GenKern *k, const GmPlan *p) {
  LLVMValueRef ok = LLVMConstInt(k->cg->i1, 1, 0);
  for (int s = 0; s < 2; s++) {
    ok = LLVMBuildAnd(k->B, ok, cuda_vec_aligned(k, p->s[s].leaf, p->s[s].nleaf, 8), "");
    if (p->s[s].src) ok = LLVMBuildAnd(k->B, ok, cuda_vec_aligned(k, &p->s[s].src, 1, 8), "");
  }
  return ok;
}

typedef struct GmLoops {
  const GmPlan *p;
  GmThread *t;
} GmLoops;

/* The k loop of the copy that reads vectors (vec) or elements. */
static void gm_loops(GenKern *k, bool vec, void *ctx) {
  GmLoops *c = ctx;
  c->t->vec = vec;
  gm_loop(k, c->p, c->t);
}

static bool gm_main(CudaCg *cc, HInstr *in, const GmPlan *p, CuPtr pp) {
  CuStep *st;
  LLVMValueRef part = NULL;
  bool split = p->nsplit > 1;
  GenKern *k = cuda_kbegin(cc, in, split ? "gemm-mma-split" : "gemm-mma", split, &pp, &part, &st);
  LLVMBuilderRef B = k->B;
  cuda_kbind_fusion(k, in);
  st->block = p->threads;
  st->grid = p->mt * p->nt * p->nsplit;
  cuda_launch_bounds(k, p->threads, (int)p->resident);
  GmThread t;
  gm_thread(k, st, p, &t);
  GmLoops c = {p, &t};
  bool any = p->s[0].nleaf + p->s[1].nleaf > 0 || p->s[0].src || p->s[1].src;
  cuda_vec_split(k, any ? gm_aligned(k, p) : NULL, gm_loops, &c);
  LLVMValueRef z =
      LLVMBuildURem(B, cuda_sreg(k, "llvm.nvvm.read.ptx.sreg.ctaid.x"), gen_i64(k, p->nsplit), "");
  gm_write(k, p, in, &t, part, z);
  return cuda_kend(k);
}

bool cuda_gemm_mma(CudaCg *cc, HInstr *in, bool *taken) {
  GmPlan p;
  *taken = gm_match(cc, in, &p);
  if (!*taken) return true;
  CuPtr pp = {0}; /* a split's f32 partials */
  if (p.nsplit > 1) pp = cuda_scratch(cc, p.nsplit * p.M * p.N * 4);
  if (!gm_main(cc, in, &p, pp)) return false;
  return p.nsplit == 1 || cuda_dot_finish(cc, in, p.dot, p.root, p.nsplit, pp, "gemm-mma-finish");
}
