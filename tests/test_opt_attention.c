/* tests/test_opt_attention.c: the attention pass on the corpus and on hand-written variants.
 *
 * The corpus fixtures with attention (a BERT layer, BERT, the bf16 Llama prefill and decode),
 * optimized with the pass on (as a target with a fused kernel asks), get one kCustom fusion per
 * attention, still evaluate to XLA's outputs, and the decision log says what matched; with the
 * pass's row limit below the fixture's query rows nothing is fused and the log says why. Small
 * modules check the forms the matcher must refuse. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "optimizer.h"
#include "proto.h"
#include "test_util.h"

static int count_attention(const HModule *m) {
  int n = 0;
  for (int i = 0; i < m->entry->ninstrs; i++) {
    const HInstr *in = m->entry->instrs[i];
    if (in->op != OP_FUSION || in->fusion_kind != FK_CUSTOM) continue;
    OptAttn a;
    const char *why;
    cr_expect(opt_attention_match(in->calls[0]->root, &a, &why), "%s: %s", in->name, why);
    n++;
  }
  return n;
}

/* Every result of fixture `model` within tol of the largest magnitude of XLA's. */
static void expect_outputs(const char *model, const Literal *r, double tol) {
  HErr err = {0};
  HArena *a = hlo_arena_new();
  int nout = hlo_shape_is_tuple(&r->shape) ? r->shape.ntuple : 1;
  for (int k = 0; k < nout; k++) {
    char path[1024];
    snprintf(path, sizeof path, "%s/fixtures/%s/out%d.npy", HLOC_CORPUS_DIR, model, k);
    Literal *want = hlo_npy_read(a, path, &err);
    cr_assert(want, "%s", err.msg);
    const Literal *got = hlo_shape_is_tuple(&r->shape) ? r->elems[k] : r;
    hlo_literal_bits_as(want, got->shape.dt);
    double big = hlo_literal_max_abs(want);
    HCompare cmp;
    cr_assert(hlo_literal_compare(got, want, 0, tol * big, &cmp, &err), "%s", err.msg);
    cr_expect(cmp.bad == 0, "%s out%d: %lld bad, worst [%lld] got %g want %g", model, k,
              (long long)cmp.bad, (long long)cmp.worst, cmp.worst_got, cmp.worst_want);
  }
  hlo_arena_free(a);
}

/* The fixture optimized with options o (attention fusions as they allow); returns how many were
 * built, *log the decision log (malloc'd), *mp the optimized module when mp is not NULL. */
static int run_fixture_with(const char *model, OptOpts o, double tol, char **log, HModule **mp) {
  HErr err = {0};
  char path[1024], dir[] = "/tmp/hloc_att_XXXXXX";
  cr_assert(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/fixtures/%s/module.pb", HLOC_CORPUS_DIR, model);
  HModule *m = proto_load_file(path, &err);
  cr_assert(m, "%s", err.msg);
  hlo_comp_renumber(m->entry);
  HArena *a = hlo_arena_new();
  snprintf(path, sizeof path, "%s/fixtures/%s", HLOC_CORPUS_DIR, model);
  int np = m->entry->nparams;
  Literal **args = tu_read_args(a, path, np);
  for (int i = 0; i < np; i++)
    hlo_literal_bits_as(args[i], m->entry->params[i]->shape.dt);
  o.verify_each = true;
  o.dump_dir = dir;
  cr_assert(opt_optimize(m, &o, &err), "%s: %s", model, err.msg);
  int n = count_attention(m);
  Literal *r = hlo_interp_run(m, a, args, np, &err);
  cr_assert(r, "%s: %s", model, err.msg);
  expect_outputs(model, r, tol);
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "%s/module_%s.fusion-decisions.txt", dir, m->name);
  size_t len;
  cr_assert(hlo_read_file(cmd, log, &len, &err), "%s", err.msg);
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  cr_assert_eq(system(cmd), 0);
  hlo_arena_free(a);
  if (mp)
    *mp = m;
  else
    hlo_module_free(m);
  return n;
}

/* With attention fusions for up to `rows` query rows (any operand type). */
static int run_fixture(const char *model, int64_t rows, double tol, char **log) {
  OptOpts o = {.attention_rows = rows, .attention_head = 256};
  return run_fixture_with(model, o, tol, log, NULL);
}

Test(opt_attention, corpus_attention_fused_and_still_xla, .timeout = 300) {
  static const struct {
    const char *model;
    int n;
    double tol;
  } cases[] = {{"llama_decode_bf16", 1, 3e-2},
               {"llama_layer_bf16", 1, 3e-2},
               {"transformer_layer", 1, 1e-5},
               {"bert_base", 2, 1e-5}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char *log;
    int n = run_fixture(cases[i].model, 1 << 20, cases[i].tol, &log);
    cr_expect_eq(n, cases[i].n, "%s: %d attention fusions\n%s", cases[i].model, n, log);
    cr_expect(strstr(log, "== attention") && strstr(log, "fused into attention"), "%s:\n%s",
              cases[i].model, log);
    free(log);
  }
}

Test(opt_attention, row_limit_leaves_it_unfused_and_says_why, .timeout = 300) {
  char *log;
  int n = run_fixture("transformer_layer", 2, 1e-5, &log);
  cr_expect_eq(n, 0);
  cr_expect(strstr(log, "query rows per batch item, the target's kernel takes up to 2"), "%s", log);
  free(log);
}

/* Fewer query rows than the target's attention_min_rows: left to its other kernels, said so. */
Test(opt_attention, min_rows_leaves_it_unfused_and_says_why, .timeout = 300) {
  char *log;
  OptOpts o = {.attention_rows = INT64_MAX, .attention_head = 256, .attention_min_rows = 1000};
  int n = run_fixture_with("transformer_layer", o, 1e-5, &log, NULL);
  cr_expect_eq(n, 0);
  cr_expect(strstr(log, "query rows per batch item, the target fuses from 1000"), "%s", log);
  free(log);
}

/* A target with a 16-bit kernel for any query rows (tensor cores) gets the bf16 prefill fused
 * although its rows exceed attention_rows, with the producers of Q, K and V (RoPE's slices and
 * concatenation, the grouped-query broadcast) and the causal mask (iota compares) inside: the
 * fusion reads the projections' products and the rotation tables only. */
Test(opt_attention, sixteen_bit_attention_takes_its_producers, .timeout = 300) {
  char *log;
  HModule *m;
  OptOpts o = {.attention_rows = 2,
               .attention_head = 256,
               .attention_rows_16 = 1 << 20,
               .attention_head_16 = 128};
  int n = run_fixture_with("llama_layer_bf16", o, 3e-2, &log, &m);
  cr_expect_eq(n, 1, "%s", log);
  for (int i = 0; i < m->entry->ninstrs; i++) {
    const HInstr *in = m->entry->instrs[i];
    if (in->op != OP_FUSION || in->fusion_kind != FK_CUSTOM) continue;
    bool concat = false;
    const HComp *b = in->calls[0];
    for (int j = 0; j < b->ninstrs; j++)
      concat |= b->instrs[j]->op == OP_CONCATENATE;
    cr_expect(concat, "RoPE's concatenation is inside %s", in->name);
    for (int j = 0; j < in->nops; j++) {
      const HInstr *x = in->ops[j];
      cr_expect(x->op == OP_DOT || x->op == OP_FUSION || x->op == OP_CONSTANT ||
                    x->op == OP_PARAMETER,
                "%s reads %s (%s)", in->name, x->name, hlo_op_name(x->op));
      cr_expect(x->shape.dt != DT_PRED, "the mask is computed inside, not read: %s", x->name);
    }
  }
  /* without the 16-bit kernel the row limit leaves it unfused */
  free(log);
  hlo_module_free(m);
  o.attention_rows_16 = 0;
  cr_expect_eq(run_fixture_with("llama_layer_bf16", o, 3e-2, &log, NULL), 0, "%s", log);
  free(log);
}

/* A small attention in text: softmax over k of (q.k / 8, masked by k <= q), times v. */
static const char *att_text(const char *extra_use) {
  static char buf[4096];
  snprintf(
      buf, sizeof buf,
      "HloModule t\n"
      "mx {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT m = f32[] maximum(a, "
      "b)\n}\n"
      "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n"
      "ENTRY e {\n"
      "  q = f32[2,3,4,8] parameter(0)\n"
      "  k = f32[2,5,4,8] parameter(1)\n"
      "  v = f32[2,5,4,8] parameter(2)\n"
      "  s = f32[2,4,3,5] dot(q, k), lhs_batch_dims={0,2}, lhs_contracting_dims={3}, "
      "rhs_batch_dims={0,2}, rhs_contracting_dims={3}\n"
      "  c8 = f32[] constant(8)\n"
      "  b8 = f32[2,4,3,5] broadcast(c8), dimensions={}\n"
      "  sc = f32[2,4,3,5] divide(s, b8)\n"
      "  iq = s32[2,4,3,5] iota(), iota_dimension=2\n"
      "  ik = s32[2,4,3,5] iota(), iota_dimension=3\n"
      "  ok = pred[2,4,3,5] compare(ik, iq), direction=LE\n"
      "  ninf = f32[] constant(-1e30)\n"
      "  bn = f32[2,4,3,5] broadcast(ninf), dimensions={}\n"
      "  e = f32[2,4,3,5] select(ok, sc, bn)\n"
      "  minf = f32[] constant(-inf)\n"
      "  m = f32[2,4,3] reduce(e, minf), dimensions={3}, to_apply=mx\n"
      "  mb = f32[2,4,3,5] broadcast(m), dimensions={0,1,2}\n"
      "  d = f32[2,4,3,5] subtract(e, mb)\n"
      "  x = f32[2,4,3,5] exponential(d)\n"
      "  z = f32[] constant(0)\n"
      "  l = f32[2,4,3] reduce(x, z), dimensions={3}, to_apply=add\n"
      "  lb = f32[2,4,3,5] broadcast(l), dimensions={0,1,2}\n"
      "  p = f32[2,4,3,5] divide(x, lb)\n"
      "  o = f32[2,4,3,8] dot(p, v), lhs_batch_dims={0,1}, lhs_contracting_dims={3}, "
      "rhs_batch_dims={0,2}, rhs_contracting_dims={1}\n"
      "  ROOT r = %s\n"
      "}\n",
      extra_use);
  return buf;
}

static int fuse_text(const char *text) {
  HModule *m = tu_parse(text);
  HArena *ar = hlo_arena_new();
  Literal *before = tu_eval(m, ar, 0.37, 7, 3, 11);
  OptOpts o = {.attention_rows = 64, .attention_head = 256};
  tu_run_opts(m, opt_attention, &o);
  tu_expect_same(tu_eval(m, ar, 0.37, 7, 3, 11), before, 1e-5);
  int n = count_attention(m);
  hlo_arena_free(ar);
  hlo_module_free(m);
  return n;
}

Test(opt_attention, masked_scaled_attention_in_text) {
  cr_expect_eq(fuse_text(att_text("f32[2,4,3,8] copy(o)")), 1);
  /* the probabilities returned as well: they must be kept, nothing fused */
  cr_expect_eq(fuse_text(att_text("(f32[2,4,3,8], f32[2,4,3,5]) tuple(o, p)")), 0);
  /* the scores returned as well */
  cr_expect_eq(fuse_text(att_text("(f32[2,4,3,8], f32[2,4,3,5]) tuple(o, s)")), 0);
}

static const HInstr *find_named(const HModule *m, const char *name) {
  for (int i = 0; i < m->entry->ninstrs; i++)
    if (!strcmp(m->entry->instrs[i]->name, name)) return m->entry->instrs[i];
  cr_assert_fail("no instruction %s", name);
  return NULL;
}

static void replace(char *text, const char *from, const char *to) {
  char *p = strstr(text, from);
  cr_assert(p, "%s", from);
  size_t nf = strlen(from), nt = strlen(to);
  memmove(p + nt, p + nf, strlen(p + nf) + 1);
  memcpy(p, to, nt);
}

Test(opt_attention, match_gives_the_dims_and_counts) {
  HModule *m = tu_parse(att_text("f32[2,4,3,8] copy(o)"));
  OptAttn a;
  const char *why;
  cr_assert(opt_attention_match(find_named(m, "o"), &a, &why), "%s", why);
  cr_expect_eq(a.nbatch, 8);
  cr_expect_eq(a.nq, 3);
  cr_expect_eq(a.nk, 5);
  cr_expect_eq(a.dh, 8);
  cr_expect_eq(a.dv, 8);
  cr_expect_eq(a.qop, 0);
  cr_expect_eq(a.vop, 1);
  cr_expect_eq(a.nchain, 2); /* the divide and the select */
  /* S [2,4,3,5]: batch dims 0 and 1, query dim 2, key dim 3 */
  cr_expect(a.nbd == 2 && a.bdim[0] == 0 && a.bdim[1] == 1 && a.bext[0] == 2 && a.bext[1] == 4);
  cr_expect(a.nqd == 1 && a.qdim[0] == 2 && a.qext[0] == 3);
  cr_expect(a.nkd == 1 && a.kdim[0] == 3 && a.kext[0] == 5);
  /* q [2,3,4,8]: batch 0, query 2, batch 1, head; v [2,5,4,8]: batch 0, key 3, batch 1, head */
  const int8_t q[] = {0, 2, 1, -1}, v[] = {0, 3, 1, -1}, o[] = {0, 1, 2, -1};
  for (int d = 0; d < 4; d++) {
    cr_expect_eq(a.qmap[d], q[d], "q dim %d", d);
    cr_expect_eq(a.vmap[d], v[d], "v dim %d", d);
    cr_expect_eq(a.omap[d], o[d], "o dim %d", d);
  }
  hlo_module_free(m);
}

Test(opt_attention, softmax_over_the_query_dim_is_not_attention) {
  char text[4096];
  snprintf(text, sizeof text, "%s", att_text("f32[2,4,3,8] copy(o)"));
  replace(text, "m = f32[2,4,3] reduce(e, minf), dimensions={3}",
          "m = f32[2,4,5] reduce(e, minf), dimensions={2}");
  replace(text, "mb = f32[2,4,3,5] broadcast(m), dimensions={0,1,2}",
          "mb = f32[2,4,3,5] broadcast(m), dimensions={0,1,3}");
  replace(text, "l = f32[2,4,3] reduce(x, z), dimensions={3}",
          "l = f32[2,4,5] reduce(x, z), dimensions={2}");
  replace(text, "lb = f32[2,4,3,5] broadcast(l), dimensions={0,1,2}",
          "lb = f32[2,4,3,5] broadcast(l), dimensions={0,1,3}");
  HModule *m = tu_parse(text);
  OptAttn a;
  const char *why;
  cr_expect_not(opt_attention_match(find_named(m, "o"), &a, &why));
  cr_expect(a.div != NULL, "the softmax was found");
  cr_expect_str_eq(why, "the output product does not contract the key dims");
  hlo_module_free(m);
  cr_expect_eq(fuse_text(text), 0);
}
