/* tests/test_fp8.c: the fp8 element types (f8e4m3fn, f8e5m2) in the IR, outside the targets.
 *
 * The scalar conversions of hlo/literal.c are checked exhaustively against values this file
 * derives on its own: each code's value from its integer significand and exponent, and the
 * rounding of a number as the nearest of all codes found by brute force (ties to the even
 * code; the code past the largest finite one, whose value continues the last binade, is the
 * overflow: NaN in f8e4m3fn, infinity in f8e5m2). Then the dtype table, the text reader and
 * printer, the verifier, the interpreter (convert to and from every type, arithmetic rounded
 * once per instruction, dots accumulating in f32) and .npy (written as '|u1' bits, read from
 * '|u1' or ml_dtypes' '|V1' and retyped by hlo_literal_bits_as). The proto reader's fp8
 * literals are in test_proto.c, the CPU target's in test_cpu.c, hloc-run's in test_tools.c. */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hlo.h"

typedef struct F8 {
  DType t;              /* the type */
  int e, m;             /* exponent and mantissa bits */
  bool ieee;            /* infinities and NaNs as IEEE (f8e5m2) */
  unsigned maxc;        /* largest finite magnitude code */
  float (*to)(uint8_t); /* the conversions under test */
  uint8_t (*from32)(float);
  uint8_t (*from64)(double);
} F8;

static const F8 f8s[2] = {
    {DT_F8E4M3FN, 4, 3, false, 0x7e, hlo_f8e4m3fn_to_f32, hlo_f32_to_f8e4m3fn, hlo_f64_to_f8e4m3fn},
    {DT_F8E5M2, 5, 2, true, 0x7b, hlo_f8e5m2_to_f32, hlo_f32_to_f8e5m2, hlo_f64_to_f8e5m2},
};

/* Value of magnitude code c (up to maxc + 1): integer significand times a power of two. */
static double val(const F8 *f, unsigned c) {
  int bias = (1 << (f->e - 1)) - 1;
  if (c == f->maxc + 1) return 2 * val(f, f->maxc) - val(f, f->maxc - 1); /* past the end */
  unsigned ex = c >> f->m, man = c & ((1u << f->m) - 1);
  double sig = ex ? (double)((1u << f->m) + man) : (double)man;
  int p = (ex ? (int)ex : 1) - bias - f->m;
  return sig * pow(2.0, p);
}

static bool is_nan_code(const F8 *f, unsigned c) {
  c &= 0x7f;
  return f->ieee ? c > 0x7c : c == 0x7f;
}

/* The code of x by brute force over all magnitude codes (ties to the even code). */
static uint8_t brute(const F8 *f, double x) {
  uint8_t sign = signbit(x) ? 0x80 : 0;
  double a = fabs(x);
  if (isinf(a) || a > val(f, f->maxc + 1)) return sign | (f->ieee ? 0x7c : 0x7f);
  unsigned best = 0;
  double bd = INFINITY;
  for (unsigned c = 0; c <= f->maxc + 1; c++) {
    double d = fabs(a - val(f, c));
    if (d < bd || (d == bd && !(c & 1))) bd = d, best = c;
  }
  return sign | (uint8_t)best; /* maxc + 1: 0x7f (NaN) in f8e4m3fn, 0x7c (inf) in f8e5m2 */
}

static uint32_t fbits(float f) {
  uint32_t b;
  memcpy(&b, &f, 4);
  return b;
}
static float bitsf(uint32_t b) {
  float f;
  memcpy(&f, &b, 4);
  return f;
}

Test(fp8, dtype_table) {
  cr_expect_eq(hlo_dtype_from_proto(20), DT_F8E4M3FN);
  cr_expect_eq(hlo_dtype_from_proto(19), DT_F8E5M2);
  cr_expect_eq(hlo_dtype_proto(DT_F8E4M3FN), 20);
  cr_expect_eq(hlo_dtype_proto(DT_F8E5M2), 19);
  cr_expect_str_eq(hlo_proto_type_name(20), "f8e4m3fn");
  cr_expect_str_eq(hlo_proto_type_name(19), "f8e5m2");
  for (int i = 0; i < 2; i++) {
    const char *n = hlo_dtype_name(f8s[i].t);
    cr_expect_eq(hlo_dtype_from_name(n, strlen(n)), f8s[i].t);
    cr_expect_eq(hlo_dtype_size(f8s[i].t), 1);
    cr_expect(hlo_dtype_is_float(f8s[i].t) && hlo_dtype_is_fp8(f8s[i].t));
  }
  cr_expect(!hlo_dtype_is_fp8(DT_BF16) && !hlo_dtype_is_fp8(DT_U8));
  cr_expect_eq(hlo_dtype_from_proto(25), DT_INVALID, "f8e4m3fnuz stays unsupported");
}

/* Every code decodes to its value (NaN and infinity codes to NaN and infinity of their sign). */
Test(fp8, decode_every_code) {
  for (int i = 0; i < 2; i++) {
    const F8 *f = &f8s[i];
    for (unsigned c = 0; c < 256; c++) {
      float v = f->to((uint8_t)c);
      bool neg = c & 0x80;
      cr_expect_eq(!!signbit(v), neg, "%s 0x%02x: sign", hlo_dtype_name(f->t), c);
      if (is_nan_code(f, c)) {
        cr_expect(isnan(v), "%s 0x%02x: NaN expected, got %g", hlo_dtype_name(f->t), c, v);
      } else if (f->ieee && (c & 0x7f) == 0x7c) {
        cr_expect(isinf(v), "%s 0x%02x: infinity expected", hlo_dtype_name(f->t), c);
      } else {
        double want = val(f, c & 0x7f) * (neg ? -1 : 1);
        cr_expect_eq((double)v, want, "%s 0x%02x: got %.9g want %.9g", hlo_dtype_name(f->t), c, v,
                     want);
      }
    }
  }
  cr_expect_eq(hlo_f8e4m3fn_to_f32(0x7e), 448.0f);
  cr_expect_eq(hlo_f8e4m3fn_to_f32(0x01), ldexpf(1, -9));
  cr_expect_eq(hlo_f8e4m3fn_to_f32(0x08), ldexpf(1, -6));
  cr_expect_eq(hlo_f8e4m3fn_to_f32(0x38), 1.0f);
  cr_expect_eq(hlo_f8e4m3fn_to_f32(0x78), 256.0f, "the all-ones exponent holds normal values");
  cr_expect_eq(hlo_f8e5m2_to_f32(0x7b), 57344.0f);
  cr_expect_eq(hlo_f8e5m2_to_f32(0x01), ldexpf(1, -16));
  cr_expect_eq(hlo_f8e5m2_to_f32(0x3c), 1.0f);
  cr_expect_eq(hlo_f8e5m2_to_f32(0xfc), -INFINITY);
}

/* Each of the 256 codes of each type comes back unchanged through f32 (NaNs included), and
 * through f64 but for the NaNs. */
Test(fp8, every_code_round_trips) {
  for (int i = 0; i < 2; i++) {
    const F8 *f = &f8s[i];
    for (unsigned c = 0; c < 256; c++) {
      float v = f->to((uint8_t)c);
      cr_expect_eq(f->from32(v), c, "%s 0x%02x -> %#x -> 0x%02x", hlo_dtype_name(f->t), c, fbits(v),
                   f->from32(v));
      if (!is_nan_code(f, c))
        cr_expect_eq(f->from64((double)v), c, "%s 0x%02x via f64", hlo_dtype_name(f->t), c);
    }
  }
}

/* Rounding from f32 against the brute force: every code's value, the midpoints between
 * neighbours (ties) and one ulp either side, the overflow threshold and past it, f32's
 * extremes and subnormals, and 200000 random f32 values of every exponent and of fp8's range. */
Test(fp8, f32_rounding_matches_brute_force) {
  for (int i = 0; i < 2; i++) {
    const F8 *f = &f8s[i];
    float xs[4096];
    int n = 0;
    for (unsigned c = 0; c <= f->maxc; c++) {
      float v = (float)val(f, c), mid = (float)((val(f, c) + val(f, c + 1)) / 2);
      cr_assert_eq((double)mid, (val(f, c) + val(f, c + 1)) / 2, "midpoint exact in f32");
      xs[n++] = v, xs[n++] = mid, xs[n++] = nextafterf(mid, 0), xs[n++] = nextafterf(mid, INFINITY);
    }
    xs[n++] = (float)val(f, f->maxc + 1), xs[n++] = 1e30f, xs[n++] = FLT_MAX, xs[n++] = FLT_MIN;
    xs[n++] = 1e-45f, xs[n++] = ldexpf(1, -130), xs[n++] = 0;
    for (int j = 0; j < n; j++) {
      float x = xs[j];
      for (int s = 0; s < 2; s++, x = -x)
        cr_expect_eq(f->from32(x), brute(f, x), "%s: %.9g -> 0x%02x, want 0x%02x",
                     hlo_dtype_name(f->t), x, f->from32(x), brute(f, x));
    }
    uint32_t r = 2463534242u;
    double range = 2 * val(f, f->maxc + 1);
    for (int j = 0; j < 200000; j++) {
      r ^= r << 13, r ^= r >> 17, r ^= r << 5;
      float x =
          j & 1 ? bitsf(r) : (float)((double)(r >> 8) / (1 << 24) * range * ((r & 1) ? -1 : 1));
      if (isnan(x)) continue;
      if (f->from32(x) != brute(f, x)) {
        cr_expect(false, "%s: %.9g (%#x) -> 0x%02x, want 0x%02x", hlo_dtype_name(f->t), x, fbits(x),
                  f->from32(x), brute(f, x));
        break;
      }
    }
  }
}

/* From f64 the value is rounded once: just above or below a tie (closer than f32 can say,
 * where f64 -> f32 -> fp8 would round to even) goes to the nearer code. */
Test(fp8, f64_rounds_once) {
  for (int i = 0; i < 2; i++) {
    const F8 *f = &f8s[i];
    int twice_differs = 0;
    for (unsigned c = 0; c <= f->maxc; c++) {
      double mid = (val(f, c) + val(f, c + 1)) / 2;
      for (int s = -1; s <= 1; s += 2) {
        double x = mid * (1 + s * ldexp(1, -40));
        if (mid == 0) continue;
        cr_expect_eq(f->from64(x), brute(f, x), "%s: %.17g -> 0x%02x, want 0x%02x",
                     hlo_dtype_name(f->t), x, f->from64(x), brute(f, x));
        twice_differs += f->from32((float)x) != brute(f, x);
      }
    }
    cr_expect_gt(twice_differs, 0, "f64 -> f32 -> fp8 would round some of them twice");
  }
}

/* The rules spelled out: overflow (NaN in f8e4m3fn, infinity in f8e5m2), ties, subnormals,
 * signed zero, NaN and infinity. */
Test(fp8, overflow_ties_subnormals_specials) {
  cr_expect_eq(hlo_f32_to_f8e4m3fn(448), 0x7e);
  cr_expect_eq(hlo_f32_to_f8e4m3fn(464), 0x7e, "the tie between 448 and 480 goes to even");
  cr_expect_eq(hlo_f32_to_f8e4m3fn(nextafterf(464, INFINITY)), 0x7f, "past it: NaN");
  cr_expect_eq(hlo_f32_to_f8e4m3fn(-500), 0xff);
  cr_expect_eq(hlo_f32_to_f8e4m3fn(INFINITY), 0x7f, "no infinity: NaN");
  cr_expect_eq(hlo_f32_to_f8e4m3fn(-INFINITY), 0xff);
  cr_expect_eq(hlo_f32_to_f8e5m2(57344), 0x7b);
  cr_expect_eq(hlo_f32_to_f8e5m2(61439), 0x7b);
  cr_expect_eq(hlo_f32_to_f8e5m2(61440), 0x7c, "the tie past 57344 goes to even: infinity");
  cr_expect_eq(hlo_f32_to_f8e5m2(-1e6f), 0xfc);
  cr_expect_eq(hlo_f32_to_f8e5m2(-INFINITY), 0xfc);
  cr_expect_eq(hlo_f32_to_f8e4m3fn(-0.0f), 0x80);
  cr_expect_eq(hlo_f32_to_f8e5m2(-0.0f), 0x80);
  cr_expect_eq(hlo_f32_to_f8e4m3fn(ldexpf(1, -9)), 0x01);
  cr_expect_eq(hlo_f32_to_f8e4m3fn(ldexpf(1, -10)), 0x00,
               "half the smallest subnormal: to even, zero");
  cr_expect_eq(hlo_f32_to_f8e4m3fn(ldexpf(3, -10)), 0x02);
  cr_expect_eq(hlo_f32_to_f8e4m3fn(ldexpf(15, -10)), 0x08, "rounds up into the smallest normal");
  cr_expect_eq(hlo_f32_to_f8e5m2(ldexpf(1, -17)), 0x00);
  cr_expect_eq(hlo_f32_to_f8e5m2(ldexpf(3, -17)), 0x02);
  cr_expect_eq(hlo_f32_to_f8e4m3fn(NAN), 0x7f);
  cr_expect_eq(hlo_f32_to_f8e4m3fn(-NAN), 0xff);
  cr_expect_eq(hlo_f32_to_f8e5m2(NAN), 0x7e, "a quiet NaN gives the canonical S.11111.10");
  cr_expect_eq(hlo_f32_to_f8e5m2(-NAN), 0xfe);
  cr_expect_eq(hlo_f32_to_f8e5m2(bitsf(0x7f800001)), 0x7e, "low payload only: made quiet");
  cr_expect_eq(hlo_f64_to_f8e5m2(NAN), 0x7e);
  cr_expect_eq(hlo_f64_to_f8e4m3fn(1e300), 0x7f);
  cr_expect_eq(hlo_f64_to_f8e5m2(-1e300), 0xfc);
}

/* Literal access converts through the same routines (integers saturate like XLA's). */
Test(fp8, literal_load_store) {
  HArena *a = hlo_arena_new();
  int64_t d = 4;
  Shape s = hlo_shape_array(DT_F8E4M3FN, 1, &d);
  Literal *l = hlo_literal_new(a, &s);
  hlo_literal_set_f64(l, 0, 1.0625); /* tie between 1 and 1.125: to even, 1 */
  hlo_literal_set_f64(l, 1, -3.3);
  hlo_literal_set_i64(l, 2, 1000); /* past 448: NaN */
  hlo_literal_set_f64(l, 3, 0.001);
  const uint8_t *b = l->data;
  cr_expect_eq(b[0], 0x38);
  cr_expect_eq(b[1], hlo_f64_to_f8e4m3fn(-3.3));
  cr_expect_eq(b[2], 0x7f);
  cr_expect_eq(b[3], hlo_f64_to_f8e4m3fn(0.001));
  cr_expect_eq(hlo_literal_get_f64(l, 0), 1.0);
  cr_expect_eq(hlo_literal_get_i64(l, 1), -3);
  cr_expect_eq(hlo_literal_get_i64(l, 2), 0, "NaN -> integer is 0");
  hlo_arena_free(a);
}

/* ------------------------------------------------------------------ text, verifier, interpreter */

static HModule *parse_ok(const char *text) {
  HErr err = {0};
  HModule *m = hlo_parse_text(text, strlen(text), "<fp8>", &err);
  cr_assert(m, "%s", err.msg);
  cr_assert(hlo_verify(m, &err), "%s", err.msg);
  return m;
}

static char *print_module(const HModule *m) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  cr_assert(f);
  hlo_print_module(f, m, NULL);
  fclose(f);
  return buf;
}

/* Constants print as XLA prints them (%.3g for f8e4m3fn, %.2g for f8e5m2), and the text reads
 * back to the same bytes; the values round once from their decimal. */
Test(fp8, text_constants_round_trip) {
  HModule *m = parse_ok("HloModule t\n"
                        "ENTRY e {\n"
                        "  a = f8e4m3fn[6] constant({0.5, -448, 0.00195312, nan, 3.2, 464})\n"
                        "  b = f8e5m2[4] constant({57344, -0.25, -inf, 1.52587890625e-05})\n"
                        "  ROOT t = (f8e4m3fn[6], f8e5m2[4]) tuple(a, b)\n"
                        "}\n");
  const uint8_t want_a[6] = {0x30, 0xfe, 0x01, 0x7f, 0x45, 0x7e},
                want_b[4] = {0x7b, 0xb4, 0xfc, 0x01};
  cr_expect(!memcmp(m->entry->instrs[0]->literal->data, want_a, 6));
  cr_expect(!memcmp(m->entry->instrs[1]->literal->data, want_b, 4));
  char *text = print_module(m);
  cr_expect(strstr(text, "a = f8e4m3fn[6] constant({0.5, -448, 0.00195, nan, 3.25, 448})"), "%s",
            text);
  cr_expect(strstr(text, "b = f8e5m2[4] constant({5.7e+04, -0.25, -inf, 1.5e-05})"), "%s", text);
  HModule *m2 = parse_ok(text);
  cr_expect(!memcmp(m2->entry->instrs[0]->literal->data, want_a, 6),
            "printed text reads back the same");
  cr_expect(!memcmp(m2->entry->instrs[1]->literal->data, want_b, 4));
  char *text2 = print_module(m2);
  cr_expect_str_eq(text2, text);
  free(text);
  free(text2);
  hlo_module_free(m);
  hlo_module_free(m2);
}

/* The verifier takes fp8 where floats go: convert, elementwise arithmetic, compare, dots with
 * fp8 operands and any float result (and mixed fp8 operands), reduce. */
Test(fp8, verifier_accepts_fp8) {
  HModule *m = parse_ok(
      "HloModule t\n"
      "add8 {\n  p = f8e4m3fn[] parameter(0)\n  q = f8e4m3fn[] parameter(1)\n"
      "  ROOT s = f8e4m3fn[] add(p, q)\n}\n"
      "ENTRY e {\n"
      "  x = f32[2,3] parameter(0)\n"
      "  y = f8e5m2[3,4] parameter(1)\n"
      "  a = f8e4m3fn[2,3] convert(x)\n"
      "  b = f8e4m3fn[2,3] multiply(a, a)\n"
      "  c = pred[2,3] compare(a, b), direction=LT\n"
      "  d = f32[2,4] dot(b, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
      "  d2 = bf16[2,4] dot(a, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
      "  d3 = f8e4m3fn[2,4] dot(a, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
      "  z = f8e4m3fn[] constant(0)\n"
      "  r = f8e4m3fn[2] reduce(b, z), dimensions={1}, to_apply=add8\n"
      "  i = s8[2,3] bitcast-convert(a)\n"
      "  ROOT t = (pred[2,3], f32[2,4], bf16[2,4], f8e4m3fn[2,4], f8e4m3fn[2], s8[2,3]) tuple(c, "
      "d, d2, d3, r, i)\n"
      "}\n");
  hlo_module_free(m);
  HErr err = {0};
  const char *bad =
      "HloModule t\nENTRY e {\n  x = f8e4m3fn[2] parameter(0)\n  y = f8e5m2[2] parameter(1)\n"
      "  ROOT s = f8e4m3fn[2] add(x, y)\n}\n";
  HModule *b = hlo_parse_text(bad, strlen(bad), "bad.hlo", &err);
  cr_assert(b, "%s", err.msg);
  cr_expect(!hlo_verify(b, &err), "mixed fp8 types in an add are an error");
  cr_expect(strstr(err.msg, "bad.hlo") && strstr(err.msg, "instruction 's'"), "%s", err.msg);
  hlo_module_free(b);
}

/* The same code, or both NaNs of type t (a NaN's payload may differ through double). */
static bool same8(DType t, uint8_t got, uint8_t want) {
  return got == want ||
         (is_nan_code(&f8s[t == DT_F8E5M2], got) && is_nan_code(&f8s[t == DT_F8E5M2], want));
}

static Literal *run1(HModule *m, HArena *a, Literal *const *args, int n) {
  HErr err = {0};
  Literal *r = hlo_interp_run(m, a, args, n, &err);
  cr_assert(r, "%s", err.msg);
  return r;
}

/* Inputs for the conversions: every fp8 value of both types, ties, and a spread of f32. */
static Literal *f32_inputs(HArena *a, int64_t n) {
  Shape s = hlo_shape_array(DT_F32, 1, &n);
  Literal *l = hlo_literal_new(a, &s);
  float *x = l->data;
  int64_t k = 0;
  for (int i = 0; i < 2 && k < n; i++)
    for (unsigned c = 0; c < 256 && k < n; c++)
      x[k++] = f8s[i].to((uint8_t)c);
  for (uint32_t r = 1; k < n; k++) {
    r = r * 1664525u + 1013904223u;
    x[k] = (float)((double)(r >> 8) / (1 << 24) * 1200 - 600) * (k % 3 ? 1.0f : 1e-3f);
  }
  return l;
}

/* convert from f32 to each fp8 type and back, between the two, to and from integers, pred,
 * f16, bf16 and f64: every element as the scalar conversions give it. */
Test(fp8, interp_converts) {
  HModule *m = parse_ok("HloModule t\n"
                        "ENTRY e {\n"
                        "  x = f32[1024] parameter(0)\n"
                        "  a = f8e4m3fn[1024] convert(x)\n"
                        "  b = f8e5m2[1024] convert(x)\n"
                        "  ab = f8e5m2[1024] convert(a)\n"
                        "  xa = f32[1024] convert(a)\n"
                        "  ia = s32[1024] convert(a)\n"
                        "  ai = f8e4m3fn[1024] convert(ia)\n"
                        "  pa = pred[1024] convert(b)\n"
                        "  ap = f8e4m3fn[1024] convert(pa)\n"
                        "  hb = f16[1024] convert(b)\n"
                        "  bb = bf16[1024] convert(a)\n"
                        "  xd = f64[1024] convert(x)\n"
                        "  da = f8e4m3fn[1024] convert(xd)\n"
                        "  u8 = u8[1024] convert(b)\n"
                        "  ROOT t = (f8e4m3fn[1024], f8e5m2[1024], f8e5m2[1024], f32[1024], "
                        "s32[1024], f8e4m3fn[1024], "
                        "f8e4m3fn[1024], f16[1024], bf16[1024], f8e4m3fn[1024], u8[1024]) "
                        "tuple(a, b, ab, xa, ia, ai, ap, hb, bb, da, u8)\n"
                        "}\n");
  HArena *a = hlo_arena_new();
  Literal *x = f32_inputs(a, 1024);
  Literal *r = run1(m, a, &x, 1);
  const float *xv = x->data;
  for (int64_t i = 0; i < 1024; i++) {
    uint8_t ca = hlo_f32_to_f8e4m3fn(xv[i]), cb = hlo_f32_to_f8e5m2(xv[i]);
    float va = hlo_f8e4m3fn_to_f32(ca), vb = hlo_f8e5m2_to_f32(cb);
    bool nan_a = isnan(va);
    cr_expect(same8(DT_F8E4M3FN, ((uint8_t *)r->elems[0]->data)[i], ca), "a[%lld] of %.9g",
              (long long)i, xv[i]);
    cr_expect(same8(DT_F8E5M2, ((uint8_t *)r->elems[1]->data)[i], cb), "b[%lld] of %.9g",
              (long long)i, xv[i]);
    if (!nan_a) {
      cr_expect_eq(((uint8_t *)r->elems[2]->data)[i], hlo_f32_to_f8e5m2(va), "ab[%lld]",
                   (long long)i);
      int32_t ia = ((int32_t *)r->elems[4]->data)[i];
      cr_expect_eq(ia, (int32_t)va, "ia[%lld]", (long long)i);
      cr_expect_eq(((uint8_t *)r->elems[5]->data)[i], hlo_f32_to_f8e4m3fn((float)ia), "ai[%lld]",
                   (long long)i);
      cr_expect_eq(hlo_load_f64(DT_BF16, r->elems[8]->data, i), (double)va, "bb[%lld]",
                   (long long)i);
    }
    cr_expect(((float *)r->elems[3]->data)[i] == va ||
              (nan_a && isnan(((float *)r->elems[3]->data)[i])));
    cr_expect_eq(((uint8_t *)r->elems[6]->data)[i], vb != 0 ? 0x38 : 0x00, "ap[%lld]",
                 (long long)i);
    double hb = hlo_load_f64(DT_F16, r->elems[7]->data, i);
    cr_expect(hb == vb || (isnan(hb) && isnan(vb)), "hb[%lld]", (long long)i);
    cr_expect(same8(DT_F8E4M3FN, ((uint8_t *)r->elems[9]->data)[i], ca), "f64 -> fp8 [%lld]",
              (long long)i);
    uint8_t u = ((uint8_t *)r->elems[10]->data)[i];
    cr_expect_eq(u,
                 isnan(vb) || vb <= 0 ? 0
                 : vb >= 255          ? 255
                                      : (uint8_t)vb,
                 "u8[%lld] of %g", (long long)i, vb);
  }
  hlo_arena_free(a);
  hlo_module_free(m);
}

/* Arithmetic on fp8 rounds each instruction's f32 result once; a dot of fp8 operands
 * accumulates in f32 and rounds to its result type at the end. */
Test(fp8, interp_arithmetic_and_dot) {
  HModule *m =
      parse_ok("HloModule t\n"
               "ENTRY e {\n"
               "  x = f8e4m3fn[4,8] parameter(0)\n"
               "  y = f8e5m2[8,3] parameter(1)\n"
               "  s = f8e4m3fn[4,8] add(x, x)\n"
               "  p = f8e4m3fn[4,8] multiply(s, x)\n"
               "  q = f8e4m3fn[4,8] divide(p, s)\n"
               "  d = f32[4,3] dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
               "  db = bf16[4,3] dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
               "  d8 = f8e5m2[4,3] dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
               "  ROOT t = (f8e4m3fn[4,8], f8e4m3fn[4,8], f32[4,3], bf16[4,3], f8e5m2[4,3]) "
               "tuple(p, q, d, db, d8)\n"
               "}\n");
  HArena *a = hlo_arena_new();
  int64_t dx[2] = {4, 8}, dy[2] = {8, 3};
  Shape sx = hlo_shape_array(DT_F8E4M3FN, 2, dx), sy = hlo_shape_array(DT_F8E5M2, 2, dy);
  Literal *args[2] = {hlo_literal_new(a, &sx), hlo_literal_new(a, &sy)};
  uint8_t *xb = args[0]->data, *yb = args[1]->data;
  for (int i = 0; i < 32; i++)
    xb[i] = (uint8_t)((i * 37 + 11) % 0x7e) | (i % 3 ? 0 : 0x80);
  for (int i = 0; i < 24; i++)
    yb[i] = (uint8_t)((i * 53 + 7) % 0x7b) | (i % 4 ? 0 : 0x80);
  Literal *r = run1(m, a, args, 2);
  for (int i = 0; i < 32; i++) {
    float xv = hlo_f8e4m3fn_to_f32(xb[i]);
    uint8_t s = hlo_f32_to_f8e4m3fn(xv + xv), p = hlo_f32_to_f8e4m3fn(hlo_f8e4m3fn_to_f32(s) * xv);
    uint8_t q = hlo_f32_to_f8e4m3fn(hlo_f8e4m3fn_to_f32(p) / hlo_f8e4m3fn_to_f32(s));
    cr_expect_eq(((uint8_t *)r->elems[0]->data)[i], p, "p[%d]", i);
    uint8_t got = ((uint8_t *)r->elems[1]->data)[i];
    cr_expect(got == q || (isnan(hlo_f8e4m3fn_to_f32(got)) && isnan(hlo_f8e4m3fn_to_f32(q))),
              "q[%d]", i);
  }
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 3; j++) {
      float acc = 0;
      for (int k = 0; k < 8; k++)
        acc += hlo_f8e4m3fn_to_f32(xb[i * 8 + k]) * hlo_f8e5m2_to_f32(yb[k * 3 + j]);
      float got = ((float *)r->elems[2]->data)[i * 3 + j];
      cr_expect(got == acc || (isnan(got) && isnan(acc)), "d[%d,%d]: got %.9g want %.9g", i, j, got,
                acc);
      double gb = hlo_load_f64(DT_BF16, r->elems[3]->data, i * 3 + j);
      double wb = hlo_bf16_to_f32(hlo_f32_to_bf16(acc));
      cr_expect(gb == wb || (isnan(gb) && isnan(wb)), "db[%d,%d]: got %.9g want %.9g", i, j, gb,
                wb);
      cr_expect_eq(((uint8_t *)r->elems[4]->data)[i * 3 + j], hlo_f32_to_f8e5m2(acc), "d8[%d,%d]",
                   i, j);
    }
  hlo_arena_free(a);
  hlo_module_free(m);
}

/* ------------------------------------------------------------------ .npy */

/* fp8 is written as '|u1' bits, reads back as u8 and is retyped to the fp8 type of the same
 * size by hlo_literal_bits_as; ml_dtypes' '|V1' reads the same way. */
Test(fp8, npy_bits) {
  HArena *a = hlo_arena_new();
  HErr err = {0};
  char path[] = "/tmp/hloc_fp8_XXXXXX";
  close(mkstemp(path));
  int64_t d[2] = {16, 16};
  for (int i = 0; i < 2; i++) {
    Shape s = hlo_shape_array(f8s[i].t, 2, d);
    Literal *l = hlo_literal_new(a, &s);
    for (int c = 0; c < 256; c++)
      ((uint8_t *)l->data)[c] = (uint8_t)c;
    cr_assert(hlo_npy_write(path, l, &err), "%s", err.msg);
    char *buf;
    size_t len;
    cr_assert(hlo_read_file(path, &buf, &len, &err));
    cr_expect(strstr(buf + 10, "'descr': '|u1'"), "header: %s", buf + 10);
    /* ml_dtypes writes float8 arrays with the void descr '|V1' */
    char *v = strstr(buf + 10, "|u1");
    cr_assert(v);
    v[1] = 'V', v[2] = '1';
    cr_assert(hlo_write_file_atomic(path, buf, len, &err), "%s", err.msg);
    free(buf);
    Literal *r = hlo_npy_read(a, path, &err);
    cr_assert(r, "%s", err.msg);
    cr_expect_eq(r->shape.dt, DT_U8);
    cr_expect(hlo_literal_bits_as(r, f8s[i].t));
    cr_expect_eq(r->shape.dt, f8s[i].t);
    cr_expect(!memcmp(r->data, l->data, 256));
  }
  int64_t n = 4;
  Shape ss = hlo_shape_array(DT_S8, 1, &n);
  Literal *s8 = hlo_literal_new(a, &ss);
  cr_expect(!hlo_literal_bits_as(s8, DT_F8E4M3FN), "only unsigned carriers are retyped");
  Shape su = hlo_shape_array(DT_U16, 1, &n);
  Literal *u16 = hlo_literal_new(a, &su);
  cr_expect(!hlo_literal_bits_as(u16, DT_F8E5M2), "only a carrier of the same size");
  unlink(path);
  hlo_arena_free(a);
}

/* The benchmark drivers' own conversions (bench/cpu/bench_bf16.h, which they carry because
 * they link nothing but libc and libm) agree with hlo/literal.c's: every fp8 code and every
 * f16 code decodes alike (NaNs as NaNs), and f32 values across the formats' ranges (ties,
 * subnormals, overflow included) round to the same bits. */
#include "../bench/cpu/bench_bf16.h"

Test(fp8, bench_conversions_match_hlo) {
  for (int c = 0; c < 256; c++) {
    float a = bench_mini_to_f32((uint16_t)c, bench_f8e4m3fn), b = hlo_f8e4m3fn_to_f32((uint8_t)c);
    cr_expect(isnan(a) ? isnan(b) : a == b, "e4m3fn %#x: %g against %g", c, a, b);
    a = bench_mini_to_f32((uint16_t)c, bench_f8e5m2), b = hlo_f8e5m2_to_f32((uint8_t)c);
    cr_expect(isnan(a) ? isnan(b) : a == b, "e5m2 %#x: %g against %g", c, a, b);
  }
  for (int c = 0; c < 65536; c++) {
    float a = bench_mini_to_f32((uint16_t)c, bench_f16), b = hlo_f16_to_f32((uint16_t)c);
    cr_expect(isnan(a) ? isnan(b) : a == b, "f16 %#x: %g against %g", c, a, b);
  }
  for (int i = -4000000; i <= 4000000; i += 7) {
    float x = (float)i * 1.37e-4f, y = ldexpf((float)i, -40);
    float xs[2] = {x, y};
    for (int j = 0; j < 2; j++) {
      cr_assert_eq(bench_f32_to_mini(xs[j], bench_f8e4m3fn), hlo_f32_to_f8e4m3fn(xs[j]),
                   "e4m3fn of %a", xs[j]);
      cr_assert_eq(bench_f32_to_mini(xs[j], bench_f8e5m2), hlo_f32_to_f8e5m2(xs[j]), "e5m2 of %a",
                   xs[j]);
      cr_assert_eq(bench_f32_to_mini(xs[j], bench_f16), hlo_f32_to_f16(xs[j]), "f16 of %a", xs[j]);
    }
  }
}
