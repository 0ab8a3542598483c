/* targets/cpu/gemm/gemm_config.c: the GEMM's configuration for the target CPU.
 *
 * The vector width, the micro-tile (MR x NR), the block sizes (MC, KC, NC), the panel order
 * and the optional paths follow the target's features, worked out once per compilation from
 * LLVM's CPU name and features string (gm_state keeps them in the compilation's GmState):
 * 16-wide with 12 x 32 tiles on AVX-512, 8-wide with 6 x 16 on AVX and AVX2, 4-wide
 * otherwise; the blocks are sized so that A's micro-panel stays in L1 and B's block in L2.
 * LLVM's C API cannot list the features a CPU name implies, so the x86 names that matter are
 * a table here (cpu_x86_traits), which the prebuilt library's level test reads as well. The
 * HLOC_CPU_GEMM_* and related environment knobs override the defaults for experiments. A new
 * micro-kernel family (micro_*.c) is chosen here, in gm_cfg_make, from the features it needs. */
#include "gemm_impl.h"

/* What LLVM's x86 CPU names imply, for a named --cpu without --features (LLVM's C API cannot
 * list the features a CPU name implies): AVX-512F; all of x86-64-v3's features (AVX2, FMA,
 * BMI1/2, F16C, LZCNT, MOVBE) or x86-64-v4's (v3 and AVX-512 F/BW/CD/DQ/VL), which the prebuilt
 * library's levels need (cpu_prebuilt.c); no AVX at all (128-bit vectors: the 256-bit ones
 * would be split in two). Names not listed imply none of these. */
static const struct {
  const char *name;
  unsigned traits;
} gm_x86_cpus[] = {
#define GM_V4 (CPU_X86_AVX512F | CPU_X86_V3 | CPU_X86_V4)
#define GM_VNNI (GM_V4 | CPU_X86_VNNI)
#define GM_BF16 (GM_VNNI | CPU_X86_BF16)
#define GM_AMX (GM_VNNI | CPU_X86_AMX)
    {"skylake-avx512", GM_V4},
    {"cascadelake", GM_VNNI},
    {"cooperlake", GM_BF16},
    {"cannonlake", GM_V4},
    {"icelake-client", GM_VNNI},
    {"icelake-server", GM_VNNI},
    {"tigerlake", GM_VNNI},
    {"rocketlake", GM_VNNI},
    {"sapphirerapids", GM_AMX},
    {"emeraldrapids", GM_AMX},
    {"graniterapids", GM_AMX},
    {"graniterapids-d", GM_AMX},
    {"diamondrapids", GM_AMX},
    {"znver4", GM_BF16},
    {"znver5", GM_BF16},
    {"x86-64-v4", GM_V4},
#undef GM_V4
#undef GM_VNNI
#undef GM_BF16
#undef GM_AMX
    {"knl", CPU_X86_AVX512F},
    {"knm", CPU_X86_AVX512F},
    {"x86-64-v3", CPU_X86_V3},
    {"haswell", CPU_X86_V3},
    {"broadwell", CPU_X86_V3},
    {"skylake", CPU_X86_V3},
    {"alderlake", CPU_X86_V3},
    {"raptorlake", CPU_X86_V3},
    {"meteorlake", CPU_X86_V3},
    {"arrowlake", CPU_X86_V3},
    {"arrowlake-s", CPU_X86_V3},
    {"lunarlake", CPU_X86_V3},
    {"pantherlake", CPU_X86_V3},
    {"gracemont", CPU_X86_V3},
    {"znver1", CPU_X86_V3},
    {"znver2", CPU_X86_V3},
    {"znver3", CPU_X86_V3},
    {"x86-64-v2", CPU_X86_PRE_AVX},
    {"nehalem", CPU_X86_PRE_AVX},
    {"corei7", CPU_X86_PRE_AVX},
    {"westmere", CPU_X86_PRE_AVX},
    {"core2", CPU_X86_PRE_AVX},
    {"penryn", CPU_X86_PRE_AVX},
    {"bonnell", CPU_X86_PRE_AVX},
    {"atom", CPU_X86_PRE_AVX},
    {"silvermont", CPU_X86_PRE_AVX},
    {"slm", CPU_X86_PRE_AVX},
    {"goldmont", CPU_X86_PRE_AVX},
    {"goldmont-plus", CPU_X86_PRE_AVX},
    {"tremont", CPU_X86_PRE_AVX},
    {"k8", CPU_X86_PRE_AVX},
    {"k8-sse3", CPU_X86_PRE_AVX},
    {"opteron", CPU_X86_PRE_AVX},
    {"opteron-sse3", CPU_X86_PRE_AVX},
    {"athlon64", CPU_X86_PRE_AVX},
    {"athlon64-sse3", CPU_X86_PRE_AVX},
    {"athlon-fx", CPU_X86_PRE_AVX},
    {"amdfam10", CPU_X86_PRE_AVX},
    {"barcelona", CPU_X86_PRE_AVX},
    {"btver1", CPU_X86_PRE_AVX},
    {"pentium4", CPU_X86_PRE_AVX},
    {"prescott", CPU_X86_PRE_AVX},
    {"nocona", CPU_X86_PRE_AVX},
    {"i686", CPU_X86_PRE_AVX},
    {"pentium-m", CPU_X86_PRE_AVX},
    {"yonah", CPU_X86_PRE_AVX},
    {"lakemont", CPU_X86_PRE_AVX},
};

unsigned cpu_x86_traits(const char *cpu) {
  for (size_t i = 0; i < sizeof gm_x86_cpus / sizeof *gm_x86_cpus; i++)
    if (!strcmp(cpu, gm_x86_cpus[i].name)) return gm_x86_cpus[i].traits;
  return 0;
}

int cpu_vector_width(CpuCg *cg) { return gm_cfg(cg).vw; }

/* Whether stores past the caches (nontemporal) of a large output pay off on the target CPU:
 * they did on Intel's cores and cost on AMD's, so named CPUs other than AMD's (not the
 * generic ones). */
bool cpu_stream_stores(CpuCg *cg) { return gm_cfg(cg).stream; }

/* (the paths' defaults, then each level's vector width, tile and blocks) */
#define GM_LEVEL(VW, MR, NR, MC, KC, NC, ORDER, PFB)                                               \
  {                                                                                                \
    .vw = VW, .mr = MR, .nr = NR, .mc = MC, .kc = KC, .nc = NC, .direct = true, .wino = 1,         \
    .order = ORDER, .pfb = PFB, .micro = &gm_micro_fma, .const_pack = true, .amx_pf = true,        \
    .amx_t1 = true, .amx_kc = 1024                                                                 \
  }
const GmCfg gm_defaults[3] = {
    GM_LEVEL(16, 12, 32, 96, 512, 256, 1, true),  /* AVX-512 */
    GM_LEVEL(8, 6, 16, 144, 384, 1024, 0, false), /* AVX, AVX2 */
    GM_LEVEL(4, 6, 8, 96, 256, 256, 0, false),    /* others */
};
#undef GM_LEVEL

/* The configuration for the compilation's target CPU (it asks LLVM for the host's CPU and
 * features), then the experiments' overrides. */
static GmCfg gm_cfg_make(CpuCg *cg) {
  const char *feat = cg->tfeat, *cpu = cg->tcpu;
  int said512 = cpu_feature_said(feat, "avx512f"), said_avx = cpu_feature_said(feat, "avx");
  unsigned traits = cpu_x86_traits(cpu);
  /* AVX-512F needs AVX2, FMA and F16C: LLVM drops it with any of them */
  bool below512 = cpu_feature_said(feat, "avx2") < 0 || cpu_feature_said(feat, "fma") < 0 ||
                  cpu_feature_said(feat, "f16c") < 0 || said_avx < 0;
  bool avx512 = said512 > 0 || ((traits & CPU_X86_AVX512F) && said512 == 0 && !below512);
  const char *triple = cg->triple;
  bool x86 = !strncmp(triple, "x86_64", 6) || !strncmp(triple, "amd64", 5) ||
             (triple[0] == 'i' && triple[1] && !strncmp(triple + 2, "86", 2));
  bool avx = avx512 || said_avx > 0 ||
             (x86 && strcmp(cpu, "generic") && strcmp(cpu, "x86-64") &&
              !(traits & CPU_X86_PRE_AVX) && said_avx == 0);
  /* AVX-512: KC = 512 (a 32-column B micro-panel of 64 KiB, streamed from L2) and, with the
     row panels outermost, NC = 256 (B's block within L2); the next block of a B given packed
     is prefetched into L2 (GmCfg.pfb), which was never slower where measured */
  GmCfg c = gm_defaults[avx512 ? 0 : avx ? 1 : 2];
  c.x86 = x86;
  /* AMX-BF16 (with its tiles): bf16 dots on TDPBF16PS (amx.c) */
  int said_amx = cpu_feature_said(feat, "amx-bf16"), said_tile = cpu_feature_said(feat, "amx-tile");
  c.amx = x86 && avx512 && said_tile >= 0 &&
          (said_amx > 0 || ((traits & CPU_X86_AMX) && said_amx == 0));
  /* AMX-INT8: s8 dots on TDPBSSD (the same tiles) */
  int said_int8 = cpu_feature_said(feat, "amx-int8");
  c.amx_int8 = x86 && avx512 && said_tile >= 0 &&
               (said_int8 > 0 || ((traits & CPU_X86_AMX) && said_int8 == 0));
  /* else AVX512-VNNI: s8 dots on VPDPBUSD (dpbf16.c) */
  int said_vnni = cpu_feature_said(feat, "avx512vnni");
  c.dpbusd = x86 && avx512 && (said_vnni > 0 || ((traits & CPU_X86_VNNI) && said_vnni == 0));
  /* else AVX512-BF16: bf16 dots on VDPBF16PS (dpbf16.c), in K blocks of 256 depths (a band's
     B, 32 columns of them, 16 KiB in L1), where the CPU runs it at least at its FMAs' FLOP
     rate (CPU_X86_BF16), or where said on a CPU the table does not know; not on the AMX
     CPUs told -amx-bf16: Sapphire Rapids runs VDPBF16PS at 0.47x the FLOPs of its f32 FMAs
     (bench-bf16-peak on the device host, 2026-12-01), below the widened-FMA path */
  int said_dp = cpu_feature_said(feat, "avx512bf16");
  c.dpbf16 = !c.amx && x86 && avx512 && said_dp >= 0 &&
             ((traits & CPU_X86_BF16) || (said_dp > 0 && !(traits & CPU_X86_AMX)));
  if (c.dpbf16) c.amx_kc = 256;
  static const char *const amd[] = {"znver",  "bdver", "btver",   "amdfam",
                                    "athlon", "k8",    "opteron", "barcelona"};
  c.stream = strcmp(cpu, "generic") && strncmp(cpu, "x86-64", 6) && strncmp(cpu, "i686", 4);
  for (size_t i = 0; i < sizeof amd / sizeof *amd; i++)
    if (!strncmp(cpu, amd[i], strlen(amd[i]))) c.stream = false;
  const char *stream = cpu_knob(cg, CPU_KNOB_STREAM_STORES);
  if (stream && (*stream == '0' || *stream == '1')) c.stream = *stream == '1';
  const char *tile = cpu_knob(cg, CPU_KNOB_GEMM_TILE); /* "MR,NR" (NR = VW, 2 VW or 4 VW) */
  int mr, nr;
  if (tile && sscanf(tile, "%d,%d", &mr, &nr) == 2 && mr >= 1 && mr <= 16 &&
      (nr == c.vw || nr == 2 * c.vw || nr == 4 * c.vw)) {
    c.mr = mr;
    c.nr = nr;
    c.mc = gm_roundup(c.mc, mr);
    c.nc = gm_roundup(c.nc, nr);
  }
  if (cg->o->direct_conv) c.wino = 0;
  const char *wino = cpu_knob(cg, CPU_KNOB_WINOGRAD); /* 0, 1 or tiles per slice */
  if (wino && *wino) c.wino = atoi(wino) < 0 ? 0 : atoi(wino);
  const char *direct = cpu_knob(cg, CPU_KNOB_GEMM_DIRECT); /* 0 packs every panel */
  if (direct && !strcmp(direct, "0")) c.direct = false;
  const char *tune = cpu_knob(cg, CPU_KNOB_GEMM_BLOCKS); /* "MC,KC,NC" */
  long long mc, kc, nc;
  if (tune && sscanf(tune, "%lld,%lld,%lld", &mc, &kc, &nc) == 3 && mc > 0 && kc > 0 && nc > 0) {
    c.mc = gm_roundup(mc, c.mr);
    c.kc = kc;
    c.nc = gm_roundup(nc, c.nr);
  }
  const char *order = cpu_knob(cg, CPU_KNOB_GEMM_ORDER); /* 0 or 1 (GmCfg.order) */
  if (order && (*order == '0' || *order == '1')) c.order = *order == '1';
  const char *pfb = cpu_knob(cg, CPU_KNOB_GEMM_PREFETCH); /* 0 or 1 (GmCfg.pfb) */
  if (pfb && (*pfb == '0' || *pfb == '1')) c.pfb = *pfb == '1';
  c.const_pack = !cpu_knob(cg, CPU_KNOB_GEMM_NO_CONST_PACK);
  const char *amx = cpu_knob(cg, CPU_KNOB_GEMM_AMX); /* "PF,T1,KC" */
  int apf, at1, akc;
  if (amx && sscanf(amx, "%d,%d,%d", &apf, &at1, &akc) == 3 && akc >= 32 && akc % 32 == 0) {
    c.amx_pf = apf != 0;
    c.amx_t1 = at1 != 0;
    c.amx_kc = akc;
  }
  const char *chunks = cpu_knob(cg, CPU_KNOB_GEMM_CHUNKS);
  c.chunks = chunks && atoi(chunks) > 0 ? atoi(chunks) : 0;
  return c;
}

GmState *gm_state(CpuCg *cg) {
  if (cg->gemm) return cg->gemm;
  GmCfg c = gm_cfg_make(cg);
  GmState *st = hlo_arena_alloc(cg->g.scratch, sizeof *st);
  memset(st, 0, sizeof *st);
  st->cfg = c;
  cg->gemm = st;
  return st;
}

GmCfg gm_cfg(CpuCg *cg) { return gm_state(cg)->cfg; }

/* Columns of the packed B of a column block of N (rounded up to whole panels). */
static int64_t gm_ncr(const GmCfg *c, int64_t N) {
  return gm_roundup(gm_min(c->nc, N < 1 ? 1 : N), c->nr);
}

/* Whether convolution calls of at most N columns and depth K keep B resident (as the GEMM
 * function decides at run time for its N; dots keep the K blocks outermost, which measured
 * faster for the transformer models). */
bool gm_resident(const GmCfg *c, int64_t N, int64_t K) { return K * gm_ncr(c, N) <= GM_RESIDENT; }

/* Bytes of packing scratch the GEMM function uses for products of at most M x N x K (conv:
 * implicit-GEMM convolution calls, which may keep B resident). */
int64_t gm_pack_bytes(const GmCfg *c, int64_t M, int64_t N, int64_t K, bool conv) {
  int64_t mc = gm_min(c->mc, gm_roundup(M, c->mr)), kc = gm_min(c->kc, K < 1 ? 1 : K);
  int64_t ncr = gm_ncr(c, N);
  /* B: one K block, or resident: a smaller call (fewer columns) may be resident when this
     size is not, within GM_RESIDENT floats */
  int64_t b = kc * ncr, res = conv ? gm_min(GM_RESIDENT, (K < 1 ? 1 : K) * ncr) : 0;
  if (res > b) b = res;
  return memplan_align((gm_roundup(b, 16) + mc * kc) * 4);
}

/* Depth of the K blocks of a product of depth K: K cut into blocks of equal depth (a multiple
 * of 8, at most KC), so there is no thin last block. gm_kstep_ir computes the same in IR. */
int64_t gm_kstep(const GmCfg *c, int64_t K) {
  int64_t nkb = (K + c->kc - 1) / c->kc;
  if (nkb < 1) nkb = 1;
  int64_t ks = ((K + nkb - 1) / nkb + 7) & ~(int64_t)7;
  return ks < c->kc ? ks : c->kc;
}
