/* tests/cpu_driver.c: a user program for a model compiled by the CPU target (tests only).
 *
 * Built by the CPU target's tests (tests/test_cpu_*.c, through cpu/cpu_test_util.h) with the
 * system C compiler against a generated header and object whose symbol prefix is "model":
 *     cc -O1 -I<dir> cpu_driver.c model.o -lm -lpthread
 * Usage: driver DIR THREADS RTOL
 * Reads DIR/in<k>.npy for every argument (checking dtype and shape against model_arg_info),
 * runs model_run (THREADS = 0) or model_run_mt with a pthread parallel-for of THREADS
 * threads, and compares result k with DIR/out<k>.npy: |got - want| <= RTOL * (|want| + s),
 * where s is the largest magnitude in out<k> (so values near zero are judged against the
 * tensor's scale; a complex result part by part, real and imaginary in turn). Prints the
 * worst error of each result; exits 0 when all are within tolerance, 1 on a mismatch, 2 on a
 * usage or file error. Scratch and results are filled with NaN bytes first, so reading
 * unwritten memory shows up as a mismatch, and each ends right before an inaccessible page,
 * so an access past its end kills the driver. Then the same run through the packed weights:
 * model_run_packed (or _mt) without packed weights, then after model_pack, must give the
 * same bytes as the run before; with the packed weights overwritten by NaN bytes (when there
 * are any) the results must change (they are read); a packed pointer not 64-byte aligned is
 * refused. Only the header is used: the point is to check the generated interface like a
 * user would. */
#define _DEFAULT_SOURCE /* mmap, MAP_ANONYMOUS under -std=c11 */
#include "model.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* n bytes filled with NaN bytes, aligned to align, ending right before a page the process may
 * not touch: a write or read past the end of a result or of the scratch faults (the driver
 * dies) instead of passing unseen. */
static void *guarded(size_t n, size_t align) {
  size_t pg = (size_t)sysconf(_SC_PAGESIZE);
  size_t used = (n + align - 1) / align * align;
  size_t span = (used + pg - 1) / pg * pg + pg;
  char *base = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) return NULL;
  if (mprotect(base + span - pg, pg, PROT_NONE) != 0) return NULL;
  char *p = base + span - pg - used; /* page-aligned end, align-aligned start */
  memset(p, 0xff, used);
  return p;
}

typedef struct Npy {
  char descr[16]; /* '<f4' ... */
  int rank;       /* dimensions */
  int64_t dims[8];
  size_t bytes; /* data size */
  void *data;   /* malloc'd */
} Npy;

static int npy_read(const char *path, Npy *a) {
  FILE *f = fopen(path, "rb");
  if (!f) return 0;
  unsigned char pre[10];
  if (fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6) != 0) {
    fclose(f);
    return 0;
  }
  size_t hlen;
  if (pre[6] == 1) {
    hlen = (size_t)pre[8] | (size_t)pre[9] << 8;
  } else {
    unsigned char ex[2];
    if (fread(ex, 1, 2, f) != 2) {
      fclose(f);
      return 0;
    }
    hlen = (size_t)pre[8] | (size_t)pre[9] << 8 | (size_t)ex[0] << 16 | (size_t)ex[1] << 24;
  }
  char *h = calloc(1, hlen + 1);
  if (fread(h, 1, hlen, f) != hlen) {
    fclose(f);
    free(h);
    return 0;
  }
  memset(a, 0, sizeof *a);
  char *d = strstr(h, "'descr':");
  if (d) sscanf(d + 8, " '%15[^']'", a->descr);
  char *s = strstr(h, "'shape':");
  char *p = s ? strchr(s, '(') : NULL;
  a->rank = 0;
  while (p && *p && *p != ')') {
    p++;
    while (*p == ' ' || *p == ',')
      p++;
    if (*p == ')') break;
    a->dims[a->rank++] = strtoll(p, &p, 10);
  }
  free(h);
  size_t esz = (size_t)atoi(a->descr + 2), n = 1;
  if (a->descr[1] == 'b' && a->descr[2] == '1') esz = 1;
  for (int i = 0; i < a->rank; i++)
    n *= (size_t)a->dims[i];
  a->bytes = n * esz;
  a->data = malloc(a->bytes ? a->bytes : 1);
  size_t got = fread(a->data, 1, a->bytes, f);
  fclose(f);
  return got == a->bytes;
}

/* numpy descr of an HLO dtype */
static const char *npy_descr(const char *dt) {
  static const char *map[][2] = {
      {"f32", "<f4"}, {"f64", "<f8"},   {"s32", "<i4"},  {"s64", "<i8"},      {"u32", "<u4"},
      {"u8", "|u1"},  {"s8", "|i1"},    {"pred", "|b1"}, {"f16", "<f2"},      {"s16", "<i2"},
      {"u16", "<u2"}, {"u64", "<u8"},   {"bf16", "<u2"}, {"f8e4m3fn", "|u1"}, {"f8e5m2", "|u1"},
      {"c64", "<c8"}, {"c128", "<c16"}, {"s4", "|i1"},   {"u4", "|u1"}};
  /* (NumPy has no bf16 or fp8: their bits, as XLA's outputs hold them; s4 and u4 are a byte
     each holding the value) */
  for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
    if (strcmp(map[i][0], dt) == 0) return map[i][1];
  return "?";
}

/* bytes of an element of an HLO dtype, from its numpy descr ("<c16": 16) */
static size_t dt_size(const char *dt) {
  const char *d = npy_descr(dt);
  return d[0] == '?' ? 1 : (size_t)atoi(d + 2);
}

/* An f16's or bf16's bits as a double. */
static double half_bits(uint16_t h, int bf) {
  if (bf) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
  }
  int e = (h >> 10) & 31, m = h & 1023;
  double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m + 1024, e - 25);
  return h & 0x8000 ? -v : v;
}

/* An fp8's bits as a double: f8e5m2 is the upper byte of an f16; f8e4m3fn has 4 exponent bits
 * (bias 7), no infinities, NaN at all bits of exponent and mantissa set. */
static double fp8_bits(uint8_t b, int e5) {
  if (e5) return half_bits((uint16_t)(b << 8), 0);
  int e = (b >> 3) & 15, m = b & 7;
  double v = e == 15 && m == 7 ? NAN : e == 0 ? ldexp(m, -9) : ldexp(m + 8, e - 10);
  return b & 0x80 ? -v : v;
}

/* Element i of an array of dtype dt as a double (of a complex array its parts in turn). */
static double elem(const char *dt, const void *p, size_t i) {
  if (!strcmp(dt, "f32") || !strcmp(dt, "c64")) return ((const float *)p)[i];
  if (!strncmp(dt, "f8e", 3)) return fp8_bits(((const uint8_t *)p)[i], !strcmp(dt, "f8e5m2"));
  if (!strcmp(dt, "bf16") || !strcmp(dt, "f16"))
    return half_bits(((const uint16_t *)p)[i], dt[0] == 'b');
  if (!strcmp(dt, "f64") || !strcmp(dt, "c128")) return ((const double *)p)[i];
  if (!strcmp(dt, "s32")) return ((const int32_t *)p)[i];
  if (!strcmp(dt, "s64")) return (double)((const int64_t *)p)[i];
  if (!strcmp(dt, "u32")) return ((const uint32_t *)p)[i];
  if (!strcmp(dt, "pred") || !strcmp(dt, "u8") || !strcmp(dt, "u4")) return ((const uint8_t *)p)[i];
  if (!strcmp(dt, "s8") || !strcmp(dt, "s4")) return ((const int8_t *)p)[i];
  return NAN;
}

/* ---- a pthread parallel-for: T workers take chunks from a shared counter */
typedef struct Pool {
  int threads;        /* workers per call */
  int64_t n;          /* chunks of the current call */
  int64_t next;       /* next chunk to take */
  hloc_task_fn fn;    /* task */
  void *ctx;          /* its context */
  pthread_mutex_t mu; /* guards next */
  long calls;         /* parallel-for calls made */
} Pool;

static void *pool_worker(void *arg) {
  Pool *p = arg;
  for (;;) {
    pthread_mutex_lock(&p->mu);
    int64_t i = p->next++;
    pthread_mutex_unlock(&p->mu);
    if (i >= p->n) return NULL;
    p->fn(p->ctx, i);
  }
}

static void pool_for(void *runner, int64_t n, hloc_task_fn fn, void *ctx) {
  Pool *p = runner;
  p->n = n;
  p->next = 0;
  p->fn = fn;
  p->ctx = ctx;
  p->calls++;
  pthread_t t[64];
  int nt = p->threads < 64 ? p->threads : 64;
  for (int i = 0; i < nt; i++)
    pthread_create(&t[i], NULL, pool_worker, p);
  for (int i = 0; i < nt; i++)
    pthread_join(t[i], NULL);
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s DIR THREADS RTOL\n", argv[0]);
    return 2;
  }
  const char *dir = argv[1];
  int threads = atoi(argv[2]);
  double rtol = atof(argv[3]);
  char path[4096];
  const void *args[MODEL_NUM_ARGS + 1];
  void *results[MODEL_NUM_RESULTS + 1];
  for (int i = 0; i < MODEL_NUM_ARGS; i++) {
    Npy a;
    snprintf(path, sizeof path, "%s/in%d.npy", dir, i);
    if (!npy_read(path, &a)) {
      fprintf(stderr, "cannot read %s\n", path);
      return 2;
    }
    const hloc_tensor_info *ti = &model_arg_info[i];
    int same = a.rank == ti->rank && a.bytes == ti->bytes && !strcmp(a.descr, npy_descr(ti->dtype));
    for (int d = 0; same && d < a.rank; d++)
      same = a.dims[d] == ti->dims[d];
    if (!same) {
      fprintf(stderr, "%s does not match argument %d (%s %s rank %d)\n", path, i, ti->name,
              ti->dtype, ti->rank);
      return 2;
    }
    args[i] = a.data;
  }
  for (int k = 0; k < MODEL_NUM_RESULTS; k++)
    results[k] = guarded(model_result_info[k].bytes, 64);
  size_t tb =
      ((size_t)MODEL_TEMP_BYTES + MODEL_TEMP_ALIGN - 1) / MODEL_TEMP_ALIGN * MODEL_TEMP_ALIGN;
  void *temp = guarded(tb, MODEL_TEMP_ALIGN);
  if (!temp) {
    fprintf(stderr, "cannot map %zu bytes of scratch\n", tb);
    return 2;
  }
  Pool pool = {threads, 0, 0, NULL, NULL, PTHREAD_MUTEX_INITIALIZER, 0};
  int rc = threads > 0 ? model_run_mt(args, results, temp, pool_for, &pool)
                       : model_run(args, results, temp);
  if (rc != 0) {
    fprintf(stderr, "run returned %d\n", rc);
    return 1;
  }
  int bad = 0;
  for (int k = 0; k < MODEL_NUM_RESULTS; k++) {
    Npy w;
    snprintf(path, sizeof path, "%s/out%d.npy", dir, k);
    if (!npy_read(path, &w) || w.bytes != model_result_info[k].bytes) {
      fprintf(stderr, "cannot read %s or size mismatch\n", path);
      return 2;
    }
    const char *dt = model_result_info[k].dtype;
    size_t n = w.bytes / dt_size(dt);
    double scale = 0, worst = 0, wg = n ? elem(dt, results[k], 0) : 0,
           ww = n ? elem(dt, w.data, 0) : 0;
    size_t wi = 0;
    for (size_t i = 0; i < n; i++)
      scale = fmax(scale, fabs(elem(dt, w.data, i)));
    for (size_t i = 0; i < n; i++) {
      double g = elem(dt, results[k], i), x = elem(dt, w.data, i);
      double e = g == x ? 0 : fabs(g - x) / (fabs(x) + scale + 1e-30);
      if (isnan(g) != isnan(x))
        e = INFINITY;
      else if (isnan(g))
        e = 0;
      else if ((isinf(g) || isinf(x)) && g != x)
        e = INFINITY; /* also +inf against -inf */
      if (!(e <= worst)) worst = e, wi = i, wg = g, ww = x;
    }
    printf("result %d (%s): %zu elements, worst error %.3g at %zu (got %.9g want %.9g)%s\n", k,
           model_result_info[k].name, n, worst, wi, wg, ww, worst <= rtol ? "" : "  MISMATCH");
    if (!(worst <= rtol)) bad = 1;
  }
  if (threads > 0) printf("parallel-for calls: %ld\n", pool.calls);
  if (bad) return bad;
  /* the packed weights: the same results, bit for bit */
  void *packed = guarded((size_t)MODEL_PACKED_BYTES, 64);
  void *first[MODEL_NUM_RESULTS + 1];
  if (!packed) {
    fprintf(stderr, "cannot map %lld bytes of packed weights\n", (long long)MODEL_PACKED_BYTES);
    return 2;
  }
  if (model_pack(args, (char *)packed + 4) != 1 ||
      model_run_packed(args, results, temp, (char *)packed + 4) != 1) {
    fprintf(stderr, "a packed pointer not 64-byte aligned was accepted\n");
    return 1;
  }
  for (int k = 0; k < MODEL_NUM_RESULTS; k++) {
    first[k] = malloc(model_result_info[k].bytes + 1);
    memcpy(first[k], results[k], model_result_info[k].bytes);
    memset(results[k], 0xff, model_result_info[k].bytes);
  }
  /* none given (NULL), packed, packed then overwritten by NaN bytes */
  for (int pass = 0; pass < 3; pass++) {
    if (pass == 1 && model_pack(args, packed) != 0) return 1;
    if (pass == 2 && MODEL_PACKED_BYTES == 0) break;
    if (pass == 2) memset(packed, 0xff, (size_t)MODEL_PACKED_BYTES);
    void *pk = pass ? packed : NULL;
    rc = threads > 0 ? model_run_packed_mt(args, results, temp, pk, pool_for, &pool)
                     : model_run_packed(args, results, temp, pk);
    int same = rc == 0;
    for (int k = 0; same && k < MODEL_NUM_RESULTS; k++)
      same = !memcmp(first[k], results[k], model_result_info[k].bytes);
    static const char *const what[3] = {"none given", "packed", "packed, then NaN"};
    printf("packed weights (%lld bytes, %s): %s\n", (long long)MODEL_PACKED_BYTES, what[pass],
           rc     ? "run failed"
           : same ? "same results"
                  : "other results");
    if (rc || same != (pass < 2)) return 1;
    for (int k = 0; k < MODEL_NUM_RESULTS; k++)
      memset(results[k], 0xff, model_result_info[k].bytes);
  }
  return 0;
}
