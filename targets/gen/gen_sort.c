/* targets/gen/gen_sort.c: the pieces of a sort kernel both targets share.
 *
 * XLA's sort orders one or more operands of equal dimensions together along one dimension by
 * a comparator computation of 2n scalars (lhs0, rhs0, lhs1, rhs1, ...) answering "lhs sorts
 * before rhs". The CPU's merge sort (targets/cpu/cpu_sort.c) and the GPU's bitonic network
 * (targets/cuda/cuda_sort.c) differ in everything but this: the form they take (checked
 * against the memory plan, which must keep the result apart from the operands), the
 * operands' values at a position, and the comparator generated inline on two positions. */
#include "gen.h"

bool gen_sort_check(const HInstr *in, const MemPlan *p, HErr *err, const char *target) {
  int n = in->nops;
  if (n < 1 || n > GEN_SORT_MAX_OPS || in->ncalls != 1 || in->dims.n != 1) {
    hlo_err_at(err, in, "%s target: sort needs 1 to %d operands, one dimension and a comparator",
               target, GEN_SORT_MAX_OPS);
    return false;
  }
  const Shape *xs = &in->ops[0]->shape;
  int64_t dim = in->dims.v[0];
  if (!hlo_shape_is_array(xs) || dim < 0 || dim >= xs->rank) {
    hlo_err_at(err, in, "%s target: sort dimension %lld is invalid", target, (long long)dim);
    return false;
  }
  for (int o = 0; o < n; o++) {
    const Shape *want = n == 1                                              ? &in->shape
                        : in->shape.dt == DT_TUPLE && in->shape.ntuple == n ? &in->shape.tuple[o]
                                                                            : NULL;
    const Shape *os = &in->ops[o]->shape;
    if (!want || !hlo_shape_is_array(want) || !hlo_shape_is_array(os) || want->dt != os->dt ||
        !hlo_shape_same_dims(want, xs) || !hlo_shape_same_dims(os, xs)) {
      hlo_err_at(err, in, "%s target: sort operand %d does not match the result", target, o);
      return false;
    }
  }
  int self = memplan_base(p, in->idx, NULL);
  for (int o = 0; o < n; o++)
    if (memplan_base(p, in->ops[o]->idx, NULL) == self) {
      hlo_err_at(err, in, "%s target: sort result planned in the buffer of operand %d", target, o);
      return false;
    }
  return true;
}

bool gen_sort_values(GenKern *k, const HInstr *in, LLVMValueRef *idx, LLVMValueRef *vals) {
  for (int o = 0; o < in->nops; o++)
    if (!(vals[o] = gen_value(k, in->ops[o], idx))) return false;
  return true;
}

LLVMValueRef gen_sort_compare(GenKern *k, const HInstr *in, const LLVMValueRef *lhs,
                              const LLVMValueRef *rhs, const char *target) {
  LLVMValueRef args[2 * GEN_SORT_MAX_OPS], res[1] = {NULL};
  for (int o = 0; o < in->nops; o++)
    args[2 * o] = lhs[o], args[2 * o + 1] = rhs[o];
  if (!gen_scalar_comp(k, in->calls[0], args, 2 * in->nops, res)) return NULL;
  if (LLVMTypeOf(res[0]) != k->cg->i1) {
    hlo_err_at(k->cg->err, in, "%s target: sort comparator does not return pred", target);
    k->failed = true;
    return NULL;
  }
  return res[0];
}
