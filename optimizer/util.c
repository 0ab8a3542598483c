/* optimizer/util.c: small helpers shared by the optimizer passes.
 *
 * Passes rewrite a computation by appending new instructions and redirecting operands, which
 * leaves the instruction array out of dependency order; opt_comp_toposort restores it with
 * hlo_comp_postorder (an iterative depth-first post-order) started in array order, which
 * keeps the existing order wherever it is already valid (so dumps stay readable and diffs
 * small). opt_module_sort_comps does the same for the module's computation list (callees
 * before callers) after passes create computations.
 *
 * opt_rewrite_comp is the driver of the passes made of local rewrites (algsimp, CSE, constant
 * folding, transpose-sink, conv-layout): one forward sweep in which every instruction first
 * has its operands redirected to the replacements chosen so far, recorded in the aux slot of
 * the replaced instruction (a replacement may itself be replaced later, so aux forms chains
 * that are followed to their end), then is offered to the pass's rule. Redirecting at the
 * reader instead of rewriting every user at once keeps the sweep linear; a rule sees final
 * operands, so a chain of rewrites settles in one sweep.
 *
 * The remaining helpers recognise values that several passes reason about: scalar constants
 * seen through broadcasts and reshapes, bitcast-like reshapes, and element counts. */
#include "optimizer.h"

#include <complex.h>
#include <string.h>

void opt_comp_toposort(HComp *c, HArena *scratch) {
  int n = c->ninstrs;
  if (n == 0) return;
  HInstr **order = hlo_arena_alloc(scratch, sizeof(HInstr *) * (size_t)n);
  hlo_comp_postorder(c, scratch, NULL, NULL, order);
  memcpy(c->instrs, order, sizeof(HInstr *) * (size_t)n);
  hlo_comp_renumber(c);
}

static HInstr *rw_resolve(HInstr *x) {
  while (x->aux)
    x = x->aux;
  return x;
}

bool opt_rewrite_comp(HComp *c, PassCtx *pc, OptRewriteFn fn, void *ctx) {
  int n = c->ninstrs;
  /* fn appends to c->instrs (which may move): sweep a copy of the instructions as they are */
  HInstr **old = hlo_arena_memdup(pc->scratch, c->instrs, sizeof(HInstr *) * (size_t)(n ? n : 1));
  for (int i = 0; i < n; i++)
    old[i]->aux = NULL;
  bool changed = false;
  for (int i = 0; i < n; i++) {
    HInstr *in = old[i];
    for (int k = 0; k < in->nops; k++)
      in->ops[k] = rw_resolve(in->ops[k]);
    for (int k = 0; k < in->nctrl; k++)
      in->ctrl[k] = rw_resolve(in->ctrl[k]);
    HInstr *r = fn(c, in, pc, ctx);
    if (!r || r == in) continue;
    in->aux = r;
    changed = true;
  }
  if (c->root) c->root = rw_resolve(c->root);
  for (int i = 0; i < c->ninstrs; i++)
    c->instrs[i]->aux = NULL;
  if (changed || c->ninstrs != n) opt_comp_toposort(c, pc->scratch);
  return changed;
}

static void comp_visit(HComp *c, uint8_t *state, HComp **order, int *norder) {
  if (state[c->idx]) return;
  state[c->idx] = 1;
  for (int i = 0; i < c->ninstrs; i++)
    for (int k = 0; k < c->instrs[i]->ncalls; k++)
      comp_visit(c->instrs[i]->calls[k], state, order, norder);
  order[(*norder)++] = c;
}

void opt_module_sort_comps(HModule *m, HArena *scratch) {
  int n = m->ncomps;
  for (int i = 0; i < n; i++)
    m->comps[i]->idx = i;
  uint8_t *state = hlo_arena_alloc(scratch, (size_t)n + 1);
  HComp **order = hlo_arena_alloc(scratch, sizeof(HComp *) * (size_t)(n + 1));
  int norder = 0;
  for (int i = 0; i < n; i++)
    comp_visit(m->comps[i], state, order, &norder);
  HLO_ASSERT(norder == n);
  memcpy(m->comps, order, sizeof(HComp *) * (size_t)n);
  for (int i = 0; i < n; i++)
    m->comps[i]->idx = i;
}

HInstr *opt_new(HComp *c, HOp op, const char *base, const Shape *s, int nops, HInstr *const *ops) {
  return hlo_instr_new(c, op, hlo_module_unique_name(c->mod, base), s, nops, ops);
}

HInstr *opt_const_scalar(HComp *c, DType dt, double v) {
  Shape s = hlo_shape_scalar(dt);
  HInstr *k = opt_new(c, OP_CONSTANT, "constant", &s, 0, NULL);
  k->literal = hlo_literal_new(c->mod->arena, &s);
  hlo_literal_set_f64(k->literal, 0, v);
  return k;
}

HInstr *opt_broadcast_scalar(HComp *c, HInstr *scalar, const Shape *s) {
  if (s->rank == 0) return scalar;
  Shape bs = *s;
  bs.dt = scalar->shape.dt;
  HInstr *b = opt_new(c, OP_BROADCAST, "broadcast", &bs, 1, &scalar);
  b->dims.n = 0;
  return b;
}

bool opt_uniform_value(const HInstr *in, double *v) {
  for (;;) {
    if (in->op == OP_BROADCAST || in->op == OP_RESHAPE || in->op == OP_BITCAST ||
        in->op == OP_TRANSPOSE || in->op == OP_COPY) {
      if (in->nops != 1 || in->ops[0]->shape.dt != in->shape.dt) return false;
      in = in->ops[0];
      continue;
    }
    break;
  }
  if (in->op != OP_CONSTANT || !in->literal || !hlo_shape_is_array(&in->shape)) return false;
  const Literal *l = in->literal;
  int64_t n = hlo_shape_elems(&l->shape);
  if (n == 0) return false;
  size_t es = hlo_dtype_size(l->shape.dt);
  const uint8_t *d = l->data;
  for (int64_t i = 1; i < n; i++)
    if (memcmp(d, d + (size_t)i * es, es)) return false;
  /* a complex value is a real one only when its imaginary part is zero */
  if (hlo_dtype_is_complex(l->shape.dt) && cimag(hlo_load_c128(l->shape.dt, l->data, 0)) != 0)
    return false;
  *v = hlo_literal_get_f64(l, 0);
  return true;
}

bool opt_uniform_is(const HInstr *in, double want) {
  double v;
  if (!opt_uniform_value(in, &v)) return false;
  if (hlo_dtype_is_int(in->shape.dt) || in->shape.dt == DT_PRED) {
    int64_t iv;
    const HInstr *k = in;
    while (k->op != OP_CONSTANT)
      k = k->ops[0];
    iv = hlo_literal_get_i64(k->literal, 0);
    return (double)iv == want;
  }
  return v == want;
}

bool opt_ilist_has(const IList *l, int64_t v) {
  for (int i = 0; i < l->n; i++)
    if (l->v[i] == v) return true;
  return false;
}

bool opt_is_bitcast_reshape(const HInstr *in) {
  if (in->op == OP_BITCAST) return true;
  if (in->op != OP_RESHAPE || in->nops != 1) return false;
  return hlo_layout_is_default(&in->shape) && hlo_layout_is_default(&in->ops[0]->shape);
}

static bool sp_visit(const HComp *c, uint8_t *seen, int depth) {
  if (seen[c->idx]) return true;
  if (depth > 64) return false;
  seen[c->idx] = 1;
  for (int i = 0; i < c->ninstrs; i++) {
    const HInstr *in = c->instrs[i];
    if ((hlo_op_flags(in->op) & OPF_SIDE) || in->op == OP_CUSTOM_CALL || in->op == OP_WHILE ||
        in->op == OP_RNG)
      return false;
    for (int k = 0; k < in->ncalls; k++)
      if (!sp_visit(in->calls[k], seen, depth + 1)) return false;
  }
  return true;
}

bool opt_comp_speculable(const HComp *c, HArena *scratch) {
  HModule *m = c->mod;
  for (int i = 0; i < m->ncomps; i++)
    m->comps[i]->idx = i;
  uint8_t *seen = hlo_arena_alloc(scratch, (size_t)m->ncomps + 1);
  memset(seen, 0, (size_t)m->ncomps + 1);
  return sp_visit(c, seen, 0);
}

HInstr *opt_new_param(HComp *c, const Shape *s, int num) {
  char base[32];
  snprintf(base, sizeof base, "param_%d", num);
  HInstr *p = opt_new(c, OP_PARAMETER, base, s, 0, NULL);
  p->param_num = num;
  return p;
}

bool opt_is_row_broadcast(const HInstr *b, const HInstr *r) {
  if (!b || b->op != OP_BROADCAST || b->ops[0] != r || r->op != OP_REDUCE || r->nops < 1)
    return false;
  const Shape *os = &r->ops[0]->shape;
  if (!hlo_shape_same_dims(&b->shape, os) || b->dims.n != r->shape.rank) return false;
  for (int d = 0, j = 0; d < os->rank; d++) /* the kept dims, in order */
    if (!opt_ilist_has(&r->dims, d) && (j >= b->dims.n || b->dims.v[j++] != d)) return false;
  return true;
}

bool opt_loop_fusible(const HInstr *in) {
  if (!hlo_shape_is_array(&in->shape) || in->nctrl) return false;
  unsigned fl = hlo_op_flags(in->op);
  if (fl & OPF_SIDE) return false;
  if (in->op == OP_CONSTANT) return in->shape.rank == 0 && in->literal;
  if ((fl & OPF_ELEM) && in->op != OP_MAP && in->op != OP_COMPLEX &&
      in->op != OP_STOCHASTIC_CONVERT)
    return true;
  static const HOp moves[] = {OP_BROADCAST,    OP_RESHAPE,       OP_BITCAST, OP_TRANSPOSE,
                              OP_SLICE,        OP_CONCATENATE,   OP_PAD,     OP_REVERSE,
                              OP_IOTA,         OP_DYNAMIC_SLICE, OP_GATHER,  OP_BITCAST_CONVERT,
                              OP_REDUCE_WINDOW};
  for (size_t i = 0; i < sizeof moves / sizeof *moves; i++)
    if (moves[i] == in->op) return true;
  return false;
}

bool opt_conv_depthwise(const HInstr *in) {
  if (in->op != OP_CONVOLUTION || !in->conv || in->nops != 2 || in->feature_groups <= 1 ||
      in->batch_groups != 1)
    return false;
  const Shape *k = &in->ops[1]->shape;
  return in->conv->k_in < k->rank && k->dims[in->conv->k_in] == 1;
}
