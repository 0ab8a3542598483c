/* memplan/schedule.c: instruction scheduling for low scratch memory.
 *
 * The buffer plan (memplan.c) follows the computation's instruction order, so the order
 * decides how many values are live at once. memplan_schedule tries three valid orders and
 * keeps the one whose plan needs the least scratch (TEMP_BYTES, then the peak-live bound,
 * then the earlier candidate), as XLA keeps the best of its list and DFS schedulers:
 *   1. the current order;
 *   2. a greedy list scheduler: among the instructions whose operands (and control
 *      predecessors) are all scheduled, take the one with the largest bytes freed minus
 *      bytes allocated, where an operand buffer is freed when this instruction is its last
 *      unscheduled reader (views such as get-tuple-element and bitcast-like reshapes read
 *      their base buffer; the root's buffers are never freed) and an instruction allocates
 *      the bytes of its value unless it is a parameter, constant, tuple or view; ties go to
 *      the earlier instruction in the current order;
 *   3. a depth-first post-order from the root that visits the operands with the largest
 *      accumulated subtree bytes first (so big intermediate chains finish, and free, before
 *      the next one starts); instructions the root does not reach follow in current order.
 * Each candidate is evaluated with memplan_assign itself, so the figure compared is the one
 * the compiled code will use. Requires a computation in dependency order; keeps it so. */
#include "memplan.h"

#include <string.h>

typedef struct MsCtx {
  HComp *c;
  int n;
  int *base;      /* per instruction: the instruction owning its storage (itself if none) */
  int64_t *alloc; /* per instruction: bytes it allocates */
  int *readers;   /* per base: distinct (reader, base) edges still unscheduled */
} MsCtx;

static bool ms_is_view(const HInstr *in) {
  if (in->op == OP_GET_TUPLE_ELEMENT) return true;
  if ((in->op == OP_RESHAPE || in->op == OP_BITCAST) && in->nops == 1 &&
      hlo_shape_is_array(&in->shape) && hlo_shape_is_array(&in->ops[0]->shape) &&
      hlo_shape_bytes(&in->shape) == hlo_shape_bytes(&in->ops[0]->shape))
    return true;
  return false;
}

static void ms_analyse(MsCtx *s, HArena *a) {
  HComp *c = s->c;
  int n = s->n;
  s->base = hlo_arena_alloc(a, sizeof(int) * (size_t)n);
  s->alloc = hlo_arena_alloc(a, sizeof(int64_t) * (size_t)n);
  s->readers = hlo_arena_alloc(a, sizeof(int) * (size_t)n);
  for (int i = 0; i < n; i++) {
    HInstr *in = c->instrs[i];
    s->base[i] = ms_is_view(in) ? s->base[in->ops[0]->idx] : i;
    bool none = in->op == OP_PARAMETER || in->op == OP_CONSTANT || in->op == OP_TUPLE ||
                in->op == OP_AFTER_ALL || ms_is_view(in);
    s->alloc[i] = none ? 0 : memplan_value_bytes(&in->shape);
  }
}

/* Distinct bases read by instruction i (tuples pass their operands' bases through). */
static int ms_bases(const MsCtx *s, const HInstr *in, int *out, int cap) {
  int k = 0;
  for (int j = 0; j < in->nops; j++) {
    const HInstr *o = in->ops[j];
    int b = s->base[o->idx];
    bool seen = false;
    for (int t = 0; t < k; t++)
      seen |= out[t] == b;
    if (!seen && k < cap) out[k++] = b;
  }
  return k;
}

static void ms_list(MsCtx *s, HArena *a, HInstr **order) {
  HComp *c = s->c;
  int n = s->n;
  int *pending = hlo_arena_alloc(a, sizeof(int) * (size_t)n); /* unscheduled deps */
  HUsers us = hlo_comp_users(a, c);
  int **succ = hlo_arena_alloc(a, sizeof(int *) * (size_t)n);
  int *nsucc = hlo_arena_alloc(a, sizeof(int) * (size_t)n);
  for (int i = 0; i < n; i++)
    succ[i] = hlo_arena_alloc(a, sizeof(int) * (size_t)(us.n[i] + c->ninstrs / 64 + 4));
  int *scap = hlo_arena_alloc(a, sizeof(int) * (size_t)n);
  for (int i = 0; i < n; i++)
    scap[i] = us.n[i] + c->ninstrs / 64 + 4;
  int bb[64];
  for (int i = 0; i < n; i++) {
    HInstr *in = c->instrs[i];
    int nb = ms_bases(s, in, bb, 64);
    for (int t = 0; t < nb; t++)
      s->readers[bb[t]]++;
    /* dependencies: distinct operands and control predecessors */
    for (int j = 0; j < in->nops + in->nctrl; j++) {
      HInstr *d = j < in->nops ? in->ops[j] : in->ctrl[j - in->nops];
      bool dup = false;
      for (int q = 0; q < j; q++)
        dup |= (q < in->nops ? in->ops[q] : in->ctrl[q - in->nops]) == d;
      if (dup) continue;
      pending[i]++;
      int di = d->idx;
      if (nsucc[di] == scap[di]) {
        int *ns = hlo_arena_alloc(a, sizeof(int) * (size_t)(2 * scap[di]));
        memcpy(ns, succ[di], sizeof(int) * (size_t)nsucc[di]);
        succ[di] = ns;
        scap[di] *= 2;
      }
      succ[di][nsucc[di]++] = i;
    }
  }
  int rootb = c->root ? s->base[c->root->idx] : -1;
  bool *keep = hlo_arena_alloc(a, (size_t)n); /* bases never freed: root's, its tuple's */
  if (c->root && c->root->op == OP_TUPLE)
    for (int j = 0; j < c->root->nops; j++)
      keep[s->base[c->root->ops[j]->idx]] = true;
  if (rootb >= 0) keep[rootb] = true;
  int *ready = hlo_arena_alloc(a, sizeof(int) * (size_t)n);
  int nready = 0, norder = 0;
  for (int i = 0; i < n; i++)
    if (!pending[i]) ready[nready++] = i;
  while (nready) {
    int best = -1;
    int64_t best_score = 0;
    for (int r = 0; r < nready; r++) {
      int i = ready[r];
      HInstr *in = c->instrs[i];
      int nb = ms_bases(s, in, bb, 64);
      int64_t freed = 0;
      for (int t = 0; t < nb; t++)
        if (s->readers[bb[t]] == 1 && !keep[bb[t]]) freed += s->alloc[bb[t]];
      int64_t score = freed - s->alloc[i];
      if (best < 0 || score > best_score || (score == best_score && i < ready[best])) {
        best = r;
        best_score = score;
      }
    }
    int i = ready[best];
    ready[best] = ready[--nready];
    order[norder++] = c->instrs[i];
    int nb = ms_bases(s, c->instrs[i], bb, 64);
    for (int t = 0; t < nb; t++)
      s->readers[bb[t]]--;
    for (int k = 0; k < nsucc[i]; k++)
      if (--pending[succ[i][k]] == 0) ready[nready++] = succ[i][k];
  }
  HLO_ASSERT(norder == n);
}

static void ms_dfs(MsCtx *s, HArena *a, HInstr **order) {
  HComp *c = s->c;
  int n = s->n;
  int64_t *total = hlo_arena_alloc(a, sizeof(int64_t) * (size_t)n);
  for (int i = 0; i < n; i++) {
    HInstr *in = c->instrs[i];
    /* bytes this value and everything below it allocate (saturating: shared subgraphs
     * count once per path, so sums grow quickly on wide graphs) */
    const int64_t cap = INT64_MAX / 4;
    total[i] = s->alloc[i] < cap ? s->alloc[i] : cap;
    for (int j = 0; j < in->nops; j++) {
      int64_t t = total[in->ops[j]->idx];
      total[i] = t >= cap - total[i] ? cap : total[i] + t;
    }
  }
  hlo_comp_postorder(c, a, c->root, total, order);
}

bool memplan_schedule(HComp *c, HArena *a, int64_t *temp_bytes) {
  hlo_comp_renumber(c);
  int n = c->ninstrs;
  if (n == 0) return false;
  HInstr **orig = hlo_arena_memdup(a, c->instrs, sizeof(HInstr *) * (size_t)n);
  HInstr **cand[3];
  cand[0] = orig;
  cand[1] = hlo_arena_alloc(a, sizeof(HInstr *) * (size_t)n);
  cand[2] = hlo_arena_alloc(a, sizeof(HInstr *) * (size_t)n);
  MsCtx s = {c, n, NULL, NULL, NULL};
  ms_analyse(&s, a);
  ms_list(&s, a, cand[1]);
  ms_dfs(&s, a, cand[2]);
  int best = -1;
  int64_t best_temp = 0, best_peak = 0;
  for (int k = 0; k < 3; k++) {
    memcpy(c->instrs, cand[k], sizeof(HInstr *) * (size_t)n);
    HArena *pa = hlo_arena_new();
    MemPlan p;
    HErr err = {0};
    bool ok = memplan_assign(c, pa, &p, &err);
    hlo_arena_free(pa);
    if (!ok) break; /* the plan does not depend on the order: keep the current one */
    if (best < 0 || p.temp_bytes < best_temp ||
        (p.temp_bytes == best_temp && p.peak_live < best_peak)) {
      best = k;
      best_temp = p.temp_bytes;
      best_peak = p.peak_live;
    }
  }
  if (best < 0) best = 0;
  memcpy(c->instrs, cand[best], sizeof(HInstr *) * (size_t)n);
  hlo_comp_renumber(c);
  if (temp_bytes) *temp_bytes = best_temp;
  return memcmp(cand[best], orig, sizeof(HInstr *) * (size_t)n) != 0;
}
