/* optimizer/reduce_factor.c: pull values that do not vary along the reduced dimensions out
 * of sums.
 *
 * What. A sum over some dimensions of a product whose factors include values that are
 * constant along those dimensions equals those factors times the sum of the rest:
 *   reduce(neg(broadcast(v, {3}) * x * 2), dims={0,1,2}, add)  =  -(reduce(x) * v * 2)
 * JAX's autodiff of batch normalisation is full of such sums, where v (a rsqrt of a
 * variance, a reduced gradient) itself comes from an earlier reduction of the same
 * activation: the factor chains the reductions, one pass over the activation each. Pulled
 * out, the remaining sums depend on less (often only on the activation), so CSE finds the
 * duplicates among them and the fusion pass merges the siblings that read the same operand
 * into one multi-output pass (simple_cnn_train_step: fewer passes over its 822 MB
 * activations, see tests/test_opt_passes.c). A reassociation, as XLA's algebraic
 * simplifier does for some patterns: floating-point results change in the last bits.
 *
 * Which reduces. One operand (not variadic), reducer a plain scalar add of its two
 * parameters (float or integer), init a constant 0, at least one reduced dimension, no
 * control dependencies, no empty dimension.
 *
 * Algorithm. The operand is read as a signed sum of terms (a tree of add, subtract and
 * negate; a single term when it is none of these), each term as a product: a tree of
 * multiply, negate (a sign) and, for floats, divide (numerator as it is, divisor inverted;
 * integer division does not distribute, so an integer divide is a leaf). Each leaf is
 *  - neutral: a constant 1 everywhere (dropped, so that reduce(1 / d) is left alone);
 *  - a factor: seen through bitcast-like reshapes, a broadcast(v, D) whose dimensions of v
 *    larger than 1 land on kept (not reduced) dimensions, or a constant with all elements
 *    equal. Each such dimension of v is traced through the reshapes by position (a row-major
 *    dimension survives a reshape exactly when a dimension of the same size has the same
 *    number of elements before it) and becomes dimension D'[i] of the reduce's output: the
 *    index of its operand dimension among the kept ones, in increasing order;
 *  - the rest otherwise.
 * A term is pulled out of the sum as F'1 * ... / F'k * reduce(prod(rest) / prod(inverted
 * rest)), negated by its sign, where F' = broadcast(v, D') at the reduce's shape (v first
 * reshaped to its dimensions larger than 1 when it has others; a uniform constant becomes a
 * broadcast scalar); a term made of factors only contributes F'... * N, N the number of
 * elements summed (when N is exact in the type). Which terms:
 *  - a lone product: whenever it has a factor and a rest (everything constant: left alone).
 *    The reduce is replaced by the pulled product: still one reduce, nothing duplicated.
 *  - a sum of several terms: a term with a factor that depends on another reduce (the
 *    chains this pass is about), when that costs no new pass: the term is made of factors
 *    only, or the graph already sums its rest over the same dimensions (an earlier reduce
 *    that stays, or one this sweep made; a later one waits for the next sweep, so that
 *    nothing new refers to a reduce about to be replaced), which is then used. The other
 *    terms stay together in one reduce of their sum; something non-constant must stay. The
 *    bias gradient behind a batch norm, sum(g * rsqrt(var) * sel + c * (x - mean) + m),
 *    becomes g * rsqrt(var) * sum(sel) + c * sum(x - mean) + N * m from sums the backward
 *    pass takes anyway, and sum(x - mean) becomes sum(x) - N * mean; a layer norm over a
 *    residual, sum(b + (x - mean) * g * rsqrt(var)), is left alone, since sum(x - mean)
 *    would be a new pass over x.
 * The rest leaves are multiplied in instruction order, so that two sums of the same rest,
 * reached through differently nested products, come out identical for CSE. The original
 * operand stays for its other users (DCE removes it otherwise). The result has the reduce's
 * shape and type. At most 8 terms of 8 rest leaves and 8 factors each, trees at most 64 deep
 * (DAGs cannot blow up).
 *
 * Runs over every computation with opt_rewrite_comp; needs row-major layouts (after
 * layout-normalize) for its reshape reasoning; invalidates users lists. */
#include "optimizer.h"

#include <stdlib.h>
#include <string.h>

enum {
  RF_MAX_TERMS = 8,  /* terms of the sum; more: left alone */
  RF_MAX_LEAVES = 8, /* rest leaves, and factors, per term; more: left alone */
  RF_MAX_DEPTH = 64, /* nesting of the trees walked; deeper: left alone */
};

/* A leaf that is constant along the reduced dimensions, and how to rebuild it at the
 * reduce's output shape. */
typedef struct Factor {
  HInstr *v;                 /* the broadcast's operand, or the uniform constant */
  bool uniform;              /* v is a constant whose elements are all equal */
  int n;                     /* v's dimensions larger than 1 (not uniform) */
  int64_t out[HLO_MAX_RANK]; /* for each of them, in order: the output dimension */
} Factor;

/* A leaf of a term's product. */
typedef struct Leaf {
  HInstr *x; /* the leaf instruction (the operand's shape) */
  bool inv;  /* divides rather than multiplies */
  Factor f;  /* factors only: the rebuilt form */
} Leaf;

/* One term of the sum: a signed product of leaves. */
typedef struct Term {
  HInstr *x;                /* the term's instruction */
  bool sub;                 /* subtracted from the sum */
  bool neg;                 /* its product has an odd number of negations */
  bool pulled;              /* goes out of the reduce */
  int nrest;                /* leaves that vary along the reduced dimensions */
  Leaf rest[RF_MAX_LEAVES]; /* them */
  int nfac;                 /* leaves constant along the reduced dimensions */
  Leaf fac[RF_MAX_LEAVES];  /* them */
} Term;

/* The operand of the reduce being rewritten, split. */
typedef struct Sum {
  int64_t pos[HLO_MAX_RANK]; /* per operand dimension: its output dimension, -1 if reduced */
  DType dt;                  /* element type */
  bool full;                 /* a limit was hit: give up */
  int nterms;                /* terms */
  Term t[RF_MAX_TERMS];      /* them */
} Sum;

/* State of the pass over one computation. */
typedef struct Ctx {
  HComp *c;        /* the computation */
  int n0;          /* its instruction count when the sweep started */
  uint8_t *dep;    /* per instruction below n0: it depends on a reduce */
  HArena *scratch; /* the pass's scratch arena */
  int nred;        /* reduces of c, then those the sweep appends */
  int capred;      /* capacity of red */
  HInstr **red;    /* them */
  Sum *sum;        /* the split of the current reduce (reused) */
  Sum *probe;      /* the split of a candidate existing sum (reused) */
} Ctx;

static void note_reduce(Ctx *cx, HInstr *r) {
  if (cx->nred == cx->capred) {
    cx->capred = 2 * cx->capred + 16;
    HInstr **a = hlo_arena_alloc(cx->scratch, sizeof(HInstr *) * (size_t)cx->capred);
    if (cx->nred) memcpy(a, cx->red, sizeof(HInstr *) * (size_t)cx->nred);
    cx->red = a;
  }
  cx->red[cx->nred++] = r;
}

/* in is a single-operand sum: reducer add, init a constant 0, an array result of the
 * operand's type (float or integer). */
static bool is_sum(const HInstr *in) {
  if (in->op != OP_REDUCE || in->nops != 2 || in->ncalls != 1) return false;
  const HInstr *x = in->ops[0], *init = in->ops[1];
  DType dt = in->shape.dt;
  return hlo_shape_is_array(&in->shape) && hlo_shape_is_array(&x->shape) && x->shape.dt == dt &&
         (hlo_dtype_is_float(dt) || hlo_dtype_is_int(dt)) && hlo_comp_is_add(in->calls[0], dt) &&
         init->shape.rank == 0 && opt_uniform_is(init, 0);
}

/* x depends on a reduce (the flags of the instructions present at the start, followed
 * through the few appended since, which are built on them). */
static bool depends_on_reduce(const Ctx *cx, const HInstr *x, int depth) {
  if (x->op == OP_REDUCE) return true;
  if (x->parent == cx->c && x->idx < cx->n0 && cx->c->instrs[x->idx] == x) return cx->dep[x->idx];
  if (depth > 32) return false;
  for (int k = 0; k < x->nops; k++)
    if (depends_on_reduce(cx, x->ops[k], depth + 1)) return true;
  return false;
}

static int64_t elems_before(const Shape *s, int d) {
  int64_t n = 1;
  for (int i = 0; i < d; i++)
    n *= s->dims[i];
  return n;
}

/* Dimension d of `from` (larger than 1) seen in `to`, a row-major reshape of it: the
 * dimension of the same size with as many elements before it, or -1 when it is merged or
 * split. */
static int reshape_dim(const Shape *from, int d, const Shape *to) {
  int64_t before = elems_before(from, d);
  for (int j = 0; j < to->rank; j++)
    if (to->dims[j] == from->dims[d] && elems_before(to, j) == before) return j;
  return -1;
}

static bool row_major_reshape(const HInstr *x) {
  return (x->op == OP_RESHAPE || x->op == OP_BITCAST) && x->nops == 1 &&
         x->ops[0]->shape.dt == x->shape.dt && hlo_shape_is_array(&x->ops[0]->shape) &&
         hlo_layout_is_default(&x->shape) && hlo_layout_is_default(&x->ops[0]->shape);
}

/* x, seen through bitcast-like reshapes, is a broadcast whose dimensions larger than 1 land
 * on kept dimensions only (pos: see Sum). Fills f. */
static bool broadcast_factor(HInstr *x, const int64_t *pos, Factor *f) {
  const HInstr *chain[HLO_MAX_RANK]; /* bitcast-like reshapes from x down to the broadcast */
  int nchain = 0;
  HInstr *b = x;
  while (row_major_reshape(b) && nchain < HLO_MAX_RANK) {
    chain[nchain++] = b;
    b = b->ops[0];
  }
  if (b->op != OP_BROADCAST || b->nops != 1 || b->ops[0]->shape.dt != b->shape.dt) return false;
  HInstr *v = b->ops[0];
  int64_t cur[HLO_MAX_RANK]; /* dimension of the current shape holding each traced v dim */
  for (int i = 0; i < v->shape.rank; i++)
    if (v->shape.dims[i] != 1) cur[f->n++] = b->dims.v[i];
  const Shape *s = &b->shape;
  for (int k = nchain - 1; k >= 0; k--) {
    for (int i = 0; i < f->n; i++)
      if ((cur[i] = reshape_dim(s, (int)cur[i], &chain[k]->shape)) < 0) return false;
    s = &chain[k]->shape;
  }
  for (int i = 0; i < f->n; i++) {
    if (pos[cur[i]] < 0) return false;
    f->out[i] = pos[cur[i]];
  }
  f->v = v;
  return true;
}

/* Is x, of the reduce operand's shape, constant along the reduced dimensions? Fills f. */
static bool invariant(HInstr *x, const int64_t *pos, Factor *f) {
  memset(f, 0, sizeof *f);
  if (broadcast_factor(x, pos, f)) return true;
  memset(f, 0, sizeof *f);
  double u;
  if (!opt_uniform_value(x, &u)) return false;
  HInstr *k = x;
  while (k->op != OP_CONSTANT)
    k = k->ops[0];
  f->v = k;
  f->uniform = true;
  return true;
}

static void add_leaf(Sum *s, Term *t, HInstr *x, bool inv) {
  if (opt_uniform_is(x, 1)) return; /* neutral */
  Factor f;
  bool fac = invariant(x, s->pos, &f);
  int *n = fac ? &t->nfac : &t->nrest;
  if (*n == RF_MAX_LEAVES) {
    s->full = true;
    return;
  }
  Leaf *l = fac ? &t->fac[*n] : &t->rest[*n];
  (*n)++;
  l->x = x;
  l->inv = inv;
  if (fac) l->f = f;
}

/* Walk the product under x (at nesting depth) into term t; inv: x divides. */
static void walk_product(Sum *s, Term *t, HInstr *x, bool inv, int depth) {
  if (s->full) return;
  bool tree = x->op == OP_MULTIPLY || x->op == OP_NEGATE ||
              (x->op == OP_DIVIDE && hlo_dtype_is_float(s->dt));
  if (tree && depth == RF_MAX_DEPTH) {
    s->full = true;
  } else if (x->op == OP_MULTIPLY) {
    walk_product(s, t, x->ops[0], inv, depth + 1);
    walk_product(s, t, x->ops[1], inv, depth + 1);
  } else if (x->op == OP_NEGATE) {
    t->neg = !t->neg;
    walk_product(s, t, x->ops[0], inv, depth + 1);
  } else if (tree) { /* a float divide */
    walk_product(s, t, x->ops[0], inv, depth + 1);
    walk_product(s, t, x->ops[1], !inv, depth + 1);
  } else {
    add_leaf(s, t, x, inv);
  }
}

/* Walk the sum under x (at nesting depth) into terms; neg: x is subtracted. */
static void walk_sum(Sum *s, HInstr *x, bool neg, int depth) {
  if (s->full) return;
  bool tree = x->op == OP_ADD || x->op == OP_SUBTRACT || x->op == OP_NEGATE;
  if (tree && depth == RF_MAX_DEPTH) {
    s->full = true;
  } else if (x->op == OP_ADD) {
    walk_sum(s, x->ops[0], neg, depth + 1);
    walk_sum(s, x->ops[1], neg, depth + 1);
  } else if (x->op == OP_SUBTRACT) {
    walk_sum(s, x->ops[0], neg, depth + 1);
    walk_sum(s, x->ops[1], !neg, depth + 1);
  } else if (x->op == OP_NEGATE) {
    walk_sum(s, x->ops[0], !neg, depth + 1);
  } else if (s->nterms == RF_MAX_TERMS) {
    s->full = true;
  } else {
    Term *t = &s->t[s->nterms++];
    t->x = x;
    t->sub = neg;
    walk_product(s, t, x, false, 0);
  }
}

static HInstr *binary(HComp *c, HOp op, const char *base, HInstr *a, HInstr *b) {
  HInstr *ops[2] = {a, b};
  return opt_new(c, op, base, &a->shape, 2, ops);
}

/* acc +/- x (acc NULL: +/- x). */
static HInstr *accumulate(HComp *c, HInstr *acc, HInstr *x, bool neg) {
  if (!acc) return neg ? opt_new(c, OP_NEGATE, "negate", &x->shape, 1, &x) : x;
  return binary(c, neg ? OP_SUBTRACT : OP_ADD, neg ? "subtract" : "add", acc, x);
}

/* Factor f at the shape of reduce red. */
static HInstr *rebroadcast(HComp *c, const HInstr *red, const Factor *f) {
  HInstr *v = f->v;
  int n = f->n;
  if (f->uniform) {
    Shape s = hlo_shape_scalar(v->shape.dt);
    HInstr *k = opt_new(c, OP_CONSTANT, "constant", &s, 0, NULL);
    k->literal = hlo_literal_new(c->mod->arena, &s);
    memcpy(k->literal->data, v->literal->data, hlo_dtype_size(s.dt));
    v = k;
    n = 0;
  } else if (v->shape.rank != n) {
    int64_t dims[HLO_MAX_RANK];
    int k = 0;
    for (int i = 0; i < v->shape.rank; i++)
      if (v->shape.dims[i] != 1) dims[k++] = v->shape.dims[i];
    Shape s = hlo_shape_array(v->shape.dt, n, dims);
    v = opt_new(c, OP_RESHAPE, "reshape", &s, 1, &v);
  }
  bool identity = n == red->shape.rank;
  for (int i = 0; identity && i < n; i++)
    identity = f->out[i] == i;
  if (identity) return v;
  Shape bs = red->shape;
  HInstr *b = opt_new(c, OP_BROADCAST, "broadcast", &bs, 1, &v);
  b->dims.n = n;
  for (int i = 0; i < n; i++)
    b->dims.v[i] = f->out[i];
  return b;
}

static int leaf_order(const void *x, const void *y) {
  const Leaf *a = x, *b = y;
  return (a->x->idx > b->x->idx) - (a->x->idx < b->x->idx);
}

/* Product of t's rest leaves with inv == want (NULL when there is none). */
static HInstr *rest_product(HComp *c, const Term *t, bool want) {
  HInstr *p = NULL;
  for (int i = 0; i < t->nrest; i++)
    if (t->rest[i].inv == want)
      p = p ? binary(c, OP_MULTIPLY, "multiply", p, t->rest[i].x) : t->rest[i].x;
  return p;
}

/* Number of elements each output element of red sums. */
static int64_t summed_count(const HInstr *red) {
  int64_t n = 1;
  for (int i = 0; i < red->dims.n; i++)
    n *= red->ops[0]->shape.dims[red->dims.v[i]];
  return n;
}

/* The count is exact in red's type (integers wrap like the sum it stands for). */
static bool count_exact(const HInstr *red) {
  DType dt = red->shape.dt;
  if (!hlo_dtype_is_float(dt)) return true;
  double n = (double)summed_count(red);
  uint8_t buf[8];
  hlo_store_f64(dt, buf, 0, n);
  return hlo_load_f64(dt, buf, 0) == n;
}

/* The count as a scalar constant of red's type. */
static HInstr *count_constant(HComp *c, const HInstr *red) {
  Shape s = hlo_shape_scalar(red->shape.dt);
  HInstr *k = opt_new(c, OP_CONSTANT, "constant", &s, 0, NULL);
  k->literal = hlo_literal_new(c->mod->arena, &s);
  hlo_literal_set_i64(k->literal, 0, summed_count(red));
  return k;
}

/* reduce red over operand x (its init and reducer). */
static HInstr *new_reduce(Ctx *cx, HInstr *red, HInstr *x) {
  HInstr *ops[2] = {x, red->ops[1]};
  HInstr *r = hlo_instr_clone(cx->c, red, ops);
  note_reduce(cx, r);
  return r;
}

static bool same_rest(const Term *a, const Term *b) {
  if (a->nrest != b->nrest) return false;
  for (int i = 0; i < a->nrest; i++)
    if (a->rest[i].x != b->rest[i].x || a->rest[i].inv != b->rest[i].inv) return false;
  return true;
}

/* A sum over the dimensions of `in` of exactly t's rest (sorted) that in's replacement may
 * use: one before `in` that stays, or one this sweep appended. NULL when there is none. */
static HInstr *existing_sum(Ctx *cx, const HInstr *in, const Term *t) {
  for (int i = 0; i < cx->nred; i++) {
    HInstr *r = cx->red[i];
    bool usable = r->idx >= cx->n0 || (r->idx < in->idx && !r->aux);
    if (!usable || !is_sum(r) || !hlo_shape_eq(&r->shape, &in->shape) || r->dims.n != in->dims.n ||
        !hlo_shape_same_dims(&r->ops[0]->shape, &in->ops[0]->shape))
      continue;
    bool dims_eq = true;
    for (int k = 0; k < r->dims.n; k++)
      dims_eq &= r->dims.v[k] == in->dims.v[k];
    if (!dims_eq) continue;
    Sum *p = cx->probe;
    memset(p, 0, sizeof *p);
    memcpy(p->pos, cx->sum->pos, sizeof p->pos);
    p->dt = cx->sum->dt;
    p->nterms = 1;
    walk_product(p, &p->t[0], r->ops[0], false, 0);
    Term *q = &p->t[0];
    if (p->full || q->nfac || q->neg) continue;
    qsort(q->rest, (size_t)q->nrest, sizeof *q->rest, leaf_order);
    if (same_rest(q, t)) return r;
  }
  return NULL;
}

/* Pulled term t of reduce red: its factors times the sum of its rest (sum: an existing one,
 * or NULL to make it) or times the count. */
static HInstr *build_term(Ctx *cx, HInstr *red, const Term *t, HInstr *sum, HInstr *count) {
  HComp *c = cx->c;
  HInstr *r = sum;
  if (!r && t->nrest) {
    HInstr *num = rest_product(c, t, false), *den = rest_product(c, t, true);
    if (!num) num = opt_broadcast_scalar(c, opt_const_scalar(c, red->shape.dt, 1), &t->x->shape);
    r = new_reduce(cx, red, den ? binary(c, OP_DIVIDE, "divide", num, den) : num);
  } else if (!r) {
    r = opt_broadcast_scalar(c, count, &red->shape);
  }
  for (int i = 0; i < t->nfac; i++)
    if (!t->fac[i].inv)
      r = binary(c, OP_MULTIPLY, "multiply", r, rebroadcast(c, red, &t->fac[i].f));
  for (int i = 0; i < t->nfac; i++)
    if (t->fac[i].inv) r = binary(c, OP_DIVIDE, "divide", r, rebroadcast(c, red, &t->fac[i].f));
  return r;
}

/* The rewrite rule: the replacement for a qualifying reduce, or NULL. */
static HInstr *factor_rule(HComp *c, HInstr *in, PassCtx *pc, void *ctx) {
  (void)pc;
  Ctx *cx = ctx;
  if (in->nctrl || !is_sum(in) || in->dims.n == 0 || hlo_shape_elems(&in->ops[0]->shape) == 0)
    return NULL;
  HInstr *x = in->ops[0];
  Sum *s = cx->sum;
  memset(s, 0, sizeof *s);
  for (int d = 0, k = 0; d < x->shape.rank; d++)
    s->pos[d] = opt_ilist_has(&in->dims, d) ? -1 : k++;
  s->dt = in->shape.dt;
  walk_sum(s, x, false, 0);
  if (s->full) return NULL;

  /* which terms go out, each with the sum of its rest when the graph has it */
  HInstr *sums[RF_MAX_TERMS] = {0};
  int npulled = 0;
  bool varying_left = false;
  for (int i = 0; i < s->nterms; i++) {
    Term *t = &s->t[i];
    qsort(t->rest, (size_t)t->nrest, sizeof *t->rest, leaf_order);
    if (s->nterms == 1) {
      t->pulled = t->nfac > 0 && t->nrest > 0;
    } else {
      for (int k = 0; k < t->nfac && !t->pulled; k++)
        t->pulled = depends_on_reduce(cx, t->fac[k].f.v, 0);
      if (t->pulled && t->nrest) t->pulled = (sums[i] = existing_sum(cx, in, t)) != NULL;
      if (t->pulled && !t->nrest) t->pulled = count_exact(in);
    }
    npulled += t->pulled;
    varying_left |= t->nrest > 0;
  }
  if (!npulled || !varying_left) return NULL; /* nothing appended so far */

  /* the terms left in, summed and reduced, then the pulled ones */
  HInstr *kept = NULL, *r = NULL, *count = NULL;
  for (int i = 0; i < s->nterms; i++)
    if (!s->t[i].pulled) kept = accumulate(c, kept, s->t[i].x, s->t[i].sub);
  if (kept) r = new_reduce(cx, in, kept);
  for (int i = 0; i < s->nterms; i++) {
    const Term *t = &s->t[i];
    if (t->pulled && !t->nrest && !count) count = count_constant(c, in);
    if (t->pulled) r = accumulate(c, r, build_term(cx, in, t, sums[i], count), t->sub != t->neg);
  }
  HLO_ASSERT(hlo_shape_eq(&r->shape, &in->shape));
  return r;
}

bool opt_reduce_factor(HModule *m, PassCtx *pc) {
  bool changed = false;
  Ctx cx = {.scratch = pc->scratch,
            .sum = hlo_arena_alloc(pc->scratch, sizeof(Sum)),
            .probe = hlo_arena_alloc(pc->scratch, sizeof(Sum))};
  for (int i = 0; i < m->ncomps; i++) {
    HComp *c = m->comps[i];
    hlo_comp_renumber(c);
    cx.c = c;
    cx.n0 = c->ninstrs;
    cx.nred = 0;
    cx.dep = hlo_arena_alloc(pc->scratch, (size_t)c->ninstrs + 1);
    for (int k = 0; k < c->ninstrs; k++) {
      HInstr *x = c->instrs[k];
      bool d = x->op == OP_REDUCE;
      if (d) note_reduce(&cx, x);
      for (int j = 0; j < x->nops && !d; j++)
        d = x->ops[j]->parent == c && x->ops[j]->idx < k && cx.dep[x->ops[j]->idx];
      cx.dep[k] = d;
    }
    changed |= opt_rewrite_comp(c, pc, factor_rule, &cx);
  }
  return changed;
}
