/* hlo/interp_window.c: the reference interpreter's window and indexing ops.
 *
 * Convolution, reduce-window, select-and-scatter, gather, scatter, dynamic-slice,
 * dynamic-update-slice and pad, with XLA's exact semantics. Each function receives the
 * evaluated operands of one instruction and returns a new literal in interp_arena(st).
 *
 * Algorithm. Everything here walks an index space with an odometer (row-major, last dimension
 * fastest, the order XLA's evaluator uses) and maps each index to a linear element offset
 * through row-major strides. Windowed ops precompute, per window dimension, a table
 * `pos[o][k]` giving the operand position that output position o reads at window position k
 * (after stride, low padding, window dilation and base dilation), or -1 when that tap falls in
 * padding or between dilated base elements; the inner loops then only add offsets.
 *  - Convolution follows the StableHLO definition: feature_group_count G splits the input
 *    feature dimension and the kernel output features into G groups; batch_group_count B
 *    splits the input batch into B contiguous chunks paired with B groups of output features.
 *    Window reversal flips the kernel index only. For every output spatial position the
 *    list of valid (input offset, kernel offset) tap pairs is built once and shared by all
 *    batch/feature pairs. f32 accumulates in double in a fast path; other types go through
 *    hlo_load_* (double for floats, wrapping int64 for integers).
 *  - Reduce-window and the scatter half of select-and-scatter / scatter combine values through
 *    a Reducer: a binary elementwise computation (interp_binop_of) is applied directly on
 *    scalars, "return parameter 0/1" computations copy, anything else goes through
 *    interp_call with reused scalar argument literals. Accumulators live in the result
 *    literal, so each step is rounded to the element type exactly like XLA.
 *  - Select-and-scatter: for each source element the window over the operand is scanned in
 *    order; the first valid tap is the candidate and a later tap replaces it when
 *    select(candidate, tap) is false. Padding taps are never selected.
 *  - Gather/scatter implement GatherDimensionNumbers / ScatterDimensionNumbers including
 *    index_vector_dim == rank (implicit trailing 1) and the operand/indices batching dims.
 *    Gather start indices are clamped so the slice stays in bounds; a scatter window that is
 *    not entirely in bounds is skipped entirely.
 *
 * Requires: operand literals as evaluated by interp.c. Nothing is assumed verified: every
 * rank, dimension number and size used for indexing is checked first and reported through
 * hlo_err_at, so invalid input yields a located error, never an out-of-bounds access. */
#include "interp_impl.h"

#include <string.h>

/* ------------------------------------------------------------------ shared helpers */

/* Advance a row-major index over dims; false after the last index. */
static bool odo_next(int rank, const int64_t *dims, int64_t *idx) {
  for (int d = rank - 1; d >= 0; d--) {
    if (++idx[d] < dims[d]) return true;
    idx[d] = 0;
  }
  return false;
}

static bool dims_empty(int rank, const int64_t *dims) {
  for (int d = 0; d < rank; d++)
    if (dims[d] == 0) return true;
  return false;
}

/* The literal is a dense array (not a tuple or token). */
static bool want_array(HErr *err, const HInstr *in, const Literal *l, const char *what) {
  if (!l || !hlo_shape_is_array(&l->shape) || l->shape.dt == DT_TOKEN) {
    hlo_err_at(err, in, "%s must be an array value", what);
    return false;
  }
  if (l->shape.rank < 0 || l->shape.rank > HLO_MAX_RANK) {
    hlo_err_at(err, in, "%s has invalid rank %d", what, l->shape.rank);
    return false;
  }
  for (int d = 0; d < l->shape.rank; d++)
    if (l->shape.dims[d] < 0) {
      hlo_err_at(err, in, "%s has negative dimension %d", what, d);
      return false;
    }
  return true;
}

static bool want_scalar(HErr *err, const HInstr *in, const Literal *l, const char *what) {
  if (!want_array(err, in, l, what)) return false;
  if (l->shape.rank != 0) {
    hlo_err_at(err, in, "%s must be a scalar, got rank %d", what, l->shape.rank);
    return false;
  }
  return true;
}

/* The instruction's own result shape is an array of sane rank. */
static bool want_result_array(HErr *err, const HInstr *in, const Shape *s) {
  if (!hlo_shape_is_array(s) || s->dt == DT_TOKEN || s->rank < 0 || s->rank > HLO_MAX_RANK) {
    hlo_err_at(err, in, "result shape must be an array");
    return false;
  }
  for (int d = 0; d < s->rank; d++)
    if (s->dims[d] < 0) {
      hlo_err_at(err, in, "result dimension %d is negative", d);
      return false;
    }
  return true;
}

static bool want_int_type(HErr *err, const HInstr *in, DType dt, const char *what) {
  if (!hlo_dtype_is_int(dt)) {
    hlo_err_at(err, in, "%s must have an integer type, got %s", what, hlo_dtype_name(dt));
    return false;
  }
  return true;
}

/* Read an index element; u64 values above INT64_MAX saturate (they are clamped anyway). */
static int64_t load_index(const Literal *l, int64_t i) {
  if (l->shape.dt == DT_U64) {
    uint64_t v = ((const uint64_t *)l->data)[i];
    return v > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)v;
  }
  return hlo_load_i64(l->shape.dt, l->data, i);
}

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

/* Entries of an IList are distinct dimension numbers in [0, rank); marks them in flag. */
static bool mark_dims(HErr *err, const HInstr *in, const IList *l, int rank, bool *flag,
                      const char *what) {
  for (int i = 0; i < l->n; i++) {
    int64_t d = l->v[i];
    if (d < 0 || d >= rank) {
      hlo_err_at(err, in, "%s: dimension %lld out of range for rank %d", what, (long long)d, rank);
      return false;
    }
    if (flag[d]) {
      hlo_err_at(err, in, "%s: dimension %lld repeated or used twice", what, (long long)d);
      return false;
    }
    flag[d] = true;
  }
  return true;
}

/* ------------------------------------------------------------------ window geometry */

/* Size of one windowed output dimension (XLA's formula); -1 when the attributes are invalid. */
static int64_t win_out_size(const WinDim *w, int64_t in_size) {
  if (w->size < 0 || w->stride < 1 || w->win_dil < 1 || w->base_dil < 1) return -1;
  int64_t dil_in = in_size == 0 ? 0 : (in_size - 1) * w->base_dil + 1;
  int64_t padded = dil_in + w->pad_lo + w->pad_hi;
  int64_t dil_win = w->size == 0 ? 0 : (w->size - 1) * w->win_dil + 1;
  if (padded < dil_win || padded < 0) return 0;
  return (padded - dil_win) / w->stride + 1;
}

/* Bound on window attributes so that the size arithmetic cannot overflow int64. */
#define WIN_LIMIT ((int64_t)1 << 40)

static bool check_windim(HErr *err, const HInstr *in, const WinDim *w, int i) {
  if (w->size < 0 || w->stride < 1 || w->win_dil < 1 || w->base_dil < 1 || w->size > WIN_LIMIT ||
      w->stride > WIN_LIMIT || w->win_dil > WIN_LIMIT || w->base_dil > WIN_LIMIT ||
      w->pad_lo > WIN_LIMIT || w->pad_lo < -WIN_LIMIT || w->pad_hi > WIN_LIMIT ||
      w->pad_hi < -WIN_LIMIT) {
    hlo_err_at(
        err, in, "window dimension %d: size %lld, stride %lld, dilations %lld/%lld are invalid", i,
        (long long)w->size, (long long)w->stride, (long long)w->win_dil, (long long)w->base_dil);
    return false;
  }
  return true;
}

/* Table pos[o * size + k]: operand position read by output o at window tap k, or -1. The
 * taps are not reversed here; callers apply window reversal to the kernel side. */
static int64_t *win_table(HArena *a, const WinDim *w, int64_t out_size, int64_t in_size) {
  int64_t n = out_size * w->size;
  int64_t *t = hlo_arena_alloc(a, sizeof(int64_t) * (size_t)(n ? n : 1));
  for (int64_t o = 0; o < out_size; o++)
    for (int64_t k = 0; k < w->size; k++) {
      int64_t p = o * w->stride - w->pad_lo + k * w->win_dil, q = -1;
      if (p >= 0 && p % w->base_dil == 0) {
        p /= w->base_dil;
        if (p < in_size) q = p;
      }
      t[o * w->size + k] = q;
    }
  return t;
}

/* ------------------------------------------------------------------ reducers */

enum {
  RK_CALL,  /* call the computation through interp_call */
  RK_BINOP, /* root is a binary elementwise op of parameters 0 and 1 */
  RK_KEEP,  /* root is parameter 0: the accumulator stays */
  RK_TAKE,  /* root is parameter 1: the new value replaces the accumulator (scatter "set") */
};

/* Combines n accumulators with n new values through a called computation. */
typedef struct Reducer {
  IState *st;                 /* interpreter state for interp_call */
  const HInstr *in;           /* the instruction, for messages */
  HComp *comp;                /* the combiner computation */
  int n;                      /* number of values combined at once (variadic arity) */
  int kind;                   /* RK_*: call, binop fast path, keep accumulator, take new value */
  HOp op;                     /* RK_BINOP: the elementwise op */
  DType dt[HLO_MAX_RANK * 2]; /* element types: accumulators then values (2n entries) */
  Literal **args;             /* RK_CALL: 2n reusable scalar argument literals */
} Reducer;

static bool param_no(const HInstr *p, int64_t want) {
  return p->op == OP_PARAMETER && p->param_num == want;
}

static bool red_init(Reducer *r, IState *st, const HInstr *in, HComp *comp, int n,
                     const DType *acc_dt, const DType *val_dt, HErr *err) {
  memset(r, 0, sizeof *r);
  r->st = st;
  r->in = in;
  r->comp = comp;
  r->n = n;
  if (!comp) {
    hlo_err_at(err, in, "missing combiner computation");
    return false;
  }
  if (n > HLO_MAX_RANK) {
    /* dt[] holds 2*HLO_MAX_RANK types; larger variadic ops are rare enough to reject */
    hlo_err_at(err, in, "more than %d variadic operands are not supported", HLO_MAX_RANK);
    return false;
  }
  for (int i = 0; i < n; i++) {
    r->dt[i] = acc_dt[i];
    r->dt[n + i] = val_dt[i];
  }
  r->kind = RK_CALL;
  if (n == 1 && acc_dt[0] == val_dt[0]) {
    const HInstr *root = comp->root;
    bool scalar = root && hlo_shape_is_array(&root->shape) && root->shape.rank == 0 &&
                  root->shape.dt == acc_dt[0];
    HOp op;
    if (scalar && param_no(root, 0))
      r->kind = RK_KEEP;
    else if (scalar && param_no(root, 1))
      r->kind = RK_TAKE;
    else if (interp_binop_of(comp, &op)) {
      r->kind = RK_BINOP;
      r->op = op;
    }
  }
  if (r->kind == RK_CALL) {
    HArena *a = interp_arena(st);
    r->args = hlo_arena_alloc(a, sizeof(Literal *) * (size_t)(2 * n));
    for (int i = 0; i < 2 * n; i++) {
      Shape s = hlo_shape_scalar(r->dt[i]);
      r->args[i] = hlo_literal_new(a, &s);
    }
  }
  return true;
}

/* acc[k][ai] = comp(acc[0..n)[ai], val[0..n)[vi]) for every k. */
static bool red_apply(Reducer *r, void *const *acc, int64_t ai, const void *const *val, int64_t vi,
                      HErr *err) {
  DType dt = r->dt[0];
  switch (r->kind) {
  case RK_KEEP: return true;
  case RK_TAKE: {
    size_t es = hlo_dtype_size(dt);
    memcpy((char *)acc[0] + (size_t)ai * es, (const char *)val[0] + (size_t)vi * es, es);
    return true;
  }
  case RK_BINOP:
    if (hlo_dtype_is_float(dt)) {
      double v =
          interp_binop_f64(r->op, dt, hlo_load_f64(dt, acc[0], ai), hlo_load_f64(dt, val[0], vi));
      hlo_store_f64(dt, acc[0], ai, v);
    } else {
      int64_t v =
          interp_binop_i64(r->op, dt, hlo_load_i64(dt, acc[0], ai), hlo_load_i64(dt, val[0], vi));
      hlo_store_i64(dt, acc[0], ai, v);
    }
    return true;
  }
  int n = r->n;
  for (int k = 0; k < n; k++) {
    size_t ea = hlo_dtype_size(r->dt[k]), ev = hlo_dtype_size(r->dt[n + k]);
    memcpy(r->args[k]->data, (const char *)acc[k] + (size_t)ai * ea, ea);
    memcpy(r->args[n + k]->data, (const char *)val[k] + (size_t)vi * ev, ev);
  }
  Literal *res = interp_call(r->st, r->comp, r->args, 2 * n, err);
  if (!res) return false;
  for (int k = 0; k < n; k++) {
    const Literal *e = res;
    if (res->shape.dt == DT_TUPLE) {
      if (res->shape.ntuple != n) {
        hlo_err_at(err, r->in, "combiner '%s' returned %d values, expected %d", r->comp->name,
                   res->shape.ntuple, n);
        return false;
      }
      e = res->elems[k];
    } else if (n != 1) {
      hlo_err_at(err, r->in, "combiner '%s' must return a tuple of %d scalars", r->comp->name, n);
      return false;
    }
    if (!hlo_shape_is_array(&e->shape) || e->shape.rank != 0 || e->shape.dt != r->dt[k]) {
      hlo_err_at(err, r->in, "combiner '%s' result %d is not a %s scalar", r->comp->name, k,
                 hlo_dtype_name(r->dt[k]));
      return false;
    }
    size_t ea = hlo_dtype_size(r->dt[k]);
    memcpy((char *)acc[k] + (size_t)ai * ea, e->data, ea);
  }
  return true;
}

/* ------------------------------------------------------------------ convolution */

/* Checks that dimension numbers a, b and the spatial list form a permutation of [0, rank). */
static bool conv_perm(HErr *err, const HInstr *in, int rank, int64_t a, int64_t b, const IList *sp,
                      const char *what) {
  bool seen[HLO_MAX_RANK] = {false};
  IList l = *sp;
  if (l.n + 2 > HLO_MAX_RANK || l.n + 2 != rank) {
    hlo_err_at(err, in, "%s dimension numbers do not cover rank %d", what, rank);
    return false;
  }
  l.v[l.n++] = a;
  l.v[l.n++] = b;
  return mark_dims(err, in, &l, rank, seen, what);
}

/* One valid tap of a convolution window: element offsets into input and kernel. */
typedef struct Tap {
  int64_t lhs; /* input spatial offset */
  int64_t rhs; /* kernel spatial offset */
} Tap;

Literal *interp_convolution(IState *st, const HInstr *in, Literal *const *ops, HErr *err) {
  if (in->nops != 2) {
    hlo_err_at(err, in, "convolution takes 2 operands, got %d", in->nops);
    return NULL;
  }
  const Literal *lhs = ops[0], *rhs = ops[1];
  if (!want_array(err, in, lhs, "convolution input") ||
      !want_array(err, in, rhs, "convolution kernel") || !want_result_array(err, in, &in->shape))
    return NULL;
  const ConvDims *cd = in->conv;
  if (!cd) {
    hlo_err_at(err, in, "convolution without dimension numbers");
    return NULL;
  }
  const Shape *ls = &lhs->shape, *ks = &rhs->shape, *os = &in->shape;
  int rank = ls->rank, ns = cd->in_sp.n;
  if (ks->rank != rank || os->rank != rank) {
    hlo_err_at(err, in, "convolution input, kernel and result ranks differ (%d, %d, %d)", rank,
               ks->rank, os->rank);
    return NULL;
  }
  if (!conv_perm(err, in, rank, cd->in_batch, cd->in_feat, &cd->in_sp, "input") ||
      !conv_perm(err, in, rank, cd->k_in, cd->k_out, &cd->k_sp, "kernel") ||
      !conv_perm(err, in, rank, cd->out_batch, cd->out_feat, &cd->out_sp, "output"))
    return NULL;
  int wn = in->window ? in->window->n : 0;
  if (wn != ns) {
    hlo_err_at(err, in, "window has %d dimensions, convolution has %d spatial dimensions", wn, ns);
    return NULL;
  }
  int64_t G = in->feature_groups, B = in->batch_groups;
  int64_t N = ls->dims[cd->in_batch], C = ls->dims[cd->in_feat];
  int64_t KI = ks->dims[cd->k_in], O = ks->dims[cd->k_out];
  if (G < 1 || B < 1 || (G > 1 && B > 1)) {
    hlo_err_at(err, in, "invalid feature_group_count %lld / batch_group_count %lld", (long long)G,
               (long long)B);
    return NULL;
  }
  if (C % G != 0 || C / G != KI || O % G != 0) {
    hlo_err_at(err, in,
               "input features %lld, kernel input features %lld and output features %lld do "
               "not match feature_group_count %lld",
               (long long)C, (long long)KI, (long long)O, (long long)G);
    return NULL;
  }
  if (N % B != 0 || O % B != 0) {
    hlo_err_at(err, in,
               "batch %lld and output features %lld not divisible by batch_group_count %lld",
               (long long)N, (long long)O, (long long)B);
    return NULL;
  }
  int64_t NB = N / B;
  if (os->dims[cd->out_batch] != NB || os->dims[cd->out_feat] != O) {
    hlo_err_at(err, in, "result batch/feature sizes %lld/%lld, expected %lld/%lld",
               (long long)os->dims[cd->out_batch], (long long)os->dims[cd->out_feat], (long long)NB,
               (long long)O);
    return NULL;
  }
  int64_t osz[HLO_MAX_RANK], ksz[HLO_MAX_RANK];
  for (int i = 0; i < ns; i++) {
    const WinDim *w = &in->window->d[i];
    if (!check_windim(err, in, w, i)) return NULL;
    ksz[i] = ks->dims[cd->k_sp.v[i]];
    if (w->size != ksz[i]) {
      hlo_err_at(err, in, "window size %lld in spatial dimension %d, kernel has %lld",
                 (long long)w->size, i, (long long)ksz[i]);
      return NULL;
    }
    osz[i] = os->dims[cd->out_sp.v[i]];
    int64_t want = win_out_size(w, ls->dims[cd->in_sp.v[i]]);
    if (osz[i] != want) {
      hlo_err_at(err, in, "result spatial dimension %d has size %lld, window gives %lld", i,
                 (long long)osz[i], (long long)want);
      return NULL;
    }
  }

  HArena *a = interp_arena(st);
  Literal *res = hlo_literal_new(a, os);
  if (hlo_shape_elems(os) == 0) return res;

  int64_t lst[HLO_MAX_RANK], kst[HLO_MAX_RANK], ost[HLO_MAX_RANK];
  hlo_shape_strides(ls, lst);
  hlo_shape_strides(ks, kst);
  hlo_shape_strides(os, ost);
  const int64_t *tab[HLO_MAX_RANK];
  int64_t ntaps = 1;
  for (int i = 0; i < ns; i++) {
    tab[i] = win_table(a, &in->window->d[i], osz[i], ls->dims[cd->in_sp.v[i]]);
    ntaps *= ksz[i];
  }
  Tap *taps = hlo_arena_alloc(a, sizeof(Tap) * (size_t)(ntaps ? ntaps : 1));

  DType ldt = ls->dt, kdt = ks->dt, odt = os->dt;
  bool fast = ldt == DT_F32 && kdt == DT_F32 && odt == DT_F32;
  bool fl = hlo_dtype_is_float(odt);
  int64_t ofg = O / G; /* output features per feature group */
  int64_t obg = O / B; /* output features per batch group */
  int64_t lsf = lst[cd->in_feat], lsb = lst[cd->in_batch];
  int64_t ksi = kst[cd->k_in], kso = kst[cd->k_out];
  int64_t osb = ost[cd->out_batch], osf = ost[cd->out_feat];
  const float *lf = lhs->data, *kf = rhs->data;
  float *of = res->data;

  int64_t op[HLO_MAX_RANK] = {0}; /* output spatial position */
  do {
    /* collect the valid taps of this output spatial position */
    int64_t nt = 0, ospo = 0, kp[HLO_MAX_RANK] = {0};
    for (int i = 0; i < ns; i++)
      ospo += op[i] * ost[cd->out_sp.v[i]];
    if (ntaps > 0) do {
        int64_t lo = 0, ro = 0;
        bool ok = true;
        for (int i = 0; i < ns && ok; i++) {
          int64_t p = tab[i][op[i] * ksz[i] + kp[i]];
          if (p < 0) ok = false;
          lo += p * lst[cd->in_sp.v[i]];
          int64_t kk = in->window->d[i].reversal ? ksz[i] - 1 - kp[i] : kp[i];
          ro += kk * kst[cd->k_sp.v[i]];
        }
        if (ok) taps[nt++] = (Tap){lo, ro};
      } while (odo_next(ns, ksz, kp));

    for (int64_t b = 0; b < NB; b++)
      for (int64_t o = 0; o < O; o++) {
        int64_t fg = o / ofg, bg = o / obg;
        int64_t lbase = (bg * NB + b) * lsb + fg * KI * lsf, kbase = o * kso;
        int64_t oi = b * osb + o * osf + ospo;
        if (fast) {
          double acc = 0;
          for (int64_t ci = 0; ci < KI; ci++) {
            const float *lp = lf + lbase + ci * lsf, *kp2 = kf + kbase + ci * ksi;
            for (int64_t t = 0; t < nt; t++)
              acc += (double)lp[taps[t].lhs] * kp2[taps[t].rhs];
          }
          of[oi] = (float)acc;
        } else if (fl) {
          double acc = 0;
          for (int64_t ci = 0; ci < KI; ci++)
            for (int64_t t = 0; t < nt; t++)
              acc += hlo_load_f64(ldt, lhs->data, lbase + ci * lsf + taps[t].lhs) *
                     hlo_load_f64(kdt, rhs->data, kbase + ci * ksi + taps[t].rhs);
          hlo_store_f64(odt, res->data, oi, acc);
        } else {
          uint64_t acc = 0; /* wraps like two's complement hardware */
          for (int64_t ci = 0; ci < KI; ci++)
            for (int64_t t = 0; t < nt; t++)
              acc += (uint64_t)hlo_load_i64(ldt, lhs->data, lbase + ci * lsf + taps[t].lhs) *
                     (uint64_t)hlo_load_i64(kdt, rhs->data, kbase + ci * ksi + taps[t].rhs);
          if (odt == DT_PRED)
            hlo_store_i64(odt, res->data, oi, acc != 0);
          else
            hlo_store_i64(odt, res->data, oi, (int64_t)acc);
        }
      }
  } while (odo_next(ns, osz, op));
  return res;
}

/* ------------------------------------------------------------------ reduce-window */

/* Per-dimension window tables for an operand of shape s and output dims out. */
static bool window_setup(HErr *err, const HInstr *in, const Shape *s, const int64_t *out,
                         const char *what) {
  const Window *w = in->window;
  if (!w && s->rank == 0) return true; /* a scalar has an empty window */
  if (!w || w->n != s->rank) {
    hlo_err_at(err, in, "window has %d dimensions, %s has rank %d", w ? w->n : 0, what, s->rank);
    return false;
  }
  for (int d = 0; d < s->rank; d++) {
    if (!check_windim(err, in, &w->d[d], d)) return false;
    int64_t want = win_out_size(&w->d[d], s->dims[d]);
    if (out[d] != want) {
      hlo_err_at(err, in, "windowed dimension %d has size %lld, window gives %lld", d,
                 (long long)out[d], (long long)want);
      return false;
    }
  }
  return true;
}

Literal *interp_reduce_window(IState *st, const HInstr *in, Literal *const *ops, HErr *err) {
  int n = in->nops / 2;
  if (in->nops < 2 || in->nops % 2 != 0) {
    hlo_err_at(err, in, "reduce-window takes N inputs and N init values, got %d operands",
               in->nops);
    return NULL;
  }
  if (n > HLO_MAX_RANK) {
    hlo_err_at(err, in, "more than %d reduce-window inputs are not supported", HLO_MAX_RANK);
    return NULL;
  }
  if (in->ncalls < 1) {
    hlo_err_at(err, in, "reduce-window without to_apply computation");
    return NULL;
  }
  if (n == 1 ? in->shape.dt == DT_TUPLE : (in->shape.dt != DT_TUPLE || in->shape.ntuple != n)) {
    hlo_err_at(err, in, "reduce-window result must be %s", n == 1 ? "an array" : "a tuple of N");
    return NULL;
  }
  const Shape *s0 = NULL;
  DType dts[HLO_MAX_RANK];
  for (int k = 0; k < n; k++) {
    const Literal *x = ops[k], *init = ops[n + k];
    const Shape *rs = n == 1 ? &in->shape : &in->shape.tuple[k];
    if (!want_array(err, in, x, "reduce-window input") ||
        !want_scalar(err, in, init, "reduce-window init value") || !want_result_array(err, in, rs))
      return NULL;
    if (!s0) s0 = &x->shape;
    if (!hlo_shape_same_dims(&x->shape, s0) || init->shape.dt != x->shape.dt ||
        rs->dt != x->shape.dt || rs->rank != s0->rank) {
      hlo_err_at(err, in,
                 "reduce-window input %d does not match the other inputs, its init "
                 "value or the result",
                 k);
      return NULL;
    }
    if (k > 0 && !hlo_shape_same_dims(rs, &in->shape.tuple[0])) {
      hlo_err_at(err, in, "reduce-window results have different dimensions");
      return NULL;
    }
    dts[k] = x->shape.dt;
  }
  const Shape *rs0 = n == 1 ? &in->shape : &in->shape.tuple[0];
  if (!window_setup(err, in, s0, rs0->dims, "the input")) return NULL;

  HArena *a = interp_arena(st);
  Reducer red;
  if (!red_init(&red, st, in, in->calls[0], n, dts, dts, err)) return NULL;
  Literal *res = hlo_literal_new(a, &in->shape);
  void *acc[HLO_MAX_RANK];
  const void *val[HLO_MAX_RANK];
  for (int k = 0; k < n; k++) {
    acc[k] = n == 1 ? res->data : res->elems[k]->data;
    val[k] = ops[k]->data;
  }
  int rank = s0->rank;
  if (dims_empty(rank, rs0->dims)) return res;

  const Window *w = in->window;
  int64_t ist[HLO_MAX_RANK], wsz[HLO_MAX_RANK];
  const int64_t *tab[HLO_MAX_RANK];
  bool wempty = false;
  hlo_shape_strides(s0, ist);
  for (int d = 0; d < rank; d++) {
    tab[d] = win_table(a, &w->d[d], rs0->dims[d], s0->dims[d]);
    wsz[d] = w->d[d].size;
    if (wsz[d] == 0) wempty = true;
  }
  int64_t oidx[HLO_MAX_RANK] = {0}, oi = 0;
  do {
    for (int k = 0; k < n; k++) {
      size_t es = hlo_dtype_size(dts[k]);
      memcpy((char *)acc[k] + (size_t)oi * es, ops[n + k]->data, es);
    }
    int64_t widx[HLO_MAX_RANK] = {0};
    if (!wempty) do {
        int64_t ii = 0;
        bool ok = true;
        for (int d = 0; d < rank && ok; d++) {
          int64_t p = tab[d][oidx[d] * wsz[d] + widx[d]];
          if (p < 0) ok = false;
          ii += p * ist[d];
        }
        if (ok && !red_apply(&red, acc, oi, val, ii, err)) return NULL;
      } while (odo_next(rank, wsz, widx));
    oi++;
  } while (odo_next(rank, rs0->dims, oidx));
  return res;
}

/* ------------------------------------------------------------------ select-and-scatter */

/* The select computation as a direct comparison of its two parameters, when it is one. */
typedef struct SelFast {
  bool on;    /* select is compare(parameter(0), parameter(1)) */
  CmpDir dir; /* its direction */
} SelFast;

static SelFast sel_fast_of(const HComp *c, DType dt) {
  SelFast f = {false, CMP_EQ};
  const HInstr *r = c->root;
  if (!r || r->op != OP_COMPARE || r->nops != 2 || dt == DT_PRED) return f;
  if (r->ops[0]->shape.dt != dt || r->ops[1]->shape.dt != dt) return f;
  DKind k = hlo_dtype_kind(dt);
  bool plain = r->cmp_type == CMPT_DEFAULT || (r->cmp_type == CMPT_FLOAT && k == DK_FLOAT) ||
               (r->cmp_type == CMPT_SIGNED && k == DK_SINT) ||
               (r->cmp_type == CMPT_UNSIGNED && k == DK_UINT);
  if (!plain) return f; /* total order or reinterpreted signedness: call the computation */
  if (param_no(r->ops[0], 0) && param_no(r->ops[1], 1)) {
    f.on = true;
    f.dir = r->cmp_dir;
  }
  return f;
}

static bool cmp_f64(CmpDir d, double x, double y) {
  switch (d) {
  case CMP_EQ: return x == y;
  case CMP_NE: return x != y;
  case CMP_GE: return x >= y;
  case CMP_GT: return x > y;
  case CMP_LE: return x <= y;
  case CMP_LT: return x < y;
  }
  return false;
}

bool hlo_cmp_i64(CmpDir d, DType dt, int64_t x, int64_t y) {
  if (hlo_dtype_kind(dt) == DK_UINT) {
    uint64_t a = (uint64_t)x, b = (uint64_t)y;
    switch (d) {
    case CMP_EQ: return a == b;
    case CMP_NE: return a != b;
    case CMP_GE: return a >= b;
    case CMP_GT: return a > b;
    case CMP_LE: return a <= b;
    case CMP_LT: return a < b;
    }
    return false;
  }
  switch (d) {
  case CMP_EQ: return x == y;
  case CMP_NE: return x != y;
  case CMP_GE: return x >= y;
  case CMP_GT: return x > y;
  case CMP_LE: return x <= y;
  case CMP_LT: return x < y;
  }
  return false;
}

Literal *interp_select_and_scatter(IState *st, const HInstr *in, Literal *const *ops, HErr *err) {
  if (in->nops != 3) {
    hlo_err_at(err, in, "select-and-scatter takes 3 operands, got %d", in->nops);
    return NULL;
  }
  if (in->ncalls < 2 || !in->calls[0] || !in->calls[1]) {
    hlo_err_at(err, in, "select-and-scatter needs select and scatter computations");
    return NULL;
  }
  const Literal *x = ops[0], *src = ops[1], *init = ops[2];
  if (!want_array(err, in, x, "select-and-scatter operand") ||
      !want_array(err, in, src, "select-and-scatter source") ||
      !want_scalar(err, in, init, "select-and-scatter init value") ||
      !want_result_array(err, in, &in->shape))
    return NULL;
  const Shape *xs = &x->shape, *ss = &src->shape;
  DType dt = in->shape.dt;
  if (!hlo_shape_same_dims(&in->shape, xs) || src->shape.dt != dt || init->shape.dt != dt ||
      ss->rank != xs->rank) {
    hlo_err_at(err, in, "select-and-scatter operand, source, init and result do not match");
    return NULL;
  }
  if (!window_setup(err, in, xs, ss->dims, "the operand")) return NULL;

  HArena *a = interp_arena(st);
  Literal *res = hlo_literal_new(a, &in->shape);
  int64_t total = hlo_shape_elems(xs);
  size_t es = hlo_dtype_size(dt);
  for (int64_t i = 0; i < total; i++)
    memcpy((char *)res->data + (size_t)i * es, init->data, es);
  int rank = xs->rank;
  if (dims_empty(rank, ss->dims)) return res;

  Reducer red;
  if (!red_init(&red, st, in, in->calls[1], 1, &dt, &dt, err)) return NULL;
  DType xdt = xs->dt;
  HComp *selc = in->calls[0];
  SelFast sf = sel_fast_of(selc, xdt);
  Literal *sargs[2] = {NULL, NULL};
  if (!sf.on) {
    Shape s = hlo_shape_scalar(xdt);
    sargs[0] = hlo_literal_new(a, &s);
    sargs[1] = hlo_literal_new(a, &s);
  }
  size_t xes = hlo_dtype_size(xdt);
  bool xfl = hlo_dtype_is_float(xdt);

  const Window *w = in->window;
  int64_t ist[HLO_MAX_RANK], wsz[HLO_MAX_RANK];
  const int64_t *tab[HLO_MAX_RANK];
  bool wempty = false;
  hlo_shape_strides(xs, ist);
  for (int d = 0; d < rank; d++) {
    tab[d] = win_table(a, &w->d[d], ss->dims[d], xs->dims[d]);
    wsz[d] = w->d[d].size;
    if (wsz[d] == 0) wempty = true;
  }
  if (wempty) return res;
  void *accp[1] = {res->data};
  const void *valp[1] = {src->data};
  int64_t sidx[HLO_MAX_RANK] = {0}, si = 0;
  do {
    int64_t widx[HLO_MAX_RANK] = {0}, sel = -1;
    do {
      int64_t ii = 0;
      bool ok = true;
      for (int d = 0; d < rank && ok; d++) {
        int64_t p = tab[d][sidx[d] * wsz[d] + widx[d]];
        if (p < 0) ok = false;
        ii += p * ist[d];
      }
      if (!ok) continue;
      if (sel < 0) {
        sel = ii;
        continue;
      }
      bool keep;
      if (sf.on) {
        keep =
            xfl ? cmp_f64(sf.dir, hlo_load_f64(xdt, x->data, sel), hlo_load_f64(xdt, x->data, ii))
                : hlo_cmp_i64(sf.dir, xdt, hlo_load_i64(xdt, x->data, sel),
                              hlo_load_i64(xdt, x->data, ii));
      } else {
        memcpy(sargs[0]->data, (const char *)x->data + (size_t)sel * xes, xes);
        memcpy(sargs[1]->data, (const char *)x->data + (size_t)ii * xes, xes);
        Literal *r = interp_call(st, selc, sargs, 2, err);
        if (!r) return NULL;
        if (!hlo_shape_is_array(&r->shape) || r->shape.rank != 0 || r->shape.dt != DT_PRED) {
          hlo_err_at(err, in, "select computation '%s' must return a pred scalar", selc->name);
          return NULL;
        }
        keep = *(const uint8_t *)r->data != 0;
      }
      if (!keep) sel = ii;
    } while (odo_next(rank, wsz, widx));
    if (sel >= 0 && !red_apply(&red, accp, sel, valp, si, err)) return NULL;
    si++;
  } while (odo_next(rank, ss->dims, sidx));
  return res;
}

/* ------------------------------------------------------------------ gather */

Literal *interp_gather(IState *st, const HInstr *in, Literal *const *ops, HErr *err) {
  if (in->nops != 2) {
    hlo_err_at(err, in, "gather takes 2 operands, got %d", in->nops);
    return NULL;
  }
  const Literal *x = ops[0], *idx = ops[1];
  if (!want_array(err, in, x, "gather operand") ||
      !want_array(err, in, idx, "gather start indices") ||
      !want_result_array(err, in, &in->shape) ||
      !want_int_type(err, in, idx->shape.dt, "gather start indices"))
    return NULL;
  const GatherDims *g = in->gather;
  if (!g) {
    hlo_err_at(err, in, "gather without dimension numbers");
    return NULL;
  }
  const Shape *xs = &x->shape, *is = &idx->shape, *os = &in->shape;
  int R = xs->rank, SR = is->rank, OR = os->rank;
  if (os->dt != xs->dt) {
    hlo_err_at(err, in, "gather result type %s differs from operand type %s",
               hlo_dtype_name(os->dt), hlo_dtype_name(xs->dt));
    return NULL;
  }
  int64_t ivd = g->index_vector_dim;
  if (ivd < 0 || ivd > SR) {
    hlo_err_at(err, in, "index_vector_dim %lld out of range for indices of rank %d", (long long)ivd,
               SR);
    return NULL;
  }
  int64_t nvec = ivd == SR ? 1 : is->dims[ivd];
  if (g->start_index_map.n != nvec) {
    hlo_err_at(err, in, "start_index_map has %d entries, index vectors have %lld",
               g->start_index_map.n, (long long)nvec);
    return NULL;
  }
  if (g->slice_sizes.n != R) {
    hlo_err_at(err, in, "slice_sizes has %d entries, operand rank is %d", g->slice_sizes.n, R);
    return NULL;
  }
  int nbatch = SR - (ivd < SR ? 1 : 0);
  if (OR != g->offset_dims.n + nbatch) {
    hlo_err_at(err, in, "result rank %d, expected %d offset + %d batch dimensions", OR,
               g->offset_dims.n, nbatch);
    return NULL;
  }
  bool collapsed[HLO_MAX_RANK] = {false}, obatch[HLO_MAX_RANK] = {false},
       mapped[HLO_MAX_RANK] = {false}, isoff[HLO_MAX_RANK] = {false},
       sbatch[HLO_MAX_RANK] = {false};
  if (!mark_dims(err, in, &g->collapsed_slice_dims, R, collapsed, "collapsed_slice_dims") ||
      !mark_dims(err, in, &g->operand_batching_dims, R, obatch, "operand_batching_dims") ||
      !mark_dims(err, in, &g->start_index_map, R, mapped, "start_index_map") ||
      !mark_dims(err, in, &g->offset_dims, OR, isoff, "offset_dims") ||
      !mark_dims(err, in, &g->start_indices_batching_dims, SR, sbatch,
                 "start_indices_batching_dims"))
    return NULL;
  for (int d = 0; d < R; d++) {
    int64_t sz = g->slice_sizes.v[d];
    if (sz < 0 || sz > xs->dims[d]) {
      hlo_err_at(err, in, "slice size %lld out of range for operand dimension %d of size %lld",
                 (long long)sz, d, (long long)xs->dims[d]);
      return NULL;
    }
    if (collapsed[d] && obatch[d]) {
      hlo_err_at(err, in, "operand dimension %d is both collapsed and batching", d);
      return NULL;
    }
    if ((collapsed[d] || obatch[d]) && sz != 1) {
      hlo_err_at(err, in, "collapsed or batching operand dimension %d has slice size %lld", d,
                 (long long)sz);
      return NULL;
    }
    if (obatch[d] && mapped[d]) {
      hlo_err_at(err, in, "operand batching dimension %d is also in start_index_map", d);
      return NULL;
    }
  }
  if (g->operand_batching_dims.n != g->start_indices_batching_dims.n) {
    hlo_err_at(err, in, "operand_batching_dims and start_indices_batching_dims differ in length");
    return NULL;
  }
  if (ivd < SR && sbatch[ivd]) {
    hlo_err_at(err, in, "index_vector_dim is also a start_indices batching dimension");
    return NULL;
  }
  for (int i = 0; i < g->operand_batching_dims.n; i++) {
    int64_t od = g->operand_batching_dims.v[i], sd = g->start_indices_batching_dims.v[i];
    if (xs->dims[od] != is->dims[sd]) {
      hlo_err_at(err, in,
                 "operand batching dimension %lld (size %lld) does not match indices "
                 "dimension %lld (size %lld)",
                 (long long)od, (long long)xs->dims[od], (long long)sd, (long long)is->dims[sd]);
      return NULL;
    }
  }
  /* offset_dims[k] <-> k-th operand dim that is neither collapsed nor batching */
  int64_t offop[HLO_MAX_RANK];
  int noff = 0;
  for (int d = 0; d < R; d++)
    if (!collapsed[d] && !obatch[d]) {
      if (noff >= g->offset_dims.n) {
        noff++;
        break;
      }
      offop[noff++] = d;
    }
  if (noff != g->offset_dims.n) {
    hlo_err_at(err, in, "offset_dims has %d entries, the slice keeps %d operand dimensions",
               g->offset_dims.n, noff);
    return NULL;
  }
  for (int k = 0; k < noff; k++)
    if (os->dims[g->offset_dims.v[k]] != g->slice_sizes.v[offop[k]]) {
      hlo_err_at(err, in, "result offset dimension %lld has size %lld, slice size is %lld",
                 (long long)g->offset_dims.v[k], (long long)os->dims[g->offset_dims.v[k]],
                 (long long)g->slice_sizes.v[offop[k]]);
      return NULL;
    }
  /* result batch dims, in order, <-> indices dims skipping index_vector_dim */
  int64_t bsd[HLO_MAX_RANK];  /* per result dim: indices dim, or -1 for offset dims */
  int64_t offk[HLO_MAX_RANK]; /* per result dim: k in offset_dims, or -1 */
  for (int d = 0, b = 0; d < OR; d++) {
    bsd[d] = -1;
    offk[d] = -1;
    if (isoff[d]) {
      for (int k = 0; k < noff; k++)
        if (g->offset_dims.v[k] == d) offk[d] = k;
      continue;
    }
    int64_t sd = b < ivd ? b : b + 1;
    b++;
    if (os->dims[d] != is->dims[sd]) {
      hlo_err_at(err, in,
                 "result batch dimension %d has size %lld, indices dimension %lld has %lld", d,
                 (long long)os->dims[d], (long long)sd, (long long)is->dims[sd]);
      return NULL;
    }
    bsd[d] = sd;
  }
  /* the operand dim each indices batching dim indexes */
  int64_t sb_to_op[HLO_MAX_RANK];
  for (int d = 0; d < SR; d++)
    sb_to_op[d] = -1;
  for (int i = 0; i < g->operand_batching_dims.n; i++)
    sb_to_op[g->start_indices_batching_dims.v[i]] = g->operand_batching_dims.v[i];

  HArena *a = interp_arena(st);
  Literal *res = hlo_literal_new(a, os);
  if (hlo_shape_elems(os) == 0) return res;
  int64_t xst[HLO_MAX_RANK], ist[HLO_MAX_RANK];
  hlo_shape_strides(xs, xst);
  hlo_shape_strides(is, ist);
  int64_t vst = ivd < SR ? ist[ivd] : 0;
  size_t es = hlo_dtype_size(xs->dt);
  int64_t oidx[HLO_MAX_RANK] = {0}, oi = 0;
  do {
    int64_t start[HLO_MAX_RANK] = {0}, ibase = 0, xo = 0;
    for (int d = 0; d < OR; d++)
      if (bsd[d] >= 0) {
        ibase += oidx[d] * ist[bsd[d]];
        if (sb_to_op[bsd[d]] >= 0) start[sb_to_op[bsd[d]]] = oidx[d];
      }
    for (int k = 0; k < nvec; k++) {
      int64_t od = g->start_index_map.v[k];
      int64_t v = load_index(idx, ibase + k * vst);
      start[od] = clamp64(v, 0, xs->dims[od] - g->slice_sizes.v[od]);
    }
    for (int d = 0; d < OR; d++)
      if (offk[d] >= 0) start[offop[offk[d]]] += oidx[d];
    for (int d = 0; d < R; d++)
      xo += start[d] * xst[d];
    memcpy((char *)res->data + (size_t)oi * es, (const char *)x->data + (size_t)xo * es, es);
    oi++;
  } while (odo_next(OR, os->dims, oidx));
  return res;
}

/* ------------------------------------------------------------------ scatter */

Literal *interp_scatter(IState *st, const HInstr *in, Literal *const *ops, HErr *err) {
  if (in->nops < 3 || in->nops % 2 == 0) {
    hlo_err_at(err, in, "scatter takes N operands, indices and N updates, got %d operands",
               in->nops);
    return NULL;
  }
  int n = (in->nops - 1) / 2;
  if (n > HLO_MAX_RANK) {
    hlo_err_at(err, in, "more than %d scatter operands are not supported", HLO_MAX_RANK);
    return NULL;
  }
  if (in->ncalls < 1 || !in->calls[0]) {
    hlo_err_at(err, in, "scatter without to_apply computation");
    return NULL;
  }
  const ScatterDims *sd = in->scatter;
  if (!sd) {
    hlo_err_at(err, in, "scatter without dimension numbers");
    return NULL;
  }
  if (n == 1 ? in->shape.dt == DT_TUPLE : (in->shape.dt != DT_TUPLE || in->shape.ntuple != n)) {
    hlo_err_at(err, in, "scatter result must be %s", n == 1 ? "an array" : "a tuple of N arrays");
    return NULL;
  }
  const Literal *idx = ops[n];
  if (!want_array(err, in, idx, "scatter indices") ||
      !want_int_type(err, in, idx->shape.dt, "scatter indices"))
    return NULL;
  DType dts[HLO_MAX_RANK];
  const Shape *xs = NULL, *us = NULL;
  for (int k = 0; k < n; k++) {
    const Literal *x = ops[k], *u = ops[n + 1 + k];
    const Shape *rs = n == 1 ? &in->shape : &in->shape.tuple[k];
    if (!want_array(err, in, x, "scatter operand") || !want_array(err, in, u, "scatter updates") ||
        !want_result_array(err, in, rs))
      return NULL;
    if (!xs) {
      xs = &x->shape;
      us = &u->shape;
    }
    if (!hlo_shape_same_dims(&x->shape, xs) || !hlo_shape_same_dims(&u->shape, us) ||
        !hlo_shape_same_dims(rs, xs) || u->shape.dt != x->shape.dt || rs->dt != x->shape.dt) {
      hlo_err_at(err, in, "scatter operand %d, its updates and the result do not match", k);
      return NULL;
    }
    dts[k] = x->shape.dt;
  }
  const Shape *is = &idx->shape;
  int R = xs->rank, SR = is->rank, UR = us->rank;
  int64_t ivd = sd->index_vector_dim;
  if (ivd < 0 || ivd > SR) {
    hlo_err_at(err, in, "index_vector_dim %lld out of range for indices of rank %d", (long long)ivd,
               SR);
    return NULL;
  }
  int64_t nvec = ivd == SR ? 1 : is->dims[ivd];
  if (sd->scatter_dims_to_operand_dims.n != nvec) {
    hlo_err_at(err, in, "scatter_dims_to_operand_dims has %d entries, index vectors have %lld",
               sd->scatter_dims_to_operand_dims.n, (long long)nvec);
    return NULL;
  }
  int nsc = SR - (ivd < SR ? 1 : 0);
  if (UR != sd->update_window_dims.n + nsc) {
    hlo_err_at(err, in, "updates rank %d, expected %d window + %d scatter dimensions", UR,
               sd->update_window_dims.n, nsc);
    return NULL;
  }
  bool inserted[HLO_MAX_RANK] = {false}, ibatch[HLO_MAX_RANK] = {false},
       mapped[HLO_MAX_RANK] = {false}, iswin[HLO_MAX_RANK] = {false},
       sbatch[HLO_MAX_RANK] = {false};
  if (!mark_dims(err, in, &sd->inserted_window_dims, R, inserted, "inserted_window_dims") ||
      !mark_dims(err, in, &sd->input_batching_dims, R, ibatch, "input_batching_dims") ||
      !mark_dims(err, in, &sd->scatter_dims_to_operand_dims, R, mapped,
                 "scatter_dims_to_operand_dims") ||
      !mark_dims(err, in, &sd->update_window_dims, UR, iswin, "update_window_dims") ||
      !mark_dims(err, in, &sd->scatter_indices_batching_dims, SR, sbatch,
                 "scatter_indices_batching_dims"))
    return NULL;
  if (sd->input_batching_dims.n != sd->scatter_indices_batching_dims.n) {
    hlo_err_at(err, in, "input_batching_dims and scatter_indices_batching_dims differ in length");
    return NULL;
  }
  if (ivd < SR && sbatch[ivd]) {
    hlo_err_at(err, in, "index_vector_dim is also a scatter indices batching dimension");
    return NULL;
  }
  for (int d = 0; d < R; d++)
    if ((inserted[d] && ibatch[d]) || (ibatch[d] && mapped[d])) {
      hlo_err_at(err, in, "operand dimension %d is used inconsistently by the dimension numbers",
                 d);
      return NULL;
    }
  for (int i = 0; i < sd->input_batching_dims.n; i++) {
    int64_t od = sd->input_batching_dims.v[i], sdim = sd->scatter_indices_batching_dims.v[i];
    if (xs->dims[od] != is->dims[sdim]) {
      hlo_err_at(err, in,
                 "input batching dimension %lld (size %lld) does not match indices "
                 "dimension %lld (size %lld)",
                 (long long)od, (long long)xs->dims[od], (long long)sdim,
                 (long long)is->dims[sdim]);
      return NULL;
    }
  }
  /* update_window_dims[k] <-> k-th operand dim neither inserted nor batching */
  int64_t winop[HLO_MAX_RANK], wsize[HLO_MAX_RANK];
  int nwin = 0;
  for (int d = 0; d < R; d++) {
    wsize[d] = 1;
    if (!inserted[d] && !ibatch[d]) {
      if (nwin >= sd->update_window_dims.n) {
        nwin++;
        break;
      }
      winop[nwin++] = d;
    }
  }
  if (nwin != sd->update_window_dims.n) {
    hlo_err_at(err, in, "update_window_dims has %d entries, the operand has %d window dimensions",
               sd->update_window_dims.n, nwin);
    return NULL;
  }
  for (int k = 0; k < nwin; k++) {
    int64_t sz = us->dims[sd->update_window_dims.v[k]];
    if (sz > xs->dims[winop[k]]) {
      hlo_err_at(err, in,
                 "update window dimension %lld (size %lld) exceeds operand dimension "
                 "%lld (size %lld)",
                 (long long)sd->update_window_dims.v[k], (long long)sz, (long long)winop[k],
                 (long long)xs->dims[winop[k]]);
      return NULL;
    }
    wsize[winop[k]] = sz;
  }
  /* update scatter dims, in order, <-> indices dims skipping index_vector_dim */
  int64_t scdim[HLO_MAX_RANK], scsz[HLO_MAX_RANK], scidx[HLO_MAX_RANK], wdsz[HLO_MAX_RANK];
  int nsd = 0;
  for (int d = 0; d < UR; d++) {
    if (iswin[d]) continue;
    int64_t sdim = nsd < ivd ? nsd : nsd + 1;
    if (us->dims[d] != is->dims[sdim]) {
      hlo_err_at(err, in,
                 "updates scatter dimension %d has size %lld, indices dimension %lld "
                 "has %lld",
                 d, (long long)us->dims[d], (long long)sdim, (long long)is->dims[sdim]);
      return NULL;
    }
    scdim[nsd] = d;
    scidx[nsd] = sdim;
    scsz[nsd++] = us->dims[d];
  }
  for (int k = 0; k < nwin; k++)
    wdsz[k] = us->dims[sd->update_window_dims.v[k]];
  int64_t sb_to_op[HLO_MAX_RANK];
  for (int d = 0; d < SR; d++)
    sb_to_op[d] = -1;
  for (int i = 0; i < sd->input_batching_dims.n; i++)
    sb_to_op[sd->scatter_indices_batching_dims.v[i]] = sd->input_batching_dims.v[i];

  HArena *a = interp_arena(st);
  Reducer red;
  if (!red_init(&red, st, in, in->calls[0], n, dts, dts, err)) return NULL;
  Literal *res = hlo_literal_new(a, &in->shape);
  void *acc[HLO_MAX_RANK];
  const void *val[HLO_MAX_RANK];
  for (int k = 0; k < n; k++) {
    Literal *r = n == 1 ? res : res->elems[k];
    memcpy(r->data, ops[k]->data, hlo_shape_bytes(xs));
    acc[k] = r->data;
    val[k] = ops[n + 1 + k]->data;
  }
  if (dims_empty(nsd, scsz) || dims_empty(nwin, wdsz)) return res;
  int64_t xst[HLO_MAX_RANK], ist[HLO_MAX_RANK], ust[HLO_MAX_RANK];
  hlo_shape_strides(xs, xst);
  hlo_shape_strides(is, ist);
  hlo_shape_strides(us, ust);
  int64_t vst = ivd < SR ? ist[ivd] : 0;
  int64_t sidx[HLO_MAX_RANK] = {0};
  do {
    int64_t start[HLO_MAX_RANK] = {0}, ibase = 0, ubase = 0;
    for (int j = 0; j < nsd; j++) {
      ibase += sidx[j] * ist[scidx[j]];
      ubase += sidx[j] * ust[scdim[j]];
      if (sb_to_op[scidx[j]] >= 0) start[sb_to_op[scidx[j]]] = sidx[j];
    }
    for (int k = 0; k < nvec; k++)
      start[sd->scatter_dims_to_operand_dims.v[k]] = load_index(idx, ibase + k * vst);
    bool inb = true;
    for (int d = 0; d < R && inb; d++)
      if (start[d] < 0 || start[d] > xs->dims[d] - wsize[d]) inb = false;
    if (!inb) continue; /* XLA skips a window that is not entirely in bounds */
    int64_t xbase = 0;
    for (int d = 0; d < R; d++)
      xbase += start[d] * xst[d];
    int64_t widx[HLO_MAX_RANK] = {0};
    do {
      int64_t xo = xbase, uo = ubase;
      for (int k = 0; k < nwin; k++) {
        xo += widx[k] * xst[winop[k]];
        uo += widx[k] * ust[sd->update_window_dims.v[k]];
      }
      if (!red_apply(&red, acc, xo, val, uo, err)) return NULL;
    } while (odo_next(nwin, wdsz, widx));
  } while (odo_next(nsd, scsz, sidx));
  return res;
}

/* ------------------------------------------------------------------ dynamic slices, pad */

/* Start indices of dynamic-slice / dynamic-update-slice: one scalar per dimension from
 * ops[first..], or (legacy form) one rank-1 vector. Clamped so that size[d] fits. */
static bool dyn_starts(HErr *err, const HInstr *in, Literal *const *ops, int first, const Shape *xs,
                       const int64_t *size, int64_t *start) {
  int R = xs->rank, nidx = in->nops - first;
  const Literal *vec = NULL;
  if (nidx == 1 && R != 0 && ops[first] && hlo_shape_is_array(&ops[first]->shape) &&
      ops[first]->shape.rank == 1 && ops[first]->shape.dims[0] == R)
    vec = ops[first];
  if (!vec && nidx != R) {
    hlo_err_at(err, in, "%d start indices for an operand of rank %d", nidx, R);
    return false;
  }
  for (int d = 0; d < R; d++) {
    int64_t v;
    if (vec) {
      if (!want_int_type(err, in, vec->shape.dt, "start index")) return false;
      v = load_index(vec, d);
    } else {
      const Literal *s = ops[first + d];
      if (!want_scalar(err, in, s, "start index") ||
          !want_int_type(err, in, s->shape.dt, "start index"))
        return false;
      v = load_index(s, 0);
    }
    if (size[d] < 0 || size[d] > xs->dims[d]) {
      hlo_err_at(err, in, "slice size %lld exceeds operand dimension %d of size %lld",
                 (long long)size[d], d, (long long)xs->dims[d]);
      return false;
    }
    start[d] = clamp64(v, 0, xs->dims[d] - size[d]);
  }
  return true;
}

/* Copy between the box [start, start + box) of a row-major array `big` of shape bs and a dense
 * row-major block `small` of dims box (same element type): into big when to_big, else out. */
static void box_copy(void *big, const Shape *bs, const int64_t *start, void *small,
                     const int64_t *box, bool to_big) {
  int R = bs->rank;
  int64_t n = 1;
  for (int d = 0; d < R; d++)
    n *= box[d];
  if (n == 0) return;
  int64_t st[HLO_MAX_RANK], idx[HLO_MAX_RANK] = {0}, k = 0;
  hlo_shape_strides(bs, st);
  size_t es = hlo_dtype_size(bs->dt);
  do {
    int64_t off = 0;
    for (int d = 0; d < R; d++)
      off += (start[d] + idx[d]) * st[d];
    char *b = (char *)big + (size_t)off * es, *s = (char *)small + (size_t)k * es;
    memcpy(to_big ? b : s, to_big ? s : b, es);
    k++;
  } while (odo_next(R, box, idx));
}

Literal *interp_dynamic_slice(IState *st, const HInstr *in, Literal *const *ops, HErr *err) {
  if (in->nops < 1) {
    hlo_err_at(err, in, "dynamic-slice without operand");
    return NULL;
  }
  const Literal *x = ops[0];
  if (!want_array(err, in, x, "dynamic-slice operand") || !want_result_array(err, in, &in->shape))
    return NULL;
  const Shape *xs = &x->shape, *os = &in->shape;
  int R = xs->rank;
  if (os->rank != R || os->dt != xs->dt) {
    hlo_err_at(err, in, "dynamic-slice result does not match the operand's rank and type");
    return NULL;
  }
  if (in->dslice_sizes.n != 0 && in->dslice_sizes.n != R) {
    hlo_err_at(err, in, "dynamic_slice_sizes has %d entries, operand rank is %d",
               in->dslice_sizes.n, R);
    return NULL;
  }
  for (int d = 0; d < in->dslice_sizes.n; d++)
    if (in->dslice_sizes.v[d] != os->dims[d]) {
      hlo_err_at(err, in, "dynamic_slice_sizes[%d] = %lld, result dimension is %lld", d,
                 (long long)in->dslice_sizes.v[d], (long long)os->dims[d]);
      return NULL;
    }
  int64_t start[HLO_MAX_RANK];
  if (!dyn_starts(err, in, ops, 1, xs, os->dims, start)) return NULL;
  Literal *res = hlo_literal_new(interp_arena(st), os);
  box_copy(x->data, xs, start, res->data, os->dims, false);
  return res;
}

Literal *interp_dynamic_update_slice(IState *st, const HInstr *in, Literal *const *ops, HErr *err) {
  if (in->nops < 2) {
    hlo_err_at(err, in, "dynamic-update-slice needs an operand and an update");
    return NULL;
  }
  const Literal *x = ops[0], *u = ops[1];
  if (!want_array(err, in, x, "dynamic-update-slice operand") ||
      !want_array(err, in, u, "dynamic-update-slice update") ||
      !want_result_array(err, in, &in->shape))
    return NULL;
  const Shape *xs = &x->shape, *us = &u->shape;
  int R = xs->rank;
  if (!hlo_shape_same_dims(&in->shape, xs) || in->shape.dt != xs->dt || us->rank != R ||
      us->dt != xs->dt) {
    hlo_err_at(err, in, "dynamic-update-slice operand, update and result do not match");
    return NULL;
  }
  int64_t start[HLO_MAX_RANK];
  if (!dyn_starts(err, in, ops, 2, xs, us->dims, start)) return NULL;
  Literal *res = hlo_literal_clone(interp_arena(st), x);
  hlo_shape_copy(interp_arena(st), &res->shape, &in->shape);
  box_copy(res->data, xs, start, u->data, us->dims, true);
  return res;
}

Literal *interp_pad(IState *st, const HInstr *in, Literal *const *ops, HErr *err) {
  if (in->nops != 2) {
    hlo_err_at(err, in, "pad takes 2 operands, got %d", in->nops);
    return NULL;
  }
  const Literal *x = ops[0], *pv = ops[1];
  if (!want_array(err, in, x, "pad operand") || !want_scalar(err, in, pv, "padding value") ||
      !want_result_array(err, in, &in->shape))
    return NULL;
  const Shape *xs = &x->shape, *os = &in->shape;
  const PadDims *p = in->pad;
  int R = xs->rank;
  if (!p || p->n != R) {
    hlo_err_at(err, in, "padding config has %d dimensions, operand rank is %d", p ? p->n : 0, R);
    return NULL;
  }
  if (os->rank != R || os->dt != xs->dt || pv->shape.dt != xs->dt) {
    hlo_err_at(err, in, "pad operand, padding value and result do not match");
    return NULL;
  }
  for (int d = 0; d < R; d++) {
    int64_t n = xs->dims[d];
    if (p->interior[d] < 0) {
      hlo_err_at(err, in, "negative interior padding in dimension %d", d);
      return NULL;
    }
    int64_t want = p->lo[d] + p->hi[d] + n + (n > 0 ? (n - 1) * p->interior[d] : 0);
    if (want != os->dims[d]) {
      hlo_err_at(err, in, "result dimension %d has size %lld, padding gives %lld", d,
                 (long long)os->dims[d], (long long)want);
      return NULL;
    }
  }
  Literal *res = hlo_literal_new(interp_arena(st), os);
  int64_t total = hlo_shape_elems(os);
  size_t es = hlo_dtype_size(xs->dt);
  for (int64_t i = 0; i < total; i++)
    memcpy((char *)res->data + (size_t)i * es, pv->data, es);
  if (total == 0 || hlo_shape_elems(xs) == 0) return res;
  int64_t ost[HLO_MAX_RANK], idx[HLO_MAX_RANK] = {0}, xi = 0;
  hlo_shape_strides(os, ost);
  do {
    int64_t oo = 0;
    bool ok = true;
    for (int d = 0; d < R && ok; d++) {
      int64_t q = p->lo[d] + idx[d] * (p->interior[d] + 1);
      if (q < 0 || q >= os->dims[d]) ok = false;
      oo += q * ost[d];
    }
    if (ok)
      memcpy((char *)res->data + (size_t)oo * es, (const char *)x->data + (size_t)xi * es, es);
    xi++;
  } while (odo_next(R, xs->dims, idx));
  return res;
}
