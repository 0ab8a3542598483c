/* targets/gen/gen_fingerprint.c: a structural fingerprint of a function's IR, gen_fingerprint(),
 * by which both targets find kernels they can emit once (targets/cpu/cpu_share.c, the CUDA
 * target's ck_dedupe).
 *
 * The fingerprint is a sequence of 64-bit tokens that spells out, block by block and
 * instruction by instruction, the opcode, the type, every operand (values of the function
 * itself by their position in it; constants, globals, functions, types, attributes and
 * metadata by identity, since the LLVMContext uniques them; or as the caller says, below) and every
 * property an instruction carries outside its operands (predicates, flags, alignment, orderings,
 * indices, masks, call attributes, metadata attachments; a loop ID, distinct per loop, by its
 * options). Equal fingerprints make IR equal up to names (and what the caller spoke for); a
 * function using an instruction the fingerprint does not know is never merged. The walk replaced
 * comparing printed IR: printing a function alone walks the whole module's metadata each time
 * (quadratic), and even one print of the module cost ~40 ms on bert_base.
 *
 * A caller may speak for an operand instead (GenFpOperand): the CPU's holes (integer constants
 * a merged kernel reads at run time), a CUDA kernel's own shared-memory global. */
#include "gen.h"

#include <stdlib.h>

void gen_fp_tok(GenFp *f, uint64_t v) {
  if (f->n == f->cap) {
    f->cap = f->cap ? f->cap * 2 : 1024;
    f->t = realloc(f->t, f->cap * sizeof *f->t);
    HLO_ASSERT(f->t);
  }
  f->t[f->n++] = v;
}

void gen_fp_tokp(GenFp *f, const void *p) { gen_fp_tok(f, (uint64_t)(uintptr_t)p); }

/* Position of a local value (argument, block, instruction) in the function: an open-addressing
 * table from the pointer to its number. */
typedef struct GfLocals {
  LLVMValueRef *key; /* pointers, NULL: empty */
  uint32_t *val;     /* numbers */
  size_t mask;       /* size - 1 (a power of two) */
} GfLocals;

static size_t gf_slot(const GfLocals *l, LLVMValueRef v) {
  uint64_t h = (uint64_t)(uintptr_t)v * 0x9E3779B97F4A7C15ull;
  size_t i = (size_t)(h >> 20) & l->mask;
  while (l->key[i] && l->key[i] != v)
    i = (i + 1) & l->mask;
  return i;
}

static void gf_local_add(GfLocals *l, LLVMValueRef v, uint32_t n) {
  size_t i = gf_slot(l, v);
  l->key[i] = v;
  l->val[i] = n;
}

/* Token of an operand: tag 1 + number for local values, the pointer for everything else
 * (pointers are at least 8-byte aligned, so the low bits tell the two apart). */
static void gf_tok_operand(GenFp *f, const GfLocals *l, LLVMValueRef v) {
  if (v) {
    size_t i = gf_slot(l, v);
    if (l->key[i]) {
      gen_fp_tok(f, ((uint64_t)l->val[i] << 3) | 1);
      return;
    }
  }
  gen_fp_tokp(f, v);
}

static void gf_tok_attrs(GenFp *f, LLVMValueRef fn_or_call, bool call, unsigned nparams) {
  for (long idx = -1; idx <= (long)nparams; idx++) {
    LLVMAttributeIndex ai =
        idx < 0 ? (LLVMAttributeIndex)LLVMAttributeFunctionIndex : (LLVMAttributeIndex)idx;
    unsigned n = call ? LLVMGetCallSiteAttributeCount(fn_or_call, ai)
                      : LLVMGetAttributeCountAtIndex(fn_or_call, ai);
    gen_fp_tok(f, n);
    if (!n) continue;
    LLVMAttributeRef a[64];
    if (n > 64) {
      f->opaque = true;
      return;
    }
    if (call)
      LLVMGetCallSiteAttributes(fn_or_call, ai, a);
    else
      LLVMGetAttributesAtIndex(fn_or_call, ai, a);
    for (unsigned k = 0; k < n; k++)
      gen_fp_tokp(f, a[k]);
  }
}

void gen_fingerprint(LLVMValueRef fn, GenFp *f, GenFpOperand operand, void *ctx) {
  f->n = 0;
  f->opaque = false;
  LLVMContextRef C = LLVMGetTypeContext(LLVMTypeOf(fn));
  unsigned loop_kind = LLVMGetMDKindIDInContext(C, "llvm.loop", 9);
  size_t nv = LLVMCountParams(fn) + 1;
  for (LLVMBasicBlockRef b = LLVMGetFirstBasicBlock(fn); b; b = LLVMGetNextBasicBlock(b)) {
    nv++;
    for (LLVMValueRef i = LLVMGetFirstInstruction(b); i; i = LLVMGetNextInstruction(i))
      nv++;
  }
  size_t cap = 16;
  while (cap < 2 * nv)
    cap *= 2;
  GfLocals l = {calloc(cap, sizeof(LLVMValueRef)), calloc(cap, sizeof(uint32_t)), cap - 1};
  HLO_ASSERT(l.key && l.val);
  uint32_t num = 0;
  for (LLVMValueRef p = LLVMGetFirstParam(fn); p; p = LLVMGetNextParam(p))
    gf_local_add(&l, p, num++);
  for (LLVMBasicBlockRef b = LLVMGetFirstBasicBlock(fn); b; b = LLVMGetNextBasicBlock(b)) {
    gf_local_add(&l, LLVMBasicBlockAsValue(b), num++);
    for (LLVMValueRef i = LLVMGetFirstInstruction(b); i; i = LLVMGetNextInstruction(i))
      gf_local_add(&l, i, num++);
  }
  /* the function: type, calling convention, attributes, metadata */
  gen_fp_tokp(f, LLVMGlobalGetValueType(fn));
  gen_fp_tok(f, LLVMGetFunctionCallConv(fn));
  gen_fp_tok(f, (uint64_t)LLVMGetLinkage(fn));
  gf_tok_attrs(f, fn, false, LLVMCountParams(fn));
  size_t nmd = 0;
  LLVMValueMetadataEntry *md = LLVMGlobalCopyAllMetadata(fn, &nmd);
  gen_fp_tok(f, nmd);
  for (size_t k = 0; k < nmd; k++) {
    gen_fp_tok(f, LLVMValueMetadataEntriesGetKind(md, (unsigned)k));
    gen_fp_tokp(f, LLVMValueMetadataEntriesGetMetadata(md, (unsigned)k));
  }
  if (md) LLVMDisposeValueMetadataEntries(md);
  for (LLVMBasicBlockRef b = LLVMGetFirstBasicBlock(fn); b; b = LLVMGetNextBasicBlock(b)) {
    gen_fp_tok(f, 0xB10C);
    for (LLVMValueRef i = LLVMGetFirstInstruction(b); i && !f->opaque;
         i = LLVMGetNextInstruction(i)) {
      LLVMOpcode op = LLVMGetInstructionOpcode(i);
      gen_fp_tok(f, (uint64_t)op);
      gen_fp_tokp(f, LLVMTypeOf(i));
      int no = LLVMGetNumOperands(i);
      gen_fp_tok(f, (uint64_t)no);
      for (int k = 0; k < no; k++) {
        LLVMValueRef v = LLVMGetOperand(i, k);
        if (!operand || !operand(ctx, f, i, k, v)) gf_tok_operand(f, &l, v);
      }
      if (LLVMCanValueUseFastMathFlags(i)) gen_fp_tok(f, LLVMGetFastMathFlags(i));
      switch (op) {
      case LLVMAdd:
      case LLVMSub:
      case LLVMMul:
      case LLVMShl: gen_fp_tok(f, (uint64_t)LLVMGetNSW(i) << 1 | (uint64_t)LLVMGetNUW(i)); break;
      case LLVMUDiv:
      case LLVMSDiv:
      case LLVMLShr:
      case LLVMAShr: gen_fp_tok(f, LLVMGetExact(i)); break;
      case LLVMOr: gen_fp_tok(f, LLVMGetIsDisjoint(i)); break;
      case LLVMZExt: gen_fp_tok(f, LLVMGetNNeg(i)); break;
      case LLVMFNeg:
      case LLVMFAdd:
      case LLVMFSub:
      case LLVMFMul:
      case LLVMFDiv:
      case LLVMURem:
      case LLVMSRem:
      case LLVMFRem:
      case LLVMAnd:
      case LLVMXor:
      case LLVMTrunc:
      case LLVMSExt:
      case LLVMFPToUI:
      case LLVMFPToSI:
      case LLVMSIToFP:
      case LLVMFPTrunc:
      case LLVMFPExt:
      case LLVMPtrToInt:
      case LLVMIntToPtr:
      case LLVMBitCast:
      case LLVMAddrSpaceCast:
      case LLVMSelect:
      case LLVMExtractElement:
      case LLVMInsertElement:
      case LLVMFreeze:
      case LLVMRet:
      case LLVMBr:
      case LLVMSwitch:
      case LLVMUnreachable: break;
      case LLVMUIToFP: /* LLVM 19's nneg on uitofp has no C accessor; the builder never sets it */
        break;
      case LLVMICmp: gen_fp_tok(f, LLVMGetICmpPredicate(i)); break;
      case LLVMFCmp: gen_fp_tok(f, LLVMGetFCmpPredicate(i)); break;
      case LLVMAlloca:
        gen_fp_tokp(f, LLVMGetAllocatedType(i));
        gen_fp_tok(f, LLVMGetAlignment(i));
        break;
      case LLVMLoad:
      case LLVMStore:
        gen_fp_tok(f, LLVMGetAlignment(i));
        gen_fp_tok(f, LLVMGetVolatile(i));
        gen_fp_tok(f, LLVMGetOrdering(i));
        if (LLVMGetOrdering(i) != LLVMAtomicOrderingNotAtomic)
          gen_fp_tok(f, LLVMIsAtomicSingleThread(i));
        break;
      case LLVMGetElementPtr:
        gen_fp_tokp(f, LLVMGetGEPSourceElementType(i));
        gen_fp_tok(f, LLVMIsInBounds(i));
        break;
      case LLVMCall:
        gen_fp_tokp(f, LLVMGetCalledFunctionType(i));
        gen_fp_tok(f, LLVMGetTailCallKind(i));
        gen_fp_tok(f, LLVMGetInstructionCallConv(i));
        gf_tok_attrs(f, i, true, LLVMGetNumArgOperands(i));
        break;
      case LLVMPHI: {
        unsigned n = LLVMCountIncoming(i);
        for (unsigned k = 0; k < n; k++)
          gf_tok_operand(f, &l, LLVMBasicBlockAsValue(LLVMGetIncomingBlock(i, k)));
        break;
      }
      case LLVMExtractValue:
      case LLVMInsertValue: {
        unsigned n = LLVMGetNumIndices(i);
        const unsigned *ix = LLVMGetIndices(i);
        gen_fp_tok(f, n);
        for (unsigned k = 0; k < n; k++)
          gen_fp_tok(f, ix[k]);
        break;
      }
      case LLVMShuffleVector: {
        unsigned n = LLVMGetNumMaskElements(i);
        gen_fp_tok(f, n);
        for (unsigned k = 0; k < n; k++)
          gen_fp_tok(f, (uint64_t)(int64_t)LLVMGetMaskValue(i, k));
        break;
      }
      case LLVMAtomicRMW:
        gen_fp_tok(f, LLVMGetAtomicRMWBinOp(i));
        gen_fp_tok(f, LLVMGetOrdering(i));
        gen_fp_tok(f, LLVMGetVolatile(i));
        gen_fp_tok(f, LLVMIsAtomicSingleThread(i));
        gen_fp_tok(f, LLVMGetAlignment(i));
        break;
      case LLVMAtomicCmpXchg:
        gen_fp_tok(f, LLVMGetCmpXchgSuccessOrdering(i));
        gen_fp_tok(f, LLVMGetCmpXchgFailureOrdering(i));
        gen_fp_tok(f, LLVMGetWeak(i));
        gen_fp_tok(f, LLVMGetVolatile(i));
        gen_fp_tok(f, LLVMIsAtomicSingleThread(i));
        gen_fp_tok(f, LLVMGetAlignment(i));
        break;
      case LLVMFence:
        gen_fp_tok(f, LLVMGetOrdering(i));
        gen_fp_tok(f, LLVMIsAtomicSingleThread(i));
        break;
      case LLVMIndirectBr:
      case LLVMInvoke:
      case LLVMCallBr:
      case LLVMUserOp1:
      case LLVMUserOp2:
      case LLVMVAArg:
      case LLVMResume:
      case LLVMLandingPad:
      case LLVMCleanupRet:
      case LLVMCatchRet:
      case LLVMCatchPad:
      case LLVMCleanupPad:
      case LLVMCatchSwitch: f->opaque = true; break;
      }
      if (LLVMHasMetadata(i)) {
        size_t nm = 0;
        LLVMValueMetadataEntry *e = LLVMInstructionGetAllMetadataOtherThanDebugLoc(i, &nm);
        gen_fp_tok(f, 0x3D00 + nm);
        for (size_t k = 0; k < nm; k++) {
          unsigned kind = LLVMValueMetadataEntriesGetKind(e, (unsigned)k);
          LLVMMetadataRef md = LLVMValueMetadataEntriesGetMetadata(e, (unsigned)k);
          gen_fp_tok(f, kind);
          if (kind != loop_kind) {
            gen_fp_tokp(f, md);
            continue;
          }
          /* a loop ID is distinct (its first operand is itself): its options by identity */
          LLVMValueRef mv = LLVMMetadataAsValue(C, md), ops[8];
          unsigned nops = LLVMGetMDNodeNumOperands(mv);
          if (nops > 8) {
            f->opaque = true;
            continue;
          }
          LLVMGetMDNodeOperands(mv, ops);
          gen_fp_tok(f, nops);
          for (unsigned q = 1; q < nops; q++)
            gen_fp_tokp(f, ops[q]);
        }
        if (e) LLVMDisposeValueMetadataEntries(e);
      }
    }
  }
  free(l.key);
  free(l.val);
}
