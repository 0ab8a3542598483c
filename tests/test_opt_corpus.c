/* tests/test_opt_corpus.c: the whole optimizer pipeline on the real corpus.
 *
 * End-to-end correctness: every fixture, optimized with verification after each pass, still
 * evaluates (reference interpreter, fusions included) to XLA's outputs. Also: the dumps of
 * a run parse back (the buffer assignment is dumped too), opt_optimize is fast on every bench
 * model, and the measures of docs/benchmarks.md: kernels per bench model against XLA's (never
 * more) and the scratch of the buffer plan against its peak-live bound (within 10%). */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "memplan.h"
#include "optimizer.h"
#include "proto.h"
#include "test_util.h"

static const char *fixtures[] = {"elementwise_chain",    "mlp",          "frozen_mlp", "simple_cnn",
                                 "transformer_layer",    "resnet_block", "resnet18",   "bert_base",
                                 "simple_cnn_train_step"};
static const char *bench[] = {
    "elementwise_chain", "mlp",      "simple_cnn", "transformer_layer",
    "resnet_block",      "resnet18", "bert_base",  "simple_cnn_train_step"};

static HModule *load(const char *dir, const char *model, HErr *err) {
  /* the binary proto: text dumps elide large constants (frozen_mlp) */
  char path[1024];
  snprintf(path, sizeof path, "%s/%s/%s/module.pb", HLOC_CORPUS_DIR, dir, model);
  return proto_load_file(path, err);
}

/* The whole file at path (malloc'd, NUL-terminated); *n (if not NULL) gets its length. */
static char *slurp(const char *path, size_t *n) {
  char *buf;
  size_t len;
  HErr err = {0};
  cr_assert(hlo_read_file(path, &buf, &len, &err), "%s", err.msg);
  if (n) *n = len;
  return buf;
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Compare result r of fixture `model` with XLA's outputs out*.npy (label: for messages). */
static void expect_xla_outputs(const char *model, const Literal *r, const char *label) {
  HErr err = {0};
  HArena *a = hlo_arena_new();
  char path[1024];
  double rtol = strcmp(model, "simple_cnn_train_step") ? 1e-4 : 1e-3;
  int nout = hlo_shape_is_tuple(&r->shape) ? r->shape.ntuple : 1;
  for (int k = 0; k < nout; k++) {
    snprintf(path, sizeof path, "%s/fixtures/%s/out%d.npy", HLOC_CORPUS_DIR, model, k);
    Literal *want = hlo_npy_read(a, path, &err);
    cr_assert(want, "%s", err.msg);
    const Literal *got = hlo_shape_is_tuple(&r->shape) ? r->elems[k] : r;
    HCompare cmp;
    cr_assert(hlo_literal_compare(got, want, rtol, 1e-5, &cmp, &err), "%s", err.msg);
    cr_expect(cmp.bad == 0, "%s%s out%d: %lld bad, worst [%lld] got %g want %g", model, label, k,
              (long long)cmp.bad, (long long)cmp.worst, cmp.worst_got, cmp.worst_want);
  }
  hlo_arena_free(a);
}

/* Run fixture `model` through opt_optimize (+ freezing params listed) and compare. */
static void check_fixture(const char *model, bool freeze_weights) {
  HErr err = {0};
  HModule *m = load("fixtures", model, &err);
  cr_assert(m, "%s", err.msg);
  HArena *a = hlo_arena_new();
  hlo_comp_renumber(m->entry);
  int np = m->entry->nparams;
  char path[1024];
  snprintf(path, sizeof path, "%s/fixtures/%s", HLOC_CORPUS_DIR, model);
  Literal **args = tu_read_args(a, path, np);
  int first_arg = np;
  if (freeze_weights) {
    /* freeze every parameter but the first (the data) */
    for (int i = np - 1; i >= 1; i--)
      cr_assert(opt_freeze(m, i, args[i], &err), "%s", err.msg);
    first_arg = 1;
  }
  OptOpts o = {.verify_each = true};
  cr_assert(opt_optimize(m, &o, &err), "%s: %s", model, err.msg);
  cr_assert(hlo_verify(m, &err), "%s: %s", model, err.msg);
  Literal *r = hlo_interp_run(m, a, args, freeze_weights ? 1 : first_arg, &err);
  cr_assert(r, "%s: %s", model, err.msg);
  expect_xla_outputs(model, r, freeze_weights ? " (frozen)" : "");
  OptStats s;
  opt_stats(m, &s);
  cr_expect(s.fusions > 0, "%s: nothing was fused", model);
  hlo_arena_free(a);
  hlo_module_free(m);
}

Test(opt_corpus, fixtures_match_xla_after_optimization, .timeout = 600) {
  for (size_t i = 0; i < sizeof fixtures / sizeof *fixtures; i++)
    check_fixture(fixtures[i], false);
}

Test(opt_corpus, frozen_fixtures_match_xla, .timeout = 600) {
  const char *frozen[] = {"mlp", "simple_cnn", "resnet18", "resnet_block"};
  for (size_t i = 0; i < sizeof frozen / sizeof *frozen; i++)
    check_fixture(frozen[i], true);
}

/* The driver's --freeze path: mlp's weights frozen from .npy files through
 * opt_freeze_specs, given lowest number first and partly by name (w1.1, w2.1: parameters 1
 * and 3 of the module as read), still match XLA after the pipeline with only the data
 * passed. */
Test(opt_corpus, freeze_specs_mlp_matches_xla, .timeout = 120) {
  HErr err = {0};
  HModule *m = load("fixtures", "mlp", &err);
  cr_assert(m, "%s", err.msg);
  hlo_comp_renumber(m->entry);
  int np = m->entry->nparams;
  cr_assert_gt(np, 4);
  cr_assert_str_eq(m->entry->params[1]->name, "w1.1");
  cr_assert_str_eq(m->entry->params[3]->name, "w2.1");
  char spec[16][1100];
  const char *specs[16];
  cr_assert_leq(np, 16);
  for (int i = 1; i < np; i++) {
    const char *arg = m->entry->params[i]->name;
    char num[16];
    snprintf(num, sizeof num, "%d", i);
    if (i != 1 && i != 3) arg = num;
    snprintf(spec[i - 1], sizeof spec[i - 1], "%s=%s/fixtures/mlp/in%d.npy", arg, HLOC_CORPUS_DIR,
             i);
    specs[i - 1] = spec[i - 1];
  }
  cr_assert(opt_freeze_specs(m, np - 1, specs, &err), "%s", err.msg);
  cr_assert_eq(m->entry->nparams, 1);
  OptOpts o = {.verify_each = true};
  cr_assert(opt_optimize(m, &o, &err), "%s", err.msg);
  HArena *a = hlo_arena_new();
  char path[1024];
  snprintf(path, sizeof path, "%s/fixtures/mlp/in0.npy", HLOC_CORPUS_DIR);
  Literal *x = hlo_npy_read(a, path, &err);
  cr_assert(x, "%s", err.msg);
  Literal *r = hlo_interp_run(m, a, &x, 1, &err);
  cr_assert(r, "%s", err.msg);
  expect_xla_outputs("mlp", r, " (frozen by specs)");
  hlo_arena_free(a);
  hlo_module_free(m);
}

Test(opt_corpus, dumps_parse_back) {
  char dir[] = "/tmp/hloc_opt_dump_XXXXXX";
  cr_assert(mkdtemp(dir));
  HErr err = {0};
  HModule *m = load("fixtures", "transformer_layer", &err);
  cr_assert(m, "%s", err.msg);
  OptOpts o = {.dump_dir = dir, .verify_each = true};
  cr_assert(opt_optimize(m, &o, &err), "%s", err.msg);
  DIR *d = opendir(dir);
  cr_assert(d);
  struct dirent *e;
  int nhlo = 0;
  bool dot = false, log = false, bufs = false;
  char path[2048];
  while ((e = readdir(d))) {
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    size_t len = strlen(e->d_name);
    if (len > 4 && !strcmp(e->d_name + len - 4, ".hlo")) {
      size_t n;
      char *buf = slurp(path, &n);
      HModule *p = hlo_parse_text(buf, n, path, &err);
      cr_expect(p, "%s: %s", e->d_name, err.msg);
      if (p) cr_expect(hlo_verify(p, &err), "%s: %s", e->d_name, err.msg);
      hlo_module_free(p);
      free(buf);
      nhlo++;
    } else if (len > 4 && !strcmp(e->d_name + len - 4, ".dot")) {
      char *buf = slurp(path, NULL);
      cr_expect(strstr(buf, "digraph") && strstr(buf, "kOutput") && strstr(buf, "->"));
      free(buf);
      dot = true;
    } else if (strstr(e->d_name, "fusion-decisions.txt")) {
      char *buf = slurp(path, NULL);
      cr_expect(strstr(buf, "fuse: ") && strstr(buf, "summary: "));
      free(buf);
      log = true;
    } else if (strstr(e->d_name, "buffer-assignment.txt")) {
      char *buf = slurp(path, NULL);
      cr_expect(strstr(buf, "TEMP_BYTES ") && strstr(buf, "peak-live lower bound ") &&
                    strstr(buf, "fragmentation ") && strstr(buf, " temp ") &&
                    strstr(buf, "result 0: "),
                "%s", buf);
      free(buf);
      bufs = true;
    }
    if (e->d_name[0] != '.') unlink(path);
  }
  closedir(d);
  rmdir(dir);
  cr_expect(nhlo >= 3, "only %d dumps", nhlo);
  cr_expect(dot, "no .dot file");
  cr_expect(log, "no fusion decision log");
  cr_expect(bufs, "no buffer assignment");
  hlo_module_free(m);
}

/* Bench model `model` through the default pipeline; *secs gets opt_optimize's time. */
static HModule *optimized_bench(const char *model, double *secs) {
  HErr err = {0};
  HModule *m = load("bench", model, &err);
  cr_assert(m, "%s", err.msg);
  double t0 = now();
  cr_assert(opt_optimize(m, NULL, &err), "%s: %s", model, err.msg);
  *secs = now() - t0;
  return m;
}

Test(opt_corpus, bench_compile_time) {
  for (size_t i = 0; i < sizeof bench / sizeof *bench; i++) {
    double dt;
    HModule *m = optimized_bench(bench[i], &dt);
    printf("opt_optimize %-22s %8.2f ms\n", bench[i], 1e3 * dt);
    /* a guard against super-linear blowups, not a benchmark: the compile-time figures come
     * from bench/cpu.sh; loose enough for sanitizer builds on a loaded 2-core machine */
    cr_expect(dt < 3.0, "%s: %.3f s", bench[i], dt);
    hlo_module_free(m);
  }
}

/* XLA's kernels in its optimized module: fusions, custom calls and other unfused work in the
 * entry computation (parameters, constants, tuples, get-tuple-elements, bitcasts are free). */
static int xla_kernels(const char *model) {
  char path[1024];
  snprintf(path, sizeof path, "%s/bench/%s/xla_gpu_opt.hlo", HLOC_CORPUS_DIR, model);
  char *buf = slurp(path, NULL);
  char *p = strstr(buf, "\nENTRY ");
  cr_assert(p);
  int count = 0;
  for (char *line = strchr(p + 1, '\n'); line && line[1] != '}'; line = strchr(line + 1, '\n')) {
    char *eq = strstr(line, " = ");
    char *nl = strchr(line + 1, '\n');
    if (!eq || (nl && eq > nl)) continue;
    /* the opcode follows the result shape: find "OPCODE(" after the shape */
    char *q = eq + 3;
    if (*q == '(') { /* tuple shape */
      int depth = 0;
      do {
        depth += *q == '(';
        depth -= *q == ')';
        q++;
      } while (depth && *q);
    } else {
      while (*q && *q != ' ')
        q++;
    }
    while (*q == ' ')
      q++;
    size_t len = strcspn(q, "(");
    static const char *free_ops[] = {"parameter", "constant", "tuple", "get-tuple-element",
                                     "bitcast"};
    bool is_free = false;
    for (size_t k = 0; k < sizeof free_ops / sizeof *free_ops; k++)
      is_free |= len == strlen(free_ops[k]) && !strncmp(q, free_ops[k], len);
    count += !is_free;
  }
  free(buf);
  return count;
}

/* XLA CPU's scratch size for a bench model from baselines.json (-1 when absent). */
static long long xla_cpu_temp(const char *model) {
  char path[1024];
  snprintf(path, sizeof path, "%s/baselines.json", HLOC_CORPUS_DIR);
  char *buf = slurp(path, NULL);
  char key[256];
  snprintf(key, sizeof key, "\"%s\": {", model);
  long long v = -1;
  char *p = strstr(buf, key);
  if (p) {
    char *end = strchr(p, '}');
    char *q = strstr(p, "\"xla_cpu_temp_bytes\":");
    if (q && (!end || q < end)) v = strtoll(q + strlen("\"xla_cpu_temp_bytes\":"), NULL, 10);
  }
  free(buf);
  return v;
}

/* The optimizer's measures per bench model (docs/benchmarks.md, "Optimizer: kernels and
 * memory"): kernels against XLA's GPU module, the entry's scratch (TEMP_BYTES of the buffer
 * plan the CPU target uses) against the peak-live lower bound of our own schedule and
 * against XLA CPU's scratch, and opt_optimize's time. Kernels must not exceed XLA's on any
 * model, and TEMP_BYTES must be within 10% of the peak-live bound. */
Test(opt_corpus, bench_kernels_and_memory, .timeout = 120) {
  printf("%-22s %7s %5s %14s %14s %7s %14s %9s\n", "model", "kernels", "xla", "TEMP_BYTES",
         "peak-live", "over", "xla_cpu_temp", "opt ms");
  for (size_t i = 0; i < sizeof bench / sizeof *bench; i++) {
    HErr err = {0};
    double dt;
    HModule *m = optimized_bench(bench[i], &dt);
    OptStats s;
    opt_stats(m, &s);
    int x = xla_kernels(bench[i]);
    HArena *a = hlo_arena_new();
    MemPlan plan;
    cr_assert(memplan_assign(m->entry, a, &plan, &err), "%s: %s", bench[i], err.msg);
    double over = plan.peak_live
                      ? 100.0 * (double)(plan.temp_bytes - plan.peak_live) / (double)plan.peak_live
                      : 0;
    printf("%-22s %7d %5d %14lld %14lld %6.2f%% %14lld %9.2f\n", bench[i], s.kernels, x,
           (long long)plan.temp_bytes, (long long)plan.peak_live, over, xla_cpu_temp(bench[i]),
           1e3 * dt);
    cr_expect(s.kernels <= x, "%s: %d kernels, XLA %d", bench[i], s.kernels, x);
    cr_expect(plan.temp_bytes >= plan.peak_live, "%s: the bound is not a bound", bench[i]);
    cr_expect((double)plan.temp_bytes <= 1.10 * (double)plan.peak_live,
              "%s: TEMP_BYTES %lld is more than 10%% above the peak-live bound %lld", bench[i],
              (long long)plan.temp_bytes, (long long)plan.peak_live);
    hlo_arena_free(a);
    hlo_module_free(m);
  }
}
