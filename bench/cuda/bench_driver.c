/* bench/cuda/bench_driver.c: times one model compiled with --target=cuda --name model.
 *
 *   bench_driver LABEL [ITERS [WARMUP]]
 *
 * bench/cuda.sh links it with each bench model's object; CMake, where the CUDA target is
 * built, against bench/cuda/smoke.hlo (BUILD/hloc-bench-cuda), so that every build compiles it.
 *
 * Allocates every argument in device memory and fills it with deterministic values made on
 * the host (floating point: a fixed linear congruential sequence mapped to [-1, 1), scaled
 * by 1/sqrt(minor dim) so that long products stay finite; integers: i mod 10, so that
 * indices and labels are in range for every bench model; pred: i mod 2; 16-bit and fp8
 * floats: the same values rounded to them), allocates the
 * results (poisoned with 0xff bytes) and TEMP_BYTES of scratch, then:
 *   - first call: model_cuda_run + stream synchronize, host wall clock (module load, handle
 *     creation, cuDNN algorithm search);
 *   - WARMUP more runs (default 10);
 *   - ITERS runs (default 50), each bracketed by CUDA events on the stream and by the host
 *     clock around the call plus cuStreamSynchronize; the medians of both are reported
 *     (events: device time of one run; host: what a caller waits for one synchronized run,
 *     the way baselines.json's figures are taken);
 *   - ITERS runs back to back between two events: the mean per run with launches overlapped;
 *   - checks that every result element is finite-or-written (no 0xff poison left) and
 *     prints a checksum (sum of the first result's elements as doubles, f32 only).
 * With LABEL "copy", the model is not used: it times a device-to-device cuMemcpyDtoDAsync of
 * 16M floats (64 MiB each way) the same two ways and reports GB/s counting bytes read plus
 * written. Output: one line of key=value pairs. */
#include "../cpu/bench_bf16.h"
#include "../cpu/bench_time.h"
#include "model.h"

#include <cuda.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* (milliseconds) */
static double now_ms(void) { return now_s() * 1e3; }

#define CK(x)                                                                                      \
  do {                                                                                             \
    CUresult r_ = (x);                                                                             \
    if (r_ != CUDA_SUCCESS) {                                                                      \
      const char *s_ = NULL;                                                                       \
      cuGetErrorString(r_, &s_);                                                                   \
      printf("ERROR %s cuda error %d (%s) at %s\n", label, (int)r_, s_ ? s_ : "?", #x);            \
      return 1;                                                                                    \
    }                                                                                              \
  } while (0)

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Fill host buffer h (ti's dtype) deterministically. */
static void fill(void *h, const hloc_tensor_info *ti, uint32_t seed) {
  size_t n = 1;
  for (int d = 0; d < ti->rank; d++)
    n *= (size_t)ti->dims[d];
  uint32_t x = seed * 2654435761u + 12345u;
  double scale = 1.0 / sqrt((double)(ti->rank ? ti->dims[ti->rank - 1] : 1));
  if (scale > 1) scale = 1;
  if (!strcmp(ti->dtype, "f32") || !strcmp(ti->dtype, "f64")) {
    for (size_t i = 0; i < n; i++) {
      x = x * 1664525u + 1013904223u;
      double v = ((double)(x >> 8) / 8388608.0 - 1.0) * scale;
      if (ti->dtype[1] == '3')
        ((float *)h)[i] = (float)v;
      else
        ((double *)h)[i] = v;
    }
  } else if (!strcmp(ti->dtype, "bf16") || !strcmp(ti->dtype, "f16")) {
    bool bf = ti->dtype[0] == 'b';
    for (size_t i = 0; i < n; i++) {
      x = x * 1664525u + 1013904223u;
      float v = (float)(((double)(x >> 8) / 8388608.0 - 1.0) * scale);
      ((uint16_t *)h)[i] = bf ? bench_f32_to_bf16(v) : bench_f32_to_mini(v, bench_f16);
    }
  } else if (!strcmp(ti->dtype, "f8e4m3fn") || !strcmp(ti->dtype, "f8e5m2")) {
    BenchMini f = ti->dtype[3] == '4' ? bench_f8e4m3fn : bench_f8e5m2;
    for (size_t i = 0; i < n; i++) {
      x = x * 1664525u + 1013904223u;
      float v = (float)(((double)(x >> 8) / 8388608.0 - 1.0) * scale);
      ((uint8_t *)h)[i] = (uint8_t)bench_f32_to_mini(v, f);
    }
  } else if (!strcmp(ti->dtype, "s32") || !strcmp(ti->dtype, "u32")) {
    for (size_t i = 0; i < n; i++)
      ((int32_t *)h)[i] = (int32_t)(i % 10);
  } else if (!strcmp(ti->dtype, "s64") || !strcmp(ti->dtype, "u64")) {
    for (size_t i = 0; i < n; i++)
      ((int64_t *)h)[i] = (int64_t)(i % 10);
  } else if (!strcmp(ti->dtype, "pred") || !strcmp(ti->dtype, "s8") || !strcmp(ti->dtype, "u8")) {
    for (size_t i = 0; i < n; i++)
      ((uint8_t *)h)[i] = (uint8_t)(i % 2);
  } else {
    memset(h, 0, ti->bytes);
  }
}

static int bench_copy(const char *label, CUstream s, int iters, int warmup) {
  size_t bytes = (size_t)16 << 22; /* 16M floats */
  CUdeviceptr a, b;
  CK(cuMemAlloc(&a, bytes));
  CK(cuMemAlloc(&b, bytes));
  CK(cuMemsetD32(a, 0x3f800000u, bytes / 4));
  for (int i = 0; i < warmup + 1; i++)
    CK(cuMemcpyDtoDAsync(b, a, bytes, s));
  CK(cuStreamSynchronize(s));
  CUevent e0, e1;
  CK(cuEventCreate(&e0, CU_EVENT_DEFAULT));
  CK(cuEventCreate(&e1, CU_EVENT_DEFAULT));
  double *ev = calloc((size_t)iters, sizeof *ev), *ho = calloc((size_t)iters, sizeof *ho);
  for (int i = 0; i < iters; i++) {
    double t0 = now_ms();
    CK(cuEventRecord(e0, s));
    CK(cuMemcpyDtoDAsync(b, a, bytes, s));
    CK(cuEventRecord(e1, s));
    CK(cuStreamSynchronize(s));
    ho[i] = now_ms() - t0;
    float ms = 0;
    CK(cuEventElapsedTime(&ms, e0, e1));
    ev[i] = ms;
  }
  double em = median(ev, iters), hm = median(ho, iters);
  printf("label=%s bytes=%zu event_ms=%.5f host_ms=%.5f event_GBps=%.1f host_GBps=%.1f\n", label,
         bytes, em, hm, 2.0 * (double)bytes / (em * 1e6), 2.0 * (double)bytes / (hm * 1e6));
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: bench_driver LABEL [ITERS [WARMUP]]\n");
    return 2;
  }
  const char *label = argv[1];
  int iters = argc > 2 ? atoi(argv[2]) : 50;
  int warmup = argc > 3 ? atoi(argv[3]) : 10;
  if (iters < 1) iters = 1;
  CK(cuInit(0));
  CUdevice dev;
  CUcontext ctx;
  CK(cuDeviceGet(&dev, 0));
  CK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CK(cuCtxSetCurrent(ctx));
  CUstream s;
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  if (!strcmp(label, "copy")) return bench_copy(label, s, iters, warmup);

  void *args[MODEL_NUM_ARGS + 1], *res[MODEL_NUM_RESULTS + 1];
  size_t in_bytes = 0, out_bytes = 0;
  for (int i = 0; i < MODEL_NUM_ARGS; i++) {
    const hloc_tensor_info *ti = &model_arg_info[i];
    size_t n = ti->bytes ? ti->bytes : 1;
    void *h = malloc(n);
    fill(h, ti, (uint32_t)i + 1);
    CUdeviceptr d;
    CK(cuMemAlloc(&d, n));
    CK(cuMemcpyHtoD(d, h, ti->bytes));
    free(h);
    args[i] = (void *)d;
    in_bytes += ti->bytes;
  }
  for (int k = 0; k < MODEL_NUM_RESULTS; k++) {
    CUdeviceptr d;
    CK(cuMemAlloc(&d, model_result_info[k].bytes ? model_result_info[k].bytes : 1));
    CK(cuMemsetD8(d, 0xff, model_result_info[k].bytes));
    res[k] = (void *)d;
    out_bytes += model_result_info[k].bytes;
  }
  CUdeviceptr temp = 0;
  CK(cuMemAlloc(&temp, MODEL_TEMP_BYTES ? MODEL_TEMP_BYTES : 256));
  double t0 = now_ms();
  int rc = model_cuda_run((const void *const *)args, res, (void *)temp, s);
  if (rc) {
    printf("ERROR %s model_cuda_run returned %d\n", label, rc);
    return 1;
  }
  CK(cuStreamSynchronize(s));
  double first = now_ms() - t0;
  /* every result element written (no 0xff poison byte pattern left in a whole word) */
  long long unwritten = 0;
  double checksum = 0;
  for (int k = 0; k < MODEL_NUM_RESULTS; k++) {
    const hloc_tensor_info *ti = &model_result_info[k];
    unsigned char *h = malloc(ti->bytes ? ti->bytes : 1);
    CK(cuMemcpyDtoH(h, (CUdeviceptr)res[k], ti->bytes));
    for (size_t i = 0; i + 4 <= ti->bytes; i += 4)
      if (h[i] == 0xff && h[i + 1] == 0xff && h[i + 2] == 0xff && h[i + 3] == 0xff) unwritten++;
    if (k == 0 && !strcmp(ti->dtype, "f32"))
      for (size_t i = 0; i < ti->bytes / 4; i++)
        checksum += ((float *)h)[i];
    free(h);
  }
  for (int i = 0; i < warmup; i++)
    if ((rc = model_cuda_run((const void *const *)args, res, (void *)temp, s))) {
      printf("ERROR %s model_cuda_run returned %d (warm-up)\n", label, rc);
      return 1;
    }
  CK(cuStreamSynchronize(s));
  CUevent e0, e1;
  CK(cuEventCreate(&e0, CU_EVENT_DEFAULT));
  CK(cuEventCreate(&e1, CU_EVENT_DEFAULT));
  double *ev = calloc((size_t)iters, sizeof *ev), *ho = calloc((size_t)iters, sizeof *ho);
  for (int i = 0; i < iters; i++) {
    double h0 = now_ms();
    CK(cuEventRecord(e0, s));
    rc = model_cuda_run((const void *const *)args, res, (void *)temp, s);
    CK(cuEventRecord(e1, s));
    CK(cuStreamSynchronize(s));
    ho[i] = now_ms() - h0;
    if (rc) {
      printf("ERROR %s model_cuda_run returned %d (timing)\n", label, rc);
      return 1;
    }
    float ms = 0;
    CK(cuEventElapsedTime(&ms, e0, e1));
    ev[i] = ms;
  }
  CK(cuEventRecord(e0, s));
  for (int i = 0; i < iters; i++)
    model_cuda_run((const void *const *)args, res, (void *)temp, s);
  CK(cuEventRecord(e1, s));
  CK(cuStreamSynchronize(s));
  float back = 0;
  CK(cuEventElapsedTime(&back, e0, e1));
  double em = median(ev, iters), hm = median(ho, iters);
  printf("label=%s event_ms=%.5f host_ms=%.5f b2b_ms=%.5f first_ms=%.1f in_MB=%.1f out_MB=%.1f "
         "GBps_io=%.1f temp_MB=%.1f unwritten=%lld checksum=%.6g\n",
         label, em, hm, back / iters, first, in_bytes / 1e6, out_bytes / 1e6,
         (in_bytes + out_bytes) / (em * 1e6), MODEL_TEMP_BYTES / 1e6, unwritten, checksum);
  return unwritten ? 1 : 0;
}
