/* bench/cpu/bench_bf16.h: bf16 for the programs that run compiled models (the benchmark
 * driver, tests/cpu_driver.c): f32 rounded to bf16's bits, and the runtime function LLVM's x86
 * code for bf16 arithmetic calls, __truncsfbf2, for toolchains without it (objects hloc writes
 * define it too; this one serves objects that do not).
 *
 * Compiled code that computes in bf16 (the elementwise ops around a model's products) rounds
 * each f32 result to bf16 through __truncsfbf2, which libgcc has from GCC 13 on (compiler-rt
 * too); with GCC 12's, a program linking such an object would not link. The definition here is
 * weak, so a toolchain's own is used where the program is linked with one that has it. x86-64
 * returns a bf16 in the low 16 bits of xmm0, which a float's bits carry here (C compilers
 * without __bf16 can write it). Header-only (static and weak functions). */
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

__attribute__((weak)) float __truncsfbf2(float x);
__attribute__((weak)) float __truncsfbf2(float x) {
  uint32_t h = bench_f32_to_bf16(x);
  float r;
  memcpy(&r, &h, 4);
  return r;
}

#endif
