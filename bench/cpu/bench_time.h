/* bench/cpu/bench_time.h: the monotonic clock and the sort order of timings that the
 * benchmark programs share (their medians). Header-only, libc only. */
#ifndef HLOC_BENCH_TIME_H
#define HLOC_BENCH_TIME_H

#include <time.h>

/* Seconds on the monotonic clock. */
static inline double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* qsort's order of doubles, ascending. */
static inline int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

#endif
