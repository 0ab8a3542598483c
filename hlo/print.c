/* hlo/print.c: the HLO text writer, in XLA's short parsable style.
 *
 * Output is what hlo_parse_text reads back: `HloModule name, attrs`, then computations
 * `[ENTRY] name {` with one `[ROOT] name = shape opcode(operands), attr=value, ...` line per
 * instruction (no '%' prefixes, no operand shapes, no index comments). Attributes are
 * printed from the decoded HInstr fields in a fixed order close to XLA's (opcode-specific
 * attributes, called computations, control predecessors, verbatim attributes, metadata,
 * backend_config), so print -> parse -> print is the identity on text this printer wrote.
 *
 * Floats print like XLA's RoundTripFpToString: 6 significant digits when that reads back to
 * the same value, else 9 (f32, f16, bf16 via f32); 15 else 17 for f64; the fp8 types' own
 * max_digits10 (3 for f8e4m3fn, 2 for f8e5m2); `inf`, `-inf`, `nan`.
 * Strings are written with C escapes; a backend_config that is a balanced {...} blob is
 * written bare like XLA does, anything else quoted. */
#include "hlo.h"

#include <complex.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const HPrintOpts default_opts = {false, false, false};

static void print_shape(FILE *f, const Shape *s) {
  if (s->dt == DT_TUPLE) {
    fputc('(', f);
    for (int i = 0; i < s->ntuple; i++) {
      if (i) fputs(", ", f);
      print_shape(f, &s->tuple[i]);
    }
    fputc(')', f);
    return;
  }
  fprintf(f, "%s[", hlo_dtype_name(s->dt));
  for (int i = 0; i < s->rank; i++)
    fprintf(f, "%s%lld", i ? "," : "", (long long)s->dims[i]);
  fputc(']', f);
  if (s->dt == DT_TOKEN || !s->has_layout) return;
  if (s->rank == 0 && !s->layout_extra) return; /* scalars print without {} like XLA */
  fputc('{', f);
  for (int i = 0; i < s->rank; i++)
    fprintf(f, "%s%d", i ? "," : "", s->m2m[i]);
  if (s->layout_extra) fprintf(f, ":%s", s->layout_extra);
  fputc('}', f);
}

static void print_string(FILE *f, const char *s) {
  fputc('"', f);
  for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
    switch (*c) {
    case '\\': fputs("\\\\", f); break;
    case '"': fputs("\\\"", f); break;
    case '\n': fputs("\\n", f); break;
    case '\t': fputs("\\t", f); break;
    case '\r': fputs("\\r", f); break;
    default:
      if (*c < 0x20 || *c == 0x7f)
        fprintf(f, "\\%03o", *c);
      else
        fputc(*c, f);
    }
  }
  fputc('"', f);
}

/* Does s consist of exactly one balanced {...} group (strings skipped)? */
static bool is_bare_blob(const char *s) {
  if (*s != '{') return false;
  long depth = 0;
  for (const char *c = s; *c; c++) {
    if (*c == '"') {
      for (c++; *c && *c != '"'; c++)
        if (*c == '\\' && c[1]) c++;
      if (!*c) return false;
      continue;
    }
    if (*c == '{' || *c == '[' || *c == '(')
      depth++;
    else if (*c == '}' || *c == ']' || *c == ')') {
      if (--depth < 0) return false;
      if (depth == 0) return c[1] == 0;
    }
  }
  return false;
}

static void print_ilist(FILE *f, const IList *l) {
  fputc('{', f);
  for (int i = 0; i < l->n; i++)
    fprintf(f, "%s%lld", i ? "," : "", (long long)l->v[i]);
  fputc('}', f);
}

static void print_float(FILE *f, DType dt, double v) {
  if (isnan(v)) {
    fputs(signbit(v) ? "-nan" : "nan", f);
    return;
  }
  if (isinf(v)) {
    fputs(v < 0 ? "-inf" : "inf", f);
    return;
  }
  char buf[40];
  if (hlo_dtype_is_fp8(dt)) {
    /* XLA's RoundTripFpToString: %.*g with the type's max_digits10 (3 for f8e4m3fn, 2 for
       f8e5m2), enough to read back to the same fp8 value */
    snprintf(buf, sizeof buf, "%.*g", dt == DT_F8E4M3FN ? 3 : 2, v);
  } else if (dt == DT_F64) {
    snprintf(buf, sizeof buf, "%.15g", v);
    if (strtod(buf, NULL) != v) snprintf(buf, sizeof buf, "%.17g", v);
  } else {
    float x = (float)v;
    snprintf(buf, sizeof buf, "%.6g", (double)x);
    if (strtof(buf, NULL) != x) snprintf(buf, sizeof buf, "%.9g", (double)x);
  }
  fputs(buf, f);
}

static void print_elem(FILE *f, const Literal *l, int64_t i) {
  DType dt = l->shape.dt;
  switch (hlo_dtype_kind(dt)) {
  case DK_PRED: fputs(hlo_load_i64(dt, l->data, i) ? "true" : "false", f); return;
  case DK_SINT: fprintf(f, "%lld", (long long)hlo_load_i64(dt, l->data, i)); return;
  case DK_UINT: fprintf(f, "%llu", (unsigned long long)hlo_load_i64(dt, l->data, i)); return;
  case DK_FLOAT: print_float(f, dt, hlo_load_f64(dt, l->data, i)); return;
  case DK_COMPLEX: {
    double _Complex z = hlo_load_c128(dt, l->data, i);
    fputc('(', f);
    print_float(f, hlo_dtype_component(dt), creal(z));
    fputs(", ", f);
    print_float(f, hlo_dtype_component(dt), cimag(z));
    fputc(')', f);
    return;
  }
  case DK_OTHER: break;
  }
  fputs("?", f);
}

static void print_dim(FILE *f, const Literal *l, int d, int64_t *idx) {
  const Shape *s = &l->shape;
  bool inner = d + 1 == s->rank;
  fputc('{', f);
  if (!inner && s->dims[d]) fputc(' ', f);
  for (int64_t i = 0; i < s->dims[d]; i++) {
    if (i) fputs(", ", f);
    if (inner)
      print_elem(f, l, (*idx)++);
    else
      print_dim(f, l, d + 1, idx);
  }
  if (!inner && s->dims[d]) fputc(' ', f);
  fputc('}', f);
}

void hlo_print_literal(FILE *f, const Literal *l) {
  const Shape *s = &l->shape;
  if (s->dt == DT_TUPLE) {
    fputc('(', f);
    for (int i = 0; i < s->ntuple; i++) {
      if (i) fputs(", ", f);
      hlo_print_literal(f, l->elems[i]);
    }
    fputc(')', f);
    return;
  }
  if (!hlo_shape_is_array(s)) return;
  if (s->rank == 0) {
    print_elem(f, l, 0);
    return;
  }
  int64_t idx = 0;
  print_dim(f, l, 0, &idx);
}

static int64_t literal_elems(const Literal *l) {
  if (l->shape.dt != DT_TUPLE)
    return hlo_shape_is_array(&l->shape) ? hlo_shape_elems(&l->shape) : 0;
  int64_t n = 0;
  for (int i = 0; i < l->shape.ntuple; i++)
    n += literal_elems(l->elems[i]);
  return n;
}

static void print_window(FILE *f, const Window *w) {
  bool stride = false, pad = false, ldil = false, rdil = false, rev = false;
  for (int i = 0; i < w->n; i++) {
    const WinDim *d = &w->d[i];
    stride |= d->stride != 1;
    pad |= d->pad_lo != 0 || d->pad_hi != 0;
    ldil |= d->base_dil != 1;
    rdil |= d->win_dil != 1;
    rev |= d->reversal;
  }
  fputs("window={", f);
  if (w->n) {
    fputs("size=", f);
    for (int i = 0; i < w->n; i++)
      fprintf(f, "%s%lld", i ? "x" : "", (long long)w->d[i].size);
  }
  if (stride) {
    fputs(" stride=", f);
    for (int i = 0; i < w->n; i++)
      fprintf(f, "%s%lld", i ? "x" : "", (long long)w->d[i].stride);
  }
  if (pad) {
    fputs(" pad=", f);
    for (int i = 0; i < w->n; i++)
      fprintf(f, "%s%lld_%lld", i ? "x" : "", (long long)w->d[i].pad_lo, (long long)w->d[i].pad_hi);
  }
  if (ldil) {
    fputs(" lhs_dilate=", f);
    for (int i = 0; i < w->n; i++)
      fprintf(f, "%s%lld", i ? "x" : "", (long long)w->d[i].base_dil);
  }
  if (rdil) {
    fputs(" rhs_dilate=", f);
    for (int i = 0; i < w->n; i++)
      fprintf(f, "%s%lld", i ? "x" : "", (long long)w->d[i].win_dil);
  }
  if (rev) {
    fputs(" rhs_reversal=", f);
    for (int i = 0; i < w->n; i++)
      fprintf(f, "%s%d", i ? "x" : "", w->d[i].reversal ? 1 : 0);
  }
  fputc('}', f);
}

/* One label string: c0 at d0, c1 at d1, spatial k at sp[k]. */
static void print_labels(FILE *f, int64_t d0, char c0, int64_t d1, char c1, const IList *sp) {
  int n = sp->n + 2;
  char buf[HLO_MAX_RANK + 3];
  if (n > HLO_MAX_RANK + 2) n = HLO_MAX_RANK + 2;
  memset(buf, '?', (size_t)n);
  buf[n] = 0;
  if (d0 >= 0 && d0 < n) buf[d0] = c0;
  if (d1 >= 0 && d1 < n) buf[d1] = c1;
  for (int k = 0; k < sp->n; k++)
    if (sp->v[k] >= 0 && sp->v[k] < n) buf[sp->v[k]] = (char)('0' + k);
  fputs(buf, f);
}

static void print_dim_labels(FILE *f, const ConvDims *c) {
  fputs("dim_labels=", f);
  print_labels(f, c->in_batch, 'b', c->in_feat, 'f', &c->in_sp);
  fputc('_', f);
  print_labels(f, c->k_out, 'o', c->k_in, 'i', &c->k_sp);
  fputs("->", f);
  print_labels(f, c->out_batch, 'b', c->out_feat, 'f', &c->out_sp);
}

static void attr_ilist(FILE *f, const char *name, const IList *l) {
  fprintf(f, ", %s=", name);
  print_ilist(f, l);
}

static void attr_comp(FILE *f, const char *name, const HComp *c) {
  fprintf(f, ", %s=%s", name, c ? c->name : "<null>");
}

static void print_calls(FILE *f, const HInstr *in) {
  int n = in->ncalls;
  if (!n) return;
  HOp op = in->op;
  if (op == OP_WHILE) {
    if (n >= 2) attr_comp(f, "condition", in->calls[1]);
    attr_comp(f, "body", in->calls[0]);
  } else if (op == OP_CONDITIONAL) {
    if (n == 2 && in->nops > 0 && in->ops[0]->shape.dt == DT_PRED) {
      attr_comp(f, "true_computation", in->calls[0]);
      attr_comp(f, "false_computation", in->calls[1]);
      return;
    }
    fputs(", branch_computations={", f);
    for (int i = 0; i < n; i++)
      fprintf(f, "%s%s", i ? ", " : "", in->calls[i]->name);
    fputc('}', f);
  } else if (op == OP_SELECT_AND_SCATTER) {
    attr_comp(f, "select", in->calls[0]);
    if (n >= 2) attr_comp(f, "scatter", in->calls[1]);
  } else if (op == OP_CUSTOM_CALL) {
    fputs(", called_computations={", f);
    for (int i = 0; i < n; i++)
      fprintf(f, "%s%s", i ? ", " : "", in->calls[i]->name);
    fputc('}', f);
  } else if (op == OP_FUSION || op == OP_ASYNC_START || op == OP_ASYNC_UPDATE ||
             op == OP_ASYNC_DONE) {
    attr_comp(f, "calls", in->calls[0]);
  } else {
    attr_comp(f, "to_apply", in->calls[0]);
  }
}

void hlo_print_instr(FILE *f, const HInstr *in, const HPrintOpts *o) {
  if (!o) o = &default_opts;
  HOp op = in->op;
  if (in->parent && in->parent->root == in) fputs("ROOT ", f);
  fprintf(f, "%s = ", in->name);
  print_shape(f, &in->shape);
  fprintf(f, " %s(", hlo_op_name(op));
  if (op == OP_PARAMETER) {
    fprintf(f, "%lld", (long long)in->param_num);
  } else if (op == OP_CONSTANT) {
    /* a NULL literal was elided in the input: print it the way it was read */
    if (!in->literal || (o->elide_large && literal_elems(in->literal) > 16))
      fputs("{...}", f);
    else
      hlo_print_literal(f, in->literal);
  }
  for (int i = 0; i < in->nops; i++)
    fprintf(f, "%s%s", i ? ", " : "", in->ops[i]->name);
  fputc(')', f);

  if (op == OP_GET_TUPLE_ELEMENT) fprintf(f, ", index=%lld", (long long)in->tuple_index);
  if (op == OP_IOTA) fprintf(f, ", iota_dimension=%lld", (long long)in->iota_dim);
  if (in->dims.n || op == OP_BROADCAST || op == OP_TRANSPOSE || op == OP_REDUCE ||
      op == OP_REVERSE || op == OP_CONCATENATE || op == OP_SORT || op == OP_MAP)
    attr_ilist(f, "dimensions", &in->dims);
  if (in->dslice_sizes.n || op == OP_DYNAMIC_SLICE)
    attr_ilist(f, "dynamic_slice_sizes", &in->dslice_sizes);
  if (in->slice) {
    fputs(", slice={", f);
    for (int i = 0; i < in->slice->n; i++) {
      fprintf(f, "%s[%lld:%lld", i ? ", " : "", (long long)in->slice->start[i],
              (long long)in->slice->limit[i]);
      if (in->slice->stride[i] != 1) fprintf(f, ":%lld", (long long)in->slice->stride[i]);
      fputc(']', f);
    }
    fputc('}', f);
  }
  if (in->pad) {
    fputs(", padding=", f);
    for (int i = 0; i < in->pad->n; i++) {
      fprintf(f, "%s%lld_%lld", i ? "x" : "", (long long)in->pad->lo[i], (long long)in->pad->hi[i]);
      if (in->pad->interior[i]) fprintf(f, "_%lld", (long long)in->pad->interior[i]);
    }
  }
  if (op == OP_COMPARE) {
    fprintf(f, ", direction=%s", hlo_cmp_dir_name(in->cmp_dir));
    if (in->cmp_type != CMPT_DEFAULT) fprintf(f, ", type=%s", hlo_cmp_type_name(in->cmp_type));
  }
  if (in->window) {
    fputs(", ", f);
    print_window(f, in->window);
  }
  if (in->conv) {
    fputs(", ", f);
    print_dim_labels(f, in->conv);
  }
  if (in->feature_groups != 1)
    fprintf(f, ", feature_group_count=%lld", (long long)in->feature_groups);
  if (in->batch_groups != 1) fprintf(f, ", batch_group_count=%lld", (long long)in->batch_groups);
  if (in->dot) {
    if (in->dot->lhs_batch.n) attr_ilist(f, "lhs_batch_dims", &in->dot->lhs_batch);
    if (in->dot->lhs_contract.n) attr_ilist(f, "lhs_contracting_dims", &in->dot->lhs_contract);
    if (in->dot->rhs_batch.n) attr_ilist(f, "rhs_batch_dims", &in->dot->rhs_batch);
    if (in->dot->rhs_contract.n) attr_ilist(f, "rhs_contracting_dims", &in->dot->rhs_contract);
  }
  if (in->precision.n) {
    static const char *const names[] = {"default", "high", "highest"};
    fputs(", operand_precision={", f);
    for (int i = 0; i < in->precision.n; i++) {
      int64_t v = in->precision.v[i];
      fprintf(f, "%s%s", i ? "," : "", v >= 0 && v <= 2 ? names[v] : "default");
    }
    fputc('}', f);
  }
  if (in->dot_alg != DALG_UNSET) fprintf(f, ", algorithm=%s", hlo_dot_alg_name(in->dot_alg));
  if (in->gather) {
    const GatherDims *g = in->gather;
    attr_ilist(f, "offset_dims", &g->offset_dims);
    attr_ilist(f, "collapsed_slice_dims", &g->collapsed_slice_dims);
    attr_ilist(f, "start_index_map", &g->start_index_map);
    if (g->operand_batching_dims.n)
      attr_ilist(f, "operand_batching_dims", &g->operand_batching_dims);
    if (g->start_indices_batching_dims.n)
      attr_ilist(f, "start_indices_batching_dims", &g->start_indices_batching_dims);
    fprintf(f, ", index_vector_dim=%lld", (long long)g->index_vector_dim);
    attr_ilist(f, "slice_sizes", &g->slice_sizes);
  }
  if (in->scatter) {
    const ScatterDims *s = in->scatter;
    attr_ilist(f, "update_window_dims", &s->update_window_dims);
    attr_ilist(f, "inserted_window_dims", &s->inserted_window_dims);
    attr_ilist(f, "scatter_dims_to_operand_dims", &s->scatter_dims_to_operand_dims);
    if (s->input_batching_dims.n) attr_ilist(f, "input_batching_dims", &s->input_batching_dims);
    if (s->scatter_indices_batching_dims.n)
      attr_ilist(f, "scatter_indices_batching_dims", &s->scatter_indices_batching_dims);
    fprintf(f, ", index_vector_dim=%lld", (long long)s->index_vector_dim);
  }
  if (in->indices_are_sorted) fputs(", indices_are_sorted=true", f);
  if (in->unique_indices) fputs(", unique_indices=true", f);
  if (op == OP_TOPK)
    fprintf(f, ", k=%lld, largest=%s", (long long)in->topk_k, in->largest ? "true" : "false");
  if (in->is_stable) fputs(", is_stable=true", f);
  if (op == OP_FFT) {
    fprintf(f, ", fft_type=%s", hlo_fft_type_name(in->fft_type));
    attr_ilist(f, "fft_length", &in->fft_length);
  }
  if (op == OP_REDUCE_PRECISION)
    fprintf(f, ", exponent_bits=%d, mantissa_bits=%d", in->exponent_bits, in->mantissa_bits);
  if (op == OP_BATCH_NORM_TRAINING || op == OP_BATCH_NORM_INFERENCE || op == OP_BATCH_NORM_GRAD) {
    fputs(", epsilon=", f);
    print_float(f, DT_F32, in->epsilon);
    fprintf(f, ", feature_index=%lld", (long long)in->feature_index);
  }
  if (op == OP_FUSION && in->fusion_kind != FK_NONE)
    fprintf(f, ", kind=%s", hlo_fusion_kind_name(in->fusion_kind));
  if (in->custom_call_target) {
    fputs(", custom_call_target=", f);
    print_string(f, in->custom_call_target);
  }
  print_calls(f, in);
  if (in->nctrl) {
    fputs(", control-predecessors={", f);
    for (int i = 0; i < in->nctrl; i++)
      fprintf(f, "%s%s", i ? ", " : "", in->ctrl[i]->name);
    fputc('}', f);
  }
  if (!o->no_raw_attrs)
    for (int i = 0; i < in->nraw; i++)
      fprintf(f, ", %s=%s", in->raw[i].name, in->raw[i].value);
  if (!o->no_metadata && (in->op_type || in->op_name || in->source_file || in->source_line)) {
    const char *sep = "";
    fputs(", metadata={", f);
    if (in->op_type) {
      fputs("op_type=", f);
      print_string(f, in->op_type);
      sep = " ";
    }
    if (in->op_name) {
      fprintf(f, "%sop_name=", sep);
      print_string(f, in->op_name);
      sep = " ";
    }
    if (in->source_file) {
      fprintf(f, "%ssource_file=", sep);
      print_string(f, in->source_file);
      sep = " ";
    }
    if (in->source_line) fprintf(f, "%ssource_line=%lld", sep, (long long)in->source_line);
    fputc('}', f);
  }
  if (in->backend_config) {
    fputs(", backend_config=", f);
    if (is_bare_blob(in->backend_config))
      fputs(in->backend_config, f);
    else
      print_string(f, in->backend_config);
  }
}

void hlo_print_comp(FILE *f, const HComp *c, const HPrintOpts *o) {
  if (c->mod && c->mod->entry == c) fputs("ENTRY ", f);
  fprintf(f, "%s {\n", c->name);
  for (int i = 0; i < c->ninstrs; i++) {
    fputs("  ", f);
    hlo_print_instr(f, c->instrs[i], o);
    fputc('\n', f);
  }
  fputs("}\n", f);
}

void hlo_print_module(FILE *f, const HModule *m, const HPrintOpts *o) {
  if (!o) o = &default_opts;
  fprintf(f, "HloModule %s", m->name);
  /* is_scheduled first, as XLA prints it */
  for (int i = 0; i < m->nraw; i++)
    if (!strcmp(m->raw[i].name, "is_scheduled"))
      fprintf(f, ", %s=%s", m->raw[i].name, m->raw[i].value);
  if (m->has_entry_layout) {
    fputs(", entry_computation_layout={(", f);
    for (int i = 0; i < m->nentry_layout; i++) {
      if (i) fputs(", ", f);
      print_shape(f, &m->entry_layout_params[i]);
    }
    fputs(")->", f);
    print_shape(f, &m->entry_layout_result);
    fputc('}', f);
  }
  if (m->nalias) {
    fputs(", input_output_alias={ ", f);
    for (int i = 0; i < m->nalias; i++) {
      const HAlias *a = &m->alias[i];
      if (i) fputs(", ", f);
      print_ilist(f, &a->out_index);
      fprintf(f, ": (%lld, ", (long long)a->param);
      print_ilist(f, &a->param_index);
      fprintf(f, ", %s)", a->kind == 2 ? "must-alias" : "may-alias");
    }
    fputs(" }", f);
  }
  for (int i = 0; i < m->nraw; i++)
    if (strcmp(m->raw[i].name, "is_scheduled") && !o->no_raw_attrs)
      fprintf(f, ", %s=%s", m->raw[i].name, m->raw[i].value);
  fputs("\n\n", f);
  for (int i = 0; i < m->ncomps; i++) {
    hlo_print_comp(f, m->comps[i], o);
    fputc('\n', f);
  }
}

char *hlo_module_text(const HModule *m, const HPrintOpts *o, size_t *len) {
  char *buf = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&buf, &n);
  if (!f) return NULL;
  hlo_print_module(f, m, o);
  fclose(f);
  if (len) *len = n;
  return buf;
}
