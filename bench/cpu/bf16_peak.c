/* bench/cpu/bf16_peak.c: the machine's bf16 multiply-add peak, the ceiling for bf16 models.
 *
 *   bench-bf16-peak [SECONDS] [--isa amx|avx512bf16|fma]   (default 0.5 per measurement)
 *
 * Where the CPU has AMX-BF16 (and Linux grants the tile state): TDPBF16PS on four independent
 * accumulator tiles from operand tiles that stay in registers, the instruction's throughput
 * bound; else, where it has AVX512-BF16: VDPBF16PS on 16 independent zmm accumulators. --isa
 * picks one (fma: f32 VFMADD231PS on 16 zmm accumulators, AVX-512's f32 peak, the bar the
 * bf16 paths are held to where there is no AMX). Run on
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

/* A function running n rounds of 16 INSN zmm0-15, zmm16, zmm17 on 16 independent accumulators
 * (zmm16 and zmm17 zeroed; AVX-512 enabled for the registers above 15). */
#define ZMM_LOOP(name, insn)                                                                       \
  __attribute__((target("avx512f"))) static void name(long n) {                                    \
    __asm__ volatile("vpxord %%zmm16,%%zmm16,%%zmm16\nvpxord %%zmm17,%%zmm17,%%zmm17" ::           \
                         : "xmm16", "xmm17");                                                      \
    for (long i = 0; i < n; i++)                                                                   \
      __asm__ volatile(                                                                            \
          ".irp r,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15\n" insn " %%zmm17,%%zmm16,%%zmm\\r\n"      \
          ".endr\n" ::                                                                             \
              : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9",    \
                "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15");                             \
  }
ZMM_LOOP(avx512bf16_loop, "vdpbf16ps") /* zmm += pairs of bf16 products */
ZMM_LOOP(fma_loop, "vfmadd231ps")      /* zmm += f32 products */
#undef ZMM_LOOP

enum { ISA_NONE, ISA_AMX, ISA_BF16, ISA_FMA };
static const char *const isa_names[] = {"none", "amx", "avx512bf16", "fma"};

typedef struct Job {
  int isa;
  long n;
  pthread_barrier_t *go;
} Job;

static void *run_job(void *arg) {
  Job *j = arg;
  pthread_barrier_wait(j->go);
  if (j->isa == ISA_AMX)
    amx_loop(j->n);
  else if (j->isa == ISA_BF16)
    avx512bf16_loop(j->n);
  else
    fma_loop(j->n);
  return NULL;
}

/* FLOPs a round: AMX 16 x (16 x 16 x 32) multiply-adds, AVX512-BF16 16 x 32, FMA 16 x 16. */
static double round_flops(int isa) {
  return isa == ISA_AMX ? 16.0 * 16 * 16 * 32 * 2 : isa == ISA_BF16 ? 16.0 * 32 * 2 : 16.0 * 16 * 2;
}

/* Seconds for threads x n rounds at once. */
static double timed(int isa, int threads, long n) {
  pthread_t th[2];
  Job jobs[2];
  pthread_barrier_t go;
  pthread_barrier_init(&go, NULL, (unsigned)threads + 1);
  for (int t = 0; t < threads; t++) {
    jobs[t] = (Job){isa, n, &go};
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

static int has_fma512(void) {
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
  return b >> 16 & 1;
}

int main(int argc, char **argv) {
  double budget = 0.5;
  const char *want = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--isa") && i + 1 < argc)
      want = argv[++i];
    else
      budget = atof(argv[i]);
  }
  if (budget <= 0 || budget > 60 ||
      (want && strcmp(want, "amx") && strcmp(want, "avx512bf16") && strcmp(want, "fma"))) {
    fprintf(stderr, "usage: bench-bf16-peak [SECONDS in (0, 60]] [--isa amx|avx512bf16|fma]\n");
    return 2;
  }
  /* ARCH_REQ_XCOMP_PERM (0x1023) for XFEATURE_XTILEDATA (18) */
  int amx =
      (!want || !strcmp(want, "amx")) && has_amx() && syscall(SYS_arch_prctl, 0x1023, 18) == 0;
  int avx = !amx && (!want || !strcmp(want, "avx512bf16")) && has_avx512bf16();
  int fma = want && !strcmp(want, "fma") && has_fma512();
  int isa = amx ? ISA_AMX : avx ? ISA_BF16 : fma ? ISA_FMA : ISA_NONE;
  for (int threads = 1; threads <= 2; threads++) {
    if (isa == ISA_NONE) {
      printf("bf16_threads=%d isa=none gflops=0 seconds=0\n", threads);
      continue;
    }
    long n = 1000;
    double s = timed(isa, threads, n);
    while (s < budget / 4 && n < (1L << 40)) {
      n *= 4;
      s = timed(isa, threads, n);
    }
    n = (long)((double)n * budget / (s > 0 ? s : 1e-9)) + 1;
    s = timed(isa, threads, n);
    printf("bf16_threads=%d isa=%s gflops=%.1f seconds=%.3f\n", threads, isa_names[isa],
           round_flops(isa) * (double)n * threads / s * 1e-9, s);
  }
  return 0;
}
