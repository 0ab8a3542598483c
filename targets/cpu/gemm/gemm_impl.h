/* targets/cpu/gemm/gemm_impl.h: the CPU target's blocked GEMM, private interface.
 *
 * Dots and convolutions (alone, or the hero of an output fusion) whose operands are strided
 * views of f32 buffers (dots also of bf16 or f16 ones, GmElt) become calls of one shared
 * function per module and operand type that computes
 * C = A * B the way Goto and BLIS do: B is packed into NR-wide panels per (NC, KC) block, A
 * into MR-tall panels per (MC, KC) block, and a micro-kernel keeps an MR x NR tile of C in
 * vector registers across the K block, so that every loaded value feeds several FMAs and the
 * packed blocks stay in the caches they were sized for. Convolutions are implicit GEMMs: A is
 * packed (or read in place) straight from the input, rows being output pixels and K the
 * taps times input channels, so no im2col copy is ever made. Around the function sit the
 * kernels that call it (planning in plain C, then emission), the few-rows and few-columns
 * kernels that skip it where its tiles would be mostly padding, Winograd's F(2x2, 3x3) for
 * 3x3 convolutions, the weights packed at compile time or by the caller ahead of the runs,
 * and the prebuilt library that compiles the function once per x86 ISA level. The figures
 * behind the block sizes and paths are in docs/log/2026-12-01-gemm-design-figures.md.
 *
 * Sectioned by file:
 *   gemm_config.c the configuration for the target CPU (GmCfg, the x86 CPU table, block sizes)
 *   gemm_ir.c     IR builder helpers (loops, ifs, prefetches, the register transpose) and the
 *                 scaffolding of the GEMM's internal functions
 *   micro_fma.c   the broadcast-FMA micro-kernel family (AVX-512, AVX2, SSE)
 *   pack.c        packing B and A from matrices; the packing step and whole-operand functions
 *   pack_conv.c   packing A from a convolution input (implicit GEMM), panels read in place
 *   gemm_fn.c     the GEMM function itself
 *   views.c       operand views and the GEMM problem (GmProb) of a dot or convolution
 *   plan.c        the kernel plan (GmPlan): chunks, blocks, scratch, in plain C
 *   kernel.c      cpu_gemm_kernel: staging, dispatch, the blocked kernels' emission
 *   epilogue.c    chunks of items, the output fusion's epilogue, reductions by blocks
 *   few.c         the few-rows and few-columns kernels
 *   pairs.c       the bf16 GEMM function on depth pairs: VNNI tile packing, blocking, C's edges
 *   amx.c         its blocks on AMX tiles (TDPBF16PS)
 *   dpbf16.c      its blocks on AVX512-BF16 vectors (VDPBF16PS)
 *   winograd.c    Winograd's F(2x2, 3x3) convolutions
 *   weights.c     B packed at compile time or ahead of the runs (NAME_pack)
 *   library.c     the GEMM's side of the prebuilt library */
#ifndef HLOC_GEMM_IMPL_H
#define HLOC_GEMM_IMPL_H

#include "../cpu_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct GmMicro;

/* The element type a GEMM function family reads its operands in. 16-bit floats are widened to
 * f32 where they are loaded (as they are packed, or in the few-rows kernels' loads), so the
 * panels and the micro-kernels stay f32 and one family of functions per type (GmState) reads
 * them; GE_F32's functions keep the names and code they had before the others existed. s8
 * operands (an s32 result) are widened the same way: their products are exact in f32 and so
 * are the sums of a K block (at most GM_S8_KC deep: |sum| <= 1024 * 128 * 128 = 2^24), which
 * the micro-kernel converts to s32 and adds in integers (GmTile.s32), so the result is
 * exact at any depth; the few-rows and few-columns kernels, which sum all of K in f32, do not
 * take them. */
typedef enum { GE_F32, GE_BF16, GE_F16, GE_S8, GE_COUNT } GmElt;
#define GM_S8_KC 1024

/* ------------------------------------------------------------------ gemm_config.c */

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
  const struct GmMicro *micro; /* the micro-kernel family that emits the tiles (micro_*.c) */
  bool const_pack; /* a constant B is packed at compile time (knob GEMM_NO_CONST_PACK clears it) */
  int chunks;      /* chunks of a split product (knob GEMM_CHUNKS); 0: 4 or 8 by its work */
  bool amx;        /* bf16 dots on AMX tiles (pairs.c, amx.c): the target has AMX-BF16 */
  bool dpbf16;     /* else on AVX512-BF16 (pairs.c, dpbf16.c): the target has it */
  bool amx_int8;   /* s8 dots on AMX tiles (TDPBSSD): the target has AMX-INT8 */
  bool dpbusd;     /* else on AVX512-VNNI (VPDPBUSD, dpbf16.c), and s8 products of few rows
                      (few_dp.c, AMX CPUs too): the target has it */
  bool amx_pf;     /* their packing of B prefetches rows ahead (knob GEMM_AMX) */
  bool amx_t1;     /* AMX's B tiles are loaded with the hint that they are not reused (past L1) */
  int amx_kc;      /* the depth of their K blocks (a multiple of 32) */
} GmCfg;

/* The GEMM's functions of a module: the packing steps (GmStep) and Winograd's transforms
 * (GmWino) are made once each, on first use. */
typedef enum { GS_PACK_B, GS_PACK_A, GS_PACK_CONV, GS_COUNT } GmStep;
typedef enum { GW_IN, GW_OUT, GW_U, GW_COUNT } GmWino;

/* The GEMM's state of one compilation (CpuCg.gemm), made with the configuration on first use:
 * the configuration and the functions made (or, with a prebuilt library, declared) so far. */
typedef struct GmState {
  GmCfg cfg;                                /* the configuration for the target CPU */
  LLVMValueRef fn[GE_COUNT];                /* the GEMM function per operand type (gm_function) */
  LLVMValueRef step_fn[GE_COUNT][GS_COUNT]; /* its block-packing steps (gm_step_function) */
  LLVMValueRef packb_fn[GE_COUNT]; /* B packed whole ahead of the GEMM (gm_packx_function) */
  LLVMValueRef packa_fn[GE_COUNT]; /* and A */
  LLVMValueRef rows_fn[GE_COUNT];  /* the row interleave of both packings (gm_rows_t_function) */
  LLVMValueRef wino_fn[GW_COUNT];  /* Winograd's transforms (gm_wino_function) */
  LLVMValueRef pairs_fn[GE_COUNT]; /* the GEMM functions on depth groups (gm_pairs_function) */
  LLVMValueRef pairs_packb_fn[GE_COUNT]; /* their B packed whole ahead (gm_pairs_packb_function) */
} GmState;

/* The level defaults: AVX-512, AVX and AVX2, others (cpu_gemm_isa compares with the first two). */
extern const GmCfg gm_defaults[3];

/* B stays resident (its whole K packed once per column block) when K * NC' (NC' = the column
 * block rounded to NR) is at most this many floats (1 MiB: the L2 or a share of L3). */
#define GM_RESIDENT (256 * 1024)
/* Rows of the micro-kernel's variant for a last panel that short (below MR). */
#define GM_TAIL_ROWS 4

GmState *gm_state(CpuCg *cg);
GmCfg gm_cfg(CpuCg *cg);
static inline int64_t gm_roundup(int64_t v, int64_t m) { return (v + m - 1) / m * m; }
static inline int64_t gm_min(int64_t a, int64_t b) { return a < b ? a : b; }
/* Whether convolution calls of at most N columns and depth K keep B resident (as the GEMM
 * function decides at run time for its N; dots keep the K blocks outermost). */
bool gm_resident(const GmCfg *c, int64_t N, int64_t K);
/* Bytes of packing scratch the GEMM function uses for products of at most M x N x K (conv:
 * implicit-GEMM convolution calls, which may keep B resident). */
int64_t gm_pack_bytes(const GmCfg *c, int64_t M, int64_t N, int64_t K, bool conv);
/* Depth of the K blocks of a product of depth K: K cut into blocks of equal depth (a multiple
 * of 8, at most KC), so there is no thin last block. gm_kstep_ir computes the same in IR. */
int64_t gm_kstep(const GmCfg *c, int64_t K);

/* ------------------------------------------------------------------ gemm_ir.c */

static inline LLVMValueRef gi(GenKern *k, int64_t v) { return gen_i64(k, v); }
static inline LLVMValueRef gadd(GenKern *k, LLVMValueRef a, LLVMValueRef b) {
  return LLVMBuildNSWAdd(k->B, a, b, "");
}
static inline LLVMValueRef gsub(GenKern *k, LLVMValueRef a, LLVMValueRef b) {
  return LLVMBuildNSWSub(k->B, a, b, "");
}
static inline LLVMValueRef gmul(GenKern *k, LLVMValueRef a, LLVMValueRef b) {
  return LLVMBuildNSWMul(k->B, a, b, "");
}
static inline LLVMValueRef gmin(GenKern *k, LLVMValueRef a, LLVMValueRef b) {
  return gen_smin(k, a, b);
}
static inline LLVMValueRef gslt(GenKern *k, LLVMValueRef a, LLVMValueRef b) {
  return LLVMBuildICmp(k->B, LLVMIntSLT, a, b, "");
}
/* &p[i] for f32 elements */
static inline LLVMValueRef gfp(GenKern *k, LLVMValueRef p, LLVMValueRef i) {
  return LLVMBuildInBoundsGEP2(k->B, k->cg->f32, p, &i, 1, "");
}
/* Operand elements of type e (gemm_ir.c): the GmElt of a dtype (GE_F32 for any but bf16 and
 * f16) and whether the GEMM reads it at all; e's memory type; &p[i]; n of them (0: a scalar;
 * align: f32's alignment) loaded at p and widened to f32, or those of the first lanes of mask;
 * f32 values v rounded to the 16-bit dtype dt where the product's result is stored. */
GmElt gm_elt(DType dt);
bool gm_elt_ok(DType dt);
LLVMTypeRef gm_elt_type(CpuCg *cg, GmElt e);
static inline LLVMValueRef gep_e(GenKern *k, GmElt e, LLVMValueRef p, LLVMValueRef i) {
  return e == GE_F32 ? gfp(k, p, i)
                     : LLVMBuildInBoundsGEP2(k->B, gm_elt_type(cpu_cg(k->cg), e), p, &i, 1, "");
}
LLVMValueRef gm_load_f32(GenKern *k, GmElt e, LLVMValueRef p, int n, unsigned align);
LLVMValueRef gm_masked_f32(GenKern *k, GmElt e, LLVMValueRef p, int n, LLVMValueRef mask);
static inline LLVMValueRef gload(GenKern *k, LLVMTypeRef t, LLVMValueRef p, unsigned align) {
  LLVMValueRef v = LLVMBuildLoad2(k->B, t, p, "");
  LLVMSetAlignment(v, align);
  return v;
}
static inline void gstore(GenKern *k, LLVMValueRef v, LLVMValueRef p, unsigned align) {
  LLVMSetAlignment(LLVMBuildStore(k->B, v, p), align);
}
/* &p[off] in bytes; a && b; a <= b (signed) */
static inline LLVMValueRef gbyte(GenKern *k, LLVMValueRef p, LLVMValueRef off) {
  return LLVMBuildInBoundsGEP2(k->B, k->cg->i8, p, &off, 1, "");
}
static inline LLVMValueRef gand(GenKern *k, LLVMValueRef a, LLVMValueRef b) {
  return LLVMBuildAnd(k->B, a, b, "");
}
static inline LLVMValueRef gsle(GenKern *k, LLVMValueRef a, LLVMValueRef b) {
  return LLVMBuildICmp(k->B, LLVMIntSLE, a, b, "");
}
static inline LLVMValueRef gvar(GenKern *k, LLVMValueRef init) {
  LLVMValueRef a = gen_alloca(k, LLVMTypeOf(init));
  LLVMBuildStore(k->B, init, a);
  return a;
}
static inline LLVMValueRef gget(GenKern *k, LLVMValueRef var) {
  return LLVMBuildLoad2(k->B, k->cg->i64, var, "");
}

/* while (*var < bound) { ... } over an i64 variable (an alloca) the body updates:
 * gwhile_open returns *var as read in the header and leaves the builder in the body;
 * gwhile_close branches back and continues after the loop. */
typedef struct GWhile {
  LLVMBasicBlockRef hdr, exit; /* blocks */
} GWhile;
LLVMValueRef gwhile_open(GenKern *k, GWhile *w, LLVMValueRef var, LLVMValueRef bound,
                         const char *hname, const char *bname, const char *ename);
void gwhile_close(GenKern *k, const GWhile *w);
/* if (c) { ...then... } [else { ... }]: the builder is left in the then block; gif_else moves
 * it to the else block, gif_close to the join block. */
typedef struct GIf {
  LLVMBasicBlockRef then_bb, else_bb, join; /* blocks */
} GIf;
void gif_open(GenKern *k, GIf *f, LLVMValueRef c, bool with_else);
void gif_else(GenKern *k, GIf *f);
void gif_close(GenKern *k, GIf *f);
/* A loop whose values are phis: a header entered from the current block (pre), a body and an
 * exit; the builder is left in the header, where the caller adds the phis and the test. */
typedef struct GPhiLoop {
  LLVMBasicBlockRef pre, hdr, body, done; /* blocks */
} GPhiLoop;
GPhiLoop gphi_open(GenKern *k, const char *hname, const char *bname, const char *dname);
/* gen_loop_open over [lo, hi) stepping by step; gm_close closes it as a loop LLVM must not
 * vectorize (gm_novec marks a back edge so). */
LLVMValueRef gloop(GenKern *k, GenLoop *l, LLVMValueRef lo, LLVMValueRef hi, int64_t step);
void gm_novec(GenKern *k, LLVMValueRef br);
void gm_close(GenKern *k, GenLoop *l);
/* A prefetch of the cache line at p: for writing into L1 (level < 0), or for reading into
 * the cache of that locality (3 L1, 2 L2; x86's prefetcht0 / prefetcht1). */
void gm_prefetch(GenKern *k, LLVMValueRef p, int level);
/* The symbol prefix of the GEMM's functions: the module's name, or the prebuilt library's. */
const char *gm_prefix(const CpuCg *cg);
/* The name of type e in its functions' names ("f32", "bf16", "f16"); gm_declared for a function
 * of type e's family (the prebuilt library holds GE_F32's only: the others are made here). */
const char *gm_elt_name(GmElt e);
bool gm_declared_e(CpuCg *cg, GmElt e, LLVMValueRef *slot, const char *name, LLVMTypeRef ft);
/* With a prebuilt library, the function name of type ft only declared (hidden) into *slot:
 * true; false when the function is to be made here. */
bool gm_declared(CpuCg *cg, LLVMValueRef *slot, const char *name, LLVMTypeRef ft);
/* A new internal, never-inlined function with the builder at its body's start (the caller
 * restores the builder's position when done); gm_mark gives it the GEMM's light pipeline. */
GenKern *gm_fn_begin(CpuCg *cg, const char *name, LLVMTypeRef ft);
void gm_mark(LLVMValueRef fn, const GmCfg *c);

/* ------------------------------------------------------------------ gemm_fn.c */

/* Parameters of the GEMM function (and the first ones of its packing steps). */
enum {
  GP_M,
  GP_N,
  GP_K,
  GP_A,
  GP_ARS,
  GP_ACS,
  GP_B,
  GP_BRS,
  GP_BCS,
  GP_C,
  GP_LDC,
  GP_PACK,
  GP_CONV,
  GP_BKEEP, /* 1: B is resident and already packed in the packing area by the previous call
               (same B, N and K, one column block): skip packing it */
  GP_BPRE,  /* ptr: B already packed for every block of this call (gm_packx_function's layout:
               column block jc, K block pc at jc * K + pc * roundup(nc, NR)), or NULL */
  GP_APRE,  /* ptr: A already packed for every block of this call (gm_packx_function's layout:
               row block ic, K block pc at ic * K + pc * roundup(mc, MR)), or NULL */
  GP_COUNT
};

/* The GEMM function's type, and the function of the module for operands of type e (made once). */
LLVMTypeRef gm_fn_type(CpuCg *cg);
LLVMValueRef gm_function(CpuCg *cg, GmElt e);
/* gm_kstep in IR, for a run-time K. */
LLVMValueRef gm_kstep_ir(GenKern *k, const GmCfg *c, LLVMValueRef K);

/* ------------------------------------------------------------------ pairs.c, amx.c, dpbf16.c */

/* The GEMM function on depth groups for operands of type e (GE_BF16: AMX tiles where
 * GmCfg.amx, else AVX512-BF16 where GmCfg.dpbf16; GE_S8: AMX-INT8 where GmCfg.amx_int8;
 * gm_function's type and semantics for dots: GP_CONV, GP_BKEEP and GP_APRE unused, GP_BPRE in
 * gm_pairs_packb_function's layout), made once; the bytes of packing scratch it uses for calls
 * of at most M x N x K. */
LLVMValueRef gm_pairs_function(CpuCg *cg, GmElt e);
int64_t gm_pairs_pack_bytes(const GmCfg *c, GmElt e, int64_t M, int64_t N, int64_t K);
/* B (N columns from GB_X, depth K) packed whole into GB_DST in the layout that function
 * reads a GP_BPRE in (gm_packx_function's parameters; GB_KB0 and GB_KB1 unused), and its
 * bytes. */
LLVMValueRef gm_pairs_packb_function(CpuCg *cg, GmElt e);
/* Bytes of one column of such a B (K rounded to whole tile depths), and of the B packed for
 * nnb column blocks of nblk columns (nnb 1: all N at once). */
int64_t gm_pairs_col_bytes(GmElt e, int64_t K);
int64_t gm_pairs_packed_bytes(GmElt e, int64_t N, int64_t nblk, int64_t nnb, int64_t K);
/* Whether the depth-group function of type e runs on AMX tiles (else AVX512-BF16 or VNNI). */
static inline bool gm_pairs_tiles(const GmCfg *c, GmElt e) {
  return e == GE_S8 ? c->amx_int8 : c->amx;
}
/* The same layout made here at compile time (a constant B: element (k, n) at src[k * rs + n *
 * cs], type e), for nnb column blocks of nblk columns (nnb 1: all N at once), into dst (zeroed
 * by the caller, gm_pairs_packed_bytes of the blocks' columns). */
void gm_pairs_panels(const GmCfg *c, GmElt e, const void *src, int64_t rs, int64_t cs, int64_t K,
                     int64_t N, int64_t nblk, int64_t nnb, uint8_t *dst);

/* Bytes of a tile: 16 rows of 64 bytes (A: 16 rows x 32 bf16 or 64 s8 depths; B, VNNI: 16
 * groups of depths x 16 columns x 4 bytes). */
#define GM_TILE_BYTES 1024

/* Where a 32-row panel's A lies: rows 0-15 at a0, rows 16-31 at a1, the next tile depth (64
 * bytes of depths) step bytes further, rows stride bytes apart (packed tiles: 1024 and 64; read
 * in place: 64 and A's row distance); depth group p of a row at 4 p bytes from its start. */
typedef struct GmPairA {
  LLVMValueRef a0, a1, step, stride;
} GmPairA;

/* One 32 x 32 block of C over a K block: C (f32 or s32, rows rs bytes apart at c; all 32 x 32
 * may be written) = (first: 0, else C) + A's panel times B's two column tiles (columns 0-15
 * from b0, 16-31 from b1; tile depth q at q * GM_TILE_BYTES) over kq tile depths. */
typedef struct GmPairBlock {
  GmPairA a;
  LLVMValueRef b0, b1, kq, c, rs, first;
  LLVMValueRef
      corr; /* B biased (s8 on VNNI): the block's 32 rows' starting sums (i32), else NULL */
} GmPairBlock;

/* amx.c: the tile configuration loaded (per call of the function), whether the process may
 * use the tiles (asked of the kernel once), a block on the tiles (t1: B's tiles loaded with
 * the streaming hint; int8: s8 quads, TDPBSSD, else bf16 pairs), the tiles released. */
void gm_amx_config(GenKern *k);
LLVMValueRef gm_amx_granted(GenKern *k);
void gm_amx_block(GenKern *k, bool t1, bool int8, const GmPairBlock *b);
void gm_amx_release(GenKern *k);
/* dpbf16.c: a block on AVX512-BF16's VDPBF16PS (int8: s8 quads on AVX512-VNNI's VPDPBUSD, B
 * biased to u8, s32 sums). */
void gm_dp_block(GenKern *k, bool int8, const GmPairBlock *b);

/* ------------------------------------------------------------------ micro_fma.c (a family each) */

/* A convolution panel the micro-kernel may read in place, as the GEMM function knows it: its
 * parameters, whether the panel is read in place (gm_direct_panel), row 0's offset in the
 * input at tap (0, 0) and channel 0, the distance between rows, the K block's first depth. */
typedef struct GmDirect {
  const LLVMValueRef *P;             /* the GEMM function's parameters */
  LLVMValueRef ok, off, rstride, pc; /* i1 read in place; offset; row distance; first depth */
} GmDirect;

/* One micro-kernel call: the MR x NR tile of C at cp from A's packed panel ap (MR x kc) and
 * B's packed panel bp (kc x NR), set on the first K block and added after. */
typedef struct GmTile {
  LLVMValueRef ap;      /* A's packed panel */
  const GmDirect *dr;   /* a convolution panel read in place where dr->ok holds, or NULL */
  LLVMValueRef bp;      /* B's packed panel */
  LLVMValueRef kc;      /* the K block's depth */
  LLVMValueRef cp, ldc; /* the tile in C and C's leading dimension */
  LLVMValueRef mrv;     /* rows of the tile inside C (MR but at the edge) */
  LLVMValueRef nrv;     /* its columns inside C (NR but at the edge) */
  LLVMValueRef first;   /* i1: the first K block */
  LLVMValueRef tile;    /* a 64-byte aligned stack tile of MR x NR floats for edge tiles */
  LLVMValueRef pf;      /* where kc / 4 cache lines are prefetched into L2, or NULL */
  bool s32;             /* C holds s32: the tile's sums (exact integers) converted and added so */
} GmTile;

/* A micro-kernel family: how the tiles of one ISA's kind of instruction are emitted (the
 * broadcast FMAs of micro_fma.c; dot-product or matrix instructions would be others). */
typedef struct GmMicro {
  const char *name;                                          /* family name */
  void (*tile)(GenKern *k, const GmCfg *c, const GmTile *t); /* emit one micro-kernel call */
} GmMicro;

extern const GmMicro gm_micro_fma;

/* ------------------------------------------------------------------ pack.c, pack_conv.c */

/* Convolution geometry given to the implicit-GEMM function (i64 array). */
enum {
  GC_OW,
  GC_H,
  GC_W,
  GC_CI,
  GC_KW,
  GC_SH,
  GC_SW,
  GC_DH,
  GC_DW,
  GC_PH,
  GC_PW,
  GC_XSH,
  GC_XSW,
  GC_XSC,
  GC_OHW, /* output pixels per image: row / OHW is the image (rows span the batch) */
  GC_XSB, /* input batch stride (elements) */
  GC_M0,  /* the output pixel of row 0 of this call */
  GC_COUNT
};

/* Parameters of the operand-packing functions (gm_packx_function). */
enum { GB_X, GB_RS, GB_CS, GB_N, GB_K, GB_DST, GB_KB0, GB_KB1, GB_COUNT };

/* pack.c: the packing steps' type and functions, a call of one with the GEMM's parameters P,
 * the whole-operand packing functions (b: B, else A), the shared row interleave and a call of
 * it on the MR row pointers rows. */
LLVMTypeRef gm_step_type(CpuCg *cg);
LLVMValueRef gm_step_function(CpuCg *cg, GmElt e, GmStep which);
void gm_call_step(GenKern *k, GmElt e, GmStep which, const LLVMValueRef *P, LLVMValueRef dst,
                  LLVMValueRef a0, LLVMValueRef a1, LLVMValueRef a2, LLVMValueRef a3);
LLVMValueRef gm_packx_function(CpuCg *cg, GmElt e, bool b);
LLVMValueRef gm_rows_t_function(CpuCg *cg, GmElt e);
void gm_call_rows_t(GenKern *k, const GmCfg *c, GmElt e, LLVMValueRef *rows, LLVMValueRef k0,
                    LLVMValueRef k1, LLVMValueRef dst);

/* pack_conv.c: the geometry from the conv parameter; depth pc as its tap and channel; whether
 * the panel of pixels pix0 .. is read in place (*off, *rstride: where and how); the packing. */
void gm_conv_geom(GenKern *k, const LLVMValueRef *P, LLVMValueRef *g);
void gm_tap(GenKern *k, const LLVMValueRef *g, LLVMValueRef pc, LLVMValueRef *kh, LLVMValueRef *kw,
            LLVMValueRef *ci);
LLVMValueRef gm_direct_panel(GenKern *k, const GmCfg *c, const LLVMValueRef *P,
                             const LLVMValueRef *g, LLVMValueRef pix0, LLVMValueRef mrv,
                             LLVMValueRef *off, LLVMValueRef *rstride);
void gm_pack_a_conv(GenKern *k, const GmCfg *c, GmElt e, LLVMValueRef *P, LLVMValueRef ap,
                    LLVMValueRef ic, LLVMValueRef mc, LLVMValueRef pc, LLVMValueRef kc,
                    LLVMValueRef zp);

/* ------------------------------------------------------------------ views.c */

/* value(idx) = base[off + sum idx[d] * st[d]] (f32 elements). */
typedef struct GmView {
  const HInstr *base;       /* entry instruction (buffer) or fused constant (global) */
  bool global;              /* base is a fused constant: read its literal's global */
  int64_t staged;           /* >= 0: the value was staged row-major in kernel-private scratch at
                               this offset from the private area (base unused); -2: to be staged
                               (base the value); -1: a view */
  int64_t off;              /* element offset */
  int64_t st[HLO_MAX_RANK]; /* element strides per dimension of the value */
  GmElt et;                 /* its element type (offsets and strides count these) */
} GmView;

/* A GEMM problem: loop dims (with the strides of their index in A, B, C), then M x N x K. */
typedef struct GmProb {
  int nloop;                  /* looped dimensions (batch, unmerged lhs free) */
  int64_t lext[HLO_MAX_RANK]; /* their extents */
  int64_t lsa[HLO_MAX_RANK], lsb[HLO_MAX_RANK], lsc[HLO_MAX_RANK]; /* their strides in A, B, C */
  int lout[HLO_MAX_RANK];                                          /* their output dimension */
  int64_t M, N, K;                                                 /* product sizes */
  int64_t ars, acs, brs, bcs, ldc;                                 /* strides */
  int mdim0, nm;         /* output dims of the merged M: [mdim0, mdim0 + nm) */
  int ndim0, nn;         /* output dims of N: [ndim0, ndim0 + nn) */
  bool conv;             /* implicit-GEMM convolution */
  int64_t geo[GC_COUNT]; /* convolution geometry */
  int64_t xsb;           /* convolution: input batch stride (elements) */
  bool wino;             /* convolution through Winograd (gm_winograd): B need not merge */
  int64_t wk[4];         /* convolution: strides of (kh, kw, ci, co) in B's view */
  GmView a, b;           /* operand views */
  GmElt et;              /* the operands' element type (both have it) */
  DType cdt;             /* the result's: f32, or (et 16-bit) et's own, rounded from
                            f32 sums kept in scratch (gm_cbuf) */
} GmProb;

/* Whether product p's result is not f32: its kernels compute it into f32 scratch, which the
 * epilogue reads rounded to the result type (gm_epilogue). */
static inline bool gm_cbuf(const GmProb *p) { return p->cdt == DT_BF16 || p->cdt == DT_F16; }

/* Row-major strides of s. */
void gm_rowmajor(const Shape *s, int64_t *st);
/* The problem of dot / convolution hero of `fusion` (NULL: the entry instruction itself), its
 * operands seen as views or (bit 0 of stage: A, bit 1: B) to be staged; false when it has
 * none (wino: B seen for Winograd, whose taps need not merge). */
bool gm_dot_prob(CpuCg *cg, const HInstr *fusion, const HInstr *dot, int stage, GmProb *p);
bool gm_conv_prob(CpuCg *cg, const HInstr *fusion, const HInstr *cv, int stage, bool wino,
                  GmProb *p);
/* The address of view v's element 0 inside kernel k. */
LLVMValueRef gm_view_ptr(GenKern *k, const GmView *v);

/* ------------------------------------------------------------------ plan.c */

/* Which kernel takes a product. */
typedef enum {
  GM_PATH_BLOCKED,  /* the blocked GEMM function (kernel.c) */
  GM_PATH_FEW_ROWS, /* few.c's few-rows kernel */
  GM_PATH_FEW_COLS, /* few.c's few-columns kernel */
  GM_PATH_WINOGRAD, /* winograd.c */
} GmPath;

/* What cpu_gemm_kernel decided for one product before emitting anything (gm_plan). Items are
 * (loop index, row block, column block); scratch offsets are bytes into the kernel-private
 * scratch: staged operands, one packing area per chunk, then the operand packed once, the
 * merged serial call's area, the slice buffers and the partial results. */
typedef struct GmPlan {
  GmCfg c;                /* the configuration */
  GmProb p;               /* the problem (staged operands: staged == -2 until staged) */
  const HInstr *fusion;   /* the output fusion, or NULL */
  const HInstr *red;      /* its root, when it reduces the epilogue block by block, or NULL */
  GmPath path;            /* the kernel that takes it */
  int64_t nb;             /* iterations of the loop dimensions */
  int64_t want;           /* chunks wanted */
  int64_t mblk, nblk;     /* rows and columns of an item's block */
  int64_t nmb, nnb;       /* row and column blocks */
  int64_t items, nchunks; /* items, and the chunks made of them */
  int64_t nblk0, nnb0;    /* column blocks before any split (the packed B's, with alt) */
  int64_t mblk1, nmb1;    /* alt's row blocks */
  bool alt;               /* with B read packed, the chunks split rows of full-width blocks */
  int64_t lnblk, lnnb;    /* the column blocks a packed B is laid out for */
  int64_t pack;           /* bytes of a chunk's packing area */
  int64_t stage_bytes;    /* bytes of the staged operands (the scratch's start) */
  int64_t kstep, nkb;     /* depth and count of the K blocks */
  bool bconst;            /* B a constant, packed at compile time (gm_const_packed_b) */
  int pre;                /* an operand packed once ahead of the GEMM: 1 B, 2 A, 0 none */
  int64_t pre_off;        /* where it is packed */
  bool merge;             /* the serial run makes one call over all the columns */
  bool merge_apart;       /* its packing area is its own (at merge_off), not chunk 0's */
  int64_t merge_off;      /* that area */
  bool resident;          /* convolution calls keep B resident */
  bool slices;            /* the rows go in slices of 2 * MC, each finished by the epilogue */
  bool cbuf;              /* the calls write the chunk's slice buffer, not C (reducing, or a
                             result that is not f32: gm_cbuf) */
  int64_t slice_off, slice_bytes; /* reducing: the chunks' slice buffers */
  int64_t part_off, part_bytes;   /* reducing: the chunks' partial results */
  int64_t need;                   /* bytes of private scratch in all */
  bool pack_ahead; /* B may be packed by the caller ahead of the runs (gm_pack_job) */
  bool pairs;      /* a dot on depth groups (gm_pairs_function: bf16 on AMX tiles or
                      AVX512-BF16, s8 on AMX tiles): no operand packed once for the chunks */
} GmPlan;

/* The plan of the dot or convolution kernel of entry instruction in (hero: in itself, or the
 * hero of output fusion in); false when the GEMM cannot take it. Reads the configuration and
 * the memory plan, emits nothing. */
bool gm_plan(CpuCg *cg, const HInstr *in, const HInstr *hero, GmPlan *pl);

/* ------------------------------------------------------------------ weights.c */

/* B (element (k, n) at src[k * rs + n * cs]) in the layout of a B packed beforehand; the
 * floats of a view reading a constant literal in place (else NULL); that constant B packed at
 * compile time (NULL when it is none); the entry parameter a B may be packed from ahead of the
 * runs (else -1) and its byte offset in the packed weights (registered, else -1); the packed
 * weights' base in a kernel (NULL when pk_off < 0), element eoff of an operand there when the
 * run was given them (else other), and whether B is read packed in this run. */
void gm_panels(const GmCfg *c, const float *src, int64_t rs, int64_t cs, int64_t K, int64_t N,
               int64_t nblk, int64_t nnb, int64_t kstep, float *dst);
const float *gm_view_const(const GmCfg *c, const GmView *v);
const void *gm_view_const_bf16(const GmCfg *c, const GmView *v);
LLVMValueRef gm_const_packed_b(CpuCg *cg, const GmCfg *c, const GmProb *p, bool pairs, int64_t nblk,
                               int64_t nnb, int64_t kstep);
int gm_pack_param(const CpuCg *cg, const GmProb *p);
int64_t gm_pack_job(CpuCg *cg, const GmProb *p, int64_t nblk, int64_t nnb, bool pairs);
LLVMValueRef gm_packed_base(GenKern *k, int64_t pk_off);
LLVMValueRef gm_or_packed(GenKern *k, LLVMValueRef base, int64_t pk_off, LLVMValueRef eoff,
                          LLVMValueRef other);
LLVMValueRef gm_b_packed(GenKern *k, LLVMValueRef bconst, LLVMValueRef pkb);

/* ------------------------------------------------------------------ epilogue.c */

/* A chunk's share [*lo, *hi) of items (gm_chunk_items_v: a count known at run time), *chunk
 * its number (0 for the serial run, chunk nchunks, which does them all); returns whether this
 * is the serial run. */
LLVMValueRef gm_chunk_items_v(GenKern *k, LLVMValueRef items, int64_t nchunks, LLVMValueRef *chunk,
                              LLVMValueRef *lo, LLVMValueRef *hi);
LLVMValueRef gm_chunk_items(GenKern *k, int64_t items, int64_t nchunks, LLVMValueRef *chunk,
                            LLVMValueRef *lo, LLVMValueRef *hi);
/* The loop dimensions' indices lidx from their linear index bi, and their offsets in A, B, C. */
void gm_loop_offsets(GenKern *k, const GmProb *p, LLVMValueRef bi, LLVMValueRef *lidx,
                     LLVMValueRef *offa, LLVMValueRef *offb, LLVMValueRef *offc);
/* The reduce at the root of fusion in that the GEMM reduces block by block, or NULL. */
const HInstr *gm_reduce_root(const HInstr *in, const HInstr *hero);
/* The epilogue of output fusion in on block [m0, m1) x [n0, n1) of C (red: combined into the
 * chunk's partial results P instead; a result that is not f32: C holds the product's f32 sums,
 * which are rounded to it and stored in in's buffer, through the fusion or alone); P set to
 * the reducer's identity; the kernel combining the chunks' partial results with the init. */
void gm_epilogue(GenKern *k, HInstr *in, const HInstr *hero, const HInstr *red, const GmProb *p,
                 const LLVMValueRef *lidx, LLVMValueRef m0, LLVMValueRef m1, LLVMValueRef n0,
                 LLVMValueRef n1, LLVMValueRef C, LLVMValueRef P);
void gm_reduce_init(GenKern *k, const HInstr *red, LLVMValueRef P, int64_t part_bytes);
bool gm_reduce_finish(CpuCg *cg, HInstr *in, const HInstr *red, int64_t part_off,
                      int64_t part_bytes, int64_t nchunks);

/* ------------------------------------------------------------------ few.c */

/* Whether product p takes the few-rows (few-columns) kernel, and that kernel (1 when emitted,
 * -1 after an error). */
bool gm_small_m_fits(const GmCfg *c, const GmProb *p);
int gm_small_m(CpuCg *cg, HInstr *in, const HInstr *hero, const GmProb *p, const GmCfg *c,
               int64_t nb, int64_t want, int64_t stage_bytes);
/* few_dp.c: whether the few-rows kernel computes p on VDPBF16PS / VPDPBUSD; its streaming
 * form's block (gm_small_group's, corr: an s8 product's per-row corrections, else NULL) and
 * its dot form's (gm_small_dots' without partial row groups); an s8 product's corrections of
 * the R rows of A at A (-128 times each row's sum). */
bool gm_few_dp(const GmCfg *c, const GmProb *p);
void gm_small_group_dp(GenKern *k, LLVMValueRef A, LLVMValueRef Bp, LLVMValueRef Cp,
                       const GmProb *p, int R, int nv, LLVMValueRef mask, LLVMValueRef k0,
                       LLVMValueRef k1, const LLVMValueRef *corr);
void gm_small_dots_dp(GenKern *k, LLVMValueRef A, LLVMValueRef Bp, LLVMValueRef Cp, const GmProb *p,
                      int R, int nn, const LLVMValueRef *corr);
void gm_s8_corrections(GenKern *k, LLVMValueRef A, const GmProb *p, int R, LLVMValueRef *corr);
bool gm_few_n_fits(const GmCfg *c, const GmProb *p);
int gm_few_n(CpuCg *cg, HInstr *in, const HInstr *hero, const GmProb *p, const GmCfg *c,
             int64_t want, int64_t stage_bytes);

/* ------------------------------------------------------------------ winograd.c */

/* Whether convolution cv may go through Winograd (from the instruction alone); whether its
 * problem fits on top; the module's transform functions; the taps' transform of channels
 * [lo, hi) into U; the Winograd kernels (1 when emitted, -1 after an error). */
bool gm_wino_conv(CpuCg *cg, const HInstr *cv);
bool gm_wino_fits(const GmProb *p);
LLVMValueRef gm_wino_function(CpuCg *cg, GmWino which);
void gm_wino_taps(GenKern *k, const GmCfg *c, LLVMValueRef w, LLVMValueRef U, LLVMValueRef lo,
                  LLVMValueRef hi, int64_t CI, int64_t CO, const int64_t *wk);
int gm_winograd(CpuCg *cg, HInstr *in, const HInstr *hero, const HInstr *red, const GmProb *p,
                const GmCfg *c, int64_t stage_bytes, int64_t want);

#endif
