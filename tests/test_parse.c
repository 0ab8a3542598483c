/* tests/test_parse.c: the HLO text parser and printer.
 *
 * (a) every .hlo file of the corpus parses (constants a dump elided as {...} read with their
 *     value marked missing); (b) print -> parse -> print is byte-identical and the
 *     reparsed module is structurally equal to the first; (c) small inline modules check that
 *     each attribute is decoded right; (d) bad input (truncations, unknown names, wrong
 *     literals, garbage, deep nesting) gives NULL and a located message. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hlo.h"

/* ------------------------------------------------------------------ helpers */

typedef struct Files {
  int n;
  char *path[256];
} Files;

static void collect(Files *fs, const char *dir) {
  DIR *d = opendir(dir);
  cr_assert(d, "cannot open %s", dir);
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    char sub[1024];
    snprintf(sub, sizeof sub, "%s/%s", dir, e->d_name);
    DIR *d2 = opendir(sub);
    if (!d2) continue;
    struct dirent *f;
    while ((f = readdir(d2))) {
      size_t n = strlen(f->d_name);
      if (n > 4 && !strcmp(f->d_name + n - 4, ".hlo") && fs->n < 256) {
        char p[1400];
        snprintf(p, sizeof p, "%s/%s", sub, f->d_name);
        fs->path[fs->n++] = strdup(p);
      }
    }
    closedir(d2);
  }
  closedir(d);
}

static Files corpus_files(void) {
  Files fs = {0};
  collect(&fs, HLOC_CORPUS_DIR "/fixtures");
  collect(&fs, HLOC_CORPUS_DIR "/bench");
  return fs;
}

static void files_free(Files *fs) {
  for (int i = 0; i < fs->n; i++)
    free(fs->path[i]);
}

static char *slurp(const char *path, size_t *len) {
  char *buf;
  HErr err = {0};
  cr_assert(hlo_read_file(path, &buf, len, &err), "%s", err.msg);
  return buf;
}

static char *print_str(const HModule *m, const HPrintOpts *o, size_t *len) {
  char *b = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&b, &n);
  hlo_print_module(f, m, o);
  fclose(f);
  if (len) *len = n;
  return b;
}

static HModule *parse_ok(const char *text) {
  HErr err = {0};
  HModule *m = hlo_parse_text(text, strlen(text), "t.hlo", &err);
  cr_assert(m, "parse failed: %s", err.msg);
  cr_assert(!err.set);
  return m;
}

/* Parse expecting failure; the message must contain every given substring. */
static void parse_bad(const char *text, size_t len, const char *const *subs) {
  HErr err = {0};
  HModule *m = hlo_parse_text(text, len, "bad.hlo", &err);
  cr_assert(!m, "expected an error for: %.200s", text);
  cr_assert(err.set);
  for (; *subs; subs++)
    cr_expect(strstr(err.msg, *subs), "message '%s' lacks '%s'", err.msg, *subs);
}

#define BAD(text, ...) parse_bad(text, strlen(text), (const char *const[]){__VA_ARGS__, NULL})

static HInstr *find(const HModule *m, const char *name) {
  for (int i = 0; i < m->ncomps; i++)
    for (int j = 0; j < m->comps[i]->ninstrs; j++)
      if (!strcmp(m->comps[i]->instrs[j]->name, name)) return m->comps[i]->instrs[j];
  cr_assert_fail("no instruction %s", name);
  return NULL;
}

static bool str_eq(const char *a, const char *b) { return a == b || (a && b && !strcmp(a, b)); }

static bool ilist_eq(const IList *a, const IList *b) {
  if (a->n != b->n) return false;
  for (int i = 0; i < a->n; i++)
    if (a->v[i] != b->v[i]) return false;
  return true;
}

static bool ilist_is(const IList *l, int n, ...) {
  va_list ap;
  va_start(ap, n);
  bool ok = l->n == n;
  for (int i = 0; i < n; i++) {
    int64_t v = va_arg(ap, int);
    if (ok && l->v[i] != v) ok = false;
  }
  va_end(ap);
  return ok;
}

static bool shape_same(const Shape *a, const Shape *b) {
  if (!hlo_shape_eq_layout(a, b) || a->has_layout != b->has_layout ||
      !str_eq(a->layout_extra, b->layout_extra))
    return false;
  if (a->dt == DT_TUPLE)
    for (int i = 0; i < a->ntuple; i++)
      if (!shape_same(&a->tuple[i], &b->tuple[i])) return false;
  return true;
}

static bool literal_same(const Literal *a, const Literal *b) {
  if (!a || !b) return a == b;
  if (!shape_same(&a->shape, &b->shape)) return false;
  if (a->shape.dt == DT_TUPLE) {
    for (int i = 0; i < a->shape.ntuple; i++)
      if (!literal_same(a->elems[i], b->elems[i])) return false;
    return true;
  }
  return !memcmp(a->data, b->data, hlo_shape_bytes(&a->shape));
}

static bool window_same(const Window *a, const Window *b) {
  if (!a || !b) return a == b;
  if (a->n != b->n) return false;
  for (int i = 0; i < a->n; i++) {
    const WinDim *x = &a->d[i], *y = &b->d[i];
    if (x->size != y->size || x->stride != y->stride || x->pad_lo != y->pad_lo ||
        x->pad_hi != y->pad_hi || x->win_dil != y->win_dil || x->base_dil != y->base_dil ||
        x->reversal != y->reversal)
      return false;
  }
  return true;
}

static bool conv_same(const ConvDims *a, const ConvDims *b) {
  if (!a || !b) return a == b;
  return a->in_batch == b->in_batch && a->in_feat == b->in_feat && a->k_in == b->k_in &&
         a->k_out == b->k_out && a->out_batch == b->out_batch && a->out_feat == b->out_feat &&
         ilist_eq(&a->in_sp, &b->in_sp) && ilist_eq(&a->k_sp, &b->k_sp) &&
         ilist_eq(&a->out_sp, &b->out_sp);
}

/* Field-by-field comparison of two instructions; reports the first difference. */
static void expect_instr_same(const HInstr *a, const HInstr *b) {
  const char *n = a->name;
  cr_assert(str_eq(a->name, b->name), "%s vs %s", a->name, b->name);
  cr_expect_eq(a->op, b->op, "%s: opcode", n);
  cr_expect(shape_same(&a->shape, &b->shape), "%s: shape", n);
  cr_assert_eq(a->nops, b->nops, "%s: operand count", n);
  for (int i = 0; i < a->nops; i++)
    cr_expect(str_eq(a->ops[i]->name, b->ops[i]->name), "%s: operand %d", n, i);
  cr_assert_eq(a->ncalls, b->ncalls, "%s: call count", n);
  for (int i = 0; i < a->ncalls; i++)
    cr_expect(str_eq(a->calls[i]->name, b->calls[i]->name), "%s: call %d", n, i);
  cr_assert_eq(a->nctrl, b->nctrl, "%s: control count", n);
  for (int i = 0; i < a->nctrl; i++)
    cr_expect(str_eq(a->ctrl[i]->name, b->ctrl[i]->name), "%s: ctrl %d", n, i);
  cr_expect_eq(a->param_num, b->param_num, "%s", n);
  cr_expect_eq(a->tuple_index, b->tuple_index, "%s", n);
  cr_expect_eq(a->iota_dim, b->iota_dim, "%s", n);
  cr_expect(ilist_eq(&a->dims, &b->dims), "%s: dims", n);
  cr_expect(ilist_eq(&a->dslice_sizes, &b->dslice_sizes), "%s: dynamic_slice_sizes", n);
  cr_expect(literal_same(a->literal, b->literal), "%s: literal", n);
  cr_expect(window_same(a->window, b->window), "%s: window", n);
  cr_expect(conv_same(a->conv, b->conv), "%s: dim_labels", n);
  cr_expect_eq(a->feature_groups, b->feature_groups, "%s", n);
  cr_expect_eq(a->batch_groups, b->batch_groups, "%s", n);
  cr_expect_eq(!a->dot, !b->dot, "%s: dot", n);
  if (a->dot && b->dot)
    cr_expect(ilist_eq(&a->dot->lhs_batch, &b->dot->lhs_batch) &&
                  ilist_eq(&a->dot->rhs_batch, &b->dot->rhs_batch) &&
                  ilist_eq(&a->dot->lhs_contract, &b->dot->lhs_contract) &&
                  ilist_eq(&a->dot->rhs_contract, &b->dot->rhs_contract),
              "%s: dot dims", n);
  cr_expect(ilist_eq(&a->precision, &b->precision), "%s: precision", n);
  cr_expect_eq(!a->slice, !b->slice, "%s: slice", n);
  if (a->slice && b->slice)
    cr_expect(!memcmp(a->slice, b->slice, sizeof *a->slice), "%s: slice", n);
  cr_expect_eq(!a->pad, !b->pad, "%s: pad", n);
  if (a->pad && b->pad) cr_expect(!memcmp(a->pad, b->pad, sizeof *a->pad), "%s: pad", n);
  cr_expect_eq(!a->gather, !b->gather, "%s: gather", n);
  if (a->gather && b->gather) {
    const GatherDims *x = a->gather, *y = b->gather;
    cr_expect(ilist_eq(&x->offset_dims, &y->offset_dims) &&
                  ilist_eq(&x->collapsed_slice_dims, &y->collapsed_slice_dims) &&
                  ilist_eq(&x->start_index_map, &y->start_index_map) &&
                  ilist_eq(&x->operand_batching_dims, &y->operand_batching_dims) &&
                  ilist_eq(&x->start_indices_batching_dims, &y->start_indices_batching_dims) &&
                  x->index_vector_dim == y->index_vector_dim &&
                  ilist_eq(&x->slice_sizes, &y->slice_sizes),
              "%s: gather dims", n);
  }
  cr_expect_eq(!a->scatter, !b->scatter, "%s: scatter", n);
  if (a->scatter && b->scatter) {
    const ScatterDims *x = a->scatter, *y = b->scatter;
    cr_expect(ilist_eq(&x->update_window_dims, &y->update_window_dims) &&
                  ilist_eq(&x->inserted_window_dims, &y->inserted_window_dims) &&
                  ilist_eq(&x->scatter_dims_to_operand_dims, &y->scatter_dims_to_operand_dims) &&
                  ilist_eq(&x->input_batching_dims, &y->input_batching_dims) &&
                  ilist_eq(&x->scatter_indices_batching_dims, &y->scatter_indices_batching_dims) &&
                  x->index_vector_dim == y->index_vector_dim,
              "%s: scatter dims", n);
  }
  cr_expect(a->cmp_dir == b->cmp_dir && a->cmp_type == b->cmp_type, "%s: compare", n);
  cr_expect_eq(a->fusion_kind, b->fusion_kind, "%s", n);
  cr_expect(a->is_stable == b->is_stable && a->indices_are_sorted == b->indices_are_sorted &&
                a->unique_indices == b->unique_indices,
            "%s: flags", n);
  cr_expect(a->exponent_bits == b->exponent_bits && a->mantissa_bits == b->mantissa_bits, "%s", n);
  cr_expect(a->epsilon == b->epsilon && a->feature_index == b->feature_index, "%s", n);
  cr_expect(str_eq(a->custom_call_target, b->custom_call_target), "%s: target", n);
  cr_expect(str_eq(a->backend_config, b->backend_config), "%s: backend_config", n);
  cr_expect(str_eq(a->op_type, b->op_type) && str_eq(a->op_name, b->op_name) &&
                str_eq(a->source_file, b->source_file) && a->source_line == b->source_line,
            "%s: metadata", n);
  cr_assert_eq(a->nraw, b->nraw, "%s: raw attribute count", n);
  for (int i = 0; i < a->nraw; i++)
    cr_expect(str_eq(a->raw[i].name, b->raw[i].name) && str_eq(a->raw[i].value, b->raw[i].value),
              "%s: raw attribute %s", n, a->raw[i].name);
  cr_expect_eq(a->parent->root == a, b->parent->root == b, "%s: root", n);
}

static void expect_module_same(const HModule *a, const HModule *b) {
  cr_expect(str_eq(a->name, b->name));
  cr_assert_eq(a->ncomps, b->ncomps);
  cr_expect(str_eq(a->entry->name, b->entry->name));
  cr_expect_eq(a->has_entry_layout, b->has_entry_layout);
  cr_assert_eq(a->nentry_layout, b->nentry_layout);
  for (int i = 0; i < a->nentry_layout; i++)
    cr_expect(shape_same(&a->entry_layout_params[i], &b->entry_layout_params[i]));
  if (a->has_entry_layout) cr_expect(shape_same(&a->entry_layout_result, &b->entry_layout_result));
  cr_assert_eq(a->nalias, b->nalias);
  cr_assert_eq(a->nraw, b->nraw);
  for (int i = 0; i < a->nraw; i++)
    cr_expect(str_eq(a->raw[i].name, b->raw[i].name) && str_eq(a->raw[i].value, b->raw[i].value));
  for (int i = 0; i < a->ncomps; i++) {
    const HComp *x = a->comps[i], *y = b->comps[i];
    cr_assert(str_eq(x->name, y->name), "computation %d: %s vs %s", i, x->name, y->name);
    cr_expect_eq(x->is_fusion, y->is_fusion, "%s", x->name);
    cr_expect_eq(x->nparams, y->nparams, "%s", x->name);
    cr_assert_eq(x->ninstrs, y->ninstrs, "%s", x->name);
    for (int j = 0; j < x->ninstrs; j++)
      expect_instr_same(x->instrs[j], y->instrs[j]);
  }
}

/* Invariants every parsed module satisfies. */
static void expect_well_formed(const HModule *m) {
  cr_assert(m->entry);
  for (int i = 0; i < m->ncomps; i++) {
    const HComp *c = m->comps[i];
    cr_expect_eq(c->idx, i);
    cr_assert(c->root, "%s has no root", c->name);
    cr_expect_eq(c->root->parent, c);
    for (int j = 0; j < c->ninstrs; j++) {
      const HInstr *in = c->instrs[j];
      cr_expect_eq(in->idx, j);
      for (int k = 0; k < in->nops; k++)
        cr_expect(in->ops[k]->parent == c && in->ops[k]->idx < j, "%s: operand %d out of order",
                  in->name, k);
      for (int k = 0; k < in->ncalls; k++)
        cr_expect(in->calls[k]->idx < i, "%s calls %s defined later", in->name, in->calls[k]->name);
      if (in->op == OP_CONSTANT && in->literal)
        cr_expect(hlo_shape_eq(&in->literal->shape, &in->shape), "%s: literal shape", in->name);
    }
    for (int k = 0; k < c->nparams; k++)
      cr_expect(c->params[k] && c->params[k]->param_num == k);
  }
}

/* ------------------------------------------------------------------ (a), (b) corpus */

Test(parse, corpus_parses) {
  Files fs = corpus_files();
  cr_assert_geq(fs.n, 40, "found only %d corpus .hlo files", fs.n);
  int parsed = 0, elided = 0;
  for (int i = 0; i < fs.n; i++) {
    size_t len;
    char *text = slurp(fs.path[i], &len);
    HErr err = {0};
    HModule *m = hlo_parse_text(text, len, fs.path[i], &err);
    cr_assert(m, "%s", err.msg);
    expect_well_formed(m);
    parsed++;
    if (strstr(text, "constant({...})")) {
      /* the dump lost the constant's data: it reads, with the value marked missing */
      bool missing = false;
      for (int c = 0; c < m->ncomps; c++)
        for (int k = 0; k < m->comps[c]->ninstrs; k++)
          missing |= m->comps[c]->instrs[k]->op == OP_CONSTANT && !m->comps[c]->instrs[k]->literal;
      cr_expect(missing, "%s: elided constant not marked", fs.path[i]);
      elided++;
    }
    hlo_module_free(m);
    free(text);
  }
  cr_expect_geq(parsed, 42);
  cr_expect_eq(elided, 2); /* frozen_mlp module.hlo and xla_cpu_opt.hlo */
  files_free(&fs);
}

Test(parse, corpus_roundtrip) {
  Files fs = corpus_files();
  int done = 0;
  for (int i = 0; i < fs.n; i++) {
    size_t len;
    char *text = slurp(fs.path[i], &len);
    HErr err = {0};
    HModule *m = hlo_parse_text(text, len, fs.path[i], &err);
    if (!m) {
      free(text);
      continue;
    }
    size_t n1, n2;
    char *p1 = print_str(m, NULL, &n1);
    HModule *m2 = hlo_parse_text(p1, n1, "printed", &err);
    cr_assert(m2, "%s: reparse: %s", fs.path[i], err.msg);
    char *p2 = print_str(m2, NULL, &n2);
    cr_expect(n1 == n2 && !memcmp(p1, p2, n1), "%s: print/parse/print differs", fs.path[i]);
    expect_module_same(m, m2);
    done++;
    free(p1);
    free(p2);
    hlo_module_free(m);
    hlo_module_free(m2);
    free(text);
  }
  cr_expect_geq(done, 40);
  files_free(&fs);
}

Test(parse, bert_bench_is_fast) {
  size_t len;
  char *text = slurp(HLOC_CORPUS_DIR "/bench/bert_base/module.hlo", &len);
  HErr err = {0};
  double best = 1e9;
  for (int rep = 0; rep < 3; rep++) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    HModule *m = hlo_parse_text(text, len, "bert", &err);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    cr_assert(m, "%s", err.msg);
    hlo_module_free(m);
    double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    if (ms < best) best = ms;
  }
  /* a guard against super-linear blowups, not a benchmark (figures: bench/cpu.sh); loose
   * enough for sanitizer builds on a loaded machine */
  double limit = 2000;
  cr_expect_lt(best, limit, "bert_base bench module.hlo took %.1f ms", best);
  free(text);
}

/* ------------------------------------------------------------------ (c) attributes */

Test(parse, convolution_window_dim_labels) {
  HModule *m = parse_ok("HloModule t\n"
                        "ENTRY e {\n"
                        "  x = f32[1,8,8,3]{3,2,1,0} parameter(0)\n"
                        "  k = f32[3,3,3,16]{3,2,1,0} parameter(1)\n"
                        "  ROOT c = f32[1,4,4,16]{3,2,1,0} convolution(x, k), window={size=3x2 "
                        "stride=2x1 pad=1_0x-1_2 "
                        "lhs_dilate=1x2 rhs_dilate=2x1 rhs_reversal=0x1}, "
                        "dim_labels=b10f_o10i->f10b, feature_group_count=3, "
                        "batch_group_count=2, operand_precision={default,highest}\n"
                        "}\n");
  HInstr *c = find(m, "c");
  cr_assert(c->window && c->conv);
  const Window *w = c->window;
  cr_assert_eq(w->n, 2);
  cr_expect(w->d[0].size == 3 && w->d[0].stride == 2 && w->d[0].pad_lo == 1 && w->d[0].pad_hi == 0);
  cr_expect(w->d[0].base_dil == 1 && w->d[0].win_dil == 2 && !w->d[0].reversal);
  cr_expect(w->d[1].size == 2 && w->d[1].stride == 1 && w->d[1].pad_lo == -1 &&
            w->d[1].pad_hi == 2);
  cr_expect(w->d[1].base_dil == 2 && w->d[1].win_dil == 1 && w->d[1].reversal);
  const ConvDims *cd = c->conv;
  /* b10f: batch 0, feature 3, spatial 0 at position 2, spatial 1 at position 1 */
  cr_expect(cd->in_batch == 0 && cd->in_feat == 3);
  cr_expect(ilist_is(&cd->in_sp, 2, 2, 1));
  /* o10i */
  cr_expect(cd->k_out == 0 && cd->k_in == 3);
  cr_expect(ilist_is(&cd->k_sp, 2, 2, 1));
  /* f10b */
  cr_expect(cd->out_feat == 0 && cd->out_batch == 3);
  cr_expect(ilist_is(&cd->out_sp, 2, 2, 1));
  cr_expect_eq(c->feature_groups, 3);
  cr_expect_eq(c->batch_groups, 2);
  cr_expect(ilist_is(&c->precision, 2, 0, 2));
  /* printed back the same way */
  char *s = print_str(m, NULL, NULL);
  cr_expect(strstr(s, "window={size=3x2 stride=2x1 pad=1_0x-1_2 lhs_dilate=1x2 rhs_dilate=2x1 "
                      "rhs_reversal=0x1}"),
            "%s", s);
  cr_expect(strstr(s, "dim_labels=b10f_o10i->f10b"), "%s", s);
  free(s);
  hlo_module_free(m);

  m = parse_ok(
      "HloModule t\nENTRY e {\n  x = f32[2,3,8,8] parameter(0)\n  k = f32[4,3,3,3] parameter(1)\n"
      "  ROOT c = f32[2,4,8,8] convolution(x, k), window={size=3x3 pad=1_1x1_1}, "
      "dim_labels=bf01_oi01->bf01\n}\n");
  cd = find(m, "c")->conv;
  cr_expect(cd->in_batch == 0 && cd->in_feat == 1 && ilist_is(&cd->in_sp, 2, 2, 3));
  cr_expect(cd->k_out == 0 && cd->k_in == 1 && ilist_is(&cd->k_sp, 2, 2, 3));
  cr_expect(cd->out_batch == 0 && cd->out_feat == 1 && ilist_is(&cd->out_sp, 2, 2, 3));
  cr_expect(find(m, "c")->window->d[1].stride == 1 && find(m, "c")->window->d[1].win_dil == 1);
  cr_expect(!find(m, "x")->shape.has_layout, "no layout given");
  hlo_module_free(m);
}

Test(parse, dot_algorithm) {
  HModule *m = parse_ok("HloModule m\nENTRY e {\n  a = f32[4,8] parameter(0)\n"
                        "  b = f32[8,2] parameter(1)\n  ROOT d = f32[4,2] dot(a, b), "
                        "lhs_contracting_dims={1}, rhs_contracting_dims={0}, "
                        "algorithm=dot_tf32_tf32_f32_x3\n}\n");
  cr_expect_eq(find(m, "d")->dot_alg, DALG_TF32_TF32_F32_X3);
  hlo_module_free(m);
  BAD("HloModule m\nENTRY e {\n  a = f32[4,8] parameter(0)\n  b = f32[8,2] parameter(1)\n"
      "  ROOT d = f32[4,2] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}, "
      "algorithm=dot_f17\n}\n",
      "bad.hlo:5:", "instruction 'd'", "unknown dot algorithm 'dot_f17'");
}

Test(parse, slice_pad_dims) {
  HModule *m =
      parse_ok("HloModule t\n"
               "ENTRY e {\n"
               "  a = f32[8,6]{1,0} parameter(0)\n"
               "  s = f32[4,2]{1,0} slice(a), slice={[0:8:2], [1:3]}\n"
               "  z = f32[] constant(0)\n"
               "  p = f32[5,9]{1,0} pad(s, z), padding=0_0_1x-1_2_2\n"
               "  b = f32[5,9,3]{2,1,0} broadcast(p), dimensions={0,1}\n"
               "  t = f32[9,5,3]{2,1,0} transpose(b), dimensions={1,0,2}\n"
               "  ds = f32[2,2]{1,0} dynamic-slice(a, i0, i0), dynamic_slice_sizes={2,2}\n"
               "  i0 = s32[] constant(1)\n"
               "  io = s32[4,3]{1,0} iota(), iota_dimension=1\n"
               "  ROOT tu = (f32[9,5,3]{2,1,0}, f32[2,2]{1,0}, s32[4,3]{1,0}) tuple(t, ds, io)\n"
               "}\n");
  SliceDims *s = find(m, "s")->slice;
  cr_assert(s);
  cr_expect(s->n == 2 && s->start[0] == 0 && s->limit[0] == 8 && s->stride[0] == 2);
  cr_expect(s->start[1] == 1 && s->limit[1] == 3 && s->stride[1] == 1);
  PadDims *p = find(m, "p")->pad;
  cr_assert(p);
  cr_expect(p->n == 2 && p->lo[0] == 0 && p->hi[0] == 0 && p->interior[0] == 1);
  cr_expect(p->lo[1] == -1 && p->hi[1] == 2 && p->interior[1] == 2);
  cr_expect(ilist_is(&find(m, "b")->dims, 2, 0, 1));
  cr_expect(ilist_is(&find(m, "t")->dims, 3, 1, 0, 2));
  cr_expect(ilist_is(&find(m, "ds")->dslice_sizes, 2, 2, 2));
  cr_expect_eq(find(m, "io")->iota_dim, 1);
  /* forward reference i0: sorted before its user */
  cr_expect_lt(find(m, "i0")->idx, find(m, "ds")->idx);
  char *txt = print_str(m, NULL, NULL);
  cr_expect(strstr(txt, "slice={[0:8:2], [1:3]}"), "%s", txt);
  cr_expect(strstr(txt, "padding=0_0_1x-1_2_2"), "%s", txt);
  free(txt);
  hlo_module_free(m);
}

Test(parse, dot_gather_scatter_compare) {
  HModule *m = parse_ok(
      "HloModule t\n"
      "add {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT s = f32[] add(x, y)\n}\n"
      "ENTRY e {\n"
      "  a = f32[4,2,3]{2,1,0} parameter(0)\n"
      "  b = f32[4,3,5]{2,1,0} parameter(1)\n"
      "  d = f32[4,2,5]{2,1,0} dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={2}, "
      "rhs_batch_dims={0}, "
      "rhs_contracting_dims={1}, operand_precision={high,default}\n"
      "  tab = f32[100,32]{1,0} parameter(2)\n"
      "  idx = s32[2,8,1]{2,1,0} parameter(3)\n"
      "  g = f32[2,8,32]{2,1,0} gather(tab, idx), offset_dims={2}, collapsed_slice_dims={0}, "
      "start_index_map={0}, "
      "index_vector_dim=2, slice_sizes={1,32}, indices_are_sorted=true\n"
      "  sc = f32[100,32]{1,0} scatter(tab, idx, g), update_window_dims={2}, "
      "inserted_window_dims={0}, "
      "scatter_dims_to_operand_dims={0}, index_vector_dim=2, indices_are_sorted=true, "
      "unique_indices=true, to_apply=add\n"
      "  c = pred[100,32]{1,0} compare(tab, sc), direction=LT, type=TOTALORDER\n"
      "  c2 = pred[100,32]{1,0} compare(tab, sc), direction=NE\n"
      "  ROOT r = (f32[4,2,5]{2,1,0}, pred[100,32]{1,0}, pred[100,32]{1,0}) tuple(d, c, c2)\n"
      "}\n");
  HInstr *d = find(m, "d");
  cr_assert(d->dot);
  cr_expect(ilist_is(&d->dot->lhs_batch, 1, 0) && ilist_is(&d->dot->rhs_batch, 1, 0));
  cr_expect(ilist_is(&d->dot->lhs_contract, 1, 2) && ilist_is(&d->dot->rhs_contract, 1, 1));
  cr_expect(ilist_is(&d->precision, 2, 1, 0));
  GatherDims *g = find(m, "g")->gather;
  cr_assert(g);
  cr_expect(ilist_is(&g->offset_dims, 1, 2) && ilist_is(&g->collapsed_slice_dims, 1, 0));
  cr_expect(ilist_is(&g->start_index_map, 1, 0) && g->index_vector_dim == 2);
  cr_expect(ilist_is(&g->slice_sizes, 2, 1, 32) && g->operand_batching_dims.n == 0);
  cr_expect(find(m, "g")->indices_are_sorted);
  HInstr *sc = find(m, "sc");
  cr_assert(sc->scatter);
  cr_expect(ilist_is(&sc->scatter->update_window_dims, 1, 2) &&
            ilist_is(&sc->scatter->inserted_window_dims, 1, 0));
  cr_expect(ilist_is(&sc->scatter->scatter_dims_to_operand_dims, 1, 0) &&
            sc->scatter->index_vector_dim == 2);
  cr_expect(sc->unique_indices && sc->indices_are_sorted);
  cr_assert_eq(sc->ncalls, 1);
  cr_expect_str_eq(sc->calls[0]->name, "add");
  cr_expect(find(m, "c")->cmp_dir == CMP_LT && find(m, "c")->cmp_type == CMPT_TOTALORDER);
  cr_expect(find(m, "c2")->cmp_dir == CMP_NE && find(m, "c2")->cmp_type == CMPT_DEFAULT);
  cr_expect_str_eq(m->entry->name, "e");
  cr_expect_str_eq(m->comps[0]->name, "add");
  hlo_module_free(m);
}

Test(parse, constants) {
  HModule *m = parse_ok("HloModule t\n"
                        "ENTRY e {\n"
                        "  a = f32[2,3]{1,0} constant({ { 1, 2.5, -3 }, { 4e-05, inf, -inf } })\n"
                        "  n = f32[] constant(nan)\n"
                        "  p = pred[3]{0} constant({true, false, true})\n"
                        "  s8 = s8[2]{0} constant({-128, 127})\n"
                        "  u = u64[] constant(18446744073709551615)\n"
                        "  d = f64[] constant(0.10000000000000001)\n"
                        "  h = bf16[2]{0} constant({1.5, -0.125})\n"
                        "  e0 = f32[0]{0} constant({})\n"
                        "  tu = (f32[2]{0}, s32[]) constant(({1.5, -2}, 7))\n"
                        "  ROOT r = (f32[2,3]{1,0}, f32[]) tuple(a, n)\n"
                        "}\n");
  Literal *a = find(m, "a")->literal;
  float want[] = {1, 2.5f, -3, 4e-05f, INFINITY, -INFINITY};
  cr_expect(!memcmp(a->data, want, sizeof want));
  cr_expect(isnan(hlo_literal_get_f64(find(m, "n")->literal, 0)));
  Literal *p = find(m, "p")->literal;
  cr_expect(((uint8_t *)p->data)[0] == 1 && ((uint8_t *)p->data)[1] == 0 &&
            ((uint8_t *)p->data)[2] == 1);
  cr_expect(((int8_t *)find(m, "s8")->literal->data)[0] == -128);
  cr_expect(*(uint64_t *)find(m, "u")->literal->data == UINT64_MAX);
  cr_expect(*(double *)find(m, "d")->literal->data == 0.1);
  cr_expect(hlo_literal_get_f64(find(m, "h")->literal, 1) == -0.125);
  Literal *tu = find(m, "tu")->literal;
  cr_assert(tu->shape.dt == DT_TUPLE && tu->shape.ntuple == 2);
  cr_expect(hlo_literal_get_f64(tu->elems[0], 0) == 1.5 &&
            hlo_literal_get_f64(tu->elems[0], 1) == -2);
  cr_expect(hlo_literal_get_i64(tu->elems[1], 0) == 7);
  /* values print so that they read back bit-exactly */
  char *s = print_str(m, NULL, NULL);
  cr_expect(strstr(s, "constant({ {1, 2.5, -3}, {4e-05, inf, -inf} })"), "%s", s);
  cr_expect(strstr(s, "constant(({1.5, -2}, 7))"), "%s", s);
  cr_expect(strstr(s, "constant(18446744073709551615)"), "%s", s);
  HModule *m2 = parse_ok(s);
  expect_module_same(m, m2);
  hlo_module_free(m2);
  /* elided dumps for humans */
  HModule *big = parse_ok("HloModule t\nENTRY e {\n  ROOT c = s32[20]{0} "
                          "constant({0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19})\n}\n");
  HPrintOpts o = {.elide_large = true};
  char *el = print_str(big, &o, NULL);
  cr_expect(strstr(el, "constant({...})"), "%s", el);
  char *full = print_str(big, NULL, NULL);
  cr_expect(
      strstr(full,
             "constant({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19})"),
      "%s", full);
  free(el);
  free(full);
  free(s);
  hlo_module_free(big);
  hlo_module_free(m);
}

Test(parse, float_printing_roundtrips_bits) {
  /* f32 values near the edges of decimal precision */
  float vals[] = {0.1f,     1e-05f,       3.4028235e38f, 1.17549435e-38f,
                  1.4e-45f, 0.797884583f, -2.82842708f,  16777217.0f};
  for (size_t i = 0; i < sizeof vals / sizeof *vals; i++) {
    char text[256];
    HArena *a = hlo_arena_new();
    Shape s = hlo_shape_scalar(DT_F32);
    Literal *l = hlo_literal_new(a, &s);
    *(float *)l->data = vals[i];
    char *b = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&b, &n);
    hlo_print_literal(f, l);
    fclose(f);
    snprintf(text, sizeof text, "HloModule t\nENTRY e {\n  ROOT c = f32[] constant(%s)\n}\n", b);
    HModule *m = parse_ok(text);
    cr_expect(!memcmp(m->entry->root->literal->data, &vals[i], 4), "%.9g printed as %s",
              (double)vals[i], b);
    hlo_module_free(m);
    free(b);
    hlo_arena_free(a);
  }
}

Test(parse, long_form_forward_refs_and_module_header) {
  HModule *m =
      parse_ok("HloModule jit_f, is_scheduled=true, entry_computation_layout={(f32[2]{0}, "
               "/*index=1*/(f32[], s32[]))->f32[2]{0}}, "
               "input_output_alias={ {}: (0, {}, must-alias) }, frontend_attributes={a=\"b, c\"}\n"
               "\n"
               "FileNames\n1 \"/x.py\"\n\nFunctionNames\n1 \"f\"\n\n"
               "FileLocations\n1 {file_name_id=1 function_name_id=1 line=3 end_line=3 column=1 "
               "end_column=2}\n\n"
               "StackFrames\n1 {file_location_id=1 parent_frame_id=1}\n\n"
               "ENTRY %main.3 (a: f32[2], t: (f32[], s32[])) -> f32[2] {\n"
               "  %a = f32[2]{0} parameter(0), sharding={replicated}\n"
               "  ROOT %r = f32[2]{0} call(f32[2]{0} %s, f32[2]{0} %a), to_apply=%helper // "
               "trailing comment\n"
               "  %t = (f32[], s32[]) parameter(1)\n"
               "  /* block comment */ %s = f32[2]{0} add(f32[2]{0} %a, f32[2]{0} %a), "
               "metadata={op_type=\"Add\" op_name=\"jit(f)/add\" source_file=\"/x.py\" "
               "source_line=12 stack_frame_id=1}\n"
               "} // main.3\n"
               "\n"
               "%helper (x: f32[2], y: f32[2]) -> f32[2] {\n"
               "  %x = f32[2]{0:T(128)S(1)} parameter(0)\n"
               "  %y = f32[2]{0} parameter(1)\n"
               "  %tok = token[] after-all()\n"
               "  %e = () tuple()\n"
               "  %m = f32[2]{0} multiply(%x, %y), control-predecessors={%tok}, "
               "backend_config={\"k\":{\"n\":\"1\"}}\n"
               "  %cc = (f32[2]{0}, u8[0]{0}) custom-call(%m), custom_call_target=\"__my$target\", "
               "backend_config=\"raw \\\"q\\\"\", api_version=API_VERSION_STATUS_RETURNING\n"
               "  ROOT %g = f32[2]{0} get-tuple-element(%cc), index=0\n"
               "}\n");
  cr_expect_str_eq(m->name, "jit_f");
  cr_expect_str_eq(m->entry->name, "main.3");
  /* callee first */
  cr_expect_str_eq(m->comps[0]->name, "helper");
  cr_expect_str_eq(m->comps[1]->name, "main.3");
  cr_assert(m->has_entry_layout);
  cr_assert_eq(m->nentry_layout, 2);
  cr_expect(m->entry_layout_params[1].dt == DT_TUPLE && m->entry_layout_params[1].ntuple == 2);
  cr_assert_eq(m->nalias, 1);
  cr_expect(m->alias[0].out_index.n == 0 && m->alias[0].param == 0 && m->alias[0].kind == 2);
  cr_assert_eq(m->nraw, 2);
  cr_expect_str_eq(m->raw[0].name, "is_scheduled");
  cr_expect_str_eq(m->raw[1].value, "{a=\"b, c\"}");
  HInstr *r = find(m, "r"), *s = find(m, "s"), *a = find(m, "a");
  cr_expect_eq(m->entry->root, r);
  cr_assert_eq(r->nops, 2);
  cr_expect(r->ops[0] == s && r->ops[1] == a);
  cr_expect_lt(s->idx, r->idx);
  cr_expect_str_eq(r->calls[0]->name, "helper");
  cr_expect_str_eq(s->op_type, "Add");
  cr_expect_str_eq(s->op_name, "jit(f)/add");
  cr_expect_str_eq(s->source_file, "/x.py");
  cr_expect_eq(s->source_line, 12);
  cr_assert_eq(a->nraw, 1);
  cr_expect(!strcmp(a->raw[0].name, "sharding") && !strcmp(a->raw[0].value, "{replicated}"));
  HInstr *x = find(m, "x");
  cr_expect(x->shape.has_layout && x->shape.layout_extra &&
            !strcmp(x->shape.layout_extra, "T(128)S(1)"));
  cr_expect(find(m, "tok")->shape.dt == DT_TOKEN);
  cr_expect(find(m, "e")->shape.dt == DT_TUPLE && find(m, "e")->shape.ntuple == 0);
  HInstr *mm = find(m, "m");
  cr_assert_eq(mm->nctrl, 1);
  cr_expect_eq(mm->ctrl[0], find(m, "tok"));
  cr_expect_str_eq(mm->backend_config, "{\"k\":{\"n\":\"1\"}}");
  HInstr *cc = find(m, "cc");
  cr_expect_str_eq(cc->custom_call_target, "__my$target");
  cr_expect_str_eq(cc->backend_config, "raw \"q\"");
  cr_assert_eq(cc->nraw, 1);
  cr_expect_str_eq(cc->raw[0].name, "api_version");
  cr_expect_eq(find(m, "g")->tuple_index, 0);
  cr_expect_eq(m->entry->nparams, 2);

  char *p1 = print_str(m, NULL, NULL);
  cr_expect(strstr(p1, "input_output_alias={ {}: (0, {}, must-alias) }"), "%s", p1);
  cr_expect(strstr(p1, "x = f32[2]{0:T(128)S(1)} parameter(0)"), "%s", p1);
  cr_expect(strstr(p1, "control-predecessors={tok}"), "%s", p1);
  cr_expect(strstr(p1, "backend_config=\"raw \\\"q\\\"\""), "%s", p1);
  HModule *m2 = parse_ok(p1);
  expect_module_same(m, m2);
  char *p2 = print_str(m2, NULL, NULL);
  cr_expect_str_eq(p1, p2);
  HPrintOpts o = {.no_metadata = true, .no_raw_attrs = true};
  char *p3 = print_str(m, &o, NULL);
  cr_expect(!strstr(p3, "metadata=") && !strstr(p3, "sharding=") &&
                !strstr(p3, "frontend_attributes"),
            "%s", p3);
  free(p1);
  free(p2);
  free(p3);
  hlo_module_free(m2);
  hlo_module_free(m);
}

Test(parse, control_flow_calls_and_fusion) {
  HModule *m = parse_ok(
      "HloModule t\n"
      "ENTRY e {\n"
      "  p = (s32[], f32[4]{0}) parameter(0)\n"
      "  w = (s32[], f32[4]{0}) while(p), condition=cond, body=body\n"
      "  b = pred[] parameter(1)\n"
      "  k = f32[4]{0} get-tuple-element(w), index=1\n"
      "  c = f32[4]{0} conditional(b, k, k), true_computation=neg, false_computation=fused\n"
      "  i = s32[] parameter(2)\n"
      "  c2 = f32[4]{0} conditional(i, k, k), branch_computations={neg, fused}\n"
      "  z = f32[] constant(0)\n"
      "  ss = f32[4]{0} select-and-scatter(k, k, z), window={size=2 stride=2}, select=ge, "
      "scatter=add\n"
      "  f = f32[4]{0} fusion(c, c2), kind=kLoop, calls=fused\n"
      "  so = f32[4]{0} sort(f), dimensions={0}, is_stable=true, to_apply=ge\n"
      "  ROOT rp = f32[4]{0} reduce-precision(so), exponent_bits=5, mantissa_bits=10\n"
      "}\n"
      "cond {\n  cp = (s32[], f32[4]{0}) parameter(0)\n  ci = s32[] get-tuple-element(cp), "
      "index=0\n"
      "  cl = s32[] constant(10)\n  ROOT lt = pred[] compare(ci, cl), direction=LT\n}\n"
      "body {\n  bp = (s32[], f32[4]{0}) parameter(0)\n  ROOT bt = (s32[], f32[4]{0}) tuple(bi, "
      "bf)\n"
      "  bi = s32[] get-tuple-element(bp), index=0\n  bf = f32[4]{0} get-tuple-element(bp), "
      "index=1\n}\n"
      "neg {\n  np = f32[4]{0} parameter(0)\n  ROOT nn = f32[4]{0} negate(np)\n}\n"
      "fused {\n  fa = f32[4]{0} parameter(0)\n  fb = f32[4]{0} parameter(1)\n  ROOT fs = "
      "f32[4]{0} add(fa, fb)\n}\n"
      "ge {\n  ga = f32[] parameter(0)\n  gb = f32[] parameter(1)\n  ROOT gc = pred[] compare(ga, "
      "gb), direction=GE\n}\n"
      "add {\n  aa = f32[] parameter(0)\n  ab = f32[] parameter(1)\n  ROOT ac = f32[] add(aa, "
      "ab)\n}\n");
  expect_well_formed(m);
  cr_expect_str_eq(m->entry->name, "e");
  cr_expect_str_eq(m->comps[m->ncomps - 1]->name, "e");
  HInstr *w = find(m, "w");
  cr_assert_eq(w->ncalls, 2);
  cr_expect(!strcmp(w->calls[0]->name, "body") && !strcmp(w->calls[1]->name, "cond"));
  HInstr *c = find(m, "c");
  cr_expect(c->ncalls == 2 && !strcmp(c->calls[0]->name, "neg") &&
            !strcmp(c->calls[1]->name, "fused"));
  HInstr *ss = find(m, "ss");
  cr_expect(ss->ncalls == 2 && !strcmp(ss->calls[0]->name, "ge") &&
            !strcmp(ss->calls[1]->name, "add"));
  cr_expect(ss->window && ss->window->n == 1 && ss->window->d[0].stride == 2);
  HInstr *f = find(m, "f");
  cr_expect(f->fusion_kind == FK_LOOP && f->calls[0]->is_fusion);
  cr_expect(!find(m, "nn")->parent->is_fusion);
  cr_expect(find(m, "so")->is_stable);
  /* found by fuzzing: a fusion without kind= prints without kind= */
  HModule *nk =
      parse_ok("HloModule t\nf {\n  a = f32[] parameter(0)\n  ROOT n = f32[] negate(a)\n}\n"
               "ENTRY e {\n  p = f32[] parameter(0)\n  ROOT q = f32[] fusion(p), calls=f\n}\n");
  char *nks = print_str(nk, NULL, NULL);
  cr_expect(strstr(nks, "q = f32[] fusion(p), calls=f\n"), "%s", nks);
  free(nks);
  hlo_module_free(nk);
  cr_expect(find(m, "rp")->exponent_bits == 5 && find(m, "rp")->mantissa_bits == 10);
  /* body's root is the ROOT line although it is not last */
  cr_expect_str_eq(find(m, "bt")->parent->root->name, "bt");
  cr_expect_eq(find(m, "bt")->idx, 3);
  char *p1 = print_str(m, NULL, NULL);
  cr_expect(strstr(p1, "condition=cond, body=body"), "%s", p1);
  cr_expect(strstr(p1, "true_computation=neg, false_computation=fused"), "%s", p1);
  cr_expect(strstr(p1, "branch_computations={neg, fused}"), "%s", p1);
  cr_expect(strstr(p1, "select=ge, scatter=add"), "%s", p1);
  HModule *m2 = parse_ok(p1);
  expect_module_same(m, m2);
  free(p1);
  hlo_module_free(m2);
  hlo_module_free(m);
}

/* ------------------------------------------------------------------ (d) bad input */

Test(parse, truncated_real_module) {
  size_t len;
  char *text = slurp(HLOC_CORPUS_DIR "/fixtures/mlp/module.hlo", &len);
  const char *entry = strstr(text, "ENTRY");
  const char *first = strstr(text, "\n\n");
  cr_assert(entry && first);
  size_t entry_at = (size_t)(entry - text), first_at = (size_t)(first - text);
  size_t last_brace = len;
  while (last_brace > 0 && text[last_brace - 1] != '}')
    last_brace--;
  cr_assert(last_brace > entry_at);
  last_brace--; /* offset of the final '}' */
  int cuts = 0;
  /* cuts in the header, and anywhere inside the entry computation (the last one) */
  for (size_t cut = 0; cut < last_brace; cut += cut < first_at    ? 7
                                                : cut <= entry_at ? (entry_at + 1 - cut)
                                                                  : 3) {
    char *copy = malloc(cut ? cut : 1);
    memcpy(copy, text, cut);
    HErr err = {0};
    HModule *m = hlo_parse_text(copy, cut, "cut.hlo", &err);
    cr_expect(!m, "cut at %zu parsed", cut);
    cr_expect(err.set && strstr(err.msg, "cut.hlo:"), "cut at %zu: '%s'", cut, err.msg);
    if (cut > entry_at + 20)
      cr_expect(strstr(err.msg, "computation 'main.4'"), "cut at %zu: '%s'", cut, err.msg);
    hlo_module_free(m);
    free(copy);
    cuts++;
  }
  cr_expect_gt(cuts, 300);
  free(text);
}

Test(parse, bad_names_and_types) {
  /* lit's --split-input-file: several modules in one file */
  BAD("HloModule t\nENTRY e {\n  ROOT a = f32[] parameter(0)\n}\n// -----\nHloModule u, "
      "is_scheduled=true\nENTRY f {\n  ROOT b = f32[] parameter(0)\n}\n",
      "bad.hlo:6:1", "a second HloModule", "one module a file");
  BAD("HloModule t\nENTRY e {\n  a = f32[] parameter(0)\n  x = f32[] frobnicate(a)\n}\n",
      "bad.hlo:4:13", "computation 'e'", "instruction 'x'", "unknown opcode 'frobnicate'");
  BAD("HloModule t\nENTRY e {\n  a = f32[] parameter(0)\n  ROOT x = f32[] add(a, nope)\n}\n",
      "bad.hlo:4:25", "computation 'e'", "instruction 'x'", "undefined operand 'nope'");
  BAD("HloModule t\nENTRY e {\n  a = q32[2] parameter(0)\n}\n", "bad.hlo:3:7", "instruction 'a'",
      "unknown element type 'q32'");
  BAD("HloModule t\nENTRY e {\n  a = u2[2] parameter(0)\n}\n", "unsupported element type 'u2'");
  BAD("HloModule t\nENTRY e {\n  a = f8e4m3fnuz[2] parameter(0)\n}\n",
      "unsupported element type 'f8e4m3fnuz'");
  BAD("HloModule t\nENTRY e {\n  a = f32[2] parameter(0)\n  ROOT r = f32[2] call(a), "
      "to_apply=nowhere\n}\n",
      "instruction 'r'", "undefined computation 'nowhere'");
  BAD("HloModule t\nENTRY e {\n  a = f32[] parameter()\n}\n", "instruction 'a'",
      "missing parameter number");
  BAD("HloModule t\nENTRY e {\n  a = f32[] parameter(1.5)\n}\n", "instruction 'a'", "malformed");
  BAD("HloModule t\nENTRY e {\n  a = f32[] parameter(1)\n}\n", "parameter number 1 out of range");
  BAD("HloModule t\nENTRY e {\n  a = f32[1,1,1,1,1,1,1,1,1] parameter(0)\n}\n",
      "rank above HLO_MAX_RANK");
  BAD("HloModule t\nENTRY e {\n  a = f32[<=4] parameter(0)\n}\n", "dynamic");
  BAD("HloModule t\nENTRY e {\n  a = f32[] parameter(0)\n  a = f32[] negate(a)\n}\n",
      "duplicate instruction name 'a'");
  BAD("HloModule t\nENTRY e {\n  a = f32[] add(b, b)\n  b = f32[] add(a, a)\n}\n",
      "computation 'e'", "cycle");
  BAD("HloModule t\nf {\n  a = f32[] parameter(0)\n  ROOT c = f32[] call(a), to_apply=f\n}\n",
      "calls itself");
  BAD("HloModule t\nENTRY e {\n  a = f32[2] parameter(0)\n  b = f32[2]{1,0} negate(a)\n}\n",
      "instruction 'b'", "layout");
  BAD("HloModule t\nENTRY e {\n  a = f32[4] parameter(0)\n  b = f32[2] slice(a), slice={[0:2}\n}\n",
      "instruction 'b'");
  BAD("HloModule t\nENTRY e {\n  a = f32[] parameter(0)\n  b = pred[] compare(a, a), "
      "direction=XX\n}\n",
      "unknown comparison direction 'XX'");
  BAD("HloModule t\nENTRY e {\n  a = f32[2,2] parameter(0)\n  b = f32[2,2] convolution(a, a), "
      "dim_labels=bx_oi->bf\n}\n",
      "instruction 'b'", "dim_labels");
  BAD("HloModule t\nENTRY e {\n}\n", "computation 'e'", "no instructions");
  BAD("HloModule t\n", "no computations");
  BAD("", "bad.hlo:1:1", "HloModule");
}

Test(parse, bad_constants) {
  BAD("HloModule t\nENTRY e {\n  c = f32[3]{0} constant({1, 2})\n}\n", "instruction 'c'",
      "constant has 2 elements in dimension 0, its shape says 3");
  BAD("HloModule t\nENTRY e {\n  c = f32[2]{0} constant({1, 2, 3})\n}\n", "instruction 'c'",
      "more than 2 elements");
  BAD("HloModule t\nENTRY e {\n  c = f32[2,2]{1,0} constant({ {1, 2}, {3} })\n}\n", "dimension 1");
  BAD("HloModule t\nENTRY e {\n  c = f32[] constant(1.2.3)\n}\n", "instruction 'c'",
      "malformed number");
  BAD("HloModule t\nENTRY e {\n  c = s8[] constant(300)\n}\n", "out of range for s8");
  BAD("HloModule t\nENTRY e {\n  c = pred[] constant(maybe)\n}\n", "true or false");
  BAD("HloModule t\nENTRY e {\n  c = f32[] constant({...})\n}\n", "instruction 'c'");
  BAD("HloModule t\nENTRY e {\n  c = f32[1000000000000] constant({1})\n}\n", "instruction 'c'",
      "fewer elements");
  BAD("HloModule t\nENTRY e {\n  c = (f32[], s32[]) constant((1))\n}\n", "instruction 'c'");
}

Test(parse, garbage_and_deep_nesting) {
  /* deterministic pseudo-random garbage, NUL bytes included */
  uint32_t st = 12345;
  for (int round = 0; round < 200; round++) {
    size_t n = 1 + (size_t)(round * 37 % 3000);
    char *g = malloc(n);
    for (size_t i = 0; i < n; i++) {
      st = st * 1664525u + 1013904223u;
      g[i] = (char)(st >> 24);
    }
    if (round % 2) memcpy(g, "HloModule x\nENTRY e {\n", n < 22 ? n : 22);
    HErr err = {0};
    HModule *m = hlo_parse_text(g, n, "garbage.hlo", &err);
    cr_expect(!m && err.set && strstr(err.msg, "garbage.hlo:"), "round %d: %s", round, err.msg);
    hlo_module_free(m);
    free(g);
  }
  /* deeply nested shapes, literals, attribute values */
  const size_t depth = 100000;
  const char *heads[] = {"HloModule t\nENTRY e {\n  x = ",
                         "HloModule t\nENTRY e {\n  x = f32[] parameter(0), sharding=",
                         "HloModule t\nENTRY e {\n  x = f32[] parameter(0), metadata=",
                         "HloModule t, entry_computation_layout={"};
  const char fill[] = {'(', '{', '{', '('};
  for (int h = 0; h < 4; h++) {
    size_t hl = strlen(heads[h]);
    char *t = malloc(hl + depth);
    memcpy(t, heads[h], hl);
    memset(t + hl, fill[h], depth);
    HErr err = {0};
    HModule *m = hlo_parse_text(t, hl + depth, "deep.hlo", &err);
    cr_expect(!m && err.set && strstr(err.msg, "deep.hlo:"), "head %d: %s", h, err.msg);
    hlo_module_free(m);
    free(t);
  }
  /* found by fuzzing: a NUL byte inside a verbatim attribute value or string */
  static const char nul_attr[] =
      "HloModule t\nENTRY e {\n  x = f32[] parameter(0), sharding={rep\0licated}\n}\n";
  parse_bad(nul_attr, sizeof nul_attr - 1,
            (const char *const[]){"instruction 'x'", "NUL byte", NULL});
  static const char nul_str[] =
      "HloModule t\nENTRY e {\n  x = f32[] parameter(0), metadata={op_name=\"a\0b\"}\n}\n";
  parse_bad(nul_str, sizeof nul_str - 1,
            (const char *const[]){"instruction 'x'", "NUL byte", NULL});
  BAD("HloModule t\nENTRY e {\n  x = "
      "((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((f32[])))))))))))))))))))"
      ")))))))))))))))))))))))))))))))))))))))))))))))) parameter(0)\n}\n",
      "instruction 'x'", "nested too deeply");
}
