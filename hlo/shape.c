/* hlo/shape.c: array and tuple shapes, layouts, and their text form.
 *
 * A Shape is a small value type; only tuple element arrays live in an arena. Comparisons come
 * in two strengths: logical (type and dims) and physical (also the minor_to_major layout). */
#include "hlo.h"

#include <string.h>

Shape hlo_shape_array(DType dt, int rank, const int64_t *dims) {
  Shape s;
  memset(&s, 0, sizeof s);
  s.dt = dt;
  s.rank = rank;
  for (int i = 0; i < rank; i++)
    s.dims[i] = dims[i];
  hlo_shape_set_default_layout(&s);
  return s;
}

Shape hlo_shape_scalar(DType dt) { return hlo_shape_array(dt, 0, NULL); }

Shape hlo_shape_tuple(HArena *a, int n, const Shape *elems) {
  Shape s;
  memset(&s, 0, sizeof s);
  s.dt = DT_TUPLE;
  s.ntuple = n;
  s.tuple = hlo_arena_alloc(a, sizeof(Shape) * (size_t)(n ? n : 1));
  for (int i = 0; i < n; i++)
    hlo_shape_copy(a, &s.tuple[i], &elems[i]);
  return s;
}

void hlo_shape_copy(HArena *a, Shape *dst, const Shape *src) {
  Shape tmp = *src;
  if (src->dt == DT_TUPLE) {
    tmp.tuple = hlo_arena_alloc(a, sizeof(Shape) * (size_t)(src->ntuple ? src->ntuple : 1));
    for (int i = 0; i < src->ntuple; i++)
      hlo_shape_copy(a, &tmp.tuple[i], &src->tuple[i]);
  }
  *dst = tmp;
}

void hlo_shape_set_default_layout(Shape *s) {
  if (s->dt == DT_TUPLE) {
    for (int i = 0; i < s->ntuple; i++)
      hlo_shape_set_default_layout(&s->tuple[i]);
    return;
  }
  s->has_layout = s->dt != DT_TOKEN;
  for (int i = 0; i < s->rank; i++)
    s->m2m[i] = (int8_t)(s->rank - 1 - i);
}

bool hlo_shape_is_array(const Shape *s) { return s->dt != DT_TUPLE && s->dt != DT_TOKEN; }
bool hlo_shape_is_tuple(const Shape *s) { return s->dt == DT_TUPLE; }

int hlo_shape_leaves(const Shape *s) {
  if (s->dt != DT_TUPLE) return 1;
  int n = 0;
  for (int i = 0; i < s->ntuple; i++)
    n += hlo_shape_leaves(&s->tuple[i]);
  return n;
}

int hlo_shape_leaf_shapes(const Shape *s, const Shape **out, int n) {
  if (s->dt != DT_TUPLE) {
    out[n] = s;
    return n + 1;
  }
  for (int i = 0; i < s->ntuple; i++)
    n = hlo_shape_leaf_shapes(&s->tuple[i], out, n);
  return n;
}

int64_t hlo_shape_elems(const Shape *s) {
  int64_t n = 1;
  for (int i = 0; i < s->rank; i++)
    n *= s->dims[i];
  return n;
}

size_t hlo_shape_bytes(const Shape *s) {
  if (!hlo_shape_is_array(s)) return 0;
  return (size_t)hlo_shape_elems(s) * hlo_dtype_size(s->dt);
}

bool hlo_shape_eq(const Shape *a, const Shape *b) {
  if (a->dt != b->dt) return false;
  if (a->dt == DT_TUPLE) {
    if (a->ntuple != b->ntuple) return false;
    for (int i = 0; i < a->ntuple; i++)
      if (!hlo_shape_eq(&a->tuple[i], &b->tuple[i])) return false;
    return true;
  }
  return hlo_shape_same_dims(a, b);
}

bool hlo_shape_same_dims(const Shape *a, const Shape *b) {
  if (a->rank != b->rank) return false;
  for (int i = 0; i < a->rank; i++)
    if (a->dims[i] != b->dims[i]) return false;
  return true;
}

bool hlo_layout_is_default(const Shape *s) {
  if (!s->has_layout) return true;
  for (int i = 0; i < s->rank; i++)
    if (s->m2m[i] != s->rank - 1 - i) return false;
  return true;
}

bool hlo_shape_has_complex(const Shape *s) {
  if (s->dt != DT_TUPLE) return hlo_dtype_is_complex(s->dt);
  for (int i = 0; i < s->ntuple; i++)
    if (hlo_shape_has_complex(&s->tuple[i])) return true;
  return false;
}

bool hlo_shape_eq_layout(const Shape *a, const Shape *b) {
  if (!hlo_shape_eq(a, b)) return false;
  if (a->dt == DT_TUPLE) {
    for (int i = 0; i < a->ntuple; i++)
      if (!hlo_shape_eq_layout(&a->tuple[i], &b->tuple[i])) return false;
    return true;
  }
  if (hlo_layout_is_default(a) != hlo_layout_is_default(b)) return false;
  if (a->has_layout && b->has_layout)
    for (int i = 0; i < a->rank; i++)
      if (a->m2m[i] != b->m2m[i]) return false;
  return true;
}

void hlo_shape_strides(const Shape *s, int64_t *strides) {
  int64_t st = 1;
  for (int i = s->rank - 1; i >= 0; i--) {
    strides[i] = st;
    st *= s->dims[i];
  }
}

static int put(char *buf, size_t n, size_t *k, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int put(char *buf, size_t n, size_t *k, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int w = vsnprintf(*k < n ? buf + *k : NULL, *k < n ? n - *k : 0, fmt, ap);
  va_end(ap);
  if (w > 0) *k += (size_t)w;
  return w;
}

static void shape_print(char *buf, size_t n, size_t *k, const Shape *s, bool with_layout) {
  if (s->dt == DT_TUPLE) {
    put(buf, n, k, "(");
    for (int i = 0; i < s->ntuple; i++) {
      if (i) put(buf, n, k, ", ");
      shape_print(buf, n, k, &s->tuple[i], with_layout);
    }
    put(buf, n, k, ")");
    return;
  }
  put(buf, n, k, "%s[", hlo_dtype_name(s->dt));
  for (int i = 0; i < s->rank; i++)
    put(buf, n, k, "%s%lld", i ? "," : "", (long long)s->dims[i]);
  put(buf, n, k, "]");
  if (with_layout && s->has_layout && s->dt != DT_TOKEN) {
    put(buf, n, k, "{");
    for (int i = 0; i < s->rank; i++)
      put(buf, n, k, "%s%d", i ? "," : "", s->m2m[i]);
    if (s->layout_extra) put(buf, n, k, ":%s", s->layout_extra);
    put(buf, n, k, "}");
  }
}

int hlo_shape_snprint(char *buf, size_t n, const Shape *s, bool with_layout) {
  size_t k = 0;
  if (n) buf[0] = 0;
  shape_print(buf, n, &k, s, with_layout);
  return (int)k;
}

const char *hlo_shape_str(HArena *a, const Shape *s) {
  int n = hlo_shape_snprint(NULL, 0, s, true);
  char *b = hlo_arena_alloc(a, (size_t)n + 1);
  hlo_shape_snprint(b, (size_t)n + 1, s, true);
  return b;
}

const Shape *hlo_shape_subshape(const Shape *s, const int64_t *index, int depth) {
  for (int i = 0; i < depth; i++) {
    if (s->dt != DT_TUPLE || index[i] < 0 || index[i] >= s->ntuple) return NULL;
    s = &s->tuple[index[i]];
  }
  return s;
}
