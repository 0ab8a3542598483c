/* layout/normalize.c: the layout-normalize pass.
 *
 * The layouts an input module carries on interior instructions are XLA's guesses for its own
 * backends; hloc gives them no meaning (every array is read row-major, as XLA's layout
 * assignment also ignores them on input). This pass makes the dumps honest: every
 * instruction of every computation, except the entry's parameters and root, gets the default
 * row-major layout (recursively through tuples, literals included, tiling and memory-space
 * text dropped). The entry interface is kept as it is, but it must be row-major: the compiled
 * code and the interpreter read arguments and write results in row-major order, so a module
 * whose entry_computation_layout, entry parameters or entry root ask for another layout is
 * rejected with a located error rather than silently miscompiled. Changes nothing (and
 * reports no change) on a module that is already normalized. */
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

bool layout_normalize(HModule *m, PassCtx *pc) {
  HComp *e = m->entry;
  if (!e) return false;
  hlo_comp_renumber(e);
  if (m->has_entry_layout) {
    for (int i = 0; i < m->nentry_layout; i++)
      if (!ln_is_row_major(&m->entry_layout_params[i])) {
        hlo_err_comp(pc->err, e,
                     "entry_computation_layout: parameter %d has layout %s; hloc compiles "
                     "row-major interfaces only",
                     i, hlo_shape_str(m->arena, &m->entry_layout_params[i]));
        return false;
      }
    if (!ln_is_row_major(&m->entry_layout_result)) {
      hlo_err_comp(pc->err, e,
                   "entry_computation_layout: result layout %s; hloc compiles row-major "
                   "interfaces only",
                   hlo_shape_str(m->arena, &m->entry_layout_result));
      return false;
    }
  }
  for (int i = 0; i < e->nparams; i++)
    if (e->params[i] && !ln_is_row_major(&e->params[i]->shape)) {
      hlo_err_at(pc->err, e->params[i],
                 "entry parameter layout %s is not row-major; hloc compiles row-major "
                 "interfaces only",
                 hlo_shape_str(m->arena, &e->params[i]->shape));
      return false;
    }
  if (e->root && !ln_is_row_major(&e->root->shape)) {
    hlo_err_at(pc->err, e->root,
               "entry result layout %s is not row-major; hloc compiles row-major interfaces "
               "only",
               hlo_shape_str(m->arena, &e->root->shape));
    return false;
  }
  bool changed = false;
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
