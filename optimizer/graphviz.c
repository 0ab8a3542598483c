/* optimizer/graphviz.c: the entry computation as a Graphviz graph.
 *
 * One node per instruction: fusions are boxes labelled with their name, kind and the ops
 * inside (in order, repeated ops counted: "multiply x3"); dots and convolutions are bold
 * boxes, other kernels plain boxes, parameters and constants ellipses. Each edge goes from
 * an operand to its user and is labelled with the shape that flows along it. Large graphs
 * stay readable because fusion internals are summarised rather than drawn. */
#include "optimizer.h"

#include <string.h>

/* Print s with the characters Graphviz treats specially inside "..." escaped. */
static void put_escaped(FILE *f, const char *s) {
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') fputc('\\', f);
    fputc(*s, f);
  }
}

static void fusion_label(FILE *f, const HInstr *in) {
  fprintf(f, "\\n%s", hlo_fusion_kind_name(in->fusion_kind));
  if (in->ncalls < 1) return;
  const HComp *fc = in->calls[0];
  int line = 0;
  for (int i = 0; i < fc->ninstrs; i++) {
    HOp op = fc->instrs[i]->op;
    if (op == OP_PARAMETER || op == OP_TUPLE) continue;
    bool seen = false;
    for (int j = 0; j < i && !seen; j++)
      seen = fc->instrs[j]->op == op;
    if (seen) continue;
    int n = 0;
    for (int j = i; j < fc->ninstrs; j++)
      n += fc->instrs[j]->op == op;
    fputs(line++ % 3 == 0 ? "\\n" : ", ", f);
    fputs(hlo_op_name(op), f);
    if (n > 1) fprintf(f, " x%d", n);
  }
}

void opt_write_dot(FILE *f, const HComp *c) {
  char buf[512];
  fputs("digraph hlo {\n  rankdir=TB;\n  node [fontname=\"monospace\", fontsize=10];\n"
        "  edge [fontname=\"monospace\", fontsize=8];\n",
        f);
  for (int i = 0; i < c->ninstrs; i++) {
    const HInstr *in = c->instrs[i];
    fprintf(f, "  n%d [label=\"", i);
    put_escaped(f, in->name);
    if (in->op == OP_FUSION) {
      fusion_label(f, in);
    } else {
      fputs("\\n", f);
      fputs(hlo_op_name(in->op), f);
    }
    fputs("\"", f);
    if (in->op == OP_PARAMETER || in->op == OP_CONSTANT)
      fputs(", shape=ellipse, color=gray40", f);
    else if (in->op == OP_FUSION)
      fputs(", shape=box, style=filled, fillcolor=lightblue", f);
    else if (in->op == OP_DOT || in->op == OP_CONVOLUTION)
      fputs(", shape=box, style=bold", f);
    else
      fputs(", shape=box", f);
    if (in == c->root) fputs(", peripheries=2", f);
    fputs("];\n", f);
  }
  for (int i = 0; i < c->ninstrs; i++) {
    const HInstr *in = c->instrs[i];
    for (int k = 0; k < in->nops; k++) {
      hlo_shape_snprint(buf, sizeof buf, &in->ops[k]->shape, false);
      fprintf(f, "  n%d -> n%d [label=\"", in->ops[k]->idx, i);
      put_escaped(f, buf);
      fputs("\"];\n", f);
    }
  }
  fputs("}\n", f);
}
