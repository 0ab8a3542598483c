/* targets/gen/gen_complex.c: complex numbers (c64, c128) in the elemental generator.
 *
 * A complex value is an LLVM struct {T, T} (T = float for c64, double for c128) in registers
 * and interleaved (real, imaginary) in memory, as numpy stores it. Loads and stores move the
 * two parts as scalars (gen_load_elem, gen_store_elem), and every op here takes the struct
 * apart with extractvalue and builds its result with insertvalue, so after LLVM's cleanup only
 * scalar float code is left: loops over complex arrays vectorize like loops over pairs of
 * floats (interleaved accesses), and a select of two complex values (pad, concatenate) is two
 * scalar selects (gen_select).
 *
 * Semantics follow the reference interpreter (hlo/interp_complex.c, C's double _Complex):
 * add, subtract, multiply (the textbook (ac - bd, ad + bc), as XLA and the interpreter
 * compute it), negate and the comparisons work in the component type, like XLA's; division
 * and the functions of a c64 value are computed in f64 and rounded once, as the interpreter
 * rounds its double results (no intermediate overflow of e^x or of squares either). Each
 * formula avoids the overflow and NaN traps of the textbook one where C's library avoids them:
 *   - divide is Smith's algorithm (the larger part of the divisor divides the smaller), with
 *     C99 Annex G's recoveries when both parts come out NaN: a zero divisor gives infinities,
 *     an infinite dividend over a finite divisor infinities, a finite one over an infinite
 *     divisor zeros;
 *   - abs is max * sqrt(1 + (min/max)^2); an infinite part gives inf even beside a NaN
 *     (hypot's rule);
 *   - exp splits e^x into e^(x/2) * e^(x/2) where e^x alone overflows, keeps the imaginary
 *     part exactly 0 for a real argument and follows Annex G for an infinite x beside a
 *     non-finite y; log is (log |z|, atan2(y, x)), log |z| through log1p of the smaller
 *     part's ratio so that it stays accurate near |z| = 1; sqrt is the half-angle form with
 *     the sign rules of csqrt (huge parts scaled first); tanh is
 *     (sinh x cosh x + i sin y cos y) / (sinh^2 x + cos^2 y), with its limit
 *     (sign x, 4 sin y cos y e^(-2|x|)) past the overflow of sinh^2; power is exp(w log z)
 *     with 0^0 = 1 and 0^w = 0 for re(w) > 0, as the interpreter's;
 *   - compare EQ and NE compare both parts (a NaN part is unequal); convert from a real or
 *     integer type gives a zero imaginary part, between c64 and c128 rounds each part;
 *   - real, imag of a complex value give its parts; of a real value the value and zero.
 * Only the ops XLA defines on complex values are here; the verifier refuses the others, and
 * one that reaches this file anyway is a located error. */
#include "gen.h"

#include <math.h>
#include <string.h>

/* A complex value as its two parts (of the component type's register type). */
typedef struct GxC {
  LLVMValueRef re, im;
} GxC;

static LLVMValueRef cx_fail(GenKern *k, const HInstr *in, const char *what) {
  if (!k->failed)
    hlo_err_at(k->cg->err, in, "CPU target: %s: %s on complex values is not supported",
               hlo_op_name(in->op), what);
  k->failed = true;
  return NULL;
}

LLVMTypeRef gen_complex_type(GenCg *g, DType t) {
  LLVMTypeRef part = hlo_dtype_component(t) == DT_F64 ? g->f64 : g->f32;
  LLVMTypeRef ts[2] = {part, part};
  return LLVMStructTypeInContext(g->C, ts, 2, 0);
}

LLVMValueRef gen_complex(GenKern *k, DType t, LLVMValueRef re, LLVMValueRef im) {
  LLVMValueRef z = LLVMGetPoison(gen_complex_type(k->cg, t));
  z = LLVMBuildInsertValue(k->B, z, re, 0, "");
  return LLVMBuildInsertValue(k->B, z, im, 1, "");
}

static GxC cx_parts(GenKern *k, LLVMValueRef z) {
  return (GxC){LLVMBuildExtractValue(k->B, z, 0, ""), LLVMBuildExtractValue(k->B, z, 1, "")};
}

static LLVMValueRef cx_join(GenKern *k, DType t, GxC z) { return gen_complex(k, t, z.re, z.im); }

/* ------------------------------------------------------------------ scalar helpers */

static LLVMValueRef fc(GenKern *k, DType pt, double v) {
  return LLVMConstReal(gen_reg_type(k->cg, pt), v);
}
static LLVMValueRef fadd(GenKern *k, LLVMValueRef a, LLVMValueRef b) {
  return LLVMBuildFAdd(k->B, a, b, "");
}
static LLVMValueRef fsub(GenKern *k, LLVMValueRef a, LLVMValueRef b) {
  return LLVMBuildFSub(k->B, a, b, "");
}
static LLVMValueRef fmul(GenKern *k, LLVMValueRef a, LLVMValueRef b) {
  return LLVMBuildFMul(k->B, a, b, "");
}
static LLVMValueRef fdiv(GenKern *k, LLVMValueRef a, LLVMValueRef b) {
  return LLVMBuildFDiv(k->B, a, b, "");
}
static LLVMValueRef fcmp(GenKern *k, LLVMRealPredicate p, LLVMValueRef a, LLVMValueRef b) {
  return LLVMBuildFCmp(k->B, p, a, b, "");
}
static LLVMValueRef sel(GenKern *k, LLVMValueRef c, LLVMValueRef a, LLVMValueRef b) {
  return LLVMBuildSelect(k->B, c, a, b, "");
}
static LLVMValueRef fabs_(GenKern *k, LLVMValueRef a) { return gen_intr(k, "llvm.fabs", a, NULL); }
static LLVMValueRef or1(GenKern *k, LLVMValueRef a, LLVMValueRef b) {
  return LLVMBuildOr(k->B, a, b, "");
}
static LLVMValueRef and1(GenKern *k, LLVMValueRef a, LLVMValueRef b) {
  return LLVMBuildAnd(k->B, a, b, "");
}
static LLVMValueRef isinf_(GenKern *k, DType pt, LLVMValueRef a) {
  return fcmp(k, LLVMRealOEQ, fabs_(k, a), fc(k, pt, INFINITY));
}
static LLVMValueRef isnan_(GenKern *k, LLVMValueRef a) { return fcmp(k, LLVMRealUNO, a, a); }
static LLVMValueRef isfinite_(GenKern *k, DType pt, LLVMValueRef a) {
  return fcmp(k, LLVMRealOLT, fabs_(k, a), fc(k, pt, INFINITY));
}
static LLVMValueRef copysign_(GenKern *k, LLVMValueRef mag, LLVMValueRef sgn) {
  return gen_intr(k, "llvm.copysign", mag, sgn);
}
/* A libm function of one or two arguments of type pt. */
static LLVMValueRef libm(GenKern *k, const char *name, DType pt, LLVMValueRef a, LLVMValueRef b) {
  LLVMValueRef args[2] = {a, b};
  return gen_libm(k, name, pt, args, b ? 2 : 1);
}

/* ------------------------------------------------------------------ arithmetic */

static GxC cx_add(GenKern *k, GxC a, GxC b) {
  return (GxC){fadd(k, a.re, b.re), fadd(k, a.im, b.im)};
}
static GxC cx_sub(GenKern *k, GxC a, GxC b) {
  return (GxC){fsub(k, a.re, b.re), fsub(k, a.im, b.im)};
}
static GxC cx_mul(GenKern *k, GxC a, GxC b) {
  return (GxC){fsub(k, fmul(k, a.re, b.re), fmul(k, a.im, b.im)),
               fadd(k, fmul(k, a.re, b.im), fmul(k, a.im, b.re))};
}

/* z's parts as +-1 where infinite and +-0 where not, signs kept (Annex G's "box"). */
static GxC cx_box(GenKern *k, DType pt, GxC z) {
  LLVMValueRef one = fc(k, pt, 1), zero = fc(k, pt, 0);
  return (GxC){copysign_(k, sel(k, isinf_(k, pt, z.re), one, zero), z.re),
               copysign_(k, sel(k, isinf_(k, pt, z.im), one, zero), z.im)};
}

/* s times a times the conjugate of b, part by part. */
static GxC cx_scaled_mul_conj(GenKern *k, LLVMValueRef s, GxC a, GxC b) {
  return (GxC){fmul(k, s, fadd(k, fmul(k, a.re, b.re), fmul(k, a.im, b.im))),
               fmul(k, s, fsub(k, fmul(k, a.im, b.re), fmul(k, a.re, b.im)))};
}

/* Annex G's recoveries of a division whose parts both came out NaN (see the file's note). */
static GxC cx_div_recover(GenKern *k, DType pt, GxC a, GxC b, GxC r) {
  LLVMValueRef inf = fc(k, pt, INFINITY), zero = fc(k, pt, 0);
  LLVMValueRef both_nan = and1(k, isnan_(k, r.re), isnan_(k, r.im));
  /* a zero divisor, a dividend not all NaN: infinities signed by the dividend */
  LLVMValueRef bzero = and1(k, fcmp(k, LLVMRealOEQ, b.re, zero), fcmp(k, LLVMRealOEQ, b.im, zero));
  LLVMValueRef anum = LLVMBuildNot(k->B, and1(k, isnan_(k, a.re), isnan_(k, a.im)), "");
  LLVMValueRef c1 = and1(k, bzero, anum), sinf = copysign_(k, inf, b.re);
  GxC r1 = {fmul(k, sinf, a.re), fmul(k, sinf, a.im)};
  /* an infinite dividend over a finite divisor: its infinite parts as +-1, times inf */
  LLVMValueRef ainf = or1(k, isinf_(k, pt, a.re), isinf_(k, pt, a.im));
  LLVMValueRef bfin = and1(k, isfinite_(k, pt, b.re), isfinite_(k, pt, b.im));
  LLVMValueRef c2 = and1(k, ainf, bfin);
  GxC r2 = cx_scaled_mul_conj(k, inf, cx_box(k, pt, a), b);
  /* a finite dividend over an infinite divisor: zeros with the quotient's signs */
  LLVMValueRef binf = or1(k, isinf_(k, pt, b.re), isinf_(k, pt, b.im));
  LLVMValueRef afin = and1(k, isfinite_(k, pt, a.re), isfinite_(k, pt, a.im));
  LLVMValueRef c3 = and1(k, binf, afin);
  GxC r3 = cx_scaled_mul_conj(k, zero, a, cx_box(k, pt, b));
  GxC out = r;
  out.re = sel(k, and1(k, both_nan, c3), r3.re, out.re);
  out.im = sel(k, and1(k, both_nan, c3), r3.im, out.im);
  out.re = sel(k, and1(k, both_nan, c2), r2.re, out.re);
  out.im = sel(k, and1(k, both_nan, c2), r2.im, out.im);
  out.re = sel(k, and1(k, both_nan, c1), r1.re, out.re);
  out.im = sel(k, and1(k, both_nan, c1), r1.im, out.im);
  return out;
}

/* Smith's division: with the ratio of the divisor's smaller part to its larger, no product
 * overflows where the quotient does not. */
static GxC cx_div(GenKern *k, DType pt, GxC a, GxC b) {
  LLVMValueRef re_big = fcmp(k, LLVMRealOGE, fabs_(k, b.re), fabs_(k, b.im));
  /* |b.re| >= |b.im|: q = b.im / b.re, d = b.re + b.im q */
  LLVMValueRef q1 = fdiv(k, b.im, b.re), d1 = fadd(k, b.re, fmul(k, b.im, q1));
  GxC r1 = {fdiv(k, fadd(k, a.re, fmul(k, a.im, q1)), d1),
            fdiv(k, fsub(k, a.im, fmul(k, a.re, q1)), d1)};
  /* else q = b.re / b.im, d = b.im + b.re q */
  LLVMValueRef q2 = fdiv(k, b.re, b.im), d2 = fadd(k, b.im, fmul(k, b.re, q2));
  GxC r2 = {fdiv(k, fadd(k, fmul(k, a.re, q2), a.im), d2),
            fdiv(k, fsub(k, fmul(k, a.im, q2), a.re), d2)};
  GxC r = {sel(k, re_big, r1.re, r2.re), sel(k, re_big, r1.im, r2.im)};
  return cx_div_recover(k, pt, a, b, r);
}

/* |z| = max * sqrt(1 + (min/max)^2): no overflow; an infinite part gives inf even beside a
 * NaN (hypot's rule). */
static LLVMValueRef cx_abs(GenKern *k, DType pt, GxC z) {
  LLVMValueRef ax = fabs_(k, z.re), ay = fabs_(k, z.im);
  LLVMValueRef big = fcmp(k, LLVMRealOGT, ax, ay);
  LLVMValueRef mx = sel(k, big, ax, ay), mn = sel(k, big, ay, ax);
  LLVMValueRef q = fdiv(k, mn, mx);
  LLVMValueRef r =
      fmul(k, mx, gen_intr(k, "llvm.sqrt", fadd(k, fc(k, pt, 1), fmul(k, q, q)), NULL));
  r = sel(k, fcmp(k, LLVMRealOEQ, mx, fc(k, pt, 0)), fc(k, pt, 0), r);
  r = sel(k, or1(k, isnan_(k, z.re), isnan_(k, z.im)), fadd(k, z.re, z.im), r);
  return sel(k, or1(k, isinf_(k, pt, z.re), isinf_(k, pt, z.im)), fc(k, pt, INFINITY), r);
}

/* log |z| = log(max) + log1p((min/max)^2) / 2: accurate near |z| = 1 and without overflow;
 * the ratio is 1 where the parts are equal (two zeros give -inf, two infinities inf). */
static LLVMValueRef cx_log_abs(GenKern *k, DType pt, GxC z) {
  LLVMValueRef ax = fabs_(k, z.re), ay = fabs_(k, z.im);
  LLVMValueRef big = fcmp(k, LLVMRealOGT, ax, ay);
  LLVMValueRef mx = sel(k, big, ax, ay), mn = sel(k, big, ay, ax);
  LLVMValueRef q = sel(k, fcmp(k, LLVMRealOEQ, mn, mx), fc(k, pt, 1), fdiv(k, mn, mx));
  LLVMValueRef l1 = libm(k, "log1p", pt, fmul(k, q, q), NULL);
  LLVMValueRef r = fadd(k, gen_intr(k, "llvm.log", mx, NULL), fmul(k, l1, fc(k, pt, 0.5)));
  r = sel(k, or1(k, isnan_(k, z.re), isnan_(k, z.im)), fadd(k, z.re, z.im), r);
  return sel(k, or1(k, isinf_(k, pt, z.re), isinf_(k, pt, z.im)), fc(k, pt, INFINITY), r);
}

static GxC cx_log(GenKern *k, DType pt, GxC z) {
  return (GxC){cx_log_abs(k, pt, z), libm(k, "atan2", pt, z.im, z.re)};
}

/* e^z; an infinite x beside an infinite or NaN y gives Annex G's (inf, NaN) for +inf and
 * (0, 0) for -inf. */
static GxC cx_exp(GenKern *k, DType pt, GxC z) {
  LLVMValueRef e = gen_intr(k, "llvm.exp", z.re, NULL);
  LLVMValueRef h = gen_intr(k, "llvm.exp", fmul(k, z.re, fc(k, pt, 0.5)), NULL);
  LLVMValueRef c = gen_intr(k, "llvm.cos", z.im, NULL), s = gen_intr(k, "llvm.sin", z.im, NULL);
  LLVMValueRef over = fcmp(k, LLVMRealOEQ, e, fc(k, pt, INFINITY));
  LLVMValueRef re = sel(k, over, fmul(k, fmul(k, h, c), h), fmul(k, e, c));
  LLVMValueRef im = sel(k, over, fmul(k, fmul(k, h, s), h), fmul(k, e, s));
  /* a real argument keeps a zero imaginary part (inf * 0 would make it NaN) */
  im = sel(k, fcmp(k, LLVMRealOEQ, z.im, fc(k, pt, 0)), z.im, im);
  LLVMValueRef ynf = LLVMBuildNot(k->B, isfinite_(k, pt, z.im), "");
  LLVMValueRef pinf = and1(k, fcmp(k, LLVMRealOEQ, z.re, fc(k, pt, INFINITY)), ynf);
  LLVMValueRef ninf = and1(k, fcmp(k, LLVMRealOEQ, z.re, fc(k, pt, -INFINITY)), ynf);
  re = sel(k, pinf, fc(k, pt, INFINITY), sel(k, ninf, fc(k, pt, 0), re));
  im = sel(k, ninf, fc(k, pt, 0), im);
  return (GxC){re, im};
}

/* csqrt: t = sqrt((|x| + |z|) / 2); x >= 0: (t, y / 2t); x < 0: (|y| / 2t, t with y's sign);
 * z = 0 gives (0, y), an infinite y (inf, y). Parts past a quarter of the largest value are
 * scaled by 1/4 first (the root by 2 after), so that |x| + |z| cannot overflow. */
static GxC cx_sqrt(GenKern *k, DType pt, GxC z) {
  LLVMValueRef half = fc(k, pt, 0.5), zero = fc(k, pt, 0);
  double quarter = (pt == DT_F32 ? 0x1p126 : 0x1p1022);
  LLVMValueRef huge = or1(k, fcmp(k, LLVMRealOGT, fabs_(k, z.re), fc(k, pt, quarter)),
                          fcmp(k, LLVMRealOGT, fabs_(k, z.im), fc(k, pt, quarter)));
  LLVMValueRef sc = sel(k, huge, fc(k, pt, 0.25), fc(k, pt, 1));
  GxC zs = {fmul(k, z.re, sc), fmul(k, z.im, sc)};
  LLVMValueRef m = cx_abs(k, pt, zs), ax = fabs_(k, zs.re);
  LLVMValueRef t = gen_intr(k, "llvm.sqrt", fadd(k, fmul(k, ax, half), fmul(k, m, half)), NULL);
  LLVMValueRef t2 = fadd(k, t, t);
  LLVMValueRef pos = fcmp(k, LLVMRealOGE, z.re, zero);
  LLVMValueRef re = sel(k, pos, t, fdiv(k, fabs_(k, zs.im), t2));
  LLVMValueRef im = sel(k, pos, fdiv(k, zs.im, t2), copysign_(k, t, z.im));
  LLVMValueRef up = sel(k, huge, fc(k, pt, 2), fc(k, pt, 1));
  re = fmul(k, re, up), im = fmul(k, im, up);
  LLVMValueRef zz = and1(k, fcmp(k, LLVMRealOEQ, z.re, zero), fcmp(k, LLVMRealOEQ, z.im, zero));
  re = sel(k, zz, zero, re);
  im = sel(k, zz, z.im, im);
  LLVMValueRef yinf = isinf_(k, pt, z.im);
  return (GxC){sel(k, yinf, fc(k, pt, INFINITY), re), sel(k, yinf, z.im, im)};
}

static GxC cx_tanh(GenKern *k, DType pt, GxC z) {
  LLVMValueRef s = gen_intr(k, "llvm.sin", z.im, NULL), c = gen_intr(k, "llvm.cos", z.im, NULL);
  LLVMValueRef sh = libm(k, "sinh", pt, z.re, NULL), ch = libm(k, "cosh", pt, z.re, NULL);
  LLVMValueRef den = fadd(k, fmul(k, sh, sh), fmul(k, c, c));
  LLVMValueRef re = fdiv(k, fmul(k, sh, ch), den), im = fdiv(k, fmul(k, s, c), den);
  /* past half the largest exponent sinh^2 overflows: the limit */
  double lim = (pt == DT_F32 ? 127 : 1023) * M_LN2 / 2;
  LLVMValueRef ax = fabs_(k, z.re), far = fcmp(k, LLVMRealOGT, ax, fc(k, pt, lim));
  LLVMValueRef e = gen_intr(k, "llvm.exp", fmul(k, ax, fc(k, pt, -2)), NULL);
  LLVMValueRef fim = fmul(k, fmul(k, fmul(k, s, c), fc(k, pt, 4)), e);
  return (GxC){sel(k, far, copysign_(k, fc(k, pt, 1), z.re), re), sel(k, far, fim, im)};
}

/* z^w = exp(w log z); 0^0 = 1, 0^w = 0 for re(w) > 0. */
static GxC cx_pow(GenKern *k, DType pt, GxC a, GxC b) {
  GxC r = cx_exp(k, pt, cx_mul(k, b, cx_log(k, pt, a)));
  LLVMValueRef zero = fc(k, pt, 0), one = fc(k, pt, 1);
  LLVMValueRef az = and1(k, fcmp(k, LLVMRealOEQ, a.re, zero), fcmp(k, LLVMRealOEQ, a.im, zero));
  LLVMValueRef bz = and1(k, fcmp(k, LLVMRealOEQ, b.re, zero), fcmp(k, LLVMRealOEQ, b.im, zero));
  LLVMValueRef to0 = and1(k, az, fcmp(k, LLVMRealOGT, b.re, zero)), to1 = and1(k, az, bz);
  r.re = sel(k, to1, one, sel(k, to0, zero, r.re));
  r.im = sel(k, or1(k, to1, to0), zero, r.im);
  return r;
}

/* sin z = (sin x cosh y, cos x sinh y); cos z = (cos x cosh y, -sin x sinh y). */
static GxC cx_sincos(GenKern *k, DType pt, GxC z, bool cosine) {
  LLVMValueRef s = gen_intr(k, "llvm.sin", z.re, NULL), c = gen_intr(k, "llvm.cos", z.re, NULL);
  LLVMValueRef sh = libm(k, "sinh", pt, z.im, NULL), ch = libm(k, "cosh", pt, z.im, NULL);
  if (cosine) return (GxC){fmul(k, c, ch), LLVMBuildFNeg(k->B, fmul(k, s, sh), "")};
  return (GxC){fmul(k, s, ch), fmul(k, c, sh)};
}

/* ------------------------------------------------------------------ ops */

/* A c64 value's parts widened to f64, and back (each rounded once). */
static GxC cx_widen(GenKern *k, GxC z) {
  return (GxC){LLVMBuildFPExt(k->B, z.re, k->cg->f64, ""),
               LLVMBuildFPExt(k->B, z.im, k->cg->f64, "")};
}
static GxC cx_narrow(GenKern *k, GxC z) {
  return (GxC){LLVMBuildFPTrunc(k->B, z.re, k->cg->f32, ""),
               LLVMBuildFPTrunc(k->B, z.im, k->cg->f32, "")};
}

/* The functions (and division) of a c64 value are computed in f64 and rounded once: the
 * interpreter's double precision, and no overflow of intermediate values (e^x cos y with e^x
 * past f32's range, the squares of abs). */
static LLVMValueRef cx_unary(GenKern *k, const HInstr *in, DType t, GxC z) {
  switch ((int)in->op) {
  case OP_NEGATE:
    return cx_join(k, t, (GxC){LLVMBuildFNeg(k->B, z.re, ""), LLVMBuildFNeg(k->B, z.im, "")});
  case OP_COPY: return cx_join(k, t, z);
  case OP_REAL: return z.re;
  case OP_IMAG: return z.im;
  default: break;
  }
  bool wide = t == DT_C64;
  DType pt = DT_F64;
  if (wide) z = cx_widen(k, z);
  GxC one = {fc(k, pt, 1), fc(k, pt, 0)}, r;
  switch ((int)in->op) {
  case OP_ABS: {
    LLVMValueRef m = cx_abs(k, pt, z);
    return wide ? LLVMBuildFPTrunc(k->B, m, k->cg->f32, "") : m;
  }
  case OP_SIGN: {
    LLVMValueRef m = cx_abs(k, pt, z);
    LLVMValueRef z0 = fcmp(k, LLVMRealOEQ, m, fc(k, pt, 0));
    r = (GxC){sel(k, z0, z.re, fdiv(k, z.re, m)), sel(k, z0, z.im, fdiv(k, z.im, m))};
    break;
  }
  case OP_EXP: r = cx_exp(k, pt, z); break;
  case OP_EXPM1: {
    /* (expm1(x) cos y - 2 sin^2(y/2), e^x sin y): no cancellation near 0 */
    LLVMValueRef s2 = gen_intr(k, "llvm.sin", fmul(k, z.im, fc(k, pt, 0.5)), NULL);
    LLVMValueRef em = libm(k, "expm1", pt, z.re, NULL);
    r.re = fsub(k, fmul(k, em, gen_intr(k, "llvm.cos", z.im, NULL)),
                fmul(k, fc(k, pt, 2), fmul(k, s2, s2)));
    r.im = fmul(k, gen_intr(k, "llvm.exp", z.re, NULL), gen_intr(k, "llvm.sin", z.im, NULL));
    break;
  }
  case OP_LOG: r = cx_log(k, pt, z); break;
  case OP_LOG1P: {
    /* (log1p(x (2 + x) + y^2) / 2, atan2(y, 1 + x)) */
    LLVMValueRef u = fadd(k, fmul(k, z.re, fadd(k, fc(k, pt, 2), z.re)), fmul(k, z.im, z.im));
    r.re = fmul(k, libm(k, "log1p", pt, u, NULL), fc(k, pt, 0.5));
    r.im = libm(k, "atan2", pt, z.im, fadd(k, fc(k, pt, 1), z.re));
    break;
  }
  case OP_LOGISTIC: {
    GxC e = cx_exp(k, pt, (GxC){LLVMBuildFNeg(k->B, z.re, ""), LLVMBuildFNeg(k->B, z.im, "")});
    r = cx_div(k, pt, one, cx_add(k, one, e));
    break;
  }
  case OP_SQRT: r = cx_sqrt(k, pt, z); break;
  case OP_RSQRT: r = cx_div(k, pt, one, cx_sqrt(k, pt, z)); break;
  case OP_CBRT:
    r = cx_exp(k, pt, cx_mul(k, (GxC){fc(k, pt, 1.0 / 3), fc(k, pt, 0)}, cx_log(k, pt, z)));
    break;
  case OP_SINE: r = cx_sincos(k, pt, z, false); break;
  case OP_COSINE: r = cx_sincos(k, pt, z, true); break;
  case OP_TAN: {
    /* tan z = -i tanh(i z) */
    GxC t2 = cx_tanh(k, pt, (GxC){LLVMBuildFNeg(k->B, z.im, ""), z.re});
    r = (GxC){t2.im, LLVMBuildFNeg(k->B, t2.re, "")};
    break;
  }
  case OP_TANH: r = cx_tanh(k, pt, z); break;
  default: return cx_fail(k, in, "this op");
  }
  return cx_join(k, t, wide ? cx_narrow(k, r) : r);
}

static LLVMValueRef cx_binary(GenKern *k, const HInstr *in, DType t, GxC a, GxC b) {
  GxC r;
  switch ((int)in->op) {
  case OP_ADD: r = cx_add(k, a, b); break;
  case OP_SUBTRACT: r = cx_sub(k, a, b); break;
  case OP_MULTIPLY: r = cx_mul(k, a, b); break;
  case OP_DIVIDE:
  case OP_POWER: {
    bool wide = t == DT_C64;
    if (wide) a = cx_widen(k, a), b = cx_widen(k, b);
    r = in->op == OP_DIVIDE ? cx_div(k, DT_F64, a, b) : cx_pow(k, DT_F64, a, b);
    if (wide) r = cx_narrow(k, r);
    break;
  }
  case OP_COMPARE: {
    LLVMValueRef eq = and1(k, fcmp(k, LLVMRealOEQ, a.re, b.re), fcmp(k, LLVMRealOEQ, a.im, b.im));
    if (in->cmp_dir == CMP_EQ) return eq;
    if (in->cmp_dir == CMP_NE) return LLVMBuildNot(k->B, eq, "");
    return cx_fail(k, in, "an ordered comparison");
  }
  default: return cx_fail(k, in, "this op");
  }
  return cx_join(k, t, r);
}

bool gen_complex_op(const HInstr *in) {
  if (in->op == OP_COMPLEX || in->op == OP_REAL || in->op == OP_IMAG) return true;
  if (!(hlo_op_flags(in->op) & OPF_ELEM)) return false;
  if (hlo_dtype_is_complex(in->shape.dt)) return true;
  for (int j = 0; j < in->nops; j++)
    if (hlo_dtype_is_complex(in->ops[j]->shape.dt)) return true;
  return false;
}

LLVMValueRef gen_complex_elementwise(GenKern *k, const HInstr *in, LLVMValueRef *v) {
  DType ot = in->shape.dt, t0 = in->nops ? in->ops[0]->shape.dt : ot;
  switch ((int)in->op) {
  case OP_COMPLEX: return gen_complex(k, ot, v[0], v[1]);
  case OP_REAL:
  case OP_IMAG:
    if (!hlo_dtype_is_complex(t0)) /* of a real value: the value, or zero */
      return in->op == OP_REAL ? v[0] : LLVMConstReal(gen_reg_type(k->cg, t0), 0);
    break;
  case OP_CONVERT: return gen_convert(k, v[0], t0, ot);
  case OP_SELECT: return gen_select(k, v[0], v[1], v[2]);
  default: break;
  }
  if (!hlo_dtype_is_complex(t0)) return cx_fail(k, in, "a real operand");
  if (in->nops == 1) return cx_unary(k, in, t0, cx_parts(k, v[0]));
  if (in->nops == 2 && in->ops[1]->shape.dt == t0)
    return cx_binary(k, in, t0, cx_parts(k, v[0]), cx_parts(k, v[1]));
  return cx_fail(k, in, "these operands");
}

LLVMValueRef gen_complex_convert(GenKern *k, LLVMValueRef v, DType from, DType to) {
  DType pf = hlo_dtype_component(from), pt = hlo_dtype_component(to);
  if (!hlo_dtype_is_complex(to)) /* (refused by the verifier: the real part) */
    return gen_convert(k, LLVMBuildExtractValue(k->B, v, 0, ""), pf, to);
  if (!hlo_dtype_is_complex(from))
    return gen_complex(k, to, gen_convert(k, v, from, pt),
                       LLVMConstReal(gen_reg_type(k->cg, pt), 0));
  GxC z = cx_parts(k, v);
  return gen_complex(k, to, gen_convert(k, z.re, pf, pt), gen_convert(k, z.im, pf, pt));
}

LLVMValueRef gen_complex_add(GenKern *k, DType t, LLVMValueRef a, LLVMValueRef b) {
  return cx_join(k, t, cx_add(k, cx_parts(k, a), cx_parts(k, b)));
}

LLVMValueRef gen_complex_mul(GenKern *k, DType t, LLVMValueRef a, LLVMValueRef b) {
  return cx_join(k, t, cx_mul(k, cx_parts(k, a), cx_parts(k, b)));
}

LLVMValueRef gen_select(GenKern *k, LLVMValueRef c, LLVMValueRef a, LLVMValueRef b) {
  if (LLVMGetTypeKind(LLVMTypeOf(a)) != LLVMStructTypeKind)
    return LLVMBuildSelect(k->B, c, a, b, "");
  GxC x = cx_parts(k, a), y = cx_parts(k, b);
  LLVMValueRef z = LLVMGetPoison(LLVMTypeOf(a));
  z = LLVMBuildInsertValue(k->B, z, sel(k, c, x.re, y.re), 0, "");
  return LLVMBuildInsertValue(k->B, z, sel(k, c, x.im, y.im), 1, "");
}

LLVMValueRef gen_complex_const(GenKern *k, DType t, double re, double im) {
  DType pt = hlo_dtype_component(t);
  LLVMValueRef parts[2] = {fc(k, pt, re), fc(k, pt, im)};
  return LLVMConstStructInContext(k->cg->C, parts, 2, 0);
}
