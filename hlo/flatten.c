/* hlo/flatten.c: tuple-shaped entry parameters passed leaf by leaf.
 *
 * hloc's generated interfaces take one buffer per argument, and results leaf by leaf in tuple
 * order; a tuple-shaped entry parameter (TensorFlow's tuple arguments, a state tuple) is
 * given the same treatment: it becomes one array parameter per leaf, depth first, numbered
 * from its own position on (the parameters after it move up), and its users read a tuple
 * rebuilt from the leaves:
 *     p = (f32[4], (s32[2], f32[])) parameter(1)
 *  -> p.0 = f32[4] parameter(1), p.1.0 = s32[2] parameter(2), p.1.1 = f32[] parameter(3),
 *     p.1.tuple = (s32[2], f32[]) tuple(p.1.0, p.1.1), p.tuple = (...) tuple(p.0, p.1.tuple)
 * (algsimp then folds get-tuple-element of those tuples away). The leaves are named after the
 * parameter and their tuple index. The module's entry_computation_layout and its
 * input/output aliases (a parameter number and an index inside it) are rewritten to the
 * flattened numbering. Only the entry computation changes: other computations' parameters
 * are internal. The optimizer runs it first (optimizer/flatten_params.c); the targets, the
 * interpreter tools (hloc-run, hloc-bench-ref) call it on the modules they are given, so
 * that every interface of hloc takes the same arguments. */
#include "hlo.h"

#include <stdio.h>
#include <string.h>

/* Flat position of the leaf at index[0..depth) inside s (-1 when it is not a leaf). */
static int fp_flat_index(const Shape *s, const int64_t *index, int depth) {
  int pos = 0;
  for (int d = 0; d < depth; d++) {
    if (s->dt != DT_TUPLE || index[d] < 0 || index[d] >= s->ntuple) return -1;
    for (int i = 0; i < index[d]; i++)
      pos += hlo_shape_leaves(&s->tuple[i]);
    s = &s->tuple[index[d]];
  }
  return s->dt == DT_TUPLE ? -1 : pos;
}

/* The value of shape s named name, made of new parameters numbered from *next: a parameter
 * for an array, a tuple of such values otherwise. */
static HInstr *fp_build(HComp *c, const Shape *s, const char *name, int64_t *next, Shape *layouts,
                        const Shape *layout) {
  if (s->dt != DT_TUPLE) {
    HInstr *p = hlo_instr_new(c, OP_PARAMETER, hlo_module_name_as(c->mod, name), s, 0, NULL);
    if (layouts) hlo_shape_copy(c->mod->arena, &layouts[*next], layout ? layout : s);
    p->param_num = (*next)++;
    return p;
  }
  HInstr **elems =
      hlo_arena_alloc(c->mod->arena, sizeof(HInstr *) * (size_t)(s->ntuple ? s->ntuple : 1));
  for (int i = 0; i < s->ntuple; i++) {
    char sub[256];
    snprintf(sub, sizeof sub, "%s.%d", name, i);
    const Shape *li =
        layout && layout->dt == DT_TUPLE && i < layout->ntuple ? &layout->tuple[i] : NULL;
    elems[i] = fp_build(c, &s->tuple[i], sub, next, layouts, li);
  }
  char tn[280];
  snprintf(tn, sizeof tn, "%s.tuple", name);
  return hlo_instr_new(c, OP_TUPLE, hlo_module_name_as(c->mod, tn), s, s->ntuple, elems);
}

bool hlo_flatten_entry_params(HModule *m, HArena *scratch) {
  HComp *c = m->entry;
  if (!c) return false;
  hlo_comp_renumber(c);
  int np = c->nparams, total = 0;
  bool any = false;
  for (int i = 0; i < np; i++) {
    if (!c->params[i]) return false; /* a gap in the numbering: the verifier reports it */
    any |= c->params[i]->shape.dt == DT_TUPLE;
    total += hlo_shape_leaves(&c->params[i]->shape);
  }
  if (!any) return false;
  /* base[i]: the first flattened number of parameter i */
  int64_t *base = hlo_arena_alloc(scratch, sizeof(int64_t) * (size_t)(np + 1));
  bool layouts = m->has_entry_layout && m->nentry_layout == np;
  Shape *nl =
      layouts ? hlo_arena_alloc(m->arena, sizeof(Shape) * (size_t)(total ? total : 1)) : NULL;
  int64_t next = 0;
  HInstr **old = hlo_arena_memdup(scratch, c->params, sizeof(HInstr *) * (size_t)np);
  int n0 = c->ninstrs;
  bool *dead = hlo_arena_alloc(scratch, (size_t)n0 + 1);
  for (int i = 0; i < np; i++) {
    HInstr *p = old[i];
    base[i] = next;
    if (p->shape.dt != DT_TUPLE) {
      if (nl) hlo_shape_copy(m->arena, &nl[next], &m->entry_layout_params[i]);
      p->param_num = next++;
      continue;
    }
    HInstr *v =
        fp_build(c, &p->shape, p->name, &next, nl, layouts ? &m->entry_layout_params[i] : NULL);
    hlo_instr_replace_uses(p, v);
    if (c->root == p) c->root = v;
    dead[p->idx] = true; /* (the new instructions are appended: old indices stand) */
  }
  bool *keep = hlo_arena_alloc(scratch, (size_t)c->ninstrs + 1);
  for (int i = 0; i < c->ninstrs; i++)
    keep[i] = i >= n0 || !dead[i];
  hlo_comp_filter(c, keep);
  /* the new parameters and tuples were appended: back to an order where operands come first */
  HInstr **order =
      hlo_arena_alloc(scratch, sizeof(HInstr *) * (size_t)(c->ninstrs ? c->ninstrs : 1));
  hlo_comp_postorder(c, scratch, NULL, NULL, order);
  memcpy(c->instrs, order, sizeof(HInstr *) * (size_t)c->ninstrs);
  hlo_comp_renumber(c);
  if (nl) {
    m->entry_layout_params = nl;
    m->nentry_layout = total;
  }
  for (int a = 0; a < m->nalias; a++) {
    HAlias *al = &m->alias[a];
    if (al->param < 0 || al->param >= np) continue;
    const Shape *ps = &old[al->param]->shape;
    if (ps->dt != DT_TUPLE) {
      al->param = base[al->param];
      continue;
    }
    int pos = fp_flat_index(ps, al->param_index.v, al->param_index.n);
    if (pos < 0) continue; /* not a leaf: left for the verifier / buffer plan to report */
    al->param = base[al->param] + pos;
    al->param_index.n = 0;
  }
  return true;
}
