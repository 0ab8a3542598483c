/* targets/cuda/cuda_host.c: the host object of a CUDA compilation.
 *
 * An x86-64 (host triple) LLVM module, emitted as a relocatable object, holding:
 *   - NAME_cuda_cubin (64-byte aligned) and NAME_cuda_ptx (NUL-terminated): the kernels as
 *     machine code for --gpu-arch and as PTX, which the driver JIT-compiles when the cubin
 *     does not fit the GPU (newer architectures);
 *   - per-context state for up to CU_SLOTS CUDA contexts: the CUcontext, the loaded CUmodule,
 *     the CUfunction of every kernel, when a GEMM step exists a cuBLAS handle, and when a
 *     convolution step exists a cuDNN handle with, per convolution, its four descriptors
 *     (NCHW tensors with a KCRS filter or NHWC with KRSC, convolution with groups and math
 *     type: FMA only for highest precision, tensor ops for tf32) and the algorithm chosen at
 *     load time by cudnnFindConvolutionForwardAlgorithm (BackwardFilter for weight
 *     gradients): the fastest that succeeded and whose workspace fits the part of temp
 *     reserved for it (none fits: init returns 3); when a cuBLASLt GEMM exists (fp8 operands,
 *     fused epilogues) a cuBLASLt handle with, per such GEMM, its descriptors and the
 *     algorithm cuBLASLt's heuristic ranks first, and for a fused epilogue without one a mark:
 *     that GEMM runs unfused (cuBLAS, then its epilogue kernel); when an FFT step exists, the
 *     cuFFT plan of each (cufftPlanMany, cuda_fft.c). A slot
 *     is filled once under a process-wide pthread mutex and published by a release store
 *     of its context; lookups are acquire loads, so the launch path takes no lock;
 *   - int NAME_cuda_init(void): loads the module into the current context (cubin, else PTX)
 *     if not done yet; NAME_cuda_run calls it on first use in a context;
 *   - int NAME_cuda_run(args, results, temp, stream): every step in order on the stream:
 *     cuLaunchKernel with an argument array of device pointers (base + offset), cuBLAS
 *     cublasGemmStridedBatchedEx (the handle is set to the stream under the mutex, since
 *     a handle is not safe to use from two threads at once), cublasLtMatmul (a fused bias's
 *     pointer, an attribute of the shared descriptor, set and used under the mutex; the unfused
 *     path where the slot is marked or a pointer is less aligned than the heuristic assumed),
 *     cudnnConvolutionForward or cudnnConvolutionBackwardFilter (the same way),
 *     cufftExec* (cufftSetStream under the mutex likewise), cuMemcpyDtoDAsync; returns 0, a
 *     CUresult, 1000 + a cublasStatus_t, 100000 + a cudnnStatus_t or 200000 + a cufftResult;
 *     1 for a NULL array (CUDA_ERROR_INVALID_VALUE), 2 when more than CU_SLOTS contexts are
 *     used, 201 without a current context;
 *   - NAME_arg_info / NAME_result_info: the tensor tables, laid out like the CPU target's.
 * Requires glibc's PTHREAD_MUTEX_INITIALIZER to be all zero bytes (it is on Linux). */
#include "cuda_host.h"

#include <llvm-c/Analysis.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <stdlib.h>
#include <string.h>

/* The slot holding context ctx (acquire loads), or -1: an internal function. */
static LLVMValueRef h_lookup_fn(Host *h) {
  LLVMTypeRef ps[1] = {h->ptr};
  LLVMValueRef f = LLVMAddFunction(h->M, "hloc_cuda_lookup", LLVMFunctionType(h->i32, ps, 1, 0));
  LLVMSetLinkage(f, LLVMInternalLinkage);
  LLVMValueRef save = h->fn;
  h->fn = f;
  LLVMPositionBuilderAtEnd(h->B, LLVMAppendBasicBlockInContext(h->C, f, "entry"));
  LLVMValueRef ctx = LLVMGetParam(f, 0);
  for (int s = 0; s < CU_SLOTS; s++) {
    LLVMValueRef v = LLVMBuildLoad2(h->B, h->ptr, h_slot_ptr(h, h->ctxs, h_i64(h, s)), "");
    LLVMSetOrdering(v, LLVMAtomicOrderingAcquire);
    LLVMSetAlignment(v, 8);
    h_ret_if(h, LLVMBuildICmp(h->B, LLVMIntEQ, v, ctx, ""), h_i32(h, s));
  }
  LLVMBuildRet(h->B, h_i32(h, -1));
  h->fn = save;
  return f;
}

static void h_lock(Host *h, bool on) { h_mutex(h, h->lock, on); }

/* Exits of a function built under a lock: branches to done, whose phi rv takes the value. */
typedef struct HExit {
  LLVMBasicBlockRef done;
  LLVMValueRef rv;
} HExit;
static void h_exit_if(Host *h, const HExit *x, LLVMValueRef cond, LLVMValueRef val) {
  LLVMBasicBlockRef go = LLVMAppendBasicBlockInContext(h->C, h->fn, "ok");
  LLVMBasicBlockRef here = LLVMGetInsertBlock(h->B);
  LLVMBuildCondBr(h->B, cond, x->done, go);
  LLVMAddIncoming(x->rv, &val, &here, 1);
  LLVMPositionBuilderAtEnd(h->B, go);
}
static void h_exit_status(Host *h, const HExit *x, LLVMValueRef st) {
  h_exit_if(h, x, LLVMBuildICmp(h->B, LLVMIntNE, st, h_i32(h, 0), ""),
            LLVMBuildAdd(h->B, st, h_i32(h, 1000), ""));
}

/* &arr[0][slot][i] of a per-slot table. */
static LLVMValueRef h_table_ptr(Host *h, LLVMValueRef arr, LLVMValueRef slot, int64_t i) {
  LLVMValueRef ix[3] = {h_i64(h, 0), slot, h_i64(h, i)};
  return LLVMBuildInBoundsGEP2(h->B, LLVMGlobalGetValueType(arr), arr, ix, 3, "");
}

/* cuBLASLt attribute attr of descriptor d set to v (an i32 or i64 constant), through setter. */
static LLVMValueRef h_lt_attr(Host *h, const char *setter, LLVMValueRef d, int attr,
                              LLVMValueRef v) {
  LLVMValueRef buf = LLVMBuildAlloca(h->B, LLVMTypeOf(v), "");
  LLVMBuildStore(h->B, v, buf);
  LLVMTypeRef ps[4] = {h->ptr, h->i32, h->ptr, h->i64};
  LLVMValueRef a[4] = {d, h_i32(h, attr), buf, h_i64(h, LLVMTypeOf(v) == h->i64 ? 8 : 4)};
  return h_call(h, setter, h->i32, ps, a, 4);
}

/* The alignment a fused GEMM's pointer p is assumed to have when cuBLASLt's heuristic picks an
 * algorithm: its offset's, up to 256 bytes (cuMemAlloc's, which bases are assumed to have);
 * checked at run time (h_lt_fused). */
static int64_t h_align(const CuPtr *p) {
  int64_t a = 256;
  while (a > 1 && p->offset % a)
    a /= 2;
  return a;
}

/* Fused step s's epilogue on its matmul descriptor desc: the mode (cuda_epilogue_lt) and, with a
 * bias, its type (D's) and a stand-in pointer of the bias's assumed alignment (the heuristic
 * reads only that; the real one is set before each call). An i1: whether cuBLASLt took them. */
static LLVMValueRef h_lt_epilogue(Host *h, const CuStep *s, LLVMValueRef desc) {
  const char *set = "cublasLtMatmulDescSetAttribute", *name;
  LLVMValueRef st = h_lt_attr(h, set, desc, 7, h_i32(h, cuda_epilogue_lt(s->epi, &name)));
  if (s->epi & CU_EPI_BIAS) {
    LLVMValueRef bt = h_lt_attr(h, set, desc, 26, h_i32(h, cuda_gemm_types(h->cc, s).c));
    LLVMValueRef bp = h_lt_attr(h, set, desc, 8, h_i64(h, h_align(&s->bias)));
    st = LLVMBuildOr(h->B, st, LLVMBuildOr(h->B, bt, bp, ""), "");
  }
  return LLVMBuildICmp(h->B, LLVMIntEQ, st, h_i32(h, 0), "");
}

/* The cuBLASLt state of GEMM step s in slot: its matmul descriptor (f32 sums and scalars, the
 * operands' transposes, a fused epilogue's mode and bias), the layouts of A, B and C (D is C,
 * and so is a residual's layout; batched by strides), and the algorithm cuBLASLt's heuristic
 * ranks first for them (no workspace; the pointers' alignments as h_align assumes, fp8:
 * cuBLASLt's default), copied into the slot's table; an exit with 1000 + the status where a call
 * fails, 1000 + 15 (NOT_SUPPORTED) where the heuristic has no algorithm for an fp8 GEMM; a fused
 * epilogue without one (or refused) is marked to run unfused instead. res (96 bytes) and cnt are
 * scratch, pref the preference. */
static void h_lt_step(Host *h, const HExit *x, LLVMValueRef slot, LLVMValueRef handle,
                      LLVMValueRef pref, const CuStep *s, LLVMValueRef res, LLVMValueRef cnt) {
  LLVMBuilderRef B = h->B;
  CuGemmTypes gt = cuda_gemm_types(h->cc, s);
  LLVMValueRef dp[4], d[4];
  for (int j = 0; j < 4; j++)
    dp[j] = h_table_ptr(h, h->ltd, slot, s->lidx * 4 + j);
  LLVMTypeRef t3[3] = {h->ptr, h->i32, h->i32};
  LLVMValueRef ca[3] = {dp[0], h_i32(h, gt.compute), h_i32(h, 0 /* CUDA_R_32F */)};
  h_exit_status(h, x, h_call(h, "cublasLtMatmulDescCreate", h->i32, t3, ca, 3));
  d[0] = LLVMBuildLoad2(B, h->ptr, dp[0], "");
  h_exit_status(h, x, h_lt_attr(h, "cublasLtMatmulDescSetAttribute", d[0], 3, h_i32(h, s->transa)));
  h_exit_status(h, x, h_lt_attr(h, "cublasLtMatmulDescSetAttribute", d[0], 4, h_i32(h, s->transb)));
  /* A, B and C as stored: rows x cols, column-major, ld */
  int64_t rows[3] = {s->transa ? s->k : s->m, s->transb ? s->n : s->k, s->m};
  int64_t cols[3] = {s->transa ? s->m : s->k, s->transb ? s->k : s->n, s->n};
  int64_t ld[3] = {s->lda, s->ldb, s->ldc}, stride[3] = {s->sa, s->sb, s->sc};
  int type[3] = {gt.a, gt.ab, gt.c};
  LLVMTypeRef t5[5] = {h->ptr, h->i32, h->i64, h->i64, h->i64};
  for (int j = 0; j < 3; j++) {
    LLVMValueRef la[5] = {dp[1 + j], h_i32(h, type[j]), h_i64(h, rows[j]), h_i64(h, cols[j]),
                          h_i64(h, ld[j])};
    h_exit_status(h, x, h_call(h, "cublasLtMatrixLayoutCreate", h->i32, t5, la, 5));
    d[1 + j] = LLVMBuildLoad2(B, h->ptr, dp[1 + j], "");
    if (s->batch > 1) { /* BATCH_COUNT (i32), STRIDED_BATCH_OFFSET (i64, elements) */
      h_exit_status(
          h, x, h_lt_attr(h, "cublasLtMatrixLayoutSetAttribute", d[1 + j], 5, h_i32(h, s->batch)));
      h_exit_status(
          h, x, h_lt_attr(h, "cublasLtMatrixLayoutSetAttribute", d[1 + j], 6, h_i64(h, stride[j])));
    }
  }
  const CuPtr *mat[4] = {&s->a, &s->b, s->epi & CU_EPI_RESIDUAL ? &s->res : &s->c, &s->c};
  for (int j = 0; j < 4; j++) /* MIN_ALIGNMENT_A_BYTES .. _D_BYTES */
    h_exit_status(h, x,
                  h_lt_attr(h, "cublasLtMatmulPreferenceSetAttribute", pref, 5 + j,
                            h_i32(h, s->epi ? h_align(mat[j]) : 256)));
  LLVMValueRef took = s->epi ? h_lt_epilogue(h, s, d[0]) : NULL;
  LLVMTypeRef t10[10] = {h->ptr, h->ptr, h->ptr, h->ptr, h->ptr,
                         h->ptr, h->ptr, h->i32, h->ptr, h->ptr};
  LLVMValueRef ha[10] = {handle, d[0], d[1], d[2], d[3], d[3], pref, h_i32(h, 1), res, cnt};
  LLVMValueRef hs = h_call(h, "cublasLtMatmulAlgoGetHeuristic", h->i32, t10, ha, 10);
  LLVMValueRef none =
      LLVMBuildICmp(B, LLVMIntSLT, LLVMBuildLoad2(B, h->i32, cnt, ""), h_i32(h, 1), "");
  if (s->epi) { /* no algorithm for the epilogue: the GEMM and its epilogue kernel instead */
    LLVMValueRef bad = LLVMBuildOr(B, LLVMBuildNot(B, took, ""),
                                   LLVMBuildICmp(B, LLVMIntNE, hs, h_i32(h, 0), ""), "");
    bad = LLVMBuildOr(B, bad, none, "");
    if (h->cc->o->epilogue_fallback) bad = LLVMConstInt(LLVMInt1TypeInContext(h->C), 1, 0);
    LLVMBuildStore(B, LLVMBuildZExt(B, bad, h->i8, ""), h_table_ptr(h, h->ltf, slot, s->lidx));
  } else {
    h_exit_status(h, x, hs);
    h_exit_if(h, x, none, h_i32(h, 1015));
  }
  LLVMBuildMemCpy(B, h_table_ptr(h, h->lta, slot, s->lidx * 8), 8, res, 8, h_i64(h, 64));
}

/* In NAME_cuda_init under the lock: slot's cuBLASLt handle and h_lt_step for every cuBLASLt
 * GEMM step (fp8, fused epilogues); exits through x on a failure. */
static void h_lt_init(Host *h, const HExit *x, LLVMValueRef slot) {
  CudaCg *cc = h->cc;
  LLVMBuilderRef B = h->B;
  LLVMTypeRef p1[1] = {h->ptr};
  LLVMValueRef hp = h_slot_ptr(h, h->lth, slot);
  h_exit_status(h, x, h_call(h, "cublasLtCreate", h->i32, p1, &hp, 1));
  LLVMValueRef handle = LLVMBuildLoad2(B, h->ptr, hp, "");
  LLVMValueRef pp = LLVMBuildAlloca(B, h->ptr, "pref");
  h_exit_status(h, x, h_call(h, "cublasLtMatmulPreferenceCreate", h->i32, p1, &pp, 1));
  LLVMValueRef pref = LLVMBuildLoad2(B, h->ptr, pp, "");
  LLVMValueRef res = LLVMBuildAlloca(B, LLVMArrayType2(h->i64, 12), "heur");
  LLVMValueRef cnt = LLVMBuildAlloca(B, h->i32, "count");
  for (int i = 0; i < cc->nsteps; i++)
    if (cc->steps[i].kind == CU_STEP_GEMM && cc->steps[i].lidx >= 0)
      h_lt_step(h, x, slot, handle, pref, &cc->steps[i], res, cnt);
  h_exit_status(h, x, h_call(h, "cublasLtMatmulPreferenceDestroy", h->i32, p1, &pref, 1));
}

/* In NAME_cuda_init under the lock: slot's cuDNN handle and, per convolution, its four
 * descriptors and the algorithm chosen (see the file's head); exits through x on a failure. */
/* h_dnn_init's work for convolution step c: its four descriptors made and set, cuDNN's
 * algorithms timed (perf: 8 results of 48 bytes, cnt: their count) and the fastest that
 * succeeded and fits the reserved workspace kept (none: exit 3), run with its math type. */
static void h_dnn_conv(Host *h, const HExit *x, LLVMValueRef slot, LLVMValueRef handle,
                       const CuStep *c, LLVMValueRef perf, LLVMValueRef cnt) {
  CudaCg *cc = h->cc;
  LLVMBuilderRef B = h->B;
  LLVMTypeRef p1[1] = {h->ptr};
  bool tf32 = cc->o->precision == CUDA_PRECISION_TF32;
  LLVMValueRef d[4]; /* x, y tensors; filter; convolution */
  static const char *const create[4] = {
      "cudnnCreateTensorDescriptor", "cudnnCreateTensorDescriptor", "cudnnCreateFilterDescriptor",
      "cudnnCreateConvolutionDescriptor"};
  for (int j = 0; j < 4; j++) {
    LLVMValueRef dpp = h_table_ptr(h, h->descs, slot, c->cidx * 4 + j);
    LLVMValueRef s2 = h_call(h, create[j], h->i32, p1, &dpp, 1);
    h_exit_if(h, x, LLVMBuildICmp(B, LLVMIntNE, s2, h_i32(h, 0), ""),
              LLVMBuildAdd(B, s2, h_i32(h, 100000), ""));
    d[j] = LLVMBuildLoad2(B, h->ptr, dpp, "");
  }
  LLVMValueRef st[6];
  LLVMTypeRef t7[7] = {h->ptr, h->i32, h->i32, h->i32, h->i32, h->i32, h->i32};
  /* NCHW (0) or NHWC (1), float (0) */
  LLVMValueRef fmt = h_i32(h, c->nchw ? 0 : 1);
  LLVMValueRef xa[7] = {
      d[0], fmt, h_i32(h, 0), h_i32(h, c->cn), h_i32(h, c->cc), h_i32(h, c->ch), h_i32(h, c->cw)};
  st[0] = h_call(h, "cudnnSetTensor4dDescriptor", h->i32, t7, xa, 7);
  LLVMValueRef ya[7] = {
      d[1], fmt, h_i32(h, 0), h_i32(h, c->cn), h_i32(h, c->ck), h_i32(h, c->cp), h_i32(h, c->cq)};
  st[1] = h_call(h, "cudnnSetTensor4dDescriptor", h->i32, t7, ya, 7);
  LLVMValueRef fa[7] = {d[2],
                        h_i32(h, 0),
                        fmt,
                        h_i32(h, c->ck),
                        h_i32(h, c->cc / c->groups),
                        h_i32(h, c->cr),
                        h_i32(h, c->cs)};
  st[2] = h_call(h, "cudnnSetFilter4dDescriptor", h->i32, t7, fa, 7);
  LLVMTypeRef t9[9] = {h->ptr, h->i32, h->i32, h->i32, h->i32, h->i32, h->i32, h->i32, h->i32};
  /* cross-correlation (1), float accumulation (0) */
  LLVMValueRef ca[9] = {d[3],
                        h_i32(h, c->pad[0]),
                        h_i32(h, c->pad[1]),
                        h_i32(h, c->stride[0]),
                        h_i32(h, c->stride[1]),
                        h_i32(h, c->dil[0]),
                        h_i32(h, c->dil[1]),
                        h_i32(h, 1),
                        h_i32(h, 0)};
  st[3] = h_call(h, "cudnnSetConvolution2dDescriptor", h->i32, t9, ca, 9);
  LLVMTypeRef t2[2] = {h->ptr, h->i32};
  LLVMValueRef ga[2] = {d[3], h_i32(h, c->groups)};
  st[4] = h_call(h, "cudnnSetConvolutionGroupCount", h->i32, t2, ga, 2);
  /* highest: FMA kernels only (no TF32); tf32: tensor cores allowed */
  LLVMValueRef ma[2] = {d[3], h_i32(h, tf32 ? 1 : 3)};
  st[5] = h_call(h, "cudnnSetConvolutionMathType", h->i32, t2, ma, 2);
  for (int j = 0; j < 6; j++)
    h_exit_if(h, x, LLVMBuildICmp(B, LLVMIntNE, st[j], h_i32(h, 0), ""),
              LLVMBuildAdd(B, st[j], h_i32(h, 100000), ""));
  /* time every algorithm once (cuDNN allocates its own buffers), fastest first */
  LLVMTypeRef t8[8] = {h->ptr, h->ptr, h->ptr, h->ptr, h->ptr, h->i32, h->ptr, h->ptr};
  LLVMValueRef fa8[8] = {
      handle, d[0], c->wgrad ? d[1] : d[2], d[3], c->wgrad ? d[2] : d[1], h_i32(h, 8), cnt, perf};
  LLVMValueRef sf = h_call(h,
                           c->wgrad ? "cudnnFindConvolutionBackwardFilterAlgorithm"
                                    : "cudnnFindConvolutionForwardAlgorithm",
                           h->i32, t8, fa8, 8);
  h_exit_if(h, x, LLVMBuildICmp(B, LLVMIntNE, sf, h_i32(h, 0), ""),
            LLVMBuildAdd(B, sf, h_i32(h, 100000), ""));
  LLVMValueRef n = LLVMBuildLoad2(B, h->i32, cnt, "");
  /* the first result that succeeded and whose workspace fits the reserve */
  LLVMValueRef pick = h_i32(h, -1);
  for (int q = 7; q >= 0; q--) {
    LLVMValueRef o4 = h_i64(h, q * 48 + 4), o16 = h_i64(h, q * 48 + 16);
    LLVMValueRef stq =
        LLVMBuildLoad2(B, h->i32, LLVMBuildInBoundsGEP2(B, h->i8, perf, &o4, 1, ""), "");
    LLVMValueRef memq =
        LLVMBuildLoad2(B, h->i64, LLVMBuildInBoundsGEP2(B, h->i8, perf, &o16, 1, ""), "");
    LLVMValueRef ok = LLVMBuildICmp(B, LLVMIntSLT, h_i32(h, q), n, "");
    ok = LLVMBuildAnd(B, ok, LLVMBuildICmp(B, LLVMIntEQ, stq, h_i32(h, 0), ""), "");
    ok = LLVMBuildAnd(B, ok, LLVMBuildICmp(B, LLVMIntULE, memq, h_i64(h, cc->ws_bytes), ""), "");
    pick = LLVMBuildSelect(B, ok, h_i32(h, q), pick, "");
  }
  h_exit_if(h, x, LLVMBuildICmp(B, LLVMIntSLT, pick, h_i32(h, 0), ""), h_i32(h, 3));
  LLVMValueRef base = LLVMBuildMul(B, LLVMBuildSExt(B, pick, h->i64, ""), h_i64(h, 48), "");
  LLVMValueRef algo =
      LLVMBuildLoad2(B, h->i32, LLVMBuildInBoundsGEP2(B, h->i8, perf, &base, 1, ""), "");
  LLVMBuildStore(B, algo, h_table_ptr(h, h->algos, slot, c->cidx));
  if (tf32) { /* run with the math type the algorithm was timed with */
    LLVMValueRef o28 = LLVMBuildAdd(B, base, h_i64(h, 28), "");
    LLVMValueRef mt =
        LLVMBuildLoad2(B, h->i32, LLVMBuildInBoundsGEP2(B, h->i8, perf, &o28, 1, ""), "");
    LLVMValueRef ma2[2] = {d[3], mt};
    LLVMValueRef sm = h_call(h, "cudnnSetConvolutionMathType", h->i32, t2, ma2, 2);
    h_exit_if(h, x, LLVMBuildICmp(B, LLVMIntNE, sm, h_i32(h, 0), ""),
              LLVMBuildAdd(B, sm, h_i32(h, 100000), ""));
  }
}

static void h_dnn_init(Host *h, const HExit *x, LLVMValueRef slot) {
  CudaCg *cc = h->cc;
  LLVMBuilderRef B = h->B;
  LLVMTypeRef p1[1] = {h->ptr};
  LLVMValueRef dp = h_slot_ptr(h, h->dnn, slot);
  LLVMValueRef s = h_call(h, "cudnnCreate", h->i32, p1, &dp, 1);
  h_exit_if(h, x, LLVMBuildICmp(B, LLVMIntNE, s, h_i32(h, 0), ""),
            LLVMBuildAdd(B, s, h_i32(h, 100000), ""));
  LLVMValueRef handle = LLVMBuildLoad2(B, h->ptr, dp, "");
  LLVMTypeRef perf_t = LLVMArrayType2(h->i8, 48 * 8);
  LLVMValueRef perf = LLVMBuildAlloca(B, perf_t, "perf");
  LLVMSetAlignment(perf, 8);
  LLVMValueRef cnt = LLVMBuildAlloca(B, h->i32, "count");
  for (int i = 0; i < cc->nsteps; i++)
    if (cc->steps[i].kind == CU_STEP_CONV) h_dnn_conv(h, x, slot, handle, &cc->steps[i], perf, cnt);
}

/* The cuFFT plan of every transform step for slot: cufftPlanMany in the basic data layout
 * (NULL embeds: batch contiguous transforms), its work area allocated by cuFFT; a failure
 * exits through x with 200000 + the cufftResult. */
static void h_fft_init(Host *h, const HExit *x, LLVMValueRef slot) {
  CudaCg *cc = h->cc;
  LLVMBuilderRef B = h->B;
  LLVMTypeRef nt = LLVMArrayType2(h->i32, 3);
  LLVMValueRef n = LLVMBuildAlloca(B, nt, "fft_n");
  LLVMTypeRef ps[11] = {h->ptr, h->i32, h->ptr, h->ptr, h->i32, h->i32,
                        h->ptr, h->i32, h->i32, h->i32, h->i32};
  for (int i = 0; i < cc->nsteps; i++) {
    const CuStep *s = &cc->steps[i];
    if (s->kind != CU_STEP_FFT) continue;
    for (int j = 0; j < s->fft_rank; j++) {
      LLVMValueRef ix[2] = {h_i64(h, 0), h_i64(h, j)};
      LLVMBuildStore(B, h_i32(h, s->fft_n[j]), LLVMBuildInBoundsGEP2(B, nt, n, ix, 2, ""));
    }
    LLVMValueRef nul = LLVMConstNull(h->ptr);
    LLVMValueRef a[11] = {h_table_ptr(h, h->ffts, slot, s->fidx),
                          h_i32(h, s->fft_rank),
                          n,
                          nul,
                          h_i32(h, 1),
                          h_i32(h, 0),
                          nul,
                          h_i32(h, 1),
                          h_i32(h, 0),
                          h_i32(h, s->fft_kind),
                          h_i32(h, s->batch)};
    LLVMValueRef st = h_call(h, "cufftPlanMany", h->i32, ps, a, 11);
    h_exit_if(h, x, LLVMBuildICmp(B, LLVMIntNE, st, h_i32(h, 0), ""),
              LLVMBuildAdd(B, st, h_i32(h, 200000), ""));
  }
}

/* NAME_cuda_init(): load the module into the current context once. */
static LLVMValueRef h_init_fn(Host *h, LLVMValueRef lookup) {
  CudaCg *cc = h->cc;
  char name[256];
  snprintf(name, sizeof name, "%s_cuda_init", cc->o->name);
  LLVMValueRef f = LLVMAddFunction(h->M, name, LLVMFunctionType(h->i32, NULL, 0, 0));
  h->fn = f;
  LLVMBuilderRef B = h->B;
  LLVMPositionBuilderAtEnd(B, LLVMAppendBasicBlockInContext(h->C, f, "entry"));
  LLVMValueRef cp = LLVMBuildAlloca(B, h->ptr, "ctx");
  LLVMValueRef mp = LLVMBuildAlloca(B, h->ptr, "mod");
  LLVMTypeRef p1[1] = {h->ptr};
  LLVMValueRef st = h_call(h, "cuCtxGetCurrent", h->i32, p1, &cp, 1);
  h_check(h, st, 0);
  LLVMValueRef ctx = LLVMBuildLoad2(B, h->ptr, cp, "");
  h_ret_if(h, LLVMBuildICmp(B, LLVMIntEQ, ctx, LLVMConstNull(h->ptr), ""), h_i32(h, 201));
  LLVMTypeRef lt = LLVMGlobalGetValueType(lookup);
  LLVMValueRef s0 = LLVMBuildCall2(B, lt, lookup, &ctx, 1, "");
  h_ret_if(h, LLVMBuildICmp(B, LLVMIntSGE, s0, h_i32(h, 0), ""), h_i32(h, 0));
  h_lock(h, true);
  /* everything below runs under the lock; every exit unlocks */
  LLVMBasicBlockRef unlock = LLVMAppendBasicBlockInContext(h->C, f, "unlock");
  LLVMBasicBlockRef cur = LLVMGetInsertBlock(B);
  LLVMPositionBuilderAtEnd(B, unlock);
  LLVMValueRef rv = LLVMBuildPhi(B, h->i32, "rv");
  h_lock(h, false);
  LLVMBuildRet(B, rv);
  LLVMPositionBuilderAtEnd(B, cur);
  HExit x = {unlock, rv};
  LLVMValueRef s1 = LLVMBuildCall2(B, lt, lookup, &ctx, 1, "");
  h_exit_if(h, &x, LLVMBuildICmp(B, LLVMIntSGE, s1, h_i32(h, 0), ""), h_i32(h, 0));
  /* a free slot: the first whose context is NULL */
  LLVMValueRef slot = h_i64(h, CU_SLOTS);
  for (int s = CU_SLOTS - 1; s >= 0; s--) {
    LLVMValueRef v = LLVMBuildLoad2(B, h->ptr, h_slot_ptr(h, h->ctxs, h_i64(h, s)), "");
    LLVMSetOrdering(v, LLVMAtomicOrderingMonotonic);
    LLVMSetAlignment(v, 8);
    slot = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntEQ, v, LLVMConstNull(h->ptr), ""),
                           h_i64(h, s), slot, "");
  }
  h_exit_if(h, &x, LLVMBuildICmp(B, LLVMIntEQ, slot, h_i64(h, CU_SLOTS), ""), h_i32(h, 2));
  LLVMTypeRef p2[2] = {h->ptr, h->ptr};
  LLVMValueRef a2[2] = {mp, h->cubin};
  st = h_call(h, "cuModuleLoadData", h->i32, p2, a2, 2);
  /* the cubin does not fit this GPU: let the driver compile the PTX */
  LLVMBasicBlockRef jit = LLVMAppendBasicBlockInContext(h->C, f, "jit");
  LLVMBasicBlockRef loaded = LLVMAppendBasicBlockInContext(h->C, f, "loaded");
  LLVMBasicBlockRef from = LLVMGetInsertBlock(B);
  LLVMBuildCondBr(B, LLVMBuildICmp(B, LLVMIntEQ, st, h_i32(h, 0), ""), loaded, jit);
  LLVMPositionBuilderAtEnd(B, jit);
  LLVMValueRef a3[2] = {mp, h->ptx};
  LLVMValueRef st2 = h_call(h, "cuModuleLoadData", h->i32, p2, a3, 2);
  LLVMBasicBlockRef jit_end = LLVMGetInsertBlock(B);
  LLVMBuildBr(B, loaded);
  LLVMPositionBuilderAtEnd(B, loaded);
  LLVMValueRef lst = LLVMBuildPhi(B, h->i32, "");
  LLVMAddIncoming(lst, &st, &from, 1);
  LLVMAddIncoming(lst, &st2, &jit_end, 1);
  h_exit_if(h, &x, LLVMBuildICmp(B, LLVMIntNE, lst, h_i32(h, 0), ""), lst);
  LLVMValueRef mod = LLVMBuildLoad2(B, h->ptr, mp, "");
  LLVMBuildStore(B, mod, h_slot_ptr(h, h->mods, slot));
  LLVMTypeRef p3[3] = {h->ptr, h->ptr, h->ptr};
  for (int i = 0; i < cc->nkernels; i++) {
    LLVMValueRef fp = h_table_ptr(h, h->fns, slot, i);
    LLVMValueRef kx[2] = {h_i64(h, 0), h_i64(h, i)};
    LLVMValueRef np = LLVMBuildLoad2(
        B, h->ptr,
        LLVMBuildInBoundsGEP2(B, LLVMGlobalGetValueType(h->knames), h->knames, kx, 2, ""), "");
    LLVMValueRef a[3] = {fp, mod, np};
    LLVMValueRef s = h_call(h, "cuModuleGetFunction", h->i32, p3, a, 3);
    h_exit_if(h, &x, LLVMBuildICmp(B, LLVMIntNE, s, h_i32(h, 0), ""), s);
  }
  if (cc->uses_cublas) {
    LLVMValueRef bp = h_slot_ptr(h, h->blas, slot);
    LLVMValueRef s = h_call(h, "cublasCreate_v2", h->i32, p1, &bp, 1);
    h_exit_if(h, &x, LLVMBuildICmp(B, LLVMIntNE, s, h_i32(h, 0), ""),
              LLVMBuildAdd(B, s, h_i32(h, 1000), ""));
  }
  if (cc->nlt) h_lt_init(h, &x, slot);
  if (cc->nconvs) h_dnn_init(h, &x, slot);
  if (cc->nffts) h_fft_init(h, &x, slot);
  LLVMValueRef pub = LLVMBuildStore(B, ctx, h_slot_ptr(h, h->ctxs, slot));
  LLVMSetOrdering(pub, LLVMAtomicOrderingRelease);
  LLVMSetAlignment(pub, 8);
  LLVMValueRef zero = h_i32(h, 0);
  LLVMBasicBlockRef here = LLVMGetInsertBlock(B);
  LLVMBuildBr(B, unlock);
  LLVMAddIncoming(rv, &zero, &here, 1);
  return f;
}

/* Device address of p inside NAME_cuda_run. */
static LLVMValueRef h_addr(Host *h, const CuPtr *p, LLVMValueRef args, LLVMValueRef results,
                           LLVMValueRef temp) {
  LLVMValueRef base = temp;
  if (p->base != CU_TEMP) {
    LLVMValueRef ix = h_i64(h, p->index);
    LLVMValueRef arr = p->base == CU_ARG ? args : results;
    base = LLVMBuildLoad2(h->B, h->ptr, LLVMBuildInBoundsGEP2(h->B, h->ptr, arr, &ix, 1, ""), "");
  }
  if (!p->offset) return base;
  LLVMValueRef off = h_i64(h, p->offset);
  return LLVMBuildGEP2(h->B, h->i8, base, &off, 1, "");
}

/* What NAME_cuda_run's step emitters share: its parameters, the context's slot, the GEMMs'
 * scalars (alpha, beta: stack slots of 8 bytes), a word for a bias pointer, and a kernel
 * launch's parameter values (vals, of type vt) and their addresses (pp). */
typedef struct HRun {
  LLVMValueRef args, results, temp, stream, slot, alpha, beta, word;
  LLVMValueRef vals, pp;
  LLVMTypeRef vt;
} HRun;

/* The device address of p inside NAME_cuda_run (h_addr with the run's arrays). */
static LLVMValueRef h_run_addr(Host *h, const HRun *r, const CuPtr *p) {
  return h_addr(h, p, r->args, r->results, r->temp);
}

/* A library call on a handle shared by the threads that run the model: under the lock, the
 * handle set to the stream (set_stream(handle, stream)), then fn(a); the run returns the first
 * failing status plus add. */
static void h_locked_call(Host *h, const char *set_stream, LLVMValueRef handle, LLVMValueRef stream,
                          const char *fn, LLVMTypeRef *ps, LLVMValueRef *a, int n, int add) {
  h_lock(h, true);
  LLVMTypeRef sp[2] = {LLVMTypeOf(handle), h->ptr}; /* (cufftHandle is an int) */
  LLVMValueRef sa[2] = {handle, stream};
  LLVMValueRef st1 = h_call(h, set_stream, h->i32, sp, sa, 2);
  LLVMValueRef st2 = h_call(h, fn, h->i32, ps, a, n);
  h_lock(h, false);
  LLVMValueRef st =
      LLVMBuildSelect(h->B, LLVMBuildICmp(h->B, LLVMIntNE, st1, h_i32(h, 0), ""), st1, st2, "");
  h_check(h, st, add);
}

/* GEMM step s through cublasGemmStridedBatchedEx on the run's stream (handle: the slot's
 * cuBLAS handle, set to the stream under the lock). */
static void h_run_gemm(Host *h, const CuStep *s, const HRun *r, LLVMValueRef handle) {
  CudaCg *cc = h->cc;
  LLVMBuilderRef B = h->B;
  CuGemmTypes gt = cuda_gemm_types(cc, s);
  if (gt.scalar == DT_F64) {
    LLVMBuildStore(B, LLVMConstReal(h->f64, 1.0), r->alpha);
    LLVMBuildStore(B, LLVMConstReal(h->f64, 0.0), r->beta);
  } else if (gt.scalar == DT_S32) {
    LLVMBuildStore(B, h_i32(h, 1), r->alpha);
    LLVMBuildStore(B, h_i32(h, 0), r->beta);
  } else {
    LLVMBuildStore(B, LLVMConstReal(h->f32, 1.0), r->alpha);
    LLVMBuildStore(B, LLVMConstReal(h->f32, 0.0), r->beta);
  }
  LLVMTypeRef gp[23] = {h->ptr, h->i32, h->i32, h->i32, h->i32, h->i32, h->ptr, h->ptr,
                        h->i32, h->i32, h->i64, h->ptr, h->i32, h->i32, h->i64, h->ptr,
                        h->ptr, h->i32, h->i32, h->i64, h->i32, h->i32, h->i32};
  LLVMValueRef ga[23] = {handle,
                         h_i32(h, s->transa),
                         h_i32(h, s->transb),
                         h_i32(h, s->m),
                         h_i32(h, s->n),
                         h_i32(h, s->k),
                         r->alpha,
                         h_run_addr(h, r, &s->a),
                         h_i32(h, gt.ab),
                         h_i32(h, s->lda),
                         h_i64(h, s->sa),
                         h_run_addr(h, r, &s->b),
                         h_i32(h, gt.ab),
                         h_i32(h, s->ldb),
                         h_i64(h, s->sb),
                         r->beta,
                         h_run_addr(h, r, &s->c),
                         h_i32(h, gt.c),
                         h_i32(h, s->ldc),
                         h_i64(h, s->sc),
                         h_i32(h, s->batch),
                         h_i32(h, gt.compute),
                         h_i32(h, -1)};
  h_locked_call(h, "cublasSetStream_v2", handle, r->stream, "cublasGemmStridedBatchedEx", gp, ga,
                23, 1000);
}

/* Convolution step s through cuDNN on the run's stream, with the slot's descriptors and
 * algorithm (dnn: the slot's handle, set to the stream under the lock). */
static void h_run_conv(Host *h, const CuStep *s, const HRun *r, LLVMValueRef dnn) {
  CudaCg *cc = h->cc;
  LLVMBuilderRef B = h->B;
  LLVMValueRef d[4];
  for (int j = 0; j < 4; j++)
    d[j] = LLVMBuildLoad2(B, h->ptr, h_table_ptr(h, h->descs, r->slot, s->cidx * 4 + j), "");
  LLVMValueRef algo = LLVMBuildLoad2(B, h->i32, h_table_ptr(h, h->algos, r->slot, s->cidx), "");
  LLVMBuildStore(B, LLVMConstReal(h->f32, 1.0), r->alpha);
  LLVMBuildStore(B, LLVMConstReal(h->f32, 0.0), r->beta);
  LLVMTypeRef fp[13] = {h->ptr, h->ptr, h->ptr, h->ptr, h->ptr, h->ptr, h->ptr,
                        h->i32, h->ptr, h->i64, h->ptr, h->ptr, h->ptr};
  /* forward: (x, w) -> y; backward filter: (x, dy = y) -> dw = w */
  int in2 = s->wgrad ? 1 : 2, out = s->wgrad ? 2 : 1;
  LLVMValueRef fa[13] = {dnn,
                         r->alpha,
                         d[0],
                         h_run_addr(h, r, &s->x),
                         d[in2],
                         h_run_addr(h, r, s->wgrad ? &s->y : &s->w),
                         d[3],
                         algo,
                         h_run_addr(h, r, &s->ws),
                         h_i64(h, cc->ws_bytes),
                         r->beta,
                         d[out],
                         h_run_addr(h, r, s->wgrad ? &s->w : &s->y)};
  h_locked_call(h, "cudnnSetStream", dnn, r->stream,
                s->wgrad ? "cudnnConvolutionBackwardFilter" : "cudnnConvolutionForward", fp, fa, 13,
                100000);
}

/* Transform step s through cufftExec* with the slot's plan, set to the run's stream under the
 * lock (a plan is not safe to use from two threads at once). */
static void h_run_fft(Host *h, const CuStep *s, const HRun *r) {
  LLVMValueRef plan = LLVMBuildLoad2(h->B, h->i32, h_table_ptr(h, h->ffts, r->slot, s->fidx), "");
  bool c2c = s->fft_kind == 0x29 || s->fft_kind == 0x69;
  LLVMTypeRef ps[4] = {h->i32, h->ptr, h->ptr, h->i32};
  LLVMValueRef a[4] = {plan, h_run_addr(h, r, &s->x), h_run_addr(h, r, &s->y),
                       h_i32(h, s->fft_dir)};
  h_locked_call(h, "cufftSetStream", plan, r->stream, cuda_fft_exec_name(s), ps, a, c2c ? 4 : 3,
                200000);
}

/* cublasLtMatmul of cuBLASLt GEMM step s with the slot's descriptors and algorithm (no lock:
 * it is safe from several threads): D = A B + beta C at the addresses abcd, beta 1 where a fused
 * residual is C, else 0; its status. */
static LLVMValueRef h_lt_matmul(Host *h, const CuStep *s, const HRun *r, const LLVMValueRef *abcd) {
  LLVMBuilderRef B = h->B;
  LLVMBuildStore(B, LLVMConstReal(h->f32, 1.0), r->alpha);
  LLVMBuildStore(B, LLVMConstReal(h->f32, s->epi & CU_EPI_RESIDUAL ? 1.0 : 0.0), r->beta);
  LLVMValueRef d[4];
  for (int j = 0; j < 4; j++)
    d[j] = LLVMBuildLoad2(B, h->ptr, h_table_ptr(h, h->ltd, r->slot, s->lidx * 4 + j), "");
  LLVMTypeRef ps[16] = {h->ptr, h->ptr, h->ptr, h->ptr, h->ptr, h->ptr, h->ptr, h->ptr,
                        h->ptr, h->ptr, h->ptr, h->ptr, h->ptr, h->ptr, h->i64, h->ptr};
  LLVMValueRef a[16] = {LLVMBuildLoad2(B, h->ptr, h_slot_ptr(h, h->lth, r->slot), ""),
                        d[0],
                        r->alpha,
                        abcd[0],
                        d[1],
                        abcd[1],
                        d[2],
                        r->beta,
                        abcd[2],
                        d[3],
                        abcd[3],
                        d[3],
                        h_table_ptr(h, h->lta, r->slot, s->lidx * 8),
                        LLVMConstNull(h->ptr),
                        h_i64(h, 0),
                        r->stream};
  return h_call(h, "cublasLtMatmul", h->i32, ps, a, 16);
}

/* Fp8 GEMM step s on the stream through cuBLASLt (D is C). */
static void h_lt_run(Host *h, const CuStep *s, const HRun *r) {
  LLVMValueRef c = h_run_addr(h, r, &s->c);
  LLVMValueRef abcd[4] = {h_run_addr(h, r, &s->a), h_run_addr(h, r, &s->b), c, c};
  h_check(h, h_lt_matmul(h, s, r, abcd), 1000);
}

/* Kernel step s launched on the run's stream. */
static void h_run_kernel(Host *h, const CuStep *s, const HRun *r) {
  LLVMBuilderRef B = h->B;
  for (int p = 0; p < s->nparams; p++) {
    LLVMValueRef ix[2] = {h_i64(h, 0), h_i64(h, p)};
    LLVMBuildStore(B, h_run_addr(h, r, &s->params[p]),
                   LLVMBuildInBoundsGEP2(B, r->vt, r->vals, ix, 2, ""));
  }
  for (int j = 0; j < s->nscalars; j++) { /* an i64 in the 8 bytes of its slot */
    LLVMValueRef ix[2] = {h_i64(h, 0), h_i64(h, s->nparams + j)};
    LLVMBuildStore(B, h_i64(h, s->scalar[j]), LLVMBuildInBoundsGEP2(B, r->vt, r->vals, ix, 2, ""));
  }
  LLVMValueRef fn = LLVMBuildLoad2(B, h->ptr, h_table_ptr(h, h->fns, r->slot, s->kidx), "");
  LLVMTypeRef lp[11] = {h->ptr, h->i32, h->i32, h->i32, h->i32, h->i32,
                        h->i32, h->i32, h->ptr, h->ptr, h->ptr};
  LLVMValueRef la[11] = {
      fn,          h_i32(h, s->grid), h_i32(h, 1), h_i32(h, 1), h_i32(h, s->block),   h_i32(h, 1),
      h_i32(h, 1), h_i32(h, 0),       r->stream,   r->pp,       LLVMConstNull(h->ptr)};
  h_check(h, h_call(h, "cuLaunchKernel", h->i32, lp, la, 11), 0);
}

/* Whether any of the n addresses v is less aligned than h_align assumed of its CuPtr (an i1). */
static LLVMValueRef h_misaligned(Host *h, const CuPtr *const *p, const LLVMValueRef *v, int n) {
  LLVMValueRef bits = h_i64(h, 0);
  for (int j = 0; j < n; j++) {
    LLVMValueRef low = LLVMBuildAnd(h->B, LLVMBuildPtrToInt(h->B, v[j], h->i64, ""),
                                    h_i64(h, h_align(p[j]) - 1), "");
    bits = LLVMBuildOr(h->B, bits, low, "");
  }
  return LLVMBuildICmp(h->B, LLVMIntNE, bits, h_i64(h, 0), "");
}

/* cublasLtMatmul of fused step s: D = relu(A B + C + bias) as its epilogue says, C the residual
 * (beta 1) or D (beta 0). The bias pointer is an attribute of the descriptor that the threads
 * running the model share: set and used under the lock. */
static void h_lt_epilogue_run(Host *h, const CuStep *s, const HRun *r, const LLVMValueRef *abcd,
                              LLVMValueRef bias) {
  LLVMBuilderRef B = h->B;
  LLVMValueRef st = h_i32(h, 0);
  if (bias) {
    h_lock(h, true);
    LLVMBuildStore(B, bias, r->word);
    LLVMValueRef desc = LLVMBuildLoad2(B, h->ptr, h_table_ptr(h, h->ltd, r->slot, s->lidx * 4), "");
    LLVMTypeRef ps[4] = {h->ptr, h->i32, h->ptr, h->i64};
    LLVMValueRef a[4] = {desc, h_i32(h, 8 /* BIAS_POINTER */), r->word, h_i64(h, 8)};
    st = h_call(h, "cublasLtMatmulDescSetAttribute", h->i32, ps, a, 4);
  }
  LLVMValueRef mm = h_lt_matmul(h, s, r, abcd);
  if (bias) h_lock(h, false);
  st = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntNE, st, h_i32(h, 0), ""), st, mm, "");
  h_check(h, st, 1000);
}

/* Fused GEMM step s (cuda_gemm_epilogue.c): through cuBLASLt with its epilogue where this
 * context has an algorithm for it and every pointer is as aligned as the heuristic assumed;
 * else unfused, as before fusion: cuBLAS writing the product at uc (beta 0), then the epilogue
 * kernel (step s->fb). blas: the slot's cuBLAS handle. */
static void h_lt_fused(Host *h, const CuStep *s, const HRun *r, LLVMValueRef blas) {
  LLVMBuilderRef B = h->B;
  bool res = s->epi & CU_EPI_RESIDUAL, bias = s->epi & CU_EPI_BIAS;
  const CuPtr *p[5] = {&s->a, &s->b, res ? &s->res : &s->c, &s->c, &s->bias};
  LLVMValueRef v[5];
  for (int j = 0; j < (bias ? 5 : 4); j++)
    v[j] = h_run_addr(h, r, p[j]);
  LLVMValueRef flag = LLVMBuildLoad2(B, h->i8, h_table_ptr(h, h->ltf, r->slot, s->lidx), "");
  LLVMValueRef unfused =
      LLVMBuildOr(B, LLVMBuildICmp(B, LLVMIntNE, flag, LLVMConstInt(h->i8, 0, 0), ""),
                  h_misaligned(h, p, v, bias ? 5 : 4), "");
  LLVMBasicBlockRef ub = LLVMAppendBasicBlockInContext(h->C, h->fn, "unfused");
  LLVMBasicBlockRef fb = LLVMAppendBasicBlockInContext(h->C, h->fn, "fused");
  LLVMBasicBlockRef join = LLVMAppendBasicBlockInContext(h->C, h->fn, "joined");
  LLVMBuildCondBr(B, unfused, ub, fb);
  LLVMPositionBuilderAtEnd(B, ub);
  CuStep u = *s;
  u.dt = s->udt, u.c = s->uc, u.epi = 0;
  h_run_gemm(h, &u, r, blas);
  h_run_kernel(h, &h->cc->steps[s->fb], r);
  LLVMBuildBr(B, join);
  LLVMPositionBuilderAtEnd(B, fb);
  h_lt_epilogue_run(h, s, r, v, bias ? LLVMBuildPtrToInt(B, v[4], h->i64, "") : NULL);
  LLVMBuildBr(B, join);
  LLVMPositionBuilderAtEnd(B, join);
}

/* ------------------------------------------------------------------ loops in NAME_cuda_run
 *
 * Steps run in order, but for the control steps of while loops (cuda_loop.c): every step a
 * branch or jump goes to starts a block of its own; a loop's exit test reads its predicate
 * back (an asynchronous copy to a stack byte, then the stream synchronized) or tests a host
 * counter; a copy from a constant goes from the host (the constant's bytes in this object). */
typedef struct HFlow {
  LLVMBasicBlockRef *at; /* per step (and the end): the block that starts there, or NULL */
  LLVMValueRef counters; /* [ncounters x i64] on the stack */
  LLVMValueRef byte;     /* the predicate read back */
  const HRun *r;
} HFlow;

static HFlow h_flow_begin(Host *h, const HRun *r) {
  CudaCg *cc = h->cc;
  HFlow fl = {hlo_arena_alloc(cc->cg.scratch, sizeof(LLVMBasicBlockRef) * (size_t)(cc->nsteps + 1)),
              NULL, NULL, r};
  memset(fl.at, 0, sizeof(LLVMBasicBlockRef) * (size_t)(cc->nsteps + 1));
  for (int i = 0; i < cc->nsteps; i++) {
    const CuStep *s = &cc->steps[i];
    if (s->kind == CU_STEP_BRANCH || s->kind == CU_STEP_COUNT || s->kind == CU_STEP_JUMP)
      if (!fl.at[s->target]) fl.at[s->target] = LLVMAppendBasicBlockInContext(h->C, h->fn, "step");
  }
  if (cc->ncounters)
    fl.counters =
        LLVMBuildAlloca(h->B, LLVMArrayType2(h->i64, (uint64_t)cc->ncounters), "counters");
  fl.byte = LLVMBuildAlloca(h->B, h->i8, "pred");
  return fl;
}

/* Before step i: continue into the block that starts there, if any. */
static void h_flow_at(Host *h, const HFlow *fl, int i) {
  if (!fl->at[i]) return;
  LLVMBuildBr(h->B, fl->at[i]);
  LLVMPositionBuilderAtEnd(h->B, fl->at[i]);
}

static LLVMValueRef h_counter(Host *h, const HFlow *fl, int c) {
  LLVMValueRef ix[2] = {h_i64(h, 0), h_i64(h, c)};
  return LLVMBuildInBoundsGEP2(h->B, LLVMArrayType2(h->i64, (uint64_t)h->cc->ncounters),
                               fl->counters, ix, 2, "");
}

/* A copy from a constant's bytes to the device: a memset where the bytes repeat one 1-, 2- or
 * 4-byte value (a loop counter's start: no pageable copy, which a graph cannot capture), else
 * a copy from the bytes kept in this object. */
static void h_copy_const(Host *h, const HFlow *fl, const CuStep *s) {
  LLVMValueRef dst = LLVMBuildPtrToInt(h->B, h_run_addr(h, fl->r, &s->dst), h->i64, "");
  int width;
  uint32_t value;
  if (cuda_graph_memset(s, &width, &value)) {
    static const char *const fn[5] = {NULL, "cuMemsetD8Async", "cuMemsetD16Async", NULL,
                                      "cuMemsetD32Async"};
    LLVMTypeRef ms[4] = {h->i64,
                         width == 4   ? h->i32
                         : width == 2 ? LLVMInt16TypeInContext(h->C)
                                      : h->i8,
                         h->i64, h->ptr};
    LLVMValueRef ma[4] = {dst, LLVMConstInt(ms[1], value, 0), h_i64(h, s->bytes / width),
                          fl->r->stream};
    h_check(h, h_call(h, fn[width], h->i32, ms, ma, 4), 0);
    return;
  }
  const char *bytes = (const char *)s->hconst->data + s->src.offset;
  LLVMValueRef init = LLVMConstStringInContext(h->C, bytes, (unsigned)s->bytes, 1);
  LLVMValueRef g = h_global(h, LLVMTypeOf(init), "hloc_loop_const", init, true);
  LLVMTypeRef cp4[4] = {h->i64, h->ptr, h->i64, h->ptr};
  LLVMValueRef ca[4] = {dst, g, h_i64(h, s->bytes), fl->r->stream};
  h_check(h, h_call(h, "cuMemcpyHtoDAsync_v2", h->i32, cp4, ca, 4), 0);
}

/* The control steps and copies from constants; false for the other steps. */
static bool h_flow_step(Host *h, const HFlow *fl, const CuStep *s) {
  LLVMBuilderRef B = h->B;
  if (s->kind == CU_STEP_COPY && s->hconst) {
    h_copy_const(h, fl, s);
  } else if (s->kind == CU_STEP_SET) {
    LLVMBuildStore(B, h_i64(h, s->trips), h_counter(h, fl, s->counter));
  } else if (s->kind == CU_STEP_COUNT) {
    LLVMValueRef p = h_counter(h, fl, s->counter), v = LLVMBuildLoad2(B, h->i64, p, "");
    LLVMBuildStore(B, LLVMBuildSub(B, v, h_i64(h, 1), ""), p);
    h_branch(h, LLVMBuildICmp(B, LLVMIntEQ, v, h_i64(h, 0), ""), fl->at[s->target]);
  } else if (s->kind == CU_STEP_BRANCH) {
    LLVMTypeRef cp4[4] = {h->ptr, h->i64, h->i64, h->ptr};
    LLVMValueRef ca[4] = {fl->byte, LLVMBuildPtrToInt(B, h_run_addr(h, fl->r, &s->src), h->i64, ""),
                          h_i64(h, 1), fl->r->stream};
    h_check(h, h_call(h, "cuMemcpyDtoHAsync_v2", h->i32, cp4, ca, 4), 0);
    LLVMTypeRef p1[1] = {h->ptr};
    h_check(h, h_call(h, "cuStreamSynchronize", h->i32, p1, &ca[3], 1), 0);
    LLVMValueRef v = LLVMBuildLoad2(B, h->i8, fl->byte, "");
    h_branch(h, LLVMBuildICmp(B, LLVMIntEQ, v, LLVMConstInt(h->i8, 0, 0), ""), fl->at[s->target]);
  } else if (s->kind == CU_STEP_JUMP) {
    LLVMBuildBr(B, fl->at[s->target]);
    LLVMPositionBuilderAtEnd(B, LLVMAppendBasicBlockInContext(h->C, h->fn, "after"));
  } else {
    return false;
  }
  return true;
}

/* The steps of NAME_cuda_run in order on a stream, for the context in a slot: an internal
 * function i32 (args, results, temp, stream, slot i64) that NAME_cuda_run calls directly or
 * through its graph replay (cuda_graph.c). */
static LLVMValueRef h_steps_fn(Host *h) {
  CudaCg *cc = h->cc;
  LLVMBuilderRef B = h->B;
  LLVMTypeRef ps[5] = {h->ptr, h->ptr, h->ptr, h->ptr, h->i64};
  LLVMValueRef f = LLVMAddFunction(h->M, "hloc_cuda_steps", LLVMFunctionType(h->i32, ps, 5, 0));
  LLVMSetLinkage(f, LLVMInternalLinkage);
  h->fn = f;
  LLVMValueRef args = LLVMGetParam(f, 0), results = LLVMGetParam(f, 1), temp = LLVMGetParam(f, 2);
  LLVMValueRef stream = LLVMGetParam(f, 3), slot = LLVMGetParam(f, 4);
  LLVMPositionBuilderAtEnd(B, LLVMAppendBasicBlockInContext(h->C, f, "entry"));
  int maxp = 1;
  for (int i = 0; i < cc->nsteps; i++)
    if (cc->steps[i].nparams + cc->steps[i].nscalars > maxp)
      maxp = cc->steps[i].nparams + cc->steps[i].nscalars;
  LLVMTypeRef vt = LLVMArrayType2(h->ptr, (uint64_t)maxp);
  LLVMValueRef vals = LLVMBuildAlloca(B, vt, "vals");
  LLVMValueRef pp = LLVMBuildAlloca(B, vt, "pp");
  LLVMValueRef alpha = LLVMBuildAlloca(B, h->f64, "alpha");
  LLVMValueRef beta = LLVMBuildAlloca(B, h->f64, "beta");
  LLVMValueRef word = LLVMBuildAlloca(B, h->i64, "word");
  for (int i = 0; i < maxp; i++) {
    LLVMValueRef ix[2] = {h_i64(h, 0), h_i64(h, i)};
    LLVMBuildStore(B, LLVMBuildInBoundsGEP2(B, vt, vals, ix, 2, ""),
                   LLVMBuildInBoundsGEP2(B, vt, pp, ix, 2, ""));
  }
  LLVMValueRef handle =
      cc->uses_cublas ? LLVMBuildLoad2(B, h->ptr, h_slot_ptr(h, h->blas, slot), "") : NULL;
  LLVMValueRef dnn = cc->nconvs ? LLVMBuildLoad2(B, h->ptr, h_slot_ptr(h, h->dnn, slot), "") : NULL;
  HRun r = {args, results, temp, stream, slot, alpha, beta, word, vals, pp, vt};
  HFlow fl = h_flow_begin(h, &r);
  for (int i = 0; i < cc->nsteps; i++) {
    const CuStep *s = &cc->steps[i];
    h_flow_at(h, &fl, i);
    if (h_flow_step(h, &fl, s)) continue;
    if (s->kind == CU_STEP_KERNEL && s->fb >= 0) {
      continue; /* a fused GEMM's fallback: launched by h_lt_fused where it is needed */
    } else if (s->kind == CU_STEP_KERNEL) {
      h_run_kernel(h, s, &r);
    } else if (s->kind == CU_STEP_GEMM && s->epi) {
      h_lt_fused(h, s, &r, handle);
    } else if (s->kind == CU_STEP_GEMM && s->lidx >= 0) {
      h_lt_run(h, s, &r);
    } else if (s->kind == CU_STEP_GEMM) {
      h_run_gemm(h, s, &r, handle);
    } else if (s->kind == CU_STEP_CONV) {
      h_run_conv(h, s, &r, dnn);
    } else if (s->kind == CU_STEP_FFT) {
      h_run_fft(h, s, &r);
    } else if (s->bytes > 0) { /* (an empty copy is no node of a graph) */
      LLVMTypeRef cp4[4] = {h->i64, h->i64, h->i64, h->ptr};
      LLVMValueRef ca[4] = {LLVMBuildPtrToInt(B, h_run_addr(h, &r, &s->dst), h->i64, ""),
                            LLVMBuildPtrToInt(B, h_run_addr(h, &r, &s->src), h->i64, ""),
                            h_i64(h, s->bytes), stream};
      h_check(h, h_call(h, "cuMemcpyDtoDAsync_v2", h->i32, cp4, ca, 4), 0);
    }
  }
  h_flow_at(h, &fl, cc->nsteps);
  LLVMBuildRet(B, h_i32(h, 0));
  return f;
}

/* NAME_cuda_run: the arrays checked, the module loaded into the current context on first use,
 * then its steps (through the graph replay where cc->graph_nodes says the steps are captured). */
static void h_run_fn(Host *h, LLVMValueRef lookup, LLVMValueRef init) {
  CudaCg *cc = h->cc;
  LLVMBuilderRef B = h->B;
  LLVMValueRef steps = h_steps_fn(h);
  if (cc->graph_nodes > 0) steps = cuda_graph_fn(h, steps);
  char name[256];
  snprintf(name, sizeof name, "%s_cuda_run", cc->o->name);
  LLVMTypeRef ps[4] = {h->ptr, h->ptr, h->ptr, h->ptr};
  LLVMValueRef f = LLVMAddFunction(h->M, name, LLVMFunctionType(h->i32, ps, 4, 0));
  h->fn = f;
  LLVMValueRef args = LLVMGetParam(f, 0), results = LLVMGetParam(f, 1), temp = LLVMGetParam(f, 2);
  LLVMValueRef stream = LLVMGetParam(f, 3);
  LLVMPositionBuilderAtEnd(B, LLVMAppendBasicBlockInContext(h->C, f, "entry"));
  LLVMValueRef cp = LLVMBuildAlloca(B, h->ptr, "ctx");
  LLVMValueRef nul = LLVMConstNull(h->ptr);
  LLVMValueRef bad = LLVMConstInt(LLVMInt1TypeInContext(h->C), 0, 0);
  if (cc->cg.entry->nparams > 0)
    bad = LLVMBuildOr(B, bad, LLVMBuildICmp(B, LLVMIntEQ, args, nul, ""), "");
  if (cc->plan.nresults > 0)
    bad = LLVMBuildOr(B, bad, LLVMBuildICmp(B, LLVMIntEQ, results, nul, ""), "");
  if (cc->temp_bytes > 0) bad = LLVMBuildOr(B, bad, LLVMBuildICmp(B, LLVMIntEQ, temp, nul, ""), "");
  h_ret_if(h, bad, h_i32(h, 1));
  LLVMTypeRef p1[1] = {h->ptr};
  h_check(h, h_call(h, "cuCtxGetCurrent", h->i32, p1, &cp, 1), 0);
  LLVMValueRef ctx = LLVMBuildLoad2(B, h->ptr, cp, "");
  LLVMTypeRef lt = LLVMGlobalGetValueType(lookup);
  LLVMValueRef s0 = LLVMBuildCall2(B, lt, lookup, &ctx, 1, "");
  /* first use in this context: load */
  LLVMBasicBlockRef load = LLVMAppendBasicBlockInContext(h->C, f, "load");
  LLVMBasicBlockRef ready = LLVMAppendBasicBlockInContext(h->C, f, "ready");
  LLVMBasicBlockRef from = LLVMGetInsertBlock(B);
  LLVMBuildCondBr(B, LLVMBuildICmp(B, LLVMIntSLT, s0, h_i32(h, 0), ""), load, ready);
  LLVMPositionBuilderAtEnd(B, load);
  h_check(h, LLVMBuildCall2(B, LLVMGlobalGetValueType(init), init, NULL, 0, ""), 0);
  LLVMValueRef s1 = LLVMBuildCall2(B, lt, lookup, &ctx, 1, "");
  h_ret_if(h, LLVMBuildICmp(B, LLVMIntSLT, s1, h_i32(h, 0), ""), h_i32(h, 201));
  LLVMBasicBlockRef load_end = LLVMGetInsertBlock(B);
  LLVMBuildBr(B, ready);
  LLVMPositionBuilderAtEnd(B, ready);
  LLVMValueRef slot32 = LLVMBuildPhi(B, h->i32, "slot");
  LLVMAddIncoming(slot32, &s0, &from, 1);
  LLVMAddIncoming(slot32, &s1, &load_end, 1);
  LLVMValueRef a5[5] = {args, results, temp, stream, LLVMBuildSExt(B, slot32, h->i64, "")};
  LLVMBuildRet(B, LLVMBuildCall2(B, LLVMGlobalGetValueType(steps), steps, a5, 5, ""));
}

/* NAME_arg_info / NAME_result_info, as the CPU target lays them out. */
static void h_info(Host *h, const char *which, int n, const char **names, const Shape **shapes) {
  const char *nm = h->cc->o->name;
  LLVMTypeRef fields[5] = {h->ptr, h->ptr, h->i32, LLVMArrayType2(h->i64, 8), h->i64};
  LLVMTypeRef st = LLVMStructTypeInContext(h->C, fields, 5, 0);
  LLVMValueRef *el = calloc((size_t)(n ? n : 1), sizeof *el);
  for (int i = 0; i < n; i++) {
    char g[512];
    snprintf(g, sizeof g, "%s_%s_name%d", nm, which, i);
    LLVMValueRef sname = h_str(h, names[i], g);
    snprintf(g, sizeof g, "%s_%s_dtype%d", nm, which, i);
    LLVMValueRef dt = h_str(h, hlo_dtype_name(shapes[i]->dt), g);
    LLVMValueRef dims[8];
    for (int d = 0; d < 8; d++)
      dims[d] = h_i64(h, d < shapes[i]->rank ? shapes[i]->dims[d] : 0);
    LLVMValueRef v[5] = {sname, dt, h_i32(h, shapes[i]->rank), LLVMConstArray2(h->i64, dims, 8),
                         h_i64(h, (long long)hlo_shape_bytes(shapes[i]))};
    el[i] = LLVMConstNamedStruct(st, v, 5);
  }
  LLVMValueRef arr = LLVMConstArray2(st, el, (uint64_t)n);
  free(el);
  char g[512];
  snprintf(g, sizeof g, "%s_%s_info", nm, which);
  LLVMValueRef gv = LLVMAddGlobal(h->M, LLVMTypeOf(arr), g);
  LLVMSetInitializer(gv, arr);
  LLVMSetGlobalConstant(gv, 1);
}

bool cuda_host_object(CudaCg *cc, const char *cubin, size_t cubin_len, const char *ptx,
                      size_t ptx_len, char **obj, size_t *obj_len, HErr *err) {
  const HModule *m = cc->cg.m;
  Host hs = {0}, *h = &hs;
  h->cc = cc;
  LLVMInitializeNativeTarget();
  LLVMInitializeNativeAsmPrinter();
  h->C = LLVMContextCreate();
  h->M = LLVMModuleCreateWithNameInContext(cc->o->name, h->C);
  h->B = LLVMCreateBuilderInContext(h->C);
  h->i8 = LLVMInt8TypeInContext(h->C);
  h->i32 = LLVMInt32TypeInContext(h->C);
  h->i64 = LLVMInt64TypeInContext(h->C);
  h->f32 = LLVMFloatTypeInContext(h->C);
  h->f64 = LLVMDoubleTypeInContext(h->C);
  h->ptr = LLVMPointerTypeInContext(h->C, 0);
  bool ok = false;
  char *triple = LLVMGetDefaultTargetTriple(), *msg = NULL;
  LLVMTargetRef T;
  LLVMTargetMachineRef TM = NULL;
  if (LLVMGetTargetFromTriple(triple, &T, &msg)) {
    hlo_err(err, m->file, NULL, NULL, "CUDA target: no host target: %s", msg);
    goto out;
  }
  TM = LLVMCreateTargetMachine(T, triple, "generic", "", LLVMCodeGenLevelDefault, LLVMRelocPIC,
                               LLVMCodeModelDefault);
  LLVMSetTarget(h->M, triple);
  LLVMTargetDataRef td = LLVMCreateTargetDataLayout(TM);
  LLVMSetModuleDataLayout(h->M, td);
  LLVMDisposeTargetData(td);

  char g[512];
  const char *nm = cc->o->name;
  int nk = cc->nkernels ? cc->nkernels : 1;
  LLVMTypeRef slots_t = LLVMArrayType2(h->ptr, CU_SLOTS);
  snprintf(g, sizeof g, "%s_cuda_ctx", nm);
  h->ctxs = h_global(h, slots_t, g, NULL, false);
  LLVMSetAlignment(h->ctxs, 64);
  snprintf(g, sizeof g, "%s_cuda_mod", nm);
  h->mods = h_global(h, slots_t, g, NULL, false);
  snprintf(g, sizeof g, "%s_cuda_blas", nm);
  h->blas = h_global(h, slots_t, g, NULL, false);
  snprintf(g, sizeof g, "%s_cuda_dnn", nm);
  h->dnn = h_global(h, slots_t, g, NULL, false);
  int nc = cc->nconvs ? cc->nconvs : 1;
  snprintf(g, sizeof g, "%s_cuda_dnn_desc", nm);
  h->descs = h_global(h, LLVMArrayType2(LLVMArrayType2(h->ptr, (uint64_t)nc * 4), CU_SLOTS), g,
                      NULL, false);
  snprintf(g, sizeof g, "%s_cuda_dnn_algo", nm);
  h->algos =
      h_global(h, LLVMArrayType2(LLVMArrayType2(h->i32, (uint64_t)nc), CU_SLOTS), g, NULL, false);
  int nl = cc->nlt ? cc->nlt : 1;
  snprintf(g, sizeof g, "%s_cuda_lt", nm);
  h->lth = h_global(h, slots_t, g, NULL, false);
  snprintf(g, sizeof g, "%s_cuda_lt_desc", nm);
  h->ltd = h_global(h, LLVMArrayType2(LLVMArrayType2(h->ptr, (uint64_t)nl * 4), CU_SLOTS), g, NULL,
                    false);
  snprintf(g, sizeof g, "%s_cuda_lt_algo", nm);
  h->lta = h_global(h, LLVMArrayType2(LLVMArrayType2(h->i64, (uint64_t)nl * 8), CU_SLOTS), g, NULL,
                    false);
  LLVMSetAlignment(h->lta, 16);
  snprintf(g, sizeof g, "%s_cuda_lt_unfused", nm);
  h->ltf =
      h_global(h, LLVMArrayType2(LLVMArrayType2(h->i8, (uint64_t)nl), CU_SLOTS), g, NULL, false);
  int nf = cc->nffts ? cc->nffts : 1;
  snprintf(g, sizeof g, "%s_cuda_fft", nm);
  h->ffts =
      h_global(h, LLVMArrayType2(LLVMArrayType2(h->i32, (uint64_t)nf), CU_SLOTS), g, NULL, false);
  snprintf(g, sizeof g, "%s_cuda_fn", nm);
  h->fns =
      h_global(h, LLVMArrayType2(LLVMArrayType2(h->ptr, (uint64_t)nk), CU_SLOTS), g, NULL, false);
  snprintf(g, sizeof g, "%s_cuda_lock", nm);
  h->lock = h_global(h, LLVMArrayType2(h->i8, 64), g, NULL, false);
  LLVMSetAlignment(h->lock, 16);
  snprintf(g, sizeof g, "%s_cuda_cubin", nm);
  LLVMValueRef ci = LLVMConstStringInContext(h->C, cubin, (unsigned)cubin_len, 1);
  h->cubin = h_global(h, LLVMTypeOf(ci), g, ci, true);
  LLVMSetAlignment(h->cubin, 64);
  snprintf(g, sizeof g, "%s_cuda_ptx", nm);
  LLVMValueRef pi = LLVMConstStringInContext(h->C, ptx, (unsigned)ptx_len, 0);
  h->ptx = h_global(h, LLVMTypeOf(pi), g, pi, true);
  LLVMValueRef *kn = calloc((size_t)nk, sizeof *kn);
  for (int i = 0, j = 0; i < cc->nsteps; i++)
    if (cc->steps[i].kind == CU_STEP_KERNEL && !kn[cc->steps[i].kidx]) {
      snprintf(g, sizeof g, "%s_cuda_kname%d", nm, j);
      kn[cc->steps[i].kidx] = h_str(h, cc->steps[i].name, g);
      j++;
    }
  if (!cc->nkernels) kn[0] = LLVMConstNull(h->ptr);
  LLVMValueRef ka = LLVMConstArray2(h->ptr, kn, (uint64_t)nk);
  free(kn);
  snprintf(g, sizeof g, "%s_cuda_knames", nm);
  h->knames = h_global(h, LLVMTypeOf(ka), g, ka, true);

  LLVMValueRef lookup = h_lookup_fn(h);
  LLVMValueRef init = h_init_fn(h, lookup);
  h_run_fn(h, lookup, init);

  const HComp *e = cc->cg.entry;
  const char **names = calloc((size_t)(e->nparams + cc->plan.nresults + 1), sizeof *names);
  const Shape **shapes = calloc((size_t)(e->nparams + cc->plan.nresults + 1), sizeof *shapes);
  for (int i = 0; i < e->nparams; i++)
    names[i] = e->params[i]->name, shapes[i] = &e->params[i]->shape;
  h_info(h, "arg", e->nparams, names, shapes);
  for (int k = 0; k < cc->plan.nresults; k++)
    names[k] = e->instrs[cc->plan.results[k].name]->name, shapes[k] = &cc->plan.results[k].shape;
  h_info(h, "result", cc->plan.nresults, names, shapes);
  free(names);
  free(shapes);

  if (LLVMVerifyModule(h->M, LLVMReturnStatusAction, &msg)) {
    hlo_err(err, m->file, NULL, NULL, "CUDA target: internal: invalid host IR: %.600s", msg);
    goto out;
  }
  LLVMDisposeMessage(msg);
  msg = NULL;
  LLVMMemoryBufferRef mb = NULL;
  if (LLVMTargetMachineEmitToMemoryBuffer(TM, h->M, LLVMObjectFile, &msg, &mb)) {
    hlo_err(err, m->file, NULL, NULL, "CUDA target: host object emission failed: %s", msg);
    goto out;
  }
  *obj_len = LLVMGetBufferSize(mb);
  *obj = malloc(*obj_len ? *obj_len : 1);
  memcpy(*obj, LLVMGetBufferStart(mb), *obj_len);
  LLVMDisposeMemoryBuffer(mb);
  ok = true;
out:
  if (msg) LLVMDisposeMessage(msg);
  LLVMDisposeMessage(triple);
  if (TM) LLVMDisposeTargetMachine(TM);
  LLVMDisposeBuilder(h->B);
  LLVMDisposeModule(h->M);
  LLVMContextDispose(h->C);
  return ok;
}
