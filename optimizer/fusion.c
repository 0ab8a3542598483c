/* optimizer/fusion.c: whole-graph fusion into kLoop, kInput and kOutput kernels.
 *
 * Works on the entry computation and on control-flow bodies (never on reduce regions or
 * other to_apply computations). Each fusible instruction ends up in a group; each group
 * becomes one fusion instruction whose called computation (fused_computation.N,
 * is_fusion=true) holds copies of the members, with one parameter per distinct outside
 * operand, numbered in operand order. Four phases:
 *
 *  A. Epilogues. For every dot and convolution (the "hero") the group grows forward over
 *     users that are elementwise with the hero's dims, whose other operands do not depend on
 *     the group (a taint sweep in instruction order detects that), keeping the longest prefix
 *     that has exactly one value leaving the group: bias adds, residual adds, activations
 *     (relu, GELU's tanh chain) and batch-norm scale/shift join the dot/conv (kOutput).
 *     With OptOpts.conv_epilogue_to_reduce (a target whose convolution library writes the
 *     raw result anyway), a convolution's epilogue whose value only reductions read, or
 *     whose members are all cheap (a bias add, a relu), is left to phase B, which fuses it
 *     into its readers (cheap producers may be duplicated): they read the raw result, and
 *     the epilogue's own pass (the raw result read, the activation written) is gone; a
 *     reader that cannot take it (a staged convolution operand) leaves it a kernel of its
 *     own, the same pass as before. On the H200, simple_cnn_train_step at tf32 went from
 *     8.5 to 7.7 ms (conv -> batch norm -> relu -> global mean pool, and its gradients).
 *     Otherwise (the CPU, whose implicit GEMM applies the epilogue to blocks in cache) a sum,
 *     maximum or minimum that alone reads a convolution's epilogue and keeps few elements, not
 *     the feature dimension (a global pool), joins the group as its root (reduce_reader): the
 *     convolution's output is never written (simple_cnn: 822 MB, a 1.24 GB -> 417 MB heap).
 *  B. Producers, consumers first. Instructions are visited from last to first; a producer
 *     joins the group(s) of its users only if it can join all of them (so its own value
 *     disappears), otherwise it becomes the root of a new group. It may join several groups
 *     (duplication) only if it is cheap (OPF_CHEAP). Expensive producers (exp, log, tanh,
 *     rsqrt, divide, gather, ...) are never duplicated and never fused where their value
 *     would be read more than once per output element (behind an expanding broadcast, into a
 *     dot/convolution operand, into a gather). Operands of a dot/convolution accept only cheap
 *     producers (data movement, converts, cheap elementwise): the "prologue"; with
 *     OptOpts.conv_operands_staged (a target that copies computed convolution operands
 *     before its library call) no large arithmetic joins a convolution operand, so that a
 *     value read by two convolutions (a gradient feeding the data and the weight gradient)
 *     is computed and written once; with OptOpts.dot_operands_staged (the same for dots) a
 *     prologue that several products read is not duplicated into their operands but
 *     written once (Q, K and V of an attention read one normalized input in place, instead of
 *     three staged copies of it). Otherwise (a target reading convolution operands in
 *     place) a transpose feeding a convolution's input, whose producer is fusible and read by
 *     it alone, roots a loop group of its own instead, which the producer joins: a max-pool of
 *     an NCHW input is written once in NHWC (the CPU target tiles the transposition) rather
 *     than gathered across channel planes by each convolution packing it. A reduce joins a
 *     loop group as its hero when its value reaches the group root through elementwise ops
 *     and bitcast-like reshapes only (the reduce "epilogue": mean = sum / n, rsqrt(var+eps)).
 *     With OptOpts.row_chains a reduce whose group reads it back over its rows (a broadcast of
 *     the kept dims) joins that group too, and a second one chained to it (row_chain): softmax
 *     becomes one fusion of two reductions and the division, for a target's row kernel.
 *     Groups hold at most OPT_FUSION_MAX members.
 *  C. Multi-output. A loop group whose root feeds a reduce group over the same iteration
 *     space joins it as an extra output (softmax: exp(x - max) is written once while its sum
 *     is taken); sibling reduce groups over the same dims that read a common operand merge
 *     (mean and mean of squares). Both check that no path leaves one group and re-enters the
 *     other, so no cycle is created.
 *  D. Building. Groups become fusion instructions (kOutput with a dot/conv hero, its root
 *     possibly a reduce; kInput with a reduce hero, kLoop otherwise; multi-output groups get a
 * tuple root and get-tuple-elements). A group that is a lone dot/convolution or a lone bitcast-like
 *     reshape stays unfused. Every decision and its reason goes to pc->log, followed by a
 *     per-kind summary.
 *
 * Fusible as loop members: elementwise ops (not map/rng), broadcast, reshape, bitcast,
 * transpose, slice, concatenate, pad, reverse, iota, dynamic-slice, gather, bitcast-convert,
 * reduce-window (pooling: not cheap, so never duplicated nor put in a dot/convolution
 * operand), copy, scalar constants. Requires a renumbered module in dependency order; runs DCE
 * itself at the end (the originals of fused instructions die). */
#include "optimizer.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

enum { OPT_FUSION_MAX = 64, GROUP_CAP = 4 * OPT_FUSION_MAX, MAX_OUTPUTS = 4 };

enum {
  MF_PROLOGUE = 1, /* member feeds the hero dot/convolution's operands */
  MF_REUSED = 2,   /* member's elements are read more than once per output element */
  MF_PASSES = 4,   /* member's value reaches the root one-to-one (elementwise, reshape) */
};

typedef struct Group {
  int id;                    /* index in the groups array */
  bool dead;                 /* merged into another group */
  HInstr *root;              /* the group's (first) output */
  HInstr *hero;              /* reduce, dot or convolution; NULL for loop groups */
  int nout;                  /* outputs: outs[0] = root */
  HInstr *outs[MAX_OUTPUTS]; /* values leaving the group */
  int n;                     /* members */
  HInstr *mem[GROUP_CAP];    /* members, any order */
  uint8_t fl[GROUP_CAP];     /* MF_* per member */
} Group;

typedef struct Fuser {
  HComp *c;
  PassCtx *pc;
  HUsers us;
  int ng, capg;
  Group **g;
  int *gcount; /* per instruction: groups it belongs to */
  int **glist; /* per instruction: their ids */
  int *gcap;
  uint8_t *placed; /* per instruction: member of a group it cannot leave */
} Fuser;

static void logf_(Fuser *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void logf_(Fuser *f, const char *fmt, ...) {
  if (!f->pc->log) return;
  va_list ap;
  va_start(ap, fmt);
  vfprintf(f->pc->log, fmt, ap);
  va_end(ap);
  fputc('\n', f->pc->log);
}

/* ---------------------------------------------------------------- classification */

static bool is_reduce_hero(const HInstr *in) {
  return in->op == OP_REDUCE && in->nops == 2 && hlo_shape_is_array(&in->shape) && !in->nctrl &&
         in->ncalls == 1;
}

static bool is_dot_hero(const HInstr *in) {
  return (in->op == OP_DOT || in->op == OP_CONVOLUTION) && !in->nctrl &&
         hlo_shape_is_array(&in->shape);
}

static bool cheap(const HInstr *in) { return (hlo_op_flags(in->op) & OPF_CHEAP) != 0; }

/* user reads an element of operand more than once per output element */
static bool reuses(const HInstr *user, const HInstr *operand) {
  if (user->op == OP_BROADCAST)
    return hlo_shape_elems(&user->shape) > hlo_shape_elems(&operand->shape);
  return user->op == OP_DOT || user->op == OP_CONVOLUTION || user->op == OP_GATHER ||
         user->op == OP_REDUCE_WINDOW;
}

static bool one_to_one(const HInstr *in) {
  return ((hlo_op_flags(in->op) & OPF_ELEM) && in->op != OP_MAP) || opt_is_bitcast_reshape(in);
}

/* ---------------------------------------------------------------- groups */

static int member_pos(const Group *g, const HInstr *in) {
  for (int i = 0; i < g->n; i++)
    if (g->mem[i] == in) return i;
  return -1;
}

static void note_member(Fuser *f, HInstr *in, int gid) {
  int i = in->idx;
  for (int k = 0; k < f->gcount[i]; k++)
    if (f->glist[i][k] == gid) return;
  if (f->gcount[i] == f->gcap[i]) {
    int cap = f->gcap[i] ? 2 * f->gcap[i] : 4;
    int *n = hlo_arena_alloc(f->pc->scratch, sizeof(int) * (size_t)cap);
    if (f->gcount[i]) memcpy(n, f->glist[i], sizeof(int) * (size_t)f->gcount[i]);
    f->glist[i] = n;
    f->gcap[i] = cap;
  }
  f->glist[i][f->gcount[i]++] = gid;
}

static void forget_member(Fuser *f, HInstr *in, int gid) {
  int i = in->idx;
  for (int k = 0; k < f->gcount[i]; k++)
    if (f->glist[i][k] == gid) {
      f->glist[i][k] = f->glist[i][--f->gcount[i]];
      return;
    }
}

static Group *new_group(Fuser *f, HInstr *root) {
  if (f->ng == f->capg) {
    int cap = f->capg ? 2 * f->capg : 64;
    Group **n = hlo_arena_alloc(f->pc->scratch, sizeof(Group *) * (size_t)cap);
    if (f->ng) memcpy(n, f->g, sizeof(Group *) * (size_t)f->ng);
    f->g = n;
    f->capg = cap;
  }
  Group *g = hlo_arena_alloc(f->pc->scratch, sizeof *g);
  g->id = f->ng;
  f->g[f->ng++] = g;
  g->root = root;
  g->nout = 1;
  g->outs[0] = root;
  g->mem[0] = root;
  g->fl[0] = one_to_one(root) ? MF_PASSES : 0;
  g->n = 1;
  note_member(f, root, g->id);
  f->placed[root->idx] = 1;
  if (is_reduce_hero(root) || is_dot_hero(root)) g->hero = root;
  return g;
}

static const char *kind_of(const Group *g) {
  if (!g->hero) return "kLoop";
  return g->hero->op == OP_REDUCE ? "kInput" : "kOutput";
}

/* ---------------------------------------------------------------- phase A: epilogues */

/* The reduction that alone reads v, the value of convolution d's epilogue, when it may join
 * d's group as its root: a sum, maximum or minimum (of v's type, a scalar init) over output
 * dimensions other than the feature, keeping at most FUSION_REDUCE_KEEP elements and at most
 * 1/8 of v's (a global average or max pool after conv, batch norm, relu), of an f32
 * convolution with two spatial dimensions and no grouping. The CPU target then
 * reduces each block of the product while it is in cache, and the convolution's output is
 * never written. */
enum { FUSION_REDUCE_KEEP = 1 << 16 };
static HInstr *reduce_reader(Fuser *f, const HInstr *d, const HInstr *v) {
  /* the convolutions the CPU's implicit GEMM takes (others would reduce through the generic
     kernels, an elemental convolution inside a reduction) */
  if (d->op != OP_CONVOLUTION || !d->conv || d->conv->in_sp.n != 2 || d->feature_groups != 1 ||
      d->batch_groups != 1 || d->shape.dt != DT_F32 || v == f->c->root || f->us.n[v->idx] != 1)
    return NULL;
  HInstr *r = f->us.list[v->idx][0];
  if (!is_reduce_hero(r) || f->placed[r->idx] || r->ops[0] != v || r->ops[1] == v ||
      r->ops[1]->shape.rank != 0 || !hlo_dtype_is_float(v->shape.dt) ||
      r->shape.dt != v->shape.dt || !hlo_comp_identity(r->calls[0], v->shape.dt, NULL))
    return NULL;
  if (opt_ilist_has(&r->dims, d->conv->out_feat)) return NULL;
  int64_t keep = hlo_shape_elems(&r->shape);
  return keep <= FUSION_REDUCE_KEEP && keep * 8 <= hlo_shape_elems(&v->shape) ? r : NULL;
}

static void grow_epilogue(Fuser *f, HInstr *d) {
  HComp *c = f->c;
  int n = c->ninstrs;
  Group *g = new_group(f, d);
  uint8_t *state = hlo_arena_alloc(f->pc->scratch, (size_t)n); /* 1 member, 2 tainted */
  int *ext = hlo_arena_alloc(f->pc->scratch, sizeof(int) * (size_t)n);
  state[d->idx] = 1;
  ext[d->idx] = f->us.n[d->idx] + (d == c->root);
  int outputs = ext[d->idx] > 0, best = 1;
  int reach = d->idx;
  for (int k = 0; k < f->us.n[d->idx]; k++)
    reach = reach > f->us.list[d->idx][k]->idx ? reach : f->us.list[d->idx][k]->idx;
  for (int j = d->idx + 1; j <= reach && j < n && g->n < OPT_FUSION_MAX; j++) {
    HInstr *u = c->instrs[j];
    bool touches = false, blocked = false;
    for (int k = 0; k < u->nops; k++) {
      uint8_t s = state[u->ops[k]->idx];
      touches |= s != 0;
      blocked |= s == 2;
    }
    if (!touches) continue;
    bool ok = !blocked && !f->placed[j] && (hlo_op_flags(u->op) & OPF_ELEM) && u->op != OP_MAP &&
              opt_loop_fusible(u) && u->shape.rank == d->shape.rank && !u->nctrl;
    for (int k = 0; ok && k < d->shape.rank; k++)
      ok = u->shape.dims[k] == d->shape.dims[k];
    if (!ok) {
      state[j] = 2;
      continue;
    }
    state[j] = 1;
    g->mem[g->n] = u;
    g->fl[g->n++] = MF_PASSES;
    for (int k = 0; k < u->nops; k++) {
      HInstr *o = u->ops[k];
      if (state[o->idx] == 1 && --ext[o->idx] == 0) outputs--;
    }
    ext[j] = f->us.n[j] + (u == c->root);
    if (ext[j] > 0) outputs++;
    for (int k = 0; k < f->us.n[j]; k++)
      reach = reach > f->us.list[j][k]->idx ? reach : f->us.list[j][k]->idx;
    if (outputs == 1 && ext[j] > 0) best = g->n;
  }
  if (best > 1 && d->op == OP_CONVOLUTION && f->pc->opts->conv_epilogue_to_reduce) {
    /* the target's convolution writes its raw result anyway: an epilogue read only by
       reductions is cheaper inside them (one pass over the raw result, no activation) */
    HInstr *r = g->mem[best - 1];
    bool only_reduces = f->us.n[r->idx] > 0 && r != c->root;
    for (int k = 0; k < f->us.n[r->idx]; k++)
      only_reduces &= f->us.list[r->idx][k]->op == OP_REDUCE;
    bool all_cheap = r != c->root;
    for (int i = 1; i < best; i++)
      all_cheap &= cheap(g->mem[i]);
    if (only_reduces) {
      logf_(f,
            "epilogue: %s (%s) leaves its %d elementwise consumer(s) up to %s to the reduction(s) "
            "reading them",
            d->name, hlo_op_name(d->op), best - 1, r->name);
      best = 1;
    } else if (all_cheap) {
      logf_(f,
            "epilogue: %s (%s) leaves its %d cheap elementwise consumer(s) up to %s to its "
            "readers' fusions",
            d->name, hlo_op_name(d->op), best - 1, r->name);
      best = 1;
    }
  }
  if (!f->pc->opts->conv_epilogue_to_reduce && g->n >= best && best < OPT_FUSION_MAX) {
    HInstr *r = reduce_reader(f, d, g->mem[best - 1]);
    if (r) {
      logf_(f,
            "epilogue: %s (%s) ends in %s (reduce to %lld of %lld elements), which joins its group",
            d->name, hlo_op_name(d->op), r->name, (long long)hlo_shape_elems(&r->shape),
            (long long)hlo_shape_elems(&d->shape));
      g->mem[best] = r;
      g->fl[best++] = 0;
    }
  }
  g->n = best;
  g->root = g->mem[best - 1];
  g->outs[0] = g->root;
  for (int i = 0; i < g->n; i++) {
    note_member(f, g->mem[i], g->id);
    f->placed[g->mem[i]->idx] = 1;
  }
  if (best > 1)
    logf_(f, "epilogue: %s (%s) takes %d elementwise consumer(s) up to %s", d->name,
          hlo_op_name(d->op), best - 1, g->root->name);
}

/* ---------------------------------------------------------------- phase B: producers */

/* The input (operand 0) of convolution hero is a transpose moving the minor dimension of a
 * large value that a fusible producer computes for it alone: with a target that reads
 * convolution operands in place (not staged), the transpose roots a loop group of its own
 * that the producer joins, so the value is written once in the convolution's layout (the CPU
 * target tiles such kernels) instead of being gathered across the other layout by every
 * convolution reading it. (Kernels, operand 1, are packed whole by the convolution anyway.) */
static bool transposed_by_producer(Fuser *f, const HInstr *p, const HInstr *hero) {
  if (hero->ops[0] != p) return false;
  if (f->pc->opts->conv_operands_staged || p->op != OP_TRANSPOSE ||
      hlo_shape_elems(&p->shape) < ((int64_t)1 << 16))
    return false;
  int r = p->shape.rank;
  if (r < 2 || p->dims.v[r - 1] == r - 1) return false;
  const HInstr *q = p->ops[0];
  return q->op != OP_PARAMETER && q->op != OP_CONSTANT && opt_loop_fusible(q) &&
         f->us.n[q->idx] == 1 && q != f->c->root;
}

/* With OptOpts.row_chains (a target with row kernels for chained reductions): reduce p may join
 * g although g reads it through a broadcast (once per row element) or already has a reduce hero,
 * when every member reading p broadcasts it back over the reduced dims (a row value), g writes
 * one value of p's operand dims, and g's hero (if any) reduces the same dims of the same shape:
 * softmax's max, its sum of exp(x - max) and the division become one row kernel. */
static bool row_chain(Fuser *f, const HInstr *p, const Group *g) {
  if (!f->pc->opts->row_chains || g->nout != 1) return false;
  const Shape *os = &p->ops[0]->shape;
  if (!hlo_shape_same_dims(&g->root->shape, os)) return false;
  int64_t kept = hlo_shape_elems(&p->shape);
  if (!kept || hlo_shape_elems(os) / kept > 8192) return false;
  if (g->hero) {
    const HInstr *h = g->hero;
    if (h->op != OP_REDUCE || !hlo_shape_same_dims(&h->ops[0]->shape, os) || h->dims.n != p->dims.n)
      return false;
    for (int j = 0; j < p->dims.n; j++)
      if (h->dims.v[j] != p->dims.v[j]) return false;
  }
  for (int k = 0; k < f->us.n[p->idx]; k++) {
    const HInstr *u = f->us.list[p->idx][k];
    if (member_pos(g, u) < 0) continue;
    if (!opt_is_row_broadcast(u, p)) return false;
  }
  return true;
}

/* Can p join g? Sets *flags for the new member; reason on failure. */
static bool can_join(Fuser *f, HInstr *p, Group *g, bool dup, uint8_t *flags, const char **why) {
  if (g->n >= OPT_FUSION_MAX) return *why = "group is at the size cap", false;
  uint8_t fl = MF_PASSES;
  bool any = false;
  for (int k = 0; k < f->us.n[p->idx]; k++) {
    HInstr *u = f->us.list[p->idx][k];
    int pos = member_pos(g, u);
    if (pos < 0) continue;
    any = true;
    if (u == g->hero && u->op != OP_REDUCE) fl |= MF_PROLOGUE;
    if (g->fl[pos] & MF_PROLOGUE) fl |= MF_PROLOGUE;
    if ((g->fl[pos] & (MF_REUSED | MF_PROLOGUE)) || reuses(u, p)) fl |= MF_REUSED;
    if (!(g->fl[pos] & MF_PASSES) || !one_to_one(u)) fl &= (uint8_t)~MF_PASSES;
  }
  if (!any) return *why = "no user in the group", false;
  if (!one_to_one(p)) fl &= (uint8_t)~MF_PASSES;
  if (is_reduce_hero(p) && !dup && row_chain(f, p, g)) {
    *flags = 0;
    return true;
  }
  if (is_reduce_hero(p)) {
    if (g->hero) return *why = "the group already has a hero (two reductions or reduce+dot)", false;
    if (dup) return *why = "a reduction is never duplicated", false;
    bool passes = true;
    for (int k = 0; k < f->us.n[p->idx]; k++) {
      int pos = member_pos(g, f->us.list[p->idx][k]);
      if (pos >= 0 && (!(g->fl[pos] & MF_PASSES) || !one_to_one(g->mem[pos]))) passes = false;
    }
    if (!passes)
      return *why = "the reduction's value would be read more than once per output element", false;
    *flags = 0;
    return true;
  }
  if (is_dot_hero(p)) return *why = "dot/convolution only fuse with their own epilogue", false;
  if (!opt_loop_fusible(p)) return *why = "not loop-fusible", false;
  if (dup && !cheap(p)) return *why = "expensive op would be duplicated", false;
  if ((fl & MF_PROLOGUE) && !cheap(p))
    return *why = "expensive op in a dot/convolution operand would be recomputed", false;
  if ((fl & MF_PROLOGUE) && g->hero && g->hero->op == OP_CONVOLUTION &&
      f->pc->opts->conv_operands_staged && (hlo_op_flags(p->op) & OPF_ELEM) &&
      p->op != OP_CONVERT && p->op != OP_COPY && hlo_shape_elems(&p->shape) >= ((int64_t)1 << 20))
    return *why = "large arithmetic in a convolution operand: materialized once by its own kernel, "
                  "read in place",
           false;
  if (dup && (fl & MF_PROLOGUE) && g->hero && g->hero->op == OP_DOT &&
      f->pc->opts->dot_operands_staged)
    return *why = "an operand of several products: written once by its own kernel, read in place "
                  "(the target stages computed dot operands)",
           false;
  if ((fl & MF_REUSED) && !cheap(p))
    return *why = "expensive op would be recomputed behind a broadcast/gather", false;
  if ((fl & MF_PROLOGUE) && g->hero && g->hero->op == OP_CONVOLUTION &&
      transposed_by_producer(f, p, g->hero))
    return *why =
               "a transposed operand: its producer's kernel writes it in the convolution's layout",
           false;
  *flags = fl;
  return true;
}

static void add_member(Fuser *f, Group *g, HInstr *p, uint8_t fl) {
  if (is_reduce_hero(p) && !g->hero) g->hero = p; /* a row chain's first joiner stays its hero */
  g->mem[g->n] = p;
  g->fl[g->n++] = fl;
  note_member(f, p, g->id);
}

static void place_producer(Fuser *f, HInstr *p) {
  HComp *c = f->c;
  if (f->placed[p->idx] || p->op == OP_PARAMETER) return;
  bool fusible = opt_loop_fusible(p) || is_reduce_hero(p);
  if (!fusible) return;
  /* consumer groups */
  int gids[64], ng = 0;
  const char *why = NULL;
  if (p == c->root) why = "it is the computation's result";
  for (int k = 0; k < f->us.n[p->idx] && !why; k++) {
    HInstr *u = f->us.list[p->idx][k];
    if (f->gcount[u->idx] == 0) {
      why = "a user is not fused";
      break;
    }
    for (int j = 0; j < f->gcount[u->idx] && !why; j++) {
      int id = f->glist[u->idx][j], t = 0;
      while (t < ng && gids[t] != id)
        t++;
      if (t == ng) {
        if (ng == 64)
          why = "too many consumer groups";
        else
          gids[ng++] = id;
      }
    }
  }
  if (!why && ng == 0) why = "no users";
  uint8_t fls[64];
  for (int t = 0; t < ng && !why; t++)
    if (!can_join(f, p, f->g[gids[t]], ng > 1, &fls[t], &why)) break;
  if (why) {
    if (p->op == OP_CONSTANT) return; /* scalar constant used outside: stays a constant */
    Group *g = new_group(f, p);
    if (f->us.n[p->idx] || p == c->root)
      logf_(f, "separate: %s (%s) roots %s group: %s", p->name, hlo_op_name(p->op), kind_of(g),
            why);
    return;
  }
  for (int t = 0; t < ng; t++) {
    Group *g = f->g[gids[t]];
    add_member(f, g, p, fls[t]);
    if (p->op != OP_CONSTANT)
      logf_(f, "fuse: %s (%s) into %s group of %s%s%s", p->name, hlo_op_name(p->op), kind_of(g),
            g->root->name, ng > 1 ? " (duplicated: cheap)" : "",
            g->hero == p             ? " as its hero"
            : (fls[t] & MF_PROLOGUE) ? " (operand prologue)"
                                     : "");
  }
  f->placed[p->idx] = 1;
}

/* ---------------------------------------------------------------- phase C: multi-output */

/* Does instruction x depend on `on` (through any path)? Backward search bounded by index. */
static bool depends_on(Fuser *f, HInstr *x, HInstr *on, uint8_t *seen, int *stk) {
  if (x == on) return true;
  if (x->idx < on->idx) return false;
  int sp = 0;
  stk[sp++] = x->idx;
  seen[x->idx] = 1;
  bool found = false;
  while (sp && !found) {
    HInstr *y = f->c->instrs[stk[--sp]];
    for (int k = 0; k < y->nops && !found; k++) {
      HInstr *o = y->ops[k];
      if (o == on)
        found = true;
      else if (o->idx > on->idx && !seen[o->idx]) {
        seen[o->idx] = 1;
        stk[sp++] = o->idx;
      }
    }
  }
  return found;
}

/* Some outside operand of group g (other than via outputs of `from`) depends on an output of
 * `from`: merging the two would create a cycle. */
static bool path_between(Fuser *f, const Group *from, const Group *g) {
  int n = f->c->ninstrs;
  uint8_t *seen = hlo_arena_alloc(f->pc->scratch, (size_t)n);
  int *stk = hlo_arena_alloc(f->pc->scratch, sizeof(int) * (size_t)n);
  for (int i = 0; i < g->n; i++) {
    HInstr *m = g->mem[i];
    for (int k = 0; k < m->nops; k++) {
      HInstr *o = m->ops[k];
      if (member_pos(g, o) >= 0) continue;
      bool is_out = false;
      for (int t = 0; t < from->nout; t++)
        is_out |= o == from->outs[t];
      if (is_out) continue;
      for (int t = 0; t < from->nout; t++) {
        memset(seen, 0, (size_t)n);
        if (depends_on(f, o, from->outs[t], seen, stk)) return true;
      }
    }
  }
  return false;
}

static void merge_into(Fuser *f, Group *dst, Group *src) {
  for (int i = 0; i < src->n; i++) {
    HInstr *m = src->mem[i];
    forget_member(f, m, src->id);
    if (member_pos(dst, m) >= 0) continue;
    dst->mem[dst->n] = m;
    dst->fl[dst->n++] = src->fl[i];
    note_member(f, m, dst->id);
  }
  for (int t = 0; t < src->nout; t++)
    dst->outs[dst->nout++] = src->outs[t];
  src->dead = true;
}

/* A member of g reads an output of `from` directly (siblings must be independent). */
static bool uses_output(const Group *from, const Group *g) {
  for (int i = 0; i < g->n; i++)
    for (int k = 0; k < g->mem[i]->nops; k++)
      for (int t = 0; t < from->nout; t++)
        if (g->mem[i]->ops[k] == from->outs[t]) return true;
  return false;
}

static void multi_output(Fuser *f) {
  /* producer-consumer: a loop group's root read by a reduce group over the same space */
  for (int i = 0; i < f->ng; i++) {
    Group *e = f->g[i];
    if (e->dead || e->hero || e->nout != 1) continue;
    HInstr *r = e->root;
    for (int k = 0; k < f->us.n[r->idx]; k++) {
      HInstr *u = f->us.list[r->idx][k];
      Group *s = NULL;
      for (int j = 0; j < f->gcount[u->idx]; j++) {
        Group *cand = f->g[f->glist[u->idx][j]];
        if (!cand->dead && cand != e && cand->hero && cand->hero->op == OP_REDUCE) s = cand;
      }
      if (!s || s->nout >= MAX_OUTPUTS || s->n + e->n > GROUP_CAP - 1) continue;
      if (!hlo_shape_same_dims(&r->shape, &s->hero->ops[0]->shape)) continue;
      /* inside s the value must be read once per element (on the reduce's input side) */
      bool once = true;
      for (int x = 0; x < s->n && once; x++)
        for (int q = 0; q < s->mem[x]->nops && once; q++)
          if (s->mem[x]->ops[q] == r && ((s->fl[x] & MF_REUSED) || reuses(s->mem[x], r) ||
                                         (!one_to_one(s->mem[x]) && s->mem[x] != s->hero)))
            once = false;
      if (!once) continue;
      if (path_between(f, e, s)) {
        logf_(f, "multi-output: %s stays separate from %s: a path leaves and re-enters", r->name,
              s->root->name);
        continue;
      }
      logf_(f, "multi-output: %s (%s) becomes an extra output of the kInput group of %s", r->name,
            hlo_op_name(r->op), s->root->name);
      merge_into(f, s, e);
      break;
    }
  }
  /* siblings: reduce groups with the same reduction shape sharing an outside operand */
  for (int i = 0; i < f->ng; i++) {
    Group *a = f->g[i];
    if (a->dead || !a->hero || a->hero->op != OP_REDUCE) continue;
    for (int j = i + 1; j < f->ng && a->nout < MAX_OUTPUTS; j++) {
      Group *b = f->g[j];
      if (b->dead || !b->hero || b->hero->op != OP_REDUCE || a->nout + b->nout > MAX_OUTPUTS)
        continue;
      if (a->n + b->n > GROUP_CAP - 1) continue;
      const HInstr *ha = a->hero, *hb = b->hero;
      if (!hlo_shape_same_dims(&ha->ops[0]->shape, &hb->ops[0]->shape) ||
          !hlo_shape_same_dims(&ha->shape, &hb->shape) ||
          !hlo_shape_same_dims(&a->root->shape, &b->root->shape) || ha->dims.n != hb->dims.n)
        continue;
      bool dims_eq = true;
      for (int t = 0; t < ha->dims.n; t++)
        dims_eq &= ha->dims.v[t] == hb->dims.v[t];
      if (!dims_eq) continue;
      /* a shared non-scalar outside operand */
      bool shared = false;
      for (int x = 0; x < a->n && !shared; x++)
        for (int k = 0; k < a->mem[x]->nops && !shared; k++) {
          HInstr *o = a->mem[x]->ops[k];
          if (o->shape.rank == 0 || member_pos(a, o) >= 0) continue;
          for (int y = 0; y < b->n && !shared; y++)
            for (int q = 0; q < b->mem[y]->nops && !shared; q++)
              shared = b->mem[y]->ops[q] == o;
        }
      if (!shared || uses_output(a, b) || uses_output(b, a) || path_between(f, a, b) ||
          path_between(f, b, a))
        continue;
      logf_(f, "multi-output: sibling reductions %s and %s read the same input: one kInput fusion",
            a->root->name, b->root->name);
      merge_into(f, a, b);
    }
  }
}

/* ---------------------------------------------------------------- phase D: building */

static int cmp_idx(const void *x, const void *y) {
  const HInstr *a = *(HInstr *const *)x, *b = *(HInstr *const *)y;
  return a->idx - b->idx;
}

typedef struct Builder {
  uint8_t *ismem; /* per instruction index: member of the group being built */
  HInstr **map;   /* per instruction index: its copy or parameter */
  int *touched;   /* indices to clear after the build */
  int ntouched;
} Builder;

static void build(Fuser *f, Builder *b, Group *g, int *counts) {
  HComp *c = f->c;
  HModule *m = c->mod;
  if (g->n == 1 && g->nout == 1) {
    HInstr *r = g->root;
    if (is_dot_hero(r) || opt_is_bitcast_reshape(r) || r->op == OP_CONSTANT) return;
  }
  qsort(g->mem, (size_t)g->n, sizeof(HInstr *), cmp_idx);
  HComp *fc = hlo_comp_new(m, hlo_module_unique_name(m, "fused_computation"));
  fc->is_fusion = true;
  b->ntouched = 0;
  for (int i = 0; i < g->n; i++) {
    b->ismem[g->mem[i]->idx] = 1;
    b->touched[b->ntouched++] = g->mem[i]->idx;
  }
  int cap = 8;
  for (int i = 0; i < g->n; i++)
    cap += g->mem[i]->nops;
  HInstr **ext = hlo_arena_alloc(f->pc->scratch, sizeof(HInstr *) * (size_t)cap);
  int next = 0;
  for (int i = 0; i < g->n; i++) {
    HInstr *in = g->mem[i];
    HInstr **o = hlo_arena_alloc(f->pc->scratch, sizeof(HInstr *) * (size_t)(in->nops + 1));
    for (int k = 0; k < in->nops; k++) {
      HInstr *x = in->ops[k];
      if (!b->map[x->idx]) {
        if (x->op == OP_CONSTANT && x->shape.rank == 0 && x->literal) {
          b->map[x->idx] = hlo_instr_clone(fc, x, NULL); /* scalars live inside */
        } else {
          HLO_ASSERT(!b->ismem[x->idx]); /* members come in dependency order */
          b->map[x->idx] = opt_new_param(fc, &x->shape, next);
          ext[next++] = x;
        }
        b->touched[b->ntouched++] = x->idx;
      }
      o[k] = b->map[x->idx];
    }
    b->map[in->idx] = hlo_instr_clone(fc, in, o);
  }
  HInstr *froot;
  if (g->nout == 1) {
    froot = b->map[g->root->idx];
  } else {
    HInstr *outs[MAX_OUTPUTS];
    Shape shapes[MAX_OUTPUTS];
    for (int t = 0; t < g->nout; t++) {
      outs[t] = b->map[g->outs[t]->idx];
      shapes[t] = outs[t]->shape;
    }
    Shape ts = hlo_shape_tuple(m->arena, g->nout, shapes);
    froot = opt_new(fc, OP_TUPLE, "tuple", &ts, g->nout, outs);
  }
  for (int i = 0; i < b->ntouched; i++) {
    b->ismem[b->touched[i]] = 0;
    b->map[b->touched[i]] = NULL;
  }
  fc->root = froot;
  opt_comp_toposort(fc, f->pc->scratch);
  HInstr *fu = opt_new(c, OP_FUSION, "fusion", &froot->shape, next, ext);
  hlo_instr_set_calls(fu, 1, &fc);
  FusionKind kind = !g->hero ? FK_LOOP : g->hero->op == OP_REDUCE ? FK_INPUT : FK_OUTPUT;
  fu->fusion_kind = kind;
  counts[kind]++;
  if (g->nout > 1) counts[FK_NONE]++;
  if (g->nout == 1) {
    hlo_instr_replace_uses(g->root, fu);
  } else {
    for (int t = 0; t < g->nout; t++) {
      HInstr *gte =
          opt_new(c, OP_GET_TUPLE_ELEMENT, "get-tuple-element", &g->outs[t]->shape, 1, &fu);
      gte->tuple_index = t;
      hlo_instr_replace_uses(g->outs[t], gte);
    }
  }
  logf_(f, "built %s (%s, %d instruction(s), %d parameter(s)%s) for %s", fu->name,
        hlo_fusion_kind_name(kind), g->n, next, g->nout > 1 ? ", multi-output" : "", g->root->name);
}

static bool fuse_comp(HComp *c, PassCtx *pc, int *counts) {
  hlo_comp_renumber(c);
  int n = c->ninstrs;
  Fuser f = {.c = c, .pc = pc};
  f.us = hlo_comp_users(pc->scratch, c);
  f.gcount = hlo_arena_alloc(pc->scratch, sizeof(int) * (size_t)(n + 1));
  f.gcap = hlo_arena_alloc(pc->scratch, sizeof(int) * (size_t)(n + 1));
  f.glist = hlo_arena_alloc(pc->scratch, sizeof(int *) * (size_t)(n + 1));
  f.placed = hlo_arena_alloc(pc->scratch, (size_t)n + 1);
  if (pc->log) fprintf(pc->log, "-- computation %s (%d instructions)\n", c->name, n);
  for (int i = 0; i < n; i++)
    if (is_dot_hero(c->instrs[i]) && !f.placed[i]) grow_epilogue(&f, c->instrs[i]);
  for (int i = n - 1; i >= 0; i--)
    place_producer(&f, c->instrs[i]);
  multi_output(&f);
  /* instructions appended while building (fusions, get-tuple-elements) get indices >= n */
  int cap = n + f.ng * (MAX_OUTPUTS + 1) + 8;
  Builder b = {hlo_arena_alloc(pc->scratch, (size_t)cap),
               hlo_arena_alloc(pc->scratch, sizeof(HInstr *) * (size_t)cap),
               hlo_arena_alloc(pc->scratch, sizeof(int) * (size_t)(cap + GROUP_CAP * 8)), 0};
  int built = counts[FK_LOOP] + counts[FK_INPUT] + counts[FK_OUTPUT];
  for (int i = 0; i < f.ng; i++)
    if (!f.g[i]->dead) build(&f, &b, f.g[i], counts);
  return counts[FK_LOOP] + counts[FK_INPUT] + counts[FK_OUTPUT] != built;
}

bool opt_fusion(HModule *m, PassCtx *pc) {
  int nc = m->ncomps;
  HComp **comps = hlo_arena_memdup(pc->scratch, m->comps, sizeof(HComp *) * (size_t)(nc ? nc : 1));
  bool *flow = hlo_arena_alloc(pc->scratch, (size_t)nc + 1);
  for (int i = 0; i < nc; i++) {
    comps[i]->idx = i;
    if (comps[i] == m->entry) flow[i] = true;
  }
  for (int i = 0; i < nc; i++)
    for (int j = 0; j < comps[i]->ninstrs; j++) {
      HInstr *in = comps[i]->instrs[j];
      if (in->op == OP_WHILE || in->op == OP_CONDITIONAL || in->op == OP_CALL)
        for (int k = 0; k < in->ncalls; k++)
          flow[in->calls[k]->idx] = true;
    }
  if (pc->log) fprintf(pc->log, "== fusion\n");
  int counts[5] = {0};
  bool changed = false;
  for (int i = 0; i < nc; i++)
    if (flow[i] && !comps[i]->is_fusion) {
      bool ch = fuse_comp(comps[i], pc, counts);
      if (ch) opt_comp_toposort(comps[i], pc->scratch);
      changed |= ch;
    }
  if (!changed) return false;
  opt_dce(m, pc);
  opt_module_sort_comps(m, pc->scratch);
  hlo_module_renumber(m);
  if (pc->log)
    fprintf(pc->log, "summary: %d fusion(s): kLoop %d, kInput %d, kOutput %d, multi-output %d\n",
            counts[FK_LOOP] + counts[FK_INPUT] + counts[FK_OUTPUT], counts[FK_LOOP],
            counts[FK_INPUT], counts[FK_OUTPUT], counts[FK_NONE]);
  return true;
}
