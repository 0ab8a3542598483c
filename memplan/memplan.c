/* memplan/memplan.c: buffer assignment for the entry computation.
 *
 * The algorithm, in five steps over the computation's instruction order:
 *  1. Storage kinds: parameters live in args[], constants in read-only data, tuples have no
 *     storage of their own; reshape/bitcast of the same byte size and get-tuple-element are
 *     views (MEM_ALIAS, view) into their operand's buffer. Every other instruction computes
 *     a value and is a candidate temporary. A tuple-shaped computed value (a variadic reduce)
 *     gets one block holding its leaves back to back, each 64-byte aligned.
 *  2. Live ranges: the last use of a value is its last user's position (the root lives to the
 *     end); a buffer's last use is the latest last use of every view of it.
 *  3. Results: each leaf of the root, flattened in tuple order (nested tuples too), is
 *     resolved through views to the instruction owning the storage. When that instruction
 *     computes exactly this leaf and is not already a result, it computes straight into
 *     results[k] (MEM_RESULT); otherwise (a parameter, a constant, a leaf used twice, a leaf
 *     inside a block) the leaf is copied into results[k] at the end.
 *  4. In place: an instruction reading an operand only at the index it writes (an
 *     elementwise op, or a fusion whose parameter reaches the root through elementwise ops
 *     only, unless the fusion holds a dot or convolution, which the CPU target accumulates
 *     in the output buffer first) takes that operand's buffer when the buffer is a temporary of the
 * same size whose every value is dead after this instruction, and no other operand reads it.
 *     Buffers merged this way form one group (union-find) with one live range.
 *  5. Placement: groups are sorted by decreasing size (then start, then position) and each is
 *     put at the offset of the smallest free gap among the already placed groups whose live
 *     ranges overlap its own (best fit), or above them all. The heap size is the highest
 *     end; peak_live, the most bytes live at one position, is a lower bound for any
 *     placement.
 * Requires the computation's instructions in dependency order; renumbers it. */
#include "memplan.h"

#include <stdlib.h>
#include <string.h>

int64_t memplan_value_bytes(const Shape *s) {
  if (s->dt != DT_TUPLE) return (int64_t)hlo_shape_bytes(s);
  int64_t n = 0;
  for (int i = 0; i < s->ntuple; i++)
    n += memplan_align(memplan_value_bytes(&s->tuple[i]));
  return n;
}

int64_t memplan_tuple_offset(const Shape *s, int64_t index) {
  int64_t off = 0;
  for (int64_t i = 0; i < index && i < s->ntuple; i++)
    off += memplan_align(memplan_value_bytes(&s->tuple[i]));
  return off;
}

int64_t memplan_leaf_offset(const Shape *s, int k) {
  if (s->dt != DT_TUPLE) return 0;
  for (int j = 0; j < s->ntuple; j++) {
    int n = hlo_shape_leaves(&s->tuple[j]);
    if (k < n) return memplan_tuple_offset(s, j) + memplan_leaf_offset(&s->tuple[j], k);
    k -= n;
  }
  return 0;
}

int memplan_base(const MemPlan *p, int i, int64_t *offset) {
  int64_t off = 0;
  while (p->bufs[i].kind == MEM_ALIAS) {
    off += p->bufs[i].offset;
    i = p->bufs[i].alias;
  }
  if (offset) *offset = off;
  return i;
}

/* Whether v reaches `root` of its computation through same-dims elementwise ops only. */
static bool mp_elem_path(const HComp *c, const HInstr *v) {
  bool used = false;
  for (int i = v->idx + 1; i < c->ninstrs; i++) {
    const HInstr *u = c->instrs[i];
    for (int k = 0; k < u->nops; k++) {
      if (u->ops[k] != v) continue;
      used = true;
      if (!(hlo_op_flags(u->op) & OPF_ELEM) || !hlo_shape_same_dims(&u->shape, &v->shape))
        return false;
      if (!mp_elem_path(c, u)) return false;
    }
  }
  return used || v == c->root;
}

bool memplan_reads_elementwise(const HInstr *user, int opnd) {
  if (opnd < 0 || opnd >= user->nops) return false;
  const HInstr *o = user->ops[opnd];
  if (!hlo_shape_is_array(&o->shape) || !hlo_shape_same_dims(&o->shape, &user->shape)) return false;
  if (user->op == OP_FUSION) {
    if (user->ncalls < 1) return false;
    HComp *c = user->calls[0];
    /* an output fusion accumulates its dot/convolution in the output buffer before the
       epilogue reads the other operands: never in place */
    for (int i = 0; i < c->ninstrs; i++)
      if (c->instrs[i]->op == OP_DOT || c->instrs[i]->op == OP_CONVOLUTION) return false;
    for (int i = 0; i < c->ninstrs; i++) {
      HInstr *p = c->instrs[i];
      if (p->op == OP_PARAMETER && p->param_num == opnd) {
        if (p->idx != i) hlo_comp_renumber(c);
        return mp_elem_path(c, p);
      }
    }
    return false;
  }
  return (hlo_op_flags(user->op) & OPF_ELEM) != 0;
}

/* Whether the instruction computes a value into a buffer of its own (before in-place). */
static bool mp_computes(const MemBuf *b) { return b->kind == MEM_TEMP; }

static int mp_find(int *grp, int i) {
  while (grp[i] != i) {
    grp[i] = grp[grp[i]];
    i = grp[i];
  }
  return i;
}

typedef struct MpGroup {
  int leader;     /* instruction owning the storage */
  int start, end; /* live range */
  int64_t size;   /* aligned bytes */
  int64_t offset; /* placement */
} MpGroup;

static int mp_group_cmp(const void *a, const void *b) {
  const MpGroup *x = a, *y = b;
  if (x->size != y->size) return x->size > y->size ? -1 : 1;
  if (x->start != y->start) return x->start < y->start ? -1 : 1;
  return x->leader - y->leader;
}

static int mp_off_cmp(const void *a, const void *b) {
  const MpGroup *x = *(MpGroup *const *)a, *y = *(MpGroup *const *)b;
  if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
  return x->leader - y->leader;
}

/* A new result leaf at the end of p->results (capacity *cap, grown from a). */
static MemResult *mp_push_result(MemPlan *p, HArena *a, int *cap) {
  p->results = hlo_arena_grow(a, p->results, p->nresults, cap, 8, sizeof *p->results);
  return &p->results[p->nresults++];
}

/* The leaves of a value of shape s at byte off of the block owned by instruction b, nested
 * tuples flattened in order, as results copied out of the block. */
static void mp_block_leaves(MemPlan *p, HArena *a, int b, int name, const Shape *s, int64_t off,
                            int *cap) {
  for (int k = 0; k < s->ntuple; k++) {
    const Shape *es = &s->tuple[k];
    int64_t eo = off + memplan_tuple_offset(s, k);
    if (es->dt == DT_TUPLE) {
      mp_block_leaves(p, a, b, name, es, eo, cap);
      continue;
    }
    *mp_push_result(p, a, cap) = (MemResult){b, eo, memplan_value_bytes(es), true, *es, name, -1};
  }
}

static void mp_leaves(MemPlan *p, HArena *a, HInstr *v, int *cap) {
  if (v->op == OP_TUPLE) {
    for (int k = 0; k < v->nops; k++)
      mp_leaves(p, a, v->ops[k], cap);
    return;
  }
  int64_t off = 0;
  int b = memplan_base(p, v->idx, &off);
  HInstr *bi = v->parent->instrs[b];
  if (bi->op == OP_TUPLE) { /* a view of a tuple instruction's element */
    mp_leaves(p, a, bi, cap);
    return;
  }
  if (v->shape.dt == DT_TUPLE) { /* leaves inside a block: copied from the block's owner */
    mp_block_leaves(p, a, b, v->idx, &v->shape, off, cap);
    return;
  }
  MemResult r = {v->idx, 0, memplan_value_bytes(&v->shape), true, v->shape, v->idx, -1};
  if (mp_computes(&p->bufs[b]) && off == 0 && bi->shape.dt != DT_TUPLE) {
    p->bufs[b].kind = MEM_RESULT;
    p->bufs[b].result = p->nresults;
    r.copy = false;
  }
  *mp_push_result(p, a, cap) = r;
}

/* Result leaf number of a shape index into the root (depth 0 or 1 only), or -1. */
static int mp_leaf_of(const Shape *root, const IList *idx) {
  if (idx->n == 0) return root->dt == DT_TUPLE ? -1 : 0;
  if (idx->n != 1 || root->dt != DT_TUPLE || idx->v[0] < 0 || idx->v[0] >= root->ntuple ||
      root->tuple[idx->v[0]].dt == DT_TUPLE)
    return -1;
  int k = 0;
  for (int64_t i = 0; i < idx->v[0]; i++)
    k += hlo_shape_leaves(&root->tuple[i]);
  return k;
}

/* Honour input_output_alias entries (see memplan.h): blast[i] is the last position reading
 * the storage owned by instruction i. */
static void mp_aliases(MemPlan *p, HComp *c, const int *blast) {
  HModule *m = c->mod;
  if (p->nresults != hlo_shape_leaves(&c->root->shape)) return; /* nested blocks: no aliasing */
  for (int ai = 0; ai < m->nalias; ai++) {
    const HAlias *al = &m->alias[ai];
    int k = mp_leaf_of(&c->root->shape, &al->out_index);
    if (k < 0 || al->param_index.n != 0 || al->param < 0 || al->param >= c->nparams) continue;
    HInstr *P = c->params[al->param];
    MemResult *r = &p->results[k];
    if (!P || !hlo_shape_is_array(&P->shape) || !hlo_shape_eq(&P->shape, &r->shape) ||
        r->alias_param >= 0)
      continue;
    bool ok = true;
    for (int j = 0; j < p->nresults && ok; j++) {
      if (j != k && p->results[j].alias_param == al->param) ok = false; /* aliased twice */
      if (p->results[j].copy && memplan_base(p, p->results[j].instr, NULL) == P->idx) ok = false;
    }
    if (!ok) continue;
    int b = memplan_base(p, r->instr, NULL);
    if (!r->copy && p->bufs[b].kind == MEM_RESULT && p->bufs[b].result == k) {
      bool safe = blast[P->idx] < b;
      if (blast[P->idx] == b) { /* read by the producer itself: only elementwise, in place */
        safe = true;
        HInstr *in = c->instrs[b];
        for (int q = 0; q < in->nops; q++)
          if (memplan_base(p, in->ops[q]->idx, NULL) == P->idx && !memplan_reads_elementwise(in, q))
            safe = false;
      }
      if (!safe) { /* computed into scratch, copied into results[k] after every kernel */
        p->bufs[b].kind = MEM_TEMP;
        p->bufs[b].result = 0;
        r->copy = true;
      }
    }
    r->alias_param = al->param;
  }
}

static void mp_state_in_place(MemPlan *p, HComp *c);

bool memplan_assign_body(HComp *c, HArena *a, MemPlan *out, HErr *err) {
  if (!memplan_assign(c, a, out, err)) return false;
  mp_state_in_place(out, c);
  return true;
}

bool memplan_assign(HComp *c, HArena *a, MemPlan *out, HErr *err) {
  hlo_comp_renumber(c);
  int n = c->ninstrs;
  memset(out, 0, sizeof *out);
  out->ninstrs = n;
  out->bufs = hlo_arena_alloc(a, sizeof(MemBuf) * (size_t)(n ? n : 1));
  MemBuf *B = out->bufs;

  /* 1. storage kinds */
  for (int i = 0; i < n; i++) {
    HInstr *in = c->instrs[i];
    MemBuf *b = &B[i];
    b->size = memplan_value_bytes(&in->shape);
    b->start = b->end = i;
    HOp op = in->op;
    if (op == OP_PARAMETER) {
      if (in->shape.dt == DT_TUPLE && c->mod && c->mod->entry == c) {
        hlo_err_at(err, in,
                   "tuple-shaped entry parameter: flatten it first (hlo_flatten_entry_params)");
        return false;
      } /* (a loop body's tuple parameter: one block, leaves back to back, viewed by its GTEs) */
      b->kind = MEM_PARAM;
      b->param = in->param_num;
    } else if (op == OP_CONSTANT) {
      b->kind = MEM_CONST;
    } else if (op == OP_TUPLE || op == OP_AFTER_ALL) {
      b->kind = MEM_NONE;
    } else if (op == OP_GET_TUPLE_ELEMENT) {
      HInstr *o = in->ops[0];
      int64_t off = 0;
      int base = memplan_base(out, o->idx, &off);
      HInstr *bi = c->instrs[base];
      b->kind = MEM_ALIAS;
      b->view = true;
      if (bi->op == OP_TUPLE && in->tuple_index < bi->nops) {
        b->alias = bi->ops[in->tuple_index]->idx;
        b->offset = 0;
      } else {
        b->alias = o->idx;
        b->offset = memplan_tuple_offset(&o->shape, in->tuple_index);
      }
    } else if ((op == OP_RESHAPE || op == OP_BITCAST) && hlo_shape_is_array(&in->shape) &&
               hlo_shape_is_array(&in->ops[0]->shape) &&
               hlo_shape_bytes(&in->shape) == hlo_shape_bytes(&in->ops[0]->shape) &&
               hlo_layout_is_default(&in->shape) && hlo_layout_is_default(&in->ops[0]->shape)) {
      b->kind = MEM_ALIAS; /* same row-major bytes: a view */
      b->view = true;
      b->alias = in->ops[0]->idx;
    } else {
      b->kind = MEM_TEMP;
    }
  }

  /* 2. live ranges: last use per instruction, then per storage owner */
  int *last = hlo_arena_alloc(a, sizeof(int) * (size_t)(n ? n : 1));
  int *blast = hlo_arena_alloc(a, sizeof(int) * (size_t)(n ? n : 1));
  for (int i = 0; i < n; i++)
    last[i] = i;
  for (int i = 0; i < n; i++)
    for (int k = 0; k < c->instrs[i]->nops; k++) {
      int o = c->instrs[i]->ops[k]->idx;
      if (last[o] < i) last[o] = i;
    }
  if (c->root) last[c->root->idx] = n;
  for (int i = 0; i < n; i++)
    blast[i] = -1;
  for (int i = 0; i < n; i++) {
    /* a tuple instruction keeps its elements alive as long as itself */
    if (c->instrs[i]->op == OP_TUPLE)
      for (int k = 0; k < c->instrs[i]->nops; k++) {
        int o = c->instrs[i]->ops[k]->idx;
        if (last[o] < last[i]) last[o] = last[i];
      }
  }
  for (int i = n - 1; i >= 0; i--) { /* views propagate their last use to the viewed value */
    if (B[i].kind == MEM_ALIAS && last[B[i].alias] < last[i]) last[B[i].alias] = last[i];
  }
  for (int i = 0; i < n; i++) {
    int b = memplan_base(out, i, NULL);
    if (blast[b] < last[i]) blast[b] = last[i];
  }

  /* 3. results, then the declared input/output aliases */
  int cap = 0;
  if (c->root) mp_leaves(out, a, c->root, &cap);
  if (c->root && c->mod && c->mod->entry == c) mp_aliases(out, c, blast);

  /* 4. in place */
  int *grp = hlo_arena_alloc(a, sizeof(int) * (size_t)(n ? n : 1));
  int *glast = hlo_arena_alloc(a, sizeof(int) * (size_t)(n ? n : 1));
  for (int i = 0; i < n; i++) {
    grp[i] = i;
    glast[i] = blast[i];
  }
  for (int i = 0; i < n; i++) {
    HInstr *in = c->instrs[i];
    if (B[i].kind != MEM_TEMP || in->shape.dt == DT_TUPLE) continue;
    for (int k = 0; k < in->nops; k++) {
      if (!memplan_reads_elementwise(in, k)) continue;
      int64_t off = 0;
      int ob = memplan_base(out, in->ops[k]->idx, &off);
      if (off != 0 || B[ob].kind != MEM_TEMP || c->instrs[ob]->shape.dt == DT_TUPLE) continue;
      if (B[ob].size != B[i].size) continue;
      int g = mp_find(grp, ob);
      if (glast[g] > i) continue;
      bool ok = true; /* every operand reading this group must read it elementwise */
      for (int k2 = 0; k2 < in->nops && ok; k2++) {
        int b2 = memplan_base(out, in->ops[k2]->idx, NULL);
        if (mp_find(grp, b2) == g && !memplan_reads_elementwise(in, k2)) ok = false;
      }
      if (!ok) continue;
      B[i].kind = MEM_ALIAS;
      B[i].view = false;
      B[i].alias = in->ops[k]->idx;
      B[i].offset = 0;
      grp[i] = g;
      if (glast[g] < blast[i]) glast[g] = blast[i];
      break;
    }
  }

  /* 5. placement */
  MpGroup *gs = hlo_arena_alloc(a, sizeof(MpGroup) * (size_t)(n ? n : 1));
  int ng = 0;
  for (int i = 0; i < n; i++) {
    if (B[i].kind != MEM_TEMP || grp[i] != i || B[i].size == 0) continue;
    gs[ng++] = (MpGroup){i, i, glast[i] < i ? i : glast[i], memplan_align(B[i].size), 0};
  }
  qsort(gs, (size_t)ng, sizeof *gs, mp_group_cmp);
  MpGroup **placed = hlo_arena_alloc(a, sizeof(MpGroup *) * (size_t)(ng ? ng : 1));
  int64_t top = 0;
  for (int g = 0; g < ng; g++) {
    int np = 0;
    for (int h = 0; h < g; h++)
      if (gs[h].start <= gs[g].end && gs[g].start <= gs[h].end) placed[np++] = &gs[h];
    qsort(placed, (size_t)np, sizeof *placed, mp_off_cmp);
    int64_t prev = 0, best = -1, best_gap = 0;
    for (int h = 0; h < np; h++) {
      int64_t gap = placed[h]->offset - prev;
      if (gap >= gs[g].size && (best < 0 || gap < best_gap)) {
        best = prev;
        best_gap = gap;
      }
      if (placed[h]->offset + placed[h]->size > prev) prev = placed[h]->offset + placed[h]->size;
    }
    gs[g].offset = best >= 0 ? best : prev;
    if (gs[g].offset + gs[g].size > top) top = gs[g].offset + gs[g].size;
  }
  for (int g = 0; g < ng; g++) {
    MemBuf *b = &B[gs[g].leader];
    b->offset = gs[g].offset;
    b->start = gs[g].start;
    b->end = gs[g].end;
  }
  out->temp_bytes = top;
  int64_t peak = 0;
  for (int t = 0; t < n; t++) {
    int64_t live = 0;
    for (int g = 0; g < ng; g++)
      if (gs[g].start <= t && t <= gs[g].end) live += gs[g].size;
    if (live > peak) peak = live;
  }
  out->peak_live = peak;
  return true;
}

void memplan_dump(const MemPlan *p, const HComp *c, FILE *f) {
  static const char *kinds[] = {"none", "param", "const", "temp", "result", "alias"};
  fprintf(f, "buffer assignment: computation %s, %d instructions\n", c->name, p->ninstrs);
  fprintf(f, "%-5s %-36s %-20s %-7s %12s %12s  %s\n", "pos", "instruction", "opcode", "kind",
          "offset", "size", "live / storage");
  for (int i = 0; i < p->ninstrs && i < c->ninstrs; i++) {
    const MemBuf *b = &p->bufs[i];
    const HInstr *in = c->instrs[i];
    fprintf(f, "%-5d %-36s %-20s %-7s ", i, in->name, hlo_op_name(in->op), kinds[b->kind]);
    switch (b->kind) {
    case MEM_TEMP:
      fprintf(f, "%12lld %12lld  [%d, %d]\n", (long long)b->offset, (long long)b->size, b->start,
              b->end);
      break;
    case MEM_ALIAS:
      fprintf(f, "%12lld %12lld  %s of %s\n", (long long)b->offset, (long long)b->size,
              b->view ? "view" : "in place", c->instrs[b->alias]->name);
      break;
    case MEM_PARAM:
      fprintf(f, "%12s %12lld  args[%lld]\n", "-", (long long)b->size, (long long)b->param);
      break;
    case MEM_RESULT:
      fprintf(f, "%12s %12lld  results[%d]\n", "-", (long long)b->size, b->result);
      break;
    case MEM_CONST: fprintf(f, "%12s %12lld  read-only data\n", "-", (long long)b->size); break;
    case MEM_NONE: fprintf(f, "%12s %12s  -\n", "-", "-"); break;
    }
  }
  for (int k = 0; k < p->nresults; k++) {
    const MemResult *r = &p->results[k];
    fprintf(f, "result %d: %s +%lld, %lld bytes, %s", k, c->instrs[r->instr]->name,
            (long long)r->offset, (long long)r->size,
            r->copy ? "copied there at the end" : "computed straight into it");
    if (r->alias_param >= 0) fprintf(f, ", may alias args[%lld]", (long long)r->alias_param);
    fputc('\n', f);
  }
  double frag =
      p->peak_live ? 100.0 * (double)(p->temp_bytes - p->peak_live) / (double)p->peak_live : 0;
  fprintf(f, "TEMP_BYTES %lld\npeak-live lower bound %lld\nfragmentation %.2f%%\n",
          (long long)p->temp_bytes, (long long)p->peak_live, frag);
}

/* ------------------------------------------------------------------ loop bodies */

/* Whether user reads operand opnd in place: elementwise, or as a dynamic-update-slice's operand
 * (directly, or as the only use of a fusion's parameter that is its root's operand 0). */
static bool mp_reads_in_place(const HInstr *user, int opnd) {
  if (memplan_reads_elementwise(user, opnd)) return true;
  if (user->op == OP_DYNAMIC_UPDATE_SLICE) return opnd == 0;
  if (user->op != OP_FUSION || user->ncalls != 1) return false;
  const HComp *f = user->calls[0];
  const HInstr *r = f->root;
  if (r->op != OP_DYNAMIC_UPDATE_SLICE || r->ops[0]->op != OP_PARAMETER ||
      r->ops[0]->param_num != opnd || !hlo_shape_same_dims(&r->shape, &user->shape))
    return false;
  for (int i = 0; i < f->ninstrs; i++)
    for (int k = 0; k < f->instrs[i]->nops; k++)
      if (f->instrs[i]->ops[k] == r->ops[0] && !(f->instrs[i] == r && k == 0)) return false;
  return true;
}

/* Whether x's value lies in [lo, hi) of parameter block pb's bytes (a view of it), and where. */
static bool mp_in_leaf(const MemPlan *p, const HInstr *x, int pb, int64_t lo, int64_t hi) {
  int64_t off = 0;
  if (memplan_base(p, x->idx, &off) != pb) return false;
  return off < hi && off + memplan_value_bytes(&x->shape) > lo;
}

static void mp_state_in_place(MemPlan *p, HComp *c) {
  if (c->nparams != 1 || c->params[0]->shape.dt != DT_TUPLE || !c->root) return;
  int pb = c->params[0]->idx;
  const Shape *ps = &c->params[0]->shape;
  for (int r = 0; r < p->nresults && r < hlo_shape_leaves(ps); r++) {
    MemResult *mr = &p->results[r];
    if (mr->copy) continue;
    HInstr *in = c->instrs[mr->instr];
    int64_t lo = memplan_leaf_offset(ps, r), hi = lo + mr->size;
    int take = -1;
    for (int k = 0; k < in->nops && take < 0; k++) {
      int64_t off = 0;
      if (memplan_base(p, in->ops[k]->idx, &off) == pb && off == lo &&
          memplan_value_bytes(&in->ops[k]->shape) == mr->size && mp_reads_in_place(in, k))
        take = k;
    }
    /* take < 0: `in` reads none of the leaf, then every read of it comes before `in` */
    bool ok = true; /* no other read of the leaf by `in` out of place, none after it */
    for (int k = 0; k < in->nops && ok; k++)
      if (k != take && mp_in_leaf(p, in->ops[k], pb, lo, hi) &&
          (take < 0 || !memplan_reads_elementwise(in, k)))
        ok = false;
    /* (a tuple's elements are read when the results are, after every kernel: a leaf the root
       moves elsewhere, as a swap does, is read then) */
    for (int i = 0; i < c->ninstrs && ok; i++)
      for (int k = 0; k < c->instrs[i]->nops && ok; k++)
        if ((i > in->idx || c->instrs[i]->op == OP_TUPLE) &&
            mp_in_leaf(p, c->instrs[i]->ops[k], pb, lo, hi))
          ok = false;
    if (!ok) continue;
    MemBuf *b = &p->bufs[in->idx];
    b->kind = MEM_ALIAS;
    b->view = false;
    b->alias = take >= 0 ? in->ops[take]->idx : pb;
    b->offset = take >= 0 ? 0 : lo;
    mr->copy = true; /* a copy of the state's own leaf: left where it is */
  }
}

static void mp_init_leaves(const HInstr *v, int64_t voff, const Shape *vs, MemLoopInit *o) {
  while (voff == 0 && v->op == OP_GET_TUPLE_ELEMENT && v->ops[0]->op == OP_TUPLE && vs == &v->shape)
    v = v->ops[0]->ops[v->tuple_index], vs = &v->shape;
  if (voff == 0 && v->op == OP_TUPLE && vs == &v->shape) {
    for (int j = 0; j < v->nops; j++)
      mp_init_leaves(v->ops[j], 0, &v->ops[j]->shape, o);
    return;
  }
  if (vs->dt == DT_TUPLE) {
    for (int j = 0; j < vs->ntuple; j++)
      mp_init_leaves(v, voff + memplan_tuple_offset(vs, j), &vs->tuple[j], o);
    return;
  }
  o->src[o->n] = v, o->off[o->n] = voff, o->bytes[o->n] = (int64_t)hlo_shape_bytes(vs);
  o->n++;
}

void memplan_loop_init(HArena *a, const HInstr *w, MemLoopInit *out) {
  size_t n = (size_t)hlo_shape_leaves(&w->shape) + 1;
  *out = (MemLoopInit){0, hlo_arena_alloc(a, sizeof *out->src * n),
                       hlo_arena_alloc(a, sizeof *out->off * n),
                       hlo_arena_alloc(a, sizeof *out->bytes * n), hlo_arena_alloc(a, n)};
  mp_init_leaves(w->ops[0], 0, &w->ops[0]->shape, out);
  const HComp *body = w->calls[0];
  const HInstr *root = body->root, *param = body->nparams == 1 ? body->params[0] : NULL;
  bool flat = w->shape.dt == DT_TUPLE && w->shape.ntuple == out->n && root->op == OP_TUPLE;
  for (int j = 0; j < out->n; j++) {
    const HInstr *x = flat && j < root->nops ? root->ops[j] : NULL;
    out->invariant[j] = x && x->op == OP_GET_TUPLE_ELEMENT && x->ops[0] == param &&
                        x->tuple_index == j && out->bytes[j] > 0;
  }
}

void memplan_value_leaves(HArena *a, const HInstr *v, MemLoopInit *out) {
  size_t n = (size_t)hlo_shape_leaves(&v->shape) + 1;
  *out = (MemLoopInit){0, hlo_arena_alloc(a, sizeof *out->src * n),
                       hlo_arena_alloc(a, sizeof *out->off * n),
                       hlo_arena_alloc(a, sizeof *out->bytes * n), hlo_arena_alloc(a, n)};
  mp_init_leaves(v, 0, &v->shape, out);
  for (int j = 0; j < out->n; j++)
    out->invariant[j] = true;
}

bool memplan_leaf_read(const HComp *c, const HInstr *w, int j) {
  for (int i = 0; i < c->ninstrs; i++) {
    const HInstr *x = c->instrs[i];
    for (int o = 0; o < x->nops; o++)
      if (x->ops[o] == w && (x->op != OP_GET_TUPLE_ELEMENT || x->tuple_index == j)) return true;
  }
  return c->root == w;
}

bool memplan_leaf_stays(const MemPlan *bp, const Shape *state, int r) {
  const MemResult *mr = &bp->results[r];
  if (!mr->copy) return false;
  int64_t off = 0;
  int b = memplan_base(bp, mr->instr, &off);
  return bp->bufs[b].kind == MEM_PARAM && off + mr->offset == memplan_leaf_offset(state, r);
}
