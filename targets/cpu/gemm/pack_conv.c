/* targets/cpu/gemm/pack_conv.c: packing A from a convolution input (implicit GEMM).
 *
 * Rows are output pixels (image, oh, ow), so one call can span the batch; K runs over
 * (kh, kw, ci) with ci fastest, walked in runs of channels at one tap that the MR rows of a
 * panel share, each row through its own pointer and the channel stride (an NCHW input is read
 * in place; taps in the padding read a zero with stride 0). A panel's pixels are decoded once
 * (row 0 by division, the others by stepping), because divisions per row would cost as much
 * as the panel's FMAs at small K. Runs of an NHWC input are packed VW deep with the register
 * transpose of A's rows; a panel of an NCHW input in one output row is one strided vector
 * load per channel; a full panel of an NHWC input inside the image is not packed at all, the
 * micro-kernel reads it in place (gm_direct_panel decides, for both). An input of bf16 or f16
 * (GmElt) is widened to f32 by the same loads (gm_load_f32), so its panels are f32 too; its
 * panels are never read in place (the micro-kernel reads f32). */
#include "gemm_impl.h"

/* The convolution geometry (GC_*) from the GEMM's conv parameter. */
void gm_conv_geom(GenKern *k, const LLVMValueRef *P, LLVMValueRef *g) {
  for (int j = 0; j < GC_COUNT; j++) {
    LLVMValueRef ix = gi(k, j);
    g[j] = LLVMBuildLoad2(k->B, k->cg->i64,
                          LLVMBuildInBoundsGEP2(k->B, k->cg->i64, P[GP_CONV], &ix, 1, ""), "");
  }
}

/* Depth pc of a convolution's K as its tap (kh, kw) and input channel ci (K runs over
 * (kh, kw, ci), ci fastest). */
void gm_tap(GenKern *k, const LLVMValueRef *g, LLVMValueRef pc, LLVMValueRef *kh, LLVMValueRef *kw,
            LLVMValueRef *ci) {
  LLVMValueRef kwci = gmul(k, g[GC_KW], g[GC_CI]);
  LLVMValueRef rem0 = LLVMBuildSRem(k->B, pc, kwci, "");
  *kh = LLVMBuildSDiv(k->B, pc, kwci, "");
  *kw = LLVMBuildSDiv(k->B, rem0, g[GC_CI], "");
  *ci = LLVMBuildSRem(k->B, rem0, g[GC_CI], "");
}

/* Output pixel pix of a convolution as its image and output row and column. */
static void gm_pixel(GenKern *k, const LLVMValueRef *g, LLVMValueRef pix, LLVMValueRef *img,
                     LLVMValueRef *oh, LLVMValueRef *ow) {
  LLVMValueRef q = LLVMBuildSRem(k->B, pix, g[GC_OHW], "");
  *img = LLVMBuildSDiv(k->B, pix, g[GC_OHW], "");
  *oh = LLVMBuildSDiv(k->B, q, g[GC_OW], "");
  *ow = LLVMBuildSRem(k->B, q, g[GC_OW], "");
}

/* Whether the span [first, last] of input rows or columns lies inside [0, n). */
static LLVMValueRef gm_inside(GenKern *k, LLVMValueRef first, LLVMValueRef last, LLVMValueRef n) {
  return LLVMBuildAnd(k->B, LLVMBuildICmp(k->B, LLVMIntSGE, first, gi(k, 0), ""), gslt(k, last, n),
                      "");
}

/* Element offset in a convolution input of row ih, column iw and channel ci of the image
 * whose offset is xb. */
static LLVMValueRef gm_xoff(GenKern *k, const LLVMValueRef *g, LLVMValueRef xb, LLVMValueRef ih,
                            LLVMValueRef iw, LLVMValueRef ci) {
  return gadd(k, gadd(k, xb, gadd(k, gmul(k, ih, g[GC_XSH]), gmul(k, iw, g[GC_XSW]))),
              gmul(k, ci, g[GC_XSC]));
}

/* Interleave MR rows lying at a fixed distance sw (1 or 2) of each other, each strided by xs
 * in K, into a panel: for t in [0, n) the MR floats src[r * sw + t * xs] go to dst[t * MR + r].
 * sw 1 is one MR-wide copy per depth; sw 2 loads the two halves' spans (MR floats each, never
 * past the last element read) and picks every other element with one shuffle. */
static void gm_pack_strided(GenKern *k, const GmCfg *c, GmElt e, LLVMValueRef src, LLVMValueRef xs,
                            int sw, LLVMValueRef n, LLVMValueRef dst) {
  CpuCg *cg = cpu_cg(k->cg);
  int MR = c->mr;
  GenLoop lt;
  LLVMValueRef t = gloop(k, &lt, gi(k, 0), n, 1);
  LLVMValueRef p = gep_e(k, e, src, gmul(k, t, xs)), v;
  if (sw == 1) {
    v = gm_load_f32(k, e, p, MR, 4);
  } else {
    /* rows 0 .. MR/2-1 at even positions of [0, MR); rows MR/2 .. MR-1 at odd positions of
       [MR-1, 2MR-1) */
    LLVMValueRef lo = gm_load_f32(k, e, p, MR, 4),
                 hi = gm_load_f32(k, e, gep_e(k, e, p, gi(k, MR - 1)), MR, 4), m[16];
    for (int r = 0; r < MR; r++)
      m[r] = LLVMConstInt(cg->g.i32, (unsigned)(r < MR / 2 ? 2 * r : MR + 2 * r - (MR - 1)), 0);
    v = LLVMBuildShuffleVector(k->B, lo, hi, LLVMConstVector(m, (unsigned)MR), "");
  }
  gstore(k, v, gfp(k, dst, gmul(k, t, gi(k, MR))), 4);
  gm_close(k, &lt);
}

/* Whether the micro-kernel reads the panel of output pixels pix0 .. pix0 + mrv - 1 of a
 * convolution in place instead of packed: a full panel of an input whose channels are
 * contiguous (NHWC) and even in number (every run of channels is then even: the K blocks'
 * depths are multiples of 8), its MR pixels in one output row and every tap of every pixel inside
 * the image (no padding), so that row r reads row 0's elements r * SW * XSW further on. *off
 * receives row 0's offset in the input at tap (0, 0) and channel 0 (0 when false), *rstride
 * the distance between rows. Both the packing (which skips such panels) and the GEMM ask. */
LLVMValueRef gm_direct_panel(GenKern *k, const GmCfg *c, const LLVMValueRef *P,
                             const LLVMValueRef *g, LLVMValueRef pix0, LLVMValueRef mrv,
                             LLVMValueRef *off, LLVMValueRef *rstride) {
  LLVMBuilderRef B = k->B;
  int MR = c->mr;
  /* the pixel and tap tests (five divisions) only for a full panel of an NHWC input with an
     even channel count */
  LLVMValueRef pre = LLVMBuildAnd(
      B, LLVMBuildICmp(B, LLVMIntEQ, g[GC_XSC], gi(k, 1), ""),
      LLVMBuildICmp(B, LLVMIntEQ, LLVMBuildAnd(B, g[GC_CI], gi(k, 1), ""), gi(k, 0), ""), "");
  pre = LLVMBuildAnd(B, pre, LLVMBuildICmp(B, LLVMIntEQ, mrv, gi(k, MR), ""), "");
  LLVMValueRef vok = gvar(k, gi(k, 0)), voff = gvar(k, gi(k, 0));
  GIf fp;
  gif_open(k, &fp, pre, false);
  LLVMValueRef img, oh, ow;
  gm_pixel(k, g, pix0, &img, &oh, &ow);
  LLVMValueRef kh = LLVMBuildSDiv(B, P[GP_K], gmul(k, g[GC_KW], g[GC_CI]), "");
  LLVMValueRef ih0 = gsub(k, gmul(k, oh, g[GC_SH]), g[GC_PH]),
               iw0 = gsub(k, gmul(k, ow, g[GC_SW]), g[GC_PW]);
  LLVMValueRef ihl = gadd(k, ih0, gmul(k, gsub(k, kh, gi(k, 1)), g[GC_DH]));
  LLVMValueRef iwl = gadd(k, gadd(k, iw0, gmul(k, gi(k, MR - 1), g[GC_SW])),
                          gmul(k, gsub(k, g[GC_KW], gi(k, 1)), g[GC_DW]));
  LLVMValueRef conds[5] = {LLVMBuildICmp(B, LLVMIntSLE, ow, gsub(k, g[GC_OW], gi(k, MR)), ""),
                           LLVMBuildICmp(B, LLVMIntSGE, ih0, gi(k, 0), ""), gslt(k, ihl, g[GC_H]),
                           LLVMBuildICmp(B, LLVMIntSGE, iw0, gi(k, 0), ""), gslt(k, iwl, g[GC_W])};
  LLVMValueRef ok = conds[0];
  for (int j = 1; j < 5; j++)
    ok = LLVMBuildAnd(B, ok, conds[j], "");
  LLVMValueRef o =
      gadd(k, gmul(k, img, g[GC_XSB]), gadd(k, gmul(k, ih0, g[GC_XSH]), gmul(k, iw0, g[GC_XSW])));
  LLVMBuildStore(B, LLVMBuildZExt(B, ok, k->cg->i64, ""), vok);
  LLVMBuildStore(B, LLVMBuildSelect(B, ok, o, gi(k, 0), ""), voff);
  gif_close(k, &fp);
  *off = gget(k, voff);
  *rstride = gmul(k, g[GC_SW], g[GC_XSW]);
  return LLVMBuildICmp(B, LLVMIntNE, gget(k, vok), gi(k, 0), "");
}

/* Pack A[ic + 0..mc, pc + 0..kc] from a convolution input (implicit GEMM) into MR-tall
 * panels at ap. Row r of a panel is output pixel m0 + ic + ir + r, decoded once per panel into
 * its image and window origin (row 0 by division, the others by stepping: with 3 input
 * channels, K = 27, the MR rows' divisions had cost as much as the panel's FMAs). K is walked
 * in runs of input channels at one tap (kh, kw), the run shared by the MR rows. A panel in
 * one output row of an NCHW input whose tap lies inside the image is one vector load per
 * channel from row 0's pointer, nothing computed per row (about half the instructions of
 * the general path). Otherwise each row reads its run through a
 * pointer and a stride, a row whose tap falls in the padding (or past the last row) reads the
 * one zero at zp with stride 0, and the MR rows are interleaved into the panel with the rows
 * unrolled (MR contiguous stores per step). */
void gm_pack_a_conv(GenKern *k, const GmCfg *c, GmElt e, LLVMValueRef *P, LLVMValueRef ap,
                    LLVMValueRef ic, LLVMValueRef mc, LLVMValueRef pc, LLVMValueRef kc,
                    LLVMValueRef zp) {
  CpuCg *cg = cpu_cg(k->cg);
  LLVMBuilderRef B = k->B;
  int MR = c->mr;
  LLVMValueRef g[GC_COUNT];
  gm_conv_geom(k, P, g);
  LLVMValueRef kh0, kw0, ci0;
  gm_tap(k, g, pc, &kh0, &kw0, &ci0);
  LLVMValueRef OH = LLVMBuildSDiv(B, g[GC_OHW], g[GC_OW], "");
  GenLoop li, lt;
  LLVMValueRef ir = gloop(k, &li, gi(k, 0), mc, MR);
  LLVMValueRef mrv = gmin(k, gi(k, MR), gsub(k, mc, ir));
  LLVMValueRef panel = gfp(k, ap, gmul(k, ir, kc));
  /* a panel the micro-kernel reads in place is not packed */
  GIf fd = {0};
  bool direct = c->direct && e == GE_F32;
  if (direct) {
    LLVMValueRef doff, drs;
    LLVMValueRef direct =
        gm_direct_panel(k, c, P, g, gadd(k, gadd(k, ic, ir), g[GC_M0]), mrv, &doff, &drs);
    gif_open(k, &fd, LLVMBuildNot(B, direct, ""), false);
  }
  /* the panel's pixels: row 0's (image, oh, ow) by division, the next rows' by stepping ow
     (with K of a few dozen, as with 3 input channels, MR rows' divisions cost as much as the
     panel's FMAs) */
  LLVMValueRef ih0[16], iw0[16], xb[16], valid[16], ow0 = NULL, img = NULL, oh = NULL, ow = NULL;
  for (int r = 0; r < MR; r++) {
    if (r == 0) {
      gm_pixel(k, g, gadd(k, gadd(k, ic, ir), g[GC_M0]), &img, &oh, &ow);
    } else {
      LLVMValueRef w = LLVMBuildICmp(B, LLVMIntEQ, ow = gadd(k, ow, gi(k, 1)), g[GC_OW], "");
      ow = LLVMBuildSelect(B, w, gi(k, 0), ow, "");
      LLVMValueRef h =
          LLVMBuildICmp(B, LLVMIntEQ, oh = gadd(k, oh, LLVMBuildZExt(B, w, cg->g.i64, "")), OH, "");
      oh = LLVMBuildSelect(B, h, gi(k, 0), oh, "");
      img = gadd(k, img, LLVMBuildZExt(B, h, cg->g.i64, ""));
    }
    ih0[r] = gsub(k, gmul(k, oh, g[GC_SH]), g[GC_PH]);
    iw0[r] = gsub(k, gmul(k, ow, g[GC_SW]), g[GC_PW]);
    xb[r] = gmul(k, img, g[GC_XSB]);
    valid[r] = gslt(k, gi(k, r), mrv);
    if (r == 0) ow0 = ow;
  }
  /* a full panel whose MR pixels lie in one output row of an input with unit width stride
     (NCHW): row r reads row 0's elements r * SW further on */
  LLVMValueRef row1 =
      LLVMBuildAnd(B, LLVMBuildICmp(B, LLVMIntEQ, mrv, gi(k, MR), ""),
                   LLVMBuildICmp(B, LLVMIntSLE, ow0, gsub(k, g[GC_OW], gi(k, MR)), ""), "");
  row1 = LLVMBuildAnd(B, row1, LLVMBuildICmp(B, LLVMIntEQ, g[GC_XSW], gi(k, 1), ""), "");
  row1 = LLVMBuildAnd(B, row1, LLVMBuildICmp(B, LLVMIntNE, g[GC_XSC], gi(k, 1), ""), "");
  /* every panel walks the block's K from its first tap: while (kk < kc), one run of input
     channels at tap (kh, kw) */
  LLVMValueRef vkk = gvar(k, gi(k, 0)), vkh = gvar(k, kh0), vkw = gvar(k, kw0), vci = gvar(k, ci0);
  GWhile run;
  LLVMValueRef kk = gwhile_open(k, &run, vkk, kc, "run", "runb", "rune");
  LLVMValueRef kh = gget(k, vkh), kw = gget(k, vkw), ci = gget(k, vci);
  LLVMValueRef n = gmin(k, gsub(k, g[GC_CI], ci), gsub(k, kc, kk));
  LLVMValueRef dh = gmul(k, kh, g[GC_DH]), dw = gmul(k, kw, g[GC_DW]);
  LLVMValueRef dst = gfp(k, panel, gmul(k, kk, gi(k, MR)));
  /* a panel in one output row of an NCHW input with the tap inside the image for its first and
     last pixel (so for all): row 0's pointer and one vector load per channel (width stride 1
     or 2); nothing per row */
  LLVMValueRef ih = gadd(k, ih0[0], dh), iw = gadd(k, iw0[0], dw), iwl = gadd(k, iw0[MR - 1], dw);
  LLVMValueRef fast = LLVMBuildAnd(B, row1, gm_inside(k, ih, ih, g[GC_H]), "");
  fast = LLVMBuildAnd(B, fast, gm_inside(k, iw, iwl, g[GC_W]), "");
  fast = LLVMBuildAnd(B, fast,
                      LLVMBuildICmp(B, LLVMIntULE, gsub(k, g[GC_SW], gi(k, 1)), gi(k, 1), ""), "");
  GIf ff;
  gif_open(k, &ff, fast, true);
  {
    LLVMValueRef src0 = gep_e(k, e, P[GP_A], gm_xoff(k, g, xb[0], ih, iw, ci));
    GIf fs;
    gif_open(k, &fs, LLVMBuildICmp(B, LLVMIntEQ, g[GC_SW], gi(k, 1), ""), true);
    gm_pack_strided(k, c, e, src0, g[GC_XSC], 1, n, dst);
    gif_else(k, &fs);
    gm_pack_strided(k, c, e, src0, g[GC_XSC], 2, n, dst);
    gif_close(k, &fs);
  }
  gif_else(k, &ff);
  LLVMValueRef src[16], st[16], all = NULL;
  for (int r = 0; r < MR; r++) {
    LLVMValueRef ihr = gadd(k, ih0[r], dh), iwr = gadd(k, iw0[r], dw);
    LLVMValueRef ok =
        LLVMBuildAnd(B, gm_inside(k, ihr, ihr, g[GC_H]), gm_inside(k, iwr, iwr, g[GC_W]), "");
    ok = LLVMBuildAnd(B, ok, valid[r], "");
    LLVMValueRef off = gm_xoff(k, g, xb[r], ihr, iwr, ci);
    /* the offset is only formed for taps inside the image; zp otherwise */
    off = LLVMBuildSelect(B, ok, off, gi(k, 0), "");
    src[r] = LLVMBuildSelect(B, ok, gep_e(k, e, P[GP_A], off), zp, "");
    st[r] = LLVMBuildSelect(B, ok, g[GC_XSC], gi(k, 0), "");
    all = all ? LLVMBuildAnd(B, all, ok, "") : ok;
  }
  /* every row inside the image (the common case): one shared channel offset, so the MR row
     pointers and it fit in registers; else a stride per row */
  GIf fa;
  gif_open(k, &fa, all, true);
  LLVMValueRef t0 = gi(k, 0);
  if (c->vw >= MR) {
    /* channels contiguous (an NHWC input): VW channels of each row per step, the MR x VW
       block transposed in registers as in gm_pack_a; the channels left over go below */
    t0 = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntEQ, g[GC_XSC], gi(k, 1), ""),
                         LLVMBuildAnd(B, n, gi(k, ~(int64_t)(c->vw - 1)), ""), gi(k, 0), "");
    gm_call_rows_t(k, c, e, src, gi(k, 0), t0, dst);
  }
  for (int v = 0; v < 2; v++) {
    LLVMValueRef t = gloop(k, &lt, v == 0 ? t0 : gi(k, 0), n, 1);
    LLVMValueRef d = gfp(k, dst, gmul(k, t, gi(k, MR)));
    LLVMValueRef to = v == 0 ? gmul(k, t, g[GC_XSC]) : NULL;
    for (int r = 0; r < MR; r++)
      gstore(k, gm_load_f32(k, e, gep_e(k, e, src[r], v == 0 ? to : gmul(k, t, st[r])), 0, 4),
             gfp(k, d, gi(k, r)), 4);
    gm_close(k, &lt);
    if (v == 0) gif_else(k, &fa);
  }
  gif_close(k, &fa);
  gif_close(k, &ff);
  LLVMBuildStore(B, gadd(k, kk, n), vkk);
  LLVMBuildStore(B, gi(k, 0), vci);
  LLVMValueRef kw1 = gadd(k, kw, gi(k, 1));
  LLVMValueRef wrap = LLVMBuildICmp(B, LLVMIntEQ, kw1, g[GC_KW], "");
  LLVMBuildStore(B, LLVMBuildSelect(B, wrap, gi(k, 0), kw1, ""), vkw);
  LLVMBuildStore(B, LLVMBuildSelect(B, wrap, gadd(k, kh, gi(k, 1)), kh, ""), vkh);
  gwhile_close(k, &run);
  if (direct) gif_close(k, &fd);
  gm_close(k, &li);
}
