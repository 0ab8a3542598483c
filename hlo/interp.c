/* hlo/interp.c: the reference interpreter, the oracle every compiled output is checked against.
 *
 * What it does: evaluates a computation instruction by instruction, in the order the
 * computation lists them (operands first), keeping one Literal value per instruction. Values
 * are immutable once produced, so data-movement ops that do not reorder elements (reshape,
 * bitcast, copy, get-tuple-element, tuple, opt-barrier) share their operand's data instead of
 * copying it. Semantics follow XLA's CPU backend (elemental IR emitter): integer division by
 * zero gives -1 and x % 0 gives x, INT_MIN / -1 = INT_MIN, shifts by an out-of-range amount
 * give 0 (or the sign fill for arithmetic right shifts), float maximum/minimum propagate NaN,
 * float->int conversion saturates with NaN -> 0, conditional indices out of range pick the last
 * branch.
 *
 * Algorithms: elementwise ops run one loop per instruction, with a fast path for f32 that
 * computes in double and rounds once; every other dtype goes through hlo_load_* /
 * hlo_store_*. Broadcast, transpose, reverse and slice are all one strided gather
 * (strided_copy). reduce with a reducer that is a single binary op (interp_binop_of)
 * accumulates in double (floats) or int64 (integers); any other reducer, sort comparators and
 * map bodies are evaluated per element in a scratch arena that is recycled, so memory stays
 * bounded however many elements there are. dot packs both operands into double (or int64)
 * matrices [batch][M][K] and [batch][K][N] and multiplies in i-k-j order (accumulating in
 * f32 when an operand or the result is fp8; fp8 values are otherwise computed through double
 * like bf16's, rounded once per instruction by hlo_store_f64). while loops
 * evaluate each iteration in a fresh arena and free the previous one once the new loop
 * state has been copied out.
 *
 * Memory: results and intermediates live in the arena passed by the caller (IState.arena
 * may be switched temporarily to a scratch or per-iteration arena); nothing is freed
 * individually.
 *
 * Requires: a module whose instruction shapes are consistent (the verifier's job); the
 * interpreter still checks everything it indexes with, so a malformed module gives a located
 * error, never a crash. The window/indexing ops live in interp_window.c, complex numbers and
 * fft in interp_complex.c (interp_impl.h): the elementwise, convert and dot functions here
 * hand complex operands to it, and data movement moves elements of any size as bytes. */
#include "interp_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Scratch arenas used for per-element calls are recycled once they hold this much: small
 * enough that the arena's first chunk (64 KiB) is reused from the malloc heap, no page faults. */
#define INTERP_SCRATCH_LIMIT ((size_t)48 << 10)
/* Nesting limit for called computations (a malformed module could call itself). */
#define INTERP_MAX_DEPTH 200

struct IState {
  HArena *arena;   /* where new values go now: the caller's arena, or a temporary one */
  HArena *scratch; /* arena for per-element calls (reducers, comparators), recycled */
  bool in_scratch; /* currently evaluating a per-element call inside scratch */
  int depth;       /* computation nesting depth */
};

HArena *interp_arena(IState *st) { return st->arena; }

static Literal *eval_comp(IState *st, HComp *c, Literal *const *args, int nargs, HErr *err);

/* ------------------------------------------------------------------ small helpers */

static Literal *new_lit(IState *st, const Shape *s) { return hlo_literal_new(st->arena, s); }

/* Literal sharing `data` under shape s (no copy: values are immutable). */
static Literal *alias_lit(IState *st, const Shape *s, void *data) {
  Literal *l = hlo_arena_alloc(st->arena, sizeof *l);
  hlo_shape_copy(st->arena, &l->shape, s);
  l->data = data;
  return l;
}

static const char *shape_s(IState *st, const Shape *s) { return hlo_shape_str(st->arena, s); }

/* Value v truncated to the width of t and sign- or zero-extended back to 64 bits. */
static int64_t int_norm(DType t, int64_t v) {
  int bits = hlo_dtype_bits(t);
  if (bits >= 64) return v;
  uint64_t mask = (UINT64_C(1) << bits) - 1, u = (uint64_t)v & mask;
  if (hlo_dtype_kind(t) == DK_SINT && (u >> (bits - 1)) & 1) u |= ~mask;
  return (int64_t)u;
}

static uint64_t int_mask(DType t) {
  int bits = hlo_dtype_bits(t);
  return bits >= 64 ? UINT64_MAX : (UINT64_C(1) << bits) - 1;
}

/* Row-major odometer step over dims; returns false after the last index. */
static bool next_index(int rank, const int64_t *dims, int64_t *idx) {
  for (int d = rank - 1; d >= 0; d--) {
    if (++idx[d] < dims[d]) return true;
    idx[d] = 0;
  }
  return false;
}

/* dst (dense row-major over dims) = src[base + sum idx[d] * sstr[d]]; es bytes per element. */
static void strided_copy(void *dst, const void *src, size_t es, int rank, const int64_t *dims,
                         const int64_t *sstr, int64_t base) {
  int64_t n = 1;
  for (int d = 0; d < rank; d++)
    n *= dims[d];
  if (n == 0) return;
  if (rank == 0) {
    memcpy(dst, (const char *)src + base * (int64_t)es, es);
    return;
  }
  int64_t inner = dims[rank - 1], is = sstr[rank - 1], off = base;
  int64_t idx[HLO_MAX_RANK] = {0};
  char *d = dst;
  for (int64_t done = 0; done < n; done += inner) {
    switch (es) {
    case 1: {
      const uint8_t *s = (const uint8_t *)src + off;
      uint8_t *o = (uint8_t *)d;
      for (int64_t j = 0; j < inner; j++)
        o[j] = s[j * is];
      break;
    }
    case 2: {
      const uint16_t *s = (const uint16_t *)src + off;
      uint16_t *o = (uint16_t *)d;
      for (int64_t j = 0; j < inner; j++)
        o[j] = s[j * is];
      break;
    }
    case 4: {
      const uint32_t *s = (const uint32_t *)src + off;
      uint32_t *o = (uint32_t *)d;
      if (is == 1)
        memcpy(o, s, (size_t)inner * 4);
      else
        for (int64_t j = 0; j < inner; j++)
          o[j] = s[j * is];
      break;
    }
    case 8: {
      const uint64_t *s = (const uint64_t *)src + off;
      uint64_t *o = (uint64_t *)d;
      for (int64_t j = 0; j < inner; j++)
        o[j] = s[j * is];
      break;
    }
    default:
      for (int64_t j = 0; j < inner; j++)
        memcpy(d + j * (int64_t)es, (const char *)src + (off + j * is) * (int64_t)es, es);
    }
    d += inner * (int64_t)es;
    for (int k = rank - 2; k >= 0; k--) {
      off += sstr[k];
      if (++idx[k] < dims[k]) break;
      off -= sstr[k] * dims[k];
      idx[k] = 0;
    }
  }
}

/* Deep copy of a value into arena a (tuple elements too). */
static Literal *deep_clone(HArena *a, const Literal *l) { return hlo_literal_clone(a, l); }

/* ------------------------------------------------------------------ scalar semantics */

/* Float maximum/minimum as XLA's CPU emitter: NaN in either operand propagates. */
static double fmax_nan(double a, double b) { return (isnan(a) || a >= b) ? a : b; }
static double fmin_nan(double a, double b) { return (isnan(a) || a <= b) ? a : b; }

int64_t interp_binop_i64(HOp op, DType dt, int64_t a, int64_t b) {
  bool is_signed = hlo_dtype_kind(dt) == DK_SINT;
  int bits = hlo_dtype_bits(dt);
  uint64_t mask = int_mask(dt);
  a = int_norm(dt, a);
  b = int_norm(dt, b);
  uint64_t ua = (uint64_t)a & mask, ub = (uint64_t)b & mask;
  if (hlo_dtype_kind(dt) == DK_PRED) {
    /* pred arithmetic behaves like int8 arithmetic followed by != 0 */
    switch ((int)op) {
    case OP_ADD:
    case OP_MAXIMUM:
    case OP_OR: return (a | b) != 0;
    case OP_MULTIPLY:
    case OP_MINIMUM:
    case OP_AND: return (a & b) != 0;
    case OP_XOR:
    case OP_SUBTRACT: return (a ^ b) != 0;
    default: return 0;
    }
  }
  switch ((int)op) {
  case OP_ADD: return int_norm(dt, (int64_t)(ua + ub));
  case OP_SUBTRACT: return int_norm(dt, (int64_t)(ua - ub));
  case OP_MULTIPLY: return int_norm(dt, (int64_t)(ua * ub));
  case OP_DIVIDE:
    if (b == 0) return int_norm(dt, -1);
    if (!is_signed) return (int64_t)(ua / ub);
    if (b == -1) return int_norm(dt, (int64_t)(0 - ua)); /* INT_MIN / -1 = INT_MIN */
    return a / b;
  case OP_REMAINDER:
    if (b == 0) return a;
    if (!is_signed) return (int64_t)(ua % ub);
    if (b == -1) return 0;
    return a % b;
  case OP_MAXIMUM:
    if (is_signed) return a >= b ? a : b;
    return ua >= ub ? a : b;
  case OP_MINIMUM:
    if (is_signed) return a <= b ? a : b;
    return ua <= ub ? a : b;
  case OP_AND: return int_norm(dt, a & b);
  case OP_OR: return int_norm(dt, a | b);
  case OP_XOR: return int_norm(dt, a ^ b);
  case OP_SHL: return ub >= (uint64_t)bits ? 0 : int_norm(dt, (int64_t)(ua << ub));
  case OP_SHR_LOGICAL: return ub >= (uint64_t)bits ? 0 : int_norm(dt, (int64_t)(ua >> ub));
  case OP_SHR_ARITH: {
    int64_t sa = a; /* a is sign-extended only for signed types: reinterpret the bits */
    if (!is_signed && bits < 64 && (ua >> (bits - 1)) & 1) sa = (int64_t)(ua | ~mask);
    if (!is_signed && bits == 64) sa = (int64_t)ua;
    int64_t r = ub >= (uint64_t)bits ? (sa < 0 ? -1 : 0) : (sa >> ub);
    return int_norm(dt, r);
  }
  case OP_POWER: {
    /* XLA: square-and-multiply over the low 6 exponent bits; a negative exponent gives
     * 1 for base 1 and 0 otherwise. */
    if (b < 0) return a == 1 ? 1 : 0;
    uint64_t acc = 1, base = ua, e = ub;
    for (int i = 0; i < 6; i++) {
      if (e & 1) acc *= base;
      base *= base;
      e >>= 1;
    }
    return int_norm(dt, (int64_t)acc);
  }
  case OP_MULHI: {
    if (is_signed) {
      __int128 p = (__int128)a * (__int128)b;
      return int_norm(dt, (int64_t)(p >> bits));
    }
    unsigned __int128 p = (unsigned __int128)ua * (unsigned __int128)ub;
    return int_norm(dt, (int64_t)(uint64_t)(p >> bits));
  }
  default: return 0;
  }
}

double interp_binop_f64(HOp op, DType dt, double a, double b) {
  if (!hlo_dtype_is_float(dt)) {
    /* exact integers carried in double; u64 values above INT64_MAX keep their bits */
    int64_t x = a >= 9223372036854775808.0 ? (int64_t)(uint64_t)a : (int64_t)a;
    int64_t y = b >= 9223372036854775808.0 ? (int64_t)(uint64_t)b : (int64_t)b;
    int64_t r = interp_binop_i64(op, dt, x, y);
    return dt == DT_U64 ? (double)(uint64_t)r : (double)r;
  }
  switch ((int)op) {
  case OP_ADD: return a + b;
  case OP_SUBTRACT: return a - b;
  case OP_MULTIPLY: return a * b;
  case OP_DIVIDE: return a / b;
  case OP_REMAINDER: return fmod(a, b);
  case OP_POWER: return pow(a, b);
  case OP_ATAN2: return atan2(a, b);
  case OP_MAXIMUM: return fmax_nan(a, b);
  case OP_MINIMUM: return fmin_nan(a, b);
  default: return NAN;
  }
}

/* Whether binary op `op` is defined for dtype dt. */
static bool binop_valid(HOp op, DType dt) {
  DKind k = hlo_dtype_kind(dt);
  /* complex reducers and map bodies run as computations (interp_complex.c has the ops) */
  if (k == DK_COMPLEX) return false;
  switch ((int)op) {
  case OP_ADD:
  case OP_SUBTRACT:
  case OP_MULTIPLY:
  case OP_MAXIMUM:
  case OP_MINIMUM: return k != DK_OTHER && (k != DK_PRED || op != OP_SUBTRACT);
  case OP_DIVIDE:
  case OP_REMAINDER:
  case OP_POWER: return k == DK_FLOAT || k == DK_SINT || k == DK_UINT;
  case OP_ATAN2: return k == DK_FLOAT;
  case OP_AND:
  case OP_OR:
  case OP_XOR: return k == DK_PRED || k == DK_SINT || k == DK_UINT;
  case OP_SHL:
  case OP_SHR_ARITH:
  case OP_SHR_LOGICAL:
  case OP_MULHI: return k == DK_SINT || k == DK_UINT;
  default: return false;
  }
}

bool interp_binop_of(const HComp *c, HOp *op) {
  const HInstr *r = c ? c->root : NULL;
  if (!r || r->nops != 2 || !hlo_shape_is_array(&r->shape) || r->shape.rank != 0) return false;
  if (!binop_valid(r->op, r->shape.dt)) return false;
  const HInstr *x = r->ops[0], *y = r->ops[1];
  if (x->op != OP_PARAMETER || y->op != OP_PARAMETER) return false;
  if (x->shape.dt != r->shape.dt || y->shape.dt != r->shape.dt || x->shape.rank || y->shape.rank)
    return false;
  int nparams = 0;
  for (int i = 0; i < c->ninstrs; i++)
    nparams += c->instrs[i]->op == OP_PARAMETER;
  if (nparams != 2) return false;
  bool straight = x->param_num == 0 && y->param_num == 1;
  bool swapped = x->param_num == 1 && y->param_num == 0 && (hlo_op_flags(r->op) & OPF_COMMUT);
  if (!straight && !swapped) return false;
  *op = r->op;
  return true;
}

/* Order key for TOTALORDER comparisons: -NaN < -inf < ... < -0 < +0 < ... < inf < NaN. */
static int64_t total_key(double v) {
  int64_t k;
  memcpy(&k, &v, 8);
  if (k < 0) k ^= INT64_MAX;
  return k;
}

static bool cmp_dir(CmpDir d, int c /* -1, 0, 1, or 2 for unordered */) {
  switch (d) {
  case CMP_EQ: return c == 0;
  case CMP_NE: return c != 0;
  case CMP_LT: return c == -1;
  case CMP_LE: return c == -1 || c == 0;
  case CMP_GT: return c == 1;
  case CMP_GE: return c == 1 || c == 0;
  }
  return false;
}

/* Compare element i of a with element j of b (same dtype) under the given direction/type. */
static bool cmp_elems(DType t, CmpDir d, CmpType ct, const void *a, int64_t i, const void *b,
                      int64_t j) {
  int c;
  if (hlo_dtype_is_float(t)) {
    double x = hlo_load_f64(t, a, i), y = hlo_load_f64(t, b, j);
    if (ct == CMPT_TOTALORDER) {
      int64_t kx = total_key(x), ky = total_key(y);
      c = kx < ky ? -1 : kx > ky ? 1 : 0;
    } else {
      c = x < y ? -1 : x > y ? 1 : x == y ? 0 : 2;
    }
  } else {
    int64_t x = hlo_load_i64(t, a, i), y = hlo_load_i64(t, b, j);
    bool uns = hlo_dtype_kind(t) != DK_SINT;
    if (ct == CMPT_UNSIGNED) uns = true;
    if (ct == CMPT_SIGNED) uns = false;
    if (uns) {
      uint64_t ux = (uint64_t)x & int_mask(t), uy = (uint64_t)y & int_mask(t);
      c = ux < uy ? -1 : ux > uy ? 1 : 0;
    } else {
      x = hlo_dtype_kind(t) == DK_PRED ? x : int_norm(t, x);
      y = hlo_dtype_kind(t) == DK_PRED ? y : int_norm(t, y);
      c = x < y ? -1 : x > y ? 1 : 0;
    }
  }
  return cmp_dir(d, c);
}

/* XLA's reduce-precision on the bits x of a value of a binary format of nbits bits with
 * src_exp exponent and src_man mantissa bits (the type's own format: f16, bf16, f32, f64),
 * to ebits exponent and mbits mantissa bits: the mantissa rounded to nearest even when
 * narrower (a carry moves into the exponent: the next binade, or infinity), the exponent
 * clamped when narrower (above the reduced format's largest: a signed infinity; at or below
 * its smallest normal's: a signed zero, the reduced format having no denormals); a NaN is
 * kept as it is (XLA's CPU results for mbits 0 too: tests/xla_cases/rp_*). */
static uint64_t reduce_precision_bits(uint64_t x, int nbits, int src_exp, int src_man, int ebits,
                                      int mbits) {
  uint64_t expmask = ((UINT64_C(1) << src_exp) - 1) << src_man,
           manmask = (UINT64_C(1) << src_man) - 1;
  if ((x & expmask) == expmask && (x & manmask)) return x; /* NaN */
  if (mbits < src_man) {
    uint64_t last = UINT64_C(1) << (src_man - mbits);
    uint64_t base_bias = (last >> 1) - 1;
    uint64_t lastbit = (x & last) >> (src_man - mbits);
    x += lastbit + base_bias;
    x &= ~(last - 1);
  }
  if (ebits < src_exp) {
    uint64_t sign = UINT64_C(1) << (nbits - 1);
    int64_t bias = (INT64_C(1) << (src_exp - 1)) - 1;
    int64_t rbias = (INT64_C(1) << (ebits - 1)) - 1;
    uint64_t rmax = (uint64_t)(bias + rbias), rmin = (uint64_t)(bias - rbias);
    uint64_t xe = x & expmask;
    bool over = xe > (rmax << src_man), under = xe <= (rmin << src_man);
    uint64_t szero = x & sign, sinf = szero | expmask;
    x = over ? sinf : under ? szero : x;
  }
  return x & (nbits == 64 ? UINT64_MAX : ((UINT64_C(1) << nbits) - 1));
}

/* ------------------------------------------------------------------ elementwise */

/* Unary float op in double. *ok = false when op is not a float op. */
static double unary_f(HOp op, double x, bool *ok) {
  switch ((int)op) {
  case OP_ABS: return fabs(x);
  case OP_CBRT: return cbrt(x);
  case OP_CEIL: return ceil(x);
  case OP_COSINE: return cos(x);
  case OP_ERF: return erf(x);
  case OP_EXP: return exp(x);
  case OP_EXPM1: return expm1(x);
  case OP_FLOOR: return floor(x);
  case OP_LOG: return log(x);
  case OP_LOG1P: return log1p(x);
  case OP_LOGISTIC: return 1.0 / (1.0 + exp(-x));
  case OP_NEGATE: return -x;
  case OP_ROUND_AFZ: return round(x);
  case OP_ROUND_EVEN: return nearbyint(x);
  case OP_RSQRT: return 1.0 / sqrt(x);
  case OP_SIGN: return isnan(x) ? x : x > 0 ? 1.0 : x < 0 ? -1.0 : x;
  case OP_SINE: return sin(x);
  case OP_SQRT: return sqrt(x);
  case OP_TAN: return tan(x);
  case OP_TANH: return tanh(x);
  case OP_ACOS: return acos(x);
  case OP_ACOSH: return acosh(x);
  case OP_ASIN: return asin(x);
  case OP_ASINH: return asinh(x);
  case OP_ATAN: return atan(x);
  case OP_ATANH: return atanh(x);
  case OP_COSH: return cosh(x);
  case OP_SINH: return sinh(x);
  case OP_COPY: return x;
  default: *ok = false; return 0;
  }
}

/* Unary integer op on a value of type t. *ok = false when not defined for integers. */
static int64_t unary_i(HOp op, DType t, int64_t x, bool *ok) {
  int bits = hlo_dtype_bits(t);
  uint64_t mask = int_mask(t), u = (uint64_t)x & mask;
  bool pred = hlo_dtype_kind(t) == DK_PRED;
  switch ((int)op) {
  case OP_ABS:
    if (pred || hlo_dtype_kind(t) == DK_UINT) return x;
    return int_norm(t, x < 0 ? (int64_t)(0 - (uint64_t)x) : x);
  case OP_NEGATE:
    if (pred) break;
    return int_norm(t, (int64_t)(0 - (uint64_t)x));
  case OP_SIGN:
    if (pred) break;
    if (hlo_dtype_kind(t) == DK_UINT) return u != 0;
    return x > 0 ? 1 : x < 0 ? -1 : 0;
  case OP_NOT:
    if (pred) return !x;
    return int_norm(t, (int64_t)~u);
  case OP_CLZ: {
    if (pred) break;
    int n = 0;
    for (int b = bits - 1; b >= 0 && !((u >> b) & 1); b--)
      n++;
    return n;
  }
  case OP_POPCNT:
    if (pred) break;
    return __builtin_popcountll(u);
  case OP_COPY: return x;
  default: break;
  }
  *ok = false;
  return 0;
}

bool interp_elem_operand(const HInstr *in, int k, const Literal *o, int64_t n, int64_t *stride,
                         HErr *err) {
  if (!hlo_shape_is_array(&o->shape)) {
    hlo_err_at(err, in, "operand %d is not an array", k);
    return false;
  }
  if (o->shape.rank == 0 && in->shape.rank != 0) {
    *stride = 0;
    return true;
  }
  if (hlo_shape_same_dims(&o->shape, &in->shape) && hlo_shape_elems(&o->shape) == n) {
    *stride = 1;
    return true;
  }
  int64_t m = hlo_shape_elems(&o->shape);
  hlo_err_at(err, in, "operand %d has %lld elements, the result %lld", k, (long long)m,
             (long long)n);
  return false;
}

static Literal *eval_unary(IState *st, const HInstr *in, Literal *x, HErr *err) {
  if (hlo_dtype_is_complex(x->shape.dt)) return interp_complex_unary(st, in, x, err);
  int64_t n = hlo_shape_elems(&in->shape), s;
  if (!interp_elem_operand(in, 0, x, n, &s, err)) return NULL;
  DType it = x->shape.dt, ot = in->shape.dt;
  Literal *r = new_lit(st, &in->shape);
  bool ok = true;
  if (in->op == OP_IS_FINITE) {
    if (!hlo_dtype_is_float(it) || ot != DT_PRED) goto bad;
    for (int64_t i = 0; i < n; i++)
      ((uint8_t *)r->data)[i] = isfinite(hlo_load_f64(it, x->data, i * s));
    return r;
  }
  if (it != ot) goto bad;
  if (hlo_dtype_is_float(it)) {
    if (it == DT_F32) {
      const float *xs = x->data;
      float *o = r->data;
      switch ((int)in->op) {
      case OP_NEGATE:
        for (int64_t i = 0; i < n; i++)
          o[i] = -xs[i * s];
        return r;
      case OP_ABS:
        for (int64_t i = 0; i < n; i++)
          o[i] = fabsf(xs[i * s]);
        return r;
      default:
        for (int64_t i = 0; i < n && ok; i++)
          o[i] = (float)unary_f(in->op, xs[i * s], &ok);
      }
    } else {
      for (int64_t i = 0; i < n && ok; i++)
        hlo_store_f64(ot, r->data, i, unary_f(in->op, hlo_load_f64(it, x->data, i * s), &ok));
    }
  } else {
    for (int64_t i = 0; i < n && ok; i++)
      hlo_store_i64(ot, r->data, i, unary_i(in->op, it, hlo_load_i64(it, x->data, i * s), &ok));
  }
  if (ok) return r;
bad:
  hlo_err_at(err, in, "%s is not defined for %s -> %s", hlo_op_name(in->op), hlo_dtype_name(it),
             hlo_dtype_name(ot));
  return NULL;
}

static Literal *eval_convert(IState *st, const HInstr *in, Literal *x, HErr *err) {
  int64_t n = hlo_shape_elems(&in->shape), s;
  if (!interp_elem_operand(in, 0, x, n, &s, err)) return NULL;
  DType it = x->shape.dt, ot = in->shape.dt;
  if (hlo_dtype_is_complex(it) || hlo_dtype_is_complex(ot))
    return interp_complex_convert(st, in, x, err);
  if (hlo_dtype_kind(it) == DK_OTHER || hlo_dtype_kind(ot) == DK_OTHER) {
    hlo_err_at(err, in, "convert from %s to %s", hlo_dtype_name(it), hlo_dtype_name(ot));
    return NULL;
  }
  Literal *r = new_lit(st, &in->shape);
  if (it == ot) {
    for (int64_t i = 0; i < n; i++)
      memcpy((char *)r->data + i * (int64_t)hlo_dtype_size(ot),
             (char *)x->data + i * s * (int64_t)hlo_dtype_size(it), hlo_dtype_size(it));
    return r;
  }
  if (hlo_dtype_is_float(it)) {
    if (ot == DT_PRED) {
      for (int64_t i = 0; i < n; i++)
        ((uint8_t *)r->data)[i] = hlo_load_f64(it, x->data, i * s) != 0;
    } else {
      for (int64_t i = 0; i < n; i++)
        hlo_store_f64(ot, r->data, i, hlo_load_f64(it, x->data, i * s));
    }
  } else if (hlo_dtype_is_float(ot)) {
    /* integer -> float with a single rounding */
    bool u64 = it == DT_U64;
    for (int64_t i = 0; i < n; i++) {
      int64_t v = hlo_load_i64(it, x->data, i * s);
      if (ot == DT_F32) {
        ((float *)r->data)[i] = u64 ? (float)(uint64_t)v : (float)v;
      } else if (ot == DT_F64) {
        ((double *)r->data)[i] = u64 ? (double)(uint64_t)v : (double)v;
      } else {
        float f = u64 ? (float)(uint64_t)v : (float)v;
        hlo_store_f64(ot, r->data, i, f);
      }
    }
  } else {
    for (int64_t i = 0; i < n; i++)
      hlo_store_i64(ot, r->data, i, hlo_load_i64(it, x->data, i * s));
  }
  return r;
}

static Literal *eval_binary(IState *st, const HInstr *in, Literal *x, Literal *y, HErr *err) {
  if (hlo_dtype_is_complex(x->shape.dt) || hlo_dtype_is_complex(in->shape.dt))
    return interp_complex_binary(st, in, x, y, err);
  int64_t n = hlo_shape_elems(&in->shape), sx, sy;
  if (!interp_elem_operand(in, 0, x, n, &sx, err) || !interp_elem_operand(in, 1, y, n, &sy, err))
    return NULL;
  DType t = x->shape.dt, ot = in->shape.dt;
  if (y->shape.dt != t || ot != t || !binop_valid(in->op, t)) {
    hlo_err_at(err, in, "%s is not defined for %s, %s -> %s", hlo_op_name(in->op),
               hlo_dtype_name(t), hlo_dtype_name(y->shape.dt), hlo_dtype_name(ot));
    return NULL;
  }
  Literal *r = new_lit(st, &in->shape);
  if (t == DT_F32) {
    const float *a = x->data, *b = y->data;
    float *o = r->data;
    switch ((int)in->op) {
    case OP_ADD:
      for (int64_t i = 0; i < n; i++)
        o[i] = a[i * sx] + b[i * sy];
      break;
    case OP_SUBTRACT:
      for (int64_t i = 0; i < n; i++)
        o[i] = a[i * sx] - b[i * sy];
      break;
    case OP_MULTIPLY:
      for (int64_t i = 0; i < n; i++)
        o[i] = a[i * sx] * b[i * sy];
      break;
    case OP_DIVIDE:
      for (int64_t i = 0; i < n; i++)
        o[i] = a[i * sx] / b[i * sy];
      break;
    case OP_MAXIMUM:
      for (int64_t i = 0; i < n; i++)
        o[i] = (float)fmax_nan(a[i * sx], b[i * sy]);
      break;
    case OP_MINIMUM:
      for (int64_t i = 0; i < n; i++)
        o[i] = (float)fmin_nan(a[i * sx], b[i * sy]);
      break;
    default:
      for (int64_t i = 0; i < n; i++)
        o[i] = (float)interp_binop_f64(in->op, t, a[i * sx], b[i * sy]);
    }
  } else if (hlo_dtype_is_float(t)) {
    for (int64_t i = 0; i < n; i++)
      hlo_store_f64(t, r->data, i,
                    interp_binop_f64(in->op, t, hlo_load_f64(t, x->data, i * sx),
                                     hlo_load_f64(t, y->data, i * sy)));
  } else {
    for (int64_t i = 0; i < n; i++)
      hlo_store_i64(t, r->data, i,
                    interp_binop_i64(in->op, t, hlo_load_i64(t, x->data, i * sx),
                                     hlo_load_i64(t, y->data, i * sy)));
  }
  return r;
}

static Literal *eval_compare(IState *st, const HInstr *in, Literal *x, Literal *y, HErr *err) {
  if (hlo_dtype_is_complex(x->shape.dt)) return interp_complex_compare(st, in, x, y, err);
  int64_t n = hlo_shape_elems(&in->shape), sx, sy;
  if (!interp_elem_operand(in, 0, x, n, &sx, err) || !interp_elem_operand(in, 1, y, n, &sy, err))
    return NULL;
  DType t = x->shape.dt;
  if (y->shape.dt != t || in->shape.dt != DT_PRED || hlo_dtype_kind(t) == DK_OTHER) {
    hlo_err_at(err, in, "compare of %s and %s -> %s", hlo_dtype_name(t),
               hlo_dtype_name(y->shape.dt), hlo_dtype_name(in->shape.dt));
    return NULL;
  }
  Literal *r = new_lit(st, &in->shape);
  uint8_t *o = r->data;
  if (t == DT_F32 && in->cmp_type != CMPT_TOTALORDER) {
    const float *a = x->data, *b = y->data;
    switch (in->cmp_dir) {
    case CMP_EQ:
      for (int64_t i = 0; i < n; i++)
        o[i] = a[i * sx] == b[i * sy];
      break;
    case CMP_NE:
      for (int64_t i = 0; i < n; i++)
        o[i] = a[i * sx] != b[i * sy];
      break;
    case CMP_LT:
      for (int64_t i = 0; i < n; i++)
        o[i] = a[i * sx] < b[i * sy];
      break;
    case CMP_LE:
      for (int64_t i = 0; i < n; i++)
        o[i] = a[i * sx] <= b[i * sy];
      break;
    case CMP_GT:
      for (int64_t i = 0; i < n; i++)
        o[i] = a[i * sx] > b[i * sy];
      break;
    case CMP_GE:
      for (int64_t i = 0; i < n; i++)
        o[i] = a[i * sx] >= b[i * sy];
      break;
    }
    return r;
  }
  for (int64_t i = 0; i < n; i++)
    o[i] = cmp_elems(t, in->cmp_dir, in->cmp_type, x->data, i * sx, y->data, i * sy);
  return r;
}

static Literal *eval_select(IState *st, const HInstr *in, Literal *const *ops, HErr *err) {
  int64_t n = hlo_shape_elems(&in->shape), sp, sa, sb;
  if (!interp_elem_operand(in, 0, ops[0], n, &sp, err) ||
      !interp_elem_operand(in, 1, ops[1], n, &sa, err) ||
      !interp_elem_operand(in, 2, ops[2], n, &sb, err))
    return NULL;
  DType t = in->shape.dt;
  if (ops[0]->shape.dt != DT_PRED || ops[1]->shape.dt != t || ops[2]->shape.dt != t) {
    hlo_err_at(err, in, "select needs a pred and two %s operands", hlo_dtype_name(t));
    return NULL;
  }
  Literal *r = new_lit(st, &in->shape);
  const uint8_t *p = ops[0]->data;
  size_t es = hlo_dtype_size(t);
  if (es == 4) {
    const uint32_t *a = ops[1]->data, *b = ops[2]->data;
    uint32_t *o = r->data;
    for (int64_t i = 0; i < n; i++)
      o[i] = p[i * sp] ? a[i * sa] : b[i * sb];
  } else {
    for (int64_t i = 0; i < n; i++)
      memcpy((char *)r->data + i * (int64_t)es,
             p[i * sp] ? (char *)ops[1]->data + i * sa * (int64_t)es
                       : (char *)ops[2]->data + i * sb * (int64_t)es,
             es);
  }
  return r;
}

static Literal *eval_clamp(IState *st, const HInstr *in, Literal *const *ops, HErr *err) {
  int64_t n = hlo_shape_elems(&in->shape), s0, s1, s2;
  if (!interp_elem_operand(in, 0, ops[0], n, &s0, err) ||
      !interp_elem_operand(in, 1, ops[1], n, &s1, err) ||
      !interp_elem_operand(in, 2, ops[2], n, &s2, err))
    return NULL;
  DType t = in->shape.dt;
  if (ops[0]->shape.dt != t || ops[1]->shape.dt != t || ops[2]->shape.dt != t ||
      hlo_dtype_kind(t) == DK_OTHER || hlo_dtype_kind(t) == DK_PRED || hlo_dtype_is_complex(t)) {
    hlo_err_at(err, in, "clamp needs three operands of type %s (ordered)", hlo_dtype_name(t));
    return NULL;
  }
  Literal *r = new_lit(st, &in->shape);
  for (int64_t i = 0; i < n; i++) {
    if (hlo_dtype_is_float(t)) {
      double lo = hlo_load_f64(t, ops[0]->data, i * s0), x = hlo_load_f64(t, ops[1]->data, i * s1),
             hi = hlo_load_f64(t, ops[2]->data, i * s2);
      hlo_store_f64(t, r->data, i, fmin_nan(hi, fmax_nan(lo, x)));
    } else {
      int64_t lo = hlo_load_i64(t, ops[0]->data, i * s0), x = hlo_load_i64(t, ops[1]->data, i * s1),
              hi = hlo_load_i64(t, ops[2]->data, i * s2);
      hlo_store_i64(t, r->data, i,
                    interp_binop_i64(OP_MINIMUM, t, hi, interp_binop_i64(OP_MAXIMUM, t, lo, x)));
    }
  }
  return r;
}

static Literal *eval_reduce_precision(IState *st, const HInstr *in, Literal *x, HErr *err) {
  int64_t n = hlo_shape_elems(&in->shape), s;
  if (!interp_elem_operand(in, 0, x, n, &s, err)) return NULL;
  DType t = in->shape.dt;
  int nbits, se, sm;
  if (!hlo_float_format(t, &nbits, &se, &sm) || x->shape.dt != t || in->exponent_bits < 1 ||
      in->mantissa_bits < 0) {
    hlo_err_at(err, in, "reduce-precision with exponent_bits=%d mantissa_bits=%d on %s",
               in->exponent_bits, in->mantissa_bits, hlo_dtype_name(t));
    return NULL;
  }
  /* on the bits of the type's own format */
  size_t sz = (size_t)nbits / 8;
  Literal *r = new_lit(st, &in->shape);
  for (int64_t i = 0; i < n; i++) {
    uint64_t b = 0;
    memcpy(&b, (const char *)x->data + (size_t)(i * s) * sz, sz); /* little-endian host */
    b = reduce_precision_bits(b, nbits, se, sm, in->exponent_bits, in->mantissa_bits);
    memcpy((char *)r->data + (size_t)i * sz, &b, sz);
  }
  return r;
}

/* bitcast-convert touching s4 or u4 on XLA's packing: two 4-bit values a byte, the first in
 * the low nibble, so element j of the minor dimension is bits 4j..4j+3 of the wider value
 * (little-endian, as the bytes of the wider types are); between s4 and u4, the same 4 bits. */
static Literal *bitcast_int4(IState *st, const HInstr *in, Literal *x) {
  DType it = x->shape.dt, ot = in->shape.dt;
  int64_t n = hlo_shape_elems(&x->shape), m = hlo_shape_elems(&in->shape);
  Literal *r = new_lit(st, &in->shape);
  uint8_t *b = r->data;
  if (hlo_dtype_is_int4(it) && hlo_dtype_is_int4(ot)) {
    for (int64_t i = 0; i < n; i++)
      hlo_store_i64(ot, b, i, hlo_load_i64(it, x->data, i));
  } else if (hlo_dtype_is_int4(it)) { /* n nibbles packed into m wider values' bytes */
    for (int64_t i = 0; i < n; i++)
      b[i / 2] |= (uint8_t)((hlo_load_i64(it, x->data, i) & 0xf) << (4 * (i % 2)));
  } else { /* the bytes of n wider values unpacked into m nibbles */
    const uint8_t *xb = x->data;
    for (int64_t i = 0; i < m; i++)
      hlo_store_i64(ot, b, i, (xb[i / 2] >> (4 * (i % 2))) & 0xf);
  }
  return r;
}

static Literal *eval_bitcast_convert(IState *st, const HInstr *in, Literal *x, HErr *err) {
  if (hlo_shape_is_array(&x->shape) && hlo_shape_is_array(&in->shape) &&
      (hlo_dtype_is_int4(x->shape.dt) || hlo_dtype_is_int4(in->shape.dt)) &&
      hlo_shape_elems(&x->shape) * hlo_dtype_bits(x->shape.dt) ==
          hlo_shape_elems(&in->shape) * hlo_dtype_bits(in->shape.dt) &&
      hlo_dtype_kind(x->shape.dt) != DK_PRED && hlo_dtype_kind(in->shape.dt) != DK_PRED)
    return bitcast_int4(st, in, x);
  if (!hlo_shape_is_array(&x->shape) || !hlo_shape_is_array(&in->shape) ||
      hlo_shape_bytes(&x->shape) != hlo_shape_bytes(&in->shape)) {
    hlo_err_at(err, in, "bitcast-convert from %s to %s changes the byte size",
               shape_s(st, &x->shape), shape_s(st, &in->shape));
    return NULL;
  }
  /* little-endian bytes reinterpreted in place; narrower results gain a minor dimension */
  return alias_lit(st, &in->shape, x->data);
}

/* ------------------------------------------------------------------ data movement */

static bool is_array_result(const HInstr *in, HErr *err) {
  if (hlo_shape_is_array(&in->shape)) return true;
  hlo_err_at(err, in, "%s needs an array result", hlo_op_name(in->op));
  return false;
}

static Literal *eval_broadcast(IState *st, const HInstr *in, Literal *x, HErr *err) {
  if (!is_array_result(in, err)) return NULL;
  const Shape *os = &in->shape, *xs = &x->shape;
  if (!hlo_shape_is_array(xs) || xs->dt != os->dt || in->dims.n != xs->rank) {
    hlo_err_at(err, in, "broadcast of %s to %s with %d dimensions", shape_s(st, xs),
               shape_s(st, os), in->dims.n);
    return NULL;
  }
  int64_t xstr[HLO_MAX_RANK], sstr[HLO_MAX_RANK] = {0};
  hlo_shape_strides(xs, xstr);
  for (int i = 0; i < xs->rank; i++) {
    int64_t d = in->dims.v[i];
    if (d < 0 || d >= os->rank || os->dims[d] != xs->dims[i]) {
      hlo_err_at(err, in, "broadcast dimension %d -> %lld does not fit %s", i, (long long)d,
                 shape_s(st, os));
      return NULL;
    }
    sstr[d] = xstr[i];
  }
  Literal *r = new_lit(st, os);
  strided_copy(r->data, x->data, hlo_dtype_size(os->dt), os->rank, os->dims, sstr, 0);
  return r;
}

static Literal *eval_reshape(IState *st, const HInstr *in, Literal *x, HErr *err) {
  if (!is_array_result(in, err)) return NULL;
  if (!hlo_shape_is_array(&x->shape) || x->shape.dt != in->shape.dt ||
      hlo_shape_elems(&x->shape) != hlo_shape_elems(&in->shape)) {
    hlo_err_at(err, in, "%s from %s to %s changes the element count or type", hlo_op_name(in->op),
               shape_s(st, &x->shape), shape_s(st, &in->shape));
    return NULL;
  }
  return alias_lit(st, &in->shape, x->data);
}

static Literal *eval_transpose(IState *st, const HInstr *in, Literal *x, HErr *err) {
  if (!is_array_result(in, err)) return NULL;
  const Shape *os = &in->shape, *xs = &x->shape;
  int r = xs->rank;
  bool ok = hlo_shape_is_array(xs) && xs->dt == os->dt && in->dims.n == r && os->rank == r;
  int64_t xstr[HLO_MAX_RANK], sstr[HLO_MAX_RANK];
  bool seen[HLO_MAX_RANK] = {0};
  if (ok) hlo_shape_strides(xs, xstr);
  for (int i = 0; ok && i < r; i++) {
    int64_t p = in->dims.v[i];
    ok = p >= 0 && p < r && !seen[p] && xs->dims[p] == os->dims[i];
    if (ok) {
      seen[p] = true;
      sstr[i] = xstr[p];
    }
  }
  if (!ok) {
    hlo_err_at(err, in, "transpose of %s to %s: invalid permutation", shape_s(st, xs),
               shape_s(st, os));
    return NULL;
  }
  Literal *l = new_lit(st, os);
  strided_copy(l->data, x->data, hlo_dtype_size(os->dt), r, os->dims, sstr, 0);
  return l;
}

static Literal *eval_reverse(IState *st, const HInstr *in, Literal *x, HErr *err) {
  if (!is_array_result(in, err)) return NULL;
  const Shape *os = &in->shape;
  if (!hlo_shape_eq(&x->shape, os)) {
    hlo_err_at(err, in, "reverse of %s to %s", shape_s(st, &x->shape), shape_s(st, os));
    return NULL;
  }
  int64_t sstr[HLO_MAX_RANK], base = 0;
  hlo_shape_strides(os, sstr);
  for (int i = 0; i < in->dims.n; i++) {
    int64_t d = in->dims.v[i];
    if (d < 0 || d >= os->rank) {
      hlo_err_at(err, in, "reverse dimension %lld out of range", (long long)d);
      return NULL;
    }
    if (sstr[d] > 0 && os->dims[d] > 0) {
      base += (os->dims[d] - 1) * sstr[d];
      sstr[d] = -sstr[d];
    }
  }
  Literal *l = new_lit(st, os);
  strided_copy(l->data, x->data, hlo_dtype_size(os->dt), os->rank, os->dims, sstr, base);
  return l;
}

static Literal *eval_slice(IState *st, const HInstr *in, Literal *x, HErr *err) {
  if (!is_array_result(in, err)) return NULL;
  const Shape *os = &in->shape, *xs = &x->shape;
  const SliceDims *sd = in->slice;
  if (!sd || !hlo_shape_is_array(xs) || xs->dt != os->dt || sd->n != xs->rank ||
      os->rank != xs->rank) {
    hlo_err_at(err, in, "slice of %s to %s: bad slice attribute", shape_s(st, xs), shape_s(st, os));
    return NULL;
  }
  int64_t xstr[HLO_MAX_RANK], sstr[HLO_MAX_RANK], base = 0;
  hlo_shape_strides(xs, xstr);
  for (int d = 0; d < xs->rank; d++) {
    int64_t s0 = sd->start[d], lim = sd->limit[d], step = sd->stride[d];
    if (step < 1 || s0 < 0 || lim > xs->dims[d] || s0 > lim ||
        os->dims[d] != (lim - s0 + step - 1) / step) {
      hlo_err_at(err, in, "slice [%lld:%lld:%lld] of dimension %d (size %lld) does not give %lld",
                 (long long)s0, (long long)lim, (long long)step, d, (long long)xs->dims[d],
                 (long long)os->dims[d]);
      return NULL;
    }
    base += s0 * xstr[d];
    sstr[d] = step * xstr[d];
  }
  Literal *l = new_lit(st, os);
  strided_copy(l->data, x->data, hlo_dtype_size(os->dt), os->rank, os->dims, sstr, base);
  return l;
}

static Literal *eval_concatenate(IState *st, const HInstr *in, Literal *const *ops, HErr *err) {
  if (!is_array_result(in, err)) return NULL;
  const Shape *os = &in->shape;
  int64_t k = in->dims.n == 1 ? in->dims.v[0] : -1;
  if (k < 0 || k >= os->rank) {
    hlo_err_at(err, in, "concatenate needs one dimension in range");
    return NULL;
  }
  int64_t total = 0;
  for (int i = 0; i < in->nops; i++) {
    const Shape *s = &ops[i]->shape;
    bool ok = hlo_shape_is_array(s) && s->dt == os->dt && s->rank == os->rank;
    for (int d = 0; ok && d < os->rank; d++)
      ok = d == k || s->dims[d] == os->dims[d];
    if (!ok) {
      hlo_err_at(err, in, "operand %d (%s) does not fit %s", i, shape_s(st, s), shape_s(st, os));
      return NULL;
    }
    total += s->dims[k];
  }
  if (total != os->dims[k]) {
    hlo_err_at(err, in, "operand sizes along dimension %lld add up to %lld, not %lld", (long long)k,
               (long long)total, (long long)os->dims[k]);
    return NULL;
  }
  Literal *r = new_lit(st, os);
  size_t es = hlo_dtype_size(os->dt);
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < k; d++)
    outer *= os->dims[d];
  for (int d = (int)k + 1; d < os->rank; d++)
    inner *= os->dims[d];
  char *o = r->data;
  for (int64_t q = 0; q < outer; q++)
    for (int i = 0; i < in->nops; i++) {
      size_t chunk = (size_t)(ops[i]->shape.dims[k] * inner) * es;
      memcpy(o, (char *)ops[i]->data + (size_t)q * chunk, chunk);
      o += chunk;
    }
  return r;
}

static Literal *eval_iota(IState *st, const HInstr *in, HErr *err) {
  if (!is_array_result(in, err)) return NULL;
  const Shape *os = &in->shape;
  if (in->iota_dim < 0 || in->iota_dim >= os->rank || hlo_dtype_kind(os->dt) == DK_OTHER) {
    hlo_err_at(err, in, "iota dimension %lld out of range for %s", (long long)in->iota_dim,
               shape_s(st, os));
    return NULL;
  }
  Literal *r = new_lit(st, os);
  int64_t n = hlo_shape_elems(os), str[HLO_MAX_RANK];
  hlo_shape_strides(os, str);
  int64_t d = in->iota_dim, sz = os->dims[d];
  for (int64_t i = 0; i < n; i++) {
    int64_t v = (i / str[d]) % sz;
    if (hlo_dtype_is_float(os->dt))
      hlo_store_f64(os->dt, r->data, i, (double)v);
    else
      hlo_store_i64(os->dt, r->data, i, v);
  }
  return r;
}

/* ------------------------------------------------------------------ calls */

/* Evaluate c on args in the scratch arena (per-element calls). The result is valid until the
 * next scratch_call at the same level; args must not live in the scratch arena unless this
 * is a nested call (which then shares its parent's scratch without recycling it). */
static Literal *scratch_call(IState *st, HComp *c, Literal *const *args, int nargs, HErr *err) {
  if (st->in_scratch) return eval_comp(st, c, args, nargs, err);
  if (st->scratch && hlo_arena_used(st->scratch) > INTERP_SCRATCH_LIMIT) {
    hlo_arena_free(st->scratch);
    st->scratch = NULL;
  }
  if (!st->scratch) st->scratch = hlo_arena_new();
  HArena *saved = st->arena;
  st->arena = st->scratch;
  st->in_scratch = true;
  Literal *r = eval_comp(st, c, args, nargs, err);
  st->arena = saved;
  st->in_scratch = false;
  return r;
}

Literal *interp_call(IState *st, HComp *c, Literal *const *args, int nargs, HErr *err) {
  Literal *r = scratch_call(st, c, args, nargs, err);
  return r ? deep_clone(st->arena, r) : NULL;
}

/* Copies scalar value src (array of one element, or tuple of n of them) into the preallocated
 * scalar literals dst[0..n). false when the shapes do not match. */
static bool take_scalars(Literal *const *dst, int n, const Literal *src) {
  if (n == 1 && hlo_shape_is_array(&src->shape)) {
    if (src->shape.dt != dst[0]->shape.dt || hlo_shape_elems(&src->shape) != 1) return false;
    memcpy(dst[0]->data, src->data, hlo_dtype_size(src->shape.dt));
    return true;
  }
  if (src->shape.dt != DT_TUPLE || src->shape.ntuple != n) return false;
  for (int i = 0; i < n; i++)
    if (!take_scalars(&dst[i], 1, src->elems[i])) return false;
  return true;
}

static Literal *eval_call_like(IState *st, const HInstr *in, HComp *c, Literal *const *ops,
                               int nops, HErr *err) {
  if (!c) {
    hlo_err_at(err, in, "%s has no called computation", hlo_op_name(in->op));
    return NULL;
  }
  return eval_comp(st, c, ops, nops, err);
}

static bool pred_value(const HInstr *in, const Literal *p, bool *out, HErr *err) {
  if (!hlo_shape_is_array(&p->shape) || p->shape.dt != DT_PRED || hlo_shape_elems(&p->shape) != 1) {
    hlo_err_at(err, in, "condition must be a pred scalar");
    return false;
  }
  *out = ((uint8_t *)p->data)[0] != 0;
  return true;
}

static Literal *eval_while(IState *st, const HInstr *in, Literal *init, HErr *err) {
  if (in->ncalls < 2 || !in->calls[0] || !in->calls[1]) {
    hlo_err_at(err, in, "while needs a body and a condition");
    return NULL;
  }
  HComp *body = in->calls[0], *cond = in->calls[1];
  HArena *outer = st->arena, *prev = NULL;
  Literal *state = init;
  for (;;) {
    HArena *ca = hlo_arena_new();
    st->arena = ca;
    Literal *p = eval_comp(st, cond, &state, 1, err);
    bool go = false;
    bool ok = p && pred_value(in, p, &go, err);
    st->arena = outer;
    hlo_arena_free(ca);
    if (!ok) {
      if (prev) hlo_arena_free(prev);
      return NULL;
    }
    if (!go) break;
    HArena *na = hlo_arena_new();
    st->arena = na;
    Literal *r = eval_comp(st, body, &state, 1, err);
    if (r) r = deep_clone(na, r); /* the new state must not point into the previous arena */
    st->arena = outer;
    if (prev) hlo_arena_free(prev);
    prev = na;
    if (!r) {
      hlo_arena_free(na);
      return NULL;
    }
    state = r;
  }
  Literal *res = state == init ? init : deep_clone(outer, state);
  if (prev) hlo_arena_free(prev);
  return res;
}

static Literal *eval_conditional(IState *st, const HInstr *in, Literal *const *ops, HErr *err) {
  if (in->nops < 1 || in->ncalls < 1 || in->nops != in->ncalls + 1) {
    hlo_err_at(err, in, "conditional needs a selector and one operand per branch");
    return NULL;
  }
  const Literal *sel = ops[0];
  int64_t b;
  if (!hlo_shape_is_array(&sel->shape) || hlo_shape_elems(&sel->shape) != 1) {
    hlo_err_at(err, in, "conditional selector must be a scalar");
    return NULL;
  }
  if (sel->shape.dt == DT_PRED) {
    if (in->ncalls != 2) {
      hlo_err_at(err, in, "conditional on pred needs exactly two branches");
      return NULL;
    }
    b = ((uint8_t *)sel->data)[0] ? 0 : 1;
  } else if (sel->shape.dt == DT_S32) {
    b = ((int32_t *)sel->data)[0];
    if (b < 0 || b >= in->ncalls) b = in->ncalls - 1;
  } else {
    hlo_err_at(err, in, "conditional selector must be pred or s32");
    return NULL;
  }
  return eval_call_like(st, in, in->calls[b], &ops[1 + b], 1, err);
}

/* ------------------------------------------------------------------ map */

static Literal *eval_map(IState *st, const HInstr *in, Literal *const *ops, HErr *err) {
  if (!is_array_result(in, err)) return NULL;
  HComp *c = in->ncalls ? in->calls[0] : NULL;
  if (!c || in->nops < 1) {
    hlo_err_at(err, in, "map needs operands and a computation");
    return NULL;
  }
  int64_t n = hlo_shape_elems(&in->shape);
  int k = in->nops;
  Literal **args = hlo_arena_alloc(st->arena, sizeof(Literal *) * (size_t)k);
  int64_t *strides = hlo_arena_alloc(st->arena, sizeof(int64_t) * (size_t)k);
  for (int i = 0; i < k; i++) {
    if (!interp_elem_operand(in, i, ops[i], n, &strides[i], err)) return NULL;
    Shape s = hlo_shape_scalar(ops[i]->shape.dt);
    args[i] = new_lit(st, &s);
  }
  Literal *r = new_lit(st, &in->shape);
  Literal *out = r;
  HOp bop;
  if (k == 2 && interp_binop_of(c, &bop) && ops[0]->shape.dt == in->shape.dt &&
      ops[1]->shape.dt == in->shape.dt) {
    DType t = in->shape.dt;
    for (int64_t i = 0; i < n; i++) {
      if (hlo_dtype_is_float(t))
        hlo_store_f64(t, r->data, i,
                      interp_binop_f64(bop, t, hlo_load_f64(t, ops[0]->data, i * strides[0]),
                                       hlo_load_f64(t, ops[1]->data, i * strides[1])));
      else
        hlo_store_i64(t, r->data, i,
                      interp_binop_i64(bop, t, hlo_load_i64(t, ops[0]->data, i * strides[0]),
                                       hlo_load_i64(t, ops[1]->data, i * strides[1])));
    }
    return r;
  }
  size_t es = hlo_dtype_size(in->shape.dt);
  for (int64_t i = 0; i < n; i++) {
    for (int j = 0; j < k; j++) {
      size_t ej = hlo_dtype_size(ops[j]->shape.dt);
      memcpy(args[j]->data, (char *)ops[j]->data + (size_t)(i * strides[j]) * ej, ej);
    }
    Literal *v = scratch_call(st, c, args, k, err);
    if (!v) return NULL;
    if (!hlo_shape_is_array(&v->shape) || v->shape.dt != in->shape.dt ||
        hlo_shape_elems(&v->shape) != 1) {
      hlo_err_at(err, in, "map computation must return a %s scalar", hlo_dtype_name(in->shape.dt));
      return NULL;
    }
    memcpy((char *)out->data + (size_t)i * es, v->data, es);
  }
  return r;
}

/* ------------------------------------------------------------------ reduce */

/* Reduce with a single binary-op reducer: one operand, accumulate in double or int64. */
static void reduce_binop(HOp op, const Literal *x, const Literal *init, Literal *r,
                         const int64_t *ostr /* per input dim, 0 when reduced */) {
  const Shape *xs = &x->shape;
  DType t = xs->dt;
  int64_t on = hlo_shape_elems(&r->shape), n = hlo_shape_elems(xs);
  int rank = xs->rank;
  bool fl = hlo_dtype_is_float(t);
  double *accf = NULL;
  int64_t *acci = NULL;
  if (fl) {
    accf = malloc(sizeof(double) * (size_t)(on ? on : 1));
    double iv = hlo_load_f64(t, init->data, 0);
    for (int64_t i = 0; i < on; i++)
      accf[i] = iv;
  } else {
    acci = malloc(sizeof(int64_t) * (size_t)(on ? on : 1));
    int64_t iv = hlo_load_i64(t, init->data, 0);
    for (int64_t i = 0; i < on; i++)
      acci[i] = iv;
  }
  if (!accf && !acci) HLO_ASSERT(!"out of memory");
  if (n > 0) {
    int64_t idx[HLO_MAX_RANK] = {0}, inner = rank ? xs->dims[rank - 1] : 1;
    int64_t istr = rank ? ostr[rank - 1] : 0, off = 0;
    for (int64_t done = 0; done < n; done += inner) {
      if (t == DT_F32) {
        const float *src = (const float *)x->data + done;
        if (istr == 0) {
          double a = accf[off];
          switch ((int)op) {
          case OP_ADD:
            for (int64_t j = 0; j < inner; j++)
              a += src[j];
            break;
          case OP_MAXIMUM:
            for (int64_t j = 0; j < inner; j++)
              a = fmax_nan(a, src[j]);
            break;
          case OP_MINIMUM:
            for (int64_t j = 0; j < inner; j++)
              a = fmin_nan(a, src[j]);
            break;
          default:
            for (int64_t j = 0; j < inner; j++)
              a = interp_binop_f64(op, t, a, src[j]);
          }
          accf[off] = a;
        } else {
          double *a = accf + off;
          switch ((int)op) {
          case OP_ADD:
            for (int64_t j = 0; j < inner; j++)
              a[j] += src[j];
            break;
          default:
            for (int64_t j = 0; j < inner; j++)
              a[j] = interp_binop_f64(op, t, a[j], src[j]);
          }
        }
      } else if (fl) {
        for (int64_t j = 0; j < inner; j++)
          accf[off + j * istr] =
              interp_binop_f64(op, t, accf[off + j * istr], hlo_load_f64(t, x->data, done + j));
      } else {
        for (int64_t j = 0; j < inner; j++)
          acci[off + j * istr] =
              interp_binop_i64(op, t, acci[off + j * istr], hlo_load_i64(t, x->data, done + j));
      }
      for (int k = rank - 2; k >= 0; k--) {
        off += ostr[k];
        if (++idx[k] < xs->dims[k]) break;
        off -= ostr[k] * xs->dims[k];
        idx[k] = 0;
      }
    }
  }
  for (int64_t i = 0; i < on; i++) {
    if (fl)
      hlo_store_f64(t, r->data, i, accf[i]);
    else
      hlo_store_i64(t, r->data, i, acci[i]);
  }
  free(accf);
  free(acci);
}

static Literal *eval_reduce(IState *st, const HInstr *in, Literal *const *ops, HErr *err) {
  HComp *c = in->ncalls ? in->calls[0] : NULL;
  int n = in->nops / 2;
  if (!c || in->nops < 2 || in->nops % 2) {
    hlo_err_at(err, in, "reduce needs N inputs, N init values and a computation");
    return NULL;
  }
  const Shape *xs = &ops[0]->shape;
  if (!hlo_shape_is_array(xs)) {
    hlo_err_at(err, in, "reduce input must be an array");
    return NULL;
  }
  bool reduced[HLO_MAX_RANK] = {0};
  for (int i = 0; i < in->dims.n; i++) {
    int64_t d = in->dims.v[i];
    if (d < 0 || d >= xs->rank || reduced[d]) {
      hlo_err_at(err, in, "reduce dimension %lld invalid for %s", (long long)d, shape_s(st, xs));
      return NULL;
    }
    reduced[d] = true;
  }
  /* result dims: the kept input dims in order */
  Shape rs[HLO_MAX_RANK];
  int64_t kept[HLO_MAX_RANK];
  int nk = 0;
  for (int d = 0; d < xs->rank; d++)
    if (!reduced[d]) kept[nk++] = xs->dims[d];
  for (int i = 0; i < n; i++) {
    const Shape *s = &ops[i]->shape, *is = &ops[n + i]->shape;
    const Shape *want = n == 1                                              ? &in->shape
                        : in->shape.dt == DT_TUPLE && in->shape.ntuple == n ? &in->shape.tuple[i]
                                                                            : NULL;
    bool ok = want && hlo_shape_is_array(s) && hlo_shape_same_dims(s, xs) &&
              hlo_shape_is_array(is) && is->rank == 0 && is->dt == s->dt &&
              hlo_shape_is_array(want) && want->dt == s->dt && want->rank == nk;
    for (int d = 0; ok && d < nk; d++)
      ok = want->dims[d] == kept[d];
    if (!ok) {
      hlo_err_at(err, in, "reduce operand %d (%s, init %s) does not match the result %s", i,
                 shape_s(st, s), shape_s(st, is), shape_s(st, &in->shape));
      return NULL;
    }
    rs[i] = *want;
  }
  /* ostr: for each input dim, the stride of the matching output dim (0 when reduced) */
  int64_t ostr[HLO_MAX_RANK], rstr[HLO_MAX_RANK];
  Shape os0 = hlo_shape_array(xs->dt, nk, kept);
  hlo_shape_strides(&os0, rstr);
  for (int d = 0, k = 0; d < xs->rank; d++)
    ostr[d] = reduced[d] ? 0 : rstr[k++];

  HOp bop;
  if (n == 1 && interp_binop_of(c, &bop) && c->root->shape.dt == xs->dt) {
    Literal *r = new_lit(st, &in->shape);
    reduce_binop(bop, ops[0], ops[1], r, ostr);
    return r;
  }

  /* general reducer: per output element, fold the reduced elements in row-major order */
  Literal *res = new_lit(st, &in->shape);
  Literal **outs = hlo_arena_alloc(st->arena, sizeof(Literal *) * (size_t)n);
  Literal **args = hlo_arena_alloc(st->arena, sizeof(Literal *) * (size_t)(2 * n));
  for (int i = 0; i < n; i++) {
    outs[i] = n == 1 ? res : res->elems[i];
    Shape s = hlo_shape_scalar(ops[i]->shape.dt);
    args[i] = new_lit(st, &s);
    args[n + i] = new_lit(st, &s);
  }
  int rrank = 0;
  int64_t rdims[HLO_MAX_RANK], rin[HLO_MAX_RANK], kin[HLO_MAX_RANK], xstr[HLO_MAX_RANK];
  hlo_shape_strides(xs, xstr);
  for (int d = 0, k = 0; d < xs->rank; d++) {
    if (reduced[d]) {
      rdims[rrank] = xs->dims[d];
      rin[rrank++] = xstr[d];
    } else {
      kin[k++] = xstr[d];
    }
  }
  int64_t on = hlo_shape_elems(&rs[0]), rn = 1;
  for (int d = 0; d < rrank; d++)
    rn *= rdims[d];
  int64_t oidx[HLO_MAX_RANK] = {0};
  for (int64_t o = 0; o < on; o++) {
    int64_t base = 0;
    for (int k = 0; k < nk; k++)
      base += oidx[k] * kin[k];
    for (int i = 0; i < n; i++)
      memcpy(args[i]->data, ops[n + i]->data, hlo_dtype_size(ops[i]->shape.dt));
    int64_t ridx[HLO_MAX_RANK] = {0};
    for (int64_t q = 0; q < rn; q++) {
      int64_t off = base;
      for (int d = 0; d < rrank; d++)
        off += ridx[d] * rin[d];
      for (int i = 0; i < n; i++) {
        size_t es = hlo_dtype_size(ops[i]->shape.dt);
        memcpy(args[n + i]->data, (char *)ops[i]->data + (size_t)off * es, es);
      }
      Literal *v = scratch_call(st, c, args, 2 * n, err);
      if (!v) return NULL;
      if (!take_scalars(args, n, v)) {
        hlo_err_at(err, in, "reducer '%s' returned %s, expected %d scalar(s) of the input types",
                   c->name, shape_s(st, &v->shape), n);
        return NULL;
      }
      next_index(rrank, rdims, ridx);
    }
    for (int i = 0; i < n; i++) {
      size_t es = hlo_dtype_size(ops[i]->shape.dt);
      memcpy((char *)outs[i]->data + (size_t)o * es, args[i]->data, es);
    }
    next_index(nk, kept, oidx);
  }
  return res;
}

/* ------------------------------------------------------------------ dot */

/* Pack operand x into a dense double (or int64) array ordered by dims perm[0..rank). */
static void *pack_operand(const Literal *x, const int *perm, bool fl) {
  const Shape *s = &x->shape;
  int64_t n = hlo_shape_elems(s), str[HLO_MAX_RANK], dims[HLO_MAX_RANK], pstr[HLO_MAX_RANK];
  hlo_shape_strides(s, str);
  for (int i = 0; i < s->rank; i++) {
    dims[i] = s->dims[perm[i]];
    pstr[i] = str[perm[i]];
  }
  void *buf = malloc(8 * (size_t)(n ? n : 1));
  HLO_ASSERT(buf);
  int64_t idx[HLO_MAX_RANK] = {0};
  for (int64_t i = 0; i < n; i++) {
    int64_t off = 0;
    for (int d = 0; d < s->rank; d++)
      off += idx[d] * pstr[d];
    if (fl)
      ((double *)buf)[i] = hlo_load_f64(s->dt, x->data, off);
    else
      ((int64_t *)buf)[i] = hlo_load_i64(s->dt, x->data, off);
    next_index(s->rank, dims, idx);
  }
  return buf;
}

static Literal *eval_dot(IState *st, const HInstr *in, Literal *x, Literal *y, HErr *err) {
  if (!is_array_result(in, err)) return NULL;
  const DotDims *dd = in->dot;
  const Shape *xs = &x->shape, *ys = &y->shape, *os = &in->shape;
  if (!dd || !hlo_shape_is_array(xs) || !hlo_shape_is_array(ys) ||
      dd->lhs_batch.n != dd->rhs_batch.n || dd->lhs_contract.n != dd->rhs_contract.n) {
    hlo_err_at(err, in, "dot needs array operands and paired dimension numbers");
    return NULL;
  }
  bool lused[HLO_MAX_RANK] = {0}, rused[HLO_MAX_RANK] = {0};
  int lperm[HLO_MAX_RANK], rperm[HLO_MAX_RANK], nl = 0, nr = 0;
  int64_t B = 1, K = 1, M = 1, N = 1;
  int64_t odims[HLO_MAX_RANK];
  int orank = 0;
  const IList *lists[4] = {&dd->lhs_batch, &dd->rhs_batch, &dd->lhs_contract, &dd->rhs_contract};
  for (int g = 0; g < 4; g++) {
    const IList *L = lists[g];
    bool lhs = g % 2 == 0;
    for (int i = 0; i < L->n; i++) {
      int64_t d = L->v[i];
      int rank = lhs ? xs->rank : ys->rank;
      bool *used = lhs ? lused : rused;
      if (d < 0 || d >= rank || used[d]) {
        hlo_err_at(err, in, "dot dimension %lld invalid", (long long)d);
        return NULL;
      }
      used[d] = true;
    }
  }
  /* lhs order: batch, free, contract; rhs order: batch, contract, free */
  for (int i = 0; i < dd->lhs_batch.n; i++) {
    int64_t a = dd->lhs_batch.v[i], b = dd->rhs_batch.v[i];
    if (xs->dims[a] != ys->dims[b]) goto mismatch;
    lperm[nl++] = (int)a;
    rperm[nr++] = (int)b;
    B *= xs->dims[a];
    odims[orank++] = xs->dims[a];
  }
  for (int d = 0; d < xs->rank; d++)
    if (!lused[d]) {
      lperm[nl++] = d;
      M *= xs->dims[d];
      if (orank < HLO_MAX_RANK) odims[orank] = xs->dims[d];
      orank++;
    }
  for (int i = 0; i < dd->lhs_contract.n; i++) {
    int64_t a = dd->lhs_contract.v[i], b = dd->rhs_contract.v[i];
    if (xs->dims[a] != ys->dims[b]) goto mismatch;
    lperm[nl++] = (int)a;
    rperm[nr++] = (int)b;
    K *= xs->dims[a];
  }
  for (int d = 0; d < ys->rank; d++)
    if (!rused[d]) {
      rperm[nr++] = d;
      N *= ys->dims[d];
      if (orank < HLO_MAX_RANK) odims[orank] = ys->dims[d];
      orank++;
    }
  if (orank != os->rank) goto mismatch;
  for (int d = 0; d < orank; d++)
    if (odims[d] != os->dims[d]) goto mismatch;
  bool fl = hlo_dtype_is_float(os->dt) || hlo_dtype_is_float(xs->dt) || hlo_dtype_is_float(ys->dt);
  if (hlo_dtype_kind(os->dt) == DK_OTHER) goto mismatch;
  Literal *r = new_lit(st, os);
  if (hlo_dtype_is_complex(os->dt)) {
    interp_complex_dot(x, y, lperm, rperm, B, M, K, N, r);
    return r;
  }
  void *L = pack_operand(x, lperm, fl), *R = pack_operand(y, rperm, fl);
  int64_t on = B * M * N;
  void *acc = calloc((size_t)(on ? on : 1), 8);
  HLO_ASSERT(acc);
  /* fp8 operands (or result) accumulate in f32, as the targets do: each product and sum
     rounded to f32 (a double operation on floats rounded to float is the float operation) */
  bool f32acc = fl && os->dt != DT_F64 &&
                (hlo_dtype_is_fp8(os->dt) || hlo_dtype_is_fp8(xs->dt) || hlo_dtype_is_fp8(ys->dt));
  for (int64_t b = 0; b < B; b++)
    for (int64_t i = 0; i < M; i++) {
      if (f32acc) {
        double *o = (double *)acc + (b * M + i) * N;
        const double *l = (const double *)L + (b * M + i) * K;
        for (int64_t k = 0; k < K; k++) {
          double lv = l[k];
          const double *rr = (const double *)R + (b * K + k) * N;
          for (int64_t j = 0; j < N; j++)
            o[j] = (float)(o[j] + (double)(float)(lv * rr[j]));
        }
      } else if (fl) {
        double *o = (double *)acc + (b * M + i) * N;
        const double *l = (const double *)L + (b * M + i) * K;
        for (int64_t k = 0; k < K; k++) {
          double lv = l[k];
          const double *rr = (const double *)R + (b * K + k) * N;
          for (int64_t j = 0; j < N; j++)
            o[j] += lv * rr[j];
        }
      } else {
        uint64_t *o = (uint64_t *)acc + (b * M + i) * N;
        const int64_t *l = (const int64_t *)L + (b * M + i) * K;
        for (int64_t k = 0; k < K; k++) {
          uint64_t lv = (uint64_t)l[k];
          const int64_t *rr = (const int64_t *)R + (b * K + k) * N;
          for (int64_t j = 0; j < N; j++)
            o[j] += lv * (uint64_t)rr[j];
        }
      }
    }
  for (int64_t i = 0; i < on; i++) {
    if (fl)
      hlo_store_f64(os->dt, r->data, i, ((double *)acc)[i]);
    else
      hlo_store_i64(os->dt, r->data, i, ((int64_t *)acc)[i]);
  }
  free(L);
  free(R);
  free(acc);
  return r;
mismatch:
  hlo_err_at(err, in, "dot of %s and %s does not give %s", shape_s(st, xs), shape_s(st, ys),
             shape_s(st, os));
  return NULL;
}

/* ------------------------------------------------------------------ sort */

typedef struct SortCtx {
  IState *st;           /* interpreter state */
  const HInstr *in;     /* the sort instruction */
  HComp *cmp;           /* comparator */
  int n;                /* number of operands */
  Literal *const *ops;  /* operands */
  Literal **args;       /* 2n scalar argument literals */
  int64_t base, stride; /* current row: element k is at base + k * stride */
  HOp fast_dir;         /* OP_COMPARE when the comparator is compare(p0, p1) */
  CmpDir dir;           /* fast comparator direction */
  CmpType ctype;        /* fast comparator type */
  HErr *err;            /* error sink */
  bool failed;          /* an error occurred */
} SortCtx;

/* Whether element a sorts strictly before element b (row positions). */
static bool sort_less(SortCtx *s, int64_t a, int64_t b) {
  if (s->failed) return false;
  int64_t ia = s->base + a * s->stride, ib = s->base + b * s->stride;
  if (s->fast_dir == OP_COMPARE)
    return cmp_elems(s->ops[0]->shape.dt, s->dir, s->ctype, s->ops[0]->data, ia, s->ops[0]->data,
                     ib);
  for (int i = 0; i < s->n; i++) {
    size_t es = hlo_dtype_size(s->ops[i]->shape.dt);
    memcpy(s->args[2 * i]->data, (char *)s->ops[i]->data + (size_t)ia * es, es);
    memcpy(s->args[2 * i + 1]->data, (char *)s->ops[i]->data + (size_t)ib * es, es);
  }
  Literal *v = scratch_call(s->st, s->cmp, s->args, 2 * s->n, s->err);
  bool r = false;
  if (!v || !pred_value(s->in, v, &r, s->err)) {
    s->failed = true;
    return false;
  }
  return r;
}

/* Stable merge sort of perm[0..n) using tmp as scratch. */
static void merge_sort(SortCtx *s, int64_t *perm, int64_t *tmp, int64_t n) {
  if (n < 2) return;
  if (n <= 8) { /* insertion sort: stable */
    for (int64_t i = 1; i < n; i++) {
      int64_t v = perm[i], j = i;
      while (j > 0 && sort_less(s, v, perm[j - 1])) {
        perm[j] = perm[j - 1];
        j--;
      }
      perm[j] = v;
    }
    return;
  }
  int64_t h = n / 2;
  merge_sort(s, perm, tmp, h);
  merge_sort(s, perm + h, tmp, n - h);
  int64_t i = 0, j = h, k = 0;
  while (i < h && j < n)
    tmp[k++] = sort_less(s, perm[j], perm[i]) ? perm[j++] : perm[i++];
  while (i < h)
    tmp[k++] = perm[i++];
  while (j < n)
    tmp[k++] = perm[j++];
  memcpy(perm, tmp, sizeof(int64_t) * (size_t)n);
}

static Literal *eval_sort(IState *st, const HInstr *in, Literal *const *ops, HErr *err) {
  HComp *c = in->ncalls ? in->calls[0] : NULL;
  int n = in->nops;
  if (!c || n < 1 || in->dims.n != 1) {
    hlo_err_at(err, in, "sort needs operands, one dimension and a comparator");
    return NULL;
  }
  const Shape *xs = &ops[0]->shape;
  int64_t dim = in->dims.v[0];
  if (!hlo_shape_is_array(xs) || dim < 0 || dim >= xs->rank) {
    hlo_err_at(err, in, "sort dimension %lld invalid", (long long)dim);
    return NULL;
  }
  for (int i = 0; i < n; i++) {
    const Shape *want = n == 1                                              ? &in->shape
                        : in->shape.dt == DT_TUPLE && in->shape.ntuple == n ? &in->shape.tuple[i]
                                                                            : NULL;
    if (!want || !hlo_shape_eq(want, &ops[i]->shape) || !hlo_shape_same_dims(&ops[i]->shape, xs)) {
      hlo_err_at(err, in, "sort operand %d does not match the result", i);
      return NULL;
    }
  }
  Literal *res = new_lit(st, &in->shape);
  SortCtx s = {.st = st, .in = in, .cmp = c, .n = n, .ops = ops, .err = err};
  s.args = hlo_arena_alloc(st->arena, sizeof(Literal *) * (size_t)(2 * n));
  for (int i = 0; i < 2 * n; i++) {
    Shape sc = hlo_shape_scalar(ops[i / 2]->shape.dt);
    s.args[i] = new_lit(st, &sc);
  }
  /* comparator `compare(p0, p1)` on the first operand: compare directly */
  const HInstr *root = c->root;
  s.fast_dir = OP_PARAMETER;
  if (root && root->op == OP_COMPARE && root->nops == 2 && root->ops[0]->op == OP_PARAMETER &&
      root->ops[1]->op == OP_PARAMETER && root->ops[0]->param_num == 0 &&
      root->ops[1]->param_num == 1 && root->ops[0]->shape.dt == xs->dt &&
      root->ops[1]->shape.dt == xs->dt) {
    s.fast_dir = OP_COMPARE;
    s.dir = root->cmp_dir;
    s.ctype = root->cmp_type;
  }
  int64_t str[HLO_MAX_RANK];
  hlo_shape_strides(xs, str);
  int64_t len = xs->dims[dim], total = hlo_shape_elems(xs);
  int64_t rows = len ? total / len : 0;
  int64_t *perm = malloc(sizeof(int64_t) * (size_t)(len ? 2 * len : 1));
  HLO_ASSERT(perm);
  int64_t odims[HLO_MAX_RANK], oidx[HLO_MAX_RANK] = {0}, ostr[HLO_MAX_RANK];
  int orank = 0;
  for (int d = 0; d < xs->rank; d++)
    if (d != dim) {
      odims[orank] = xs->dims[d];
      ostr[orank++] = str[d];
    }
  for (int64_t row = 0; row < rows && !s.failed; row++) {
    s.base = 0;
    for (int d = 0; d < orank; d++)
      s.base += oidx[d] * ostr[d];
    s.stride = str[dim];
    for (int64_t k = 0; k < len; k++)
      perm[k] = k;
    merge_sort(&s, perm, perm + len, len);
    for (int i = 0; i < n; i++) {
      Literal *o = n == 1 ? res : res->elems[i];
      size_t es = hlo_dtype_size(ops[i]->shape.dt);
      for (int64_t k = 0; k < len; k++)
        memcpy((char *)o->data + (size_t)(s.base + k * s.stride) * es,
               (char *)ops[i]->data + (size_t)(s.base + perm[k] * s.stride) * es, es);
    }
    next_index(orank, odims, oidx);
  }
  free(perm);
  return s.failed ? NULL : res;
}

/* topk: per row of the last dim, the k largest (smallest) values by a stable sort in total
 * order (NaN above +inf, -NaN below -inf; ties keep index order, as XLA orders them) and
 * their s32 indices. XLA's TopK custom-call (operand [batch, n], the largest k) is the same. */
static Literal *eval_topk(IState *st, const HInstr *in, Literal *const *ops, HErr *err) {
  const Shape *xs = &ops[0]->shape;
  if (!hlo_shape_is_tuple(&in->shape) || in->shape.ntuple != 2 || xs->rank < 1) {
    hlo_err_at(err, in, "topk needs an array operand and a (values, indices) result");
    return NULL;
  }
  bool largest = in->op == OP_CUSTOM_CALL || in->largest;
  int64_t len = xs->dims[xs->rank - 1], k = in->shape.tuple[0].dims[xs->rank - 1];
  int64_t rows = len ? hlo_shape_elems(xs) / len : 0;
  Literal *res = new_lit(st, &in->shape);
  SortCtx s = {.st = st, .in = in, .n = 1, .ops = ops, .err = err, .stride = 1};
  s.fast_dir = OP_COMPARE;
  s.dir = largest ? CMP_GT : CMP_LT;
  s.ctype = hlo_dtype_is_float(xs->dt)          ? CMPT_TOTALORDER
            : hlo_dtype_kind(xs->dt) == DK_SINT ? CMPT_SIGNED
                                                : CMPT_UNSIGNED;
  int64_t *perm = malloc(sizeof(int64_t) * (size_t)(len ? 2 * len : 1));
  HLO_ASSERT(perm);
  size_t es = hlo_dtype_size(xs->dt);
  for (int64_t r = 0; r < rows; r++) {
    s.base = r * len;
    for (int64_t j = 0; j < len; j++)
      perm[j] = j;
    merge_sort(&s, perm, perm + len, len);
    for (int64_t j = 0; j < k; j++) {
      memcpy((char *)res->elems[0]->data + (size_t)(r * k + j) * es,
             (char *)ops[0]->data + (size_t)(s.base + perm[j]) * es, es);
      hlo_literal_set_i64(res->elems[1], r * k + j, perm[j]);
    }
  }
  free(perm);
  return res;
}

/* ------------------------------------------------------------------ batch norm */

/* Per-feature geometry: element i of the operand belongs to feature (i / inner) % nf. */
static bool bn_geometry(IState *st, const HInstr *in, const Literal *x, int64_t *nf, int64_t *inner,
                        HErr *err) {
  const Shape *xs = &x->shape;
  if (!hlo_shape_is_array(xs) || !hlo_dtype_is_float(xs->dt) || in->feature_index < 0 ||
      in->feature_index >= xs->rank) {
    hlo_err_at(err, in, "feature_index %lld invalid for %s", (long long)in->feature_index,
               shape_s(st, xs));
    return false;
  }
  *nf = xs->dims[in->feature_index];
  *inner = 1;
  for (int d = (int)in->feature_index + 1; d < xs->rank; d++)
    *inner *= xs->dims[d];
  return true;
}

static bool bn_vec(IState *st, const HInstr *in, const Literal *v, int64_t nf, const char *what,
                   HErr *err) {
  if (hlo_shape_is_array(&v->shape) && v->shape.rank == 1 && v->shape.dims[0] == nf &&
      hlo_dtype_is_float(v->shape.dt))
    return true;
  hlo_err_at(err, in, "%s must be a float vector of %lld features, got %s", what, (long long)nf,
             shape_s(st, &v->shape));
  return false;
}

static Literal *eval_batch_norm(IState *st, const HInstr *in, Literal *const *ops, HErr *err) {
  const Literal *x = ops[0];
  int64_t nf, inner;
  if (!bn_geometry(st, in, x, &nf, &inner, err)) return NULL;
  DType t = x->shape.dt;
  int64_t n = hlo_shape_elems(&x->shape), per = nf ? n / nf : 0;
  double eps = in->epsilon;
  const char *names[5];
  int nv;
  switch ((int)in->op) {
  case OP_BATCH_NORM_INFERENCE:
    names[0] = "scale", names[1] = "offset", names[2] = "mean", names[3] = "variance", nv = 4;
    break;
  case OP_BATCH_NORM_TRAINING: names[0] = "scale", names[1] = "offset", nv = 2; break;
  default: names[0] = "scale", names[1] = "mean", names[2] = "variance", nv = 3; break;
  }
  for (int i = 0; i < nv; i++)
    if (!bn_vec(st, in, ops[1 + i], nf, names[i], err)) return NULL;
  const Shape *want0 = in->op == OP_BATCH_NORM_INFERENCE                   ? &in->shape
                       : in->shape.dt == DT_TUPLE && in->shape.ntuple == 3 ? &in->shape.tuple[0]
                                                                           : NULL;
  if (!want0 || !hlo_shape_eq(want0, &x->shape)) {
    hlo_err_at(err, in, "result shape %s does not fit operand %s", shape_s(st, &in->shape),
               shape_s(st, &x->shape));
    return NULL;
  }
  if (in->op == OP_BATCH_NORM_GRAD && !hlo_shape_eq(&ops[4]->shape, &x->shape)) {
    hlo_err_at(err, in, "grad_output must have the operand's shape");
    return NULL;
  }
  Literal *res = new_lit(st, &in->shape);
  Literal *out = in->op == OP_BATCH_NORM_INFERENCE ? res : res->elems[0];
  double *mean = calloc((size_t)(nf ? nf : 1), sizeof(double));
  double *var = calloc((size_t)(nf ? nf : 1), sizeof(double));
  double *s1 = calloc((size_t)(nf ? nf : 1), sizeof(double));
  double *s2 = calloc((size_t)(nf ? nf : 1), sizeof(double));
  HLO_ASSERT(mean && var && s1 && s2);
#define FEAT(i) (((i) / inner) % nf)
#define VEC(l, f) hlo_load_f64((l)->shape.dt, (l)->data, f)
  if (in->op == OP_BATCH_NORM_TRAINING) {
    for (int64_t i = 0; i < n; i++)
      mean[FEAT(i)] += hlo_load_f64(t, x->data, i);
    for (int64_t f = 0; f < nf; f++)
      mean[f] /= (double)(per ? per : 1);
    for (int64_t i = 0; i < n; i++) {
      double dv = hlo_load_f64(t, x->data, i) - mean[FEAT(i)];
      var[FEAT(i)] += dv * dv;
    }
    for (int64_t f = 0; f < nf; f++)
      var[f] /= (double)(per ? per : 1);
  } else {
    int mi = in->op == OP_BATCH_NORM_INFERENCE ? 3 : 2;
    for (int64_t f = 0; f < nf; f++) {
      mean[f] = VEC(ops[mi], f);
      var[f] = VEC(ops[mi + 1], f);
    }
  }
  if (in->op == OP_BATCH_NORM_GRAD) {
    const Literal *gy = ops[4];
    for (int64_t i = 0; i < n; i++) {
      int64_t f = FEAT(i);
      double g = hlo_load_f64(gy->shape.dt, gy->data, i);
      s1[f] += g;
      s2[f] += g * (hlo_load_f64(t, x->data, i) - mean[f]);
    }
    for (int64_t i = 0; i < n; i++) {
      int64_t f = FEAT(i);
      double rs = 1.0 / sqrt(var[f] + eps), g = hlo_load_f64(gy->shape.dt, gy->data, i);
      double xc = hlo_load_f64(t, x->data, i) - mean[f];
      double gx = VEC(ops[1], f) * rs / (double)per *
                  ((double)per * g - s1[f] - xc * s2[f] / (var[f] + eps));
      hlo_store_f64(t, out->data, i, gx);
    }
    for (int64_t f = 0; f < nf; f++) {
      hlo_store_f64(res->elems[1]->shape.dt, res->elems[1]->data, f, s2[f] / sqrt(var[f] + eps));
      hlo_store_f64(res->elems[2]->shape.dt, res->elems[2]->data, f, s1[f]);
    }
  } else {
    for (int64_t i = 0; i < n; i++) {
      int64_t f = FEAT(i);
      double y = (hlo_load_f64(t, x->data, i) - mean[f]) / sqrt(var[f] + eps) * VEC(ops[1], f) +
                 VEC(ops[2], f);
      hlo_store_f64(t, out->data, i, y);
    }
    if (in->op == OP_BATCH_NORM_TRAINING)
      for (int64_t f = 0; f < nf; f++) {
        hlo_store_f64(res->elems[1]->shape.dt, res->elems[1]->data, f, mean[f]);
        hlo_store_f64(res->elems[2]->shape.dt, res->elems[2]->data, f, var[f]);
      }
  }
#undef FEAT
#undef VEC
  free(mean);
  free(var);
  free(s1);
  free(s2);
  bool ok = in->op == OP_BATCH_NORM_INFERENCE ||
            (hlo_shape_is_array(&res->elems[1]->shape) && res->elems[1]->shape.rank == 1 &&
             res->elems[1]->shape.dims[0] == nf && hlo_shape_is_array(&res->elems[2]->shape) &&
             res->elems[2]->shape.rank == 1 && res->elems[2]->shape.dims[0] == nf);
  if (!ok) {
    hlo_err_at(err, in, "result shape %s does not fit %lld features", shape_s(st, &in->shape),
               (long long)nf);
    return NULL;
  }
  return res;
}

/* ------------------------------------------------------------------ dispatch */

static Literal *unsupported(const HInstr *in, HErr *err) {
  hlo_err_at(err, in, "op %s is not supported by the interpreter", hlo_op_name(in->op));
  return NULL;
}

static Literal *eval_instr(IState *st, HInstr *in, Literal *const *ops, Literal *const *args,
                           int nargs, HErr *err) {
  switch (in->op) {
  case OP_PARAMETER: {
    if (in->param_num < 0 || in->param_num >= nargs) {
      hlo_err_at(err, in, "parameter %lld has no argument (%d given)", (long long)in->param_num,
                 nargs);
      return NULL;
    }
    Literal *a = args[in->param_num];
    if (!hlo_shape_eq(&a->shape, &in->shape)) {
      hlo_err_at(err, in, "argument %lld is %s, parameter is %s", (long long)in->param_num,
                 shape_s(st, &a->shape), shape_s(st, &in->shape));
      return NULL;
    }
    return a;
  }
  case OP_CONSTANT:
    if (!in->literal) {
      hlo_err_at(err, in,
                 "the constant's value was elided in the input ({...}): its data is lost; "
                 "read the module's .pb, dump with --xla_dump_large_constants, or give it "
                 "values with --elided-constants=zero|random");
      return NULL;
    }
    return in->literal;
  case OP_IOTA: return eval_iota(st, in, err);

  case OP_ABS:
  case OP_CBRT:
  case OP_CEIL:
  case OP_COSINE:
  case OP_CLZ:
  case OP_ERF:
  case OP_EXP:
  case OP_EXPM1:
  case OP_FLOOR:
  case OP_IS_FINITE:
  case OP_LOG:
  case OP_LOG1P:
  case OP_LOGISTIC:
  case OP_NEGATE:
  case OP_NOT:
  case OP_POPCNT:
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
  case OP_SINH: return eval_unary(st, in, ops[0], err);
  case OP_COPY:
    if (!hlo_shape_eq(&ops[0]->shape, &in->shape)) {
      hlo_err_at(err, in, "copy changes the shape");
      return NULL;
    }
    return ops[0];
  case OP_CONVERT: return eval_convert(st, in, ops[0], err);
  case OP_IMAG:
  case OP_REAL: return interp_complex_unary(st, in, ops[0], err);
  case OP_COMPLEX: return interp_complex_make(st, in, ops[0], ops[1], err);
  case OP_FFT: return interp_fft(st, in, ops[0], err);
  case OP_BITCAST_CONVERT: return eval_bitcast_convert(st, in, ops[0], err);
  case OP_REDUCE_PRECISION: return eval_reduce_precision(st, in, ops[0], err);

  case OP_ADD:
  case OP_SUBTRACT:
  case OP_MULTIPLY:
  case OP_DIVIDE:
  case OP_REMAINDER:
  case OP_POWER:
  case OP_ATAN2:
  case OP_MAXIMUM:
  case OP_MINIMUM:
  case OP_MULHI:
  case OP_AND:
  case OP_OR:
  case OP_XOR:
  case OP_SHL:
  case OP_SHR_ARITH:
  case OP_SHR_LOGICAL: return eval_binary(st, in, ops[0], ops[1], err);
  case OP_COMPARE: return eval_compare(st, in, ops[0], ops[1], err);
  case OP_SELECT: return eval_select(st, in, ops, err);
  case OP_CLAMP: return eval_clamp(st, in, ops, err);
  case OP_MAP: return eval_map(st, in, ops, err);

  case OP_REDUCE: return eval_reduce(st, in, ops, err);
  case OP_REDUCE_WINDOW: return interp_reduce_window(st, in, ops, err);
  case OP_SELECT_AND_SCATTER: return interp_select_and_scatter(st, in, ops, err);
  case OP_SORT: return eval_sort(st, in, ops, err);
  case OP_TOPK: return eval_topk(st, in, ops, err);
  case OP_BATCH_NORM_TRAINING:
  case OP_BATCH_NORM_INFERENCE:
  case OP_BATCH_NORM_GRAD: return eval_batch_norm(st, in, ops, err);

  case OP_DOT: return eval_dot(st, in, ops[0], ops[1], err);
  case OP_CONVOLUTION: return interp_convolution(st, in, ops, err);

  case OP_BITCAST:
  case OP_RESHAPE: return eval_reshape(st, in, ops[0], err);
  case OP_BROADCAST: return eval_broadcast(st, in, ops[0], err);
  case OP_TRANSPOSE: return eval_transpose(st, in, ops[0], err);
  case OP_REVERSE: return eval_reverse(st, in, ops[0], err);
  case OP_SLICE: return eval_slice(st, in, ops[0], err);
  case OP_CONCATENATE: return eval_concatenate(st, in, ops, err);
  case OP_PAD: return interp_pad(st, in, ops, err);
  case OP_DYNAMIC_SLICE: return interp_dynamic_slice(st, in, ops, err);
  case OP_DYNAMIC_UPDATE_SLICE: return interp_dynamic_update_slice(st, in, ops, err);
  case OP_GATHER: return interp_gather(st, in, ops, err);
  case OP_SCATTER: return interp_scatter(st, in, ops, err);
  case OP_TUPLE: {
    if (in->shape.dt != DT_TUPLE || in->shape.ntuple != in->nops) {
      hlo_err_at(err, in, "tuple of %d operands has shape %s", in->nops, shape_s(st, &in->shape));
      return NULL;
    }
    Literal *t = hlo_arena_alloc(st->arena, sizeof *t);
    hlo_shape_copy(st->arena, &t->shape, &in->shape);
    t->elems = hlo_arena_alloc(st->arena, sizeof(Literal *) * (size_t)(in->nops ? in->nops : 1));
    for (int i = 0; i < in->nops; i++)
      t->elems[i] = ops[i];
    return t;
  }
  case OP_GET_TUPLE_ELEMENT: {
    const Literal *t = ops[0];
    if (t->shape.dt != DT_TUPLE || in->tuple_index < 0 || in->tuple_index >= t->shape.ntuple) {
      hlo_err_at(err, in, "tuple index %lld invalid for %s", (long long)in->tuple_index,
                 shape_s(st, &t->shape));
      return NULL;
    }
    return t->elems[in->tuple_index];
  }

  case OP_CALL:
  case OP_FUSION:
    return eval_call_like(st, in, in->ncalls ? in->calls[0] : NULL, ops, in->nops, err);
  case OP_CONDITIONAL: return eval_conditional(st, in, ops, err);
  case OP_WHILE: return eval_while(st, in, ops[0], err);
  case OP_OPT_BARRIER: return ops[0];
  case OP_ADD_DEPENDENCY: return ops[0];
  case OP_AFTER_ALL: {
    Shape tok = hlo_shape_scalar(DT_TOKEN);
    return new_lit(st, &tok);
  }
  case OP_CUSTOM_CALL:
    if (hlo_custom_call_is_identity(in)) return ops[0];
    if (hlo_custom_call_is_topk(in)) return eval_topk(st, in, ops, err);
    hlo_err_at(err, in, "unsupported custom-call target %s",
               in->custom_call_target ? in->custom_call_target : "(none)");
    return NULL;

  case OP_PARTITION_ID:
  case OP_REPLICA_ID:
  case OP_RNG_GET_AND_UPDATE_STATE:
  case OP_STOCHASTIC_CONVERT:
  case OP_SCAN:
  case OP_CHOLESKY:
  case OP_TRIANGULAR_SOLVE:
  case OP_RAGGED_DOT:
  case OP_SCALED_DOT:
  case OP_COPY_START:
  case OP_COPY_DONE:
  case OP_SHUFFLE:
  case OP_GET_DIMENSION_SIZE:
  case OP_SET_DIMENSION_SIZE:
  case OP_DYNAMIC_RESHAPE:
  case OP_ASYNC_START:
  case OP_ASYNC_UPDATE:
  case OP_ASYNC_DONE:
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
  case OP_RNG_BIT_GENERATOR:
  case OP_COUNT: return unsupported(in, err);
  }
  return unsupported(in, err);
}

/* Evaluate c on args; values live in st->arena (or share data with operands and args). */
static Literal *eval_comp(IState *st, HComp *c, Literal *const *args, int nargs, HErr *err) {
  if (!c->root || c->ninstrs == 0) {
    hlo_err_comp(err, c, "computation has no root instruction");
    return NULL;
  }
  if (st->depth >= INTERP_MAX_DEPTH) {
    hlo_err_comp(err, c, "computations nested deeper than %d (recursive call?)", INTERP_MAX_DEPTH);
    return NULL;
  }
  bool numbered = c->params != NULL;
  for (int i = 0; numbered && i < c->ninstrs; i++)
    numbered = c->instrs[i]->idx == i;
  if (!numbered) hlo_comp_renumber(c);
  if (nargs != c->nparams) {
    hlo_err_comp(err, c, "called with %d argument(s), has %d parameter(s)", nargs, c->nparams);
    return NULL;
  }
  st->depth++;
  Literal *stackv[64];
  Literal **vals = c->ninstrs <= 64 ? stackv : malloc(sizeof(Literal *) * (size_t)c->ninstrs);
  HLO_ASSERT(vals);
  Literal *opbuf[8];
  Literal *result = NULL;
  for (int i = 0; i < c->ninstrs; i++) {
    HInstr *in = c->instrs[i];
    Literal **ops = in->nops <= 8 ? opbuf : malloc(sizeof(Literal *) * (size_t)in->nops);
    HLO_ASSERT(ops);
    bool ok = true;
    for (int k = 0; k < in->nops && ok; k++) {
      HInstr *o = in->ops[k];
      ok = o && o->parent == c && o->idx < i && c->instrs[o->idx] == o;
      if (ok) ops[k] = vals[o->idx];
    }
    if (!ok) {
      hlo_err_at(err, in, "operand is not an earlier instruction of the same computation");
    } else {
      int arity = hlo_op_arity(in->op);
      if (arity >= 0 && in->nops != arity) {
        hlo_err_at(err, in, "%s has %d operands, expects %d", hlo_op_name(in->op), in->nops, arity);
        ok = false;
      }
    }
    Literal *v = ok ? eval_instr(st, in, ops, args, nargs, err) : NULL;
    if (ops != opbuf) free(ops);
    if (v && !hlo_shape_eq(&v->shape, &in->shape)) {
      hlo_err_at(err, in, "evaluates to %s but is declared %s", shape_s(st, &v->shape),
                 shape_s(st, &in->shape));
      v = NULL;
    }
    if (!v) {
      if (!err || !err->set) hlo_err_at(err, in, "evaluation failed");
      goto done;
    }
    vals[i] = v;
  }
  if (c->root->parent != c || c->instrs[c->root->idx] != c->root) {
    hlo_err_comp(err, c, "root is not an instruction of the computation");
    goto done;
  }
  result = vals[c->root->idx];
done:
  if (vals != stackv) free(vals);
  st->depth--;
  return result;
}

/* ------------------------------------------------------------------ entry points */

static Literal *run_with_state(HComp *c, HArena *a, Literal *const *args, int nargs, HErr *err) {
  IState st = {.arena = a};
  Literal *r = eval_comp(&st, c, args, nargs, err);
  if (st.scratch) hlo_arena_free(st.scratch);
  /* the result may share data with arguments or constants: give the caller its own copy */
  return r ? deep_clone(a, r) : NULL;
}

Literal *hlo_interp_comp(HComp *c, HArena *a, Literal *const *args, int nargs, HErr *err) {
  return run_with_state(c, a, args, nargs, err);
}

Literal *hlo_interp_run(HModule *m, HArena *a, Literal *const *args, int nargs, HErr *err) {
  HComp *c = m->entry;
  if (!c) {
    hlo_err(err, m->file, NULL, NULL, "module has no entry computation");
    return NULL;
  }
  hlo_comp_renumber(c);
  if (nargs != c->nparams) {
    hlo_err_comp(err, c, "entry computation takes %d argument(s), %d given", c->nparams, nargs);
    return NULL;
  }
  for (int i = 0; i < nargs; i++) {
    const HInstr *p = c->params[i];
    if (!p) {
      hlo_err_comp(err, c, "entry computation has no parameter %d", i);
      return NULL;
    }
    if (!args[i] || !hlo_shape_eq(&args[i]->shape, &p->shape)) {
      char got[256], want[256];
      if (args[i])
        hlo_shape_snprint(got, sizeof got, &args[i]->shape, false);
      else
        snprintf(got, sizeof got, "nothing");
      hlo_shape_snprint(want, sizeof want, &p->shape, false);
      hlo_err_at(err, p, "argument %d for parameter '%s' is %s, expected %s", i, p->name, got,
                 want);
      return NULL;
    }
  }
  return run_with_state(c, a, args, nargs, err);
}
