/* targets/cpu/gemm/pairs.c: the bf16 GEMM function on depth pairs (AMX tiles, AVX512-BF16).
 *
 * Where the target CPU multiplies bf16 pairs itself (AMX-BF16's TDPBF16PS, amx.c; else
 * AVX512-BF16's VDPBF16PS, dpbf16.c), dots of bf16 operands call this function instead of
 * gm_function's widened bf16 one: the same parameters and result (C = A * B in f32, row-major
 * C), but the operands stay bf16, f32 sums of exact products. A's rows are packed into
 * 16 x 32 tiles (depth contiguous, 64-byte rows) and B into VNNI tiles (each 64-byte row holds
 * 16 columns of a pair of depths; from a B [N, K] through a register transpose), both padded
 * with zeros to whole tiles; A is read in place where its rows are whole tiles. C is read and
 * written in place where a 32 x 32 block lies inside it, through a stack tile at the edges.
 * Loops: row blocks of GA_MC (A packed once, all of K, unless read in place) > column blocks
 * of GA_NC > K blocks of GmCfg.amx_kc (B's block packed into L2, its rows prefetched ahead of
 * the packing) > 32-row panels (A's stay in L1) > 32-column panels, each a 32 x 32 block
 * that the family computes over the K block (GmPairBlock). The block sizes and hints were
 * measured side by side on the device host's Xeon (docs/log/2026-12-01-cpu-amx.md). K = 0, and
 * a process refused the AMX state, call the widened-FMA bf16 function instead. */
#include "gemm_impl.h"

enum {
  GA_MC = 256, /* rows of A packed at once */
  GA_NC = 512, /* columns of a block of B */
  GA_PF = 16   /* rows of B prefetched ahead of its packing */
};

int64_t gm_pairs_pack_bytes(const GmCfg *c, int64_t M, int64_t N, int64_t K) {
  int64_t mr = gm_roundup(gm_min(GA_MC, M < 1 ? 1 : M), 32), kr = gm_roundup(K < 1 ? 1 : K, 32);
  int64_t nr = gm_roundup(gm_min(GA_NC, N < 1 ? 1 : N), 32);
  return memplan_align(mr * kr * 2 + gm_min(c->amx_kc, kr) * nr * 2);
}

/* v rounded up to whole tiles' 32 rows, columns or depths. */
static LLVMValueRef ga_round32(CpuKern *k, LLVMValueRef v) {
  return LLVMBuildAnd(k->B, gadd(k, v, gi(k, 31)), gi(k, ~(int64_t)31), "");
}

/* ------------------------------------------------------------------ packing */

/* An edge element: src[i * rs + j * cs] (i, j clamped inside by the caller) stored at dst
 * where ok holds, else zero. */
static void ga_elem(CpuKern *k, LLVMValueRef src, LLVMValueRef i, LLVMValueRef rs, LLVMValueRef j,
                    LLVMValueRef cs, LLVMValueRef ok, LLVMValueRef dst) {
  LLVMValueRef v =
      gload(k, k->cg->i16, gep_e(k, GE_BF16, src, gadd(k, gmul(k, i, rs), gmul(k, j, cs))), 2);
  gstore(k, LLVMBuildSelect(k->B, ok, v, LLVMConstInt(k->cg->i16, 0, 0), ""), dst, 2);
}

/* A's rows [ic, ic + mc), all of its depth, into tiles: tile (t, q) (rows 16 t.., depths
 * 32 q..) at ap + (t * kq + q) * GM_TILE_BYTES; zeros past mc rows (up to mcr) and past K. */
static void ga_pack_a(CpuKern *k, const LLVMValueRef *P, LLVMValueRef ap, LLVMValueRef ic,
                      LLVMValueRef mc, LLVMValueRef mcr, LLVMValueRef kq) {
  CpuCg *cg = k->cg;
  CpuLoop lr, lq, lj;
  LLVMValueRef r = gloop(k, &lr, gi(k, 0), mcr, 1);
  LLVMValueRef q = gloop(k, &lq, gi(k, 0), kq, 1);
  LLVMValueRef t = LLVMBuildSDiv(k->B, r, gi(k, 16), ""),
               rr = LLVMBuildSRem(k->B, r, gi(k, 16), "");
  LLVMValueRef dst = gep_e(k, GE_BF16, ap,
                           gadd(k, gmul(k, gadd(k, gmul(k, t, kq), q), gi(k, GM_TILE_BYTES / 2)),
                                gmul(k, rr, gi(k, 32))));
  LLVMValueRef k0 = gmul(k, q, gi(k, 32)), row = gslt(k, r, mc);
  LLVMValueRef src = gep_e(k, GE_BF16, P[GP_A], gmul(k, gadd(k, ic, r), P[GP_ARS]));
  LLVMValueRef full = gand(k, gand(k, row, gsle(k, gadd(k, k0, gi(k, 32)), P[GP_K])),
                           LLVMBuildICmp(k->B, LLVMIntEQ, P[GP_ACS], gi(k, 1), ""));
  GIf f;
  gif_open(k, &f, full, true);
  LLVMTypeRef v32 = LLVMVectorType(cg->i16, 32);
  gstore(k, gload(k, v32, gep_e(k, GE_BF16, src, k0), 2), dst, 2);
  gif_else(k, &f);
  {
    /* the edges: element by element, zeros outside (the row and depth clamped for the load) */
    LLVMValueRef j = gloop(k, &lj, gi(k, 0), gi(k, 32), 1);
    LLVMValueRef kk = gadd(k, k0, j);
    LLVMValueRef ok = gand(k, row, gslt(k, kk, P[GP_K]));
    LLVMValueRef rc = gmin(k, gadd(k, ic, r), gadd(k, ic, gsub(k, mc, gi(k, 1))));
    LLVMValueRef kc = gmin(k, kk, gsub(k, P[GP_K], gi(k, 1)));
    ga_elem(k, P[GP_A], rc, P[GP_ARS], kc, P[GP_ACS], ok, gep_e(k, GE_BF16, dst, j));
    gm_close(k, &lj);
  }
  gif_close(k, &f);
  gm_close(k, &lq);
  gm_close(k, &lr);
}

/* Whether row pair kg, kg + 1 of B's w columns from c0 (of the block's nc) lies inside B,
 * its columns contiguous. */
static LLVMValueRef ga_pair_inside(CpuKern *k, const LLVMValueRef *P, LLVMValueRef kg,
                                   LLVMValueRef c0, LLVMValueRef nc, int w) {
  LLVMValueRef in =
      gand(k, gsle(k, gadd(k, c0, gi(k, w)), nc), gsle(k, gadd(k, kg, gi(k, 2)), P[GP_K]));
  return gand(k, in, LLVMBuildICmp(k->B, LLVMIntEQ, P[GP_BCS], gi(k, 1), ""));
}

/* Rows kg and kg + 1 of B, w columns from col, as two vectors (returns row kg's address);
 * their depth pairs interleaved, 16 columns from column h * 16 (a VNNI tile's row). */
static LLVMValueRef ga_pair_load(CpuKern *k, const LLVMValueRef *P, LLVMValueRef kg,
                                 LLVMValueRef col, int w, LLVMValueRef *r) {
  LLVMTypeRef vt = LLVMVectorType(k->cg->i16, (unsigned)w);
  LLVMValueRef s0 = gep_e(k, GE_BF16, P[GP_B], gadd(k, gmul(k, kg, P[GP_BRS]), col));
  r[0] = gload(k, vt, s0, 2);
  r[1] = gload(k, vt, gep_e(k, GE_BF16, s0, P[GP_BRS]), 2);
  return s0;
}
static LLVMValueRef ga_interleave(CpuKern *k, const LLVMValueRef *r, int w, int h) {
  LLVMValueRef mask[32];
  for (int i = 0; i < 32; i++)
    mask[i] = LLVMConstInt(k->cg->i32, (unsigned)((i & 1) * w + 16 * h + i / 2), 0);
  return LLVMBuildShuffleVector(k->B, r[0], r[1], LLVMConstVector(mask, 32), "");
}

/* Row pair kg, kg + 1 of B's 16 columns from col (c0 of the block's nc) into dst, a row of
 * a VNNI tile: interleaved vectors where the 16 columns and both rows are inside B and its
 * columns are contiguous, else element by element with zeros outside. */
static void ga_pack_b16(CpuKern *k, const LLVMValueRef *P, LLVMValueRef dst, LLVMValueRef kg,
                        LLVMValueRef jc, LLVMValueRef c0, LLVMValueRef nc) {
  GIf f;
  gif_open(k, &f, ga_pair_inside(k, P, kg, c0, nc, 16), true);
  LLVMValueRef r[2];
  ga_pair_load(k, P, kg, gadd(k, jc, c0), 16, r);
  gstore(k, ga_interleave(k, r, 16, 0), dst, 2);
  gif_else(k, &f);
  {
    CpuLoop ln;
    LLVMValueRef n = gloop(k, &ln, gi(k, 0), gi(k, 32), 1);
    LLVMValueRef cn = gadd(k, c0, LLVMBuildSDiv(k->B, n, gi(k, 2), ""));
    LLVMValueRef kk = gadd(k, kg, LLVMBuildSRem(k->B, n, gi(k, 2), ""));
    LLVMValueRef ok = gand(k, gslt(k, cn, nc), gslt(k, kk, P[GP_K]));
    LLVMValueRef cc = gadd(k, jc, gmin(k, cn, gsub(k, nc, gi(k, 1))));
    LLVMValueRef kcl = gmin(k, kk, gsub(k, P[GP_K], gi(k, 1)));
    ga_elem(k, P[GP_B], kcl, P[GP_BRS], cc, P[GP_BCS], ok, gep_e(k, GE_BF16, dst, n));
    gm_close(k, &ln);
  }
  gif_close(k, &f);
}

/* B's depths [pc, pc + kc) and columns [jc, jc + nc) into VNNI tiles: tile (t, q) (columns
 * 16 t.., depths 32 q.. of the block) at bp + (t * kc / 32 + q) * GM_TILE_BYTES, its row p holding
 * B[d][n], B[d + 1][n] for d = pc + 32 q + 2 p and each of its 16 columns n in turn; zeros
 * past nc columns (up to ncr) and past K. Pairs of rows outer (B is read along its rows), 32
 * columns (two tiles) a step: 64-byte loads of both rows, two interleaving shuffles. */
static void ga_pack_b(CpuKern *k, const LLVMValueRef *P, LLVMValueRef bp, LLVMValueRef pc,
                      LLVMValueRef kc, LLVMValueRef jc, LLVMValueRef nc, LLVMValueRef ncr,
                      bool pf) {
  CpuLoop lc, lp;
  LLVMValueRef kq = LLVMBuildSDiv(k->B, kc, gi(k, 32), "");
  LLVMValueRef d = gloop(k, &lp, gi(k, 0), kc, 2);
  LLVMValueRef c0 = gloop(k, &lc, gi(k, 0), ncr, 32);
  LLVMValueRef tq = gadd(k, gmul(k, LLVMBuildSDiv(k->B, c0, gi(k, 16), ""), kq),
                         LLVMBuildSDiv(k->B, d, gi(k, 32), ""));
  LLVMValueRef dst =
      gep_e(k, GE_BF16, bp,
            gadd(k, gmul(k, tq, gi(k, GM_TILE_BYTES / 2)),
                 gmul(k, LLVMBuildSDiv(k->B, LLVMBuildSRem(k->B, d, gi(k, 32), ""), gi(k, 2), ""),
                      gi(k, 32))));
  LLVMValueRef dst1 =
      gep_e(k, GE_BF16, dst, gmul(k, kq, gi(k, GM_TILE_BYTES / 2))); /* tile t + 1 */
  LLVMValueRef kg = gadd(k, pc, d);
  GIf f;
  gif_open(k, &f, ga_pair_inside(k, P, kg, c0, nc, 32), true);
  {
    LLVMValueRef r[2];
    LLVMValueRef s0 = ga_pair_load(k, P, kg, gadd(k, jc, c0), 32, r);
    /* the same columns GA_PF rows on, asked for ahead (rows are read in short runs, which
       the hardware's prefetchers follow poorly) */
    if (pf) {
      LLVMValueRef ahead = gep_e(k, GE_BF16, s0, gmul(k, P[GP_BRS], gi(k, GA_PF)));
      gm_prefetch(k, ahead, 3);
      gm_prefetch(k, gep_e(k, GE_BF16, ahead, P[GP_BRS]), 3);
    }
    gstore(k, ga_interleave(k, r, 32, 0), dst, 2);
    gstore(k, ga_interleave(k, r, 32, 1), dst1, 2);
  }
  gif_else(k, &f);
  ga_pack_b16(k, P, dst, kg, jc, c0, nc);
  ga_pack_b16(k, P, dst1, kg, jc, gadd(k, c0, gi(k, 16)), nc);
  gif_close(k, &f);
  gm_close(k, &lc);
  gm_close(k, &lp);
}

/* The same block from a B whose depths are contiguous (B [N, K], brs 1: a transposed weight,
 * or the keys of attention scores): per tile, 16 columns of 32 depths loaded as 16 vectors of
 * 16 depth pairs, transposed in registers (cpu_transpose_regs) into the tile's 16 rows of
 * pairs; a tile not inside B (or B's depths strided) element by element. */
static void ga_pack_bt(CpuKern *k, const LLVMValueRef *P, LLVMValueRef bp, LLVMValueRef pc,
                       LLVMValueRef kc, LLVMValueRef jc, LLVMValueRef nc, LLVMValueRef ncr) {
  CpuCg *cg = k->cg;
  CpuLoop lc, lq, lp;
  LLVMValueRef kq = LLVMBuildSDiv(k->B, kc, gi(k, 32), "");
  LLVMValueRef c0 = gloop(k, &lc, gi(k, 0), ncr, 16);
  LLVMValueRef q = gloop(k, &lq, gi(k, 0), kq, 1);
  LLVMValueRef dst = gep_e(k, GE_BF16, bp,
                           gmul(k, gadd(k, gmul(k, LLVMBuildSDiv(k->B, c0, gi(k, 16), ""), kq), q),
                                gi(k, GM_TILE_BYTES / 2)));
  LLVMValueRef kg = gadd(k, pc, gmul(k, q, gi(k, 32)));
  LLVMValueRef full =
      gand(k, gsle(k, gadd(k, c0, gi(k, 16)), nc), gsle(k, gadd(k, kg, gi(k, 32)), P[GP_K]));
  full = gand(k, full, LLVMBuildICmp(k->B, LLVMIntEQ, P[GP_BRS], gi(k, 1), ""));
  GIf f;
  gif_open(k, &f, full, true);
  {
    LLVMTypeRef v16 = LLVMVectorType(cg->i32, 16);
    LLVMValueRef v[16];
    for (int n = 0; n < 16; n++)
      v[n] = gload(k, v16,
                   gep_e(k, GE_BF16, P[GP_B],
                         gadd(k, gmul(k, gadd(k, jc, gadd(k, c0, gi(k, n))), P[GP_BCS]), kg)),
                   2);
    cpu_transpose_regs(k, v, 16);
    for (int r = 0; r < 16; r++)
      gstore(k, v[r], gep_e(k, GE_BF16, dst, gi(k, 32 * r)), 2);
  }
  gif_else(k, &f);
  {
    LLVMValueRef pr = gloop(k, &lp, gi(k, 0), gi(k, 16), 1);
    ga_pack_b16(k, P, gep_e(k, GE_BF16, dst, gmul(k, pr, gi(k, 32))),
                gadd(k, kg, gmul(k, pr, gi(k, 2))), jc, c0, nc);
    gm_close(k, &lp);
  }
  gif_close(k, &f);
  gm_close(k, &lq);
  gm_close(k, &lc);
}

/* ------------------------------------------------------------------ the panels */

/* rows x cols floats between C (leading dimension ldc) and the 32 x 32 stack tile e (to_e:
 * into e). */
static void ga_edge_copy(CpuKern *k, LLVMValueRef C, LLVMValueRef ldc, LLVMValueRef e,
                         LLVMValueRef rows, LLVMValueRef cols, bool to_e) {
  CpuLoop li, lj;
  LLVMValueRef i = gloop(k, &li, gi(k, 0), rows, 1);
  LLVMValueRef j = gloop(k, &lj, gi(k, 0), cols, 1);
  LLVMValueRef pc = gfp(k, C, gadd(k, gmul(k, i, ldc), j));
  LLVMValueRef pe = gfp(k, e, gadd(k, gmul(k, i, gi(k, 32)), j));
  gstore(k, gload(k, k->cg->f32, to_e ? pc : pe, 4), to_e ? pe : pc, 4);
  gm_close(k, &lj);
  gm_close(k, &li);
}

/* The 32 x 32 block of C at cp (mrv x nrv of it inside C) over one K block of kq tile depths
 * (A's panel at a, B's tiles of columns 0-15 and 16-31 at b0 and b1) by the target's family:
 * in place where the block lies inside C, else in the stack tile edge, copied from C first
 * (but on the first K block) and back after. */
static void ga_panel(CpuKern *k, const GmCfg *c, const GmPairA *a, LLVMValueRef b0, LLVMValueRef b1,
                     LLVMValueRef kq, LLVMValueRef cp, LLVMValueRef ldc, LLVMValueRef mrv,
                     LLVMValueRef nrv, LLVMValueRef first, LLVMValueRef edge) {
  LLVMValueRef whole = gand(k, LLVMBuildICmp(k->B, LLVMIntEQ, mrv, gi(k, 32), ""),
                            LLVMBuildICmp(k->B, LLVMIntEQ, nrv, gi(k, 32), ""));
  LLVMValueRef part = LLVMBuildNot(k->B, whole, "");
  GmPairBlock blk = {*a,
                     b0,
                     b1,
                     kq,
                     LLVMBuildSelect(k->B, whole, cp, edge, ""),
                     LLVMBuildSelect(k->B, whole, gmul(k, ldc, gi(k, 4)), gi(k, 128), ""),
                     first};
  GIf e;
  gif_open(k, &e, gand(k, part, LLVMBuildNot(k->B, first, "")), false);
  ga_edge_copy(k, cp, ldc, edge, mrv, nrv, true);
  gif_close(k, &e);
  if (c->amx)
    gm_amx_block(k, c->amx_t1, &blk);
  else
    gm_dp_block(k, &blk);
  gif_open(k, &e, part, false);
  ga_edge_copy(k, cp, ldc, edge, mrv, nrv, false);
  gif_close(k, &e);
}

/* ------------------------------------------------------------------ the function */

/* Depths [pc, pc + kc) of columns [jc, jc + nc) of B into tiles at bp (ga_pack_b's layout),
 * from either of B's contiguous dimensions. */
static void ga_pack_block(CpuKern *k, const GmCfg *c, const LLVMValueRef *P, LLVMValueRef bp,
                          LLVMValueRef pc, LLVMValueRef kc, LLVMValueRef jc, LLVMValueRef nc,
                          LLVMValueRef ncr) {
  GIf bt;
  gif_open(k, &bt, LLVMBuildICmp(k->B, LLVMIntEQ, P[GP_BCS], gi(k, 1), ""), true);
  ga_pack_b(k, P, bp, pc, kc, jc, nc, ncr, c->amx_pf);
  gif_else(k, &bt);
  ga_pack_bt(k, P, bp, pc, kc, jc, nc, ncr);
  gif_close(k, &bt);
}

/* Byte offset of block (jc, pc) in a B packed whole (gm_pairs_packb_function): the column
 * blocks one after the other, each its K blocks in turn (kr: K rounded to 32; ncr: the
 * block's columns rounded to 32; every block before jc is GA_NC wide). */
static LLVMValueRef ga_block_off(CpuKern *k, LLVMValueRef kr, LLVMValueRef pc, LLVMValueRef jc,
                                 LLVMValueRef ncr) {
  return gmul(k, gadd(k, gmul(k, jc, kr), gmul(k, pc, ncr)), gi(k, 2));
}

LLVMValueRef gm_pairs_packb_function(CpuCg *cg) {
  GmState *st = gm_state(cg);
  if (st->pairs_packb_fn) return st->pairs_packb_fn;
  char name[512];
  snprintf(name, sizeof name, "%s_gemm_bf16_pairs_packb", gm_prefix(cg));
  LLVMTypeRef ps[GB_COUNT];
  for (int j = 0; j < GB_COUNT; j++)
    ps[j] = cg->i64;
  ps[GB_X] = ps[GB_DST] = cg->ptr;
  LLVMBasicBlockRef saved = LLVMGetInsertBlock(cg->B);
  CpuKern *k = gm_fn_begin(cg, name, LLVMFunctionType(cg->vd, ps, GB_COUNT, 0));
  GmCfg c = st->cfg;
  gm_mark(k->fn, &c);
  /* the GEMM's parameters that the block packers read */
  LLVMValueRef P[GP_COUNT];
  for (int j = 0; j < GP_COUNT; j++)
    P[j] = gi(k, 0);
  P[GP_B] = LLVMGetParam(k->fn, GB_X);
  P[GP_BRS] = LLVMGetParam(k->fn, GB_RS);
  P[GP_BCS] = LLVMGetParam(k->fn, GB_CS);
  P[GP_N] = LLVMGetParam(k->fn, GB_N);
  P[GP_K] = LLVMGetParam(k->fn, GB_K);
  LLVMValueRef dst = LLVMGetParam(k->fn, GB_DST);
  LLVMValueRef kr = ga_round32(k, P[GP_K]);
  CpuLoop ljc, lpc;
  LLVMValueRef jc = gloop(k, &ljc, gi(k, 0), P[GP_N], GA_NC);
  LLVMValueRef nc = gmin(k, gi(k, GA_NC), gsub(k, P[GP_N], jc));
  LLVMValueRef ncr = ga_round32(k, nc);
  LLVMValueRef pc = gloop(k, &lpc, gi(k, 0), kr, c.amx_kc);
  LLVMValueRef kc = gmin(k, gi(k, c.amx_kc), gsub(k, kr, pc));
  ga_pack_block(k, &c, P, gbyte(k, dst, ga_block_off(k, kr, pc, jc, ncr)), pc, kc, jc, nc, ncr);
  gm_close(k, &lpc);
  gm_close(k, &ljc);
  LLVMBuildRetVoid(k->B);
  if (saved) LLVMPositionBuilderAtEnd(cg->B, saved);
  st->pairs_packb_fn = k->fn;
  return k->fn;
}

int64_t gm_pairs_packed_bytes(int64_t N, int64_t K) {
  return gm_roundup(N < 1 ? 1 : N, 32) * gm_roundup(K < 1 ? 1 : K, 32) * 2;
}

/* The A tiles of row panel ir (of the row block at ic) at depth pc: packed (tiles (ir / 16,
 * pc / 32 ..) and the next row of tiles, kqa tile depths a row) or, where direct, in A itself. */
static GmPairA ga_a_panel(CpuKern *k, const LLVMValueRef *P, LLVMValueRef direct, LLVMValueRef ap,
                          LLVMValueRef kqa, LLVMValueRef ic, LLVMValueRef ir, LLVMValueRef pc) {
  LLVMValueRef a0 = gbyte(k, ap,
                          gmul(k,
                               gadd(k, gmul(k, LLVMBuildSDiv(k->B, ir, gi(k, 16), ""), kqa),
                                    LLVMBuildSDiv(k->B, pc, gi(k, 32), "")),
                               gi(k, GM_TILE_BYTES)));
  LLVMValueRef a1 = gbyte(k, a0, gmul(k, kqa, gi(k, GM_TILE_BYTES)));
  LLVMValueRef ars2 = gmul(k, P[GP_ARS], gi(k, 2));
  LLVMValueRef ad =
      gbyte(k, P[GP_A], gmul(k, gadd(k, gmul(k, gadd(k, ic, ir), P[GP_ARS]), pc), gi(k, 2)));
  return (GmPairA){LLVMBuildSelect(k->B, direct, ad, a0, ""),
                   LLVMBuildSelect(k->B, direct, gbyte(k, ad, gmul(k, ars2, gi(k, 16))), a1, ""),
                   LLVMBuildSelect(k->B, direct, gi(k, 64), gi(k, GM_TILE_BYTES), ""),
                   LLVMBuildSelect(k->B, direct, ars2, gi(k, 64), "")};
}

/* The blocks of one call, K > 0 and the tiles granted (see the file's head). */
static void ga_blocks(CpuKern *k, const GmCfg *c, const LLVMValueRef *P, LLVMValueRef edge) {
  LLVMValueRef M = P[GP_M], N = P[GP_N];
  LLVMValueRef kr = ga_round32(k, P[GP_K]);
  LLVMValueRef kqa = LLVMBuildSDiv(k->B, kr, gi(k, 32), "");
  if (c->amx) gm_amx_config(k);
  CpuLoop lic, ljc, lpc, lir, ljr;
  LLVMValueRef ic = gloop(k, &lic, gi(k, 0), M, GA_MC);
  LLVMValueRef mc = gmin(k, gi(k, GA_MC), gsub(k, M, ic));
  LLVMValueRef mcr = ga_round32(k, mc);
  LLVMValueRef ap = P[GP_PACK];
  /* A read in place by the tile loads where its rows are contiguous and whole tiles (K and
     M multiples of 32: no load past a row or past the last), else packed */
  LLVMValueRef direct =
      gand(k, LLVMBuildICmp(k->B, LLVMIntEQ, P[GP_ACS], gi(k, 1), ""),
           LLVMBuildICmp(k->B, LLVMIntEQ,
                         LLVMBuildAnd(k->B, LLVMBuildOr(k->B, P[GP_K], M, ""), gi(k, 31), ""),
                         gi(k, 0), ""));
  GIf pa;
  gif_open(k, &pa, LLVMBuildNot(k->B, direct, ""), false);
  ga_pack_a(k, P, ap, ic, mc, mcr, kqa);
  gif_close(k, &pa);
  LLVMValueRef bp = gbyte(k, ap, gmul(k, gmul(k, mcr, kr), gi(k, 2)));
  LLVMValueRef jc = gloop(k, &ljc, gi(k, 0), N, GA_NC);
  LLVMValueRef nc = gmin(k, gi(k, GA_NC), gsub(k, N, jc));
  LLVMValueRef ncr = ga_round32(k, nc);
  LLVMValueRef pc = gloop(k, &lpc, gi(k, 0), kr, c->amx_kc);
  LLVMValueRef kc = gmin(k, gi(k, c->amx_kc), gsub(k, kr, pc));
  LLVMValueRef kqb = LLVMBuildSDiv(k->B, kc, gi(k, 32), "");
  /* B packed by the caller ahead of the runs (gm_pairs_packb_function's layout): the block in
     place; else packed here */
  LLVMValueRef pre = LLVMBuildIsNotNull(k->B, P[GP_BPRE], "");
  GIf pk;
  gif_open(k, &pk, LLVMBuildNot(k->B, pre, ""), false);
  ga_pack_block(k, c, P, bp, pc, kc, jc, nc, ncr);
  gif_close(k, &pk);
  bp = LLVMBuildSelect(k->B, pre, gbyte(k, P[GP_BPRE], ga_block_off(k, kr, pc, jc, ncr)), bp, "");
  LLVMValueRef first = LLVMBuildICmp(k->B, LLVMIntEQ, pc, gi(k, 0), "");
  LLVMValueRef ir = gloop(k, &lir, gi(k, 0), mcr, 32);
  LLVMValueRef mrv = gmin(k, gi(k, 32), gsub(k, mc, ir));
  GmPairA at = ga_a_panel(k, P, direct, ap, kqa, ic, ir, pc);
  LLVMValueRef jr = gloop(k, &ljr, gi(k, 0), ncr, 32);
  LLVMValueRef nrv = gmin(k, gi(k, 32), gsub(k, nc, jr));
  LLVMValueRef b0 = gbyte(
      k, bp, gmul(k, gmul(k, LLVMBuildSDiv(k->B, jr, gi(k, 16), ""), kqb), gi(k, GM_TILE_BYTES)));
  LLVMValueRef b1 = gbyte(k, b0, gmul(k, kqb, gi(k, GM_TILE_BYTES)));
  LLVMValueRef cp = gfp(k, P[GP_C], gadd(k, gmul(k, gadd(k, ic, ir), P[GP_LDC]), gadd(k, jc, jr)));
  ga_panel(k, c, &at, b0, b1, kqb, cp, P[GP_LDC], mrv, nrv, first, edge);
  gm_close(k, &ljr);
  gm_close(k, &lir);
  gm_close(k, &lpc);
  gm_close(k, &ljc);
  gm_close(k, &lic);
  if (c->amx) gm_amx_release(k);
}

LLVMValueRef gm_pairs_function(CpuCg *cg) {
  GmState *st = gm_state(cg);
  if (st->pairs_fn) return st->pairs_fn;
  LLVMValueRef widened = gm_function(cg, GE_BF16);
  GmCfg c = st->cfg;
  char name[512];
  snprintf(name, sizeof name, "%s_gemm_bf16_%s", gm_prefix(cg), c.amx ? "amx" : "dp");
  LLVMBasicBlockRef saved = LLVMGetInsertBlock(cg->B);
  CpuKern *k = gm_fn_begin(cg, name, gm_fn_type(cg));
  gm_mark(k->fn, &c);
  /* (the target's features and the family's: an attribute replaces the machine's string) */
  char feat[4096];
  snprintf(feat, sizeof feat, "%s%s%s", cg->tfeat, *cg->tfeat ? "," : "",
           c.amx ? "+amx-tile,+amx-bf16" : "+avx512bf16");
  LLVMAddTargetDependentFunctionAttr(k->fn, "target-features", feat);
  LLVMValueRef P[GP_COUNT];
  for (int j = 0; j < GP_COUNT; j++)
    P[j] = LLVMGetParam(k->fn, (unsigned)j);
  LLVMValueRef edge = cpu_alloca(k, LLVMArrayType2(cg->f32, 32 * 32));
  LLVMSetAlignment(edge, 64);
  LLVMValueRef go = gslt(k, gi(k, 0), P[GP_K]);
  GIf f;
  gif_open(k, &f, c.amx ? gand(k, go, gm_amx_granted(k)) : go, true);
  ga_blocks(k, &c, P, edge);
  gif_else(k, &f);
  LLVMBuildCall2(k->B, gm_fn_type(cg), widened, P, GP_COUNT, "");
  gif_close(k, &f);
  LLVMBuildRetVoid(k->B);
  if (saved) LLVMPositionBuilderAtEnd(cg->B, saved);
  st->pairs_fn = k->fn;
  return k->fn;
}
