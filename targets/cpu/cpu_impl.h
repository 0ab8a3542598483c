/* targets/cpu/cpu_impl.h: the CPU code generator's private interface.
 *
 * Sectioned by file:
 *   cpu_compile.c   driver: lowering, buffer plan, kernels in order, the run functions,
 *                   optimization and emission, atomic output
 *   cpu_kernel.c    one kernel function per entry instruction: loops, buffers, the loop nest
 *                   that stores an elemental value, accumulating dot/convolution nests, scatter
 *   cpu_sort.c      the sort kernel (stable merge sort of a permutation per row)
 *   cpu_fft.c       the fft kernels (a task per axis, mixed-radix and Bluestein line functions)
 *   cpu_select_scatter.c the select-and-scatter kernel (init, then window scans per source
 *                   element in order)
 *   cpu_header.c    the generated C header
 *   gemm/           the blocked GEMM of dots and convolutions (its own private header,
 *                   gemm/gemm_impl.h; the entry points are the section "gemm/" below) */
#ifndef HLOC_CPU_IMPL_H
#define HLOC_CPU_IMPL_H

#include "gen.h"
#include "target.h"

#include <stddef.h>

/* ------------------------------------------------------------------ cpu_compile.c */

/* One pointer a kernel receives from the run function: kernels see every buffer through a
 * per-task table of pointers (their ctx argument), never through module-specific addresses,
 * so structurally identical kernels (the layers of a network) are emitted once. */
typedef enum CpuSlotKind {
  CPU_SLOT_INSTR,  /* the storage of instruction `in` (per the memory plan of the region the
                      task runs in), plus `off` bytes */
  CPU_SLOT_GLOBAL, /* the global `gv` (a constant's literal) */
  CPU_SLOT_TEMP,   /* the scratch heap at byte offset `off` (kernel-private scratch) */
  CPU_SLOT_PACKED, /* the base of the caller's packed weights (NAME_run_packed), NULL when
                      the run was given none: kernels test it and add their operand's place */
} CpuSlotKind;

typedef struct CpuSlot {
  CpuSlotKind kind; /* what the pointer is */
  const HInstr *in; /* CPU_SLOT_INSTR: the entry instruction */
  LLVMValueRef gv;  /* CPU_SLOT_GLOBAL: the global */
  int64_t off;      /* CPU_SLOT_TEMP: byte offset in the scratch heap; CPU_SLOT_INSTR: byte
                       offset inside the instruction's storage (a leaf of a block) */
} CpuSlot;

/* A weight packed ahead of the runs (NAME_pack, gemm/weights.c): an entry parameter read in place
 * as the B of a blocked product, laid out as that product's GEMM reads a B packed beforehand
 * (GP_BPRE) for nnb column blocks of nblk columns, or as the taps of a Winograd convolution,
 * transformed (K input and N output channels, strides wk), at byte offset dst of the packed
 * weights. */
typedef struct CpuPackJob {
  int kind;          /* 0: a product's B; 1: a Winograd convolution's taps; 2: a bf16 B on
                        depth groups (gemm/pairs.c's layout) */
  int param;         /* the entry parameter */
  int64_t off;       /* element offset of B in it */
  int64_t rs, cs;    /* element strides of B's rows (K) and columns (N) */
  int64_t K, N;      /* B's extent */
  int64_t nblk, nnb; /* column blocks */
  int64_t dst;       /* byte offset in the packed weights */
  int64_t wk[4];     /* kind 1: the taps' strides of (kh, kw, ci, co) */
  int et;            /* kind 0: B's element type (gemm/'s GmElt: f32, bf16, f16), packed as f32 */
} CpuPackJob;

/* Where the values of one computation live: the entry's (args, results, the plan's heap), or
 * a while loop's condition or body (cpu_compile.c): its heap at heap_off in the scratch,
 * its tuple parameter the loop's state block (but for the invariant leaves, read where the
 * loop's init value is), its results the next-state block or the predicate byte (all in the
 * scratch, at fixed offsets); or a conditional's branch: its parameter read where the
 * conditional's operand is (every leaf invariant), its results a block in the scratch. */
typedef struct CpuRegion {
  const HComp *comp;   /* computation whose instructions it places */
  const MemPlan *plan; /* their buffers */
  bool entry;          /* the entry computation: params in args[], results in results[] */
  int64_t heap_off;    /* !entry: scratch offset of the plan's heap */
  int param_kind;      /* !entry: where its parameter (the loop's state) is, as a slot of
                          the run function's table: 1 results[param_index], 2 the scratch */
  int64_t param_index; /* !entry: results[] index when param_kind is 1 */
  int64_t param_off;   /* !entry: byte offset of the state (in the scratch, or in the result) */
  const int64_t *result_off;     /* !entry: scratch offset of each result leaf */
  const struct CpuRegion *outer; /* !entry: the region of the while instruction */
  const CpuSlot *inv;            /* !entry, or NULL: per flat leaf of the state, where a leaf the
                                    body passes through unchanged is read (the init value's
                                    storage in outer; in == NULL: a leaf of the state block) */
  const Shape *state;            /* !entry: the state's shape */
} CpuRegion;

/* What a task of the run function does (the schedule is a table walked by one loop). */
typedef enum CpuTaskOp {
  CPU_TASK_KERNEL, /* call fn (chunked through the parallel-for when nchunks > 1) */
  CPU_TASK_COPY,   /* memcpy(slot 0, slot 1, bytes) */
  CPU_TASK_BRANCH, /* go to task `target` when the byte at slot 0 is zero (a loop's exit) */
  CPU_TASK_JUMP,   /* go to task `target` (a loop's back edge) */
} CpuTaskOp;

typedef struct CpuTask {
  CpuTaskOp op;            /* what it does */
  int64_t bytes;           /* CPU_TASK_COPY: bytes copied */
  int target;              /* CPU_TASK_BRANCH, CPU_TASK_JUMP: task index */
  const CpuRegion *region; /* where its CPU_SLOT_INSTR slots are resolved */
  LLVMValueRef fn;         /* void kernel(ptr ctx, i64 chunk); ctx points to the slot pointers */
  int64_t nchunks;         /* chunks to run (1: not split) */
  int nslots;              /* pointers the kernel reads from ctx */
  CpuSlot *slots;          /* what each one is */
  bool whole;              /* chunk == nchunks does all the work at once (the serial run calls that
                              instead of every chunk in turn) */
  const HInstr *root;      /* the entry instruction it computes */
  bool finish;      /* combines what the kernel before it left (its FLOPs are counted there) */
  const char *note; /* how it computes its instruction, for --profile's task names (a
                       string literal: "Winograd", "B packed", ...), or NULL */
} CpuTask;

/* Read-only data written into the object directly rather than through LLVM (cpu_rodata): its
 * symbol, bytes and size. */
typedef struct CpuElfSym {
  const char *name;
  const void *data;
  uint64_t size;
} CpuElfSym;

/* Module-wide state of one compilation. */
/* The kernels a product (dot, convolution) may get, as --stats counts them. */
typedef enum {
  CPU_PROD_GEMM,      /* the blocked GEMM on f32 operands */
  CPU_PROD_GEMM_WIDE, /* the blocked GEMM on 16-bit operands widened to f32 as packed */
  CPU_PROD_AMX,       /* the blocked GEMM on AMX tiles (bf16) */
  CPU_PROD_DPBF16,    /* the blocked GEMM on AVX512-BF16's dot products (bf16) */
  CPU_PROD_FEW,       /* the few-rows or few-columns kernels */
  CPU_PROD_WINO,      /* Winograd's convolutions */
  CPU_PROD_LOOPS,     /* loop nests: a type or form the GEMM does not take */
  CPU_PROD_ATTENTION, /* attention fusions by the blocked kernel (two products each) */
  CPU_PROD_COUNT
} CpuProduct;

typedef struct CpuCg {
  GenCg g;                           /* the generator's state (g.entry: the computation being
                                        compiled, its plan below) */
  const CpuOpts *o;                  /* options */
  const char *triple, *tcpu, *tfeat; /* the target's triple, CPU and features as LLVM gets
                                        them (the options', else the host's: cpu_cg_init) */
  MemPlan plan;                      /* buffers of the entry computation */
  MemPlan entry_plan;                /* the entry's plan (plan is the emitted computation's) */
  CpuRegion entry_region;            /* the entry's region (entry_plan) */
  const CpuRegion *region;           /* the region whose instructions are being compiled (tasks made
                                        now resolve their slots in it) */
  int nloops, loop_cap;              /* while loops compiled (cpu_compile.c's CpLoop) */
  struct CpLoop **loops;             /* their plans and scratch */
  int nconds, cond_cap;              /* conditionals compiled as branches (CpCond) */
  struct CpCond **conds;             /* their branches' plans and scratch */
  int64_t loop_top;               /* scratch used by the entry heap and the loops' regions so far */
  LLVMTypeRef ctx_ty;             /* kernel context: { ptr args, ptr results, ptr temp } */
  LLVMTypeRef task_ty;            /* void (ptr, i64) */
  int ntasks;                     /* kernels in execution order */
  CpuTask *tasks;                 /* the kernels */
  int task_cap;                   /* capacity of tasks */
  int64_t extra_temp;             /* kernel-private scratch (GEMM packing, staged operands) appended
                                     to the plan's heap at offset plan.temp_bytes (before growth) */
  int64_t temp_base;              /* the plan's own heap size: where the private scratch starts */
  struct GmState *gemm;           /* the GEMM's state (gemm/gemm_impl.h: its configuration for the
                                     target CPU and the functions made), made on first use */
  int products[CPU_PROD_COUNT];   /* dots and convolutions by the kernel that computes them */
  const char *loop_products[4];   /* the first of those computed by loop nests (--stats) */
  bool lib;                       /* compiling the prebuilt library (cpu_prebuilt.c): the GEMM's
                                     functions with every path, named CPU_LIB_PREFIX_* */
  const CpuPrebuiltObj *prebuilt; /* the prebuilt library this module's object is joined with
                                     (its GEMM functions are declarations here), or NULL */
  int npacks, pack_cap;           /* weights packed ahead of the runs (NAME_pack) and capacity */
  CpuPackJob *packs;              /* them (in scratch) */
  int64_t packed_bytes;           /* NAME_PACKED_BYTES: the packed weights' size */
  bool raw_ok;          /* large read-only data goes straight into the object (cpu_rodata) */
  CpuElfSym *raw_sym;   /* that data (in scratch) */
  int nraw, raw_symcap; /* entries and capacity */
  struct CpuFft *fft;   /* cpu_fft.c's functions and tables made so far (NULL: none) */
} CpuCg;

/* The CpuCg whose generator state g is (every GenCg of the CPU target is one). */
static inline CpuCg *cpu_cg(GenCg *g) { return (CpuCg *)((char *)g - offsetof(CpuCg, g)); }

/* Symbol prefix of the prebuilt library's functions (local symbols of the objects). */
#define CPU_LIB_PREFIX "__hloc"

/* String attribute of the functions whose IR is vectorized and blocked by construction (the
 * GEMM and its packing steps): cpu_emit.c optimizes them with a light pipeline. */
#define CPU_LIGHT_ATTR "hloc-light"
/* String attribute of kernels whose work is too small for vectorization to matter (cpu_compile.c's
 * cp_mark_small): cpu_emit.c optimizes them with a scalar pipeline. */
#define CPU_SMALL_ATTR "hloc-small"

/* The memory a kernel's slot reaches, as far as the plan tells (cpu_slot_mem): for the alias
 * scopes that let LLVM vectorize without runtime overlap checks (cpu_kernel.c). */
typedef enum CpuMemKind {
  CPU_MEM_UNKNOWN, /* not known: may overlap anything */
  CPU_MEM_ARG,     /* args[index], read-only */
  CPU_MEM_RESULT,  /* results[index], its bytes [lo, hi) (a loop's state kept there) */
  CPU_MEM_SCRATCH, /* the scratch bytes [lo, hi) */
  CPU_MEM_RODATA,  /* read-only data of the object */
} CpuMemKind;
typedef struct CpuMem {
  CpuMemKind kind;
  int64_t index;  /* CPU_MEM_ARG, CPU_MEM_RESULT */
  int64_t lo, hi; /* CPU_MEM_SCRATCH, CPU_MEM_RESULT */
} CpuMem;
/* Whether slots a and b of a kernel of the current region address the same byte (a value
 * computed in place of its operand, a loop state's leaf updated in place): the kernel then
 * reads and writes through one pointer, so that LLVM vectorizes without an overlap check
 * (which two equal pointers would fail, running the scalar copy). */
bool cpu_slots_same_address(CpuCg *cg, const CpuSlot *a, const CpuSlot *b);
/* What slot sl of a task placed in region rg reaches. */
CpuMem cpu_slot_mem(const CpuCg *cg, const CpuRegion *rg, const CpuSlot *sl);
/* Whether no byte written through one of a and b can be accessed through the other: read-only
 * data, arguments (never written) and the scratch are apart from each other and from the
 * results (the caller passes distinct buffers, but for a declared input/output alias);
 * scratch ranges by overlap. */
bool cpu_mem_disjoint(const CpuCg *cg, const CpuMem *a, const CpuMem *b);

/* cg zeroed and set up for options o: the resolved target, an LLVM context, module (named
 * modname) and builder, the common types, a scratch arena; cpu_cg_free releases them. */
void cpu_cg_init(CpuCg *cg, const CpuOpts *o, HErr *err, const char *modname);
void cpu_cg_free(CpuCg *cg);
/* What an LLVM features string ("+avx2,-avx512f,...") says of feature f ("avx2"): +1 on, -1
 * off (the last mention decides), 0 nothing. */
int cpu_feature_said(const char *feat, const char *f);
/* A new task at the end of the schedule: a kernel task of one chunk in the current region,
 * all else zero. */
CpuTask *cpu_task_push(CpuCg *cg);
/* A private, read-only, 64-byte aligned global holding n bytes of data, named name. From
 * CPU_RAW_MIN bytes on, where the output is an ELF64 object (cg->raw_ok), a hidden declaration
 * instead, the bytes kept by reference (data must live as long as the compilation: the module's
 * or cg->g.scratch's): cpu_emit() joins them to the object as a local symbol of .rodata, past
 * LLVM. */
LLVMValueRef cpu_rodata(CpuCg *cg, const char *name, const void *data, size_t n);
#define CPU_RAW_MIN (64 << 10)

/* ------------------------------------------------------------------ cpu_kernel.c */

/* One CPU kernel function being emitted: the generator's kernel and the slot table through
 * which it reaches memory (every GenKern of the CPU target is the g of one). */
typedef struct CpuKern {
  GenKern g;               /* what the elemental generator sees */
  LLVMValueRef ctx;        /* the function's context argument */
  LLVMValueRef chunk;      /* its chunk argument */
  int nslots, slot_cap;    /* pointers read from ctx (see CpuSlot) */
  CpuSlot *slots;          /* them, in order of first use */
  LLVMValueRef *slot_vals; /* their loaded values (entry block) */
} CpuKern;

/* The CpuKern of generator kernel k. */
static inline CpuKern *cpu_kern(GenKern *k) {
  return (CpuKern *)((char *)k - offsetof(CpuKern, g));
}

/* Emit the kernel(s) for entry instruction in, appending to cg->tasks. No kernel for views,
 * parameters, constants and tuples. false with a located error. */
bool cpu_emit_instr(CpuCg *cg, HInstr *in);
/* A product (named name) left to loop nests or loop kernels: counted in
 * products[CPU_PROD_LOOPS], the first four named in loop_products (--stats). */
void cpu_note_loop_product(CpuCg *cg, const char *name);
/* A new kernel function for entry instruction root (appended to the module), its builder
 * positioned in the body; cpu_kern_end closes it and appends the task (false when generation
 * failed). */
GenKern *cpu_kern_begin(CpuCg *cg, const HInstr *root);
bool cpu_kern_end(GenKern *k, int64_t nchunks);
/* Generation of `in` inside this kernel loads it from row-major buffer p (_as: whose elements
 * are of type dt, DT_INVALID meaning in's own, converted to in's type as they are loaded). */
void cpu_kern_materialized(GenKern *k, const HInstr *in, LLVMValueRef p);
void cpu_kern_materialized_as(GenKern *k, const HInstr *in, LLVMValueRef p, DType dt);
/* Whether every use of v in c reaches `to` through elementwise ops of v's dimensions (v may
 * be `to` itself). */
bool cpu_elem_path(const HComp *c, const HInstr *v, const HInstr *to);
/* Attach llvm.loop metadata {name[, value]} (value NULL: none) to the back edge br of a loop
 * (GenLoop.latch_br once closed), replacing what it had. */
void cpu_loop_hint(GenKern *k, LLVMValueRef br, const char *name, LLVMValueRef value);
/* Vectors: x (a scalar) in every lane of an n-wide vector; the constant n-lane mask whose
 * first m lanes are set; llvm.masked.load (the lanes left off zero) and llvm.masked.store of
 * elements at p aligned to their size. */
LLVMValueRef cpu_splat(GenKern *k, LLVMValueRef x, int n);
LLVMValueRef cpu_lane_mask(GenKern *k, int n, int m);
LLVMValueRef cpu_masked_load(GenKern *k, LLVMTypeRef vt, LLVMValueRef p, LLVMValueRef mask);
void cpu_masked_store(GenKern *k, LLVMValueRef v, LLVMValueRef p, LLVMValueRef mask);
/* Pointer to the storage of an entry instruction inside the current kernel. */
LLVMValueRef cpu_buffer(GenKern *k, const HInstr *in);
/* Pointer to what slot s describes, loaded from the kernel's ctx in the entry block (one load
 * per distinct slot). */
LLVMValueRef cpu_slot(GenKern *k, CpuSlot s);
/* Pointer to a constant instruction's literal (through a slot). */
LLVMValueRef cpu_const_ptr(GenKern *k, const HInstr *in);

/* ------------------------------------------------------------------ cpu_prebuilt.c */

/* The prebuilt library of compilation cg's target, when its object may be joined with this
 * compilation's instead of compiling the GEMM's functions (see cpu_prebuilt.c), or NULL. */
const CpuPrebuiltObj *cpu_prebuilt_find(CpuCg *cg);

/* ------------------------------------------------------------------ gemm/ (kernel.c, epilogue.c,
 * gemm_config.c, library.c, weights.c, gemm_ir.c) */

/* The dot or convolution kernel of entry instruction in (hero: in itself, or the dot /
 * convolution of an output fusion) as calls of the shared blocked GEMM function, when its
 * operands are strided views of buffers in f32: 1 when emitted, 0 when another path must
 * emit it, -1 after a located error. */
int cpu_gemm_kernel(CpuCg *cg, HInstr *in, const HInstr *hero);
/* The dot or convolution of fusion in whose root is a sum, maximum or minimum over the hero's
 * epilogue (an elementwise path from the hero to the reduce's operand), which cpu_gemm_kernel
 * reduces block by block; NULL when in is not of that form. */
const HInstr *cpu_gemm_reduce_hero(const HInstr *in);
/* f32 lanes of the widest vector the GEMM uses for the target CPU (16 with AVX-512, 8 with
 * AVX, else 4); cached in cg. */
int cpu_vector_width(CpuCg *cg);
/* What an LLVM x86 CPU name implies (a table in gemm/gemm_config.c; 0 for names it does not
 * list). */
enum {
  CPU_X86_AVX512F = 1, /* AVX-512F */
  CPU_X86_V3 = 2,      /* all of x86-64-v3's features */
  CPU_X86_V4 = 4,      /* all of x86-64-v4's */
  CPU_X86_PRE_AVX = 8, /* no AVX */
  CPU_X86_AMX = 16,    /* AMX-TILE, AMX-BF16 and AMX-INT8 */
  CPU_X86_BF16 = 32,   /* AVX512-BF16 at least at the FLOP rate of its f32 FMAs */
  CPU_X86_VNNI = 64,   /* AVX512-VNNI */
};
unsigned cpu_x86_traits(const char *cpu);
/* The ISA level (an LLVM CPU name: "x86-64-v4", "x86-64-v3") whose prebuilt library holds
 * exactly the GEMM functions this compilation would make (its configuration is that level's
 * default, on x86), or NULL. The caller checks that the target has the level's features. */
const char *cpu_gemm_isa(CpuCg *cg);
/* Whether the module's kernels made (or declared) any of the GEMM's functions. */
bool cpu_gemm_made(const CpuCg *cg);
/* NAME_pack(args, packed) -> i32: packs every weight of cg->packs (0; 1 for a NULL array or a
 * packed pointer not 64-byte aligned). */
void cpu_gemm_pack_function(CpuCg *cg);
/* Make every GEMM function with every path (cg->lib), internal and kept (llvm.compiler.used):
 * the prebuilt library's module. */
void cpu_gemm_library(CpuCg *cg);
/* Whether the target CPU gains from storing large outputs past the caches (not AMD's). */
bool cpu_stream_stores(CpuCg *cg);
/* Transpose the n x n matrix whose rows are the n-wide vectors v[0..n) in place (n a power of
 * two), in registers. */
void cpu_transpose_regs(GenKern *k, LLVMValueRef *v, int n);

/* ------------------------------------------------------------------ cpu_attention.c */

/* The blocked flash-attention kernel of a kCustom fusion the attention pass built: 1 when
 * emitted, 0 when in is none (or its root no longer matches), -1 after an error. */
int cpu_attention_kernel(CpuCg *cg, HInstr *in);

/* ------------------------------------------------------------------ cpu_sort.c */

/* The kernel of a lone sort instruction of the entry computation: each row sorted by a
 * stable merge sort of an index permutation (kernel-private scratch), then every operand
 * gathered through it. false with a located error. */
bool cpu_sort_kernel(CpuCg *cg, HInstr *in);

/* ------------------------------------------------------------------ cpu_fft.c */

/* The kernels of a lone fft instruction of the entry computation (any of the four kinds over
 * 1 to 3 dims, any lengths): a task per transformed axis, each line through the module's line
 * function of its length (mixed-radix Stockham passes, Bluestein's algorithm for a length with
 * a prime factor beyond 13). false with a located error. */
bool cpu_fft_kernel(CpuCg *cg, HInstr *in);

/* ------------------------------------------------------------------ cpu_select_scatter.c */

/* The kernel of a lone select-and-scatter instruction of the entry computation: the output
 * set to init, then for each source element in row-major order the selected operand element
 * of its window updated by the scatter computation (serial; parallel-for chunks only along
 * a dimension whose window is the identity). false with a located error. */
bool cpu_select_scatter_kernel(CpuCg *cg, HInstr *in);

/* ------------------------------------------------------------------ cpu_header.c */

/* Text of the generated header (malloc'd, NUL-terminated). */
char *cpu_header_text(const HModule *m, const MemPlan *plan, const CpuOpts *o, int ntasks,
                      const CpuPackJob *packs, int npacks, int64_t packed_bytes, size_t *len);
/* Upper-case macro prefix. */
void cpu_upper(char *dst, size_t n, const char *src);

/* ------------------------------------------------------------------ cpu_share.c */

/* Merge kernels before optimization: those whose IR is the same, then (at -O0..-O2) those
 * whose IR differs only in integer constants, which become values read at run time from a
 * table in read-only data given to each task as one more slot. */
void cpu_share_kernels(CpuCg *cg);
/* Magic numbers of signed division by d >= 1 (mv: multiplier, shift, add mask, rounding mask)
 * and the division they make, as the merged kernels compute it (for tests). */
void cpu_sdiv_magic(int64_t d, int64_t mv[4]);
int64_t cpu_sdiv_by_magic(int64_t n, const int64_t mv[4]);

/* ------------------------------------------------------------------ cpu_emit.c
 * (added with the two-thread emission; the driver's last step) */

/* Optimize cg->g.M and emit it as o->emit asks into *out (malloc'd, *outlen bytes): on the
 * calling thread, or for objects of larger modules split in two parts optimized and
 * code-generated on two threads and joined into one object. cg->g.M is consumed (left in an
 * unspecified state). false with a located error. */
bool cpu_emit(CpuCg *cg, char **out, size_t *outlen);

/* ------------------------------------------------------------------ cpu_knobs.c */

/* Knob k's text for this compilation (NULL: unset, the default). */
const char *cpu_knob(const CpuCg *cg, CpuKnob k);
const char *cpu_knob_of(const CpuOpts *o, CpuKnob k);
/* Whether a knob that changes the generated code is set (then no prebuilt library). */
bool cpu_knobs_tuned(const CpuOpts *o);

/* ------------------------------------------------------------------ cpu_elf.c
 * (added with the two-thread emission) */

/* Join two ELF64 relocatable objects into one (*out malloc'd): sections concatenated by name,
 * undefined symbols of one resolved to the other's definitions. false with msg. */
bool cpu_elf_join(const void *a, size_t an, const void *b, size_t bn, char **out, size_t *outlen,
                  char *msg, size_t msgn);
/* Whether objects for triple are 64-bit little-endian ELF, what cpu_elf_join() reads (the split
 * compilation, the prebuilt library and data written straight into the object need it). */
bool cpu_elf64le(const char *triple);
/* cpu_elf_join of object a and an object of a's machine whose one section, .rodata
 * (allocated, read-only), holds the entries of sym one after the other, each 64-byte aligned,
 * with a local object symbol each, where a's references to them resolve. */
bool cpu_elf_join_data(const void *a, size_t an, const CpuElfSym *sym, int nsym, char **out,
                       size_t *outlen, char *msg, size_t msgn);

#endif
