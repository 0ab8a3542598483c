/* bench/cpu/bench_fill.h: the benchmark's input values, shared by the compiled-model driver
 * (bench_model.c) and the reference side (bench_ref.c) so both compute on identical inputs.
 *
 * Values depend only on the argument number, its dims and the flat element index:
 *   - argument 0, floating point: sin(i * 0.37), the input ONNX Runtime gets in
 *     ../shared/peers/ort_bench.mjs;
 *   - other floating-point arguments of rank <= 1 (biases, norm scales, running means and
 *     variances): 1 + 0.1 sin(i * 0.37 + k), positive so rsqrt(variance) stays finite;
 *   - other floating-point arguments of rank >= 2 (weights): sin(i * 0.37 + k) / sqrt(f),
 *     f = elements / largest dimension, a fan-in guess that keeps deep models finite;
 *   - integers: (7 i + k) mod 10, valid class labels and token ids; pred: that value != 0.
 * Header-only (static functions) so the driver needs nothing but libm. */
#ifndef HLOC_BENCH_FILL_H
#define HLOC_BENCH_FILL_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

/* Value of element i of argument k (rank, dims) as a double; is_float selects the rule. */
static inline double bench_fill_value(int k, int rank, const int64_t *dims, int64_t i,
                                      bool is_float) {
  if (!is_float) return (double)((7 * i + k) % 10);
  if (k == 0) return sin((double)i * 0.37);
  if (rank <= 1) return 1.0 + 0.1 * sin((double)i * 0.37 + k);
  int64_t elems = 1, big = 1;
  for (int d = 0; d < rank; d++) {
    elems *= dims[d];
    if (dims[d] > big) big = dims[d];
  }
  double fan = big > 0 ? (double)elems / (double)big : 1.0;
  return sin((double)i * 0.37 + k) / sqrt(fan > 1.0 ? fan : 1.0);
}

#endif
