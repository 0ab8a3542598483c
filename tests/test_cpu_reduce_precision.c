/* tests/test_cpu_reduce_precision.c: rounding on the CPU target, bit for bit: reduce-precision
 * and the fp8 types.
 *
 * Compiled reduce-precision and fp8 conversions must equal the interpreter's (and XLA's,
 * tests/xla_cases/rp_*) bit for bit, through a driver of its own (below). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu_test_util.h"
#include "hlo.h"
#include "optimizer.h"
#include "target.h"

/* ------------------------------------------------------------------ reduce-precision, bit for bit
 *
 * The compiled values must equal the interpreter's bit for bit (a NaN matching any NaN), which
 * the tolerance of tests/cpu_driver.c cannot check (-0 passes for +0; f16/bf16 results are not
 * read at all). These tests therefore run a driver of their own: it reads each argument's raw
 * bytes, runs model_run and model_run_mt (its parallel-for running the tasks in reverse
 * order), and writes each result's raw bytes; the test compares them with the interpreter's.
 * Arguments are chosen bit patterns: the special values of the argument's type, for every
 * reduce-precision format of the module the values around its rounding ties, binade carries,
 * overflow and underflow thresholds, then random bit patterns (every exponent, NaNs and
 * denormals included). */

static const char *tr_driver =
    "#include \"model.h\"\n"
    "#include <stdio.h>\n"
    "#include <stdlib.h>\n"
    "#include <string.h>\n"
    "static void rev_for(void *runner, int64_t n, hloc_task_fn fn, void *ctx) {\n"
    "  (void)runner;\n"
    "  for (int64_t i = n - 1; i >= 0; i--) fn(ctx, i);\n"
    "}\n"
    "int main(int argc, char **argv) {\n"
    "  char path[4096];\n"
    "  const void *args[MODEL_NUM_ARGS + 1];\n"
    "  void *res[MODEL_NUM_RESULTS + 1];\n"
    "  if (argc != 2) return 2;\n"
    "  for (int i = 0; i < MODEL_NUM_ARGS; i++) {\n"
    "    size_t n = model_arg_info[i].bytes;\n"
    "    void *d = malloc(n + 1);\n"
    "    snprintf(path, sizeof path, \"%s/in%d.bin\", argv[1], i);\n"
    "    FILE *f = fopen(path, \"rb\");\n"
    "    if (!f || fread(d, 1, n, f) != n) return 2;\n"
    "    fclose(f);\n"
    "    args[i] = d;\n"
    "  }\n"
    "  size_t al = MODEL_TEMP_ALIGN, tb = ((size_t)MODEL_TEMP_BYTES + al - 1) / al * al;\n"
    "  void *temp = aligned_alloc(al, tb ? tb : al);\n"
    "  for (int mt = 0; mt < 2; mt++) {\n"
    "    for (int k = 0; k < MODEL_NUM_RESULTS; k++) {\n"
    "      res[k] = malloc(model_result_info[k].bytes + 1);\n"
    "      memset(res[k], 0xff, model_result_info[k].bytes);\n"
    "    }\n"
    "    int rc = mt ? model_run_mt(args, res, temp, rev_for, NULL) : model_run(args, res, temp);\n"
    "    if (rc) return 1;\n"
    "    for (int k = 0; k < MODEL_NUM_RESULTS; k++) {\n"
    "      size_t n = model_result_info[k].bytes;\n"
    "      snprintf(path, sizeof path, \"%s/got%d_%d.bin\", argv[1], k, mt);\n"
    "      FILE *f = fopen(path, \"wb\");\n"
    "      if (!f || fwrite(res[k], 1, n, f) != n) return 2;\n"
    "      fclose(f);\n"
    "      free(res[k]);\n"
    "    }\n"
    "  }\n"
    "  free(temp);\n"
    "  for (int i = 0; i < MODEL_NUM_ARGS; i++) free((void *)args[i]);\n"
    "  return 0;\n"
    "}\n";

/* Exponent and mantissa widths of a float type. */
static void tr_format(DType t, int *exp, int *man) {
  int nbits;
  cr_assert(hlo_float_format(t, &nbits, exp, man), "a float argument is expected");
}

static void tr_push(uint64_t *v, int *n, int cap, uint64_t x) {
  cr_assert_lt(*n, cap, "too many edge values");
  v[(*n)++] = x;
}

/* Edge bit patterns of type t (se exponent, sm mantissa bits) for reduce-precision to (e, m). */
static void tr_edges(uint64_t *v, int *n, int cap, int se, int sm, int e, int m) {
  uint64_t maxe = (UINT64_C(1) << se) - 2, bias = (UINT64_C(1) << (se - 1)) - 1;
  uint64_t exps[12], mans[10];
  int ne = 0, nm = 0;
  exps[ne++] = 0, exps[ne++] = 1, exps[ne++] = bias, exps[ne++] = bias + 1, exps[ne++] = maxe;
  if (e < se) { /* around the reduced format's largest and smallest normal binades */
    uint64_t rb = (UINT64_C(1) << (e - 1)) - 1;
    for (int d = -1; d <= 1; d++) {
      exps[ne++] = (uint64_t)((int64_t)(bias + rb) + d);
      if ((int64_t)(bias - rb) + d >= 0) exps[ne++] = (uint64_t)((int64_t)(bias - rb) + d);
    }
  }
  uint64_t all = (UINT64_C(1) << sm) - 1;
  mans[nm++] = 0, mans[nm++] = 1, mans[nm++] = all, mans[nm++] = UINT64_C(1) << (sm - 1);
  if (m < sm) { /* ties to even both ways, just below and above a tie */
    uint64_t half = UINT64_C(1) << (sm - m - 1), last = UINT64_C(1) << (sm - m);
    uint64_t top = all & ~(last - 1); /* the kept bits all ones: a tie carries out */
    mans[nm++] = half, mans[nm++] = last | half, mans[nm++] = last | (half - 1);
    mans[nm++] = half + 1, mans[nm++] = top | half, mans[nm++] = top | (half - 1);
  }
  for (int i = 0; i < ne; i++)
    for (int j = 0; j < nm; j++) {
      if (exps[i] > maxe) continue;
      uint64_t x = exps[i] << sm | mans[j];
      tr_push(v, n, cap, x);
      tr_push(v, n, cap, x | UINT64_C(1) << (se + sm));
    }
}

/* The distinct reduce-precision formats of every computation of m. */
static int tr_formats(const HModule *m, int (*fmt)[2], int cap) {
  int n = 0;
  for (int c = 0; c < m->ncomps; c++)
    for (int i = 0; i < m->comps[c]->ninstrs; i++) {
      const HInstr *in = m->comps[c]->instrs[i];
      if (in->op != OP_REDUCE_PRECISION || n == cap) continue;
      bool seen = false;
      for (int f = 0; f < n; f++)
        seen |= fmt[f][0] == in->exponent_bits && fmt[f][1] == in->mantissa_bits;
      if (!seen) fmt[n][0] = in->exponent_bits, fmt[n][1] = in->mantissa_bits, n++;
    }
  return n;
}

/* An argument of shape s for module m: the special values and m's edge values, then random bit
 * patterns. */
static Literal *tr_arg(HArena *a, const Shape *s, const HModule *m, int seed) {
  int se, sm, fmt[32][2];
  tr_format(s->dt, &se, &sm);
  int nf = tr_formats(m, fmt, 32), cap = 8192, n = 0;
  uint64_t *v = hlo_arena_alloc(a, sizeof *v * (size_t)cap);
  uint64_t sign = UINT64_C(1) << (se + sm), inf = ((UINT64_C(1) << se) - 1) << sm;
  uint64_t qnan = inf | UINT64_C(1) << (sm - 1);
  uint64_t specials[] = {0,           sign,     inf,     sign | inf,     qnan,
                         sign | qnan, qnan | 5, inf | 3, sign | inf | 1, 1};
  for (size_t i = 0; i < sizeof specials / sizeof *specials; i++)
    tr_push(v, &n, cap, specials[i]);
  for (int f = 0; f < nf; f++)
    tr_edges(v, &n, cap, se, sm, fmt[f][0], fmt[f][1]);
  int64_t ne = hlo_shape_elems(s);
  cr_assert_geq(ne, n, "argument of %lld elements is too small for %d edge values", (long long)ne,
                n);
  Literal *l = hlo_literal_new(a, s);
  int bytes = (int)hlo_dtype_size(s->dt);
  uint64_t x = 0x9e3779b97f4a7c15u * (uint64_t)(seed + 1);
  for (int64_t i = 0; i < ne; i++) {
    uint64_t b = i < n ? v[i] : 0;
    if (i >= n) { /* xorshift64 */
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      b = x;
    }
    memcpy((char *)l->data + i * bytes, &b, (size_t)bytes); /* little-endian: the low bytes */
  }
  return l;
}

/* Build tr_driver against DIR/model.o and run it on DIR (its in<k>.bin to got<k>_<mt>.bin). */
static void tr_run(const char *dir, const char *what) {
  char cmd[2048];
  cr_assert_eq(
      ct_build_run(dir, "driver.c", tr_driver,
                   "cc -std=c11 -O1 -Wall -Werror -I. driver.c model.o -lm -o driver && ./driver .",
                   cmd, sizeof cmd),
      0, "%s: %s", what, cmd);
}

/* Compare result leaf l with the raw bytes of DIR/got<k>_<mt>.bin, bit for bit (NaN as NaN). */
static int tr_compare(HArena *a, const char *dir, const Literal *l, int k, const char *what) {
  if (l->shape.dt == DT_TUPLE) {
    for (int i = 0; i < l->shape.ntuple; i++)
      k = tr_compare(a, dir, l->elems[i], k, what);
    return k;
  }
  size_t bytes = hlo_shape_bytes(&l->shape), es = hlo_dtype_size(l->shape.dt);
  bool fl = hlo_dtype_is_float(l->shape.dt);
  for (int mt = 0; mt < 2; mt++) {
    char path[512];
    snprintf(path, sizeof path, "%s/got%d_%d.bin", dir, k, mt);
    size_t n = 0;
    char *got = ct_slurp(path, &n);
    cr_assert_eq(n, bytes, "%s: result %d has %zu bytes, want %zu", what, k, n, bytes);
    Literal *g = hlo_literal_new(a, &l->shape);
    memcpy(g->data, got, bytes);
    free(got);
    int bad = 0;
    for (int64_t i = 0; i < hlo_shape_elems(&l->shape); i++) {
      uint64_t wb = 0, gb = 0;
      memcpy(&wb, (const char *)l->data + i * (int64_t)es, es);
      memcpy(&gb, (const char *)g->data + i * (int64_t)es, es);
      if (wb == gb || (fl && isnan(hlo_literal_get_f64(l, i)) && isnan(hlo_literal_get_f64(g, i))))
        continue;
      if (bad++ < 8)
        cr_expect(false, "%s: result %d (%s) element %lld: got 0x%llx (%.9g), want 0x%llx (%.9g)",
                  what, k, mt ? "run_mt" : "run", (long long)i, (unsigned long long)gb,
                  hlo_literal_get_f64(g, i), (unsigned long long)wb, hlo_literal_get_f64(l, i));
    }
    cr_expect_eq(bad, 0, "%s: result %d (%s): %d elements differ", what, k, mt ? "run_mt" : "run",
                 bad);
  }
  return k + 1;
}

/* An argument of shape s for module m (numbered seed) for tr_check_bits_gen. */
typedef Literal *(*TrArgFn)(HArena *a, const Shape *s, const HModule *m, int seed);

/* Compile text (after the optimizer when optimize), run it on arguments made by gen and compare
 * with the interpreter bit for bit. Returns the number of reduce-precision instructions
 * compiled inside fusions with other instructions (after the optimizer). */
static int tr_check_bits_gen(const char *what, const char *text, bool optimize, TrArgFn gen) {
  HModule *ref = ct_parse(text);
  HModule *m = ct_parse(text);
  HArena *a = hlo_arena_new();
  char *dir = ct_tmpdir("hloc_cpu_rp");
  HErr err = {0};
  if (optimize) {
    OptOpts oo = {0};
    cr_assert(opt_optimize(m, &oo, &err), "optimizer: %s", err.msg);
  }
  int fused = 0;
  for (int i = 0; i < m->entry->ninstrs; i++) {
    const HInstr *in = m->entry->instrs[i];
    if (in->op != OP_FUSION || in->calls[0]->ninstrs < 3) continue;
    for (int j = 0; j < in->calls[0]->ninstrs; j++)
      fused += in->calls[0]->instrs[j]->op == OP_REDUCE_PRECISION;
  }
  int np = ref->entry->nparams;
  hlo_comp_renumber(ref->entry);
  Literal **args = hlo_arena_alloc(a, sizeof(Literal *) * (size_t)(np + 1));
  for (int i = 0; i < np; i++) {
    args[i] = gen(a, &ref->entry->params[i]->shape, ref, i);
    char path[512];
    snprintf(path, sizeof path, "%s/in%d.bin", dir, i);
    FILE *f = fopen(path, "wb");
    cr_assert(f);
    cr_assert_eq(fwrite(args[i]->data, 1, hlo_shape_bytes(&args[i]->shape), f),
                 hlo_shape_bytes(&args[i]->shape));
    fclose(f);
  }
  Literal *res = hlo_interp_run(ref, a, args, np, &err);
  cr_assert(res, "interpreter: %s", err.msg);
  cr_assert(ct_compile(m, dir, "model", 1, &err), "%s: %s", what, err.msg);
  tr_run(dir, what);
  tr_compare(a, dir, res, 0, what);
  ct_rmdir(dir);
  free(dir);
  hlo_arena_free(a);
  hlo_module_free(ref);
  hlo_module_free(m);
  return fused;
}

/* tr_check_bits_gen on reduce-precision's edge values (tr_arg). */
static int tr_check_bits(const char *what, const char *text, bool optimize) {
  return tr_check_bits_gen(what, text, optimize, tr_arg);
}

/* f32 to bf16-like (8,7), f16-like (5,10), fp8-like (4,3) and (5,2), a tiny (2,1), the one
 * exponent bit format (1,0) (only zeros and infinities), (8,0) (a NaN becomes an infinity)
 * and the identity (8,23). */
Test(cpu, reduce_precision_f32_formats, .timeout = 300) {
  tr_check_bits("reduce-precision f32",
                "HloModule m\n"
                "ENTRY e {\n"
                "  x = f32[4099] parameter(0)\n"
                "  a = f32[4099] reduce-precision(x), exponent_bits=8, mantissa_bits=7\n"
                "  b = f32[4099] reduce-precision(x), exponent_bits=5, mantissa_bits=10\n"
                "  c = f32[4099] reduce-precision(x), exponent_bits=4, mantissa_bits=3\n"
                "  d = f32[4099] reduce-precision(x), exponent_bits=5, mantissa_bits=2\n"
                "  f = f32[4099] reduce-precision(x), exponent_bits=2, mantissa_bits=1\n"
                "  g = f32[4099] reduce-precision(x), exponent_bits=1, mantissa_bits=0\n"
                "  h = f32[4099] reduce-precision(x), exponent_bits=8, mantissa_bits=0\n"
                "  i = f32[4099] reduce-precision(x), exponent_bits=8, mantissa_bits=23\n"
                "  ROOT o = (f32[4099], f32[4099], f32[4099], f32[4099], f32[4099], f32[4099], "
                "f32[4099], f32[4099]) "
                "tuple(a, b, c, d, f, g, h, i)\n"
                "}\n",
                false);
}

/* f64 to f32-like (8,23), bf16-like (8,7), f16-like (5,10), a tiny (2,1), (11,0), a wide
 * exponent with a short mantissa (10,30) and the identity (11,52). */
Test(cpu, reduce_precision_f64_formats, .timeout = 300) {
  tr_check_bits("reduce-precision f64",
                "HloModule m\n"
                "ENTRY e {\n"
                "  x = f64[4099] parameter(0)\n"
                "  a = f64[4099] reduce-precision(x), exponent_bits=8, mantissa_bits=23\n"
                "  b = f64[4099] reduce-precision(x), exponent_bits=8, mantissa_bits=7\n"
                "  c = f64[4099] reduce-precision(x), exponent_bits=5, mantissa_bits=10\n"
                "  d = f64[4099] reduce-precision(x), exponent_bits=2, mantissa_bits=1\n"
                "  f = f64[4099] reduce-precision(x), exponent_bits=11, mantissa_bits=0\n"
                "  g = f64[4099] reduce-precision(x), exponent_bits=10, mantissa_bits=30\n"
                "  h = f64[4099] reduce-precision(x), exponent_bits=11, mantissa_bits=52\n"
                "  ROOT o = (f64[4099], f64[4099], f64[4099], f64[4099], f64[4099], f64[4099], "
                "f64[4099]) tuple(a, b, c, d, f, g, h)\n"
                "}\n",
                false);
}

/* f16 and bf16 (computed through f32, as the interpreter does): formats narrower than the type,
 * wider in the exponent (f16 to (8,7): rounding past 65504 gives an infinity), (8,0), and
 * the identity (8,23). */
Test(cpu, reduce_precision_f16_bf16, .timeout = 300) {
  tr_check_bits("reduce-precision f16/bf16",
                "HloModule m\n"
                "ENTRY e {\n"
                "  x = f16[2051] parameter(0)\n"
                "  y = bf16[2051] parameter(1)\n"
                "  a = f16[2051] reduce-precision(x), exponent_bits=5, mantissa_bits=10\n"
                "  b = f16[2051] reduce-precision(x), exponent_bits=4, mantissa_bits=3\n"
                "  c = f16[2051] reduce-precision(x), exponent_bits=8, mantissa_bits=7\n"
                "  d = f16[2051] reduce-precision(x), exponent_bits=2, mantissa_bits=1\n"
                "  f = bf16[2051] reduce-precision(y), exponent_bits=8, mantissa_bits=7\n"
                "  g = bf16[2051] reduce-precision(y), exponent_bits=5, mantissa_bits=10\n"
                "  h = bf16[2051] reduce-precision(y), exponent_bits=5, mantissa_bits=2\n"
                "  i = bf16[2051] reduce-precision(y), exponent_bits=8, mantissa_bits=0\n"
                "  j = bf16[2051] reduce-precision(y), exponent_bits=8, mantissa_bits=23\n"
                "  ROOT o = (f16[2051], f16[2051], f16[2051], f16[2051], bf16[2051], bf16[2051], "
                "bf16[2051], bf16[2051], bf16[2051]) "
                "tuple(a, b, c, d, f, g, h, i, j)\n"
                "}\n",
                false);
}

/* reduce-precision among exact elementwise ops (x*2 and x/4 move the edge values by whole
 * binades; negate, abs, subtract, select on a compare, converts to and from f16). */
#define TR_CHAIN                                                                                   \
  "  x = f32[2051] parameter(0)\n"                                                                 \
  "  y = f16[2051] parameter(1)\n"                                                                 \
  "  two = f32[] constant(2)\n"                                                                    \
  "  b2 = f32[2051] broadcast(two), dimensions={}\n"                                               \
  "  m = f32[2051] multiply(x, b2)\n"                                                              \
  "  r1 = f32[2051] reduce-precision(m), exponent_bits=5, mantissa_bits=10\n"                      \
  "  n = f32[2051] negate(r1)\n"                                                                   \
  "  r2 = f32[2051] reduce-precision(n), exponent_bits=8, mantissa_bits=7\n"                       \
  "  s = f32[2051] subtract(r2, r1)\n"                                                             \
  "  q = f32[] constant(0.25)\n"                                                                   \
  "  bq = f32[2051] broadcast(q), dimensions={}\n"                                                 \
  "  d = f32[2051] multiply(x, bq)\n"                                                              \
  "  ab = f32[2051] abs(d)\n"                                                                      \
  "  r3 = f32[2051] reduce-precision(ab), exponent_bits=2, mantissa_bits=1\n"                      \
  "  lt = pred[2051] compare(r3, ab), direction=LT\n"                                              \
  "  sel = f32[2051] select(lt, r3, s)\n"                                                          \
  "  yf = f32[2051] convert(y)\n"                                                                  \
  "  r4 = f32[2051] reduce-precision(yf), exponent_bits=4, mantissa_bits=3\n"                      \
  "  yh = f16[2051] convert(r4)\n"                                                                 \
  "  r5 = f16[2051] reduce-precision(yh), exponent_bits=3, mantissa_bits=2\n"                      \
  "  r5f = f32[2051] convert(r5)\n"                                                                \
  "  o = f32[2051] add(sel, r5f)\n"

/* The chain in a loop fusion as written (one loop nest), and reduce-precision of a constant of
 * edge values. */
Test(cpu, reduce_precision_in_loop_fusion, .timeout = 300) {
  tr_check_bits("reduce-precision in a loop fusion",
                "HloModule m\n"
                "fused {\n" TR_CHAIN "  ROOT t = (f32[2051], f16[2051]) tuple(o, r5)\n}\n"
                "fused1 {\n" TR_CHAIN "  ROOT neg = f32[2051] negate(o)\n}\n"
                "ENTRY e {\n"
                "  x = f32[2051] parameter(0)\n"
                "  y = f16[2051] parameter(1)\n"
                "  f = (f32[2051], f16[2051]) fusion(x, y), kind=kLoop, calls=fused\n"
                "  f0 = f32[2051] get-tuple-element(f), index=0\n"
                "  f1 = f16[2051] get-tuple-element(f), index=1\n"
                "  g = f32[2051] fusion(x, y), kind=kLoop, calls=fused1\n"
                "  k = f32[9] constant({nan, -inf, inf, -0, 1e-45, 65520, 3.75, 0.99999, 1e-38})\n"
                "  kr = f32[9] reduce-precision(k), exponent_bits=5, mantissa_bits=10\n"
                "  ROOT t = (f32[2051], f16[2051], f32[2051], f32[9]) tuple(f0, f1, g, kr)\n"
                "}\n",
                false);
}

/* The chain after the optimizer: the fusion pass puts the reduce-precision instructions into
 * fusions with the ops around them. */
Test(cpu, reduce_precision_after_optimizer, .timeout = 300) {
  int fused = tr_check_bits("reduce-precision after the optimizer",
                            "HloModule m\n"
                            "ENTRY e {\n" TR_CHAIN
                            "  ROOT t = (f32[2051], f16[2051], f32[2051]) tuple(o, r5, r2)\n"
                            "}\n",
                            true);
  cr_expect_geq(fused, 5, "only %d reduce-precision instructions fused with other ops", fused);
}

/* tests/xla_cases/rp_*: XLA's own reduce-precision results (tools/export_xla_cases.py) on f32
 * and f16 values where the rounding is decided, formats narrower and wider than the input's
 * (f16 to (8,7) keeps its exponent; NaNs stay NaNs at mantissa_bits 0): compiled, run on the
 * exported argument and compared bit for bit. */
Test(cpu, reduce_precision_xla_cases, .timeout = 300) {
  static const char *const names[] = {
      "rp_f32_e8m7",  "rp_f32_e5m10",  "rp_f32_e4m3",  "rp_f32_e2m1", "rp_f32_e5m0",
      "rp_f32_e8m23", "rp_f32_e11m30", "rp_f16_e5m10", "rp_f16_e4m3", "rp_f16_e8m7",
      "rp_f16_e5m2",  "rp_f16_e3m0",   "rp_f16_e11m52"};
  for (size_t c = 0; c < sizeof names / sizeof *names; c++) {
    char path[4096];
    HErr err = {0};
    HArena *a = hlo_arena_new();
    snprintf(path, sizeof path, HLOC_TEST_DIR "/xla_cases/%s/module.hlo", names[c]);
    size_t len = 0;
    char *text = ct_slurp(path, &len);
    HModule *m = ct_parse(text);
    free(text);
    snprintf(path, sizeof path, HLOC_TEST_DIR "/xla_cases/%s/in0.npy", names[c]);
    Literal *x = hlo_npy_read(a, path, &err);
    cr_assert(x, "%s", err.msg);
    snprintf(path, sizeof path, HLOC_TEST_DIR "/xla_cases/%s/out0.npy", names[c]);
    Literal *want = hlo_npy_read(a, path, &err);
    cr_assert(want, "%s", err.msg);
    char *dir = ct_tmpdir("hloc_cpu_rpx");
    snprintf(path, sizeof path, "%s/in0.bin", dir);
    FILE *f = fopen(path, "wb");
    cr_assert(f);
    cr_assert_eq(fwrite(x->data, 1, hlo_shape_bytes(&x->shape), f), hlo_shape_bytes(&x->shape));
    fclose(f);
    cr_assert(ct_compile(m, dir, "model", 1, &err), "%s: %s", names[c], err.msg);
    tr_run(dir, names[c]);
    tr_compare(a, dir, want, 0, names[c]);
    ct_rmdir(dir);
    free(dir);
    hlo_module_free(m);
    hlo_arena_free(a);
  }
}

/* ------------------------------------------------------------------ fp8, bit for bit
 *
 * f8e4m3fn and f8e5m2 are f32 in registers and their byte in memory (cpu_elemental.c): loads
 * decode, stores encode, and every fp8 result is rounded once, with the rules of the scalar
 * conversions (hlo/literal.c), which the interpreter uses. The compiled values must equal the
 * interpreter's bit for bit (a NaN matching any NaN). Arguments: an fp8 one holds all 256 codes
 * (then random bytes); a 2-D fp8 one (a dot operand) only codes of exponents near 1, so that
 * every sum of products is exact in f32 and any order of accumulation gives the interpreter's;
 * an f32 or f64 one every value of both fp8 types, the ties between neighbours and the values
 * one ulp either side, the overflow thresholds, signed zeros, infinities, NaNs, then random
 * values of fp8's range and random bits; an integer one values in [-600, 600). */

static double tr_f8_val(DType t, unsigned c) {
  return t == DT_F8E5M2 ? hlo_f8e5m2_to_f32((uint8_t)c) : hlo_f8e4m3fn_to_f32((uint8_t)c);
}

static Literal *tr_fp8_arg(HArena *a, const Shape *s, const HModule *m, int seed) {
  (void)m;
  Literal *l = hlo_literal_new(a, s);
  int64_t n = hlo_shape_elems(s), k = 0;
  uint32_t r = 2463534242u + 7919u * (uint32_t)seed;
#define TC_RND() (r ^= r << 13, r ^= r >> 17, r ^= r << 5, r)
  if (hlo_dtype_is_fp8(s->dt)) {
    uint8_t *b = l->data;
    unsigned ebias = s->dt == DT_F8E5M2 ? 15 : 7, m8 = s->dt == DT_F8E5M2 ? 2 : 3;
    for (; k < n; k++) {
      unsigned c = k < 256 ? (unsigned)(k + 37 * seed) & 0xff : TC_RND() & 0xff;
      if (s->rank == 2) /* exponent within 2 of the bias */
        c = (c & 0x80) | ((ebias - 2 + (c >> m8) % 5) << m8) | (c & ((1u << m8) - 1));
      b[k] = (uint8_t)c;
    }
    return l;
  }
  if (!hlo_dtype_is_float(s->dt)) {
    for (; k < n; k++)
      hlo_literal_set_i64(l, k, (int64_t)(TC_RND() % 1200) - 600);
    return l;
  }
  static const DType f8t[2] = {DT_F8E4M3FN, DT_F8E5M2};
  double specials[] = {0,   -0.0, INFINITY, -INFINITY, NAN,  -NAN,
                       464, 480,  61440,    65536,     1e30, 1e-30};
  for (size_t i = 0; i < sizeof specials / sizeof *specials && k < n; i++)
    hlo_literal_set_f64(l, k++, specials[i]);
  for (int t = 0; t < 2; t++)
    for (unsigned c = 0; c < 0x7f && k + 8 <= n; c++) {
      double v = tr_f8_val(f8t[t], c), w = tr_f8_val(f8t[t], c + 1);
      if (isnan(v) || isnan(w) || isinf(w)) continue;
      double mid = (v + w) / 2;
      for (int sg = 1; sg >= -1; sg -= 2) {
        hlo_literal_set_f64(l, k++, sg * v);
        hlo_literal_set_f64(l, k++, sg * mid);
        hlo_literal_set_f64(l, k++, sg * (double)nextafterf((float)mid, 0));
        hlo_literal_set_f64(l, k++, sg * (double)nextafterf((float)mid, INFINITY));
      }
    }
  for (; k < n; k++) {
    uint32_t x = TC_RND();
    if (k % 3 == 0) {
      float f;
      memcpy(&f, &x, 4);
      hlo_literal_set_f64(l, k, f);
    } else {
      hlo_literal_set_f64(l, k,
                          ((double)(x >> 8) / (1 << 24) * 2 - 1) * (k % 3 == 1 ? 70000.0 : 0.02));
    }
  }
#undef TC_RND
  return l;
}

/* text bit for bit on tr_fp8_arg's arguments, as written and after the optimizer. */
static void tr_fp8_both(const char *what, const char *text) {
  char opt[256];
  snprintf(opt, sizeof opt, "%s, optimized", what);
  tr_check_bits_gen(what, text, false, tr_fp8_arg);
  tr_check_bits_gen(opt, text, true, tr_fp8_arg);
}

/* Conversions between f32, f64, f16, bf16, s32, pred and both fp8 types. */
Test(cpu, fp8_converts_bit_for_bit, .timeout = 300) {
  tr_check_bits_gen(
      "fp8 converts",
      "HloModule m\n"
      "ENTRY e {\n"
      "  x = f32[2048] parameter(0)\n"
      "  xd = f64[2048] parameter(1)\n"
      "  i = s32[2048] parameter(2)\n"
      "  a = f8e4m3fn[2048] convert(x)\n"
      "  b = f8e5m2[2048] convert(x)\n"
      "  ab = f8e5m2[2048] convert(a)\n"
      "  ba = f8e4m3fn[2048] convert(b)\n"
      "  xa = f32[2048] convert(a)\n"
      "  da = f8e4m3fn[2048] convert(xd)\n"
      "  db = f8e5m2[2048] convert(xd)\n"
      "  ia = f8e4m3fn[2048] convert(i)\n"
      "  ai = s32[2048] convert(b)\n"
      "  h = f16[2048] convert(x)\n"
      "  hb = f8e5m2[2048] convert(h)\n"
      "  bf = bf16[2048] convert(a)\n"
      "  pb = pred[2048] convert(b)\n"
      "  bp = f8e4m3fn[2048] convert(pb)\n"
      "  ROOT t = (f8e4m3fn[2048], f8e5m2[2048], f8e5m2[2048], f8e4m3fn[2048], f32[2048], "
      "f8e4m3fn[2048], "
      "f8e5m2[2048], f8e4m3fn[2048], s32[2048], f8e5m2[2048], bf16[2048], f8e4m3fn[2048]) "
      "tuple(a, b, ab, ba, xa, da, db, ia, ai, hb, bf, bp)\n"
      "}\n",
      false, tr_fp8_arg);
}

/* Elementwise arithmetic on fp8 operands, each result rounded to fp8 (as written, one kernel
 * per instruction through memory, and fused by the optimizer, in registers), compare, select,
 * bitcast-convert both ways, a constant, and a maximum reduction (exact in any order). */
Test(cpu, fp8_elementwise_bit_for_bit, .timeout = 300) {
  static const char text[] = "HloModule m\n"
                             "mx { p = f8e5m2[] parameter(0)\n q = f8e5m2[] parameter(1)\n ROOT r "
                             "= f8e5m2[] maximum(p, q) }\n"
                             "ENTRY e {\n"
                             "  x = f8e4m3fn[1024] parameter(0)\n"
                             "  y = f8e4m3fn[1024] parameter(1)\n"
                             "  u = f8e5m2[64,16] parameter(2)\n"
                             "  s = f8e4m3fn[1024] add(x, y)\n"
                             "  d = f8e4m3fn[1024] subtract(s, y)\n"
                             "  p = f8e4m3fn[1024] multiply(d, x)\n"
                             "  q = f8e4m3fn[1024] divide(p, y)\n"
                             "  k = f8e4m3fn[] constant(1.375)\n"
                             "  kb = f8e4m3fn[1024] broadcast(k), dimensions={}\n"
                             "  n = f8e4m3fn[1024] negate(q)\n"
                             "  m1 = f8e4m3fn[1024] maximum(n, kb)\n"
                             "  c = pred[1024] compare(x, y), direction=LT\n"
                             "  sel = f8e4m3fn[1024] select(c, m1, s)\n"
                             "  sq = f8e4m3fn[1024] sqrt(sel)\n"
                             "  bc = u8[1024] bitcast-convert(sel)\n"
                             "  z = f8e5m2[] constant(-inf)\n"
                             "  r = f8e5m2[64] reduce(u, z), dimensions={1}, to_apply=mx\n"
                             "  ub = f8e5m2[64,16] multiply(u, u)\n"
                             "  ROOT t = (f8e4m3fn[1024], f8e4m3fn[1024], pred[1024], u8[1024], "
                             "f8e5m2[64], f8e5m2[64,16]) "
                             "tuple(sel, sq, c, bc, r, ub)\n"
                             "}\n";
  tr_fp8_both("fp8 elementwise", text);
}

/* Dots of fp8 operands (mixed types) accumulating in f32, to f32 (the accumulating kernel),
 * bf16 and fp8 results (the elemental one), alone and after the optimizer (fused epilogue). */
Test(cpu, fp8_dots_bit_for_bit, .timeout = 300) {
  static const char text[] =
      "HloModule m\n"
      "ENTRY e {\n"
      "  x = f8e4m3fn[12,16] parameter(0)\n"
      "  y = f8e5m2[16,10] parameter(1)\n"
      "  d = f32[12,10] dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
      "  db = bf16[12,10] dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
      "  d8 = f8e4m3fn[12,10] dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
      "  r = f32[12,10] maximum(d, d)\n"
      "  ROOT t = (f32[12,10], bf16[12,10], f8e4m3fn[12,10]) tuple(r, db, d8)\n"
      "}\n";
  tr_fp8_both("fp8 dots", text);
}

/* An fp8 op the CPU target cannot do is one located line: reduce-precision on fp8. */
Test(cpu, fp8_unsupported_is_a_located_error) {
  static const char text[] =
      "HloModule m\nENTRY e {\n  x = f8e4m3fn[4] parameter(0)\n"
      "  ROOT r = f8e4m3fn[4] reduce-precision(x), exponent_bits=2, mantissa_bits=1\n}\n";
  HErr err = {0};
  HModule *m = hlo_parse_text(text, sizeof text - 1, "rp8.hlo", &err);
  cr_assert(m, "%s", err.msg);
  char *dir = ct_tmpdir("hloc_cpu");
  cr_expect_not(ct_compile(m, dir, "model", 1, &err));
  cr_expect(strstr(err.msg, "rp8.hlo") && strstr(err.msg, "computation 'e'") &&
                strstr(err.msg, "instruction 'r'") && strstr(err.msg, "f8e4m3fn") &&
                !strchr(err.msg, '\n'),
            "%s", err.msg);
  ct_rmdir(dir);
  free(dir);
  hlo_module_free(m);
}
