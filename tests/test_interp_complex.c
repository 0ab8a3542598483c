/* tests/test_interp_complex.c: complex numbers (c64, c128) and fft through the IR and the
 * reference interpreter.
 *
 * The XLA test runs every case of tests/xla_complex (JAX exports with XLA's outputs: c64
 * elementwise work, dots, fft of the four kinds over one to three dims with odd and
 * non-power-of-two lengths, c128 and f64) through the interpreter and compares each output
 * with XLA's: |got - want| <= tol * max|want| + tol * |want|, tol 1e-4 for 32-bit results
 * and 1e-10 for 64-bit ones, complex values by the magnitude of the difference
 * (hlo/compare.c). The unit tests check by
 * hand: a 4-point FFT and its inverses, complex multiply and divide, the parts and
 * conversions, data movement of 8- and 16-byte elements, the text and .npy round trips, and
 * that bad input (complex ops on the wrong types) and a target's refusal (a complex op the
 * CPU target does not generate) are one located line. */
#define _GNU_SOURCE /* memmem */
#include <complex.h>
#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hlo.h"
#include "proto.h"
#include "target.h"
#include "test_util.h"

#define CASES HLOC_TEST_DIR "/xla_complex"

/* The entry of text evaluated without arguments (constants only). */
static Literal *run0(HArena *a, const char *text) {
  HModule *m = tu_parse(text);
  HErr e = {0};
  Literal *r = hlo_interp_run(m, a, NULL, 0, &e);
  cr_assert(r, "interpreter failed: %s", e.msg);
  hlo_module_free(m);
  return r;
}

/* Element i of l against want, within tol of |want| (0: exactly). */
static void expect_c(const Literal *l, int64_t i, double _Complex want, double tol) {
  double _Complex g = hlo_load_c128(l->shape.dt, l->data, i);
  cr_assert(cabs(g - want) <= tol * (1 + cabs(want)),
            "element %lld: got (%.9g, %.9g), want (%.9g, %.9g)", (long long)i, creal(g), cimag(g),
            creal(want), cimag(want));
}

static void expect_all(const Literal *l, DType dt, int64_t n, const double _Complex *want,
                       double tol) {
  cr_assert(hlo_shape_is_array(&l->shape) && l->shape.dt == dt, "result %s, expected %s",
            hlo_dtype_name(l->shape.dt), hlo_dtype_name(dt));
  cr_assert_eq(hlo_shape_elems(&l->shape), n);
  for (int64_t i = 0; i < n; i++)
    expect_c(l, i, want[i], tol);
}

#define C(...) ((const double _Complex[]){__VA_ARGS__})
#define NC(...) (int64_t)(sizeof(C(__VA_ARGS__)) / sizeof(double _Complex)), C(__VA_ARGS__)

/* ------------------------------------------------------------------ against XLA */

/* Runs case dir/name; returns whether every output is within tolerance, printing a line. */
static bool run_case(const char *name, HArena *a) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s/module.hlo", CASES, name);
  HErr e = {0};
  HModule *m = proto_load_file(path, &e);
  if (!m || !hlo_verify(m, &e)) {
    fprintf(stderr, "  %-18s FAIL read: %s\n", name, e.msg);
    hlo_module_free(m);
    return false;
  }
  hlo_comp_renumber(m->entry);
  int np = m->entry->nparams;
  Literal *args[8] = {0};
  bool ok = np <= 8;
  for (int i = 0; i < np && ok; i++) {
    snprintf(path, sizeof path, "%s/%s/in%d.npy", CASES, name, i);
    ok = (args[i] = hlo_npy_read(a, path, &e)) != NULL;
  }
  Literal *r = ok ? hlo_interp_run(m, a, args, np, &e) : NULL;
  int nout = r && r->shape.dt == DT_TUPLE ? r->shape.ntuple : 1;
  double worst = 0;
  for (int k = 0; r && k < nout && ok; k++) {
    Literal *got = r->shape.dt == DT_TUPLE ? r->elems[k] : r;
    snprintf(path, sizeof path, "%s/%s/out%d.npy", CASES, name, k);
    Literal *want = hlo_npy_read(a, path, &e);
    DType dt = got->shape.dt;
    double tol = dt == DT_C128 || dt == DT_F64 ? 1e-10 : 1e-4;
    HCompare c;
    ok = want && hlo_literal_compare(got, want, tol, tol * hlo_literal_max_abs(want), &c, &e);
    if (ok && c.bad)
      fprintf(stderr,
              "  %-18s out%d: %lld outside, worst [%lld] got (%.9g, %.9g) want (%.9g, %.9g)\n",
              name, k, (long long)c.bad, (long long)c.worst, c.worst_got, c.worst_got_im,
              c.worst_want, c.worst_want_im);
    ok = ok && !c.bad;
    if (ok && c.max_abs / fmax(hlo_literal_max_abs(want), 1e-30) > worst)
      worst = c.max_abs / fmax(hlo_literal_max_abs(want), 1e-30);
  }
  if (!r || e.set)
    fprintf(stderr, "  %-18s FAIL: %s\n", name, e.msg);
  else
    fprintf(stderr, "  %-18s %s  outputs %d  max err %.3g of the largest magnitude\n", name,
            ok ? "ok  " : "FAIL", nout, worst);
  hlo_module_free(m);
  return r && ok;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

Test(interp_complex, xla_cases, .timeout = 120) {
  DIR *d = opendir(CASES);
  cr_assert(d, "no %s", CASES);
  char *names[64];
  int n = 0;
  for (struct dirent *de; (de = readdir(d)) && n < 64;)
    if (de->d_name[0] != '.' && !strchr(de->d_name, '.')) names[n++] = strdup(de->d_name);
  closedir(d);
  qsort(names, (size_t)n, sizeof *names, cmp_str);
  int bad = 0;
  for (int i = 0; i < n; i++) {
    HArena *a = hlo_arena_new();
    bad += !run_case(names[i], a);
    hlo_arena_free(a);
    free(names[i]);
  }
  fprintf(stderr, "interp_complex: %d of %d cases agree with XLA\n", n - bad, n);
  cr_expect_eq(n, 20, "%d cases in %s", n, CASES);
  cr_expect_eq(bad, 0, "%d of %d cases differ from XLA", bad, n);
}

/* ------------------------------------------------------------------ by hand */

Test(interp_complex, fft4_by_hand) {
  /* x = 1, 2, 3, 4: X[k] = sum x[j] w^jk, w = -i: 10, -2+2i, -2, -2-2i */
  HArena *a = hlo_arena_new();
  Literal *r =
      run0(a, "HloModule t\n"
              "ENTRY e {\n"
              "  x = c64[4] constant({(1, 0), (2, 0), (3, 0), (4, 0)})\n"
              "  f = c64[4] fft(x), fft_type=FFT, fft_length={4}\n"
              "  i = c64[4] fft(f), fft_type=IFFT, fft_length={4}\n"
              "  xr = f32[4] constant({1, 2, 3, 4})\n"
              "  rf = c64[3] fft(xr), fft_type=RFFT, fft_length={4}\n"
              "  ir = f32[4] fft(rf), fft_type=IRFFT, fft_length={4}\n"
              /* DC's and Nyquist's imaginary parts are ignored */
              "  h = c64[3] constant({(10, 5), (-2, 2), (-2, 7)})\n"
              "  ih = f32[4] fft(h), fft_type=IRFFT, fft_length={4}\n"
              "  ROOT t = (c64[4], c64[4], c64[3], f32[4], f32[4]) tuple(f, i, rf, ir, ih)\n"
              "}\n");
  expect_all(r->elems[0], DT_C64, NC(10, HLO_CMPLX(-2, 2), -2, HLO_CMPLX(-2, -2)), 1e-6);
  expect_all(r->elems[1], DT_C64, NC(1, 2, 3, 4), 1e-6); /* IFFT scaled by 1/4 */
  expect_all(r->elems[2], DT_C64, NC(10, HLO_CMPLX(-2, 2), -2), 1e-6);
  expect_all(r->elems[3], DT_F32, NC(1, 2, 3, 4), 1e-6);
  expect_all(r->elems[4], DT_F32, NC(1, 2, 3, 4), 1e-6);
  hlo_arena_free(a);
}

Test(interp_complex, arithmetic_parts_and_converts) {
  HArena *a = hlo_arena_new();
  Literal *r = run0(a, "HloModule t\n"
                       "ENTRY e {\n"
                       "  x = c64[3] constant({(1, 2), (3, 4), (0, 0)})\n"
                       "  y = c64[3] constant({(3, -4), (0, 1), (-1, 0)})\n"
                       "  m = c64[3] multiply(x, y)\n"
                       "  d = c64[3] divide(m, y)\n"
                       "  s = c64[3] subtract(x, y)\n"
                       "  n = c64[3] negate(x)\n"
                       "  ab = f32[3] abs(x)\n"
                       "  re = f32[3] real(y)\n"
                       "  im = f32[3] imag(y)\n"
                       "  z = c64[3] complex(im, re)\n"
                       "  eq = pred[3] compare(d, x), direction=EQ\n"
                       "  wide = c128[3] convert(x)\n"
                       "  fr = c64[3] convert(re)\n"
                       "  sg = c64[3] sign(x)\n"
                       "  ROOT t = (c64[3], c64[3], c64[3], c64[3], f32[3], c64[3], pred[3], "
                       "c128[3], c64[3], c64[3]) tuple(m, d, s, n, ab, z, eq, wide, fr, sg)\n"
                       "}\n");
  /* (1+2i)(3-4i) = 11+2i; (3+4i)i = -4+3i */
  expect_all(r->elems[0], DT_C64, NC(HLO_CMPLX(11, 2), HLO_CMPLX(-4, 3), 0), 0);
  expect_all(r->elems[1], DT_C64, NC(HLO_CMPLX(1, 2), HLO_CMPLX(3, 4), 0), 1e-7);
  expect_all(r->elems[2], DT_C64, NC(HLO_CMPLX(-2, 6), HLO_CMPLX(3, 3), 1), 0);
  expect_all(r->elems[3], DT_C64, NC(HLO_CMPLX(-1, -2), HLO_CMPLX(-3, -4), 0), 0);
  expect_all(r->elems[4], DT_F32, NC(sqrt(5), 5, 0), 1e-7);
  expect_all(r->elems[5], DT_C64, NC(HLO_CMPLX(-4, 3), HLO_CMPLX(1, 0), HLO_CMPLX(0, -1)), 0);
  for (int i = 0; i < 3; i++)
    cr_expect(((const uint8_t *)r->elems[6]->data)[i], "divide did not undo multiply at %d", i);
  expect_all(r->elems[7], DT_C128, NC(HLO_CMPLX(1, 2), HLO_CMPLX(3, 4), 0), 0);
  expect_all(r->elems[8], DT_C64, NC(3, 0, -1), 0);
  expect_all(r->elems[9], DT_C64, NC(HLO_CMPLX(1 / sqrt(5), 2 / sqrt(5)), HLO_CMPLX(0.6, 0.8), 0),
             1e-7);
  hlo_arena_free(a);
}

Test(interp_complex, data_movement_of_wide_elements) {
  /* 16-byte c128 elements through the ops that only move data, and a complex reduce */
  HArena *a = hlo_arena_new();
  Literal *r = run0(
      a, "HloModule t\n"
         "sum {\n"
         "  p = c128[] parameter(0)\n"
         "  q = c128[] parameter(1)\n"
         "  ROOT s = c128[] add(p, q)\n"
         "}\n"
         "ENTRY e {\n"
         "  x = c128[2,3] constant({ { (1, 1), (2, 2), (3, 3) }, { (4, -4), (5, -5), (6, -6) } })\n"
         "  t = c128[3,2] transpose(x), dimensions={1,0}\n"
         "  s = c128[2,1] slice(x), slice={[0:2], [1:2]}\n"
         "  rv = c128[2,3] reverse(x), dimensions={1}\n"
         "  z = c128[] constant((0, 0))\n"
         "  pd = c128[2,4] pad(x, z), padding=0_0x1_0\n"
         "  k = s32[] constant(1)\n"
         "  ds = c128[1,2] dynamic-slice(x, k, k), dynamic_slice_sizes={1,2}\n"
         "  cc = c128[4,3] concatenate(x, x), dimensions={0}\n"
         "  rd = c128[2] reduce(x, z), dimensions={1}, to_apply=sum\n"
         "  b = c128[2,2] broadcast(rd), dimensions={0}\n"
         "  ix = s32[2,1] constant({ {1}, {0} })\n"
         "  g = c128[2,3] gather(x, ix), offset_dims={1}, collapsed_slice_dims={0}, "
         "start_index_map={0}, index_vector_dim=1, slice_sizes={1,3}\n"
         "  p = pred[2,3] constant({ {true, false, true}, {false, true, false} })\n"
         "  se = c128[2,3] select(p, x, rv)\n"
         "  ROOT tu = (c128[3,2], c128[2,1], c128[2,3], c128[2,4], c128[1,2], c128[4,3], "
         "c128[2,2], c128[2,3], c128[2,3]) tuple(t, s, rv, pd, ds, cc, b, g, se)\n"
         "}\n");
  expect_all(r->elems[0], DT_C128,
             NC(HLO_CMPLX(1, 1), HLO_CMPLX(4, -4), HLO_CMPLX(2, 2), HLO_CMPLX(5, -5),
                HLO_CMPLX(3, 3), HLO_CMPLX(6, -6)),
             0);
  expect_all(r->elems[1], DT_C128, NC(HLO_CMPLX(2, 2), HLO_CMPLX(5, -5)), 0);
  expect_all(r->elems[2], DT_C128,
             NC(HLO_CMPLX(3, 3), HLO_CMPLX(2, 2), HLO_CMPLX(1, 1), HLO_CMPLX(6, -6),
                HLO_CMPLX(5, -5), HLO_CMPLX(4, -4)),
             0);
  expect_all(r->elems[3], DT_C128,
             NC(0, HLO_CMPLX(1, 1), HLO_CMPLX(2, 2), HLO_CMPLX(3, 3), 0, HLO_CMPLX(4, -4),
                HLO_CMPLX(5, -5), HLO_CMPLX(6, -6)),
             0);
  expect_all(r->elems[4], DT_C128, NC(HLO_CMPLX(5, -5), HLO_CMPLX(6, -6)), 0);
  expect_c(r->elems[5], 11, HLO_CMPLX(6, -6), 0);
  expect_all(r->elems[6], DT_C128,
             NC(HLO_CMPLX(6, 6), HLO_CMPLX(6, 6), HLO_CMPLX(15, -15), HLO_CMPLX(15, -15)), 0);
  expect_all(r->elems[7], DT_C128,
             NC(HLO_CMPLX(4, -4), HLO_CMPLX(5, -5), HLO_CMPLX(6, -6), HLO_CMPLX(1, 1),
                HLO_CMPLX(2, 2), HLO_CMPLX(3, 3)),
             0);
  expect_all(r->elems[8], DT_C128,
             NC(HLO_CMPLX(1, 1), HLO_CMPLX(2, 2), HLO_CMPLX(3, 3), HLO_CMPLX(6, -6),
                HLO_CMPLX(5, -5), HLO_CMPLX(4, -4)),
             0);
  hlo_arena_free(a);
}

/* ------------------------------------------------------------------ text and .npy */

Test(interp_complex, text_round_trip) {
  const char *text = "HloModule t, entry_computation_layout={()->(c64[2]{0}, c64[])}\n\n"
                     "ENTRY e {\n"
                     "  a = c64[2]{0} constant({(1, 2), (3.5, -4)})\n"
                     "  b = c64[] constant((1, 0))\n"
                     "  ROOT t = (c64[2]{0}, c64[]) tuple(a, b)\n"
                     "}\n\n";
  HModule *m = tu_parse(text);
  char *buf = NULL, *buf2 = NULL;
  size_t len = 0, len2 = 0;
  FILE *f = open_memstream(&buf, &len);
  hlo_print_module(f, m, NULL);
  fclose(f);
  cr_expect(strstr(buf, "c64[2]{0} constant({(1, 2), (3.5, -4)})"), "%s", buf);
  cr_expect(strstr(buf, "c64[] constant((1, 0))"), "%s", buf);
  HModule *m2 = tu_parse(buf);
  f = open_memstream(&buf2, &len2);
  hlo_print_module(f, m2, NULL);
  fclose(f);
  cr_expect_str_eq(buf, buf2, "print -> parse -> print changed the text");
  free(buf);
  free(buf2);
  hlo_module_free(m);
  hlo_module_free(m2);
}

Test(interp_complex, npy_round_trip) {
  HArena *a = hlo_arena_new();
  int64_t dims[2] = {2, 2};
  const DType types[2] = {DT_C64, DT_C128};
  for (int t = 0; t < 2; t++) {
    Shape s = hlo_shape_array(types[t], 2, dims);
    Literal *l = hlo_literal_new(a, &s);
    for (int i = 0; i < 4; i++)
      hlo_store_c128(types[t], l->data, i, HLO_CMPLX(i + 0.5, -i));
    char path[] = "/tmp/hloc_cplx_XXXXXX";
    close(mkstemp(path));
    HErr e = {0};
    cr_assert(hlo_npy_write(path, l, &e), "%s", e.msg);
    char *raw;
    size_t n;
    cr_assert(hlo_read_file(path, &raw, &n, &e), "%s", e.msg);
    cr_expect(memmem(raw, n, t ? "'<c16'" : "'<c8'", t ? 6 : 5), "descr of %s",
              hlo_dtype_name(types[t]));
    free(raw);
    Literal *back = hlo_npy_read(a, path, &e);
    cr_assert(back, "%s", e.msg);
    cr_expect_eq(back->shape.dt, types[t]);
    cr_expect(!memcmp(back->data, l->data, hlo_shape_bytes(&s)), "the data changed");
    remove(path);
  }
  hlo_arena_free(a);
}

/* ------------------------------------------------------------------ errors */

/* text fails verification with one located line mentioning want. */
static void verify_fails(const char *body, const char *want) {
  char text[2048];
  snprintf(text, sizeof text, "HloModule t\nENTRY e {\n%s}\n", body);
  HErr e = {0};
  HModule *m = hlo_parse_text(text, strlen(text), "bad.hlo", &e);
  cr_assert(m, "parse failed: %s", e.msg);
  cr_expect(!hlo_verify(m, &e), "'%s' verified", body);
  cr_expect(strstr(e.msg, want), "'%s' does not say '%s'", e.msg, want);
  cr_expect(strstr(e.msg, "bad.hlo") && strstr(e.msg, "computation 'e'") &&
                strstr(e.msg, "instruction 'r'") && !strchr(e.msg, '\n'),
            "'%s' is not one located line", e.msg);
  hlo_module_free(m);
}

Test(interp_complex, bad_types_are_located_errors) {
  verify_fails("  a = s32[2] parameter(0)\n  ROOT r = c64[2] complex(a, a)\n", "f32 or f64 parts");
  verify_fails("  a = c64[2] parameter(0)\n  ROOT r = f32[2] convert(a)\n", "convert from complex");
  verify_fails("  a = c64[2] parameter(0)\n  ROOT r = pred[2] compare(a, a), direction=LT\n",
               "only EQ and NE");
  verify_fails("  a = c64[2] parameter(0)\n  ROOT r = c64[2] maximum(a, a)\n", "maximum expects");
  verify_fails("  a = s32[2] parameter(0)\n  ROOT r = s32[2] real(a)\n", "real expects");
  verify_fails(
      "  a = c64[4] parameter(0)\n  ROOT r = c64[3] fft(a), fft_type=RFFT, fft_length={4}\n",
      "RFFT needs f32 or f64 input");
  verify_fails(
      "  a = c64[4] parameter(0)\n  ROOT r = f32[5] fft(a), fft_type=IRFFT, fft_length={5}\n",
      "IRFFT needs dim 0 of c64[4] to be 3");
  verify_fails("  a = c64[4] parameter(0)\n  ROOT r = c64[4] fft(a), fft_type=FFT, fft_length={}\n",
               "FFT supports 1 to 3");
}

/* (The CPU target compiles complex values, tests/test_cpu_complex.c: an op it does not
   generate on them is refused; the CUDA target refuses them all, tested there too.) */
Test(interp_complex, targets_refuse_complex) {
  HModule *m = tu_parse("HloModule t\nadd { a = c64[] parameter(0)\n b = c64[] parameter(1)\n"
                        " ROOT s = c64[] add(a, b) }\nENTRY e {\n  a = c64[8] parameter(0)\n"
                        "  i = s32[2,1] parameter(1)\n  u = c64[2] parameter(2)\n"
                        "  ROOT r = c64[8] scatter(a, i, u), update_window_dims={}, "
                        "inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, "
                        "index_vector_dim=1, to_apply=add\n}\n");
  CpuOpts o = {.name = "t", .out_path = "/tmp/hloc_cplx_refused.o"};
  HErr e = {0};
  cr_expect(!cpu_compile(m, &o, &e), "the CPU target compiled a complex scatter");
  cr_expect(strstr(e.msg, "instruction 'r'") && strstr(e.msg, "CPU target") &&
                strstr(e.msg, "complex types (c64, c128) are not supported by this target yet"),
            "%s", e.msg);
  hlo_module_free(m);
}

Test(interp_complex, elided_constants_get_both_parts) {
  HModule *m = tu_parse("HloModule t\nENTRY e {\n  ROOT k = c64[4,4] constant({...})\n}\n");
  HElided el = {.mode = HLO_ELIDED_RANDOM, .seed = 3};
  cr_assert_eq(hlo_fill_elided(m, &el), 1);
  const Literal *l = m->entry->root->literal;
  int imag = 0;
  for (int i = 0; i < 16; i++) {
    double _Complex z = hlo_load_c128(DT_C64, l->data, i);
    cr_expect(fabs(creal(z)) <= 1 && fabs(cimag(z)) <= 1, "element %d out of range", i);
    imag += cimag(z) != 0;
  }
  cr_expect_eq(imag, 16, "the imaginary parts are not filled");
  hlo_module_free(m);
}
