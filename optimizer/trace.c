/* optimizer/trace.c: kernel bisection for `hloc verify`.
 *
 * An optimized module is traced: its entry root becomes the tuple (root, v1, ..., vn) of the
 * original result and the value of every entry instruction a kernel computes (anything but
 * parameters, constants and tuple plumbing), in schedule order. The target compiles the traced
 * module like any other, so the kernels are the same code writing one more result each; the
 * interpreter evaluates the same traced module, and each kernel's output is compared with the
 * interpreter's value of the same instruction. The first kernel out of tolerance is reported
 * with its HLO, its operands' statistics and how many kernels after it are out too (how the
 * error grows downstream). The compiled code runs through a callback, so this file needs no
 * target. */
#include "optimizer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Whether entry instruction in is computed by a kernel whose output is worth tracing. */
static bool tr_traced(const HInstr *in) {
  HOp op = in->op;
  if (op == OP_PARAMETER || op == OP_CONSTANT || op == OP_TUPLE || op == OP_GET_TUPLE_ELEMENT)
    return false;
  return in->shape.dt != DT_TUPLE && in->shape.dt != DT_TOKEN;
}

int opt_trace_outputs(HModule *m, HInstr **traced) {
  HComp *e = m->entry;
  int n = 0;
  for (int i = 0; i < e->ninstrs; i++)
    if (tr_traced(e->instrs[i])) traced[n++] = e->instrs[i];
  HInstr **ops = malloc(sizeof *ops * (size_t)(n + 1));
  Shape *sh = malloc(sizeof *sh * (size_t)(n + 1));
  ops[0] = e->root;
  sh[0] = e->root->shape;
  for (int k = 0; k < n; k++)
    ops[k + 1] = traced[k], sh[k + 1] = traced[k]->shape;
  Shape ts = hlo_shape_tuple(m->arena, n + 1, sh);
  e->root = hlo_instr_new(e, OP_TUPLE, hlo_module_unique_name(m, "trace"), &ts, n + 1, ops);
  free(ops);
  free(sh);
  hlo_comp_renumber(e);
  /* the interface is the traced tuple, row-major, with no donated buffers */
  m->has_entry_layout = false;
  m->nalias = 0;
  return n;
}

/* Min, max and the NaN and infinity counts of an array, on one line. */
static void tr_stats(FILE *f, const char *what, const Literal *l) {
  int64_t n = hlo_shape_elems(&l->shape), nan = 0, inf = 0;
  double lo = INFINITY, hi = -INFINITY;
  bool cplx = hlo_dtype_is_complex(l->shape.dt);
  for (int64_t i = 0; i < n && !cplx; i++) {
    double v = hlo_literal_get_f64(l, i);
    if (isnan(v))
      nan++;
    else if (isinf(v))
      inf++;
    if (v < lo) lo = v;
    if (v > hi) hi = v;
  }
  char sh[256];
  hlo_shape_snprint(sh, sizeof sh, &l->shape, false);
  fprintf(f, "  %-30s %s", what, sh);
  if (cplx)
    fprintf(f, "  (complex: max |x| %.6g)\n", hlo_literal_max_abs(l));
  else
    fprintf(f, "  min %.6g max %.6g, %lld NaN, %lld Inf\n", n ? lo : 0.0, n ? hi : 0.0,
            (long long)nan, (long long)inf);
}

/* Operand op's value: its argument (an entry parameter) or vals[nres + q] of the traced
 * instruction q < n it is; NULL for anything else (a constant, tuple plumbing). */
static Literal *tr_operand(const HModule *m, const HInstr *op, HInstr *const *tr, int n,
                           Literal *const *vals, int nres, Literal *const *args) {
  if (op->op == OP_PARAMETER && op->parent == m->entry) return args[op->param_num];
  for (int q = 0; q < n; q++)
    if (tr[q] == op) return vals[nres + q];
  return NULL;
}

/* The divergent kernel k: its HLO, the fused computation, its operands' values. */
static void tr_report_kernel(FILE *f, const HModule *m, HInstr *const *tr, int ntr, int k,
                             Literal *const *want, int nres, Literal *const *args) {
  const HInstr *in = tr[k];
  fprintf(f, "\nthe kernel:\n  ");
  hlo_print_instr(f, in, NULL);
  fputc('\n', f);
  if (in->op == OP_FUSION && in->ncalls) hlo_print_comp(f, in->calls[0], NULL);
  fprintf(f, "its operands (the interpreter's values):\n");
  for (int j = 0; j < in->nops; j++) {
    const HInstr *op = in->ops[j];
    const Literal *v = tr_operand(m, op, tr, ntr, want, nres, args);
    if (v && v->shape.dt != DT_TUPLE)
      tr_stats(f, op->name, v);
    else
      fprintf(f, "  %-30s (not traced)\n", op->name);
  }
}

/* Kernel k's own error: its instruction evaluated by the interpreter on the compiled values
 * of its operands (a computation of its own in m) against its compiled output. 1 agrees, 0
 * not, -1 when an operand is neither a parameter nor traced (a constant: no compiled value). */
static int tr_local(const OptBisect *b, HModule *m, HInstr *const *tr, int k, Literal *const *got,
                    int nres, Literal *const *args, HArena *a, HErr *err) {
  const HInstr *in = tr[k];
  Literal **vals = hlo_arena_alloc(a, sizeof *vals * (size_t)(in->nops + 1));
  for (int j = 0; j < in->nops; j++)
    if (!(vals[j] = tr_operand(m, in->ops[j], tr, k, got, nres, args))) return -1;
  HComp *c = hlo_comp_new(m, hlo_module_unique_name(m, "local"));
  HInstr **ops = hlo_arena_alloc(m->arena, sizeof *ops * (size_t)(in->nops + 1));
  for (int j = 0; j < in->nops; j++) {
    ops[j] =
        hlo_instr_new(c, OP_PARAMETER, hlo_module_unique_name(m, "p"), &in->ops[j]->shape, 0, NULL);
    ops[j]->param_num = j;
  }
  c->root = hlo_instr_clone(c, in, ops);
  hlo_comp_renumber(c);
  Literal *r = hlo_interp_comp(c, a, vals, in->nops, err);
  HCompare lc;
  if (!r || !opt_bisect_leaf(b, got[nres + k], r, &lc, err)) return -1;
  return lc.bad == 0;
}

/* Compare each traced kernel's compiled output got[nres + k] with the interpreter's; a kernel
 * out of tolerance whose own computation agrees (tr_local: its inputs carried the difference,
 * e.g. 16-bit roundings upstream judged by an f32 kernel's tolerance) is marked so and the
 * search goes on. The report as the pass bisection's, the first divergence in b->bad_kernel. */
static int tr_compare(OptBisect *b, HModule *m, HInstr *const *tr, int ntr, Literal *const *got,
                      Literal *const *want, int nres, Literal *const *args, HArena *a, HErr *err) {
  FILE *f = b->report;
  int first = -1, after = 0, carried = 0;
  double after_rel = 0;
  for (int k = 0; k < ntr; k++) {
    HCompare c;
    if (!opt_bisect_leaf(b, got[nres + k], want[nres + k], &c, err)) return -1;
    b->kernels_checked++;
    if (first >= 0) {
      after += c.bad > 0;
      if (c.max_rel > after_rel) after_rel = c.max_rel;
      continue;
    }
    double ulps = opt_bisect_ulps(got[nres + k], want[nres + k]);
    int local = c.bad ? tr_local(b, m, tr, k, got, nres, args, a, err) : 0;
    if (local < 0 && err->set) return -1;
    long long outside = (long long)c.bad;
    if (local == 1) carried++, c.bad = 0; /* its own computation agrees */
    if (f)
      fprintf(f, "%4d  %-30s  %-6s  max abs err %.3g, max rel err %.3g (%lld outside)%s%s", k + 1,
              tr[k]->name,
              c.bad        ? "OUT"
              : local == 1 ? "inputs"
                           : "agrees",
              c.max_abs, c.max_rel, outside, local == 1 ? "; agrees on its compiled inputs" : "",
              ulps < 0 ? "\n" : "");
    if (f && ulps >= 0) opt_bisect_ulps_note(f, ulps, want[nres + k]->shape.dt);
    if (c.bad) {
      first = k;
      b->bad_kernel = tr[k]->name;
      b->bad_kernel_idx = k + 1;
      b->kernel_worst = c;
    }
  }
  if (f && carried)
    fprintf(f,
            "%d kernel%s out of tolerance only through %s inputs (each agrees when the "
            "interpreter takes the compiled inputs)\n",
            carried, carried == 1 ? "" : "s", carried == 1 ? "its" : "their");
  if (first < 0 || !f) return first < 0 ? 0 : 1;
  fprintf(f,
          "first kernel out of tolerance: %s (kernel %d of %d), element %lld got %.9g, "
          "expected %.9g\n",
          tr[first]->name, first + 1, ntr, (long long)b->kernel_worst.worst,
          b->kernel_worst.worst_got, b->kernel_worst.worst_want);
  fprintf(f, "downstream: %d of the %d kernels after it out of tolerance too (max rel err %.3g)\n",
          after, ntr - first - 1, after_rel);
  tr_report_kernel(f, m, tr, ntr, first, want, nres, args);
  return 1;
}

int opt_bisect_kernels(HModule *mi, HModule *mc, Literal *const *args, int nargs, OptRunFn run,
                       void *run_ctx, OptBisect *b, HErr *err) {
  HInstr **ti = malloc(sizeof *ti * (size_t)(mi->entry->ninstrs + 1)),
         **tc = malloc(sizeof *tc * (size_t)(mc->entry->ninstrs + 1));
  int nres = hlo_shape_leaves(&mi->entry->root->shape);
  int ni = opt_trace_outputs(mi, ti), nc = opt_trace_outputs(mc, tc), rc = -1;
  HArena *a = hlo_arena_new();
  Literal **flat = NULL;
  int nflat = opt_bisect_flat_args(a, args, nargs, mi, &flat, err);
  b->kernels_checked = 0;
  b->bad_kernel = NULL;
  bool same = ni == nc;
  for (int k = 0; same && k < ni; k++)
    same = !strcmp(ti[k]->name, tc[k]->name);
  if (nflat < 0) {
    /* err set */
  } else if (!same) {
    hlo_err(err, mi->file, NULL, NULL,
            "the compiled module's kernels differ from the "
            "interpreted one's (%d and %d traced)",
            nc, ni);
  } else if (b->inject_module) {
    b->inject_module(b->inject_ctx, mc);
  }
  Literal **want = hlo_arena_alloc(a, sizeof *want * (size_t)(ni + nres + 1)), **got = NULL;
  int nwant = 0, ngot = 0;
  if (nflat >= 0 && same) {
    Literal *ref = hlo_interp_run(mi, a, flat, nflat, err);
    if (ref) opt_bisect_leaves(ref, want, &nwant, ni + nres);
    if (ref && run(run_ctx, mc, flat, nflat, a, &got, &ngot, err)) {
      if (ngot != nwant || nwant != ni + nres)
        hlo_err(err, mi->file, NULL, NULL, "the compiled module gave %d results, %d expected", ngot,
                nwant);
      else
        rc = tr_compare(b, mi, ti, ni, got, want, nres, flat, a, err);
    }
  }
  hlo_arena_free(a);
  free(ti);
  free(tc);
  return rc;
}
