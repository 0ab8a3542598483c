/* bench/cpu/bench_bf16.h: f32 rounded to bf16's bits for the programs that fill a compiled
 * model's bf16 arguments (the benchmark drivers of both targets), and back for their
 * checksums. Header-only. */
#ifndef HLOC_BENCH_BF16_H
#define HLOC_BENCH_BF16_H

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

#endif
