/* targets/cuda/cuda_attention_mma.c: the attention fusion on the tensor cores, for queries, keys
 * and values of one 16-bit type (bf16 or f16) and any number of query rows (prefill).
 *
 * FlashAttention-2's form on mma.sync m16n8k16 (f32 accumulation). A first kernel stages the
 * keys and values (whatever the fusion computes them from: RoPE, grouped-query broadcasts,
 * transposes) as rows of the head dim in the operands' type, [batch item][key][head], so that
 * the main kernel copies 64-key tiles of each into shared memory with cp.async (16-byte
 * chunks, swizzled: chunk ^ (row % 8), so that the 8 rows one ldmatrix reads fall in different
 * banks). A block (4 warps) takes 64 query rows of one batch item (a warp 16) and one slice of
 * the keys; a warp keeps its rows' query fragments in registers (generated once, through the
 * elemental generator), and per 64-key step: S = Q.K^T (K fragments by ldmatrix), the fusion's
 * elementwise ops on each score at its index (scale, masks, soft-capping), the online softmax
 * of its two rows per lane (max over the quad holding a row), P rounded to the operands' type
 * and P.V (V fragments by ldmatrix.trans) into f32 accumulators rescaled once a step. The V
 * tile's copy overlaps the scores, the next K tile's the second product. With one slice the
 * block writes the output divided by the row sums; else each slice writes (max, sum,
 * accumulators) and the CUDA-core file's second kernel combines them. Like XLA in a bf16
 * model, the probabilities reach the second product rounded to bf16 (here before the division
 * by the row sum, which is applied to the f32 result). */
#include "cuda_attention.h"

#include <math.h>
#include <string.h>

#define AM_WARPS 4 /* warps per block */
#define AM_THREADS (32 * AM_WARPS)
#define AM_ROWS (16 * AM_WARPS) /* query rows per block */
#define AM_KEYS 64              /* keys per step: the K and V tiles in shared memory */
#define AM_RESIDENT 2           /* blocks resident per SM (registers: ~200 a thread) */

bool cuda_attention_mma_ok(const AttK *t) {
  return t->a.nq >= 16 && opt_attention_16bit(&t->a, CU_MMA_HEAD);
}

/* ------------------------------------------------------------------ IR pieces */

/* A call of intrinsic name; an overloaded one (ldmatrix) on its first argument's type. */
static LLVMValueRef am_call(GenKern *k, const char *name, LLVMValueRef *args, int n) {
  return cuda_intrinsic(k, name, n ? LLVMTypeOf(args[0]) : NULL, args, n);
}

static LLVMValueRef am_i32(GenKern *k, int64_t v) {
  return LLVMConstInt(k->cg->i32, (unsigned long long)v, 1);
}

static LLVMValueRef am_add(GenKern *k, LLVMValueRef a, int64_t b) {
  return LLVMBuildNSWAdd(k->B, a, gen_i64(k, b), "");
}

/* The element's 16-bit value (operand x at S index sidx, head index c; an i16 0 if generation
 * failed). */
static LLVMValueRef am_bits(GenKern *k, const HInstr *x, const int8_t *map, LLVMValueRef *sidx,
                            LLVMValueRef c) {
  LLVMValueRef v = gen_value_mapped(k, x, map, sidx, c);
  return v ? v : LLVMConstNull(k->cg->i16);
}

/* f32 x, y rounded to the 16-bit type t, packed (x in the low half). */
static LLVMValueRef am_pack_f32(GenKern *k, DType t, LLVMValueRef x, LLVMValueRef y) {
  return cuda_pack16(k, gen_convert(k, x, DT_F32, t), gen_convert(k, y, DT_F32, t));
}

/* Byte offset in a tile of rows of nch 16-byte chunks of chunk c of row r (swizzled). */
static LLVMValueRef am_swz(GenKern *k, LLVMValueRef r, LLVMValueRef c, int64_t nch) {
  LLVMBuilderRef B = k->B;
  int64_t m = (nch < 8 ? nch : 8) - 1;
  LLVMValueRef x = LLVMBuildXor(B, c, LLVMBuildAnd(B, r, gen_i64(k, m), ""), "");
  return LLVMBuildNSWMul(B, cuda_lin(k, r, nch, x), gen_i64(k, 16), "");
}

static LLVMValueRef am_byte(GenKern *k, LLVMValueRef p, LLVMValueRef off) {
  return LLVMBuildInBoundsGEP2(k->B, k->cg->i8, p, &off, 1, "");
}

/* ------------------------------------------------------------------ staging */

/* Unit u (16 bytes: 8 head elements) of operand x staged as [batch item][key][head] (nch
 * chunks a row) at dst. */
static void am_stage_unit(GenKern *k, const AttK *t, const HInstr *x, const int8_t *map,
                          int64_t nch, LLVMValueRef u, LLVMValueRef dst) {
  LLVMBuilderRef B = k->B;
  int64_t dims[3] = {t->a.nbatch, t->a.nk, nch};
  LLVMValueRef sub[3], sidx[HLO_MAX_RANK];
  gen_delin(k, u, dims, 3, sub);
  for (int d = 0; d < HLO_MAX_RANK; d++)
    sidx[d] = gen_i64(k, 0);
  gen_delin_dims(k, sub[0], t->a.bdim, t->a.bext, t->a.nbd, sidx);
  gen_delin_dims(k, sub[1], t->a.kdim, t->a.kext, t->a.nkd, sidx);
  LLVMValueRef c0 = LLVMBuildNSWMul(B, sub[2], gen_i64(k, 8), "");
  LLVMTypeRef v4 = LLVMVectorType(k->cg->i32, 4);
  LLVMValueRef vec = LLVMGetUndef(v4);
  for (int i = 0; i < 4; i++) {
    LLVMValueRef lo = am_bits(k, x, map, sidx, am_add(k, c0, 2 * i));
    LLVMValueRef hi = am_bits(k, x, map, sidx, am_add(k, c0, 2 * i + 1));
    vec = LLVMBuildInsertElement(B, vec, cuda_pack16(k, lo, hi), am_i32(k, i), "");
  }
  LLVMValueRef p = am_byte(k, dst, LLVMBuildNSWMul(B, u, gen_i64(k, 16), ""));
  LLVMSetAlignment(LLVMBuildStore(B, vec, p), 16);
}

/* The keys' and values' staging kernel: one thread per 16-byte unit, K's units then V's. */
static bool am_stage(CudaCg *cc, HInstr *in, const AttK *t, CuPtr sp, int64_t voff) {
  CuStep *st;
  LLVMValueRef base;
  GenKern *k = cuda_kbegin(cc, in, "attention-stage", 1, &sp, &base, &st);
  LLVMBuilderRef B = k->B;
  cuda_kbind_fusion(k, in);
  int64_t nck = t->a.dh / 8, ncv = t->a.dv / 8;
  int64_t uk = t->a.nbatch * t->a.nk * nck, uv = t->a.nbatch * t->a.nk * ncv;
  st->block = 256;
  st->grid = (uk + uv + 255) / 256;
  LLVMValueRef u = cuda_lin(k, cuda_sreg(k, "llvm.nvvm.read.ptx.sreg.ctaid.x"), 256,
                            cuda_sreg(k, "llvm.nvvm.read.ptx.sreg.tid.x"));
  LLVMBasicBlockRef kb = LLVMAppendBasicBlockInContext(k->cg->C, k->fn, "stagek");
  LLVMBasicBlockRef vt = LLVMAppendBasicBlockInContext(k->cg->C, k->fn, "stagevtest");
  LLVMBasicBlockRef vb = LLVMAppendBasicBlockInContext(k->cg->C, k->fn, "stagev");
  LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(k->cg->C, k->fn, "staged");
  LLVMBuildCondBr(B, LLVMBuildICmp(B, LLVMIntSLT, u, gen_i64(k, uk), ""), kb, vt);
  int mark = k->ncache;
  LLVMPositionBuilderAtEnd(B, kb);
  am_stage_unit(k, t, t->kk, t->a.kmap, nck, u, base);
  LLVMBuildBr(B, done);
  k->ncache = mark;
  LLVMPositionBuilderAtEnd(B, vt);
  LLVMValueRef uvv = am_add(k, u, -uk);
  LLVMBuildCondBr(B, LLVMBuildICmp(B, LLVMIntSLT, uvv, gen_i64(k, uv), ""), vb, done);
  LLVMPositionBuilderAtEnd(B, vb);
  am_stage_unit(k, t, t->v, t->a.vmap, ncv, uvv, am_byte(k, base, gen_i64(k, voff)));
  LLVMBuildBr(B, done);
  k->ncache = mark;
  LLVMPositionBuilderAtEnd(B, done);
  return cuda_kend(k);
}

/* ------------------------------------------------------------------ the main kernel */

/* One warp's state: 16 query rows (a lane: rows g = lane / 4 and g + 8, quad position q). */
typedef struct AmWarp {
  const AttK *t;
  DType ty; /* the operands' 16-bit type */
  LLVMValueRef tid, lane, g, q, b;
  LLVMValueRef ks, vs;     /* the K and V tiles in shared memory */
  LLVMValueRef kg, vg;     /* the staged keys and values (global) */
  LLVMValueRef qa[8][4];   /* the rows' query fragments, per 16 head elements */
  LLVMValueRef o[16][4];   /* accumulator tiles of 8 output columns (allocas) */
  LLVMValueRef m[2], l[2]; /* the two rows' running max (quad-uniform) and the lane's sum */
  AttRow row[2];
} AmWarp;

/* Copy the 64-key tile from key kb (rows past kend repeat the last) of staged x (d head
 * elements a row) into shared tile s, asynchronously; one commit group. */
static void am_tile(GenKern *k, const AmWarp *w, LLVMValueRef xg, int64_t d, LLVMValueRef s,
                    LLVMValueRef kb, LLVMValueRef kend) {
  LLVMBuilderRef B = k->B;
  int64_t nch = d / 8, per = AM_KEYS * nch / AM_THREADS;
  LLVMValueRef last = am_add(k, kend, -1);
  LLVMTypeRef g1 = LLVMPointerTypeInContext(k->cg->C, 1);
  for (int64_t i = 0; i < per; i++) {
    LLVMValueRef u = am_add(k, w->tid, i * AM_THREADS);
    LLVMValueRef r = LLVMBuildUDiv(B, u, gen_i64(k, nch), "");
    LLVMValueRef c = LLVMBuildURem(B, u, gen_i64(k, nch), "");
    LLVMValueRef key = LLVMBuildNSWAdd(B, kb, r, "");
    key = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSLT, key, kend, ""), key, last, "");
    LLVMValueRef row = cuda_lin(k, w->b, w->t->a.nk, key);
    LLVMValueRef src =
        am_byte(k, xg, LLVMBuildNSWMul(B, cuda_lin(k, row, nch, c), gen_i64(k, 16), ""));
    LLVMValueRef args[2] = {am_byte(k, s, am_swz(k, r, c, nch)),
                            LLVMBuildAddrSpaceCast(B, src, g1, "")};
    am_call(k, "llvm.nvvm.cp.async.cg.shared.global.16", args, 2);
  }
  am_call(k, "llvm.nvvm.cp.async.commit.group", NULL, 0);
}

/* Wait until at most n of this thread's copy groups are pending, then for the block. */
static void am_wait(GenKern *k, int n) {
  LLVMValueRef a = am_i32(k, n);
  am_call(k, "llvm.nvvm.cp.async.wait.group", &a, 1);
  cuda_barrier(k);
}

/* The scores of the step's 8 tiles of 8 keys from kb (K tile in shared memory), the fusion's
 * ops on top, -inf past kend: e[tile][0..3] (keys 2q, 2q + 1 of row g, then of row g + 8). */
static void am_scores(GenKern *k, AmWarp *w, LLVMValueRef kb, LLVMValueRef kend,
                      LLVMValueRef e[8][4]) {
  LLVMBuilderRef B = k->B;
  const AttK *t = w->t;
  int nks = (int)(t->a.dh / 16);
  int64_t nch = t->a.dh / 8;
  LLVMValueRef r8 = LLVMBuildAnd(B, w->lane, gen_i64(k, 7), "");
  LLVMValueRef m8 = LLVMBuildLShr(B, w->lane, gen_i64(k, 3), "");
  LLVMValueRef last = am_add(k, kend, -1);
  for (int nt = 0; nt < 8; nt++) {
    LLVMValueRef acc[4] = {cuda_at_f(k, 0), cuda_at_f(k, 0), cuda_at_f(k, 0), cuda_at_f(k, 0)};
    LLVMValueRef r = am_add(k, r8, nt * 8);
    for (int ks = 0; ks < nks; ks += 2) {
      bool two = ks + 1 < nks; /* x4: fragments of ks and ks + 1; x2: of ks */
      LLVMValueRef m = two ? m8 : LLVMBuildAnd(B, m8, gen_i64(k, 1), "");
      LLVMValueRef c = am_add(k, m, 2 * ks), bf[4];
      cuda_ldsm(k, am_byte(k, w->ks, am_swz(k, r, c, nch)), false, two ? 4 : 2, bf);
      cuda_mma(k, w->ty, w->qa[ks], bf, acc);
      if (two) cuda_mma(k, w->ty, w->qa[ks + 1], bf + 2, acc);
    }
    for (int i = 0; i < 4; i++) { /* element i: row g + 8 (i / 2), key nt * 8 + 2q + i % 2 */
      LLVMValueRef key = LLVMBuildNSWAdd(
          B, kb, am_add(k, LLVMBuildNSWMul(B, w->q, gen_i64(k, 2), ""), nt * 8 + i % 2), "");
      LLVMValueRef valid = LLVMBuildICmp(B, LLVMIntSLT, key, kend, "");
      LLVMValueRef full[HLO_MAX_RANK];
      memcpy(full, w->row[i / 2].sidx, sizeof full);
      gen_delin_dims(k, LLVMBuildSelect(B, valid, key, last, ""), t->a.kdim, t->a.kext, t->a.nkd,
                     full);
      const HInstr *sd = t->a.sdot;
      gen_cache_add(k, sd, t->srank, full, gen_convert(k, acc[i], DT_F32, sd->shape.dt));
      LLVMValueRef v = gen_value(k, t->a.score, full);
      v = v ? gen_convert(k, v, t->a.score->shape.dt, DT_F32) : cuda_at_f(k, 0);
      e[nt][i] = LLVMBuildSelect(B, valid, v, cuda_at_f(k, -INFINITY), "");
    }
  }
}

/* The online softmax of the step's scores: the rows' max and sums updated, the accumulators
 * rescaled, e[][] replaced by the probabilities (relative to the new max). */
static void am_softmax(GenKern *k, AmWarp *w, LLVMValueRef e[8][4]) {
  LLVMBuilderRef B = k->B;
  LLVMValueRef corr[2];
  for (int h = 0; h < 2; h++) {
    LLVMValueRef mo = cuda_at_ld(k, w->m[h]), bm = cuda_at_f(k, -INFINITY);
    for (int nt = 0; nt < 8; nt++)
      bm = cuda_at_max(k, bm, cuda_at_max(k, e[nt][2 * h], e[nt][2 * h + 1]));
    LLVMValueRef mn = cuda_at_max(k, mo, cuda_at_group(k, bm, 4, true)); /* the quad's row */
    /* all scores -inf so far: keep 0 as the reference (exp(-inf - -inf) would be NaN) */
    LLVMValueRef ninf = LLVMBuildFCmp(B, LLVMRealOEQ, mn, cuda_at_f(k, -INFINITY), "");
    LLVMValueRef ref = LLVMBuildSelect(B, ninf, cuda_at_f(k, 0), mn, "");
    corr[h] = cuda_at_exp(k, LLVMBuildFSub(B, mo, ref, ""));
    LLVMValueRef sum = LLVMBuildFMul(B, cuda_at_ld(k, w->l[h]), corr[h], "");
    for (int nt = 0; nt < 8; nt++)
      for (int i = 2 * h; i < 2 * h + 2; i++) {
        e[nt][i] = cuda_at_exp(k, LLVMBuildFSub(B, e[nt][i], ref, ""));
        sum = LLVMBuildFAdd(B, sum, e[nt][i], "");
      }
    cuda_at_st(k, w->m[h], mn);
    cuda_at_st(k, w->l[h], sum);
  }
  for (int nt = 0; nt < w->t->a.dv / 8; nt++)
    for (int i = 0; i < 4; i++)
      cuda_at_st(k, w->o[nt][i], LLVMBuildFMul(B, cuda_at_ld(k, w->o[nt][i]), corr[i / 2], ""));
}

/* o += P . V for the step's 64 keys (V tile in shared memory), P rounded to the operands' type:
 * the score tiles 2j, 2j + 1 are the A fragment of keys 16 j .. 16 j + 15. */
static void am_values(GenKern *k, AmWarp *w, LLVMValueRef p[8][4]) {
  LLVMBuilderRef B = k->B;
  int nvt = (int)(w->t->a.dv / 8);
  int64_t nch = w->t->a.dv / 8;
  LLVMValueRef r8 = LLVMBuildAnd(B, w->lane, gen_i64(k, 7), "");
  LLVMValueRef m8 = LLVMBuildLShr(B, w->lane, gen_i64(k, 3), "");
  LLVMValueRef o[16][4];
  for (int nt = 0; nt < nvt; nt++)
    for (int i = 0; i < 4; i++)
      o[nt][i] = cuda_at_ld(k, w->o[nt][i]);
  for (int j = 0; j < AM_KEYS / 16; j++) {
    LLVMValueRef a[4];
    for (int i = 0; i < 4; i++) /* a0: row g keys 2q..; a1: row g + 8; a2, a3: keys + 8 */
      a[i] =
          am_pack_f32(k, w->ty, p[2 * j + i / 2][2 * (i % 2)], p[2 * j + i / 2][2 * (i % 2) + 1]);
    /* lane: matrix m8 (keys + 8 (m8 % 2), columns + 8 (m8 / 2)), row r8 */
    LLVMValueRef r = LLVMBuildNSWAdd(
        B, am_add(k, r8, 16 * j),
        LLVMBuildNSWMul(B, LLVMBuildAnd(B, m8, gen_i64(k, 1), ""), gen_i64(k, 8), ""), "");
    LLVMValueRef half = LLVMBuildLShr(B, m8, gen_i64(k, 1), "");
    for (int nt = 0; nt < nvt; nt += 2) { /* dv a multiple of 16: pairs of tiles */
      LLVMValueRef bf[4];
      cuda_ldsm(k, am_byte(k, w->vs, am_swz(k, r, am_add(k, half, nt), nch)), true, 4, bf);
      cuda_mma(k, w->ty, a, bf, o[nt]);
      cuda_mma(k, w->ty, a, bf + 2, o[nt + 1]);
    }
  }
  for (int nt = 0; nt < nvt; nt++)
    for (int i = 0; i < 4; i++)
      cuda_at_st(k, w->o[nt][i], o[nt][i]);
}

/* The warp's rows: S index, running state, query fragments (a0: row g, elements 2q, 2q + 1 of
 * each 16; a1: row g + 8; a2, a3: elements + 8). */
static void am_rows(GenKern *k, AmWarp *w, LLVMValueRef qtile) {
  LLVMBuilderRef B = k->B;
  const AttK *t = w->t;
  LLVMValueRef warp = LLVMBuildLShr(B, w->tid, gen_i64(k, 5), "");
  for (int h = 0; h < 2; h++) {
    LLVMValueRef r = cuda_lin(k, qtile, AM_ROWS, cuda_lin(k, warp, 16, am_add(k, w->g, 8 * h)));
    cuda_at_row(k, t, w->b, r, &w->row[h]);
    w->m[h] = gen_alloca(k, k->cg->f32);
    w->l[h] = gen_alloca(k, k->cg->f32);
    cuda_at_st(k, w->m[h], cuda_at_f(k, -INFINITY));
    cuda_at_st(k, w->l[h], cuda_at_f(k, 0));
  }
  for (int ks = 0; ks < t->a.dh / 16; ks++)
    for (int i = 0; i < 4; i++) {
      LLVMValueRef c =
          am_add(k, LLVMBuildNSWMul(B, w->q, gen_i64(k, 2), ""), 16 * ks + 8 * (i / 2));
      LLVMValueRef *sx = w->row[i % 2].sidx;
      w->qa[ks][i] = cuda_pack16(k, am_bits(k, t->q, t->a.qmap, sx, c),
                                 am_bits(k, t->q, t->a.qmap, sx, am_add(k, c, 1)));
    }
  for (int nt = 0; nt < t->a.dv / 8; nt++)
    for (int i = 0; i < 4; i++) {
      w->o[nt][i] = gen_alloca(k, k->cg->f32);
      cuda_at_st(k, w->o[nt][i], cuda_at_f(k, 0));
    }
}

/* The rows' outputs (one slice), or the slice's partials for the combining kernel. */
static void am_write(GenKern *k, AmWarp *w, HInstr *in, LLVMValueRef out, LLVMValueRef part,
                     LLVMValueRef slice) {
  LLVMBuilderRef B = k->B;
  const AttK *t = w->t;
  int64_t per = cuda_at_slots(t);
  for (int h = 0; h < 2 && !k->failed; h++) {
    LLVMValueRef L = cuda_at_group(k, cuda_at_ld(k, w->l[h]), 4, false);
    LLVMValueRef base = NULL;
    LLVMBasicBlockRef done = NULL;
    if (part) { /* partials of row (b, qrow), slice: max, sum, accumulators */
      LLVMValueRef row = cuda_lin(k, w->b, t->a.nq, w->row[h].qrow);
      base = LLVMBuildNSWMul(B, cuda_lin(k, row, t->ns, slice), gen_i64(k, per), "");
      LLVMBasicBlockRef then = LLVMAppendBasicBlockInContext(k->cg->C, k->fn, "part");
      done = LLVMAppendBasicBlockInContext(k->cg->C, k->fn, "partdone");
      LLVMBuildCondBr(B, w->row[h].valid, then, done);
      LLVMPositionBuilderAtEnd(B, then);
      cuda_at_st(k, cuda_at_slot(k, part, base), cuda_at_ld(k, w->m[h]));
      cuda_at_st(k, cuda_at_slot(k, part, am_add(k, base, 1)), L);
    }
    for (int nt = 0; nt < t->a.dv / 8; nt++)
      for (int i = 0; i < 2; i++) {
        LLVMValueRef c = am_add(k, LLVMBuildNSWMul(B, w->q, gen_i64(k, 2), ""), 8 * nt + i);
        LLVMValueRef acc = cuda_at_ld(k, w->o[nt][2 * h + i]);
        if (part)
          cuda_at_st(k, cuda_at_slot(k, part, LLVMBuildNSWAdd(B, base, am_add(k, c, 2), "")), acc);
        else
          cuda_at_store1(k, in, &t->a, out, &w->row[h], c, w->row[h].valid,
                         LLVMBuildFDiv(B, acc, L, ""));
      }
    if (part) {
      LLVMBuildBr(B, done);
      LLVMPositionBuilderAtEnd(B, done);
    }
  }
}

/* Grid: batch items x tiles of 64 query rows x key slices; 4 warps a block. */
static bool am_main(CudaCg *cc, HInstr *in, const AttK *t, CuPtr sp, int64_t voff, int64_t poff) {
  CuStep *st;
  LLVMValueRef base;
  bool split = t->ns > 1;
  GenKern *k =
      cuda_kbegin(cc, in, split ? "attention-mma-split" : "attention-mma", 1, &sp, &base, &st);
  LLVMBuilderRef B = k->B;
  cuda_kbind_fusion(k, in);
  LLVMValueRef out = cuda_kbuffer(k, in);
  st->block = AM_THREADS;
  st->grid = t->a.nbatch * t->nqt * t->ns;
  AmWarp w;
  memset(&w, 0, sizeof w);
  w.t = t;
  w.ty = t->q->shape.dt;
  w.tid = cuda_sreg(k, "llvm.nvvm.read.ptx.sreg.tid.x");
  LLVMValueRef bid = cuda_sreg(k, "llvm.nvvm.read.ptx.sreg.ctaid.x");
  w.lane = LLVMBuildAnd(B, w.tid, gen_i64(k, 31), "");
  w.g = LLVMBuildLShr(B, w.lane, gen_i64(k, 2), "");
  w.q = LLVMBuildAnd(B, w.lane, gen_i64(k, 3), "");
  LLVMValueRef slice = LLVMBuildURem(B, bid, gen_i64(k, t->ns), "");
  LLVMValueRef rest = LLVMBuildUDiv(B, bid, gen_i64(k, t->ns), "");
  LLVMValueRef qtile = LLVMBuildURem(B, rest, gen_i64(k, t->nqt), "");
  w.b = LLVMBuildUDiv(B, rest, gen_i64(k, t->nqt), "");
  LLVMValueRef smem = cuda_smem(k, st, k->cg->i8, AM_KEYS * 2 * (t->a.dh + t->a.dv));
  LLVMValueRef zero[2] = {gen_i64(k, 0), gen_i64(k, 0)};
  w.ks = LLVMBuildInBoundsGEP2(B, LLVMGlobalGetValueType(smem), smem, zero, 2, "");
  w.vs = am_byte(k, w.ks, gen_i64(k, AM_KEYS * 2 * t->a.dh));
  w.kg = base;
  w.vg = am_byte(k, base, gen_i64(k, voff));
  am_rows(k, &w, qtile);
  LLVMValueRef k0 = LLVMBuildNSWMul(B, slice, gen_i64(k, t->chunk), "");
  LLVMValueRef k1 = am_add(k, k0, t->chunk);
  LLVMValueRef kend = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSLT, k1, gen_i64(k, t->a.nk), ""),
                                      k1, gen_i64(k, t->a.nk), "");
  am_tile(k, &w, w.kg, t->a.dh, w.ks, k0, kend);
  int mark = k->ncache;
  GenLoop kl;
  LLVMValueRef kb = gen_loop_open_step(k, &kl, k0, kend, gen_i64(k, AM_KEYS));
  am_tile(k, &w, w.vg, t->a.dv, w.vs, kb, kend); /* V overlaps the scores */
  am_wait(k, 1);                                 /* K's tile */
  LLVMValueRef e[8][4];
  am_scores(k, &w, kb, kend, e);
  if (!k->failed) am_softmax(k, &w, e);
  cuda_barrier(k); /* K's tile read: the next one overlaps the second product */
  am_tile(k, &w, w.kg, t->a.dh, w.ks, am_add(k, kb, AM_KEYS), kend);
  am_wait(k, 1); /* V's tile */
  if (!k->failed) am_values(k, &w, e);
  cuda_barrier(k);
  gen_loop_close(k, &kl);
  k->ncache = mark;
  am_call(k, "llvm.nvvm.cp.async.wait.all", NULL, 0);
  am_write(k, &w, in, out, split ? am_byte(k, base, gen_i64(k, poff)) : NULL, slice);
  return cuda_kend(k);
}

bool cuda_attention_mma(CudaCg *cc, HInstr *in, AttK *t) {
  t->qt = AM_ROWS;
  t->nqt = (t->a.nq + AM_ROWS - 1) / AM_ROWS;
  cuda_at_slices(t, AM_RESIDENT, 2 * AM_KEYS);
  int64_t kbytes = 2 * t->a.nbatch * t->a.nk * t->a.dh;
  int64_t voff = (kbytes + 255) / 256 * 256;
  int64_t poff = voff + (2 * t->a.nbatch * t->a.nk * t->a.dv + 255) / 256 * 256;
  CuPtr sp = cuda_scratch(cc, poff + cuda_at_part_bytes(t));
  if (!am_stage(cc, in, t, sp, voff) || !am_main(cc, in, t, sp, voff, poff)) return false;
  CuPtr pp = {sp.base, sp.index, sp.offset + poff};
  return t->ns == 1 || cuda_at_finish(cc, in, t, pp);
}
