/* optimizer/while_unroll.c: the while-unroll pass, counted loops as straight-line code.
 *
 * The targets compile one straight sequence of kernels, with no run-time loop over kernel
 * sequences. The loops JAX writes most (lax.fori_loop, lax.scan over a fixed length) are
 * counted: an induction element of the loop state starts at a constant, moves by a constant
 * step in the body, and the condition compares it with a constant bound (or with an element
 * the body passes through unchanged and the initial state sets to a constant). Their trip
 * count T is known at compile time, and
 *     r = while(init), condition=C, body=B
 *  -> s_1 = call(init), to_apply=B; s_2 = call(s_1), to_apply=B; ... r = s_T   (init when T = 0)
 * which inline-call then flattens into one graph for the other passes. The induction value
 * is simulated with C's comparison (any direction, either operand order, integer types) to
 * find T; a loop whose count exceeds WU_MAX_TRIPS or whose unrolled body would exceed
 * WU_MAX_INSTRS instructions, whose count is not of that form, or whose body or condition
 * has side effects or loops of its own (opt_comp_speculable), is left for the target to
 * report. A counted loop stays a loop unless one trip computes at most WU_SMALL_WORK elements
 * (products and reductions counted by their multiply-adds): there the loop's own cost per trip
 * (its exit test, the state copies, a task per kernel) outweighs the work, and the unrolled
 * trips fuse. A target whose per-trip launches cost more (CUDA: OptOpts.unroll_fusible_loops)
 * also unrolls a loop whose body is elementwise work and data movement only, whose trips fuse
 * into few kernels (docs/benchmarks.md's tuning table has the figures behind both). The
 * decision log (--dump-passes) names each loop, its count and work, and what was done. */
#include "optimizer.h"

enum { WU_MAX_TRIPS = 1024, WU_MAX_INSTRS = 200000, WU_SMALL_WORK = 64 };

/* The value of an integer scalar constant (seen through a copy or convert-free chain). */
static bool wu_const(const HInstr *x, int64_t *v) {
  if (x->op != OP_CONSTANT || !x->literal || x->shape.rank != 0 || !hlo_dtype_is_int(x->shape.dt))
    return false;
  *v = hlo_literal_get_i64(x->literal, 0);
  return true;
}

/* get-tuple-element(p, j) of computation c's parameter p: j, else -1. */
static int64_t wu_elem(const HComp *c, const HInstr *x) {
  if (x->op != OP_GET_TUPLE_ELEMENT || x->ops[0]->op != OP_PARAMETER || x->ops[0]->parent != c)
    return -1;
  return x->tuple_index;
}

/* The constant the loop's element k always holds: init sets it to a constant and the body
 * passes it through unchanged. */
static bool wu_invariant(const HInstr *init, const HComp *body, int64_t k, int64_t *v) {
  const HInstr *root = body->root;
  if (root->op != OP_TUPLE || k >= root->nops || wu_elem(body, root->ops[k]) != k) return false;
  return k < init->nops && wu_const(init->ops[k], v);
}

/* Binary instruction x, or a fusion of one whose operands are the fusion's parameters or
 * constants (what the fusion pass leaves of a loop's compare and increment): the instruction
 * carrying the opcode (and comparison direction), its operands in x's computation in ops. */
static const HInstr *wu_binary(const HInstr *x, const HInstr **ops) {
  const HInstr *r = x->op == OP_FUSION && x->ncalls == 1 ? x->calls[0]->root : x;
  if (r->nops != 2) return NULL;
  for (int j = 0; j < 2; j++) {
    const HInstr *o = r->ops[j];
    if (r == x || o->op == OP_CONSTANT)
      ops[j] = o;
    else if (o->op == OP_PARAMETER && o->param_num < x->nops)
      ops[j] = x->ops[o->param_num];
    else
      return NULL;
  }
  return r;
}

int64_t opt_while_trips(const HInstr *w, int64_t cap) {
  const HInstr *init = w->ops[0];
  const HComp *body = w->calls[0], *cond = w->calls[1]; /* HLO's order: body, condition */
  const HInstr *co[2], *br = body->root, *cr = wu_binary(cond->root, co);
  if (init->op != OP_TUPLE || br->op != OP_TUPLE || !cr || cr->op != OP_COMPARE ||
      co[0]->shape.rank != 0 || !hlo_dtype_is_int(co[0]->shape.dt))
    return -1;
  /* the induction element j: one side of the comparison, stepped by a constant in the body */
  for (int side = 0; side < 2; side++) {
    int64_t j = wu_elem(cond, co[side]);
    if (j < 0 || j >= br->nops || j >= init->nops) continue;
    const HInstr *no[2], *nx = wu_binary(br->ops[j], no);
    int64_t step, c0, bound;
    if (!nx || (nx->op != OP_ADD && nx->op != OP_SUBTRACT)) continue;
    int ci = wu_elem(body, no[0]) == j ? 1 : nx->op == OP_ADD && wu_elem(body, no[1]) == j ? 0 : -1;
    if (ci < 0 || !wu_const(no[ci], &step)) continue;
    if (nx->op == OP_SUBTRACT) step = -step;
    if (!wu_const(init->ops[j], &c0)) continue;
    const HInstr *other = co[1 - side];
    int64_t k = wu_elem(cond, other);
    if (!wu_const(other, &bound) && !(k >= 0 && k != j && wu_invariant(init, body, k, &bound)))
      continue;
    /* simulate: the comparison is (i dir bound) with i on the left, or (bound dir i) */
    int64_t i = c0, t = 0;
    DType dt = co[0]->shape.dt;
    while (side == 0 ? hlo_cmp_i64(cr->cmp_dir, dt, i, bound)
                     : hlo_cmp_i64(cr->cmp_dir, dt, bound, i)) {
      if (++t > cap) return -1;
      i += step;
    }
    return t;
  }
  return -1;
}

/* Elements computed by one run of computation c: a product's and a reduction's by their inputs'
 * multiply-adds, a dynamic-update-slice's by its update (done in place), calls and fusions by
 * their computations'; views and broadcasts cost nothing. Capped at INT64_MAX / 2. */
static int64_t wu_work(const HComp *c, int depth) {
  int64_t w = 0;
  for (int i = 0; i < c->ninstrs && depth < 16; i++) {
    const HInstr *x = c->instrs[i];
    int op = x->op;
    int64_t n = (int64_t)hlo_shape_elems(&x->shape);
    if (op == OP_PARAMETER || op == OP_GET_TUPLE_ELEMENT || op == OP_TUPLE || op == OP_CONSTANT ||
        op == OP_BROADCAST || op == OP_RESHAPE || op == OP_BITCAST) {
      n = 0;
    } else if (op == OP_DOT) {
      for (int d = 0; d < x->dot->lhs_contract.n; d++)
        n *= x->ops[0]->shape.dims[x->dot->lhs_contract.v[d]];
    } else if (op == OP_CONVOLUTION || op == OP_REDUCE || op == OP_REDUCE_WINDOW) {
      n = (int64_t)hlo_shape_elems(&x->ops[0]->shape) * (op == OP_CONVOLUTION ? 2 : 1);
    } else if (op == OP_DYNAMIC_UPDATE_SLICE) {
      n = (int64_t)hlo_shape_elems(&x->ops[1]->shape);
    } else if ((op == OP_CALL || op == OP_FUSION) && x->ncalls) {
      n = wu_work(x->calls[0], depth + 1);
    }
    w += n < 0 || n > INT64_MAX / 4 ? INT64_MAX / 4 : n;
    if (w > INT64_MAX / 2) return INT64_MAX / 2;
  }
  return w;
}

/* Whether computation c is elementwise work and data movement only (calls and fusions looked
 * into): unrolled trips of such a body fuse into few kernels. */
static bool wu_fusible(const HComp *c, int depth) {
  for (int i = 0; i < c->ninstrs; i++) {
    const HInstr *x = c->instrs[i];
    if (x->op == OP_CALL || x->op == OP_FUSION) {
      if (depth > 16 || x->ncalls != 1 || !wu_fusible(x->calls[0], depth + 1)) return false;
    } else if (x->op != OP_PARAMETER && x->op != OP_GET_TUPLE_ELEMENT && x->op != OP_TUPLE &&
               x->op != OP_CONSTANT && x->op != OP_DYNAMIC_UPDATE_SLICE && !opt_loop_fusible(x)) {
      return false;
    }
  }
  return true;
}

static HInstr *wu_rule(HComp *c, HInstr *w, PassCtx *pc, void *ctx) {
  (void)ctx;
  if (w->op != OP_WHILE || w->nops != 1 || w->ncalls != 2 || w->nctrl) return NULL;
  int64_t t = opt_while_trips(w, WU_MAX_TRIPS);
  if (t < 0) return NULL;
  HComp *body = w->calls[0];
  if ((int64_t)body->ninstrs * t > WU_MAX_INSTRS || !opt_comp_speculable(body, pc->scratch) ||
      !opt_comp_speculable(w->calls[1], pc->scratch)) {
    if (pc->log)
      fprintf(pc->log, "while %s kept: %lld trips of %d instructions, or side effects\n", w->name,
              (long long)t, body->ninstrs);
    return NULL;
  }
  int64_t work = wu_work(body, 0);
  bool fuse = pc->opts->unroll_fusible_loops && wu_fusible(body, 0);
  if (work > WU_SMALL_WORK && !fuse) {
    if (pc->log)
      fprintf(pc->log,
              "while %s kept as a loop: %lld trips of %lld elements (unrolled up to %d%s)\n",
              w->name, (long long)t, (long long)work, WU_SMALL_WORK,
              pc->opts->unroll_fusible_loops ? ", or elementwise trips" : "");
    return NULL;
  }
  HInstr *s = w->ops[0];
  for (int64_t i = 0; i < t; i++) {
    s = opt_new(c, OP_CALL, "call", &w->shape, 1, &s);
    hlo_instr_set_calls(s, 1, &body);
  }
  if (pc->log)
    fprintf(pc->log, "while %s: unrolled, %lld trips of %lld elements\n", w->name, (long long)t,
            (long long)work);
  return s;
}

bool opt_while_unroll(HModule *m, PassCtx *pc) {
  bool changed = false;
  int ncomps = m->ncomps;
  for (int i = 0; i < ncomps; i++)
    changed |= opt_rewrite_comp(m->comps[i], pc, wu_rule, NULL);
  return changed;
}
