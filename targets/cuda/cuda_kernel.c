/* targets/cuda/cuda_kernel.c: the steps computing one entry instruction on the GPU.
 *
 * Every computing entry instruction (a fusion, or a lone instruction treated as a fusion of
 * one) becomes one or more steps. Kernel bodies are produced by the shared elemental
 * generator (targets/gen), gen_value(k, instr, idx[]), unchanged: this file only builds the
 * NVPTX kernel around it (thread indexing, the loop over the iteration space, stores) and
 * tells it where entry values live through the GenCg.buffer_fn hook (each operand of the
 * instruction is one pointer parameter of the kernel). Kernel shapes:
 *   - vectorized loop kernel, for a 4-byte output computed elementwise (every operand read at
 *     the output's own index, or small: a scalar, a per-channel vector behind a broadcast)
 *     with a multiple of 4 elements: each thread
 *     of a grid-stride loop (a fixed multiple of the SM count of blocks) takes 4 consecutive
 *     elements with 16-byte vector loads and stores, the generator run once per lane; it
 *     falls back to the scalar loop in the same kernel when an address is not 16-byte
 *     aligned;
 *   - loop kernel: 256-thread blocks, a grid-stride loop over the row-major linear index of
 *     the output (consecutive threads write consecutive elements: coalesced), delinearized
 *     into idx[] for gen_value; multi-output fusions store every leaf of the same dims;
 *     leaves of other dims get kernels of their own that read the leaves already written.
 *     Column reductions (the operand's minor dimension kept) with short columns (< 32
 *     reduced elements per output) are loop kernels too: each thread reduces one output
 *     element serially, and neighbouring threads read neighbouring addresses;
 *   - column reduction with long columns (NHWC global pooling, batch norm statistics): the
 *     lanes of a warp take 32 neighbouring outputs, the warps of a block (up to 32) split the
 *     reduced elements, the partials meet in shared memory (ck_col_reduce);
 *   - row reduction (the operand's minor dimension reduced: softmax, layer norm, means): one
 *     warp per output element (8 per block) or, for long rows and few outputs, one 256-thread
 *     block; lanes stride over the reduced elements (coalesced), combine with the reducer
 *     computation, then a warp-shuffle tree (shfl.sync.down) and, for blocks, a shared-memory
 *     stage across the 8 warps. Sibling reduces of a multi-output kInput fusion share the
 *     loop, and outputs with the operand's dims (softmax's exp) are written in it. The
 *     reduced values enter gen_value's value cache at the output index, so the fusion's
 *     epilogue (mean = sum / n, rsqrt(var + eps)) is generated on top of them;
 *   - dot (alone or as the hero of a kOutput fusion) in f32/f64: a cuBLAS strided batched
 *     GEMM. An operand already stored as [batch, M, K] or [batch, K, M] (either transposition
 *     maps to cuBLAS's op flags) is read in place; any other operand (a fused prologue, a
 *     transpose, batch dims not leading, a constant) is first staged by a loop kernel into
 *     private scratch after the plan's heap. The epilogue of a kOutput fusion is a loop
 *     kernel reading the product where cuBLAS wrote it (the fusion's own output buffer, in
 *     place, unless that buffer is shared with an operand), but for bias, residual and ReLU
 *     epilogues, which cuBLASLt computes in the GEMM (cuda_gemm_epilogue.c: the kernel is
 *     kept as the fallback);
 *   - convolution (alone or the hero of a kOutput fusion) in f32 with 1 or 2 spatial dims in
 *     one of the layout pass's forms, without base dilation or reversal: a cuDNN step, NHWC
 *     input and output with a KRSC filter (b01f_01io->b01f, the filter always staged into
 *     KRSC by a small loop kernel) or NCHW with a KCRS filter (bf01_oi01->bf01, chosen by the
 *     driver for true f32, where cuDNN's Winograd and FFT algorithms apply; the filter read
 *     in place when the fusion reads it directly); the input is read in place when the
 *     fusion reads it directly and the padding is symmetric, otherwise staged with its
 *     padding made explicit (zeros).
 *     The epilogue is a loop kernel, as for dots. Workspace: reserved in temp per module;
 *   - every other convolution and dot: loop kernels (one thread per output element, the
 *     elemental generator's accumulation loop);
 *   - scatter (variadic too): a loop kernel copying the operands, then one thread applying the
 * updates in order (XLA's update order is sequential). Row reductions also serve fusions whose
 * outputs only add or drop unit dims ([8,128] -> [8,128,1]): the reduced value is entered in the
 * cache for such reshapes too. A kernel whose IR equals an earlier one's (up to its name) is
 * dropped and its step launches the earlier one (their fingerprints compared, ck_dedupe): the
 * identical layers of a deep model compile once.
 * Pointer parameters carry what the memory plan proves: readonly for those the kernel never writes,
 * noalias where no written parameter overlaps (ck_alias_facts; loads become ld.global.nc). Requires
 * a renumbered module and a memory plan (cuda_compile.c). */
#include "cuda_impl.h"
#include "layout.h"

#include <stdint.h>
#include <string.h>

#define CU_BLOCK 256     /* threads per block of loop kernels and reductions */
#define CU_MAX_GRID 8192 /* blocks of a grid-stride launch */
#define CU_VEC_SMALL                                                                               \
  65536 /* elements of a value the vectorized kernel reads per lane (a                             \
           per-channel vector behind a broadcast: cached) */
#define CU_VEC_GRID                                                                                \
  (CU_SMS * 8) /* blocks of a vectorized loop kernel: 8 per SM (8 x 256 threads fill an SM), a     \
                  multiple of the SMs */

/* ------------------------------------------------------------------ kernels and parameters */

LLVMValueRef cuda_kbuffer(GenKern *k, const HInstr *in) {
  if (k->bufs[in->idx]) return k->bufs[in->idx];
  if (!k->failed)
    hlo_err_at(k->cg->err, in, "CUDA target: internal: value not passed to the kernel");
  k->failed = true;
  return LLVMGetUndef(k->cg->ptr);
}

static bool ptr_eq(const CuPtr *a, const CuPtr *b) {
  return a->base == b->base && a->index == b->index && a->offset == b->offset;
}

/* The parameter of st for address p (added when new); bytes: what the kernel may reach from
 * it (-1: unknown, up to the end of the caller's buffer). */
static int ck_param(CuStep *st, CuPtr p, int64_t bytes) {
  for (int i = 0; i < st->nparams; i++)
    if (ptr_eq(&st->params[i], &p)) {
      if (st->psize[i] >= 0 && (bytes < 0 || bytes > st->psize[i])) st->psize[i] = bytes;
      return i;
    }
  HLO_ASSERT(st->nparams < CU_MAX_PARAMS);
  st->params[st->nparams] = p;
  st->psize[st->nparams] = bytes;
  return st->nparams++;
}

/* Make an entry instruction's storage reachable in the kernel being built: a constant's
 * global, or a pointer parameter (its number into pix[in->idx]). */
static void ck_bind_buffer(CudaCg *cc, GenKern *k, CuStep *st, const HInstr *in, int *pix) {
  GenCg *cg = &cc->cg;
  if (k->bufs[in->idx]) return;
  int64_t off = 0;
  int b = memplan_base(&cc->plan, in->idx, &off);
  const MemBuf *mb = &cc->plan.bufs[b];
  if (mb->kind == MEM_CONST) {
    LLVMValueRef gv = gen_const_global(cg, cg->entry->instrs[b]);
    LLVMValueRef ix = LLVMConstInt(cg->i64, (unsigned long long)off, 0);
    k->bufs[in->idx] = off ? LLVMConstInBoundsGEP2(cg->i8, gv, &ix, 1) : gv;
    return;
  }
  CuPtr p;
  if (!cuda_ptr_of(cc, in, &p)) return;
  pix[in->idx] = ck_param(st, p, memplan_value_bytes(&in->shape));
}

/* Start a kernel for entry instruction root: parameters are the storage of root's operands,
 * of root itself (when it has any), then the extra addresses given; *xv receives the values
 * of the extra parameters. */
GenKern *cuda_kbegin(CudaCg *cc, const HInstr *root, const char *what, int nextra,
                     const CuPtr *extra, LLVMValueRef *xv, CuStep **stp) {
  return cuda_kbegin_ex(cc, root, what, nextra, extra, xv, 0, NULL, NULL, stp);
}

GenKern *cuda_kbegin_ex(CudaCg *cc, const HInstr *root, const char *what, int nextra,
                        const CuPtr *extra, LLVMValueRef *xv, int nscalars, const int64_t *scalar,
                        LLVMValueRef *sv, CuStep **stp) {
  GenCg *cg = &cc->cg;
  CuStep *st = cuda_add_step(cc, CU_STEP_KERNEL, root);
  st->params = hlo_arena_alloc(cg->scratch, sizeof(CuPtr) * CU_MAX_PARAMS);
  st->psize = hlo_arena_alloc(cg->scratch, sizeof(int64_t) * CU_MAX_PARAMS);
  st->what = what;
  st->kidx = cc->nkernels++;
  snprintf(st->name, sizeof st->name, "%s_k%d", cc->o->name, st->kidx);
  GenKern *k = hlo_arena_alloc(cg->scratch, sizeof *k);
  k->cg = cg;
  k->B = cg->B;
  k->root = root;
  int n = cg->entry->ninstrs;
  k->bufs = hlo_arena_alloc(cg->scratch, sizeof(LLVMValueRef) * (size_t)(n + 1));
  int *pix = hlo_arena_alloc(cg->scratch, sizeof(int) * (size_t)(n + 1));
  for (int i = 0; i < n; i++)
    pix[i] = -1;
  for (int j = 0; j < root->nops; j++)
    ck_bind_buffer(cc, k, st, root->ops[j], pix);
  ck_bind_buffer(cc, k, st, root, pix);
  int xi[16];
  HLO_ASSERT(nextra <= 16);
  for (int j = 0; j < nextra; j++)
    xi[j] = ck_param(st, extra[j], -1);
  HLO_ASSERT(nscalars <= CU_MAX_SCALARS);
  st->nscalars = nscalars;
  for (int j = 0; j < nscalars; j++)
    st->scalar[j] = scalar[j];
  LLVMTypeRef *ps =
      hlo_arena_alloc(cg->scratch, sizeof(LLVMTypeRef) * (size_t)(st->nparams + nscalars + 1));
  for (int i = 0; i < st->nparams + nscalars; i++)
    ps[i] = i < st->nparams ? cg->ptr : cg->i64;
  LLVMTypeRef ft = LLVMFunctionType(cg->vd, ps, (unsigned)(st->nparams + nscalars), 0);
  k->fn = LLVMAddFunction(cg->M, st->name, ft);
  LLVMSetFunctionCallConv(k->fn, 71 /* PTX_Kernel */);
  st->fn = k->fn;
  for (int i = 0; i < n; i++)
    if (pix[i] >= 0) k->bufs[i] = LLVMGetParam(k->fn, (unsigned)pix[i]);
  for (int j = 0; j < nextra; j++)
    xv[j] = LLVMGetParam(k->fn, (unsigned)xi[j]);
  for (int j = 0; j < nscalars; j++)
    sv[j] = LLVMGetParam(k->fn, (unsigned)(st->nparams + j));
  k->entry = LLVMAppendBasicBlockInContext(cg->C, k->fn, "entry");
  LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(cg->C, k->fn, "start");
  LLVMPositionBuilderAtEnd(k->B, k->entry);
  k->entry_br = LLVMBuildBr(k->B, body);
  LLVMPositionBuilderAtEnd(k->B, body);
  *stp = st;
  return k;
}

/* The parameter number v (a pointer in the kernel) is derived from, through address
 * arithmetic; -1: shared or local memory (not a parameter), -2: cannot tell. */
static int ck_ptr_param(LLVMValueRef fn, LLVMValueRef v) {
  for (int depth = 0; depth < 64; depth++) {
    if (LLVMIsAArgument(v)) {
      for (unsigned i = 0; i < LLVMCountParams(fn); i++)
        if (LLVMGetParam(fn, i) == v) return (int)i;
      return -2;
    }
    if (LLVMIsAAllocaInst(v) || LLVMIsAGlobalVariable(v)) return -1;
    if (LLVMIsAGetElementPtrInst(v) || LLVMIsABitCastInst(v) || LLVMIsAAddrSpaceCastInst(v)) {
      v = LLVMGetOperand(v, 0);
      continue;
    }
    if (LLVMIsAConstantExpr(v) && LLVMGetNumOperands(v) > 0) {
      v = LLVMGetOperand(v, 0);
      continue;
    }
    return -2;
  }
  return -2;
}

static bool ck_overlap(const CuStep *st, int i, int j) {
  const CuPtr *a = &st->params[i], *b = &st->params[j];
  if (a->base != b->base || a->index != b->index) return false; /* distinct caller buffers */
  int64_t ae = st->psize[i] < 0 ? INT64_MAX : a->offset + st->psize[i];
  int64_t be = st->psize[j] < 0 ? INT64_MAX : b->offset + st->psize[j];
  return a->offset < be && b->offset < ae;
}

/* Aliasing facts about the parameters of kernel k: ro[i], the kernel only reads parameter i;
 * na[i], noalias holds for it: no parameter the kernel writes overlaps it (for a read
 * parameter: its loads become ld.global.nc, and LLVM may move them across the kernel's
 * stores, so the loads of an unrolled reduction loop issue together) or, for a written one,
 * no other parameter overlaps it. The facts come from the memory plan: parameters are
 * disjoint ranges of the caller's buffers (arguments, results and temp never overlap one
 * another). false (no facts) when a store's address cannot be traced to a parameter or a call
 * takes a pointer. */
static bool ck_alias_facts(GenKern *k, const CuStep *st, bool *ro, bool *na) {
  int n = st->nparams;
  for (int i = 0; i < n; i++)
    ro[i] = true;
  for (LLVMBasicBlockRef b = LLVMGetFirstBasicBlock(k->fn); b; b = LLVMGetNextBasicBlock(b))
    for (LLVMValueRef i = LLVMGetFirstInstruction(b); i; i = LLVMGetNextInstruction(i)) {
      LLVMOpcode op = LLVMGetInstructionOpcode(i);
      LLVMValueRef ptr = op == LLVMStore                                  ? LLVMGetOperand(i, 1)
                         : op == LLVMAtomicRMW || op == LLVMAtomicCmpXchg ? LLVMGetOperand(i, 0)
                                                                          : NULL;
      if (op == LLVMCall) {
        /* intrinsics taking no pointer (special registers, barriers, shuffles) only */
        int nargs = LLVMGetNumArgOperands(i);
        for (int a = 0; a < nargs; a++)
          if (LLVMGetTypeKind(LLVMTypeOf(LLVMGetOperand(i, (unsigned)a))) == LLVMPointerTypeKind)
            return false;
      }
      if (!ptr) continue;
      int pi = ck_ptr_param(k->fn, ptr);
      if (pi == -2) return false;
      if (pi >= 0) ro[pi] = false;
    }
  for (int i = 0; i < n; i++) {
    na[i] = true;
    for (int j = 0; j < n && na[i]; j++)
      if (j != i && (!ro[i] || !ro[j]) && ck_overlap(st, i, j)) na[i] = false;
  }
  return true;
}

/* Set (or, keep = true, only keep where already set) readonly and noalias on fn's
 * parameters as the facts say. */
static void ck_alias_apply(CudaCg *cc, LLVMValueRef fn, int n, const bool *ro, const bool *na,
                           bool keep) {
  LLVMContextRef C = cc->cg.C;
  const char *names[2] = {"readonly", "noalias"};
  for (int a = 0; a < 2; a++) {
    unsigned kind = LLVMGetEnumAttributeKindForName(names[a], strlen(names[a]));
    for (int i = 0; i < n; i++) {
      LLVMAttributeIndex ix = (LLVMAttributeIndex)(i + 1);
      bool fact = a == 0 ? ro[i] : na[i];
      if (keep && !fact)
        LLVMRemoveEnumAttributeAtIndex(fn, ix, kind);
      else if (!keep && fact)
        LLVMAddAttributeAtIndex(fn, ix, LLVMCreateEnumAttribute(C, kind, 0));
    }
  }
}

/* Whether constant v is, or is made of, the kernel's shared memory smem. */
static bool ck_has_smem(LLVMValueRef v, LLVMValueRef smem, int depth) {
  if (v == smem) return true;
  if (!v || depth > 8 || !LLVMIsAConstant(v) || LLVMIsAGlobalValue(v)) return false;
  int n = LLVMGetNumOperands(v);
  for (int i = 0; i < n; i++)
    if (ck_has_smem(LLVMGetOperand(v, (unsigned)i), smem, depth + 1)) return true;
  return false;
}

/* Tokens of constant v reaching smem: smem itself as "this kernel's shared memory of its
 * type", a constant made of it spelled out (its opcode, type, operands; a GEP's source type
 * and inbounds flag). Tags of low bits 4 are never a pointer's, a local's or a hole's. */
static void ck_tok_smem(GenFp *f, LLVMValueRef v, LLVMValueRef smem) {
  if (v == smem) {
    gen_fp_tok(f, (0x5E3ull << 3) | 4);
    gen_fp_tokp(f, LLVMGlobalGetValueType(smem));
    return;
  }
  if (!ck_has_smem(v, smem, 0)) {
    gen_fp_tokp(f, v);
    return;
  }
  bool ce = LLVMIsAConstantExpr(v);
  gen_fp_tok(f, ((uint64_t)(ce ? LLVMGetConstOpcode(v) : 0) << 8 | 0xC0) << 3 | 4);
  gen_fp_tokp(f, LLVMTypeOf(v));
  if (ce && LLVMGetConstOpcode(v) == LLVMGetElementPtr) {
    gen_fp_tokp(f, LLVMGetGEPSourceElementType(v));
    gen_fp_tok(f, LLVMIsInBounds(v));
  }
  int n = LLVMGetNumOperands(v);
  gen_fp_tok(f, (uint64_t)n);
  for (int i = 0; i < n; i++)
    ck_tok_smem(f, LLVMGetOperand(v, (unsigned)i), smem);
}

/* The fingerprint's say over the operands of a kernel with shared memory (ctx: the global):
 * the global is named after its kernel, one per kernel, so by identity two identical kernels
 * would differ. */
static bool ck_fp_operand(void *ctx, GenFp *f, LLVMValueRef in, int k, LLVMValueRef v) {
  (void)in, (void)k;
  if (!ck_has_smem(v, ctx, 0)) return false;
  ck_tok_smem(f, v, ctx);
  return true;
}

/* Identical kernels (the same IR up to names: the layers of a deep model) are generated once;
 * *st then launches the first one. Their fingerprints (gen_fingerprint; the kernel's own
 * shared memory, cuda_smem, by its type, ck_fp_operand) are compared before the parameters
 * get their aliasing attributes (ck_alias_facts), which depend on the memory plan: a shared
 * kernel keeps those true for every step launching it. */
static void ck_dedupe(CudaCg *cc, GenKern *k, CuStep *st) {
  int np = st->nparams;
  bool *ro = hlo_arena_alloc(cc->cg.scratch, (size_t)np + 1),
       *na = hlo_arena_alloc(cc->cg.scratch, (size_t)np + 1);
  if (!ck_alias_facts(k, st, ro,
                      na)) { /* none known: nothing set, and a shared kernel drops its own */
    memset(ro, 0, (size_t)np);
    memset(na, 0, (size_t)np);
  }
  char sname[112];
  snprintf(sname, sizeof sname, "%s_smem", st->name);
  LLVMValueRef smem = LLVMGetNamedGlobal(cc->cg.M, sname);
  GenFp *fp = &cc->fp;
  gen_fingerprint(k->fn, fp, smem ? ck_fp_operand : NULL, smem);
  uint64_t hsh = 1469598103934665603ull;
  for (size_t i = 0; i < fp->n; i++)
    hsh = (hsh ^ fp->t[i]) * 1099511628211ull;
  for (int i = 0; i < cc->nuniq && !fp->opaque; i++) {
    CuUniq *u = &cc->uniq[i];
    if (u->hash != hsh || u->n != fp->n || memcmp(u->t, fp->t, fp->n * sizeof *fp->t)) continue;
    HLO_ASSERT(st->kidx == cc->nkernels - 1);
    /* the same code for another plan: keep only the facts true of both */
    ck_alias_apply(cc, u->step->fn, np, ro, na, true);
    LLVMDeleteFunction(k->fn);
    if (smem) LLVMDeleteGlobal(smem);
    cc->nkernels--;
    st->kidx = u->step->kidx;
    st->fn = u->step->fn;
    memcpy(st->name, u->step->name, sizeof st->name);
    return;
  }
  if (!fp->opaque) {
    cc->uniq =
        hlo_arena_grow(cc->cg.scratch, cc->uniq, cc->nuniq, &cc->uniq_cap, 64, sizeof *cc->uniq);
    uint64_t *keep = hlo_arena_alloc(cc->cg.scratch, fp->n * sizeof *keep + 1);
    memcpy(keep, fp->t, fp->n * sizeof *keep);
    cc->uniq[cc->nuniq++] = (CuUniq){hsh, keep, fp->n, st};
  }
  ck_alias_apply(cc, k->fn, np, ro, na, false);
}

bool cuda_kend(GenKern *k) {
  LLVMBuildRetVoid(k->B);
  if (!k->failed) {
    CudaCg *cc = (CudaCg *)k->cg; /* cg is CudaCg's first member */
    ck_dedupe(cc, k, &cc->steps[cc->nsteps - 1]);
  }
  return !k->failed;
}

void cuda_kbind_fusion(GenKern *k, const HInstr *in) {
  if (in->op == OP_FUSION) k->bind[k->nbind++] = (GenBind){in->calls[0], in, NULL, 0, k->ncache};
}

/* ------------------------------------------------------------------ thread indexing, loops */

LLVMValueRef cuda_intrinsic(GenKern *k, const char *name, LLVMTypeRef overload, LLVMValueRef *args,
                            int n) {
  unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
  HLO_ASSERT(id != 0);
  size_t nt = overload && LLVMIntrinsicIsOverloaded(id) ? 1 : 0;
  LLVMValueRef f = LLVMGetIntrinsicDeclaration(k->cg->M, id, nt ? &overload : NULL, nt);
  LLVMTypeRef ft = LLVMIntrinsicGetType(k->cg->C, id, nt ? &overload : NULL, nt);
  return LLVMBuildCall2(k->B, ft, f, args, (unsigned)n, "");
}

void cuda_launch_bounds(GenKern *k, int64_t threads, int min_blocks) {
  LLVMContextRef C = k->cg->C;
  LLVMTypeRef i32 = LLVMInt32TypeInContext(C);
  const char *key[2] = {"maxntidx", "minctasm"};
  int64_t val[2] = {threads, min_blocks};
  for (int i = 0; i < 2; i++) {
    LLVMMetadataRef md[3] = {LLVMValueAsMetadata(k->fn),
                             LLVMMDStringInContext2(C, key[i], strlen(key[i])),
                             LLVMValueAsMetadata(LLVMConstInt(i32, (unsigned long long)val[i], 0))};
    LLVMAddNamedMetadataOperand(k->cg->M, "nvvm.annotations",
                                LLVMMetadataAsValue(C, LLVMMDNodeInContext2(C, md, 3)));
  }
}

LLVMValueRef cuda_sreg(GenKern *k, const char *name) {
  return LLVMBuildZExt(k->B, cuda_intrinsic(k, name, NULL, NULL, 0), k->cg->i64, "");
}

LLVMBasicBlockRef cuda_if(GenKern *k, LLVMValueRef c, int *mark) {
  LLVMBasicBlockRef then = LLVMAppendBasicBlockInContext(k->cg->C, k->fn, "then");
  LLVMBasicBlockRef join = LLVMAppendBasicBlockInContext(k->cg->C, k->fn, "join");
  LLVMBuildCondBr(k->B, c, then, join);
  LLVMPositionBuilderAtEnd(k->B, then);
  *mark = k->ncache;
  return join;
}

void cuda_endif(GenKern *k, LLVMBasicBlockRef join, int mark) {
  LLVMBuildBr(k->B, join);
  LLVMPositionBuilderAtEnd(k->B, join);
  k->ncache = mark;
}

LLVMValueRef cuda_lin(GenKern *k, LLVMValueRef a, int64_t m, LLVMValueRef b) {
  return LLVMBuildNSWAdd(k->B, LLVMBuildNSWMul(k->B, a, gen_i64(k, m), ""), b, "");
}

LLVMValueRef cuda_fma(GenKern *k, LLVMValueRef x, LLVMValueRef y, LLVMValueRef z) {
  LLVMValueRef args[3] = {x, y, z};
  return cuda_intrinsic(k, "llvm.fma", k->cg->f32, args, 3);
}

static int64_t ck_grid(int64_t work, int64_t per_block) {
  int64_t g = (work + per_block - 1) / per_block;
  return g < 1 ? 1 : g > CU_MAX_GRID ? CU_MAX_GRID : g;
}

/* Pointer (entry block) to leaf j of a tuple-shaped value stored at p. */
LLVMValueRef cuda_leaf_ptr(GenKern *k, LLVMValueRef p, const Shape *s, int j) {
  LLVMBasicBlockRef cur = LLVMGetInsertBlock(k->B);
  LLVMPositionBuilderBefore(k->B, k->entry_br);
  LLVMValueRef ix = gen_i64(k, memplan_tuple_offset(s, j));
  LLVMValueRef lp = LLVMBuildInBoundsGEP2(k->B, k->cg->i8, p, &ix, 1, "");
  LLVMPositionBuilderAtEnd(k->B, cur);
  return lp;
}

void cuda_grid_loop(GenKern *k, CuStep *st, const Shape *ls, CkBody body, void *ctx) {
  int64_t total = hlo_shape_elems(ls);
  st->block = CU_BLOCK;
  if (!st->grid) st->grid = ck_grid(total, CU_BLOCK);
  LLVMValueRef tid = cuda_sreg(k, "llvm.nvvm.read.ptx.sreg.tid.x");
  LLVMValueRef bid = cuda_sreg(k, "llvm.nvvm.read.ptx.sreg.ctaid.x");
  LLVMValueRef start =
      LLVMBuildNSWAdd(k->B, LLVMBuildNSWMul(k->B, bid, gen_i64(k, CU_BLOCK), ""), tid, "");
  GenLoop l;
  LLVMValueRef i =
      gen_loop_open_step(k, &l, start, gen_i64(k, total), gen_i64(k, st->grid * CU_BLOCK));
  LLVMValueRef idx[HLO_MAX_RANK];
  gen_delin(k, i, ls->dims, ls->rank, idx);
  k->lin_idx = idx;
  k->lin = i;
  k->lin_shape = ls;
  body(k, idx, ctx);
  k->lin_idx = NULL;
  gen_loop_close(k, &l);
}

/* ------------------------------------------------------------------ loop kernels */

typedef struct LoopCtx {
  const HInstr *in; /* the entry instruction */
  bool *leaves;     /* tuple roots: which leaves to store (NULL: all) */
  LLVMValueRef out; /* its storage */
} LoopCtx;

static bool ck_loop_body(GenKern *k, LLVMValueRef *idx, void *vctx) {
  LoopCtx *c = vctx;
  const HInstr *in = c->in;
  const Shape *s = &in->shape;
  if (s->dt != DT_TUPLE) {
    LLVMValueRef v = gen_value(k, in, idx);
    if (v) gen_store_elem(k, c->out, s, idx, v);
    return v != NULL;
  }
  if (in->op == OP_REDUCE) {
    LLVMValueRef vals[HLO_MAX_RANK * 2];
    if (s->ntuple > HLO_MAX_RANK * 2 || !gen_value_multi(k, in, idx, vals)) return false;
    for (int j = 0; j < s->ntuple; j++)
      gen_store_elem(k, cuda_leaf_ptr(k, c->out, s, j), &s->tuple[j], idx, vals[j]);
    return true;
  }
  const HInstr *froot = in->calls[0]->root;
  for (int j = 0; j < s->ntuple && !k->failed; j++) {
    if (c->leaves && !c->leaves[j]) continue;
    LLVMValueRef v = gen_value(k, froot->ops[j], idx);
    if (v) gen_store_elem(k, cuda_leaf_ptr(k, c->out, s, j), &s->tuple[j], idx, v);
  }
  return !k->failed;
}

/* One loop kernel over ls storing in (leaves selected by `leaves`); mat: leaves already
 * stored by earlier kernels (read instead of recomputed). */
static bool ck_loop_kernel(CudaCg *cc, HInstr *in, const Shape *ls, bool *leaves, const bool *mat) {
  CuStep *st;
  GenKern *k = cuda_kbegin(cc, in, "loop", 0, NULL, NULL, &st);
  cuda_kbind_fusion(k, in);
  LoopCtx c = {in, leaves, cuda_kbuffer(k, in)};
  if (mat)
    for (int j = 0; j < in->shape.ntuple && k->nmat < GEN_MAX_MAT; j++)
      if (mat[j])
        k->mat[k->nmat++] = (GenMat){in->calls[0]->root->ops[j],
                                     cuda_leaf_ptr(k, c.out, &in->shape, j), DT_INVALID};
  cuda_grid_loop(k, st, ls, ck_loop_body, &c);
  return cuda_kend(k);
}

/* ------------------------------------------------------------------ vectorized loop kernels */

/* mark[i] = c->instrs[i] is `from` or an operand ancestor of it, not looking through `stop`
 * (stop itself is marked when reached). One backward sweep: instructions are in dependency
 * order. mark has c->ninstrs entries. */
static void ck_ancestors(const HComp *c, const HInstr *from, const HInstr *stop, bool *mark) {
  memset(mark, 0, (size_t)c->ninstrs);
  for (int i = c->ninstrs - 1; i >= 0; i--) {
    const HInstr *x = c->instrs[i];
    if (x == from) mark[i] = true;
    if (!mark[i] || x == stop) continue;
    for (int j = 0; j < x->nops; j++)
      for (int q = i - 1; q >= 0; q--)
        if (c->instrs[q] == x->ops[j]) {
          mark[q] = true;
          break;
        }
  }
}

/* Lanes of the vectorized loop kernel for an output of type t: 16 bytes of it (4 f32/s32/u32,
 * 8 bf16/f16/s16/u16), 0 for the other types. */
static int ck_vec_lanes(DType t) {
  if (t == DT_F32 || t == DT_S32 || t == DT_U32) return 4;
  if (t == DT_BF16 || t == DT_F16 || t == DT_S16 || t == DT_U16) return 8;
  return 0;
}

/* Whether in may use the vectorized loop kernel: one 4-byte (f32/s32/u32) or 2-byte output
 * whose element count is a multiple of its lanes, computed by elementwise ops only (a lone
 * elementwise op, or a fusion of elementwise ops, parameters, constants and broadcasts), so that
 * every operand is read at the output's own index or is small (a scalar, a per-channel vector
 * behind a broadcast: read per lane). With hero (a dot or convolution whose value a library
 * wrote), only the members the epilogue computes count; hero must have the output's dims. */
static bool ck_vec_ok(const HInstr *in, const HInstr *hero, HArena *scratch) {
  const Shape *s = &in->shape;
  int lanes = ck_vec_lanes(s->dt);
  int64_t n = hlo_shape_elems(s);
  if (!lanes || n < lanes || n % lanes) return false;
  if (in->op != OP_FUSION) {
    for (int j = 0; j < in->nops; j++) {
      const Shape *os = &in->ops[j]->shape;
      if (os->dt == DT_TUPLE || (!hlo_shape_same_dims(os, s) && hlo_shape_elems(os) != 1))
        return false;
    }
    return (hlo_op_flags(in->op) & OPF_ELEM) != 0;
  }
  const HComp *c = in->calls[0];
  bool *epi =
      hlo_arena_alloc(scratch, (size_t)c->ninstrs + 1); /* the members the kernel generates */
  ck_ancestors(c, c->root, hero, epi);
  bool ok = true;
  for (int i = 0; i < c->ninstrs && ok; i++) {
    const HInstr *x = c->instrs[i];
    const Shape *xs = &x->shape;
    bool same = hlo_shape_same_dims(xs, s), small = hlo_shape_elems(xs) <= CU_VEC_SMALL;
    if (xs->dt == DT_TUPLE)
      ok = false;
    else if (x == hero)
      ok = same;
    else if (!epi[i])
      continue; /* only feeds the hero */
    else if (x->op == OP_PARAMETER || x->op == OP_CONSTANT)
      ok = same || small;
    else if (x->op == OP_BROADCAST)
      ok = hlo_shape_elems(&x->ops[0]->shape) <= CU_VEC_SMALL;
    else
      ok = small || ((hlo_op_flags(x->op) & OPF_ELEM) && same);
  }
  return ok;
}

/* The vectorized loop kernel (ck_vec_ok): each thread of a CU_VEC_GRID-block grid-stride
 * loop takes L consecutive elements Li..Li+L-1 (L = 4 for a 4-byte output, 8 for a 2-byte
 * one): every 2- or 4-byte operand of the output's dims held in a buffer (not a constant) is
 * read with 16-byte vector loads (ld.global.v4; two for a 4-byte operand of 8 lanes), its lanes
 * entered in gen_value's value cache at the lanes' indices, the generator runs once per lane,
 * and the L results are written with one 16-byte vector store. Buffers are normally 16-byte
 * aligned (the plan's temp offsets are multiples of 64, cudaMalloc returns 256-aligned
 * memory), but a caller may pass any pointer: the kernel tests the addresses it vectorizes
 * and otherwise runs the scalar grid-stride loop (the same body as ck_loop_kernel). */
static bool ck_vec_kernel(CudaCg *cc, HInstr *in, const HInstr *hero, CuPtr hp) {
  GenCg *cg = &cc->cg;
  CuStep *st;
  LLVMValueRef hv = NULL;
  const Shape *s = &in->shape;
  int L = ck_vec_lanes(s->dt);
  const char *what = L == 8 ? (hero ? "epilogue-v8" : "loop-v8") : hero ? "epilogue-v4" : "loop-v4";
  GenKern *k = cuda_kbegin(cc, in, what, hero ? 1 : 0, &hp, &hv, &st);
  cuda_kbind_fusion(k, in);
  LLVMBuilderRef B = k->B;
  int64_t nvec = hlo_shape_elems(s) / L;
  LLVMValueRef out = cuda_kbuffer(k, in);
  /* operands loaded as vectors, and the alignment test of their addresses and the output's */
  const HInstr *vops[CU_MAX_PARAMS + 1];
  LLVMValueRef vptr[CU_MAX_PARAMS + 1];
  int nvops = 0;
  LLVMValueRef bits = LLVMBuildPtrToInt(B, out, cg->i64, "");
  bool *epi = NULL; /* with a hero: the fused members the epilogue computes */
  if (hero) {       /* the dot/convolution's result, where the library wrote it */
    epi = hlo_arena_alloc(cg->scratch, (size_t)in->calls[0]->ninstrs + 1);
    ck_ancestors(in->calls[0], in->calls[0]->root, hero, epi);
    k->mat[k->nmat++] = (GenMat){hero, hv, DT_INVALID};
    vops[nvops] = hero;
    vptr[nvops++] = hv;
    bits = LLVMBuildOr(B, bits, LLVMBuildPtrToInt(B, hv, cg->i64, ""), "");
  }
  for (int j = 0; j < in->nops && j < CU_MAX_PARAMS; j++) {
    const HInstr *op = in->ops[j];
    bool dup = false;
    for (int q = 0; q < nvops; q++)
      dup |= vops[q] == op;
    size_t osz = hlo_dtype_size(op->shape.dt);
    if (dup || !hlo_shape_same_dims(&op->shape, s) || op->shape.dt == DT_PRED ||
        (osz != 4 && osz != 2) || (L == 4 && osz != 4))
      continue;
    if (epi) { /* operands only the hero reads (its input) are not the epilogue's */
      bool used = false;
      for (int i = 0; i < in->calls[0]->ninstrs; i++) {
        const HInstr *x = in->calls[0]->instrs[i];
        used |= epi[i] && x->op == OP_PARAMETER && x->param_num == j;
      }
      if (!used) continue;
    }
    int64_t off = 0;
    if (cc->plan.bufs[memplan_base(&cc->plan, op->idx, &off)].kind == MEM_CONST) continue;
    vops[nvops] = op;
    vptr[nvops++] = cuda_kbuffer(k, op);
    bits = LLVMBuildOr(B, bits, LLVMBuildPtrToInt(B, cuda_kbuffer(k, op), cg->i64, ""), "");
  }
  LLVMValueRef aligned =
      LLVMBuildICmp(B, LLVMIntEQ, LLVMBuildAnd(B, bits, gen_i64(k, 15), ""), gen_i64(k, 0), "");
  LLVMBasicBlockRef vbb = LLVMAppendBasicBlockInContext(cg->C, k->fn, "vec");
  LLVMBasicBlockRef sbb = LLVMAppendBasicBlockInContext(cg->C, k->fn, "scalar");
  LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(cg->C, k->fn, "done");
  LLVMBuildCondBr(B, aligned, vbb, sbb);
  st->block = CU_BLOCK;
  st->grid = ck_grid(nvec, CU_BLOCK);
  if (st->grid > CU_VEC_GRID) st->grid = CU_VEC_GRID;

  LLVMPositionBuilderAtEnd(B, vbb);
  int mark = k->ncache;
  LLVMValueRef tid = cuda_sreg(k, "llvm.nvvm.read.ptx.sreg.tid.x");
  LLVMValueRef bid = cuda_sreg(k, "llvm.nvvm.read.ptx.sreg.ctaid.x");
  LLVMValueRef start =
      LLVMBuildNSWAdd(B, LLVMBuildNSWMul(B, bid, gen_i64(k, CU_BLOCK), ""), tid, "");
  GenLoop l;
  LLVMValueRef i =
      gen_loop_open_step(k, &l, start, gen_i64(k, nvec), gen_i64(k, st->grid * CU_BLOCK));
  LLVMValueRef base = LLVMBuildNSWMul(B, i, gen_i64(k, L), "");
  LLVMValueRef lin[8], idx[8][HLO_MAX_RANK];
  for (int ln = 0; ln < L; ln++) {
    lin[ln] = ln ? LLVMBuildNSWAdd(B, base, gen_i64(k, ln), "") : base;
    gen_delin(k, lin[ln], s->dims, s->rank, idx[ln]);
  }
  for (int q = 0; q < nvops; q++) {
    LLVMTypeRef mt = gen_mem_type(cg, vops[q]->shape.dt);
    LLVMValueRef p = LLVMBuildInBoundsGEP2(B, mt, vptr[q], &base, 1, "");
    LLVMValueRef v = LLVMBuildLoad2(B, LLVMVectorType(mt, (unsigned)L), p, "");
    LLVMSetAlignment(v, 16);
    for (int ln = 0; ln < L; ln++)
      gen_cache_add(k, vops[q], s->rank, idx[ln],
                    LLVMBuildExtractElement(B, v, gen_i64(k, ln), ""));
  }
  LLVMTypeRef ot = gen_mem_type(cg, s->dt);
  LLVMValueRef acc = LLVMGetUndef(LLVMVectorType(ot, (unsigned)L));
  for (int ln = 0; ln < L && !k->failed; ln++) {
    k->lin_idx = idx[ln];
    k->lin = lin[ln];
    k->lin_shape = s;
    LLVMValueRef v = gen_value(k, in, idx[ln]);
    if (v) acc = LLVMBuildInsertElement(B, acc, v, gen_i64(k, ln), "");
  }
  k->lin_idx = NULL;
  LLVMValueRef sp = LLVMBuildStore(B, acc, LLVMBuildInBoundsGEP2(B, ot, out, &base, 1, ""));
  LLVMSetAlignment(sp, 16);
  gen_loop_close(k, &l);
  k->ncache = mark;
  LLVMBuildBr(B, done);

  LLVMPositionBuilderAtEnd(B, sbb);
  LoopCtx c = {in, NULL, out};
  cuda_grid_loop(k, st, s, ck_loop_body, &c);
  k->ncache = mark;
  LLVMBuildBr(B, done);
  LLVMPositionBuilderAtEnd(B, done);
  return cuda_kend(k);
}

/* A multi-output fusion whose leaves differ in dims: a kernel per group of same-dims
 * leaves, non-reductions first. */
static bool ck_multi_fusion(CudaCg *cc, HInstr *in) {
  const Shape *s = &in->shape;
  const HInstr *root = in->calls[0]->root;
  int n = s->ntuple;
  if (n > 64) {
    hlo_err_at(cc->cg.err, in, "CUDA target: too many outputs");
    return false;
  }
  bool done[64] = {0};
  for (int pass = 0; pass < 2; pass++)
    for (int j = 0; j < n; j++) {
      if (done[j] || (pass == 0) == (root->ops[j]->op == OP_REDUCE)) continue;
      bool group[64] = {0};
      for (int g = j; g < n; g++)
        if (!done[g] && (pass == 0) != (root->ops[g]->op == OP_REDUCE) &&
            hlo_shape_same_dims(&s->tuple[g], &s->tuple[j]))
          group[g] = true;
      if (!ck_loop_kernel(cc, in, &s->tuple[j], group, done)) return false;
      for (int g = 0; g < n; g++)
        done[g] = done[g] || group[g];
    }
  return true;
}

/* The epilogue of a kOutput fusion whose hero (dot or convolution) a library call wrote at
 * hp: a vectorized loop kernel when the fusion allows (ck_vec_ok), else a loop kernel, both
 * reading the hero's value from hp. */
static bool ck_epilogue(CudaCg *cc, HInstr *in, const HInstr *hero, CuPtr hp) {
  if (ck_vec_ok(in, hero, cc->cg.scratch)) return ck_vec_kernel(cc, in, hero, hp);
  CuStep *st;
  LLVMValueRef dp;
  GenKern *k = cuda_kbegin(cc, in, "epilogue", 1, &hp, &dp, &st);
  cuda_kbind_fusion(k, in);
  k->mat[k->nmat++] = (GenMat){hero, dp, DT_INVALID};
  LoopCtx c = {in, NULL, cuda_kbuffer(k, in)};
  cuda_grid_loop(k, st, &in->shape, ck_loop_body, &c);
  return cuda_kend(k);
}

/* ------------------------------------------------------------------ row reductions */

#define CU_MAX_HEROES 8

typedef struct RowPlan {
  const HComp *comp;                 /* fused computation (NULL: a lone reduce) */
  int nh;                            /* reduces sharing the loop */
  const HInstr *hero[CU_MAX_HEROES]; /* them */
  const Shape *os;                   /* their operand's shape */
  bool red[HLO_MAX_RANK];            /* reduced operand dims */
  int64_t R, K;                      /* output elements, reduced elements per output */
  bool block;                        /* one block (not one warp) per output element */
  bool col;                          /* the operand's minor dim is kept: column scheme */
  int64_t split;                     /* blocks sharing one output's reduced elements (>= 1) */
  bool chain;                        /* heroes feed one another (softmax: max, then the sum of
                                        exp(x - max)): one pass each, then one for the output,
                                        which has the operand's dims */
} RowPlan;

/* Whether a and b have the same dims once size-1 dims are dropped (a reshape between them
 * only adds or removes unit dims). */
static bool ck_squeeze_eq(const Shape *a, const Shape *b) {
  int i = 0, j = 0;
  for (;;) {
    while (i < a->rank && a->dims[i] == 1)
      i++;
    while (j < b->rank && b->dims[j] == 1)
      j++;
    if (i == a->rank || j == b->rank) return i == a->rank && j == b->rank;
    if (a->dims[i++] != b->dims[j++]) return false;
  }
}

/* The index into `to` of the element at index fidx of `from` (ck_squeeze_eq shapes). */
static void ck_squeeze_idx(GenKern *k, const Shape *from, LLVMValueRef *fidx, const Shape *to,
                           LLVMValueRef *tidx) {
  int i = 0;
  for (int j = 0; j < to->rank; j++) {
    if (to->dims[j] == 1) {
      tidx[j] = LLVMConstInt(k->cg->i64, 0, 0);
      continue;
    }
    while (from->dims[i] == 1)
      i++;
    tidx[j] = fidx[i++];
  }
}

static bool ck_row_plan(const HInstr *in, RowPlan *p, HArena *scratch) {
  memset(p, 0, sizeof *p);
  if (in->op == OP_REDUCE) {
    p->hero[p->nh++] = in;
  } else if (in->op == OP_FUSION) {
    p->comp = in->calls[0];
    for (int i = 0; i < p->comp->ninstrs; i++) {
      const HInstr *x = p->comp->instrs[i];
      if (x->op == OP_DOT || x->op == OP_CONVOLUTION || x->op == OP_REDUCE_WINDOW) return false;
      if (x->op != OP_REDUCE) continue;
      if (p->nh == CU_MAX_HEROES) return false;
      p->hero[p->nh++] = x;
    }
  }
  if (p->nh == 0) return false;
  const HInstr *h0 = p->hero[0];
  for (int i = 0; i < p->nh; i++) {
    const HInstr *h = p->hero[i];
    if (h->nops != 2 || h->shape.dt == DT_TUPLE || h->shape.dt == DT_PRED) return false;
    /* the warp shuffles and shared-memory trees move scalar registers: complex ({re, im})
     * and 4-bit sums take the loop kernel (gen_value's elemental reduce) */
    if (hlo_dtype_is_complex(h->shape.dt) || hlo_dtype_is_int4(h->shape.dt)) return false;
    if (!hlo_shape_same_dims(&h->ops[0]->shape, &h0->ops[0]->shape) || h->dims.n != h0->dims.n)
      return false;
    for (int j = 0; j < h->dims.n; j++)
      if (h->dims.v[j] != h0->dims.v[j]) return false;
    if (p->nh > 1) { /* a hero fed by another: the passes chain (in the body's order) */
      bool *anc = hlo_arena_alloc(scratch, (size_t)p->comp->ninstrs + 1);
      ck_ancestors(p->comp, h->ops[0], NULL, anc);
      for (int q = 0; q < p->comp->ninstrs; q++)
        for (int j = 0; j < p->nh; j++)
          if (anc[q] && j != i && p->comp->instrs[q] == p->hero[j]) p->chain = true;
    }
    if (hlo_dtype_size(h->shape.dt) > 8) return false;
  }
  p->os = &h0->ops[0]->shape;
  for (int j = 0; j < h0->dims.n; j++)
    p->red[h0->dims.v[j]] = true;
  int minor = -1;
  for (int d = p->os->rank - 1; d >= 0 && minor < 0; d--)
    if (p->os->dims[d] > 1) minor = d;
  if (minor < 0) return false;
  p->col = !p->red[minor]; /* minor dim kept: lanes take neighbouring outputs */
  p->R = hlo_shape_elems(&h0->shape);
  p->K = hlo_shape_elems(p->os) / (p->R ? p->R : 1);
  if (p->R == 0 || p->K < 2) return false;
  if (p->col && p->K < 32) return false; /* short columns: the loop kernel, one output per thread */
  /* outputs: the reduce's dims (epilogue) or the operand's dims (multi-output loop leaves) */
  const Shape *s = &in->shape;
  if (p->chain) { /* a warp per row, rows short enough to be read once a pass from L1/L2 */
    p->split = 1;
    return !p->col && p->K <= 8192 && s->dt != DT_TUPLE && hlo_shape_same_dims(s, p->os);
  }
  if (s->dt == DT_TUPLE) {
    if (in->op != OP_FUSION || p->comp->root->op != OP_TUPLE) return false;
    for (int j = 0; j < s->ntuple; j++)
      if (!ck_squeeze_eq(&s->tuple[j], &h0->shape) && !hlo_shape_same_dims(&s->tuple[j], p->os))
        return false;
  } else if (!ck_squeeze_eq(s, &h0->shape)) {
    return false;
  }
  p->block = !p->col && p->K >= 2048 && p->R < 4 * CU_SMS;
  /* few outputs with long reductions (batch-norm statistics: 64 channels of 1.6M elements):
   * split each output's elements over several blocks so that about 4 blocks per SM run,
   * partials combined by a second kernel (ck_split_finish) */
  p->split = 1;
  if (p->block || p->col) {
    int64_t blocks = p->col ? (p->R + 31) / 32 : p->R, want = p->col ? 2 * CU_SMS : 4 * CU_SMS;
    int64_t minper = p->col ? 256 : 2048; /* reduced elements per block slice, at least */
    int64_t sp = (want + blocks - 1) / blocks;
    if (sp > 256) sp = 256;
    if (sp > p->K / minper) sp = p->K / minper;
    while (sp > 1 && blocks * sp > CU_MAX_GRID)
      sp--;
    if (sp > 1) p->split = sp;
  }
  return true;
}

LLVMValueRef cuda_shfl(GenKern *k, LLVMValueRef v, int off, CuShfl mode) {
  GenCg *cg = k->cg;
  LLVMBuilderRef B = k->B;
  LLVMTypeRef ty = LLVMTypeOf(v);
  LLVMTypeKind tk = LLVMGetTypeKind(ty);
  unsigned bits = tk == LLVMIntegerTypeKind  ? LLVMGetIntTypeWidth(ty)
                  : tk == LLVMDoubleTypeKind ? 64
                  : tk == LLVMFloatTypeKind  ? 32
                                             : 16;
  LLVMTypeRef ity = LLVMIntTypeInContext(cg->C, bits);
  LLVMValueRef iv = tk == LLVMIntegerTypeKind ? v : LLVMBuildBitCast(B, v, ity, "");
  static const char *const names[] = {"llvm.nvvm.shfl.sync.down.i32",
                                      "llvm.nvvm.shfl.sync.bfly.i32",
                                      "llvm.nvvm.shfl.sync.idx.i32"};
  const char *nm = names[mode];
  LLVMValueRef mask = LLVMConstInt(cg->i32, 0xffffffffu, 0), c = LLVMConstInt(cg->i32, 31, 0);
  LLVMValueRef o = LLVMConstInt(cg->i32, (unsigned)off, 0);
  LLVMValueRef r;
  if (bits <= 32) {
    LLVMValueRef w = bits == 32 ? iv : LLVMBuildZExt(B, iv, cg->i32, "");
    LLVMValueRef a[4] = {mask, w, o, c};
    r = cuda_intrinsic(k, nm, NULL, a, 4);
    if (bits < 32) r = LLVMBuildTrunc(B, r, ity, "");
  } else {
    LLVMValueRef lo = LLVMBuildTrunc(B, iv, cg->i32, "");
    LLVMValueRef hi =
        LLVMBuildTrunc(B, LLVMBuildLShr(B, iv, LLVMConstInt(cg->i64, 32, 0), ""), cg->i32, "");
    LLVMValueRef a1[4] = {mask, lo, o, c}, a2[4] = {mask, hi, o, c};
    LLVMValueRef rl = LLVMBuildZExt(B, cuda_intrinsic(k, nm, NULL, a1, 4), cg->i64, "");
    LLVMValueRef rh = LLVMBuildZExt(B, cuda_intrinsic(k, nm, NULL, a2, 4), cg->i64, "");
    r = LLVMBuildOr(B, rl, LLVMBuildShl(B, rh, LLVMConstInt(cg->i64, 32, 0), ""), "");
  }
  return tk == LLVMIntegerTypeKind ? r : LLVMBuildBitCast(B, r, ty, "");
}

void cuda_barrier(GenKern *k) { cuda_intrinsic(k, "llvm.nvvm.barrier0", NULL, NULL, 0); }

/* acc[h] = reducer_h(acc[h], v[h]) for every hero. */
static bool ck_combine(GenKern *k, const RowPlan *p, LLVMValueRef *acc, LLVMValueRef *v) {
  for (int h = 0; h < p->nh; h++) {
    LLVMValueRef args[2] = {acc[h], v[h]}, res[1];
    if (!gen_scalar_comp(k, p->hero[h]->calls[0], args, 2, res)) return false;
    acc[h] = res[0];
  }
  return true;
}

static void ck_shfl_tree_mode(GenKern *k, const RowPlan *p, LLVMValueRef *acc, int from,
                              CuShfl mode) {
  for (int off = from; off >= 1 && !k->failed; off /= 2) {
    LLVMValueRef o[CU_MAX_HEROES];
    for (int h = 0; h < p->nh; h++)
      o[h] = cuda_shfl(k, acc[h], off, mode);
    ck_combine(k, p, acc, o);
  }
}

/* The lanes' partials combined into lane 0 (down) of each warp. */
static void ck_shfl_tree(GenKern *k, const RowPlan *p, LLVMValueRef *acc, int from) {
  ck_shfl_tree_mode(k, p, acc, from, CU_SHFL_DOWN);
}

LLVMValueRef cuda_smem(GenKern *k, CuStep *st, LLVMTypeRef elt, int64_t n) {
  GenCg *cg = k->cg;
  LLVMTypeRef at = LLVMArrayType2(elt, (uint64_t)n);
  char nm[128];
  snprintf(nm, sizeof nm, "%s_smem", st->name);
  LLVMValueRef smem = LLVMAddGlobalInAddressSpace(cg->M, at, nm, 3);
  LLVMSetInitializer(smem, LLVMGetUndef(at));
  LLVMSetLinkage(smem, LLVMInternalLinkage);
  LLVMSetAlignment(smem, 16);
  LLVMTypeKind tk = LLVMGetTypeKind(elt);
  int64_t size = tk == LLVMIntegerTypeKind ? LLVMGetIntTypeWidth(elt) / 8
                 : tk == LLVMFloatTypeKind ? 4
                                           : 8;
  st->smem = size * n;
  return smem;
}

/* Slot i of shared array smem. */
static LLVMValueRef ck_smem_at(GenKern *k, LLVMValueRef smem, LLVMValueRef i) {
  LLVMValueRef ix[2] = {gen_i64(k, 0), i};
  return LLVMBuildInBoundsGEP2(k->B, LLVMGlobalGetValueType(smem), smem, ix, 2, "");
}

/* The outputs of the reduce's dims at output index oidx, from the reduced values acc: the
 * values enter the cache (with reshapes that only add or drop unit dims), then the fusion's
 * root (or each such tuple leaf) is generated on top of them and stored. */
static void ck_reduce_cache(GenKern *k, const RowPlan *p, LLVMValueRef *oidx, LLVMValueRef *acc) {
  const HInstr *h0 = p->hero[0];
  for (int h = 0; h < p->nh; h++) {
    gen_cache_add(k, p->hero[h], h0->shape.rank, oidx, acc[h]);
    /* reshapes adding or removing unit dims ([8,128] -> [8,128,1]) hit the cache too */
    for (int i = 0; p->comp && i < p->comp->ninstrs; i++) {
      const HInstr *x = p->comp->instrs[i];
      if (x->op != OP_RESHAPE || x->ops[0] != p->hero[h] || !ck_squeeze_eq(&x->shape, &h0->shape))
        continue;
      LLVMValueRef xi[HLO_MAX_RANK];
      ck_squeeze_idx(k, &h0->shape, oidx, &x->shape, xi);
      gen_cache_add(k, x, x->shape.rank, xi, acc[h]);
    }
  }
}

static void ck_reduce_store(GenKern *k, const RowPlan *p, HInstr *in, LLVMValueRef out,
                            LLVMValueRef *oidx, LLVMValueRef *acc) {
  const HInstr *h0 = p->hero[0];
  const Shape *s = &in->shape;
  ck_reduce_cache(k, p, oidx, acc);
  LLVMValueRef si[HLO_MAX_RANK];
  if (s->dt != DT_TUPLE) {
    ck_squeeze_idx(k, &h0->shape, oidx, s, si);
    LLVMValueRef r = gen_value(k, in, si);
    if (r) gen_store_elem(k, out, s, si, r);
  } else {
    for (int q = 0; q < s->ntuple && !k->failed; q++) {
      if (!ck_squeeze_eq(&s->tuple[q], &h0->shape) || hlo_shape_same_dims(&s->tuple[q], p->os))
        continue;
      ck_squeeze_idx(k, &h0->shape, oidx, &s->tuple[q], si);
      LLVMValueRef r = gen_value(k, p->comp->root->ops[q], si);
      if (r) gen_store_elem(k, cuda_leaf_ptr(k, out, s, q), &s->tuple[q], si, r);
    }
  }
}

/* The lanes' partial reductions over reduced indices j = j0, j0 + jstep, ... < jend for output
 * index oidx, accumulated into accp[]; leaves of a tuple output with the operand's dims are
 * written on the way (every operand element is visited once). */
static bool ck_reduce_span(GenKern *k, const RowPlan *p, HInstr *in, LLVMValueRef out,
                           LLVMValueRef *oidx, LLVMValueRef j0, LLVMValueRef jend, int64_t jstep,
                           LLVMValueRef *accp, LLVMTypeRef *aty) {
  LLVMBuilderRef B = k->B;
  const Shape *s = &in->shape;
  int64_t rext[HLO_MAX_RANK];
  int nr = 0;
  for (int d = 0; d < p->os->rank; d++)
    if (p->red[d]) rext[nr++] = p->os->dims[d];
  GenLoop jl;
  LLVMValueRef j = gen_loop_open_step(k, &jl, j0, jend, gen_i64(k, jstep));
  LLVMValueRef ridx[HLO_MAX_RANK], full[HLO_MAX_RANK];
  gen_delin(k, j, rext, nr, ridx);
  for (int d = 0, r = 0, o = 0; d < p->os->rank; d++)
    full[d] = p->red[d] ? ridx[r++] : oidx[o++];
  LLVMValueRef acc[CU_MAX_HEROES], v[CU_MAX_HEROES];
  for (int h = 0; h < p->nh; h++) {
    if (!(v[h] = gen_value(k, p->hero[h]->ops[0], full))) return false;
    acc[h] = LLVMBuildLoad2(B, aty[h], accp[h], "");
  }
  if (!ck_combine(k, p, acc, v)) return false;
  for (int h = 0; h < p->nh; h++)
    LLVMBuildStore(B, acc[h], accp[h]);
  if (s->dt == DT_TUPLE) /* leaves with the operand's dims, written once here */
    for (int q = 0; q < s->ntuple && !k->failed; q++) {
      if (!hlo_shape_same_dims(&s->tuple[q], p->os)) continue;
      LLVMValueRef lv = gen_value(k, p->comp->root->ops[q], full);
      if (lv) gen_store_elem(k, cuda_leaf_ptr(k, out, s, q), &s->tuple[q], full, lv);
    }
  gen_loop_close(k, &jl);
  return !k->failed;
}

/* Split reductions: partial results live after the plan's heap, [hero][output][slice] in
 * 8-byte slots. */
CuPtr cuda_scratch(CudaCg *cc, int64_t bytes) {
  if (bytes > cc->stage_bytes) cc->stage_bytes = bytes;
  return (CuPtr){CU_TEMP, 0, cc->plan.temp_bytes};
}

static CuPtr ck_partials(CudaCg *cc, const RowPlan *p) {
  return cuda_scratch(cc, p->split > 1 ? 8 * p->nh * p->R * p->split : 0);
}

static LLVMValueRef ck_partial_at(GenKern *k, const RowPlan *p, LLVMValueRef part, int h,
                                  LLVMValueRef row, LLVMValueRef slice) {
  LLVMBuilderRef B = k->B;
  LLVMValueRef i =
      LLVMBuildNSWAdd(B,
                      LLVMBuildNSWMul(B, LLVMBuildNSWAdd(B, gen_i64(k, h * p->R), row, ""),
                                      gen_i64(k, p->split), ""),
                      slice, "");
  LLVMValueRef off = LLVMBuildNSWMul(B, i, gen_i64(k, 8), "");
  return LLVMBuildInBoundsGEP2(B, k->cg->i8, part, &off, 1, "");
}

static void ck_partial_store(GenKern *k, const RowPlan *p, LLVMValueRef part, LLVMValueRef row,
                             LLVMValueRef slice, LLVMValueRef *acc) {
  for (int h = 0; h < p->nh; h++)
    LLVMBuildStore(k->B, acc[h], ck_partial_at(k, p, part, h, row, slice));
}

/* A warp per row of R rows: blocks of CU_BLOCK threads, a grid-stride loop over the rows (its
 * induction variable returned, closed by the caller with rl); *lane: the thread's lane. */
static LLVMValueRef ck_warp_rows(GenKern *k, CuStep *st, int64_t R, LLVMValueRef *lane,
                                 GenLoop *rl) {
  LLVMBuilderRef B = k->B;
  int nwarps = CU_BLOCK / 32;
  st->block = CU_BLOCK;
  st->grid = ck_grid(R, nwarps);
  LLVMValueRef tid = cuda_sreg(k, "llvm.nvvm.read.ptx.sreg.tid.x");
  LLVMValueRef bid = cuda_sreg(k, "llvm.nvvm.read.ptx.sreg.ctaid.x");
  *lane = LLVMBuildAnd(B, tid, gen_i64(k, 31), "");
  LLVMValueRef warp = LLVMBuildLShr(B, tid, gen_i64(k, 5), "");
  LLVMValueRef row0 = LLVMBuildNSWAdd(B, LLVMBuildNSWMul(B, bid, gen_i64(k, nwarps), ""), warp, "");
  return gen_loop_open_step(k, rl, row0, gen_i64(k, R), gen_i64(k, st->grid * nwarps));
}

/* Second kernel of a split reduction: one warp per output, lane l combines partials l,
 * l + 32, ..., a shuffle tree combines the lanes, lane 0 produces the fusion's outputs
 * (ck_reduce_store). */
static bool ck_split_finish(CudaCg *cc, HInstr *in, const RowPlan *p, CuPtr pp) {
  GenCg *cg = &cc->cg;
  CuStep *st;
  LLVMValueRef part;
  GenKern *k = cuda_kbegin(cc, in, "split-finish", 1, &pp, &part, &st);
  LLVMBuilderRef B = k->B;
  cuda_kbind_fusion(k, in);
  LLVMValueRef out = cuda_kbuffer(k, in);
  const HInstr *h0 = p->hero[0];
  LLVMValueRef lane;
  GenLoop rl;
  LLVMValueRef row = ck_warp_rows(k, st, p->R, &lane, &rl);
  LLVMValueRef acc[CU_MAX_HEROES], accp[CU_MAX_HEROES];
  LLVMTypeRef aty[CU_MAX_HEROES];
  for (int h = 0; h < p->nh; h++) {
    LLVMValueRef init = gen_value(k, p->hero[h]->ops[1], NULL);
    if (!init) return cuda_kend(k);
    aty[h] = gen_reg_type(cg, p->hero[h]->shape.dt);
    accp[h] = gen_alloca(k, aty[h]);
    LLVMBuildStore(B, init, accp[h]);
  }
  GenLoop sl;
  LLVMValueRef j = gen_loop_open_step(k, &sl, lane, gen_i64(k, p->split), gen_i64(k, 32));
  LLVMValueRef v[CU_MAX_HEROES];
  for (int h = 0; h < p->nh; h++) {
    v[h] = LLVMBuildLoad2(B, aty[h], ck_partial_at(k, p, part, h, row, j), "");
    acc[h] = LLVMBuildLoad2(B, aty[h], accp[h], "");
  }
  if (!ck_combine(k, p, acc, v)) return cuda_kend(k);
  for (int h = 0; h < p->nh; h++)
    LLVMBuildStore(B, acc[h], accp[h]);
  gen_loop_close(k, &sl);
  for (int h = 0; h < p->nh; h++)
    acc[h] = LLVMBuildLoad2(B, aty[h], accp[h], "");
  ck_shfl_tree(k, p, acc, 16);
  LLVMValueRef oidx[HLO_MAX_RANK];
  gen_delin(k, row, h0->shape.dims, h0->shape.rank, oidx);
  int m = 0;
  LLVMBasicBlockRef jo = cuda_if(k, LLVMBuildICmp(B, LLVMIntEQ, lane, gen_i64(k, 0), ""), &m);
  ck_reduce_store(k, p, in, out, oidx, acc);
  cuda_endif(k, jo, m);
  gen_loop_close(k, &rl);
  return cuda_kend(k);
}

/* Chained heroes (p->chain): one warp per row; a pass over the row per hero in the body's order
 * (its value, combined over the lanes by a butterfly so that every lane has it, enters the cache
 * at the row's index, where the next hero's operand and the output find it), then a pass
 * writing the output at every element of the row. The row is read once a pass (from L1/L2 for
 * rows of up to 8192 elements): softmax in one kernel instead of max, exp-and-sum and divide. */
static bool ck_row_chain(CudaCg *cc, HInstr *in, const RowPlan *p) {
  GenCg *cg = &cc->cg;
  CuStep *st;
  GenKern *k = cuda_kbegin(cc, in, "row-chain", 0, NULL, NULL, &st);
  LLVMBuilderRef B = k->B;
  cuda_kbind_fusion(k, in);
  LLVMValueRef out = cuda_kbuffer(k, in);
  const HInstr *h0 = p->hero[0];
  LLVMValueRef lane;
  GenLoop rl;
  LLVMValueRef row = ck_warp_rows(k, st, p->R, &lane, &rl);
  LLVMValueRef oidx[HLO_MAX_RANK];
  gen_delin(k, row, h0->shape.dims, h0->shape.rank, oidx);
  for (int h = 0; h < p->nh && !k->failed; h++) {
    RowPlan one = *p;
    one.nh = 1;
    one.hero[0] = p->hero[h];
    LLVMTypeRef aty = gen_reg_type(cg, p->hero[h]->shape.dt);
    LLVMValueRef init = gen_value(k, p->hero[h]->ops[1], NULL);
    if (!init) return cuda_kend(k);
    LLVMValueRef accp = gen_alloca(k, aty);
    LLVMBuildStore(B, init, accp);
    if (!ck_reduce_span(k, &one, in, out, oidx, lane, gen_i64(k, p->K), 32, &accp, &aty))
      return cuda_kend(k);
    LLVMValueRef acc = LLVMBuildLoad2(B, aty, accp, "");
    ck_shfl_tree_mode(k, &one, &acc, 16, CU_SHFL_BFLY);
    ck_reduce_cache(k, &one, oidx, &acc);
  }
  /* the output at every element of the row */
  int64_t rext[HLO_MAX_RANK];
  int nr = 0;
  for (int d = 0; d < p->os->rank; d++)
    if (p->red[d]) rext[nr++] = p->os->dims[d];
  GenLoop jl;
  LLVMValueRef j = gen_loop_open_step(k, &jl, lane, gen_i64(k, p->K), gen_i64(k, 32));
  LLVMValueRef ridx[HLO_MAX_RANK], full[HLO_MAX_RANK];
  gen_delin(k, j, rext, nr, ridx);
  for (int d = 0, r = 0, o = 0; d < p->os->rank; d++)
    full[d] = p->red[d] ? ridx[r++] : oidx[o++];
  LLVMValueRef v = gen_value(k, in, full);
  if (v) gen_store_elem(k, out, &in->shape, full, v);
  gen_loop_close(k, &jl);
  gen_loop_close(k, &rl);
  return cuda_kend(k);
}

static bool ck_row_reduce(CudaCg *cc, HInstr *in, const RowPlan *p) {
  GenCg *cg = &cc->cg;
  CuStep *st;
  int64_t S = p->split; /* > 1: block slices of each row, partials to ck_split_finish */
  CuPtr pp = ck_partials(cc, p);
  LLVMValueRef part = NULL;
  GenKern *k = cuda_kbegin(cc, in,
                           S > 1      ? "split-reduce"
                           : p->block ? "block-reduce"
                                      : "warp-reduce",
                           S > 1 ? 1 : 0, &pp, &part, &st);
  LLVMBuilderRef B = k->B;
  cuda_kbind_fusion(k, in);
  LLVMValueRef out = cuda_kbuffer(k, in);
  const HInstr *h0 = p->hero[0];
  int nwarps = CU_BLOCK / 32;
  int64_t rows_per_block = p->block ? 1 : nwarps;
  st->block = CU_BLOCK;
  st->grid = ck_grid(p->R * S, rows_per_block);
  LLVMValueRef tid = cuda_sreg(k, "llvm.nvvm.read.ptx.sreg.tid.x");
  LLVMValueRef bid = cuda_sreg(k, "llvm.nvvm.read.ptx.sreg.ctaid.x");
  LLVMValueRef lane = LLVMBuildAnd(B, tid, gen_i64(k, 31), "");
  LLVMValueRef warp = LLVMBuildLShr(B, tid, gen_i64(k, 5), "");
  LLVMValueRef row0 =
      p->block ? bid
               : LLVMBuildNSWAdd(B, LLVMBuildNSWMul(B, bid, gen_i64(k, nwarps), ""), warp, "");
  LLVMValueRef j0 = p->block ? tid : lane;
  int64_t jstep = p->block ? CU_BLOCK : 32;
  LLVMValueRef smem = p->block ? cuda_smem(k, st, cg->i64, nwarps * p->nh) : NULL;
  GenLoop rl;
  LLVMValueRef vrow =
      gen_loop_open_step(k, &rl, row0, gen_i64(k, p->R * S), gen_i64(k, st->grid * rows_per_block));
  LLVMValueRef row = vrow, jend = gen_i64(k, p->K), slice = NULL;
  if (S > 1) { /* row vrow / S, slice vrow % S of ceil(K / S) elements */
    int64_t chunk = (p->K + S - 1) / S;
    row = LLVMBuildUDiv(B, vrow, gen_i64(k, S), "");
    slice = LLVMBuildURem(B, vrow, gen_i64(k, S), "");
    LLVMValueRef lo = LLVMBuildNSWMul(B, slice, gen_i64(k, chunk), "");
    LLVMValueRef hi = LLVMBuildNSWAdd(B, lo, gen_i64(k, chunk), "");
    jend = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSLT, hi, jend, ""), hi, jend, "");
    j0 = LLVMBuildNSWAdd(B, lo, j0, "");
  }
  LLVMValueRef oidx[HLO_MAX_RANK];
  gen_delin(k, row, h0->shape.dims, h0->shape.rank, oidx);
  LLVMValueRef init[CU_MAX_HEROES], accp[CU_MAX_HEROES];
  LLVMTypeRef aty[CU_MAX_HEROES];
  for (int h = 0; h < p->nh; h++) {
    aty[h] = gen_reg_type(cg, p->hero[h]->shape.dt);
    if (!(init[h] = gen_value(k, p->hero[h]->ops[1], NULL))) return cuda_kend(k);
    accp[h] = gen_alloca(k, aty[h]);
    LLVMBuildStore(B, init[h], accp[h]);
  }
  /* the lanes' strided partial reductions */
  if (!ck_reduce_span(k, p, in, out, oidx, j0, jend, jstep, accp, aty)) return cuda_kend(k);
  LLVMValueRef acc[CU_MAX_HEROES];
  for (int h = 0; h < p->nh; h++)
    acc[h] = LLVMBuildLoad2(B, aty[h], accp[h], "");
  ck_shfl_tree(k, p, acc, 16);
  int m1 = 0, m2 = 0;
  LLVMBasicBlockRef join_w = NULL;
  if (p->block) {
    LLVMBasicBlockRef jn = cuda_if(k, LLVMBuildICmp(B, LLVMIntEQ, lane, gen_i64(k, 0), ""), &m1);
    for (int h = 0; h < p->nh; h++) {
      LLVMValueRef i =
          LLVMBuildNSWAdd(B, LLVMBuildNSWMul(B, warp, gen_i64(k, p->nh), ""), gen_i64(k, h), "");
      LLVMBuildStore(B, acc[h], ck_smem_at(k, smem, i));
    }
    cuda_endif(k, jn, m1);
    cuda_barrier(k);
    join_w = cuda_if(k, LLVMBuildICmp(B, LLVMIntEQ, warp, gen_i64(k, 0), ""), &m2);
    LLVMValueRef have = LLVMBuildICmp(B, LLVMIntULT, lane, gen_i64(k, nwarps), "");
    LLVMValueRef sl = LLVMBuildSelect(B, have, lane, gen_i64(k, 0), "");
    for (int h = 0; h < p->nh; h++) {
      LLVMValueRef i =
          LLVMBuildNSWAdd(B, LLVMBuildNSWMul(B, sl, gen_i64(k, p->nh), ""), gen_i64(k, h), "");
      LLVMValueRef x = LLVMBuildLoad2(B, aty[h], ck_smem_at(k, smem, i), "");
      acc[h] = LLVMBuildSelect(B, have, x, init[h], "");
    }
    ck_shfl_tree(k, p, acc, nwarps / 2);
  }
  /* lane 0 (thread 0 of the block) writes the outputs of the reduce's dims */
  int m3 = 0;
  LLVMBasicBlockRef jo = cuda_if(k, LLVMBuildICmp(B, LLVMIntEQ, lane, gen_i64(k, 0), ""), &m3);
  if (S > 1)
    ck_partial_store(k, p, part, row, slice, acc);
  else
    ck_reduce_store(k, p, in, out, oidx, acc);
  cuda_endif(k, jo, m3);
  if (p->block) {
    cuda_endif(k, join_w, m2);
    cuda_barrier(k); /* shared memory is reused by the next row */
  }
  gen_loop_close(k, &rl);
  if (!cuda_kend(k)) return false;
  return S == 1 || ck_split_finish(cc, in, p, pp);
}

/* Column reduction (the operand's minor dim kept): blocks of 32 x nwarps threads, the 32
 * lanes of a warp take 32 consecutive outputs (neighbouring addresses in every load) and the
 * warps split each output's reduced elements (j = warp, warp + nwarps, ...); the warps'
 * partials meet in shared memory and warp 0 combines them in warp order (deterministic) and
 * writes the outputs. The block loop is uniform across the block (barriers inside); lanes
 * past the last output only take part in the barriers. With p->split > 1, blocks take
 * slices of the reduced elements and write partials for ck_split_finish. */
static bool ck_col_reduce(CudaCg *cc, HInstr *in, const RowPlan *p) {
  GenCg *cg = &cc->cg;
  CuStep *st;
  int64_t S = p->split, tiles = (p->R + 31) / 32; /* S > 1: block slices, as ck_row_reduce */
  CuPtr pp = ck_partials(cc, p);
  LLVMValueRef part = NULL;
  GenKern *k = cuda_kbegin(cc, in, S > 1 ? "split-col-reduce" : "col-reduce", S > 1 ? 1 : 0, &pp,
                           &part, &st);
  LLVMBuilderRef B = k->B;
  cuda_kbind_fusion(k, in);
  LLVMValueRef out = cuda_kbuffer(k, in);
  const HInstr *h0 = p->hero[0];
  int nwarps = p->nh <= 4 && p->K >= 1024 ? 32 : 8; /* shared memory: 32 x nwarps x nh slots */
  st->block = 32 * nwarps;
  st->grid = ck_grid(tiles * S, 1);
  LLVMValueRef tid = cuda_sreg(k, "llvm.nvvm.read.ptx.sreg.tid.x");
  LLVMValueRef bid = cuda_sreg(k, "llvm.nvvm.read.ptx.sreg.ctaid.x");
  LLVMValueRef lane = LLVMBuildAnd(B, tid, gen_i64(k, 31), "");
  LLVMValueRef warp = LLVMBuildLShr(B, tid, gen_i64(k, 5), "");
  LLVMValueRef smem = cuda_smem(k, st, cg->i64, 32 * nwarps * p->nh);
  LLVMValueRef init[CU_MAX_HEROES], accp[CU_MAX_HEROES];
  LLVMTypeRef aty[CU_MAX_HEROES];
  for (int h = 0; h < p->nh; h++) {
    aty[h] = gen_reg_type(cg, p->hero[h]->shape.dt);
    if (!(init[h] = gen_value(k, p->hero[h]->ops[1], NULL))) return cuda_kend(k);
    accp[h] = gen_alloca(k, aty[h]);
  }
  GenLoop bl;
  LLVMValueRef vt = gen_loop_open_step(k, &bl, bid, gen_i64(k, tiles * S), gen_i64(k, st->grid));
  LLVMValueRef tile = vt, j0 = warp, jend = gen_i64(k, p->K), slice = NULL;
  if (S > 1) { /* tile vt / S, slice vt % S of ceil(K / S) elements */
    int64_t chunk = (p->K + S - 1) / S;
    tile = LLVMBuildUDiv(B, vt, gen_i64(k, S), "");
    slice = LLVMBuildURem(B, vt, gen_i64(k, S), "");
    LLVMValueRef lo = LLVMBuildNSWMul(B, slice, gen_i64(k, chunk), "");
    LLVMValueRef hi = LLVMBuildNSWAdd(B, lo, gen_i64(k, chunk), "");
    jend = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSLT, hi, jend, ""), hi, jend, "");
    j0 = LLVMBuildNSWAdd(B, lo, j0, "");
  }
  LLVMValueRef base = LLVMBuildNSWMul(B, tile, gen_i64(k, 32), "");
  LLVMValueRef row = LLVMBuildNSWAdd(B, base, lane, "");
  LLVMValueRef valid = LLVMBuildICmp(B, LLVMIntSLT, row, gen_i64(k, p->R), "");
  LLVMValueRef oidx[HLO_MAX_RANK];
  gen_delin(k, LLVMBuildSelect(B, valid, row, gen_i64(k, 0), ""), h0->shape.dims, h0->shape.rank,
            oidx);
  for (int h = 0; h < p->nh; h++)
    LLVMBuildStore(B, init[h], accp[h]);
  int m1 = 0, m2 = 0;
  LLVMBasicBlockRef jv = cuda_if(k, valid, &m1);
  if (!ck_reduce_span(k, p, in, out, oidx, j0, jend, nwarps, accp, aty)) return cuda_kend(k);
  cuda_endif(k, jv, m1);
  /* partials to shared memory: slot ((warp * 32 + lane) * nh + h) */
  LLVMValueRef me = LLVMBuildNSWAdd(B, LLVMBuildNSWMul(B, warp, gen_i64(k, 32), ""), lane, "");
  for (int h = 0; h < p->nh; h++) {
    LLVMValueRef i =
        LLVMBuildNSWAdd(B, LLVMBuildNSWMul(B, me, gen_i64(k, p->nh), ""), gen_i64(k, h), "");
    LLVMBuildStore(B, LLVMBuildLoad2(B, aty[h], accp[h], ""), ck_smem_at(k, smem, i));
  }
  cuda_barrier(k);
  LLVMValueRef w0 =
      LLVMBuildAnd(B, LLVMBuildICmp(B, LLVMIntEQ, warp, gen_i64(k, 0), ""), valid, "");
  LLVMBasicBlockRef jw = cuda_if(k, w0, &m2);
  LLVMValueRef acc[CU_MAX_HEROES];
  for (int h = 0; h < p->nh; h++)
    acc[h] = init[h];
  for (int w = 0; w < nwarps && !k->failed; w++) {
    LLVMValueRef v[CU_MAX_HEROES];
    for (int h = 0; h < p->nh; h++) {
      LLVMValueRef i = LLVMBuildNSWAdd(B, gen_i64(k, (int64_t)w * 32 * p->nh + h),
                                       LLVMBuildNSWMul(B, lane, gen_i64(k, p->nh), ""), "");
      v[h] = LLVMBuildLoad2(B, aty[h], ck_smem_at(k, smem, i), "");
    }
    if (!ck_combine(k, p, acc, v)) return cuda_kend(k);
  }
  if (S > 1)
    ck_partial_store(k, p, part, row, slice, acc);
  else
    ck_reduce_store(k, p, in, out, oidx, acc);
  cuda_endif(k, jw, m2);
  cuda_barrier(k); /* shared memory is reused by the next 32 outputs */
  gen_loop_close(k, &bl);
  if (!cuda_kend(k)) return false;
  return S == 1 || ck_split_finish(cc, in, p, pp);
}

/* ------------------------------------------------------------------ dot through cuBLAS */

/* The one `want` (dot or convolution) of in: in itself, or the only one in a non-tuple
 * fusion without the other kind, reductions or reduce-windows. */
static const HInstr *ck_hero(const HInstr *in, HOp want) {
  if (in->op == want) return in;
  if (in->op != OP_FUSION || in->shape.dt == DT_TUPLE) return NULL;
  const HComp *c = in->calls[0];
  for (int i = 0; i < c->ninstrs; i++)
    if (c->instrs[i]->op == OP_REDUCE || c->instrs[i]->op == OP_REDUCE_WINDOW) return NULL;
  const HInstr *hero = gen_fusion_hero(in);
  return hero && hero->op == want ? hero : NULL;
}

void cuda_dot_side(const HInstr *dot, int j, DotSide *s) {
  const DotDims *dd = dot->dot;
  const Shape *os = &dot->ops[j]->shape;
  const IList *bl = j ? &dd->rhs_batch : &dd->lhs_batch,
              *cl = j ? &dd->rhs_contract : &dd->lhs_contract;
  memset(s, 0, sizeof *s);
  s->B = s->F = s->K = 1;
  for (int i = 0; i < bl->n; i++)
    s->b[s->nb++] = bl->v[i], s->B *= os->dims[bl->v[i]];
  for (int i = 0; i < cl->n; i++)
    s->c[s->nc++] = cl->v[i], s->K *= os->dims[cl->v[i]];
  for (int d = 0; d < os->rank; d++)
    if (!hlo_ilist_has(bl, d) && !hlo_ilist_has(cl, d)) s->f[s->nf++] = d, s->F *= os->dims[d];
}

typedef struct StageCtx {
  const HInstr *expr; /* the operand expression */
  const DotSide *s;   /* its dims */
  bool k_first;       /* staged as [B, K, F] (rhs) instead of [B, F, K] (lhs) */
  LLVMValueRef dst;   /* staging buffer */
  const Shape *cs;    /* staged shape */
} StageCtx;

/* The operand expression's index of staged element idx ([B, F, K], or [B, K, F] k_first). */
static void ck_stage_index(GenKern *k, const StageCtx *c, LLVMValueRef *idx, LLVMValueRef *oi) {
  const DotSide *s = c->s;
  const Shape *os = &c->expr->shape;
  LLVMValueRef t[HLO_MAX_RANK];
  int64_t ext[HLO_MAX_RANK];
  for (int i = 0; i < s->nb; i++)
    ext[i] = os->dims[s->b[i]];
  gen_delin(k, idx[0], ext, s->nb, t);
  for (int i = 0; i < s->nb; i++)
    oi[s->b[i]] = t[i];
  for (int i = 0; i < s->nf; i++)
    ext[i] = os->dims[s->f[i]];
  gen_delin(k, idx[c->k_first ? 2 : 1], ext, s->nf, t);
  for (int i = 0; i < s->nf; i++)
    oi[s->f[i]] = t[i];
  for (int i = 0; i < s->nc; i++)
    ext[i] = os->dims[s->c[i]];
  gen_delin(k, idx[c->k_first ? 1 : 2], ext, s->nc, t);
  for (int i = 0; i < s->nc; i++)
    oi[s->c[i]] = t[i];
}

static bool ck_stage_body(GenKern *k, LLVMValueRef *idx, void *vctx) {
  StageCtx *c = vctx;
  LLVMValueRef oi[HLO_MAX_RANK];
  ck_stage_index(k, c, idx, oi);
  LLVMValueRef v = gen_value(k, c->expr, oi);
  if (v) gen_store_elem(k, c->dst, c->cs, idx, v);
  return v != NULL;
}

#define CU_TILE 32 /* a tiled transpose's tile: 32 x 32 elements, 32 x 8 threads */

/* Whether staging reads the expression across its minor dimension: its last dim is one of the
 * staged shape's middle (row) dims, so consecutive staged elements lie far apart in it. */
static bool ck_stage_transposes(const StageCtx *c) {
  const DotSide *s = c->s;
  int last = c->expr->shape.rank - 1;
  const int64_t *rows = c->k_first ? s->c : s->f;
  int nrows = c->k_first ? s->nc : s->nf;
  for (int i = 0; i < nrows; i++)
    if (rows[i] == last) return c->expr->shape.dims[last] > 1;
  return false;
}

/* One phase of a tile: for the 4 (row, col) pairs of this thread, read (the expression at
 * rows r0 + tx, cols c0 + ty + 8i, into tile[col][row]) or write (staged [b, r0 + ty + 8i,
 * c0 + tx] from tile[col][row]): reads run along the expression's minor dim, writes along the
 * staged one. */
static bool ck_tile_phase(GenKern *k, StageCtx *c, LLVMValueRef b, LLVMValueRef r0, LLVMValueRef c0,
                          LLVMValueRef tx, LLVMValueRef ty, LLVMValueRef *tile, const char *name,
                          bool read) {
  LLVMBuilderRef B = k->B;
  GenCg *cg = k->cg;
  int64_t R = c->cs->dims[1], C = c->cs->dims[2];
  for (int i = 0; i < CU_TILE / 8; i++) {
    LLVMValueRef tyi = LLVMBuildNSWAdd(B, ty, gen_i64(k, 8 * i), "");
    LLVMValueRef rr = read ? tx : tyi, cc = read ? tyi : tx; /* within the tile */
    LLVMValueRef idx[3] = {b, LLVMBuildNSWAdd(B, r0, rr, ""), LLVMBuildNSWAdd(B, c0, cc, "")};
    LLVMValueRef in = LLVMBuildAnd(B, LLVMBuildICmp(B, LLVMIntSLT, idx[1], gen_i64(k, R), ""),
                                   LLVMBuildICmp(B, LLVMIntSLT, idx[2], gen_i64(k, C), ""), "");
    int mark;
    LLVMBasicBlockRef join = cuda_if(k, in, &mark);
    LLVMValueRef slot =
        LLVMBuildNSWAdd(B, LLVMBuildNSWMul(B, cc, gen_i64(k, CU_TILE + 1), ""), rr, "");
    if (read) {
      LLVMValueRef oi[HLO_MAX_RANK];
      ck_stage_index(k, c, idx, oi);
      LLVMValueRef v = gen_value(k, c->expr, oi);
      if (!v) return false;
      if (!*tile) { /* the tile's element type is the generator's value type */
        LLVMTypeRef at = LLVMArrayType2(LLVMTypeOf(v), (uint64_t)CU_TILE * (CU_TILE + 1));
        char nm[128];
        snprintf(nm, sizeof nm, "%s_tile", name); /* named like ck_smem's arrays, for ck_dedupe */
        *tile = LLVMAddGlobalInAddressSpace(cg->M, at, nm, 3);
        LLVMSetInitializer(*tile, LLVMGetUndef(at));
        LLVMSetLinkage(*tile, LLVMInternalLinkage);
      }
      LLVMBuildStore(B, v, ck_smem_at(k, *tile, slot));
    } else {
      LLVMTypeRef et = LLVMGetElementType(LLVMGlobalGetValueType(*tile));
      gen_store_elem(k, c->dst, c->cs, idx, LLVMBuildLoad2(B, et, ck_smem_at(k, *tile, slot), ""));
    }
    cuda_endif(k, join, mark);
  }
  return true;
}

/* Staging that transposes (ck_stage_transposes), through shared-memory tiles: each block
 * takes 32 x 32 tiles of (rows, cols) of the staged [B, R, C] in a grid-stride loop, reads a
 * tile along the expression's minor dim and writes it along the staged minor dim, so both
 * sides are coalesced (the element-per-thread loop read a transposed KV cache at a tenth of
 * the bandwidth). */
static bool ck_stage_tiled(GenKern *k, CuStep *st, StageCtx *c) {
  LLVMBuilderRef B = k->B;
  int64_t R = c->cs->dims[1], C = c->cs->dims[2];
  int64_t tr = (R + CU_TILE - 1) / CU_TILE, tc = (C + CU_TILE - 1) / CU_TILE,
          tiles = c->cs->dims[0] * tr * tc;
  st->block = CU_TILE * 8;
  st->grid = tiles < CU_MAX_GRID ? tiles : CU_MAX_GRID;
  st->smem = (int64_t)hlo_dtype_size(c->cs->dt) * CU_TILE * (CU_TILE + 1);
  LLVMValueRef tid = cuda_sreg(k, "llvm.nvvm.read.ptx.sreg.tid.x");
  LLVMValueRef tx = LLVMBuildURem(B, tid, gen_i64(k, CU_TILE), ""),
               ty = LLVMBuildUDiv(B, tid, gen_i64(k, CU_TILE), "");
  LLVMValueRef bid = cuda_sreg(k, "llvm.nvvm.read.ptx.sreg.ctaid.x");
  GenLoop l;
  LLVMValueRef t = gen_loop_open_step(k, &l, bid, gen_i64(k, tiles), gen_i64(k, st->grid));
  int64_t ext[3] = {c->cs->dims[0], tr, tc};
  LLVMValueRef ti[3];
  gen_delin(k, t, ext, 3, ti);
  LLVMValueRef r0 = LLVMBuildNSWMul(B, ti[1], gen_i64(k, CU_TILE), ""),
               c0 = LLVMBuildNSWMul(B, ti[2], gen_i64(k, CU_TILE), "");
  LLVMValueRef tile = NULL;
  bool ok = ck_tile_phase(k, c, ti[0], r0, c0, tx, ty, &tile, st->name, true);
  cuda_barrier(k);
  ok = ok && ck_tile_phase(k, c, ti[0], r0, c0, tx, ty, &tile, st->name, false);
  cuda_barrier(k); /* the tile is refilled by the next iteration */
  gen_loop_close(k, &l);
  return ok;
}

/* The entry value an operand expression reads directly (a fusion parameter's argument, or
 * the operand itself for a lone dot), or NULL. */
static const HInstr *ck_direct(const HInstr *in, const HInstr *expr) {
  if (expr->parent == in->parent) return expr;
  if (expr->op == OP_PARAMETER && in->op == OP_FUSION && expr->parent == in->calls[0] &&
      expr->param_num < in->nops)
    return in->ops[expr->param_num];
  return NULL;
}

/* ck_direct, also through reshapes inside the fusion (row-major on both sides: the same bytes);
 * for a GEMM operand, whose view is computed from the shape the product sees. */
const HInstr *cuda_direct_value(const HInstr *in, const HInstr *expr) {
  while (expr->op == OP_RESHAPE && expr->parent != in->parent &&
         expr->ops[0]->shape.dt == expr->shape.dt)
    expr = expr->ops[0];
  return ck_direct(in, expr);
}

/* How cuBLAS reads one operand of a dot: in place from its buffer (any strides that fold into
 * a matrix with one unit-stride side, batches in at most two strided groups), or staged. */
typedef struct GemmOperand {
  bool direct;       /* read in place */
  CuPtr ptr;         /* matrix 0 of batch 0 */
  int form;          /* 0: lhs [F,K] / rhs [K,F] rows (cuBLAS N); 1: the transpose (T) */
  int64_t ld;        /* leading dimension (elements) */
  int64_t bin, bout; /* strides of the inner and outer batch groups (elements) */
} GemmOperand;

/* Size and stride of dims l[0..n) of shape os (row-major strides st) when they fold into one
 * strided dimension (unit dims skipped); false when they do not. */
static bool ck_fold(const Shape *os, const int64_t *st, const int64_t *l, int n, int64_t *stride,
                    int64_t *size) {
  int64_t last = -1;
  *size = 1, *stride = 0;
  for (int i = 0; i < n; i++) {
    int64_t d = l[i], e = os->dims[d];
    *size *= e;
    if (e == 1) continue;
    if (last >= 0 && st[last] != st[d] * e) return false;
    last = d;
  }
  if (last >= 0) *stride = st[last];
  return true;
}

/* The in-place view of operand j (0 lhs) with its batch dims cut at p: dims [0, p) the outer
 * group (one cuBLAS call each), [p, nb) the inner (the strided batch of one call). */
static bool ck_view(const Shape *os, const DotSide *s, int j, int p, GemmOperand *g) {
  int64_t st[HLO_MAX_RANK], acc = 1;
  for (int d = os->rank - 1; d >= 0; d--)
    st[d] = acc, acc *= os->dims[d];
  int64_t sf, nf, sk, nk, so, no, si, ni;
  if (!ck_fold(os, st, s->f, s->nf, &sf, &nf) || !ck_fold(os, st, s->c, s->nc, &sk, &nk) ||
      !ck_fold(os, st, s->b, p, &so, &no) || !ck_fold(os, st, s->b + p, s->nb - p, &si, &ni))
    return false;
  bool kunit = nk == 1 || sk == 1, funit = nf == 1 || sf == 1;
  int64_t ld_k = nf == 1 ? nk : sf, ld_f = nk == 1 ? nf : sk; /* rows of K / of F contiguous */
  bool k_rows = kunit && ld_k >= nk, f_rows = funit && ld_f >= nf;
  /* lhs form 0 and rhs form 1 have K contiguous */
  bool f0 = j ? f_rows : k_rows, f1 = j ? k_rows : f_rows;
  if (!f0 && !f1) return false;
  g->form = f0 ? 0 : 1;
  g->ld = (g->form == 0) == (j == 0) ? ld_k : ld_f;
  g->bin = si, g->bout = so;
  return g->ld <= INT32_MAX;
}

/* Whether operands of type at must both be K-contiguous (cuBLAS's integer GEMMs, cuBLASLt's
 * fp8 ones: column-major op(A) = T, op(B) = N), and the multiple of bytes their leading
 * dimensions, batch strides and addresses must be. */
static bool ck_fp8(DType at) { return at == DT_F8E4M3FN || at == DT_F8E5M2; }
static bool ck_tn_only(DType at) { return at == DT_S8 || ck_fp8(at); }
static int64_t ck_tn_align(DType at) { return at == DT_S8 ? 4 : 16; }

#define CU_STAGE_V 8      /* staged elements a thread of a vectorized staging writes */
#define CU_STAGE_LEAVES 4 /* entry values it reads by vector accesses */

/* A vectorized staging: CU_STAGE_V consecutive staged elements a thread, which are consecutive
 * along the expression's minor dim; its leaves read by vector accesses. */
typedef struct StageVec {
  StageCtx *c;
  int nleaf;
  const HInstr *leaf[CU_STAGE_LEAVES];
  CuStep *st;
  const Shape *cs8; /* the staged shape in chunks of CU_STAGE_V */
} StageVec;

/* Whether the staged shape's minor dim runs along the expression's minor dim in steps of one
 * (the last of the operand dims it is made of), a multiple of CU_STAGE_V long, in a type vector
 * accesses take. */
static bool ck_stage_vec_ok(const StageCtx *c) {
  const DotSide *s = c->s;
  const int64_t *l = c->k_first ? s->f : s->c;
  int n = c->k_first ? s->nf : s->nc, last = c->expr->shape.rank - 1;
  return n > 0 && l[n - 1] == last && c->expr->shape.dims[last] % CU_STAGE_V == 0 &&
         cuda_vec_type(c->cs->dt);
}

static bool ck_stage_vec_body(GenKern *k, LLVMValueRef *idx, void *vctx) {
  const StageVec *v = vctx;
  const StageCtx *c = v->c;
  LLVMValueRef sidx[HLO_MAX_RANK], oi[CU_STAGE_V][HLO_MAX_RANK];
  memcpy(sidx, idx, sizeof sidx);
  sidx[2] = LLVMBuildNSWMul(k->B, idx[2], gen_i64(k, CU_STAGE_V), "");
  ck_stage_index(k, c, sidx, oi[0]);
  cuda_vec_indices(k, oi, c->expr->shape.rank, CU_STAGE_V);
  int mark = k->ncache;
  for (int l = 0; l < v->nleaf; l++)
    cuda_vec_cache(k, v->leaf[l], cuda_vec_load(k, v->leaf[l], oi[0], CU_STAGE_V), oi, CU_STAGE_V);
  LLVMTypeRef et = gen_mem_type(k->cg, c->cs->dt);
  LLVMValueRef w = LLVMGetUndef(LLVMVectorType(et, CU_STAGE_V));
  for (int j = 0; j < CU_STAGE_V && !k->failed; j++) {
    LLVMValueRef e = gen_value(k, c->expr, oi[j]);
    if (e) w = LLVMBuildInsertElement(k->B, w, e, gen_i64(k, j), "");
  }
  k->ncache = mark;
  if (k->failed) return false;
  LLVMValueRef lin = gen_linear(k, c->cs, sidx);
  LLVMValueRef q = LLVMBuildInBoundsGEP2(k->B, et, c->dst, &lin, 1, "");
  LLVMSetAlignment(LLVMBuildStore(k->B, w, q), (unsigned)(CU_STAGE_V * hlo_dtype_size(c->cs->dt)));
  return true;
}

/* The grid loop over chunks (the vectorized copy, first: it sets the grid) or elements. */
static void ck_stage_loops(GenKern *k, bool vec, void *ctx) {
  StageVec *v = ctx;
  if (vec)
    cuda_grid_loop(k, v->st, v->cs8, ck_stage_vec_body, v);
  else
    cuda_grid_loop(k, v->st, v->c->cs, ck_stage_body, v->c);
}

/* The staging loop CU_STAGE_V elements a thread where the leaves' and the staging buffer's
 * addresses allow (tested at run time), else element by element. */
static void ck_stage_vec(CudaCg *cc, GenKern *k, CuStep *st, const HInstr *in, StageCtx *c) {
  LLVMBuilderRef B = k->B;
  StageVec v = {c, 0, {0}, NULL, NULL};
  v.nleaf = cuda_vec_leaves(cc, in, &c->expr->shape, v.leaf, CU_STAGE_LEAVES);
  Shape *cs8 = hlo_arena_alloc(cc->cg.scratch, sizeof *cs8);
  *cs8 = *c->cs;
  cs8->dims[2] /= CU_STAGE_V;
  int64_t al = CU_STAGE_V * (int64_t)hlo_dtype_size(c->cs->dt);
  LLVMValueRef a = LLVMBuildPtrToInt(B, c->dst, k->cg->i64, "");
  LLVMValueRef ok =
      LLVMBuildICmp(B, LLVMIntEQ, LLVMBuildAnd(B, a, gen_i64(k, al - 1), ""), gen_i64(k, 0), "");
  ok = LLVMBuildAnd(B, ok, cuda_vec_aligned(k, v.leaf, v.nleaf, CU_STAGE_V), "");
  v.st = st, v.cs8 = cs8;
  cuda_vec_split(k, ok, ck_stage_loops, &v);
}

/* Stage operand j of dot as [B, F, K] (lhs) / [B, K, F] (rhs; [B, F, K] for s8, see
 * ck_int8_ok) into temp at *used. */
static bool ck_stage(CudaCg *cc, HInstr *in, const HInstr *dot, int j, const DotSide *s,
                     int64_t *used, GemmOperand *g) {
  GenCg *cg = &cc->cg;
  DType at = dot->ops[j]->shape.dt;
  bool kf = j == 1 && !ck_tn_only(at); /* staged K-major: [B, K, F] */
  *g = (GemmOperand){false,       {CU_TEMP, 0, cc->plan.temp_bytes + *used},
                     kf ? 0 : j,  kf ? s->F : s->K,
                     s->F * s->K, 0};
  int64_t dims[3] = {s->B, kf ? s->K : s->F, kf ? s->F : s->K};
  Shape *cs = hlo_arena_alloc(cg->scratch, sizeof *cs);
  *cs = hlo_shape_array(at, 3, dims);
  *used += memplan_align(s->B * s->F * s->K * (int64_t)hlo_dtype_size(at));
  CuStep *st;
  LLVMValueRef dst;
  GenKern *k = cuda_kbegin(cc, in, "stage", 1, &g->ptr, &dst, &st);
  cuda_kbind_fusion(k, in);
  StageCtx c = {dot->ops[j], s, kf, dst, cs};
  if (ck_stage_transposes(&c) && cs->dims[1] > 1 && cs->dims[2] > 1) {
    st->what = "stage-tiled";
    if (!ck_stage_tiled(k, st, &c)) k->failed = true;
  } else if (ck_stage_vec_ok(&c)) {
    st->what = "stage-v8";
    ck_stage_vec(cc, k, st, in, &c);
  } else {
    cuda_grid_loop(k, st, cs, ck_stage_body, &c);
  }
  return cuda_kend(k);
}

/* s8 and fp8 operands: cuBLAS's integer GEMMs and cuBLASLt's fp8 ones take only K-contiguous
 * operands (column-major op(A) = T, op(B) = N: the lhs [F, K] and the rhs [F, K] row by row) and
 * want leading dimensions, batch strides and addresses in multiples of 4 (s8) or 16 (fp8) bytes
 * (staged copies have them: ck_gemm_ok asks K and F to be such multiples, ck_stage stages
 * such a rhs as [B, F, K]). */
static bool ck_tn_ok(const HInstr *dot, int j, const GemmOperand *g) {
  DType at = dot->ops[0]->shape.dt;
  if (!ck_tn_only(at)) return true;
  int64_t a = ck_tn_align(at);
  return g->form == j && g->ld % a == 0 && g->bin % a == 0 && g->bout % a == 0 &&
         g->ptr.offset % a == 0;
}

/* Where the batch dims are cut (see ck_view) so that most operands are read in place, then
 * with the fewest cuBLAS calls; the operands read in place at that cut in g[]. */
static int ck_batch_cut(CudaCg *cc, HInstr *in, const HInstr *dot, const DotSide *side,
                        GemmOperand *g) {
  int best = 0, best_direct = -1;
  int64_t best_calls = 0;
  for (int p = 0; p <= side[0].nb; p++) {
    GemmOperand t[2] = {{0}, {0}};
    int direct = 0;
    int64_t calls = 1;
    for (int i = 0; i < p; i++)
      calls *= dot->ops[0]->shape.dims[side[0].b[i]];
    for (int j = 0; j < 2; j++) {
      const HInstr *d = cuda_direct_value(in, dot->ops[j]);
      /* across several calls only untransposed views: cuBLAS's kernels for a transposed
       * strided operand of few rows read it slower than a staging copy does */
      if (d && ck_view(&dot->ops[j]->shape, &side[j], j, p, &t[j]) && (p == 0 || t[j].form == 0) &&
          cuda_ptr_of(cc, d, &t[j].ptr) && ck_tn_ok(dot, j, &t[j]))
        t[j].direct = true, direct++;
    }
    if (calls > 64 && p > 0) continue; /* host calls cost more than a staging copy */
    if (direct > best_direct || (direct == best_direct && calls < best_calls)) {
      best = p, best_direct = direct, best_calls = calls;
      g[0] = t[0], g[1] = t[1];
    }
  }
  return best;
}

static bool ck_gemm(CudaCg *cc, HInstr *in, const HInstr *dot) {
  DType t = dot->shape.dt, at = dot->ops[0]->shape.dt; /* result, operands */
  DotSide side[2];
  cuda_dot_side(dot, 0, &side[0]);
  cuda_dot_side(dot, 1, &side[1]);
  const DotSide *L = &side[0], *R = &side[1];
  int64_t esz = (int64_t)hlo_dtype_size(t), asz = (int64_t)hlo_dtype_size(at);
  int64_t stage = cc->plan.temp_bytes, used = 0;
  GemmOperand g[2];
  int p = ck_batch_cut(cc, in, dot, side, g);
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < L->nb; i++)
    *(i < p ? &outer : &inner) *= dot->ops[0]->shape.dims[L->b[i]];
  for (int j = 0; j < 2; j++) {
    if (g[j].direct) continue;
    if (!ck_stage(cc, in, dot, j, &side[j], &used, &g[j])) return false;
    g[j].bout = inner * g[j].bin;
  }
  /* where the product goes: the fusion's own buffer when it is not shared with an operand */
  CuPtr out;
  bool epi = dot != in, own = true; /* own: the product goes to the fusion's buffer */
  const MemBuf *mb = &cc->plan.bufs[in->idx];
  if (!cuda_ptr_of(cc, in, &out) ||
      (epi && (mb->kind == MEM_ALIAS || !hlo_shape_same_dims(&dot->shape, &in->shape) ||
               dot->shape.dt != in->shape.dt))) {
    own = false;
    out = (CuPtr){CU_TEMP, 0, stage + used};
    used += memplan_align(hlo_shape_elems(&dot->shape) * esz);
  }
  /* an epilogue cuBLASLt computes in the GEMM (one call), its bias in memory first */
  CuGemmEpi fe = {0};
  if (epi && outer == 1 && cuda_gemm_epilogue_match(cc, in, dot, &fe) &&
      !cuda_gemm_epilogue_bias(cc, in, &fe, stage, &used))
    return false;
  if (used > cc->stage_bytes) cc->stage_bytes = used;
  /* row-major C[B,M,N] = A[B,M,K] B[B,K,N] is column-major C^T = B^T A^T; one call per outer
   * batch */
  int64_t M = L->F, N = R->F, K = L->K;
  for (int64_t o = 0; o < outer; o++) {
    CuStep *s = cuda_add_step(cc, CU_STEP_GEMM, in);
    s->dt = t;
    s->at = at;
    s->aat = dot->ops[1]->shape.dt;
    s->m = N, s->n = M, s->k = K;
    s->a = g[1].ptr, s->b = g[0].ptr, s->c = out;
    s->a.offset += o * g[1].bout * asz, s->b.offset += o * g[0].bout * asz;
    s->c.offset += o * inner * M * N * esz;
    s->transa = g[1].form, s->lda = g[1].ld;
    s->transb = g[0].form, s->ldb = g[0].ld;
    s->ldc = N;
    s->sa = g[1].bin, s->sb = g[0].bin, s->sc = M * N;
    s->batch = inner;
    if (ck_fp8(at)) s->lidx = cc->nlt++;
  }
  if (!ck_fp8(at)) cc->uses_cublas = true;
  /* a fusion whose root is the dot (a prologue only) has no epilogue: cuBLAS wrote it */
  if (!epi || (in->op == OP_FUSION && in->calls[0]->root == dot && own)) return true;
  int gi = cc->nsteps - 1;
  if (!ck_epilogue(cc, in, dot, out)) return false; /* reads the product where cuBLAS left it */
  /* fused: the kernel stays as the fallback where cuBLASLt cannot take the epilogue */
  return !fe.flags || cuda_gemm_epilogue_fuse(cc, in, &fe, gi, out);
}

/* The operand and result types cublasGemmEx computes as XLA does: f32 and f64 alone; bf16 and
 * f16 operands on the tensor cores, accumulated in f32 and rounded once to a 16-bit result or
 * kept f32 (a dot with preferred_element_type=f32). */
static bool ck_gemm_types_ok(DType at, DType t) {
  if (at == DT_F32 || at == DT_F64) return t == at;
  if (at == DT_BF16 || at == DT_F16) return t == at || t == DT_F32;
  /* fp8 through cuBLASLt (f32 sums) */
  if (ck_fp8(at)) return t == DT_F32 || t == DT_BF16 || t == DT_F16;
  return at == DT_S8 && t == DT_S32; /* the integer tensor cores, exact */
}

static bool ck_gemm_ok(CudaCg *cc, const HInstr *in, const HInstr *dot) {
  if (cc->o->no_cublas || !dot) return false;
  DType at = dot->ops[0]->shape.dt, rt = dot->ops[1]->shape.dt;
  /* one operand type, or two fp8 ones; cuBLASLt has no e5m2 x e5m2 kernel */
  bool fp8 = ck_fp8(at) && ck_fp8(rt) && !(at == DT_F8E5M2 && rt == DT_F8E5M2);
  if ((rt != at && !fp8) || (ck_fp8(at) && !fp8) || !ck_gemm_types_ok(at, dot->shape.dt))
    return false;
  DotSide L, R;
  cuda_dot_side(dot, 0, &L);
  cuda_dot_side(dot, 1, &R);
  if (L.F * L.K * R.F * L.B == 0) return false;
  /* (see ck_tn_ok; the lhs rows are cuBLAS's n, free for cuBLASLt's fp8 kernels: a decode
     step's few rows) */
  int64_t a = ck_tn_align(at);
  if (ck_tn_only(at) && (L.K % a || R.F % a || (at == DT_S8 && L.F % a))) return false;
  return L.F <= INT32_MAX && R.F <= INT32_MAX && L.K <= INT32_MAX && L.B <= INT32_MAX;
}

/* ------------------------------------------------------------------ convolution through cuDNN */

/* Which of the layout pass's canonical forms conv has: 1 for NHWC (b01f_01io->b01f), 2 for
 * NCHW (bf01_oi01->bf01), 0 for neither. */
static int ck_conv_form(const HInstr *conv) {
  return layout_conv_is_canonical(conv, OPT_CONV_NHWC)   ? 1
         : layout_conv_is_canonical(conv, OPT_CONV_NCHW) ? 2
                                                         : 0;
}

/* Whether cuDNN can run conv: f32, 1 or 2 spatial dims in one of the layout pass's canonical
 * forms, no base dilation or window reversal, non-negative padding, feature groups only, sizes
 * within int. */
static bool ck_conv_ok(CudaCg *cc, const HInstr *conv) {
  if (cc->o->no_cublas || !conv) return false;
  const Shape *xs = &conv->ops[0]->shape, *ks = &conv->ops[1]->shape, *ys = &conv->shape;
  if (ys->dt != DT_F32 || xs->dt != DT_F32 || ks->dt != DT_F32) return false;
  int r = ys->rank, nsp = r - 2;
  if (nsp < 1 || nsp > 2 || xs->rank != r || ks->rank != r || conv->batch_groups != 1) return false;
  int form = ck_conv_form(conv);
  if (!form) return false;
  for (int i = 0; i < nsp; i++) {
    const WinDim *w = &conv->window->d[i];
    if (w->base_dil != 1 || w->reversal || w->pad_lo < 0 || w->pad_hi < 0 || w->stride < 1 ||
        w->win_dil < 1)
      return false;
    if (w->size != ks->dims[(form == 2 ? 2 : 0) + i]) return false;
  }
  for (int i = 0; i < r; i++)
    if (xs->dims[i] > INT32_MAX / 4 || ys->dims[i] > INT32_MAX || ks->dims[i] > INT32_MAX ||
        ys->dims[i] == 0 || xs->dims[i] == 0)
      return false;
  return hlo_shape_elems(xs) < INT32_MAX && hlo_shape_elems(ys) < INT32_MAX;
}

typedef struct ConvStageCtx {
  const HInstr *expr;       /* the operand expression */
  bool perm;                /* permuted copy: operand index j = staged index from[j] */
  int from[HLO_MAX_RANK];   /* (the KRSC filter from [r, s, c, k], weight-gradient operands) */
  int nsp;                  /* spatial dims of the convolution */
  int64_t lo[HLO_MAX_RANK]; /* input: low padding added per staged dim */
  LLVMValueRef dst;         /* staging buffer */
  const Shape *cs;          /* staged shape (rank nsp + 2) */
} ConvStageCtx;

static bool ck_conv_stage_body(GenKern *k, LLVMValueRef *idx, void *vctx) {
  ConvStageCtx *c = vctx;
  const Shape *os = &c->expr->shape;
  int r = os->rank;
  LLVMValueRef oi[HLO_MAX_RANK];
  if (c->perm) {
    for (int j = 0; j < r; j++)
      oi[j] = idx[c->from[j]];
    LLVMValueRef v = gen_value(k, c->expr, oi);
    if (v) gen_store_elem(k, c->dst, c->cs, idx, v);
    return v != NULL;
  }
  /* staged input, zero-padded: operand index = staged index - lo, zero outside */
  LLVMBuilderRef B = k->B;
  LLVMValueRef in = LLVMConstInt(k->cg->i1, 1, 0);
  for (int i = 0; i < r; i++) {
    oi[i] = c->lo[i] ? LLVMBuildNSWSub(B, idx[i], gen_i64(k, c->lo[i]), "") : idx[i];
    if (c->cs->dims[i] != os->dims[i] || c->lo[i]) {
      in = LLVMBuildAnd(B, in, LLVMBuildICmp(B, LLVMIntSGE, oi[i], gen_i64(k, 0), ""), "");
      in =
          LLVMBuildAnd(B, in, LLVMBuildICmp(B, LLVMIntSLT, oi[i], gen_i64(k, os->dims[i]), ""), "");
    }
  }
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(B);
  int mark;
  LLVMBasicBlockRef join = cuda_if(k, in, &mark);
  LLVMValueRef v = gen_value(k, c->expr, oi);
  if (!v) return false;
  LLVMBasicBlockRef then_end = LLVMGetInsertBlock(B);
  cuda_endif(k, join, mark);
  LLVMValueRef phi = LLVMBuildPhi(B, k->cg->f32, "");
  LLVMValueRef zero = LLVMConstReal(k->cg->f32, 0.0);
  LLVMAddIncoming(phi, &v, &then_end, 1);
  LLVMAddIncoming(phi, &zero, &pre, 1);
  gen_store_elem(k, c->dst, c->cs, idx, phi);
  return true;
}

/* A stage kernel writing ctx->cs at temp offset off. */
static bool ck_conv_stage(CudaCg *cc, HInstr *in, ConvStageCtx *c, CuPtr at) {
  CuStep *st;
  GenKern *k = cuda_kbegin(cc, in, "conv-stage", 1, &at, &c->dst, &st);
  cuda_kbind_fusion(k, in);
  cuda_grid_loop(k, st, c->cs, ck_conv_stage_body, c);
  return cuda_kend(k);
}

/* cuDNN workspace reserved for one convolution: 8 times its input plus output, at least
 * 64 MiB, at most CudaOpts.conv_ws_limit (default 3 GiB): the algorithm search at first use
 * takes the fastest algorithm whose workspace fits, and the FFT-tiling and Winograd
 * algorithms want several times the tensors (2.6 GB for a 32x64x224x224 -> 128 3x3 layer). */
static int64_t ck_conv_ws(const CudaCg *cc, int64_t xbytes, int64_t ybytes) {
  int64_t lim = cc->o->conv_ws_limit > 0 ? cc->o->conv_ws_limit : (int64_t)3 << 30;
  int64_t w = (xbytes + ybytes) * 8;
  if (w < ((int64_t)64 << 20)) w = (int64_t)64 << 20;
  if (w > lim) w = lim;
  return memplan_align(w);
}

/* Where a convolution step writes conv's value: the fusion's own buffer when it has the
 * convolution's shape and is not shared with an operand (returns true), else private
 * scratch at stage + *used (advanced). Also accounts the step's staging in stage_bytes. */
static bool ck_conv_out(CudaCg *cc, HInstr *in, const HInstr *conv, CuPtr *yp, int64_t stage,
                        int64_t *used) {
  const Shape *ys = &conv->shape;
  const MemBuf *mb = &cc->plan.bufs[in->idx];
  bool own = true;
  if (!cuda_ptr_of(cc, in, yp) ||
      (conv != in &&
       (mb->kind == MEM_ALIAS || !hlo_shape_same_dims(ys, &in->shape) || in->shape.dt != DT_F32))) {
    own = false;
    *yp = (CuPtr){CU_TEMP, 0, stage + *used};
    *used += memplan_align((int64_t)hlo_shape_bytes(ys));
  }
  if (*used > cc->stage_bytes) cc->stage_bytes = *used;
  return own;
}

/* ------------------------------------------------------------------ weight gradients */

/* Whether convolution conv (canonical form, nchw or NHWC) is better computed as the weight
 * gradient of a forward convolution: cudnnConvolutionBackwardFilter(X, DY) -> dW. Any
 * convolution without base dilation, reversal or groups can be read that way, with
 *   NCHW: X[n,c,h,w] = lhs[c,n,h,w], DY[n,k,p,q] = rhs[k,n,p,q], out[c,k,r,s] = dW[k,c,r,s]
 *   NHWC: X[n,h,w,c] = lhs[c,h,w,n], DY[n,p,q,k] = rhs[p,q,n,k], out[c,r,s,k] = dW[k,r,s,c]
 * (the forward stride is the window dilation, the forward dilation the window stride, which
 * must be 1 for cuDNN here); it pays when the window is larger than the output (a
 * gradient's 224x224 window over a 3x3 result: as a forward convolution that is slow in
 * every cuDNN algorithm). The padding must satisfy cuDNN's forward arithmetic
 * (P = (H + 2 pad - R) / stride + 1). Sets xf / df: operand index j = X / DY index from[j]. */
static bool ck_wgrad_match(const HInstr *conv, bool nchw, int *xf, int *df) {
  int r = conv->shape.rank, nsp = r - 2,
      sp0 = layout_conv_pos(r, nchw ? OPT_CONV_NCHW : OPT_CONV_NHWC).sp0;
  if (nsp < 1 || nsp > 2 || conv->feature_groups > 1 || conv->batch_groups > 1) return false;
  if (nchw) {
    for (int i = 0; i < r; i++)
      xf[i] = df[i] = i;
    xf[0] = df[0] = 1, xf[1] = df[1] = 0;
  } else {
    xf[0] = r - 1, xf[r - 1] = 0;
    for (int i = 0; i < nsp; i++)
      xf[i + 1] = i + 1, df[i] = i + 1;
    df[nsp] = 0, df[nsp + 1] = r - 1;
  }
  const Shape *ls = &conv->ops[0]->shape;
  int64_t win = 1, outsp = 1;
  for (int i = 0; i < nsp; i++) {
    const WinDim *w = &conv->window->d[i];
    if (w->stride != 1 || w->base_dil != 1 || w->reversal || w->pad_lo < 0 || w->pad_hi < 0 ||
        w->win_dil < 1)
      return false;
    int64_t H = ls->dims[sp0 + i], R = conv->shape.dims[sp0 + i], P = w->size;
    if (H + 2 * w->pad_lo - R < 0 || (H + 2 * w->pad_lo - R) / w->win_dil + 1 != P) return false;
    win *= w->size;
    outsp *= R;
  }
  return win >= 64 && win > outsp;
}

/* An operand of the weight-gradient step: operand expression e re-indexed as X or DY
 * (e index j = staged index from[j]), read in place when e is a transpose by exactly that
 * permutation of an entry value the fusion reads directly, else staged at temp offset *off
 * (advanced). *ts receives the tensor's shape. */
static bool ck_wgrad_operand(CudaCg *cc, HInstr *in, const HInstr *e, const int *from, int nsp,
                             CuPtr *p, int64_t *off, Shape *ts) {
  int r = e->shape.rank;
  int64_t d[HLO_MAX_RANK] = {0};
  for (int j = 0; j < r; j++)
    d[from[j]] = e->shape.dims[j];
  *ts = hlo_shape_array(DT_F32, r, d);
  bool same = e->op == OP_TRANSPOSE && !e->nctrl;
  for (int j = 0; same && j < r; j++)
    same = e->dims.v[j] == from[j];
  const HInstr *x = same ? ck_direct(in, e->ops[0]) : NULL;
  if (x && cuda_ptr_of(cc, x, p)) return true;
  ConvStageCtx c;
  memset(&c, 0, sizeof c);
  c.expr = e;
  c.perm = true;
  c.nsp = nsp;
  for (int j = 0; j < r; j++)
    c.from[j] = from[j];
  Shape *cs = hlo_arena_alloc(cc->cg.scratch, sizeof *cs);
  *cs = *ts;
  c.cs = cs;
  *p = (CuPtr){CU_TEMP, 0, *off};
  *off += memplan_align((int64_t)hlo_shape_bytes(cs));
  return ck_conv_stage(cc, in, &c, *p);
}

typedef struct UnstageCtx {
  LLVMValueRef src, dst;  /* dW as cuDNN wrote it, the convolution's buffer */
  const Shape *ss, *ds;   /* their shapes */
  int from[HLO_MAX_RANK]; /* source dim j = destination index from[j] */
} UnstageCtx;

static bool ck_unstage_body(GenKern *k, LLVMValueRef *idx, void *vctx) {
  UnstageCtx *c = vctx;
  LLVMValueRef si[HLO_MAX_RANK];
  for (int j = 0; j < c->ss->rank; j++)
    si[j] = idx[c->from[j]];
  gen_store_elem(k, c->dst, c->ds, idx, gen_load_elem(k, c->src, c->ss, si));
  return true;
}

static bool ck_conv_finish(CudaCg *cc, HInstr *in, const HInstr *conv, CuPtr yp, bool own,
                           int64_t xbytes, int64_t ybytes);

/* The weight gradient of ck_wgrad_match through cudnnConvolutionBackwardFilter. */
static bool ck_conv_wgrad(CudaCg *cc, HInstr *in, const HInstr *conv, bool nchw, const int *xf,
                          const int *df) {
  GenCg *cg = &cc->cg;
  const Shape *ys = &conv->shape;
  int r = ys->rank, nsp = r - 2, off = 2 - nsp;
  LayoutConvPos q = layout_conv_pos(r, nchw ? OPT_CONV_NCHW : OPT_CONV_NHWC);
  int sp0 = q.sp0, feat = q.feat;
  int64_t stage = cc->plan.temp_bytes, at = stage;
  CuPtr xp, dp, wp, yp;
  Shape xs, ds;
  if (!ck_wgrad_operand(cc, in, conv->ops[0], xf, nsp, &xp, &at, &xs) ||
      !ck_wgrad_operand(cc, in, conv->ops[1], df, nsp, &dp, &at, &ds))
    return false;
  int64_t used = at - stage;
  /* dW as cuDNN writes it: KCRS (NCHW) or KRSC (NHWC); the convolution's [C,K,R,S] / [C,R,S,K] */
  int64_t wd[HLO_MAX_RANK];
  UnstageCtx u;
  memset(&u, 0, sizeof u);
  wd[0] = ds.dims[feat]; /* K */
  u.from[0] = feat;
  for (int i = 0; i < nsp; i++)
    wd[sp0 + i] = ys->dims[sp0 + i], u.from[sp0 + i] = sp0 + i;
  wd[feat] = xs.dims[feat]; /* C */
  u.from[feat] = 0;
  Shape *wshape = hlo_arena_alloc(cg->scratch, sizeof *wshape);
  *wshape = hlo_shape_array(DT_F32, r, wd);
  wp = (CuPtr){CU_TEMP, 0, stage + used};
  used += memplan_align((int64_t)hlo_shape_bytes(wshape));
  bool own = ck_conv_out(cc, in, conv, &yp, stage, &used);
  CuStep *g = cuda_add_step(cc, CU_STEP_CONV, in);
  g->cidx = cc->nconvs++;
  g->nchw = nchw;
  g->wgrad = true;
  g->cn = xs.dims[0];
  g->cc = xs.dims[feat];
  g->ch = nsp == 2 ? xs.dims[sp0] : 1;
  g->cw = xs.dims[sp0 + nsp - 1];
  g->ck = ds.dims[feat];
  g->cr = nsp == 2 ? ys->dims[sp0] : 1;
  g->cs = ys->dims[sp0 + nsp - 1];
  g->cp = nsp == 2 ? ds.dims[sp0] : 1;
  g->cq = ds.dims[sp0 + nsp - 1];
  g->groups = 1;
  for (int j = 0; j < 2; j++)
    g->pad[j] = 0, g->stride[j] = 1, g->dil[j] = 1;
  for (int i = 0; i < nsp; i++) {
    g->pad[off + i] = conv->window->d[i].pad_lo;
    g->stride[off + i] = conv->window->d[i].win_dil;
  }
  g->x = xp, g->y = dp, g->w = wp;
  g->ws = (CuPtr){CU_TEMP, 0, 0};
  /* dW -> the convolution's layout */
  CuStep *st;
  LLVMValueRef pv[2];
  CuPtr ex[2] = {wp, yp};
  GenKern *k = cuda_kbegin(cc, in, "wgrad-unstage", 2, ex, pv, &st);
  u.src = pv[0], u.dst = pv[1], u.ss = wshape, u.ds = ys;
  cuda_grid_loop(k, st, ys, ck_unstage_body, &u);
  if (!cuda_kend(k)) return false;
  return ck_conv_finish(cc, in, conv, yp, own, (int64_t)hlo_shape_bytes(&xs),
                        (int64_t)hlo_shape_bytes(&ds));
}

static bool ck_conv(CudaCg *cc, HInstr *in, const HInstr *conv) {
  GenCg *cg = &cc->cg;
  const Shape *xs = &conv->ops[0]->shape, *ks = &conv->ops[1]->shape, *ys = &conv->shape;
  const WinDim *wd = conv->window->d;
  int r = ys->rank, nsp = r - 2, off = 2 - nsp; /* HLO spatial dim i is cuDNN's off + i */
  bool nchw = ck_conv_form(conv) == 2;
  int xf[HLO_MAX_RANK], df[HLO_MAX_RANK];
  if (ck_wgrad_match(conv, nchw, xf, df)) return ck_conv_wgrad(cc, in, conv, nchw, xf, df);
  LayoutConvPos q = layout_conv_pos(r, nchw ? OPT_CONV_NCHW : OPT_CONV_NHWC);
  int sp0 = q.sp0, ksp0 = q.ksp0, feat = q.feat, kout = q.kout, kin = q.kin;
  int64_t stage = cc->plan.temp_bytes, used = 0;
  int64_t xdims[HLO_MAX_RANK];
  for (int i = 0; i < r; i++)
    xdims[i] = xs->dims[i];
  bool sym = true;
  for (int i = 0; i < nsp; i++)
    sym = sym && wd[i].pad_lo == wd[i].pad_hi;
  /* input: read in place when the fusion reads it directly and the padding is symmetric;
   * otherwise staged with its padding made explicit */
  CuPtr xp, fp, yp;
  const HInstr *xd = ck_direct(in, conv->ops[0]);
  bool staged_x = !(xd && sym && cuda_ptr_of(cc, xd, &xp));
  if (staged_x) {
    ConvStageCtx c;
    memset(&c, 0, sizeof c);
    c.expr = conv->ops[0];
    c.nsp = nsp;
    for (int i = 0; i < nsp; i++) {
      c.lo[sp0 + i] = wd[i].pad_lo;
      xdims[sp0 + i] += wd[i].pad_lo + wd[i].pad_hi;
    }
    Shape *cs = hlo_arena_alloc(cg->scratch, sizeof *cs);
    *cs = hlo_shape_array(DT_F32, r, xdims);
    c.cs = cs;
    xp = (CuPtr){CU_TEMP, 0, stage + used};
    used += memplan_align((int64_t)hlo_shape_bytes(cs));
    if (!ck_conv_stage(cc, in, &c, xp)) return false;
  }
  /* filter: NHWC needs cuDNN's KRSC from [sp..., c, k], always staged; NCHW's KCRS is the
   * operand's own layout, read in place when the fusion reads it directly */
  const HInstr *fd_in = nchw ? ck_direct(in, conv->ops[1]) : NULL;
  if (!(fd_in && cuda_ptr_of(cc, fd_in, &fp))) {
    ConvStageCtx c;
    memset(&c, 0, sizeof c);
    c.expr = conv->ops[1];
    c.perm = !nchw;
    c.nsp = nsp;
    if (!nchw) { /* staged [k, sp..., c] <- operand [sp..., c, k] */
      for (int i = 0; i < nsp; i++)
        c.from[i] = i + 1;
      c.from[nsp] = r - 1;
      c.from[nsp + 1] = 0;
    }
    int64_t fd[HLO_MAX_RANK];
    for (int i = 0; i < r; i++)
      fd[i] = ks->dims[i];
    if (!nchw) {
      fd[0] = ks->dims[r - 1];
      for (int i = 0; i < nsp; i++)
        fd[i + 1] = ks->dims[i];
      fd[r - 1] = ks->dims[nsp];
    }
    Shape *cs = hlo_arena_alloc(cg->scratch, sizeof *cs);
    *cs = hlo_shape_array(DT_F32, r, fd);
    c.cs = cs;
    fp = (CuPtr){CU_TEMP, 0, stage + used};
    used += memplan_align((int64_t)hlo_shape_bytes(cs));
    if (!ck_conv_stage(cc, in, &c, fp)) return false;
  }
  bool own = ck_conv_out(cc, in, conv, &yp, stage, &used);
  CuStep *g = cuda_add_step(cc, CU_STEP_CONV, in);
  g->cidx = cc->nconvs++;
  g->nchw = nchw;
  g->cn = xdims[0];
  g->cc = xdims[feat];
  g->ch = nsp == 2 ? xdims[sp0] : 1;
  g->cw = xdims[sp0 + nsp - 1];
  g->ck = ks->dims[kout];
  g->cr = nsp == 2 ? ks->dims[ksp0] : 1;
  g->cs = ks->dims[ksp0 + nsp - 1];
  g->cp = nsp == 2 ? ys->dims[sp0] : 1;
  g->cq = ys->dims[sp0 + nsp - 1];
  g->groups = conv->feature_groups > 0 ? conv->feature_groups : 1;
  for (int j = 0; j < 2; j++)
    g->pad[j] = 0, g->stride[j] = 1, g->dil[j] = 1;
  for (int i = 0; i < nsp; i++) {
    g->pad[off + i] = staged_x ? 0 : wd[i].pad_lo;
    g->stride[off + i] = wd[i].stride;
    g->dil[off + i] = wd[i].win_dil;
  }
  /* cuDNN's output size must be HLO's */
  int64_t in_sz[2] = {g->ch, g->cw}, k_sz[2] = {g->cr, g->cs}, o_sz[2] = {g->cp, g->cq};
  for (int j = 0; j < 2; j++)
    HLO_ASSERT((in_sz[j] + 2 * g->pad[j] - (k_sz[j] - 1) * g->dil[j] - 1) / g->stride[j] + 1 ==
               o_sz[j]);
  HLO_ASSERT(g->ck == ys->dims[feat] && g->cc == ks->dims[kin] * g->groups);
  g->x = xp, g->w = fp, g->y = yp;
  g->ws = (CuPtr){CU_TEMP, 0, 0}; /* placed after the staging area by cuda_compile() */
  return ck_conv_finish(cc, in, conv, yp, own, (int64_t)hlo_shape_bytes(xs),
                        (int64_t)hlo_shape_bytes(ys));
}

/* After a convolution step wrote conv's value at yp (own: the fusion's buffer): reserve its
 * workspace, and run the fusion's epilogue, if any, as a kernel reading it. */
static bool ck_conv_finish(CudaCg *cc, HInstr *in, const HInstr *conv, CuPtr yp, bool own,
                           int64_t xbytes, int64_t ybytes) {
  int64_t ws = ck_conv_ws(cc, xbytes, ybytes);
  if (ws > cc->ws_bytes) cc->ws_bytes = ws;
  /* a lone convolution, or a fusion whose root is the convolution (a prologue only) whose
   * own buffer cuDNN wrote, has no epilogue */
  if (conv == in || (in->op == OP_FUSION && in->calls[0]->root == conv && own)) return true;
  return ck_epilogue(cc, in, conv, yp); /* reads the convolution where cuDNN left it */
}

/* ------------------------------------------------------------------ dynamic-update-slice */

typedef struct DusCtx {
  const HInstr *in; /* the dynamic-update-slice */
  LLVMValueRef out; /* its storage */
} DusCtx;

/* Output element start + ui = update element ui (gen_dus_index). */
static bool ck_dus_body(GenKern *k, LLVMValueRef *ui, void *vctx) {
  DusCtx *c = vctx;
  LLVMValueRef oi[HLO_MAX_RANK];
  if (!gen_dus_index(k, c->in, ui, oi)) return false;
  LLVMValueRef v = gen_value(k, c->in->ops[1], ui);
  if (v) gen_store_elem(k, c->out, &c->in->shape, oi, v);
  return v != NULL;
}

/* A lone dynamic-update-slice whose operand has storage: the operand copied to the output
 * (a device-to-device copy at the copy bandwidth, none when the plan put the update in place),
 * then a kernel over the update's elements only (a KV cache's new entry, not the cache). */
static bool ck_dus(CudaCg *cc, HInstr *in, bool *taken) {
  CuPtr src, dst;
  *taken = in->op == OP_DYNAMIC_UPDATE_SLICE && hlo_shape_elems(&in->ops[1]->shape) > 0 &&
           cuda_ptr_of(cc, in->ops[0], &src) && cuda_ptr_of(cc, in, &dst);
  if (!*taken) return true;
  if (!ptr_eq(&src, &dst)) {
    CuStep *c = cuda_add_step(cc, CU_STEP_COPY, in);
    c->src = src, c->dst = dst;
    c->bytes = (int64_t)hlo_shape_bytes(&in->shape);
  }
  CuStep *st;
  GenKern *k = cuda_kbegin(cc, in, "update-slice", 0, NULL, NULL, &st);
  DusCtx c = {in, cuda_kbuffer(k, in)};
  cuda_grid_loop(k, st, &in->ops[1]->shape, ck_dus_body, &c);
  return cuda_kend(k);
}

/* ------------------------------------------------------------------ dispatch */

bool cuda_emit_instr(CudaCg *cc, HInstr *in) {
  GenCg *cg = &cc->cg;
  const MemBuf *b = &cc->plan.bufs[in->idx];
  bool computes =
      b->kind == MEM_TEMP || b->kind == MEM_RESULT || (b->kind == MEM_ALIAS && !b->view);
  if (!computes) return true;
  if (in->shape.dt != DT_TUPLE && hlo_shape_elems(&in->shape) == 0) return true;
  bool taken;
  bool att_ok = cuda_attention(cc, in, &taken);
  if (taken) return att_ok;
  bool sk_ok = cuda_skinny(cc, in, &taken);
  if (taken) return sk_ok;
  bool gm_ok = cuda_gemm_mma(cc, in, &taken);
  if (taken) return gm_ok;
  const HInstr *dot = ck_hero(in, OP_DOT);
  if (dot && ck_gemm_ok(cc, in, dot)) return ck_gemm(cc, in, dot);
  const HInstr *conv = ck_hero(in, OP_CONVOLUTION);
  bool dw = conv && opt_conv_depthwise(conv);
  if (dw) {
    bool dw_ok = cuda_depthwise_kernel(cc, in, conv, &taken);
    if (taken) return dw_ok;
    cc->ndepthwise_elemental++; /* (its form: the elemental loop kernel below) */
  }
  if (conv && !dw && ck_conv_ok(cc, conv)) return ck_conv(cc, in, conv);
  /* a product no library path takes (its type or form) becomes a loop kernel: --stats says so */
  if ((dot || conv) && !dw) {
    if (cc->nloop_products < 4) cc->loop_products[cc->nloop_products] = in->name;
    cc->nloop_products++;
  }
  if (in->op == OP_SCATTER) return cuda_scatter(cc, in);
  if (in->op == OP_SORT) return cuda_sort(cc, in);
  if (in->op == OP_FFT) return cuda_fft(cc, in);
  if (in->op == OP_SELECT_AND_SCATTER) return cuda_select_scatter(cc, in);
  bool dus_ok = ck_dus(cc, in, &taken);
  if (taken) return dus_ok;
  RowPlan rp;
  if (ck_row_plan(in, &rp, cg->scratch))
    return rp.chain ? ck_row_chain(cc, in, &rp)
           : rp.col ? ck_col_reduce(cc, in, &rp)
                    : ck_row_reduce(cc, in, &rp);
  const Shape *s = &in->shape;
  if (s->dt == DT_TUPLE) {
    if (in->op == OP_FUSION && in->calls[0]->root->op == OP_TUPLE) {
      for (int j = 1; j < s->ntuple; j++)
        if (!hlo_shape_same_dims(&s->tuple[j], &s->tuple[0])) return ck_multi_fusion(cc, in);
    } else if (in->op != OP_REDUCE) {
      hlo_err_at(cg->err, in, "CUDA target: tuple-shaped %s is not supported", hlo_op_name(in->op));
      return false;
    }
    for (int j = 0; j < s->ntuple; j++)
      if (s->tuple[j].dt == DT_TUPLE) {
        hlo_err_at(cg->err, in, "CUDA target: nested tuple outputs are not supported");
        return false;
      }
    return ck_loop_kernel(cc, in, &s->tuple[0], NULL, NULL);
  }
  if (ck_vec_ok(in, NULL, cg->scratch)) return ck_vec_kernel(cc, in, NULL, (CuPtr){0});
  return ck_loop_kernel(cc, in, s, NULL, NULL);
}
