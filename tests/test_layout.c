/* tests/test_layout.c: each layout pass alone on small HLO text cases with stated results.
 *
 * Every case parses a module, evaluates it with the interpreter, runs one pass (then DCE, and
 * where stated algsimp, which cancels transposes that meet), verifies, checks the expected
 * structure (printed instructions, opcode counts) and checks the interpreter gives the same
 * values before and after. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "layout.h"
#include "test_util.h"

static HInstr *lt_find(const HComp *c, HOp op) {
  for (int i = 0; i < c->ninstrs; i++)
    if (c->instrs[i]->op == op) return c->instrs[i];
  cr_assert_fail("no %s", hlo_op_name(op));
  return NULL;
}

/* want found in the printed instruction after its name (names of new instructions vary):
 * "f32[2,3]{1,0} dot(x, y), ..." from the shape on. */
static void lt_expect_attrs(const HInstr *in, const char *want) {
  char *s = tu_print_instr(in);
  const char *eq = strstr(s, " = ");
  cr_expect(strstr(eq ? eq : s, want), "expected '%s' in '%s'", want, s);
  free(s);
}

/* The entry evaluated on args made of 0.125*((5k + 3i) % 17) - 1 (every parameter i). */
static Literal *lt_eval(HModule *m, HArena *a) { return tu_eval(m, a, 0.125, 5, 3, 17); }

static void lt_same(const Literal *x, const Literal *y) { tu_expect_same(x, y, 1e-6); }

/* ------------------------------------------------------------------ layout-normalize */

Test(layout_normalize, interior_layouts_become_row_major) {
  HModule *m = tu_parse("HloModule t\n"
                        "ENTRY e {\n"
                        "  x = f32[2,3]{1,0} parameter(0)\n"
                        "  n = f32[2,3]{0,1} negate(x)\n"
                        "  k = f32[2,2]{0,1} constant({{1,2},{3,4}})\n"
                        "  ROOT a = f32[2,3]{1,0} exponential(n)\n"
                        "}\n");
  HArena *a = hlo_arena_new();
  Literal *before = lt_eval(m, a);
  cr_expect(tu_run(m, layout_normalize));
  lt_expect_attrs(lt_find(m->entry, OP_NEGATE), "f32[2,3]{1,0} negate(");
  lt_same(lt_eval(m, a), before);
  cr_expect(!tu_run(m, layout_normalize), "a normalized module is left alone");
  hlo_arena_free(a);
  hlo_module_free(m);
}

/* A module declaring column-major entry layouts (as jax.image.resize exports): by default the
 * interface becomes row-major with the same logical values, and the header's note says what
 * the module declared; with entry_layout_module each parameter takes its physical order
 * (f32[3,2] for a column-major f32[2,3]) and each result is written in its own. */
static const char *lt_layout_text =
    "HloModule t, entry_computation_layout={(f32[2,3]{0,1}, f32[3]{0})->(f32[3,2]{0,1}, "
    "f32[2,3]{1,0})}\n"
    "ENTRY e {\n"
    "  x = f32[2,3]{0,1} parameter(0)\n"
    "  b = f32[3]{0} parameter(1)\n"
    "  bb = f32[2,3] broadcast(b), dimensions={1}\n"
    "  s = f32[2,3] add(x, bb)\n"
    "  t = f32[3,2] transpose(s), dimensions={1,0}\n"
    "  n = f32[2,3] negate(x)\n"
    "  ROOT r = (f32[3,2]{0,1}, f32[2,3]{1,0}) tuple(t, n)\n"
    "}\n";

Test(layout_normalize, declared_entry_layouts_become_row_major) {
  HModule *m = tu_parse(lt_layout_text);
  HArena *a = hlo_arena_new();
  Literal *before = lt_eval(m, a);
  cr_expect(tu_run(m, layout_normalize));
  cr_expect(hlo_layout_is_default(&m->entry->params[0]->shape));
  cr_expect(hlo_layout_is_default(&m->entry_layout_result.tuple[0]));
  cr_expect_eq(m->entry->params[0]->shape.dims[0], 2);
  lt_same(lt_eval(m, a), before);
  const char *note = hlo_module_iface_find(m, "x");
  cr_expect(note && strstr(note, "f32[2,3]{0,1}") && strstr(note, "row-major"), "%s", note);
  cr_expect(!hlo_module_iface_find(m, "b"));
  cr_expect(hlo_module_iface_find(m, "result"));
  hlo_arena_free(a);
  hlo_module_free(m);
}

Test(layout_normalize, declared_entry_layouts_kept_at_the_interface) {
  HModule *m = tu_parse(lt_layout_text);
  HArena *a = hlo_arena_new();
  Literal *before = lt_eval(m, a);
  OptOpts o = {.entry_layout_module = true};
  cr_expect(tu_run_opts(m, layout_normalize, &o));
  const HComp *e = m->entry;
  cr_expect(e->params[0]->shape.dims[0] == 3 && e->params[0]->shape.dims[1] == 2);
  cr_expect(hlo_layout_is_default(&e->params[0]->shape));
  /* x's physical array is x transposed: the logical values again through the module */
  int64_t t10[2] = {1, 0};
  Literal *args[2];
  args[0] = hlo_literal_new(a, &e->params[0]->shape);
  args[1] = hlo_literal_new(a, &e->params[1]->shape);
  Shape xs = hlo_shape_array(DT_F32, 2, (int64_t[]){2, 3});
  Literal *logical = hlo_literal_new(a, &xs);
  for (int64_t k = 0; k < 6; k++) /* what lt_eval gives parameter 0 */
    hlo_literal_set_f64(logical, k, 0.125 * (double)((k * 5) % 17) - 1);
  args[0] = layout_literal_transpose(a, logical, t10);
  for (int64_t k = 0; k < 3; k++)
    hlo_literal_set_f64(args[1], k, 0.125 * (double)((k * 5 + 3) % 17) - 1);
  HErr err = {0};
  Literal *got = hlo_interp_run(m, a, args, 2, &err);
  cr_assert(got, "%s", err.msg);
  /* result 0 declared column-major f32[3,2]: physical f32[2,3], the logical one transposed */
  cr_expect(got->elems[0]->shape.dims[0] == 2 && got->elems[0]->shape.dims[1] == 3);
  lt_same(layout_literal_transpose(a, got->elems[0], t10), before->elems[0]);
  lt_same(got->elems[1], before->elems[1]);
  const char *note = hlo_module_iface_find(m, "x");
  cr_expect(note && strstr(note, "memory order"), "%s", note);
  hlo_arena_free(a);
  hlo_module_free(m);
}

/* ------------------------------------------------------------------ transpose-fold */

Test(transpose_fold, dot_operands_absorb_transposes) {
  /* lhs: transpose of [k,m] -> [m,k] contracting dim 1 becomes dim 0 of x.
     rhs: transpose of a batched [b,n,k] -> [b,k,n]: batch 0 stays 0, contracting 1 -> 2. */
  HModule *m = tu_parse(
      "HloModule t\n"
      "ENTRY e {\n"
      "  x = f32[4,3]{1,0} parameter(0)\n"
      "  y = f32[4,5]{1,0} parameter(1)\n"
      "  xt = f32[3,4]{1,0} transpose(x), dimensions={1,0}\n"
      "  d = f32[3,5]{1,0} dot(xt, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
      "  a = f32[2,6,4]{2,1,0} parameter(2)\n"
      "  b = f32[2,7,4]{2,1,0} parameter(3)\n"
      "  bt = f32[2,4,7]{2,1,0} transpose(b), dimensions={0,2,1}\n"
      "  e = f32[2,6,7]{2,1,0} dot(a, bt), lhs_batch_dims={0}, lhs_contracting_dims={2}, "
      "rhs_batch_dims={0}, rhs_contracting_dims={1}\n"
      "  ROOT t = (f32[3,5]{1,0}, f32[2,6,7]{2,1,0}) tuple(d, e)\n"
      "}\n");
  HArena *a = hlo_arena_new();
  Literal *before = lt_eval(m, a);
  cr_expect(tu_run(m, layout_transpose_fold));
  cr_expect_eq(tu_count(m->entry, OP_TRANSPOSE), 0);
  HInstr *r = m->entry->root;
  lt_expect_attrs(r->ops[0],
                  "f32[3,5]{1,0} dot(x, y), lhs_contracting_dims={0}, rhs_contracting_dims={0}");
  lt_expect_attrs(r->ops[1], "dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={2}, "
                             "rhs_batch_dims={0}, rhs_contracting_dims={2}");
  Literal *after = lt_eval(m, a);
  for (int k = 0; k < 2; k++)
    lt_same(after->elems[k], before->elems[k]);
  hlo_arena_free(a);
  hlo_module_free(m);
}

Test(transpose_fold, free_dims_reordered_stay) {
  /* transposing the two free dims of the lhs would reorder the result: kept */
  HModule *m = tu_parse("HloModule t\n"
                        "ENTRY e {\n"
                        "  x = f32[3,2,4]{2,1,0} parameter(0)\n"
                        "  y = f32[4,5]{1,0} parameter(1)\n"
                        "  xt = f32[2,3,4]{2,1,0} transpose(x), dimensions={1,0,2}\n"
                        "  ROOT d = f32[2,3,5]{2,1,0} dot(xt, y), lhs_contracting_dims={2}, "
                        "rhs_contracting_dims={0}\n"
                        "}\n");
  cr_expect(!tu_run(m, layout_transpose_fold));
  cr_expect_eq(tu_count(m->entry, OP_TRANSPOSE), 1);
  hlo_module_free(m);
}

Test(transpose_fold, convolution_input_absorbs_transpose) {
  HModule *m = tu_parse("HloModule t\n"
                        "ENTRY e {\n"
                        "  x = f32[1,5,5,2]{3,2,1,0} parameter(0)\n"
                        "  k = f32[3,2,3,3]{3,2,1,0} parameter(1)\n"
                        "  xt = f32[1,2,5,5]{3,2,1,0} transpose(x), dimensions={0,3,1,2}\n"
                        "  ROOT c = f32[1,3,5,5]{3,2,1,0} convolution(xt, k), window={size=3x3 "
                        "pad=1_1x1_1}, dim_labels=bf01_oi01->bf01\n"
                        "}\n");
  HArena *a = hlo_arena_new();
  Literal *before = lt_eval(m, a);
  cr_expect(tu_run(m, layout_transpose_fold));
  cr_expect_eq(tu_count(m->entry, OP_TRANSPOSE), 0);
  lt_expect_attrs(m->entry->root,
                  "convolution(x, k), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_oi01->bf01");
  lt_same(lt_eval(m, a), before);
  hlo_arena_free(a);
  hlo_module_free(m);
}

/* ------------------------------------------------------------------ conv-layout */

Test(conv_layout, nchw_convolution_becomes_nhwc_with_constant_hwio_weights) {
  HModule *m = tu_parse("HloModule t\n"
                        "ENTRY e {\n"
                        "  x = f32[2,2,4,4]{3,2,1,0} parameter(0)\n"
                        "  k = f32[3,2,1,2]{3,2,1,0} "
                        "constant({{{{1,2}},{{3,4}}},{{{5,6}},{{7,8}}},{{{-1,0}},{{0.5,2}}}})\n"
                        "  ROOT c = f32[2,3,4,4]{3,2,1,0} convolution(x, k), window={size=1x2 "
                        "pad=0_0x0_1}, dim_labels=bf01_oi01->bf01\n"
                        "}\n");
  HArena *a = hlo_arena_new();
  Literal *before = lt_eval(m, a);
  cr_expect(tu_run(m, layout_conv_canonical));
  HInstr *c = lt_find(m->entry, OP_CONVOLUTION);
  cr_expect(layout_conv_is_canonical(c, OPT_CONV_NHWC));
  lt_expect_attrs(c, "f32[2,4,4,3]{3,2,1,0} convolution(");
  lt_expect_attrs(c, "dim_labels=b01f_01io->b01f");
  /* the input is transposed NCHW->NHWC, the constant kernel became an HWIO constant, the
     result is transposed back for the NCHW user */
  cr_expect_eq(c->ops[0]->op, OP_TRANSPOSE);
  lt_expect_attrs(c->ops[0], "f32[2,4,4,2]{3,2,1,0} transpose(x), dimensions={0,2,3,1}");
  cr_expect_eq(c->ops[1]->op, OP_CONSTANT);
  lt_expect_attrs(c->ops[1], "f32[1,2,2,3]{3,2,1,0} constant(");
  cr_expect_eq(m->entry->root->op, OP_TRANSPOSE);
  lt_expect_attrs(m->entry->root, "dimensions={0,3,1,2}");
  lt_same(lt_eval(m, a), before);
  cr_expect(!tu_run(m, layout_conv_canonical), "canonical convolutions are left alone");
  hlo_arena_free(a);
  hlo_module_free(m);
}

Test(conv_layout, nchw_form_for_targets_that_ask) {
  /* an NHWC/HWIO convolution becomes bf01_oi01->bf01 when the target wants NCHW; the parameter
     kernel gets a transpose, the result is transposed back for the NHWC user */
  HModule *m =
      tu_parse("HloModule t\n"
               "ENTRY e {\n"
               "  x = f32[2,5,4,3]{3,2,1,0} parameter(0)\n"
               "  k = f32[3,2,3,4]{3,2,1,0} parameter(1)\n"
               "  ROOT c = f32[2,5,3,4]{3,2,1,0} convolution(x, k), window={size=3x2 pad=1_1x0_0}, "
               "dim_labels=b01f_01io->b01f\n"
               "}\n");
  HArena *a = hlo_arena_new();
  Literal *before = lt_eval(m, a);
  OptOpts o = {0};
  o.conv_layout = OPT_CONV_NCHW;
  cr_expect(tu_run_opts(m, layout_conv_canonical, &o));
  HInstr *c = lt_find(m->entry, OP_CONVOLUTION);
  cr_expect(layout_conv_is_canonical(c, OPT_CONV_NCHW));
  cr_expect(!layout_conv_is_canonical(c, OPT_CONV_NHWC));
  lt_expect_attrs(c, "f32[2,4,5,3]{3,2,1,0} convolution(");
  lt_expect_attrs(c, "dim_labels=bf01_oi01->bf01");
  lt_expect_attrs(c->ops[0], "transpose(x), dimensions={0,3,1,2}");
  lt_expect_attrs(c->ops[1], "f32[4,3,3,2]{3,2,1,0} transpose(k), dimensions={3,2,0,1}");
  cr_expect_eq(m->entry->root->op, OP_TRANSPOSE);
  lt_same(lt_eval(m, a), before);
  cr_expect(!tu_run_opts(m, layout_conv_canonical, &o), "canonical convolutions are left alone");
  hlo_arena_free(a);
  hlo_module_free(m);
}

Test(conv_layout, grouped_and_1d_convolutions) {
  HModule *m = tu_parse("HloModule t\n"
                        "ENTRY e {\n"
                        "  x = f32[2,4,6]{2,1,0} parameter(0)\n"
                        "  k = f32[4,2,3]{2,1,0} parameter(1)\n"
                        "  ROOT c = f32[2,4,6]{2,1,0} convolution(x, k), window={size=3 pad=1_1}, "
                        "dim_labels=bf0_oi0->bf0, feature_group_count=2\n"
                        "}\n");
  HArena *a = hlo_arena_new();
  Literal *before = lt_eval(m, a);
  cr_expect(tu_run(m, layout_conv_canonical));
  HInstr *c = lt_find(m->entry, OP_CONVOLUTION);
  lt_expect_attrs(c, "dim_labels=b0f_0io->b0f");
  cr_expect_eq(c->feature_groups, 2);
  lt_same(lt_eval(m, a), before);
  hlo_arena_free(a);
  hlo_module_free(m);
}

/* ------------------------------------------------------------------ transpose-sink */

Test(transpose_sink, elementwise_chain_between_convolutions_stays_nhwc) {
  /* conv-layout's output of one conv: transpose back to NCHW, bias add (a broadcast along
     the channel), relu, then the next conv's NCHW->NHWC transpose. Sinking carries the first
     transpose down to the second, where they cancel. */
  HModule *m = tu_parse("HloModule t\n"
                        "ENTRY e {\n"
                        "  y = f32[2,4,4,3]{3,2,1,0} parameter(0)\n"
                        "  b = f32[3]{0} parameter(1)\n"
                        "  yt = f32[2,3,4,4]{3,2,1,0} transpose(y), dimensions={0,3,1,2}\n"
                        "  bb = f32[2,3,4,4]{3,2,1,0} broadcast(b), dimensions={1}\n"
                        "  s = f32[2,3,4,4]{3,2,1,0} add(yt, bb)\n"
                        "  z = f32[] constant(0)\n"
                        "  zb = f32[2,3,4,4]{3,2,1,0} broadcast(z), dimensions={}\n"
                        "  r = f32[2,3,4,4]{3,2,1,0} maximum(s, zb)\n"
                        "  ROOT rt = f32[2,4,4,3]{3,2,1,0} transpose(r), dimensions={0,2,3,1}\n"
                        "}\n");
  HArena *a = hlo_arena_new();
  Literal *before = lt_eval(m, a);
  cr_expect(tu_run(m, layout_transpose_sink));
  tu_run(m, opt_algsimp);
  cr_expect_eq(tu_count(m->entry, OP_TRANSPOSE), 0);
  HInstr *r = m->entry->root;
  lt_expect_attrs(r, "f32[2,4,4,3]{3,2,1,0} maximum(");
  HInstr *s = r->ops[0]->op == OP_ADD ? r->ops[0] : r->ops[1];
  cr_assert_eq(s->op, OP_ADD);
  HInstr *bb = s->ops[0]->op == OP_BROADCAST ? s->ops[0] : s->ops[1];
  lt_expect_attrs(bb, "f32[2,4,4,3]{3,2,1,0} broadcast(b), dimensions={3}");
  lt_same(lt_eval(m, a), before);
  hlo_arena_free(a);
  hlo_module_free(m);
}

Test(transpose_sink, reduce_over_nchw_dims_reads_nhwc) {
  /* global mean pool: reduce over H, W of the NCHW view becomes a reduce over dims 1, 2 of
     the NHWC value; the kept dims (N, C) keep their order, so no transpose remains */
  HModule *m = tu_parse("HloModule t\n"
                        "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
                        "  ROOT s = f32[] add(a, b)\n}\n"
                        "ENTRY e {\n"
                        "  y = f32[2,4,5,3]{3,2,1,0} parameter(0)\n"
                        "  yt = f32[2,3,4,5]{3,2,1,0} transpose(y), dimensions={0,3,1,2}\n"
                        "  z = f32[] constant(0)\n"
                        "  ROOT r = f32[2,3]{1,0} reduce(yt, z), dimensions={2,3}, to_apply=add\n"
                        "}\n");
  HArena *a = hlo_arena_new();
  Literal *before = lt_eval(m, a);
  cr_expect(tu_run(m, layout_transpose_sink));
  cr_expect_eq(tu_count(m->entry, OP_TRANSPOSE), 0);
  lt_expect_attrs(m->entry->root, "f32[2,3]{1,0} reduce(y, z), dimensions={1,2}");
  lt_same(lt_eval(m, a), before);
  hlo_arena_free(a);
  hlo_module_free(m);
}

Test(transpose_sink, reduce_with_reordered_kept_dims_transposes_the_small_result) {
  HModule *m = tu_parse("HloModule t\n"
                        "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
                        "  ROOT s = f32[] add(a, b)\n}\n"
                        "ENTRY e {\n"
                        "  y = f32[2,4,5,3]{3,2,1,0} parameter(0)\n"
                        "  yt = f32[3,4,2,5]{3,2,1,0} transpose(y), dimensions={3,1,0,2}\n"
                        "  z = f32[] constant(0)\n"
                        "  ROOT r = f32[3,2]{1,0} reduce(yt, z), dimensions={1,3}, to_apply=add\n"
                        "}\n");
  HArena *a = hlo_arena_new();
  Literal *before = lt_eval(m, a);
  cr_expect(tu_run(m, layout_transpose_sink));
  HInstr *r = m->entry->root;
  lt_expect_attrs(r, "f32[3,2]{1,0} transpose(");
  lt_expect_attrs(r->ops[0], "f32[2,3]{1,0} reduce(y, z), dimensions={1,2}");
  lt_same(lt_eval(m, a), before);
  hlo_arena_free(a);
  hlo_module_free(m);
}

Test(transpose_sink, pooling_pad_and_mixed_operands) {
  /* reduce-window and pad are carried through; an add whose other operand is a plain
     parameter (not a transpose, broadcast or constant) stops the transpose */
  HModule *m = tu_parse("HloModule t\n"
                        "mx {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
                        "  ROOT v = f32[] maximum(a, b)\n}\n"
                        "ENTRY e {\n"
                        "  y = f32[1,6,6,2]{3,2,1,0} parameter(0)\n"
                        "  q = f32[1,2,4,4]{3,2,1,0} parameter(1)\n"
                        "  yt = f32[1,2,6,6]{3,2,1,0} transpose(y), dimensions={0,3,1,2}\n"
                        "  n = f32[] constant(-inf)\n"
                        "  p = f32[1,2,8,8]{3,2,1,0} pad(yt, n), padding=0_0x0_0x1_1x1_1\n"
                        "  w = f32[1,2,4,4]{3,2,1,0} reduce-window(p, n), window={size=1x1x3x3 "
                        "stride=1x1x2x2 pad=0_0x0_0x1_0x1_0}, to_apply=mx\n"
                        "  ROOT s = f32[1,2,4,4]{3,2,1,0} add(w, q)\n"
                        "}\n");
  HArena *a = hlo_arena_new();
  Literal *before = lt_eval(m, a);
  cr_expect(tu_run(m, layout_transpose_sink));
  cr_expect_eq(tu_count(m->entry, OP_TRANSPOSE), 1);
  HInstr *r = m->entry->root;
  cr_assert_eq(r->op, OP_ADD);
  cr_assert_eq(r->ops[0]->op, OP_TRANSPOSE);
  lt_expect_attrs(r->ops[0]->ops[0], "f32[1,4,4,2]{3,2,1,0} reduce-window(");
  lt_expect_attrs(r->ops[0]->ops[0], "window={size=1x3x3x1 stride=1x2x2x1 pad=0_0x1_0x1_0x0_0}");
  lt_expect_attrs(r->ops[0]->ops[0]->ops[0],
                  "f32[1,8,8,2]{3,2,1,0} pad(y, n), padding=0_0x1_1x1_1x0_0");
  lt_same(lt_eval(m, a), before);
  hlo_arena_free(a);
  hlo_module_free(m);
}

/* ------------------------------------------------------------------ the layout stage */

Test(layout_pipeline, conv_bn_relu_conv_chain_has_no_transpose_between_convolutions) {
  HModule *m = tu_parse("HloModule t\n"
                        "ENTRY e {\n"
                        "  x = f32[1,2,6,6]{3,2,1,0} parameter(0)\n"
                        "  k1 = f32[4,2,3,3]{3,2,1,0} parameter(1)\n"
                        "  s1 = f32[4]{0} parameter(2)\n"
                        "  k2 = f32[3,4,3,3]{3,2,1,0} parameter(3)\n"
                        "  c1 = f32[1,4,6,6]{3,2,1,0} convolution(x, k1), window={size=3x3 "
                        "pad=1_1x1_1}, dim_labels=bf01_oi01->bf01\n"
                        "  sb = f32[1,4,6,6]{3,2,1,0} broadcast(s1), dimensions={1}\n"
                        "  m1 = f32[1,4,6,6]{3,2,1,0} multiply(c1, sb)\n"
                        "  z = f32[] constant(0)\n"
                        "  zb = f32[1,4,6,6]{3,2,1,0} broadcast(z), dimensions={}\n"
                        "  r1 = f32[1,4,6,6]{3,2,1,0} maximum(m1, zb)\n"
                        "  ROOT c2 = f32[1,3,6,6]{3,2,1,0} convolution(r1, k2), window={size=3x3 "
                        "pad=1_1x1_1}, dim_labels=bf01_oi01->bf01\n"
                        "}\n");
  HArena *a = hlo_arena_new();
  Literal *before = lt_eval(m, a);
  tu_run(m, layout_conv_canonical);
  for (int round = 0; round < 4; round++) {
    tu_run(m, layout_transpose_sink);
    tu_run(m, opt_algsimp);
  }
  /* left: the entry input and both kernels transposed in, the result transposed out */
  cr_expect_eq(tu_count(m->entry, OP_TRANSPOSE), 4);
  HInstr *c2 = m->entry->root->ops[0];
  cr_assert_eq(c2->op, OP_CONVOLUTION);
  cr_expect_eq(c2->ops[0]->op, OP_MAXIMUM, "conv2 reads the NHWC relu directly, got %s",
               hlo_op_name(c2->ops[0]->op));
  lt_same(lt_eval(m, a), before);
  hlo_arena_free(a);
  hlo_module_free(m);
}
