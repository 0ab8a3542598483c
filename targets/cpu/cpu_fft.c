/* targets/cpu/cpu_fft.c: the fft kernels of the CPU target (FFT, IFFT, RFFT, IRFFT).
 *
 * XLA's fft transforms the innermost len(fft_length) dims of its operand (1 to 3). A lone fft
 * instruction of the entry computation becomes one task per transformed axis, run in order
 * (the parallel-for splits each task's lines into chunks): every line of the axis is gathered
 * into a contiguous work buffer of the chunk's scratch, transformed there by the line function
 * of its length, and scattered to its place. The innermost axis goes first for FFT, IFFT and
 * RFFT (whose real lines become n/2 + 1 bins), the other axes then work in place on the
 * result; IRFFT inverts the outer axes first, into a complex copy in scratch, and its last
 * task builds each full line of n bins from n/2 + 1 by Hermitian symmetry (the imaginary parts
 * of the DC and, n even, the Nyquist bin ignored, as XLA and the interpreter do) and keeps the
 * real parts of its inverse. The inverse kinds are scaled by 1/N (N the product of the
 * lengths) where the last task stores. Arithmetic is in the component type (f32 for c64, as
 * XLA's CPU FFT), twiddles computed in double at compile time and rounded once.
 *
 * The line function of length n (one per length, sign and type: NAME_fftN) is a self-sorting
 * Stockham transform: the passes of radix r in {4, 2, 3, 5, 7, 11, 13} (4s first) ping-pong
 * between the line and a work buffer, pass r with stride s and m = n / (s r) mapping
 * x[q + s (p + j m)] (j < r) to y[q + s (r p + k)] = DFT_r(x)_k * w_n^(s p k), its loops
 * over p and q (q contiguous, innermost where s > 1); the result ends in whichever buffer the
 * pass count leaves it (the function returns it). Each radix's butterfly is straight-line code
 * shared by every length: radix 2 and 4 add only, odd radices pair x_j with x_(r-j) (sums
 * times cosines, differences times sines: (r - 1)^2 / 2 real products for r points). So a
 * length whose factors are all among these costs O(n sum(factors)) flops, O(n log n) for
 * powers of two. A length with a larger prime factor goes through Bluestein's algorithm: the
 * chirp c_j = exp(sign i pi j^2 / n) turns the transform into a cyclic convolution of length
 * M (the power of two >= 2n - 1), X_k = c_k sum_j (x_j c_j) conj(c_(k-j)), computed as
 * IFFT_M(FFT_M(x c) * B) with B the transform of the conjugate chirp, made at compile time in
 * double (scaled by 1/M); O(n log n) for every length. The twiddle, chirp and B tables are
 * read-only data (cpu_rodata), made once per length, sign and type like the functions. */
#include "cpu_impl.h"

#include <complex.h>
#include <math.h>
#include <string.h>

enum {
  CF_MAX_FACTORS = 64, /* passes of one line function */
  CF_MAX_MADE = 256,   /* functions and tables made per module */
};

/* A function or table made once per module, by what it is. */
typedef struct CfMade {
  int kind;       /* 0 pass function, 1 line function, 2 twiddles, 3 chirp, 4 Bluestein's B */
  DType pt;       /* component type (f32, f64) */
  int64_t n;      /* radix or length */
  int sign;       /* -1 forward, +1 inverse */
  LLVMValueRef v; /* the function or global */
  LLVMTypeRef ty; /* a function's type */
} CfMade;

typedef struct CpuFft {
  int n;                    /* entries */
  CfMade made[CF_MAX_MADE]; /* them */
} CpuFft;

/* The passes of a length: radices in order, or Bluestein's (blue: the inner length m). */
typedef struct CfPlan {
  int nf;                /* passes */
  int f[CF_MAX_FACTORS]; /* their radices */
  bool blue;             /* a prime factor beyond 13: Bluestein's algorithm */
  int64_t m;             /* blue: the power of two of the convolution */
} CfPlan;

/* A complex value as two scalars of the component type. */
typedef struct CfC {
  LLVMValueRef re, im;
} CfC;

static CfPlan cf_plan(int64_t n) {
  CfPlan p = {0};
  static const int radix[] = {4, 2, 3, 5, 7, 11, 13};
  int64_t r = n;
  for (size_t i = 0; i < sizeof radix / sizeof *radix; i++)
    while (r % radix[i] == 0 && p.nf < CF_MAX_FACTORS)
      p.f[p.nf++] = radix[i], r /= radix[i];
  if (r > 1) {
    p.blue = true;
    p.nf = 0;
    for (p.m = 1; p.m < 2 * n - 1; p.m *= 2) {
    }
  }
  return p;
}

static CfMade *cf_find(CpuCg *cg, int kind, DType pt, int64_t n, int sign) {
  if (!cg->fft) cg->fft = hlo_arena_alloc(cg->g.scratch, sizeof *cg->fft);
  CpuFft *f = cg->fft;
  for (int i = 0; i < f->n; i++) {
    CfMade *e = &f->made[i];
    if (e->kind == kind && e->pt == pt && e->n == n && e->sign == sign) return e;
  }
  return NULL;
}

static CfMade *cf_add(CpuCg *cg, int kind, DType pt, int64_t n, int sign) {
  CpuFft *f = cg->fft;
  HLO_ASSERT(f->n < CF_MAX_MADE);
  CfMade *e = &f->made[f->n++];
  *e = (CfMade){kind, pt, n, sign, NULL, NULL};
  return e;
}

/* ------------------------------------------------------------------ tables */

/* exp(sign i pi num / den), num in [0, 2 den): exact at the quarter turns (so that radix-4
 * twiddles multiply exactly), else cos and sin in double. */
static double _Complex cf_cis(int64_t num, int64_t den, int sign) {
  double c, s;
  if ((2 * num) % den == 0) {
    int quad = (int)((2 * num / den) % 4);
    c = quad == 0 ? 1 : quad == 2 ? -1 : 0;
    s = quad == 1 ? 1 : quad == 3 ? -1 : 0;
  } else {
    double a = M_PI * (double)num / (double)den;
    c = cos(a), s = sin(a);
  }
  return HLO_CMPLX(c, sign * s);
}

/* A read-only table of n complex values z[0..n) of type pt, named for kind (made once). */
static LLVMValueRef cf_table_global(CpuCg *cg, int kind, DType pt, int64_t n, int sign,
                                    const double _Complex *z) {
  size_t es = hlo_dtype_size(pt), bytes = (size_t)n * 2 * es;
  void *data = hlo_arena_alloc(cg->g.scratch, bytes ? bytes : 1);
  for (int64_t i = 0; i < n; i++)
    hlo_store_c128(hlo_dtype_complex_of(pt), data, i, z[i]);
  char name[512];
  snprintf(name, sizeof name, "%s_fftt%d", cg->o->name, cg->fft->n);
  CfMade *e = cf_add(cg, kind, pt, n, sign);
  e->v = cpu_rodata(cg, name, data, bytes);
  return e->v;
}

/* w[j] = exp(sign 2 pi i j / n), j < n. */
static LLVMValueRef cf_twiddles(CpuCg *cg, DType pt, int64_t n, int sign) {
  CfMade *e = cf_find(cg, 2, pt, n, sign);
  if (e) return e->v;
  double _Complex *z = hlo_arena_alloc(cg->g.scratch, sizeof *z * (size_t)n);
  for (int64_t j = 0; j < n; j++)
    z[j] = cf_cis(2 * j, n, sign);
  return cf_table_global(cg, 2, pt, n, sign, z);
}

/* The chirp c_j = exp(sign i pi j^2 / n), j < n (j^2 reduced mod 2n: exact angles). */
static void cf_chirp(int64_t n, int sign, double _Complex *c) {
  for (int64_t j = 0; j < n; j++)
    c[j] =
        cf_cis((int64_t)((unsigned __int128)j * (unsigned __int128)j % (2 * (uint64_t)n)), n, sign);
}

/* A plain DFT of length m in double by the same Stockham passes as the generated code's
 * (radix 2 and 4 only: m is a power of two), for Bluestein's B at compile time. */
static void cf_dft_pow2(double _Complex *x, double _Complex *y, int64_t m) {
  for (int64_t s = 1, len = m; len > 1; s *= 2, len /= 2) {
    int64_t h = len / 2;
    for (int64_t p = 0; p < h; p++) {
      double _Complex w = cf_cis(2 * p, len, -1);
      for (int64_t q = 0; q < s; q++) {
        double _Complex a = x[q + s * p], b = x[q + s * (p + h)];
        y[q + s * 2 * p] = a + b;
        y[q + s * (2 * p + 1)] = (a - b) * w;
      }
    }
    memcpy(x, y, sizeof *x * (size_t)m);
  }
}

/* Bluestein's tables for length n: the chirp (n values) and B = FFT_m(conj chirp, wrapped) / m. */
static void cf_blue_tables(CpuCg *cg, DType pt, int64_t n, int sign, int64_t m, LLVMValueRef *chirp,
                           LLVMValueRef *bt) {
  CfMade *ce = cf_find(cg, 3, pt, n, sign), *be = cf_find(cg, 4, pt, n, sign);
  if (ce && be) {
    *chirp = ce->v, *bt = be->v;
    return;
  }
  double _Complex *c = hlo_arena_alloc(cg->g.scratch, sizeof *c * (size_t)n);
  double _Complex *b = hlo_arena_alloc(cg->g.scratch, sizeof *b * (size_t)m);
  double _Complex *w = hlo_arena_alloc(cg->g.scratch, sizeof *w * (size_t)m);
  cf_chirp(n, sign, c);
  for (int64_t j = 0; j < n; j++) {
    b[j] = conj(c[j]);
    if (j > 0) b[m - j] = conj(c[j]);
  }
  cf_dft_pow2(b, w, m);
  for (int64_t j = 0; j < m; j++)
    b[j] /= (double)m;
  *chirp = cf_table_global(cg, 3, pt, n, sign, c);
  *bt = cf_table_global(cg, 4, pt, m, sign, b);
}

/* ------------------------------------------------------------------ IR helpers */

static LLVMTypeRef cf_ty(CpuCg *cg, DType pt) { return pt == DT_F64 ? cg->g.f64 : cg->g.f32; }

/* Pointers to the parts of complex element i of the array at p (pairs of pt). */
static LLVMValueRef cf_part(GenKern *k, DType pt, LLVMValueRef p, LLVMValueRef i, int part) {
  LLVMValueRef ix =
      LLVMBuildNSWAdd(k->B, LLVMBuildNSWMul(k->B, i, gen_i64(k, 2), ""), gen_i64(k, part), "");
  return LLVMBuildInBoundsGEP2(k->B, cf_ty(cpu_cg(k->cg), pt), p, &ix, 1, "");
}

static CfC cf_ld(GenKern *k, DType pt, LLVMValueRef p, LLVMValueRef i) {
  LLVMTypeRef t = cf_ty(cpu_cg(k->cg), pt);
  CfC z;
  z.re = LLVMBuildLoad2(k->B, t, cf_part(k, pt, p, i, 0), "");
  z.im = LLVMBuildLoad2(k->B, t, cf_part(k, pt, p, i, 1), "");
  return z;
}

static void cf_st(GenKern *k, DType pt, LLVMValueRef p, LLVMValueRef i, CfC z) {
  LLVMBuildStore(k->B, z.re, cf_part(k, pt, p, i, 0));
  LLVMBuildStore(k->B, z.im, cf_part(k, pt, p, i, 1));
}

static CfC cf_add2(GenKern *k, CfC a, CfC b) {
  return (CfC){LLVMBuildFAdd(k->B, a.re, b.re, ""), LLVMBuildFAdd(k->B, a.im, b.im, "")};
}
static CfC cf_sub2(GenKern *k, CfC a, CfC b) {
  return (CfC){LLVMBuildFSub(k->B, a.re, b.re, ""), LLVMBuildFSub(k->B, a.im, b.im, "")};
}
static CfC cf_mul2(GenKern *k, CfC a, CfC b) {
  LLVMBuilderRef B = k->B;
  return (CfC){
      LLVMBuildFSub(B, LLVMBuildFMul(B, a.re, b.re, ""), LLVMBuildFMul(B, a.im, b.im, ""), ""),
      LLVMBuildFAdd(B, LLVMBuildFMul(B, a.re, b.im, ""), LLVMBuildFMul(B, a.im, b.re, ""), "")};
}
/* sign i z */
static CfC cf_rot(GenKern *k, CfC z, int sign) {
  LLVMValueRef nre = LLVMBuildFNeg(k->B, z.re, ""), nim = LLVMBuildFNeg(k->B, z.im, "");
  return sign > 0 ? (CfC){nim, z.re} : (CfC){z.im, nre};
}
static CfC cf_scale(GenKern *k, CfC z, LLVMValueRef c) {
  return (CfC){LLVMBuildFMul(k->B, z.re, c, ""), LLVMBuildFMul(k->B, z.im, c, "")};
}

/* A function of the module being made: its entry block and a GenKern to build it with (the
 * builder moved there; cf_fn_end puts it back). */
typedef struct CfFn {
  GenKern k;                /* for the loop helpers */
  LLVMBasicBlockRef resume; /* where the builder was */
} CfFn;

static LLVMValueRef cf_fn_begin(CpuCg *cg, CfFn *f, const char *name, LLVMTypeRef ty) {
  memset(f, 0, sizeof *f);
  f->resume = LLVMGetInsertBlock(cg->g.B);
  LLVMValueRef fn = LLVMAddFunction(cg->g.M, name, ty);
  LLVMSetLinkage(fn, LLVMInternalLinkage);
  unsigned ni = LLVMGetEnumAttributeKindForName("noinline", 8);
  LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(cg->g.C, ni, 0));
  f->k.cg = &cg->g;
  f->k.B = cg->g.B;
  f->k.fn = fn;
  f->k.entry = LLVMAppendBasicBlockInContext(cg->g.C, fn, "entry");
  LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(cg->g.C, fn, "start");
  LLVMPositionBuilderAtEnd(cg->g.B, f->k.entry);
  f->k.entry_br = LLVMBuildBr(cg->g.B, body);
  LLVMPositionBuilderAtEnd(cg->g.B, body);
  return fn;
}

static void cf_fn_end(CpuCg *cg, CfFn *f) {
  if (f->resume) LLVMPositionBuilderAtEnd(cg->g.B, f->resume);
}

/* ------------------------------------------------------------------ passes */

/* The radix-r DFT of a[0..r) into b[0..r) (see the file's note). */
static void cf_butterfly(GenKern *k, DType pt, int r, int sign, const CfC *a, CfC *b) {
  if (r == 2) {
    b[0] = cf_add2(k, a[0], a[1]), b[1] = cf_sub2(k, a[0], a[1]);
    return;
  }
  if (r == 4) {
    CfC t0 = cf_add2(k, a[0], a[2]), t1 = cf_sub2(k, a[0], a[2]);
    CfC t2 = cf_add2(k, a[1], a[3]), t3 = cf_rot(k, cf_sub2(k, a[1], a[3]), sign);
    b[0] = cf_add2(k, t0, t2), b[2] = cf_sub2(k, t0, t2);
    b[1] = cf_add2(k, t1, t3), b[3] = cf_sub2(k, t1, t3);
    return;
  }
  int h = (r - 1) / 2;
  CfC t[8], u[8];
  b[0] = a[0];
  for (int j = 1; j <= h; j++) {
    t[j] = cf_add2(k, a[j], a[r - j]), u[j] = cf_sub2(k, a[j], a[r - j]);
    b[0] = cf_add2(k, b[0], t[j]);
  }
  LLVMTypeRef ty = cf_ty(cpu_cg(k->cg), pt);
  for (int kk = 1; kk <= h; kk++) {
    CfC c = a[0], d = {NULL, NULL};
    for (int j = 1; j <= h; j++) {
      double th = 2 * M_PI * (double)((j * kk) % r) / r;
      c = cf_add2(k, c, cf_scale(k, t[j], LLVMConstReal(ty, cos(th))));
      CfC sd = cf_scale(k, u[j], LLVMConstReal(ty, sin(th)));
      d = d.re ? cf_add2(k, d, sd) : sd;
    }
    CfC id = cf_rot(k, d, sign);
    b[kk] = cf_add2(k, c, id), b[r - kk] = cf_sub2(k, c, id);
  }
}

/* One pass's work for group p and offset q (twiddles w[1..r) of group p). */
static void cf_pass_body(GenKern *k, DType pt, int r, int sign, LLVMValueRef x, LLVMValueRef y,
                         LLVMValueRef s, LLVMValueRef m, LLVMValueRef p, LLVMValueRef q,
                         const CfC *w) {
  LLVMBuilderRef B = k->B;
  CfC a[16], b[16];
  for (int j = 0; j < r; j++) {
    LLVMValueRef i = LLVMBuildNSWAdd(B, p, LLVMBuildNSWMul(B, gen_i64(k, j), m, ""), "");
    a[j] = cf_ld(k, pt, x, LLVMBuildNSWAdd(B, q, LLVMBuildNSWMul(B, s, i, ""), ""));
  }
  cf_butterfly(k, pt, r, sign, a, b);
  LLVMValueRef rp = LLVMBuildNSWMul(B, p, gen_i64(k, r), "");
  for (int kk = 0; kk < r; kk++) {
    LLVMValueRef o = LLVMBuildNSWAdd(
        B, q, LLVMBuildNSWMul(B, s, LLVMBuildNSWAdd(B, rp, gen_i64(k, kk), ""), ""), "");
    cf_st(k, pt, y, o, kk ? cf_mul2(k, b[kk], w[kk]) : b[kk]);
  }
}

/* The twiddles of group p: tw[s p kk], kk in [1, r). */
static void cf_pass_twiddles(GenKern *k, DType pt, int r, LLVMValueRef tw, LLVMValueRef s,
                             LLVMValueRef p, CfC *w) {
  LLVMValueRef sp = LLVMBuildNSWMul(k->B, s, p, "");
  for (int kk = 1; kk < r; kk++)
    w[kk] = cf_ld(k, pt, tw, LLVMBuildNSWMul(k->B, sp, gen_i64(k, kk), ""));
}

/* void pass(ptr x, ptr y, ptr tw, i64 s, i64 m) of radix r and sign (made once per type). */
static CfMade *cf_pass_fn(CpuCg *cg, DType pt, int r, int sign) {
  CfMade *e = cf_find(cg, 0, pt, r, sign);
  if (e) return e;
  LLVMTypeRef ps[5] = {cg->g.ptr, cg->g.ptr, cg->g.ptr, cg->g.i64, cg->g.i64};
  LLVMTypeRef ty = LLVMFunctionType(cg->g.vd, ps, 5, 0);
  char name[512];
  snprintf(name, sizeof name, "%s_fftr%d%s_%s", cg->o->name, r, sign < 0 ? "f" : "i",
           hlo_dtype_name(pt));
  CfFn f;
  LLVMValueRef fn = cf_fn_begin(cg, &f, name, ty);
  GenKern *k = &f.k;
  LLVMBuilderRef B = k->B;
  LLVMValueRef x = LLVMGetParam(fn, 0), y = LLVMGetParam(fn, 1), tw = LLVMGetParam(fn, 2);
  LLVMValueRef s = LLVMGetParam(fn, 3), m = LLVMGetParam(fn, 4);
  /* s == 1 (the first pass): one loop over the groups; else q innermost, contiguous */
  LLVMBasicBlockRef one = LLVMAppendBasicBlockInContext(cg->g.C, fn, "s1");
  LLVMBasicBlockRef many = LLVMAppendBasicBlockInContext(cg->g.C, fn, "sn");
  LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(cg->g.C, fn, "done");
  LLVMBuildCondBr(B, LLVMBuildICmp(B, LLVMIntEQ, s, gen_i64(k, 1), ""), one, many);
  CfC w[16];
  GenLoop lp, lq;
  for (int form = 0; form < 2; form++) {
    LLVMPositionBuilderAtEnd(B, form ? many : one);
    LLVMValueRef p = gen_loop_open(k, &lp, gen_i64(k, 0), m);
    cf_pass_twiddles(k, pt, r, tw, s, p, w);
    if (form) {
      LLVMValueRef q = gen_loop_open(k, &lq, gen_i64(k, 0), s);
      cf_pass_body(k, pt, r, sign, x, y, s, m, p, q, w);
      gen_loop_close(k, &lq);
    } else {
      cf_pass_body(k, pt, r, sign, x, y, gen_i64(k, 1), m, p, gen_i64(k, 0), w);
    }
    gen_loop_close(k, &lp);
    LLVMBuildBr(B, done);
  }
  LLVMPositionBuilderAtEnd(B, done);
  LLVMBuildRetVoid(B);
  cf_fn_end(cg, &f);
  e = cf_add(cg, 0, pt, r, sign);
  e->v = fn, e->ty = ty;
  return e;
}

/* The passes of plan p (a direct one) on the n values at x, y the work buffer: returns the
 * buffer holding the result. */
static LLVMValueRef cf_passes(GenKern *k, CpuCg *cg, DType pt, int64_t n, int sign, const CfPlan *p,
                              LLVMValueRef x, LLVMValueRef y) {
  if (p->nf == 0) return x;
  LLVMValueRef tw = cf_twiddles(cg, pt, n, sign);
  int64_t s = 1, m = n;
  for (int i = 0; i < p->nf; i++) {
    CfMade *e = cf_pass_fn(cg, pt, p->f[i], sign);
    m /= p->f[i];
    LLVMValueRef args[5] = {x, y, tw, gen_i64(k, s), gen_i64(k, m)};
    LLVMBuildCall2(k->B, e->ty, e->v, args, 5, "");
    s *= p->f[i];
    LLVMValueRef t = x;
    x = y, y = t;
  }
  return x;
}

/* ------------------------------------------------------------------ line functions */

/* Bluestein's transform of the n values at a (a and w hold m each): returns the buffer of
 * the result. */
static LLVMValueRef cf_bluestein(GenKern *k, CpuCg *cg, DType pt, int64_t n, int sign,
                                 const CfPlan *p, LLVMValueRef a, LLVMValueRef w) {
  LLVMValueRef chirp, bt;
  cf_blue_tables(cg, pt, n, sign, p->m, &chirp, &bt);
  CfPlan ip = cf_plan(p->m);
  GenLoop l;
  LLVMValueRef j = gen_loop_open(k, &l, gen_i64(k, 0), gen_i64(k, n));
  cf_st(k, pt, a, j, cf_mul2(k, cf_ld(k, pt, a, j), cf_ld(k, pt, chirp, j)));
  gen_loop_close(k, &l);
  LLVMValueRef zero = LLVMConstReal(cf_ty(cg, pt), 0);
  j = gen_loop_open(k, &l, gen_i64(k, n), gen_i64(k, p->m));
  cf_st(k, pt, a, j, (CfC){zero, zero});
  gen_loop_close(k, &l);
  LLVMValueRef r = cf_passes(k, cg, pt, p->m, -1, &ip, a, w);
  LLVMValueRef o = r == a ? w : a;
  j = gen_loop_open(k, &l, gen_i64(k, 0), gen_i64(k, p->m));
  cf_st(k, pt, r, j, cf_mul2(k, cf_ld(k, pt, r, j), cf_ld(k, pt, bt, j)));
  gen_loop_close(k, &l);
  r = cf_passes(k, cg, pt, p->m, +1, &ip, r, o);
  j = gen_loop_open(k, &l, gen_i64(k, 0), gen_i64(k, n));
  cf_st(k, pt, r, j, cf_mul2(k, cf_ld(k, pt, r, j), cf_ld(k, pt, chirp, j)));
  gen_loop_close(k, &l);
  return r;
}

/* ptr line(ptr a, ptr w): the DFT of sign of the n values at a, w a work buffer (both of
 * cf_work(n) values): returns a or w, whichever holds the result. */
static CfMade *cf_line_fn(CpuCg *cg, DType pt, int64_t n, int sign) {
  CfMade *e = cf_find(cg, 1, pt, n, sign);
  if (e) return e;
  CfPlan p = cf_plan(n);
  LLVMTypeRef ps[2] = {cg->g.ptr, cg->g.ptr};
  LLVMTypeRef ty = LLVMFunctionType(cg->g.ptr, ps, 2, 0);
  char name[512];
  snprintf(name, sizeof name, "%s_fft%lld%s_%s", cg->o->name, (long long)n, sign < 0 ? "f" : "i",
           hlo_dtype_name(pt));
  CfFn f;
  LLVMValueRef fn = cf_fn_begin(cg, &f, name, ty);
  LLVMValueRef a = LLVMGetParam(fn, 0), w = LLVMGetParam(fn, 1);
  LLVMValueRef r = p.blue ? cf_bluestein(&f.k, cg, pt, n, sign, &p, a, w)
                          : cf_passes(&f.k, cg, pt, n, sign, &p, a, w);
  LLVMBuildRet(cg->g.B, r);
  cf_fn_end(cg, &f);
  e = cf_add(cg, 1, pt, n, sign);
  e->v = fn, e->ty = ty;
  return e;
}

/* Complex values a line function of length n works on in each of its two buffers. */
static int64_t cf_work(int64_t n) {
  CfPlan p = cf_plan(n);
  return p.blue ? p.m : n;
}

/* ------------------------------------------------------------------ the kernel */

/* One task: the lines of axis `axis` of length n, read from src (the operand's value through
 * the generator when src_in, else buffer src_p of shape ss), transformed, written to buffer
 * dst_p of shape ds. */
typedef struct CfStage {
  int axis;             /* transformed dim */
  int64_t n;            /* transform length */
  int sign;             /* -1 forward, +1 inverse */
  const HInstr *src_in; /* the operand (read by gen_value), or NULL */
  int src_kind;         /* 0 the result, 1 the scratch copy (IRFFT) */
  const Shape *ss, *ds; /* source and destination shapes */
  int dst_kind;         /* 0 the result, 1 the scratch copy */
  int in_mode;          /* 0 complex, 1 real (RFFT), 2 n/2+1 bins of a Hermitian line */
  int out_mode;         /* 0 all n, 1 the first n/2+1 bins (RFFT), 2 real parts (IRFFT) */
  double scale;         /* applied as stored (1: none) */
} CfStage;

typedef struct CfKernel {
  const HInstr *in;   /* the fft */
  DType pt;           /* component type */
  int64_t copy_bytes; /* IRFFT's complex copy at the scratch's start */
  int64_t slice;      /* scratch bytes per chunk (after the copy) */
  int64_t cap;        /* complex values of each of the chunk's two buffers */
} CfKernel;

/* The buffer of kind (0 the result, 1 the scratch copy) inside kernel k. */
static LLVMValueRef cf_buf(GenKern *k, CpuCg *cg, const CfKernel *K, int kind) {
  if (kind == 0) return cpu_buffer(k, K->in);
  return cpu_slot(k, (CpuSlot){CPU_SLOT_TEMP, NULL, NULL, cg->temp_base});
}

/* Line l's index over shape s with idx[axis] left for the caller (the other dims from l). */
static void cf_line_index(GenKern *k, const Shape *s, int axis, LLVMValueRef l, LLVMValueRef *idx) {
  for (int d = s->rank - 1; d >= 0; d--) {
    if (d == axis) continue;
    if (s->dims[d] == 1) {
      idx[d] = gen_i64(k, 0);
      continue;
    }
    LLVMValueRef D = gen_i64(k, s->dims[d]);
    idx[d] = LLVMBuildURem(k->B, l, D, "");
    l = LLVMBuildUDiv(k->B, l, D, "");
  }
}

/* The source value at idx as a complex pair of the component type. */
static CfC cf_src(GenKern *k, CpuCg *cg, const CfKernel *K, const CfStage *st, LLVMValueRef src,
                  LLVMValueRef *idx) {
  LLVMValueRef v = st->src_in ? gen_value(k, st->src_in, idx) : gen_load_elem(k, src, st->ss, idx);
  if (!v) return (CfC){NULL, NULL};
  if (st->in_mode == 1) return (CfC){v, LLVMConstReal(cf_ty(cg, K->pt), 0)};
  return (CfC){LLVMBuildExtractValue(k->B, v, 0, ""), LLVMBuildExtractValue(k->B, v, 1, "")};
}

/* Gather the line at idx into buf: n values (IRFFT's last axis: from its n/2+1 bins). */
static void cf_gather(GenKern *k, CpuCg *cg, const CfKernel *K, const CfStage *st, LLVMValueRef src,
                      LLVMValueRef *idx, LLVMValueRef buf) {
  LLVMBuilderRef B = k->B;
  GenLoop l;
  LLVMValueRef j = gen_loop_open(k, &l, gen_i64(k, 0), gen_i64(k, st->n));
  if (st->in_mode != 2) {
    idx[st->axis] = j;
    CfC z = cf_src(k, cg, K, st, src, idx);
    if (z.re) cf_st(k, K->pt, buf, j, z);
  } else {
    /* bin j for j < n/2+1, else conj(bin n - j); DC's and Nyquist's imaginary parts 0 */
    int64_t bins = st->n / 2 + 1;
    LLVMValueRef low = LLVMBuildICmp(B, LLVMIntSLT, j, gen_i64(k, bins), "");
    idx[st->axis] = LLVMBuildSelect(B, low, j, LLVMBuildNSWSub(B, gen_i64(k, st->n), j, ""), "");
    CfC z = cf_src(k, cg, K, st, src, idx);
    if (z.re) {
      LLVMValueRef im = LLVMBuildSelect(B, low, z.im, LLVMBuildFNeg(B, z.im, ""), "");
      LLVMValueRef real =
          LLVMBuildOr(B, LLVMBuildICmp(B, LLVMIntEQ, j, gen_i64(k, 0), ""),
                      LLVMBuildICmp(B, LLVMIntEQ, LLVMBuildNSWMul(B, j, gen_i64(k, 2), ""),
                                    gen_i64(k, st->n), ""),
                      "");
      z.im = LLVMBuildSelect(B, real, LLVMConstReal(cf_ty(cg, K->pt), 0), im, "");
      cf_st(k, K->pt, buf, j, z);
    }
  }
  gen_loop_close(k, &l);
}

/* Scatter the transformed line res to dst at idx. */
static void cf_scatter(GenKern *k, CpuCg *cg, const CfKernel *K, const CfStage *st,
                       LLVMValueRef dst, LLVMValueRef *idx, LLVMValueRef res) {
  int64_t nout = st->out_mode == 1 ? st->n / 2 + 1 : st->n;
  GenLoop l;
  LLVMValueRef j = gen_loop_open(k, &l, gen_i64(k, 0), gen_i64(k, nout));
  idx[st->axis] = j;
  CfC z = cf_ld(k, K->pt, res, j);
  if (st->scale != 1) z = cf_scale(k, z, LLVMConstReal(cf_ty(cg, K->pt), st->scale));
  LLVMValueRef v = st->out_mode == 2 ? z.re : gen_complex(k, st->ds->dt, z.re, z.im);
  gen_store_elem(k, dst, st->ds, idx, v);
  gen_loop_close(k, &l);
}

/* The task of stage st, its lines split into chunks. */
static bool cf_stage_task(CpuCg *cg, const CfKernel *K, const CfStage *st, int64_t chunks) {
  GenKern *k = cpu_kern_begin(cg, K->in);
  LLVMBuilderRef B = k->B;
  int64_t lines = hlo_shape_elems(st->ds) / st->ds->dims[st->axis];
  int64_t csize = (lines + chunks - 1) / chunks;
  LLVMValueRef scratch = cpu_slot(k, (CpuSlot){CPU_SLOT_TEMP, NULL, NULL, cg->temp_base});
  LLVMValueRef off =
      LLVMBuildNSWAdd(B, LLVMBuildNSWMul(B, cpu_kern(k)->chunk, gen_i64(k, K->slice), ""),
                      gen_i64(k, K->copy_bytes), "");
  LLVMValueRef a = LLVMBuildInBoundsGEP2(B, cg->g.i8, scratch, &off, 1, "");
  LLVMValueRef wo = gen_i64(k, K->cap * 2);
  LLVMValueRef w = LLVMBuildInBoundsGEP2(B, cf_ty(cg, K->pt), a, &wo, 1, "");
  LLVMValueRef src = st->src_in ? NULL : cf_buf(k, cg, K, st->src_kind);
  LLVMValueRef dst = cf_buf(k, cg, K, st->dst_kind);
  CfMade *line = cf_line_fn(cg, K->pt, st->n, st->sign);
  LLVMValueRef lo = LLVMBuildNSWMul(B, cpu_kern(k)->chunk, gen_i64(k, csize), "");
  LLVMValueRef hi = gen_smin(k, LLVMBuildNSWAdd(B, lo, gen_i64(k, csize), ""), gen_i64(k, lines));
  GenLoop ll;
  LLVMValueRef l = gen_loop_open(k, &ll, lo, hi);
  LLVMValueRef idx[HLO_MAX_RANK];
  cf_line_index(k, st->ds, st->axis, l, idx);
  cf_gather(k, cg, K, st, src, idx, a);
  LLVMValueRef args[2] = {a, w};
  LLVMValueRef res = LLVMBuildCall2(B, line->ty, line->v, args, 2, "");
  cf_scatter(k, cg, K, st, dst, idx, res);
  gen_loop_close(k, &ll);
  return cpu_kern_end(k, chunks);
}

bool cpu_fft_kernel(CpuCg *cg, HInstr *in) {
  const Shape *xs = &in->ops[0]->shape, *os = &in->shape;
  int R = os->rank, r = in->fft_length.n;
  FftType ft = in->fft_type;
  DType ct = ft == FFT_IRFFT ? xs->dt : os->dt;
  if (r < 1 || r > 3 || r > R || !hlo_dtype_is_complex(ct)) {
    hlo_err_at(cg->g.err, in, "CPU target: fft: %s over %d dims of %s is not supported",
               hlo_fft_type_name(ft), r, hlo_dtype_name(xs->dt));
    return false;
  }
  CfKernel K = {in, hlo_dtype_component(ct), 0, 0, 0};
  int sign = ft == FFT_FFT || ft == FFT_RFFT ? -1 : +1;
  double N = 1;
  for (int i = 0; i < r; i++)
    N *= (double)in->fft_length.v[i];
  double scale = sign > 0 ? 1.0 / N : 1.0;
  CfStage st[3];
  int ns = 0;
  for (int i = 0; i < r; i++) {
    /* IRFFT: the outer axes first (outermost first), the last one last; else the last first */
    int axis = ft == FFT_IRFFT ? R - r + i : R - 1 - i;
    CfStage *s = &st[ns++];
    *s = (CfStage){axis, in->fft_length.v[axis - (R - r)], sign, NULL, 0, os, os, 0, 0, 0, 1};
    if (ft == FFT_IRFFT) {
      bool last = axis == R - 1;
      s->ss = xs, s->src_in = i == 0 ? in->ops[0] : NULL, s->src_kind = 1;
      s->ds = last ? os : xs, s->dst_kind = last ? 0 : 1;
      s->in_mode = last ? 2 : 0, s->out_mode = last ? 2 : 0;
    } else if (i == 0) {
      s->src_in = in->ops[0], s->ss = xs;
      s->in_mode = ft == FFT_RFFT, s->out_mode = ft == FFT_RFFT;
    }
    if (i == r - 1) s->scale = scale;
  }
  int64_t es = (int64_t)hlo_dtype_size(K.pt), total = hlo_shape_elems(os);
  for (int i = 0; i < ns; i++)
    if (cf_work(st[i].n) > K.cap) K.cap = cf_work(st[i].n);
  if (total == 0 || hlo_shape_elems(xs) == 0) return true;
  if (ft == FFT_IRFFT && r > 1) K.copy_bytes = memplan_align(hlo_shape_elems(xs) * 2 * es);
  K.slice = memplan_align(K.cap * 4 * es);
  int64_t min = cg->o->par_min_elems > 0 ? cg->o->par_min_elems : 32768;
  for (int i = 0; i < ns; i++) {
    int64_t lines = hlo_shape_elems(st[i].ds) / st[i].ds->dims[st[i].axis], P = 1;
    if (total * 8 >= min && lines > 1) {
      P = lines < 64 ? lines : 64;
      while (P > 1 && P * K.slice > ((int64_t)64 << 20))
        P /= 2;
    }
    int64_t csize = (lines + P - 1) / P;
    P = (lines + csize - 1) / csize;
    int64_t need = K.copy_bytes + P * K.slice;
    if (need > cg->extra_temp) cg->extra_temp = need;
    if (!cf_stage_task(cg, &K, &st[i], P)) return false;
  }
  return true;
}
