/* hlo/compare.c: numerical comparison of results against reference outputs.
 *
 * Used by hloc-run --expect, by the fixture tests of the interpreter and of every target.
 * The tolerance test is the usual mixed one, |got - want| <= atol + rtol * |want|; NaN matches
 * NaN and infinities must match exactly. */
#include "hlo.h"

#include <math.h>

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
    double g = hlo_literal_get_f64(got, i), w = hlo_literal_get_f64(want, i);
    if (isnan(g) && isnan(w)) continue;
    double d = fabs(g - w);
    bool bad;
    if (isinf(w) || isinf(g)) {
      bad = g != w;
      d = bad ? INFINITY : 0;
    } else {
      bad = isnan(g) || isnan(w) || d > atol + rtol * fabs(w);
      if (isnan(d)) d = INFINITY;
    }
    double rel = d / fmax(fabs(w), 1e-30);
    if (d > c.max_abs) c.max_abs = d;
    if (w != 0 && rel > c.max_rel) c.max_rel = rel;
    double excess = d - (atol + rtol * fabs(w));
    if (excess > worst_excess || (bad && c.bad == 0)) {
      worst_excess = excess;
      c.worst = i;
      c.worst_got = g;
      c.worst_want = w;
    }
    c.bad += bad;
  }
  *out = c;
  return true;
}
