/* targets/cpu/gemm/library.c: the GEMM's side of the prebuilt library (cpu_prebuilt.c).
 *
 * The GEMM's functions depend on the target's configuration, not on the module, so hloc's build
 * compiles them once per x86 ISA level; a compilation whose configuration is exactly a level's
 * default (cpu_gemm_isa) only declares them. The library's module is made here with every
 * path and every function, kept although nothing in it calls them. */
#include "gemm_impl.h"

const char *cpu_gemm_isa(CpuCg *cg) {
  GmCfg c = gm_cfg(cg);
  static const char *const isa[2] = {"x86-64-v4", "x86-64-v3"};
  for (int i = 0; i < 2; i++) {
    const GmCfg *d = &gm_defaults[i];
    if (c.x86 && c.vw == d->vw && c.mr == d->mr && c.nr == d->nr && c.mc == d->mc &&
        c.kc == d->kc && c.nc == d->nc && c.direct == d->direct && c.order == d->order &&
        c.pfb == d->pfb && c.micro == d->micro)
      return isa[i];
  }
  return NULL;
}

bool cpu_gemm_made(const CpuCg *cg) {
  const GmState *st = cg->gemm;
  if (!st) return false;
  bool any = false;
  for (int e = 0; e < GE_COUNT; e++) {
    any |= st->fn[e] || st->rows_fn[e] || st->packa_fn[e] || st->packb_fn[e];
    for (int s = 0; s < GS_COUNT; s++)
      any |= st->step_fn[e][s] != NULL;
  }
  for (int w = 0; w < GW_COUNT; w++)
    any |= st->wino_fn[w] != NULL;
  return any;
}

void cpu_gemm_library(CpuCg *cg) {
  LLVMValueRef fn[GS_COUNT + GW_COUNT + 4];
  int n = 0;
  /* (f32 operands only: the other types' functions are made by the modules that use them) */
  fn[n++] = gm_function(cg, GE_F32); /* with every packing step (cg->lib) */
  for (int s = 0; s < GS_COUNT; s++)
    fn[n++] = gm_state(cg)->step_fn[GE_F32][s];
  fn[n++] = gm_packx_function(cg, GE_F32, true);
  fn[n++] = gm_packx_function(cg, GE_F32, false);
  fn[n++] = gm_rows_t_function(cg, GE_F32);
  for (int w = 0; w < GW_COUNT; w++)
    fn[n++] = gm_wino_function(cg, (GmWino)w);
  /* internal (local symbols of the object) and kept although nothing here calls them */
  LLVMValueRef arr = LLVMConstArray2(cg->g.ptr, fn, (uint64_t)n);
  LLVMValueRef u = LLVMAddGlobal(cg->g.M, LLVMTypeOf(arr), "llvm.compiler.used");
  LLVMSetInitializer(u, arr);
  LLVMSetLinkage(u, LLVMAppendingLinkage);
  LLVMSetSection(u, "llvm.metadata");
}
