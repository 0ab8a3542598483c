/* targets/cuda/cuda_vec.c: vector accesses of a fusion's entry values, for kernels that
 * generate 8 consecutive elements of an expression per thread (the few-row kernel, the
 * prologue GEMM, vectorized staging).
 *
 * The elemental generator reads entry values one element at a time; where a kernel generates
 * 8 neighbours along the minor dim of an expression, the entry values of the expression's dims
 * (the leaves: an s8 weight, a bf16 activation) can instead be read by one vector access each
 * and their elements entered in the elemental cache at the 8 indices, so the generator finds
 * them there. A vector access needs the leaf's address aligned to the vector's size, which only
 * the caller's pointers decide: kernels test it at run time (cuda_vec_aligned) and keep an
 * element-wise copy of their loop for the other case. */
#include "cuda_impl.h"

bool cuda_vec_type(DType t) {
  int n = (int)hlo_dtype_size(t);
  return (n == 1 || n == 2 || n == 4) && !hlo_dtype_is_fp8(t) && t != DT_PRED &&
         !hlo_dtype_is_int4(t);
}

int cuda_vec_leaves(CudaCg *cc, const HInstr *in, const Shape *s, const HInstr **leaf, int max) {
  int n = 0;
  for (int i = 0; i < in->nops && n < max; i++) {
    const HInstr *x = in->ops[i];
    CuPtr ptr;
    if (hlo_shape_same_dims(&x->shape, s) && cuda_vec_type(x->shape.dt) && x->op != OP_CONSTANT &&
        cuda_ptr_of(cc, x, &ptr))
      leaf[n++] = x;
  }
  return n;
}

LLVMValueRef cuda_vec_load(GenKern *k, const HInstr *x, LLVMValueRef *idx, int width) {
  LLVMTypeRef et = gen_mem_type(k->cg, x->shape.dt);
  LLVMValueRef lin = gen_linear(k, &x->shape, idx);
  LLVMValueRef q = LLVMBuildInBoundsGEP2(k->B, et, k->cg->buffer_fn(k, x), &lin, 1, "");
  LLVMValueRef v = LLVMBuildLoad2(k->B, LLVMVectorType(et, (unsigned)width), q, "");
  LLVMSetAlignment(v, (unsigned)(width * hlo_dtype_size(x->shape.dt)));
  return v;
}

void cuda_vec_cache(GenKern *k, const HInstr *x, LLVMValueRef v, LLVMValueRef (*idx)[HLO_MAX_RANK],
                    int width) {
  for (int j = 0; j < width; j++)
    gen_cache_add(k, x, x->shape.rank, idx[j], LLVMBuildExtractElement(k->B, v, gen_i64(k, j), ""));
}

LLVMValueRef cuda_vec_aligned(GenKern *k, const HInstr *const *leaf, int n, int width) {
  LLVMBuilderRef B = k->B;
  LLVMValueRef ok = LLVMConstInt(k->cg->i1, 1, 0);
  for (int l = 0; l < n; l++) {
    LLVMValueRef a = LLVMBuildPtrToInt(B, k->cg->buffer_fn(k, leaf[l]), k->cg->i64, "");
    int64_t al = width * (int64_t)hlo_dtype_size(leaf[l]->shape.dt);
    LLVMValueRef z = LLVMBuildAnd(B, a, gen_i64(k, al - 1), "");
    ok = LLVMBuildAnd(B, ok, LLVMBuildICmp(B, LLVMIntEQ, z, gen_i64(k, 0), ""), "");
  }
  return ok;
}

void cuda_vec_split(GenKern *k, LLVMValueRef ok, void (*body)(GenKern *k, bool vec, void *ctx),
                    void *ctx) {
  if (!ok) {
    body(k, false, ctx);
    return;
  }
  LLVMBasicBlockRef bv = LLVMAppendBasicBlockInContext(k->cg->C, k->fn, "vec");
  LLVMBasicBlockRef bs = LLVMAppendBasicBlockInContext(k->cg->C, k->fn, "scalar");
  LLVMBasicBlockRef join = LLVMAppendBasicBlockInContext(k->cg->C, k->fn, "joined");
  LLVMBuildCondBr(k->B, ok, bv, bs);
  for (int vec = 1; vec >= 0; vec--) {
    LLVMPositionBuilderAtEnd(k->B, vec ? bv : bs);
    body(k, vec, ctx);
    LLVMBuildBr(k->B, join);
  }
  LLVMPositionBuilderAtEnd(k->B, join);
}

void cuda_vec_indices(GenKern *k, LLVMValueRef (*idx)[HLO_MAX_RANK], int rank, int width) {
  for (int j = 1; j < width; j++) {
    for (int d = 0; d < rank; d++)
      idx[j][d] = idx[0][d];
    idx[j][rank - 1] = LLVMBuildNSWAdd(k->B, idx[0][rank - 1], gen_i64(k, j), "");
  }
}
