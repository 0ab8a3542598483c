/* targets/cpu/cpu_prebuilt.c: the GEMM's functions compiled once, when hloc is built.
 *
 * The GEMM function, its packing steps and Winograd's transforms (gemm/) depend on the
 * target's vector configuration, not on the module: every module of a product or convolution
 * used to compile them again, and they were the largest single share of a compilation
 * (figures: docs/log/2026-12-01-emit-design-figures.md). So hloc's build runs
 * hloc-genlib (tools/hloc_genlib.c), which compiles them with every path (cg->lib: convolution
 * and matrix packing both, no specialization on a module's call sites) for each ISA level of
 * cpu_prebuilt_isas (x86-64-v4: AVX-512; x86-64-v3: AVX2 and FMA), for x86_64 Linux, at -O2,
 * and writes the objects as C arrays linked into hloc (cpu_prebuilt_objs). A compilation that
 * can use one (cpu_prebuilt_find) only declares those functions (hidden, under the library's
 * prefix CPU_LIB_PREFIX), and cpu_emit() joins the library's object after the module's
 * (cpu_elf.c), where the calls resolve to the library's definitions: local symbols, so two
 * models linked into one program do not clash, and the object still needs nothing else.
 *
 * A compilation uses the library when all of these hold, and otherwise compiles the functions
 * as before (the same generator, tuned for its own CPU and specialized on the module's calls):
 *   - an object at -O2 (the default): IR and assembly output show the module's own functions;
 *     -O0, -O1 and -O3 keep their own optimization and code generation levels;
 *   - an x86_64 Linux triple, no knob that changes the generated code (cpu_knobs_tuned: the
 *     library was compiled with none set), and not the PREBUILT knob at 0;
 *   - the target has the level's features: those the features string names (+f / -f, the
 *     last mention deciding: the host's string names them all), else those of the CPU name
 *     (a named --cpu without --features: cpu_x86_traits, gemm/gemm_config.c's table of CPU names).
 * The library's code is tuned for the level's generic CPU, not for --cpu: its loops are
 * blocked, unrolled and vectorized by construction, so there is little left to tune.
 * The object depends on the inputs and flags only, as before: the library's bytes are fixed
 * when hloc is built. */
#include "cpu_impl.h"

#include <stdlib.h>
#include <string.h>

const char *const cpu_prebuilt_isas[] = {"x86-64-v4", "x86-64-v3", NULL};

/* The triple the library is built for; objects for any x86_64 Linux triple join with it. */
#define CPB_TRIPLE "x86_64-pc-linux-gnu"

/* Features of each level that the generated code may use beyond the previous one. */
static const char *const cpb_v3_feats[] = {"avx",  "avx2",  "fma",   "bmi", "bmi2",
                                           "f16c", "lzcnt", "movbe", NULL};
static const char *const cpb_v4_feats[] = {"avx512f",  "avx512bw", "avx512cd",
                                           "avx512dq", "avx512vl", NULL};

/* Whether feature f is on for a target of CPU name cpu and features string feat. */
static bool cpb_feature(const char *cpu, const char *feat, const char *f, bool v4) {
  int said = cpu_feature_said(feat, f);
  if (said) return said > 0;
  return cpu_x86_traits(cpu) & (v4 ? CPU_X86_V4 : CPU_X86_V3);
}

const CpuPrebuiltObj *cpu_prebuilt_find(CpuCg *cg) {
  const CpuOpts *o = cg->o;
  if (cg->lib || o->emit != CPU_EMIT_OBJ || o->opt_level != 2) return NULL;
  if (cpu_knobs_tuned(o)) return NULL; /* the library was compiled with every knob unset */
  const char *pre = cpu_knob(cg, CPU_KNOB_PREBUILT);
  if (pre && !strcmp(pre, "0")) return NULL;
  if (strncmp(cg->triple, "x86_64-", 7) || !strstr(cg->triple, "-linux")) return NULL;
  const char *isa = cpu_gemm_isa(cg);
  if (!isa) return NULL;
  bool v4 = !strcmp(isa, "x86-64-v4");
  for (int i = 0; cpb_v3_feats[i]; i++)
    if (!cpb_feature(cg->tcpu, cg->tfeat, cpb_v3_feats[i], false)) return NULL;
  for (int i = 0; v4 && cpb_v4_feats[i]; i++)
    if (!cpb_feature(cg->tcpu, cg->tfeat, cpb_v4_feats[i], true)) return NULL;
  for (int i = 0; i < cpu_prebuilt_count; i++)
    if (!strcmp(cpu_prebuilt_objs[i].isa, isa)) return &cpu_prebuilt_objs[i];
  return NULL;
}

bool cpu_prebuilt_build(const char *isa, char **obj, size_t *size, HErr *err) {
  CpuOpts o = {.name = CPU_LIB_PREFIX,
               .out_path = "<prebuilt library>",
               .triple = CPB_TRIPLE,
               .cpu = isa,
               .features = "",
               .opt_level = 2,
               .emit = CPU_EMIT_OBJ};
  HModule none = {.name = "hloc-prebuilt", .file = "<prebuilt library>"};
  CpuCg cg;
  cpu_cg_init(&cg, &o, err, none.name);
  cg.g.m = &none;
  cg.lib = true;
  bool ok = false;
  const char *level = cpu_gemm_isa(&cg);
  if (!level || strcmp(level, isa)) {
    hlo_err(
        err, o.out_path, NULL, NULL,
        "CPU target: the GEMM configuration for %s is not that level's default (an HLOC_CPU_GEMM_* "
        "experiment set?)",
        isa);
  } else {
    cpu_gemm_library(&cg);
    ok = cpu_emit(&cg, obj, size);
  }
  cpu_cg_free(&cg);
  return ok;
}
