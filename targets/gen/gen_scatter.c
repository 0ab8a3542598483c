/* targets/gen/gen_scatter.c: the pieces of a scatter kernel both targets share.
 *
 * XLA's scatter (variadic too: N operands, indices, N updates) combines every update
 * element into the output element its index selects, with XLA's rules: the update's window
 * dims map to the operand's non-inserted, non-batching dims, the start index comes from the
 * indices operand along index_vector_dim, and an update whose window does not fit entirely
 * is skipped. The targets own the loop over the updates (serial on both, since XLA's order
 * of updates is sequential); these functions give the form check, the output index of an
 * update element with its validity, and the combination through the scatter computation. */
#include "gen.h"

/* Variadic scatter's operand count N (1 for a plain one), or 0 when in's operands and result
 * do not have the form N operands, indices, N updates -> an array (N = 1) or an N-tuple. */
int gen_scatter_n(const HInstr *in) {
  int n = (in->nops - 1) / 2;
  if (in->nops < 3 || in->nops % 2 == 0 || n > 16 || (n > 1) != (in->shape.dt == DT_TUPLE) ||
      (n > 1 && in->shape.ntuple != n))
    return 0;
  return n;
}

int gen_scatter_check(const HInstr *in, HErr *err, const char *target) {
  int n = gen_scatter_n(in);
  if (!n)
    hlo_err_at(err, in, "%s target: scatter with %d operands and result %s is not supported",
               target, in->nops, in->shape.dt == DT_TUPLE ? "a tuple" : "an array");
  return n;
}

bool gen_scatter_update(GenKern *k, const HInstr *in, LLVMValueRef *ui, LLVMValueRef *oi,
                        LLVMValueRef *ok) {
  LLVMBuilderRef B = k->B;
  int n = gen_scatter_n(in);
  const ScatterDims *sd = in->scatter;
  const HInstr *ind = in->ops[n];
  const Shape *s = n > 1 ? &in->shape.tuple[0] : &in->shape, *is = &ind->shape,
              *us = &in->ops[n + 1]->shape;
  LLVMValueRef sidx[HLO_MAX_RANK]; /* the update's scatter (non-window) dims, in order */
  int ns = 0;
  for (int d = 0; d < us->rank; d++)
    if (!hlo_ilist_has(&sd->update_window_dims, d)) sidx[ns++] = ui[d];
  int64_t ivd = sd->index_vector_dim;
  LLVMValueRef start[HLO_MAX_RANK];
  for (int d = 0; d < s->rank; d++)
    start[d] = gen_i64(k, 0);
  for (int c = 0; c < sd->scatter_dims_to_operand_dims.n; c++) {
    LLVMValueRef ii[HLO_MAX_RANK];
    int b = 0;
    for (int d = 0; d < is->rank; d++)
      ii[d] = d == ivd ? gen_i64(k, c) : sidx[b++];
    LLVMValueRef sv = gen_value(k, ind, ii);
    if (!sv) return false;
    start[sd->scatter_dims_to_operand_dims.v[c]] = gen_convert(k, sv, is->dt, DT_S64);
  }
  for (int j = 0; j < sd->input_batching_dims.n; j++) {
    int64_t id = sd->scatter_indices_batching_dims.v[j];
    int pos = (int)(id < ivd || ivd >= is->rank ? id : id - 1);
    start[sd->input_batching_dims.v[j]] = sidx[pos];
  }
  LLVMValueRef all = LLVMConstInt(k->cg->i1, 1, 0);
  int w = 0;
  for (int d = 0; d < s->rank; d++) {
    int64_t wsize = 1;
    oi[d] = start[d];
    if (!hlo_ilist_has(&sd->inserted_window_dims, d) &&
        !hlo_ilist_has(&sd->input_batching_dims, d)) {
      int64_t ud = sd->update_window_dims.v[w++];
      wsize = us->dims[ud];
      oi[d] = LLVMBuildNSWAdd(B, start[d], ui[ud], "");
    }
    /* XLA skips an update whose window does not fit entirely */
    all = LLVMBuildAnd(B, all, LLVMBuildICmp(B, LLVMIntSGE, start[d], gen_i64(k, 0), ""), "");
    all = LLVMBuildAnd(
        B, all, LLVMBuildICmp(B, LLVMIntSLE, start[d], gen_i64(k, s->dims[d] - wsize), ""), "");
  }
  *ok = all;
  return true;
}

void gen_scatter_combine(GenKern *k, const HInstr *in, const LLVMValueRef *out, LLVMValueRef *oi,
                         LLVMValueRef *ui) {
  int n = gen_scatter_n(in);
  LLVMValueRef args[32], res[16];
  for (int j = 0; j < n; j++) {
    const Shape *os = n > 1 ? &in->shape.tuple[j] : &in->shape;
    args[j] = gen_load_elem(k, out[j], os, oi);
    args[n + j] = gen_value(k, in->ops[n + 1 + j], ui);
    if (!args[n + j]) return;
  }
  if (!gen_scalar_comp(k, in->calls[0], args, 2 * n, res)) return;
  for (int j = 0; j < n; j++)
    gen_store_elem(k, out[j], n > 1 ? &in->shape.tuple[j] : &in->shape, oi, res[j]);
}
