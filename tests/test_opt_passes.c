/* tests/test_opt_passes.c: each optimizer pass alone on small HLO text cases.
 *
 * Every case parses an input module, runs exactly one pass through its function with a
 * PassCtx (then DCE, so that replaced instructions disappear), verifies the result and
 * checks the expected structure: the root's opcode and operands, instruction counts, the
 * printed text of one instruction, or the values the interpreter computes before and after. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "optimizer.h"
#include "test_util.h"

/* The entry evaluated on args made of 0.25*((7k + i) % 13) - 1 (every parameter i). */
static Literal *eval(HModule *m, HArena *a) { return tu_eval(m, a, 0.25, 7, 1, 13); }

/* ------------------------------------------------------------------ algsimp */

Test(opt_algsimp, arithmetic_identities) {
  HModule *m = tu_parse("HloModule t\n"
                        "ENTRY e {\n"
                        "  x = f32[4] parameter(0)\n"
                        "  z = f32[] constant(0)\n"
                        "  zb = f32[4] broadcast(z), dimensions={}\n"
                        "  o = f32[4] constant({1, 1, 1, 1})\n"
                        "  a = f32[4] add(x, zb)\n"
                        "  b = f32[4] multiply(o, a)\n"
                        "  c = f32[4] subtract(b, zb)\n"
                        "  d = f32[4] divide(c, o)\n"
                        "  n1 = f32[4] negate(d)\n"
                        "  ROOT n2 = f32[4] negate(n1)\n"
                        "}\n");
  cr_expect(tu_run(m, opt_algsimp));
  cr_expect_eq(m->entry->root->op, OP_PARAMETER, "root is %s", hlo_op_name(m->entry->root->op));
  cr_expect_eq(m->entry->ninstrs, 1);
  hlo_module_free(m);
}

Test(opt_algsimp, float_times_zero_is_kept_int_times_zero_folds) {
  HModule *m = tu_parse("HloModule t\n"
                        "ENTRY e {\n"
                        "  x = f32[4] parameter(0)\n"
                        "  i = s32[4] parameter(1)\n"
                        "  z = f32[] constant(0)\n"
                        "  zb = f32[4] broadcast(z), dimensions={}\n"
                        "  zi = s32[] constant(0)\n"
                        "  zib = s32[4] broadcast(zi), dimensions={}\n"
                        "  fm = f32[4] multiply(x, zb)\n"
                        "  im = s32[4] multiply(i, zib)\n"
                        "  ROOT t = (f32[4], s32[4]) tuple(fm, im)\n"
                        "}\n");
  tu_run(m, opt_algsimp);
  HInstr *r = m->entry->root;
  cr_expect_eq(r->ops[0]->op, OP_MULTIPLY, "x*0.0 must stay (NaN*0 is NaN)");
  cr_expect_eq(r->ops[1]->op, OP_BROADCAST, "integer x*0 is 0");
  hlo_module_free(m);
}

Test(opt_algsimp, jax_bias_broadcast_chain_becomes_one_broadcast) {
  HModule *m = tu_parse("HloModule t\n"
                        "ENTRY e {\n"
                        "  b = f32[32] parameter(0)\n"
                        "  r1 = f32[1,32] reshape(b)\n"
                        "  b1 = f32[1,32] broadcast(r1), dimensions={0,1}\n"
                        "  r2 = f32[32] reshape(b1)\n"
                        "  ROOT b2 = f32[8,32] broadcast(r2), dimensions={1}\n"
                        "}\n");
  cr_expect(tu_run(m, opt_algsimp));
  HInstr *r = m->entry->root;
  cr_assert_eq(r->op, OP_BROADCAST);
  cr_expect_eq(r->ops[0]->op, OP_PARAMETER);
  cr_expect_eq(r->dims.n, 1);
  cr_expect_eq(r->dims.v[0], 1);
  cr_expect_eq(m->entry->ninstrs, 2);
  hlo_module_free(m);
}

Test(opt_algsimp, movement_identities) {
  HModule *m = tu_parse("HloModule t\n"
                        "ENTRY e {\n"
                        "  x = f32[2,3] parameter(0)\n"
                        "  t1 = f32[3,2] transpose(x), dimensions={1,0}\n"
                        "  t2 = f32[2,3] transpose(t1), dimensions={1,0}\n"
                        "  s = f32[2,3] slice(t2), slice={[0:2], [0:3]}\n"
                        "  c = f32[2,3] convert(s)\n"
                        "  k = f32[2,3] copy(c)\n"
                        "  r = f32[2,3] reshape(k)\n"
                        "  tu = (f32[2,3], f32[2,3]) tuple(r, x)\n"
                        "  ROOT g = f32[2,3] get-tuple-element(tu), index=0\n"
                        "}\n");
  cr_expect(tu_run(m, opt_algsimp));
  cr_expect_eq(m->entry->root->op, OP_PARAMETER);
  hlo_module_free(m);
}

Test(opt_algsimp, transpose_of_transpose_composes) {
  HModule *m = tu_parse("HloModule t\n"
                        "ENTRY e {\n"
                        "  x = f32[2,3,4] parameter(0)\n"
                        "  t1 = f32[3,4,2] transpose(x), dimensions={1,2,0}\n"
                        "  ROOT t2 = f32[4,3,2] transpose(t1), dimensions={1,0,2}\n"
                        "}\n");
  HArena *a = hlo_arena_new();
  Literal *before = eval(m, a);
  tu_run(m, opt_algsimp);
  cr_assert_eq(m->entry->root->op, OP_TRANSPOSE);
  cr_expect_eq(m->entry->root->ops[0]->op, OP_PARAMETER);
  cr_expect_eq(m->entry->root->dims.v[0], 2);
  cr_expect_eq(m->entry->root->dims.v[1], 1);
  cr_expect_eq(m->entry->root->dims.v[2], 0);
  tu_expect_same(eval(m, a), before, 0);
  hlo_arena_free(a);
  hlo_module_free(m);
}

Test(opt_algsimp, select_min_max_and_compare_with_constants) {
  HModule *m = tu_parse("HloModule t\n"
                        "ENTRY e {\n"
                        "  x = f32[4] parameter(0)\n"
                        "  y = f32[4] parameter(1)\n"
                        "  u = u32[4] parameter(2)\n"
                        "  t = pred[] constant(true)\n"
                        "  tb = pred[4] broadcast(t), dimensions={}\n"
                        "  s = f32[4] select(tb, x, y)\n"
                        "  ni = f32[] constant(-inf)\n"
                        "  nib = f32[4] broadcast(ni), dimensions={}\n"
                        "  mx = f32[4] maximum(s, nib)\n"
                        "  pi = f32[] constant(inf)\n"
                        "  pib = f32[4] broadcast(pi), dimensions={}\n"
                        "  mn = f32[4] minimum(pib, mx)\n"
                        "  z = u32[] constant(0)\n"
                        "  zb = u32[4] broadcast(z), dimensions={}\n"
                        "  ge = pred[4] compare(u, zb), direction=GE\n"
                        "  ROOT r = (f32[4], pred[4]) tuple(mn, ge)\n"
                        "}\n");
  tu_run(m, opt_algsimp);
  HInstr *r = m->entry->root;
  cr_expect_eq(r->ops[0]->op, OP_PARAMETER);
  cr_expect_str_eq(r->ops[0]->name, "x");
  cr_expect_eq(r->ops[1]->op, OP_BROADCAST, "u >= 0 is true for unsigned u");
  double v;
  cr_expect(opt_uniform_value(r->ops[1], &v) && v == 1);
  hlo_module_free(m);
}

/* ------------------------------------------------------------------ constant-fold */

Test(opt_constant_fold, folds_small_results_keeps_broadcasts) {
  HModule *m = tu_parse("HloModule t\n"
                        "ENTRY e {\n"
                        "  a = f32[3] constant({1, 2, 3})\n"
                        "  b = f32[3] constant({10, 20, 30})\n"
                        "  s = f32[3] add(a, b)\n"
                        "  r = f32[3] rsqrt(s)\n"
                        "  k = f32[] constant(2)\n"
                        "  big = f32[1000,1000] broadcast(k), dimensions={}\n"
                        "  ROOT t = (f32[3], f32[1000,1000]) tuple(r, big)\n"
                        "}\n");
  cr_expect(tu_run(m, opt_constant_fold));
  HInstr *r = m->entry->root;
  cr_assert_eq(r->ops[0]->op, OP_CONSTANT);
  cr_expect_float_eq(hlo_literal_get_f64(r->ops[0]->literal, 1), 1 / sqrt(22.0), 1e-6);
  cr_expect_eq(r->ops[1]->op, OP_BROADCAST, "broadcast of a scalar is not materialised");
  hlo_module_free(m);
}

Test(opt_constant_fold, elementwise_of_scalar_broadcasts_stays_a_broadcast) {
  HModule *m = tu_parse("HloModule t\n"
                        "ENTRY e {\n"
                        "  a = f32[] constant(3)\n"
                        "  b = f32[] constant(4)\n"
                        "  ab = f32[512,512] broadcast(a), dimensions={}\n"
                        "  bb = f32[512,512] broadcast(b), dimensions={}\n"
                        "  ROOT m = f32[512,512] multiply(ab, bb)\n"
                        "}\n");
  cr_expect(tu_run(m, opt_constant_fold));
  HInstr *r = m->entry->root;
  cr_assert_eq(r->op, OP_BROADCAST);
  cr_assert_eq(r->ops[0]->op, OP_CONSTANT);
  cr_expect_eq(r->ops[0]->shape.rank, 0);
  cr_expect_float_eq(hlo_literal_get_f64(r->ops[0]->literal, 0), 12.0, 1e-9);
  hlo_module_free(m);
}

Test(opt_constant_fold, reduce_of_constant_and_parameters_untouched) {
  HModule *m = tu_parse("HloModule t\n"
                        "add {\n"
                        "  p = f32[] parameter(0)\n"
                        "  q = f32[] parameter(1)\n"
                        "  ROOT s = f32[] add(p, q)\n"
                        "}\n"
                        "ENTRY e {\n"
                        "  x = f32[2] parameter(0)\n"
                        "  c = f32[2,3] constant({{1, 2, 3}, {4, 5, 6}})\n"
                        "  z = f32[] constant(0)\n"
                        "  r = f32[2] reduce(c, z), dimensions={1}, to_apply=add\n"
                        "  ROOT o = f32[2] add(x, r)\n"
                        "}\n");
  cr_expect(tu_run(m, opt_constant_fold));
  HInstr *r = m->entry->root;
  cr_assert_eq(r->op, OP_ADD);
  cr_assert_eq(r->ops[1]->op, OP_CONSTANT);
  cr_expect_float_eq(hlo_literal_get_f64(r->ops[1]->literal, 0), 6.0, 1e-9);
  cr_expect_float_eq(hlo_literal_get_f64(r->ops[1]->literal, 1), 15.0, 1e-9);
  hlo_module_free(m);
}

/* ------------------------------------------------------------------ cse */

Test(opt_cse, merges_identical_instructions_and_regions) {
  HModule *m = tu_parse("HloModule t\n"
                        "r1 {\n"
                        "  a = f32[] parameter(0)\n"
                        "  b = f32[] parameter(1)\n"
                        "  ROOT s = f32[] add(a, b)\n"
                        "}\n"
                        "r2 {\n"
                        "  c = f32[] parameter(0)\n"
                        "  d = f32[] parameter(1)\n"
                        "  ROOT add2 = f32[] add(c, d)\n"
                        "}\n"
                        "ENTRY e {\n"
                        "  x = f32[4,8] parameter(0)\n"
                        "  k1 = f32[] constant(0)\n"
                        "  k2 = f32[] constant(0)\n"
                        "  s1 = f32[4] reduce(x, k1), dimensions={1}, to_apply=r1\n"
                        "  s2 = f32[4] reduce(x, k2), dimensions={1}, to_apply=r2\n"
                        "  e1 = f32[4] exponential(s1)\n"
                        "  e2 = f32[4] exponential(s2)\n"
                        "  k3 = f32[] constant(1)\n"
                        "  s3 = f32[4] reduce(x, k3), dimensions={1}, to_apply=r1\n"
                        "  ROOT t = (f32[4], f32[4], f32[4]) tuple(e1, e2, s3)\n"
                        "}\n");
  cr_expect(tu_run(m, opt_cse));
  HInstr *r = m->entry->root;
  cr_expect_eq(r->ops[0], r->ops[1], "same reduce (identical regions), same exp");
  cr_expect_neq(r->ops[2]->ops[0], r->ops[0]->ops[0], "different init value is not merged");
  cr_expect_eq(tu_count(m->entry, OP_REDUCE), 2);
  cr_expect_eq(tu_count(m->entry, OP_CONSTANT), 2);
  hlo_module_free(m);
}

Test(opt_cse, never_merges_random_numbers) {
  HModule *m = tu_parse("HloModule t\n"
                        "ENTRY e {\n"
                        "  a = f32[] constant(0)\n"
                        "  b = f32[] constant(1)\n"
                        "  r1 = f32[4] rng(a, b), distribution=rng_uniform\n"
                        "  r2 = f32[4] rng(a, b), distribution=rng_uniform\n"
                        "  ROOT t = (f32[4], f32[4]) tuple(r1, r2)\n"
                        "}\n");
  tu_run(m, opt_cse);
  cr_expect_neq(m->entry->root->ops[0], m->entry->root->ops[1]);
  hlo_module_free(m);
}

/* ------------------------------------------------------------------ fold-batchnorm, freeze */

static const char *conv_bn =
    "HloModule t\n"
    "ENTRY e {\n"
    "  x = f32[1,2,4,4] parameter(0)\n"
    "  w = f32[3,2,3,3] parameter(1)\n"
    "  c = f32[1,3,4,4] convolution(x, w), window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01\n"
    "  m = f32[3] constant({0.5, -1, 2})\n"
    "  mb = f32[1,3,4,4] broadcast(m), dimensions={1}\n"
    "  s = f32[1,3,4,4] subtract(c, mb)\n"
    "  g = f32[3] constant({2, 0.25, -3})\n"
    "  gb = f32[1,3,4,4] broadcast(g), dimensions={1}\n"
    "  p = f32[1,3,4,4] multiply(s, gb)\n"
    "  be = f32[3] constant({1, 2, 3})\n"
    "  beb = f32[1,3,4,4] broadcast(be), dimensions={1}\n"
    "  ROOT o = f32[1,3,4,4] add(p, beb)\n"
    "}\n";

Test(opt_fold_batchnorm, scale_and_shift_fold_into_frozen_conv_weights) {
  HModule *m = tu_parse(conv_bn);
  HArena *a = hlo_arena_new();
  Literal *before = eval(m, a);
  /* freeze the weights with the values eval() used for parameter 1 */
  hlo_comp_renumber(m->entry);
  Literal *wv = hlo_literal_new(a, &m->entry->params[1]->shape);
  for (int64_t k = 0; k < hlo_shape_elems(&wv->shape); k++)
    hlo_literal_set_f64(wv, k, 0.25 * (double)((k * 7 + 1) % 13) - 1);
  HErr err = {0};
  cr_assert(opt_freeze(m, 1, wv, &err), "%s", err.msg);
  cr_expect_eq(m->entry->nparams, 1);
  cr_expect(tu_run(m, opt_fold_batchnorm));
  HInstr *r = m->entry->root;
  cr_assert_eq(r->op, OP_ADD, "root %s", hlo_op_name(r->op));
  cr_expect_eq(r->ops[0]->op, OP_CONVOLUTION);
  cr_expect_eq(r->ops[0]->ops[1]->op, OP_CONSTANT);
  cr_expect_eq(tu_count(m->entry, OP_MULTIPLY), 0);
  cr_expect_eq(tu_count(m->entry, OP_SUBTRACT), 0);
  tu_expect_same(eval(m, a), before, 1e-5);
  hlo_arena_free(a);
  hlo_module_free(m);
}

Test(opt_fold_batchnorm, parameter_weights_are_left_alone) {
  HModule *m = tu_parse(conv_bn);
  cr_expect(!tu_run(m, opt_fold_batchnorm));
  cr_expect_eq(tu_count(m->entry, OP_MULTIPLY), 1);
  hlo_module_free(m);
}

Test(opt_freeze, renumbers_parameters_and_layout) {
  HModule *m = tu_parse("HloModule t, entry_computation_layout={(f32[2]{0}, f32[2]{0}, s32[3]{0})->f32[2]{0}}\n"
                        "ENTRY e {\n"
                        "  a = f32[2] parameter(0)\n"
                        "  b = f32[2] parameter(1)\n"
                        "  c = s32[3] parameter(2)\n"
                        "  ROOT s = f32[2] add(a, b)\n"
                        "}\n");
  HArena *a = hlo_arena_new();
  int64_t two = 2;
  Shape s = hlo_shape_array(DT_F32, 1, &two);
  Literal *v = hlo_literal_new(a, &s);
  hlo_literal_set_f64(v, 0, 5);
  hlo_literal_set_f64(v, 1, 7);
  HErr err = {0};
  cr_assert(opt_freeze(m, 1, v, &err), "%s", err.msg);
  cr_assert(hlo_verify(m, &err), "%s", err.msg);
  cr_expect_eq(m->entry->nparams, 2);
  cr_expect_str_eq(m->entry->params[1]->name, "c");
  if (m->has_entry_layout) cr_expect_eq(m->nentry_layout, 2);
  cr_expect_eq(m->entry->root->ops[1]->op, OP_CONSTANT);
  Literal *bad = hlo_literal_new(a, &s);
  cr_expect(!opt_freeze(m, 1, bad, &err), "shape mismatch must be reported");
  cr_expect(strstr(err.msg, "does not match"), "%s", err.msg);
  err.set = false;
  cr_expect(!opt_freeze(m, 7, v, &err));
  hlo_arena_free(a);
  hlo_module_free(m);
}

/* opt_freeze_specs cases: a module with three f32[2] parameters (b also known by its op_name
 * "weights"), root (a + b) * c, and b.npy = {5, 7}, c.npy = {2, 3} in a fresh directory. */
typedef struct FreezeCase {
  HModule *m;     /* the module */
  char dir[64];   /* the directory holding b.npy and c.npy */
  char b[128];    /* path of b.npy */
  char c[128];    /* path of c.npy */
  char spec[4][256]; /* room for the specs a case builds */
} FreezeCase;

static void freeze_case(FreezeCase *fc) {
  fc->m = tu_parse("HloModule t\n"
                   "ENTRY e {\n"
                   "  a = f32[2] parameter(0)\n"
                   "  b = f32[2] parameter(1), metadata={op_name=\"weights\"}\n"
                   "  c = f32[2] parameter(2)\n"
                   "  s = f32[2] add(a, b)\n"
                   "  ROOT t = f32[2] multiply(s, c)\n"
                   "}\n");
  snprintf(fc->dir, sizeof fc->dir, "/tmp/hloc_freeze_XXXXXX");
  cr_assert(mkdtemp(fc->dir));
  snprintf(fc->b, sizeof fc->b, "%s/b.npy", fc->dir);
  snprintf(fc->c, sizeof fc->c, "%s/c.npy", fc->dir);
  HArena *a = hlo_arena_new();
  int64_t two = 2;
  Shape s = hlo_shape_array(DT_F32, 1, &two);
  Literal *v = hlo_literal_new(a, &s);
  HErr err = {0};
  hlo_literal_set_f64(v, 0, 5);
  hlo_literal_set_f64(v, 1, 7);
  cr_assert(hlo_npy_write(fc->b, v, &err), "%s", err.msg);
  hlo_literal_set_f64(v, 0, 2);
  hlo_literal_set_f64(v, 1, 3);
  cr_assert(hlo_npy_write(fc->c, v, &err), "%s", err.msg);
  hlo_arena_free(a);
}

static void freeze_case_free(FreezeCase *fc) {
  remove(fc->b);
  remove(fc->c);
  rmdir(fc->dir);
  hlo_module_free(fc->m);
}

/* The frozen module on a = {1, 2}: (a + b) * c. */
static void expect_frozen_values(HModule *m) {
  HErr err = {0};
  cr_assert(hlo_verify(m, &err), "%s", err.msg);
  cr_assert_eq(m->entry->nparams, 1);
  cr_expect_str_eq(m->entry->params[0]->name, "a");
  HArena *a = hlo_arena_new();
  Literal *x = hlo_literal_new(a, &m->entry->params[0]->shape);
  hlo_literal_set_f64(x, 0, 1);
  hlo_literal_set_f64(x, 1, 2);
  Literal *r = hlo_interp_run(m, a, &x, 1, &err);
  cr_assert(r, "%s", err.msg);
  cr_expect_eq(hlo_literal_get_f64(r, 0), (1 + 5) * 2);
  cr_expect_eq(hlo_literal_get_f64(r, 1), (2 + 7) * 3);
  hlo_arena_free(a);
}

/* Freeze b and c through the specs "B_ARG=b.npy" and "C_ARG=c.npy" (c's first when c_first)
 * and check the values of the module left; the specs themselves stay as they were. */
static void freeze_by(const char *b_arg, const char *c_arg, bool c_first) {
  FreezeCase fc;
  freeze_case(&fc);
  snprintf(fc.spec[0], sizeof fc.spec[0], "%s=%s", b_arg, fc.b);
  snprintf(fc.spec[1], sizeof fc.spec[1], "%s=%s", c_arg, fc.c);
  memcpy(fc.spec[2], fc.spec[0], sizeof fc.spec[0]);
  const char *specs[] = {fc.spec[c_first], fc.spec[!c_first]};
  HErr err = {0};
  cr_assert(opt_freeze_specs(fc.m, 2, specs, &err), "%s", err.msg);
  expect_frozen_values(fc.m);
  cr_expect_str_eq(fc.spec[0], fc.spec[2], "the specs are not modified");
  freeze_case_free(&fc);
}

Test(opt_freeze_specs, numbers_given_lowest_first_keep_meaning_the_module_as_read) {
  freeze_by("1", "2", false);
}

Test(opt_freeze_specs, names_and_op_names) { freeze_by("weights", "c", true); }

/* Each bad spec list fails with a message naming the entry (or the file) and the problem,
 * and freezes nothing: all specs are checked and read before the first freeze, and the
 * highest number, out of range here, is frozen first. */
Test(opt_freeze_specs, errors_are_located_and_change_nothing) {
  FreezeCase fc;
  freeze_case(&fc);
  snprintf(fc.spec[0], sizeof fc.spec[0], "1=%s", fc.b);
  snprintf(fc.spec[1], sizeof fc.spec[1], "weights=%s", fc.c);
  snprintf(fc.spec[2], sizeof fc.spec[2], "2=%s/missing.npy", fc.dir);
  snprintf(fc.spec[3], sizeof fc.spec[3], "7=%s", fc.c);
  struct {
    const char *second; /* the spec after fc.spec[0] */
    const char *want;   /* a part of the message */
  } cases[] = {
      {fc.spec[1], "computation 'e': --freeze: parameter 1 given twice"},
      {fc.spec[2], "missing.npy"},
      {"nope=x.npy", "computation 'e': --freeze: no entry parameter named 'nope'"},
      {"1", "computation 'e': --freeze needs ARG=FILE.npy, got '1'"},
      {"=x.npy", "computation 'e': --freeze needs ARG=FILE.npy, got '=x.npy'"},
      {"2=", "computation 'e': --freeze needs ARG=FILE.npy, got '2='"},
      {fc.spec[3], "computation 'e': --freeze: no parameter 7"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    const char *specs[] = {fc.spec[0], cases[i].second};
    HErr err = {0};
    cr_expect(!opt_freeze_specs(fc.m, 2, specs, &err), "case %zu succeeded", i);
    cr_expect(strstr(err.msg, cases[i].want), "case %zu: '%s' lacks '%s'", i, err.msg,
              cases[i].want);
    cr_expect(!strncmp(err.msg, "<test>: ", 8) || strstr(err.msg, fc.dir), "not located: %s",
              err.msg);
    cr_expect_eq(fc.m->entry->nparams, 3, "case %zu froze something", i);
  }
  freeze_case_free(&fc);
}

/* ------------------------------------------------------------------ fusion */

static HInstr *find_fusion(const HComp *c, FusionKind k, int nth) {
  for (int i = 0; i < c->ninstrs; i++)
    if (c->instrs[i]->op == OP_FUSION && c->instrs[i]->fusion_kind == k && nth-- == 0)
      return c->instrs[i];
  return NULL;
}

Test(opt_fusion, elementwise_chain_is_one_loop_fusion) {
  HModule *m = tu_parse("HloModule t\n"
                        "ENTRY e {\n"
                        "  x = f32[1024] parameter(0)\n"
                        "  one = f32[] constant(1)\n"
                        "  ob = f32[1024] broadcast(one), dimensions={}\n"
                        "  a = f32[1024] add(x, ob)\n"
                        "  two = f32[] constant(2)\n"
                        "  tb = f32[1024] broadcast(two), dimensions={}\n"
                        "  m = f32[1024] multiply(a, tb)\n"
                        "  ROOT t = f32[1024] tanh(m)\n"
                        "}\n");
  HArena *ar = hlo_arena_new();
  Literal *before = eval(m, ar);
  cr_expect(tu_run(m, opt_fusion));
  HInstr *r = m->entry->root;
  cr_assert_eq(r->op, OP_FUSION);
  cr_expect_eq(r->fusion_kind, FK_LOOP);
  cr_expect_eq(m->entry->ninstrs, 2, "parameter + fusion");
  HComp *fc = r->calls[0];
  cr_expect(fc->is_fusion);
  cr_expect_eq(fc->nparams, 1);
  cr_expect_eq(fc->root->op, OP_TANH);
  char *txt = tu_print_instr(r);
  cr_expect(strstr(txt, "kind=kLoop") && strstr(txt, "calls=fused_computation"), "%s", txt);
  free(txt);
  tu_expect_same(eval(m, ar), before, 0);
  hlo_arena_free(ar);
  hlo_module_free(m);
}

Test(opt_fusion, dot_bias_relu_is_one_output_fusion) {
  HModule *m = tu_parse("HloModule t\n"
                        "ENTRY e {\n"
                        "  x = f32[8,16] parameter(0)\n"
                        "  w = f32[16,4] parameter(1)\n"
                        "  b = f32[4] parameter(2)\n"
                        "  d = f32[8,4] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
                        "  bb = f32[8,4] broadcast(b), dimensions={1}\n"
                        "  a = f32[8,4] add(d, bb)\n"
                        "  z = f32[] constant(0)\n"
                        "  zb = f32[8,4] broadcast(z), dimensions={}\n"
                        "  ROOT r = f32[8,4] maximum(a, zb)\n"
                        "}\n");
  HArena *ar = hlo_arena_new();
  Literal *before = eval(m, ar);
  tu_run(m, opt_fusion);
  HInstr *r = m->entry->root;
  cr_assert_eq(r->op, OP_FUSION);
  cr_expect_eq(r->fusion_kind, FK_OUTPUT);
  cr_expect_eq(r->nops, 3);
  /* parameters numbered in operand order */
  HComp *fc = r->calls[0];
  for (int i = 0; i < fc->nparams; i++)
    cr_expect(hlo_shape_eq(&fc->params[i]->shape, &r->ops[i]->shape));
  cr_expect_eq(tu_count(fc, OP_DOT), 1);
  cr_expect_eq(fc->root->op, OP_MAXIMUM);
  tu_expect_same(eval(m, ar), before, 1e-6);
  hlo_arena_free(ar);
  hlo_module_free(m);
}

/* conv -> per-channel scale -> relu -> mean over the spatial dims (NHWC); and a large
   gradient-like value read by two convolutions */
static const char *conv_pool =
    "HloModule t\n"
    "add {\n"
    "  p = f32[] parameter(0)\n"
    "  q = f32[] parameter(1)\n"
    "  ROOT s = f32[] add(p, q)\n"
    "}\n"
    "ENTRY e {\n"
    "  x = f32[2,8,8,3] parameter(0)\n"
    "  k = f32[3,3,3,4] parameter(1)\n"
    "  g = f32[4] parameter(2)\n"
    "  c = f32[2,8,8,4] convolution(x, k), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f\n"
    "  gb = f32[2,8,8,4] broadcast(g), dimensions={3}\n"
    "  sc = f32[2,8,8,4] multiply(c, gb)\n"
    "  z = f32[] constant(0)\n"
    "  zb = f32[2,8,8,4] broadcast(z), dimensions={}\n"
    "  r = f32[2,8,8,4] maximum(sc, zb)\n"
    "  ROOT m = f32[2,4] reduce(r, z), dimensions={1,2}, to_apply=add\n"
    "}\n";

Test(opt_fusion, conv_epilogue_read_by_a_reduction_goes_into_it_when_asked) {
  for (int ask = 0; ask < 2; ask++) {
    HModule *m = tu_parse(conv_pool);
    HArena *ar = hlo_arena_new();
    Literal *before = eval(m, ar);
    OptOpts o = {0};
    o.conv_epilogue_to_reduce = ask;
    tu_run_opts(m, opt_fusion, &o);
    HInstr *red = find_fusion(m->entry, FK_INPUT, 0), *conv = find_fusion(m->entry, FK_OUTPUT, 0);
    cr_assert(red, "the reduction is a kInput fusion");
    if (ask) {
      /* the convolution stands alone (no kOutput fusion), the reduction computes scale and relu */
      cr_expect_null(conv);
      cr_expect_eq(tu_count(red->calls[0], OP_MAXIMUM), 1);
      cr_expect_eq(tu_count(red->calls[0], OP_CONVOLUTION), 0);
    } else {
      cr_assert(conv, "by default the convolution takes its epilogue");
      cr_expect_eq(tu_count(conv->calls[0], OP_MAXIMUM), 1);
      cr_expect_eq(tu_count(red->calls[0], OP_MAXIMUM), 0);
    }
    tu_expect_same(eval(m, ar), before, 1e-5);
    hlo_arena_free(ar);
    hlo_module_free(m);
  }
}

Test(opt_fusion, large_arithmetic_stays_out_of_staged_convolution_operands) {
  /* d = dy * 2 (1M+ elements) read by two convolutions: duplicated into both operands by
     default, computed once by its own kernel when the target stages convolution operands */
  static const char *two_convs =
      "HloModule t\n"
      "ENTRY e {\n"
      "  dy = f32[4,128,64,32] parameter(0)\n"
      "  k1 = f32[3,3,32,8] parameter(1)\n"
      "  k2 = f32[3,3,32,8] parameter(2)\n"
      "  two = f32[] constant(2)\n"
      "  tb = f32[4,128,64,32] broadcast(two), dimensions={}\n"
      "  d = f32[4,128,64,32] multiply(dy, tb)\n"
      "  c1 = f32[4,128,64,8] convolution(d, k1), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f\n"
      "  c2 = f32[4,128,64,8] convolution(d, k2), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f\n"
      "  ROOT t = (f32[4,128,64,8], f32[4,128,64,8]) tuple(c1, c2)\n"
      "}\n";
  for (int staged = 0; staged < 2; staged++) {
    HModule *m = tu_parse(two_convs);
    OptOpts o = {0};
    o.conv_operands_staged = staged;
    tu_run_opts(m, opt_fusion, &o);
    int muls_in_conv_fusions = 0, loops = 0;
    for (int i = 0; i < m->entry->ninstrs; i++) {
      HInstr *x = m->entry->instrs[i];
      if (x->op != OP_FUSION) continue;
      if (x->fusion_kind == FK_OUTPUT) muls_in_conv_fusions += tu_count(x->calls[0], OP_MULTIPLY);
      if (x->fusion_kind == FK_LOOP) loops++;
    }
    cr_expect_eq(muls_in_conv_fusions, staged ? 0 : 2, "staged=%d", staged);
    cr_expect_eq(loops, staged ? 1 : 0, "staged=%d: the product as its own kernel", staged);
    hlo_module_free(m);
  }
}

static const char *softmax =
    "HloModule t\n"
    "mx {\n"
    "  ma = f32[] parameter(0)\n"
    "  mb2 = f32[] parameter(1)\n"
    "  ROOT mm = f32[] maximum(ma, mb2)\n"
    "}\n"
    "sm {\n"
    "  sa = f32[] parameter(0)\n"
    "  sb2 = f32[] parameter(1)\n"
    "  ROOT ss = f32[] add(sa, sb2)\n"
    "}\n"
    "ENTRY e {\n"
    "  x = f32[4,16] parameter(0)\n"
    "  ninf = f32[] constant(-inf)\n"
    "  m = f32[4] reduce(x, ninf), dimensions={1}, to_apply=mx\n"
    "  mb = f32[4,16] broadcast(m), dimensions={0}\n"
    "  d = f32[4,16] subtract(x, mb)\n"
    "  ex = f32[4,16] exponential(d)\n"
    "  z = f32[] constant(0)\n"
    "  s = f32[4] reduce(ex, z), dimensions={1}, to_apply=sm\n"
    "  sb = f32[4,16] broadcast(s), dimensions={0}\n"
    "  ROOT r = f32[4,16] divide(ex, sb)\n"
    "}\n";

Test(opt_fusion, softmax_is_three_kernels_with_multi_output_exp_and_sum) {
  HModule *m = tu_parse(softmax);
  HArena *ar = hlo_arena_new();
  Literal *before = eval(m, ar);
  tu_run(m, opt_fusion);
  OptStats st;
  opt_stats(m, &st);
  cr_expect_eq(st.kernels, 3);
  cr_expect_eq(st.by_kind[FK_INPUT], 2);
  cr_expect_eq(st.by_kind[FK_LOOP], 1);
  cr_expect_eq(st.multi_output, 1);
  cr_expect_eq(tu_count(m->entry, OP_EXP), 0);
  /* exp is computed once: exactly one exponential across all fused computations */
  int nexp = 0;
  for (int i = 0; i < m->ncomps; i++) nexp += tu_count(m->comps[i], OP_EXP);
  cr_expect_eq(nexp, 1, "exp duplicated %d times", nexp);
  HInstr *mo = NULL;
  for (int i = 0; i < m->entry->ninstrs; i++)
    if (m->entry->instrs[i]->op == OP_FUSION && hlo_shape_is_tuple(&m->entry->instrs[i]->shape))
      mo = m->entry->instrs[i];
  cr_assert(mo);
  cr_expect_eq(mo->calls[0]->root->op, OP_TUPLE);
  cr_expect_eq(tu_count(mo->calls[0], OP_REDUCE), 1, "max and sum are not one fusion");
  tu_expect_same(eval(m, ar), before, 1e-6);
  hlo_arena_free(ar);
  hlo_module_free(m);
}

Test(opt_fusion, mean_epilogue_and_sibling_reductions) {
  HModule *m = tu_parse("HloModule t\n"
                        "sm {\n"
                        "  a = f32[] parameter(0)\n"
                        "  b = f32[] parameter(1)\n"
                        "  ROOT s = f32[] add(a, b)\n"
                        "}\n"
                        "ENTRY e {\n"
                        "  x = f32[8,32] parameter(0)\n"
                        "  z = f32[] constant(0)\n"
                        "  s1 = f32[8] reduce(x, z), dimensions={1}, to_apply=sm\n"
                        "  n = f32[] constant(32)\n"
                        "  nb = f32[8] broadcast(n), dimensions={}\n"
                        "  mean = f32[8] divide(s1, nb)\n"
                        "  x2 = f32[8,32] multiply(x, x)\n"
                        "  s2 = f32[8] reduce(x2, z), dimensions={1}, to_apply=sm\n"
                        "  msq = f32[8] divide(s2, nb)\n"
                        "  ROOT t = (f32[8], f32[8]) tuple(mean, msq)\n"
                        "}\n");
  HArena *ar = hlo_arena_new();
  Literal *before = eval(m, ar);
  tu_run(m, opt_fusion);
  OptStats st;
  opt_stats(m, &st);
  cr_expect_eq(st.kernels, 1, "mean and mean of squares: one multi-output kInput fusion");
  HInstr *f = find_fusion(m->entry, FK_INPUT, 0);
  cr_assert(f);
  cr_expect_eq(f->calls[0]->root->op, OP_TUPLE);
  cr_expect_eq(tu_count(f->calls[0], OP_DIVIDE), 2, "the divisions are reduce epilogues");
  Literal *after = eval(m, ar);
  for (int k = 0; k < 2; k++) tu_expect_same(after->elems[k], before->elems[k], 1e-6);
  hlo_arena_free(ar);
  hlo_module_free(m);
}

Test(opt_fusion, expensive_producer_with_two_consumers_is_not_duplicated) {
  HModule *m = tu_parse("HloModule t\n"
                        "ENTRY e {\n"
                        "  x = f32[64] parameter(0)\n"
                        "  y = f32[64] parameter(1)\n"
                        "  e = f32[64] exponential(x)\n"
                        "  a = f32[64] add(e, y)\n"
                        "  s = f32[32] slice(e), slice={[0:32]}\n"
                        "  r = f32[32,64] broadcast(s), dimensions={0}\n"
                        "  c = f32[] constant(1)\n"
                        "  cb = f32[64] broadcast(c), dimensions={}\n"
                        "  b = f32[64] multiply(a, cb)\n"
                        "  ROOT t = (f32[64], f32[32,64]) tuple(b, r)\n"
                        "}\n");
  tu_run(m, opt_fusion);
  int nexp = 0;
  for (int i = 0; i < m->ncomps; i++) nexp += tu_count(m->comps[i], OP_EXP);
  cr_expect_eq(nexp, 1);
  /* exp is its own kernel, read by two fusions */
  HInstr *fe = NULL;
  for (int i = 0; i < m->entry->ninstrs; i++) {
    HInstr *in = m->entry->instrs[i];
    if (in->op == OP_FUSION && tu_count(in->calls[0], OP_EXP)) fe = in;
  }
  cr_assert(fe);
  cr_expect_eq(fe->calls[0]->ninstrs, 2, "param + exp");
  hlo_module_free(m);
}

Test(opt_fusion, transposes_fuse_into_dot_operands) {
  HModule *m = tu_parse("HloModule t\n"
                        "ENTRY e {\n"
                        "  q = f32[2,8,4,16] parameter(0)\n"
                        "  k = f32[2,8,4,16] parameter(1)\n"
                        "  qt = f32[2,4,8,16] transpose(q), dimensions={0,2,1,3}\n"
                        "  kt = f32[2,4,8,16] transpose(k), dimensions={0,2,1,3}\n"
                        "  ROOT d = f32[2,4,8,8] dot(qt, kt), lhs_batch_dims={0,1}, lhs_contracting_dims={3}, rhs_batch_dims={0,1}, rhs_contracting_dims={3}\n"
                        "}\n");
  HArena *ar = hlo_arena_new();
  Literal *before = eval(m, ar);
  tu_run(m, opt_fusion);
  OptStats st;
  opt_stats(m, &st);
  cr_expect_eq(st.kernels, 1);
  cr_expect_eq(m->entry->root->fusion_kind, FK_OUTPUT);
  tu_expect_same(eval(m, ar), before, 1e-6);
  hlo_arena_free(ar);
  hlo_module_free(m);
}

Test(opt_fusion, fused_module_prints_and_parses_back) {
  HModule *m = tu_parse(softmax);
  tu_run(m, opt_fusion);
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  hlo_print_module(f, m, NULL);
  fclose(f);
  HErr err = {0};
  HModule *p = hlo_parse_text(buf, len, "<printed>", &err);
  cr_assert(p, "%s\n%s", err.msg, buf);
  cr_expect(hlo_verify(p, &err), "%s", err.msg);
  OptStats a, b;
  opt_stats(m, &a);
  opt_stats(p, &b);
  cr_expect_eq(a.kernels, b.kernels);
  free(buf);
  hlo_module_free(p);
  hlo_module_free(m);
}

/* ------------------------------------------------------------------ stats, graphviz */

Test(opt_stats, counts_kernels_not_plumbing) {
  HModule *m = tu_parse("HloModule t\n"
                        "ENTRY e {\n"
                        "  x = f32[4,4] parameter(0)\n"
                        "  r = f32[16] reshape(x)\n"
                        "  n = f32[16] negate(r)\n"
                        "  d = f32[4,4] dot(x, x), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
                        "  ROOT t = (f32[16], f32[4,4]) tuple(n, d)\n"
                        "}\n");
  OptStats s;
  opt_stats(m, &s);
  cr_expect_eq(s.kernels, 2, "negate and dot; reshape and tuple are free");
  cr_expect_eq(s.unfused_dots, 1);
  hlo_module_free(m);
}

Test(opt_graphviz, fusions_are_labelled_boxes_with_shapes_on_edges) {
  HModule *m = tu_parse(softmax);
  tu_run(m, opt_fusion);
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  opt_write_dot(f, m->entry);
  fclose(f);
  cr_expect(strstr(buf, "digraph"));
  cr_expect(strstr(buf, "kInput"), "%s", buf);
  cr_expect(strstr(buf, "exponential"), "%s", buf);
  cr_expect(strstr(buf, "label=\"f32[4,16]\""), "%s", buf);
  free(buf);
  hlo_module_free(m);
}
