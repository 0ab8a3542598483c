/* tests/test_npy.c: .npy reading and writing, and result comparison. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hlo.h"

Test(npy, reads_corpus_fixture) {
  HArena *a = hlo_arena_new();
  HErr err = {0};
  Literal *l = hlo_npy_read(a, HLOC_CORPUS_DIR "/fixtures/mlp/in0.npy", &err);
  cr_assert(l, "%s", err.msg);
  cr_expect_eq(l->shape.dt, DT_F32);
  cr_expect_eq(l->shape.rank, 2);
  cr_expect_eq(l->shape.dims[0], 8);
  cr_expect_eq(l->shape.dims[1], 64);
  hlo_arena_free(a);
}

Test(npy, write_read_roundtrip_all_dtypes) {
  DType types[] = {DT_PRED, DT_S8,  DT_S16, DT_S32, DT_S64, DT_U8,
                   DT_U16,  DT_U32, DT_U64, DT_F16, DT_F32, DT_F64};
  char path[] = "/tmp/hloc_npy_XXXXXX";
  int fd = mkstemp(path);
  cr_assert(fd >= 0);
  close(fd);
  for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
    HArena *a = hlo_arena_new();
    HErr err = {0};
    int64_t dims[] = {3, 5};
    Shape s = hlo_shape_array(types[t], t % 3 == 0 ? 1 : 2, dims);
    Literal *l = hlo_literal_new(a, &s);
    for (int64_t i = 0; i < hlo_shape_elems(&s); i++)
      hlo_literal_set_i64(l, i, (i * 7) % 11 - (types[t] == DT_PRED ? 0 : 3));
    cr_assert(hlo_npy_write(path, l, &err), "%s", err.msg);
    Literal *r = hlo_npy_read(a, path, &err);
    cr_assert(r, "%s: %s", hlo_dtype_name(types[t]), err.msg);
    cr_expect_eq(r->shape.dt, types[t]);
    cr_expect(hlo_shape_eq(&r->shape, &s), "%s", hlo_dtype_name(types[t]));
    cr_expect(!memcmp(r->data, l->data, hlo_shape_bytes(&s)), "%s", hlo_dtype_name(types[t]));
    hlo_arena_free(a);
  }
  unlink(path);
}

Test(npy, scalar_and_rank1_headers) {
  HArena *a = hlo_arena_new();
  HErr err = {0};
  char path[] = "/tmp/hloc_npy_XXXXXX";
  close(mkstemp(path));
  Shape s = hlo_shape_scalar(DT_F32);
  Literal *l = hlo_literal_new(a, &s);
  hlo_literal_set_f64(l, 0, 2.5);
  cr_assert(hlo_npy_write(path, l, &err));
  char *buf;
  size_t len;
  cr_assert(hlo_read_file(path, &buf, &len, &err));
  cr_expect(strstr(buf + 10, "'shape': ()"), "header: %s", buf + 10);
  cr_expect_eq(len % 64, 4); /* header padded so the data starts 64-aligned */
  free(buf);
  Literal *r = hlo_npy_read(a, path, &err);
  cr_assert(r);
  cr_expect_eq(hlo_literal_get_f64(r, 0), 2.5);
  unlink(path);
  hlo_arena_free(a);
}

/* bf16 is written as '<u2' bits and typed back by the module (hlo_literal_bits_as); ml_dtypes'
 * '|V2' reads the same; an integer array is not taken as floats of another size. */
Test(npy, bf16_bits) {
  HArena *a = hlo_arena_new();
  HErr err = {0};
  char path[] = "/tmp/hloc_npy_XXXXXX";
  close(mkstemp(path));
  int64_t dims[] = {4};
  Shape s = hlo_shape_array(DT_BF16, 1, dims);
  Literal *l = hlo_literal_new(a, &s);
  for (int i = 0; i < 4; i++)
    hlo_literal_set_f64(l, i, 1.5 * i - 2.25);
  cr_assert(hlo_npy_write(path, l, &err), "%s", err.msg);
  Literal *r = hlo_npy_read(a, path, &err);
  cr_assert(r, "%s", err.msg);
  cr_expect_eq(r->shape.dt, DT_U16);
  cr_expect(hlo_literal_bits_as(r, DT_BF16));
  cr_expect_eq(hlo_literal_get_f64(r, 3), 2.25);
  cr_expect(!memcmp(r->data, l->data, 8));
  cr_expect_eq(hlo_literal_max_abs(r), 2.25);
  cr_expect(!hlo_literal_bits_as(r, DT_F32), "bf16 taken as f32");
  char *buf;
  size_t len;
  cr_assert(hlo_read_file(path, &buf, &len, &err));
  char *d = strstr(buf + 10, "'<u2'");
  cr_assert(d, "header: %s", buf + 10);
  memcpy(d, "'|V2'", 5);
  Literal *v = hlo_npy_parse(a, buf, len, path, &err);
  cr_assert(v, "%s", err.msg);
  cr_expect(hlo_literal_bits_as(v, DT_BF16) && !memcmp(v->data, l->data, 8));
  free(buf);
  Shape si = hlo_shape_array(DT_S16, 1, dims);
  cr_expect(!hlo_literal_bits_as(hlo_literal_new(a, &si), DT_BF16), "s16 taken as bf16");
  unlink(path);
  hlo_arena_free(a);
}

static const char *parse_err(const void *buf, size_t len) {
  static HErr err;
  memset(&err, 0, sizeof err);
  HArena *a = hlo_arena_new();
  Literal *l = hlo_npy_parse(a, buf, len, "bad.npy", &err);
  hlo_arena_free(a);
  return l ? NULL : err.msg;
}

Test(npy, rejects_bad_files) {
  const char *m;
  cr_expect((m = parse_err("hello", 5)) && strstr(m, "bad.npy: not a .npy file"), "%s", m);
  static const char hdr[] = "\x93NUMPY\x01\x00\x40\x00{'descr': '<f4', 'fortran_order': False, "
                            "'shape': (2, 3), }        \n";
  /* the data is missing: truncated */
  cr_expect((m = parse_err(hdr, sizeof hdr - 1)) && strstr(m, "truncated .npy data"), "%s", m);
  /* header length beyond the file */
  cr_expect((m = parse_err(hdr, 30)) && strstr(m, "truncated .npy header"), "%s", m);
  char big[128];
  memcpy(big, hdr, sizeof hdr);
  memcpy((char *)memmem(big, sizeof hdr, "<f4", 3), ">f4", 3);
  cr_expect((m = parse_err(big, sizeof hdr - 1)) && strstr(m, "big-endian"), "%s", m);
  memcpy(big, hdr, sizeof hdr);
  memcpy((char *)memmem(big, sizeof hdr, "<f4", 3), "<U4", 3); /* numpy's unicode strings */
  cr_expect((m = parse_err(big, sizeof hdr - 1)) && strstr(m, "unsupported .npy dtype"), "%s", m);
  memcpy(big, hdr, sizeof hdr);
  memcpy((char *)memmem(big, sizeof hdr, "False", 5), "True,", 5);
  cr_expect((m = parse_err(big, sizeof hdr - 1)) && strstr(m, "fortran_order"), "%s", m);
  /* every truncation of a real file fails cleanly */
  char *buf;
  size_t len;
  HErr err = {0};
  cr_assert(hlo_read_file(HLOC_CORPUS_DIR "/fixtures/mlp/in2.npy", &buf, &len, &err));
  for (size_t cut = 0; cut < len; cut++)
    cr_expect(parse_err(buf, cut), "cut at %zu accepted", cut);
  free(buf);
}

Test(compare, tolerance_and_nan) {
  HArena *a = hlo_arena_new();
  HErr err = {0};
  int64_t d[] = {4};
  Shape s = hlo_shape_array(DT_F32, 1, d);
  Literal *x = hlo_literal_new(a, &s), *y = hlo_literal_new(a, &s);
  double xs[] = {1.0, 2.0, NAN, 1000.0}, ys[] = {1.0, 2.00001, NAN, 1000.5};
  for (int i = 0; i < 4; i++) {
    hlo_literal_set_f64(x, i, xs[i]);
    hlo_literal_set_f64(y, i, ys[i]);
  }
  HCompare c;
  cr_assert(hlo_literal_compare(x, y, 1e-4, 0, &c, &err));
  cr_expect_eq(c.bad, 1); /* only 1000 vs 1000.5 */
  cr_expect_eq(c.worst, 3);
  cr_assert(hlo_literal_compare(x, y, 1e-3, 0, &c, &err));
  cr_expect_eq(c.bad, 0);
  int64_t d2[] = {5};
  Shape s2 = hlo_shape_array(DT_F32, 1, d2);
  cr_expect(!hlo_literal_compare(x, hlo_literal_new(a, &s2), 1e-3, 0, &c, &err));
  cr_expect(strstr(err.msg, "does not match"));
  hlo_arena_free(a);
}

Test(npy, header_ending_inside_a_value) {
  /* found by fuzzing: a key whose value would start at the end of the header */
  static const char h1[] = "\x93NUMPY\x01\x00\x09\x00{'descr':";
  static const char h2[] =
      "\x93NUMPY\x01\x00\x33\x00{'shape': (2,), 'descr': '<f4', 'fortran_order': Fa";
  const char *m;
  cr_expect((m = parse_err(h1, sizeof h1 - 1)) && strstr(m, "malformed"), "%s", m);
  cr_expect((m = parse_err(h2, sizeof h2 - 1)) && strstr(m, "fortran_order"), "%s", m);
}
