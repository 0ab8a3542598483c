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
 * (gen_scalar_comp) on the operands' elements at the two positions. Then every operand's
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
static LLVMValueRef cpu_sort_ld(GenKern *k, LLVMValueRef p, LLVMValueRef ix) {
  LLVMValueRef q = LLVMBuildInBoundsGEP2(k->B, k->cg->i64, p, &ix, 1, "");
  LLVMValueRef v = LLVMBuildLoad2(k->B, k->cg->i64, q, "");
  LLVMSetAlignment(v, 8);
  return v;
}

static void cpu_sort_st(GenKern *k, LLVMValueRef p, LLVMValueRef ix, LLVMValueRef v) {
  LLVMValueRef q = LLVMBuildInBoundsGEP2(k->B, k->cg->i64, p, &ix, 1, "");
  LLVMSetAlignment(LLVMBuildStore(k->B, v, q), 8);
}

bool cpu_sort_kernel(CpuCg *cg, HInstr *in) {
  if (!gen_sort_check(in, &cg->plan, cg->g.err, "CPU")) return false;
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

  GenKern *k = cpu_kern_begin(cg, in);
  LLVMBuilderRef B = k->B;
  LLVMTypeRef i64 = cg->g.i64;

  /* output leaves (entry block) */
  LLVMValueRef out[GEN_SORT_MAX_OPS];
  LLVMValueRef base = cpu_buffer(k, in);
  LLVMBasicBlockRef cur = LLVMGetInsertBlock(B);
  LLVMPositionBuilderBefore(B, k->entry_br);
  for (int o = 0; o < n; o++) {
    int64_t off = n == 1 ? 0 : memplan_tuple_offset(&in->shape, o);
    LLVMValueRef ix = gen_i64(k, off);
    out[o] = off ? LLVMBuildInBoundsGEP2(B, cg->g.i8, base, &ix, 1, "") : base;
  }
  LLVMPositionBuilderAtEnd(B, cur);
  const Shape *ls = n == 1 ? &in->shape : &in->shape.tuple[0];

  /* this chunk's scratch: perm (A) and its twin (B) */
  LLVMValueRef scratch = cpu_slot(k, (CpuSlot){CPU_SLOT_TEMP, NULL, NULL, cg->temp_base});
  LLVMValueRef soff = LLVMBuildNSWMul(B, cpu_kern(k)->chunk, gen_i64(k, slice), "");
  LLVMValueRef bufa = LLVMBuildInBoundsGEP2(B, cg->g.i8, scratch, &soff, 1, "");
  LLVMValueRef lenv = gen_i64(k, len);
  LLVMValueRef bufb = LLVMBuildInBoundsGEP2(B, i64, bufa, &lenv, 1, "");
  LLVMValueRef src_a = gen_alloca(k, cg->g.ptr), dst_a = gen_alloca(k, cg->g.ptr);
  LLVMValueRef w_a = gen_alloca(k, i64), i_a = gen_alloca(k, i64), j_a = gen_alloca(k, i64);

  /* rows [c * csize, min((c + 1) * csize, rows)) */
  LLVMValueRef rlo = LLVMBuildNSWMul(B, cpu_kern(k)->chunk, gen_i64(k, csize), "");
  LLVMValueRef rhi = gen_smin(k, LLVMBuildNSWAdd(B, rlo, gen_i64(k, csize), ""), gen_i64(k, rows));
  GenLoop rl;
  LLVMValueRef r = gen_loop_open(k, &rl, rlo, rhi);
  LLVMValueRef idx[HLO_MAX_RANK], lhs_idx[HLO_MAX_RANK], rhs_idx[HLO_MAX_RANK],
      dst_idx[HLO_MAX_RANK];
  for (int d = xs->rank - 1; d >= 0; d--) {
    if (d == dim) continue;
    if (xs->dims[d] == 1) {
      idx[d] = gen_i64(k, 0);
      continue;
    }
    LLVMValueRef D = gen_i64(k, xs->dims[d]);
    idx[d] = LLVMBuildURem(B, r, D, "");
    r = LLVMBuildUDiv(B, r, D, "");
  }
  idx[dim] = gen_i64(k, 0);

  /* identity permutation */
  GenLoop il;
  LLVMValueRef e = gen_loop_open(k, &il, gen_i64(k, 0), lenv);
  cpu_sort_st(k, bufa, e, e);
  gen_loop_close(k, &il);
  LLVMBuildStore(B, bufa, src_a);
  LLVMBuildStore(B, bufb, dst_a);

  /* for (w = 1; w < len; w *= 2): merge runs of width w from src into dst, then swap */
  LLVMBuildStore(B, gen_i64(k, 1), w_a);
  LLVMBasicBlockRef wh = LLVMAppendBasicBlockInContext(cg->g.C, k->fn, "sort_width");
  LLVMBasicBlockRef wbody = LLVMAppendBasicBlockInContext(cg->g.C, k->fn, "sort_pass");
  LLVMBasicBlockRef wexit = LLVMAppendBasicBlockInContext(cg->g.C, k->fn, "sort_done");
  LLVMBuildBr(B, wh);
  LLVMPositionBuilderAtEnd(B, wh);
  LLVMValueRef w = LLVMBuildLoad2(B, i64, w_a, "w");
  LLVMBuildCondBr(B, LLVMBuildICmp(B, LLVMIntSLT, w, lenv, ""), wbody, wexit);
  LLVMPositionBuilderAtEnd(B, wbody);
  int wmark = k->ncache;
  LLVMValueRef src = LLVMBuildLoad2(B, cg->g.ptr, src_a, "src");
  LLVMValueRef dst = LLVMBuildLoad2(B, cg->g.ptr, dst_a, "dst");
  LLVMValueRef w2 = LLVMBuildNSWMul(B, w, gen_i64(k, 2), "");
  GenLoop ll;
  LLVMValueRef lo = gen_loop_open_step(k, &ll, gen_i64(k, 0), lenv, w2);
  LLVMValueRef mid = gen_smin(k, LLVMBuildNSWAdd(B, lo, w, ""), lenv);
  LLVMValueRef hi = gen_smin(k, LLVMBuildNSWAdd(B, lo, w2, ""), lenv);
  LLVMBuildStore(B, lo, i_a);
  LLVMBuildStore(B, mid, j_a);
  GenLoop kl;
  LLVMValueRef kk = gen_loop_open(k, &kl, lo, hi);
  LLVMValueRef i = LLVMBuildLoad2(B, i64, i_a, "");
  LLVMValueRef j = LLVMBuildLoad2(B, i64, j_a, "");
  LLVMValueRef iok = LLVMBuildICmp(B, LLVMIntSLT, i, mid, "");
  LLVMValueRef jok = LLVMBuildICmp(B, LLVMIntSLT, j, hi, "");
  LLVMValueRef left_done = LLVMBuildNot(B, iok, "");
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(B);
  LLVMBasicBlockRef cmpb = LLVMAppendBasicBlockInContext(cg->g.C, k->fn, "sort_cmp");
  LLVMBasicBlockRef join = LLVMAppendBasicBlockInContext(cg->g.C, k->fn, "sort_take");
  LLVMBuildCondBr(B, LLVMBuildAnd(B, iok, jok, ""), cmpb, join);
  /* both runs have elements: take the right one when comparator(right, left) */
  LLVMPositionBuilderAtEnd(B, cmpb);
  int mark = k->ncache;
  LLVMValueRef pr = cpu_sort_ld(k, src, j), pl = cpu_sort_ld(k, src, i);
  memcpy(lhs_idx, idx, sizeof idx);
  memcpy(rhs_idx, idx, sizeof idx);
  lhs_idx[dim] = pr;
  rhs_idx[dim] = pl;
  LLVMValueRef lv[GEN_SORT_MAX_OPS], rv[GEN_SORT_MAX_OPS], res = NULL;
  if (gen_sort_values(k, in, lhs_idx, lv) && gen_sort_values(k, in, rhs_idx, rv))
    res = gen_sort_compare(k, in, lv, rv, "CPU");
  k->ncache = mark;
  LLVMValueRef take_cmp = res ? res : LLVMConstInt(cg->g.i1, 0, 0);
  LLVMBasicBlockRef cmp_end = LLVMGetInsertBlock(B);
  LLVMBuildBr(B, join);
  /* otherwise one run is exhausted: take the right one when the left one is */
  LLVMPositionBuilderAtEnd(B, join);
  LLVMValueRef take = LLVMBuildPhi(B, cg->g.i1, "take_right");
  LLVMValueRef inc[2] = {take_cmp, left_done};
  LLVMBasicBlockRef from[2] = {cmp_end, pre};
  LLVMAddIncoming(take, inc, from, 2);
  LLVMValueRef pick = LLVMBuildSelect(B, take, j, i, "");
  cpu_sort_st(k, dst, kk, cpu_sort_ld(k, src, pick));
  LLVMValueRef t64 = LLVMBuildZExt(B, take, i64, "");
  LLVMBuildStore(B, LLVMBuildNSWAdd(B, j, t64, ""), j_a);
  LLVMBuildStore(B, LLVMBuildNSWAdd(B, i, LLVMBuildXor(B, t64, gen_i64(k, 1), ""), ""), i_a);
  gen_loop_close(k, &kl);
  gen_loop_close(k, &ll);
  LLVMBuildStore(B, dst, src_a);
  LLVMBuildStore(B, src, dst_a);
  LLVMBuildStore(B, w2, w_a);
  LLVMBuildBr(B, wh);
  k->ncache = wmark;
  LLVMPositionBuilderAtEnd(B, wexit);

  /* gather every operand's row through the sorted permutation */
  LLVMValueRef perm = LLVMBuildLoad2(B, cg->g.ptr, src_a, "perm");
  GenLoop gl;
  LLVMValueRef g = gen_loop_open(k, &gl, gen_i64(k, 0), lenv);
  memcpy(lhs_idx, idx, sizeof idx);
  memcpy(dst_idx, idx, sizeof idx);
  lhs_idx[dim] = cpu_sort_ld(k, perm, g);
  dst_idx[dim] = g;
  for (int o = 0; o < n && !k->failed; o++) {
    LLVMValueRef v = gen_value(k, in->ops[o], lhs_idx);
    if (v) gen_store_elem(k, out[o], n == 1 ? ls : &in->shape.tuple[o], dst_idx, v);
  }
  gen_loop_close(k, &gl);
  gen_loop_close(k, &rl);
  return cpu_kern_end(k, P);
}
