/* targets/gen/gen_elemental.c: the elemental generator, shared by both targets.
 *
 * XLA's elemental IR emitter design: the value of an instruction at an output index is
 * generated as scalar IR by recursion through its operands, so a whole fused computation
 * becomes the body of ONE loop nest. value = gen_value(k, instr, index[]):
 *   - an entry-computation value other than the kernel's own root is a load from its buffer
 *     (this is also how a lone instruction becomes a "fusion of one");
 *   - a parameter of a computation entered during generation (the fused computation of the
 *     kernel's fusion, a nested fusion, a call, a map body, a reducer) resolves through the
 *     binding stack to the caller's operand at the same index, or to a bound scalar;
 *   - every other op maps its output index to operand indices (broadcast, reshape,
 *     transpose, slice, pad, concatenate, reverse, dynamic-slice, dynamic-update-slice,
 *     gather, iota) or computes from operand values at the same index (elementwise math);
 *   - reduce, reduce-window, dot and convolution generate an inner loop nest accumulating in
 *     an alloca (promoted to registers by LLVM), calling the reducer computation inline as
 *     scalar code; a small window (a 3x3 pool) is unrolled into straight-line code instead,
 *     its operand indices clamped only on the sides where padding can be reached.
 * Out-of-bounds reads (pad, concatenate, convolution padding, gathers) never happen: the index
 * is clamped into range and the value replaced by a select, which keeps loops branch-free so
 * LLVM can vectorize them. Values already generated at the same index in the same loop scope
 * are reused (a small cache dropped when a loop closes), so shared subexpressions of a DAG are
 * emitted once. Math: LLVM intrinsics where they exist (exp, log, sqrt, sin, cos, pow, ...),
 * a rational approximation for tanh (vectorizable, ~2 ulp) and a polynomial one for f32 exp
 * (vectorizable, ~1 ulp; llvm.exp is a libm call per element), libm calls for the rare rest;
 * reduce-precision as integer arithmetic on the value's bits in its own format (vectorizable).
 * fp8 (f8e4m3fn, f8e5m2; LLVM 19 has no such IR type) is held as f32 in registers and as its
 * byte in memory: loads decode and stores encode with integer IR (gen_fp8_decode/_encode, the
 * rules of hlo/literal.c's scalar conversions), and every op that makes a new fp8 value rounds
 * its f32 result to fp8 (el_fp8_round), so each fp8 instruction rounds once as the
 * interpreter's does; dots and convolutions touching fp8 accumulate in f32. Complex values
 * (c64, c128) are structs of their two parts in registers, interleaved in memory; their
 * arithmetic and functions are gen_complex.c's, reached from el_elementwise, gen_convert,
 * gen_add and the dot's product, and a select of two of them selects each part (gen_select). */
#include "gen.h"

#include <complex.h>
#include <math.h>
#include <string.h>

static LLVMValueRef el_fail(GenKern *k, const HInstr *in, const char *what) {
  if (!k->failed) hlo_err_at(k->cg->err, in, "CPU target: %s", what);
  k->failed = true;
  return NULL;
}

/* ------------------------------------------------------------------ index arithmetic */

static LLVMValueRef ix_add(GenKern *k, LLVMValueRef a, LLVMValueRef b) {
  return LLVMBuildNSWAdd(k->B, a, b, "");
}
static LLVMValueRef ix_sub(GenKern *k, LLVMValueRef a, LLVMValueRef b) {
  return LLVMBuildNSWSub(k->B, a, b, "");
}
static LLVMValueRef ix_mul(GenKern *k, LLVMValueRef a, int64_t c) {
  if (c == 1) return a;
  return LLVMBuildNSWMul(k->B, a, gen_i64(k, c), "");
}
static LLVMValueRef ix_clamp(GenKern *k, LLVMValueRef v, int64_t lo, int64_t hi) {
  if (hi < lo) hi = lo;
  LLVMValueRef l = gen_i64(k, lo), h = gen_i64(k, hi);
  v = LLVMBuildSelect(k->B, LLVMBuildICmp(k->B, LLVMIntSLT, v, l, ""), l, v, "");
  return LLVMBuildSelect(k->B, LLVMBuildICmp(k->B, LLVMIntSGT, v, h, ""), h, v, "");
}
/* lo <= v < hi as i1 */
static LLVMValueRef ix_in(GenKern *k, LLVMValueRef v, int64_t lo, int64_t hi) {
  LLVMValueRef a = LLVMBuildICmp(k->B, LLVMIntSGE, v, gen_i64(k, lo), "");
  LLVMValueRef b = LLVMBuildICmp(k->B, LLVMIntSLT, v, gen_i64(k, hi), "");
  return LLVMBuildAnd(k->B, a, b, "");
}
static LLVMValueRef and1(GenKern *k, LLVMValueRef a, LLVMValueRef b) {
  if (!a) return b;
  return LLVMBuildAnd(k->B, a, b, "");
}
/* Index p into a dimension of extent dim, whose values lie in [lo, hi] where known (as far
 * as the static extremes tell), folded into *ok as a validity test and clamped on the sides
 * where it can leave [0, dim) and no other: gen_index_range narrows the extremes inside loops
 * of constant bounds, so the interior of a split loop (the CPU's kn_segments) tests
 * nothing and its index stays affine in the loop variable, which keeps the loop vectorizable. */
static LLVMValueRef ix_bound(GenKern *k, LLVMValueRef p, int64_t dim, int64_t lo, int64_t hi,
                             LLVMValueRef *ok) {
  LLVMBuilderRef B = k->B;
  int64_t rl, rh;
  if (gen_index_range(k, p, &rl, &rh)) {
    if (rl > lo) lo = rl;
    if (rh < hi) hi = rh;
  }
  bool low = lo<0, high = hi> dim - 1;
  if (low && high) {
    *ok = and1(k, *ok, ix_in(k, p, 0, dim));
    return ix_clamp(k, p, 0, dim - 1);
  }
  if (!low && !high) return p;
  LLVMValueRef c = gen_i64(k, low ? 0 : dim - 1);
  LLVMValueRef in_r = LLVMBuildICmp(B, low ? LLVMIntSGE : LLVMIntSLE, p, c, "");
  *ok = and1(k, *ok, in_r);
  return LLVMBuildSelect(B, in_r, p, c, "");
}

/* A scalar index value (any integer dtype) as i64. */
static LLVMValueRef ix_from(GenKern *k, LLVMValueRef v, DType t) {
  return gen_convert(k, v, t, DT_S64);
}

/* A dynamic slice's start: the scalar si as an i64, clamped to [0, hi] as XLA clamps it. */
static LLVMValueRef el_start(GenKern *k, const HInstr *si, int64_t hi) {
  LLVMValueRef s = gen_value(k, si, NULL);
  return s ? ix_clamp(k, ix_from(k, s, si->shape.dt), 0, hi) : NULL;
}

/* oi = the starts (scalar operands, one per dim) clamped so that a window of ws fits os, plus
 * idx: a dynamic-slice's operand index, a dynamic-update-slice's output index. */
static bool el_window_index(GenKern *k, HInstr *const *starts, const Shape *os, const Shape *ws,
                            const LLVMValueRef *idx, LLVMValueRef *oi) {
  for (int d = 0; d < os->rank; d++) {
    LLVMValueRef s = el_start(k, starts[d], os->dims[d] - ws->dims[d]);
    if (!s) return false;
    oi[d] = ix_add(k, s, idx[d]);
  }
  return true;
}

/* ------------------------------------------------------------------ constants, intrinsics */

LLVMValueRef gen_zero(GenKern *k, DType t) {
  if (hlo_dtype_is_complex(t)) return gen_complex_const(k, t, 0, 0);
  LLVMTypeRef ty = gen_reg_type(k->cg, t);
  return hlo_dtype_is_float(t) ? LLVMConstReal(ty, 0.0) : LLVMConstInt(ty, 0, 0);
}

static LLVMValueRef el_intr(GenKern *k, const char *name, LLVMTypeRef ty, LLVMValueRef *args,
                            int n) {
  unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
  HLO_ASSERT(id != 0);
  LLVMTypeRef tys[1] = {ty};
  LLVMValueRef f = LLVMGetIntrinsicDeclaration(k->cg->M, id, tys, 1);
  LLVMTypeRef ft = LLVMIntrinsicGetType(k->cg->C, id, tys, 1);
  return LLVMBuildCall2(k->B, ft, f, args, (unsigned)n, "");
}
static LLVMValueRef el_intr1(GenKern *k, const char *name, LLVMValueRef a) {
  return el_intr(k, name, LLVMTypeOf(a), &a, 1);
}
static LLVMValueRef el_intr2(GenKern *k, const char *name, LLVMValueRef a, LLVMValueRef b) {
  LLVMValueRef args[2] = {a, b};
  return el_intr(k, name, LLVMTypeOf(a), args, 2);
}

LLVMValueRef gen_intr(GenKern *k, const char *name, LLVMValueRef a, LLVMValueRef b) {
  return b ? el_intr2(k, name, a, b) : el_intr1(k, name, a);
}

/* Floating-point maximum (max) or minimum of a and b, as XLA defines them (and the reference
 * interpreter computes them): isnan(a) || a >= b ? a : b (<= for the minimum), so NaN
 * propagates and of two equal values (+0 and -0) a is the result. Written as
 * isnan(b) ? b : (b > a ? b : a), which x86 does in three branch-free instructions (maxps,
 * a compare, a blend), where llvm.maximum orders the zeros by their sign (six, and branches
 * in scalar code, which mispredicted on a max-pool's remainder loop). Inside a reduction
 * loop (GenKern.reduce_loop) llvm.maximum stays: the loop vectorizer turns that recurrence
 * into a vector reduction, and the signs of zeros are the only difference. */
static LLVMValueRef el_fminmax(GenKern *k, LLVMValueRef a, LLVMValueRef b, bool max) {
  LLVMBuilderRef B = k->B;
  if (k->reduce_loop) return el_intr2(k, max ? "llvm.maximum" : "llvm.minimum", a, b);
  LLVMValueRef better = LLVMBuildFCmp(B, max ? LLVMRealOGT : LLVMRealOLT, b, a, "");
  LLVMValueRef m = LLVMBuildSelect(B, better, b, a, "");
  return LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealUNO, b, b, ""), b, m, "");
}

/* A libm function of n float/double arguments (f16/bf16 computed in f32). */
static LLVMValueRef el_libm(GenKern *k, const char *name, DType t, LLVMValueRef *args, int n) {
  GenCg *cg = k->cg;
  bool dbl = t == DT_F64;
  LLVMTypeRef ty = dbl ? cg->f64 : cg->f32;
  LLVMValueRef a[2];
  for (int i = 0; i < n; i++)
    a[i] = gen_convert(k, args[i], t, dbl ? DT_F64 : DT_F32);
  char fname[32];
  snprintf(fname, sizeof fname, "%s%s", name, dbl ? "" : "f");
  LLVMTypeRef ps[2] = {ty, ty};
  LLVMTypeRef ft = LLVMFunctionType(ty, ps, (unsigned)n, 0);
  LLVMValueRef f = LLVMGetNamedFunction(cg->M, fname);
  if (!f) f = LLVMAddFunction(cg->M, fname, ft);
  LLVMValueRef r = LLVMBuildCall2(k->B, ft, f, a, (unsigned)n, "");
  return gen_convert(k, r, dbl ? DT_F64 : DT_F32, t);
}

LLVMValueRef gen_libm(GenKern *k, const char *name, DType t, LLVMValueRef *args, int n) {
  return el_libm(k, name, t, args, n);
}

/* tanh for f32: Eigen-style rational approximation on [-7.9, 7.9] (odd polynomial of degree
 * 13 over an even one of degree 6), exact sign, |x| < 4e-4 returns x. */
static LLVMValueRef el_tanh_f32(GenKern *k, LLVMValueRef x) {
  LLVMBuilderRef B = k->B;
  LLVMTypeRef f = k->cg->f32;
  static const double alpha[] = {-2.76076847742355e-16, 2.00018790482477e-13, -8.60467152213735e-11,
                                 5.12229709037114e-08,  1.48572235717979e-05, 6.37261928875436e-04,
                                 4.89352455891786e-03};
  static const double beta[] = {1.19825839466702e-06, 1.18534705686654e-04, 2.26843463243900e-03,
                                4.89352518554385e-03};
  LLVMValueRef lim = LLVMConstReal(f, 7.90531110763549805);
  LLVMValueRef xc =
      el_intr2(k, "llvm.minnum", el_intr2(k, "llvm.maxnum", x, LLVMBuildFNeg(B, lim, "")), lim);
  LLVMValueRef x2 = LLVMBuildFMul(B, xc, xc, "");
  LLVMValueRef p = LLVMConstReal(f, alpha[0]);
  for (int i = 1; i < 7; i++)
    p = LLVMBuildFAdd(B, LLVMBuildFMul(B, p, x2, ""), LLVMConstReal(f, alpha[i]), "");
  p = LLVMBuildFMul(B, p, xc, "");
  LLVMValueRef q = LLVMConstReal(f, beta[0]);
  for (int i = 1; i < 4; i++)
    q = LLVMBuildFAdd(B, LLVMBuildFMul(B, q, x2, ""), LLVMConstReal(f, beta[i]), "");
  LLVMValueRef r = LLVMBuildFDiv(B, p, q, "");
  LLVMValueRef small =
      LLVMBuildFCmp(B, LLVMRealOLT, el_intr1(k, "llvm.fabs", x), LLVMConstReal(f, 0.0004), "");
  return LLVMBuildSelect(B, small, x, r, "");
}

/* a * b + c: llvm.fmuladd where fused (the target may fuse it), else a multiply and an add. */
static LLVMValueRef el_mad(GenKern *k, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c, bool fused) {
  if (!fused) return LLVMBuildFAdd(k->B, LLVMBuildFMul(k->B, a, b, ""), c, "");
  LLVMValueRef args[3] = {a, b, c};
  return el_intr(k, "llvm.fmuladd", LLVMTypeOf(c), args, 3);
}

LLVMValueRef gen_fmuladd(GenKern *k, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c) {
  return el_mad(k, a, b, c, true);
}

/* The f32 exps' common core, for xc in their clamped range: xc = n ln2 + r with n =
 * round(xc / ln2) and r in [-ln2/2, ln2/2] (ln2 in two parts, Cody-Waite), and Cephes' P(r) with
 * e^r = 1 + r + r^2 P(r) (about 1 ulp); fused: its multiply-adds as llvm.fmuladd. */
static LLVMValueRef el_exp_core(GenKern *k, LLVMValueRef xc, bool fused, LLVMValueRef *n,
                                LLVMValueRef *r) {
  LLVMBuilderRef B = k->B;
  LLVMTypeRef f = k->cg->f32;
  static const double p[] = {1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3,
                             4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1};
  *n = el_intr1(k, "llvm.floor",
                el_mad(k, xc, LLVMConstReal(f, 1.44269504088896341), LLVMConstReal(f, 0.5), fused));
  if (fused) {
    *r = el_mad(k, *n, LLVMConstReal(f, -0.693359375), xc, true);
    *r = el_mad(k, *n, LLVMConstReal(f, 2.12194440e-4), *r, true);
  } else {
    *r = LLVMBuildFSub(B, xc, LLVMBuildFMul(B, *n, LLVMConstReal(f, 0.693359375), ""), "");
    *r = LLVMBuildFSub(B, *r, LLVMBuildFMul(B, *n, LLVMConstReal(f, -2.12194440e-4), ""), "");
  }
  LLVMValueRef y = LLVMConstReal(f, p[0]);
  for (int i = 1; i < 6; i++)
    y = el_mad(k, y, *r, LLVMConstReal(f, p[i]), fused);
  return y;
}

/* 2^e for an i32 e in the normal exponents' range, as an f32. */
static LLVMValueRef el_pow2(GenKern *k, LLVMValueRef e) {
  LLVMTypeRef i32 = k->cg->i32;
  LLVMValueRef bits = LLVMBuildShl(k->B, LLVMBuildAdd(k->B, e, LLVMConstInt(i32, 127, 0), ""),
                                   LLVMConstInt(i32, 23, 0), "");
  return LLVMBuildBitCast(k->B, bits, k->cg->f32, "");
}

/* exp for f32, branch-free so loops of it vectorize (llvm.exp becomes a libm call per
 * element): el_exp_core, times 2^n built in the exponent field in two halves (so results down
 * to the subnormals scale correctly); above 88.72 +inf, below -103.98 zero, NaN kept. */
LLVMValueRef gen_exp_f32(GenKern *k, LLVMValueRef x) {
  LLVMBuilderRef B = k->B;
  LLVMTypeRef f = k->cg->f32, i32 = k->cg->i32;
  LLVMValueRef hi = LLVMConstReal(f, 88.72283935546875), lo = LLVMConstReal(f, -103.97207641601562);
  LLVMValueRef xc = el_intr2(k, "llvm.minnum", el_intr2(k, "llvm.maxnum", x, lo), hi);
  LLVMValueRef n, r, y = el_exp_core(k, xc, false, &n, &r);
  y = LLVMBuildFMul(B, y, LLVMBuildFMul(B, r, r, ""), "");
  y = LLVMBuildFAdd(B, LLVMBuildFAdd(B, y, r, ""), LLVMConstReal(f, 1.0), "");
  /* 2^n = 2^n1 * 2^n2, n1 = n / 2 (n in [-150, 128]: both halves normal exponents) */
  LLVMValueRef ni = LLVMBuildFPToSI(B, n, i32, "");
  LLVMValueRef n1 = LLVMBuildAShr(B, ni, LLVMConstInt(i32, 1, 0), "");
  LLVMValueRef n2 = LLVMBuildSub(B, ni, n1, "");
  y = LLVMBuildFMul(B, LLVMBuildFMul(B, y, el_pow2(k, n1), ""), el_pow2(k, n2), "");
  y = LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealOGT, x, hi, ""), LLVMConstReal(f, INFINITY), y,
                      "");
  y = LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealOLT, x, lo, ""), LLVMConstReal(f, 0.0), y, "");
  return LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealUNO, x, x, ""), x, y, "");
}

LLVMValueRef gen_exp_f32_nonpos(GenKern *k, LLVMValueRef x) {
  LLVMBuilderRef B = k->B;
  LLVMTypeRef f = k->cg->f32;
  LLVMValueRef lo = LLVMConstReal(f, -87.0);
  LLVMValueRef n, r, y = el_exp_core(k, el_intr2(k, "llvm.maxnum", x, lo), true, &n, &r);
  y = el_mad(k, y, LLVMBuildFMul(B, r, r, ""), LLVMBuildFAdd(B, r, LLVMConstReal(f, 1.0), ""),
             true);
  y = LLVMBuildFMul(B, y, el_pow2(k, LLVMBuildFPToSI(B, n, k->cg->i32, "")), "");
  y = LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealOLT, x, lo, ""), LLVMConstReal(f, 0.0), y, "");
  return LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealUNO, x, x, ""), x, y, "");
}

/* ------------------------------------------------------------------ conversions */

/* fp8 format of t: exponent and mantissa bits, whether IEEE-like (f8e5m2) or without
 * infinities and with S.1111.111 its only NaN (f8e4m3fn). */
static void el_fp8_format(DType t, int *e, int *m, bool *ieee) {
  HLO_ASSERT(hlo_dtype_is_fp8(t));
  bool e5 = t == DT_F8E5M2;
  *e = e5 ? 5 : 4, *m = e5 ? 2 : 3, *ieee = e5;
}

static LLVMValueRef el_i32(GenKern *k, uint64_t v) { return LLVMConstInt(k->cg->i32, v, 0); }

/* bits (i8) -> f32: the magnitude shifted into f32's exponent and mantissa and rebiased
 * (normals); subnormals as their mantissa times 2^(1 - bias - m), exact; an all-ones exponent
 * (f8e5m2) becomes f32's with the mantissa bits on top; f8e4m3fn's NaN f32's quiet NaN. */
LLVMValueRef gen_fp8_decode(GenKern *k, DType t, LLVMValueRef bits) {
  LLVMBuilderRef B = k->B;
  int e, m;
  bool ieee;
  el_fp8_format(t, &e, &m, &ieee);
  int bias = (1 << (e - 1)) - 1;
  LLVMValueRef c = LLVMBuildZExt(B, bits, k->cg->i32, "");
  LLVMValueRef a = LLVMBuildAnd(B, c, el_i32(k, 0x7f), "");
  LLVMValueRef sign = LLVMBuildShl(B, LLVMBuildAnd(B, c, el_i32(k, 0x80), ""), el_i32(k, 24), "");
  LLVMValueRef sh = LLVMBuildShl(B, a, el_i32(k, (uint64_t)(23 - m)), "");
  LLVMValueRef r = LLVMBuildAdd(B, sh, el_i32(k, (uint64_t)(127 - bias) << 23), "");
  LLVMValueRef sub = LLVMBuildFMul(B, LLVMBuildUIToFP(B, a, k->cg->f32, ""),
                                   LLVMConstReal(k->cg->f32, ldexp(1.0, 1 - bias - m)), "");
  LLVMValueRef is_sub = LLVMBuildICmp(B, LLVMIntULT, a, el_i32(k, 1u << m), "");
  r = LLVMBuildSelect(B, is_sub, LLVMBuildBitCast(B, sub, k->cg->i32, ""), r, "");
  if (ieee) {
    LLVMValueRef special = LLVMBuildICmp(B, LLVMIntUGE, a, el_i32(k, ((1u << e) - 1) << m), "");
    r = LLVMBuildSelect(B, special, LLVMBuildOr(B, sh, el_i32(k, 0x7f800000), ""), r, "");
  } else {
    LLVMValueRef nan = LLVMBuildICmp(B, LLVMIntEQ, a, el_i32(k, 0x7f), "");
    r = LLVMBuildSelect(B, nan, el_i32(k, 0x7fc00000), r, "");
  }
  return LLVMBuildBitCast(B, LLVMBuildOr(B, r, sign, ""), k->cg->f32, "");
}

/* f32 -> bits (i8), on the f32 bits a of |x|: normals round to nearest even by adding half an
 * ulp of the fp8 mantissa less one plus its lowest kept bit, then shift and rebias (a carry
 * moves into the next binade); a result past the largest finite code overflows to infinity
 * (f8e5m2) or NaN (f8e4m3fn). Below fp8's smallest normal the value scaled to units of the
 * subnormal quantum (exact: a power of two) is rounded to an integer by adding 2^23 in f32
 * (round to nearest even: the sum's low bits are the result). A NaN keeps the top mantissa
 * bits (f8e5m2, made quiet when they are zero) or is S.1111.111. The sign is copied. */
LLVMValueRef gen_fp8_encode(GenKern *k, DType t, LLVMValueRef x) {
  LLVMBuilderRef B = k->B;
  GenCg *cg = k->cg;
  int e, m;
  bool ieee;
  el_fp8_format(t, &e, &m, &ieee);
  int bias = (1 << (e - 1)) - 1, sh = 23 - m;
  LLVMValueRef xb = LLVMBuildBitCast(B, x, cg->i32, "");
  LLVMValueRef sign = LLVMBuildAnd(B, LLVMBuildLShr(B, xb, el_i32(k, 24), ""), el_i32(k, 0x80), "");
  LLVMValueRef a = LLVMBuildAnd(B, xb, el_i32(k, 0x7fffffff), "");
  /* normal */
  LLVMValueRef lsb =
      LLVMBuildAnd(B, LLVMBuildLShr(B, a, el_i32(k, (uint64_t)sh), ""), el_i32(k, 1), "");
  LLVMValueRef rn =
      LLVMBuildAdd(B, a, LLVMBuildAdd(B, lsb, el_i32(k, (1u << (sh - 1)) - 1), ""), "");
  LLVMValueRef cn = LLVMBuildSub(B, LLVMBuildLShr(B, rn, el_i32(k, (uint64_t)sh), ""),
                                 el_i32(k, (uint64_t)(127 - bias) << m), "");
  uint64_t expall = (1u << e) - 1;
  uint64_t maxc = ieee ? ((expall - 1) << m) | ((1u << m) - 1) : 0x7e,
           ovc = ieee ? expall << m : 0x7f;
  LLVMValueRef over = LLVMBuildICmp(B, LLVMIntUGT, cn, el_i32(k, maxc), "");
  LLVMValueRef r = LLVMBuildSelect(B, over, el_i32(k, ovc), cn, "");
  /* subnormal (and zero) */
  LLVMValueRef af = LLVMBuildBitCast(B, a, cg->f32, "");
  LLVMValueRef sc = LLVMBuildFMul(B, af, LLVMConstReal(cg->f32, ldexp(1.0, bias + m - 1)), "");
  LLVMValueRef mg = LLVMBuildFAdd(B, sc, LLVMConstReal(cg->f32, 8388608.0), "");
  LLVMValueRef cs =
      LLVMBuildSub(B, LLVMBuildBitCast(B, mg, cg->i32, ""), el_i32(k, 0x4b000000), "");
  LLVMValueRef is_sub =
      LLVMBuildICmp(B, LLVMIntULT, a, el_i32(k, (uint64_t)(128 - bias) << 23), "");
  r = LLVMBuildSelect(B, is_sub, cs, r, "");
  /* NaN */
  LLVMValueRef nanc = el_i32(k, 0x7f);
  if (ieee) {
    LLVMValueRef top = LLVMBuildAnd(B, LLVMBuildLShr(B, a, el_i32(k, (uint64_t)sh), ""),
                                    el_i32(k, (1u << m) - 1), "");
    LLVMValueRef q = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntEQ, top, el_i32(k, 0), ""),
                                     el_i32(k, 1u << (m - 1)), top, "");
    nanc = LLVMBuildOr(B, q, el_i32(k, expall << m), "");
  }
  LLVMValueRef is_nan = LLVMBuildICmp(B, LLVMIntUGT, a, el_i32(k, 0x7f800000), "");
  r = LLVMBuildSelect(B, is_nan, nanc, r, "");
  return LLVMBuildTrunc(B, LLVMBuildOr(B, r, sign, ""), cg->i8, "");
}

/* f32 x rounded to the nearest value of fp8 type t, still as f32. */
static LLVMValueRef el_fp8_round(GenKern *k, DType t, LLVMValueRef x) {
  return gen_fp8_decode(k, t, gen_fp8_encode(k, t, x));
}

/* f64 -> f32 rounded to odd (truncated, the lowest bit set when inexact): rounding that to
 * the far narrower fp8 gives the correctly rounded fp8 value, where f64 -> f32 -> fp8 by
 * nearest twice could round twice the same way. */
static LLVMValueRef el_f64_to_f32_odd(GenKern *k, LLVMValueRef d) {
  LLVMBuilderRef B = k->B;
  LLVMValueRef f = LLVMBuildFPTrunc(B, d, k->cg->f32, "");
  LLVMValueRef back = LLVMBuildFPExt(B, f, k->cg->f64, "");
  LLVMValueRef inexact = LLVMBuildFCmp(B, LLVMRealONE, back, d, "");
  LLVMValueRef away = LLVMBuildAnd(B, inexact,
                                   LLVMBuildFCmp(B, LLVMRealOGT, el_intr1(k, "llvm.fabs", back),
                                                 el_intr1(k, "llvm.fabs", d), ""),
                                   "");
  LLVMValueRef bits = LLVMBuildBitCast(B, f, k->cg->i32, "");
  bits = LLVMBuildSub(B, bits, LLVMBuildZExt(B, away, k->cg->i32, ""), "");
  bits = LLVMBuildOr(B, bits, LLVMBuildZExt(B, inexact, k->cg->i32, ""), "");
  return LLVMBuildBitCast(B, bits, k->cg->f32, "");
}

/* f32 -> bf16 as hlo_f32_to_bf16 does (to nearest even, a NaN made quiet), in integer IR: for
 * the values of fp8 code (an fptrunc to bfloat is a call of __truncsfbf2 on x86 without
 * AVX512-BF16, which not every libgcc has). */
static LLVMValueRef el_f32_to_bf16(GenKern *k, LLVMValueRef x) {
  LLVMBuilderRef B = k->B;
  LLVMValueRef b = LLVMBuildBitCast(B, x, k->cg->i32, "");
  LLVMValueRef lsb = LLVMBuildAnd(B, LLVMBuildLShr(B, b, el_i32(k, 16), ""), el_i32(k, 1), "");
  LLVMValueRef r = LLVMBuildAdd(B, b, LLVMBuildAdd(B, lsb, el_i32(k, 0x7fff), ""), "");
  LLVMValueRef nan = LLVMBuildICmp(B, LLVMIntUGT, LLVMBuildAnd(B, b, el_i32(k, 0x7fffffff), ""),
                                   el_i32(k, 0x7f800000), "");
  r = LLVMBuildSelect(B, nan, LLVMBuildOr(B, b, el_i32(k, 0x400000), ""), r, "");
  LLVMValueRef h = LLVMBuildTrunc(B, LLVMBuildLShr(B, r, el_i32(k, 16), ""), k->cg->i16, "");
  return LLVMBuildBitCast(B, h, k->cg->bf16, "");
}

/* An integer of at most 8 bits (signed or not) as float type `to`, exactly: the f32 of bits
 * 0x4B000000 + x (+ 128 when signed) is 2^23 + x (+ 128); less that, then widened or narrowed
 * (|x| <= 255 is exact in every float type; as an f32 its low 16 bits are zero, so its bf16 is
 * its high half). */
static LLVMValueRef el_int8_to_float(GenKern *k, LLVMValueRef v, bool sgn, DType to) {
  LLVMBuilderRef B = k->B;
  GenCg *g = k->cg;
  LLVMValueRef x = sgn ? LLVMBuildSExt(B, v, g->i32, "") : LLVMBuildZExt(B, v, g->i32, "");
  x = LLVMBuildAdd(B, x, LLVMConstInt(g->i32, 0x4B000000u + (sgn ? 128u : 0u), 0), "");
  LLVMValueRef f = LLVMBuildBitCast(B, x, g->f32, "");
  f = LLVMBuildFSub(B, f, LLVMConstReal(g->f32, 8388608.0 + (sgn ? 128.0 : 0.0)), "");
  if (to == DT_BF16) {
    LLVMValueRef hi =
        LLVMBuildLShr(B, LLVMBuildBitCast(B, f, g->i32, ""), LLVMConstInt(g->i32, 16, 0), "");
    return LLVMBuildBitCast(B, LLVMBuildTrunc(B, hi, g->i16, ""), g->bf16, "");
  }
  return to == DT_F32 ? f : gen_convert(k, f, DT_F32, to);
}

LLVMValueRef gen_convert(GenKern *k, LLVMValueRef v, DType from, DType to) {
  if (from == to) return v;
  if (hlo_dtype_is_complex(from) || hlo_dtype_is_complex(to))
    return gen_complex_convert(k, v, from, to);
  /* fp8 values are f32 in registers: from one, convert as from f32 (to bf16 exactly, in
     integer IR); to one, get f32 (by odd rounding from f64) and round it to the type */
  if (hlo_dtype_is_fp8(from) && to == DT_BF16) return el_f32_to_bf16(k, v);
  if (hlo_dtype_is_fp8(from) && !hlo_dtype_is_fp8(to)) return gen_convert(k, v, DT_F32, to);
  if (hlo_dtype_is_fp8(to)) {
    if (from == DT_F64)
      v = el_f64_to_f32_odd(k, v);
    else if (!hlo_dtype_is_fp8(from))
      v = gen_convert(k, v, from, DT_F32);
    return el_fp8_round(k, to, v);
  }
  LLVMBuilderRef B = k->B;
  LLVMTypeRef tt = gen_reg_type(k->cg, to);
  DKind fk = hlo_dtype_kind(from), tk = hlo_dtype_kind(to);
  if (tk == DK_PRED) {
    if (fk == DK_FLOAT)
      return LLVMBuildFCmp(B, LLVMRealUNE, v, LLVMConstReal(LLVMTypeOf(v), 0), "");
    return LLVMBuildICmp(B, LLVMIntNE, v, LLVMConstInt(LLVMTypeOf(v), 0, 0), "");
  }
  if (fk == DK_PRED) {
    if (tk == DK_FLOAT) return LLVMBuildUIToFP(B, v, tt, "");
    return LLVMBuildZExt(B, v, tt, "");
  }
  if (fk == DK_FLOAT && tk == DK_FLOAT) {
    /* bf16 <-> f16 through f32 */
    if ((from == DT_BF16 && to == DT_F16) || (from == DT_F16 && to == DT_BF16))
      v = LLVMBuildFPExt(B, v, k->cg->f32, ""), from = DT_F32;
    if (hlo_dtype_size(from) < hlo_dtype_size(to) || (from == DT_BF16 && to == DT_F32))
      return LLVMBuildFPExt(B, v, tt, "");
    return LLVMBuildFPTrunc(B, v, tt, "");
  }
  if (fk == DK_FLOAT) {
    LLVMValueRef a = v;
    unsigned id = LLVMLookupIntrinsicID(tk == DK_SINT ? "llvm.fptosi.sat" : "llvm.fptoui.sat", 15);
    LLVMTypeRef tys[2] = {tt, LLVMTypeOf(v)};
    LLVMValueRef f = LLVMGetIntrinsicDeclaration(k->cg->M, id, tys, 2);
    return LLVMBuildCall2(B, LLVMIntrinsicGetType(k->cg->C, id, tys, 2), f, &a, 1, "");
  }
  if (tk == DK_FLOAT && k->cg->int8_float_bits && hlo_dtype_bits(from) <= 8)
    return el_int8_to_float(k, v, fk == DK_SINT, to);
  if (tk == DK_FLOAT) {
    if (fk == DK_SINT) return LLVMBuildSIToFP(B, v, tt, "");
    return LLVMBuildUIToFP(B, v, tt, "");
  }
  int fs = hlo_dtype_bits(from), ts = hlo_dtype_bits(to); /* s4, u4: i4 registers */
  if (fs == ts) return v;
  if (fs > ts) return LLVMBuildTrunc(B, v, tt, "");
  return fk == DK_SINT ? LLVMBuildSExt(B, v, tt, "") : LLVMBuildZExt(B, v, tt, "");
}

/* The integer constant x of type t (a vector type: in every lane, at most 64). */
static LLVMValueRef el_const_int(LLVMTypeRef t, unsigned long long x) {
  if (LLVMGetTypeKind(t) != LLVMVectorTypeKind) return LLVMConstInt(t, x, 0);
  LLVMValueRef e[64];
  unsigned n = LLVMGetVectorSize(t);
  for (unsigned j = 0; j < n && j < 64; j++)
    e[j] = LLVMConstInt(LLVMGetElementType(t), x, 0);
  return LLVMConstVector(e, n < 64 ? n : 64);
}

LLVMValueRef gen_round_bf16(GenKern *k, LLVMValueRef v) {
  LLVMBuilderRef B = k->B;
  LLVMTypeRef ft = LLVMTypeOf(v);
  bool vec = LLVMGetTypeKind(ft) == LLVMVectorTypeKind;
  unsigned n = vec ? LLVMGetVectorSize(ft) : 0;
  LLVMTypeRef i32 = vec ? LLVMVectorType(k->cg->i32, n) : k->cg->i32,
              i16 = vec ? LLVMVectorType(k->cg->i16, n) : k->cg->i16;
  LLVMTypeRef bt = vec ? LLVMVectorType(k->cg->bf16, n) : k->cg->bf16;
  LLVMValueRef u = LLVMBuildBitCast(B, v, i32, "");
  LLVMValueRef hi = LLVMBuildLShr(B, u, el_const_int(i32, 16), "");
  LLVMValueRef lsb = LLVMBuildAnd(B, hi, el_const_int(i32, 1), "");
  LLVMValueRef r = LLVMBuildAdd(B, LLVMBuildAdd(B, u, el_const_int(i32, 0x7fff), ""), lsb, "");
  LLVMValueRef h = LLVMBuildTrunc(B, LLVMBuildLShr(B, r, el_const_int(i32, 16), ""), i16, "");
  LLVMValueRef q = LLVMBuildTrunc(B, LLVMBuildOr(B, hi, el_const_int(i32, 0x40), ""), i16, "");
  LLVMValueRef nan = LLVMBuildFCmp(B, LLVMRealUNO, v, v, "");
  return LLVMBuildBitCast(B, LLVMBuildSelect(B, nan, q, h, ""), bt, "");
}

/* A materialized value at idx: loaded from its buffer, converted when the buffer holds another
 * type (a 16-bit product's f32 sums, rounded once to it). */
static LLVMValueRef el_materialized(GenKern *k, const GenMat *m, LLVMValueRef *idx) {
  const Shape *s = &m->in->shape;
  if (m->dt == DT_INVALID || m->dt == s->dt) return gen_load_elem(k, m->p, s, idx);
  Shape t = *s;
  t.dt = m->dt;
  LLVMValueRef v = gen_load_elem(k, m->p, &t, idx);
  return m->dt == DT_F32 && s->dt == DT_BF16 ? gen_round_bf16(k, v)
                                             : gen_convert(k, v, m->dt, s->dt);
}

LLVMValueRef gen_add(GenKern *k, DType t, LLVMValueRef a, LLVMValueRef b) {
  if (hlo_dtype_is_complex(t)) return gen_complex_add(k, t, a, b);
  if (hlo_dtype_is_float(t)) return LLVMBuildFAdd(k->B, a, b, "");
  if (t == DT_PRED) return LLVMBuildOr(k->B, a, b, "");
  return LLVMBuildAdd(k->B, a, b, "");
}

static LLVMValueRef el_mul(GenKern *k, DType t, LLVMValueRef a, LLVMValueRef b) {
  if (hlo_dtype_is_complex(t)) return gen_complex_mul(k, t, a, b);
  if (hlo_dtype_is_float(t)) return LLVMBuildFMul(k->B, a, b, "");
  if (t == DT_PRED) return LLVMBuildAnd(k->B, a, b, "");
  return LLVMBuildMul(k->B, a, b, "");
}

/* ------------------------------------------------------------------ scalar ops */

static LLVMValueRef el_int_minmax(GenKern *k, DType t, LLVMValueRef a, LLVMValueRef b, bool max) {
  bool s = hlo_dtype_kind(t) == DK_SINT;
  LLVMIntPredicate p = max ? (s ? LLVMIntSGT : LLVMIntUGT) : (s ? LLVMIntSLT : LLVMIntULT);
  return LLVMBuildSelect(k->B, LLVMBuildICmp(k->B, p, a, b, ""), a, b, "");
}

static LLVMValueRef el_compare(GenKern *k, const HInstr *in, LLVMValueRef a, LLVMValueRef b) {
  DType t = in->ops[0]->shape.dt;
  LLVMBuilderRef B = k->B;
  CmpType ct = in->cmp_type;
  if (hlo_dtype_is_float(t) && ct == CMPT_TOTALORDER) {
    /* total order: compare sign-magnitude bit patterns mapped to two's complement */
    /* (fp8 as its f32 register value: the same order) */
    unsigned bits = hlo_dtype_is_fp8(t) ? 32 : (unsigned)hlo_dtype_size(t) * 8;
    LLVMTypeRef it = LLVMIntTypeInContext(k->cg->C, bits);
    LLVMValueRef ia = LLVMBuildBitCast(B, a, it, ""), ib = LLVMBuildBitCast(B, b, it, "");
    LLVMValueRef sh = LLVMConstInt(it, bits - 1, 0);
    LLVMValueRef mag = LLVMConstInt(it, ~0ull >> (65 - bits), 0);
    ia = LLVMBuildXor(B, ia, LLVMBuildAnd(B, LLVMBuildAShr(B, ia, sh, ""), mag, ""), "");
    ib = LLVMBuildXor(B, ib, LLVMBuildAnd(B, LLVMBuildAShr(B, ib, sh, ""), mag, ""), "");
    a = ia, b = ib, t = DT_S64, ct = CMPT_SIGNED;
  }
  if (hlo_dtype_is_float(t)) {
    LLVMRealPredicate p = LLVMRealOEQ;
    switch (in->cmp_dir) {
    case CMP_EQ: p = LLVMRealOEQ; break;
    case CMP_NE: p = LLVMRealUNE; break;
    case CMP_GE: p = LLVMRealOGE; break;
    case CMP_GT: p = LLVMRealOGT; break;
    case CMP_LE: p = LLVMRealOLE; break;
    case CMP_LT: p = LLVMRealOLT; break;
    }
    return LLVMBuildFCmp(B, p, a, b, "");
  }
  bool s = ct == CMPT_SIGNED || (ct != CMPT_UNSIGNED && hlo_dtype_kind(t) == DK_SINT);
  LLVMIntPredicate p = LLVMIntEQ;
  switch (in->cmp_dir) {
  case CMP_EQ: p = LLVMIntEQ; break;
  case CMP_NE: p = LLVMIntNE; break;
  case CMP_GE: p = s ? LLVMIntSGE : LLVMIntUGE; break;
  case CMP_GT: p = s ? LLVMIntSGT : LLVMIntUGT; break;
  case CMP_LE: p = s ? LLVMIntSLE : LLVMIntULE; break;
  case CMP_LT: p = s ? LLVMIntSLT : LLVMIntULT; break;
  }
  return LLVMBuildICmp(B, p, a, b, "");
}

/* Integer division and remainder with XLA's results for x/0 (-1, x) and MIN/-1 (MIN, 0). */
static LLVMValueRef el_int_div(GenKern *k, DType t, LLVMValueRef a, LLVMValueRef b, bool rem) {
  LLVMBuilderRef B = k->B;
  LLVMTypeRef ty = LLVMTypeOf(a);
  bool s = hlo_dtype_kind(t) == DK_SINT;
  unsigned bits = (unsigned)hlo_dtype_bits(t);
  /* a constant divisor other than 0 and -1 needs neither case: the plain instruction (which
     LLVM strength-reduces, and kernel sharing sees as a divisor: targets/cpu/cpu_share.c) */
  if (LLVMIsAConstantInt(b) && LLVMConstIntGetZExtValue(b) != 0 &&
      (!s || LLVMConstIntGetSExtValue(b) != -1)) {
    if (rem) return s ? LLVMBuildSRem(B, a, b, "") : LLVMBuildURem(B, a, b, "");
    return s ? LLVMBuildSDiv(B, a, b, "") : LLVMBuildUDiv(B, a, b, "");
  }
  LLVMValueRef zero = LLVMConstInt(ty, 0, 0), one = LLVMConstInt(ty, 1, 0);
  LLVMValueRef dz = LLVMBuildICmp(B, LLVMIntEQ, b, zero, "");
  LLVMValueRef bad = dz;
  LLVMValueRef ovf = NULL;
  if (s) {
    LLVMValueRef mn = LLVMConstInt(ty, 1ull << (bits - 1), 0);
    ovf = LLVMBuildAnd(B, LLVMBuildICmp(B, LLVMIntEQ, a, mn, ""),
                       LLVMBuildICmp(B, LLVMIntEQ, b, LLVMConstAllOnes(ty), ""), "");
    bad = LLVMBuildOr(B, dz, ovf, "");
  }
  LLVMValueRef sb = LLVMBuildSelect(B, bad, one, b, "");
  LLVMValueRef r;
  if (rem) {
    r = s ? LLVMBuildSRem(B, a, sb, "") : LLVMBuildURem(B, a, sb, "");
    if (ovf) r = LLVMBuildSelect(B, ovf, zero, r, "");
    return LLVMBuildSelect(B, dz, a, r, "");
  }
  r = s ? LLVMBuildSDiv(B, a, sb, "") : LLVMBuildUDiv(B, a, sb, "");
  if (ovf) r = LLVMBuildSelect(B, ovf, a, r, "");
  return LLVMBuildSelect(B, dz, LLVMConstAllOnes(ty), r, "");
}

static LLVMValueRef el_shift(GenKern *k, HOp op, DType t, LLVMValueRef a, LLVMValueRef b) {
  LLVMBuilderRef B = k->B;
  LLVMTypeRef ty = LLVMTypeOf(a);
  unsigned bits = (unsigned)hlo_dtype_bits(t);
  LLVMValueRef big = LLVMBuildICmp(B, LLVMIntUGE, b, LLVMConstInt(ty, bits, 0), "");
  LLVMValueRef sb = LLVMBuildSelect(B, big, LLVMConstInt(ty, 0, 0), b, "");
  if (op == OP_SHL)
    return LLVMBuildSelect(B, big, LLVMConstInt(ty, 0, 0), LLVMBuildShl(B, a, sb, ""), "");
  if (op == OP_SHR_LOGICAL)
    return LLVMBuildSelect(B, big, LLVMConstInt(ty, 0, 0), LLVMBuildLShr(B, a, sb, ""), "");
  return LLVMBuildAShr(B, a, LLVMBuildSelect(B, big, LLVMConstInt(ty, bits - 1, 0), b, ""), "");
}

/* Whether reduce-precision applies to type t with in's format: a float type (the verifier
 * already asks for exponent_bits >= 1 and mantissa_bits >= 0). */
static bool el_rp_format_ok(const HInstr *in, DType t) {
  int nb, e, m;
  return hlo_float_format(t, &nb, &e, &m) && in->exponent_bits >= 1 && in->mantissa_bits >= 0;
}

/* reduce-precision: XLA's rounding of x to a format of e exponent and m mantissa bits, as
 * integer IR on the bits of the value in its own format (f16 and bf16 as i16, f32 as i32,
 * f64 as i64), branch-free so that loops of it vectorize:
 *   - mantissa (m narrower than the type's): round to nearest even by adding half an ulp of
 *     the reduced format less one plus the lowest kept bit, then clearing the dropped bits (a
 *     carry moves into the exponent: the next binade, or infinity);
 *   - exponent (e narrower): exponents above the reduced format's largest become a signed
 *     infinity, those at or below its smallest normal's a signed zero (no denormals);
 *   - a NaN is kept as it is.
 * The same steps as the interpreter's reduce_precision_bits (hlo/interp.c), checked against XLA's
 * own results in tests/xla_cases/rp_*. */
static LLVMValueRef el_reduce_precision(GenKern *k, const HInstr *in, DType t, LLVMValueRef x) {
  int nbits, src_exp, src_man;
  if (!el_rp_format_ok(in, t) || !hlo_float_format(t, &nbits, &src_exp, &src_man))
    return el_fail(k, in, "reduce-precision format is not supported");
  LLVMBuilderRef B = k->B;
  int e = in->exponent_bits, m = in->mantissa_bits;
  if (e >= src_exp && m >= src_man) return x; /* the identity */
  LLVMTypeRef it = LLVMIntTypeInContext(k->cg->C, (unsigned)nbits);
  LLVMValueRef orig = LLVMBuildBitCast(B, x, it, ""), bits = orig;
  uint64_t sign = UINT64_C(1) << (nbits - 1);
  uint64_t expmask = ((UINT64_C(1) << src_exp) - 1) << src_man,
           manmask = (UINT64_C(1) << src_man) - 1;
  if (m < src_man) {
    /* round the mantissa to m bits, to nearest even */
    int sh = src_man - m;
    uint64_t last = UINT64_C(1) << sh;
    LLVMValueRef lastbit =
        LLVMBuildAnd(B, LLVMBuildLShr(B, bits, LLVMConstInt(it, (unsigned)sh, 0), ""),
                     LLVMConstInt(it, 1, 0), "");
    bits = LLVMBuildAdd(B, bits, LLVMBuildAdd(B, lastbit, LLVMConstInt(it, (last >> 1) - 1, 0), ""),
                        "");
    bits = LLVMBuildAnd(B, bits, LLVMConstInt(it, ~(last - 1), 0), "");
  }
  if (e < src_exp) {
    /* clamp the exponent to the reduced range: overflow to infinity, underflow to zero */
    uint64_t bias = (UINT64_C(1) << (src_exp - 1)) - 1, rbias = (UINT64_C(1) << (e - 1)) - 1;
    LLVMValueRef xe = LLVMBuildAnd(B, bits, LLVMConstInt(it, expmask, 0), "");
    LLVMValueRef over =
        LLVMBuildICmp(B, LLVMIntUGT, xe, LLVMConstInt(it, (bias + rbias) << src_man, 0), "");
    LLVMValueRef under =
        LLVMBuildICmp(B, LLVMIntULE, xe, LLVMConstInt(it, (bias - rbias) << src_man, 0), "");
    LLVMValueRef szero = LLVMBuildAnd(B, bits, LLVMConstInt(it, sign, 0), "");
    LLVMValueRef sinf = LLVMBuildOr(B, szero, LLVMConstInt(it, expmask, 0), "");
    bits = LLVMBuildSelect(B, over, sinf, LLVMBuildSelect(B, under, szero, bits, ""), "");
  }
  /* a NaN (all-ones exponent, nonzero mantissa) is kept */
  LLVMValueRef em = LLVMConstInt(it, expmask, 0);
  LLVMValueRef isnan = LLVMBuildAnd(
      B, LLVMBuildICmp(B, LLVMIntEQ, LLVMBuildAnd(B, orig, em, ""), em, ""),
      LLVMBuildICmp(B, LLVMIntNE, LLVMBuildAnd(B, orig, LLVMConstInt(it, manmask, 0), ""),
                    LLVMConstInt(it, 0, 0), ""),
      "");
  bits = LLVMBuildSelect(B, isnan, orig, bits, "");
  return LLVMBuildBitCast(B, bits, LLVMTypeOf(x), "");
}

/* One elementwise op on operand values v[] (register types). */
static LLVMValueRef el_scalar(GenKern *k, const HInstr *in, LLVMValueRef *v) {
  LLVMBuilderRef B = k->B;
  DType t = in->nops ? in->ops[in->op == OP_SELECT || in->op == OP_CLAMP ? 1 : 0]->shape.dt
                     : in->shape.dt;
  bool fl = hlo_dtype_is_float(t);
  bool sg = hlo_dtype_kind(t) == DK_SINT;
  LLVMTypeRef ty = gen_reg_type(k->cg, t);
  switch (in->op) {
  case OP_ADD:
    return fl             ? LLVMBuildFAdd(B, v[0], v[1], "")
           : t == DT_PRED ? LLVMBuildOr(B, v[0], v[1], "")
                          : LLVMBuildAdd(B, v[0], v[1], "");
  case OP_SUBTRACT: return fl ? LLVMBuildFSub(B, v[0], v[1], "") : LLVMBuildSub(B, v[0], v[1], "");
  case OP_MULTIPLY: return el_mul(k, t, v[0], v[1]);
  case OP_DIVIDE:
    return fl ? LLVMBuildFDiv(B, v[0], v[1], "") : el_int_div(k, t, v[0], v[1], false);
  case OP_REMAINDER:
    return fl ? LLVMBuildFRem(B, v[0], v[1], "") : el_int_div(k, t, v[0], v[1], true);
  case OP_MAXIMUM:
    if (t == DT_PRED) return LLVMBuildOr(B, v[0], v[1], "");
    return fl ? el_fminmax(k, v[0], v[1], true) : el_int_minmax(k, t, v[0], v[1], true);
  case OP_MINIMUM:
    if (t == DT_PRED) return LLVMBuildAnd(B, v[0], v[1], "");
    return fl ? el_fminmax(k, v[0], v[1], false) : el_int_minmax(k, t, v[0], v[1], false);
  case OP_POWER:
    if (fl) return el_intr2(k, "llvm.pow", v[0], v[1]);
    return el_fail(k, in, "integer power is not supported");
  case OP_ATAN2: return el_libm(k, "atan2", t, v, 2);
  case OP_AND: return LLVMBuildAnd(B, v[0], v[1], "");
  case OP_OR: return LLVMBuildOr(B, v[0], v[1], "");
  case OP_XOR: return LLVMBuildXor(B, v[0], v[1], "");
  case OP_NOT: return LLVMBuildNot(B, v[0], "");
  case OP_SHL:
  case OP_SHR_ARITH:
  case OP_SHR_LOGICAL: return el_shift(k, in->op, t, v[0], v[1]);
  case OP_COMPARE: return el_compare(k, in, v[0], v[1]);
  case OP_SELECT: return LLVMBuildSelect(B, v[0], v[1], v[2], "");
  case OP_CLAMP:
    if (fl)
      return el_fminmax(k, v[2], el_fminmax(k, v[0], v[1], true), false); /* min(hi, max(lo, x)) */
    return el_int_minmax(k, t, el_int_minmax(k, t, v[1], v[0], true), v[2], false);
  case OP_NEGATE: return fl ? LLVMBuildFNeg(B, v[0], "") : LLVMBuildNeg(B, v[0], "");
  case OP_ABS:
    if (fl) return el_intr1(k, "llvm.fabs", v[0]);
    if (!sg) return v[0];
    return LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSLT, v[0], LLVMConstInt(ty, 0, 0), ""),
                           LLVMBuildNeg(B, v[0], ""), v[0], "");
  case OP_SIGN:
    if (fl) {
      LLVMValueRef one = LLVMConstReal(ty, 1.0), mone = LLVMConstReal(ty, -1.0);
      LLVMValueRef r = LLVMBuildSelect(
          B, LLVMBuildFCmp(B, LLVMRealOGT, v[0], LLVMConstReal(ty, 0), ""), one, v[0], "");
      return LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealOLT, v[0], LLVMConstReal(ty, 0), ""), mone,
                             r, "");
    } else {
      LLVMValueRef z = LLVMConstInt(ty, 0, 0);
      LLVMValueRef r = LLVMBuildZExt(B, LLVMBuildICmp(B, LLVMIntNE, v[0], z, ""), ty, "");
      if (sg)
        r = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSLT, v[0], z, ""), LLVMConstAllOnes(ty), r,
                            "");
      return r;
    }
  case OP_CEIL: return fl ? el_intr1(k, "llvm.ceil", v[0]) : v[0];
  case OP_FLOOR: return fl ? el_intr1(k, "llvm.floor", v[0]) : v[0];
  case OP_ROUND_AFZ: return fl ? el_intr1(k, "llvm.round", v[0]) : v[0];
  case OP_ROUND_EVEN: return fl ? el_intr1(k, "llvm.roundeven", v[0]) : v[0];
  case OP_CLZ: {
    LLVMValueRef a[2] = {v[0], LLVMConstInt(k->cg->i1, 0, 0)};
    return el_intr(k, "llvm.ctlz", ty, a, 2);
  }
  case OP_POPCNT: return el_intr1(k, "llvm.ctpop", v[0]);
  case OP_IS_FINITE:
    return LLVMBuildFCmp(B, LLVMRealOLT, el_intr1(k, "llvm.fabs", v[0]),
                         LLVMConstReal(ty, INFINITY), "");
  case OP_SQRT: return el_intr1(k, "llvm.sqrt", v[0]);
  case OP_RSQRT:
    return LLVMBuildFDiv(B, LLVMConstReal(ty, 1.0), el_intr1(k, "llvm.sqrt", v[0]), "");
  case OP_CBRT: return el_libm(k, "cbrt", t, v, 1);
  case OP_EXP:
    if (t == DT_F64) return el_intr1(k, "llvm.exp", v[0]);
    return gen_convert(k, gen_exp_f32(k, gen_convert(k, v[0], t, DT_F32)), DT_F32, t);
  case OP_LOG: return el_intr1(k, "llvm.log", v[0]);
  case OP_SINE: return el_intr1(k, "llvm.sin", v[0]);
  case OP_COSINE: return el_intr1(k, "llvm.cos", v[0]);
  case OP_TAN: return el_libm(k, "tan", t, v, 1);
  case OP_EXPM1: {
    /* u = exp(x); x when u == 1; (u - 1) * x / log(u) otherwise (accurate near 0) */
    LLVMValueRef u = el_intr1(k, "llvm.exp", v[0]);
    LLVMValueRef one = LLVMConstReal(ty, 1.0);
    LLVMValueRef um1 = LLVMBuildFSub(B, u, one, "");
    LLVMValueRef r =
        LLVMBuildFDiv(B, LLVMBuildFMul(B, um1, v[0], ""), el_intr1(k, "llvm.log", u), "");
    r = LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealOEQ, u, one, ""), v[0], r, "");
    /* large |x|: plain u - 1 (also handles inf) */
    LLVMValueRef big =
        LLVMBuildFCmp(B, LLVMRealOGT, el_intr1(k, "llvm.fabs", v[0]), LLVMConstReal(ty, 0.5), "");
    return LLVMBuildSelect(B, big, um1, r, "");
  }
  case OP_LOG1P: {
    /* u = 1 + x; x when u == 1; log(u) * x / (u - 1) otherwise */
    LLVMValueRef one = LLVMConstReal(ty, 1.0);
    LLVMValueRef u = LLVMBuildFAdd(B, v[0], one, "");
    LLVMValueRef lu = el_intr1(k, "llvm.log", u);
    LLVMValueRef r =
        LLVMBuildFDiv(B, LLVMBuildFMul(B, lu, v[0], ""), LLVMBuildFSub(B, u, one, ""), "");
    r = LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealOEQ, u, one, ""), v[0], r, "");
    LLVMValueRef big =
        LLVMBuildFCmp(B, LLVMRealOGT, el_intr1(k, "llvm.fabs", v[0]), LLVMConstReal(ty, 0.5), "");
    return LLVMBuildSelect(B, big, lu, r, "");
  }
  case OP_LOGISTIC: { /* 1 / (1 + e^-x), e^-x as OP_EXP computes it (vectorizable below f64) */
    DType ct = t == DT_F64 ? DT_F64 : DT_F32;
    LLVMValueRef x = LLVMBuildFNeg(B, gen_convert(k, v[0], t, ct), "");
    LLVMValueRef e = ct == DT_F64 ? el_intr1(k, "llvm.exp", x) : gen_exp_f32(k, x);
    LLVMValueRef one = LLVMConstReal(LLVMTypeOf(x), 1.0);
    return gen_convert(k, LLVMBuildFDiv(B, one, LLVMBuildFAdd(B, one, e, ""), ""), ct, t);
  }
  case OP_TANH:
    if (t == DT_F64) return el_libm(k, "tanh", t, v, 1);
    return gen_convert(k, el_tanh_f32(k, gen_convert(k, v[0], t, DT_F32)), DT_F32, t);
  case OP_ERF: return el_libm(k, "erf", t, v, 1);
  case OP_ACOS: return el_libm(k, "acos", t, v, 1);
  case OP_ACOSH: return el_libm(k, "acosh", t, v, 1);
  case OP_ASIN: return el_libm(k, "asin", t, v, 1);
  case OP_ASINH: return el_libm(k, "asinh", t, v, 1);
  case OP_ATAN: return el_libm(k, "atan", t, v, 1);
  case OP_ATANH: return el_libm(k, "atanh", t, v, 1);
  case OP_COSH: return el_libm(k, "cosh", t, v, 1);
  case OP_SINH: return el_libm(k, "sinh", t, v, 1);
  case OP_CONVERT: return gen_convert(k, v[0], t, in->shape.dt);
  case OP_REDUCE_PRECISION: return el_reduce_precision(k, in, t, v[0]);
  case OP_COPY: return v[0];
  case OP_PARAMETER:
  case OP_CONSTANT:
  case OP_IOTA:
  case OP_PARTITION_ID:
  case OP_REPLICA_ID:
  case OP_RNG_GET_AND_UPDATE_STATE:
  case OP_IMAG:
  case OP_REAL:
  case OP_BITCAST_CONVERT:
  case OP_MULHI:
  case OP_COMPLEX:
  case OP_STOCHASTIC_CONVERT:
  case OP_MAP:
  case OP_REDUCE:
  case OP_REDUCE_WINDOW:
  case OP_SELECT_AND_SCATTER:
  case OP_SORT:
  case OP_TOPK:
  case OP_BATCH_NORM_TRAINING:
  case OP_BATCH_NORM_INFERENCE:
  case OP_BATCH_NORM_GRAD:
  case OP_SCAN:
  case OP_DOT:
  case OP_CONVOLUTION:
  case OP_FFT:
  case OP_CHOLESKY:
  case OP_TRIANGULAR_SOLVE:
  case OP_RAGGED_DOT:
  case OP_SCALED_DOT:
  case OP_BITCAST:
  case OP_BROADCAST:
  case OP_RESHAPE:
  case OP_TRANSPOSE:
  case OP_REVERSE:
  case OP_SLICE:
  case OP_CONCATENATE:
  case OP_PAD:
  case OP_DYNAMIC_SLICE:
  case OP_DYNAMIC_UPDATE_SLICE:
  case OP_GATHER:
  case OP_SCATTER:
  case OP_TUPLE:
  case OP_GET_TUPLE_ELEMENT:
  case OP_COPY_START:
  case OP_COPY_DONE:
  case OP_SHUFFLE:
  case OP_GET_DIMENSION_SIZE:
  case OP_SET_DIMENSION_SIZE:
  case OP_DYNAMIC_RESHAPE:
  case OP_CALL:
  case OP_CONDITIONAL:
  case OP_WHILE:
  case OP_FUSION:
  case OP_ASYNC_START:
  case OP_ASYNC_UPDATE:
  case OP_ASYNC_DONE:
  case OP_OPT_BARRIER:
  case OP_ADD_DEPENDENCY:
  case OP_AFTER_ALL:
  case OP_DOMAIN:
  case OP_ALL_REDUCE:
  case OP_ALL_REDUCE_START:
  case OP_ALL_REDUCE_DONE:
  case OP_ALL_GATHER:
  case OP_ALL_GATHER_START:
  case OP_ALL_GATHER_DONE:
  case OP_ALL_TO_ALL:
  case OP_REDUCE_SCATTER:
  case OP_COLLECTIVE_PERMUTE:
  case OP_COLLECTIVE_PERMUTE_START:
  case OP_COLLECTIVE_PERMUTE_DONE:
  case OP_COLLECTIVE_BROADCAST:
  case OP_RAGGED_ALL_TO_ALL:
  case OP_COLLECTIVE_REDUCE:
  case OP_SEND:
  case OP_SEND_DONE:
  case OP_RECV:
  case OP_RECV_DONE:
  case OP_INFEED:
  case OP_OUTFEED:
  case OP_RNG:
  case OP_RNG_BIT_GENERATOR:
  case OP_CUSTOM_CALL:
  case OP_COUNT: return el_fail(k, in, "unsupported elementwise op");
  }
  return NULL;
}

/* ------------------------------------------------------------------ the generator */

static GenBind *el_find_bind(GenKern *k, const HComp *c) {
  for (int i = k->nbind - 1; i >= 0; i--)
    if (k->bind[i].comp == c) return &k->bind[i];
  return NULL;
}

static bool el_push(GenKern *k, const HInstr *in, const HComp *c, const HInstr *caller,
                    LLVMValueRef *vals, int nvals) {
  if (k->nbind == GEN_MAX_BIND) {
    el_fail(k, in, "computations nested too deeply");
    return false;
  }
  k->bind[k->nbind++] = (GenBind){c, caller, vals, nvals, k->ncache};
  return true;
}

static bool el_cacheable(GenKern *k, const HInstr *in) {
  if (in->parent == k->cg->entry) return true;
  return k->nbind > 0 && k->bind[0].caller == k->root && in->parent == k->bind[0].comp;
}

static LLVMValueRef el_reduce(GenKern *k, const HInstr *in, LLVMValueRef *idx, LLVMValueRef *out);
static void el_reassoc(LLVMValueRef v);
static LLVMValueRef el_reduce_window(GenKern *k, const HInstr *in, LLVMValueRef *idx);
static LLVMValueRef el_gather(GenKern *k, const HInstr *in, LLVMValueRef *idx);

/* Operand index of a reshape: degenerate-dimension changes map directly, the rest goes
 * through the linear index. */
static void el_reshape_idx(GenKern *k, const Shape *out, const Shape *op, LLVMValueRef *idx,
                           LLVMValueRef *oi) {
  int a = 0, b = 0;
  bool direct = true;
  int map[HLO_MAX_RANK];
  while (a < out->rank || b < op->rank) {
    if (a < out->rank && out->dims[a] == 1) {
      a++;
      continue;
    }
    if (b < op->rank && op->dims[b] == 1) {
      map[b++] = -1;
      continue;
    }
    if (a < out->rank && b < op->rank && out->dims[a] == op->dims[b]) {
      map[b++] = a++;
      continue;
    }
    direct = false;
    break;
  }
  if (direct) {
    for (int d = 0; d < op->rank; d++)
      oi[d] = map[d] < 0 ? gen_i64(k, 0) : idx[map[d]];
    return;
  }
  LLVMValueRef lin = gen_i64(k, 0);
  for (int d = 0; d < out->rank; d++)
    lin = ix_add(k, ix_mul(k, lin, out->dims[d]), idx[d]);
  for (int d = op->rank - 1; d >= 0; d--) {
    LLVMValueRef dim = gen_i64(k, op->dims[d]);
    if (d == 0) {
      oi[d] = lin;
      break;
    }
    oi[d] = LLVMBuildURem(k->B, lin, dim, "");
    lin = LLVMBuildUDiv(k->B, lin, dim, "");
  }
}

/* An elementwise op: operands at the same index (scalar operands broadcast), then math. */
static LLVMValueRef el_elementwise(GenKern *k, const HInstr *in, LLVMValueRef *idx) {
  LLVMValueRef v[4], empty[1];
  if (in->nops > 4) return el_fail(k, in, "too many operands");
  for (int j = 0; j < in->nops; j++) {
    const HInstr *o = in->ops[j];
    v[j] = gen_value(k, o, o->shape.rank == 0 && in->shape.rank > 0 ? empty : idx);
    if (!v[j]) return NULL;
  }
  if (gen_complex_op(in)) return gen_complex_elementwise(k, in, v);
  LLVMValueRef r = el_scalar(k, in, v);
  /* an fp8 result computed in f32 is rounded to fp8 (convert rounds itself; the other ops
     named give one of their operands' values, its negation or +-1, already fp8) */
  HOp op = in->op;
  bool exact = op == OP_CONVERT || op == OP_SELECT || op == OP_CLAMP || op == OP_MAXIMUM ||
               op == OP_MINIMUM || op == OP_NEGATE || op == OP_ABS || op == OP_COPY ||
               op == OP_SIGN;
  return r && !exact && hlo_dtype_is_fp8(in->shape.dt) ? el_fp8_round(k, in->shape.dt, r) : r;
}

/* The wide integer of the same bits as x of type t (fp8 through its byte). */
static LLVMValueRef el_bits_of(GenKern *k, DType t, LLVMValueRef x) {
  if (hlo_dtype_is_fp8(t)) return gen_fp8_encode(k, t, x);
  LLVMTypeRef it = LLVMIntTypeInContext(k->cg->C, (unsigned)hlo_dtype_bits(t));
  return hlo_dtype_is_float(t) ? LLVMBuildBitCast(k->B, x, it, "") : x;
}

/* bitcast-convert between s4/u4 and a type of 8 bits or more, on XLA's packing: element j of
 * the 4-bit side's minor dimension is bits 4j..4j+3 of the wide value (hlo/interp.c's
 * bitcast_int4). To the wide type the nibbles are joined, from it one is shifted out. */
static LLVMValueRef el_bitcast_int4(GenKern *k, const HInstr *in, LLVMValueRef *idx) {
  LLVMBuilderRef B = k->B;
  const HInstr *x = in->ops[0];
  DType ft = x->shape.dt, tt = in->shape.dt;
  if (ft == DT_PRED || tt == DT_PRED)
    return el_fail(k, in, "bitcast-convert between pred and a 4-bit type is not supported");
  LLVMValueRef oi[HLO_MAX_RANK], v;
  if (hlo_dtype_is_int4(ft)) { /* nibbles of x's minor dimension, low first */
    int n = hlo_dtype_bits(tt) / 4, rank = in->shape.rank;
    LLVMTypeRef wt = LLVMIntTypeInContext(k->cg->C, (unsigned)hlo_dtype_bits(tt));
    memcpy(oi, idx, sizeof *oi * (size_t)rank);
    v = LLVMConstInt(wt, 0, 0);
    for (int j = 0; j < n; j++) {
      oi[rank] = gen_i64(k, j);
      LLVMValueRef e = gen_value(k, x, oi);
      if (!e) return NULL;
      e = LLVMBuildShl(B, LLVMBuildZExt(B, e, wt, ""), LLVMConstInt(wt, 4 * (unsigned)j, 0), "");
      v = LLVMBuildOr(B, v, e, "");
    }
    if (hlo_dtype_is_fp8(tt)) return gen_fp8_decode(k, tt, v);
    return LLVMBuildBitCast(B, v, gen_reg_type(k->cg, tt), "");
  }
  int rank = x->shape.rank; /* the nibble idx[rank] of x's value at idx[0..rank) */
  if (hlo_dtype_bits(ft) > 64) return el_fail(k, in, "bitcast-convert wider than 64 bits");
  v = gen_value(k, x, idx);
  if (!v) return NULL;
  v = el_bits_of(k, ft, v);
  LLVMTypeRef wt = LLVMTypeOf(v);
  LLVMValueRef sh = LLVMBuildMul(B, idx[rank], gen_i64(k, 4), "");
  sh = LLVMBuildTruncOrBitCast(B, sh, wt, ""); /* in range: idx[rank] < bits / 4 */
  return LLVMBuildTrunc(B, LLVMBuildLShr(B, v, sh, ""), gen_reg_type(k->cg, tt), "");
}

LLVMValueRef gen_value(GenKern *k, const HInstr *in, LLVMValueRef *idx) {
  if (k->failed) return NULL;
  GenCg *cg = k->cg;
  LLVMBuilderRef B = k->B;
  int rank = in->shape.rank;
  bool boundary = in->parent == cg->entry && in != k->root;
  if (boundary && in->shape.dt == DT_TUPLE) return el_fail(k, in, "tuple value used as an array");
  for (int i = 0; i < k->nmat; i++)
    if (k->mat[i].in == in) return el_materialized(k, &k->mat[i], idx);
  if (in->op == OP_PARAMETER && !boundary) {
    GenBind *b = el_find_bind(k, in->parent);
    if (!b) return el_fail(k, in, "parameter of an unbound computation");
    if (b->caller) {
      if (in->param_num >= b->caller->nops) return el_fail(k, in, "parameter number out of range");
      return gen_value(k, b->caller->ops[in->param_num], idx);
    }
    if (in->param_num >= b->nvals) return el_fail(k, in, "parameter number out of range");
    return b->vals[in->param_num];
  }
  bool cacheable = el_cacheable(k, in);
  if (cacheable)
    for (int i = k->ncache - 1; i >= 0; i--) {
      GenCacheEnt *e = &k->cache[i];
      if (e->in != in) continue;
      bool same = true;
      for (int d = 0; d < rank && same; d++)
        same = e->idx[d] == idx[d];
      if (same) return e->v;
    }

  LLVMValueRef oi[HLO_MAX_RANK]; /* operand index */
  LLVMValueRef r = NULL;
  /* values of the entry computation are loads; cached like any value (they are immutable
     for the rest of the kernel: buffers are only overwritten by the value owning them) */
  if (boundary)
    r = gen_load_elem(k, cg->buffer_fn(k, in), &in->shape, idx);
  else
    switch (in->op) {
    case OP_CONSTANT:
      if (!in->literal) return el_fail(k, in, "constant without a literal");
      if (rank == 0) {
        DType t = in->shape.dt;
        LLVMTypeRef ty = gen_reg_type(cg, t);
        if (hlo_dtype_is_fp8(t))
          r = gen_fp8_decode(k, t, LLVMConstInt(cg->i8, *(const uint8_t *)in->literal->data, 0));
        else if (hlo_dtype_is_complex(t)) {
          double _Complex z = hlo_load_c128(t, in->literal->data, 0);
          r = gen_complex_const(k, t, creal(z), cimag(z));
        } else if (hlo_dtype_is_float(t))
          r = LLVMConstReal(ty, hlo_literal_get_f64(in->literal, 0));
        else
          r = LLVMConstInt(ty, (unsigned long long)hlo_literal_get_i64(in->literal, 0), 0);
      } else {
        r = gen_load_elem(
            k, cg->const_ptr_fn ? cg->const_ptr_fn(k, in) : gen_const_global(cg, (HInstr *)in),
            &in->shape, idx);
      }
      break;
    case OP_IOTA: r = gen_convert(k, idx[in->iota_dim], DT_S64, in->shape.dt); break;
    case OP_BROADCAST:
      for (int j = 0; j < in->dims.n; j++)
        oi[j] = idx[in->dims.v[j]];
      r = gen_value(k, in->ops[0], oi);
      break;
    case OP_RESHAPE:
    case OP_BITCAST:
      el_reshape_idx(k, &in->shape, &in->ops[0]->shape, idx, oi);
      r = gen_value(k, in->ops[0], oi);
      break;
    case OP_TRANSPOSE:
      for (int j = 0; j < rank; j++)
        oi[in->dims.v[j]] = idx[j];
      r = gen_value(k, in->ops[0], oi);
      break;
    case OP_SLICE:
      for (int d = 0; d < rank; d++)
        oi[d] = ix_add(k, gen_i64(k, in->slice->start[d]), ix_mul(k, idx[d], in->slice->stride[d]));
      r = gen_value(k, in->ops[0], oi);
      break;
    case OP_REVERSE:
      for (int d = 0; d < rank; d++)
        oi[d] = idx[d];
      for (int j = 0; j < in->dims.n; j++) {
        int64_t d = in->dims.v[j];
        oi[d] = ix_sub(k, gen_i64(k, in->shape.dims[d] - 1), idx[d]);
      }
      r = gen_value(k, in->ops[0], oi);
      break;
    case OP_PAD: {
      const Shape *os = &in->ops[0]->shape;
      LLVMValueRef ok = NULL;
      for (int d = 0; d < rank; d++) {
        LLVMValueRef t = ix_sub(k, idx[d], gen_i64(k, in->pad->lo[d]));
        int64_t st = in->pad->interior[d] + 1;
        if (st > 1) {
          ok = and1(k, ok, LLVMBuildICmp(B, LLVMIntSGE, t, gen_i64(k, 0), ""));
          LLVMValueRef tt = ix_clamp(k, t, 0, INT64_MAX / 4);
          ok = and1(k, ok,
                    LLVMBuildICmp(B, LLVMIntEQ, LLVMBuildURem(B, tt, gen_i64(k, st), ""),
                                  gen_i64(k, 0), ""));
          t = LLVMBuildUDiv(B, tt, gen_i64(k, st), "");
          ok = and1(k, ok, LLVMBuildICmp(B, LLVMIntSLT, t, gen_i64(k, os->dims[d]), ""));
          oi[d] = ix_clamp(k, t, 0, os->dims[d] - 1);
        } else {
          oi[d] = ix_bound(k, t, os->dims[d], -in->pad->lo[d],
                           in->shape.dims[d] - 1 - in->pad->lo[d], &ok);
        }
      }
      LLVMValueRef pv = gen_value(k, in->ops[1], NULL);
      if (hlo_shape_elems(os) == 0) {
        r = pv;
        break;
      }
      LLVMValueRef v = gen_value(k, in->ops[0], oi);
      if (!v || !pv) return NULL;
      r = ok ? gen_select(k, ok, v, pv) : v;
      break;
    }
    case OP_CONCATENATE: {
      int64_t cd = in->dims.v[0], off = 0;
      for (int j = 0; j < in->nops; j++) {
        const Shape *os = &in->ops[j]->shape;
        int64_t n = os->dims[cd];
        if (n == 0) continue;
        for (int d = 0; d < rank; d++)
          oi[d] = idx[d];
        oi[cd] = ix_clamp(k, ix_sub(k, idx[cd], gen_i64(k, off)), 0, n - 1);
        LLVMValueRef v = gen_value(k, in->ops[j], oi);
        if (!v) return NULL;
        if (!r)
          r = v;
        else
          r = gen_select(k, LLVMBuildICmp(B, LLVMIntSGE, idx[cd], gen_i64(k, off), ""), v, r);
        off += n;
      }
      if (!r) return el_fail(k, in, "concatenate of empty operands");
      break;
    }
    case OP_DYNAMIC_SLICE:
      if (!el_window_index(k, in->ops + 1, &in->ops[0]->shape, &in->shape, idx, oi)) return NULL;
      r = gen_value(k, in->ops[0], oi);
      break;
    case OP_DYNAMIC_UPDATE_SLICE: {
      const Shape *os = &in->shape, *us = &in->ops[1]->shape;
      LLVMValueRef ok = NULL;
      LLVMValueRef ui[HLO_MAX_RANK];
      for (int d = 0; d < rank; d++) {
        LLVMValueRef s = el_start(k, in->ops[2 + d], os->dims[d] - us->dims[d]);
        if (!s) return NULL;
        LLVMValueRef t = ix_sub(k, idx[d], s);
        ok = and1(k, ok, ix_in(k, t, 0, us->dims[d]));
        ui[d] = ix_clamp(k, t, 0, us->dims[d] - 1);
      }
      LLVMValueRef base = gen_value(k, in->ops[0], idx);
      if (hlo_shape_elems(us) == 0) {
        r = base;
        break;
      }
      LLVMValueRef upd = gen_value(k, in->ops[1], ui);
      if (!base || !upd) return NULL;
      r = ok ? gen_select(k, ok, upd, base) : upd;
      break;
    }
    case OP_GATHER: r = el_gather(k, in, idx); break;
    case OP_REDUCE:
      if (in->shape.dt == DT_TUPLE) return el_fail(k, in, "variadic reduce used as an array");
      r = el_reduce(k, in, idx, NULL);
      break;
    case OP_REDUCE_WINDOW: r = el_reduce_window(k, in, idx); break;
    case OP_GET_TUPLE_ELEMENT: {
      const HInstr *o = in->ops[0];
      if (o->op == OP_TUPLE) {
        r = gen_value(k, o->ops[in->tuple_index], idx);
      } else if (o->op == OP_REDUCE && !(o->parent == cg->entry && o != k->root)) {
        LLVMValueRef outs[HLO_MAX_RANK * 2];
        if (o->nops / 2 > HLO_MAX_RANK * 2) return el_fail(k, in, "too many reduce operands");
        if (!gen_value_multi(k, o, idx, outs)) return NULL;
        r = outs[in->tuple_index];
      } else {
        return el_fail(k, in, "get-tuple-element of this producer is not supported in a fusion");
      }
      break;
    }
    case OP_DOT:
    case OP_CONVOLUTION: {
      int64_t ext[HLO_MAX_RANK * 2];
      int nr = in->op == OP_DOT ? gen_dot_red_dims(in, ext) : gen_conv_red_dims(in, ext);
      DType t = gen_dot_acc_type(in);
      LLVMValueRef acc = gen_alloca(k, gen_reg_type(cg, t));
      LLVMBuildStore(B, gen_zero(k, t), acc);
      GenLoop loops[HLO_MAX_RANK * 2];
      LLVMValueRef red[HLO_MAX_RANK * 2];
      for (int j = 0; j < nr; j++)
        red[j] = gen_loop_open(k, &loops[j], gen_i64(k, 0), gen_i64(k, ext[j]));
      LLVMValueRef term =
          in->op == OP_DOT ? gen_dot_term(k, in, idx, red) : gen_conv_term(k, in, idx, red);
      if (!term) return NULL;
      LLVMValueRef cur = LLVMBuildLoad2(B, gen_reg_type(cg, t), acc, "");
      LLVMValueRef sum = gen_add(k, t, cur, term);
      el_reassoc(sum);
      LLVMBuildStore(B, sum, acc);
      for (int j = nr - 1; j >= 0; j--)
        gen_loop_close(k, &loops[j]);
      r = LLVMBuildLoad2(B, gen_reg_type(cg, t), acc, "");
      if (t != in->shape.dt) /* a 16-bit or fp8 product's f32 sum, rounded once */
        r = in->shape.dt == DT_BF16 ? el_f32_to_bf16(k, r) : gen_convert(k, r, t, in->shape.dt);
      break;
    }
    case OP_FUSION:
    case OP_CALL:
      if (in->ncalls < 1) return el_fail(k, in, "no called computation");
      if (!el_push(k, in, in->calls[0], in, NULL, 0)) return NULL;
      r = gen_value(k, in->calls[0]->root, idx);
      k->nbind--;
      break;
    case OP_MAP: {
      LLVMValueRef vals[16];
      if (in->nops > 16) return el_fail(k, in, "map with too many operands");
      for (int j = 0; j < in->nops; j++)
        if (!(vals[j] = gen_value(k, in->ops[j], idx))) return NULL;
      LLVMValueRef out[1];
      if (!gen_scalar_comp(k, in->calls[0], vals, in->nops, out)) return NULL;
      r = out[0];
      break;
    }
    case OP_BITCAST_CONVERT: {
      DType ft = in->ops[0]->shape.dt, tt = in->shape.dt;
      if ((hlo_dtype_is_int4(ft) || hlo_dtype_is_int4(tt)) &&
          hlo_dtype_bits(ft) != hlo_dtype_bits(tt)) {
        r = el_bitcast_int4(k, in, idx);
        break;
      }
      if (hlo_dtype_size(ft) != hlo_dtype_size(tt) || ft == DT_PRED || tt == DT_PRED)
        return el_fail(k, in, "bitcast-convert between different element sizes is not supported");
      LLVMValueRef v = gen_value(k, in->ops[0], idx);
      if (!v) return NULL;
      /* fp8 registers are f32: go through the bits */
      if (hlo_dtype_is_fp8(ft)) v = gen_fp8_encode(k, ft, v);
      r = hlo_dtype_is_fp8(tt) ? gen_fp8_decode(k, tt, v)
                               : LLVMBuildBitCast(B, v, gen_reg_type(cg, tt), "");
      break;
    }
    case OP_ABS:
    case OP_CBRT:
    case OP_CEIL:
    case OP_COSINE:
    case OP_CLZ:
    case OP_ERF:
    case OP_EXP:
    case OP_EXPM1:
    case OP_FLOOR:
    case OP_IMAG:
    case OP_IS_FINITE:
    case OP_LOG:
    case OP_LOG1P:
    case OP_LOGISTIC:
    case OP_NEGATE:
    case OP_NOT:
    case OP_POPCNT:
    case OP_REAL:
    case OP_ROUND_AFZ:
    case OP_ROUND_EVEN:
    case OP_RSQRT:
    case OP_SIGN:
    case OP_SINE:
    case OP_SQRT:
    case OP_TAN:
    case OP_TANH:
    case OP_ACOS:
    case OP_ACOSH:
    case OP_ASIN:
    case OP_ASINH:
    case OP_ATAN:
    case OP_ATANH:
    case OP_COSH:
    case OP_SINH:
    case OP_CONVERT:
    case OP_REDUCE_PRECISION:
    case OP_COPY:
    case OP_ADD:
    case OP_SUBTRACT:
    case OP_MULTIPLY:
    case OP_DIVIDE:
    case OP_REMAINDER:
    case OP_POWER:
    case OP_ATAN2:
    case OP_MAXIMUM:
    case OP_MINIMUM:
    case OP_MULHI:
    case OP_AND:
    case OP_OR:
    case OP_XOR:
    case OP_SHL:
    case OP_SHR_ARITH:
    case OP_SHR_LOGICAL:
    case OP_COMPARE:
    case OP_COMPLEX:
    case OP_STOCHASTIC_CONVERT:
    case OP_SELECT:
    case OP_CLAMP: r = el_elementwise(k, in, idx); break;
    case OP_PARAMETER:
    case OP_PARTITION_ID:
    case OP_REPLICA_ID:
    case OP_RNG_GET_AND_UPDATE_STATE:
    case OP_SELECT_AND_SCATTER:
    case OP_SORT:
    case OP_TOPK:
    case OP_BATCH_NORM_TRAINING:
    case OP_BATCH_NORM_INFERENCE:
    case OP_BATCH_NORM_GRAD:
    case OP_SCAN:
    case OP_FFT:
    case OP_CHOLESKY:
    case OP_TRIANGULAR_SOLVE:
    case OP_RAGGED_DOT:
    case OP_SCALED_DOT:
    case OP_SCATTER:
    case OP_TUPLE:
    case OP_COPY_START:
    case OP_COPY_DONE:
    case OP_SHUFFLE:
    case OP_GET_DIMENSION_SIZE:
    case OP_SET_DIMENSION_SIZE:
    case OP_DYNAMIC_RESHAPE:
    case OP_CONDITIONAL:
    case OP_WHILE:
    case OP_ASYNC_START:
    case OP_ASYNC_UPDATE:
    case OP_ASYNC_DONE:
    case OP_OPT_BARRIER:
    case OP_ADD_DEPENDENCY:
    case OP_AFTER_ALL:
    case OP_DOMAIN:
    case OP_ALL_REDUCE:
    case OP_ALL_REDUCE_START:
    case OP_ALL_REDUCE_DONE:
    case OP_ALL_GATHER:
    case OP_ALL_GATHER_START:
    case OP_ALL_GATHER_DONE:
    case OP_ALL_TO_ALL:
    case OP_REDUCE_SCATTER:
    case OP_COLLECTIVE_PERMUTE:
    case OP_COLLECTIVE_PERMUTE_START:
    case OP_COLLECTIVE_PERMUTE_DONE:
    case OP_COLLECTIVE_BROADCAST:
    case OP_RAGGED_ALL_TO_ALL:
    case OP_COLLECTIVE_REDUCE:
    case OP_SEND:
    case OP_SEND_DONE:
    case OP_RECV:
    case OP_RECV_DONE:
    case OP_INFEED:
    case OP_OUTFEED:
    case OP_RNG:
    case OP_RNG_BIT_GENERATOR:
    case OP_CUSTOM_CALL:
    case OP_COUNT: {
      char msg[320];
      snprintf(msg, sizeof msg,
               "%s: not generated element by element (inside a fusion computation, or where "
               "an elementwise value is asked of it); the CPU target compiles it only as an "
               "entry instruction of its own, where it supports it",
               hlo_op_name(in->op));
      return el_fail(k, in, msg);
    }
    }
  if (!r || k->failed) return NULL;
  if (cacheable) {
    gen_cache_add(k, in, rank, idx, r);
  }
  return r;
}

bool gen_scalar_comp(GenKern *k, const HComp *c, LLVMValueRef *args, int nargs, LLVMValueRef *out) {
  if (!el_push(k, c->root, c, NULL, args, nargs)) return false;
  const HInstr *root = c->root;
  bool ok = true;
  if (root->op == OP_TUPLE) {
    for (int j = 0; j < root->nops && ok; j++)
      ok = (out[j] = gen_value(k, root->ops[j], NULL)) != NULL;
  } else {
    ok = (out[0] = gen_value(k, root, NULL)) != NULL;
  }
  k->nbind--;
  return ok && !k->failed;
}

/* ------------------------------------------------------------------ reductions */

/* Allow the accumulation step of a reduction loop to be reassociated, so LLVM can vectorize
 * it with several partial accumulators (XLA's CPU reductions do the same). */
static void el_reassoc(LLVMValueRef v) {
  if (LLVMIsAInstruction(v) && LLVMCanValueUseFastMathFlags(v))
    LLVMSetFastMathFlags(v, LLVMGetFastMathFlags(v) | LLVMFastMathAllowReassoc);
}

static LLVMValueRef el_reduce(GenKern *k, const HInstr *in, LLVMValueRef *idx, LLVMValueRef *out) {
  GenCg *cg = k->cg;
  LLVMBuilderRef B = k->B;
  int n = in->nops / 2;
  if (n > HLO_MAX_RANK * 2) return el_fail(k, in, "too many reduce operands");
  const Shape *os = &in->ops[0]->shape;
  LLVMValueRef acc[HLO_MAX_RANK * 2];
  LLVMTypeRef aty[HLO_MAX_RANK * 2];
  for (int j = 0; j < n; j++) {
    aty[j] = gen_reg_type(cg, in->ops[n + j]->shape.dt);
    acc[j] = gen_alloca(k, aty[j]);
    LLVMValueRef init = gen_value(k, in->ops[n + j], NULL);
    if (!init) return NULL;
    LLVMBuildStore(B, init, acc[j]);
  }
  bool red[HLO_MAX_RANK] = {0};
  for (int j = 0; j < in->dims.n; j++)
    red[in->dims.v[j]] = true;
  LLVMValueRef full[HLO_MAX_RANK];
  GenLoop loops[HLO_MAX_RANK];
  int nl = 0, o = 0;
  for (int d = 0; d < os->rank; d++) {
    if (red[d])
      full[d] = gen_loop_open(k, &loops[nl++], gen_i64(k, 0), gen_i64(k, os->dims[d]));
    else
      full[d] = idx[o++];
  }
  LLVMValueRef args[HLO_MAX_RANK * 4], res[HLO_MAX_RANK * 2];
  for (int j = 0; j < n; j++) {
    args[j] = LLVMBuildLoad2(B, aty[j], acc[j], "");
    if (!(args[n + j] = gen_value(k, in->ops[j], full))) return NULL;
  }
  k->reduce_loop++;
  bool gen_ok = gen_scalar_comp(k, in->calls[0], args, 2 * n, res);
  k->reduce_loop--;
  if (!gen_ok) return NULL;
  for (int j = 0; j < n; j++) {
    el_reassoc(res[j]);
    LLVMBuildStore(B, res[j], acc[j]);
  }
  for (int j = nl - 1; j >= 0; j--)
    gen_loop_close(k, &loops[j]);
  LLVMValueRef first = NULL;
  for (int j = 0; j < n; j++) {
    LLVMValueRef v = LLVMBuildLoad2(B, aty[j], acc[j], "");
    if (out) out[j] = v;
    if (!first) first = v;
  }
  return first;
}

bool gen_value_multi(GenKern *k, const HInstr *in, LLVMValueRef *idx, LLVMValueRef *out) {
  if (in->op != OP_REDUCE) {
    el_fail(k, in, "multi-output value of this op is not supported");
    return false;
  }
  return el_reduce(k, in, idx, out) != NULL;
}

/* Operand index along dimension d of a reduce-window's window position wk (i64), with the
 * validity test folded into *ok (NULL: always valid). The index is clamped only on the side
 * where the window can leave the operand (padding, base dilation): an unpadded dimension's
 * index is affine in the output index, which keeps the output loop vectorizable. */
static LLVMValueRef el_rw_index(GenKern *k, const HInstr *in, int d, LLVMValueRef od,
                                LLVMValueRef wk, LLVMValueRef *ok) {
  LLVMBuilderRef B = k->B;
  const WinDim *wd = &in->window->d[d];
  int64_t dim = in->ops[0]->shape.dims[d], odim = in->shape.dims[d];
  if (wd->reversal) wk = ix_sub(k, gen_i64(k, wd->size - 1), wk);
  LLVMValueRef p = ix_sub(k, ix_add(k, ix_mul(k, od, wd->stride), ix_mul(k, wk, wd->win_dil)),
                          gen_i64(k, wd->pad_lo));
  if (wd->base_dil > 1) {
    *ok = and1(k, *ok, LLVMBuildICmp(B, LLVMIntSGE, p, gen_i64(k, 0), ""));
    LLVMValueRef pc = ix_clamp(k, p, 0, INT64_MAX / 4);
    *ok = and1(k, *ok,
               LLVMBuildICmp(B, LLVMIntEQ, LLVMBuildURem(B, pc, gen_i64(k, wd->base_dil), ""),
                             gen_i64(k, 0), ""));
    p = LLVMBuildUDiv(B, pc, gen_i64(k, wd->base_dil), "");
    *ok = and1(k, *ok, LLVMBuildICmp(B, LLVMIntSLT, p, gen_i64(k, dim), ""));
    return ix_clamp(k, p, 0, dim - 1);
  }
  /* extreme positions the window reaches: [-pad_lo, (odim-1)*stride + (size-1)*dil - pad_lo] */
  return ix_bound(k, p, dim, -wd->pad_lo,
                  (odim - 1) * wd->stride + (wd->size - 1) * wd->win_dil - wd->pad_lo, ok);
}

#define EL_RW_UNROLL 16 /* windows of at most this many positions are unrolled */

/* Reduce-window: the reducer over the window positions in row-major window order, padding
 * positions contributing the init value. Small windows (a 3x3 pool) are unrolled into
 * straight-line code so the accumulator stays in registers and the output loop around it
 * can vectorize; larger ones loop over the window. */
static LLVMValueRef el_reduce_window(GenKern *k, const HInstr *in, LLVMValueRef *idx) {
  GenCg *cg = k->cg;
  LLVMBuilderRef B = k->B;
  if (in->nops != 2) return el_fail(k, in, "variadic reduce-window is not supported");
  const Window *w = in->window;
  const Shape *os = &in->ops[0]->shape;
  DType t = in->shape.dt;
  LLVMTypeRef ty = gen_reg_type(cg, t);
  LLVMValueRef init = gen_value(k, in->ops[1], NULL);
  if (!init) return NULL;
  int64_t npos = 1;
  for (int d = 0; d < os->rank; d++)
    npos *= w->d[d].size;
  if (npos >= 1 && npos <= EL_RW_UNROLL) {
    LLVMValueRef acc = init;
    for (int64_t q = 0; q < npos; q++) {
      LLVMValueRef oi[HLO_MAX_RANK], ok = NULL;
      int64_t r = q;
      int64_t wpos[HLO_MAX_RANK];
      for (int d = os->rank - 1; d >= 0; d--) {
        wpos[d] = r % w->d[d].size;
        r /= w->d[d].size;
      }
      for (int d = 0; d < os->rank; d++)
        oi[d] = el_rw_index(k, in, d, idx[d], gen_i64(k, wpos[d]), &ok);
      LLVMValueRef v = gen_value(k, in->ops[0], oi);
      if (!v) return NULL;
      if (ok) v = gen_select(k, ok, v, init);
      LLVMValueRef args[2] = {acc, v}, res[1];
      if (!gen_scalar_comp(k, in->calls[0], args, 2, res)) return NULL;
      acc = res[0];
    }
    return acc;
  }
  LLVMValueRef acc = gen_alloca(k, ty);
  LLVMBuildStore(B, init, acc);
  GenLoop loops[HLO_MAX_RANK];
  LLVMValueRef oi[HLO_MAX_RANK], ok = NULL;
  int nl = 0;
  LLVMValueRef wv[HLO_MAX_RANK];
  for (int d = 0; d < os->rank; d++) {
    const WinDim *wd = &w->d[d];
    wv[d] = wd->size == 1 ? gen_i64(k, 0)
                          : gen_loop_open(k, &loops[nl++], gen_i64(k, 0), gen_i64(k, wd->size));
  }
  for (int d = 0; d < os->rank; d++)
    oi[d] = el_rw_index(k, in, d, idx[d], wv[d], &ok);
  LLVMValueRef v = gen_value(k, in->ops[0], oi);
  if (!v) return NULL;
  if (ok) v = gen_select(k, ok, v, init);
  LLVMValueRef args[2] = {LLVMBuildLoad2(B, ty, acc, ""), v}, res[1];
  if (!gen_scalar_comp(k, in->calls[0], args, 2, res)) return NULL;
  LLVMBuildStore(B, res[0], acc);
  for (int j = nl - 1; j >= 0; j--)
    gen_loop_close(k, &loops[j]);
  return LLVMBuildLoad2(B, ty, acc, "");
}

/* ------------------------------------------------------------------ gather */

static LLVMValueRef el_gather(GenKern *k, const HInstr *in, LLVMValueRef *idx) {
  const GatherDims *g = in->gather;
  const HInstr *op = in->ops[0], *ind = in->ops[1];
  const Shape *os = &op->shape, *is = &ind->shape;
  int orank = in->shape.rank;
  /* batch indices: output dims not in offset_dims, in order */
  LLVMValueRef bidx[HLO_MAX_RANK];
  int nb = 0;
  for (int d = 0; d < orank; d++)
    if (!hlo_ilist_has(&g->offset_dims, d)) bidx[nb++] = idx[d];
  /* indices array index for component c: batch dims with index_vector_dim inserted */
  int64_t ivd = g->index_vector_dim;
  LLVMValueRef start[HLO_MAX_RANK];
  for (int d = 0; d < os->rank; d++)
    start[d] = gen_i64(k, 0);
  for (int c = 0; c < g->start_index_map.n; c++) {
    LLVMValueRef ii[HLO_MAX_RANK];
    int b = 0;
    for (int d = 0; d < is->rank; d++)
      ii[d] = d == ivd ? gen_i64(k, c) : bidx[b++];
    LLVMValueRef s = gen_value(k, ind, ii);
    if (!s) return NULL;
    int64_t od = g->start_index_map.v[c];
    start[od] = ix_clamp(k, ix_from(k, s, is->dt), 0, os->dims[od] - g->slice_sizes.v[od]);
  }
  for (int j = 0; j < g->operand_batching_dims.n; j++) {
    int64_t sd = g->start_indices_batching_dims.v[j];
    int pos = (int)(sd < ivd || ivd >= is->rank ? sd : sd - 1); /* position among batch dims */
    start[g->operand_batching_dims.v[j]] = bidx[pos];
  }
  LLVMValueRef oi[HLO_MAX_RANK];
  int off = 0;
  for (int d = 0; d < os->rank; d++) {
    if (hlo_ilist_has(&g->collapsed_slice_dims, d) || hlo_ilist_has(&g->operand_batching_dims, d)) {
      oi[d] = start[d];
      continue;
    }
    oi[d] = ix_add(k, start[d], idx[g->offset_dims.v[off++]]);
  }
  return gen_value(k, op, oi);
}

/* ------------------------------------------------------------------ dot, convolution terms */

int gen_dot_red_dims(const HInstr *in, int64_t *ext) {
  const DotDims *dd = in->dot;
  for (int j = 0; j < dd->lhs_contract.n; j++)
    ext[j] = in->ops[0]->shape.dims[dd->lhs_contract.v[j]];
  return dd->lhs_contract.n;
}

LLVMValueRef gen_dot_term(GenKern *k, const HInstr *in, LLVMValueRef *idx, LLVMValueRef *red) {
  const DotDims *dd = in->dot;
  const HInstr *l = in->ops[0], *r = in->ops[1];
  LLVMValueRef li[HLO_MAX_RANK], ri[HLO_MAX_RANK];
  int o = 0;
  for (int j = 0; j < dd->lhs_batch.n; j++) {
    li[dd->lhs_batch.v[j]] = idx[o];
    ri[dd->rhs_batch.v[j]] = idx[o];
    o++;
  }
  for (int d = 0; d < l->shape.rank; d++)
    if (!hlo_ilist_has(&dd->lhs_batch, d) && !hlo_ilist_has(&dd->lhs_contract, d)) li[d] = idx[o++];
  for (int d = 0; d < r->shape.rank; d++)
    if (!hlo_ilist_has(&dd->rhs_batch, d) && !hlo_ilist_has(&dd->rhs_contract, d)) ri[d] = idx[o++];
  for (int j = 0; j < dd->lhs_contract.n; j++) {
    li[dd->lhs_contract.v[j]] = red[j];
    ri[dd->rhs_contract.v[j]] = red[j];
  }
  DType t = gen_dot_acc_type(in);
  LLVMValueRef a = gen_value(k, l, li);
  if (!a) return NULL;
  LLVMValueRef b = gen_value(k, r, ri);
  if (!b) return NULL;
  a = gen_convert(k, a, l->shape.dt, t);
  b = gen_convert(k, b, r->shape.dt, t);
  return el_mul(k, t, a, b);
}

DType gen_dot_acc_type(const HInstr *in) {
  DType t = in->shape.dt;
  bool fp8 = hlo_dtype_is_fp8(t);
  for (int j = 0; j < in->nops && j < 2; j++)
    fp8 |= hlo_dtype_is_fp8(in->ops[j]->shape.dt);
  return (fp8 || t == DT_BF16 || t == DT_F16) && t != DT_F64 ? DT_F32 : t;
}

int gen_conv_red_dims(const HInstr *in, int64_t *ext) {
  const ConvDims *cd = in->conv;
  const Shape *ks = &in->ops[1]->shape;
  ext[0] = ks->dims[cd->k_in];
  for (int j = 0; j < cd->k_sp.n; j++)
    ext[1 + j] = ks->dims[cd->k_sp.v[j]];
  return 1 + cd->k_sp.n;
}

LLVMValueRef gen_conv_term(GenKern *k, const HInstr *in, LLVMValueRef *idx, LLVMValueRef *red) {
  LLVMBuilderRef B = k->B;
  const ConvDims *cd = in->conv;
  const HInstr *x = in->ops[0], *w = in->ops[1];
  const Shape *xs = &x->shape, *ws = &w->shape, *ys = &in->shape;
  int64_t fg = in->feature_groups, bg = in->batch_groups;
  int64_t cout = ys->dims[cd->out_feat];
  int64_t cin_g = ws->dims[cd->k_in]; /* input features per group */
  LLVMValueRef of = idx[cd->out_feat], ob = idx[cd->out_batch];
  LLVMValueRef xi[HLO_MAX_RANK], wi[HLO_MAX_RANK], ok = NULL;
  /* feature groups: output feature of belongs to group of / (cout / fg) */
  LLVMValueRef inf = red[0];
  if (fg > 1) {
    LLVMValueRef grp = LLVMBuildUDiv(B, of, gen_i64(k, cout / fg), "");
    inf = ix_add(k, ix_mul(k, grp, cin_g), red[0]);
  }
  LLVMValueRef inb = ob;
  if (bg > 1) {
    LLVMValueRef grp = LLVMBuildUDiv(B, of, gen_i64(k, cout / bg), "");
    inb = ix_add(k, ix_mul(k, grp, ys->dims[cd->out_batch]), ob);
  }
  xi[cd->in_batch] = inb;
  xi[cd->in_feat] = inf;
  wi[cd->k_in] = red[0];
  wi[cd->k_out] = of;
  for (int j = 0; j < cd->in_sp.n; j++) {
    const WinDim *wd = &in->window->d[j];
    int64_t xd = cd->in_sp.v[j];
    LLVMValueRef kk = red[1 + j];
    wi[cd->k_sp.v[j]] = wd->reversal ? ix_sub(k, gen_i64(k, wd->size - 1), kk) : kk;
    LLVMValueRef p = ix_sub(
        k, ix_add(k, ix_mul(k, idx[cd->out_sp.v[j]], wd->stride), ix_mul(k, kk, wd->win_dil)),
        gen_i64(k, wd->pad_lo));
    if (wd->base_dil > 1) {
      ok = and1(k, ok, LLVMBuildICmp(B, LLVMIntSGE, p, gen_i64(k, 0), ""));
      LLVMValueRef pc = ix_clamp(k, p, 0, INT64_MAX / 4);
      ok = and1(k, ok,
                LLVMBuildICmp(B, LLVMIntEQ, LLVMBuildURem(B, pc, gen_i64(k, wd->base_dil), ""),
                              gen_i64(k, 0), ""));
      p = LLVMBuildUDiv(B, pc, gen_i64(k, wd->base_dil), "");
      ok = and1(k, ok, LLVMBuildICmp(B, LLVMIntSLT, p, gen_i64(k, xs->dims[xd]), ""));
    } else if (wd->pad_lo > 0 || wd->pad_hi > 0 || wd->pad_lo < 0 || wd->pad_hi < 0) {
      ok = and1(k, ok, ix_in(k, p, 0, xs->dims[xd]));
    }
    xi[xd] = ok ? ix_clamp(k, p, 0, xs->dims[xd] - 1) : p;
  }
  DType t = gen_dot_acc_type(in);
  LLVMValueRef a = gen_value(k, x, xi);
  if (!a) return NULL;
  LLVMValueRef b = gen_value(k, w, wi);
  if (!b) return NULL;
  a = gen_convert(k, a, xs->dt, t);
  b = gen_convert(k, b, ws->dt, t);
  LLVMValueRef m = el_mul(k, t, a, b);
  if (ok) m = LLVMBuildSelect(B, ok, m, gen_zero(k, t), "");
  return m;
}

/* ------------------------------------------------------------------ support check */

/* Whether the generator computes op on complex values (given a target that takes them):
 * the elementwise ops gen_complex.c defines, data movement, reductions through a reducer
 * computation, dot and fft (a kernel of its own). */
static bool el_complex_ok(const HInstr *in) {
  if (hlo_op_flags(in->op) & OPF_ELEM) return in->op != OP_BITCAST_CONVERT && in->op != OP_MAP;
  switch ((int)in->op) {
  case OP_PARAMETER:
  case OP_CONSTANT:
  case OP_MAP:
  case OP_REDUCE:
  case OP_REDUCE_WINDOW:
  case OP_DOT:
  case OP_FFT:
  case OP_BITCAST:
  case OP_BROADCAST:
  case OP_RESHAPE:
  case OP_TRANSPOSE:
  case OP_REVERSE:
  case OP_SLICE:
  case OP_CONCATENATE:
  case OP_PAD:
  case OP_DYNAMIC_SLICE:
  case OP_DYNAMIC_UPDATE_SLICE:
  case OP_GATHER:
  case OP_TUPLE:
  case OP_GET_TUPLE_ELEMENT:
  case OP_CALL:
  case OP_FUSION:
  case OP_WHILE: return true;
  default: return false;
  }
}

bool gen_op_supported(const HInstr *in, const char *target, HErr *err) {
  return gen_op_supported_ex(in, target, false, err);
}

bool gen_op_supported_ex(const HInstr *in, const char *target, bool complex_ok, HErr *err) {
  const char *why = NULL, *no_gen = "op has no code generator on this target yet (the reference "
                                    "interpreter, hloc-run, evaluates what it supports)";
  char cbuf[300];
  bool cplx = hlo_shape_has_complex(&in->shape);
  for (int k = 0; k < in->nops && !cplx; k++)
    cplx = hlo_shape_has_complex(&in->ops[k]->shape);
  if (cplx && !(complex_ok && el_complex_ok(in))) {
    hlo_err_at(err, in,
               "%s target: %s: complex types (c64, c128) are not supported by this target yet",
               target, hlo_op_name(in->op));
    return false;
  }
  switch (in->op) {
  case OP_PARAMETER:
  case OP_CONSTANT:
  case OP_IOTA:
  case OP_ABS:
  case OP_CBRT:
  case OP_CEIL:
  case OP_COSINE:
  case OP_CLZ:
  case OP_ERF:
  case OP_EXP:
  case OP_EXPM1:
  case OP_FLOOR:
  case OP_IS_FINITE:
  case OP_LOG:
  case OP_LOG1P:
  case OP_LOGISTIC:
  case OP_NEGATE:
  case OP_NOT:
  case OP_POPCNT:
  case OP_ROUND_AFZ:
  case OP_ROUND_EVEN:
  case OP_RSQRT:
  case OP_SIGN:
  case OP_SINE:
  case OP_SQRT:
  case OP_TAN:
  case OP_TANH:
  case OP_ACOS:
  case OP_ACOSH:
  case OP_ASIN:
  case OP_ASINH:
  case OP_ATAN:
  case OP_ATANH:
  case OP_COSH:
  case OP_SINH:
  case OP_CONVERT:
  case OP_BITCAST_CONVERT:
  case OP_COPY:
  case OP_REDUCE_PRECISION:
  case OP_ADD:
  case OP_SUBTRACT:
  case OP_MULTIPLY:
  case OP_DIVIDE:
  case OP_REMAINDER:
  case OP_POWER:
  case OP_ATAN2:
  case OP_MAXIMUM:
  case OP_MINIMUM:
  case OP_AND:
  case OP_OR:
  case OP_XOR:
  case OP_SHL:
  case OP_SHR_ARITH:
  case OP_SHR_LOGICAL:
  case OP_COMPARE:
  case OP_SELECT:
  case OP_CLAMP:
  case OP_MAP:
  case OP_REDUCE:
  case OP_REDUCE_WINDOW:
  case OP_DOT:
  case OP_CONVOLUTION:
  case OP_BITCAST:
  case OP_BROADCAST:
  case OP_RESHAPE:
  case OP_TRANSPOSE:
  case OP_REVERSE:
  case OP_SLICE:
  case OP_CONCATENATE:
  case OP_PAD:
  case OP_DYNAMIC_SLICE:
  case OP_DYNAMIC_UPDATE_SLICE:
  case OP_GATHER:
  case OP_SCATTER:
  case OP_TUPLE:
  case OP_GET_TUPLE_ELEMENT:
  case OP_CALL:
  case OP_FUSION:
  case OP_SORT: /* a kernel of its own (each target's); not elemental inside a fusion */
  case OP_SELECT_AND_SCATTER: /* likewise */ break;
  case OP_IMAG:
  case OP_REAL:
  case OP_COMPLEX:
    if (!complex_ok) why = "complex numbers are not supported";
    break;
  case OP_TOPK:
    why = "topk is compiled as a sort (the optimizer's topk-expand pass), which this one skipped";
    break;
  case OP_BATCH_NORM_TRAINING:
  case OP_BATCH_NORM_INFERENCE:
  case OP_BATCH_NORM_GRAD:
    why = "batch-norm ops have no code generator yet (frameworks export them expanded)";
    break;
  case OP_SCAN:
    why = "the scan op has no code generator yet (JAX exports lax.scan as a while loop, which "
          "compiles)";
    break;
  case OP_GET_DIMENSION_SIZE:
  case OP_SET_DIMENSION_SIZE:
  case OP_DYNAMIC_RESHAPE: why = "dynamic shapes are not supported"; break;
  case OP_FFT: /* a kernel of its own where the target takes complex values */
    if (!complex_ok) why = no_gen;
    break;
  case OP_MULHI:
  case OP_STOCHASTIC_CONVERT:
  case OP_CHOLESKY:
  case OP_TRIANGULAR_SOLVE:
  case OP_RAGGED_DOT:
  case OP_SCALED_DOT: why = no_gen; break;
  case OP_CONDITIONAL:
    /* the optimizer's conditional-select compiles the others */
    why = "only conditionals whose branches have no side effects, rng or loops are compiled (every "
          "branch runs, "
          "the taken one's result is selected)";
    break;
  case OP_WHILE: /* the targets' loops over the condition's and body's kernels;
                    counted loops are unrolled by the optimizer's while-unroll */
    break;
  case OP_OPT_BARRIER:
  case OP_ADD_DEPENDENCY:
  case OP_AFTER_ALL:
  case OP_RNG_BIT_GENERATOR: why = "op is not supported"; break;
  case OP_CUSTOM_CALL:
    snprintf(cbuf, sizeof cbuf,
             "target %s is not supported (hloc compiles XLA's ops; a library call by name has no "
             "definition here)",
             in->custom_call_target ? in->custom_call_target : "(none)");
    why = cbuf;
    break;
  case OP_PARTITION_ID:
  case OP_REPLICA_ID:
  case OP_RNG_GET_AND_UPDATE_STATE:
  case OP_COPY_START:
  case OP_COPY_DONE:
  case OP_SHUFFLE:
  case OP_ASYNC_START:
  case OP_ASYNC_UPDATE:
  case OP_ASYNC_DONE:
  case OP_DOMAIN:
  case OP_ALL_REDUCE:
  case OP_ALL_REDUCE_START:
  case OP_ALL_REDUCE_DONE:
  case OP_ALL_GATHER:
  case OP_ALL_GATHER_START:
  case OP_ALL_GATHER_DONE:
  case OP_ALL_TO_ALL:
  case OP_REDUCE_SCATTER:
  case OP_COLLECTIVE_PERMUTE:
  case OP_COLLECTIVE_PERMUTE_START:
  case OP_COLLECTIVE_PERMUTE_DONE:
  case OP_COLLECTIVE_BROADCAST:
  case OP_RAGGED_ALL_TO_ALL:
  case OP_COLLECTIVE_REDUCE:
  case OP_SEND:
  case OP_SEND_DONE:
  case OP_RECV:
  case OP_RECV_DONE:
  case OP_INFEED:
  case OP_OUTFEED:
  case OP_RNG:
    why = "op has side effects or multi-device semantics this target cannot compile";
    break;
  case OP_COUNT: why = "invalid op"; break;
  }
  if (why) {
    hlo_err_at(err, in, "%s target: %s: %s", target, hlo_op_name(in->op), why);
    return false;
  }
  if (in->op == OP_REDUCE_PRECISION && !el_rp_format_ok(in, in->shape.dt)) {
    hlo_err_at(
        err, in,
        "%s target: reduce-precision: exponent_bits=%d mantissa_bits=%d on %s is not supported "
        "(a float type, exponent_bits >= 1, mantissa_bits >= 0)",
        target, in->exponent_bits, in->mantissa_bits, hlo_dtype_name(in->shape.dt));
    return false;
  }
  if (in->op == OP_CONSTANT && !in->literal) {
    hlo_err_at(
        err, in,
        "%s target: constant: its value is elided in the HLO text ({...}); compile the module's "
        "HloModuleProto (.pb) instead, or give it values with --elided-constants=zero|random",
        target);
    return false;
  }
  if (in->shape.dt != DT_TUPLE && in->shape.dt != DT_TOKEN && in->shape.dt == DT_INVALID) {
    hlo_err_at(err, in, "%s target: unsupported element type", target);
    return false;
  }
  if (in->shape.dt == DT_TOKEN) {
    hlo_err_at(err, in, "%s target: token values are not supported", target);
    return false;
  }
  return true;
}

bool gen_dus_index(GenKern *k, const HInstr *dus, const LLVMValueRef *ui, LLVMValueRef *oi) {
  return el_window_index(k, dus->ops + 2, &dus->shape, &dus->ops[1]->shape, ui, oi);
}
