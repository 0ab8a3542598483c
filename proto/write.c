/* proto/write.c: hloc IR -> serialized XLA HloModuleProto (what `--emit=pb` writes).
 *
 * The inverse of read.c: every field read.c reads is written from the HInstr field it fills,
 * so read(write(m)) prints as m prints (tests/test_proto.c checks it on every corpus module).
 * The message tree is built in a scratch arena (protobuf-c messages are plain structs with
 * their descriptors' defaults) and packed once.
 *
 * Ids: every instruction and computation is numbered afresh in module order (XLA's ids are
 * unique in a module and read modulo 2^32). Layouts are written where the shape has one; a
 * literal's shape is its instruction's with the row-major layout its data is kept in. Attributes
 * carried verbatim are turned back into fields: sharding (the forms read.c spells), frontend
 * attributes, a custom-call's side effect, channel ids and the module's is_scheduled (a schedule in
 * instruction order); any other verbatim attribute has no field here and is an error naming
 * it, so that a conversion never drops part of a module without a word. */
#include "proto.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "xla.pb-c.h"

typedef struct Writer {
  HArena *a;          /* every message (freed after packing) */
  const HModule *m;   /* module written */
  const char *comp;   /* computation being written (messages) */
  const char *instr;  /* instruction being written (messages) */
  int64_t *comp_id;   /* per computation (by idx), its id */
  int64_t **instr_id; /* per computation, per instruction (by idx), its id */
  HErr *err;          /* first error */
} Writer;

static bool wfail(Writer *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool wfail(Writer *w, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  hlo_verr(w->err, w->m->file, w->comp, w->instr, fmt, ap);
  va_end(ap);
  return false;
}

/* A message of type T from the arena, with its descriptor's defaults. */
#define W_NEW(w, T, INIT) w_new_msg((w), sizeof(T), &(T)INIT)
static void *w_new_msg(Writer *w, size_t n, const void *init) {
  void *p = hlo_arena_alloc(w->a, n);
  memcpy(p, init, n);
  return p;
}

static int64_t *w_ints(Writer *w, const int64_t *v, int n) {
  return n ? hlo_arena_memdup(w->a, v, sizeof *v * (size_t)n) : NULL;
}

/* IList l into the repeated int64 field (n_field, field). */
#define W_ILIST(w, n_field, field, l)                                                              \
  ((n_field) = (size_t)(l).n, (field) = w_ints((w), (l).v, (l).n))

static char *w_str(Writer *w, const char *s) {
  return s ? hlo_arena_strdup(w->a, s) : (char *)protobuf_c_empty_string;
}

/* ------------------------------------------------------------------ ids */

/* Every instruction and computation numbered afresh, 1, 2, ... in module order: ids XLA takes
 * (unique in the module, below 2^32: XLA reads an id's low 32 bits as its local id), whatever
 * the module's own (an optimized module's new computations have none from the input). */
static void w_plan_ids(Writer *w) {
  const HModule *m = w->m;
  w->comp_id = hlo_arena_alloc(w->a, sizeof(int64_t) * ((size_t)m->ncomps + 1));
  w->instr_id = hlo_arena_alloc(w->a, sizeof(int64_t *) * ((size_t)m->ncomps + 1));
  int64_t next = 1;
  for (int c = 0; c < m->ncomps; c++) {
    const HComp *hc = m->comps[c];
    w->instr_id[c] = hlo_arena_alloc(w->a, sizeof(int64_t) * ((size_t)hc->ninstrs + 1));
    for (int i = 0; i < hc->ninstrs; i++)
      w->instr_id[c][i] = next++;
    w->comp_id[c] = next++;
  }
}

static int64_t w_comp_id(const Writer *w, const HComp *c) { return w->comp_id[c->idx]; }

static int64_t w_instr_id(const Writer *w, const HInstr *in) {
  return w->instr_id[in->parent->idx][in->idx];
}

/* ------------------------------------------------------------------ shapes */

/* Layout extras as read.c spells them ("T(8,128)(2,1)E(4)S(1)") back into lp. */
static bool w_layout_extra(Writer *w, Xla__LayoutProto *lp, const char *s) {
  const char *p = s;
  Xla__TileProto *tiles[HLO_MAX_RANK];
  int nt = 0;
  if (*p == 'T') {
    p++;
    while (*p == '(') {
      if (nt == HLO_MAX_RANK) return wfail(w, "layout '%s' has too many tiles", s);
      int64_t d[HLO_MAX_RANK];
      int n = 0;
      for (p++; *p != ')'; p += *p == ',') {
        if (n == HLO_MAX_RANK) return wfail(w, "layout '%s': a tile of too many dims", s);
        if (*p == '*') {
          d[n++] = INT64_MIN, p++;
        } else {
          char *e;
          d[n++] = strtoll(p, &e, 10);
          if (e == p) return wfail(w, "layout '%s' cannot be written to a proto", s);
          p = e;
        }
      }
      p++;
      Xla__TileProto *t = W_NEW(w, Xla__TileProto, XLA__TILE_PROTO__INIT);
      t->n_dimensions = (size_t)n;
      t->dimensions = w_ints(w, d, n);
      tiles[nt++] = t;
    }
  }
  for (; *p; p++) {
    char *e;
    if ((*p != 'E' && *p != 'S') || p[1] != '(')
      return wfail(w, "layout '%s' cannot be written to a proto", s);
    int64_t v = strtoll(p + 2, &e, 10);
    if (*e != ')') return wfail(w, "layout '%s' cannot be written to a proto", s);
    if (*p == 'E')
      lp->element_size_in_bits = v;
    else
      lp->memory_space = v;
    p = e;
  }
  lp->n_tiles = (size_t)nt;
  lp->tiles = nt ? hlo_arena_memdup(w->a, tiles, sizeof tiles[0] * (size_t)nt) : NULL;
  return true;
}

static Xla__ShapeProto *w_shape(Writer *w, const Shape *s) {
  Xla__ShapeProto *sp = W_NEW(w, Xla__ShapeProto, XLA__SHAPE_PROTO__INIT);
  sp->element_type = (Xla__PrimitiveType)hlo_dtype_proto(s->dt);
  if (s->dt == DT_TUPLE) {
    sp->n_tuple_shapes = (size_t)s->ntuple;
    sp->tuple_shapes = hlo_arena_alloc(w->a, sizeof *sp->tuple_shapes * ((size_t)s->ntuple + 1));
    for (int i = 0; i < s->ntuple; i++)
      if (!(sp->tuple_shapes[i] = w_shape(w, &s->tuple[i]))) return NULL;
    return sp;
  }
  sp->n_dimensions = (size_t)s->rank;
  sp->dimensions = w_ints(w, s->dims, s->rank);
  if (s->dt == DT_TOKEN || !s->has_layout) return sp;
  Xla__LayoutProto *lp = W_NEW(w, Xla__LayoutProto, XLA__LAYOUT_PROTO__INIT);
  lp->n_minor_to_major = (size_t)s->rank;
  lp->minor_to_major = hlo_arena_alloc(w->a, sizeof(int64_t) * ((size_t)s->rank + 1));
  for (int i = 0; i < s->rank; i++)
    lp->minor_to_major[i] = s->m2m[i];
  if (s->layout_extra && !w_layout_extra(w, lp, s->layout_extra)) return NULL;
  sp->layout = lp;
  return sp;
}

/* A copy of s without layouts. */
static void w_no_layout(Writer *w, Shape *dst, const Shape *s) {
  hlo_shape_copy(w->a, dst, s);
  dst->has_layout = false;
  dst->layout_extra = NULL;
  for (int i = 0; i < dst->ntuple; i++)
    w_no_layout(w, &dst->tuple[i], &s->tuple[i]);
}

/* The program shape of n parameters pinstr[] (their shapes, or params[] when given; their
 * names, which XLA requires one per parameter) and the result. */
static Xla__ProgramShapeProto *w_program_shape(Writer *w, int n, const Shape *params,
                                               HInstr *const *pinstr, const Shape *result) {
  Xla__ProgramShapeProto *ps = W_NEW(w, Xla__ProgramShapeProto, XLA__PROGRAM_SHAPE_PROTO__INIT);
  ps->n_parameters = ps->n_parameter_names = (size_t)n;
  ps->parameters = hlo_arena_alloc(w->a, sizeof *ps->parameters * ((size_t)n + 1));
  ps->parameter_names = hlo_arena_alloc(w->a, sizeof *ps->parameter_names * ((size_t)n + 1));
  for (int i = 0; i < n; i++) {
    if (!(ps->parameters[i] = w_shape(w, params ? &params[i] : &pinstr[i]->shape))) return NULL;
    ps->parameter_names[i] = w_str(w, pinstr[i]->name);
  }
  return (ps->result = w_shape(w, result)) ? ps : NULL;
}

/* ------------------------------------------------------------------ literals */

static ProtobufCBinaryData w_bytes(Writer *w, const void *p, size_t n) {
  return (ProtobufCBinaryData){n, n ? hlo_arena_memdup(w->a, p, n) : NULL};
}

/* 16-bit elements as little-endian bytes. */
static ProtobufCBinaryData w_le16(Writer *w, const uint16_t *v, size_t n) {
  uint8_t *b = hlo_arena_alloc(w->a, 2 * n + 1);
  for (size_t i = 0; i < n; i++)
    b[2 * i] = (uint8_t)v[i], b[2 * i + 1] = (uint8_t)(v[i] >> 8);
  return (ProtobufCBinaryData){2 * n, b};
}

/* The data field of lp the element type selects, from n row-major elements at d. */
static void w_literal_data(Writer *w, Xla__LiteralProto *lp, DType dt, const void *d, size_t n) {
  switch (dt) {
  case DT_PRED:
    lp->n_preds = n;
    lp->preds = hlo_arena_alloc(w->a, sizeof *lp->preds * (n + 1));
    for (size_t i = 0; i < n; i++)
      lp->preds[i] = ((const uint8_t *)d)[i] != 0;
    return;
  case DT_S8: lp->s8s = w_bytes(w, d, n); return;
  case DT_U8: lp->u8s = w_bytes(w, d, n); return;
  case DT_F8E4M3FN: lp->f8e4m3fns = w_bytes(w, d, n); return;
  case DT_F8E5M2: lp->f8e5m2s = w_bytes(w, d, n); return;
  case DT_S4: lp->s4s = w_bytes(w, d, n); return; /* a byte per element, as XLA's literals */
  case DT_U4: lp->u4s = w_bytes(w, d, n); return;
  case DT_S16: lp->s16s = w_le16(w, d, n); return;
  case DT_U16: lp->u16s = w_le16(w, d, n); return;
  case DT_F16: lp->f16s = w_le16(w, d, n); return;
  case DT_BF16: lp->bf16s = w_le16(w, d, n); return;
  case DT_S32: lp->n_s32s = n, lp->s32s = hlo_arena_memdup(w->a, d, 4 * n + 1); return;
  case DT_U32: lp->n_u32s = n, lp->u32s = hlo_arena_memdup(w->a, d, 4 * n + 1); return;
  case DT_S64: lp->n_s64s = n, lp->s64s = hlo_arena_memdup(w->a, d, 8 * n + 1); return;
  case DT_U64: lp->n_u64s = n, lp->u64s = hlo_arena_memdup(w->a, d, 8 * n + 1); return;
  case DT_F32: lp->n_f32s = n, lp->f32s = hlo_arena_memdup(w->a, d, 4 * n + 1); return;
  case DT_F64: lp->n_f64s = n, lp->f64s = hlo_arena_memdup(w->a, d, 8 * n + 1); return;
  case DT_C64: lp->n_c64s = 2 * n, lp->c64s = hlo_arena_memdup(w->a, d, 8 * n + 1); return;
  case DT_C128: lp->n_c128s = 2 * n, lp->c128s = hlo_arena_memdup(w->a, d, 16 * n + 1); return;
  case DT_TOKEN:
  case DT_TUPLE:
  case DT_INVALID:
  case DT_COUNT: return;
  }
}

static Xla__LiteralProto *w_literal(Writer *w, const Literal *l) {
  Xla__LiteralProto *lp = W_NEW(w, Xla__LiteralProto, XLA__LITERAL_PROTO__INIT);
  Shape s = l->shape;
  if (s.dt != DT_TUPLE) hlo_shape_set_default_layout(&s); /* the data is row-major */
  if (!(lp->shape = w_shape(w, &s))) return NULL;
  if (s.dt == DT_TUPLE) {
    lp->n_tuple_literals = (size_t)s.ntuple;
    lp->tuple_literals = hlo_arena_alloc(w->a, sizeof *lp->tuple_literals * ((size_t)s.ntuple + 1));
    for (int i = 0; i < s.ntuple; i++)
      if (!(lp->tuple_literals[i] = w_literal(w, l->elems[i]))) return NULL;
    return lp;
  }
  if (s.dt != DT_TOKEN) w_literal_data(w, lp, s.dt, l->data, (size_t)hlo_shape_elems(&s));
  return lp;
}

/* ------------------------------------------------------------------ verbatim attributes */

static const char *w_skip(const char *p) {
  while (isspace((unsigned char)*p))
    p++;
  return p;
}

/* An integer list "a,b,c" at *p (advanced past it) into v[]; its count, -1 when malformed. */
static int w_int_list(const char **p, int64_t *v, int cap) {
  int n = 0;
  for (;;) {
    char *e;
    long long x = strtoll(*p, &e, 10);
    if (e == *p || n == cap) return -1;
    v[n++] = x;
    *p = e;
    if (**p != ',') return n;
    (*p)++;
  }
}

/* A sharding in the text forms read.c spells (sharding_text) at *p, advanced past it. */
static Xla__OpSharding *w_sharding_at(Writer *w, const char **p, int depth) {
  const char *s = w_skip(*p);
  if (*s != '{' || depth > 32) return NULL;
  s = w_skip(s + 1);
  Xla__OpSharding *sh = W_NEW(w, Xla__OpSharding, XLA__OP_SHARDING__INIT);
  if (*s == '{' || *s == '}') { /* a tuple */
    sh->type = XLA__OP_SHARDING__TYPE__TUPLE;
    Xla__OpSharding *el[256];
    size_t n = 0;
    while (*s == '{') {
      if (n == 256 || !(el[n++] = w_sharding_at(w, &s, depth + 1))) return NULL;
      s = w_skip(s);
      if (*s == ',') s = w_skip(s + 1);
    }
    sh->n_tuple_shardings = n;
    sh->tuple_shardings = n ? hlo_arena_memdup(w->a, el, sizeof el[0] * n) : NULL;
  } else if (!strncmp(s, "replicated", 10)) {
    sh->type = XLA__OP_SHARDING__TYPE__REPLICATED, s += 10;
  } else if (!strncmp(s, "manual", 6)) {
    sh->type = XLA__OP_SHARDING__TYPE__MANUAL, s += 6;
  } else if (!strncmp(s, "maximal device=", 15)) {
    s += 15;
    int64_t d;
    if (w_int_list(&s, &d, 1) != 1) return NULL;
    sh->type = XLA__OP_SHARDING__TYPE__MAXIMAL;
    sh->n_tile_assignment_devices = 1;
    sh->tile_assignment_devices = w_ints(w, &d, 1);
  } else if (!strncmp(s, "devices=[", 9)) {
    s += 9;
    int64_t dims[HLO_MAX_RANK], dev[4096];
    int nd = w_int_list(&s, dims, HLO_MAX_RANK);
    if (nd < 0 || *s++ != ']') return NULL;
    int nv = w_int_list(&s, dev, 4096);
    if (nv < 0) return NULL;
    sh->type = XLA__OP_SHARDING__TYPE__OTHER;
    sh->n_tile_assignment_dimensions = (size_t)nd;
    sh->tile_assignment_dimensions = w_ints(w, dims, nd);
    sh->n_tile_assignment_devices = (size_t)nv;
    sh->tile_assignment_devices = w_ints(w, dev, nv);
    s = w_skip(s);
    if (!strncmp(s, "last_tile_dim_replicate", 23)) sh->replicate_on_last_tile_dim = 1, s += 23;
  } else {
    return NULL;
  }
  s = w_skip(s);
  if (*s != '}') return NULL;
  *p = s + 1;
  return sh;
}

/* The end of a balanced {...} value at p (quoted strings skipped), or NULL. */
static const char *w_brace_end(const char *p) {
  int depth = 0;
  for (; *p; p++) {
    if (*p == '"') {
      for (p++; *p && *p != '"'; p++)
        if (*p == '\\' && p[1]) p++;
      if (!*p) return NULL;
    } else if (*p == '{') {
      depth++;
    } else if (*p == '}' && --depth == 0) {
      return p + 1;
    }
  }
  return NULL;
}

/* frontend_attributes={k="v",k2={...}} (the text read.c writes) back into its map. */
static Xla__FrontendAttributes *w_frontend(Writer *w, const char *text) {
  Xla__FrontendAttributes *fa = W_NEW(w, Xla__FrontendAttributes, XLA__FRONTEND_ATTRIBUTES__INIT);
  const char *p = w_skip(text);
  if (*p++ != '{') return NULL;
  size_t cap = 8;
  fa->map = hlo_arena_alloc(w->a, sizeof *fa->map * cap);
  for (p = w_skip(p); *p != '}';) {
    const char *k = p;
    while (*p && *p != '=' && *p != '}' && *p != ',')
      p++;
    if (*p != '=') return NULL;
    Xla__FrontendAttributes__MapEntry *e =
        W_NEW(w, Xla__FrontendAttributes__MapEntry, XLA__FRONTEND_ATTRIBUTES__MAP_ENTRY__INIT);
    e->key = hlo_arena_printf(w->a, "%.*s", (int)(p - k), k);
    p++;
    if (*p == '"') { /* a quoted value, \" and \\ escaped */
      char *v = hlo_arena_alloc(w->a, strlen(p) + 1), *o = v;
      for (p++; *p && *p != '"'; p++)
        *o++ = *p == '\\' && p[1] ? *++p : *p;
      if (*p++ != '"') return NULL;
      e->value = v;
    } else {
      const char *end = *p == '{' ? w_brace_end(p) : NULL;
      if (!end) return NULL;
      e->value = hlo_arena_printf(w->a, "%.*s", (int)(end - p), p);
      p = end;
    }
    if (fa->n_map == cap) {
      void *g = hlo_arena_alloc(w->a, sizeof *fa->map * cap * 2);
      memcpy(g, fa->map, sizeof *fa->map * cap);
      fa->map = g, cap *= 2;
    }
    fa->map[fa->n_map++] = e;
    p = w_skip(p);
    if (*p == ',') p = w_skip(p + 1);
  }
  return fa;
}

/* The verbatim attributes of in into their fields; false (a located error) for one that has
 * none. */
static bool w_raw_attrs(Writer *w, Xla__HloInstructionProto *pi, const HInstr *in) {
  for (int i = 0; i < in->nraw; i++) {
    const char *n = in->raw[i].name, *v = in->raw[i].value;
    if (!strcmp(n, "sharding")) {
      const char *p = v;
      if (!(pi->sharding = w_sharding_at(w, &p, 0)) || *w_skip(p))
        return wfail(w, "sharding=%s is not a form --emit=pb writes", v);
    } else if (!strcmp(n, "frontend_attributes")) {
      if (!(pi->frontend_attributes = w_frontend(w, v)))
        return wfail(w, "frontend_attributes=%s cannot be written to a proto", v);
    } else if (!strcmp(n, "custom_call_has_side_effect")) {
      pi->custom_call_has_side_effect = !strcmp(v, "true");
    } else if (!strcmp(n, "channel_id")) {
      pi->channel_id = strtoll(v, NULL, 10);
    } else {
      return wfail(w, "attribute '%s' has no HloInstructionProto field hloc writes", n);
    }
  }
  return true;
}

/* ------------------------------------------------------------------ instructions */

static Xla__Window *w_window(Writer *w, const Window *win) {
  Xla__Window *pw = W_NEW(w, Xla__Window, XLA__WINDOW__INIT);
  pw->n_dimensions = (size_t)win->n;
  pw->dimensions = hlo_arena_alloc(w->a, sizeof *pw->dimensions * ((size_t)win->n + 1));
  for (int i = 0; i < win->n; i++) {
    Xla__WindowDimension *d = W_NEW(w, Xla__WindowDimension, XLA__WINDOW_DIMENSION__INIT);
    const WinDim *s = &win->d[i];
    d->size = s->size, d->stride = s->stride, d->padding_low = s->pad_lo;
    d->padding_high = s->pad_hi, d->window_dilation = s->win_dil, d->base_dilation = s->base_dil;
    d->window_reversal = s->reversal;
    pw->dimensions[i] = d;
  }
  return pw;
}

static Xla__ConvolutionDimensionNumbers *w_conv(Writer *w, const ConvDims *c) {
  Xla__ConvolutionDimensionNumbers *pc =
      W_NEW(w, Xla__ConvolutionDimensionNumbers, XLA__CONVOLUTION_DIMENSION_NUMBERS__INIT);
  pc->input_batch_dimension = c->in_batch, pc->input_feature_dimension = c->in_feat;
  pc->kernel_input_feature_dimension = c->k_in, pc->kernel_output_feature_dimension = c->k_out;
  pc->output_batch_dimension = c->out_batch, pc->output_feature_dimension = c->out_feat;
  W_ILIST(w, pc->n_input_spatial_dimensions, pc->input_spatial_dimensions, c->in_sp);
  W_ILIST(w, pc->n_kernel_spatial_dimensions, pc->kernel_spatial_dimensions, c->k_sp);
  W_ILIST(w, pc->n_output_spatial_dimensions, pc->output_spatial_dimensions, c->out_sp);
  return pc;
}

static Xla__DotDimensionNumbers *w_dot(Writer *w, const DotDims *d) {
  Xla__DotDimensionNumbers *pd =
      W_NEW(w, Xla__DotDimensionNumbers, XLA__DOT_DIMENSION_NUMBERS__INIT);
  W_ILIST(w, pd->n_lhs_batch_dimensions, pd->lhs_batch_dimensions, d->lhs_batch);
  W_ILIST(w, pd->n_rhs_batch_dimensions, pd->rhs_batch_dimensions, d->rhs_batch);
  W_ILIST(w, pd->n_lhs_contracting_dimensions, pd->lhs_contracting_dimensions, d->lhs_contract);
  W_ILIST(w, pd->n_rhs_contracting_dimensions, pd->rhs_contracting_dimensions, d->rhs_contract);
  return pd;
}

static Xla__GatherDimensionNumbers *w_gather(Writer *w, const GatherDims *g) {
  Xla__GatherDimensionNumbers *pg =
      W_NEW(w, Xla__GatherDimensionNumbers, XLA__GATHER_DIMENSION_NUMBERS__INIT);
  W_ILIST(w, pg->n_offset_dims, pg->offset_dims, g->offset_dims);
  W_ILIST(w, pg->n_collapsed_slice_dims, pg->collapsed_slice_dims, g->collapsed_slice_dims);
  W_ILIST(w, pg->n_start_index_map, pg->start_index_map, g->start_index_map);
  W_ILIST(w, pg->n_operand_batching_dims, pg->operand_batching_dims, g->operand_batching_dims);
  W_ILIST(w, pg->n_start_indices_batching_dims, pg->start_indices_batching_dims,
          g->start_indices_batching_dims);
  pg->index_vector_dim = g->index_vector_dim;
  return pg;
}

static Xla__ScatterDimensionNumbers *w_scatter(Writer *w, const ScatterDims *s) {
  Xla__ScatterDimensionNumbers *ps =
      W_NEW(w, Xla__ScatterDimensionNumbers, XLA__SCATTER_DIMENSION_NUMBERS__INIT);
  W_ILIST(w, ps->n_update_window_dims, ps->update_window_dims, s->update_window_dims);
  W_ILIST(w, ps->n_inserted_window_dims, ps->inserted_window_dims, s->inserted_window_dims);
  W_ILIST(w, ps->n_scatter_dims_to_operand_dims, ps->scatter_dims_to_operand_dims,
          s->scatter_dims_to_operand_dims);
  W_ILIST(w, ps->n_input_batching_dims, ps->input_batching_dims, s->input_batching_dims);
  W_ILIST(w, ps->n_scatter_indices_batching_dims, ps->scatter_indices_batching_dims,
          s->scatter_indices_batching_dims);
  ps->index_vector_dim = s->index_vector_dim;
  return ps;
}

/* Slices and padding: one message per dimension. */
static void w_slice_pad(Writer *w, Xla__HloInstructionProto *pi, const HInstr *in) {
  if (in->slice) {
    int n = in->slice->n;
    pi->n_slice_dimensions = (size_t)n;
    pi->slice_dimensions = hlo_arena_alloc(w->a, sizeof *pi->slice_dimensions * ((size_t)n + 1));
    for (int i = 0; i < n; i++) {
      Xla__HloInstructionProto__SliceDimensions *d =
          W_NEW(w, Xla__HloInstructionProto__SliceDimensions,
                XLA__HLO_INSTRUCTION_PROTO__SLICE_DIMENSIONS__INIT);
      d->start = in->slice->start[i], d->limit = in->slice->limit[i];
      d->stride = in->slice->stride[i];
      pi->slice_dimensions[i] = d;
    }
  }
  if (in->pad) {
    Xla__PaddingConfig *pc = W_NEW(w, Xla__PaddingConfig, XLA__PADDING_CONFIG__INIT);
    int n = in->pad->n;
    pc->n_dimensions = (size_t)n;
    pc->dimensions = hlo_arena_alloc(w->a, sizeof *pc->dimensions * ((size_t)n + 1));
    for (int i = 0; i < n; i++) {
      Xla__PaddingConfig__PaddingConfigDimension *d =
          W_NEW(w, Xla__PaddingConfig__PaddingConfigDimension,
                XLA__PADDING_CONFIG__PADDING_CONFIG_DIMENSION__INIT);
      d->edge_padding_low = in->pad->lo[i], d->edge_padding_high = in->pad->hi[i];
      d->interior_padding = in->pad->interior[i];
      pc->dimensions[i] = d;
    }
    pi->padding_config = pc;
  }
}

/* Comparison, fusion, sort/topk, gather/scatter flags and the other scalar attributes. */
static void w_scalars(Writer *w, Xla__HloInstructionProto *pi, const HInstr *in) {
  pi->parameter_number = in->param_num;
  pi->tuple_index = in->tuple_index;
  pi->feature_group_count = in->feature_groups;
  pi->batch_group_count = in->batch_groups;
  if (in->op == OP_COMPARE) {
    pi->comparison_direction = w_str(w, hlo_cmp_dir_name(in->cmp_dir));
    if (in->cmp_type != CMPT_DEFAULT)
      pi->comparison_type = w_str(w, hlo_cmp_type_name(in->cmp_type));
  }
  if (in->op == OP_FUSION && in->fusion_kind != FK_NONE)
    pi->fusion_kind = w_str(w, hlo_fusion_kind_name(in->fusion_kind));
  pi->is_stable = in->is_stable;
  pi->largest = in->largest;
  pi->k = in->topk_k;
  pi->indices_are_sorted = in->indices_are_sorted;
  pi->unique_indices = in->unique_indices;
  pi->exponent_bits = in->exponent_bits;
  pi->mantissa_bits = in->mantissa_bits;
  pi->epsilon = in->epsilon;
  pi->feature_index = in->feature_index;
  if (in->op == OP_FFT) {
    pi->fft_type = (int32_t)in->fft_type;
    W_ILIST(w, pi->n_fft_length, pi->fft_length, in->fft_length);
  }
  if (in->custom_call_target) pi->custom_call_target = w_str(w, in->custom_call_target);
  if (in->backend_config)
    pi->backend_config = w_bytes(w, in->backend_config, strlen(in->backend_config));
  if (in->op_type || in->op_name || in->source_file || in->source_line) {
    Xla__OpMetadata *md = W_NEW(w, Xla__OpMetadata, XLA__OP_METADATA__INIT);
    if (in->op_type) md->op_type = w_str(w, in->op_type);
    if (in->op_name) md->op_name = w_str(w, in->op_name);
    if (in->source_file) md->source_file = w_str(w, in->source_file);
    md->source_line = (int32_t)in->source_line;
    pi->metadata = md;
  }
}

/* The graph edges: operands, control predecessors, called computations. */
static void w_edges(Writer *w, Xla__HloInstructionProto *pi, const HInstr *in) {
  pi->id = w_instr_id(w, in);
  pi->n_operand_ids = (size_t)in->nops;
  pi->operand_ids = hlo_arena_alloc(w->a, sizeof(int64_t) * ((size_t)in->nops + 1));
  for (int i = 0; i < in->nops; i++)
    pi->operand_ids[i] = w_instr_id(w, in->ops[i]);
  pi->n_control_predecessor_ids = (size_t)in->nctrl;
  pi->control_predecessor_ids = hlo_arena_alloc(w->a, sizeof(int64_t) * ((size_t)in->nctrl + 1));
  for (int i = 0; i < in->nctrl; i++)
    pi->control_predecessor_ids[i] = w_instr_id(w, in->ctrl[i]);
  pi->n_called_computation_ids = (size_t)in->ncalls;
  pi->called_computation_ids = hlo_arena_alloc(w->a, sizeof(int64_t) * ((size_t)in->ncalls + 1));
  for (int i = 0; i < in->ncalls; i++)
    pi->called_computation_ids[i] = w_comp_id(w, in->calls[i]);
}

static Xla__HloInstructionProto *w_instr(Writer *w, const HInstr *in) {
  w->instr = in->name;
  Xla__HloInstructionProto *pi =
      W_NEW(w, Xla__HloInstructionProto, XLA__HLO_INSTRUCTION_PROTO__INIT);
  pi->name = w_str(w, in->name);
  pi->opcode = w_str(w, hlo_op_name(in->op));
  if (!(pi->shape = w_shape(w, &in->shape))) return NULL;
  w_edges(w, pi, in);
  if (in->op == OP_IOTA) {
    pi->n_dimensions = 1;
    pi->dimensions = w_ints(w, &in->iota_dim, 1);
  } else {
    W_ILIST(w, pi->n_dimensions, pi->dimensions, in->dims);
  }
  W_ILIST(w, pi->n_dynamic_slice_sizes, pi->dynamic_slice_sizes, in->dslice_sizes);
  if (in->op == OP_CONSTANT) {
    if (!in->literal) {
      wfail(w, "the constant's value was elided ({...}): a proto needs its data "
               "(--elided-constants=zero|random fills it)");
      return NULL;
    }
    if (!(pi->literal = w_literal(w, in->literal))) return NULL;
  }
  if (in->window) pi->window = w_window(w, in->window);
  if (in->conv) pi->convolution_dimension_numbers = w_conv(w, in->conv);
  if (in->dot) pi->dot_dimension_numbers = w_dot(w, in->dot);
  if (in->precision.n || in->dot_alg != DALG_UNSET) {
    Xla__PrecisionConfig *pc = W_NEW(w, Xla__PrecisionConfig, XLA__PRECISION_CONFIG__INIT);
    pc->n_operand_precision = (size_t)in->precision.n;
    pc->operand_precision = hlo_arena_alloc(w->a, sizeof *pc->operand_precision * HLO_MAX_RANK);
    for (int i = 0; i < in->precision.n; i++)
      pc->operand_precision[i] = (Xla__PrecisionConfig__Precision)in->precision.v[i];
    pc->algorithm = (int32_t)in->dot_alg;
    pi->precision_config = pc;
  }
  w_slice_pad(w, pi, in);
  if (in->gather) {
    pi->gather_dimension_numbers = w_gather(w, in->gather);
    W_ILIST(w, pi->n_gather_slice_sizes, pi->gather_slice_sizes, in->gather->slice_sizes);
  }
  if (in->scatter) pi->scatter_dimension_numbers = w_scatter(w, in->scatter);
  w_scalars(w, pi, in);
  return w_raw_attrs(w, pi, in) ? pi : NULL;
}

/* ------------------------------------------------------------------ computations, module */

static Xla__HloComputationProto *w_comp(Writer *w, const HComp *c) {
  w->comp = c->name;
  w->instr = NULL;
  Xla__HloComputationProto *pc =
      W_NEW(w, Xla__HloComputationProto, XLA__HLO_COMPUTATION_PROTO__INIT);
  pc->name = w_str(w, c->name);
  pc->id = w_comp_id(w, c);
  pc->root_id = w_instr_id(w, c->root);
  pc->is_fusion_computation = c->is_fusion;
  pc->n_instructions = (size_t)c->ninstrs;
  pc->instructions = hlo_arena_alloc(w->a, sizeof *pc->instructions * ((size_t)c->ninstrs + 1));
  for (int i = 0; i < c->ninstrs; i++)
    if (!(pc->instructions[i] = w_instr(w, c->instrs[i]))) return NULL;
  w->instr = NULL;
  pc->program_shape = w_program_shape(w, c->nparams, NULL, c->params, &c->root->shape);
  return pc->program_shape ? pc : NULL;
}

/* The module's verbatim attributes: frontend attributes and is_scheduled (a schedule of every
 * computation in instruction order); anything else is an error. */
static bool w_module_raw(Writer *w, Xla__HloModuleProto *mp) {
  const HModule *m = w->m;
  for (int i = 0; i < m->nraw; i++) {
    const char *n = m->raw[i].name, *v = m->raw[i].value;
    if (!strcmp(n, "frontend_attributes")) {
      if (!(mp->frontend_attributes = w_frontend(w, v)))
        return wfail(w, "frontend_attributes=%s cannot be written to a proto", v);
    } else if (!strcmp(n, "is_scheduled")) {
      if (strcmp(v, "true")) continue;
      Xla__HloScheduleProto *sp = W_NEW(w, Xla__HloScheduleProto, XLA__HLO_SCHEDULE_PROTO__INIT);
      sp->n_sequences = (size_t)m->ncomps;
      sp->sequences = hlo_arena_alloc(w->a, sizeof *sp->sequences * ((size_t)m->ncomps + 1));
      for (int c = 0; c < m->ncomps; c++) {
        const HComp *hc = m->comps[c];
        Xla__HloScheduleProto__InstructionSequence *seq =
            W_NEW(w, Xla__HloScheduleProto__InstructionSequence,
                  XLA__HLO_SCHEDULE_PROTO__INSTRUCTION_SEQUENCE__INIT);
        seq->n_instruction_ids = (size_t)hc->ninstrs;
        seq->instruction_ids = hlo_arena_alloc(w->a, sizeof(int64_t) * ((size_t)hc->ninstrs + 1));
        for (int j = 0; j < hc->ninstrs; j++)
          seq->instruction_ids[j] = w_instr_id(w, hc->instrs[j]);
        Xla__HloScheduleProto__SequencesEntry *e =
            W_NEW(w, Xla__HloScheduleProto__SequencesEntry,
                  XLA__HLO_SCHEDULE_PROTO__SEQUENCES_ENTRY__INIT);
        e->key = w_comp_id(w, hc);
        e->value = seq;
        sp->sequences[c] = e;
      }
      mp->schedule = sp;
    } else {
      return wfail(w, "module attribute '%s' has no HloModuleProto field hloc writes", n);
    }
  }
  return true;
}

static bool w_alias(Writer *w, Xla__HloModuleProto *mp) {
  const HModule *m = w->m;
  if (!m->nalias) return true;
  Xla__HloInputOutputAliasProto *al =
      W_NEW(w, Xla__HloInputOutputAliasProto, XLA__HLO_INPUT_OUTPUT_ALIAS_PROTO__INIT);
  al->n_entries = (size_t)m->nalias;
  al->entries = hlo_arena_alloc(w->a, sizeof *al->entries * (size_t)m->nalias);
  for (int i = 0; i < m->nalias; i++) {
    const HAlias *h = &m->alias[i];
    Xla__HloInputOutputAliasProto__AliasEntryProto *e =
        W_NEW(w, Xla__HloInputOutputAliasProto__AliasEntryProto,
              XLA__HLO_INPUT_OUTPUT_ALIAS_PROTO__ALIAS_ENTRY_PROTO__INIT);
    W_ILIST(w, e->n_output_shape_index, e->output_shape_index, h->out_index);
    e->parameter_number = h->param;
    W_ILIST(w, e->n_parameter_shape_index, e->parameter_shape_index, h->param_index);
    e->kind = (Xla__HloInputOutputAliasProto__Kind)h->kind;
    al->entries[i] = e;
  }
  mp->input_output_alias = al;
  return true;
}

static Xla__HloModuleProto *w_module(Writer *w) {
  const HModule *m = w->m;
  w_plan_ids(w);
  Xla__HloModuleProto *mp = W_NEW(w, Xla__HloModuleProto, XLA__HLO_MODULE_PROTO__INIT);
  mp->name = w_str(w, m->name);
  mp->id = m->uid;
  mp->entry_computation_name = w_str(w, m->entry->name);
  mp->entry_computation_id = w_comp_id(w, m->entry);
  mp->n_computations = (size_t)m->ncomps;
  mp->computations = hlo_arena_alloc(w->a, sizeof *mp->computations * ((size_t)m->ncomps + 1));
  for (int i = 0; i < m->ncomps; i++)
    if (!(mp->computations[i] = w_comp(w, m->comps[i]))) return NULL;
  w->comp = w->instr = NULL;
  /* without an entry_computation_layout, the entry's shapes without their layouts: a
     program shape with layouts declares one */
  const HComp *e = m->entry;
  if (m->has_entry_layout) {
    mp->host_program_shape = w_program_shape(w, m->nentry_layout, m->entry_layout_params, e->params,
                                             &m->entry_layout_result);
  } else {
    Shape *ps = hlo_arena_alloc(w->a, sizeof *ps * ((size_t)e->nparams + 1)), rs;
    for (int i = 0; i < e->nparams; i++)
      w_no_layout(w, &ps[i], &e->params[i]->shape);
    w_no_layout(w, &rs, &e->root->shape);
    mp->host_program_shape = w_program_shape(w, e->nparams, ps, e->params, &rs);
  }
  if (!mp->host_program_shape || !w_alias(w, mp) || !w_module_raw(w, mp)) return NULL;
  return mp;
}

bool proto_write_module(const HModule *m, uint8_t **out, size_t *len, HErr *err) {
  Writer w = {.a = hlo_arena_new(), .m = m, .err = err};
  Xla__HloModuleProto *mp = w_module(&w);
  bool ok = mp != NULL;
  if (ok) {
    *len = protobuf_c_message_get_packed_size(&mp->base);
    *out = malloc(*len ? *len : 1);
    HLO_ASSERT(*out);
    HLO_ASSERT(protobuf_c_message_pack(&mp->base, *out) == *len);
  }
  hlo_arena_free(w.a);
  return ok;
}
