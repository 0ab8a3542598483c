/* hlo/elided.c: values for the constants an HLO dump elided.
 *
 * XLA prints large literals as `constant({...})` (its benchmark and bug-report modules are such
 * dumps); the text reader keeps those constants without a value (a NULL literal), and whatever
 * needs the value refuses them with a located error. --elided-constants (hloc, hloc-run,
 * hloc-bench-ref) gives them one instead, so that the module can be compiled, timed and run
 * against the interpreter: zero, or deterministic pseudo-random values. Random values depend on
 * the seed and the instruction's computation and name only (splitmix64 over a hash of both), so
 * the compiler and the interpreter, filling the same module, see the same weights whatever the
 * order of filling. Their scale keeps a network's activations of order one: floats of rank 2
 * and up are uniform in +-sqrt(3 / fan) with fan the element count over the largest dim (the
 * fan-in of a dense or convolution weight, whichever way it is laid out: variance 1 / fan);
 * rank 0 and 1 floats (biases, scales, a batch norm's mean and variance) uniform in [0.5, 1),
 * positive so that a variance under rsqrt stays finite; integers uniform in [0, 4) (small
 * enough to index any dim of a gather or dynamic slice after XLA's clamping), predicates fair
 * coins, complex values two floats of their rank's range (real part first, from successive
 * draws). */
#include "hlo.h"

#include <complex.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

bool hlo_elided_parse(const char *s, HElided *e, HErr *err) {
  memset(e, 0, sizeof *e);
  if (!strcmp(s, "error")) return true;
  if (!strcmp(s, "zero")) return e->mode = HLO_ELIDED_ZERO, true;
  if (!strncmp(s, "random", 6) && (!s[6] || s[6] == ':')) {
    e->mode = HLO_ELIDED_RANDOM;
    if (!s[6]) return true;
    char *end;
    unsigned long long v = strtoull(s + 7, &end, 10);
    if (s[7] && !*end && s[7] != '-') return e->seed = v, true;
  }
  hlo_err(err, NULL, NULL, NULL,
          "--elided-constants must be error, zero, random or random:SEED (SEED a decimal "
          "number), not '%s'",
          s);
  return false;
}

static uint64_t el_mix(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static uint64_t el_hash(uint64_t h, const char *s) {
  for (; s && *s; s++)
    h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
  return h;
}

/* Uniform in [0, 1). */
static double el_unit(uint64_t *x) { return (double)(el_mix(x) >> 11) * 0x1.0p-53; }

/* Array literal l's values from stream x, scaled as above. */
static void el_fill_from(Literal *l, uint64_t x) {
  const Shape *s = &l->shape;
  int64_t n = hlo_shape_elems(s);
  int64_t big = 1;
  for (int d = 0; d < s->rank; d++)
    if (s->dims[d] > big) big = s->dims[d];
  double a = sqrt(3.0 / (double)(n / big > 0 ? n / big : 1));
  for (int64_t i = 0; i < n; i++) {
    double u = el_unit(&x);
    if (hlo_dtype_is_complex(s->dt)) {
      /* both parts in the float range of the rank, the imaginary one from the next draw */
      double v = el_unit(&x);
      double re = s->rank >= 2 ? (2 * u - 1) * a : 0.5 + 0.5 * u;
      double im = s->rank >= 2 ? (2 * v - 1) * a : 0.5 + 0.5 * v;
      hlo_store_c128(s->dt, l->data, i, HLO_CMPLX(re, im));
    } else if (s->dt == DT_PRED)
      hlo_literal_set_i64(l, i, u < 0.5);
    else if (hlo_dtype_is_int(s->dt))
      hlo_literal_set_i64(l, i, (int64_t)(u * 4));
    else if (s->rank >= 2)
      hlo_literal_set_f64(l, i, (2 * u - 1) * a);
    else
      hlo_literal_set_f64(l, i, 0.5 + 0.5 * u);
  }
}

static uint64_t el_stream(const HInstr *in, uint64_t seed) {
  return el_hash(el_hash(0xcbf29ce484222325ull ^ seed, in->parent ? in->parent->name : ""),
                 in->name);
}

static void el_fill(Literal *l, const HInstr *in, const HElided *e) {
  if (e->mode == HLO_ELIDED_ZERO || hlo_shape_elems(&l->shape) == 0) return; /* zero-filled */
  el_fill_from(l, el_stream(in, e->seed));
}

void hlo_literal_fill_random(Literal *l, const HInstr *in, uint64_t seed) {
  if (l->shape.dt != DT_TUPLE) {
    el_fill_from(l, el_stream(in, seed));
    return;
  }
  for (int i = 0; i < l->shape.ntuple; i++)
    hlo_literal_fill_random(l->elems[i], in, seed + 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1));
}

int hlo_fill_elided(HModule *m, const HElided *e) {
  if (e->mode == HLO_ELIDED_ERROR) return 0;
  int filled = 0;
  for (int c = 0; c < m->ncomps; c++)
    for (int i = 0; i < m->comps[c]->ninstrs; i++) {
      HInstr *in = m->comps[c]->instrs[i];
      if (in->op != OP_CONSTANT || in->literal || !hlo_shape_is_array(&in->shape)) continue;
      Shape s = in->shape;
      hlo_shape_set_default_layout(&s);
      in->literal = hlo_literal_new(m->arena, &s);
      el_fill(in->literal, in, e);
      filled++;
    }
  return filled;
}
