/* targets/cpu/gemm/views.c: operand views and the GEMM problem of a dot or convolution.
 *
 * A product can use the GEMM when its operands are strided views of buffers: an entry value
 * or constant seen through fused parameters, transposes, broadcasts, slices and bitcast-like
 * reshapes (gm_view), or else a value staged row-major first. The dot's contracting and
 * rhs-free dimensions must merge into one strided dimension each and the lhs-free ones merge
 * as far as they can (the rest are looped like batch dimensions); a convolution needs two
 * spatial dimensions, no grouping, base dilation or reversal, a kernel whose (kh, kw, ci)
 * flatten and an output with the feature dimension minor. The result, GmProb, is plain data
 * that the planning and every kernel read. Dots also take operands of bf16 or f16 (both of one
 * type: mixed ones go to the elemental kernels), with a result of that type or f32 (XLA's
 * preferred_element_type), summed in f32 either way; convolutions stay f32. */
#include "gemm_impl.h"

void gm_rowmajor(const Shape *s, int64_t *st) { hlo_shape_strides(s, st); }

static bool gm_view(const CpuCg *cg, const HInstr *fusion, const HInstr *v, GmView *out,
                    int depth) {
  if (depth > 32 || !gm_elt_ok(v->shape.dt) || v->shape.rank > HLO_MAX_RANK) return false;
  if (v->parent == cg->g.entry) {
    if (v->shape.dt == DT_TUPLE) return false;
    *out = (GmView){v, false, -1, 0, {0}, gm_elt(v->shape.dt)};
    gm_rowmajor(&v->shape, out->st);
    return true;
  }
  if (!fusion || v->parent != fusion->calls[0]) return false;
  GmView o;
  const Shape *s = &v->shape;
  /* the few ops that only re-index (an if chain: every other op is not a view) */
  if (v->op == OP_PARAMETER) {
    if (v->param_num < 0 || v->param_num >= fusion->nops) return false;
    return gm_view(cg, fusion, fusion->ops[v->param_num], out, depth + 1);
  }
  if (v->op == OP_CONSTANT) {
    if (!v->literal || s->rank == 0) return false;
    *out = (GmView){v, true, -1, 0, {0}, gm_elt(v->shape.dt)};
    gm_rowmajor(s, out->st);
    return true;
  }
  if (v->op == OP_COPY) return gm_view(cg, fusion, v->ops[0], out, depth + 1);
  if (v->op == OP_TRANSPOSE) {
    if (!gm_view(cg, fusion, v->ops[0], &o, depth + 1)) return false;
    *out = o;
    for (int j = 0; j < s->rank; j++)
      out->st[j] = o.st[v->dims.v[j]];
    return true;
  }
  if (v->op == OP_BROADCAST) {
    if (!gm_view(cg, fusion, v->ops[0], &o, depth + 1)) return false;
    *out = o;
    for (int d = 0; d < s->rank; d++)
      out->st[d] = 0;
    for (int j = 0; j < v->dims.n; j++)
      out->st[v->dims.v[j]] = o.st[j];
    return true;
  }
  if (v->op == OP_SLICE) {
    if (!gm_view(cg, fusion, v->ops[0], &o, depth + 1)) return false;
    *out = o;
    for (int d = 0; d < s->rank; d++) {
      out->off += v->slice->start[d] * o.st[d];
      out->st[d] = o.st[d] * v->slice->stride[d];
    }
    return true;
  }
  if (v->op == OP_RESHAPE || v->op == OP_BITCAST) {
    if (!gm_view(cg, fusion, v->ops[0], &o, depth + 1)) return false;
    const Shape *os = &v->ops[0]->shape;
    int64_t rm[HLO_MAX_RANK];
    gm_rowmajor(os, rm);
    bool contiguous = true;
    for (int d = 0; d < os->rank; d++)
      contiguous = contiguous && (os->dims[d] == 1 || o.st[d] == rm[d]);
    *out = o;
    if (contiguous) {
      gm_rowmajor(s, out->st);
      return true;
    }
    /* only size-1 dimensions added or removed */
    int a = 0, b = 0;
    while (a < s->rank || b < os->rank) {
      if (a < s->rank && s->dims[a] == 1) {
        out->st[a++] = 0;
        continue;
      }
      if (b < os->rank && os->dims[b] == 1) {
        b++;
        continue;
      }
      if (a < s->rank && b < os->rank && s->dims[a] == os->dims[b]) {
        out->st[a++] = o.st[b++];
        continue;
      }
      return false;
    }
    return true;
  }
  return false;
}

/* An operand: a view, or (inside a fusion) a value to stage first (staged == -2, base the
 * fused instruction, row-major strides). */
static bool gm_operand(const CpuCg *cg, const HInstr *fusion, const HInstr *v, bool stage,
                       GmView *out) {
  if (!stage && gm_view(cg, fusion, v, out, 0)) return true;
  if (!gm_elt_ok(v->shape.dt) ||
      !(v->parent == cg->g.entry || (fusion && v->parent == fusion->calls[0])))
    return false;
  *out = (GmView){v, false, -2, 0, {0}, gm_elt(v->shape.dt)};
  gm_rowmajor(&v->shape, out->st);
  return true;
}

/* Merge dims list[0..n) of a view (sizes from ext) into one strided dimension: the stride of
 * the last one, when each stride is the next one's times its extent. */
static bool gm_merge(const int64_t *st, const int64_t *ext, const int64_t *list, int n,
                     int64_t *stride) {
  int64_t keep[HLO_MAX_RANK];
  int nk = 0;
  for (int j = 0; j < n; j++)
    if (ext[list[j]] != 1) keep[nk++] = list[j];
  *stride = nk ? st[keep[nk - 1]] : 0;
  for (int j = 0; j + 1 < nk; j++)
    if (st[keep[j]] != st[keep[j + 1]] * ext[keep[j + 1]]) return false;
  return true;
}

LLVMValueRef gm_view_ptr(GenKern *k, const GmView *v) {
  LLVMValueRef p =
      v->staged >= 0
          ? cpu_slot(k, (CpuSlot){CPU_SLOT_TEMP, NULL, NULL, cpu_cg(k->cg)->temp_base + v->staged})
      : v->global ? cpu_const_ptr(k, v->base)
                  : cpu_buffer(k, v->base);
  if (v->off == 0) return p;
  LLVMBasicBlockRef cur = LLVMGetInsertBlock(k->B);
  LLVMPositionBuilderBefore(k->B, k->entry_br);
  p = gep_e(k, v->et, p, gi(k, v->off));
  LLVMPositionBuilderAtEnd(k->B, cur);
  return p;
}

bool gm_dot_prob(CpuCg *cg, const HInstr *fusion, const HInstr *dot, int stage, GmProb *p) {
  const DotDims *dd = dot->dot;
  const HInstr *l = dot->ops[0], *r = dot->ops[1];
  DType dt = l->shape.dt;
  /* floats: the operands' type or f32 out; s8: s32 out (GmElt) */
  if (!gm_elt_ok(dt) || r->shape.dt != dt ||
      (dt == DT_S8 ? dot->shape.dt != DT_S32 : dot->shape.dt != dt && dot->shape.dt != DT_F32))
    return false;
  p->et = gm_elt(dt);
  p->cdt = dot->shape.dt;
  if (!gm_operand(cg, fusion, l, stage & 1, &p->a) || !gm_operand(cg, fusion, r, stage & 2, &p->b))
    return false;
  const Shape *ls = &l->shape, *rs = &r->shape, *os = &dot->shape;
  int64_t ost[HLO_MAX_RANK];
  gm_rowmajor(os, ost);
  int64_t lf[HLO_MAX_RANK], rf[HLO_MAX_RANK];
  int nlf = 0, nrf = 0;
  for (int d = 0; d < ls->rank; d++)
    if (!hlo_ilist_has(&dd->lhs_batch, d) && !hlo_ilist_has(&dd->lhs_contract, d)) lf[nlf++] = d;
  for (int d = 0; d < rs->rank; d++)
    if (!hlo_ilist_has(&dd->rhs_batch, d) && !hlo_ilist_has(&dd->rhs_contract, d)) rf[nrf++] = d;
  /* K */
  int nc = dd->lhs_contract.n;
  if (!gm_merge(p->a.st, ls->dims, dd->lhs_contract.v, nc, &p->acs)) return false;
  if (!gm_merge(p->b.st, rs->dims, dd->rhs_contract.v, nc, &p->brs)) return false;
  p->K = 1;
  for (int j = 0; j < nc; j++)
    p->K *= ls->dims[dd->lhs_contract.v[j]];
  /* N */
  if (!gm_merge(p->b.st, rs->dims, rf, nrf, &p->bcs)) return false;
  p->N = 1;
  for (int j = 0; j < nrf; j++)
    p->N *= rs->dims[rf[j]];
  int nb = dd->lhs_batch.n;
  p->ndim0 = nb + nlf;
  p->nn = nrf;
  p->ldc = p->N;
  /* M: the longest mergeable suffix of the lhs free dims */
  int first = nlf;
  while (first > 0 && gm_merge(p->a.st, ls->dims, lf + first - 1, nlf - first + 1, &p->ars))
    first--;
  if (!gm_merge(p->a.st, ls->dims, lf + first, nlf - first, &p->ars)) return false;
  p->M = 1;
  for (int j = first; j < nlf; j++)
    p->M *= ls->dims[lf[j]];
  p->mdim0 = nb + first;
  p->nm = nlf - first;
  p->nloop = 0;
  for (int j = 0; j < nb; j++) {
    int q = p->nloop++;
    p->lext[q] = ls->dims[dd->lhs_batch.v[j]];
    p->lsa[q] = p->a.st[dd->lhs_batch.v[j]];
    p->lsb[q] = p->b.st[dd->rhs_batch.v[j]];
    p->lsc[q] = ost[j];
    p->lout[q] = j;
  }
  for (int j = 0; j < first; j++) {
    int q = p->nloop++;
    p->lext[q] = ls->dims[lf[j]];
    p->lsa[q] = p->a.st[lf[j]];
    p->lsb[q] = 0;
    p->lsc[q] = ost[nb + j];
    p->lout[q] = nb + j;
  }
  p->conv = false;
  return true;
}

bool gm_conv_prob(CpuCg *cg, const HInstr *fusion, const HInstr *cv, int stage, bool wino,
                  GmProb *p) {
  const ConvDims *cd = cv->conv;
  const HInstr *x = cv->ops[0], *w = cv->ops[1];
  /* f32, or 16-bit operands (widened as packed) with their own or an f32 result */
  DType dt = x->shape.dt;
  if (!gm_elt_ok(dt) || dt == DT_S8 || w->shape.dt != dt ||
      (cv->shape.dt != dt && cv->shape.dt != DT_F32))
    return false;
  p->et = gm_elt(dt);
  p->cdt = cv->shape.dt;
  if (cd->in_sp.n != 2 || cv->feature_groups != 1 || cv->batch_groups != 1) return false;
  for (int j = 0; j < 2; j++) {
    const WinDim *wd = &cv->window->d[j];
    if (wd->base_dil != 1 || wd->reversal || wd->pad_lo < 0 || wd->pad_hi < 0) return false;
  }
  if (!gm_operand(cg, fusion, x, stage & 1, &p->a) || !gm_operand(cg, fusion, w, stage & 2, &p->b))
    return false;
  /* an input whose channels are not contiguous (NCHW seen as NHWC) is read in place: the
     packer's runs step through channels with their stride, its MR rows (neighbouring
     pixels) sharing cache lines; cheaper than a staged copy of the whole input */
  const Shape *xs = &x->shape, *ws = &w->shape, *os = &cv->shape;
  int64_t ost[HLO_MAX_RANK];
  gm_rowmajor(os, ost);
  int64_t CI = ws->dims[cd->k_in], CO = ws->dims[cd->k_out];
  int64_t KH = ws->dims[cd->k_sp.v[0]], KW = ws->dims[cd->k_sp.v[1]];
  /* B = weights as [(kh, kw, ci), co]: strides must flatten */
  int64_t kl[3] = {cd->k_sp.v[0], cd->k_sp.v[1], cd->k_in};
  for (int j = 0; j < 3; j++)
    p->wk[j] = p->b.st[kl[j]];
  p->wk[3] = p->b.st[cd->k_out];
  /* (Winograd reads the taps through their own strides: OIHW weights need no staging) */
  p->wino = wino;
  if (!gm_merge(p->b.st, ws->dims, kl, 3, &p->brs) && !wino) return false;
  p->bcs = p->b.st[cd->k_out];
  /* C: feature minor with unit stride, (oh, ow) flatten */
  if (ost[cd->out_feat] != 1) return false;
  int64_t ol[2] = {cd->out_sp.v[0], cd->out_sp.v[1]};
  int64_t OH = os->dims[ol[0]], OW = os->dims[ol[1]];
  if ((OW != 1 && ost[ol[1]] != CO) || (OH != 1 && ost[ol[0]] != OW * CO)) return false;
  int64_t NB = os->dims[cd->out_batch];
  p->M = OH * OW;
  p->N = CO;
  p->K = KH * KW * CI;
  p->ldc = CO;
  p->ars = p->acs = 0;
  p->mdim0 = (int)ol[0];
  p->nm = 2;
  p->ndim0 = (int)cd->out_feat;
  p->nn = 1;
  p->conv = true;
  /* rows span the batch when the output is [batch, oh, ow, feature] row-major: one GEMM
     over all images packs the kernel once (a weight-gradient convolution has a few output
     pixels per "image" and a huge K); else the batch is a loop */
  bool merge = cd->out_batch + 1 == ol[0] && ol[0] + 1 == ol[1] &&
               (NB == 1 || ost[cd->out_batch] == OH * OW * CO);
  if (merge) {
    p->M = NB * OH * OW;
    p->mdim0 = (int)cd->out_batch;
    p->nm = 3;
    p->nloop = 0;
  } else {
    p->nloop = 1;
    p->lext[0] = NB;
    p->lsa[0] = p->a.st[cd->in_batch];
    p->lsb[0] = 0;
    p->lsc[0] = ost[cd->out_batch];
    p->lout[0] = (int)cd->out_batch;
  }
  int64_t g[GC_COUNT] = {[GC_OW] = os->dims[ol[1]],
                         [GC_H] = xs->dims[cd->in_sp.v[0]],
                         [GC_W] = xs->dims[cd->in_sp.v[1]],
                         [GC_CI] = CI,
                         [GC_KW] = KW,
                         [GC_SH] = cv->window->d[0].stride,
                         [GC_SW] = cv->window->d[1].stride,
                         [GC_DH] = cv->window->d[0].win_dil,
                         [GC_DW] = cv->window->d[1].win_dil,
                         [GC_PH] = cv->window->d[0].pad_lo,
                         [GC_PW] = cv->window->d[1].pad_lo,
                         [GC_XSH] = p->a.st[cd->in_sp.v[0]],
                         [GC_XSW] = p->a.st[cd->in_sp.v[1]],
                         [GC_XSC] = p->a.st[cd->in_feat],
                         [GC_OHW] = OH * OW,
                         [GC_XSB] = merge ? p->a.st[cd->in_batch] : 0};
  memcpy(p->geo, g, sizeof g);
  /* the output dims must be exactly batch, (oh, ow) merged, feature: others have extent 1 */
  for (int d = 0; d < os->rank; d++)
    if (d != cd->out_batch && d != cd->out_feat && d != ol[0] && d != ol[1] && os->dims[d] != 1)
      return false;
  return true;
}
