/* hlo/compare.c: numerical comparison of results against reference outputs.
 *
 * Used by hloc-run --expect, by the fixture tests of the interpreter and of every target.
 * The tolerance test is the usual mixed one, |got - want| <= atol + rtol * |want|; NaN matches
 * NaN and infinities must match exactly. Complex elements are compared as one number: the
 * magnitude of the complex difference against the reference's magnitude (so an error in the
 * small part of a value with one large part is judged against the value's size, as numpy's
 * allclose does); an element with a NaN part matches one with a NaN part, and one with an
 * infinite part must equal the reference part by part. */
#include "hlo.h"

#include <complex.h>
#include <math.h>

/* Whether got and want (complex parts, real values with zero imaginary part) are both NaN. */
static bool both_nan(double _Complex g, double _Complex w) {
  return (isnan(creal(g)) || isnan(cimag(g))) && (isnan(creal(w)) || isnan(cimag(w)));
}

static bool any_inf(double _Complex z) { return isinf(creal(z)) || isinf(cimag(z)); }

/* Same value part by part, NaN matching NaN. */
static bool same_parts(double _Complex g, double _Complex w) {
  bool re = creal(g) == creal(w) || (isnan(creal(g)) && isnan(creal(w)));
  bool im = cimag(g) == cimag(w) || (isnan(cimag(g)) && isnan(cimag(w)));
  return re && im;
}

bool hlo_literal_compare(const Literal *got, const Literal *want, double rtol, double atol,
                         HCompare *out, HErr *err) {
  HCompare c = {0};
  if (!hlo_shape_is_array(&got->shape) || !hlo_shape_is_array(&want->shape) ||
      !hlo_shape_same_dims(&got->shape, &want->shape)) {
    char a[128], b[128];
    hlo_shape_snprint(a, sizeof a, &got->shape, false);
    hlo_shape_snprint(b, sizeof b, &want->shape, false);
    hlo_err(err, NULL, NULL, NULL, "result shape %s does not match expected shape %s", a, b);
    return false;
  }
  int64_t n = hlo_shape_elems(&got->shape);
  double worst_excess = -1;
  for (int64_t i = 0; i < n; i++) {
    double _Complex g = hlo_load_c128(got->shape.dt, got->data, i),
                    w = hlo_load_c128(want->shape.dt, want->data, i);
    if (both_nan(g, w)) continue;
    double d = cabs(g - w), mw = cabs(w);
    bool bad;
    if (any_inf(w) || any_inf(g)) {
      bad = !same_parts(g, w);
      d = bad ? INFINITY : 0;
    } else {
      bad = isnan(d) || d > atol + rtol * mw;
      if (isnan(d)) d = INFINITY;
    }
    double rel = d / fmax(mw, 1e-30);
    if (d > c.max_abs) c.max_abs = d;
    if (mw != 0 && rel > c.max_rel) c.max_rel = rel;
    double excess = d - (atol + rtol * mw);
    if (excess > worst_excess || (bad && c.bad == 0)) {
      worst_excess = excess;
      c.worst = i;
      c.worst_got = creal(g);
      c.worst_want = creal(w);
      c.worst_got_im = cimag(g);
      c.worst_want_im = cimag(w);
    }
    c.bad += bad;
  }
  *out = c;
  return true;
}
