/* tests/cpu/cpu_test_util.h: helpers shared by the CPU target's test files (test_cpu.c,
 * test_cpu_gemm.c, test_cpu_parallel.c): temporary folders, files, parsed modules,
 * deterministic argument values and .npy results. Header-only (static functions), for
 * Criterion test files. */
#ifndef HLOC_CPU_TEST_UTIL_H
#define HLOC_CPU_TEST_UTIL_H

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hlo.h"

/* A fresh folder /tmp/<prefix>_XXXXXX (malloc'd path). */
static inline char *ct_tmpdir(const char *prefix) {
  char t[256];
  snprintf(t, sizeof t, "/tmp/%s_XXXXXX", prefix);
  char *d = strdup(t);
  cr_assert(mkdtemp(d), "mkdtemp");
  return d;
}

static inline void ct_rmdir(const char *d) {
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", d);
  cr_expect_eq(system(cmd), 0);
}

/* The whole file (malloc'd); *len its size when len is given. */
static inline char *ct_slurp(const char *path, size_t *len) {
  char *b = NULL;
  size_t n = 0;
  HErr err = {0};
  cr_assert(hlo_read_file(path, &b, &n, &err), "%s", err.msg);
  if (len) *len = n;
  return b;
}

static inline HModule *ct_parse(const char *text) {
  HErr err = {0};
  HModule *m = hlo_parse_text(text, strlen(text), "<test>", &err);
  cr_assert(m, "%s", err.msg);
  return m;
}

/* Deterministic argument values: floats in [-2, 2), integers in [0, int_range), preds
 * alternating pseudo-randomly. */
static inline Literal *ct_arg(HArena *a, const Shape *s, int seed, int int_range) {
  Literal *l = hlo_literal_new(a, s);
  uint32_t x = 12345u + 7919u * (uint32_t)seed;
  for (int64_t i = 0; i < hlo_shape_elems(s); i++) {
    x = x * 1664525u + 1013904223u;
    if (hlo_dtype_is_float(s->dt)) hlo_literal_set_f64(l, i, (double)(x >> 8) / (1 << 24) * 4.0 - 2.0);
    else if (s->dt == DT_PRED) hlo_literal_set_i64(l, i, (x >> 16) & 1);
    else hlo_literal_set_i64(l, i, (int64_t)((x >> 8) % (uint32_t)int_range));
  }
  return l;
}

/* Leaves of l from number k on as dir/out<k>.npy; returns the next number. */
static inline int ct_write_leaves(const char *dir, const Literal *l, int k) {
  if (l->shape.dt == DT_TUPLE) {
    for (int i = 0; i < l->shape.ntuple; i++) k = ct_write_leaves(dir, l->elems[i], k);
    return k;
  }
  char path[512];
  snprintf(path, sizeof path, "%s/out%d.npy", dir, k);
  HErr err = {0};
  cr_assert(hlo_npy_write(path, l, &err), "%s", err.msg);
  return k + 1;
}

#endif
