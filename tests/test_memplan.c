/* tests/test_memplan.c: buffer assignment on small HLO text modules with known answers. */
#include <criterion/criterion.h>
#include <string.h>

#include "hlo.h"
#include "memplan.h"

typedef struct TmCase {
  HModule *m;   /* parsed module */
  HArena *a;    /* plan arena */
  MemPlan plan; /* the plan */
} TmCase;

static TmCase tm_plan(const char *text) {
  TmCase c = {0};
  HErr err = {0};
  c.m = hlo_parse_text(text, strlen(text), "<test>", &err);
  cr_assert(c.m, "%s", err.msg);
  c.a = hlo_arena_new();
  cr_assert(memplan_assign(c.m->entry, c.a, &c.plan, &err), "%s", err.msg);
  return c;
}

static void tm_free(TmCase *c) {
  hlo_arena_free(c->a);
  hlo_module_free(c->m);
}

static const MemBuf *tm_buf(TmCase *c, const char *name) {
  for (int i = 0; i < c->m->entry->ninstrs; i++)
    if (!strcmp(c->m->entry->instrs[i]->name, name)) return &c->plan.bufs[i];
  cr_assert_fail("no instruction %s", name);
  return NULL;
}

static int tm_idx(TmCase *c, const char *name) {
  for (int i = 0; i < c->m->entry->ninstrs; i++)
    if (!strcmp(c->m->entry->instrs[i]->name, name)) return i;
  return -1;
}

Test(memplan, kinds_views_and_in_place) {
  TmCase c = tm_plan("HloModule m\nENTRY e {\n"
                     "  p = f32[256] parameter(0)\n"
                     "  a = f32[256] reverse(p), dimensions={0}\n"
                     "  b = f32[256] exponential(a)\n"
                     "  r = f32[16,16] reshape(b)\n"
                     "  s = f32[16,16] sine(r)\n"
                     "  ROOT t = f32[16,16] negate(s)\n}\n");
  (void)tm_buf;
  cr_expect_eq(tm_buf(&c, "p")->kind, MEM_PARAM);
  cr_expect_eq(tm_buf(&c, "a")->kind, MEM_TEMP);
  /* b = exp(a) is a's last use: in place */
  cr_expect_eq(tm_buf(&c, "b")->kind, MEM_ALIAS);
  cr_expect_eq(tm_buf(&c, "b")->alias, tm_idx(&c, "a"));
  cr_expect(!tm_buf(&c, "b")->view);
  /* reshape is a view */
  cr_expect_eq(tm_buf(&c, "r")->kind, MEM_ALIAS);
  cr_expect(tm_buf(&c, "r")->view);
  /* s = sine(view of a's buffer), the group's last use: in place again */
  cr_expect_eq(tm_buf(&c, "s")->kind, MEM_ALIAS);
  cr_expect_eq(memplan_base(&c.plan, tm_idx(&c, "s"), NULL), tm_idx(&c, "a"));
  /* the root computes straight into results[0] */
  cr_expect_eq(tm_buf(&c, "t")->kind, MEM_RESULT);
  cr_expect_eq(c.plan.nresults, 1);
  cr_expect(!c.plan.results[0].copy);
  cr_expect_eq(c.plan.temp_bytes, 1024);
  cr_expect_eq(c.plan.peak_live, 1024);
  tm_free(&c);
}

Test(memplan, dead_buffers_are_reused_best_fit) {
  /* reverse is not elementwise, so nothing is in place: a, b, c, d are separate values */
  TmCase c = tm_plan("HloModule m\nENTRY e {\n"
                     "  p = f32[256] parameter(0)\n"
                     "  a = f32[256] reverse(p), dimensions={0}\n"
                     "  b = f32[256] reverse(a), dimensions={0}\n"
                     "  s = f32[16] slice(b), slice={[0:16]}\n"
                     "  q = f32[16] reverse(s), dimensions={0}\n"
                     "  c = f32[256] reverse(b), dimensions={0}\n"
                     "  d = f32[256] reverse(c), dimensions={0}\n"
                     "  ROOT t = (f32[256], f32[16]) tuple(d, q)\n}\n");
  const MemBuf *a = tm_buf(&c, "a"), *b = tm_buf(&c, "b"), *cc = tm_buf(&c, "c");
  const MemBuf *s = tm_buf(&c, "s");
  cr_expect_eq(a->kind, MEM_TEMP);
  cr_expect_eq(b->kind, MEM_TEMP);
  cr_expect_eq(cc->kind, MEM_TEMP);
  cr_expect_neq(a->offset, b->offset);
  /* a is dead once b exists: c takes a's slot */
  cr_expect_eq(cc->offset, a->offset);
  /* the small slice goes into a gap: a's slot is free after b */
  cr_expect_eq(s->offset, a->offset);
  cr_expect_eq(tm_buf(&c, "d")->kind, MEM_RESULT);
  cr_expect_eq(tm_buf(&c, "q")->kind, MEM_RESULT);
  cr_expect_eq(tm_buf(&c, "q")->result, 1);
  cr_expect_eq(c.plan.temp_bytes, 2048);
  cr_expect_eq(c.plan.peak_live, 2048);
  tm_free(&c);
}

Test(memplan, result_leaves_that_need_copies) {
  TmCase c = tm_plan("HloModule m\nENTRY e {\n"
                     "  p = f32[8] parameter(0)\n"
                     "  k = f32[2] constant({1, 2})\n"
                     "  x = f32[8] exponential(p)\n"
                     "  ROOT t = (f32[8], f32[2], f32[8], f32[8]) tuple(p, k, x, x)\n}\n");
  cr_assert_eq(c.plan.nresults, 4);
  cr_expect(c.plan.results[0].copy);
  cr_expect(c.plan.results[1].copy);
  cr_expect(!c.plan.results[2].copy);
  cr_expect(c.plan.results[3].copy); /* second use of x is copied from results[2] */
  cr_expect_eq(tm_buf(&c, "x")->kind, MEM_RESULT);
  cr_expect_eq(tm_buf(&c, "x")->result, 2);
  cr_expect_eq(c.plan.temp_bytes, 0);
  tm_free(&c);
}

Test(memplan, no_in_place_when_operand_still_live_or_read_elsewhere) {
  TmCase c = tm_plan("HloModule m\nENTRY e {\n"
                     "  p = f32[4,4] parameter(0)\n"
                     "  a = f32[4,4] transpose(p), dimensions={1,0}\n"
                     "  b = f32[4,4] exponential(a)\n"
                     "  at = f32[4,4] transpose(a), dimensions={1,0}\n"
                     "  c = f32[4,4] add(b, at)\n"
                     "  ct = f32[4,4] transpose(c), dimensions={1,0}\n"
                     "  ROOT d = f32[4,4] add(c, ct)\n}\n");
  /* a is used again by at: b cannot take its buffer */
  cr_expect_eq(tm_buf(&c, "b")->kind, MEM_TEMP);
  /* c = add(b, at): b's last use, in place */
  cr_expect_eq(tm_buf(&c, "c")->kind, MEM_ALIAS);
  cr_expect_eq(tm_buf(&c, "d")->kind, MEM_RESULT);
  tm_free(&c);
}

Test(memplan, tuple_block_and_get_tuple_element) {
  TmCase c = tm_plan("HloModule m\n"
                     "mx {\n  a = f32[] parameter(0)\n  ai = s32[] parameter(1)\n"
                     "  b = f32[] parameter(2)\n  bi = s32[] parameter(3)\n"
                     "  g = pred[] compare(a, b), direction=GE\n"
                     "  v = f32[] select(g, a, b)\n  i = s32[] select(g, ai, bi)\n"
                     "  ROOT t = (f32[], s32[]) tuple(v, i)\n}\n"
                     "ENTRY e {\n"
                     "  x = f32[4,5] parameter(0)\n"
                     "  io = s32[4,5] iota(), iota_dimension=1\n"
                     "  n = f32[] constant(-inf)\n  z = s32[] constant(0)\n"
                     "  r = (f32[4], s32[4]) reduce(x, io, n, z), dimensions={1}, to_apply=mx\n"
                     "  ROOT gi = s32[4] get-tuple-element(r), index=1\n}\n");
  const MemBuf *r = tm_buf(&c, "r"), *gi = tm_buf(&c, "gi");
  cr_expect_eq(r->kind, MEM_TEMP);
  cr_expect_eq(r->size, 128); /* two leaves, each padded to 64 bytes */
  cr_expect_eq(gi->kind, MEM_ALIAS);
  cr_expect_eq(gi->offset, 64);
  cr_assert_eq(c.plan.nresults, 1);
  cr_expect(c.plan.results[0].copy);
  cr_expect_eq(c.plan.results[0].size, 16);
  tm_free(&c);
}

Test(memplan, output_fusion_is_never_in_place) {
  TmCase c =
      tm_plan("HloModule m\n"
              "f {\n  a = f32[4,4] parameter(0)\n  b = f32[4,4] parameter(1)\n"
              "  d = f32[4,4] dot(a, a), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
              "  ROOT s = f32[4,4] add(d, b)\n}\n"
              "g {\n  a = f32[4,4] parameter(0)\n  b = f32[4,4] parameter(1)\n"
              "  ROOT s = f32[4,4] multiply(a, b)\n}\n"
              "ENTRY e {\n  p = f32[4,4] parameter(0)\n"
              "  t = f32[4,4] transpose(p), dimensions={1,0}\n"
              "  o = f32[4,4] fusion(p, t), kind=kOutput, calls=f\n"
              "  u = f32[4,4] transpose(o), dimensions={1,0}\n"
              "  l = f32[4,4] fusion(o, u), kind=kLoop, calls=g\n"
              "  ROOT r = f32[4,4] negate(l)\n}\n");
  /* t is the residual of an output fusion: not overwritten by the accumulation */
  cr_expect_eq(tm_buf(&c, "o")->kind, MEM_TEMP);
  cr_expect_neq(tm_buf(&c, "o")->offset, tm_buf(&c, "t")->offset);
  /* a loop fusion reading its operand elementwise may take its buffer (u is read by it, but
     u is not the candidate: o is, and o's other reader u is a different buffer) */
  cr_expect_eq(tm_buf(&c, "l")->kind, MEM_ALIAS);
  cr_expect_eq(tm_buf(&c, "l")->alias, tm_idx(&c, "o"));
  cr_expect(memplan_reads_elementwise(c.m->entry->instrs[tm_idx(&c, "l")], 1));
  cr_expect(!memplan_reads_elementwise(c.m->entry->instrs[tm_idx(&c, "o")], 1));
  tm_free(&c);
}

Test(memplan, schedule_finishes_one_chain_before_starting_the_next) {
  /* as written, both 4 KiB reverses are live together; scheduled, the first is sliced (and
     dies) before the second is computed, so one 4 KiB slot serves both */
  const char *text = "HloModule m\nENTRY e {\n"
                     "  p = f32[1024] parameter(0)\n"
                     "  a1 = f32[1024] reverse(p), dimensions={0}\n"
                     "  b1 = f32[1024] reverse(p), dimensions={0}\n"
                     "  a2 = f32[4] slice(a1), slice={[0:4]}\n"
                     "  b2 = f32[4] slice(b1), slice={[4:8]}\n"
                     "  ROOT t = (f32[4], f32[4]) tuple(a2, b2)\n}\n";
  TmCase before = tm_plan(text);
  cr_expect_eq(before.plan.temp_bytes, 8192);
  tm_free(&before);
  HErr err = {0};
  HModule *m = hlo_parse_text(text, strlen(text), "<test>", &err);
  cr_assert(m, "%s", err.msg);
  HArena *a = hlo_arena_new();
  int64_t temp = -1;
  cr_expect(memplan_schedule(m->entry, a, &temp));
  cr_expect_eq(temp, 4096);
  cr_assert(hlo_verify(m, &err), "schedule broke the order: %s", err.msg);
  /* a1 is consumed before b1 is computed */
  int pos[5] = {0};
  const char *names[5] = {"a1", "b1", "a2", "b2", "t"};
  for (int i = 0; i < m->entry->ninstrs; i++)
    for (int k = 0; k < 5; k++)
      if (!strcmp(m->entry->instrs[i]->name, names[k])) pos[k] = i;
  cr_expect(pos[2] < pos[1], "a2 at %d, b1 at %d", pos[2], pos[1]);
  MemPlan plan;
  cr_assert(memplan_assign(m->entry, a, &plan, &err), "%s", err.msg);
  cr_expect_eq(plan.temp_bytes, 4096);
  cr_expect_eq(plan.peak_live, 4096);
  /* an order that is already best is kept */
  cr_expect(!memplan_schedule(m->entry, a, &temp));
  hlo_arena_free(a);
  hlo_module_free(m);
}

Test(memplan, input_output_alias_is_honoured_only_when_safe) {
  /* leaf 0 (x = exp(p)) aliases p, but p is read again by y after x: x is computed into
     scratch and copied at the end. leaf 1 (y = p + q) aliases p and is p's last reader,
     elementwise: computed straight into results[1], which may be args[0]. */
  TmCase c = tm_plan(
      "HloModule m, input_output_alias={ {0}: (0, {}, must-alias), {1}: (1, {}, may-alias) }\n"
      "ENTRY e {\n"
      "  p = f32[8] parameter(0)\n"
      "  q = f32[8] parameter(1)\n"
      "  x = f32[8] exponential(p)\n"
      "  y = f32[8] add(p, q)\n"
      "  ROOT t = (f32[8], f32[8]) tuple(x, y)\n}\n");
  cr_assert_eq(c.plan.nresults, 2);
  cr_expect_eq(c.plan.results[0].alias_param, 0);
  cr_expect(c.plan.results[0].copy);
  cr_expect_eq(tm_buf(&c, "x")->kind, MEM_TEMP);
  cr_expect_eq(c.plan.results[1].alias_param, 1);
  cr_expect(!c.plan.results[1].copy);
  cr_expect_eq(tm_buf(&c, "y")->kind, MEM_RESULT);
  tm_free(&c);
  /* a leaf that is the parameter itself, or another leaf copying it: no aliasing */
  TmCase d = tm_plan(
      "HloModule m, input_output_alias={ {0}: (0, {}, must-alias), {1}: (1, {}, must-alias) }\n"
      "ENTRY e {\n"
      "  p = f32[8] parameter(0)\n"
      "  q = f32[8] parameter(1)\n"
      "  n = f32[8] negate(q)\n"
      "  ROOT t = (f32[8], f32[8], f32[8]) tuple(p, n, q)\n}\n");
  cr_expect_eq(d.plan.results[0].alias_param, -1);
  cr_expect_eq(d.plan.results[1].alias_param, -1);
  cr_expect_eq(d.plan.results[2].alias_param, -1);
  tm_free(&d);
}

Test(memplan, dump_lists_every_buffer_and_the_totals) {
  TmCase c = tm_plan("HloModule m\nENTRY e {\n"
                     "  p = f32[256] parameter(0)\n"
                     "  a = f32[256] reverse(p), dimensions={0}\n"
                     "  b = f32[256] exponential(a)\n"
                     "  r = f32[16,16] reshape(b)\n"
                     "  ROOT t = f32[16,16] transpose(r), dimensions={1,0}\n}\n");
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  memplan_dump(&c.plan, c.m->entry, f);
  fclose(f);
  cr_expect(strstr(buf, "args[0]"), "%s", buf);
  cr_expect(strstr(buf, " temp ") && strstr(buf, "[1, 4]"), "%s", buf);
  cr_expect(strstr(buf, "in place of a"), "%s", buf);
  cr_expect(strstr(buf, "view of b"), "%s", buf);
  cr_expect(strstr(buf, "results[0]"), "%s", buf);
  cr_expect(strstr(buf, "TEMP_BYTES 1024\n"), "%s", buf);
  cr_expect(strstr(buf, "peak-live lower bound 1024\n"), "%s", buf);
  cr_expect(strstr(buf, "fragmentation 0.00%"), "%s", buf);
  free(buf);
  tm_free(&c);
}
