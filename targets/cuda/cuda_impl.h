/* targets/cuda/cuda_impl.h: the CUDA code generator's private interface.
 *
 * Sectioned by file:
 *   cuda_compile.c  driver: support check, buffer plan, the step list (kernels, cuBLAS GEMMs,
 *                   copies), NVPTX module (libdevice math), PTX, ptxas, outputs
 *   cuda_kernel.c   the kernels: grid-stride loop kernels over gen_value (the shared
 *                   elemental generator, targets/gen; purely elementwise 4-byte ones with
 *                   128-bit vector accesses, 4 elements per thread, when the addresses are
 *                   16-byte aligned at run time, else a scalar loop in the same kernel),
 *                   warp/block row reductions, GEMM operand staging and epilogues, scatter
 *   cuda_gemm_epilogue.c  bias, residual and ReLU epilogues of dots that cuBLASLt computes
 *                   in the GEMM itself (the epilogue kernel kept as the fallback)
 *   cuda_host.c     the host object: x86-64 LLVM IR embedding cubin and PTX, module loading
 *                   once per CUDA context, launches on the caller's stream
 *   cuda_loop.c     while loops: the condition's and body's plans and scratch regions, their
 *                   steps between control steps the host walks; device addresses by region
 *   cuda_fft.c      fft through cuFFT: the transform step, the C2R input's scratch copy, the
 *                   1/N scaling kernel of the inverse kinds; cufft names for the outputs
 *   cuda_ptxas.c    running ptxas in a private temporary folder, parsing its -v report
 *   cuda_header.c   the generated C header and the JSON manifest
 *   cuda_run.c      hloc verify's GPU run: the module, its arguments and a driver as a folder
 *
 * A device pointer used by a step is always "base + offset" where the base is one of the
 * caller's args[i], results[i] or temp (CuPtr); kernels take such pointers as parameters. */
#ifndef HLOC_CUDA_IMPL_H
#define HLOC_CUDA_IMPL_H

#include "gen.h"
#include "target.h"

/* ------------------------------------------------------------------ cuda_compile.c */

/* The toolkit: o->cuda_home, else $CUDA_HOME, else the one found when hloc was built. */
const char *cuda_toolkit_home(const CudaOpts *o);

typedef enum CuBase {
  CU_ARG,    /* args[index] */
  CU_RESULT, /* results[index] */
  CU_TEMP,   /* temp */
} CuBase;

/* A device address computed by the host: base + offset bytes. */
typedef struct CuPtr {
  CuBase base;    /* which caller pointer */
  int index;      /* CU_ARG / CU_RESULT: its index */
  int64_t offset; /* bytes added */
} CuPtr;

typedef enum CuStepKind {
  CU_STEP_KERNEL, /* a generated kernel launch */
  CU_STEP_GEMM,   /* a cuBLAS strided batched GEMM (column-major terms) */
  CU_STEP_COPY,   /* a device-to-device copy */
  CU_STEP_CONV,   /* a cuDNN convolution (NHWC/KRSC or NCHW/KCRS) */
  CU_STEP_FFT,    /* a cuFFT transform (cuda_fft.c): a plan per context, made at init */
  CU_STEP_BRANCH, /* a while loop's exit test: to step `target` when the byte at src is 0 (read
                     back to the host: the stream synchronized) */
  CU_STEP_COUNT,  /* a counted loop's exit test: to `target` when host counter `counter` is 0,
                     else the counter decremented */
  CU_STEP_SET,    /* host counter `counter` set to `trips` (a counted loop's start) */
  CU_STEP_JUMP,   /* to step `target` (a loop's back edge) */
} CuStepKind;

#define CU_MAX_PARAMS 256 /* pointer parameters of one kernel */
#define CU_MAX_SCALARS 4  /* i64 parameters of one kernel (after the pointers) */
#define CU_SMS 132        /* streaming multiprocessors of an H100/H200 */
#define CU_MMA_HEAD 128   /* head dims the tensor-core attention kernel takes, at most */

typedef struct CuStep {
  CuStepKind kind;  /* what runs */
  const HInstr *in; /* entry instruction it belongs to */
  /* CU_STEP_KERNEL */
  char name[96];                  /* kernel symbol */
  int kidx;                       /* kernel number (index into the function table) */
  LLVMValueRef fn;                /* the NVPTX function */
  int64_t grid, block;            /* launch dimensions (x only) */
  int64_t smem;                   /* static shared memory bytes (for the manifest) */
  const char *what;               /* kernel shape: "loop", "row-reduce", "stage", "scatter", ... */
  int nparams;                    /* pointer parameters */
  CuPtr *params;                  /* their addresses */
  int64_t *psize;                 /* bytes reachable from each (-1: unknown) */
  int nscalars;                   /* i64 parameters after the pointers */
  int64_t scalar[CU_MAX_SCALARS]; /* their values */
  int regs, spill_st, spill_ld;   /* ptxas report */
  /* CU_STEP_GEMM: C = op(A) op(B) in cuBLAS's column-major terms */
  int transa, transb;    /* 0: N, 1: T */
  int64_t m, n, k;       /* sizes */
  int64_t lda, ldb, ldc; /* leading dimensions */
  int64_t sa, sb, sc;    /* batch strides (elements) */
  int64_t batch;         /* batch count */
  DType dt;              /* result type: f32, f64, bf16, f16 (s32 for s8 operands) */
  DType at;              /* operand type: dt, or bf16 / f16 / s8 / fp8 under a wider result (of
                            B, the dot's lhs; fp8: of A too, but for the mixed fp8 pairs) */
  DType aat;             /* A's (the dot's rhs) type: at but for f8e4m3fn x f8e5m2 */
  int lidx;              /* fp8 operands or a fused epilogue: the step's number among the
                            cuBLASLt GEMMs (-1: cublasGemmStridedBatchedEx), whose descriptors
                            and algorithm the host object keeps per context */
  CuPtr a, b, c;         /* operands; c: the result (D; C too unless a residual is fused) */
  int epi;               /* CU_EPI_* of the epilogue cuBLASLt computes (cuda_gemm_epilogue.c;
                            0: none) */
  CuPtr bias, res;       /* epi: the bias vector (m elements of type dt), the residual (C, read
                            with beta = 1, c's layout and type) */
  DType udt;             /* epi: the product's type unfused (the dot's) */
  CuPtr uc;              /* epi: where the unfused GEMM writes it for the epilogue kernel */
  int fb;                /* epi: the step of the epilogue kernel run instead where cuBLASLt cannot
                            take the epilogue; on that kernel step: the GEMM's step (-1: none) */
  /* CU_STEP_COPY */
  CuPtr src, dst;        /* addresses */
  int64_t bytes;         /* size */
  const Literal *hconst; /* or NULL: the source is this constant's bytes from src.offset, copied
                            from the host (a loop's init value made of constants) */
  /* CU_STEP_BRANCH, CU_STEP_COUNT, CU_STEP_SET, CU_STEP_JUMP */
  int target;    /* the step gone to */
  int counter;   /* the host counter */
  int64_t trips; /* CU_STEP_SET: its value */
  /* CU_STEP_CONV: y[n,p,q,k] = sum x[n, h, w, c] f[k, r, s, c] (cross-correlation, groups),
   * or in NCHW: y[n,k,p,q] = sum x[n, c, h, w] f[k, c, r, s] */
  int cidx;               /* convolution number (descriptors and algorithm per context) */
  bool nchw;              /* NCHW tensors and KCRS filter (else NHWC and KRSC) */
  bool wgrad;             /* backward filter: x and y (the output gradient) in, w out */
  int64_t cn, cc, ch, cw; /* input as cuDNN sees it: batch, channels, height, width */
  int64_t ck, cr, cs;     /* filter: output channels, height, width (channels: cc / groups) */
  int64_t cp, cq;         /* output height, width */
  int64_t pad[2], stride[2], dil[2]; /* symmetric padding, strides, filter dilation */
  int64_t groups;                    /* feature groups */
  CuPtr x, w, y, ws;                 /* input, filter, output, workspace */
  /* CU_STEP_FFT: batch (above) transforms of fft_n[0..fft_rank) elements each (the operand's
   * minor dims, dense row-major), x -> y */
  int fidx;         /* transform number (its cufftHandle per context) */
  int fft_kind;     /* cufftType: CUFFT_C2C 0x29, R2C 0x2a, C2R 0x2c, Z2Z 0x69, D2Z 0x6a, Z2D
                       0x6c */
  int fft_dir;      /* C2C, Z2Z: CUFFT_FORWARD -1 or CUFFT_INVERSE 1 */
  int fft_rank;     /* 1 to 3 */
  int64_t fft_n[3]; /* the lengths, outermost first (XLA's fft_length) */
} CuStep;

/* A kernel generated once, by its IR's fingerprint (gen_fingerprint). */
typedef struct CuUniq {
  uint64_t hash;      /* FNV-1a of the tokens */
  const uint64_t *t;  /* the tokens */
  size_t n;           /* their count */
  const CuStep *step; /* the step that generated it */
} CuUniq;

/* Where the values of one computation live: the entry's (args, results, the plan's heap in temp),
 * or a while loop's condition or body (cuda_loop.c): its heap at heap_off in temp, its tuple
 * parameter the loop's state (but for invariant leaves, read where the init value is), its
 * results the next-state block or the predicate byte in temp. */
typedef struct CuRegion {
  const HComp *comp;            /* the computation */
  const MemPlan *plan;          /* its buffers */
  bool entry;                   /* the entry computation */
  int64_t heap_off;             /* !entry: temp offset of the plan's heap */
  CuPtr state;                  /* !entry: the loop state's block */
  const int64_t *result_off;    /* !entry: temp offset of each result leaf */
  const struct CuRegion *outer; /* !entry: the region of the while instruction */
  const HInstr *const *inv;     /* !entry: per flat state leaf, the init value an invariant
                                   leaf is read from (in outer; NULL: the state's leaf) */
  const int64_t *inv_off;       /* byte offset in that value's storage */
  const Shape *sshape;          /* !entry: the state's shape */
} CuRegion;

/* Module-wide state of one CUDA compilation. */
typedef struct CudaCg {
  GenCg cg;                     /* the generator's state (NVPTX module, scratch; cg.entry: the
                                   computation being emitted) */
  MemPlan plan;                 /* the emitted computation's buffers (entry_plan, or a loop's) */
  const CudaOpts *o;            /* options */
  const char *arch;             /* sm_XX */
  int nsteps, step_cap;         /* steps in execution order */
  CuStep *steps;                /* the steps */
  int nkernels;                 /* distinct kernels (steps may share one) */
  int nuniq, uniq_cap;          /* the distinct kernels' fingerprints */
  CuUniq *uniq;                 /* them */
  GenFp fp;                     /* the fingerprint of the kernel being closed (its buffer reused) */
  bool uses_cublas;             /* a GEMM step through cublasGemmStridedBatchedEx exists (or a
                                   fused epilogue, whose fallback calls it) */
  int nlt;                      /* GEMM steps through cuBLASLt (fp8 operands, fused epilogues) */
  int nepi;                     /* of them, those with a fused epilogue */
  int nconvs;                   /* CU_STEP_CONV steps (cuDNN is used when > 0) */
  int ndepthwise;               /* depthwise convolutions by cuda_depthwise_kernel */
  int ndepthwise_elemental;     /* and by the elemental loop kernel (forms it does not take) */
  int nffts;                    /* CU_STEP_FFT steps (cuFFT is used when > 0) */
  int64_t ws_bytes;             /* cuDNN workspace reserved in temp (after the staging area) */
  int64_t stage_bytes;          /* private scratch after the plan's heap (staged GEMM operands) */
  int64_t temp_bytes;           /* what the caller provides: plan heap + staging + workspace */
  MemPlan entry_plan;           /* the entry's plan (plan is the emitted computation's) */
  CuRegion entry_region;        /* the entry's values */
  const CuRegion *region;       /* the computation being emitted (cg.entry, plan are its) */
  int nloops, loop_cap;         /* while loops (cuda_loop.c) */
  struct CuLoop **loops;        /* them */
  int ncounters;                /* host counters of counted loops */
  int nloop_products;           /* dots and convolutions left to loop kernels (--stats) */
  const char *loop_products[4]; /* the first of them */
  int64_t graph_nodes;          /* steps a call launches when NAME_cuda_run replays them as a
                                   CUDA graph (cuda_graph.c); 0: launched directly */
} CudaCg;

/* Resolve the storage of an instruction of the computation being emitted (cc->region) to a
 * device address. Constants have none (false). */
bool cuda_ptr_of(CudaCg *cc, const HInstr *in, CuPtr *out);
/* Append a step (zeroed, kind set). */
CuStep *cuda_add_step(CudaCg *cc, CuStepKind kind, const HInstr *in);

/* How cublasGemmStridedBatchedEx (or cuBLASLt) runs a GEMM step: cudaDataType_t of A/B and of C,
 * cublasComputeType_t, their names (header, manifest, --stats), and the scalars' type. */
typedef struct CuGemmTypes {
  int ab, c, compute;                          /* enum values (ab: B's) */
  const char *ab_name, *c_name, *compute_name; /* their names */
  int a;                                       /* A's type (ab but for mixed fp8) */
  const char *a_name;
  DType scalar; /* alpha and beta: f32, f64 or s32 */
} CuGemmTypes;
CuGemmTypes cuda_gemm_types(const CudaCg *cc, const CuStep *s);

/* ------------------------------------------------------------------ cuda_loop.c */

/* Plan the while loops of the entry (and those nested in them): plans for their conditions and
 * bodies, scratch regions above the entry's heap; then every plan's heap ends at the top, so that
 * staging scratch lies above all. false with a located error. */
bool cuda_plan_loops(CudaCg *cc);
/* The steps of the computation placed by rg, in order (while loops with their control steps). */
bool cuda_emit_comp(CudaCg *cc, const CuRegion *rg);

/* ------------------------------------------------------------------ cuda_kernel.c */

/* cuda_depthwise.c: the kernel of entry instruction in whose hero is depthwise convolution
 * conv (opt_conv_depthwise: never cuDNN's grouped algorithms, a third of XLA's speed; *taken,
 * else in is left to the elemental loop kernel); false after an error. */
bool cuda_depthwise_kernel(CudaCg *cc, HInstr *in, const HInstr *conv, bool *taken);

/* Emit the step(s) computing entry instruction in. false with a located error. */
bool cuda_emit_instr(CudaCg *cc, HInstr *in);
/* The entry value fusion (or lone instruction) in reads directly as expr, also through
 * row-major reshapes inside the fusion, or NULL. */
const HInstr *cuda_direct_value(const HInstr *in, const HInstr *expr);

/* The pieces other kernel files build with. cuda_kbegin starts a kernel step for entry
 * instruction root: its parameters are the storage of root's operands, of root itself, then
 * the nextra addresses given (their values into xv); cuda_kend closes it (and drops it for an
 * identical earlier kernel), false when generation failed. cuda_kbind_fusion makes a fusion's
 * parameters resolve to its operands; cuda_kbuffer is an entry value's pointer in the kernel. */
GenKern *cuda_kbegin(CudaCg *cc, const HInstr *root, const char *what, int nextra,
                     const CuPtr *extra, LLVMValueRef *xv, CuStep **stp);
/* cuda_kbegin with nscalars i64 parameters after the pointers, of the given values in this
 * step (their values in the kernel into sv): steps that differ only in them share a kernel. */
GenKern *cuda_kbegin_ex(CudaCg *cc, const HInstr *root, const char *what, int nextra,
                        const CuPtr *extra, LLVMValueRef *xv, int nscalars, const int64_t *scalar,
                        LLVMValueRef *sv, CuStep **stp);
bool cuda_kend(GenKern *k);
/* The grid-stride loop over shape ls: body(k, idx) for every element, launched as st->grid
 * blocks (set from the element count when still 0). */
typedef bool (*CkBody)(GenKern *k, LLVMValueRef *idx, void *ctx);
void cuda_grid_loop(GenKern *k, CuStep *st, const Shape *ls, CkBody body, void *ctx);
/* Leaf j of tuple shape s stored back to back from p (its address, made in the kernel's entry). */
LLVMValueRef cuda_leaf_ptr(GenKern *k, LLVMValueRef p, const Shape *s, int j);
/* The kernels of a scatter (cuda_scatter.c). */
bool cuda_scatter(CudaCg *cc, HInstr *in);
/* The kernels of a sort instruction (cuda_sort.c), of a select-and-scatter
 * (cuda_select_scatter.c). */
bool cuda_sort(CudaCg *cc, HInstr *in);
bool cuda_select_scatter(CudaCg *cc, HInstr *in);
void cuda_kbind_fusion(GenKern *k, const HInstr *in);
LLVMValueRef cuda_kbuffer(GenKern *k, const HInstr *in);
/* Launch bounds of the kernel: at most threads a block, min_blocks resident per SM (ptxas caps
 * its registers to fit). */
void cuda_launch_bounds(GenKern *k, int64_t threads, int min_blocks);
/* if (c) { ... }: cuda_if returns the join block, the builder left in the then-block and the
 * elemental cache's mark in *mark; cuda_endif closes it (the then-block's values dropped). */
LLVMBasicBlockRef cuda_if(GenKern *k, LLVMValueRef c, int *mark);
void cuda_endif(GenKern *k, LLVMBasicBlockRef join, int mark);
/* A special register (llvm.nvvm.read.ptx.sreg.*) as i64. */
LLVMValueRef cuda_sreg(GenKern *k, const char *name);
/* A call of intrinsic name on args; an overloaded intrinsic takes overload as its type (f32
 * for llvm.maxnum, the pointer type for ldmatrix), which is ignored otherwise. */
LLVMValueRef cuda_intrinsic(GenKern *k, const char *name, LLVMTypeRef overload, LLVMValueRef *args,
                            int n);
/* a * m + b (i64); the f32 fma x * y + z. */
LLVMValueRef cuda_lin(GenKern *k, LLVMValueRef a, int64_t m, LLVMValueRef b);
LLVMValueRef cuda_fma(GenKern *k, LLVMValueRef x, LLVMValueRef y, LLVMValueRef z);
/* v from another lane (any scalar register type up to 64 bits): the lane off below (down),
 * lane ^ off (bfly) or lane off (idx). */
typedef enum CuShfl { CU_SHFL_DOWN, CU_SHFL_BFLY, CU_SHFL_IDX } CuShfl;
LLVMValueRef cuda_shfl(GenKern *k, LLVMValueRef v, int off, CuShfl mode);
/* A shared-memory array of n elements of type elt for step st's kernel (st->smem set). */
LLVMValueRef cuda_smem(GenKern *k, CuStep *st, LLVMTypeRef elt, int64_t n);
/* __syncthreads(). */
void cuda_barrier(GenKern *k);
/* Private scratch after the plan's heap for a step (staged operands, partial results), at least
 * bytes long; steps run one after another, so each reuses it from its start. */
CuPtr cuda_scratch(CudaCg *cc, int64_t bytes);

/* Operand j (0 lhs, 1 rhs) of a dot split into batch / free / contracting dim lists. */
typedef struct DotSide {
  int nb, nf, nc;                                            /* counts */
  int64_t b[HLO_MAX_RANK], f[HLO_MAX_RANK], c[HLO_MAX_RANK]; /* operand dims, in order */
  int64_t B, F, K;                                           /* products of the sizes */
} DotSide;
void cuda_dot_side(const HInstr *dot, int j, DotSide *s);

/* ------------------------------------------------------------------ cuda_mma.c */

/* c (4 f32 registers) += a (16 x 16, 4 registers) . b (16 x 8, 2 registers) on the tensor
 * cores (mma.sync m16n8k16, bf16 or f16 operands). */
void cuda_mma(GenKern *k, DType t, LLVMValueRef *a, LLVMValueRef *b, LLVMValueRef *c);
/* Two 16-bit values (bf16, f16 or i16) packed into an i32, lo in the low half. */
LLVMValueRef cuda_pack16(GenKern *k, LLVMValueRef lo, LLVMValueRef hi);
/* ldmatrix of n (2 or 4) 8x8 matrices of 16-bit elements from shared address p (this lane's
 * row), transposed or not, into r[0..n). */
void cuda_ldsm(GenKern *k, LLVMValueRef p, bool trans, int n, LLVMValueRef *r);

/* ------------------------------------------------------------------ cuda_skinny.c */

/* The kernel(s) of a dot of a few rows (a decode step's projection, a dequantized weight's
 * product), or of a fusion whose hero it is (*taken; else nothing emitted). false with a
 * located error when generation failed. */
bool cuda_skinny(CudaCg *cc, HInstr *in, bool *taken);
/* The pieces the prologue GEMM (cuda_gemm_mma.c) shares. Whether the fusion members the dot's
 * operands sop and wop are made of are cheap per element and wop's read everything of its own
 * dims at its own index (so that vector accesses of its operands are its rows); whether the
 * fusion's root reads dot only through elementwise ops of the dot's dims. */
bool cuda_dot_operands_ok(HArena *a, const HComp *c, const HInstr *sop, const HInstr *wop);
bool cuda_dot_epi_ok(HArena *a, const HComp *c, const HInstr *dot);
/* The dot's f32 sum at idx (the dot's index) written: rounded to its type, through the fusion's
 * epilogue up to root (root == dot: none). */
void cuda_dot_write(GenKern *k, const HInstr *in, const HInstr *dot, const HInstr *root,
                    LLVMValueRef *idx, LLVMValueRef sum);
/* The dot's f32 sum at idx stored: split z's partial into part ([split][the dot's elements]),
 * or with part NULL written (cuda_dot_write). */
void cuda_dot_store(GenKern *k, const HInstr *in, const HInstr *dot, const HInstr *root,
                    LLVMValueRef part, LLVMValueRef z, LLVMValueRef *idx, LLVMValueRef sum);
/* The second kernel of a dot split over K: the nsplit f32 partials at pp ([split][the dot's
 * elements]) summed per element and written (cuda_dot_write); its shape named what. */
bool cuda_dot_finish(CudaCg *cc, HInstr *in, const HInstr *dot, const HInstr *root, int64_t nsplit,
                     CuPtr pp, const char *what);

/* ------------------------------------------------------------------ cuda_vec.c */

/* Whether a type's elements load as they are held (no decoding: vector accesses). */
bool cuda_vec_type(DType t);
/* The operands of in with the dims of s that vector accesses can read (at most max, into
 * leaf; their count). */
int cuda_vec_leaves(CudaCg *cc, const HInstr *in, const Shape *s, const HInstr **leaf, int max);
/* Entry value x's width elements from idx along its minor dim, one vector load. */
LLVMValueRef cuda_vec_load(GenKern *k, const HInstr *x, LLVMValueRef *idx, int width);
/* The loaded vector v's elements entered in the elemental cache as x at idx[0..width). */
void cuda_vec_cache(GenKern *k, const HInstr *x, LLVMValueRef v, LLVMValueRef (*idx)[HLO_MAX_RANK],
                    int width);
/* i1: every leaf's address allows vector accesses of width elements. */
LLVMValueRef cuda_vec_aligned(GenKern *k, const HInstr *const *leaf, int n, int width);
/* body(k, true, ctx) where ok holds (at run time), body(k, false, ctx) otherwise, then joined;
 * only the second when ok is NULL. */
void cuda_vec_split(GenKern *k, LLVMValueRef ok, void (*body)(GenKern *k, bool vec, void *ctx),
                    void *ctx);
/* idx[1..width) from idx[0]: the next elements along the minor dim of a rank-rank index. */
void cuda_vec_indices(GenKern *k, LLVMValueRef (*idx)[HLO_MAX_RANK], int rank, int width);

/* ------------------------------------------------------------------ cuda_gemm_mma.c */

/* The tensor-core kernel(s) of a 16-bit dot whose operand a fused prologue computes (a
 * dequantized weight), or of the fusion whose hero it is (*taken; else nothing emitted): the
 * prologue runs as the tiles are loaded instead of being staged for cuBLAS, where that is
 * estimated faster. false with a located error when generation failed. */
bool cuda_gemm_mma(CudaCg *cc, HInstr *in, bool *taken);

/* ------------------------------------------------------------------ cuda_gemm_epilogue.c */

/* What a cuBLASLt GEMM adds to the product itself: D = relu(A B + C + bias). */
enum {
  CU_EPI_BIAS = 1,     /* a bias vector along cuBLAS's m (the product's minor dims) */
  CU_EPI_RESIDUAL = 2, /* a matrix of the result's layout, as cuBLASLt's C with beta = 1 */
  CU_EPI_RELU = 4,     /* maximum(x, 0) last */
};

/* An epilogue matched by cuda_gemm_epilogue_match. */
typedef struct CuGemmEpi {
  int flags;          /* CU_EPI_* (0: no match) */
  DType dt;           /* D's type: the fusion's */
  const HInstr *bias; /* CU_EPI_BIAS: the vector's expression inside the fusion (type dt) */
  CuPtr bias_ptr;     /* its device address (cuda_gemm_epilogue_bias) */
  CuPtr res_ptr;      /* CU_EPI_RESIDUAL: the residual's device address */
} CuGemmEpi;

/* Whether fusion in (a kOutput fusion whose hero is dot, on the cuBLAS path) computes an
 * epilogue cuBLASLt can take, filled into *e. */
bool cuda_gemm_epilogue_match(CudaCg *cc, const HInstr *in, const HInstr *dot, CuGemmEpi *e);
/* e->bias_ptr: the bias read in place, or staged by a kernel into private scratch at stage +
 * *used. false with a located error. */
bool cuda_gemm_epilogue_bias(CudaCg *cc, HInstr *in, CuGemmEpi *e, int64_t stage, int64_t *used);
/* GEMM step gi (in's only one) takes epilogue e; the last step, the epilogue kernel reading the
 * unfused product at uc, becomes its fallback. */
bool cuda_gemm_epilogue_fuse(CudaCg *cc, const HInstr *in, const CuGemmEpi *e, int gi, CuPtr uc);
/* "bias+residual+relu" (the parts of flags); cuda_epilogue_lt: the CUBLASLT_EPILOGUE_* value
 * and its name. */
const char *cuda_epilogue_name(int flags);
int cuda_epilogue_lt(int flags, const char **name);

/* ------------------------------------------------------------------ cuda_attention.c */

/* The fused attention kernel(s) for a kCustom fusion the attention pass built (*taken; else
 * nothing emitted). false with a located error when generation failed. */
bool cuda_attention(CudaCg *cc, HInstr *in, bool *taken);

/* ------------------------------------------------------------------ cuda_fft.c */

/* An entry fft: its CU_STEP_FFT (after a scratch copy of an IRFFT's operand), then for the
 * inverse kinds the kernel scaling by 1/N. */
bool cuda_fft(CudaCg *cc, HInstr *in);
/* A transform step's cufftExec* function and cufftType name (manifest, --stats). */
const char *cuda_fft_exec_name(const CuStep *s);
const char *cuda_fft_type_name(const CuStep *s);

/* ------------------------------------------------------------------ cuda_ptxas.c */

/* Assemble ptx with ptxas (-arch, -O3, -v) in a private temporary folder; *cubin (malloc'd)
 * receives the output, and every kernel step gets its registers and spills. */
bool cuda_ptxas(CudaCg *cc, const char *ptxas, const char *ptx, size_t len, char **cubin,
                size_t *cubin_len, HErr *err);

/* ------------------------------------------------------------------ cuda_host.c */

/* The host object (x86-64 ELF) embedding cubin and ptx; *obj malloc'd. */
/* The steps a call launches when they can be replayed as a CUDA graph (cuda_graph.c), else 0
 * (--cuda-graphs=off, a data-dependent loop, a copy of a constant no memset does, too many). */
int64_t cuda_graph_nodes(const CudaCg *cc);
bool cuda_host_object(CudaCg *cc, const char *cubin, size_t cubin_len, const char *ptx,
                      size_t ptx_len, char **obj, size_t *obj_len, HErr *err);

/* ------------------------------------------------------------------ cuda_header.c */

/* Text of the generated header / manifest (malloc'd, NUL-terminated). */
char *cuda_header_text(CudaCg *cc, size_t *len);
char *cuda_manifest_text(CudaCg *cc, const char *image, size_t *len);

#endif
