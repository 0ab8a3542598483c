/* bench/cpu/memcpy.c: memory bandwidth, the benchmark's ceiling for memory-bound models.
 *
 *   bench-memcpy [MIB] [RUNS]   (defaults 64 and 20; CMake builds it as BUILD/hloc-bench-memcpy)
 *
 * Copies a MIB-MiB buffer with memcpy, first on one thread, then split in two halves copied
 * by two threads at once, and prints per thread count one line of key=value fields:
 * memcpy_threads, mib, runs, median_s, gbps (at the median), best_gbps. Bandwidth counts the
 * bytes read plus the bytes written (2 x MIB MiB per copy), as elementwise_chain's GB/s
 * counts its input and output. Both buffers are touched first so page faults are not timed;
 * 64 MiB is larger than the last-level caches of the machines this runs on. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_time.h"

typedef struct Half {
  char *dst;             /* destination of this thread's part */
  const char *src;       /* its source */
  size_t n;              /* its bytes */
  pthread_barrier_t *go; /* start line shared by both threads */
} Half;

static void *copy_half(void *arg) {
  Half *h = arg;
  pthread_barrier_wait(h->go);
  memcpy(h->dst, h->src, h->n);
  return NULL;
}

int main(int argc, char **argv) {
  int mib = argc > 1 ? atoi(argv[1]) : 64, runs = argc > 2 ? atoi(argv[2]) : 20;
  if (mib < 1 || runs < 1 || runs > 10000) {
    fprintf(stderr, "usage: bench-memcpy [MIB >= 1] [RUNS 1..10000]\n");
    return 2;
  }
  size_t n = (size_t)mib << 20;
  char *src = aligned_alloc(64, n), *dst = aligned_alloc(64, n);
  double *ts = malloc(sizeof(double) * (size_t)runs);
  if (!src || !dst || !ts) {
    fprintf(stderr, "bench-memcpy: out of memory\n");
    return 1;
  }
  for (size_t i = 0; i < n; i++)
    src[i] = (char)(i * 7);
  memset(dst, 1, n);
  for (int th = 1; th <= 2; th++) {
    for (int r = -1; r < runs; r++) {
      double t0, dt;
      if (th == 1) {
        t0 = now_s();
        memcpy(dst, src, n);
        dt = now_s() - t0;
      } else {
        pthread_barrier_t go;
        pthread_barrier_init(&go, NULL, 2);
        size_t h = n / 2 / 64 * 64;
        Half a = {dst, src, h, &go}, b = {dst + h, src + h, n - h, &go};
        pthread_t t;
        if (pthread_create(&t, NULL, copy_half, &b)) {
          fprintf(stderr, "bench-memcpy: cannot start a thread\n");
          return 1;
        }
        pthread_barrier_wait(&go);
        t0 = now_s();
        memcpy(a.dst, a.src, a.n);
        pthread_join(t, NULL);
        dt = now_s() - t0;
        pthread_barrier_destroy(&go);
      }
      if (r >= 0) ts[r] = dt;
    }
    qsort(ts, (size_t)runs, sizeof *ts, cmp_double);
    printf("memcpy_threads=%d mib=%d runs=%d median_s=%.6f gbps=%.1f best_gbps=%.1f\n", th, mib,
           runs, ts[runs / 2], 2.0 * (double)n / ts[runs / 2] * 1e-9,
           2.0 * (double)n / ts[0] * 1e-9);
  }
  free(ts);
  free(src);
  free(dst);
  return 0;
}
