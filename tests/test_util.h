/* tests/test_util.h: helpers shared by the pass tests (test_opt_passes.c, test_layout.c).
 *
 * The pass tests all follow one pattern: parse a small HLO text module (and verify it),
 * evaluate it with the interpreter on deterministic arguments, run one pass alone (then DCE,
 * so that replaced instructions disappear), verify again, inspect the structure (opcode
 * counts, printed instructions) and check the interpreter gives the same values as before.
 * These are the steps, as static inline functions (a header, since every tests/test_*.c file
 * is a translation unit of the one test binary; inline keeps the unused ones silent). Each
 * failure is a Criterion assertion carrying the library's located error. */
#ifndef HLOC_TEST_UTIL_H
#define HLOC_TEST_UTIL_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optimizer.h"

/* Parse HLO text and verify it; the test fails on either error. */
static inline HModule *tu_parse(const char *text) {
  HErr err = {0};
  HModule *m = hlo_parse_text(text, strlen(text), "<test>", &err);
  cr_assert(m, "%s", err.msg);
  cr_assert(hlo_verify(m, &err), "%s", err.msg);
  return m;
}

/* Run pass fn once with default options, then DCE, and verify. Returns whether fn reported
 * a change; an error it reports fails the test. */
static inline bool tu_run_opts(HModule *m, PassFn fn, const OptOpts *o) {
  HErr err = {0};
  PassCtx pc = {o, hlo_arena_new(), &err, NULL};
  hlo_module_renumber(m);
  bool changed = fn(m, &pc);
  cr_assert(!err.set, "%s", err.msg);
  hlo_module_renumber(m);
  opt_dce(m, &pc);
  hlo_module_renumber(m);
  hlo_arena_free(pc.scratch);
  cr_assert(hlo_verify(m, &err), "after pass: %s", err.msg);
  return changed;
}
static inline bool tu_run(HModule *m, PassFn fn) {
  OptOpts o = {0};
  return tu_run_opts(m, fn, &o);
}

/* Instructions of c with opcode op. */
static inline int tu_count(const HComp *c, HOp op) {
  int n = 0;
  for (int i = 0; i < c->ninstrs; i++)
    n += c->instrs[i]->op == op;
  return n;
}

/* Printed form of one instruction, without metadata and verbatim attributes (malloc'd). */
static inline char *tu_print_instr(const HInstr *in) {
  /* a temporary file rather than open_memstream: inlined, the latter's pointer to a local
   * makes GCC see the returned buffer as dangling */
  FILE *f = tmpfile();
  cr_assert(f);
  HPrintOpts po = {.no_metadata = true, .no_raw_attrs = true};
  hlo_print_instr(f, in, &po);
  long len = ftell(f);
  cr_assert(len >= 0);
  rewind(f);
  char *buf = malloc((size_t)len + 1);
  cr_assert(buf && fread(buf, 1, (size_t)len, f) == (size_t)len);
  buf[len] = 0;
  fclose(f);
  return buf;
}

/* Evaluate the entry with the interpreter, element k of parameter i being
 * step * ((k * kmul + i * imul) % mod) - 1 (a few distinct values of both signs). */
static inline Literal *tu_eval(HModule *m, HArena *a, double step, int64_t kmul, int64_t imul,
                               int64_t mod) {
  hlo_comp_renumber(m->entry);
  int np = m->entry->nparams;
  Literal **args = hlo_arena_alloc(a, sizeof(Literal *) * (size_t)(np + 1));
  for (int i = 0; i < np; i++) {
    args[i] = hlo_literal_new(a, &m->entry->params[i]->shape);
    for (int64_t k = 0; k < hlo_shape_elems(&args[i]->shape); k++)
      hlo_literal_set_f64(args[i], k, step * (double)((k * kmul + i * imul) % mod) - 1);
  }
  HErr err = {0};
  Literal *r = hlo_interp_run(m, a, args, np, &err);
  cr_assert(r, "%s", err.msg);
  return r;
}

/* The arguments DIR/in0.npy .. in<np-1>.npy (a fixture's), read into a; args[np] is NULL. */
static inline Literal **tu_read_args(HArena *a, const char *dir, int np) {
  Literal **args = hlo_arena_alloc(a, sizeof(Literal *) * (size_t)(np + 1));
  HErr err = {0};
  char path[1100];
  for (int i = 0; i < np; i++) {
    snprintf(path, sizeof path, "%.1024s/in%d.npy", dir, i);
    args[i] = hlo_npy_read(a, path, &err);
    cr_assert(args[i], "%s", err.msg);
  }
  args[np] = NULL;
  return args;
}

/* Expect equal values within tol (relative and absolute), tuples element by element. */
static inline void tu_expect_same(const Literal *got, const Literal *want, double tol) {
  if (hlo_shape_is_tuple(&want->shape) && hlo_shape_is_tuple(&got->shape) &&
      got->shape.ntuple == want->shape.ntuple) {
    for (int j = 0; j < want->shape.ntuple; j++)
      tu_expect_same(got->elems[j], want->elems[j], tol);
    return;
  }
  HErr err = {0};
  HCompare c;
  cr_assert(hlo_literal_compare(got, want, tol, tol, &c, &err), "%s", err.msg);
  cr_expect(c.bad == 0, "%lld values differ, worst got %g want %g", (long long)c.bad, c.worst_got,
            c.worst_want);
}

#endif
