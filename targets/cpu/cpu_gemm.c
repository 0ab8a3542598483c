/* targets/cpu/cpu_gemm.c: blocked GEMM for dots and implicit-GEMM convolutions.
 *
 * One internal function per module computes C = A * B in f32 (row-major C
 * with leading dimension ldc, A and B read through arbitrary element strides), the way
 * Goto/BLIS do:
 *   for jc (NC columns): for pc (KC of K): pack B[pc.., jc..] into NR-wide panels
 *     for ic (MC rows): pack A[ic.., pc..] into MR-tall panels
 *       for ir (MR): for jr (NR): the micro-kernel: an MR x NR tile held in MR * NR / VW
 *         vector registers, one FMA per (row, vector) per k on a broadcast of A and a vector
 *         load of B; the tile is stored (first K block) or added to C.
 * On AVX-512 the row panels are outermost in a block: A's MR x KC micro-panel (24 KiB) stays in
 * L1 while B's KC x NC block (512 KiB, NC = 256) streams from L2; with the column panels
 * outermost (AVX2 and older, whose smaller tiles leave B's micro-panel in L1) B's 64 KiB
 * micro-panel did not fit L1 and its 2 MiB block of N = 1024 not L2 (on this VM's Xeon, three
 * interleaved rounds: mlp 6.70 -> 6.11 ms on one core, transformer_layer 59.5 -> 55.8 ms and
 * bert_base 696 -> 677 ms on two, the others level). A B given packed (weights packed by the
 * caller or at compile time, or shared by a split product's chunks) has its next block
 * prefetched into L2 by the micro-kernel calls of the current one, a line per unrolled k step
 * (gm_next_lines): the first row panel would otherwise pull each block from L3 or memory
 * faster than a core streams it (on the device host's Xeon a 256 x 1024 x 1024 product went
 * 157 -> 170 GFLOP/s on one core; mlp's products gained up to 6%, in some runs nothing).
 * K is cut into blocks of equal depth (at most KC), so there is no thin last block. When the
 * whole K of a column block of B fits in GM_RESIDENT floats (convolutions only: their M is
 * huge), B is packed once and stays resident, and the row blocks go outermost instead (for jc: for ic: for pc): each MC x NC
 * block of C is finished, all its K blocks accumulated while it is in cache, before the next
 * one, and a caller that computes the rows in slices can pass GP_BKEEP to reuse the packed B
 * of its previous call. Panels are zero-padded to MR / NR so the micro-kernel never branches;
 * tiles cut by the edges of C go through a small stack tile, and a last panel of at most
 * GM_TAIL_ROWS rows runs a micro-kernel of that many rows (M = 256 leaves 4 of 12 rows: the
 * padding's FMAs were 3% of the work; on the device host's Xeon, five interleaved rounds,
 * fastest runs: mlp with frozen weights 6.38 -> 6.19 ms on one core, 3.23 -> 3.14 on two,
 * identical results). The vector width, MR and NR
 * follow the target's features (16-wide with 12 x 32 tiles on AVX-512, 8-wide with 6 x 16 on
 * AVX/AVX2, 4-wide otherwise). The packing buffers (B first, then the A block) are scratch
 * memory given by the caller. Packing reads rows of a row-major operand VW deep and
 * transposes the VW x VW blocks in registers (A's rows, a transposed B's columns), or copies
 * rows of B across its panels; other strides go element by element. A caller may pass B or A
 * already packed for all its blocks (GP_BPRE / GP_APRE, laid out by gm_packx_function, which
 * calls the same packing steps): the function then reads the blocks in place. The function
 * has only the paths the module's products can take (a module without convolutions has no
 * convolution packing, resident B or panels read in place; one without dots no packing of A
 * from a matrix), or, in the prebuilt library (cpu_prebuilt.c: these functions compiled once
 * per x86 ISA level when hloc is built, used by -O2 objects), all of them. The GEMM's
 * functions were much of a module's compile time: instructions executed by hloc (callgrind),
 * mlp 606 -> 432 M, bert_base 1439 -> 1272 M (the same for resnet_block, 1066 -> 1046 M, and
 * the training step, which has both kinds). A constant B
 * (weights frozen into the module) is packed that way at compile time, into read-only data
 * that replaces the constant: the run packs nothing of it (gm_const_packed_b).
 *
 * The same function packs A straight from a convolution input when given the convolution's
 * geometry (implicit GEMM): rows are output pixels (image, oh, ow), so one call can span the
 * batch; K runs over (kh, kw, ci) with ci fastest, walked in runs of channels at one tap that
 * the MR rows of a panel share (each row through its own pointer and the channel stride, so
 * an NCHW input is read in place; taps in the padding read a zero with stride 0); B is the
 * kernel seen as [kh*kw*ci, co]. Channel runs of an NHWC input are packed VW deep with the
 * same register transpose as A's rows; a panel of an NCHW input whose pixels lie in one output
 * row is one strided vector load per channel (width stride 1 or 2). A panel of an NHWC input
 * whose MR pixels lie in one output row and whose taps all fall inside the image (most of
 * them) is not packed at all: the micro-kernel reads it in place, row r at a fixed distance
 * from row 0, one run of channels per tap, the accumulators carried across the runs (on the
 * device host's Xeon, simple_cnn 1.86-1.93 -> 1.67-1.89 s on one core; the packing was a
 * tenth of its time).
 *
 * cpu_gemm_kernel() decides whether a dot or convolution (alone, or the hero of an output
 * fusion) can use these functions: its operands must be strided views of buffers (an entry
 * value or constant, seen through fused parameters, transposes, broadcasts, slices and
 * bitcast-like reshapes), the contracting and rhs-free dimensions must merge into one strided
 * dimension each, the lhs-free dimensions merge as far as they can (the rest are looped like
 * batch dimensions). Convolutions need two spatial dimensions, no grouping, no base dilation
 * or reversal, a kernel whose (kh, kw, ci) flatten to one stride and an output whose feature
 * dimension is minor and whose (oh, ow) flatten; the batch joins the rows when the output is
 * [batch, oh, ow, feature] row-major (a weight-gradient convolution, with a few output pixels
 * per "image" and a huge K, then packs its B once instead of once per image). The kernel
 * splits (batch, row block, column block) items into chunks for the parallel-for (one chunk
 * per item when there are at most twice as many items as chunks wanted, column blocks of
 * equal width, so that two threads get equal work); each chunk owns a packing area in the
 * kernel-private scratch. A dot whose chunks would each pack the same operand (B when its rows
 * are split, A when its columns are) packs it once instead, in a kernel of its own before the
 * GEMM's (its chunks over the operand's blocks and K blocks), into shared scratch that every
 * chunk reads (a 128-row chunk of a 1024 x 768 x 768 product packed 590K elements of B for
 * its 75M FMAs; measured on 2 cores at AVX2, this removed a tenth of the time of the products
 * split into chunks). The serial run does not pack B that way, and instead of reading the
 * packed A in one call per column block it makes one call over all the columns when they fit
 * one column block of the GEMM (which packs A block by block while in cache; otherwise it
 * uses the packed A). An output fusion's elementwise epilogue
 * is applied to each finished block: with B resident, the rows go through the GEMM in slices
 * of 2 * MC, each followed by its epilogue while its C block is still in cache. A fusion whose
 * root reduces the epilogue (a sum, maximum or minimum: a global average or max pool after
 * conv, batch norm, relu) has no C at all: each slice is computed into a buffer of its chunk
 * in private scratch, put through the epilogue and combined into the chunk's partial results
 * (the reduce's shape, starting from the reducer's identity); a last kernel combines the
 * chunks' partials with the init in chunk order, so the result does not depend on the thread
 * count. simple_cnn's second convolution so no longer writes its 822 MB output, nor does
 * its average pool read it back (on this VM's 2 cores, the pool's 48-50 ms are gone).
 *
 * Products of few rows (batch-1 inference) or of few columns (a classifier's head) skip the
 * blocked path for kernels of their own that read A in place (sections "few rows" and "few
 * columns"): their MR x NR tiles would be mostly zero padding.
 *
 * A 3x3 convolution of unit stride (NHWC, channel counts in whole vectors) goes through
 * Winograd's F(2x2, 3x3) instead (gm_winograd, section "Winograd"): 16 plain products of
 * transformed tiles through the same GEMM function, 2.25x fewer multiply-adds, the same
 * epilogues and reductions by slices. On the device host's Xeon (2 cores, interleaved rounds
 * against the implicit GEMM, fastest runs): resnet_block 112-178 -> 91-158 ms on one core,
 * simple_cnn 2.26-2.64 -> 1.15-1.62 s, resnet18 0.35-0.54 -> 0.24-0.25 s. */
#include "cpu_impl.h"

#include <llvm-c/DebugInfo.h>
#include <llvm-c/TargetMachine.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ configuration */

typedef struct GmCfg {
  int vw;      /* f32 lanes per vector */
  int mr, nr;  /* micro-tile rows and columns (nr = 2 * vw; a power of two times vw) */
  int64_t mc;  /* rows of A per packed block */
  int64_t kc;  /* depth of a packed block */
  int64_t nc;  /* columns of B per packed block */
  bool direct; /* convolution panels inside the image read in place (gm_direct_panel) */
  bool stream; /* large outputs written past the caches pay off (cpu_stream_stores) */
  bool x86;    /* the target is x86 (register transposes get optimization barriers) */
  int wino;    /* 3x3 convolutions of unit stride through Winograd's F(2x2, 3x3) (gm_winograd):
                  0 no, 1 yes, more: yes, with slices of about that many tiles */
  int order;   /* within a block: 0 column panels outer, row panels inner (B's micro-panel
                  reused from L1); 1 row panels outer, column panels inner (A's micro-panel
                  stays in L1 while the packed B block streams from L2) */
  bool pfb;    /* B given packed (GP_BPRE): the micro-kernel calls prefetch the next block into
                  L2 while this one is used (gm_next_lines) */
} GmCfg;

static int64_t gm_roundup(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

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
    {"skylake-avx512", GM_V4}, {"cascadelake", GM_V4}, {"cooperlake", GM_V4}, {"cannonlake", GM_V4},
    {"icelake-client", GM_V4}, {"icelake-server", GM_V4}, {"tigerlake", GM_V4}, {"rocketlake", GM_V4},
    {"sapphirerapids", GM_V4}, {"emeraldrapids", GM_V4}, {"graniterapids", GM_V4}, {"graniterapids-d", GM_V4},
    {"diamondrapids", GM_V4}, {"znver4", GM_V4}, {"znver5", GM_V4}, {"x86-64-v4", GM_V4},
#undef GM_V4
    {"knl", CPU_X86_AVX512F}, {"knm", CPU_X86_AVX512F},
    {"x86-64-v3", CPU_X86_V3}, {"haswell", CPU_X86_V3}, {"broadwell", CPU_X86_V3}, {"skylake", CPU_X86_V3},
    {"alderlake", CPU_X86_V3}, {"raptorlake", CPU_X86_V3}, {"meteorlake", CPU_X86_V3}, {"arrowlake", CPU_X86_V3},
    {"arrowlake-s", CPU_X86_V3}, {"lunarlake", CPU_X86_V3}, {"pantherlake", CPU_X86_V3}, {"gracemont", CPU_X86_V3},
    {"znver1", CPU_X86_V3}, {"znver2", CPU_X86_V3}, {"znver3", CPU_X86_V3},
    {"x86-64-v2", CPU_X86_PRE_AVX}, {"nehalem", CPU_X86_PRE_AVX}, {"corei7", CPU_X86_PRE_AVX},
    {"westmere", CPU_X86_PRE_AVX}, {"core2", CPU_X86_PRE_AVX}, {"penryn", CPU_X86_PRE_AVX},
    {"bonnell", CPU_X86_PRE_AVX}, {"atom", CPU_X86_PRE_AVX}, {"silvermont", CPU_X86_PRE_AVX},
    {"slm", CPU_X86_PRE_AVX}, {"goldmont", CPU_X86_PRE_AVX}, {"goldmont-plus", CPU_X86_PRE_AVX},
    {"tremont", CPU_X86_PRE_AVX}, {"k8", CPU_X86_PRE_AVX}, {"k8-sse3", CPU_X86_PRE_AVX},
    {"opteron", CPU_X86_PRE_AVX}, {"opteron-sse3", CPU_X86_PRE_AVX}, {"athlon64", CPU_X86_PRE_AVX},
    {"athlon64-sse3", CPU_X86_PRE_AVX}, {"athlon-fx", CPU_X86_PRE_AVX}, {"amdfam10", CPU_X86_PRE_AVX},
    {"barcelona", CPU_X86_PRE_AVX}, {"btver1", CPU_X86_PRE_AVX}, {"pentium4", CPU_X86_PRE_AVX},
    {"prescott", CPU_X86_PRE_AVX}, {"nocona", CPU_X86_PRE_AVX}, {"i686", CPU_X86_PRE_AVX},
    {"pentium-m", CPU_X86_PRE_AVX}, {"yonah", CPU_X86_PRE_AVX}, {"lakemont", CPU_X86_PRE_AVX},
};

unsigned cpu_x86_traits(const char *cpu) {
  for (size_t i = 0; i < sizeof gm_x86_cpus / sizeof *gm_x86_cpus; i++)
    if (!strcmp(cpu, gm_x86_cpus[i].name)) return gm_x86_cpus[i].traits;
  return 0;
}

static GmCfg gm_cfg(CpuCg *cg);
static bool gm_wino_conv(CpuCg *cg, const HInstr *cv);

int cpu_vector_width(CpuCg *cg) { return gm_cfg(cg).vw; }

/* Whether stores past the caches (nontemporal) of a large output pay off on the target CPU:
 * on the device host's Xeon the NHWC max-pool of resnet_block went 19.7-21.2 -> 15.7-20.2 ms
 * on one core with them; on this project's AMD EPYC (Zen 3) 16.6-18.6 -> 23.0-24.3 ms. Named
 * CPUs other than AMD's, then (not the generic ones). */
bool cpu_stream_stores(CpuCg *cg) { return gm_cfg(cg).stream; }

/* The configuration for the compilation's target CPU, worked out on first use (it asks LLVM
 * for the host's CPU and features) and kept in cg. */
static const GmCfg gm_defaults[3] = {
    {16, 12, 32, 96, 512, 256, true, false, false, 1, 1, true}, /* AVX-512 */
    {8, 6, 16, 144, 384, 1024, true, false, false, 1, 0, false}, /* AVX, AVX2 */
    {4, 6, 8, 96, 256, 256, true, false, false, 1, 0, false},    /* others */
};

static GmCfg gm_cfg(CpuCg *cg) {
  if (cg->gemm_cfg) return *cg->gemm_cfg;
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
             (x86 && strcmp(cpu, "generic") && strcmp(cpu, "x86-64") && !(traits & CPU_X86_PRE_AVX) && said_avx == 0);
  /* AVX-512: KC = 512 (a 32-column B micro-panel of 64 KiB, streamed from L2) measured
     faster than 384, and 384 faster than 256, on the device host's Xeon (2 cores, variants
     interleaved, two rounds each: 384 vs 256 on mlp, simple_cnn and bert_base, e.g.
     simple_cnn 1.75 -> 1.31/1.45 s; 512 vs 384 on mlp, transformer_layer and bert_base in
     all six, bert_base 0.94/0.98 -> 0.77/0.80 s); MC 144/192, NC 1024 and tiles 14x32, 8x32,
     6x64 (HLOC_CPU_GEMM_TILE) were no better overall. With the row panels outermost (order 1)
     NC 256 and 512 measured level, 2048 (B's block past L2) slower; a software prefetch of B
     8 or 16 steps ahead in the micro-kernel, and KC 256 were no faster. The next block of a B
     given packed prefetched into L2 along the calls of the current one (GmCfg.pfb,
     gm_next_lines): on the device host's Xeon, one core, a 256 x 1024 x 1024 product alone
     157 -> 170 GFLOP/s with B in L3 (twice, 00:38 and 00:53 UTC), 153-156 -> 156-165 with B in
     memory; mlp with its weights packed, interleaved rounds: products 156 -> 166 GFLOP/s at
     00:38 (11 rounds of 12 faster), level at 00:53 (162 / 162, 14 rounds). On this VM's Xeon
     level. Kept: never slower where measured. */
  GmCfg c = gm_defaults[avx512 ? 0 : avx ? 1 : 2];
  c.x86 = x86;
  static const char *const amd[] = {"znver", "bdver", "btver", "amdfam", "athlon", "k8", "opteron", "barcelona"};
  c.stream = strcmp(cpu, "generic") && strncmp(cpu, "x86-64", 6) && strncmp(cpu, "i686", 4);
  for (size_t i = 0; i < sizeof amd / sizeof *amd; i++)
    if (!strncmp(cpu, amd[i], strlen(amd[i]))) c.stream = false;
  const char *stream = getenv("HLOC_CPU_STREAM_STORES"); /* tests and experiments: 0 or 1 */
  if (stream && (*stream == '0' || *stream == '1')) c.stream = *stream == '1';
  const char *tile = getenv("HLOC_CPU_GEMM_TILE"); /* experiments: "MR,NR" (NR = VW, 2 VW or 4 VW) */
  int mr, nr;
  if (tile && sscanf(tile, "%d,%d", &mr, &nr) == 2 && mr >= 1 && mr <= 16 &&
      (nr == c.vw || nr == 2 * c.vw || nr == 4 * c.vw)) {
    c.mr = mr;
    c.nr = nr;
    c.mc = gm_roundup(c.mc, mr);
    c.nc = gm_roundup(c.nc, nr);
  }
  if (cg->o->direct_conv) c.wino = 0;
  const char *wino = getenv("HLOC_CPU_WINOGRAD"); /* tests, experiments: 0, 1 or tiles per slice */
  if (wino && *wino) c.wino = atoi(wino) < 0 ? 0 : atoi(wino);
  const char *direct = getenv("HLOC_CPU_GEMM_DIRECT"); /* experiments: 0 packs every panel */
  if (direct && !strcmp(direct, "0")) c.direct = false;
  const char *tune = getenv("HLOC_CPU_GEMM_BLOCKS"); /* experiments: "MC,KC,NC" */
  long long mc, kc, nc;
  if (tune && sscanf(tune, "%lld,%lld,%lld", &mc, &kc, &nc) == 3 && mc > 0 && kc > 0 && nc > 0) {
    c.mc = gm_roundup(mc, c.mr);
    c.kc = kc;
    c.nc = gm_roundup(nc, c.nr);
  }
  const char *order = getenv("HLOC_CPU_GEMM_ORDER"); /* experiments: 0 or 1 (GmCfg.order) */
  if (order && (*order == '0' || *order == '1')) c.order = *order == '1';
  const char *pfb = getenv("HLOC_CPU_GEMM_PREFETCH"); /* experiments: 0 or 1 (GmCfg.pfb) */
  if (pfb && (*pfb == '0' || *pfb == '1')) c.pfb = *pfb == '1';
  cg->gemm_cfg = hlo_arena_memdup(cg->scratch, &c, sizeof c);
  return c;
}

static int64_t gm_min(int64_t a, int64_t b) { return a < b ? a : b; }

/* B stays resident (its whole K packed once per column block) when K * NC' (NC' = the column
 * block rounded to NR) is at most this many floats (1 MiB: the L2 or a share of L3). */
#define GM_RESIDENT (256 * 1024)

/* Rows of a unit-stride B that gm_pack_b copies into every panel before the next rows. */
#define GM_PACK_ROWS 16

/* Columns of the packed B of a column block of N (rounded up to whole panels). */
static int64_t gm_ncr(const GmCfg *c, int64_t N) { return gm_roundup(gm_min(c->nc, N < 1 ? 1 : N), c->nr); }

/* Whether convolution calls of at most N columns and depth K keep B resident (as the GEMM
 * function decides at run time for its N; dots keep the K blocks outermost, measured faster
 * for the transformer models on AVX-512). */
static bool gm_resident(const GmCfg *c, int64_t N, int64_t K) { return K * gm_ncr(c, N) <= GM_RESIDENT; }

/* Bytes of packing scratch the GEMM function uses for products of at most M x N x K (conv:
 * implicit-GEMM convolution calls, which may keep B resident). */
static int64_t gm_pack_bytes(const GmCfg *c, int64_t M, int64_t N, int64_t K, bool conv) {
  int64_t mc = gm_min(c->mc, gm_roundup(M, c->mr)), kc = gm_min(c->kc, K < 1 ? 1 : K);
  int64_t ncr = gm_ncr(c, N);
  /* B: one K block, or resident: a smaller call (fewer columns) may be resident when this
     size is not, within GM_RESIDENT floats */
  int64_t b = kc * ncr, res = conv ? gm_min(GM_RESIDENT, (K < 1 ? 1 : K) * ncr) : 0;
  if (res > b) b = res;
  return memplan_align((gm_roundup(b, 16) + mc * kc) * 4);
}

/* ------------------------------------------------------------------ IR helpers */

static LLVMValueRef gi(CpuKern *k, int64_t v) { return cpu_i64(k, v); }
static LLVMValueRef gadd(CpuKern *k, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildNSWAdd(k->B, a, b, ""); }
static LLVMValueRef gsub(CpuKern *k, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildNSWSub(k->B, a, b, ""); }
static LLVMValueRef gmul(CpuKern *k, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildNSWMul(k->B, a, b, ""); }
static LLVMValueRef gmin(CpuKern *k, LLVMValueRef a, LLVMValueRef b) { return cpu_smin(k, a, b); }
static LLVMValueRef gslt(CpuKern *k, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildICmp(k->B, LLVMIntSLT, a, b, ""); }
/* &p[i] for f32 elements */
static LLVMValueRef gfp(CpuKern *k, LLVMValueRef p, LLVMValueRef i) {
  return LLVMBuildInBoundsGEP2(k->B, k->cg->f32, p, &i, 1, "");
}
static LLVMValueRef gload(CpuKern *k, LLVMTypeRef t, LLVMValueRef p, unsigned align) {
  LLVMValueRef v = LLVMBuildLoad2(k->B, t, p, "");
  LLVMSetAlignment(v, align);
  return v;
}
static void gstore(CpuKern *k, LLVMValueRef v, LLVMValueRef p, unsigned align) {
  LLVMSetAlignment(LLVMBuildStore(k->B, v, p), align);
}
static LLVMValueRef gvar(CpuKern *k, LLVMValueRef init) {
  LLVMValueRef a = cpu_alloca(k, LLVMTypeOf(init));
  LLVMBuildStore(k->B, init, a);
  return a;
}
static LLVMValueRef gget(CpuKern *k, LLVMValueRef var) { return LLVMBuildLoad2(k->B, k->cg->i64, var, ""); }

/* while (*var < bound) { ... } over an i64 variable (an alloca) the body updates:
 * gwhile_open returns *var as read in the header and leaves the builder in the body;
 * gwhile_close branches back and continues after the loop. */
typedef struct GWhile {
  LLVMBasicBlockRef hdr, exit; /* blocks */
} GWhile;
static LLVMValueRef gwhile_open(CpuKern *k, GWhile *w, LLVMValueRef var, LLVMValueRef bound, const char *hname,
                                const char *bname, const char *ename) {
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
static void gwhile_close(CpuKern *k, const GWhile *w) {
  LLVMBuildBr(k->B, w->hdr);
  LLVMPositionBuilderAtEnd(k->B, w->exit);
}

/* if (c) { ...then... } : returns the join block; the builder is left in the then block. */
typedef struct GIf {
  LLVMBasicBlockRef then_bb, else_bb, join; /* blocks */
} GIf;
static void gif_open(CpuKern *k, GIf *f, LLVMValueRef c, bool with_else) {
  f->then_bb = LLVMAppendBasicBlockInContext(k->cg->C, k->fn, "then");
  f->else_bb = with_else ? LLVMAppendBasicBlockInContext(k->cg->C, k->fn, "else") : NULL;
  f->join = LLVMAppendBasicBlockInContext(k->cg->C, k->fn, "join");
  LLVMBuildCondBr(k->B, c, f->then_bb, with_else ? f->else_bb : f->join);
  LLVMPositionBuilderAtEnd(k->B, f->then_bb);
}
static void gif_else(CpuKern *k, GIf *f) {
  LLVMBuildBr(k->B, f->join);
  LLVMPositionBuilderAtEnd(k->B, f->else_bb);
}
static void gif_close(CpuKern *k, GIf *f) {
  LLVMBuildBr(k->B, f->join);
  LLVMPositionBuilderAtEnd(k->B, f->join);
}

static LLVMValueRef gloop(CpuKern *k, CpuLoop *l, LLVMValueRef lo, LLVMValueRef hi, int64_t step) {
  LLVMValueRef iv = cpu_loop_open(k, l, lo, hi);
  l->step = step;
  return iv;
}

/* Mark the back edge br as a loop LLVM must not vectorize: the GEMM's loops are vectorized
 * by hand, and the vectorizer's analysis of them would be compile time spent for nothing. */
static void gm_novec(CpuKern *k, LLVMValueRef br) { cpu_loop_hint(k, br, "llvm.loop.vectorize.enable", LLVMConstInt(k->cg->i1, 0, 0)); }

static void gm_close(CpuKern *k, CpuLoop *l) {
  cpu_loop_close(k, l);
  gm_novec(k, l->latch_br);
}

/* ------------------------------------------------------------------ the GEMM function */

enum {
  GP_M, GP_N, GP_K, GP_A, GP_ARS, GP_ACS, GP_B, GP_BRS, GP_BCS, GP_C, GP_LDC, GP_PACK, GP_CONV,
  GP_BKEEP, /* 1: B is resident and already packed in the packing area by the previous call
               (same B, N and K, one column block): skip packing it */
  GP_BPRE,  /* ptr: B already packed for every block of this call (gm_packx_function's layout:
               column block jc, K block pc at jc * K + pc * roundup(nc, NR)), or NULL */
  GP_APRE,  /* ptr: A already packed for every block of this call (gm_packx_function's layout:
               row block ic, K block pc at ic * K + pc * roundup(mc, MR)), or NULL */
  GP_COUNT
};

/* Depth of the K blocks of a product of depth K: K cut into blocks of equal depth (a multiple
 * of 8, at most KC), so there is no thin last block. gm_kstep_ir computes the same in IR. */
static int64_t gm_kstep(const GmCfg *c, int64_t K) {
  int64_t nkb = (K + c->kc - 1) / c->kc;
  if (nkb < 1) nkb = 1;
  int64_t ks = ((K + nkb - 1) / nkb + 7) & ~(int64_t)7;
  return ks < c->kc ? ks : c->kc;
}

/* Convolution geometry given to the implicit-GEMM function (i64 array). */
enum {
  GC_OW, GC_H, GC_W, GC_CI, GC_KW, GC_SH, GC_SW, GC_DH, GC_DW, GC_PH, GC_PW, GC_XSH, GC_XSW, GC_XSC,
  GC_OHW, /* output pixels per image: row / OHW is the image (rows span the batch) */
  GC_XSB, /* input batch stride (elements) */
  GC_M0,  /* the output pixel of row 0 of this call */
  GC_COUNT
};

/* The convolution geometry (GC_*) from the GEMM's conv parameter. */
static void gm_conv_geom(CpuKern *k, const LLVMValueRef *P, LLVMValueRef *g) {
  for (int j = 0; j < GC_COUNT; j++) {
    LLVMValueRef ix = gi(k, j);
    g[j] = LLVMBuildLoad2(k->B, k->cg->i64, LLVMBuildInBoundsGEP2(k->B, k->cg->i64, P[GP_CONV], &ix, 1, ""), "");
  }
}

/* Rows of the micro-kernel's variant for a last panel that short (below MR). */
#define GM_TAIL_ROWS 4

/* Where the micro-kernel's k loop reads A: a packed panel (rstride NULL: depth k of row r at
 * p[k * MR + r]) or rows of a convolution input read in place (depth k of row r at
 * p[k + r * rstride], p moved back by the run's first depth, so that the loop's one induction
 * variable indexes both A and B). */
typedef struct GmArow {
  LLVMValueRef p, rstride;
} GmArow;

/* A prefetch of the cache line at p: for writing into L1 (level < 0), or for reading into
 * the cache of that locality (3 L1, 2 L2; x86's prefetcht0 / prefetcht1). */
static void gm_prefetch(CpuKern *k, LLVMValueRef p, int level) {
  CpuCg *cg = k->cg;
  unsigned pid = LLVMLookupIntrinsicID("llvm.prefetch", 13);
  LLVMTypeRef pty = cg->ptr;
  LLVMValueRef f = LLVMGetIntrinsicDeclaration(cg->M, pid, &pty, 1);
  LLVMValueRef pa[4] = {p, LLVMConstInt(cg->i32, level < 0, 0), LLVMConstInt(cg->i32, (unsigned long long)(level < 0 ? 3 : level), 0),
                        LLVMConstInt(cg->i32, 1, 0)};
  LLVMBuildCall2(k->B, LLVMIntrinsicGetType(cg->C, pid, &pty, 1), f, pa, 4, "");
}

/* A loop whose values are phis: a header entered from the current block (pre), a body and an
 * exit; the builder is left in the header, where the caller adds the phis and the test. */
typedef struct GPhiLoop {
  LLVMBasicBlockRef pre, hdr, body, done;
} GPhiLoop;
static GPhiLoop gphi_open(CpuKern *k, const char *hname, const char *bname, const char *dname) {
  GPhiLoop l = {LLVMGetInsertBlock(k->B), LLVMAppendBasicBlockInContext(k->cg->C, k->fn, hname),
                LLVMAppendBasicBlockInContext(k->cg->C, k->fn, bname), LLVMAppendBasicBlockInContext(k->cg->C, k->fn, dname)};
  LLVMBuildBr(k->B, l.hdr);
  LLVMPositionBuilderAtEnd(k->B, l.hdr);
  return l;
}

/* The micro-kernel's k loop over [k0, k1) (a multiple of u steps) for the first R rows of the
 * tile (R <= MR; the panel stays MR tall): in[][] are the incoming accumulators, out[][]
 * receives their values after the loop (rows below R untouched). With pf, each iteration
 * also prefetches one cache line into L2, pf + 64 bytes per iteration (gm_next_lines). */
static void gm_kloop(CpuKern *k, const GmCfg *c, const GmArow *a, LLVMValueRef bp, LLVMValueRef k0,
                     LLVMValueRef k1, int u, int R, LLVMValueRef in[16][4], LLVMValueRef out[16][4],
                     LLVMValueRef pf) {
  CpuCg *cg = k->cg;
  LLVMBuilderRef B = k->B;
  int MR = c->mr, NV = c->nr / c->vw;
  LLVMTypeRef vt = LLVMVectorType(cg->f32, (unsigned)c->vw);
  /* A and B are walked by pointers advanced once per u steps, every load at a constant
     offset from them: indexes scaled per step were 5 integer instructions per step, which on
     Intel cores share ports 0 and 5 with the 512-bit FMAs */
  int64_t astep = a->rstride ? 1 : MR;
  LLVMValueRef pa0 = gfp(k, a->p, gmul(k, k0, gi(k, astep))), pb0 = gfp(k, bp, gmul(k, k0, gi(k, c->nr)));
  GPhiLoop pl = gphi_open(k, "uk", "ukb", "ukd");
  LLVMBasicBlockRef pre = pl.pre, body = pl.body, done = pl.done, hdr = pl.hdr;
  LLVMValueRef kv = LLVMBuildPhi(B, cg->i64, "k"), pa = LLVMBuildPhi(B, cg->ptr, "pa"), pb = LLVMBuildPhi(B, cg->ptr, "pb");
  LLVMAddIncoming(kv, &k0, &pre, 1);
  LLVMAddIncoming(pa, &pa0, &pre, 1);
  LLVMAddIncoming(pb, &pb0, &pre, 1);
  LLVMValueRef pp = NULL;
  if (pf) {
    pp = LLVMBuildPhi(B, cg->ptr, "pp");
    LLVMAddIncoming(pp, &pf, &pre, 1);
  }
  LLVMValueRef acc[16][4];
  for (int r = 0; r < R; r++)
    for (int j = 0; j < NV; j++) {
      out[r][j] = LLVMBuildPhi(B, vt, "");
      LLVMAddIncoming(out[r][j], &in[r][j], &pre, 1);
      acc[r][j] = out[r][j];
    }
  LLVMBuildCondBr(B, gslt(k, kv, k1), body, done);
  LLVMPositionBuilderAtEnd(B, body);
  unsigned fid = LLVMLookupIntrinsicID("llvm.fmuladd", 12);
  LLVMValueRef fma = LLVMGetIntrinsicDeclaration(cg->M, fid, &vt, 1);
  LLVMTypeRef fty = LLVMIntrinsicGetType(cg->C, fid, &vt, 1);
  for (int q = 0; q < u; q++) {
    LLVMValueRef bv[4];
    for (int j = 0; j < NV; j++) bv[j] = gload(k, vt, gfp(k, pb, gi(k, q * c->nr + j * c->vw)), 64);
    if (pp && q == 0) gm_prefetch(k, pp, 2);
    for (int r = 0; r < R; r++) {
      LLVMValueRef ao = a->rstride ? gadd(k, gi(k, q), gmul(k, gi(k, r), a->rstride)) : gi(k, q * MR + r);
      LLVMValueRef av = cpu_splat(k, gload(k, cg->f32, gfp(k, pa, ao), 4), c->vw);
      for (int j = 0; j < NV; j++) {
        LLVMValueRef args[3] = {av, bv[j], acc[r][j]};
        acc[r][j] = LLVMBuildCall2(B, fty, fma, args, 3, "");
      }
    }
  }
  LLVMValueRef kn = gadd(k, kv, gi(k, u)), pan = gfp(k, pa, gi(k, u * astep)), pbn = gfp(k, pb, gi(k, u * c->nr));
  LLVMBasicBlockRef latch = LLVMGetInsertBlock(B);
  LLVMAddIncoming(kv, &kn, &latch, 1);
  LLVMAddIncoming(pa, &pan, &latch, 1);
  LLVMAddIncoming(pb, &pbn, &latch, 1);
  if (pp) {
    LLVMValueRef ppn = gfp(k, pp, gi(k, 16));
    LLVMAddIncoming(pp, &ppn, &latch, 1);
  }
  for (int r = 0; r < R; r++)
    for (int j = 0; j < NV; j++) LLVMAddIncoming(out[r][j], &acc[r][j], &latch, 1);
  gm_novec(k, LLVMBuildBr(B, hdr));
  LLVMPositionBuilderAtEnd(B, done);
}

/* Depth pc of a convolution's K as its tap (kh, kw) and input channel ci (K runs over
 * (kh, kw, ci), ci fastest). */
static void gm_tap(CpuKern *k, const LLVMValueRef *g, LLVMValueRef pc, LLVMValueRef *kh, LLVMValueRef *kw,
                   LLVMValueRef *ci) {
  LLVMValueRef kwci = gmul(k, g[GC_KW], g[GC_CI]);
  LLVMValueRef rem0 = LLVMBuildSRem(k->B, pc, kwci, "");
  *kh = LLVMBuildSDiv(k->B, pc, kwci, "");
  *kw = LLVMBuildSDiv(k->B, rem0, g[GC_CI], "");
  *ci = LLVMBuildSRem(k->B, rem0, g[GC_CI], "");
}

/* Output pixel pix of a convolution as its image and output row and column. */
static void gm_pixel(CpuKern *k, const LLVMValueRef *g, LLVMValueRef pix, LLVMValueRef *img, LLVMValueRef *oh,
                     LLVMValueRef *ow) {
  LLVMValueRef q = LLVMBuildSRem(k->B, pix, g[GC_OHW], "");
  *img = LLVMBuildSDiv(k->B, pix, g[GC_OHW], "");
  *oh = LLVMBuildSDiv(k->B, q, g[GC_OW], "");
  *ow = LLVMBuildSRem(k->B, q, g[GC_OW], "");
}

/* Whether the span [first, last] of input rows or columns lies inside [0, n). */
static LLVMValueRef gm_inside(CpuKern *k, LLVMValueRef first, LLVMValueRef last, LLVMValueRef n) {
  return LLVMBuildAnd(k->B, LLVMBuildICmp(k->B, LLVMIntSGE, first, gi(k, 0), ""), gslt(k, last, n), "");
}

/* Element offset in a convolution input of row ih, column iw and channel ci of the image
 * whose offset is xb. */
static LLVMValueRef gm_xoff(CpuKern *k, const LLVMValueRef *g, LLVMValueRef xb, LLVMValueRef ih, LLVMValueRef iw,
                            LLVMValueRef ci) {
  return gadd(k, gadd(k, xb, gadd(k, gmul(k, ih, g[GC_XSH]), gmul(k, iw, g[GC_XSW]))), gmul(k, ci, g[GC_XSC]));
}

/* A convolution panel the micro-kernel may read in place, as the GEMM function knows it: its
 * parameters, whether the panel is read in place (gm_direct_panel), row 0's offset in the
 * input at tap (0, 0) and channel 0, the distance between rows, the K block's first depth. */
typedef struct GmDirect {
  const LLVMValueRef *P;
  LLVMValueRef ok, off, rstride, pc;
} GmDirect;

/* The micro-kernel's k loops over the K block [pc, pc + kc) of a panel read in place: one run
 * of input channels per tap (kh, kw), the accumulators carried across the runs. Reads the
 * geometry itself: the conv parameter is only valid where d->ok holds. */
static void gm_direct_kloops(CpuKern *k, const GmCfg *c, const GmDirect *d, LLVMValueRef bp, LLVMValueRef kc,
                             LLVMValueRef init[16][4], LLVMValueRef out[16][4]) {
  CpuCg *cg = k->cg;
  LLVMBuilderRef B = k->B;
  LLVMValueRef g[GC_COUNT];
  gm_conv_geom(k, d->P, g);
  LLVMValueRef base = gfp(k, d->P[GP_A], d->off);
  int MR = c->mr, NV = c->nr / c->vw;
  LLVMTypeRef vt = LLVMVectorType(cg->f32, (unsigned)c->vw);
  LLVMValueRef st[4] = {gi(k, 0), NULL, NULL, NULL}; /* kk, kh, kw, ci */
  gm_tap(k, g, d->pc, &st[1], &st[2], &st[3]);
  LLVMValueRef tsh = gmul(k, g[GC_DH], g[GC_XSH]), tsw = gmul(k, g[GC_DW], g[GC_XSW]);
  GPhiLoop pl = gphi_open(k, "drun", "drunb", "drune");
  LLVMBasicBlockRef pre = pl.pre, body = pl.body, done = pl.done, hdr = pl.hdr;
  LLVMValueRef v[4], acc[16][4];
  for (int j = 0; j < 4; j++) {
    v[j] = LLVMBuildPhi(B, cg->i64, "");
    LLVMAddIncoming(v[j], &st[j], &pre, 1);
  }
  for (int r = 0; r < MR; r++)
    for (int j = 0; j < NV; j++) {
      out[r][j] = acc[r][j] = LLVMBuildPhi(B, vt, "");
      LLVMAddIncoming(acc[r][j], &init[r][j], &pre, 1);
    }
  LLVMBuildCondBr(B, gslt(k, v[0], kc), body, done);
  LLVMPositionBuilderAtEnd(B, body);
  LLVMValueRef kk = v[0], kh = v[1], kw = v[2], ci = v[3];
  LLVMValueRef n = gmin(k, gsub(k, g[GC_CI], ci), gsub(k, kc, kk));
  /* a plain GEP: the moved-back pointer may lie before the input */
  LLVMValueRef po = gsub(k, gadd(k, gadd(k, gmul(k, kh, tsh), gmul(k, kw, tsw)), ci), kk);
  GmArow a = {LLVMBuildGEP2(B, cg->f32, base, &po, 1, ""), d->rstride};
  /* unrolled by 2, not 4: with the MR row pointers live, LLVM's scheduler hoists the B loads
     of all unrolled steps, and four steps' B vectors spill an accumulator at MR 12; the runs
     are even (gm_direct_panel), so no remainder loop */
  LLVMValueRef nx[16][4];
  gm_kloop(k, c, &a, bp, kk, gadd(k, kk, n), 2, MR, acc, nx, NULL);
  LLVMValueRef kw1 = gadd(k, kw, gi(k, 1));
  LLVMValueRef wrap = LLVMBuildICmp(B, LLVMIntEQ, kw1, g[GC_KW], "");
  LLVMValueRef nv[4] = {gadd(k, kk, n), LLVMBuildSelect(B, wrap, gadd(k, kh, gi(k, 1)), kh, ""),
                        LLVMBuildSelect(B, wrap, gi(k, 0), kw1, ""), gi(k, 0)};
  LLVMBasicBlockRef latch = LLVMGetInsertBlock(B);
  for (int j = 0; j < 4; j++) LLVMAddIncoming(v[j], &nv[j], &latch, 1);
  for (int r = 0; r < MR; r++)
    for (int j = 0; j < NV; j++) LLVMAddIncoming(acc[r][j], &nx[r][j], &latch, 1);
  gm_novec(k, LLVMBuildBr(B, hdr));
  LLVMPositionBuilderAtEnd(B, done);
}

/* Close the if f whose then branch ended in block tend with the tile tv[][] and whose else
 * branch ends here with the tile phis[][]: phis[][] become the joined tile. */
static void gm_join_tiles(CpuKern *k, const GmCfg *c, GIf *f, LLVMBasicBlockRef tend, LLVMValueRef tv[16][4],
                          LLVMValueRef phis[16][4]) {
  LLVMBasicBlockRef fend = LLVMGetInsertBlock(k->B);
  gif_close(k, f);
  LLVMTypeRef vt = LLVMVectorType(k->cg->f32, (unsigned)c->vw);
  for (int r = 0; r < c->mr; r++)
    for (int j = 0; j < c->nr / c->vw; j++) {
      LLVMValueRef ph = LLVMBuildPhi(k->B, vt, "");
      LLVMValueRef vals[2] = {tv[r][j], phis[r][j]};
      LLVMBasicBlockRef bbs[2] = {tend, fend};
      LLVMAddIncoming(ph, vals, bbs, 2);
      phis[r][j] = ph;
    }
}

/* The micro-kernel on packed panels ap (MR x kc) and bp (kc x NR) into C at cp; with dr, a
 * convolution panel is read in place instead where dr->ok holds (one tile store for both);
 * with pf, kc / 4 cache lines from pf on are prefetched into L2 along the way. */
static void gm_micro(CpuKern *k, const GmCfg *c, LLVMValueRef ap, const GmDirect *dr, LLVMValueRef bp,
                     LLVMValueRef kc, LLVMValueRef cp, LLVMValueRef ldc, LLVMValueRef mrv, LLVMValueRef nrv,
                     LLVMValueRef first, LLVMValueRef tile, LLVMValueRef pf) {
  CpuCg *cg = k->cg;
  LLVMBuilderRef B = k->B;
  int MR = c->mr, NV = c->nr / c->vw;
  LLVMTypeRef vt = LLVMVectorType(cg->f32, (unsigned)c->vw);
  LLVMValueRef zero = LLVMConstNull(vt);
  /* prefetch the C tile (written after the k loop) */
  for (int r = 0; r < MR; r++)
    for (int e = 0; e < c->nr; e += 16)
      gm_prefetch(k, gfp(k, cp, gadd(k, gmul(k, gi(k, r), ldc), gi(k, e + (e + 16 >= c->nr ? c->nr - 1 - e : 0)))), -1);
  /* k loops with the accumulators as phis: unrolled by 4, then the remaining steps */
  LLVMValueRef init[16][4], mid[16][4], phis[16][4];
  for (int r = 0; r < MR; r++)
    for (int j = 0; j < NV; j++) init[r][j] = zero;
  GIf fd = {0};
  LLVMValueRef dacc[16][4];
  LLVMBasicBlockRef dend = NULL;
  if (dr) {
    gif_open(k, &fd, dr->ok, true);
    gm_direct_kloops(k, c, dr, bp, kc, init, dacc);
    dend = LLVMGetInsertBlock(B);
    gif_else(k, &fd);
  }
  GmArow a = {ap, NULL};
  LLVMValueRef k4 = LLVMBuildAnd(B, kc, gi(k, ~(int64_t)3), "");
  /* a last panel of at most GM_TAIL_ROWS rows (M = 256 leaves 4 of 12) runs only those rows'
     FMAs: its padding rows would be computed for nothing (3% of M = 256's work) */
  int TR = MR > GM_TAIL_ROWS ? GM_TAIL_ROWS : 0;
  GIf ft = {0};
  LLVMValueRef tph[16][4];
  LLVMBasicBlockRef tend = NULL;
  if (TR) {
    gif_open(k, &ft, LLVMBuildICmp(B, LLVMIntSLE, mrv, gi(k, TR), ""), true);
    gm_kloop(k, c, &a, bp, gi(k, 0), k4, 4, TR, init, mid, pf);
    gm_kloop(k, c, &a, bp, k4, kc, 1, TR, mid, tph, NULL);
    for (int r = TR; r < MR; r++)
      for (int j = 0; j < NV; j++) tph[r][j] = zero;
    tend = LLVMGetInsertBlock(B);
    gif_else(k, &ft);
  }
  gm_kloop(k, c, &a, bp, gi(k, 0), k4, 4, MR, init, mid, pf);
  gm_kloop(k, c, &a, bp, k4, kc, 1, MR, mid, phis, NULL);
  if (TR) gm_join_tiles(k, c, &ft, tend, tph, phis);
  if (dr) gm_join_tiles(k, c, &fd, dend, dacc, phis);
  /* store: full tiles straight to C (set on the first K block, added after), edge tiles
     through the stack tile */
  LLVMValueRef full = LLVMBuildAnd(B, LLVMBuildICmp(B, LLVMIntEQ, mrv, gi(k, MR), ""),
                                   LLVMBuildICmp(B, LLVMIntEQ, nrv, gi(k, c->nr), ""), "");
  GIf f, g;
  gif_open(k, &f, full, true);
  gif_open(k, &g, first, true);
  for (int add = 0; add < 2; add++) {
    for (int r = 0; r < MR; r++) {
      LLVMValueRef row = gmul(k, gi(k, r), ldc);
      for (int j = 0; j < NV; j++) {
        LLVMValueRef v = phis[r][j];
        LLVMValueRef p = gfp(k, cp, gadd(k, row, gi(k, j * c->vw)));
        if (add) v = LLVMBuildFAdd(B, v, gload(k, vt, p, 4), "");
        gstore(k, v, p, 4);
      }
    }
    if (add == 0) gif_else(k, &g);
  }
  gif_close(k, &g);
  gif_else(k, &f);
  for (int r = 0; r < MR; r++)
    for (int j = 0; j < NV; j++) gstore(k, phis[r][j], gfp(k, tile, gi(k, r * c->nr + j * c->vw)), 64);
  CpuLoop lr, lc;
  LLVMValueRef r = gloop(k, &lr, gi(k, 0), mrv, 1);
  LLVMValueRef cc = gloop(k, &lc, gi(k, 0), nrv, 1);
  LLVMValueRef t = gload(k, cg->f32, gfp(k, tile, gadd(k, gmul(k, r, gi(k, c->nr)), cc)), 4);
  LLVMValueRef p = gfp(k, cp, gadd(k, gmul(k, r, ldc), cc));
  GIf h;
  gif_open(k, &h, first, true);
  gstore(k, t, p, 4);
  gif_else(k, &h);
  gstore(k, LLVMBuildFAdd(B, t, gload(k, cg->f32, p, 4), ""), p, 4);
  gif_close(k, &h);
  gm_close(k, &lc);
  gm_close(k, &lr);
  gif_close(k, &f);
}

/* Each of the n vectors v[] (of one type) passed through an empty inline-assembly statement
 * (in and out in one vector register): an optimization barrier LLVM's instruction selection
 * cannot look through. */
static void gm_opaque(CpuKern *k, LLVMValueRef *v, int n) {
  LLVMTypeRef t = LLVMTypeOf(v[0]);
  LLVMTypeRef ft = LLVMFunctionType(t, &t, 1, 0);
  static const char cons[] = "=v,0";
  LLVMValueRef asm_ = LLVMGetInlineAsm(ft, "", 0, (char *)cons, sizeof cons - 1, 0, 0, LLVMInlineAsmDialectATT, 0);
  for (int i = 0; i < n; i++) v[i] = LLVMBuildCall2(k->B, ft, asm_, &v[i], 1, "");
}

/* Transpose the n x n matrix whose rows are the n-wide vectors v[0..n) in place (n a power
 * of two): log2(n) stages, each swapping the off-diagonal s x s blocks of every 2s x 2s block
 * (s = n/2 .. 1) with two shuffles per pair of rows, which x86 lowers to lane permutes,
 * unpacks and blends. On x86 each stage's inputs pass an optimization barrier (gm_opaque):
 * without it the DAG combiner's demanded-elements analysis walks the whole shuffle tree back
 * from every node, and a 16 x 16 transpose cost ~18 ms of instruction selection (the B and
 * row packing functions were 50 and 20 ms of code generation on AVX-512); each stage alone
 * selects the same instructions. */
void cpu_transpose_regs(CpuKern *k, LLVMValueRef *v, int n) {
  LLVMValueRef m0[16], m1[16];
  bool barrier = gm_cfg(k->cg).x86 && n > 4;
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

/* Pack B[pc + 0..kc, jc + 0..nc] into NR-wide panels at bp (zero columns past nc). Full
 * panels of a unit-stride B are copied row by row across all panels (contiguous reads); full
 * panels of a B whose K is contiguous (a transposed B: the keys of attention) are read VW
 * deep down each column and transposed in registers; the rest element by element. */
static void gm_pack_b(CpuKern *k, const GmCfg *c, LLVMValueRef *P, LLVMValueRef bp, LLVMValueRef pc,
                      LLVMValueRef kc, LLVMValueRef jc, LLVMValueRef nc) {
  CpuCg *cg = k->cg;
  LLVMBuilderRef B = k->B;
  LLVMTypeRef vt = LLVMVectorType(cg->f32, (unsigned)c->vw);
  CpuLoop lj, lk, lcc;
  LLVMValueRef unit = LLVMBuildICmp(B, LLVMIntEQ, P[GP_BCS], gi(k, 1), "");
  LLVMValueRef tr = LLVMBuildAnd(B, LLVMBuildNot(B, unit, ""), LLVMBuildICmp(B, LLVMIntEQ, P[GP_BRS], gi(k, 1), ""), "");
  /* columns [0, nfull) go through a fast path when B has unit column or row stride */
  LLVMValueRef nfull = LLVMBuildSelect(B, LLVMBuildOr(B, unit, tr, ""), LLVMBuildAnd(B, nc, gi(k, ~(int64_t)(c->nr - 1)), ""), gi(k, 0), "");
  GIf fu;
  gif_open(k, &fu, unit, true);
  {
    /* GM_PACK_ROWS rows at a time, each panel's part of them written in one contiguous run:
       one row at a time across all panels stores at a stride of a whole panel (a multiple of
       4 KiB), which kept every store in one cache set (a seventh of mlp's time on AVX2) */
    CpuLoop lb;
    LLVMValueRef kb = gloop(k, &lb, gi(k, 0), kc, GM_PACK_ROWS);
    LLVMValueRef ke = gmin(k, kc, gadd(k, kb, gi(k, GM_PACK_ROWS)));
    LLVMValueRef jr = gloop(k, &lj, gi(k, 0), nfull, c->nr);
    LLVMValueRef kk = gloop(k, &lk, kb, ke, 1);
    LLVMValueRef src = gfp(k, P[GP_B], gadd(k, gmul(k, gadd(k, pc, kk), P[GP_BRS]), gadd(k, jc, jr)));
    LLVMValueRef d = gfp(k, bp, gadd(k, gmul(k, jr, kc), gmul(k, kk, gi(k, c->nr))));
    for (int j = 0; j < c->nr / c->vw; j++)
      gstore(k, gload(k, vt, gfp(k, src, gi(k, j * c->vw)), 4), gfp(k, d, gi(k, j * c->vw)), 64);
    gm_close(k, &lk);
    gm_close(k, &lj);
    gm_close(k, &lb);
  }
  gif_else(k, &fu);
  {
    /* transposed: VW x VW blocks (columns x depth), then the depth left over by element */
    LLVMValueRef jr = gloop(k, &lj, gi(k, 0), nfull, c->nr);
    LLVMValueRef panel = gfp(k, bp, gmul(k, jr, kc));
    LLVMValueRef colp = gfp(k, P[GP_B], gadd(k, pc, gmul(k, gadd(k, jc, jr), P[GP_BCS])));
    LLVMValueRef kv = LLVMBuildAnd(B, kc, gi(k, ~(int64_t)(c->vw - 1)), "");
    LLVMValueRef kk = gloop(k, &lk, gi(k, 0), kv, c->vw);
    for (int h = 0; h < c->nr / c->vw; h++) {
      LLVMValueRef v[16];
      for (int q = 0; q < c->vw; q++)
        v[q] = gload(k, vt, gfp(k, colp, gadd(k, kk, gmul(k, gi(k, h * c->vw + q), P[GP_BCS]))), 4);
      cpu_transpose_regs(k, v, c->vw);
      for (int e = 0; e < c->vw; e++)
        gstore(k, v[e], gfp(k, panel, gadd(k, gmul(k, gadd(k, kk, gi(k, e)), gi(k, c->nr)), gi(k, h * c->vw))), 4);
    }
    gm_close(k, &lk);
    LLVMValueRef k2 = gloop(k, &lk, kv, kc, 1);
    LLVMValueRef cc = gloop(k, &lcc, gi(k, 0), gi(k, c->nr), 1);
    gstore(k, gload(k, cg->f32, gfp(k, colp, gadd(k, k2, gmul(k, cc, P[GP_BCS]))), 4),
           gfp(k, panel, gadd(k, gmul(k, k2, gi(k, c->nr)), cc)), 4);
    gm_close(k, &lcc);
    gm_close(k, &lk);
    gm_close(k, &lj);
  }
  gif_close(k, &fu);
  LLVMValueRef jr = gloop(k, &lj, nfull, nc, c->nr);
  LLVMValueRef ncv = gmin(k, gi(k, c->nr), gsub(k, nc, jr));
  LLVMValueRef panel = gfp(k, bp, gmul(k, jr, kc));
  LLVMValueRef col0 = gadd(k, jc, jr);
  {
    LLVMValueRef kk = gloop(k, &lk, gi(k, 0), kc, 1);
    LLVMValueRef rowp = gfp(k, P[GP_B], gmul(k, gadd(k, pc, kk), P[GP_BRS]));
    LLVMValueRef dst = gfp(k, panel, gmul(k, kk, gi(k, c->nr)));
    LLVMValueRef cc = gloop(k, &lcc, gi(k, 0), gi(k, c->nr), 1);
    LLVMValueRef in = gslt(k, cc, ncv);
    LLVMValueRef col = gadd(k, col0, gmin(k, cc, gsub(k, ncv, gi(k, 1))));
    LLVMValueRef v = gload(k, cg->f32, gfp(k, rowp, gmul(k, col, P[GP_BCS])), 4);
    v = LLVMBuildSelect(B, in, v, LLVMConstReal(cg->f32, 0.0), "");
    gstore(k, v, gfp(k, dst, cc), 4);
    gm_close(k, &lcc);
    gm_close(k, &lk);
  }
  gm_close(k, &lj);
}

/* Interleave MR rows that are contiguous in K into a panel: for kk in [k0, k1) (a multiple
 * of VW apart; VW >= MR) the MR floats rows[r][kk] go to dst[kk * MR + r]. Each step loads VW
 * floats of every row, transposes the block in registers (padded to VW rows) and stores MR
 * floats per depth. */
static void gm_pack_rows_t(CpuKern *k, const GmCfg *c, LLVMValueRef *rows, LLVMValueRef k0, LLVMValueRef k1,
                           LLVMValueRef dst) {
  CpuCg *cg = k->cg;
  int MR = c->mr;
  LLVMTypeRef vt = LLVMVectorType(cg->f32, (unsigned)c->vw);
  CpuLoop lk;
  LLVMValueRef kk = gloop(k, &lk, k0, k1, c->vw);
  LLVMValueRef v[16], lanes[16];
  for (int q = 0; q < c->vw; q++) v[q] = q < MR ? gload(k, vt, gfp(k, rows[q], kk), 4) : LLVMGetUndef(vt);
  cpu_transpose_regs(k, v, c->vw);
  for (int q = 0; q < MR; q++) lanes[q] = LLVMConstInt(cg->i32, (unsigned)q, 0);
  LLVMValueRef first = LLVMConstVector(lanes, (unsigned)MR);
  for (int e = 0; e < c->vw; e++)
    gstore(k, LLVMBuildShuffleVector(k->B, v[e], LLVMGetUndef(vt), first, ""),
           gfp(k, dst, gmul(k, gadd(k, kk, gi(k, e)), gi(k, MR))), 4);
  gm_close(k, &lk);
}

static CpuKern *gm_fn_begin(CpuCg *cg, const char *name, LLVMTypeRef ft);
static void gm_mark(LLVMValueRef fn, const GmCfg *c);

/* The symbol prefix of the GEMM's functions: the module's name, or, where they come from the
 * prebuilt library (or are being compiled into it), the library's. */
static const char *gm_prefix(const CpuCg *cg) { return cg->prebuilt || cg->lib ? CPU_LIB_PREFIX : cg->o->name; }

/* With a prebuilt library (cg->prebuilt) a function of the GEMM is only declared, hidden, and
 * kept in *slot: its definition is in the library's object, joined to the module's by
 * cpu_emit(). false when the function is to be made here. */
static bool gm_declared(CpuCg *cg, LLVMValueRef *slot, const char *name, LLVMTypeRef ft) {
  if (!cg->prebuilt) return false;
  *slot = LLVMAddFunction(cg->M, name, ft);
  LLVMSetVisibility(*slot, LLVMHiddenVisibility);
  return true;
}

/* gm_pack_rows_t as a function of its own, void (ptr rows, i64 k0, i64 k1, ptr dst) with rows
 * the MR row pointers, shared by A's packing and the convolution packing: its register
 * transpose is the costliest code of both to compile (made once per module). */
static LLVMValueRef gm_rows_t_function(CpuCg *cg) {
  if (cg->gemm_rows_fn) return cg->gemm_rows_fn;
  GmCfg c = gm_cfg(cg);
  char name[512];
  snprintf(name, sizeof name, "%s_gemm_f32_rows_t", gm_prefix(cg));
  LLVMTypeRef ps[4] = {cg->ptr, cg->i64, cg->i64, cg->ptr};
  if (gm_declared(cg, &cg->gemm_rows_fn, name, LLVMFunctionType(cg->vd, ps, 4, 0))) return cg->gemm_rows_fn;
  LLVMBasicBlockRef saved = LLVMGetInsertBlock(cg->B);
  CpuKern *k = gm_fn_begin(cg, name, LLVMFunctionType(cg->vd, ps, 4, 0));
  gm_mark(k->fn, &c);
  LLVMValueRef rows[16], arr = LLVMGetParam(k->fn, 0);
  for (int q = 0; q < c.mr; q++) {
    LLVMValueRef ix = gi(k, q);
    rows[q] = LLVMBuildLoad2(k->B, cg->ptr, LLVMBuildInBoundsGEP2(k->B, cg->ptr, arr, &ix, 1, ""), "");
  }
  gm_pack_rows_t(k, &c, rows, LLVMGetParam(k->fn, 1), LLVMGetParam(k->fn, 2), LLVMGetParam(k->fn, 3));
  LLVMBuildRetVoid(k->B);
  if (saved) LLVMPositionBuilderAtEnd(cg->B, saved);
  cg->gemm_rows_fn = k->fn;
  return k->fn;
}

/* Call gm_rows_t_function on the MR row pointers rows. */
static void gm_call_rows_t(CpuKern *k, const GmCfg *c, LLVMValueRef *rows, LLVMValueRef k0, LLVMValueRef k1,
                           LLVMValueRef dst) {
  CpuCg *cg = k->cg;
  LLVMValueRef arr = cpu_alloca(k, LLVMArrayType2(cg->ptr, (uint64_t)c->mr));
  for (int q = 0; q < c->mr; q++) {
    LLVMValueRef ix = gi(k, q);
    LLVMBuildStore(k->B, rows[q], LLVMBuildInBoundsGEP2(k->B, cg->ptr, arr, &ix, 1, ""));
  }
  LLVMValueRef fn = gm_rows_t_function(cg);
  LLVMValueRef args[4] = {arr, k0, k1, dst};
  LLVMBuildCall2(k->B, LLVMGlobalGetValueType(fn), fn, args, 4, "");
}

/* Interleave MR rows lying at a fixed distance sw (1 or 2) of each other, each strided by xs
 * in K, into a panel: for t in [0, n) the MR floats src[r * sw + t * xs] go to dst[t * MR + r].
 * sw 1 is one MR-wide copy per depth; sw 2 loads the two halves' spans (MR floats each, never
 * past the last element read) and picks every other element with one shuffle. */
static void gm_pack_strided(CpuKern *k, const GmCfg *c, LLVMValueRef src, LLVMValueRef xs, int sw,
                            LLVMValueRef n, LLVMValueRef dst) {
  CpuCg *cg = k->cg;
  int MR = c->mr;
  LLVMTypeRef vt = LLVMVectorType(cg->f32, (unsigned)MR);
  CpuLoop lt;
  LLVMValueRef t = gloop(k, &lt, gi(k, 0), n, 1);
  LLVMValueRef p = gfp(k, src, gmul(k, t, xs)), v;
  if (sw == 1) {
    v = gload(k, vt, p, 4);
  } else {
    /* rows 0 .. MR/2-1 at even positions of [0, MR); rows MR/2 .. MR-1 at odd positions of
       [MR-1, 2MR-1) */
    LLVMValueRef lo = gload(k, vt, p, 4), hi = gload(k, vt, gfp(k, p, gi(k, MR - 1)), 4), m[16];
    for (int r = 0; r < MR; r++)
      m[r] = LLVMConstInt(cg->i32, (unsigned)(r < MR / 2 ? 2 * r : MR + 2 * r - (MR - 1)), 0);
    v = LLVMBuildShuffleVector(k->B, lo, hi, LLVMConstVector(m, (unsigned)MR), "");
  }
  gstore(k, v, gfp(k, dst, gmul(k, t, gi(k, MR))), 4);
  gm_close(k, &lt);
}

/* Whether the micro-kernel reads the panel of output pixels pix0 .. pix0 + mrv - 1 of a
 * convolution in place instead of packed: a full panel of an input whose channels are
 * contiguous (NHWC) and even in number (every run of channels is then even: the K blocks'
 * depths are multiples of 8), its MR pixels in one output row and every tap of every pixel inside the
 * image (no padding), so that row r reads row 0's elements r * SW * XSW further on. *off
 * receives row 0's offset in the input at tap (0, 0) and channel 0 (0 when false), *rstride
 * the distance between rows. Both the packing (which skips such panels) and the GEMM ask. */
static LLVMValueRef gm_direct_panel(CpuKern *k, const GmCfg *c, const LLVMValueRef *P, const LLVMValueRef *g,
                                    LLVMValueRef pix0, LLVMValueRef mrv, LLVMValueRef *off, LLVMValueRef *rstride) {
  LLVMBuilderRef B = k->B;
  int MR = c->mr;
  /* the pixel and tap tests (five divisions) only for a full panel of an NHWC input with an
     even channel count */
  LLVMValueRef pre = LLVMBuildAnd(B, LLVMBuildICmp(B, LLVMIntEQ, g[GC_XSC], gi(k, 1), ""),
                                  LLVMBuildICmp(B, LLVMIntEQ, LLVMBuildAnd(B, g[GC_CI], gi(k, 1), ""), gi(k, 0), ""), "");
  pre = LLVMBuildAnd(B, pre, LLVMBuildICmp(B, LLVMIntEQ, mrv, gi(k, MR), ""), "");
  LLVMValueRef vok = gvar(k, gi(k, 0)), voff = gvar(k, gi(k, 0));
  GIf fp;
  gif_open(k, &fp, pre, false);
  LLVMValueRef img, oh, ow;
  gm_pixel(k, g, pix0, &img, &oh, &ow);
  LLVMValueRef kh = LLVMBuildSDiv(B, P[GP_K], gmul(k, g[GC_KW], g[GC_CI]), "");
  LLVMValueRef ih0 = gsub(k, gmul(k, oh, g[GC_SH]), g[GC_PH]), iw0 = gsub(k, gmul(k, ow, g[GC_SW]), g[GC_PW]);
  LLVMValueRef ihl = gadd(k, ih0, gmul(k, gsub(k, kh, gi(k, 1)), g[GC_DH]));
  LLVMValueRef iwl = gadd(k, gadd(k, iw0, gmul(k, gi(k, MR - 1), g[GC_SW])), gmul(k, gsub(k, g[GC_KW], gi(k, 1)), g[GC_DW]));
  LLVMValueRef conds[5] = {
      LLVMBuildICmp(B, LLVMIntSLE, ow, gsub(k, g[GC_OW], gi(k, MR)), ""),
      LLVMBuildICmp(B, LLVMIntSGE, ih0, gi(k, 0), ""),
      gslt(k, ihl, g[GC_H]),
      LLVMBuildICmp(B, LLVMIntSGE, iw0, gi(k, 0), ""),
      gslt(k, iwl, g[GC_W])};
  LLVMValueRef ok = conds[0];
  for (int j = 1; j < 5; j++) ok = LLVMBuildAnd(B, ok, conds[j], "");
  LLVMValueRef o = gadd(k, gmul(k, img, g[GC_XSB]), gadd(k, gmul(k, ih0, g[GC_XSH]), gmul(k, iw0, g[GC_XSW])));
  LLVMBuildStore(B, LLVMBuildZExt(B, ok, k->cg->i64, ""), vok);
  LLVMBuildStore(B, LLVMBuildSelect(B, ok, o, gi(k, 0), ""), voff);
  gif_close(k, &fp);
  *off = gget(k, voff);
  *rstride = gmul(k, g[GC_SW], g[GC_XSW]);
  return LLVMBuildICmp(B, LLVMIntNE, gget(k, vok), gi(k, 0), "");
}

/* Pack A[ic + 0..mc, pc + 0..kc] from a convolution input (implicit GEMM) into MR-tall
 * panels at ap. Row r of a panel is output pixel m0 + ic + ir + r, decoded once per panel into
 * its image and window origin (row 0 by division, the others by stepping: with 3 input
 * channels, K = 27, the MR rows' divisions had cost as much as the panel's FMAs). K is walked
 * in runs of input channels at one tap (kh, kw), the run shared by the MR rows. A panel in
 * one output row of an NCHW input whose tap lies inside the image is one vector load per
 * channel from row 0's pointer, nothing computed per row (simple_cnn's first convolution on
 * this VM's EPYC, one core, without its output: 200 -> 101-118 ms; the packing's
 * instructions 52 -> 19 M per pair of images). Otherwise each row reads its run through a
 * pointer and a stride, a row whose tap falls in the padding (or past the last row) reads the
 * one zero at zp with stride 0, and the MR rows are interleaved into the panel with the rows
 * unrolled (MR contiguous stores per step). */
static void gm_pack_a_conv(CpuKern *k, const GmCfg *c, LLVMValueRef *P, LLVMValueRef ap, LLVMValueRef ic,
                           LLVMValueRef mc, LLVMValueRef pc, LLVMValueRef kc, LLVMValueRef zp) {
  CpuCg *cg = k->cg;
  LLVMBuilderRef B = k->B;
  int MR = c->mr;
  LLVMValueRef g[GC_COUNT];
  gm_conv_geom(k, P, g);
  LLVMValueRef kh0, kw0, ci0;
  gm_tap(k, g, pc, &kh0, &kw0, &ci0);
  LLVMValueRef OH = LLVMBuildSDiv(B, g[GC_OHW], g[GC_OW], "");
  CpuLoop li, lt;
  LLVMValueRef ir = gloop(k, &li, gi(k, 0), mc, MR);
  LLVMValueRef mrv = gmin(k, gi(k, MR), gsub(k, mc, ir));
  LLVMValueRef panel = gfp(k, ap, gmul(k, ir, kc));
  /* a panel the micro-kernel reads in place is not packed */
  GIf fd = {0};
  if (c->direct) {
    LLVMValueRef doff, drs;
    LLVMValueRef direct = gm_direct_panel(k, c, P, g, gadd(k, gadd(k, ic, ir), g[GC_M0]), mrv, &doff, &drs);
    gif_open(k, &fd, LLVMBuildNot(B, direct, ""), false);
  }
  /* the panel's pixels: row 0's (image, oh, ow) by division, the next rows' by stepping ow
     (with K of a few dozen, as with 3 input channels, MR rows' divisions cost as much as the
     panel's FMAs) */
  LLVMValueRef ih0[16], iw0[16], xb[16], valid[16], ow0 = NULL, img = NULL, oh = NULL, ow = NULL;
  for (int r = 0; r < MR; r++) {
    if (r == 0) {
      gm_pixel(k, g, gadd(k, gadd(k, ic, ir), g[GC_M0]), &img, &oh, &ow);
    } else {
      LLVMValueRef w = LLVMBuildICmp(B, LLVMIntEQ, ow = gadd(k, ow, gi(k, 1)), g[GC_OW], "");
      ow = LLVMBuildSelect(B, w, gi(k, 0), ow, "");
      LLVMValueRef h = LLVMBuildICmp(B, LLVMIntEQ, oh = gadd(k, oh, LLVMBuildZExt(B, w, cg->i64, "")), OH, "");
      oh = LLVMBuildSelect(B, h, gi(k, 0), oh, "");
      img = gadd(k, img, LLVMBuildZExt(B, h, cg->i64, ""));
    }
    ih0[r] = gsub(k, gmul(k, oh, g[GC_SH]), g[GC_PH]);
    iw0[r] = gsub(k, gmul(k, ow, g[GC_SW]), g[GC_PW]);
    xb[r] = gmul(k, img, g[GC_XSB]);
    valid[r] = gslt(k, gi(k, r), mrv);
    if (r == 0) ow0 = ow;
  }
  /* a full panel whose MR pixels lie in one output row of an input with unit width stride
     (NCHW): row r reads row 0's elements r * SW further on */
  LLVMValueRef row1 = LLVMBuildAnd(B, LLVMBuildICmp(B, LLVMIntEQ, mrv, gi(k, MR), ""),
                                   LLVMBuildICmp(B, LLVMIntSLE, ow0, gsub(k, g[GC_OW], gi(k, MR)), ""), "");
  row1 = LLVMBuildAnd(B, row1, LLVMBuildICmp(B, LLVMIntEQ, g[GC_XSW], gi(k, 1), ""), "");
  row1 = LLVMBuildAnd(B, row1, LLVMBuildICmp(B, LLVMIntNE, g[GC_XSC], gi(k, 1), ""), "");
  /* every panel walks the block's K from its first tap: while (kk < kc), one run of input
     channels at tap (kh, kw) */
  LLVMValueRef vkk = gvar(k, gi(k, 0)), vkh = gvar(k, kh0), vkw = gvar(k, kw0), vci = gvar(k, ci0);
  GWhile run;
  LLVMValueRef kk = gwhile_open(k, &run, vkk, kc, "run", "runb", "rune");
  LLVMValueRef kh = gget(k, vkh), kw = gget(k, vkw), ci = gget(k, vci);
  LLVMValueRef n = gmin(k, gsub(k, g[GC_CI], ci), gsub(k, kc, kk));
  LLVMValueRef dh = gmul(k, kh, g[GC_DH]), dw = gmul(k, kw, g[GC_DW]);
  LLVMValueRef dst = gfp(k, panel, gmul(k, kk, gi(k, MR)));
  /* a panel in one output row of an NCHW input with the tap inside the image for its first and
     last pixel (so for all): row 0's pointer and one vector load per channel (width stride 1
     or 2); nothing per row */
  LLVMValueRef ih = gadd(k, ih0[0], dh), iw = gadd(k, iw0[0], dw), iwl = gadd(k, iw0[MR - 1], dw);
  LLVMValueRef fast = LLVMBuildAnd(B, row1, gm_inside(k, ih, ih, g[GC_H]), "");
  fast = LLVMBuildAnd(B, fast, gm_inside(k, iw, iwl, g[GC_W]), "");
  fast = LLVMBuildAnd(B, fast, LLVMBuildICmp(B, LLVMIntULE, gsub(k, g[GC_SW], gi(k, 1)), gi(k, 1), ""), "");
  GIf ff;
  gif_open(k, &ff, fast, true);
  {
    LLVMValueRef src0 = gfp(k, P[GP_A], gm_xoff(k, g, xb[0], ih, iw, ci));
    GIf fs;
    gif_open(k, &fs, LLVMBuildICmp(B, LLVMIntEQ, g[GC_SW], gi(k, 1), ""), true);
    gm_pack_strided(k, c, src0, g[GC_XSC], 1, n, dst);
    gif_else(k, &fs);
    gm_pack_strided(k, c, src0, g[GC_XSC], 2, n, dst);
    gif_close(k, &fs);
  }
  gif_else(k, &ff);
  LLVMValueRef src[16], st[16], all = NULL;
  for (int r = 0; r < MR; r++) {
    LLVMValueRef ihr = gadd(k, ih0[r], dh), iwr = gadd(k, iw0[r], dw);
    LLVMValueRef ok = LLVMBuildAnd(B, gm_inside(k, ihr, ihr, g[GC_H]), gm_inside(k, iwr, iwr, g[GC_W]), "");
    ok = LLVMBuildAnd(B, ok, valid[r], "");
    LLVMValueRef off = gm_xoff(k, g, xb[r], ihr, iwr, ci);
    /* the offset is only formed for taps inside the image; zp otherwise */
    off = LLVMBuildSelect(B, ok, off, gi(k, 0), "");
    src[r] = LLVMBuildSelect(B, ok, gfp(k, P[GP_A], off), zp, "");
    st[r] = LLVMBuildSelect(B, ok, g[GC_XSC], gi(k, 0), "");
    all = all ? LLVMBuildAnd(B, all, ok, "") : ok;
  }
  /* every row inside the image (the common case): one shared channel offset, so the MR row
     pointers and it fit in registers; else a stride per row */
  GIf fa;
  gif_open(k, &fa, all, true);
  LLVMValueRef t0 = gi(k, 0);
  if (c->vw >= MR) {
    /* channels contiguous (an NHWC input): VW channels of each row per step, the MR x VW
       block transposed in registers as in gm_pack_a; the channels left over go below */
    t0 = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntEQ, g[GC_XSC], gi(k, 1), ""),
                         LLVMBuildAnd(B, n, gi(k, ~(int64_t)(c->vw - 1)), ""), gi(k, 0), "");
    gm_call_rows_t(k, c, src, gi(k, 0), t0, dst);
  }
  for (int v = 0; v < 2; v++) {
    LLVMValueRef t = gloop(k, &lt, v == 0 ? t0 : gi(k, 0), n, 1);
    LLVMValueRef d = gfp(k, dst, gmul(k, t, gi(k, MR)));
    LLVMValueRef to = v == 0 ? gmul(k, t, g[GC_XSC]) : NULL;
    for (int r = 0; r < MR; r++)
      gstore(k, gload(k, cg->f32, gfp(k, src[r], v == 0 ? to : gmul(k, t, st[r])), 4), gfp(k, d, gi(k, r)), 4);
    gm_close(k, &lt);
    if (v == 0) gif_else(k, &fa);
  }
  gif_close(k, &fa);
  gif_close(k, &ff);
  LLVMBuildStore(B, gadd(k, kk, n), vkk);
  LLVMBuildStore(B, gi(k, 0), vci);
  LLVMValueRef kw1 = gadd(k, kw, gi(k, 1));
  LLVMValueRef wrap = LLVMBuildICmp(B, LLVMIntEQ, kw1, g[GC_KW], "");
  LLVMBuildStore(B, LLVMBuildSelect(B, wrap, gi(k, 0), kw1, ""), vkw);
  LLVMBuildStore(B, LLVMBuildSelect(B, wrap, gadd(k, kh, gi(k, 1)), kh, ""), vkh);
  gwhile_close(k, &run);
  if (c->direct) gif_close(k, &fd);
  gm_close(k, &li);
}

/* Pack A[ic + 0..mc, pc + 0..kc] from strided A into MR-tall panels at ap (zero rows past
 * mc). Full panels of an A whose rows are contiguous in K are read VW deep per row and
 * transposed in registers; the rest element by element. */
static void gm_pack_a(CpuKern *k, const GmCfg *c, LLVMValueRef *P, LLVMValueRef ap, LLVMValueRef ic,
                      LLVMValueRef mc, LLVMValueRef pc, LLVMValueRef kc) {
  CpuCg *cg = k->cg;
  LLVMBuilderRef B = k->B;
  int MR = c->mr;
  LLVMValueRef fz = LLVMConstReal(cg->f32, 0.0);
  CpuLoop li, lr, lk;
  LLVMValueRef ir = gloop(k, &li, gi(k, 0), mc, MR);
  LLVMValueRef mrv = gmin(k, gi(k, MR), gsub(k, mc, ir));
  LLVMValueRef panel = gfp(k, ap, gmul(k, ir, kc));
  {
    /* a full panel: k outer, the MR rows unrolled (contiguous stores) */
    GIf fp;
    gif_open(k, &fp, LLVMBuildICmp(B, LLVMIntEQ, mrv, gi(k, MR), ""), false);
    LLVMValueRef rows[16];
    for (int q = 0; q < MR; q++)
      rows[q] = gfp(k, P[GP_A], gadd(k, gmul(k, gadd(k, gadd(k, ic, ir), gi(k, q)), P[GP_ARS]), gmul(k, pc, P[GP_ACS])));
    LLVMValueRef k0 = gi(k, 0);
    if (c->vw >= MR) {
      /* rows contiguous in K (the usual row-major A): VW deep per row, the MR x VW block
         transposed in registers (padded to VW rows), MR floats stored per depth */
      k0 = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntEQ, P[GP_ACS], gi(k, 1), ""),
                           LLVMBuildAnd(B, kc, gi(k, ~(int64_t)(c->vw - 1)), ""), gi(k, 0), "");
      gm_call_rows_t(k, c, rows, gi(k, 0), k0, panel);
    }
    LLVMValueRef kk = gloop(k, &lk, k0, kc, 1);
    LLVMValueRef ko = gmul(k, kk, P[GP_ACS]);
    LLVMValueRef dst = gfp(k, panel, gmul(k, kk, gi(k, MR)));
    for (int q = 0; q < MR; q++) gstore(k, gload(k, cg->f32, gfp(k, rows[q], ko), 4), gfp(k, dst, gi(k, q)), 4);
    gm_close(k, &lk);
    LLVMBuildBr(B, fp.join); /* skip the row-by-row path */
    LLVMPositionBuilderAtEnd(B, fp.join);
  }
  /* a partial panel, row by row (no rows when the panel was full) */
  LLVMValueRef r = gloop(k, &lr, gi(k, 0), LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntEQ, mrv, gi(k, MR), ""), gi(k, 0), gi(k, MR), ""), 1);
  GIf f;
  gif_open(k, &f, gslt(k, r, mrv), true);
  LLVMValueRef row = gadd(k, gadd(k, ic, ir), r);
  {
    LLVMValueRef rowp = gfp(k, P[GP_A], gmul(k, row, P[GP_ARS]));
    LLVMValueRef kk = gloop(k, &lk, gi(k, 0), kc, 1);
    LLVMValueRef v = gload(k, cg->f32, gfp(k, rowp, gmul(k, gadd(k, pc, kk), P[GP_ACS])), 4);
    gstore(k, v, gfp(k, panel, gadd(k, gmul(k, kk, gi(k, MR)), r)), 4);
    gm_close(k, &lk);
  }
  gif_else(k, &f);
  {
    LLVMValueRef kk = gloop(k, &lk, gi(k, 0), kc, 1);
    gstore(k, fz, gfp(k, panel, gadd(k, gmul(k, kk, gi(k, MR)), r)), 4);
    gm_close(k, &lk);
  }
  gif_close(k, &f);
  gm_close(k, &lr);
  gm_close(k, &li);
}

/* gm_kstep in IR, for a run-time K. */
static LLVMValueRef gm_kstep_ir(CpuKern *k, const GmCfg *c, LLVMValueRef K) {
  LLVMValueRef nkb = LLVMBuildSDiv(k->B, gadd(k, K, gi(k, c->kc - 1)), gi(k, c->kc), "");
  nkb = LLVMBuildSelect(k->B, gslt(k, nkb, gi(k, 1)), gi(k, 1), nkb, "");
  LLVMValueRef kstep = LLVMBuildSDiv(k->B, gadd(k, K, gsub(k, nkb, gi(k, 1))), nkb, "");
  return gmin(k, gi(k, c->kc), LLVMBuildAnd(k->B, gadd(k, kstep, gi(k, 7)), gi(k, ~(int64_t)7), ""));
}

static LLVMTypeRef gm_fn_type(CpuCg *cg) {
  LLVMTypeRef ps[GP_COUNT];
  for (int j = 0; j < GP_COUNT; j++) ps[j] = cg->i64;
  ps[GP_A] = ps[GP_B] = ps[GP_C] = ps[GP_PACK] = ps[GP_CONV] = ps[GP_BPRE] = ps[GP_APRE] = cg->ptr;
  return LLVMFunctionType(cg->vd, ps, GP_COUNT, 0);
}

/* A new internal, never-inlined function of the module (the GEMM and its packing helpers)
 * with an entry block and a body block, the builder at the body's start; the caller restores
 * the builder's position when done. */
static CpuKern *gm_fn_begin(CpuCg *cg, const char *name, LLVMTypeRef ft) {
  LLVMValueRef fn = LLVMAddFunction(cg->M, name, ft);
  LLVMSetLinkage(fn, LLVMInternalLinkage);
  unsigned ni = LLVMGetEnumAttributeKindForName("noinline", 8);
  LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(cg->C, ni, 0));
  CpuKern *k = hlo_arena_alloc(cg->scratch, sizeof *k);
  k->cg = cg;
  k->B = cg->B;
  k->fn = fn;
  k->entry = LLVMAppendBasicBlockInContext(cg->C, fn, "entry");
  LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(cg->C, fn, "start");
  LLVMPositionBuilderAtEnd(cg->B, k->entry);
  k->entry_br = LLVMBuildBr(cg->B, body);
  LLVMPositionBuilderAtEnd(cg->B, body);
  return k;
}

/* Mark fn a GEMM function: cpu_emit.c gives it the light pipeline (CPU_LIGHT_ATTR); on
 * AVX-512 it asks for full-width vectors (CPUs tuned to prefer 256-bit vectors, e.g.
 * sapphirerapids, would split the explicit 512-bit vectors in two). */
static void gm_mark(LLVMValueRef fn, const GmCfg *c) {
  LLVMAddTargetDependentFunctionAttr(fn, CPU_LIGHT_ATTR, "1");
  if (c->vw == 16) LLVMAddTargetDependentFunctionAttr(fn, "min-legal-vector-width", "512");
}

/* The packing steps of the GEMM as functions of their own (made once each, called once per
 * block): the GEMM with every packing inlined was one function, and the longest single job
 * of a module's compilation (0.15-0.2 s of code generation for a training step's, with
 * convolution packing, at AVX-512); apart, they are optimized and compiled in parallel parts
 * (cpu_emit.c). Each takes the GEMM's parameters, then the destination panel and four i64
 * (GS_PACK_B: pc, kc, jc, nc; GS_PACK_A, GS_PACK_CONV: ic, mc, pc, kc). */
typedef enum { GS_PACK_B, GS_PACK_A, GS_PACK_CONV, GS_COUNT } GmStep;

static LLVMTypeRef gm_step_type(CpuCg *cg) {
  LLVMTypeRef ps[GP_COUNT + 5];
  for (int j = 0; j < GP_COUNT + 5; j++) ps[j] = cg->i64;
  ps[GP_A] = ps[GP_B] = ps[GP_C] = ps[GP_PACK] = ps[GP_CONV] = ps[GP_BPRE] = ps[GP_APRE] = cg->ptr;
  ps[GP_COUNT] = cg->ptr;
  return LLVMFunctionType(cg->vd, ps, GP_COUNT + 5, 0);
}

static LLVMValueRef gm_step_function(CpuCg *cg, GmStep which) {
  LLVMValueRef *slot = &cg->gemm_step_fn[which];
  if (*slot) return *slot;
  GmCfg c = gm_cfg(cg);
  static const char *const names[GS_COUNT] = {"pack_b", "pack_a", "pack_conv"};
  char name[512];
  snprintf(name, sizeof name, "%s_gemm_f32_%s", gm_prefix(cg), names[which]);
  if (gm_declared(cg, slot, name, gm_step_type(cg))) return *slot;
  LLVMBasicBlockRef saved = LLVMGetInsertBlock(cg->B);
  CpuKern *k = gm_fn_begin(cg, name, gm_step_type(cg));
  gm_mark(k->fn, &c);
  LLVMValueRef P[GP_COUNT], x[4];
  for (int j = 0; j < GP_COUNT; j++) P[j] = LLVMGetParam(k->fn, (unsigned)j);
  LLVMValueRef dst = LLVMGetParam(k->fn, GP_COUNT);
  for (int j = 0; j < 4; j++) x[j] = LLVMGetParam(k->fn, (unsigned)(GP_COUNT + 1 + j));
  switch (which) {
  case GS_PACK_B: gm_pack_b(k, &c, P, dst, x[0], x[1], x[2], x[3]); break;
  case GS_PACK_A: gm_pack_a(k, &c, P, dst, x[0], x[1], x[2], x[3]); break;
  case GS_PACK_CONV: {
    LLVMValueRef zp = cpu_alloca(k, cg->f32); /* the zero that padding taps read */
    LLVMBuildStore(k->B, LLVMConstReal(cg->f32, 0.0), zp);
    gm_pack_a_conv(k, &c, P, dst, x[0], x[1], x[2], x[3], zp);
    break;
  }
  case GS_COUNT: break;
  }
  LLVMBuildRetVoid(k->B);
  if (saved) LLVMPositionBuilderAtEnd(cg->B, saved);
  *slot = k->fn;
  return k->fn;
}

static void gm_call_step(CpuKern *k, GmStep which, const LLVMValueRef *P, LLVMValueRef dst, LLVMValueRef a0,
                         LLVMValueRef a1, LLVMValueRef a2, LLVMValueRef a3) {
  LLVMValueRef args[GP_COUNT + 5];
  for (int j = 0; j < GP_COUNT; j++) args[j] = P[j];
  args[GP_COUNT] = dst;
  args[GP_COUNT + 1] = a0;
  args[GP_COUNT + 2] = a1;
  args[GP_COUNT + 3] = a2;
  args[GP_COUNT + 4] = a3;
  LLVMBuildCall2(k->B, gm_step_type(k->cg), k->cg->gemm_step_fn[which], args, GP_COUNT + 5, "");
}

/* Where the micro-kernel call on column panel jr of row panel ir prefetches its kc / 4 lines
 * (gm_micro's pf) when B was given packed (GP_BPRE): the blocks of a packed B lie one after
 * the other in the order the calls take them (the next K block, else the next column block,
 * which may be the next call's), so the next block starts just past this one; the block's
 * calls, numbered in the order they run, take its lines in turn, kc / 4 each, until all are
 * asked for (the first 8192 / 128 = 64 of 176 calls for a 512 x 256 block and 256 rows).
 * Calls past that, and calls without a packed B, prefetch their own panel again: lines
 * already at hand, no branch in the loop. A block pulled from L3 or memory by its first row
 * panel alone could not be streamed as fast as that panel consumed it. */
static LLVMValueRef gm_next_lines(CpuKern *k, const GmCfg *c, LLVMValueRef *P, LLVMValueRef bpc, LLVMValueRef bpj,
                                  LLVMValueRef kc, LLVMValueRef ncrj, LLVMValueRef ic, LLVMValueRef ir, LLVMValueRef jr) {
  LLVMValueRef per = LLVMBuildSDiv(k->B, kc, gi(k, 4), "");
  LLVMValueRef lines = LLVMBuildSDiv(k->B, gmul(k, kc, ncrj), gi(k, 16), "");
  LLVMValueRef cols = LLVMBuildSDiv(k->B, ncrj, gi(k, c->nr), "");
  LLVMValueRef t = gadd(k, gmul(k, LLVMBuildSDiv(k->B, gadd(k, ic, ir), gi(k, c->mr), ""), cols),
                        LLVMBuildSDiv(k->B, jr, gi(k, c->nr), ""));
  LLVMValueRef l0 = gmul(k, t, per);
  LLVMValueRef take = LLVMBuildAnd(k->B, LLVMBuildIsNotNull(k->B, P[GP_BPRE], ""), gslt(k, l0, lines), "");
  LLVMValueRef nb = gfp(k, bpc, gmul(k, kc, ncrj));
  return LLVMBuildSelect(k->B, take, gfp(k, nb, gmul(k, l0, gi(k, 16))), bpj, "");
}

/* The GEMM function of the module, made once: A is read through strides, or (when its conv
 * argument is not NULL) packed from a convolution input. */
static LLVMValueRef gm_function(CpuCg *cg) {
  LLVMValueRef *slot = &cg->gemm_fn[0];
  if (*slot) return *slot;
  GmCfg c = gm_cfg(cg);
  char name[512];
  snprintf(name, sizeof name, "%s_gemm_f32", gm_prefix(cg));
  if (gm_declared(cg, slot, name, gm_fn_type(cg))) return *slot;
  /* the paths the module's products can take: a module without convolutions has no
     convolution packing, resident B or panels read in place; one without dots no packing of
     A from a matrix (its packing step functions are not made); the prebuilt library has all */
  bool has_conv = cg->lib, has_dot = cg->lib;
  for (int i = 0; !cg->lib && i < cg->m->ncomps; i++)
    for (int j = 0; j < cg->m->comps[i]->ninstrs; j++) {
      const HInstr *x = cg->m->comps[i]->instrs[j];
      has_conv |= x->op == OP_CONVOLUTION;
      has_dot |= x->op == OP_DOT || gm_wino_conv(cg, x); /* Winograd's products are plain */
    }
  gm_step_function(cg, GS_PACK_B);
  if (has_dot) gm_step_function(cg, GS_PACK_A);
  if (has_conv) gm_step_function(cg, GS_PACK_CONV);
  LLVMBasicBlockRef saved = LLVMGetInsertBlock(cg->B);
  CpuKern *k = gm_fn_begin(cg, name, gm_fn_type(cg));
  LLVMValueRef fn = k->fn;
  gm_mark(fn, &c);
  LLVMValueRef P[GP_COUNT];
  for (int j = 0; j < GP_COUNT; j++) P[j] = LLVMGetParam(fn, (unsigned)j);
  unsigned na = LLVMGetEnumAttributeKindForName("noalias", 7);
  LLVMAddAttributeAtIndex(fn, GP_PACK + 1, LLVMCreateEnumAttribute(cg->C, na, 0));
  LLVMTypeRef tile_ty = LLVMArrayType2(cg->f32, (uint64_t)(c.mr * c.nr));
  LLVMValueRef tile = cpu_alloca(k, tile_ty);
  LLVMSetAlignment(tile, 64);
  /* block sizes actually used (as gm_pack_bytes) */
  LLVMValueRef M = P[GP_M], N = P[GP_N], K = P[GP_K];
  LLVMValueRef kcb = gmin(k, gi(k, c.kc), K);
  /* B first (its size depends on N and K only, so calls with B kept find it where it was
     packed), then the A block, 64-byte aligned (the micro-kernel's aligned loads) */
  LLVMValueRef ncr = gmul(k, LLVMBuildSDiv(k->B, gadd(k, gmin(k, N, gi(k, c.nc)), gi(k, c.nr - 1)), gi(k, c.nr), ""), gi(k, c.nr));
  LLVMValueRef res = !has_conv ? LLVMConstInt(cg->i1, 0, 0)
                   : LLVMBuildAnd(k->B, LLVMBuildIsNotNull(k->B, P[GP_CONV], ""),
                                  LLVMBuildICmp(k->B, LLVMIntSLE, gmul(k, K, ncr), gi(k, GM_RESIDENT), ""), "");
  LLVMValueRef belems = gmul(k, LLVMBuildSelect(k->B, res, K, kcb, ""), ncr);
  LLVMValueRef bp = P[GP_PACK];
  /* (a B packed beforehand takes no room: A's block at the start) */
  LLVMValueRef boff = LLVMBuildAnd(k->B, gadd(k, belems, gi(k, 15)), gi(k, ~(int64_t)15), "");
  LLVMValueRef ap = gfp(k, bp, LLVMBuildSelect(k->B, LLVMBuildIsNotNull(k->B, P[GP_BPRE], ""), gi(k, 0), boff, ""));
  /* B resident (whole K of a column block packed once, blocks at bp + pc * ncr): row blocks
     outermost, every K block of one before the next, so its C block stays in cache and is
     finished before moving on; else the K blocks outermost with B packed per block */
  LLVMValueRef keep = LLVMBuildAnd(k->B, res, LLVMBuildICmp(k->B, LLVMIntNE, P[GP_BKEEP], gi(k, 0), ""), "");
  CpuLoop ljc, lio, lpc, lic, lout, lin;
  LLVMValueRef jc = gloop(k, &ljc, gi(k, 0), N, c.nc);
  LLVMValueRef nc = gmin(k, gi(k, c.nc), gsub(k, N, jc));
  LLVMValueRef io = gloop(k, &lio, gi(k, 0), LLVMBuildSelect(k->B, res, M, gi(k, 1), ""), c.mc);
  LLVMValueRef kstep = gm_kstep_ir(k, &c, K);
  LLVMValueRef pc = cpu_loop_open_step(k, &lpc, gi(k, 0), K, kstep);
  LLVMValueRef kc = gmin(k, kstep, gsub(k, K, pc));
  LLVMValueRef first = LLVMBuildICmp(k->B, LLVMIntEQ, pc, gi(k, 0), "");
  LLVMValueRef bpc = LLVMBuildSelect(k->B, res, gfp(k, bp, gmul(k, pc, ncr)), bp, "");
  /* B packed beforehand (shared by the chunks of a split product): its block in place */
  LLVMValueRef pre = LLVMBuildIsNotNull(k->B, P[GP_BPRE], "");
  LLVMValueRef ncrj = LLVMBuildAnd(k->B, gadd(k, nc, gi(k, c.nr - 1)), gi(k, ~(int64_t)(c.nr - 1)), "");
  bpc = LLVMBuildSelect(k->B, pre, gfp(k, P[GP_BPRE], gadd(k, gmul(k, jc, K), gmul(k, pc, ncrj))), bpc, "");
  {
    /* packed here unless given, or resident and (kept from the last call or packed for an
       earlier row block) */
    LLVMValueRef skip = LLVMBuildAnd(k->B, res, LLVMBuildOr(k->B, keep, LLVMBuildICmp(k->B, LLVMIntNE, io, gi(k, 0), ""), ""), "");
    skip = LLVMBuildOr(k->B, skip, pre, "");
    GIf pb;
    gif_open(k, &pb, LLVMBuildNot(k->B, skip, ""), false);
    gm_call_step(k, GS_PACK_B, P, bpc, pc, kc, jc, nc);
    gif_close(k, &pb);
  }
  LLVMValueRef ic = gloop(k, &lic, io, LLVMBuildSelect(k->B, res, gmin(k, M, gadd(k, io, gi(k, c.mc))), M, ""), c.mc);
  LLVMValueRef mc = gmin(k, gi(k, c.mc), gsub(k, M, ic));
  /* A from a strided matrix, or (conv != NULL) from a convolution input, or packed
     beforehand (shared by the chunks of a split product): its block in place */
  LLVMValueRef apre = LLVMBuildIsNotNull(k->B, P[GP_APRE], "");
  LLVMValueRef mcr = LLVMBuildMul(k->B, LLVMBuildSDiv(k->B, gadd(k, mc, gi(k, c.mr - 1)), gi(k, c.mr), ""), gi(k, c.mr), "");
  LLVMValueRef apc = LLVMBuildSelect(k->B, apre, gfp(k, P[GP_APRE], gadd(k, gmul(k, ic, K), gmul(k, pc, mcr))), ap, "");
  GIf pk, pn;
  if (has_conv && has_dot) gif_open(k, &pk, LLVMBuildIsNotNull(k->B, P[GP_CONV], ""), true);
  if (has_conv) gm_call_step(k, GS_PACK_CONV, P, ap, ic, mc, pc, kc);
  if (has_conv && has_dot) gif_else(k, &pk);
  if (has_dot) {
    gif_open(k, &pn, LLVMBuildNot(k->B, apre, ""), false);
    gm_call_step(k, GS_PACK_A, P, ap, ic, mc, pc, kc);
    gif_close(k, &pn);
  }
  if (has_conv && has_dot) gif_close(k, &pk);
  /* which panels of the block are convolution panels inside the image (gm_direct_panel), read
     in place: decided once per block, not per column panel; flags 0 for a plain product */
  LLVMValueRef pok = NULL, poff = NULL, prs = NULL;
  bool direct = c.direct && has_conv;
  if (direct) {
    LLVMTypeRef at = LLVMArrayType2(cg->i64, (uint64_t)(c.mc / c.mr));
    pok = cpu_alloca(k, at);
    poff = cpu_alloca(k, at);
    prs = gvar(k, gi(k, 0));
    CpuLoop lp;
    LLVMValueRef i2 = gloop(k, &lp, gi(k, 0), mc, c.mr);
    LLVMValueRef slot = LLVMBuildSDiv(k->B, i2, gi(k, c.mr), "");
    LLVMValueRef okp = LLVMBuildInBoundsGEP2(k->B, cg->i64, pok, &slot, 1, "");
    LLVMValueRef offp = LLVMBuildInBoundsGEP2(k->B, cg->i64, poff, &slot, 1, "");
    LLVMBuildStore(k->B, gi(k, 0), okp);
    LLVMBuildStore(k->B, gi(k, 0), offp);
    GIf fc;
    gif_open(k, &fc, LLVMBuildIsNotNull(k->B, P[GP_CONV], ""), false);
    {
      LLVMValueRef g[GC_COUNT], off, rs;
      gm_conv_geom(k, P, g);
      LLVMValueRef mrv2 = gmin(k, gi(k, c.mr), gsub(k, mc, i2));
      LLVMValueRef ok = gm_direct_panel(k, &c, P, g, gadd(k, gadd(k, ic, i2), g[GC_M0]), mrv2, &off, &rs);
      LLVMBuildStore(k->B, LLVMBuildZExt(k->B, ok, cg->i64, ""), okp);
      LLVMBuildStore(k->B, off, offp);
      LLVMBuildStore(k->B, rs, prs);
    }
    gif_close(k, &fc);
    gm_close(k, &lp);
  }
  /* the block's micro-tiles: row panels outer (GmCfg.order 1) or column panels outer */
  LLVMValueRef outer = c.order ? gloop(k, &lout, gi(k, 0), mc, c.mr) : gloop(k, &lout, gi(k, 0), nc, c.nr);
  LLVMValueRef inner = c.order ? gloop(k, &lin, gi(k, 0), nc, c.nr) : gloop(k, &lin, gi(k, 0), mc, c.mr);
  LLVMValueRef ir = c.order ? outer : inner, jr = c.order ? inner : outer;
  LLVMValueRef nrv = gmin(k, gi(k, c.nr), gsub(k, nc, jr));
  LLVMValueRef mrv = gmin(k, gi(k, c.mr), gsub(k, mc, ir));
  LLVMValueRef cp = gfp(k, P[GP_C], gadd(k, gmul(k, gadd(k, ic, ir), P[GP_LDC]), gadd(k, jc, jr)));
  LLVMValueRef bpj = gfp(k, bpc, gmul(k, jr, kc));
  GmDirect dat, *dr = NULL;
  if (direct) {
    LLVMValueRef slot = LLVMBuildSDiv(k->B, ir, gi(k, c.mr), "");
    LLVMValueRef ok = LLVMBuildLoad2(k->B, cg->i64, LLVMBuildInBoundsGEP2(k->B, cg->i64, pok, &slot, 1, ""), "");
    LLVMValueRef off = LLVMBuildLoad2(k->B, cg->i64, LLVMBuildInBoundsGEP2(k->B, cg->i64, poff, &slot, 1, ""), "");
    dat = (GmDirect){P, LLVMBuildICmp(k->B, LLVMIntNE, ok, gi(k, 0), ""), off, gget(k, prs), pc};
    dr = &dat;
  }
  LLVMValueRef pfl = c.pfb ? gm_next_lines(k, &c, P, bpc, bpj, kc, ncrj, ic, ir, jr) : NULL;
  gm_micro(k, &c, gfp(k, apc, gmul(k, ir, kc)), dr, bpj, kc, cp, P[GP_LDC], mrv, nrv, first, tile, pfl);
  gm_close(k, &lin);
  gm_close(k, &lout);
  gm_close(k, &lic);
  gm_close(k, &lpc);
  gm_close(k, &lio);
  gm_close(k, &ljc);
  /* K == 0: C = 0 */
  GIf z;
  gif_open(k, &z, LLVMBuildICmp(k->B, LLVMIntSLE, K, gi(k, 0), ""), false);
  {
    CpuLoop lm, ln;
    LLVMValueRef m = gloop(k, &lm, gi(k, 0), M, 1);
    LLVMValueRef n = gloop(k, &ln, gi(k, 0), N, 1);
    gstore(k, LLVMConstReal(cg->f32, 0.0), gfp(k, P[GP_C], gadd(k, gmul(k, m, P[GP_LDC]), n)), 4);
    gm_close(k, &ln);
    gm_close(k, &lm);
  }
  gif_close(k, &z);
  LLVMBuildRetVoid(k->B);
  if (saved) LLVMPositionBuilderAtEnd(cg->B, saved);
  *slot = fn;
  return fn;
}

/* Parameters of the operand-packing functions. */
enum { GB_X, GB_RS, GB_CS, GB_N, GB_K, GB_DST, GB_KB0, GB_KB1, GB_COUNT };

/* The functions of the module (made once each) that pack a whole operand of a product ahead
 * of the GEMM: K blocks [kb0, kb1) of every column block of an N-column B (b) into dst, laid
 * out as the GEMM function reads a given B (GP_BPRE): column block jc (NC wide, the last one
 * rounded up to NR) and K block pc (gm_kstep deep) at dst + jc * K + pc * roundup(nc, NR); or
 * the same of every row block of an N-row A (!b, GP_APRE: row block ic, MC tall, at
 * dst + ic * K + pc * roundup(mc, MR)). A product split into chunks that would each pack the
 * same operand packs it once with these, in a kernel of its own whose chunks share the K
 * blocks, instead. */
static LLVMValueRef gm_packx_function(CpuCg *cg, bool b) {
  LLVMValueRef *slot = b ? &cg->gemm_packb_fn : &cg->gemm_packa_fn;
  if (*slot) return *slot;
  GmCfg c = gm_cfg(cg);
  char name[512];
  snprintf(name, sizeof name, "%s_gemm_pack%c_f32", gm_prefix(cg), b ? 'b' : 'a');
  LLVMTypeRef ps[GB_COUNT];
  for (int j = 0; j < GB_COUNT; j++) ps[j] = cg->i64;
  ps[GB_X] = ps[GB_DST] = cg->ptr;
  if (gm_declared(cg, slot, name, LLVMFunctionType(cg->vd, ps, GB_COUNT, 0))) return *slot;
  /* one call per chunk: kept a function, shared by the products of the module; the packing
     itself is the GEMM's step function (the other GEMM arguments are not read by it) */
  gm_step_function(cg, b ? GS_PACK_B : GS_PACK_A);
  LLVMBasicBlockRef saved = LLVMGetInsertBlock(cg->B);
  CpuKern *k = gm_fn_begin(cg, name, LLVMFunctionType(cg->vd, ps, GB_COUNT, 0));
  LLVMValueRef fn = k->fn;
  gm_mark(fn, &c);
  LLVMValueRef Q[GB_COUNT], P[GP_COUNT + 5];
  LLVMTypeRef sps[GP_COUNT + 5];
  LLVMGetParamTypes(gm_step_type(cg), sps);
  for (int j = 0; j < GP_COUNT; j++) P[j] = LLVMConstNull(sps[j]);
  for (int j = 0; j < GB_COUNT; j++) Q[j] = LLVMGetParam(fn, (unsigned)j);
  P[b ? GP_B : GP_A] = Q[GB_X];
  P[b ? GP_BRS : GP_ARS] = Q[GB_RS];
  P[b ? GP_BCS : GP_ACS] = Q[GB_CS];
  LLVMValueRef N = Q[GB_N], K = Q[GB_K];
  LLVMValueRef kstep = gm_kstep_ir(k, &c, K);
  int64_t blk = b ? c.nc : c.mc, rnd = b ? c.nr : c.mr;
  CpuLoop lj, lkb;
  LLVMValueRef j0 = gloop(k, &lj, gi(k, 0), N, blk);
  LLVMValueRef nj = gmin(k, gi(k, blk), gsub(k, N, j0));
  LLVMValueRef njr = LLVMBuildMul(k->B, LLVMBuildSDiv(k->B, gadd(k, nj, gi(k, rnd - 1)), gi(k, rnd), ""), gi(k, rnd), "");
  LLVMValueRef kb = gloop(k, &lkb, Q[GB_KB0], Q[GB_KB1], 1);
  LLVMValueRef pc = gmul(k, kb, kstep);
  GIf in;
  gif_open(k, &in, gslt(k, pc, K), false);
  LLVMValueRef kc = gmin(k, kstep, gsub(k, K, pc));
  LLVMValueRef dst = gfp(k, Q[GB_DST], gadd(k, gmul(k, j0, K), gmul(k, pc, njr)));
  if (b) gm_call_step(k, GS_PACK_B, P, dst, pc, kc, j0, nj);
  else gm_call_step(k, GS_PACK_A, P, dst, j0, nj, pc, kc);
  gif_close(k, &in);
  gm_close(k, &lkb);
  gm_close(k, &lj);
  LLVMBuildRetVoid(k->B);
  if (saved) LLVMPositionBuilderAtEnd(cg->B, saved);
  *slot = fn;
  return fn;
}

/* ------------------------------------------------------------------ operand views */

/* value(idx) = base[off + sum idx[d] * st[d]] (f32 elements). */
typedef struct GmView {
  const HInstr *base; /* entry instruction (buffer) or fused constant (global) */
  bool global;        /* base is a fused constant: read its literal's global */
  int64_t staged;     /* >= 0: the value was staged row-major in kernel-private scratch at
                         this offset from the private area (base unused) */
  int64_t off;        /* element offset */
  int64_t st[HLO_MAX_RANK]; /* element strides per dimension of the value */
} GmView;

static void gm_rowmajor(const Shape *s, int64_t *st) { hlo_shape_strides(s, st); }

static bool gm_view(const CpuCg *cg, const HInstr *fusion, const HInstr *v, GmView *out, int depth) {
  if (depth > 32 || v->shape.dt != DT_F32 || v->shape.rank > HLO_MAX_RANK) return false;
  if (v->parent == cg->entry) {
    if (v->shape.dt == DT_TUPLE) return false;
    *out = (GmView){v, false, -1, 0, {0}};
    gm_rowmajor(&v->shape, out->st);
    return true;
  }
  if (!fusion || v->parent != fusion->calls[0]) return false;
  GmView o;
  const Shape *s = &v->shape;
  /* the few ops that only re-index (an if chain: every other op is not a view) */
  if (v->op == OP_PARAMETER) {
    if (v->param_num < 0 || v->param_num >= fusion->nops) return false;
    return gm_view(cg, fusion, fusion->ops[v->param_num], out, depth + 1);
  }
  if (v->op == OP_CONSTANT) {
    if (!v->literal || s->rank == 0) return false;
    *out = (GmView){v, true, -1, 0, {0}};
    gm_rowmajor(s, out->st);
    return true;
  }
  if (v->op == OP_COPY) return gm_view(cg, fusion, v->ops[0], out, depth + 1);
  if (v->op == OP_TRANSPOSE) {
    if (!gm_view(cg, fusion, v->ops[0], &o, depth + 1)) return false;
    *out = o;
    for (int j = 0; j < s->rank; j++) out->st[j] = o.st[v->dims.v[j]];
    return true;
  }
  if (v->op == OP_BROADCAST) {
    if (!gm_view(cg, fusion, v->ops[0], &o, depth + 1)) return false;
    *out = o;
    for (int d = 0; d < s->rank; d++) out->st[d] = 0;
    for (int j = 0; j < v->dims.n; j++) out->st[v->dims.v[j]] = o.st[j];
    return true;
  }
  if (v->op == OP_SLICE) {
    if (!gm_view(cg, fusion, v->ops[0], &o, depth + 1)) return false;
    *out = o;
    for (int d = 0; d < s->rank; d++) {
      out->off += v->slice->start[d] * o.st[d];
      out->st[d] = o.st[d] * v->slice->stride[d];
    }
    return true;
  }
  if (v->op == OP_RESHAPE || v->op == OP_BITCAST) {
    if (!gm_view(cg, fusion, v->ops[0], &o, depth + 1)) return false;
    const Shape *os = &v->ops[0]->shape;
    int64_t rm[HLO_MAX_RANK];
    gm_rowmajor(os, rm);
    bool contiguous = true;
    for (int d = 0; d < os->rank; d++) contiguous = contiguous && (os->dims[d] == 1 || o.st[d] == rm[d]);
    *out = o;
    if (contiguous) {
      gm_rowmajor(s, out->st);
      return true;
    }
    /* only size-1 dimensions added or removed */
    int a = 0, b = 0;
    while (a < s->rank || b < os->rank) {
      if (a < s->rank && s->dims[a] == 1) { out->st[a++] = 0; continue; }
      if (b < os->rank && os->dims[b] == 1) { b++; continue; }
      if (a < s->rank && b < os->rank && s->dims[a] == os->dims[b]) { out->st[a++] = o.st[b++]; continue; }
      return false;
    }
    return true;
  }
  return false;
}

/* An operand: a view, or (inside a fusion) a value to stage first (staged == -2, base the
 * fused instruction, row-major strides). */
static bool gm_operand(const CpuCg *cg, const HInstr *fusion, const HInstr *v, bool stage, GmView *out) {
  if (!stage && gm_view(cg, fusion, v, out, 0)) return true;
  if (v->shape.dt != DT_F32 || !(v->parent == cg->entry || (fusion && v->parent == fusion->calls[0])))
    return false;
  *out = (GmView){v, false, -2, 0, {0}};
  gm_rowmajor(&v->shape, out->st);
  return true;
}

/* Merge dims list[0..n) of a view (sizes from ext) into one strided dimension: the stride of
 * the last one, when each stride is the next one's times its extent. */
static bool gm_merge(const int64_t *st, const int64_t *ext, const int64_t *list, int n, int64_t *stride) {
  int64_t keep[HLO_MAX_RANK];
  int nk = 0;
  for (int j = 0; j < n; j++)
    if (ext[list[j]] != 1) keep[nk++] = list[j];
  *stride = nk ? st[keep[nk - 1]] : 0;
  for (int j = 0; j + 1 < nk; j++)
    if (st[keep[j]] != st[keep[j + 1]] * ext[keep[j + 1]]) return false;
  return true;
}

/* ------------------------------------------------------------------ the kernels */

static LLVMValueRef gm_view_ptr(CpuKern *k, const GmView *v) {
  LLVMValueRef p = v->staged >= 0 ? cpu_slot(k, (CpuSlot){CPU_SLOT_TEMP, NULL, NULL, k->cg->temp_base + v->staged})
                   : v->global ? cpu_const_ptr(k, v->base) : cpu_buffer(k, v->base);
  if (v->off == 0) return p;
  LLVMBasicBlockRef cur = LLVMGetInsertBlock(k->B);
  LLVMPositionBuilderBefore(k->B, k->entry_br);
  p = gfp(k, p, gi(k, v->off));
  LLVMPositionBuilderAtEnd(k->B, cur);
  return p;
}

/* A GEMM problem: loop dims (with the strides of their index in A, B, C), then M x N x K. */
typedef struct GmProb {
  int nloop;                    /* looped dimensions (batch, unmerged lhs free) */
  int64_t lext[HLO_MAX_RANK];   /* their extents */
  int64_t lsa[HLO_MAX_RANK], lsb[HLO_MAX_RANK], lsc[HLO_MAX_RANK]; /* their strides in A, B, C */
  int lout[HLO_MAX_RANK];       /* their output dimension */
  int64_t M, N, K;              /* product sizes */
  int64_t ars, acs, brs, bcs, ldc; /* strides */
  int mdim0, nm;                /* output dims of the merged M: [mdim0, mdim0 + nm) */
  int ndim0, nn;                /* output dims of N: [ndim0, ndim0 + nn) */
  bool conv;                    /* implicit-GEMM convolution */
  int64_t geo[GC_COUNT];        /* convolution geometry */
  int64_t xsb;                  /* convolution: input batch stride (elements) */
  bool wino;                    /* convolution through Winograd (gm_winograd): B need not merge */
  int64_t wk[4];                /* convolution: strides of (kh, kw, ci, co) in B's view */
  GmView a, b;                  /* operand views */
} GmProb;

static bool gm_has(const IList *l, int64_t v) {
  for (int i = 0; i < l->n; i++)
    if (l->v[i] == v) return true;
  return false;
}

static bool gm_dot_prob(CpuCg *cg, const HInstr *fusion, const HInstr *dot, int stage, GmProb *p) {
  const DotDims *dd = dot->dot;
  const HInstr *l = dot->ops[0], *r = dot->ops[1];
  if (dot->shape.dt != DT_F32 || l->shape.dt != DT_F32 || r->shape.dt != DT_F32) return false;
  if (!gm_operand(cg, fusion, l, stage & 1, &p->a) || !gm_operand(cg, fusion, r, stage & 2, &p->b)) return false;
  const Shape *ls = &l->shape, *rs = &r->shape, *os = &dot->shape;
  int64_t ost[HLO_MAX_RANK];
  gm_rowmajor(os, ost);
  int64_t lf[HLO_MAX_RANK], rf[HLO_MAX_RANK];
  int nlf = 0, nrf = 0;
  for (int d = 0; d < ls->rank; d++)
    if (!gm_has(&dd->lhs_batch, d) && !gm_has(&dd->lhs_contract, d)) lf[nlf++] = d;
  for (int d = 0; d < rs->rank; d++)
    if (!gm_has(&dd->rhs_batch, d) && !gm_has(&dd->rhs_contract, d)) rf[nrf++] = d;
  /* K */
  int nc = dd->lhs_contract.n;
  if (!gm_merge(p->a.st, ls->dims, dd->lhs_contract.v, nc, &p->acs)) return false;
  if (!gm_merge(p->b.st, rs->dims, dd->rhs_contract.v, nc, &p->brs)) return false;
  p->K = 1;
  for (int j = 0; j < nc; j++) p->K *= ls->dims[dd->lhs_contract.v[j]];
  /* N */
  if (!gm_merge(p->b.st, rs->dims, rf, nrf, &p->bcs)) return false;
  p->N = 1;
  for (int j = 0; j < nrf; j++) p->N *= rs->dims[rf[j]];
  int nb = dd->lhs_batch.n;
  p->ndim0 = nb + nlf;
  p->nn = nrf;
  p->ldc = p->N;
  /* M: the longest mergeable suffix of the lhs free dims */
  int first = nlf;
  while (first > 0 && gm_merge(p->a.st, ls->dims, lf + first - 1, nlf - first + 1, &p->ars)) first--;
  if (!gm_merge(p->a.st, ls->dims, lf + first, nlf - first, &p->ars)) return false;
  p->M = 1;
  for (int j = first; j < nlf; j++) p->M *= ls->dims[lf[j]];
  p->mdim0 = nb + first;
  p->nm = nlf - first;
  p->nloop = 0;
  for (int j = 0; j < nb; j++) {
    int q = p->nloop++;
    p->lext[q] = ls->dims[dd->lhs_batch.v[j]];
    p->lsa[q] = p->a.st[dd->lhs_batch.v[j]];
    p->lsb[q] = p->b.st[dd->rhs_batch.v[j]];
    p->lsc[q] = ost[j];
    p->lout[q] = j;
  }
  for (int j = 0; j < first; j++) {
    int q = p->nloop++;
    p->lext[q] = ls->dims[lf[j]];
    p->lsa[q] = p->a.st[lf[j]];
    p->lsb[q] = 0;
    p->lsc[q] = ost[nb + j];
    p->lout[q] = nb + j;
  }
  p->conv = false;
  return true;
}

static bool gm_conv_prob(CpuCg *cg, const HInstr *fusion, const HInstr *cv, int stage, bool wino, GmProb *p) {
  const ConvDims *cd = cv->conv;
  const HInstr *x = cv->ops[0], *w = cv->ops[1];
  if (cv->shape.dt != DT_F32 || x->shape.dt != DT_F32 || w->shape.dt != DT_F32) return false;
  if (cd->in_sp.n != 2 || cv->feature_groups != 1 || cv->batch_groups != 1) return false;
  for (int j = 0; j < 2; j++) {
    const WinDim *wd = &cv->window->d[j];
    if (wd->base_dil != 1 || wd->reversal || wd->pad_lo < 0 || wd->pad_hi < 0) return false;
  }
  if (!gm_operand(cg, fusion, x, stage & 1, &p->a) || !gm_operand(cg, fusion, w, stage & 2, &p->b)) return false;
  /* an input whose channels are not contiguous (NCHW seen as NHWC) is read in place: the
     packer's runs step through channels with their stride, its MR rows (neighbouring
     pixels) sharing cache lines; cheaper than a staged copy of the whole input */
  const Shape *xs = &x->shape, *ws = &w->shape, *os = &cv->shape;
  int64_t ost[HLO_MAX_RANK];
  gm_rowmajor(os, ost);
  int64_t CI = ws->dims[cd->k_in], CO = ws->dims[cd->k_out];
  int64_t KH = ws->dims[cd->k_sp.v[0]], KW = ws->dims[cd->k_sp.v[1]];
  /* B = weights as [(kh, kw, ci), co]: strides must flatten */
  int64_t kl[3] = {cd->k_sp.v[0], cd->k_sp.v[1], cd->k_in};
  for (int j = 0; j < 3; j++) p->wk[j] = p->b.st[kl[j]];
  p->wk[3] = p->b.st[cd->k_out];
  /* (Winograd reads the taps through their own strides: OIHW weights need no staging) */
  p->wino = wino;
  if (!gm_merge(p->b.st, ws->dims, kl, 3, &p->brs) && !wino) return false;
  p->bcs = p->b.st[cd->k_out];
  /* C: feature minor with unit stride, (oh, ow) flatten */
  if (ost[cd->out_feat] != 1) return false;
  int64_t ol[2] = {cd->out_sp.v[0], cd->out_sp.v[1]};
  int64_t OH = os->dims[ol[0]], OW = os->dims[ol[1]];
  if ((OW != 1 && ost[ol[1]] != CO) || (OH != 1 && ost[ol[0]] != OW * CO)) return false;
  int64_t NB = os->dims[cd->out_batch];
  p->M = OH * OW;
  p->N = CO;
  p->K = KH * KW * CI;
  p->ldc = CO;
  p->ars = p->acs = 0;
  p->mdim0 = (int)ol[0];
  p->nm = 2;
  p->ndim0 = (int)cd->out_feat;
  p->nn = 1;
  p->conv = true;
  /* rows span the batch when the output is [batch, oh, ow, feature] row-major: one GEMM
     over all images packs the kernel once (a weight-gradient convolution has a few output
     pixels per "image" and a huge K); else the batch is a loop */
  bool merge = cd->out_batch + 1 == ol[0] && ol[0] + 1 == ol[1] && (NB == 1 || ost[cd->out_batch] == OH * OW * CO);
  if (merge) {
    p->M = NB * OH * OW;
    p->mdim0 = (int)cd->out_batch;
    p->nm = 3;
    p->nloop = 0;
  } else {
    p->nloop = 1;
    p->lext[0] = NB;
    p->lsa[0] = p->a.st[cd->in_batch];
    p->lsb[0] = 0;
    p->lsc[0] = ost[cd->out_batch];
    p->lout[0] = (int)cd->out_batch;
  }
  int64_t g[GC_COUNT] = {
      [GC_OW] = os->dims[ol[1]], [GC_H] = xs->dims[cd->in_sp.v[0]], [GC_W] = xs->dims[cd->in_sp.v[1]],
      [GC_CI] = CI, [GC_KW] = KW, [GC_SH] = cv->window->d[0].stride, [GC_SW] = cv->window->d[1].stride,
      [GC_DH] = cv->window->d[0].win_dil, [GC_DW] = cv->window->d[1].win_dil,
      [GC_PH] = cv->window->d[0].pad_lo, [GC_PW] = cv->window->d[1].pad_lo,
      [GC_XSH] = p->a.st[cd->in_sp.v[0]], [GC_XSW] = p->a.st[cd->in_sp.v[1]], [GC_XSC] = p->a.st[cd->in_feat],
      [GC_OHW] = OH * OW, [GC_XSB] = merge ? p->a.st[cd->in_batch] : 0};
  memcpy(p->geo, g, sizeof g);
  /* the output dims must be exactly batch, (oh, ow) merged, feature: others have extent 1 */
  for (int d = 0; d < os->rank; d++)
    if (d != cd->out_batch && d != cd->out_feat && d != ol[0] && d != ol[1] && os->dims[d] != 1) return false;
  return true;
}

/* Stage operand v of the hero of entry instruction `fusion` (a fusion, or the dot/convolution
 * itself) row-major into kernel-private scratch at byte offset off of the private area: a
 * fused computation that is not a plain view (a layer normalization feeding a dot), or a view
 * whose strides do not merge (OIHW weights of a convolution, an NCHW input). A kernel of its
 * own, split over its first dimension, run before the GEMM kernel. */
static bool gm_stage(CpuCg *cg, HInstr *fusion, const HInstr *v, int64_t off, GmView *out) {
  const Shape *s = &v->shape;
  CpuKern *k = cpu_kern_begin(cg, fusion);
  if (fusion->op == OP_FUSION && v->parent != cg->entry)
    k->bind[k->nbind++] = (CpuBind){fusion->calls[0], fusion, NULL, 0, 0};
  LLVMValueRef dst = cpu_slot(k, (CpuSlot){CPU_SLOT_TEMP, NULL, NULL, cg->temp_base + off});
  int64_t min = cg->o->par_min_elems > 0 ? cg->o->par_min_elems : 32768;
  int64_t d0 = s->rank > 0 ? s->dims[0] : 1;
  int64_t nch = hlo_shape_elems(s) < min ? 1 : d0 < 8 ? d0 : 8;
  if (nch < 1) nch = 1;
  CpuLoop loops[HLO_MAX_RANK];
  LLVMValueRef idx[HLO_MAX_RANK];
  int nl = 0;
  for (int d = 0; d < s->rank; d++) {
    LLVMValueRef lo = gi(k, 0), hi = gi(k, s->dims[d]);
    if (d == 0 && nch > 1) {
      lo = LLVMBuildSDiv(k->B, gmul(k, k->chunk, gi(k, d0)), gi(k, nch), "");
      hi = LLVMBuildSDiv(k->B, gmul(k, gadd(k, k->chunk, gi(k, 1)), gi(k, d0)), gi(k, nch), "");
    }
    idx[d] = gloop(k, &loops[nl++], lo, hi, 1);
  }
  LLVMValueRef val = cpu_gen(k, v, idx);
  if (val) cpu_store_elem(k, dst, s, idx, val);
  for (int j = nl - 1; j >= 0; j--) cpu_loop_close(k, &loops[j]);
  if (!cpu_kern_end(k, nch)) return false;
  cg->tasks[cg->ntasks - 1].note = "operand staged";
  *out = (GmView){NULL, false, off, 0, {0}};
  gm_rowmajor(s, out->st);
  return true;
}

/* The K x N matrix B (element (k, n) at src[k * rs + n * cs]) in the layout of a B packed
 * beforehand (GP_BPRE) for nnb column blocks of nblk columns, K blocks kstep deep, into dst
 * (zeroed by the caller: the panels' columns past N stay zero). */
static void gm_panels(const GmCfg *c, const float *src, int64_t rs, int64_t cs, int64_t K, int64_t N, int64_t nblk,
                      int64_t nnb, int64_t kstep, float *dst) {
  int64_t NR = c->nr;
  for (int64_t ni = 0; ni < nnb; ni++) {
    int64_t n0 = ni * nblk, ncall = gm_min(nblk, N - n0), ncr = gm_roundup(ncall, NR);
    for (int64_t pc = 0; pc < K; pc += kstep) {
      int64_t kc = gm_min(kstep, K - pc);
      float *blk = dst + n0 * K + pc * ncr;
      for (int64_t jr = 0; jr < ncr; jr += NR)
        for (int64_t kk = 0; kk < kc; kk++)
          for (int64_t cc = 0; cc < NR && jr + cc < ncall; cc++)
            blk[jr * kc + kk * NR + cc] = src[(pc + kk) * rs + (n0 + jr + cc) * cs];
    }
  }
}

/* The floats of view v when it reads a constant literal in place (frozen weights: what the
 * dots' constant B and Winograd's constant taps are made from at compile time), else NULL. */
static const float *gm_view_const(const GmView *v) {
  if (v->staged != -1 || !v->base || v->base->op != OP_CONSTANT || !v->base->literal || v->base->shape.dt != DT_F32 ||
      getenv("HLOC_CPU_GEMM_NO_CONST_PACK"))
    return NULL;
  return (const float *)v->base->literal->data + v->off;
}

/* A constant B (frozen weights) packed at compile time into read-only data, in the layout of
 * a B packed beforehand (GP_BPRE) for the column blocks of the items (nnb blocks of nblk
 * columns from column 0; each a single column block of the GEMM function, nblk <= NC): block
 * n0 at n0 * K, its K blocks (kstep deep, as gm_kstep) at pc * roundup(ncall, NR), NR-wide
 * panels kc deep within, zero columns past the block. Every call then reads B in place and
 * packs nothing (mlp: B's packing is an eighth of its run time). NULL when B is not a
 * constant literal read in place. */
static LLVMValueRef gm_const_packed_b(CpuCg *cg, const GmCfg *c, const GmProb *p, int64_t nblk, int64_t nnb,
                                      int64_t kstep) {
  const float *src = gm_view_const(&p->b);
  if (!src || p->K < 1 || p->N < 1) return NULL;
  int64_t K = p->K, N = p->N, NR = c->nr;
  int64_t total = (nnb > 1 ? nnb * nblk : gm_roundup(N, NR)) * K;
  float *buf = hlo_arena_alloc(cg->scratch, sizeof(float) * (size_t)total);
  memset(buf, 0, sizeof(float) * (size_t)total);
  gm_panels(c, src, p->brs, p->bcs, K, N, nblk, nnb, kstep, buf);
  char name[512];
  snprintf(name, sizeof name, "%s_cb%d", cg->o->name, cg->ntasks);
  return cpu_rodata(cg, name, buf, sizeof(float) * (size_t)total);
}

/* The byte offset in the packed weights (NAME_pack) of B of product p (no batch) when B is an
 * entry parameter read in place by the entry's kernels (not one a result may alias: the run would
 * change it; gm_pack_param: that parameter, else -1), packed for nnb column blocks of nblk
 * columns, or for a Winograd convolution its taps transformed (as GW_U does); -1 otherwise. A B
 * already registered with the same view and blocks (a weight two products share) keeps its
 * place. */
static int gm_pack_param(const CpuCg *cg, const GmProb *p) {
  const GmView *v = &p->b;
  if ((p->conv && !p->wino) || v->staged != -1 || v->global || !v->base || v->base->op != OP_PARAMETER ||
      v->base->parent != cg->entry || cg->region != &cg->entry_region || p->K < 1 || p->N < 1 ||
      getenv("HLOC_CPU_NO_PACKED_WEIGHTS"))
    return -1;
  int64_t boff = 0;
  const MemBuf *mb = &cg->plan.bufs[memplan_base(&cg->plan, v->base->idx, &boff)];
  if (mb->kind != MEM_PARAM || boff != 0) return -1;
  for (int r = 0; r < cg->plan.nresults; r++)
    if (cg->plan.results[r].alias_param == mb->param) return -1;
  return (int)mb->param;
}

static int64_t gm_pack_job(CpuCg *cg, const GmProb *p, int64_t nblk, int64_t nnb) {
  int param = gm_pack_param(cg, p);
  if (param < 0) return -1;
  const GmView *v = &p->b;
  int kind = p->wino ? 1 : 0;
  int64_t K = p->wino ? p->geo[GC_CI] : p->K, NR = gm_cfg(cg).nr;
  int64_t wk[4] = {0};
  if (p->wino) memcpy(wk, p->wk, sizeof wk);
  for (int i = 0; i < cg->npacks; i++) {
    const CpuPackJob *j = &cg->packs[i];
    if (j->kind == kind && j->param == param && j->off == v->off && j->rs == p->brs && j->cs == p->bcs && j->K == K &&
        j->N == p->N && j->nblk == nblk && j->nnb == nnb && !memcmp(j->wk, wk, sizeof wk))
      return j->dst;
  }
  if (cg->npacks == cg->pack_cap) {
    int nc = cg->pack_cap ? 2 * cg->pack_cap : 8;
    CpuPackJob *np = hlo_arena_alloc(cg->scratch, sizeof *np * (size_t)nc);
    if (cg->npacks) memcpy(np, cg->packs, sizeof *np * (size_t)cg->npacks);
    cg->packs = np;
    cg->pack_cap = nc;
  }
  int64_t floats = kind ? 16 * K * gm_roundup(p->N, NR) : (nnb > 1 ? nnb * nblk : gm_roundup(p->N, NR)) * K;
  CpuPackJob *j = &cg->packs[cg->npacks++];
  *j = (CpuPackJob){kind, param, v->off, p->brs, p->bcs, K, p->N, nblk, nnb, cg->packed_bytes, {wk[0], wk[1], wk[2], wk[3]}};
  cg->packed_bytes += memplan_align(floats * 4);
  return j->dst;
}

/* The caller's packed weights as a kernel sees them (CPU_SLOT_PACKED: NULL when the run was
 * given none), or NULL when the operand has no place there (pk_off < 0). */
static LLVMValueRef gm_packed_base(CpuKern *k, int64_t pk_off) {
  return pk_off >= 0 ? cpu_slot(k, (CpuSlot){CPU_SLOT_PACKED, NULL, NULL, 0}) : NULL;
}

/* Element eoff of the operand's place at byte pk_off of the packed weights base when the run
 * was given them, else other. */
static LLVMValueRef gm_or_packed(CpuKern *k, LLVMValueRef base, int64_t pk_off, LLVMValueRef eoff, LLVMValueRef other) {
  LLVMValueRef p = gfp(k, LLVMBuildGEP2(k->B, k->cg->i8, base, (LLVMValueRef[]){gi(k, pk_off)}, 1, ""), eoff);
  return LLVMBuildSelect(k->B, LLVMBuildIsNull(k->B, base, ""), other, p, "");
}

/* Whether a product's B is read packed in this run: packed at compile time (bconst), or by
 * the caller ahead of the runs (the packed weights' base pkb not NULL). */
static LLVMValueRef gm_b_packed(CpuKern *k, LLVMValueRef bconst, LLVMValueRef pkb) {
  if (bconst || !pkb) return LLVMConstInt(k->cg->i1, bconst ? 1 : 0, 0);
  return LLVMBuildIsNotNull(k->B, pkb, "");
}

/* idx[d0 .. d0 + n) of shape s from their row-major linear index r. */
static void gm_unflatten(CpuKern *k, const Shape *s, LLVMValueRef r, int d0, int n, LLVMValueRef *idx) {
  for (int d = d0 + n - 1; d >= d0; d--) {
    if (d == d0) {
      idx[d] = r;
      break;
    }
    idx[d] = LLVMBuildSRem(k->B, r, gi(k, s->dims[d]), "");
    r = LLVMBuildSDiv(k->B, r, gi(k, s->dims[d]), "");
  }
}

/* A chunk's items [*lo, *hi) of items split into nchunks (chunk nchunks, the serial run: all
 * of them); *chunk is the chunk number, 0 for the serial run; returns whether this is the
 * serial run. gm_chunk_items_v: the item count known at run time. */
static LLVMValueRef gm_chunk_items_v(CpuKern *k, LLVMValueRef items, int64_t nchunks, LLVMValueRef *chunk,
                                     LLVMValueRef *lo, LLVMValueRef *hi) {
  LLVMBuilderRef B = k->B;
  LLVMValueRef whole = LLVMBuildICmp(B, LLVMIntSGE, k->chunk, gi(k, nchunks), "");
  *chunk = LLVMBuildSelect(B, whole, gi(k, 0), k->chunk, "");
  *lo = LLVMBuildSDiv(B, gmul(k, *chunk, items), gi(k, nchunks), "");
  *hi = LLVMBuildSelect(B, whole, items, LLVMBuildSDiv(B, gmul(k, gadd(k, *chunk, gi(k, 1)), items), gi(k, nchunks), ""), "");
  return whole;
}
static LLVMValueRef gm_chunk_items(CpuKern *k, int64_t items, int64_t nchunks, LLVMValueRef *chunk, LLVMValueRef *lo,
                                   LLVMValueRef *hi) {
  return gm_chunk_items_v(k, gi(k, items), nchunks, chunk, lo, hi);
}

/* The loop dimensions' indices lidx from their linear index bi, and the element offsets they
 * give in A, B and C. */
static void gm_loop_offsets(CpuKern *k, const GmProb *p, LLVMValueRef bi, LLVMValueRef *lidx, LLVMValueRef *offa,
                            LLVMValueRef *offb, LLVMValueRef *offc) {
  LLVMValueRef r = bi;
  *offa = *offb = *offc = gi(k, 0);
  for (int j = p->nloop - 1; j >= 0; j--) {
    lidx[j] = j == 0 ? r : LLVMBuildSRem(k->B, r, gi(k, p->lext[j]), "");
    if (j > 0) r = LLVMBuildSDiv(k->B, r, gi(k, p->lext[j]), "");
    *offa = gadd(k, *offa, gmul(k, lidx[j], gi(k, p->lsa[j])));
    *offb = gadd(k, *offb, gmul(k, lidx[j], gi(k, p->lsb[j])));
    *offc = gadd(k, *offc, gmul(k, lidx[j], gi(k, p->lsc[j])));
  }
}

/* The root of fusion `in` when it is a reduction that cpu_gemm_kernel can take block by
 * block: a reduce in f32 whose reducer adds, takes the maximum or the minimum, of the hero's
 * epilogue value (hero dims, reached from the hero through elementwise ops), with a scalar
 * init. */
static const HInstr *gm_reduce_root(const HInstr *in, const HInstr *hero) {
  if (in->op != OP_FUSION || in->ncalls < 1 || !hlo_shape_is_array(&in->shape)) return NULL;
  const HComp *c = in->calls[0];
  const HInstr *r = c->root;
  if (!r || r->op != OP_REDUCE || r->nops != 2 || r->ncalls != 1 || r->shape.dt != DT_F32) return NULL;
  const HInstr *v = r->ops[0];
  if (v->shape.dt != DT_F32 || r->ops[1]->shape.rank != 0 || !hlo_comp_identity(r->calls[0], DT_F32, NULL) ||
      !hlo_shape_same_dims(&v->shape, &hero->shape) || !cpu_elem_path(c, hero, v))
    return NULL;
  return r;
}

enum { GM_RED_KEEP = 1 << 20 }; /* elements a reduction over a product may keep */
enum { GM_TINY_MACS = 1 << 16 }; /* products below this many multiply-adds: cpu_gemm_kernel */

/* a (+) b with reduction red's reducer. */
static LLVMValueRef gm_reduce_combine(CpuKern *k, const HInstr *red, LLVMValueRef a, LLVMValueRef b) {
  LLVMValueRef args[2] = {a, b}, out = NULL;
  return cpu_gen_scalar_comp(k, red->calls[0], args, 2, &out) ? out : NULL;
}

const HInstr *cpu_gemm_reduce_hero(const HInstr *in) {
  const HInstr *hero = cpu_fusion_hero(in);
  return hero && gm_reduce_root(in, hero) ? hero : NULL;
}

/* The epilogue of an output fusion on the block [m0, m1) x [n0, n1) of the product just
 * computed (at the loop indices lidx), which generation reads from C: every element of the
 * fusion's root, stored in place in C; or, for a fusion whose root reduces the hero's
 * epilogue (red), every element of the reduced value combined into this chunk's partial
 * results P (red's shape, row-major). Rows are outer, columns inner: the columns of one row go
 * to consecutive elements (vectors: the feature dimension is minor and, when reducing, not
 * reduced). */
static void gm_epilogue(CpuKern *k, HInstr *in, const HInstr *hero, const HInstr *red, const GmProb *p,
                        const LLVMValueRef *lidx, LLVMValueRef m0, LLVMValueRef m1, LLVMValueRef n0, LLVMValueRef n1,
                        LLVMValueRef C, LLVMValueRef P) {
  cpu_kern_materialized(k, hero, C);
  const Shape *s = &hero->shape;
  int64_t rst[HLO_MAX_RANK];
  if (red) gm_rowmajor(&red->shape, rst);
  LLVMValueRef idx[HLO_MAX_RANK];
  for (int d = 0; d < s->rank; d++) idx[d] = gi(k, 0);
  for (int j = 0; j < p->nloop; j++) idx[p->lout[j]] = lidx[j];
  CpuLoop lm, ln;
  gm_unflatten(k, s, gloop(k, &lm, m0, m1, 1), p->mdim0, p->nm, idx);
  gm_unflatten(k, s, gloop(k, &ln, n0, n1, 1), p->ndim0, p->nn, idx);
  LLVMValueRef v = cpu_gen(k, red ? red->ops[0] : in->calls[0]->root, idx);
  if (v && !red) cpu_store_elem(k, C, &in->shape, idx, v);
  if (v && red) {
    LLVMValueRef pos = gi(k, 0);
    for (int d = 0, o = 0; d < s->rank; d++)
      if (!gm_has(&red->dims, d)) pos = gadd(k, pos, gmul(k, idx[d], gi(k, rst[o++])));
    LLVMValueRef q = gfp(k, P, pos), r = gm_reduce_combine(k, red, gload(k, k->cg->f32, q, 4), v);
    if (r) gstore(k, r, q, 4);
  }
  cpu_loop_close(k, &ln);
  cpu_loop_close(k, &lm);
}

/* The partial results P of a reducing kernel's chunk set to the reducer's identity. */
static void gm_reduce_init(CpuKern *k, const HInstr *red, LLVMValueRef P, int64_t part_bytes) {
  double id = 0;
  hlo_comp_identity(red->calls[0], DT_F32, &id);
  CpuLoop lz;
  LLVMValueRef z = gloop(k, &lz, gi(k, 0), gi(k, part_bytes / 4), 1);
  gstore(k, LLVMConstReal(k->cg->f32, id), gfp(k, P, z), 4);
  cpu_loop_close(k, &lz);
}

/* The kernel after a reducing GEMM's: red's output = init (+) the chunks' partial results, in
 * chunk order (the same at any thread count). */
static bool gm_reduce_finish(CpuCg *cg, HInstr *in, const HInstr *red, int64_t part_off, int64_t part_bytes,
                             int64_t nchunks) {
  CpuKern *k = cpu_kern_begin(cg, in);
  k->bind[k->nbind++] = (CpuBind){in->calls[0], in, NULL, 0, 0};
  LLVMValueRef P = cpu_slot(k, (CpuSlot){CPU_SLOT_TEMP, NULL, NULL, cg->temp_base + part_off});
  LLVMValueRef out = cpu_buffer(k, in);
  LLVMValueRef idx[HLO_MAX_RANK];
  CpuLoop l;
  LLVMValueRef pos = gloop(k, &l, gi(k, 0), gi(k, hlo_shape_elems(&red->shape)), 1);
  gm_unflatten(k, &red->shape, pos, 0, red->shape.rank, idx);
  LLVMValueRef acc = cpu_gen(k, red->ops[1], idx);
  for (int64_t j = 0; acc && j < nchunks; j++)
    acc = gm_reduce_combine(k, red, acc, gload(k, cg->f32, gfp(k, P, gadd(k, pos, gi(k, j * part_bytes / 4))), 4));
  if (acc) cpu_store_elem(k, out, &in->shape, idx, acc);
  cpu_loop_close(k, &l);
  k->nbind--;
  if (!cpu_kern_end(k, 1)) return false;
  cg->tasks[cg->ntasks - 1].finish = true;
  cg->tasks[cg->ntasks - 1].note = "partial results combined";
  return true;
}

/* ------------------------------------------------------------------ few rows */

/* A product of few rows (batch-1 or small-batch inference: x[1, 4096] . W[4096, 1024]) is
 * memory-bound on B, which the blocked path would pack (read and write all of B, then read it
 * again) and compute in MR-row tiles of which all but M rows are zero padding. When all M rows
 * fit in registers with at least two vectors of columns each (M <= 14 at AVX-512's 32
 * registers, 6 at AVX2's 16) and B's columns are contiguous, a kernel of its own reads B in
 * place, in its row order: the columns are cut into ranges (the parallel-for's items, with
 * the loop dimensions); a range goes down K in blocks of GM_SMALL_K rows, and for each block
 * along its columns in blocks of V vectors (V = gm_small_v: as many as the registers hold
 * beside M x V accumulators, at most 4): the M x V tile is loaded from C (zero for the first
 * K block), each row of the block's B is loaded a vector at a time and multiplied by
 * broadcasts of A's M elements, and the tile is stored back. B is so read once, as
 * GM_SMALL_K sequential streams; the last column block of a ragged N loads and stores its
 * partial vector under a lane mask. When B's rows are contiguous instead (weights stored
 * [out, in]) and A's rows too, the dot form computes blocks of outputs as sums along K
 * (gm_small_dots). On the device host's Xeon (pinned to 2 cores, three
 * interleaved rounds), x[M, 4096] . W[4096, 1024] against the blocked path: M = 1 0.64-0.76
 * against 1.73-2.29 ms on one core, 0.27-0.38 against 0.91-1.14 on two; M = 4 0.80-0.87
 * against 1.89-1.96, 0.41-0.59 against 0.93-0.97; M = 12 1.01-1.12 against 1.82, 0.62-0.84
 * against 0.91-1.17. (Rows in two groups, each streaming B, lost to the blocked path at 12
 * rows on two cores: 1.28-1.98 ms.) */
#define GM_SMALL_K 16 /* rows of B per K block */

/* Vectors of columns per block for M rows: M * V accumulators, V vectors of B and a
 * broadcast within the vector registers (32 with AVX-512, else 16). */
static int gm_small_v(const GmCfg *c, int64_t M) {
  int64_t regs = c->vw >= 16 ? 32 : 16, v = (regs - 1) / (M + 1);
  return (int)(v > 4 ? 4 : v);
}

/* Dot form (B's rows contiguous, as a weight matrix stored [out, in] is read: A's rows and B's
 * columns both run along K): outputs per block for M rows, M x n vector accumulators along K
 * beside the M rows of A and one column of B in the registers, at most 8 (M <= 10 with
 * AVX-512, 5 with AVX2). Device Xeon, x[M, 4096] . W[1024, 4096]^T against the blocked path:
 * M = 1 0.72-0.88 against 1.95-2.17 ms on one core, 0.37-0.46 against 1.14-1.18 on two;
 * M = 4 0.83-0.86 against 1.92-2.23, 0.41-0.44 against 1.13-1.20; M = 10 1.31-1.54 against
 * 2.00-2.66, 0.77-0.81 against 1.19-1.41. */
static int gm_small_n(const GmCfg *c, int64_t M) {
  int64_t regs = c->vw >= 16 ? 32 : 16, n = (regs - 1 - M) / M;
  return (int)(n > 8 ? 8 : n);
}

/* Whether the product takes the few-rows kernel: its streaming form (B's columns contiguous)
 * or its dot form (B's rows and A's rows contiguous, K at least a vector). */
static bool gm_small_m_fits(const GmCfg *c, const GmProb *p) {
  if (p->conv || p->K < 1 || getenv("HLOC_CPU_GEMM_NO_SMALL")) return false;
  if (p->bcs == 1) return gm_small_v(c, p->M) >= 2;
  return p->brs == 1 && p->acs == 1 && p->K >= c->vw && gm_small_n(c, p->M) >= 2;
}

/* Dot form: C[0..R) x [0..nn) at Cp (B's column j at Bp + j * bcs): R x nn accumulators
 * along K, a vector of K at a time (the last one under a lane mask), each reduced to its sum
 * at the end. With nrows (not NULL), rows from nrows on are row nrows - 1 again (the same
 * values read and stored): a partial group of rows runs the same code. */
static void gm_small_dots(CpuKern *k, const GmCfg *c, LLVMValueRef A, LLVMValueRef Bp, LLVMValueRef Cp,
                          const GmProb *p, int R, int nn, LLVMValueRef nrows) {
  CpuCg *cg = k->cg;
  LLVMBuilderRef B = k->B;
  int VW = c->vw;
  LLVMTypeRef vt = LLVMVectorType(cg->f32, (unsigned)VW);
  LLVMValueRef fma = LLVMGetIntrinsicDeclaration(cg->M, LLVMLookupIntrinsicID("llvm.fmuladd", 12), &vt, 1);
  LLVMTypeRef fty = LLVMGlobalGetValueType(fma);
  LLVMValueRef zero = LLVMConstNull(vt);
  int64_t kv_end = p->K / VW * VW, rem = p->K % VW;
  LLVMValueRef acc[16][8], nacc[16][8], aoff[16], coff[16];
  for (int r = 0; r < R; r++) {
    LLVMValueRef rr = nrows && r > 0 ? gmin(k, gi(k, r), gsub(k, nrows, gi(k, 1))) : gi(k, r);
    aoff[r] = gmul(k, rr, gi(k, p->ars));
    coff[r] = gmul(k, rr, gi(k, p->ldc));
  }
  for (int r = 0; r < R; r++)
    for (int j = 0; j < nn; j++) nacc[r][j] = zero;
  /* the whole vectors of K */
  if (kv_end > 0) {
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(B);
    LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(cg->C, k->fn, "smalld");
    LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(cg->C, k->fn, "smalld_done");
    LLVMBuildBr(B, body);
    LLVMPositionBuilderAtEnd(B, body);
    LLVMValueRef kv = LLVMBuildPhi(B, cg->i64, "k"), i0 = gi(k, 0);
    LLVMAddIncoming(kv, &i0, &pre, 1);
    for (int r = 0; r < R; r++)
      for (int j = 0; j < nn; j++) {
        acc[r][j] = LLVMBuildPhi(B, vt, "acc");
        LLVMAddIncoming(acc[r][j], &zero, &pre, 1);
      }
    LLVMValueRef av[16];
    for (int r = 0; r < R; r++) av[r] = gload(k, vt, gfp(k, A, gadd(k, aoff[r], kv)), 4);
    for (int j = 0; j < nn; j++) {
      LLVMValueRef bv = gload(k, vt, gfp(k, Bp, gadd(k, gi(k, j * p->bcs), kv)), 4);
      for (int r = 0; r < R; r++) nacc[r][j] = LLVMBuildCall2(B, fty, fma, (LLVMValueRef[]){av[r], bv, acc[r][j]}, 3, "");
    }
    LLVMValueRef kn = gadd(k, kv, gi(k, VW));
    LLVMBasicBlockRef latch = LLVMGetInsertBlock(B);
    LLVMAddIncoming(kv, &kn, &latch, 1);
    for (int r = 0; r < R; r++)
      for (int j = 0; j < nn; j++) LLVMAddIncoming(acc[r][j], &nacc[r][j], &latch, 1);
    gm_novec(k, LLVMBuildCondBr(B, gslt(k, kn, gi(k, kv_end)), body, done));
    LLVMPositionBuilderAtEnd(B, done);
  }
  /* the partial vector at the end of K */
  if (rem) {
    LLVMValueRef mask = cpu_lane_mask(k, VW, (int)rem), av[16];
    for (int r = 0; r < R; r++) av[r] = cpu_masked_load(k, vt, gfp(k, A, gadd(k, aoff[r], gi(k, kv_end))), mask);
    for (int j = 0; j < nn; j++) {
      LLVMValueRef bv = cpu_masked_load(k, vt, gfp(k, Bp, gi(k, j * p->bcs + kv_end)), mask);
      for (int r = 0; r < R; r++) nacc[r][j] = LLVMBuildCall2(B, fty, fma, (LLVMValueRef[]){av[r], bv, nacc[r][j]}, 3, "");
    }
  }
  LLVMValueRef red = LLVMGetIntrinsicDeclaration(cg->M, LLVMLookupIntrinsicID("llvm.vector.reduce.fadd", 23), &vt, 1);
  LLVMTypeRef rty = LLVMGlobalGetValueType(red);
  for (int r = 0; r < R; r++)
    for (int j = 0; j < nn; j++) {
      LLVMValueRef sum = LLVMBuildCall2(B, rty, red, (LLVMValueRef[]){LLVMConstReal(cg->f32, -0.0), nacc[r][j]}, 2, "");
      LLVMSetFastMathFlags(sum, LLVMFastMathAllowReassoc);
      gstore(k, sum, gfp(k, Cp, gadd(k, coff[r], gi(k, j))), 4);
    }
}

/* The R rows of the column block at Bp / Cp, K rows [k0, k1): its first nv vectors whole,
 * vector nv (when mask) partial. */
static void gm_small_group(CpuKern *k, const GmCfg *c, LLVMValueRef A, LLVMValueRef Bp, LLVMValueRef Cp,
                           const GmProb *p, int R, int nv, LLVMValueRef mask, LLVMValueRef k0, LLVMValueRef k1) {
  CpuCg *cg = k->cg;
  LLVMBuilderRef B = k->B;
  LLVMTypeRef vt = LLVMVectorType(cg->f32, (unsigned)c->vw);
  int V = nv + (mask != NULL);
  LLVMValueRef fma = LLVMGetIntrinsicDeclaration(cg->M, LLVMLookupIntrinsicID("llvm.fmuladd", 12), &vt, 1);
  LLVMTypeRef fty = LLVMGlobalGetValueType(fma);
  LLVMValueRef zero = LLVMConstNull(vt);
#define GM_VLOAD(q, j) ((j) < nv ? gload(k, vt, (q), 4) : cpu_masked_load(k, vt, (q), mask))
  /* the tile: C's (nothing before the first K block) */
  LLVMValueRef first = LLVMBuildICmp(B, LLVMIntEQ, k0, gi(k, 0), "");
  LLVMValueRef acc[16][4], nacc[16][4], bv[4], cq[16][4];
  for (int r = 0; r < R; r++)
    for (int j = 0; j < V; j++) {
      cq[r][j] = gfp(k, Cp, gi(k, r * p->ldc + (int64_t)j * c->vw));
      nacc[r][j] = LLVMBuildSelect(B, first, zero, GM_VLOAD(cq[r][j], j), "");
    }
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(B);
  LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(cg->C, k->fn, "smallk");
  LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(cg->C, k->fn, "smallk_done");
  LLVMBuildBr(B, body);
  LLVMPositionBuilderAtEnd(B, body);
  LLVMValueRef kv = LLVMBuildPhi(B, cg->i64, "k");
  LLVMAddIncoming(kv, &k0, &pre, 1);
  for (int r = 0; r < R; r++)
    for (int j = 0; j < V; j++) {
      acc[r][j] = LLVMBuildPhi(B, vt, "acc");
      LLVMAddIncoming(acc[r][j], &nacc[r][j], &pre, 1);
    }
  LLVMValueRef brow = gfp(k, Bp, gmul(k, kv, gi(k, p->brs)));
  for (int j = 0; j < V; j++) bv[j] = GM_VLOAD(gfp(k, brow, gi(k, (int64_t)j * c->vw)), j);
  for (int r = 0; r < R; r++) {
    LLVMValueRef av = cpu_splat(k, gload(k, cg->f32, gfp(k, A, gadd(k, gi(k, r * p->ars), gmul(k, kv, gi(k, p->acs)))), 4), c->vw);
    for (int j = 0; j < V; j++) nacc[r][j] = LLVMBuildCall2(B, fty, fma, (LLVMValueRef[]){av, bv[j], acc[r][j]}, 3, "");
  }
#undef GM_VLOAD
  LLVMValueRef kn = gadd(k, kv, gi(k, 1));
  LLVMBasicBlockRef latch = LLVMGetInsertBlock(B);
  LLVMAddIncoming(kv, &kn, &latch, 1);
  for (int r = 0; r < R; r++)
    for (int j = 0; j < V; j++) LLVMAddIncoming(acc[r][j], &nacc[r][j], &latch, 1);
  gm_novec(k, LLVMBuildCondBr(B, gslt(k, kn, k1), body, done));
  LLVMPositionBuilderAtEnd(B, done);
  for (int r = 0; r < R; r++)
    for (int j = 0; j < V; j++) {
      if (j < nv) gstore(k, nacc[r][j], cq[r][j], 4);
      else cpu_masked_store(k, nacc[r][j], cq[r][j], mask);
    }
}

/* The kernel of a product that reads its operands in place (the few-rows and few-columns
 * kernels): bound to the fusion's computation, A, B (unless Bm is NULL: B not read) and C's
 * addresses, and this chunk's share [lo, hi) of items. */
static CpuKern *gm_items_kern(CpuCg *cg, HInstr *in, const HInstr *hero, const GmProb *p, int64_t items, int64_t nchunks,
                              LLVMValueRef *A, LLVMValueRef *Bm, LLVMValueRef *C, LLVMValueRef *chunk, LLVMValueRef *lo,
                              LLVMValueRef *hi) {
  CpuKern *k = cpu_kern_begin(cg, in);
  if (hero != in) k->bind[k->nbind++] = (CpuBind){in->calls[0], in, NULL, 0, 0};
  *A = gm_view_ptr(k, &p->a);
  if (Bm) *Bm = gm_view_ptr(k, &p->b);
  *C = cpu_buffer(k, in);
  gm_chunk_items(k, items, nchunks, chunk, lo, hi);
  return k;
}

static int gm_small_m(CpuCg *cg, HInstr *in, const HInstr *hero, const GmProb *p, const GmCfg *c, int64_t nb,
                      int64_t want, int64_t stage_bytes) {
  const HInstr *fusion = hero == in ? NULL : in;
  int VW = c->vw, NV = gm_small_v(c, p->M), R = (int)p->M;
  bool dots = p->bcs != 1; /* the dot form: blocks of gm_small_n outputs */
  int64_t NBc = dots ? gm_small_n(c, p->M) : (int64_t)NV * VW, nnb = (p->N + NBc - 1) / NBc;
  /* column ranges: as many as chunks are wanted (whole blocks each), times the loop dims */
  int64_t nr = want <= 1 ? 1 : want < nnb ? want : nnb, items = nb * nr;
  int64_t nchunks = want <= 1 ? 1 : items < want ? items : want;
  if (stage_bytes > cg->extra_temp) cg->extra_temp = stage_bytes;
  LLVMValueRef A, Bm, C, chunk, lo, hi;
  CpuKern *k = gm_items_kern(cg, in, hero, p, items, nchunks, &A, &Bm, &C, &chunk, &lo, &hi);
  LLVMBuilderRef B = k->B;
  CpuLoop li, lk, lb;
  LLVMValueRef it = gloop(k, &li, lo, hi, 1);
  int cache_mark = k->ncache;
  LLVMValueRef ri = LLVMBuildSRem(B, it, gi(k, nr), ""), bi = LLVMBuildSDiv(B, it, gi(k, nr), "");
  LLVMValueRef lidx[HLO_MAX_RANK], offa, offb, offc;
  gm_loop_offsets(k, p, bi, lidx, &offa, &offb, &offc);
  /* the range's column blocks [b0, b1) */
  LLVMValueRef b0 = LLVMBuildSDiv(B, gmul(k, ri, gi(k, nnb)), gi(k, nr), "");
  LLVMValueRef b1 = LLVMBuildSDiv(B, gmul(k, gadd(k, ri, gi(k, 1)), gi(k, nnb)), gi(k, nr), "");
  LLVMValueRef Ap = gfp(k, A, offa);
  int64_t tail = p->N % NBc;
  GIf f = {0};
  if (dots) {
    LLVMValueRef bj = gloop(k, &lb, b0, b1, 1);
    LLVMValueRef n0 = gmul(k, bj, gi(k, NBc));
    LLVMValueRef Bp = gfp(k, Bm, gadd(k, offb, gmul(k, n0, gi(k, p->bcs)))), Cp = gfp(k, C, gadd(k, offc, n0));
    if (tail) gif_open(k, &f, gslt(k, bj, gi(k, nnb - 1)), true);
    gm_small_dots(k, c, Ap, Bp, Cp, p, R, (int)NBc, NULL);
    if (tail) {
      gif_else(k, &f);
      gm_small_dots(k, c, Ap, Bp, Cp, p, R, (int)tail, NULL);
      gif_close(k, &f);
    }
    gm_close(k, &lb);
  } else {
    LLVMValueRef k0 = gloop(k, &lk, gi(k, 0), gi(k, p->K), GM_SMALL_K);
    LLVMValueRef k1 = gmin(k, gadd(k, k0, gi(k, GM_SMALL_K)), gi(k, p->K));
    LLVMValueRef bj = gloop(k, &lb, b0, b1, 1);
    LLVMValueRef n0 = gmul(k, bj, gi(k, NBc));
    LLVMValueRef Bp = gfp(k, Bm, gadd(k, offb, n0)), Cp = gfp(k, C, gadd(k, offc, n0));
    /* whole blocks; the last block of a ragged N: its whole vectors, then one under a mask */
    if (tail) gif_open(k, &f, gslt(k, bj, gi(k, nnb - 1)), true);
    gm_small_group(k, c, Ap, Bp, Cp, p, R, NV, NULL, k0, k1);
    if (tail) {
      gif_else(k, &f);
      int nv = (int)(tail / VW), rem = (int)(tail % VW);
      gm_small_group(k, c, Ap, Bp, Cp, p, R, nv, rem ? cpu_lane_mask(k, VW, rem) : NULL, k0, k1);
      gif_close(k, &f);
    }
    gm_close(k, &lb);
    gm_close(k, &lk);
  }
  if (fusion && !k->failed)
    gm_epilogue(k, in, hero, NULL, p, lidx, gi(k, 0), gi(k, p->M), gmul(k, b0, gi(k, NBc)), gmin(k, gmul(k, b1, gi(k, NBc)), gi(k, p->N)), C, NULL);
  k->ncache = cache_mark;
  gm_close(k, &li);
  if (!cpu_kern_end(k, nchunks)) return -1;
  cg->tasks[cg->ntasks - 1].whole = nchunks > 1;
  return 1;
}

/* ------------------------------------------------------------------ few columns */

/* A product of many rows and few columns (a classifier's head: mlp's 256 x 1024 x 10) would
 * fill the blocked path's NR-wide panels mostly with zero columns (10 of 32 at AVX-512) and
 * pack all of A for it. When N is at most 16 and under NR, A's rows run along K and the
 * product is not batched, it takes the dot form of the few-rows kernel instead
 * (gm_small_dots): groups of R rows of A, read in place, against B's columns held along K, R
 * x w sums in vector registers (R = 3 with 32 vector registers, R = 2 with 16; N in blocks
 * of equal width w, at most 8 or 6: 10 columns are two blocks of 5), reduced to the outputs
 * at the end; the rows of a group pass over K once per block. One copy of that code serves
 * every group and block (mlp's head took 34 ms to compile with the partial ones apart). B's
 * columns are contiguous along K already when its rows are (weights stored [out, in]); a
 * constant B (frozen weights) is transposed at compile time into read-only data; otherwise
 * each chunk first copies B transposed, N x K floats (at most GM_FEW_BT), into its private
 * scratch. The parallel-for splits the row groups; the fusion's epilogue follows on each
 * chunk's rows. */
#define GM_FEW_BT (64 * 1024)

static bool gm_few_n_fits(const GmCfg *c, const GmProb *p) {
  if (p->conv || p->nloop || p->acs != 1 || p->K < 4 * c->vw || p->N > 16 || p->N >= c->nr || p->M < 2 * c->mr ||
      getenv("HLOC_CPU_GEMM_NO_SMALL"))
    return false;
  return p->brs == 1 || p->N * p->K <= GM_FEW_BT;
}

static int gm_few_n(CpuCg *cg, HInstr *in, const HInstr *hero, const GmProb *p, const GmCfg *c, int64_t want,
                    int64_t stage_bytes) {
  const HInstr *fusion = hero == in ? NULL : in;
  /* column blocks of one width w (the last one ends at N, overlapping the one before: its
     common columns are computed twice, to the same values) */
  int R = c->vw >= 16 ? 3 : 2, nn = gm_small_n(c, R);
  int64_t nbl = (p->N + nn - 1) / nn, w = (p->N + nbl - 1) / nbl;
  int64_t groups = (p->M + R - 1) / R;
  int64_t nchunks = want <= 1 ? 1 : groups < want ? groups : want;
  /* B's columns along K: B itself, B transposed at compile time (a constant), or a copy */
  const float *bsrc = p->brs != 1 ? gm_view_const(&p->b) : NULL;
  LLVMValueRef bconst = NULL;
  if (bsrc) {
    float *t = hlo_arena_alloc(cg->scratch, sizeof(float) * (size_t)(p->N * p->K));
    for (int64_t n = 0; n < p->N; n++)
      for (int64_t kk = 0; kk < p->K; kk++) t[n * p->K + kk] = bsrc[kk * p->brs + n * p->bcs];
    char name[512];
    snprintf(name, sizeof name, "%s_bt%d", cg->o->name, cg->ntasks);
    bconst = cpu_rodata(cg, name, t, sizeof(float) * (size_t)(p->N * p->K));
  }
  bool copy = p->brs != 1 && !bconst;
  int64_t bt_bytes = copy ? memplan_align(p->N * p->K * 4) : 0;
  if (stage_bytes + nchunks * bt_bytes > cg->extra_temp) cg->extra_temp = stage_bytes + nchunks * bt_bytes;
  LLVMValueRef A, Bm = NULL, C, chunk, lo, hi;
  CpuKern *k = gm_items_kern(cg, in, hero, p, groups, nchunks, &A, bconst ? NULL : &Bm, &C, &chunk, &lo, &hi);
  LLVMBuilderRef B = k->B;
  int cache_mark = k->ncache;
  GmProb q = *p;
  LLVMValueRef Bt = bconst ? cpu_slot(k, (CpuSlot){CPU_SLOT_GLOBAL, NULL, bconst, 0}) : Bm;
  if (copy) {
    /* B transposed into the chunk's scratch, Bt[n * K + kk] = B(kk, n), written in order (the
       other order would store at a stride of K floats, a multiple of 4 KiB at K = 1024) */
    LLVMValueRef off = gmul(k, chunk, gi(k, bt_bytes));
    LLVMValueRef base = cpu_slot(k, (CpuSlot){CPU_SLOT_TEMP, NULL, NULL, cg->temp_base + stage_bytes});
    Bt = LLVMBuildInBoundsGEP2(B, cg->i8, base, &off, 1, "");
    CpuLoop lk, ln;
    LLVMValueRef n = gloop(k, &ln, gi(k, 0), gi(k, p->N), 1);
    LLVMValueRef kk = gloop(k, &lk, gi(k, 0), gi(k, p->K), 1);
    LLVMValueRef v = gload(k, cg->f32, gfp(k, Bm, gadd(k, gmul(k, kk, gi(k, p->brs)), gmul(k, n, gi(k, p->bcs)))), 4);
    gstore(k, v, gfp(k, Bt, gadd(k, gmul(k, n, gi(k, p->K)), kk)), 4);
    gm_close(k, &lk);
    gm_close(k, &ln);
  }
  if (p->brs != 1) { /* the transposed B, compile-time or copied: K contiguous */
    q.brs = 1;
    q.bcs = p->K;
  }
  /* groups of R rows, the last one partial when R does not divide M (its missing rows are
     its last row again) */
  CpuLoop lg, lj;
  LLVMValueRef g = gloop(k, &lg, lo, hi, 1);
  LLVMValueRef m0 = gmul(k, g, gi(k, R)), nrows = gmin(k, gi(k, R), gsub(k, gi(k, p->M), m0));
  LLVMValueRef Ap = gfp(k, A, gmul(k, m0, gi(k, p->ars))), Cp = gfp(k, C, gmul(k, m0, gi(k, p->ldc)));
  LLVMValueRef jb = gloop(k, &lj, gi(k, 0), gi(k, nbl), 1);
  LLVMValueRef j0 = gmin(k, gmul(k, jb, gi(k, w)), gi(k, p->N - w));
  gm_small_dots(k, c, Ap, gfp(k, Bt, gmul(k, j0, gi(k, q.bcs))), gfp(k, Cp, j0), &q, R, (int)w, nrows);
  gm_close(k, &lj);
  gm_close(k, &lg);
  if (fusion && !k->failed) {
    LLVMValueRef lidx[HLO_MAX_RANK] = {0}; /* no loop dimensions */
    gm_epilogue(k, in, hero, NULL, p, lidx, gmul(k, lo, gi(k, R)), gmin(k, gmul(k, hi, gi(k, R)), gi(k, p->M)),
                gi(k, 0), gi(k, p->N), C, NULL);
  }
  k->ncache = cache_mark;
  if (!cpu_kern_end(k, nchunks)) return -1;
  cg->tasks[cg->ntasks - 1].whole = nchunks > 1;
  cg->tasks[cg->ntasks - 1].note = "few columns";
  return 1;
}

/* ------------------------------------------------------------------ Winograd */

/* A 3x3 convolution of unit stride computed with Winograd's F(2x2, 3x3): each 2x2 tile of
 * the output comes from a 4x4 patch of the input through 16 products of 4x4 transformed
 * values instead of 36 of the direct form, 2.25x fewer multiply-adds. Per tile and channel:
 *   V = Bt d B (the input patch d transformed), U = G g Gt (the 3x3 taps g, once per run),
 *   M = V * U elementwise, summed over the input channels: 16 GEMMs, one per position xi of
 *   the 4x4 transform, [tiles x CI] x [CI x CO], through the module's GEMM function;
 *   Y = At M A, the 2x2 outputs.
 * The work goes in slices of whole rows of tiles (a range of (image, tile row) pairs: the
 * output pixels of a slice are consecutive rows of C), sized so that the slice's transformed
 * inputs and products, 16 * tiles * (CI + CO) floats, stay near 1 MiB (in L2); each slice is
 * then finished by the fusion's epilogue (or reduced into the chunk's partial results) while
 * its C rows are in cache, as the implicit GEMM's slices are. The transforms work on vectors
 * of channels: the input's channels must be contiguous (NHWC) and both channel counts whole
 * vectors. Taps in the padding read a clamped in-image address and select zero, so no tile
 * branches. The rounding differs from the direct sum's (the transforms add and halve values
 * before the products): within 1e-5 relative of it on the tests' convolutions. */

/* The F(2x2, 3x3) input transform of a 4x4 patch d (row-major), in place: Bt d B with
 * Bt = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]. */
static void gm_wino_in(CpuKern *k, LLVMValueRef *d) {
  LLVMBuilderRef B = k->B;
  LLVMValueRef t[16];
  for (int j = 0; j < 4; j++) {
    t[0 * 4 + j] = LLVMBuildFSub(B, d[0 * 4 + j], d[2 * 4 + j], "");
    t[1 * 4 + j] = LLVMBuildFAdd(B, d[1 * 4 + j], d[2 * 4 + j], "");
    t[2 * 4 + j] = LLVMBuildFSub(B, d[2 * 4 + j], d[1 * 4 + j], "");
    t[3 * 4 + j] = LLVMBuildFSub(B, d[1 * 4 + j], d[3 * 4 + j], "");
  }
  for (int i = 0; i < 4; i++) {
    LLVMValueRef *r = &t[i * 4];
    d[i * 4 + 0] = LLVMBuildFSub(B, r[0], r[2], "");
    d[i * 4 + 1] = LLVMBuildFAdd(B, r[1], r[2], "");
    d[i * 4 + 2] = LLVMBuildFSub(B, r[2], r[1], "");
    d[i * 4 + 3] = LLVMBuildFSub(B, r[1], r[3], "");
  }
}

/* The output transform of 4x4 products m (row-major): y = At m A (2x2, row-major) with
 * At = [1 1 1 0; 0 1 -1 -1]. */
static void gm_wino_out(CpuKern *k, const LLVMValueRef *m, LLVMValueRef *y) {
  LLVMBuilderRef B = k->B;
  LLVMValueRef s[8];
  for (int j = 0; j < 4; j++) {
    s[0 * 4 + j] = LLVMBuildFAdd(B, LLVMBuildFAdd(B, m[0 * 4 + j], m[1 * 4 + j], ""), m[2 * 4 + j], "");
    s[1 * 4 + j] = LLVMBuildFSub(B, LLVMBuildFSub(B, m[1 * 4 + j], m[2 * 4 + j], ""), m[3 * 4 + j], "");
  }
  for (int i = 0; i < 2; i++) {
    const LLVMValueRef *r = &s[i * 4];
    y[i * 2 + 0] = LLVMBuildFAdd(B, LLVMBuildFAdd(B, r[0], r[1], ""), r[2], "");
    y[i * 2 + 1] = LLVMBuildFSub(B, LLVMBuildFSub(B, r[1], r[2], ""), r[3], "");
  }
}

/* Whether convolution cv may be computed by Winograd's F(2x2, 3x3) (gm_winograd): 3x3 taps,
 * unit strides, no dilation or reversal, f32, no grouping, channel counts in whole vectors.
 * Decided from the instruction alone, so that the GEMM function, made by the module's first
 * product, knows that it needs its packing of A from a matrix; the kernel checks the
 * operands' layout and the scratch on top (gm_wino_fits). */
static bool gm_wino_conv(CpuCg *cg, const HInstr *cv) {
  GmCfg c = gm_cfg(cg);
  if (!c.wino || cv->op != OP_CONVOLUTION || cv->nops != 2 || cv->shape.dt != DT_F32) return false;
  const ConvDims *cd = cv->conv;
  if (cd->in_sp.n != 2 || cv->feature_groups != 1 || cv->batch_groups != 1) return false;
  const Shape *ws = &cv->ops[1]->shape, *os = &cv->shape;
  for (int j = 0; j < 2; j++) {
    const WinDim *wd = &cv->window->d[j];
    if (ws->dims[cd->k_sp.v[j]] != 3 || wd->stride != 1 || wd->win_dil != 1 || wd->base_dil != 1 || wd->reversal ||
        wd->pad_lo < 0 || wd->pad_hi < 0 || os->dims[cd->out_sp.v[j]] < 2)
      return false;
  }
  return ws->dims[cd->k_in] % c.vw == 0 && ws->dims[cd->k_out] % c.vw == 0;
}

/* What the Winograd kernel needs on top: rows over the whole batch (NHWC output), the
 * input's channels contiguous, and one row of tiles whose transformed inputs and products (a
 * slice's least) take at most 4 MiB: images up to 1024 pixels wide at 64 + 64 channels, 128
 * at 512 + 512 (a wider one would need more scratch per chunk, and is computed directly). */
static bool gm_wino_fits(const GmProb *p) {
  if (!p->conv || p->nloop != 0 || p->geo[GC_XSC] != 1) return false;
  return 64 * ((p->geo[GC_OW] + 1) / 2) * (p->geo[GC_CI] + p->N) <= ((int64_t)4 << 20);
}

/* The module's Winograd functions (made once each, shared by its convolutions, whose shapes
 * are arguments; vectorized by hand over channels, so given the light pipeline):
 *   GW_IN (X, V, q0, q1, CI, T, TC, TR, H, W, PH, PW, XSH, XSW, XSB): the input transform of
 *     tile rows [q0, q1) (tile row q: image q / TR, output rows 2 (q % TR) + 0..1) of input X
 *     into V[xi][t][ci] (xi blocks T * CI apart, t counted from q0's first tile);
 *   GW_OUT (M, C, q0, q1, CO, T, TC, TR, OH, OW): the output transform of the same tiles
 *     from M[xi][t][co] into C (pixel p, channel co at C + p * CO + co), pixels past the
 *     output's last row or column not written;
 *   GW_U (W, U, ci0, ci1, CI, CO, SKH, SKW, SCI, SCO, KSTEP): the taps' transform of input
 *     channels [ci0, ci1): U[xi] = (G g Gt)[xi] for the taps g[kh][kw] of (ci, co) at
 *     W + kh * SKH + kw * SKW + ci * SCI + co * SCO, with G = [1 0 0; .5 .5 .5; .5 -.5 .5; 0 0 1],
 *     each U[xi] a [CI x CO] B written as the GEMM function reads one packed beforehand
 *     (GP_BPRE; K blocks KSTEP deep), at U + xi * CI * roundup(CO, NR): no call packs it.
 * Tile rows are walked row by row, so a tile's position costs no division. */
typedef enum { GW_IN, GW_OUT, GW_U, GW_COUNT } GmWino;

static const int gm_wino_nargs[GW_COUNT] = {15, 10, 11};

static LLVMTypeRef gm_wino_type(CpuCg *cg, GmWino which) {
  LLVMTypeRef ps[16];
  for (int j = 0; j < gm_wino_nargs[which]; j++) ps[j] = j < 2 ? cg->ptr : cg->i64;
  return LLVMFunctionType(cg->vd, ps, (unsigned)gm_wino_nargs[which], 0);
}

/* GW_IN's and GW_OUT's walk over tile rows [q0, q1): opens the loops and gives the tile's
 * image n, tile row th, tile column tw and number t in the slice; gm_wino_walk_close closes. */
typedef struct GmWalk {
  CpuLoop lq, lw;
  LLVMValueRef n, th, tw, t;
} GmWalk;

static void gm_wino_walk(CpuKern *k, GmWalk *w, LLVMValueRef q0, LLVMValueRef q1, LLVMValueRef TC, LLVMValueRef TR) {
  LLVMValueRef q = gloop(k, &w->lq, q0, q1, 1);
  w->n = LLVMBuildSDiv(k->B, q, TR, "");
  w->th = LLVMBuildSRem(k->B, q, TR, "");
  LLVMValueRef t0 = gmul(k, gsub(k, q, q0), TC);
  w->tw = gloop(k, &w->lw, gi(k, 0), TC, 1);
  w->t = gadd(k, t0, w->tw);
}

static void gm_wino_walk_close(CpuKern *k, GmWalk *w) {
  gm_close(k, &w->lw);
  gm_close(k, &w->lq);
}

static void gm_wino_in_body(CpuKern *k, const GmCfg *c, const LLVMValueRef *P) {
  CpuCg *cg = k->cg;
  LLVMBuilderRef B = k->B;
  enum { X, V, Q0, Q1, CI, T, TC, TR, H, W, PH, PW, XSH, XSW, XSB };
  LLVMTypeRef vt = LLVMVectorType(cg->f32, (unsigned)c->vw);
  GmWalk w;
  gm_wino_walk(k, &w, P[Q0], P[Q1], P[TC], P[TR]);
  LLVMValueRef xb = gfp(k, P[X], gmul(k, w.n, P[XSB]));
  LLVMValueRef ih0 = gsub(k, gmul(k, w.th, gi(k, 2)), P[PH]), iw0 = gsub(k, gmul(k, w.tw, gi(k, 2)), P[PW]);
  LLVMValueRef okh[4], okw[4], offh[4], offw[4];
  for (int i = 0; i < 4; i++) {
    /* taps in the padding: a clamped in-image address, then zero */
    LLVMValueRef ih = gadd(k, ih0, gi(k, i)), iw = gadd(k, iw0, gi(k, i));
    okh[i] = LLVMBuildICmp(B, LLVMIntULT, ih, P[H], "");
    okw[i] = LLVMBuildICmp(B, LLVMIntULT, iw, P[W], "");
    offh[i] = gmul(k, LLVMBuildSelect(B, okh[i], ih, gi(k, 0), ""), P[XSH]);
    offw[i] = gmul(k, LLVMBuildSelect(B, okw[i], iw, gi(k, 0), ""), P[XSW]);
  }
  CpuLoop lc;
  LLVMValueRef ci = gloop(k, &lc, gi(k, 0), P[CI], c->vw);
  LLVMValueRef d[16], zero = LLVMConstNull(vt);
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 4; j++) {
      LLVMValueRef v = gload(k, vt, gfp(k, xb, gadd(k, gadd(k, offh[i], offw[j]), ci)), 4);
      d[i * 4 + j] = LLVMBuildSelect(B, LLVMBuildAnd(B, okh[i], okw[j], ""), v, zero, "");
    }
  gm_wino_in(k, d);
  LLVMValueRef at = gadd(k, gmul(k, w.t, P[CI]), ci), blk = gmul(k, P[T], P[CI]);
  for (int e = 0; e < 16; e++) gstore(k, d[e], gfp(k, P[V], gadd(k, gmul(k, gi(k, e), blk), at)), 4);
  gm_close(k, &lc);
  gm_wino_walk_close(k, &w);
}

static void gm_wino_out_body(CpuKern *k, const GmCfg *c, const LLVMValueRef *P) {
  CpuCg *cg = k->cg;
  LLVMBuilderRef B = k->B;
  enum { M, C, Q0, Q1, CO, T, TC, TR, OH, OW };
  LLVMTypeRef vt = LLVMVectorType(cg->f32, (unsigned)c->vw);
  LLVMValueRef dummy = cpu_alloca(k, vt); /* where pixels outside the output go */
  GmWalk w;
  gm_wino_walk(k, &w, P[Q0], P[Q1], P[TC], P[TR]);
  LLVMValueRef oh = gmul(k, w.th, gi(k, 2)), ow = gmul(k, w.tw, gi(k, 2));
  LLVMValueRef pix = gadd(k, gmul(k, gadd(k, gmul(k, w.n, P[OH]), oh), P[OW]), ow);
  LLVMValueRef row1 = gslt(k, gadd(k, oh, gi(k, 1)), P[OH]), col1 = gslt(k, gadd(k, ow, gi(k, 1)), P[OW]);
  LLVMValueRef ok[4] = {NULL, col1, row1, LLVMBuildAnd(B, row1, col1, "")};
  LLVMValueRef px[4] = {pix, gadd(k, pix, gi(k, 1)), gadd(k, pix, P[OW]), gadd(k, gadd(k, pix, P[OW]), gi(k, 1))};
  CpuLoop lc;
  LLVMValueRef co = gloop(k, &lc, gi(k, 0), P[CO], c->vw);
  LLVMValueRef m[16], y[4], at = gadd(k, gmul(k, w.t, P[CO]), co), blk = gmul(k, P[T], P[CO]);
  for (int e = 0; e < 16; e++) m[e] = gload(k, vt, gfp(k, P[M], gadd(k, gmul(k, gi(k, e), blk), at)), 4);
  gm_wino_out(k, m, y);
  for (int e = 0; e < 4; e++) {
    LLVMValueRef dst = gfp(k, P[C], gadd(k, gmul(k, px[e], P[CO]), co));
    gstore(k, y[e], ok[e] ? LLVMBuildSelect(B, ok[e], dst, dummy, "") : dst, 4);
  }
  gm_close(k, &lc);
  gm_wino_walk_close(k, &w);
}

static void gm_wino_u_body(CpuKern *k, const GmCfg *c, const LLVMValueRef *P) {
  CpuCg *cg = k->cg;
  LLVMBuilderRef B = k->B;
  enum { W, U, CI0, CI1, CI, CO, SKH, SKW, SCI, SCO, KSTEP };
  LLVMTypeRef vt = LLVMVectorType(cg->f32, (unsigned)c->vw);
  CpuLoop lc, lo;
  LLVMValueRef ci = gloop(k, &lc, P[CI0], P[CI1], 1);
  /* ci's K block [pc, pc + kc) and row in it */
  LLVMValueRef pc = gmul(k, LLVMBuildSDiv(B, ci, P[KSTEP], ""), P[KSTEP]);
  LLVMValueRef kc = gmin(k, P[KSTEP], gsub(k, P[CI], pc)), row = gsub(k, ci, pc);
  /* every column of the panels, those past CO (the last panel's padding) zero */
  LLVMValueRef cor = LLVMBuildAnd(B, gadd(k, P[CO], gi(k, c->nr - 1)), gi(k, ~(int64_t)(c->nr - 1)), "");
  LLVMValueRef co = gloop(k, &lo, gi(k, 0), cor, c->vw);
  LLVMValueRef in = gslt(k, co, P[CO]), col = gmin(k, co, gsub(k, P[CO], gi(k, c->vw)));
  LLVMValueRef h[16], g[9], t[12], zero = LLVMConstNull(vt);
  for (int j = 0; j < c->vw; j++) h[j] = LLVMConstReal(cg->f32, 0.5);
  LLVMValueRef half = LLVMConstVector(h, (unsigned)c->vw);
  /* the taps of (ci, co .. co + VW): a vector load where the output channels are contiguous
     (HWIO), else a gather (OIHW weights read in place) */
  LLVMValueRef wci = gfp(k, P[W], gmul(k, ci, P[SCI])), gt[2][9];
  LLVMTypeRef gty[2] = {vt, LLVMVectorType(cg->ptr, (unsigned)c->vw)};
  LLVMValueRef gather = LLVMGetIntrinsicDeclaration(cg->M, LLVMLookupIntrinsicID("llvm.masked.gather", 18), gty, 2);
  LLVMValueRef lane[16], idx = NULL;
  for (int j = 0; j < c->vw; j++) lane[j] = LLVMConstInt(cg->i64, (unsigned long long)j, 0);
  LLVMBasicBlockRef from[2];
  GIf f;
  gif_open(k, &f, LLVMBuildICmp(B, LLVMIntEQ, P[SCO], gi(k, 1), ""), true);
  for (int path = 0; path < 2; path++) {
    if (path) {
      gif_else(k, &f);
      /* the gather's element offsets (col + lane) * SCO */
      idx = LLVMBuildMul(B, LLVMBuildAdd(B, cpu_splat(k, col, c->vw), LLVMConstVector(lane, (unsigned)c->vw), ""),
                         cpu_splat(k, P[SCO], c->vw), "");
    }
    for (int tap = 0; tap < 9; tap++) {
      LLVMValueRef tp = gfp(k, wci, gadd(k, gmul(k, gi(k, tap / 3), P[SKH]), gmul(k, gi(k, tap % 3), P[SKW])));
      if (!path) {
        gt[0][tap] = gload(k, vt, gfp(k, tp, col), 4);
        continue;
      }
      gt[1][tap] = LLVMBuildCall2(B, LLVMGlobalGetValueType(gather), gather,
                                  (LLVMValueRef[]){LLVMBuildGEP2(B, cg->f32, tp, &idx, 1, ""), LLVMConstInt(cg->i32, 4, 0),
                                                   LLVMConstAllOnes(LLVMVectorType(cg->i1, (unsigned)c->vw)), LLVMGetUndef(vt)},
                                  4, "");
    }
    from[path] = LLVMGetInsertBlock(B);
  }
  gif_close(k, &f);
  for (int tap = 0; tap < 9; tap++) {
    g[tap] = LLVMBuildPhi(B, vt, "");
    LLVMAddIncoming(g[tap], (LLVMValueRef[]){gt[0][tap], gt[1][tap]}, from, 2);
  }
  /* where column co of row ci goes: column block jc (NC wide), its K block at
     jc * CI + pc * roundup(nc, NR), the NR-wide panel of co, its row, co's place in it */
  LLVMValueRef jc = gmul(k, LLVMBuildSDiv(B, co, gi(k, c->nc), ""), gi(k, c->nc));
  LLVMValueRef ncr = LLVMBuildAnd(B, gadd(k, gmin(k, gi(k, c->nc), gsub(k, P[CO], jc)), gi(k, c->nr - 1)),
                                  gi(k, ~(int64_t)(c->nr - 1)), "");
  LLVMValueRef pan = LLVMBuildAnd(B, gsub(k, co, jc), gi(k, ~(int64_t)(c->nr - 1)), "");
  LLVMValueRef at = gadd(k, gadd(k, gmul(k, jc, P[CI]), gmul(k, pc, ncr)),
                         gadd(k, gmul(k, pan, kc), gadd(k, gmul(k, row, gi(k, c->nr)), LLVMBuildAnd(B, co, gi(k, c->nr - 1), ""))));
  LLVMValueRef blk = gmul(k, P[CI], cor);
  /* t = G g (4 x 3), column by column of g; then U = t Gt (4 x 4), row by row of t */
  for (int pass = 0; pass < 2; pass++)
    for (int r = 0; r < (pass ? 4 : 3); r++) {
      LLVMValueRef a = pass ? t[r * 3] : g[r], b = pass ? t[r * 3 + 1] : g[3 + r], e = pass ? t[r * 3 + 2] : g[6 + r];
      LLVMValueRef ae = LLVMBuildFAdd(B, a, e, "");
      LLVMValueRef o[4] = {a, LLVMBuildFMul(B, LLVMBuildFAdd(B, ae, b, ""), half, ""),
                           LLVMBuildFMul(B, LLVMBuildFSub(B, ae, b, ""), half, ""), e};
      for (int q = 0; q < 4; q++) {
        if (!pass) t[q * 3 + r] = o[q];
        else gstore(k, LLVMBuildSelect(B, in, o[q], zero, ""), gfp(k, P[U], gadd(k, gmul(k, gi(k, r * 4 + q), blk), at)), 4);
      }
    }
  gm_close(k, &lo);
  gm_close(k, &lc);
}

static LLVMValueRef gm_wino_function(CpuCg *cg, GmWino which) {
  LLVMValueRef *slot = &cg->wino_fn[which];
  if (*slot) return *slot;
  GmCfg c = gm_cfg(cg);
  static const char *const names[GW_COUNT] = {"in", "out", "taps"};
  char name[512];
  snprintf(name, sizeof name, "%s_wino_%s", gm_prefix(cg), names[which]);
  if (gm_declared(cg, slot, name, gm_wino_type(cg, which))) return *slot;
  LLVMBasicBlockRef saved = LLVMGetInsertBlock(cg->B);
  CpuKern *k = gm_fn_begin(cg, name, gm_wino_type(cg, which));
  gm_mark(k->fn, &c);
  LLVMValueRef P[16];
  for (int j = 0; j < gm_wino_nargs[which]; j++) P[j] = LLVMGetParam(k->fn, (unsigned)j);
  if (which == GW_IN) gm_wino_in_body(k, &c, P);
  if (which == GW_OUT) gm_wino_out_body(k, &c, P);
  if (which == GW_U) gm_wino_u_body(k, &c, P);
  LLVMBuildRetVoid(k->B);
  if (saved) LLVMPositionBuilderAtEnd(cg->B, saved);
  *slot = k->fn;
  return k->fn;
}

static void gm_wino_call(CpuKern *k, GmWino which, LLVMValueRef *args) {
  LLVMBuildCall2(k->B, gm_wino_type(k->cg, which), gm_wino_function(k->cg, which), args,
                 (unsigned)gm_wino_nargs[which], "");
}

/* The taps' transform (GW_U) of input channels [lo, hi) of taps w (CI x CO, strides wk of (kh,
 * kw, ci, co)) into U. */
static void gm_wino_taps(CpuKern *k, const GmCfg *c, LLVMValueRef w, LLVMValueRef U, LLVMValueRef lo, LLVMValueRef hi,
                         int64_t CI, int64_t CO, const int64_t *wk) {
  LLVMValueRef ua[11] = {w, U, lo, hi, gi(k, CI), gi(k, CO), gi(k, wk[0]), gi(k, wk[1]), gi(k, wk[2]), gi(k, wk[3]),
                         gi(k, gm_kstep(c, CI))};
  gm_wino_call(k, GW_U, ua);
}

/* Constant taps transformed at compile time: U[xi] = (G g Gt)[xi] with the operations of
 * GW_U in the same order (so the same floats), each U[xi] in the layout of a B packed
 * beforehand, xi * CI * roundup(CO, NR) apart, in read-only data; NULL when the taps are not a
 * constant. */
static LLVMValueRef gm_wino_const_taps(CpuCg *cg, const GmCfg *c, const GmProb *p) {
  const float *w = gm_view_const(&p->b);
  if (!w) return NULL;
  int64_t CI = p->geo[GC_CI], CO = p->N, ublk = CI * gm_roundup(CO, c->nr);
  float *raw = hlo_arena_alloc(cg->scratch, sizeof(float) * (size_t)(16 * CI * CO));
  float *buf = hlo_arena_alloc(cg->scratch, sizeof(float) * (size_t)(16 * ublk));
  memset(buf, 0, sizeof(float) * (size_t)(16 * ublk));
  for (int64_t ci = 0; ci < CI; ci++)
    for (int64_t co = 0; co < CO; co++) {
      float g[9], t[12];
      for (int tap = 0; tap < 9; tap++)
        g[tap] = w[(tap / 3) * p->wk[0] + (tap % 3) * p->wk[1] + ci * p->wk[2] + co * p->wk[3]];
      for (int pass = 0; pass < 2; pass++)
        for (int r = 0; r < (pass ? 4 : 3); r++) {
          float a = pass ? t[r * 3] : g[r], b = pass ? t[r * 3 + 1] : g[3 + r], e = pass ? t[r * 3 + 2] : g[6 + r];
          float ae = a + e, o[4] = {a, (ae + b) * 0.5f, (ae - b) * 0.5f, e};
          for (int q = 0; q < 4; q++) {
            if (!pass) t[q * 3 + r] = o[q];
            else raw[((r * 4 + q) * CI + ci) * CO + co] = o[q];
          }
        }
    }
  int64_t kstep = gm_kstep(c, CI), nnb = (CO + c->nc - 1) / c->nc;
  for (int xi = 0; xi < 16; xi++) gm_panels(c, raw + xi * CI * CO, CO, 1, CI, CO, c->nc, nnb, kstep, buf + xi * ublk);
  char name[512];
  snprintf(name, sizeof name, "%s_wu%d", cg->o->name, cg->ntasks);
  return cpu_rodata(cg, name, buf, sizeof(float) * (size_t)(16 * ublk));
}

/* The Winograd kernels of convolution hero (alone, or the hero of output fusion `in`, whose
 * root may reduce it: red) in problem p: the taps' transform (chunks over input channels),
 * then the convolution, in slices of whole tile rows split into chunks. Private scratch from
 * stage_bytes: U (unless the taps are constant), then per chunk the transformed inputs
 * V[16][T][CI], the products
 * M[16][T][CO], the GEMM's packing area and (reducing) a slice of C, then the chunks' partial
 * results. */
static int gm_winograd(CpuCg *cg, HInstr *in, const HInstr *hero, const HInstr *red, const GmProb *p, const GmCfg *c,
                       int64_t stage_bytes, int64_t want) {
  const int64_t *geo = p->geo;
  int64_t CI = geo[GC_CI], CO = p->N, OW = geo[GC_OW], OHW = geo[GC_OHW], OH = OHW / OW;
  int64_t NB = p->M / OHW, TR = (OH + 1) / 2, TC = (OW + 1) / 2, Q = NB * TR;
  /* tile rows per slice: 16 * tiles * (CI + CO) floats near 1 MiB, at least 2 * MR tiles */
  int64_t tgt = ((int64_t)1 << 20) / (64 * (CI + CO));
  if (tgt < 2 * c->mr) tgt = 2 * c->mr;
  if (c->wino > 1) tgt = c->wino;
  int64_t g0 = (tgt + TC - 1) / TC, gq = g0;
  if (c->wino <= 1) {
    /* within half of that either way, the fewest rows computed for nothing by the products
       (M = tiles: a last panel of more than GM_TAIL_ROWS rows is padded to MR; one of fewer
       runs the short kernel, counted at twice its rows), the nearest to it on a tie:
       resnet_block's 14 tiles a row, 5 rows (70 tiles, a last panel of 10) -> 6 (84) */
    double best = 1e9;
    for (int64_t g = g0 - g0 / 2; g <= g0 + g0 / 2 && g <= Q; g++) {
      int64_t t = g * TC, r = t % c->mr, cost = t - r + (r == 0 ? 0 : r <= GM_TAIL_ROWS ? 2 * r : c->mr);
      double w = (double)cost / (double)t;
      if (w < best - 1e-9 || (w < best + 1e-9 && llabs(g - g0) < llabs(gq - g0))) best = w, gq = g;
    }
  }
  if (gq > Q) gq = Q;
  int64_t T = gq * TC, items = (Q + gq - 1) / gq;
  int64_t nchunks = want <= 1 ? 1 : items < want ? items : want;
  /* the taps' transform: at compile time for constant taps (frozen weights), into read-only
     data; else a kernel of its own each run, into U in the private scratch */
  LLVMValueRef uconst = gm_wino_const_taps(cg, c, p), chunk, lo, hi;
  int64_t ublk = CI * gm_roundup(CO, c->nr), u_bytes = uconst ? 0 : memplan_align(16 * ublk * 4);
  int64_t v_bytes = memplan_align(16 * T * CI * 4);
  int64_t m_bytes = memplan_align(16 * T * CO * 4), pack = gm_pack_bytes(c, T, CO, CI, false);
  int64_t slice_bytes = red ? memplan_align(2 * gq * OW * CO * 4) : 0, per = v_bytes + m_bytes + pack + slice_bytes;
  int64_t u_off = stage_bytes, ch_off = u_off + u_bytes, part_off = ch_off + nchunks * per;
  int64_t part_bytes = red ? memplan_align(hlo_shape_elems(&red->shape) * 4) : 0;
  int64_t need = part_off + nchunks * part_bytes;
  if (need > cg->extra_temp) cg->extra_temp = need;

  /* taps that are an entry parameter: the caller may pass them transformed ahead of the runs
     (NAME_pack); then the taps' kernel does nothing and the products read them there */
  int64_t pk_off = uconst ? -1 : gm_pack_job(cg, p, 0, 0);
  if (!uconst) {
    int64_t uch = CI < 16 ? CI : 16;
    CpuKern *kt = cpu_kern_begin(cg, in);
    LLVMValueRef Ut = cpu_slot(kt, (CpuSlot){CPU_SLOT_TEMP, NULL, NULL, cg->temp_base + u_off});
    gm_chunk_items(kt, CI, uch, &chunk, &lo, &hi);
    LLVMValueRef pkb = gm_packed_base(kt, pk_off);
    if (pkb) hi = LLVMBuildSelect(kt->B, LLVMBuildIsNull(kt->B, pkb, ""), hi, lo, "");
    gm_wino_taps(kt, c, gm_view_ptr(kt, &p->b), Ut, lo, hi, CI, CO, p->wk);
    if (!cpu_kern_end(kt, uch)) return -1;
    cg->tasks[cg->ntasks - 1].whole = uch > 1;
    cg->tasks[cg->ntasks - 1].note = "Winograd taps";
  }

  /* the convolution */
  CpuKern *k = cpu_kern_begin(cg, in);
  LLVMBuilderRef B = k->B;
  const HInstr *fusion = hero == in ? NULL : in;
  if (fusion) k->bind[k->nbind++] = (CpuBind){in->calls[0], in, NULL, 0, 0};
  LLVMValueRef X = gm_view_ptr(k, &p->a), C = red ? NULL : cpu_buffer(k, in);
  LLVMValueRef U = uconst ? cpu_slot(k, (CpuSlot){CPU_SLOT_GLOBAL, NULL, uconst, 0})
                          : cpu_slot(k, (CpuSlot){CPU_SLOT_TEMP, NULL, NULL, cg->temp_base + u_off});
  if (pk_off >= 0) U = gm_or_packed(k, gm_packed_base(k, pk_off), pk_off, gi(k, 0), U);
  LLVMValueRef scratch = cpu_slot(k, (CpuSlot){CPU_SLOT_TEMP, NULL, NULL, cg->temp_base + ch_off});
  gm_chunk_items(k, items, nchunks, &chunk, &lo, &hi);
  LLVMValueRef base = LLVMBuildInBoundsGEP2(B, cg->i8, scratch, (LLVMValueRef[]){gmul(k, chunk, gi(k, per))}, 1, "");
  LLVMValueRef Vb = base;
  LLVMValueRef Mb = LLVMBuildInBoundsGEP2(B, cg->i8, base, (LLVMValueRef[]){gi(k, v_bytes)}, 1, "");
  LLVMValueRef packp = LLVMBuildInBoundsGEP2(B, cg->i8, base, (LLVMValueRef[]){gi(k, v_bytes + m_bytes)}, 1, "");
  LLVMValueRef Cs = NULL, P = NULL;
  if (red) {
    Cs = LLVMBuildInBoundsGEP2(B, cg->i8, base, (LLVMValueRef[]){gi(k, v_bytes + m_bytes + pack)}, 1, "");
    P = LLVMBuildInBoundsGEP2(B, cg->i8, scratch, (LLVMValueRef[]){gadd(k, gi(k, part_off - ch_off), gmul(k, chunk, gi(k, part_bytes)))}, 1, "");
    gm_reduce_init(k, red, P, part_bytes);
  }
  LLVMValueRef itv = gvar(k, lo);
  GWhile lit;
  LLVMValueRef it = gwhile_open(k, &lit, itv, hi, "wino", "winob", "winoe");
  LLVMBuildStore(B, gadd(k, it, gi(k, 1)), itv);
  int cache_mark = k->ncache;
  LLVMValueRef q0 = gmul(k, it, gi(k, gq)), q1 = gmin(k, gadd(k, q0, gi(k, gq)), gi(k, Q));
  /* the slice's output pixels [s0, s1): tile row q covers rows 2 (q % TR) .. of image q / TR */
  LLVMValueRef sq[2], qq[2] = {q0, q1};
  for (int e = 0; e < 2; e++)
    sq[e] = gmul(k, gadd(k, gmul(k, LLVMBuildSDiv(B, qq[e], gi(k, TR), ""), gi(k, OH)),
                         gmin(k, gmul(k, LLVMBuildSRem(B, qq[e], gi(k, TR), ""), gi(k, 2)), gi(k, OH))),
                 gi(k, OW));
  /* C as the output transform sees it: the output, or the slice buffer standing for rows
     [s0, s1) */
  LLVMValueRef Cw = red ? LLVMBuildGEP2(B, cg->f32, Cs, (LLVMValueRef[]){gsub(k, gi(k, 0), gmul(k, sq[0], gi(k, CO)))}, 1, "") : C;
  LLVMValueRef ia[15] = {X, Vb, q0, q1, gi(k, CI), gi(k, T), gi(k, TC), gi(k, TR), gi(k, geo[GC_H]), gi(k, geo[GC_W]),
                         gi(k, geo[GC_PH]), gi(k, geo[GC_PW]), gi(k, geo[GC_XSH]), gi(k, geo[GC_XSW]), gi(k, geo[GC_XSB])};
  gm_wino_call(k, GW_IN, ia);
  {
    /* the 16 products M[xi] = V[xi] U[xi] */
    CpuLoop lx;
    LLVMValueRef xi = gloop(k, &lx, gi(k, 0), gi(k, 16), 1);
    LLVMValueRef args[GP_COUNT];
    args[GP_M] = gmul(k, gsub(k, q1, q0), gi(k, TC));
    args[GP_N] = gi(k, CO);
    args[GP_K] = gi(k, CI);
    args[GP_A] = gfp(k, Vb, gmul(k, xi, gi(k, T * CI)));
    args[GP_ARS] = gi(k, CI);
    args[GP_ACS] = gi(k, 1);
    args[GP_B] = LLVMConstNull(cg->ptr);
    args[GP_BRS] = gi(k, CO);
    args[GP_BCS] = gi(k, 1);
    args[GP_C] = gfp(k, Mb, gmul(k, xi, gi(k, T * CO)));
    args[GP_LDC] = gi(k, CO);
    args[GP_PACK] = packp;
    args[GP_CONV] = args[GP_APRE] = LLVMConstNull(cg->ptr);
    args[GP_BPRE] = gfp(k, U, gmul(k, xi, gi(k, ublk)));
    args[GP_BKEEP] = gi(k, 0);
    LLVMBuildCall2(B, gm_fn_type(cg), gm_function(cg), args, GP_COUNT, "");
    gm_close(k, &lx);
  }
  LLVMValueRef oa[10] = {Mb, Cw, q0, q1, gi(k, CO), gi(k, T), gi(k, TC), gi(k, TR), gi(k, OH), gi(k, OW)};
  gm_wino_call(k, GW_OUT, oa);
  if (fusion && !k->failed) {
    LLVMValueRef lidx[HLO_MAX_RANK] = {0};
    gm_epilogue(k, in, hero, red, p, lidx, sq[0], sq[1], gi(k, 0), gi(k, CO), red ? Cw : C, P);
  }
  k->ncache = cache_mark;
  gwhile_close(k, &lit);
  if (!cpu_kern_end(k, nchunks)) return -1;
  cg->tasks[cg->ntasks - 1].whole = nchunks > 1 && !red;
  cg->tasks[cg->ntasks - 1].note = "Winograd";
  if (red && !gm_reduce_finish(cg, in, red, part_off, part_bytes, nchunks)) return -1;
  return 1;
}

void cpu_gemm_pack_function(CpuCg *cg) {
  char name[512];
  snprintf(name, sizeof name, "%s_pack", cg->o->name);
  LLVMTypeRef ps[2] = {cg->ptr, cg->ptr};
  LLVMBasicBlockRef saved = LLVMGetInsertBlock(cg->B);
  CpuKern *k = gm_fn_begin(cg, name, LLVMFunctionType(cg->i32, ps, 2, 0));
  LLVMValueRef fn = k->fn;
  LLVMSetLinkage(fn, LLVMExternalLinkage); /* part of the interface */
  LLVMBasicBlockRef bad = LLVMAppendBasicBlockInContext(cg->C, fn, "bad");
  LLVMBasicBlockRef go = LLVMAppendBasicBlockInContext(cg->C, fn, "go");
  LLVMBuilderRef B = cg->B;
  LLVMValueRef args = LLVMGetParam(fn, 0), packed = LLVMGetParam(fn, 1), nul = LLVMConstNull(cg->ptr);
  LLVMValueRef isbad = LLVMBuildICmp(B, LLVMIntNE, LLVMBuildAnd(B, LLVMBuildPtrToInt(B, packed, cg->i64, ""), gi(k, 63), ""), gi(k, 0), "");
  if (cg->npacks) {
    isbad = LLVMBuildOr(B, isbad, LLVMBuildICmp(B, LLVMIntEQ, args, nul, ""), "");
    isbad = LLVMBuildOr(B, isbad, LLVMBuildICmp(B, LLVMIntEQ, packed, nul, ""), "");
  }
  LLVMBuildCondBr(B, isbad, bad, go);
  LLVMPositionBuilderAtEnd(B, bad);
  LLVMBuildRet(B, LLVMConstInt(cg->i32, 1, 0));
  LLVMPositionBuilderAtEnd(B, go);
  /* (the functions called are made on first use; their makers leave the builder where it was) */
  GmCfg c = gm_cfg(cg);
  for (int i = 0; i < cg->npacks; i++) {
    const CpuPackJob *j = &cg->packs[i];
    LLVMValueRef ix = gi(k, j->param);
    LLVMValueRef X = LLVMBuildLoad2(B, cg->ptr, LLVMBuildInBoundsGEP2(B, cg->ptr, args, &ix, 1, ""), "");
    if (j->kind == 1) {
      /* a Winograd convolution's taps, transformed for all input channels */
      gm_wino_taps(k, &c, gfp(k, X, gi(k, j->off)), LLVMBuildInBoundsGEP2(B, cg->i8, packed, (LLVMValueRef[]){gi(k, j->dst)}, 1, ""),
                   gi(k, 0), gi(k, j->K), j->K, j->N, j->wk);
      continue;
    }
    int64_t ks = gm_kstep(&c, j->K), nkb = (j->K + ks - 1) / ks;
    LLVMValueRef pf = gm_packx_function(cg, true);
    for (int64_t xi = 0; xi < j->nnb; xi++) {
      int64_t x0 = xi * j->nblk, x1 = gm_min(x0 + j->nblk, j->N);
      LLVMValueRef a[GB_COUNT];
      a[GB_X] = gfp(k, X, gi(k, j->off + x0 * j->cs));
      a[GB_RS] = gi(k, j->rs);
      a[GB_CS] = gi(k, j->cs);
      a[GB_N] = gi(k, x1 - x0);
      a[GB_K] = gi(k, j->K);
      a[GB_DST] = LLVMBuildInBoundsGEP2(B, cg->i8, packed, (LLVMValueRef[]){gi(k, j->dst + x0 * j->K * 4)}, 1, "");
      a[GB_KB0] = gi(k, 0);
      a[GB_KB1] = gi(k, nkb);
      LLVMBuildCall2(B, LLVMGlobalGetValueType(pf), pf, a, GB_COUNT, "");
    }
  }
  LLVMBuildRet(B, LLVMConstInt(cg->i32, 0, 0));
  if (saved) LLVMPositionBuilderAtEnd(cg->B, saved);
}

int cpu_gemm_kernel(CpuCg *cg, HInstr *in, const HInstr *hero) {
  if (getenv("HLOC_CPU_NO_GEMM")) return 0;
  const HInstr *fusion = hero == in ? NULL : in;
  /* a fusion reducing the epilogue: the product is computed in slices into private scratch,
     each slice reduced into its chunk's partial results, which a last kernel combines */
  const HInstr *red = fusion ? gm_reduce_root(in, hero) : NULL;
  /* (partial results per chunk: a reduction keeping many elements goes to the generic kernels) */
  if (red && hlo_shape_elems(&red->shape) > GM_RED_KEEP) return 0;
  GmProb p;
  memset(&p, 0, sizeof p);
  /* operands as views where possible, else staged row-major (which makes them mergeable) */
  bool ok = false;
  /* a convolution Winograd may take is first seen as such (B through any strides); the
     implicit GEMM's view is the fallback (gm_wino_fits) */
  for (int wino = hero->op == OP_CONVOLUTION && gm_wino_conv(cg, hero); wino >= 0 && !ok; wino--)
    for (int stage = 0; stage < 4 && !ok; stage++) {
      memset(&p, 0, sizeof p);
      ok = hero->op == OP_DOT ? gm_dot_prob(cg, fusion, hero, stage, &p)
                              : gm_conv_prob(cg, fusion, hero, stage, wino, &p);
      if (ok && wino && !gm_wino_fits(&p)) ok = false;
    }
  if (!ok || p.M < 1 || p.N < 1) return 0;
  GmCfg c = gm_cfg(cg);
  /* work items: (loop index, row block, column block) */
  int64_t nb = 1;
  for (int j = 0; j < p.nloop; j++) nb *= p.lext[j];
  double flops = 2.0 * (double)nb * (double)p.M * (double)p.N * (double)p.K;
  int64_t min = cg->o->par_min_elems > 0 ? cg->o->par_min_elems : 32768;
  int64_t want = flops / 64.0 < (double)min ? 1 : flops < 2.5e8 ? 4 : 8;
  const char *tune = getenv("HLOC_CPU_GEMM_CHUNKS"); /* experiments: chunks of a split product */
  bool tuned = want > 1 && tune && atoi(tune) > 0;
  if (tuned) want = atoi(tune);
  int64_t mblk = p.M, nblk = p.N;
  if (nblk > c.nc) nblk = c.nc;
  if (!p.conv && p.N > c.nc) {
    /* column blocks of equal width (3072 columns: 1536 + 1536, not 2048 + 1024), so items,
       and the chunks made of them, do equal work */
    int64_t q = (p.N + c.nc - 1) / c.nc;
    nblk = gm_roundup((p.N + q - 1) / q, c.nr);
  }
  int64_t nblk0 = nblk; /* before any split */
  if (want > 1) {
    /* split until there are enough items, halving first the dimension whose split repacks
       the smaller operand (a row split repacks B, a column split repacks A) */
    bool cols_first = p.M * p.K <= p.K * p.N;
    for (int pass = 0; pass < 2; pass++) {
      bool cols = (pass == 0) == cols_first;
      while (nb * ((p.M + mblk - 1) / mblk) * ((p.N + nblk - 1) / nblk) < want) {
        if (cols && nblk >= 4 * c.nr) nblk = gm_roundup((nblk + 1) / 2, c.nr);
        else if (!cols && mblk >= 4 * c.mr) mblk = gm_roundup((mblk + 1) / 2, c.mr);
        else break;
      }
    }
  }
  int64_t nmb = (p.M + mblk - 1) / mblk, nnb = (p.N + nblk - 1) / nblk;
  int64_t items = nb * nmb * nnb;
  /* up to twice as many items as chunks wanted: one chunk per item, rather than chunks of one
     and two items (12 items in 8 chunks leave 2 threads with 7 and 5) */
  int64_t nchunks = items <= 2 * want && !tuned ? items : items < want ? items : want;
  if (want <= 1) nchunks = 1;
  if (nchunks < 1) nchunks = 1;
  /* A dot whose B is read packed (frozen weights, packed at compile time, or weights the
     caller packed ahead, known at run time) repacks nothing when its rows are split: when the
     split above narrowed the column blocks (only the columns split, A packed once ahead), a
     run with B packed splits into as many items of rows of the full-width column blocks
     instead (alt: A packed once ahead for those row blocks), and its serial run makes one
     call per full-width column block with A packed once ahead (for all the rows). The
     packed B is laid out for the full-width blocks. mlp with its weights packed ahead, two
     cores: on the device host's Xeon (ten interleaved rounds, A then packed in the chunks'
     calls) 3.80 -> 3.36 ms median, 3.34 -> 3.27 fastest; on the development VM 3.51 -> 3.36,
     then 2.99 -> 2.89 with A packed once ahead per row block. One core: level. */
  int64_t nnb0 = (p.N + nblk0 - 1) / nblk0, mblk1 = p.M;
  while (nnb0 * ((p.M + mblk1 - 1) / mblk1) < items && mblk1 >= 4 * c.mr) mblk1 = gm_roundup((mblk1 + 1) / 2, c.mr);
  int64_t nmb1 = (p.M + mblk1 - 1) / mblk1;
  bool alt = !p.conv && nb == 1 && !red && nchunks > 1 && nblk < nblk0 && nmb == 1 && nnb0 * nmb1 == items && p.N > c.nc &&
             (gm_view_const(&p.b) || gm_pack_param(cg, &p) >= 0) && !getenv("HLOC_CPU_GEMM_NO_PREPACK") &&
             !getenv("HLOC_CPU_GEMM_NO_ALT");
  int64_t lnblk = alt ? nblk0 : nblk, lnnb = alt ? nnb0 : nnb; /* the packed B's column blocks */
  /* rows: a chunk's call can span several consecutive row blocks (and the serial run all of
     them), so its A block is sized for the whole M, not for mblk */
  int64_t pack = gm_pack_bytes(&c, p.M, nblk, p.K, p.conv);
  /* private scratch: staged operands, then one packing area per chunk */
  int64_t stage_bytes = 0;
  GmView *ops[2] = {&p.a, &p.b};
  for (int j = 0; j < 2; j++)
    if (ops[j]->staged == -2) {
      int64_t off = stage_bytes;
      stage_bytes += memplan_align((int64_t)hlo_shape_bytes(&ops[j]->base->shape));
      if (!gm_stage(cg, in, ops[j]->base, off, ops[j])) return -1;
    }
  /* a product of a few microseconds' work (at most GM_TINY_MACS multiply-adds) takes the
     blocked GEMM when it is prebuilt: the few-rows and few-columns kernels are made for each
     product and cost 5-15 ms of compilation each (the training step's three dense-layer
     products: 0.198 -> 0.174 s of CPU in all), for nothing measurable at run time */
  bool tiny = cg->prebuilt && nb * p.M * p.N * p.K <= GM_TINY_MACS;
  if (!tiny && !red && gm_small_m_fits(&c, &p)) return gm_small_m(cg, in, hero, &p, &c, nb, want, stage_bytes);
  if (!tiny && !red && gm_few_n_fits(&c, &p)) return gm_few_n(cg, in, hero, &p, &c, want, stage_bytes);
  if (p.wino) return gm_winograd(cg, in, hero, red, &p, &c, stage_bytes, want);
  /* a dot split over several chunks that would each pack the same operand (B when the rows
     are split, A when only the columns are) packs it once, in a kernel of its own run before
     the GEMM's (chunks over the operand's blocks and K blocks). The serial run (the whole
     work at once) skips it for B, which its calls pack once per block anyway, and uses the
     packed A, which its calls (one per column block) would each pack again. */
  int pre = 0; /* 1: B packed beforehand, 2: A */
  int64_t kstep = gm_kstep(&c, p.K), nkb = p.K < 1 ? 1 : (p.K + kstep - 1) / kstep;
  LLVMValueRef bconst = !p.conv && nb == 1 ? gm_const_packed_b(cg, &c, &p, lnblk, lnnb, kstep) : NULL;
  if (!p.conv && nb == 1 && nchunks > 1 && !getenv("HLOC_CPU_GEMM_NO_PREPACK"))
    pre = !bconst ? (nmb > 1 ? 1 : nnb > 1 ? 2 : 0) : (nmb == 1 && nnb > 1 ? 2 : 0);
  int64_t pre_off = stage_bytes + pack * nchunks, pre_bytes = 0, Kp = p.K < 1 ? 1 : p.K;
  if (pre == 1) pre_bytes = (nnb > 1 ? nnb * nblk : gm_roundup(p.N, c.nr)) * Kp * 4;
  if (pre == 2) pre_bytes = gm_roundup(p.M, c.mr) * Kp * 4;
  int64_t need = pre_off + memplan_align(pre_bytes);
  /* the serial run of a dot split by columns with A packed beforehand makes one call over all
     its columns instead of one per chunk's block (with N within one column block of the GEMM,
     A is then packed once, inside the call, each block used while in cache; the packing
     kernel does nothing in that run), in the chunks' packing areas, which that run does not
     use otherwise, when they hold it (else in an area of its own after the rest). Not with a
     B packed at compile time: its layout is per chunk's column block (its K blocks within
     each), which a call over all the columns would read as one block */
  bool merge = pre == 2 && !red && !bconst && p.N <= c.nc;
  int64_t merge_bytes = merge ? gm_pack_bytes(&c, p.M, p.N, p.K, false) : 0;
  bool merge_apart = merge_bytes > pack * nchunks; /* else at chunk 0's, the serial run's own */
  int64_t merge_off = need;
  if (merge_apart) need += merge_bytes;
  /* reducing: a slice buffer (2 * MC rows of C) and the partial results per chunk */
  bool resident = gm_resident(&c, nblk, p.K);
  int64_t slice_rows = gm_min(2 * c.mc, p.M), slice_off = need, slice_bytes = memplan_align(slice_rows * p.ldc * 4);
  int64_t part_off = slice_off + nchunks * slice_bytes, part_bytes = red ? memplan_align(hlo_shape_elems(&red->shape) * 4) : 0;
  if (red) need = part_off + nchunks * part_bytes;
  if (need > cg->extra_temp) cg->extra_temp = need;
  /* B an entry parameter: the caller may pass it packed ahead of the runs (NAME_pack,
     NAME_run_packed), in the layout of a B packed beforehand for the items' column blocks;
     when it does, nothing packs B (the packing kernel below does nothing). Not where the
     serial run merges the column blocks into one call, which reads B as one block */
  int64_t pk_off = !bconst && !merge && nb == 1 ? gm_pack_job(cg, &p, lnblk, lnnb) : -1;
  if (pre) {
    /* B: chunk (column block of the items, K block); A: (MC row block, K block) */
    int64_t nx = pre == 1 ? nnb : (p.M + c.mc - 1) / c.mc, xb = pre == 1 ? nblk : c.mc;
    int64_t pch = (alt && nmb1 > nx ? nmb1 : nx) * nkb;
    if (pch < 2) pch = 2;
    CpuKern *k = cpu_kern_begin(cg, in);
    LLVMBuilderRef B = k->B;
    LLVMValueRef X = gm_view_ptr(k, pre == 1 ? &p.b : &p.a);
    LLVMValueRef dst = cpu_slot(k, (CpuSlot){CPU_SLOT_TEMP, NULL, NULL, cg->temp_base + pre_off});
    /* a chunk packs its block, [c0, c1); nothing when B comes packed (pre == 1). With alt,
       the serial run (the task's whole call, chunk pch) packs every block, and a parallel
       run with B packed packs A for alt's row blocks (mblk1 rows each, laid out as a call
       starting at the block's first row reads it: MC blocks within) */
    LLVMValueRef v_xb = gi(k, xb), v_nx = gi(k, nx);
    LLVMValueRef c0 = k->chunk, c1 = NULL, skip = NULL;
    LLVMValueRef pks = gm_packed_base(k, pk_off);
    if (pre == 1 && pks) skip = LLVMBuildIsNotNull(B, pks, "");
    LLVMValueRef serial = NULL;
    if (alt) {
      serial = LLVMBuildICmp(B, LLVMIntEQ, k->chunk, gi(k, pch), "");
      LLVMValueRef pkv = gm_b_packed(k, bconst, pks);
      LLVMValueRef rows = LLVMBuildAnd(B, pkv, LLVMBuildNot(B, serial, ""), "");
      v_xb = LLVMBuildSelect(B, rows, gi(k, mblk1), v_xb, "");
      v_nx = LLVMBuildSelect(B, rows, gi(k, nmb1), v_nx, "");
      c0 = LLVMBuildSelect(B, serial, gi(k, 0), c0, "");
    }
    LLVMValueRef nxk = gmul(k, v_nx, gi(k, nkb));
    c1 = gmin(k, gadd(k, k->chunk, gi(k, 1)), nxk);
    if (serial) c1 = LLVMBuildSelect(B, serial, nxk, c1, "");
    if (skip) c1 = LLVMBuildSelect(B, skip, c0, c1, "");
    CpuLoop lcc;
    LLVMValueRef cc = gloop(k, &lcc, c0, c1, 1);
    LLVMValueRef xi = LLVMBuildSDiv(B, cc, gi(k, nkb), ""), kb = LLVMBuildSRem(B, cc, gi(k, nkb), "");
    int64_t ext = pre == 1 ? p.N : p.M;
    LLVMValueRef x0 = gmul(k, xi, v_xb), x1 = gmin(k, gadd(k, x0, v_xb), gi(k, ext));
    LLVMValueRef a[GB_COUNT];
    a[GB_X] = gfp(k, X, gmul(k, x0, gi(k, pre == 1 ? p.bcs : p.ars)));
    a[GB_RS] = gi(k, pre == 1 ? p.brs : p.ars);
    a[GB_CS] = gi(k, pre == 1 ? p.bcs : p.acs);
    a[GB_N] = gsub(k, x1, x0);
    a[GB_K] = gi(k, p.K);
    a[GB_DST] = gfp(k, dst, gmul(k, x0, gi(k, p.K)));
    a[GB_KB0] = kb;
    a[GB_KB1] = gadd(k, kb, gi(k, 1));
    LLVMValueRef pf = gm_packx_function(cg, pre == 1);
    LLVMBuildCall2(B, LLVMGlobalGetValueType(pf), pf, a, GB_COUNT, "");
    gm_close(k, &lcc);
    if (!cpu_kern_end(k, pch)) return -1;
    /* the serial run: nothing to do for B (unless reducing: its chunks run one by one and
       read the packed B); A is used by every column block, once packed */
    cg->tasks[cg->ntasks - 1].whole = (pre == 1 && !red) || merge || alt;
    cg->tasks[cg->ntasks - 1].note = pre == 1 ? "B packed" : "A packed";
  }

  CpuKern *k = cpu_kern_begin(cg, in);
  LLVMBuilderRef B = k->B;
  if (fusion) k->bind[k->nbind++] = (CpuBind){in->calls[0], in, NULL, 0, 0};
  /* a B packed at compile time is all the calls read: the constant itself is not referenced
     (and leaves the object when nothing else reads it) */
  LLVMValueRef A = gm_view_ptr(k, &p.a), Bm = bconst ? LLVMConstNull(cg->ptr) : gm_view_ptr(k, &p.b);
  LLVMValueRef C = red ? NULL : cpu_buffer(k, in);
  LLVMValueRef scratch = cpu_slot(k, (CpuSlot){CPU_SLOT_TEMP, NULL, NULL, cg->temp_base + stage_bytes});
  LLVMValueRef geo = NULL;
  if (p.conv) {
    geo = cpu_alloca(k, LLVMArrayType2(cg->i64, GC_COUNT));
    for (int j = 0; j < GC_M0; j++) {
      LLVMValueRef ix = gi(k, j);
      LLVMBuildStore(B, gi(k, p.geo[j]), LLVMBuildInBoundsGEP2(B, cg->i64, geo, &ix, 1, ""));
    }
  }
  /* items of this chunk: [chunk * items / nchunks, (chunk + 1) * items / nchunks), ordered
     (loop index, column block, row block); consecutive row blocks of one column block are
     done by one GEMM call (B packed once); chunk nchunks (the serial run) does every item
     with the packing area of chunk 0 */
  LLVMValueRef chunk, lo, hi;
  LLVMValueRef pkd = gm_packed_base(k, pk_off);
  /* the items' blocks: mblk x nblk, nmb x nnb of them; with alt and B packed, rows of
     full-width column blocks (chunks) or the full-width blocks (the serial run) */
  LLVMValueRef v_mblk = gi(k, mblk), v_nblk = gi(k, nblk), v_nmb = gi(k, nmb), v_nnb = gi(k, nnb), v_items = gi(k, items);
  LLVMValueRef use1 = NULL; /* alt's chunks (rows of full-width blocks) */
  if (alt) {
    LLVMValueRef pkv = gm_b_packed(k, bconst, pkd);
    LLVMValueRef ser = LLVMBuildICmp(B, LLVMIntSGE, k->chunk, gi(k, nchunks), "");
    use1 = LLVMBuildAnd(B, pkv, LLVMBuildNot(B, ser, ""), "");
    v_mblk = LLVMBuildSelect(B, use1, gi(k, mblk1), v_mblk, "");
    v_nmb = LLVMBuildSelect(B, use1, gi(k, nmb1), v_nmb, "");
    v_nblk = LLVMBuildSelect(B, pkv, gi(k, nblk0), v_nblk, "");
    v_nnb = LLVMBuildSelect(B, pkv, gi(k, nnb0), v_nnb, "");
    v_items = LLVMBuildSelect(B, LLVMBuildAnd(B, pkv, ser, ""), gi(k, nnb0), v_items, "");
  }
  LLVMValueRef whole = gm_chunk_items_v(k, v_items, nchunks, &chunk, &lo, &hi);
  LLVMValueRef packp = LLVMBuildInBoundsGEP2(B, cg->i8, scratch, (LLVMValueRef[]){gmul(k, chunk, gi(k, pack))}, 1, "");
  /* reducing: the chunk's slice buffer and its partial results, which start from the
     reducer's identity (offsets in the private scratch, as scratch's own) */
  LLVMValueRef Cs = NULL, P = NULL;
  if (red) {
    Cs = LLVMBuildInBoundsGEP2(B, cg->i8, scratch, (LLVMValueRef[]){gadd(k, gi(k, slice_off - stage_bytes), gmul(k, chunk, gi(k, slice_bytes)))}, 1, "");
    P = LLVMBuildInBoundsGEP2(B, cg->i8, scratch, (LLVMValueRef[]){gadd(k, gi(k, part_off - stage_bytes), gmul(k, chunk, gi(k, part_bytes)))}, 1, "");
    gm_reduce_init(k, red, P, part_bytes);
  }
  LLVMValueRef itv = gvar(k, lo);
  GWhile items_loop;
  LLVMValueRef it = gwhile_open(k, &items_loop, itv, hi, "item", "itemb", "iteme");
  int cache_mark = k->ncache;
  LLVMValueRef mi = LLVMBuildSRem(B, it, v_nmb, "");
  LLVMValueRef rest = LLVMBuildSDiv(B, it, v_nmb, "");
  LLVMValueRef ni = LLVMBuildSRem(B, rest, v_nnb, "");
  LLVMValueRef bi = LLVMBuildSDiv(B, rest, v_nnb, "");
  LLVMValueRef gend = gmin(k, hi, gmul(k, gadd(k, rest, gi(k, 1)), v_nmb));
  LLVMValueRef mlast = LLVMBuildSRem(B, gsub(k, gend, gi(k, 1)), v_nmb, "");
  LLVMBuildStore(B, merge ? LLVMBuildSelect(B, whole, hi, gend, "") : gend, itv);
  LLVMValueRef lidx[HLO_MAX_RANK], offa, offb, offc;
  gm_loop_offsets(k, &p, bi, lidx, &offa, &offb, &offc);
  LLVMValueRef m0 = gmul(k, mi, v_mblk), n0 = gmul(k, ni, v_nblk);
  LLVMValueRef m1 = gmin(k, gmul(k, gadd(k, mlast, gi(k, 1)), v_mblk), gi(k, p.M)), n1 = gmin(k, gadd(k, n0, v_nblk), gi(k, p.N));
  if (merge) {
    n0 = LLVMBuildSelect(B, whole, gi(k, 0), n0, "");
    n1 = LLVMBuildSelect(B, whole, gi(k, p.N), n1, "");
    if (merge_apart)
      packp = LLVMBuildSelect(B, whole, cpu_slot(k, (CpuSlot){CPU_SLOT_TEMP, NULL, NULL, cg->temp_base + merge_off}), packp, "");
  }
  /* an output fusion with B resident: the rows in slices of 2 * MC, each finished (GEMM, then
     the epilogue) while its C block is in cache, B packed by the first slice only */
  bool slices = fusion && ((p.conv && resident) || red);
  CpuLoop lsl;
  LLVMValueRef s0 = m0, s1 = m1;
  if (slices) {
    s0 = gloop(k, &lsl, m0, m1, 2 * c.mc);
    s1 = gmin(k, gadd(k, s0, gi(k, 2 * c.mc)), m1);
  }
  LLVMValueRef args[GP_COUNT];
  args[GP_M] = gsub(k, s1, s0);
  args[GP_N] = gsub(k, n1, n0);
  args[GP_K] = gi(k, p.K);
  if (p.conv) {
    /* the packer decodes output pixels from s0 + row; the image is passed whole */
    args[GP_A] = gfp(k, A, offa);
    LLVMValueRef ix = gi(k, GC_M0);
    LLVMBuildStore(B, s0, LLVMBuildInBoundsGEP2(B, cg->i64, geo, &ix, 1, ""));
  } else {
    args[GP_A] = gfp(k, A, gadd(k, offa, gmul(k, s0, gi(k, p.ars))));
  }
  args[GP_ARS] = gi(k, p.ars);
  args[GP_ACS] = gi(k, p.acs);
  args[GP_B] = bconst ? Bm : gfp(k, Bm, gadd(k, offb, gmul(k, n0, gi(k, p.bcs))));
  args[GP_BRS] = gi(k, p.brs);
  args[GP_BCS] = gi(k, p.bcs);
  args[GP_C] = red ? gfp(k, Cs, n0) : gfp(k, C, gadd(k, offc, gadd(k, gmul(k, s0, gi(k, p.ldc)), n0)));
  args[GP_LDC] = gi(k, p.ldc);
  args[GP_PACK] = packp;
  args[GP_CONV] = p.conv ? geo : LLVMConstNull(cg->ptr);
  args[GP_BKEEP] = slices && p.conv && resident ? LLVMBuildZExt(B, LLVMBuildICmp(B, LLVMIntSGT, s0, m0, ""), cg->i64, "") : gi(k, 0);
  args[GP_BPRE] = args[GP_APRE] = LLVMConstNull(cg->ptr);
  if (bconst) args[GP_BPRE] = gfp(k, cpu_slot(k, (CpuSlot){CPU_SLOT_GLOBAL, NULL, bconst, 0}), gmul(k, n0, gi(k, p.K)));
  if (pre) {
    /* the call's block of the packed operand (A: all rows, pre == 2 means nmb == 1) */
    LLVMValueRef prep = cpu_slot(k, (CpuSlot){CPU_SLOT_TEMP, NULL, NULL, cg->temp_base + pre_off});
    if (pre == 1) prep = LLVMBuildSelect(B, whole, LLVMConstNull(cg->ptr), gfp(k, prep, gmul(k, n0, gi(k, p.K))), "");
    args[pre == 1 ? GP_BPRE : GP_APRE] = merge ? LLVMBuildSelect(B, whole, LLVMConstNull(cg->ptr), prep, "") : prep;
    /* alt's chunks: their row block's A, packed for a call starting at its first row */
    if (use1) args[GP_APRE] = LLVMBuildSelect(B, use1, gfp(k, prep, gmul(k, m0, gi(k, p.K))), args[GP_APRE], "");
  }
  if (pkd) args[GP_BPRE] = gm_or_packed(k, pkd, pk_off, gmul(k, n0, gi(k, p.K)), args[GP_BPRE]);
  LLVMBuildCall2(B, gm_fn_type(cg), gm_function(cg), args, GP_COUNT, "");
  if (fusion && !k->failed) {
    /* reducing: the slice buffer seen as the whole product (element (s0, 0) of the loop index
       at Cs) */
    LLVMValueRef V = !red ? C : LLVMBuildGEP2(B, cg->f32, Cs, (LLVMValueRef[]){gsub(k, gi(k, 0), gadd(k, offc, gmul(k, s0, gi(k, p.ldc))))}, 1, "");
    gm_epilogue(k, in, hero, red, &p, lidx, s0, s1, n0, n1, V, P);
  }
  if (slices) cpu_loop_close(k, &lsl);
  gwhile_close(k, &items_loop);
  k->ncache = cache_mark;
  if (!cpu_kern_end(k, nchunks)) return -1;
  /* reducing: every chunk runs, the serial run too (each fills its own partial results) */
  cg->tasks[cg->ntasks - 1].whole = nchunks > 1 && !red;
  if (red && !gm_reduce_finish(cg, in, red, part_off, part_bytes, nchunks)) return -1;
  return 1;
}

/* ------------------------------------------------------------------ the prebuilt library */

const char *cpu_gemm_isa(CpuCg *cg) {
  GmCfg c = gm_cfg(cg);
  static const char *const isa[2] = {"x86-64-v4", "x86-64-v3"};
  for (int i = 0; i < 2; i++) {
    const GmCfg *d = &gm_defaults[i];
    if (c.x86 && c.vw == d->vw && c.mr == d->mr && c.nr == d->nr && c.mc == d->mc && c.kc == d->kc &&
        c.nc == d->nc && c.direct == d->direct && c.order == d->order && c.pfb == d->pfb)
      return isa[i];
  }
  return NULL;
}

bool cpu_gemm_made(const CpuCg *cg) {
  bool any = cg->gemm_fn[0] || cg->gemm_rows_fn || cg->gemm_packa_fn || cg->gemm_packb_fn;
  for (int s = 0; s < GS_COUNT; s++) any |= cg->gemm_step_fn[s] != NULL;
  for (int w = 0; w < GW_COUNT; w++) any |= cg->wino_fn[w] != NULL;
  return any;
}

void cpu_gemm_library(CpuCg *cg) {
  LLVMValueRef fn[GS_COUNT + GW_COUNT + 4];
  int n = 0;
  fn[n++] = gm_function(cg); /* with every packing step (cg->lib) */
  for (int s = 0; s < GS_COUNT; s++) fn[n++] = cg->gemm_step_fn[s];
  fn[n++] = gm_packx_function(cg, true);
  fn[n++] = gm_packx_function(cg, false);
  fn[n++] = gm_rows_t_function(cg);
  for (int w = 0; w < GW_COUNT; w++) fn[n++] = gm_wino_function(cg, (GmWino)w);
  /* internal (local symbols of the object) and kept although nothing here calls them */
  LLVMValueRef arr = LLVMConstArray2(cg->ptr, fn, (uint64_t)n);
  LLVMValueRef u = LLVMAddGlobal(cg->M, LLVMTypeOf(arr), "llvm.compiler.used");
  LLVMSetInitializer(u, arr);
  LLVMSetLinkage(u, LLVMAppendingLinkage);
  LLVMSetSection(u, "llvm.metadata");
}
