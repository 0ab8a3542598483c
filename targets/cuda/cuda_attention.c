/* targets/cuda/cuda_attention.c: one fused kernel for an attention fusion (split-KV flash
 * decoding).
 *
 * The attention pass leaves softmax(f(Q.K)) . V as a kCustom fusion; opt_attention_match on its
 * root gives the dims. A block (4 warps) takes one batch item, a tile of qt query rows (a power
 * of two up to 8) and one slice of the keys. Lane l holds head elements l, l + 32, .. of every
 * row's query and accumulator. A warp takes kb = 32 / qt keys (at most 8) a step: the lanes'
 * partial dots of all qt x kb (row, key) pairs are reduce-scattered (each halving keeps the
 * half the lane's bit selects and receives the other from its partner: 31 shuffles for 32
 * pairs, not 5 per pair), so that each lane ends with one pair's score; the fusion's
 * elementwise ops run on it through the elemental generator, the product's value entered in
 * its cache at the pair's index (scale, masks, soft-capping: once per pair, not once per lane);
 * the online softmax of each row runs over its group of 32 / qt lanes (running max and sum, the
 * accumulators rescaled once a step); the values' rows are accumulated with each pair's
 * probability broadcast from the lane holding it (shfl.idx). All in f32, FMAs. The warps'
 * states meet in shared memory; with one slice the block writes the output, otherwise each
 * slice writes (max, sum, accumulators) to scratch and a second kernel combines a row's slices
 * (one warp per row) and writes it. The slices fill the SMs in whole waves (about 4 resident
 * blocks per SM): a decode step (a few query rows per key/value head, a long cache) reads each
 * cache once, spread over every SM. The probabilities are never rounded to the values' type
 * (XLA rounds them to bf16 before its second product in a bf16 model): the result is the exact
 * softmax's, within the corpus's bf16 bar of XLA's. */
#include "cuda_attention.h"

#include <math.h>
#include <string.h>

#define AT_WARPS 4    /* warps per block */
#define AT_QT 8       /* query rows per block, at most */
#define AT_KB 8       /* keys per step of a warp, at most */
#define AT_RESIDENT 4 /* blocks of the kernel resident per SM (~128 registers a thread) */

void cuda_at_plan(AttK *t, const OptAttn *match) {
  memset(t, 0, sizeof *t);
  t->a = *match;
  const OptAttn *a = &t->a;
  t->q = a->sdot->ops[a->qop];
  t->kk = a->sdot->ops[1 - a->qop];
  t->v = a->odot->ops[a->vop];
  t->srank = a->sdot->shape.rank;
  t->dt = (int)((a->dh + 31) / 32);
  t->dvt = (int)((a->dv + 31) / 32);
}

void cuda_at_slices(AttK *t, int64_t resident, int64_t minkeys) {
  const OptAttn *a = &t->a;
  int64_t blocks = a->nbatch * t->nqt, cap = resident * CU_SMS;
  int64_t maxns = a->nk / minkeys < 1 ? 1 : a->nk / minkeys, ns = 1, best = -1;
  for (int64_t n = 1; n <= maxns && n <= 256; n++) {
    int64_t cost = (blocks * n + cap - 1) / cap * ((a->nk + n - 1) / n);
    if (best < 0 || cost < best) best = cost, ns = n;
  }
  t->chunk = (a->nk + ns - 1) / ns;
  t->ns = (a->nk + t->chunk - 1) / t->chunk;
}

/* The CUDA-core kernel's tiles: qt rows (a power of two: rows x keys per step fill the 32
 * lanes), kb keys a warp step, slices of at least 16 keys a warp. */
static void at_plan_fma(AttK *t) {
  t->qt = 1;
  while (t->qt < t->a.nq && t->qt < AT_QT)
    t->qt *= 2;
  t->kb = 32 / (int)t->qt < AT_KB ? 32 / (int)t->qt : AT_KB;
  t->nqt = (t->a.nq + t->qt - 1) / t->qt;
  cuda_at_slices(t, AT_RESIDENT, 16 * AT_WARPS);
}

/* ------------------------------------------------------------------ small IR helpers */

LLVMValueRef cuda_at_f(GenKern *k, double v) { return LLVMConstReal(k->cg->f32, v); }

static LLVMValueRef at_intr(GenKern *k, const char *name, LLVMValueRef x, LLVMValueRef y) {
  LLVMValueRef args[2] = {x, y};
  return cuda_intrinsic(k, name, k->cg->f32, args, y ? 2 : 1);
}

/* exp(x) as 2^(x log2 e) on the special function unit. */
LLVMValueRef cuda_at_exp(GenKern *k, LLVMValueRef x) {
  return at_intr(k, "llvm.nvvm.ex2.approx.f", LLVMBuildFMul(k->B, x, cuda_at_f(k, M_LOG2E), ""),
                 NULL);
}

LLVMValueRef cuda_at_max(GenKern *k, LLVMValueRef x, LLVMValueRef y) {
  return at_intr(k, "llvm.maxnum", x, y);
}

LLVMValueRef cuda_at_ld(GenKern *k, LLVMValueRef p) {
  return LLVMBuildLoad2(k->B, k->cg->f32, p, "");
}
void cuda_at_st(GenKern *k, LLVMValueRef p, LLVMValueRef v) { LLVMBuildStore(k->B, v, p); }

/* The f32 value of operand x (a parameter of the fusion's body) at the index whose dims map to
 * S dims through map (-1: the head dim, at c), 0 where the head index is out of range. */
static LLVMValueRef at_load(GenKern *k, const HInstr *x, const int8_t *map, LLVMValueRef *sidx,
                            LLVMValueRef c, LLVMValueRef inb) {
  LLVMValueRef cc = inb ? LLVMBuildSelect(k->B, inb, c, gen_i64(k, 0), "") : c;
  LLVMValueRef v = gen_value_mapped(k, x, map, sidx, cc);
  if (!v) return cuda_at_f(k, 0);
  v = gen_convert(k, v, x->shape.dt, DT_F32);
  return inb ? LLVMBuildSelect(k->B, inb, v, cuda_at_f(k, 0), "") : v;
}

/* Lane l's head index for its element j (l + 32 j) and whether it is below n (NULL: always). */
static LLVMValueRef at_lane_c(GenKern *k, LLVMValueRef lane, int j, int64_t n, LLVMValueRef *inb) {
  LLVMValueRef c = LLVMBuildNSWAdd(k->B, lane, gen_i64(k, 32 * j), "");
  *inb = n % 32 ? LLVMBuildICmp(k->B, LLVMIntSLT, c, gen_i64(k, n), "") : NULL;
  return c;
}

/* ------------------------------------------------------------------ the kernels */

/* The S index of row r (query row qrow of batch item b, clamped into range). */
void cuda_at_row(GenKern *k, const AttK *t, LLVMValueRef b, LLVMValueRef qrow, AttRow *r) {
  LLVMBuilderRef B = k->B;
  r->qrow = qrow;
  r->valid = LLVMBuildICmp(B, LLVMIntSLT, qrow, gen_i64(k, t->a.nq), "");
  LLVMValueRef qc = LLVMBuildSelect(B, r->valid, qrow, gen_i64(k, t->a.nq - 1), "");
  for (int d = 0; d < HLO_MAX_RANK; d++)
    r->sidx[d] = gen_i64(k, 0);
  gen_delin_dims(k, b, t->a.bdim, t->a.bext, t->a.nbd, r->sidx);
  gen_delin_dims(k, qc, t->a.qdim, t->a.qext, t->a.nqd, r->sidx);
}

void cuda_at_store1(GenKern *k, HInstr *in, const OptAttn *a, LLVMValueRef out, const AttRow *r,
                    LLVMValueRef c, LLVMValueRef ok, LLVMValueRef v) {
  LLVMBuilderRef B = k->B;
  LLVMBasicBlockRef then = LLVMAppendBasicBlockInContext(k->cg->C, k->fn, "store");
  LLVMBasicBlockRef join = LLVMAppendBasicBlockInContext(k->cg->C, k->fn, "stored");
  LLVMBuildCondBr(B, ok, then, join);
  LLVMPositionBuilderAtEnd(B, then);
  int mark = k->ncache;
  LLVMValueRef oidx[HLO_MAX_RANK];
  for (int d = 0; d < in->shape.rank; d++)
    oidx[d] = a->omap[d] < 0 ? c : r->sidx[a->omap[d]];
  gen_store_elem(k, out, &in->shape, oidx, gen_convert(k, v, DT_F32, in->shape.dt));
  LLVMBuildBr(B, join);
  LLVMPositionBuilderAtEnd(B, join);
  k->ncache = mark;
}

/* Store the output of row r: acc[j] / sum for the lane's head elements. */
static void at_store(GenKern *k, const AttK *t, HInstr *in, LLVMValueRef out, const AttRow *r,
                     LLVMValueRef lane, LLVMValueRef *acc, LLVMValueRef sum) {
  for (int j = 0; j < t->dvt; j++) {
    LLVMValueRef inb;
    LLVMValueRef c = at_lane_c(k, lane, j, t->a.dv, &inb);
    LLVMValueRef ok = inb ? LLVMBuildAnd(k->B, r->valid, inb, "") : r->valid;
    cuda_at_store1(k, in, &t->a, out, r, c, ok, LLVMBuildFDiv(k->B, acc[j], sum, ""));
  }
}

/* Slot i (i64) of the f32 array at p (global or shared). */
LLVMValueRef cuda_at_slot(GenKern *k, LLVMValueRef p, LLVMValueRef i) {
  return LLVMBuildInBoundsGEP2(k->B, k->cg->f32, p, &i, 1, "");
}

int64_t cuda_at_slots(const AttK *t) { return 2 + 32 * t->dvt; }

int64_t cuda_at_part_bytes(const AttK *t) {
  return t->ns > 1 ? 4 * t->a.nbatch * t->a.nq * t->ns * cuda_at_slots(t) : 0;
}

/* The running state of one warp: each lane's row's max and sum (lanes of a row group agree),
 * and the lane's accumulators of every row. */
typedef struct AttState {
  LLVMValueRef m, l, o[AT_QT][8];
} AttState;

/* The lanes' partial dots v[0..n) (n a power of two <= 32) summed over the warp, scattered:
 * lane l ends with the total of value l >> (5 - log2 n). Each halving step keeps the half its
 * lane bit selects and receives the other half from the partner lane. */
static LLVMValueRef at_reduce_scatter(GenKern *k, LLVMValueRef lane, LLVMValueRef *v, int n) {
  LLVMBuilderRef B = k->B;
  int off = 16;
  for (; n > 1; n /= 2, off /= 2) {
    LLVMValueRef bit =
        LLVMBuildICmp(B, LLVMIntNE, LLVMBuildAnd(B, lane, gen_i64(k, off), ""), gen_i64(k, 0), "");
    for (int i = 0; i < n / 2; i++) {
      LLVMValueRef send = LLVMBuildSelect(B, bit, v[i], v[i + n / 2], "");
      LLVMValueRef keep = LLVMBuildSelect(B, bit, v[i + n / 2], v[i], "");
      v[i] = LLVMBuildFAdd(B, keep, cuda_shfl(k, send, off, CU_SHFL_BFLY), "");
    }
  }
  for (; off >= 1; off /= 2)
    v[0] = LLVMBuildFAdd(B, v[0], cuda_shfl(k, v[0], off, CU_SHFL_BFLY), "");
  return v[0];
}

/* x combined over the lanes of each group of w (a power of two) with max or add. */
LLVMValueRef cuda_at_group(GenKern *k, LLVMValueRef x, int w, bool max) {
  for (int off = w / 2; off >= 1; off /= 2) {
    LLVMValueRef y = cuda_shfl(k, x, off, CU_SHFL_BFLY);
    x = max ? cuda_at_max(k, x, y) : LLVMBuildFAdd(k->B, x, y, "");
  }
  return x;
}

/* The keys of this warp's part of the slice [k0, kend), t->kb per step: the partial dots of
 * every (row, key) pair, reduce-scattered so that each lane holds one pair's score (pairs
 * repeated when fewer than 32); the fusion's elementwise ops on it at the pair's index (me:
 * the lane's row); the online softmax per row (a group of 32 / qt lanes); the values' rows
 * accumulated with each pair's probability broadcast from the lane holding it. */
static void at_keys(GenKern *k, const AttK *t, const AttRow *me, LLVMValueRef lane,
                    LLVMValueRef warp, LLVMValueRef k0, LLVMValueRef kend, LLVMValueRef qv[][8],
                    AttState *s) {
  LLVMBuilderRef B = k->B;
  int kbn = t->kb, np = t->qt * kbn, sh = 0, w = 32 / t->qt;
  while ((np << sh) < 32)
    sh++;
  GenLoop kl;
  LLVMValueRef first = LLVMBuildNSWAdd(B, k0, LLVMBuildNSWMul(B, warp, gen_i64(k, kbn), ""), "");
  LLVMValueRef kw = gen_loop_open_step(k, &kl, first, kend, gen_i64(k, kbn * AT_WARPS));
  LLVMValueRef last = LLVMBuildNSWSub(B, kend, gen_i64(k, 1), "");
  LLVMValueRef kidx[8][HLO_MAX_RANK], val[32];
  for (int kb = 0; kb < kbn && !k->failed; kb++) {
    LLVMValueRef key = LLVMBuildNSWAdd(B, kw, gen_i64(k, kb), "");
    LLVMValueRef kc =
        LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSLT, key, kend, ""), key, last, "");
    memcpy(kidx[kb], me->sidx, sizeof kidx[kb]);
    gen_delin_dims(k, kc, t->a.kdim, t->a.kext, t->a.nkd, kidx[kb]);
    LLVMValueRef kv[8];
    for (int j = 0; j < t->dt; j++) {
      LLVMValueRef inb, c = at_lane_c(k, lane, j, t->a.dh, &inb);
      kv[j] = at_load(k, t->kk, t->a.kmap, kidx[kb], c, inb);
    }
    for (int r = 0; r < t->qt; r++) {
      LLVMValueRef acc = cuda_at_f(k, 0);
      for (int j = 0; j < t->dt; j++)
        acc = cuda_fma(k, qv[r][j], kv[j], acc);
      val[r * kbn + kb] = acc;
    }
  }
  /* this lane's pair: row me (lane / w), key kw + (lane >> sh) % kbn */
  LLVMValueRef dot = at_reduce_scatter(k, lane, val, np);
  LLVMValueRef mykb =
      LLVMBuildURem(B, LLVMBuildLShr(B, lane, gen_i64(k, sh), ""), gen_i64(k, kbn), "");
  LLVMValueRef key = LLVMBuildNSWAdd(B, kw, mykb, "");
  LLVMValueRef valid = LLVMBuildICmp(B, LLVMIntSLT, key, kend, "");
  LLVMValueRef full[HLO_MAX_RANK];
  memcpy(full, me->sidx, sizeof full);
  gen_delin_dims(k, LLVMBuildSelect(B, valid, key, last, ""), t->a.kdim, t->a.kext, t->a.nkd, full);
  const HInstr *sd = t->a.sdot;
  gen_cache_add(k, sd, t->srank, full, gen_convert(k, dot, DT_F32, sd->shape.dt));
  LLVMValueRef e = gen_value(k, t->a.score, full);
  if (!e) return;
  e = LLVMBuildSelect(B, valid, gen_convert(k, e, t->a.score->shape.dt, DT_F32),
                      cuda_at_f(k, -INFINITY), "");
  /* online softmax of the lane's row */
  LLVMValueRef mo = cuda_at_ld(k, s->m), mn = cuda_at_max(k, mo, cuda_at_group(k, e, w, true));
  /* all scores -inf so far: keep 0 as the reference (exp(-inf - -inf) would be NaN) */
  LLVMValueRef ninf = LLVMBuildFCmp(B, LLVMRealOEQ, mn, cuda_at_f(k, -INFINITY), "");
  LLVMValueRef ref = LLVMBuildSelect(B, ninf, cuda_at_f(k, 0), mn, "");
  LLVMValueRef corr = cuda_at_exp(k, LLVMBuildFSub(B, mo, ref, ""));
  LLVMValueRef p = cuda_at_exp(k, LLVMBuildFSub(B, e, ref, ""));
  LLVMValueRef dup = LLVMBuildICmp(
      B, LLVMIntEQ, LLVMBuildAnd(B, lane, gen_i64(k, (1 << sh) - 1), ""), gen_i64(k, 0), "");
  LLVMValueRef psum = cuda_at_group(k, LLVMBuildSelect(B, dup, p, cuda_at_f(k, 0), ""), w, false);
  cuda_at_st(k, s->m, mn);
  cuda_at_st(k, s->l, cuda_fma(k, cuda_at_ld(k, s->l), corr, psum));
  LLVMValueRef o[AT_QT][8];
  for (int r = 0; r < t->qt; r++) {
    LLVMValueRef cr = cuda_shfl(k, corr, r * w, CU_SHFL_IDX);
    for (int j = 0; j < t->dvt; j++)
      o[r][j] = LLVMBuildFMul(B, cuda_at_ld(k, s->o[r][j]), cr, "");
  }
  for (int kb = 0; kb < kbn && !k->failed; kb++) {
    LLVMValueRef vv[8];
    for (int j = 0; j < t->dvt; j++) {
      LLVMValueRef inb, c = at_lane_c(k, lane, j, t->a.dv, &inb);
      vv[j] = at_load(k, t->v, t->a.vmap, kidx[kb], c, inb);
    }
    for (int r = 0; r < t->qt; r++) {
      LLVMValueRef pr = cuda_shfl(k, p, (r * kbn + kb) << sh, CU_SHFL_IDX);
      for (int j = 0; j < t->dvt; j++)
        o[r][j] = cuda_fma(k, pr, vv[j], o[r][j]);
    }
  }
  for (int r = 0; r < t->qt; r++)
    for (int j = 0; j < t->dvt; j++)
      cuda_at_st(k, s->o[r][j], o[r][j]);
  gen_loop_close(k, &kl);
}

/* Combine the warps' states of row r (smem: per warp, per row: max, sum, dv accumulators):
 * *mx, *sum and acc[] receive the block's. */
static void at_combine(GenKern *k, const AttK *t, LLVMValueRef smem, int r, LLVMValueRef lane,
                       LLVMValueRef *mx, LLVMValueRef *sum, LLVMValueRef *acc) {
  LLVMBuilderRef B = k->B;
  int64_t per = cuda_at_slots(t);
  LLVMValueRef mw[AT_WARPS], M = cuda_at_f(k, -INFINITY);
  for (int w = 0; w < AT_WARPS; w++) {
    mw[w] = cuda_at_ld(k, cuda_at_slot(k, smem, gen_i64(k, (w * t->qt + r) * per)));
    M = cuda_at_max(k, M, mw[w]);
  }
  LLVMValueRef ninf = LLVMBuildFCmp(B, LLVMRealOEQ, M, cuda_at_f(k, -INFINITY), "");
  LLVMValueRef ref = LLVMBuildSelect(B, ninf, cuda_at_f(k, 0), M, "");
  LLVMValueRef L = cuda_at_f(k, 0);
  for (int j = 0; j < t->dvt; j++)
    acc[j] = cuda_at_f(k, 0);
  for (int w = 0; w < AT_WARPS; w++) {
    LLVMValueRef f = cuda_at_exp(k, LLVMBuildFSub(B, mw[w], ref, ""));
    int64_t base = (w * t->qt + r) * per;
    L = LLVMBuildFAdd(
        B, L, LLVMBuildFMul(B, f, cuda_at_ld(k, cuda_at_slot(k, smem, gen_i64(k, base + 1))), ""),
        "");
    for (int j = 0; j < t->dvt; j++) {
      LLVMValueRef i = LLVMBuildNSWAdd(B, lane, gen_i64(k, base + 2 + 32 * j), "");
      acc[j] = LLVMBuildFAdd(B, acc[j],
                             LLVMBuildFMul(B, f, cuda_at_ld(k, cuda_at_slot(k, smem, i)), ""), "");
    }
  }
  *mx = M;
  *sum = L;
}

/* The main kernel: grid = batch items x query tiles x key slices. */
static bool at_main(CudaCg *cc, HInstr *in, const AttK *t, CuPtr pp) {
  CuStep *st;
  LLVMValueRef part = NULL;
  bool split = t->ns > 1;
  GenKern *k = cuda_kbegin(cc, in, split ? "attention-split" : "attention", split, &pp, &part, &st);
  LLVMBuilderRef B = k->B;
  cuda_kbind_fusion(k, in);
  LLVMValueRef out = cuda_kbuffer(k, in);
  st->block = 32 * AT_WARPS;
  st->grid = t->a.nbatch * t->nqt * t->ns;
  LLVMValueRef tid = cuda_sreg(k, "llvm.nvvm.read.ptx.sreg.tid.x");
  LLVMValueRef bid = cuda_sreg(k, "llvm.nvvm.read.ptx.sreg.ctaid.x");
  LLVMValueRef lane = LLVMBuildAnd(B, tid, gen_i64(k, 31), "");
  LLVMValueRef warp = LLVMBuildLShr(B, tid, gen_i64(k, 5), "");
  LLVMValueRef slice = LLVMBuildURem(B, bid, gen_i64(k, t->ns), "");
  LLVMValueRef rest = LLVMBuildUDiv(B, bid, gen_i64(k, t->ns), "");
  LLVMValueRef qtile = LLVMBuildURem(B, rest, gen_i64(k, t->nqt), "");
  LLVMValueRef b = LLVMBuildUDiv(B, rest, gen_i64(k, t->nqt), "");
  AttRow rows[AT_QT], me;
  LLVMValueRef qv[AT_QT][8];
  AttState s;
  for (int r = 0; r < t->qt; r++) {
    cuda_at_row(k, t, b, cuda_lin(k, qtile, t->qt, gen_i64(k, r)), &rows[r]);
    for (int j = 0; j < t->dt; j++) {
      LLVMValueRef inb, c = at_lane_c(k, lane, j, t->a.dh, &inb);
      qv[r][j] = at_load(k, t->q, t->a.qmap, rows[r].sidx, c, inb);
    }
    for (int j = 0; j < t->dvt; j++) {
      s.o[r][j] = gen_alloca(k, k->cg->f32);
      cuda_at_st(k, s.o[r][j], cuda_at_f(k, 0));
    }
  }
  /* the lane's own row in the reduce-scattered scores: lane / (32 / qt) */
  LLVMValueRef myr = LLVMBuildUDiv(B, lane, gen_i64(k, 32 / t->qt), "");
  cuda_at_row(k, t, b, cuda_lin(k, qtile, t->qt, myr), &me);
  s.m = gen_alloca(k, k->cg->f32);
  s.l = gen_alloca(k, k->cg->f32);
  cuda_at_st(k, s.m, cuda_at_f(k, -INFINITY));
  cuda_at_st(k, s.l, cuda_at_f(k, 0));
  LLVMValueRef k0 = LLVMBuildNSWMul(B, slice, gen_i64(k, t->chunk), "");
  LLVMValueRef k1 = LLVMBuildNSWAdd(B, k0, gen_i64(k, t->chunk), "");
  LLVMValueRef kend = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSLT, k1, gen_i64(k, t->a.nk), ""),
                                      k1, gen_i64(k, t->a.nk), "");
  at_keys(k, t, &me, lane, warp, k0, kend, qv, &s);
  /* the warps' states into shared memory */
  int64_t per = cuda_at_slots(t);
  LLVMValueRef smem = cuda_smem(k, st, k->cg->f32, AT_WARPS * t->qt * per);
  for (int r = 0; r < t->qt; r++) {
    LLVMValueRef base = cuda_lin(k, warp, t->qt * per, gen_i64(k, r * per));
    int from = (int)(r * (32 / t->qt)); /* a lane of row r's group */
    cuda_at_st(k, cuda_at_slot(k, smem, base), cuda_shfl(k, cuda_at_ld(k, s.m), from, CU_SHFL_IDX));
    cuda_at_st(k, cuda_at_slot(k, smem, LLVMBuildNSWAdd(B, base, gen_i64(k, 1), "")),
               cuda_shfl(k, cuda_at_ld(k, s.l), from, CU_SHFL_IDX));
    for (int j = 0; j < t->dvt; j++) {
      LLVMValueRef i =
          LLVMBuildNSWAdd(B, base, LLVMBuildNSWAdd(B, lane, gen_i64(k, 2 + 32 * j), ""), "");
      cuda_at_st(k, cuda_at_slot(k, smem, i), cuda_at_ld(k, s.o[r][j]));
    }
  }
  cuda_barrier(k);
  /* warp w combines and writes rows w, w + AT_WARPS, ... */
  for (int r = 0; r < t->qt && !k->failed; r++) {
    LLVMValueRef mine = LLVMBuildICmp(B, LLVMIntEQ, warp, gen_i64(k, r % AT_WARPS), "");
    LLVMBasicBlockRef then = LLVMAppendBasicBlockInContext(k->cg->C, k->fn, "row");
    LLVMBasicBlockRef join = LLVMAppendBasicBlockInContext(k->cg->C, k->fn, "rowdone");
    LLVMBuildCondBr(B, mine, then, join);
    LLVMPositionBuilderAtEnd(B, then);
    int mark = k->ncache;
    LLVMValueRef M, L, acc[8];
    at_combine(k, t, smem, r, lane, &M, &L, acc);
    if (!split) {
      at_store(k, t, in, out, &rows[r], lane, acc, L);
    } else { /* partial (max, sum, accumulators) of row (b, qrow), slice */
      LLVMValueRef row = cuda_lin(k, b, t->a.nq, rows[r].qrow);
      LLVMValueRef base = LLVMBuildNSWMul(B, cuda_lin(k, row, t->ns, slice), gen_i64(k, per), "");
      LLVMValueRef ok = rows[r].valid;
      LLVMBasicBlockRef w1 = LLVMAppendBasicBlockInContext(k->cg->C, k->fn, "part");
      LLVMBasicBlockRef w2 = LLVMAppendBasicBlockInContext(k->cg->C, k->fn, "partdone");
      LLVMBuildCondBr(B, ok, w1, w2);
      LLVMPositionBuilderAtEnd(B, w1);
      cuda_at_st(k, cuda_at_slot(k, part, base), M);
      cuda_at_st(k, cuda_at_slot(k, part, LLVMBuildNSWAdd(B, base, gen_i64(k, 1), "")), L);
      for (int j = 0; j < t->dvt; j++) {
        LLVMValueRef i =
            LLVMBuildNSWAdd(B, base, LLVMBuildNSWAdd(B, lane, gen_i64(k, 2 + 32 * j), ""), "");
        cuda_at_st(k, cuda_at_slot(k, part, i), acc[j]);
      }
      LLVMBuildBr(B, w2);
      LLVMPositionBuilderAtEnd(B, w2);
    }
    LLVMBuildBr(B, join);
    LLVMPositionBuilderAtEnd(B, join);
    k->ncache = mark;
  }
  return cuda_kend(k);
}

/* The second kernel of a split: one warp per row combines its slices and writes the row. */
bool cuda_at_finish(CudaCg *cc, HInstr *in, const AttK *t, CuPtr pp) {
  CuStep *st;
  LLVMValueRef part;
  GenKern *k = cuda_kbegin(cc, in, "attention-finish", 1, &pp, &part, &st);
  LLVMBuilderRef B = k->B;
  cuda_kbind_fusion(k, in);
  LLVMValueRef out = cuda_kbuffer(k, in);
  int64_t rowsn = t->a.nbatch * t->a.nq, per = cuda_at_slots(t), nw = 8;
  st->block = 32 * nw;
  st->grid = (rowsn + nw - 1) / nw;
  LLVMValueRef tid = cuda_sreg(k, "llvm.nvvm.read.ptx.sreg.tid.x");
  LLVMValueRef bid = cuda_sreg(k, "llvm.nvvm.read.ptx.sreg.ctaid.x");
  LLVMValueRef lane = LLVMBuildAnd(B, tid, gen_i64(k, 31), "");
  LLVMValueRef row = cuda_lin(k, bid, nw, LLVMBuildLShr(B, tid, gen_i64(k, 5), ""));
  LLVMValueRef have = LLVMBuildICmp(B, LLVMIntSLT, row, gen_i64(k, rowsn), "");
  LLVMBasicBlockRef then = LLVMAppendBasicBlockInContext(k->cg->C, k->fn, "row");
  LLVMBasicBlockRef join = LLVMAppendBasicBlockInContext(k->cg->C, k->fn, "rowdone");
  LLVMBuildCondBr(B, have, then, join);
  LLVMPositionBuilderAtEnd(B, then);
  AttRow r;
  cuda_at_row(k, t, LLVMBuildUDiv(B, row, gen_i64(k, t->a.nq), ""),
              LLVMBuildURem(B, row, gen_i64(k, t->a.nq), ""), &r);
  LLVMValueRef M = cuda_at_f(k, -INFINITY);
  LLVMValueRef rb = LLVMBuildNSWMul(B, row, gen_i64(k, t->ns * per), "");
  for (int64_t sl = 0; sl < t->ns; sl++)
    M = cuda_at_max(
        k, M,
        cuda_at_ld(k, cuda_at_slot(k, part, LLVMBuildNSWAdd(B, rb, gen_i64(k, sl * per), ""))));
  LLVMValueRef ninf = LLVMBuildFCmp(B, LLVMRealOEQ, M, cuda_at_f(k, -INFINITY), "");
  LLVMValueRef ref = LLVMBuildSelect(B, ninf, cuda_at_f(k, 0), M, "");
  LLVMValueRef L = cuda_at_f(k, 0), acc[8];
  for (int j = 0; j < t->dvt; j++)
    acc[j] = cuda_at_f(k, 0);
  for (int64_t sl = 0; sl < t->ns; sl++) {
    LLVMValueRef base = LLVMBuildNSWAdd(B, rb, gen_i64(k, sl * per), "");
    LLVMValueRef f =
        cuda_at_exp(k, LLVMBuildFSub(B, cuda_at_ld(k, cuda_at_slot(k, part, base)), ref, ""));
    LLVMValueRef l1 =
        cuda_at_ld(k, cuda_at_slot(k, part, LLVMBuildNSWAdd(B, base, gen_i64(k, 1), "")));
    L = LLVMBuildFAdd(B, L, LLVMBuildFMul(B, f, l1, ""), "");
    for (int j = 0; j < t->dvt; j++) {
      LLVMValueRef i =
          LLVMBuildNSWAdd(B, base, LLVMBuildNSWAdd(B, lane, gen_i64(k, 2 + 32 * j), ""), "");
      acc[j] = LLVMBuildFAdd(B, acc[j],
                             LLVMBuildFMul(B, f, cuda_at_ld(k, cuda_at_slot(k, part, i)), ""), "");
    }
  }
  at_store(k, t, in, out, &r, lane, acc, L);
  LLVMBuildBr(B, join);
  LLVMPositionBuilderAtEnd(B, join);
  return cuda_kend(k);
}

bool cuda_attention(CudaCg *cc, HInstr *in, bool *taken) {
  *taken = false;
  if (in->op != OP_FUSION || in->fusion_kind != FK_CUSTOM || in->shape.dt == DT_TUPLE) return true;
  OptAttn a;
  const char *why;
  if (!opt_attention_match(in->calls[0]->root, &a, &why) || a.dh > 256 || a.dv > 256 || !a.nk ||
      !a.nq || !a.nbatch)
    return true;
  *taken = true;
  AttK t;
  cuda_at_plan(&t, &a);
  if (cuda_attention_mma_ok(&t)) return cuda_attention_mma(cc, in, &t);
  at_plan_fma(&t);
  CuPtr pp = cuda_scratch(cc, cuda_at_part_bytes(&t));
  if (!at_main(cc, in, &t, pp)) return false;
  return t.ns == 1 || cuda_at_finish(cc, in, &t, pp);
}
