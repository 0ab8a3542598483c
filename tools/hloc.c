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
        "  -o PATH              output file (object by default)\n"
        "  --emit=KIND          hlo | hlo-opt | pb | pb-opt | llvm | asm | obj (default: obj\n"
        "                       with -o, else a summary); hlo prints the module as read, hlo-opt\n"
        "                       after optimization; pb and pb-opt write them as a binary\n"
        "                       HloModuleProto (needs -o)\n"
        "  --name NAME          symbol prefix of the generated code (default: stem of -o)\n"
        "  --header PATH        where to write the C header (default: beside -o, .h)\n"
        "  --target=cpu         code generation target: cpu, or cuda where built with CUDA\n"
        "  --gpu-arch=sm_XX     cuda: GPU architecture for ptxas (default sm_90)\n"
        "  --precision=P        cuda: highest (true f32, default) or tf32 matrix products\n"
        "  --conv-layout=L      nhwc or nchw: the form convolutions are computed in (default:\n"
        "                       nchw for cuda at highest precision, where cuDNN's f32 Winograd\n"
        "                       and FFT algorithms apply; nhwc otherwise)\n"
        "  --conv-workspace=MIB cuda: cuDNN workspace reserved in temp, at most MIB MiB\n"
        "                       (default 3072; less memory may mean slower algorithms)\n"
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
          "  Evaluates MODEL on the reference interpreter before optimization and after every\n"
          "  optimizer pass that changes it (the target's pipeline), on the given arguments or\n"
          "  deterministic pseudo-random ones (the default, seed 0), and names the first pass\n"
          "  whose results leave the tolerance (default rtol 1e-4, atol 1e-5; bf16/f16\n"
          "  results: 3e-2 of their largest magnitude). With --expect (the framework's\n"
          "  outputs, e.g. XLA's), it first says whether the interpreter, i.e. hloc's reading\n"
          "  of the HLO, agrees with them. --json FILE writes the report for scripts. Exit 0:\n"
          "  all agree; 1: the interpreter or a pass moved the results; 2: bad input.\n");
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
                        const HCompare *ic, int ileaf, const OptBisect *b, HErr *err) {
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
    hlo_str_printf(&j, "\"%s\"\n}\n", b->bad_pass);
  else
    hlo_str_printf(&j, "null\n}\n");
  bool ok = hlo_write_file_atomic(path, j.p, j.n, err);
  free(j.p);
  return ok;
}

typedef struct VerifyArgs {
  const char *file, *target, *json, *ins[256], *exps[256];
  int nin, nexp;
  uint64_t seed;
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
    } else if (!strcmp(argv[i], "--expect")) {
      expecting = true;
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
  return agree;
}

/* The passes' verdict (and with --expect the interpreter's): the exit code. */
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
  int rc = opt_bisect(m, oo, args, m->entry->nparams, b, err);
  if (rc >= 0 && va->json &&
      !verify_json(va->json, va->file, va->target, interp, &ic, ileaf, b, err))
    return 2;
  if (rc == 0) printf("every pass agrees (%d checked)\n", b->checked);
  if (rc == 1) {
    const HCompare *w = &b->worst;
    printf("first pass out of tolerance: %s (pass %d of the changing ones), result %d: max abs "
           "err %.3g, worst element %lld got %.9g, expected %.9g",
           b->bad_pass, b->bad_step, b->bad_result, w->max_abs, (long long)w->worst, w->worst_got,
           w->worst_want);
    if (w->worst_got_im != 0 || w->worst_want_im != 0) /* complex: the imaginary parts */
      printf(" (imaginary parts %.9g, %.9g)", w->worst_got_im, w->worst_want_im);
    printf("\n");
  }
  if (rc == 0 && interp == 0) rc = 1; /* the passes keep the values, hloc's reading differs */
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
#ifdef HLOC_HAVE_CUDA
  if (!strcmp(va.target, "cuda")) cuda_optimizer_options(&oo, CUDA_PRECISION_HIGHEST), known = true;
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

int main(int argc, char **argv) {
  /* A compilation copies a model's constants several times (the .npy of a frozen weight read
     and parsed, its packed form, the joined objects): served from the heap and
     reused once freed rather than from fresh mappings, the copies stop paying a page fault per
     4 KiB (transformer_layer with 28 MB of frozen weights: 0.28 -> 0.25 s, a third less system
     time, on the 2-core Xeon VM). A process that exits right after keeps what it freed. */
#if defined(__GLIBC__) && defined(M_MMAP_THRESHOLD)
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
  mallopt(M_TOP_PAD, 64 << 20);
#endif
  if (argc > 1 && !strcmp(argv[1], "verify")) return verify_main(argc - 1, argv + 1);
  const char *input = NULL, *out = NULL, *emit = NULL, *name = NULL, *header = NULL;
  const char *target = "cpu", *cpu = NULL, *features = NULL, *conv_layout = NULL, *conv_algo = NULL;
#ifdef HLOC_HAVE_CUDA
  /* --target=cuda options (targets/cuda) */
  const char *gpu_arch = NULL, *precision = NULL, *manifest = NULL, *conv_ws = NULL;
#endif
  int opt = 2;
  OptOpts oo = {0};
  enum { MAX_FREEZE = 256 };
  const char *freeze[MAX_FREEZE];
  int nfreeze = 0;
  HElided elided = {0};
  const char *elided_arg = NULL;
  bool stats = false, profile = false;
#ifndef NDEBUG
  oo.verify_each = true; /* debug builds verify after every changing pass */
#endif
  for (int i = 1; i < argc; i++) {
    const char *v;
    if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(argv[i], "--version")) {
      print_version();
      return 0;
    } else if (!strcmp(argv[i], "--list-knobs")) {
#ifdef HLOC_HAVE_CPU
      cpu_knobs_print(stdout);
      return 0;
#else
      fputs("hloc: this build has no CPU target, so no knobs\n", stderr);
      return 1;
#endif
    } else if (!strcmp(argv[i], "--list-passes")) {
      for (int k = 0; k < opt_pass_count(); k++)
        printf("%-20s %s\n", opt_pass_at(k)->name, opt_pass_at(k)->summary);
      return 0;
    } else if (!strcmp(argv[i], "--dump-passes")) {
      oo.dump_dir = "hloc_dumps";
    } else if (!strncmp(argv[i], "--dump-passes=", 14)) {
      oo.dump_dir = argv[i] + 14;
    } else if (!strcmp(argv[i], "--stats")) {
      stats = true;
    } else if (!strcmp(argv[i], "--profile")) {
      profile = true;
    } else if ((v = flag_value(argc, argv, &i, "--freeze"))) {
      if (nfreeze == MAX_FREEZE) {
        fprintf(stderr, "hloc: too many --freeze options\n");
        return 1;
      }
      freeze[nfreeze++] = v;
    } else if ((v = flag_value(argc, argv, &i, "--elided-constants"))) {
      HErr perr = {0};
      if (!hlo_elided_parse(v, &elided, &perr)) {
        fprintf(stderr, "hloc: %s\n", perr.msg);
        return 1;
      }
      elided_arg = v;
    } else if ((v = flag_value(argc, argv, &i, "--entry-layout"))) {
      if (strcmp(v, "row-major") && strcmp(v, "module")) {
        fprintf(stderr, "hloc: --entry-layout must be row-major or module\n");
        return 1;
      }
      oo.entry_layout_module = !strcmp(v, "module");
    } else if (!strcmp(argv[i], "--time-passes")) {
      oo.time_passes = true;
    } else if ((v = flag_value(argc, argv, &i, "--disable-pass"))) {
      if (oo.ndisabled == OPT_MAX_DISABLED) {
        fprintf(stderr, "hloc: too many --disable-pass options\n");
        return 1;
      }
      oo.disabled[oo.ndisabled++] = v;
    } else if ((v = flag_value(argc, argv, &i, "--stop-after"))) {
      oo.stop_after = v;
    } else if ((v = flag_value(argc, argv, &i, "-o"))) {
      out = v;
    } else if ((v = flag_value(argc, argv, &i, "--emit"))) {
      emit = v;
    } else if ((v = flag_value(argc, argv, &i, "--name"))) {
      name = v;
    } else if ((v = flag_value(argc, argv, &i, "--header"))) {
      header = v;
    } else if ((v = flag_value(argc, argv, &i, "--target"))) {
      target = v;
    } else if ((v = flag_value(argc, argv, &i, "--cpu"))) {
      cpu = v;
    } else if ((v = flag_value(argc, argv, &i, "--features"))) {
      features = v;
    } else if ((v = flag_value(argc, argv, &i, "--conv-layout"))) {
      conv_layout = v;
    } else if ((v = flag_value(argc, argv, &i, "--conv-algo"))) {
      conv_algo = v;
#ifdef HLOC_HAVE_CUDA
    } else if ((v = flag_value(argc, argv, &i, "--gpu-arch"))) {
      gpu_arch = v;
    } else if ((v = flag_value(argc, argv, &i, "--precision"))) {
      precision = v;
    } else if ((v = flag_value(argc, argv, &i, "--manifest"))) {
      manifest = v;
    } else if ((v = flag_value(argc, argv, &i, "--conv-workspace"))) {
      conv_ws = v;
#endif
    } else if (argv[i][0] == '-' && argv[i][1] == 'O' && argv[i][2] >= '0' && argv[i][2] <= '3' &&
               !argv[i][3]) {
      opt = argv[i][2] - '0';
    } else if (argv[i][0] == '-' && argv[i][1]) {
      fprintf(stderr, "hloc: unknown option '%s' (see hloc --help)\n", argv[i]);
      return 1;
    } else if (!input) {
      input = argv[i];
    } else {
      fprintf(stderr, "hloc: more than one input file ('%s' and '%s')\n", input, argv[i]);
      return 1;
    }
  }
  if (!input) {
    usage(stderr);
    return 1;
  }
  bool cuda_emit = false; /* --emit=ptx|cubin (CUDA target) */
#ifdef HLOC_HAVE_CUDA
  cuda_emit = emit && (!strcmp(emit, "ptx") || !strcmp(emit, "cubin"));
#endif
  bool emit_pb = emit && (!strcmp(emit, "pb") || !strcmp(emit, "pb-opt"));
  if (emit && !cuda_emit && !emit_pb && strcmp(emit, "hlo") && strcmp(emit, "hlo-opt") &&
      strcmp(emit, "llvm") && strcmp(emit, "asm") && strcmp(emit, "obj")) {
    fprintf(stderr, "hloc: unknown --emit kind '%s' (hlo, hlo-opt, pb, pb-opt, llvm, asm, obj)\n",
            emit);
    return 1;
  }
  if (emit_pb && !out) {
    fprintf(stderr, "hloc: --emit=%s needs -o PATH (the proto is binary)\n", emit);
    return 1;
  }
#ifdef HLOC_HAVE_CUDA
  bool is_cuda = !strcmp(target, "cuda");
#else
  bool is_cuda = false;
#endif
  if (strcmp(target, "cpu") && !is_cuda) {
    fprintf(stderr, "hloc: target '%s' is not available in this build (available: cpu)\n", target);
    return 1;
  }

  if (conv_layout && strcmp(conv_layout, "nhwc") && strcmp(conv_layout, "nchw")) {
    fprintf(stderr, "hloc: --conv-layout must be nhwc or nchw\n");
    return 1;
  }
  if (conv_algo && strcmp(conv_algo, "auto") && strcmp(conv_algo, "direct")) {
    fprintf(stderr, "hloc: --conv-algo must be auto or direct\n");
    return 1;
  }
#ifdef HLOC_HAVE_CUDA
  if (is_cuda)
    cuda_optimizer_options(&oo, precision && !strcmp(precision, "tf32") ? CUDA_PRECISION_TF32
                                                                        : CUDA_PRECISION_HIGHEST);
#endif
  if (conv_layout) oo.conv_layout = !strcmp(conv_layout, "nchw") ? OPT_CONV_NCHW : OPT_CONV_NHWC;

  HErr err = {0};
  double t_load = now_s();
  HModule *m = proto_load_file(input, &err);
  double t_verify = now_s();
  if (!m || !hlo_verify(m, &err) || (nfreeze && !opt_freeze_specs(m, nfreeze, freeze, &err))) {
    fprintf(stderr, "hloc: %s\n", err.msg);
    hlo_module_free(m);
    return 1;
  }
  int nfilled = hlo_fill_elided(m, &elided);
  double t_opt = now_s();

  /* everything but printing the module as read goes through the optimizer */
  bool as_read =
      (!emit && !out && !oo.dump_dir) || (emit && (!strcmp(emit, "hlo") || !strcmp(emit, "pb")));
  if (!as_read && !opt_optimize(m, &oo, &err)) {
    fprintf(stderr, "hloc: %s\n", err.msg);
    hlo_module_free(m);
    return 1;
  }
  double t_done = now_s();
  if (stats) {
    OptStats st;
    opt_stats(m, &st);
    fprintf(stderr, "%s: ", m->name);
    opt_stats_print(stderr, &st);
    if (elided.mode != HLO_ELIDED_ERROR)
      fprintf(stderr, "elided constants filled: %d (--elided-constants=%s)\n", nfilled, elided_arg);
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
            1e3 * (t_verify - t_load), 1e3 * (t_opt - t_verify), 1e3 * (t_done - t_opt),
            1e3 * t_plan);
  }

  int rc = 0;
  if (!emit && !out) {
    int ninstr = 0;
    for (int i = 0; i < m->ncomps; i++)
      ninstr += m->comps[i]->ninstrs;
    printf("%s: module %s: %d computations, %d instructions, %d parameters: verified\n", input,
           m->name, m->ncomps, ninstr, m->entry->nparams);
  } else if (emit_pb) {
    uint8_t *buf = NULL;
    size_t len = 0;
    hlo_module_fill_layouts(m); /* what XLA needs to run it */
    if (!proto_write_module(m, &buf, &len, &err) || !hlo_write_file_atomic(out, buf, len, &err)) {
      fprintf(stderr, "hloc: %s\n", err.msg);
      rc = 1;
    }
    free(buf);
  } else if (emit && (!strcmp(emit, "hlo") || !strcmp(emit, "hlo-opt"))) {
    if (!out) {
      hlo_print_module(stdout, m, NULL);
    } else {
      char *buf = NULL;
      size_t len = 0;
      FILE *f = open_memstream(&buf, &len);
      hlo_print_module(f, m, NULL);
      fclose(f);
      if (!hlo_write_file_atomic(out, buf, len, &err)) {
        fprintf(stderr, "hloc: %s\n", err.msg);
        rc = 1;
      }
      free(buf);
    }
#ifdef HLOC_HAVE_CUDA
  } else if (is_cuda) {
    /* --target=cuda: host object + header, or --emit=ptx|cubin + manifest (targets/cuda) */
    if (!out || (emit && !cuda_emit && strcmp(emit, "obj"))) {
      fprintf(stderr, "hloc: --target=cuda needs -o PATH and --emit=obj|ptx|cubin\n");
      hlo_module_free(m);
      return 1;
    }
    char *nm = name ? strdup(name) : stem_identifier(out);
    char *hdr = NULL, *man = NULL;
    CudaOpts co = {0};
    co.name = nm;
    co.out_path = out;
    co.gpu_arch = gpu_arch;
    co.opt_level = opt < 2 ? opt : 3;
    co.emit = !emit || !strcmp(emit, "obj") ? CUDA_EMIT_OBJ
              : !strcmp(emit, "ptx")        ? CUDA_EMIT_PTX
                                            : CUDA_EMIT_CUBIN;
    co.precision =
        precision && !strcmp(precision, "tf32") ? CUDA_PRECISION_TF32 : CUDA_PRECISION_HIGHEST;
    co.stats = stats ? stderr : NULL;
    char *end = NULL;
    long long mib = conv_ws ? strtoll(conv_ws, &end, 10) : 0;
    co.conv_ws_limit = (int64_t)mib << 20;
    if (precision && strcmp(precision, "tf32") && strcmp(precision, "highest")) {
      fprintf(stderr, "hloc: --precision must be highest or tf32\n");
      rc = 1;
    } else if (profile) {
      fprintf(stderr, "hloc: --profile is an option of the cpu target (time the CUDA kernels with "
                      "nsys or ncu)\n");
      rc = 1;
    } else if (conv_ws && (end == conv_ws || *end || mib < 1 || mib > (1LL << 24))) {
      fprintf(stderr, "hloc: --conv-workspace must be a size in MiB (1 to 16777216)\n");
      rc = 1;
    } else {
      if (co.emit == CUDA_EMIT_OBJ)
        co.header_path = header ? header : (hdr = replace_ext(out, ".h"));
      co.manifest_path = manifest                   ? manifest
                         : co.emit != CUDA_EMIT_OBJ ? (man = replace_ext(out, ".json"))
                                                    : NULL;
      if (!cuda_compile(m, &co, &err)) {
        fprintf(stderr, "hloc: %s\n", err.msg);
        rc = 1;
      }
    }
    free(nm);
    free(hdr);
    free(man);
#endif
  } else {
#ifdef HLOC_HAVE_CPU
    if (!out) {
      fprintf(stderr, "hloc: --emit=%s needs -o PATH\n", emit);
      hlo_module_free(m);
      return 1;
    }
    char *nm = name ? strdup(name) : stem_identifier(out);
    char *hdr = NULL;
    static CpuKnobs knobs;
    cpu_knobs_from_env(&knobs);
    CpuOpts o = {0};
    o.knobs = &knobs;
    o.name = nm;
    o.out_path = out;
    o.cpu = cpu;
    o.features = features;
    o.opt_level = opt;
    o.profile = profile;
    o.stats = stats ? stderr : NULL;
    o.direct_conv = conv_algo && !strcmp(conv_algo, "direct");
    o.emit = !emit || !strcmp(emit, "obj") ? CPU_EMIT_OBJ
             : !strcmp(emit, "asm")        ? CPU_EMIT_ASM
                                           : CPU_EMIT_LLVM;
    if (o.emit == CPU_EMIT_OBJ)
      o.header_path = header ? header : (hdr = replace_ext(out, ".h"));
    else
      o.header_path = header;
    double t_cg = now_s();
    if (!cpu_compile(m, &o, &err)) {
      fprintf(stderr, "hloc: %s\n", err.msg);
      rc = 1;
    }
    if (stats) fprintf(stderr, "time: code generation %.2f ms\n", 1e3 * (now_s() - t_cg));
    free(nm);
    free(hdr);
#else
    (void)name, (void)header, (void)cpu, (void)features, (void)opt, (void)profile;
    fprintf(stderr, "hloc: code generation is not available in this build\n");
    rc = 1;
#endif
  }
  hlo_module_free(m);
  return rc;
}
