/* targets/cpu/gemm/dpbf16.c: the depth-group GEMM's blocks on AVX512-BF16 and AVX512-VNNI.
 *
 * Where the target CPU has AVX512-BF16 but no AMX (Cooper Lake, Zen 4 and 5, a Sapphire Rapids
 * told -amx-bf16), the bf16 function of pairs.c computes each 32 x 32 block of C in vector
 * registers: VDPBF16PS multiplies the 16 depth pairs of one vector by those of another and adds
 * both products into 16 f32 lanes, twice the multiply-adds of an FMA per instruction, with the
 * operands left bf16. The block goes as four bands of GD_ROWS rows, each a band of 8 x 32
 * accumulators (16 registers) over the K block: per depth pair, B's two vectors (a row of each
 * VNNI tile: columns 0-15 and 16-31) are loaded once and each row's pair of A is broadcast from
 * memory into its two VDPBF16PS (one load feeds 2 of them, a B vector 8). The operands are
 * AMX's tiles (pairs.c packs them, or reads A in place), so both families share the packing,
 * the blocking and the weights packed ahead; a band's B (32 columns of the K block) is read
 * four times, from L1 when the K block is shallow enough (GmCfg.amx_kc). s8 quads go the same
 * way on VPDPBUSD (AVX512-VNNI: 16 lanes of four byte products summed into s32), whose first
 * source is unsigned: B is packed biased to u8 (s8 + 128, pairs.c) and each row's accumulators
 * start from -128 times its row of A's sum (GmPairBlock.corr), so the sums are exact. */
#include "gemm_impl.h"

enum { GD_ROWS = 8 }; /* rows of a band (4 measured slower, 16 would need 32 accumulators) */

/* One band's k loop: the accumulators acc[][] (in: their values before) over the kq tile
 * depths of A rows at arow and B's tiles at b0, b1; acc[][] holds their values after. */
static void gd_kloop(GenKern *k, bool int8, const GmPairBlock *b, LLVMValueRef arow,
                     LLVMValueRef acc[GD_ROWS][2]) {
  CpuCg *cg = cpu_cg(k->cg);
  LLVMBuilderRef B = k->B;
  LLVMTypeRef vf = LLVMVectorType(int8 ? cg->g.i32 : cg->g.f32, 16);
  /* (B's vectors and A's broadcast groups: 32 bf16, or 16 words of 4 s8 / u8) */
  LLVMTypeRef vb =
      int8 ? LLVMVectorType(cg->g.i32, 16) : LLVMVectorType(LLVMBFloatTypeInContext(cg->g.C), 32);
  const char *nm = int8 ? "llvm.x86.avx512.vpdpbusd.512" : "llvm.x86.avx512bf16.dpbf16ps.512";
  unsigned id = LLVMLookupIntrinsicID(nm, strlen(nm));
  HLO_ASSERT(id != 0);
  LLVMValueRef dp = LLVMGetIntrinsicDeclaration(cg->g.M, id, NULL, 0);
  LLVMTypeRef dpt = LLVMIntrinsicGetType(cg->g.C, id, NULL, 0);
  GPhiLoop pl = gphi_open(k, "dq", "dqb", "dqd");
  LLVMValueRef z = gi(k, 0), q = LLVMBuildPhi(B, cg->g.i64, "q");
  LLVMAddIncoming(q, &z, &pl.pre, 1);
  LLVMValueRef ph[GD_ROWS][2];
  for (int r = 0; r < GD_ROWS; r++)
    for (int j = 0; j < 2; j++) {
      ph[r][j] = LLVMBuildPhi(B, vf, "");
      LLVMAddIncoming(ph[r][j], &acc[r][j], &pl.pre, 1);
      acc[r][j] = ph[r][j];
    }
  LLVMBuildCondBr(B, gslt(k, q, b->kq), pl.body, pl.done);
  LLVMPositionBuilderAtEnd(B, pl.body);
  LLVMValueRef ab = gbyte(k, arow, gmul(k, q, b->a.step));
  LLVMValueRef boff = gmul(k, q, gi(k, GM_TILE_BYTES));
  LLVMValueRef bt[2] = {gbyte(k, b->b0, boff), gbyte(k, b->b1, boff)};
  LLVMValueRef ar[GD_ROWS];
  for (int r = 0; r < GD_ROWS; r++)
    ar[r] = gbyte(k, ab, gmul(k, gi(k, r), b->a.stride));
  for (int p = 0; p < 16; p++) {
    LLVMValueRef bv[2];
    for (int j = 0; j < 2; j++)
      bv[j] = gload(k, vb, gbyte(k, bt[j], gi(k, 64 * p)), 4);
    for (int r = 0; r < GD_ROWS; r++) {
      LLVMValueRef pair = gload(k, cg->g.i32, gbyte(k, ar[r], gi(k, 4 * p)), 4);
      LLVMValueRef av = LLVMBuildBitCast(B, cpu_splat(k, pair, 16), vb, "");
      for (int j = 0; j < 2; j++) {
        /* (VPDPBUSD: the first source unsigned, B biased to u8; the second A's s8) */
        LLVMValueRef args[3] = {acc[r][j], int8 ? bv[j] : av, int8 ? av : bv[j]};
        acc[r][j] = LLVMBuildCall2(B, dpt, dp, args, 3, "");
      }
    }
  }
  LLVMValueRef qn = gadd(k, q, gi(k, 1));
  LLVMBasicBlockRef latch = LLVMGetInsertBlock(B);
  LLVMAddIncoming(q, &qn, &latch, 1);
  for (int r = 0; r < GD_ROWS; r++)
    for (int j = 0; j < 2; j++)
      LLVMAddIncoming(ph[r][j], &acc[r][j], &latch, 1);
  gm_novec(k, LLVMBuildBr(B, pl.hdr));
  LLVMPositionBuilderAtEnd(B, pl.done);
  for (int r = 0; r < GD_ROWS; r++)
    for (int j = 0; j < 2; j++)
      acc[r][j] = ph[r][j];
}

void gm_dp_block(GenKern *k, bool int8, const GmPairBlock *b) {
  CpuCg *cg = cpu_cg(k->cg);
  LLVMBuilderRef B = k->B;
  LLVMTypeRef vf = LLVMVectorType(int8 ? cg->g.i32 : cg->g.f32, 16);
  GenLoop lg;
  LLVMValueRef g = gloop(k, &lg, gi(k, 0), gi(k, 32 / GD_ROWS), 1);
  /* bands 0 and 1 are rows of A's first tile row (a0), 2 and 3 of its second (a1) */
  LLVMValueRef hi = LLVMBuildICmp(B, LLVMIntSGE, g, gi(k, 16 / GD_ROWS), "");
  LLVMValueRef within = LLVMBuildAnd(B, g, gi(k, 16 / GD_ROWS - 1), "");
  LLVMValueRef arow = gbyte(k, LLVMBuildSelect(B, hi, b->a.a1, b->a.a0, ""),
                            gmul(k, gmul(k, within, gi(k, GD_ROWS)), b->a.stride));
  LLVMValueRef crow = gbyte(k, b->c, gmul(k, gmul(k, g, gi(k, GD_ROWS)), b->rs));
  LLVMValueRef acc[GD_ROWS][2], cp[GD_ROWS][2];
  /* the first K block starts from zero (C, or the edge tile, not read for it), or from the
     rows' corrections of a biased B */
  for (int r = 0; r < GD_ROWS; r++) {
    LLVMValueRef init = LLVMConstNull(vf);
    if (b->corr) {
      LLVMValueRef ri = gadd(k, gmul(k, g, gi(k, GD_ROWS)), gi(k, r));
      init = cpu_splat(
          k, gload(k, cg->g.i32, LLVMBuildInBoundsGEP2(B, cg->g.i32, b->corr, &ri, 1, ""), 4), 16);
    }
    for (int j = 0; j < 2; j++) {
      cp[r][j] = gbyte(k, crow, gadd(k, gmul(k, gi(k, r), b->rs), gi(k, 64 * j)));
      acc[r][j] = init;
    }
  }
  LLVMBasicBlockRef before = LLVMGetInsertBlock(B);
  GIf f;
  gif_open(k, &f, LLVMBuildNot(B, b->first, ""), false);
  LLVMValueRef ld[GD_ROWS][2];
  for (int r = 0; r < GD_ROWS; r++)
    for (int j = 0; j < 2; j++)
      ld[r][j] = gload(k, vf, cp[r][j], 4);
  LLVMBasicBlockRef loaded = LLVMGetInsertBlock(B);
  gif_close(k, &f);
  for (int r = 0; r < GD_ROWS; r++)
    for (int j = 0; j < 2; j++) {
      LLVMValueRef phi = LLVMBuildPhi(B, vf, "");
      LLVMValueRef vals[2] = {ld[r][j], acc[r][j]};
      LLVMBasicBlockRef bbs[2] = {loaded, before};
      LLVMAddIncoming(phi, vals, bbs, 2);
      acc[r][j] = phi;
    }
  gd_kloop(k, int8, b, arow, acc);
  for (int r = 0; r < GD_ROWS; r++)
    for (int j = 0; j < 2; j++)
      gstore(k, acc[r][j], cp[r][j], 4);
  gm_close(k, &lg);
}
