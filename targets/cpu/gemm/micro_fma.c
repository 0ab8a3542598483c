/* targets/cpu/gemm/micro_fma.c: the broadcast-FMA micro-kernel family (AVX-512, AVX2, SSE).
 *
 * An MR x NR tile of C is held in MR * NR / VW vector registers for the whole K block: per
 * step of k, NR / VW vectors of B's panel are loaded and each of the MR elements of A's panel
 * is broadcast and multiplied into its row of accumulators, one FMA per (row, vector), so a
 * load feeds MR or NR / VW FMAs. The k loop is unrolled by 4 with A and B walked by pointers;
 * a last panel of at most GM_TAIL_ROWS rows runs a variant with only those rows' FMAs, and a
 * convolution panel inside the image may be read in place (GmDirect). Full tiles are stored
 * (first K block) or added to C directly, edge tiles through a stack tile. The vector width
 * and tile come from GmCfg, so this one family serves every x86 level. Another family (for
 * instructions of another shape: AVX512-BF16 or VNNI dot products, AMX tiles) is a file of its
 * own defining a GmMicro whose tile function emits the same contract (GmTile: C (+)= A panel *
 * B panel at the tile's place), chosen by gm_cfg_make for the features it needs; the GEMM
 * function and the other families do not change. */
#include "gemm_impl.h"

/* Where the micro-kernel's k loop reads A: a packed panel (rstride NULL: depth k of row r at
 * p[k * MR + r]) or rows of a convolution input read in place (depth k of row r at
 * p[k + r * rstride], p moved back by the run's first depth, so that the loop's one induction
 * variable indexes both A and B). */
typedef struct GmArow {
  LLVMValueRef p, rstride;
} GmArow;

/* The micro-kernel's k loop over [k0, k1) (a multiple of u steps) for the first R rows of the
 * tile (R <= MR; the panel stays MR tall): in[][] are the incoming accumulators, out[][]
 * receives their values after the loop (rows below R untouched). With pf, each iteration
 * also prefetches one cache line into L2, pf + 64 bytes per iteration (gm_next_lines). */
static void gm_kloop(GenKern *k, const GmCfg *c, const GmArow *a, LLVMValueRef bp, LLVMValueRef k0,
                     LLVMValueRef k1, int u, int R, LLVMValueRef in[16][4], LLVMValueRef out[16][4],
                     LLVMValueRef pf) {
  CpuCg *cg = cpu_cg(k->cg);
  LLVMBuilderRef B = k->B;
  int MR = c->mr, NV = c->nr / c->vw;
  LLVMTypeRef vt = LLVMVectorType(cg->g.f32, (unsigned)c->vw);
  /* A and B are walked by pointers advanced once per u steps, every load at a constant
     offset from them: indexes scaled per step were 5 integer instructions per step, which on
     Intel cores share ports 0 and 5 with the 512-bit FMAs */
  int64_t astep = a->rstride ? 1 : MR;
  LLVMValueRef pa0 = gfp(k, a->p, gmul(k, k0, gi(k, astep))),
               pb0 = gfp(k, bp, gmul(k, k0, gi(k, c->nr)));
  GPhiLoop pl = gphi_open(k, "uk", "ukb", "ukd");
  LLVMBasicBlockRef pre = pl.pre, body = pl.body, done = pl.done, hdr = pl.hdr;
  LLVMValueRef kv = LLVMBuildPhi(B, cg->g.i64, "k"), pa = LLVMBuildPhi(B, cg->g.ptr, "pa"),
               pb = LLVMBuildPhi(B, cg->g.ptr, "pb");
  LLVMAddIncoming(kv, &k0, &pre, 1);
  LLVMAddIncoming(pa, &pa0, &pre, 1);
  LLVMAddIncoming(pb, &pb0, &pre, 1);
  LLVMValueRef pp = NULL;
  if (pf) {
    pp = LLVMBuildPhi(B, cg->g.ptr, "pp");
    LLVMAddIncoming(pp, &pf, &pre, 1);
  }
  LLVMValueRef acc[16][4];
  for (int r = 0; r < R; r++)
    for (int j = 0; j < NV; j++) {
      out[r][j] = LLVMBuildPhi(B, vt, "");
      LLVMAddIncoming(out[r][j], &in[r][j], &pre, 1);
      acc[r][j] = out[r][j];
    }
  LLVMBuildCondBr(B, gslt(k, kv, k1), body, done);
  LLVMPositionBuilderAtEnd(B, body);
  unsigned fid = LLVMLookupIntrinsicID("llvm.fmuladd", 12);
  LLVMValueRef fma = LLVMGetIntrinsicDeclaration(cg->g.M, fid, &vt, 1);
  LLVMTypeRef fty = LLVMIntrinsicGetType(cg->g.C, fid, &vt, 1);
  for (int q = 0; q < u; q++) {
    LLVMValueRef bv[4];
    for (int j = 0; j < NV; j++)
      bv[j] = gload(k, vt, gfp(k, pb, gi(k, q * c->nr + j * c->vw)), 64);
    if (pp && q == 0) gm_prefetch(k, pp, 2);
    for (int r = 0; r < R; r++) {
      LLVMValueRef ao =
          a->rstride ? gadd(k, gi(k, q), gmul(k, gi(k, r), a->rstride)) : gi(k, q * MR + r);
      LLVMValueRef av = cpu_splat(k, gload(k, cg->g.f32, gfp(k, pa, ao), 4), c->vw);
      for (int j = 0; j < NV; j++) {
        LLVMValueRef args[3] = {av, bv[j], acc[r][j]};
        acc[r][j] = LLVMBuildCall2(B, fty, fma, args, 3, "");
      }
    }
  }
  LLVMValueRef kn = gadd(k, kv, gi(k, u)), pan = gfp(k, pa, gi(k, u * astep)),
               pbn = gfp(k, pb, gi(k, u * c->nr));
  LLVMBasicBlockRef latch = LLVMGetInsertBlock(B);
  LLVMAddIncoming(kv, &kn, &latch, 1);
  LLVMAddIncoming(pa, &pan, &latch, 1);
  LLVMAddIncoming(pb, &pbn, &latch, 1);
  if (pp) {
    LLVMValueRef ppn = gfp(k, pp, gi(k, 16));
    LLVMAddIncoming(pp, &ppn, &latch, 1);
  }
  for (int r = 0; r < R; r++)
    for (int j = 0; j < NV; j++)
      LLVMAddIncoming(out[r][j], &acc[r][j], &latch, 1);
  gm_novec(k, LLVMBuildBr(B, hdr));
  LLVMPositionBuilderAtEnd(B, done);
}

/* The micro-kernel's k loops over the K block [pc, pc + kc) of a panel read in place: one run
 * of input channels per tap (kh, kw), the accumulators carried across the runs. Reads the
 * geometry itself: the conv parameter is only valid where d->ok holds. */
static void gm_direct_kloops(GenKern *k, const GmCfg *c, const GmDirect *d, LLVMValueRef bp,
                             LLVMValueRef kc, LLVMValueRef init[16][4], LLVMValueRef out[16][4]) {
  CpuCg *cg = cpu_cg(k->cg);
  LLVMBuilderRef B = k->B;
  LLVMValueRef g[GC_COUNT];
  gm_conv_geom(k, d->P, g);
  LLVMValueRef base = gfp(k, d->P[GP_A], d->off);
  int MR = c->mr, NV = c->nr / c->vw;
  LLVMTypeRef vt = LLVMVectorType(cg->g.f32, (unsigned)c->vw);
  LLVMValueRef st[4] = {gi(k, 0), NULL, NULL, NULL}; /* kk, kh, kw, ci */
  gm_tap(k, g, d->pc, &st[1], &st[2], &st[3]);
  LLVMValueRef tsh = gmul(k, g[GC_DH], g[GC_XSH]), tsw = gmul(k, g[GC_DW], g[GC_XSW]);
  GPhiLoop pl = gphi_open(k, "drun", "drunb", "drune");
  LLVMBasicBlockRef pre = pl.pre, body = pl.body, done = pl.done, hdr = pl.hdr;
  LLVMValueRef v[4], acc[16][4];
  for (int j = 0; j < 4; j++) {
    v[j] = LLVMBuildPhi(B, cg->g.i64, "");
    LLVMAddIncoming(v[j], &st[j], &pre, 1);
  }
  for (int r = 0; r < MR; r++)
    for (int j = 0; j < NV; j++) {
      out[r][j] = acc[r][j] = LLVMBuildPhi(B, vt, "");
      LLVMAddIncoming(acc[r][j], &init[r][j], &pre, 1);
    }
  LLVMBuildCondBr(B, gslt(k, v[0], kc), body, done);
  LLVMPositionBuilderAtEnd(B, body);
  LLVMValueRef kk = v[0], kh = v[1], kw = v[2], ci = v[3];
  LLVMValueRef n = gmin(k, gsub(k, g[GC_CI], ci), gsub(k, kc, kk));
  /* a plain GEP: the moved-back pointer may lie before the input */
  LLVMValueRef po = gsub(k, gadd(k, gadd(k, gmul(k, kh, tsh), gmul(k, kw, tsw)), ci), kk);
  GmArow a = {LLVMBuildGEP2(B, cg->g.f32, base, &po, 1, ""), d->rstride};
  /* unrolled by 2, not 4: with the MR row pointers live, LLVM's scheduler hoists the B loads
     of all unrolled steps, and four steps' B vectors spill an accumulator at MR 12; the runs
     are even (gm_direct_panel), so no remainder loop */
  LLVMValueRef nx[16][4];
  gm_kloop(k, c, &a, bp, kk, gadd(k, kk, n), 2, MR, acc, nx, NULL);
  LLVMValueRef kw1 = gadd(k, kw, gi(k, 1));
  LLVMValueRef wrap = LLVMBuildICmp(B, LLVMIntEQ, kw1, g[GC_KW], "");
  LLVMValueRef nv[4] = {gadd(k, kk, n), LLVMBuildSelect(B, wrap, gadd(k, kh, gi(k, 1)), kh, ""),
                        LLVMBuildSelect(B, wrap, gi(k, 0), kw1, ""), gi(k, 0)};
  LLVMBasicBlockRef latch = LLVMGetInsertBlock(B);
  for (int j = 0; j < 4; j++)
    LLVMAddIncoming(v[j], &nv[j], &latch, 1);
  for (int r = 0; r < MR; r++)
    for (int j = 0; j < NV; j++)
      LLVMAddIncoming(acc[r][j], &nx[r][j], &latch, 1);
  gm_novec(k, LLVMBuildBr(B, hdr));
  LLVMPositionBuilderAtEnd(B, done);
}

/* Close the if f whose then branch ended in block tend with the tile tv[][] and whose else
 * branch ends here with the tile phis[][]: phis[][] become the joined tile. */
static void gm_join_tiles(GenKern *k, const GmCfg *c, GIf *f, LLVMBasicBlockRef tend,
                          LLVMValueRef tv[16][4], LLVMValueRef phis[16][4]) {
  LLVMBasicBlockRef fend = LLVMGetInsertBlock(k->B);
  gif_close(k, f);
  LLVMTypeRef vt = LLVMVectorType(k->cg->f32, (unsigned)c->vw);
  for (int r = 0; r < c->mr; r++)
    for (int j = 0; j < c->nr / c->vw; j++) {
      LLVMValueRef ph = LLVMBuildPhi(k->B, vt, "");
      LLVMValueRef vals[2] = {tv[r][j], phis[r][j]};
      LLVMBasicBlockRef bbs[2] = {tend, fend};
      LLVMAddIncoming(ph, vals, bbs, 2);
      phis[r][j] = ph;
    }
}

static void gm_store_tile(GenKern *k, const GmCfg *c, const GmTile *tl, LLVMValueRef phis[16][4]);

/* The micro-kernel on packed panels ap (MR x kc) and bp (kc x NR) into C at cp; with dr, a
 * convolution panel is read in place instead where dr->ok holds (one tile store for both);
 * with pf, kc / 4 cache lines from pf on are prefetched into L2 along the way. */
static void gm_fma_tile(GenKern *k, const GmCfg *c, const GmTile *t) {
  CpuCg *cg = cpu_cg(k->cg);
  LLVMBuilderRef B = k->B;
  LLVMValueRef ap = t->ap, bp = t->bp, kc = t->kc, cp = t->cp, ldc = t->ldc, mrv = t->mrv,
               pf = t->pf;
  const GmDirect *dr = t->dr;
  int MR = c->mr, NV = c->nr / c->vw;
  LLVMTypeRef vt = LLVMVectorType(cg->g.f32, (unsigned)c->vw);
  LLVMValueRef zero = LLVMConstNull(vt);
  /* prefetch the C tile (written after the k loop) */
  for (int r = 0; r < MR; r++)
    for (int e = 0; e < c->nr; e += 16)
      gm_prefetch(
          k,
          gfp(k, cp,
              gadd(k, gmul(k, gi(k, r), ldc), gi(k, e + (e + 16 >= c->nr ? c->nr - 1 - e : 0)))),
          -1);
  /* k loops with the accumulators as phis: unrolled by 4, then the remaining steps */
  LLVMValueRef init[16][4], mid[16][4], phis[16][4];
  for (int r = 0; r < MR; r++)
    for (int j = 0; j < NV; j++)
      init[r][j] = zero;
  GIf fd = {0};
  LLVMValueRef dacc[16][4];
  LLVMBasicBlockRef dend = NULL;
  if (dr) {
    gif_open(k, &fd, dr->ok, true);
    gm_direct_kloops(k, c, dr, bp, kc, init, dacc);
    dend = LLVMGetInsertBlock(B);
    gif_else(k, &fd);
  }
  GmArow a = {ap, NULL};
  LLVMValueRef k4 = LLVMBuildAnd(B, kc, gi(k, ~(int64_t)3), "");
  /* a last panel of at most GM_TAIL_ROWS rows (M = 256 leaves 4 of 12) runs only those rows'
     FMAs: its padding rows would be computed for nothing */
  int TR = MR > GM_TAIL_ROWS ? GM_TAIL_ROWS : 0;
  GIf ft = {0};
  LLVMValueRef tph[16][4];
  LLVMBasicBlockRef tend = NULL;
  if (TR) {
    gif_open(k, &ft, LLVMBuildICmp(B, LLVMIntSLE, mrv, gi(k, TR), ""), true);
    gm_kloop(k, c, &a, bp, gi(k, 0), k4, 4, TR, init, mid, pf);
    gm_kloop(k, c, &a, bp, k4, kc, 1, TR, mid, tph, NULL);
    for (int r = TR; r < MR; r++)
      for (int j = 0; j < NV; j++)
        tph[r][j] = zero;
    tend = LLVMGetInsertBlock(B);
    gif_else(k, &ft);
  }
  gm_kloop(k, c, &a, bp, gi(k, 0), k4, 4, MR, init, mid, pf);
  gm_kloop(k, c, &a, bp, k4, kc, 1, MR, mid, phis, NULL);
  if (TR) gm_join_tiles(k, c, &ft, tend, tph, phis);
  if (dr) gm_join_tiles(k, c, &fd, dend, dacc, phis);
  gm_store_tile(k, c, t, phis);
}

/* v (f32 lanes) as C holds it: itself, or (C of s32) converted to s32, exact (GmTile.s32). */
static LLVMValueRef gm_c_val(GenKern *k, const GmTile *tl, LLVMValueRef v) {
  if (!tl->s32) return v;
  LLVMTypeRef t = LLVMTypeOf(v), it = k->cg->i32;
  if (LLVMGetTypeKind(t) == LLVMVectorTypeKind) it = LLVMVectorType(it, LLVMGetVectorSize(t));
  return LLVMBuildFPToSI(k->B, v, it, "");
}
/* c + the value at p of C (v's type): f32 or s32 sums. */
static LLVMValueRef gm_c_add(GenKern *k, const GmTile *tl, LLVMValueRef v, LLVMValueRef p) {
  LLVMValueRef c = gload(k, LLVMTypeOf(v), p, 4);
  return tl->s32 ? LLVMBuildAdd(k->B, v, c, "") : LLVMBuildFAdd(k->B, v, c, "");
}

/* Store the tile phis[][] of micro-kernel call tl: full tiles straight to C, edge tiles through
 * the stack tile (set on the first K block, added after). */
static void gm_store_tile(GenKern *k, const GmCfg *c, const GmTile *tl, LLVMValueRef phis[16][4]) {
  CpuCg *cg = cpu_cg(k->cg);
  LLVMBuilderRef B = k->B;
  int MR = c->mr, NV = c->nr / c->vw;
  LLVMValueRef cp = tl->cp, ldc = tl->ldc, mrv = tl->mrv, nrv = tl->nrv, first = tl->first,
               tile = tl->tile;
  LLVMValueRef full = LLVMBuildAnd(B, LLVMBuildICmp(B, LLVMIntEQ, mrv, gi(k, MR), ""),
                                   LLVMBuildICmp(B, LLVMIntEQ, nrv, gi(k, c->nr), ""), "");
  GIf f, g;
  gif_open(k, &f, full, true);
  gif_open(k, &g, first, true);
  for (int add = 0; add < 2; add++) {
    for (int r = 0; r < MR; r++) {
      LLVMValueRef row = gmul(k, gi(k, r), ldc);
      for (int j = 0; j < NV; j++) {
        LLVMValueRef v = gm_c_val(k, tl, phis[r][j]);
        LLVMValueRef p = gfp(k, cp, gadd(k, row, gi(k, j * c->vw)));
        if (add) v = gm_c_add(k, tl, v, p);
        gstore(k, v, p, 4);
      }
    }
    if (add == 0) gif_else(k, &g);
  }
  gif_close(k, &g);
  gif_else(k, &f);
  for (int r = 0; r < MR; r++)
    for (int j = 0; j < NV; j++)
      gstore(k, phis[r][j], gfp(k, tile, gi(k, r * c->nr + j * c->vw)), 64);
  GenLoop lr, lc;
  LLVMValueRef r = gloop(k, &lr, gi(k, 0), mrv, 1);
  LLVMValueRef cc = gloop(k, &lc, gi(k, 0), nrv, 1);
  LLVMValueRef t =
      gm_c_val(k, tl, gload(k, cg->g.f32, gfp(k, tile, gadd(k, gmul(k, r, gi(k, c->nr)), cc)), 4));
  LLVMValueRef p = gfp(k, cp, gadd(k, gmul(k, r, ldc), cc));
  GIf h;
  gif_open(k, &h, first, true);
  gstore(k, t, p, 4);
  gif_else(k, &h);
  gstore(k, gm_c_add(k, tl, t, p), p, 4);
  gif_close(k, &h);
  gm_close(k, &lc);
  gm_close(k, &lr);
  gif_close(k, &f);
}

const GmMicro gm_micro_fma = {"fma", gm_fma_tile};
