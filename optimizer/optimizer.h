/* optimizer/optimizer.h: the pass runner and the optimizer passes over the HLO IR.
 *
 * Sections follow the files: pipeline.c (the runner, dumps, timing), then one section per
 * pass file. Every pass has the signature `bool opt_NAME(HModule *m, PassCtx *pc)`: it returns
 * whether it changed the module and reports input problems through pc->err. */
#ifndef HLOC_OPTIMIZER_H
#define HLOC_OPTIMIZER_H

#include "hlo.h"

/* ------------------------------------------------------------------ pipeline.c */

#define OPT_MAX_DISABLED 32

/* The form conv-layout gives every convolution (the target's choice: cuDNN's f32 algorithms
 * are fastest on NCHW, the CPU's implicit GEMM and tensor-core kernels want NHWC). */
typedef enum OptConvLayout {
  OPT_CONV_NHWC, /* b01f_01io->b01f (the default) */
  OPT_CONV_NCHW, /* bf01_oi01->bf01 */
} OptConvLayout;

typedef struct OptOpts {
  const char *dump_dir;                   /* write dumps here (NULL: no dumps) */
  bool time_passes;                       /* print per-pass wall time to stderr at the end */
  bool verify_each;                       /* run hlo_verify after every changing pass */
  int ndisabled;                          /* passes not to run */
  const char *disabled[OPT_MAX_DISABLED]; /* their names */
  const char *stop_after;                 /* stop the pipeline after the first run of this pass */
  OptConvLayout conv_layout;              /* canonical convolution form of the layout passes */
  bool conv_epilogue_to_reduce;           /* fusion: a convolution epilogue read only by reductions,
                                              or made of cheap ops only, goes into its readers' fusions
                                              (targets whose convolutions write raw) */
  bool depthwise_nhwc;        /* conv-layout: depthwise convolutions (opt_conv_depthwise) in
                                 NHWC whatever conv_layout says (a target that generates them:
                                 reads along the channels coalesce) */
  bool conv_operands_staged;  /* fusion: no large arithmetic in convolution operands (targets
                                 that copy computed operands before the library call) */
  bool dot_operands_staged;   /* fusion: a prologue read by several products is not duplicated
                                 into their operands (targets that copy computed dot operands
                                 before the library call: it is written once, read in place) */
  bool entry_layout_module;   /* layout-normalize: keep the entry layouts the module declares
                                 at the interface (--entry-layout=module; default row-major) */
  bool row_chains;            /* fusion: reductions chained over the same rows (softmax) in one
                                fusion (targets with a row kernel for them) */
  int64_t attention_rows;     /* attention: query rows per batch item up to which the target's
                                 fused attention kernel applies (0: no attention fusions) */
  int64_t attention_rows_f32; /* the same for f32/f64 operands (0: attention_rows) */
  int64_t attention_head;     /* attention: the largest head dim that kernel takes */
  int64_t attention_head_16;  /* attention: a target's kernel for 16-bit operands (tensor
                                 cores) takes queries, keys and values of one 16-bit type with
                                 head dims multiples of 16 up to this (opt_attention_16bit), */
  int64_t attention_rows_16;  /* any query rows up to this (0: no such kernel) */
  DotAlg dot_algorithm;       /* dot-algorithm: the algorithm of f32 dots that name none
                                 (--dot-algorithm; DALG_UNSET: exact f32) */
  int64_t attention_min_rows; /* attention: fewer query rows per batch item than this stay
                                 unfused (the target's other kernels are faster there) */
  bool unroll_fusible_loops;  /* while-unroll: a counted loop whose body is elementwise and data
                                 movement only is unrolled whatever its work (its trips then fuse
                                 into few kernels: targets whose per-trip launches cost more) */
  /* called after every pass that changed the module (after its verification and dump), with
     the pass's name; false stops the pipeline there (hloc verify's pass bisection) */
  bool (*after_pass)(void *ctx, const char *pass, HModule *m);
  void *after_ctx;
} OptOpts;

typedef struct PassCtx {
  const OptOpts *opts; /* options of this run */
  HArena *scratch;     /* scratch memory, freed after each pass */
  HErr *err;           /* where passes report errors */
  FILE *log;           /* decision log for passes that explain themselves (or NULL) */
} PassCtx;

typedef bool (*PassFn)(HModule *m, PassCtx *pc);

typedef struct OptPass {
  const char *name;    /* pass name (passes.def) */
  PassFn fn;           /* entry point */
  const char *summary; /* one line for --help and docs */
} OptPass;

const OptPass *opt_find_pass(const char *name);
int opt_pass_count(void);
const OptPass *opt_pass_at(int i);

/* Run the optimization pipeline on m. false with err set on failure. */
bool opt_optimize(HModule *m, const OptOpts *o, HErr *err);

/* ------------------------------------------------------------------ util.c */

/* Restore dependency order (operands and control predecessors first), keeping the current
 * order where it is valid. Renumbers c. */
void opt_comp_toposort(HComp *c, HArena *scratch);
/* Order m->comps so that callees come before callers (after passes add computations). */
void opt_module_sort_comps(HModule *m, HArena *scratch);

/* A local rewrite rule for opt_rewrite_comp: the replacement for in (an instruction already in
 * c, or new ones appended to c) or NULL (or in itself) to keep it. in's operands and control
 * predecessors are final when it is called; ctx is opt_rewrite_comp's. */
typedef HInstr *(*OptRewriteFn)(HComp *c, HInstr *in, PassCtx *pc, void *ctx);
/* One forward sweep of fn over the instructions c holds at the call (the ones fn appends are
 * not visited): each has its operands and control predecessors redirected to their
 * replacements (kept in aux, followed through chains), then fn gives its own replacement. At
 * the end the root follows the replacements, every aux is cleared and c is put back into
 * dependency order if anything was replaced or appended. Replaced instructions stay, unused,
 * for DCE. Returns whether anything was replaced. */
bool opt_rewrite_comp(HComp *c, PassCtx *pc, OptRewriteFn fn, void *ctx);
/* New instruction appended to c with a fresh name "base.N". */
HInstr *opt_new(HComp *c, HOp op, const char *base, const Shape *s, int nops, HInstr *const *ops);
/* Parameter number num of fusion body c ("param_NUM"), shaped s. */
HInstr *opt_new_param(HComp *c, const Shape *s, int num);
/* A scalar constant of type dt holding v (converted as hlo_store_f64 does). */
HInstr *opt_const_scalar(HComp *c, DType dt, double v);
/* broadcast(scalar) to the dims of s (scalar itself when s is a scalar shape). */
HInstr *opt_broadcast_scalar(HComp *c, HInstr *scalar, const Shape *s);
/* in is a constant whose elements are all equal, possibly seen through broadcast, reshape,
 * transpose and copy; *v receives the value (complex ones only when real: imaginary 0). */
bool opt_uniform_value(const HInstr *in, double *v);
/* opt_uniform_value and the value equals want (integers compared exactly). */
bool opt_uniform_is(const HInstr *in, double want);
/* A depthwise convolution: feature groups with one input channel each (kernel input feature
 * extent 1), no batch groups. */
bool opt_conv_depthwise(const HInstr *in);
/* A reshape (or bitcast) that moves no data: row-major on both sides. */
bool opt_is_bitcast_reshape(const HInstr *in);
/* Whether in can be a member of a loop fusion (generated elementwise at any index): elementwise
 * ops but map, data movement, iota, gather, reduce-window, scalar constants. */
bool opt_loop_fusible(const HInstr *in);
/* b broadcasts reduce r's result back to r's operand dims (the kept dims in order): a row's
 * value read at every element of the row. */
bool opt_is_row_broadcast(const HInstr *b, const HInstr *r);
/* Whether v is one of the entries of l (dimension numbers). */
bool opt_ilist_has(const IList *l, int64_t v);
/* Whether computation c (and every computation it calls) may be evaluated when its result is
 * not needed, or more times than written: no instruction with side effects or device
 * semantics (OPF_SIDE), no custom-call, rng or while loop (which need not terminate).
 * Renumbers the module's computations. */
bool opt_comp_speculable(const HComp *c, HArena *scratch);

/* ------------------------------------------------------------------ fold_batchnorm.c */

/* Turn entry parameter `param` into a constant holding value (deep-copied into the module):
 * later parameters are renumbered, the entry layout and input/output aliases follow. false
 * with an error when the index is out of range or the value's shape does not match. */
bool opt_freeze(HModule *m, int64_t param, const Literal *value, HErr *err);
/* The driver's --freeze options: each spec is "ARG=FILE.npy", ARG an entry parameter number
 * (as the module was read) or the name or op_name of an entry parameter. All specs are
 * resolved and their files read first, then the parameters are frozen highest number first.
 * false with a located error for a malformed spec, an unknown name, a parameter given twice,
 * an unreadable file or a value opt_freeze refuses. */
bool opt_freeze_specs(HModule *m, int n, const char *const *specs, HErr *err);

/* ------------------------------------------------------------------ graphviz.c */

/* Write computation c as a Graphviz digraph: fusions are boxes labelled with their kind and
 * the ops inside, edges carry the shapes that flow along them. */
void opt_write_dot(FILE *f, const HComp *c);

/* ------------------------------------------------------------------ stats.c */

typedef struct OptStats {
  int kernels;      /* fusions plus unfused ops that do work (what a backend launches) */
  int fusions;      /* fusion instructions */
  int by_kind[5];   /* fusions per FusionKind (FK_LOOP, FK_INPUT, FK_OUTPUT, ...) */
  int multi_output; /* fusions with a tuple root */
  int unfused;      /* unfused kernels (dot, convolution, reduce-window, gather, ...) */
  int unfused_dots; /* of which dot and convolution */
  int instrs;       /* instructions in the computations counted */
} OptStats;

/* Count the kernels of the entry computation and of the control-flow bodies it calls.
 * Parameters, constants, tuples, get-tuple-elements, bitcasts and bitcast-like reshapes are
 * free; a fusion counts once. */
void opt_stats(const HModule *m, OptStats *s);
/* One-line summary, e.g. "kernels 16: fusions 12 (kLoop 3, kInput 6, kOutput 3), ...". */
void opt_stats_print(FILE *f, const OptStats *s);

/* ------------------------------------------------------------------ attention.c */

#define OPT_ATT_MAX_CHAIN 16 /* elementwise ops between the scores' product and the softmax */

/* Attention as opt_attention_match finds it: out = dot(softmax_k(E), V) with E elementwise ops
 * of S = dot(Q, K). Dims are numbered by S (the scores' product): each of S's dims is a batch
 * dim, a key dim (the softmax's reduced dims: the key operand's free dims) or a query dim (the
 * query operand's free dims). The maps give, for every dim of an operand or of the result, the
 * S dim it runs along, -1 for the one head dim (contracted in S, free in V and the result). */
typedef struct OptAttn {
  const HInstr *sdot;  /* the scores' product */
  int qop;             /* its operand holding the queries (1 - qop: the keys) */
  const HInstr *score; /* what the softmax runs over: sdot or an elementwise op of it */
  int nchain;          /* elementwise ops between sdot and score (score included) */
  const HInstr *chain[OPT_ATT_MAX_CHAIN];
  const HInstr *rmax, *rsum, *div; /* the softmax's max, sum and division */
  int nmid;                        /* converts and transposes between div and odot */
  const HInstr *mid[4];
  const HInstr *odot;        /* the output product */
  int vop;                   /* its operand holding the values (1 - vop: the probabilities) */
  bool sbatch[HLO_MAX_RANK]; /* S dims that are batch dims */
  bool skey[HLO_MAX_RANK];   /* S dims that are key dims */
  int8_t qmap[HLO_MAX_RANK]; /* queries' dims -> S dims */
  int8_t kmap[HLO_MAX_RANK]; /* keys' dims -> S dims */
  int8_t vmap[HLO_MAX_RANK]; /* values' dims -> S dims */
  int8_t omap[HLO_MAX_RANK]; /* result dims (of out) -> S dims */
  const HInstr *out;         /* the result: odot, or a transpose of it (the fusion's root) */
  int64_t nbatch, nq, nk;    /* batch items, query rows and keys per batch item */
  int64_t dh, dv;            /* head dims of the scores' and the output product */
  /* S's batch, query and key dims in order (a batch item, a query row and a key number are
     the linear indices over them), with their extents */
  int nbd, nqd, nkd;
  int bdim[HLO_MAX_RANK], qdim[HLO_MAX_RANK], kdim[HLO_MAX_RANK];
  int64_t bext[HLO_MAX_RANK], qext[HLO_MAX_RANK], kext[HLO_MAX_RANK];
} OptAttn;
/* Whether out is the output product of an attention, or a transpose of one; *why says what did
 * not match (a->div is set when the softmax did). Works on any computation (the entry, or a
 * fusion's body). */
bool opt_attention_match(const HInstr *out, OptAttn *a, const char **why);
/* Whether a match has a 16-bit kernel's form: queries, keys and values all bf16 or all f16, head
 * dims multiples of 16 up to maxhead. */
bool opt_attention_16bit(const OptAttn *a, int64_t maxhead);

/* ------------------------------------------------------------------ while_unroll.c */

/* The trip count of while instruction w when it is a counted loop (an induction value from a
 * constant, a constant step, a constant bound or one the body passes through) of at most cap
 * trips, else -1. */
int64_t opt_while_trips(const HInstr *w, int64_t cap);

/* ------------------------------------------------------------------ bisect.c */

/* hloc verify's pass bisection: the module's values on the interpreter before optimization and
 * after every pass that changes it, on the same arguments; the first pass whose results leave
 * the tolerance. */
#define OPT_BISECT_STEPS 256 /* checked passes recorded */
typedef struct OptBisect {
  double rtol, atol; /* an element agrees when |got - want| <= atol + rtol |want| */
  double tol16;      /* bf16/f16 results: atol at least tol16 x the result's largest |want| */
  FILE *report;      /* a line per checked pass (NULL: none) */
  /* test hook, not reachable from the command line: called after each changing pass, before
     its check (a deliberately wrong rewrite injected there must be found at that pass) */
  void (*inject)(void *ctx, const char *pass, HModule *m);
  /* test hook: called on the traced module the target compiles (not the one the interpreter
     evaluates) before it is compiled: a deliberately wrong kernel made there must be found */
  void (*inject_module)(void *ctx, HModule *m);
  void *inject_ctx;
  /* out */
  struct {
    const char *pass; /* the pass (NULL past the first OPT_BISECT_STEPS) */
    bool ok;          /* its results agreed */
    int result;       /* the result leaf furthest out */
    HCompare c;       /* its comparison */
  } step[OPT_BISECT_STEPS];
  int checked;            /* passes checked */
  const char *bad_pass;   /* the first pass whose results moved (NULL: none) */
  int bad_step;           /* its number among the changing passes (1-based) */
  int bad_result;         /* the result leaf furthest out */
  HCompare worst;         /* its comparison */
  int kernels_checked;    /* kernel bisection: kernels compared */
  const char *bad_kernel; /* the first kernel (its entry instruction) out of tolerance, or NULL */
  int bad_kernel_idx;     /* its number in schedule order (1-based) */
  HCompare kernel_worst;  /* its comparison */
} OptBisect;
/* Optimize m with options o (whose after_pass is taken) checking every changing pass against
 * the interpreter's results on args (nargs, the entry's parameters before flatten-params);
 * 0 when every pass agrees, 1 at the first that does not (b->bad_*: which), -1 on error. */
int opt_bisect(HModule *m, const OptOpts *o, Literal *const *args, int nargs, OptBisect *b,
               HErr *err);
/* Whether result got (a tuple's leaves in order) agrees with the nwant arrays want within b's
 * tolerance (a want read from .npy as 2-byte bits taken as its leaf's bf16 or f16); *worst and
 * *leaf: the leaf furthest out (false with err set on a shape mismatch). */
bool opt_bisect_compare(const OptBisect *b, Literal *got, Literal *const *want, int nwant,
                        HCompare *worst, int *leaf, HErr *err);
/* One result leaf against its reference within b's tolerance (16-bit types: tol16 of the
 * largest |want|); false with err on a shape mismatch. */
bool opt_bisect_leaf(const OptBisect *b, const Literal *got, const Literal *want, HCompare *c,
                     HErr *err);
/* For bf16 and f16 arrays: the largest |got - want| in units in the last place of want's
 * element (1 or less: the two differ by one rounding to the type, not by a bug), over the
 * elements whose want is not zero (a zero is no rounding); -1 for other types. */
double opt_bisect_ulps(const Literal *got, const Literal *want);
/* ", exact in bf16", ", within 1 bf16 ulp: one rounding apart, not a bug" or ", N bf16 ulps", and
 * a newline, for a report line. */
void opt_bisect_ulps_note(FILE *f, double ulps, DType t);
/* The leaves of l (a tuple's, depth first) into out[] (at most cap); *n counts them all. */
void opt_bisect_leaves(Literal *l, Literal **out, int *n, int cap);
/* args as m's entry takes them (its parameters as given, or their leaves once flatten-params
 * made tuple parameters leaves) in *out; their count, or -1 with err. */
int opt_bisect_flat_args(HArena *a, Literal *const *args, int nargs, const HModule *m,
                         Literal ***out, HErr *err);

/* ------------------------------------------------------------------ trace.c */

/* Make m's entry root the tuple (root, the value of every entry instruction a kernel computes,
 * in schedule order): the traced module; the instructions into traced[] (room for the entry's
 * instruction count), their count returned. The entry layout and aliases are dropped (the
 * interface is the tuple). */
int opt_trace_outputs(HModule *m, HInstr **traced);
/* Runs module m compiled for a target on nargs arguments: its result leaves into *out (n of
 * them, in a), or false with err. */
typedef bool (*OptRunFn)(void *ctx, HModule *m, Literal *const *args, int nargs, HArena *a,
                         Literal ***out, int *n, HErr *err);
/* Kernel bisection: the optimized module traced twice, mi for the interpreter and mc for the
 * target (run through run); each kernel's compiled output against the interpreter's value of
 * the same instruction, reported in schedule order on b->report; 0 when all agree, 1 at a
 * divergence (b->bad_kernel: the first), -1 on error. */
int opt_bisect_kernels(HModule *mi, HModule *mc, Literal *const *args, int nargs, OptRunFn run,
                       void *run_ctx, OptBisect *b, HErr *err);

/* ------------------------------------------------------------------ the passes */
#define PASS(name, fn, summary) bool fn(HModule *m, PassCtx *pc);
#include "passes.def"
#undef PASS

#endif
