/* targets/cpu/gemm/few.c: the few-rows and few-columns kernels.
 *
 * Products of few rows (batch-1 inference) or few columns (a classifier's head) would fill the
 * blocked path's MR x NR tiles mostly with zero padding and pack an operand for nothing, so
 * they get kernels of their own that read A and B in place. Few rows: all M rows in registers,
 * B streamed once in its row order (or, with B's rows contiguous, sums along K in the dot
 * form). Few columns: groups of rows of A against B's columns held along K, in the dot form,
 * with B transposed at compile time or into the chunk's scratch when its columns are not
 * contiguous. Operands of bf16 or f16 are read in place as well, widened to f32 by the loads
 * themselves (gm_load_f32), so a decode step reads its 16-bit weights once, at their own size;
 * a 16-bit result is summed into f32 scratch laid out as the result, which the epilogue
 * rounds into it (the streaming form adds to C once per K block). Where the CPU has VDPBF16PS
 * or VPDPBUSD, bf16 and s8 products of few rows compute their blocks on them (few_dp.c). */
#include "gemm_impl.h"

/* A product of few rows (batch-1 or small-batch inference: x[1, 4096] . W[4096, 1024]) is
 * memory-bound on B, which the blocked path would pack (read and write all of B, then read it
 * again) and compute in MR-row tiles of which all but M rows are zero padding. When all M rows
 * fit in registers with at least two vectors of columns each (M <= 14 at AVX-512's 32
 * registers, 6 at AVX2's 16) and B's columns are contiguous, a kernel of its own reads B in
 * place, in its row order: the columns are cut into ranges (the parallel-for's items, with
 * the loop dimensions); a range goes down K in blocks of GM_SMALL_K rows, and for each block
 * along its columns in blocks of V vectors (V = gm_small_v: as many as the registers hold
 * beside M x V accumulators, at most 4): the M x V tile is loaded from C (zero for the first
 * K block), each row of the block's B is loaded a vector at a time and multiplied by
 * broadcasts of A's M elements, and the tile is stored back. B is so read once, as
 * GM_SMALL_K sequential streams; the last column block of a ragged N loads and stores its
 * partial vector under a lane mask. When B's rows are contiguous instead (weights stored
 * [out, in]) and A's rows too, the dot form computes blocks of outputs as sums along K
 * (gm_small_dots). Both beat the blocked path about twice over at these sizes, because
 * they read B once where it would be packed and read again; all rows stay in one group,
 * since groups that each stream B lost to the blocked path. */
#define GM_SMALL_K 16 /* rows of B per K block */

/* Vectors of columns per block for M rows: M * V accumulators, V vectors of B and a
 * broadcast within the vector registers (32 with AVX-512, else 16). */
static int gm_small_v(const GmCfg *c, int64_t M) {
  int64_t regs = c->vw >= 16 ? 32 : 16, v = (regs - 1) / (M + 1);
  return (int)(v > 4 ? 4 : v);
}

/* Dot form (B's rows contiguous, as a weight matrix stored [out, in] is read: A's rows and B's
 * columns both run along K): outputs per block for M rows, M x n vector accumulators along K
 * beside the M rows of A and one column of B in the registers, at most 8 (M <= 10 with
 * AVX-512, 5 with AVX2). */
static int gm_small_n(const GmCfg *c, int64_t M) {
  int64_t regs = c->vw >= 16 ? 32 : 16, n = (regs - 1 - M) / M;
  return (int)(n > 8 ? 8 : n);
}

/* Whether the product takes the few-rows kernel: its streaming form (B's columns contiguous)
 * or its dot form (B's rows and A's rows contiguous, K at least a vector). */
bool gm_small_m_fits(const GmCfg *c, const GmProb *p) {
  if (p->conv || p->K < 1) return false;
  if (p->bcs == 1) return gm_small_v(c, p->M) >= 2;
  return p->brs == 1 && p->acs == 1 && p->K >= c->vw && gm_small_n(c, p->M) >= 2;
}

/* Dot form: C[0..R) x [0..nn) at Cp (B's column j at Bp + j * bcs): R x nn accumulators
 * along K, a vector of K at a time (the last one under a lane mask), each reduced to its sum
 * at the end. With nrows (not NULL), rows from nrows on are row nrows - 1 again (the same
 * values read and stored): a partial group of rows runs the same code. */
static void gm_small_dots(GenKern *k, const GmCfg *c, GmElt ea, GmElt eb, LLVMValueRef A,
                          LLVMValueRef Bp, LLVMValueRef Cp, const GmProb *p, int R, int nn,
                          LLVMValueRef nrows) {
  CpuCg *cg = cpu_cg(k->cg);
  LLVMBuilderRef B = k->B;
  int VW = c->vw;
  LLVMTypeRef vt = LLVMVectorType(cg->g.f32, (unsigned)VW);
  LLVMValueRef fma =
      LLVMGetIntrinsicDeclaration(cg->g.M, LLVMLookupIntrinsicID("llvm.fmuladd", 12), &vt, 1);
  LLVMTypeRef fty = LLVMGlobalGetValueType(fma);
  LLVMValueRef zero = LLVMConstNull(vt);
  int64_t kv_end = p->K / VW * VW, rem = p->K % VW;
  LLVMValueRef acc[16][8], nacc[16][8], aoff[16], coff[16];
  for (int r = 0; r < R; r++) {
    LLVMValueRef rr = nrows && r > 0 ? gmin(k, gi(k, r), gsub(k, nrows, gi(k, 1))) : gi(k, r);
    aoff[r] = gmul(k, rr, gi(k, p->ars));
    coff[r] = gmul(k, rr, gi(k, p->ldc));
  }
  for (int r = 0; r < R; r++)
    for (int j = 0; j < nn; j++)
      nacc[r][j] = zero;
  /* the whole vectors of K */
  if (kv_end > 0) {
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(B);
    LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(cg->g.C, k->fn, "smalld");
    LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(cg->g.C, k->fn, "smalld_done");
    LLVMBuildBr(B, body);
    LLVMPositionBuilderAtEnd(B, body);
    LLVMValueRef kv = LLVMBuildPhi(B, cg->g.i64, "k"), i0 = gi(k, 0);
    LLVMAddIncoming(kv, &i0, &pre, 1);
    for (int r = 0; r < R; r++)
      for (int j = 0; j < nn; j++) {
        acc[r][j] = LLVMBuildPhi(B, vt, "acc");
        LLVMAddIncoming(acc[r][j], &zero, &pre, 1);
      }
    LLVMValueRef av[16];
    for (int r = 0; r < R; r++)
      av[r] = gm_load_f32(k, ea, gep_e(k, ea, A, gadd(k, aoff[r], kv)), VW, 4);
    for (int j = 0; j < nn; j++) {
      LLVMValueRef bv = gm_load_f32(k, eb, gep_e(k, eb, Bp, gadd(k, gi(k, j * p->bcs), kv)), VW, 4);
      for (int r = 0; r < R; r++)
        nacc[r][j] = LLVMBuildCall2(B, fty, fma, (LLVMValueRef[]){av[r], bv, acc[r][j]}, 3, "");
    }
    LLVMValueRef kn = gadd(k, kv, gi(k, VW));
    LLVMBasicBlockRef latch = LLVMGetInsertBlock(B);
    LLVMAddIncoming(kv, &kn, &latch, 1);
    for (int r = 0; r < R; r++)
      for (int j = 0; j < nn; j++)
        LLVMAddIncoming(acc[r][j], &nacc[r][j], &latch, 1);
    gm_novec(k, LLVMBuildCondBr(B, gslt(k, kn, gi(k, kv_end)), body, done));
    LLVMPositionBuilderAtEnd(B, done);
  }
  /* the partial vector at the end of K */
  if (rem) {
    LLVMValueRef mask = cpu_lane_mask(k, VW, (int)rem), av[16];
    for (int r = 0; r < R; r++)
      av[r] = gm_masked_f32(k, ea, gep_e(k, ea, A, gadd(k, aoff[r], gi(k, kv_end))), VW, mask);
    for (int j = 0; j < nn; j++) {
      LLVMValueRef bv =
          gm_masked_f32(k, eb, gep_e(k, eb, Bp, gi(k, j * p->bcs + kv_end)), VW, mask);
      for (int r = 0; r < R; r++)
        nacc[r][j] = LLVMBuildCall2(B, fty, fma, (LLVMValueRef[]){av[r], bv, nacc[r][j]}, 3, "");
    }
  }
  LLVMValueRef red = LLVMGetIntrinsicDeclaration(
      cg->g.M, LLVMLookupIntrinsicID("llvm.vector.reduce.fadd", 23), &vt, 1);
  LLVMTypeRef rty = LLVMGlobalGetValueType(red);
  for (int r = 0; r < R; r++)
    for (int j = 0; j < nn; j++) {
      LLVMValueRef sum = LLVMBuildCall2(
          B, rty, red, (LLVMValueRef[]){LLVMConstReal(cg->g.f32, -0.0), nacc[r][j]}, 2, "");
      LLVMSetFastMathFlags(sum, LLVMFastMathAllowReassoc);
      gstore(k, sum, gfp(k, Cp, gadd(k, coff[r], gi(k, j))), 4);
    }
}

/* The R rows of the column block at Bp / Cp, K rows [k0, k1): its first nv vectors whole,
 * vector nv (when mask) partial. */
static void gm_small_group(GenKern *k, const GmCfg *c, LLVMValueRef A, LLVMValueRef Bp,
                           LLVMValueRef Cp, const GmProb *p, int R, int nv, LLVMValueRef mask,
                           LLVMValueRef k0, LLVMValueRef k1) {
  CpuCg *cg = cpu_cg(k->cg);
  LLVMBuilderRef B = k->B;
  LLVMTypeRef vt = LLVMVectorType(cg->g.f32, (unsigned)c->vw);
  int V = nv + (mask != NULL);
  LLVMValueRef fma =
      LLVMGetIntrinsicDeclaration(cg->g.M, LLVMLookupIntrinsicID("llvm.fmuladd", 12), &vt, 1);
  LLVMTypeRef fty = LLVMGlobalGetValueType(fma);
  LLVMValueRef zero = LLVMConstNull(vt);
  GmElt e = p->et;
#define GM_VLOAD(q, j) ((j) < nv ? gload(k, vt, (q), 4) : cpu_masked_load(k, vt, (q), mask))
#define GM_BLOAD(q, j)                                                                             \
  ((j) < nv ? gm_load_f32(k, e, (q), c->vw, 4) : gm_masked_f32(k, e, (q), c->vw, mask))
  /* the tile: C's (nothing before the first K block) */
  LLVMValueRef first = LLVMBuildICmp(B, LLVMIntEQ, k0, gi(k, 0), "");
  LLVMValueRef acc[16][4], nacc[16][4], bv[4], cq[16][4];
  for (int r = 0; r < R; r++)
    for (int j = 0; j < V; j++) {
      cq[r][j] = gfp(k, Cp, gi(k, r * p->ldc + (int64_t)j * c->vw));
      nacc[r][j] = LLVMBuildSelect(B, first, zero, GM_VLOAD(cq[r][j], j), "");
    }
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(B);
  LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(cg->g.C, k->fn, "smallk");
  LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(cg->g.C, k->fn, "smallk_done");
  LLVMBuildBr(B, body);
  LLVMPositionBuilderAtEnd(B, body);
  LLVMValueRef kv = LLVMBuildPhi(B, cg->g.i64, "k");
  LLVMAddIncoming(kv, &k0, &pre, 1);
  for (int r = 0; r < R; r++)
    for (int j = 0; j < V; j++) {
      acc[r][j] = LLVMBuildPhi(B, vt, "acc");
      LLVMAddIncoming(acc[r][j], &nacc[r][j], &pre, 1);
    }
  LLVMValueRef brow = gep_e(k, e, Bp, gmul(k, kv, gi(k, p->brs)));
  for (int j = 0; j < V; j++)
    bv[j] = GM_BLOAD(gep_e(k, e, brow, gi(k, (int64_t)j * c->vw)), j);
  for (int r = 0; r < R; r++) {
    LLVMValueRef av = cpu_splat(
        k,
        gm_load_f32(k, e, gep_e(k, e, A, gadd(k, gi(k, r * p->ars), gmul(k, kv, gi(k, p->acs)))), 0,
                    4),
        c->vw);
    for (int j = 0; j < V; j++)
      nacc[r][j] = LLVMBuildCall2(B, fty, fma, (LLVMValueRef[]){av, bv[j], acc[r][j]}, 3, "");
  }
#undef GM_VLOAD
#undef GM_BLOAD
  LLVMValueRef kn = gadd(k, kv, gi(k, 1));
  LLVMBasicBlockRef latch = LLVMGetInsertBlock(B);
  LLVMAddIncoming(kv, &kn, &latch, 1);
  for (int r = 0; r < R; r++)
    for (int j = 0; j < V; j++)
      LLVMAddIncoming(acc[r][j], &nacc[r][j], &latch, 1);
  gm_novec(k, LLVMBuildCondBr(B, gslt(k, kn, k1), body, done));
  LLVMPositionBuilderAtEnd(B, done);
  for (int r = 0; r < R; r++)
    for (int j = 0; j < V; j++) {
      if (j < nv)
        gstore(k, nacc[r][j], cq[r][j], 4);
      else
        cpu_masked_store(k, nacc[r][j], cq[r][j], mask);
    }
}

/* The kernel of a product that reads its operands in place (the few-rows and few-columns
 * kernels): bound to the fusion's computation, A, B (unless Bm is NULL: B not read) and C's
 * addresses (C: the f32 sums at byte coff of the private scratch when the result is 16-bit,
 * gm_cbuf), and this chunk's share [lo, hi) of items. */
static GenKern *gm_items_kern(CpuCg *cg, HInstr *in, const HInstr *hero, const GmProb *p,
                              int64_t items, int64_t nchunks, int64_t coff, LLVMValueRef *A,
                              LLVMValueRef *Bm, LLVMValueRef *C, LLVMValueRef *chunk,
                              LLVMValueRef *lo, LLVMValueRef *hi) {
  GenKern *k = cpu_kern_begin(cg, in);
  if (hero != in) k->bind[k->nbind++] = (GenBind){in->calls[0], in, NULL, 0, 0};
  *A = gm_view_ptr(k, &p->a);
  if (Bm) *Bm = gm_view_ptr(k, &p->b);
  *C = gm_cbuf(p) ? cpu_slot(k, (CpuSlot){CPU_SLOT_TEMP, NULL, NULL, cg->temp_base + coff})
                  : cpu_buffer(k, in);
  gm_chunk_items(k, items, nchunks, chunk, lo, hi);
  return k;
}

int gm_small_m(CpuCg *cg, HInstr *in, const HInstr *hero, const GmProb *p, const GmCfg *c,
               int64_t nb, int64_t want, int64_t stage_bytes) {
  const HInstr *fusion = hero == in ? NULL : in;
  int VW = c->vw, NV = gm_small_v(c, p->M), R = (int)p->M;
  bool dots = p->bcs != 1; /* the dot form: blocks of gm_small_n outputs */
  int64_t NBc = dots ? gm_small_n(c, p->M) : (int64_t)NV * VW, nnb = (p->N + NBc - 1) / NBc;
  /* column ranges: as many as chunks are wanted (whole blocks each), times the loop dims */
  int64_t nr = want <= 1 ? 1 : want < nnb ? want : nnb, items = nb * nr;
  int64_t nchunks = want <= 1 ? 1 : items < want ? items : want;
  int64_t cbytes = gm_cbuf(p) ? memplan_align(nb * p->M * p->N * 4) : 0;
  if (stage_bytes + cbytes > cg->extra_temp) cg->extra_temp = stage_bytes + cbytes;
  LLVMValueRef A, Bm, C, chunk, lo, hi;
  GenKern *k =
      gm_items_kern(cg, in, hero, p, items, nchunks, stage_bytes, &A, &Bm, &C, &chunk, &lo, &hi);
  LLVMBuilderRef B = k->B;
  GenLoop li, lk, lb;
  LLVMValueRef it = gloop(k, &li, lo, hi, 1);
  int cache_mark = k->ncache;
  LLVMValueRef ri = LLVMBuildSRem(B, it, gi(k, nr), ""), bi = LLVMBuildSDiv(B, it, gi(k, nr), "");
  LLVMValueRef lidx[HLO_MAX_RANK], offa, offb, offc;
  gm_loop_offsets(k, p, bi, lidx, &offa, &offb, &offc);
  /* the range's column blocks [b0, b1) */
  LLVMValueRef b0 = LLVMBuildSDiv(B, gmul(k, ri, gi(k, nnb)), gi(k, nr), "");
  LLVMValueRef b1 = LLVMBuildSDiv(B, gmul(k, gadd(k, ri, gi(k, 1)), gi(k, nnb)), gi(k, nr), "");
  LLVMValueRef Ap = gep_e(k, p->et, A, offa), corr[16];
  bool dp = gm_few_dp(c, p); /* on VDPBF16PS or VPDPBUSD (few_dp.c) */
  if (dp && p->et == GE_S8) gm_s8_corrections(k, Ap, p, R, corr);
  int64_t tail = p->N % NBc;
  GIf f = {0};
  if (dots) {
    LLVMValueRef bj = gloop(k, &lb, b0, b1, 1);
    LLVMValueRef n0 = gmul(k, bj, gi(k, NBc));
    LLVMValueRef Bp = gep_e(k, p->et, Bm, gadd(k, offb, gmul(k, n0, gi(k, p->bcs)))),
                 Cp = gfp(k, C, gadd(k, offc, n0));
    if (tail) gif_open(k, &f, gslt(k, bj, gi(k, nnb - 1)), true);
    for (int t = 0; t < (tail ? 2 : 1); t++) {
      if (t) gif_else(k, &f);
      int nn = (int)(t ? tail : NBc);
      if (dp)
        gm_small_dots_dp(k, Ap, Bp, Cp, p, R, nn, corr);
      else
        gm_small_dots(k, c, p->et, p->et, Ap, Bp, Cp, p, R, nn, NULL);
    }
    if (tail) gif_close(k, &f);
    gm_close(k, &lb);
  } else {
    /* s8's 16 rows are four VPDPBUSD steps per load of C's tile: 32 (more streams of B than
     * that ran slower, as they do for the other types) */
    int kb = dp && p->et == GE_S8 ? 2 * GM_SMALL_K : GM_SMALL_K;
    LLVMValueRef k0 = gloop(k, &lk, gi(k, 0), gi(k, p->K), kb);
    LLVMValueRef k1 = gmin(k, gadd(k, k0, gi(k, kb)), gi(k, p->K));
    LLVMValueRef bj = gloop(k, &lb, b0, b1, 1);
    LLVMValueRef n0 = gmul(k, bj, gi(k, NBc));
    LLVMValueRef Bp = gep_e(k, p->et, Bm, gadd(k, offb, n0)), Cp = gfp(k, C, gadd(k, offc, n0));
    /* whole blocks; the last block of a ragged N: its whole vectors, then one under a mask */
    if (tail) gif_open(k, &f, gslt(k, bj, gi(k, nnb - 1)), true);
    for (int t = 0; t < (tail ? 2 : 1); t++) {
      if (t) gif_else(k, &f);
      int nv = t ? (int)(tail / VW) : NV, rem = t ? (int)(tail % VW) : 0;
      LLVMValueRef mask = rem ? cpu_lane_mask(k, VW, rem) : NULL;
      if (dp)
        gm_small_group_dp(k, Ap, Bp, Cp, p, R, nv, mask, k0, k1, p->et == GE_S8 ? corr : NULL);
      else
        gm_small_group(k, c, Ap, Bp, Cp, p, R, nv, mask, k0, k1);
    }
    if (tail) gif_close(k, &f);
    gm_close(k, &lb);
    gm_close(k, &lk);
  }
  if ((fusion || gm_cbuf(p)) && !k->failed)
    gm_epilogue(k, in, hero, NULL, p, lidx, gi(k, 0), gi(k, p->M), gmul(k, b0, gi(k, NBc)),
                gmin(k, gmul(k, b1, gi(k, NBc)), gi(k, p->N)), C, NULL);
  k->ncache = cache_mark;
  gm_close(k, &li);
  if (!cpu_kern_end(k, nchunks)) return -1;
  cg->tasks[cg->ntasks - 1].whole = nchunks > 1;
  if (dp)
    cg->tasks[cg->ntasks - 1].note =
        p->et == GE_S8 ? "few rows, AVX512-VNNI" : "few rows, AVX512-BF16";
  return 1;
}

/* A product of many rows and few columns (a classifier's head: mlp's 256 x 1024 x 10) would
 * fill the blocked path's NR-wide panels mostly with zero columns (10 of 32 at AVX-512) and
 * pack all of A for it. When N is at most 16 and under NR, A's rows run along K and the
 * product is not batched, it takes the dot form of the few-rows kernel instead
 * (gm_small_dots): groups of R rows of A, read in place, against B's columns held along K, R
 * x w sums in vector registers (R = 3 with 32 vector registers, R = 2 with 16; N in blocks
 * of equal width w, at most 8 or 6: 10 columns are two blocks of 5), reduced to the outputs
 * at the end; the rows of a group pass over K once per block. One copy of that code serves
 * every group and block (compiling partial groups and blocks apart was costly). B's
 * columns are contiguous along K already when its rows are (weights stored [out, in]); a
 * constant B (frozen weights) is transposed at compile time into read-only data; otherwise
 * each chunk first copies B transposed, N x K floats (at most GM_FEW_BT), into its private
 * scratch. The parallel-for splits the row groups; the fusion's epilogue follows on each
 * chunk's rows. */
#define GM_FEW_BT (64 * 1024)

bool gm_few_n_fits(const GmCfg *c, const GmProb *p) {
  if (p->conv || p->nloop || p->acs != 1 || p->K < 4 * c->vw || p->N > 16 || p->N >= c->nr ||
      p->M < 2 * c->mr)
    return false;
  return p->brs == 1 || p->N * p->K <= GM_FEW_BT;
}

int gm_few_n(CpuCg *cg, HInstr *in, const HInstr *hero, const GmProb *p, const GmCfg *c,
             int64_t want, int64_t stage_bytes) {
  const HInstr *fusion = hero == in ? NULL : in;
  /* column blocks of one width w (the last one ends at N, overlapping the one before: its
     common columns are computed twice, to the same values) */
  int R = c->vw >= 16 ? 3 : 2, nn = gm_small_n(c, R);
  int64_t nbl = (p->N + nn - 1) / nn, w = (p->N + nbl - 1) / nbl;
  int64_t groups = (p->M + R - 1) / R;
  int64_t nchunks = want <= 1 ? 1 : groups < want ? groups : want;
  /* B's columns along K: B itself, B transposed at compile time (a constant), or a copy */
  const float *bsrc = p->brs != 1 ? gm_view_const(c, &p->b) : NULL;
  LLVMValueRef bconst = NULL;
  if (bsrc) {
    float *t = hlo_arena_alloc(cg->g.scratch, sizeof(float) * (size_t)(p->N * p->K));
    for (int64_t n = 0; n < p->N; n++)
      for (int64_t kk = 0; kk < p->K; kk++)
        t[n * p->K + kk] = bsrc[kk * p->brs + n * p->bcs];
    char name[512];
    snprintf(name, sizeof name, "%s_bt%d", cg->o->name, cg->ntasks);
    bconst = cpu_rodata(cg, name, t, sizeof(float) * (size_t)(p->N * p->K));
  }
  bool copy = p->brs != 1 && !bconst;
  int64_t bt_bytes = copy ? memplan_align(p->N * p->K * 4) : 0;
  int64_t coff = stage_bytes + nchunks * bt_bytes,
          cbytes = gm_cbuf(p) ? memplan_align(p->M * p->N * 4) : 0;
  if (coff + cbytes > cg->extra_temp) cg->extra_temp = coff + cbytes;
  LLVMValueRef A, Bm = NULL, C, chunk, lo, hi;
  GenKern *k = gm_items_kern(cg, in, hero, p, groups, nchunks, coff, &A, bconst ? NULL : &Bm, &C,
                             &chunk, &lo, &hi);
  LLVMBuilderRef B = k->B;
  int cache_mark = k->ncache;
  GmProb q = *p;
  LLVMValueRef Bt = bconst ? cpu_slot(k, (CpuSlot){CPU_SLOT_GLOBAL, NULL, bconst, 0}) : Bm;
  if (copy) {
    /* B transposed into the chunk's scratch, Bt[n * K + kk] = B(kk, n), written in order (the
       other order would store at a stride of K floats, a multiple of 4 KiB at K = 1024) */
    LLVMValueRef off = gmul(k, chunk, gi(k, bt_bytes));
    LLVMValueRef base =
        cpu_slot(k, (CpuSlot){CPU_SLOT_TEMP, NULL, NULL, cg->temp_base + stage_bytes});
    Bt = LLVMBuildInBoundsGEP2(B, cg->g.i8, base, &off, 1, "");
    GenLoop lk, ln;
    LLVMValueRef n = gloop(k, &ln, gi(k, 0), gi(k, p->N), 1);
    LLVMValueRef kk = gloop(k, &lk, gi(k, 0), gi(k, p->K), 1);
    LLVMValueRef v = gm_load_f32(
        k, p->et,
        gep_e(k, p->et, Bm, gadd(k, gmul(k, kk, gi(k, p->brs)), gmul(k, n, gi(k, p->bcs)))), 0, 4);
    gstore(k, v, gfp(k, Bt, gadd(k, gmul(k, n, gi(k, p->K)), kk)), 4);
    gm_close(k, &lk);
    gm_close(k, &ln);
  }
  if (p->brs != 1) { /* the transposed B, compile-time or copied: K contiguous */
    q.brs = 1;
    q.bcs = p->K;
  }
  /* groups of R rows, the last one partial when R does not divide M (its missing rows are
     its last row again) */
  GenLoop lg, lj;
  LLVMValueRef g = gloop(k, &lg, lo, hi, 1);
  LLVMValueRef m0 = gmul(k, g, gi(k, R)), nrows = gmin(k, gi(k, R), gsub(k, gi(k, p->M), m0));
  LLVMValueRef Ap = gep_e(k, p->et, A, gmul(k, m0, gi(k, p->ars))),
               Cp = gfp(k, C, gmul(k, m0, gi(k, p->ldc)));
  LLVMValueRef jb = gloop(k, &lj, gi(k, 0), gi(k, nbl), 1);
  LLVMValueRef j0 = gmin(k, gmul(k, jb, gi(k, w)), gi(k, p->N - w));
  /* (B: in place in its own type, or its f32 copy) */
  GmElt eb = p->brs != 1 ? GE_F32 : p->et;
  gm_small_dots(k, c, p->et, eb, Ap, gep_e(k, eb, Bt, gmul(k, j0, gi(k, q.bcs))), gfp(k, Cp, j0),
                &q, R, (int)w, nrows);
  gm_close(k, &lj);
  gm_close(k, &lg);
  if ((fusion || gm_cbuf(p)) && !k->failed) {
    LLVMValueRef lidx[HLO_MAX_RANK] = {0}; /* no loop dimensions */
    gm_epilogue(k, in, hero, NULL, p, lidx, gmul(k, lo, gi(k, R)),
                gmin(k, gmul(k, hi, gi(k, R)), gi(k, p->M)), gi(k, 0), gi(k, p->N), C, NULL);
  }
  k->ncache = cache_mark;
  if (!cpu_kern_end(k, nchunks)) return -1;
  cg->tasks[cg->ntasks - 1].whole = nchunks > 1;
  cg->tasks[cg->ntasks - 1].note = "few columns";
  return 1;
}
