/* tests/cuda/cuda_driver.c: runs one model compiled with --target=cuda --name model on the
 * GPU and checks it against XLA's outputs.
 *
 *   cuda_driver DIR [RTOL [ITERS]]
 *
 * Reads DIR/in<k>.npy (argument k), copies the arguments to device memory, runs
 * model_cuda_run() once on a fresh stream (this first call also loads the kernels), copies
 * the results back and compares result k with DIR/out<k>.npy: every element must satisfy
 * |got - want| <= RTOL * |want| + RTOL / 10 (default RTOL 1e-4; a bf16 or f16 result: within
 * 3e-2 of the reference's largest magnitude, and its .npy files may hold the 16-bit patterns
 * as '<u2'). Then times ITERS more runs
 * (default 20): GPU time between CUDA events around the runs and host wall-clock time of
 * the runs plus the final synchronization, both per run. Then checks the results of the calls a
 * CUDA graph replays: one more call, two with new result buffers (the second captured), then
 * the two sets of buffers alternating. Prints
 * one line: PASS|FAIL <dir> results=<n> max_rel=<x> bad=<n> gpu_ms=<t> wall_ms=<t> first_ms=<t> and
 * exits 0 on PASS. With HLOC_SAVE_RESULTS=FOLDER the results are also written there as got<k>.npy
 * (to look at a failure element by element). Linked with the model object, hloc's hlo library (npy
 * reading, comparison), -lcuda and -lcublas. */
#include "hlo.h"
#include "model.h"

#include <cuda.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

#define CK(x)                                                                                      \
  do {                                                                                             \
    CUresult r_ = (x);                                                                             \
    if (r_ != CUDA_SUCCESS) {                                                                      \
      const char *s_ = NULL;                                                                       \
      cuGetErrorString(r_, &s_);                                                                   \
      printf("FAIL %s cuda error %d (%s) at %s\n", dir, (int)r_, s_ ? s_ : "?", #x);               \
      return 1;                                                                                    \
    }                                                                                              \
  } while (0)

/* Results res against DIR/out<k>.npy: the largest relative error into *max_rel, the elements
 * outside the bar added to *bad; 1 (and a FAIL line naming the call) where a result cannot be
 * read or compared. */
static int compare(const char *dir, HArena *a, void *const *res, double rtol, const char *call,
                   double *max_rel, long long *bad) {
  HErr err = {0};
  for (int k = 0; k < MODEL_NUM_RESULTS; k++) {
    const hloc_tensor_info *ti = &model_result_info[k];
    Shape sh =
        hlo_shape_array(hlo_dtype_from_name(ti->dtype, strlen(ti->dtype)), ti->rank, ti->dims);
    Literal *got = hlo_literal_new(a, &sh);
    CK(cuMemcpyDtoH(got->data, (CUdeviceptr)res[k], ti->bytes));
    char p[4096];
    const char *save = getenv("HLOC_SAVE_RESULTS"); /* a folder: results kept as got<k>.npy */
    if (save) {
      snprintf(p, sizeof p, "%s/got%d.npy", save, k);
      if (!hlo_npy_write(p, got, &err)) fprintf(stderr, "%s\n", err.msg);
    }
    snprintf(p, sizeof p, "%s/out%d.npy", dir, k);
    Literal *want = hlo_npy_read(a, p, &err);
    double rt = rtol, at = rtol / 10;
    if (want && hlo_literal_bits_as(want, sh.dt) && (sh.dt == DT_BF16 || sh.dt == DT_F16))
      rt = 0, at = HLO_LOWP_TOL * hlo_literal_max_abs(want);
    HCompare c;
    if (!want || !hlo_literal_compare(got, want, rt, at, &c, &err)) {
      printf("FAIL %s result %d%s: %s\n", dir, k, call, err.msg);
      return 1;
    }
    if (c.max_rel > *max_rel) *max_rel = c.max_rel;
    if (c.bad) {
      fprintf(stderr, "%s result %d%s: %lld elements off; worst [%lld] got %g want %g\n", dir, k,
              call, (long long)c.bad, (long long)c.worst, c.worst_got, c.worst_want);
    }
    *bad += c.bad;
  }
  return 0;
}

/* Results set to NaN garbage (what a call does not write shows). */
static int garbage(const char *dir, void *const *res) {
  for (int k = 0; k < MODEL_NUM_RESULTS; k++)
    CK(cuMemsetD8((CUdeviceptr)res[k], 0xff, model_result_info[k].bytes));
  return 0;
}

/* The calls a CUDA graph replays (cuda_graph.c), checked like the first: one more with the
 * timed calls' pointers (a replay), then with new result buffers a direct call and one that
 * captures them again (the instance updated), then the two buffer sets alternating. */
static int graph_calls(const char *dir, HArena *a, void **args, void **res, void *temp, CUstream s,
                       double rtol, double *max_rel, long long *bad) {
  void *res2[MODEL_NUM_RESULTS + 1];
  for (int k = 0; k < MODEL_NUM_RESULTS; k++) {
    CUdeviceptr d;
    CK(cuMemAlloc(&d, model_result_info[k].bytes ? model_result_info[k].bytes : 1));
    res2[k] = (void *)d;
  }
  /* the buffers of each call: replay, direct, capture, then alternating (direct, replay) */
  static const int use2[5] = {0, 1, 1, 0, 1};
  static const char *const what[5] = {" (replayed)", "", " (a new graph)", " (alternating)",
                                      " (replayed after alternating)"};
  for (int call = 0; call < 5; call++) {
    void **r = use2[call] ? res2 : res;
    if (call != 1 && garbage(dir, r)) return 1;
    int rc = model_cuda_run((const void *const *)args, r, temp, s);
    if (rc) {
      printf("FAIL %s model_cuda_run returned %d (graph call %d)\n", dir, rc, call);
      return 1;
    }
    CK(cuStreamSynchronize(s));
    if (call != 1 && compare(dir, a, r, rtol, what[call], max_rel, bad)) return 1;
  }
  for (int k = 0; k < MODEL_NUM_RESULTS; k++)
    CK(cuMemFree((CUdeviceptr)res2[k]));
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: cuda_driver DIR [RTOL [ITERS]]\n");
    return 2;
  }
  const char *dir = argv[1];
  double rtol = argc > 2 ? atof(argv[2]) : 1e-4;
  int iters = argc > 3 ? atoi(argv[3]) : 20;
  CK(cuInit(0));
  CUdevice dev;
  CUcontext ctx;
  CK(cuDeviceGet(&dev, 0));
  CK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CK(cuCtxSetCurrent(ctx));
  CUstream s;
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  HArena *a = hlo_arena_new();
  HErr err = {0};
  void *args[MODEL_NUM_ARGS + 1], *res[MODEL_NUM_RESULTS + 1];
  for (int i = 0; i < MODEL_NUM_ARGS; i++) {
    char p[4096];
    snprintf(p, sizeof p, "%s/in%d.npy", dir, i);
    Literal *l = hlo_npy_read(a, p, &err);
    if (l)
      hlo_literal_bits_as(
          l, hlo_dtype_from_name(model_arg_info[i].dtype, strlen(model_arg_info[i].dtype)));
    if (!l || hlo_shape_bytes(&l->shape) != model_arg_info[i].bytes) {
      printf("FAIL %s argument %d: %s\n", dir, i, l ? "size mismatch" : err.msg);
      return 1;
    }
    CUdeviceptr d;
    CK(cuMemAlloc(&d, model_arg_info[i].bytes ? model_arg_info[i].bytes : 1));
    CK(cuMemcpyHtoD(d, l->data, model_arg_info[i].bytes));
    args[i] = (void *)d;
  }
  for (int k = 0; k < MODEL_NUM_RESULTS; k++) {
    CUdeviceptr d;
    CK(cuMemAlloc(&d, model_result_info[k].bytes ? model_result_info[k].bytes : 1));
    CK(cuMemsetD8(d, 0xff, model_result_info[k].bytes)); /* NaN garbage: unwritten shows */
    res[k] = (void *)d;
  }
  CUdeviceptr temp = 0;
  CK(cuMemAlloc(&temp, MODEL_TEMP_BYTES ? MODEL_TEMP_BYTES : 256));
  double t0 = now_ms();
  int rc = model_cuda_run((const void *const *)args, res, (void *)temp, s);
  if (rc) {
    printf("FAIL %s model_cuda_run returned %d\n", dir, rc);
    return 1;
  }
  CK(cuStreamSynchronize(s));
  double first = now_ms() - t0;
  double max_rel = 0;
  long long bad = 0;
  if (compare(dir, a, res, rtol, "", &max_rel, &bad)) return 1;
  CUevent e0, e1;
  CK(cuEventCreate(&e0, CU_EVENT_DEFAULT));
  CK(cuEventCreate(&e1, CU_EVENT_DEFAULT));
  CK(cuEventRecord(e0, s));
  double w0 = now_ms();
  for (int i = 0; i < iters; i++)
    if ((rc = model_cuda_run((const void *const *)args, res, (void *)temp, s))) {
      printf("FAIL %s model_cuda_run returned %d (timing)\n", dir, rc);
      return 1;
    }
  CK(cuEventRecord(e1, s));
  CK(cuEventSynchronize(e1));
  double wall = (now_ms() - w0) / (iters ? iters : 1);
  float gpu = 0;
  CK(cuEventElapsedTime(&gpu, e0, e1));
  if (graph_calls(dir, a, args, res, (void *)temp, s, rtol, &max_rel, &bad)) return 1;
  printf("%s %s results=%d max_rel=%.3g bad=%lld gpu_ms=%.4f wall_ms=%.4f first_ms=%.1f\n",
         bad ? "FAIL" : "PASS", dir, MODEL_NUM_RESULTS, max_rel, bad, gpu / (iters ? iters : 1),
         wall, first);
  hlo_arena_free(a);
  return bad ? 1 : 0;
}
