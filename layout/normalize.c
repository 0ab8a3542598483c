/* layout/normalize.c: the layout-normalize pass.
 *
 * The layouts an input module carries on interior instructions are XLA's guesses for its own
 * backends; hloc gives them no meaning (every array is read row-major, as XLA's layout
 * assignment also ignores them on input). This pass makes the dumps honest: every
 * instruction of every computation, except the entry's parameters and root, gets the default
 * row-major layout (recursively through tuples, literals included, tiling and memory-space
 * text dropped). The entry interface: the compiled code and the interpreter read arguments
 * and write results row-major; a module whose entry_computation_layout, entry parameters or
 * root declare another layout gets a row-major interface (the same logical values; the
 * declared layout is XLA's choice for its own runtime's buffers), or, with
 * OptOpts.entry_layout_module (--entry-layout=module), the declared one: such a parameter
 * becomes the row-major array of its physical order read through a transpose, such a result
 * is transposed into its physical order, and the layout passes fuse those transposes into
 * the kernels next to them. Changes nothing (and reports no change) on a module that is
 * already normalized. */
#include "layout.h"

/* Whether s (recursively) has the default layout and no extra layout text. */
static bool ln_is_default(const Shape *s) {
  if (s->dt == DT_TUPLE) {
    for (int i = 0; i < s->ntuple; i++)
      if (!ln_is_default(&s->tuple[i])) return false;
    return true;
  }
  return hlo_layout_is_default(s) && !s->layout_extra;
}

/* Only the minor-to-major order matters for the interface (tiling text is not data order). */
static bool ln_is_row_major(const Shape *s) {
  if (s->dt == DT_TUPLE) {
    for (int i = 0; i < s->ntuple; i++)
      if (!ln_is_row_major(&s->tuple[i])) return false;
    return true;
  }
  return hlo_layout_is_default(s);
}

static void ln_clear(Shape *s) {
  if (s->dt == DT_TUPLE) {
    for (int i = 0; i < s->ntuple; i++)
      ln_clear(&s->tuple[i]);
    return;
  }
  s->layout_extra = NULL;
  if (!hlo_layout_is_default(s)) hlo_shape_set_default_layout(s);
}

static void ln_clear_literal(Literal *l) {
  if (!l) return;
  ln_clear(&l->shape);
  if (l->elems)
    for (int i = 0; i < l->shape.ntuple; i++)
      ln_clear_literal(l->elems[i]);
}

/* Physical position j (major first) of array shape s holds logical dim m2m[rank - 1 - j]. */
static void ln_order(const Shape *s, int64_t *phys) {
  for (int j = 0; j < s->rank; j++)
    phys[j] = s->has_layout ? s->m2m[s->rank - 1 - j] : j;
}

/* --entry-layout=module: parameter p (declared layout w) becomes the row-major array of its
 * physical order, read through a transpose back to the logical shape. */
static void ln_param_physical(HComp *e, HInstr *p, const Shape *w) {
  int64_t phys[HLO_MAX_RANK], perm[HLO_MAX_RANK];
  ln_order(w, phys);
  layout_perm_inverse(w->rank, phys, perm);
  p->shape = layout_permuted_shape(w->dt, w->rank, w->dims, phys);
  hlo_instr_replace_uses(p, layout_transpose(e, p, perm));
}

/* --entry-layout=module: the result r (declared layout w) written in its physical order. */
static HInstr *ln_result_physical(HComp *e, HInstr *r, const Shape *w) {
  if (hlo_shape_is_tuple(w)) {
    HInstr **leaf = hlo_arena_alloc(e->mod->arena, sizeof(HInstr *) * (size_t)(w->ntuple + 1));
    Shape *ls = hlo_arena_alloc(e->mod->arena, sizeof(Shape) * (size_t)(w->ntuple + 1));
    for (int i = 0; i < w->ntuple; i++) {
      HInstr *g = opt_new(e, OP_GET_TUPLE_ELEMENT, "get-tuple-element", &r->shape.tuple[i], 1, &r);
      g->tuple_index = i;
      leaf[i] = ln_result_physical(e, g, &w->tuple[i]);
      ls[i] = leaf[i]->shape;
    }
    Shape ts = hlo_shape_tuple(e->mod->arena, w->ntuple, ls);
    return opt_new(e, OP_TUPLE, "tuple", &ts, w->ntuple, leaf);
  }
  int64_t phys[HLO_MAX_RANK];
  ln_order(w, phys);
  return layout_transpose(e, r, phys);
}

/* The header's note on a parameter or the result whose declared layout w is not row-major. */
static void ln_note(HModule *m, const char *key, const Shape *w, bool keep) {
  if (ln_is_row_major(w)) return;
  char buf[600];
  const char *ws = hlo_shape_str(m->arena, w);
  if (keep)
    snprintf(buf, sizeof buf,
             "the module's layout %s: the dims listed are in memory order (major first)", ws);
  else
    snprintf(buf, sizeof buf,
             "the module declares %s; row-major here (--entry-layout=module keeps its layout)", ws);
  hlo_module_iface_note(m, key, buf);
}

/* The entry interface: row-major by default (the declared layouts dropped: the same logical
 * values, laid out as a C caller holding numpy-style arrays has them); with
 * OptOpts.entry_layout_module each parameter and result in the layout the module declares,
 * through transposes the layout passes fuse into the kernels that read or write them. */
static bool ln_entry(HModule *m, PassCtx *pc, bool *changed) {
  HComp *e = m->entry;
  bool keep = pc->opts->entry_layout_module;
  for (int i = 0; i < e->nparams; i++) {
    HInstr *p = e->params[i];
    const Shape *w =
        m->has_entry_layout && i < m->nentry_layout ? &m->entry_layout_params[i] : &p->shape;
    if (ln_is_row_major(w) && ln_is_row_major(&p->shape)) continue;
    *changed = true;
    if (keep && hlo_shape_is_tuple(w)) {
      hlo_err_at(pc->err, p,
                 "entry parameter layout %s: --entry-layout=module takes array parameters "
                 "only (a tuple parameter's leaves are not reordered)",
                 hlo_shape_str(m->arena, w));
      return false;
    }
    ln_note(m, p->name, w, keep);
    if (keep && hlo_shape_is_array(w) && !ln_is_row_major(w)) ln_param_physical(e, p, w);
    ln_clear(&p->shape);
  }
  const Shape *w = m->has_entry_layout ? &m->entry_layout_result : &e->root->shape;
  if (!ln_is_row_major(w) || !ln_is_row_major(&e->root->shape)) {
    *changed = true;
    ln_note(m, "result", w, keep);
    if (keep && !ln_is_row_major(w)) {
      Shape ws;
      hlo_shape_copy(m->arena, &ws, w);
      e->root = ln_result_physical(e, e->root, &ws);
    }
    ln_clear(&e->root->shape);
  }
  if (m->has_entry_layout) {
    for (int i = 0; i < m->nentry_layout; i++)
      m->entry_layout_params[i] = e->params[i]->shape;
    m->entry_layout_result = e->root->shape;
  }
  if (*changed) opt_comp_toposort(e, pc->scratch);
  return true;
}

bool layout_normalize(HModule *m, PassCtx *pc) {
  HComp *e = m->entry;
  if (!e) return false;
  hlo_comp_renumber(e);
  bool changed = false;
  if (!ln_entry(m, pc, &changed)) return false;
  hlo_comp_renumber(e);
  for (int ci = 0; ci < m->ncomps; ci++) {
    HComp *c = m->comps[ci];
    for (int i = 0; i < c->ninstrs; i++) {
      HInstr *in = c->instrs[i];
      if (c == e && (in->op == OP_PARAMETER || in == e->root)) continue;
      bool lit = in->literal && !ln_is_default(&in->literal->shape);
      if (ln_is_default(&in->shape) && !lit) continue;
      ln_clear(&in->shape);
      ln_clear_literal(in->literal);
      changed = true;
    }
  }
  return changed;
}
