/* optimizer/constant_fold.c: constant folding with the reference interpreter.
 *
 * An instruction whose operands are all compile-time values (constants, iotas, and
 * broadcasts of constants) is evaluated once at compile time and replaced by a constant,
 * provided its result has at most OPT_FOLD_MAX_ELEMS elements; operands above
 * OPT_FOLD_MAX_INPUT elements are not evaluated (compile time). Broadcasts themselves are
 * never folded: a broadcast of a scalar stays a broadcast (the fusion pass makes it free),
 * and an elementwise op whose operands are all broadcasts of scalars folds to a broadcast of
 * the folded scalar, whatever its size. Instructions with side effects, random numbers,
 * custom calls, control flow and fusions are left alone, and so is anything the interpreter
 * declines to evaluate (the error is dropped: folding is only an optimisation).
 *
 * Evaluation builds a throwaway module holding copies of the operand subgraphs and of the
 * instruction (called computations are shared with the real module, read-only), runs
 * hlo_interp_comp on it in the pass's scratch arena and copies the literal into the module's
 * arena. One forward sweep per computation (opt_rewrite_comp): an instruction sees its
 * operands already folded. Requires nothing; replaced instructions are left for DCE. */
#include "optimizer.h"

#include <string.h>

enum {
  OPT_FOLD_MAX_ELEMS = 65536,   /* largest folded result */
  OPT_FOLD_MAX_INPUT = 1 << 22, /* largest operand evaluated */
};

/* A value known at compile time that evaluation may materialise. */
static bool is_static(const HInstr *in) {
  if (in->op == OP_CONSTANT) return in->literal != NULL;
  if (in->op == OP_IOTA) return true;
  if (in->op == OP_BROADCAST) return in->ops[0]->op == OP_CONSTANT && in->ops[0]->literal;
  return false;
}

static bool scalar_splat(const HInstr *in) {
  if (in->op == OP_CONSTANT) return in->shape.rank == 0 && in->literal;
  return in->op == OP_BROADCAST && in->ops[0]->op == OP_CONSTANT && in->ops[0]->shape.rank == 0 &&
         in->ops[0]->literal;
}

static bool foldable_op(HOp op) {
  /* ops that are not pure functions of their operands' values, or not worth folding */
  static const HOp never[] = {OP_PARAMETER,
                              OP_CONSTANT,
                              OP_IOTA,
                              OP_BROADCAST,
                              OP_RNG,
                              OP_RNG_BIT_GENERATOR,
                              OP_RNG_GET_AND_UPDATE_STATE,
                              OP_CUSTOM_CALL,
                              OP_WHILE,
                              OP_CONDITIONAL,
                              OP_CALL,
                              OP_FUSION,
                              OP_TUPLE,
                              OP_GET_TUPLE_ELEMENT,
                              OP_AFTER_ALL,
                              OP_ADD_DEPENDENCY,
                              OP_OPT_BARRIER,
                              OP_INFEED,
                              OP_OUTFEED,
                              OP_MAP,
                              OP_BITCAST,
                              OP_GET_DIMENSION_SIZE,
                              OP_SET_DIMENSION_SIZE,
                              OP_DYNAMIC_RESHAPE};
  if (hlo_op_flags(op) & OPF_SIDE) return false;
  for (size_t i = 0; i < sizeof never / sizeof *never; i++)
    if (never[i] == op) return false;
  return true;
}

/* Copy a static operand into the throwaway computation tc. */
static HInstr *materialise(HComp *tc, HInstr *src, bool scalar) {
  if (src->op == OP_BROADCAST && scalar) src = src->ops[0];
  if (src->op == OP_CONSTANT) {
    HInstr *k = hlo_instr_new(tc, OP_CONSTANT, "k", &src->literal->shape, 0, NULL);
    k->literal = src->literal;
    return k;
  }
  if (src->op == OP_IOTA) return hlo_instr_clone(tc, src, NULL);
  /* broadcast of a constant */
  HInstr *k = materialise(tc, src->ops[0], false);
  return hlo_instr_clone(tc, src, &k);
}

/* Evaluate in on its static operands; scalar: evaluate one element (all operands splats). */
static Literal *evaluate(HInstr *in, bool scalar, PassCtx *pc) {
  HModule *tm = hlo_module_new("constant_fold", NULL);
  HComp *tc = hlo_comp_new(tm, "fold");
  tm->entry = tc;
  HInstr **ops = hlo_arena_alloc(pc->scratch, sizeof(HInstr *) * (size_t)(in->nops + 1));
  for (int k = 0; k < in->nops; k++)
    ops[k] = materialise(tc, in->ops[k], scalar);
  HInstr *x = hlo_instr_clone(tc, in, ops);
  if (scalar) x->shape = hlo_shape_scalar(in->shape.dt);
  tc->root = x;
  hlo_comp_renumber(tc);
  HErr e = {0};
  Literal *r = hlo_interp_comp(tc, pc->scratch, NULL, 0, &e);
  hlo_module_free(tm);
  if (!r || !hlo_shape_is_array(&r->shape)) return NULL;
  return r;
}

/* The rewrite rule (opt_rewrite_comp): a constant (or broadcast of one) for in, or NULL. */
static HInstr *fold(HComp *c, HInstr *in, PassCtx *pc, void *ctx) {
  (void)ctx;
  if (!foldable_op(in->op) || in->nops == 0 || in->nctrl || !hlo_shape_is_array(&in->shape))
    return NULL;
  bool splats = (hlo_op_flags(in->op) & OPF_ELEM) != 0;
  for (int k = 0; k < in->nops; k++) {
    HInstr *o = in->ops[k];
    if (!is_static(o)) return NULL;
    splats &= scalar_splat(o);
  }
  HModule *m = c->mod;
  if (splats) {
    Literal *r = evaluate(in, true, pc);
    if (!r) return NULL;
    HInstr *k = opt_new(c, OP_CONSTANT, "constant", &r->shape, 0, NULL);
    k->literal = hlo_literal_clone(m->arena, r);
    return opt_broadcast_scalar(c, k, &in->shape);
  }
  if (hlo_shape_elems(&in->shape) > OPT_FOLD_MAX_ELEMS) return NULL;
  for (int k = 0; k < in->nops; k++)
    if (hlo_shape_elems(&in->ops[k]->shape) > OPT_FOLD_MAX_INPUT) return NULL;
  Literal *r = evaluate(in, false, pc);
  if (!r || !hlo_shape_eq(&r->shape, &in->shape)) return NULL;
  HInstr *k = opt_new(c, OP_CONSTANT, "constant", &in->shape, 0, NULL);
  k->literal = hlo_literal_clone(m->arena, r);
  hlo_shape_copy(m->arena, &k->literal->shape, &in->shape);
  return k;
}

bool opt_constant_fold(HModule *m, PassCtx *pc) {
  bool changed = false;
  for (int ci = 0; ci < m->ncomps; ci++)
    changed |= opt_rewrite_comp(m->comps[ci], pc, fold, NULL);
  return changed;
}
