/* tests/test_interp.c: the reference interpreter (hlo/interp.c and its window ops).
 *
 * Unit tests run small HLO text modules whose expected results are worked out by hand (or by
 * a plain loop written independently of the interpreter), one op family at a time, with the
 * edge cases XLA defines (NaN in maximum/minimum, integer division by zero, out-of-range
 * shifts, saturating conversions, TOTALORDER comparisons). The fixture test runs every model
 * in the corpus (module.hlo and, when the proto reader is built, module.pb) on its inputs and
 * compares with XLA's outputs: |got - want| <= atol + rtol * |want|. */
#include <criterion/criterion.h>

#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hlo.h"
#if __has_include("proto.h")
#include "proto.h"
#define HAVE_PROTO 1
#endif

/* ------------------------------------------------------------------ helpers */

static HModule *parse(const char *text) {
  HErr e = {0};
  HModule *m = hlo_parse_text(text, strlen(text), "test.hlo", &e);
  cr_assert(m, "parse failed: %s", e.msg);
  return m;
}

/* Parse text and run it on args; asserts success. */
static Literal *run(HArena *a, const char *text, Literal **args, int nargs) {
  HModule *m = parse(text);
  HErr e = {0};
  Literal *r = hlo_interp_run(m, a, args, nargs, &e);
  cr_assert(r, "interpreter failed: %s", e.msg);
  /* the result lives in a: the module can go */
  hlo_module_free(m);
  return r;
}

/* Parse and run, expecting a located error containing `want`. */
static void run_fails(const char *text, Literal **args, int nargs, const char *want) {
  HModule *m = parse(text);
  HArena *a = hlo_arena_new();
  HErr e = {0};
  Literal *r = hlo_interp_run(m, a, args, nargs, &e);
  cr_assert_null(r, "expected failure '%s'", want);
  cr_assert(e.set);
  cr_assert(strstr(e.msg, want), "error '%s' does not mention '%s'", e.msg, want);
  cr_assert(strstr(e.msg, "test.hlo"), "error '%s' is not located", e.msg);
  hlo_arena_free(a);
  hlo_module_free(m);
}

static Literal *mk(HArena *a, DType dt, int rank, const int64_t *dims, const double *v) {
  Shape s = hlo_shape_array(dt, rank, dims);
  Literal *l = hlo_literal_new(a, &s);
  for (int64_t i = 0; i < hlo_shape_elems(&s); i++)
    hlo_literal_set_f64(l, i, v[i]);
  return l;
}

static bool same_f(double g, double w) {
  if (isnan(w)) return isnan(g);
  return g == w;
}

/* Checks an array literal's dtype, element count and values (exact; NaN matches NaN). */
static void expect_f(const Literal *l, DType dt, int64_t n, const double *want) {
  cr_assert(hlo_shape_is_array(&l->shape), "result is not an array");
  cr_assert_eq(l->shape.dt, dt, "dtype %s, expected %s", hlo_dtype_name(l->shape.dt),
               hlo_dtype_name(dt));
  cr_assert_eq(hlo_shape_elems(&l->shape), n, "%lld elements, expected %lld",
               (long long)hlo_shape_elems(&l->shape), (long long)n);
  for (int64_t i = 0; i < n; i++) {
    double g = hlo_literal_get_f64(l, i);
    cr_assert(same_f(g, want[i]), "element %lld: got %.9g, expected %.9g", (long long)i, g,
              want[i]);
  }
}

static void expect_i(const Literal *l, DType dt, int64_t n, const int64_t *want) {
  cr_assert(hlo_shape_is_array(&l->shape), "result is not an array");
  cr_assert_eq(l->shape.dt, dt, "dtype %s, expected %s", hlo_dtype_name(l->shape.dt),
               hlo_dtype_name(dt));
  cr_assert_eq(hlo_shape_elems(&l->shape), n);
  for (int64_t i = 0; i < n; i++) {
    int64_t g = hlo_literal_get_i64(l, i);
    cr_assert_eq(g, want[i], "element %lld: got %lld, expected %lld", (long long)i, (long long)g,
                 (long long)want[i]);
  }
}

#define F(...) ((const double[]){__VA_ARGS__})
#define I(...) ((const int64_t[]){__VA_ARGS__})
#define NF(...) (int64_t)(sizeof(F(__VA_ARGS__)) / sizeof(double)), F(__VA_ARGS__)
#define NI(...) (int64_t)(sizeof(I(__VA_ARGS__)) / sizeof(int64_t)), I(__VA_ARGS__)

/* ------------------------------------------------------------------ elementwise */

Test(interp, max_min_propagate_nan) {
  HArena *a = hlo_arena_new();
  const char *t = "HloModule t\n"
                  "ENTRY e {\n"
                  "  a = f32[5] constant({1, nan, -2, 0, 5})\n"
                  "  b = f32[5] constant({2, 3, nan, 0, -inf})\n"
                  "  mx = f32[5] maximum(a, b)\n"
                  "  mn = f32[5] minimum(a, b)\n"
                  "  ROOT r = (f32[5], f32[5]) tuple(mx, mn)\n"
                  "}\n";
  Literal *r = run(a, t, NULL, 0);
  cr_assert_eq(r->shape.dt, DT_TUPLE);
  expect_f(r->elems[0], DT_F32, NF(2, NAN, NAN, 0, 5));
  expect_f(r->elems[1], DT_F32, NF(1, NAN, NAN, 0, -INFINITY));
  hlo_arena_free(a);
}

Test(interp, float_arith_and_unary) {
  HArena *a = hlo_arena_new();
  const char *t = "HloModule t\n"
                  "ENTRY e {\n"
                  "  a = f32[4] constant({1, -2.5, 9, 0.5})\n"
                  "  b = f32[4] constant({4, 2, -2, 0})\n"
                  "  add = f32[4] add(a, b)\n"
                  "  sub = f32[4] subtract(a, b)\n"
                  "  mul = f32[4] multiply(a, b)\n"
                  "  div = f32[4] divide(a, b)\n"
                  "  rem = f32[4] remainder(a, b)\n"
                  "  pw = f32[4] power(a, b)\n"
                  "  ab = f32[4] abs(a)\n"
                  "  ng = f32[4] negate(a)\n"
                  "  sg = f32[4] sign(a)\n"
                  "  fl = f32[4] floor(a)\n"
                  "  ce = f32[4] ceil(a)\n"
                  "  re = f32[4] round-nearest-even(a)\n"
                  "  ra = f32[4] round-nearest-afz(a)\n"
                  "  ROOT r = (f32[4], f32[4], f32[4], f32[4], f32[4], f32[4], f32[4], f32[4], "
                  "f32[4], f32[4], f32[4], f32[4], f32[4]) tuple(add, sub, mul, div, rem, pw, ab, "
                  "ng, sg, fl, ce, re, ra)\n"
                  "}\n";
  Literal *r = run(a, t, NULL, 0);
  expect_f(r->elems[0], DT_F32, NF(5, -0.5, 7, 0.5));
  expect_f(r->elems[1], DT_F32, NF(-3, -4.5, 11, 0.5));
  expect_f(r->elems[2], DT_F32, NF(4, -5, -18, 0));
  expect_f(r->elems[3], DT_F32, NF(0.25, -1.25, -4.5, INFINITY));
  expect_f(r->elems[4], DT_F32, NF(1, -0.5, 1, NAN));
  expect_f(r->elems[5], DT_F32, NF(1, 6.25, (float)(1.0 / 81), 1));
  expect_f(r->elems[6], DT_F32, NF(1, 2.5, 9, 0.5));
  expect_f(r->elems[7], DT_F32, NF(-1, 2.5, -9, -0.5));
  expect_f(r->elems[8], DT_F32, NF(1, -1, 1, 1));
  expect_f(r->elems[9], DT_F32, NF(1, -3, 9, 0));
  expect_f(r->elems[10], DT_F32, NF(1, -2, 9, 1));
  expect_f(r->elems[11], DT_F32, NF(1, -2, 9, 0));
  expect_f(r->elems[12], DT_F32, NF(1, -3, 9, 1));
  hlo_arena_free(a);
}

Test(interp, transcendental_f32_and_f64) {
  HArena *a = hlo_arena_new();
  const char *t = "HloModule t\n"
                  "ENTRY e {\n"
                  "  x = f32[3] constant({0, 1, -2})\n"
                  "  ex = f32[3] exponential(x)\n"
                  "  th = f32[3] tanh(x)\n"
                  "  lg = f32[3] logistic(x)\n"
                  "  y = f64[2] constant({4, 0.25})\n"
                  "  rs = f64[2] rsqrt(y)\n"
                  "  sq = f64[2] sqrt(y)\n"
                  "  lo = f64[2] log(y)\n"
                  "  fin = pred[3] is-finite(ex)\n"
                  "  ROOT r = (f32[3], f32[3], f32[3], f64[2], f64[2], f64[2], pred[3]) "
                  "tuple(ex, th, lg, rs, sq, lo, fin)\n"
                  "}\n";
  Literal *r = run(a, t, NULL, 0);
  expect_f(r->elems[0], DT_F32, NF(1, (float)exp(1.0), (float)exp(-2.0)));
  expect_f(r->elems[1], DT_F32, NF(0, (float)tanh(1.0), (float)tanh(-2.0)));
  expect_f(r->elems[2], DT_F32, NF(0.5, (float)(1 / (1 + exp(-1.0))), (float)(1 / (1 + exp(2.0)))));
  expect_f(r->elems[3], DT_F64, NF(0.5, 2));
  expect_f(r->elems[4], DT_F64, NF(2, 0.5));
  expect_f(r->elems[5], DT_F64, NF(log(4.0), log(0.25)));
  expect_i(r->elems[6], DT_PRED, NI(1, 1, 1));
  hlo_arena_free(a);
}

Test(interp, integer_division_edge_cases) {
  HArena *a = hlo_arena_new();
  const char *t = "HloModule t\n"
                  "ENTRY e {\n"
                  "  a = s32[6] constant({7, -7, 5, -2147483648, 3, -5})\n"
                  "  b = s32[6] constant({2, 2, 0, -1, -1, 0})\n"
                  "  d = s32[6] divide(a, b)\n"
                  "  m = s32[6] remainder(a, b)\n"
                  "  ua = u32[3] constant({7, 4294967295, 9})\n"
                  "  ub = u32[3] constant({0, 2, 4})\n"
                  "  ud = u32[3] divide(ua, ub)\n"
                  "  um = u32[3] remainder(ua, ub)\n"
                  "  la = s64[2] constant({-9223372036854775808, 9})\n"
                  "  lb = s64[2] constant({-1, 0})\n"
                  "  ld = s64[2] divide(la, lb)\n"
                  "  ROOT r = (s32[6], s32[6], u32[3], u32[3], s64[2]) tuple(d, m, ud, um, ld)\n"
                  "}\n";
  Literal *r = run(a, t, NULL, 0);
  expect_i(r->elems[0], DT_S32, NI(3, -3, -1, INT32_MIN, -3, -1));
  expect_i(r->elems[1], DT_S32, NI(1, -1, 5, 0, 0, -5));
  expect_i(r->elems[2], DT_U32, NI(4294967295, 2147483647, 2));
  expect_i(r->elems[3], DT_U32, NI(7, 1, 1));
  expect_i(r->elems[4], DT_S64, NI(INT64_MIN, -1));
  hlo_arena_free(a);
}

Test(interp, integer_arith_wraps) {
  HArena *a = hlo_arena_new();
  const char *t =
      "HloModule t\n"
      "ENTRY e {\n"
      "  a = s8[4] constant({127, -128, 100, -3})\n"
      "  b = s8[4] constant({1, -1, 2, 5})\n"
      "  add = s8[4] add(a, b)\n"
      "  mul = s8[4] multiply(a, b)\n"
      "  ng = s8[4] negate(a)\n"
      "  ab = s8[4] abs(a)\n"
      "  mx = s8[4] maximum(a, b)\n"
      "  p = s32[5] constant({2, 3, 1, -1, 2})\n"
      "  q = s32[5] constant({10, 0, -3, -2, -1})\n"
      "  pw = s32[5] power(p, q)\n"
      "  ROOT r = (s8[4], s8[4], s8[4], s8[4], s8[4], s32[5]) tuple(add, mul, ng, ab, mx, pw)\n"
      "}\n";
  Literal *r = run(a, t, NULL, 0);
  expect_i(r->elems[0], DT_S8, NI(-128, 127, 102, 2));
  expect_i(r->elems[1], DT_S8, NI(127, -128, -56, -15));
  expect_i(r->elems[2], DT_S8, NI(-127, -128, -100, 3));
  expect_i(r->elems[3], DT_S8, NI(127, -128, 100, 3));
  expect_i(r->elems[4], DT_S8, NI(127, -1, 100, 5));
  expect_i(r->elems[5], DT_S32, NI(1024, 1, 1, 0, 0));
  hlo_arena_free(a);
}

Test(interp, shifts_out_of_range) {
  HArena *a = hlo_arena_new();
  const char *t = "HloModule t\n"
                  "ENTRY e {\n"
                  "  a = s32[5] constant({1, 1, 1, -1, 5})\n"
                  "  b = s32[5] constant({3, 32, -1, 31, 0})\n"
                  "  shl = s32[5] shift-left(a, b)\n"
                  "  c = s32[4] constant({-8, -8, 8, -1})\n"
                  "  d = s32[4] constant({1, 40, 40, 31})\n"
                  "  sra = s32[4] shift-right-arithmetic(c, d)\n"
                  "  e = s32[3] constant({-8, 8, -1})\n"
                  "  f = s32[3] constant({28, 32, -5})\n"
                  "  srl = s32[3] shift-right-logical(e, f)\n"
                  "  g = u8[2] constant({128, 128})\n"
                  "  h = u8[2] constant({1, 9})\n"
                  "  usra = u8[2] shift-right-arithmetic(g, h)\n"
                  "  ROOT r = (s32[5], s32[4], s32[3], u8[2]) tuple(shl, sra, srl, usra)\n"
                  "}\n";
  Literal *r = run(a, t, NULL, 0);
  expect_i(r->elems[0], DT_S32, NI(8, 0, 0, INT32_MIN, 5));
  expect_i(r->elems[1], DT_S32, NI(-4, -1, 0, -1));
  expect_i(r->elems[2], DT_S32, NI(15, 0, 0));
  expect_i(r->elems[3], DT_U8, NI(192, 255));
  hlo_arena_free(a);
}

Test(interp, bitwise_logic_clz_popcnt) {
  HArena *a = hlo_arena_new();
  const char *t =
      "HloModule t\n"
      "ENTRY e {\n"
      "  a = u8[3] constant({12, 255, 1})\n"
      "  b = u8[3] constant({10, 15, 0})\n"
      "  an = u8[3] and(a, b)\n"
      "  o = u8[3] or(a, b)\n"
      "  x = u8[3] xor(a, b)\n"
      "  n = u8[3] not(a)\n"
      "  cz = u8[3] count-leading-zeros(a)\n"
      "  pc = u8[3] popcnt(a)\n"
      "  p = pred[4] constant({true, true, false, false})\n"
      "  q = pred[4] constant({true, false, true, false})\n"
      "  pa = pred[4] and(p, q)\n"
      "  po = pred[4] or(p, q)\n"
      "  px = pred[4] xor(p, q)\n"
      "  pn = pred[4] not(p)\n"
      "  ROOT r = (u8[3], u8[3], u8[3], u8[3], u8[3], u8[3], pred[4], pred[4], pred[4], "
      "pred[4]) tuple(an, o, x, n, cz, pc, pa, po, px, pn)\n"
      "}\n";
  Literal *r = run(a, t, NULL, 0);
  expect_i(r->elems[0], DT_U8, NI(8, 15, 0));
  expect_i(r->elems[1], DT_U8, NI(14, 255, 1));
  expect_i(r->elems[2], DT_U8, NI(6, 240, 1));
  expect_i(r->elems[3], DT_U8, NI(243, 0, 254));
  expect_i(r->elems[4], DT_U8, NI(4, 0, 7));
  expect_i(r->elems[5], DT_U8, NI(2, 8, 1));
  expect_i(r->elems[6], DT_PRED, NI(1, 0, 0, 0));
  expect_i(r->elems[7], DT_PRED, NI(1, 1, 1, 0));
  expect_i(r->elems[8], DT_PRED, NI(0, 1, 1, 0));
  expect_i(r->elems[9], DT_PRED, NI(0, 0, 1, 1));
  hlo_arena_free(a);
}

Test(interp, compare_directions_and_types) {
  HArena *a = hlo_arena_new();
  const char *t = "HloModule t\n"
                  "ENTRY e {\n"
                  "  a = f32[4] constant({1, 2, nan, -0})\n"
                  "  b = f32[4] constant({2, 2, nan, 0})\n"
                  "  lt = pred[4] compare(a, b), direction=LT\n"
                  "  le = pred[4] compare(a, b), direction=LE\n"
                  "  eq = pred[4] compare(a, b), direction=EQ\n"
                  "  ne = pred[4] compare(a, b), direction=NE\n"
                  "  ge = pred[4] compare(a, b), direction=GE\n"
                  "  gt = pred[4] compare(a, b), direction=GT\n"
                  "  tlt = pred[4] compare(a, b), direction=LT, type=TOTALORDER\n"
                  "  teq = pred[4] compare(a, b), direction=EQ, type=TOTALORDER\n"
                  "  i = s32[3] constant({-1, 5, 7})\n"
                  "  j = s32[3] constant({1, 5, 3})\n"
                  "  slt = pred[3] compare(i, j), direction=LT\n"
                  "  u = u32[2] constant({4294967295, 1})\n"
                  "  v = u32[2] constant({1, 2})\n"
                  "  ugt = pred[2] compare(u, v), direction=GT\n"
                  "  ROOT r = (pred[4], pred[4], pred[4], pred[4], pred[4], pred[4], pred[4], "
                  "pred[4], pred[3], pred[2]) tuple(lt, le, eq, ne, ge, gt, tlt, teq, slt, ugt)\n"
                  "}\n";
  Literal *r = run(a, t, NULL, 0);
  expect_i(r->elems[0], DT_PRED, NI(1, 0, 0, 0));
  expect_i(r->elems[1], DT_PRED, NI(1, 1, 0, 1));
  expect_i(r->elems[2], DT_PRED, NI(0, 1, 0, 1));
  expect_i(r->elems[3], DT_PRED, NI(1, 0, 1, 0));
  expect_i(r->elems[4], DT_PRED, NI(0, 1, 0, 1));
  expect_i(r->elems[5], DT_PRED, NI(0, 0, 0, 0));
  expect_i(r->elems[6], DT_PRED, NI(1, 0, 0, 1)); /* -0 < +0 in total order */
  expect_i(r->elems[7], DT_PRED, NI(0, 1, 1, 0)); /* NaN == NaN in total order */
  expect_i(r->elems[8], DT_PRED, NI(1, 0, 0));
  expect_i(r->elems[9], DT_PRED, NI(1, 0));
  hlo_arena_free(a);
}

Test(interp, convert_saturates_and_wraps) {
  HArena *a = hlo_arena_new();
  const char *t = "HloModule t\n"
                  "ENTRY e {\n"
                  "  f = f32[6] constant({1e10, -1e10, nan, 2.7, -2.7, inf})\n"
                  "  s = s32[6] convert(f)\n"
                  "  g = f32[3] constant({300, -5, 254.9})\n"
                  "  u = u8[3] convert(g)\n"
                  "  i = s32[3] constant({300, -129, 65})\n"
                  "  w = s8[3] convert(i)\n"
                  "  z = f32[3] constant({0, nan, -2})\n"
                  "  p = pred[3] convert(z)\n"
                  "  q = f32[3] convert(p)\n"
                  "  l = s64[1] constant({16777217})\n"
                  "  lf = f32[1] convert(l)\n"
                  "  h = f32[2] constant({1.5, 65504})\n"
                  "  hf = f16[2] convert(h)\n"
                  "  bf = bf16[1] constant({1.5})\n"
                  "  bff = f32[1] convert(bf)\n"
                  "  ROOT r = (s32[6], u8[3], s8[3], pred[3], f32[3], f32[1], f16[2], f32[1]) "
                  "tuple(s, u, w, p, q, lf, hf, bff)\n"
                  "}\n";
  Literal *r = run(a, t, NULL, 0);
  expect_i(r->elems[0], DT_S32, NI(INT32_MAX, INT32_MIN, 0, 2, -2, INT32_MAX));
  expect_i(r->elems[1], DT_U8, NI(255, 0, 254));
  expect_i(r->elems[2], DT_S8, NI(44, 127, 65));
  expect_i(r->elems[3], DT_PRED, NI(0, 1, 1));
  expect_f(r->elems[4], DT_F32, NF(0, 1, 1));
  expect_f(r->elems[5], DT_F32, NF(16777216));
  expect_f(r->elems[6], DT_F16, NF(1.5, 65504));
  expect_f(r->elems[7], DT_F32, NF(1.5));
  hlo_arena_free(a);
}

Test(interp, bitcast_convert_and_reduce_precision) {
  HArena *a = hlo_arena_new();
  const char *t = "HloModule t\n"
                  "ENTRY e {\n"
                  "  f = f32[2] constant({1, -2})\n"
                  "  b = s32[2] bitcast-convert(f)\n"
                  "  u = u8[2,4] bitcast-convert(f)\n"
                  "  x = f32[4] constant({1.00390625, 1.01171875, 1e39, nan})\n"
                  "  rp = f32[4] reduce-precision(x), exponent_bits=8, mantissa_bits=7\n"
                  "  y = f32[2] constant({70000, 1e-8})\n"
                  "  hp = f32[2] reduce-precision(y), exponent_bits=5, mantissa_bits=10\n"
                  "  ROOT r = (s32[2], u8[2,4], f32[4], f32[2]) tuple(b, u, rp, hp)\n"
                  "}\n";
  Literal *r = run(a, t, NULL, 0);
  expect_i(r->elems[0], DT_S32, NI(0x3f800000, (int32_t)0xc0000000));
  expect_i(r->elems[1], DT_U8, NI(0, 0, 0x80, 0x3f, 0, 0, 0, 0xc0));
  expect_f(r->elems[2], DT_F32, NF(1.0, 1.015625, INFINITY, NAN));
  expect_f(r->elems[3], DT_F32, NF(INFINITY, 0));
  hlo_arena_free(a);
}

Test(interp, select_clamp_iota) {
  HArena *a = hlo_arena_new();
  const char *t =
      "HloModule t\n"
      "ENTRY e {\n"
      "  p = pred[4] constant({true, false, true, false})\n"
      "  x = f32[4] constant({1, 2, 3, 4})\n"
      "  y = f32[4] constant({-1, -2, -3, -4})\n"
      "  s = f32[4] select(p, x, y)\n"
      "  lo = f32[] constant(0)\n"
      "  hi = f32[] constant(2.5)\n"
      "  v = f32[5] constant({-1, 0.5, 3, nan, 2.5})\n"
      "  c = f32[5] clamp(lo, v, hi)\n"
      "  il = s32[4] constant({0, -5, 5, 10})\n"
      "  ih = s32[4] constant({3, -1, 6, 20})\n"
      "  iv = s32[4] constant({7, -9, 5, 15})\n"
      "  ic = s32[4] clamp(il, iv, ih)\n"
      "  io = s32[2,3] iota(), iota_dimension=1\n"
      "  iof = f32[2,3] iota(), iota_dimension=0\n"
      "  ROOT r = (f32[4], f32[5], s32[4], s32[2,3], f32[2,3]) tuple(s, c, ic, io, iof)\n"
      "}\n";
  Literal *r = run(a, t, NULL, 0);
  expect_f(r->elems[0], DT_F32, NF(1, -2, 3, -4));
  expect_f(r->elems[1], DT_F32, NF(0, 0.5, 2.5, NAN, 2.5));
  expect_i(r->elems[2], DT_S32, NI(3, -5, 5, 15));
  expect_i(r->elems[3], DT_S32, NI(0, 1, 2, 0, 1, 2));
  expect_f(r->elems[4], DT_F32, NF(0, 0, 0, 1, 1, 1));
  hlo_arena_free(a);
}

/* ------------------------------------------------------------------ data movement */

Test(interp, broadcast_transpose_reshape) {
  HArena *a = hlo_arena_new();
  const char *t = "HloModule t\n"
                  "ENTRY e {\n"
                  "  v = f32[3] constant({1, 2, 3})\n"
                  "  b0 = f32[2,3] broadcast(v), dimensions={1}\n"
                  "  b1 = f32[3,2] broadcast(v), dimensions={0}\n"
                  "  s = f32[] constant(7)\n"
                  "  bs = f32[2,2] broadcast(s), dimensions={}\n"
                  "  m = f32[2,3] constant({{1, 2, 3}, {4, 5, 6}})\n"
                  "  tr = f32[3,2] transpose(m), dimensions={1,0}\n"
                  "  rs = f32[3,2] reshape(m)\n"
                  "  c = s32[2,3,4] iota(), iota_dimension=2\n"
                  "  t3 = s32[4,2,3] transpose(c), dimensions={2,0,1}\n"
                  "  ROOT r = (f32[2,3], f32[3,2], f32[2,2], f32[3,2], f32[3,2], s32[4,2,3]) "
                  "tuple(b0, b1, bs, tr, rs, t3)\n"
                  "}\n";
  Literal *r = run(a, t, NULL, 0);
  expect_f(r->elems[0], DT_F32, NF(1, 2, 3, 1, 2, 3));
  expect_f(r->elems[1], DT_F32, NF(1, 1, 2, 2, 3, 3));
  expect_f(r->elems[2], DT_F32, NF(7, 7, 7, 7));
  expect_f(r->elems[3], DT_F32, NF(1, 4, 2, 5, 3, 6));
  expect_f(r->elems[4], DT_F32, NF(1, 2, 3, 4, 5, 6));
  int64_t want[24];
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 6; j++)
      want[i * 6 + j] = i; /* t3[i][j][k] = c[j][k][i] = i */
  expect_i(r->elems[5], DT_S32, 24, want);
  hlo_arena_free(a);
}

Test(interp, reverse_slice_concatenate) {
  HArena *a = hlo_arena_new();
  const char *t = "HloModule t\n"
                  "ENTRY e {\n"
                  "  m = f32[2,3] constant({{1, 2, 3}, {4, 5, 6}})\n"
                  "  r0 = f32[2,3] reverse(m), dimensions={0}\n"
                  "  r01 = f32[2,3] reverse(m), dimensions={0,1}\n"
                  "  v = s32[10] iota(), iota_dimension=0\n"
                  "  sl = s32[3] slice(v), slice={[1:8:3]}\n"
                  "  sm = f32[1,2] slice(m), slice={[1:2], [0:3:2]}\n"
                  "  c0 = f32[4,3] concatenate(m, r0), dimensions={0}\n"
                  "  n = f32[2,1] constant({{9}, {8}})\n"
                  "  c1 = f32[2,4] concatenate(m, n), dimensions={1}\n"
                  "  ROOT r = (f32[2,3], f32[2,3], s32[3], f32[1,2], f32[4,3], f32[2,4]) "
                  "tuple(r0, r01, sl, sm, c0, c1)\n"
                  "}\n";
  Literal *r = run(a, t, NULL, 0);
  expect_f(r->elems[0], DT_F32, NF(4, 5, 6, 1, 2, 3));
  expect_f(r->elems[1], DT_F32, NF(6, 5, 4, 3, 2, 1));
  expect_i(r->elems[2], DT_S32, NI(1, 4, 7));
  expect_f(r->elems[3], DT_F32, NF(4, 6));
  expect_f(r->elems[4], DT_F32, NF(1, 2, 3, 4, 5, 6, 4, 5, 6, 1, 2, 3));
  expect_f(r->elems[5], DT_F32, NF(1, 2, 3, 9, 4, 5, 6, 8));
  hlo_arena_free(a);
}

Test(interp, tuple_gte_parameters) {
  HArena *a = hlo_arena_new();
  const char *t2 = "HloModule t\n"
                   "ENTRY e {\n"
                   "  p = (f32[2], s32[]) parameter(0)\n"
                   "  x = f32[2] get-tuple-element(p), index=0\n"
                   "  k = s32[] get-tuple-element(p), index=1\n"
                   "  kf = f32[] convert(k)\n"
                   "  kb = f32[2] broadcast(kf), dimensions={}\n"
                   "  y = f32[2] multiply(x, kb)\n"
                   "  in = (s32[], f32[2]) tuple(k, x)\n"
                   "  ROOT r = (f32[2], (s32[], f32[2])) tuple(y, in)\n"
                   "}\n";
  Shape es[2] = {hlo_shape_array(DT_F32, 1, (int64_t[]){2}), hlo_shape_scalar(DT_S32)};
  Shape ts = hlo_shape_tuple(a, 2, es);
  Literal *arg = hlo_literal_new(a, &ts);
  hlo_literal_set_f64(arg->elems[0], 0, 1.5);
  hlo_literal_set_f64(arg->elems[0], 1, -2);
  hlo_literal_set_i64(arg->elems[1], 0, 3);
  Literal *r = run(a, t2, &arg, 1);
  expect_f(r->elems[0], DT_F32, NF(4.5, -6));
  cr_assert_eq(r->elems[1]->shape.dt, DT_TUPLE);
  expect_i(r->elems[1]->elems[0], DT_S32, NI(3));
  expect_f(r->elems[1]->elems[1], DT_F32, NF(1.5, -2));
  hlo_arena_free(a);
}

/* ------------------------------------------------------------------ reduce, dot */

Test(interp, reduce_multi_dim) {
  HArena *a = hlo_arena_new();
  const char *t = "HloModule t\n"
                  "sum {\n"
                  "  a = f32[] parameter(0)\n"
                  "  b = f32[] parameter(1)\n"
                  "  ROOT c = f32[] add(a, b)\n"
                  "}\n"
                  "mx {\n"
                  "  a = s32[] parameter(0)\n"
                  "  b = s32[] parameter(1)\n"
                  "  ROOT c = s32[] maximum(b, a)\n"
                  "}\n"
                  "ENTRY e {\n"
                  "  x = f32[2,3,4] parameter(0)\n"
                  "  z = f32[] constant(0.5)\n"
                  "  r02 = f32[3] reduce(x, z), dimensions={2,0}, to_apply=sum\n"
                  "  r1 = f32[2,4] reduce(x, z), dimensions={1}, to_apply=sum\n"
                  "  all = f32[] reduce(x, z), dimensions={0,1,2}, to_apply=sum\n"
                  "  i = s32[2,3,4] convert(x)\n"
                  "  m = s32[] constant(-100)\n"
                  "  im = s32[3] reduce(i, m), dimensions={0,2}, to_apply=mx\n"
                  "  ROOT r = (f32[3], f32[2,4], f32[], s32[3]) tuple(r02, r1, all, im)\n"
                  "}\n";
  double v[24];
  for (int i = 0; i < 24; i++)
    v[i] = (i * 7) % 11 - 3;
  Literal *x = mk(a, DT_F32, 3, (int64_t[]){2, 3, 4}, v);
  Literal *r = run(a, t, &x, 1);
  double w02[3] = {0.5, 0.5, 0.5}, w1[8], wall = 0.5;
  int64_t wm[3] = {-100, -100, -100};
  for (int i = 0; i < 8; i++)
    w1[i] = 0.5;
  for (int p = 0; p < 2; p++)
    for (int q = 0; q < 3; q++)
      for (int s = 0; s < 4; s++) {
        double e = v[p * 12 + q * 4 + s];
        w02[q] += e;
        w1[p * 4 + s] += e;
        wall += e;
        if ((int64_t)e > wm[q]) wm[q] = (int64_t)e;
      }
  expect_f(r->elems[0], DT_F32, 3, w02);
  expect_f(r->elems[1], DT_F32, 8, w1);
  expect_f(r->elems[2], DT_F32, 1, &wall);
  expect_i(r->elems[3], DT_S32, 3, wm);
  hlo_arena_free(a);
}

/* argmax as JAX writes it: a variadic reduce over (value, index) with ties to the lowest
 * index; the reducer is not a single binary op, so this takes the general path. */
static const char *argmax_hlo = "HloModule t\n"
                                "argmax {\n"
                                "  av = f32[] parameter(0)\n"
                                "  ai = s32[] parameter(1)\n"
                                "  bv = f32[] parameter(2)\n"
                                "  bi = s32[] parameter(3)\n"
                                "  gt = pred[] compare(av, bv), direction=GT\n"
                                "  eq = pred[] compare(av, bv), direction=EQ\n"
                                "  lt = pred[] compare(ai, bi), direction=LT\n"
                                "  tie = pred[] and(eq, lt)\n"
                                "  take = pred[] or(gt, tie)\n"
                                "  v = f32[] select(take, av, bv)\n"
                                "  i = s32[] select(take, ai, bi)\n"
                                "  ROOT r = (f32[], s32[]) tuple(v, i)\n"
                                "}\n"
                                "ENTRY e {\n"
                                "  x = f32[2,5] parameter(0)\n"
                                "  idx = s32[2,5] iota(), iota_dimension=1\n"
                                "  ninf = f32[] constant(-inf)\n"
                                "  zero = s32[] constant(0)\n"
                                "  ROOT r = (f32[2], s32[2]) reduce(x, idx, ninf, zero), "
                                "dimensions={1}, to_apply=argmax\n"
                                "}\n";

Test(interp, reduce_variadic_argmax) {
  HArena *a = hlo_arena_new();
  Literal *x = mk(a, DT_F32, 2, (int64_t[]){2, 5}, F(3, 7, 1, 7, -2, -5, -4, -9, -4, -6));
  Literal *r = run(a, argmax_hlo, &x, 1);
  expect_f(r->elems[0], DT_F32, NF(7, -4));
  expect_i(r->elems[1], DT_S32, NI(1, 1));
  hlo_arena_free(a);
}

/* A reducer that is not a single op over many elements: memory must stay bounded (the
 * per-element calls run in a recycled scratch arena). */
Test(interp, reduce_general_reducer_memory) {
  HArena *a = hlo_arena_new();
  const char *t = "HloModule t\n"
                  "r {\n"
                  "  a = f32[] parameter(0)\n"
                  "  b = f32[] parameter(1)\n"
                  "  one = f32[] constant(1)\n"
                  "  bb = f32[] multiply(b, one)\n"
                  "  ROOT c = f32[] add(a, bb)\n"
                  "}\n"
                  "ENTRY e {\n"
                  "  x = f32[4,100000] iota(), iota_dimension=0\n"
                  "  z = f32[] constant(0)\n"
                  "  ROOT s = f32[4] reduce(x, z), dimensions={1}, to_apply=r\n"
                  "}\n";
  Literal *r = run(a, t, NULL, 0);
  expect_f(r, DT_F32, NF(0, 100000, 200000, 300000));
  size_t used = hlo_arena_used(a);
  cr_assert_lt(used, (size_t)16 << 20, "arena grew to %zu bytes", used);
  hlo_arena_free(a);
}

Test(interp, dot_batch_and_contracting) {
  HArena *a = hlo_arena_new();
  const char *t = "HloModule t\n"
                  "ENTRY e {\n"
                  "  x = f32[2,2,3] parameter(0)\n"
                  "  y = f32[2,3,4] parameter(1)\n"
                  "  ROOT d = f32[2,2,4] dot(x, y), lhs_batch_dims={0}, lhs_contracting_dims={2}, "
                  "rhs_batch_dims={0}, rhs_contracting_dims={1}\n"
                  "}\n";
  double xv[12], yv[24], want[16] = {0};
  for (int i = 0; i < 12; i++)
    xv[i] = i - 4;
  for (int i = 0; i < 24; i++)
    yv[i] = (i % 5) * 0.5;
  for (int b = 0; b < 2; b++)
    for (int i = 0; i < 2; i++)
      for (int j = 0; j < 4; j++)
        for (int k = 0; k < 3; k++)
          want[b * 8 + i * 4 + j] += xv[b * 6 + i * 3 + k] * yv[b * 12 + k * 4 + j];
  Literal *args[2] = {mk(a, DT_F32, 3, (int64_t[]){2, 2, 3}, xv),
                      mk(a, DT_F32, 3, (int64_t[]){2, 3, 4}, yv)};
  Literal *r = run(a, t, args, 2);
  expect_f(r, DT_F32, 16, want);

  /* contracting the lhs's first dim and the rhs's last; integer operands */
  const char *t2 =
      "HloModule t\n"
      "ENTRY e {\n"
      "  x = s32[3,2] constant({{1, 2}, {3, 4}, {5, 6}})\n"
      "  y = s32[2,3] constant({{1, 0, -1}, {2, 1, 0}})\n"
      "  ROOT d = s32[2,2] dot(x, y), lhs_contracting_dims={0}, rhs_contracting_dims={1}\n"
      "}\n";
  /* d[i][j] = sum_k x[k][i] * y[j][k] */
  Literal *r2 = run(a, t2, NULL, 0);
  expect_i(r2, DT_S32, NI(1 - 5, 2 + 3, 2 - 6, 4 + 4));
  hlo_arena_free(a);
}

/* ------------------------------------------------------------------ control flow */

Test(interp, while_loop_counts) {
  HArena *a = hlo_arena_new();
  const char *t = "HloModule t\n"
                  "body {\n"
                  "  p = (s32[], f32[2]) parameter(0)\n"
                  "  i = s32[] get-tuple-element(p), index=0\n"
                  "  x = f32[2] get-tuple-element(p), index=1\n"
                  "  one = s32[] constant(1)\n"
                  "  i1 = s32[] add(i, one)\n"
                  "  two = f32[] constant(2)\n"
                  "  tb = f32[2] broadcast(two), dimensions={}\n"
                  "  x2 = f32[2] multiply(x, tb)\n"
                  "  ROOT r = (s32[], f32[2]) tuple(i1, x2)\n"
                  "}\n"
                  "cond {\n"
                  "  p = (s32[], f32[2]) parameter(0)\n"
                  "  i = s32[] get-tuple-element(p), index=0\n"
                  "  n = s32[] constant(10)\n"
                  "  ROOT lt = pred[] compare(i, n), direction=LT\n"
                  "}\n"
                  "ENTRY e {\n"
                  "  z = s32[] constant(0)\n"
                  "  x = f32[2] constant({1, -0.5})\n"
                  "  init = (s32[], f32[2]) tuple(z, x)\n"
                  "  ROOT w = (s32[], f32[2]) while(init), condition=cond, body=body\n"
                  "}\n";
  Literal *r = run(a, t, NULL, 0);
  expect_i(r->elems[0], DT_S32, NI(10));
  expect_f(r->elems[1], DT_F32, NF(1024, -512));
  hlo_arena_free(a);
}

Test(interp, conditional_pred_and_index) {
  HArena *a = hlo_arena_new();
  const char *t = "HloModule t\n"
                  "b0 {\n"
                  "  p = f32[] parameter(0)\n"
                  "  ROOT r = f32[] negate(p)\n"
                  "}\n"
                  "b1 {\n"
                  "  p = f32[] parameter(0)\n"
                  "  ROOT r = f32[] add(p, p)\n"
                  "}\n"
                  "b2 {\n"
                  "  p = f32[] parameter(0)\n"
                  "  ROOT r = f32[] multiply(p, p)\n"
                  "}\n"
                  "ENTRY e {\n"
                  "  k = s32[] parameter(0)\n"
                  "  x = f32[] constant(3)\n"
                  "  c = f32[] conditional(k, x, x, x), branch_computations={b0, b1, b2}\n"
                  "  t = pred[] constant(false)\n"
                  "  d = f32[] conditional(t, x, x), true_computation=b0, false_computation=b1\n"
                  "  ROOT r = (f32[], f32[]) tuple(c, d)\n"
                  "}\n";
  const double sel[4] = {0, 1, 7, -1}, want[4] = {-3, 6, 9, 9};
  for (int i = 0; i < 4; i++) {
    Literal *k = mk(a, DT_S32, 0, NULL, &sel[i]);
    Literal *r = run(a, t, &k, 1);
    expect_f(r->elems[0], DT_F32, 1, &want[i]);
    expect_f(r->elems[1], DT_F32, NF(6));
  }
  hlo_arena_free(a);
}

Test(interp, call_fusion_map) {
  HArena *a = hlo_arena_new();
  const char *t = "HloModule t\n"
                  "sq {\n"
                  "  p = f32[3] parameter(0)\n"
                  "  ROOT r = f32[3] multiply(p, p)\n"
                  "}\n"
                  "fused {\n"
                  "  p0 = f32[3] parameter(0)\n"
                  "  p1 = f32[3] parameter(1)\n"
                  "  ROOT r = f32[3] subtract(p0, p1)\n"
                  "}\n"
                  "hyp {\n"
                  "  a = f32[] parameter(0)\n"
                  "  b = f32[] parameter(1)\n"
                  "  aa = f32[] multiply(a, a)\n"
                  "  bb = f32[] multiply(b, b)\n"
                  "  s = f32[] add(aa, bb)\n"
                  "  ROOT r = f32[] sqrt(s)\n"
                  "}\n"
                  "ENTRY e {\n"
                  "  x = f32[3] constant({1, 2, 3})\n"
                  "  y = f32[3] constant({0, 1.5, 4})\n"
                  "  c = f32[3] call(x), to_apply=sq\n"
                  "  f = f32[3] fusion(c, y), kind=kLoop, calls=fused\n"
                  "  m = f32[3] map(x, y), dimensions={0}, to_apply=hyp\n"
                  "  ROOT r = (f32[3], f32[3]) tuple(f, m)\n"
                  "}\n";
  Literal *r = run(a, t, NULL, 0);
  expect_f(r->elems[0], DT_F32, NF(1, 2.5, 5));
  expect_f(r->elems[1], DT_F32, NF(1, 2.5, 5));
  hlo_arena_free(a);
}

Test(interp, sort_multi_operand) {
  HArena *a = hlo_arena_new();
  /* stable ascending sort by key, values follow; the comparator reads all four parameters so
   * it takes the general (per-comparison call) path */
  const char *t =
      "HloModule t\n"
      "cmp {\n"
      "  a = s32[] parameter(0)\n"
      "  b = s32[] parameter(1)\n"
      "  c = f32[] parameter(2)\n"
      "  d = f32[] parameter(3)\n"
      "  ROOT lt = pred[] compare(a, b), direction=LT\n"
      "}\n"
      "desc {\n"
      "  a = f32[] parameter(0)\n"
      "  b = f32[] parameter(1)\n"
      "  ROOT gt = pred[] compare(a, b), direction=GT, type=TOTALORDER\n"
      "}\n"
      "ENTRY e {\n"
      "  k = s32[2,4] constant({{3, 1, 2, 1}, {0, 0, -1, 5}})\n"
      "  v = f32[2,4] constant({{10, 20, 30, 40}, {1, 2, 3, 4}})\n"
      "  s = (s32[2,4], f32[2,4]) sort(k, v), dimensions={1}, is_stable=true, to_apply=cmp\n"
      "  w = f32[5] constant({1, nan, -inf, 3, -0})\n"
      "  sd = f32[5] sort(w), dimensions={0}, to_apply=desc\n"
      "  c = s32[3,2] constant({{3, 1}, {1, 2}, {2, 0}})\n"
      "  cv = f32[3,2] constant({{1, 2}, {3, 4}, {5, 6}})\n"
      "  s0 = (s32[3,2], f32[3,2]) sort(c, cv), dimensions={0}, to_apply=cmp\n"
      "  ROOT r = ((s32[2,4], f32[2,4]), f32[5], (s32[3,2], f32[3,2])) tuple(s, sd, s0)\n"
      "}\n";
  Literal *r = run(a, t, NULL, 0);
  expect_i(r->elems[0]->elems[0], DT_S32, NI(1, 1, 2, 3, -1, 0, 0, 5));
  expect_f(r->elems[0]->elems[1], DT_F32, NF(20, 40, 30, 10, 3, 1, 2, 4));
  expect_f(r->elems[1], DT_F32, NF(NAN, 3, 1, -0.0, -INFINITY));
  expect_i(r->elems[2]->elems[0], DT_S32, NI(1, 0, 2, 1, 3, 2));
  expect_f(r->elems[2]->elems[1], DT_F32, NF(3, 6, 5, 2, 1, 4));
  hlo_arena_free(a);
}

/* topk: the k largest (smallest) of each row with their indices, ties in index order, NaN
 * above +inf; XLA's TopK custom-call the same; the sharding annotation passes its operand.
 * (tests/cpu/cases/op_topk.hlo checks the optimizer's expansion into a sort against this.) */
Test(interp, topk_and_annotations) {
  HArena *a = hlo_arena_new();
  const char *t =
      "HloModule t\n"
      "ENTRY e {\n"
      "  x = f32[2,5] constant({{1, 3, 3, -1, 2}, {nan, 0, inf, -inf, 0}})\n"
      "  hi = (f32[2,3], s32[2,3]) topk(x), k=3, largest=true\n"
      "  lo = (f32[2,2], s32[2,2]) topk(x), k=2, largest=false\n"
      "  cc = (f32[2,2], s32[2,2]) custom-call(x), custom_call_target=\"TopK\"\n"
      "  sh = f32[2,5] custom-call(x), custom_call_target=\"Sharding\", sharding={replicated}\n"
      "  ROOT r = ((f32[2,3], s32[2,3]), (f32[2,2], s32[2,2]), (f32[2,2], s32[2,2]), f32[2,5]) "
      "tuple(hi, lo, cc, sh)\n"
      "}\n";
  {
    Literal *r = run(a, t, NULL, 0);
    expect_f(r->elems[0]->elems[0], DT_F32, NF(3, 3, 2, NAN, INFINITY, 0));
    expect_i(r->elems[0]->elems[1], DT_S32, NI(1, 2, 4, 0, 2, 1));
    expect_f(r->elems[1]->elems[0], DT_F32, NF(-1, 1, -INFINITY, 0));
    expect_i(r->elems[1]->elems[1], DT_S32, NI(3, 0, 3, 1));
    expect_f(r->elems[2]->elems[0], DT_F32, NF(3, 3, NAN, INFINITY));
    expect_i(r->elems[2]->elems[1], DT_S32, NI(1, 2, 0, 2));
    expect_f(r->elems[3], DT_F32, NF(1, 3, 3, -1, 2, NAN, 0, INFINITY, -INFINITY, 0));
  }
  hlo_arena_free(a);
}

Test(interp, batch_norm) {
  HArena *a = hlo_arena_new();
  const char *t =
      "HloModule t\n"
      "ENTRY e {\n"
      "  x = f32[2,2] constant({{1, 10}, {3, 30}})\n"
      "  sc = f32[2] constant({2, 1})\n"
      "  of = f32[2] constant({0.5, 0})\n"
      "  mu = f32[2] constant({1, 0})\n"
      "  va = f32[2] constant({4, 100})\n"
      "  inf = f32[2,2] batch-norm-inference(x, sc, of, mu, va), epsilon=0, feature_index=1\n"
      "  tr = (f32[2,2], f32[2], f32[2]) batch-norm-training(x, sc, of), epsilon=0, "
      "feature_index=1\n"
      "  gy = f32[2,2] constant({{1, 0}, {0, 1}})\n"
      "  tm = f32[2] get-tuple-element(tr), index=1\n"
      "  tv = f32[2] get-tuple-element(tr), index=2\n"
      "  gr = (f32[2,2], f32[2], f32[2]) batch-norm-grad(x, sc, tm, tv, gy), epsilon=0, "
      "feature_index=1\n"
      "  ROOT r = (f32[2,2], (f32[2,2], f32[2], f32[2]), (f32[2,2], f32[2], f32[2])) "
      "tuple(inf, tr, gr)\n"
      "}\n";
  Literal *r = run(a, t, NULL, 0);
  /* inference: (x - mu) / sqrt(var) * scale + offset */
  expect_f(r->elems[0], DT_F32, NF(0.5, 1, 2.5, 3));
  /* training: per-feature mean (2, 20), biased variance (1, 100) */
  expect_f(r->elems[1]->elems[0], DT_F32, NF(-1.5, -1, 2.5, 1));
  expect_f(r->elems[1]->elems[1], DT_F32, NF(2, 20));
  expect_f(r->elems[1]->elems[2], DT_F32, NF(1, 100));
  /* grad, feature 0: xhat = (-1, 1), gy = (1, 0): grad_offset = 1, grad_scale = -1,
   * grad_x = scale/sqrt(var)/N * (N*gy - sum(gy) - xhat*sum(gy*xhat)) = (0, 0);
   * feature 1: xhat = (-1, 1), gy = (0, 1): grad_offset 1, grad_scale 1, grad_x = 0 */
  expect_f(r->elems[2]->elems[0], DT_F32, NF(0, 0, 0, 0));
  expect_f(r->elems[2]->elems[1], DT_F32, NF(-1, 1));
  expect_f(r->elems[2]->elems[2], DT_F32, NF(1, 1));
  hlo_arena_free(a);
}

/* ------------------------------------------------------------------ errors */

Test(interp, argument_errors_are_located) {
  const char *t = "HloModule t\n"
                  "ENTRY e {\n"
                  "  x = f32[2] parameter(0)\n"
                  "  w = s32[3] parameter(1)\n"
                  "  ROOT r = f32[2] negate(x)\n"
                  "}\n";
  HArena *a = hlo_arena_new();
  Literal *x = mk(a, DT_F32, 1, (int64_t[]){2}, F(1, 2));
  Literal *bad = mk(a, DT_F32, 1, (int64_t[]){3}, F(1, 2, 3));
  Literal *badd = mk(a, DT_S32, 1, (int64_t[]){4}, F(1, 2, 3, 4));
  run_fails(t, (Literal *[]){x}, 1, "2 argument");
  run_fails(t, (Literal *[]){x, bad}, 2, "parameter 'w'");
  run_fails(t, (Literal *[]){x, badd}, 2, "expected s32[3]");
  hlo_arena_free(a);
}

Test(interp, unsupported_ops_are_located) {
  run_fails("HloModule t\n"
            "ENTRY e {\n"
            "  x = f32[2] constant({1, 2})\n"
            "  ROOT c = f32[2] custom-call(x), custom_call_target=\"my_kernel\"\n"
            "}\n",
            NULL, 0, "unsupported custom-call target my_kernel");
  run_fails("HloModule t\n"
            "ENTRY e {\n"
            "  lo = f32[] constant(0)\n"
            "  hi = f32[] constant(1)\n"
            "  ROOT r = f32[4] rng(lo, hi), distribution=rng_uniform\n"
            "}\n",
            NULL, 0, "op rng is not supported by the interpreter");
}

/* ------------------------------------------------------------------ corpus fixtures */

static int cmp_str(const void *x, const void *y) {
  return strcmp(*(char *const *)x, *(char *const *)y);
}

/* path = dir/name/file; false when it does not fit. */
static bool fixture_path(char *path, size_t n, const char *dir, const char *name,
                         const char *file) {
  int w = snprintf(path, n, "%s/%s/%s", dir, name, file);
  return w > 0 && (size_t)w < n;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Runs one fixture from module file `mod_file`; returns true when every output is within
 * tolerance, printing one line either way. */
static bool run_fixture(const char *dir, const char *name, const char *mod_file, double *secs,
                        bool *skipped) {
  char path[4096];
  HErr e = {0};
  if (!fixture_path(path, sizeof path, dir, name, mod_file)) return false;
  HModule *m = NULL;
  if (!strcmp(mod_file, "module.hlo")) {
    char *buf;
    size_t len;
    if (hlo_read_file(path, &buf, &len, &e)) {
      m = hlo_parse_text(buf, len, path, &e);
      free(buf);
    }
  }
#ifdef HAVE_PROTO
  else {
    m = proto_load_file(path, &e);
  }
#endif
  bool elided = false;
  for (int c = 0; m && c < m->ncomps; c++)
    for (int i = 0; i < m->comps[c]->ninstrs; i++)
      elided |= m->comps[c]->instrs[i]->op == OP_CONSTANT && !m->comps[c]->instrs[i]->literal;
  if (elided) {
    /* the interpreter must refuse it, naming the cause */
    HArena *ea = hlo_arena_new();
    HErr ee = {0};
    Literal *zeros[64] = {0};
    for (int p = 0; p < m->entry->nparams && p < 64; p++)
      zeros[p] = hlo_literal_new(ea, &m->entry->params[p]->shape);
    cr_expect(!hlo_interp_run(m, ea, zeros, m->entry->nparams, &ee) && strstr(ee.msg, "elided"),
              "%s: %s", name, ee.msg);
    hlo_arena_free(ea);
    hlo_module_free(m);
    /* a text dump whose large constants were elided has lost their data: not runnable */
    fprintf(stderr, "  %-24s %-10s skip (constants elided in the dump)\n", name, mod_file);
    *skipped = true;
    return true;
  }
  if (!m) {
    fprintf(stderr, "  %-24s %-10s FAIL load: %s\n", name, mod_file, e.msg);
    return false;
  }
  HArena *a = hlo_arena_new();
  int np = m->entry ? m->entry->nparams : 0;
  if (m->entry) hlo_comp_renumber(m->entry), np = m->entry->nparams;
  Literal **args = calloc((size_t)(np ? np : 1), sizeof *args);
  bool ok = true;
  for (int i = 0; i < np && ok; i++) {
    char file[32];
    snprintf(file, sizeof file, "in%d.npy", i);
    args[i] = fixture_path(path, sizeof path, dir, name, file) ? hlo_npy_read(a, path, &e) : NULL;
    ok = args[i] != NULL;
    if (ok) hlo_literal_bits_as(args[i], m->entry->params[i]->shape.dt); /* bf16 as <u2 */
  }
  double t0 = now_s();
  Literal *r = ok ? hlo_interp_run(m, a, args, np, &e) : NULL;
  *secs = now_s() - t0;
  if (!r) {
    fprintf(stderr, "  %-24s %-10s FAIL run: %s\n", name, mod_file, e.msg);
    ok = false;
    goto out;
  }
  double rtol = strstr(name, "train_step") ? 1e-3 : 1e-4, atol = 1e-5;
  int nout = r->shape.dt == DT_TUPLE ? r->shape.ntuple : 1;
  double worst_rel = 0, worst_abs = 0;
  char worst_at[160] = "";
  for (int k = 0; k < nout; k++) {
    Literal *got = r->shape.dt == DT_TUPLE ? r->elems[k] : r;
    char file[32];
    snprintf(file, sizeof file, "out%d.npy", k);
    Literal *want =
        fixture_path(path, sizeof path, dir, name, file) ? hlo_npy_read(a, path, &e) : NULL;
    HCompare c;
    double at = atol, rt = rtol;
    if (want && hlo_literal_bits_as(want, got->shape.dt) && got->shape.dt == DT_BF16) {
      at = HLO_LOWP_TOL * hlo_literal_max_abs(want);
      rt = 0;
    }
    if (!want || !hlo_literal_compare(got, want, rt, at, &c, &e)) {
      fprintf(stderr, "  %-24s %-10s FAIL out%d: %s\n", name, mod_file, k, e.msg);
      ok = false;
      goto out;
    }
    if (c.bad) {
      fprintf(stderr,
              "  %-24s %-10s FAIL out%d: %lld elements outside tolerance, worst [%lld] got %.9g "
              "want %.9g\n",
              name, mod_file, k, (long long)c.bad, (long long)c.worst, c.worst_got, c.worst_want);
      ok = false;
    }
    if (c.max_abs > worst_abs) {
      worst_abs = c.max_abs;
      snprintf(worst_at, sizeof worst_at, "out%d[%lld] got %.9g want %.9g", k, (long long)c.worst,
               c.worst_got, c.worst_want);
    }
    if (c.max_rel > worst_rel) worst_rel = c.max_rel;
  }
  if (ok)
    fprintf(stderr,
            "  %-24s %-10s ok   %.3fs  outputs %d  max abs err %.3g  max rel err %.3g  %s\n", name,
            mod_file, *secs, nout, worst_abs, worst_rel, worst_at);
out:
  free(args);
  hlo_arena_free(a);
  hlo_module_free(m);
  return ok;
}

Test(interp, corpus_fixtures, .timeout = 300) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/fixtures", HLOC_CORPUS_DIR);
  DIR *d = opendir(dir);
  cr_assert(d, "cannot open %s", dir);
  char *names[256];
  int n = 0;
  for (struct dirent *de; (de = readdir(d)) && n < 256;)
    if (de->d_name[0] != '.') names[n++] = strdup(de->d_name);
  closedir(d);
  cr_assert_gt(n, 0, "no fixtures in %s", dir);
  qsort(names, (size_t)n, sizeof *names, cmp_str);
  const char *forms[] = {"module.hlo",
#ifdef HAVE_PROTO
                         "module.pb"
#endif
  };
  int nforms = (int)(sizeof forms / sizeof *forms), failed = 0, total = 0, nskipped = 0;
  double t_all = 0;
  fprintf(stderr, "interpreter on %d corpus fixtures:\n", n);
  for (int i = 0; i < n; i++)
    for (int f = 0; f < nforms; f++) {
      double s = 0;
      bool skipped = false;
      if (!run_fixture(dir, names[i], forms[f], &s, &skipped)) failed++;
      total += !skipped;
      nskipped += skipped;
      t_all += s;
    }
  fprintf(stderr, "interpreter fixtures: %d/%d passed (%d skipped), evaluation time %.2fs\n",
          total - failed, total, nskipped, t_all);
  for (int i = 0; i < n; i++)
    free(names[i]);
  cr_assert_eq(failed, 0, "%d of %d fixture runs failed (see stderr)", failed, total);
  cr_assert_gt(total, 0, "every fixture was skipped");
}

/* tests/xla_cases: grouped convolutions (batch_group_count, feature_group_count),
 * conditionals (lax.cond, lax.switch), loops (fori_loop, scan, while_loop) and an int8-weight
 * decode step exported by JAX with XLA's outputs (tools/export_xla_cases.py,
 * tools/export_w8a16.py), which the corpus does not have. */
Test(interp, xla_grouped_convolution_cases, .timeout = 120) {
  const char *dir = HLOC_TEST_DIR "/xla_cases";
  const char *names[] = {"bgc2_nhwc",       "bgc3_nchw_stride_pad",
                         "bgc2_dilated",    "fgc3_nhwc",
                         "grouped_wgrad",   "cond_pred_true",
                         "cond_pred_false", "switch_0",
                         "switch_1",        "switch_2",
                         "switch_7",        "switch_m3",
                         "fori_loop",       "scan",
                         "while_down",      "while_newton",
                         "while_arg_bound", "w8a16_decode"};
  int failed = 0;
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    double s = 0;
    bool skipped = false;
    if (!run_fixture(dir, names[i], "module.hlo", &s, &skipped) || skipped) failed++;
  }
  cr_assert_eq(failed, 0, "%d of the XLA cases failed (see stderr)", failed);
}

/* tests/xla_cases/rp_*: reduce-precision of f32 and f16 values where the rounding is decided,
 * to formats narrower and wider than the input's, exported by JAX with XLA's results
 * (tools/export_xla_cases.py). The interpreter must match them bit for bit (a NaN matching
 * any NaN). */
static const char *const rp_cases[] = {
    "rp_f32_e8m7",  "rp_f32_e5m10",  "rp_f32_e4m3",  "rp_f32_e2m1", "rp_f32_e5m0",
    "rp_f32_e8m23", "rp_f32_e11m30", "rp_f16_e5m10", "rp_f16_e4m3", "rp_f16_e8m7",
    "rp_f16_e5m2",  "rp_f16_e3m0",   "rp_f16_e11m52"};

/* Element i of an f16/f32 array as bits, and whether it is a NaN. */
static uint32_t rp_bits(const Literal *l, int64_t i, bool *nan) {
  if (l->shape.dt == DT_F16) {
    uint16_t b;
    memcpy(&b, (const char *)l->data + 2 * i, 2);
    *nan = (b & 0x7c00) == 0x7c00 && (b & 0x3ff);
    return b;
  }
  uint32_t b;
  memcpy(&b, (const char *)l->data + 4 * i, 4);
  *nan = (b & 0x7f800000) == 0x7f800000 && (b & 0x7fffff);
  return b;
}

Test(interp, xla_reduce_precision_cases, .timeout = 60) {
  int bad_cases = 0;
  for (size_t c = 0; c < sizeof rp_cases / sizeof *rp_cases; c++) {
    char path[4096];
    HErr e = {0};
    HArena *a = hlo_arena_new();
    snprintf(path, sizeof path, HLOC_TEST_DIR "/xla_cases/%s/module.hlo", rp_cases[c]);
    char *buf;
    size_t len;
    cr_assert(hlo_read_file(path, &buf, &len, &e), "%s", e.msg);
    HModule *m = hlo_parse_text(buf, len, path, &e);
    free(buf);
    cr_assert(m, "%s", e.msg);
    snprintf(path, sizeof path, HLOC_TEST_DIR "/xla_cases/%s/in0.npy", rp_cases[c]);
    Literal *x = hlo_npy_read(a, path, &e);
    cr_assert(x, "%s", e.msg);
    snprintf(path, sizeof path, HLOC_TEST_DIR "/xla_cases/%s/out0.npy", rp_cases[c]);
    Literal *want = hlo_npy_read(a, path, &e);
    cr_assert(want, "%s", e.msg);
    Literal *got = hlo_interp_run(m, a, &x, 1, &e);
    cr_assert(got, "%s: %s", rp_cases[c], e.msg);
    cr_assert_eq(got->shape.dt, want->shape.dt);
    int64_t n = hlo_shape_elems(&want->shape), bad = 0;
    for (int64_t i = 0; i < n; i++) {
      bool gn, wn, xn;
      uint32_t g = rp_bits(got, i, &gn), w = rp_bits(want, i, &wn), xi = rp_bits(x, i, &xn);
      if (g == w || (gn && wn)) continue;
      if (bad++ < 4)
        fprintf(stderr, "  %s element %lld: input 0x%x, got 0x%x, XLA 0x%x\n", rp_cases[c],
                (long long)i, xi, g, w);
    }
    if (bad)
      fprintf(stderr, "  %s: %lld of %lld elements differ from XLA\n", rp_cases[c], (long long)bad,
              (long long)n);
    bad_cases += bad > 0;
    hlo_module_free(m);
    hlo_arena_free(a);
  }
  cr_assert_eq(bad_cases, 0, "%d reduce-precision cases differ from XLA (see stderr)", bad_cases);
}
