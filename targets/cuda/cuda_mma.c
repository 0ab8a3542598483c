/* targets/cuda/cuda_mma.c: the tensor-core primitives the mma.sync kernels share (the attention
 * kernel, the few-row kernel, the prologue GEMM): the m16n8k16 product, ldmatrix, 16-bit
 * packing. Each is one NVVM intrinsic call and its operands' bitcasts, so that the kernels'
 * files hold only their tiling and data flow. */
#include "cuda_impl.h"

#include <stdio.h>

LLVMValueRef cuda_pack16(GenKern *k, LLVMValueRef lo, LLVMValueRef hi) {
  /* a <2 x i16> bitcast: one register move, and none for halves of a loaded vector */
  LLVMTypeRef v2 = LLVMVectorType(k->cg->i16, 2);
  LLVMValueRef v = LLVMGetUndef(v2);
  v = LLVMBuildInsertElement(k->B, v, LLVMBuildBitCast(k->B, lo, k->cg->i16, ""),
                             LLVMConstInt(k->cg->i32, 0, 0), "");
  v = LLVMBuildInsertElement(k->B, v, LLVMBuildBitCast(k->B, hi, k->cg->i16, ""),
                             LLVMConstInt(k->cg->i32, 1, 0), "");
  return LLVMBuildBitCast(k->B, v, k->cg->i32, "");
}

void cuda_mma(GenKern *k, DType t, LLVMValueRef *a, LLVMValueRef *b, LLVMValueRef *c) {
  LLVMValueRef args[10];
  LLVMTypeRef h2 = LLVMVectorType(k->cg->f16, 2);
  for (int i = 0; i < 6; i++) {
    LLVMValueRef r = i < 4 ? a[i] : b[i - 4];
    args[i] = t == DT_BF16 ? r : LLVMBuildBitCast(k->B, r, h2, "");
  }
  for (int i = 0; i < 4; i++)
    args[6 + i] = c[i];
  LLVMValueRef d = cuda_intrinsic(k,
                                  t == DT_BF16 ? "llvm.nvvm.mma.m16n8k16.row.col.bf16"
                                               : "llvm.nvvm.mma.m16n8k16.row.col.f32.f32",
                                  NULL, args, 10);
  for (int i = 0; i < 4; i++)
    c[i] = LLVMBuildExtractValue(k->B, d, (unsigned)i, "");
}

void cuda_ldsm(GenKern *k, LLVMValueRef p, bool trans, int n, LLVMValueRef *r) {
  char name[64];
  snprintf(name, sizeof name, "llvm.nvvm.ldmatrix.sync.aligned.m8n8.x%d%s.b16", n,
           trans ? ".trans" : "");
  LLVMValueRef v = cuda_intrinsic(k, name, LLVMTypeOf(p), &p, 1);
  for (int i = 0; i < n; i++)
    r[i] = LLVMBuildExtractValue(k->B, v, (unsigned)i, "");
}
