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
#include "proto.h"
#include "test_util.h"

/* The entry evaluated on args made of 0.25*((7k + i) % 13) - 1 (every parameter i). */
static Literal *eval(HModule *m, HArena *a) { return tu_eval(m, a, 0.25, 7, 1, 13); }

/* ------------------------------------------------------------------ algsimp */

/* flatten-params: a nested tuple parameter between two arrays becomes three leaf parameters
 * (numbers 1..3, the last array moves to 4), named after their tuple index; the entry layout
 * lists five parameters and the alias into the tuple's leaf {1, 0} names parameter 2; the
 * value computed from the leaves is the one computed from the tuple. */
Test(opt_flatten_params, tuple_parameter_becomes_its_leaves) {
  static const char *text = "HloModule t, input_output_alias={ {}: (1, {1, 0}, may-alias) }, "
                            "entry_computation_layout={(f32[4]{0}, (f32[4]{0}, (f32[4]{0}, "
                            "s32[4]{0})), f32[4]{0})->f32[4]{0}}\n"
                            "ENTRY e {\n"
                            "  x = f32[4] parameter(0)\n"
                            "  p = (f32[4], (f32[4], s32[4])) parameter(1)\n"
                            "  z = f32[4] parameter(2)\n"
                            "  a = f32[4] get-tuple-element(p), index=0\n"
                            "  q = (f32[4], s32[4]) get-tuple-element(p), index=1\n"
                            "  b = f32[4] get-tuple-element(q), index=0\n"
                            "  c = s32[4] get-tuple-element(q), index=1\n"
                            "  cf = f32[4] convert(c)\n"
                            "  s = f32[4] add(a, b)\n"
                            "  t = f32[4] multiply(s, cf)\n"
                            "  u = f32[4] subtract(t, x)\n"
                            "  ROOT r = f32[4] add(u, z)\n"
                            "}\n";
  HModule *m = tu_parse(text);
  HArena *ar = hlo_arena_new();
  /* leaves x, a, b, c, z, and the same values as the tuple argument of the original */
  const Shape *ps = &m->entry->params[1]->shape;
  const Shape *ls[5] = {&m->entry->params[0]->shape, &ps->tuple[0], &ps->tuple[1].tuple[0],
                        &ps->tuple[1].tuple[1], &m->entry->params[2]->shape};
  Literal *leaf[5];
  for (int i = 0; i < 5; i++) {
    leaf[i] = hlo_literal_new(ar, ls[i]);
    for (int64_t k = 0; k < 4; k++)
      hlo_literal_set_f64(leaf[i], k, (double)(3 * i + k) * 0.5 - 2);
  }
  Literal *tup = hlo_literal_new(ar, ps);
  tup->elems[0] = leaf[1];
  tup->elems[1]->elems[0] = leaf[2];
  tup->elems[1]->elems[1] = leaf[3];
  Literal *orig_args[3] = {leaf[0], tup, leaf[4]};
  HErr err = {0};
  Literal *want = hlo_interp_run(m, ar, orig_args, 3, &err);
  cr_assert(want, "%s", err.msg);
  cr_assert(tu_run(m, opt_flatten_params));
  cr_assert(hlo_verify(m, &err), "%s", err.msg);
  HComp *e = m->entry;
  cr_assert_eq(e->nparams, 5);
  const char *names[5] = {"x", "p.0", "p.1.0", "p.1.1", "z"};
  for (int i = 0; i < 5; i++) {
    cr_expect_str_eq(e->params[i]->name, names[i]);
    cr_expect(hlo_shape_eq(&e->params[i]->shape, ls[i]), "parameter %d", i);
  }
  cr_expect_eq(m->nentry_layout, 5);
  cr_assert_eq(m->nalias, 1);
  cr_expect_eq(m->alias[0].param, 2);
  cr_expect_eq(m->alias[0].param_index.n, 0);
  Literal *got = hlo_interp_run(m, ar, leaf, 5, &err);
  cr_assert(got, "%s", err.msg);
  tu_expect_same(got, want, 0);
  cr_expect(!tu_run(m, opt_flatten_params), "a second run changes nothing");
  hlo_arena_free(ar);
  hlo_module_free(m);
}

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

static const char *conv_bn = "HloModule t\n"
                             "ENTRY e {\n"
                             "  x = f32[1,2,4,4] parameter(0)\n"
                             "  w = f32[3,2,3,3] parameter(1)\n"
                             "  c = f32[1,3,4,4] convolution(x, w), window={size=3x3 pad=1_1x1_1}, "
                             "dim_labels=bf01_oi01->bf01\n"
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
  HModule *m = tu_parse(
      "HloModule t, entry_computation_layout={(f32[2]{0}, f32[2]{0}, s32[3]{0})->f32[2]{0}}\n"
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
  HModule *m;        /* the module */
  char dir[64];      /* the directory holding b.npy and c.npy */
  char b[128];       /* path of b.npy */
  char c[128];       /* path of c.npy */
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
  HModule *m =
      tu_parse("HloModule t\n"
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

/* opt_fusion with options o on m, whose values must stay what they were before it. */
static void fuse_keeping_values(HModule *m, const OptOpts *o) {
  HArena *ar = hlo_arena_new();
  Literal *before = eval(m, ar);
  tu_run_opts(m, opt_fusion, o);
  tu_expect_same(eval(m, ar), before, 1e-5);
  hlo_arena_free(ar);
}

/* conv -> per-channel scale -> relu -> mean over the spatial dims (NHWC); and a large
   gradient-like value read by two convolutions */
static const char *conv_pool = "HloModule t\n"
                               "add {\n"
                               "  p = f32[] parameter(0)\n"
                               "  q = f32[] parameter(1)\n"
                               "  ROOT s = f32[] add(p, q)\n"
                               "}\n"
                               "ENTRY e {\n"
                               "  x = f32[2,8,8,3] parameter(0)\n"
                               "  k = f32[3,3,3,4] parameter(1)\n"
                               "  g = f32[4] parameter(2)\n"
                               "  c = f32[2,8,8,4] convolution(x, k), window={size=3x3 "
                               "pad=1_1x1_1}, dim_labels=b01f_01io->b01f\n"
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
    OptOpts o = {0};
    o.conv_epilogue_to_reduce = ask;
    fuse_keeping_values(m, &o);
    HInstr *red = find_fusion(m->entry, FK_INPUT, 0), *conv = find_fusion(m->entry, FK_OUTPUT, 0);
    if (ask) {
      /* the convolution stands alone (no kOutput fusion), the reduction computes scale and relu */
      cr_assert(red, "the reduction is a kInput fusion");
      cr_expect_null(conv);
      cr_expect_eq(tu_count(red->calls[0], OP_MAXIMUM), 1);
      cr_expect_eq(tu_count(red->calls[0], OP_CONVOLUTION), 0);
    } else {
      /* by default the convolution takes its epilogue and the sum over it: one kernel */
      cr_expect_null(red);
      cr_assert(conv, "the convolution's fusion");
      cr_expect_eq(conv->calls[0]->root->op, OP_REDUCE);
      cr_expect_eq(tu_count(conv->calls[0], OP_MAXIMUM), 1);
      cr_expect_eq(tu_count(conv->calls[0], OP_CONVOLUTION), 1);
    }
    hlo_module_free(m);
  }
}

Test(opt_fusion, reduction_joins_conv_epilogue_only_when_it_keeps_few_elements_and_the_feature) {
  /* dims={1,2} keeps 8 of 512 (joins); {2} keeps 64 (1/8: joins); {0} keeps 256 (stays a
     kInput fusion of its own); {1,2,3} sums the feature dimension (stays); a maximum joins,
     a product does not */
  static const struct {
    const char *dims, *shape, *fn;
    bool joins;
  } cases[] = {{"1,2", "f32[2,4]", "add", true},  {"2", "f32[2,8,4]", "add", true},
               {"0", "f32[8,8,4]", "add", false}, {"1,2,3", "f32[2]", "add", false},
               {"1,2", "f32[2,4]", "mx", true},   {"1,2", "f32[2,4]", "mul", false}};
  static const char *reducers = "mx {\n  p1 = f32[] parameter(0)\n  q1 = f32[] parameter(1)\n  "
                                "ROOT t1 = f32[] maximum(p1, q1)\n}\n"
                                "mul {\n  p2 = f32[] parameter(0)\n  q2 = f32[] parameter(1)\n  "
                                "ROOT t2 = f32[] multiply(p2, q2)\n}\n";
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char text[4096];
    const char *entry = strstr(conv_pool, "ENTRY"), *tail = strstr(conv_pool, "  ROOT m");
    snprintf(text, sizeof text,
             "%.*s%s%.*s  ROOT m = %s reduce(r, z), dimensions={%s}, to_apply=%s\n}\n",
             (int)(entry - conv_pool), conv_pool, reducers, (int)(tail - entry), entry,
             cases[i].shape, cases[i].dims, cases[i].fn);
    HModule *m = tu_parse(text);
    fuse_keeping_values(m, &(OptOpts){0});
    HInstr *red = find_fusion(m->entry, FK_INPUT, 0), *conv = find_fusion(m->entry, FK_OUTPUT, 0);
    cr_assert(conv, "%s over {%s}: the convolution's fusion", cases[i].fn, cases[i].dims);
    cr_expect_eq(conv->calls[0]->root->op == OP_REDUCE, cases[i].joins, "%s over {%s}", cases[i].fn,
                 cases[i].dims);
    cr_expect_eq(red == NULL, cases[i].joins, "%s over {%s}", cases[i].fn, cases[i].dims);
    hlo_module_free(m);
  }
}

Test(opt_fusion, reduction_stays_out_of_a_grouped_convolution) {
  /* a grouped convolution is not one the CPU's implicit GEMM takes: its pool stays a kInput
     fusion of its own */
  HModule *m = tu_parse(
      "HloModule t\n"
      "add {\n  p = f32[] parameter(0)\n  q = f32[] parameter(1)\n  ROOT s = f32[] add(p, q)\n}\n"
      "ENTRY e {\n"
      "  x = f32[2,8,8,4] parameter(0)\n"
      "  k = f32[3,3,2,4] parameter(1)\n"
      "  c = f32[2,8,8,4] convolution(x, k), window={size=3x3 pad=1_1x1_1}, "
      "dim_labels=b01f_01io->b01f, feature_group_count=2\n"
      "  z = f32[] constant(0)\n"
      "  zb = f32[2,8,8,4] broadcast(z), dimensions={}\n"
      "  r = f32[2,8,8,4] maximum(c, zb)\n"
      "  ROOT m = f32[2,4] reduce(r, z), dimensions={1,2}, to_apply=add\n"
      "}\n");
  fuse_keeping_values(m, &(OptOpts){0});
  cr_expect(find_fusion(m->entry, FK_INPUT, 0) != NULL, "the pool is a kInput fusion of its own");
  hlo_module_free(m);
}

/* Instructions with opcode op inside m's kOutput fusions; *loops: its kLoop fusions. */
static int count_in_output_fusions(const HModule *m, HOp op, int *loops) {
  int n = 0;
  *loops = 0;
  for (int i = 0; i < m->entry->ninstrs; i++) {
    const HInstr *x = m->entry->instrs[i];
    if (x->op != OP_FUSION) continue;
    if (x->fusion_kind == FK_OUTPUT) n += tu_count(x->calls[0], op);
    if (x->fusion_kind == FK_LOOP) ++*loops;
  }
  return n;
}

Test(opt_fusion, large_arithmetic_stays_out_of_staged_convolution_operands) {
  /* d = dy * 2 (1M+ elements) read by two convolutions: duplicated into both operands by
     default, computed once by its own kernel when the target stages convolution operands */
  static const char *two_convs = "HloModule t\n"
                                 "ENTRY e {\n"
                                 "  dy = f32[4,128,64,32] parameter(0)\n"
                                 "  k1 = f32[3,3,32,8] parameter(1)\n"
                                 "  k2 = f32[3,3,32,8] parameter(2)\n"
                                 "  two = f32[] constant(2)\n"
                                 "  tb = f32[4,128,64,32] broadcast(two), dimensions={}\n"
                                 "  d = f32[4,128,64,32] multiply(dy, tb)\n"
                                 "  c1 = f32[4,128,64,8] convolution(d, k1), window={size=3x3 "
                                 "pad=1_1x1_1}, dim_labels=b01f_01io->b01f\n"
                                 "  c2 = f32[4,128,64,8] convolution(d, k2), window={size=3x3 "
                                 "pad=1_1x1_1}, dim_labels=b01f_01io->b01f\n"
                                 "  ROOT t = (f32[4,128,64,8], f32[4,128,64,8]) tuple(c1, c2)\n"
                                 "}\n";
  for (int staged = 0; staged < 2; staged++) {
    HModule *m = tu_parse(two_convs);
    OptOpts o = {0};
    o.conv_operands_staged = staged;
    tu_run_opts(m, opt_fusion, &o);
    int loops, muls_in_conv_fusions = count_in_output_fusions(m, OP_MULTIPLY, &loops);
    cr_expect_eq(muls_in_conv_fusions, staged ? 0 : 2, "staged=%d", staged);
    cr_expect_eq(loops, staged ? 1 : 0, "staged=%d: the product as its own kernel", staged);
    hlo_module_free(m);
  }
}

Test(opt_fusion, prologue_of_several_staged_dots_is_written_once) {
  /* bf16(x * 2) read by three products: duplicated into their operands by default, one loop
     kernel read in place when the target stages dot operands */
  static const char *three_dots = "HloModule t\n"
                                  "ENTRY e {\n"
                                  "  x = f32[64,1024] parameter(0)\n"
                                  "  w1 = bf16[1024,64] parameter(1)\n"
                                  "  w2 = bf16[1024,64] parameter(2)\n"
                                  "  w3 = bf16[1024,64] parameter(3)\n"
                                  "  two = f32[] constant(2)\n"
                                  "  tb = f32[64,1024] broadcast(two), dimensions={}\n"
                                  "  d = f32[64,1024] multiply(x, tb)\n"
                                  "  h = bf16[64,1024] convert(d)\n"
                                  "  a = f32[64,64] dot(h, w1), lhs_contracting_dims={1}, "
                                  "rhs_contracting_dims={0}\n"
                                  "  b = f32[64,64] dot(h, w2), lhs_contracting_dims={1}, "
                                  "rhs_contracting_dims={0}\n"
                                  "  c = f32[64,64] dot(h, w3), lhs_contracting_dims={1}, "
                                  "rhs_contracting_dims={0}\n"
                                  "  ROOT t = (f32[64,64], f32[64,64], f32[64,64]) tuple(a, b, c)\n"
                                  "}\n";
  for (int staged = 0; staged < 2; staged++) {
    HModule *m = tu_parse(three_dots);
    OptOpts o = {0};
    o.dot_operands_staged = staged;
    fuse_keeping_values(m, &o);
    int loops, converts_in_dot_fusions = count_in_output_fusions(m, OP_CONVERT, &loops);
    cr_expect_eq(converts_in_dot_fusions, staged ? 0 : 3, "staged=%d", staged);
    cr_expect_eq(loops, staged ? 1 : 0, "staged=%d: the prologue as its own kernel", staged);
    hlo_module_free(m);
  }
}

Test(opt_fusion, softmax_is_one_row_chain_when_the_target_has_row_kernels) {
  /* softmax over the minor dim: max, exp-and-sum and divide as three fusions by default; one
     kInput fusion holding both reductions with OptOpts.row_chains */
  static const char *softmax =
      "HloModule t\n"
      "mx {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT m = f32[] maximum(a, "
      "b)\n}\n"
      "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n"
      "ENTRY e {\n"
      "  x = f32[4,6,50] parameter(0)\n"
      "  ninf = f32[] constant(-inf)\n"
      "  m = f32[4,6] reduce(x, ninf), dimensions={2}, to_apply=mx\n"
      "  mb = f32[4,6,50] broadcast(m), dimensions={0,1}\n"
      "  d = f32[4,6,50] subtract(x, mb)\n"
      "  ex = f32[4,6,50] exponential(d)\n"
      "  z = f32[] constant(0)\n"
      "  l = f32[4,6] reduce(ex, z), dimensions={2}, to_apply=add\n"
      "  lb = f32[4,6,50] broadcast(l), dimensions={0,1}\n"
      "  ROOT p = f32[4,6,50] divide(ex, lb)\n"
      "}\n";
  for (int chains = 0; chains < 2; chains++) {
    HModule *m = tu_parse(softmax);
    OptOpts o = {0};
    o.row_chains = chains;
    fuse_keeping_values(m, &o);
    int fusions = 0, reduces = 0;
    for (int i = 0; i < m->entry->ninstrs; i++) {
      HInstr *x = m->entry->instrs[i];
      if (x->op != OP_FUSION) continue;
      fusions++;
      if (chains) cr_expect_eq(x->fusion_kind, FK_INPUT);
      reduces += tu_count(x->calls[0], OP_REDUCE);
    }
    cr_expect_eq(fusions, chains ? 1 : 3, "row_chains=%d: %d fusions", chains, fusions);
    cr_expect_eq(reduces, 2, "row_chains=%d", chains);
    hlo_module_free(m);
  }
}

Test(opt_fusion, transposed_convolution_operand_is_written_by_its_producer) {
  /* a max-pool of an NCHW input read by two NHWC convolutions through one transpose: by
     default the transpose roots a loop kernel that the pool joins (the pool is written once,
     transposed), and the convolutions read it in place; a target that stages convolution
     operands keeps the transpose in each convolution's operand */
  static const char *pool_convs =
      "HloModule t\n"
      "max { a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT m = f32[] maximum(a, b) }\n"
      "ENTRY e {\n"
      "  x = f32[4,16,64,64] parameter(0)\n"
      "  k1 = f32[3,3,16,8] parameter(1)\n"
      "  k2 = f32[1,1,16,8] parameter(2)\n"
      "  c = f32[] constant(-inf)\n"
      "  p = f32[4,16,32,32] reduce-window(x, c), window={size=1x1x3x3 stride=1x1x2x2 "
      "pad=0_0x0_0x0_1x0_1}, to_apply=max\n"
      "  t = f32[4,32,32,16] transpose(p), dimensions={0,2,3,1}\n"
      "  c1 = f32[4,32,32,8] convolution(t, k1), window={size=3x3 pad=1_1x1_1}, "
      "dim_labels=b01f_01io->b01f\n"
      "  c2 = f32[4,32,32,8] convolution(t, k2), window={size=1x1}, dim_labels=b01f_01io->b01f\n"
      "  ROOT r = f32[4,32,32,8] add(c1, c2)\n"
      "}\n";
  for (int staged = 0; staged < 2; staged++) {
    HModule *m = tu_parse(pool_convs);
    HArena *ar = hlo_arena_new();
    Literal *before = eval(m, ar);
    OptOpts o = {0};
    o.conv_operands_staged = staged;
    tu_run_opts(m, opt_fusion, &o);
    int pool_loops = 0, transposes_in_convs = 0;
    for (int i = 0; i < m->entry->ninstrs; i++) {
      HInstr *x = m->entry->instrs[i];
      if (x->op != OP_FUSION) continue;
      const HInstr *root = x->calls[0]->root;
      if (x->fusion_kind == FK_LOOP && root->op == OP_TRANSPOSE &&
          root->ops[0]->op == OP_REDUCE_WINDOW)
        pool_loops++;
      if (x->fusion_kind == FK_OUTPUT) transposes_in_convs += tu_count(x->calls[0], OP_TRANSPOSE);
    }
    cr_expect_eq(pool_loops, staged ? 0 : 1, "staged=%d", staged);
    cr_expect_eq(transposes_in_convs, staged ? 2 : 0, "staged=%d", staged);
    tu_expect_same(eval(m, ar), before, 0);
    hlo_arena_free(ar);
    hlo_module_free(m);
  }
}

static const char *softmax = "HloModule t\n"
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
  for (int i = 0; i < m->ncomps; i++)
    nexp += tu_count(m->comps[i], OP_EXP);
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
  for (int k = 0; k < 2; k++)
    tu_expect_same(after->elems[k], before->elems[k], 1e-6);
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
  for (int i = 0; i < m->ncomps; i++)
    nexp += tu_count(m->comps[i], OP_EXP);
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
                        "  ROOT d = f32[2,4,8,8] dot(qt, kt), lhs_batch_dims={0,1}, "
                        "lhs_contracting_dims={3}, rhs_batch_dims={0,1}, rhs_contracting_dims={3}\n"
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
  HModule *m =
      tu_parse("HloModule t\n"
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

/* ------------------------------------------------------------------ reduce-factor */

/* The entry evaluated on pseudo-random arguments in [-1, 1) (integers: -8 .. 7) from seed. */
static Literal *rf_eval(HModule *m, HArena *a, uint64_t seed) {
  hlo_comp_renumber(m->entry);
  int np = m->entry->nparams;
  Literal **args = hlo_arena_alloc(a, sizeof(Literal *) * (size_t)(np + 1));
  for (int i = 0; i < np; i++) {
    args[i] = hlo_literal_new(a, &m->entry->params[i]->shape);
    for (int64_t k = 0; k < hlo_shape_elems(&args[i]->shape); k++) {
      seed = seed * 6364136223846793005ull + 1442695040888963407ull;
      double u = (double)(seed >> 11) * 0x1p-53 * 2 - 1;
      hlo_literal_set_f64(args[i], k, hlo_dtype_is_int(args[i]->shape.dt) ? floor(8 * u) : u);
    }
  }
  HErr err = {0};
  Literal *r = hlo_interp_run(m, a, args, np, &err);
  cr_assert(r, "%s", err.msg);
  return r;
}

/* m, evaluated on the arguments of seed, still gives before (every leaf, within 1e-5). */
static void rf_expect_same(HModule *m, HArena *a, const Literal *before, uint64_t seed) {
  Literal *after = rf_eval(m, a, seed);
  if (before->shape.dt != DT_TUPLE) {
    tu_expect_same(after, before, 1e-5);
    return;
  }
  for (int k = 0; k < before->shape.ntuple; k++)
    tu_expect_same(after->elems[k], before->elems[k], 1e-5);
}

/* Does x depend on `on` (x itself included)? */
static bool rf_reaches(const HInstr *x, const HInstr *on) {
  if (x == on) return true;
  for (int k = 0; k < x->nops; k++)
    if (rf_reaches(x->ops[k], on)) return true;
  return false;
}

/* Reduces of the entry whose operand has the given rank. */
static int rf_reduces(const HComp *c, int rank, HInstr **out, int max) {
  int n = 0;
  for (int i = 0; i < c->ninstrs; i++)
    if (c->instrs[i]->op == OP_REDUCE && c->instrs[i]->ops[0]->shape.rank == rank && n < max)
      out[n++] = c->instrs[i];
  return n;
}

static HInstr *rf_param(const HComp *c, const char *name) {
  for (int i = 0; i < c->nparams; i++)
    if (!strcmp(c->params[i]->name, name)) return c->params[i];
  cr_assert_fail("no parameter %s", name);
  return NULL;
}

#define RF_ADD                                                                                     \
  "add {\n"                                                                                        \
  "  add_p = f32[] parameter(0)\n"                                                                 \
  "  add_q = f32[] parameter(1)\n"                                                                 \
  "  ROOT add_s = f32[] add(add_p, add_q)\n"                                                       \
  "}\n"

/* The batch-norm backward sum: -2 * p6 * sum(x - mu), where p6 comes from an earlier sum. */
Test(opt_reduce_factor, batchnorm_backward_sum_loses_its_dependency) {
  HModule *m = tu_parse("HloModule t\n" RF_ADD "ENTRY e {\n"
                        "  x = f32[4,5,6,8] parameter(0)\n"
                        "  mu = f32[8] parameter(1)\n"
                        "  y = f32[4,5,6,8] parameter(2)\n"
                        "  z = f32[] constant(0)\n"
                        "  s = f32[8] reduce(y, z), dimensions={0,1,2}, to_apply=add\n"
                        "  p6 = f32[8] multiply(s, s)\n"
                        "  bp = f32[4,5,6,8] broadcast(p6), dimensions={3}\n"
                        "  bm = f32[4,5,6,8] broadcast(mu), dimensions={3}\n"
                        "  d = f32[4,5,6,8] subtract(x, bm)\n"
                        "  m1 = f32[4,5,6,8] multiply(bp, d)\n"
                        "  two = f32[] constant(2)\n"
                        "  tb = f32[4,5,6,8] broadcast(two), dimensions={}\n"
                        "  m2 = f32[4,5,6,8] multiply(m1, tb)\n"
                        "  n = f32[4,5,6,8] negate(m2)\n"
                        "  r = f32[8] reduce(n, z), dimensions={0,1,2}, to_apply=add\n"
                        "  ROOT t = (f32[8], f32[4,5,6,8]) tuple(r, m1)\n"
                        "}\n");
  HArena *a = hlo_arena_new();
  Literal *before = rf_eval(m, a, 1);
  cr_expect(tu_run(m, opt_reduce_factor));
  HInstr *red[4];
  cr_assert_eq(rf_reduces(m->entry, 4, red, 4), 2);
  HInstr *first =
      red[0]->ops[0]->op == OP_PARAMETER && !strcmp(red[0]->ops[0]->name, "y") ? red[0] : red[1];
  HInstr *sum = first == red[0] ? red[1] : red[0];
  cr_expect_eq(sum->ops[0]->op, OP_SUBTRACT, "the sum is over x - mu only: %s",
               hlo_op_name(sum->ops[0]->op));
  cr_expect(!rf_reaches(sum, first), "the sum still depends on the earlier reduction");
  cr_expect(!rf_reaches(sum, rf_param(m->entry, "y")));
  HInstr *r = m->entry->root->ops[0];
  cr_expect_eq(r->op, OP_NEGATE, "root %s", hlo_op_name(r->op));
  cr_expect(rf_reaches(r, first), "p6 multiplies the result");
  cr_expect_eq(m->entry->root->ops[1]->op, OP_MULTIPLY, "the product stays for its other user");
  rf_expect_same(m, a, before, 1);
  hlo_arena_free(a);
  hlo_module_free(m);
}

/* neg(v * x) / w * (y * k) over dims {0,2}: a vector factor, a scalar broadcast factor, a
 * divisor; and a factor seen through a reshape that drops a size-1 dimension. */
Test(opt_reduce_factor, negation_division_and_nested_factors) {
  HModule *m = tu_parse("HloModule t\n" RF_ADD "ENTRY e {\n"
                        "  x = f32[6,4,5] parameter(0)\n"
                        "  y = f32[6,4,5] parameter(1)\n"
                        "  v = f32[4] parameter(2)\n"
                        "  k = f32[] parameter(3)\n"
                        "  w = f32[4] parameter(4)\n"
                        "  u = f32[1,4] parameter(5)\n"
                        "  bv = f32[6,4,5] broadcast(v), dimensions={1}\n"
                        "  bk = f32[6,4,5] broadcast(k), dimensions={}\n"
                        "  bw = f32[6,4,5] broadcast(w), dimensions={1}\n"
                        "  bu = f32[6,1,4,5] broadcast(u), dimensions={1,2}\n"
                        "  ru = f32[6,4,5] reshape(bu)\n"
                        "  vx = f32[6,4,5] multiply(bv, x)\n"
                        "  n = f32[6,4,5] negate(vx)\n"
                        "  yk = f32[6,4,5] multiply(y, bk)\n"
                        "  p = f32[6,4,5] multiply(n, yk)\n"
                        "  q = f32[6,4,5] divide(p, bw)\n"
                        "  o = f32[6,4,5] multiply(ru, q)\n"
                        "  z = f32[] constant(0)\n"
                        "  ROOT r = f32[4] reduce(o, z), dimensions={0,2}, to_apply=add\n"
                        "}\n");
  HArena *a = hlo_arena_new();
  Literal *before = rf_eval(m, a, 2);
  cr_expect(tu_run(m, opt_reduce_factor));
  HInstr *red[2];
  cr_assert_eq(rf_reduces(m->entry, 3, red, 2), 1);
  HInstr *o = red[0]->ops[0];
  cr_assert_eq(o->op, OP_MULTIPLY, "%s", hlo_op_name(o->op));
  cr_expect(o->ops[0]->op == OP_PARAMETER && o->ops[1]->op == OP_PARAMETER,
            "the sum is over x * y alone");
  cr_expect_eq(tu_count(m->entry, OP_NEGATE), 1);
  cr_expect_eq(m->entry->root->op, OP_NEGATE);
  cr_expect_eq(tu_count(m->entry, OP_DIVIDE), 1, "w still divides");
  /* the factors are at the output's shape: rank-1 broadcasts, or the vectors themselves */
  for (int i = 0; i < m->entry->ninstrs; i++)
    if (m->entry->instrs[i]->op == OP_BROADCAST) cr_expect_eq(m->entry->instrs[i]->shape.rank, 1);
  rf_expect_same(m, a, before, 2);
  hlo_arena_free(a);
  hlo_module_free(m);
}

/* Integer sums distribute over products exactly; an integer division stays inside. */
Test(opt_reduce_factor, integer_product_exact_integer_division_kept) {
  HModule *m = tu_parse("HloModule t\n"
                        "addi {\n"
                        "  p = s32[] parameter(0)\n"
                        "  q = s32[] parameter(1)\n"
                        "  ROOT s = s32[] add(q, p)\n"
                        "}\n"
                        "ENTRY e {\n"
                        "  x = s32[3,7] parameter(0)\n"
                        "  v = s32[3] parameter(1)\n"
                        "  bv = s32[3,7] broadcast(v), dimensions={0}\n"
                        "  m = s32[3,7] multiply(x, bv)\n"
                        "  d = s32[3,7] divide(x, bv)\n"
                        "  z = s32[] constant(0)\n"
                        "  r1 = s32[3] reduce(m, z), dimensions={1}, to_apply=addi\n"
                        "  r2 = s32[3] reduce(d, z), dimensions={1}, to_apply=addi\n"
                        "  ROOT t = (s32[3], s32[3]) tuple(r1, r2)\n"
                        "}\n");
  HArena *a = hlo_arena_new();
  /* no zero divisors: v from the deterministic pattern (-1, -0.75, ...) as integers is -1, 0,
   * ... so evaluate on explicit values instead */
  hlo_comp_renumber(m->entry);
  Literal *args[2];
  for (int i = 0; i < 2; i++) {
    args[i] = hlo_literal_new(a, &m->entry->params[i]->shape);
    for (int64_t k = 0; k < hlo_shape_elems(&args[i]->shape); k++)
      hlo_literal_set_i64(args[i], k, i ? 2 + k : 11 * k - 50);
  }
  HErr err = {0};
  Literal *before = hlo_interp_run(m, a, args, 2, &err);
  cr_assert(before, "%s", err.msg);
  cr_expect(tu_run(m, opt_reduce_factor));
  HInstr *r = m->entry->root;
  cr_expect_eq(r->ops[0]->op, OP_MULTIPLY, "r1 = sum(x) * v");
  cr_expect_eq(r->ops[0]->ops[0]->op, OP_REDUCE);
  cr_expect_eq(r->ops[0]->ops[0]->ops[0]->op, OP_PARAMETER);
  cr_expect_eq(r->ops[1]->op, OP_REDUCE, "integer division does not distribute");
  cr_expect_eq(r->ops[1]->ops[0]->op, OP_DIVIDE);
  Literal *after = hlo_interp_run(m, a, args, 2, &err);
  cr_assert(after, "%s", err.msg);
  for (int k = 0; k < 2; k++)
    tu_expect_same(after->elems[k], before->elems[k], 0);
  hlo_arena_free(a);
  hlo_module_free(m);
}

/* Sums this pass must leave alone: a non-zero init, a max reducer, a factor that varies
 * along a reduced dimension, a variadic reduce, a product of factors only, and 1 / x (a
 * constant 1 is no factor to pull). */
Test(opt_reduce_factor, leaves_other_reductions_alone) {
  HModule *m =
      tu_parse("HloModule t\n" RF_ADD "mx {\n"
               "  ma = f32[] parameter(0)\n"
               "  mb = f32[] parameter(1)\n"
               "  ROOT mc = f32[] maximum(ma, mb)\n"
               "}\n"
               "add2 {\n"
               "  a0 = f32[] parameter(0)\n"
               "  a1 = f32[] parameter(1)\n"
               "  b0 = f32[] parameter(2)\n"
               "  b1 = f32[] parameter(3)\n"
               "  s0 = f32[] add(a0, b0)\n"
               "  s1 = f32[] add(a1, b1)\n"
               "  ROOT st = (f32[], f32[]) tuple(s0, s1)\n"
               "}\n"
               "ENTRY e {\n"
               "  x = f32[4,6] parameter(0)\n"
               "  v = f32[4] parameter(1)\n"
               "  w = f32[6] parameter(2)\n"
               "  bv = f32[4,6] broadcast(v), dimensions={0}\n"
               "  bw = f32[4,6] broadcast(w), dimensions={1}\n"
               "  m = f32[4,6] multiply(x, bv)\n"
               "  mw = f32[4,6] multiply(x, bw)\n"
               "  ww = f32[4,6] multiply(bw, bw)\n"
               "  z = f32[] constant(0)\n"
               "  one = f32[] constant(1)\n"
               "  ninf = f32[] constant(-inf)\n"
               "  r1 = f32[4] reduce(m, one), dimensions={1}, to_apply=add\n"
               "  r2 = f32[4] reduce(m, ninf), dimensions={1}, to_apply=mx\n"
               "  r3 = f32[4] reduce(mw, z), dimensions={1}, to_apply=add\n"
               "  r4 = (f32[4], f32[4]) reduce(m, m, z, z), dimensions={1}, to_apply=add2\n"
               "  r5 = f32[6] reduce(ww, z), dimensions={0}, to_apply=add\n"
               "  oneb = f32[4,6] broadcast(one), dimensions={}\n"
               "  rx = f32[4,6] divide(oneb, x)\n"
               "  r6 = f32[4] reduce(rx, z), dimensions={1}, to_apply=add\n"
               "  ROOT t = (f32[4], f32[4], f32[4], (f32[4], f32[4]), f32[6], f32[4]) tuple(r1, "
               "r2, r3, r4, r5, r6)\n"
               "}\n");
  int ninstrs = m->entry->ninstrs;
  cr_expect(!tu_run(m, opt_reduce_factor), "nothing to rewrite");
  cr_expect_eq(m->entry->ninstrs, ninstrs);
  HInstr *r = m->entry->root;
  for (int k = 0; k < 6; k++) {
    cr_expect_eq(r->ops[k]->op, OP_REDUCE, "result %d: %s", k, hlo_op_name(r->ops[k]->op));
    cr_expect_eq(r->ops[k]->ops[0]->op, k < 5 ? OP_MULTIPLY : OP_DIVIDE, "result %d", k);
  }
  hlo_module_free(m);
}

/* Sums of several terms: a term constant along the reduced dims that depends on a reduction
 * goes out as N * v (sum(x - mean) = sum(x) - N * mean); a term whose factor depends on a
 * reduction goes out when the graph already sums its rest; terms with plain factors stay. */
Test(opt_reduce_factor, sums_of_terms_unchain_only_for_free) {
  HModule *m = tu_parse(
      "HloModule t\n" RF_ADD "ENTRY e {\n"
      "  x = f32[5,8] parameter(0)\n"
      "  y = f32[5,8] parameter(1)\n"
      "  g = f32[5] parameter(2)\n"
      "  z = f32[] constant(0)\n"
      "  sx = f32[5] reduce(x, z), dimensions={1}, to_apply=add\n"
      "  sy = f32[5] reduce(y, z), dimensions={1}, to_apply=add\n"
      "  n = f32[] constant(8)\n"
      "  nb = f32[5] broadcast(n), dimensions={}\n"
      "  mean = f32[5] divide(sx, nb)\n"
      "  bmean = f32[5,8] broadcast(mean), dimensions={0}\n"
      "  d = f32[5,8] subtract(x, bmean)\n"
      "  sd = f32[5] reduce(d, z), dimensions={1}, to_apply=add\n"
      "  bsy = f32[5,8] broadcast(sy), dimensions={0}\n"
      "  t1 = f32[5,8] multiply(bmean, y)\n"
      "  t2 = f32[5,8] multiply(x, bsy)\n"
      "  s12 = f32[5,8] add(t1, t2)\n"
      "  s = f32[5] reduce(s12, z), dimensions={1}, to_apply=add\n"
      "  bg = f32[5,8] broadcast(g), dimensions={0}\n"
      "  dg = f32[5,8] multiply(d, bg)\n"
      "  ln = f32[5,8] add(dg, y)\n"
      "  sl = f32[5] reduce(ln, z), dimensions={1}, to_apply=add\n"
      "  yy = f32[5,8] multiply(y, y)\n"
      "  yys = f32[5,8] multiply(yy, bsy)\n"
      "  q = f32[5,8] add(yys, x)\n"
      "  sq = f32[5] reduce(q, z), dimensions={1}, to_apply=add\n"
      "  xg = f32[5,8] multiply(x, bg)\n"
      "  xgy = f32[5,8] add(xg, y)\n"
      "  sg = f32[5] reduce(xgy, z), dimensions={1}, to_apply=add\n"
      "  cc = f32[5,8] add(bmean, bsy)\n"
      "  sc = f32[5] reduce(cc, z), dimensions={1}, to_apply=add\n"
      "  ROOT t = (f32[5], f32[5], f32[5], f32[5], f32[5], f32[5]) tuple(sd, s, sl, sq, sg, sc)\n"
      "}\n");
  HArena *a = hlo_arena_new();
  Literal *before = rf_eval(m, a, 3);
  cr_expect(tu_run(m, opt_reduce_factor));
  HInstr *r = m->entry->root;
  HInstr *x = rf_param(m->entry, "x"), *y = rf_param(m->entry, "y");
  cr_expect_eq(r->ops[0]->op, OP_SUBTRACT, "sum(x - mean) = sum(x) - N * mean: %s",
               hlo_op_name(r->ops[0]->op));
  cr_expect_eq(r->ops[0]->ops[0]->op, OP_REDUCE);
  cr_expect_eq(r->ops[0]->ops[0]->ops[0], x);
  cr_expect_eq(r->ops[1]->op, OP_ADD, "mean * sum(y) + sum(x) * sy from sx and sy");
  HInstr *red[8];
  int nred = rf_reduces(m->entry, 2, red, 8);
  cr_expect_eq(nred, 7, "sx, sy, sum(x) for sd (CSE merges it with sx), sl, sq, sg, sc: %d", nred);
  for (int i = 0; i < nred; i++)
    if (rf_reaches(r->ops[1], red[i]))
      cr_expect(red[i]->ops[0] == x || red[i]->ops[0] == y, "a new pass: %s", red[i]->name);
  /* left alone: g does not come from a reduction (sl: a layer norm's shape; sg: although
   * sum(x) exists); nothing sums y * y yet (sq); only constants (sc) */
  for (int k = 2; k < 6; k++) {
    cr_expect_eq(r->ops[k]->op, OP_REDUCE, "result %d: %s", k, hlo_op_name(r->ops[k]->op));
    cr_expect_eq(r->ops[k]->ops[0]->op, OP_ADD, "result %d", k);
  }
  rf_expect_same(m, a, before, 3);
  hlo_arena_free(a);
  hlo_module_free(m);
}

/* A declined sum leaves no new instruction behind (in a fixed-point stage a dead one would
 * make DCE report a change every round): terms of constants that come from a reduction, a
 * product of constants, plain factors. The pass alone, without DCE after it. */
Test(opt_reduce_factor, declines_without_appending) {
  HModule *m = tu_parse("HloModule t\n" RF_ADD "ENTRY e {\n"
                        "  x = f32[5,8] parameter(0)\n"
                        "  g = f32[5] parameter(1)\n"
                        "  z = f32[] constant(0)\n"
                        "  sx = f32[5] reduce(x, z), dimensions={1}, to_apply=add\n"
                        "  bs = f32[5,8] broadcast(sx), dimensions={0}\n"
                        "  bg = f32[5,8] broadcast(g), dimensions={0}\n"
                        "  c1 = f32[5,8] add(bs, bg)\n"
                        "  c2 = f32[5,8] subtract(bs, bs)\n"
                        "  s1 = f32[5] reduce(c1, z), dimensions={1}, to_apply=add\n"
                        "  s2 = f32[5] reduce(c2, z), dimensions={1}, to_apply=add\n"
                        "  p = f32[5,8] multiply(bs, bg)\n"
                        "  s3 = f32[5] reduce(p, z), dimensions={1}, to_apply=add\n"
                        "  xg = f32[5,8] multiply(x, bg)\n"
                        "  q = f32[5,8] add(xg, x)\n"
                        "  s4 = f32[5] reduce(q, z), dimensions={1}, to_apply=add\n"
                        "  ROOT t = (f32[5], f32[5], f32[5], f32[5]) tuple(s1, s2, s3, s4)\n"
                        "}\n");
  int n = m->entry->ninstrs;
  HErr err = {0};
  OptOpts o = {0};
  PassCtx pc = {&o, hlo_arena_new(), &err, NULL};
  hlo_module_renumber(m);
  cr_expect(!opt_reduce_factor(m, &pc));
  cr_expect(!err.set, "%s", err.msg);
  cr_expect_eq(m->entry->ninstrs, n, "%d instructions, %d before", m->entry->ninstrs, n);
  hlo_arena_free(pc.scratch);
  hlo_module_free(m);
}

/* kInput fusions (entry of m) whose hero reduces an operand with dims {32,224,224,c}. */
static int rf_big_reductions(const HModule *m, int64_t c) {
  int n = 0;
  for (int i = 0; i < m->entry->ninstrs; i++) {
    const HInstr *f = m->entry->instrs[i];
    if (f->op != OP_FUSION || f->fusion_kind != FK_INPUT) continue;
    bool big = false;
    const HComp *fc = f->calls[0];
    for (int k = 0; k < fc->ninstrs && !big; k++) {
      if (fc->instrs[k]->op != OP_REDUCE) continue;
      const Shape *s = &fc->instrs[k]->ops[0]->shape;
      big = s->rank == 4 && s->dims[0] == 32 && s->dims[1] == 224 && s->dims[2] == 224 &&
            s->dims[3] == c;
    }
    n += big;
  }
  return n;
}

/* simple_cnn_train_step at benchmark size through the whole pipeline, without and with the
 * pass: the batch-norm backward sums of each layer (sum(x), sum((x - mean)^2), then sums
 * chained through their factors) collapse to one multi-output pass after the forward ones.
 * Measured: reductions over the conv-2 output [32,224,224,128] 6 -> 4 (sum, sum of squares,
 * global mean pool, the backward sums), over the conv-1 output [32,224,224,64] 5 -> 3. The
 * fixture-size module still matches XLA after the pipeline (opt_corpus checks every
 * fixture; here the pass is seen to fire on it too). */
Test(opt_reduce_factor, simple_cnn_train_step_takes_fewer_passes, .timeout = 120) {
  int big[2][2];
  for (int on = 0; on < 2; on++) {
    HErr err = {0};
    HModule *m = proto_load_file(HLOC_CORPUS_DIR "/bench/simple_cnn_train_step/module.pb", &err);
    cr_assert(m, "%s", err.msg);
    OptOpts o = {.ndisabled = on ? 0 : 1, .disabled = {"reduce-factor"}};
    cr_assert(opt_optimize(m, &o, &err), "%s", err.msg);
    big[on][0] = rf_big_reductions(m, 128);
    big[on][1] = rf_big_reductions(m, 64);
    hlo_module_free(m);
  }
  cr_expect_eq(big[0][0], 6, "conv-2 output: %d kInput passes without the pass", big[0][0]);
  cr_expect_eq(big[1][0], 4, "conv-2 output: %d kInput passes with it", big[1][0]);
  cr_expect_eq(big[0][1], 5, "conv-1 output: %d kInput passes without the pass", big[0][1]);
  cr_expect_eq(big[1][1], 3, "conv-1 output: %d kInput passes with it", big[1][1]);

  /* the fixture: fewer kInput fusions, still XLA's values */
  HErr err = {0};
  const char *dir = HLOC_CORPUS_DIR "/fixtures/simple_cnn_train_step";
  int kinput[2];
  for (int on = 0; on < 2; on++) {
    HModule *m = proto_load_file(HLOC_CORPUS_DIR "/fixtures/simple_cnn_train_step/module.pb", &err);
    cr_assert(m, "%s", err.msg);
    OptOpts o = {.verify_each = true, .ndisabled = on ? 0 : 1, .disabled = {"reduce-factor"}};
    cr_assert(opt_optimize(m, &o, &err), "%s", err.msg);
    OptStats st;
    opt_stats(m, &st);
    kinput[on] = st.by_kind[FK_INPUT];
    if (on) {
      HArena *a = hlo_arena_new();
      hlo_comp_renumber(m->entry);
      int np = m->entry->nparams;
      Literal **args = tu_read_args(a, dir, np);
      Literal *r = hlo_interp_run(m, a, args, np, &err);
      cr_assert(r, "%s", err.msg);
      cr_assert(hlo_shape_is_tuple(&r->shape));
      for (int k = 0; k < r->shape.ntuple; k++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/out%d.npy", dir, k);
        Literal *want = hlo_npy_read(a, path, &err);
        cr_assert(want, "%s", err.msg);
        HCompare cmp;
        cr_assert(hlo_literal_compare(r->elems[k], want, 1e-3, 1e-5, &cmp, &err), "%s", err.msg);
        cr_expect(cmp.bad == 0, "out%d: %lld bad, worst got %g want %g", k, (long long)cmp.bad,
                  cmp.worst_got, cmp.worst_want);
      }
      hlo_arena_free(a);
    }
    hlo_module_free(m);
  }
  cr_expect_lt(kinput[1], kinput[0], "fixture: %d kInput fusions with the pass, %d without",
               kinput[1], kinput[0]);
}

/* ------------------------------------------------------------------ while-unroll */

/* A counted loop of n-element trips (h = tanh(h / 2 + x[i]), 8 trips) as text. */
static char *counted_loop(int n) {
  static char buf[2048];
  snprintf(buf, sizeof buf,
           "HloModule t\n"
           "body {\n  s = (s32[], f32[%d], f32[8,%d]) parameter(0)\n"
           "  i = s32[] get-tuple-element(s), index=0\n"
           "  h = f32[%d] get-tuple-element(s), index=1\n"
           "  xs = f32[8,%d] get-tuple-element(s), index=2\n"
           "  z = s32[] constant(0)\n"
           "  xd = f32[1,%d] dynamic-slice(xs, i, z), dynamic_slice_sizes={1,%d}\n"
           "  x = f32[%d] reshape(xd)\n"
           "  hf = f32[] constant(0.5)\n  hb = f32[%d] broadcast(hf), dimensions={}\n"
           "  m = f32[%d] multiply(h, hb)\n  a = f32[%d] add(m, x)\n  t = f32[%d] tanh(a)\n"
           "  one = s32[] constant(1)\n  i2 = s32[] add(i, one)\n"
           "  ROOT r = (s32[], f32[%d], f32[8,%d]) tuple(i2, t, xs)\n}\n"
           "cond {\n  s = (s32[], f32[%d], f32[8,%d]) parameter(0)\n"
           "  i = s32[] get-tuple-element(s), index=0\n  n = s32[] constant(8)\n"
           "  ROOT lt = pred[] compare(i, n), direction=LT\n}\n"
           "ENTRY e {\n  xs = f32[8,%d] parameter(0)\n  h0 = f32[%d] parameter(1)\n"
           "  z = s32[] constant(0)\n"
           "  init = (s32[], f32[%d], f32[8,%d]) tuple(z, h0, xs)\n"
           "  w = (s32[], f32[%d], f32[8,%d]) while(init), condition=cond, body=body\n"
           "  ROOT hf = f32[%d] get-tuple-element(w), index=1\n}\n",
           n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, n);
  return buf;
}

static int count_whiles(const HModule *m) {
  int n = 0;
  for (int i = 0; i < m->entry->ninstrs; i++)
    n += m->entry->instrs[i]->op == OP_WHILE;
  return n;
}

/* A loop whose trips compute much stays a loop, unless its body is elementwise work and the
 * target asks for such loops unrolled (OptOpts.unroll_fusible_loops: CUDA, where the trips then
 * fuse); a loop of tiny trips is unrolled either way; a body with a product stays a loop on
 * both; the values are the loop's. */
Test(opt_while_unroll, loops_with_work_stay_loops) {
  for (int big = 0; big < 3; big++)
    for (int fus = 0; fus < 2; fus++) {
      char *text = counted_loop(big ? 256 : 4);
      if (big == 2) { /* the body's multiply by a product of h with itself (an outer product) */
        char *at = strstr(text, "  m = f32[256] multiply(h, hb)\n");
        cr_assert(at);
        static char buf[4096];
        snprintf(buf, sizeof buf,
                 "%.*s  d = f32[] dot(h, h), lhs_contracting_dims={0}, "
                 "rhs_contracting_dims={0}\n  db = f32[256] broadcast(d), dimensions={}\n"
                 "  m = f32[256] multiply(db, hb)\n%s",
                 (int)(at - text), text, at + strlen("  m = f32[256] multiply(h, hb)\n"));
        text = buf;
      }
      HModule *m = tu_parse(text);
      HArena *ar = hlo_arena_new();
      Literal *before = eval(m, ar);
      OptOpts o = {0};
      o.unroll_fusible_loops = fus;
      tu_run_opts(m, opt_while_unroll, &o);
      int want = big == 2 || (big == 1 && !fus);
      cr_expect_eq(count_whiles(m), want, "big=%d fusible=%d", big, fus);
      tu_run_opts(m, opt_inline_call, &o);
      tu_expect_same(eval(m, ar), before, 1e-6);
      hlo_arena_free(ar);
      hlo_module_free(m);
    }
}

/* ------------------------------------------------------------------ bisect (hloc verify) */

/* The test hook: after the first run of the named pass, the entry's f32 constant 0.25 becomes
 * 0.75 (a deliberately wrong rewrite). */
typedef struct Corrupt {
  const char *pass;
  bool done;
} Corrupt;

static void corrupt_after(void *ctx, const char *pass, HModule *m) {
  Corrupt *c = ctx;
  if (c->done || strcmp(pass, c->pass)) return;
  for (int i = 0; i < m->entry->ninstrs; i++) {
    HInstr *x = m->entry->instrs[i];
    if (x->op == OP_CONSTANT && x->literal && x->shape.dt == DT_F32 &&
        hlo_literal_get_f64(x->literal, 0) == 0.25) {
      hlo_literal_set_f64(x->literal, 0, 0.75);
      c->done = true;
      return;
    }
  }
}

/* Every pass of the pipeline keeps a module's values; a wrong rewrite injected after algsimp
 * (not reachable from the command line) is found at algsimp, and the pipeline stops there. */
Test(opt_bisect, finds_the_pass_that_moved_the_results) {
  static const char *text = "HloModule t\n"
                            "ENTRY e {\n"
                            "  x = f32[16] parameter(0)\n"
                            "  one = f32[] constant(1)\n"
                            "  ob = f32[16] broadcast(one), dimensions={}\n"
                            "  y = f32[16] multiply(x, ob)\n"
                            "  c = f32[] constant(0.25)\n"
                            "  cb = f32[16] broadcast(c), dimensions={}\n"
                            "  z = f32[16] add(y, cb)\n"
                            "  ROOT t = f32[16] tanh(z)\n"
                            "}\n";
  for (int inject = 0; inject < 2; inject++) {
    HModule *m = tu_parse(text);
    HArena *ar = hlo_arena_new();
    Literal *arg = hlo_literal_new(ar, &m->entry->params[0]->shape);
    for (int64_t k = 0; k < 16; k++)
      hlo_literal_set_f64(arg, k, 0.125 * (double)k - 1);
    Corrupt c = {"algsimp", false};
    OptBisect b = {.rtol = 1e-5, .atol = 1e-6, .tol16 = 3e-2};
    if (inject) b.inject = corrupt_after, b.inject_ctx = &c;
    OptOpts o = {0};
    HErr err = {0};
    int rc = opt_bisect(m, &o, &arg, 1, &b, &err);
    cr_expect_eq(rc, inject ? 1 : 0, "inject=%d: %s", inject, err.msg);
    cr_expect_gt(b.checked, 0);
    if (inject) {
      cr_expect(c.done);
      cr_expect(b.bad_pass && !strcmp(b.bad_pass, "algsimp"), "found at %s",
                b.bad_pass ? b.bad_pass : "(none)");
      cr_expect_gt(b.worst.bad, 0);
    }
    hlo_arena_free(ar);
    hlo_module_free(m);
  }
}

/* ------------------------------------------------------------------ dot-algorithm */

static const char *const da_text =
    "HloModule m\nENTRY e {\n  a = f32[64,80] parameter(0)\n  b = f32[80,64] parameter(1)\n"
    "  ROOT d = f32[64,64] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}%s\n}\n";

static HModule *da_module(const char *attr) {
  char text[512];
  snprintf(text, sizeof text, da_text, attr);
  return tu_parse(text);
}

/* x3: three bf16 products (two of them as one dot on concatenated operands) within 1e-4 of the
 * exact product; an infinite operand gives the exact product's infinity, not the NaN its low
 * part would make (the guard). */
Test(dot_algorithm, x3_splits_into_bf16_products_and_guards_infinities) {
  HModule *m = da_module(", algorithm=dot_bf16_bf16_f32_x3");
  HArena *a = hlo_arena_new();
  Literal *want = tu_eval(m, a, 0.0371, 7, 3, 101);
  cr_assert(tu_run(m, opt_dot_algorithm));
  cr_expect_eq(tu_count(m->entry, OP_DOT), 2);
  cr_expect_eq(tu_count(m->entry, OP_CONCATENATE), 2);
  for (int i = 0; i < m->entry->ninstrs; i++) {
    const HInstr *x = m->entry->instrs[i];
    if (x->op == OP_DOT) cr_expect(x->ops[0]->shape.dt == DT_BF16 && x->shape.dt == DT_F32);
  }
  tu_expect_same(tu_eval(m, a, 0.0371, 7, 3, 101), want, 1e-4);
  /* a[0][0] = inf: row 0 of the result is +-inf or NaN exactly where the exact product's is */
  hlo_comp_renumber(m->entry);
  Literal *args[2];
  for (int i = 0; i < 2; i++) {
    args[i] = hlo_literal_new(a, &m->entry->params[i]->shape);
    for (int64_t k = 0; k < hlo_shape_elems(&args[i]->shape); k++)
      hlo_literal_set_f64(args[i], k, 0.25 + 0.01 * (double)(k % 13));
  }
  hlo_literal_set_f64(args[0], 0, INFINITY);
  HErr err = {0};
  Literal *r = hlo_interp_run(m, a, args, 2, &err);
  cr_assert(r, "%s", err.msg);
  for (int64_t n = 0; n < 64; n++)
    cr_expect(isinf(hlo_literal_get_f64(r, n)), "element %lld: %g", (long long)n,
              hlo_literal_get_f64(r, n));
  hlo_arena_free(a);
  hlo_module_free(m);
}

/* --dot-algorithm applies to f32 dots that name none, whatever their operand precision, from
 * 64 rows, columns and depth; dot_f32_f32_f32 stays exact. */
Test(dot_algorithm, option_takes_large_default_precision_dots) {
  OptOpts o = {.dot_algorithm = DALG_BF16_BF16_F32};
  HModule *m = da_module("");
  cr_expect(tu_run_opts(m, opt_dot_algorithm, &o));
  cr_expect_eq(tu_count(m->entry, OP_CONVERT), 2);
  hlo_module_free(m);
  m = da_module(", operand_precision={highest,highest}");
  cr_expect(tu_run_opts(m, opt_dot_algorithm, &o));
  hlo_module_free(m);
  m = da_module(", algorithm=dot_f32_f32_f32");
  cr_expect(!tu_run_opts(m, opt_dot_algorithm, &o));
  hlo_module_free(m);
  m = tu_parse(
      "HloModule m\nENTRY e {\n  a = f32[8,80] parameter(0)\n  b = f32[80,64] parameter(1)\n"
      "  ROOT d = f32[8,64] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n");
  cr_expect(!tu_run_opts(m, opt_dot_algorithm, &o), "a product of 8 rows stays f32");
  hlo_module_free(m);
}
