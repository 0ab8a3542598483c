/* targets/cpu/gemm/amx.c: bf16 products on AMX tiles.
 *
 * Where the target CPU has AMX-BF16 (Sapphire Rapids and later), dots of bf16 operands call
 * this function instead of gm_function's bf16 one: the same parameters and result (C = A * B
 * in f32, row-major C), but the operands stay bf16 and the products run on TDPBF16PS, which
 * does a 16 x 16 x 32 block of multiply-adds (f32 sums of bf16 products) per instruction, 16
 * times what AVX-512's FMAs do in the same cycles. A's rows are packed into 16 x 32 tiles
 * (depth contiguous, 64-byte rows) and B into VNNI tiles (each 64-byte row holds 16 columns
 * of a pair of depths; from a B [N, K] through a register transpose), both padded with zeros
 * to whole tiles; C is read and written by tile
 * loads and stores in place where a 32 x 32 block lies inside it, through a stack tile at
 * the edges. A is read in place by the tile loads where its rows are whole tiles. Loops: row
 * blocks of GA_MC (A packed once, all of K, unless read in place) > column blocks of GA_NC >
 * K blocks of GmCfg.amx_kc (1024: B's block of 1 MiB, packed into L2, its rows prefetched
 * ahead of the packing) > 32-row panels (A's stay in L1) > 32-column panels (B's tiles
 * loaded with the hint that they stream past L1), each a 2 x 2 grid of accumulator tiles
 * over the K block. The block sizes and hints were measured side by side on the device
 * host's Xeon (docs/log/2026-12-01-cpu-amx.md).
 * Linux grants a process the AMX register state only on request (arch_prctl
 * ARCH_REQ_XCOMP_PERM): the function asks once per process and, where it is refused, calls
 * the widened-FMA bf16 function instead, as it does for K = 0. */
#include "gemm_impl.h"

enum {
  GA_MC = 256,  /* rows of A packed at once */
  GA_NC = 512,  /* columns of a block of B */
  GA_TB = 1024, /* bytes of a tile */
  GA_PF = 16    /* rows of B prefetched ahead of its packing */
};

int64_t gm_amx_pack_bytes(const GmCfg *c, int64_t M, int64_t N, int64_t K) {
  int64_t mr = gm_roundup(gm_min(GA_MC, M < 1 ? 1 : M), 32), kr = gm_roundup(K < 1 ? 1 : K, 32);
  int64_t nr = gm_roundup(gm_min(GA_NC, N < 1 ? 1 : N), 32);
  return memplan_align(mr * kr * 2 + gm_min(c->amx_kc, kr) * nr * 2);
}

/* ------------------------------------------------------------------ the tile instructions */

static void ga_intr(CpuKern *k, const char *name, LLVMValueRef *args, unsigned n) {
  unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
  HLO_ASSERT(id != 0);
  LLVMValueRef f = LLVMGetIntrinsicDeclaration(k->cg->M, id, NULL, 0);
  LLVMBuildCall2(k->B, LLVMIntrinsicGetType(k->cg->C, id, NULL, 0), f, args, n, "");
}
static LLVMValueRef ga_t(CpuKern *k, int t) { return LLVMConstInt(k->cg->i8, (unsigned)t, 0); }
static void ga_load(CpuKern *k, int t, LLVMValueRef p, LLVMValueRef stride) {
  ga_intr(k, "llvm.x86.tileloadd64", (LLVMValueRef[]){ga_t(k, t), p, stride}, 3);
}
/* (with the hint that the data is not reused soon: it streams past L1) */
static void ga_load_t1(CpuKern *k, int t, LLVMValueRef p, LLVMValueRef stride) {
  ga_intr(k, "llvm.x86.tileloaddt164", (LLVMValueRef[]){ga_t(k, t), p, stride}, 3);
}
static void ga_store(CpuKern *k, int t, LLVMValueRef p, LLVMValueRef stride) {
  ga_intr(k, "llvm.x86.tilestored64", (LLVMValueRef[]){ga_t(k, t), p, stride}, 3);
}
static void ga_dp(CpuKern *k, int c, int a, int b) {
  ga_intr(k, "llvm.x86.tdpbf16ps", (LLVMValueRef[]){ga_t(k, c), ga_t(k, a), ga_t(k, b)}, 3);
}
/* &p[off] in bytes */
static LLVMValueRef ga_byte(CpuKern *k, LLVMValueRef p, LLVMValueRef off) {
  return LLVMBuildInBoundsGEP2(k->B, k->cg->i8, p, &off, 1, "");
}
static LLVMValueRef ga_and(CpuKern *k, LLVMValueRef a, LLVMValueRef b) {
  return LLVMBuildAnd(k->B, a, b, "");
}
static LLVMValueRef ga_sle(CpuKern *k, LLVMValueRef a, LLVMValueRef b) {
  return LLVMBuildICmp(k->B, LLVMIntSLE, a, b, "");
}

/* v rounded up to whole tiles' 32 rows, columns or depths. */
static LLVMValueRef ga_round32(CpuKern *k, LLVMValueRef v) {
  return LLVMBuildAnd(k->B, gadd(k, v, gi(k, 31)), gi(k, ~(int64_t)31), "");
}

/* The tile configuration (palette 1; tiles 0-7 of 16 rows of 64 bytes), loaded. */
static void ga_config(CpuKern *k) {
  CpuCg *cg = k->cg;
  LLVMValueRef cfg = cpu_alloca(k, LLVMArrayType2(cg->i8, 64));
  LLVMSetAlignment(cfg, 64);
  LLVMBuildMemSet(k->B, cfg, LLVMConstInt(cg->i8, 0, 0), gi(k, 64), 64);
  LLVMBuildStore(k->B, LLVMConstInt(cg->i8, 1, 0), cfg);
  for (int t = 0; t < 8; t++) {
    LLVMBuildStore(k->B, LLVMConstInt(cg->i16, 64, 0), ga_byte(k, cfg, gi(k, 16 + 2 * t)));
    LLVMBuildStore(k->B, LLVMConstInt(cg->i8, 16, 0), ga_byte(k, cfg, gi(k, 48 + t)));
  }
  ga_intr(k, "llvm.x86.ldtilecfg", &cfg, 1);
}

/* The state word g read (v NULL) or written (v), atomically (monotonic). */
static LLVMValueRef ga_state(CpuKern *k, LLVMValueRef g, LLVMValueRef v) {
  LLVMValueRef x = v ? LLVMBuildStore(k->B, v, g) : LLVMBuildLoad2(k->B, k->cg->i32, g, "");
  LLVMSetOrdering(x, LLVMAtomicOrderingMonotonic);
  LLVMSetAlignment(x, 4);
  return x;
}

/* Whether this process may use the tiles: asked of the kernel once (arch_prctl(
 * ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) by a raw system call, so the object needs no libc
 * wrapper) and remembered in a module global (0 not asked, 1 granted, 2 refused). */
static LLVMValueRef ga_granted(CpuKern *k) {
  CpuCg *cg = k->cg;
  char name[512];
  snprintf(name, sizeof name, "%s_amx_state", gm_prefix(cg));
  LLVMValueRef g = LLVMGetNamedGlobal(cg->M, name);
  if (!g) {
    g = LLVMAddGlobal(cg->M, cg->i32, name);
    LLVMSetLinkage(g, LLVMInternalLinkage);
    LLVMSetInitializer(g, LLVMConstInt(cg->i32, 0, 0));
  }
  /* (threads may race here: the request is idempotent, the state word atomic) */
  LLVMValueRef st = ga_state(k, g, NULL);
  GIf ask;
  gif_open(k, &ask, LLVMBuildICmp(k->B, LLVMIntEQ, st, LLVMConstInt(cg->i32, 0, 0), ""), false);
  {
    LLVMTypeRef at[3] = {cg->i64, cg->i64, cg->i64};
    LLVMTypeRef ft = LLVMFunctionType(cg->i64, at, 3, 0);
    static const char asm_s[] = "syscall", cons[] = "={ax},{ax},{di},{si},~{rcx},~{r11},~{memory}";
    LLVMValueRef sc = LLVMGetInlineAsm(ft, asm_s, sizeof asm_s - 1, cons, sizeof cons - 1, 1, 0,
                                       LLVMInlineAsmDialectATT, 0);
    /* SYS_arch_prctl 158, ARCH_REQ_XCOMP_PERM 0x1023, XFEATURE_XTILEDATA 18 */
    LLVMValueRef r =
        LLVMBuildCall2(k->B, ft, sc, (LLVMValueRef[]){gi(k, 158), gi(k, 0x1023), gi(k, 18)}, 3, "");
    LLVMValueRef ok = LLVMBuildICmp(k->B, LLVMIntEQ, r, gi(k, 0), "");
    ga_state(
        k, g,
        LLVMBuildSelect(k->B, ok, LLVMConstInt(cg->i32, 1, 0), LLVMConstInt(cg->i32, 2, 0), ""));
  }
  gif_close(k, &ask);
  st = ga_state(k, g, NULL);
  return LLVMBuildICmp(k->B, LLVMIntEQ, st, LLVMConstInt(cg->i32, 1, 0), "");
}

/* ------------------------------------------------------------------ packing */

/* An edge element: src[i * rs + j * cs] (i, j clamped inside by the caller) stored at dst
 * where ok holds, else zero. */
static void ga_elem(CpuKern *k, LLVMValueRef src, LLVMValueRef i, LLVMValueRef rs, LLVMValueRef j,
                    LLVMValueRef cs, LLVMValueRef ok, LLVMValueRef dst) {
  LLVMValueRef v =
      gload(k, k->cg->i16, gep_e(k, GE_BF16, src, gadd(k, gmul(k, i, rs), gmul(k, j, cs))), 2);
  gstore(k, LLVMBuildSelect(k->B, ok, v, LLVMConstInt(k->cg->i16, 0, 0), ""), dst, 2);
}

/* A's rows [ic, ic + mc), all of its depth, into tiles: tile (t, q) (rows 16 t.., depths
 * 32 q..) at ap + (t * kq + q) * GA_TB; zeros past mc rows (up to mcr) and past K. */
static void ga_pack_a(CpuKern *k, const LLVMValueRef *P, LLVMValueRef ap, LLVMValueRef ic,
                      LLVMValueRef mc, LLVMValueRef mcr, LLVMValueRef kq) {
  CpuCg *cg = k->cg;
  CpuLoop lr, lq, lj;
  LLVMValueRef r = gloop(k, &lr, gi(k, 0), mcr, 1);
  LLVMValueRef q = gloop(k, &lq, gi(k, 0), kq, 1);
  LLVMValueRef t = LLVMBuildSDiv(k->B, r, gi(k, 16), ""),
               rr = LLVMBuildSRem(k->B, r, gi(k, 16), "");
  LLVMValueRef dst =
      gep_e(k, GE_BF16, ap,
            gadd(k, gmul(k, gadd(k, gmul(k, t, kq), q), gi(k, GA_TB / 2)), gmul(k, rr, gi(k, 32))));
  LLVMValueRef k0 = gmul(k, q, gi(k, 32)), row = gslt(k, r, mc);
  LLVMValueRef src = gep_e(k, GE_BF16, P[GP_A], gmul(k, gadd(k, ic, r), P[GP_ARS]));
  LLVMValueRef full = ga_and(k, ga_and(k, row, ga_sle(k, gadd(k, k0, gi(k, 32)), P[GP_K])),
                             LLVMBuildICmp(k->B, LLVMIntEQ, P[GP_ACS], gi(k, 1), ""));
  GIf f;
  gif_open(k, &f, full, true);
  LLVMTypeRef v32 = LLVMVectorType(cg->i16, 32);
  gstore(k, gload(k, v32, gep_e(k, GE_BF16, src, k0), 2), dst, 2);
  gif_else(k, &f);
  {
    /* the edges: element by element, zeros outside (the row and depth clamped for the load) */
    LLVMValueRef j = gloop(k, &lj, gi(k, 0), gi(k, 32), 1);
    LLVMValueRef kk = gadd(k, k0, j);
    LLVMValueRef ok = ga_and(k, row, gslt(k, kk, P[GP_K]));
    LLVMValueRef rc = gmin(k, gadd(k, ic, r), gadd(k, ic, gsub(k, mc, gi(k, 1))));
    LLVMValueRef kc = gmin(k, kk, gsub(k, P[GP_K], gi(k, 1)));
    ga_elem(k, P[GP_A], rc, P[GP_ARS], kc, P[GP_ACS], ok, gep_e(k, GE_BF16, dst, j));
    gm_close(k, &lj);
  }
  gif_close(k, &f);
  gm_close(k, &lq);
  gm_close(k, &lr);
}

/* Whether row pair kg, kg + 1 of B's w columns from c0 (of the block's nc) lies inside B,
 * its columns contiguous. */
static LLVMValueRef ga_pair_inside(CpuKern *k, const LLVMValueRef *P, LLVMValueRef kg,
                                   LLVMValueRef c0, LLVMValueRef nc, int w) {
  LLVMValueRef in =
      ga_and(k, ga_sle(k, gadd(k, c0, gi(k, w)), nc), ga_sle(k, gadd(k, kg, gi(k, 2)), P[GP_K]));
  return ga_and(k, in, LLVMBuildICmp(k->B, LLVMIntEQ, P[GP_BCS], gi(k, 1), ""));
}

/* Rows kg and kg + 1 of B, w columns from col, as two vectors (returns row kg's address);
 * their depth pairs interleaved, 16 columns from column h * 16 (a VNNI tile's row). */
static LLVMValueRef ga_pair_load(CpuKern *k, const LLVMValueRef *P, LLVMValueRef kg,
                                 LLVMValueRef col, int w, LLVMValueRef *r) {
  LLVMTypeRef vt = LLVMVectorType(k->cg->i16, (unsigned)w);
  LLVMValueRef s0 = gep_e(k, GE_BF16, P[GP_B], gadd(k, gmul(k, kg, P[GP_BRS]), col));
  r[0] = gload(k, vt, s0, 2);
  r[1] = gload(k, vt, gep_e(k, GE_BF16, s0, P[GP_BRS]), 2);
  return s0;
}
static LLVMValueRef ga_interleave(CpuKern *k, const LLVMValueRef *r, int w, int h) {
  LLVMValueRef mask[32];
  for (int i = 0; i < 32; i++)
    mask[i] = LLVMConstInt(k->cg->i32, (unsigned)((i & 1) * w + 16 * h + i / 2), 0);
  return LLVMBuildShuffleVector(k->B, r[0], r[1], LLVMConstVector(mask, 32), "");
}

/* Row pair kg, kg + 1 of B's 16 columns from col (c0 of the block's nc) into dst, a row of
 * a VNNI tile: interleaved vectors where the 16 columns and both rows are inside B and its
 * columns are contiguous, else element by element with zeros outside. */
static void ga_pack_b16(CpuKern *k, const LLVMValueRef *P, LLVMValueRef dst, LLVMValueRef kg,
                        LLVMValueRef jc, LLVMValueRef c0, LLVMValueRef nc) {
  GIf f;
  gif_open(k, &f, ga_pair_inside(k, P, kg, c0, nc, 16), true);
  LLVMValueRef r[2];
  ga_pair_load(k, P, kg, gadd(k, jc, c0), 16, r);
  gstore(k, ga_interleave(k, r, 16, 0), dst, 2);
  gif_else(k, &f);
  {
    CpuLoop ln;
    LLVMValueRef n = gloop(k, &ln, gi(k, 0), gi(k, 32), 1);
    LLVMValueRef cn = gadd(k, c0, LLVMBuildSDiv(k->B, n, gi(k, 2), ""));
    LLVMValueRef kk = gadd(k, kg, LLVMBuildSRem(k->B, n, gi(k, 2), ""));
    LLVMValueRef ok = ga_and(k, gslt(k, cn, nc), gslt(k, kk, P[GP_K]));
    LLVMValueRef cc = gadd(k, jc, gmin(k, cn, gsub(k, nc, gi(k, 1))));
    LLVMValueRef kcl = gmin(k, kk, gsub(k, P[GP_K], gi(k, 1)));
    ga_elem(k, P[GP_B], kcl, P[GP_BRS], cc, P[GP_BCS], ok, gep_e(k, GE_BF16, dst, n));
    gm_close(k, &ln);
  }
  gif_close(k, &f);
}

/* B's depths [pc, pc + kc) and columns [jc, jc + nc) into VNNI tiles: tile (t, q) (columns
 * 16 t.., depths 32 q.. of the block) at bp + (t * kc / 32 + q) * GA_TB, its row p holding
 * B[d][n], B[d + 1][n] for d = pc + 32 q + 2 p and each of its 16 columns n in turn; zeros
 * past nc columns (up to ncr) and past K. Pairs of rows outer (B is read along its rows), 32
 * columns (two tiles) a step: 64-byte loads of both rows, two interleaving shuffles. */
static void ga_pack_b(CpuKern *k, const LLVMValueRef *P, LLVMValueRef bp, LLVMValueRef pc,
                      LLVMValueRef kc, LLVMValueRef jc, LLVMValueRef nc, LLVMValueRef ncr,
                      bool pf) {
  CpuLoop lc, lp;
  LLVMValueRef kq = LLVMBuildSDiv(k->B, kc, gi(k, 32), "");
  LLVMValueRef d = gloop(k, &lp, gi(k, 0), kc, 2);
  LLVMValueRef c0 = gloop(k, &lc, gi(k, 0), ncr, 32);
  LLVMValueRef tq = gadd(k, gmul(k, LLVMBuildSDiv(k->B, c0, gi(k, 16), ""), kq),
                         LLVMBuildSDiv(k->B, d, gi(k, 32), ""));
  LLVMValueRef dst =
      gep_e(k, GE_BF16, bp,
            gadd(k, gmul(k, tq, gi(k, GA_TB / 2)),
                 gmul(k, LLVMBuildSDiv(k->B, LLVMBuildSRem(k->B, d, gi(k, 32), ""), gi(k, 2), ""),
                      gi(k, 32))));
  LLVMValueRef dst1 = gep_e(k, GE_BF16, dst, gmul(k, kq, gi(k, GA_TB / 2))); /* tile t + 1 */
  LLVMValueRef kg = gadd(k, pc, d);
  GIf f;
  gif_open(k, &f, ga_pair_inside(k, P, kg, c0, nc, 32), true);
  {
    LLVMValueRef r[2];
    LLVMValueRef s0 = ga_pair_load(k, P, kg, gadd(k, jc, c0), 32, r);
    /* the same columns GA_PF rows on, asked for ahead (rows are read in short runs, which
       the hardware's prefetchers follow poorly) */
    if (pf) {
      LLVMValueRef ahead = gep_e(k, GE_BF16, s0, gmul(k, P[GP_BRS], gi(k, GA_PF)));
      gm_prefetch(k, ahead, 3);
      gm_prefetch(k, gep_e(k, GE_BF16, ahead, P[GP_BRS]), 3);
    }
    gstore(k, ga_interleave(k, r, 32, 0), dst, 2);
    gstore(k, ga_interleave(k, r, 32, 1), dst1, 2);
  }
  gif_else(k, &f);
  ga_pack_b16(k, P, dst, kg, jc, c0, nc);
  ga_pack_b16(k, P, dst1, kg, jc, gadd(k, c0, gi(k, 16)), nc);
  gif_close(k, &f);
  gm_close(k, &lc);
  gm_close(k, &lp);
}

/* The same block from a B whose depths are contiguous (B [N, K], brs 1: a transposed weight,
 * or the keys of attention scores): per tile, 16 columns of 32 depths loaded as 16 vectors of
 * 16 depth pairs, transposed in registers (cpu_transpose_regs) into the tile's 16 rows of
 * pairs; a tile not inside B (or B's depths strided) element by element. */
static void ga_pack_bt(CpuKern *k, const LLVMValueRef *P, LLVMValueRef bp, LLVMValueRef pc,
                       LLVMValueRef kc, LLVMValueRef jc, LLVMValueRef nc, LLVMValueRef ncr) {
  CpuCg *cg = k->cg;
  CpuLoop lc, lq, lp;
  LLVMValueRef kq = LLVMBuildSDiv(k->B, kc, gi(k, 32), "");
  LLVMValueRef c0 = gloop(k, &lc, gi(k, 0), ncr, 16);
  LLVMValueRef q = gloop(k, &lq, gi(k, 0), kq, 1);
  LLVMValueRef dst = gep_e(
      k, GE_BF16, bp,
      gmul(k, gadd(k, gmul(k, LLVMBuildSDiv(k->B, c0, gi(k, 16), ""), kq), q), gi(k, GA_TB / 2)));
  LLVMValueRef kg = gadd(k, pc, gmul(k, q, gi(k, 32)));
  LLVMValueRef full =
      ga_and(k, ga_sle(k, gadd(k, c0, gi(k, 16)), nc), ga_sle(k, gadd(k, kg, gi(k, 32)), P[GP_K]));
  full = ga_and(k, full, LLVMBuildICmp(k->B, LLVMIntEQ, P[GP_BRS], gi(k, 1), ""));
  GIf f;
  gif_open(k, &f, full, true);
  {
    LLVMTypeRef v16 = LLVMVectorType(cg->i32, 16);
    LLVMValueRef v[16];
    for (int n = 0; n < 16; n++)
      v[n] = gload(k, v16,
                   gep_e(k, GE_BF16, P[GP_B],
                         gadd(k, gmul(k, gadd(k, jc, gadd(k, c0, gi(k, n))), P[GP_BCS]), kg)),
                   2);
    cpu_transpose_regs(k, v, 16);
    for (int r = 0; r < 16; r++)
      gstore(k, v[r], gep_e(k, GE_BF16, dst, gi(k, 32 * r)), 2);
  }
  gif_else(k, &f);
  {
    LLVMValueRef pr = gloop(k, &lp, gi(k, 0), gi(k, 16), 1);
    ga_pack_b16(k, P, gep_e(k, GE_BF16, dst, gmul(k, pr, gi(k, 32))),
                gadd(k, kg, gmul(k, pr, gi(k, 2))), jc, c0, nc);
    gm_close(k, &lp);
  }
  gif_close(k, &f);
  gm_close(k, &lq);
  gm_close(k, &lc);
}

/* ------------------------------------------------------------------ the panels */

/* rows x cols floats between C (leading dimension ldc) and the 32 x 32 stack tile e (to_e:
 * into e). */
static void ga_edge_copy(CpuKern *k, LLVMValueRef C, LLVMValueRef ldc, LLVMValueRef e,
                         LLVMValueRef rows, LLVMValueRef cols, bool to_e) {
  CpuLoop li, lj;
  LLVMValueRef i = gloop(k, &li, gi(k, 0), rows, 1);
  LLVMValueRef j = gloop(k, &lj, gi(k, 0), cols, 1);
  LLVMValueRef pc = gfp(k, C, gadd(k, gmul(k, i, ldc), j));
  LLVMValueRef pe = gfp(k, e, gadd(k, gmul(k, i, gi(k, 32)), j));
  gstore(k, gload(k, k->cg->f32, to_e ? pc : pe, 4), to_e ? pe : pc, 4);
  gm_close(k, &lj);
  gm_close(k, &li);
}

/* Where a panel's A tiles lie: rows 0-15 at a0, rows 16-31 at a1, the next tile depth step
 * bytes further, rows stride bytes apart (packed: 1024 and 64; read in place: 64 and A's row
 * distance). */
typedef struct GaA {
  LLVMValueRef a0, a1, step, stride;
} GaA;

/* The 32 x 32 block of C at cp (mrv x nrv of it inside C) over one K block of kq tile depths:
 * accumulators 0-3 (rows 0-15 / 16-31 by columns 0-15 / 16-31) set to zero on the first K
 * block, else loaded; A's tiles from a, B's of columns 0-15 and 16-31 from b0 and b1, one
 * tile depth after the other. */
static void ga_panel(CpuKern *k, bool t1, const GaA *a, LLVMValueRef b0, LLVMValueRef b1,
                     LLVMValueRef kq, LLVMValueRef cp, LLVMValueRef ldc, LLVMValueRef mrv,
                     LLVMValueRef nrv, LLVMValueRef first, LLVMValueRef edge) {
  LLVMValueRef whole = ga_and(k, LLVMBuildICmp(k->B, LLVMIntEQ, mrv, gi(k, 32), ""),
                              LLVMBuildICmp(k->B, LLVMIntEQ, nrv, gi(k, 32), ""));
  LLVMValueRef p = LLVMBuildSelect(k->B, whole, cp, edge, "");
  LLVMValueRef rs = LLVMBuildSelect(k->B, whole, gmul(k, ldc, gi(k, 4)), gi(k, 128), "");
  LLVMValueRef at[4] = {p, ga_byte(k, p, gi(k, 64)), ga_byte(k, p, gmul(k, rs, gi(k, 16))),
                        ga_byte(k, p, gadd(k, gmul(k, rs, gi(k, 16)), gi(k, 64)))};
  GIf f, e;
  gif_open(k, &f, first, true);
  for (int t = 0; t < 4; t++)
    ga_intr(k, "llvm.x86.tilezero", (LLVMValueRef[]){ga_t(k, t)}, 1);
  gif_else(k, &f);
  gif_open(k, &e, LLVMBuildNot(k->B, whole, ""), false);
  ga_edge_copy(k, cp, ldc, edge, mrv, nrv, true);
  gif_close(k, &e);
  for (int t = 0; t < 4; t++)
    ga_load(k, t, at[t], rs);
  gif_close(k, &f);
  CpuLoop lq;
  LLVMValueRef q = gloop(k, &lq, gi(k, 0), kq, 1);
  LLVMValueRef off = gmul(k, q, gi(k, GA_TB)), s64 = gi(k, 64), aoff = gmul(k, q, a->step);
  ga_load(k, 4, ga_byte(k, a->a0, aoff), a->stride);
  ga_load(k, 5, ga_byte(k, a->a1, aoff), a->stride);
  (t1 ? ga_load_t1 : ga_load)(k, 6, ga_byte(k, b0, off), s64);
  (t1 ? ga_load_t1 : ga_load)(k, 7, ga_byte(k, b1, off), s64);
  ga_dp(k, 0, 4, 6);
  ga_dp(k, 1, 4, 7);
  ga_dp(k, 2, 5, 6);
  ga_dp(k, 3, 5, 7);
  gm_close(k, &lq);
  for (int t = 0; t < 4; t++)
    ga_store(k, t, at[t], rs);
  gif_open(k, &e, LLVMBuildNot(k->B, whole, ""), false);
  ga_edge_copy(k, cp, ldc, edge, mrv, nrv, false);
  gif_close(k, &e);
}

/* ------------------------------------------------------------------ the function */

/* Depths [pc, pc + kc) of columns [jc, jc + nc) of B into tiles at bp (ga_pack_b's layout),
 * from either of B's contiguous dimensions. */
static void ga_pack_block(CpuKern *k, const GmCfg *c, const LLVMValueRef *P, LLVMValueRef bp,
                          LLVMValueRef pc, LLVMValueRef kc, LLVMValueRef jc, LLVMValueRef nc,
                          LLVMValueRef ncr) {
  GIf bt;
  gif_open(k, &bt, LLVMBuildICmp(k->B, LLVMIntEQ, P[GP_BCS], gi(k, 1), ""), true);
  ga_pack_b(k, P, bp, pc, kc, jc, nc, ncr, c->amx_pf);
  gif_else(k, &bt);
  ga_pack_bt(k, P, bp, pc, kc, jc, nc, ncr);
  gif_close(k, &bt);
}

/* Byte offset of block (jc, pc) in a B packed whole (gm_amx_packb_function): the column
 * blocks one after the other, each its K blocks in turn (kr: K rounded to 32; ncr: the
 * block's columns rounded to 32; every block before jc is GA_NC wide). */
static LLVMValueRef ga_block_off(CpuKern *k, LLVMValueRef kr, LLVMValueRef pc, LLVMValueRef jc,
                                 LLVMValueRef ncr) {
  return gmul(k, gadd(k, gmul(k, jc, kr), gmul(k, pc, ncr)), gi(k, 2));
}

LLVMValueRef gm_amx_packb_function(CpuCg *cg) {
  GmState *st = gm_state(cg);
  if (st->amx_packb_fn) return st->amx_packb_fn;
  char name[512];
  snprintf(name, sizeof name, "%s_gemm_bf16_amx_packb", gm_prefix(cg));
  LLVMTypeRef ps[GB_COUNT];
  for (int j = 0; j < GB_COUNT; j++)
    ps[j] = cg->i64;
  ps[GB_X] = ps[GB_DST] = cg->ptr;
  LLVMBasicBlockRef saved = LLVMGetInsertBlock(cg->B);
  CpuKern *k = gm_fn_begin(cg, name, LLVMFunctionType(cg->vd, ps, GB_COUNT, 0));
  GmCfg c = st->cfg;
  gm_mark(k->fn, &c);
  /* the GEMM's parameters that the block packers read */
  LLVMValueRef P[GP_COUNT];
  for (int j = 0; j < GP_COUNT; j++)
    P[j] = gi(k, 0);
  P[GP_B] = LLVMGetParam(k->fn, GB_X);
  P[GP_BRS] = LLVMGetParam(k->fn, GB_RS);
  P[GP_BCS] = LLVMGetParam(k->fn, GB_CS);
  P[GP_N] = LLVMGetParam(k->fn, GB_N);
  P[GP_K] = LLVMGetParam(k->fn, GB_K);
  LLVMValueRef dst = LLVMGetParam(k->fn, GB_DST);
  LLVMValueRef kr = ga_round32(k, P[GP_K]);
  CpuLoop ljc, lpc;
  LLVMValueRef jc = gloop(k, &ljc, gi(k, 0), P[GP_N], GA_NC);
  LLVMValueRef nc = gmin(k, gi(k, GA_NC), gsub(k, P[GP_N], jc));
  LLVMValueRef ncr = ga_round32(k, nc);
  LLVMValueRef pc = gloop(k, &lpc, gi(k, 0), kr, c.amx_kc);
  LLVMValueRef kc = gmin(k, gi(k, c.amx_kc), gsub(k, kr, pc));
  ga_pack_block(k, &c, P, ga_byte(k, dst, ga_block_off(k, kr, pc, jc, ncr)), pc, kc, jc, nc, ncr);
  gm_close(k, &lpc);
  gm_close(k, &ljc);
  LLVMBuildRetVoid(k->B);
  if (saved) LLVMPositionBuilderAtEnd(cg->B, saved);
  st->amx_packb_fn = k->fn;
  return k->fn;
}

int64_t gm_amx_packed_bytes(int64_t N, int64_t K) {
  return gm_roundup(N < 1 ? 1 : N, 32) * gm_roundup(K < 1 ? 1 : K, 32) * 2;
}

/* The A tiles of row panel ir (of the row block at ic) at depth pc: packed (tiles (ir / 16,
 * pc / 32 ..) and the next row of tiles, kqa tile depths a row) or, where direct, in A itself. */
static GaA ga_a_panel(CpuKern *k, const LLVMValueRef *P, LLVMValueRef direct, LLVMValueRef ap,
                      LLVMValueRef kqa, LLVMValueRef ic, LLVMValueRef ir, LLVMValueRef pc) {
  LLVMValueRef a0 = ga_byte(k, ap,
                            gmul(k,
                                 gadd(k, gmul(k, LLVMBuildSDiv(k->B, ir, gi(k, 16), ""), kqa),
                                      LLVMBuildSDiv(k->B, pc, gi(k, 32), "")),
                                 gi(k, GA_TB)));
  LLVMValueRef a1 = ga_byte(k, a0, gmul(k, kqa, gi(k, GA_TB)));
  LLVMValueRef ars2 = gmul(k, P[GP_ARS], gi(k, 2));
  LLVMValueRef ad =
      ga_byte(k, P[GP_A], gmul(k, gadd(k, gmul(k, gadd(k, ic, ir), P[GP_ARS]), pc), gi(k, 2)));
  return (GaA){LLVMBuildSelect(k->B, direct, ad, a0, ""),
               LLVMBuildSelect(k->B, direct, ga_byte(k, ad, gmul(k, ars2, gi(k, 16))), a1, ""),
               LLVMBuildSelect(k->B, direct, gi(k, 64), gi(k, GA_TB), ""),
               LLVMBuildSelect(k->B, direct, ars2, gi(k, 64), "")};
}

/* The blocks of one call, K > 0 and the tiles granted (see the file's head). */
static void ga_blocks(CpuKern *k, const GmCfg *c, const LLVMValueRef *P, LLVMValueRef edge) {
  LLVMValueRef M = P[GP_M], N = P[GP_N];
  LLVMValueRef kr = ga_round32(k, P[GP_K]);
  LLVMValueRef kqa = LLVMBuildSDiv(k->B, kr, gi(k, 32), "");
  ga_config(k);
  CpuLoop lic, ljc, lpc, lir, ljr;
  LLVMValueRef ic = gloop(k, &lic, gi(k, 0), M, GA_MC);
  LLVMValueRef mc = gmin(k, gi(k, GA_MC), gsub(k, M, ic));
  LLVMValueRef mcr = ga_round32(k, mc);
  LLVMValueRef ap = P[GP_PACK];
  /* A read in place by the tile loads where its rows are contiguous and whole tiles (K and
     M multiples of 32: no load past a row or past the last), else packed */
  LLVMValueRef direct =
      ga_and(k, LLVMBuildICmp(k->B, LLVMIntEQ, P[GP_ACS], gi(k, 1), ""),
             LLVMBuildICmp(k->B, LLVMIntEQ,
                           LLVMBuildAnd(k->B, LLVMBuildOr(k->B, P[GP_K], M, ""), gi(k, 31), ""),
                           gi(k, 0), ""));
  GIf pa;
  gif_open(k, &pa, LLVMBuildNot(k->B, direct, ""), false);
  ga_pack_a(k, P, ap, ic, mc, mcr, kqa);
  gif_close(k, &pa);
  LLVMValueRef bp = ga_byte(k, ap, gmul(k, gmul(k, mcr, kr), gi(k, 2)));
  LLVMValueRef jc = gloop(k, &ljc, gi(k, 0), N, GA_NC);
  LLVMValueRef nc = gmin(k, gi(k, GA_NC), gsub(k, N, jc));
  LLVMValueRef ncr = ga_round32(k, nc);
  LLVMValueRef pc = gloop(k, &lpc, gi(k, 0), kr, c->amx_kc);
  LLVMValueRef kc = gmin(k, gi(k, c->amx_kc), gsub(k, kr, pc));
  LLVMValueRef kqb = LLVMBuildSDiv(k->B, kc, gi(k, 32), "");
  /* B packed by the caller ahead of the runs (gm_amx_packb_function's layout): the block in
     place; else packed here */
  LLVMValueRef pre = LLVMBuildIsNotNull(k->B, P[GP_BPRE], "");
  GIf pk;
  gif_open(k, &pk, LLVMBuildNot(k->B, pre, ""), false);
  ga_pack_block(k, c, P, bp, pc, kc, jc, nc, ncr);
  gif_close(k, &pk);
  bp = LLVMBuildSelect(k->B, pre, ga_byte(k, P[GP_BPRE], ga_block_off(k, kr, pc, jc, ncr)), bp, "");
  LLVMValueRef first = LLVMBuildICmp(k->B, LLVMIntEQ, pc, gi(k, 0), "");
  LLVMValueRef ir = gloop(k, &lir, gi(k, 0), mcr, 32);
  LLVMValueRef mrv = gmin(k, gi(k, 32), gsub(k, mc, ir));
  GaA at = ga_a_panel(k, P, direct, ap, kqa, ic, ir, pc);
  LLVMValueRef jr = gloop(k, &ljr, gi(k, 0), ncr, 32);
  LLVMValueRef nrv = gmin(k, gi(k, 32), gsub(k, nc, jr));
  LLVMValueRef b0 =
      ga_byte(k, bp, gmul(k, gmul(k, LLVMBuildSDiv(k->B, jr, gi(k, 16), ""), kqb), gi(k, GA_TB)));
  LLVMValueRef b1 = ga_byte(k, b0, gmul(k, kqb, gi(k, GA_TB)));
  LLVMValueRef cp = gfp(k, P[GP_C], gadd(k, gmul(k, gadd(k, ic, ir), P[GP_LDC]), gadd(k, jc, jr)));
  ga_panel(k, c->amx_t1, &at, b0, b1, kqb, cp, P[GP_LDC], mrv, nrv, first, edge);
  gm_close(k, &ljr);
  gm_close(k, &lir);
  gm_close(k, &lpc);
  gm_close(k, &ljc);
  gm_close(k, &lic);
  ga_intr(k, "llvm.x86.tilerelease", NULL, 0);
}

LLVMValueRef gm_amx_function(CpuCg *cg) {
  GmState *st = gm_state(cg);
  if (st->amx_fn) return st->amx_fn;
  LLVMValueRef widened = gm_function(cg, GE_BF16);
  char name[512];
  snprintf(name, sizeof name, "%s_gemm_bf16_amx", gm_prefix(cg));
  LLVMBasicBlockRef saved = LLVMGetInsertBlock(cg->B);
  CpuKern *k = gm_fn_begin(cg, name, gm_fn_type(cg));
  GmCfg c = st->cfg;
  gm_mark(k->fn, &c);
  /* (the target's features and the tiles': an attribute replaces the machine's string) */
  char feat[4096];
  snprintf(feat, sizeof feat, "%s%s+amx-tile,+amx-bf16", cg->tfeat, *cg->tfeat ? "," : "");
  LLVMAddTargetDependentFunctionAttr(k->fn, "target-features", feat);
  LLVMValueRef P[GP_COUNT];
  for (int j = 0; j < GP_COUNT; j++)
    P[j] = LLVMGetParam(k->fn, (unsigned)j);
  LLVMValueRef edge = cpu_alloca(k, LLVMArrayType2(cg->f32, 32 * 32));
  LLVMSetAlignment(edge, 64);
  GIf f;
  gif_open(k, &f, ga_and(k, gslt(k, gi(k, 0), P[GP_K]), ga_granted(k)), true);
  ga_blocks(k, &c, P, edge);
  gif_else(k, &f);
  LLVMBuildCall2(k->B, gm_fn_type(cg), widened, P, GP_COUNT, "");
  gif_close(k, &f);
  LLVMBuildRetVoid(k->B);
  if (saved) LLVMPositionBuilderAtEnd(cg->B, saved);
  st->amx_fn = k->fn;
  return k->fn;
}
