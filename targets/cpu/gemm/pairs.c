/* targets/cpu/gemm/pairs.c: the GEMM functions on depth groups (AMX tiles, AVX512-BF16).
 *
 * Where the target CPU multiplies small groups of depths itself (AMX-BF16's TDPBF16PS and
 * AMX-INT8's TDPBSSD, amx.c; else AVX512-BF16's VDPBF16PS, dpbf16.c), dots of bf16 operands
 * (and, on AMX, of s8 ones) call these functions instead of gm_function's widened ones: the
 * same parameters and result (C = A * B in f32, or s32 for s8, row-major C), but the operands
 * stay as they are: exact products, f32 or s32 sums. Each 4-byte group of a VNNI row holds the
 * depths one instruction pairs up (GaFmt: 2 of bf16, 4 of s8). A's rows are packed into
 * 16-row tiles of 64-byte rows (32 bf16 or 64 s8 depths) and B into VNNI tiles (each 64-byte
 * row holds 16 columns of a group of depths; from a B [N, K] through a register transpose),
 * both padded with zeros to whole tiles; A is read in place where its rows are whole tiles.
 * C is read and written in place where a 32 x 32 block lies inside it, through a stack tile at
 * the edges. Loops: row blocks of GA_MC (A packed once, all of K, unless read in place) >
 * column blocks of GA_NC > K blocks of GmCfg.amx_kc (B's block packed into L2, its rows
 * prefetched ahead of the packing) > 32-row panels (A's stay in L1) > 32-column panels, each a
 * 32 x 32 block that the family computes over the K block (GmPairBlock). The block sizes and
 * hints were measured side by side on the device host's Xeon (docs/log/2026-12-01-cpu-amx.md).
 * A bf16 B may be packed ahead (NAME_pack) or, a constant, at compile time (gm_pairs_panels)
 * in this layout. A process refused the AMX state runs bf16 on AVX512-BF16's blocks (the same
 * layout), s8 on the widened function; K = 0 calls the widened function (which packs B itself:
 * it is not given a B packed in this layout). */
#include "gemm_impl.h"

enum {
  GA_MC = 256, /* rows of A packed at once */
  GA_NC = 512, /* columns of a block of B */
  GA_PF = 16   /* rows of B prefetched ahead of its packing */
};

/* The operand format of a function: its element type, element bytes, depths in a 4-byte group
 * and depths in a 64-byte tile row; whether its blocks run on AMX tiles (else AVX512-BF16 or
 * AVX512-VNNI); whether B is stored biased (s8 + 128: VPDPBUSD's unsigned operand; each row
 * of C then carries 128 times its row of A's sum, taken off through GmPairBlock.corr). */
typedef struct GaFmt {
  GmElt e;
  int esz, grp, td;
  bool amx, bias;
} GaFmt;

static GaFmt ga_fmt(const GmCfg *c, GmElt e) {
  bool amx = gm_pairs_tiles(c, e);
  return e == GE_S8 ? (GaFmt){GE_S8, 1, 4, 64, amx, !amx} : (GaFmt){GE_BF16, 2, 2, 32, amx, false};
}

/* v (B's bytes as stored: any integer vector or scalar) biased where f says so. */
static LLVMValueRef ga_biased(GenKern *k, const GaFmt *f, LLVMValueRef v) {
  if (!f->bias) return v;
  LLVMTypeRef t = LLVMTypeOf(v), et = t;
  unsigned n = 0;
  if (LLVMGetTypeKind(t) == LLVMVectorTypeKind)
    n = LLVMGetVectorSize(t), et = LLVMGetElementType(t);
  unsigned bits = LLVMGetIntTypeWidth(et);
  LLVMValueRef m = LLVMConstInt(et, bits == 8 ? 0x80 : 0x80808080u, 0);
  if (n) {
    LLVMValueRef lanes[64];
    for (unsigned i = 0; i < n; i++)
      lanes[i] = m;
    m = LLVMConstVector(lanes, n);
  }
  return LLVMBuildXor(k->B, v, m, "");
}

/* The K blocks' depth: GmCfg.amx_kc in whole tile depths. */
static int64_t ga_kc(const GmCfg *c, const GaFmt *f) { return gm_roundup(c->amx_kc, f->td); }

int64_t gm_pairs_pack_bytes(const GmCfg *c, GmElt e, int64_t M, int64_t N, int64_t K) {
  GaFmt f = ga_fmt(c, e);
  int64_t mr = gm_roundup(gm_min(GA_MC, M < 1 ? 1 : M), 32), kr = gm_roundup(K < 1 ? 1 : K, f.td);
  int64_t nr = gm_roundup(gm_min(GA_NC, N < 1 ? 1 : N), 32);
  return memplan_align((mr * kr + gm_min(ga_kc(c, &f), kr) * nr) * f.esz);
}

/* v rounded up to a multiple of m (a power of two: whole tiles' rows, columns or depths). */
static LLVMValueRef ga_round(GenKern *k, LLVMValueRef v, int m) {
  return LLVMBuildAnd(k->B, gadd(k, v, gi(k, m - 1)), gi(k, ~(int64_t)(m - 1)), "");
}

/* ------------------------------------------------------------------ packing */

/* An edge element: src[i * rs + j * cs] (i, j clamped inside by the caller) stored at dst
 * where ok holds, else zero; B's (b) biased where the format says so. */
static void ga_elem(GenKern *k, const GaFmt *f, bool b, LLVMValueRef src, LLVMValueRef i,
                    LLVMValueRef rs, LLVMValueRef j, LLVMValueRef cs, LLVMValueRef ok,
                    LLVMValueRef dst) {
  LLVMTypeRef t = gm_elt_type(cpu_cg(k->cg), f->e);
  LLVMValueRef v = gload(k, t, gep_e(k, f->e, src, gadd(k, gmul(k, i, rs), gmul(k, j, cs))), 1);
  v = LLVMBuildSelect(k->B, ok, v, LLVMConstInt(t, 0, 0), "");
  gstore(k, b ? ga_biased(k, f, v) : v, dst, 1);
}

/* A's rows [ic, ic + mc), all of its depth, into tiles: tile (t, q) (rows 16 t.., depths
 * td q..) at ap + (t * kq + q) * GM_TILE_BYTES; zeros past mc rows (up to mcr) and past K. */
static void ga_pack_a(GenKern *k, const GaFmt *f, const LLVMValueRef *P, LLVMValueRef ap,
                      LLVMValueRef ic, LLVMValueRef mc, LLVMValueRef mcr, LLVMValueRef kq) {
  CpuCg *cg = cpu_cg(k->cg);
  GenLoop lr, lq, lj;
  LLVMValueRef r = gloop(k, &lr, gi(k, 0), mcr, 1);
  LLVMValueRef q = gloop(k, &lq, gi(k, 0), kq, 1);
  LLVMValueRef t = LLVMBuildSDiv(k->B, r, gi(k, 16), ""),
               rr = LLVMBuildSRem(k->B, r, gi(k, 16), "");
  LLVMValueRef dst = gbyte(
      k, ap,
      gadd(k, gmul(k, gadd(k, gmul(k, t, kq), q), gi(k, GM_TILE_BYTES)), gmul(k, rr, gi(k, 64))));
  LLVMValueRef k0 = gmul(k, q, gi(k, f->td)), row = gslt(k, r, mc);
  LLVMValueRef src = gep_e(k, f->e, P[GP_A], gmul(k, gadd(k, ic, r), P[GP_ARS]));
  LLVMValueRef full = gand(k, gand(k, row, gsle(k, gadd(k, k0, gi(k, f->td)), P[GP_K])),
                           LLVMBuildICmp(k->B, LLVMIntEQ, P[GP_ACS], gi(k, 1), ""));
  GIf fi;
  gif_open(k, &fi, full, true);
  LLVMTypeRef row_t = LLVMVectorType(cg->g.i8, 64); /* a tile row's 64 bytes */
  gstore(k, gload(k, row_t, gep_e(k, f->e, src, k0), 1), dst, 1);
  gif_else(k, &fi);
  {
    /* the edges: element by element, zeros outside (the row and depth clamped for the load) */
    LLVMValueRef j = gloop(k, &lj, gi(k, 0), gi(k, f->td), 1);
    LLVMValueRef kk = gadd(k, k0, j);
    LLVMValueRef ok = gand(k, row, gslt(k, kk, P[GP_K]));
    LLVMValueRef rc = gmin(k, gadd(k, ic, r), gadd(k, ic, gsub(k, mc, gi(k, 1))));
    LLVMValueRef kc = gmin(k, kk, gsub(k, P[GP_K], gi(k, 1)));
    ga_elem(k, f, false, P[GP_A], rc, P[GP_ARS], kc, P[GP_ACS], ok, gep_e(k, f->e, dst, j));
    gm_close(k, &lj);
  }
  gif_close(k, &fi);
  gm_close(k, &lq);
  gm_close(k, &lr);
}

/* Whether the group of rows kg, kg + 1 .. of B's w columns from c0 (of the block's nc) lies
 * inside B, its columns contiguous. */
static LLVMValueRef ga_rows_inside(GenKern *k, const GaFmt *f, const LLVMValueRef *P,
                                   LLVMValueRef kg, LLVMValueRef c0, LLVMValueRef nc, int w) {
  LLVMValueRef in =
      gand(k, gsle(k, gadd(k, c0, gi(k, w)), nc), gsle(k, gadd(k, kg, gi(k, f->grp)), P[GP_K]));
  return gand(k, in, LLVMBuildICmp(k->B, LLVMIntEQ, P[GP_BCS], gi(k, 1), ""));
}

/* The group's rows of B, w columns from col, as one vector of the rows one after the other
 * (returns row kg's address); ga_interleave takes its depths group by group, 16 columns from
 * column h * 16 (a VNNI tile's row: 64 bytes). */
static LLVMValueRef ga_rows_load(GenKern *k, const GaFmt *f, const LLVMValueRef *P, LLVMValueRef kg,
                                 LLVMValueRef col, int w, LLVMValueRef *rows) {
  LLVMTypeRef vt = LLVMVectorType(gm_elt_type(cpu_cg(k->cg), f->e), (unsigned)w);
  LLVMValueRef s0 = gep_e(k, f->e, P[GP_B], gadd(k, gmul(k, kg, P[GP_BRS]), col)), r[4], cat[128];
  for (int g = 0; g < f->grp; g++)
    r[g] = gload(k, vt, gep_e(k, f->e, s0, gmul(k, gi(k, g), P[GP_BRS])), 1);
  for (int i = 0; i < f->grp * w; i++)
    cat[i] = LLVMConstInt(k->cg->i32, (unsigned)i, 0);
  LLVMValueRef lo = LLVMBuildShuffleVector(k->B, r[0], r[1], LLVMConstVector(cat, 2 * w), "");
  if (f->grp == 4) {
    LLVMValueRef hi = LLVMBuildShuffleVector(k->B, r[2], r[3], LLVMConstVector(cat, 2 * w), "");
    lo = LLVMBuildShuffleVector(k->B, lo, hi, LLVMConstVector(cat, 4 * w), "");
  }
  *rows = lo;
  return s0;
}
static LLVMValueRef ga_interleave(GenKern *k, const GaFmt *f, LLVMValueRef rows, int w, int h) {
  LLVMValueRef mask[64];
  int n = 16 * f->grp;
  for (int i = 0; i < n; i++)
    mask[i] = LLVMConstInt(k->cg->i32, (unsigned)((i % f->grp) * w + 16 * h + i / f->grp), 0);
  return LLVMBuildShuffleVector(k->B, rows, LLVMGetUndef(LLVMTypeOf(rows)),
                                LLVMConstVector(mask, (unsigned)n), "");
}

/* Depth group kg.. of B's 16 columns from col (c0 of the block's nc) into dst, a row of a VNNI
 * tile: interleaved vectors where the 16 columns and the group's rows are inside B and its
 * columns are contiguous, else element by element with zeros outside. */
static void ga_pack_b16(GenKern *k, const GaFmt *f, const LLVMValueRef *P, LLVMValueRef dst,
                        LLVMValueRef kg, LLVMValueRef jc, LLVMValueRef c0, LLVMValueRef nc) {
  GIf fi;
  gif_open(k, &fi, ga_rows_inside(k, f, P, kg, c0, nc, 16), true);
  LLVMValueRef rows;
  ga_rows_load(k, f, P, kg, gadd(k, jc, c0), 16, &rows);
  gstore(k, ga_biased(k, f, ga_interleave(k, f, rows, 16, 0)), dst, 1);
  gif_else(k, &fi);
  {
    GenLoop ln;
    LLVMValueRef n = gloop(k, &ln, gi(k, 0), gi(k, 16 * f->grp), 1);
    LLVMValueRef cn = gadd(k, c0, LLVMBuildSDiv(k->B, n, gi(k, f->grp), ""));
    LLVMValueRef kk = gadd(k, kg, LLVMBuildSRem(k->B, n, gi(k, f->grp), ""));
    LLVMValueRef ok = gand(k, gslt(k, cn, nc), gslt(k, kk, P[GP_K]));
    LLVMValueRef cc = gadd(k, jc, gmin(k, cn, gsub(k, nc, gi(k, 1))));
    LLVMValueRef kcl = gmin(k, kk, gsub(k, P[GP_K], gi(k, 1)));
    ga_elem(k, f, true, P[GP_B], kcl, P[GP_BRS], cc, P[GP_BCS], ok, gep_e(k, f->e, dst, n));
    gm_close(k, &ln);
  }
  gif_close(k, &fi);
}

/* B's depths [pc, pc + kc) and columns [jc, jc + nc) into VNNI tiles: tile (t, q) (columns
 * 16 t.., depths td q.. of the block) at bp + (t * kc / td + q) * GM_TILE_BYTES, its row p
 * holding B[d][n] .. B[d + grp - 1][n] for d = pc + td q + grp p and each of its 16 columns n
 * in turn; zeros past nc columns (up to ncr) and past K. Groups of rows outer (B is read along
 * its rows), 32 columns (two tiles) a step: 32-column loads of the group's rows, two
 * interleaving shuffles. */
static void ga_pack_b(GenKern *k, const GaFmt *f, const LLVMValueRef *P, LLVMValueRef bp,
                      LLVMValueRef pc, LLVMValueRef kc, LLVMValueRef jc, LLVMValueRef nc,
                      LLVMValueRef ncr, bool pf) {
  GenLoop lc, lp;
  LLVMValueRef kq = LLVMBuildSDiv(k->B, kc, gi(k, f->td), "");
  LLVMValueRef d = gloop(k, &lp, gi(k, 0), kc, f->grp);
  LLVMValueRef c0 = gloop(k, &lc, gi(k, 0), ncr, 32);
  LLVMValueRef tq = gadd(k, gmul(k, LLVMBuildSDiv(k->B, c0, gi(k, 16), ""), kq),
                         LLVMBuildSDiv(k->B, d, gi(k, f->td), ""));
  LLVMValueRef prow =
      LLVMBuildSDiv(k->B, LLVMBuildSRem(k->B, d, gi(k, f->td), ""), gi(k, f->grp), "");
  LLVMValueRef dst =
      gbyte(k, bp, gadd(k, gmul(k, tq, gi(k, GM_TILE_BYTES)), gmul(k, prow, gi(k, 64))));
  LLVMValueRef dst1 = gbyte(k, dst, gmul(k, kq, gi(k, GM_TILE_BYTES))); /* tile t + 1 */
  LLVMValueRef kg = gadd(k, pc, d);
  GIf fi;
  gif_open(k, &fi, ga_rows_inside(k, f, P, kg, c0, nc, 32), true);
  {
    LLVMValueRef rows;
    LLVMValueRef s0 = ga_rows_load(k, f, P, kg, gadd(k, jc, c0), 32, &rows);
    /* the same columns GA_PF rows on, asked for ahead (rows are read in short runs, which
       the hardware's prefetchers follow poorly) */
    if (pf) {
      LLVMValueRef ahead = gep_e(k, f->e, s0, gmul(k, P[GP_BRS], gi(k, GA_PF)));
      for (int g = 0; g < f->grp; g++)
        gm_prefetch(k, gep_e(k, f->e, ahead, gmul(k, gi(k, g), P[GP_BRS])), 3);
    }
    gstore(k, ga_biased(k, f, ga_interleave(k, f, rows, 32, 0)), dst, 1);
    gstore(k, ga_biased(k, f, ga_interleave(k, f, rows, 32, 1)), dst1, 1);
  }
  gif_else(k, &fi);
  ga_pack_b16(k, f, P, dst, kg, jc, c0, nc);
  ga_pack_b16(k, f, P, dst1, kg, jc, gadd(k, c0, gi(k, 16)), nc);
  gif_close(k, &fi);
  gm_close(k, &lc);
  gm_close(k, &lp);
}

/* The same block from a B whose depths are contiguous (B [N, K], brs 1: a transposed weight,
 * or the keys of attention scores): per tile, 16 columns of td depths loaded as 16 vectors of
 * 16 depth groups (4 bytes each), transposed in registers (cpu_transpose_regs) into the tile's
 * 16 rows of groups; a tile not inside B (or B's depths strided) element by element. */
static void ga_pack_bt(GenKern *k, const GaFmt *f, const LLVMValueRef *P, LLVMValueRef bp,
                       LLVMValueRef pc, LLVMValueRef kc, LLVMValueRef jc, LLVMValueRef nc,
                       LLVMValueRef ncr) {
  CpuCg *cg = cpu_cg(k->cg);
  GenLoop lc, lq, lp;
  LLVMValueRef kq = LLVMBuildSDiv(k->B, kc, gi(k, f->td), "");
  LLVMValueRef c0 = gloop(k, &lc, gi(k, 0), ncr, 16);
  LLVMValueRef q = gloop(k, &lq, gi(k, 0), kq, 1);
  LLVMValueRef dst = gbyte(k, bp,
                           gmul(k, gadd(k, gmul(k, LLVMBuildSDiv(k->B, c0, gi(k, 16), ""), kq), q),
                                gi(k, GM_TILE_BYTES)));
  LLVMValueRef kg = gadd(k, pc, gmul(k, q, gi(k, f->td)));
  LLVMValueRef full =
      gand(k, gsle(k, gadd(k, c0, gi(k, 16)), nc), gsle(k, gadd(k, kg, gi(k, f->td)), P[GP_K]));
  full = gand(k, full, LLVMBuildICmp(k->B, LLVMIntEQ, P[GP_BRS], gi(k, 1), ""));
  GIf fi;
  gif_open(k, &fi, full, true);
  {
    LLVMTypeRef v16 = LLVMVectorType(cg->g.i32, 16);
    LLVMValueRef v[16];
    for (int n = 0; n < 16; n++)
      v[n] = gload(k, v16,
                   gep_e(k, f->e, P[GP_B],
                         gadd(k, gmul(k, gadd(k, jc, gadd(k, c0, gi(k, n))), P[GP_BCS]), kg)),
                   1);
    cpu_transpose_regs(k, v, 16);
    for (int r = 0; r < 16; r++)
      gstore(k, ga_biased(k, f, v[r]), gbyte(k, dst, gi(k, 64 * r)), 1);
  }
  gif_else(k, &fi);
  {
    LLVMValueRef pr = gloop(k, &lp, gi(k, 0), gi(k, 16), 1);
    ga_pack_b16(k, f, P, gbyte(k, dst, gmul(k, pr, gi(k, 64))),
                gadd(k, kg, gmul(k, pr, gi(k, f->grp))), jc, c0, nc);
    gm_close(k, &lp);
  }
  gif_close(k, &fi);
  gm_close(k, &lq);
  gm_close(k, &lc);
}

/* ------------------------------------------------------------------ the panels */

/* rows x cols 4-byte values (f32 or s32, copied as bits) between C (leading dimension ldc) and
 * the 32 x 32 stack tile e (to_e: into e). */
static void ga_edge_copy(GenKern *k, LLVMValueRef C, LLVMValueRef ldc, LLVMValueRef e,
                         LLVMValueRef rows, LLVMValueRef cols, bool to_e) {
  GenLoop li, lj;
  LLVMValueRef i = gloop(k, &li, gi(k, 0), rows, 1);
  LLVMValueRef j = gloop(k, &lj, gi(k, 0), cols, 1);
  LLVMValueRef pc = gfp(k, C, gadd(k, gmul(k, i, ldc), j));
  LLVMValueRef pe = gfp(k, e, gadd(k, gmul(k, i, gi(k, 32)), j));
  gstore(k, gload(k, k->cg->i32, to_e ? pc : pe, 4), to_e ? pe : pc, 4);
  gm_close(k, &lj);
  gm_close(k, &li);
}

/* The 32 x 32 block of C at cp (mrv x nrv of it inside C) over one K block of kq tile depths
 * (A's panel at a, B's tiles of columns 0-15 and 16-31 at b0 and b1) by the target's family:
 * in place where the block lies inside C, else in the stack tile edge, copied from C first
 * (but on the first K block) and back after. */
static void ga_panel(GenKern *k, const GmCfg *c, const GaFmt *f, const GmPairA *a, LLVMValueRef b0,
                     LLVMValueRef b1, LLVMValueRef kq, LLVMValueRef cp, LLVMValueRef ldc,
                     LLVMValueRef mrv, LLVMValueRef nrv, LLVMValueRef first, LLVMValueRef edge,
                     LLVMValueRef corr) {
  LLVMValueRef whole = gand(k, LLVMBuildICmp(k->B, LLVMIntEQ, mrv, gi(k, 32), ""),
                            LLVMBuildICmp(k->B, LLVMIntEQ, nrv, gi(k, 32), ""));
  LLVMValueRef part = LLVMBuildNot(k->B, whole, "");
  GmPairBlock blk = {*a,
                     b0,
                     b1,
                     kq,
                     LLVMBuildSelect(k->B, whole, cp, edge, ""),
                     LLVMBuildSelect(k->B, whole, gmul(k, ldc, gi(k, 4)), gi(k, 128), ""),
                     first,
                     corr};
  GIf e;
  gif_open(k, &e, gand(k, part, LLVMBuildNot(k->B, first, "")), false);
  ga_edge_copy(k, cp, ldc, edge, mrv, nrv, true);
  gif_close(k, &e);
  if (f->amx)
    gm_amx_block(k, c->amx_t1, f->e == GE_S8, &blk);
  else
    gm_dp_block(k, f->e == GE_S8, &blk);
  gif_open(k, &e, part, false);
  ga_edge_copy(k, cp, ldc, edge, mrv, nrv, false);
  gif_close(k, &e);
}

/* ------------------------------------------------------------------ the function */

/* Depths [pc, pc + kc) of columns [jc, jc + nc) of B into tiles at bp (ga_pack_b's layout),
 * from either of B's contiguous dimensions. */
static void ga_pack_block(GenKern *k, const GmCfg *c, const GaFmt *f, const LLVMValueRef *P,
                          LLVMValueRef bp, LLVMValueRef pc, LLVMValueRef kc, LLVMValueRef jc,
                          LLVMValueRef nc, LLVMValueRef ncr) {
  GIf bt;
  gif_open(k, &bt, LLVMBuildICmp(k->B, LLVMIntEQ, P[GP_BCS], gi(k, 1), ""), true);
  ga_pack_b(k, f, P, bp, pc, kc, jc, nc, ncr, c->amx_pf);
  gif_else(k, &bt);
  ga_pack_bt(k, f, P, bp, pc, kc, jc, nc, ncr);
  gif_close(k, &bt);
}

/* Byte offset of block (jc, pc) in a B packed whole (gm_pairs_packb_function): the column
 * blocks one after the other, each its K blocks in turn (kr: K rounded to whole tile depths;
 * ncr: the block's columns rounded to 32; every block before jc is GA_NC wide). */
static LLVMValueRef ga_block_off(GenKern *k, const GaFmt *f, LLVMValueRef kr, LLVMValueRef pc,
                                 LLVMValueRef jc, LLVMValueRef ncr) {
  return gmul(k, gadd(k, gmul(k, jc, kr), gmul(k, pc, ncr)), gi(k, f->esz));
}

LLVMValueRef gm_pairs_packb_function(CpuCg *cg, GmElt e) {
  GmState *st = gm_state(cg);
  if (st->pairs_packb_fn[e]) return st->pairs_packb_fn[e];
  GaFmt f = ga_fmt(&st->cfg, e);
  char name[512];
  snprintf(name, sizeof name, "%s_gemm_%s_pairs_packb", gm_prefix(cg), gm_elt_name(e));
  LLVMTypeRef ps[GB_COUNT];
  for (int j = 0; j < GB_COUNT; j++)
    ps[j] = cg->g.i64;
  ps[GB_X] = ps[GB_DST] = cg->g.ptr;
  LLVMBasicBlockRef saved = LLVMGetInsertBlock(cg->g.B);
  GenKern *k = gm_fn_begin(cg, name, LLVMFunctionType(cg->g.vd, ps, GB_COUNT, 0));
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
  LLVMValueRef kr = ga_round(k, P[GP_K], f.td);
  GenLoop ljc, lpc;
  LLVMValueRef jc = gloop(k, &ljc, gi(k, 0), P[GP_N], GA_NC);
  LLVMValueRef nc = gmin(k, gi(k, GA_NC), gsub(k, P[GP_N], jc));
  LLVMValueRef ncr = ga_round(k, nc, 32);
  LLVMValueRef pc = gloop(k, &lpc, gi(k, 0), kr, ga_kc(&c, &f));
  LLVMValueRef kc = gmin(k, gi(k, ga_kc(&c, &f)), gsub(k, kr, pc));
  ga_pack_block(k, &c, &f, P, gbyte(k, dst, ga_block_off(k, &f, kr, pc, jc, ncr)), pc, kc, jc, nc,
                ncr);
  gm_close(k, &lpc);
  gm_close(k, &ljc);
  LLVMBuildRetVoid(k->B);
  if (saved) LLVMPositionBuilderAtEnd(cg->g.B, saved);
  st->pairs_packb_fn[e] = k->fn;
  return k->fn;
}

void gm_pairs_panels(const GmCfg *c, GmElt e, const void *src, int64_t rs, int64_t cs, int64_t K,
                     int64_t N, int64_t nblk, int64_t nnb, uint8_t *dst) {
  GaFmt f = ga_fmt(c, e);
  int64_t kr = gm_roundup(K, f.td), kcb = ga_kc(c, &f), col = kr * f.esz;
  for (int64_t xi = 0; xi < (nnb > 1 ? nnb : 1); xi++) {
    int64_t x0 = xi * nblk, xn = nnb > 1 ? gm_min(nblk, N - x0) : N;
    for (int64_t jc = 0; jc < xn; jc += GA_NC) {
      int64_t nc = gm_min(GA_NC, xn - jc), ncr = gm_roundup(nc, 32);
      for (int64_t pc = 0; pc < kr; pc += kcb) {
        int64_t kc = gm_min(kcb, kr - pc), kq = kc / f.td;
        uint8_t *blk = dst + x0 * col + (jc * kr + pc * ncr) * f.esz; /* ga_block_off */
        for (int64_t d = 0; d < kc && pc + d < K; d++)
          for (int64_t n = 0; n < nc; n++) {
            /* tile (n / 16, d / td), row (d % td) / grp, column n % 16, depth d % grp */
            int64_t at = ((n / 16) * kq + d / f.td) * GM_TILE_BYTES + (d % f.td) / f.grp * 64 +
                         (n % 16) * 4 + (d % f.grp) * f.esz;
            const uint8_t *s = (const uint8_t *)src + ((pc + d) * rs + (x0 + jc + n) * cs) * f.esz;
            memcpy(blk + at, s, (size_t)f.esz);
            if (f.bias) blk[at] ^= 0x80;
          }
      }
    }
  }
}

int64_t gm_pairs_col_bytes(GmElt e, int64_t K) {
  GaFmt f = ga_fmt(&(GmCfg){0}, e); /* (its sizes only) */
  return gm_roundup(K < 1 ? 1 : K, f.td) * f.esz;
}

int64_t gm_pairs_packed_bytes(GmElt e, int64_t N, int64_t nblk, int64_t nnb, int64_t K) {
  return gm_roundup(nnb > 1 ? nnb * gm_roundup(nblk, 32)
                    : N < 1 ? 1
                            : N,
                    32) *
         gm_pairs_col_bytes(e, K);
}

/* The A tiles of row panel ir (of the row block at ic) at depth pc: packed (tiles (ir / 16,
 * pc / td ..) and the next row of tiles, kqa tile depths a row) or, where direct, in A itself. */
static GmPairA ga_a_panel(GenKern *k, const GaFmt *f, const LLVMValueRef *P, LLVMValueRef direct,
                          LLVMValueRef ap, LLVMValueRef kqa, LLVMValueRef ic, LLVMValueRef ir,
                          LLVMValueRef pc) {
  LLVMValueRef a0 = gbyte(k, ap,
                          gmul(k,
                               gadd(k, gmul(k, LLVMBuildSDiv(k->B, ir, gi(k, 16), ""), kqa),
                                    LLVMBuildSDiv(k->B, pc, gi(k, f->td), "")),
                               gi(k, GM_TILE_BYTES)));
  LLVMValueRef a1 = gbyte(k, a0, gmul(k, kqa, gi(k, GM_TILE_BYTES)));
  LLVMValueRef arsb = gmul(k, P[GP_ARS], gi(k, f->esz));
  LLVMValueRef ad =
      gbyte(k, P[GP_A], gmul(k, gadd(k, gmul(k, gadd(k, ic, ir), P[GP_ARS]), pc), gi(k, f->esz)));
  return (GmPairA){LLVMBuildSelect(k->B, direct, ad, a0, ""),
                   LLVMBuildSelect(k->B, direct, gbyte(k, ad, gmul(k, arsb, gi(k, 16))), a1, ""),
                   LLVMBuildSelect(k->B, direct, gi(k, 64), gi(k, GM_TILE_BYTES), ""),
                   LLVMBuildSelect(k->B, direct, arsb, gi(k, 64), "")};
}

/* A's row block at ic, mc rows (mcr rounded): read in place (the returned condition: its rows
 * contiguous and whole tiles, K a multiple of the tile depth and M of 32, so that no load
 * passes a row or the last), else packed at ap here. */
static LLVMValueRef ga_a_block(GenKern *k, const GaFmt *f, const LLVMValueRef *P, LLVMValueRef ap,
                               LLVMValueRef ic, LLVMValueRef mc, LLVMValueRef mcr,
                               LLVMValueRef kqa) {
  LLVMValueRef edges = LLVMBuildOr(k->B, LLVMBuildAnd(k->B, P[GP_K], gi(k, f->td - 1), ""),
                                   LLVMBuildAnd(k->B, P[GP_M], gi(k, 31), ""), "");
  LLVMValueRef direct = gand(k, LLVMBuildICmp(k->B, LLVMIntEQ, P[GP_ACS], gi(k, 1), ""),
                             LLVMBuildICmp(k->B, LLVMIntEQ, edges, gi(k, 0), ""));
  GIf pa;
  gif_open(k, &pa, LLVMBuildNot(k->B, direct, ""), false);
  ga_pack_a(k, f, P, ap, ic, mc, mcr, kqa);
  gif_close(k, &pa);
  return direct;
}

/* B biased (GaFmt.bias): each row of the products carries 128 times the row's sum of A over
 * all of K; -128 times those sums of rows [ic, ic + mc) into corr (i32 each), which the first
 * K block's accumulators start from. A's rows 64 depths a step where contiguous. */
static void ga_row_corr(GenKern *k, const LLVMValueRef *P, LLVMValueRef ic, LLVMValueRef mc,
                        LLVMValueRef corr) {
  CpuCg *cg = cpu_cg(k->cg);
  LLVMBuilderRef B = k->B;
  LLVMTypeRef v64 = LLVMVectorType(cg->g.i32, 64);
  unsigned rid = LLVMLookupIntrinsicID("llvm.vector.reduce.add", 22);
  LLVMValueRef red = LLVMGetIntrinsicDeclaration(cg->g.M, rid, &v64, 1);
  LLVMValueRef vacc = gen_alloca(k, v64), sacc = gen_alloca(k, cg->g.i32);
  GenLoop lr, lk;
  LLVMValueRef r = gloop(k, &lr, gi(k, 0), mc, 1);
  LLVMValueRef row = gep_e(k, GE_S8, P[GP_A], gmul(k, gadd(k, ic, r), P[GP_ARS]));
  LLVMValueRef kv =
      LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntEQ, P[GP_ACS], gi(k, 1), ""),
                      LLVMBuildAnd(B, P[GP_K], gi(k, ~(int64_t)63), ""), gi(k, 0), "");
  LLVMBuildStore(B, LLVMConstNull(v64), vacc);
  LLVMValueRef kk = gloop(k, &lk, gi(k, 0), kv, 64);
  LLVMValueRef x = LLVMBuildSExt(
      B, gload(k, LLVMVectorType(cg->g.i8, 64), gep_e(k, GE_S8, row, kk), 1), v64, "");
  LLVMBuildStore(B, LLVMBuildAdd(B, gload(k, v64, vacc, 64), x, ""), vacc);
  gm_close(k, &lk);
  LLVMValueRef v = gload(k, v64, vacc, 64);
  LLVMBuildStore(B, LLVMBuildCall2(B, LLVMGlobalGetValueType(red), red, &v, 1, ""), sacc);
  kk = gloop(k, &lk, kv, P[GP_K], 1);
  LLVMValueRef e = LLVMBuildSExt(
      B, gload(k, cg->g.i8, gep_e(k, GE_S8, row, gmul(k, kk, P[GP_ACS])), 1), cg->g.i32, "");
  LLVMBuildStore(B, LLVMBuildAdd(B, gload(k, cg->g.i32, sacc, 4), e, ""), sacc);
  gm_close(k, &lk);
  LLVMValueRef s =
      LLVMBuildMul(B, gload(k, cg->g.i32, sacc, 4), LLVMConstInt(cg->g.i32, -128, 1), "");
  gstore(k, s, LLVMBuildInBoundsGEP2(B, cg->g.i32, corr, &r, 1, ""), 4);
  gm_close(k, &lr);
}

/* The blocks of one call, K > 0 and the tiles granted (see the file's head); corr: GA_MC i32
 * of scratch for the biased format's corrections. */
static void ga_blocks(GenKern *k, const GmCfg *c, const GaFmt *f, const LLVMValueRef *P,
                      LLVMValueRef edge, LLVMValueRef corr) {
  LLVMValueRef M = P[GP_M], N = P[GP_N];
  LLVMValueRef kr = ga_round(k, P[GP_K], f->td);
  LLVMValueRef kqa = LLVMBuildSDiv(k->B, kr, gi(k, f->td), "");
  int64_t kcb = ga_kc(c, f);
  if (f->amx) gm_amx_config(k);
  GenLoop lic, ljc, lpc, lir, ljr;
  LLVMValueRef ic = gloop(k, &lic, gi(k, 0), M, GA_MC);
  LLVMValueRef mc = gmin(k, gi(k, GA_MC), gsub(k, M, ic));
  LLVMValueRef mcr = ga_round(k, mc, 32);
  LLVMValueRef ap = P[GP_PACK];
  LLVMValueRef direct = ga_a_block(k, f, P, ap, ic, mc, mcr, kqa);
  if (f->bias) ga_row_corr(k, P, ic, mc, corr);
  LLVMValueRef bp = gbyte(k, ap, gmul(k, gmul(k, mcr, kr), gi(k, f->esz)));
  LLVMValueRef jc = gloop(k, &ljc, gi(k, 0), N, GA_NC);
  LLVMValueRef nc = gmin(k, gi(k, GA_NC), gsub(k, N, jc));
  LLVMValueRef ncr = ga_round(k, nc, 32);
  LLVMValueRef pc = gloop(k, &lpc, gi(k, 0), kr, kcb);
  LLVMValueRef kc = gmin(k, gi(k, kcb), gsub(k, kr, pc));
  LLVMValueRef kqb = LLVMBuildSDiv(k->B, kc, gi(k, f->td), "");
  /* B packed by the caller ahead of the runs (gm_pairs_packb_function's layout): the block in
     place; else packed here */
  LLVMValueRef pre = LLVMBuildIsNotNull(k->B, P[GP_BPRE], "");
  GIf pk;
  gif_open(k, &pk, LLVMBuildNot(k->B, pre, ""), false);
  ga_pack_block(k, c, f, P, bp, pc, kc, jc, nc, ncr);
  gif_close(k, &pk);
  bp =
      LLVMBuildSelect(k->B, pre, gbyte(k, P[GP_BPRE], ga_block_off(k, f, kr, pc, jc, ncr)), bp, "");
  LLVMValueRef first = LLVMBuildICmp(k->B, LLVMIntEQ, pc, gi(k, 0), "");
  LLVMValueRef ir = gloop(k, &lir, gi(k, 0), mcr, 32);
  LLVMValueRef mrv = gmin(k, gi(k, 32), gsub(k, mc, ir));
  GmPairA at = ga_a_panel(k, f, P, direct, ap, kqa, ic, ir, pc);
  LLVMValueRef jr = gloop(k, &ljr, gi(k, 0), ncr, 32);
  LLVMValueRef nrv = gmin(k, gi(k, 32), gsub(k, nc, jr));
  LLVMValueRef b0 = gbyte(
      k, bp, gmul(k, gmul(k, LLVMBuildSDiv(k->B, jr, gi(k, 16), ""), kqb), gi(k, GM_TILE_BYTES)));
  LLVMValueRef b1 = gbyte(k, b0, gmul(k, kqb, gi(k, GM_TILE_BYTES)));
  LLVMValueRef cp = gfp(k, P[GP_C], gadd(k, gmul(k, gadd(k, ic, ir), P[GP_LDC]), gadd(k, jc, jr)));
  LLVMValueRef cr = f->bias ? LLVMBuildInBoundsGEP2(k->B, k->cg->i32, corr, &ir, 1, "") : NULL;
  ga_panel(k, c, f, &at, b0, b1, kqb, cp, P[GP_LDC], mrv, nrv, first, edge, cr);
  gm_close(k, &ljr);
  gm_close(k, &lir);
  gm_close(k, &lpc);
  gm_close(k, &ljc);
  gm_close(k, &lic);
  if (f->amx) gm_amx_release(k);
}

LLVMValueRef gm_pairs_function(CpuCg *cg, GmElt e) {
  GmState *st = gm_state(cg);
  if (st->pairs_fn[e]) return st->pairs_fn[e];
  LLVMValueRef widened = gm_function(cg, e);
  GmCfg c = st->cfg;
  GaFmt f = ga_fmt(&c, e);
  char name[512];
  snprintf(name, sizeof name, "%s_gemm_%s_%s", gm_prefix(cg), gm_elt_name(e), f.amx ? "amx" : "dp");
  LLVMBasicBlockRef saved = LLVMGetInsertBlock(cg->g.B);
  GenKern *k = gm_fn_begin(cg, name, gm_fn_type(cg));
  gm_mark(k->fn, &c);
  /* (the target's features and the family's: an attribute replaces the machine's string) */
  char feat[4096];
  snprintf(feat, sizeof feat, "%s%s%s", cg->tfeat, *cg->tfeat ? "," : "",
           !f.amx       ? (e == GE_S8 ? "+avx512vnni" : "+avx512bf16")
           : e == GE_S8 ? "+amx-tile,+amx-int8"
                        : "+amx-tile,+amx-bf16,+avx512bf16");
  LLVMAddTargetDependentFunctionAttr(k->fn, "target-features", feat);
  LLVMValueRef P[GP_COUNT];
  for (int j = 0; j < GP_COUNT; j++)
    P[j] = LLVMGetParam(k->fn, (unsigned)j);
  LLVMValueRef edge = gen_alloca(k, LLVMArrayType2(cg->g.f32, 32 * 32));
  LLVMSetAlignment(edge, 64);
  LLVMValueRef corr = f.bias ? gen_alloca(k, LLVMArrayType2(cg->g.i32, GA_MC)) : NULL;
  LLVMValueRef go = gslt(k, gi(k, 0), P[GP_K]);
  GIf fi, fd = {0};
  gif_open(k, &fi, f.amx ? gand(k, go, gm_amx_granted(k)) : go, true);
  ga_blocks(k, &c, &f, P, edge, corr);
  gif_else(k, &fi);
  /* refused the tiles: bf16 on AVX512-BF16's blocks (every AMX-BF16 CPU has it), which read
     the same layout, a B packed at compile time or ahead included */
  bool dp = f.amx && e == GE_BF16;
  if (dp) {
    gif_open(k, &fd, go, true);
    GaFmt fv = f;
    fv.amx = false;
    ga_blocks(k, &c, &fv, P, edge, corr);
    gif_else(k, &fd);
  }
  /* (the widened function packs B itself: a B packed ahead is in this function's layout; K = 0
     never reads B) */
  LLVMValueRef W[GP_COUNT];
  memcpy(W, P, sizeof W);
  W[GP_BPRE] = LLVMConstNull(cg->g.ptr);
  LLVMBuildCall2(k->B, gm_fn_type(cg), widened, W, GP_COUNT, "");
  if (dp) gif_close(k, &fd);
  gif_close(k, &fi);
  LLVMBuildRetVoid(k->B);
  if (saved) LLVMPositionBuilderAtEnd(cg->g.B, saved);
  st->pairs_fn[e] = k->fn;
  return k->fn;
}
