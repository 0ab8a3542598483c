/* targets/cuda/cuda_select_scatter.c: select-and-scatter on the GPU (the gradient of max and min
 * pooling), as a gather.
 *
 * XLA's select-and-scatter starts every output element at init and then, for each source
 * element in row-major order, selects one element of the operand's window at that position
 * (the first real tap, replaced by a tap whenever select(candidate, tap) is false) and combines
 * the source into it with scatter. Run as written, the updates of one element depend on each
 * other; run as a gather they do not: a thread takes one output element o, visits in row-major
 * order every source position whose window can hold o (per dimension the positions s with
 * s * stride <= o * base dilation + pad_lo <= s * stride + (size - 1) * window dilation), repeats
 * that window's selection (gen_sas_select, as the CPU's) and combines the source when
 * the selection is o. Each element gets XLA's updates in XLA's order, with no atomics, so the
 * result is the CPU target's bit for bit (base dilation and padding of any sign included: o's
 * place in the padded, dilated operand decides which windows can hold it). */
#include "cuda_impl.h"

typedef struct SasCtx {
  const HInstr *in;
  LLVMValueRef out;
} SasCtx;

/* out[o] = init, then every window holding o that selects o scattered into it. */
static bool sas_body(GenKern *k, LLVMValueRef *o, void *ctx) {
  const SasCtx *c = ctx;
  const HInstr *in = c->in;
  GenCg *cg = k->cg;
  LLVMBuilderRef B = k->B;
  const Shape *xs = &in->ops[0]->shape, *ss = &in->ops[1]->shape;
  int rank = xs->rank;
  LLVMTypeRef vt = gen_reg_type(cg, xs->dt);
  LLVMValueRef acc_a = gen_alloca(k, vt), have_a = gen_alloca(k, cg->i1), val_a = gen_alloca(k, vt);
  LLVMValueRef sel_a[HLO_MAX_RANK], sidx[HLO_MAX_RANK];
  for (int d = 0; d < rank; d++)
    sel_a[d] = gen_alloca(k, cg->i64);
  LLVMValueRef zero[1] = {gen_i64(k, 0)};
  LLVMValueRef iv = gen_value(k, in->ops[2], zero);
  if (!iv) return false;
  LLVMBuildStore(B, iv, acc_a);
  GenLoop loops[HLO_MAX_RANK];
  for (int d = 0; d < rank; d++) { /* the source positions whose window can hold o */
    const WinDim *w = &in->window->d[d];
    /* o's place in the padded, base-dilated operand */
    LLVMValueRef p = LLVMBuildNSWAdd(B, LLVMBuildNSWMul(B, o[d], gen_i64(k, w->base_dil), ""),
                                     gen_i64(k, w->pad_lo), "");
    LLVMValueRef reach = gen_i64(k, (w->size - 1) * w->win_dil);
    LLVMValueRef lo = LLVMBuildNSWSub(B, p, reach, "");
    lo = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSLT, lo, gen_i64(k, 0), ""), gen_i64(k, 0), lo,
                         "");
    lo = LLVMBuildSDiv(B, LLVMBuildNSWAdd(B, lo, gen_i64(k, w->stride - 1), ""),
                       gen_i64(k, w->stride), "");
    LLVMValueRef hi =
        LLVMBuildNSWAdd(B, LLVMBuildSDiv(B, p, gen_i64(k, w->stride), ""), gen_i64(k, 1), "");
    hi = gen_smin(k, hi, gen_i64(k, ss->dims[d]));
    sidx[d] = gen_loop_open(k, &loops[d], lo, hi);
  }
  if (!gen_sas_select(k, in, sidx, have_a, val_a, sel_a, "CUDA")) return false;
  LLVMValueRef hit = LLVMBuildLoad2(B, cg->i1, have_a, "");
  for (int d = 0; d < rank; d++)
    hit = LLVMBuildAnd(
        B, hit, LLVMBuildICmp(B, LLVMIntEQ, LLVMBuildLoad2(B, cg->i64, sel_a[d], ""), o[d], ""),
        "");
  LLVMBasicBlockRef upd = LLVMAppendBasicBlockInContext(cg->C, k->fn, "sas_scatter");
  LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(cg->C, k->fn, "sas_done");
  LLVMBuildCondBr(B, hit, upd, done);
  LLVMPositionBuilderAtEnd(B, upd);
  int mark = k->ncache;
  LLVMValueRef args[2] = {LLVMBuildLoad2(B, vt, acc_a, ""), gen_value(k, in->ops[1], sidx)},
               r[1] = {NULL};
  if (args[1] && gen_scalar_comp(k, in->calls[1], args, 2, r)) LLVMBuildStore(B, r[0], acc_a);
  k->ncache = mark;
  LLVMBuildBr(B, done);
  LLVMPositionBuilderAtEnd(B, done);
  for (int d = rank - 1; d >= 0; d--)
    gen_loop_close(k, &loops[d]);
  gen_store_elem(k, c->out, &in->shape, o, LLVMBuildLoad2(B, vt, acc_a, ""));
  return !k->failed;
}

bool cuda_select_scatter(CudaCg *cc, HInstr *in) {
  if (!gen_sas_check(in, &cc->plan, cc->cg.err, "CUDA")) return false;
  CuStep *st;
  GenKern *k = cuda_kbegin(cc, in, "select-scatter", 0, NULL, NULL, &st);
  SasCtx c = {in, cuda_kbuffer(k, in)};
  cuda_grid_loop(k, st, &in->shape, sas_body, &c);
  return cuda_kend(k);
}
