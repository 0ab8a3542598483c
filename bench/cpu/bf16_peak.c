/* bench/cpu/bf16_peak.c: the machine's bf16 multiply-add peak, the ceiling for bf16 models.
 *
 *   bench-bf16-peak [SECONDS]   (default 0.5 per measurement)
 *
 * Where the CPU has AMX-BF16 (and Linux grants the tile state): TDPBF16PS on four independent
 * accumulator tiles from operand tiles that stay in registers, the instruction's throughput
 * bound; else, where it has AVX512-BF16: VDPBF16PS on 16 independent zmm accumulators. Run on
 * one thread, then on two at once, each pinned where the caller's affinity allows. Prints per
 * thread count one line of key=value fields: bf16_threads, isa (amx, avx512bf16 or none),
 * gflops (all threads together, 2 FLOPs a multiply-add), seconds. The instructions are in
 * inline assembly (binutils 2.36 or later assembles them without -m flags); the ISA is checked
 * with CPUID before any runs. */
#define _GNU_SOURCE
#include <cpuid.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "bench_time.h"

/* CPUID leaf 7: EDX bit 22 AMX-BF16, bit 24 AMX-TILE; subleaf 1 EAX bit 5 AVX512-BF16. */
static int has_amx(void) {
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
  return (d >> 22 & 1) && (d >> 24 & 1);
}
static int has_avx512bf16(void) {
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 1, &a, &b, &c, &d)) return 0;
  return a >> 5 & 1;
}

/* 64-byte tile configuration: palette 1, tiles 0-7 of 16 rows x 64 bytes. */
static void amx_config(void) {
  _Alignas(64) unsigned char cfg[64] = {1};
  for (int t = 0; t < 8; t++) {
    cfg[16 + 2 * t] = 64;
    cfg[48 + t] = 16;
  }
  __asm__ volatile("ldtilecfg (%0)" ::"r"(cfg) : "memory");
}

/* n rounds of 16 TDPBF16PS (tmm0-3 += tmm4/5 x tmm6/7), operand tiles zeroed once. */
static void amx_loop(long n) {
  amx_config();
  __asm__ volatile("tilezero %tmm0\ntilezero %tmm1\ntilezero %tmm2\ntilezero %tmm3\n"
                   "tilezero %tmm4\ntilezero %tmm5\ntilezero %tmm6\ntilezero %tmm7\n");
  for (long i = 0; i < n; i++)
    __asm__ volatile(".rept 4\n"
                     "tdpbf16ps %tmm6, %tmm4, %tmm0\ntdpbf16ps %tmm7, %tmm4, %tmm1\n"
                     "tdpbf16ps %tmm6, %tmm5, %tmm2\ntdpbf16ps %tmm7, %tmm5, %tmm3\n"
                     ".endr\n");
  __asm__ volatile("tilerelease");
}

/* n rounds of 16 VDPBF16PS zmm0-15 += zmm16 x zmm17 (AVX-512 enabled for the registers above 15).
 */
__attribute__((target("avx512f"))) static void avx512bf16_loop(long n) {
  __asm__ volatile("vpxord %%zmm16,%%zmm16,%%zmm16\nvpxord %%zmm17,%%zmm17,%%zmm17" ::
                       : "xmm16", "xmm17");
  for (long i = 0; i < n; i++)
    __asm__ volatile("vdpbf16ps %%zmm17,%%zmm16,%%zmm0\nvdpbf16ps %%zmm17,%%zmm16,%%zmm1\n"
                     "vdpbf16ps %%zmm17,%%zmm16,%%zmm2\nvdpbf16ps %%zmm17,%%zmm16,%%zmm3\n"
                     "vdpbf16ps %%zmm17,%%zmm16,%%zmm4\nvdpbf16ps %%zmm17,%%zmm16,%%zmm5\n"
                     "vdpbf16ps %%zmm17,%%zmm16,%%zmm6\nvdpbf16ps %%zmm17,%%zmm16,%%zmm7\n"
                     "vdpbf16ps %%zmm17,%%zmm16,%%zmm8\nvdpbf16ps %%zmm17,%%zmm16,%%zmm9\n"
                     "vdpbf16ps %%zmm17,%%zmm16,%%zmm10\nvdpbf16ps %%zmm17,%%zmm16,%%zmm11\n"
                     "vdpbf16ps %%zmm17,%%zmm16,%%zmm12\nvdpbf16ps %%zmm17,%%zmm16,%%zmm13\n"
                     "vdpbf16ps %%zmm17,%%zmm16,%%zmm14\nvdpbf16ps %%zmm17,%%zmm16,%%zmm15\n" ::
                         : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8",
                           "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15");
}

typedef struct Job {
  int amx;
  long n;
  pthread_barrier_t *go;
} Job;

static void *run_job(void *arg) {
  Job *j = arg;
  pthread_barrier_wait(j->go);
  if (j->amx)
    amx_loop(j->n);
  else
    avx512bf16_loop(j->n);
  return NULL;
}

/* FLOPs a round: AMX 16 x (16 x 16 x 32) multiply-adds, AVX512-BF16 16 x 32. */
static double round_flops(int amx) { return amx ? 16.0 * 16 * 16 * 32 * 2 : 16.0 * 32 * 2; }

/* Seconds for threads x n rounds at once. */
static double timed(int amx, int threads, long n) {
  pthread_t th[2];
  Job jobs[2];
  pthread_barrier_t go;
  pthread_barrier_init(&go, NULL, (unsigned)threads + 1);
  for (int t = 0; t < threads; t++) {
    jobs[t] = (Job){amx, n, &go};
    pthread_create(&th[t], NULL, run_job, &jobs[t]);
  }
  pthread_barrier_wait(&go);
  double t0 = now_s();
  for (int t = 0; t < threads; t++)
    pthread_join(th[t], NULL);
  double s = now_s() - t0;
  pthread_barrier_destroy(&go);
  return s;
}

int main(int argc, char **argv) {
  double budget = argc > 1 ? atof(argv[1]) : 0.5;
  if (budget <= 0 || budget > 60) {
    fprintf(stderr, "usage: bench-bf16-peak [SECONDS in (0, 60]]\n");
    return 2;
  }
  /* ARCH_REQ_XCOMP_PERM (0x1023) for XFEATURE_XTILEDATA (18) */
  int amx = has_amx() && syscall(SYS_arch_prctl, 0x1023, 18) == 0;
  int avx = !amx && has_avx512bf16();
  const char *isa = amx ? "amx" : avx ? "avx512bf16" : "none";
  for (int threads = 1; threads <= 2; threads++) {
    if (!amx && !avx) {
      printf("bf16_threads=%d isa=none gflops=0 seconds=0\n", threads);
      continue;
    }
    long n = 1000;
    double s = timed(amx, threads, n);
    while (s < budget / 4 && n < (1L << 40)) {
      n *= 4;
      s = timed(amx, threads, n);
    }
    n = (long)((double)n * budget / (s > 0 ? s : 1e-9)) + 1;
    s = timed(amx, threads, n);
    printf("bf16_threads=%d isa=%s gflops=%.1f seconds=%.3f\n", threads, isa,
           round_flops(amx) * (double)n * threads / s * 1e-9, s);
  }
  return 0;
}
