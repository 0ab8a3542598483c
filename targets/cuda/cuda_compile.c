/* targets/cuda/cuda_compile.c: the CUDA target's driver, cuda_compile().
 *
 * Pipeline, top to bottom:
 *   1. check: every instruction reachable from the entry is one the elemental generator
 *      supports (a located error otherwise, never a wrong binary);
 *   2. plan: memplan_assign() places every entry value: args[], results[] and the temp heap
 *      become device addresses (base pointer + offset); dot operands that must be staged
 *      get private scratch after the heap (TEMP_BYTES covers both);
 *   3. steps: one or more per computing entry instruction, in entry order (cuda_kernel.c):
 *      NVPTX kernels generated with the shared elemental generator (targets/gen), cuBLAS GEMMs,
 *      cuDNN convolutions, cuFFT transforms (cuda_fft.c);
 *      then device-to-device copies of result leaves not computed in place;
 *   4. math: calls the elemental generator makes to LLVM math intrinsics (llvm.exp, log,
 *      sin, cos, pow) and to libm (erff, tanf, atan2f, ...) are redirected to libdevice's
 *      __nv_* functions, libdevice.10.bc is linked in (LLVMLinkModules2) and internalized;
 *      the generator needs no change for this;
 *   5. LLVMVerifyModule, default<O3> with the NVPTX target machine (NVVMReflect resolves
 *      libdevice's __nvvm_reflect), PTX emitted; ptxas (-arch, -O3, -v) makes the cubin and
 *      reports registers and spills per kernel (--stats);
 *   6. outputs: the PTX or cubin with a JSON manifest of the steps, or the host object
 *      (cuda_host.c) embedding cubin and PTX with the C header; written atomically.
 * Output is deterministic: names and order depend on the module only. */
#include "cuda_impl.h"

#include <llvm-c/Analysis.h>
#include <llvm-c/BitReader.h>
#include <llvm-c/Linker.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>
#include <stdlib.h>
#include <string.h>

#ifndef HLOC_CUDA_HOME
#define HLOC_CUDA_HOME "/usr/local/cuda"
#endif

/* ------------------------------------------------------------------ steps and addresses */

/* The cudaDataType_t of an operand or result type (values from library_types.h). */
static int cu_data_type(DType t, const char **name) {
  if (t == DT_F64) return *name = "CUDA_R_64F", 1;
  if (t == DT_F16) return *name = "CUDA_R_16F", 2;
  if (t == DT_S8) return *name = "CUDA_R_8I", 3;
  if (t == DT_S32) return *name = "CUDA_R_32I", 10;
  if (t == DT_BF16) return *name = "CUDA_R_16BF", 14;
  if (t == DT_F8E4M3FN) return *name = "CUDA_R_8F_E4M3", 28;
  if (t == DT_F8E5M2) return *name = "CUDA_R_8F_E5M2", 29;
  return *name = "CUDA_R_32F", 0; /* the GEMM step's other types */
}

CuGemmTypes cuda_gemm_types(const CudaCg *cc, const CuStep *s) {
  CuGemmTypes t = {0};
  t.ab = cu_data_type(s->at, &t.ab_name);
  t.a = cu_data_type(s->aat, &t.a_name);
  t.c = cu_data_type(s->dt, &t.c_name);
  t.scalar = DT_F32;
  if (s->dt == DT_F64) {
    t.compute = 70, t.compute_name = "CUBLAS_COMPUTE_64F", t.scalar = DT_F64;
  } else if (s->at == DT_S8) {
    t.compute = 72, t.compute_name = "CUBLAS_COMPUTE_32I", t.scalar = DT_S32;
  } else if (s->at == DT_F32 && cc->o->precision == CUDA_PRECISION_TF32) {
    t.compute = 77, t.compute_name = "CUBLAS_COMPUTE_32F_FAST_TF32";
  } else { /* f32, and 16-bit operands on the tensor cores with f32 accumulation */
    t.compute = 68, t.compute_name = "CUBLAS_COMPUTE_32F";
  }
  return t;
}

CuStep *cuda_add_step(CudaCg *cc, CuStepKind kind, const HInstr *in) {
  cc->steps =
      hlo_arena_grow(cc->cg.scratch, cc->steps, cc->nsteps, &cc->step_cap, 64, sizeof *cc->steps);
  CuStep *s = &cc->steps[cc->nsteps++];
  memset(s, 0, sizeof *s);
  s->kind = kind;
  s->in = in;
  s->lidx = -1;
  s->fb = -1;
  return s;
}

/* ------------------------------------------------------------------ checks */

static bool cc_check_comp(CudaCg *cc, HComp *c, int depth) {
  if (depth > 64) {
    hlo_err_comp(cc->cg.err, c, "CUDA target: computations nested too deeply");
    return false;
  }
  for (int i = 0; i < c->ninstrs; i++) {
    HInstr *in = c->instrs[i];
    if (!gen_op_supported_ex(in, "CUDA", true, cc->cg.err)) return false;
    for (int j = 0; j < in->ncalls; j++)
      if (!cc_check_comp(cc, in->calls[j], depth + 1)) return false;
  }
  return true;
}

static bool cc_identifier(const char *s) {
  if (!s || !*s || (*s >= '0' && *s <= '9')) return false;
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
          *s == '_'))
      return false;
  return true;
}

/* ------------------------------------------------------------------ libdevice math */

/* Rename or redirect the math functions the elemental generator calls to libdevice. */
static void cc_math_to_libdevice(CudaCg *cc) {
  static const char *const intr[] = {"exp",  "log",  "sin",   "cos",  "pow",
                                     "exp2", "log2", "log10", "exp10"};
  static const char *const libm[] = {
      "atan2", "cbrt", "tan",  "tanh", "erf", "acos",  "acosh", "asin", "asinh", "atan", "atanh",
      "cosh",  "sinh", "fmod", "exp",  "log", "expm1", "log1p", "pow",  "sin",   "cos",  "erfc"};
  LLVMModuleRef M = cc->cg.M;
  LLVMValueRef f = LLVMGetFirstFunction(M);
  while (f) {
    LLVMValueRef next = LLVMGetNextFunction(f);
    size_t n = 0;
    const char *name = LLVMGetValueName2(f, &n);
    char target[64] = "";
    if (LLVMIsDeclaration(f)) {
      for (size_t i = 0; i < sizeof intr / sizeof *intr && !target[0]; i++) {
        char a[48], b[48];
        snprintf(a, sizeof a, "llvm.%s.f32", intr[i]);
        snprintf(b, sizeof b, "llvm.%s.f64", intr[i]);
        if (!strcmp(name, a)) snprintf(target, sizeof target, "__nv_%sf", intr[i]);
        if (!strcmp(name, b)) snprintf(target, sizeof target, "__nv_%s", intr[i]);
      }
      for (size_t i = 0; i < sizeof libm / sizeof *libm && !target[0]; i++) {
        char a[48];
        snprintf(a, sizeof a, "%sf", libm[i]);
        if (!strcmp(name, a)) snprintf(target, sizeof target, "__nv_%sf", libm[i]);
        if (!strcmp(name, libm[i])) snprintf(target, sizeof target, "__nv_%s", libm[i]);
      }
    }
    if (target[0]) {
      LLVMTypeRef ft = LLVMGlobalGetValueType(f);
      LLVMValueRef g = LLVMGetNamedFunction(M, target);
      if (!g) g = LLVMAddFunction(M, target, ft);
      LLVMReplaceAllUsesWith(f, g);
      LLVMDeleteFunction(f);
    }
    f = next;
  }
}

static bool cc_link_libdevice(CudaCg *cc, const char *path, const char *triple, const char *dl) {
  GenCg *cg = &cc->cg;
  LLVMMemoryBufferRef buf = NULL;
  char *msg = NULL;
  if (LLVMCreateMemoryBufferWithContentsOfFile(path, &buf, &msg)) {
    hlo_err(cg->err, cg->m->file, NULL, NULL, "CUDA target: cannot read libdevice '%s': %s", path,
            msg);
    LLVMDisposeMessage(msg);
    return false;
  }
  LLVMModuleRef lib = NULL;
  bool bad = LLVMParseBitcodeInContext2(cg->C, buf, &lib);
  LLVMDisposeMemoryBuffer(buf);
  if (bad) {
    hlo_err(cg->err, cg->m->file, NULL, NULL, "CUDA target: '%s' is not LLVM bitcode", path);
    return false;
  }
  LLVMSetTarget(lib, triple);
  LLVMSetDataLayout(lib, dl);
  if (LLVMLinkModules2(cg->M, lib)) {
    hlo_err(cg->err, cg->m->file, NULL, NULL, "CUDA target: linking libdevice failed");
    return false;
  }
  /* only the kernels are entry points; unused libdevice functions are then dropped */
  for (LLVMValueRef f = LLVMGetFirstFunction(cg->M); f; f = LLVMGetNextFunction(f))
    if (!LLVMIsDeclaration(f) && LLVMGetFunctionCallConv(f) != 71)
      LLVMSetLinkage(f, LLVMInternalLinkage);
  for (LLVMValueRef g = LLVMGetFirstGlobal(cg->M); g; g = LLVMGetNextGlobal(g))
    if (!LLVMIsDeclaration(g)) LLVMSetLinkage(g, LLVMInternalLinkage);
  LLVMAddModuleFlag(cg->M, LLVMModuleFlagBehaviorOverride, "nvvm-reflect-ftz", 16,
                    LLVMValueAsMetadata(LLVMConstInt(cg->i32, 0, 0)));
  return true;
}

/* ------------------------------------------------------------------ the driver */

static void cc_stats(CudaCg *cc, FILE *f) {
  int gemms = 0, lts = 0;
  for (int i = 0; i < cc->nsteps; i++) {
    const CuStep *s = &cc->steps[i];
    if (s->kind == CU_STEP_GEMM) {
      gemms += s->lidx < 0, lts += s->lidx >= 0 && !s->epi;
      char epi[64] = "";
      if (s->epi) snprintf(epi, sizeof epi, " epilogue %s", cuda_epilogue_name(s->epi));
      fprintf(f, "cuda: %s gemm %c%c m=%lld n=%lld k=%lld batch=%lld %s x %s -> %s%s  (%s)\n",
              s->lidx >= 0 ? "cublasLt" : "cublas", s->transa ? 'T' : 'N', s->transb ? 'T' : 'N',
              (long long)s->m, (long long)s->n, (long long)s->k, (long long)s->batch,
              hlo_dtype_name(s->aat), hlo_dtype_name(s->at), hlo_dtype_name(s->dt), epi,
              s->in->name);
    } else if (s->kind == CU_STEP_KERNEL)
      fprintf(f, "cuda: %-24s %-13s grid %-6lld block %-4lld regs %-3d spill %d/%d bytes  (%s%s)\n",
              s->name, s->what, (long long)s->grid, (long long)s->block, s->regs, s->spill_st,
              s->spill_ld, s->in->name, s->fb >= 0 ? "; only where its GEMM runs unfused" : "");
    else if (s->kind == CU_STEP_CONV)
      fprintf(f,
              "cuda: cudnn %s %s n=%lld c=%lld h=%lld w=%lld k=%lld r=%lld s=%lld -> %lldx%lld "
              "groups=%lld  (%s)\n",
              s->wgrad ? "wgrad" : "conv", s->nchw ? "NCHW" : "NHWC", (long long)s->cn,
              (long long)s->cc, (long long)s->ch, (long long)s->cw, (long long)s->ck,
              (long long)s->cr, (long long)s->cs, (long long)s->cp, (long long)s->cq,
              (long long)s->groups, s->in->name);
    else if (s->kind == CU_STEP_FFT)
      fprintf(f, "cuda: cufft %s %s rank=%d n=%lld,%lld,%lld batch=%lld  (%s)\n",
              cuda_fft_exec_name(s), s->fft_dir > 0 ? "inverse" : "forward", s->fft_rank,
              (long long)s->fft_n[0], (long long)(s->fft_rank > 1 ? s->fft_n[1] : 1),
              (long long)(s->fft_rank > 2 ? s->fft_n[2] : 1), (long long)s->batch, s->in->name);
    else
      fprintf(f, "cuda: copy %lld bytes  (%s)\n", (long long)s->bytes, s->in->name);
  }
  fprintf(
      f,
      "cuda: %d kernels, %d cuBLAS GEMMs, %d cuBLASLt fp8 GEMMs, %d cuBLASLt GEMMs with a fused "
      "epilogue, %d cuDNN convolutions, %d cuFFT transforms, temp %lld bytes (%lld staging, %lld "
      "cuDNN workspace)\n",
      cc->nkernels, gemms, lts, cc->nepi, cc->nconvs, cc->nffts, (long long)cc->temp_bytes,
      (long long)cc->stage_bytes, (long long)cc->ws_bytes);
  if (cc->graph_nodes)
    fprintf(f, "cuda: replayed as a CUDA graph of %lld launches\n", (long long)cc->graph_nodes);
  else
    fprintf(f, "cuda: launched step by step (%s)\n",
            cc->o->graphs == CUDA_GRAPHS_OFF ? "--cuda-graphs=off" : "no CUDA graph for its steps");
  if (cc->ndepthwise || cc->ndepthwise_elemental)
    fprintf(f, "cuda: depthwise convolutions as generated kernels %d (vector %d, elemental %d)\n",
            cc->ndepthwise + cc->ndepthwise_elemental, cc->ndepthwise, cc->ndepthwise_elemental);
  if (cc->nloop_products) {
    fprintf(f,
            "cuda: products as loop kernels (no cuBLAS, cuBLASLt or cuDNN path for their type "
            "or form) %d:",
            cc->nloop_products);
    for (int i = 0; i < cc->nloop_products && i < 4; i++)
      fprintf(f, "%s %s", i ? "," : "", cc->loop_products[i]);
    fprintf(f, "%s\n", cc->nloop_products > 4 ? ", ..." : "");
  }
}

static bool cc_write(CudaCg *cc, const char *path, const void *p, size_t n) {
  return hlo_write_file_atomic(path, p, n, cc->cg.err);
}

void cuda_optimizer_options(OptOpts *oo, CudaPrecision precision) {
  oo->conv_layout = precision == CUDA_PRECISION_TF32 ? OPT_CONV_NHWC : OPT_CONV_NCHW;
  oo->conv_epilogue_to_reduce = true;
  oo->depthwise_nhwc = true; /* generated (cuda_depthwise), channels minor */
  oo->conv_operands_staged = true;
  oo->dot_operands_staged = true;
  oo->unroll_fusible_loops = true; /* a launch per kernel and trip: elementwise trips fused */
  oo->row_chains = true;
  /* the fused kernel (CUDA cores) against cuBLAS and the softmax's reductions: faster for a
   * decode step's few rows per key set; for f32 at full precision (cuBLAS's SGEMM has no tensor
   * cores either) also for BERT's 128 rows per head (H200: bert_base 5.93 -> 5.60 ms,
   * transformer_layer 0.50 -> 0.49), not for bf16 prefill (llama_layer_bf16 0.31 -> 0.35) */
  oo->attention_rows = 16;
  oo->attention_rows_f32 = precision == CUDA_PRECISION_TF32 ? 16 : 128;
  oo->attention_head = 256;
  oo->attention_head_16 = CU_MMA_HEAD; /* the tensor-core kernel (cuda_attention_mma.c) */
  oo->attention_rows_16 = INT64_MAX;
}

const char *cuda_toolkit_home(const CudaOpts *o) {
  const char *home = o->cuda_home ? o->cuda_home : getenv("CUDA_HOME");
  return home && *home ? home : HLOC_CUDA_HOME;
}

bool cuda_compile(HModule *m, const CudaOpts *o, HErr *err) {
  if (!cc_identifier(o->name)) {
    hlo_err(err, m->file, NULL, NULL, "CUDA target: name '%s' is not a C identifier",
            o->name ? o->name : "");
    return false;
  }
  const char *arch = o->gpu_arch ? o->gpu_arch : "sm_90";
  /* sm_<number >= 50>, optionally with the 'a' (architecture-specific) suffix */
  char *arch_end = NULL;
  long arch_num = strncmp(arch, "sm_", 3) ? 0 : strtol(arch + 3, &arch_end, 10);
  if (arch_num < 50 || !arch_end || (*arch_end && strcmp(arch_end, "a"))) {
    hlo_err(err, m->file, NULL, NULL, "CUDA target: --gpu-arch '%s' is not of the form sm_XX",
            arch);
    return false;
  }
  const char *home = cuda_toolkit_home(o);
  char ptxas[4096], libdevice[4096];
  snprintf(ptxas, sizeof ptxas, "%s/bin/ptxas", home);
  snprintf(libdevice, sizeof libdevice, "%s/nvvm/libdevice/libdevice.10.bc", home);

  CudaCg *cc = calloc(1, sizeof *cc);
  GenCg *cg = &cc->cg;
  cc->o = o;
  cc->arch = arch;
  cg->name = o->name;
  cg->buffer_fn = cuda_kbuffer;
  cg->m = m;
  cg->entry = m->entry;
  cg->err = err;
  cg->scratch = hlo_arena_new();
  bool ok = false;
  char *ptx = NULL, *cubin = NULL, *obj = NULL, *hdr = NULL, *man = NULL;
  size_t ptx_len = 0, cubin_len = 0, obj_len = 0, hdr_len = 0, man_len = 0;
  LLVMTargetMachineRef TM = NULL;

  hlo_flatten_entry_params(m, cg->scratch); /* tuple-shaped parameters passed leaf by leaf */
  hlo_module_renumber(m);
  if (!cc_check_comp(cc, m->entry, 0)) goto done;
  if (!memplan_assign(m->entry, cg->scratch, &cc->plan, err) || !cuda_plan_loops(cc)) goto done;

  LLVMInitializeNVPTXTargetInfo();
  LLVMInitializeNVPTXTarget();
  LLVMInitializeNVPTXTargetMC();
  LLVMInitializeNVPTXAsmPrinter();
  const char *triple = "nvptx64-nvidia-cuda";
  LLVMTargetRef T;
  char *msg = NULL;
  if (LLVMGetTargetFromTriple(triple, &T, &msg)) {
    hlo_err(err, m->file, NULL, NULL, "CUDA target: LLVM has no NVPTX backend: %s", msg);
    LLVMDisposeMessage(msg);
    goto done;
  }
  int lvl = o->opt_level < 0 ? 0 : o->opt_level > 3 ? 3 : o->opt_level;
  TM = LLVMCreateTargetMachine(T, triple, arch, "",
                               lvl ? LLVMCodeGenLevelAggressive : LLVMCodeGenLevelNone,
                               LLVMRelocDefault, LLVMCodeModelDefault);
  cg->C = LLVMContextCreate();
  cg->M = LLVMModuleCreateWithNameInContext(o->name, cg->C);
  cg->B = LLVMCreateBuilderInContext(cg->C);
  LLVMSetTarget(cg->M, triple);
  LLVMTargetDataRef td = LLVMCreateTargetDataLayout(TM);
  char *dl = LLVMCopyStringRepOfTargetData(td);
  LLVMSetModuleDataLayout(cg->M, td);
  LLVMDisposeTargetData(td);
  gen_cg_types(cg);

  if (!cuda_emit_comp(cc, &cc->entry_region)) goto done_dl;
  for (int r = 0; r < cc->plan.nresults; r++) {
    const MemResult *mr = &cc->plan.results[r];
    if (!mr->copy) continue;
    HInstr *src = m->entry->instrs[mr->instr];
    CuStep *s = cuda_add_step(cc, CU_STEP_COPY, src);
    if (!cuda_ptr_of(cc, src, &s->src)) {
      hlo_err_at(err, src, "CUDA target: a constant returned as a result is not supported");
      goto done_dl;
    }
    s->src.offset += mr->offset;
    s->dst = (CuPtr){CU_RESULT, r, 0};
    s->bytes = mr->size;
  }
  cc->stage_bytes = memplan_align(cc->stage_bytes);
  for (int i = 0; i < cc->nsteps; i++)
    if (cc->steps[i].kind == CU_STEP_CONV)
      cc->steps[i].ws.offset = cc->plan.temp_bytes + cc->stage_bytes;
  cc->temp_bytes = cc->plan.temp_bytes + cc->stage_bytes + cc->ws_bytes;

  if (LLVMVerifyModule(cg->M, LLVMReturnStatusAction, &msg)) {
    hlo_err(err, m->file, NULL, NULL, "CUDA target: internal: invalid kernel IR: %.600s", msg);
    LLVMDisposeMessage(msg);
    goto done_dl;
  }
  LLVMDisposeMessage(msg);
  msg = NULL;
  cc_math_to_libdevice(cc);
  if (!cc_link_libdevice(cc, libdevice, triple, dl)) goto done_dl;
  char pipeline[32];
  snprintf(pipeline, sizeof pipeline, "default<O%d>", lvl);
  LLVMPassBuilderOptionsRef po = LLVMCreatePassBuilderOptions();
  LLVMErrorRef pe = LLVMRunPasses(cg->M, pipeline, TM, po);
  LLVMDisposePassBuilderOptions(po);
  if (pe) {
    char *em = LLVMGetErrorMessage(pe);
    hlo_err(err, m->file, NULL, NULL, "CUDA target: LLVM pipeline failed: %s", em);
    LLVMDisposeErrorMessage(em);
    goto done_dl;
  }
  LLVMMemoryBufferRef mb = NULL;
  if (LLVMTargetMachineEmitToMemoryBuffer(TM, cg->M, LLVMAssemblyFile, &msg, &mb)) {
    hlo_err(err, m->file, NULL, NULL, "CUDA target: PTX emission failed: %s", msg);
    LLVMDisposeMessage(msg);
    goto done_dl;
  }
  ptx_len = LLVMGetBufferSize(mb);
  ptx = malloc(ptx_len + 1);
  memcpy(ptx, LLVMGetBufferStart(mb), ptx_len);
  ptx[ptx_len] = 0;
  LLVMDisposeMemoryBuffer(mb);
  while (ptx_len && ptx[ptx_len - 1] == 0)
    ptx_len--;

  if (o->emit != CUDA_EMIT_PTX || o->stats) {
    if (!cuda_ptxas(cc, ptxas, ptx, ptx_len, &cubin, &cubin_len, err)) goto done_dl;
  }
  cc->graph_nodes = cuda_graph_nodes(cc);
  if (o->emit == CUDA_EMIT_OBJ) {
    if (!cuda_host_object(cc, cubin, cubin_len, ptx, ptx_len, &obj, &obj_len, err)) goto done_dl;
    if (o->header_path) hdr = cuda_header_text(cc, &hdr_len);
  }
  if (o->manifest_path) {
    const char *slash = strrchr(o->out_path, '/');
    man = cuda_manifest_text(cc,
                             o->emit == CUDA_EMIT_OBJ ? "embedded"
                             : slash                  ? slash + 1
                                                      : o->out_path,
                             &man_len);
  }
  if (o->emit == CUDA_EMIT_PTX && !cc_write(cc, o->out_path, ptx, ptx_len)) goto done_dl;
  if (o->emit == CUDA_EMIT_CUBIN && !cc_write(cc, o->out_path, cubin, cubin_len)) goto done_dl;
  if (o->emit == CUDA_EMIT_OBJ && !cc_write(cc, o->out_path, obj, obj_len)) goto done_dl;
  if (hdr && !cc_write(cc, o->header_path, hdr, hdr_len)) goto done_dl;
  if (man && !cc_write(cc, o->manifest_path, man, man_len)) goto done_dl;
  if (o->stats) cc_stats(cc, o->stats);
  ok = true;
done_dl:
  LLVMDisposeMessage(dl);
done:
  free(ptx), free(cubin), free(obj), free(hdr), free(man);
  if (cg->B) LLVMDisposeBuilder(cg->B);
  if (cg->M) LLVMDisposeModule(cg->M);
  if (cg->C) LLVMContextDispose(cg->C);
  if (TM) LLVMDisposeTargetMachine(TM);
  hlo_arena_free(cg->scratch);
  free(cc->fp.t);
  free(cc);
  return ok;
}
