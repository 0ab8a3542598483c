/* layout/conv.c: the conv-layout pass, convolutions in the target's canonical form.
 *
 * The CPU target's fast convolution (implicit GEMM) reads the input as [batch, spatial...,
 * feature] (b01f, NHWC for 2-D), the kernel as [spatial..., in, out] (01io, HWIO) and writes
 * the output as [batch, spatial..., feature]: the feature dimensions are minor, so the inner
 * loops are matrix products over contiguous rows. That NHWC form is the default; a target may
 * ask for NCHW instead (OptOpts.conv_layout: input bf01, kernel oi01, output bf01), which is
 * where cuDNN's f32 Winograd and FFT algorithms apply (depthwise convolutions stay NHWC for a
 * target that generates them, OptOpts.depthwise_nhwc). This pass rewrites every convolution
 * whose dimension numbers differ into the chosen form, e.g. for NHWC:
 *     y = convolution(x, k), dim_labels=bf01_oi01->bf01
 *  -> y = transpose(convolution(transpose(x, pin), transpose(k, pk)), dim_labels=b01f_01io->b01f,
 * qout) with pin = (in_batch, in_spatial..., in_feature), pk = (k_spatial..., k_in, k_out) and qout
 * the inverse of (out_batch, out_spatial..., out_feature). The window, group counts and
 * precision are unchanged (window dimension i still pairs the i-th spatial dimensions).
 * Constant kernels are transposed at compile time (layout_transpose builds a new constant);
 * a transpose already on an operand is composed with the new one. The transposes this leaves
 * between consecutive convolutions are removed by transpose-sink (which carries them through
 * the elementwise ops and pooling in between) and algsimp (transpose of transpose). Works on
 * every computation except fusion bodies, in one forward sweep (opt_rewrite_comp);
 * convolutions with control dependencies are left alone. */
#include "layout.h"

#include <string.h>

static HInstr *cl_rewrite(HComp *c, HInstr *in, OptConvLayout form) {
  const ConvDims *d = in->conv;
  int r = in->shape.rank, nsp = r - 2;
  LayoutConvPos q = layout_conv_pos(r, form); /* positions in the canonical form */
  int feat = q.feat, sp0 = q.sp0, ksp0 = q.ksp0, kin = q.kin, kout = q.kout;
  int64_t pin[HLO_MAX_RANK], pk[HLO_MAX_RANK], pout[HLO_MAX_RANK], qout[HLO_MAX_RANK];
  pin[0] = d->in_batch;
  pout[0] = d->out_batch;
  pin[feat] = d->in_feat;
  pout[feat] = d->out_feat;
  for (int i = 0; i < nsp; i++) {
    pin[sp0 + i] = d->in_sp.v[i];
    pout[sp0 + i] = d->out_sp.v[i];
    pk[ksp0 + i] = d->k_sp.v[i];
  }
  pk[kin] = d->k_in;
  pk[kout] = d->k_out;
  layout_perm_inverse(r, pout, qout);
  HInstr *ops[2] = {layout_transpose(c, in->ops[0], pin), layout_transpose(c, in->ops[1], pk)};
  HInstr *nc = hlo_instr_clone(c, in, ops);
  Shape s = layout_permuted_shape(in->shape.dt, r, in->shape.dims, pout);
  nc->shape = s;
  ConvDims *cd = hlo_arena_alloc(c->mod->arena, sizeof *cd);
  cd->in_batch = cd->out_batch = 0;
  cd->in_feat = cd->out_feat = feat;
  cd->k_in = kin;
  cd->k_out = kout;
  cd->in_sp.n = cd->out_sp.n = cd->k_sp.n = nsp;
  for (int i = 0; i < nsp; i++) {
    cd->in_sp.v[i] = cd->out_sp.v[i] = sp0 + i;
    cd->k_sp.v[i] = ksp0 + i;
  }
  nc->conv = cd;
  return layout_transpose(c, nc, qout);
}

/* The rewrite rule (opt_rewrite_comp): the canonical form of a non-canonical convolution. */
static HInstr *cl_rule(HComp *c, HInstr *in, PassCtx *pc, void *ctx) {
  (void)ctx;
  OptConvLayout form =
      pc->opts->depthwise_nhwc && opt_conv_depthwise(in) ? OPT_CONV_NHWC : pc->opts->conv_layout;
  if (in->op != OP_CONVOLUTION || in->nctrl || in->nops != 2 || !in->conv ||
      !hlo_shape_is_array(&in->shape) || in->shape.rank < 2 ||
      in->ops[0]->shape.rank != in->shape.rank || in->ops[1]->shape.rank != in->shape.rank ||
      layout_conv_is_canonical(in, form))
    return NULL;
  return cl_rewrite(c, in, form);
}

bool layout_conv_canonical(HModule *m, PassCtx *pc) {
  bool changed = false;
  for (int ci = 0; ci < m->ncomps; ci++)
    if (!m->comps[ci]->is_fusion) changed |= opt_rewrite_comp(m->comps[ci], pc, cl_rule, NULL);
  return changed;
}
