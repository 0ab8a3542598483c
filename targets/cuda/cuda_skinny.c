/* targets/cuda/cuda_skinny.c: dots of a few rows (decode steps, matrix-vector products) as one
 * kernel that reads the weight once, at the memory's rate, with its prologue fused.
 *
 * A dot whose one operand (S) has at most SK_ROWS free elements (SK_MMA_ROWS when both are
 * 16-bit and W is made by a prologue: two n8 tiles of the tensor cores) and whose other (W, the
 * weight) has many, one contracting dim each, no batch dims, W's minor dim free: out[m, n] = sum_k
 * S[m, k] W[k, n]. cuBLAS runs such products below the memory's rate, and a weight made by a
 * prologue (a dequantized s8 weight: convert and scale) would first be written out in full; here
 * W's value is generated where it is read. A block of SK_THREADS threads takes SK_TN columns and
 * one split of K: thread t owns SK_V consecutive columns (SK_G groups) and one of SK_S slices of k
 * (k = k0 + slice, + SK_S, ...), SK_U steps a loop iteration. Every block operand of W's dims (the
 * s8 weight, a bf16 weight) is read SK_V elements in one vector access when its address is aligned
 * (tested at run time, else element loads) and entered in the elemental cache, so the prologue's
 * generator finds it there; the rest (per-column scales, S's row values) are element loads from L1.
 * Sums are f32 FMAs (S and W values converted from their types, W rounded as its prologue's ops
 * say). The slices meet through shuffles and shared memory; with one split the block then writes
 * the dot's value, rounded to its type, through the fusion's elementwise epilogue (the value
 * entered in the cache at its index); with several, each split writes f32 partials and a second
 * kernel sums them and writes. The split count fills the SMs (SK_WAVE blocks) while the partials
 * stay a small part of W's bytes. */
#include "cuda_impl.h"

#include <string.h>

#define SK_ROWS 8                /* free elements of S, at most (FMA) */
#define SK_MMA_ROWS 16           /* on the tensor cores: two n8 tiles of S's rows */
#define SK_V 8                   /* consecutive columns per thread */
#define SK_G 8                   /* column groups per block */
#define SK_TN (SK_G * SK_V)      /* columns per block */
#define SK_THREADS 256           /* threads per block */
#define SK_S (SK_THREADS / SK_G) /* k slices per block */
#define SK_U 4                   /* k steps of a slice per loop iteration */
#define SK_WAVE (2 * CU_SMS)     /* blocks wanted: two resident per SM */
#define SK_SPLIT 128             /* a split's k, a multiple of: SK_S * SK_U = 16 * warps */
#define SK_MMA_STRIDE 128        /* k between a warp's tensor-core steps (16 x 8 warps) */
#define SK_MIN_WEIGHT (1 << 18)  /* W elements, at least (smaller: cuBLAS's launch is cheap) */
#define SK_MAX_LEAVES 8          /* W-shaped operands read by vector accesses */
#define SK_PLAIN_MAX (8 << 20)   /* W elements, at most, of a 16-bit W read as it is */
#define SK_PLAIN_FMA_ROWS 2      /* rows of S of a wider W read as it is (one row: cuBLAS's GEMV) */

typedef struct SkPlan {
  const HInstr *dot, *root;     /* root: the fusion's root, or the dot */
  int s, w;                     /* operand numbers of S and W */
  DotSide S, W;                 /* their dims */
  int64_t se[HLO_MAX_RANK];     /* S's free dims' extents, in order (m's row-major digits) */
  int64_t we[HLO_MAX_RANK];     /* W's (n's) */
  int64_t M, N, K;              /* S's free, W's free and the contracting sizes */
  int64_t tiles, nsplit, chunk; /* column tiles, splits of K, k per split */
  bool mma;                     /* 16-bit S and W: products on the tensor cores */
  int nleaf;                    /* entry values of W's dims (vector accesses) */
  const HInstr *leaf[SK_MAX_LEAVES];
} SkPlan;

/* The n8 tiles of S's rows on the tensor cores: one up to 8 rows, else two. */
static int sk_mma_tiles(const SkPlan *p) { return p->M > SK_ROWS ? 2 : 1; }

/* The ops a fused operand may be made of: cheap per element (no reductions, no gathers). */
static bool sk_cheap(const HInstr *x) {
  HOp o = x->op;
  return o == OP_PARAMETER || o == OP_CONSTANT || o == OP_BROADCAST || o == OP_RESHAPE ||
         o == OP_BITCAST || o == OP_TRANSPOSE || o == OP_IOTA || o == OP_SLICE ||
         (hlo_op_flags(o) & OPF_ELEM) != 0;
}

/* Ops that select S's elements (a scan's step sliced out and concatenated with its state):
 * cheap on S's side, whose values every block computes again, not at W's index, which is read
 * by vector accesses. */
static bool sk_select(const HInstr *x) {
  HOp o = x->op;
  return o == OP_CONCATENATE || o == OP_DYNAMIC_SLICE || o == OP_PAD || o == OP_REVERSE;
}

/* Whether the fusion members S's and W's expressions (sop, wop) read are cheap per element, and
 * W's read everything of its own dims at its own index (elementwise ops, and broadcasts of
 * smaller operands), so that its vector accesses are W's rows. One walk from the users down
 * (operands precede their users in c->instrs): ANY marks what either reads, WIDX what W reads
 * at its own index (not below a broadcast). */
bool cuda_dot_operands_ok(HArena *a, const HComp *c, const HInstr *sop, const HInstr *wop) {
  enum { ANY = 1, WIDX = 2 };
  uint8_t *f = hlo_arena_alloc(a, (size_t)c->ninstrs);
  f[sop->idx] |= ANY;
  f[wop->idx] |= ANY | WIDX;
  const Shape *ws = &wop->shape;
  for (int i = c->ninstrs - 1; i >= 0; i--) {
    const HInstr *x = c->instrs[i];
    if (!f[i]) continue;
    if (!(sk_cheap(x) || (!(f[i] & WIDX) && sk_select(x))) || x->op == OP_DOT) return false;
    bool bc = x->op == OP_BROADCAST;
    if ((f[i] & WIDX) && bc && hlo_shape_elems(&x->ops[0]->shape) > hlo_shape_elems(ws) / 8)
      return false;
    if ((f[i] & WIDX) && hlo_shape_same_dims(&x->shape, ws) && !bc && x->op != OP_PARAMETER &&
        x->op != OP_CONSTANT && !(hlo_op_flags(x->op) & OPF_ELEM))
      return false;
    for (int j = 0; j < x->nops; j++)
      f[x->ops[j]->idx] |= ANY | (bc ? 0 : f[i] & WIDX);
  }
  return true;
}

/* Whether the fusion's root reads dot with every member on the way elementwise and of the dot's
 * dims (the dot's value is then needed at the output's own index only). */
bool cuda_dot_epi_ok(HArena *a, const HComp *c, const HInstr *dot) {
  bool *r = hlo_arena_alloc(a, (size_t)c->ninstrs);
  for (int i = 0; i < c->ninstrs; i++) {
    const HInstr *x = c->instrs[i];
    r[i] = x == dot;
    for (int j = 0; j < x->nops; j++)
      r[i] = r[i] || r[x->ops[j]->idx];
    if (r[i] && x != dot &&
        !((hlo_op_flags(x->op) & OPF_ELEM) && hlo_shape_same_dims(&x->shape, &dot->shape)))
      return false;
  }
  return r[c->root->idx];
}

static bool sk_type_ok(DType t) { return t == DT_F32 || t == DT_BF16 || t == DT_F16; }

/* The dot's dims as S and W: which operand is which, the sizes; false if not of the form. */
static bool sk_sides(SkPlan *p) {
  const HInstr *dot = p->dot;
  DotSide d[2];
  cuda_dot_side(dot, 0, &d[0]);
  cuda_dot_side(dot, 1, &d[1]);
  if (d[0].nb || d[0].nc != 1 || d[1].nc != 1) return false;
  p->s = d[0].F <= d[1].F ? 0 : 1;
  p->w = 1 - p->s;
  p->S = d[p->s], p->W = d[p->w];
  p->M = p->S.F, p->N = p->W.F, p->K = p->S.K;
  const Shape *ss = &dot->ops[p->s]->shape, *ws = &dot->ops[p->w]->shape;
  for (int i = 0; i < p->S.nf; i++)
    p->se[i] = ss->dims[p->S.f[i]];
  for (int i = 0; i < p->W.nf; i++)
    p->we[i] = ws->dims[p->W.f[i]];
  int minor = ws->rank - 1;
  return p->M <= SK_MMA_ROWS && p->N % SK_V == 0 && p->W.nf > 0 && p->W.f[p->W.nf - 1] == minor &&
         ws->dims[minor] % SK_V == 0 && p->K >= SK_S && p->N * p->K >= SK_MIN_WEIGHT &&
         p->N * p->K <= INT32_MAX * (int64_t)SK_V;
}

/* Whether in (a dot, or a fusion whose hero is one) is taken here, and its plan. */
static bool sk_match(CudaCg *cc, const HInstr *in, SkPlan *p) {
  memset(p, 0, sizeof *p);
  if (in->shape.dt == DT_TUPLE) return false;
  if (in->op == OP_DOT) {
    p->dot = p->root = in;
  } else {
    const HInstr *hero = in->op == OP_FUSION ? gen_fusion_hero(in) : NULL;
    if (!hero || hero->op != OP_DOT) return false;
    p->dot = hero, p->root = in->calls[0]->root;
    if (!cuda_dot_epi_ok(cc->cg.scratch, in->calls[0], hero)) return false;
  }
  const HInstr *dot = p->dot;
  if (!sk_type_ok(dot->shape.dt) || !sk_type_ok(dot->ops[0]->shape.dt) ||
      !sk_type_ok(dot->ops[1]->shape.dt) || !sk_sides(p))
    return false;
  const Shape *ws = &dot->ops[p->w]->shape;
  if (in != dot &&
      !cuda_dot_operands_ok(cc->cg.scratch, in->calls[0], dot->ops[p->s], dot->ops[p->w]))
    return false;
  /* the entry values read at W's index: W itself, or the fusion's operands of its dims */
  p->nleaf = cuda_vec_leaves(cc, in, ws, p->leaf, SK_MAX_LEAVES);
  DType st = dot->ops[p->s]->shape.dt;
  p->mma = st == dot->ops[p->w]->shape.dt && (st == DT_BF16 || st == DT_F16) && p->K % 16 == 0;
  if (!p->mma && p->M > SK_ROWS) return false;
  /* where cuBLAS reads W as it is, it wins on large weights (measured, docs/benchmarks.md);
   * more than 8 rows of such a W stay with it (not measured) */
  bool prologue = in != dot && dot->ops[p->w]->op != OP_PARAMETER;
  /* an S the fusion computes (a scan's concatenated input and state) would be staged for
   * cuBLAS by a kernel of its own: on a W of moderate size one kernel does all three steps */
  bool s_prologue = in != dot && dot->ops[p->s]->op != OP_PARAMETER && p->N * p->K <= SK_PLAIN_MAX;
  if (!prologue && !s_prologue &&
      (p->mma ? p->N * p->K > SK_PLAIN_MAX || p->M > SK_ROWS : p->M != SK_PLAIN_FMA_ROWS))
    return false;
  /* splits: SK_WAVE blocks, each split's k a multiple of SK_SPLIT, partials at most an eighth
   * of W's 2-byte elements */
  p->tiles = (p->N + SK_TN - 1) / SK_TN;
  int64_t step = SK_SPLIT, steps = (p->K + step - 1) / step;
  int64_t cap = p->K * 2 / (8 * 4 * p->M);
  p->nsplit = (SK_WAVE + p->tiles - 1) / p->tiles;
  if (p->nsplit > cap) p->nsplit = cap;
  if (p->nsplit > steps) p->nsplit = steps;
  if (p->nsplit < 1) p->nsplit = 1;
  p->chunk = (steps + p->nsplit - 1) / p->nsplit * step;
  p->nsplit = (p->K + p->chunk - 1) / p->chunk;
  return true;
}

/* ------------------------------------------------------------------ the kernel */

typedef struct SkThread {
  LLVMValueRef widx[HLO_MAX_RANK];          /* W's index of the thread's first column, no k */
  LLVMValueRef sidx[SK_ROWS][HLO_MAX_RANK]; /* S's index of each row (mma: the lane's two) */
  LLVMValueRef acc[SK_ROWS][SK_V]; /* f32 accumulators (allocas; mma: [4 * n8 tile + i][4]) */
  LLVMValueRef vec;                /* i1: the leaves' addresses allow vector access */
  LLVMValueRef live[2];            /* mma: i1, the lane's rows of S exist */
} SkThread;

/* W's index of column n0 + j at k (j < SK_V stays in the minor dim: SK_V divides it). */
static void sk_widx(GenKern *k, const SkPlan *p, const SkThread *t, LLVMValueRef kk, int j,
                    LLVMValueRef *idx) {
  const Shape *ws = &p->dot->ops[p->w]->shape;
  for (int d = 0; d < ws->rank; d++)
    idx[d] = t->widx[d];
  idx[p->W.c[0]] = kk;
  int minor = ws->rank - 1;
  if (j) idx[minor] = LLVMBuildNSWAdd(k->B, idx[minor], gen_i64(k, j), "");
}

/* The leaves' SK_V elements at k read by one vector access each, entered in the cache. */
static void sk_vector_leaves(GenKern *k, const SkPlan *p, LLVMValueRef (*idx)[HLO_MAX_RANK]) {
  for (int l = 0; l < p->nleaf; l++)
    cuda_vec_cache(k, p->leaf[l], cuda_vec_load(k, p->leaf[l], idx[0], SK_V), idx, SK_V);
}

/* S's value at row m (its index si, k left out) and k, as f32. */
static LLVMValueRef sk_s(GenKern *k, const SkPlan *p, const LLVMValueRef *si, LLVMValueRef kk) {
  const HInstr *sop = p->dot->ops[p->s];
  LLVMValueRef idx[HLO_MAX_RANK];
  memcpy(idx, si, sizeof idx);
  idx[p->S.c[0]] = kk;
  return gen_convert(k, gen_value(k, sop, idx), sop->shape.dt, DT_F32);
}

/* n FMA steps of the thread's slice from kbase (SK_S apart) into its accumulators. */
static void sk_steps(GenKern *k, const SkPlan *p, const SkThread *t, LLVMValueRef kbase, int n,
                     bool vec) {
  LLVMBuilderRef B = k->B;
  const HInstr *wop = p->dot->ops[p->w];
  LLVMValueRef widx[SK_U][SK_V][HLO_MAX_RANK], kk[SK_U];
  for (int u = 0; u < n; u++) {
    kk[u] = u ? LLVMBuildNSWAdd(B, kbase, gen_i64(k, u * SK_S), "") : kbase;
    for (int j = 0; j < SK_V; j++)
      sk_widx(k, p, t, kk[u], j, widx[u][j]);
    if (vec) sk_vector_leaves(k, p, widx[u]);
  }
  LLVMValueRef acc[SK_ROWS][SK_V];
  for (int64_t m = 0; m < p->M; m++)
    for (int j = 0; j < SK_V; j++)
      acc[m][j] = LLVMBuildLoad2(B, k->cg->f32, t->acc[m][j], "");
  for (int u = 0; u < n && !k->failed; u++) {
    LLVMValueRef w[SK_V], x[SK_ROWS];
    for (int j = 0; j < SK_V; j++)
      w[j] = gen_convert(k, gen_value(k, wop, widx[u][j]), wop->shape.dt, DT_F32);
    for (int64_t m = 0; m < p->M; m++)
      x[m] = sk_s(k, p, t->sidx[m], kk[u]);
    if (k->failed) return;
    for (int64_t m = 0; m < p->M; m++)
      for (int j = 0; j < SK_V; j++)
        acc[m][j] = cuda_fma(k, x[m], w[j], acc[m][j]);
  }
  for (int64_t m = 0; m < p->M; m++)
    for (int j = 0; j < SK_V; j++)
      LLVMBuildStore(B, acc[m][j], t->acc[m][j]);
}

/* n tensor-core steps of the warp from kbase (the lane's first row; SK_MMA_STRIDE apart). A
 * step is 16 k by the warp's 64 columns: lane (g, q) holds W's rows kbase + 0..3 of columns
 * n0 + 0..7 (its 8 columns are the A rows g, g + 8 of four m16n8k16 products, its 4 rows their
 * k columns 2q, 2q + 1, 2q + 8, 2q + 9) and S's rows g, g + 8 at the same 4 k (B's column g
 * of the two n8 tiles; the second only for more than 8 rows). */
static void sk_mma_steps(GenKern *k, const SkPlan *p, const SkThread *t, LLVMValueRef kbase, int n,
                         bool vec) {
  LLVMBuilderRef B = k->B;
  const HInstr *wop = p->dot->ops[p->w];
  DType mt = wop->shape.dt;
  LLVMValueRef widx[SK_U][4][SK_V][HLO_MAX_RANK], kk[SK_U][4];
  for (int u = 0; u < n; u++)
    for (int r = 0; r < 4; r++) {
      kk[u][r] = LLVMBuildNSWAdd(B, kbase, gen_i64(k, u * SK_MMA_STRIDE + r), "");
      for (int j = 0; j < SK_V; j++)
        sk_widx(k, p, t, kk[u][r], j, widx[u][r][j]);
      if (vec) sk_vector_leaves(k, p, widx[u][r]);
    }
  int nt = sk_mma_tiles(p);
  LLVMValueRef acc[8][4];
  for (int i = 0; i < 4 * nt; i++)
    for (int j = 0; j < 4; j++)
      acc[i][j] = LLVMBuildLoad2(B, k->cg->f32, t->acc[i][j], "");
  LLVMValueRef zero = LLVMConstNull(k->cg->i32);
  for (int u = 0; u < n && !k->failed; u++) {
    LLVMValueRef w[4][SK_V], x[2][4], b[2][2];
    for (int r = 0; r < 4; r++) {
      for (int j = 0; j < SK_V; j++)
        w[r][j] = gen_value(k, wop, widx[u][r][j]);
      for (int h2 = 0; h2 < nt; h2++)
        x[h2][r] = gen_convert(k, sk_s(k, p, t->sidx[h2], kk[u][r]), DT_F32, mt);
    }
    if (k->failed) return;
    for (int h2 = 0; h2 < nt; h2++)
      for (int h = 0; h < 2; h++)
        b[h2][h] = LLVMBuildSelect(B, t->live[h2], cuda_pack16(k, x[h2][2 * h], x[h2][2 * h + 1]),
                                   zero, "");
    for (int i = 0; i < 4; i++) {
      LLVMValueRef a[4];
      for (int h = 0; h < 4; h++) /* (column 2i + (h & 1), rows 2 (h >> 1), + 1) */
        a[h] =
            cuda_pack16(k, w[2 * (h >> 1)][2 * i + (h & 1)], w[2 * (h >> 1) + 1][2 * i + (h & 1)]);
      for (int h2 = 0; h2 < nt; h2++)
        cuda_mma(k, mt, a, b[h2], acc[4 * h2 + i]);
    }
  }
  for (int i = 0; i < 4 * nt; i++)
    for (int j = 0; j < 4; j++)
      LLVMBuildStore(B, acc[i][j], t->acc[i][j]);
}

/* The thread's steps: kfirst, + stride, ... below kend; SK_U a loop iteration, then the rest. */
static void sk_kloop(GenKern *k, const SkPlan *p, const SkThread *t, LLVMValueRef kfirst,
                     LLVMValueRef kend, bool vec) {
  LLVMBuilderRef B = k->B;
  int64_t stride = p->mma ? SK_MMA_STRIDE : SK_S;
  LLVMValueRef span = LLVMBuildNSWSub(B, kend, kfirst, "");
  LLVMValueRef trips = LLVMBuildSDiv(B, LLVMBuildNSWAdd(B, span, gen_i64(k, stride - 1), ""),
                                     gen_i64(k, stride), "");
  trips = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSLT, trips, gen_i64(k, 0), ""), gen_i64(k, 0),
                          trips, "");
  LLVMValueRef whole = LLVMBuildSDiv(B, trips, gen_i64(k, SK_U), "");
  for (int rest = 0; rest < 2; rest++) {
    GenLoop l;
    LLVMValueRef lo = rest ? LLVMBuildNSWMul(B, whole, gen_i64(k, SK_U), "") : gen_i64(k, 0);
    LLVMValueRef i = gen_loop_open(k, &l, lo, rest ? trips : whole);
    LLVMValueRef kb = cuda_lin(k, i, rest ? stride : SK_U * stride, kfirst);
    int n = rest ? 1 : SK_U;
    if (p->mma)
      sk_mma_steps(k, p, t, kb, n, vec);
    else
      sk_steps(k, p, t, kb, n, vec);
    gen_loop_close(k, &l);
  }
}

/* The dot's index of row m, column n. */
static void sk_dot_idx(GenKern *k, const SkPlan *p, LLVMValueRef m, LLVMValueRef n,
                       LLVMValueRef *idx) {
  /* the result's dims: the lhs's free dims, then the rhs's */
  int sfirst = p->s == 0 ? 0 : p->W.nf, wfirst = p->s == 0 ? p->S.nf : 0;
  gen_delin(k, m, p->se, p->S.nf, idx + sfirst);
  gen_delin(k, n, p->we, p->W.nf, idx + wfirst);
}

void cuda_dot_write(GenKern *k, const HInstr *in, const HInstr *dot, const HInstr *root,
                    LLVMValueRef *idx, LLVMValueRef sum) {
  LLVMValueRef v = gen_convert(k, sum, DT_F32, dot->shape.dt);
  int mark = k->ncache;
  if (root != dot) {
    gen_cache_add(k, dot, dot->shape.rank, idx, v);
    v = gen_value(k, root, idx);
  }
  if (v) gen_store_elem(k, cuda_kbuffer(k, in), &in->shape, idx, v);
  k->ncache = mark;
}

/* S's index of row m (a value) into si, k left out. */
static void sk_sidx(GenKern *k, const SkPlan *p, LLVMValueRef m, LLVMValueRef *si) {
  LLVMValueRef fi[HLO_MAX_RANK];
  gen_delin(k, m, p->se, p->S.nf, fi);
  for (int d = 0; d < p->dot->ops[p->s]->shape.rank; d++)
    si[d] = gen_i64(k, 0);
  for (int i = 0; i < p->S.nf; i++)
    si[p->S.f[i]] = fi[i];
}

/* The thread's place: its columns' W index (from column n0), its rows' S indices (mma: the
 * lane's row, live when below M), zeroed accumulators, and whether vector accesses may be
 * used. */
static void sk_thread(GenKern *k, const SkPlan *p, LLVMValueRef n0, LLVMValueRef row, SkThread *t) {
  LLVMBuilderRef B = k->B;
  LLVMValueRef fi[HLO_MAX_RANK];
  gen_delin(k, n0, p->we, p->W.nf, fi);
  for (int i = 0; i < p->W.nf; i++)
    t->widx[p->W.f[i]] = fi[i];
  if (p->mma) {
    for (int h = 0; h < sk_mma_tiles(p); h++) {
      LLVMValueRef r = LLVMBuildNSWAdd(B, row, gen_i64(k, 8 * h), "");
      t->live[h] = LLVMBuildICmp(B, LLVMIntSLT, r, gen_i64(k, p->M), "");
      sk_sidx(k, p, gen_smin(k, r, gen_i64(k, p->M - 1)), t->sidx[h]);
    }
  } else {
    for (int64_t m = 0; m < p->M; m++)
      sk_sidx(k, p, gen_i64(k, m), t->sidx[m]);
  }
  int rows = p->mma ? 4 * sk_mma_tiles(p) : (int)p->M, cols = p->mma ? 4 : SK_V;
  for (int m = 0; m < rows; m++)
    for (int j = 0; j < cols; j++) {
      t->acc[m][j] = gen_alloca(k, k->cg->f32);
      LLVMBuildStore(B, LLVMConstReal(k->cg->f32, 0), t->acc[m][j]);
    }
  t->vec = cuda_vec_aligned(k, p->leaf, p->nleaf, SK_V);
}

typedef struct SkLoops {
  const SkPlan *p;
  const SkThread *t;
  LLVMValueRef kfirst, kend;
} SkLoops;

static void sk_loops(GenKern *k, bool vec, void *ctx) {
  const SkLoops *c = ctx;
  sk_kloop(k, c->p, c->t, c->kfirst, c->kend, vec);
}

/* The k loops, with vector accesses where the addresses allow, else element loads. */
static void sk_accumulate(GenKern *k, const SkPlan *p, const SkThread *t, LLVMValueRef kfirst,
                          LLVMValueRef kend) {
  SkLoops c = {p, t, kfirst, kend};
  cuda_vec_split(k, p->nleaf ? t->vec : NULL, sk_loops, &c);
}

/* f32 slot (warp, row m, column col) of the block's shared sums: [warps][rows][SK_TN]. */
static LLVMValueRef sk_slot(GenKern *k, LLVMValueRef red, LLVMValueRef warp, int64_t rows,
                            LLVMValueRef m, LLVMValueRef col) {
  LLVMValueRef i = cuda_lin(k, cuda_lin(k, warp, rows, m), SK_TN, col);
  return LLVMBuildInBoundsGEP2(k->B, k->cg->f32, red, &i, 1, "");
}

/* Each warp's sums into shared memory. FMA: the slices of a warp (lanes c, c + 8, ..) meet by
 * shuffles. mma: lane (g, q)'s product i holds columns 8g + 2i (+1) of rows 2q (+1). */
static void sk_warp_sums(GenKern *k, const SkPlan *p, const SkThread *t, LLVMValueRef red,
                         LLVMValueRef tid) {
  LLVMBuilderRef B = k->B;
  LLVMValueRef warp = LLVMBuildLShr(B, tid, gen_i64(k, 5), "");
  LLVMValueRef lane = LLVMBuildAnd(B, tid, gen_i64(k, 31), "");
  if (p->mma) {
    LLVMValueRef g = LLVMBuildLShr(B, lane, gen_i64(k, 2), "");
    LLVMValueRef q = LLVMBuildAnd(B, lane, gen_i64(k, 3), "");
    int nt = sk_mma_tiles(p);
    for (int i = 0; i < 4 * nt; i++) /* (tile i / 4 of S's rows) */
      for (int h = 0; h < 4; h++) {
        LLVMValueRef m = cuda_lin(k, q, 2, gen_i64(k, 8 * (i / 4) + (h & 1)));
        LLVMValueRef col = cuda_lin(k, g, SK_V, gen_i64(k, 2 * (i % 4) + (h >> 1)));
        LLVMBuildStore(B, LLVMBuildLoad2(B, k->cg->f32, t->acc[i][h], ""),
                       sk_slot(k, red, warp, 8 * nt, m, col));
      }
    return;
  }
  LLVMValueRef c = LLVMBuildURem(B, tid, gen_i64(k, SK_G), "");
  for (int64_t m = 0; m < p->M; m++)
    for (int j = 0; j < SK_V; j++) {
      LLVMValueRef v = LLVMBuildLoad2(B, k->cg->f32, t->acc[m][j], "");
      for (int off = SK_G; off < 32; off *= 2)
        v = LLVMBuildFAdd(B, v, cuda_shfl(k, v, off, CU_SHFL_BFLY), "");
      /* the group's lanes hold the same sum */
      LLVMBuildStore(
          B, v, sk_slot(k, red, warp, p->M, gen_i64(k, m), cuda_lin(k, c, SK_V, gen_i64(k, j))));
    }
}

/* The warps' sums of the block's columns met in shared memory, then written (or, split, the
 * split's f32 partials into part). */
static void sk_meet(GenKern *k, CuStep *st, const SkPlan *p, const HInstr *in, const SkThread *t,
                    LLVMValueRef tid, LLVMValueRef tile, LLVMValueRef z, LLVMValueRef part) {
  LLVMBuilderRef B = k->B;
  LLVMTypeRef f32 = k->cg->f32;
  int64_t warps = SK_THREADS / 32, rows = p->mma ? 8 * sk_mma_tiles(p) : p->M;
  LLVMValueRef red = cuda_smem(k, st, f32, warps * rows * SK_TN);
  sk_warp_sums(k, p, t, red, tid);
  cuda_barrier(k);
  GenLoop l;
  LLVMValueRef o = gen_loop_open(k, &l, tid, gen_i64(k, p->M * SK_TN));
  l.step = SK_THREADS;
  LLVMValueRef m = LLVMBuildUDiv(B, o, gen_i64(k, SK_TN), "");
  LLVMValueRef col = LLVMBuildURem(B, o, gen_i64(k, SK_TN), "");
  LLVMValueRef sum = LLVMConstReal(f32, 0);
  for (int64_t w = 0; w < warps; w++)
    sum = LLVMBuildFAdd(
        B, sum, LLVMBuildLoad2(B, f32, sk_slot(k, red, gen_i64(k, w), rows, m, col), ""), "");
  LLVMValueRef n = cuda_lin(k, tile, SK_TN, col);
  int mark;
  LLVMBasicBlockRef done = cuda_if(k, LLVMBuildICmp(B, LLVMIntSLT, n, gen_i64(k, p->N), ""), &mark);
  LLVMValueRef idx[HLO_MAX_RANK];
  sk_dot_idx(k, p, m, n, idx);
  cuda_dot_store(k, in, p->dot, p->root, part, z, idx, sum);
  cuda_endif(k, done, mark);
  gen_loop_close(k, &l);
}

static bool sk_main(CudaCg *cc, HInstr *in, const SkPlan *p, CuPtr pp) {
  CuStep *st;
  LLVMValueRef part = NULL;
  bool split = p->nsplit > 1;
  GenKern *k = cuda_kbegin(cc, in, split ? "skinny-split" : "skinny", split, &pp, &part, &st);
  LLVMBuilderRef B = k->B;
  if (in->op == OP_FUSION) cuda_kbind_fusion(k, in);
  st->block = SK_THREADS;
  st->grid = p->tiles * p->nsplit;
  LLVMValueRef tid = cuda_sreg(k, "llvm.nvvm.read.ptx.sreg.tid.x");
  LLVMValueRef bid = cuda_sreg(k, "llvm.nvvm.read.ptx.sreg.ctaid.x");
  LLVMValueRef z = LLVMBuildURem(B, bid, gen_i64(k, p->nsplit), "");
  LLVMValueRef tile = LLVMBuildUDiv(B, bid, gen_i64(k, p->nsplit), "");
  LLVMValueRef k0 = LLVMBuildNSWMul(B, z, gen_i64(k, p->chunk), "");
  /* FMA: column group tid % SK_G, slice tid / SK_G; mma: group lane / 4 of the warp's 64
   * columns, the warp's k16 steps from 16 warp, the lane's rows from 4 (lane % 4) */
  LLVMValueRef lane = LLVMBuildAnd(B, tid, gen_i64(k, 31), "");
  LLVMValueRef grp = p->mma ? LLVMBuildLShr(B, lane, gen_i64(k, 2), "")
                            : LLVMBuildURem(B, tid, gen_i64(k, SK_G), "");
  LLVMValueRef first = p->mma
                           ? cuda_lin(k, LLVMBuildLShr(B, tid, gen_i64(k, 5), ""), 16,
                                      LLVMBuildNSWMul(B, LLVMBuildAnd(B, lane, gen_i64(k, 3), ""),
                                                      gen_i64(k, 4), ""))
                           : LLVMBuildUDiv(B, tid, gen_i64(k, SK_G), "");
  /* columns past N (the last tile): read the last ones, never written */
  LLVMValueRef n0 = cuda_lin(k, tile, SK_TN, LLVMBuildNSWMul(B, grp, gen_i64(k, SK_V), ""));
  n0 = gen_smin(k, n0, gen_i64(k, p->N - SK_V));
  SkThread t;
  sk_thread(k, p, n0, grp, &t); /* (mma: the lane's row of S is its group) */
  LLVMValueRef kend =
      gen_smin(k, LLVMBuildNSWAdd(B, k0, gen_i64(k, p->chunk), ""), gen_i64(k, p->K));
  sk_accumulate(k, p, &t, LLVMBuildNSWAdd(B, k0, first, ""), kend);
  sk_meet(k, st, p, in, &t, tid, tile, z, part);
  return cuda_kend(k);
}

void cuda_dot_store(GenKern *k, const HInstr *in, const HInstr *dot, const HInstr *root,
                    LLVMValueRef part, LLVMValueRef z, LLVMValueRef *idx, LLVMValueRef sum) {
  if (!part) {
    cuda_dot_write(k, in, dot, root, idx, sum);
    return;
  }
  LLVMValueRef at = cuda_lin(k, z, hlo_shape_elems(&dot->shape), gen_linear(k, &dot->shape, idx));
  LLVMBuildStore(k->B, sum, LLVMBuildInBoundsGEP2(k->B, k->cg->f32, part, &at, 1, ""));
}

typedef struct SkFinish {
  const HInstr *in, *dot, *root;
  int64_t nsplit;
  LLVMValueRef part;
} SkFinish;

static bool sk_finish_body(GenKern *k, LLVMValueRef *idx, void *vc) {
  const SkFinish *f = vc;
  int64_t n = hlo_shape_elems(&f->dot->shape);
  LLVMValueRef lin = gen_linear(k, &f->dot->shape, idx), sum = LLVMConstReal(k->cg->f32, 0);
  for (int64_t z = 0; z < f->nsplit; z++) {
    LLVMValueRef at = LLVMBuildNSWAdd(k->B, lin, gen_i64(k, z * n), "");
    LLVMValueRef q = LLVMBuildInBoundsGEP2(k->B, k->cg->f32, f->part, &at, 1, "");
    sum = LLVMBuildFAdd(k->B, sum, LLVMBuildLoad2(k->B, k->cg->f32, q, ""), "");
  }
  cuda_dot_write(k, f->in, f->dot, f->root, idx, sum);
  return !k->failed;
}

bool cuda_dot_finish(CudaCg *cc, HInstr *in, const HInstr *dot, const HInstr *root, int64_t nsplit,
                     CuPtr pp, const char *what) {
  CuStep *st;
  SkFinish f = {in, dot, root, nsplit, NULL};
  GenKern *k = cuda_kbegin(cc, in, what, 1, &pp, &f.part, &st);
  if (in->op == OP_FUSION) cuda_kbind_fusion(k, in);
  cuda_grid_loop(k, st, &dot->shape, sk_finish_body, &f);
  return cuda_kend(k);
}

bool cuda_skinny(CudaCg *cc, HInstr *in, bool *taken) {
  SkPlan p;
  *taken = sk_match(cc, in, &p);
  if (!*taken) return true;
  CuPtr pp = {0}; /* a split's f32 partials */
  if (p.nsplit > 1) pp = cuda_scratch(cc, p.nsplit * p.M * p.N * 4);
  /* up to 8 rows the conversions bound the kernel: int8 through f32 bits (docs/benchmarks.md) */
  cc->cg.int8_float_bits = p.M <= SK_ROWS;
  bool ok = sk_main(cc, in, &p, pp);
  cc->cg.int8_float_bits = false;
  if (!ok) return false;
  return p.nsplit == 1 || cuda_dot_finish(cc, in, p.dot, p.root, p.nsplit, pp, "skinny-finish");
}
