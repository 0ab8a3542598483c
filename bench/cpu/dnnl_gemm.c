/* bench/cpu/dnnl_gemm.c: oneDNN's matmul on one GEMM shape, the peer of hloc's GEMMs.
 *
 *   hloc-bench-dnnl --m M --k K --n N [--type bf16-f32|bf16-bf16|s8-s32|f32-f32]
 *                   [--weights plain|blocked] [--threads N] [--budget S] [--min-runs N]
 *                   [--max-runs N]
 *
 * Times C[M,N] = A[M,K] B[K,N] through oneDNN's matmul primitive (C API of oneDNN 2.x, as
 * Debian's libdnnl-dev has it), every matrix row-major as hloc's single-dot modules take them
 * (bench/cpu/dnnl_pair.sh builds those and sets the two side by side). The type names the
 * operands' and the result's element types. --weights plain hands oneDNN B row-major, so each
 * call copies it into the kernel's own layout, the work of hloc's NAME_run; --weights blocked
 * creates the primitive with B's layout left to oneDNN (format_tag any) and reorders B into it
 * once before the runs, timed apart as pack_s: the analogue of NAME_pack and the driver's
 * --packed (or of ONNX Runtime's initializers, packed at session creation).
 *
 * Threads: Debian builds oneDNN on OpenMP, whose thread count a primitive reads when it is
 * created, so --threads sets omp_set_num_threads before anything else (OMP_NUM_THREADS is not
 * needed; pinning is the caller's, taskset). Inputs are bench_fill.h's values for arguments
 * 0 (A) and 1 (B), rounded as bench_model.c rounds them, so the result checksum (asum: the
 * position-weighted sum of |x| that bench_model.c prints, s32 results included) matches
 * hloc's up to summation order. Method as bench_model.c's: one warm-up call, then timed calls
 * (each through dnnl_stream_wait) until --min-runs are done and --budget seconds have passed,
 * or --max-runs are done.
 *
 * Output: one line of key=value fields: impl (oneDNN's implementation name, e.g.
 * brg:avx512_core_bf16), isa (the effective ISA), dnnl (version), type, m, k, n, weights,
 * wfmt (B's layout in oneDNN's notation), threads, runs, median_s, min_s, gflops (2 M N K over the
 * median), pack_s, asum. */
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_bf16.h"
#include "bench_fill.h"
#include "bench_time.h"

#if DNNL_VERSION_MAJOR != 2
#error "bench/cpu/dnnl_gemm.c is written against oneDNN 2.x's C API"
#endif

/* A call into oneDNN that must succeed: its name and status on failure, then exit. */
#define DN(call)                                                                                   \
  do {                                                                                             \
    dnnl_status_t st_ = (call);                                                                    \
    if (st_ != dnnl_success) {                                                                     \
      fprintf(stderr, "bench-dnnl: %s failed (status %d)\n", #call, (int)st_);                     \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

typedef struct Type {
  const char *name;       /* --type's value */
  dnnl_data_type_t ab, c; /* operands' and result's element types */
  int ab_bytes, c_bytes;  /* their sizes */
} Type;

static const Type types[] = {
    {"bf16-f32", dnnl_bf16, dnnl_f32, 2, 4},
    {"bf16-bf16", dnnl_bf16, dnnl_bf16, 2, 2},
    {"s8-s32", dnnl_s8, dnnl_s32, 1, 4},
    {"f32-f32", dnnl_f32, dnnl_f32, 4, 4},
};

typedef struct Opts {
  int64_t m, k, n;        /* the shape */
  const Type *type;       /* element types */
  int blocked;            /* B reordered ahead into oneDNN's layout */
  int threads;            /* OpenMP threads */
  double budget;          /* seconds of timed runs */
  int min_runs, max_runs; /* bounds on the timed runs */
} Opts;

static void usage(void) {
  fprintf(stderr, "usage: hloc-bench-dnnl --m M --k K --n N [--type bf16-f32|bf16-bf16|s8-s32|"
                  "f32-f32]\n       [--weights plain|blocked] [--threads N] [--budget S] "
                  "[--min-runs N] [--max-runs N]\n");
  exit(2);
}

static Opts parse(int argc, char **argv) {
  Opts o = {0, 0, 0, &types[0], 0, 1, 2, 3, 200};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[++i] : NULL;
    if (!v) usage();
    if (!strcmp(a, "--m"))
      o.m = atoll(v);
    else if (!strcmp(a, "--k"))
      o.k = atoll(v);
    else if (!strcmp(a, "--n"))
      o.n = atoll(v);
    else if (!strcmp(a, "--threads"))
      o.threads = atoi(v);
    else if (!strcmp(a, "--budget"))
      o.budget = atof(v);
    else if (!strcmp(a, "--min-runs"))
      o.min_runs = atoi(v);
    else if (!strcmp(a, "--max-runs"))
      o.max_runs = atoi(v);
    else if (!strcmp(a, "--weights") && (!strcmp(v, "plain") || !strcmp(v, "blocked")))
      o.blocked = !strcmp(v, "blocked");
    else if (!strcmp(a, "--type")) {
      o.type = NULL;
      for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
        if (!strcmp(v, types[t].name)) o.type = &types[t];
      if (!o.type) usage();
    } else
      usage();
  }
  if (o.m < 1 || o.k < 1 || o.n < 1 || o.threads < 1 || o.max_runs < 1) usage();
  if (o.min_runs > o.max_runs) o.min_runs = o.max_runs;
  return o;
}

/* A rows x cols row-major operand filled as bench_model.c fills argument k of that shape. */
static void *operand(const Type *t, int k, int64_t rows, int64_t cols) {
  int64_t dims[2] = {rows, cols}, n = rows * cols;
  void *d = aligned_alloc(64, ((size_t)n * (size_t)t->ab_bytes + 63) / 64 * 64);
  if (!d) {
    fprintf(stderr, "bench-dnnl: out of memory\n");
    exit(1);
  }
  for (int64_t i = 0; i < n; i++) {
    double v = bench_fill_value(k, 2, dims, i, t->ab != dnnl_s8);
    if (t->ab == dnnl_bf16)
      ((uint16_t *)d)[i] = bench_f32_to_bf16((float)v);
    else if (t->ab == dnnl_s8)
      ((int8_t *)d)[i] = (int8_t)(int)v;
    else
      ((float *)d)[i] = (float)v;
  }
  return d;
}

/* bench_model.c's checksum of the result: sum of |x| (1 + i mod 7). */
static double result_asum(const Type *t, const void *c, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; i++) {
    double v = t->c == dnnl_f32    ? ((const float *)c)[i]
               : t->c == dnnl_bf16 ? bench_bf16_to_f32(((const uint16_t *)c)[i])
                                   : ((const int32_t *)c)[i];
    s += (v < 0 ? -v : v) * (double)(1 + i % 7);
  }
  return s;
}

/* A memory object of a row-major matrix over the caller's data. */
static dnnl_memory_t plain_memory(dnnl_engine_t eng, dnnl_data_type_t dt, int64_t rows,
                                  int64_t cols, void *data) {
  dnnl_memory_desc_t md;
  dnnl_dims_t dims = {rows, cols};
  DN(dnnl_memory_desc_init_by_tag(&md, 2, dims, dt, dnnl_ab));
  dnnl_memory_t mem;
  DN(dnnl_memory_create(&mem, &md, eng, data));
  return mem;
}

/* The matmul's primitive descriptor: A and C row-major, B row-major or left to oneDNN. */
static dnnl_primitive_desc_t matmul_pd(dnnl_engine_t eng, const Opts *o) {
  dnnl_memory_desc_t a, b, c;
  dnnl_dims_t ad = {o->m, o->k}, bd = {o->k, o->n}, cd = {o->m, o->n};
  DN(dnnl_memory_desc_init_by_tag(&a, 2, ad, o->type->ab, dnnl_ab));
  DN(dnnl_memory_desc_init_by_tag(&b, 2, bd, o->type->ab,
                                  o->blocked ? dnnl_format_tag_any : dnnl_ab));
  DN(dnnl_memory_desc_init_by_tag(&c, 2, cd, o->type->c, dnnl_ab));
  dnnl_matmul_desc_t desc;
  DN(dnnl_matmul_desc_init(&desc, &a, &b, NULL, &c));
  dnnl_primitive_desc_t pd;
  DN(dnnl_primitive_desc_create(&pd, &desc, NULL, eng, NULL));
  return pd;
}

/* B in the layout pd wants: the plain memory itself, or a new memory that B is reordered into
 * (the reorder's seconds in *pack_s). */
static dnnl_memory_t weights(dnnl_engine_t eng, dnnl_stream_t st, dnnl_primitive_desc_t pd,
                             dnnl_memory_t plain, int blocked, double *pack_s) {
  *pack_s = 0;
  if (!blocked) return plain;
  const dnnl_memory_desc_t *want = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
  const dnnl_memory_desc_t *have;
  DN(dnnl_memory_get_memory_desc(plain, &have));
  dnnl_memory_t to;
  DN(dnnl_memory_create(&to, want, eng, DNNL_MEMORY_ALLOCATE));
  dnnl_primitive_desc_t rpd;
  DN(dnnl_reorder_primitive_desc_create(&rpd, have, eng, want, eng, NULL));
  dnnl_primitive_t r;
  DN(dnnl_primitive_create(&r, rpd));
  dnnl_exec_arg_t args[] = {{DNNL_ARG_FROM, plain}, {DNNL_ARG_TO, to}};
  double t0 = now_s();
  DN(dnnl_primitive_execute(r, st, 2, args));
  DN(dnnl_stream_wait(st));
  *pack_s = now_s() - t0;
  dnnl_primitive_destroy(r);
  dnnl_primitive_desc_destroy(rpd);
  return to;
}

/* B's layout as oneDNN describes it: the outer dimension order by stride (upper case) and the
 * inner blocks outermost first, e.g. BA16a64b2a (K blocks of 16 pairs by 64 columns); "ab" for
 * row-major. */
static void layout_name(const dnnl_memory_desc_t *md, char *out, size_t cap) {
  const dnnl_blocking_desc_t *b = &md->format_desc.blocking;
  if (md->format_kind != dnnl_blocked || (b->inner_nblks == 0 && b->strides[1] == 1)) {
    snprintf(out, cap, "ab");
    return;
  }
  int outer = b->strides[0] >= b->strides[1] ? 0 : 1;
  size_t o = (size_t)snprintf(out, cap, "%c%c", 'A' + outer, 'A' + (1 - outer));
  for (int i = 0; i < b->inner_nblks && o < cap; i++)
    o += (size_t)snprintf(out + o, cap - o, "%lld%c", (long long)b->inner_blks[i],
                          'a' + (int)b->inner_idxs[i]);
}

/* One warm-up call, then timed calls as the options bound them; the sorted times in ts (at
 * least max_runs long), their count returned. */
static int time_runs(dnnl_primitive_t p, dnnl_stream_t st, dnnl_exec_arg_t *args, const Opts *o,
                     double *ts) {
  int runs = 0;
  double spent = 0;
  for (int r = -1; r < o->max_runs; r++) {
    double t0 = now_s();
    DN(dnnl_primitive_execute(p, st, 3, args));
    DN(dnnl_stream_wait(st));
    double dt = now_s() - t0;
    if (r < 0) continue;
    ts[runs++] = dt;
    spent += dt;
    if (runs >= o->min_runs && spent >= o->budget) break;
  }
  qsort(ts, (size_t)runs, sizeof *ts, cmp_double);
  return runs;
}

/* The effective ISA's name (a table, not a switch: the enum grows with the library). */
static const char *isa_name(dnnl_cpu_isa_t isa) {
  static const struct {
    dnnl_cpu_isa_t isa;
    const char *name;
  } names[] = {
      {dnnl_cpu_isa_avx512_core_amx, "avx512_core_amx"},
      {dnnl_cpu_isa_avx512_core_bf16, "avx512_core_bf16"},
      {dnnl_cpu_isa_avx512_core_vnni, "avx512_core_vnni"},
      {dnnl_cpu_isa_avx512_core, "avx512_core"},
      {dnnl_cpu_isa_avx2_vnni, "avx2_vnni"},
      {dnnl_cpu_isa_avx2, "avx2"},
  };
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (names[i].isa == isa) return names[i].name;
  return "other";
}

int main(int argc, char **argv) {
  Opts o = parse(argc, argv);
  omp_set_num_threads(o.threads); /* before the primitive, which sizes its work by it */
  dnnl_engine_t eng;
  dnnl_stream_t st;
  DN(dnnl_engine_create(&eng, dnnl_cpu, 0));
  DN(dnnl_stream_create(&st, eng, dnnl_stream_default_flags));
  const Type *t = o.type;
  void *a = operand(t, 0, o.m, o.k), *b = operand(t, 1, o.k, o.n);
  void *c = aligned_alloc(64, ((size_t)(o.m * o.n) * (size_t)t->c_bytes + 63) / 64 * 64);
  if (!c) return 1;
  dnnl_memory_t am = plain_memory(eng, t->ab, o.m, o.k, a);
  dnnl_memory_t bm = plain_memory(eng, t->ab, o.k, o.n, b);
  dnnl_memory_t cm = plain_memory(eng, t->c, o.m, o.n, c);
  dnnl_primitive_desc_t pd = matmul_pd(eng, &o);
  const char *impl = "?";
  DN(dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl));
  double pack_s;
  dnnl_memory_t wm = weights(eng, st, pd, bm, o.blocked, &pack_s);
  const dnnl_memory_desc_t *wmd;
  DN(dnnl_memory_get_memory_desc(wm, &wmd));
  char wfmt[64];
  layout_name(wmd, wfmt, sizeof wfmt);
  dnnl_primitive_t p;
  DN(dnnl_primitive_create(&p, pd));
  dnnl_exec_arg_t args[] = {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_DST, cm}};
  double *ts = malloc(sizeof(double) * (size_t)o.max_runs);
  int runs = time_runs(p, st, args, &o, ts);
  double median = runs % 2 ? ts[runs / 2] : 0.5 * (ts[runs / 2 - 1] + ts[runs / 2]);
  const dnnl_version_t *ver = dnnl_version();
  printf("impl=%s isa=%s dnnl=%d.%d.%d type=%s m=%lld k=%lld n=%lld weights=%s wfmt=%s threads=%d "
         "runs=%d median_s=%.9f min_s=%.9f gflops=%.1f pack_s=%.6f asum=%.9g\n",
         impl, isa_name(dnnl_get_effective_cpu_isa()), ver->major, ver->minor, ver->patch, t->name,
         (long long)o.m, (long long)o.k, (long long)o.n, o.blocked ? "blocked" : "plain", wfmt,
         o.threads, runs, median, ts[0],
         2.0 * (double)o.m * (double)o.n * (double)o.k / median * 1e-9, pack_s,
         result_asum(t, c, o.m * o.n));
  return 0;
}
