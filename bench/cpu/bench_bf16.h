/* bench/cpu/bench_bf16.h: f32 rounded to the bits of bf16, f16 and the fp8 types for the
 * programs that fill a compiled model's low-precision arguments (the benchmark drivers of both
 * targets), and back for their checksums. Header-only (libm). */
#ifndef HLOC_BENCH_BF16_H
#define HLOC_BENCH_BF16_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* f32 -> bf16 bits: round to nearest even, NaNs made quiet (hlo_f32_to_bf16's rule). */
static inline uint16_t bench_f32_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffff) > 0x7f800000) return (uint16_t)((u >> 16) | 0x40);
  return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

/* bf16 bits -> f32 (exact: the upper half of the f32). */
static inline float bench_bf16_to_f32(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* A binary float format of at most 16 bits: E exponent and M mantissa bits, bias 2^(E-1) - 1;
 * ieee: the top exponent holds infinities and NaNs (f16, f8e5m2), else only the all-ones
 * pattern is NaN and there are no infinities (f8e4m3fn). */
typedef struct BenchMini {
  int E, M;
  bool ieee;
} BenchMini;
static const BenchMini bench_f16 = {5, 10, true}, bench_f8e4m3fn = {4, 3, false},
                       bench_f8e5m2 = {5, 2, true};

/* f32 -> f's bits: round to nearest even; past the largest finite value infinity (ieee) or
 * NaN (f8e4m3fn, as XLA's convert does). */
static inline uint16_t bench_f32_to_mini(float x, BenchMini f) {
  uint16_t sign = signbit(x) ? (uint16_t)(1u << (f.E + f.M)) : 0;
  uint16_t nan = (uint16_t)((1u << (f.E + f.M)) - 1), inf = (uint16_t)(((1u << f.E) - 1) << f.M);
  if (isnan(x)) return sign | nan;
  int bias = (1 << (f.E - 1)) - 1, top = (1 << f.E) - (f.ieee ? 2 : 1);
  double maxf = (2.0 - ldexp(1, f.ieee ? -f.M : 1 - f.M)) * ldexp(1, top - bias);
  double a = fabs((double)x);
  if (a == 0) return sign;
  int e;
  frexp(a, &e);
  e = e - 1 < 1 - bias ? 1 - bias : e - 1; /* (the subnormals' quantum below the normals) */
  double r = nearbyint(a / ldexp(1, e - f.M)) * ldexp(1, e - f.M);
  if (r > maxf) return sign | (f.ieee ? inf : nan);
  if (r == 0) return sign;
  frexp(r, &e);
  if (e - 1 < 1 - bias) return sign | (uint16_t)(r / ldexp(1, 1 - bias - f.M));
  uint32_t mant = (uint32_t)((r / ldexp(1, e - 1) - 1.0) * (double)(1u << f.M));
  return sign | (uint16_t)((uint32_t)(e - 1 + bias) << f.M) | (uint16_t)mant;
}

/* f's bits -> f32 (exact). */
static inline float bench_mini_to_f32(uint16_t b, BenchMini f) {
  int bias = (1 << (f.E - 1)) - 1;
  uint32_t e = (b >> f.M) & ((1u << f.E) - 1), m = b & ((1u << f.M) - 1);
  double v;
  if (e == (1u << f.E) - 1 && (f.ieee || m == (1u << f.M) - 1))
    v = f.ieee && !m ? INFINITY : NAN;
  else if (e == 0)
    v = ldexp((double)m, 1 - bias - f.M);
  else
    v = ldexp((double)(m | (1u << f.M)), (int)e - bias - f.M);
  return (float)((b >> (f.E + f.M)) & 1 ? -v : v);
}

#endif
