/* targets/cpu/cpu_sort.c: the kernel of a sort instruction.
 *
 * XLA's sort orders one or more operands of equal dimensions together along one dimension,
 * by a comparator computation of 2n scalars (lhs0, rhs0, lhs1, rhs1, ...) answering
 * "lhs sorts before rhs". A lone sort instruction of the entry computation becomes one
 * kernel (the fusion pass never fuses a sort, and a sort reached inside a fusion stays a
 * located error of the elemental generator). Every "row" (each index of the other
 * dimensions) is sorted on its own: an i64 permutation of the row, 0..len-1, is sorted by a
 * bottom-up merge sort ping-ponging between two index buffers (runs of width 1, 2, 4, ...;
 * O(len log len) comparator calls), where the merge takes from the right run only when
 * comparator(right, left) holds, so equal elements keep their order: the sort is stable by
 * construction and is_stable needs no special case. The comparator is generated inline
 * (cpu_gen_scalar_comp) on the operands' elements at the two positions. Then every operand's
 * row is gathered through the permutation into the result (its tuple leaves for several
 * operands). The permutation buffers are kernel-private scratch appended to the plan's heap
 * (cg->extra_temp, at cg->temp_base), 2 * len * 8 bytes per chunk. Rows are independent:
 * with enough elements (par_min_elems, as the other kernels) the linear row range is split
 * into up to 64 chunks of the parallel-for, each with its own scratch slice (fewer chunks
 * when the slices would pass 64 MiB). The result never shares a buffer with what the kernel
 * reads: the memory plan computes in place only for elementwise readers (a sort is not one)
 * and moves a result aliased to a parameter it reads into scratch; the kernel checks the
 * plan anyway. NaN ordering is the comparator's business. */
#include "cpu_impl.h"

#include <string.h>

/* i64 element ix of the index buffer p. */
static LLVMValueRef cpu_sort_ld(CpuKern *k, LLVMValueRef p, LLVMValueRef ix) {
  LLVMValueRef q = LLVMBuildInBoundsGEP2(k->B, k->cg->i64, p, &ix, 1, "");
  LLVMValueRef v = LLVMBuildLoad2(k->B, k->cg->i64, q, "");
  LLVMSetAlignment(v, 8);
  return v;
}

static void cpu_sort_st(CpuKern *k, LLVMValueRef p, LLVMValueRef ix, LLVMValueRef v) {
  LLVMValueRef q = LLVMBuildInBoundsGEP2(k->B, k->cg->i64, p, &ix, 1, "");
  LLVMSetAlignment(LLVMBuildStore(k->B, v, q), 8);
}

bool cpu_sort_check(CpuCg *cg, const HInstr *in, const char *target) {
  int n = in->nops;
  if (n < 1 || n > CPU_SORT_MAX_OPS || in->ncalls != 1 || in->dims.n != 1) {
    hlo_err_at(cg->err, in,
               "%s target: sort needs 1 to %d operands, one dimension and a comparator", target,
               CPU_SORT_MAX_OPS);
    return false;
  }
  const Shape *xs = &in->ops[0]->shape;
  int64_t dim = in->dims.v[0];
  if (!hlo_shape_is_array(xs) || dim < 0 || dim >= xs->rank) {
    hlo_err_at(cg->err, in, "%s target: sort dimension %lld is invalid", target, (long long)dim);
    return false;
  }
  for (int o = 0; o < n; o++) {
    const Shape *want = n == 1                                              ? &in->shape
                        : in->shape.dt == DT_TUPLE && in->shape.ntuple == n ? &in->shape.tuple[o]
                                                                            : NULL;
    const Shape *os = &in->ops[o]->shape;
    if (!want || !hlo_shape_is_array(want) || !hlo_shape_is_array(os) || want->dt != os->dt ||
        !hlo_shape_same_dims(want, xs) || !hlo_shape_same_dims(os, xs)) {
      hlo_err_at(cg->err, in, "%s target: sort operand %d does not match the result", target, o);
      return false;
    }
  }
  const MemPlan *p = &cg->plan;
  int self = memplan_base(p, in->idx, NULL);
  for (int o = 0; o < n; o++)
    if (memplan_base(p, in->ops[o]->idx, NULL) == self) {
      hlo_err_at(cg->err, in, "%s target: sort result planned in the buffer of operand %d", target,
                 o);
      return false;
    }
  return true;
}

bool cpu_sort_values(CpuKern *k, const HInstr *in, LLVMValueRef *idx, LLVMValueRef *vals) {
  for (int o = 0; o < in->nops; o++)
    if (!(vals[o] = cpu_gen(k, in->ops[o], idx))) return false;
  return true;
}

LLVMValueRef cpu_sort_compare(CpuKern *k, const HInstr *in, const LLVMValueRef *lhs,
                              const LLVMValueRef *rhs, const char *target) {
  LLVMValueRef args[2 * CPU_SORT_MAX_OPS], res[1] = {NULL};
  for (int o = 0; o < in->nops; o++)
    args[2 * o] = lhs[o], args[2 * o + 1] = rhs[o];
  if (!cpu_gen_scalar_comp(k, in->calls[0], args, 2 * in->nops, res)) return NULL;
  if (LLVMTypeOf(res[0]) != k->cg->i1) {
    hlo_err_at(k->cg->err, in, "%s target: sort comparator does not return pred", target);
    k->failed = true;
    return NULL;
  }
  return res[0];
}

bool cpu_sort_kernel(CpuCg *cg, HInstr *in) {
  if (!cpu_sort_check(cg, in, "CPU")) return false;
  int n = in->nops;
  const Shape *xs = &in->ops[0]->shape;
  int dim = (int)in->dims.v[0];
  int64_t len = xs->dims[dim], total = hlo_shape_elems(xs);
  if (total == 0) return true;
  int64_t rows = total / len;

  /* chunks of the row range, each with 2 * len i64 of scratch */
  int64_t slice = 2 * len * 8;
  int64_t min = cg->o->par_min_elems > 0 ? cg->o->par_min_elems : 32768;
  int64_t P = 1;
  if (total >= min && rows > 1) {
    P = rows < 64 ? rows : 64;
    while (P > 1 && P * slice > ((int64_t)64 << 20))
      P /= 2;
  }
  int64_t csize = (rows + P - 1) / P;
  P = (rows + csize - 1) / csize;
  if (P * slice > cg->extra_temp) cg->extra_temp = P * slice;

  CpuKern *k = cpu_kern_begin(cg, in);
  LLVMBuilderRef B = k->B;
  LLVMTypeRef i64 = cg->i64;

  /* output leaves (entry block) */
  LLVMValueRef out[CPU_SORT_MAX_OPS];
  LLVMValueRef base = cpu_buffer(k, in);
  LLVMBasicBlockRef cur = LLVMGetInsertBlock(B);
  LLVMPositionBuilderBefore(B, k->entry_br);
  for (int o = 0; o < n; o++) {
    int64_t off = n == 1 ? 0 : memplan_tuple_offset(&in->shape, o);
    LLVMValueRef ix = cpu_i64(k, off);
    out[o] = off ? LLVMBuildInBoundsGEP2(B, cg->i8, base, &ix, 1, "") : base;
  }
  LLVMPositionBuilderAtEnd(B, cur);
  const Shape *ls = n == 1 ? &in->shape : &in->shape.tuple[0];

  /* this chunk's scratch: perm (A) and its twin (B) */
  LLVMValueRef scratch = cpu_slot(k, (CpuSlot){CPU_SLOT_TEMP, NULL, NULL, cg->temp_base});
  LLVMValueRef soff = LLVMBuildNSWMul(B, k->chunk, cpu_i64(k, slice), "");
  LLVMValueRef bufa = LLVMBuildInBoundsGEP2(B, cg->i8, scratch, &soff, 1, "");
  LLVMValueRef lenv = cpu_i64(k, len);
  LLVMValueRef bufb = LLVMBuildInBoundsGEP2(B, i64, bufa, &lenv, 1, "");
  LLVMValueRef src_a = cpu_alloca(k, cg->ptr), dst_a = cpu_alloca(k, cg->ptr);
  LLVMValueRef w_a = cpu_alloca(k, i64), i_a = cpu_alloca(k, i64), j_a = cpu_alloca(k, i64);

  /* rows [c * csize, min((c + 1) * csize, rows)) */
  LLVMValueRef rlo = LLVMBuildNSWMul(B, k->chunk, cpu_i64(k, csize), "");
  LLVMValueRef rhi = cpu_smin(k, LLVMBuildNSWAdd(B, rlo, cpu_i64(k, csize), ""), cpu_i64(k, rows));
  CpuLoop rl;
  LLVMValueRef r = cpu_loop_open(k, &rl, rlo, rhi);
  LLVMValueRef idx[HLO_MAX_RANK], lhs_idx[HLO_MAX_RANK], rhs_idx[HLO_MAX_RANK],
      dst_idx[HLO_MAX_RANK];
  for (int d = xs->rank - 1; d >= 0; d--) {
    if (d == dim) continue;
    if (xs->dims[d] == 1) {
      idx[d] = cpu_i64(k, 0);
      continue;
    }
    LLVMValueRef D = cpu_i64(k, xs->dims[d]);
    idx[d] = LLVMBuildURem(B, r, D, "");
    r = LLVMBuildUDiv(B, r, D, "");
  }
  idx[dim] = cpu_i64(k, 0);

  /* identity permutation */
  CpuLoop il;
  LLVMValueRef e = cpu_loop_open(k, &il, cpu_i64(k, 0), lenv);
  cpu_sort_st(k, bufa, e, e);
  cpu_loop_close(k, &il);
  LLVMBuildStore(B, bufa, src_a);
  LLVMBuildStore(B, bufb, dst_a);

  /* for (w = 1; w < len; w *= 2): merge runs of width w from src into dst, then swap */
  LLVMBuildStore(B, cpu_i64(k, 1), w_a);
  LLVMBasicBlockRef wh = LLVMAppendBasicBlockInContext(cg->C, k->fn, "sort_width");
  LLVMBasicBlockRef wbody = LLVMAppendBasicBlockInContext(cg->C, k->fn, "sort_pass");
  LLVMBasicBlockRef wexit = LLVMAppendBasicBlockInContext(cg->C, k->fn, "sort_done");
  LLVMBuildBr(B, wh);
  LLVMPositionBuilderAtEnd(B, wh);
  LLVMValueRef w = LLVMBuildLoad2(B, i64, w_a, "w");
  LLVMBuildCondBr(B, LLVMBuildICmp(B, LLVMIntSLT, w, lenv, ""), wbody, wexit);
  LLVMPositionBuilderAtEnd(B, wbody);
  int wmark = k->ncache;
  LLVMValueRef src = LLVMBuildLoad2(B, cg->ptr, src_a, "src");
  LLVMValueRef dst = LLVMBuildLoad2(B, cg->ptr, dst_a, "dst");
  LLVMValueRef w2 = LLVMBuildNSWMul(B, w, cpu_i64(k, 2), "");
  CpuLoop ll;
  LLVMValueRef lo = cpu_loop_open_step(k, &ll, cpu_i64(k, 0), lenv, w2);
  LLVMValueRef mid = cpu_smin(k, LLVMBuildNSWAdd(B, lo, w, ""), lenv);
  LLVMValueRef hi = cpu_smin(k, LLVMBuildNSWAdd(B, lo, w2, ""), lenv);
  LLVMBuildStore(B, lo, i_a);
  LLVMBuildStore(B, mid, j_a);
  CpuLoop kl;
  LLVMValueRef kk = cpu_loop_open(k, &kl, lo, hi);
  LLVMValueRef i = LLVMBuildLoad2(B, i64, i_a, "");
  LLVMValueRef j = LLVMBuildLoad2(B, i64, j_a, "");
  LLVMValueRef iok = LLVMBuildICmp(B, LLVMIntSLT, i, mid, "");
  LLVMValueRef jok = LLVMBuildICmp(B, LLVMIntSLT, j, hi, "");
  LLVMValueRef left_done = LLVMBuildNot(B, iok, "");
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(B);
  LLVMBasicBlockRef cmpb = LLVMAppendBasicBlockInContext(cg->C, k->fn, "sort_cmp");
  LLVMBasicBlockRef join = LLVMAppendBasicBlockInContext(cg->C, k->fn, "sort_take");
  LLVMBuildCondBr(B, LLVMBuildAnd(B, iok, jok, ""), cmpb, join);
  /* both runs have elements: take the right one when comparator(right, left) */
  LLVMPositionBuilderAtEnd(B, cmpb);
  int mark = k->ncache;
  LLVMValueRef pr = cpu_sort_ld(k, src, j), pl = cpu_sort_ld(k, src, i);
  memcpy(lhs_idx, idx, sizeof idx);
  memcpy(rhs_idx, idx, sizeof idx);
  lhs_idx[dim] = pr;
  rhs_idx[dim] = pl;
  LLVMValueRef lv[CPU_SORT_MAX_OPS], rv[CPU_SORT_MAX_OPS], res = NULL;
  if (cpu_sort_values(k, in, lhs_idx, lv) && cpu_sort_values(k, in, rhs_idx, rv))
    res = cpu_sort_compare(k, in, lv, rv, "CPU");
  k->ncache = mark;
  LLVMValueRef take_cmp = res ? res : LLVMConstInt(cg->i1, 0, 0);
  LLVMBasicBlockRef cmp_end = LLVMGetInsertBlock(B);
  LLVMBuildBr(B, join);
  /* otherwise one run is exhausted: take the right one when the left one is */
  LLVMPositionBuilderAtEnd(B, join);
  LLVMValueRef take = LLVMBuildPhi(B, cg->i1, "take_right");
  LLVMValueRef inc[2] = {take_cmp, left_done};
  LLVMBasicBlockRef from[2] = {cmp_end, pre};
  LLVMAddIncoming(take, inc, from, 2);
  LLVMValueRef pick = LLVMBuildSelect(B, take, j, i, "");
  cpu_sort_st(k, dst, kk, cpu_sort_ld(k, src, pick));
  LLVMValueRef t64 = LLVMBuildZExt(B, take, i64, "");
  LLVMBuildStore(B, LLVMBuildNSWAdd(B, j, t64, ""), j_a);
  LLVMBuildStore(B, LLVMBuildNSWAdd(B, i, LLVMBuildXor(B, t64, cpu_i64(k, 1), ""), ""), i_a);
  cpu_loop_close(k, &kl);
  cpu_loop_close(k, &ll);
  LLVMBuildStore(B, dst, src_a);
  LLVMBuildStore(B, src, dst_a);
  LLVMBuildStore(B, w2, w_a);
  LLVMBuildBr(B, wh);
  k->ncache = wmark;
  LLVMPositionBuilderAtEnd(B, wexit);

  /* gather every operand's row through the sorted permutation */
  LLVMValueRef perm = LLVMBuildLoad2(B, cg->ptr, src_a, "perm");
  CpuLoop gl;
  LLVMValueRef g = cpu_loop_open(k, &gl, cpu_i64(k, 0), lenv);
  memcpy(lhs_idx, idx, sizeof idx);
  memcpy(dst_idx, idx, sizeof idx);
  lhs_idx[dim] = cpu_sort_ld(k, perm, g);
  dst_idx[dim] = g;
  for (int o = 0; o < n && !k->failed; o++) {
    LLVMValueRef v = cpu_gen(k, in->ops[o], lhs_idx);
    if (v) cpu_store_elem(k, out[o], n == 1 ? ls : &in->shape.tuple[o], dst_idx, v);
  }
  cpu_loop_close(k, &gl);
  cpu_loop_close(k, &rl);
  return cpu_kern_end(k, P);
}
