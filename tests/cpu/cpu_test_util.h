/* tests/cpu/cpu_test_util.h: helpers shared by the CPU target's test files (test_cpu_*.c;
 * test_cuda.c's folders and files): temporary folders, files, parsed modules, compiling a
 * module into an object and header, the text cpu_compile() emits, deterministic argument
 * values, .npy results, the tests/cpu_driver.c build and runs, and the check most CPU tests
 * make: a module compiled (as written or after the optimizer) and run serially and on two
 * threads gives the reference interpreter's values (ct_check_text; tests/test_cpu_cases.c runs
 * it on every tests/cpu/cases/NAME.hlo). Header-only (static functions), for Criterion test
 * files. */
#ifndef HLOC_CPU_TEST_UTIL_H
#define HLOC_CPU_TEST_UTIL_H

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "hlo.h"
#include "optimizer.h"
#include "target.h"

/* Build tests/cpu_driver.c against DIR/model.{o,h} into DIR/driver; a failure names what. */
static inline void ct_build_driver_for(const char *dir, const char *what) {
  char cmd[2048];
  snprintf(cmd, sizeof cmd,
           "cc -std=c11 -O1 -Wall -Werror -I'%s' '" HLOC_TEST_DIR "/cpu_driver.c' '%s/model.o' "
           "-lm -lpthread -o '%s/driver'",
           dir, dir, dir);
  cr_assert_eq(system(cmd), 0, "%s: driver build failed: %s", what, cmd);
}

static inline void ct_build_driver(const char *dir) { ct_build_driver_for(dir, "model"); }

/* Run DIR/driver on datadir's in<k>.npy against its out<k>.npy (relative tolerance rtol),
 * serially and with two threads; each run must succeed. Its output goes to stderr after
 * "[tag] what". */
static inline void ct_check_driver(const char *dir, const char *datadir, double rtol,
                                   const char *tag, const char *what) {
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

/* The whole file (malloc'd); *len its size when len is given. Not inlined: inlined, the
 * address of its local buffer pointer makes GCC see pointers into the text as dangling
 * (unused: a test file may not call it). */
__attribute__((noinline, unused)) static char *ct_slurp(const char *path, size_t *len) {
  char *b = NULL;
  size_t n = 0;
  HErr err = {0};
  cr_assert(hlo_read_file(path, &b, &n, &err), "%s", err.msg);
  if (len) *len = n;
  return b;
}

/* HLO text parsed as from file (the name its located errors carry). */
static inline HModule *ct_parse_named(const char *text, const char *file) {
  HErr err = {0};
  HModule *m = hlo_parse_text(text, strlen(text), file, &err);
  cr_assert(m, "%s", err.msg);
  return m;
}

static inline HModule *ct_parse(const char *text) { return ct_parse_named(text, "<test>"); }

/* The knobs (targets/cpu/cpu_knobs.def) of every compilation a test makes: each CpuOpts the
 * tests build points here (Criterion runs each test in a process of its own). */
static CpuKnobs ct_knobs;
static inline void ct_knob(CpuKnob k, const char *v) { ct_knobs.v[k] = v; }

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
    if (hlo_dtype_is_float(s->dt))
      hlo_literal_set_f64(l, i, (double)(x >> 8) / (1 << 24) * 4.0 - 2.0);
    else if (s->dt == DT_PRED)
      hlo_literal_set_i64(l, i, (x >> 16) & 1);
    else
      hlo_literal_set_i64(l, i, (int64_t)((x >> 8) % (uint32_t)int_range));
  }
  return l;
}

/* Leaves of l from number k on as dir/out<k>.npy; returns the next number. */
static inline int ct_write_leaves(const char *dir, const Literal *l, int k) {
  if (l->shape.dt == DT_TUPLE) {
    for (int i = 0; i < l->shape.ntuple; i++)
      k = ct_write_leaves(dir, l->elems[i], k);
    return k;
  }
  char path[512];
  snprintf(path, sizeof path, "%s/out%d.npy", dir, k);
  HErr err = {0};
  cr_assert(hlo_npy_write(path, l, &err), "%s", err.msg);
  return k + 1;
}

/* The reference run of module ref (renumbered) on args: written as DIR/in<k>.npy, evaluated
 * by the interpreter, its result leaves written as DIR/out<k>.npy. */
static inline void ct_reference_on(HModule *ref, HArena *a, const char *dir, Literal **args) {
  HErr err = {0};
  int np = ref->entry->nparams;
  for (int i = 0; i < np; i++) {
    char path[512];
    snprintf(path, sizeof path, "%s/in%d.npy", dir, i);
    cr_assert(hlo_npy_write(path, args[i], &err), "%s", err.msg);
  }
  Literal *res = hlo_interp_run(ref, a, args, np, &err);
  cr_assert(res, "interpreter: %s", err.msg);
  ct_write_leaves(dir, res, 0);
}

/* The reference run on deterministic arguments (ct_arg, integers in [0, int_range)). */
static inline void ct_reference(HModule *ref, HArena *a, const char *dir, int int_range) {
  hlo_comp_renumber(ref->entry);
  int np = ref->entry->nparams;
  Literal **args = hlo_arena_alloc(a, sizeof(Literal *) * (size_t)(np + 1));
  for (int i = 0; i < np; i++)
    args[i] = ct_arg(a, &ref->entry->params[i]->shape, i, int_range);
  ct_reference_on(ref, a, dir, args);
}

/* ------------------------------------------------------------------ compiling and checking */

static inline bool ct_exists(const char *p) {
  struct stat st;
  return stat(p, &st) == 0;
}

/* Write src to DIR/name and run `build` (a shell command, in DIR) on it: 0 when it succeeds
 * (the command is left in cmd, for the failure message). */
static inline int ct_build_run(const char *dir, const char *name, const char *src,
                               const char *build, char *cmd, size_t n) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  cr_assert(f);
  fputs(src, f);
  fclose(f);
  snprintf(cmd, n, "cd '%s' && %s", dir, build);
  return system(cmd);
}

/* Compile m to DIR/NAME.o + DIR/NAME.h at -O2 (with --profile's entry point when profile);
 * par_min_elems par_min (1: every kernel split into chunks down to one element). */
static inline bool ct_compile_ex(HModule *m, const char *dir, const char *name, int64_t par_min,
                                 bool profile, HErr *err) {
  char obj[512], hdr[512];
  snprintf(obj, sizeof obj, "%s/%s.o", dir, name);
  snprintf(hdr, sizeof hdr, "%s/%s.h", dir, name);
  CpuOpts o = {.knobs = &ct_knobs};
  o.name = name;
  o.out_path = obj;
  o.header_path = hdr;
  o.opt_level = 2;
  o.emit = CPU_EMIT_OBJ;
  o.par_min_elems = par_min;
  o.profile = profile;
  return cpu_compile(m, &o, err);
}

static inline bool ct_compile(HModule *m, const char *dir, const char *name, int64_t par_min,
                              HErr *err) {
  return ct_compile_ex(m, dir, name, par_min, false, err);
}

/* The LLVM IR cpu_compile() emits for HLO text src at opt_level (the caller frees it). */
static inline char *ct_llvm_ir(const char *src, const char *name, int opt_level) {
  return ct_cpu_text(
      src,
      (CpuOpts){.knobs = &ct_knobs, .name = name, .opt_level = opt_level, .emit = CPU_EMIT_LLVM});
}

/* Compile text (after the optimizer when optimize) with every kernel split into chunks down
 * to one element, evaluate it with the interpreter on generated arguments (ct_arg, integers
 * in [0, int_range)), run it through tests/cpu_driver.c serially and on 2 threads and compare
 * (relative tolerance rtol). Constants a dump elided get the same pseudo-random values on both
 * sides (--elided-constants=random). Every failure names what. */
static inline void ct_check_text_ex(const char *what, const char *text, double rtol, int int_range,
                                    bool optimize) {
  HModule *ref = ct_parse_named(text, what);
  HModule *m = ct_parse_named(text, what);
  HElided fill = {HLO_ELIDED_RANDOM, 0}; /* a dump's elided weights: the same in both */
  hlo_fill_elided(ref, &fill);
  hlo_fill_elided(m, &fill);
  HArena *a = hlo_arena_new();
  char *dir = ct_tmpdir("hloc_cpu");
  HErr err = {0};
  if (optimize) {
    OptOpts oo = {0};
    cpu_optimizer_options(&oo);
    cr_assert(opt_optimize(m, &oo, &err), "optimizer: %s", err.msg);
  }
  ct_reference(ref, a, dir, int_range);
  cr_assert(ct_compile(m, dir, "model", 1, &err), "%s: %s", what, err.msg);
  ct_build_driver_for(dir, what);
  ct_check_driver(dir, dir, rtol, "cpu", what);
  ct_rmdir(dir);
  free(dir);
  hlo_arena_free(a);
  hlo_module_free(ref);
  hlo_module_free(m);
}

static inline void ct_check_text(const char *what, const char *text, double rtol, int int_range) {
  ct_check_text_ex(what, text, rtol, int_range, false);
}

/* ct_check_text as written, then through the optimizer (labelled "WHAT, optimized"). */
static inline void ct_check_text_both(const char *what, const char *text, double rtol,
                                      int int_range) {
  char opt[256];
  snprintf(opt, sizeof opt, "%s, optimized", what);
  ct_check_text_ex(what, text, rtol, int_range, false);
  ct_check_text_ex(opt, text, rtol, int_range, true);
}

/* text, after the optimizer, does not compile for the CPU: the error names instr and holds
 * word, and no object is left. */
static inline void ct_expect_located_error(const char *text, const char *instr, const char *word) {
  HModule *m = ct_parse(text);
  char *dir = ct_tmpdir("hloc_cpu");
  HErr err = {0};
  OptOpts oo = {0};
  cr_assert(opt_optimize(m, &oo, &err), "optimizer: %s", err.msg);
  cr_expect(!ct_compile(m, dir, "model", 1, &err));
  cr_expect(strstr(err.msg, instr) && strstr(err.msg, word), "%s", err.msg);
  hlo_module_free(m);
  ct_rmdir(dir);
  free(dir);
}

/* DIR/main.c from src, built as C11 with the objects objs (warnings as errors) and run (it
 * must exit 0); with cxx also compiled as C++. */
static inline void ct_main_build(const char *dir, const char *src, const char *objs, bool cxx) {
  char build[512], cmd[2048];
  snprintf(build, sizeof build,
           "cc -std=c11 -Wall -Wextra -Werror main.c %s -lm -o main && ./main%s", objs,
           cxx ? " && c++ -x c++ -Wall -Wextra -Werror -fsyntax-only main.c" : "");
  cr_expect_eq(ct_build_run(dir, "main.c", src, build, cmd, sizeof cmd), 0, "%s", cmd);
}

/* The comparators sort tests use: lt and gt over f32. */
#define CT_SORT_CMPS                                                                               \
  "lt { a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT c = pred[] compare(a, b), "         \
  "direction=LT }\n"                                                                               \
  "gt { a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT c = pred[] compare(a, b), "         \
  "direction=GT }\n"

/* The select and scatter computations select-and-scatter tests use, over type T ("f32"). */
#define CT_SAS_COMPS(T)                                                                            \
  "ge { a = " T "[] parameter(0)\n b = " T                                                         \
  "[] parameter(1)\n ROOT c = pred[] compare(a, b), direction=GE }\n"                              \
  "gt { a = " T "[] parameter(0)\n b = " T                                                         \
  "[] parameter(1)\n ROOT c = pred[] compare(a, b), direction=GT }\n"                              \
  "le { a = " T "[] parameter(0)\n b = " T                                                         \
  "[] parameter(1)\n ROOT c = pred[] compare(a, b), direction=LE }\n"                              \
  "add { a = " T "[] parameter(0)\n b = " T "[] parameter(1)\n ROOT s = " T "[] add(a, b) }\n"     \
  "max { a = " T "[] parameter(0)\n b = " T "[] parameter(1)\n ROOT s = " T "[] maximum(a, b) }\n"

#endif
