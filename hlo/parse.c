/* hlo/parse.c: the HLO text reader (XLA's HloModule text, short and long form).
 *
 * A hand-written recursive-descent parser over the raw bytes, with no separate token stream:
 * small lexing helpers skip whitespace and comments (slash-star and slash-slash) and read
 * names, numbers and strings at the current position. The module is read in one pass:
 *   header  `HloModule name, attr=value, ...` (entry_computation_layout and
 *           input_output_alias decoded, every other attribute kept verbatim in m->raw);
 *   sections FileNames / FunctionNames / FileLocations / StackFrames of optimized dumps
 *           (skipped: hloc keeps no stack frames);
 *   computations `[ENTRY] [%]name [(p: shape, ...) -> shape] { instr* }`.
 * Each instruction becomes an HInstr as soon as it is read; its operand, control-predecessor
 * and called-computation names are recorded as pending references (text slices with their
 * offsets) in a scratch arena. Operands are resolved when the computation's closing brace is
 * reached, through a hash map of that computation's names, so forward references work; called
 * computations are resolved once the whole module is read. Then instructions that were
 * written out of dependency order are sorted topologically (stable DFS; a cycle is an error),
 * computations are sorted callees-before-callers the same way, and the module is renumbered.
 *
 * Attributes an instruction's opcode uses are decoded into HInstr fields; anything else
 * (sharding, frontend_attributes, attributes of other opcodes, unknown names) is kept as
 * (name, exact value text) in in->raw. Strings are unescaped (C escapes, as XLA writes them);
 * backend_config keeps its content: a bare {...} JSON blob as written, a quoted string
 * unescaped.
 *
 * Robustness: every read is bounded by the input length (the text need not be NUL-terminated
 * and may contain NUL bytes); recursion (tuple shapes, tuple literals) is bounded by
 * PARSE_MAX_DEPTH; every input problem becomes one located error "file:line:col: computation
 * 'C', instruction 'I': what" and NULL, with everything allocated so far freed. */
#include "hlo.h"

#include <complex.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define PARSE_MAX_DEPTH 64 /* nesting bound for tuple shapes and tuple literals */

/* A name as it appears in the text, with its offset for messages. */
typedef struct Ref {
  const char *s; /* first character (inside the input text) */
  int n;         /* length */
  size_t pos;    /* offset in the text */
} Ref;

/* An instruction whose names still have to be resolved. */
typedef struct PInstr {
  HInstr *in; /* the instruction (operands not yet set) */
  size_t pos; /* offset of its name */
  int nops;   /* operand names */
  Ref *ops;
  int nctrl; /* control-predecessors names */
  Ref *ctrl;
  int ncalls; /* called computation names, already in the calls[] convention order */
  Ref *calls;
} PInstr;

/* Open-addressing hash map from a name (pointer + length) to a pointer. */
typedef struct NameMap {
  size_t cap;       /* slots, a power of two (0 before first use) */
  size_t n;         /* used slots */
  const char **key; /* key text (not NUL-terminated in general) */
  int *klen;        /* key length */
  void **val;       /* value */
} NameMap;

/* A growable array of fixed-size elements, malloc'd, reused between instructions. */
typedef struct Vec {
  void *a;    /* elements */
  int n, cap; /* count, capacity (elements) */
} Vec;

typedef struct Parser {
  const char *t;     /* input text */
  size_t len;        /* its length */
  size_t pos;        /* current offset */
  const char *file;  /* input name for messages */
  HErr *err;         /* where the first error goes */
  HModule *m;        /* module under construction */
  HArena *scratch;   /* pending references, freed at the end */
  const char *comp;  /* computation being read (messages) */
  const char *instr; /* instruction being read (messages) */
  int depth;         /* current recursion depth */
  PInstr *pi;        /* every instruction of the module, in text order */
  int npi, capi;
  HComp *entry;                       /* the ENTRY computation, if marked */
  NameMap comps;                      /* computation name -> HComp */
  NameMap names;                      /* instruction name -> HInstr, current computation only */
  Vec v_ops, v_ctrl, v_calls, v_attr; /* per-instruction scratch lists */
  char near[48];                      /* "found ..." text for messages */
} Parser;

/* ------------------------------------------------------------------ small utilities */

static void *xrealloc(void *p, size_t n) {
  void *q = realloc(p, n ? n : 1);
  if (!q) {
    fprintf(stderr, "hloc: out of memory\n");
    exit(1);
  }
  return q;
}

static void *vec_push(Vec *v, size_t elem) {
  if (v->n == v->cap) {
    v->cap = v->cap ? v->cap * 2 : 8;
    v->a = xrealloc(v->a, (size_t)v->cap * elem);
  }
  return (char *)v->a + (size_t)v->n++ * elem;
}

static uint64_t name_hash(const char *s, int n) {
  return hlo_hash_bytes(HLO_HASH_START, s, (size_t)n);
}

static void *map_get(const NameMap *m, const char *s, int n) {
  if (!m->cap) return NULL;
  for (size_t i = name_hash(s, n) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
    if (!m->key[i]) return NULL;
    if (m->klen[i] == n && !memcmp(m->key[i], s, (size_t)n)) return m->val[i];
  }
}

static void map_put(NameMap *m, const char *s, int n, void *v);

static void map_grow(NameMap *m) {
  NameMap old = *m;
  m->cap = old.cap ? old.cap * 2 : 64;
  m->n = 0;
  m->key = calloc(m->cap, sizeof *m->key);
  m->klen = calloc(m->cap, sizeof *m->klen);
  m->val = calloc(m->cap, sizeof *m->val);
  if (!m->key || !m->klen || !m->val) {
    fprintf(stderr, "hloc: out of memory\n");
    exit(1);
  }
  for (size_t i = 0; i < old.cap; i++)
    if (old.key[i]) map_put(m, old.key[i], old.klen[i], old.val[i]);
  free(old.key);
  free(old.klen);
  free(old.val);
}

static void map_put(NameMap *m, const char *s, int n, void *v) {
  if ((m->n + 1) * 2 > m->cap) map_grow(m);
  size_t i = name_hash(s, n) & (m->cap - 1);
  while (m->key[i]) {
    if (m->klen[i] == n && !memcmp(m->key[i], s, (size_t)n)) {
      m->val[i] = v;
      return;
    }
    i = (i + 1) & (m->cap - 1);
  }
  m->key[i] = s;
  m->klen[i] = n;
  m->val[i] = v;
  m->n++;
}

static void map_clear(NameMap *m) {
  if (!m->cap) return;
  memset(m->key, 0, m->cap * sizeof *m->key);
  m->n = 0;
}

static void map_free(NameMap *m) {
  free(m->key);
  free(m->klen);
  free(m->val);
}

static bool ref_is(Ref r, const char *s) {
  size_t n = strlen(s);
  return (size_t)r.n == n && !memcmp(r.s, s, n);
}

static bool is_name_char(int c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '-' || c == '$';
}

static bool is_space(int c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

/* ------------------------------------------------------------------ errors */

/* Describe what is at offset pos ("end of input" or 'text'), for messages. */
static const char *near_text(Parser *p, size_t pos) {
  if (pos >= p->len) return "end of input";
  size_t k = 0;
  p->near[k++] = '\'';
  for (size_t i = pos; i < p->len && k < 24 && p->t[i] != '\n'; i++) {
    unsigned char c = (unsigned char)p->t[i];
    p->near[k++] = c >= 0x20 && c < 0x7f ? (char)c : '?';
    if (i > pos && (is_space(c) || c == ',')) break;
  }
  p->near[k++] = '\'';
  p->near[k] = 0;
  return p->near;
}

static bool perr(Parser *p, size_t pos, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool perr(Parser *p, size_t pos, const char *fmt, ...) {
  if (p->err->set) return false;
  int line = 1, col = 1;
  if (pos > p->len) pos = p->len;
  for (size_t i = 0; i < pos; i++) {
    if (p->t[i] == '\n') {
      line++;
      col = 1;
    } else {
      col++;
    }
  }
  char loc[512], msg[800];
  snprintf(loc, sizeof loc, "%s:%d:%d", p->file, line, col);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  hlo_err(p->err, loc, p->comp, p->instr, "%s", msg);
  return false;
}

/* ------------------------------------------------------------------ lexing */

static void ws(Parser *p) {
  while (p->pos < p->len) {
    char c = p->t[p->pos];
    if (is_space(c)) {
      p->pos++;
    } else if (c == '/' && p->pos + 1 < p->len && p->t[p->pos + 1] == '*') {
      size_t i = p->pos + 2;
      while (i + 1 < p->len && !(p->t[i] == '*' && p->t[i + 1] == '/'))
        i++;
      p->pos = i + 1 < p->len ? i + 2 : p->len;
    } else if (c == '/' && p->pos + 1 < p->len && p->t[p->pos + 1] == '/') {
      while (p->pos < p->len && p->t[p->pos] != '\n')
        p->pos++;
    } else {
      break;
    }
  }
}

static int peek(Parser *p) {
  ws(p);
  return p->pos < p->len ? (unsigned char)p->t[p->pos] : -1;
}

/* The character right at pos, no whitespace skipped. */
static int peek_raw(const Parser *p) { return p->pos < p->len ? (unsigned char)p->t[p->pos] : -1; }

static bool accept(Parser *p, char c) {
  if (peek(p) != (unsigned char)c) return false;
  p->pos++;
  return true;
}

static bool expect(Parser *p, char c, const char *ctx) {
  if (accept(p, c)) return true;
  return perr(p, p->pos, "expected '%c' %s, found %s", c, ctx, near_text(p, p->pos));
}

/* A name: optional '%', then name characters. */
static bool name(Parser *p, Ref *r, const char *what) {
  ws(p);
  if (peek_raw(p) == '%') p->pos++;
  r->pos = p->pos;
  r->s = p->t + p->pos;
  while (p->pos < p->len && is_name_char((unsigned char)p->t[p->pos]))
    p->pos++;
  r->n = (int)(p->pos - r->pos);
  if (r->n == 0) return perr(p, p->pos, "expected %s, found %s", what, near_text(p, p->pos));
  if (r->n > 4096) return perr(p, r->pos, "%s is too long", what);
  return true;
}

/* A signed decimal integer. */
static bool parse_i64(Parser *p, int64_t *out, const char *what) {
  ws(p);
  size_t start = p->pos;
  bool neg = false;
  if (peek_raw(p) == '-' || peek_raw(p) == '+') neg = p->t[p->pos++] == '-';
  uint64_t v = 0;
  size_t d0 = p->pos;
  while (p->pos < p->len && p->t[p->pos] >= '0' && p->t[p->pos] <= '9') {
    unsigned dig = (unsigned)(p->t[p->pos] - '0');
    if (v > (UINT64_MAX - dig) / 10) return perr(p, start, "number out of range in %s", what);
    v = v * 10 + dig;
    p->pos++;
  }
  if (p->pos == d0)
    return perr(p, start, "expected %s (an integer), found %s", what, near_text(p, start));
  if (p->pos < p->len && (is_name_char((unsigned char)p->t[p->pos]) && p->t[p->pos] != 'x' &&
                          p->t[p->pos] != '_' && p->t[p->pos] != '-'))
    return perr(p, start, "malformed integer %s in %s", near_text(p, start), what);
  if (neg ? v > (uint64_t)INT64_MAX + 1 : v > (uint64_t)INT64_MAX)
    return perr(p, start, "number out of range in %s", what);
  *out = neg ? (int64_t)(0 - v) : (int64_t)v;
  return true;
}

/* A number token (digits, letters, '.', '+', '-') copied into buf; false when empty. */
static bool num_token(Parser *p, char *buf, size_t cap, size_t *start, const char *what) {
  ws(p);
  *start = p->pos;
  while (p->pos < p->len) {
    char c = p->t[p->pos];
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '.' ||
        c == '+' || c == '-')
      p->pos++;
    else
      break;
  }
  size_t n = p->pos - *start;
  if (n == 0) return perr(p, *start, "expected %s, found %s", what, near_text(p, *start));
  if (n >= cap) return perr(p, *start, "malformed number in %s", what);
  memcpy(buf, p->t + *start, n);
  buf[n] = 0;
  return true;
}

static bool parse_double(Parser *p, double *out, bool single, const char *what) {
  char buf[64];
  size_t start;
  if (!num_token(p, buf, sizeof buf, &start, what)) return false;
  char *end;
  errno = 0;
  double v = single ? (double)strtof(buf, &end) : strtod(buf, &end);
  if (end == buf || *end) return perr(p, start, "malformed number '%s' in %s", buf, what);
  *out = v;
  return true;
}

static bool parse_bool(Parser *p, bool *out, const char *what) {
  Ref r;
  if (!name(p, &r, what)) return false;
  if (ref_is(r, "true"))
    *out = true;
  else if (ref_is(r, "false"))
    *out = false;
  else
    return perr(p, r.pos, "expected true or false for %s, found '%.*s'", what, r.n, r.s);
  return true;
}

/* Skip a quoted string starting at pos (which holds '"'); false when unterminated. */
static bool skip_string(Parser *p) {
  size_t start = p->pos;
  p->pos++;
  while (p->pos < p->len && p->t[p->pos] != '"') {
    if (!p->t[p->pos] || (p->t[p->pos] == '\\' && p->pos + 1 < p->len && !p->t[p->pos + 1]))
      return perr(p, p->pos, "NUL byte inside a string");
    p->pos += p->t[p->pos] == '\\' ? 2 : 1;
  }
  if (p->pos >= p->len) {
    p->pos = p->len;
    return perr(p, start, "unterminated string");
  }
  p->pos++;
  return true;
}

/* A quoted string with C escapes, unescaped into the module arena. */
static bool parse_string(Parser *p, const char **out, const char *what) {
  if (peek(p) != '"')
    return perr(p, p->pos, "expected a quoted string for %s, found %s", what, near_text(p, p->pos));
  size_t start = p->pos;
  if (!skip_string(p)) return false;
  const char *s = p->t + start + 1, *e = p->t + p->pos - 1;
  char *d = hlo_arena_alloc(p->m->arena, (size_t)(e - s) + 1), *o = d;
  while (s < e) {
    if (*s != '\\' || s + 1 >= e) {
      *o++ = *s++;
      continue;
    }
    s++;
    char c = *s++;
    switch (c) {
    case 'n': *o++ = '\n'; break;
    case 't': *o++ = '\t'; break;
    case 'r': *o++ = '\r'; break;
    case 'a': *o++ = '\a'; break;
    case 'b': *o++ = '\b'; break;
    case 'f': *o++ = '\f'; break;
    case 'v': *o++ = '\v'; break;
    case 'x': {
      unsigned v = 0;
      int k = 0;
      for (; k < 2 && s < e; k++, s++) {
        char h = *s;
        if (h >= '0' && h <= '9')
          v = v * 16 + (unsigned)(h - '0');
        else if (h >= 'a' && h <= 'f')
          v = v * 16 + (unsigned)(h - 'a' + 10);
        else if (h >= 'A' && h <= 'F')
          v = v * 16 + (unsigned)(h - 'A' + 10);
        else
          break;
      }
      *o++ = k ? (char)v : 'x';
      break;
    }
    default:
      if (c >= '0' && c <= '7') {
        unsigned v = (unsigned)(c - '0');
        for (int k = 0; k < 2 && s < e && *s >= '0' && *s <= '7'; k++)
          v = v * 8 + (unsigned)(*s++ - '0');
        *o++ = (char)v;
      } else {
        *o++ = c; /* \\ \" \' \? and anything unknown: the character itself */
      }
    }
  }
  *o = 0;
  *out = d;
  return true;
}

/* An attribute value kept verbatim: brackets balanced, strings skipped whole; ends at a ',',
 * whitespace or an unmatched closing bracket at depth 0. */
static bool raw_value(Parser *p, const char **s, size_t *n) {
  ws(p);
  size_t start = p->pos;
  long depth = 0;
  while (p->pos < p->len) {
    char c = p->t[p->pos];
    if (c == '"') {
      if (!skip_string(p)) return false;
      continue;
    }
    if (depth == 0 && (c == ',' || is_space(c))) break;
    if (!c) return perr(p, p->pos, "NUL byte inside an attribute value");
    if (c == '{' || c == '[' || c == '(') {
      depth++;
    } else if (c == '}' || c == ']' || c == ')') {
      if (depth == 0) break;
      depth--;
    }
    p->pos++;
  }
  if (depth > 0) return perr(p, start, "unterminated attribute value (unexpected end of input)");
  if (p->pos == start)
    return perr(p, start, "expected an attribute value, found %s", near_text(p, start));
  *s = p->t + start;
  *n = p->pos - start;
  return true;
}

/* ------------------------------------------------------------------ shapes */

static const char *const unsupported_types[] = {
    "f8e4m3b11fnuz", "f8e5m2fnuz", "f8e4m3fnuz", "f8e4m3", "f8e3m4", "f8e8m0fnu",
    "f4e2m1fn",      "s2",         "u2",         "s1",     "u1",     "opaque",
    "f4e2m1fnuz",
};

static bool parse_shape(Parser *p, Shape *s);

static bool parse_tuple_shape(Parser *p, Shape *s) {
  size_t start = p->pos;
  if (++p->depth > PARSE_MAX_DEPTH)
    return perr(p, start, "shape nested too deeply (limit %d)", PARSE_MAX_DEPTH);
  p->pos++; /* '(' */
  int n = 0, cap = 0;
  Shape *el = NULL;
  if (!accept(p, ')')) {
    for (;;) {
      if (n == cap) {
        cap = cap ? cap * 2 : 4;
        Shape *ne = hlo_arena_alloc(p->m->arena, sizeof(Shape) * (size_t)cap);
        if (n) memcpy(ne, el, sizeof(Shape) * (size_t)n);
        el = ne;
      }
      if (!parse_shape(p, &el[n])) return false;
      n++;
      if (accept(p, ',')) continue;
      if (!expect(p, ')', "after tuple element shape")) return false;
      break;
    }
  }
  memset(s, 0, sizeof *s);
  s->dt = DT_TUPLE;
  s->ntuple = n;
  s->tuple = el ? el : hlo_arena_alloc(p->m->arena, sizeof(Shape));
  p->depth--;
  return true;
}

static bool parse_shape(Parser *p, Shape *s) {
  if (peek(p) == '(') return parse_tuple_shape(p, s);
  memset(s, 0, sizeof *s);
  size_t start = p->pos;
  while (p->pos < p->len && ((p->t[p->pos] >= 'a' && p->t[p->pos] <= 'z') ||
                             (p->t[p->pos] >= '0' && p->t[p->pos] <= '9')))
    p->pos++;
  size_t n = p->pos - start;
  if (n == 0) return perr(p, start, "expected a shape, found %s", near_text(p, start));
  DType dt = hlo_dtype_from_name(p->t + start, n);
  if (dt == DT_INVALID) {
    for (size_t i = 0; i < sizeof unsupported_types / sizeof *unsupported_types; i++)
      if (strlen(unsupported_types[i]) == n && !memcmp(unsupported_types[i], p->t + start, n))
        return perr(p, start, "unsupported element type '%.*s'", (int)n, p->t + start);
    return perr(p, start, "unknown element type '%.*s'", (int)(n > 32 ? 32 : n), p->t + start);
  }
  s->dt = dt;
  if (peek_raw(p) != '[')
    return perr(p, p->pos, "expected '[' after element type, found %s", near_text(p, p->pos));
  p->pos++;
  int64_t total = 1;
  if (!accept(p, ']')) {
    for (;;) {
      int c = peek(p);
      if (c == '<') return perr(p, p->pos, "bounded dynamic dimensions ('<=N') are not supported");
      if (c == '?') return perr(p, p->pos, "unbounded dynamic dimensions ('?') are not supported");
      size_t dpos = p->pos;
      int64_t d;
      if (!parse_i64(p, &d, "dimension size")) return false;
      if (d < 0) return perr(p, dpos, "negative dimension size %lld", (long long)d);
      if (s->rank == HLO_MAX_RANK)
        return perr(p, dpos, "rank above HLO_MAX_RANK (%d)", HLO_MAX_RANK);
      if (d > 0 && total > (INT64_MAX / 16) / d)
        return perr(p, dpos, "shape has too many elements");
      total *= d;
      s->dims[s->rank++] = d;
      if (accept(p, ',')) continue;
      if (!expect(p, ']', "after dimensions")) return false;
      break;
    }
  }
  if (dt == DT_TOKEN) {
    if (s->rank) return perr(p, start, "token shape with dimensions");
    return true;
  }
  s->has_layout = s->rank == 0;
  for (int i = 0; i < s->rank; i++)
    s->m2m[i] = (int8_t)(s->rank - 1 - i);
  if (peek_raw(p) != '{') return true; /* a layout follows immediately, never after a space */
  size_t lpos = p->pos++;
  int k = 0;
  bool seen[HLO_MAX_RANK] = {false};
  if (peek(p) != '}' && peek(p) != ':') {
    for (;;) {
      size_t epos = p->pos;
      int64_t v;
      if (!parse_i64(p, &v, "layout")) return false;
      if (k >= s->rank || v < 0 || v >= s->rank || seen[v])
        return perr(p, epos, "invalid layout for a rank-%d shape", s->rank);
      seen[v] = true;
      s->m2m[k++] = (int8_t)v;
      if (!accept(p, ',')) break;
    }
  }
  if (k != s->rank && !(k == 0 && s->rank == 0))
    return perr(p, lpos, "layout has %d entries for a rank-%d shape", k, s->rank);
  if (accept(p, ':')) {
    size_t es = p->pos;
    int d = 0;
    while (p->pos < p->len && (p->t[p->pos] != '}' || d > 0)) {
      char c = p->t[p->pos];
      if (c == '(')
        d++;
      else if (c == ')' && d > 0)
        d--;
      else if (c == '{' || c == '\n' || !c)
        break;
      p->pos++;
    }
    s->layout_extra = hlo_arena_strndup(p->m->arena, p->t + es, p->pos - es);
  }
  if (!expect(p, '}', "at the end of a layout")) return false;
  s->has_layout = true;
  return true;
}

/* ------------------------------------------------------------------ literals */

static bool parse_scalar(Parser *p, DType dt, void *data, int64_t i) {
  switch (hlo_dtype_kind(dt)) {
  case DK_PRED: {
    int c = peek(p);
    if (c == '0' || c == '1') {
      int64_t v;
      size_t pos = p->pos;
      if (!parse_i64(p, &v, "pred constant")) return false;
      if (v != 0 && v != 1) return perr(p, pos, "pred constant must be true or false");
      hlo_store_i64(dt, data, i, v);
      return true;
    }
    bool b;
    if (!parse_bool(p, &b, "pred constant")) return false;
    hlo_store_i64(dt, data, i, b);
    return true;
  }
  case DK_SINT:
  case DK_UINT: {
    char buf[64];
    size_t start;
    if (!num_token(p, buf, sizeof buf, &start, "integer constant")) return false;
    char *end;
    errno = 0;
    int64_t v;
    if (hlo_dtype_kind(dt) == DK_UINT) {
      if (buf[0] == '-')
        return perr(p, start, "value %s out of range for %s", buf, hlo_dtype_name(dt));
      unsigned long long u = strtoull(buf, &end, 10);
      if (end == buf || *end) return perr(p, start, "malformed integer '%s'", buf);
      if (errno == ERANGE || (dt != DT_U64 && u >> hlo_dtype_bits(dt)))
        return perr(p, start, "value %s out of range for %s", buf, hlo_dtype_name(dt));
      v = (int64_t)u;
    } else {
      long long sv = strtoll(buf, &end, 10);
      if (end == buf || *end) return perr(p, start, "malformed integer '%s'", buf);
      int bits = hlo_dtype_bits(dt);
      if (errno == ERANGE ||
          (bits < 64 && (sv < -(1ll << (bits - 1)) || sv > (1ll << (bits - 1)) - 1)))
        return perr(p, start, "value %s out of range for %s", buf, hlo_dtype_name(dt));
      v = sv;
    }
    hlo_store_i64(dt, data, i, v);
    return true;
  }
  case DK_FLOAT: {
    double v = 0;
    /* fp8 from the number's double, so rounded once */
    if (!parse_double(p, &v, dt != DT_F64 && !hlo_dtype_is_fp8(dt), "floating-point constant"))
      return false;
    hlo_store_f64(dt, data, i, v);
    return true;
  }
  case DK_COMPLEX: {
    /* XLA writes a complex element as (re, im) */
    double re = 0, im = 0;
    bool f32 = dt == DT_C64;
    if (!expect(p, '(', "at the start of a complex constant") ||
        !parse_double(p, &re, f32, "real part of a complex constant") ||
        !expect(p, ',', "between the parts of a complex constant") ||
        !parse_double(p, &im, f32, "imaginary part of a complex constant") ||
        !expect(p, ')', "at the end of a complex constant"))
      return false;
    hlo_store_c128(dt, data, i, HLO_CMPLX(re, im));
    return true;
  }
  case DK_OTHER: break;
  }
  return perr(p, p->pos, "constant of type %s has no value", hlo_dtype_name(dt));
}

static bool lit_array(Parser *p, Literal *l, int d, int64_t *idx) {
  const Shape *s = &l->shape;
  if (!expect(p, '{', "in constant")) return false;
  for (int64_t i = 0; i < s->dims[d]; i++) {
    if (i > 0 && !accept(p, ',')) {
      if (peek(p) == '}')
        return perr(p, p->pos, "constant has %lld elements in dimension %d, its shape says %lld",
                    (long long)i, d, (long long)s->dims[d]);
      return expect(p, ',', "between constant elements");
    }
    if (i == 0 && peek(p) == '}')
      return perr(p, p->pos, "constant has 0 elements in dimension %d, its shape says %lld", d,
                  (long long)s->dims[d]);
    if (d + 1 < s->rank) {
      if (!lit_array(p, l, d + 1, idx)) return false;
    } else {
      if (!parse_scalar(p, s->dt, l->data, (*idx)++)) return false;
    }
  }
  if (peek(p) == ',' || (s->dims[d] == 0 && peek(p) != '}'))
    return perr(p, p->pos, "constant has more than %lld elements in dimension %d",
                (long long)s->dims[d], d);
  return expect(p, '}', "at the end of a constant dimension");
}

static bool lit_fill(Parser *p, Literal *l) {
  const Shape *s = &l->shape;
  if (s->dt == DT_TUPLE) {
    if (++p->depth > PARSE_MAX_DEPTH)
      return perr(p, p->pos, "constant nested too deeply (limit %d)", PARSE_MAX_DEPTH);
    if (!expect(p, '(', "at the start of a tuple constant")) return false;
    for (int i = 0; i < s->ntuple; i++) {
      if (i > 0 && !expect(p, ',', "between tuple constant elements")) return false;
      if (!lit_fill(p, l->elems[i])) return false;
    }
    if (!expect(p, ')', "at the end of a tuple constant")) return false;
    p->depth--;
    return true;
  }
  if (s->dt == DT_TOKEN) return perr(p, p->pos, "token constants are not supported");
  if (s->rank == 0) return parse_scalar(p, s->dt, l->data, 0);
  int64_t idx = 0;
  return lit_array(p, l, 0, &idx);
}

/* Every array element needs at least one character of text: refuse shapes that cannot fit
 * before allocating them. */
static bool lit_fits(const Shape *s, size_t avail) {
  if (s->dt == DT_TUPLE) {
    for (int i = 0; i < s->ntuple; i++)
      if (!lit_fits(&s->tuple[i], avail)) return false;
    return true;
  }
  return hlo_shape_elems(s) <= (int64_t)avail;
}

static bool parse_literal(Parser *p, const Shape *s, Literal **out) {
  ws(p);
  /* XLA's dumps elide large literals as {...}: the module still reads and verifies (the
   * shape is known), but its value is gone, so the instruction keeps a NULL literal and
   * whatever needs the value (interpreter, code generation, folding) reports it. */
  if (s->dt != DT_TUPLE && s->rank > 0 && p->pos + 5 <= p->len &&
      !memcmp(p->t + p->pos, "{...}", 5)) {
    p->pos += 5;
    *out = NULL;
    return true;
  }
  if (!lit_fits(s, p->len - p->pos))
    return perr(p, p->pos, "constant has fewer elements than its shape");
  Literal *l = hlo_literal_new(p->m->arena, s);
  if (!lit_fill(p, l)) return false;
  *out = l;
  return true;
}

/* ------------------------------------------------------------------ attribute values */

static bool parse_ilist(Parser *p, IList *l, const char *what) {
  l->n = 0;
  if (!expect(p, '{', what)) return false;
  if (accept(p, '}')) return true;
  for (;;) {
    size_t pos = p->pos;
    int64_t v;
    if (!parse_i64(p, &v, what)) return false;
    if (l->n == HLO_MAX_RANK)
      return perr(p, pos, "%s has more than %d entries", what, HLO_MAX_RANK);
    l->v[l->n++] = v;
    if (accept(p, ',')) continue;
    return expect(p, '}', what);
  }
}

/* `size=3x3 stride=2x2 pad=1_1x1_1 lhs_dilate=1x1 rhs_dilate=1x1 rhs_reversal=0x1` */
static bool parse_window(Parser *p, Window *w) {
  size_t start = p->pos;
  if (!expect(p, '{', "to open window")) return false;
  for (int i = 0; i < HLO_MAX_RANK; i++) {
    w->d[i].stride = w->d[i].win_dil = w->d[i].base_dil = 1;
  }
  int n = -1;
  while (!accept(p, '}')) {
    Ref key;
    if (!name(p, &key, "window field")) return false;
    if (!expect(p, '=', "after window field")) return false;
    int k = 0;
    for (;;) {
      size_t pos = p->pos;
      if (k == HLO_MAX_RANK)
        return perr(p, pos, "window has more than %d dimensions", HLO_MAX_RANK);
      WinDim *d = &w->d[k];
      int64_t v;
      if (!parse_i64(p, &v, "window")) return false;
      if (ref_is(key, "size")) {
        d->size = v;
      } else if (ref_is(key, "stride")) {
        d->stride = v;
      } else if (ref_is(key, "pad")) {
        d->pad_lo = v;
        if (peek_raw(p) != '_') return perr(p, p->pos, "expected LOW_HIGH in window pad");
        p->pos++;
        if (!parse_i64(p, &d->pad_hi, "window pad")) return false;
      } else if (ref_is(key, "lhs_dilate")) {
        d->base_dil = v;
      } else if (ref_is(key, "rhs_dilate")) {
        d->win_dil = v;
      } else if (ref_is(key, "rhs_reversal")) {
        d->reversal = v != 0;
      } else {
        return perr(p, key.pos, "unknown window field '%.*s'", key.n, key.s);
      }
      k++;
      if (peek_raw(p) != 'x') break;
      p->pos++;
    }
    if (n >= 0 && k != n)
      return perr(p, key.pos, "window field '%.*s' has %d dimensions, expected %d", key.n, key.s, k,
                  n);
    n = k;
  }
  w->n = n < 0 ? 0 : n;
  for (int i = 0; i < w->n; i++)
    if (w->d[i].stride < 1 || w->d[i].win_dil < 1 || w->d[i].base_dil < 1 || w->d[i].size < 0)
      return perr(p, start, "window dimension %d has a non-positive size, stride or dilation", i);
  return true;
}

/* One label string of dim_labels: b/f (or o/i for the kernel) and spatial digits. */
static bool parse_labels(Parser *p, const char *s, int n, size_t pos, char c0, char c1, int64_t *d0,
                         int64_t *d1, IList *sp) {
  if (n > HLO_MAX_RANK || n < 2) return perr(p, pos, "dim_labels: bad rank %d", n);
  *d0 = *d1 = -1;
  int nsp = n - 2;
  bool seen[HLO_MAX_RANK] = {false};
  sp->n = nsp;
  for (int i = 0; i < n; i++) {
    char c = s[i];
    if (c == c0 && *d0 < 0)
      *d0 = i;
    else if (c == c1 && *d1 < 0)
      *d1 = i;
    else if (c >= '0' && c - '0' < nsp && !seen[c - '0']) {
      seen[c - '0'] = true;
      sp->v[c - '0'] = i;
    } else {
      return perr(p, pos, "dim_labels: unexpected '%c' in '%.*s'", c, n, s);
    }
  }
  if (*d0 < 0 || *d1 < 0)
    return perr(p, pos, "dim_labels: '%.*s' needs '%c' and '%c'", n, s, c0, c1);
  return true;
}

/* `b01f_01io->b01f` */
static bool parse_dim_labels(Parser *p, ConvDims *cd) {
  ws(p);
  size_t start = p->pos;
  while (p->pos < p->len && (is_name_char((unsigned char)p->t[p->pos]) || p->t[p->pos] == '>'))
    p->pos++;
  const char *s = p->t + start;
  size_t n = p->pos - start;
  const char *us = memchr(s, '_', n);
  const char *ar = NULL;
  for (size_t i = 0; i + 1 < n; i++)
    if (s[i] == '-' && s[i + 1] == '>') ar = s + i;
  if (!us || !ar || ar < us)
    return perr(p, start, "malformed dim_labels %s (expected like b01f_01io->b01f)",
                near_text(p, start));
  if (!parse_labels(p, s, (int)(us - s), start, 'b', 'f', &cd->in_batch, &cd->in_feat, &cd->in_sp))
    return false;
  if (!parse_labels(p, us + 1, (int)(ar - us - 1), start, 'i', 'o', &cd->k_in, &cd->k_out,
                    &cd->k_sp))
    return false;
  if (!parse_labels(p, ar + 2, (int)(s + n - ar - 2), start, 'b', 'f', &cd->out_batch,
                    &cd->out_feat, &cd->out_sp))
    return false;
  if (cd->in_sp.n != cd->k_sp.n || cd->in_sp.n != cd->out_sp.n)
    return perr(p, start, "dim_labels: input, kernel and output have different spatial ranks");
  return true;
}

/* `{[0:2], [1:9:2]}` */
static bool parse_slice(Parser *p, SliceDims *sl) {
  if (!expect(p, '{', "to open slice")) return false;
  sl->n = 0;
  if (accept(p, '}')) return true;
  for (;;) {
    size_t pos = p->pos;
    if (sl->n == HLO_MAX_RANK)
      return perr(p, pos, "slice has more than %d dimensions", HLO_MAX_RANK);
    int k = sl->n++;
    sl->stride[k] = 1;
    if (!expect(p, '[', "in slice")) return false;
    if (!parse_i64(p, &sl->start[k], "slice start") || !expect(p, ':', "in slice") ||
        !parse_i64(p, &sl->limit[k], "slice limit"))
      return false;
    if (accept(p, ':') && !parse_i64(p, &sl->stride[k], "slice stride")) return false;
    if (sl->stride[k] < 1) return perr(p, pos, "slice stride must be positive");
    if (!expect(p, ']', "in slice")) return false;
    if (accept(p, ',')) continue;
    return expect(p, '}', "to close slice");
  }
}

/* `0_0x1_2_1` (LOW_HIGH[_INTERIOR] per dimension); may be empty for scalars. */
static bool parse_padding(Parser *p, PadDims *pd) {
  pd->n = 0;
  int c = peek(p);
  if (!(c == '-' || c == '+' || (c >= '0' && c <= '9'))) return true;
  for (;;) {
    size_t pos = p->pos;
    if (pd->n == HLO_MAX_RANK)
      return perr(p, pos, "padding has more than %d dimensions", HLO_MAX_RANK);
    int k = pd->n++;
    if (!parse_i64(p, &pd->lo[k], "padding")) return false;
    if (peek_raw(p) != '_') return perr(p, p->pos, "expected LOW_HIGH in padding");
    p->pos++;
    if (!parse_i64(p, &pd->hi[k], "padding")) return false;
    if (peek_raw(p) == '_') {
      p->pos++;
      if (!parse_i64(p, &pd->interior[k], "padding")) return false;
      if (pd->interior[k] < 0) return perr(p, pos, "negative interior padding");
    }
    if (peek_raw(p) != 'x') return true;
    p->pos++;
  }
}

static bool parse_precision(Parser *p, IList *l) {
  l->n = 0;
  if (!expect(p, '{', "to open operand_precision")) return false;
  if (accept(p, '}')) return true;
  for (;;) {
    Ref r;
    if (!name(p, &r, "precision")) return false;
    int v;
    if (r.n == 7 && !strncasecmp(r.s, "default", 7))
      v = 0;
    else if (r.n == 4 && !strncasecmp(r.s, "high", 4))
      v = 1;
    else if (r.n == 7 && !strncasecmp(r.s, "highest", 7))
      v = 2;
    else
      return perr(p, r.pos, "unknown precision '%.*s'", r.n, r.s);
    if (l->n == HLO_MAX_RANK) return perr(p, r.pos, "too many operand precisions");
    l->v[l->n++] = v;
    if (accept(p, ',')) continue;
    return expect(p, '}', "to close operand_precision");
  }
}

/* `{op_type="..." op_name="..." source_file="..." source_line=N ...}` */
static bool parse_metadata(Parser *p, HInstr *in) {
  if (!expect(p, '{', "to open metadata")) return false;
  while (!accept(p, '}')) {
    if (accept(p, ',')) continue;
    Ref key;
    if (!name(p, &key, "metadata field")) return false;
    if (!expect(p, '=', "after metadata field")) return false;
    if (ref_is(key, "op_type")) {
      if (!parse_string(p, &in->op_type, "op_type")) return false;
    } else if (ref_is(key, "op_name")) {
      if (!parse_string(p, &in->op_name, "op_name")) return false;
    } else if (ref_is(key, "source_file")) {
      if (!parse_string(p, &in->source_file, "source_file")) return false;
    } else if (ref_is(key, "source_line")) {
      if (!parse_i64(p, &in->source_line, "source_line")) return false;
    } else {
      const char *s;
      size_t n;
      if (!raw_value(p, &s, &n)) return false;
    }
  }
  return true;
}

static bool parse_comp_ref(Parser *p, Ref *r) { return name(p, r, "computation name"); }

static bool parse_comp_list(Parser *p, Vec *v) {
  if (!expect(p, '{', "to open a computation list")) return false;
  if (accept(p, '}')) return true;
  for (;;) {
    Ref *r = vec_push(v, sizeof(Ref));
    if (!parse_comp_ref(p, r)) return false;
    if (accept(p, ',')) continue;
    return expect(p, '}', "to close a computation list");
  }
}

/* ------------------------------------------------------------------ instructions */

static bool op_uses_dims(HOp op) {
  return op == OP_BROADCAST || op == OP_TRANSPOSE || op == OP_REDUCE || op == OP_REVERSE ||
         op == OP_CONCATENATE || op == OP_SORT || op == OP_MAP;
}

static bool op_uses_window(HOp op) {
  return op == OP_CONVOLUTION || op == OP_REDUCE_WINDOW || op == OP_SELECT_AND_SCATTER ||
         op == OP_CUSTOM_CALL;
}

static bool op_uses_to_apply(HOp op) {
  return op != OP_WHILE && op != OP_CONDITIONAL && op != OP_SELECT_AND_SCATTER && op != OP_FUSION &&
         op != OP_CUSTOM_CALL && op != OP_ASYNC_START && op != OP_ASYNC_UPDATE &&
         op != OP_ASYNC_DONE;
}

static bool op_uses_calls(HOp op) {
  return op == OP_FUSION || op == OP_ASYNC_START || op == OP_ASYNC_UPDATE || op == OP_ASYNC_DONE;
}

/* Called computations by role, collected while reading the attributes. */
typedef struct CallRefs {
  Ref to_apply, calls, cond, body, tru, fals, sel, scat; /* n == 0 when absent */
  bool has_branches, has_called; /* branch_computations / called_computations given */
} CallRefs;

static GatherDims *gather_of(Parser *p, HInstr *in) {
  if (!in->gather) in->gather = hlo_arena_alloc(p->m->arena, sizeof(GatherDims));
  return in->gather;
}

static ScatterDims *scatter_of(Parser *p, HInstr *in) {
  if (!in->scatter) in->scatter = hlo_arena_alloc(p->m->arena, sizeof(ScatterDims));
  return in->scatter;
}

static DotDims *dot_of(Parser *p, HInstr *in) {
  if (!in->dot) in->dot = hlo_arena_alloc(p->m->arena, sizeof(DotDims));
  return in->dot;
}

/* One `name=value` attribute of instruction in; key already read, '=' consumed. */
static bool parse_attr(Parser *p, HInstr *in, Ref key, CallRefs *cr) {
  HOp op = in->op;
  HArena *a = p->m->arena;
  int64_t v;
#define KEY(s) ref_is(key, s)
  if (KEY("metadata")) return parse_metadata(p, in);
  if (KEY("backend_config")) {
    if (peek(p) == '"') return parse_string(p, &in->backend_config, "backend_config");
    const char *s;
    size_t n;
    if (!raw_value(p, &s, &n)) return false;
    in->backend_config = hlo_arena_strndup(a, s, n);
    return true;
  }
  if (KEY("control-predecessors")) {
    if (!expect(p, '{', "to open control-predecessors")) return false;
    if (accept(p, '}')) return true;
    for (;;) {
      Ref *r = vec_push(&p->v_ctrl, sizeof(Ref));
      if (!name(p, r, "control predecessor name")) return false;
      if (accept(p, ',')) continue;
      return expect(p, '}', "to close control-predecessors");
    }
  }
  if (KEY("dimensions") && op_uses_dims(op)) return parse_ilist(p, &in->dims, "dimensions");
  if (KEY("index") && op == OP_GET_TUPLE_ELEMENT) {
    if (!parse_i64(p, &in->tuple_index, "index")) return false;
    return in->tuple_index >= 0 || perr(p, key.pos, "negative tuple index");
  }
  if (KEY("iota_dimension") && op == OP_IOTA) return parse_i64(p, &in->iota_dim, "iota_dimension");
  if (KEY("dynamic_slice_sizes") && op == OP_DYNAMIC_SLICE)
    return parse_ilist(p, &in->dslice_sizes, "dynamic_slice_sizes");
  if (KEY("slice") && op == OP_SLICE) {
    in->slice = hlo_arena_alloc(a, sizeof(SliceDims));
    return parse_slice(p, in->slice);
  }
  if (KEY("padding") && op == OP_PAD) {
    in->pad = hlo_arena_alloc(a, sizeof(PadDims));
    return parse_padding(p, in->pad);
  }
  if ((KEY("direction") || KEY("type")) && op == OP_COMPARE) {
    Ref r;
    if (!name(p, &r, key.s[0] == 'd' ? "comparison direction" : "comparison type")) return false;
    if (KEY("direction") ? !hlo_cmp_dir_from_name(r.s, (size_t)r.n, &in->cmp_dir)
                         : !hlo_cmp_type_from_name(r.s, (size_t)r.n, &in->cmp_type))
      return perr(p, r.pos, "unknown comparison %s '%.*s'", KEY("direction") ? "direction" : "type",
                  r.n, r.s);
    return true;
  }
  if (KEY("window") && op_uses_window(op)) {
    in->window = hlo_arena_alloc(a, sizeof(Window));
    return parse_window(p, in->window);
  }
  if (KEY("dim_labels") && (op == OP_CONVOLUTION || op == OP_CUSTOM_CALL)) {
    in->conv = hlo_arena_alloc(a, sizeof(ConvDims));
    return parse_dim_labels(p, in->conv);
  }
  if ((KEY("feature_group_count") || KEY("batch_group_count")) &&
      (op == OP_CONVOLUTION || op == OP_CUSTOM_CALL)) {
    int64_t *dst = KEY("feature_group_count") ? &in->feature_groups : &in->batch_groups;
    size_t pos = p->pos;
    if (!parse_i64(p, dst, "group count")) return false;
    return *dst >= 1 || perr(p, pos, "group count must be positive");
  }
  if (op == OP_DOT) {
    if (KEY("lhs_batch_dims")) return parse_ilist(p, &dot_of(p, in)->lhs_batch, "lhs_batch_dims");
    if (KEY("rhs_batch_dims")) return parse_ilist(p, &dot_of(p, in)->rhs_batch, "rhs_batch_dims");
    if (KEY("lhs_contracting_dims"))
      return parse_ilist(p, &dot_of(p, in)->lhs_contract, "lhs_contracting_dims");
    if (KEY("rhs_contracting_dims"))
      return parse_ilist(p, &dot_of(p, in)->rhs_contract, "rhs_contracting_dims");
  }
  if (KEY("operand_precision") && (op == OP_DOT || op == OP_CONVOLUTION))
    return parse_precision(p, &in->precision);
  if (KEY("algorithm") && op == OP_DOT) {
    Ref r;
    if (!name(p, &r, "dot algorithm")) return false;
    if (!hlo_dot_alg_from_name(r.s, (size_t)r.n, &in->dot_alg))
      return perr(p, r.pos, "unknown dot algorithm '%.*s'", r.n, r.s);
    return true;
  }
  if (op == OP_GATHER) {
    if (KEY("offset_dims")) return parse_ilist(p, &gather_of(p, in)->offset_dims, "offset_dims");
    if (KEY("collapsed_slice_dims"))
      return parse_ilist(p, &gather_of(p, in)->collapsed_slice_dims, "collapsed_slice_dims");
    if (KEY("start_index_map"))
      return parse_ilist(p, &gather_of(p, in)->start_index_map, "start_index_map");
    if (KEY("operand_batching_dims"))
      return parse_ilist(p, &gather_of(p, in)->operand_batching_dims, "operand_batching_dims");
    if (KEY("start_indices_batching_dims"))
      return parse_ilist(p, &gather_of(p, in)->start_indices_batching_dims,
                         "start_indices_batching_dims");
    if (KEY("index_vector_dim"))
      return parse_i64(p, &gather_of(p, in)->index_vector_dim, "index_vector_dim");
    if (KEY("slice_sizes")) return parse_ilist(p, &gather_of(p, in)->slice_sizes, "slice_sizes");
  }
  if (op == OP_SCATTER) {
    if (KEY("update_window_dims"))
      return parse_ilist(p, &scatter_of(p, in)->update_window_dims, "update_window_dims");
    if (KEY("inserted_window_dims"))
      return parse_ilist(p, &scatter_of(p, in)->inserted_window_dims, "inserted_window_dims");
    if (KEY("scatter_dims_to_operand_dims"))
      return parse_ilist(p, &scatter_of(p, in)->scatter_dims_to_operand_dims,
                         "scatter_dims_to_operand_dims");
    if (KEY("input_batching_dims"))
      return parse_ilist(p, &scatter_of(p, in)->input_batching_dims, "input_batching_dims");
    if (KEY("scatter_indices_batching_dims"))
      return parse_ilist(p, &scatter_of(p, in)->scatter_indices_batching_dims,
                         "scatter_indices_batching_dims");
    if (KEY("index_vector_dim"))
      return parse_i64(p, &scatter_of(p, in)->index_vector_dim, "index_vector_dim");
    if (KEY("unique_indices")) return parse_bool(p, &in->unique_indices, "unique_indices");
  }
  if (KEY("indices_are_sorted") && (op == OP_GATHER || op == OP_SCATTER))
    return parse_bool(p, &in->indices_are_sorted, "indices_are_sorted");
  if (KEY("is_stable") && (op == OP_SORT || op == OP_TOPK))
    return parse_bool(p, &in->is_stable, "is_stable");
  if (KEY("fft_type") && op == OP_FFT) {
    Ref r;
    if (!name(p, &r, "fft type")) return false;
    if (!hlo_fft_type_from_name(r.s, (size_t)r.n, &in->fft_type))
      return perr(p, r.pos, "unknown fft type '%.*s'", r.n, r.s);
    return true;
  }
  if (KEY("fft_length") && op == OP_FFT) return parse_ilist(p, &in->fft_length, "fft_length");
  if (KEY("largest") && op == OP_TOPK) return parse_bool(p, &in->largest, "largest");
  if (KEY("k") && op == OP_TOPK) {
    size_t pos = p->pos;
    if (!parse_i64(p, &in->topk_k, "k")) return false;
    if (in->topk_k < 0) return perr(p, pos, "topk k %lld is negative", (long long)in->topk_k);
    return true;
  }
  if ((KEY("exponent_bits") || KEY("mantissa_bits")) && op == OP_REDUCE_PRECISION) {
    size_t pos = p->pos;
    if (!parse_i64(p, &v, "bit count")) return false;
    if (v < 0 || v > 255) return perr(p, pos, "bit count %lld out of range", (long long)v);
    *(KEY("exponent_bits") ? &in->exponent_bits : &in->mantissa_bits) = (int32_t)v;
    return true;
  }
  if (op == OP_BATCH_NORM_TRAINING || op == OP_BATCH_NORM_INFERENCE || op == OP_BATCH_NORM_GRAD) {
    if (KEY("epsilon")) {
      double d = 0;
      if (!parse_double(p, &d, true, "epsilon")) return false;
      in->epsilon = (float)d;
      return true;
    }
    if (KEY("feature_index")) return parse_i64(p, &in->feature_index, "feature_index");
  }
  if (KEY("kind") && op == OP_FUSION) {
    Ref r;
    if (!name(p, &r, "fusion kind")) return false;
    if (!hlo_fusion_kind_from_name(r.s, (size_t)r.n, &in->fusion_kind))
      return perr(p, r.pos, "unknown fusion kind '%.*s'", r.n, r.s);
    return true;
  }
  if (KEY("custom_call_target") && op == OP_CUSTOM_CALL)
    return parse_string(p, &in->custom_call_target, "custom_call_target");
  if (KEY("to_apply") && op_uses_to_apply(op)) return parse_comp_ref(p, &cr->to_apply);
  if (KEY("calls") && op_uses_calls(op)) return parse_comp_ref(p, &cr->calls);
  if (op == OP_WHILE && KEY("condition")) return parse_comp_ref(p, &cr->cond);
  if (op == OP_WHILE && KEY("body")) return parse_comp_ref(p, &cr->body);
  if (op == OP_CONDITIONAL && KEY("true_computation")) return parse_comp_ref(p, &cr->tru);
  if (op == OP_CONDITIONAL && KEY("false_computation")) return parse_comp_ref(p, &cr->fals);
  if (op == OP_CONDITIONAL && KEY("branch_computations")) {
    cr->has_branches = true;
    return parse_comp_list(p, &p->v_calls);
  }
  if (op == OP_SELECT_AND_SCATTER && KEY("select")) return parse_comp_ref(p, &cr->sel);
  if (op == OP_SELECT_AND_SCATTER && KEY("scatter")) return parse_comp_ref(p, &cr->scat);
  if (op == OP_CUSTOM_CALL && KEY("called_computations")) {
    cr->has_called = true;
    return parse_comp_list(p, &p->v_calls);
  }
#undef KEY
  /* anything else: verbatim */
  const char *s;
  size_t n;
  if (!raw_value(p, &s, &n)) return false;
  HAttr *at = vec_push(&p->v_attr, sizeof(HAttr));
  at->name = hlo_arena_strndup(a, key.s, (size_t)key.n);
  at->value = hlo_arena_strndup(a, s, n);
  return true;
}

/* Put the called computations of an instruction in calls[] order into p->v_calls. */
static bool order_calls(Parser *p, HInstr *in, CallRefs *cr, size_t pos) {
  Vec *v = &p->v_calls;
#define PUSH(r) (*(Ref *)vec_push(v, sizeof(Ref)) = (r))
  if (in->op == OP_WHILE) {
    if (!cr->body.n || !cr->cond.n) return perr(p, pos, "while needs condition= and body=");
    PUSH(cr->body);
    PUSH(cr->cond);
  } else if (in->op == OP_CONDITIONAL) {
    if (cr->has_branches) {
      if (cr->tru.n || cr->fals.n)
        return perr(p, pos, "conditional has both branch_computations and true/false_computation");
      if (v->n == 0) return perr(p, pos, "conditional needs at least one branch");
    } else {
      if (!cr->tru.n || !cr->fals.n)
        return perr(
            p, pos,
            "conditional needs true_computation= and false_computation= or branch_computations=");
      PUSH(cr->tru);
      PUSH(cr->fals);
    }
  } else if (in->op == OP_SELECT_AND_SCATTER) {
    if (!cr->sel.n || !cr->scat.n)
      return perr(p, pos, "select-and-scatter needs select= and scatter=");
    PUSH(cr->sel);
    PUSH(cr->scat);
  } else if (in->op == OP_FUSION) {
    if (!cr->calls.n) return perr(p, pos, "fusion needs calls=");
    PUSH(cr->calls);
  } else {
    /* called_computations (custom-call) are already in v; the rest have one to_apply/calls */
    if (cr->calls.n) PUSH(cr->calls);
    if (cr->to_apply.n) PUSH(cr->to_apply);
  }
#undef PUSH
  return true;
}

static Ref *copy_refs(Parser *p, const Vec *v) {
  if (!v->n) return NULL;
  return hlo_arena_memdup(p->scratch, v->a, sizeof(Ref) * (size_t)v->n);
}

static bool parse_instr(Parser *p, HComp *c, HInstr **root) {
  Ref nm;
  if (!name(p, &nm, "instruction name")) return false;
  bool is_root = false;
  if (ref_is(nm, "ROOT")) {
    is_root = true;
    if (!name(p, &nm, "instruction name")) return false;
  }
  const char *iname = hlo_arena_strndup(p->m->arena, nm.s, (size_t)nm.n);
  p->instr = iname;
  if (map_get(&p->names, nm.s, nm.n))
    return perr(p, nm.pos, "duplicate instruction name '%s'", iname);
  if (!expect(p, '=', "after instruction name")) return false;
  Shape sh;
  if (!parse_shape(p, &sh)) return false;
  Ref opn;
  if (!name(p, &opn, "opcode")) return false;
  HOp op;
  if (!hlo_op_from_name(opn.s, (size_t)opn.n, &op))
    return perr(p, opn.pos, "unknown opcode '%.*s'", opn.n > 40 ? 40 : opn.n, opn.s);
  HInstr *in = hlo_instr_new(c, op, iname, NULL, 0, NULL);
  in->name = iname;
  in->shape = sh;
  map_put(&p->names, iname, nm.n, in);
  if (is_root) {
    if (*root) return perr(p, nm.pos, "second ROOT in computation");
    *root = in;
  }
  p->v_ops.n = p->v_ctrl.n = p->v_calls.n = p->v_attr.n = 0;

  if (!expect(p, '(', "after opcode")) return false;
  if (op == OP_PARAMETER) {
    if (peek(p) == ')') return perr(p, p->pos, "missing parameter number");
    size_t pos = p->pos;
    if (!parse_i64(p, &in->param_num, "parameter number")) return false;
    if (in->param_num < 0) return perr(p, pos, "negative parameter number");
    if (!expect(p, ')', "after parameter number")) return false;
  } else if (op == OP_CONSTANT) {
    if (!parse_literal(p, &in->shape, &in->literal)) return false;
    if (!expect(p, ')', "after constant literal")) return false;
  } else if (!accept(p, ')')) {
    for (;;) {
      /* long form: an operand shape before the name */
      int ch = peek(p);
      if (ch == '(') {
        Shape tmp;
        if (!parse_shape(p, &tmp)) return false;
      } else if (ch != '%') {
        size_t save = p->pos;
        while (p->pos < p->len && is_name_char((unsigned char)p->t[p->pos]))
          p->pos++;
        bool is_shape = peek_raw(p) == '[';
        p->pos = save;
        if (is_shape) {
          Shape tmp;
          if (!parse_shape(p, &tmp)) return false;
        }
      }
      Ref *r = vec_push(&p->v_ops, sizeof(Ref));
      if (!name(p, r, "operand name")) return false;
      if (accept(p, ',')) continue;
      if (!expect(p, ')', "after operands")) return false;
      break;
    }
  }

  CallRefs cr;
  memset(&cr, 0, sizeof cr);
  while (accept(p, ',')) {
    Ref key;
    if (!name(p, &key, "attribute name")) return false;
    if (!expect(p, '=', "after attribute name")) return false;
    if (!parse_attr(p, in, key, &cr)) return false;
  }
  if (!order_calls(p, in, &cr, nm.pos)) return false;

  if (p->npi == p->capi) {
    p->capi = p->capi ? p->capi * 2 : 256;
    p->pi = xrealloc(p->pi, sizeof(PInstr) * (size_t)p->capi);
  }
  PInstr *pi = &p->pi[p->npi++];
  pi->in = in;
  pi->pos = nm.pos;
  pi->nops = p->v_ops.n;
  pi->ops = copy_refs(p, &p->v_ops);
  pi->nctrl = p->v_ctrl.n;
  pi->ctrl = copy_refs(p, &p->v_ctrl);
  pi->ncalls = p->v_calls.n;
  pi->calls = copy_refs(p, &p->v_calls);
  if (p->v_attr.n) {
    in->nraw = p->v_attr.n;
    in->raw = hlo_arena_memdup(p->m->arena, p->v_attr.a, sizeof(HAttr) * (size_t)p->v_attr.n);
  }
  p->instr = NULL;
  return true;
}

/* ------------------------------------------------------------------ computations */

/* Sort c's instructions so operands and control predecessors come first (stable DFS). */
static bool sort_instrs(Parser *p, HComp *c, PInstr *pis) {
  int n = c->ninstrs;
  bool ordered = true;
  for (int i = 0; i < n && ordered; i++) {
    HInstr *in = c->instrs[i];
    for (int k = 0; k < in->nops; k++)
      if (in->ops[k]->idx >= i) ordered = false;
    for (int k = 0; k < in->nctrl; k++)
      if (in->ctrl[k]->idx >= i) ordered = false;
  }
  if (ordered) return true;
  char *state = hlo_arena_alloc(p->scratch, (size_t)n); /* 0 new, 1 open, 2 done */
  int *stack = hlo_arena_alloc(p->scratch, sizeof(int) * (size_t)n);
  int *next = hlo_arena_alloc(p->scratch, sizeof(int) * (size_t)n);
  HInstr **out = hlo_arena_alloc(p->m->arena, sizeof(HInstr *) * (size_t)c->cap);
  int nout = 0;
  for (int r = 0; r < n; r++) {
    if (state[r]) continue;
    int sp = 0;
    stack[sp++] = r;
    state[r] = 1;
    next[r] = 0;
    while (sp) {
      int i = stack[sp - 1];
      HInstr *in = c->instrs[i];
      int k = next[i]++;
      if (k < in->nops + in->nctrl) {
        HInstr *d = k < in->nops ? in->ops[k] : in->ctrl[k - in->nops];
        if (state[d->idx] == 1) {
          p->instr = in->name;
          return perr(p, pis[i].pos, "cycle: instruction '%s' depends on itself through '%s'",
                      in->name, d->name);
        }
        if (state[d->idx] == 0) {
          state[d->idx] = 1;
          next[d->idx] = 0;
          stack[sp++] = d->idx;
        }
      } else {
        state[i] = 2;
        out[nout++] = in;
        sp--;
      }
    }
  }
  c->instrs = out;
  for (int i = 0; i < n; i++)
    out[i]->idx = i;
  return true;
}

/* Resolve operand and control names of the instructions pis[0..n) of c; order; find root. */
static bool finish_comp(Parser *p, HComp *c, PInstr *pis, int n, HInstr *root) {
  HArena *a = p->m->arena;
  for (int i = 0; i < n; i++) {
    PInstr *pi = &pis[i];
    HInstr *in = pi->in;
    p->instr = in->name;
    in->nops = pi->nops;
    in->ops = hlo_arena_alloc(a, sizeof(HInstr *) * (size_t)(pi->nops ? pi->nops : 1));
    for (int k = 0; k < pi->nops; k++) {
      Ref r = pi->ops[k];
      in->ops[k] = map_get(&p->names, r.s, r.n);
      if (!in->ops[k]) return perr(p, r.pos, "undefined operand '%.*s'", r.n, r.s);
    }
    in->nctrl = pi->nctrl;
    in->ctrl = hlo_arena_alloc(a, sizeof(HInstr *) * (size_t)(pi->nctrl ? pi->nctrl : 1));
    for (int k = 0; k < pi->nctrl; k++) {
      Ref r = pi->ctrl[k];
      in->ctrl[k] = map_get(&p->names, r.s, r.n);
      if (!in->ctrl[k]) return perr(p, r.pos, "undefined control predecessor '%.*s'", r.n, r.s);
    }
  }
  p->instr = NULL;
  for (int i = 0; i < c->ninstrs; i++)
    c->instrs[i]->idx = i;
  if (!sort_instrs(p, c, pis)) return false;
  c->root = root ? root : c->instrs[c->ninstrs - 1];
  /* parameter numbers must be 0..k-1, each once */
  int np = 0;
  for (int i = 0; i < c->ninstrs; i++)
    np += c->instrs[i]->op == OP_PARAMETER;
  bool *seen = hlo_arena_alloc(p->scratch, (size_t)(np ? np : 1));
  for (int i = 0; i < n; i++) {
    HInstr *in = pis[i].in;
    if (in->op != OP_PARAMETER) continue;
    p->instr = in->name;
    if (in->param_num >= np)
      return perr(p, pis[i].pos,
                  "parameter number %lld out of range: the computation has %d parameters",
                  (long long)in->param_num, np);
    if (seen[in->param_num])
      return perr(p, pis[i].pos, "duplicate parameter number %lld", (long long)in->param_num);
    seen[in->param_num] = true;
  }
  p->instr = NULL;
  return true;
}

static bool parse_comp(Parser *p, bool is_entry) {
  Ref nm;
  if (!name(p, &nm, "computation name")) return false;
  if (nm.n == 9 && !memcmp(nm.s, "HloModule", 9))
    return perr(p, nm.pos,
                "a second HloModule: the file holds several modules (lit's '// -----' "
                "separators, --split-input-file); hloc reads one module a file");
  if (map_get(&p->comps, nm.s, nm.n))
    return perr(p, nm.pos, "duplicate computation name '%.*s'", nm.n, nm.s);
  char *cname = hlo_arena_strndup(p->m->arena, nm.s, (size_t)nm.n);
  HComp *c = hlo_comp_new(p->m, cname);
  map_put(&p->comps, c->name, nm.n, c);
  p->comp = c->name;
  if (is_entry) {
    if (p->entry) return perr(p, nm.pos, "second ENTRY computation");
    p->entry = c;
  }
  if (accept(p, '(')) { /* signature: names and shapes, informational */
    if (!accept(p, ')')) {
      for (;;) {
        Ref pn;
        Shape tmp;
        if (!name(p, &pn, "parameter name") || !expect(p, ':', "after parameter name") ||
            !parse_shape(p, &tmp))
          return false;
        if (accept(p, ',')) continue;
        if (!expect(p, ')', "after computation parameters")) return false;
        break;
      }
    }
    if (!expect(p, '-', "before the result shape")) return false;
    if (peek_raw(p) != '>') return perr(p, p->pos, "expected '->' before the result shape");
    p->pos++;
    Shape tmp;
    if (!parse_shape(p, &tmp)) return false;
  }
  if (!expect(p, '{', "to open the computation body")) return false;
  map_clear(&p->names);
  int first = p->npi;
  HInstr *root = NULL;
  while (!accept(p, '}')) {
    if (peek(p) < 0) return perr(p, p->pos, "unexpected end of input inside computation");
    if (!parse_instr(p, c, &root)) return false;
  }
  if (c->ninstrs == 0) return perr(p, nm.pos, "computation has no instructions");
  if (!finish_comp(p, c, p->pi + first, p->npi - first, root)) return false;
  p->comp = NULL;
  return true;
}

/* ------------------------------------------------------------------ module */

/* Shape index `{}` or `{1,2}`. */
static bool parse_shape_index(Parser *p, IList *l) { return parse_ilist(p, l, "shape index"); }

/* `{ {0}: (0, {}, may-alias), {1}: (1, {}) }` */
static bool parse_alias(Parser *p) {
  HModule *m = p->m;
  Vec v = {0};
  bool ok = false;
  if (!expect(p, '{', "to open input_output_alias")) goto out;
  if (!accept(p, '}')) {
    for (;;) {
      HAlias *al = vec_push(&v, sizeof(HAlias));
      memset(al, 0, sizeof *al);
      al->kind = 1;
      if (!parse_shape_index(p, &al->out_index) || !expect(p, ':', "in input_output_alias") ||
          !expect(p, '(', "in input_output_alias") ||
          !parse_i64(p, &al->param, "parameter number") ||
          !expect(p, ',', "in input_output_alias") || !parse_shape_index(p, &al->param_index))
        goto out;
      if (accept(p, ',')) {
        Ref k;
        if (!name(p, &k, "alias kind")) goto out;
        if (ref_is(k, "may-alias"))
          al->kind = 1;
        else if (ref_is(k, "must-alias"))
          al->kind = 2;
        else {
          perr(p, k.pos, "unknown alias kind '%.*s'", k.n, k.s);
          goto out;
        }
      }
      if (!expect(p, ')', "in input_output_alias")) goto out;
      if (accept(p, ',')) continue;
      if (!expect(p, '}', "to close input_output_alias")) goto out;
      break;
    }
  }
  m->nalias = v.n;
  m->alias = hlo_arena_memdup(m->arena, v.a, sizeof(HAlias) * (size_t)v.n);
  ok = true;
out:
  free(v.a);
  return ok;
}

/* `{(shape, ...)->shape}` */
static bool parse_entry_layout(Parser *p) {
  HModule *m = p->m;
  if (!expect(p, '{', "to open entry_computation_layout") ||
      !expect(p, '(', "in entry_computation_layout"))
    return false;
  int cap = 0;
  m->nentry_layout = 0;
  if (!accept(p, ')')) {
    for (;;) {
      if (m->nentry_layout == cap) {
        cap = cap ? cap * 2 : 8;
        Shape *ns = hlo_arena_alloc(m->arena, sizeof(Shape) * (size_t)cap);
        if (m->nentry_layout)
          memcpy(ns, m->entry_layout_params, sizeof(Shape) * (size_t)m->nentry_layout);
        m->entry_layout_params = ns;
      }
      if (!parse_shape(p, &m->entry_layout_params[m->nentry_layout])) return false;
      m->nentry_layout++;
      if (accept(p, ',')) continue;
      if (!expect(p, ')', "in entry_computation_layout")) return false;
      break;
    }
  }
  if (!expect(p, '-', "in entry_computation_layout")) return false;
  if (peek_raw(p) != '>') return perr(p, p->pos, "expected '->' in entry_computation_layout");
  p->pos++;
  if (!parse_shape(p, &m->entry_layout_result)) return false;
  if (!expect(p, '}', "to close entry_computation_layout")) return false;
  m->has_entry_layout = true;
  return true;
}

/* FileNames / FunctionNames / FileLocations / StackFrames: `N "text"` or `N {...}` lines. */
static bool skip_section(Parser *p) {
  for (;;) {
    int c = peek(p);
    if (!(c >= '0' && c <= '9')) return true;
    int64_t id;
    if (!parse_i64(p, &id, "section entry id")) return false;
    if (peek(p) == '"') {
      if (!skip_string(p)) return false;
    } else if (peek(p) == '{') {
      const char *s;
      size_t n;
      if (!raw_value(p, &s, &n)) return false;
    } else {
      return perr(p, p->pos, "expected a string or {...} in a debug-info section, found %s",
                  near_text(p, p->pos));
    }
  }
}

static bool is_section_name(Ref r) {
  return ref_is(r, "FileNames") || ref_is(r, "FunctionNames") || ref_is(r, "FileLocations") ||
         ref_is(r, "StackFrames");
}

/* Order m->comps callees before callers (stable DFS); set is_fusion; resolve calls. */
static bool resolve_calls(Parser *p) {
  HModule *m = p->m;
  for (int i = 0; i < p->npi; i++) {
    PInstr *pi = &p->pi[i];
    HInstr *in = pi->in;
    if (!pi->ncalls) continue;
    p->comp = in->parent->name;
    p->instr = in->name;
    HComp **cs = hlo_arena_alloc(m->arena, sizeof(HComp *) * (size_t)pi->ncalls);
    for (int k = 0; k < pi->ncalls; k++) {
      Ref r = pi->calls[k];
      cs[k] = map_get(&p->comps, r.s, r.n);
      if (!cs[k]) return perr(p, r.pos, "undefined computation '%.*s'", r.n, r.s);
      if (in->op == OP_FUSION) cs[k]->is_fusion = true;
    }
    in->ncalls = pi->ncalls;
    in->calls = cs;
  }
  p->comp = p->instr = NULL;

  int n = m->ncomps;
  for (int i = 0; i < n; i++)
    m->comps[i]->idx = i;
  char *state = hlo_arena_alloc(p->scratch, (size_t)n);
  int *stack = hlo_arena_alloc(p->scratch, sizeof(int) * (size_t)n);
  int *ni = hlo_arena_alloc(p->scratch, sizeof(int) * (size_t)n); /* next instruction */
  int *nc = hlo_arena_alloc(p->scratch, sizeof(int) * (size_t)n); /* next call in it */
  HComp **out = hlo_arena_alloc(m->arena, sizeof(HComp *) * (size_t)m->cap);
  int nout = 0;
  for (int r = 0; r < n; r++) {
    if (state[r]) continue;
    int sp = 0;
    stack[sp++] = r;
    state[r] = 1;
    while (sp) {
      int ci = stack[sp - 1];
      HComp *c = m->comps[ci];
      HComp *callee = NULL;
      while (ni[ci] < c->ninstrs && !callee) {
        HInstr *in = c->instrs[ni[ci]];
        if (nc[ci] < in->ncalls) {
          callee = in->calls[nc[ci]++];
        } else {
          ni[ci]++;
          nc[ci] = 0;
        }
      }
      if (!callee) {
        state[ci] = 2;
        out[nout++] = c;
        sp--;
        continue;
      }
      if (state[callee->idx] == 1) {
        p->comp = c->name;
        return perr(p, 0, "computation '%s' calls itself (recursion through '%s')", callee->name,
                    c->name);
      }
      if (state[callee->idx] == 0) {
        state[callee->idx] = 1;
        stack[sp++] = callee->idx;
      }
    }
  }
  m->comps = out;
  return true;
}

/* The computations to the end of the text; the entry; calls resolved. */
static bool parse_comps(Parser *p) {
  HModule *m = p->m;
  while (peek(p) >= 0) {
    size_t save = p->pos;
    Ref r;
    if (!name(p, &r, "computation")) return false;
    if (ref_is(r, "ENTRY")) {
      if (!parse_comp(p, true)) return false;
      continue;
    }
    if (is_section_name(r)) {
      int c = peek(p);
      if (c != '{' && c != '(') {
        if (!skip_section(p)) return false;
        continue;
      }
    }
    p->pos = save;
    if (!parse_comp(p, false)) return false;
  }
  if (m->ncomps == 0) return perr(p, p->pos, "module has no computations");
  m->entry = p->entry ? p->entry : m->comps[m->ncomps - 1];
  if (!resolve_calls(p)) return false;
  hlo_module_renumber(m);
  return true;
}

/* The module: its header ("HloModule NAME" and attributes) unless it starts with a computation
 * (XLA's parser takes a module without one: named "module", the entry the ENTRY computation or
 * else the last), then the computations. */
static bool parse_module(Parser *p) {
  Ref kw;
  size_t start = p->pos;
  if (!name(p, &kw, "'HloModule' or a computation")) return false;
  if (!ref_is(kw, "HloModule")) {
    p->pos = start;
    return parse_comps(p);
  }
  Ref mn;
  if (!name(p, &mn, "module name")) return false;
  HModule *m = p->m;
  m->name = hlo_arena_strndup(m->arena, mn.s, (size_t)mn.n);
  Vec raw = {0};
  bool ok = true;
  while (ok && accept(p, ',')) {
    Ref key;
    if (!name(p, &key, "module attribute name") || !expect(p, '=', "after module attribute name")) {
      ok = false;
    } else if (ref_is(key, "entry_computation_layout")) {
      ok = parse_entry_layout(p);
    } else if (ref_is(key, "input_output_alias")) {
      ok = parse_alias(p);
    } else {
      const char *s;
      size_t n;
      ok = raw_value(p, &s, &n);
      if (ok) {
        HAttr *at = vec_push(&raw, sizeof(HAttr));
        at->name = hlo_arena_strndup(m->arena, key.s, (size_t)key.n);
        at->value = hlo_arena_strndup(m->arena, s, n);
      }
    }
  }
  if (raw.n) {
    m->nraw = raw.n;
    m->raw = hlo_arena_memdup(m->arena, raw.a, sizeof(HAttr) * (size_t)raw.n);
  }
  free(raw.a);
  return ok && parse_comps(p);
}
HModule *hlo_parse_text(const char *text, size_t len, const char *file, HErr *err) {
  HErr local = {0};
  Parser p;
  memset(&p, 0, sizeof p);
  p.t = text ? text : "";
  p.len = text ? len : 0;
  p.file = file ? file : "<input>";
  p.err = err ? err : &local;
  p.m = hlo_module_new("module", p.file);
  p.scratch = hlo_arena_new();
  bool ok = parse_module(&p);
  if (!ok && !p.err->set) perr(&p, p.pos, "parse error");
  hlo_arena_free(p.scratch);
  map_free(&p.comps);
  map_free(&p.names);
  free(p.pi);
  free(p.v_ops.a);
  free(p.v_ctrl.a);
  free(p.v_calls.a);
  free(p.v_attr.a);
  if (!ok) {
    hlo_module_free(p.m);
    return NULL;
  }
  return p.m;
}
