/* optimizer/fold_batchnorm.c: fold per-channel affine epilogues into constant weights, and
 * freeze entry parameters into constants.
 *
 * Batch-norm inference, as JAX exports it, leaves after a convolution or dot a chain of
 * elementwise ops with per-channel constants: (y + bias - mean) * rsqrt(var + eps) * gamma
 * + beta. Once the weights are constants (frozen parameters or constants in the graph) and
 * the rsqrt/gamma chains are constant-folded, the chain is an affine map y*s + t with
 * per-channel vectors s and t. This pass walks such chains from every convolution or dot
 * whose weight operand is a constant: each step must be the only user of the previous one
 * and be add, subtract, multiply or divide by a per-channel constant (a broadcast of a
 * rank-1 constant along the output-feature dimension, or a uniform constant), or a negate.
 * It then scales the weights along their output-feature dimension by s (a new constant),
 * re-emits the convolution/dot on them and adds t as one bias broadcast: the chain of
 * k ops becomes conv + one add. The arithmetic is done in double and rounded once, so results
 * differ from the unfolded graph only by rounding. Chains that are a single bias add are
 * left alone. Requires constant-folded per-channel vectors (run after constant-fold);
 * replaced instructions are left for DCE.
 *
 * opt_freeze turns an entry parameter into a constant so that the above (and constant
 * folding) can see weights that the model passes as arguments. opt_freeze_specs does it for
 * the driver's `--freeze ARG=FILE` options: every ARG (a parameter number, or the name or
 * op_name of an entry parameter) is resolved against the entry as read and its .npy file is
 * read before anything changes; the parameters are then frozen from the highest number down,
 * since freezing one renumbers those above it and numbers must keep meaning the module as
 * read. */
#include "optimizer.h"

#include <stdlib.h>
#include <string.h>

/* Where the channel lives: output dimension of the conv/dot and dimension of the weight. */
typedef struct Chan {
  int wop;     /* operand index of the constant weight */
  int out_dim; /* output dimension indexed by the channel */
  int w_dim;   /* weight dimension indexed by the channel */
  int64_t n;   /* number of channels */
} Chan;

static bool find_channel(const HInstr *d, Chan *ch) {
  if (!hlo_dtype_is_float(d->shape.dt)) return false;
  if (d->op == OP_CONVOLUTION) {
    if (!d->conv || d->nops != 2 || d->batch_groups != 1 || d->ops[1]->op != OP_CONSTANT)
      return false;
    ch->wop = 1;
    ch->out_dim = (int)d->conv->out_feat;
    ch->w_dim = (int)d->conv->k_out;
    ch->n = d->shape.dims[ch->out_dim];
    return true;
  }
  if (d->op != OP_DOT || !d->dot || d->nops != 2) return false;
  const DotDims *dd = d->dot;
  for (int side = 1; side >= 0; side--) {
    const HInstr *w = d->ops[side];
    if (w->op != OP_CONSTANT || !w->literal) continue;
    const IList *batch = side ? &dd->rhs_batch : &dd->lhs_batch;
    const IList *con = side ? &dd->rhs_contract : &dd->lhs_contract;
    int nfree = 0, free_dim = -1;
    for (int i = 0; i < w->shape.rank; i++)
      if (!opt_ilist_has(batch, i) && !opt_ilist_has(con, i)) nfree++, free_dim = i;
    if (nfree != 1) continue;
    const HInstr *o = d->ops[1 - side];
    int lhs_free = o->shape.rank - (side ? dd->lhs_batch.n + dd->lhs_contract.n
                                         : dd->rhs_batch.n + dd->rhs_contract.n);
    ch->wop = side;
    ch->w_dim = free_dim;
    ch->out_dim = side ? dd->lhs_batch.n + lhs_free : dd->lhs_batch.n;
    ch->n = w->shape.dims[free_dim];
    return ch->out_dim < d->shape.rank && d->shape.dims[ch->out_dim] == ch->n;
  }
  return false;
}

/* Per-channel values of operand o (a uniform constant or a broadcast of a rank-1 constant
 * along the channel dimension) into v. */
static bool channel_values(const HInstr *o, const Chan *ch, double *v) {
  double u;
  if (opt_uniform_value(o, &u)) {
    for (int64_t i = 0; i < ch->n; i++)
      v[i] = u;
    return true;
  }
  if (o->op != OP_BROADCAST || o->dims.n != 1 || o->dims.v[0] != ch->out_dim) return false;
  const HInstr *k = o->ops[0];
  if (k->op != OP_CONSTANT || !k->literal || k->shape.rank != 1 || k->shape.dims[0] != ch->n)
    return false;
  for (int64_t i = 0; i < ch->n; i++)
    v[i] = hlo_literal_get_f64(k->literal, i);
  return true;
}

static bool fold_one(HComp *c, HInstr *d, const HUsers *us, PassCtx *pc) {
  Chan ch;
  if (d->nctrl || !find_channel(d, &ch) || ch.n <= 0) return false;
  double *s = hlo_arena_alloc(pc->scratch, sizeof(double) * (size_t)ch.n);
  double *t = hlo_arena_alloc(pc->scratch, sizeof(double) * (size_t)ch.n);
  double *v = hlo_arena_alloc(pc->scratch, sizeof(double) * (size_t)ch.n);
  for (int64_t i = 0; i < ch.n; i++)
    s[i] = 1, t[i] = 0;
  HInstr *cur = d, *last = NULL;
  int steps = 0, scales = 0;
  while (cur != c->root && us->n[cur->idx] == 1) {
    HInstr *u = us->list[cur->idx][0];
    if (u->nctrl || !hlo_shape_eq(&u->shape, &d->shape)) break;
    if (u->op == OP_NEGATE) {
      for (int64_t i = 0; i < ch.n; i++)
        s[i] = -s[i], t[i] = -t[i];
    } else if (u->op == OP_ADD || u->op == OP_SUBTRACT || u->op == OP_MULTIPLY ||
               u->op == OP_DIVIDE) {
      int me = u->ops[0] == cur ? 0 : 1;
      if (u->ops[1 - me] == cur || !channel_values(u->ops[1 - me], &ch, v)) break;
      if (u->op == OP_DIVIDE && me == 1) break;
      for (int64_t i = 0; i < ch.n; i++) {
        if (u->op == OP_ADD) {
          t[i] += v[i];
        } else if (u->op == OP_SUBTRACT) {
          if (me == 0)
            t[i] -= v[i];
          else
            s[i] = -s[i], t[i] = v[i] - t[i];
        } else if (u->op == OP_MULTIPLY) {
          s[i] *= v[i], t[i] *= v[i];
        } else {
          s[i] /= v[i], t[i] /= v[i];
        }
      }
      scales += u->op == OP_MULTIPLY || u->op == OP_DIVIDE;
    } else {
      break;
    }
    last = u;
    cur = u;
    steps++;
  }
  if (!last || (scales == 0 && steps < 2)) return false;
  /* scaled weights */
  HModule *m = c->mod;
  const HInstr *w = d->ops[ch.wop];
  Literal *nw = hlo_literal_clone(m->arena, w->literal);
  int64_t strides[HLO_MAX_RANK];
  hlo_shape_strides(&w->shape, strides);
  int64_t total = hlo_shape_elems(&w->shape);
  for (int64_t i = 0; i < total; i++) {
    int64_t chn = (i / strides[ch.w_dim]) % w->shape.dims[ch.w_dim];
    hlo_literal_set_f64(nw, i, hlo_literal_get_f64(w->literal, i) * s[chn]);
  }
  HInstr *wk = opt_new(c, OP_CONSTANT, "constant", &w->shape, 0, NULL);
  wk->literal = nw;
  HInstr *ops[2] = {d->ops[0], d->ops[1]};
  ops[ch.wop] = wk;
  HInstr *nd = hlo_instr_clone(c, d, ops);
  HInstr *res = nd;
  bool bias = false;
  for (int64_t i = 0; i < ch.n; i++)
    bias |= t[i] != 0;
  if (bias) {
    Shape bs = hlo_shape_array(d->shape.dt, 1, &ch.n);
    HInstr *bk = opt_new(c, OP_CONSTANT, "constant", &bs, 0, NULL);
    bk->literal = hlo_literal_new(m->arena, &bs);
    for (int64_t i = 0; i < ch.n; i++)
      hlo_literal_set_f64(bk->literal, i, t[i]);
    HInstr *bb = opt_new(c, OP_BROADCAST, "broadcast", &d->shape, 1, &bk);
    bb->dims.n = 1;
    bb->dims.v[0] = ch.out_dim;
    HInstr *aops[2] = {nd, bb};
    res = opt_new(c, OP_ADD, "add", &last->shape, 2, aops);
  }
  hlo_instr_replace_uses(last, res);
  if (pc->log)
    fprintf(pc->log, "fold-batchnorm: %s: %d per-channel op(s) up to %s folded into weights %s%s\n",
            d->name, steps, last->name, wk->name, bias ? " and one bias add" : "");
  return true;
}

bool opt_fold_batchnorm(HModule *m, PassCtx *pc) {
  bool changed = false;
  for (int ci = 0; ci < m->ncomps; ci++) {
    HComp *c = m->comps[ci];
    if (c->is_fusion) continue;
    int n = c->ninstrs;
    bool any = false;
    HUsers us = hlo_comp_users(pc->scratch, c);
    for (int i = 0; i < n; i++) {
      HInstr *d = c->instrs[i];
      if (d->op != OP_CONVOLUTION && d->op != OP_DOT) continue;
      if (fold_one(c, d, &us, pc)) {
        any = true;
        /* the rewrite appended instructions and redirected uses: refresh */
        for (int j = 0; j < c->ninstrs; j++)
          c->instrs[j]->idx = j;
        us = hlo_comp_users(pc->scratch, c);
      }
    }
    if (any) opt_comp_toposort(c, pc->scratch);
    changed |= any;
  }
  return changed;
}

/* opt_freeze with a value the module may keep as it is (in m's arena) or must copy. */
static bool freeze_value(HModule *m, int64_t param, const Literal *value, bool adopt, HErr *err) {
  HComp *e = m->entry;
  if (!e) {
    hlo_err(err, m->file, NULL, NULL, "module has no entry computation");
    return false;
  }
  hlo_comp_renumber(e);
  if (param < 0 || param >= e->nparams || !e->params[param]) {
    hlo_err_comp(err, e, "--freeze: no parameter %lld (the entry has %d)", (long long)param,
                 e->nparams);
    return false;
  }
  HInstr *p = e->params[param];
  if (!value || !hlo_shape_is_array(&value->shape) || !hlo_shape_eq(&value->shape, &p->shape)) {
    hlo_err_at(err, p, "--freeze: value of shape %s does not match parameter %lld of shape %s",
               value ? hlo_shape_str(m->arena, &value->shape) : "(none)", (long long)param,
               hlo_shape_str(m->arena, &p->shape));
    return false;
  }
  p->op = OP_CONSTANT;
  p->literal = adopt ? (Literal *)value : hlo_literal_clone(m->arena, value);
  hlo_shape_copy(m->arena, &p->literal->shape, &p->shape);
  p->param_num = 0;
  p->nraw = 0; /* sharding and replication annotations described the argument */
  for (int i = 0; i < e->ninstrs; i++) {
    HInstr *in = e->instrs[i];
    if (in->op == OP_PARAMETER && in->param_num > param) in->param_num--;
  }
  if (m->has_entry_layout && param < m->nentry_layout) {
    memmove(&m->entry_layout_params[param], &m->entry_layout_params[param + 1],
            sizeof(Shape) * (size_t)(m->nentry_layout - param - 1));
    m->nentry_layout--;
  }
  int k = 0;
  for (int i = 0; i < m->nalias; i++) {
    HAlias a = m->alias[i];
    if (a.param == param) continue;
    if (a.param > param) a.param--;
    m->alias[k++] = a;
  }
  m->nalias = k;
  hlo_comp_renumber(e);
  return true;
}

bool opt_freeze(HModule *m, int64_t param, const Literal *value, HErr *err) {
  return freeze_value(m, param, value, false, err);
}

/* The entry parameter number spec `arg` names (a number, or a parameter's name or op_name;
 * the last match wins), or -1 with an error. A number is taken as is: opt_freeze checks it. */
static bool freeze_arg(const HComp *e, const char *arg, int64_t *num, HErr *err) {
  char *end;
  long long v = strtoll(arg, &end, 10);
  if (!*end) {
    *num = v;
    return true;
  }
  *num = -1;
  for (int k = 0; k < e->nparams; k++)
    if (e->params[k] && (!strcmp(e->params[k]->name, arg) ||
                         (e->params[k]->op_name && !strcmp(e->params[k]->op_name, arg))))
      *num = k;
  if (*num < 0) hlo_err_comp(err, e, "--freeze: no entry parameter named '%s'", arg);
  return *num >= 0;
}

bool opt_freeze_specs(HModule *m, int n, const char *const *specs, HErr *err) {
  HComp *e = m->entry;
  if (!e) {
    hlo_err(err, m->file, NULL, NULL, "module has no entry computation");
    return false;
  }
  hlo_comp_renumber(e);
  HArena *a = hlo_arena_new(); /* the specs' bookkeeping (the values are read into the module) */
  int64_t *num = hlo_arena_alloc(a, sizeof(int64_t) * (size_t)(n > 0 ? n : 1));
  Literal **val = hlo_arena_alloc(a, sizeof(Literal *) * (size_t)(n > 0 ? n : 1));
  bool ok = true;
  for (int i = 0; i < n && ok; i++) {
    const char *eq = strchr(specs[i], '=');
    if (!eq || eq == specs[i] || !eq[1]) {
      hlo_err_comp(err, e, "--freeze needs ARG=FILE.npy, got '%s'", specs[i]);
      ok = false;
      break;
    }
    ok = freeze_arg(e, hlo_arena_strndup(a, specs[i], (size_t)(eq - specs[i])), &num[i], err);
    for (int k = 0; k < i && ok; k++)
      if (num[k] == num[i]) {
        hlo_err_comp(err, e, "--freeze: parameter %lld given twice", (long long)num[i]);
        ok = false;
      }
    /* read into the module's arena, where the constant keeps it (no copy of megabytes); a
       bf16, f16 or fp8 array stored as its bits ('<u2', '|u1', ml_dtypes' void types) taken
       as the parameter's type */
    if (ok) ok = (val[i] = hlo_npy_read(m->arena, eq + 1, err)) != NULL;
    if (ok && num[i] >= 0 && num[i] < e->nparams && e->params[num[i]])
      hlo_literal_bits_as(val[i], e->params[num[i]]->shape.dt);
  }
  for (int done = 0; ok && done < n; done++) { /* highest parameter number first */
    int at = -1;
    for (int i = 0; i < n; i++)
      if (val[i] && (at < 0 || num[i] > num[at])) at = i;
    ok = freeze_value(m, num[at], val[at], true, err);
    val[at] = NULL;
  }
  hlo_arena_free(a);
  return ok;
}
