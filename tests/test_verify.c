/* tests/test_verify.c: the verifier and shape inference (hlo/verify.c).
 *
 * Every corpus module (unoptimized and XLA-optimized, fixture and bench size) must parse and
 * verify. Then small HLO texts that are valid must verify, and invalid ones must fail with a
 * located message naming the computation, the instruction and the problem. Structure errors
 * the text parser would refuse by itself (cycles, foreign operands, recursion) are built
 * programmatically. Finally hlo_infer_shape is used the way a pass uses it: on a new
 * instruction whose shape is not filled in yet. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "hlo.h"
#include "proto.h"

/* ------------------------------------------------------------------ helpers */

static HModule *parse(const char *text) {
  HErr e = {0};
  HModule *m = hlo_parse_text(text, strlen(text), "t.hlo", &e);
  cr_assert(m != NULL, "parse failed: %s", e.msg);
  return m;
}

static void verifies(const char *text) {
  HModule *m = parse(text);
  HErr e = {0};
  bool ok = hlo_verify(m, &e);
  cr_expect(ok && !e.set, "verify failed: %s", e.msg);
  hlo_module_free(m);
}

/* The module must fail verification with a message containing every string in subs. */
static void check_msg(bool ok, const HErr *e, const char *const *subs) {
  cr_expect(!ok, "verify accepted an invalid module");
  cr_expect(e->set, "no error recorded");
  for (int i = 0; subs[i]; i++)
    cr_expect(strstr(e->msg, subs[i]) != NULL, "message '%s' lacks '%s'", e->msg, subs[i]);
  cr_expect(strchr(e->msg, '\n') == NULL, "message is not one line");
}

static void fails_v(const char *text, const char *const *subs) {
  HModule *m = parse(text);
  HErr e = {0};
  check_msg(hlo_verify(m, &e), &e, subs);
  hlo_module_free(m);
}
#define FAILS(text, ...) fails_v(text, (const char *const[]){__VA_ARGS__, NULL})

static void mod_fails_v(HModule *m, const char *const *subs) {
  HErr e = {0};
  check_msg(hlo_verify(m, &e), &e, subs);
  hlo_module_free(m);
}
#define MOD_FAILS(m, ...) mod_fails_v(m, (const char *const[]){__VA_ARGS__, NULL})

static Shape shp(DType dt, int rank, ...) {
  int64_t d[HLO_MAX_RANK] = {0};
  va_list ap;
  va_start(ap, rank);
  for (int i = 0; i < rank; i++)
    d[i] = va_arg(ap, int);
  va_end(ap);
  return hlo_shape_array(dt, rank, d);
}

static HInstr *param(HComp *c, int n, const char *name, Shape s) {
  HInstr *p = hlo_instr_new(c, OP_PARAMETER, name, &s, 0, NULL);
  p->param_num = n;
  return p;
}

static HInstr *binop(HComp *c, HOp op, const char *name, HInstr *a, HInstr *b) {
  HInstr *ops[2] = {a, b};
  return hlo_instr_new(c, op, name, &a->shape, 2, ops);
}

/* A module whose entry computes add(p0, p1) on f32[4]: the base for structural edits. */
static HModule *small_module(HComp **entry, HInstr **p0, HInstr **p1, HInstr **sum) {
  HModule *m = hlo_module_new("small", "prog.hlo");
  HComp *c = hlo_comp_new(m, "main");
  *p0 = param(c, 0, "p0", shp(DT_F32, 1, 4));
  *p1 = param(c, 1, "p1", shp(DT_F32, 1, 4));
  *sum = binop(c, OP_ADD, "sum", *p0, *p1);
  c->root = *sum;
  m->entry = c;
  hlo_module_renumber(m);
  *entry = c;
  return m;
}

/* ------------------------------------------------------------------ corpus */

/* Parse and verify every module file of every model under corpus/<sub>: the binary
 * module.pb and the three text dumps. Text dumps whose large constants XLA elided
 * ("constant({...})") read with those values marked missing and still verify. Returns the
 * number verified; *found is the number of module files present and *models the models. */
static int verify_corpus_dir(const char *sub, int *found, int *models) {
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/%s", HLOC_CORPUS_DIR, sub);
  DIR *d = opendir(dir);
  cr_assert(d != NULL, "cannot open %s", dir);
  static const char *files[] = {"module.pb", "module.hlo", "xla_cpu_opt.hlo", "xla_gpu_opt.hlo"};
  int checked = 0;
  *found = *models = 0;
  struct dirent *de;
  while ((de = readdir(d))) {
    if (de->d_name[0] == '.') continue;
    ++*models;
    for (size_t f = 0; f < sizeof files / sizeof *files; f++) {
      char path[2048];
      snprintf(path, sizeof path, "%s/%s/%s", dir, de->d_name, files[f]);
      char *buf;
      size_t len;
      HErr e = {0};
      if (!hlo_read_file(path, &buf, &len, &e)) continue; /* not every model has every file */
      ++*found;
      HModule *m;
      if (f == 0) {
        m = proto_read_module((const uint8_t *)buf, len, path, &e);
      } else {
        m = hlo_parse_text(buf, len, path, &e);
      }
      free(buf);
      cr_expect(m != NULL, "load: %s", e.msg);
      if (!m) continue;
      bool ok = hlo_verify(m, &e);
      cr_expect(ok, "verify: %s", e.msg);
      hlo_module_free(m);
      checked++;
    }
  }
  closedir(d);
  return checked;
}

/* Every module file the corpus holds verifies, and each model has its proto, its text and at
 * least one of XLA's optimized dumps (frozen_mlp has no GPU dump; its dumps with elided
 * constants read and verify, the values marked missing). */
static void verify_corpus(const char *sub) {
  int found, models, n = verify_corpus_dir(sub, &found, &models);
  cr_expect(n == found, "%s: %d of %d module files verified", sub, n, found);
  cr_expect(models > 0 && found >= 3 * models, "%s: %d module files for %d models", sub, found,
            models);
}

Test(verify, corpus_fixtures, .timeout = 120) { verify_corpus("fixtures"); }

Test(verify, corpus_bench, .timeout = 120) { verify_corpus("bench"); }

/* The first array leaf of a shape (NULL for tokens and empty tuples). */
static Shape *first_leaf(Shape *s) {
  if (s->dt == DT_TOKEN) return NULL;
  if (s->dt != DT_TUPLE) return s;
  for (int i = 0; i < s->ntuple; i++) {
    Shape *l = first_leaf(&s->tuple[i]);
    if (l) return l;
  }
  return NULL;
}

/* Mutation test: in real modules, change each instruction's declared shape in turn (first
 * dim + 1, or the element type of a scalar) and expect verification to fail. Where the
 * instruction's own shape is derived from its operands alone, the message must name it; ops
 * that take their dims from their shape (broadcast, reshape, iota, parameter) may be caught
 * at a user instead. Ops whose shape is taken as given (custom-call, bitcast) are skipped. */
static void mutate_all(const char *rel) {
  char path[2048];
  snprintf(path, sizeof path, "%s/%s", HLOC_CORPUS_DIR, rel);
  char *buf;
  size_t len;
  HErr e = {0};
  cr_assert(hlo_read_file(path, &buf, &len, &e), "%s", e.msg);
  HModule *m = hlo_parse_text(buf, len, path, &e);
  free(buf);
  cr_assert(m != NULL, "%s", e.msg);
  int tried = 0;
  for (int ci = 0; ci < m->ncomps; ci++) {
    HComp *c = m->comps[ci];
    for (int j = 0; j < c->ninstrs; j++) {
      HInstr *in = c->instrs[j];
      if (in->op == OP_CUSTOM_CALL || in->op == OP_BITCAST) continue;
      Shape *leaf = first_leaf(&in->shape);
      if (!leaf) continue;
      Shape saved = *leaf;
      if (leaf->rank > 0)
        leaf->dims[0] += 1;
      else
        leaf->dt = leaf->dt == DT_F32 ? DT_S32 : DT_F32;
      HErr v = {0};
      bool ok = hlo_verify(m, &v);
      *leaf = saved;
      cr_expect(!ok, "%s: changing the shape of '%s' went unnoticed", rel, in->name);
      bool own = in->op != OP_BROADCAST && in->op != OP_RESHAPE && in->op != OP_IOTA &&
                 in->op != OP_PARAMETER;
      if (own && !ok) {
        char want[600];
        snprintf(want, sizeof want, "instruction '%s'", in->name);
        cr_expect(strstr(v.msg, want) != NULL, "%s: message '%s' does not name '%s'", rel, v.msg,
                  in->name);
      }
      tried++;
    }
  }
  HErr v = {0};
  cr_expect(hlo_verify(m, &v), "restored module fails: %s", v.msg);
  cr_expect(tried > 20, "%s: only %d instructions mutated", rel, tried);
  hlo_module_free(m);
}

Test(verify, mutations_unoptimized, .timeout = 120) {
  mutate_all("fixtures/resnet_block/module.hlo");
  mutate_all("fixtures/simple_cnn_train_step/module.hlo");
  mutate_all("fixtures/bert_base/module.hlo");
}

Test(verify, mutations_optimized, .timeout = 120) {
  mutate_all("fixtures/simple_cnn_train_step/xla_cpu_opt.hlo");
  mutate_all("fixtures/transformer_layer/xla_gpu_opt.hlo");
  mutate_all("fixtures/resnet18/xla_gpu_opt.hlo");
}

/* ------------------------------------------------------------------ valid texts */

Test(verify, valid_shapes) {
  /* convolution with stride, padding, lhs/rhs dilation and feature groups; reduce-window
   * with base dilation; pad with negative and interior padding; dot with batch dims */
  verifies("HloModule m\n"
           "max {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
           "  ROOT c = f32[] maximum(a, b)\n}\n"
           "ENTRY main {\n"
           "  x = f32[2,9,9,4]{3,2,1,0} parameter(0)\n"
           "  k = f32[3,3,2,6]{3,2,1,0} parameter(1)\n"
           "  c1 = f32[2,5,5,6]{3,2,1,0} convolution(x, k), window={size=3x3 stride=2x2 "
           "pad=1_1x1_1}, dim_labels=b01f_01io->b01f, feature_group_count=2\n"
           "  c2 = f32[2,17,17,6]{3,2,1,0} convolution(x, k), window={size=3x3 pad=1_1x1_1 "
           "lhs_dilate=2x2}, dim_labels=b01f_01io->b01f, feature_group_count=2\n"
           "  c3 = f32[2,5,5,6]{3,2,1,0} convolution(x, k), window={size=3x3 rhs_dilate=2x2}, "
           "dim_labels=b01f_01io->b01f, feature_group_count=2\n"
           "  ninf = f32[] constant(-inf)\n"
           "  rw = f32[2,9,9,4]{3,2,1,0} reduce-window(x, ninf), window={size=1x3x3x1 "
           "pad=0_0x1_1x1_1x0_0 lhs_dilate=1x2x2x1 stride=1x2x2x1}, to_apply=max\n"
           "  zero = f32[] constant(0)\n"
           "  pd = f32[2,20,7,4]{3,2,1,0} pad(x, zero), padding=0_0x2_1_1x-1_-1x0_0\n"
           "  la = f32[3,2,5]{2,1,0} parameter(2)\n"
           "  rb = f32[5,3,7,1]{3,2,1,0} parameter(3)\n"
           "  d = f32[3,2,7,1]{3,2,1,0} dot(la, rb), lhs_batch_dims={0}, lhs_contracting_dims={2}, "
           "rhs_batch_dims={1}, rhs_contracting_dims={0}\n"
           "  ROOT t = (f32[2,5,5,6]{3,2,1,0}, f32[2,17,17,6]{3,2,1,0}, f32[2,5,5,6]{3,2,1,0}, "
           "f32[2,9,9,4]{3,2,1,0}, f32[2,20,7,4]{3,2,1,0}, f32[3,2,7,1]{3,2,1,0}) "
           "tuple(c1, c2, c3, rw, pd, d)\n"
           "}\n");
}

Test(verify, valid_gather_scatter) {
  verifies("HloModule m\n"
           "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
           "  ROOT c = f32[] add(a, b)\n}\n"
           "ENTRY main {\n"
           "  tbl = f32[10,8]{1,0} parameter(0)\n"
           "  ids = s32[4,3]{1,0} parameter(1)\n"
           "  g = f32[4,3,8]{2,1,0} gather(tbl, ids), offset_dims={2}, collapsed_slice_dims={0}, "
           "start_index_map={0}, index_vector_dim=2, slice_sizes={1,8}\n"
           "  ops = f32[5,10,8]{2,1,0} parameter(2)\n"
           "  bix = s32[5,2,1]{2,1,0} parameter(3)\n"
           "  bg = f32[5,2,8]{2,1,0} gather(ops, bix), offset_dims={2}, collapsed_slice_dims={1}, "
           "start_index_map={1}, operand_batching_dims={0}, start_indices_batching_dims={0}, "
           "index_vector_dim=2, slice_sizes={1,1,8}\n"
           "  upd = f32[4,3,8]{2,1,0} parameter(4)\n"
           "  s = f32[10,8]{1,0} scatter(tbl, ids, upd), update_window_dims={2}, "
           "inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=2, "
           "to_apply=add\n"
           "  ROOT t = (f32[4,3,8]{2,1,0}, f32[5,2,8]{2,1,0}, f32[10,8]{1,0}) tuple(g, bg, s)\n"
           "}\n");
}

Test(verify, valid_variadic_and_control) {
  verifies("HloModule m\n"
           "argmax {\n  v0 = f32[] parameter(0)\n  i0 = s32[] parameter(1)\n"
           "  v1 = f32[] parameter(2)\n  i1 = s32[] parameter(3)\n"
           "  gt = pred[] compare(v0, v1), direction=GT\n"
           "  v = f32[] select(gt, v0, v1)\n  i = s32[] select(gt, i0, i1)\n"
           "  ROOT r = (f32[], s32[]) tuple(v, i)\n}\n"
           "less {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
           "  c = s32[] parameter(2)\n  d = s32[] parameter(3)\n"
           "  ROOT lt = pred[] compare(a, b), direction=LT\n}\n"
           "cond {\n  st = (s32[], f32[4]) parameter(0)\n"
           "  k = s32[] get-tuple-element(st), index=0\n  ten = s32[] constant(10)\n"
           "  ROOT go = pred[] compare(k, ten), direction=LT\n}\n"
           "body {\n  st2 = (s32[], f32[4]) parameter(0)\n"
           "  k2 = s32[] get-tuple-element(st2), index=0\n"
           "  v2 = f32[4] get-tuple-element(st2), index=1\n  one = s32[] constant(1)\n"
           "  k3 = s32[] add(k2, one)\n  e = f32[4] exponential(v2)\n"
           "  ROOT nst = (s32[], f32[4]) tuple(k3, e)\n}\n"
           "ENTRY main {\n"
           "  x = f32[3,4]{1,0} parameter(0)\n"
           "  io = s32[3,4]{1,0} iota(), iota_dimension=1\n"
           "  ninf = f32[] constant(-inf)\n  zi = s32[] constant(0)\n"
           "  am = (f32[3], s32[3]) reduce(x, io, ninf, zi), dimensions={1}, to_apply=argmax\n"
           "  srt = (f32[3,4], s32[3,4]) sort(x, io), dimensions={1}, to_apply=less\n"
           "  vec = f32[4] parameter(1)\n"
           "  st0 = (s32[], f32[4]) tuple(zi, vec)\n"
           "  w = (s32[], f32[4]) while(st0), condition=cond, body=body\n"
           "  u8s = u8[3,4,4]{2,1,0} bitcast-convert(x)\n"
           "  cv = s32[3,4]{1,0} convert(x)\n"
           "  ROOT t = ((f32[3], s32[3]), (f32[3,4], s32[3,4]), (s32[], f32[4]), u8[3,4,4], "
           "s32[3,4]) tuple(am, srt, w, u8s, cv)\n"
           "}\n");
}

/* ------------------------------------------------------------------ invalid texts */

Test(verify, broadcast_wrong_dims) {
  FAILS("HloModule m\nENTRY main {\n  p = f32[3]{0} parameter(0)\n"
        "  ROOT b = f32[2,3]{1,0} broadcast(p), dimensions={0}\n}\n",
        "t.hlo: ", "computation 'main'", "instruction 'b'", "broadcast maps operand dim 0",
        "f32[3]", "f32[2,3]");
}

Test(verify, dot_contracting_mismatch) {
  FAILS("HloModule m\nENTRY main {\n  a = f32[2,3]{1,0} parameter(0)\n"
        "  b = f32[4,5]{1,0} parameter(1)\n"
        "  ROOT d = f32[2,5]{1,0} dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
        "}\n",
        "computation 'main'", "instruction 'd'", "contracting dimension sizes differ", "f32[2,3]",
        "f32[4,5]");
}

Test(verify, convolution_wrong_spatial_size) {
  FAILS("HloModule m\nENTRY main {\n  x = f32[1,8,8,3]{3,2,1,0} parameter(0)\n"
        "  k = f32[3,3,3,16]{3,2,1,0} parameter(1)\n"
        "  ROOT c = f32[1,6,6,16]{3,2,1,0} convolution(x, k), window={size=3x3 pad=1_1x1_1}, "
        "dim_labels=b01f_01io->b01f\n}\n",
        "computation 'main'", "instruction 'c'", "f32[1,6,6,16]", "expected f32[1,8,8,16]");
}

Test(verify, convolution_feature_groups) {
  FAILS("HloModule m\nENTRY main {\n  x = f32[1,8,8,4]{3,2,1,0} parameter(0)\n"
        "  k = f32[3,3,4,6]{3,2,1,0} parameter(1)\n"
        "  ROOT c = f32[1,8,8,6]{3,2,1,0} convolution(x, k), window={size=3x3 pad=1_1x1_1}, "
        "dim_labels=b01f_01io->b01f, feature_group_count=2\n}\n",
        "instruction 'c'", "kernel input features 4 times feature_group_count 2");
}

Test(verify, reduce_reducer_signature) {
  FAILS("HloModule m\nadd_s32 {\n  x = s32[] parameter(0)\n  y = s32[] parameter(1)\n"
        "  ROOT s = s32[] add(x, y)\n}\n"
        "ENTRY main {\n  p = f32[4,5]{1,0} parameter(0)\n  z = f32[] constant(0)\n"
        "  ROOT r = f32[4]{0} reduce(p, z), dimensions={1}, to_apply=add_s32\n}\n",
        "computation 'main'", "instruction 'r'", "'add_s32'", "parameter 0 has shape s32[]",
        "expected f32[]");
}

Test(verify, reduce_reducer_arity) {
  FAILS("HloModule m\nneg {\n  x = f32[] parameter(0)\n  ROOT s = f32[] negate(x)\n}\n"
        "ENTRY main {\n  p = f32[4,5]{1,0} parameter(0)\n  z = f32[] constant(0)\n"
        "  ROOT r = f32[4]{0} reduce(p, z), dimensions={1}, to_apply=neg\n}\n",
        "instruction 'r'", "'neg' takes 1 parameter, expected 2");
}

Test(verify, while_body_wrong_shape) {
  FAILS("HloModule m\n"
        "cond {\n  s = (s32[], f32[4]) parameter(0)\n  i = s32[] get-tuple-element(s), index=0\n"
        "  n = s32[] constant(10)\n  ROOT c = pred[] compare(i, n), direction=LT\n}\n"
        "body {\n  s2 = (s32[], f32[4]) parameter(0)\n"
        "  i2 = s32[] get-tuple-element(s2), index=0\n  ROOT t2 = (s32[]) tuple(i2)\n}\n"
        "ENTRY main {\n  i0 = s32[] constant(0)\n  x = f32[4]{0} parameter(0)\n"
        "  t = (s32[], f32[4]{0}) tuple(i0, x)\n"
        "  ROOT w = (s32[], f32[4]{0}) while(t), condition=cond, body=body\n}\n",
        "computation 'main'", "instruction 'w'", "body computation 'body' returns (s32[])",
        "expected (s32[], f32[4])");
}

Test(verify, while_condition_not_pred) {
  FAILS("HloModule m\n"
        "cond {\n  s = f32[4] parameter(0)\n  ROOT c = f32[] constant(1)\n}\n"
        "body {\n  s2 = f32[4] parameter(0)\n  ROOT n = f32[4] negate(s2)\n}\n"
        "ENTRY main {\n  x = f32[4]{0} parameter(0)\n"
        "  ROOT w = f32[4]{0} while(x), condition=cond, body=body\n}\n",
        "instruction 'w'", "condition computation 'cond' returns f32[], expected pred[]");
}

Test(verify, slice_out_of_range) {
  FAILS("HloModule m\nENTRY main {\n  p = f32[4]{0} parameter(0)\n"
        "  ROOT s = f32[2]{0} slice(p), slice={[3:5]}\n}\n",
        "computation 'main'", "instruction 's'", "slice range [3:5:1] of dimension 0", "f32[4]");
}

Test(verify, gather_bad_index_vector_dim) {
  FAILS("HloModule m\nENTRY main {\n  t = f32[5,3]{1,0} parameter(0)\n"
        "  i = s32[4,1]{1,0} parameter(1)\n"
        "  ROOT g = f32[4,3]{1,0} gather(t, i), offset_dims={1}, collapsed_slice_dims={0}, "
        "start_index_map={0}, index_vector_dim=3, slice_sizes={1,3}\n}\n",
        "computation 'main'", "instruction 'g'", "index_vector_dim 3 is out of range", "s32[4,1]");
}

Test(verify, gather_slice_size_too_large) {
  FAILS("HloModule m\nENTRY main {\n  t = f32[5,3]{1,0} parameter(0)\n"
        "  i = s32[4,1]{1,0} parameter(1)\n"
        "  ROOT g = f32[4,4]{1,0} gather(t, i), offset_dims={1}, collapsed_slice_dims={0}, "
        "start_index_map={0}, index_vector_dim=1, slice_sizes={1,4}\n}\n",
        "instruction 'g'", "slice size 4 is out of range for dimension 1");
}

Test(verify, transpose_not_permutation) {
  FAILS("HloModule m\nENTRY main {\n  p = f32[2,3]{1,0} parameter(0)\n"
        "  ROOT t = f32[2,2]{1,0} transpose(p), dimensions={0,0}\n}\n",
        "computation 'main'", "instruction 't'", "permutation", "repeats dimension 0");
}

Test(verify, add_mixed_types) {
  FAILS("HloModule m\nENTRY main {\n  a = f32[4]{0} parameter(0)\n  b = s32[4]{0} parameter(1)\n"
        "  ROOT s = f32[4]{0} add(a, b)\n}\n",
        "computation 'main'", "instruction 's'", "operands of add differ", "f32[4]", "s32[4]");
}

Test(verify, declared_shape_mismatch) {
  FAILS("HloModule m\nENTRY main {\n  a = f32[4]{0} parameter(0)\n"
        "  ROOT c = f32[4]{0} compare(a, a), direction=LT\n}\n",
        "instruction 'c'", "compare has shape f32[4], expected pred[4]");
}

Test(verify, float_only_and_int_only_ops) {
  FAILS("HloModule m\nENTRY main {\n  a = s32[4]{0} parameter(0)\n"
        "  ROOT e = s32[4]{0} exponential(a)\n}\n",
        "instruction 'e'", "exponential expects a floating-point or complex element type",
        "s32[4]");
  FAILS("HloModule m\nENTRY main {\n  a = f32[4]{0} parameter(0)\n"
        "  ROOT s = f32[4]{0} shift-left(a, a)\n}\n",
        "instruction 's'", "shift-left expects an integer element type");
  FAILS("HloModule m\nENTRY main {\n  a = f32[4]{0} parameter(0)\n"
        "  ROOT s = f32[4]{0} and(a, a)\n}\n",
        "instruction 's'", "and expects an integer or pred element type");
  verifies("HloModule m\nENTRY main {\n  a = pred[4]{0} parameter(0)\n"
           "  b = pred[4]{0} not(a)\n  ROOT s = pred[4]{0} and(a, b)\n}\n");
}

Test(verify, entry_layout_mismatch) {
  FAILS("HloModule m, entry_computation_layout={(f32[4]{0})->f32[5]{0}}\n"
        "ENTRY main {\n  p = f32[4]{0} parameter(0)\n  ROOT n = f32[4]{0} negate(p)\n}\n",
        "instruction 'n'", "entry_computation_layout gives the result as f32[5]{0}",
        "root is f32[4]{0}");
  FAILS("HloModule m, entry_computation_layout={(f32[2,3]{0,1})->f32[2,3]{1,0}}\n"
        "ENTRY main {\n  p = f32[2,3]{1,0} parameter(0)\n  ROOT n = f32[2,3]{1,0} negate(p)\n}\n",
        "instruction 'p'", "parameter 0 as f32[2,3]{0,1}", "parameter is f32[2,3]{1,0}");
}

Test(verify, select_and_scatter_and_sort_computations) {
  FAILS("HloModule m\n"
        "ge {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT c = f32[] add(a, b)\n}\n"
        "add {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT z = f32[] add(x, y)\n}\n"
        "ENTRY main {\n  o = f32[4,4]{1,0} parameter(0)\n  s = f32[2,2]{1,0} parameter(1)\n"
        "  i = f32[] constant(0)\n"
        "  ROOT r = f32[4,4]{1,0} select-and-scatter(o, s, i), window={size=2x2 stride=2x2}, "
        "select=ge, scatter=add\n}\n",
        "instruction 'r'", "select computation 'ge' returns f32[], expected pred[]");
  FAILS("HloModule m\n"
        "add {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT z = f32[] add(x, y)\n}\n"
        "ENTRY main {\n  o = f32[4,4]{1,0} parameter(0)\n  s = f32[3,3]{1,0} parameter(1)\n"
        "  i = f32[] constant(0)\n"
        "  ROOT r = f32[4,4]{1,0} select-and-scatter(o, s, i), window={size=2x2 stride=2x2}, "
        "select=add, scatter=add\n}\n",
        "instruction 'r'", "source f32[3,3] must have the windowed operand's shape f32[2,2]");
  FAILS("HloModule m\n"
        "cmp {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT c = f32[] add(a, b)\n}\n"
        "ENTRY main {\n  o = f32[4]{0} parameter(0)\n"
        "  ROOT r = f32[4]{0} sort(o), dimensions={0}, to_apply=cmp\n}\n",
        "instruction 'r'", "comparator computation 'cmp' returns f32[], expected pred[]");
}

Test(verify, call_fusion_conditional_signatures) {
  FAILS("HloModule m\nf {\n  a = f32[3] parameter(0)\n  ROOT n = f32[3] negate(a)\n}\n"
        "ENTRY main {\n  p = f32[4]{0} parameter(0)\n  ROOT c = f32[4]{0} call(p), to_apply=f\n}\n",
        "instruction 'c'",
        "to_apply computation 'f' parameter 0 has shape f32[3], expected "
        "f32[4]");
  FAILS("HloModule m\nfused {\n  a = f32[4] parameter(0)\n  ROOT n = f32[4] negate(a)\n}\n"
        "ENTRY main {\n  p = f32[4]{0} parameter(0)\n"
        "  ROOT c = f32[2,2]{1,0} fusion(p), kind=kLoop, calls=fused\n}\n",
        "instruction 'c'", "fusion has shape f32[2,2], expected f32[4]");
  FAILS("HloModule m\nb0 {\n  a = f32[4] parameter(0)\n  ROOT n = f32[4] negate(a)\n}\n"
        "b1 {\n  b = f32[4] parameter(0)\n  ROOT s = f32[] constant(0)\n}\n"
        "ENTRY main {\n  p = f32[4]{0} parameter(0)\n  q = pred[] parameter(1)\n"
        "  ROOT c = f32[4]{0} conditional(q, p, p), true_computation=b0, "
        "false_computation=b1\n}\n",
        "instruction 'c'", "branch 1 computation 'b1' returns f32[], expected f32[4]");
}

Test(verify, scatter_combiner_and_dims) {
  FAILS("HloModule m\nadd {\n  x = s32[] parameter(0)\n  y = s32[] parameter(1)\n"
        "  ROOT z = s32[] add(x, y)\n}\n"
        "ENTRY main {\n  o = f32[10,8]{1,0} parameter(0)\n  i = s32[4,1]{1,0} parameter(1)\n"
        "  u = f32[4,8]{1,0} parameter(2)\n"
        "  ROOT s = f32[10,8]{1,0} scatter(o, i, u), update_window_dims={1}, "
        "inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, "
        "to_apply=add\n}\n",
        "instruction 's'", "to_apply computation 'add' parameter 0 has shape s32[]");
  FAILS("HloModule m\nadd {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n"
        "  ROOT z = f32[] add(x, y)\n}\n"
        "ENTRY main {\n  o = f32[10,8]{1,0} parameter(0)\n  i = s32[4,1]{1,0} parameter(1)\n"
        "  u = f32[5,8]{1,0} parameter(2)\n"
        "  ROOT s = f32[10,8]{1,0} scatter(o, i, u), update_window_dims={1}, "
        "inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, "
        "to_apply=add\n}\n",
        "instruction 's'", "update scatter dimension 0 has size 5", "give 4");
}

Test(verify, movement_ops) {
  FAILS("HloModule m\nENTRY main {\n  p = f32[4]{0} parameter(0)\n  z = f32[] constant(0)\n"
        "  ROOT q = f32[0]{0} pad(p, z), padding=-3_-2\n}\n",
        "instruction 'q'", "padding of dimension 0 gives negative size -1");
  FAILS("HloModule m\nENTRY main {\n  a = f32[2,3]{1,0} parameter(0)\n"
        "  b = f32[2,4]{1,0} parameter(1)\n"
        "  ROOT c = f32[4,3]{1,0} concatenate(a, b), dimensions={0}\n}\n",
        "instruction 'c'", "concatenate operand 1 f32[2,4] does not match operand 0 f32[2,3]");
  FAILS("HloModule m\nENTRY main {\n  a = f32[2,3]{1,0} parameter(0)\n"
        "  ROOT r = f32[7]{0} reshape(a)\n}\n",
        "instruction 'r'", "reshape changes the element count");
  FAILS("HloModule m\nENTRY main {\n  a = f32[8]{0} parameter(0)\n  i = f32[] parameter(1)\n"
        "  ROOT d = f32[2]{0} dynamic-slice(a, i), dynamic_slice_sizes={2}\n}\n",
        "instruction 'd'", "start index operand 1 must be an integer scalar");
  FAILS("HloModule m\nENTRY main {\n  a = (f32[2], s32[]) parameter(0)\n"
        "  ROOT g = s32[] get-tuple-element(a), index=2\n}\n",
        "instruction 'g'", "tuple index 2 is out of range");
  FAILS("HloModule m\nENTRY main {\n  ROOT i = s32[4,3]{1,0} iota(), iota_dimension=2\n}\n",
        "instruction 'i'", "iota_dimension 2 is out of range");
  FAILS("HloModule m\nENTRY main {\n  a = f32[4,6]{1,0} parameter(0)\n"
        "  ROOT r = f32[4,6]{1,0} reverse(a), dimensions={2}\n}\n",
        "instruction 'r'", "reverse dimensions entry 2 is out of range");
}

Test(verify, reduce_window_output) {
  FAILS("HloModule m\nmax {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
        "  ROOT c = f32[] maximum(a, b)\n}\n"
        "ENTRY main {\n  x = f32[1,8,8,1]{3,2,1,0} parameter(0)\n  z = f32[] constant(-inf)\n"
        "  ROOT r = f32[1,4,4,1]{3,2,1,0} reduce-window(x, z), window={size=1x3x3x1 "
        "stride=1x2x2x1}, to_apply=max\n}\n",
        "instruction 'r'", "reduce-window has shape f32[1,4,4,1], expected f32[1,3,3,1]");
}

/* ------------------------------------------------------------------ programmatic structure */

Test(verify, programmatic_ok) {
  HComp *c;
  HInstr *p0, *p1, *sum;
  HModule *m = small_module(&c, &p0, &p1, &sum);
  HErr e = {0};
  cr_expect(hlo_verify(m, &e), "%s", e.msg);
  hlo_module_free(m);
}

Test(verify, no_entry) {
  HComp *c;
  HInstr *p0, *p1, *sum;
  HModule *m = small_module(&c, &p0, &p1, &sum);
  m->entry = NULL;
  MOD_FAILS(m, "prog.hlo", "no entry computation");
}

Test(verify, operand_cycle) {
  /* x = negate(y); y = negate(x): an operand that does not come first is a cycle */
  HComp *c;
  HInstr *p0, *p1, *sum;
  HModule *m = small_module(&c, &p0, &p1, &sum);
  Shape s = shp(DT_F32, 1, 4);
  HInstr *x = hlo_instr_new(c, OP_NEGATE, "x", &s, 1, &p0);
  HInstr *y = hlo_instr_new(c, OP_NEGATE, "y", &s, 1, &x);
  x->ops[0] = y;
  c->root = y;
  MOD_FAILS(m, "computation 'main'", "instruction 'x'", "operand 0 'y' does not come before");
}

Test(verify, self_operand) {
  HComp *c;
  HInstr *p0, *p1, *sum;
  HModule *m = small_module(&c, &p0, &p1, &sum);
  sum->ops[1] = sum;
  MOD_FAILS(m, "instruction 'sum'", "operand 1 'sum' does not come before");
}

Test(verify, operand_from_other_computation) {
  HComp *c;
  HInstr *p0, *p1, *sum;
  HModule *m = small_module(&c, &p0, &p1, &sum);
  HComp *o = hlo_comp_new(m, "other");
  HInstr *q = param(o, 0, "q", shp(DT_F32, 1, 4));
  o->root = q;
  sum->ops[0] = q;
  MOD_FAILS(m, "computation 'main'", "instruction 'sum'",
            "operand 0 'q' belongs to computation 'other'");
}

Test(verify, control_predecessor_order) {
  HComp *c;
  HInstr *p0, *p1, *sum;
  HModule *m = small_module(&c, &p0, &p1, &sum);
  p1->nctrl = 1;
  p1->ctrl = hlo_arena_alloc(m->arena, sizeof(HInstr *));
  p1->ctrl[0] = sum;
  MOD_FAILS(m, "instruction 'p1'", "control predecessor 'sum' does not come before");
}

Test(verify, root_not_in_computation) {
  HComp *c;
  HInstr *p0, *p1, *sum;
  HModule *m = small_module(&c, &p0, &p1, &sum);
  HComp *o = hlo_comp_new(m, "other");
  HInstr *q = param(o, 0, "q", shp(DT_F32, 1, 4));
  o->root = q;
  c->root = q;
  MOD_FAILS(m, "computation 'main'", "root 'q' is not an instruction of this computation");
}

Test(verify, empty_computation) {
  HComp *c;
  HInstr *p0, *p1, *sum;
  HModule *m = small_module(&c, &p0, &p1, &sum);
  hlo_comp_new(m, "hollow");
  MOD_FAILS(m, "computation 'hollow'", "empty");
}

Test(verify, parameter_numbers) {
  HComp *c;
  HInstr *p0, *p1, *sum;
  HModule *m = small_module(&c, &p0, &p1, &sum);
  p1->param_num = 0;
  MOD_FAILS(m, "instruction 'p1'", "parameter number 0 appears twice");
  m = small_module(&c, &p0, &p1, &sum);
  p1->param_num = 5;
  MOD_FAILS(m, "instruction 'p1'", "parameter number 5 is out of range");
}

Test(verify, duplicate_names) {
  HComp *c;
  HInstr *p0, *p1, *sum;
  HModule *m = small_module(&c, &p0, &p1, &sum);
  p1->name = "p0";
  MOD_FAILS(m, "instruction 'p0'", "name is not unique");
  m = small_module(&c, &p0, &p1, &sum);
  HComp *o = hlo_comp_new(m, "main");
  o->root = param(o, 0, "q", shp(DT_F32, 0));
  MOD_FAILS(m, "computation 'main'", "computation name is not unique");
}

/* Instruction names are scoped by their computation (XLA's text parser scopes them so, and its
 * own test modules reuse a reducer's parameter names): the same names in two computations
 * verify, the same name twice in one does not (above). */
Test(verify, names_scoped_by_computation) {
  verifies("HloModule m\nadd {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
           "  ROOT s = f32[] add(a, b)\n}\nmax {\n  a = f32[] parameter(0)\n"
           "  b = f32[] parameter(1)\n  ROOT s = f32[] maximum(a, b)\n}\n"
           "ENTRY e {\n  a = f32[8] parameter(0)\n  z = f32[] constant(0)\n"
           "  r = f32[] reduce(a, z), dimensions={0}, to_apply=add\n"
           "  ROOT s = f32[] reduce(a, z), dimensions={0}, to_apply=max\n}\n");
}

Test(verify, arity) {
  HComp *c;
  HInstr *p0, *p1, *sum;
  HModule *m = small_module(&c, &p0, &p1, &sum);
  sum->nops = 1;
  MOD_FAILS(m, "computation 'main'", "instruction 'sum'", "add takes 2 operands, got 1");
  m = small_module(&c, &p0, &p1, &sum);
  HInstr *ops[3] = {p0, p1, p0};
  Shape s = shp(DT_F32, 1, 4);
  c->root = hlo_instr_new(c, OP_NEGATE, "neg", &s, 3, ops);
  MOD_FAILS(m, "instruction 'neg'", "negate takes 1 operand, got 3");
  m = small_module(&c, &p0, &p1, &sum);
  Shape f = shp(DT_F32, 0);
  c->root = hlo_instr_new(c, OP_REDUCE, "red", &f, 3, ops);
  MOD_FAILS(m, "instruction 'red'", "reduce takes 2N operands", "got 3");
}

/* A computation "f" (f32[4] -> f32[4]) called from main; returns f's call instruction. */
static HModule *module_with_callee(HComp **main_c, HComp **f, HInstr **call) {
  HModule *m = hlo_module_new("calls", "prog.hlo");
  HComp *fc = hlo_comp_new(m, "f");
  HInstr *a = param(fc, 0, "a", shp(DT_F32, 1, 4));
  fc->root = hlo_instr_new(fc, OP_NEGATE, "na", &a->shape, 1, &a);
  HComp *c = hlo_comp_new(m, "main");
  HInstr *p = param(c, 0, "p", shp(DT_F32, 1, 4));
  HInstr *k = hlo_instr_new(c, OP_CALL, "k", &p->shape, 1, &p);
  hlo_instr_set_calls(k, 1, &fc);
  c->root = k;
  m->entry = c;
  hlo_module_renumber(m);
  *main_c = c;
  *f = fc;
  *call = k;
  return m;
}

Test(verify, call_graph) {
  HComp *c, *f;
  HInstr *k;
  HModule *m = module_with_callee(&c, &f, &k);
  HErr e = {0};
  cr_expect(hlo_verify(m, &e), "%s", e.msg);
  hlo_module_free(m);

  /* f calls main, main calls f */
  m = module_with_callee(&c, &f, &k);
  HInstr *a = f->params[0];
  HInstr *back = hlo_instr_new(f, OP_CALL, "back", &a->shape, 1, &a);
  hlo_instr_set_calls(back, 1, &c);
  f->root = back;
  MOD_FAILS(m, "call graph cycle");

  /* f calls itself */
  m = module_with_callee(&c, &f, &k);
  a = f->params[0];
  HInstr *self = hlo_instr_new(f, OP_CALL, "self", &a->shape, 1, &a);
  hlo_instr_set_calls(self, 1, &f);
  f->root = self;
  MOD_FAILS(m, "computation 'f'", "instruction 'self'", "calls itself");

  /* a callee from another module */
  m = module_with_callee(&c, &f, &k);
  HModule *m2 = hlo_module_new("other", NULL);
  HComp *g = hlo_comp_new(m2, "g");
  g->root = param(g, 0, "z", shp(DT_F32, 1, 4));
  k->calls[0] = g;
  MOD_FAILS(m, "instruction 'k'", "called computation 'g' does not belong to the module");
  hlo_module_free(m2);

  /* call without a computation */
  m = module_with_callee(&c, &f, &k);
  k->ncalls = 0;
  MOD_FAILS(m, "instruction 'k'", "call must call 1 computation, it calls 0");
}

/* ------------------------------------------------------------------ inference for passes */

Test(verify, infer_for_new_instructions) {
  HComp *c;
  HInstr *p0, *p1, *sum;
  HModule *m = small_module(&c, &p0, &p1, &sum);
  HArena *a = m->arena;
  HErr e = {0};
  Shape out;

  /* add: in->shape ignored entirely */
  HInstr *ops[2] = {p0, p1};
  HInstr *n = hlo_instr_new(c, OP_MULTIPLY, "mul", NULL, 2, ops);
  cr_assert(hlo_infer_shape(a, n, &out, &e), "%s", e.msg);
  Shape want = shp(DT_F32, 1, 4);
  cr_expect(hlo_shape_eq(&out, &want));

  /* broadcast: output dims from in->shape, element type from the operand */
  Shape bs = shp(DT_INVALID, 2, 3, 4);
  HInstr *b = hlo_instr_new(c, OP_BROADCAST, "bc", &bs, 1, &p0);
  b->dims.n = 1;
  b->dims.v[0] = 1;
  cr_assert(hlo_infer_shape(a, b, &out, &e), "%s", e.msg);
  want = shp(DT_F32, 2, 3, 4);
  cr_expect(hlo_shape_eq(&out, &want), "got %s", hlo_shape_str(a, &out));
  b->dims.v[0] = 0;
  cr_expect(!hlo_infer_shape(a, b, &out, &e));
  cr_expect(strstr(e.msg, "instruction 'bc'") && strstr(e.msg, "broadcast maps operand dim 0"),
            "%s", e.msg);

  /* convert: element type from in->shape */
  e = (HErr){0};
  Shape cs = shp(DT_S32, 0);
  HInstr *cv = hlo_instr_new(c, OP_CONVERT, "cv", &cs, 1, &p0);
  cr_assert(hlo_infer_shape(a, cv, &out, &e), "%s", e.msg);
  want = shp(DT_S32, 1, 4);
  cr_expect(hlo_shape_eq(&out, &want), "got %s", hlo_shape_str(a, &out));

  /* dot: result type falls back to the operands' when unset; reduce to a scalar */
  Shape ms = shp(DT_F32, 2, 4, 5);
  HInstr *mat = param(c, 2, "mat", ms);
  HInstr *dops[2] = {p0, mat};
  HInstr *d = hlo_instr_new(c, OP_DOT, "d", NULL, 2, dops);
  d->dot = hlo_arena_alloc(a, sizeof(DotDims));
  d->dot->lhs_contract.n = d->dot->rhs_contract.n = 1;
  d->dot->lhs_contract.v[0] = 0;
  d->dot->rhs_contract.v[0] = 0;
  cr_assert(hlo_infer_shape(a, d, &out, &e), "%s", e.msg);
  want = shp(DT_F32, 1, 5);
  cr_expect(hlo_shape_eq(&out, &want), "got %s", hlo_shape_str(a, &out));

  /* tuple and get-tuple-element */
  HInstr *tops[2] = {p0, mat};
  HInstr *t = hlo_instr_new(c, OP_TUPLE, "tup", NULL, 2, tops);
  cr_assert(hlo_infer_shape(a, t, &out, &e), "%s", e.msg);
  cr_expect(out.dt == DT_TUPLE && out.ntuple == 2 && hlo_shape_eq(&out.tuple[1], &ms));
  hlo_shape_copy(a, &t->shape, &out);
  HInstr *g = hlo_instr_new(c, OP_GET_TUPLE_ELEMENT, "gte", NULL, 1, &t);
  g->tuple_index = 1;
  cr_assert(hlo_infer_shape(a, g, &out, &e), "%s", e.msg);
  cr_expect(hlo_shape_eq(&out, &ms));
  hlo_module_free(m);
}

/* ------------------------------------------------------------------ more ops */

Test(verify, valid_misc_ops) {
  verifies("HloModule m\n"
           "ENTRY main {\n"
           "  x = f32[2,3,4]{2,1,0} parameter(0)\n"
           "  sc = f32[3]{0} parameter(1)\n"
           "  of = f32[3]{0} parameter(2)\n"
           "  lo = f32[] constant(0)\n  hi = f32[] constant(6)\n"
           "  cl = f32[2,3,4]{2,1,0} clamp(lo, x, hi)\n"
           "  bn = f32[2,3,4]{2,1,0} batch-norm-inference(x, sc, of, sc, sc), epsilon=0.001, "
           "feature_index=1\n"
           "  bt = (f32[2,3,4]{2,1,0}, f32[3]{0}, f32[3]{0}) batch-norm-training(x, sc, of), "
           "epsilon=0.001, feature_index=1\n"
           "  bg = (f32[2,3,4]{2,1,0}, f32[3]{0}, f32[3]{0}) batch-norm-grad(x, sc, sc, of, x), "
           "epsilon=0.001, feature_index=1\n"
           "  u = f32[1,2,2]{2,1,0} parameter(3)\n  i = s32[] parameter(4)\n"
           "  dus = f32[2,3,4]{2,1,0} dynamic-update-slice(x, u, i, i, i)\n"
           "  ds = f32[1,2,2]{2,1,0} dynamic-slice(x, i, i, i), dynamic_slice_sizes={1,2,2}\n"
           "  rp = f32[2,3,4]{2,1,0} reduce-precision(x), exponent_bits=8, mantissa_bits=7\n"
           "  fin = pred[2,3,4]{2,1,0} is-finite(x)\n"
           "  sel = f32[2,3,4]{2,1,0} select(fin, x, cl)\n"
           "  tok = token[] after-all()\n"
           "  cc = (f32[7]{0}, s8[16]{0}) custom-call(x, tok), custom_call_target=\"anything\"\n"
           "  ROOT t = (f32[2,3,4]{2,1,0}, (f32[2,3,4]{2,1,0}, f32[3]{0}, f32[3]{0}), "
           "(f32[2,3,4]{2,1,0}, f32[3]{0}, f32[3]{0}), f32[2,3,4]{2,1,0}, f32[1,2,2]{2,1,0}, "
           "f32[2,3,4]{2,1,0}, f32[2,3,4]{2,1,0}, (f32[7]{0}, s8[16]{0})) "
           "tuple(bn, bt, bg, dus, ds, rp, sel, cc)\n"
           "}\n");
}

Test(verify, misc_op_errors) {
  FAILS("HloModule m\nENTRY main {\n  x = f32[4]{0} parameter(0)\n  p = pred[] parameter(1)\n"
        "  ROOT s = f32[4]{0} select(p, x, x)\n}\n",
        "instruction 's'", "select predicate pred[] must be pred with the dims of f32[4]");
  FAILS("HloModule m\nENTRY main {\n  x = f32[4]{0} parameter(0)\n  lo = f32[2]{0} parameter(1)\n"
        "  ROOT c = f32[4]{0} clamp(lo, x, x)\n}\n",
        "instruction 'c'", "clamp min bound f32[2] must be a scalar or have the shape of f32[4]");
  FAILS(
      "HloModule m\nENTRY main {\n  x = f32[2,3]{1,0} parameter(0)\n  sc = f32[2]{0} parameter(1)\n"
      "  ROOT b = f32[2,3]{1,0} batch-norm-inference(x, sc, sc, sc, sc), epsilon=0.001, "
      "feature_index=1\n}\n",
      "instruction 'b'", "operand 1 f32[2] must be f32[3]");
  FAILS("HloModule m\nENTRY main {\n  x = f32[4]{0} parameter(0)\n  u = f32[5]{0} parameter(1)\n"
        "  i = s32[] parameter(2)\n"
        "  ROOT d = f32[4]{0} dynamic-update-slice(x, u, i)\n}\n",
        "instruction 'd'", "update f32[5] exceeds operand f32[4] in dimension 0");
  FAILS("HloModule m\nENTRY main {\n  x = f32[4]{0} parameter(0)\n"
        "  ROOT c = s32[4]{0} convert(x, x)\n}\n",
        "instruction 'c'", "convert takes 1 operand, got 2");
}

Test(verify, collective_reducer_checked) {
  FAILS("HloModule m\nsum {\n  a = s32[] parameter(0)\n  b = s32[] parameter(1)\n"
        "  ROOT c = s32[] add(a, b)\n}\n"
        "ENTRY main {\n  x = f32[4]{0} parameter(0)\n"
        "  ROOT r = f32[4]{0} all-reduce(x), replica_groups={}, to_apply=sum\n}\n",
        "instruction 'r'",
        "to_apply computation 'sum' parameter 0 has shape s32[], expected f32[]");
}

Test(verify, malformed_shapes) {
  HComp *c;
  HInstr *p0, *p1, *sum;
  HModule *m = small_module(&c, &p0, &p1, &sum);
  sum->shape.dims[0] = -2;
  MOD_FAILS(m, "instruction 'sum'", "malformed shape", "negative dimension size");
  m = small_module(&c, &p0, &p1, &sum);
  p1->shape.m2m[0] = 3;
  MOD_FAILS(m, "instruction 'p1'", "layout is not a permutation");
  m = small_module(&c, &p0, &p1, &sum);
  p0->shape.dt = DT_TUPLE;
  p0->shape.ntuple = 2; /* no element array */
  MOD_FAILS(m, "instruction 'p0'", "tuple");
}
