/* targets/cpu/gemm/few_dp.c: the few-rows kernel's products on depth-group instructions.
 *
 * A decode step's bf16 or s8 product of few rows would otherwise widen every element of B to
 * f32 for FMAs (bf16), or take the blocked GEMM with B widened into f32 panels, four times its
 * bytes (s8, whose f32 sums few.c cannot keep exact). Where the CPU has a fast VDPBF16PS (the
 * CPUs of GmCfg.dpbf16) or VPDPBUSD (AVX512-VNNI: GmCfg.dpbusd, AMX CPUs included), the
 * few-rows kernel keeps its blocking (few.c) and these functions compute its blocks on them,
 * B still read once, in place, at its own size. Streaming form (B's columns contiguous): each
 * step takes 2 (bf16) or 4 (s8) rows of B; for every 16 columns their elements are loaded a
 * row at a time and shuffled into depth groups (column c's group at 32-bit lane c, so the
 * accumulators keep C's column order and C's tile is stored as it is), and each row of A's
 * group of the same depths is broadcast into one instruction per vector. Dot form (B's rows
 * contiguous): a vector of A's row and of B's column, both along K, go into one instruction
 * as they are. VPDPBUSD's first source is unsigned: B's bytes are biased to u8 (xor 0x80) and
 * each row's sums start from -128 times its row of A's sum, so the s32 result is exact at any
 * depth (|sum| < 2^31 while K < 2^17). */
#include "gemm_impl.h"

bool gm_few_dp(const GmCfg *c, const GmProb *p) {
  bool isa = (p->et == GE_BF16 && c->dpbf16) || (p->et == GE_S8 && c->dpbusd);
  return isa && c->vw == 16 && p->acs == 1 && !p->conv;
}

/* The intrinsic of type e and the vector types around it: its accumulator (16 f32 or s32)
 * and its operands (32 bf16, or 16 words of 4 bytes). */
typedef struct GdOp {
  LLVMValueRef fn;
  LLVMTypeRef ft, acc, opnd;
  bool int8;
} GdOp;

static GdOp gd_op(GenKern *k, GmElt e) {
  CpuCg *cg = cpu_cg(k->cg);
  GdOp o = {.int8 = e == GE_S8};
  const char *nm = o.int8 ? "llvm.x86.avx512.vpdpbusd.512" : "llvm.x86.avx512bf16.dpbf16ps.512";
  unsigned id = LLVMLookupIntrinsicID(nm, strlen(nm));
  HLO_ASSERT(id != 0);
  o.fn = LLVMGetIntrinsicDeclaration(cg->g.M, id, NULL, 0);
  o.ft = LLVMIntrinsicGetType(cg->g.C, id, NULL, 0);
  o.acc = LLVMVectorType(o.int8 ? cg->g.i32 : cg->g.f32, 16);
  o.opnd =
      o.int8 ? LLVMVectorType(cg->g.i32, 16) : LLVMVectorType(LLVMBFloatTypeInContext(cg->g.C), 32);
  return o;
}

/* acc + the depth-group products of b (B's side: biased u8 for s8) and a (A's: s8). */
static LLVMValueRef gd_call(GenKern *k, const GdOp *o, LLVMValueRef acc, LLVMValueRef b,
                            LLVMValueRef a) {
  LLVMValueRef args[3] = {acc, LLVMBuildBitCast(k->B, b, o->opnd, ""),
                          LLVMBuildBitCast(k->B, a, o->opnd, "")};
  return LLVMBuildCall2(k->B, o->ft, o->fn, args, 3, "");
}

/* n integer elements of `bits` bits at p (mask: those of its first lanes, the rest zero). */
static LLVMValueRef gd_load(GenKern *k, int bits, int n, LLVMValueRef p, LLVMValueRef mask) {
  LLVMTypeRef vt =
      LLVMVectorType(LLVMIntTypeInContext(cpu_cg(k->cg)->g.C, (unsigned)bits), (unsigned)n);
  return mask ? cpu_masked_load(k, vt, p, mask) : gload(k, vt, p, (unsigned)bits / 8);
}

/* s8 bytes biased to u8 (+128, mod 256). */
static LLVMValueRef gd_bias(GenKern *k, LLVMValueRef v) {
  CpuCg *cg = cpu_cg(k->cg);
  return LLVMBuildXor(k->B, v, cpu_splat(k, LLVMConstInt(cg->g.i8, 0x80, 0), 64), "");
}

/* A shuffle of x and y (of one type) by the constant indices idx[0..n). */
static LLVMValueRef gd_shuffle(GenKern *k, LLVMValueRef x, LLVMValueRef y, const int *idx, int n) {
  LLVMValueRef m[64];
  for (int i = 0; i < n; i++)
    m[i] = LLVMConstInt(cpu_cg(k->cg)->g.i32, (unsigned)idx[i], 0);
  return LLVMBuildShuffleVector(k->B, x, y, LLVMConstVector(m, (unsigned)n), "");
}

/* The g rows of B from p on (rows past `rows` zero), n elements of each (mask: of its first
 * lanes), into r. */
static void gd_rows(GenKern *k, int g, LLVMValueRef p, int64_t brs, int rows, LLVMValueRef mask,
                    int n, LLVMValueRef r[4]) {
  int bits = g == 2 ? 16 : 8;
  LLVMTypeRef rt =
      LLVMVectorType(LLVMIntTypeInContext(cpu_cg(k->cg)->g.C, (unsigned)bits), (unsigned)n);
  for (int i = 0; i < g; i++)
    r[i] = i < rows ? gd_load(k, bits, n, gbyte(k, p, gi(k, i * brs * bits / 8)), mask)
                    : LLVMConstNull(rt);
}

/* Columns [0, 16) at p of the `g` rows of B from p on (g = 2 bf16 or 4 s8; rows past `rows`
 * zero), as depth groups: column c's elements of the rows at 32-bit lane c. */
static LLVMValueRef gd_groups(GenKern *k, int g, LLVMValueRef p, int64_t brs, int rows,
                              LLVMValueRef mask) {
  int idx[64];
  LLVMValueRef r[4];
  gd_rows(k, g, p, brs, rows, mask, 16, r);
  if (g == 4) { /* rows 0 | 1 and 2 | 3 side by side, then as for pairs */
    for (int i = 0; i < 32; i++)
      idx[i] = i;
    r[0] = gd_shuffle(k, r[0], r[1], idx, 32);
    r[1] = gd_shuffle(k, r[2], r[3], idx, 32);
  }
  /* lane c's group: the rows' column c, at 16 * row + c of the two sources side by side */
  for (int c = 0; c < 16; c++)
    for (int i = 0; i < g; i++)
      idx[g * c + i] = 16 * i + c;
  LLVMValueRef v = gd_shuffle(k, r[0], r[1], idx, 16 * g);
  return g == 4 ? gd_bias(k, v) : v;
}

/* Columns [0, 32) at p of the g rows as gd_groups' two vectors (columns 0-15 and 16-31), all
 * whole: rows loaded 32 columns at a time, so each vector costs one two-source shuffle (two
 * for s8, whose row pairs are interleaved first) where gd_groups' loads need three or more. */
static void gd_groups2(GenKern *k, int g, LLVMValueRef p, int64_t brs, int rows,
                       LLVMValueRef out[2]) {
  CpuCg *cg = cpu_cg(k->cg);
  int idx[64];
  LLVMValueRef r[4];
  gd_rows(k, g, p, brs, rows, NULL, 32, r);
  if (g == 4) { /* rows 0, 1 (and 2, 3) interleaved: column c's two bytes at word c */
    for (int c = 0; c < 32; c++)
      for (int i = 0; i < 2; i++)
        idx[2 * c + i] = 32 * i + c;
    LLVMTypeRef wt = LLVMVectorType(LLVMInt16TypeInContext(cg->g.C), 32);
    r[0] = LLVMBuildBitCast(k->B, gd_shuffle(k, r[0], r[1], idx, 64), wt, "");
    r[1] = LLVMBuildBitCast(k->B, gd_shuffle(k, r[2], r[3], idx, 64), wt, "");
  }
  for (int h = 0; h < 2; h++) {
    for (int c = 0; c < 16; c++)
      for (int i = 0; i < 2; i++)
        idx[2 * c + i] = 32 * i + 16 * h + c;
    out[h] = gd_shuffle(k, r[0], r[1], idx, 32);
    if (g == 4)
      out[h] = gd_bias(k, LLVMBuildBitCast(k->B, out[h], LLVMVectorType(cg->g.i8, 64), ""));
  }
}

/* A's group of depths [kv, kv + g) of the row at ap as one 32-bit word (depths from `rows`
 * on zero), broadcast to the 16 lanes. */
static LLVMValueRef gd_a_group(GenKern *k, GmElt e, int g, LLVMValueRef ap, LLVMValueRef kv,
                               int rows) {
  CpuCg *cg = cpu_cg(k->cg);
  LLVMValueRef p = gep_e(k, e, ap, kv), w;
  if (rows == g) {
    w = gload(k, cg->g.i32, p, g == 2 ? 2 : 1);
  } else {
    int bits = 32 / g;
    LLVMTypeRef it = LLVMIntTypeInContext(cg->g.C, (unsigned)bits);
    w = LLVMConstNull(cg->g.i32);
    for (int i = 0; i < rows; i++) {
      LLVMValueRef x =
          LLVMBuildZExt(k->B, gload(k, it, gep_e(k, e, p, gi(k, i)), 1), cg->g.i32, "");
      w = LLVMBuildOr(k->B, w, LLVMBuildShl(k->B, x, LLVMConstInt(cg->g.i32, i * bits, 0), ""), "");
    }
  }
  return cpu_splat(k, w, 16);
}

/* A loop over kv = k0, k0 + step, ... while kv < end, carrying the R x n accumulators acc in
 * phis: gd_loop_open leaves the builder in its body, acc its phis, and returns kv;
 * gd_loop_close takes acc as the body leaves them and moves the builder past the loop, acc
 * the values the loop ends with. Not vectorized by LLVM (its body is vectors already). */
typedef struct GdLoop {
  GPhiLoop pl;
  LLVMValueRef kv, ph[16][8];
  int R, n;
} GdLoop;

static LLVMValueRef gd_loop_open(GenKern *k, GdLoop *l, const char *const nm[3], LLVMValueRef k0,
                                 LLVMValueRef end, LLVMValueRef acc[16][8], int R, int n) {
  LLVMBuilderRef B = k->B;
  l->pl = gphi_open(k, nm[0], nm[1], nm[2]);
  l->R = R;
  l->n = n;
  l->kv = LLVMBuildPhi(B, cpu_cg(k->cg)->g.i64, "k");
  LLVMAddIncoming(l->kv, &k0, &l->pl.pre, 1);
  for (int r = 0; r < R; r++)
    for (int j = 0; j < n; j++) {
      l->ph[r][j] = LLVMBuildPhi(B, LLVMTypeOf(acc[r][j]), "");
      LLVMAddIncoming(l->ph[r][j], &acc[r][j], &l->pl.pre, 1);
      acc[r][j] = l->ph[r][j];
    }
  LLVMBuildCondBr(B, gslt(k, l->kv, end), l->pl.body, l->pl.done);
  LLVMPositionBuilderAtEnd(B, l->pl.body);
  return l->kv;
}

static void gd_loop_close(GenKern *k, GdLoop *l, int64_t step, LLVMValueRef acc[16][8]) {
  LLVMBuilderRef B = k->B;
  LLVMValueRef kn = gadd(k, l->kv, gi(k, step));
  LLVMBasicBlockRef latch = LLVMGetInsertBlock(B);
  LLVMAddIncoming(l->kv, &kn, &latch, 1);
  for (int r = 0; r < l->R; r++)
    for (int j = 0; j < l->n; j++)
      LLVMAddIncoming(l->ph[r][j], &acc[r][j], &latch, 1);
  gm_novec(k, LLVMBuildBr(B, l->pl.hdr));
  LLVMPositionBuilderAtEnd(B, l->pl.done);
  for (int r = 0; r < l->R; r++)
    for (int j = 0; j < l->n; j++)
      acc[r][j] = l->ph[r][j];
}

/* One step of the streaming form: the g-row group of B at brow into the R x V accumulators
 * (vectors j < nv whole, vector nv under mask when mask), A's groups at depth kv. */
static void gd_step(GenKern *k, const GdOp *o, const GmProb *p, LLVMValueRef A, LLVMValueRef brow,
                    LLVMValueRef kv, int R, int nv, LLVMValueRef mask, int rows,
                    LLVMValueRef acc[16][8]) {
  int g = o->int8 ? 4 : 2, V = nv + (mask != NULL), esz = o->int8 ? 1 : 2;
  LLVMValueRef bv[4];
  for (int j = 0; j < V; j++) {
    LLVMValueRef bp = gbyte(k, brow, gi(k, 16 * j * esz));
    if (j + 1 < nv)
      gd_groups2(k, g, bp, p->brs, rows, &bv[j++]);
    else
      bv[j] = gd_groups(k, g, bp, p->brs, rows, j < nv ? NULL : mask);
  }
  for (int r = 0; r < R; r++) {
    LLVMValueRef av = gd_a_group(k, p->et, g, gep_e(k, p->et, A, gi(k, r * p->ars)), kv, rows);
    for (int j = 0; j < V; j++)
      acc[r][j] = gd_call(k, o, acc[r][j], bv[j], av);
  }
}

void gm_small_group_dp(GenKern *k, LLVMValueRef A, LLVMValueRef Bp, LLVMValueRef Cp,
                       const GmProb *p, int R, int nv, LLVMValueRef mask, LLVMValueRef k0,
                       LLVMValueRef k1, const LLVMValueRef *corr) {
  LLVMBuilderRef B = k->B;
  GdOp o = gd_op(k, p->et);
  int V = nv + (mask != NULL), g = o.int8 ? 4 : 2, rem = (int)(p->K % g);
  /* the tile: C's, or (the first K block) zero, or the rows' corrections of a biased B */
  LLVMValueRef first = LLVMBuildICmp(B, LLVMIntEQ, k0, gi(k, 0), "");
  LLVMValueRef acc[16][8], cq[16][4];
  for (int r = 0; r < R; r++)
    for (int j = 0; j < V; j++) {
      cq[r][j] = gfp(k, Cp, gi(k, r * p->ldc + 16 * j));
      LLVMValueRef init = corr ? cpu_splat(k, corr[r], 16) : LLVMConstNull(o.acc);
      LLVMValueRef old =
          j < nv ? gload(k, o.acc, cq[r][j], 4) : cpu_masked_load(k, o.acc, cq[r][j], mask);
      acc[r][j] = LLVMBuildSelect(B, first, init, old, "");
    }
  /* whole groups of rows over [k0, kend) */
  LLVMValueRef kend = gsub(k, k1, LLVMBuildSRem(B, gsub(k, k1, k0), gi(k, g), ""));
  GdLoop l;
  static const char *const nm[3] = {"fdq", "fdqb", "fdqd"};
  LLVMValueRef kv = gd_loop_open(k, &l, nm, k0, kend, acc, R, V);
  gd_step(k, &o, p, A, gep_e(k, p->et, Bp, gmul(k, kv, gi(k, p->brs))), kv, R, nv, mask, g, acc);
  gd_loop_close(k, &l, g, acc);
  /* the last block of a depth that is not a multiple of g: its last rem rows */
  if (rem) {
    LLVMValueRef before[16][8];
    memcpy(before, acc, sizeof before);
    LLVMBasicBlockRef from = LLVMGetInsertBlock(B);
    GIf f;
    gif_open(k, &f, LLVMBuildICmp(B, LLVMIntSLT, kend, k1, ""), false);
    gd_step(k, &o, p, A, gep_e(k, p->et, Bp, gmul(k, kend, gi(k, p->brs))), kend, R, nv, mask, rem,
            acc);
    LLVMBasicBlockRef then = LLVMGetInsertBlock(B);
    gif_close(k, &f);
    for (int r = 0; r < R; r++)
      for (int j = 0; j < V; j++) {
        LLVMValueRef phi = LLVMBuildPhi(B, o.acc, "");
        LLVMValueRef vals[2] = {acc[r][j], before[r][j]};
        LLVMBasicBlockRef bbs[2] = {then, from};
        LLVMAddIncoming(phi, vals, bbs, 2);
        acc[r][j] = phi;
      }
  }
  for (int r = 0; r < R; r++)
    for (int j = 0; j < V; j++) {
      if (j < nv)
        gstore(k, acc[r][j], cq[r][j], 4);
      else
        cpu_masked_store(k, acc[r][j], cq[r][j], mask);
    }
}

/* One step of the dot form at depth kv: A's R vectors along K, then each of the nn columns'
 * against them (mask: the lanes of a last partial vector). */
static void gd_dots_step(GenKern *k, const GdOp *o, const GmProb *p, LLVMValueRef A,
                         LLVMValueRef Bp, LLVMValueRef kv, LLVMValueRef mask, int R, int nn,
                         LLVMValueRef acc[16][8]) {
  int lanes = o->int8 ? 64 : 32, bits = o->int8 ? 8 : 16;
  LLVMValueRef av[16];
  for (int r = 0; r < R; r++)
    av[r] = gd_load(k, bits, lanes, gep_e(k, p->et, A, gadd(k, gi(k, r * p->ars), kv)), mask);
  for (int j = 0; j < nn; j++) {
    LLVMValueRef bv =
        gd_load(k, bits, lanes, gep_e(k, p->et, Bp, gadd(k, gi(k, j * p->bcs), kv)), mask);
    if (o->int8) bv = gd_bias(k, bv);
    for (int r = 0; r < R; r++)
      acc[r][j] = gd_call(k, o, acc[r][j], bv, av[r]);
  }
}

void gm_small_dots_dp(GenKern *k, LLVMValueRef A, LLVMValueRef Bp, LLVMValueRef Cp, const GmProb *p,
                      int R, int nn, const LLVMValueRef *corr) {
  CpuCg *cg = cpu_cg(k->cg);
  LLVMBuilderRef B = k->B;
  GdOp o = gd_op(k, p->et);
  int lanes = o.int8 ? 64 : 32;
  int64_t kv_end = p->K / lanes * lanes, rem = p->K % lanes;
  LLVMValueRef acc[16][8], zero = LLVMConstNull(o.acc);
  for (int r = 0; r < R; r++)
    for (int j = 0; j < nn; j++)
      acc[r][j] = zero;
  if (kv_end > 0) {
    GdLoop l;
    static const char *const nm[3] = {"fdd", "fddb", "fddd"};
    LLVMValueRef kv = gd_loop_open(k, &l, nm, gi(k, 0), gi(k, kv_end), acc, R, nn);
    gd_dots_step(k, &o, p, A, Bp, kv, NULL, R, nn, acc);
    gd_loop_close(k, &l, lanes, acc);
  }
  if (rem)
    gd_dots_step(k, &o, p, A, Bp, gi(k, kv_end), cpu_lane_mask(k, lanes, (int)rem), R, nn, acc);
  const char *rn = o.int8 ? "llvm.vector.reduce.add" : "llvm.vector.reduce.fadd";
  LLVMValueRef red =
      LLVMGetIntrinsicDeclaration(cg->g.M, LLVMLookupIntrinsicID(rn, strlen(rn)), &o.acc, 1);
  LLVMTypeRef rty = LLVMGlobalGetValueType(red);
  for (int r = 0; r < R; r++)
    for (int j = 0; j < nn; j++) {
      LLVMValueRef sum;
      if (o.int8) {
        sum = LLVMBuildAdd(B, LLVMBuildCall2(B, rty, red, &acc[r][j], 1, ""), corr[r], "");
      } else {
        LLVMValueRef args[2] = {LLVMConstReal(cg->g.f32, -0.0), acc[r][j]};
        sum = LLVMBuildCall2(B, rty, red, args, 2, "");
        LLVMSetFastMathFlags(sum, LLVMFastMathAllowReassoc);
      }
      gstore(k, sum, gfp(k, Cp, gi(k, r * p->ldc + j)), 4);
    }
}

void gm_s8_corrections(GenKern *k, LLVMValueRef A, const GmProb *p, int R, LLVMValueRef *corr) {
  CpuCg *cg = cpu_cg(k->cg);
  LLVMBuilderRef B = k->B;
  GdOp o = gd_op(k, GE_S8);
  LLVMValueRef ones = cpu_splat(k, LLVMConstInt(cg->g.i8, 1, 0), 64);
  int64_t kv_end = p->K / 64 * 64, rem = p->K % 64;
  LLVMValueRef red = LLVMGetIntrinsicDeclaration(
      cg->g.M, LLVMLookupIntrinsicID("llvm.vector.reduce.add", 22), &o.acc, 1);
  for (int r = 0; r < R; r++) {
    LLVMValueRef ap = gbyte(k, A, gi(k, r * p->ars));
    LLVMValueRef sum = gvar(k, LLVMConstNull(o.acc));
    GenLoop l;
    LLVMValueRef kv = gloop(k, &l, gi(k, 0), gi(k, kv_end), 64);
    LLVMValueRef s = gd_call(k, &o, LLVMBuildLoad2(B, o.acc, sum, ""), ones,
                             gd_load(k, 8, 64, gbyte(k, ap, kv), NULL));
    LLVMBuildStore(B, s, sum);
    gm_close(k, &l);
    LLVMValueRef v = LLVMBuildLoad2(B, o.acc, sum, "");
    if (rem)
      v = gd_call(k, &o, v, ones,
                  gd_load(k, 8, 64, gbyte(k, ap, gi(k, kv_end)), cpu_lane_mask(k, 64, (int)rem)));
    LLVMValueRef tot = LLVMBuildCall2(B, LLVMGlobalGetValueType(red), red, &v, 1, "");
    corr[r] = LLVMBuildMul(B, tot, LLVMConstInt(cg->g.i32, (unsigned long long)-128, 1), "");
  }
}
