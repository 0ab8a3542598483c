/* tests/test_proto.c: the protobuf reader (proto/read.c, proto/load.c).
 *
 * Real modules: every corpus module.pb loads, has the entry signature its .npy inputs say,
 * and matches the same module parsed from module.hlo (computations, instruction names,
 * opcodes, shapes, operands, callees, constants). Wrappers: HloProto and HloSnapshot forms
 * are made here by prefixing the bytes with a field-1 tag and length, and must load the same.
 * Bad input: truncation at every cut point, random bytes, bit flips, and small hand-encoded
 * modules (the wire bytes are written by the helpers below, not with protobuf-c, which only
 * proto/ may use) with one defect each, checked by message substring. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hlo.h"
#include "proto.h"

/* ------------------------------------------------------------------ wire encoder */

typedef struct PB {
  uint8_t *b; /* bytes */
  size_t n;   /* length */
  size_t cap; /* capacity */
} PB;

static void pb_raw(PB *p, const void *d, size_t n) {
  if (p->n + n > p->cap) {
    p->cap = (p->n + n) * 2 + 64;
    p->b = realloc(p->b, p->cap);
  }
  if (n) memcpy(p->b + p->n, d, n);
  p->n += n;
}

static void pb_var(PB *p, uint64_t v) {
  uint8_t t[10];
  int k = 0;
  do {
    t[k] = (uint8_t)(v & 0x7f);
    v >>= 7;
    if (v) t[k] |= 0x80;
    k++;
  } while (v);
  pb_raw(p, t, (size_t)k);
}

static void pb_int(PB *p, int field, int64_t v) {
  pb_var(p, (uint64_t)field << 3);
  pb_var(p, (uint64_t)v);
}

static void pb_bytes(PB *p, int field, const void *d, size_t n) {
  pb_var(p, (uint64_t)field << 3 | 2);
  pb_var(p, n);
  pb_raw(p, d, n);
}

static void pb_str(PB *p, int field, const char *s) { pb_bytes(p, field, s, strlen(s)); }

/* Append sub as a length-delimited field and release it. */
static void pb_msg(PB *p, int field, PB sub) {
  pb_bytes(p, field, sub.b, sub.n);
  free(sub.b);
}

static void pb_packed(PB *p, int field, const int64_t *v, int n) {
  PB s = {0};
  for (int i = 0; i < n; i++)
    pb_var(&s, (uint64_t)v[i]);
  pb_msg(p, field, s);
}

static void pb_float(PB *p, int field, float f) {
  pb_var(p, (uint64_t)field << 3 | 5);
  pb_raw(p, &f, 4);
}

/* xla.PrimitiveType values used below */
enum {
  T_PRED = 1,
  T_S8 = 2,
  T_S16 = 3,
  T_S32 = 4,
  T_S64 = 5,
  T_U64 = 9,
  T_F16 = 10,
  T_F32 = 11,
  T_TUPLE = 13,
  T_C64 = 15,
  T_BF16 = 16,
  T_F8E5M2 = 19,
  T_F8E4M3FN = 20,
  T_F8E4M3FNUZ = 25
};

/* ShapeProto with the given dims and the default layout (rank <= 16 here). */
static PB sh(int et, int rank, const int64_t *dims) {
  PB p = {0};
  pb_int(&p, 2, et);
  if (rank) pb_packed(&p, 3, dims, rank);
  PB lay = {0};
  int64_t m2m[16];
  for (int i = 0; i < rank; i++)
    m2m[i] = rank - 1 - i;
  if (rank) pb_packed(&lay, 1, m2m, rank);
  pb_msg(&p, 5, lay);
  return p;
}

static PB f32v(int64_t n) { return sh(T_F32, 1, &n); }
static PB f32s(void) { return sh(T_F32, 0, NULL); }

/* HloInstructionProto with name, opcode, shape, id and operand ids; more fields may follow. */
static PB ins(const char *name, const char *opcode, PB shape, int64_t id, int nops,
              const int64_t *ops) {
  PB p = {0};
  pb_str(&p, 1, name);
  pb_str(&p, 2, opcode);
  pb_msg(&p, 3, shape);
  pb_int(&p, 35, id);
  if (nops) pb_packed(&p, 36, ops, nops);
  return p;
}

static PB param(const char *name, PB shape, int64_t id, int64_t num) {
  PB p = ins(name, "parameter", shape, id, 0, NULL);
  pb_int(&p, 9, num);
  return p;
}

/* HloComputationProto from n instructions (consumed). */
static PB comp(const char *name, int64_t id, int64_t root, int n, PB *instrs) {
  PB p = {0};
  pb_str(&p, 1, name);
  for (int i = 0; i < n; i++)
    pb_msg(&p, 2, instrs[i]);
  pb_int(&p, 5, id);
  pb_int(&p, 6, root);
  return p;
}

/* HloModuleProto from n computations (consumed); entry by id when entry_id != 0. */
static PB module(const char *name, int64_t entry_id, int n, PB *comps) {
  PB p = {0};
  pb_str(&p, 1, name);
  for (int i = 0; i < n; i++)
    pb_msg(&p, 3, comps[i]);
  if (entry_id) pb_int(&p, 6, entry_id);
  return p;
}

/* Read a hand-made module; frees the bytes. */
static HModule *load_pb(PB p, HErr *err) {
  memset(err, 0, sizeof *err);
  HModule *m = proto_read_module(p.b, p.n, "t.pb", err);
  free(p.b);
  cr_assert((m != NULL) != err->set, "result and error must agree: %s", err->msg);
  return m;
}

/* Expect the hand-made module to be rejected with a message containing want. */
static void expect_error(PB p, const char *want) {
  HErr err;
  HModule *m = load_pb(p, &err);
  cr_expect_null(m, "accepted, expected error containing \"%s\"", want);
  hlo_module_free(m);
  cr_expect(strstr(err.msg, want), "error \"%s\" lacks \"%s\"", err.msg, want);
  cr_expect(strncmp(err.msg, "t.pb: ", 6) == 0, "error not located at the file: %s", err.msg);
  cr_expect(!strchr(err.msg, '\n'), "error is not one line");
}

/* The usual one-computation module "m": p0 = f32[4] parameter(0); ROOT r = negate(p0)
 * (or the given root instruction, which may use id 1 = p0). */
static PB simple_module(PB root, int64_t root_id) {
  PB is[2] = {param("p0", f32v(4), 1, 0), root};
  PB c = comp("main", 10, root_id, 2, is);
  return module("m", 10, 1, &c);
}

static HInstr *find_instr(const HComp *c, const char *name) {
  for (int i = 0; i < c->ninstrs; i++)
    if (!strcmp(c->instrs[i]->name, name)) return c->instrs[i];
  return NULL;
}

/* ------------------------------------------------------------------ corpus helpers */

#define PATH_BUF 1100 /* room for a model directory plus a file name */

typedef struct Model {
  char dir[1024]; /* corpus directory of the model */
  bool fixture;   /* under fixtures/ (has .npy inputs) */
} Model;

static int list_models(Model *out, int max) {
  int n = 0;
  const char *kinds[] = {"fixtures", "bench"};
  for (int k = 0; k < 2; k++) {
    char base[512];
    snprintf(base, sizeof base, "%s/%s", HLOC_CORPUS_DIR, kinds[k]);
    DIR *d = opendir(base);
    cr_assert(d, "cannot open %s", base);
    struct dirent *e;
    while ((e = readdir(d)) && n < max) {
      if (e->d_name[0] == '.') continue;
      snprintf(out[n].dir, sizeof out[n].dir, "%s/%s", base, e->d_name);
      char pb[PATH_BUF];
      snprintf(pb, sizeof pb, "%s/module.pb", out[n].dir);
      if (access(pb, R_OK) != 0) continue;
      out[n].fixture = k == 0;
      n++;
    }
    closedir(d);
  }
  return n;
}

static int count_inputs(const char *dir) {
  DIR *d = opendir(dir);
  cr_assert(d);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    size_t l = strlen(e->d_name);
    if (!strncmp(e->d_name, "in", 2) && l > 6 && !strcmp(e->d_name + l - 4, ".npy")) n++;
  }
  closedir(d);
  return n;
}

static void read_bytes(const char *path, char **buf, size_t *len) {
  HErr err = {0};
  cr_assert(hlo_read_file(path, buf, len, &err), "%s", err.msg);
}

/* Structural invariants of a module read from anywhere. */
static void check_invariants(const HModule *m, const char *what) {
  cr_assert(m->entry, "%s: no entry", what);
  cr_expect_eq(m->entry, m->comps[m->entry->idx], "%s: entry not in comps", what);
  for (int c = 0; c < m->ncomps; c++) {
    const HComp *cp = m->comps[c];
    cr_expect_eq(cp->idx, c);
    cr_assert(cp->root, "%s: %s has no root", what, cp->name);
    cr_expect_eq(cp->root->parent, cp);
    for (int i = 0; i < cp->ninstrs; i++) {
      const HInstr *in = cp->instrs[i];
      cr_expect_eq(in->idx, i);
      for (int j = 0; j < in->nops; j++)
        cr_expect(in->ops[j]->parent == cp && in->ops[j]->idx < i,
                  "%s: %s: operand %d not before its user", what, in->name, j);
      for (int j = 0; j < in->nctrl; j++)
        cr_expect(in->ctrl[j]->idx < i);
      for (int j = 0; j < in->ncalls; j++)
        cr_expect(in->calls[j]->idx < c, "%s: %s: callee %s not before caller", what, in->name,
                  in->calls[j]->name);
    }
  }
}

/* ------------------------------------------------------------------ corpus tests */

Test(proto, corpus_modules_load) {
  Model ms[64];
  int n = list_models(ms, 64);
  cr_assert_geq(n, 10, "corpus has only %d models", n);
  for (int k = 0; k < n; k++) {
    char path[PATH_BUF];
    cr_assert(snprintf(path, sizeof path, "%s/module.pb", ms[k].dir) < (int)sizeof path);
    HErr err = {0};
    HModule *m = proto_load_file(path, &err);
    cr_assert(m, "%s", err.msg);
    check_invariants(m, path);
    cr_expect(m->has_entry_layout, "%s: no entry layout", path);
    cr_expect_eq(m->nentry_layout, m->entry->nparams);
    for (int i = 0; i < m->entry->nparams; i++) {
      cr_assert(m->entry->params[i], "%s: parameter %d missing", path, i);
      cr_expect(hlo_shape_eq(&m->entry_layout_params[i], &m->entry->params[i]->shape),
                "%s: entry layout of parameter %d disagrees with the parameter", path, i);
    }
    cr_expect(hlo_shape_eq(&m->entry_layout_result, &m->entry->root->shape), "%s: result", path);
    if (ms[k].fixture)
      cr_expect_eq(m->entry->nparams, count_inputs(ms[k].dir), "%s: %d parameters, %d inputs", path,
                   m->entry->nparams, count_inputs(ms[k].dir));
    hlo_module_free(m);
  }
}

static bool literal_eq(const Literal *a, const Literal *b) {
  if (!hlo_shape_eq(&a->shape, &b->shape)) return false;
  if (a->shape.dt == DT_TUPLE) {
    for (int i = 0; i < a->shape.ntuple; i++)
      if (!literal_eq(a->elems[i], b->elems[i])) return false;
    return true;
  }
  return !memcmp(a->data, b->data, hlo_shape_bytes(&a->shape));
}

static bool ilist_eq(const IList *a, const IList *b) {
  return a->n == b->n && !memcmp(a->v, b->v, sizeof(int64_t) * (size_t)a->n);
}

/* Compare one instruction read from the proto with its text twin. */
static void compare_instr(const HInstr *p, const HInstr *t, const char *where) {
  cr_expect_eq(p->op, t->op, "%s: opcode %s vs %s", where, hlo_op_name(p->op), hlo_op_name(t->op));
  cr_expect(hlo_shape_eq_layout(&p->shape, &t->shape), "%s: shape %s vs %s", where,
            hlo_shape_str(p->parent->mod->arena, &p->shape),
            hlo_shape_str(t->parent->mod->arena, &t->shape));
  cr_assert_eq(p->nops, t->nops, "%s: operand count", where);
  for (int j = 0; j < p->nops; j++)
    cr_expect_str_eq(p->ops[j]->name, t->ops[j]->name, "%s: operand %d", where, j);
  cr_assert_eq(p->ncalls, t->ncalls, "%s: callee count", where);
  for (int j = 0; j < p->ncalls; j++)
    cr_expect_str_eq(p->calls[j]->name, t->calls[j]->name, "%s: callee %d", where, j);
  if (p->op == OP_PARAMETER) cr_expect_eq(p->param_num, t->param_num, "%s", where);
  if (p->op == OP_GET_TUPLE_ELEMENT) cr_expect_eq(p->tuple_index, t->tuple_index, "%s", where);
  if (p->op == OP_IOTA) cr_expect_eq(p->iota_dim, t->iota_dim, "%s", where);
  if (p->op == OP_COMPARE) {
    cr_expect_eq(p->cmp_dir, t->cmp_dir, "%s: direction", where);
    cr_expect_eq(p->cmp_type, t->cmp_type, "%s: comparison type", where);
  }
  cr_expect(ilist_eq(&p->precision, &t->precision), "%s: operand_precision", where);
  cr_expect(ilist_eq(&p->dims, &t->dims), "%s: dimensions", where);
  if (p->op == OP_CONSTANT && t->literal)
    cr_expect(p->literal && literal_eq(p->literal, t->literal), "%s: constant value", where);
  if (p->dot) {
    cr_assert(t->dot, "%s: dot dims", where);
    cr_expect(ilist_eq(&p->dot->lhs_contract, &t->dot->lhs_contract), "%s", where);
    cr_expect(ilist_eq(&p->dot->rhs_contract, &t->dot->rhs_contract), "%s", where);
    cr_expect(ilist_eq(&p->dot->lhs_batch, &t->dot->lhs_batch), "%s", where);
    cr_expect(ilist_eq(&p->dot->rhs_batch, &t->dot->rhs_batch), "%s", where);
  }
  if (p->op == OP_CONVOLUTION) {
    cr_assert(p->conv && t->conv && p->window && t->window, "%s: conv attributes", where);
    const ConvDims *a = p->conv, *b = t->conv;
    cr_expect(a->in_batch == b->in_batch && a->in_feat == b->in_feat && a->k_in == b->k_in &&
                  a->k_out == b->k_out && a->out_batch == b->out_batch &&
                  a->out_feat == b->out_feat && ilist_eq(&a->in_sp, &b->in_sp) &&
                  ilist_eq(&a->k_sp, &b->k_sp) && ilist_eq(&a->out_sp, &b->out_sp),
              "%s: dim_labels", where);
    cr_expect_eq(p->window->n, t->window->n, "%s: window", where);
    for (int i = 0; i < p->window->n; i++) {
      const WinDim *x = &p->window->d[i], *y = &t->window->d[i];
      cr_expect(x->size == y->size && x->stride == y->stride && x->pad_lo == y->pad_lo &&
                    x->pad_hi == y->pad_hi && x->win_dil == y->win_dil &&
                    x->base_dil == y->base_dil && x->reversal == y->reversal,
                "%s: window dimension %d", where, i);
    }
    cr_expect_eq(p->feature_groups, t->feature_groups, "%s", where);
    cr_expect_eq(p->batch_groups, t->batch_groups, "%s", where);
  }
  if (p->op == OP_SLICE) {
    cr_assert(p->slice && t->slice, "%s: slice", where);
    cr_assert_eq(p->slice->n, t->slice->n, "%s: slice", where);
    for (int i = 0; i < p->slice->n; i++)
      cr_expect(p->slice->start[i] == t->slice->start[i] &&
                    p->slice->limit[i] == t->slice->limit[i] &&
                    p->slice->stride[i] == t->slice->stride[i],
                "%s: slice dimension %d", where, i);
  }
  if (p->op == OP_GATHER) {
    cr_assert(p->gather && t->gather, "%s: gather", where);
    const GatherDims *a = p->gather, *b = t->gather;
    cr_expect(ilist_eq(&a->offset_dims, &b->offset_dims) &&
                  ilist_eq(&a->collapsed_slice_dims, &b->collapsed_slice_dims) &&
                  ilist_eq(&a->start_index_map, &b->start_index_map) &&
                  ilist_eq(&a->operand_batching_dims, &b->operand_batching_dims) &&
                  ilist_eq(&a->start_indices_batching_dims, &b->start_indices_batching_dims) &&
                  a->index_vector_dim == b->index_vector_dim &&
                  ilist_eq(&a->slice_sizes, &b->slice_sizes),
              "%s: gather dims", where);
  }
  if (p->op == OP_SCATTER) {
    cr_assert(p->scatter && t->scatter, "%s: scatter", where);
    const ScatterDims *a = p->scatter, *b = t->scatter;
    cr_expect(ilist_eq(&a->update_window_dims, &b->update_window_dims) &&
                  ilist_eq(&a->inserted_window_dims, &b->inserted_window_dims) &&
                  ilist_eq(&a->scatter_dims_to_operand_dims, &b->scatter_dims_to_operand_dims) &&
                  ilist_eq(&a->input_batching_dims, &b->input_batching_dims) &&
                  ilist_eq(&a->scatter_indices_batching_dims, &b->scatter_indices_batching_dims) &&
                  a->index_vector_dim == b->index_vector_dim,
              "%s: scatter dims", where);
  }
}

Test(proto, corpus_matches_text) {
  Model ms[64];
  int n = list_models(ms, 64), compared = 0, instrs = 0;
  for (int k = 0; k < n; k++) {
    char path[PATH_BUF], tpath[PATH_BUF];
    cr_assert(snprintf(path, sizeof path, "%s/module.pb", ms[k].dir) < (int)sizeof path);
    cr_assert(snprintf(tpath, sizeof tpath, "%s/module.hlo", ms[k].dir) < (int)sizeof tpath);
    HErr err = {0};
    HModule *pm = proto_load_file(path, &err);
    cr_assert(pm, "%s", err.msg);
    char *text;
    size_t tlen;
    read_bytes(tpath, &text, &tlen);
    HModule *tm = hlo_parse_text(text, tlen, tpath, &err);
    if (!tm && strstr(text, "constant({...})")) {
      /* the dump elided large constants: the text has lost data, nothing to compare */
      free(text);
      hlo_module_free(pm);
      continue;
    }
    free(text);
    cr_assert(tm, "%s", err.msg);
    cr_expect_str_eq(pm->name, tm->name);
    cr_assert_eq(pm->ncomps, tm->ncomps, "%s: computation count", path);
    cr_expect_str_eq(pm->entry->name, tm->entry->name, "%s: entry", path);
    for (int c = 0; c < pm->ncomps; c++) {
      const HComp *pc = pm->comps[c];
      const HComp *tc = hlo_module_find_comp(tm, pc->name);
      cr_assert(tc, "%s: computation %s missing from the text", path, pc->name);
      cr_assert_eq(pc->ninstrs, tc->ninstrs, "%s: %s instruction count", path, pc->name);
      cr_expect_str_eq(pc->root->name, tc->root->name, "%s: %s root", path, pc->name);
      for (int i = 0; i < pc->ninstrs; i++) {
        const HInstr *pi = pc->instrs[i];
        const HInstr *ti = find_instr(tc, pi->name);
        char where[1400];
        snprintf(where, sizeof where, "%s: %s/%s", path, pc->name, pi->name);
        cr_assert(ti, "%s: missing from the text", where);
        compare_instr(pi, ti, where);
        instrs++;
      }
    }
    compared++;
    hlo_module_free(pm);
    hlo_module_free(tm);
  }
  cr_expect_geq(compared, n - 1, "only %d of %d modules compared", compared, n);
  cr_expect_gt(instrs, 3000, "only %d instructions compared", instrs);
}

/* Same computations and instructions in the same order. */
static void expect_same_module(const HModule *a, const HModule *b, const char *what) {
  cr_expect_str_eq(a->name, b->name, "%s", what);
  cr_assert_eq(a->ncomps, b->ncomps, "%s", what);
  cr_expect_str_eq(a->entry->name, b->entry->name, "%s", what);
  for (int c = 0; c < a->ncomps; c++) {
    cr_expect_str_eq(a->comps[c]->name, b->comps[c]->name, "%s", what);
    cr_assert_eq(a->comps[c]->ninstrs, b->comps[c]->ninstrs, "%s", what);
    for (int i = 0; i < a->comps[c]->ninstrs; i++) {
      const HInstr *x = a->comps[c]->instrs[i], *y = b->comps[c]->instrs[i];
      cr_expect_str_eq(x->name, y->name, "%s", what);
      cr_expect_eq(x->op, y->op, "%s", what);
      cr_expect_eq(x->uid, y->uid, "%s", what);
      cr_expect(hlo_shape_eq_layout(&x->shape, &y->shape), "%s", what);
    }
  }
}

Test(proto, hloproto_and_snapshot_wrappers) {
  Model ms[64];
  int n = list_models(ms, 64);
  for (int k = 0; k < n; k++) {
    char path[PATH_BUF];
    cr_assert(snprintf(path, sizeof path, "%s/module.pb", ms[k].dir) < (int)sizeof path);
    char *buf;
    size_t len;
    read_bytes(path, &buf, &len);
    HErr err = {0};
    HModule *bare = proto_read_module((const uint8_t *)buf, len, path, &err);
    cr_assert(bare, "%s", err.msg);

    /* HloProto{hlo_module = 1; buffer_assignment = 3 (skipped)} */
    PB hp = {0};
    pb_bytes(&hp, 1, buf, len);
    PB ba = {0};
    pb_int(&ba, 1, 7);
    pb_msg(&hp, 3, ba);
    HModule *m1 = proto_read_module(hp.b, hp.n, path, &err);
    cr_assert(m1, "HloProto %s: %s", path, err.msg);
    expect_same_module(bare, m1, "HloProto");

    /* HloSnapshot{hlo = 1; execution_platform = 4} */
    PB snap = {0};
    pb_bytes(&snap, 1, hp.b, hp.n);
    pb_str(&snap, 4, "Host");
    HModule *m2 = proto_read_module(snap.b, snap.n, path, &err);
    cr_assert(m2, "HloSnapshot %s: %s", path, err.msg);
    expect_same_module(bare, m2, "HloSnapshot");

    free(hp.b);
    free(snap.b);
    free(buf);
    hlo_module_free(bare);
    hlo_module_free(m1);
    hlo_module_free(m2);
  }
}

/* ------------------------------------------------------------------ malformed bytes */

/* Offsets where a top-level field of a valid message ends: cutting there leaves a valid
 * (shorter) message, cutting anywhere else must fail. */
static bool *field_ends(const uint8_t *b, size_t n) {
  bool *ends = calloc(n + 1, 1);
  size_t p = 0;
  ends[0] = true;
  while (p < n) {
    uint64_t key = 0, v = 0;
    int s = 0;
    do
      key |= (uint64_t)(b[p] & 0x7f) << s, s += 7;
    while (b[p++] & 0x80);
    switch (key & 7) {
    case 0:
      while (b[p++] & 0x80) {
      }
      break;
    case 1: p += 8; break;
    case 5: p += 4; break;
    case 2:
      s = 0;
      do
        v |= (uint64_t)(b[p] & 0x7f) << s, s += 7;
      while (b[p++] & 0x80);
      p += v;
      break;
    default: cr_assert_fail("unexpected wire type in a corpus module");
    }
    cr_assert_leq(p, n);
    ends[p] = true;
  }
  return ends;
}

static void truncations(const char *model) {
  char path[PATH_BUF];
  snprintf(path, sizeof path, "%s/fixtures/%s/module.pb", HLOC_CORPUS_DIR, model);
  char *buf;
  size_t len;
  read_bytes(path, &buf, &len);
  bool *ends = field_ends((const uint8_t *)buf, len);
  int failed = 0;
  for (size_t cut = 0; cut < len; cut++) {
    HErr err = {0};
    HModule *m = proto_read_module((const uint8_t *)buf, cut, "cut.pb", &err);
    cr_assert((m != NULL) != err.set, "cut %zu: result and error disagree", cut);
    if (!ends[cut]) cr_expect_null(m, "%s cut at %zu of %zu bytes was accepted", model, cut, len);
    if (m) check_invariants(m, "truncated");
    failed += m == NULL;
    hlo_module_free(m);
  }
  cr_expect_gt(failed, (int)len * 9 / 10);
  free(ends);
  free(buf);
}

Test(proto, truncated_at_every_byte, .timeout = 120) {
  truncations("elementwise_chain");
  truncations("mlp");
}

static uint64_t rng_next(uint64_t *s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return *s >> 33;
}

Test(proto, random_bytes_rejected) {
  uint64_t s = 12345;
  uint8_t buf[4096];
  for (int k = 0; k < 500; k++) {
    size_t n = 1 + rng_next(&s) % sizeof buf;
    for (size_t i = 0; i < n; i++)
      buf[i] = (uint8_t)rng_next(&s);
    HErr err = {0};
    HModule *m = proto_read_module(buf, n, "rand.pb", &err);
    cr_expect_null(m, "random input %d accepted", k);
    cr_expect(err.set && strstr(err.msg, "rand.pb: "), "random input %d: %s", k, err.msg);
    hlo_module_free(m);
  }
}

Test(proto, bit_flips_never_crash) {
  char path[PATH_BUF];
  snprintf(path, sizeof path, "%s/fixtures/mlp/module.pb", HLOC_CORPUS_DIR);
  char *orig;
  size_t len;
  read_bytes(path, &orig, &len);
  uint8_t *buf = malloc(len);
  uint64_t s = 99;
  int rejected = 0;
  for (int k = 0; k < 1500; k++) {
    memcpy(buf, orig, len);
    for (int f = 0; f < 1 + k % 4; f++) {
      size_t at = rng_next(&s) % len;
      buf[at] ^= (uint8_t)(1u << (rng_next(&s) % 8));
    }
    HErr err = {0};
    HModule *m = proto_read_module(buf, len, "flip.pb", &err);
    cr_assert((m != NULL) != err.set, "flip %d: result and error disagree", k);
    if (m) check_invariants(m, "flipped");
    rejected += m == NULL;
    hlo_module_free(m);
  }
  cr_expect_gt(rejected, 100, "bit flips almost never detected (%d)", rejected);
  free(buf);
  free(orig);
}

Test(proto, empty_and_non_module_input) {
  HErr err = {0};
  cr_expect_null(proto_read_module((const uint8_t *)"", 0, "e.pb", &err));
  cr_expect(strstr(err.msg, "e.pb: not a valid HloModuleProto"), "%s", err.msg);
  /* a well-formed message without computations */
  PB p = {0};
  pb_str(&p, 1, "just a name");
  expect_error(p, "no computations");
  /* deep nesting of tuple shapes beyond the framing limit: rejected, no stack overflow */
  PB deep = {0};
  pb_int(&deep, 2, T_TUPLE);
  for (int i = 0; i < 5000; i++) {
    PB outer = {0};
    pb_int(&outer, 2, T_TUPLE);
    pb_msg(&outer, 4, deep);
    deep = outer;
  }
  PB is[1] = {ins("p", "parameter", deep, 1, 0, NULL)};
  PB c = comp("main", 1, 1, 1, is);
  expect_error(module("m", 1, 1, &c), "not a valid HloModuleProto");
}

Test(proto, empty_file_and_text_detection) {
  char path[] = "/tmp/hloc_proto_XXXXXX";
  int fd = mkstemp(path);
  cr_assert(fd >= 0);
  close(fd);
  HErr err = {0};
  cr_expect_null(proto_load_file(path, &err));
  cr_expect(strstr(err.msg, "not a valid HloModuleProto"), "%s", err.msg);
  /* HLO text behind comments goes to the text parser */
  const char *text = "// produced by hand\n/* block */ HloModule tiny\n\nENTRY main {\n"
                     "  p = f32[4]{0} parameter(0)\n  ROOT n = f32[4]{0} negate(p)\n}\n";
  FILE *f = fopen(path, "w");
  fputs(text, f);
  fclose(f);
  memset(&err, 0, sizeof err);
  HModule *m = proto_load_file(path, &err);
  cr_assert(m, "%s", err.msg);
  cr_expect_str_eq(m->name, "tiny");
  cr_expect_eq(m->entry->root->op, OP_NEGATE);
  hlo_module_free(m);
  /* and without its header (as XLA's test files are): the ENTRY computation, else the last */
  const char *bare[] = {
      "// RUN: x\n\nadd {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
      "  ROOT s = f32[] add(a, b)\n}\n\nfused (p: f32[4]) -> f32[] {\n"
      "  p = f32[4] parameter(0)\n  z = f32[] constant(0)\n"
      "  ROOT r = f32[] reduce(p, z), dimensions={0}, to_apply=add\n}\n",
      "ENTRY main {\n  p = f32[4]{0} parameter(0)\n  ROOT n = f32[4]{0} negate(p)\n}\n"
      "other {\n  q = f32[] parameter(0)\n  ROOT c = f32[] copy(q)\n}\n"};
  const int root_op[] = {OP_REDUCE, OP_NEGATE};
  for (int i = 0; i < 2; i++) {
    f = fopen(path, "w");
    fputs(bare[i], f);
    fclose(f);
    memset(&err, 0, sizeof err);
    m = proto_load_file(path, &err);
    cr_assert(m, "headerless %d: %s", i, err.msg);
    cr_expect_str_eq(m->name, "module");
    cr_expect_eq(m->entry->root->op, root_op[i], "headerless %d: the wrong entry", i);
    hlo_module_free(m);
  }
  memset(&err, 0, sizeof err);
  cr_expect_null(proto_load_file("/nonexistent/x.pb", &err));
  cr_expect(strstr(err.msg, "/nonexistent/x.pb"), "%s", err.msg);
  unlink(path);
}

/* ------------------------------------------------------------------ hand-made modules */

Test(proto, graph_errors_are_located) {
  int64_t one = 1, ops2[2] = {1, 99};
  expect_error(simple_module(ins("bad", "frobnicate", f32v(4), 2, 1, &one), 2),
               "computation 'main', instruction 'bad': unknown opcode 'frobnicate'");
  expect_error(simple_module(ins("a", "add", f32v(4), 2, 2, ops2), 2),
               "instruction 'a': operand 1: id 99 does not name an instruction");
  expect_error(simple_module(ins("n", "negate", f32v(4), 2, 1, &one), 5),
               "computation 'main': root id 5 does not name");
  {
    PB r = ins("n", "negate", f32v(4), 2, 1, &one);
    int64_t ctl = 42;
    pb_packed(&r, 37, &ctl, 1);
    expect_error(simple_module(r, 2), "instruction 'n': control predecessor id 42");
  }
  {
    PB r = ins("c", "call", f32v(4), 2, 1, &one);
    int64_t callee = 77;
    pb_packed(&r, 38, &callee, 1);
    expect_error(simple_module(r, 2), "instruction 'c': called computation id 77 does not exist");
  }
  { /* cycle: a = negate(b), b = negate(a) */
    int64_t opa = 3, opb = 2;
    PB is[3] = {param("p0", f32v(4), 1, 0), ins("a", "negate", f32v(4), 2, 1, &opa),
                ins("b", "negate", f32v(4), 3, 1, &opb)};
    PB c = comp("main", 10, 3, 3, is);
    expect_error(module("m", 10, 1, &c), "(operand or control cycle)");
  }
  { /* self loop */
    int64_t self = 2;
    expect_error(simple_module(ins("s", "negate", f32v(4), 2, 1, &self), 2), "instruction 's'");
  }
  { /* duplicate ids */
    expect_error(simple_module(ins("n", "negate", f32v(4), 1, 1, &one), 1), "duplicate id 1");
  }
  { /* the same name in two computations is taken (as the text parser takes it: XLA's test
       files reuse parameter names), twice in one is not */
    PB a[2] = {param("p0", f32v(4), 1, 0), ins("n", "negate", f32v(4), 2, 1, &one)};
    PB b[2] = {param("p0", f32v(4), 1, 0), ins("n2", "negate", f32v(4), 2, 1, &one)};
    PB cs[2] = {comp("a", 1, 2, 2, a), comp("b", 2, 2, 2, b)};
    HErr err;
    HModule *m = load_pb(module("m", 2, 2, cs), &err);
    cr_expect(m != NULL, "names repeated across computations refused: %s", err.msg);
    hlo_module_free(m);
    PB c[2] = {param("p0", f32v(4), 1, 0), ins("p0", "negate", f32v(4), 2, 1, &one)};
    PB cc = comp("c", 1, 2, 2, c);
    expect_error(module("m", 1, 1, &cc),
                 "computation 'c', instruction 'p0': duplicate instruction name");
  }
  { /* computations calling each other */
    PB a[2] = {param("pa", f32v(4), 1, 0), ins("ca", "call", f32v(4), 2, 1, &one)};
    int64_t tob = 2, toa = 1;
    pb_packed(&a[1], 38, &tob, 1);
    PB b[2] = {param("pb", f32v(4), 1, 0), ins("cb", "call", f32v(4), 2, 1, &one)};
    pb_packed(&b[1], 38, &toa, 1);
    PB cs[2] = {comp("a", 1, 2, 2, a), comp("b", 2, 2, 2, b)};
    expect_error(module("m", 2, 2, cs), "computation 'a': computation is part of a call cycle");
  }
  { /* entry that does not exist */
    PB is[1] = {param("p0", f32v(4), 1, 0)};
    PB c = comp("main", 10, 1, 1, is);
    expect_error(module("m", 42, 1, &c), "entry computation (id 42");
  }
  { /* parameter numbers */
    PB is[2] = {param("p0", f32v(4), 1, 0), param("p1", f32v(4), 2, 5)};
    PB c = comp("main", 10, 1, 2, is);
    expect_error(module("m", 10, 1, &c), "instruction 'p1': parameter number 5 out of range");
  }
  { /* wrong operand count for a fixed-arity op */
    int64_t two[2] = {1, 1};
    expect_error(simple_module(ins("n", "negate", f32v(4), 2, 2, two), 2),
                 "negate expects 1 operands, has 2");
  }
  { /* compare without direction */
    int64_t two[2] = {1, 1};
    int64_t d4 = 4;
    expect_error(simple_module(ins("c", "compare", sh(T_PRED, 1, &d4), 2, 2, two), 2),
                 "compare without a direction");
  }
}

Test(proto, shape_and_literal_errors) {
  int64_t one = 1;
  {
    int64_t d[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    expect_error(simple_module(ins("r", "negate", sh(T_F32, 9, d), 2, 1, &one), 2),
                 "instruction 'r': rank 9 above the maximum rank 8");
  }
  {
    int64_t d[2] = {2, -3};
    expect_error(simple_module(ins("r", "negate", sh(T_F32, 2, d), 2, 1, &one), 2),
                 "negative dimension -3");
  }
  {
    int64_t d = 4;
    expect_error(simple_module(ins("r", "negate", sh(26, 1, &d), 2, 1, &one), 2),
                 "instruction 'r': unsupported element type s2");
    expect_error(simple_module(ins("r", "negate", sh(27, 1, &d), 2, 1, &one), 2),
                 "unsupported element type u2");
  }
  {
    int64_t d[2] = {1ll << 40, 1ll << 40};
    expect_error(simple_module(ins("r", "negate", sh(T_F32, 2, d), 2, 1, &one), 2), "is too large");
  }
  { /* layout that is not a permutation */
    PB s = {0};
    int64_t d[2] = {2, 3}, m2m[2] = {1, 1};
    pb_int(&s, 2, T_F32);
    pb_packed(&s, 3, d, 2);
    PB lay = {0};
    pb_packed(&lay, 1, m2m, 2);
    pb_msg(&s, 5, lay);
    expect_error(simple_module(ins("r", "negate", s, 2, 1, &one), 2), "not a permutation");
  }
  { /* literal with 5 elements for f32[2,3] */
    int64_t d[2] = {2, 3};
    PB c = ins("k", "constant", sh(T_F32, 2, d), 2, 0, NULL);
    PB lit = {0};
    pb_msg(&lit, 1, sh(T_F32, 2, d));
    PB data = {0};
    for (int i = 0; i < 5; i++)
      pb_raw(&data, &(float){1.0f}, 4);
    pb_msg(&lit, 8, data);
    pb_msg(&c, 8, lit);
    expect_error(simple_module(c, 2), "instruction 'k': literal has 5 elements, shape f32[2,3]");
  }
  { /* literal whose own shape disagrees */
    PB c = ins("k", "constant", f32v(2), 2, 0, NULL);
    PB lit = {0};
    pb_msg(&lit, 1, f32v(3));
    pb_msg(&c, 8, lit);
    expect_error(simple_module(c, 2), "literal shape f32[3]{0} does not match");
  }
  expect_error(simple_module(ins("k", "constant", f32s(), 2, 0, NULL), 2),
               "constant without a literal");
}

Test(proto, reorders_instructions_and_computations) {
  /* ids are large, sparse and negative; instructions are stored users first; the callee
   * computation comes after its caller; entry is found by name */
  const int64_t P = (1ll << 40) + 7, N = -5, C = 1ll << 50, R = 3;
  int64_t op_p = P, call_ops[1] = {P};
  PB main_is[4];
  main_is[0] = ins("root", "add", f32v(4), R, 2, (int64_t[]){N, C});
  main_is[1] = ins("c", "call", f32v(4), C, 1, call_ops);
  pb_packed(&main_is[1], 38, (int64_t[]){900}, 1);
  main_is[2] = ins("n", "negate", f32v(4), N, 1, &op_p);
  main_is[3] = param("p", f32v(4), P, 0);
  PB callee_is[2] = {ins("e", "exponential", f32v(4), 2, 1, (int64_t[]){1}),
                     param("q", f32v(4), 1, 0)};
  PB cs[2] = {comp("main", 800, R, 4, main_is), comp("body", 900, 2, 2, callee_is)};
  PB m = module("reorder", 0, 2, cs);
  pb_str(&m, 2, "main");
  HErr err;
  HModule *mod = load_pb(m, &err);
  cr_assert(mod, "%s", err.msg);
  check_invariants(mod, "reordered");
  cr_assert_eq(mod->ncomps, 2);
  cr_expect_str_eq(mod->comps[0]->name, "body");
  cr_expect_str_eq(mod->comps[1]->name, "main");
  cr_expect_str_eq(mod->entry->name, "main");
  const HComp *mc = mod->entry;
  cr_expect_str_eq(mc->root->name, "root");
  cr_expect_eq(mc->root->uid, R);
  HInstr *n = find_instr(mc, "n"), *p = find_instr(mc, "p"), *c = find_instr(mc, "c");
  cr_assert(n && p && c);
  cr_expect_eq(n->uid, N);
  cr_expect_eq(n->ops[0], p);
  cr_expect_eq(c->calls[0], mod->comps[0]);
  cr_expect_eq(mc->root->ops[0], n);
  cr_expect_eq(mc->root->ops[1], c);
  cr_expect_eq(mc->nparams, 1);
  cr_expect_eq(mc->params[0], p);
  cr_expect_gt(mod->next_uid, C, "next_uid must be above every input id");
  cr_expect_eq(mod->comps[0]->root->op, OP_EXP);
  hlo_module_free(mod);

  /* no entry id or name: the last computation */
  PB a[1] = {param("x", f32v(4), 1, 0)}, b[1] = {param("y", f32v(4), 1, 0)};
  PB cs2[2] = {comp("first", 1, 1, 1, a), comp("last", 2, 1, 1, b)};
  mod = load_pb(module("m", 0, 2, cs2), &err);
  cr_assert(mod, "%s", err.msg);
  cr_expect_str_eq(mod->entry->name, "last");
  hlo_module_free(mod);
}

/* constant k of type et with shape dims, data field `field` holding raw bytes */
static PB const_instr(int et, int rank, const int64_t *dims, int field, const void *data, size_t n,
                      PB layout_shape) {
  PB c = ins("k", "constant", sh(et, rank, dims), 2, 0, NULL);
  PB lit = {0};
  pb_msg(&lit, 1, layout_shape);
  pb_bytes(&lit, field, data, n);
  pb_msg(&c, 8, lit);
  return c;
}

static HModule *const_mod; /* module holding the last constant loaded by load_const */

static Literal *load_const(PB c) {
  hlo_module_free(const_mod);
  HErr err;
  const_mod = load_pb(simple_module(c, 2), &err);
  cr_assert(const_mod, "%s", err.msg);
  HInstr *k = find_instr(const_mod->entry, "k");
  cr_assert(k && k->literal);
  return k->literal;
}

Test(proto, literals_all_encodings) {
  int64_t d23[2] = {2, 3}, d3 = 3;
  { /* column-major f32[2,3]{0,1}: stored 1 4 2 5 3 6, row-major 1 2 3 4 5 6 */
    float col[6] = {1, 4, 2, 5, 3, 6};
    PB ls = {0};
    pb_int(&ls, 2, T_F32);
    pb_packed(&ls, 3, d23, 2);
    PB lay = {0};
    pb_packed(&lay, 1, (int64_t[]){0, 1}, 2);
    pb_msg(&ls, 5, lay);
    Literal *l = load_const(const_instr(T_F32, 2, d23, 8, col, sizeof col, ls));
    for (int i = 0; i < 6; i++)
      cr_expect_eq(((float *)l->data)[i], (float)(i + 1), "elem %d", i);
  }
  {                                                      /* f16 and bf16 bytes, little-endian */
    uint8_t h[6] = {0x00, 0x3c, 0x00, 0xc0, 0x00, 0x38}; /* 1, -2, 0.5 */
    Literal *l = load_const(const_instr(T_F16, 1, &d3, 11, h, 6, sh(T_F16, 1, &d3)));
    cr_expect_eq(hlo_literal_get_f64(l, 0), 1.0);
    cr_expect_eq(hlo_literal_get_f64(l, 1), -2.0);
    cr_expect_eq(hlo_literal_get_f64(l, 2), 0.5);
    uint8_t bf[6] = {0x80, 0x3f, 0x40, 0xc0, 0x00, 0x3f}; /* 1, -3, 0.5 */
    l = load_const(const_instr(T_BF16, 1, &d3, 13, bf, 6, sh(T_BF16, 1, &d3)));
    cr_expect_eq(hlo_literal_get_f64(l, 0), 1.0);
    cr_expect_eq(hlo_literal_get_f64(l, 1), -3.0);
    cr_expect_eq(hlo_literal_get_f64(l, 2), 0.5);
    uint8_t odd[5] = {0};
    expect_error(simple_module(const_instr(T_F16, 1, &d3, 11, odd, 5, sh(T_F16, 1, &d3)), 2),
                 "odd number of bytes");
  }
  { /* fp8: one byte per element in LiteralProto's f8e4m3fns (20) and f8e5m2s (19) */
    uint8_t e4[3] = {0x38, 0xfe, 0x01}; /* 1, -448, 2^-9 */
    Literal *l = load_const(const_instr(T_F8E4M3FN, 1, &d3, 20, e4, 3, sh(T_F8E4M3FN, 1, &d3)));
    cr_expect_eq(l->shape.dt, DT_F8E4M3FN);
    cr_expect_eq(hlo_literal_get_f64(l, 0), 1.0);
    cr_expect_eq(hlo_literal_get_f64(l, 1), -448.0);
    cr_expect_eq(hlo_literal_get_f64(l, 2), 0.001953125);
    uint8_t e5[3] = {0x7b, 0xb4, 0x7c}; /* 57344, -0.25, inf */
    l = load_const(const_instr(T_F8E5M2, 1, &d3, 19, e5, 3, sh(T_F8E5M2, 1, &d3)));
    cr_expect_eq(l->shape.dt, DT_F8E5M2);
    cr_expect_eq(hlo_literal_get_f64(l, 0), 57344.0);
    cr_expect_eq(hlo_literal_get_f64(l, 1), -0.25);
    cr_expect(isinf(hlo_literal_get_f64(l, 2)));
    /* the other type's field, or too few bytes: the count is wrong */
    expect_error(simple_module(const_instr(T_F8E5M2, 1, &d3, 20, e5, 3, sh(T_F8E5M2, 1, &d3)), 2),
                 "literal has 0 elements");
    expect_error(
        simple_module(const_instr(T_F8E4M3FN, 1, &d3, 20, e4, 2, sh(T_F8E4M3FN, 1, &d3)), 2),
        "literal has 2 elements");
    /* the fp8 formats hloc does not model stay located errors */
    expect_error(
        simple_module(const_instr(T_F8E4M3FNUZ, 1, &d3, 25, e4, 3, sh(T_F8E4M3FNUZ, 1, &d3)), 2),
        "unsupported element type f8e4m3fnuz");
  }
  {                                                        /* s16 little-endian bytes, s8 bytes */
    uint8_t s16[6] = {0xff, 0xff, 0x02, 0x01, 0x00, 0x80}; /* -1, 258, -32768 */
    Literal *l = load_const(const_instr(T_S16, 1, &d3, 17, s16, 6, sh(T_S16, 1, &d3)));
    cr_expect_eq(hlo_literal_get_i64(l, 0), -1);
    cr_expect_eq(hlo_literal_get_i64(l, 1), 258);
    cr_expect_eq(hlo_literal_get_i64(l, 2), -32768);
    int8_t s8[3] = {-7, 0, 100};
    l = load_const(const_instr(T_S8, 1, &d3, 15, s8, 3, sh(T_S8, 1, &d3)));
    cr_expect_eq(hlo_literal_get_i64(l, 0), -7);
    cr_expect_eq(hlo_literal_get_i64(l, 2), 100);
  }
  { /* packed varints: pred, s32 (negative), s64, u64 */
    PB c = ins("k", "constant", sh(T_PRED, 1, &d3), 2, 0, NULL);
    PB lit = {0};
    pb_packed(&lit, 2, (int64_t[]){1, 0, 1}, 3);
    pb_msg(&c, 8, lit);
    Literal *l = load_const(c);
    cr_expect_eq(((uint8_t *)l->data)[0], 1);
    cr_expect_eq(((uint8_t *)l->data)[1], 0);
    cr_expect_eq(((uint8_t *)l->data)[2], 1);

    c = ins("k", "constant", sh(T_S32, 1, &d3), 2, 0, NULL);
    lit = (PB){0};
    pb_packed(&lit, 4, (int64_t[]){-5, 7, INT32_MIN}, 3);
    pb_msg(&c, 8, lit);
    l = load_const(c);
    cr_expect_eq(((int32_t *)l->data)[0], -5);
    cr_expect_eq(((int32_t *)l->data)[2], INT32_MIN);

    /* unpacked repeated encoding must be accepted too */
    c = ins("k", "constant", sh(T_S64, 1, &d3), 2, 0, NULL);
    lit = (PB){0};
    pb_int(&lit, 5, INT64_MIN);
    pb_int(&lit, 5, 0);
    pb_int(&lit, 5, 123456789012345);
    pb_msg(&c, 8, lit);
    l = load_const(c);
    cr_expect_eq(((int64_t *)l->data)[0], INT64_MIN);
    cr_expect_eq(((int64_t *)l->data)[2], 123456789012345);

    c = ins("k", "constant", sh(T_U64, 1, &d3), 2, 0, NULL);
    lit = (PB){0};
    pb_packed(&lit, 7, (int64_t[]){-1, 1, 2}, 3);
    pb_msg(&c, 8, lit);
    l = load_const(c);
    cr_expect_eq(((uint64_t *)l->data)[0], UINT64_MAX);
  }
  { /* tuple literal (f32[], s32[]) */
    PB ts = {0};
    pb_int(&ts, 2, T_TUPLE);
    pb_msg(&ts, 4, f32s());
    pb_msg(&ts, 4, sh(T_S32, 0, NULL));
    PB c = ins("k", "constant", ts, 2, 0, NULL);
    PB lit = {0}, e0 = {0}, e1 = {0};
    pb_float(&e0, 8, 2.5f);
    pb_int(&e1, 4, 9);
    pb_msg(&lit, 10, e0);
    pb_msg(&lit, 10, e1);
    pb_msg(&c, 8, lit);
    Literal *l = load_const(c);
    cr_assert_eq(l->shape.dt, DT_TUPLE);
    cr_expect_eq(hlo_literal_get_f64(l->elems[0], 0), 2.5);
    cr_expect_eq(hlo_literal_get_i64(l->elems[1], 0), 9);
  }
  hlo_module_free(const_mod);
  const_mod = NULL;
}

Test(proto, instruction_attributes) {
  int64_t one = 1, d22[2] = {2, 2}, two_ops[2] = {1, 1};
  HErr err;
  /* iota: dimensions[0] is the iota dimension */
  PB io = ins("io", "iota", sh(T_S32, 2, d22), 2, 0, NULL);
  pb_packed(&io, 14, (int64_t[]){1}, 1);
  /* compare with direction and type */
  PB cmp = ins("cmp", "compare", sh(T_PRED, 1, (int64_t[]){4}), 3, 2, two_ops);
  pb_str(&cmp, 63, "LT");
  pb_str(&cmp, 72, "TOTALORDER");
  /* FLOAT is the default type for f32 operands: stored as "not given", as HLO text does */
  PB cmp2 = ins("cmp2", "compare", sh(T_PRED, 1, (int64_t[]){4}), 14, 2, two_ops);
  pb_str(&cmp2, 63, "EQ");
  pb_str(&cmp2, 72, "FLOAT");
  /* slice [1:3:2] */
  PB sl = ins("sl", "slice", f32v(1), 4, 1, &one);
  PB sd = {0};
  pb_int(&sd, 1, 1);
  pb_int(&sd, 2, 3);
  pb_int(&sd, 3, 2);
  pb_msg(&sl, 17, sd);
  /* pad low -1, high 2, interior 1 */
  PB pd = ins("pd", "pad", f32v(8), 5, 2, (int64_t[]){1, 7});
  PB pc = {0}, pcd = {0};
  pb_int(&pcd, 1, -1);
  pb_int(&pcd, 2, 2);
  pb_int(&pcd, 3, 1);
  pb_msg(&pc, 1, pcd);
  pb_msg(&pd, 21, pc);
  /* dot with contracting dims and precision */
  PB dt = ins("dt", "dot", f32s(), 6, 2, two_ops);
  PB dd = {0};
  pb_packed(&dd, 1, (int64_t[]){0}, 1);
  pb_packed(&dd, 2, (int64_t[]){0}, 1);
  PB dd2 = {.b = malloc(dd.n), .n = dd.n, .cap = dd.n};
  memcpy(dd2.b, dd.b, dd.n);
  pb_msg(&dt, 30, dd);
  PB prc = {0};
  pb_packed(&prc, 1, (int64_t[]){2, 1}, 2);
  pb_msg(&dt, 51, prc);
  /* metadata, backend_config, custom-call target, topk k/largest */
  PB cc = ins("cc", "custom-call", f32v(4), 8, 1, &one);
  pb_str(&cc, 28, "my_target");
  pb_str(&cc, 43, "{\"x\":1}");
  PB md = {0};
  pb_str(&md, 1, "add");
  pb_str(&md, 2, "jit(f)/add");
  pb_str(&md, 3, "f.py");
  pb_int(&md, 4, 12);
  pb_msg(&cc, 7, md);
  PB tk = ins("tk", "topk", f32v(4), 9, 1, &one);
  pb_int(&tk, 81, 3);
  pb_int(&tk, 85, 1);
  /* reduce-window with a window: stride 0 means 1 */
  PB rw = ins("rw", "reduce-window", f32v(4), 10, 2, (int64_t[]){1, 7});
  PB win = {0}, wd = {0};
  pb_int(&wd, 1, 3);
  pb_int(&wd, 3, 1);
  pb_int(&wd, 4, 1);
  pb_int(&wd, 6, 2);
  pb_msg(&win, 1, wd);
  pb_msg(&rw, 15, win);
  pb_packed(&rw, 38, (int64_t[]){5}, 1);
  /* convolution: dimension numbers, groups default to 1 */
  PB cv = ins("cv", "convolution", f32v(4), 11, 2, two_ops);
  PB cdn = {0};
  pb_int(&cdn, 7, 0);
  pb_int(&cdn, 8, 1);
  pb_packed(&cdn, 11, (int64_t[]){2, 3}, 2);
  pb_int(&cdn, 3, 1);
  pb_int(&cdn, 4, 0);
  pb_packed(&cdn, 6, (int64_t[]){2, 3}, 2);
  pb_int(&cdn, 9, 0);
  pb_int(&cdn, 10, 1);
  pb_packed(&cdn, 12, (int64_t[]){2, 3}, 2);
  pb_msg(&cv, 16, cdn);
  pb_int(&cv, 50, 4);

  PB zero = ins("z", "constant", f32s(), 7, 0, NULL);
  PB zl = {0};
  pb_float(&zl, 8, 0.0f);
  pb_msg(&zero, 8, zl);
  PB fusion = ins("fu", "fusion", f32v(4), 12, 1, &one);
  pb_str(&fusion, 11, "kLoop");
  pb_packed(&fusion, 38, (int64_t[]){6}, 1);

  PB red_is[3] = {param("a", f32s(), 1, 0), param("b", f32s(), 2, 1),
                  ins("s", "add", f32s(), 3, 2, (int64_t[]){1, 2})};
  PB fu_is[2] = {param("fp", f32v(4), 1, 0), ins("fn", "negate", f32v(4), 2, 1, &one)};
  /* all-default operand precision is stored as "not given" */
  PB dt2 = ins("dt2", "dot", f32s(), 15, 2, two_ops);
  pb_msg(&dt2, 30, dd2);
  PB prc2 = {0};
  pb_packed(&prc2, 1, (int64_t[]){0, 0}, 2);
  pb_msg(&dt2, 51, prc2);
  PB is[15] = {param("p0", f32v(4), 1, 0),
               io,
               cmp,
               cmp2,
               sl,
               zero,
               pd,
               dt,
               dt2,
               cc,
               tk,
               rw,
               cv,
               fusion,
               ins("root", "tuple", f32s(), 13, 1, (int64_t[]){12})};
  /* tuple shape is inconsistent on purpose: shapes are the verifier's business */
  PB cs[3] = {comp("sum", 5, 3, 3, red_is), comp("fused", 6, 2, 2, fu_is),
              comp("main", 10, 13, 15, is)};
  PB mod = module("attrs", 10, 3, cs);
  PB fa = {0}, fe = {0};
  pb_str(&fe, 1, "k");
  pb_str(&fe, 2, "v");
  pb_msg(&fa, 1, fe);
  pb_msg(&mod, 19, fa);
  HModule *m = load_pb(mod, &err);
  cr_assert(m, "%s", err.msg);
  check_invariants(m, "attrs");
  const HComp *c = m->entry;
  HInstr *x = find_instr(c, "io");
  cr_expect_eq(x->iota_dim, 1);
  cr_expect_eq(x->dims.n, 0);
  x = find_instr(c, "cmp");
  cr_expect_eq(x->cmp_dir, CMP_LT);
  cr_expect_eq(x->cmp_type, CMPT_TOTALORDER); /* not the default for f32: kept */
  x = find_instr(c, "cmp2");
  cr_expect_eq(x->cmp_dir, CMP_EQ);
  cr_expect_eq(x->cmp_type, CMPT_DEFAULT);
  cr_expect_eq(find_instr(c, "dt2")->precision.n, 0);
  x = find_instr(c, "sl");
  cr_assert(x->slice);
  cr_expect(x->slice->n == 1 && x->slice->start[0] == 1 && x->slice->limit[0] == 3 &&
            x->slice->stride[0] == 2);
  x = find_instr(c, "pd");
  cr_assert(x->pad);
  cr_expect(x->pad->n == 1 && x->pad->lo[0] == -1 && x->pad->hi[0] == 2 &&
            x->pad->interior[0] == 1);
  x = find_instr(c, "dt");
  cr_assert(x->dot);
  cr_expect(x->dot->lhs_contract.n == 1 && x->dot->rhs_contract.n == 1 && x->dot->lhs_batch.n == 0);
  cr_expect(x->precision.n == 2 && x->precision.v[0] == 2 && x->precision.v[1] == 1);
  x = find_instr(c, "cc");
  cr_expect_str_eq(x->custom_call_target, "my_target");
  cr_expect_str_eq(x->backend_config, "{\"x\":1}");
  cr_expect_str_eq(x->op_type, "add");
  cr_expect_str_eq(x->op_name, "jit(f)/add");
  cr_expect_str_eq(x->source_file, "f.py");
  cr_expect_eq(x->source_line, 12);
  x = find_instr(c, "tk"); /* fields, printed once (not verbatim attributes too) */
  cr_expect_eq(x->nraw, 0);
  cr_expect_eq(x->topk_k, 3);
  cr_expect(x->largest);
  x = find_instr(c, "rw");
  cr_assert(x->window && x->window->n == 1);
  WinDim w = x->window->d[0];
  cr_expect(w.size == 3 && w.stride == 1 && w.pad_lo == 1 && w.pad_hi == 1 && w.win_dil == 1 &&
            w.base_dil == 2 && !w.reversal);
  cr_expect_str_eq(x->calls[0]->name, "sum");
  x = find_instr(c, "cv");
  cr_assert(x->conv);
  cr_expect(x->conv->in_feat == 1 && x->conv->k_in == 1 && x->conv->out_feat == 1 &&
            x->conv->in_sp.n == 2 && x->conv->k_sp.v[1] == 3);
  cr_expect_eq(x->feature_groups, 4);
  cr_expect_eq(x->batch_groups, 1);
  x = find_instr(c, "fu");
  cr_expect_eq(x->fusion_kind, FK_LOOP);
  cr_expect(x->calls[0]->is_fusion);
  cr_expect(!hlo_module_find_comp(m, "sum")->is_fusion);
  cr_assert_eq(m->nraw, 1);
  cr_expect_str_eq(m->raw[0].value, "{k=\"v\"}");
  hlo_module_free(m);

  PB bad = ins("cmp", "compare", sh(T_PRED, 1, (int64_t[]){4}), 2, 2, two_ops);
  pb_str(&bad, 63, "SIDEWAYS");
  expect_error(simple_module(bad, 2), "unknown comparison direction 'SIDEWAYS'");
  bad = ins("fu", "fusion", f32v(4), 2, 1, &one);
  pb_str(&bad, 11, "kWeird");
  expect_error(simple_module(bad, 2), "unknown fusion kind 'kWeird'");
  bad = ins("b", "broadcast", f32v(4), 2, 1, &one);
  pb_packed(&bad, 14, (int64_t[]){0, 1, 2, 3, 4, 5, 6, 7, 8}, 9);
  expect_error(simple_module(bad, 2), "dimensions has 9 entries");
}

Test(proto, entry_layout_and_aliasing) {
  int64_t d23[2] = {2, 3}, one = 1;
  PB is[2] = {param("p0", sh(T_F32, 2, d23), 1, 0),
              ins("n", "negate", sh(T_F32, 2, d23), 2, 1, &one)};
  PB c = comp("main", 10, 2, 2, is);
  PB m = module("lay", 10, 1, &c);
  /* host_program_shape: parameter with column-major layout {0,1}, row-major result */
  PB ps = {0}, p0 = {0}, lay = {0};
  pb_int(&p0, 2, T_F32);
  pb_packed(&p0, 3, d23, 2);
  pb_packed(&lay, 1, (int64_t[]){0, 1}, 2);
  pb_msg(&p0, 5, lay);
  pb_msg(&ps, 1, p0);
  pb_msg(&ps, 2, sh(T_F32, 2, d23));
  pb_msg(&m, 4, ps);
  PB al = {0}, ae = {0};
  pb_int(&ae, 2, 0);
  pb_int(&ae, 4, 2);
  pb_msg(&al, 1, ae);
  pb_msg(&m, 8, al);
  HErr err;
  HModule *mod = load_pb(m, &err);
  cr_assert(mod, "%s", err.msg);
  cr_assert(mod->has_entry_layout);
  cr_assert_eq(mod->nentry_layout, 1);
  cr_expect_eq(mod->entry_layout_params[0].m2m[0], 0);
  cr_expect_eq(mod->entry_layout_params[0].m2m[1], 1);
  cr_expect_eq(mod->entry_layout_result.m2m[0], 1);
  cr_assert_eq(mod->nalias, 1);
  cr_expect_eq(mod->alias[0].param, 0);
  cr_expect_eq(mod->alias[0].kind, 2);
  cr_expect_eq(mod->alias[0].out_index.n, 0);
  hlo_module_free(mod);

  /* program shape with the wrong parameter count, alias of a missing parameter */
  PB is2[1] = {param("p0", f32v(4), 1, 0)};
  c = comp("main", 10, 1, 1, is2);
  m = module("lay", 10, 1, &c);
  ps = (PB){0};
  pb_msg(&ps, 1, f32v(4));
  pb_msg(&ps, 1, f32v(4));
  pb_msg(&ps, 2, f32v(4));
  pb_msg(&m, 4, ps);
  expect_error(m, "program shape has 2 parameters, entry computation has 1");
  PB is3[1] = {param("p0", f32v(4), 1, 0)};
  c = comp("main", 10, 1, 1, is3);
  m = module("lay", 10, 1, &c);
  al = (PB){0};
  ae = (PB){0};
  pb_int(&ae, 2, 3);
  pb_msg(&al, 1, ae);
  pb_msg(&m, 8, al);
  expect_error(m, "alias names parameter 3, entry has 1 parameters");
}

Test(proto, complex_literals_and_fft) {
  int64_t d2 = 2, d3 = 3, four = 4, one = 1;
  /* c64s and c128s: packed interleaved real and imaginary parts */
  float c64[4] = {1, 2, 3.5f, -4};
  Literal *l = load_const(const_instr(T_C64, 1, &d2, 12, c64, sizeof c64, sh(T_C64, 1, &d2)));
  cr_expect_eq(l->shape.dt, DT_C64);
  cr_expect(!memcmp(l->data, c64, sizeof c64), "c64 data");
  double c128[4] = {-1, 0.25, 1e300, -1e-300};
  l = load_const(const_instr(18, 1, &d2, 18, c128, sizeof c128, sh(18, 1, &d2)));
  cr_expect_eq(l->shape.dt, DT_C128);
  cr_expect(!memcmp(l->data, c128, sizeof c128), "c128 data");
  /* an odd number of floats is not a whole number of complex elements */
  expect_error(simple_module(const_instr(T_C64, 1, &d2, 12, c64, 12, sh(T_C64, 1, &d2)), 2),
               "instruction 'k'");
  /* fft_type (31) and fft_length (32): an RFFT of the f32[4] parameter */
  PB f = ins("r", "fft", sh(T_C64, 1, &d3), 2, 1, &one);
  pb_int(&f, 31, 2);
  pb_packed(&f, 32, &four, 1);
  HErr err;
  HModule *m = load_pb(simple_module(f, 2), &err);
  cr_assert(m, "%s", err.msg);
  HInstr *r = find_instr(m->entry, "r");
  cr_assert(r);
  cr_expect_eq(r->fft_type, FFT_RFFT);
  cr_expect(r->fft_length.n == 1 && r->fft_length.v[0] == 4);
  cr_expect(hlo_verify(m, &err), "%s", err.msg);
  hlo_module_free(m);
  f = ins("r", "fft", sh(T_C64, 1, &d3), 2, 1, &one);
  pb_int(&f, 31, 7);
  expect_error(simple_module(f, 2), "unknown fft_type 7");
}
