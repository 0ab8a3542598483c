/* tests/cpu/cpu_bench.c: time a model compiled by the CPU target (a manual tool, not a test).
 *
 * Build against a generated model.h / model.o (symbol prefix "model"):
 *     cc -O2 -I<dir> tests/cpu/cpu_bench.c <dir>/model.o -lm -lpthread -o bench
 * Usage: bench [THREADS [REPS]]. Arguments are filled with small pseudo-random values
 * (integers with 0); prints the median and best wall time of REPS runs of model_run
 * (THREADS = 0) or model_run_mt with a THREADS-wide pthread parallel-for whose workers
 * persist across calls (spinning on a generation counter). */
#include "model.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct Pool {
  int threads;            /* workers besides the caller */
  atomic_long gen;        /* bumped for every parallel-for call */
  atomic_long next;       /* next chunk */
  atomic_int busy;        /* workers still in the current call */
  int64_t n;              /* chunks of the current call */
  hloc_task_fn fn;        /* its task */
  void *ctx;              /* its context */
} Pool;

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
    long g;
    while ((g = atomic_load(&p->gen)) == seen) {
    }
    seen = g;
    if (g < 0) return NULL;
    pool_drain(p);
    atomic_fetch_sub(&p->busy, 1);
  }
}

static void pool_for(void *runner, int64_t n, hloc_task_fn fn, void *ctx) {
  Pool *p = runner;
  p->n = n;
  p->fn = fn;
  p->ctx = ctx;
  atomic_store(&p->next, 0);
  atomic_store(&p->busy, p->threads);
  atomic_fetch_add(&p->gen, 1);
  pool_drain(p);
  while (atomic_load(&p->busy) > 0) {
  }
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 0, reps = argc > 2 ? atoi(argv[2]) : 10;
  if (reps < 1) reps = 1;
  const void *args[MODEL_NUM_ARGS + 1];
  void *results[MODEL_NUM_RESULTS + 1];
  unsigned x = 1;
  for (int i = 0; i < MODEL_NUM_ARGS; i++) {
    const hloc_tensor_info *t = &model_arg_info[i];
    char *d = calloc(1, t->bytes + 64);
    if (!strcmp(t->dtype, "f32"))
      for (size_t j = 0; j < t->bytes / 4; j++) x = x * 1664525u + 1013904223u, ((float *)d)[j] = (float)(x >> 9) / (1 << 23) - 1.0f;
    args[i] = d;
  }
  for (int k = 0; k < MODEL_NUM_RESULTS; k++) results[k] = calloc(1, model_result_info[k].bytes + 64);
  void *temp = aligned_alloc(64, ((size_t)MODEL_TEMP_BYTES + 127) / 64 * 64);
  Pool pool = {.threads = threads > 1 ? threads - 1 : 0};
  pthread_t tid[64];
  for (int i = 0; i < pool.threads && i < 64; i++) pthread_create(&tid[i], NULL, pool_worker, &pool);
  double *ts = malloc(sizeof(double) * (size_t)reps);
  for (int r = -1; r < reps; r++) {
    double t0 = now();
    int rc = threads > 0 ? model_run_mt(args, results, temp, pool_for, &pool) : model_run(args, results, temp);
    if (rc) return 1;
    if (r >= 0) ts[r] = now() - t0;
  }
  qsort(ts, (size_t)reps, sizeof *ts, cmp);
  printf("threads %d: median %.6f s, best %.6f s (%d runs), temp %lld bytes\n", threads, ts[reps / 2], ts[0],
         reps, (long long)MODEL_TEMP_BYTES);
  atomic_store(&pool.gen, -1);
  for (int i = 0; i < pool.threads && i < 64; i++) pthread_join(tid[i], NULL);
  return 0;
}
