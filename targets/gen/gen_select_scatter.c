/* targets/gen/gen_select_scatter.c: the pieces of select-and-scatter both targets share.
 *
 * XLA's select-and-scatter (the gradient of max/min pooling) scans, for each source element,
 * the operand's window of that source position in row-major window order, keeping the
 * current candidate while select(candidate, tap) holds (padding taps and taps between
 * base-dilated elements are never selected), then scatters the source into the selected
 * element. The CPU kernel walks the sources and scatters (targets/cpu/cpu_select_scatter.c);
 * the GPU gathers per output element (targets/cuda/cuda_select_scatter.c); both check the form
 * here and run the same window scan. */
#include "gen.h"

static LLVMValueRef gs_and(GenKern *k, LLVMValueRef a, LLVMValueRef b) {
  return a ? LLVMBuildAnd(k->B, a, b, "") : b;
}

int gen_sas_open(GenKern *k, const int64_t *dims, int rank, int split, LLVMValueRef chunk,
                 int64_t csize, GenLoop *loops, LLVMValueRef *idx) {
  LLVMBuilderRef B = k->B;
  int nl = 0;
  for (int d = 0; d < rank; d++) {
    if (d == split) {
      LLVMValueRef lo = LLVMBuildNSWMul(B, chunk, gen_i64(k, csize), "");
      LLVMValueRef hi = LLVMBuildNSWAdd(B, lo, gen_i64(k, csize), "");
      LLVMValueRef D = gen_i64(k, dims[d]);
      hi = gen_smin(k, hi, D);
      idx[d] = gen_loop_open(k, &loops[nl++], lo, hi);
    } else if (dims[d] == 1) {
      idx[d] = gen_i64(k, 0);
    } else {
      idx[d] = gen_loop_open(k, &loops[nl++], gen_i64(k, 0), gen_i64(k, dims[d]));
    }
  }
  return nl;
}

void gen_sas_close(GenKern *k, GenLoop *loops, int nl) {
  for (int j = nl - 1; j >= 0; j--)
    gen_loop_close(k, &loops[j]);
}

bool gen_sas_check(const HInstr *in, const MemPlan *p, HErr *err, const char *target) {
  if (in->nops != 3 || in->ncalls != 2 || !in->calls[0] || !in->calls[1] ||
      (!in->window && in->ops[0]->shape.rank != 0)) {
    hlo_err_at(err, in,
               "%s target: select-and-scatter needs 3 operands, a window, select and scatter",
               target);
    return false;
  }
  const Shape *xs = &in->ops[0]->shape, *ss = &in->ops[1]->shape, *is = &in->ops[2]->shape;
  if (!hlo_shape_is_array(&in->shape) || !hlo_shape_is_array(xs) || !hlo_shape_is_array(ss) ||
      !hlo_shape_is_array(is) || is->rank != 0 || !hlo_shape_same_dims(&in->shape, xs) ||
      ss->rank != xs->rank || (in->window && in->window->n != xs->rank) || xs->dt != in->shape.dt ||
      ss->dt != in->shape.dt || is->dt != in->shape.dt) {
    hlo_err_at(err, in,
               "%s target: select-and-scatter operand, source, init and result do not match",
               target);
    return false;
  }
  for (int d = 0; d < xs->rank; d++) {
    const WinDim *w = &in->window->d[d];
    if (w->size < 0 || w->stride < 1 || w->win_dil < 1 || w->base_dil < 1) {
      hlo_err_at(err, in, "%s target: select-and-scatter window dimension %d is invalid", target,
                 d);
      return false;
    }
  }
  int self = memplan_base(p, in->idx, NULL);
  for (int o = 0; o < 3; o++)
    if (memplan_base(p, in->ops[o]->idx, NULL) == self) {
      hlo_err_at(err, in,
                 "%s target: select-and-scatter result planned in the buffer of operand %d", target,
                 o);
      return false;
    }
  return true;
}

bool gen_sas_select(GenKern *k, const HInstr *in, const LLVMValueRef *sidx, LLVMValueRef have_a,
                    LLVMValueRef val_a, const LLVMValueRef *sel_a, const char *target) {
  GenCg *cg = k->cg;
  LLVMBuilderRef B = k->B;
  const HInstr *x = in->ops[0];
  const Shape *xs = &x->shape, *ss = &in->ops[1]->shape;
  const Window *win = in->window;
  int rank = xs->rank;
  LLVMTypeRef vt = gen_reg_type(cg, xs->dt);
  GenLoop wloops[HLO_MAX_RANK];
  LLVMValueRef widx[HLO_MAX_RANK], pidx[HLO_MAX_RANK];
  LLVMBuildStore(B, LLVMConstInt(cg->i1, 0, 0), have_a);
  int64_t wdims[HLO_MAX_RANK] = {0};
  for (int d = 0; d < rank; d++)
    wdims[d] = win->d[d].size;
  int nw = gen_sas_open(k, wdims, rank, -1, NULL, 0, wloops, widx);

  /* operand position of the tap, and whether it is a real element */
  LLVMValueRef ok = NULL;
  for (int d = 0; d < rank; d++) {
    const WinDim *w = &win->d[d];
    int64_t D = xs->dims[d];
    LLVMValueRef p = LLVMBuildNSWMul(B, sidx[d], gen_i64(k, w->stride), "");
    if (w->size > 1)
      p = LLVMBuildNSWAdd(B, p, LLVMBuildNSWMul(B, widx[d], gen_i64(k, w->win_dil), ""), "");
    if (w->pad_lo) p = LLVMBuildNSWSub(B, p, gen_i64(k, w->pad_lo), "");
    if (w->base_dil > 1) {
      LLVMValueRef nonneg = LLVMBuildICmp(B, LLVMIntSGE, p, gen_i64(k, 0), "");
      LLVMValueRef pc = LLVMBuildSelect(B, nonneg, p, gen_i64(k, 0), "");
      LLVMValueRef bd = gen_i64(k, w->base_dil);
      ok = gs_and(k, ok, nonneg);
      LLVMValueRef rem = LLVMBuildURem(B, pc, bd, "");
      ok = gs_and(k, ok, LLVMBuildICmp(B, LLVMIntEQ, rem, gen_i64(k, 0), ""));
      p = LLVMBuildUDiv(B, pc, bd, "");
      ok = gs_and(k, ok, LLVMBuildICmp(B, LLVMIntSLT, p, gen_i64(k, D), ""));
    } else {
      int64_t pmin = -w->pad_lo;
      int64_t pmax = (ss->dims[d] - 1) * w->stride - w->pad_lo + (w->size - 1) * w->win_dil;
      if (pmin < 0 || pmax >= D) /* unsigned: also rejects negative positions */
        ok = gs_and(k, ok, LLVMBuildICmp(B, LLVMIntULT, p, gen_i64(k, D), ""));
    }
    pidx[d] = p;
  }
  LLVMBasicBlockRef tapb = LLVMAppendBasicBlockInContext(cg->C, k->fn, "sas_tap");
  LLVMBasicBlockRef cmpb = LLVMAppendBasicBlockInContext(cg->C, k->fn, "sas_select");
  LLVMBasicBlockRef takeb = LLVMAppendBasicBlockInContext(cg->C, k->fn, "sas_take");
  LLVMBasicBlockRef nextb = LLVMAppendBasicBlockInContext(cg->C, k->fn, "sas_next");
  LLVMBuildCondBr(B, ok ? ok : LLVMConstInt(cg->i1, 1, 0), tapb, nextb);

  /* a real tap: taken when there is no candidate yet or select(candidate, tap) is false */
  LLVMPositionBuilderAtEnd(B, tapb);
  int mark = k->ncache;
  LLVMValueRef v = gen_value(k, x, pidx);
  LLVMValueRef have = LLVMBuildLoad2(B, cg->i1, have_a, "");
  LLVMBuildCondBr(B, have, cmpb, takeb);
  LLVMPositionBuilderAtEnd(B, cmpb);
  LLVMValueRef args[2] = {LLVMBuildLoad2(B, vt, val_a, ""), v}, res[1] = {NULL};
  if (v && gen_scalar_comp(k, in->calls[0], args, 2, res) && LLVMTypeOf(res[0]) != cg->i1) {
    hlo_err_at(cg->err, in, "%s target: select-and-scatter select computation does not return pred",
               target);
    k->failed = true;
  }
  LLVMBuildCondBr(B, res[0] && !k->failed ? res[0] : LLVMConstInt(cg->i1, 1, 0), nextb, takeb);
  LLVMPositionBuilderAtEnd(B, takeb);
  LLVMBuildStore(B, LLVMConstInt(cg->i1, 1, 0), have_a);
  if (v) LLVMBuildStore(B, v, val_a);
  for (int d = 0; d < rank; d++)
    LLVMBuildStore(B, pidx[d], sel_a[d]);
  LLVMBuildBr(B, nextb);
  LLVMPositionBuilderAtEnd(B, nextb);
  k->ncache = mark; /* values of the tap block do not dominate the rest */
  gen_sas_close(k, wloops, nw);

  return !k->failed;
}
