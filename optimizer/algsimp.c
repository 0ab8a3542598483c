/* optimizer/algsimp.c: algebraic simplification.
 *
 * Local rewrites that keep the module's values exactly (up to the sign of a zero for x+0 on
 * floats, as XLA's AlgebraicSimplifier): arithmetic identities (x+0, x-0, x*1, x/1, integer
 * x*0, double negation/not, min/max/and/or of a value with itself or with the identity
 * element, integer self-comparisons, unsigned comparisons against 0), data-movement
 * identities (sharding and placement custom-calls, which return their operand on one
 * device; reshape to the same dims, reshape of reshape, broadcast of broadcast, broadcast
 * through a reshape that only adds or drops size-1 dimensions, transpose of transpose,
 * identity transposes, full slices, empty pads, single-operand concatenates, converts to the
 * same type, copies), tuple plumbing (get-tuple-element of tuple) and selects with a constant
 * or redundant choice. Broadcasts of scalars are kept as broadcasts: reshapes and transposes
 * of them become one broadcast of the scalar.
 *
 * Algorithm: one forward sweep per computation (opt_rewrite_comp). Each instruction first has
 * its operands redirected to their replacements (kept in the instruction's aux slot), then
 * the rules are tried; a rule yields an existing instruction or a new one appended to the
 * computation. Replaced instructions stay in place unused (DCE removes them); the
 * computation is put back into dependency order at the end. New instructions may enable
 * further rewrites, which the pipeline's fixed-point loop picks up. Instructions with control
 * dependencies are left alone. Requires nothing; invalidates users lists. */
#include "optimizer.h"

#include <math.h>
#include <string.h>

static bool is_int(DType t) { return hlo_dtype_is_int(t); }

/* Smallest / largest value of an integer type, as double (exact for up to 53 bits, which
 * is all the comparisons below need: values are read back as int64 for the check). */
static bool int_limit(DType t, bool max, int64_t *out) {
  size_t bits = (size_t)hlo_dtype_bits(t);
  if (hlo_dtype_kind(t) == DK_SINT) {
    if (bits >= 64)
      *out = max ? INT64_MAX : INT64_MIN;
    else
      *out = max ? (int64_t)((1ull << (bits - 1)) - 1) : -(int64_t)(1ull << (bits - 1));
    return true;
  }
  if (hlo_dtype_kind(t) == DK_UINT) {
    if (!max) {
      *out = 0;
      return true;
    }
    if (bits >= 64) return false; /* does not fit int64 */
    *out = (int64_t)((1ull << bits) - 1);
    return true;
  }
  return false;
}

static const HInstr *const_of(const HInstr *in) {
  while (in->op != OP_CONSTANT)
    in = in->ops[0];
  return in;
}

/* in is a uniform constant equal to the identity of max (want_max=false: of min). */
static bool is_extreme(const HInstr *in, bool want_max) {
  double v;
  if (!opt_uniform_value(in, &v)) return false;
  DType t = in->shape.dt;
  if (hlo_dtype_is_float(t)) return want_max ? v == INFINITY : v == -INFINITY;
  int64_t lim;
  if (!int_limit(t, want_max, &lim)) return false;
  return hlo_literal_get_i64(const_of(in)->literal, 0) == lim;
}

/* A constant of in's shape holding v everywhere: broadcast(scalar constant). */
static HInstr *splat(HComp *c, const HInstr *like, double v) {
  HInstr *k = opt_const_scalar(c, like->shape.dt, v);
  return opt_broadcast_scalar(c, k, &like->shape);
}

/* y = reshape(x) only inserts or removes size-1 dimensions and x has none: map[i] is the
 * dimension of y holding x's dimension i. */
static bool degenerate_map(const Shape *x, const Shape *y, int64_t *map) {
  int j = 0;
  for (int i = 0; i < x->rank; i++) {
    if (x->dims[i] == 1) return false;
    while (j < y->rank && y->dims[j] == 1)
      j++;
    if (j >= y->rank || y->dims[j] != x->dims[i]) return false;
    map[i] = j++;
  }
  while (j < y->rank && y->dims[j] == 1)
    j++;
  return j == y->rank;
}

static HInstr *new_broadcast(HComp *c, HInstr *x, const Shape *s, int n, const int64_t *dims) {
  Shape bs = *s;
  HInstr *b = opt_new(c, OP_BROADCAST, "broadcast", &bs, 1, &x);
  b->dims.n = n;
  for (int i = 0; i < n; i++)
    b->dims.v[i] = dims[i];
  return b;
}

static bool is_scalar_broadcast(const HInstr *in) {
  return in->op == OP_BROADCAST && in->ops[0]->shape.rank == 0;
}

/* The replacement for in, or NULL. Operands are already final. */
static HInstr *simplify(HComp *c, HInstr *in) {
  HInstr *a = in->nops > 0 ? in->ops[0] : NULL;
  HInstr *b = in->nops > 1 ? in->ops[1] : NULL;
  DType t = in->shape.dt;
  switch (in->op) {
  case OP_ADD:
    if (opt_uniform_is(b, 0)) return a;
    if (opt_uniform_is(a, 0)) return b;
    return NULL;
  case OP_SUBTRACT: return opt_uniform_is(b, 0) ? a : NULL;
  case OP_MULTIPLY:
    if (opt_uniform_is(b, 1)) return a;
    if (opt_uniform_is(a, 1)) return b;
    /* x*0 = 0 only for integers: for floats NaN*0 and inf*0 are NaN */
    if (is_int(t) && opt_uniform_is(b, 0)) return b;
    if (is_int(t) && opt_uniform_is(a, 0)) return a;
    return NULL;
  case OP_DIVIDE: return opt_uniform_is(b, 1) ? a : NULL;
  case OP_NEGATE: return a->op == OP_NEGATE ? a->ops[0] : NULL;
  case OP_NOT: return a->op == OP_NOT ? a->ops[0] : NULL;
  case OP_MAXIMUM:
    if (a == b) return a;
    if (is_extreme(b, false)) return a; /* max(x, -inf) = x, NaN included */
    if (is_extreme(a, false)) return b;
    return NULL;
  case OP_MINIMUM:
    if (a == b) return a;
    if (is_extreme(b, true)) return a;
    if (is_extreme(a, true)) return b;
    return NULL;
  case OP_AND:
    if (a == b) return a;
    if (t == DT_PRED && opt_uniform_is(b, 1)) return a;
    if (t == DT_PRED && opt_uniform_is(a, 1)) return b;
    return NULL;
  case OP_OR:
    if (a == b) return a;
    if (t == DT_PRED && opt_uniform_is(b, 0)) return a;
    if (t == DT_PRED && opt_uniform_is(a, 0)) return b;
    return NULL;
  case OP_SELECT: {
    if (in->ops[1] == in->ops[2]) return in->ops[1];
    double v;
    if (hlo_shape_same_dims(&in->ops[1]->shape, &in->shape) && opt_uniform_value(a, &v))
      return v != 0 ? in->ops[1] : in->ops[2];
    return NULL;
  }
  case OP_COMPARE: {
    DType ot = a->shape.dt;
    if (a == b && (is_int(ot) || ot == DT_PRED)) {
      bool r = in->cmp_dir == CMP_EQ || in->cmp_dir == CMP_GE || in->cmp_dir == CMP_LE;
      return splat(c, in, r);
    }
    if (hlo_dtype_kind(ot) == DK_UINT && in->cmp_type != CMPT_SIGNED && opt_uniform_is(b, 0)) {
      if (in->cmp_dir == CMP_GE) return splat(c, in, 1);
      if (in->cmp_dir == CMP_LT) return splat(c, in, 0);
    }
    if (ot == DT_PRED && ((in->cmp_dir == CMP_EQ && opt_uniform_is(b, 1)) ||
                          (in->cmp_dir == CMP_NE && opt_uniform_is(b, 0))))
      return a;
    return NULL;
  }
  case OP_CONVERT: return a->shape.dt == t ? a : NULL;
  case OP_COPY: return a;
  case OP_RESHAPE:
    if (hlo_shape_same_dims(&a->shape, &in->shape)) return a;
    if (a->op == OP_RESHAPE) {
      HInstr *x = a->ops[0];
      if (hlo_shape_same_dims(&x->shape, &in->shape)) return x;
      return opt_new(c, OP_RESHAPE, "reshape", &in->shape, 1, &x);
    }
    if (is_scalar_broadcast(a)) return new_broadcast(c, a->ops[0], &in->shape, 0, NULL);
    return NULL;
  case OP_BROADCAST: {
    if (hlo_shape_same_dims(&a->shape, &in->shape)) {
      bool ident = in->dims.n == a->shape.rank;
      for (int i = 0; ident && i < in->dims.n; i++)
        ident = in->dims.v[i] == i;
      if (ident) return a;
    }
    if (a->op == OP_BROADCAST) {
      int64_t d[HLO_MAX_RANK];
      for (int i = 0; i < a->dims.n; i++)
        d[i] = in->dims.v[a->dims.v[i]];
      return new_broadcast(c, a->ops[0], &in->shape, a->dims.n, d);
    }
    if (a->op == OP_RESHAPE) {
      HInstr *x = a->ops[0];
      int64_t map[HLO_MAX_RANK], d[HLO_MAX_RANK];
      if (!degenerate_map(&x->shape, &a->shape, map)) return NULL;
      for (int i = 0; i < x->shape.rank; i++)
        d[i] = in->dims.v[map[i]];
      return new_broadcast(c, x, &in->shape, x->shape.rank, d);
    }
    return NULL;
  }
  case OP_TRANSPOSE: {
    bool ident = true;
    for (int i = 0; i < in->dims.n; i++)
      ident &= in->dims.v[i] == i;
    if (ident) return a;
    if (is_scalar_broadcast(a)) return new_broadcast(c, a->ops[0], &in->shape, 0, NULL);
    if (a->op == OP_TRANSPOSE) {
      HInstr *x = a->ops[0];
      int64_t p[HLO_MAX_RANK];
      bool id2 = true;
      for (int i = 0; i < in->dims.n; i++) {
        p[i] = a->dims.v[in->dims.v[i]];
        id2 &= p[i] == i;
      }
      if (id2) return x;
      HInstr *r = opt_new(c, OP_TRANSPOSE, "transpose", &in->shape, 1, &x);
      r->dims.n = in->dims.n;
      memcpy(r->dims.v, p, sizeof(int64_t) * (size_t)in->dims.n);
      return r;
    }
    return NULL;
  }
  case OP_SLICE: {
    if (!in->slice || !hlo_shape_same_dims(&a->shape, &in->shape)) return NULL;
    for (int i = 0; i < in->slice->n; i++)
      if (in->slice->start[i] != 0 || in->slice->stride[i] != 1) return NULL;
    return a;
  }
  case OP_PAD: {
    if (!in->pad || !hlo_shape_same_dims(&a->shape, &in->shape)) return NULL;
    for (int i = 0; i < in->pad->n; i++)
      if (in->pad->lo[i] || in->pad->hi[i] || in->pad->interior[i]) return NULL;
    return a;
  }
  case OP_CONCATENATE: return in->nops == 1 ? a : NULL;
  case OP_REVERSE: {
    for (int i = 0; i < in->dims.n; i++)
      if (a->shape.dims[in->dims.v[i]] != 1) return NULL;
    return a;
  }
  case OP_GET_TUPLE_ELEMENT:
    if (a->op == OP_TUPLE && in->tuple_index >= 0 && in->tuple_index < a->nops)
      return a->ops[in->tuple_index];
    return NULL;
  case OP_PARAMETER:
  case OP_CONSTANT:
  case OP_IOTA:
  case OP_PARTITION_ID:
  case OP_REPLICA_ID:
  case OP_RNG_GET_AND_UPDATE_STATE:
  case OP_ABS:
  case OP_CBRT:
  case OP_CEIL:
  case OP_COSINE:
  case OP_CLZ:
  case OP_ERF:
  case OP_EXP:
  case OP_EXPM1:
  case OP_FLOOR:
  case OP_IMAG:
  case OP_IS_FINITE:
  case OP_LOG:
  case OP_LOG1P:
  case OP_LOGISTIC:
  case OP_POPCNT:
  case OP_REAL:
  case OP_ROUND_AFZ:
  case OP_ROUND_EVEN:
  case OP_RSQRT:
  case OP_SIGN:
  case OP_SINE:
  case OP_SQRT:
  case OP_TAN:
  case OP_TANH:
  case OP_ACOS:
  case OP_ACOSH:
  case OP_ASIN:
  case OP_ASINH:
  case OP_ATAN:
  case OP_ATANH:
  case OP_COSH:
  case OP_SINH:
  case OP_BITCAST_CONVERT:
  case OP_REDUCE_PRECISION:
  case OP_REMAINDER:
  case OP_POWER:
  case OP_ATAN2:
  case OP_MULHI:
  case OP_XOR:
  case OP_SHL:
  case OP_SHR_ARITH:
  case OP_SHR_LOGICAL:
  case OP_COMPLEX:
  case OP_STOCHASTIC_CONVERT:
  case OP_CLAMP:
  case OP_MAP:
  case OP_REDUCE:
  case OP_REDUCE_WINDOW:
  case OP_SELECT_AND_SCATTER:
  case OP_SORT:
  case OP_TOPK:
  case OP_BATCH_NORM_TRAINING:
  case OP_BATCH_NORM_INFERENCE:
  case OP_BATCH_NORM_GRAD:
  case OP_SCAN:
  case OP_DOT:
  case OP_CONVOLUTION:
  case OP_FFT:
  case OP_CHOLESKY:
  case OP_TRIANGULAR_SOLVE:
  case OP_RAGGED_DOT:
  case OP_SCALED_DOT:
  case OP_BITCAST:
  case OP_DYNAMIC_SLICE:
  case OP_DYNAMIC_UPDATE_SLICE:
  case OP_GATHER:
  case OP_SCATTER:
  case OP_TUPLE:
  case OP_COPY_START:
  case OP_COPY_DONE:
  case OP_SHUFFLE:
  case OP_GET_DIMENSION_SIZE:
  case OP_SET_DIMENSION_SIZE:
  case OP_DYNAMIC_RESHAPE:
  case OP_CALL:
  case OP_CONDITIONAL:
  case OP_WHILE:
  case OP_FUSION:
  case OP_ASYNC_START:
  case OP_ASYNC_UPDATE:
  case OP_ASYNC_DONE:
  case OP_OPT_BARRIER:
  case OP_ADD_DEPENDENCY:
  case OP_AFTER_ALL:
  case OP_DOMAIN:
  case OP_ALL_REDUCE:
  case OP_ALL_REDUCE_START:
  case OP_ALL_REDUCE_DONE:
  case OP_ALL_GATHER:
  case OP_ALL_GATHER_START:
  case OP_ALL_GATHER_DONE:
  case OP_ALL_TO_ALL:
  case OP_REDUCE_SCATTER:
  case OP_COLLECTIVE_PERMUTE:
  case OP_COLLECTIVE_PERMUTE_START:
  case OP_COLLECTIVE_PERMUTE_DONE:
  case OP_COLLECTIVE_BROADCAST:
  case OP_RAGGED_ALL_TO_ALL:
  case OP_COLLECTIVE_REDUCE:
  case OP_SEND:
  case OP_SEND_DONE:
  case OP_RECV:
  case OP_RECV_DONE:
  case OP_INFEED:
  case OP_OUTFEED:
  case OP_RNG:
  case OP_RNG_BIT_GENERATOR: return NULL;
  case OP_CUSTOM_CALL: return hlo_custom_call_is_identity(in) ? in->ops[0] : NULL;
  case OP_COUNT: return NULL;
  }
  return NULL;
}

/* The rewrite rule: instructions with control dependencies and non-array values (but
 * get-tuple-element) are kept, and so is anything a rule would give another logical shape
 * (the rules guarantee it does not happen; stay safe). */
static HInstr *simplify_rule(HComp *c, HInstr *in, PassCtx *pc, void *ctx) {
  (void)pc, (void)ctx;
  if (in->nctrl || (!hlo_shape_is_array(&in->shape) && in->op != OP_GET_TUPLE_ELEMENT)) return NULL;
  HInstr *r = simplify(c, in);
  return r && hlo_shape_eq(&r->shape, &in->shape) ? r : NULL;
}

bool opt_algsimp(HModule *m, PassCtx *pc) {
  bool changed = false;
  for (int i = 0; i < m->ncomps; i++)
    changed |= opt_rewrite_comp(m->comps[i], pc, simplify_rule, NULL);
  return changed;
}
