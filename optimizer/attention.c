/* optimizer/attention.c: attention, softmax(f(Q.K)) . V, found and fused into one kCustom fusion.
 *
 * The matcher (opt_attention_match) starts at the output product and walks back: the
 * probabilities (through converts and transposes) are exp(E - max(E)) / sum(exp(E - max(E)))
 * over some dims of E, and E, the scores, is the product S = dot(Q, K) (either operand order)
 * followed by elementwise ops of S's dims (scaling, masks from iota compares or parameters,
 * soft-capping, converts), whose other operands are any values read at the score's index. The
 * reduced dims must be exactly the key operand's free dims, the output product must contract
 * them against the values, pair S's batch dims with its own and leave the query dims free: then
 * out[b, q, c] = sum_k softmax_k(E[b, q, k]) V[b, k, c] over one head dim on each side. That is
 * how JAX (jax.nn.softmax, dot_product_attention), TF and PyTorch/XLA export it, grouped-query
 * heads included (they reshape the queries to [.., kv_heads, group, ..] and batch over the
 * key/value heads, so a group's rows share the keys). The analysis fills OptAttn: for every
 * operand and result dim the S dim it runs along (or the head dim), the counts.
 *
 * The pass (run when the target has a fused kernel, OptOpts.attention_rows > 0) turns every match
 * with at most that many query rows per batch item (attention_rows_f32 for f32/f64 queries, where
 * the target's alternative has no tensor cores either) into a fusion of kind kCustom whose body is
 * the matched instructions; broadcasts, iotas and constants the scores read are copied in, other
 * operands become parameters. The fusion computes exactly what the instructions did; the targets
 * recognize the form again (opt_attention_match on the fusion's root) to give it one kernel. A
 * match that cannot be fused says why in the decision log: an intermediate read outside (the
 * probabilities returned too), too many query rows for the target's kernel.
 *
 * A target whose 16-bit kernel takes any number of rows (OptOpts.attention_rows_16: queries,
 * keys and values of one 16-bit type, opt_attention_16bit) also gets the producers of Q, K and V
 * pulled in: loop-fusible instructions all of whose readers are members (RoPE's slices and
 * concatenation, the grouped-query broadcast, converts). That kernel computes its keys and
 * values once per batch item and its queries once per block, so they cost no more inside than
 * in kernels of their own, and are not written and read back. Cheap expressions of iotas and
 * scalar constants (a causal mask's compare and select) are copied in for every target. */
#include "optimizer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define ATT_MAX_PARAMS 64   /* parameters of an attention fusion */
#define ATT_MAX_MEMBERS 192 /* its instructions, at most (producers pulled in stop there) */

static bool att_is_dot(const HInstr *x) { return x && x->op == OP_DOT && x->dot && x->nops == 2; }

/* reduce(v, init) over some dims with combiner op and init value want. */
static bool att_reduce(const HInstr *x, int op, double want) {
  if (!x || x->op != OP_REDUCE || x->nops != 2 || x->ncalls != 1) return false;
  if (!hlo_dtype_is_float(x->shape.dt) || x->shape.dt != x->ops[0]->shape.dt) return false;
  return hlo_comp_binary_op(x->calls[0], x->shape.dt) == op && opt_uniform_is(x->ops[1], want);
}

/* The product the scores x are computed from through elementwise ops of its dims; the ops
 * go into a->chain. NULL when there is none or more than one, or when the walk visits more
 * than *budget instructions (operands shared by many paths). */
static const HInstr *att_find_dot(const HInstr *x, const Shape *s, OptAttn *a, int depth,
                                  int *budget) {
  if (--*budget < 0 || !hlo_shape_same_dims(&x->shape, s)) return NULL;
  if (att_is_dot(x)) return x;
  if (depth > OPT_ATT_MAX_CHAIN || !(hlo_op_flags(x->op) & OPF_ELEM) || x->op == OP_RNG)
    return NULL;
  const HInstr *found = NULL;
  for (int j = 0; j < x->nops; j++) {
    const HInstr *d = att_find_dot(x->ops[j], s, a, depth + 1, budget);
    if (!d) continue;
    if (found && found != d) return NULL;
    found = d;
  }
  if (found) {
    for (int i = 0; i < a->nchain; i++)
      if (a->chain[i] == x) return found;
    if (a->nchain == OPT_ATT_MAX_CHAIN) return NULL;
    a->chain[a->nchain++] = x;
  }
  return found;
}

/* The free dims of dot operand j in order. */
static int att_free_dims(const HInstr *dot, int j, int64_t *out) {
  const IList *b = j ? &dot->dot->rhs_batch : &dot->dot->lhs_batch;
  const IList *c = j ? &dot->dot->rhs_contract : &dot->dot->lhs_contract;
  int n = 0;
  for (int d = 0; d < dot->ops[j]->shape.rank; d++)
    if (!opt_ilist_has(b, d) && !opt_ilist_has(c, d)) out[n++] = d;
  return n;
}

/* The scores' product: which operand holds the keys (its free dims are the reduced ones), and
 * the S dim of every dim of both operands. */
static bool att_scores(OptAttn *a, const char **why) {
  const HInstr *s = a->sdot;
  const DotDims *dd = s->dot;
  if (dd->lhs_contract.n != 1 || dd->rhs_contract.n != 1)
    return *why = "the scores' product contracts more than one head dim", false;
  int nb = dd->lhs_batch.n;
  int64_t fl[HLO_MAX_RANK], fr[HLO_MAX_RANK];
  int nl = att_free_dims(s, 0, fl), nr = att_free_dims(s, 1, fr);
  bool red[HLO_MAX_RANK] = {0};
  for (int j = 0; j < a->rmax->dims.n; j++)
    red[a->rmax->dims.v[j]] = true;
  int kop = -1;
  for (int side = 0; side < 2 && kop < 0; side++) {
    int lo = side ? nb + nl : nb, n = side ? nr : nl;
    bool ok = n > 0;
    for (int d = 0; d < s->shape.rank; d++)
      if (red[d] != (d >= lo && d < lo + n)) ok = false;
    if (ok) kop = side;
  }
  if (kop < 0) return *why = "the softmax does not run over the key operand's free dims", false;
  a->qop = 1 - kop;
  for (int d = 0; d < s->shape.rank; d++) {
    a->skey[d] = red[d];
    a->sbatch[d] = d < nb;
  }
  for (int side = 0; side < 2; side++) {
    const IList *b = side ? &dd->rhs_batch : &dd->lhs_batch;
    int8_t *map = side == a->qop ? a->qmap : a->kmap;
    int64_t *fd = side ? fr : fl;
    int nf = side ? nr : nl, lo = side ? nb + nl : nb;
    for (int d = 0; d < HLO_MAX_RANK; d++)
      map[d] = -1; /* the head dim */
    for (int i = 0; i < nb; i++)
      map[b->v[i]] = (int8_t)i;
    for (int i = 0; i < nf; i++)
      map[fd[i]] = (int8_t)(lo + i);
  }
  a->dh = s->ops[0]->shape.dims[dd->lhs_contract.v[0]];
  return true;
}

/* The output product: the probabilities' dims (pdim: their S dims) pair with S's batch dims,
 * contract the key dims and leave the query dims free; one head dim on the values' side. */
static bool att_output(OptAttn *a, const int8_t *pdim, const char **why) {
  const HInstr *o = a->odot, *s = a->sdot;
  const DotDims *dd = o->dot;
  int pop = 1 - a->vop;
  const IList *pb = pop ? &dd->rhs_batch : &dd->lhs_batch,
              *vb = pop ? &dd->lhs_batch : &dd->rhs_batch;
  const IList *pc = pop ? &dd->rhs_contract : &dd->lhs_contract;
  const IList *vc = pop ? &dd->lhs_contract : &dd->rhs_contract;
  int nb = s->dot->lhs_batch.n;
  if (pb->n != nb) return *why = "the output product's batch dims are not the scores'", false;
  for (int i = 0; i < nb; i++)
    if (!a->sbatch[pdim[pb->v[i]]])
      return *why = "the output product's batch dims are not the scores'", false;
  int nkey = 0;
  for (int d = 0; d < s->shape.rank; d++)
    nkey += a->skey[d];
  if (pc->n != nkey) return *why = "the output product does not contract the key dims", false;
  for (int i = 0; i < pc->n; i++)
    if (!a->skey[pdim[pc->v[i]]])
      return *why = "the output product does not contract the key dims", false;
  int64_t pf[HLO_MAX_RANK], vf[HLO_MAX_RANK];
  int npf = att_free_dims(o, pop, pf), nvf = att_free_dims(o, a->vop, vf);
  if (nvf != 1) return *why = "the values have more than one head dim", false;
  for (int d = 0; d < HLO_MAX_RANK; d++)
    a->vmap[d] = a->omap[d] = -1;
  for (int i = 0; i < nb; i++)
    a->vmap[vb->v[i]] = pdim[pb->v[i]];
  for (int i = 0; i < pc->n; i++)
    a->vmap[vc->v[i]] = pdim[pc->v[i]];
  /* result: [batch..., lhs free..., rhs free...] */
  int r = 0;
  for (int i = 0; i < nb; i++)
    a->omap[r++] = pdim[pb->v[i]];
  for (int side = 0; side < 2; side++) {
    if (side == a->vop)
      a->omap[r++] = -1;
    else
      for (int i = 0; i < npf; i++)
        a->omap[r++] = pdim[pf[i]];
  }
  a->dv = o->ops[a->vop]->shape.dims[vf[0]];
  return true;
}

/* Walk back from the second product's operand pop to the softmax's division: converts and
 * transposes between them go to a->mid, pdim[] receives each operand dim's S dim. */
static const HInstr *att_probs(OptAttn *a, int pop, int8_t *pdim) {
  const HInstr *x = a->odot->ops[pop];
  int rank = x->shape.rank;
  for (int d = 0; d < rank; d++)
    pdim[d] = (int8_t)d;
  a->nmid = 0;
  while ((x->op == OP_CONVERT || x->op == OP_TRANSPOSE) && a->nmid < 4) {
    if (x->op == OP_TRANSPOSE) { /* operand dim dims[d] is result dim d */
      int8_t t[HLO_MAX_RANK];
      for (int d = 0; d < rank; d++)
        t[d] = pdim[x->dims.v[d]];
      memcpy(pdim, t, sizeof t);
    } else if (!hlo_dtype_is_float(x->shape.dt)) {
      return NULL;
    }
    a->mid[a->nmid++] = x;
    x = x->ops[0];
  }
  return x->op == OP_DIVIDE ? x : NULL;
}

static bool att_match_dot(const HInstr *odot, OptAttn *a, const char **why) {
  memset(a, 0, sizeof *a);
  *why = "not a product";
  if (!att_is_dot(odot) || odot->shape.dt == DT_TUPLE || !hlo_dtype_is_float(odot->shape.dt))
    return false;
  a->odot = odot;
  int8_t pdim[HLO_MAX_RANK];
  const HInstr *div = NULL;
  for (int vop = 0; vop < 2 && !div; vop++) {
    a->vop = vop;
    div = att_probs(a, 1 - vop, pdim);
  }
  *why = "no softmax feeds the product";
  if (!div) return false;
  /* div = exp(E - bcast(max E)) / bcast(sum exp(..)) */
  const HInstr *bs = div->ops[1], *ex = div->ops[0];
  if (bs->op != OP_BROADCAST || ex->op != OP_EXP) return false;
  const HInstr *rs = bs->ops[0], *sub = ex->ops[0];
  if (!att_reduce(rs, OP_ADD, 0) || rs->ops[0] != ex || !opt_is_row_broadcast(bs, rs)) return false;
  if (sub->op != OP_SUBTRACT || sub->ops[1]->op != OP_BROADCAST) return false;
  const HInstr *bm = sub->ops[1], *score = sub->ops[0], *rm = bm->ops[0];
  if (!att_reduce(rm, OP_MAXIMUM, -INFINITY) || rm->ops[0] != score ||
      !opt_is_row_broadcast(bm, rm))
    return false;
  if (rm->dims.n != rs->dims.n) return false;
  for (int j = 0; j < rm->dims.n; j++)
    if (rm->dims.v[j] != rs->dims.v[j]) return false;
  a->div = div;
  a->rsum = rs;
  a->rmax = rm;
  a->score = score;
  int budget = 256; /* instructions visited: a chain shared by many paths stays cheap */
  a->sdot = att_find_dot(score, &score->shape, a, 0, &budget);
  *why = "the scores are not elementwise ops of one product";
  if (!a->sdot || !hlo_dtype_is_float(a->sdot->shape.dt)) return false;
  if (!att_scores(a, why) || !att_output(a, pdim, why)) return false;
  a->nbatch = a->nq = a->nk = 1;
  for (int d = 0; d < a->sdot->shape.rank; d++) {
    int64_t n = a->sdot->shape.dims[d];
    if (a->sbatch[d]) {
      a->nbatch *= n;
      a->bdim[a->nbd] = d;
      a->bext[a->nbd++] = n;
    } else if (a->skey[d]) {
      a->nk *= n;
      a->kdim[a->nkd] = d;
      a->kext[a->nkd++] = n;
    } else {
      a->nq *= n;
      a->qdim[a->nqd] = d;
      a->qext[a->nqd++] = n;
    }
  }
  a->out = odot;
  *why = NULL;
  return true;
}

bool opt_attention_match(const HInstr *out, OptAttn *a, const char **why) {
  if (out->op != OP_TRANSPOSE || out->nops != 1 || !att_is_dot(out->ops[0]))
    return att_match_dot(out, a, why);
  if (!att_match_dot(out->ops[0], a, why)) return false;
  int8_t om[HLO_MAX_RANK]; /* result dim d is the product's dim dims[d] */
  for (int d = 0; d < out->shape.rank; d++)
    om[d] = a->omap[out->dims.v[d]];
  memcpy(a->omap, om, sizeof om);
  a->out = out;
  return true;
}

/* ------------------------------------------------------------------ the pass */

typedef struct AttFuse {
  HComp *c;
  PassCtx *pc;
  HUsers us;
  uint8_t *mem;  /* per instruction index: 1 core member, 2 copied in */
  HInstr **map;  /* per instruction index: its copy or parameter in the fusion */
  HInstr **list; /* the members */
  int n;
} AttFuse;

static void att_add(AttFuse *f, const HInstr *x, uint8_t how) {
  if (f->mem[x->idx]) return;
  f->mem[x->idx] = how;
  f->list[f->n++] = (HInstr *)x;
}

/* An expression of iotas and scalar constants alone (a causal mask), at most depth deep. */
static bool att_const_expr(const HInstr *x, int depth) {
  if (x->op == OP_IOTA || (x->op == OP_CONSTANT && x->shape.rank == 0 && x->literal)) return true;
  if (depth == 0 || x->op == OP_PARAMETER || x->op == OP_CONSTANT || !opt_loop_fusible(x) ||
      !(hlo_op_flags(x->op) & OPF_CHEAP))
    return false;
  for (int j = 0; j < x->nops; j++)
    if (!att_const_expr(x->ops[j], depth - 1)) return false;
  return true;
}

/* What the scores read that is cheap to have inside: broadcasts, iotas, scalar constants, and
 * cheap expressions of those alone (masks built from iota compares and selects). */
static bool att_copyable(const HInstr *x) { return x->op == OP_BROADCAST || att_const_expr(x, 16); }

static void att_copy_in(AttFuse *f, const HInstr *x) {
  if (f->mem[x->idx] || !att_copyable(x)) return;
  att_add(f, x, 2);
  for (int j = 0; j < x->nops; j++)
    att_copy_in(f, x->ops[j]);
}

/* The members of match a; NULL (with the reason) when an intermediate is read outside. */
static const char *att_members(AttFuse *f, const OptAttn *a) {
  const HInstr *ex = a->div->ops[0], *sub = ex->ops[0];
  const HInstr *core[OPT_ATT_MAX_CHAIN + 17];
  int n = 0;
  core[n++] = a->sdot;
  for (int i = 0; i < a->nchain; i++)
    core[n++] = a->chain[i];
  const HInstr *soft[] = {a->rmax, sub->ops[1], sub, ex, a->rsum, a->div->ops[1], a->div};
  for (int i = 0; i < 7; i++)
    core[n++] = soft[i];
  for (int i = 0; i < a->nmid; i++)
    core[n++] = a->mid[i];
  if (a->out != a->odot) core[n++] = a->odot; /* read by the transpose alone */
  f->n = 0;
  for (int i = 0; i < n; i++)
    att_add(f, core[i], 1);
  att_add(f, a->out, 1);
  for (int i = 0; i < n; i++) /* everything but the output is read inside only */
    for (int u = 0; u < f->us.n[core[i]->idx]; u++)
      if (f->mem[f->us.list[core[i]->idx][u]->idx] != 1)
        return core[i] == a->sdot ? "the scores are read outside the attention"
                                  : "an intermediate of the softmax is read outside the attention";
  for (int i = 0; i < f->n; i++)
    if (f->mem[f->list[i]->idx] == 1 && f->list[i] != a->sdot && f->list[i] != a->odot &&
        f->list[i] != a->out)
      for (int j = 0; j < f->list[i]->nops; j++)
        att_copy_in(f, f->list[i]->ops[j]);
  return NULL;
}

/* Pull the producers of operand x of a product into the fusion: loop-fusible instructions all of
 * whose readers are members (the 16-bit kernel stages its keys and values and generates its
 * queries once a block, so what computes them, RoPE, grouped-query broadcasts, converts, runs
 * there instead of in kernels of its own). */
static void att_pull(AttFuse *f, const HInstr *x, int depth) {
  if (f->mem[x->idx]) return;
  if (depth == 0 || x->op == OP_PARAMETER || x->op == OP_REDUCE_WINDOW || !opt_loop_fusible(x) ||
      f->n >= ATT_MAX_MEMBERS) {
    att_copy_in(f, x);
    return;
  }
  for (int u = 0; u < f->us.n[x->idx]; u++)
    if (!f->mem[f->us.list[x->idx][u]->idx]) {
      att_copy_in(f, x);
      return;
    }
  att_add(f, x, 3);
  for (int j = 0; j < x->nops; j++)
    att_pull(f, x->ops[j], depth - 1);
}

static void att_pull_operands(AttFuse *f, const OptAttn *a) {
  att_pull(f, a->sdot->ops[0], 64);
  att_pull(f, a->sdot->ops[1], 64);
  att_pull(f, a->odot->ops[a->vop], 64);
}

/* The fusion's parameters: the distinct operands of members that are not members. */
static int att_nparams(AttFuse *f) {
  int np = 0;
  for (int i = 0; i < f->n; i++)
    for (int j = 0; j < f->list[i]->nops; j++) {
      HInstr *x = f->list[i]->ops[j];
      if (!f->mem[x->idx] && !f->map[x->idx]) f->map[x->idx] = x, np++;
    }
  for (int i = 0; i < f->n; i++) /* map is att_build's: leave it clear */
    for (int j = 0; j < f->list[i]->nops; j++)
      f->map[f->list[i]->ops[j]->idx] = NULL;
  return np;
}

static int att_cmp_idx(const void *x, const void *y) {
  const HInstr *p = *(HInstr *const *)x, *q = *(HInstr *const *)y;
  return p->idx - q->idx;
}

/* The kCustom fusion of f's members, replacing the output product. */
static HInstr *att_build(AttFuse *f, const OptAttn *a) {
  HComp *c = f->c;
  HModule *m = c->mod;
  qsort(f->list, (size_t)f->n, sizeof(HInstr *), att_cmp_idx);
  HComp *fc = hlo_comp_new(m, hlo_module_unique_name(m, "attention_computation"));
  fc->is_fusion = true;
  HInstr *ext[ATT_MAX_PARAMS];
  int next = 0;
  for (int i = 0; i < f->n; i++) {
    HInstr *in = f->list[i];
    HInstr *ops[HLO_MAX_RANK * 2 + 4];
    HLO_ASSERT(in->nops <= (int)(sizeof ops / sizeof *ops));
    for (int j = 0; j < in->nops; j++) {
      HInstr *x = in->ops[j];
      if (!f->map[x->idx]) {
        HLO_ASSERT(!f->mem[x->idx] && next < ATT_MAX_PARAMS);
        f->map[x->idx] = opt_new_param(fc, &x->shape, next);
        ext[next++] = x;
      }
      ops[j] = f->map[x->idx];
    }
    f->map[in->idx] = hlo_instr_clone(fc, in, ops);
  }
  fc->root = f->map[a->out->idx];
  opt_comp_toposort(fc, f->pc->scratch);
  HInstr *fu = opt_new(c, OP_FUSION, "attention", &a->out->shape, next, ext);
  hlo_instr_set_calls(fu, 1, &fc);
  fu->fusion_kind = FK_CUSTOM;
  hlo_instr_replace_uses((HInstr *)a->out, fu);
  return fu;
}

static void att_log(PassCtx *pc, const HInstr *odot, const OptAttn *a, const char *verdict) {
  if (!pc->log) return;
  fprintf(pc->log,
          "attention at %s: %lld batch item(s) x %lld query row(s) x %lld key(s), head dims %lld "
          "-> %lld: %s\n",
          odot->name, (long long)a->nbatch, (long long)a->nq, (long long)a->nk, (long long)a->dh,
          (long long)a->dv, verdict);
}

static bool att_comp(HComp *c, PassCtx *pc) {
  hlo_comp_renumber(c);
  int n = c->ninstrs;
  AttFuse f = {c,
               pc,
               hlo_comp_users(pc->scratch, c),
               hlo_arena_alloc(pc->scratch, (size_t)n + 1),
               hlo_arena_alloc(pc->scratch, sizeof(HInstr *) * (size_t)(n + 1)),
               hlo_arena_alloc(pc->scratch, sizeof(HInstr *) * (size_t)(n + 1)),
               0};
  const OptOpts *o = pc->opts;
  bool changed = false;
  for (int i = 0; i < n; i++) {
    HInstr *in = c->instrs[i];
    OptAttn a;
    const char *why;
    if (in->op == OP_TRANSPOSE) continue; /* taken with its product */
    if (!opt_attention_match(in, &a, &why)) {
      if (pc->log && a.div) fprintf(pc->log, "attention at %s: not matched: %s\n", in->name, why);
      continue;
    }
    /* a transpose alone reading the result joins: the kernel writes the result's layout */
    HInstr *u = f.us.n[in->idx] == 1 ? f.us.list[in->idx][0] : NULL;
    if (u && u->op == OP_TRANSPOSE && !opt_attention_match(u, &a, &why))
      opt_attention_match(in, &a, &why); /* (cannot fail after the product matched) */
    const char *no = NULL;
    char buf[160];
    DType qt = a.sdot->ops[a.qop]->shape.dt;
    int64_t rows = (qt == DT_F32 || qt == DT_F64) && o->attention_rows_f32 ? o->attention_rows_f32
                                                                           : o->attention_rows;
    if (o->attention_rows_16 > rows && opt_attention_16bit(&a, o->attention_head_16))
      rows = o->attention_rows_16;
    if (a.nq < o->attention_min_rows) {
      snprintf(buf, sizeof buf,
               "not fused: %lld query rows per batch item, the target fuses from %lld",
               (long long)a.nq, (long long)o->attention_min_rows);
      no = buf;
    } else if (a.nq > rows) {
      snprintf(buf, sizeof buf,
               "not fused: %lld query rows per batch item, the target's kernel takes up to %lld",
               (long long)a.nq, (long long)rows);
      no = buf;
    } else if (a.dh > o->attention_head || a.dv > o->attention_head) {
      snprintf(buf, sizeof buf, "not fused: head dims above the target's kernel's %lld",
               (long long)o->attention_head);
      no = buf;
    } else {
      no = att_members(&f, &a);
      if (!no && o->attention_rows_16 > 0 && opt_attention_16bit(&a, o->attention_head_16))
        att_pull_operands(&f, &a);
    }
    if (!no && att_nparams(&f) > ATT_MAX_PARAMS) no = "not fused: too many operands";
    if (!no) {
      HInstr *fu = att_build(&f, &a);
      snprintf(buf, sizeof buf, "fused into %s (kCustom, %d instructions)", fu->name, f.n);
      att_log(pc, in, &a, buf);
      changed = true;
    } else {
      att_log(pc, in, &a, no);
    }
    for (int j = 0; j < f.n; j++) /* clear what this match touched */
      f.mem[f.list[j]->idx] = 0;
    memset(f.map, 0, sizeof(HInstr *) * (size_t)(n + 1));
    f.n = 0;
  }
  if (changed) opt_comp_toposort(c, pc->scratch);
  return changed;
}

bool opt_attention(HModule *m, PassCtx *pc) {
  if (pc->opts->attention_rows <= 0) return false;
  if (pc->log) fprintf(pc->log, "== attention\n");
  if (!att_comp(m->entry, pc)) return false;
  opt_dce(m, pc);
  opt_module_sort_comps(m, pc->scratch);
  hlo_module_renumber(m);
  return true;
}

bool opt_attention_16bit(const OptAttn *a, int64_t maxhead) {
  DType t = a->sdot->ops[a->qop]->shape.dt;
  if (t != DT_BF16 && t != DT_F16) return false;
  if (a->sdot->ops[1 - a->qop]->shape.dt != t || a->odot->ops[a->vop]->shape.dt != t) return false;
  return a->dh % 16 == 0 && a->dh <= maxhead && a->dv % 16 == 0 && a->dv <= maxhead;
}
