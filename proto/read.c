/* proto/read.c: serialized XLA HloModuleProto -> hloc IR.
 *
 * Decoding is done by protobuf-c with the schema in xla.proto, in three steps:
 *
 * 1. Framing. The bytes may be a bare HloModuleProto, an HloProto (field 1 = module; what
 *    --xla_dump_hlo_as_proto writes) or an HloSnapshot (field 1 = HloProto). The wire format
 *    carries no type, and each of the three can often be decoded "successfully" as another
 *    (a wrapper's field 1 reads as the module's name string, and a module's name string can
 *    occasionally read as a message), so we try every interpretation and score the module it
 *    yields: 2 when it has computations and its entry_computation_id or _name names one of
 *    them, 1 when it only has computations, 0 otherwise. The best score wins (ties go to the
 *    bare module, then HloProto); a score of 2 stops the search early. Before protobuf-c
 *    sees any bytes, a schema-driven walk over the wire format checks the framing and bounds
 *    message nesting (protobuf-c recurses without limit, so a crafted deep nesting would
 *    otherwise overflow the stack).
 *
 * 2. Graph order. Computations are emitted callees first: a DFS post-order over
 *    called_computation_ids, which keeps the file order when it is already valid and reports
 *    call cycles. Inside each computation, ids are opaque 64-bit keys resolved through an
 *    open-addressing hash map; instructions are emitted in a DFS post-order over operands and
 *    control predecessors (again stable when the file order is valid; cycles are errors).
 *
 * 3. Conversion. Shapes (element type, dims, minor_to_major, layout extras, tuples of bounded
 *    depth), literals (the data field selected by the element type, count-checked, reordered
 *    to row-major when the literal's layout is not the default, 16-bit types read
 *    little-endian, complex ones from c64s / c128s as interleaved real and imaginary parts) and
 *    every instruction attribute the IR models. Shardings, frontend attributes, channel ids and
 *    a custom-call's side effect become verbatim attributes in their HLO text spelling; a
 *    schedule becomes the module's is_scheduled. Entry layout comes from host_program_shape
 *    (or the entry's program_shape), aliasing from input_output_alias.
 *
 * Every inconsistency is one located error (file, computation, instruction). Temporary
 * tables live in a scratch arena freed on return; the decoded message is freed as well, so
 * the module owns copies of everything it keeps. */
#include "proto.h"

#include <stdlib.h>
#include <string.h>

#include "xla.pb-c.h"

#define PROTO_MAX_NEST 64  /* message nesting accepted by the framing check */
#define PROTO_MAX_TUPLE 32 /* tuple shape / tuple literal nesting */

/* ------------------------------------------------------------------ errors */

typedef struct Reader {
  HModule *m;        /* module being built */
  HArena *tmp;       /* scratch tables, freed on return */
  const char *file;  /* input name for messages */
  const char *comp;  /* computation being read (messages), NULL outside */
  const char *instr; /* instruction being read (messages), NULL outside */
  HErr *err;         /* where the first error goes */
} Reader;

static bool fail(Reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool fail(Reader *r, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  hlo_verr(r->err, r->file, r->comp, r->instr, fmt, ap);
  va_end(ap);
  return false;
}

/* ------------------------------------------------------------------ framing check */

static bool wire_varint(const uint8_t **p, const uint8_t *end, uint64_t *v) {
  uint64_t x = 0;
  for (int shift = 0; shift < 70; shift += 7) {
    if (*p >= end) return false;
    uint8_t b = *(*p)++;
    x |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *v = x;
      return true;
    }
  }
  return false; /* more than 10 bytes */
}

/* Walk the wire format of a message of type d: every tag, length and fixed-size value must
 * lie inside the buffer, groups are refused, and fields the schema declares as messages are
 * checked recursively up to PROTO_MAX_NEST levels. Unknown fields are only framed. */
static bool wire_check(const uint8_t *p, size_t n, const ProtobufCMessageDescriptor *d, int depth) {
  if (depth > PROTO_MAX_NEST) return false;
  const uint8_t *end = p + n;
  while (p < end) {
    uint64_t key, v;
    if (!wire_varint(&p, end, &key)) return false;
    uint64_t num = key >> 3;
    if (num == 0 || num > 0x1fffffff) return false;
    switch (key & 7) {
    case 0:
      if (!wire_varint(&p, end, &v)) return false;
      break;
    case 1:
      if ((size_t)(end - p) < 8) return false;
      p += 8;
      break;
    case 5:
      if ((size_t)(end - p) < 4) return false;
      p += 4;
      break;
    case 2: {
      if (!wire_varint(&p, end, &v) || v > (uint64_t)(end - p)) return false;
      const ProtobufCFieldDescriptor *f =
          d ? protobuf_c_message_descriptor_get_field(d, (unsigned)num) : NULL;
      if (f && f->type == PROTOBUF_C_TYPE_MESSAGE &&
          !wire_check(p, (size_t)v, f->descriptor, depth + 1))
        return false;
      p += v;
      break;
    }
    default: return false; /* groups (3, 4) and invalid wire types */
    }
  }
  return true;
}

/* ------------------------------------------------------------------ hash maps */

/* int64 id -> index, open addressing with linear probing; vals[i] < 0 marks a free slot. */
typedef struct IdMap {
  int64_t *keys; /* slot keys */
  int32_t *vals; /* slot values, -1 when free */
  size_t mask;   /* capacity - 1 (capacity is a power of two) */
} IdMap;

static uint64_t mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  return x ^ (x >> 33);
}

static void idmap_init(IdMap *h, HArena *a, size_t n) {
  size_t cap = 16;
  while (cap < 2 * n)
    cap *= 2;
  h->keys = hlo_arena_alloc(a, cap * sizeof *h->keys);
  h->vals = hlo_arena_alloc(a, cap * sizeof *h->vals);
  memset(h->vals, 0xff, cap * sizeof *h->vals);
  h->mask = cap - 1;
}

static int idmap_get(const IdMap *h, int64_t k) {
  for (size_t i = mix64((uint64_t)k) & h->mask;; i = (i + 1) & h->mask) {
    if (h->vals[i] < 0) return -1;
    if (h->keys[i] == k) return h->vals[i];
  }
}

/* false when k is already present (the map then keeps the first value) */
static bool idmap_put(IdMap *h, int64_t k, int v) {
  size_t i = mix64((uint64_t)k) & h->mask;
  for (; h->vals[i] >= 0; i = (i + 1) & h->mask)
    if (h->keys[i] == k) return false;
  h->keys[i] = k;
  h->vals[i] = v;
  return true;
}

/* Set of strings (instruction and computation names), same scheme. */
typedef struct NameSet {
  const char **keys; /* slot keys, NULL when free */
  size_t mask;       /* capacity - 1 */
} NameSet;

static void nameset_init(NameSet *s, HArena *a, size_t n) {
  size_t cap = 16;
  while (cap < 2 * n)
    cap *= 2;
  s->keys = hlo_arena_alloc(a, cap * sizeof *s->keys);
  s->mask = cap - 1;
}

/* false when name is already present */
static bool nameset_add(NameSet *s, const char *name) {
  size_t i = mix64(hlo_hash_bytes(HLO_HASH_START, name, strlen(name))) & s->mask;
  for (; s->keys[i]; i = (i + 1) & s->mask)
    if (!strcmp(s->keys[i], name)) return false;
  s->keys[i] = name;
  return true;
}

/* ------------------------------------------------------------------ dependency order */

/* Graph in compressed rows: the edges of node v are adj[start[v] .. start[v+1]). */
typedef struct Graph {
  int n;      /* node count */
  int *start; /* n + 1 row offsets */
  int *adj;   /* edge targets (nodes that must come first) */
} Graph;

/* Post-order DFS in node order: order[] lists every node after all its edge targets, and is
 * the identity when every edge already points backwards. Iterative, so deep chains do not
 * exhaust the stack. false with *cycle = a node on a cycle. */
static bool topo_order(HArena *a, const Graph *g, int *order, int *cycle) {
  int n = g->n, k = 0, sp = 0;
  uint8_t *state = hlo_arena_alloc(a, (size_t)n + 1); /* 0 new, 1 on stack, 2 done */
  int *pos = hlo_arena_alloc(a, sizeof(int) * ((size_t)n + 1));
  int *stack = hlo_arena_alloc(a, sizeof(int) * ((size_t)n + 1));
  for (int s = 0; s < n; s++) {
    if (state[s]) continue;
    state[s] = 1;
    pos[s] = g->start[s];
    stack[sp++] = s;
    while (sp) {
      int v = stack[sp - 1];
      if (pos[v] < g->start[v + 1]) {
        int w = g->adj[pos[v]++];
        if (state[w] == 1) {
          *cycle = w;
          return false;
        }
        if (state[w] == 0) {
          state[w] = 1;
          pos[w] = g->start[w];
          stack[sp++] = w;
        }
      } else {
        state[v] = 2;
        order[k++] = v;
        sp--;
      }
    }
  }
  return true;
}

/* ------------------------------------------------------------------ text builder */

/* Growable string in the scratch arena, for verbatim attribute values. */
typedef struct SBuf {
  HArena *a;  /* where the storage lives */
  char *s;    /* NUL-terminated text */
  size_t n;   /* length */
  size_t cap; /* capacity including the NUL */
} SBuf;

static void sb_putn(SBuf *b, const char *s, size_t n) {
  if (b->n + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->n + n + 1)
      cap *= 2;
    char *ns = hlo_arena_alloc(b->a, cap);
    if (b->n) memcpy(ns, b->s, b->n);
    b->s = ns;
    b->cap = cap;
  }
  memcpy(b->s + b->n, s, n);
  b->n += n;
  b->s[b->n] = 0;
}

static void sb_puts(SBuf *b, const char *s) { sb_putn(b, s, strlen(s)); }

static void sb_int(SBuf *b, int64_t v) {
  char t[32];
  snprintf(t, sizeof t, "%lld", (long long)v);
  sb_puts(b, t);
}

/* ------------------------------------------------------------------ shapes */

static bool read_shape(Reader *r, const Xla__ShapeProto *sp, Shape *out, int depth);

/* Layout extras as HLO text prints them after ':' (tiles, element bits, memory space). */
static const char *layout_extra(Reader *r, const Xla__LayoutProto *lp) {
  if (!lp->n_tiles && !lp->element_size_in_bits && !lp->memory_space) return NULL;
  SBuf b = {.a = r->tmp};
  if (lp->n_tiles) sb_puts(&b, "T");
  for (size_t i = 0; i < lp->n_tiles; i++) {
    sb_puts(&b, "(");
    for (size_t j = 0; j < lp->tiles[i]->n_dimensions; j++) {
      if (j) sb_puts(&b, ",");
      int64_t d = lp->tiles[i]->dimensions[j];
      if (d == INT64_MIN) /* XLA's combine-dimension marker */
        sb_puts(&b, "*");
      else
        sb_int(&b, d);
    }
    sb_puts(&b, ")");
  }
  if (lp->element_size_in_bits) {
    sb_puts(&b, "E(");
    sb_int(&b, lp->element_size_in_bits);
    sb_puts(&b, ")");
  }
  if (lp->memory_space) {
    sb_puts(&b, "S(");
    sb_int(&b, lp->memory_space);
    sb_puts(&b, ")");
  }
  return hlo_arena_strdup(r->m->arena, b.s);
}

static bool read_shape(Reader *r, const Xla__ShapeProto *sp, Shape *out, int depth) {
  memset(out, 0, sizeof *out);
  if (!sp) return fail(r, "missing shape");
  int et = (int)sp->element_type;
  DType dt = hlo_dtype_from_proto(et);
  if (dt == DT_INVALID) return fail(r, "unsupported element type %s", hlo_proto_type_name(et));
  out->dt = dt;
  if (dt == DT_TUPLE) {
    if (depth >= PROTO_MAX_TUPLE)
      return fail(r, "tuple shape nested deeper than %d levels", PROTO_MAX_TUPLE);
    if (sp->n_tuple_shapes > (size_t)INT32_MAX) return fail(r, "tuple shape too large");
    out->ntuple = (int)sp->n_tuple_shapes;
    out->tuple = hlo_arena_alloc(r->m->arena, sizeof(Shape) * (sp->n_tuple_shapes + 1));
    for (size_t i = 0; i < sp->n_tuple_shapes; i++)
      if (!read_shape(r, sp->tuple_shapes[i], &out->tuple[i], depth + 1)) return false;
    return true;
  }
  if (sp->n_dimensions > HLO_MAX_RANK)
    return fail(r, "rank %zu above the maximum rank %d", sp->n_dimensions, HLO_MAX_RANK);
  if (dt == DT_TOKEN && sp->n_dimensions) return fail(r, "token shape with dimensions");
  for (size_t i = 0; i < sp->n_is_dynamic_dimension; i++)
    if (sp->is_dynamic_dimension[i]) return fail(r, "dynamic dimension %zu is not supported", i);
  out->rank = (int)sp->n_dimensions;
  for (int i = 0; i < out->rank; i++) {
    out->dims[i] = sp->dimensions[i];
    if (out->dims[i] < 0) return fail(r, "negative dimension %lld", (long long)out->dims[i]);
  }
  /* sizes must fit in int64 bytes, so element counts and offsets never overflow later */
  int64_t bytes = (int64_t)(hlo_dtype_size(dt) ? hlo_dtype_size(dt) : 1);
  for (int i = 0; i < out->rank; i++)
    if (__builtin_mul_overflow(bytes, out->dims[i], &bytes))
      return fail(r, "shape %s is too large", hlo_shape_str(r->tmp, out));
  const Xla__LayoutProto *lp = sp->layout;
  if (lp && dt != DT_TOKEN) {
    if (lp->n_minor_to_major != (size_t)out->rank)
      return fail(r, "layout has %zu minor_to_major entries for a rank-%d shape",
                  lp->n_minor_to_major, out->rank);
    bool seen[HLO_MAX_RANK] = {false};
    for (int i = 0; i < out->rank; i++) {
      int64_t d = lp->minor_to_major[i];
      if (d < 0 || d >= out->rank || seen[d])
        return fail(r, "layout minor_to_major is not a permutation of 0..%d", out->rank - 1);
      seen[d] = true;
      out->m2m[i] = (int8_t)d;
    }
    out->has_layout = true;
    out->layout_extra = layout_extra(r, lp);
  }
  return true;
}

/* ------------------------------------------------------------------ literals */

static uint16_t le16(const uint8_t *p) { return (uint16_t)(p[0] | (uint16_t)p[1] << 8); }

/* Element count of the data field the element type selects. */
static size_t literal_count(const Xla__LiteralProto *lp, DType dt) {
  switch (dt) {
  case DT_PRED: return lp->n_preds;
  case DT_S8: return lp->s8s.len;
  case DT_U8: return lp->u8s.len;
  case DT_F8E4M3FN: return lp->f8e4m3fns.len;
  case DT_F8E5M2: return lp->f8e5m2s.len;
  case DT_S4: return lp->s4s.len;
  case DT_U4: return lp->u4s.len;
  case DT_S16: return lp->s16s.len % 2 ? SIZE_MAX : lp->s16s.len / 2;
  case DT_U16: return lp->u16s.len % 2 ? SIZE_MAX : lp->u16s.len / 2;
  case DT_F16: return lp->f16s.len % 2 ? SIZE_MAX : lp->f16s.len / 2;
  case DT_BF16: return lp->bf16s.len % 2 ? SIZE_MAX : lp->bf16s.len / 2;
  case DT_S32: return lp->n_s32s;
  case DT_U32: return lp->n_u32s;
  case DT_S64: return lp->n_s64s;
  case DT_U64: return lp->n_u64s;
  case DT_F32: return lp->n_f32s;
  case DT_F64: return lp->n_f64s;
  case DT_C64: return lp->n_c64s % 2 ? SIZE_MAX : lp->n_c64s / 2; /* interleaved re, im */
  case DT_C128: return lp->n_c128s % 2 ? SIZE_MAX : lp->n_c128s / 2;
  case DT_TOKEN:
  case DT_TUPLE:
  case DT_INVALID:
  case DT_COUNT: return 0;
  }
  return 0;
}

/* Copy n elements of the selected field into dst (physical order, native element type). */
static void literal_copy(const Xla__LiteralProto *lp, DType dt, void *dst, size_t n) {
  switch (dt) {
  case DT_PRED:
    for (size_t i = 0; i < n; i++)
      ((uint8_t *)dst)[i] = lp->preds[i] ? 1 : 0;
    return;
  case DT_S8: memcpy(dst, lp->s8s.data, n); return;
  case DT_U8: memcpy(dst, lp->u8s.data, n); return;
  case DT_F8E4M3FN: memcpy(dst, lp->f8e4m3fns.data, n); return;
  case DT_F8E5M2: memcpy(dst, lp->f8e5m2s.data, n); return;
  case DT_S4:
  case DT_U4:
    /* a byte per element: its low 4 bits, extended as the IR holds them */
    memcpy(dst, dt == DT_S4 ? lp->s4s.data : lp->u4s.data, n);
    for (size_t i = 0; i < n; i++)
      hlo_store_i64(dt, dst, (int64_t)i, hlo_load_i64(dt, dst, (int64_t)i));
    return;
  case DT_S16:
  case DT_U16:
  case DT_F16:
  case DT_BF16: {
    const uint8_t *src = dt == DT_S16   ? lp->s16s.data
                         : dt == DT_U16 ? lp->u16s.data
                         : dt == DT_F16 ? lp->f16s.data
                                        : lp->bf16s.data;
    for (size_t i = 0; i < n; i++)
      ((uint16_t *)dst)[i] = le16(src + 2 * i);
    return;
  }
  case DT_S32: memcpy(dst, lp->s32s, n * 4); return;
  case DT_U32: memcpy(dst, lp->u32s, n * 4); return;
  case DT_S64: memcpy(dst, lp->s64s, n * 8); return;
  case DT_U64: memcpy(dst, lp->u64s, n * 8); return;
  case DT_F32: memcpy(dst, lp->f32s, n * 4); return;
  case DT_F64: memcpy(dst, lp->f64s, n * 8); return;
  case DT_C64: memcpy(dst, lp->c64s, n * 8); return;
  case DT_C128: memcpy(dst, lp->c128s, n * 16); return;
  case DT_TOKEN:
  case DT_TUPLE:
  case DT_INVALID:
  case DT_COUNT: return;
  }
}

/* Literal of shape s (the instruction's shape) from lp. The literal's own shape, when given,
 * must agree in type and dims; its layout says in which order the data is stored. */
static Literal *read_literal(Reader *r, const Xla__LiteralProto *lp, const Shape *s, int depth) {
  HArena *a = r->m->arena;
  Shape ls;
  if (lp->shape) {
    if (!read_shape(r, lp->shape, &ls, depth)) return NULL;
    if (!hlo_shape_eq(&ls, s)) {
      fail(r, "literal shape %s does not match instruction shape %s", hlo_shape_str(r->tmp, &ls),
           hlo_shape_str(r->tmp, s));
      return NULL;
    }
  } else {
    ls = *s;
  }
  if (s->dt == DT_TUPLE) {
    if (lp->n_tuple_literals != (size_t)s->ntuple) {
      fail(r, "tuple literal has %zu elements, shape %s needs %d", lp->n_tuple_literals,
           hlo_shape_str(r->tmp, s), s->ntuple);
      return NULL;
    }
    Literal *l = hlo_arena_alloc(a, sizeof *l);
    hlo_shape_copy(a, &l->shape, s);
    l->elems = hlo_arena_alloc(a, sizeof(Literal *) * ((size_t)s->ntuple + 1));
    for (int i = 0; i < s->ntuple; i++) {
      l->elems[i] = read_literal(r, lp->tuple_literals[i], &s->tuple[i], depth + 1);
      if (!l->elems[i]) return NULL;
    }
    return l;
  }
  int64_t want = s->dt == DT_TOKEN ? 0 : hlo_shape_elems(s);
  size_t have = literal_count(lp, s->dt);
  if (have != (size_t)want) {
    if (have == SIZE_MAX)
      fail(r, "literal data for %s has an odd number of bytes", hlo_dtype_name(s->dt));
    else
      fail(r, "literal has %zu elements, shape %s needs %lld", have, hlo_shape_str(r->tmp, s),
           (long long)want);
    return NULL;
  }
  Literal *l = hlo_literal_new(a, s);
  if (!want) return l;
  if (hlo_layout_is_default(&ls) || ls.rank <= 1) {
    literal_copy(lp, s->dt, l->data, (size_t)want);
  } else {
    void *phys = hlo_arena_alloc(r->tmp, hlo_shape_bytes(s));
    literal_copy(lp, s->dt, phys, (size_t)want);
    hlo_literal_from_layout(&ls, phys, l->data);
  }
  return l;
}

/* ------------------------------------------------------------------ attributes */

static bool read_ilist(Reader *r, IList *dst, const int64_t *v, size_t n, const char *what) {
  if (n > HLO_MAX_RANK)
    return fail(r, "%s has %zu entries, above the maximum rank %d", what, n, HLO_MAX_RANK);
  dst->n = (int)n;
  for (size_t i = 0; i < n; i++)
    dst->v[i] = v[i];
  return true;
}

static const char *opt_str(HArena *a, const char *s) {
  return s && *s ? hlo_arena_strdup(a, s) : NULL;
}

/* Sharding in HLO text form ("{replicated}", "{maximal device=0}", tuples, explicit device
 * tiles); false for forms hloc does not spell (they are dropped: single-device compiler). */
static bool sharding_text(SBuf *b, const Xla__OpSharding *s, int depth) {
  if (depth > PROTO_MAX_TUPLE) return false;
  switch (s->type) {
  case XLA__OP_SHARDING__TYPE__REPLICATED: sb_puts(b, "{replicated}"); return true;
  case XLA__OP_SHARDING__TYPE__MANUAL: sb_puts(b, "{manual}"); return true;
  case XLA__OP_SHARDING__TYPE__MAXIMAL:
    if (s->n_tile_assignment_devices != 1) return false;
    sb_puts(b, "{maximal device=");
    sb_int(b, s->tile_assignment_devices[0]);
    sb_puts(b, "}");
    return true;
  case XLA__OP_SHARDING__TYPE__TUPLE:
    sb_puts(b, "{");
    for (size_t i = 0; i < s->n_tuple_shardings; i++) {
      if (i) sb_puts(b, ", ");
      if (!sharding_text(b, s->tuple_shardings[i], depth + 1)) return false;
    }
    sb_puts(b, "}");
    return true;
  case XLA__OP_SHARDING__TYPE__OTHER:
    if (!s->n_tile_assignment_dimensions || !s->n_tile_assignment_devices) return false;
    sb_puts(b, "{devices=[");
    for (size_t i = 0; i < s->n_tile_assignment_dimensions; i++) {
      if (i) sb_puts(b, ",");
      sb_int(b, s->tile_assignment_dimensions[i]);
    }
    sb_puts(b, "]");
    for (size_t i = 0; i < s->n_tile_assignment_devices; i++) {
      if (i) sb_puts(b, ",");
      sb_int(b, s->tile_assignment_devices[i]);
    }
    if (s->replicate_on_last_tile_dim) sb_puts(b, " last_tile_dim_replicate");
    sb_puts(b, "}");
    return true;
  case XLA__OP_SHARDING__TYPE__UNKNOWN:
  case XLA__OP_SHARDING__TYPE__UNREDUCED:
  case _XLA__OP_SHARDING__TYPE_IS_INT_SIZE: return false;
  }
  return false;
}

static int cmp_entry_key(const void *a, const void *b) {
  const Xla__FrontendAttributes__MapEntry *x = *(Xla__FrontendAttributes__MapEntry *const *)a;
  const Xla__FrontendAttributes__MapEntry *y = *(Xla__FrontendAttributes__MapEntry *const *)b;
  return strcmp(x->key, y->key);
}

/* frontend_attributes={k="v",...}, keys sorted as XLA prints them; values that are
 * themselves brace-delimited dictionaries are printed bare. */
static const char *frontend_text(Reader *r, const Xla__FrontendAttributes *fa) {
  if (!fa || !fa->n_map) return NULL;
  Xla__FrontendAttributes__MapEntry **e = hlo_arena_alloc(r->tmp, sizeof *e * fa->n_map);
  memcpy(e, fa->map, sizeof *e * fa->n_map);
  qsort(e, fa->n_map, sizeof *e, cmp_entry_key);
  SBuf b = {.a = r->tmp};
  sb_puts(&b, "{");
  for (size_t i = 0; i < fa->n_map; i++) {
    if (i) sb_puts(&b, ",");
    sb_puts(&b, e[i]->key);
    sb_puts(&b, "=");
    const char *v = e[i]->value;
    size_t n = strlen(v);
    if (n >= 2 && v[0] == '{' && v[n - 1] == '}') {
      sb_puts(&b, v);
      continue;
    }
    sb_puts(&b, "\"");
    for (const char *p = v; *p; p++) {
      if (*p == '"' || *p == '\\') sb_puts(&b, "\\");
      sb_putn(&b, p, 1);
    }
    sb_puts(&b, "\"");
  }
  sb_puts(&b, "}");
  return hlo_arena_strdup(r->m->arena, b.s);
}

/* Verbatim attributes of an instruction, in the order HLO text prints them. */
static void read_raw_attrs(Reader *r, HInstr *in, const Xla__HloInstructionProto *pi) {
  HAttr attrs[4];
  int n = 0;
  HArena *a = r->m->arena;
  if (pi->sharding) {
    SBuf b = {.a = r->tmp};
    if (sharding_text(&b, pi->sharding, 0))
      attrs[n++] = (HAttr){"sharding", hlo_arena_strdup(a, b.s)};
  }
  const char *fa = frontend_text(r, pi->frontend_attributes);
  if (fa) attrs[n++] = (HAttr){"frontend_attributes", fa};
  if (pi->channel_id)
    attrs[n++] = (HAttr){"channel_id", hlo_arena_printf(a, "%lld", (long long)pi->channel_id)};
  if (pi->custom_call_has_side_effect) attrs[n++] = (HAttr){"custom_call_has_side_effect", "true"};
  if (!n) return;
  in->nraw = n;
  in->raw = hlo_arena_memdup(a, attrs, sizeof(HAttr) * (size_t)n);
}

static bool read_window(Reader *r, HInstr *in, const Xla__Window *w) {
  if (w->n_dimensions > HLO_MAX_RANK)
    return fail(r, "window has %zu dimensions, above the maximum rank %d", w->n_dimensions,
                HLO_MAX_RANK);
  Window *win = hlo_arena_alloc(r->m->arena, sizeof *win);
  win->n = (int)w->n_dimensions;
  for (int i = 0; i < win->n; i++) {
    const Xla__WindowDimension *d = w->dimensions[i];
    /* proto3 cannot tell 0 from absent: strides and dilations default to 1 */
    win->d[i] = (WinDim){.size = d->size,
                         .stride = d->stride ? d->stride : 1,
                         .pad_lo = d->padding_low,
                         .pad_hi = d->padding_high,
                         .win_dil = d->window_dilation ? d->window_dilation : 1,
                         .base_dil = d->base_dilation ? d->base_dilation : 1,
                         .reversal = d->window_reversal};
  }
  in->window = win;
  return true;
}

static bool read_attrs(Reader *r, HInstr *in, const Xla__HloInstructionProto *pi) {
  HArena *a = r->m->arena;
  in->param_num = pi->parameter_number;
  in->tuple_index = pi->tuple_index;
  if (in->op == OP_IOTA) {
    if (pi->n_dimensions != 1)
      return fail(r, "iota needs exactly one dimension, has %zu", pi->n_dimensions);
    in->iota_dim = pi->dimensions[0];
  } else if (!read_ilist(r, &in->dims, pi->dimensions, pi->n_dimensions, "dimensions")) {
    return false;
  }
  if (!read_ilist(r, &in->dslice_sizes, pi->dynamic_slice_sizes, pi->n_dynamic_slice_sizes,
                  "dynamic_slice_sizes"))
    return false;

  if (in->op == OP_CONSTANT) {
    if (!pi->literal) return fail(r, "constant without a literal");
    in->literal = read_literal(r, pi->literal, &in->shape, 0);
    if (!in->literal) return false;
  }
  if (pi->window && !read_window(r, in, pi->window)) return false;

  if (pi->convolution_dimension_numbers) {
    const Xla__ConvolutionDimensionNumbers *c = pi->convolution_dimension_numbers;
    ConvDims *cd = hlo_arena_alloc(a, sizeof *cd);
    cd->in_batch = c->input_batch_dimension;
    cd->in_feat = c->input_feature_dimension;
    cd->k_in = c->kernel_input_feature_dimension;
    cd->k_out = c->kernel_output_feature_dimension;
    cd->out_batch = c->output_batch_dimension;
    cd->out_feat = c->output_feature_dimension;
    if (!read_ilist(r, &cd->in_sp, c->input_spatial_dimensions, c->n_input_spatial_dimensions,
                    "input_spatial_dimensions") ||
        !read_ilist(r, &cd->k_sp, c->kernel_spatial_dimensions, c->n_kernel_spatial_dimensions,
                    "kernel_spatial_dimensions") ||
        !read_ilist(r, &cd->out_sp, c->output_spatial_dimensions, c->n_output_spatial_dimensions,
                    "output_spatial_dimensions"))
      return false;
    in->conv = cd;
  }
  in->feature_groups = pi->feature_group_count ? pi->feature_group_count : 1;
  in->batch_groups = pi->batch_group_count ? pi->batch_group_count : 1;

  if (pi->dot_dimension_numbers) {
    const Xla__DotDimensionNumbers *d = pi->dot_dimension_numbers;
    DotDims *dd = hlo_arena_alloc(a, sizeof *dd);
    if (!read_ilist(r, &dd->lhs_batch, d->lhs_batch_dimensions, d->n_lhs_batch_dimensions,
                    "lhs_batch_dimensions") ||
        !read_ilist(r, &dd->rhs_batch, d->rhs_batch_dimensions, d->n_rhs_batch_dimensions,
                    "rhs_batch_dimensions") ||
        !read_ilist(r, &dd->lhs_contract, d->lhs_contracting_dimensions,
                    d->n_lhs_contracting_dimensions, "lhs_contracting_dimensions") ||
        !read_ilist(r, &dd->rhs_contract, d->rhs_contracting_dimensions,
                    d->n_rhs_contracting_dimensions, "rhs_contracting_dimensions"))
      return false;
    in->dot = dd;
  }
  if (pi->precision_config) {
    const Xla__PrecisionConfig *p = pi->precision_config;
    if (p->n_operand_precision > HLO_MAX_RANK)
      return fail(r, "operand_precision has %zu entries", p->n_operand_precision);
    /* all-DEFAULT is what HLO text leaves out: keep it as "not given" like the text parser */
    bool any = false;
    for (size_t i = 0; i < p->n_operand_precision; i++) {
      in->precision.v[i] = (int64_t)p->operand_precision[i];
      any |= in->precision.v[i] != 0;
    }
    in->precision.n = any ? (int)p->n_operand_precision : 0;
    if (p->algorithm < 0 || p->algorithm >= DALG_COUNT)
      return fail(r, "unknown dot algorithm %d", (int)p->algorithm);
    in->dot_alg = in->op == OP_DOT ? (DotAlg)p->algorithm : DALG_UNSET;
  }

  if (pi->n_slice_dimensions) {
    if (pi->n_slice_dimensions > HLO_MAX_RANK)
      return fail(r, "slice_dimensions has %zu entries, above the maximum rank %d",
                  pi->n_slice_dimensions, HLO_MAX_RANK);
    SliceDims *sd = hlo_arena_alloc(a, sizeof *sd);
    sd->n = (int)pi->n_slice_dimensions;
    for (int i = 0; i < sd->n; i++) {
      const Xla__HloInstructionProto__SliceDimensions *d = pi->slice_dimensions[i];
      sd->start[i] = d->start;
      sd->limit[i] = d->limit;
      sd->stride[i] = d->stride ? d->stride : 1;
    }
    in->slice = sd;
  }
  if (pi->padding_config) {
    const Xla__PaddingConfig *p = pi->padding_config;
    if (p->n_dimensions > HLO_MAX_RANK)
      return fail(r, "padding_config has %zu dimensions, above the maximum rank %d",
                  p->n_dimensions, HLO_MAX_RANK);
    PadDims *pd = hlo_arena_alloc(a, sizeof *pd);
    pd->n = (int)p->n_dimensions;
    for (int i = 0; i < pd->n; i++) {
      pd->lo[i] = p->dimensions[i]->edge_padding_low;
      pd->hi[i] = p->dimensions[i]->edge_padding_high;
      pd->interior[i] = p->dimensions[i]->interior_padding;
    }
    in->pad = pd;
  }
  if (pi->gather_dimension_numbers || pi->n_gather_slice_sizes) {
    GatherDims *gd = hlo_arena_alloc(a, sizeof *gd);
    const Xla__GatherDimensionNumbers *g = pi->gather_dimension_numbers;
    if (g && (!read_ilist(r, &gd->offset_dims, g->offset_dims, g->n_offset_dims, "offset_dims") ||
              !read_ilist(r, &gd->collapsed_slice_dims, g->collapsed_slice_dims,
                          g->n_collapsed_slice_dims, "collapsed_slice_dims") ||
              !read_ilist(r, &gd->start_index_map, g->start_index_map, g->n_start_index_map,
                          "start_index_map") ||
              !read_ilist(r, &gd->operand_batching_dims, g->operand_batching_dims,
                          g->n_operand_batching_dims, "operand_batching_dims") ||
              !read_ilist(r, &gd->start_indices_batching_dims, g->start_indices_batching_dims,
                          g->n_start_indices_batching_dims, "start_indices_batching_dims")))
      return false;
    if (g) gd->index_vector_dim = g->index_vector_dim;
    if (!read_ilist(r, &gd->slice_sizes, pi->gather_slice_sizes, pi->n_gather_slice_sizes,
                    "gather_slice_sizes"))
      return false;
    in->gather = gd;
  }
  if (pi->scatter_dimension_numbers) {
    const Xla__ScatterDimensionNumbers *s = pi->scatter_dimension_numbers;
    ScatterDims *sd = hlo_arena_alloc(a, sizeof *sd);
    if (!read_ilist(r, &sd->update_window_dims, s->update_window_dims, s->n_update_window_dims,
                    "update_window_dims") ||
        !read_ilist(r, &sd->inserted_window_dims, s->inserted_window_dims,
                    s->n_inserted_window_dims, "inserted_window_dims") ||
        !read_ilist(r, &sd->scatter_dims_to_operand_dims, s->scatter_dims_to_operand_dims,
                    s->n_scatter_dims_to_operand_dims, "scatter_dims_to_operand_dims") ||
        !read_ilist(r, &sd->input_batching_dims, s->input_batching_dims, s->n_input_batching_dims,
                    "input_batching_dims") ||
        !read_ilist(r, &sd->scatter_indices_batching_dims, s->scatter_indices_batching_dims,
                    s->n_scatter_indices_batching_dims, "scatter_indices_batching_dims"))
      return false;
    sd->index_vector_dim = s->index_vector_dim;
    in->scatter = sd;
  }

  const char *dir = pi->comparison_direction;
  if (dir && *dir && !hlo_cmp_dir_from_name(dir, strlen(dir), &in->cmp_dir))
    return fail(r, "unknown comparison direction '%s'", dir);
  if (in->op == OP_COMPARE && (!dir || !*dir)) return fail(r, "compare without a direction");
  const char *ct = pi->comparison_type;
  if (ct && *ct && !hlo_cmp_type_from_name(ct, strlen(ct), &in->cmp_type))
    return fail(r, "unknown comparison type '%s'", ct);
  /* XLA writes the type even when it is the default for the operands; HLO text omits it */
  if (in->op == OP_COMPARE && in->nops > 0) {
    DType odt = in->ops[0]->shape.dt;
    CmpType def = hlo_dtype_is_float(odt) || hlo_dtype_is_complex(odt) ? CMPT_FLOAT
                  : hlo_dtype_kind(odt) == DK_SINT                     ? CMPT_SIGNED
                                                                       : CMPT_UNSIGNED;
    if (in->cmp_type == def) in->cmp_type = CMPT_DEFAULT;
  }
  const char *fk = pi->fusion_kind;
  if (fk && *fk && !hlo_fusion_kind_from_name(fk, strlen(fk), &in->fusion_kind))
    return fail(r, "unknown fusion kind '%s'", fk);

  if (in->op == OP_FFT) {
    if (pi->fft_type < 0 || pi->fft_type > FFT_IRFFT)
      return fail(r, "unknown fft_type %d", pi->fft_type);
    in->fft_type = (FftType)pi->fft_type;
    if (!read_ilist(r, &in->fft_length, pi->fft_length, pi->n_fft_length, "fft_length"))
      return false;
  }
  in->is_stable = pi->is_stable;
  in->largest = pi->largest;
  in->topk_k = pi->k;
  if (in->op == OP_TOPK && in->topk_k < 0)
    return fail(r, "topk k %lld is negative", (long long)pi->k);
  in->indices_are_sorted = pi->indices_are_sorted;
  in->unique_indices = pi->unique_indices;
  in->exponent_bits = pi->exponent_bits;
  in->mantissa_bits = pi->mantissa_bits;
  in->epsilon = pi->epsilon;
  in->feature_index = pi->feature_index;
  in->custom_call_target = opt_str(a, pi->custom_call_target);
  if (pi->backend_config.len)
    in->backend_config =
        hlo_arena_strndup(a, (const char *)pi->backend_config.data, pi->backend_config.len);
  if (pi->metadata) {
    in->op_type = opt_str(a, pi->metadata->op_type);
    in->op_name = opt_str(a, pi->metadata->op_name);
    in->source_file = opt_str(a, pi->metadata->source_file);
    in->source_line = pi->metadata->source_line;
  }
  read_raw_attrs(r, in, pi);
  return true;
}

/* ------------------------------------------------------------------ computations */

typedef struct ModCtx {
  const Xla__HloModuleProto *mp; /* decoded module */
  IdMap comp_ids;                /* computation id -> index in mp->computations */
  HComp **built;                 /* per proto computation: its HComp once built */
  int64_t max_id;                /* largest id seen, for next_uid */
} ModCtx;

static void note_id(ModCtx *x, int64_t id) {
  if (id > x->max_id) x->max_id = id;
}

/* Build computation ci of the proto; its callees are already built. */
static bool read_comp(Reader *r, ModCtx *x, int ci) {
  const Xla__HloComputationProto *pc = x->mp->computations[ci];
  HArena *t = r->tmp;
  r->comp = pc->name;
  r->instr = NULL;
  HComp *c = hlo_comp_new(r->m, pc->name);
  c->uid = pc->id;
  c->is_fusion = pc->is_fusion_computation;
  note_id(x, pc->id);
  x->built[ci] = c;

  size_t ni = pc->n_instructions;
  if (ni == 0) return fail(r, "computation has no instructions");
  if (ni > (size_t)INT32_MAX / 4) return fail(r, "too many instructions");
  IdMap ids;
  idmap_init(&ids, t, ni);
  NameSet names; /* per computation, as the text parser takes them (XLA's test files reuse
                    parameter names across computations) */
  nameset_init(&names, t, ni);
  for (size_t i = 0; i < ni; i++) {
    const Xla__HloInstructionProto *pi = pc->instructions[i];
    r->instr = pi->name;
    if (!*pi->name) {
      r->instr = NULL;
      return fail(r, "instruction with id %lld has no name", (long long)pi->id);
    }
    if (!nameset_add(&names, pi->name))
      return fail(r, "duplicate instruction name in the computation");
    if (!idmap_put(&ids, pi->id, (int)i)) return fail(r, "duplicate id %lld", (long long)pi->id);
    note_id(x, pi->id);
  }

  /* edges: operands and control predecessors, resolved to proto positions */
  Graph g = {.n = (int)ni};
  size_t ne = 0;
  for (size_t i = 0; i < ni; i++) {
    const Xla__HloInstructionProto *pi = pc->instructions[i];
    if (pi->n_operand_ids > (size_t)INT32_MAX / 4 ||
        pi->n_control_predecessor_ids > (size_t)INT32_MAX / 4 || ne > (size_t)INT32_MAX / 4)
      return fail(r, "too many operands");
    ne += pi->n_operand_ids + pi->n_control_predecessor_ids;
  }
  g.start = hlo_arena_alloc(t, sizeof(int) * (ni + 1));
  g.adj = hlo_arena_alloc(t, sizeof(int) * (ne + 1));
  int k = 0;
  for (size_t i = 0; i < ni; i++) {
    const Xla__HloInstructionProto *pi = pc->instructions[i];
    r->instr = pi->name;
    g.start[i] = k;
    for (size_t j = 0; j < pi->n_operand_ids; j++) {
      int v = idmap_get(&ids, pi->operand_ids[j]);
      if (v < 0)
        return fail(r, "operand %zu: id %lld does not name an instruction of this computation", j,
                    (long long)pi->operand_ids[j]);
      g.adj[k++] = v;
    }
    for (size_t j = 0; j < pi->n_control_predecessor_ids; j++) {
      int v = idmap_get(&ids, pi->control_predecessor_ids[j]);
      if (v < 0)
        return fail(r,
                    "control predecessor id %lld does not name an instruction of this "
                    "computation",
                    (long long)pi->control_predecessor_ids[j]);
      g.adj[k++] = v;
    }
  }
  g.start[ni] = k;
  int *order = hlo_arena_alloc(t, sizeof(int) * ni), cyc = 0;
  if (!topo_order(t, &g, order, &cyc)) {
    r->instr = pc->instructions[cyc]->name;
    return fail(r, "instruction depends on itself (operand or control cycle)");
  }

  /* instructions in dependency order */
  HInstr **made = hlo_arena_alloc(t, sizeof(HInstr *) * ni);
  HInstr **ops = hlo_arena_alloc(t, sizeof(HInstr *) * (ne + 1));
  HComp **calls = NULL;
  size_t ncalls_cap = 0;
  int nparams = 0;
  for (size_t i = 0; i < ni; i++) {
    const Xla__HloInstructionProto *pi = pc->instructions[order[i]];
    r->instr = pi->name;
    HOp op;
    if (!hlo_op_from_name(pi->opcode, strlen(pi->opcode), &op))
      return fail(r, "unknown opcode '%s'", pi->opcode);
    int arity = hlo_op_arity(op);
    if (arity >= 0 && pi->n_operand_ids != (size_t)arity)
      return fail(r, "%s expects %d operands, has %zu", pi->opcode, arity, pi->n_operand_ids);
    Shape shape;
    if (!read_shape(r, pi->shape, &shape, 0)) return false;
    for (size_t j = 0; j < pi->n_operand_ids; j++)
      ops[j] = made[idmap_get(&ids, pi->operand_ids[j])];
    HInstr *in = hlo_instr_new(c, op, pi->name, &shape, (int)pi->n_operand_ids, ops);
    in->uid = pi->id;
    made[order[i]] = in;
    if (!read_attrs(r, in, pi)) return false;
    if (op == OP_PARAMETER) nparams++;

    if (pi->n_control_predecessor_ids) {
      in->nctrl = (int)pi->n_control_predecessor_ids;
      in->ctrl = hlo_arena_alloc(r->m->arena, sizeof(HInstr *) * (size_t)in->nctrl);
      for (int j = 0; j < in->nctrl; j++)
        in->ctrl[j] = made[idmap_get(&ids, pi->control_predecessor_ids[j])];
    }
    if (pi->n_called_computation_ids) {
      if (pi->n_called_computation_ids > ncalls_cap) {
        ncalls_cap = pi->n_called_computation_ids;
        calls = hlo_arena_alloc(t, sizeof(HComp *) * ncalls_cap);
      }
      for (size_t j = 0; j < pi->n_called_computation_ids; j++) {
        int cj = idmap_get(&x->comp_ids, pi->called_computation_ids[j]);
        HLO_ASSERT(cj >= 0 && x->built[cj]); /* resolved and ordered by order_comps */
        calls[j] = x->built[cj];
        if (op == OP_FUSION && j == 0) x->built[cj]->is_fusion = true;
      }
      hlo_instr_set_calls(in, (int)pi->n_called_computation_ids, calls);
    }
  }

  /* parameters: numbers 0..n-1, each once */
  HInstr **byp = hlo_arena_alloc(t, sizeof(HInstr *) * ((size_t)nparams + 1));
  for (int i = 0; i < c->ninstrs; i++) {
    HInstr *in = c->instrs[i];
    if (in->op != OP_PARAMETER) continue;
    r->instr = in->name;
    if (in->param_num < 0 || in->param_num >= nparams)
      return fail(r, "parameter number %lld out of range (computation has %d parameters)",
                  (long long)in->param_num, nparams);
    if (byp[in->param_num])
      return fail(r, "duplicate parameter number %lld (also '%s')", (long long)in->param_num,
                  byp[in->param_num]->name);
    byp[in->param_num] = in;
  }

  r->instr = NULL;
  int ri = idmap_get(&ids, pc->root_id);
  if (ri < 0)
    return fail(r, "root id %lld does not name an instruction of this computation",
                (long long)pc->root_id);
  c->root = made[ri];
  hlo_comp_renumber(c);
  return true;
}

/* Resolve every called computation id and order computations callees first. */
static bool order_comps(Reader *r, ModCtx *x, int *order) {
  const Xla__HloModuleProto *mp = x->mp;
  HArena *t = r->tmp;
  int nc = (int)mp->n_computations;
  NameSet cnames;
  nameset_init(&cnames, t, (size_t)nc);
  idmap_init(&x->comp_ids, t, (size_t)nc);
  size_t ne = 0;
  for (int i = 0; i < nc; i++) {
    const Xla__HloComputationProto *pc = mp->computations[i];
    r->comp = pc->name;
    if (!*pc->name) {
      r->comp = NULL;
      return fail(r, "computation with id %lld has no name", (long long)pc->id);
    }
    if (!nameset_add(&cnames, pc->name)) return fail(r, "duplicate computation name");
    if (!idmap_put(&x->comp_ids, pc->id, i))
      return fail(r, "duplicate computation id %lld", (long long)pc->id);
    for (size_t j = 0; j < pc->n_instructions; j++) {
      if (pc->instructions[j]->n_called_computation_ids > (size_t)INT32_MAX / 4 ||
          ne > (size_t)INT32_MAX / 4)
        return fail(r, "too many called computations");
      ne += pc->instructions[j]->n_called_computation_ids;
    }
  }
  Graph g = {.n = nc};
  g.start = hlo_arena_alloc(t, sizeof(int) * ((size_t)nc + 1));
  g.adj = hlo_arena_alloc(t, sizeof(int) * (ne + 1));
  int k = 0;
  for (int i = 0; i < nc; i++) {
    const Xla__HloComputationProto *pc = mp->computations[i];
    r->comp = pc->name;
    g.start[i] = k;
    for (size_t j = 0; j < pc->n_instructions; j++) {
      const Xla__HloInstructionProto *pi = pc->instructions[j];
      r->instr = pi->name;
      for (size_t q = 0; q < pi->n_called_computation_ids; q++) {
        int v = idmap_get(&x->comp_ids, pi->called_computation_ids[q]);
        if (v < 0)
          return fail(r, "called computation id %lld does not exist",
                      (long long)pi->called_computation_ids[q]);
        g.adj[k++] = v;
      }
    }
    r->instr = NULL;
  }
  g.start[nc] = k;
  int cyc = 0;
  if (!topo_order(t, &g, order, &cyc)) {
    r->comp = mp->computations[cyc]->name;
    r->instr = NULL;
    return fail(r, "computation is part of a call cycle");
  }
  r->comp = NULL;
  return true;
}

/* ------------------------------------------------------------------ module */

/* Whether s declares a layout (a scalar's says nothing but for extras). */
static bool shape_has_layout(const Shape *s) {
  if (s->dt != DT_TUPLE) return s->has_layout && (s->rank || s->layout_extra);
  for (int i = 0; i < s->ntuple; i++)
    if (shape_has_layout(&s->tuple[i])) return true;
  return false;
}

static int entry_index(const Xla__HloModuleProto *mp, bool *by_key) {
  *by_key = true;
  for (size_t i = 0; i < mp->n_computations; i++)
    if (mp->entry_computation_id && mp->computations[i]->id == mp->entry_computation_id)
      return (int)i;
  if (*mp->entry_computation_name)
    for (size_t i = 0; i < mp->n_computations; i++)
      if (!strcmp(mp->computations[i]->name, mp->entry_computation_name)) return (int)i;
  /* id 0 is proto3's "absent", but a computation may really have id 0 */
  for (size_t i = 0; i < mp->n_computations; i++)
    if (!mp->entry_computation_id && mp->computations[i]->id == 0) return (int)i;
  *by_key = false;
  return -1;
}

static bool read_entry(Reader *r, ModCtx *x) {
  const Xla__HloModuleProto *mp = x->mp;
  HModule *m = r->m;
  bool by_key;
  int ei = entry_index(mp, &by_key);
  if (ei < 0) {
    if (mp->entry_computation_id || *mp->entry_computation_name)
      return fail(r, "entry computation (id %lld, name '%s') does not exist",
                  (long long)mp->entry_computation_id, mp->entry_computation_name);
    ei = (int)mp->n_computations - 1; /* XLA writes the entry last */
  }
  m->entry = x->built[ei];
  r->comp = m->entry->name;

  /* entry layout: host_program_shape, else the entry computation's own program shape */
  const Xla__ProgramShapeProto *ps = mp->host_program_shape;
  if (!ps || (!ps->n_parameters && !ps->result)) ps = mp->computations[ei]->program_shape;
  if (ps && (ps->n_parameters || ps->result)) {
    if (ps->n_parameters != (size_t)m->entry->nparams)
      return fail(r, "program shape has %zu parameters, entry computation has %d", ps->n_parameters,
                  m->entry->nparams);
    if (!ps->result) return fail(r, "program shape without a result");
    m->entry_layout_params =
        hlo_arena_alloc(m->arena, sizeof(Shape) * (ps->n_parameters ? ps->n_parameters : 1));
    for (size_t i = 0; i < ps->n_parameters; i++)
      if (!read_shape(r, ps->parameters[i], &m->entry_layout_params[i], 0)) return false;
    if (!read_shape(r, ps->result, &m->entry_layout_result, 0)) return false;
    m->nentry_layout = (int)ps->n_parameters;
    /* shapes without layouts declare none (what proto/write.c writes for a module without
       an entry_computation_layout) */
    m->has_entry_layout = shape_has_layout(&m->entry_layout_result);
    for (size_t i = 0; i < ps->n_parameters; i++)
      m->has_entry_layout |= shape_has_layout(&m->entry_layout_params[i]);
  }

  const Xla__HloInputOutputAliasProto *al = mp->input_output_alias;
  if (al && al->n_entries) {
    if (al->n_entries > (size_t)INT32_MAX) return fail(r, "too many alias entries");
    m->alias = hlo_arena_alloc(m->arena, sizeof(HAlias) * al->n_entries);
    for (size_t i = 0; i < al->n_entries; i++) {
      const Xla__HloInputOutputAliasProto__AliasEntryProto *e = al->entries[i];
      HAlias *h = &m->alias[i];
      if (!read_ilist(r, &h->out_index, e->output_shape_index, e->n_output_shape_index,
                      "alias output_shape_index") ||
          !read_ilist(r, &h->param_index, e->parameter_shape_index, e->n_parameter_shape_index,
                      "alias parameter_shape_index"))
        return false;
      if (e->parameter_number < 0 || e->parameter_number >= m->entry->nparams)
        return fail(r, "alias names parameter %lld, entry has %d parameters",
                    (long long)e->parameter_number, m->entry->nparams);
      h->param = e->parameter_number;
      h->kind = (int)e->kind;
      if (h->kind < 0 || h->kind > 2) return fail(r, "alias kind %d is unknown", h->kind);
    }
    m->nalias = (int)al->n_entries;
  }
  r->comp = NULL;
  return true;
}

static HModule *build_module(Reader *r, const Xla__HloModuleProto *mp) {
  HModule *m = hlo_module_new(*mp->name ? mp->name : "module", r->file);
  r->m = m;
  m->uid = mp->id;
  ModCtx x = {.mp = mp, .max_id = 0};
  size_t nc = mp->n_computations;
  x.built = hlo_arena_alloc(r->tmp, sizeof(HComp *) * (nc + 1));
  int *order = hlo_arena_alloc(r->tmp, sizeof(int) * (nc + 1));
  bool ok = order_comps(r, &x, order);
  for (size_t i = 0; ok && i < nc; i++)
    ok = read_comp(r, &x, order[i]);
  r->comp = r->instr = NULL;
  ok = ok && read_entry(r, &x);
  if (ok) {
    /* is_scheduled as XLA prints it (the schedule's order is the instructions' order: a
       scheduled module's file order is its schedule) */
    const char *fa = frontend_text(r, mp->frontend_attributes);
    m->raw = hlo_arena_alloc(m->arena, 2 * sizeof(HAttr));
    if (mp->schedule && mp->schedule->n_sequences)
      m->raw[m->nraw++] = (HAttr){"is_scheduled", "true"};
    if (fa) m->raw[m->nraw++] = (HAttr){"frontend_attributes", fa};
    hlo_module_renumber(m);
    if (x.max_id < INT64_MAX && x.max_id + 1 > m->next_uid) m->next_uid = x.max_id + 1;
    return m;
  }
  hlo_module_free(m);
  r->m = NULL;
  return NULL;
}

/* ------------------------------------------------------------------ framing */

typedef enum Framing { FR_MODULE, FR_HLOPROTO, FR_SNAPSHOT, FR_COUNT } Framing;

static const ProtobufCMessageDescriptor *const framing_desc[FR_COUNT] = {
    [FR_MODULE] = &xla__hlo_module_proto__descriptor,
    [FR_HLOPROTO] = &xla__hlo_proto__descriptor,
    [FR_SNAPSHOT] = &xla__hlo_snapshot__descriptor,
};

static const Xla__HloModuleProto *framing_module(Framing f, const ProtobufCMessage *msg) {
  switch (f) {
  case FR_MODULE: return (const Xla__HloModuleProto *)msg;
  case FR_HLOPROTO: return ((const Xla__HloProto *)msg)->hlo_module;
  case FR_SNAPSHOT: {
    const Xla__HloSnapshot *s = (const Xla__HloSnapshot *)msg;
    return s->hlo ? s->hlo->hlo_module : NULL;
  }
  case FR_COUNT: break;
  }
  return NULL;
}

static int framing_score(const Xla__HloModuleProto *mp) {
  if (!mp || !mp->n_computations) return 0;
  bool by_key;
  entry_index(mp, &by_key);
  return by_key ? 2 : 1;
}

HModule *proto_read_module(const uint8_t *buf, size_t len, const char *file, HErr *err) {
  Reader r = {.file = file ? file : "<input>", .err = err};
  if (!len) {
    fail(&r, "not a valid HloModuleProto: the input is empty");
    return NULL;
  }
  ProtobufCMessage *best = NULL;
  Framing best_f = FR_MODULE;
  int best_score = -1;
  for (int f = 0; f < FR_COUNT && best_score < 2; f++) {
    if (!wire_check(buf, len, framing_desc[f], 0)) continue;
    ProtobufCMessage *msg = protobuf_c_message_unpack(framing_desc[f], NULL, len, buf);
    if (!msg) continue;
    int s = framing_score(framing_module((Framing)f, msg));
    if (s > best_score) {
      if (best) protobuf_c_message_free_unpacked(best, NULL);
      best = msg;
      best_f = (Framing)f;
      best_score = s;
    } else {
      protobuf_c_message_free_unpacked(msg, NULL);
    }
  }
  if (!best) {
    fail(&r, "not a valid HloModuleProto (nor an HloProto or HloSnapshot holding one): "
             "malformed protobuf bytes");
    return NULL;
  }
  if (best_score == 0) {
    protobuf_c_message_free_unpacked(best, NULL);
    fail(&r, "not a valid HloModuleProto: no computations found");
    return NULL;
  }
  r.tmp = hlo_arena_new();
  HModule *m = build_module(&r, framing_module(best_f, best));
  hlo_arena_free(r.tmp);
  protobuf_c_message_free_unpacked(best, NULL);
  return m;
}
