/* targets/cpu/gemm/amx.c: the depth-group GEMM's blocks on AMX tiles (TDPBF16PS, TDPBSSD).
 *
 * Where the target CPU has AMX (Sapphire Rapids and later), the bf16 and s8 functions of
 * pairs.c compute each 32 x 32 block of C in four accumulator tiles (rows 0-15 / 16-31 by
 * columns 0-15 / 16-31): per tile depth, A's two 16-row tiles and B's two VNNI tiles are
 * loaded and four TDPBF16PS (bf16 pairs, f32 sums) or TDPBSSD (s8 quads, s32 sums) do a
 * 16 x 16 x 32 (or x 64) block of multiply-adds each, 16 (32) times what AVX-512's FMAs do in
 * the same cycles. B's tiles are loaded with the hint that they stream past L1 where
 * GmCfg.amx_t1 says so (measured side by side, docs/log/2026-12-01-cpu-amx.md). Linux grants a
 * process the AMX register state only on request (arch_prctl ARCH_REQ_XCOMP_PERM): the
 * function asks once per process (gm_amx_granted) and, where it is refused, pairs.c calls the
 * widened-FMA bf16 function instead. */
#include "gemm_impl.h"

static void ga_intr(GenKern *k, const char *name, LLVMValueRef *args, unsigned n) {
  unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
  HLO_ASSERT(id != 0);
  LLVMValueRef f = LLVMGetIntrinsicDeclaration(k->cg->M, id, NULL, 0);
  LLVMBuildCall2(k->B, LLVMIntrinsicGetType(k->cg->C, id, NULL, 0), f, args, n, "");
}
static LLVMValueRef ga_t(GenKern *k, int t) { return LLVMConstInt(k->cg->i8, (unsigned)t, 0); }
static void ga_load(GenKern *k, int t, LLVMValueRef p, LLVMValueRef stride) {
  ga_intr(k, "llvm.x86.tileloadd64", (LLVMValueRef[]){ga_t(k, t), p, stride}, 3);
}
/* (with the hint that the data is not reused soon: it streams past L1) */
static void ga_load_t1(GenKern *k, int t, LLVMValueRef p, LLVMValueRef stride) {
  ga_intr(k, "llvm.x86.tileloaddt164", (LLVMValueRef[]){ga_t(k, t), p, stride}, 3);
}
static void ga_store(GenKern *k, int t, LLVMValueRef p, LLVMValueRef stride) {
  ga_intr(k, "llvm.x86.tilestored64", (LLVMValueRef[]){ga_t(k, t), p, stride}, 3);
}
static void ga_dp(GenKern *k, bool int8, int c, int a, int b) {
  ga_intr(k, int8 ? "llvm.x86.tdpbssd" : "llvm.x86.tdpbf16ps",
          (LLVMValueRef[]){ga_t(k, c), ga_t(k, a), ga_t(k, b)}, 3);
}

/* The tile configuration (palette 1; tiles 0-7 of 16 rows of 64 bytes), loaded. */
void gm_amx_config(GenKern *k) {
  CpuCg *cg = cpu_cg(k->cg);
  LLVMValueRef cfg = gen_alloca(k, LLVMArrayType2(cg->g.i8, 64));
  LLVMSetAlignment(cfg, 64);
  LLVMBuildMemSet(k->B, cfg, LLVMConstInt(cg->g.i8, 0, 0), gi(k, 64), 64);
  LLVMBuildStore(k->B, LLVMConstInt(cg->g.i8, 1, 0), cfg);
  for (int t = 0; t < 8; t++) {
    LLVMBuildStore(k->B, LLVMConstInt(cg->g.i16, 64, 0), gbyte(k, cfg, gi(k, 16 + 2 * t)));
    LLVMBuildStore(k->B, LLVMConstInt(cg->g.i8, 16, 0), gbyte(k, cfg, gi(k, 48 + t)));
  }
  ga_intr(k, "llvm.x86.ldtilecfg", &cfg, 1);
}

/* The state word g read (v NULL) or written (v), atomically (monotonic). */
static LLVMValueRef ga_state(GenKern *k, LLVMValueRef g, LLVMValueRef v) {
  LLVMValueRef x = v ? LLVMBuildStore(k->B, v, g) : LLVMBuildLoad2(k->B, k->cg->i32, g, "");
  LLVMSetOrdering(x, LLVMAtomicOrderingMonotonic);
  LLVMSetAlignment(x, 4);
  return x;
}

/* Whether this process may use the tiles: asked of the kernel once (arch_prctl(
 * ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) by a raw system call, so the object needs no libc
 * wrapper) and remembered in a module global (0 not asked, 1 granted, 2 refused). */
LLVMValueRef gm_amx_granted(GenKern *k) {
  CpuCg *cg = cpu_cg(k->cg);
  char name[512];
  snprintf(name, sizeof name, "%s_amx_state", gm_prefix(cg));
  LLVMValueRef g = LLVMGetNamedGlobal(cg->g.M, name);
  if (!g) {
    g = LLVMAddGlobal(cg->g.M, cg->g.i32, name);
    LLVMSetLinkage(g, LLVMInternalLinkage);
    LLVMSetInitializer(g, LLVMConstInt(cg->g.i32, 0, 0));
  }
  /* (threads may race here: the request is idempotent, the state word atomic) */
  LLVMValueRef st = ga_state(k, g, NULL);
  GIf ask;
  gif_open(k, &ask, LLVMBuildICmp(k->B, LLVMIntEQ, st, LLVMConstInt(cg->g.i32, 0, 0), ""), false);
  {
    LLVMTypeRef at[3] = {cg->g.i64, cg->g.i64, cg->g.i64};
    LLVMTypeRef ft = LLVMFunctionType(cg->g.i64, at, 3, 0);
    static const char asm_s[] = "syscall", cons[] = "={ax},{ax},{di},{si},~{rcx},~{r11},~{memory}";
    LLVMValueRef sc = LLVMGetInlineAsm(ft, asm_s, sizeof asm_s - 1, cons, sizeof cons - 1, 1, 0,
                                       LLVMInlineAsmDialectATT, 0);
    /* SYS_arch_prctl 158, ARCH_REQ_XCOMP_PERM 0x1023, XFEATURE_XTILEDATA 18 */
    LLVMValueRef r =
        LLVMBuildCall2(k->B, ft, sc, (LLVMValueRef[]){gi(k, 158), gi(k, 0x1023), gi(k, 18)}, 3, "");
    LLVMValueRef ok = LLVMBuildICmp(k->B, LLVMIntEQ, r, gi(k, 0), "");
    ga_state(k, g,
             LLVMBuildSelect(k->B, ok, LLVMConstInt(cg->g.i32, 1, 0), LLVMConstInt(cg->g.i32, 2, 0),
                             ""));
  }
  gif_close(k, &ask);
  st = ga_state(k, g, NULL);
  return LLVMBuildICmp(k->B, LLVMIntEQ, st, LLVMConstInt(cg->g.i32, 1, 0), "");
}

void gm_amx_release(GenKern *k) { ga_intr(k, "llvm.x86.tilerelease", NULL, 0); }

void gm_amx_block(GenKern *k, bool t1, bool int8, const GmPairBlock *b) {
  const GmPairA *a = &b->a;
  LLVMValueRef p = b->c, rs = b->rs;
  LLVMValueRef at[4] = {p, gbyte(k, p, gi(k, 64)), gbyte(k, p, gmul(k, rs, gi(k, 16))),
                        gbyte(k, p, gadd(k, gmul(k, rs, gi(k, 16)), gi(k, 64)))};
  GIf f;
  gif_open(k, &f, b->first, true);
  for (int t = 0; t < 4; t++)
    ga_intr(k, "llvm.x86.tilezero", (LLVMValueRef[]){ga_t(k, t)}, 1);
  gif_else(k, &f);
  for (int t = 0; t < 4; t++)
    ga_load(k, t, at[t], rs);
  gif_close(k, &f);
  GenLoop lq;
  LLVMValueRef q = gloop(k, &lq, gi(k, 0), b->kq, 1);
  LLVMValueRef off = gmul(k, q, gi(k, GM_TILE_BYTES)), s64 = gi(k, 64), aoff = gmul(k, q, a->step);
  ga_load(k, 4, gbyte(k, a->a0, aoff), a->stride);
  ga_load(k, 5, gbyte(k, a->a1, aoff), a->stride);
  (t1 ? ga_load_t1 : ga_load)(k, 6, gbyte(k, b->b0, off), s64);
  (t1 ? ga_load_t1 : ga_load)(k, 7, gbyte(k, b->b1, off), s64);
  ga_dp(k, int8, 0, 4, 6);
  ga_dp(k, int8, 1, 4, 7);
  ga_dp(k, int8, 2, 5, 6);
  ga_dp(k, int8, 3, 5, 7);
  gm_close(k, &lq);
  for (int t = 0; t < 4; t++)
    ga_store(k, t, at[t], rs);
}
