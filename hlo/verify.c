/* hlo/verify.c: the HLO verifier and XLA's shape inference.
 *
 * hlo_verify checks a whole module in three phases, stopping at the first problem, which it
 * reports as one located line (file, computation, instruction, what is wrong, and for shape
 * problems the expected and the actual shape):
 *   1. structure, per computation: the module has an entry that belongs to it; computation
 *      names and instruction names are unique; every computation is non-empty and its root
 *      is one of its own instructions; every operand and control predecessor is an earlier
 *      instruction of the same computation (so the array order is a dependency order and
 *      there are no cycles); parameter numbers are 0..n-1, each exactly once; operand counts
 *      match the op's arity; declared shapes are well formed (known element types, ranks
 *      within bounds, layouts that are permutations); called computations belong to the
 *      module. After this phase the derived data (idx, params[]) is refreshed with
 *      hlo_comp_renumber.
 *   2. the call graph is acyclic (depth-first search with three colours; a computation that
 *      calls itself is the smallest cycle), and the entry layout, when the module has one,
 *      agrees with the entry parameters and root, layouts included.
 *   3. every instruction's declared shape is equal (element types and dims; layouts are not
 *      compared) to the shape hlo_infer_shape derives from its operands,
 *      attributes and called computations. Signatures of called computations (reducers,
 *      comparators, loop bodies, branches, fused computations) are checked by inference,
 *      since XLA derives the result shape from them.
 *
 * hlo_infer_shape follows XLA's ShapeInference op by op. It reads operands, attributes and
 * called computations, never the result, except where the information only exists there
 * (HLO has no attribute for it). Ops that take information from in->shape:
 *   - convert, bitcast-convert, stochastic-convert: the target element type (in->shape.dt);
 *   - dot, convolution: the result element type (XLA's preferred_element_type); when
 *     in->shape.dt is DT_INVALID (a new instruction) the lhs element type is used;
 *   - broadcast: the output dims (operand dims must appear at out[dims[i]]); element type is
 *     the operand's;
 *   - reshape: the output dims (same element count); element type is the operand's;
 *   - iota: the whole shape (the iota dimension must be in range);
 *   - bitcast: the whole shape with its layout (same byte size as the operand);
 *   - parameter, custom-call, rng-bit-generator, the dynamic-shape ops, ops whose attributes
 *     hloc does not model (topk, triangular-solve, ragged-dot, scaled-dot, scan) and all
 *     OPF_SIDE ops (collectives, send/recv, infeed/outfeed, async, ...): the whole shape, as
 *     given, checked only for being well formed (the targets reject what they cannot run).
 *     all-reduce-like ops still get their reducer checked.
 * Every other op ignores in->shape, so a pass can fill a new instruction's shape with it.
 * Complex types follow XLA's rules: add, subtract, multiply, divide, power, negate, sign and
 * the floating-or-complex unary ops (exp, log, sqrt, rsqrt, cbrt, sin, cos, tan, tanh,
 * logistic, expm1, log1p) take them; abs, real and imag give the component type (real and
 * imag of a float its own type); complex(f32, f32) is c64 and complex(f64, f64) c128; compare
 * is EQ or NE only; convert goes from any numeric type to complex and between complex types,
 * never from complex to real; dot takes two complex operands; fft as InferFftShape.
 * Inferred array shapes carry the default (row-major) layout, except those taken as given,
 * which keep in->shape's layout. Tuple shapes are allocated in the arena passed in.
 *
 * Requires: operands point to instructions whose shapes are well formed (hlo_verify checks
 * them in dependency order, so each operand was checked before its users). Inference is
 * self-contained otherwise: it finds the parameters of called computations by scanning, so a
 * stale params[] table does no harm. */
#include "hlo.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ messages */

/* Shape text for messages: a small ring of buffers so one message can print several. */
static const char *shape_txt(const Shape *s, bool layout) {
  static _Thread_local char ring[8][512];
  static _Thread_local int k;
  char *b = ring[k++ & 7];
  hlo_shape_snprint(b, sizeof ring[0], s, layout);
  return b;
}
#define SS(s) shape_txt((s), false)
#define SSL(s) shape_txt((s), true)

/* Report a problem at instruction `in`; returns false so callers can `return bad(...)`. */
static bool bad(HErr *err, const HInstr *in, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static bool bad(HErr *err, const HInstr *in, const char *fmt, ...) {
  const HComp *c = in ? in->parent : NULL;
  va_list ap;
  va_start(ap, fmt);
  hlo_verr(err, c && c->mod ? c->mod->file : NULL, c ? c->name : NULL, in ? in->name : NULL, fmt,
           ap);
  va_end(ap);
  return false;
}

static bool bad_comp(HErr *err, const HComp *c, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static bool bad_comp(HErr *err, const HComp *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  hlo_verr(err, c && c->mod ? c->mod->file : NULL, c ? c->name : NULL, NULL, fmt, ap);
  va_end(ap);
  return false;
}

static const char *opname(const HInstr *in) { return hlo_op_name(in->op); }

/* ------------------------------------------------------------------ shape helpers */

static bool is_arr(const Shape *s) {
  return s->dt != DT_INVALID && s->dt < DT_COUNT && hlo_shape_is_array(s);
}
static bool is_float(DType t) { return hlo_dtype_kind(t) == DK_FLOAT; }
static bool is_int(DType t) { return hlo_dtype_kind(t) == DK_SINT || hlo_dtype_kind(t) == DK_UINT; }
static bool is_pred(DType t) { return t == DT_PRED; }
static bool is_num(DType t) { return is_float(t) || is_int(t); }
static bool is_cplx(DType t) { return hlo_dtype_is_complex(t); }

/* Well-formedness of a shape: a known element type, rank within bounds, no negative dims,
 * a layout that is a permutation, tuples with element arrays. NULL when fine, else why. */
static const char *shape_problem(const Shape *s, int depth) {
  if (depth > 64) return "tuple nesting too deep";
  if (s->dt == DT_INVALID || s->dt >= DT_COUNT) return "invalid element type";
  if (s->dt == DT_TUPLE) {
    if (s->rank != 0) return "tuple with dimensions";
    if (s->ntuple < 0 || (s->ntuple > 0 && !s->tuple)) return "tuple without elements";
    for (int i = 0; i < s->ntuple; i++) {
      const char *p = shape_problem(&s->tuple[i], depth + 1);
      if (p) return p;
    }
    return NULL;
  }
  if (s->dt == DT_TOKEN) return s->rank == 0 ? NULL : "token with dimensions";
  if (s->rank < 0 || s->rank > HLO_MAX_RANK) return "rank out of range";
  for (int i = 0; i < s->rank; i++)
    if (s->dims[i] < 0) return "negative dimension size";
  if (s->has_layout) {
    bool seen[HLO_MAX_RANK] = {false};
    for (int i = 0; i < s->rank; i++) {
      int d = s->m2m[i];
      if (d < 0 || d >= s->rank || seen[d]) return "layout is not a permutation of the dims";
      seen[d] = true;
    }
  }
  return NULL;
}

/* Deep copy without layout details: default row-major layout everywhere. */
static void plain_layout(Shape *s) {
  if (s->dt == DT_TUPLE) {
    for (int i = 0; i < s->ntuple; i++)
      plain_layout(&s->tuple[i]);
    return;
  }
  s->layout_extra = NULL;
  hlo_shape_set_default_layout(s);
}
static void copy_plain(HArena *a, Shape *dst, const Shape *src) {
  hlo_shape_copy(a, dst, src);
  plain_layout(dst);
}

/* in->shape as a source of output dims only (broadcast, reshape): the element type may be
 * unset (DT_INVALID) in a new instruction, the dims must be sane. */
static bool dims_given(const Shape *s) {
  if (s->dt == DT_TUPLE || s->dt == DT_TOKEN || s->rank < 0 || s->rank > HLO_MAX_RANK) return false;
  for (int i = 0; i < s->rank; i++)
    if (s->dims[i] < 0) return false;
  return true;
}

static Shape arr(DType dt, int rank, const int64_t *dims) {
  return hlo_shape_array(dt, rank, dims);
}

/* Does list l contain v? */
/* A dimension-number list: within [0, bound), distinct, and strictly increasing when
 * `sorted`. what names it in the message. */
static bool check_dims(HErr *err, const HInstr *in, const IList *l, int64_t bound, bool sorted,
                       const char *what) {
  if (l->n < 0 || l->n > HLO_MAX_RANK) return bad(err, in, "%s has %d entries", what, l->n);
  for (int i = 0; i < l->n; i++) {
    if (l->v[i] < 0 || l->v[i] >= bound)
      return bad(err, in, "%s entry %lld is out of range [0, %lld)", what, (long long)l->v[i],
                 (long long)bound);
    for (int j = 0; j < i; j++)
      if (l->v[j] == l->v[i])
        return bad(err, in, "%s repeats dimension %lld", what, (long long)l->v[i]);
    if (sorted && i > 0 && l->v[i] < l->v[i - 1]) return bad(err, in, "%s must be sorted", what);
  }
  return true;
}

/* Operand k must be an array. */
static bool want_arr(HErr *err, const HInstr *in, int k) {
  if (!is_arr(&in->ops[k]->shape))
    return bad(err, in, "operand %d of %s must be an array, got %s", k, opname(in),
               SS(&in->ops[k]->shape));
  return true;
}

/* Operand k must be a scalar array. */
static bool want_scalar(HErr *err, const HInstr *in, int k, const char *role) {
  const Shape *s = &in->ops[k]->shape;
  if (!is_arr(s) || s->rank != 0)
    return bad(err, in, "%s (operand %d) must be a scalar, got %s", role, k, SS(s));
  return true;
}

/* ------------------------------------------------------------------ called computations */

/* Number of parameters of c (counted, not taken from params[]). */
static int comp_nparams(const HComp *c) {
  int n = 0;
  for (int i = 0; i < c->ninstrs; i++)
    if (c->instrs[i]->op == OP_PARAMETER) n++;
  return n;
}

/* Parameter number k of c: params[] when it is current, else a scan. NULL if absent. */
static const HInstr *comp_param(const HComp *c, int64_t k) {
  if (k >= 0 && k < c->nparams && c->params) {
    const HInstr *p = c->params[k];
    if (p && p->op == OP_PARAMETER && p->param_num == k && p->parent == c && p->idx >= 0 &&
        p->idx < c->ninstrs && c->instrs[p->idx] == p)
      return p;
  }
  for (int i = 0; i < c->ninstrs; i++)
    if (c->instrs[i]->op == OP_PARAMETER && c->instrs[i]->param_num == k) return c->instrs[i];
  return NULL;
}

/* Called computation k of in, in the role `role` ("to_apply", "body", ...). */
static const HComp *callee(HErr *err, const HInstr *in, int k, const char *role) {
  if (k >= in->ncalls || !in->calls || !in->calls[k]) {
    bad(err, in, "%s has no %s computation", opname(in), role);
    return NULL;
  }
  const HComp *c = in->calls[k];
  if (!c->root) {
    bad(err, in, "%s computation '%s' has no root", role, c->name);
    return NULL;
  }
  return c;
}

/* in must call exactly n computations. */
static bool want_ncalls(HErr *err, const HInstr *in, int n) {
  if (in->ncalls != n)
    return bad(err, in, "%s must call %d computation%s, it calls %d", opname(in), n,
               n == 1 ? "" : "s", in->ncalls);
  return true;
}

static bool want_nparams(HErr *err, const HInstr *in, const HComp *c, const char *role, int n) {
  int got = comp_nparams(c);
  if (got != n)
    return bad(err, in, "%s computation '%s' takes %d parameter%s, expected %d", role, c->name, got,
               got == 1 ? "" : "s", n);
  return true;
}

static bool want_param(HErr *err, const HInstr *in, const HComp *c, const char *role, int k,
                       const Shape *want) {
  const HInstr *p = comp_param(c, k);
  if (!p) return bad(err, in, "%s computation '%s' has no parameter %d", role, c->name, k);
  if (!hlo_shape_eq(&p->shape, want))
    return bad(err, in, "%s computation '%s' parameter %d has shape %s, expected %s", role, c->name,
               k, SS(&p->shape), SS(want));
  return true;
}

static bool want_root(HErr *err, const HInstr *in, const HComp *c, const char *role,
                      const Shape *want) {
  if (!hlo_shape_eq(&c->root->shape, want))
    return bad(err, in, "%s computation '%s' returns %s, expected %s", role, c->name,
               SS(&c->root->shape), SS(want));
  return true;
}

/* Scalars of types t[0..n-1]: one scalar for n == 1, else a tuple (XLA's variadic form). */
static Shape scalars(HArena *a, int n, const DType *t) {
  if (n == 1) return hlo_shape_scalar(t[0]);
  Shape *el = hlo_arena_alloc(a, sizeof(Shape) * (size_t)n);
  for (int i = 0; i < n; i++)
    el[i] = hlo_shape_scalar(t[i]);
  return hlo_shape_tuple(a, n, el);
}

/* A reducer of n values: parameters 0..n-1 are accumulators of types acc[], n..2n-1 the
 * incoming elements of types elem[]; it returns n accumulators (a tuple when n > 1). */
static bool check_reducer(HArena *a, HErr *err, const HInstr *in, const HComp *c, const char *role,
                          int n, const DType *acc, const DType *elem) {
  if (!want_nparams(err, in, c, role, 2 * n)) return false;
  for (int i = 0; i < n; i++) {
    Shape s = hlo_shape_scalar(acc[i]);
    if (!want_param(err, in, c, role, i, &s)) return false;
    s = hlo_shape_scalar(elem[i]);
    if (!want_param(err, in, c, role, n + i, &s)) return false;
  }
  Shape r = scalars(a, n, acc);
  return want_root(err, in, c, role, &r);
}

/* A computation whose parameters are the operands (call, fusion): returns its root shape. */
static bool check_operand_params(HArena *a, HErr *err, const HInstr *in, const char *role,
                                 Shape *out) {
  if (!want_ncalls(err, in, 1)) return false;
  const HComp *c = callee(err, in, 0, role);
  if (!c || !want_nparams(err, in, c, role, in->nops)) return false;
  for (int i = 0; i < in->nops; i++)
    if (!want_param(err, in, c, role, i, &in->ops[i]->shape)) return false;
  copy_plain(a, out, &c->root->shape);
  return true;
}

/* ------------------------------------------------------------------ elementwise */

typedef enum ElemKind {
  EK_NUM,      /* integers and floats */
  EK_NUM_PRED, /* integers, floats and pred */
  EK_SIGNED,   /* signed integers and floats */
  EK_FLOAT,    /* floats only */
  EK_INT,      /* integers only */
  EK_INT_PRED, /* integers and pred */
  EK_ANY,      /* any array element type */
  /* the same with the complex types (c64, c128) */
  EK_NUM_C,      /* integers, floats and complex */
  EK_NUM_PRED_C, /* integers, floats, pred and complex */
  EK_SIGNED_C,   /* signed integers, floats and complex */
  EK_FLOAT_C,    /* floats and complex */
} ElemKind;

static bool kind_ok(ElemKind k, DType t) {
  switch (k) {
  case EK_NUM: return is_num(t);
  case EK_NUM_PRED: return is_num(t) || is_pred(t);
  case EK_SIGNED: return is_float(t) || hlo_dtype_kind(t) == DK_SINT;
  case EK_FLOAT: return is_float(t);
  case EK_INT: return is_int(t);
  case EK_INT_PRED: return is_int(t) || is_pred(t);
  case EK_ANY: return true;
  case EK_NUM_C: return is_num(t) || is_cplx(t);
  case EK_NUM_PRED_C: return is_num(t) || is_pred(t) || is_cplx(t);
  case EK_SIGNED_C: return kind_ok(EK_SIGNED, t) || is_cplx(t);
  case EK_FLOAT_C: return is_float(t) || is_cplx(t);
  }
  return false;
}

static const char *kind_name(ElemKind k) {
  switch (k) {
  case EK_NUM: return "an integer or floating-point";
  case EK_NUM_PRED: return "a numeric or pred";
  case EK_SIGNED: return "a signed integer or floating-point";
  case EK_FLOAT: return "a floating-point";
  case EK_INT: return "an integer";
  case EK_INT_PRED: return "an integer or pred";
  case EK_ANY: return "any";
  case EK_NUM_C: return "a numeric or complex";
  case EK_NUM_PRED_C: return "a numeric, pred or complex";
  case EK_SIGNED_C: return "a signed integer, floating-point or complex";
  case EK_FLOAT_C: return "a floating-point or complex";
  }
  return "?";
}

/* Unary elementwise op: result = operand shape with element type rdt (DT_INVALID: same). */
static bool infer_unary(const HInstr *in, ElemKind k, DType rdt, Shape *out, HErr *err) {
  if (!want_arr(err, in, 0)) return false;
  const Shape *s = &in->ops[0]->shape;
  if (!kind_ok(k, s->dt))
    return bad(err, in, "%s expects %s element type, got %s", opname(in), kind_name(k), SS(s));
  *out = arr(rdt != DT_INVALID ? rdt : s->dt, s->rank, s->dims);
  return true;
}

/* Binary elementwise op: operands of equal shape (HLO has no implicit broadcasting). */
static bool infer_binary(const HInstr *in, ElemKind k, DType rdt, Shape *out, HErr *err) {
  if (!want_arr(err, in, 0) || !want_arr(err, in, 1)) return false;
  const Shape *l = &in->ops[0]->shape, *r = &in->ops[1]->shape;
  if (!hlo_shape_eq(l, r))
    return bad(err, in, "operands of %s differ: %s and %s", opname(in), SS(l), SS(r));
  if (!kind_ok(k, l->dt))
    return bad(err, in, "%s expects %s element type, got %s", opname(in), kind_name(k), SS(l));
  *out = arr(rdt != DT_INVALID ? rdt : l->dt, l->rank, l->dims);
  return true;
}

/* Unary op on floats and complex whose complex result is the component type (abs, real,
 * imag): a real operand keeps its type. */
static bool infer_to_component(const HInstr *in, ElemKind k, Shape *out, HErr *err) {
  if (!want_arr(err, in, 0)) return false;
  DType t = in->ops[0]->shape.dt;
  return infer_unary(in, k, is_cplx(t) ? hlo_dtype_component(t) : DT_INVALID, out, err);
}

static bool infer_compare(const HInstr *in, Shape *out, HErr *err) {
  if (!infer_binary(in, EK_NUM_PRED_C, DT_PRED, out, err)) return false;
  DType t = in->ops[0]->shape.dt;
  /* complex numbers have no order: XLA compares them for (in)equality only */
  if (is_cplx(t) && in->cmp_dir != CMP_EQ && in->cmp_dir != CMP_NE)
    return bad(err, in, "compare direction %s is not defined for %s (only EQ and NE)",
               hlo_cmp_dir_name(in->cmp_dir), hlo_dtype_name(t));
  bool ok = true;
  switch (in->cmp_type) {
  case CMPT_DEFAULT: break;
  case CMPT_FLOAT: ok = is_float(t) || is_cplx(t); break;
  case CMPT_TOTALORDER: ok = is_float(t); break;
  case CMPT_SIGNED: ok = hlo_dtype_kind(t) == DK_SINT; break;
  case CMPT_UNSIGNED: ok = hlo_dtype_kind(t) == DK_UINT || is_pred(t); break;
  }
  if (!ok)
    return bad(err, in, "comparison type %s does not fit operands of type %s",
               hlo_cmp_type_name(in->cmp_type), hlo_dtype_name(t));
  return true;
}

/* The target element type of a conversion, which only in->shape carries. */
static bool target_type(const HInstr *in, DType *t, HErr *err) {
  *t = in->shape.dt;
  if (*t == DT_INVALID || *t >= DT_COUNT || *t == DT_TUPLE || *t == DT_TOKEN)
    return bad(err, in, "%s needs an array element type in its shape, got %s", opname(in),
               SS(&in->shape));
  return true;
}

static bool infer_convert(const HInstr *in, Shape *out, HErr *err) {
  DType t;
  if (!target_type(in, &t, err) || !want_arr(err, in, 0)) return false;
  /* XLA's ShapeInference: "Conversion from complex to real type ... is not implemented" (real
   * and imag take the parts) */
  if (is_cplx(in->ops[0]->shape.dt) && !is_cplx(t))
    return bad(err, in, "convert from complex %s to real %s is not defined (use real or imag)",
               SS(&in->ops[0]->shape), hlo_dtype_name(t));
  if (t == DT_TOKEN) return bad(err, in, "convert to token");
  return infer_unary(in, EK_NUM_PRED_C, t, out, err);
}

/* complex(re, im): two floats of one type (f32 or f64) of equal shape -> c64 or c128. */
static bool infer_complex(const HInstr *in, Shape *out, HErr *err) {
  if (!want_arr(err, in, 0)) return false;
  DType t = in->ops[0]->shape.dt, ct = hlo_dtype_complex_of(t);
  if (ct == DT_INVALID)
    return bad(err, in, "complex needs f32 or f64 parts, got %s", SS(&in->ops[0]->shape));
  return infer_binary(in, EK_FLOAT, ct, out, err);
}

/* bitcast-convert: equal bit widths keep the dims; a narrower target adds a minor dimension
 * of size ratio, a wider one consumes a minor dimension of that size. */
static bool infer_bitcast_convert(const HInstr *in, Shape *out, HErr *err) {
  DType t;
  if (!target_type(in, &t, err) || !want_arr(err, in, 0)) return false;
  const Shape *s = &in->ops[0]->shape;
  /* by bit widths: s4 and u4 are 4 bits here (XLA packs them two per byte for this op) */
  size_t from = (size_t)hlo_dtype_bits(s->dt), to = (size_t)hlo_dtype_bits(t);
  if (from == 0 || to == 0) return bad(err, in, "bitcast-convert of %s", SS(s));
  if (is_cplx(s->dt) != is_cplx(t))
    return bad(err, in, "bitcast-convert between complex and real types (%s to %s)", SS(s),
               hlo_dtype_name(t));
  if (from == to) {
    *out = arr(t, s->rank, s->dims);
  } else if (from > to) {
    if (s->rank + 1 > HLO_MAX_RANK) return bad(err, in, "bitcast-convert result rank too large");
    if (from % to) return bad(err, in, "bitcast-convert widths %zu and %zu bits", from, to);
    *out = arr(t, s->rank, s->dims);
    out->dims[out->rank++] = (int64_t)(from / to);
    hlo_shape_set_default_layout(out);
  } else {
    int64_t ratio = (int64_t)(to / from);
    if (to % from || s->rank == 0 || s->dims[s->rank - 1] != ratio)
      return bad(err, in, "bitcast-convert from %s to %s needs a minor dimension of size %lld",
                 SS(s), hlo_dtype_name(t), (long long)ratio);
    *out = arr(t, s->rank - 1, s->dims);
  }
  return true;
}

static bool infer_stochastic_convert(const HInstr *in, Shape *out, HErr *err) {
  DType t;
  if (!target_type(in, &t, err) || !want_arr(err, in, 0) || !want_arr(err, in, 1)) return false;
  const Shape *s = &in->ops[0]->shape, *r = &in->ops[1]->shape;
  if (!is_float(s->dt)) return bad(err, in, "stochastic-convert of non-float %s", SS(s));
  if (hlo_dtype_kind(r->dt) != DK_UINT || hlo_dtype_size(r->dt) != hlo_dtype_size(s->dt) ||
      !hlo_shape_same_dims(s, r))
    return bad(err, in,
               "stochastic-convert random operand %s must be unsigned, as wide as and of the "
               "same dims as %s",
               SS(r), SS(s));
  *out = arr(t, s->rank, s->dims);
  return true;
}

static bool infer_select(const HInstr *in, Shape *out, HErr *err) {
  for (int k = 0; k < 3; k++)
    if (!want_arr(err, in, k)) return false;
  const Shape *p = &in->ops[0]->shape, *t = &in->ops[1]->shape, *f = &in->ops[2]->shape;
  if (!hlo_shape_eq(t, f)) return bad(err, in, "select branches differ: %s and %s", SS(t), SS(f));
  if (p->dt != DT_PRED || !hlo_shape_same_dims(p, t))
    return bad(err, in, "select predicate %s must be pred with the dims of %s", SS(p), SS(t));
  *out = arr(t->dt, t->rank, t->dims);
  return true;
}

static bool infer_clamp(const HInstr *in, Shape *out, HErr *err) {
  for (int k = 0; k < 3; k++)
    if (!want_arr(err, in, k)) return false;
  const Shape *lo = &in->ops[0]->shape, *x = &in->ops[1]->shape, *hi = &in->ops[2]->shape;
  if (!kind_ok(EK_NUM_PRED, x->dt)) return bad(err, in, "clamp of %s", SS(x));
  const Shape *b[2] = {lo, hi};
  for (int i = 0; i < 2; i++)
    if (b[i]->dt != x->dt || (b[i]->rank != 0 && !hlo_shape_same_dims(b[i], x)))
      return bad(err, in, "clamp %s bound %s must be a scalar or have the shape of %s",
                 i ? "max" : "min", SS(b[i]), SS(x));
  *out = arr(x->dt, x->rank, x->dims);
  return true;
}

static bool infer_map(HArena *a, const HInstr *in, Shape *out, HErr *err) {
  if (!want_ncalls(err, in, 1)) return false;
  for (int k = 0; k < in->nops; k++) {
    if (!want_arr(err, in, k)) return false;
    if (!hlo_shape_same_dims(&in->ops[k]->shape, &in->ops[0]->shape))
      return bad(err, in, "map operands differ in dims: %s and %s", SS(&in->ops[0]->shape),
                 SS(&in->ops[k]->shape));
  }
  const Shape *s = &in->ops[0]->shape;
  if (in->dims.n != 0) { /* XLA requires all dimensions, in order */
    if (in->dims.n != s->rank) return bad(err, in, "map dimensions must list every dimension");
    for (int i = 0; i < s->rank; i++)
      if (in->dims.v[i] != i) return bad(err, in, "map dimensions must be 0..rank-1 in order");
  }
  const HComp *c = callee(err, in, 0, "to_apply");
  if (!c || !want_nparams(err, in, c, "to_apply", in->nops)) return false;
  for (int k = 0; k < in->nops; k++) {
    Shape p = hlo_shape_scalar(in->ops[k]->shape.dt);
    if (!want_param(err, in, c, "to_apply", k, &p)) return false;
  }
  const Shape *r = &c->root->shape;
  if (!is_arr(r) || r->rank != 0)
    return bad(err, in, "to_apply computation '%s' must return a scalar, returns %s", c->name,
               SS(r));
  *out = arr(r->dt, s->rank, s->dims);
  (void)a;
  return true;
}

/* ------------------------------------------------------------------ data movement */

static bool infer_broadcast(const HInstr *in, Shape *out, HErr *err) {
  if (!want_arr(err, in, 0)) return false;
  const Shape *s = &in->ops[0]->shape, *o = &in->shape;
  if (!dims_given(o))
    return bad(err, in, "broadcast needs its output dims in its shape, got %s", SS(o));
  if (in->dims.n != s->rank)
    return bad(err, in, "broadcast dimensions has %d entries for operand %s", in->dims.n, SS(s));
  if (!check_dims(err, in, &in->dims, o->rank, false, "broadcast dimensions")) return false;
  for (int i = 0; i < s->rank; i++)
    if (o->dims[in->dims.v[i]] != s->dims[i])
      return bad(err, in,
                 "broadcast maps operand dim %d (size %lld) to output dim %lld of size %lld: "
                 "operand %s, output %s",
                 i, (long long)s->dims[i], (long long)in->dims.v[i],
                 (long long)o->dims[in->dims.v[i]], SS(s), SS(o));
  *out = arr(s->dt, o->rank, o->dims);
  return true;
}

static bool infer_reshape(const HInstr *in, Shape *out, HErr *err) {
  if (!want_arr(err, in, 0)) return false;
  const Shape *s = &in->ops[0]->shape, *o = &in->shape;
  if (!dims_given(o))
    return bad(err, in, "reshape needs its output dims in its shape, got %s", SS(o));
  if (hlo_shape_elems(s) != hlo_shape_elems(o))
    return bad(err, in, "reshape changes the element count: operand %s, result %s", SS(s), SS(o));
  *out = arr(s->dt, o->rank, o->dims);
  return true;
}

static bool infer_bitcast(HArena *a, const HInstr *in, Shape *out, HErr *err) {
  if (!want_arr(err, in, 0)) return false;
  const Shape *s = &in->ops[0]->shape, *o = &in->shape;
  if (!is_arr(o)) return bad(err, in, "bitcast to non-array shape %s", SS(o));
  if (hlo_shape_bytes(s) != hlo_shape_bytes(o))
    return bad(err, in, "bitcast changes the byte size: operand %s, result %s", SSL(s), SSL(o));
  hlo_shape_copy(a, out, o);
  return true;
}

static bool infer_transpose(const HInstr *in, Shape *out, HErr *err) {
  if (!want_arr(err, in, 0)) return false;
  const Shape *s = &in->ops[0]->shape;
  if (in->dims.n != s->rank)
    return bad(err, in, "transpose dimensions has %d entries for operand %s, not a permutation",
               in->dims.n, SS(s));
  if (!check_dims(err, in, &in->dims, s->rank, false, "transpose dimensions (a permutation)"))
    return false;
  int64_t d[HLO_MAX_RANK];
  for (int i = 0; i < s->rank; i++)
    d[i] = s->dims[in->dims.v[i]];
  *out = arr(s->dt, s->rank, d);
  return true;
}

static bool infer_reverse(const HInstr *in, Shape *out, HErr *err) {
  if (!want_arr(err, in, 0)) return false;
  const Shape *s = &in->ops[0]->shape;
  if (!check_dims(err, in, &in->dims, s->rank, false, "reverse dimensions")) return false;
  *out = arr(s->dt, s->rank, s->dims);
  return true;
}

static bool infer_slice(const HInstr *in, Shape *out, HErr *err) {
  if (!want_arr(err, in, 0)) return false;
  const Shape *s = &in->ops[0]->shape;
  const SliceDims *sl = in->slice;
  if (!sl || sl->n != s->rank)
    return bad(err, in, "slice has %d ranges for operand %s", sl ? sl->n : 0, SS(s));
  int64_t d[HLO_MAX_RANK];
  for (int i = 0; i < s->rank; i++) {
    int64_t st = sl->start[i], lim = sl->limit[i], str = sl->stride[i];
    if (st < 0 || st > lim || lim > s->dims[i] || str < 1)
      return bad(err, in,
                 "slice range [%lld:%lld:%lld] of dimension %d is out of range for operand %s",
                 (long long)st, (long long)lim, (long long)str, i, SS(s));
    d[i] = (lim - st + str - 1) / str;
  }
  *out = arr(s->dt, s->rank, d);
  return true;
}

static bool infer_concatenate(const HInstr *in, Shape *out, HErr *err) {
  if (in->nops < 1) return bad(err, in, "concatenate needs at least one operand");
  if (!want_arr(err, in, 0)) return false;
  const Shape *s0 = &in->ops[0]->shape;
  if (in->dims.n != 1) return bad(err, in, "concatenate needs exactly one dimension");
  if (s0->rank == 0) return bad(err, in, "concatenate of scalars");
  if (!check_dims(err, in, &in->dims, s0->rank, false, "concatenate dimension")) return false;
  int cd = (int)in->dims.v[0];
  int64_t d[HLO_MAX_RANK];
  memcpy(d, s0->dims, sizeof d);
  for (int k = 1; k < in->nops; k++) {
    if (!want_arr(err, in, k)) return false;
    const Shape *s = &in->ops[k]->shape;
    bool ok = s->dt == s0->dt && s->rank == s0->rank;
    for (int i = 0; ok && i < s->rank; i++)
      ok = i == cd || s->dims[i] == s0->dims[i];
    if (!ok)
      return bad(err, in,
                 "concatenate operand %d %s does not match operand 0 %s outside dimension %d", k,
                 SS(s), SS(s0), cd);
    if (__builtin_add_overflow(d[cd], s->dims[cd], &d[cd]))
      return bad(err, in, "concatenated dimension %d overflows", cd);
  }
  *out = arr(s0->dt, s0->rank, d);
  return true;
}

static bool infer_pad(const HInstr *in, Shape *out, HErr *err) {
  if (!want_arr(err, in, 0) || !want_scalar(err, in, 1, "padding value")) return false;
  const Shape *s = &in->ops[0]->shape, *v = &in->ops[1]->shape;
  if (s->dt != v->dt) return bad(err, in, "pad value %s does not match operand %s", SS(v), SS(s));
  const PadDims *p = in->pad;
  if (!p || p->n != s->rank)
    return bad(err, in, "padding has %d entries for operand %s", p ? p->n : 0, SS(s));
  int64_t d[HLO_MAX_RANK];
  for (int i = 0; i < s->rank; i++) {
    if (p->interior[i] < 0) return bad(err, in, "negative interior padding in dimension %d", i);
    int64_t n = s->dims[i], inner;
    if (__builtin_mul_overflow(n > 0 ? n - 1 : 0, p->interior[i], &inner) ||
        __builtin_add_overflow(inner, n, &d[i]) || __builtin_add_overflow(d[i], p->lo[i], &d[i]) ||
        __builtin_add_overflow(d[i], p->hi[i], &d[i]))
      return bad(err, in, "padding of dimension %d overflows", i);
    if (d[i] < 0)
      return bad(err, in, "padding of dimension %d gives negative size %lld for operand %s", i,
                 (long long)d[i], SS(s));
  }
  *out = arr(s->dt, s->rank, d);
  return true;
}

static bool infer_iota(const HInstr *in, Shape *out, HErr *err) {
  const Shape *o = &in->shape;
  if (!is_arr(o) || o->rank == 0 || !is_num(o->dt))
    return bad(err, in, "iota needs a numeric array shape of rank >= 1, got %s", SS(o));
  if (in->iota_dim < 0 || in->iota_dim >= o->rank)
    return bad(err, in, "iota_dimension %lld is out of range for %s", (long long)in->iota_dim,
               SS(o));
  *out = arr(o->dt, o->rank, o->dims);
  return true;
}

static bool infer_dynamic_slice(const HInstr *in, Shape *out, HErr *err) {
  if (in->nops < 1 || !want_arr(err, in, 0)) return false;
  const Shape *s = &in->ops[0]->shape;
  if (in->nops != 1 + s->rank)
    return bad(err, in, "dynamic-slice of %s needs %d scalar start indices, got %d operands", SS(s),
               s->rank, in->nops);
  for (int k = 1; k < in->nops; k++) {
    const Shape *ix = &in->ops[k]->shape;
    if (!is_arr(ix) || ix->rank != 0 || !is_int(ix->dt) || ix->dt != in->ops[1]->shape.dt)
      return bad(err, in, "start index operand %d must be an integer scalar of one type, got %s", k,
                 SS(ix));
  }
  if (in->dslice_sizes.n != s->rank)
    return bad(err, in, "dynamic_slice_sizes has %d entries for operand %s", in->dslice_sizes.n,
               SS(s));
  for (int i = 0; i < s->rank; i++)
    if (in->dslice_sizes.v[i] < 0 || in->dslice_sizes.v[i] > s->dims[i])
      return bad(err, in, "dynamic slice size %lld exceeds dimension %d of %s",
                 (long long)in->dslice_sizes.v[i], i, SS(s));
  *out = arr(s->dt, s->rank, in->dslice_sizes.v);
  return true;
}

static bool infer_dynamic_update_slice(const HInstr *in, Shape *out, HErr *err) {
  if (in->nops < 2 || !want_arr(err, in, 0) || !want_arr(err, in, 1)) return false;
  const Shape *s = &in->ops[0]->shape, *u = &in->ops[1]->shape;
  if (u->dt != s->dt || u->rank != s->rank)
    return bad(err, in, "update %s does not fit operand %s", SS(u), SS(s));
  for (int i = 0; i < s->rank; i++)
    if (u->dims[i] > s->dims[i])
      return bad(err, in, "update %s exceeds operand %s in dimension %d", SS(u), SS(s), i);
  if (in->nops != 2 + s->rank)
    return bad(err, in, "dynamic-update-slice of %s needs %d scalar start indices, got %d operands",
               SS(s), s->rank, in->nops);
  for (int k = 2; k < in->nops; k++) {
    const Shape *ix = &in->ops[k]->shape;
    if (!is_arr(ix) || ix->rank != 0 || !is_int(ix->dt) || ix->dt != in->ops[2]->shape.dt)
      return bad(err, in, "start index operand %d must be an integer scalar of one type, got %s", k,
                 SS(ix));
  }
  *out = arr(s->dt, s->rank, s->dims);
  return true;
}

static bool infer_tuple(HArena *a, const HInstr *in, Shape *out) {
  Shape *el = hlo_arena_alloc(a, sizeof(Shape) * (size_t)(in->nops ? in->nops : 1));
  for (int k = 0; k < in->nops; k++)
    copy_plain(a, &el[k], &in->ops[k]->shape);
  memset(out, 0, sizeof *out);
  out->dt = DT_TUPLE;
  out->ntuple = in->nops;
  out->tuple = el;
  return true;
}

static bool infer_gte(HArena *a, const HInstr *in, Shape *out, HErr *err) {
  const Shape *s = &in->ops[0]->shape;
  if (s->dt != DT_TUPLE) return bad(err, in, "get-tuple-element of non-tuple %s", SS(s));
  if (in->tuple_index < 0 || in->tuple_index >= s->ntuple)
    return bad(err, in, "tuple index %lld is out of range for %s", (long long)in->tuple_index,
               SS(s));
  copy_plain(a, out, &s->tuple[in->tuple_index]);
  return true;
}

/* ------------------------------------------------------------------ gather and scatter */

/* The dims of indices with index_vector_dim removed (XLA's "batch" dims of the indices),
 * after the implicit trailing 1 when index_vector_dim == rank. Returns the index vector size
 * via *ivsize. */
static bool index_batch_dims(HErr *err, const HInstr *in, const Shape *ix, int64_t ivd, int64_t *bd,
                             int *nbd, int64_t *ivsize) {
  if (ivd < 0 || ivd > ix->rank)
    return bad(err, in, "index_vector_dim %lld is out of range [0, %d] for indices %s",
               (long long)ivd, ix->rank, SS(ix));
  *nbd = 0;
  *ivsize = ivd == ix->rank ? 1 : ix->dims[ivd];
  for (int i = 0; i < ix->rank; i++)
    if (i != ivd) bd[(*nbd)++] = ix->dims[i];
  return true;
}

/* Batching dims pairs (operand side, indices side): counts match, both distinct and in
 * range, indices side avoids index_vector_dim, sizes agree. */
static bool check_batching(HErr *err, const HInstr *in, const Shape *op, const Shape *ix,
                           const IList *obd, const IList *ibd, int64_t ivd, const char *oname,
                           const char *iname) {
  if (!check_dims(err, in, obd, op->rank, true, oname) ||
      !check_dims(err, in, ibd, ix->rank, false, iname))
    return false;
  if (obd->n != ibd->n)
    return bad(err, in, "%s and %s differ in length (%d and %d)", oname, iname, obd->n, ibd->n);
  for (int i = 0; i < ibd->n; i++) {
    if (ibd->v[i] == ivd) return bad(err, in, "%s contains index_vector_dim", iname);
    if (op->dims[obd->v[i]] != ix->dims[ibd->v[i]])
      return bad(err, in,
                 "batching dimension sizes differ: operand %s dim %lld, indices %s dim "
                 "%lld",
                 SS(op), (long long)obd->v[i], SS(ix), (long long)ibd->v[i]);
  }
  return true;
}

static bool infer_gather(const HInstr *in, Shape *out, HErr *err) {
  if (!want_arr(err, in, 0) || !want_arr(err, in, 1)) return false;
  const Shape *op = &in->ops[0]->shape, *ix = &in->ops[1]->shape;
  const GatherDims *g = in->gather;
  if (!g) return bad(err, in, "gather without dimension numbers");
  if (!is_int(ix->dt)) return bad(err, in, "gather indices %s must be integers", SS(ix));
  int64_t bd[HLO_MAX_RANK + 1], ivsize;
  int nbd;
  if (!index_batch_dims(err, in, ix, g->index_vector_dim, bd, &nbd, &ivsize)) return false;
  if (g->start_index_map.n != ivsize)
    return bad(err, in, "start_index_map has %d entries but the index vector of %s has %lld",
               g->start_index_map.n, SS(ix), (long long)ivsize);
  if (!check_dims(err, in, &g->collapsed_slice_dims, op->rank, true, "collapsed_slice_dims") ||
      !check_batching(err, in, op, ix, &g->operand_batching_dims, &g->start_indices_batching_dims,
                      g->index_vector_dim, "operand_batching_dims",
                      "start_indices_batching_dims") ||
      !check_dims(err, in, &g->start_index_map, op->rank, false, "start_index_map"))
    return false;
  for (int i = 0; i < g->collapsed_slice_dims.n; i++)
    if (hlo_ilist_has(&g->operand_batching_dims, g->collapsed_slice_dims.v[i]))
      return bad(err, in, "dimension %lld is both collapsed and batching",
                 (long long)g->collapsed_slice_dims.v[i]);
  for (int i = 0; i < g->start_index_map.n; i++)
    if (hlo_ilist_has(&g->operand_batching_dims, g->start_index_map.v[i]))
      return bad(err, in, "start_index_map names batching dimension %lld",
                 (long long)g->start_index_map.v[i]);
  if (g->slice_sizes.n != op->rank)
    return bad(err, in, "slice_sizes has %d entries for operand %s", g->slice_sizes.n, SS(op));
  int64_t offsz[HLO_MAX_RANK];
  int noff = 0;
  for (int i = 0; i < op->rank; i++) {
    int64_t sz = g->slice_sizes.v[i];
    if (sz < 0 || sz > op->dims[i])
      return bad(err, in, "slice size %lld is out of range for dimension %d of %s", (long long)sz,
                 i, SS(op));
    bool coll = hlo_ilist_has(&g->collapsed_slice_dims, i),
         bat = hlo_ilist_has(&g->operand_batching_dims, i);
    if ((coll || bat) && sz > 1)
      return bad(err, in, "%s dimension %d has slice size %lld, must be at most 1",
                 coll ? "collapsed" : "batching", i, (long long)sz);
    if (!coll && !bat) offsz[noff++] = sz;
  }
  if (g->offset_dims.n != noff)
    return bad(err, in,
               "offset_dims has %d entries, expected %d (operand rank minus collapsed "
               "and batching dims)",
               g->offset_dims.n, noff);
  int orank = noff + nbd;
  if (orank > HLO_MAX_RANK) return bad(err, in, "gather result rank %d is too large", orank);
  if (!check_dims(err, in, &g->offset_dims, orank, true, "offset_dims")) return false;
  int64_t d[HLO_MAX_RANK];
  for (int i = 0, ko = 0, kb = 0; i < orank; i++)
    d[i] = hlo_ilist_has(&g->offset_dims, i) ? offsz[ko++] : bd[kb++];
  *out = arr(op->dt, orank, d);
  return true;
}

static bool infer_scatter(HArena *a, const HInstr *in, Shape *out, HErr *err) {
  if (in->nops < 3 || in->nops % 2 == 0)
    return bad(err, in, "scatter needs 2N+1 operands (N inputs, indices, N updates), got %d",
               in->nops);
  int n = (in->nops - 1) / 2;
  for (int k = 0; k < in->nops; k++)
    if (!want_arr(err, in, k)) return false;
  const Shape *op = &in->ops[0]->shape, *ix = &in->ops[n]->shape, *up = &in->ops[n + 1]->shape;
  for (int k = 0; k < n; k++) {
    const Shape *o = &in->ops[k]->shape, *u = &in->ops[n + 1 + k]->shape;
    if (!hlo_shape_same_dims(o, op) || !hlo_shape_same_dims(u, up) || u->dt != o->dt)
      return bad(err, in,
                 "scatter input %d %s and update %s do not match input 0 %s / update "
                 "0 %s",
                 k, SS(o), SS(u), SS(op), SS(up));
  }
  const ScatterDims *sd = in->scatter;
  if (!sd) return bad(err, in, "scatter without dimension numbers");
  if (!is_int(ix->dt)) return bad(err, in, "scatter indices %s must be integers", SS(ix));
  int64_t bd[HLO_MAX_RANK + 1], ivsize;
  int nbd;
  if (!index_batch_dims(err, in, ix, sd->index_vector_dim, bd, &nbd, &ivsize)) return false;
  if (!check_dims(err, in, &sd->update_window_dims, up->rank, true, "update_window_dims") ||
      !check_dims(err, in, &sd->inserted_window_dims, op->rank, true, "inserted_window_dims") ||
      !check_batching(err, in, op, ix, &sd->input_batching_dims, &sd->scatter_indices_batching_dims,
                      sd->index_vector_dim, "input_batching_dims",
                      "scatter_indices_batching_dims") ||
      !check_dims(err, in, &sd->scatter_dims_to_operand_dims, op->rank, false,
                  "scatter_dims_to_operand_dims"))
    return false;
  if (sd->scatter_dims_to_operand_dims.n != ivsize)
    return bad(err, in,
               "scatter_dims_to_operand_dims has %d entries but the index vector of %s "
               "has %lld",
               sd->scatter_dims_to_operand_dims.n, SS(ix), (long long)ivsize);
  for (int i = 0; i < sd->inserted_window_dims.n; i++)
    if (hlo_ilist_has(&sd->input_batching_dims, sd->inserted_window_dims.v[i]))
      return bad(err, in, "dimension %lld is both inserted and batching",
                 (long long)sd->inserted_window_dims.v[i]);
  for (int i = 0; i < sd->scatter_dims_to_operand_dims.n; i++)
    if (hlo_ilist_has(&sd->input_batching_dims, sd->scatter_dims_to_operand_dims.v[i]))
      return bad(err, in, "scatter_dims_to_operand_dims names batching dimension %lld",
                 (long long)sd->scatter_dims_to_operand_dims.v[i]);
  int nwin = sd->update_window_dims.n;
  if (nwin + sd->inserted_window_dims.n + sd->input_batching_dims.n != op->rank)
    return bad(err, in,
               "update_window_dims (%d) + inserted_window_dims (%d) + "
               "input_batching_dims (%d) must equal the operand rank %d",
               nwin, sd->inserted_window_dims.n, sd->input_batching_dims.n, op->rank);
  if (up->rank != nwin + nbd)
    return bad(err, in, "updates %s must have rank %d (window dims plus scatter dims of %s)",
               SS(up), nwin + nbd, SS(ix));
  /* scatter dims of the updates follow the indices' batch dims; window dims fit the operand */
  for (int i = 0, kb = 0, kw = 0, od = 0; i < up->rank; i++) {
    if (hlo_ilist_has(&sd->update_window_dims, i)) {
      while (hlo_ilist_has(&sd->inserted_window_dims, od) ||
             hlo_ilist_has(&sd->input_batching_dims, od))
        od++;
      if (up->dims[i] > op->dims[od])
        return bad(err, in,
                   "update window dimension %d (size %lld) exceeds operand %s "
                   "dimension %d",
                   i, (long long)up->dims[i], SS(op), od);
      od++;
      kw++;
    } else {
      if (up->dims[i] != bd[kb])
        return bad(err, in,
                   "update scatter dimension %d has size %lld, the indices %s give "
                   "%lld",
                   i, (long long)up->dims[i], SS(ix), (long long)bd[kb]);
      kb++;
    }
  }
  if (!want_ncalls(err, in, 1)) return false;
  const HComp *c = callee(err, in, 0, "to_apply");
  if (!c) return false;
  DType *t = hlo_arena_alloc(a, sizeof(DType) * (size_t)n);
  for (int k = 0; k < n; k++)
    t[k] = in->ops[k]->shape.dt;
  if (!check_reducer(a, err, in, c, "to_apply", n, t, t)) return false;
  if (n == 1) {
    *out = arr(op->dt, op->rank, op->dims);
  } else {
    Shape *el = hlo_arena_alloc(a, sizeof(Shape) * (size_t)n);
    for (int k = 0; k < n; k++)
      el[k] = arr(t[k], op->rank, op->dims);
    *out = hlo_shape_tuple(a, n, el);
  }
  return true;
}

/* ------------------------------------------------------------------ windows, convolution */

/* Output size of one windowed dimension (XLA's InferWindowOutputShape): the base is dilated
 * and padded, the window dilated, and the count of stride steps that fit is the result. */
static bool window_dim(HErr *err, const HInstr *in, int i, const WinDim *w, int64_t base,
                       int64_t *out) {
  if (w->size < 1 || w->stride < 1 || w->win_dil < 1 || w->base_dil < 1)
    return bad(err, in,
               "window dimension %d has size %lld stride %lld dilations %lld/%lld; all "
               "must be >= 1",
               i, (long long)w->size, (long long)w->stride, (long long)w->base_dil,
               (long long)w->win_dil);
  int64_t dil_base = 0, padded, dil_win;
  bool ovf = false;
  if (base > 0) {
    ovf |= __builtin_mul_overflow(base - 1, w->base_dil, &dil_base);
    dil_base += 1;
  }
  ovf |= __builtin_add_overflow(dil_base, w->pad_lo, &padded);
  ovf |= __builtin_add_overflow(padded, w->pad_hi, &padded);
  ovf |= __builtin_mul_overflow(w->size - 1, w->win_dil, &dil_win);
  if (ovf || dil_win == INT64_MAX) return bad(err, in, "window dimension %d overflows", i);
  dil_win += 1;
  *out = padded < dil_win ? 0 : (padded - dil_win) / w->stride + 1;
  return true;
}

static bool infer_reduce_window(HArena *a, const HInstr *in, Shape *out, HErr *err) {
  if (in->nops < 2 || in->nops % 2)
    return bad(err, in, "reduce-window needs 2N operands (N inputs, N init values), got %d",
               in->nops);
  int n = in->nops / 2;
  const Shape *s0 = &in->ops[0]->shape;
  DType *acc = hlo_arena_alloc(a, sizeof(DType) * (size_t)n);
  DType *elem = hlo_arena_alloc(a, sizeof(DType) * (size_t)n);
  for (int k = 0; k < n; k++) {
    if (!want_arr(err, in, k) || !want_scalar(err, in, n + k, "init value")) return false;
    if (!hlo_shape_same_dims(&in->ops[k]->shape, s0))
      return bad(err, in, "reduce-window inputs differ in dims: %s and %s", SS(s0),
                 SS(&in->ops[k]->shape));
    elem[k] = in->ops[k]->shape.dt;
    acc[k] = in->ops[n + k]->shape.dt;
  }
  const Window *w = in->window;
  if (!w || w->n != s0->rank)
    return bad(err, in, "window has %d dimensions for input %s", w ? w->n : 0, SS(s0));
  int64_t d[HLO_MAX_RANK];
  for (int i = 0; i < s0->rank; i++)
    if (!window_dim(err, in, i, &w->d[i], s0->dims[i], &d[i])) return false;
  if (!want_ncalls(err, in, 1)) return false;
  const HComp *c = callee(err, in, 0, "to_apply");
  if (!c || !check_reducer(a, err, in, c, "to_apply", n, acc, elem)) return false;
  if (n == 1) {
    *out = arr(acc[0], s0->rank, d);
  } else {
    Shape *el = hlo_arena_alloc(a, sizeof(Shape) * (size_t)n);
    for (int k = 0; k < n; k++)
      el[k] = arr(acc[k], s0->rank, d);
    *out = hlo_shape_tuple(a, n, el);
  }
  return true;
}

static bool infer_select_and_scatter(HArena *a, const HInstr *in, Shape *out, HErr *err) {
  if (!want_arr(err, in, 0) || !want_arr(err, in, 1) || !want_scalar(err, in, 2, "init value"))
    return false;
  const Shape *s = &in->ops[0]->shape, *src = &in->ops[1]->shape, *init = &in->ops[2]->shape;
  const Window *w = in->window;
  if (!w || w->n != s->rank)
    return bad(err, in, "window has %d dimensions for operand %s", w ? w->n : 0, SS(s));
  int64_t d[HLO_MAX_RANK];
  for (int i = 0; i < s->rank; i++)
    if (!window_dim(err, in, i, &w->d[i], s->dims[i], &d[i])) return false;
  Shape want = arr(src->dt, s->rank, d);
  if (!hlo_shape_eq(src, &want))
    return bad(err, in, "source %s must have the windowed operand's shape %s", SS(src), SS(&want));
  if (src->dt != s->dt || init->dt != s->dt)
    return bad(err, in, "operand %s, source %s and init %s must share an element type", SS(s),
               SS(src), SS(init));
  if (!want_ncalls(err, in, 2)) return false;
  const HComp *sel = callee(err, in, 0, "select"), *sc = callee(err, in, 1, "scatter");
  if (!sel || !sc) return false;
  Shape e = hlo_shape_scalar(s->dt), p = hlo_shape_scalar(DT_PRED);
  if (!want_nparams(err, in, sel, "select", 2) || !want_param(err, in, sel, "select", 0, &e) ||
      !want_param(err, in, sel, "select", 1, &e) || !want_root(err, in, sel, "select", &p))
    return false;
  DType t = s->dt;
  if (!check_reducer(a, err, in, sc, "scatter", 1, &t, &t)) return false;
  *out = arr(s->dt, s->rank, s->dims);
  return true;
}

/* Dims of one operand of a convolution: the two named dims and the spatial ones are
 * distinct and within the rank. */
static bool conv_dims_ok(HErr *err, const HInstr *in, int rank, int64_t a, int64_t b,
                         const IList *sp, const char *what) {
  IList all = {0};
  all.v[all.n++] = a;
  all.v[all.n++] = b;
  if (sp->n < 0 || sp->n + 2 > HLO_MAX_RANK)
    return bad(err, in, "%s has %d spatial dimensions", what, sp->n);
  for (int i = 0; i < sp->n; i++)
    all.v[all.n++] = sp->v[i];
  if (all.n != rank)
    return bad(err, in, "%s dimension numbers name %d dims, the rank is %d", what, all.n, rank);
  return check_dims(err, in, &all, rank, false, what);
}

static bool infer_convolution(const HInstr *in, Shape *out, HErr *err) {
  if (!want_arr(err, in, 0) || !want_arr(err, in, 1)) return false;
  const Shape *l = &in->ops[0]->shape, *r = &in->ops[1]->shape;
  const ConvDims *cd = in->conv;
  const Window *w = in->window;
  if (!cd) return bad(err, in, "convolution without dimension numbers");
  int ns = cd->in_sp.n;
  if (cd->k_sp.n != ns || cd->out_sp.n != ns)
    return bad(err, in,
               "convolution spatial dimension counts differ: input %d, kernel %d, "
               "output %d",
               ns, cd->k_sp.n, cd->out_sp.n);
  if (!w && ns > 0) return bad(err, in, "convolution without window");
  if (w && w->n != ns)
    return bad(err, in, "window has %d dimensions, the convolution has %d spatial dims", w->n, ns);
  if (l->rank != ns + 2 || r->rank != ns + 2)
    return bad(err, in, "convolution with %d spatial dims needs rank %d operands, got %s and %s",
               ns, ns + 2, SS(l), SS(r));
  if (!conv_dims_ok(err, in, l->rank, cd->in_batch, cd->in_feat, &cd->in_sp, "input dims") ||
      !conv_dims_ok(err, in, r->rank, cd->k_in, cd->k_out, &cd->k_sp, "kernel dims") ||
      !conv_dims_ok(err, in, ns + 2, cd->out_batch, cd->out_feat, &cd->out_sp, "output dims"))
    return false;
  if ((is_float(l->dt) != is_float(r->dt)) || !is_num(l->dt) || !is_num(r->dt))
    return bad(err, in,
               "convolution operands %s and %s must be both floating-point or both "
               "integer",
               SS(l), SS(r));
  int64_t fg = in->feature_groups, bg = in->batch_groups;
  if (fg < 1 || bg < 1)
    return bad(err, in, "feature_group_count %lld and batch_group_count %lld must be >= 1",
               (long long)fg, (long long)bg);
  if (fg > 1 && bg > 1)
    return bad(err, in, "feature_group_count and batch_group_count cannot both exceed 1");
  int64_t in_b = l->dims[cd->in_batch], in_f = l->dims[cd->in_feat];
  int64_t k_in = r->dims[cd->k_in], k_out = r->dims[cd->k_out];
  if (in_f % fg)
    return bad(err, in, "input features %lld are not divisible by feature_group_count %lld",
               (long long)in_f, (long long)fg);
  int64_t k_in_total;
  if (__builtin_mul_overflow(k_in, fg, &k_in_total) || k_in_total != in_f)
    return bad(err, in,
               "kernel input features %lld times feature_group_count %lld must equal "
               "input features %lld (input %s, kernel %s)",
               (long long)k_in, (long long)fg, (long long)in_f, SS(l), SS(r));
  if (k_out % fg)
    return bad(err, in,
               "kernel output features %lld are not divisible by feature_group_count "
               "%lld",
               (long long)k_out, (long long)fg);
  if (in_b % bg)
    return bad(err, in, "input batch %lld is not divisible by batch_group_count %lld",
               (long long)in_b, (long long)bg);
  if (k_out % bg)
    return bad(err, in,
               "kernel output features %lld are not divisible by batch_group_count "
               "%lld",
               (long long)k_out, (long long)bg);
  int64_t d[HLO_MAX_RANK];
  d[cd->out_batch] = in_b / bg;
  d[cd->out_feat] = k_out;
  for (int i = 0; i < ns; i++) {
    const WinDim *wd = &w->d[i];
    if (wd->size != r->dims[cd->k_sp.v[i]])
      return bad(err, in, "window size %lld of spatial dim %d does not match kernel %s dim %lld",
                 (long long)wd->size, i, SS(r), (long long)cd->k_sp.v[i]);
    if (!window_dim(err, in, i, wd, l->dims[cd->in_sp.v[i]], &d[cd->out_sp.v[i]])) return false;
  }
  DType t = in->shape.dt;
  if (t == DT_INVALID) t = l->dt;
  if (!is_num(t)) return bad(err, in, "convolution result type %s", hlo_dtype_name(t));
  *out = arr(t, ns + 2, d);
  return true;
}

static bool infer_dot(const HInstr *in, Shape *out, HErr *err) {
  if (!want_arr(err, in, 0) || !want_arr(err, in, 1)) return false;
  const Shape *l = &in->ops[0]->shape, *r = &in->ops[1]->shape;
  const DotDims *dd = in->dot;
  static const DotDims none;
  if (!dd) dd = &none;
  if (!check_dims(err, in, &dd->lhs_batch, l->rank, false, "lhs_batch_dims") ||
      !check_dims(err, in, &dd->rhs_batch, r->rank, false, "rhs_batch_dims") ||
      !check_dims(err, in, &dd->lhs_contract, l->rank, false, "lhs_contracting_dims") ||
      !check_dims(err, in, &dd->rhs_contract, r->rank, false, "rhs_contracting_dims"))
    return false;
  if (dd->lhs_batch.n != dd->rhs_batch.n)
    return bad(err, in, "dot has %d lhs and %d rhs batch dims", dd->lhs_batch.n, dd->rhs_batch.n);
  if (dd->lhs_contract.n != dd->rhs_contract.n)
    return bad(err, in, "dot has %d lhs and %d rhs contracting dims", dd->lhs_contract.n,
               dd->rhs_contract.n);
  for (int i = 0; i < dd->lhs_batch.n; i++) {
    if (hlo_ilist_has(&dd->lhs_contract, dd->lhs_batch.v[i]) ||
        hlo_ilist_has(&dd->rhs_contract, dd->rhs_batch.v[i]))
      return bad(err, in, "dot batch dimension %d is also contracting", i);
    if (l->dims[dd->lhs_batch.v[i]] != r->dims[dd->rhs_batch.v[i]])
      return bad(err, in, "dot batch dimension sizes differ: lhs %s dim %lld, rhs %s dim %lld",
                 SS(l), (long long)dd->lhs_batch.v[i], SS(r), (long long)dd->rhs_batch.v[i]);
  }
  for (int i = 0; i < dd->lhs_contract.n; i++)
    if (l->dims[dd->lhs_contract.v[i]] != r->dims[dd->rhs_contract.v[i]])
      return bad(err, in,
                 "dot contracting dimension sizes differ: lhs %s dim %lld, rhs %s dim "
                 "%lld",
                 SS(l), (long long)dd->lhs_contract.v[i], SS(r), (long long)dd->rhs_contract.v[i]);
  if ((is_float(l->dt) != is_float(r->dt)) || is_cplx(l->dt) != is_cplx(r->dt) ||
      !kind_ok(EK_NUM_PRED_C, l->dt) || !kind_ok(EK_NUM_PRED_C, r->dt))
    return bad(err, in,
               "dot operands %s and %s must be both floating-point, both complex or both integer",
               SS(l), SS(r));
  int64_t d[2 * HLO_MAX_RANK];
  int n = 0;
  for (int i = 0; i < dd->lhs_batch.n; i++)
    d[n++] = l->dims[dd->lhs_batch.v[i]];
  for (int i = 0; i < l->rank; i++)
    if (!hlo_ilist_has(&dd->lhs_batch, i) && !hlo_ilist_has(&dd->lhs_contract, i))
      d[n++] = l->dims[i];
  for (int i = 0; i < r->rank; i++)
    if (!hlo_ilist_has(&dd->rhs_batch, i) && !hlo_ilist_has(&dd->rhs_contract, i))
      d[n++] = r->dims[i];
  if (n > HLO_MAX_RANK) return bad(err, in, "dot result rank %d is too large", n);
  DType t = in->shape.dt;
  if (t == DT_INVALID) t = l->dt;
  if (!kind_ok(EK_NUM_PRED_C, t) || is_cplx(t) != is_cplx(l->dt))
    return bad(err, in, "dot result type %s", hlo_dtype_name(t));
  *out = arr(t, n, d);
  return true;
}

/* fft as XLA's ShapeInference::InferFftShape: 1 to 3 innermost dims transformed; FFT and
 * IFFT keep a complex shape; RFFT takes f32/f64 whose innermost dims are fft_length and gives
 * the complex type with the last of them n/2+1; IRFFT takes complex whose innermost dims are
 * fft_length but the last, n/2+1, and gives the component type with the last dim n. */
static bool infer_fft(const HInstr *in, Shape *out, HErr *err) {
  if (!want_arr(err, in, 0)) return false;
  const Shape *s = &in->ops[0]->shape;
  const IList *fl = &in->fft_length;
  int r = fl->n;
  if (r < 1 || r > 3) return bad(err, in, "fft_length has %d entries, FFT supports 1 to 3", r);
  if (s->rank < r)
    return bad(err, in, "fft of rank %d needs an operand of rank >= %d, got %s", r, r, SS(s));
  for (int i = 0; i < r; i++)
    if (fl->v[i] < 0) return bad(err, in, "fft_length %lld is negative", (long long)fl->v[i]);
  bool real_in = in->fft_type == FFT_RFFT;
  if (real_in ? !(s->dt == DT_F32 || s->dt == DT_F64) : !is_cplx(s->dt))
    return bad(err, in, "%s needs %s input, got %s", hlo_fft_type_name(in->fft_type),
               real_in ? "f32 or f64" : "complex", SS(s));
  int64_t last = fl->v[r - 1];
  for (int i = 0; i < r; i++) {
    int64_t want = fl->v[i], have = s->dims[s->rank - r + i];
    if (in->fft_type == FFT_IRFFT && i == r - 1) want = (have == 0 && last == 0) ? 0 : last / 2 + 1;
    if (have != want)
      return bad(err, in, "%s needs dim %d of %s to be %lld (fft_length entry %d is %lld)",
                 hlo_fft_type_name(in->fft_type), s->rank - r + i, SS(s), (long long)want, i,
                 (long long)fl->v[i]);
  }
  DType t = in->fft_type == FFT_RFFT    ? hlo_dtype_complex_of(s->dt)
            : in->fft_type == FFT_IRFFT ? hlo_dtype_component(s->dt)
                                        : s->dt;
  *out = arr(t, s->rank, s->dims);
  if (in->fft_type == FFT_RFFT && last != 0) out->dims[s->rank - 1] = last / 2 + 1;
  if (in->fft_type == FFT_IRFFT) out->dims[s->rank - 1] = last;
  return true;
}

/* ------------------------------------------------------------------ reductions, sort */

static bool infer_reduce(HArena *a, const HInstr *in, Shape *out, HErr *err) {
  if (in->nops < 2 || in->nops % 2)
    return bad(err, in, "reduce needs 2N operands (N inputs, N init values), got %d", in->nops);
  int n = in->nops / 2;
  const Shape *s0 = &in->ops[0]->shape;
  DType *acc = hlo_arena_alloc(a, sizeof(DType) * (size_t)n);
  DType *elem = hlo_arena_alloc(a, sizeof(DType) * (size_t)n);
  for (int k = 0; k < n; k++) {
    if (!want_arr(err, in, k) || !want_scalar(err, in, n + k, "init value")) return false;
    if (!hlo_shape_same_dims(&in->ops[k]->shape, s0))
      return bad(err, in, "reduce inputs differ in dims: %s and %s", SS(s0),
                 SS(&in->ops[k]->shape));
    elem[k] = in->ops[k]->shape.dt;
    acc[k] = in->ops[n + k]->shape.dt;
  }
  if (!check_dims(err, in, &in->dims, s0->rank, false, "reduce dimensions")) return false;
  if (!want_ncalls(err, in, 1)) return false;
  const HComp *c = callee(err, in, 0, "to_apply");
  if (!c || !check_reducer(a, err, in, c, "to_apply", n, acc, elem)) return false;
  int64_t d[HLO_MAX_RANK];
  int r = 0;
  for (int i = 0; i < s0->rank; i++)
    if (!hlo_ilist_has(&in->dims, i)) d[r++] = s0->dims[i];
  if (n == 1) {
    *out = arr(acc[0], r, d);
  } else {
    Shape *el = hlo_arena_alloc(a, sizeof(Shape) * (size_t)n);
    for (int k = 0; k < n; k++)
      el[k] = arr(acc[k], r, d);
    *out = hlo_shape_tuple(a, n, el);
  }
  return true;
}

static bool infer_sort(HArena *a, const HInstr *in, Shape *out, HErr *err) {
  if (in->nops < 1) return bad(err, in, "sort needs at least one operand");
  const Shape *s0 = &in->ops[0]->shape;
  for (int k = 0; k < in->nops; k++) {
    if (!want_arr(err, in, k)) return false;
    if (!hlo_shape_same_dims(&in->ops[k]->shape, s0))
      return bad(err, in, "sort operands differ in dims: %s and %s", SS(s0),
                 SS(&in->ops[k]->shape));
  }
  if (in->dims.n != 1) return bad(err, in, "sort needs exactly one dimension");
  if (!check_dims(err, in, &in->dims, s0->rank, false, "sort dimension")) return false;
  if (!want_ncalls(err, in, 1)) return false;
  const HComp *c = callee(err, in, 0, "comparator");
  if (!c || !want_nparams(err, in, c, "comparator", 2 * in->nops)) return false;
  for (int k = 0; k < in->nops; k++) {
    Shape e = hlo_shape_scalar(in->ops[k]->shape.dt);
    if (!want_param(err, in, c, "comparator", 2 * k, &e) ||
        !want_param(err, in, c, "comparator", 2 * k + 1, &e))
      return false;
  }
  Shape p = hlo_shape_scalar(DT_PRED);
  if (!want_root(err, in, c, "comparator", &p)) return false;
  if (in->nops == 1) {
    *out = arr(s0->dt, s0->rank, s0->dims);
    return true;
  }
  return infer_tuple(a, in, out);
}

/* topk: the k largest (or smallest) along the last dim and their s32 indices. */
static bool infer_topk(HArena *a, const HInstr *in, Shape *out, HErr *err) {
  if (!want_arr(err, in, 0)) return false;
  const Shape *s = &in->ops[0]->shape;
  if (s->rank < 1) return bad(err, in, "topk needs an operand of rank 1 or more");
  if (in->topk_k > s->dims[s->rank - 1])
    return bad(err, in, "topk k %lld exceeds the last dim of %s", (long long)in->topk_k, SS(s));
  if (s->dt == DT_PRED || hlo_dtype_kind(s->dt) == DK_OTHER)
    return bad(err, in, "topk of %s values", hlo_dtype_name(s->dt));
  int64_t d[HLO_MAX_RANK];
  memcpy(d, s->dims, sizeof(int64_t) * (size_t)s->rank);
  d[s->rank - 1] = in->topk_k;
  Shape e[2] = {arr(s->dt, s->rank, d), arr(DT_S32, s->rank, d)};
  *out = hlo_shape_tuple(a, 2, e);
  return true;
}

/* batch-norm-*: operand of rank >= 1 with a feature dim; per-feature vectors of its type. */
static bool bn_common(const HInstr *in, int nvec, const int *vec, HErr *err) {
  if (!want_arr(err, in, 0)) return false;
  const Shape *s = &in->ops[0]->shape;
  if (!is_float(s->dt)) return bad(err, in, "%s of non-float %s", opname(in), SS(s));
  if (in->feature_index < 0 || in->feature_index >= s->rank)
    return bad(err, in, "feature_index %lld is out of range for %s", (long long)in->feature_index,
               SS(s));
  int64_t f = s->dims[in->feature_index];
  Shape v = arr(s->dt, 1, &f);
  for (int i = 0; i < nvec; i++) {
    const Shape *o = &in->ops[vec[i]]->shape;
    if (!hlo_shape_eq(o, &v))
      return bad(err, in, "operand %d %s must be %s (one value per feature)", vec[i], SS(o),
                 SS(&v));
  }
  return true;
}

static bool infer_batch_norm(HArena *a, const HInstr *in, Shape *out, HErr *err) {
  static const int vi[] = {1, 2, 3, 4}, vt[] = {1, 2}, vg[] = {1, 2, 3};
  const Shape *s = &in->ops[0]->shape;
  if (in->op == OP_BATCH_NORM_INFERENCE) { /* operand, scale, offset, mean, variance */
    if (!bn_common(in, 4, vi, err)) return false;
    *out = arr(s->dt, s->rank, s->dims);
    return true;
  }
  /* training: operand, scale, offset; grad: operand, scale, mean, variance, grad_output */
  bool train = in->op == OP_BATCH_NORM_TRAINING;
  if (!bn_common(in, train ? 2 : 3, train ? vt : vg, err)) return false;
  if (!train && !hlo_shape_eq(&in->ops[4]->shape, s))
    return bad(err, in, "grad_output %s must have the operand's shape %s", SS(&in->ops[4]->shape),
               SS(s));
  int64_t f = s->dims[in->feature_index];
  Shape el[3] = {arr(s->dt, s->rank, s->dims), arr(s->dt, 1, &f), arr(s->dt, 1, &f)};
  *out = hlo_shape_tuple(a, 3, el);
  return true;
}

/* ------------------------------------------------------------------ control flow */

static bool infer_while(HArena *a, const HInstr *in, Shape *out, HErr *err) {
  if (!want_ncalls(err, in, 2)) return false;
  const HComp *body = callee(err, in, 0, "body"), *cond = callee(err, in, 1, "condition");
  if (!body || !cond) return false;
  const Shape *st = &in->ops[0]->shape;
  Shape p = hlo_shape_scalar(DT_PRED);
  if (!want_nparams(err, in, cond, "condition", 1) ||
      !want_param(err, in, cond, "condition", 0, st) ||
      !want_root(err, in, cond, "condition", &p) || !want_nparams(err, in, body, "body", 1) ||
      !want_param(err, in, body, "body", 0, st) || !want_root(err, in, body, "body", st))
    return false;
  copy_plain(a, out, st);
  return true;
}

static bool infer_conditional(HArena *a, const HInstr *in, Shape *out, HErr *err) {
  if (in->nops < 1) return bad(err, in, "conditional needs a branch selector");
  const Shape *sel = &in->ops[0]->shape;
  if (!is_arr(sel) || sel->rank != 0 || (sel->dt != DT_PRED && sel->dt != DT_S32))
    return bad(err, in, "conditional selector %s must be pred[] or s32[]", SS(sel));
  if (sel->dt == DT_PRED && in->ncalls != 2)
    return bad(err, in, "conditional on pred needs 2 branches, has %d", in->ncalls);
  if (in->ncalls < 1) return bad(err, in, "conditional without branches");
  if (in->nops != in->ncalls + 1)
    return bad(err, in, "conditional with %d branches needs %d operands, got %d", in->ncalls,
               in->ncalls + 1, in->nops);
  const HComp *b0 = NULL;
  for (int k = 0; k < in->ncalls; k++) {
    char role[32];
    snprintf(role, sizeof role, "branch %d", k);
    const HComp *b = callee(err, in, k, role);
    if (!b || !want_nparams(err, in, b, role, 1) ||
        !want_param(err, in, b, role, 0, &in->ops[k + 1]->shape))
      return false;
    if (!b0)
      b0 = b;
    else if (!want_root(err, in, b, role, &b0->root->shape))
      return false;
  }
  copy_plain(a, out, &b0->root->shape);
  return true;
}

/* all-reduce and relatives: the reducer is binary on each operand's element type. */
static bool check_collective_reducer(HArena *a, const HInstr *in, HErr *err) {
  if (in->ncalls < 1) return true; /* the verifier's call-count rule reports it */
  const HComp *c = callee(err, in, 0, "to_apply");
  if (!c) return false;
  for (int k = 0; k < in->nops; k++) {
    const Shape *s = &in->ops[k]->shape;
    if (!is_arr(s)) continue;
    DType t = s->dt;
    if (!check_reducer(a, err, in, c, "to_apply", 1, &t, &t)) return false;
  }
  return true;
}

/* ------------------------------------------------------------------ entry point */

/* Arity of variadic ops (ops.def says -1): minimum and parity; fixed arities from the table. */
static bool check_arity(const HInstr *in, HErr *err) {
  int ar = hlo_op_arity(in->op), n = in->nops;
  if (n < 0 || (n > 0 && !in->ops)) return bad(err, in, "bad operand list");
  if (ar >= 0) {
    if (n != ar)
      return bad(err, in, "%s takes %d operand%s, got %d", opname(in), ar, ar == 1 ? "" : "s", n);
    return true;
  }
  /* variadic ops: the rules of each; the others (tuple, call, fusion, after-all, custom-call,
   * collectives) take any number */
  HOp op = in->op;
  if ((op == OP_REDUCE || op == OP_REDUCE_WINDOW) && (n < 2 || n % 2))
    return bad(err, in, "%s takes 2N operands (N inputs, N init values), got %d", opname(in), n);
  if (op == OP_SCATTER && (n < 3 || n % 2 == 0))
    return bad(err, in, "scatter takes 2N+1 operands (N inputs, indices, N updates), got %d", n);
  if ((op == OP_SORT || op == OP_CONCATENATE || op == OP_MAP || op == OP_DYNAMIC_SLICE ||
       op == OP_CONDITIONAL) &&
      n < 1)
    return bad(err, in, "%s takes at least 1 operand, got %d", opname(in), n);
  if (op == OP_DYNAMIC_UPDATE_SLICE && n < 2)
    return bad(err, in, "%s takes at least 2 operands, got %d", opname(in), n);
  return true;
}

bool hlo_infer_shape(HArena *a, const HInstr *in, Shape *out, HErr *err) {
  memset(out, 0, sizeof *out);
  if ((unsigned)in->op >= OP_COUNT) return bad(err, in, "unknown opcode %d", (int)in->op);
  if (!check_arity(in, err)) return false;
  for (int k = 0; k < in->nops; k++) {
    if (!in->ops[k]) return bad(err, in, "operand %d is missing", k);
    const char *p = shape_problem(&in->ops[k]->shape, 0);
    if (p) return bad(err, in, "operand %d '%s' has a malformed shape: %s", k, in->ops[k]->name, p);
  }
  switch (in->op) {
  /* leaves */
  case OP_PARAMETER:
    if (in->param_num < 0) return bad(err, in, "negative parameter number");
    hlo_shape_copy(a, out, &in->shape);
    return true;
  case OP_CONSTANT:
    /* a constant whose value was elided in the input keeps its declared shape: the value
     * is the consumer's concern, the verifier checks shapes */
    if (in->literal) {
      const char *p = shape_problem(&in->literal->shape, 0);
      if (p) return bad(err, in, "literal has a malformed shape: %s", p);
      if (hlo_shape_is_array(&in->literal->shape) && hlo_shape_elems(&in->literal->shape) &&
          !in->literal->data)
        return bad(err, in, "literal %s has no data", SS(&in->literal->shape));
      copy_plain(a, out, &in->literal->shape);
    } else {
      copy_plain(a, out, &in->shape);
    }
    return true;
  case OP_IOTA: return infer_iota(in, out, err);

  /* elementwise unary */
  case OP_ABS: return infer_to_component(in, EK_NUM_C, out, err);
  case OP_IMAG:
  case OP_REAL: return infer_to_component(in, EK_FLOAT_C, out, err);
  case OP_NEGATE: return infer_unary(in, EK_NUM_C, DT_INVALID, out, err);
  case OP_SIGN: return infer_unary(in, EK_SIGNED_C, DT_INVALID, out, err);
  /* XLA's floating-or-complex unary ops */
  case OP_CBRT:
  case OP_COSINE:
  case OP_EXP:
  case OP_EXPM1:
  case OP_LOG:
  case OP_LOG1P:
  case OP_LOGISTIC:
  case OP_RSQRT:
  case OP_SINE:
  case OP_SQRT:
  case OP_TAN:
  case OP_TANH: return infer_unary(in, EK_FLOAT_C, DT_INVALID, out, err);
  case OP_CEIL:
  case OP_ERF:
  case OP_FLOOR:
  case OP_ROUND_AFZ:
  case OP_ROUND_EVEN:
  case OP_ACOS:
  case OP_ACOSH:
  case OP_ASIN:
  case OP_ASINH:
  case OP_ATAN:
  case OP_ATANH:
  case OP_COSH:
  case OP_SINH: return infer_unary(in, EK_FLOAT, DT_INVALID, out, err);
  case OP_IS_FINITE: return infer_unary(in, EK_FLOAT, DT_PRED, out, err);
  case OP_CLZ:
  case OP_POPCNT: return infer_unary(in, EK_INT, DT_INVALID, out, err);
  case OP_NOT: return infer_unary(in, EK_INT_PRED, DT_INVALID, out, err);
  case OP_CONVERT: return infer_convert(in, out, err);
  case OP_BITCAST_CONVERT: return infer_bitcast_convert(in, out, err);
  case OP_REDUCE_PRECISION:
    if (in->exponent_bits < 1 || in->mantissa_bits < 0)
      return bad(err, in, "reduce-precision needs exponent_bits >= 1 and mantissa_bits >= 0");
    return infer_unary(in, EK_FLOAT, DT_INVALID, out, err);
  case OP_COPY:
    if (in->ops[0]->shape.dt == DT_TOKEN) return bad(err, in, "copy of a token");
    copy_plain(a, out, &in->ops[0]->shape);
    return true;

  /* elementwise binary */
  case OP_ADD:
  case OP_MULTIPLY: return infer_binary(in, EK_NUM_PRED_C, DT_INVALID, out, err);
  case OP_MAXIMUM:
  case OP_MINIMUM: return infer_binary(in, EK_NUM_PRED, DT_INVALID, out, err);
  case OP_SUBTRACT:
  case OP_DIVIDE:
  case OP_POWER: return infer_binary(in, EK_NUM_C, DT_INVALID, out, err);
  case OP_REMAINDER: return infer_binary(in, EK_NUM, DT_INVALID, out, err);
  case OP_ATAN2: return infer_binary(in, EK_FLOAT, DT_INVALID, out, err);
  case OP_MULHI:
  case OP_SHL:
  case OP_SHR_ARITH:
  case OP_SHR_LOGICAL: return infer_binary(in, EK_INT, DT_INVALID, out, err);
  case OP_AND:
  case OP_OR:
  case OP_XOR: return infer_binary(in, EK_INT_PRED, DT_INVALID, out, err);
  case OP_COMPARE: return infer_compare(in, out, err);
  case OP_COMPLEX: return infer_complex(in, out, err);
  case OP_STOCHASTIC_CONVERT: return infer_stochastic_convert(in, out, err);

  /* elementwise ternary and map */
  case OP_SELECT: return infer_select(in, out, err);
  case OP_CLAMP: return infer_clamp(in, out, err);
  case OP_MAP: return infer_map(a, in, out, err);

  /* reductions, windows, sorting */
  case OP_REDUCE: return infer_reduce(a, in, out, err);
  case OP_REDUCE_WINDOW: return infer_reduce_window(a, in, out, err);
  case OP_SELECT_AND_SCATTER: return infer_select_and_scatter(a, in, out, err);
  case OP_SORT: return infer_sort(a, in, out, err);
  case OP_TOPK: return infer_topk(a, in, out, err);
  case OP_BATCH_NORM_TRAINING:
  case OP_BATCH_NORM_INFERENCE:
  case OP_BATCH_NORM_GRAD: return infer_batch_norm(a, in, out, err);

  /* linear algebra */
  case OP_DOT: return infer_dot(in, out, err);
  case OP_FFT: return infer_fft(in, out, err);
  case OP_CONVOLUTION: return infer_convolution(in, out, err);
  case OP_CHOLESKY: {
    const Shape *s = &in->ops[0]->shape;
    if (!want_arr(err, in, 0)) return false;
    if (!is_float(s->dt) || s->rank < 2 || s->dims[s->rank - 1] != s->dims[s->rank - 2])
      return bad(err, in, "cholesky needs floating-point square matrices, got %s", SS(s));
    *out = arr(s->dt, s->rank, s->dims);
    return true;
  }

  /* data movement and shape */
  case OP_BITCAST: return infer_bitcast(a, in, out, err);
  case OP_BROADCAST: return infer_broadcast(in, out, err);
  case OP_RESHAPE: return infer_reshape(in, out, err);
  case OP_TRANSPOSE: return infer_transpose(in, out, err);
  case OP_REVERSE: return infer_reverse(in, out, err);
  case OP_SLICE: return infer_slice(in, out, err);
  case OP_CONCATENATE: return infer_concatenate(in, out, err);
  case OP_PAD: return infer_pad(in, out, err);
  case OP_DYNAMIC_SLICE: return infer_dynamic_slice(in, out, err);
  case OP_DYNAMIC_UPDATE_SLICE: return infer_dynamic_update_slice(in, out, err);
  case OP_GATHER: return infer_gather(in, out, err);
  case OP_SCATTER: return infer_scatter(a, in, out, err);
  case OP_TUPLE: return infer_tuple(a, in, out);
  case OP_GET_TUPLE_ELEMENT: return infer_gte(a, in, out, err);

  /* dynamic shapes */
  case OP_GET_DIMENSION_SIZE:
    if (!want_arr(err, in, 0)) return false;
    if (in->dims.n != 1 ||
        !check_dims(err, in, &in->dims, in->ops[0]->shape.rank, false, "dimensions"))
      return bad(err, in, "get-dimension-size needs one dimension of its operand");
    *out = hlo_shape_scalar(DT_S32);
    return true;

  /* control flow and structure */
  case OP_CALL: return check_operand_params(a, err, in, "to_apply", out);
  case OP_FUSION: return check_operand_params(a, err, in, "fused", out);
  case OP_WHILE: return infer_while(a, in, out, err);
  case OP_CONDITIONAL: return infer_conditional(a, in, out, err);
  case OP_OPT_BARRIER: copy_plain(a, out, &in->ops[0]->shape); return true;
  case OP_AFTER_ALL:
    for (int k = 0; k < in->nops; k++)
      if (in->ops[k]->shape.dt != DT_TOKEN)
        return bad(err, in, "after-all operand %d must be a token, got %s", k,
                   SS(&in->ops[k]->shape));
    *out = hlo_shape_scalar(DT_TOKEN);
    out->has_layout = false;
    return true;
  case OP_ADD_DEPENDENCY:
    if (in->ops[1]->shape.dt != DT_TOKEN)
      return bad(err, in, "add-dependency operand 1 must be a token, got %s",
                 SS(&in->ops[1]->shape));
    copy_plain(a, out, &in->ops[0]->shape);
    return true;
  case OP_RNG_BIT_GENERATOR: {
    const Shape *o = &in->shape;
    if (o->dt != DT_TUPLE || o->ntuple != 2 || !hlo_shape_eq(&o->tuple[0], &in->ops[0]->shape))
      return bad(err, in, "rng-bit-generator result %s must be (state %s, values)", SS(o),
                 SS(&in->ops[0]->shape));
    hlo_shape_copy(a, out, o);
    return true;
  }

  /* collectives whose reducer can be checked; their shape is taken as given */
  case OP_ALL_REDUCE:
  case OP_ALL_REDUCE_START:
  case OP_REDUCE_SCATTER:
    if (!check_collective_reducer(a, in, err)) return false;
    hlo_shape_copy(a, out, &in->shape);
    return true;

  /* taken as given: custom calls, dynamic shapes, unmodelled attributes, side effects */
  case OP_CUSTOM_CALL:
  case OP_SET_DIMENSION_SIZE:
  case OP_DYNAMIC_RESHAPE:
  case OP_TRIANGULAR_SOLVE:
  case OP_RAGGED_DOT:
  case OP_SCALED_DOT:
  case OP_SCAN:
  case OP_PARTITION_ID:
  case OP_REPLICA_ID:
  case OP_RNG_GET_AND_UPDATE_STATE:
  case OP_COPY_START:
  case OP_COPY_DONE:
  case OP_SHUFFLE:
  case OP_ASYNC_START:
  case OP_ASYNC_UPDATE:
  case OP_ASYNC_DONE:
  case OP_DOMAIN:
  case OP_ALL_REDUCE_DONE:
  case OP_ALL_GATHER:
  case OP_ALL_GATHER_START:
  case OP_ALL_GATHER_DONE:
  case OP_ALL_TO_ALL:
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
  case OP_RNG: {
    const char *p = shape_problem(&in->shape, 0);
    if (p) return bad(err, in, "malformed shape: %s", p);
    hlo_shape_copy(a, out, &in->shape);
    return true;
  }
  case OP_COUNT: break;
  }
  return bad(err, in, "unknown opcode %d", (int)in->op);
}

/* ------------------------------------------------------------------ the verifier */

/* How many computations an op calls: >= 0 exactly that many, -1 checked elsewhere (by
 * inference, or any number for custom calls and ops taken as given). */
static int op_ncalls(HOp op) {
  if (op == OP_WHILE || op == OP_SELECT_AND_SCATTER) return 2;
  if (op == OP_CALL || op == OP_FUSION || op == OP_REDUCE || op == OP_REDUCE_WINDOW ||
      op == OP_MAP || op == OP_SORT || op == OP_SCATTER)
    return 1;
  if (op == OP_CONDITIONAL || op == OP_CUSTOM_CALL || (hlo_op_flags(op) & OPF_SIDE)) return -1;
  return 0;
}

/* A set of strings (names) with open addressing, in a scratch arena. */
typedef struct NameSet {
  const char **slot; /* hash table, NULL = empty */
  size_t cap;        /* power of two */
} NameSet;

static uint64_t name_hash(const char *s) { return hlo_hash_bytes(HLO_HASH_START, s, strlen(s)); }

/* Insert s; false when it was already present. */
static bool nameset_add(NameSet *ns, const char *s) {
  size_t i = (size_t)name_hash(s) & (ns->cap - 1);
  while (ns->slot[i]) {
    if (!strcmp(ns->slot[i], s)) return false;
    i = (i + 1) & (ns->cap - 1);
  }
  ns->slot[i] = s;
  return true;
}

static NameSet nameset_new(HArena *a, size_t n) {
  NameSet ns;
  ns.cap = 16;
  while (ns.cap < 2 * n + 1)
    ns.cap *= 2;
  ns.slot = hlo_arena_alloc(a, sizeof(char *) * ns.cap);
  return ns;
}

/* Phase 1 for one computation: membership, order, parameters, arity, calls. */
static bool verify_structure(HArena *s, HModule *m, HComp *c, NameSet *names, HErr *err) {
  if (c->ninstrs <= 0 || !c->instrs) return bad_comp(err, c, "computation is empty");
  if (!c->root) return bad_comp(err, c, "computation has no root");
  for (int i = 0; i < c->ninstrs; i++) {
    HInstr *in = c->instrs[i];
    if (!in) return bad_comp(err, c, "instruction %d is missing", i);
    if (in->parent != c)
      return bad_comp(err, c, "instruction '%s' is listed here but belongs to computation '%s'",
                      in->name ? in->name : "?", in->parent ? in->parent->name : "(none)");
    if (!in->name || !*in->name) return bad_comp(err, c, "instruction %d has no name", i);
    in->idx = -1;
  }
  for (int i = 0; i < c->ninstrs; i++) {
    HInstr *in = c->instrs[i];
    if (in->idx != -1) return bad(err, in, "instruction is listed twice in its computation");
    in->idx = i;
    if (!nameset_add(names, in->name)) return bad(err, in, "instruction name is not unique");
  }
  if (c->root->parent != c || c->root->idx < 0 || c->instrs[c->root->idx] != c->root)
    return bad_comp(err, c, "root '%s' is not an instruction of this computation",
                    c->root->name ? c->root->name : "?");

  /* parameters: numbers 0..n-1, each once */
  int np = comp_nparams(c);
  bool *seen = hlo_arena_alloc(s, sizeof(bool) * (size_t)(np ? np : 1));
  for (int i = 0; i < c->ninstrs; i++) {
    HInstr *in = c->instrs[i];
    if (in->op != OP_PARAMETER) continue;
    if (in->param_num < 0 || in->param_num >= np)
      return bad(err, in,
                 "parameter number %lld is out of range: the computation has %d "
                 "parameters",
                 (long long)in->param_num, np);
    if (seen[in->param_num])
      return bad(err, in, "parameter number %lld appears twice", (long long)in->param_num);
    seen[in->param_num] = true;
  }

  for (int i = 0; i < c->ninstrs; i++) {
    HInstr *in = c->instrs[i];
    if ((unsigned)in->op >= OP_COUNT) return bad(err, in, "unknown opcode %d", (int)in->op);
    const char *p = shape_problem(&in->shape, 0);
    if (p) return bad(err, in, "malformed shape: %s", p);
    if (!check_arity(in, err)) return false;
    for (int k = 0; k < in->nops; k++) {
      HInstr *o = in->ops[k];
      if (!o) return bad(err, in, "operand %d is missing", k);
      if (o->parent != c)
        return bad(err, in, "operand %d '%s' belongs to computation '%s'", k,
                   o->name ? o->name : "?", o->parent ? o->parent->name : "(none)");
      if (o->idx < 0 || o->idx >= i || c->instrs[o->idx] != o)
        return bad(err, in,
                   "operand %d '%s' does not come before its user (cycle or bad "
                   "order)",
                   k, o->name);
    }
    if (in->nctrl < 0 || (in->nctrl > 0 && !in->ctrl))
      return bad(err, in, "bad control predecessor list");
    for (int k = 0; k < in->nctrl; k++) {
      HInstr *o = in->ctrl[k];
      if (!o) return bad(err, in, "control predecessor %d is missing", k);
      if (o->parent != c)
        return bad(err, in, "control predecessor '%s' belongs to computation '%s'",
                   o->name ? o->name : "?", o->parent ? o->parent->name : "(none)");
      if (o->idx < 0 || o->idx >= i || c->instrs[o->idx] != o)
        return bad(err, in,
                   "control predecessor '%s' does not come before its successor (cycle "
                   "or bad order)",
                   o->name);
    }
    int want = op_ncalls(in->op);
    if (want >= 0 && in->ncalls != want)
      return bad(err, in, "%s must call %d computation%s, it calls %d", opname(in), want,
                 want == 1 ? "" : "s", in->ncalls);
    if (in->ncalls < 0 || (in->ncalls > 0 && !in->calls))
      return bad(err, in, "bad called computation list");
    for (int k = 0; k < in->ncalls; k++) {
      HComp *callee_c = in->calls[k];
      if (!callee_c) return bad(err, in, "called computation %d is missing", k);
      if (callee_c->mod != m || callee_c->idx < 0 || callee_c->idx >= m->ncomps ||
          m->comps[callee_c->idx] != callee_c)
        return bad(err, in, "called computation '%s' does not belong to the module",
                   callee_c->name ? callee_c->name : "?");
      if (callee_c == c) return bad(err, in, "computation calls itself (recursion)");
    }
  }
  hlo_comp_renumber(c);
  return true;
}

/* Phase 2: depth-first search over the call graph; state 1 = on the stack, 2 = done. */
static bool verify_acyclic(HModule *m, HComp *c, uint8_t *state, HErr *err) {
  state[c->idx] = 1;
  for (int i = 0; i < c->ninstrs; i++) {
    HInstr *in = c->instrs[i];
    for (int k = 0; k < in->ncalls; k++) {
      HComp *d = in->calls[k];
      if (state[d->idx] == 1)
        return bad(err, in,
                   "call graph cycle: computation '%s' is being called from within "
                   "itself",
                   d->name);
      if (state[d->idx] == 0 && !verify_acyclic(m, d, state, err)) return false;
    }
  }
  state[c->idx] = 2;
  return true;
}

/* Layouts agree when both shapes carry one (a shape without layout takes the default). */
static bool layout_agrees(const Shape *want, const Shape *got) {
  return hlo_shape_eq_layout(want, got);
}

static bool verify_entry_layout(HModule *m, HErr *err) {
  HComp *e = m->entry;
  if (!m->has_entry_layout) return true;
  for (int i = 0; i <= m->nentry_layout; i++) {
    const Shape *w = i < m->nentry_layout ? &m->entry_layout_params[i] : &m->entry_layout_result;
    const char *p = shape_problem(w, 0);
    if (p) return bad_comp(err, e, "entry_computation_layout has a malformed shape: %s", p);
  }
  if (m->nentry_layout != e->nparams)
    return bad_comp(err, e, "entry_computation_layout lists %d parameters, the entry has %d",
                    m->nentry_layout, e->nparams);
  for (int i = 0; i < e->nparams; i++) {
    const Shape *w = &m->entry_layout_params[i], *g = &e->params[i]->shape;
    if (!layout_agrees(w, g))
      return bad(err, e->params[i],
                 "entry_computation_layout gives parameter %d as %s, the "
                 "parameter is %s",
                 i, SSL(w), SSL(g));
  }
  if (!layout_agrees(&m->entry_layout_result, &e->root->shape))
    return bad(err, e->root, "entry_computation_layout gives the result as %s, the root is %s",
               SSL(&m->entry_layout_result), SSL(&e->root->shape));
  return true;
}

bool hlo_verify(HModule *m, HErr *err) {
  if (!m) {
    hlo_err(err, NULL, NULL, NULL, "no module");
    return false;
  }
  if (!m->entry) {
    hlo_err(err, m->file, NULL, NULL, "module '%s' has no entry computation", m->name);
    return false;
  }
  HArena *s = hlo_arena_new();
  bool ok = false;
  for (int i = 0; i < m->ncomps; i++) {
    if (!m->comps[i]) {
      hlo_err(err, m->file, NULL, NULL, "computation %d is missing", i);
      goto done;
    }
    m->comps[i]->idx = i;
  }
  if (m->entry->idx < 0 || m->entry->idx >= m->ncomps || m->comps[m->entry->idx] != m->entry) {
    hlo_err(err, m->file, m->entry->name, NULL, "entry computation is not in the module");
    goto done;
  }

  /* phase 1: structure */
  NameSet comp_names = nameset_new(s, (size_t)m->ncomps);
  for (int i = 0; i < m->ncomps; i++) {
    HComp *c = m->comps[i];
    if (!c->name || !*c->name) {
      hlo_err(err, m->file, NULL, NULL, "computation %d has no name", i);
      goto done;
    }
    if (c->mod != m) {
      bad_comp(err, c, "computation does not belong to this module");
      goto done;
    }
    if (!nameset_add(&comp_names, c->name)) {
      bad_comp(err, c, "computation name is not unique");
      goto done;
    }
    /* (instruction names are scoped by their computation, as in XLA's text: its own test
       modules reuse names such as a reducer's parameters across computations) */
    NameSet names = nameset_new(s, (size_t)(c->ninstrs > 0 ? c->ninstrs : 0));
    if (!verify_structure(s, m, c, &names, err)) goto done;
  }

  /* phase 2: call graph and entry signature */
  uint8_t *state = hlo_arena_alloc(s, (size_t)m->ncomps);
  for (int i = 0; i < m->ncomps; i++)
    if (!state[i] && !verify_acyclic(m, m->comps[i], state, err)) goto done;
  if (!verify_entry_layout(m, err)) goto done;

  /* phase 3: shapes */
  for (int i = 0; i < m->ncomps; i++) {
    HComp *c = m->comps[i];
    for (int j = 0; j < c->ninstrs; j++) {
      HInstr *in = c->instrs[j];
      Shape want;
      if (!hlo_infer_shape(s, in, &want, err)) goto done;
      if (!hlo_shape_eq(&want, &in->shape)) {
        bad(err, in, "%s has shape %s, expected %s", opname(in), SS(&in->shape), SS(&want));
        goto done;
      }
    }
  }
  ok = true;
done:
  hlo_arena_free(s);
  return ok;
}
