/* optimizer/bisect.c: pass bisection for `hloc verify`.
 *
 * The interpreter evaluates the module before optimization, then the pipeline runs with an
 * after-pass hook that evaluates the module again after every pass that changed it, on the
 * same arguments (flattened into leaves once flatten-params has made the entry's tuple
 * parameters leaves), and compares every result leaf with the first evaluation. The first pass
 * whose results leave the tolerance stops the pipeline: it is the pass to look at, since every
 * pass before it kept the values. A pass after which the interpreter fails counts as a
 * divergence too (its error is reported). Each check runs in an arena of its own. */
#include "optimizer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct BsCtx {
  OptBisect *b;
  Literal **want; /* the results before optimization, flat */
  int nwant;
  Literal *const *args, **flat; /* the arguments as given, and as leaves */
  int nargs, nflat;
} BsCtx;

enum { BS_MAX_LEAVES = 4096 };

void opt_bisect_leaves(Literal *l, Literal **out, int *n, int cap) {
  if (l->shape.dt != DT_TUPLE) {
    if (*n < cap) out[*n] = l;
    (*n)++;
    return;
  }
  for (int i = 0; i < l->shape.ntuple; i++)
    opt_bisect_leaves(l->elems[i], out, n, cap);
}

static void bs_flatten(Literal *l, Literal **out, int *n) {
  opt_bisect_leaves(l, out, n, BS_MAX_LEAVES);
}

int opt_bisect_flat_args(HArena *a, Literal *const *args, int nargs, const HModule *m,
                         Literal ***out, HErr *err) {
  int np = m->entry->nparams, n = 0;
  *out = hlo_arena_alloc(a, sizeof **out * BS_MAX_LEAVES);
  if (np == nargs) {
    memcpy(*out, args, sizeof *args * (size_t)nargs);
    return nargs;
  }
  for (int i = 0; i < nargs; i++)
    bs_flatten(args[i], *out, &n);
  if (n == np) return n;
  hlo_err(err, m->file, NULL, NULL, "the entry has %d parameters, %d given", np, nargs);
  return -1;
}

double opt_bisect_ulps(const Literal *got, const Literal *want) {
  int nb, ex, man;
  DType t = want->shape.dt;
  if ((t != DT_BF16 && t != DT_F16) || !hlo_float_format(t, &nb, &ex, &man)) return -1;
  int emin = 2 - (1 << (ex - 1)); /* the smallest normal's exponent */
  double worst = 0;
  for (int64_t i = 0; i < hlo_shape_elems(&want->shape); i++) {
    double w = hlo_literal_get_f64(want, i), g = hlo_literal_get_f64(got, i);
    /* an exact zero has no rounding to be one of: the tolerance alone judges it */
    if (isnan(w) || isnan(g) || isinf(w) || g == w || w == 0) continue;
    int e = ilogb(w);
    double ulp = ldexp(1.0, (e < emin ? emin : e) - man);
    if (fabs(g - w) / ulp > worst) worst = fabs(g - w) / ulp;
  }
  return worst;
}

void opt_bisect_ulps_note(FILE *f, double ulps, DType t) {
  if (ulps == 0)
    fprintf(f, ", exact in %s\n", hlo_dtype_name(t));
  else if (ulps <= 1)
    fprintf(f, ", within 1 %s ulp: one rounding apart, not a bug\n", hlo_dtype_name(t));
  else
    fprintf(f, ", %.3g %s ulps\n", ulps, hlo_dtype_name(t));
}

bool opt_bisect_leaf(const OptBisect *b, const Literal *got, const Literal *want, HCompare *c,
                     HErr *err) {
  DType dt = want->shape.dt;
  double at = b->atol;
  if ((dt == DT_BF16 || dt == DT_F16) && b->tol16 * hlo_literal_max_abs(want) > at)
    at = b->tol16 * hlo_literal_max_abs(want);
  return hlo_literal_compare(got, want, b->rtol, at, c, err);
}

/* Compare results leaf by leaf; false at the first leaf outside the tolerance (*c, *leaf). */
static bool bs_agree(const OptBisect *b, Literal *const *got, int ngot, Literal *const *want,
                     int nwant, HCompare *worst, int *leaf, HErr *err) {
  memset(worst, 0, sizeof *worst);
  *leaf = 0;
  if (ngot != nwant) {
    hlo_err(err, NULL, NULL, NULL, "the module has %d results, %d before optimization", ngot,
            nwant);
    return false;
  }
  for (int k = 0; k < ngot; k++) {
    HCompare c;
    if (!opt_bisect_leaf(b, got[k], want[k], &c, err)) return false;
    if (c.bad || c.max_rel > worst->max_rel || k == 0) *worst = c, *leaf = k;
    if (c.bad) return false;
  }
  return true;
}

static bool bs_after_pass(void *vctx, const char *pass, HModule *m) {
  BsCtx *x = vctx;
  OptBisect *b = x->b;
  if (b->inject) b->inject(b->inject_ctx, pass, m);
  b->checked++;
  int np = m->entry->nparams;
  Literal *const *args = np == x->nargs ? x->args : np == x->nflat ? x->flat : NULL;
  HArena *a = hlo_arena_new();
  HErr e = {0};
  Literal *res = args ? hlo_interp_run(m, a, args, np, &e) : NULL;
  if (!args) hlo_err(&e, NULL, NULL, NULL, "the entry has %d parameters, %d given", np, x->nargs);
  Literal **got = hlo_arena_alloc(a, sizeof *got * BS_MAX_LEAVES);
  int ngot = 0;
  if (res) bs_flatten(res, got, &ngot);
  HCompare c = {0};
  int leaf = 0;
  bool ok = res && bs_agree(b, got, ngot, x->want, x->nwant, &c, &leaf, &e);
  if (b->report && (!res || e.set))
    fprintf(b->report, "%4d  %-22s  FAILED  %s\n", b->checked, pass, e.msg);
  else if (b->report)
    fprintf(b->report,
            "%4d  %-22s  %-6s  max abs err %.3g, max rel err %.3g (result %d: %lld outside)\n",
            b->checked, pass, ok ? "agrees" : "MOVED", c.max_abs, c.max_rel, leaf,
            (long long)c.bad);
  if (b->checked <= OPT_BISECT_STEPS) {
    b->step[b->checked - 1].pass = pass;
    b->step[b->checked - 1].ok = ok;
    b->step[b->checked - 1].result = leaf;
    b->step[b->checked - 1].c = c;
  }
  if (!ok) {
    b->bad_pass = pass;
    b->bad_step = b->checked;
    b->bad_result = leaf;
    b->worst = c;
  }
  hlo_arena_free(a);
  return ok;
}

int opt_bisect(HModule *m, const OptOpts *o, Literal *const *args, int nargs, OptBisect *b,
               HErr *err) {
  HArena *a = hlo_arena_new();
  Literal *ref = hlo_interp_run(m, a, args, nargs, err);
  int rc = -1;
  if (ref) {
    BsCtx x = {b,    hlo_arena_alloc(a, sizeof(Literal *) * BS_MAX_LEAVES), 0,
               args, hlo_arena_alloc(a, sizeof(Literal *) * BS_MAX_LEAVES), nargs,
               0};
    bs_flatten(ref, x.want, &x.nwant);
    for (int i = 0; i < nargs; i++)
      bs_flatten(args[i], x.flat, &x.nflat);
    if (x.nwant > BS_MAX_LEAVES || x.nflat > BS_MAX_LEAVES) {
      hlo_err(err, m->file, NULL, NULL, "more than %d result or argument leaves", BS_MAX_LEAVES);
    } else {
      OptOpts oo = *o;
      oo.after_pass = bs_after_pass;
      oo.after_ctx = &x;
      b->checked = 0;
      b->bad_pass = NULL;
      if (opt_optimize(m, &oo, err)) rc = b->bad_pass ? 1 : 0;
    }
  }
  hlo_arena_free(a);
  return rc;
}

bool opt_bisect_compare(const OptBisect *b, Literal *got, Literal *const *want, int nwant,
                        HCompare *worst, int *leaf, HErr *err) {
  Literal **leaves = malloc(sizeof *leaves * BS_MAX_LEAVES);
  int n = 0;
  bs_flatten(got, leaves, &n);
  for (int k = 0; k < n && k < nwant && n <= BS_MAX_LEAVES; k++) /* bf16 as '<u2' bits */
    hlo_literal_bits_as(want[k], leaves[k]->shape.dt);
  bool ok = n <= BS_MAX_LEAVES && bs_agree(b, leaves, n, want, nwant, worst, leaf, err);
  free(leaves);
  return ok;
}
