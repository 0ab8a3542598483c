/* tools/hloc.c: the compiler driver.
 *
 *   hloc FILE                       read (.pb or .hlo), verify, print a one-line summary
 *   hloc FILE --emit=hlo [-o OUT]   print the module as HLO text
 *   hloc FILE -o model.o            compile for the host CPU: model.o + model.h
 *   hloc FILE --emit=hlo-opt        print the module after the optimization pipeline
 *   hloc FILE --emit=pb -o OUT.pb   write the module as a binary HloModuleProto (pb-opt: after
 *                                   the optimization pipeline)
 *   hloc verify FILE [in.npy ...]   find the first optimizer pass whose results move
 *   hloc --version                  version, commit, LLVM and the targets built
 *
 * The driver only parses flags and calls library entry points in order (load, verify,
 * compile); each phase reports one located line on failure and the driver exits 1. */
#include "hlo.h"
#include "memplan.h"
#include "optimizer.h"
#include "proto.h"
#if __has_include("target.h")
#include "target.h"
#define HLOC_HAVE_CPU 1
#endif

#include "hloc_version.h"

#include <stddef.h>
#include <stdlib.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <string.h>
#include <sys/stat.h>
#include <time.h>

/* What --version prints: what a bug report or a build log needs to name the compiler. */
static void print_version(void) {
  printf("hloc %s (commit %s)\nLLVM %s\ntargets: %s\n", hlo_version(), hlo_commit(),
         HLOC_LLVM_VERSION, HLOC_TARGETS);
}

static void usage(FILE *f) {
  fputs("usage: hloc FILE [options]\n"
        "       hloc verify FILE [in0.npy ...] [options]   (hloc verify --help)\n"
        "  FILE                 HloModuleProto (.pb, also HloProto/HloSnapshot) or HLO text\n"
        "  -o PATH              output file (object by default; - for stdout with --emit=hlo\n"
        "                       and hlo-opt)\n"
        "  --emit=KIND          hlo | hlo-opt | pb | pb-opt | llvm | asm | obj (default: obj\n"
        "                       with -o, else a summary); hlo prints the module as read, hlo-opt\n"
        "                       after optimization; pb and pb-opt write them as a binary\n"
        "                       HloModuleProto (needs -o)\n"
        "  --name NAME          symbol prefix of the generated code (default: stem of -o)\n"
        "  --header PATH        where to write the C header (default: beside -o, .h)\n"
        "  --target=cpu         code generation target: cpu, or cuda where built with CUDA\n"
        "  --gpu-arch=sm_XX     cuda: GPU architecture for ptxas (default sm_90)\n"
        "  --precision=P        cuda: highest (true f32, default) or tf32 matrix products\n"
        "  --dot-algorithm=A    f32 dots that name no algorithm, 64 or more rows, columns\n"
        "                       and depth, any operand precision: exact (default), bf16\n"
        "                       (operands rounded), bf16x3 (split into bf16 high and low\n"
        "                       parts, three products: a few 1e-5 relative, as XLA's\n"
        "                       dot_bf16_bf16_f32_x3) or f16, on the 16-bit paths\n"
        "  --conv-layout=L      nhwc or nchw: the form convolutions are computed in (default:\n"
        "                       nchw for cuda at highest precision, where cuDNN's f32 Winograd\n"
        "                       and FFT algorithms apply; nhwc otherwise)\n"
        "  --conv-workspace=MIB cuda: cuDNN workspace reserved in temp, at most MIB MiB\n"
        "                       (default 3072; less memory may mean slower algorithms)\n"
        "  --gemm-epilogues=M   cuda: fused (default: bias, residual and ReLU epilogues of\n"
        "                       dots computed by cuBLASLt in the GEMM) or fallback (testing:\n"
        "                       each runs as cuBLAS and its epilogue kernel, as on a GPU where\n"
        "                       cuBLASLt has no algorithm for it)\n"
        "  --gemm-prologues=M   cuda: auto (default: a 16-bit dot whose operand is computed\n"
        "                       by a prologue, such as a dequantized int8 weight, runs on hloc's\n"
        "                       tensor-core GEMM with the prologue fused where that is estimated\n"
        "                       faster than staging the operand for cuBLAS), fused (wherever\n"
        "                       that kernel takes the dot) or staged (always cuBLAS)\n"
        "  --emit=ptx|cubin     cuda: kernels only, plus a JSON manifest (--manifest PATH,\n"
        "                       default beside -o); --stats prints registers and spills\n"
        "  --cpu NAME           CPU to generate code for (default: the host CPU)\n"
        "  --features LIST      CPU features, LLVM syntax (+avx2,-avx512f); default: the\n"
        "                       host's for the host CPU, else what LLVM derives from --cpu\n"
        "  -O0 .. -O3           optimization level (default -O2; cpu: -O3 also unrolls loops\n"
        "                       and gives each kernel its own function where -O2 shares one\n"
        "                       between kernels that differ only in sizes; at -O2 an x86-64\n"
        "                       CPU with AVX2/FMA or AVX-512 gets the matrix-product library\n"
        "                       prebuilt for its ISA level, other levels compile it for --cpu)\n"
        "  --conv-algo=A        cpu: auto (default: 3x3 convolutions of unit stride through\n"
        "                       Winograd's F(2x2, 3x3), 2.25x fewer multiply-adds, rounding\n"
        "                       within ~1e-5 relative of the direct sum) or direct (every\n"
        "                       convolution as an implicit GEMM)\n"
        "  --profile            cpu: also emit NAME_run_profile(), which adds each task's\n"
        "                       time-stamp counter ticks to a caller array, the task names\n"
        "                       and FLOPs (NAME_task_names[], NAME_task_flops[],\n"
        "                       NAME_NUM_TASKS in the header)\n"
        "  --dump-passes[=DIR]  dump the module after every pass that changed it, the final\n"
        "                       module and reports into DIR (default: hloc_dumps)\n"
        "  --time-passes        print the time spent in each pass\n"
        "  --disable-pass=NAME  do not run pass NAME (repeatable)\n"
        "  --stop-after=NAME    stop the pipeline after pass NAME\n"
        "  --list-passes        list the optimizer passes\n"
        "  --list-knobs         list the CPU target's tuning, debug and test knobs (environment)\n"
        "  --freeze ARG=FILE    turn entry parameter ARG (number or name) into a constant\n"
        "                       holding FILE (.npy) before optimization (repeatable)\n"
        "  --entry-layout=L     row-major (default: arguments and results dense row-major,\n"
        "                       whatever entry_computation_layout declares) or module (in\n"
        "                       the layouts it declares: the header lists their dims in\n"
        "                       memory order and says so)\n"
        "  --elided-constants=M what to do with constants a dump elided (constant({...})):\n"
        "                       error (default: refused where their value is needed),\n"
        "                       zero, or random[:SEED] (deterministic values of weight scale;\n"
        "                       hloc-run and hloc-bench-ref take the same option and fill\n"
        "                       the same values); --stats says how many were filled\n"
        "  --stats              print kernels, fusions, instructions, TEMP_BYTES, the\n"
        "                       peak-live bound and each compile phase's time to stderr\n"
        "  --version            version, commit, LLVM version and the targets built\n"
        "  -h, --help           this text\n",
        f);
}

static const char *flag_value(int argc, char **argv, int *i, const char *flag) {
  size_t n = strlen(flag);
  if (!strncmp(argv[*i], flag, n) && argv[*i][n] == '=') return argv[*i] + n + 1;
  if (!strcmp(argv[*i], flag)) {
    if (*i + 1 >= argc) {
      fprintf(stderr, "hloc: %s needs a value\n", flag);
      exit(1);
    }
    return argv[++*i];
  }
  return NULL;
}

/* Stem of a path: "dir/model.o" -> "model", made a valid C identifier. */
static char *stem_identifier(const char *path) {
  const char *b = strrchr(path, '/');
  b = b ? b + 1 : path;
  size_t n = strcspn(b, ".");
  char *s = malloc(n + 2);
  size_t k = 0;
  if (n == 0 || (b[0] >= '0' && b[0] <= '9')) s[k++] = 'm';
  for (size_t i = 0; i < n; i++) {
    char c = b[i];
    s[k++] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ? c : '_';
  }
  s[k] = 0;
  return s;
}

/* The path of a file written beside the output (header, manifest): the output's path with
 * its extension replaced; when the output is an existing non-regular file (/dev/null), that
 * same path, so `-o /dev/null` discards everything instead of creating /dev/null.h. */
static char *replace_ext(const char *path, const char *ext) {
  struct stat st;
  if (stat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) return strdup(path);
  const char *slash = strrchr(path, '/');
  const char *dot = strrchr(path, '.');
  size_t n = dot && (!slash || dot > slash) ? (size_t)(dot - path) : strlen(path);
  char *s = malloc(n + strlen(ext) + 1);
  memcpy(s, path, n);
  strcpy(s + n, ext);
  return s;
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ------------------------------------------------------------------ hloc verify */

static void verify_usage(FILE *f) {
  fprintf(f,
          "usage: hloc verify MODEL [in0.npy ...] [--random-inputs[=SEED]] [--rtol R] [--atol A]\n"
          "                   [--target=cpu|cuda] [--expect out0.npy ...] [--json FILE]\n"
          "                   [--passes-only] [--precision=highest|tf32]\n"
          "                   [--dot-algorithm=exact|bf16|bf16x3|f16]\n"
          "                   [--bundle DIR | --results DIR]\n"
          "  Evaluates MODEL on the reference interpreter before optimization and after every\n"
          "  optimizer pass that changes it (the target's pipeline), on the given arguments or\n"
          "  deterministic pseudo-random ones (the default, seed 0), and names the first pass\n"
          "  whose results leave the tolerance (default rtol 1e-4, atol 1e-5; bf16/f16\n"
          "  results: 3e-2 of their largest magnitude). With --expect (the framework's\n"
          "  outputs, e.g. XLA's), it first says whether the interpreter, i.e. hloc's reading\n"
          "  of the HLO, agrees with them. When every pass agrees (and unless --passes-only),\n"
          "  the kernel bisection follows (--target=cpu): the optimized module compiled for\n"
          "  the host with every kernel's output also a result (linked with $CC, else cc, and\n"
          "  loaded), each compared with the interpreter's value of the same instruction; the\n"
          "  first kernel out of tolerance is printed with its HLO and its operands' values.\n"
          "  With --target=cuda the traced module is compiled for the GPU into a bundle\n"
          "  folder (--bundle DIR, else a temporary one): the object, the arguments, a driver\n"
          "  linked here and run.sh. Where this machine has a GPU it runs at once; else carry\n"
          "  DIR to one, run 'sh DIR/run.sh' there, bring DIR back and give the same command\n"
          "  with --results DIR. --json FILE writes the report for scripts. Exit 0: all\n"
          "  agree; 1: the interpreter, a pass or a kernel moved the results; 2: bad input;\n"
          "  3: the GPU bundle is prepared and waits for its run.\n");
}

static bool verify_tol(const char *v, double *t) {
  char *end = NULL;
  *t = strtod(v, &end);
  if (end && !*end && *t >= 0) return true;
  fprintf(stderr, "hloc verify: bad tolerance '%s'\n", v);
  return false;
}

/* The report as JSON: the interpreter against --expect (null when not asked), every checked
 * pass, the first one out of tolerance (null when none). */
static bool verify_json(const char *path, const char *file, const char *target, int interp,
                        const HCompare *ic, int ileaf, const OptBisect *b, const char *pending,
                        HErr *err) {
  HStr j = {0};
  hlo_str_printf(
      &j, "{\n  \"module\": \"%s\",\n  \"target\": \"%s\",\n  \"interpreter_vs_expected\": ", file,
      target);
  if (interp < 0)
    hlo_str_printf(&j, "null");
  else
    hlo_str_printf(
        &j,
        "{\"agrees\": %s, \"result\": %d, \"max_abs\": %.6g, \"max_rel\": %.6g, \"outside\": %lld}",
        interp ? "true" : "false", ileaf, ic->max_abs, ic->max_rel, (long long)ic->bad);
  hlo_str_printf(&j, ",\n  \"passes\": [");
  for (int i = 0; i < b->checked && i < OPT_BISECT_STEPS; i++)
    hlo_str_printf(&j,
                   "%s\n    {\"pass\": \"%s\", \"agrees\": %s, \"result\": %d, \"max_abs\": %.6g, "
                   "\"max_rel\": %.6g, \"outside\": %lld}",
                   i ? "," : "", b->step[i].pass, b->step[i].ok ? "true" : "false",
                   b->step[i].result, b->step[i].c.max_abs, b->step[i].c.max_rel,
                   (long long)b->step[i].c.bad);
  hlo_str_printf(&j, "\n  ],\n  \"first_bad_pass\": ");
  if (b->bad_pass)
    hlo_str_printf(&j, "\"%s\"", b->bad_pass);
  else
    hlo_str_printf(&j, "null");
  if (pending[0]) hlo_str_printf(&j, ",\n  \"gpu_bundle_pending\": \"%s\"", pending);
  hlo_str_printf(&j, ",\n  \"kernels_checked\": %d,\n  \"first_bad_kernel\": ", b->kernels_checked);
  if (b->bad_kernel)
    hlo_str_printf(&j,
                   "{\"name\": \"%s\", \"index\": %d, \"max_abs\": %.6g, \"max_rel\": %.6g, "
                   "\"outside\": %lld}\n}\n",
                   b->bad_kernel, b->bad_kernel_idx, b->kernel_worst.max_abs,
                   b->kernel_worst.max_rel, (long long)b->kernel_worst.bad);
  else
    hlo_str_printf(&j, "null\n}\n");
  bool ok = hlo_write_file_atomic(path, j.p, j.n, err);
  free(j.p);
  return ok;
}

/* --dot-algorithm's values: the algorithm of f32 dots that name none (opt_dot_algorithm). */
static bool dot_algorithm_arg(const char *v, DotAlg *out) {
  static const struct {
    const char *name;
    DotAlg alg;
  } t[] = {{"exact", DALG_UNSET},
           {"bf16", DALG_BF16_BF16_F32},
           {"bf16x3", DALG_BF16_BF16_F32_X3},
           {"f16", DALG_F16_F16_F32}};
  for (size_t i = 0; i < sizeof t / sizeof *t; i++)
    if (!strcmp(v, t[i].name)) return *out = t[i].alg, true;
  return false;
}

typedef struct VerifyArgs {
  const char *file, *target, *json, *ins[256], *exps[256];
  const char *precision;        /* --precision (cuda) as given */
  DotAlg dot_alg;               /* --dot-algorithm */
  bool tf32;                    /* it is tf32 */
  const char *bundle, *results; /* --bundle DIR, --results DIR (cuda) */
  int nin, nexp;
  uint64_t seed;
  bool passes_only; /* --passes-only: no kernel bisection */
  int argc;         /* the command line, to repeat it with --results */
  char **argv;
} VerifyArgs;

/* The command line of hloc verify into *va and b's tolerances: 0 to go on, -1 after --help,
 * else the exit code. */
static int verify_parse(int argc, char **argv, VerifyArgs *va, OptBisect *b) {
  bool expecting = false;
  for (int i = 1; i < argc; i++) {
    const char *v;
    char *end = NULL;
    if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      verify_usage(stdout);
      return -1;
    } else if (!strncmp(argv[i], "--random-inputs", 15) && (!argv[i][15] || argv[i][15] == '=')) {
      va->seed = argv[i][15] ? strtoull(argv[i] + 16, &end, 10) : 0;
      if (argv[i][15] && (!end || *end)) {
        fprintf(stderr, "hloc verify: bad seed '%s'\n", argv[i] + 16);
        return 2;
      }
    } else if ((v = flag_value(argc, argv, &i, "--rtol"))) {
      if (!verify_tol(v, &b->rtol)) return 2;
    } else if ((v = flag_value(argc, argv, &i, "--atol"))) {
      if (!verify_tol(v, &b->atol)) return 2;
    } else if ((v = flag_value(argc, argv, &i, "--target"))) {
      va->target = v;
    } else if ((v = flag_value(argc, argv, &i, "--json"))) {
      va->json = v;
    } else if ((v = flag_value(argc, argv, &i, "--precision"))) {
      va->precision = v;
    } else if ((v = flag_value(argc, argv, &i, "--dot-algorithm"))) {
      if (!dot_algorithm_arg(v, &va->dot_alg)) {
        fprintf(stderr, "hloc verify: --dot-algorithm must be exact, bf16, bf16x3 or f16\n");
        return 2;
      }
    } else if ((v = flag_value(argc, argv, &i, "--bundle"))) {
      va->bundle = v;
    } else if ((v = flag_value(argc, argv, &i, "--results"))) {
      va->results = v;
    } else if (!strcmp(argv[i], "--expect")) {
      expecting = true;
    } else if (!strcmp(argv[i], "--passes-only")) {
      va->passes_only = true;
    } else if (argv[i][0] == '-') {
      fprintf(stderr, "hloc verify: unknown or incomplete option '%s'\n", argv[i]);
      return 2;
    } else if (!va->file) {
      va->file = argv[i];
    } else if (expecting && va->nexp < 256) {
      va->exps[va->nexp++] = argv[i];
    } else if (!expecting && va->nin < 256) {
      va->ins[va->nin++] = argv[i];
    }
  }
  const char *why = NULL;
  if (va->precision && strcmp(va->precision, "highest") && strcmp(va->precision, "tf32"))
    why = "--precision must be highest or tf32";
  else if ((va->bundle || va->results || va->precision) && strcmp(va->target, "cuda"))
    why = "--bundle, --results and --precision are for --target=cuda";
  else if (va->bundle && va->results)
    why = "--bundle prepares a run, --results reads one: give one of them";
  if (why) {
    fprintf(stderr, "hloc verify: %s\n", why);
    return 2;
  }
  va->tf32 = va->precision && !strcmp(va->precision, "tf32");
  va->argc = argc, va->argv = argv;
  if (va->file) return 0;
  verify_usage(stderr);
  return 2;
}

/* The entry's arguments: the given .npy files, else the pseudo-random values of the seed. */
static Literal **verify_args(HArena *a, const HModule *m, const VerifyArgs *va, HErr *err) {
  int np = m->entry->nparams;
  if (va->nin && va->nin != np) {
    hlo_err(err, va->file, NULL, NULL, "%d arguments given, the entry takes %d", va->nin, np);
    return NULL;
  }
  Literal **args = hlo_arena_alloc(a, sizeof *args * (size_t)(np + 1));
  for (int i = 0; i < np; i++) {
    const HInstr *p = m->entry->params[i];
    if (!va->nin) {
      args[i] = hlo_literal_new(a, &p->shape);
      hlo_literal_fill_random(args[i], p, va->seed);
    } else if ((args[i] = hlo_npy_read(a, va->ins[i], err))) {
      hlo_literal_bits_as(args[i], p->shape.dt);
    } else {
      return NULL;
    }
  }
  return args;
}

/* The interpreter on the module as read against the expected outputs: 1 agrees, 0 not (*ic,
 * *ileaf: the leaf furthest out), -1 on error. */
static int verify_expect(HArena *a, HModule *m, Literal **args, const VerifyArgs *va,
                         const OptBisect *b, HCompare *ic, int *ileaf, HErr *err) {
  Literal **want = hlo_arena_alloc(a, sizeof *want * (size_t)va->nexp);
  for (int k = 0; k < va->nexp; k++)
    if (!(want[k] = hlo_npy_read(a, va->exps[k], err))) return -1;
  Literal *res = hlo_interp_run(m, a, args, m->entry->nparams, err);
  if (!res) return -1;
  HErr ce = {0};
  int agree = opt_bisect_compare(b, res, want, va->nexp, ic, ileaf, &ce);
  if (ce.set)
    printf("interpreter against the expected outputs: %s\n", ce.msg);
  else
    printf("interpreter against the expected outputs: %s (result %d: max abs err %.3g, max rel "
           "err %.3g, %lld outside)\n",
           agree ? "agrees" : "DISAGREES: hloc's reading of the HLO differs", *ileaf, ic->max_abs,
           ic->max_rel, (long long)ic->bad);
  /* 16-bit results: whether they differ from the expected by more than one rounding */
  int ngot = 0, cap = hlo_shape_leaves(&res->shape);
  Literal **got = hlo_arena_alloc(a, sizeof *got * (size_t)(cap + 1));
  opt_bisect_leaves(res, got, &ngot, cap);
  for (int k = 0; !ce.set && k < ngot && k < va->nexp; k++) {
    double ulps = opt_bisect_ulps(got[k], want[k]);
    if (ulps < 0) continue;
    printf("  result %d", k);
    opt_bisect_ulps_note(stdout, ulps, want[k]->shape.dt);
  }
  return agree;
}

/* The passes' verdict (and with --expect the interpreter's): the exit code. */
#ifdef HLOC_HAVE_CPU
/* OptRunFn for the host CPU (cpu_run.c), with the knobs of the environment. */
static bool verify_run_cpu(void *ctx, HModule *m, Literal *const *args, int nargs, HArena *a,
                           Literal ***out, int *n, HErr *err) {
  static CpuKnobs knobs;
  cpu_knobs_from_env(&knobs);
  CpuOpts o = {.knobs = &knobs, .opt_level = 2};
  (void)ctx;
  return cpu_run_module(m, &o, args, nargs, a, out, n, err);
}
#endif

#ifdef HLOC_HAVE_CUDA
/* The GPU side of the kernel bisection: a bundle prepared in dir and run here when this
 * machine can, or (--results) the results of one that ran elsewhere. */
typedef struct VerifyGpu {
  const VerifyArgs *va;
  CudaOpts o;
  const char *dir;
  bool pending; /* prepared; this machine cannot run it */
  char why[512];
} VerifyGpu;

/* OptRunFn for the GPU. */
static bool verify_run_cuda(void *ctx, HModule *m, Literal *const *args, int nargs, HArena *a,
                            Literal ***out, int *n, HErr *err) {
  VerifyGpu *g = ctx;
  uint64_t id = cuda_bundle_id(m, &g->o, args, nargs);
  if (!g->va->results) {
    if (!cuda_bundle_prepare(m, &g->o, args, nargs, g->dir, id, err)) return false;
    int ran = cuda_bundle_run(m, g->dir, g->why, sizeof g->why, err);
    if (ran <= 0) return g->pending = ran == 0, false;
  }
  if (!cuda_bundle_results(m, g->dir, id, a, out, n, err)) return false;
  printf("kernel  name                            result\n");
  return true;
}

/* What to do with a bundle this machine cannot run: the command again with --results. */
static void verify_pending(const VerifyGpu *g) {
  const VerifyArgs *va = g->va;
  printf("kernel bisection: this machine cannot run the GPU bundle (%s)\n", g->why);
  printf("  prepared in %s: carry it to a machine with an NVIDIA GPU and run there\n"
         "    sh %s/run.sh\n  then, with the folder back here:\n    hloc verify",
         g->dir, g->dir);
  for (int i = 1; i < va->argc; i++) {
    if (!strcmp(va->argv[i], "--bundle")) {
      i++;
      continue;
    }
    if (strncmp(va->argv[i], "--bundle=", 9)) printf(" %s", va->argv[i]);
  }
  printf(" --results %s\n", g->dir);
}

/* The kernel bisection on the GPU; 0 / 1 / -1 as opt_bisect_kernels, 3 when it waits for a
 * run elsewhere. */
static int verify_kernels_cuda(HModule *m, HModule *mc, Literal *const *args, int nargs,
                               const VerifyArgs *va, OptBisect *b, char *pending, size_t np,
                               HErr *err) {
  char tmp[512] = "";
  VerifyGpu g = {.va = va, .dir = va->results ? va->results : va->bundle};
  g.o.precision = va->tf32 ? CUDA_PRECISION_TF32 : CUDA_PRECISION_HIGHEST;
  g.o.opt_level = 2;
  if (!g.dir) {
    const char *t = getenv("TMPDIR");
    snprintf(tmp, sizeof tmp, "%s/hloc_verify_XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(tmp)) {
      hlo_err(err, va->file, NULL, NULL, "kernel bisection: cannot make a temporary folder");
      return -1;
    }
    g.dir = tmp;
  }
  int rc = opt_bisect_kernels(m, mc, args, nargs, verify_run_cuda, &g, b, err);
  if (g.pending) {
    memset(err, 0, sizeof *err);
    verify_pending(&g);
    snprintf(pending, np, "%s", g.dir);
    return 3;
  }
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
  if (tmp[0] && system(cmd) != 0) fprintf(stderr, "hloc verify: cannot remove %s\n", tmp);
  return rc;
}
#endif

/* The kernel bisection of m (optimized by the pass bisection, which agreed): a second copy
 * read and optimized the same way is compiled; 0 / 1 / -1 as opt_bisect_kernels, 3 when the
 * GPU run waits for another machine. */
static int verify_kernels(HModule *m, const OptOpts *oo, const VerifyArgs *va, Literal *const *args,
                          int nargs, OptBisect *b, char *pending, size_t np, HErr *err) {
  bool cuda = !strcmp(va->target, "cuda");
  HModule *mc = proto_load_file(va->file, err);
  int rc = -1;
  if (mc && hlo_verify(mc, err) && opt_optimize(mc, oo, err)) {
#ifdef HLOC_HAVE_CUDA
    if (cuda) rc = verify_kernels_cuda(m, mc, args, nargs, va, b, pending, np, err);
#else
    (void)pending, (void)np;
#endif
#ifdef HLOC_HAVE_CPU
    if (!cuda) printf("kernel  name                            result\n");
    if (!cuda) rc = opt_bisect_kernels(m, mc, args, nargs, verify_run_cpu, NULL, b, err);
#else
    if (!cuda) printf("kernel bisection: this build has no CPU target\n"), rc = 0;
#endif
    if (rc == 0) printf("every kernel agrees (%d checked)\n", b->kernels_checked);
  }
  hlo_module_free(mc);
  return rc;
}

static int verify_run(HArena *a, HModule *m, const OptOpts *oo, const VerifyArgs *va, OptBisect *b,
                      HErr *err) {
  Literal **args = verify_args(a, m, va, err);
  if (!args) return 2;
  printf("hloc verify %s (%s arguments), target %s\n", va->file, va->nin ? "given" : "random",
         va->target);
  int interp = -1; /* the interpreter against --expect: 1 agrees, 0 not, -1 not asked */
  HCompare ic = {0};
  int ileaf = 0;
  if (va->nexp && (interp = verify_expect(a, m, args, va, b, &ic, &ileaf, err)) < 0) return 2;
  printf("pass  name                    result\n");
  int nargs = m->entry->nparams;
  int rc = opt_bisect(m, oo, args, nargs, b, err);
  if (rc == 0) printf("every pass agrees (%d checked)\n", b->checked);
  char pending[512] = ""; /* the GPU bundle waiting for its run */
  if (rc == 0 && !va->passes_only)
    rc = verify_kernels(m, oo, va, args, nargs, b, pending, sizeof pending, err);
  if (rc >= 0 && va->json &&
      !verify_json(va->json, va->file, va->target, interp, &ic, ileaf, b, pending, err))
    return 2;
  if (rc == 1 && b->bad_pass) {
    const HCompare *w = &b->worst;
    printf("first pass out of tolerance: %s (pass %d of the changing ones), result %d: max abs "
           "err %.3g, worst element %lld got %.9g, expected %.9g",
           b->bad_pass, b->bad_step, b->bad_result, w->max_abs, (long long)w->worst, w->worst_got,
           w->worst_want);
    if (w->worst_got_im != 0 || w->worst_want_im != 0) /* complex: the imaginary parts */
      printf(" (imaginary parts %.9g, %.9g)", w->worst_got_im, w->worst_want_im);
    printf("\n");
  }
  if ((rc == 0 || rc == 3) && interp == 0) rc = 1; /* hloc's reading of the HLO differs */
  return rc < 0 ? 2 : rc;
}

static int verify_main(int argc, char **argv) {
  VerifyArgs va = {.target = "cpu"};
  OptBisect b = {.rtol = 1e-4, .atol = 1e-5, .tol16 = 3e-2, .report = stdout};
  int rc = verify_parse(argc, argv, &va, &b);
  if (rc) return rc < 0 ? 0 : rc;
  HErr err = {0};
  HArena *a = hlo_arena_new();
  HModule *m = proto_load_file(va.file, &err);
  OptOpts oo = {0};
  oo.verify_each = true;
  bool known = !strcmp(va.target, "cpu");
  if (known) cpu_optimizer_options(&oo);
  oo.dot_algorithm = va.dot_alg;
#ifdef HLOC_HAVE_CUDA
  if (!strcmp(va.target, "cuda"))
    cuda_optimizer_options(&oo, va.tf32 ? CUDA_PRECISION_TF32 : CUDA_PRECISION_HIGHEST),
        known = true;
#endif
  rc = 2;
  if (!known)
    hlo_err(&err, va.file, NULL, NULL, "hloc verify: unknown or unavailable target '%s'",
            va.target);
  else if (m && hlo_verify(m, &err))
    rc = verify_run(a, m, &oo, &va, &b, &err);
  if (err.set) fprintf(stderr, "hloc verify: %s\n", err.msg);
  hlo_module_free(m);
  hlo_arena_free(a);
  return rc;
}

/* The compiler's command line. */
typedef struct HlocArgs {
  const char *input, *out, *emit, *name, *header;                /* file, -o, --emit, --name ... */
  const char *target, *cpu, *features, *conv_layout, *conv_algo; /* target options */
  const char *gpu_arch, *precision, *manifest, *conv_ws;         /* --target=cuda options */
  const char *gemm_epilogues;                                    /* --gemm-epilogues (cuda) */
  const char *gemm_prologues;                                    /* --gemm-prologues (cuda) */
  const char *cuda_graphs;                                       /* --cuda-graphs (cuda) */
  int opt;                                                       /* -O level */
  OptOpts oo;                                                    /* optimizer options */
  const char *freeze[256];                                       /* --freeze ARG=FILE */
  int nfreeze;                                                   /* their count */
  HElided elided;                                                /* --elided-constants */
  const char *elided_arg;                                        /* its text */
  bool stats, profile;                                           /* --stats, --profile */
  bool cuda_emit, emit_pb, is_cuda; /* --emit=ptx|cubin, --emit=pb|pb-opt, --target=cuda */
} HlocArgs;

/* A flag that prints something and exits (--help, --version, --list-*): its exit status, or
 * -1 for any other argument. */
static int args_query(const char *arg) {
  if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
    usage(stdout);
  } else if (!strcmp(arg, "--version")) {
    print_version();
  } else if (!strcmp(arg, "--list-knobs")) {
#ifdef HLOC_HAVE_CPU
    cpu_knobs_print(stdout);
#else
    fputs("hloc: this build has no CPU target, so no knobs\n", stderr);
    return 1;
#endif
  } else if (!strcmp(arg, "--list-passes")) {
    for (int k = 0; k < opt_pass_count(); k++)
      printf("%-20s %s\n", opt_pass_at(k)->name, opt_pass_at(k)->summary);
  } else {
    return -1;
  }
  return 0;
}

/* An optimizer flag at argv[*i] (advanced past its value): 1 taken, 0 not one, -1 after a
 * message. */
static int args_optimizer(int argc, char **argv, int *i, HlocArgs *a) {
  const char *v, *arg = argv[*i];
  OptOpts *oo = &a->oo;
  if (!strcmp(arg, "--dump-passes")) {
    oo->dump_dir = "hloc_dumps";
  } else if (!strncmp(arg, "--dump-passes=", 14)) {
    oo->dump_dir = arg + 14;
  } else if (!strcmp(arg, "--time-passes")) {
    oo->time_passes = true;
  } else if ((v = flag_value(argc, argv, i, "--freeze"))) {
    if (a->nfreeze == (int)(sizeof a->freeze / sizeof a->freeze[0]))
      return fprintf(stderr, "hloc: too many --freeze options\n"), -1;
    a->freeze[a->nfreeze++] = v;
  } else if ((v = flag_value(argc, argv, i, "--elided-constants"))) {
    HErr perr = {0};
    if (!hlo_elided_parse(v, &a->elided, &perr)) return fprintf(stderr, "hloc: %s\n", perr.msg), -1;
    a->elided_arg = v;
  } else if ((v = flag_value(argc, argv, i, "--entry-layout"))) {
    if (strcmp(v, "row-major") && strcmp(v, "module"))
      return fprintf(stderr, "hloc: --entry-layout must be row-major or module\n"), -1;
    oo->entry_layout_module = !strcmp(v, "module");
  } else if ((v = flag_value(argc, argv, i, "--dot-algorithm"))) {
    if (!dot_algorithm_arg(v, &oo->dot_algorithm))
      return fprintf(stderr, "hloc: --dot-algorithm must be exact, bf16, bf16x3 or f16\n"), -1;
  } else if ((v = flag_value(argc, argv, i, "--disable-pass"))) {
    if (oo->ndisabled == OPT_MAX_DISABLED)
      return fprintf(stderr, "hloc: too many --disable-pass options\n"), -1;
    oo->disabled[oo->ndisabled++] = v;
  } else if ((v = flag_value(argc, argv, i, "--stop-after"))) {
    oo->stop_after = v;
  } else {
    return 0;
  }
  return 1;
}

/* An output or code generation flag at argv[*i]: 1 taken, 0 not one. */
static int args_codegen(int argc, char **argv, int *i, HlocArgs *a) {
  static const struct {
    const char *flag;
    size_t field;
  } vals[] = {
      {"-o", offsetof(HlocArgs, out)},
      {"--emit", offsetof(HlocArgs, emit)},
      {"--name", offsetof(HlocArgs, name)},
      {"--header", offsetof(HlocArgs, header)},
      {"--target", offsetof(HlocArgs, target)},
      {"--cpu", offsetof(HlocArgs, cpu)},
      {"--features", offsetof(HlocArgs, features)},
      {"--conv-layout", offsetof(HlocArgs, conv_layout)},
      {"--conv-algo", offsetof(HlocArgs, conv_algo)},
#ifdef HLOC_HAVE_CUDA
      {"--gpu-arch", offsetof(HlocArgs, gpu_arch)},
      {"--precision", offsetof(HlocArgs, precision)},
      {"--manifest", offsetof(HlocArgs, manifest)},
      {"--conv-workspace", offsetof(HlocArgs, conv_ws)},
      {"--gemm-epilogues", offsetof(HlocArgs, gemm_epilogues)},
      {"--gemm-prologues", offsetof(HlocArgs, gemm_prologues)},
      {"--cuda-graphs", offsetof(HlocArgs, cuda_graphs)},
#endif
  };
  const char *arg = argv[*i], *v;
  for (size_t k = 0; k < sizeof vals / sizeof vals[0]; k++)
    if ((v = flag_value(argc, argv, i, vals[k].flag))) {
      *(const char **)((char *)a + vals[k].field) = v;
      return 1;
    }
  if (!strcmp(arg, "--stats")) {
    a->stats = true;
  } else if (!strcmp(arg, "--profile")) {
    a->profile = true;
  } else if (arg[0] == '-' && arg[1] == 'O' && arg[2] >= '0' && arg[2] <= '3' && !arg[3]) {
    a->opt = arg[2] - '0';
  } else {
    return 0;
  }
  return 1;
}

/* The command line into *a: -1 to go on, else the exit status (a query, or 1 after a
 * message). */
static int args_parse(int argc, char **argv, HlocArgs *a) {
  a->target = "cpu";
  a->opt = 2;
#ifndef NDEBUG
  a->oo.verify_each = true; /* debug builds verify after every changing pass */
#endif
  for (int i = 1; i < argc; i++) {
    int q = args_query(argv[i]), r;
    if (q >= 0) return q;
    if ((r = args_optimizer(argc, argv, &i, a)) < 0) return 1;
    if (r || args_codegen(argc, argv, &i, a)) continue;
    if (argv[i][0] == '-' && argv[i][1])
      return fprintf(stderr, "hloc: unknown option '%s' (see hloc --help)\n", argv[i]), 1;
    if (a->input)
      return fprintf(stderr, "hloc: more than one input file ('%s' and '%s')\n", a->input, argv[i]),
             1;
    a->input = argv[i];
  }
  if (!a->input) return usage(stderr), 1;
  return -1;
}

/* The options' consistency, before any work: 0, or 1 after a message. */
/* Whether option opt's value v (NULL: not given) is none of the NULL-ended list ok, after one
 * line naming the choices ("--opt must be a, b or c"). */
static bool bad_choice(const char *opt, const char *v, const char *const *ok) {
  if (!v) return false;
  int n = 0;
  while (ok[n])
    if (!strcmp(v, ok[n++])) return false;
  fprintf(stderr, "hloc: %s must be ", opt);
  for (int i = 0; i < n; i++)
    fprintf(stderr, "%s%s", i == 0 ? "" : i == n - 1 ? " or " : ", ", ok[i]);
  fputc('\n', stderr);
  return true;
}

static int args_check(HlocArgs *a) {
  const char *emit = a->emit;
#ifdef HLOC_HAVE_CUDA
  a->cuda_emit = emit && (!strcmp(emit, "ptx") || !strcmp(emit, "cubin"));
  a->is_cuda = !strcmp(a->target, "cuda");
#endif
  a->emit_pb = emit && (!strcmp(emit, "pb") || !strcmp(emit, "pb-opt"));
  if (emit && !a->cuda_emit && !a->emit_pb && strcmp(emit, "hlo") && strcmp(emit, "hlo-opt") &&
      strcmp(emit, "llvm") && strcmp(emit, "asm") && strcmp(emit, "obj"))
    return fprintf(stderr,
                   "hloc: unknown --emit kind '%s' (hlo, hlo-opt, pb, pb-opt, llvm, asm, obj)\n",
                   emit),
           1;
  if (a->emit_pb && !a->out)
    return fprintf(stderr, "hloc: --emit=%s needs -o PATH (the proto is binary)\n", emit), 1;
  if (strcmp(a->target, "cpu") && !a->is_cuda)
    return fprintf(stderr, "hloc: target '%s' is not available in this build (available: cpu)\n",
                   a->target),
           1;
  if (!a->is_cuda && (a->gemm_epilogues || a->gemm_prologues || a->cuda_graphs))
    return fprintf(stderr, "hloc: --%s is an option of the cuda target\n",
                   a->gemm_epilogues   ? "gemm-epilogues"
                   : a->gemm_prologues ? "gemm-prologues"
                                       : "cuda-graphs"),
           1;
  static const char *const epi[] = {"fused", "fallback", NULL},
                           *pro[] = {"auto", "fused", "staged", NULL},
                           *grf[] = {"auto", "off", NULL}, *lay[] = {"nhwc", "nchw", NULL},
                           *alg[] = {"auto", "direct", NULL};
  if (bad_choice("--gemm-epilogues", a->gemm_epilogues, epi) ||
      bad_choice("--gemm-prologues", a->gemm_prologues, pro) ||
      bad_choice("--cuda-graphs", a->cuda_graphs, grf) ||
      bad_choice("--conv-layout", a->conv_layout, lay) ||
      bad_choice("--conv-algo", a->conv_algo, alg))
    return 1;
  if (!a->is_cuda) cpu_optimizer_options(&a->oo);
#ifdef HLOC_HAVE_CUDA
  if (a->is_cuda)
    cuda_optimizer_options(&a->oo, a->precision && !strcmp(a->precision, "tf32")
                                       ? CUDA_PRECISION_TF32
                                       : CUDA_PRECISION_HIGHEST);
#endif
  if (a->conv_layout)
    a->oo.conv_layout = !strcmp(a->conv_layout, "nchw") ? OPT_CONV_NCHW : OPT_CONV_NHWC;
  return 0;
}

/* --stats: the optimized module's figures, its buffer plan and the phases' times (t[0..3]:
 * load, verify, optimize start and end). */
static void print_stats(const HModule *m, const HlocArgs *a, int nfilled, const double *t) {
  OptStats st;
  opt_stats(m, &st);
  fprintf(stderr, "%s: ", m->name);
  opt_stats_print(stderr, &st);
  if (a->elided.mode != HLO_ELIDED_ERROR)
    fprintf(stderr, "elided constants filled: %d (--elided-constants=%s)\n", nfilled,
            a->elided_arg);
  HArena *pa = hlo_arena_new();
  MemPlan plan;
  HErr perr = {0};
  double t_plan = now_s();
  if (memplan_assign(m->entry, pa, &plan, &perr))
    fprintf(stderr, "TEMP_BYTES %lld, peak-live lower bound %lld\n", (long long)plan.temp_bytes,
            (long long)plan.peak_live);
  else
    fprintf(stderr, "no buffer plan: %s\n", perr.msg);
  t_plan = now_s() - t_plan;
  hlo_arena_free(pa);
  fprintf(stderr, "time: load %.2f ms, verify+freeze %.2f ms, optimize %.2f ms, plan %.2f ms\n",
          1e3 * (t[1] - t[0]), 1e3 * (t[2] - t[1]), 1e3 * (t[3] - t[2]), 1e3 * t_plan);
}

/* The module read, verified, frozen, filled and (unless printed as read) optimized; NULL after
 * a message. */
static HModule *load_module(HlocArgs *a) {
  HErr err = {0};
  double t[4];
  t[0] = now_s();
  HModule *m = proto_load_file(a->input, &err);
  t[1] = now_s();
  if (!m || !hlo_verify(m, &err) ||
      (a->nfreeze && !opt_freeze_specs(m, a->nfreeze, a->freeze, &err))) {
    fprintf(stderr, "hloc: %s\n", err.msg);
    hlo_module_free(m);
    return NULL;
  }
  int nfilled = hlo_fill_elided(m, &a->elided);
  t[2] = now_s();
  /* everything but printing the module as read goes through the optimizer */
  const char *emit = a->emit;
  bool as_read = (!emit && !a->out && !a->oo.dump_dir) ||
                 (emit && (!strcmp(emit, "hlo") || !strcmp(emit, "pb")));
  if (!as_read && !opt_optimize(m, &a->oo, &err)) {
    fprintf(stderr, "hloc: %s\n", err.msg);
    hlo_module_free(m);
    return NULL;
  }
  t[3] = now_s();
  if (a->stats) print_stats(m, a, nfilled, t);
  return m;
}

/* --emit=hlo|hlo-opt (text, to -o or stdout) and --emit=pb|pb-opt: 0, or 1 after a message. */
static int emit_module(HModule *m, const HlocArgs *a) {
  HErr err = {0};
  char *buf = NULL;
  size_t len = 0;
  bool ok = true;
  if (a->emit_pb) {
    hlo_module_fill_layouts(m); /* what XLA needs to run it */
    ok = proto_write_module(m, (uint8_t **)&buf, &len, &err);
  } else if (!a->out || !strcmp(a->out, "-")) {
    hlo_print_module(stdout, m, NULL);
    return 0;
  } else {
    FILE *f = open_memstream(&buf, &len);
    hlo_print_module(f, m, NULL);
    fclose(f);
  }
  ok = ok && hlo_write_file_atomic(a->out, buf, len, &err);
  if (!ok) fprintf(stderr, "hloc: %s\n", err.msg);
  free(buf);
  return ok ? 0 : 1;
}

#ifdef HLOC_HAVE_CUDA
/* --target=cuda: the host object and header, or --emit=ptx|cubin and the manifest. */
static int emit_cuda(HModule *m, const HlocArgs *a) {
  const char *emit = a->emit, *prec = a->precision, *ws = a->conv_ws;
  if (!a->out || (emit && !a->cuda_emit && strcmp(emit, "obj")))
    return fprintf(stderr, "hloc: --target=cuda needs -o PATH and --emit=obj|ptx|cubin\n"), 1;
  char *end = NULL;
  long long mib = ws ? strtoll(ws, &end, 10) : 0;
  if (prec && strcmp(prec, "tf32") && strcmp(prec, "highest"))
    return fprintf(stderr, "hloc: --precision must be highest or tf32\n"), 1;
  if (a->profile)
    return fprintf(stderr, "hloc: --profile is an option of the cpu target (time the CUDA kernels "
                           "with nsys or ncu)\n"),
           1;
  if (ws && (end == ws || *end || mib < 1 || mib > (1LL << 24)))
    return fprintf(stderr, "hloc: --conv-workspace must be a size in MiB (1 to 16777216)\n"), 1;
  const char *ge = a->gemm_epilogues, *gp = a->gemm_prologues, *cg = a->cuda_graphs;
  char *nm = a->name ? strdup(a->name) : stem_identifier(a->out), *hdr = NULL, *man = NULL;
  CudaOpts co = {.name = nm, .out_path = a->out, .gpu_arch = a->gpu_arch};
  co.opt_level = a->opt < 2 ? a->opt : 3;
  co.emit = !emit || !strcmp(emit, "obj") ? CUDA_EMIT_OBJ
            : !strcmp(emit, "ptx")        ? CUDA_EMIT_PTX
                                          : CUDA_EMIT_CUBIN;
  co.precision = prec && !strcmp(prec, "tf32") ? CUDA_PRECISION_TF32 : CUDA_PRECISION_HIGHEST;
  co.stats = a->stats ? stderr : NULL;
  co.conv_ws_limit = (int64_t)mib << 20;
  co.epilogue_fallback = ge && !strcmp(ge, "fallback");
  co.gemm_prologues = !gp || !strcmp(gp, "auto") ? CUDA_PROLOGUES_AUTO
                      : !strcmp(gp, "fused")     ? CUDA_PROLOGUES_FUSED
                                                 : CUDA_PROLOGUES_STAGED;
  co.graphs = cg && !strcmp(cg, "off") ? CUDA_GRAPHS_OFF : CUDA_GRAPHS_AUTO;
  if (co.emit == CUDA_EMIT_OBJ)
    co.header_path = a->header ? a->header : (hdr = replace_ext(a->out, ".h"));
  co.manifest_path = a->manifest                ? a->manifest
                     : co.emit != CUDA_EMIT_OBJ ? (man = replace_ext(a->out, ".json"))
                                                : NULL;
  HErr err = {0};
  int rc = 0;
  if (!cuda_compile(m, &co, &err)) fprintf(stderr, "hloc: %s\n", err.msg), rc = 1;
  free(nm);
  free(hdr);
  free(man);
  return rc;
}
#endif

/* The CPU target: object (or assembly, LLVM IR) and header. */
static int emit_cpu(HModule *m, const HlocArgs *a) {
#ifdef HLOC_HAVE_CPU
  if (!a->out) return fprintf(stderr, "hloc: --emit=%s needs -o PATH\n", a->emit), 1;
  char *nm = a->name ? strdup(a->name) : stem_identifier(a->out), *hdr = NULL;
  static CpuKnobs knobs;
  cpu_knobs_from_env(&knobs);
  CpuOpts o = {.knobs = &knobs, .name = nm, .out_path = a->out, .cpu = a->cpu};
  o.features = a->features;
  o.opt_level = a->opt;
  o.profile = a->profile;
  o.stats = a->stats ? stderr : NULL;
  o.direct_conv = a->conv_algo && !strcmp(a->conv_algo, "direct");
  o.emit = !a->emit || !strcmp(a->emit, "obj") ? CPU_EMIT_OBJ
           : !strcmp(a->emit, "asm")           ? CPU_EMIT_ASM
                                               : CPU_EMIT_LLVM;
  if (o.emit == CPU_EMIT_OBJ)
    o.header_path = a->header ? a->header : (hdr = replace_ext(a->out, ".h"));
  else
    o.header_path = a->header;
  double t_cg = now_s();
  HErr err = {0};
  int rc = 0;
  if (!cpu_compile(m, &o, &err)) fprintf(stderr, "hloc: %s\n", err.msg), rc = 1;
  if (a->stats) fprintf(stderr, "time: code generation %.2f ms\n", 1e3 * (now_s() - t_cg));
  free(nm);
  free(hdr);
  return rc;
#else
  (void)m, (void)a;
  fprintf(stderr, "hloc: code generation is not available in this build\n");
  return 1;
#endif
}

int main(int argc, char **argv) {
  /* A compilation copies a model's constants several times (the .npy of a frozen weight read
     and parsed, its packed form, the joined objects): served from the heap and reused once
     freed rather than from fresh mappings, the copies stop paying a page fault per 4 KiB
     (docs/log: a third less system time on transformer_layer with 28 MB of frozen weights).
     A process that exits right after keeps what it freed. */
#if defined(__GLIBC__) && defined(M_MMAP_THRESHOLD)
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
  mallopt(M_TOP_PAD, 64 << 20);
#endif
  if (argc > 1 && !strcmp(argv[1], "verify")) return verify_main(argc - 1, argv + 1);
  static HlocArgs a;
  int rc = args_parse(argc, argv, &a);
  if (rc >= 0) return rc;
  if (args_check(&a)) return 1;
  HModule *m = load_module(&a);
  if (!m) return 1;
  if (!a.emit && !a.out) {
    int ninstr = 0;
    for (int i = 0; i < m->ncomps; i++)
      ninstr += m->comps[i]->ninstrs;
    printf("%s: module %s: %d computations, %d instructions, %d parameters: verified\n", a.input,
           m->name, m->ncomps, ninstr, m->entry->nparams);
  } else if (a.emit_pb || (a.emit && (!strcmp(a.emit, "hlo") || !strcmp(a.emit, "hlo-opt")))) {
    rc = emit_module(m, &a);
#ifdef HLOC_HAVE_CUDA
  } else if (a.is_cuda) {
    rc = emit_cuda(m, &a);
#endif
  } else {
    rc = emit_cpu(m, &a);
  }
  hlo_module_free(m);
  return rc < 0 ? 0 : rc;
}
