/* hlo/module.c: building and editing modules, computations and instructions.
 *
 * All nodes are allocated in the module's arena. Instruction arrays grow by doubling (the old
 * array stays in the arena until the module is freed). Positions (idx) and the parameter
 * table are derived data, recomputed by hlo_comp_renumber after edits. hlo_comp_postorder is
 * the one dependency walk the passes and the scheduler share: an iterative depth-first
 * post-order (explicit stack, so deep graphs cannot overflow the C stack) over operands and
 * control predecessors. */
#include "hlo.h"

#include <math.h>
#include <string.h>

static void nameset_add(HModule *m, const char *name);

HModule *hlo_module_new(const char *name, const char *file) {
  HArena *a = hlo_arena_new();
  HModule *m = hlo_arena_alloc(a, sizeof *m);
  m->arena = a;
  m->name = hlo_arena_strdup(a, name ? name : "module");
  m->file = hlo_arena_strdup(a, file ? file : "<input>");
  m->next_uid = 1;
  return m;
}

void hlo_module_free(HModule *m) {
  if (m) hlo_arena_free(m->arena);
}

HComp *hlo_comp_new(HModule *m, const char *name) {
  HComp *c = hlo_arena_alloc(m->arena, sizeof *c);
  c->name = hlo_arena_strdup(m->arena, name);
  nameset_add(m, c->name);
  c->mod = m;
  c->uid = m->next_uid++;
  m->comps = hlo_arena_grow(m->arena, m->comps, m->ncomps, &m->cap, 8, sizeof(HComp *));
  c->idx = m->ncomps;
  m->comps[m->ncomps++] = c;
  return c;
}

HComp *hlo_module_find_comp(const HModule *m, const char *name) {
  for (int i = 0; i < m->ncomps; i++)
    if (!strcmp(m->comps[i]->name, name)) return m->comps[i];
  return NULL;
}

HInstr *hlo_instr_new(HComp *c, HOp op, const char *name, const Shape *shape, int nops,
                      HInstr *const *ops) {
  HArena *a = c->mod->arena;
  HInstr *in = hlo_arena_alloc(a, sizeof *in);
  in->op = op;
  in->name = hlo_arena_strdup(a, name);
  nameset_add(c->mod, in->name);
  if (shape) hlo_shape_copy(a, &in->shape, shape);
  in->nops = nops;
  in->ops = hlo_arena_alloc(a, sizeof(HInstr *) * (size_t)(nops ? nops : 1));
  for (int i = 0; i < nops; i++)
    in->ops[i] = ops[i];
  in->parent = c;
  in->uid = c->mod->next_uid++;
  in->feature_groups = 1;
  in->batch_groups = 1;
  c->instrs = hlo_arena_grow(a, c->instrs, c->ninstrs, &c->cap, 16, sizeof(HInstr *));
  in->idx = c->ninstrs;
  c->instrs[c->ninstrs++] = in;
  return in;
}

void hlo_instr_set_calls(HInstr *in, int n, HComp *const *calls) {
  HArena *a = in->parent->mod->arena;
  in->ncalls = n;
  in->calls = hlo_arena_alloc(a, sizeof(HComp *) * (size_t)(n ? n : 1));
  for (int i = 0; i < n; i++)
    in->calls[i] = calls[i];
}

void hlo_comp_renumber(HComp *c) {
  int np = 0;
  for (int i = 0; i < c->ninstrs; i++) {
    HInstr *in = c->instrs[i];
    in->idx = i;
    in->parent = c;
    if (in->op == OP_PARAMETER && in->param_num + 1 > np) np = (int)in->param_num + 1;
  }
  c->nparams = np;
  c->params = hlo_arena_alloc(c->mod->arena, sizeof(HInstr *) * (size_t)(np ? np : 1));
  for (int i = 0; i < c->ninstrs; i++) {
    HInstr *in = c->instrs[i];
    if (in->op == OP_PARAMETER && in->param_num >= 0 && !c->params[in->param_num])
      c->params[in->param_num] = in;
  }
}

static void fill_layout(Shape *s) {
  if (s->dt == DT_TUPLE) {
    for (int i = 0; i < s->ntuple; i++)
      fill_layout(&s->tuple[i]);
  } else if (!s->has_layout && s->dt != DT_TOKEN) {
    hlo_shape_set_default_layout(s);
  }
}

void hlo_module_fill_layouts(HModule *m) {
  for (int c = 0; c < m->ncomps; c++)
    for (int i = 0; i < m->comps[c]->ninstrs; i++)
      fill_layout(&m->comps[c]->instrs[i]->shape);
}

void hlo_module_renumber(HModule *m) {
  for (int i = 0; i < m->ncomps; i++) {
    m->comps[i]->idx = i;
    hlo_comp_renumber(m->comps[i]);
  }
}

/* Open-addressing hash set of the names in use, so that fresh names cost O(1). */
struct HNameSet {
  size_t cap;        /* slots, a power of two */
  size_t n;          /* names stored */
  const char **slot; /* NULL = empty */
};

uint64_t hlo_hash_bytes(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++)
    h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

static uint64_t name_hash(const char *s) { return hlo_hash_bytes(HLO_HASH_START, s, strlen(s)); }

static bool nameset_has(const struct HNameSet *ns, const char *name) {
  for (size_t i = name_hash(name) & (ns->cap - 1);; i = (i + 1) & (ns->cap - 1)) {
    if (!ns->slot[i]) return false;
    if (!strcmp(ns->slot[i], name)) return true;
  }
}

static void nameset_add(HModule *m, const char *name) {
  struct HNameSet *ns = m->names;
  if (!ns) return;
  if (2 * (ns->n + 1) > ns->cap) {
    struct HNameSet grown = {ns->cap * 2, 0,
                             hlo_arena_alloc(m->arena, sizeof(char *) * ns->cap * 2)};
    for (size_t i = 0; i < ns->cap; i++)
      if (ns->slot[i]) {
        size_t j = name_hash(ns->slot[i]) & (grown.cap - 1);
        while (grown.slot[j])
          j = (j + 1) & (grown.cap - 1);
        grown.slot[j] = ns->slot[i];
        grown.n++;
      }
    *ns = grown;
  }
  size_t i = name_hash(name) & (ns->cap - 1);
  while (ns->slot[i]) {
    if (!strcmp(ns->slot[i], name)) return;
    i = (i + 1) & (ns->cap - 1);
  }
  ns->slot[i] = name;
  ns->n++;
}

static bool name_used(HModule *m, const char *name) {
  if (!m->names) {
    m->names = hlo_arena_alloc(m->arena, sizeof *m->names);
    m->names->cap = 1024;
    m->names->slot = hlo_arena_alloc(m->arena, sizeof(char *) * 1024);
    for (int i = 0; i < m->ncomps; i++) {
      const HComp *c = m->comps[i];
      nameset_add(m, c->name);
      for (int j = 0; j < c->ninstrs; j++)
        nameset_add(m, c->instrs[j]->name);
    }
  }
  return nameset_has(m->names, name);
}

const char *hlo_module_unique_name(HModule *m, const char *base) {
  /* strip a trailing ".N" so that names stay short: add.3 -> add.N */
  size_t n = strlen(base);
  size_t k = n;
  while (k > 0 && base[k - 1] >= '0' && base[k - 1] <= '9')
    k--;
  if (k > 0 && k < n && base[k - 1] == '.') n = k - 1;
  char buf[256];
  if (n > 200) n = 200;
  for (int64_t i = m->next_name + 1;; i++) {
    snprintf(buf, sizeof buf, "%.*s.%lld", (int)n, base, (long long)i);
    if (!name_used(m, buf)) {
      m->next_name = i;
      const char *s = hlo_arena_strdup(m->arena, buf);
      nameset_add(m, s);
      return s;
    }
  }
}

const char *hlo_module_name_as(HModule *m, const char *want) {
  if (name_used(m, want)) return hlo_module_unique_name(m, want);
  const char *s = hlo_arena_strdup(m->arena, want);
  nameset_add(m, s);
  return s;
}

void hlo_instr_replace_uses(HInstr *from, HInstr *to) {
  HComp *c = from->parent;
  for (int i = 0; i < c->ninstrs; i++) {
    HInstr *u = c->instrs[i];
    if (u == to) continue;
    for (int k = 0; k < u->nops; k++)
      if (u->ops[k] == from) u->ops[k] = to;
  }
  if (c->root == from) c->root = to;
}

HUsers hlo_comp_users(HArena *scratch, HComp *c) {
  HUsers u;
  int n = c->ninstrs;
  u.n = hlo_arena_alloc(scratch, sizeof(int) * (size_t)(n ? n : 1));
  u.list = hlo_arena_alloc(scratch, sizeof(HInstr **) * (size_t)(n ? n : 1));
  for (int i = 0; i < n; i++)
    c->instrs[i]->idx = i;
  for (int i = 0; i < n; i++)
    for (int k = 0; k < c->instrs[i]->nops; k++)
      u.n[c->instrs[i]->ops[k]->idx]++;
  for (int i = 0; i < n; i++) {
    u.list[i] = hlo_arena_alloc(scratch, sizeof(HInstr *) * (size_t)(u.n[i] ? u.n[i] : 1));
    u.n[i] = 0;
  }
  for (int i = 0; i < n; i++) {
    HInstr *in = c->instrs[i];
    for (int k = 0; k < in->nops; k++) {
      int j = in->ops[k]->idx;
      u.list[j][u.n[j]++] = in;
    }
  }
  return u;
}

HInstr *hlo_instr_clone(HComp *dst, const HInstr *src, HInstr *const *ops) {
  HModule *m = dst->mod;
  HInstr *in = hlo_instr_new(dst, src->op, hlo_module_unique_name(m, src->name), &src->shape,
                             src->nops, ops);
  /* copy every attribute; attribute structs are immutable once built, so sharing is safe */
  HInstr keep = *in;
  *in = *src;
  in->name = keep.name;
  in->shape = keep.shape;
  in->ops = keep.ops;
  in->nops = keep.nops;
  in->parent = dst;
  in->idx = keep.idx;
  in->uid = keep.uid;
  in->nctrl = 0;
  in->ctrl = NULL;
  in->aux = NULL;
  if (src->ncalls) hlo_instr_set_calls(in, src->ncalls, src->calls);
  return in;
}

void hlo_comp_filter(HComp *c, const bool *keep) {
  int k = 0;
  for (int i = 0; i < c->ninstrs; i++)
    if (keep[i]) c->instrs[k++] = c->instrs[i];
  c->ninstrs = k;
  hlo_comp_renumber(c);
}

static void mark_reachable(HComp *c, bool *seen) {
  if (seen[c->idx]) return;
  seen[c->idx] = true;
  for (int i = 0; i < c->ninstrs; i++)
    for (int k = 0; k < c->instrs[i]->ncalls; k++)
      mark_reachable(c->instrs[i]->calls[k], seen);
}

bool hlo_module_remove_unreachable(HModule *m) {
  for (int i = 0; i < m->ncomps; i++)
    m->comps[i]->idx = i;
  bool *seen = hlo_arena_alloc(m->arena, (size_t)m->ncomps + 1);
  mark_reachable(m->entry, seen);
  int k = 0;
  for (int i = 0; i < m->ncomps; i++)
    if (seen[i]) m->comps[k++] = m->comps[i];
  bool changed = k != m->ncomps;
  m->ncomps = k;
  for (int i = 0; i < m->ncomps; i++)
    m->comps[i]->idx = i;
  return changed;
}

/* Whether d is an instruction of c at its recorded position (operands elsewhere are the
 * verifier's to report). */
static bool po_in_comp(const HComp *c, const HInstr *d) {
  return d->parent == c && d->idx >= 0 && d->idx < c->ninstrs && c->instrs[d->idx] == d;
}

/* Dependency k of in: operands first, then control predecessors. */
static HInstr *po_dep(const HInstr *in, int k) {
  return k < in->nops ? in->ops[k] : in->ctrl[k - in->nops];
}

/* in's dependencies by decreasing weight (a stable insertion sort: ties keep their order). */
static HInstr **po_sorted_deps(HArena *a, const HInstr *in, const int64_t *weight) {
  int nd = in->nops + in->nctrl;
  HInstr **d = hlo_arena_alloc(a, sizeof(HInstr *) * (size_t)(nd ? nd : 1));
  for (int j = 0; j < nd; j++)
    d[j] = po_dep(in, j);
  for (int x = 1; x < nd; x++)
    for (int y = x; y > 0 && weight[d[y]->idx] > weight[d[y - 1]->idx]; y--) {
      HInstr *t = d[y];
      d[y] = d[y - 1];
      d[y - 1] = t;
    }
  return d;
}

void hlo_comp_postorder(HComp *c, HArena *scratch, const HInstr *first, const int64_t *weight,
                        HInstr **order) {
  int n = c->ninstrs;
  if (n == 0) return;
  for (int i = 0; i < n; i++)
    c->instrs[i]->idx = i;
  uint8_t *state = hlo_arena_alloc(scratch, (size_t)n); /* 0 unvisited, 1 on stack, 2 emitted */
  HInstr **stk = hlo_arena_alloc(scratch, sizeof(HInstr *) * (size_t)n);
  int *next = hlo_arena_alloc(scratch, sizeof(int) * (size_t)n); /* next dependency to enter */
  HInstr ***deps = weight ? hlo_arena_alloc(scratch, sizeof(HInstr **) * (size_t)n) : NULL;
  int norder = 0;
  for (int s = -1; s < n; s++) {
    const HInstr *start = s < 0 ? first : c->instrs[s];
    if (!start || !po_in_comp(c, start) || state[start->idx]) continue;
    int sp = 0;
    stk[sp] = c->instrs[start->idx];
    next[sp++] = 0;
    state[start->idx] = 1;
    while (sp) {
      HInstr *in = stk[sp - 1];
      int k = next[sp - 1]++;
      if (k >= in->nops + in->nctrl) {
        state[in->idx] = 2;
        order[norder++] = in;
        sp--;
        continue;
      }
      if (weight && !deps[in->idx]) deps[in->idx] = po_sorted_deps(scratch, in, weight);
      HInstr *d = weight ? deps[in->idx][k] : po_dep(in, k);
      if (!po_in_comp(c, d) || state[d->idx]) continue; /* emitted, or a cycle */
      state[d->idx] = 1;
      stk[sp] = d;
      next[sp++] = 0;
    }
  }
  HLO_ASSERT(norder == n);
}

double hlo_instr_flops(const HInstr *in) {
  double out = (double)hlo_shape_elems(&in->shape);
  if (in->op == OP_DOT && in->dot && in->nops == 2) {
    double k = 1;
    for (int d = 0; d < in->dot->lhs_contract.n; d++)
      k *= (double)in->ops[0]->shape.dims[in->dot->lhs_contract.v[d]];
    return 2 * out * k;
  }
  if (in->op == OP_CONVOLUTION && in->conv && in->nops == 2) {
    const Shape *ks = &in->ops[1]->shape;
    double kout = (double)ks->dims[in->conv->k_out];
    return kout > 0 ? 2 * out * (double)hlo_shape_elems(ks) / kout : 0;
  }
  return 0;
}

int hlo_comp_binary_op(const HComp *r, DType dt) {
  if (!r || r->nparams != 2 || r->ninstrs != 3 || !r->root) return -1;
  const HInstr *a = r->root;
  if (a->nops != 2 || a->shape.rank != 0 || a->shape.dt != dt) return -1;
  const HInstr *p = r->params[0], *q = r->params[1];
  bool ok = p && q && ((a->ops[0] == p && a->ops[1] == q) || (a->ops[0] == q && a->ops[1] == p));
  return ok ? (int)a->op : -1;
}

bool hlo_comp_is_add(const HComp *r, DType dt) { return hlo_comp_binary_op(r, dt) == OP_ADD; }

bool hlo_comp_identity(const HComp *r, DType dt, double *id) {
  int op = hlo_comp_binary_op(r, dt);
  if (op != OP_ADD && op != OP_MAXIMUM && op != OP_MINIMUM) return false;
  if (id) *id = op == OP_MAXIMUM ? -INFINITY : op == OP_MINIMUM ? INFINITY : 0.0;
  return true;
}

void hlo_module_iface_note(HModule *m, const char *key, const char *note) {
  m->iface = hlo_arena_grow(m->arena, m->iface, m->niface, &m->iface_cap, 4, sizeof *m->iface);
  m->iface[m->niface++] =
      (HAttr){hlo_arena_strdup(m->arena, key), hlo_arena_strdup(m->arena, note)};
}

const char *hlo_module_iface_find(const HModule *m, const char *key) {
  for (int i = 0; i < m->niface; i++)
    if (!strcmp(m->iface[i].name, key)) return m->iface[i].value;
  return NULL;
}

bool hlo_custom_call_is_identity(const HInstr *in) {
  static const char *const ids[] = {
      "Sharding",     "SPMDFullToShardShape", "SPMDShardToFullShape",
      "MoveToDevice", "MoveToHost",           "annotate_device_placement"};
  if (in->op != OP_CUSTOM_CALL || in->nops != 1 || !in->custom_call_target || in->ncalls ||
      !hlo_shape_eq(&in->shape, &in->ops[0]->shape))
    return false;
  for (size_t i = 0; i < sizeof ids / sizeof *ids; i++)
    if (!strcmp(in->custom_call_target, ids[i])) return true;
  return false;
}

bool hlo_custom_call_is_topk(const HInstr *in) {
  if (in->op != OP_CUSTOM_CALL || in->nops != 1 || !in->custom_call_target ||
      strcmp(in->custom_call_target, "TopK") || !hlo_shape_is_tuple(&in->shape) ||
      in->shape.ntuple != 2)
    return false;
  const Shape *x = &in->ops[0]->shape, *v = &in->shape.tuple[0], *i = &in->shape.tuple[1];
  if (!hlo_shape_is_array(x) || x->rank < 1 || v->dt != x->dt || i->dt != DT_S32 ||
      v->rank != x->rank || i->rank != x->rank)
    return false;
  for (int d = 0; d < x->rank; d++)
    if (v->dims[d] != i->dims[d] || (d < x->rank - 1 && v->dims[d] != x->dims[d]) ||
        v->dims[d] > x->dims[d])
      return false;
  return true;
}
