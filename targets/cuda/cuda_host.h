/* targets/cuda/cuda_host.h: what the host object's emitters share (cuda_host.c builds the object;
 * cuda_graph.c its CUDA graph replay): the builder state and small IR helpers. */
#ifndef HLOC_CUDA_HOST_H
#define HLOC_CUDA_HOST_H

#include "cuda_impl.h"

#include <string.h>

#define CU_SLOTS 8 /* CUDA contexts one process may run a model in */

typedef struct Host {
  CudaCg *cc;                               /* compilation */
  LLVMContextRef C;                         /* host context */
  LLVMModuleRef M;                          /* host module */
  LLVMBuilderRef B;                         /* builder */
  LLVMTypeRef i8, i32, i64, ptr, f32, f64;  /* types */
  LLVMValueRef ctxs, mods, fns, blas, lock; /* state globals */
  LLVMValueRef dnn, descs, algos;           /* cuDNN: handle per slot, 4 descriptors and the
                                               algorithm of every convolution per slot */
  LLVMValueRef lth, ltd, lta;               /* cuBLASLt: handle per slot, 4 descriptors (matmul,
                                               A, B, C) and the algorithm (64 bytes) of every
                                               cuBLASLt GEMM per slot */
  LLVMValueRef ltf;                         /* per slot and cuBLASLt GEMM: 1 where a fused
                                               epilogue got no algorithm (runs unfused) */
  LLVMValueRef ffts;                        /* cuFFT: the plan (an int cufftHandle) of every
                                               transform per slot */
  LLVMValueRef cubin, ptx;                  /* images */
  LLVMValueRef knames;                      /* [nk x ptr] kernel names */
  LLVMValueRef fn;                          /* function being built */
} Host;

static inline LLVMValueRef h_i32(Host *h, long long v) {
  return LLVMConstInt(h->i32, (unsigned long long)v, 1);
}
static inline LLVMValueRef h_i64(Host *h, long long v) {
  return LLVMConstInt(h->i64, (unsigned long long)v, 1);
}

static inline LLVMValueRef h_decl(Host *h, const char *name, LLVMTypeRef ret, LLVMTypeRef *ps,
                                  int n) {
  LLVMValueRef f = LLVMGetNamedFunction(h->M, name);
  if (f) return f;
  return LLVMAddFunction(h->M, name, LLVMFunctionType(ret, ps, (unsigned)n, 0));
}

static inline LLVMValueRef h_call(Host *h, const char *name, LLVMTypeRef ret, LLVMTypeRef *ps,
                                  LLVMValueRef *args, int n) {
  LLVMValueRef f = h_decl(h, name, ret, ps, n);
  return LLVMBuildCall2(h->B, LLVMGlobalGetValueType(f), f, args, (unsigned)n, "");
}

static inline LLVMValueRef h_global(Host *h, LLVMTypeRef t, const char *name, LLVMValueRef init,
                                    bool cnst) {
  LLVMValueRef g = LLVMAddGlobal(h->M, t, name);
  LLVMSetInitializer(g, init ? init : LLVMConstNull(t));
  LLVMSetGlobalConstant(g, cnst);
  LLVMSetLinkage(g, LLVMInternalLinkage);
  return g;
}

static inline LLVMValueRef h_str(Host *h, const char *s, const char *name) {
  LLVMValueRef init = LLVMConstStringInContext(h->C, s, (unsigned)strlen(s), 0);
  LLVMValueRef g = h_global(h, LLVMTypeOf(init), name, init, true);
  LLVMSetUnnamedAddress(g, LLVMGlobalUnnamedAddr);
  return g;
}

/* Go to block to when cond holds, else on in a new block. */
static inline void h_branch(Host *h, LLVMValueRef cond, LLVMBasicBlockRef to) {
  LLVMBasicBlockRef on = LLVMAppendBasicBlockInContext(h->C, h->fn, "on");
  LLVMBuildCondBr(h->B, cond, to, on);
  LLVMPositionBuilderAtEnd(h->B, on);
}

/* v != 0 (a status, a pointer). */
static inline LLVMValueRef h_nonzero(Host *h, LLVMValueRef v) {
  return LLVMBuildICmp(h->B, LLVMIntNE, v, LLVMConstNull(LLVMTypeOf(v)), "");
}

/* if (cond) return rv; */
static inline void h_ret_if(Host *h, LLVMValueRef cond, LLVMValueRef rv) {
  LLVMBasicBlockRef cur = LLVMGetInsertBlock(h->B);
  LLVMBasicBlockRef bad = LLVMAppendBasicBlockInContext(h->C, h->fn, "fail");
  LLVMPositionBuilderAtEnd(h->B, bad);
  LLVMBuildRet(h->B, rv);
  LLVMPositionBuilderAtEnd(h->B, cur);
  h_branch(h, cond, bad);
}

static inline void h_check(Host *h, LLVMValueRef st, int add) {
  h_ret_if(h, h_nonzero(h, st), add ? LLVMBuildAdd(h->B, st, h_i32(h, add), "") : st);
}

static inline LLVMValueRef h_slot_ptr(Host *h, LLVMValueRef arr, LLVMValueRef slot) {
  LLVMValueRef ix[2] = {h_i64(h, 0), slot};
  return LLVMBuildInBoundsGEP2(h->B, LLVMGlobalGetValueType(arr), arr, ix, 2, "");
}

/* pthread_mutex_lock / unlock of the mutex global m. */
static inline void h_mutex(Host *h, LLVMValueRef m, bool on) {
  LLVMTypeRef ps[1] = {h->ptr};
  h_call(h, on ? "pthread_mutex_lock" : "pthread_mutex_unlock", h->i32, ps, &m, 1);
}

/* NAME_cuda_run's graph replay (cuda_graph.c): an internal function of the steps function's
 * type, i32 (args, results, temp, stream, slot i64), that runs steps directly or replays them
 * as a graph captured from them. */
LLVMValueRef cuda_graph_fn(Host *h, LLVMValueRef steps);
/* Whether copy step s from a constant repeats one value of *width bytes (1, 2 or 4; dst
 * aligned to it), *value: a memset then does it. */
bool cuda_graph_memset(const CuStep *s, int *width, uint32_t *value);

#endif
