/* targets/gen/gen.h: what both code generators (targets/cpu, targets/cuda) share.
 *
 * Sectioned by file:
 *   gen_cg.c        the module-wide state (GenCg: module, LLVM context, module and builder,
 *                   common types, constant globals, the target's hooks); types of dtypes
 *   gen_kernel.c    the kernel being emitted (GenKern): loops, index ranges, allocas, element
 *                   loads and stores, a fusion's hero
 *   gen_elemental.c the elemental generator: value = gen_value(kernel, instr, index[]) through
 *                   fused, called and reducer computations; scalar math; the support check
 *   gen_complex.c   complex numbers (c64, c128) in the elemental generator: their register
 *                   type, arithmetic and functions
 *   gen_scatter.c   scatter's form, update indices and combination
 *   gen_sort.c      sort's form check, operand values and inline comparator
 *   gen_select_scatter.c select-and-scatter's form check and window scan
 *   gen_header.c    text the generated C headers share
 *   gen_fingerprint.c a structural fingerprint of a function's IR (kernels emitted once)
 *
 * Nothing here includes a target's header: a target embeds GenCg (and, for the CPU, GenKern)
 * in its own state and reaches the generator through these functions; the generator reaches
 * the target through the hooks of GenCg. */
#ifndef HLOC_GEN_H
#define HLOC_GEN_H

#include "memplan.h"

#include <llvm-c/Core.h>

/* ------------------------------------------------------------------ gen_cg.c */

struct GenCg;
struct GenKern;

/* Module-wide state of one compilation, as the generator sees it; the first member of each
 * target's own state (CpuCg, CudaCg). */
typedef struct GenCg {
  HModule *m;       /* module compiled */
  HComp *entry;     /* the computation whose values are being emitted (the entry, or a while
                       loop's condition or body) */
  const char *name; /* the module's symbol prefix (constant globals NAME_cN) */
  HErr *err;        /* first error */
  HArena *scratch;  /* plan and bookkeeping, freed at the end */
  LLVMContextRef C; /* LLVM context */
  LLVMModuleRef M;  /* LLVM module */
  LLVMBuilderRef B; /* the one builder */
  LLVMTypeRef i1, i8, i16, i32, i64, f16, bf16, f32, f64, ptr, vd; /* common types */
  int nconst;                                                      /* constant globals made */
  HInstr **const_instr;   /* constant instruction of each global */
  LLVMValueRef *const_gv; /* its global */
  int const_cap;          /* capacity of the two arrays */
  /* The target's hooks: the storage of an entry value read inside kernel k (required); a
     pointer to constant in's literal inside k (NULL: its global itself); the global of n bytes
     of read-only data (NULL: gen_rodata). */
  LLVMValueRef (*buffer_fn)(struct GenKern *k, const HInstr *in);
  LLVMValueRef (*const_ptr_fn)(struct GenKern *k, const HInstr *in);
  LLVMValueRef (*rodata_fn)(struct GenCg *g, const char *name, const void *data, size_t n);
  /* while set: 8-bit integers convert to floats through f32 bit patterns (2^23 + x, less
     2^23) instead of integer-to-float conversions, which GPUs run at a quarter of the ALU's
     rate (one more ALU instruction: a kernel sets it where that measures faster) */
  bool int8_float_bits;
} GenCg;

/* The common types of g (i1 .. vd) in context g->C. */
void gen_cg_types(GenCg *g);
/* LLVM register type of a dtype (pred: i1; fp8: f32, gen_fp8_decode; s4, u4: i4) and storage
 * type (pred, fp8, s4, u4: i8). */
LLVMTypeRef gen_reg_type(GenCg *g, DType t);
LLVMTypeRef gen_mem_type(GenCg *g, DType t);
/* A private, read-only, 64-byte aligned global holding n bytes of data, named name. */
LLVMValueRef gen_rodata(GenCg *g, const char *name, const void *data, size_t n);
/* The read-only global holding a constant instruction's literal (made once, named NAME_cN,
 * through g->rodata_fn). */
LLVMValueRef gen_const_global(GenCg *g, HInstr *in);

/* ------------------------------------------------------------------ gen_kernel.c */

#define GEN_MAX_BIND 32 /* nesting depth of computations bound during generation */

/* Parameters of a computation entered during elemental generation: either bound to the
 * operands of the instruction calling it (fusion, call, map), or to scalar values
 * (reducers, map bodies). */
typedef struct GenBind {
  const HComp *comp;    /* computation whose parameters are bound */
  const HInstr *caller; /* operands of this instruction, or NULL */
  LLVMValueRef *vals;   /* scalar values by parameter number, when caller is NULL */
  int nvals;            /* number of vals */
  int cache_mark;       /* elemental cache entries made before entering */
} GenBind;

typedef struct GenCacheEnt {
  const HInstr *in;               /* instruction generated */
  LLVMValueRef idx[HLO_MAX_RANK]; /* at this index */
  LLVMValueRef v;                 /* its value */
} GenCacheEnt;

#define GEN_MAX_MAT 64 /* materialized values per kernel */

/* A value of a fused computation already stored in a buffer by this kernel or an earlier one
 * (an output fusion's dot, a multi-output fusion's leaf): generation loads it. */
typedef struct GenMat {
  const HInstr *in; /* the instruction */
  LLVMValueRef p;   /* its row-major buffer */
  DType dt;         /* the buffer's element type when not in's own (DT_INVALID: in's): the
                       f32 sums of a 16-bit product, rounded to in's type as they are loaded */
} GenMat;

/* One kernel function being emitted, as the elemental generator sees it (the CPU's CpuKern
 * adds its slot table around it). */
typedef struct GenKern {
  GenCg *cg;                  /* module state */
  LLVMBuilderRef B;           /* = cg->B */
  LLVMValueRef fn;            /* the function */
  LLVMBasicBlockRef entry;    /* allocas and buffer pointers go here, before entry_br */
  LLVMValueRef entry_br;      /* terminator of the entry block */
  LLVMValueRef *bufs;         /* per entry instruction: its buffer pointer, once asked */
  const HInstr *root;         /* the entry instruction this kernel computes */
  int nbind;                  /* bound computations (a stack) */
  GenBind bind[GEN_MAX_BIND]; /* the stack */
  int ncache, cache_cap;      /* elemental values generated at the current loop depth */
  GenCacheEnt *cache;         /* the cache (scratch arena) */
  bool failed;                /* an error was reported while generating */
  LLVMValueRef *lin_idx;      /* the kernel's root index array, when it has a linear form */
  LLVMValueRef lin;           /* row-major linear index equal to lin_idx over lin_shape */
  const Shape *lin_shape;     /* shape lin is linear in */
  int nmat;                   /* materialized values */
  GenMat mat[GEN_MAX_MAT];    /* them */
  int reduce_loop;            /* > 0 while generating a reduction loop's combiner */
  int nranges, range_cap;     /* induction variables of the open loops with constant bounds */
  struct GenRange *ranges;    /* them (a stack, like the loops) */
} GenKern;

/* An induction variable's values inside its loop body: [lo, hi]. */
typedef struct GenRange {
  LLVMValueRef iv;
  int64_t lo, hi;
} GenRange;

typedef struct GenLoop {
  LLVMBasicBlockRef header; /* phi and test */
  LLVMBasicBlockRef exit;   /* after the loop */
  LLVMValueRef iv;          /* induction variable (i64) */
  LLVMValueRef hi;          /* exclusive bound */
  int cache_mark;           /* elemental cache entries before the loop */
  int range_mark;           /* GenKern.nranges before the loop */
  int64_t step;             /* increment (1 unless set after opening) */
  LLVMValueRef step_v;      /* run-time increment (e.g. a GPU grid stride); overrides step */
  LLVMValueRef latch_br;    /* its back edge, once closed (for cpu_loop_hint) */
} GenLoop;

LLVMValueRef gen_i64(GenKern *k, int64_t v);
/* min(a, b) of two signed integers. */
LLVMValueRef gen_smin(GenKern *k, LLVMValueRef a, LLVMValueRef b);
/* Loops: [lo, hi) step 1; the body is emitted between open and close. */
LLVMValueRef gen_loop_open(GenKern *k, GenLoop *l, LLVMValueRef lo, LLVMValueRef hi);
void gen_loop_close(GenKern *k, GenLoop *l);
/* The same loop stepping by a run-time value. */
LLVMValueRef gen_loop_open_step(GenKern *k, GenLoop *l, LLVMValueRef lo, LLVMValueRef hi,
                                LLVMValueRef step);
/* Bounds [*lo, *hi] of an i64 index value inside the current loop nest, derived from
 * constants, the induction variables of open loops with constant bounds, and nsw add, sub and
 * mul, udiv and urem by constants of those; false when not known. Lets the elemental
 * generator drop bounds tests that cannot fail (in the segments of the CPU's kn_segments). */
bool gen_index_range(GenKern *k, LLVMValueRef v, int64_t *lo, int64_t *hi);
/* alloca in the kernel's entry block. */
LLVMValueRef gen_alloca(GenKern *k, LLVMTypeRef t);
/* Row-major linear index of idx over shape s (the kernel's lin when idx is its lin_idx over
 * the same dims). */
LLVMValueRef gen_linear(GenKern *k, const Shape *s, LLVMValueRef *idx);
/* Row-major delinearization of lin over dims[0..n) into idx. */
void gen_delin(GenKern *k, LLVMValueRef lin, const int64_t *dims, int n, LLVMValueRef *idx);
/* The same over extents ext[0..n) into idx[dims[0]], .., idx[dims[n-1]] (a linear index over
 * some dims of a shape: an attention's batch item, query row or key). */
void gen_delin_dims(GenKern *k, LLVMValueRef lin, const int *dims, const int64_t *ext, int n,
                    LLVMValueRef *idx);
/* x's value at the index whose dim d is sidx[map[d]], or c where map[d] < 0 (an operand of an
 * attention at a score's index, its head dim at c); NULL after an error. */
LLVMValueRef gen_value_mapped(GenKern *k, const HInstr *x, const int8_t *map, LLVMValueRef *sidx,
                              LLVMValueRef c);
/* Enter in the elemental cache: generating `in` at index idx (rank entries) gives v. */
void gen_cache_add(GenKern *k, const HInstr *in, int rank, LLVMValueRef *idx, LLVMValueRef v);
/* Element of an array value of shape s stored at p, at index idx (register type). */
LLVMValueRef gen_load_elem(GenKern *k, LLVMValueRef p, const Shape *s, LLVMValueRef *idx);
void gen_store_elem(GenKern *k, LLVMValueRef p, const Shape *s, LLVMValueRef *idx, LLVMValueRef v);
/* The one dot or convolution of fusion in (NULL when it has none, or several). */
const HInstr *gen_fusion_hero(const HInstr *in);

/* ------------------------------------------------------------------ gen_elemental.c */

/* Value of instruction in at index idx (in->shape.rank entries, i64), in register type.
 * NULL after reporting a located error (k->failed). */
LLVMValueRef gen_value(GenKern *k, const HInstr *in, LLVMValueRef *idx);
/* All leaves of a tuple-valued instruction (variadic reduce) at idx, into out[]. */
bool gen_value_multi(GenKern *k, const HInstr *in, LLVMValueRef *idx, LLVMValueRef *out);
/* Evaluate scalar computation c on args (one per parameter); its root's leaves into out[]. */
bool gen_scalar_comp(GenKern *k, const HComp *c, LLVMValueRef *args, int nargs, LLVMValueRef *out);
/* Whether the generator supports in's op at all (checked before emission for a located error
 * naming target: "CPU", "CUDA"); complex values are refused. */
bool gen_op_supported(const HInstr *in, const char *target, HErr *err);
/* The same check for a target that compiles complex values (complex_ok: the elementwise ops,
 * data movement, reductions, dot and fft on them; anything else touching them is refused). */
bool gen_op_supported_ex(const HInstr *in, const char *target, bool complex_ok, HErr *err);
/* The zero of dtype t in register type (a complex zero for c64, c128). */
LLVMValueRef gen_zero(GenKern *k, DType t);
/* An LLVM intrinsic of one argument (b NULL) or two of a's type ("llvm.sqrt", "llvm.copysign");
 * a libm function of n float/double arguments of type t (f16/bf16 computed in f32). */
LLVMValueRef gen_intr(GenKern *k, const char *name, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef gen_libm(GenKern *k, const char *name, DType t, LLVMValueRef *args, int n);
/* Convert a register value between dtypes with XLA's semantics. */
LLVMValueRef gen_convert(GenKern *k, LLVMValueRef v, DType from, DType to);
/* exp of an f32 value, branch-free (loops of it vectorize; about 1 ulp); the same for x <= 0
 * (a softmax's exp(s - max)) with one 2^n and no overflow test, 0 below -87 (nothing beside
 * the row maximum's exp(0) = 1), NaN kept; a * b + c as llvm.fmuladd. */
LLVMValueRef gen_exp_f32(GenKern *k, LLVMValueRef x);
LLVMValueRef gen_exp_f32_nonpos(GenKern *k, LLVMValueRef x);
LLVMValueRef gen_fmuladd(GenKern *k, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c);
/* fp8 (t: f8e4m3fn or f8e5m2) bits (i8) -> the f32 register value, exactly; and an f32 value
 * -> fp8 bits rounded as hlo_f32_to_f8e4m3fn / _f8e5m2 do (integer IR, branch-free). */
LLVMValueRef gen_fp8_decode(GenKern *k, DType t, LLVMValueRef bits);
LLVMValueRef gen_fp8_encode(GenKern *k, DType t, LLVMValueRef x);
/* The type a dot or convolution accumulates in: f32 when an operand or the result is fp8 or
 * the result is bf16 or f16 (sums in f32, rounded once: docs/numerics.md), else the result
 * type. */
DType gen_dot_acc_type(const HInstr *in);
/* An f32 value (scalar or vector) rounded to bf16 to nearest even, NaNs made quiet, in integer
 * operations (hlo_f32_to_bf16's): LLVM lowers fptrunc to bfloat to a library call per element
 * on x86 without AVX512-BF16, which the rounded results of the GEMM cannot afford. */
LLVMValueRef gen_round_bf16(GenKern *k, LLVMValueRef v);
/* Products for accumulating kernels: the term of a dot / convolution at output index idx
 * and reduction variables red (dot: contracting dims in lhs order; convolution: kernel input
 * feature then kernel spatial dims). */
LLVMValueRef gen_dot_term(GenKern *k, const HInstr *in, LLVMValueRef *idx, LLVMValueRef *red);
LLVMValueRef gen_conv_term(GenKern *k, const HInstr *in, LLVMValueRef *idx, LLVMValueRef *red);
/* Reduction extents of a dot / convolution (into ext[]); returns their count. */
int gen_dot_red_dims(const HInstr *in, int64_t *ext);
int gen_conv_red_dims(const HInstr *in, int64_t *ext);
/* Scalar binary arithmetic used by accumulating kernels (fadd / add). */
LLVMValueRef gen_add(GenKern *k, DType t, LLVMValueRef a, LLVMValueRef b);

/* ------------------------------------------------------------------ gen_complex.c */

/* The register (and memory) type of complex dtype t: the struct {T, T} of its parts. */
LLVMTypeRef gen_complex_type(GenCg *g, DType t);
/* The complex value (re, im) of complex dtype t; a constant one. */
LLVMValueRef gen_complex(GenKern *k, DType t, LLVMValueRef re, LLVMValueRef im);
LLVMValueRef gen_complex_const(GenKern *k, DType t, double re, double im);
/* Whether elementwise instruction in takes or makes a complex value (or is complex, real or
 * imag), and its value from its operands' values v[] (NULL after a located error). */
bool gen_complex_op(const HInstr *in);
LLVMValueRef gen_complex_elementwise(GenKern *k, const HInstr *in, LLVMValueRef *v);
/* Convert to or from a complex type (gen_convert's complex cases). */
LLVMValueRef gen_complex_convert(GenKern *k, LLVMValueRef v, DType from, DType to);
/* a + b and a * b of complex dtype t (accumulating kernels). */
LLVMValueRef gen_complex_add(GenKern *k, DType t, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef gen_complex_mul(GenKern *k, DType t, LLVMValueRef a, LLVMValueRef b);
/* c ? a : b, a complex value's parts selected one by one (vectorizable); others as one select. */
LLVMValueRef gen_select(GenKern *k, LLVMValueRef c, LLVMValueRef a, LLVMValueRef b);

/* ------------------------------------------------------------------ gen_scatter.c */

/* The output index oi of update element ui of dynamic-update-slice dus: its starts clamped as
 * XLA clamps them (the update inside the operand), plus ui. */
bool gen_dus_index(GenKern *k, const HInstr *dus, const LLVMValueRef *ui, LLVMValueRef *oi);

/* The operand count N of a scatter (1 plain, N variadic; 0 when its operands and result do
 * not have that form); for update index ui, the output index oi its element goes to and
 * whether it goes at all (*ok: XLA skips an update whose window does not fit; false when
 * generation failed); the combination of the update into the N outputs out[] at oi (loads,
 * the combiner of 2N scalars, stores). */
int gen_scatter_n(const HInstr *in);
/* gen_scatter_n, or 0 after a located error naming the target ("CPU", "CUDA"). */
int gen_scatter_check(const HInstr *in, HErr *err, const char *target);
bool gen_scatter_update(GenKern *k, const HInstr *in, LLVMValueRef *ui, LLVMValueRef *oi,
                        LLVMValueRef *ok);
void gen_scatter_combine(GenKern *k, const HInstr *in, const LLVMValueRef *out, LLVMValueRef *oi,
                         LLVMValueRef *ui);

/* ------------------------------------------------------------------ gen_sort.c */

#define GEN_SORT_MAX_OPS 32 /* operands of one sort */
/* Whether sort instruction in has the form both targets' kernels take and a plan (of its
 * computation) that keeps its result apart from its operands; false with a located error
 * naming target. */
bool gen_sort_check(const HInstr *in, const MemPlan *plan, HErr *err, const char *target);
/* Sort in's operands' values at operand index idx (false when generation failed), and its
 * comparator on two positions' values, lhs before rhs: i1, or NULL after a located error
 * naming target. */
bool gen_sort_values(GenKern *k, const HInstr *in, LLVMValueRef *idx, LLVMValueRef *vals);
LLVMValueRef gen_sort_compare(GenKern *k, const HInstr *in, const LLVMValueRef *lhs,
                              const LLVMValueRef *rhs, const char *target);

/* ------------------------------------------------------------------ gen_select_scatter.c */

/* gen_sort_check's counterpart for select-and-scatter instruction in. */
bool gen_sas_check(const HInstr *in, const MemPlan *plan, HErr *err, const char *target);
/* Open loops over the dims of extent > 1 of dims[0..rank) (index 0 for the others) into
 * idx; dimension split (if >= 0) covers chunk's range [chunk * csize, min(+csize, extent)).
 * Returns the loops opened; gen_sas_close closes them. */
int gen_sas_open(GenKern *k, const int64_t *dims, int rank, int split, LLVMValueRef chunk,
                 int64_t csize, GenLoop *loops, LLVMValueRef *idx);
void gen_sas_close(GenKern *k, GenLoop *loops, int nl);
/* The window scan of select-and-scatter in at source position sidx: *have_a (i1) whether the
 * window has a real tap, *val_a the selected value, sel_a[d] (i64 allocas) its operand index;
 * errors name target. false when generation failed. */
bool gen_sas_select(GenKern *k, const HInstr *in, const LLVMValueRef *sidx, LLVMValueRef have_a,
                    LLVMValueRef val_a, const LLVMValueRef *sel_a, const char *target);

/* ------------------------------------------------------------------ gen_header.c */

/* s as text safe inside a C comment of a generated header (HLO names are arbitrary strings in
 * a module proto): "*" followed by "/" becomes "* /", "/" followed by "*" "/ *", control
 * characters '?'; at most n - 1 bytes into dst. */
const char *gen_comment_safe(char *dst, size_t n, const char *s);
/* One " *   i  name  shape (bytes)" line of a generated header's argument/result list. */
void gen_header_shape_line(HStr *b, int i, const char *name, const Shape *s);
/* The module's interface note for key (a parameter's name, "result"), a line when it has one. */
void gen_header_note(HStr *b, const HModule *m, const char *key);
/* The guarded hloc_tensor_info / parallel-for types every generated header declares. */
void gen_header_runtime_types(HStr *b);
/* "#define U_HLOC_VERSION ..." naming the compiler that wrote the header (version, commit). */
void gen_header_version(HStr *b, const char *U);

/* ------------------------------------------------------------------ gen_fingerprint.c */

/* A function's fingerprint (see gen_fingerprint.c). */
typedef struct GenFp {
  uint64_t *t;   /* tokens (malloc'd: the owner frees them) */
  size_t n, cap; /* count and capacity */
  bool opaque;   /* holds an instruction the fingerprint cannot describe */
} GenFp;
/* The caller's say over operand k (value v) of instruction in: true when it wrote the
 * operand's tokens itself (gen_fp_tok), false for the usual token. */
typedef bool (*GenFpOperand)(void *ctx, GenFp *f, LLVMValueRef in, int k, LLVMValueRef v);
/* Fingerprint fn into f (emptied first); operand, when not NULL, is asked about every
 * instruction operand. */
void gen_fingerprint(LLVMValueRef fn, GenFp *f, GenFpOperand operand, void *ctx);
/* Append token v; a pointer's bits as a token. */
void gen_fp_tok(GenFp *f, uint64_t v);
void gen_fp_tokp(GenFp *f, const void *p);

#endif
