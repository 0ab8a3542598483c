/* optimizer/inline_call.c: inline every `call` instruction.
 *
 * JAX wraps named functions (jax.nn.relu, user helpers) in `call` instructions; inlining
 * them gives the later passes one flat graph to simplify and fuse. For each computation
 * (callers after callees, as m->comps is ordered, so callees are already flat), the
 * instruction array is rebuilt: a call is replaced by clones of its callee's instructions with
 * the callee's parameters mapped to the call's operands, and every use of the call is
 * redirected to the clone of the callee's root. Callees left without callers are removed
 * by DCE afterwards. */
#include "optimizer.h"

#include <string.h>

static bool inline_in(HComp *c, PassCtx *pc) {
  bool any = false;
  for (int i = 0; i < c->ninstrs && !any; i++)
    any = c->instrs[i]->op == OP_CALL;
  if (!any) return false;
  int n = c->ninstrs;
  HInstr **old = hlo_arena_memdup(pc->scratch, c->instrs, sizeof(HInstr *) * (size_t)n);
  /* clones are appended to c; collect the new order in a separate list */
  HInstr **order = NULL;
  int norder = 0, cap = 0;
#define PUSH(x)                                                                                    \
  do {                                                                                             \
    if (norder == cap) {                                                                           \
      cap = cap ? cap * 2 : n + 16;                                                                \
      HInstr **g = hlo_arena_alloc(pc->scratch, sizeof(HInstr *) * (size_t)cap);                   \
      if (norder) memcpy(g, order, sizeof(HInstr *) * (size_t)norder);                             \
      order = g;                                                                                   \
    }                                                                                              \
    order[norder++] = (x);                                                                         \
  } while (0)
  for (int i = 0; i < n; i++)
    old[i]->aux = NULL;
  for (int i = 0; i < n; i++) {
    HInstr *in = old[i];
    /* operands may have been inlined calls: redirect to their replacement */
    for (int k = 0; k < in->nops; k++)
      if (in->ops[k]->aux) in->ops[k] = in->ops[k]->aux;
    if (in->op != OP_CALL || in->ncalls != 1) {
      PUSH(in);
      continue;
    }
    HComp *callee = in->calls[0];
    hlo_comp_renumber(callee);
    HInstr **map = hlo_arena_alloc(pc->scratch, sizeof(HInstr *) * (size_t)(callee->ninstrs + 1));
    for (int j = 0; j < callee->ninstrs; j++) {
      HInstr *ci = callee->instrs[j];
      if (ci->op == OP_PARAMETER) {
        if (ci->param_num < 0 || ci->param_num >= in->nops) {
          hlo_err_at(pc->err, in, "call passes %d operands but callee '%s' reads parameter %lld",
                     in->nops, callee->name, (long long)ci->param_num);
          return false;
        }
        map[j] = in->ops[ci->param_num];
        continue;
      }
      HInstr **ops = hlo_arena_alloc(pc->scratch, sizeof(HInstr *) * (size_t)(ci->nops + 1));
      for (int k = 0; k < ci->nops; k++)
        ops[k] = map[ci->ops[k]->idx];
      map[j] = hlo_instr_clone(c, ci, ops);
      PUSH(map[j]);
    }
    in->aux = map[callee->root->idx];
  }
#undef PUSH
  if (c->root->aux) c->root = c->root->aux;
  for (int i = 0; i < norder; i++) {
    HInstr *in = order[i];
    for (int k = 0; k < in->nctrl; k++)
      if (in->ctrl[k]->aux) in->ctrl[k] = in->ctrl[k]->aux;
  }
  for (int i = 0; i < n; i++)
    old[i]->aux = NULL;
  memcpy(c->instrs, order, sizeof(HInstr *) * (size_t)norder);
  c->ninstrs = norder;
  hlo_comp_renumber(c);
  return true;
}

bool opt_inline_call(HModule *m, PassCtx *pc) {
  bool changed = false;
  /* callees come before callers in m->comps, so nested calls flatten bottom-up */
  for (int i = 0; i < m->ncomps && !pc->err->set; i++)
    changed |= inline_in(m->comps[i], pc);
  return changed;
}
