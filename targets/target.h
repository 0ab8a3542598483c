/* targets/target.h: code generators for hloc's targets.
 *
 * The CPU target turns a module into one relocatable object (or assembly, or LLVM IR) and a
 * C header declaring the generated entry points; see targets/cpu/cpu_compile.c for the
 * generated interface. */
#ifndef HLOC_TARGET_H
#define HLOC_TARGET_H

#include "hlo.h"
#include "optimizer.h"

/* ------------------------------------------------------------------ cpu/ */

typedef enum CpuEmit {
  CPU_EMIT_OBJ,  /* relocatable object (.o) */
  CPU_EMIT_ASM,  /* assembly text (.s) */
  CPU_EMIT_LLVM, /* LLVM IR text (.ll), after optimization */
} CpuEmit;

/* The CPU target's tuning, debug and test knobs (targets/cpu/cpu_knobs.def): each slot is the
 * knob's text, NULL when unset (its default). Tools fill them from the environment
 * (cpu_knobs_from_env); tests set the slots. */
typedef enum CpuKnob {
#define KNOB(id, env, cls, tuning, summary) CPU_KNOB_##id,
#include "cpu/cpu_knobs.def"
#undef KNOB
  CPU_KNOB_COUNT
} CpuKnob;
typedef struct CpuKnobs {
  const char *v[CPU_KNOB_COUNT]; /* text of each knob, NULL: unset */
} CpuKnobs;
/* Every knob from its environment variable (the only place hloc reads them). */
void cpu_knobs_from_env(CpuKnobs *k);
/* The table: variable, class, whether it changes the code, and what it does; a line each. */
void cpu_knobs_print(FILE *f);

typedef struct CpuOpts {
  const char *name;        /* C symbol prefix, a C identifier (lower case recommended); header
                              macros use it in upper case */
  const char *out_path;    /* .o / .s / .ll to write */
  const char *header_path; /* header to write (NULL: none) */
  const char *triple;      /* target triple; NULL: the host's (LLVMGetDefaultTargetTriple) */
  const char *cpu;         /* CPU name; NULL: the host CPU (LLVMGetHostCPUName), or "generic"
                              when a non-host triple is given */
  const char *features;    /* CPU features; NULL: the host's (LLVMGetHostCPUFeatures), or ""
                              when a non-host triple is given */
  int opt_level;           /* 0..3: LLVM pipeline default<On> and codegen level */
  CpuEmit emit;            /* what out_path receives */
  int64_t par_min_elems;   /* 0: default (32768); loop nests with fewer output elements run in
                              one task even with a parallel-for callback */
  bool profile;            /* also emit NAME_run_profile (time-stamp counter ticks per task),
                              NAME_task_names[] and NAME_task_flops[] */
  bool direct_conv;        /* every convolution as an implicit GEMM (hloc --conv-algo=direct);
                              false: 3x3 ones of unit stride through Winograd's F(2x2, 3x3) */
  const CpuKnobs *knobs;   /* tuning and debug knobs; NULL: every one at its default */
  FILE *stats;             /* --stats: one line of the kernels the products got (NULL: none) */
} CpuOpts;

/* The CPU target's prebuilt library: the GEMM's functions (blocked matrix products, their
 * packing steps, Winograd's transforms), the same for every module, compiled once per x86 ISA
 * level when hloc is built (targets/cpu/cpu_prebuilt.c, tools/hloc_genlib.c) and joined into
 * the objects of the modules that can use them instead of being compiled with each. */
typedef struct CpuPrebuiltObj {
  const char *isa;          /* LLVM CPU name of the level: "x86-64-v4", "x86-64-v3" */
  const unsigned char *obj; /* its ELF relocatable object (16-byte aligned) */
  size_t size;              /* bytes */
} CpuPrebuiltObj;
/* The objects linked into this program (hloc-genlib's output; none in hloc-genlib itself). */
extern const CpuPrebuiltObj cpu_prebuilt_objs[];
extern const int cpu_prebuilt_count;
/* The levels built, NULL-terminated. */
extern const char *const cpu_prebuilt_isas[];
/* Compile the library for level isa (one of cpu_prebuilt_isas) into a malloc'd object. */
bool cpu_prebuilt_build(const char *isa, char **obj, size_t *size, HErr *err);

/* Compile m for the CPU: writes o->out_path and, when set, o->header_path atomically (no
 * partial file is left behind on failure). The module is lowered in place first (calls are
 * inlined into the entry and fused computations). false with a located error when an
 * instruction or dtype cannot be compiled, or when LLVM or the file system fails. */
bool cpu_compile(HModule *m, const CpuOpts *o, HErr *err);
/* The optimizer options the CPU target's kernels want (the attention pass for its blocked
 * flash-attention kernel); callers start from a zeroed OptOpts. Defined with cpu_compile. */
void cpu_optimizer_options(OptOpts *oo);
/* Compile m (optimized) with options o (name, paths and emit are its own) into a temporary
 * folder, link it into a shared object with the system's C compiler ($CC, else cc), load it
 * and run it on args (the entry's parameters, row-major); the result leaves into *out (n of
 * them, in a). For hloc verify's kernel bisection. false with a located error. */
bool cpu_run_module(HModule *m, const CpuOpts *o, Literal *const *args, int nargs, HArena *a,
                    Literal ***out, int *n, HErr *err);

/* ------------------------------------------------------------------ cuda/ */

typedef enum CudaEmit {
  CUDA_EMIT_OBJ,   /* host object embedding the cubin and PTX, launching the kernels */
  CUDA_EMIT_PTX,   /* PTX text of the kernels, plus the JSON manifest */
  CUDA_EMIT_CUBIN, /* cubin (ptxas output) of the kernels, plus the JSON manifest */
} CudaEmit;

typedef enum CudaPrecision {
  CUDA_PRECISION_HIGHEST, /* true f32 products (the default) */
  CUDA_PRECISION_TF32,    /* f32 matrix products may round their inputs to TF32 */
} CudaPrecision;

typedef enum CudaGemmPrologues {
  CUDA_PROLOGUES_AUTO,   /* fused into hloc's tensor-core GEMM where estimated faster */
  CUDA_PROLOGUES_FUSED,  /* fused wherever the kernel takes the dot (testing) */
  CUDA_PROLOGUES_STAGED, /* always staged for cuBLAS (testing, comparisons) */
} CudaGemmPrologues;

typedef enum CudaGraphs {
  CUDA_GRAPHS_AUTO, /* NAME_cuda_run replays its steps as a CUDA graph where they can be */
  CUDA_GRAPHS_OFF,  /* always launched one by one */
} CudaGraphs;

typedef struct CudaOpts {
  const char *name;                 /* C symbol prefix, a C identifier */
  const char *out_path;             /* .o / .ptx / .cubin to write */
  const char *header_path;          /* C header to write (NULL: none) */
  const char *manifest_path;        /* JSON manifest (NULL: none) */
  const char *gpu_arch;             /* "sm_90" when NULL; any sm_XX that LLVM and ptxas accept */
  const char *cuda_home;            /* toolkit (ptxas, libdevice); NULL: $CUDA_HOME, else the one
                                       found at build time (/usr/local/cuda) */
  CudaEmit emit;                    /* what out_path receives */
  CudaPrecision precision;          /* dot precision through cuBLAS */
  int opt_level;                    /* 0..3: LLVM pipeline for the kernels (ptxas always -O3) */
  bool no_cublas;                   /* generate every dot as a kernel instead of calling cuBLAS */
  bool epilogue_fallback;           /* testing: every GEMM epilogue fused into cuBLASLt runs its
                                       fallback (cuBLAS, then the epilogue kernel) in every context */
  CudaGemmPrologues gemm_prologues; /* 16-bit dots whose operand is a prologue (--gemm-prologues) */
  CudaGraphs graphs;                /* --cuda-graphs */
  int64_t conv_ws_limit; /* cuDNN workspace reserved in temp, at most (bytes; 0: 3 GiB) */
  FILE *stats;           /* when set: one line per kernel (registers, spills, launch) */
} CudaOpts;

/* Compile m (optimized by the caller, as for cpu_compile) for NVIDIA GPUs: NVPTX kernels
 * through LLVM, assembled by ptxas. Writes o->out_path and, when set, the header and the
 * manifest, atomically. false with a located error when an instruction cannot be compiled,
 * or when LLVM, ptxas or the file system fails. Defined only when hloc is built with CUDA
 * (HLOC_HAVE_CUDA). */
bool cuda_compile(HModule *m, const CudaOpts *o, HErr *err);

/* Set the optimizer options this target wants in *oo: convolutions in NCHW at highest
 * precision (cuDNN's f32 Winograd/FFT algorithms) and NHWC for tf32 (tensor cores); since
 * cuDNN writes raw convolution results and reads operands from memory, epilogues read only by
 * reductions go into them and convolution operands carry no large arithmetic. Callers may
 * override conv_layout afterwards. Defined with cuda_compile. */
void cuda_optimizer_options(OptOpts *oo, CudaPrecision precision);

/* hloc verify's kernel bisection on a GPU that may be on another machine (cuda_run.c). The
 * bundle's id: a hash of m's text, the arguments, the options that change the code and
 * hloc's commit (m before it is compiled). */
uint64_t cuda_bundle_id(const HModule *m, const CudaOpts *o, Literal *const *args, int nargs);
/* A bundle folder dir (made if missing) holding m (optimized) compiled with o, the arguments
 * (nargs, row-major), a driver linked here against the toolkit's stub libcuda, and run.sh,
 * which runs the module once on the first GPU of the machine it is on and writes each result
 * leaf beside it; id is written last. false with a located error. */
bool cuda_bundle_prepare(HModule *m, const CudaOpts *o, Literal *const *args, int nargs,
                         const char *dir, uint64_t id, HErr *err);
/* Run the bundle in dir on this machine: 1 ran; 0 this machine cannot run it (no GPU, no CUDA
 * driver; why gets the run's last line); -1 the run failed (err). */
int cuda_bundle_run(const HModule *m, const char *dir, char *why, size_t nwhy, HErr *err);
/* The result leaves (of m's root) of a bundle that ran into *out (n of them, in a), once its
 * id is id; false with a located error (another bundle's results are refused). */
bool cuda_bundle_results(const HModule *m, const char *dir, uint64_t id, HArena *a, Literal ***out,
                         int *n, HErr *err);

#endif
