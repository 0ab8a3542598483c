/* layout/transpose.c: transpose helpers and the transpose-fold and transpose-sink passes.
 *
 * transpose-fold: a transpose feeding a dot or convolution operand is absorbed into the
 * instruction's dimension numbers, so the operand is read in place instead of copied.
 * dot(transpose(x, p), y): every batch and contracting dimension d of the lhs becomes p[d];
 * this keeps the result only if the free (non-batch, non-contracting) dimensions of the lhs
 * appear in x in the same relative order (the result lists free dims in operand order), so
 * the fold is done only then. Convolutions take any permutation (their output order is given
 * by the output dimension numbers), except that a convolution already in the CPU's canonical
 * form (conv-layout's b01f_01io->b01f) is never made non-canonical: there the transpose is
 * the deliberate layout change. Chains of transposes are folded one after the other.
 *
 * transpose-sink: moves transposes down towards the users so that opposite transposes meet
 * and cancel (algsimp's transpose-of-transpose rule) and values keep the layout their
 * producer chose (NHWC activations across conv-bn-relu-pool chains). With p the permutation
 * of a transpose operand T = transpose(x, p):
 *   elementwise op(T, ...) -> transpose(op(x, ...'), p) when every other operand is a scalar,
 *       a transpose by the same p (its operand is used), a broadcast (its dimensions are
 *       remapped through p), an iota (its dimension remapped) or a constant (transposed by the
 *       inverse permutation); any other operand stops the rewrite, so no transpose is added;
 *   broadcast(T) -> broadcast(x) with operand dimension p[i] sent where dim i was;
 *   reduce(T, init) over dims D -> reduce(x, init) over p(D), followed by a transpose of the
 *       (smaller) result only if the kept dimensions change their relative order;
 *   reduce-window / pad / slice / reverse of T -> the same op on x with its per-dimension
 *       attributes permuted, then transpose(.., p).
 * One forward sweep per computation (opt_rewrite_comp, as algsimp does) carries a
 * transpose down a whole chain; the computation is re-sorted afterwards and replaced
 * instructions are left for DCE. Every rewrite preserves values exactly (pure data movement).
 * Instructions with control dependencies are left alone. */
#include "layout.h"

#include <string.h>

void layout_perm_inverse(int n, const int64_t *p, int64_t *inv) {
  for (int i = 0; i < n; i++)
    inv[p[i]] = i;
}

Shape layout_permuted_shape(DType dt, int n, const int64_t *dims, const int64_t *p) {
  int64_t d[HLO_MAX_RANK] = {0};
  for (int i = 0; i < n; i++)
    d[i] = dims[p[i]];
  return hlo_shape_array(dt, n, d);
}

bool layout_perm_is_identity(int n, const int64_t *p) {
  for (int i = 0; i < n; i++)
    if (p[i] != i) return false;
  return true;
}

Literal *layout_literal_transpose(HArena *a, const Literal *l, const int64_t *p) {
  int n = l->shape.rank;
  Shape s = layout_permuted_shape(l->shape.dt, n, l->shape.dims, p);
  Literal *r = hlo_literal_new(a, &s);
  int64_t xs[HLO_MAX_RANK], st[HLO_MAX_RANK], idx[HLO_MAX_RANK] = {0};
  hlo_shape_strides(&l->shape, xs);
  for (int i = 0; i < n; i++)
    st[i] = xs[p[i]]; /* source stride of output dim i */
  size_t es = hlo_dtype_size(s.dt);
  int64_t total = hlo_shape_elems(&s), src = 0;
  const uint8_t *from = l->data;
  uint8_t *to = r->data;
  for (int64_t k = 0; k < total; k++) {
    memcpy(to + (size_t)k * es, from + (size_t)src * es, es);
    for (int d = n - 1; d >= 0; d--) { /* odometer over output indices */
      idx[d]++;
      src += st[d];
      if (idx[d] < s.dims[d]) break;
      src -= st[d] * idx[d];
      idx[d] = 0;
    }
  }
  return r;
}

HInstr *layout_transpose(HComp *c, HInstr *x, const int64_t *p) {
  int n = x->shape.rank;
  if (layout_perm_is_identity(n, p)) return x;
  if (x->op == OP_TRANSPOSE && !x->nctrl) {
    int64_t r[HLO_MAX_RANK];
    for (int i = 0; i < n; i++)
      r[i] = x->dims.v[p[i]];
    return layout_transpose(c, x->ops[0], r);
  }
  Shape s = layout_permuted_shape(x->shape.dt, n, x->shape.dims, p);
  if (x->op == OP_CONSTANT && x->literal && hlo_shape_is_array(&x->literal->shape)) {
    HInstr *k = opt_new(c, OP_CONSTANT, "constant", &s, 0, NULL);
    k->literal = layout_literal_transpose(c->mod->arena, x->literal, p);
    return k;
  }
  HInstr *t = opt_new(c, OP_TRANSPOSE, "transpose", &s, 1, &x);
  t->dims.n = n;
  memcpy(t->dims.v, p, sizeof(int64_t) * (size_t)n);
  return t;
}

bool layout_conv_is_canonical(const HInstr *in, OptConvLayout form) {
  const ConvDims *d = in->conv;
  int r = in->shape.rank, nsp = r - 2;
  if (!d || nsp < 0 || d->in_sp.n != nsp || d->k_sp.n != nsp || d->out_sp.n != nsp) return false;
  LayoutConvPos q = layout_conv_pos(r, form);
  if (d->in_batch != 0 || d->in_feat != q.feat || d->out_batch != 0 || d->out_feat != q.feat ||
      d->k_in != q.kin || d->k_out != q.kout)
    return false;
  for (int i = 0; i < nsp; i++)
    if (d->in_sp.v[i] != q.sp0 + i || d->out_sp.v[i] != q.sp0 + i || d->k_sp.v[i] != q.ksp0 + i)
      return false;
  return true;
}

LayoutConvPos layout_conv_pos(int r, OptConvLayout form) {
  bool nchw = form == OPT_CONV_NCHW;
  return (LayoutConvPos){.feat = nchw ? 1 : r - 1,
                         .sp0 = nchw ? 2 : 1,
                         .ksp0 = nchw ? 2 : 0,
                         .kin = nchw ? 1 : r - 2,
                         .kout = nchw ? 0 : r - 1};
}

/* ---------------------------------------------------------------- transpose-fold */

/* Fold a transpose on operand `side` of dot `in`; true when done. */
static bool tf_dot(HModule *m, HInstr *in, int side) {
  HInstr *t = in->ops[side];
  if (t->op != OP_TRANSPOSE || t->nctrl || !in->dot) return false;
  const int64_t *p = t->dims.v;
  DotDims *dd = hlo_arena_memdup(m->arena, in->dot, sizeof *dd);
  IList *batch = side ? &dd->rhs_batch : &dd->lhs_batch;
  IList *con = side ? &dd->rhs_contract : &dd->lhs_contract;
  int64_t prev = -1;
  for (int i = 0; i < t->shape.rank; i++) {
    if (opt_ilist_has(batch, i) || opt_ilist_has(con, i)) continue;
    if (p[i] < prev) return false; /* free dims would come out reordered */
    prev = p[i];
  }
  for (int i = 0; i < batch->n; i++)
    batch->v[i] = p[batch->v[i]];
  for (int i = 0; i < con->n; i++)
    con->v[i] = p[con->v[i]];
  in->dot = dd;
  in->ops[side] = t->ops[0];
  return true;
}

static bool tf_conv(HModule *m, HInstr *in, int side, OptConvLayout form) {
  HInstr *t = in->ops[side];
  if (t->op != OP_TRANSPOSE || t->nctrl || !in->conv) return false;
  const int64_t *p = t->dims.v;
  ConvDims *cd = hlo_arena_memdup(m->arena, in->conv, sizeof *cd);
  if (side == 0) {
    cd->in_batch = p[cd->in_batch];
    cd->in_feat = p[cd->in_feat];
    for (int i = 0; i < cd->in_sp.n; i++)
      cd->in_sp.v[i] = p[cd->in_sp.v[i]];
  } else {
    cd->k_in = p[cd->k_in];
    cd->k_out = p[cd->k_out];
    for (int i = 0; i < cd->k_sp.n; i++)
      cd->k_sp.v[i] = p[cd->k_sp.v[i]];
  }
  ConvDims *old = in->conv;
  bool was = layout_conv_is_canonical(in, form);
  in->conv = cd;
  if (was && !layout_conv_is_canonical(in, form)) {
    in->conv = old;
    return false;
  }
  in->ops[side] = t->ops[0];
  return true;
}

bool layout_transpose_fold(HModule *m, PassCtx *pc) {
  bool changed = false;
  for (int ci = 0; ci < m->ncomps; ci++) {
    HComp *c = m->comps[ci];
    for (int i = 0; i < c->ninstrs; i++) {
      HInstr *in = c->instrs[i];
      if (in->nctrl || in->nops != 2) continue;
      for (int side = 0; side < 2; side++) {
        if (in->op == OP_DOT)
          while (tf_dot(m, in, side))
            changed = true;
        else if (in->op == OP_CONVOLUTION)
          while (tf_conv(m, in, side, pc->opts->conv_layout))
            changed = true;
      }
    }
  }
  (void)pc;
  return changed;
}

/* ---------------------------------------------------------------- transpose-sink */

static bool ts_is_transpose(const HInstr *x) {
  return x->op == OP_TRANSPOSE && !x->nctrl && x->shape.rank >= 2;
}

/* The value x with transpose(result, p) == o, for an operand o of an op being sunk; NULL
 * when that would need a new data movement. */
static HInstr *ts_untranspose(HComp *c, HInstr *o, const int64_t *p, const int64_t *pinv) {
  int n = o->shape.rank;
  if (ts_is_transpose(o) && o->shape.rank == n &&
      !memcmp(o->dims.v, p, sizeof(int64_t) * (size_t)n))
    return o->ops[0];
  Shape s = layout_permuted_shape(o->shape.dt, n, o->shape.dims, pinv);
  if (o->op == OP_BROADCAST && !o->nctrl) {
    HInstr *b = opt_new(c, OP_BROADCAST, "broadcast", &s, 1, o->ops);
    b->dims.n = o->dims.n;
    for (int i = 0; i < o->dims.n; i++)
      b->dims.v[i] = p[o->dims.v[i]];
    return b;
  }
  if (o->op == OP_IOTA && !o->nctrl) {
    HInstr *io = opt_new(c, OP_IOTA, "iota", &s, 0, NULL);
    io->iota_dim = p[o->iota_dim];
    return io;
  }
  if (o->op == OP_CONSTANT && o->literal && hlo_shape_is_array(&o->literal->shape))
    return layout_transpose(c, o, pinv);
  return NULL;
}

/* Clone `in` onto ops with the result dims permuted into x order; the caller transposes. */
static HInstr *ts_clone_permuted(HComp *c, HInstr *in, HInstr **ops, const int64_t *pinv) {
  HInstr *r = hlo_instr_clone(c, in, ops);
  int n = in->shape.rank;
  Shape s = layout_permuted_shape(in->shape.dt, n, in->shape.dims, pinv);
  r->shape = s;
  return r;
}

static HInstr *ts_elementwise(HComp *c, HInstr *in, PassCtx *pc) {
  int n = in->shape.rank;
  const int64_t *p = NULL;
  for (int k = 0; k < in->nops && !p; k++)
    if (ts_is_transpose(in->ops[k]) && in->ops[k]->shape.rank == n) p = in->ops[k]->dims.v;
  if (!p) return NULL;
  for (int k = 0; k < in->nops; k++) {
    const HInstr *o = in->ops[k];
    if (!hlo_shape_is_array(&o->shape)) return NULL;
    if (o->shape.rank != 0 && o->shape.rank != n) return NULL;
    /* check before creating anything */
    if (o->shape.rank == n &&
        !(ts_is_transpose(o) && !memcmp(o->dims.v, p, sizeof(int64_t) * (size_t)n)) &&
        !(o->op == OP_BROADCAST && !o->nctrl) && !(o->op == OP_IOTA && !o->nctrl) &&
        !(o->op == OP_CONSTANT && o->literal))
      return NULL;
  }
  int64_t pinv[HLO_MAX_RANK];
  layout_perm_inverse(n, p, pinv);
  HInstr **ops = hlo_arena_alloc(pc->scratch, sizeof(HInstr *) * (size_t)(in->nops + 1));
  for (int k = 0; k < in->nops; k++)
    ops[k] = in->ops[k]->shape.rank == 0 ? in->ops[k] : ts_untranspose(c, in->ops[k], p, pinv);
  int64_t pc_[HLO_MAX_RANK];
  memcpy(pc_, p, sizeof(int64_t) * (size_t)n); /* p points into an operand: copy first */
  HInstr *r = ts_clone_permuted(c, in, ops, pinv);
  return layout_transpose(c, r, pc_);
}

static HInstr *ts_single(HComp *c, HInstr *in) {
  HInstr *t = in->ops[0];
  if (!ts_is_transpose(t)) return NULL;
  int n = t->shape.rank;
  int64_t p[HLO_MAX_RANK], pinv[HLO_MAX_RANK];
  memcpy(p, t->dims.v, sizeof(int64_t) * (size_t)n);
  layout_perm_inverse(n, p, pinv);
  HInstr *x = t->ops[0];
  HArena *a = c->mod->arena;
  if (in->op == OP_BROADCAST) {
    HInstr *b = opt_new(c, OP_BROADCAST, "broadcast", &in->shape, 1, &x);
    b->dims.n = n;
    for (int i = 0; i < n; i++)
      b->dims.v[p[i]] = in->dims.v[i];
    return b;
  }
  if (in->op == OP_REDUCE) {
    if (in->nops != 2 || !hlo_shape_is_array(&in->shape)) return NULL;
    bool red[HLO_MAX_RANK] = {false};
    for (int i = 0; i < in->dims.n; i++)
      red[p[in->dims.v[i]]] = true;
    HInstr *ops[2] = {x, in->ops[1]};
    HInstr *r = hlo_instr_clone(c, in, ops);
    r->dims.n = 0;
    int64_t kept[HLO_MAX_RANK];
    int nk = 0;
    Shape s = hlo_shape_scalar(in->shape.dt);
    for (int j = 0; j < n; j++) {
      if (red[j]) {
        r->dims.v[r->dims.n++] = j;
      } else {
        kept[nk] = j;
        s.dims[nk++] = x->shape.dims[j];
      }
    }
    s.rank = nk;
    hlo_shape_set_default_layout(&s);
    r->shape = s;
    /* original result dim i is x dim p[t_i]; find it among kept */
    int64_t perm[HLO_MAX_RANK];
    int i = 0;
    for (int d = 0; d < n; d++) {
      bool reduced = false;
      for (int q = 0; q < in->dims.n; q++)
        reduced |= in->dims.v[q] == d;
      if (reduced) continue;
      for (int j = 0; j < nk; j++)
        if (kept[j] == p[d]) perm[i] = j;
      i++;
    }
    return layout_transpose(c, r, perm);
  }
  if (in->op == OP_REDUCE_WINDOW) {
    if (in->nops != 2 || !in->window || in->window->n != n) return NULL;
    Window *w = hlo_arena_memdup(a, in->window, sizeof *w);
    for (int i = 0; i < n; i++)
      w->d[p[i]] = in->window->d[i];
    HInstr *ops[2] = {x, in->ops[1]};
    HInstr *r = ts_clone_permuted(c, in, ops, pinv);
    r->window = w;
    return layout_transpose(c, r, p);
  }
  if (in->op == OP_PAD) {
    if (in->nops != 2 || !in->pad || in->pad->n != n) return NULL;
    PadDims *d = hlo_arena_memdup(a, in->pad, sizeof *d);
    for (int i = 0; i < n; i++) {
      d->lo[p[i]] = in->pad->lo[i];
      d->hi[p[i]] = in->pad->hi[i];
      d->interior[p[i]] = in->pad->interior[i];
    }
    HInstr *ops[2] = {x, in->ops[1]};
    HInstr *r = ts_clone_permuted(c, in, ops, pinv);
    r->pad = d;
    return layout_transpose(c, r, p);
  }
  if (in->op == OP_SLICE) {
    if (in->nops != 1 || !in->slice || in->slice->n != n) return NULL;
    SliceDims *d = hlo_arena_memdup(a, in->slice, sizeof *d);
    for (int i = 0; i < n; i++) {
      d->start[p[i]] = in->slice->start[i];
      d->limit[p[i]] = in->slice->limit[i];
      d->stride[p[i]] = in->slice->stride[i];
    }
    HInstr *r = ts_clone_permuted(c, in, &x, pinv);
    r->slice = d;
    return layout_transpose(c, r, p);
  }
  if (in->op == OP_REVERSE) {
    if (in->nops != 1) return NULL;
    HInstr *r = ts_clone_permuted(c, in, &x, pinv);
    for (int i = 0; i < in->dims.n; i++)
      r->dims.v[i] = p[in->dims.v[i]];
    return layout_transpose(c, r, p);
  }
  return NULL;
}

/* The rewrite rule (opt_rewrite_comp): sink a transpose operand of in, or keep in. */
static HInstr *ts_rule(HComp *c, HInstr *in, PassCtx *pc, void *ctx) {
  (void)ctx;
  if (in->nctrl || !hlo_shape_is_array(&in->shape) || in->nops == 0) return NULL;
  unsigned fl = hlo_op_flags(in->op);
  HInstr *r = (fl & OPF_ELEM) && !(fl & OPF_SIDE) && in->shape.rank >= 2 ? ts_elementwise(c, in, pc)
                                                                         : ts_single(c, in);
  HLO_ASSERT(!r || hlo_shape_eq(&r->shape, &in->shape));
  return r;
}

bool layout_transpose_sink(HModule *m, PassCtx *pc) {
  bool changed = false;
  for (int i = 0; i < m->ncomps; i++)
    if (!m->comps[i]->is_fusion) changed |= opt_rewrite_comp(m->comps[i], pc, ts_rule, NULL);
  return changed;
}
