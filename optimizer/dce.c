/* optimizer/dce.c: dead code elimination.
 *
 * Marks, per computation, every instruction reachable from the root through operands and
 * control predecessors (plus instructions with side effects, which are never removed), drops
 * the rest, then drops computations the entry no longer reaches. Parameters always stay: they
 * define the computation's signature. Requires a renumbered module; keeps it renumbered. */
#include "optimizer.h"

bool opt_dce(HModule *m, PassCtx *pc) {
  bool changed = false;
  for (int ci = 0; ci < m->ncomps; ci++) {
    HComp *c = m->comps[ci];
    hlo_comp_renumber(c);
    bool *live = hlo_arena_alloc(pc->scratch, (size_t)c->ninstrs + 1);
    /* instructions are in dependency order, so one backward sweep marks everything the
     * root needs without recursion */
    live[c->root->idx] = true;
    for (int i = c->ninstrs - 1; i >= 0; i--) {
      HInstr *in = c->instrs[i];
      if (in->op == OP_PARAMETER || (hlo_op_flags(in->op) & OPF_SIDE)) live[i] = true;
      if (!live[i]) continue;
      for (int k = 0; k < in->nops; k++)
        live[in->ops[k]->idx] = true;
      for (int k = 0; k < in->nctrl; k++)
        live[in->ctrl[k]->idx] = true;
    }
    int before = c->ninstrs;
    hlo_comp_filter(c, live);
    changed |= c->ninstrs != before;
  }
  changed |= hlo_module_remove_unreachable(m);
  return changed;
}
