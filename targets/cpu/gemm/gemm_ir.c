/* targets/cpu/gemm/gemm_ir.c: IR builder helpers of the GEMM and its internal functions.
 *
 * The GEMM's code is written as explicit loops and ifs over LLVM's builder, so the small
 * structured helpers here (while loops over a variable, if / else, phi loops, loops LLVM must
 * not vectorize again) keep that code readable; the one-line arithmetic helpers are inline in
 * gemm_impl.h. The register transpose shared with the elementwise kernels (cpu_transpose_regs)
 * lives here too, as does the scaffolding every internal function of the GEMM is made with:
 * its symbol prefix, a declaration in place of a definition when the prebuilt library has it,
 * and the attributes that give it the light optimization pipeline. */
#include "gemm_impl.h"

LLVMValueRef gwhile_open(GenKern *k, GWhile *w, LLVMValueRef var, LLVMValueRef bound,
                         const char *hname, const char *bname, const char *ename) {
  LLVMBuilderRef B = k->B;
  w->hdr = LLVMAppendBasicBlockInContext(k->cg->C, k->fn, hname);
  LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(k->cg->C, k->fn, bname);
  w->exit = LLVMAppendBasicBlockInContext(k->cg->C, k->fn, ename);
  LLVMBuildBr(B, w->hdr);
  LLVMPositionBuilderAtEnd(B, w->hdr);
  LLVMValueRef v = gget(k, var);
  LLVMBuildCondBr(B, gslt(k, v, bound), body, w->exit);
  LLVMPositionBuilderAtEnd(B, body);
  return v;
}

void gwhile_close(GenKern *k, const GWhile *w) {
  LLVMBuildBr(k->B, w->hdr);
  LLVMPositionBuilderAtEnd(k->B, w->exit);
}

void gif_open(GenKern *k, GIf *f, LLVMValueRef c, bool with_else) {
  f->then_bb = LLVMAppendBasicBlockInContext(k->cg->C, k->fn, "then");
  f->else_bb = with_else ? LLVMAppendBasicBlockInContext(k->cg->C, k->fn, "else") : NULL;
  f->join = LLVMAppendBasicBlockInContext(k->cg->C, k->fn, "join");
  LLVMBuildCondBr(k->B, c, f->then_bb, with_else ? f->else_bb : f->join);
  LLVMPositionBuilderAtEnd(k->B, f->then_bb);
}

void gif_else(GenKern *k, GIf *f) {
  LLVMBuildBr(k->B, f->join);
  LLVMPositionBuilderAtEnd(k->B, f->else_bb);
}

void gif_close(GenKern *k, GIf *f) {
  LLVMBuildBr(k->B, f->join);
  LLVMPositionBuilderAtEnd(k->B, f->join);
}

LLVMValueRef gloop(GenKern *k, GenLoop *l, LLVMValueRef lo, LLVMValueRef hi, int64_t step) {
  LLVMValueRef iv = gen_loop_open(k, l, lo, hi);
  l->step = step;
  return iv;
}

/* Mark the back edge br as a loop LLVM must not vectorize: the GEMM's loops are vectorized
 * by hand, and the vectorizer's analysis of them would be compile time spent for nothing. */
void gm_novec(GenKern *k, LLVMValueRef br) {
  cpu_loop_hint(k, br, "llvm.loop.vectorize.enable", LLVMConstInt(k->cg->i1, 0, 0));
}

void gm_close(GenKern *k, GenLoop *l) {
  gen_loop_close(k, l);
  gm_novec(k, l->latch_br);
}

/* A prefetch of the cache line at p: for writing into L1 (level < 0), or for reading into
 * the cache of that locality (3 L1, 2 L2; x86's prefetcht0 / prefetcht1). */
void gm_prefetch(GenKern *k, LLVMValueRef p, int level) {
  CpuCg *cg = cpu_cg(k->cg);
  unsigned pid = LLVMLookupIntrinsicID("llvm.prefetch", 13);
  LLVMTypeRef pty = cg->g.ptr;
  LLVMValueRef f = LLVMGetIntrinsicDeclaration(cg->g.M, pid, &pty, 1);
  LLVMValueRef pa[4] = {p, LLVMConstInt(cg->g.i32, level < 0, 0),
                        LLVMConstInt(cg->g.i32, (unsigned long long)(level < 0 ? 3 : level), 0),
                        LLVMConstInt(cg->g.i32, 1, 0)};
  LLVMBuildCall2(k->B, LLVMIntrinsicGetType(cg->g.C, pid, &pty, 1), f, pa, 4, "");
}

GPhiLoop gphi_open(GenKern *k, const char *hname, const char *bname, const char *dname) {
  GPhiLoop l = {LLVMGetInsertBlock(k->B), LLVMAppendBasicBlockInContext(k->cg->C, k->fn, hname),
                LLVMAppendBasicBlockInContext(k->cg->C, k->fn, bname),
                LLVMAppendBasicBlockInContext(k->cg->C, k->fn, dname)};
  LLVMBuildBr(k->B, l.hdr);
  LLVMPositionBuilderAtEnd(k->B, l.hdr);
  return l;
}

/* Each of the n vectors v[] (of one type) passed through an empty inline-assembly statement
 * (in and out in one vector register): an optimization barrier LLVM's instruction selection
 * cannot look through. */
static void gm_opaque(GenKern *k, LLVMValueRef *v, int n) {
  LLVMTypeRef t = LLVMTypeOf(v[0]);
  LLVMTypeRef ft = LLVMFunctionType(t, &t, 1, 0);
  static const char cons[] = "=v,0";
  LLVMValueRef asm_ =
      LLVMGetInlineAsm(ft, "", 0, (char *)cons, sizeof cons - 1, 0, 0, LLVMInlineAsmDialectATT, 0);
  for (int i = 0; i < n; i++)
    v[i] = LLVMBuildCall2(k->B, ft, asm_, &v[i], 1, "");
}

/* Transpose the n x n matrix whose rows are the n-wide vectors v[0..n) in place (n a power
 * of two): log2(n) stages, each swapping the off-diagonal s x s blocks of every 2s x 2s block
 * (s = n/2 .. 1) with two shuffles per pair of rows, which x86 lowers to lane permutes,
 * unpacks and blends. On x86 each stage's inputs pass an optimization barrier (gm_opaque):
 * without it the DAG combiner's demanded-elements analysis walks the whole shuffle tree back
 * from every node, which made the packing functions' instruction selection slow on AVX-512;
 * each stage alone selects the same instructions. */
void cpu_transpose_regs(GenKern *k, LLVMValueRef *v, int n) {
  LLVMValueRef m0[16], m1[16];
  bool barrier = gm_cfg(cpu_cg(k->cg)).x86 && n > 4;
  for (int s = n / 2; s >= 1; s /= 2) {
    if (barrier) gm_opaque(k, v, n);
    for (int e = 0; e < n; e++) {
      /* row i (bit s clear) keeps its elements with bit s clear and takes row j's from s to
         the left; row j takes row i's from s to the right and keeps its own */
      m0[e] = LLVMConstInt(k->cg->i32, (unsigned)((e & s) ? n + e - s : e), 0);
      m1[e] = LLVMConstInt(k->cg->i32, (unsigned)((e & s) ? n + e : e + s), 0);
    }
    LLVMValueRef mask0 = LLVMConstVector(m0, (unsigned)n), mask1 = LLVMConstVector(m1, (unsigned)n);
    for (int i = 0; i < n; i++) {
      if (i & s) continue;
      LLVMValueRef a = v[i], b = v[i + s];
      v[i] = LLVMBuildShuffleVector(k->B, a, b, mask0, "");
      v[i + s] = LLVMBuildShuffleVector(k->B, a, b, mask1, "");
    }
  }
}

/* The symbol prefix of the GEMM's functions: the module's name, or, where they come from the
 * prebuilt library (or are being compiled into it), the library's. */
const char *gm_prefix(const CpuCg *cg) {
  return cg->prebuilt || cg->lib ? CPU_LIB_PREFIX : cg->o->name;
}

/* With a prebuilt library (cg->prebuilt) a function of the GEMM is only declared, hidden, and
 * kept in *slot: its definition is in the library's object, joined to the module's by
 * cpu_emit(). false when the function is to be made here. */
bool gm_declared(CpuCg *cg, LLVMValueRef *slot, const char *name, LLVMTypeRef ft) {
  if (!cg->prebuilt) return false;
  *slot = LLVMAddFunction(cg->g.M, name, ft);
  LLVMSetVisibility(*slot, LLVMHiddenVisibility);
  return true;
}

/* A new internal, never-inlined function of the module (the GEMM and its packing helpers)
 * with an entry block and a body block, the builder at the body's start; the caller restores
 * the builder's position when done. */
GenKern *gm_fn_begin(CpuCg *cg, const char *name, LLVMTypeRef ft) {
  LLVMValueRef fn = LLVMAddFunction(cg->g.M, name, ft);
  LLVMSetLinkage(fn, LLVMInternalLinkage);
  unsigned ni = LLVMGetEnumAttributeKindForName("noinline", 8);
  LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(cg->g.C, ni, 0));
  CpuKern *ck = hlo_arena_alloc(cg->g.scratch, sizeof *ck); /* a CpuKern, as every kernel */
  GenKern *k = &ck->g;
  k->cg = &cg->g;
  k->B = cg->g.B;
  k->fn = fn;
  k->entry = LLVMAppendBasicBlockInContext(cg->g.C, fn, "entry");
  LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(cg->g.C, fn, "start");
  LLVMPositionBuilderAtEnd(cg->g.B, k->entry);
  k->entry_br = LLVMBuildBr(cg->g.B, body);
  LLVMPositionBuilderAtEnd(cg->g.B, body);
  return k;
}

/* Mark fn a GEMM function: cpu_emit.c gives it the light pipeline (CPU_LIGHT_ATTR); on
 * AVX-512 it asks for full-width vectors (CPUs tuned to prefer 256-bit vectors, e.g.
 * sapphirerapids, would split the explicit 512-bit vectors in two). */
void gm_mark(LLVMValueRef fn, const GmCfg *c) {
  LLVMAddTargetDependentFunctionAttr(fn, CPU_LIGHT_ATTR, "1");
  if (c->vw == 16) LLVMAddTargetDependentFunctionAttr(fn, "min-legal-vector-width", "512");
}

/* ------------------------------------------------------------------ operand element types */

GmElt gm_elt(DType dt) {
  return dt == DT_BF16 ? GE_BF16 : dt == DT_F16 ? GE_F16 : dt == DT_S8 ? GE_S8 : GE_F32;
}

bool gm_elt_ok(DType dt) { return dt == DT_F32 || dt == DT_BF16 || dt == DT_F16 || dt == DT_S8; }

LLVMTypeRef gm_elt_type(CpuCg *cg, GmElt e) {
  return e == GE_BF16 ? cg->g.i16 : e == GE_F16 ? cg->g.f16 : e == GE_S8 ? cg->g.i8 : cg->g.f32;
}

const char *gm_elt_name(GmElt e) {
  static const char *const names[GE_COUNT] = {"f32", "bf16", "f16", "s8"};
  return names[e];
}

bool gm_declared_e(CpuCg *cg, GmElt e, LLVMValueRef *slot, const char *name, LLVMTypeRef ft) {
  return e == GE_F32 && gm_declared(cg, slot, name, ft);
}

/* v (n elements of type e, 0: a scalar) widened to f32: bf16 is the upper half of an f32, so
 * its bits are zero-extended and shifted up by 16 (exact, NaNs and denormals included); f16
 * goes through fpext (F16C's vcvtph2ps on x86). */
static LLVMValueRef gm_widen(GenKern *k, GmElt e, LLVMValueRef v, int n) {
  CpuCg *cg = cpu_cg(k->cg);
  LLVMTypeRef f = n ? LLVMVectorType(cg->g.f32, (unsigned)n) : cg->g.f32;
  if (e == GE_F16) return LLVMBuildFPExt(k->B, v, f, "");
  if (e == GE_S8) return LLVMBuildSIToFP(k->B, v, f, ""); /* exact */
  LLVMTypeRef it = n ? LLVMVectorType(cg->g.i32, (unsigned)n) : cg->g.i32;
  LLVMValueRef sh[16], s16 = LLVMConstInt(cg->g.i32, 16, 0);
  for (int j = 0; j < n; j++)
    sh[j] = s16;
  LLVMValueRef w = LLVMBuildShl(k->B, LLVMBuildZExt(k->B, v, it, ""),
                                n ? LLVMConstVector(sh, (unsigned)n) : s16, "");
  return LLVMBuildBitCast(k->B, w, f, "");
}

LLVMValueRef gm_load_f32(GenKern *k, GmElt e, LLVMValueRef p, int n, unsigned align) {
  LLVMTypeRef et = gm_elt_type(cpu_cg(k->cg), e), t = n ? LLVMVectorType(et, (unsigned)n) : et;
  if (e == GE_F32) return gload(k, t, p, align);
  return gm_widen(k, e, gload(k, t, p, e == GE_S8 ? 1 : 2), n);
}

LLVMValueRef gm_masked_f32(GenKern *k, GmElt e, LLVMValueRef p, int n, LLVMValueRef mask) {
  CpuCg *cg = cpu_cg(k->cg);
  LLVMTypeRef vt = LLVMVectorType(gm_elt_type(cg, e), (unsigned)n);
  if (e == GE_F32) return cpu_masked_load(k, vt, p, mask);
  LLVMTypeRef ty[2] = {vt, cg->g.ptr};
  LLVMValueRef f =
      LLVMGetIntrinsicDeclaration(cg->g.M, LLVMLookupIntrinsicID("llvm.masked.load", 16), ty, 2);
  LLVMValueRef a[4] = {p, LLVMConstInt(cg->g.i32, e == GE_S8 ? 1 : 2, 0), mask, LLVMConstNull(vt)};
  return gm_widen(k, e, LLVMBuildCall2(k->B, LLVMGlobalGetValueType(f), f, a, 4, ""), n);
}
