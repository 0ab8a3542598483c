/* targets/cpu/gemm/pack.c: packing B and A from matrices, and the packing functions.
 *
 * The GEMM reads its operands only from packed panels (B in NR-wide panels kc deep, A in
 * MR-tall ones), zero-padded to whole panels so that the micro-kernel never branches. Rows of
 * a unit-stride B are copied across the panels a few rows at a time; a B whose K is
 * contiguous (a transposed B) and the rows of a row-major A are read VW deep and transposed in
 * registers; other strides go element by element. Each packing step is a function of its own
 * (GmStep), called once per block, so that the costly register transposes are compiled once
 * per module and in parallel with the GEMM; the whole-operand functions (gm_packx_function)
 * pack every block of a B or A ahead of the GEMM for products whose chunks share it. Operands
 * of bf16 or f16 (GmElt) are widened to f32 by the same loads (gm_load_f32: bf16's bits shifted
 * up, f16 through fpext), so the panels are f32 whatever the operands, and each type has its
 * own family of these functions, made the same way. */
#include "gemm_impl.h"

/* Rows of a unit-stride B that gm_pack_b copies into every panel before the next rows. */
#define GM_PACK_ROWS 16

/* Pack B[pc + 0..kc, jc + 0..nc] into NR-wide panels at bp (zero columns past nc). Full
 * panels of a unit-stride B are copied row by row across all panels (contiguous reads); full
 * panels of a B whose K is contiguous (a transposed B: the keys of attention) are read VW
 * deep down each column and transposed in registers; the rest element by element. */
static void gm_pack_b(GenKern *k, const GmCfg *c, GmElt e, LLVMValueRef *P, LLVMValueRef bp,
                      LLVMValueRef pc, LLVMValueRef kc, LLVMValueRef jc, LLVMValueRef nc) {
  CpuCg *cg = cpu_cg(k->cg);
  LLVMBuilderRef B = k->B;
  GenLoop lj, lk, lcc;
  LLVMValueRef unit = LLVMBuildICmp(B, LLVMIntEQ, P[GP_BCS], gi(k, 1), "");
  LLVMValueRef tr = LLVMBuildAnd(B, LLVMBuildNot(B, unit, ""),
                                 LLVMBuildICmp(B, LLVMIntEQ, P[GP_BRS], gi(k, 1), ""), "");
  /* columns [0, nfull) go through a fast path when B has unit column or row stride */
  LLVMValueRef nfull =
      LLVMBuildSelect(B, LLVMBuildOr(B, unit, tr, ""),
                      LLVMBuildAnd(B, nc, gi(k, ~(int64_t)(c->nr - 1)), ""), gi(k, 0), "");
  GIf fu;
  gif_open(k, &fu, unit, true);
  {
    /* GM_PACK_ROWS rows at a time, each panel's part of them written in one contiguous run:
       one row at a time across all panels stores at a stride of a whole panel (a multiple of
       4 KiB), which kept every store in one cache set */
    GenLoop lb;
    LLVMValueRef kb = gloop(k, &lb, gi(k, 0), kc, GM_PACK_ROWS);
    LLVMValueRef ke = gmin(k, kc, gadd(k, kb, gi(k, GM_PACK_ROWS)));
    LLVMValueRef jr = gloop(k, &lj, gi(k, 0), nfull, c->nr);
    LLVMValueRef kk = gloop(k, &lk, kb, ke, 1);
    LLVMValueRef src =
        gep_e(k, e, P[GP_B], gadd(k, gmul(k, gadd(k, pc, kk), P[GP_BRS]), gadd(k, jc, jr)));
    LLVMValueRef d = gfp(k, bp, gadd(k, gmul(k, jr, kc), gmul(k, kk, gi(k, c->nr))));
    for (int j = 0; j < c->nr / c->vw; j++)
      gstore(k, gm_load_f32(k, e, gep_e(k, e, src, gi(k, j * c->vw)), c->vw, 4),
             gfp(k, d, gi(k, j * c->vw)), 64);
    gm_close(k, &lk);
    gm_close(k, &lj);
    gm_close(k, &lb);
  }
  gif_else(k, &fu);
  {
    /* transposed: VW x VW blocks (columns x depth), then the depth left over by element */
    LLVMValueRef jr = gloop(k, &lj, gi(k, 0), nfull, c->nr);
    LLVMValueRef panel = gfp(k, bp, gmul(k, jr, kc));
    LLVMValueRef colp = gep_e(k, e, P[GP_B], gadd(k, pc, gmul(k, gadd(k, jc, jr), P[GP_BCS])));
    LLVMValueRef kv = LLVMBuildAnd(B, kc, gi(k, ~(int64_t)(c->vw - 1)), "");
    LLVMValueRef kk = gloop(k, &lk, gi(k, 0), kv, c->vw);
    for (int h = 0; h < c->nr / c->vw; h++) {
      LLVMValueRef v[16];
      for (int q = 0; q < c->vw; q++)
        v[q] = gm_load_f32(k, e,
                           gep_e(k, e, colp, gadd(k, kk, gmul(k, gi(k, h * c->vw + q), P[GP_BCS]))),
                           c->vw, 4);
      cpu_transpose_regs(k, v, c->vw);
      for (int e = 0; e < c->vw; e++)
        gstore(
            k, v[e],
            gfp(k, panel, gadd(k, gmul(k, gadd(k, kk, gi(k, e)), gi(k, c->nr)), gi(k, h * c->vw))),
            4);
    }
    gm_close(k, &lk);
    LLVMValueRef k2 = gloop(k, &lk, kv, kc, 1);
    LLVMValueRef cc = gloop(k, &lcc, gi(k, 0), gi(k, c->nr), 1);
    gstore(k, gm_load_f32(k, e, gep_e(k, e, colp, gadd(k, k2, gmul(k, cc, P[GP_BCS]))), 0, 4),
           gfp(k, panel, gadd(k, gmul(k, k2, gi(k, c->nr)), cc)), 4);
    gm_close(k, &lcc);
    gm_close(k, &lk);
    gm_close(k, &lj);
  }
  gif_close(k, &fu);
  LLVMValueRef jr = gloop(k, &lj, nfull, nc, c->nr);
  LLVMValueRef ncv = gmin(k, gi(k, c->nr), gsub(k, nc, jr));
  LLVMValueRef panel = gfp(k, bp, gmul(k, jr, kc));
  LLVMValueRef col0 = gadd(k, jc, jr);
  {
    LLVMValueRef kk = gloop(k, &lk, gi(k, 0), kc, 1);
    LLVMValueRef rowp = gep_e(k, e, P[GP_B], gmul(k, gadd(k, pc, kk), P[GP_BRS]));
    LLVMValueRef dst = gfp(k, panel, gmul(k, kk, gi(k, c->nr)));
    LLVMValueRef cc = gloop(k, &lcc, gi(k, 0), gi(k, c->nr), 1);
    LLVMValueRef in = gslt(k, cc, ncv);
    LLVMValueRef col = gadd(k, col0, gmin(k, cc, gsub(k, ncv, gi(k, 1))));
    LLVMValueRef v = gm_load_f32(k, e, gep_e(k, e, rowp, gmul(k, col, P[GP_BCS])), 0, 4);
    v = LLVMBuildSelect(B, in, v, LLVMConstReal(cg->g.f32, 0.0), "");
    gstore(k, v, gfp(k, dst, cc), 4);
    gm_close(k, &lcc);
    gm_close(k, &lk);
  }
  gm_close(k, &lj);
}

/* Interleave MR rows that are contiguous in K into a panel: for kk in [k0, k1) (a multiple
 * of VW apart; VW >= MR) the MR floats rows[r][kk] go to dst[kk * MR + r]. Each step loads VW
 * floats of every row, transposes the block in registers (padded to VW rows) and stores MR
 * floats per depth. */
static void gm_pack_rows_t(GenKern *k, const GmCfg *c, GmElt e, LLVMValueRef *rows, LLVMValueRef k0,
                           LLVMValueRef k1, LLVMValueRef dst) {
  CpuCg *cg = cpu_cg(k->cg);
  int MR = c->mr;
  LLVMTypeRef vt = LLVMVectorType(cg->g.f32, (unsigned)c->vw);
  GenLoop lk;
  LLVMValueRef kk = gloop(k, &lk, k0, k1, c->vw);
  LLVMValueRef v[16], lanes[16];
  for (int q = 0; q < c->vw; q++)
    v[q] = q < MR ? gm_load_f32(k, e, gep_e(k, e, rows[q], kk), c->vw, 4) : LLVMGetUndef(vt);
  cpu_transpose_regs(k, v, c->vw);
  for (int q = 0; q < MR; q++)
    lanes[q] = LLVMConstInt(cg->g.i32, (unsigned)q, 0);
  LLVMValueRef first = LLVMConstVector(lanes, (unsigned)MR);
  for (int e = 0; e < c->vw; e++)
    gstore(k, LLVMBuildShuffleVector(k->B, v[e], LLVMGetUndef(vt), first, ""),
           gfp(k, dst, gmul(k, gadd(k, kk, gi(k, e)), gi(k, MR))), 4);
  gm_close(k, &lk);
}

/* gm_pack_rows_t as a function of its own, void (ptr rows, i64 k0, i64 k1, ptr dst) with rows
 * the MR row pointers, shared by A's packing and the convolution packing: its register
 * transpose is the costliest code of both to compile (made once per module). */
LLVMValueRef gm_rows_t_function(CpuCg *cg, GmElt e) {
  GmState *st = gm_state(cg);
  if (st->rows_fn[e]) return st->rows_fn[e];
  GmCfg c = gm_cfg(cg);
  char name[512];
  snprintf(name, sizeof name, "%s_gemm_%s_rows_t", gm_prefix(cg), gm_elt_name(e));
  LLVMTypeRef ps[4] = {cg->g.ptr, cg->g.i64, cg->g.i64, cg->g.ptr};
  if (gm_declared_e(cg, e, &st->rows_fn[e], name, LLVMFunctionType(cg->g.vd, ps, 4, 0)))
    return st->rows_fn[e];
  LLVMBasicBlockRef saved = LLVMGetInsertBlock(cg->g.B);
  GenKern *k = gm_fn_begin(cg, name, LLVMFunctionType(cg->g.vd, ps, 4, 0));
  gm_mark(k->fn, &c);
  LLVMValueRef rows[16], arr = LLVMGetParam(k->fn, 0);
  for (int q = 0; q < c.mr; q++) {
    LLVMValueRef ix = gi(k, q);
    rows[q] = LLVMBuildLoad2(k->B, cg->g.ptr,
                             LLVMBuildInBoundsGEP2(k->B, cg->g.ptr, arr, &ix, 1, ""), "");
  }
  gm_pack_rows_t(k, &c, e, rows, LLVMGetParam(k->fn, 1), LLVMGetParam(k->fn, 2),
                 LLVMGetParam(k->fn, 3));
  LLVMBuildRetVoid(k->B);
  if (saved) LLVMPositionBuilderAtEnd(cg->g.B, saved);
  st->rows_fn[e] = k->fn;
  return k->fn;
}

/* Call gm_rows_t_function on the MR row pointers rows. */
void gm_call_rows_t(GenKern *k, const GmCfg *c, GmElt e, LLVMValueRef *rows, LLVMValueRef k0,
                    LLVMValueRef k1, LLVMValueRef dst) {
  CpuCg *cg = cpu_cg(k->cg);
  LLVMValueRef arr = gen_alloca(k, LLVMArrayType2(cg->g.ptr, (uint64_t)c->mr));
  for (int q = 0; q < c->mr; q++) {
    LLVMValueRef ix = gi(k, q);
    LLVMBuildStore(k->B, rows[q], LLVMBuildInBoundsGEP2(k->B, cg->g.ptr, arr, &ix, 1, ""));
  }
  LLVMValueRef fn = gm_rows_t_function(cg, e);
  LLVMValueRef args[4] = {arr, k0, k1, dst};
  LLVMBuildCall2(k->B, LLVMGlobalGetValueType(fn), fn, args, 4, "");
}

/* Pack A[ic + 0..mc, pc + 0..kc] from strided A into MR-tall panels at ap (zero rows past
 * mc). Full panels of an A whose rows are contiguous in K are read VW deep per row and
 * transposed in registers; the rest element by element. */
static void gm_pack_a(GenKern *k, const GmCfg *c, GmElt e, LLVMValueRef *P, LLVMValueRef ap,
                      LLVMValueRef ic, LLVMValueRef mc, LLVMValueRef pc, LLVMValueRef kc) {
  CpuCg *cg = cpu_cg(k->cg);
  LLVMBuilderRef B = k->B;
  int MR = c->mr;
  LLVMValueRef fz = LLVMConstReal(cg->g.f32, 0.0);
  GenLoop li, lr, lk;
  LLVMValueRef ir = gloop(k, &li, gi(k, 0), mc, MR);
  LLVMValueRef mrv = gmin(k, gi(k, MR), gsub(k, mc, ir));
  LLVMValueRef panel = gfp(k, ap, gmul(k, ir, kc));
  {
    /* a full panel: k outer, the MR rows unrolled (contiguous stores) */
    GIf fp;
    gif_open(k, &fp, LLVMBuildICmp(B, LLVMIntEQ, mrv, gi(k, MR), ""), false);
    LLVMValueRef rows[16];
    for (int q = 0; q < MR; q++)
      rows[q] = gep_e(
          k, e, P[GP_A],
          gadd(k, gmul(k, gadd(k, gadd(k, ic, ir), gi(k, q)), P[GP_ARS]), gmul(k, pc, P[GP_ACS])));
    LLVMValueRef k0 = gi(k, 0);
    if (c->vw >= MR) {
      /* rows contiguous in K (the usual row-major A): VW deep per row, the MR x VW block
         transposed in registers (padded to VW rows), MR floats stored per depth */
      k0 = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntEQ, P[GP_ACS], gi(k, 1), ""),
                           LLVMBuildAnd(B, kc, gi(k, ~(int64_t)(c->vw - 1)), ""), gi(k, 0), "");
      gm_call_rows_t(k, c, e, rows, gi(k, 0), k0, panel);
    }
    LLVMValueRef kk = gloop(k, &lk, k0, kc, 1);
    LLVMValueRef ko = gmul(k, kk, P[GP_ACS]);
    LLVMValueRef dst = gfp(k, panel, gmul(k, kk, gi(k, MR)));
    for (int q = 0; q < MR; q++)
      gstore(k, gm_load_f32(k, e, gep_e(k, e, rows[q], ko), 0, 4), gfp(k, dst, gi(k, q)), 4);
    gm_close(k, &lk);
    LLVMBuildBr(B, fp.join); /* skip the row-by-row path */
    LLVMPositionBuilderAtEnd(B, fp.join);
  }
  /* a partial panel, row by row (no rows when the panel was full) */
  LLVMValueRef r = gloop(
      k, &lr, gi(k, 0),
      LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntEQ, mrv, gi(k, MR), ""), gi(k, 0), gi(k, MR), ""),
      1);
  GIf f;
  gif_open(k, &f, gslt(k, r, mrv), true);
  LLVMValueRef row = gadd(k, gadd(k, ic, ir), r);
  {
    LLVMValueRef rowp = gep_e(k, e, P[GP_A], gmul(k, row, P[GP_ARS]));
    LLVMValueRef kk = gloop(k, &lk, gi(k, 0), kc, 1);
    LLVMValueRef v =
        gm_load_f32(k, e, gep_e(k, e, rowp, gmul(k, gadd(k, pc, kk), P[GP_ACS])), 0, 4);
    gstore(k, v, gfp(k, panel, gadd(k, gmul(k, kk, gi(k, MR)), r)), 4);
    gm_close(k, &lk);
  }
  gif_else(k, &f);
  {
    LLVMValueRef kk = gloop(k, &lk, gi(k, 0), kc, 1);
    gstore(k, fz, gfp(k, panel, gadd(k, gmul(k, kk, gi(k, MR)), r)), 4);
    gm_close(k, &lk);
  }
  gif_close(k, &f);
  gm_close(k, &lr);
  gm_close(k, &li);
}

LLVMTypeRef gm_step_type(CpuCg *cg) {
  LLVMTypeRef ps[GP_COUNT + 5];
  for (int j = 0; j < GP_COUNT + 5; j++)
    ps[j] = cg->g.i64;
  ps[GP_A] = ps[GP_B] = ps[GP_C] = ps[GP_PACK] = ps[GP_CONV] = ps[GP_BPRE] = ps[GP_APRE] =
      cg->g.ptr;
  ps[GP_COUNT] = cg->g.ptr;
  return LLVMFunctionType(cg->g.vd, ps, GP_COUNT + 5, 0);
}

LLVMValueRef gm_step_function(CpuCg *cg, GmElt e, GmStep which) {
  LLVMValueRef *slot = &gm_state(cg)->step_fn[e][which];
  if (*slot) return *slot;
  GmCfg c = gm_cfg(cg);
  static const char *const names[GS_COUNT] = {"pack_b", "pack_a", "pack_conv"};
  char name[512];
  snprintf(name, sizeof name, "%s_gemm_%s_%s", gm_prefix(cg), gm_elt_name(e), names[which]);
  if (gm_declared_e(cg, e, slot, name, gm_step_type(cg))) return *slot;
  LLVMBasicBlockRef saved = LLVMGetInsertBlock(cg->g.B);
  GenKern *k = gm_fn_begin(cg, name, gm_step_type(cg));
  gm_mark(k->fn, &c);
  LLVMValueRef P[GP_COUNT], x[4];
  for (int j = 0; j < GP_COUNT; j++)
    P[j] = LLVMGetParam(k->fn, (unsigned)j);
  LLVMValueRef dst = LLVMGetParam(k->fn, GP_COUNT);
  for (int j = 0; j < 4; j++)
    x[j] = LLVMGetParam(k->fn, (unsigned)(GP_COUNT + 1 + j));
  switch (which) {
  case GS_PACK_B: gm_pack_b(k, &c, e, P, dst, x[0], x[1], x[2], x[3]); break;
  case GS_PACK_A: gm_pack_a(k, &c, e, P, dst, x[0], x[1], x[2], x[3]); break;
  case GS_PACK_CONV: {
    LLVMValueRef zp = gen_alloca(k, cg->g.f32); /* the zero that padding taps read */
    LLVMBuildStore(k->B, LLVMConstReal(cg->g.f32, 0.0), zp);
    gm_pack_a_conv(k, &c, e, P, dst, x[0], x[1], x[2], x[3], zp);
    break;
  }
  case GS_COUNT: break;
  }
  LLVMBuildRetVoid(k->B);
  if (saved) LLVMPositionBuilderAtEnd(cg->g.B, saved);
  *slot = k->fn;
  return k->fn;
}

void gm_call_step(GenKern *k, GmElt e, GmStep which, const LLVMValueRef *P, LLVMValueRef dst,
                  LLVMValueRef a0, LLVMValueRef a1, LLVMValueRef a2, LLVMValueRef a3) {
  LLVMValueRef args[GP_COUNT + 5];
  for (int j = 0; j < GP_COUNT; j++)
    args[j] = P[j];
  args[GP_COUNT] = dst;
  args[GP_COUNT + 1] = a0;
  args[GP_COUNT + 2] = a1;
  args[GP_COUNT + 3] = a2;
  args[GP_COUNT + 4] = a3;
  LLVMBuildCall2(k->B, gm_step_type(cpu_cg(k->cg)), gm_state(cpu_cg(k->cg))->step_fn[e][which],
                 args, GP_COUNT + 5, "");
}

/* The functions of the module (made once each) that pack a whole operand of a product ahead
 * of the GEMM: K blocks [kb0, kb1) of every column block of an N-column B (b) into dst, laid
 * out as the GEMM function reads a given B (GP_BPRE): column block jc (NC wide, the last one
 * rounded up to NR) and K block pc (gm_kstep deep) at dst + jc * K + pc * roundup(nc, NR); or
 * the same of every row block of an N-row A (!b, GP_APRE: row block ic, MC tall, at
 * dst + ic * K + pc * roundup(mc, MR)). A product split into chunks that would each pack the
 * same operand packs it once with these, in a kernel of its own whose chunks share the K
 * blocks, instead. */
LLVMValueRef gm_packx_function(CpuCg *cg, GmElt e, bool b) {
  GmState *st = gm_state(cg);
  LLVMValueRef *slot = b ? &st->packb_fn[e] : &st->packa_fn[e];
  if (*slot) return *slot;
  GmCfg c = gm_cfg(cg);
  char name[512];
  snprintf(name, sizeof name, "%s_gemm_pack%c_%s", gm_prefix(cg), b ? 'b' : 'a', gm_elt_name(e));
  LLVMTypeRef ps[GB_COUNT];
  for (int j = 0; j < GB_COUNT; j++)
    ps[j] = cg->g.i64;
  ps[GB_X] = ps[GB_DST] = cg->g.ptr;
  if (gm_declared_e(cg, e, slot, name, LLVMFunctionType(cg->g.vd, ps, GB_COUNT, 0))) return *slot;
  /* one call per chunk: kept a function, shared by the products of the module; the packing
     itself is the GEMM's step function (the other GEMM arguments are not read by it) */
  gm_step_function(cg, e, b ? GS_PACK_B : GS_PACK_A);
  LLVMBasicBlockRef saved = LLVMGetInsertBlock(cg->g.B);
  GenKern *k = gm_fn_begin(cg, name, LLVMFunctionType(cg->g.vd, ps, GB_COUNT, 0));
  LLVMValueRef fn = k->fn;
  gm_mark(fn, &c);
  LLVMValueRef Q[GB_COUNT], P[GP_COUNT + 5];
  LLVMTypeRef sps[GP_COUNT + 5];
  LLVMGetParamTypes(gm_step_type(cg), sps);
  for (int j = 0; j < GP_COUNT; j++)
    P[j] = LLVMConstNull(sps[j]);
  for (int j = 0; j < GB_COUNT; j++)
    Q[j] = LLVMGetParam(fn, (unsigned)j);
  P[b ? GP_B : GP_A] = Q[GB_X];
  P[b ? GP_BRS : GP_ARS] = Q[GB_RS];
  P[b ? GP_BCS : GP_ACS] = Q[GB_CS];
  LLVMValueRef N = Q[GB_N], K = Q[GB_K];
  LLVMValueRef kstep = gm_kstep_ir(k, &c, K);
  int64_t blk = b ? c.nc : c.mc, rnd = b ? c.nr : c.mr;
  GenLoop lj, lkb;
  LLVMValueRef j0 = gloop(k, &lj, gi(k, 0), N, blk);
  LLVMValueRef nj = gmin(k, gi(k, blk), gsub(k, N, j0));
  LLVMValueRef njr = LLVMBuildMul(
      k->B, LLVMBuildSDiv(k->B, gadd(k, nj, gi(k, rnd - 1)), gi(k, rnd), ""), gi(k, rnd), "");
  LLVMValueRef kb = gloop(k, &lkb, Q[GB_KB0], Q[GB_KB1], 1);
  LLVMValueRef pc = gmul(k, kb, kstep);
  GIf in;
  gif_open(k, &in, gslt(k, pc, K), false);
  LLVMValueRef kc = gmin(k, kstep, gsub(k, K, pc));
  LLVMValueRef dst = gfp(k, Q[GB_DST], gadd(k, gmul(k, j0, K), gmul(k, pc, njr)));
  if (b)
    gm_call_step(k, e, GS_PACK_B, P, dst, pc, kc, j0, nj);
  else
    gm_call_step(k, e, GS_PACK_A, P, dst, j0, nj, pc, kc);
  gif_close(k, &in);
  gm_close(k, &lkb);
  gm_close(k, &lj);
  LLVMBuildRetVoid(k->B);
  if (saved) LLVMPositionBuilderAtEnd(cg->g.B, saved);
  *slot = fn;
  return fn;
}
