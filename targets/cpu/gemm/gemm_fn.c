/* targets/cpu/gemm/gemm_fn.c: the GEMM function of a module.
 *
 * One internal function computes C = A * B in f32 (row-major C with leading dimension ldc, A
 * and B read through arbitrary element strides): for jc (NC columns): for pc (KC of K): pack
 * B's block into panels; for ic (MC rows): pack A's block; then the block's micro-tiles, row
 * panels outer on AVX-512 (A's micro-panel stays in L1 while B's block streams from L2) and
 * column panels outer otherwise (B's smaller micro-panel stays in L1). When the whole K of a
 * column block of B fits GM_RESIDENT floats (convolutions), B is packed once and stays
 * resident and the row blocks go outermost, so each block of C is finished while in cache. A
 * caller may pass B or A packed already (GP_BPRE, GP_APRE) and the function reads the blocks
 * in place; a packed B's next block is prefetched into L2 by the current block's calls. The
 * function has only the paths the module's products can take (the prebuilt library: all).
 * Operands of bf16 or f16 get a function of their own (gm_function's e), the same but for the
 * packing steps it calls, which widen them to f32 (pack.c): the panels, the micro-kernels and
 * C stay f32 (a 16-bit result is rounded from C by the caller's epilogue, kernel.c). */
#include "gemm_impl.h"

/* gm_kstep in IR, for a run-time K. */
LLVMValueRef gm_kstep_ir(GenKern *k, const GmCfg *c, LLVMValueRef K) {
  LLVMValueRef nkb = LLVMBuildSDiv(k->B, gadd(k, K, gi(k, c->kc - 1)), gi(k, c->kc), "");
  nkb = LLVMBuildSelect(k->B, gslt(k, nkb, gi(k, 1)), gi(k, 1), nkb, "");
  LLVMValueRef kstep = LLVMBuildSDiv(k->B, gadd(k, K, gsub(k, nkb, gi(k, 1))), nkb, "");
  return gmin(k, gi(k, c->kc),
              LLVMBuildAnd(k->B, gadd(k, kstep, gi(k, 7)), gi(k, ~(int64_t)7), ""));
}

LLVMTypeRef gm_fn_type(CpuCg *cg) {
  LLVMTypeRef ps[GP_COUNT];
  for (int j = 0; j < GP_COUNT; j++)
    ps[j] = cg->g.i64;
  ps[GP_A] = ps[GP_B] = ps[GP_C] = ps[GP_PACK] = ps[GP_CONV] = ps[GP_BPRE] = ps[GP_APRE] =
      cg->g.ptr;
  return LLVMFunctionType(cg->g.vd, ps, GP_COUNT, 0);
}

/* Where the micro-kernel call on column panel jr of row panel ir prefetches its kc / 4 lines
 * (GmTile.pf) when B was given packed (GP_BPRE): the blocks of a packed B lie one after
 * the other in the order the calls take them (the next K block, else the next column block,
 * which may be the next call's), so the next block starts just past this one; the block's
 * calls, numbered in the order they run, take its lines in turn, kc / 4 each, until all are
 * asked for (the first 8192 / 128 = 64 of 176 calls for a 512 x 256 block and 256 rows).
 * Calls past that, and calls without a packed B, prefetch their own panel again: lines
 * already at hand, no branch in the loop. A block pulled from L3 or memory by its first row
 * panel alone could not be streamed as fast as that panel consumed it. */
static LLVMValueRef gm_next_lines(GenKern *k, const GmCfg *c, LLVMValueRef *P, LLVMValueRef bpc,
                                  LLVMValueRef bpj, LLVMValueRef kc, LLVMValueRef ncrj,
                                  LLVMValueRef ic, LLVMValueRef ir, LLVMValueRef jr) {
  LLVMValueRef per = LLVMBuildSDiv(k->B, kc, gi(k, 4), "");
  LLVMValueRef lines = LLVMBuildSDiv(k->B, gmul(k, kc, ncrj), gi(k, 16), "");
  LLVMValueRef cols = LLVMBuildSDiv(k->B, ncrj, gi(k, c->nr), "");
  LLVMValueRef t = gadd(k, gmul(k, LLVMBuildSDiv(k->B, gadd(k, ic, ir), gi(k, c->mr), ""), cols),
                        LLVMBuildSDiv(k->B, jr, gi(k, c->nr), ""));
  LLVMValueRef l0 = gmul(k, t, per);
  LLVMValueRef take =
      LLVMBuildAnd(k->B, LLVMBuildIsNotNull(k->B, P[GP_BPRE], ""), gslt(k, l0, lines), "");
  LLVMValueRef nb = gfp(k, bpc, gmul(k, kc, ncrj));
  return LLVMBuildSelect(k->B, take, gfp(k, nb, gmul(k, l0, gi(k, 16))), bpj, "");
}

/* The paths the module's products of type e can take: a module without convolutions has no
 * convolution packing, resident B or panels read in place; one without dots no packing of A
 * from a matrix (its packing step functions are not made); the prebuilt library has all. */
static void gm_fn_paths(CpuCg *cg, GmElt e, bool *has_conv, bool *has_dot) {
  *has_conv = cg->lib && e == GE_F32, *has_dot = cg->lib || e != GE_F32;
  for (int i = 0; !cg->lib && i < cg->g.m->ncomps; i++)
    for (int j = 0; j < cg->g.m->comps[i]->ninstrs; j++) {
      const HInstr *x = cg->g.m->comps[i]->instrs[j];
      *has_conv |= x->op == OP_CONVOLUTION && gm_elt(x->ops[0]->shape.dt) == e;
      /* (Winograd's products are plain) */
      if (e == GE_F32) *has_dot |= x->op == OP_DOT || gm_wino_conv(cg, x);
    }
}

/* Which row panels of the block [ic, ic + mc) are convolution panels inside the image
 * (gm_direct_panel), read in place: decided once per block, not per column panel, into the
 * arrays *pok and *poff (a flag and row 0's offset per panel; 0 for a plain product) and *prs
 * (the rows' distance). */
static void gm_fn_direct_flags(GenKern *k, const GmCfg *c, const LLVMValueRef *P, LLVMValueRef ic,
                               LLVMValueRef mc, LLVMValueRef *pok, LLVMValueRef *poff,
                               LLVMValueRef *prs) {
  CpuCg *cg = cpu_cg(k->cg);
  LLVMTypeRef at = LLVMArrayType2(cg->g.i64, (uint64_t)(c->mc / c->mr));
  *pok = gen_alloca(k, at);
  *poff = gen_alloca(k, at);
  *prs = gvar(k, gi(k, 0));
  GenLoop lp;
  LLVMValueRef i2 = gloop(k, &lp, gi(k, 0), mc, c->mr);
  LLVMValueRef slot = LLVMBuildSDiv(k->B, i2, gi(k, c->mr), "");
  LLVMValueRef okp = LLVMBuildInBoundsGEP2(k->B, cg->g.i64, *pok, &slot, 1, "");
  LLVMValueRef offp = LLVMBuildInBoundsGEP2(k->B, cg->g.i64, *poff, &slot, 1, "");
  LLVMBuildStore(k->B, gi(k, 0), okp);
  LLVMBuildStore(k->B, gi(k, 0), offp);
  GIf fc;
  gif_open(k, &fc, LLVMBuildIsNotNull(k->B, P[GP_CONV], ""), false);
  {
    LLVMValueRef g[GC_COUNT], off, rs;
    gm_conv_geom(k, P, g);
    LLVMValueRef mrv2 = gmin(k, gi(k, c->mr), gsub(k, mc, i2));
    LLVMValueRef ok =
        gm_direct_panel(k, c, P, g, gadd(k, gadd(k, ic, i2), g[GC_M0]), mrv2, &off, &rs);
    LLVMBuildStore(k->B, LLVMBuildZExt(k->B, ok, cg->g.i64, ""), okp);
    LLVMBuildStore(k->B, off, offp);
    LLVMBuildStore(k->B, rs, *prs);
  }
  gif_close(k, &fc);
  gm_close(k, &lp);
}

/* A's block [ic, ic + mc) x [pc, pc + kc) packed at ap: from a convolution input (conv
 * argument not NULL) or a strided matrix, unless given packed (apre). */
static void gm_fn_pack_a(GenKern *k, GmElt e, bool has_conv, bool has_dot, const LLVMValueRef *P,
                         LLVMValueRef apre, LLVMValueRef ap, LLVMValueRef ic, LLVMValueRef mc,
                         LLVMValueRef pc, LLVMValueRef kc) {
  GIf pk, pn;
  if (has_conv && has_dot) gif_open(k, &pk, LLVMBuildIsNotNull(k->B, P[GP_CONV], ""), true);
  if (has_conv) gm_call_step(k, e, GS_PACK_CONV, P, ap, ic, mc, pc, kc);
  if (has_conv && has_dot) gif_else(k, &pk);
  if (has_dot) {
    gif_open(k, &pn, LLVMBuildNot(k->B, apre, ""), false);
    gm_call_step(k, e, GS_PACK_A, P, ap, ic, mc, pc, kc);
    gif_close(k, &pn);
  }
  if (has_conv && has_dot) gif_close(k, &pk);
}

/* Row panel ir's in-place reading (gm_fn_direct_flags' entry for it) as the micro-kernel's
 * GmDirect, into *d. */
static GmDirect *gm_fn_direct(GenKern *k, const GmCfg *c, const LLVMValueRef *P, LLVMValueRef pok,
                              LLVMValueRef poff, LLVMValueRef prs, LLVMValueRef ir, LLVMValueRef pc,
                              GmDirect *d) {
  CpuCg *cg = cpu_cg(k->cg);
  LLVMValueRef slot = LLVMBuildSDiv(k->B, ir, gi(k, c->mr), "");
  LLVMValueRef ok = LLVMBuildLoad2(k->B, cg->g.i64,
                                   LLVMBuildInBoundsGEP2(k->B, cg->g.i64, pok, &slot, 1, ""), "");
  LLVMValueRef off = LLVMBuildLoad2(k->B, cg->g.i64,
                                    LLVMBuildInBoundsGEP2(k->B, cg->g.i64, poff, &slot, 1, ""), "");
  *d = (GmDirect){P, LLVMBuildICmp(k->B, LLVMIntNE, ok, gi(k, 0), ""), off, gget(k, prs), pc};
  return d;
}

/* K == 0: C = 0 (f32, or s32: the same bits). */
static void gm_fn_zero_c(GenKern *k, const LLVMValueRef *P) {
  GIf z;
  gif_open(k, &z, LLVMBuildICmp(k->B, LLVMIntSLE, P[GP_K], gi(k, 0), ""), false);
  GenLoop lm, ln;
  LLVMValueRef m = gloop(k, &lm, gi(k, 0), P[GP_M], 1);
  LLVMValueRef n = gloop(k, &ln, gi(k, 0), P[GP_N], 1);
  gstore(k, LLVMConstReal(k->cg->f32, 0.0), gfp(k, P[GP_C], gadd(k, gmul(k, m, P[GP_LDC]), n)), 4);
  gm_close(k, &ln);
  gm_close(k, &lm);
  gif_close(k, &z);
}

/* The GEMM function of the module, made once: A is read through strides, or (when its conv
 * argument is not NULL) packed from a convolution input. */
LLVMValueRef gm_function(CpuCg *cg, GmElt e) {
  LLVMValueRef *slot = &gm_state(cg)->fn[e];
  if (*slot) return *slot;
  GmCfg c = gm_cfg(cg);
  char name[512];
  snprintf(name, sizeof name, "%s_gemm_%s", gm_prefix(cg), gm_elt_name(e));
  if (gm_declared_e(cg, e, slot, name, gm_fn_type(cg))) return *slot;
  bool has_conv, has_dot;
  gm_fn_paths(cg, e, &has_conv, &has_dot);
  gm_step_function(cg, e, GS_PACK_B);
  if (has_dot) gm_step_function(cg, e, GS_PACK_A);
  if (has_conv) gm_step_function(cg, e, GS_PACK_CONV);
  LLVMBasicBlockRef saved = LLVMGetInsertBlock(cg->g.B);
  GenKern *k = gm_fn_begin(cg, name, gm_fn_type(cg));
  LLVMValueRef fn = k->fn;
  gm_mark(fn, &c);
  LLVMValueRef P[GP_COUNT];
  for (int j = 0; j < GP_COUNT; j++)
    P[j] = LLVMGetParam(fn, (unsigned)j);
  unsigned na = LLVMGetEnumAttributeKindForName("noalias", 7);
  LLVMAddAttributeAtIndex(fn, GP_PACK + 1, LLVMCreateEnumAttribute(cg->g.C, na, 0));
  LLVMTypeRef tile_ty = LLVMArrayType2(cg->g.f32, (uint64_t)(c.mr * c.nr));
  LLVMValueRef tile = gen_alloca(k, tile_ty);
  LLVMSetAlignment(tile, 64);
  /* block sizes actually used (as gm_pack_bytes) */
  LLVMValueRef M = P[GP_M], N = P[GP_N], K = P[GP_K];
  LLVMValueRef kcb = gmin(k, gi(k, c.kc), K);
  /* B first (its size depends on N and K only, so calls with B kept find it where it was
     packed), then the A block, 64-byte aligned (the micro-kernel's aligned loads) */
  LLVMValueRef ncr = gmul(
      k, LLVMBuildSDiv(k->B, gadd(k, gmin(k, N, gi(k, c.nc)), gi(k, c.nr - 1)), gi(k, c.nr), ""),
      gi(k, c.nr));
  LLVMValueRef res =
      !has_conv
          ? LLVMConstInt(cg->g.i1, 0, 0)
          : LLVMBuildAnd(k->B, LLVMBuildIsNotNull(k->B, P[GP_CONV], ""),
                         LLVMBuildICmp(k->B, LLVMIntSLE, gmul(k, K, ncr), gi(k, GM_RESIDENT), ""),
                         "");
  LLVMValueRef belems = gmul(k, LLVMBuildSelect(k->B, res, K, kcb, ""), ncr);
  LLVMValueRef bp = P[GP_PACK];
  /* (a B packed beforehand takes no room: A's block at the start) */
  LLVMValueRef boff = LLVMBuildAnd(k->B, gadd(k, belems, gi(k, 15)), gi(k, ~(int64_t)15), "");
  LLVMValueRef ap = gfp(
      k, bp, LLVMBuildSelect(k->B, LLVMBuildIsNotNull(k->B, P[GP_BPRE], ""), gi(k, 0), boff, ""));
  /* B resident (whole K of a column block packed once, blocks at bp + pc * ncr): row blocks
     outermost, every K block of one before the next, so its C block stays in cache and is
     finished before moving on; else the K blocks outermost with B packed per block */
  LLVMValueRef keep =
      LLVMBuildAnd(k->B, res, LLVMBuildICmp(k->B, LLVMIntNE, P[GP_BKEEP], gi(k, 0), ""), "");
  GenLoop ljc, lio, lpc, lic, lout, lin;
  LLVMValueRef jc = gloop(k, &ljc, gi(k, 0), N, c.nc);
  LLVMValueRef nc = gmin(k, gi(k, c.nc), gsub(k, N, jc));
  LLVMValueRef io = gloop(k, &lio, gi(k, 0), LLVMBuildSelect(k->B, res, M, gi(k, 1), ""), c.mc);
  LLVMValueRef kstep = gm_kstep_ir(k, &c, K);
  LLVMValueRef pc = gen_loop_open_step(k, &lpc, gi(k, 0), K, kstep);
  LLVMValueRef kc = gmin(k, kstep, gsub(k, K, pc));
  LLVMValueRef first = LLVMBuildICmp(k->B, LLVMIntEQ, pc, gi(k, 0), "");
  LLVMValueRef bpc = LLVMBuildSelect(k->B, res, gfp(k, bp, gmul(k, pc, ncr)), bp, "");
  /* B packed beforehand (shared by the chunks of a split product): its block in place */
  LLVMValueRef pre = LLVMBuildIsNotNull(k->B, P[GP_BPRE], "");
  LLVMValueRef ncrj =
      LLVMBuildAnd(k->B, gadd(k, nc, gi(k, c.nr - 1)), gi(k, ~(int64_t)(c.nr - 1)), "");
  bpc = LLVMBuildSelect(k->B, pre, gfp(k, P[GP_BPRE], gadd(k, gmul(k, jc, K), gmul(k, pc, ncrj))),
                        bpc, "");
  {
    /* packed here unless given, or resident and (kept from the last call or packed for an
       earlier row block) */
    LLVMValueRef skip = LLVMBuildAnd(
        k->B, res, LLVMBuildOr(k->B, keep, LLVMBuildICmp(k->B, LLVMIntNE, io, gi(k, 0), ""), ""),
        "");
    skip = LLVMBuildOr(k->B, skip, pre, "");
    GIf pb;
    gif_open(k, &pb, LLVMBuildNot(k->B, skip, ""), false);
    gm_call_step(k, e, GS_PACK_B, P, bpc, pc, kc, jc, nc);
    gif_close(k, &pb);
  }
  LLVMValueRef ic = gloop(
      k, &lic, io, LLVMBuildSelect(k->B, res, gmin(k, M, gadd(k, io, gi(k, c.mc))), M, ""), c.mc);
  LLVMValueRef mc = gmin(k, gi(k, c.mc), gsub(k, M, ic));
  /* A from a strided matrix, or (conv != NULL) from a convolution input, or packed
     beforehand (shared by the chunks of a split product): its block in place */
  LLVMValueRef apre = LLVMBuildIsNotNull(k->B, P[GP_APRE], "");
  LLVMValueRef mcr = LLVMBuildMul(
      k->B, LLVMBuildSDiv(k->B, gadd(k, mc, gi(k, c.mr - 1)), gi(k, c.mr), ""), gi(k, c.mr), "");
  LLVMValueRef apc = LLVMBuildSelect(
      k->B, apre, gfp(k, P[GP_APRE], gadd(k, gmul(k, ic, K), gmul(k, pc, mcr))), ap, "");
  gm_fn_pack_a(k, e, has_conv, has_dot, P, apre, ap, ic, mc, pc, kc);
  /* convolution panels read in place (the micro-kernel reads f32) */
  LLVMValueRef pok = NULL, poff = NULL, prs = NULL;
  bool direct = c.direct && has_conv && e == GE_F32;
  if (direct) gm_fn_direct_flags(k, &c, P, ic, mc, &pok, &poff, &prs);
  /* the block's micro-tiles: row panels outer (GmCfg.order 1) or column panels outer */
  LLVMValueRef outer =
      c.order ? gloop(k, &lout, gi(k, 0), mc, c.mr) : gloop(k, &lout, gi(k, 0), nc, c.nr);
  LLVMValueRef inner =
      c.order ? gloop(k, &lin, gi(k, 0), nc, c.nr) : gloop(k, &lin, gi(k, 0), mc, c.mr);
  LLVMValueRef ir = c.order ? outer : inner, jr = c.order ? inner : outer;
  LLVMValueRef nrv = gmin(k, gi(k, c.nr), gsub(k, nc, jr));
  LLVMValueRef mrv = gmin(k, gi(k, c.mr), gsub(k, mc, ir));
  LLVMValueRef cp = gfp(k, P[GP_C], gadd(k, gmul(k, gadd(k, ic, ir), P[GP_LDC]), gadd(k, jc, jr)));
  LLVMValueRef bpj = gfp(k, bpc, gmul(k, jr, kc));
  GmDirect dat, *dr = NULL;
  if (direct) dr = gm_fn_direct(k, &c, P, pok, poff, prs, ir, pc, &dat);
  LLVMValueRef pfl = c.pfb ? gm_next_lines(k, &c, P, bpc, bpj, kc, ncrj, ic, ir, jr) : NULL;
  c.micro->tile(k, &c,
                &(GmTile){gfp(k, apc, gmul(k, ir, kc)), dr, bpj, kc, cp, P[GP_LDC], mrv, nrv, first,
                          tile, pfl, e == GE_S8});
  gm_close(k, &lin);
  gm_close(k, &lout);
  gm_close(k, &lic);
  gm_close(k, &lpc);
  gm_close(k, &lio);
  gm_close(k, &ljc);
  gm_fn_zero_c(k, P);
  LLVMBuildRetVoid(k->B);
  if (saved) LLVMPositionBuilderAtEnd(cg->g.B, saved);
  *slot = fn;
  return fn;
}
