/* targets/gen/gen_cg.c: the module-wide state both code generators share (GenCg).
 *
 * The elemental generator and the kernel helpers need the same few things of a compilation
 * whichever target it is for: the module, the computation whose values are being emitted,
 * the error sink, a scratch arena, the LLVM context, module and builder, the common types,
 * and the read-only globals of constant literals (made once each). The targets embed GenCg
 * as the first member of their own state (CpuCg, CudaCg) and fill in the hooks through which
 * the generator reaches what only the target knows: where an entry value lives inside a
 * kernel, how a kernel addresses a constant's literal, and how large read-only data enters
 * the object. */
#include "gen.h"

#include <string.h>

void gen_cg_types(GenCg *g) {
  g->i1 = LLVMInt1TypeInContext(g->C);
  g->i8 = LLVMInt8TypeInContext(g->C);
  g->i16 = LLVMInt16TypeInContext(g->C);
  g->i32 = LLVMInt32TypeInContext(g->C);
  g->i64 = LLVMInt64TypeInContext(g->C);
  g->f16 = LLVMHalfTypeInContext(g->C);
  g->bf16 = LLVMBFloatTypeInContext(g->C);
  g->f32 = LLVMFloatTypeInContext(g->C);
  g->f64 = LLVMDoubleTypeInContext(g->C);
  g->ptr = LLVMPointerTypeInContext(g->C, 0);
  g->vd = LLVMVoidTypeInContext(g->C);
}

LLVMTypeRef gen_reg_type(GenCg *g, DType t) {
  switch (t) {
  case DT_PRED: return g->i1;
  case DT_S8:
  case DT_U8: return g->i8;
  case DT_S16:
  case DT_U16: return g->i16;
  case DT_S32:
  case DT_U32: return g->i32;
  case DT_S64:
  case DT_U64: return g->i64;
  case DT_S4:
  case DT_U4: return LLVMIntTypeInContext(g->C, 4); /* wraps modulo 16 as XLA's i4 */
  case DT_F16: return g->f16;
  case DT_BF16: return g->bf16;
  case DT_F8E4M3FN:
  case DT_F8E5M2: return g->f32; /* LLVM has no fp8 type: held as f32 */
  case DT_F32: return g->f32;
  case DT_F64: return g->f64;
  case DT_C64:
  case DT_C128: return gen_complex_type(g, t); /* {re, im} (gen_complex.c) */
  case DT_INVALID:
  case DT_TOKEN:
  case DT_TUPLE:
  case DT_COUNT: break;
  }
  HLO_ASSERT(!"no register type");
  return NULL;
}

LLVMTypeRef gen_mem_type(GenCg *g, DType t) {
  return t == DT_PRED || hlo_dtype_is_fp8(t) || hlo_dtype_is_int4(t) ? g->i8 : gen_reg_type(g, t);
}

LLVMValueRef gen_const_global(GenCg *g, HInstr *in) {
  for (int i = 0; i < g->nconst; i++)
    if (g->const_instr[i] == in) return g->const_gv[i];
  if (g->nconst == g->const_cap) {
    int nc = g->const_cap ? g->const_cap * 2 : 64;
    HInstr **ni = hlo_arena_alloc(g->scratch, sizeof *ni * (size_t)nc);
    LLVMValueRef *ng = hlo_arena_alloc(g->scratch, sizeof *ng * (size_t)nc);
    if (g->nconst) {
      memcpy(ni, g->const_instr, sizeof *ni * (size_t)g->nconst);
      memcpy(ng, g->const_gv, sizeof *ng * (size_t)g->nconst);
    }
    g->const_instr = ni;
    g->const_gv = ng;
    g->const_cap = nc;
  }
  size_t n = hlo_shape_bytes(&in->shape);
  char name[512];
  snprintf(name, sizeof name, "%s_c%d", g->name, g->nconst);
  const void *data = n ? in->literal->data : "";
  LLVMValueRef gv = g->rodata_fn ? g->rodata_fn(g, name, data, n) : gen_rodata(g, name, data, n);
  g->const_instr[g->nconst] = in;
  g->const_gv[g->nconst] = gv;
  g->nconst++;
  return gv;
}

LLVMValueRef gen_rodata(GenCg *g, const char *name, const void *data, size_t n) {
  LLVMValueRef init = LLVMConstStringInContext(g->C, (const char *)data, (unsigned)n, 1);
  LLVMValueRef gv = LLVMAddGlobal(g->M, LLVMTypeOf(init), name);
  LLVMSetInitializer(gv, init);
  LLVMSetGlobalConstant(gv, 1);
  LLVMSetLinkage(gv, LLVMPrivateLinkage);
  LLVMSetUnnamedAddress(gv, LLVMGlobalUnnamedAddr);
  LLVMSetAlignment(gv, 64);
  return gv;
}
