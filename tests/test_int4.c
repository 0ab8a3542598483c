/* tests/test_int4.c: the 4-bit integer types s4 (-8..7) and u4 (0..15), end to end.
 *
 * hloc stores them one element per byte, the byte holding the value (sign-extended for s4),
 * and computes modulo 16 as XLA's i4 does. Checked here: the dtype table; the text reader and
 * printer (shapes, XLA's E(4) layouts kept verbatim, constants and their ranges); the proto
 * writer and reader (s4s/u4s, a byte per element); .npy ('|i1'/'|u1' bytes, retyped by the
 * module); the verifier; the interpreter against values this file derives itself (every
 * pair of operands of each binary op, converts at the edges: float to s4/u4 saturates, NaN
 * gives 0, integers wrap), bitcast-convert on XLA's packing (two per byte, low nibble
 * first); the CPU target against the interpreter on small modules (converts, a dot of an
 * s4 weight, broadcast, concatenate, transpose, dynamic-update-slice, bitcast-convert); and
 * the CUDA target's located refusal. */
#define _GNU_SOURCE /* memmem */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cpu/cpu_test_util.h"
#include "hlo.h"
#include "proto.h"
#include "target.h"
#include "test_util.h"

/* v wrapped to the 4-bit type t (as two's complement for s4). */
static int64_t wrap4(DType t, int64_t v) {
  int64_t b = v & 0xf;
  return t == DT_S4 && b >= 8 ? b - 16 : b;
}

/* The entry of text evaluated on args. */
static Literal *run(HArena *a, const char *text, Literal *const *args, int n) {
  HModule *m = tu_parse(text);
  HErr e = {0};
  Literal *r = hlo_interp_run(m, a, args, n, &e);
  cr_assert(r, "interpreter failed: %s", e.msg);
  hlo_module_free(m);
  return r;
}

static void expect_i64s(const Literal *l, const int64_t *want, int n, const char *what) {
  cr_assert_eq(hlo_shape_elems(&l->shape), n, "%s: element count", what);
  for (int i = 0; i < n; i++)
    cr_expect_eq(hlo_literal_get_i64(l, i), want[i], "%s: element %d is %lld, want %lld", what, i,
                 (long long)hlo_literal_get_i64(l, i), (long long)want[i]);
}

/* ------------------------------------------------------------------ the IR and readers */

Test(int4, dtype_table) {
  cr_expect_eq(hlo_dtype_from_name("s4", 2), DT_S4);
  cr_expect_eq(hlo_dtype_from_name("u4", 2), DT_U4);
  cr_expect_eq(hlo_dtype_from_proto(21), DT_S4);
  cr_expect_eq(hlo_dtype_from_proto(22), DT_U4);
  cr_expect_eq(hlo_dtype_size(DT_S4), 1);
  cr_expect_eq(hlo_dtype_bits(DT_S4), 4);
  cr_expect_eq(hlo_dtype_bits(DT_U4), 4);
  cr_expect_eq(hlo_dtype_bits(DT_S8), 8);
  cr_expect_eq(hlo_dtype_bits(DT_F32), 32);
  cr_expect_eq(hlo_dtype_kind(DT_S4), DK_SINT);
  cr_expect_eq(hlo_dtype_kind(DT_U4), DK_UINT);
  /* a byte's low 4 bits are the value; a store keeps them, extended */
  uint8_t b[2] = {0xf3, 0x0d};
  cr_expect_eq(hlo_load_i64(DT_S4, b, 0), 3);
  cr_expect_eq(hlo_load_i64(DT_S4, b, 1), -3);
  cr_expect_eq(hlo_load_i64(DT_U4, b, 1), 13);
  hlo_store_i64(DT_S4, b, 0, 9);
  cr_expect_eq(b[0], 0xf9, "s4 9 wraps to -7, stored sign-extended");
  hlo_store_i64(DT_U4, b, 1, -1);
  cr_expect_eq(b[1], 15);
}

static const char *round_trip_text = "HloModule t, entry_computation_layout={(s4[16,8]{1,0:E(4)}, "
                                     "u4[3]{0:E(4)})->(s4[16,8]{1,0:E(4)}, u4[3]{0}, s4[4]{0})}\n\n"
                                     "ENTRY e {\n"
                                     "  p = s4[16,8]{1,0:E(4)} parameter(0)\n"
                                     "  q = u4[3]{0:E(4)} parameter(1)\n"
                                     "  c = s4[4]{0} constant({-8, -1, 0, 7})\n"
                                     "  d = u4[3]{0} constant({0, 9, 15})\n"
                                     "  a = u4[3]{0} add(q, d)\n"
                                     "  ROOT t = (s4[16,8]{1,0:E(4)}, u4[3]{0}, s4[4]{0}) "
                                     "tuple(p, a, c)\n"
                                     "}\n\n";

Test(int4, text_round_trip) {
  HModule *m = tu_parse(round_trip_text);
  HErr e = {0};
  cr_assert(hlo_verify(m, &e), "%s", e.msg);
  char *t1 = hlo_module_text(m, NULL, NULL);
  cr_expect(strstr(t1, "p = s4[16,8]{1,0:E(4)} parameter(0)"), "E(4) kept: %s", t1);
  cr_expect(strstr(t1, "s4[4]{0} constant({-8, -1, 0, 7})"), "%s", t1);
  cr_expect(strstr(t1, "u4[3]{0} constant({0, 9, 15})"), "%s", t1);
  HModule *m2 = tu_parse(t1);
  char *t2 = hlo_module_text(m2, NULL, NULL);
  cr_expect_str_eq(t1, t2, "print -> parse -> print changed the text");
  free(t1);
  free(t2);
  hlo_module_free(m);
  hlo_module_free(m2);
}

/* text does not parse; the error is one located line holding want. */
static void parse_fails(const char *body, const char *want) {
  char text[1024];
  snprintf(text, sizeof text, "HloModule t\nENTRY e {\n%s}\n", body);
  HErr e = {0};
  HModule *m = hlo_parse_text(text, strlen(text), "bad.hlo", &e);
  cr_expect(!m, "'%s' parsed", body);
  cr_expect(strstr(e.msg, want) && strstr(e.msg, "bad.hlo:") && !strchr(e.msg, '\n'),
            "'%s' does not say '%s' on one located line", e.msg, want);
  if (m) hlo_module_free(m);
}

Test(int4, constants_out_of_range) {
  parse_fails("  ROOT c = s4[2] constant({7, 8})\n", "value 8 out of range for s4");
  parse_fails("  ROOT c = s4[] constant(-9)\n", "value -9 out of range for s4");
  parse_fails("  ROOT c = u4[2] constant({15, 16})\n", "value 16 out of range for u4");
  parse_fails("  ROOT c = u4[] constant(-1)\n", "value -1 out of range for u4");
  parse_fails("  ROOT c = s2[] constant(1)\n", "unsupported element type 's2'");
}

Test(int4, proto_round_trip) {
  HModule *m = tu_parse(round_trip_text);
  uint8_t *buf;
  size_t len;
  HErr e = {0};
  cr_assert(proto_write_module(m, &buf, &len, &e), "%s", e.msg);
  HModule *m2 = proto_read_module(buf, len, "rt.pb", &e);
  cr_assert(m2, "%s", e.msg);
  free(buf);
  char *t1 = hlo_module_text(m, NULL, NULL), *t2 = hlo_module_text(m2, NULL, NULL);
  cr_expect_str_eq(t1, t2, "text -> proto -> text changed the module");
  /* the constants' values came back exactly */
  HArena *a = hlo_arena_new();
  HErr e2 = {0};
  Literal *args[2];
  int64_t pd[2] = {16, 8}, qd[1] = {3};
  Shape ps = hlo_shape_array(DT_S4, 2, pd), qs = hlo_shape_array(DT_U4, 1, qd);
  args[0] = hlo_literal_new(a, &ps);
  args[1] = hlo_literal_new(a, &qs);
  for (int i = 0; i < 3; i++)
    hlo_literal_set_i64(args[1], i, 14 + i);
  Literal *r = hlo_interp_run(m2, a, args, 2, &e2);
  cr_assert(r, "%s", e2.msg);
  expect_i64s(r->elems[1], (const int64_t[]){14, 15 + 9 - 16, 0 + 15}, 3,
              "u4 add (16 stored as 0)");
  expect_i64s(r->elems[2], (const int64_t[]){-8, -1, 0, 7}, 4, "s4 constant");
  hlo_arena_free(a);
  free(t1);
  free(t2);
  hlo_module_free(m);
  hlo_module_free(m2);
}

Test(int4, npy_bytes) {
  HArena *a = hlo_arena_new();
  int64_t d[1] = {4};
  Shape s = hlo_shape_array(DT_S4, 1, d);
  Literal *l = hlo_literal_new(a, &s);
  const int64_t v[4] = {-8, -1, 0, 7};
  for (int i = 0; i < 4; i++)
    hlo_literal_set_i64(l, i, v[i]);
  char path[] = "/tmp/hloc_int4_XXXXXX";
  close(mkstemp(path));
  HErr e = {0};
  cr_assert(hlo_npy_write(path, l, &e), "%s", e.msg);
  char *raw;
  size_t n;
  cr_assert(hlo_read_file(path, &raw, &n, &e), "%s", e.msg);
  cr_expect(memmem(raw, n, "'|i1'", 5), "s4 is written as '|i1' bytes");
  cr_expect(!memcmp(raw + n - 4, "\xf8\xff\x00\x07", 4), "one byte per element, the value");
  free(raw);
  Literal *back = hlo_npy_read(a, path, &e);
  cr_assert(back, "%s", e.msg);
  cr_expect_eq(back->shape.dt, DT_S8);
  cr_assert(hlo_literal_bits_as(back, DT_S4));
  expect_i64s(back, v, 4, "s4 from '|i1'");
  /* u1 bytes with their high bits set: only the low 4 bits are the value */
  Shape us = hlo_shape_array(DT_U8, 1, d);
  Literal *u = hlo_literal_new(a, &us);
  memcpy(u->data, "\xf3\x1d\x08\x00", 4);
  cr_assert(hlo_literal_bits_as(u, DT_S4));
  expect_i64s(u, (const int64_t[]){3, -3, -8, 0}, 4, "s4 from '|u1' bits");
  cr_expect(!memcmp(u->data, "\x03\xfd\xf8\x00", 4), "bytes made canonical");
  remove(path);
  hlo_arena_free(a);
}

Test(int4, verifier) {
  const char *bad[][2] = {
      {"  a = s4[4] parameter(0)\n  b = s8[4] parameter(1)\n  ROOT r = s4[4] add(a, b)\n",
       "instruction 'r'"},
      {"  a = s4[4,3] parameter(0)\n  ROOT r = s8[4] bitcast-convert(a)\n", "minor dimension"},
      {"  a = f32[4] parameter(0)\n  ROOT r = s4[4,4] bitcast-convert(a)\n", "instruction 'r'"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char text[512];
    snprintf(text, sizeof text, "HloModule t\nENTRY e {\n%s}\n", bad[i][0]);
    HErr e = {0};
    HModule *m = hlo_parse_text(text, strlen(text), "bad.hlo", &e);
    cr_assert(m, "%s", e.msg);
    cr_expect(!hlo_verify(m, &e), "'%s' verified", bad[i][0]);
    cr_expect(strstr(e.msg, bad[i][1]), "'%s' lacks '%s'", e.msg, bad[i][1]);
    hlo_module_free(m);
  }
  HModule *m = tu_parse("HloModule t\nENTRY e {\n  a = f32[4] parameter(0)\n"
                        "  ROOT r = s4[4,8] bitcast-convert(a)\n}\n");
  HErr e = {0};
  cr_expect(hlo_verify(m, &e), "f32 -> s4[4,8]: %s", e.msg);
  hlo_module_free(m);
}

/* ------------------------------------------------------------------ the interpreter */

/* Expected XLA result of op on 4-bit a, b of type t (operands already in range). */
static int64_t want_binop(const char *op, DType t, int64_t a, int64_t b) {
  bool s = t == DT_S4;
  uint64_t ua = (uint64_t)a & 15, ub = (uint64_t)b & 15;
  if (!strcmp(op, "add")) return wrap4(t, a + b);
  if (!strcmp(op, "subtract")) return wrap4(t, a - b);
  if (!strcmp(op, "multiply")) return wrap4(t, a * b);
  if (!strcmp(op, "divide")) return b == 0 ? wrap4(t, -1) : s && b == -1 ? wrap4(t, -a) : a / b;
  if (!strcmp(op, "remainder")) return b == 0 ? a : s && b == -1 ? 0 : a % b;
  if (!strcmp(op, "maximum")) return a > b ? a : b;
  if (!strcmp(op, "shift-left")) return ub >= 4 ? 0 : wrap4(t, (int64_t)(ua << ub));
  if (!strcmp(op, "shift-right-logical")) return ub >= 4 ? 0 : wrap4(t, (int64_t)(ua >> ub));
  /* arithmetic: the 4 bits as signed */
  int64_t sa = wrap4(DT_S4, a);
  return wrap4(t, ub >= 4 ? (sa < 0 ? -1 : 0) : sa >> ub);
}

static const char *const binops[] = {"add",
                                     "subtract",
                                     "multiply",
                                     "divide",
                                     "remainder",
                                     "maximum",
                                     "shift-left",
                                     "shift-right-logical",
                                     "shift-right-arithmetic"};
#define NBIN (int)(sizeof binops / sizeof binops[0])

/* A module applying every op of binops to parameters of type T[256], results in a tuple. */
static void binop_module(char *text, size_t n, const char *t) {
  int k = snprintf(text, n,
                   "HloModule t\nENTRY e {\n  a = %s[256] parameter(0)\n"
                   "  b = %s[256] parameter(1)\n",
                   t, t);
  for (int i = 0; i < NBIN; i++)
    k += snprintf(text + k, n - (size_t)k, "  r%d = %s[256] %s(a, b)\n", i, t, binops[i]);
  k += snprintf(text + k, n - (size_t)k, "  ROOT t = (");
  for (int i = 0; i < NBIN; i++)
    k += snprintf(text + k, n - (size_t)k, "%s%s[256]", i ? ", " : "", t);
  k += snprintf(text + k, n - (size_t)k, ") tuple(");
  for (int i = 0; i < NBIN; i++)
    k += snprintf(text + k, n - (size_t)k, "%sr%d", i ? ", " : "", i);
  snprintf(text + k, n - (size_t)k, ")\n}\n");
}

Test(int4, interp_every_pair) {
  const DType types[2] = {DT_S4, DT_U4};
  for (int ti = 0; ti < 2; ti++) {
    DType t = types[ti];
    char text[4096];
    binop_module(text, sizeof text, hlo_dtype_name(t));
    HArena *a = hlo_arena_new();
    int64_t d[1] = {256};
    Shape s = hlo_shape_array(t, 1, d);
    Literal *args[2] = {hlo_literal_new(a, &s), hlo_literal_new(a, &s)};
    for (int i = 0; i < 256; i++) {
      hlo_literal_set_i64(args[0], i, wrap4(t, i / 16));
      hlo_literal_set_i64(args[1], i, wrap4(t, i % 16));
    }
    Literal *r = run(a, text, args, 2);
    for (int o = 0; o < NBIN; o++)
      for (int i = 0; i < 256; i++) {
        int64_t x = wrap4(t, i / 16), y = wrap4(t, i % 16);
        int64_t got = hlo_literal_get_i64(r->elems[o], i), want = want_binop(binops[o], t, x, y);
        cr_expect_eq(got, want, "%s %s(%lld, %lld) = %lld, want %lld", hlo_dtype_name(t), binops[o],
                     (long long)x, (long long)y, (long long)got, (long long)want);
      }
    hlo_arena_free(a);
  }
}

Test(int4, interp_converts) {
  HArena *a = hlo_arena_new();
  /* float -> s4/u4 saturates, NaN -> 0, toward zero; integers wrap; s4 <-> u4 wraps */
  Literal *r = run(a,
                   "HloModule t\nENTRY e {\n"
                   "  f = f32[10] constant({-100, -8.5, -8, -7.9, -0.5, 0.5, 7.9, 8, 100, nan})\n"
                   "  i = s32[6] constant({8, 17, -9, -16, 15, -8})\n"
                   "  a = s4[10] convert(f)\n"
                   "  b = u4[10] convert(f)\n"
                   "  c = s4[6] convert(i)\n"
                   "  d = u4[6] convert(i)\n"
                   "  e = u4[6] convert(c)\n"
                   "  g = s4[6] convert(d)\n"
                   "  h = f32[6] convert(c)\n"
                   "  k = bf16[6] convert(d)\n"
                   "  l = s32[6] convert(c)\n"
                   "  ROOT t = (s4[10], u4[10], s4[6], u4[6], u4[6], s4[6], f32[6], bf16[6], "
                   "s32[6]) tuple(a, b, c, d, e, g, h, k, l)\n"
                   "}\n",
                   NULL, 0);
  expect_i64s(r->elems[0], (const int64_t[]){-8, -8, -8, -7, 0, 0, 7, 7, 7, 0}, 10, "f32->s4");
  expect_i64s(r->elems[1], (const int64_t[]){0, 0, 0, 0, 0, 0, 7, 8, 15, 0}, 10, "f32->u4");
  expect_i64s(r->elems[2], (const int64_t[]){-8, 1, 7, 0, -1, -8}, 6, "s32->s4");
  expect_i64s(r->elems[3], (const int64_t[]){8, 1, 7, 0, 15, 8}, 6, "s32->u4");
  expect_i64s(r->elems[4], (const int64_t[]){8, 1, 7, 0, 15, 8}, 6, "s4->u4");
  expect_i64s(r->elems[5], (const int64_t[]){-8, 1, 7, 0, -1, -8}, 6, "u4->s4");
  expect_i64s(r->elems[6], (const int64_t[]){-8, 1, 7, 0, -1, -8}, 6, "s4->f32");
  expect_i64s(r->elems[7], (const int64_t[]){8, 1, 7, 0, 15, 8}, 6, "u4->bf16");
  expect_i64s(r->elems[8], (const int64_t[]){-8, 1, 7, 0, -1, -8}, 6, "s4->s32");
  /* the unary ops at the edges */
  r = run(a,
          "HloModule t\nENTRY e {\n"
          "  c = s4[4] constant({-8, -1, 0, 7})\n"
          "  u = u4[4] constant({0, 1, 8, 15})\n"
          "  n = s4[4] negate(c)\n"
          "  b = s4[4] abs(c)\n"
          "  x = s4[4] not(c)\n"
          "  z = u4[4] count-leading-zeros(u)\n"
          "  p = u4[4] popcnt(u)\n"
          "  ROOT t = (s4[4], s4[4], s4[4], u4[4], u4[4]) tuple(n, b, x, z, p)\n"
          "}\n",
          NULL, 0);
  expect_i64s(r->elems[0], (const int64_t[]){-8, 1, 0, -7}, 4, "negate");
  expect_i64s(r->elems[1], (const int64_t[]){-8, 1, 0, 7}, 4, "abs");
  expect_i64s(r->elems[2], (const int64_t[]){7, 0, -1, -8}, 4, "not");
  expect_i64s(r->elems[3], (const int64_t[]){4, 3, 0, 0}, 4, "clz");
  expect_i64s(r->elems[4], (const int64_t[]){0, 1, 1, 4}, 4, "popcnt");
  hlo_arena_free(a);
}

Test(int4, interp_bitcast_convert_packing) {
  HArena *a = hlo_arena_new();
  Literal *r = run(a,
                   "HloModule t\nENTRY e {\n"
                   "  c = s4[3,2] constant({{1, 2}, {-1, 7}, {-8, 0}})\n"
                   "  w = u8[2] constant({171, 16})\n"
                   "  f = f32[] constant(1)\n"
                   "  a = s8[3] bitcast-convert(c)\n"
                   "  b = u4[2,2] bitcast-convert(w)\n"
                   "  g = u4[8] bitcast-convert(f)\n"
                   "  h = f32[] bitcast-convert(g)\n"
                   "  s = s4[3,2] bitcast-convert(a)\n"
                   "  ROOT t = (s8[3], u4[2,2], u4[8], f32[], s4[3,2]) tuple(a, b, g, h, s)\n"
                   "}\n",
                   NULL, 0);
  /* low nibble first: {1, 2} is 0x21, {-1, 7} 0x7f, {-8, 0} 0x08 */
  expect_i64s(r->elems[0], (const int64_t[]){0x21, 0x7f, 0x08}, 3, "s4[3,2] -> s8[3]");
  expect_i64s(r->elems[1], (const int64_t[]){11, 10, 0, 1}, 4, "u8 171, 16 -> u4 pairs");
  expect_i64s(r->elems[2], (const int64_t[]){0, 0, 0, 0, 0, 8, 15, 3}, 8, "1.0f (0x3f800000)");
  cr_expect_eq(hlo_literal_get_f64(r->elems[3], 0), 1.0, "and back");
  expect_i64s(r->elems[4], (const int64_t[]){1, 2, -1, 7, -8, 0}, 6, "s8 -> s4 round trip");
  hlo_arena_free(a);
}

/* ------------------------------------------------------------------ the targets */

Test(int4, cpu_converts_and_arithmetic, .timeout = 120) {
  ct_check_text_both("int4 converts",
                     "HloModule t\nENTRY e {\n"
                     "  p = s4[64]{0:E(4)} parameter(0)\n"
                     "  q = u4[64] parameter(1)\n"
                     "  x = f32[64] parameter(2)\n"
                     "  s = f32[] constant(6)\n"
                     "  sb = f32[64] broadcast(s), dimensions={}\n"
                     "  xs = f32[64] multiply(x, sb)\n"
                     "  a = f32[64] convert(p)\n"
                     "  b = bf16[64] convert(q)\n"
                     "  c = s4[64] convert(xs)\n"
                     "  d = u4[64] convert(xs)\n"
                     "  e = s4[64] convert(b)\n"
                     "  m = s4[64] multiply(p, c)\n"
                     "  n = s4[64] add(m, p)\n"
                     "  u = u4[64] subtract(q, d)\n"
                     "  v = u4[64] shift-left(u, q)\n"
                     "  w = s4[64] divide(p, c)\n"
                     "  z = s4[64] shift-right-arithmetic(p, e)\n"
                     "  ROOT t = (f32[64], bf16[64], s4[64], u4[64], s4[64], s4[64], u4[64], "
                     "s4[64], s4[64]) tuple(a, b, c, n, e, w, v, z, m)\n"
                     "}\n",
                     1e-6, 16);
}

Test(int4, cpu_dot_of_s4_weight, .timeout = 120) {
  ct_check_text_both("int4 weight dot",
                     "HloModule t\nENTRY e {\n"
                     "  x = f32[4,32] parameter(0)\n"
                     "  w = s4[32,24]{1,0:E(4)} parameter(1)\n"
                     "  s = f32[24] parameter(2)\n"
                     "  wf = f32[32,24] convert(w)\n"
                     "  sb = f32[32,24] broadcast(s), dimensions={1}\n"
                     "  ws = f32[32,24] multiply(wf, sb)\n"
                     "  ROOT d = f32[4,24] dot(x, ws), lhs_contracting_dims={1}, "
                     "rhs_contracting_dims={0}\n"
                     "}\n",
                     1e-5, 16);
}

Test(int4, cpu_data_movement, .timeout = 120) {
  ct_check_text_both("int4 data movement",
                     "HloModule t\nENTRY e {\n"
                     "  p = s4[6,10]{1,0:E(4)} parameter(0)\n"
                     "  q = s4[6,3] parameter(1)\n"
                     "  u = u4[5] parameter(2)\n"
                     "  i = s32[] parameter(3)\n"
                     "  k = s4[] constant(-2)\n"
                     "  kb = s4[6,4] broadcast(k), dimensions={}\n"
                     "  c = s4[3] constant({-8, 7, 5})\n"
                     "  cb = s4[6,3] broadcast(c), dimensions={1}\n"
                     "  cat = s4[6,20] concatenate(p, q, kb, cb), dimensions={1}\n"
                     "  tr = s4[20,6] transpose(cat), dimensions={1,0}\n"
                     "  z = s32[] constant(0)\n"
                     "  dus = s4[6,10] dynamic-update-slice(p, q, z, i)\n"
                     "  ub = u4[5,6] broadcast(u), dimensions={0}\n"
                     "  ROOT t = (s4[20,6], s4[6,10], u4[5,6]) tuple(tr, dus, ub)\n"
                     "}\n",
                     0, 16);
}

Test(int4, cpu_bitcast_convert, .timeout = 120) {
  ct_check_text_both("int4 bitcast-convert",
                     "HloModule t\nENTRY e {\n"
                     "  p = s4[8,2] parameter(0)\n"
                     "  q = u8[5] parameter(1)\n"
                     "  f = f32[3] parameter(2)\n"
                     "  a = s8[8] bitcast-convert(p)\n"
                     "  b = s4[5,2] bitcast-convert(q)\n"
                     "  g = u4[3,8] bitcast-convert(f)\n"
                     "  h = u4[8,2] bitcast-convert(p)\n"
                     "  ROOT t = (s8[8], s4[5,2], u4[3,8], u4[8,2]) tuple(a, b, g, h)\n"
                     "}\n",
                     0, 16);
}

/* The CUDA target compiles 4-bit values (one byte per element, as the CPU target's); the
 * GPU runs are tests/cuda/cases/int4_*.hlo. */
Test(int4, cuda_compiles_int4) {
#ifdef HLOC_HAVE_CUDA
  HModule *m = tu_parse("HloModule t\nENTRY e {\n  a = f32[4] parameter(0)\n"
                        "  c = u4[4] convert(a)\n  d = u4[2,2] reshape(c)\n"
                        "  ROOT r = u8[2] bitcast-convert(d)\n}\n");
  CudaOpts o = {.name = "t", .out_path = "/tmp/hloc_int4_cuda.ptx", .emit = CUDA_EMIT_PTX};
  HErr e = {0};
  cr_expect(cuda_compile(m, &o, &e), "%s", e.msg);
  hlo_module_free(m);
  unlink("/tmp/hloc_int4_cuda.ptx");
#else
  cr_skip_test("built without CUDA");
#endif
}
