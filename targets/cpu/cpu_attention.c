/* targets/cpu/cpu_attention.c: one blocked kernel for an attention fusion (flash attention on
 * the CPU).
 *
 * The attention pass leaves softmax(f(Q.K)) . V as a kCustom fusion; opt_attention_match on its
 * root gives the dims. An item is one batch item and a tile of QT = 2 vectors of query rows;
 * the parallel-for's chunks take runs of items, each in its own scratch, which stays in L1/L2:
 * the tile's queries transposed (Qt[d][r]), one block of KB keys and its values (Kp[j][d],
 * Vp[j][c], converted to f32 as they are packed, zero rows past the keys; where K and V are f32
 * entry values with the head dim minor, full blocks read them in place), the block's scores
 * transposed (St[j][r]), the accumulators O[r][c] and the rows' running max and sum. Per key
 * block: the scores by a register-blocked micro-kernel (KJ keys broadcast against the tile's
 * two query vectors: 2 KJ accumulators, one FMA per loaded value, as in the GEMM's); the
 * fusion's elementwise ops (scale, masks, soft-capping) at each score's index through the
 * elemental generator with the product's value entered in its cache, keys past the end -inf
 * (key blocks a mask lets nothing through are skipped, checked key by key until one lets a
 * score through); the online softmax, rows along the vector lanes (each loop over the tile's rows
 * is one vectorizable line: max, exp, sums, the accumulators' rescaling); then O += P . V by a
 * second micro-kernel (R rows of probabilities broadcast against NV vectors of a value row). At the
 * end each row is divided by its sum and stored through the result's dims. The score matrix is
 * never in memory beyond one block; all in f32, the probabilities not rounded to the values'
 * type (within the corpus's bar of XLA, which rounds them in a bf16 model). */
#include "cpu_impl.h"
#include "optimizer.h"

#include <math.h>
#include <string.h>

#define CA_KEYS 64        /* keys per block, about (a multiple of the micro-kernel's KJ) */
#define CA_MAX_CHUNKS 64  /* parallel-for chunks, at most */
#define CA_MIN_WORK 65536 /* multiply-adds below which the kernel runs as one chunk */
#define CA_MASKED -1e30   /* a mask's constant at most this: its scores weigh nothing */

typedef struct CaPlan {
  OptAttn a;
  const HInstr *q, *kk, *v; /* the products' operands in the fusion's body */
  int vw;                   /* f32 lanes of a vector */
  int64_t QT;               /* query rows per tile (two vectors) */
  int KJ;                   /* keys per step of the scores' micro-kernel */
  int64_t KB;               /* keys per block */
  int R, NV;                /* the output micro-kernel: rows, vectors per row */
  int64_t dvp;              /* dv rounded up to whole vectors */
  int64_t nqt, items;       /* query tiles per batch item; items (batch items x tiles) */
  int64_t nchunks;
  /* a mask the blocks can be skipped by: score = select(pred, f(S), c) (or its convert) with
     pred not reading S and c <= CA_MASKED; which operand of the select is c */
  const HInstr *mask;
  int mask_c;
  double cval;
  /* K and V read in place (entry values of f32, the head dim minor, one key dim): their
     entries, row strides (elements) and strides per operand dim; full key blocks then need no
     packing (the last, short one is packed) */
  bool direct;
  const HInstr *ek, *ev;
  int64_t kstride, vstride;
  int64_t kst[HLO_MAX_RANK], vst[HLO_MAX_RANK];
  /* the chunk's scratch, in floats from its start: Qt, Kp, Vp, St, O, m, l, ref, corr */
  int64_t oq, ok, ov, os, oo, om, ol, oref, ocorr, per;
} CaPlan;

static int64_t ca_round(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

/* Whether x reads y (through at most depth levels of operands). */
static bool ca_reads(const HInstr *x, const HInstr *y, int depth) {
  if (x == y) return true;
  if (depth == 0) return true; /* (too deep to tell: assume it does) */
  for (int j = 0; j < x->nops; j++)
    if (ca_reads(x->ops[j], y, depth - 1)) return true;
  return false;
}

/* The select of a causal or padding mask at the score (through converts): one branch a
 * constant at most CA_MASKED, the predicate not reading the product, the other branch reading
 * it. */
static void ca_find_mask(CaPlan *p) {
  const HInstr *x = p->a.score;
  while (x->op == OP_CONVERT && x != p->a.sdot)
    x = x->ops[0];
  if (x->op != OP_SELECT || ca_reads(x->ops[0], p->a.sdot, 24)) return;
  for (int j = 1; j <= 2; j++) {
    double c;
    if (opt_uniform_value(x->ops[j], &c) && c <= CA_MASKED &&
        ca_reads(x->ops[3 - j], p->a.sdot, 24)) {
      p->mask = x;
      p->mask_c = j;
      p->cval = c;
    }
  }
}

/* The entry value operand x of the fusion (a parameter of its body) reads in place as rows of
 * head elements along one key dim (*rs: the row stride), its row-major strides in st; NULL when
 * it cannot. */
static const HInstr *ca_view(const HInstr *in, const HInstr *x, const int8_t *map, const OptAttn *a,
                             int64_t *st, int64_t *rs) {
  if (x->op != OP_PARAMETER || x->param_num >= in->nops || x->shape.dt != DT_F32 || a->nkd != 1)
    return NULL;
  const HInstr *e = in->ops[x->param_num];
  int r = x->shape.rank;
  if (e->op == OP_CONSTANT || r < 2 || map[r - 1] >= 0) return NULL;
  int64_t acc = 1;
  *rs = 0;
  for (int d = r - 1; d >= 0; d--) {
    st[d] = acc;
    acc *= x->shape.dims[d];
    if (map[d] == a->kdim[0]) *rs = st[d];
  }
  return *rs ? e : NULL;
}

static void ca_plan(CaPlan *p, CpuCg *cg, const HInstr *in, const OptAttn *a) {
  memset(p, 0, sizeof *p);
  p->a = *a;
  p->q = a->sdot->ops[a->qop];
  p->kk = a->sdot->ops[1 - a->qop];
  p->v = a->odot->ops[a->vop];
  p->vw = cpu_vector_width(cg);
  bool wide = p->vw >= 16; /* AVX-512: 32 vector registers, else 16 */
  p->QT = 2 * p->vw;
  p->KJ = wide ? 12 : 6;
  p->KB = ca_round(CA_KEYS, p->KJ);
  p->R = 6;
  p->NV = wide ? 4 : 2;
  p->dvp = ca_round(a->dv, p->vw);
  p->nqt = (a->nq + p->QT - 1) / p->QT;
  p->items = a->nbatch * p->nqt;
  int64_t work = a->nbatch * a->nq * a->nk * (a->dh + a->dv);
  int64_t min = cg->o->par_min_elems > 0 ? cg->o->par_min_elems : CA_MIN_WORK;
  p->nchunks = work < min ? 1 : p->items < CA_MAX_CHUNKS ? p->items : CA_MAX_CHUNKS;
  int64_t at = 0;
  int64_t *offs[] = {&p->oq, &p->ok, &p->ov, &p->os, &p->oo, &p->om, &p->ol, &p->oref, &p->ocorr};
  int64_t sizes[] = {a->dh * p->QT, p->KB * a->dh, p->KB * p->dvp, p->KB * p->QT, p->QT * p->dvp,
                     p->QT,         p->QT,         p->QT,          p->QT};
  for (int i = 0; i < 9; i++) {
    *offs[i] = at;
    at += ca_round(sizes[i], 16); /* 64-byte lines */
  }
  p->per = at;
  ca_find_mask(p);
  p->ek = ca_view(in, p->kk, a->kmap, a, p->kst, &p->kstride);
  p->ev = ca_view(in, p->v, a->vmap, a, p->vst, &p->vstride);
  p->direct = p->ek && p->ev && a->dv % p->vw == 0;
}

/* ------------------------------------------------------------------ IR helpers */

static LLVMValueRef ca_f(GenKern *k, double v) { return LLVMConstReal(k->cg->f32, v); }

static LLVMValueRef ca_add(GenKern *k, LLVMValueRef a, LLVMValueRef b) {
  return LLVMBuildNSWAdd(k->B, a, b, "");
}

static LLVMValueRef ca_mul(GenKern *k, LLVMValueRef a, int64_t m) {
  return LLVMBuildNSWMul(k->B, a, gen_i64(k, m), "");
}

/* &base[i] for f32 elements */
static LLVMValueRef ca_at(GenKern *k, LLVMValueRef base, LLVMValueRef i) {
  return LLVMBuildInBoundsGEP2(k->B, k->cg->f32, base, &i, 1, "");
}

static LLVMValueRef ca_ld(GenKern *k, LLVMValueRef base, LLVMValueRef i) {
  LLVMValueRef v = LLVMBuildLoad2(k->B, k->cg->f32, ca_at(k, base, i), "");
  LLVMSetAlignment(v, 4);
  return v;
}

static void ca_st(GenKern *k, LLVMValueRef base, LLVMValueRef i, LLVMValueRef v) {
  LLVMSetAlignment(LLVMBuildStore(k->B, v, ca_at(k, base, i)), 4);
}

static LLVMValueRef ca_vld(GenKern *k, const CaPlan *p, LLVMValueRef base, LLVMValueRef i) {
  LLVMValueRef v =
      LLVMBuildLoad2(k->B, LLVMVectorType(k->cg->f32, (unsigned)p->vw), ca_at(k, base, i), "");
  LLVMSetAlignment(v, 4);
  return v;
}

static void ca_vst(GenKern *k, LLVMValueRef base, LLVMValueRef i, LLVMValueRef v) {
  LLVMSetAlignment(LLVMBuildStore(k->B, v, ca_at(k, base, i)), 4);
}

/* A loop [0, n) (n constant or run-time) stepping by step. */
static LLVMValueRef ca_loop(GenKern *k, GenLoop *l, LLVMValueRef n, int64_t step) {
  LLVMValueRef iv = gen_loop_open(k, l, gen_i64(k, 0), n);
  l->step = step;
  return iv;
}

/* The f32 value of operand x at the index whose dims map to S dims through map (-1: the head
 * dim, at c). */
static LLVMValueRef ca_operand(GenKern *k, const HInstr *x, const int8_t *map, LLVMValueRef *sidx,
                               LLVMValueRef c) {
  LLVMValueRef v = gen_value_mapped(k, x, map, sidx, c);
  return v ? gen_convert(k, v, x->shape.dt, DT_F32) : ca_f(k, 0);
}

/* ------------------------------------------------------------------ the steps of an item */

/* One item's values: its batch item's S index (batch dims set), its first query row and its
 * valid rows, the chunk's scratch arrays. */
typedef struct CaItem {
  LLVMValueRef sidx[HLO_MAX_RANK];
  LLVMValueRef q0, nrows;
  LLVMValueRef Qt, Kp, Vp, St, O, m, l, ref, corr;
  LLVMValueRef ks, vs; /* row strides of Kp and Vp (i64: packed, dh and dvp) */
  LLVMValueRef kb, vb; /* direct: the batch item's K and V rows (key 0) in place */
} CaItem;

/* A closed loop kept scalar: its strided stores would become scatters, which cost more than
 * the scalar stores (Sapphire Rapids: the Q tile's packing dominated at 128 keys). */
static void ca_scalar(GenKern *k, const GenLoop *l) {
  cpu_loop_hint(k, l->latch_br, "llvm.loop.vectorize.enable", LLVMConstInt(k->cg->i1, 0, 0));
}

/* Qt[d][r] = Q(row q0 + r, head d), 0 for rows past the end: rows innermost, so the stores run
 * along Qt's rows and the loads stay within the tile's rows of Q, in L1. */
static void ca_pack_q(GenKern *k, const CaPlan *p, const CaItem *it) {
  LLVMBuilderRef B = k->B;
  const OptAttn *a = &p->a;
  GenLoop ld, lr;
  LLVMValueRef d = ca_loop(k, &ld, gen_i64(k, a->dh), 1);
  LLVMValueRef r = ca_loop(k, &lr, gen_i64(k, p->QT), 1);
  /* rows past the end read the last row's value and store 0 */
  LLVMValueRef valid = LLVMBuildICmp(B, LLVMIntSLT, r, it->nrows, "");
  LLVMValueRef last = LLVMBuildNSWSub(B, it->nrows, gen_i64(k, 1), "");
  LLVMValueRef sidx[HLO_MAX_RANK];
  memcpy(sidx, it->sidx, sizeof sidx);
  gen_delin_dims(k, ca_add(k, it->q0, LLVMBuildSelect(B, valid, r, last, "")), a->qdim, a->qext,
                 a->nqd, sidx);
  LLVMValueRef v = ca_operand(k, p->q, a->qmap, sidx, d);
  ca_st(k, it->Qt, ca_add(k, ca_mul(k, d, p->QT), r), LLVMBuildSelect(B, valid, v, ca_f(k, 0), ""));
  gen_loop_close(k, &lr);
  ca_scalar(k, &lr);
  gen_loop_close(k, &ld);
}

/* Kp[j][d] = K(key k0 + j, d) and Vp[j][c] = V(key k0 + j, c) for j < kn; zero rows up to knp
 * and zero columns of Vp past dv. */
static void ca_pack_kv(GenKern *k, const CaPlan *p, const CaItem *it, LLVMValueRef k0,
                       LLVMValueRef kn, LLVMValueRef knp) {
  const OptAttn *a = &p->a;
  GenLoop lj, ld, lc, lz, lzc, lzr;
  LLVMValueRef j = ca_loop(k, &lj, kn, 1);
  LLVMValueRef sidx[HLO_MAX_RANK];
  memcpy(sidx, it->sidx, sizeof sidx);
  gen_delin_dims(k, ca_add(k, k0, j), a->kdim, a->kext, a->nkd, sidx);
  LLVMValueRef d = ca_loop(k, &ld, gen_i64(k, a->dh), 1);
  ca_st(k, it->Kp, ca_add(k, ca_mul(k, j, a->dh), d), ca_operand(k, p->kk, a->kmap, sidx, d));
  gen_loop_close(k, &ld);
  LLVMValueRef c = ca_loop(k, &lc, gen_i64(k, a->dv), 1);
  ca_st(k, it->Vp, ca_add(k, ca_mul(k, j, p->dvp), c), ca_operand(k, p->v, a->vmap, sidx, c));
  gen_loop_close(k, &lc);
  if (p->dvp > a->dv) {
    c = gen_loop_open(k, &lzc, gen_i64(k, a->dv), gen_i64(k, p->dvp));
    ca_st(k, it->Vp, ca_add(k, ca_mul(k, j, p->dvp), c), ca_f(k, 0));
    gen_loop_close(k, &lzc);
  }
  gen_loop_close(k, &lj);
  j = gen_loop_open(k, &lz, kn, knp);
  d = ca_loop(k, &ld, gen_i64(k, a->dh), 1);
  ca_st(k, it->Kp, ca_add(k, ca_mul(k, j, a->dh), d), ca_f(k, 0));
  gen_loop_close(k, &ld);
  c = ca_loop(k, &lzr, gen_i64(k, p->dvp), 1);
  ca_st(k, it->Vp, ca_add(k, ca_mul(k, j, p->dvp), c), ca_f(k, 0));
  gen_loop_close(k, &lzr);
  gen_loop_close(k, &lz);
}

/* St[j][r] = sum_d Kp[j][d] Qt[d][r] for j < knp (a multiple of KJ): per step KJ keys broadcast
 * against the tile's two query vectors, 2 KJ accumulators in registers across the head. */
static void ca_scores(GenKern *k, const CaPlan *p, const CaItem *it, LLVMValueRef knp) {
  LLVMTypeRef vt = LLVMVectorType(k->cg->f32, (unsigned)p->vw);
  LLVMValueRef acc[16][2];
  for (int jj = 0; jj < p->KJ; jj++)
    for (int v = 0; v < 2; v++)
      acc[jj][v] = gen_alloca(k, vt);
  GenLoop lj, ld;
  LLVMValueRef j0 = ca_loop(k, &lj, knp, p->KJ);
  for (int jj = 0; jj < p->KJ; jj++)
    for (int v = 0; v < 2; v++)
      LLVMBuildStore(k->B, LLVMConstNull(vt), acc[jj][v]);
  LLVMValueRef d = ca_loop(k, &ld, gen_i64(k, p->a.dh), 1);
  LLVMValueRef qv[2];
  for (int v = 0; v < 2; v++)
    qv[v] = ca_vld(k, p, it->Qt, ca_add(k, ca_mul(k, d, p->QT), gen_i64(k, v * p->vw)));
  LLVMValueRef kd = ca_add(k, LLVMBuildNSWMul(k->B, j0, it->ks, ""), d);
  for (int jj = 0; jj < p->KJ; jj++) {
    LLVMValueRef off = ca_add(k, kd, LLVMBuildNSWMul(k->B, it->ks, gen_i64(k, jj), ""));
    LLVMValueRef kb = cpu_splat(k, ca_ld(k, it->Kp, off), p->vw);
    for (int v = 0; v < 2; v++)
      LLVMBuildStore(k->B, gen_fmuladd(k, kb, qv[v], LLVMBuildLoad2(k->B, vt, acc[jj][v], "")),
                     acc[jj][v]);
  }
  gen_loop_close(k, &ld);
  for (int jj = 0; jj < p->KJ; jj++)
    for (int v = 0; v < 2; v++) {
      LLVMValueRef at =
          ca_add(k, ca_mul(k, ca_add(k, j0, gen_i64(k, jj)), p->QT), gen_i64(k, v * p->vw));
      ca_vst(k, it->St, at, LLVMBuildLoad2(k->B, vt, acc[jj][v], ""));
    }
  gen_loop_close(k, &lj);
}

/* The fusion's elementwise ops on every score of the block (St[j][r] for key k0 + j, row
 * q0 + r), -inf for keys past kn. Skipped when the softmax reads the product itself. */
static void ca_chain(GenKern *k, const CaPlan *p, const CaItem *it, LLVMValueRef k0,
                     LLVMValueRef kn, LLVMValueRef knp) {
  const OptAttn *a = &p->a;
  LLVMBuilderRef B = k->B;
  GenLoop lj, lr;
  LLVMValueRef j = ca_loop(k, &lj, knp, 1);
  LLVMValueRef valid = LLVMBuildICmp(B, LLVMIntSLT, j, kn, "");
  LLVMValueRef key = LLVMBuildSelect(B, valid, ca_add(k, k0, j), gen_i64(k, 0), "");
  LLVMValueRef sidx[HLO_MAX_RANK];
  memcpy(sidx, it->sidx, sizeof sidx);
  gen_delin_dims(k, key, a->kdim, a->kext, a->nkd, sidx);
  LLVMValueRef r = ca_loop(k, &lr, gen_i64(k, p->QT), 1);
  LLVMValueRef at = ca_add(k, ca_mul(k, j, p->QT), r);
  LLVMValueRef s = ca_ld(k, it->St, at);
  if (a->score != a->sdot) {
    /* rows past the end compute as the last row (their scores are not used) */
    LLVMValueRef row = ca_add(k, it->q0, r), last = gen_i64(k, a->nq - 1);
    row = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSLT, row, last, ""), row, last, "");
    LLVMValueRef full[HLO_MAX_RANK];
    memcpy(full, sidx, sizeof full);
    gen_delin_dims(k, row, a->qdim, a->qext, a->nqd, full);
    const HInstr *sd = a->sdot;
    gen_cache_add(k, sd, sd->shape.rank, full, gen_convert(k, s, DT_F32, sd->shape.dt));
    LLVMValueRef e = gen_value(k, a->score, full);
    s = e ? gen_convert(k, e, a->score->shape.dt, DT_F32) : ca_f(k, 0);
  }
  ca_st(k, it->St, at, LLVMBuildSelect(B, valid, s, ca_f(k, -INFINITY), ""));
  gen_loop_close(k, &lr);
  gen_loop_close(k, &lj);
}

/* The online softmax over the block: ref = the rows' new max (0 while all are -inf), corr =
 * exp(old max - ref), St[j][r] = exp(St[j][r] - ref), l = l corr + the row's sum, O *= corr. */
static void ca_softmax(GenKern *k, const CaPlan *p, const CaItem *it, LLVMValueRef knp) {
  LLVMBuilderRef B = k->B;
  GenLoop l1, lj, lr, l2, lj2, lr2, l3, lc;
  LLVMValueRef r = ca_loop(k, &l1, gen_i64(k, p->QT), 1);
  ca_st(k, it->ref, r, ca_ld(k, it->m, r));
  gen_loop_close(k, &l1);
  LLVMValueRef j = ca_loop(k, &lj, knp, 1);
  r = ca_loop(k, &lr, gen_i64(k, p->QT), 1);
  LLVMValueRef s = ca_ld(k, it->St, ca_add(k, ca_mul(k, j, p->QT), r));
  ca_st(k, it->ref, r, gen_intr(k, "llvm.maxnum", ca_ld(k, it->ref, r), s));
  gen_loop_close(k, &lr);
  gen_loop_close(k, &lj);
  r = ca_loop(k, &l2, gen_i64(k, p->QT), 1);
  LLVMValueRef mn = ca_ld(k, it->ref, r), mo = ca_ld(k, it->m, r);
  LLVMValueRef ninf = LLVMBuildFCmp(B, LLVMRealOEQ, mn, ca_f(k, -INFINITY), "");
  LLVMValueRef ref = LLVMBuildSelect(B, ninf, ca_f(k, 0), mn, "");
  LLVMValueRef corr = gen_exp_f32_nonpos(k, LLVMBuildFSub(B, mo, ref, ""));
  ca_st(k, it->m, r, mn);
  ca_st(k, it->ref, r, ref);
  ca_st(k, it->corr, r, corr);
  ca_st(k, it->l, r, LLVMBuildFMul(B, ca_ld(k, it->l, r), corr, ""));
  gen_loop_close(k, &l2);
  j = ca_loop(k, &lj2, knp, 1);
  r = ca_loop(k, &lr2, gen_i64(k, p->QT), 1);
  LLVMValueRef at = ca_add(k, ca_mul(k, j, p->QT), r);
  LLVMValueRef e =
      gen_exp_f32_nonpos(k, LLVMBuildFSub(B, ca_ld(k, it->St, at), ca_ld(k, it->ref, r), ""));
  ca_st(k, it->St, at, e);
  ca_st(k, it->l, r, LLVMBuildFAdd(B, ca_ld(k, it->l, r), e, ""));
  gen_loop_close(k, &lr2);
  gen_loop_close(k, &lj2);
  r = ca_loop(k, &l3, gen_i64(k, p->QT), 1);
  LLVMValueRef cr = ca_ld(k, it->corr, r);
  LLVMValueRef c = ca_loop(k, &lc, gen_i64(k, p->dvp), 1);
  LLVMValueRef oat = ca_add(k, ca_mul(k, r, p->dvp), c);
  ca_st(k, it->O, oat, LLVMBuildFMul(B, ca_ld(k, it->O, oat), cr, ""));
  gen_loop_close(k, &lc);
  gen_loop_close(k, &l3);
}

/* O[r0 + rr][c0 + ..] += sum_j St[j][r0 + rr] Vp[j][c0 + ..] for R rows and nv vectors: the
 * accumulators in registers across the block's keys. */
static void ca_pv_tile(GenKern *k, const CaPlan *p, const CaItem *it, int64_t r0, int R,
                       LLVMValueRef c0, int nv, LLVMValueRef knp) {
  LLVMTypeRef vt = LLVMVectorType(k->cg->f32, (unsigned)p->vw);
  LLVMValueRef acc[8][4], at[8][4];
  for (int rr = 0; rr < R; rr++)
    for (int n = 0; n < nv; n++) {
      acc[rr][n] = gen_alloca(k, vt);
      at[rr][n] = ca_add(k, gen_i64(k, (r0 + rr) * p->dvp + n * p->vw), c0);
      LLVMBuildStore(k->B, ca_vld(k, p, it->O, at[rr][n]), acc[rr][n]);
    }
  GenLoop lj;
  LLVMValueRef j = ca_loop(k, &lj, knp, 1);
  LLVMValueRef vv[4];
  for (int n = 0; n < nv; n++)
    vv[n] = ca_vld(
        k, p, it->Vp,
        ca_add(k, LLVMBuildNSWMul(k->B, j, it->vs, ""), ca_add(k, c0, gen_i64(k, n * p->vw))));
  LLVMValueRef srow = ca_mul(k, j, p->QT);
  for (int rr = 0; rr < R; rr++) {
    LLVMValueRef pb = cpu_splat(k, ca_ld(k, it->St, ca_add(k, srow, gen_i64(k, r0 + rr))), p->vw);
    for (int n = 0; n < nv; n++)
      LLVMBuildStore(k->B, gen_fmuladd(k, pb, vv[n], LLVMBuildLoad2(k->B, vt, acc[rr][n], "")),
                     acc[rr][n]);
  }
  gen_loop_close(k, &lj);
  for (int rr = 0; rr < R; rr++)
    for (int n = 0; n < nv; n++)
      ca_vst(k, it->O, at[rr][n], LLVMBuildLoad2(k->B, vt, acc[rr][n], ""));
}

/* O += P . V over the tile: rows in steps of R, columns in steps of NV vectors (a loop), the
 * last step of each narrower. */
static void ca_pv(GenKern *k, const CaPlan *p, const CaItem *it, LLVMValueRef knp) {
  int64_t nvec = p->dvp / p->vw, full = nvec / p->NV * p->NV;
  for (int64_t r0 = 0; r0 < p->QT; r0 += p->R) {
    int R = (int)(p->QT - r0 < p->R ? p->QT - r0 : p->R);
    if (full > 0) {
      GenLoop lc;
      LLVMValueRef c0 = gen_loop_open(k, &lc, gen_i64(k, 0), gen_i64(k, full * p->vw));
      lc.step = p->NV * p->vw;
      ca_pv_tile(k, p, it, r0, R, c0, p->NV, knp);
      gen_loop_close(k, &lc);
    }
    if (nvec > full) ca_pv_tile(k, p, it, r0, R, gen_i64(k, full * p->vw), (int)(nvec - full), knp);
  }
}

/* out(row q0 + r, c) = O[r][c] / l[r] for the valid rows. */
static void ca_store(GenKern *k, const CaPlan *p, HInstr *in, const CaItem *it, LLVMValueRef out) {
  const OptAttn *a = &p->a;
  GenLoop lr, lc;
  LLVMValueRef r = ca_loop(k, &lr, it->nrows, 1);
  LLVMValueRef sidx[HLO_MAX_RANK];
  memcpy(sidx, it->sidx, sizeof sidx);
  gen_delin_dims(k, ca_add(k, it->q0, r), a->qdim, a->qext, a->nqd, sidx);
  LLVMValueRef inv = LLVMBuildFDiv(k->B, ca_f(k, 1), ca_ld(k, it->l, r), "");
  LLVMValueRef c = ca_loop(k, &lc, gen_i64(k, a->dv), 1);
  LLVMValueRef v =
      LLVMBuildFMul(k->B, ca_ld(k, it->O, ca_add(k, ca_mul(k, r, p->dvp), c)), inv, "");
  LLVMValueRef oidx[HLO_MAX_RANK];
  for (int d = 0; d < in->shape.rank; d++)
    oidx[d] = a->omap[d] < 0 ? c : sidx[a->omap[d]];
  gen_store_elem(k, out, &in->shape, oidx, gen_convert(k, v, DT_F32, in->shape.dt));
  gen_loop_close(k, &lc);
  gen_loop_close(k, &lr);
}

/* An i32 variable set to 0; ca_flag_or sets it where cond holds; ca_flag_set: whether it is. */
static LLVMValueRef ca_flag(GenKern *k) {
  LLVMValueRef flag = gen_alloca(k, k->cg->i32);
  LLVMBuildStore(k->B, LLVMConstInt(k->cg->i32, 0, 0), flag);
  return flag;
}

static void ca_flag_or(GenKern *k, LLVMValueRef flag, LLVMValueRef cond) {
  LLVMValueRef f = LLVMBuildLoad2(k->B, k->cg->i32, flag, "");
  LLVMBuildStore(k->B, LLVMBuildOr(k->B, f, LLVMBuildZExt(k->B, cond, k->cg->i32, ""), ""), flag);
}

static LLVMValueRef ca_flag_set(GenKern *k, LLVMValueRef flag) {
  return LLVMBuildICmp(k->B, LLVMIntNE, LLVMBuildLoad2(k->B, k->cg->i32, flag, ""),
                       LLVMConstInt(k->cg->i32, 0, 0), "");
}

/* Whether the mask lets some score of the block through: its predicate at some key k0 + j <
 * k0 + kn and valid row, selecting the branch that reads the product. */
static LLVMValueRef ca_block_live(GenKern *k, const CaPlan *p, const CaItem *it, LLVMValueRef k0,
                                  LLVMValueRef kn) {
  LLVMBuilderRef B = k->B;
  const OptAttn *a = &p->a;
  LLVMValueRef flag = ca_flag(k), jv = gen_alloca(k, k->cg->i64);
  LLVMBuildStore(B, gen_i64(k, 0), jv);
  /* keys one by one until one lets a score through (a live block stops at its first key) */
  LLVMBasicBlockRef hdr = LLVMAppendBasicBlockInContext(k->cg->C, k->fn, "live");
  LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(k->cg->C, k->fn, "livekey");
  LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(k->cg->C, k->fn, "livedone");
  LLVMBuildBr(B, hdr);
  LLVMPositionBuilderAtEnd(B, hdr);
  LLVMValueRef j = LLVMBuildLoad2(B, k->cg->i64, jv, "");
  LLVMValueRef more = LLVMBuildAnd(B, LLVMBuildICmp(B, LLVMIntSLT, j, kn, ""),
                                   LLVMBuildNot(B, ca_flag_set(k, flag), ""), "");
  LLVMBuildCondBr(B, more, body, done);
  LLVMPositionBuilderAtEnd(B, body);
  int mark = k->ncache;
  LLVMValueRef sidx[HLO_MAX_RANK];
  memcpy(sidx, it->sidx, sizeof sidx);
  gen_delin_dims(k, ca_add(k, k0, j), a->kdim, a->kext, a->nkd, sidx);
  GenLoop lr;
  LLVMValueRef r = ca_loop(k, &lr, it->nrows, 1);
  LLVMValueRef full[HLO_MAX_RANK];
  memcpy(full, sidx, sizeof full);
  gen_delin_dims(k, ca_add(k, it->q0, r), a->qdim, a->qext, a->nqd, full);
  LLVMValueRef pv = gen_value(k, p->mask->ops[0], full);
  if (pv) /* (mask_c 1: the constant is the true branch) */
    ca_flag_or(k, flag, p->mask_c == 1 ? LLVMBuildNot(B, pv, "") : pv);
  gen_loop_close(k, &lr);
  k->ncache = mark;
  LLVMBuildStore(B, ca_add(k, j, gen_i64(k, 1)), jv);
  LLVMBuildBr(B, hdr);
  LLVMPositionBuilderAtEnd(B, done);
  return ca_flag_set(k, flag);
}

/* Whether some valid row's max is within 128 of the mask's constant: its skipped blocks'
 * scores, exp(c - max), might not have weighed 0 (a row whose keys are all masked). */
static LLVMValueRef ca_rows_doubtful(GenKern *k, const CaPlan *p, const CaItem *it) {
  LLVMValueRef flag = ca_flag(k);
  GenLoop lr;
  LLVMValueRef r = ca_loop(k, &lr, it->nrows, 1);
  ca_flag_or(k, flag,
             LLVMBuildFCmp(k->B, LLVMRealOLE, ca_ld(k, it->m, r), ca_f(k, p->cval + 128), ""));
  gen_loop_close(k, &lr);
  return ca_flag_set(k, flag);
}

/* The tile's running state reset: max -inf, sums and accumulators 0. */
static void ca_reset(GenKern *k, const CaPlan *p, const CaItem *it) {
  GenLoop l0, lo;
  LLVMValueRef r = ca_loop(k, &l0, gen_i64(k, p->QT), 1);
  ca_st(k, it->m, r, ca_f(k, -INFINITY));
  ca_st(k, it->l, r, ca_f(k, 0));
  gen_loop_close(k, &l0);
  LLVMValueRef o = ca_loop(k, &lo, gen_i64(k, p->QT * p->dvp), 1);
  ca_st(k, it->O, o, ca_f(k, 0));
  gen_loop_close(k, &lo);
}

/* One key block [k0, k0 + kn): packed, scored, masked, softmaxed, accumulated. */
static void ca_block(GenKern *k, const CaPlan *p, const CaItem *it, LLVMValueRef k0,
                     LLVMValueRef kn) {
  LLVMBuilderRef B = k->B;
  /* kn rounded up to whole micro-kernel steps */
  LLVMValueRef knp = ca_mul(
      k, LLVMBuildUDiv(B, ca_add(k, kn, gen_i64(k, p->KJ - 1)), gen_i64(k, p->KJ), ""), p->KJ);
  CaItem bl = *it;
  if (p->direct) { /* a full block reads K and V in place, the short last one is packed */
    LLVMValueRef full = LLVMBuildICmp(B, LLVMIntEQ, kn, gen_i64(k, p->KB), "");
    LLVMBasicBlockRef pack = LLVMAppendBasicBlockInContext(k->cg->C, k->fn, "kvpack");
    LLVMBasicBlockRef join = LLVMAppendBasicBlockInContext(k->cg->C, k->fn, "kvready");
    LLVMBuildCondBr(B, full, join, pack);
    LLVMPositionBuilderAtEnd(B, pack);
    int mark = k->ncache;
    ca_pack_kv(k, p, it, k0, kn, knp);
    k->ncache = mark;
    LLVMBuildBr(B, join);
    LLVMPositionBuilderAtEnd(B, join);
    LLVMValueRef kd = ca_at(k, it->kb, ca_mul(k, k0, p->kstride));
    LLVMValueRef vd = ca_at(k, it->vb, ca_mul(k, k0, p->vstride));
    bl.Kp = LLVMBuildSelect(B, full, kd, it->Kp, "");
    bl.Vp = LLVMBuildSelect(B, full, vd, it->Vp, "");
    bl.ks = LLVMBuildSelect(B, full, gen_i64(k, p->kstride), it->ks, "");
    bl.vs = LLVMBuildSelect(B, full, gen_i64(k, p->vstride), it->vs, "");
  } else {
    ca_pack_kv(k, p, it, k0, kn, knp);
  }
  ca_scores(k, p, &bl, knp);
  ca_chain(k, p, &bl, k0, kn, knp);
  ca_softmax(k, p, &bl, knp);
  ca_pv(k, p, &bl, knp);
}

/* Where the batch item's rows of operand x (read in place: its entry value e, row-major
 * strides st) start. */
static LLVMValueRef ca_rows(GenKern *k, const CaPlan *p, const CaItem *it, const HInstr *e,
                            const HInstr *x, const int8_t *map, const int64_t *st) {
  LLVMValueRef off = gen_i64(k, 0);
  for (int d = 0; d < x->shape.rank; d++)
    if (map[d] >= 0 && p->a.sbatch[map[d]])
      off = ca_add(k, off, ca_mul(k, it->sidx[map[d]], st[d]));
  return ca_at(k, cpu_buffer(k, e), off);
}

/* One item: the tile's queries packed, the state reset, the key blocks, the rows stored. With a
 * mask, blocks it lets nothing through are skipped; where that may have changed a row (its keys
 * all masked by a finite constant), the tile runs again without skipping. */
static void ca_item(GenKern *k, const CaPlan *p, HInstr *in, CaItem *it, LLVMValueRef item,
                    LLVMValueRef out) {
  LLVMBuilderRef B = k->B;
  const OptAttn *a = &p->a;
  LLVMValueRef b = LLVMBuildUDiv(B, item, gen_i64(k, p->nqt), "");
  LLVMValueRef tile = LLVMBuildURem(B, item, gen_i64(k, p->nqt), "");
  for (int d = 0; d < HLO_MAX_RANK; d++)
    it->sidx[d] = gen_i64(k, 0);
  gen_delin_dims(k, b, a->bdim, a->bext, a->nbd, it->sidx);
  if (p->direct) {
    it->kb = ca_rows(k, p, it, p->ek, p->kk, a->kmap, p->kst);
    it->vb = ca_rows(k, p, it, p->ev, p->v, a->vmap, p->vst);
  }
  it->q0 = ca_mul(k, tile, p->QT);
  LLVMValueRef left = LLVMBuildNSWSub(B, gen_i64(k, a->nq), it->q0, "");
  it->nrows = gen_smin(k, left, gen_i64(k, p->QT));
  ca_pack_q(k, p, it);
  LLVMValueRef skip = NULL;
  LLVMBasicBlockRef again = NULL;
  int mark = k->ncache;
  if (p->mask) {
    skip = gen_alloca(k, k->cg->i1);
    LLVMBuildStore(B, LLVMConstInt(k->cg->i1, 1, 0), skip);
    again = LLVMAppendBasicBlockInContext(k->cg->C, k->fn, "tile");
    LLVMBuildBr(B, again);
    LLVMPositionBuilderAtEnd(B, again);
  }
  ca_reset(k, p, it);
  GenLoop lk;
  LLVMValueRef k0 = ca_loop(k, &lk, gen_i64(k, a->nk), p->KB);
  LLVMValueRef kn = gen_smin(k, LLVMBuildNSWSub(B, gen_i64(k, a->nk), k0, ""), gen_i64(k, p->KB));
  if (p->mask) {
    LLVMValueRef go = LLVMBuildOr(B, LLVMBuildNot(B, LLVMBuildLoad2(B, k->cg->i1, skip, ""), ""),
                                  ca_block_live(k, p, it, k0, kn), "");
    LLVMBasicBlockRef then = LLVMAppendBasicBlockInContext(k->cg->C, k->fn, "block");
    LLVMBasicBlockRef join = LLVMAppendBasicBlockInContext(k->cg->C, k->fn, "blockdone");
    LLVMBuildCondBr(B, go, then, join);
    LLVMPositionBuilderAtEnd(B, then);
    ca_block(k, p, it, k0, kn);
    LLVMBuildBr(B, join);
    LLVMPositionBuilderAtEnd(B, join);
  } else {
    ca_block(k, p, it, k0, kn);
  }
  gen_loop_close(k, &lk);
  if (p->mask) {
    LLVMValueRef redo =
        LLVMBuildAnd(B, LLVMBuildLoad2(B, k->cg->i1, skip, ""), ca_rows_doubtful(k, p, it), "");
    LLVMBasicBlockRef rerun = LLVMAppendBasicBlockInContext(k->cg->C, k->fn, "rerun");
    LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(k->cg->C, k->fn, "tiledone");
    LLVMBuildCondBr(B, redo, rerun, done);
    LLVMPositionBuilderAtEnd(B, rerun);
    LLVMBuildStore(B, LLVMConstInt(k->cg->i1, 0, 0), skip);
    LLVMBuildBr(B, again);
    LLVMPositionBuilderAtEnd(B, done);
  }
  k->ncache = mark;
  ca_store(k, p, in, it, out);
}

int cpu_attention_kernel(CpuCg *cg, HInstr *in) {
  if (in->op != OP_FUSION || in->fusion_kind != FK_CUSTOM || in->shape.dt == DT_TUPLE) return 0;
  OptAttn a;
  const char *why;
  if (!opt_attention_match(in->calls[0]->root, &a, &why) || !a.nk || !a.nq || !a.nbatch) return 0;
  CaPlan p;
  ca_plan(&p, cg, in, &a);
  int64_t bytes = 4 * p.per;
  if (bytes * p.nchunks > cg->extra_temp) cg->extra_temp = bytes * p.nchunks;
  GenKern *k = cpu_kern_begin(cg, in);
  LLVMBuilderRef B = k->B;
  k->bind[k->nbind++] = (GenBind){in->calls[0], in, NULL, 0, k->ncache};
  LLVMValueRef out = cpu_buffer(k, in);
  LLVMValueRef chunk = cpu_kern(k)->chunk;
  LLVMValueRef off = ca_mul(k, chunk, bytes);
  LLVMValueRef base = LLVMBuildInBoundsGEP2(
      B, cg->g.i8, cpu_slot(k, (CpuSlot){CPU_SLOT_TEMP, NULL, NULL, cg->temp_base}), &off, 1, "");
  CaItem it;
  LLVMValueRef *arr[] = {&it.Qt, &it.Kp, &it.Vp, &it.St, &it.O, &it.m, &it.l, &it.ref, &it.corr};
  const int64_t offs[] = {p.oq, p.ok, p.ov, p.os, p.oo, p.om, p.ol, p.oref, p.ocorr};
  for (int i = 0; i < 9; i++)
    *arr[i] = ca_at(k, base, gen_i64(k, offs[i]));
  it.ks = gen_i64(k, a.dh);
  it.vs = gen_i64(k, p.dvp);
  /* the chunk's items [lo, hi) */
  int64_t per = (p.items + p.nchunks - 1) / p.nchunks;
  LLVMValueRef lo = ca_mul(k, chunk, per);
  LLVMValueRef hi = gen_smin(k, ca_add(k, lo, gen_i64(k, per)), gen_i64(k, p.items));
  GenLoop li;
  LLVMValueRef item = gen_loop_open(k, &li, lo, hi);
  ca_item(k, &p, in, &it, item, out);
  gen_loop_close(k, &li);
  k->nbind--;
  cg->products[CPU_PROD_ATTENTION]++;
  return cpu_kern_end(k, p.nchunks) ? 1 : -1;
}
