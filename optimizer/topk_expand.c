/* optimizer/topk_expand.c: topk (and XLA's TopK custom-call) as a sort and two slices.
 *
 * topk(x), k, largest returns the k largest (or smallest) values of every row of x's last dim
 * and their s32 indices, ties in index order. That is a stable sort of (x, iota) along the last
 * dim by compare(a, b) GT (LT for the smallest) in total order (NaN above +inf, as the
 * interpreter's topk), then the first k of each output: XLA's own TopkDecomposer does the
 * same. Both targets then compile it with their sort (the CPU's merge-sort kernel); a partial
 * selection for k much smaller than the row is left to come. Runs on every computation. */
#include "optimizer.h"

#include <string.h>

/* The comparator (a, b, i, j) -> compare(a, b) for values of type t. */
static HComp *tk_comparator(HModule *m, DType t, bool largest) {
  HComp *c = hlo_comp_new(m, hlo_module_unique_name(m, largest ? "topk_gt" : "topk_lt"));
  Shape sv = hlo_shape_scalar(t), si = hlo_shape_scalar(DT_S32), sp = hlo_shape_scalar(DT_PRED);
  HInstr *p[4];
  for (int i = 0; i < 4; i++)
    p[i] = opt_new_param(c, i < 2 ? &sv : &si, i);
  HInstr *cmp = opt_new(c, OP_COMPARE, "compare", &sp, 2, p);
  cmp->cmp_dir = largest ? CMP_GT : CMP_LT;
  cmp->cmp_type = hlo_dtype_is_float(t)          ? CMPT_TOTALORDER
                  : hlo_dtype_kind(t) == DK_SINT ? CMPT_SIGNED
                                                 : CMPT_UNSIGNED;
  c->root = cmp;
  return c;
}

/* The first k along the last dim of x. */
static HInstr *tk_first(HComp *c, HInstr *x, int64_t k) {
  int r = x->shape.rank;
  if (x->shape.dims[r - 1] == k) return x;
  SliceDims *d = hlo_arena_alloc(c->mod->arena, sizeof *d);
  d->n = r;
  for (int i = 0; i < r; i++) {
    d->start[i] = 0;
    d->limit[i] = i == r - 1 ? k : x->shape.dims[i];
    d->stride[i] = 1;
  }
  Shape s = hlo_shape_array(x->shape.dt, r, d->limit);
  HInstr *sl = opt_new(c, OP_SLICE, "slice", &s, 1, &x);
  sl->slice = d;
  return sl;
}

static HInstr *tk_expand(HComp *c, HInstr *in) {
  HInstr *x = in->ops[0];
  int r = x->shape.rank;
  Shape is = hlo_shape_array(DT_S32, r, x->shape.dims);
  HInstr *iota = opt_new(c, OP_IOTA, "iota", &is, 0, NULL);
  iota->iota_dim = r - 1;
  Shape leaves[2] = {x->shape, is};
  hlo_shape_set_default_layout(&leaves[0]);
  Shape ts = hlo_shape_tuple(c->mod->arena, 2, leaves);
  HInstr *ops[2] = {x, iota};
  HInstr *sort = opt_new(c, OP_SORT, "sort", &ts, 2, ops);
  sort->dims.n = 1;
  sort->dims.v[0] = r - 1;
  sort->is_stable = true;
  HComp *cmp = tk_comparator(c->mod, x->shape.dt, in->op == OP_CUSTOM_CALL || in->largest);
  hlo_instr_set_calls(sort, 1, &cmp);
  int64_t k = in->shape.tuple[0].dims[r - 1];
  HInstr *out[2];
  for (int i = 0; i < 2; i++) {
    HInstr *g = opt_new(c, OP_GET_TUPLE_ELEMENT, "get-tuple-element", &leaves[i], 1, &sort);
    g->tuple_index = i;
    out[i] = tk_first(c, g, k);
  }
  return opt_new(c, OP_TUPLE, "tuple", &in->shape, 2, out);
}

bool opt_topk_expand(HModule *m, PassCtx *pc) {
  bool changed = false;
  int nc = m->ncomps;
  for (int ci = 0; ci < nc; ci++) {
    HComp *c = m->comps[ci];
    int n = c->ninstrs;
    for (int i = 0; i < n; i++) {
      HInstr *in = c->instrs[i];
      if (in->nctrl || !(in->op == OP_TOPK || hlo_custom_call_is_topk(in))) continue;
      hlo_instr_replace_uses(in, tk_expand(c, in));
      changed = true;
    }
    if (changed) opt_comp_toposort(c, pc->scratch);
  }
  if (!changed) return false;
  opt_dce(m, pc);
  opt_module_sort_comps(m, pc->scratch);
  hlo_module_renumber(m);
  return true;
}
