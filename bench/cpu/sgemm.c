/* bench/cpu/sgemm.c: OpenBLAS SGEMM throughput, the benchmark's compute ceiling.
 *
 *   bench-sgemm [N] [RUNS]      (defaults 2048 and 5; CMake builds it as BUILD/hloc-bench-sgemm)
 *
 * Times cblas_sgemm on N x N x N row-major matrices (C = A B, 2 N^3 FLOPs per call) with
 * OpenBLAS limited to 1 and then 2 threads (openblas_set_num_threads): one warm-up call,
 * RUNS timed calls, and prints per thread count one line of key=value fields:
 * sgemm_threads, n, runs, median_s, gflops (at the median), best_gflops. OpenBLAS picks its
 * kernels itself; OPENBLAS_CORETYPE in the environment (which the machines set to pin the
 * AVX2 kernels) is left as it is and echoed as coretype, the kernel family OpenBLAS chose as
 * kernels. */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bench_time.h"

/* OpenBLAS extensions, declared here for cblas.h versions that lack them */
void openblas_set_num_threads(int n);
char *openblas_get_corename(void);

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 2048, runs = argc > 2 ? atoi(argv[2]) : 5;
  if (n < 16 || runs < 1 || runs > 1000) {
    fprintf(stderr, "usage: bench-sgemm [N >= 16] [RUNS 1..1000]\n");
    return 2;
  }
  size_t nn = (size_t)n * (size_t)n;
  float *a = aligned_alloc(64, nn * sizeof(float)), *b = aligned_alloc(64, nn * sizeof(float)),
        *c = aligned_alloc(64, nn * sizeof(float));
  if (!a || !b || !c) {
    fprintf(stderr, "bench-sgemm: out of memory\n");
    return 1;
  }
  for (size_t i = 0; i < nn; i++) {
    a[i] = (float)sin((double)i * 0.37);
    b[i] = (float)cos((double)i * 0.11);
    c[i] = 0;
  }
  const char *ct = getenv("OPENBLAS_CORETYPE");
  double *ts = malloc(sizeof(double) * (size_t)runs);
  double flops = 2.0 * n * (double)n * n;
  for (int th = 1; th <= 2; th++) {
    openblas_set_num_threads(th);
    for (int r = -1; r < runs; r++) {
      double t0 = now_s();
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
      if (r >= 0) ts[r] = now_s() - t0;
    }
    qsort(ts, (size_t)runs, sizeof *ts, cmp_double);
    printf("sgemm_threads=%d n=%d runs=%d median_s=%.6f gflops=%.1f best_gflops=%.1f "
           "coretype=%s kernels=%s\n",
           th, n, runs, ts[runs / 2], flops / ts[runs / 2] * 1e-9, flops / ts[0] * 1e-9,
           ct && *ct ? ct : "(unset)", openblas_get_corename());
  }
  free(ts);
  free(a);
  free(b);
  free(c);
  return 0;
}
