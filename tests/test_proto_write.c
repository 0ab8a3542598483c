/* tests/test_proto_write.c: the HloModuleProto writer (proto/write.c).
 *
 * Round trips: every corpus module (XLA's proto, and its text where the dump kept the
 * constants), every test HLO file of the tree and every corpus module after the optimization
 * pipeline, written as a proto and read back, print exactly as before; a proto written from a
 * module read from a proto, read and written again, is the same bytes. What a proto cannot
 * hold (an elided constant, an attribute with no field, a sharding form the writer does not
 * spell) is a located one-line error. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hlo.h"
#include "optimizer.h"
#include "proto.h"

/* m written as a proto (malloc'd bytes in *len). */
static uint8_t *pw_write(const HModule *m, size_t *len, const char *what) {
  uint8_t *b = NULL;
  HErr err = {0};
  cr_assert(proto_write_module(m, &b, len, &err), "%s: %s", what, err.msg);
  return b;
}

/* m written, read back and printed equals m printed; the bytes written are returned. */
static uint8_t *pw_round_trip(const HModule *m, const char *what, size_t *len) {
  uint8_t *b = pw_write(m, len, what);
  HErr err = {0};
  HModule *back = proto_read_module(b, *len, what, &err);
  cr_assert(back, "%s: written proto not read back: %s", what, err.msg);
  char *a = hlo_module_text(m, NULL, NULL), *t = hlo_module_text(back, NULL, NULL);
  cr_expect(!strcmp(a, t), "%s: the module read back prints differently", what);
  free(a);
  free(t);
  hlo_module_free(back);
  return b;
}

static HModule *pw_load(const char *path) {
  HErr err = {0};
  HModule *m = proto_load_file(path, &err);
  cr_assert(m, "%s", err.msg);
  return m;
}

/* Whether a constant of m was elided in its text ({...}). */
static bool pw_elided(const HModule *m) {
  for (int c = 0; c < m->ncomps; c++)
    for (int i = 0; i < m->comps[c]->ninstrs; i++)
      if (m->comps[c]->instrs[i]->op == OP_CONSTANT && !m->comps[c]->instrs[i]->literal)
        return true;
  return false;
}

/* Each corpus model's module.pb and, unless its constants were elided, module.hlo; with opt,
 * after the optimization pipeline. The count of modules compared. */
static int pw_corpus(bool opt) {
  static const char *const kinds[] = {"fixtures", "bench"};
  int n = 0;
  for (int k = 0; k < 2; k++) {
    char base[600];
    snprintf(base, sizeof base, "%s/%s", HLOC_CORPUS_DIR, kinds[k]);
    DIR *d = opendir(base);
    cr_assert(d, "cannot open %s", base);
    for (struct dirent *e; (e = readdir(d));) {
      if (e->d_name[0] == '.') continue;
      for (int t = 0; t < 2; t++) {
        char path[1200];
        snprintf(path, sizeof path, "%s/%s/module.%s", base, e->d_name, t ? "hlo" : "pb");
        HErr err = {0};
        HModule *m = proto_load_file(path, &err);
        if (!m && t) continue; /* no text */
        cr_assert(m, "%s", err.msg);
        if (pw_elided(m)) { /* a dump without its constants: nothing to write */
          hlo_module_free(m);
          continue;
        }
        if (opt) cr_assert(opt_optimize(m, &(OptOpts){0}, &err), "%s: %s", path, err.msg);
        size_t len;
        free(pw_round_trip(m, path, &len));
        hlo_module_free(m);
        n++;
      }
    }
    closedir(d);
  }
  return n;
}

Test(proto_write, corpus_round_trips, .timeout = 120) {
  cr_expect_geq(pw_corpus(false), 30, "too few corpus modules");
}

Test(proto_write, optimized_corpus_round_trips, .timeout = 300) {
  cr_expect_geq(pw_corpus(true), 30, "too few corpus modules");
}

/* Written from XLA's proto, read, written again: the same bytes. */
Test(proto_write, writing_is_a_fixed_point) {
  char path[600];
  snprintf(path, sizeof path, "%s/fixtures/resnet18/module.pb", HLOC_CORPUS_DIR);
  HModule *m = pw_load(path);
  size_t n1, n2;
  uint8_t *b1 = pw_round_trip(m, path, &n1);
  HErr err = {0};
  HModule *back = proto_read_module(b1, n1, path, &err);
  cr_assert(back, "%s", err.msg);
  uint8_t *b2 = pw_write(back, &n2, path);
  cr_expect(n1 == n2 && !memcmp(b1, b2, n1), "written twice: different bytes");
  free(b1);
  free(b2);
  hlo_module_free(back);
  hlo_module_free(m);
}

/* Every .hlo case of one test folder (pattern: dir/<name>.hlo or dir/<name>/module.hlo). */
static int pw_folder(const char *dir, bool nested) {
  DIR *d = opendir(dir);
  cr_assert(d, "cannot open %s", dir);
  int n = 0;
  for (struct dirent *e; (e = readdir(d));) {
    size_t l = strlen(e->d_name);
    if (e->d_name[0] == '.' || (!nested && (l < 5 || strcmp(e->d_name + l - 4, ".hlo")))) continue;
    char path[1200];
    snprintf(path, sizeof path, nested ? "%s/%s/module.hlo" : "%s/%s", dir, e->d_name);
    if (nested && access(path, R_OK)) continue;
    HModule *m = pw_load(path);
    size_t len;
    free(pw_round_trip(m, path, &len));
    hlo_module_free(m);
    n++;
  }
  closedir(d);
  return n;
}

Test(proto_write, test_cases_round_trip, .timeout = 120) {
  int n =
      pw_folder(HLOC_TEST_DIR "/cpu/cases", false) + pw_folder(HLOC_TEST_DIR "/cuda/cases", false) +
      pw_folder(HLOC_TEST_DIR "/xla_cases", true) + pw_folder(HLOC_TEST_DIR "/xla_complex", true);
  cr_expect_geq(n, 100, "only %d cases", n);
}

/* text parsed, written and read back, printed */
static char *pw_text_round_trip(const char *text) {
  HErr err = {0};
  HModule *m = hlo_parse_text(text, strlen(text), "t.hlo", &err);
  cr_assert(m, "%s", err.msg);
  size_t len;
  uint8_t *b = pw_write(m, &len, "t.hlo");
  HModule *back = proto_read_module(b, len, "t.pb", &err);
  cr_assert(back, "%s", err.msg);
  char *t = hlo_module_text(back, NULL, NULL);
  free(b);
  hlo_module_free(m);
  hlo_module_free(back);
  return t;
}

/* is_scheduled travels as a schedule, shardings and frontend attributes as their messages,
 * channel ids and a custom-call's side effect as their fields. */
Test(proto_write, attributes_become_fields) {
  char *t = pw_text_round_trip(
      "HloModule m, is_scheduled=true, frontend_attributes={a=\"x,y\",b={c=1}}\n"
      "ENTRY e {\n  p = f32[4]{0} parameter(0), sharding={maximal device=0}\n"
      "  q = (f32[4], f32[4]) custom-call(p), custom_call_target=\"t\", "
      "sharding={{replicated}, {devices=[2]0,1}}, custom_call_has_side_effect=true\n"
      "  ROOT r = f32[4] get-tuple-element(q), index=0, channel_id=3\n}\n");
  cr_expect(strstr(t, "HloModule m, is_scheduled=true, "), "%s", t);
  cr_expect(strstr(t, "frontend_attributes={a=\"x,y\",b={c=1}}"), "%s", t);
  cr_expect(strstr(t, "sharding={maximal device=0}"), "%s", t);
  cr_expect(strstr(t, "sharding={{replicated}, {devices=[2]0,1}}"), "%s", t);
  cr_expect(strstr(t, "custom_call_has_side_effect=true"), "%s", t);
  cr_expect(strstr(t, "channel_id=3"), "%s", t);
  free(t);
}

/* A dot's algorithm is precision_config.algorithm, by XLA's numbering (7: x3), both ways. */
Test(proto_write, dot_algorithm_round_trips) {
  char *t = pw_text_round_trip(
      "HloModule m\nENTRY e {\n  a = f32[4,8] parameter(0)\n  b = f32[8,2] parameter(1)\n"
      "  ROOT d = f32[4,2] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}, "
      "operand_precision={highest,default}, algorithm=dot_bf16_bf16_f32_x3\n}\n");
  cr_expect(strstr(t, "operand_precision={highest,default}, algorithm=dot_bf16_bf16_f32_x3"), "%s",
            t);
  free(t);
}

/* What a proto cannot hold: one located line each. */
Test(proto_write, unwritable_modules_are_located_errors) {
  static const struct {
    const char *text, *want;
  } cs[] = {
      {"HloModule m\nENTRY e {\n  ROOT c = f32[40] constant({...})\n}\n",
       "t.hlo: computation 'e', instruction 'c': the constant's value was elided"},
      {"HloModule m\nENTRY e {\n  p = f32[4] parameter(0)\n  ROOT n = f32[4] negate(p), "
       "mystery={1}\n}\n",
       "computation 'e', instruction 'n': attribute 'mystery' has no HloInstructionProto field"},
      {"HloModule m\nENTRY e {\n  p = f32[8] parameter(0), sharding={devices=[8]<=[8]}\n"
       "  ROOT n = f32[8] negate(p)\n}\n",
       "instruction 'p': sharding={devices=[8]<=[8]} is not a form --emit=pb writes"},
      {"HloModule m, num_partitions=2\nENTRY e {\n  ROOT p = f32[8] parameter(0)\n}\n",
       "t.hlo: module attribute 'num_partitions' has no HloModuleProto field"},
  };
  for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
    HErr err = {0};
    HModule *m = hlo_parse_text(cs[i].text, strlen(cs[i].text), "t.hlo", &err);
    cr_assert(m, "%s", err.msg);
    uint8_t *b = NULL;
    size_t len = 0;
    cr_expect(!proto_write_module(m, &b, &len, &err), "case %zu written", i);
    cr_expect(strstr(err.msg, cs[i].want), "case %zu: \"%s\" lacks \"%s\"", i, err.msg, cs[i].want);
    cr_expect(!strchr(err.msg, '\n'), "case %zu: not one line", i);
    free(b);
    hlo_module_free(m);
  }
}
