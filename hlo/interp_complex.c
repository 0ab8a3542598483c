/* hlo/interp_complex.c: the reference interpreter's complex numbers and FFTs.
 *
 * What it does: every op XLA defines on c64 and c128 values, called by interp.c when an
 * operand or the result is complex: the elementwise ops (arithmetic, exp/log/sqrt/rsqrt/cbrt,
 * the trigonometric and hyperbolic functions XLA allows, abs, sign, negate, compare for EQ
 * and NE), real/imag/complex, convert to and from complex, dot, and fft in its four kinds.
 * Data movement needs nothing here: interp.c moves elements of any size as bytes, and a
 * reduce or map with a complex reducer runs the reducer computation per element.
 *
 * Semantics: each element is computed in C's double _Complex and rounded once to the result
 * type (two f32 parts for c64), so a c64 result is at least as accurate as XLA's f32
 * arithmetic. multiply is the textbook (ac - bd, ad + bc), as XLA's elemental emitter
 * writes it (C's * would repair inf * finite products that XLA leaves NaN); divide is C's,
 * whose scaling and infinity rules are those of XLA's Smith-style division; abs is
 * cabs (hypot: no overflow for large parts); sign is z / |z| with 0 for 0; power gives 1 for
 * 0^0 and 0 for 0^w with re(w) > 0, cpow otherwise. Converting complex to a real type is an
 * error in XLA (the verifier refuses it; real and imag take the parts).
 *
 * fft: a direct DFT along each transformed axis in double precision (twiddles from a table
 * indexed by j*k mod n, so every length works, prime ones included; O(n^2) per line, which is
 * the oracle's choice: correctness over speed). FFT and IFFT transform the innermost
 * len(fft_length) dims (IFFT with exp(+i..) and scaled by 1/N, N the product of the lengths,
 * as XLA does); RFFT is the full complex transform of the real input with the last axis cut
 * to n/2+1; IRFFT inverts the outer axes as complex first, then each line of the last axis
 * from its n/2+1 bins by Hermitian symmetry, X[n-k] = conj(X[k]), ignoring the imaginary
 * parts of the DC bin and (n even) of the Nyquist bin, as XLA and numpy do. */
#include "interp_impl.h"

#include <complex.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef double _Complex cplx;

static cplx ld(const Literal *l, int64_t i) { return hlo_load_c128(l->shape.dt, l->data, i); }

/* ------------------------------------------------------------------ scalar semantics */

static cplx c_mul(cplx a, cplx b) {
  return HLO_CMPLX(creal(a) * creal(b) - cimag(a) * cimag(b),
                   creal(a) * cimag(b) + cimag(a) * creal(b));
}

static cplx c_pow(cplx a, cplx b) {
  if (creal(a) == 0 && cimag(a) == 0) {
    if (creal(b) == 0 && cimag(b) == 0) return 1;
    if (creal(b) > 0) return 0;
  }
  return cpow(a, b);
}

/* log(1 + z) and exp(z) - 1 without the cancellation near 0 that clog / cexp would have. */
static cplx c_log1p(cplx z) {
  double x = creal(z), y = cimag(z);
  return HLO_CMPLX(0.5 * log1p(x * (2 + x) + y * y), atan2(y, 1 + x));
}
static cplx c_expm1(cplx z) {
  double x = creal(z), y = cimag(z), s = sin(0.5 * y);
  return HLO_CMPLX(expm1(x) * cos(y) - 2 * s * s, exp(x) * sin(y));
}

/* Unary op on a complex value; *ok = false when XLA does not define it for complex. */
static cplx c_unary(HOp op, cplx z, bool *ok) {
  switch ((int)op) {
  case OP_NEGATE: return -z;
  case OP_COPY: return z;
  case OP_SIGN: {
    double m = cabs(z);
    return m == 0 ? z : z / m;
  }
  case OP_EXP: return cexp(z);
  case OP_EXPM1: return c_expm1(z);
  case OP_LOG: return clog(z);
  case OP_LOG1P: return c_log1p(z);
  case OP_LOGISTIC: return 1 / (1 + cexp(-z));
  case OP_SQRT: return csqrt(z);
  case OP_RSQRT: return 1 / csqrt(z);
  case OP_CBRT: return cpow(z, 1.0 / 3);
  case OP_SINE: return csin(z);
  case OP_COSINE: return ccos(z);
  case OP_TAN: return ctan(z);
  case OP_TANH: return ctanh(z);
  default: *ok = false; return 0;
  }
}

static cplx c_binary(HOp op, cplx a, cplx b, bool *ok) {
  switch ((int)op) {
  case OP_ADD: return a + b;
  case OP_SUBTRACT: return a - b;
  case OP_MULTIPLY: return c_mul(a, b);
  case OP_DIVIDE: return a / b;
  case OP_POWER: return c_pow(a, b);
  default: *ok = false; return 0;
  }
}

/* ------------------------------------------------------------------ elementwise */

static Literal *type_error(const HInstr *in, const Literal *const *ops, int n, HErr *err) {
  char buf[160];
  int k = 0;
  for (int i = 0; i < n && k < (int)sizeof buf - 16; i++)
    k += snprintf(buf + k, sizeof buf - (size_t)k, "%s%s", i ? ", " : "",
                  hlo_dtype_name(ops[i]->shape.dt));
  hlo_err_at(err, in, "%s is not defined for %s -> %s", hlo_op_name(in->op), buf,
             hlo_dtype_name(in->shape.dt));
  return NULL;
}

Literal *interp_complex_unary(IState *st, const HInstr *in, Literal *x, HErr *err) {
  int64_t n = hlo_shape_elems(&in->shape), s;
  if (!interp_elem_operand(in, 0, x, n, &s, err)) return NULL;
  DType it = x->shape.dt, ot = in->shape.dt;
  bool cin = hlo_dtype_is_complex(it);
  bool part = in->op == OP_ABS || in->op == OP_REAL || in->op == OP_IMAG;
  /* abs, real and imag of complex give the component type; real and imag of a float its type */
  bool ok = part ? (cin ? ot == hlo_dtype_component(it)
                        : in->op != OP_ABS && ot == it && hlo_dtype_is_float(it))
                 : cin && ot == it;
  if (!ok) return type_error(in, (const Literal *const *)&x, 1, err);
  Literal *r = hlo_literal_new(interp_arena(st), &in->shape);
  for (int64_t i = 0; i < n && ok; i++) {
    cplx z = ld(x, i * s);
    if (in->op == OP_ABS)
      hlo_store_f64(ot, r->data, i, cabs(z));
    else if (in->op == OP_REAL)
      hlo_store_f64(ot, r->data, i, creal(z));
    else if (in->op == OP_IMAG)
      hlo_store_f64(ot, r->data, i, cimag(z));
    else
      hlo_store_c128(ot, r->data, i, c_unary(in->op, z, &ok));
  }
  return ok ? r : type_error(in, (const Literal *const *)&x, 1, err);
}

Literal *interp_complex_binary(IState *st, const HInstr *in, Literal *x, Literal *y, HErr *err) {
  int64_t n = hlo_shape_elems(&in->shape), sx, sy;
  if (!interp_elem_operand(in, 0, x, n, &sx, err) || !interp_elem_operand(in, 1, y, n, &sy, err))
    return NULL;
  DType t = in->shape.dt;
  Literal *ops[2] = {x, y};
  bool ok = hlo_dtype_is_complex(t) && x->shape.dt == t && y->shape.dt == t;
  if (!ok) return type_error(in, (const Literal *const *)ops, 2, err);
  Literal *r = hlo_literal_new(interp_arena(st), &in->shape);
  for (int64_t i = 0; i < n && ok; i++)
    hlo_store_c128(t, r->data, i, c_binary(in->op, ld(x, i * sx), ld(y, i * sy), &ok));
  return ok ? r : type_error(in, (const Literal *const *)ops, 2, err);
}

Literal *interp_complex_compare(IState *st, const HInstr *in, Literal *x, Literal *y, HErr *err) {
  int64_t n = hlo_shape_elems(&in->shape), sx, sy;
  if (!interp_elem_operand(in, 0, x, n, &sx, err) || !interp_elem_operand(in, 1, y, n, &sy, err))
    return NULL;
  if (x->shape.dt != y->shape.dt || in->shape.dt != DT_PRED ||
      (in->cmp_dir != CMP_EQ && in->cmp_dir != CMP_NE)) {
    hlo_err_at(err, in, "compare %s of %s and %s -> %s: complex values compare only EQ and NE",
               hlo_cmp_dir_name(in->cmp_dir), hlo_dtype_name(x->shape.dt),
               hlo_dtype_name(y->shape.dt), hlo_dtype_name(in->shape.dt));
    return NULL;
  }
  Literal *r = hlo_literal_new(interp_arena(st), &in->shape);
  uint8_t *o = r->data;
  for (int64_t i = 0; i < n; i++) {
    cplx a = ld(x, i * sx), b = ld(y, i * sy);
    bool eq = creal(a) == creal(b) && cimag(a) == cimag(b); /* false with a NaN part */
    o[i] = in->cmp_dir == CMP_EQ ? eq : !eq;
  }
  return r;
}

Literal *interp_complex_make(IState *st, const HInstr *in, Literal *re, Literal *im, HErr *err) {
  int64_t n = hlo_shape_elems(&in->shape), sr, si;
  if (!interp_elem_operand(in, 0, re, n, &sr, err) || !interp_elem_operand(in, 1, im, n, &si, err))
    return NULL;
  DType t = re->shape.dt;
  if (im->shape.dt != t || hlo_dtype_complex_of(t) != in->shape.dt) {
    Literal *ops[2] = {re, im};
    return type_error(in, (const Literal *const *)ops, 2, err);
  }
  Literal *r = hlo_literal_new(interp_arena(st), &in->shape);
  for (int64_t i = 0; i < n; i++)
    hlo_store_c128(in->shape.dt, r->data, i,
                   HLO_CMPLX(hlo_load_f64(t, re->data, i * sr), hlo_load_f64(t, im->data, i * si)));
  return r;
}

Literal *interp_complex_convert(IState *st, const HInstr *in, Literal *x, HErr *err) {
  int64_t n = hlo_shape_elems(&in->shape), s;
  if (!interp_elem_operand(in, 0, x, n, &s, err)) return NULL;
  DType it = x->shape.dt, ot = in->shape.dt;
  if (!hlo_dtype_is_complex(ot) || hlo_dtype_kind(it) == DK_OTHER) {
    hlo_err_at(err, in, "convert from %s to %s is not defined (complex to real: use real or imag)",
               hlo_dtype_name(it), hlo_dtype_name(ot));
    return NULL;
  }
  Literal *r = hlo_literal_new(interp_arena(st), &in->shape);
  for (int64_t i = 0; i < n; i++)
    hlo_store_c128(ot, r->data, i, ld(x, i * s));
  return r;
}

/* ------------------------------------------------------------------ dot */

/* x's elements as complex doubles, in the order of dims perm (interp.c's operand packing). */
static cplx *pack(const Literal *x, const int *perm) {
  const Shape *s = &x->shape;
  int64_t n = hlo_shape_elems(s), str[HLO_MAX_RANK], idx[HLO_MAX_RANK] = {0};
  hlo_shape_strides(s, str);
  cplx *buf = malloc(sizeof(cplx) * (size_t)(n ? n : 1));
  HLO_ASSERT(buf);
  for (int64_t i = 0; i < n; i++) {
    int64_t off = 0;
    for (int d = 0; d < s->rank; d++)
      off += idx[d] * str[perm[d]];
    buf[i] = ld(x, off);
    for (int d = s->rank - 1; d >= 0 && ++idx[d] == s->dims[perm[d]]; d--)
      idx[d] = 0;
  }
  return buf;
}

void interp_complex_dot(const Literal *x, const Literal *y, const int *lperm, const int *rperm,
                        int64_t B, int64_t M, int64_t K, int64_t N, Literal *r) {
  cplx *L = pack(x, lperm), *R = pack(y, rperm);
  for (int64_t b = 0; b < B; b++)
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++) {
        cplx acc = 0;
        for (int64_t k = 0; k < K; k++)
          acc += c_mul(L[(b * M + i) * K + k], R[(b * K + k) * N + j]);
        hlo_store_c128(r->shape.dt, r->data, (b * M + i) * N + j, acc);
      }
  free(L);
  free(R);
}

/* ------------------------------------------------------------------ fft */

/* w[m] = exp(sign * 2 pi i m / n), m < n: the twiddles of an n-point DFT. */
static cplx *twiddles(int64_t n, int sign) {
  cplx *w = malloc(sizeof(cplx) * (size_t)(n ? n : 1));
  HLO_ASSERT(w);
  for (int64_t m = 0; m < n; m++) {
    double a = 2 * M_PI * (double)m / (double)n;
    w[m] = HLO_CMPLX(cos(a), sign * sin(a));
  }
  return w;
}

/* The DFT along dim `axis` of buf (row-major over dims[0..rank)), in place. */
static void dft_axis(cplx *buf, int rank, const int64_t *dims, int axis, int sign) {
  int64_t n = dims[axis], inner = 1, outer = 1;
  for (int d = axis + 1; d < rank; d++)
    inner *= dims[d];
  for (int d = 0; d < axis; d++)
    outer *= dims[d];
  if (n <= 1 || inner == 0 || outer == 0) return;
  cplx *w = twiddles(n, sign), *tmp = malloc(sizeof(cplx) * (size_t)n);
  HLO_ASSERT(tmp);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t q = 0; q < inner; q++) {
      cplx *line = buf + o * n * inner + q;
      for (int64_t k = 0; k < n; k++) {
        cplx acc = 0;
        for (int64_t j = 0, m = 0; j < n; j++, m = (m + k) % n) /* m = j * k mod n */
          acc += c_mul(line[j * inner], w[m]);
        tmp[k] = acc;
      }
      for (int64_t k = 0; k < n; k++)
        line[k * inner] = tmp[k];
    }
  free(w);
  free(tmp);
}

/* IRFFT's last axis: each line of m = n/2+1 bins of buf (dims, last m) becomes n reals in out
 * (type t), Hermitian symmetry standing in for the missing bins, times scale. */
static void c2r_last(const cplx *buf, int rank, const int64_t *dims, int64_t n, double scale,
                     DType t, void *out) {
  int64_t m = dims[rank - 1], lines = 1;
  for (int d = 0; d < rank - 1; d++)
    lines *= dims[d];
  cplx *w = twiddles(n, +1);
  for (int64_t l = 0; l < lines; l++) {
    const cplx *x = buf + l * m;
    for (int64_t j = 0; j < n; j++) {
      double acc = creal(x[0]); /* the DC bin's imaginary part is ignored */
      for (int64_t k = 1, mk = j % n; k < m; k++, mk = (mk + j) % n) {
        if (2 * k == n)
          acc += creal(x[k]) * (j % 2 ? -1 : 1); /* Nyquist: its imaginary part ignored too */
        else
          acc += 2 * creal(c_mul(x[k], w[mk])); /* bin k and its mirror n - k */
      }
      hlo_store_f64(t, out, l * n + j, acc * scale);
    }
  }
  free(w);
}

/* Checks fft's operand and result against XLA's shape inference (the verifier's). */
static bool fft_shapes_ok(IState *st, const HInstr *in, const Literal *x, HErr *err) {
  Shape want;
  if (!hlo_infer_shape(interp_arena(st), in, &want, err)) return false;
  if (hlo_shape_eq(&x->shape, &in->ops[0]->shape) && hlo_shape_eq(&want, &in->shape)) return true;
  hlo_err_at(err, in, "%s of %s gives %s, not %s", hlo_fft_type_name(in->fft_type),
             hlo_shape_str(interp_arena(st), &x->shape), hlo_shape_str(interp_arena(st), &want),
             hlo_shape_str(interp_arena(st), &in->shape));
  return false;
}

Literal *interp_fft(IState *st, const HInstr *in, Literal *x, HErr *err) {
  if (!fft_shapes_ok(st, in, x, err)) return NULL;
  const Shape *xs = &x->shape, *os = &in->shape;
  int rank = xs->rank, r = in->fft_length.n;
  FftType ft = in->fft_type;
  int64_t n = hlo_shape_elems(xs), N = 1;
  for (int i = 0; i < r; i++)
    N *= in->fft_length.v[i];
  cplx *buf = malloc(sizeof(cplx) * (size_t)(n ? n : 1));
  HLO_ASSERT(buf);
  for (int64_t i = 0; i < n; i++)
    buf[i] = ld(x, i);
  int sign = ft == FFT_FFT || ft == FFT_RFFT ? -1 : +1;
  /* IRFFT's last axis is the real transform below; every other axis a complex one */
  for (int a = rank - r; a < rank - (ft == FFT_IRFFT); a++)
    dft_axis(buf, rank, xs->dims, a, sign);
  double scale = sign > 0 && N > 0 ? 1.0 / (double)N : 1.0;
  Literal *res = hlo_literal_new(interp_arena(st), os);
  int64_t on = hlo_shape_elems(os);
  if (ft == FFT_IRFFT) {
    c2r_last(buf, rank, xs->dims, in->fft_length.v[r - 1], scale, os->dt, res->data);
  } else {
    /* RFFT keeps the first n/2+1 bins of the last axis; FFT and IFFT all of them */
    int64_t last = rank ? os->dims[rank - 1] : 1, full = rank ? xs->dims[rank - 1] : 1;
    for (int64_t i = 0; i < on; i++)
      hlo_store_c128(os->dt, res->data, i, buf[(i / last) * full + i % last] * scale);
  }
  free(buf);
  return res;
}
