/* bench/cpu/bench_model.c: time one model compiled by hloc (the benchmark's driver).
 *
 * Built once per model against the generated header and object (bench/cpu.sh does this):
 *     cc -O2 -DBENCH_HEADER='"m.h"' -DBENCH_NAME=m -DBENCH_UNAME=M \
 *        bench/cpu/bench_model.c m.o -lm -lpthread -o bench_m
 * (CMake builds it against bench/cpu/smoke.hlo, as BUILD/hloc-bench-model and, with
 * -DBENCH_PROFILE, hloc-bench-model-profile, so that every build compiles it.)
 * BENCH_NAME is the --name given to hloc, BENCH_UNAME the same in upper case (the header's
 * macro prefix); -DBENCH_LABEL='"mlp"' names the model in the output. The driver needs
 * nothing but libc, libm and pthreads, so it links statically for the device bundle.
 *
 *   bench_m [--threads N] [--budget S] [--min-runs N] [--max-runs N] [--packed]
 *           [--save-inputs DIR] [--save-outputs DIR] [--expect DIR] [--lockstep]
 *
 * Arguments are filled by bench_fill.h (the values bench_ref.c gives the interpreter).
 * --threads 1 (default) times the serial entry point; N > 1 the one with an N-wide
 * parallel-for (the caller plus N-1 pthreads that persist across calls): NAME_run_packed and
 * NAME_run_packed_mt, given no packed weights (the work of NAME_run and NAME_run_mt) unless
 * --packed, which packs the weights once before the runs with NAME_pack (timed apart: pack_s;
 * as ONNX Runtime packs its constant weights once, at session creation). Method:
 * one warm-up run (page faults, caches), then timed runs with CLOCK_MONOTONIC until at least
 * --min-runs are done and --budget seconds have passed, or --max-runs are done; the median
 * and the minimum are printed. When the warm-up alone takes more than twice the budget the
 * model is too slow to repeat: its one (cold) run is the figure, flagged cold=1 (a model
 * up to that gets at least one warm timed run: a cold run also pays the page faults of its
 * first touch of the scratch memory, which an inference server pays once).
 *
 * Output: one line of key=value fields (model, threads, runs, median_s, min_s, first_s,
 * cold, temp_bytes, packed (0/1) and pack_s, and asum/nonfinite: a position-weighted sum of |x|
 * over the floating-point and s32 results and the count of non-finite ones, a checksum for runs
 * on other machines; expect/expect_bad: with --expect DIR, whether every result matches
 * DIR/out<k>.npy, f32 within 1e-4 relative, "-" without) that bench/cpu.sh parses (it
 * checks the serial run and the weights-frozen twin against the 2-thread run's results,
 * which the interpreter checked). --save-outputs writes the results as
 * DIR/out<k>.npy for bench_ref.c to compare with the interpreter; --save-inputs writes the
 * arguments as DIR/in<k>.npy for hloc-run.
 *
 * --lockstep: after the warm-up, instead of timing runs by itself the driver waits for lines
 * on stdin, each a count n, makes n runs and prints their seconds on one line (flushed), until
 * EOF; then the result line as usual (runs and median over every run made). A program that
 * times another implementation of the model drives it, alternating blocks of runs of the two,
 * so that a host whose speed drifts within seconds treats both alike
 * (bench/cpu/ort_pair.py against ONNX Runtime).
 *
 * Built with -DBENCH_PROFILE against a model compiled with hloc --profile, the timed runs go
 * through NAME_run_profile and the driver also prints to stderr each task's share of the
 * time-stamp counter ticks of those runs, its mean milliseconds per run (the share of the
 * mean run time), the GFLOP/s of its dots and convolutions at that time, and its name,
 * largest first.
 *
 * The parallel-for: workers spin briefly on a generation counter (a model issues many
 * parallel loops back to back), then sleep on a condition variable, so idle workers do not
 * steal a core from the caller's serial parts on a loaded machine. Chunks are handed out
 * through an atomic counter. */
#ifdef BENCH_HEADER
#include BENCH_HEADER
#else
#include "m.h"
#endif
#include "bench_bf16.h"
#include "bench_fill.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "bench_time.h"

#ifndef BENCH_NAME
#define BENCH_NAME m
#define BENCH_UNAME M
#endif
#define BENCH_CAT_(a, b) a##b
#define BENCH_CAT(a, b) BENCH_CAT_(a, b)
#define SYM(s) BENCH_CAT(BENCH_NAME, s)   /* m_run, m_arg_info, ... */
#define USYM(s) BENCH_CAT(BENCH_UNAME, s) /* M_NUM_ARGS, ... */
#define BENCH_STR_(x) #x
#define BENCH_STR(x) BENCH_STR_(x)
#ifndef BENCH_LABEL
#define BENCH_LABEL BENCH_STR(BENCH_NAME) /* model name printed in the result line */
#endif

#define NARGS USYM(_NUM_ARGS)
#define NRESULTS USYM(_NUM_RESULTS)
#define TEMP_BYTES USYM(_TEMP_BYTES)
#define TEMP_ALIGN USYM(_TEMP_ALIGN)

/* ------------------------------------------------------------------ parallel-for */

enum { POOL_MAX = 256, POOL_SPIN = 1 << 16 };

typedef struct Pool {
  int nworkers;            /* threads besides the caller */
  pthread_t tid[POOL_MAX]; /* the workers */
  pthread_mutex_t mu;      /* guards sleeping on / bumping gen */
  pthread_cond_t wake;     /* signalled when gen moves */
  atomic_long gen;         /* bumped once per parallel-for call; -1 asks workers to exit */
  atomic_long next;        /* next chunk of the current call */
  atomic_int busy;         /* workers that have not finished the current call */
  int64_t n;               /* chunks of the current call */
  hloc_task_fn fn;         /* its task */
  void *ctx;               /* its context */
} Pool;

static void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

static void pool_drain(Pool *p) {
  for (;;) {
    long i = atomic_fetch_add(&p->next, 1);
    if (i >= p->n) return;
    p->fn(p->ctx, i);
  }
}

static void *pool_worker(void *arg) {
  Pool *p = arg;
  long seen = 0;
  for (;;) {
    long g = atomic_load(&p->gen);
    for (int s = 0; g == seen && s < POOL_SPIN; s++) {
      cpu_relax();
      g = atomic_load(&p->gen);
    }
    if (g == seen) {
      pthread_mutex_lock(&p->mu);
      while ((g = atomic_load(&p->gen)) == seen)
        pthread_cond_wait(&p->wake, &p->mu);
      pthread_mutex_unlock(&p->mu);
    }
    if (g < 0) return NULL;
    seen = g;
    pool_drain(p);
    atomic_fetch_sub(&p->busy, 1);
  }
}

/* The hloc_parallel_for_fn handed to NAME_run_mt. */
static void pool_for(void *runner, int64_t n, hloc_task_fn fn, void *ctx) {
  Pool *p = runner;
  if (p->nworkers == 0 || n <= 1) {
    for (int64_t i = 0; i < n; i++)
      fn(ctx, i);
    return;
  }
  p->n = n;
  p->fn = fn;
  p->ctx = ctx;
  atomic_store(&p->next, 0);
  atomic_store(&p->busy, p->nworkers);
  pthread_mutex_lock(&p->mu);
  atomic_fetch_add(&p->gen, 1);
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->mu);
  pool_drain(p);
  for (long s = 0; atomic_load(&p->busy) > 0; s++) {
    if (s < POOL_SPIN)
      cpu_relax();
    else
      sched_yield();
  }
}

static bool pool_start(Pool *p, int threads) {
  memset(p, 0, sizeof *p);
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->wake, NULL);
  p->nworkers = threads > 1 ? threads - 1 : 0;
  if (p->nworkers > POOL_MAX) p->nworkers = POOL_MAX;
  for (int i = 0; i < p->nworkers; i++)
    if (pthread_create(&p->tid[i], NULL, pool_worker, p)) {
      fprintf(stderr, "bench: cannot start thread %d\n", i);
      p->nworkers = i;
      return false;
    }
  return true;
}

static void pool_stop(Pool *p) {
  pthread_mutex_lock(&p->mu);
  atomic_store(&p->gen, -1);
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->mu);
  for (int i = 0; i < p->nworkers; i++)
    pthread_join(p->tid[i], NULL);
}

/* ------------------------------------------------------------------ tensors */

/* .npy descr of an HLO dtype name (bf16 and the fp8 types as their bits, as hlo/npy.c writes
 * and reads them); NULL when NumPy has no such type. */
static const char *npy_descr(const char *dt) {
  static const char *const map[][2] = {
      {"f32", "<f4"}, {"f64", "<f8"},  {"f16", "<f2"},  {"s8", "|i1"},       {"s16", "<i2"},
      {"s32", "<i4"}, {"s64", "<i8"},  {"u8", "|u1"},   {"u16", "<u2"},      {"u32", "<u4"},
      {"u64", "<u8"}, {"pred", "|b1"}, {"bf16", "<u2"}, {"f8e4m3fn", "|u1"}, {"f8e5m2", "|u1"},
  };
  for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
    if (!strcmp(dt, map[i][0])) return map[i][1];
  return NULL;
}

/* The narrow float format of an HLO dtype name (f16, f8e4m3fn, f8e5m2), or NULL. */
static const BenchMini *mini_of(const char *dt) {
  return !strcmp(dt, "f16")        ? &bench_f16
         : !strcmp(dt, "f8e4m3fn") ? &bench_f8e4m3fn
         : !strcmp(dt, "f8e5m2")   ? &bench_f8e5m2
                                   : NULL;
}

/* Fill one argument with bench_fill.h's values; false for a dtype the driver cannot fill. */
static bool fill_arg(int k, const hloc_tensor_info *t, void *d) {
  const char *dt = t->dtype;
  bool f32 = !strcmp(dt, "f32"), f64 = !strcmp(dt, "f64"), bf16 = !strcmp(dt, "bf16");
  const BenchMini *mini = mini_of(dt);
  bool fp8 = mini && mini->E + mini->M == 7;
  size_t esz = !strcmp(dt, "pred") || !strcmp(dt, "s8") || !strcmp(dt, "u8") || fp8 ? 1
               : !strcmp(dt, "s16") || !strcmp(dt, "u16") || bf16 || mini           ? 2
               : f32 || !strcmp(dt, "s32") || !strcmp(dt, "u32")                    ? 4
               : f64 || !strcmp(dt, "s64") || !strcmp(dt, "u64")                    ? 8
                                                                                    : 0;
  if (!esz) {
    fprintf(stderr, "bench: argument %d (%s) has dtype %s, which the driver cannot fill\n", k,
            t->name, dt);
    return false;
  }
  int64_t n = (int64_t)(t->bytes / esz);
  for (int64_t i = 0; i < n; i++) {
    double v = bench_fill_value(k, t->rank, t->dims, i, f32 || f64 || bf16 || mini);
    if (f32)
      ((float *)d)[i] = (float)v;
    else if (bf16)
      ((uint16_t *)d)[i] = bench_f32_to_bf16((float)v); /* the value rounded to bf16 */
    else if (fp8)
      ((uint8_t *)d)[i] = (uint8_t)bench_f32_to_mini((float)v, *mini);
    else if (mini)
      ((uint16_t *)d)[i] = bench_f32_to_mini((float)v, *mini);
    else if (f64)
      ((double *)d)[i] = v;
    else if (!strcmp(dt, "pred"))
      ((uint8_t *)d)[i] = v != 0;
    else if (esz == 1)
      ((uint8_t *)d)[i] = (uint8_t)(int)v;
    else if (esz == 2)
      ((int16_t *)d)[i] = (int16_t)v;
    else if (esz == 4)
      ((int32_t *)d)[i] = (int32_t)v;
    else
      ((int64_t *)d)[i] = (int64_t)v;
  }
  return true;
}

/* Write a tensor as .npy v1.0 (header padded to 64 bytes). */
static bool npy_save(const char *dir, const char *stem, int k, const hloc_tensor_info *t,
                     const void *d) {
  const char *descr = npy_descr(t->dtype);
  if (!descr) {
    fprintf(stderr, "bench: %s%d has dtype %s, which .npy cannot hold\n", stem, k, t->dtype);
    return false;
  }
  char shape[512] = "(";
  size_t o = 1;
  for (int i = 0; i < t->rank; i++)
    o += (size_t)snprintf(shape + o, sizeof shape - o, "%lld%s", (long long)t->dims[i],
                          t->rank == 1      ? ","
                          : i + 1 < t->rank ? ", "
                                            : "");
  snprintf(shape + o, sizeof shape - o, ")");
  char hdr[640];
  int h = snprintf(hdr, sizeof hdr, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr,
                   shape);
  while ((10 + h + 1) % 64)
    hdr[h++] = ' ';
  hdr[h++] = '\n';
  char path[4096];
  snprintf(path, sizeof path, "%s/%s%d.npy", dir, stem, k);
  FILE *f = fopen(path, "wb");
  if (!f) {
    fprintf(stderr, "bench: cannot write %s: %s\n", path, strerror(errno));
    return false;
  }
  unsigned char pre[10] = {
      0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(h & 0xff), (unsigned char)(h >> 8)};
  bool ok = fwrite(pre, 1, 10, f) == 10 && fwrite(hdr, 1, (size_t)h, f) == (size_t)h &&
            fwrite(d, 1, t->bytes, f) == t->bytes;
  if (fclose(f) || !ok) {
    fprintf(stderr, "bench: error writing %s\n", path);
    return false;
  }
  return true;
}

/* Compare result k with DIR/out<k>.npy (what --save-outputs wrote, e.g. from a run on
 * another thread count): f32 elements within 1e-4 relative (1e-6 absolute), other dtypes
 * byte for byte. Adds the elements outside that to *bad; false when the file is missing or
 * does not match the tensor's size. */
static bool npy_expect(const char *dir, int k, const hloc_tensor_info *t, const void *d,
                       long long *bad) {
  char path[4096];
  snprintf(path, sizeof path, "%s/out%d.npy", dir, k);
  FILE *f = fopen(path, "rb");
  if (!f) return false;
  unsigned char pre[10];
  bool ok = fread(pre, 1, 10, f) == 10 && !memcmp(pre, "\x93NUMPY", 6) && pre[6] == 1 &&
            fseek(f, 10 + (long)(pre[8] | pre[9] << 8), SEEK_SET) == 0;
  unsigned char *e = ok ? malloc(t->bytes + 1) : NULL;
  ok = ok && e && fread(e, 1, t->bytes + 1, f) == t->bytes;
  fclose(f);
  if (ok && !strcmp(t->dtype, "f32")) {
    const float *a = d, *b = (const float *)e;
    for (size_t i = 0; i < t->bytes / 4; i++) {
      double x = a[i], y = b[i], m = fabs(x) > fabs(y) ? fabs(x) : fabs(y);
      *bad += !(fabs(x - y) <= 1e-4 * m + 1e-6) && !(x != x && y != y);
    }
  } else if (ok) {
    *bad += memcmp(d, e, t->bytes) != 0;
  }
  free(e);
  return ok;
}

/* Position-weighted sum of |x| (weight 1 + i mod 7) over the floating-point and s32 results and
 * the count of non-finite elements (16-bit and fp8 ones widened): a checksum that run.sh compares
 * across machines (summation order differs with the vector width, so it is compared with a relative
 * tolerance), and dnnl_pair.sh with oneDNN's result of the same product (dnnl_gemm.c's). */
static double result_asum(void *const results[], long long *nonfinite) {
  double s = 0;
  *nonfinite = 0;
  for (int k = 0; k < NRESULTS; k++) {
    const hloc_tensor_info *t = &SYM(_result_info)[k];
    bool f32 = !strcmp(t->dtype, "f32"), f64 = !strcmp(t->dtype, "f64");
    bool bf16 = !strcmp(t->dtype, "bf16"), s32 = !strcmp(t->dtype, "s32");
    const BenchMini *mini = mini_of(t->dtype);
    bool fp8 = mini && mini->E + mini->M == 7;
    if (!f32 && !f64 && !bf16 && !mini && !s32) continue;
    size_t n = t->bytes / (f32 || s32 ? 4 : f64 ? 8 : fp8 ? 1 : 2);
    for (size_t i = 0; i < n; i++) {
      double v = s32    ? ((const int32_t *)results[k])[i]
                 : f32  ? ((const float *)results[k])[i]
                 : f64  ? ((const double *)results[k])[i]
                 : bf16 ? bench_bf16_to_f32(((const uint16_t *)results[k])[i])
                 : fp8  ? bench_mini_to_f32(((const uint8_t *)results[k])[i], *mini)
                        : bench_mini_to_f32(((const uint16_t *)results[k])[i], *mini);
      if (isfinite(v))
        s += fabs(v) * (double)(1 + i % 7);
      else
        ++*nonfinite;
    }
  }
  return s;
}

/* ------------------------------------------------------------------ timing */

static void *alloc64(size_t n) {
  void *p = aligned_alloc(64, (n + 63) / 64 * 64 + 64);
  if (!p) {
    fprintf(stderr, "bench: out of memory (%zu bytes)\n", n);
    exit(1);
  }
  return p;
}

#ifdef BENCH_PROFILE
static const uint64_t *prof_ticks;
static int cmp_task(const void *a, const void *b) {
  uint64_t x = prof_ticks[*(const int *)a], y = prof_ticks[*(const int *)b];
  return x < y ? 1 : x > y ? -1 : *(const int *)a - *(const int *)b;
}

/* Each task's share of the ticks, and of the mean run time mean_s, largest first. */
static void print_profile(const uint64_t *ticks, double mean_s) {
  int n = USYM(_NUM_TASKS), order[USYM(_NUM_TASKS) + 1];
  uint64_t total = 0;
  for (int t = 0; t < n; t++)
    order[t] = t, total += ticks[t];
  prof_ticks = ticks;
  qsort(order, (size_t)n, sizeof *order, cmp_task);
  fprintf(stderr, "profile: %d tasks, mean run %.3f ms\n  share     ms/run   GFLOP/s  task\n", n,
          1e3 * mean_s);
  for (int i = 0; i < n && total; i++) {
    int t = order[i];
    double share = (double)ticks[t] / (double)total, s = mean_s * share;
    if (ticks[t] == 0) break;
    char rate[32] = "";
    if (SYM(_task_flops)[t] > 0 && s > 0)
      snprintf(rate, sizeof rate, "%.1f", SYM(_task_flops)[t] / s * 1e-9);
    fprintf(stderr, "  %5.1f%%  %9.3f  %8s  %3d %s\n", 100 * share, 1e3 * s, rate, t,
            SYM(_task_names)[t]);
  }
}
#endif

static double arg_double(const char *flag, const char *v) {
  char *end;
  double x = strtod(v, &end);
  if (*end || x < 0) {
    fprintf(stderr, "bench: bad value '%s' for %s\n", v, flag);
    exit(2);
  }
  return x;
}

int main(int argc, char **argv) {
  int threads = 1, min_runs = 3, max_runs = 200;
  double budget = 10;
  const char *save_in = NULL, *save_out = NULL, *expect = NULL;
  bool use_packed = false, lockstep = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      printf("usage: %s [--threads N] [--budget S] [--min-runs N] [--max-runs N] [--packed]\n"
             "          [--save-inputs DIR] [--save-outputs DIR] [--expect DIR] [--lockstep]\n",
             argv[0]);
      return 0;
    }
    if (!strcmp(a, "--packed")) {
      use_packed = true;
      continue;
    }
    if (!strcmp(a, "--lockstep")) {
      lockstep = true;
      continue;
    }
    if (!v) {
      fprintf(stderr, "bench: unknown or incomplete option '%s'\n", a);
      return 2;
    }
    if (!strcmp(a, "--threads"))
      threads = (int)arg_double(a, v);
    else if (!strcmp(a, "--budget"))
      budget = arg_double(a, v);
    else if (!strcmp(a, "--min-runs"))
      min_runs = (int)arg_double(a, v);
    else if (!strcmp(a, "--max-runs"))
      max_runs = (int)arg_double(a, v);
    else if (!strcmp(a, "--save-inputs"))
      save_in = v;
    else if (!strcmp(a, "--save-outputs"))
      save_out = v;
    else if (!strcmp(a, "--expect"))
      expect = v;
    else {
      fprintf(stderr, "bench: unknown option '%s'\n", a);
      return 2;
    }
    i++;
  }
  if (threads < 1) threads = 1;
  if (max_runs < 1) max_runs = 1;
  if (min_runs > max_runs) min_runs = max_runs;

  const void *args[NARGS + 1];
  void *results[NRESULTS + 1];
  for (int k = 0; k < NARGS; k++) {
    void *d = alloc64(SYM(_arg_info)[k].bytes);
    if (!fill_arg(k, &SYM(_arg_info)[k], d)) return 1;
    args[k] = d;
  }
  for (int k = 0; k < NRESULTS; k++) {
    results[k] = alloc64(SYM(_result_info)[k].bytes);
    memset(results[k], 0, SYM(_result_info)[k].bytes);
  }
  void *temp = TEMP_BYTES > 0 ? aligned_alloc(TEMP_ALIGN > 64 ? TEMP_ALIGN : 64,
                                              ((size_t)TEMP_BYTES + 127) / 64 * 64)
                              : NULL;
  if (TEMP_BYTES > 0 && !temp) {
    fprintf(stderr, "bench: cannot allocate %lld bytes of scratch\n", (long long)TEMP_BYTES);
    return 1;
  }
  if (save_in) {
    mkdir(save_in, 0777);
    for (int k = 0; k < NARGS; k++)
      if (!npy_save(save_in, "in", k, &SYM(_arg_info)[k], args[k])) return 1;
  }

  void *packed = NULL;
  double pack_s = 0;
  if (use_packed) {
    packed = alloc64(USYM(_PACKED_BYTES) > 0 ? (size_t)USYM(_PACKED_BYTES) : 64);
    double t0 = now_s();
    int rc = SYM(_pack)(args, packed);
    pack_s = now_s() - t0;
    if (rc) {
      fprintf(stderr, "bench: %s_pack returned %d\n", BENCH_STR(BENCH_NAME), rc);
      return 1;
    }
  }
  Pool *pool = calloc(1, sizeof *pool);
  if (threads > 1 && !pool_start(pool, threads)) return 1;
  int cap = lockstep ? 1024 : max_runs;
  double *ts = malloc(sizeof(double) * (size_t)cap);
  int runs = 0, cold = 0;
  double first = 0, spent = 0;
#ifdef BENCH_PROFILE
  static uint64_t ticks[USYM(_NUM_TASKS) + 1];
#endif
  int asked = 0, block = 0; /* lockstep: runs asked for by the last line, made of them */
  if (lockstep) max_runs = 1 << 30;
  for (int r = -1; r < max_runs; r++) {
    if (lockstep && r >= 0 && block == asked) {
      if (asked) printf("\n");
      fflush(stdout);
      char line[64];
      asked = block = 0;
      while (asked <= 0 && fgets(line, sizeof line, stdin))
        asked = atoi(line);
      if (asked < 0) asked = 0;
      if (!asked) break;
      if (runs + asked > cap) {
        cap = 2 * (runs + asked);
        double *grown = realloc(ts, sizeof(double) * (size_t)cap);
        if (!grown) return 1;
        ts = grown;
      }
    }
    double t0 = now_s();
#ifdef BENCH_PROFILE
    int rc = SYM(_run_profile)(args, results, temp, packed, threads > 1 ? pool_for : NULL, pool,
                               r < 0 ? NULL : ticks);
#else
    /* packed == NULL: the same work as NAME_run / NAME_run_mt */
    int rc = threads > 1 ? SYM(_run_packed_mt)(args, results, temp, packed, pool_for, pool)
                         : SYM(_run_packed)(args, results, temp, packed);
#endif
    double dt = now_s() - t0;
    if (rc) {
      fprintf(stderr, "bench: %s_run returned %d\n", BENCH_STR(BENCH_NAME), rc);
      return 1;
    }
    if (r < 0) {
      first = dt;
      if (!lockstep && dt > 2 * budget) { /* too slow to repeat: the cold run it is */
        ts[runs++] = dt;
        cold = 1;
        break;
      }
      continue;
    }
    ts[runs++] = dt;
    spent += dt;
    if (lockstep) {
      printf("%s%.9f", block++ ? " " : "", dt);
      continue;
    }
    if (runs >= min_runs && spent >= budget) break;
  }
  if (lockstep && !runs) {
    fprintf(stderr, "bench: --lockstep was asked for no runs\n");
    return 1;
  }
  if (threads > 1) pool_stop(pool);
  qsort(ts, (size_t)runs, sizeof *ts, cmp_double);
  double median = runs % 2 ? ts[runs / 2] : 0.5 * (ts[runs / 2 - 1] + ts[runs / 2]);
  long long nonfinite, bad = 0;
  double asum = result_asum(results, &nonfinite);
  const char *expected = "-";
  if (expect) {
    bool found = true;
    for (int k = 0; k < NRESULTS; k++)
      found &= npy_expect(expect, k, &SYM(_result_info)[k], results[k], &bad);
    expected = !found ? "missing" : bad ? "FAIL" : "ok";
  }
  printf(
      "model=%s threads=%d runs=%d median_s=%.9f min_s=%.9f first_s=%.9f cold=%d "
      "temp_bytes=%lld packed=%d pack_s=%.9f asum=%.9g nonfinite=%lld expect=%s expect_bad=%lld\n",
      BENCH_LABEL, threads, runs, median, ts[0], first, cold, (long long)TEMP_BYTES, packed != NULL,
      pack_s, asum, nonfinite, expected, bad);
#ifdef BENCH_PROFILE
  if (!cold) print_profile(ticks, spent / runs);
#endif
  if (save_out) {
    mkdir(save_out, 0777);
    for (int k = 0; k < NRESULTS; k++)
      if (!npy_save(save_out, "out", k, &SYM(_result_info)[k], results[k])) return 1;
  }
  return 0;
}
