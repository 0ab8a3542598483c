/* optimizer/dot_algorithm.c: dots of f32 operands computed as their algorithm says, on 16-bit
 * products.
 *
 * A dot's precision_config.algorithm (HLO text `algorithm=dot_bf16_bf16_f32_x3`, what JAX's
 * DotAlgorithmPreset exports) names the products it may be computed with; an f32 dot that names
 * none takes OptOpts.dot_algorithm (hloc --dot-algorithm) when it is large enough to gain
 * (free sizes and depth at least DA_MIN), whatever its operand precision (the option is the
 * later word, as XLA's xla_gpu_enable_bf16_3way_gemm is: JAX exports precision HIGHEST for
 * jax_default_matmul_precision='highest').
 *   dot_bf16_bf16_f32: the operands rounded to bf16, one product with f32 sums.
 *   dot_f16_f16_f32: the same in f16.
 *   dot_bf16_bf16_f32_x3: each operand split into a high part (its f32 bits truncated to bf16)
 *     and a low part (the rest, rounded to bf16); out = guard(hi_a lo_b + lo_a hi_b) + hi_a
 *     hi_b, the guard zeroing a NaN of the small products (an infinite operand makes its low
 *     part NaN), as XLA lowers it. The two small products are one dot on operands
 *     concatenated along the contracting dim ([hi_a, lo_a] . [lo_b; hi_b]).
 * The new dots have bf16 (f16) operands and an f32 result, which both targets run on their 16-bit
 * paths (tensor cores, AMX or AVX512-BF16); the splitting and concatenation fuse into the
 * operands' producers. Other algorithms (x6, x9, tf32, f32, f64) are computed at f32 or better,
 * which they allow. Runs after attention (whose products keep their own kernel), on every
 * computation but fusion bodies. */
#include "optimizer.h"

#include <math.h>
#include <string.h>

#define DA_MIN 64 /* the option's dots: free sizes and depth at least this */

static HInstr *da_unary(HComp *c, HOp op, DType dt, HInstr *x) {
  Shape s = hlo_shape_array(dt, x->shape.rank, x->shape.dims);
  return opt_new(c, op, hlo_op_name(op), &s, 1, &x);
}

static HInstr *da_binary(HComp *c, HOp op, HInstr *x, HInstr *y) {
  HInstr *ops[2] = {x, y};
  return opt_new(c, op, hlo_op_name(op), &x->shape, 2, ops);
}

/* x's f32 bits truncated to bf16 (the high part, exact in bf16), as f32. */
static HInstr *da_high(HComp *c, HInstr *x) {
  HInstr *bits = da_unary(c, OP_BITCAST_CONVERT, DT_U32, x);
  HInstr *mask = opt_broadcast_scalar(c, opt_const_scalar(c, DT_U32, 4294901760.0), &bits->shape);
  return da_unary(c, OP_BITCAST_CONVERT, DT_F32, da_binary(c, OP_AND, bits, mask));
}

/* concatenate(x, y) along dim d. */
static HInstr *da_concat(HComp *c, HInstr *x, HInstr *y, int d) {
  Shape s = x->shape;
  s.dims[d] *= 2;
  HInstr *ops[2] = {x, y};
  HInstr *cat = opt_new(c, OP_CONCATENATE, "concatenate", &s, 2, ops);
  cat->dims.n = 1;
  cat->dims.v[0] = d;
  return cat;
}

/* A copy of dot `in` on operands a and b (same dims numbers, f32 result). */
static HInstr *da_dot(HComp *c, const HInstr *in, HInstr *a, HInstr *b) {
  HInstr *ops[2] = {a, b};
  HInstr *d = hlo_instr_clone(c, in, ops);
  d->precision.n = 0;
  d->dot_alg = DALG_BF16_BF16_F32;
  return d;
}

static HInstr *da_x3(HComp *c, const HInstr *in) {
  HInstr *hi[2], *lo[2];
  for (int j = 0; j < 2; j++) {
    HInstr *x = in->ops[j], *h = da_high(c, x);
    hi[j] = da_unary(c, OP_CONVERT, DT_BF16, h);
    lo[j] = da_unary(c, OP_CONVERT, DT_BF16, da_binary(c, OP_SUBTRACT, x, h));
  }
  int ca = (int)in->dot->lhs_contract.v[0], cb = (int)in->dot->rhs_contract.v[0];
  HInstr *small = da_dot(c, in, da_concat(c, hi[0], lo[0], ca), da_concat(c, lo[1], hi[1], cb));
  Shape ps = hlo_shape_array(DT_PRED, in->shape.rank, in->shape.dims);
  HInstr *inf = opt_broadcast_scalar(c, opt_const_scalar(c, DT_F32, INFINITY), &in->shape);
  HInstr *ops[2] = {inf, da_unary(c, OP_ABS, DT_F32, small)};
  HInstr *ok = opt_new(c, OP_COMPARE, "compare", &ps, 2, ops);
  ok->cmp_dir = CMP_GE;
  HInstr *zero = opt_broadcast_scalar(c, opt_const_scalar(c, DT_F32, 0), &in->shape);
  HInstr *sel[3] = {ok, small, zero};
  HInstr *guarded = opt_new(c, OP_SELECT, "select", &in->shape, 3, sel);
  return da_binary(c, OP_ADD, guarded, da_dot(c, in, hi[0], hi[1]));
}

/* The dot on its operands rounded to dt. */
static HInstr *da_rounded(HComp *c, const HInstr *in, DType dt, DotAlg alg) {
  HInstr *d = da_dot(c, in, da_unary(c, OP_CONVERT, dt, in->ops[0]),
                     da_unary(c, OP_CONVERT, dt, in->ops[1]));
  d->dot_alg = alg;
  return d;
}

/* The algorithm dot `in` is rewritten for (DALG_UNSET: none). */
static DotAlg da_choice(const HInstr *in, const OptOpts *o) {
  if (in->op != OP_DOT || !in->dot || in->nops != 2 || in->nctrl) return DALG_UNSET;
  if (in->shape.dt != DT_F32 || in->ops[0]->shape.dt != DT_F32 || in->ops[1]->shape.dt != DT_F32)
    return DALG_UNSET;
  if (in->dot->lhs_contract.n == 0) return DALG_UNSET;
  DotAlg a = in->dot_alg;
  if (a == DALG_UNSET) {
    if (o->dot_algorithm == DALG_UNSET) return DALG_UNSET; /* (no option: not worth sizing) */
    const DotDims *dd = in->dot;
    const Shape *la = &in->ops[0]->shape, *lb = &in->ops[1]->shape;
    int64_t m = 1, n = 1, k = 1;
    for (int d = 0; d < la->rank; d++)
      if (opt_ilist_has(&dd->lhs_contract, d))
        k *= la->dims[d];
      else if (!opt_ilist_has(&dd->lhs_batch, d))
        m *= la->dims[d];
    for (int d = 0; d < lb->rank; d++)
      if (!opt_ilist_has(&dd->rhs_contract, d) && !opt_ilist_has(&dd->rhs_batch, d))
        n *= lb->dims[d];
    if (m < DA_MIN || n < DA_MIN || k < DA_MIN) return DALG_UNSET;
    a = o->dot_algorithm;
  }
  return a == DALG_BF16_BF16_F32 || a == DALG_BF16_BF16_F32_X3 || a == DALG_F16_F16_F32
             ? a
             : DALG_UNSET;
}

bool opt_dot_algorithm(HModule *m, PassCtx *pc) {
  bool changed = false;
  int nc = m->ncomps;
  for (int ci = 0; ci < nc; ci++) {
    HComp *c = m->comps[ci];
    if (c->is_fusion) continue;
    bool here = false;
    int n = c->ninstrs;
    for (int i = 0; i < n; i++) {
      HInstr *in = c->instrs[i];
      DotAlg a = da_choice(in, pc->opts);
      if (a == DALG_UNSET) continue;
      HInstr *r = a == DALG_BF16_BF16_F32_X3 ? da_x3(c, in)
                  : a == DALG_F16_F16_F32    ? da_rounded(c, in, DT_F16, a)
                                             : da_rounded(c, in, DT_BF16, a);
      if (pc->log)
        fprintf(pc->log, "dot-algorithm at %s: %s%s\n", in->name, hlo_dot_alg_name(a),
                in->dot_alg == DALG_UNSET ? " (--dot-algorithm)" : "");
      hlo_instr_replace_uses(in, r);
      here = true;
    }
    if (here) opt_comp_toposort(c, pc->scratch);
    changed |= here;
  }
  if (!changed) return false;
  opt_dce(m, pc);
  hlo_module_renumber(m);
  return true;
}
