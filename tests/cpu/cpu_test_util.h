/* tests/cpu/cpu_test_util.h: helpers shared by the CPU target's test files (test_cpu.c,
 * test_cpu_gemm.c, test_cpu_parallel.c; test_cuda.c's folders and files): temporary
 * folders, files, parsed modules, the text cpu_compile() emits, deterministic argument
 * values, .npy results, and the tests/cpu_driver.c build and runs. Header-only (static
 * functions), for Criterion test files. */
#ifndef HLOC_CPU_TEST_UTIL_H
#define HLOC_CPU_TEST_UTIL_H

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "hlo.h"
#include "target.h"

/* Build tests/cpu_driver.c against DIR/model.{o,h} into DIR/driver. */
static inline void ct_build_driver(const char *dir) {
  char cmd[2048];
  snprintf(cmd, sizeof cmd,
           "cc -std=c11 -O1 -Wall -Werror -I'%s' '" HLOC_TEST_DIR "/cpu_driver.c' '%s/model.o' "
           "-lm -lpthread -o '%s/driver'",
           dir, dir, dir);
  cr_assert_eq(system(cmd), 0, "driver build failed: %s", cmd);
}

/* Run DIR/driver on datadir's in<k>.npy against its out<k>.npy (relative tolerance rtol),
 * serially and with two threads; each run must succeed. Its output goes to stderr after
 * "[tag] what". */
static inline void ct_check_driver(const char *dir, const char *datadir, double rtol, const char *tag,
                                   const char *what) {
  for (int threads = 0; threads <= 2; threads += 2) {
    char cmd[2048], out[16384];
    snprintf(cmd, sizeof cmd, "'%s/driver' '%s' %d %g 2>&1", dir, datadir, threads, rtol);
    FILE *p = popen(cmd, "r");
    cr_assert(p);
    size_t got = fread(out, 1, sizeof out - 1, p);
    out[got] = 0;
    int st = pclose(p);
    fprintf(stderr, "[%s] %s (%s):\n%s", tag, what, threads ? "2 threads" : "serial", out);
    cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s with %d threads:\n%s", what, threads, out);
  }
}

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

/* What cpu_compile() writes for HLO text src with options o (its output path set here, in a
 * fresh folder): LLVM IR or assembly text, malloc'd. */
static inline char *ct_cpu_text(const char *src, CpuOpts o) {
  char *dir = ct_tmpdir("hloc_cpu_text"), path[512];
  snprintf(path, sizeof path, "%s/model.%s", dir, o.emit == CPU_EMIT_ASM ? "s" : "ll");
  o.out_path = path;
  HModule *m = ct_parse(src);
  HErr err = {0};
  cr_assert(cpu_compile(m, &o, &err), "%s", err.msg);
  char *t = ct_slurp(path, NULL);
  hlo_module_free(m);
  ct_rmdir(dir);
  free(dir);
  return t;
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

/* The reference run of module ref: deterministic arguments (ct_arg, integers in
 * [0, int_range)) written as DIR/in<k>.npy, evaluated by the interpreter, its result leaves
 * written as DIR/out<k>.npy. */
static inline void ct_reference(HModule *ref, HArena *a, const char *dir, int int_range) {
  HErr err = {0};
  hlo_comp_renumber(ref->entry);
  int np = ref->entry->nparams;
  Literal **args = hlo_arena_alloc(a, sizeof(Literal *) * (size_t)(np + 1));
  for (int i = 0; i < np; i++) {
    args[i] = ct_arg(a, &ref->entry->params[i]->shape, i, int_range);
    char path[512];
    snprintf(path, sizeof path, "%s/in%d.npy", dir, i);
    cr_assert(hlo_npy_write(path, args[i], &err), "%s", err.msg);
  }
  Literal *res = hlo_interp_run(ref, a, args, np, &err);
  cr_assert(res, "interpreter: %s", err.msg);
  ct_write_leaves(dir, res, 0);
}

#endif
