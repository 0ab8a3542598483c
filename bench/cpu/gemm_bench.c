/* bench/cpu/gemm_bench.c: single-thread SGEMM of a compiled dot against OpenBLAS (a manual
 * tool, not a test).
 *
 * Built against a model compiled from "f32[N,N] dot(a, b)" (symbol prefix "model"): CMake
 * builds BUILD/hloc-bench-gemm against bench/cpu/gemm_square.hlo (N = 512) where OpenBLAS is
 * found; for another N, compile such a module and link by hand:
 *     hloc dot.hlo -o DIR/model.o --name model
 *     cc -O2 -IDIR bench/cpu/gemm_bench.c DIR/model.o -lopenblas -lm -o gemm_bench
 * Usage: hloc-bench-gemm [REPS]. Fills a and b with sin(i * 0.37), runs model_run and
 * cblas_sgemm REPS times each, checks that the results agree, and prints the best GFLOP/s. */
#include "model.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double gb_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  int reps = argc > 1 ? atoi(argv[1]) : 3;
  int64_t n = model_arg_info[0].dims[0];
  size_t bytes = (size_t)(n * n) * sizeof(float);
  float *a = aligned_alloc(64, bytes), *b = aligned_alloc(64, bytes);
  float *c = aligned_alloc(64, bytes), *r = aligned_alloc(64, bytes);
  for (int64_t i = 0; i < n * n; i++)
    a[i] = sinf((float)i * 0.37f), b[i] = sinf((float)(i + 7) * 0.37f);
  void *temp = aligned_alloc(64, ((size_t)MODEL_TEMP_BYTES + 127) / 64 * 64);
  const void *args[2] = {a, b};
  void *res[1] = {c};
  double best = 1e30, best_ref = 1e30;
  for (int i = 0; i < reps; i++) {
    double t0 = gb_now();
    model_run(args, res, temp);
    double t1 = gb_now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)n, (int)n, 1.0f, a, (int)n,
                b, (int)n, 0.0f, r, (int)n);
    double t2 = gb_now();
    if (t1 - t0 < best) best = t1 - t0;
    if (t2 - t1 < best_ref) best_ref = t2 - t1;
  }
  double maxerr = 0, scale = 0;
  for (int64_t i = 0; i < n * n; i++) {
    maxerr = fmax(maxerr, fabs((double)c[i] - (double)r[i]));
    scale = fmax(scale, fabs((double)r[i]));
  }
  double gf = 2.0 * (double)n * (double)n * (double)n * 1e-9;
  printf("n=%lld: hloc %.1f GFLOP/s, OpenBLAS %.1f GFLOP/s (%.0f%%), max |diff| %.2g of %.3g\n",
         (long long)n, gf / best, gf / best_ref, 100.0 * best_ref / best, maxerr, scale);
  return maxerr <= 1e-4 * scale ? 0 : 1;
}
