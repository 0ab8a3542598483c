/* targets/cpu/gemm/winograd.c: 3x3 convolutions through Winograd's F(2x2, 3x3).
 *
 * A 3x3 convolution of unit stride computed with Winograd's F(2x2, 3x3): each 2x2 tile of
 * the output comes from a 4x4 patch of the input through 16 products of 4x4 transformed
 * values instead of 36 of the direct form, 2.25x fewer multiply-adds. Per tile and channel:
 *   V = Bt d B (the input patch d transformed), U = G g Gt (the 3x3 taps g, once per run),
 *   M = V * U elementwise, summed over the input channels: 16 GEMMs, one per position xi of
 *   the 4x4 transform, [tiles x CI] x [CI x CO], through the module's GEMM function;
 *   Y = At M A, the 2x2 outputs.
 * The work goes in slices of whole rows of tiles (a range of (image, tile row) pairs: the
 * output pixels of a slice are consecutive rows of C), sized so that the slice's transformed
 * inputs and products, 16 * tiles * (CI + CO) floats, stay near 1 MiB (in L2); each slice is
 * then finished by the fusion's epilogue (or reduced into the chunk's partial results) while
 * its C rows are in cache, as the implicit GEMM's slices are. The transforms work on vectors
 * of channels: the input's channels must be contiguous (NHWC) and both channel counts whole
 * vectors. Taps in the padding read a clamped in-image address and select zero, so no tile
 * branches. The rounding differs from the direct sum's (the transforms add and halve values
 * before the products): within 1e-5 relative of it on the tests' convolutions. */
#include "gemm_impl.h"

/* The F(2x2, 3x3) input transform of a 4x4 patch d (row-major), in place: Bt d B with
 * Bt = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]. */
static void gm_wino_in(GenKern *k, LLVMValueRef *d) {
  LLVMBuilderRef B = k->B;
  LLVMValueRef t[16];
  for (int j = 0; j < 4; j++) {
    t[0 * 4 + j] = LLVMBuildFSub(B, d[0 * 4 + j], d[2 * 4 + j], "");
    t[1 * 4 + j] = LLVMBuildFAdd(B, d[1 * 4 + j], d[2 * 4 + j], "");
    t[2 * 4 + j] = LLVMBuildFSub(B, d[2 * 4 + j], d[1 * 4 + j], "");
    t[3 * 4 + j] = LLVMBuildFSub(B, d[1 * 4 + j], d[3 * 4 + j], "");
  }
  for (int i = 0; i < 4; i++) {
    LLVMValueRef *r = &t[i * 4];
    d[i * 4 + 0] = LLVMBuildFSub(B, r[0], r[2], "");
    d[i * 4 + 1] = LLVMBuildFAdd(B, r[1], r[2], "");
    d[i * 4 + 2] = LLVMBuildFSub(B, r[2], r[1], "");
    d[i * 4 + 3] = LLVMBuildFSub(B, r[1], r[3], "");
  }
}

/* The output transform of 4x4 products m (row-major): y = At m A (2x2, row-major) with
 * At = [1 1 1 0; 0 1 -1 -1]. */
static void gm_wino_out(GenKern *k, const LLVMValueRef *m, LLVMValueRef *y) {
  LLVMBuilderRef B = k->B;
  LLVMValueRef s[8];
  for (int j = 0; j < 4; j++) {
    s[0 * 4 + j] =
        LLVMBuildFAdd(B, LLVMBuildFAdd(B, m[0 * 4 + j], m[1 * 4 + j], ""), m[2 * 4 + j], "");
    s[1 * 4 + j] =
        LLVMBuildFSub(B, LLVMBuildFSub(B, m[1 * 4 + j], m[2 * 4 + j], ""), m[3 * 4 + j], "");
  }
  for (int i = 0; i < 2; i++) {
    const LLVMValueRef *r = &s[i * 4];
    y[i * 2 + 0] = LLVMBuildFAdd(B, LLVMBuildFAdd(B, r[0], r[1], ""), r[2], "");
    y[i * 2 + 1] = LLVMBuildFSub(B, LLVMBuildFSub(B, r[1], r[2], ""), r[3], "");
  }
}

/* Whether convolution cv may be computed by Winograd's F(2x2, 3x3) (gm_winograd): 3x3 taps,
 * unit strides, no dilation or reversal, f32, no grouping, channel counts in whole vectors.
 * Decided from the instruction alone, so that the GEMM function, made by the module's first
 * product, knows that it needs its packing of A from a matrix; the kernel checks the
 * operands' layout and the scratch on top (gm_wino_fits). */
bool gm_wino_conv(CpuCg *cg, const HInstr *cv) {
  GmCfg c = gm_cfg(cg);
  if (!c.wino || cv->op != OP_CONVOLUTION || cv->nops != 2 || cv->shape.dt != DT_F32 ||
      cv->ops[0]->shape.dt != DT_F32 || cv->ops[1]->shape.dt != DT_F32)
    return false;
  const ConvDims *cd = cv->conv;
  if (cd->in_sp.n != 2 || cv->feature_groups != 1 || cv->batch_groups != 1) return false;
  const Shape *ws = &cv->ops[1]->shape, *os = &cv->shape;
  for (int j = 0; j < 2; j++) {
    const WinDim *wd = &cv->window->d[j];
    if (ws->dims[cd->k_sp.v[j]] != 3 || wd->stride != 1 || wd->win_dil != 1 || wd->base_dil != 1 ||
        wd->reversal || wd->pad_lo < 0 || wd->pad_hi < 0 || os->dims[cd->out_sp.v[j]] < 2)
      return false;
  }
  return ws->dims[cd->k_in] % c.vw == 0 && ws->dims[cd->k_out] % c.vw == 0;
}

/* What the Winograd kernel needs on top: rows over the whole batch (NHWC output), the
 * input's channels contiguous, and one row of tiles whose transformed inputs and products (a
 * slice's least) take at most 4 MiB: images up to 1024 pixels wide at 64 + 64 channels, 128
 * at 512 + 512 (a wider one would need more scratch per chunk, and is computed directly). */
bool gm_wino_fits(const GmProb *p) {
  if (!p->conv || p->nloop != 0 || p->geo[GC_XSC] != 1) return false;
  return 64 * ((p->geo[GC_OW] + 1) / 2) * (p->geo[GC_CI] + p->N) <= ((int64_t)4 << 20);
}

static const int gm_wino_nargs[GW_COUNT] = {15, 10, 11};

static LLVMTypeRef gm_wino_type(CpuCg *cg, GmWino which) {
  LLVMTypeRef ps[16];
  for (int j = 0; j < gm_wino_nargs[which]; j++)
    ps[j] = j < 2 ? cg->g.ptr : cg->g.i64;
  return LLVMFunctionType(cg->g.vd, ps, (unsigned)gm_wino_nargs[which], 0);
}

/* GW_IN's and GW_OUT's walk over tile rows [q0, q1): opens the loops and gives the tile's
 * image n, tile row th, tile column tw and number t in the slice; gm_wino_walk_close closes. */
typedef struct GmWalk {
  GenLoop lq, lw;
  LLVMValueRef n, th, tw, t;
} GmWalk;

static void gm_wino_walk(GenKern *k, GmWalk *w, LLVMValueRef q0, LLVMValueRef q1, LLVMValueRef TC,
                         LLVMValueRef TR) {
  LLVMValueRef q = gloop(k, &w->lq, q0, q1, 1);
  w->n = LLVMBuildSDiv(k->B, q, TR, "");
  w->th = LLVMBuildSRem(k->B, q, TR, "");
  LLVMValueRef t0 = gmul(k, gsub(k, q, q0), TC);
  w->tw = gloop(k, &w->lw, gi(k, 0), TC, 1);
  w->t = gadd(k, t0, w->tw);
}

static void gm_wino_walk_close(GenKern *k, GmWalk *w) {
  gm_close(k, &w->lw);
  gm_close(k, &w->lq);
}

static void gm_wino_in_body(GenKern *k, const GmCfg *c, const LLVMValueRef *P) {
  CpuCg *cg = cpu_cg(k->cg);
  LLVMBuilderRef B = k->B;
  enum { X, V, Q0, Q1, CI, T, TC, TR, H, W, PH, PW, XSH, XSW, XSB };
  LLVMTypeRef vt = LLVMVectorType(cg->g.f32, (unsigned)c->vw);
  GmWalk w;
  gm_wino_walk(k, &w, P[Q0], P[Q1], P[TC], P[TR]);
  LLVMValueRef xb = gfp(k, P[X], gmul(k, w.n, P[XSB]));
  LLVMValueRef ih0 = gsub(k, gmul(k, w.th, gi(k, 2)), P[PH]),
               iw0 = gsub(k, gmul(k, w.tw, gi(k, 2)), P[PW]);
  LLVMValueRef okh[4], okw[4], offh[4], offw[4];
  for (int i = 0; i < 4; i++) {
    /* taps in the padding: a clamped in-image address, then zero */
    LLVMValueRef ih = gadd(k, ih0, gi(k, i)), iw = gadd(k, iw0, gi(k, i));
    okh[i] = LLVMBuildICmp(B, LLVMIntULT, ih, P[H], "");
    okw[i] = LLVMBuildICmp(B, LLVMIntULT, iw, P[W], "");
    offh[i] = gmul(k, LLVMBuildSelect(B, okh[i], ih, gi(k, 0), ""), P[XSH]);
    offw[i] = gmul(k, LLVMBuildSelect(B, okw[i], iw, gi(k, 0), ""), P[XSW]);
  }
  GenLoop lc;
  LLVMValueRef ci = gloop(k, &lc, gi(k, 0), P[CI], c->vw);
  LLVMValueRef d[16], zero = LLVMConstNull(vt);
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 4; j++) {
      LLVMValueRef v = gload(k, vt, gfp(k, xb, gadd(k, gadd(k, offh[i], offw[j]), ci)), 4);
      d[i * 4 + j] = LLVMBuildSelect(B, LLVMBuildAnd(B, okh[i], okw[j], ""), v, zero, "");
    }
  gm_wino_in(k, d);
  LLVMValueRef at = gadd(k, gmul(k, w.t, P[CI]), ci), blk = gmul(k, P[T], P[CI]);
  for (int e = 0; e < 16; e++)
    gstore(k, d[e], gfp(k, P[V], gadd(k, gmul(k, gi(k, e), blk), at)), 4);
  gm_close(k, &lc);
  gm_wino_walk_close(k, &w);
}

static void gm_wino_out_body(GenKern *k, const GmCfg *c, const LLVMValueRef *P) {
  CpuCg *cg = cpu_cg(k->cg);
  LLVMBuilderRef B = k->B;
  enum { M, C, Q0, Q1, CO, T, TC, TR, OH, OW };
  LLVMTypeRef vt = LLVMVectorType(cg->g.f32, (unsigned)c->vw);
  LLVMValueRef dummy = gen_alloca(k, vt); /* where pixels outside the output go */
  GmWalk w;
  gm_wino_walk(k, &w, P[Q0], P[Q1], P[TC], P[TR]);
  LLVMValueRef oh = gmul(k, w.th, gi(k, 2)), ow = gmul(k, w.tw, gi(k, 2));
  LLVMValueRef pix = gadd(k, gmul(k, gadd(k, gmul(k, w.n, P[OH]), oh), P[OW]), ow);
  LLVMValueRef row1 = gslt(k, gadd(k, oh, gi(k, 1)), P[OH]),
               col1 = gslt(k, gadd(k, ow, gi(k, 1)), P[OW]);
  LLVMValueRef ok[4] = {NULL, col1, row1, LLVMBuildAnd(B, row1, col1, "")};
  LLVMValueRef px[4] = {pix, gadd(k, pix, gi(k, 1)), gadd(k, pix, P[OW]),
                        gadd(k, gadd(k, pix, P[OW]), gi(k, 1))};
  GenLoop lc;
  LLVMValueRef co = gloop(k, &lc, gi(k, 0), P[CO], c->vw);
  LLVMValueRef m[16], y[4], at = gadd(k, gmul(k, w.t, P[CO]), co), blk = gmul(k, P[T], P[CO]);
  for (int e = 0; e < 16; e++)
    m[e] = gload(k, vt, gfp(k, P[M], gadd(k, gmul(k, gi(k, e), blk), at)), 4);
  gm_wino_out(k, m, y);
  for (int e = 0; e < 4; e++) {
    LLVMValueRef dst = gfp(k, P[C], gadd(k, gmul(k, px[e], P[CO]), co));
    gstore(k, y[e], ok[e] ? LLVMBuildSelect(B, ok[e], dst, dummy, "") : dst, 4);
  }
  gm_close(k, &lc);
  gm_wino_walk_close(k, &w);
}

static void gm_wino_u_body(GenKern *k, const GmCfg *c, const LLVMValueRef *P) {
  CpuCg *cg = cpu_cg(k->cg);
  LLVMBuilderRef B = k->B;
  enum { W, U, CI0, CI1, CI, CO, SKH, SKW, SCI, SCO, KSTEP };
  LLVMTypeRef vt = LLVMVectorType(cg->g.f32, (unsigned)c->vw);
  GenLoop lc, lo;
  LLVMValueRef ci = gloop(k, &lc, P[CI0], P[CI1], 1);
  /* ci's K block [pc, pc + kc) and row in it */
  LLVMValueRef pc = gmul(k, LLVMBuildSDiv(B, ci, P[KSTEP], ""), P[KSTEP]);
  LLVMValueRef kc = gmin(k, P[KSTEP], gsub(k, P[CI], pc)), row = gsub(k, ci, pc);
  /* every column of the panels, those past CO (the last panel's padding) zero */
  LLVMValueRef cor =
      LLVMBuildAnd(B, gadd(k, P[CO], gi(k, c->nr - 1)), gi(k, ~(int64_t)(c->nr - 1)), "");
  LLVMValueRef co = gloop(k, &lo, gi(k, 0), cor, c->vw);
  LLVMValueRef in = gslt(k, co, P[CO]), col = gmin(k, co, gsub(k, P[CO], gi(k, c->vw)));
  LLVMValueRef h[16], g[9], t[12], zero = LLVMConstNull(vt);
  for (int j = 0; j < c->vw; j++)
    h[j] = LLVMConstReal(cg->g.f32, 0.5);
  LLVMValueRef half = LLVMConstVector(h, (unsigned)c->vw);
  /* the taps of (ci, co .. co + VW): a vector load where the output channels are contiguous
     (HWIO), else a gather (OIHW weights read in place) */
  LLVMValueRef wci = gfp(k, P[W], gmul(k, ci, P[SCI])), gt[2][9];
  LLVMTypeRef gty[2] = {vt, LLVMVectorType(cg->g.ptr, (unsigned)c->vw)};
  LLVMValueRef gather =
      LLVMGetIntrinsicDeclaration(cg->g.M, LLVMLookupIntrinsicID("llvm.masked.gather", 18), gty, 2);
  LLVMValueRef lane[16], idx = NULL;
  for (int j = 0; j < c->vw; j++)
    lane[j] = LLVMConstInt(cg->g.i64, (unsigned long long)j, 0);
  LLVMBasicBlockRef from[2];
  GIf f;
  gif_open(k, &f, LLVMBuildICmp(B, LLVMIntEQ, P[SCO], gi(k, 1), ""), true);
  for (int path = 0; path < 2; path++) {
    if (path) {
      gif_else(k, &f);
      /* the gather's element offsets (col + lane) * SCO */
      idx = LLVMBuildMul(
          B, LLVMBuildAdd(B, cpu_splat(k, col, c->vw), LLVMConstVector(lane, (unsigned)c->vw), ""),
          cpu_splat(k, P[SCO], c->vw), "");
    }
    for (int tap = 0; tap < 9; tap++) {
      LLVMValueRef tp =
          gfp(k, wci, gadd(k, gmul(k, gi(k, tap / 3), P[SKH]), gmul(k, gi(k, tap % 3), P[SKW])));
      if (!path) {
        gt[0][tap] = gload(k, vt, gfp(k, tp, col), 4);
        continue;
      }
      gt[1][tap] = LLVMBuildCall2(
          B, LLVMGlobalGetValueType(gather), gather,
          (LLVMValueRef[]){
              LLVMBuildGEP2(B, cg->g.f32, tp, &idx, 1, ""), LLVMConstInt(cg->g.i32, 4, 0),
              LLVMConstAllOnes(LLVMVectorType(cg->g.i1, (unsigned)c->vw)), LLVMGetUndef(vt)},
          4, "");
    }
    from[path] = LLVMGetInsertBlock(B);
  }
  gif_close(k, &f);
  for (int tap = 0; tap < 9; tap++) {
    g[tap] = LLVMBuildPhi(B, vt, "");
    LLVMAddIncoming(g[tap], (LLVMValueRef[]){gt[0][tap], gt[1][tap]}, from, 2);
  }
  /* where column co of row ci goes: column block jc (NC wide), its K block at
     jc * CI + pc * roundup(nc, NR), the NR-wide panel of co, its row, co's place in it */
  LLVMValueRef jc = gmul(k, LLVMBuildSDiv(B, co, gi(k, c->nc), ""), gi(k, c->nc));
  LLVMValueRef ncr =
      LLVMBuildAnd(B, gadd(k, gmin(k, gi(k, c->nc), gsub(k, P[CO], jc)), gi(k, c->nr - 1)),
                   gi(k, ~(int64_t)(c->nr - 1)), "");
  LLVMValueRef pan = LLVMBuildAnd(B, gsub(k, co, jc), gi(k, ~(int64_t)(c->nr - 1)), "");
  LLVMValueRef at =
      gadd(k, gadd(k, gmul(k, jc, P[CI]), gmul(k, pc, ncr)),
           gadd(k, gmul(k, pan, kc),
                gadd(k, gmul(k, row, gi(k, c->nr)), LLVMBuildAnd(B, co, gi(k, c->nr - 1), ""))));
  LLVMValueRef blk = gmul(k, P[CI], cor);
  /* t = G g (4 x 3), column by column of g; then U = t Gt (4 x 4), row by row of t */
  for (int pass = 0; pass < 2; pass++)
    for (int r = 0; r < (pass ? 4 : 3); r++) {
      LLVMValueRef a = pass ? t[r * 3] : g[r], b = pass ? t[r * 3 + 1] : g[3 + r],
                   e = pass ? t[r * 3 + 2] : g[6 + r];
      LLVMValueRef ae = LLVMBuildFAdd(B, a, e, "");
      LLVMValueRef o[4] = {a, LLVMBuildFMul(B, LLVMBuildFAdd(B, ae, b, ""), half, ""),
                           LLVMBuildFMul(B, LLVMBuildFSub(B, ae, b, ""), half, ""), e};
      for (int q = 0; q < 4; q++) {
        if (!pass)
          t[q * 3 + r] = o[q];
        else
          gstore(k, LLVMBuildSelect(B, in, o[q], zero, ""),
                 gfp(k, P[U], gadd(k, gmul(k, gi(k, r * 4 + q), blk), at)), 4);
      }
    }
  gm_close(k, &lo);
  gm_close(k, &lc);
}

LLVMValueRef gm_wino_function(CpuCg *cg, GmWino which) {
  LLVMValueRef *slot = &gm_state(cg)->wino_fn[which];
  if (*slot) return *slot;
  GmCfg c = gm_cfg(cg);
  static const char *const names[GW_COUNT] = {"in", "out", "taps"};
  char name[512];
  snprintf(name, sizeof name, "%s_wino_%s", gm_prefix(cg), names[which]);
  if (gm_declared(cg, slot, name, gm_wino_type(cg, which))) return *slot;
  LLVMBasicBlockRef saved = LLVMGetInsertBlock(cg->g.B);
  GenKern *k = gm_fn_begin(cg, name, gm_wino_type(cg, which));
  gm_mark(k->fn, &c);
  LLVMValueRef P[16];
  for (int j = 0; j < gm_wino_nargs[which]; j++)
    P[j] = LLVMGetParam(k->fn, (unsigned)j);
  if (which == GW_IN) gm_wino_in_body(k, &c, P);
  if (which == GW_OUT) gm_wino_out_body(k, &c, P);
  if (which == GW_U) gm_wino_u_body(k, &c, P);
  LLVMBuildRetVoid(k->B);
  if (saved) LLVMPositionBuilderAtEnd(cg->g.B, saved);
  *slot = k->fn;
  return k->fn;
}

static void gm_wino_call(GenKern *k, GmWino which, LLVMValueRef *args) {
  LLVMBuildCall2(k->B, gm_wino_type(cpu_cg(k->cg), which), gm_wino_function(cpu_cg(k->cg), which),
                 args, (unsigned)gm_wino_nargs[which], "");
}

/* The taps' transform (GW_U) of input channels [lo, hi) of taps w (CI x CO, strides wk of (kh,
 * kw, ci, co)) into U. */
void gm_wino_taps(GenKern *k, const GmCfg *c, LLVMValueRef w, LLVMValueRef U, LLVMValueRef lo,
                  LLVMValueRef hi, int64_t CI, int64_t CO, const int64_t *wk) {
  LLVMValueRef ua[11] = {w,
                         U,
                         lo,
                         hi,
                         gi(k, CI),
                         gi(k, CO),
                         gi(k, wk[0]),
                         gi(k, wk[1]),
                         gi(k, wk[2]),
                         gi(k, wk[3]),
                         gi(k, gm_kstep(c, CI))};
  gm_wino_call(k, GW_U, ua);
}

/* Constant taps transformed at compile time: U[xi] = (G g Gt)[xi] with the operations of
 * GW_U in the same order (so the same floats), each U[xi] in the layout of a B packed
 * beforehand, xi * CI * roundup(CO, NR) apart, in read-only data; NULL when the taps are not a
 * constant. */
static LLVMValueRef gm_wino_const_taps(CpuCg *cg, const GmCfg *c, const GmProb *p) {
  const float *w = gm_view_const(c, &p->b);
  if (!w) return NULL;
  int64_t CI = p->geo[GC_CI], CO = p->N, ublk = CI * gm_roundup(CO, c->nr);
  float *raw = hlo_arena_alloc(cg->g.scratch, sizeof(float) * (size_t)(16 * CI * CO));
  float *buf = hlo_arena_alloc(cg->g.scratch, sizeof(float) * (size_t)(16 * ublk));
  memset(buf, 0, sizeof(float) * (size_t)(16 * ublk));
  for (int64_t ci = 0; ci < CI; ci++)
    for (int64_t co = 0; co < CO; co++) {
      float g[9], t[12];
      for (int tap = 0; tap < 9; tap++)
        g[tap] = w[(tap / 3) * p->wk[0] + (tap % 3) * p->wk[1] + ci * p->wk[2] + co * p->wk[3]];
      for (int pass = 0; pass < 2; pass++)
        for (int r = 0; r < (pass ? 4 : 3); r++) {
          float a = pass ? t[r * 3] : g[r], b = pass ? t[r * 3 + 1] : g[3 + r],
                e = pass ? t[r * 3 + 2] : g[6 + r];
          float ae = a + e, o[4] = {a, (ae + b) * 0.5f, (ae - b) * 0.5f, e};
          for (int q = 0; q < 4; q++) {
            if (!pass)
              t[q * 3 + r] = o[q];
            else
              raw[((r * 4 + q) * CI + ci) * CO + co] = o[q];
          }
        }
    }
  int64_t kstep = gm_kstep(c, CI), nnb = (CO + c->nc - 1) / c->nc;
  for (int xi = 0; xi < 16; xi++)
    gm_panels(c, raw + xi * CI * CO, CO, 1, CI, CO, c->nc, nnb, kstep, buf + xi * ublk);
  char name[512];
  snprintf(name, sizeof name, "%s_wu%d", cg->o->name, cg->ntasks);
  return cpu_rodata(cg, name, buf, sizeof(float) * (size_t)(16 * ublk));
}

/* The Winograd kernels of convolution hero (alone, or the hero of output fusion `in`, whose
 * root may reduce it: red) in problem p: the taps' transform (chunks over input channels),
 * then the convolution, in slices of whole tile rows split into chunks. Private scratch from
 * stage_bytes: U (unless the taps are constant), then per chunk the transformed inputs
 * V[16][T][CI], the products
 * M[16][T][CO], the GEMM's packing area and (reducing) a slice of C, then the chunks' partial
 * results. */
int gm_winograd(CpuCg *cg, HInstr *in, const HInstr *hero, const HInstr *red, const GmProb *p,
                const GmCfg *c, int64_t stage_bytes, int64_t want) {
  const int64_t *geo = p->geo;
  int64_t CI = geo[GC_CI], CO = p->N, OW = geo[GC_OW], OHW = geo[GC_OHW], OH = OHW / OW;
  int64_t NB = p->M / OHW, TR = (OH + 1) / 2, TC = (OW + 1) / 2, Q = NB * TR;
  /* tile rows per slice: 16 * tiles * (CI + CO) floats near 1 MiB, at least 2 * MR tiles */
  int64_t tgt = ((int64_t)1 << 20) / (64 * (CI + CO));
  if (tgt < 2 * c->mr) tgt = 2 * c->mr;
  if (c->wino > 1) tgt = c->wino;
  int64_t g0 = (tgt + TC - 1) / TC, gq = g0;
  if (c->wino <= 1) {
    /* within half of that either way, the fewest rows computed for nothing by the products
       (M = tiles: a last panel of more than GM_TAIL_ROWS rows is padded to MR; one of fewer
       runs the short kernel, counted at twice its rows), the nearest to it on a tie:
       resnet_block's 14 tiles a row, 5 rows (70 tiles, a last panel of 10) -> 6 (84) */
    double best = 1e9;
    for (int64_t g = g0 - g0 / 2; g <= g0 + g0 / 2 && g <= Q; g++) {
      int64_t t = g * TC, r = t % c->mr,
              cost = t - r +
                     (r == 0              ? 0
                      : r <= GM_TAIL_ROWS ? 2 * r
                                          : c->mr);
      double w = (double)cost / (double)t;
      if (w < best - 1e-9 || (w < best + 1e-9 && llabs(g - g0) < llabs(gq - g0))) best = w, gq = g;
    }
  }
  if (gq > Q) gq = Q;
  int64_t T = gq * TC, items = (Q + gq - 1) / gq;
  int64_t nchunks = want <= 1 ? 1 : items < want ? items : want;
  /* the taps' transform: at compile time for constant taps (frozen weights), into read-only
     data; else a kernel of its own each run, into U in the private scratch */
  LLVMValueRef uconst = gm_wino_const_taps(cg, c, p), chunk, lo, hi;
  int64_t ublk = CI * gm_roundup(CO, c->nr), u_bytes = uconst ? 0 : memplan_align(16 * ublk * 4);
  int64_t v_bytes = memplan_align(16 * T * CI * 4);
  int64_t m_bytes = memplan_align(16 * T * CO * 4), pack = gm_pack_bytes(c, T, CO, CI, false);
  int64_t slice_bytes = red ? memplan_align(2 * gq * OW * CO * 4) : 0,
          per = v_bytes + m_bytes + pack + slice_bytes;
  int64_t u_off = stage_bytes, ch_off = u_off + u_bytes, part_off = ch_off + nchunks * per;
  int64_t part_bytes = red ? memplan_align(hlo_shape_elems(&red->shape) * 4) : 0;
  int64_t need = part_off + nchunks * part_bytes;
  if (need > cg->extra_temp) cg->extra_temp = need;

  /* taps that are an entry parameter: the caller may pass them transformed ahead of the runs
     (NAME_pack); then the taps' kernel does nothing and the products read them there */
  int64_t pk_off = uconst ? -1 : gm_pack_job(cg, p, 0, 0, false);
  if (!uconst) {
    int64_t uch = CI < 16 ? CI : 16;
    GenKern *kt = cpu_kern_begin(cg, in);
    LLVMValueRef Ut = cpu_slot(kt, (CpuSlot){CPU_SLOT_TEMP, NULL, NULL, cg->temp_base + u_off});
    gm_chunk_items(kt, CI, uch, &chunk, &lo, &hi);
    LLVMValueRef pkb = gm_packed_base(kt, pk_off);
    if (pkb) hi = LLVMBuildSelect(kt->B, LLVMBuildIsNull(kt->B, pkb, ""), hi, lo, "");
    gm_wino_taps(kt, c, gm_view_ptr(kt, &p->b), Ut, lo, hi, CI, CO, p->wk);
    if (!cpu_kern_end(kt, uch)) return -1;
    cg->tasks[cg->ntasks - 1].whole = uch > 1;
    cg->tasks[cg->ntasks - 1].note = "Winograd taps";
  }

  /* the convolution */
  GenKern *k = cpu_kern_begin(cg, in);
  LLVMBuilderRef B = k->B;
  const HInstr *fusion = hero == in ? NULL : in;
  if (fusion) k->bind[k->nbind++] = (GenBind){in->calls[0], in, NULL, 0, 0};
  LLVMValueRef X = gm_view_ptr(k, &p->a), C = red ? NULL : cpu_buffer(k, in);
  LLVMValueRef U = uconst
                       ? cpu_slot(k, (CpuSlot){CPU_SLOT_GLOBAL, NULL, uconst, 0})
                       : cpu_slot(k, (CpuSlot){CPU_SLOT_TEMP, NULL, NULL, cg->temp_base + u_off});
  if (pk_off >= 0) U = gm_or_packed(k, gm_packed_base(k, pk_off), pk_off, gi(k, 0), U);
  LLVMValueRef scratch = cpu_slot(k, (CpuSlot){CPU_SLOT_TEMP, NULL, NULL, cg->temp_base + ch_off});
  gm_chunk_items(k, items, nchunks, &chunk, &lo, &hi);
  LLVMValueRef base = LLVMBuildInBoundsGEP2(B, cg->g.i8, scratch,
                                            (LLVMValueRef[]){gmul(k, chunk, gi(k, per))}, 1, "");
  LLVMValueRef Vb = base;
  LLVMValueRef Mb =
      LLVMBuildInBoundsGEP2(B, cg->g.i8, base, (LLVMValueRef[]){gi(k, v_bytes)}, 1, "");
  LLVMValueRef packp =
      LLVMBuildInBoundsGEP2(B, cg->g.i8, base, (LLVMValueRef[]){gi(k, v_bytes + m_bytes)}, 1, "");
  LLVMValueRef Cs = NULL, P = NULL;
  if (red) {
    Cs = LLVMBuildInBoundsGEP2(B, cg->g.i8, base, (LLVMValueRef[]){gi(k, v_bytes + m_bytes + pack)},
                               1, "");
    P = LLVMBuildInBoundsGEP2(
        B, cg->g.i8, scratch,
        (LLVMValueRef[]){gadd(k, gi(k, part_off - ch_off), gmul(k, chunk, gi(k, part_bytes)))}, 1,
        "");
    gm_reduce_init(k, red, P, part_bytes);
  }
  LLVMValueRef itv = gvar(k, lo);
  GWhile lit;
  LLVMValueRef it = gwhile_open(k, &lit, itv, hi, "wino", "winob", "winoe");
  LLVMBuildStore(B, gadd(k, it, gi(k, 1)), itv);
  int cache_mark = k->ncache;
  LLVMValueRef q0 = gmul(k, it, gi(k, gq)), q1 = gmin(k, gadd(k, q0, gi(k, gq)), gi(k, Q));
  /* the slice's output pixels [s0, s1): tile row q covers rows 2 (q % TR) .. of image q / TR */
  LLVMValueRef sq[2], qq[2] = {q0, q1};
  for (int e = 0; e < 2; e++)
    sq[e] =
        gmul(k,
             gadd(k, gmul(k, LLVMBuildSDiv(B, qq[e], gi(k, TR), ""), gi(k, OH)),
                  gmin(k, gmul(k, LLVMBuildSRem(B, qq[e], gi(k, TR), ""), gi(k, 2)), gi(k, OH))),
             gi(k, OW));
  /* C as the output transform sees it: the output, or the slice buffer standing for rows
     [s0, s1) */
  LLVMValueRef Cw =
      red ? LLVMBuildGEP2(B, cg->g.f32, Cs,
                          (LLVMValueRef[]){gsub(k, gi(k, 0), gmul(k, sq[0], gi(k, CO)))}, 1, "")
          : C;
  LLVMValueRef ia[15] = {X,
                         Vb,
                         q0,
                         q1,
                         gi(k, CI),
                         gi(k, T),
                         gi(k, TC),
                         gi(k, TR),
                         gi(k, geo[GC_H]),
                         gi(k, geo[GC_W]),
                         gi(k, geo[GC_PH]),
                         gi(k, geo[GC_PW]),
                         gi(k, geo[GC_XSH]),
                         gi(k, geo[GC_XSW]),
                         gi(k, geo[GC_XSB])};
  gm_wino_call(k, GW_IN, ia);
  {
    /* the 16 products M[xi] = V[xi] U[xi] */
    GenLoop lx;
    LLVMValueRef xi = gloop(k, &lx, gi(k, 0), gi(k, 16), 1);
    LLVMValueRef args[GP_COUNT];
    args[GP_M] = gmul(k, gsub(k, q1, q0), gi(k, TC));
    args[GP_N] = gi(k, CO);
    args[GP_K] = gi(k, CI);
    args[GP_A] = gfp(k, Vb, gmul(k, xi, gi(k, T * CI)));
    args[GP_ARS] = gi(k, CI);
    args[GP_ACS] = gi(k, 1);
    args[GP_B] = LLVMConstNull(cg->g.ptr);
    args[GP_BRS] = gi(k, CO);
    args[GP_BCS] = gi(k, 1);
    args[GP_C] = gfp(k, Mb, gmul(k, xi, gi(k, T * CO)));
    args[GP_LDC] = gi(k, CO);
    args[GP_PACK] = packp;
    args[GP_CONV] = args[GP_APRE] = LLVMConstNull(cg->g.ptr);
    args[GP_BPRE] = gfp(k, U, gmul(k, xi, gi(k, ublk)));
    args[GP_BKEEP] = gi(k, 0);
    LLVMBuildCall2(B, gm_fn_type(cg), gm_function(cg, GE_F32), args, GP_COUNT, "");
    gm_close(k, &lx);
  }
  LLVMValueRef oa[10] = {Mb,       Cw,        q0,        q1,        gi(k, CO),
                         gi(k, T), gi(k, TC), gi(k, TR), gi(k, OH), gi(k, OW)};
  gm_wino_call(k, GW_OUT, oa);
  if (fusion && !k->failed) {
    LLVMValueRef lidx[HLO_MAX_RANK] = {0};
    gm_epilogue(k, in, hero, red, p, lidx, sq[0], sq[1], gi(k, 0), gi(k, CO), red ? Cw : C, P);
  }
  k->ncache = cache_mark;
  gwhile_close(k, &lit);
  if (!cpu_kern_end(k, nchunks)) return -1;
  cg->tasks[cg->ntasks - 1].whole = nchunks > 1 && !red;
  cg->tasks[cg->ntasks - 1].note = "Winograd";
  if (red && !gm_reduce_finish(cg, in, red, part_off, part_bytes, nchunks)) return -1;
  return 1;
}
