/* hlo/literal.c: constant values and raw element access for every supported dtype.
 *
 * Literal data is dense and row-major regardless of the shape's layout. The load/store
 * helpers convert between any element type and double or int64; the interpreter, the readers
 * and constant folding all use them, so dtype conversion rules live in one place. Complex
 * elements (c64, c128) are pairs of their component type, real part first, accessed as C's
 * double _Complex through hlo_load_c128 / hlo_store_c128. */
#include "hlo.h"

#include <complex.h>
#include <math.h>
#include <string.h>

Literal *hlo_literal_new(HArena *a, const Shape *s) {
  Literal *l = hlo_arena_alloc(a, sizeof *l);
  hlo_shape_copy(a, &l->shape, s);
  if (s->dt == DT_TUPLE) {
    l->elems = hlo_arena_alloc(a, sizeof(Literal *) * (size_t)(s->ntuple ? s->ntuple : 1));
    for (int i = 0; i < s->ntuple; i++)
      l->elems[i] = hlo_literal_new(a, &s->tuple[i]);
  } else {
    l->data = hlo_arena_alloc(a, hlo_shape_bytes(s));
  }
  return l;
}

Literal *hlo_literal_clone(HArena *a, const Literal *src) {
  Literal *l = hlo_literal_new(a, &src->shape);
  if (src->shape.dt == DT_TUPLE) {
    for (int i = 0; i < src->shape.ntuple; i++)
      l->elems[i] = hlo_literal_clone(a, src->elems[i]);
  } else {
    memcpy(l->data, src->data, hlo_shape_bytes(&src->shape));
  }
  return l;
}

float hlo_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else { /* subnormal: normalize */
      int e = -1;
      do {
        e++;
        man <<= 1;
      } while (!(man & 0x400));
      bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ff) << 13);
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (man << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

uint16_t hlo_f32_to_f16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
  uint32_t exp = (x >> 23) & 0xff, man = x & 0x7fffff;
  if (exp == 0xff) return sign | 0x7c00 | (man ? 0x200 : 0);
  int e = (int)exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    man |= 0x800000;
    int shift = 14 - e;
    uint32_t half = man >> shift, rem = man & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) half++;
    return sign | (uint16_t)half;
  }
  uint32_t half = ((uint32_t)e << 10) | (man >> 13), rem = man & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) half++; /* may carry into exponent: ok */
  return sign | (uint16_t)half;
}

float hlo_bf16_to_f32(uint16_t h) {
  uint32_t bits = (uint32_t)h << 16;
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

uint16_t hlo_f32_to_bf16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if ((x & 0x7fffffff) > 0x7f800000) return (uint16_t)((x >> 16) | 0x40); /* quiet NaN */
  x += 0x7fff + ((x >> 16) & 1);
  return (uint16_t)(x >> 16);
}

/* The two fp8 formats, one routine each way parameterized by the format: exponent bits e,
 * mantissa bits m, bias 2^(e-1) - 1, and whether it is IEEE-like (f8e5m2: an all-ones
 * exponent is infinity or NaN) or "fn" (f8e4m3fn: no infinities, the all-ones exponent holds
 * normal values but for S.1111.111, the only NaN).
 *
 * From double (every f16, bf16 and f32 value is one exactly, so rounding from it is the
 * correct rounding from those too): round to nearest even at the quantum of the value's
 * binade (or the subnormals' quantum below the smallest normal), by nearbyint on the value
 * scaled to an integer number of quanta, which is exact. A result above the largest finite
 * value overflows: to infinity for f8e5m2 (IEEE), to NaN for f8e4m3fn, which has no infinity.
 * That is ml_dtypes' rule (its non-saturating ConvertImpl, which XLA's interpreter uses) and
 * XLA's compiled convert's: xla/codegen/intrinsic/fptrunc.cc, EmitFxxToF8E, says "For fn/fnuz
 * formats, overflow and input Inf/NaN become NaN" and "For standard formats, overflow
 * becomes infinity". So 464 (halfway between 448 and the missing 480) rounds to even, 448,
 * and anything above it is NaN in f8e4m3fn; f8e5m2 rounds 61440 (halfway past its 57344) to
 * infinity. Infinity is NaN in f8e4m3fn, infinity in f8e5m2.
 *
 * NaNs: f8e4m3fn has one per sign. An f8e5m2 NaN keeps the top two bits of the source's
 * mantissa (a quiet NaN, 0x7fc00000, gives S.11111.10, the canonical one XLA and ml_dtypes
 * always produce) and is made quiet when they are zero; to f32 its two bits go back to the
 * top of the mantissa (as f16 -> f32 does). So every one of the 256 codes of each type comes
 * back unchanged through f32, and targets, which hold fp8 values as f32 (targets/cpu), move
 * them bit-exactly; XLA differs only for NaNs whose second mantissa bit is set. */
static uint8_t f8_nan(int m, bool ieee, uint8_t sign,
                      unsigned top /* source mantissa's top m bits */) {
  if (!ieee) return sign | 0x7f;
  unsigned man = top & ((1u << m) - 1);
  return sign | (uint8_t)(((1u << (7 - m)) - 1) << m) | (uint8_t)(man ? man : 1u << (m - 1));
}

static uint8_t f8_from_f64(double d, int e, int m, bool ieee) {
  uint8_t sign = signbit(d) ? 0x80 : 0;
  if (isnan(d)) {
    uint64_t bits;
    memcpy(&bits, &d, 8);
    return f8_nan(m, ieee, sign, (unsigned)(bits >> (52 - m)));
  }
  uint8_t inf = (uint8_t)(((1u << e) - 1) << m), ovf = ieee ? inf : f8_nan(m, ieee, 0, 0);
  double a = fabs(d);
  int bias = (1 << (e - 1)) - 1, emin = 1 - bias;
  /* the largest finite value: all-ones exponent less one (IEEE), or all ones but the NaN */
  int emax = ieee ? (1 << e) - 2 - bias : (1 << e) - 1 - bias;
  double maxf = ldexp(ieee ? 2.0 - ldexp(1.0, -m) : 2.0 - ldexp(1.0, 1 - m), emax);
  if (isinf(a)) return sign | ovf;
  if (a == 0) return sign;
  int be = ilogb(a);
  if (be < emin) be = emin;
  double q = ldexp(1.0, be - m);   /* the quantum at a */
  double r = nearbyint(a / q) * q; /* round to nearest even; a / q and the product exact */
  if (r > maxf) return sign | ovf;
  if (r < ldexp(1.0, emin)) return sign | (uint8_t)(r / ldexp(1.0, emin - m)); /* subnormal */
  int re = ilogb(r);
  uint8_t man = (uint8_t)((r / ldexp(1.0, re) - 1.0) * (double)(1 << m));
  return sign | (uint8_t)((re + bias) << m) | man;
}

/* From float: as from double, but a NaN's bits taken from the float itself (converting a
 * signalling NaN to double would set its quiet bit). */
static uint8_t f8_from_f32(float f, int e, int m, bool ieee) {
  if (!isnan(f)) return f8_from_f64(f, e, m, ieee);
  uint32_t bits;
  memcpy(&bits, &f, 4);
  return f8_nan(m, ieee, bits >> 31 ? 0x80 : 0, bits >> (23 - m));
}

static float f8_to_f32(uint8_t c, int e, int m, bool ieee) {
  int bias = (1 << (e - 1)) - 1;
  unsigned ex = (c & 0x7f) >> m, man = c & ((1u << m) - 1), expall = (1u << e) - 1;
  bool neg = c & 0x80;
  if (ieee && ex == expall) {
    /* infinity, or a NaN with its mantissa at the top of f32's */
    uint32_t bits = (neg ? 0x80000000u : 0) | 0x7f800000u | (man << (23 - m));
    float f;
    memcpy(&f, &bits, 4);
    return f;
  }
  if (!ieee && ex == expall && man == (1u << m) - 1) return neg ? -NAN : NAN;
  double v = ex == 0 ? ldexp((double)man, 1 - bias - m)
                     : ldexp(1.0 + ldexp((double)man, -m), (int)ex - bias);
  return (float)(neg ? -v : v);
}

float hlo_f8e4m3fn_to_f32(uint8_t c) { return f8_to_f32(c, 4, 3, false); }
float hlo_f8e5m2_to_f32(uint8_t c) { return f8_to_f32(c, 5, 2, true); }
uint8_t hlo_f32_to_f8e4m3fn(float f) { return f8_from_f32(f, 4, 3, false); }
uint8_t hlo_f32_to_f8e5m2(float f) { return f8_from_f32(f, 5, 2, true); }
uint8_t hlo_f64_to_f8e4m3fn(double d) { return f8_from_f64(d, 4, 3, false); }
uint8_t hlo_f64_to_f8e5m2(double d) { return f8_from_f64(d, 5, 2, true); }

/* s4 and u4 are a byte per element: a load takes the byte's low 4 bits, sign- or
 * zero-extended, so a byte holding anything above them still reads as the 4-bit value; a store
 * writes the value's low 4 bits so extended, so the byte holds the integer itself. */
static int64_t int4_load(DType t, const void *d, int64_t i) {
  unsigned b = ((const uint8_t *)d)[i] & 0xfu;
  return t == DT_S4 && b >= 8 ? (int64_t)b - 16 : (int64_t)b;
}

static void int4_store(DType t, void *d, int64_t i, int64_t v) {
  int64_t b = v & 0xf;
  ((uint8_t *)d)[i] = (uint8_t)(t == DT_S4 && b >= 8 ? b - 16 : b);
}

double hlo_load_f64(DType t, const void *d, int64_t i) {
  switch (t) {
  case DT_PRED: return ((const uint8_t *)d)[i] != 0;
  case DT_S8: return ((const int8_t *)d)[i];
  case DT_S16: return ((const int16_t *)d)[i];
  case DT_S32: return ((const int32_t *)d)[i];
  case DT_S64: return (double)((const int64_t *)d)[i];
  case DT_U8: return ((const uint8_t *)d)[i];
  case DT_U16: return ((const uint16_t *)d)[i];
  case DT_U32: return ((const uint32_t *)d)[i];
  case DT_U64: return (double)((const uint64_t *)d)[i];
  case DT_S4:
  case DT_U4: return (double)int4_load(t, d, i);
  case DT_F16: return hlo_f16_to_f32(((const uint16_t *)d)[i]);
  case DT_BF16: return hlo_bf16_to_f32(((const uint16_t *)d)[i]);
  case DT_F8E4M3FN: return hlo_f8e4m3fn_to_f32(((const uint8_t *)d)[i]);
  case DT_F8E5M2: return hlo_f8e5m2_to_f32(((const uint8_t *)d)[i]);
  case DT_F32: return ((const float *)d)[i];
  case DT_F64: return ((const double *)d)[i];
  case DT_C64: return ((const float *)d)[2 * i]; /* the real part */
  case DT_C128: return ((const double *)d)[2 * i];
  case DT_INVALID:
  case DT_TOKEN:
  case DT_TUPLE:
  case DT_COUNT: break;
  }
  HLO_ASSERT(!"load of non-array type");
}

int64_t hlo_load_i64(DType t, const void *d, int64_t i) {
  switch (t) {
  case DT_PRED: return ((const uint8_t *)d)[i] != 0;
  case DT_S8: return ((const int8_t *)d)[i];
  case DT_S16: return ((const int16_t *)d)[i];
  case DT_S32: return ((const int32_t *)d)[i];
  case DT_S64: return ((const int64_t *)d)[i];
  case DT_U8: return ((const uint8_t *)d)[i];
  case DT_U16: return ((const uint16_t *)d)[i];
  case DT_U32: return ((const uint32_t *)d)[i];
  case DT_U64: return (int64_t)((const uint64_t *)d)[i];
  case DT_S4:
  case DT_U4: return int4_load(t, d, i);
  case DT_F16:
  case DT_BF16:
  case DT_F8E4M3FN:
  case DT_F8E5M2:
  case DT_F32:
  case DT_F64:
  case DT_C64:
  case DT_C128: {
    double v = hlo_load_f64(t, d, i);
    if (isnan(v)) return 0;
    if (v >= 9223372036854775807.0) return INT64_MAX;
    if (v <= -9223372036854775808.0) return INT64_MIN;
    return (int64_t)v;
  }
  case DT_INVALID:
  case DT_TOKEN:
  case DT_TUPLE:
  case DT_COUNT: break;
  }
  HLO_ASSERT(!"load of non-array type");
}

/* Float -> integer conversion saturates like XLA (NaN -> 0). */
static int64_t sat(double v, double lo, double hi) {
  if (isnan(v)) return 0;
  if (v <= lo) return (int64_t)lo;
  if (v >= hi) return (int64_t)hi;
  return (int64_t)v;
}

void hlo_store_f64(DType t, void *d, int64_t i, double v) {
  switch (t) {
  case DT_PRED: ((uint8_t *)d)[i] = v != 0; return;
  case DT_S8: ((int8_t *)d)[i] = (int8_t)sat(v, -128, 127); return;
  case DT_S16: ((int16_t *)d)[i] = (int16_t)sat(v, -32768, 32767); return;
  case DT_S32: ((int32_t *)d)[i] = (int32_t)sat(v, -2147483648.0, 2147483647.0); return;
  case DT_S64:
    ((int64_t *)d)[i] = isnan(v)                      ? 0
                        : v >= 9223372036854775807.0  ? INT64_MAX
                        : v <= -9223372036854775808.0 ? INT64_MIN
                                                      : (int64_t)v;
    return;
  case DT_U8: ((uint8_t *)d)[i] = (uint8_t)sat(v, 0, 255); return;
  case DT_U16: ((uint16_t *)d)[i] = (uint16_t)sat(v, 0, 65535); return;
  case DT_U32: ((uint32_t *)d)[i] = (uint32_t)sat(v, 0, 4294967295.0); return;
  case DT_U64:
    ((uint64_t *)d)[i] = isnan(v) || v <= 0            ? 0
                         : v >= 18446744073709551615.0 ? UINT64_MAX
                                                       : (uint64_t)v;
    return;
  case DT_S4: int4_store(t, d, i, sat(v, -8, 7)); return;
  case DT_U4: int4_store(t, d, i, sat(v, 0, 15)); return;
  case DT_F16: ((uint16_t *)d)[i] = hlo_f32_to_f16((float)v); return;
  case DT_BF16: ((uint16_t *)d)[i] = hlo_f32_to_bf16((float)v); return;
  case DT_F8E4M3FN: ((uint8_t *)d)[i] = hlo_f64_to_f8e4m3fn(v); return;
  case DT_F8E5M2: ((uint8_t *)d)[i] = hlo_f64_to_f8e5m2(v); return;
  case DT_F32: ((float *)d)[i] = (float)v; return;
  case DT_F64: ((double *)d)[i] = v; return;
  case DT_C64:
  case DT_C128: hlo_store_c128(t, d, i, v); return;
  case DT_INVALID:
  case DT_TOKEN:
  case DT_TUPLE:
  case DT_COUNT: break;
  }
  HLO_ASSERT(!"store of non-array type");
}

void hlo_store_i64(DType t, void *d, int64_t i, int64_t v) {
  switch (t) {
  case DT_PRED: ((uint8_t *)d)[i] = v != 0; return;
  case DT_S8: ((int8_t *)d)[i] = (int8_t)v; return;
  case DT_S16: ((int16_t *)d)[i] = (int16_t)v; return;
  case DT_S32: ((int32_t *)d)[i] = (int32_t)v; return;
  case DT_S64: ((int64_t *)d)[i] = v; return;
  case DT_U8: ((uint8_t *)d)[i] = (uint8_t)v; return;
  case DT_U16: ((uint16_t *)d)[i] = (uint16_t)v; return;
  case DT_U32: ((uint32_t *)d)[i] = (uint32_t)v; return;
  case DT_U64: ((uint64_t *)d)[i] = (uint64_t)v; return;
  case DT_S4:
  case DT_U4: int4_store(t, d, i, v); return; /* wraps, as every integer store here */
  case DT_F16:
  case DT_BF16:
  case DT_F8E4M3FN:
  case DT_F8E5M2:
  case DT_F32:
  case DT_F64:
  case DT_C64:
  case DT_C128: hlo_store_f64(t, d, i, (double)v); return;
  case DT_INVALID:
  case DT_TOKEN:
  case DT_TUPLE:
  case DT_COUNT: break;
  }
  HLO_ASSERT(!"store of non-array type");
}

double _Complex hlo_load_c128(DType t, const void *d, int64_t i) {
  /* HLO_CMPLX: exact parts (hlo.h) */
  if (t == DT_C64) return HLO_CMPLX(((const float *)d)[2 * i], ((const float *)d)[2 * i + 1]);
  if (t == DT_C128) return HLO_CMPLX(((const double *)d)[2 * i], ((const double *)d)[2 * i + 1]);
  return HLO_CMPLX(hlo_load_f64(t, d, i), 0.0);
}

void hlo_store_c128(DType t, void *d, int64_t i, double _Complex v) {
  if (t == DT_C64) {
    ((float *)d)[2 * i] = (float)creal(v);
    ((float *)d)[2 * i + 1] = (float)cimag(v);
  } else if (t == DT_C128) {
    ((double *)d)[2 * i] = creal(v);
    ((double *)d)[2 * i + 1] = cimag(v);
  } else {
    hlo_store_f64(t, d, i, creal(v));
  }
}

double hlo_literal_get_f64(const Literal *l, int64_t i) {
  return hlo_load_f64(l->shape.dt, l->data, i);
}
int64_t hlo_literal_get_i64(const Literal *l, int64_t i) {
  return hlo_load_i64(l->shape.dt, l->data, i);
}
void hlo_literal_set_f64(Literal *l, int64_t i, double v) {
  hlo_store_f64(l->shape.dt, l->data, i, v);
}
void hlo_literal_set_i64(Literal *l, int64_t i, int64_t v) {
  hlo_store_i64(l->shape.dt, l->data, i, v);
}

bool hlo_literal_bits_as(Literal *l, DType want) {
  DType have = l->shape.dt;
  if (have == want) return true;
  if (hlo_dtype_is_int4(want) && (have == DT_S8 || have == DT_U8)) {
    /* one element per byte: the low 4 bits are the value (i1 or u1 arrays, or V1 bits) */
    l->shape.dt = want;
    for (int64_t i = 0, n = hlo_shape_elems(&l->shape); i < n; i++)
      int4_store(want, l->data, i, int4_load(want, l->data, i));
    return true;
  }
  bool carrier = hlo_dtype_kind(have) == DK_UINT && hlo_dtype_kind(want) == DK_FLOAT;
  if (!carrier || hlo_dtype_size(have) != hlo_dtype_size(want)) return false;
  l->shape.dt = want;
  return true;
}

double hlo_literal_max_abs(const Literal *l) {
  double m = 0;
  for (int64_t i = 0, n = hlo_shape_elems(&l->shape); i < n; i++) {
    double _Complex z = hlo_load_c128(l->shape.dt, l->data, i);
    double v = cabs(z); /* hypot: no overflow */
    if (v > m) m = v;
  }
  return m;
}

void hlo_literal_from_layout(const Shape *s, const void *src, void *dst) {
  size_t es = hlo_dtype_size(s->dt);
  int64_t n = hlo_shape_elems(s);
  if (hlo_layout_is_default(s) || s->rank <= 1) {
    memcpy(dst, src, (size_t)n * es);
    return;
  }
  /* physical strides: dimension m2m[0] is fastest */
  int64_t pstride[HLO_MAX_RANK], idx[HLO_MAX_RANK] = {0}, st = 1;
  for (int i = 0; i < s->rank; i++) {
    pstride[s->m2m[i]] = st;
    st *= s->dims[s->m2m[i]];
  }
  for (int64_t k = 0; k < n; k++) {
    int64_t off = 0;
    for (int d = 0; d < s->rank; d++)
      off += idx[d] * pstride[d];
    memcpy((char *)dst + (size_t)k * es, (const char *)src + (size_t)off * es, es);
    for (int d = s->rank - 1; d >= 0; d--) {
      if (++idx[d] < s->dims[d]) break;
      idx[d] = 0;
    }
  }
}
