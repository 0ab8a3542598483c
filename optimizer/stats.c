/* optimizer/stats.c: kernel counts for --stats and for comparing with XLA.
 *
 * A kernel is what a backend launches or loops over separately: every fusion, and every
 * unfused instruction that computes or moves data (dot, convolution, reduce, reduce-window,
 * gather, scatter, sort, an unfused elementwise op, a transpose, ...). Parameters, constants,
 * tuples, get-tuple-elements, bitcasts, bitcast-like reshapes and scheduling-only ops
 * (after-all, add-dependency, opt-barrier) are free. Control flow counts its bodies: the
 * kernels of while bodies and conditions and of conditional branches are added once each
 * (not per iteration), the control-flow instruction itself is free. This matches how the
 * XLA comparison counts fusions, custom calls and remaining unfused ops in the entry. */
#include "optimizer.h"

#include <string.h>

static bool is_free(const HInstr *in) {
  static const HOp free_ops[] = {OP_PARAMETER,         OP_CONSTANT,    OP_TUPLE,
                                 OP_GET_TUPLE_ELEMENT, OP_BITCAST,     OP_AFTER_ALL,
                                 OP_ADD_DEPENDENCY,    OP_OPT_BARRIER, OP_WHILE,
                                 OP_CONDITIONAL,       OP_CALL,        OP_PARTITION_ID,
                                 OP_REPLICA_ID,        OP_DOMAIN};
  for (size_t i = 0; i < sizeof free_ops / sizeof *free_ops; i++)
    if (free_ops[i] == in->op) return true;
  return in->op == OP_RESHAPE && opt_is_bitcast_reshape(in);
}

static void count_comp(const HComp *c, OptStats *s, int depth) {
  if (depth > 16) return;
  for (int i = 0; i < c->ninstrs; i++) {
    const HInstr *in = c->instrs[i];
    s->instrs++;
    if (in->op == OP_WHILE || in->op == OP_CONDITIONAL || in->op == OP_CALL) {
      for (int k = 0; k < in->ncalls; k++)
        count_comp(in->calls[k], s, depth + 1);
      continue;
    }
    if (is_free(in)) continue;
    s->kernels++;
    if (in->op == OP_FUSION) {
      s->fusions++;
      if ((int)in->fusion_kind >= 0 && (int)in->fusion_kind < 5) s->by_kind[in->fusion_kind]++;
      if (in->ncalls && in->calls[0]->root->op == OP_TUPLE) s->multi_output++;
      continue;
    }
    s->unfused++;
    if (in->op == OP_DOT || in->op == OP_CONVOLUTION) s->unfused_dots++;
  }
}

void opt_stats(const HModule *m, OptStats *s) {
  memset(s, 0, sizeof *s);
  if (m->entry) count_comp(m->entry, s, 0);
}

void opt_stats_print(FILE *f, const OptStats *s) {
  char custom[32] = "";
  if (s->by_kind[FK_CUSTOM]) snprintf(custom, sizeof custom, ", kCustom %d", s->by_kind[FK_CUSTOM]);
  fprintf(f,
          "kernels %d: fusions %d (kLoop %d, kInput %d, kOutput %d%s; multi-output %d), "
          "unfused %d (dot/convolution %d); %d instructions\n",
          s->kernels, s->fusions, s->by_kind[FK_LOOP], s->by_kind[FK_INPUT], s->by_kind[FK_OUTPUT],
          custom, s->multi_output, s->unfused, s->unfused_dots, s->instrs);
}
