/* optimizer/cond_select.c: the conditional-select pass, conditionals as straight-line code.
 *
 * The targets compile one straight sequence of kernels; an HLO `conditional` (JAX's lax.cond
 * and lax.switch) would need a run-time branch between kernel sequences. HLO is pure, so a
 * branch that has no side effects and always terminates can be evaluated whether or not it
 * is taken; this pass rewrites
 *     r = conditional(s, o_0, ..., o_{N-1}), branch_computations={B_0, ..., B_{N-1}}
 *  -> r_i = call(o_i), to_apply=B_i                (every branch; inline-call flattens them)
 *     r   = the value of the taken branch, chosen leaf by leaf (tuples through
 *           get-tuple-element and tuple) with selects:
 *             pred s:  select(broadcast(s), r_0, r_1)            (true runs branch 0)
 *             s32 s:   select(s == 0, r_0, select(s == 1, r_1, ... r_{N-1})), so that a
 *                      selector out of range takes the last branch, as in XLA
 * The cost is running every branch: right for the small branches lax.cond usually guards,
 * wasteful for a large branch rarely taken (the decision log, --dump-passes, names each
 * rewrite and its branch count). A conditional is left as it is, for the target to report,
 * when a branch (or a computation it calls) holds an instruction with side effects or device
 * semantics (OPF_SIDE), a custom-call, an rng or a while loop (which need not terminate when
 * its guard is false), or when its result holds a token. Runs before inline-call. */
#include "optimizer.h"

#include <string.h>

static bool cs_has_token(const Shape *s) {
  if (s->dt == DT_TOKEN) return true;
  if (s->dt == DT_TUPLE)
    for (int i = 0; i < s->ntuple; i++)
      if (cs_has_token(&s->tuple[i])) return true;
  return false;
}

/* The taken branch's value of shape s among the branch values r[0..n): a select chain per
 * array leaf. pick[i] (i < n - 1) is the pred scalar "branch i is taken". */
static HInstr *cs_choose(HComp *c, const Shape *s, HInstr **r, int n, HInstr **pick) {
  if (s->dt == DT_TUPLE) {
    HInstr **el = hlo_arena_alloc(c->mod->arena, sizeof(HInstr *) * (size_t)(s->ntuple + 1));
    HInstr **ri = hlo_arena_alloc(c->mod->arena, sizeof(HInstr *) * (size_t)n);
    for (int j = 0; j < s->ntuple; j++) {
      for (int i = 0; i < n; i++) {
        ri[i] = opt_new(c, OP_GET_TUPLE_ELEMENT, "get-tuple-element", &s->tuple[j], 1, &r[i]);
        ri[i]->tuple_index = j;
      }
      el[j] = cs_choose(c, &s->tuple[j], ri, n, pick);
    }
    return opt_new(c, OP_TUPLE, "tuple", s, s->ntuple, el);
  }
  HInstr *v = r[n - 1];
  for (int i = n - 2; i >= 0; i--) {
    HInstr *ops[3] = {opt_broadcast_scalar(c, pick[i], s), r[i], v};
    v = opt_new(c, OP_SELECT, "select", s, 3, ops);
  }
  return v;
}

/* pred scalar: a <dir> b on s32 scalars */
static HInstr *cs_cmp(HComp *c, HInstr *a, HInstr *b, CmpDir dir) {
  Shape ps = hlo_shape_scalar(DT_PRED);
  HInstr *ops[2] = {a, b};
  HInstr *x = opt_new(c, OP_COMPARE, "compare", &ps, 2, ops);
  x->cmp_dir = dir;
  return x;
}

static HInstr *cs_rule(HComp *c, HInstr *in, PassCtx *pc, void *ctx) {
  (void)ctx;
  if (in->op != OP_CONDITIONAL || in->nops < 2 || in->nops != in->ncalls + 1 || in->nctrl)
    return NULL;
  const HInstr *sel = in->ops[0];
  int n = in->ncalls;
  if (sel->shape.rank != 0 || (sel->shape.dt == DT_PRED ? n != 2 : sel->shape.dt != DT_S32))
    return NULL;
  if (cs_has_token(&in->shape)) return NULL;
  for (int i = 0; i < n; i++) {
    if (!opt_comp_speculable(in->calls[i], pc->scratch)) {
      if (pc->log)
        fprintf(pc->log, "conditional %s kept: branch %s has side effects, an rng or a loop\n",
                in->name, in->calls[i]->name);
      return NULL;
    }
  }
  HInstr **r = hlo_arena_alloc(c->mod->arena, sizeof(HInstr *) * (size_t)n);
  for (int i = 0; i < n; i++) {
    r[i] = opt_new(c, OP_CALL, "call", &in->shape, 1, &in->ops[1 + i]);
    hlo_instr_set_calls(r[i], 1, &in->calls[i]);
  }
  HInstr **pick = hlo_arena_alloc(c->mod->arena, sizeof(HInstr *) * (size_t)n);
  if (sel->shape.dt == DT_PRED) {
    pick[0] = in->ops[0];
  } else {
    /* a selector matching none of 0 .. N-2 (out of range included) ends the chain at the last
       branch, as XLA runs it */
    for (int i = 0; i < n - 1; i++)
      pick[i] = cs_cmp(c, in->ops[0], opt_const_scalar(c, DT_S32, i), CMP_EQ);
  }
  if (pc->log)
    fprintf(pc->log, "conditional %s: its %d branches run, the result selected\n", in->name, n);
  return cs_choose(c, &in->shape, r, n, pick);
}

bool opt_cond_select(HModule *m, PassCtx *pc) {
  bool changed = false;
  int ncomps = m->ncomps;
  for (int i = 0; i < ncomps; i++)
    changed |= opt_rewrite_comp(m->comps[i], pc, cs_rule, NULL);
  return changed;
}
