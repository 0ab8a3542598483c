/* targets/cpu/cpu_emit.c: optimization and emission of the CPU target's LLVM module,
 * cpu_emit(), called by the driver (cpu_compile.c) once the module is complete.
 *
 * Serial path (IR or assembly output, -O0, small modules, object formats other than 64-bit
 * little-endian ELF): the module gets the target triple,
 * data layout, CPU and features, is verified, optimized (default<On> on the run functions and,
 * at -O2 without its interprocedural passes, on the kernels; a light cleanup pipeline on the
 * already vectorized GEMM function and, unvectorized, on kernels of little work:
 * ce_run_pipelines) and emitted to memory.
 *
 * Split path (objects of larger modules, on several threads): LLVM optimizes and generates
 * code one function at a time, and the kernels of a module are independent functions (they
 * reach memory only through their pointer table), so the kernel functions (with the GEMM) are
 * shared between K parts by instruction count, largest first, each to the lightest part
 * (part 0 starts with the run functions' share; the GEMM counts 3/5, its pipeline being
 * light); K = weight / CE_PART_WEIGHT rounded down to even, 2..CE_MAX_PARTS, a function of the
 * module only. Each part is optimized and compiled to an object on its own:
 *   - part 0 stays in the driver's module and context, on the calling thread, with the run
 *     functions and the global variables (the task and slot tables, the constants); the
 *     other parts' functions become declarations;
 *   - parts 1..K-1 go to a pool of threads (one per part when there are CPUs for all, else
 *     one per CPU, the calling thread among them once part 0 is done; CePool), each taking
 *     the next part left: a thread reads the module's bitcode (written with large constants
 *     as declarations: the parts only declare the globals) into an LLVMContext of its own (a
 *     context is single-threaded), and compiles each part it takes from a clone of that cut
 *     down to the part (ce_cut: the other kernels and the run functions become declarations,
 *     global variables external declarations).
 * In all, a part's own kernels are external during optimization (interprocedural passes must
 * neither delete a kernel only the other module's table refers to nor change the signature
 * of a function another part calls, such as the GEMM) and internal again before code
 * generation; declarations of the other parts' functions are hidden, so calls between the
 * parts are direct. Global variables kernel code refers to become internal (a named local
 * symbol rather than a .L label) and are kept by llvm.compiler.used. The objects are then
 * joined, in part order, by cpu_elf_join() (cpu_elf.c): references between the parts resolve
 * inside the object to local symbols, so the kernels stay local and only the interface
 * symbols are global. The object differs from the serial one (function order) but is
 * deterministic: the partition depends on the IR only, not on the threads that compile it.
 * Splitting costs a bitcode round trip, contexts and threads, so modules under CE_SPLIT_MIN
 * instructions stay serial.
 *
 * Where the compilation uses the prebuilt library (cg->prebuilt, cpu_prebuilt.c) the module
 * only declares the GEMM's functions, and the library's object is joined after the module's
 * (after the last part on the split path), then the block of large constants, which the
 * module only declares too (ce_join_tail). The library itself (cg->lib) is compiled on the
 * serial path.
 *
 * LLVM's loop strength reduction and the pre-register-allocation machine scheduler are off
 * (-disable-lsr, -enable-misched=false: process-wide options, set before the CPU target's code
 * generation and reset after, under a lock): they cost a large share of code generation on
 * hloc's deep kernel nests and changed no measured run time, and the scheduler hoisted B loads
 * of the GEMM's unrolled steps over the FMAs at the price of spills (gm_direct_kloops); the
 * figures are in docs/log/2026-12-01-emit-design-figures.md.
 *
 * Knobs (cpu_knobs.def): SPLIT forces the serial (0) or the split (1) path, PARTS the number
 * of parts, THREADS the CPUs assumed; LLVM_ARGS passes options to LLVM, TIME prints the phase
 * times (wall, and each thread's CPU time), FNTIME times each function compiled alone
 * (ce_time_functions). */
#define _GNU_SOURCE /* sched_getaffinity */
#include "cpu_impl.h"

#include <llvm-c/Analysis.h>
#include <llvm-c/BitReader.h>
#include <llvm-c/BitWriter.h>
#include <llvm-c/Support.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Modules with fewer instructions than this (before optimization, the GEMM counting 3/5) are
 * compiled on one thread: splitting costs CPU time (a bitcode round trip, a second context,
 * target machine and pipelines) that small modules do not win back (figures:
 * docs/log/2026-12-01-emit-design-figures.md). A module of one kernel function is never split. */
#define CE_SPLIT_MIN 1300
/* Parts of a split module: one per CE_PART_WEIGHT of weight, rounded down to an even count, 2
 * to CE_MAX_PARTS. The count depends on the module only, so the object is the same whatever
 * the machine; each part beyond the threads that run them costs a module clone and a pipeline
 * setup; an even count keeps two CPUs finishing together (figures:
 * docs/log/2026-12-01-emit-design-figures.md). */
#define CE_PART_WEIGHT 600
#define CE_MAX_PARTS 16

/* default<O2>'s function passes as LLVM 19 builds them with hloc's options (no unrolling;
 * vectorization and interleaving on), without its module passes: a kernel is only reached
 * through the task table and calls nothing but the GEMM's functions, so interprocedural
 * constant propagation, called-value propagation, the inliner, attribute inference and global
 * optimization found nothing to do there, and cost ~10% of the pass time (ipsccp alone 9% on
 * the training step). Printed by `opt -passes='default<O2>' -print-pipeline-passes`. Against
 * default<O2>, the bench modules' kernels differed only in register choices of some
 * GEMM-calling kernels and in set-up code, and ran as fast. Also without loop-load-elim (9% of
 * the kernels' pass time on the training step, for store-to-load forwarding across iterations
 * that no bench module's kernel offered: all eight objects byte-identical without it),
 * loop-distribute (only acts on loops that ask for it by metadata) and loop-sink (only with
 * profile data). And without reassociate: regrouping a row's offset and a slice's start, it
 * drops the `disjoint` flag of the ors instcombine made of those adds, so that the vectorizer
 * (whose SCEV reads an or as an add only with that flag) took every sliced read of a wider row
 * for a gather (an LSTM's gates read from one [B, 4H] product). */
#define CE_SCFG(fwd, r2i, lut, keep, hoist, spec)                                                  \
  "simplifycfg<bonus-inst-threshold=1;" fwd "forward-switch-cond;" r2i "switch-range-to-icmp;" lut \
  "switch-to-lookup;" keep "keep-loops;" hoist "hoist-common-insts;" hoist                         \
  "sink-common-insts;speculate-blocks;simplify-cond-branch;" spec "speculate-unpredictables>"
#define CE_IC "instcombine<max-iterations=1;no-use-loop-info;no-verify-fixpoint>"
#define CE_SCFG_EARLY CE_SCFG("no-", "no-", "no-", "", "no-", "no-")
#define CE_SCFG_MID CE_SCFG("no-", "", "no-", "", "no-", "no-")
#define CE_KERNEL_O2                                                                               \
  "function<eager-inv>(lower-expect," CE_SCFG_EARLY ",sroa<modify-cfg>,early-cse<>,mem2reg," CE_IC \
  "," CE_SCFG_MID                                                                                  \
  ",sroa<modify-cfg>,early-cse<memssa>,jump-threading,correlated-propagation," CE_SCFG_MID         \
  "," CE_IC ",aggressive-instcombine," CE_SCFG_MID                                                 \
  ",constraint-elimination,loop-mssa(loop-instsimplify,"                                           \
  "loop-simplifycfg,licm<no-allowspeculation>,loop-rotate<header-duplication;no-prepare-for-lto>," \
  "licm<allowspeculation>,simple-loop-unswitch<no-nontrivial;trivial>)," CE_SCFG_MID "," CE_IC     \
  ",loop(loop-idiom,indvars,simple-loop-unswitch<no-nontrivial;trivial>,loop-deletion),sroa<"      \
  "modify-cfg>,"                                                                                   \
  "vector-combine,mldst-motion<no-split-footer-bb>,gvn<>,sccp,bdce," CE_IC                         \
  ",jump-threading,correlated-propagation,"                                                        \
  "adce,memcpyopt,dse,loop-mssa(licm<allowspeculation>)," CE_SCFG(                                 \
      "no-", "", "no-", "", "",                                                                    \
      "no-") "," CE_IC ",float2int,lower-constant-intrinsics,loop(loop-rotate<header-duplication;" \
             "no-prepare-for-lto>,loop-deletion),"                                                 \
             "inject-tli-mappings,loop-vectorize<no-interleave-forced-only;no-vectorize-forced-"   \
             "only;>,infer-alignment," CE_IC                                                       \
             "," CE_SCFG("", "", "", "no-", "",                                                    \
                         "no-") ",slp-vectorizer,vector-combine," CE_IC                            \
                                ",transform-warning,sroa<preserve-cfg>,infer-alignment," CE_IC     \
                                ",loop-mssa(licm<allowspeculation>),"                              \
                                "alignment-from-assumptions,instsimplify,div-rem-pairs,"           \
                                "tailcallelim," CE_SCFG("no-", "", "no-", "", "no-", "") ")"

/* Everything the target machine is made from (shared read-only by both threads). */
typedef struct CeSetup {
  LLVMTargetRef T;            /* target of the triple */
  const char *triple;         /* target triple */
  const char *cpu;            /* CPU name */
  const char *feat;           /* CPU features */
  int lvl;                    /* optimization level 0..3 */
  LLVMCodeGenOptLevel cgl;    /* matching codegen level */
  const char *pipeline;       /* pass pipeline of the kernels */
  const char *run_pipeline;   /* pass pipeline of the run functions (NULL: pipeline) */
  const char *gemm_pipeline;  /* pass pipeline of the GEMM function (NULL: pipeline) */
  const char *small_pipeline; /* pass pipeline of the small kernels (NULL: pipeline) */
} CeSetup;

/* Errors LLVM reports through a context's diagnostic handler rather than a return value (by
 * default it would print them and exit): the first one is kept. */
typedef struct CeDiag {
  char msg[400]; /* first error, empty when none */
} CeDiag;

/* One module to optimize and emit, on any thread. */
typedef struct CeJob {
  const CeSetup *s;       /* target and pipelines */
  LLVMContextRef C;       /* the module's context */
  LLVMModuleRef M;        /* the module */
  LLVMCodeGenFileType ft; /* object or assembly */
  int nrelink;            /* functions made external for optimization, internal again after */
  char **relink;          /* their names */
  char *out;              /* emitted bytes (malloc'd) */
  size_t outlen;          /* their length */
  char err[600];          /* first error, empty when none */
  bool err_in_cg;         /* it came from code generation (located at the output file) */
  double t_opt, t_cg;     /* seconds spent optimizing and generating code (wall) */
  double c_opt, c_cg;     /* the same in this thread's CPU time */
} CeJob;

static double ce_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static double ce_cpu(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static char *ce_strdup(const char *s, size_t n) {
  char *d = malloc(n + 1);
  HLO_ASSERT(d);
  memcpy(d, s, n);
  d[n] = 0;
  return d;
}

static char *ce_name(LLVMValueRef v) {
  size_t n = 0;
  const char *s = LLVMGetValueName2(v, &n);
  return ce_strdup(s, n);
}

static void ce_diag_handler(LLVMDiagnosticInfoRef di, void *ctx) {
  CeDiag *d = ctx;
  if (LLVMGetDiagInfoSeverity(di) != LLVMDSError || d->msg[0]) return;
  char *m = LLVMGetDiagInfoDescription(di);
  snprintf(d->msg, sizeof d->msg, "%s", m ? m : "error");
  LLVMDisposeMessage(m);
}

/* ------------------------------------------------------------------ LLVM command line */

/* LLVM's command-line options are process-wide: cpu_emit() holds this lock from setting
 * the code generation options to resetting them, so concurrent CPU compilations in one process
 * take turns. */
static pthread_mutex_t ce_cl_lock = PTHREAD_MUTEX_INITIALIZER;

static void ce_set_codegen_options(bool disable_lsr, bool disable_misched) {
  const char *argv[3] = {"hloc", disable_lsr ? "-disable-lsr=true" : "-disable-lsr=false",
                         disable_misched ? "-enable-misched=false" : "-enable-misched=true"};
  LLVMParseCommandLineOptions(3, argv, NULL);
}

/* The LLVM_ARGS knob: LLVM command line options for diagnostics (-time-passes, ...), given to
 * LLVM once per process. */
static void ce_llvm_args(const char *e) {
  static char *buf; /* kept: LLVM may keep pointers into the arguments */
  if (buf || !e || !*e) return;
  buf = ce_strdup(e, strlen(e));
  const char *argv[64] = {"hloc"};
  int argc = 1;
  for (char *t = strtok(buf, " "); t && argc < 64; t = strtok(NULL, " "))
    argv[argc++] = t;
  LLVMParseCommandLineOptions(argc, argv, NULL);
}

/* ------------------------------------------------------------------ pipelines */

/* Whether f is defined and carries string attribute attr (CPU_LIGHT_ATTR: the GEMM and its
 * packing steps; CPU_SMALL_ATTR: kernels of little work). */
static bool ce_marked(LLVMValueRef f, const char *attr) {
  return LLVMCountBasicBlocks(f) > 0 &&
         LLVMGetStringAttributeAtIndex(f, LLVMAttributeFunctionIndex, attr, (unsigned)strlen(attr));
}

static bool ce_light(LLVMValueRef f) { return ce_marked(f, CPU_LIGHT_ATTR); }

/* Which pipeline optimizes defined function f: 0 s->pipeline (kernels), 1 the GEMM's, 2 the
 * small kernels', 3 the run functions' (the interface: external with default visibility; a
 * part's kernels are external but hidden while it is optimized). */
enum { CE_NCLASS = 4 };
static int ce_class(const CeSetup *s, LLVMValueRef f) {
  if (s->gemm_pipeline && ce_light(f)) return 1;
  if (s->small_pipeline && ce_marked(f, CPU_SMALL_ATTR)) return 2;
  if (s->run_pipeline && LLVMGetLinkage(f) == LLVMExternalLinkage &&
      LLVMGetVisibility(f) == LLVMDefaultVisibility)
    return 3;
  return 0;
}

/* Optimize M with s->pipeline, the GEMM's functions (CPU_LIGHT_ATTR) with the much lighter
 * s->gemm_pipeline, and kernels of little work (CPU_SMALL_ATTR) with s->small_pipeline. The
 * GEMM's IR is vectorized, blocked and tiled by construction: default<O2> spends ~50 ms on it
 * (instcombine, indvars, GVN, LICM, loop rotation over its deep nests) for no measurable
 * speed, while cleanup and hoisting keep its code as fast (same GFLOP/s in
 * bench/cpu/gemm_bench.c). A small kernel runs for microseconds: the same cleanup without
 * vectorization is enough (cpu_compile.c's cp_mark_small). The new pass manager skips optnone
 * functions, so each pipeline runs with every function of another class optnone (optnone needs
 * noinline, added where missing; the GEMM's functions keep theirs, so no kernel inlines them);
 * the marks are removed before code generation, which would otherwise select instructions
 * without optimization. Functions are classed again after each run by their attributes:
 * interprocedural passes (dead argument elimination) may replace them. */
static LLVMErrorRef ce_run_pipelines(CeJob *j, LLVMTargetMachineRef TM,
                                     LLVMPassBuilderOptionsRef po) {
  const CeSetup *s = j->s;
  int count[CE_NCLASS] = {0};
  for (LLVMValueRef f = LLVMGetFirstFunction(j->M); f; f = LLVMGetNextFunction(f))
    if (LLVMCountBasicBlocks(f) > 0) count[ce_class(s, f)]++;
  if (count[1] + count[2] + count[3] == 0) return LLVMRunPasses(j->M, s->pipeline, TM, po);
  const char *pipes[CE_NCLASS] = {s->pipeline, s->gemm_pipeline, s->small_pipeline,
                                  s->run_pipeline};
  unsigned onk = LLVMGetEnumAttributeKindForName("optnone", 7);
  unsigned nik = LLVMGetEnumAttributeKindForName("noinline", 8);
  unsigned fi = (unsigned)LLVMAttributeFunctionIndex;
  for (LLVMValueRef f = LLVMGetFirstFunction(j->M); f; f = LLVMGetNextFunction(f))
    if (ce_class(s, f) == 1 &&
        !LLVMGetEnumAttributeAtIndex(f, fi, nik)) /* made noinline: kept so */
      LLVMAddAttributeAtIndex(f, fi, LLVMCreateEnumAttribute(j->C, nik, 0));
  LLVMErrorRef pe = NULL;
  for (int c = 0; c < CE_NCLASS && !pe; c++) {
    if (count[c] == 0) continue;
    int nf = 0;
    for (LLVMValueRef f = LLVMGetFirstFunction(j->M); f; f = LLVMGetNextFunction(f))
      nf++;
    bool *added = calloc((size_t)nf + 1, sizeof *added);
    HLO_ASSERT(added);
    int i = 0;
    for (LLVMValueRef f = LLVMGetFirstFunction(j->M); f; f = LLVMGetNextFunction(f), i++) {
      if (LLVMCountBasicBlocks(f) == 0 || ce_class(s, f) == c) continue;
      added[i] = !LLVMGetEnumAttributeAtIndex(f, fi, nik);
      if (added[i]) LLVMAddAttributeAtIndex(f, fi, LLVMCreateEnumAttribute(j->C, nik, 0));
      LLVMAddAttributeAtIndex(f, fi, LLVMCreateEnumAttribute(j->C, onk, 0));
    }
    pe = LLVMRunPasses(j->M, pipes[c], TM, po);
    i = 0;
    for (LLVMValueRef f = LLVMGetFirstFunction(j->M); f && i < nf;
         f = LLVMGetNextFunction(f), i++) {
      if (LLVMCountBasicBlocks(f) == 0 || !LLVMGetEnumAttributeAtIndex(f, fi, onk)) continue;
      LLVMRemoveEnumAttributeAtIndex(f, fi, onk);
      if (added[i]) LLVMRemoveEnumAttributeAtIndex(f, fi, nik);
    }
    free(added);
  }
  return pe;
}

static LLVMTargetMachineRef ce_target_machine(const CeSetup *s) {
  return LLVMCreateTargetMachine(s->T, s->triple, s->cpu, s->feat, s->cgl, LLVMRelocPIC,
                                 LLVMCodeModelDefault);
}

/* Optimize one module and, when emit is set, emit it (j->ft: object or assembly) into j->out.
 * Functions named in j->relink get internal linkage between the two. Any thread: everything
 * touched belongs to j (the setup is only read). */
static bool ce_run_job(CeJob *j, bool emit) {
  const CeSetup *s = j->s;
  bool ok = false;
  char *msg = NULL;
  LLVMMemoryBufferRef mb = NULL;
  CeDiag diag = {{0}};
  LLVMContextSetDiagnosticHandler(j->C, ce_diag_handler, &diag);
  LLVMTargetMachineRef TM = ce_target_machine(s);
  LLVMPassBuilderOptionsRef po = LLVMCreatePassBuilderOptions();
  if (!TM) {
    snprintf(j->err, sizeof j->err, "cannot create a target machine for '%s'", s->triple);
    goto done;
  }
  LLVMPassBuilderOptionsSetLoopVectorization(po, s->lvl >= 2);
  LLVMPassBuilderOptionsSetSLPVectorization(po, s->lvl >= 2);
  /* Full unrolling of the many small constant-trip loops of HLO shapes multiplies code size
     and compile time (4x on transformer_layer) for little gain once loops are vectorized;
     only -O3 unrolls. */
  LLVMPassBuilderOptionsSetLoopUnrolling(po, s->lvl >= 3);
  LLVMPassBuilderOptionsSetLoopInterleaving(po, s->lvl >= 2);
  double t0 = ce_now(), c0 = ce_cpu();
  LLVMErrorRef pe = ce_run_pipelines(j, TM, po);
  j->t_opt = ce_now() - t0;
  j->c_opt = ce_cpu() - c0;
  if (pe) {
    char *em = LLVMGetErrorMessage(pe);
    snprintf(j->err, sizeof j->err, "LLVM optimization failed: %s", em);
    LLVMDisposeErrorMessage(em);
    goto done;
  }
  for (int i = 0; i < j->nrelink; i++) {
    LLVMValueRef f = LLVMGetNamedFunction(j->M, j->relink[i]);
    if (!f) continue; /* cannot happen to an external function; nothing to restore */
    LLVMSetVisibility(f, LLVMDefaultVisibility);
    LLVMSetLinkage(f, LLVMInternalLinkage);
  }
  if (!emit) {
    ok = !diag.msg[0];
    goto done;
  }
  t0 = ce_now();
  c0 = ce_cpu();
  if (LLVMTargetMachineEmitToMemoryBuffer(TM, j->M, j->ft, &msg, &mb)) {
    snprintf(j->err, sizeof j->err, "LLVM code generation failed: %s", msg ? msg : "");
    j->err_in_cg = true;
    goto done;
  }
  j->t_cg = ce_now() - t0;
  j->c_cg = ce_cpu() - c0;
  j->outlen = LLVMGetBufferSize(mb);
  j->out = ce_strdup(LLVMGetBufferStart(mb), j->outlen);
  ok = true;
done:
  if (diag.msg[0] && !j->err[0]) snprintf(j->err, sizeof j->err, "LLVM: %s", diag.msg);
  if (j->err[0]) ok = false;
  LLVMContextSetDiagnosticHandler(j->C, NULL, NULL);
  if (msg) LLVMDisposeMessage(msg);
  if (mb) LLVMDisposeMemoryBuffer(mb);
  LLVMDisposePassBuilderOptions(po);
  if (TM) LLVMDisposeTargetMachine(TM);
  return ok;
}

/* ------------------------------------------------------------------ splitting */

/* Which part each kernel function goes to, by name (run functions are not listed). */
typedef struct CeSplit {
  int n;                  /* kernel functions */
  char **name;            /* their names */
  int *part;              /* their part, 0 .. nparts - 1 */
  int nparts;             /* parts (2 .. CE_MAX_PARTS) */
  int load[CE_MAX_PARTS]; /* weight of each part */
  int total;              /* weight of the module (all functions) */
  int nglob;              /* global variables referenced by kernel code */
  char **glob;            /* their names */
} CeSplit;

static int ce_part_of(const CeSplit *sp, LLVMValueRef f) {
  size_t n = 0;
  const char *nm = LLVMGetValueName2(f, &n);
  for (int i = 0; i < sp->n; i++)
    if (strlen(sp->name[i]) == n && memcmp(sp->name[i], nm, n) == 0) return sp->part[i];
  return -1;
}

static int ce_count_instrs(LLVMValueRef f) {
  int n = 0;
  for (LLVMBasicBlockRef b = LLVMGetFirstBasicBlock(f); b; b = LLVMGetNextBasicBlock(b))
    for (LLVMValueRef i = LLVMGetFirstInstruction(b); i; i = LLVMGetNextInstruction(i))
      /* optimization barriers (empty inline assembly, cpu_transpose_regs) cost nothing */
      n += !(LLVMIsACallInst(i) && LLVMIsAInlineAsm(LLVMGetCalledValue(i)));
  return n;
}

/* Turn a function definition into a declaration (what Function::deleteBody does): every
 * value of the body is replaced by poison first, so instructions can go in any order. */
static void ce_strip_body(LLVMValueRef f) {
  for (LLVMBasicBlockRef b = LLVMGetFirstBasicBlock(f); b; b = LLVMGetNextBasicBlock(b))
    for (LLVMValueRef i = LLVMGetFirstInstruction(b); i; i = LLVMGetNextInstruction(i))
      if (LLVMGetFirstUse(i)) LLVMReplaceAllUsesWith(i, LLVMGetPoison(LLVMTypeOf(i)));
  for (LLVMBasicBlockRef b = LLVMGetFirstBasicBlock(f); b; b = LLVMGetNextBasicBlock(b)) {
    LLVMValueRef i;
    while ((i = LLVMGetLastInstruction(b)))
      LLVMInstructionEraseFromParent(i);
  }
  LLVMBasicBlockRef b;
  while ((b = LLVMGetFirstBasicBlock(f)))
    LLVMDeleteBasicBlock(b);
  LLVMSetLinkage(f, LLVMExternalLinkage);
}

/* Global variables reached from value v (an operand of kernel code), through constant
 * expressions and aggregates; appended to sp->glob once each. */
static void ce_note_globals(CeSplit *sp, LLVMValueRef v, int depth) {
  if (LLVMIsAGlobalVariable(v)) {
    char *nm = ce_name(v);
    for (int i = 0; i < sp->nglob; i++)
      if (!strcmp(sp->glob[i], nm)) {
        free(nm);
        return;
      }
    sp->glob = realloc(sp->glob, sizeof *sp->glob * (size_t)(sp->nglob + 1));
    HLO_ASSERT(sp->glob);
    sp->glob[sp->nglob++] = nm;
    return;
  }
  if (depth > 16 || !LLVMIsAConstant(v) || LLVMIsAGlobalValue(v)) return;
  int n = LLVMGetNumOperands(v);
  for (int k = 0; k < n; k++)
    ce_note_globals(sp, LLVMGetOperand(v, k), depth + 1);
}

/* Global g as another part sees it: an external declaration, hidden (direct, PC-relative
 * access) only where kernel code refers to it: code generation states the visibility of
 * every declaration it keeps, and a hidden undefined symbol for a name part 0 keeps private
 * (.L..., no symbol) would stay undefined. */
static void ce_declare(const CeSplit *sp, LLVMValueRef g) {
  LLVMSetInitializer(g, NULL);
  LLVMSetLinkage(g, LLVMExternalLinkage);
  size_t nl = 0;
  const char *nm = LLVMGetValueName2(g, &nl);
  for (int i = 0; i < sp->nglob; i++)
    if (strlen(sp->glob[i]) == nl && !memcmp(sp->glob[i], nm, nl))
      LLVMSetVisibility(g, LLVMHiddenVisibility);
}

/* Cut module M down to the kernels of the parts keep[] marks: the other kernels become
 * declarations (hidden: calls between parts are direct, PC-relative); unless M is the
 * driver's own module (driver: part 0's, which keeps them), so do the run functions, and the
 * global variables become external declarations (hidden where kernel code uses them). With
 * j, the kept kernels become external hidden until optimization is over (their names go to
 * j->relink). */
static void ce_cut(LLVMModuleRef M, const CeSplit *sp, const bool *keep, CeJob *j, bool driver) {
  if (j && !j->relink) {
    j->relink = calloc((size_t)sp->n + 1, sizeof *j->relink);
    HLO_ASSERT(j->relink);
  }
  for (LLVMValueRef f = LLVMGetFirstFunction(M); f; f = LLVMGetNextFunction(f)) {
    if (LLVMCountBasicBlocks(f) == 0) continue;
    int p = ce_part_of(sp, f);
    if (p < 0 && driver) continue;
    if (p < 0 || !keep[p]) {
      ce_strip_body(f);
      if (p >= 0) LLVMSetVisibility(f, LLVMHiddenVisibility);
    } else if (j && (LLVMGetLinkage(f) == LLVMInternalLinkage ||
                     LLVMGetLinkage(f) == LLVMPrivateLinkage)) {
      j->relink[j->nrelink++] = ce_name(f);
      LLVMSetLinkage(f, LLVMExternalLinkage);
      LLVMSetVisibility(f, LLVMHiddenVisibility);
    }
  }
  for (LLVMValueRef g = driver ? NULL : LLVMGetFirstGlobal(M); g; g = LLVMGetNextGlobal(g))
    if (!LLVMIsDeclaration(g)) ce_declare(sp, g);
}

/* The parts other than 0 are compiled by nthreads threads (when there are fewer CPUs than
 * parts, the calling one among them, after part 0), each taking the next part not yet taken
 * (an atomic counter: part costs are only estimated by their weights, so a static share left
 * one thread waiting for the other ~10% of the time on 2 cores). A thread reads the module's
 * bitcode once, into a context of its own, when it takes its first part; every part it takes
 * is compiled from a clone of that module cut down to the part, and the module itself drops
 * the parts taken so far before each clone (later clones are smaller); the last part of all
 * is compiled from the module itself. Which thread compiles a part changes nothing in its
 * object. */
typedef struct CePool {
  const CeSetup *s;                /* target and pipelines */
  const CeSplit *sp;               /* the partition */
  LLVMMemoryBufferRef bc;          /* the module's bitcode */
  int nthreads;                    /* threads sharing parts 1.. */
  atomic_int next;                 /* the next part to take */
  CeJob job[CE_MAX_PARTS];         /* per part: its job (object, error, times) */
  bool ok[CE_MAX_PARTS];           /* per part: its job succeeded */
  double t_parse[CE_MAX_PARTS];    /* per part: seconds to read or clone and cut it */
  atomic_int ids;                  /* worker threads that took a part so far */
  pthread_t caller;                /* the calling thread */
  int by[CE_MAX_PARTS];            /* per part: which of them took it (0: the calling thread) */
  double t0, t_done[CE_MAX_PARTS]; /* the pool's start; per part: seconds from it to its end */
} CePool;

static void *ce_pool_thread(void *arg) {
  CePool *pl = arg;
  const CeSplit *sp = pl->sp;
  LLVMContextRef C = NULL;
  LLVMModuleRef M0 = NULL;
  int me = -1;
  for (;;) {
    int p = atomic_fetch_add(&pl->next, 1);
    if (p >= sp->nparts) break;
    if (me < 0) me = pthread_equal(pthread_self(), pl->caller) ? 0 : atomic_fetch_add(&pl->ids, 1);
    pl->by[p] = me;
    CeJob *j = &pl->job[p];
    double t0 = ce_now();
    if (!C) {
      C = LLVMContextCreate();
      if (LLVMParseBitcodeInContext2(C, pl->bc, &M0)) M0 = NULL;
    }
    if (!M0) { /* this part and every one after it that this thread takes */
      snprintf(j->err, sizeof j->err, "LLVM: cannot read back the module's bitcode");
      continue;
    }
    /* parts below p are taken: M0 keeps p and those after it */
    bool keep[CE_MAX_PARTS] = {0};
    for (int q = p; q < sp->nparts; q++)
      keep[q] = true;
    ce_cut(M0, sp, keep, NULL, false);
    bool last = p == sp->nparts - 1;
    j->s = pl->s;
    j->ft = LLVMObjectFile;
    j->C = C;
    j->M = last ? M0 : LLVMCloneModule(M0);
    if (last) M0 = NULL;
    bool only[CE_MAX_PARTS] = {0};
    only[p] = true;
    ce_cut(j->M, sp, only, j, false);
    pl->t_parse[p] = ce_now() - t0;
    pl->ok[p] = ce_run_job(j, true);
    pl->t_done[p] = ce_now() - pl->t0;
    LLVMDisposeModule(j->M);
    j->M = NULL;
  }
  if (M0) LLVMDisposeModule(M0);
  if (C) LLVMContextDispose(C);
  return NULL;
}

/* CPUs this process may run on (its affinity mask: taskset limits it; the THREADS knob
 * overrides). */
static int ce_cpus(const CpuCg *cg) {
  const char *force = cpu_knob(cg, CPU_KNOB_THREADS);
  if (force && atoi(force) > 0) return atoi(force);
#ifdef __linux__
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set) > 0 ? CPU_COUNT(&set) : 1;
#endif
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int)n : 1;
}

/* Kernel functions of M and their weights; decides the partition. false: stay serial. */
static bool ce_plan_split(const CpuCg *cg, LLVMModuleRef M, CeSplit *sp) {
  const char *force = cpu_knob(cg, CPU_KNOB_SPLIT);
  if (force && *force == '0') return false;
  int nf = 0, total = 0;
  for (LLVMValueRef f = LLVMGetFirstFunction(M); f; f = LLVMGetNextFunction(f))
    nf++;
  LLVMValueRef *fs = calloc((size_t)nf + 1, sizeof *fs);
  int *w = calloc((size_t)nf + 1, sizeof *w);
  HLO_ASSERT(fs && w);
  int n = 0, final_w = 0;
  for (LLVMValueRef f = LLVMGetFirstFunction(M); f; f = LLVMGetNextFunction(f)) {
    if (LLVMCountBasicBlocks(f) == 0) continue;
    int c = ce_count_instrs(f);
    /* the GEMM's light pipeline makes its instructions cheaper than a kernel's */
    if (ce_light(f)) c = c * 3 / 5;
    total += c;
    /* the run functions (the only defined functions not internal: the interface) stay in part 0 */
    if (LLVMGetLinkage(f) != LLVMInternalLinkage) {
      final_w += c;
      continue;
    }
    fs[n] = f;
    w[n++] = c;
  }
  bool go = n >= 2 && (force && *force == '1' ? true : total >= CE_SPLIT_MIN);
  if (go) {
    /* the number of parts depends on the module only (the object is the same on any
       machine); how many run at once depends on the CPUs */
    int k = total / CE_PART_WEIGHT / 2 * 2; /* even: two CPUs finish together */
    const char *want = cpu_knob(cg, CPU_KNOB_PARTS);
    if (want && atoi(want) > 0) k = atoi(want);
    k = k < 2 ? 2 : k > CE_MAX_PARTS ? CE_MAX_PARTS : k;
    if (k > n) k = n;
    sp->nparts = k;
    sp->n = n;
    sp->total = total;
    sp->name = calloc((size_t)n, sizeof *sp->name);
    sp->part = calloc((size_t)n, sizeof *sp->part);
    bool *done = calloc((size_t)n, sizeof *done);
    HLO_ASSERT(sp->name && sp->part && done);
    /* part 0 (the calling thread) also optimizes the run functions and joins the parts'
       objects: it starts with that share; then largest function first, to the lightest */
    for (int p = 0; p < k; p++)
      sp->load[p] = 0;
    sp->load[0] = final_w + total / 20;
    for (int r = 0; r < n; r++) {
      int best = -1;
      for (int i = 0; i < n; i++)
        if (!done[i] && (best < 0 || w[i] > w[best])) best = i;
      done[best] = true;
      int p = 0;
      for (int q = 1; q < k; q++)
        if (sp->load[q] < sp->load[p]) p = q;
      sp->part[best] = p;
      sp->load[p] += w[best];
    }
    for (int i = 0; i < n; i++) {
      sp->name[i] = ce_name(fs[i]);
      for (LLVMBasicBlockRef b = LLVMGetFirstBasicBlock(fs[i]); b; b = LLVMGetNextBasicBlock(b))
        for (LLVMValueRef in = LLVMGetFirstInstruction(b); in; in = LLVMGetNextInstruction(in)) {
          int no = LLVMGetNumOperands(in);
          for (int q = 0; q < no; q++)
            ce_note_globals(sp, LLVMGetOperand(in, q), 0);
        }
    }
    free(done);
  }
  free(fs);
  free(w);
  return go;
}

static void ce_free_split(CeSplit *sp) {
  for (int i = 0; i < sp->n; i++)
    free(sp->name[i]);
  for (int i = 0; i < sp->nglob; i++)
    free(sp->glob[i]);
  free(sp->name);
  free(sp->part);
  free(sp->glob);
}

static void ce_free_job(CeJob *j) {
  for (int i = 0; i < j->nrelink; i++)
    free(j->relink[i]);
  free(j->relink);
  free(j->out);
}

/* Constants that every call of a GEMM function (CPU_LIGHT_ATTR, internal, only called
 * directly) passes for a parameter replace it in the body: what interprocedural sparse
 * conditional constant propagation (ipsccp, default<On>'s first pass) did here, without
 * solving every kernel of the module (11 ms of the serial start on resnet18, 2-core Xeon VM).
 * Rounds until nothing changes: a packing step is called by the GEMM with the GEMM's
 * parameters. The objects of the bench modules are the same but for a few instructions of
 * bert_base's GEMM set-up (ipsccp also knew K > 0: a shift where a signed division by a
 * power of two is now). */
static void ce_specialize(LLVMModuleRef M) {
  for (int round = 0; round < 4; round++) {
    bool changed = false;
    for (LLVMValueRef f = LLVMGetFirstFunction(M); f; f = LLVMGetNextFunction(f)) {
      if (!ce_light(f) || LLVMGetLinkage(f) != LLVMInternalLinkage) continue;
      unsigned np = LLVMCountParams(f);
      for (unsigned i = 0; i < np; i++) {
        LLVMValueRef prm = LLVMGetParam(f, i), common = NULL;
        if (!LLVMGetFirstUse(prm)) continue;
        bool ok = true;
        for (LLVMUseRef u = LLVMGetFirstUse(f); u && ok; u = LLVMGetNextUse(u)) {
          LLVMValueRef call = LLVMGetUser(u);
          if (!LLVMIsACallInst(call) || LLVMGetCalledValue(call) != f) { /* its address taken */
            ok = false;
            break;
          }
          LLVMValueRef a = LLVMGetOperand(call, i);
          if (!LLVMIsAConstant(a) || (common && a != common)) ok = false;
          common = a;
        }
        if (ok && common) {
          LLVMReplaceAllUsesWith(prm, common);
          changed = true;
        }
      }
    }
    if (!changed) break;
  }
}

/* The outcome of a join into *obj (malloc'd, *n bytes): the joined object replaces it, or the
 * failure (message jm; a failed join outputs nothing) is reported, *obj left as it was. */
static bool ce_joined(CpuCg *cg, bool ok, char *joined, size_t jn, const char *jm, const char *what,
                      char **obj, size_t *n) {
  if (!ok) {
    hlo_err(cg->g.err, cg->o->out_path, NULL, NULL, "CPU target: joining %s failed: %s", what, jm);
    return false;
  }
  free(*obj);
  *obj = joined;
  *n = jn;
  return true;
}

/* *obj (malloc'd, *n bytes) followed by what every object of the compilation gets after its
 * code: the prebuilt library's object (cg->prebuilt; the kernels' calls to the GEMM's
 * functions resolve to its local definitions), then the block of large constants (cg->raw_sym,
 * cpu_rodata: their bytes copied once, none through LLVM). */
static bool ce_join_tail(CpuCg *cg, char **obj, size_t *n) {
  for (int step = 0; step < 2; step++) {
    if (step == 0 ? !cg->prebuilt : !cg->nraw) continue;
    char jm[300], *joined = NULL;
    size_t jn = 0;
    bool ok = step == 0
                  ? cpu_elf_join(*obj, *n, cg->prebuilt->obj, cg->prebuilt->size, &joined, &jn, jm,
                                 sizeof jm)
                  : cpu_elf_join_data(*obj, *n, cg->raw_sym, cg->nraw, &joined, &jn, jm, sizeof jm);
    if (!ce_joined(cg, ok, joined, jn, jm,
                   step == 0 ? "the prebuilt library" : "the constants' data", obj, n))
      return false;
  }
  return true;
}

/* The split path (see the top of the file). */
static bool ce_emit_split(CpuCg *cg, const CeSetup *s, CeSplit *sp, char **out, size_t *outlen) {
  HErr *err = cg->g.err;
  bool timing = cpu_knob(cg, CPU_KNOB_TIME) != NULL;
  bool ok = false;
  double t0 = ce_now();
  /* The GEMM's functions specialized on the arguments that are the same constant at every
     call site (which epilogue, which operand layout): that halves their code. In the parts
     they are external, which would forbid it, so it is done on the whole module first
     (ce_specialize), then dead argument elimination and global dead code elimination (a
     packing step no call reaches). The passes may replace the GEMM function (same name). */
  ce_specialize(cg->g.M);
  {
    LLVMTargetMachineRef TM = ce_target_machine(s);
    LLVMPassBuilderOptionsRef po = LLVMCreatePassBuilderOptions();
    LLVMErrorRef pe = TM ? LLVMRunPasses(cg->g.M, "deadargelim,globaldce", TM, po) : NULL;
    LLVMDisposePassBuilderOptions(po);
    if (TM) LLVMDisposeTargetMachine(TM);
    if (pe) {
      char *em = LLVMGetErrorMessage(pe);
      hlo_err(err, cg->g.m->file, NULL, NULL, "CPU target: LLVM optimization failed: %s", em);
      LLVMDisposeErrorMessage(em);
      return false;
    }
  }
  double t_ipo = ce_now() - t0;
  t0 = ce_now();
  CePool *pl = calloc(1, sizeof *pl);
  HLO_ASSERT(pl);
  pl->s = s;
  pl->sp = sp;
  /* Large constants (a model's literals, frozen weights) are not in the module: they are
     declarations there, their bytes joined to the object at the end (cpu_rodata,
     ce_join_tail); writing megabytes of initializers to the bitcode and reading them back in
     every thread cost more than compiling the kernels (transformer_layer with frozen weights,
     28 MB: 0.6 s to write, 0.5 s per part to read, on the 2-core EPYC). */
  pl->bc = LLVMWriteBitcodeToMemoryBuffer(cg->g.M);
  double t_bc = ce_now() - t0;
  /* threads: a thread of its own for every other part when there are CPUs for all;
     otherwise one per CPU, this thread sharing the other parts after part 0 */
  int cpus = ce_cpus(cg);
  bool shares = cpus < sp->nparts;
  pl->nthreads = shares ? cpus : sp->nparts - 1;
  atomic_init(&pl->next, 1);
  atomic_init(&pl->ids, 1);
  pl->t0 = ce_now();
  pl->caller = pthread_self();
  int nworkers = shares ? pl->nthreads - 1 : pl->nthreads;
  pthread_t th[CE_MAX_PARTS + 1];
  bool started[CE_MAX_PARTS + 1] = {0};
  pthread_attr_t at;
  pthread_attr_init(&at);
  pthread_attr_setstacksize(&at, (size_t)16 << 20); /* LLVM recurses deeply on big functions */
  for (int t = 1; t <= nworkers; t++)
    started[t] = pthread_create(&th[t], &at, ce_pool_thread, pl) == 0;
  pthread_attr_destroy(&at);
  /* this thread: the driver's module keeps part 0, the run functions and the globals */
  double t1 = ce_now();
  CeJob *j0 = &pl->job[0];
  j0->s = s;
  j0->C = cg->g.C;
  j0->M = cg->g.M;
  j0->ft = LLVMObjectFile;
  bool part0[CE_MAX_PARTS] = {true};
  ce_cut(cg->g.M, sp, part0, j0, true);
  /* globals the other parts' code refers to: named local symbols (a .L label is not in the
     symbol table), kept although nothing in this module may use them */
  if (sp->nglob > 0) {
    LLVMValueRef *used = calloc((size_t)sp->nglob, sizeof *used);
    HLO_ASSERT(used);
    int nu = 0;
    for (int i = 0; i < sp->nglob; i++) {
      LLVMValueRef g = LLVMGetNamedGlobal(cg->g.M, sp->glob[i]);
      if (!g || LLVMIsDeclaration(g)) continue; /* a large constant's: joined at the end */
      if (LLVMGetLinkage(g) == LLVMPrivateLinkage) LLVMSetLinkage(g, LLVMInternalLinkage);
      used[nu++] = g;
    }
    if (nu > 0) {
      LLVMValueRef arr = LLVMConstArray2(cg->g.ptr, used, (uint64_t)nu);
      LLVMValueRef u = LLVMAddGlobal(cg->g.M, LLVMTypeOf(arr), "llvm.compiler.used");
      LLVMSetInitializer(u, arr);
      LLVMSetLinkage(u, LLVMAppendingLinkage);
      LLVMSetSection(u, "llvm.metadata");
    }
    free(used);
  }
  pl->t_parse[0] = ce_now() - t1;
  pl->ok[0] = ce_run_job(j0, true);
  pl->t_done[0] = ce_now() - pl->t0;
  j0->M = NULL; /* the driver's module: not ours to dispose */
  /* then parts with the workers (any left when every part has a thread of its own; all of
     them when no worker started) */
  ce_pool_thread(pl);
  t1 = ce_now();
  for (int t = 1; t <= nworkers; t++)
    if (started[t]) pthread_join(th[t], NULL);
  double t_wait = ce_now() - t1;
  LLVMDisposeMemoryBuffer(pl->bc);
  int bad = -1;
  for (int p = 0; p < sp->nparts && bad < 0; p++)
    if (!pl->ok[p]) bad = p;
  double t_join = 0;
  if (bad >= 0) {
    const CeJob *bj = &pl->job[bad];
    hlo_err(err, bj->err_in_cg ? cg->o->out_path : cg->g.m->file, NULL, NULL, "CPU target: %s",
            bj->err[0] ? bj->err : "a part was not compiled");
    goto done;
  }
  /* the parts' objects joined in part order: the object depends on the module only */
  t1 = ce_now();
  char *acc = pl->job[0].out;
  size_t accn = pl->job[0].outlen;
  pl->job[0].out = NULL;
  for (int p = 1; p < sp->nparts; p++) {
    char jm[300], *joined = NULL;
    size_t jn = 0;
    bool jok =
        cpu_elf_join(acc, accn, pl->job[p].out, pl->job[p].outlen, &joined, &jn, jm, sizeof jm);
    if (!ce_joined(cg, jok, joined, jn, jm, "the parts' objects", &acc, &accn)) {
      free(acc);
      goto done;
    }
  }
  if (!ce_join_tail(cg, &acc, &accn)) {
    free(acc);
    goto done;
  }
  *out = acc;
  *outlen = accn;
  t_join = ce_now() - t1;
  ok = true;
  if (timing) {
    fprintf(stderr,
            "hloc cpu: split %d kernel functions into %d parts (weight %d; %d threads), "
            "specialization %.3f s, bitcode %.3f s\n",
            sp->n, sp->nparts, sp->total, pl->nthreads, t_ipo, t_bc);
    for (int p = 0; p < sp->nparts; p++) {
      const CeJob *j = &pl->job[p];
      fprintf(stderr,
              "hloc cpu: part %d (weight %d%s, thread %d, done at %.3f s) %s %.3f s, passes %.3f s "
              "(cpu %.3f), code generation %.3f s (cpu %.3f)\n",
              p, sp->load[p], p ? "" : ", with the run functions", pl->by[p], pl->t_done[p],
              p ? "read or clone, cut" : "cut", pl->t_parse[p], j->t_opt, j->c_opt, j->t_cg,
              j->c_cg);
    }
    fprintf(stderr, "hloc cpu: wait for the threads %.3f s, join %.3f s\n", t_wait, t_join);
  }
done:
  for (int p = 0; p < sp->nparts; p++)
    ce_free_job(&pl->job[p]);
  free(pl);
  return ok;
}

/* HLOC_CPU_FNTIME: each function compiled alone (the module cloned, every other body
 * stripped), its pipeline and code generation CPU seconds and object bytes printed; the
 * instruction a kernel computes is named. For finding where compile time goes; the real
 * compilation follows unchanged. */
static void ce_time_functions(CpuCg *cg, const CeSetup *s) {
  for (LLVMValueRef f = LLVMGetFirstFunction(cg->g.M); f; f = LLVMGetNextFunction(f)) {
    if (LLVMCountBasicBlocks(f) == 0) continue;
    char *fname = ce_name(f);
    const char *what = "";
    for (int t = 0; t < cg->ntasks; t++)
      if (cg->tasks[t].fn == f && cg->tasks[t].root) what = cg->tasks[t].root->name;
    LLVMModuleRef M = LLVMCloneModule(cg->g.M);
    for (LLVMValueRef g = LLVMGetFirstFunction(M); g; g = LLVMGetNextFunction(g)) {
      size_t n = 0;
      const char *gn = LLVMGetValueName2(g, &n);
      bool me = strlen(fname) == n && !memcmp(fname, gn, n);
      if (LLVMCountBasicBlocks(g) > 0 && !me) ce_strip_body(g);
      if (me) LLVMSetLinkage(g, LLVMExternalLinkage);
    }
    CeJob j = {0};
    j.s = s;
    j.C = cg->g.C;
    j.M = M;
    j.ft = LLVMObjectFile;
    bool ok = ce_run_job(&j, true);
    fprintf(stderr,
            "hloc cpu: function %s (%s): passes %.4f s, code generation %.4f s, %zu bytes%s\n",
            fname, what, j.c_opt, j.c_cg, j.outlen, ok ? "" : " (failed)");
    ce_free_job(&j);
    LLVMDisposeModule(M);
    free(fname);
  }
}

/* ------------------------------------------------------------------ entry */

bool cpu_emit(CpuCg *cg, char **out, size_t *outlen) {
  const CpuOpts *o = cg->o;
  HErr *err = cg->g.err;
  LLVMInitializeAllTargetInfos();
  LLVMInitializeAllTargets();
  LLVMInitializeAllTargetMCs();
  LLVMInitializeAllAsmPrinters();
  LLVMInitializeAllAsmParsers(); /* inline assembly (the AMX request's system call, gemm/amx.c) */
  const char *triple = cg->triple;
  CeSetup s = {0};
  s.triple = triple;
  s.cpu = cg->tcpu;
  s.feat = cg->tfeat;
  s.lvl = o->opt_level < 0 ? 0 : o->opt_level > 3 ? 3 : o->opt_level;
  s.cgl = s.lvl == 0   ? LLVMCodeGenLevelNone
          : s.lvl == 1 ? LLVMCodeGenLevelLess
          : s.lvl == 2 ? LLVMCodeGenLevelDefault
                       : LLVMCodeGenLevelAggressive;
  bool ok = false, locked = false;
  char *msg = NULL;
  CeSplit sp = {0};
  LLVMTargetMachineRef TM = NULL;
  if (LLVMGetTargetFromTriple(triple, &s.T, &msg)) {
    hlo_err(err, o->out_path, NULL, NULL, "CPU target: unknown target triple '%s': %s", triple,
            msg ? msg : "");
    goto done;
  }
  TM = ce_target_machine(&s);
  if (!TM) {
    hlo_err(err, o->out_path, NULL, NULL, "CPU target: cannot create a target machine for '%s'",
            triple);
    goto done;
  }
  LLVMSetTarget(cg->g.M, triple);
  LLVMTargetDataRef td = LLVMCreateTargetDataLayout(TM);
  LLVMSetModuleDataLayout(cg->g.M, td);
  LLVMDisposeTargetData(td);
  /* every function carries the CPU and features, so IR output states what it was tuned for (a
     function given features of its own, the machine's and more, keeps them: gemm/pairs.c) */
  for (LLVMValueRef f = LLVMGetFirstFunction(cg->g.M); f; f = LLVMGetNextFunction(f)) {
    if (LLVMCountBasicBlocks(f) == 0) continue;
    LLVMAddTargetDependentFunctionAttr(f, "target-cpu", s.cpu);
    bool own = LLVMGetStringAttributeAtIndex(f, LLVMAttributeFunctionIndex, "target-features", 15);
    if (*s.feat && !own) LLVMAddTargetDependentFunctionAttr(f, "target-features", s.feat);
    unsigned kind = LLVMGetEnumAttributeKindForName("nounwind", 8);
    LLVMAddAttributeAtIndex(f, LLVMAttributeFunctionIndex,
                            LLVMCreateEnumAttribute(cg->g.C, kind, 0));
  }
  if (LLVMVerifyModule(cg->g.M, LLVMReturnStatusAction, &msg)) {
    hlo_err(err, cg->g.m->file, NULL, NULL, "CPU target: internal error, invalid LLVM IR: %.400s",
            msg ? msg : "");
    goto done;
  }
  if (msg) LLVMDisposeMessage(msg), msg = NULL;
  char pipeline[32];
  snprintf(pipeline, sizeof pipeline, "default<O%d>", s.lvl);
  /* at -O2 the kernels get default<O2>'s function passes without its interprocedural ones
     (CE_KERNEL_O2), the run functions default<O2> */
  s.pipeline = s.lvl == 2 ? CE_KERNEL_O2 : pipeline;
  s.run_pipeline = s.lvl == 2 ? "default<O2>" : NULL;
  /* the GEMM's own pipeline: scalar replacement, cleanup, loop-invariant hoisting */
  s.gemm_pipeline =
      s.lvl >= 1
          ? "function(sroa,early-cse,instcombine<no-verify-fixpoint>,simplifycfg,loop-mssa(licm),"
            "instcombine<no-verify-fixpoint>,simplifycfg)"
          : NULL;
  /* small kernels (-O2 and up): that cleanup, scalar */
  s.small_pipeline = s.lvl >= 2 ? s.gemm_pipeline : NULL;
  pthread_mutex_lock(&ce_cl_lock);
  locked = true;
  ce_set_codegen_options(true, true);
  ce_llvm_args(cpu_knob(cg, CPU_KNOB_LLVM_ARGS));
  if (cpu_knob(cg, CPU_KNOB_FNTIME)) ce_time_functions(cg, &s);
  bool timing = cpu_knob(cg, CPU_KNOB_TIME) != NULL;
  if (!cg->lib && o->emit == CPU_EMIT_OBJ && s.lvl >= 1 && cpu_elf64le(triple) &&
      ce_plan_split(cg, cg->g.M, &sp)) {
    ok = ce_emit_split(cg, &s, &sp, out, outlen);
    goto done;
  }
  if (s.lvl >= 1)
    ce_specialize(cg->g.M); /* as the split path does (the library's functions have no calls) */
  CeJob j = {0};
  j.s = &s;
  j.C = cg->g.C;
  j.M = cg->g.M;
  j.ft = o->emit == CPU_EMIT_ASM ? LLVMAssemblyFile : LLVMObjectFile;
  if (!ce_run_job(&j, o->emit != CPU_EMIT_LLVM)) {
    hlo_err(err, j.err_in_cg ? o->out_path : cg->g.m->file, NULL, NULL, "CPU target: %s", j.err);
    ce_free_job(&j);
    goto done;
  }
  if (o->emit == CPU_EMIT_LLVM) {
    char *t = LLVMPrintModuleToString(cg->g.M);
    *outlen = strlen(t);
    *out = ce_strdup(t, *outlen);
    LLVMDisposeMessage(t);
  } else {
    if (!ce_join_tail(cg, &j.out, &j.outlen)) { /* nothing to join but into an object */
      ce_free_job(&j);
      goto done;
    }
    *out = j.out;
    *outlen = j.outlen;
    j.out = NULL;
  }
  if (timing)
    fprintf(
        stderr,
        "hloc cpu: LLVM passes %.3f s (cpu %.3f), code generation %.3f s (cpu %.3f), one thread\n",
        j.t_opt, j.c_opt, j.t_cg, j.c_cg);
  ce_free_job(&j);
  ok = true;
done:
  if (locked) {
    ce_set_codegen_options(false, false);
    pthread_mutex_unlock(&ce_cl_lock);
  }
  ce_free_split(&sp);
  if (msg) LLVMDisposeMessage(msg);
  if (TM) LLVMDisposeTargetMachine(TM);
  return ok;
}
