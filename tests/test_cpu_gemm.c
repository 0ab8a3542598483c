/* tests/test_cpu_gemm.c: the CPU target's blocked GEMM, implicit-GEMM convolutions and split
 * column reductions against the reference interpreter.
 *
 * Each test compiles a small HLO text module with cpu_compile() (chunks down to one element,
 * par_min_elems = 1, so every kernel is split and the partial-result paths run), builds
 * tests/cpu_driver.c against the object through its header, runs it serially and with a
 * 2-thread parallel-for, and compares every result with hlo_interp_run() on the same
 * deterministic arguments. Sizes are chosen to reach the edges of the GEMM's blocking: rows
 * spanning several images and more than two row blocks (the slices of an output fusion), K
 * deeper than one K block, B too large to stay resident; and for the reductions: several sums
 * of one fusion sharing a pass, results reshaped and scaled, the split dimension reduced
 * (partials combined) or kept. */
#define _GNU_SOURCE /* memmem */
#include <criterion/criterion.h>
#include <elf.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cpu/cpu_test_util.h"
#include "hlo.h"
#include "target.h"

/* Whether the IR in dir/model.ll defines function @fn (the shared GEMM function and its
 * packing functions are made on first use by a kernel that calls them). */
static bool tg_has_fn(const char *dir, const char *fn) {
  char path[512], def[128];
  snprintf(path, sizeof path, "%s/model.ll", dir);
  snprintf(def, sizeof def, "@%s(", fn);
  char *text = NULL;
  size_t n = 0;
  HErr err = {0};
  cr_assert(hlo_read_file(path, &text, &n, &err), "%s", err.msg);
  bool found = strstr(text, def) != NULL;
  free(text);
  return found;
}

static void tg_check_fn(const char *what, const char *text, double rtol, bool want_gemm,
                        const char *also);
static void tg_check_gemm(const char *what, const char *text, double rtol, const char *gemm,
                          bool want_gemm, const char *also);

/* The prebuilt library's GEMM function (cpu_prebuilt.c), as its object names it. */
#define CPU_LIB_SYMBOL "__hloc_gemm_f32"

/* Whether the object file at path holds the string s (a symbol's name). */
static bool tg_obj_has(const char *path, const char *s) {
  size_t n = 0;
  char *b = ct_slurp(path, &n);
  bool found = memmem(b, n, s, strlen(s)) != NULL;
  free(b);
  return found;
}

/* Compile text, evaluate it with the interpreter, run the compiled code serially and on 2
 * threads, compare within rtol; want_gemm: whether the GEMM function must be called. */
static void tg_check(const char *what, const char *text, double rtol, bool want_gemm) {
  tg_check_fn(what, text, rtol, want_gemm, NULL);
}

/* The same; also (when not NULL) names another function the module must define. */
static void tg_check_fn(const char *what, const char *text, double rtol, bool want_gemm,
                        const char *also) {
  tg_check_gemm(what, text, rtol, "model_gemm_f32", want_gemm, also);
}

/* LLVM features every compilation of tg_check_gemm gets (NULL: the host's): the widened
 * 16-bit tests turn the bf16 dot instructions off, so that they test the widened GEMM on any
 * host (a Zen 4 or Cooper Lake host would take AVX512-BF16's). */
static const char *tg_features;

/* The same, the GEMM function being gemm (the one of the operands' type: model_gemm_bf16 ...). */
static void tg_check_gemm(const char *what, const char *text, double rtol, const char *gemm,
                          bool want_gemm, const char *also) {
  HModule *ref = ct_parse(text), *ml = ct_parse(text);
  HArena *a = hlo_arena_new();
  char *dir = ct_tmpdir("hloc_gemm");
  HErr err = {0};
  ct_reference(ref, a, dir, 5);
  char obj[512], hdr[512], ll[512], tag[600];
  snprintf(obj, sizeof obj, "%s/model.o", dir);
  snprintf(hdr, sizeof hdr, "%s/model.h", dir);
  snprintf(ll, sizeof ll, "%s/model.ll", dir);
  CpuOpts ol = {.knobs = &ct_knobs,
                .name = "model",
                .out_path = ll,
                .opt_level = 2,
                .emit = CPU_EMIT_LLVM,
                .features = tg_features,
                .par_min_elems = 1};
  cr_assert(cpu_compile(ml, &ol, &err), "%s: %s", what, err.msg);
  cr_expect_eq(tg_has_fn(dir, gemm), want_gemm, "%s: GEMM path %s", what,
               want_gemm ? "not taken" : "taken");
  if (also) cr_expect(tg_has_fn(dir, also), "%s: no function %s", what, also);
  /* the object with the prebuilt library where the host can use it (cpu_prebuilt.c), then
     with the module's own GEMM functions */
  for (int own = 0; own < 2; own++) {
    if (own) ct_knob(CPU_KNOB_PREBUILT, "0");
    HModule *m = ct_parse(text);
    CpuOpts o = {.knobs = &ct_knobs,
                 .name = "model",
                 .out_path = obj,
                 .header_path = hdr,
                 .opt_level = 2,
                 .emit = CPU_EMIT_OBJ,
                 .features = tg_features,
                 .par_min_elems = 1};
    cr_assert(cpu_compile(m, &o, &err), "%s: %s", what, err.msg);
    ct_knob(CPU_KNOB_PREBUILT, NULL);
    hlo_module_free(m);
    if (own)
      cr_expect(!tg_obj_has(obj, CPU_LIB_SYMBOL), "%s: HLOC_CPU_PREBUILT=0 joined the library",
                what);
    snprintf(tag, sizeof tag, "%s%s", what, own ? ", own GEMM functions" : "");
    ct_build_driver(dir);
    ct_check_driver(dir, dir, rtol, "cpu_gemm", tag);
  }
  ct_rmdir(dir);
  free(dir);
  hlo_arena_free(a);
  hlo_module_free(ref);
  hlo_module_free(ml);
}

/* A convolution with an epilogue (bias, residual, relu), its rows spanning three images (663
 * rows: several row slices and an edge micro-tile), K = 450 (two balanced K blocks, B
 * resident), N = 37 (an edge column panel). The fusion's root (after the relu) and the
 * entry's result shape are filled in: the relu itself, or a sum over it. */
static const char *tg_conv_fused = "HloModule m\n"
                                   "add {\n"
                                   "  p = f32[] parameter(0)\n"
                                   "  q = f32[] parameter(1)\n"
                                   "  ROOT s = f32[] add(p, q)\n"
                                   "}\n"
                                   "mx {\n"
                                   "  p1 = f32[] parameter(0)\n"
                                   "  q1 = f32[] parameter(1)\n"
                                   "  ROOT s1 = f32[] maximum(p1, q1)\n"
                                   "}\n"
                                   "mn {\n"
                                   "  p2 = f32[] parameter(0)\n"
                                   "  q2 = f32[] parameter(1)\n"
                                   "  ROOT s2 = f32[] minimum(p2, q2)\n"
                                   "}\n"
                                   "f {\n"
                                   "  x = f32[3,13,17,50] parameter(0)\n"
                                   "  w = f32[3,3,50,37] parameter(1)\n"
                                   "  b = f32[37] parameter(2)\n"
                                   "  r = f32[3,13,17,37] parameter(3)\n"
                                   "  c = f32[3,13,17,37] convolution(x, w), window={size=3x3 "
                                   "pad=1_1x1_1}, dim_labels=b01f_01io->b01f\n"
                                   "  bb = f32[3,13,17,37] broadcast(b), dimensions={3}\n"
                                   "  s = f32[3,13,17,37] add(c, bb)\n"
                                   "  t = f32[3,13,17,37] add(s, r)\n"
                                   "  z = f32[] constant(0)\n"
                                   "  zb = f32[3,13,17,37] broadcast(z), dimensions={}\n"
                                   "%s"
                                   "}\n"
                                   "ENTRY e {\n"
                                   "  x0 = f32[3,13,17,50] parameter(0)\n"
                                   "  w0 = f32[3,3,50,37] parameter(1)\n"
                                   "  b0 = f32[37] parameter(2)\n"
                                   "  r0 = f32[3,13,17,37] parameter(3)\n"
                                   "  ROOT f0 = %s fusion(x0, w0, b0, r0), kind=kOutput, calls=f\n"
                                   "}\n";

/* The epilogue as the fusion's output. */
Test(cpu_gemm, conv_rows_span_batch_with_epilogue, .timeout = 300) {
  char text[4096];
  snprintf(text, sizeof text, tg_conv_fused, "  ROOT o = f32[3,13,17,37] maximum(t, zb)\n",
           "f32[3,13,17,37]");
  tg_check("conv rows over the batch", text, 1e-4, true);
}

/* A reduction over the epilogue as the fusion's root (the optimizer: a reduction joins the
 * convolution's group), computed slice by slice into partial results per chunk (starting from
 * the reducer's identity) that a last kernel combines with the init, applied once: sums of the
 * relu with init 0.5 over (oh, ow), keeping [3, 37], and over ow alone, keeping [3, 13, 37];
 * a maximum of values all below zero and a minimum of values all above it, with infinite
 * inits, over (oh, ow) (a partial that started from 0 would show). The same fusions through
 * the generic kernels (HLOC_CPU_NO_GEMM) give the same results. */
static void tg_conv_sums(bool gemm) {
  static const char *const roots[4] = {
      "  o = f32[3,13,17,37] maximum(t, zb)\n  h = f32[] constant(0.5)\n"
      "  ROOT m = f32[3,37] reduce(o, h), dimensions={1,2}, to_apply=add\n",
      "  o = f32[3,13,17,37] maximum(t, zb)\n  h = f32[] constant(0.5)\n"
      "  ROOT m = f32[3,13,37] reduce(o, h), dimensions={2}, to_apply=add\n",
      "  k = f32[] constant(-1000)\n  kb = f32[3,13,17,37] broadcast(k), dimensions={}\n"
      "  o = f32[3,13,17,37] add(t, kb)\n  h = f32[] constant(-inf)\n"
      "  ROOT m = f32[3,37] reduce(o, h), dimensions={1,2}, to_apply=mx\n",
      "  k = f32[] constant(1000)\n  kb = f32[3,13,17,37] broadcast(k), dimensions={}\n"
      "  o = f32[3,13,17,37] add(t, kb)\n  h = f32[] constant(inf)\n"
      "  ROOT m = f32[3,37] reduce(o, h), dimensions={1,2}, to_apply=mn\n"};
  static const char *const shape[4] = {"f32[3,37]", "f32[3,13,37]", "f32[3,37]", "f32[3,37]"};
  static const char *const what[4] = {"sum over (oh, ow)", "sum over ow", "maximum", "minimum"};
  for (int j = 0; j < 4; j++) {
    char text[4096];
    snprintf(text, sizeof text, tg_conv_fused, roots[j], shape[j]);
    tg_check(what[j], text, 1e-4, gemm);
  }
}

/* A dot's epilogue summed over its rows (a fusion written by hand: the optimizer joins
 * reductions to convolutions only), 70 rows in several row blocks, 40 columns. */
Test(cpu_gemm, dot_epilogue_summed_by_blocks, .timeout = 300) {
  tg_check(
      "dot summed over rows",
      "HloModule m\n"
      "add {\n  p = f32[] parameter(0)\n  q = f32[] parameter(1)\n  ROOT s = f32[] add(p, q)\n}\n"
      "f {\n"
      "  a = f32[70,300] parameter(0)\n"
      "  b = f32[300,40] parameter(1)\n"
      "  d = f32[70,40] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
      "  z = f32[] constant(0)\n"
      "  zb = f32[70,40] broadcast(z), dimensions={}\n"
      "  r = f32[70,40] maximum(d, zb)\n"
      "  ROOT m = f32[40] reduce(r, z), dimensions={0}, to_apply=add\n"
      "}\n"
      "ENTRY e {\n"
      "  a0 = f32[70,300] parameter(0)\n"
      "  b0 = f32[300,40] parameter(1)\n"
      "  ROOT f0 = f32[40] fusion(a0, b0), kind=kOutput, calls=f\n"
      "}\n",
      1e-4, true);
}

Test(cpu_gemm, conv_epilogue_summed_by_blocks, .timeout = 300) { tg_conv_sums(true); }

Test(cpu_gemm, conv_epilogue_summed_generic, .timeout = 300) {
  ct_knob(CPU_KNOB_NO_GEMM, "1");
  tg_conv_sums(false);
}

/* B too large to stay resident (K = 360, 720 columns), with an epilogue; a strided and
 * dilated convolution with asymmetric padding in the same module (not through Winograd). */
Test(cpu_gemm, conv_wide_and_dilated, .timeout = 300) {
  ct_knob(CPU_KNOB_WINOGRAD,
          "0"); /* the implicit GEMM's path (40 and 720 channels are whole AVX2 vectors) */
  tg_check("wide and dilated convolutions",
           "HloModule m\n"
           "f {\n"
           "  x = f32[2,5,6,40] parameter(0)\n"
           "  w = f32[3,3,40,720] parameter(1)\n"
           "  c = f32[2,5,6,720] convolution(x, w), window={size=3x3 pad=1_1x1_1}, "
           "dim_labels=b01f_01io->b01f\n"
           "  ROOT t = f32[2,5,6,720] tanh(c)\n"
           "}\n"
           "ENTRY e {\n"
           "  x0 = f32[2,5,6,40] parameter(0)\n"
           "  w0 = f32[3,3,40,720] parameter(1)\n"
           "  y = f32[2,13,11,7] parameter(2)\n"
           "  v = f32[3,2,7,9] parameter(3)\n"
           "  wide = f32[2,5,6,720] fusion(x0, w0), kind=kOutput, calls=f\n"
           "  dil = f32[2,6,5,9] convolution(y, v), window={size=3x2 stride=2x2 pad=0_2x1_0 "
           "rhs_dilate=2x3}, dim_labels=b01f_01io->b01f\n"
           "  ROOT o = (f32[2,5,6,720], f32[2,6,5,9]) tuple(wide, dil)\n"
           "}\n",
           1e-4, true);
}

/* NCHW input and OIHW weights seen as NHWC / HWIO through transposes in the fusion (the
 * layout a JAX export gives): the input is packed in place through its channel stride (stride
 * 2 with padding, and stride 1), the weights are staged. */
Test(cpu_gemm, conv_nchw_input_in_place, .timeout = 300) {
  tg_check("NCHW convolutions",
           "HloModule m\n"
           "f {\n"
           "  x = f32[2,6,15,13] parameter(0)\n"
           "  xt = f32[2,15,13,6] transpose(x), dimensions={0,2,3,1}\n"
           "  w = f32[20,6,3,3] parameter(1)\n"
           "  wt = f32[3,3,6,20] transpose(w), dimensions={2,3,1,0}\n"
           "  ROOT c = f32[2,8,7,20] convolution(xt, wt), window={size=3x3 stride=2x2 "
           "pad=1_1x1_1}, dim_labels=b01f_01io->b01f\n"
           "}\n"
           "g {\n"
           "  x = f32[2,6,15,13] parameter(0)\n"
           "  xt = f32[2,15,13,6] transpose(x), dimensions={0,2,3,1}\n"
           "  w = f32[20,6,3,3] parameter(1)\n"
           "  wt = f32[3,3,6,20] transpose(w), dimensions={2,3,1,0}\n"
           "  c = f32[2,15,13,20] convolution(xt, wt), window={size=3x3 pad=1_1x1_1}, "
           "dim_labels=b01f_01io->b01f\n"
           "  one = f32[] constant(1)\n"
           "  ob = f32[2,15,13,20] broadcast(one), dimensions={}\n"
           "  ROOT s = f32[2,15,13,20] add(c, ob)\n"
           "}\n"
           "ENTRY e {\n"
           "  x0 = f32[2,6,15,13] parameter(0)\n"
           "  w0 = f32[20,6,3,3] parameter(1)\n"
           "  s2 = f32[2,8,7,20] fusion(x0, w0), kind=kOutput, calls=f\n"
           "  s1 = f32[2,15,13,20] fusion(x0, w0), kind=kOutput, calls=g\n"
           "  ROOT o = (f32[2,8,7,20], f32[2,15,13,20]) tuple(s2, s1)\n"
           "}\n",
           1e-4, true);
}

/* The packing's vector paths and the panels read in place: NCHW inputs whose output rows hold
 * several micro-tiles (stride 1 and 2: a panel inside one output row is one strided load per
 * channel, panels across two rows or the padding go element by element), an NHWC input with
 * channel runs cut by the K blocks (VW-wide transposes plus a remainder; its panels inside
 * the image are read in place by the micro-kernel, the others packed). Run at the target's
 * tile and at MR = 7 and 8 (HLOC_CPU_GEMM_TILE: an odd tile height, and as tall as a vector). */
static const char *const tg_pack_paths =
    "HloModule m\n"
    "f {\n"
    "  x = f32[2,5,11,30] parameter(0)\n"
    "  xt = f32[2,11,30,5] transpose(x), dimensions={0,2,3,1}\n"
    "  w = f32[9,5,3,3] parameter(1)\n"
    "  wt = f32[3,3,5,9] transpose(w), dimensions={2,3,1,0}\n"
    "  ROOT c = f32[2,6,15,9] convolution(xt, wt), window={size=3x3 stride=2x2 pad=1_1x1_1}, "
    "dim_labels=b01f_01io->b01f\n"
    "}\n"
    "g {\n"
    "  x = f32[2,5,11,30] parameter(0)\n"
    "  xt = f32[2,11,30,5] transpose(x), dimensions={0,2,3,1}\n"
    "  w = f32[9,5,3,3] parameter(1)\n"
    "  wt = f32[3,3,5,9] transpose(w), dimensions={2,3,1,0}\n"
    "  ROOT c = f32[2,11,28,9] convolution(xt, wt), window={size=3x3 pad=1_1x0_0}, "
    "dim_labels=b01f_01io->b01f\n"
    "}\n"
    "h {\n"
    "  y = f32[2,9,14,29] parameter(0)\n"
    "  v = f32[3,3,29,11] parameter(1)\n"
    "  ROOT c = f32[2,9,14,11] convolution(y, v), window={size=3x3 pad=1_1x1_1}, "
    "dim_labels=b01f_01io->b01f\n"
    "}\n"
    "ENTRY e {\n"
    "  x0 = f32[2,5,11,30] parameter(0)\n"
    "  w0 = f32[9,5,3,3] parameter(1)\n"
    "  y0 = f32[2,9,14,29] parameter(2)\n"
    "  v0 = f32[3,3,29,11] parameter(3)\n"
    "  s2 = f32[2,6,15,9] fusion(x0, w0), kind=kOutput, calls=f\n"
    "  s1 = f32[2,11,28,9] fusion(x0, w0), kind=kOutput, calls=g\n"
    "  n1 = f32[2,9,14,11] fusion(y0, v0), kind=kOutput, calls=h\n"
    "  ROOT o = (f32[2,6,15,9], f32[2,11,28,9], f32[2,9,14,11]) tuple(s2, s1, n1)\n"
    "}\n";

Test(cpu_gemm, conv_pack_vector_paths, .timeout = 300) {
  tg_check("packing paths", tg_pack_paths, 1e-4, true);
}

Test(cpu_gemm, conv_pack_vector_paths_odd_tile, .timeout = 300) {
  ct_knob(CPU_KNOB_GEMM_TILE, "7,16");
  tg_check("packing paths, 7-row tiles", tg_pack_paths, 1e-4, true);
}

Test(cpu_gemm, conv_pack_vector_paths_tall_tile, .timeout = 300) {
  ct_knob(CPU_KNOB_GEMM_TILE, "8,16");
  tg_check("packing paths, 8-row tiles", tg_pack_paths, 1e-4, true);
}

/* Both orders of a block's micro-tiles (HLOC_CPU_GEMM_ORDER: column panels outermost, the
 * AVX2 default, and row panels outermost, AVX-512's), whichever the host's is: the packing
 * paths' convolutions, and a dot with edge tiles in both directions cut by small blocks (MC
 * 24, KC 64, NC 64: three K blocks, two column blocks) under a bias epilogue. */
Test(cpu_gemm, panel_orders, .timeout = 300) {
  const char *dot =
      "HloModule m\n"
      "f {\n"
      "  a = f32[70,150] parameter(0)\n"
      "  b = f32[150,90] parameter(1)\n"
      "  d = f32[70,90] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
      "  c = f32[90] parameter(2)\n"
      "  cb = f32[70,90] broadcast(c), dimensions={1}\n"
      "  ROOT e = f32[70,90] add(d, cb)\n"
      "}\n"
      "ENTRY e {\n"
      "  a0 = f32[70,150] parameter(0)\n"
      "  b0 = f32[150,90] parameter(1)\n"
      "  c0 = f32[90] parameter(2)\n"
      "  ROOT x = f32[70,90] fusion(a0, b0, c0), kind=kOutput, calls=f\n"
      "}\n";
  for (int order = 0; order < 2; order++) {
    ct_knob(CPU_KNOB_GEMM_ORDER, order ? "1" : "0");
    tg_check(order ? "packing paths, row panels outermost"
                   : "packing paths, column panels outermost",
             tg_pack_paths, 1e-4, true);
    ct_knob(CPU_KNOB_GEMM_BLOCKS, "24,64,64");
    tg_check(order ? "dot, small blocks, row panels outermost"
                   : "dot, small blocks, column panels outermost",
             dot, 1e-4, true);
    ct_knob(CPU_KNOB_GEMM_BLOCKS, NULL);
  }
}

/* The same with every panel packed (HLOC_CPU_GEMM_DIRECT=0: no panel read in place), so the
 * NHWC transposing path packs the interior panels too. */
Test(cpu_gemm, conv_pack_vector_paths_all_packed, .timeout = 300) {
  ct_knob(CPU_KNOB_GEMM_DIRECT, "0");
  tg_check("packing paths, all panels packed", tg_pack_paths, 1e-4, true);
}

/* HLO text of a dot whose B is a constant (frozen weights) of K x N values sin(0.37 i): as an
 * entry constant, or (transposed) fused into an output fusion with a ReLU epilogue. */
static char *tg_const_b_text(int64_t M, int64_t K, int64_t N, bool fused) {
  size_t cap = (size_t)(K * N) * 16 + 4096, n = 0;
  char *t = malloc(cap);
  cr_assert(t);
  int64_t r = fused ? N : K, c = fused ? K : N;
  n += (size_t)snprintf(t + n, cap - n, "HloModule m\n%s",
                        fused ? "f {\n  a = f32[" : "ENTRY e {\n  a = f32[");
  n += (size_t)snprintf(t + n, cap - n, "%lld,%lld] parameter(0)\n  w = f32[%lld,%lld] constant({",
                        (long long)M, (long long)K, (long long)r, (long long)c);
  for (int64_t i = 0; i < r; i++) {
    n += (size_t)snprintf(t + n, cap - n, "%s{", i ? ", " : "");
    for (int64_t j = 0; j < c; j++)
      n += (size_t)snprintf(t + n, cap - n, "%s%.6g", j ? ", " : "",
                            sin(0.37 * (double)(i * c + j)));
    n += (size_t)snprintf(t + n, cap - n, "}");
  }
  if (!fused) {
    snprintf(t + n, cap - n,
             "})\n  ROOT d = f32[%lld,%lld] dot(a, w), lhs_contracting_dims={1}, "
             "rhs_contracting_dims={0}\n}\n",
             (long long)M, (long long)N);
  } else {
    snprintf(
        t + n, cap - n,
        "})\n  d = f32[%lld,%lld] dot(a, w), lhs_contracting_dims={1}, rhs_contracting_dims={1}\n"
        "  z = f32[] constant(0)\n  zb = f32[%lld,%lld] broadcast(z), dimensions={}\n"
        "  ROOT e = f32[%lld,%lld] maximum(d, zb)\n}\n"
        "ENTRY e {\n  a0 = f32[%lld,%lld] parameter(0)\n  ROOT x = f32[%lld,%lld] fusion(a0), "
        "kind=kOutput, calls=f\n}\n",
        (long long)M, (long long)N, (long long)M, (long long)N, (long long)M, (long long)N,
        (long long)M, (long long)K, (long long)M, (long long)N);
  }
  return t;
}

/* The optimized LLVM IR (or, as_asm: the assembly; cpu: for that CPU) of text (to free). */
static char *tg_out_text(const char *text, bool as_asm, const char *cpu) {
  return ct_cpu_text(text, (CpuOpts){.knobs = &ct_knobs,
                                     .name = "model",
                                     .opt_level = 2,
                                     .emit = as_asm ? CPU_EMIT_ASM : CPU_EMIT_LLVM,
                                     .par_min_elems = 1,
                                     .cpu = cpu,
                                     .features = cpu ? "" : NULL});
}

/* Whether that output contains needle. */
static bool tg_out_contains(const char *text, const char *needle, bool as_asm, const char *cpu) {
  char *t = tg_out_text(text, as_asm, cpu);
  bool found = strstr(t, needle) != NULL;
  free(t);
  return found;
}

static bool tg_ir_contains(const char *text, const char *needle) {
  return tg_out_contains(text, needle, false, NULL);
}

/* Whether compiling text defines the global @name. */
static bool tg_has_global(const char *text, const char *name) {
  char def[256];
  snprintf(def, sizeof def, "@%s", name);
  return tg_ir_contains(text, def);
}

/* A constant B is packed at compile time into read-only data (no packing at run time):
 * small blocks (HLOC_CPU_GEMM_BLOCKS: MC 24, KC 64, NC 64) so that the 150-deep, 90-wide
 * product has three K blocks, two column blocks and an edge panel; as an entry constant and
 * transposed inside an output fusion; and with the compile-time packing off; then 256 columns
 * split over the chunks with A packed ahead. */
Test(cpu_gemm, dot_constant_b_packed_at_compile_time, .timeout = 300) {
  ct_knob(CPU_KNOB_GEMM_BLOCKS, "24,64,64");
  for (int fused = 0; fused < 2; fused++) {
    char *t = tg_const_b_text(50, 150, 90, fused);
    cr_expect(tg_has_global(t, "model_cb"), "no compile-time packed B (%s)",
              fused ? "fused" : "entry constant");
    tg_check(fused ? "constant B, transposed, fused" : "constant B", t, 1e-4, true);
    ct_knob(CPU_KNOB_GEMM_NO_CONST_PACK, "1");
    cr_expect(!tg_has_global(t, "model_cb"), "HLOC_CPU_GEMM_NO_CONST_PACK ignored");
    tg_check("constant B packed at run time", t, 1e-4, true);
    ct_knob(CPU_KNOB_GEMM_NO_CONST_PACK, NULL);
    free(t);
  }
  ct_knob(CPU_KNOB_GEMM_BLOCKS, NULL);
  /* 256 columns within one column block of the GEMM (NC 1024), split over the chunks, and the
     rows not: A is packed ahead, and the serial run must read the constant B's packed column
     blocks, three K blocks deep (KC 64) */
  ct_knob(CPU_KNOB_GEMM_BLOCKS, "24,64,1024");
  for (int fused = 0; fused < 2; fused++) {
    char *t = tg_const_b_text(50, 150, 256, fused);
    tg_check(fused ? "constant B, transposed, fused, A packed ahead" : "constant B, A packed ahead",
             t, 1e-4, true);
    free(t);
  }
  ct_knob(CPU_KNOB_GEMM_BLOCKS, NULL);
}

/* A 60 x 150 x 256 product whose B is an entry parameter (packable by the caller). */
static const char *const tg_dot_param_b =
    "HloModule m\nENTRY e {\n  a = f32[60,150] parameter(0)\n  b = f32[150,256] parameter(1)\n"
    "  ROOT d = f32[60,256] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n";

/* A B read packed (a constant packed at compile time, or a parameter the caller packs ahead:
 * the driver's packed runs) whose product the split cut into narrower column blocks: a run
 * with B packed splits rows of full-width column blocks instead (A packed once ahead for those
 * row blocks), and its serial run packs A once for the full-width blocks. Small blocks (MC 24, KC
 * 64, NC 128) give any ISA two 128-column blocks cut into four (three K blocks, an edge row block):
 * as a constant (entry and fused, transposed) and as a parameter. */
Test(cpu_gemm, dot_packed_b_splits_rows, .timeout = 300) {
  ct_knob(CPU_KNOB_GEMM_BLOCKS, "24,64,128");
  for (int fused = 0; fused < 2; fused++) {
    char *t = tg_const_b_text(60, 150, 256, fused);
    tg_check(fused ? "constant B, rows split, fused" : "constant B, rows split", t, 1e-4, true);
    free(t);
  }
  tg_check("B packed ahead, rows split", tg_dot_param_b, 1e-4, true);
  ct_knob(CPU_KNOB_GEMM_BLOCKS, NULL);
}

/* On AVX-512 the micro-kernel prefetches the next block of a B given packed into L2
 * (gm_next_lines: prefetcht1 in its k loop); not with HLOC_CPU_GEMM_PREFETCH=0, nor on AVX2,
 * whose blocking takes the column panels outermost. (The results with it are checked by every
 * product test on an AVX-512 host and by the fixtures' packed runs in cpu_driver.c.) */
Test(cpu_gemm, next_block_prefetched, .timeout = 300) {
  const char *t = tg_dot_param_b;
  cr_expect(tg_out_contains(t, "prefetcht1", true, "skylake-avx512"),
            "no prefetch of the next block on AVX-512");
  cr_expect(!tg_out_contains(t, "prefetcht1", true, "haswell"),
            "a prefetch of the next block on AVX2");
  ct_knob(CPU_KNOB_GEMM_PREFETCH, "0");
  cr_expect(!tg_out_contains(t, "prefetcht1", true, "skylake-avx512"),
            "HLOC_CPU_GEMM_PREFETCH=0 ignored");
  ct_knob(CPU_KNOB_GEMM_PREFETCH, NULL);
}

/* Whether the optimized IR of text has the few-rows kernel's K loop (products of few rows read
 * B in place, without the GEMM function). */
static bool tg_small_m(const char *text) { return tg_ir_contains(text, "smallk"); }

/* Products of few rows (1 to 5, and 6 in the streaming form: all in registers on any vector
 * width, with 4, 3 or 2 vectors of columns) read B in place (gm_small_m): N = 100 (whole
 * column blocks, then whole vectors and a masked one at the edge), K = 70 (four K blocks and
 * a partial one), against the interpreter; batched, with A transposed (its rows strided), B a
 * slice of a wider matrix (row stride 130), a fused bias and relu, a constant B, N smaller
 * than one vector; B stored [N, K] (the dot form: blocks of outputs, K in vectors and a
 * masked partial one), plain and batched; and 15 rows, which take the blocked path on any
 * vector width. */
Test(cpu_gemm, dot_few_rows, .timeout = 300) {
  char text[4096];
  const int rows[] = {1, 2, 3, 4, 5};
  for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
    int M = rows[i];
    snprintf(text, sizeof text,
             "HloModule m\n"
             "f {\n  a = f32[%d,70] parameter(0)\n  w = f32[70,100] parameter(1)\n  b = f32[100] "
             "parameter(2)\n"
             "  d = f32[%d,100] dot(a, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
             "  bb = f32[%d,100] broadcast(b), dimensions={1}\n  s = f32[%d,100] add(d, bb)\n"
             "  z = f32[] constant(0)\n  zb = f32[%d,100] broadcast(z), dimensions={}\n"
             "  ROOT r = f32[%d,100] maximum(s, zb)\n}\n"
             "ENTRY e {\n"
             "  x = f32[%d,70] parameter(0)\n  y = f32[70,100] parameter(1)\n  bias = f32[100] "
             "parameter(2)\n"
             "  xt = f32[70,%d] parameter(3)\n  wide = f32[70,130] parameter(4)\n"
             "  xb = f32[3,%d,70] parameter(5)\n  yb = f32[3,70,9] parameter(6)\n"
             "  wt = f32[100,70] parameter(7)\n  ybt = f32[3,9,70] parameter(8)\n"
             "  d6 = f32[%d,100] dot(x, wt), lhs_contracting_dims={1}, rhs_contracting_dims={1}\n"
             "  d7 = f32[3,%d,9] dot(xb, ybt), lhs_batch_dims={0}, rhs_batch_dims={0}, "
             "lhs_contracting_dims={2}, rhs_contracting_dims={2}\n"
             "  d1 = f32[%d,100] dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
             "  d2 = f32[%d,100] dot(xt, y), lhs_contracting_dims={0}, rhs_contracting_dims={0}\n"
             "  ws = f32[70,100] slice(wide), slice={[0:70], [10:110]}\n"
             "  d3 = f32[%d,100] dot(x, ws), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
             "  d4 = f32[3,%d,9] dot(xb, yb), lhs_batch_dims={0}, rhs_batch_dims={0}, "
             "lhs_contracting_dims={2}, rhs_contracting_dims={1}\n"
             "  d5 = f32[%d,100] fusion(x, y, bias), kind=kOutput, calls=f\n"
             "  ROOT o = (f32[%d,100], f32[%d,100], f32[%d,100], f32[3,%d,9], f32[%d,100], "
             "f32[%d,100], f32[3,%d,9]) "
             "tuple(d1, d2, d3, d4, d5, d6, d7)\n}\n",
             M, M, M, M, M, M, M, M, M, M, M, M, M, M, M, M, M, M, M, M, M, M, M);
    cr_expect(tg_small_m(text), "%d rows: not the few-rows kernel", M);
    char what[64];
    snprintf(what, sizeof what, "%d rows", M);
    tg_check(what, text, 1e-5, false);
  }
  char *t = tg_const_b_text(3, 40, 70, false);
  cr_expect(tg_small_m(t), "constant B: not the few-rows kernel");
  tg_check("few rows, constant B", t, 1e-5, false);
  free(t);
  const char *six =
      "HloModule m\nENTRY e {\n  x = f32[6,70] parameter(0)\n  y = f32[70,100] parameter(1)\n"
      "  ROOT d = f32[6,100] dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n";
  cr_expect(tg_small_m(six), "6 rows: not the few-rows kernel");
  tg_check("6 rows", six, 1e-5, false);
  const char *tall =
      "HloModule m\nENTRY e {\n  x = f32[15,70] parameter(0)\n  y = f32[70,100] parameter(1)\n"
      "  ROOT d = f32[15,100] dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n";
  cr_expect(!tg_small_m(tall), "15 rows took the few-rows kernel");
  tg_check("15 rows", tall, 1e-5, true);
}

/* Products of many rows and few columns (a classifier's head) in the dot form (gm_few_n): 50
 * and 51 rows (whole groups of 2 or 3 rows, and a partial last group), K = 70 (whole vectors
 * and a masked partial one), N from 1 to 15 (column blocks of 6 or 8 and a partial one),
 * against the interpreter: B row-major (copied transposed into the chunk's scratch) and
 * stored [N, K] (read in place), a fused bias and relu, a constant B fused transposed and one
 * stored [K, N] (transposed at compile time into read-only data); the kernel is also chosen
 * for AVX-512 (3-row groups, 8-column blocks); A transposed (its rows
 * not along K) and 17 columns take the blocked path. */
Test(cpu_gemm, dot_few_columns, .timeout = 300) {
  char text[4096];
  const int cols[] = {1, 7, 10, 15};
  for (int mi = 0; mi < 2; mi++)
    for (size_t i = 0; i < sizeof cols / sizeof *cols; i++) {
      int M = 50 + mi, N = cols[i];
      snprintf(text, sizeof text,
               "HloModule m\n"
               "f {\n  a = f32[%d,70] parameter(0)\n  w = f32[70,%d] parameter(1)\n  b = f32[%d] "
               "parameter(2)\n"
               "  d = f32[%d,%d] dot(a, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
               "  bb = f32[%d,%d] broadcast(b), dimensions={1}\n  s = f32[%d,%d] add(d, bb)\n"
               "  z = f32[] constant(0)\n  zb = f32[%d,%d] broadcast(z), dimensions={}\n"
               "  ROOT r = f32[%d,%d] maximum(s, zb)\n}\n"
               "ENTRY e {\n"
               "  x = f32[%d,70] parameter(0)\n  y = f32[70,%d] parameter(1)\n  bias = f32[%d] "
               "parameter(2)\n"
               "  wt = f32[%d,70] parameter(3)\n"
               "  d1 = f32[%d,%d] dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
               "  d2 = f32[%d,%d] dot(x, wt), lhs_contracting_dims={1}, rhs_contracting_dims={1}\n"
               "  d3 = f32[%d,%d] fusion(x, y, bias), kind=kOutput, calls=f\n"
               "  ROOT o = (f32[%d,%d], f32[%d,%d], f32[%d,%d]) tuple(d1, d2, d3)\n}\n",
               M, N, N, M, N, M, N, M, N, M, N, M, N, M, N, N, N, M, N, M, N, M, N, M, N, M, N, M,
               N);
      char what[64];
      snprintf(what, sizeof what, "%d rows, %d columns", M, N);
      cr_expect(tg_ir_contains(text, "smalld"), "%s: not the few-columns kernel", what);
      tg_check(what, text, 1e-5, false);
    }
  char *t = tg_const_b_text(51, 70, 10, true);
  cr_expect(tg_ir_contains(t, "smalld"), "constant B: not the few-columns kernel");
  tg_check("few columns, constant B", t, 1e-5, false);
  free(t);
  t = tg_const_b_text(51, 70, 10, false);
  cr_expect(tg_has_global(t, "model_bt"), "constant B [K, N]: not transposed at compile time");
  tg_check("few columns, constant B [K, N]", t, 1e-5, false);
  free(t);
  const char *head =
      "HloModule m\nENTRY e {\n  x = f32[51,70] parameter(0)\n  y = f32[70,10] parameter(1)\n"
      "  ROOT d = f32[51,10] dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n";
  cr_expect(tg_out_contains(head, "smalld", false, "skylake-avx512"),
            "AVX-512: not the few-columns kernel");
  const char *xt =
      "HloModule m\nENTRY e {\n  x = f32[70,51] parameter(0)\n  y = f32[70,10] parameter(1)\n"
      "  ROOT d = f32[51,10] dot(x, y), lhs_contracting_dims={0}, rhs_contracting_dims={0}\n}\n";
  cr_expect(!tg_ir_contains(xt, "smalld"), "A transposed took the few-columns kernel");
  tg_check("few columns, A transposed", xt, 1e-5, true);
  const char *wide =
      "HloModule m\nENTRY e {\n  x = f32[51,70] parameter(0)\n  y = f32[70,17] parameter(1)\n"
      "  ROOT d = f32[51,17] dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n";
  cr_expect(!tg_ir_contains(wide, "smalld"), "17 columns took the few-columns kernel");
  tg_check("17 columns", wide, 1e-5, true);
}

/* The weight-gradient form of a training step's backward pass (as the layout pass writes
 * it): a window as large as the image, a few output pixels per "image" (an input channel),
 * K over the spatial positions and the real batch; all images in one GEMM. */
Test(cpu_gemm, conv_weight_gradient, .timeout = 300) {
  tg_check("weight-gradient convolution",
           "HloModule m\n"
           "f {\n"
           "  x = f32[5,3,14,12] parameter(0)\n"
           "  xt = f32[3,14,12,5] transpose(x), dimensions={1,2,3,0}\n"
           "  dy = f32[5,14,12,11] parameter(1)\n"
           "  dyt = f32[14,12,5,11] transpose(dy), dimensions={1,2,0,3}\n"
           "  c = f32[3,3,3,11] convolution(xt, dyt), window={size=14x12 pad=1_1x1_1}, "
           "dim_labels=b01f_01io->b01f\n"
           "  k = f32[] constant(0.01)\n"
           "  kb = f32[3,3,3,11] broadcast(k), dimensions={}\n"
           "  ROOT s = f32[3,3,3,11] multiply(c, kb)\n"
           "}\n"
           "ENTRY e {\n"
           "  x0 = f32[5,3,14,12] parameter(0)\n"
           "  dy0 = f32[5,14,12,11] parameter(1)\n"
           "  ROOT g = f32[3,3,3,11] fusion(x0, dy0), kind=kOutput, calls=f\n"
           "}\n",
           1e-4, true);
}

/* Several column reductions of one fusion in one pass, the split (batch) dimension reduced:
 * partial results per chunk combined; results as a tuple, one reshaped and scaled, one a
 * max; an integer sum in its own kernel. */
Test(cpu_gemm, column_reductions_multi_output, .timeout = 300) {
  tg_check("batch statistics",
           "HloModule m\n"
           "add { a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT s = f32[] add(a, b) }\n"
           "mx { a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT s = f32[] maximum(a, b) }\n"
           "iadd { a = s32[] parameter(0)\n b = s32[] parameter(1)\n ROOT s = s32[] add(a, b) }\n"
           "f {\n"
           "  x = f32[6,7,5,16] parameter(0)\n"
           "  m = f32[16] parameter(1)\n"
           "  mb = f32[6,7,5,16] broadcast(m), dimensions={3}\n"
           "  d = f32[6,7,5,16] subtract(x, mb)\n"
           "  sq = f32[6,7,5,16] multiply(d, d)\n"
           "  z = f32[] constant(0)\n"
           "  ninf = f32[] constant(-inf)\n"
           "  s1 = f32[16] reduce(d, z), dimensions={0,1,2}, to_apply=add\n"
           "  s2 = f32[16] reduce(sq, z), dimensions={0,1,2}, to_apply=add\n"
           "  s3 = f32[16] reduce(x, ninf), dimensions={0,1,2}, to_apply=mx\n"
           "  r2 = f32[1,16,1,1] reshape(s2)\n"
           "  n = f32[] constant(210)\n"
           "  nb = f32[1,16,1,1] broadcast(n), dimensions={}\n"
           "  v = f32[1,16,1,1] divide(r2, nb)\n"
           "  ROOT t = (f32[16], f32[1,16,1,1], f32[16]) tuple(s1, v, s3)\n"
           "}\n"
           "ENTRY e {\n"
           "  x0 = f32[6,7,5,16] parameter(0)\n"
           "  m0 = f32[16] parameter(1)\n"
           "  i0 = s32[9,4,12] parameter(2)\n"
           "  zi = s32[] constant(0)\n"
           "  st = (f32[16], f32[1,16,1,1], f32[16]) fusion(x0, m0), kind=kInput, calls=f\n"
           "  is = s32[12] reduce(i0, zi), dimensions={0,1}, to_apply=iadd\n"
           "  a = f32[16] get-tuple-element(st), index=0\n"
           "  b = f32[1,16,1,1] get-tuple-element(st), index=1\n"
           "  c = f32[16] get-tuple-element(st), index=2\n"
           "  ROOT o = (f32[16], f32[1,16,1,1], f32[16], s32[12]) tuple(a, b, c, is)\n"
           "}\n",
           1e-4, false);
}

/* A column reduction whose split dimension is kept (a per-image pool: chunks own disjoint
 * results), with an epilogue; a reduction whose operand needs another reduction of the
 * same fusion (variance from a mean) takes another path. */
Test(cpu_gemm, column_reductions_kept_split, .timeout = 300) {
  tg_check("per-image pools",
           "HloModule m\n"
           "add { a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT s = f32[] add(a, b) }\n"
           "f {\n"
           "  x = f32[5,9,7,24] parameter(0)\n"
           "  z = f32[] constant(0)\n"
           "  s = f32[5,24] reduce(x, z), dimensions={1,2}, to_apply=add\n"
           "  k = f32[] constant(63)\n"
           "  kb = f32[5,24] broadcast(k), dimensions={}\n"
           "  ROOT m = f32[5,24] divide(s, kb)\n"
           "}\n"
           "g {\n"
           "  x = f32[5,9,7,24] parameter(0)\n"
           "  z = f32[] constant(0)\n"
           "  s = f32[24] reduce(x, z), dimensions={0,1,2}, to_apply=add\n"
           "  sb = f32[5,9,7,24] broadcast(s), dimensions={3}\n"
           "  d = f32[5,9,7,24] subtract(x, sb)\n"
           "  ROOT v = f32[24] reduce(d, z), dimensions={0,1,2}, to_apply=add\n"
           "}\n"
           "ENTRY e {\n"
           "  x0 = f32[5,9,7,24] parameter(0)\n"
           "  p = f32[5,24] fusion(x0), kind=kInput, calls=f\n"
           "  v = f32[24] fusion(x0), kind=kInput, calls=g\n"
           "  ROOT o = (f32[5,24], f32[24]) tuple(p, v)\n"
           "}\n",
           1e-4, false);
}

/* Reduce-windows unrolled (at most 16 positions) with padding only low, only high, on both
 * sides and none, strides 1 and 2; a 5x5 window keeps the loop. */
Test(cpu_gemm, reduce_window_unrolled, .timeout = 300) {
  tg_check(
      "pools",
      "HloModule m\n"
      "add { a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT s = f32[] add(a, b) }\n"
      "max { a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT s = f32[] maximum(a, b) }\n"
      "ENTRY e {\n"
      "  x = f32[2,3,13,11] parameter(0)\n"
      "  y = f32[2,12,10,5] parameter(1)\n"
      "  z = f32[] constant(0)\n"
      "  ninf = f32[] constant(-inf)\n"
      "  hi = f32[2,3,6,5] reduce-window(x, ninf), window={size=1x1x3x3 stride=1x1x2x2 "
      "pad=0_0x0_0x0_1x0_1}, to_apply=max\n"
      "  lo = f32[2,3,6,5] reduce-window(x, ninf), window={size=1x1x3x3 stride=1x1x2x2 "
      "pad=0_0x0_0x1_0x1_0}, to_apply=max\n"
      "  both = f32[2,3,13,11] reduce-window(x, z), window={size=1x1x3x3 pad=0_0x0_0x1_1x1_1}, "
      "to_apply=add\n"
      "  nhwc = f32[2,6,5,5] reduce-window(y, z), window={size=1x2x2x1 stride=1x2x2x1}, "
      "to_apply=add\n"
      "  big = f32[2,3,9,7] reduce-window(x, ninf), window={size=1x1x5x5}, to_apply=max\n"
      "  ROOT o = (f32[2,3,6,5], f32[2,3,6,5], f32[2,3,13,11], f32[2,6,5,5], f32[2,3,9,7]) "
      "tuple(hi, lo, both, nhwc, big)\n"
      "}\n",
      1e-5, false);
}

/* Products split into more chunks than the parallel-for has threads, so that a chunk's items
 * span consecutive row blocks (one call of more rows than a row block) while its neighbours
 * run: every chunk's packing area must hold such a call. */
Test(cpu_gemm, dot_chunks_span_row_blocks, .timeout = 300) {
  ct_knob(CPU_KNOB_GEMM_CHUNKS, "7");
  tg_check("7 chunks",
           "HloModule m\n"
           "f {\n"
           "  a = f32[300,40] parameter(0)\n"
           "  b = f32[40,70] parameter(1)\n"
           "  d = f32[300,70] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
           "  z = f32[] constant(0)\n"
           "  zb = f32[300,70] broadcast(z), dimensions={}\n"
           "  ROOT e = f32[300,70] maximum(d, zb)\n"
           "}\n"
           "ENTRY e {\n"
           "  a0 = f32[300,40] parameter(0)\n"
           "  b0 = f32[40,70] parameter(1)\n"
           "  c0 = f32[70,300] parameter(2)\n"
           "  x = f32[300,70] fusion(a0, b0), kind=kOutput, calls=f\n"
           "  y = f32[70,70] dot(c0, x), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
           "  ROOT o = (f32[300,70], f32[70,70]) tuple(x, y)\n"
           "}\n",
           1e-4, true);
  ct_knob(CPU_KNOB_GEMM_CHUNKS, NULL);
}

/* The GEMM function has only the paths the module's products can take: no convolution
 * packing in a module of dots, no packing of A from a matrix in a module of convolutions
 * (of stride 2: not Winograd's, whose products are plain);
 * both where there are both (then checked against the interpreter). */
Test(cpu_gemm, gemm_paths_follow_the_module, .timeout = 300) {
  const char *dots =
      "HloModule m\nENTRY e {\n  x = f32[40,70] parameter(0)\n  y = f32[70,50] parameter(1)\n"
      "  ROOT d = f32[40,50] dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n";
  const char *convs =
      "HloModule m\nENTRY e {\n  x = f32[2,9,9,8] parameter(0)\n  w = f32[3,3,8,16] parameter(1)\n"
      "  ROOT c = f32[2,5,5,16] convolution(x, w), window={size=3x3 stride=2x2 pad=1_1x1_1}, "
      "dim_labels=b01f_01io->b01f\n}\n";
  const char *both =
      "HloModule m\nENTRY e {\n  x = f32[2,9,9,8] parameter(0)\n  w = f32[3,3,8,16] parameter(1)\n"
      "  c = f32[2,5,5,16] convolution(x, w), window={size=3x3 stride=2x2 pad=1_1x1_1}, "
      "dim_labels=b01f_01io->b01f\n"
      "  r = f32[50,16] reshape(c)\n  v = f32[16,30] parameter(2)\n"
      "  ROOT d = f32[50,30] dot(r, v), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n";
  cr_expect(tg_ir_contains(dots, "@model_gemm_f32_pack_a("), "dots: no A packing");
  cr_expect(!tg_ir_contains(dots, "@model_gemm_f32_pack_conv("), "dots: convolution packing made");
  cr_expect(tg_ir_contains(convs, "@model_gemm_f32_pack_conv("),
            "convolutions: no convolution packing");
  cr_expect(!tg_ir_contains(convs, "@model_gemm_f32_pack_a("), "convolutions: A packing made");
  cr_expect(tg_ir_contains(both, "@model_gemm_f32_pack_a(") &&
                tg_ir_contains(both, "@model_gemm_f32_pack_conv("),
            "both: a packing path missing");
  tg_check("dots only", dots, 1e-5, true);
  tg_check("convolutions only", convs, 1e-5, true);
  tg_check("convolution and dot", both, 1e-5, true);
}

/* Compile text as an object dir/NAME.o, with its header dir/NAME.h (o.name: NAME), the rest of
 * the options as o gives them; the object's path into obj. */
static void tg_compile_obj(const char *dir, const char *text, CpuOpts o, char *obj, size_t on) {
  char hdr[512];
  snprintf(obj, on, "%s/%s.o", dir, o.name);
  snprintf(hdr, sizeof hdr, "%s/%s.h", dir, o.name);
  o.out_path = obj;
  o.header_path = hdr;
  o.emit = CPU_EMIT_OBJ;
  HModule *m = ct_parse(text);
  HErr err = {0};
  cr_assert(cpu_compile(m, &o, &err), "%s: %s", o.name, err.msg);
  hlo_module_free(m);
}

/* The .text bytes of the prebuilt library of level isa (NULL when this build has none). */
static const unsigned char *tg_lib_text(const char *isa, size_t *n) {
  for (int i = 0; i < cpu_prebuilt_count; i++) {
    if (strcmp(cpu_prebuilt_objs[i].isa, isa)) continue;
    const unsigned char *b = cpu_prebuilt_objs[i].obj;
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)b;
    const Elf64_Shdr *sh = (const Elf64_Shdr *)(b + eh->e_shoff);
    const char *names = (const char *)b + sh[eh->e_shstrndx].sh_offset;
    for (int k = 1; k < eh->e_shnum; k++)
      if (!strcmp(names + sh[k].sh_name, ".text")) {
        *n = sh[k].sh_size;
        return b + sh[k].sh_offset;
      }
  }
  return NULL;
}

/* Compile text into dir/NAME.o (and .h) for cpu (NULL: the host) with features, at level opt;
 * which prebuilt library the object holds ("x86-64-v4", "x86-64-v3" or "" for none). */
static const char *tg_lib_compile(const char *dir, const char *name, const char *text,
                                  const char *cpu, const char *features, int opt) {
  char obj[512];
  tg_compile_obj(dir, text,
                 (CpuOpts){.knobs = &ct_knobs,
                           .name = name,
                           .opt_level = opt,
                           .par_min_elems = 1,
                           .cpu = cpu,
                           .features = features},
                 obj, sizeof obj);
  size_t n = 0;
  char *b = ct_slurp(obj, &n);
  const char *which = "";
  for (int i = 0; cpu_prebuilt_isas[i]; i++) {
    size_t tn = 0;
    const unsigned char *t = tg_lib_text(cpu_prebuilt_isas[i], &tn);
    if (t && memmem(b, n, t, tn)) which = cpu_prebuilt_isas[i];
  }
  bool sym = memmem(b, n, CPU_LIB_SYMBOL, strlen(CPU_LIB_SYMBOL)) != NULL;
  cr_expect_eq(sym, *which != 0, "%s: library symbols %s without its code", name,
               sym ? "present" : "absent");
  free(b);
  return which;
}

/* The prebuilt library (cpu_prebuilt.c). At -O2 an object for a CPU with x86-64-v3's
 * features holds that level's library (haswell), one with AVX-512 the x86-64-v4 one
 * (skylake-avx512, or sapphirerapids from its features string), and runs like the module's own
 * GEMM functions, against the interpreter, where this host can run it; the library's symbols
 * are local, so two models link into one program. No library: at -O3, for plain x86-64 (SSE2),
 * a CPU whose features remove one the level needs (avx512f takes the AVX2 level instead), a
 * GEMM experiment, HLOC_CPU_PREBUILT=0, or a module without products. */
Test(cpu_gemm, prebuilt_library_joined, .timeout = 300) {
  cr_assert_eq(cpu_prebuilt_count, 2, "this build has %d prebuilt libraries", cpu_prebuilt_count);
  const char *text =
      "HloModule m\nENTRY e {\n  x = f32[2,9,9,8] parameter(0)\n  w = f32[3,3,8,16] parameter(1)\n"
      "  c = f32[2,5,5,16] convolution(x, w), window={size=3x3 stride=2x2 pad=1_1x1_1}, "
      "dim_labels=b01f_01io->b01f\n"
      "  r = f32[50,16] reshape(c)\n  v = f32[16,30] parameter(2)\n"
      "  d = f32[50,30] dot(r, v), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
      "  y = f32[2,8,8,16] parameter(3)\n  u = f32[3,3,16,16] parameter(4)\n"
      "  g = f32[2,8,8,16] convolution(y, u), window={size=3x3 pad=1_1x1_1}, "
      "dim_labels=b01f_01io->b01f\n"
      "  ROOT o = (f32[50,30], f32[2,8,8,16]) tuple(d, g)\n}\n";
  char *dir = ct_tmpdir("hloc_prebuilt");
  cr_expect_str_eq(tg_lib_compile(dir, "hsw", text, "haswell", "", 2), "x86-64-v3");
  cr_expect_str_eq(tg_lib_compile(dir, "skx", text, "skylake-avx512", "", 2), "x86-64-v4");
  cr_expect_str_eq(tg_lib_compile(dir, "spr", text, "sapphirerapids",
                                  "+avx512f,+avx512bw,+avx512dq,+avx512vl", 2),
                   "x86-64-v4");
  cr_expect_str_eq(tg_lib_compile(dir, "noavx512", text, "skylake-avx512", "-avx512f", 2),
                   "x86-64-v3");
  cr_expect_str_eq(tg_lib_compile(dir, "o3", text, "haswell", "", 3), "");
  cr_expect_str_eq(tg_lib_compile(dir, "sse", text, "x86-64", "", 2), "");
  cr_expect_str_eq(tg_lib_compile(dir, "nofma", text, "haswell", "-fma", 2), "");
  ct_knob(CPU_KNOB_GEMM_BLOCKS, "24,64,64");
  cr_expect_str_eq(tg_lib_compile(dir, "blocks", text, "haswell", "", 2), "");
  ct_knob(CPU_KNOB_GEMM_BLOCKS, NULL);
  ct_knob(CPU_KNOB_PREBUILT, "0");
  cr_expect_str_eq(tg_lib_compile(dir, "off", text, "haswell", "", 2), "");
  ct_knob(CPU_KNOB_PREBUILT, NULL);
  /* exactly when no knob that changes the code is set (cpu_knobs.def's TUNING column): not with
     one that steers kernels outside the GEMM, still with one that only steers the emission */
  ct_knob(CPU_KNOB_SHARE, "exact");
  cr_expect_str_eq(tg_lib_compile(dir, "share", text, "haswell", "", 2), "");
  ct_knob(CPU_KNOB_SHARE, NULL);
  ct_knob(CPU_KNOB_SPLIT, "1");
  cr_expect_str_eq(tg_lib_compile(dir, "split", text, "haswell", "", 2), "x86-64-v3");
  ct_knob(CPU_KNOB_SPLIT, NULL);
  /* nor in an object without products */
  cr_expect_str_eq(tg_lib_compile(dir, "plain",
                                  "HloModule m\nENTRY e {\n  x = f32[64,64] parameter(0)\n"
                                  "  ROOT y = f32[64,64] add(x, x)\n}\n",
                                  "haswell", "", 2),
                   "");
  /* two models with the library in one program: a relocatable link refuses duplicate globals */
  char cmd[2048];
  snprintf(cmd, sizeof cmd,
           "cd '%s' && ld -r hsw.o skx.o -o two.o && nm two.o | grep -c ' t " CPU_LIB_SYMBOL "$'",
           dir);
  FILE *p = popen(cmd, "r");
  cr_assert(p);
  int nlocal = 0;
  cr_expect_eq(fscanf(p, "%d", &nlocal), 1);
  cr_expect_eq(pclose(p), 0, "%s", cmd);
  cr_expect_eq(nlocal, 2, "two local " CPU_LIB_SYMBOL " expected, %d", nlocal);
  /* runs, where the host has the level */
  __builtin_cpu_init();
  bool v3 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
            __builtin_cpu_supports("bmi2");
  bool v4 = v3 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
            __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  HModule *ref = ct_parse(text);
  HArena *a = hlo_arena_new();
  ct_reference(ref, a, dir, 5);
  static const char *const cpus[] = {"haswell", "skylake-avx512", "x86-64"}, *const libs[] = {
                                                                                 "x86-64-v3",
                                                                                 "x86-64-v4", ""};
  for (int i = 0; i < 3; i++) {
    if ((i == 0 && !v3) || (i == 1 && !v4)) {
      fprintf(stderr, "[cpu_gemm] prebuilt library for %s: not run, the host lacks its ISA level\n",
              cpus[i]);
      continue;
    }
    char sub[600];
    snprintf(sub, sizeof sub, "%s/run%d", dir, i);
    snprintf(cmd, sizeof cmd, "mkdir -p '%s' && cp '%s'/in*.npy '%s'/out*.npy '%s'", sub, dir, dir,
             sub);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
    cr_expect_str_eq(tg_lib_compile(sub, "model", text, cpus[i], "", 2), libs[i]);
    ct_build_driver(sub);
    ct_check_driver(sub, sub, 1e-5, "cpu_gemm", cpus[i]);
  }
  hlo_arena_free(a);
  hlo_module_free(ref);
  ct_rmdir(dir);
  free(dir);
}

/* Read-only data of 64 KiB or more (CPU_RAW_MIN: here a constant B of 200 x 96 floats, packed
 * at compile time, as an entry constant and fused) goes into the object past LLVM: declared in
 * the module, its bytes joined to the object as a local symbol of .rodata; serially and on
 * the split path, with the prebuilt library and without. */
Test(cpu_gemm, large_constants_joined_as_data, .timeout = 300) {
  char *dir = ct_tmpdir("hloc_rawdata"), cmd[1024];
  for (int fused = 0; fused < 2; fused++) {
    char *t = tg_const_b_text(50, 200, 96, fused);
    tg_lib_compile(dir, "big", t, NULL, NULL, 2);
    snprintf(cmd, sizeof cmd, "nm '%s/big.o' | grep -q ' r big_cb0$'", dir);
    cr_expect_eq(system(cmd), 0, "no local read-only symbol big_cb0 (%s)",
                 fused ? "fused" : "entry constant");
    tg_check(fused ? "large constant B, fused" : "large constant B", t, 1e-4, true);
    ct_knob(CPU_KNOB_SPLIT, "1");
    tg_check(fused ? "large constant B, fused, split" : "large constant B, split", t, 1e-4, true);
    ct_knob(CPU_KNOB_SPLIT, NULL);
    free(t);
  }
  ct_rmdir(dir);
  free(dir);
}

/* Whether compiling text for haswell with --profile (task names in the object) names a task
 * "few columns". */
static bool tg_few_columns_task(const char *dir, const char *text) {
  char obj[512];
  tg_compile_obj(dir, text,
                 (CpuOpts){.knobs = &ct_knobs,
                           .name = "tiny",
                           .opt_level = 2,
                           .cpu = "haswell",
                           .features = "",
                           .profile = true},
                 obj, sizeof obj);
  return tg_obj_has(obj, "few columns");
}

/* A product of at most 65536 multiply-adds (GM_TINY_MACS: a few microseconds) goes through the
 * prebuilt library's blocked GEMM instead of a few-columns kernel made for it (5-15 ms of
 * compilation each); without the library, or when larger, it keeps that kernel. Against the
 * interpreter with the library and without (tg_check). */
Test(cpu_gemm, tiny_products_through_the_library, .timeout = 300) {
  const char *tiny =
      "HloModule m\nENTRY e {\n  x = f32[32,128] parameter(0)\n  w = f32[128,10] parameter(1)\n"
      "  ROOT d = f32[32,10] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n";
  const char *larger =
      "HloModule m\nENTRY e {\n  x = f32[64,128] parameter(0)\n  w = f32[128,10] parameter(1)\n"
      "  ROOT d = f32[64,10] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n";
  char *dir = ct_tmpdir("hloc_tiny");
  cr_expect(!tg_few_columns_task(dir, tiny), "a tiny product kept its few-columns kernel");
  cr_expect(tg_few_columns_task(dir, larger), "81920 multiply-adds lost the few-columns kernel");
  ct_knob(CPU_KNOB_PREBUILT, "0");
  cr_expect(tg_few_columns_task(dir, tiny), "no library, yet no few-columns kernel");
  ct_knob(CPU_KNOB_PREBUILT, NULL);
  tg_check("tiny product", tiny, 1e-5, false); /* IR output (no library): the few-columns kernel */
  ct_rmdir(dir);
  free(dir);
}

/* On a CPU without FMA (generic x86-64: SSE2) the micro-kernels multiply and add rather than
 * call fmaf for every element (which made resnet_block 37x slower there), a product and a
 * Winograd convolution alike; with FMA they fuse; without AVX the vectors are 128-bit. */
Test(cpu_gemm, no_fma_calls_without_fma, .timeout = 300) {
  const char *t = "HloModule m\nENTRY e {\n  x = f32[2,8,8,16] parameter(0)\n  w = f32[3,3,16,16] "
                  "parameter(1)\n"
                  "  c = f32[2,8,8,16] convolution(x, w), window={size=3x3 pad=1_1x1_1}, "
                  "dim_labels=b01f_01io->b01f\n"
                  "  a = f32[40,70] parameter(2)\n  b = f32[70,50] parameter(3)\n"
                  "  d = f32[40,50] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
                  "  ROOT o = (f32[2,8,8,16], f32[40,50]) tuple(c, d)\n}\n";
  cr_expect(!tg_out_contains(t, "fmaf", true, "x86-64"), "calls to fmaf on x86-64");
  cr_expect(tg_out_contains(t, "vfmadd", true, "haswell"), "no FMA instructions on haswell");
  /* a named CPU without AVX gets 128-bit vectors, not 256-bit ones split in two */
  cr_expect(!tg_out_contains(t, "ymm", true, "nehalem"), "256-bit registers on nehalem");
  /* an AVX-512 CPU whose features remove AVX2 (which LLVM's AVX-512 needs) gets 256-bit
     vectors: the 512-bit configuration failed in LLVM's register allocation */
  char *s = ct_cpu_text(t, (CpuOpts){.knobs = &ct_knobs,
                                     .name = "model",
                                     .opt_level = 2,
                                     .emit = CPU_EMIT_ASM,
                                     .par_min_elems = 1,
                                     .cpu = "rocketlake",
                                     .features = "-avx2"});
  cr_expect(!strstr(s, "zmm") && strstr(s, "ymm"), "rocketlake -avx2: not 256-bit vectors");
  free(s);
}

/* Winograd's F(2x2, 3x3) (3x3 convolutions of unit stride, NHWC input, channel counts in
 * whole vectors at any vector width): with a bias and relu epilogue over three images of
 * 13 x 11 (odd: the last tile row and column half outside the output); asymmetric padding
 * (2_0 x 0_1); a relu summed over the image (the reduction joined to the convolution, through
 * partial results per chunk); a lone convolution without padding whose 2 x 3 outputs per
 * image are one tile row, both images in one slice; 24 and 48 output channels, a last
 * column panel of the transformed taps half padding (24 at AVX2, 48 at AVX-512); OIHW weights,
 * read in place through their strides. */
static const char *const tg_wino =
    "HloModule m\n"
    "add {\n  p = f32[] parameter(0)\n  q = f32[] parameter(1)\n  ROOT s = f32[] add(p, q)\n}\n"
    "f {\n"
    "  x = f32[3,13,11,16] parameter(0)\n"
    "  w = f32[3,3,16,32] parameter(1)\n"
    "  b = f32[32] parameter(2)\n"
    "  c = f32[3,13,11,32] convolution(x, w), window={size=3x3 pad=1_1x1_1}, "
    "dim_labels=b01f_01io->b01f\n"
    "  bb = f32[3,13,11,32] broadcast(b), dimensions={3}\n"
    "  s = f32[3,13,11,32] add(c, bb)\n"
    "  z = f32[] constant(0)\n"
    "  zb = f32[3,13,11,32] broadcast(z), dimensions={}\n"
    "  ROOT r = f32[3,13,11,32] maximum(s, zb)\n"
    "}\n"
    "g {\n"
    "  x = f32[3,13,11,16] parameter(0)\n"
    "  w = f32[3,3,16,16] parameter(1)\n"
    "  c = f32[3,13,10,16] convolution(x, w), window={size=3x3 pad=2_0x0_1}, "
    "dim_labels=b01f_01io->b01f\n"
    "  ROOT t = f32[3,13,10,16] tanh(c)\n"
    "}\n"
    "h {\n"
    "  x = f32[3,13,11,16] parameter(0)\n"
    "  w = f32[3,3,16,32] parameter(1)\n"
    "  c = f32[3,13,11,32] convolution(x, w), window={size=3x3 pad=1_1x1_1}, "
    "dim_labels=b01f_01io->b01f\n"
    "  z = f32[] constant(0)\n"
    "  zb = f32[3,13,11,32] broadcast(z), dimensions={}\n"
    "  r = f32[3,13,11,32] maximum(c, zb)\n"
    "  ROOT m = f32[3,32] reduce(r, z), dimensions={1,2}, to_apply=add\n"
    "}\n"
    "ENTRY e {\n"
    "  x0 = f32[3,13,11,16] parameter(0)\n"
    "  w0 = f32[3,3,16,32] parameter(1)\n"
    "  b0 = f32[32] parameter(2)\n"
    "  w1 = f32[3,3,16,16] parameter(3)\n"
    "  y0 = f32[2,4,5,32] parameter(4)\n"
    "  v0 = f32[3,3,32,16] parameter(5)\n"
    "  br = f32[3,13,11,32] fusion(x0, w0, b0), kind=kOutput, calls=f\n"
    "  as = f32[3,13,10,16] fusion(x0, w1), kind=kOutput, calls=g\n"
    "  po = f32[3,32] fusion(x0, w0), kind=kOutput, calls=h\n"
    "  lo = f32[2,2,3,16] convolution(y0, v0), window={size=3x3}, dim_labels=b01f_01io->b01f\n"
    "  v1 = f32[3,3,32,24] parameter(6)\n"
    "  v2 = f32[3,3,32,48] parameter(7)\n"
    "  c24 = f32[2,4,5,24] convolution(y0, v1), window={size=3x3 pad=1_1x1_1}, "
    "dim_labels=b01f_01io->b01f\n"
    "  c48 = f32[2,4,5,48] convolution(y0, v2), window={size=3x3 pad=1_1x1_1}, "
    "dim_labels=b01f_01io->b01f\n"
    "  v3 = f32[16,32,3,3] parameter(8)\n"
    "  oi = f32[2,4,5,16] convolution(y0, v3), window={size=3x3 pad=1_1x1_1}, "
    "dim_labels=b01f_oi01->b01f\n"
    "  ROOT o = (f32[3,13,11,32], f32[3,13,10,16], f32[3,32], f32[2,2,3,16], f32[2,4,5,24], "
    "f32[2,4,5,48], "
    "f32[2,4,5,16]) tuple(br, as, po, lo, c24, c48, oi)\n"
    "}\n";

Test(cpu_gemm, conv_winograd, .timeout = 300) {
  cr_expect(tg_ir_contains(tg_wino, "wino"), "no Winograd kernel");
  tg_check("Winograd", tg_wino, 1e-4, true);
  ct_knob(CPU_KNOB_WINOGRAD, "0");
  cr_expect(!tg_ir_contains(tg_wino, "wino"), "Winograd kernel made with HLOC_CPU_WINOGRAD=0");
}

/* The same in slices of 8 tiles (HLOC_CPU_WINOGRAD=8: two tile rows of 6, or three of 3):
 * many slices and chunks, slices that cross from one image to the next. */
Test(cpu_gemm, conv_winograd_small_slices, .timeout = 300) {
  ct_knob(CPU_KNOB_WINOGRAD, "8");
  tg_check("Winograd, slices of 8 tiles", tg_wino, 1e-4, true);
}

/* The same with small GEMM blocks (HLOC_CPU_GEMM_BLOCKS: MC 24, KC 24, NC 32): the transformed
 * taps, written as the GEMM reads a B packed beforehand, in two K blocks of 16 input channels
 * and (48 output channels) two column blocks. */
Test(cpu_gemm, conv_winograd_small_blocks, .timeout = 300) {
  ct_knob(CPU_KNOB_GEMM_BLOCKS, "24,24,32");
  tg_check("Winograd, small GEMM blocks", tg_wino, 1e-4, true);
}

/* Winograd at the edges of its geometry: a 2 x 2 image padded to a 2 x 2 output (one tile, all
 * taps of its border rows in the padding), padding 2 on every side (outputs larger than the
 * input), and no padding on 4 x 4 (one tile, every tap inside). */
Test(cpu_gemm, conv_winograd_edges, .timeout = 300) {
  const char *t =
      "HloModule m\nENTRY e {\n"
      "  a = f32[1,2,2,16] parameter(0)\n  b = f32[2,3,5,16] parameter(1)\n  c = f32[1,4,4,16] "
      "parameter(2)\n"
      "  w = f32[3,3,16,16] parameter(3)\n"
      "  x = f32[1,2,2,16] convolution(a, w), window={size=3x3 pad=1_1x1_1}, "
      "dim_labels=b01f_01io->b01f\n"
      "  y = f32[2,5,7,16] convolution(b, w), window={size=3x3 pad=2_2x2_2}, "
      "dim_labels=b01f_01io->b01f\n"
      "  z = f32[1,2,2,16] convolution(c, w), window={size=3x3}, dim_labels=b01f_01io->b01f\n"
      "  ROOT o = (f32[1,2,2,16], f32[2,5,7,16], f32[1,2,2,16]) tuple(x, y, z)\n}\n";
  cr_expect(tg_ir_contains(t, "wino"), "no Winograd kernel");
  tg_check("Winograd at its edges", t, 1e-4, true);
}

/* Constant taps (frozen weights, OIHW as exported) are transformed at compile time into
 * read-only data, so no taps kernel runs (nor is the taps function made); checked against the
 * interpreter, also with small GEMM blocks (two K blocks and two column blocks of the
 * transformed taps' panels). */
Test(cpu_gemm, conv_winograd_constant_taps, .timeout = 300) {
  size_t cap = 48 * 32 * 9 * 16 + 4096, n = 0;
  char *t = malloc(cap);
  cr_assert(t);
  n += (size_t)snprintf(
      t + n, cap - n,
      "HloModule m\nENTRY e {\n  x = f32[2,6,7,32] parameter(0)\n  w = f32[48,32,3,3] constant({");
  for (int o = 0; o < 48; o++) {
    n += (size_t)snprintf(t + n, cap - n, "%s{", o ? ", " : "");
    for (int i = 0; i < 32; i++) {
      n += (size_t)snprintf(t + n, cap - n, "%s{", i ? ", " : "");
      for (int h = 0; h < 3; h++) {
        n += (size_t)snprintf(t + n, cap - n, "%s{", h ? ", " : "");
        for (int v = 0; v < 3; v++)
          n += (size_t)snprintf(t + n, cap - n, "%s%.5g", v ? ", " : "",
                                sin(0.37 * (double)(((o * 32 + i) * 3 + h) * 3 + v)) / 8);
        n += (size_t)snprintf(t + n, cap - n, "}");
      }
      n += (size_t)snprintf(t + n, cap - n, "}");
    }
    n += (size_t)snprintf(t + n, cap - n, "}");
  }
  snprintf(t + n, cap - n,
           "})\n  ROOT c = f32[2,6,7,48] convolution(x, w), window={size=3x3 pad=1_1x1_1}, "
           "dim_labels=b01f_oi01->b01f\n}\n");
  cr_expect(tg_has_global(t, "model_wu"), "the taps not transformed at compile time");
  cr_expect(!tg_ir_contains(t, "@model_wino_taps("), "a taps function made for constant taps");
  tg_check("Winograd, constant taps", t, 1e-4, true);
  ct_knob(CPU_KNOB_GEMM_BLOCKS, "24,16,32");
  tg_check("Winograd, constant taps, small GEMM blocks", t, 1e-4, true);
  free(t);
}

/* An image too wide for Winograd's slices (one row of 516 tiles at 64 + 64 channels: 8 MiB of
 * transformed values) is computed directly. */
Test(cpu_gemm, conv_winograd_too_wide, .timeout = 300) {
  const char *wide = "HloModule m\nENTRY e {\n  x = f32[1,3,1031,64] parameter(0)\n  w = "
                     "f32[3,3,64,64] parameter(1)\n"
                     "  ROOT c = f32[1,3,1031,64] convolution(x, w), window={size=3x3 "
                     "pad=1_1x1_1}, dim_labels=b01f_01io->b01f\n}\n";
  cr_expect(!tg_ir_contains(wide, "wino"), "Winograd for a row of 516 tiles");
  tg_check("too wide for Winograd", wide, 1e-4, true);
}

/* A dot whose rows are split over the chunks packs its B once, ahead of the GEMM, in a kernel
 * of its own: M = 300 in row blocks of 78 (an edge block of 66), K = 500 (two K blocks, depth
 * not a multiple of the vector width), N = 70 (an edge column panel); B read row-major, then
 * through a transpose (row stride 1: full panels transposed in registers, the edge panel
 * element by element), under an output fusion whose lhs is computed (staged); then N past
 * one column block. */
Test(cpu_gemm, dot_rows_split_b_packed_once, .timeout = 300) {
  tg_check_fn(
      "B packed once",
      "HloModule m\n"
      "ENTRY e {\n"
      "  a = f32[300,500] parameter(0)\n"
      "  b = f32[500,70] parameter(1)\n"
      "  ROOT d = f32[300,70] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
      "}\n",
      1e-4, true, "model_gemm_packb_f32");
  tg_check_fn("B packed once, transposed, epilogue",
              "HloModule m\n"
              "f {\n"
              "  a = f32[300,500] parameter(0)\n"
              "  ea = f32[300,500] exponential(a)\n"
              "  b = f32[70,500] parameter(1)\n"
              "  d = f32[300,70] dot(ea, b), lhs_contracting_dims={1}, rhs_contracting_dims={1}\n"
              "  c = f32[70] parameter(2)\n"
              "  cb = f32[300,70] broadcast(c), dimensions={1}\n"
              "  ROOT e = f32[300,70] add(d, cb)\n"
              "}\n"
              "ENTRY e {\n"
              "  a0 = f32[300,500] parameter(0)\n"
              "  b0 = f32[70,500] parameter(1)\n"
              "  c0 = f32[70] parameter(2)\n"
              "  ROOT x = f32[300,70] fusion(a0, b0, c0), kind=kOutput, calls=f\n"
              "}\n",
              1e-4, true, "model_gemm_packb_f32");
  /* N = 1100 > NC on every target: column blocks of equal width (5 on AVX-512, 2 on AVX2),
     each with its packed B, M = 1200 split in row blocks (8 chunks asked: AVX-512's five
     column blocks alone are enough items for the 4 chunks of a product this size) */
  ct_knob(CPU_KNOB_GEMM_CHUNKS, "8");
  tg_check_fn(
      "B packed once, several column blocks",
      "HloModule m\n"
      "ENTRY e {\n"
      "  a = f32[1200,40] parameter(0)\n"
      "  b = f32[40,1100] parameter(1)\n"
      "  ROOT d = f32[1200,1100] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
      "}\n",
      1e-4, true, "model_gemm_packb_f32");
}

/* A dot whose columns only are split over the chunks packs its A once: M = 300 (three MC row
 * blocks, edge micro-tiles), K = 450 (two K blocks), N = 700 in column blocks; A row-major,
 * then transposed (row stride 1, column stride 300), with a ReLU epilogue, and with 7 chunks
 * (column blocks of uneven count per chunk). */
Test(cpu_gemm, dot_cols_split_a_packed_once, .timeout = 300) {
  tg_check_fn(
      "A packed once",
      "HloModule m\n"
      "ENTRY e {\n"
      "  a = f32[300,450] parameter(0)\n"
      "  b = f32[450,700] parameter(1)\n"
      "  ROOT d = f32[300,700] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
      "}\n",
      1e-4, true, "model_gemm_packa_f32");
  ct_knob(CPU_KNOB_GEMM_CHUNKS, "7");
  tg_check_fn("A packed once, transposed, epilogue, 7 chunks",
              "HloModule m\n"
              "f {\n"
              "  a = f32[450,300] parameter(0)\n"
              "  b = f32[450,700] parameter(1)\n"
              "  d = f32[300,700] dot(a, b), lhs_contracting_dims={0}, rhs_contracting_dims={0}\n"
              "  z = f32[] constant(0)\n"
              "  zb = f32[300,700] broadcast(z), dimensions={}\n"
              "  ROOT e = f32[300,700] maximum(d, zb)\n"
              "}\n"
              "ENTRY e {\n"
              "  a0 = f32[450,300] parameter(0)\n"
              "  b0 = f32[450,700] parameter(1)\n"
              "  ROOT x = f32[300,700] fusion(a0, b0), kind=kOutput, calls=f\n"
              "}\n",
              1e-4, true, "model_gemm_packa_f32");
  ct_knob(CPU_KNOB_GEMM_CHUNKS, NULL);
}

/* ------------------------------------------------------------------ 16-bit operands */

/* Products of bf16 or f16 operands (both of one type, ty), summed in f32 and stored as ty or
 * f32 (rty), through the GEMM: the operands widened as they are packed or loaded, a 16-bit
 * result rounded once from the f32 sums (the interpreter sums in double and rounds once).
 * tg_lowp_text writes the module of one product: M x K times K x N, A stored [K, M] when ta,
 * B stored [N, K] when tb, nb > 0 batches, with a fused epilogue (a bias added, then a
 * multiply by the product itself) when fused. */
static char *tg_lowp_text(const char *ty, const char *rty, int nb, int M, int K, int N, bool ta,
                          bool tb, bool fused) {
  char bat[32] = "", a[96], b[96], o[96], dn[256];
  if (nb) snprintf(bat, sizeof bat, "%d,", nb);
  snprintf(a, sizeof a, "%s[%s%d,%d]", ty, bat, ta ? K : M, ta ? M : K);
  snprintf(b, sizeof b, "%s[%s%d,%d]", ty, bat, tb ? N : K, tb ? K : N);
  snprintf(o, sizeof o, "%s[%s%d,%d]", rty, bat, M, N);
  int o0 = nb ? 1 : 0;
  snprintf(dn, sizeof dn, "%slhs_contracting_dims={%d}, rhs_contracting_dims={%d}",
           nb ? "lhs_batch_dims={0}, rhs_batch_dims={0}, " : "", o0 + (ta ? 0 : 1),
           o0 + (tb ? 1 : 0));
  char *t = malloc(4096);
  if (!fused) {
    snprintf(t, 4096,
             "HloModule m\nENTRY e {\n  x = %s parameter(0)\n  y = %s parameter(1)\n  ROOT d = %s "
             "dot(x, y), %s\n}\n",
             a, b, o, dn);
    return t;
  }
  snprintf(
      t, 4096,
      "HloModule m\nf {\n  x = %s parameter(0)\n  y = %s parameter(1)\n  c = %s[%d] parameter(2)\n"
      "  d = %s dot(x, y), %s\n  cb = %s broadcast(c), dimensions={%d}\n  s = %s add(d, cb)\n"
      "  ROOT r = %s multiply(s, d)\n}\n"
      "ENTRY e {\n  x0 = %s parameter(0)\n  y0 = %s parameter(1)\n  c0 = %s[%d] parameter(2)\n"
      "  ROOT f0 = %s fusion(x0, y0, c0), kind=kOutput, calls=f\n}\n",
      a, b, rty, N, o, dn, o, o0 + 1, o, o, a, b, rty, N, o);
  return t;
}

/* Whether the IR of text has the few-rows (or few-columns: the dot form) kernel, on FMAs or
 * (the host's bf16 and s8 products where it has them) on VDPBF16PS / VPDPBUSD. */
static bool tg_few_kernel(const char *text) {
  char *t = tg_out_text(text, false, NULL);
  bool found = strstr(t, "smallk") || strstr(t, "smalld") || strstr(t, "fddb") || strstr(t, "fdqb");
  free(t);
  return found;
}

/* One product of tg_lowp_text against the interpreter, through the GEMM of ty (blocked: its
 * function; else the few-rows or few-columns kernel, which make none). The bar: 3e-2 of the
 * result's scale for 16-bit results (an ulp of bf16 is 2^-8 of the value), 1e-4 for f32 ones. */
static void tg_lowp(const char *ty, const char *rty, int nb, int M, int K, int N, bool ta, bool tb,
                    bool fused, bool blocked) {
  char *t = tg_lowp_text(ty, rty, nb, M, K, N, ta, tb, fused), what[160], fn[64];
  snprintf(what, sizeof what, "%s x %s -> %s, %s%dx%dx%d%s%s%s", ty, ty, rty, nb ? "batched " : "",
           M, K, N, ta ? ", A transposed" : "", tb ? ", B transposed" : "", fused ? ", fused" : "");
  snprintf(fn, sizeof fn, "model_gemm_%s", ty);
  if (!blocked) cr_expect(tg_few_kernel(t), "%s: not the few-rows or few-columns kernel", what);
  tg_features = "-avx512bf16,-amx-bf16";
  tg_check_gemm(what, t, strcmp(rty, "f32") ? 3e-2 : 1e-4, fn, blocked, NULL);
  tg_features = NULL;
  free(t);
}

/* The blocked GEMM: K = 450 (two K blocks at AVX2's KC of 384), M and N not multiples of the
 * tile (37 rows: six 6-row panels and one of 1; 70 columns: an edge panel), each operand
 * transposed, batched, and inside an output fusion; bf16 -> bf16, bf16 -> f32, f16 -> f16. */
Test(cpu_gemm_lowp, bf16_blocked, .timeout = 300) {
  tg_lowp("bf16", "bf16", 0, 37, 450, 70, false, false, false, true);
  tg_lowp("bf16", "bf16", 0, 37, 450, 70, true, true, false, true);
  tg_lowp("bf16", "bf16", 3, 29, 100, 33, false, true, true, true);
}

Test(cpu_gemm_lowp, bf16_to_f32_blocked, .timeout = 300) {
  tg_lowp("bf16", "f32", 0, 37, 450, 70, false, false, false, true);
  tg_lowp("bf16", "f32", 3, 29, 100, 33, true, false, false, true);
  tg_lowp("bf16", "f32", 0, 40, 130, 50, false, false, true, true);
}

Test(cpu_gemm_lowp, f16_blocked, .timeout = 300) {
  tg_lowp("f16", "f16", 0, 37, 450, 70, false, false, false, true);
  tg_lowp("f16", "f16", 0, 37, 450, 70, true, true, true, true);
  tg_lowp("f16", "f32", 3, 29, 100, 33, false, true, false, true);
}

/* text compiled to assembly for cpu with features feat (malloc'd). */
static char *tg_asm(const char *text, const char *cpu, const char *feat) {
  return ct_cpu_text(text, (CpuOpts){.knobs = &ct_knobs,
                                     .name = "model",
                                     .opt_level = 2,
                                     .emit = CPU_EMIT_ASM,
                                     .cpu = cpu,
                                     .features = feat});
}

/* Whether text compiled for cpu with features feat has the AMX GEMM: its tile configuration,
 * TDPBF16PS, the request for the tile state (a system call) and the tiles' release. */
static bool tg_amx(const char *text, const char *cpu, const char *feat) {
  char *t = tg_asm(text, cpu, feat);
  bool has = strstr(t, "ldtilecfg") && strstr(t, "tdpbf16ps") && strstr(t, "syscall") &&
             strstr(t, "tilerelease");
  free(t);
  return has;
}

/* bf16 dots compiled for a CPU with AMX-BF16 run on its tiles (gemm/amx.c); not with the
 * feature turned off, nor for CPUs without it, nor for f16 operands, nor (for now) with A's
 * depths strided. Their results are checked
 * where the CPU has AMX: by the other tests on such a host, and on the device machine's Xeon
 * by tools/cpu_device_test.sh's bundle (tests/cpu/cases/dot_bf16_blocks.hlo crosses every
 * block of the AMX function). */
Test(cpu_gemm_lowp, bf16_on_amx_tiles, .timeout = 120) {
  char *t = tg_lowp_text("bf16", "f32", 0, 64, 128, 64, false, false, false);
  cr_expect(tg_amx(t, "sapphirerapids", ""), "sapphirerapids: no AMX GEMM");
  cr_expect(tg_amx(t, "x86-64-v4", "+amx-tile,+amx-bf16"), "x86-64-v4 +amx-bf16: no AMX GEMM");
  cr_expect(!tg_amx(t, "sapphirerapids", "-amx-bf16"), "sapphirerapids -amx-bf16: AMX GEMM");
  cr_expect(!tg_amx(t, "skylake-avx512", ""), "skylake-avx512: AMX GEMM");
  free(t);
  t = tg_lowp_text("bf16", "bf16", 0, 64, 128, 64, false, false, true);
  cr_expect(tg_amx(t, "sapphirerapids", ""), "sapphirerapids, bf16 result, fused: no AMX GEMM");
  free(t);
  t = tg_lowp_text("bf16", "bf16", 0, 64, 128, 64, false, true, false);
  cr_expect(tg_amx(t, "sapphirerapids", ""), "sapphirerapids, B transposed: no AMX GEMM");
  free(t);
  /* (A [K, M]: packed element by element, slower than the widened path's packing) */
  t = tg_lowp_text("bf16", "bf16", 0, 64, 128, 64, true, false, false);
  cr_expect(!tg_amx(t, "sapphirerapids", ""), "sapphirerapids, A transposed: AMX GEMM");
  free(t);
  t = tg_lowp_text("f16", "f32", 0, 64, 128, 64, false, false, false);
  cr_expect(!tg_amx(t, "sapphirerapids", ""), "sapphirerapids, f16: AMX GEMM");
  free(t);
  /* its weights may be packed ahead, into the tiles (NAME_pack calls the AMX packing) */
  t = tg_lowp_text("bf16", "f32", 0, 64, 128, 64, false, false, false);
  char *ir = ct_cpu_text(t, (CpuOpts){.knobs = &ct_knobs,
                                      .name = "model",
                                      .opt_level = 0,
                                      .emit = CPU_EMIT_LLVM,
                                      .cpu = "sapphirerapids",
                                      .features = ""});
  cr_expect(strstr(ir, " @model_pack(") && strstr(ir, "call void @model_gemm_bf16_pairs_packb("),
            "sapphirerapids: model_pack does not pack B into tiles");
  free(ir);
  free(t);
}

/* s8 x s8 -> s32 dots compiled for a CPU with AMX-INT8 run on its tiles (TDPBSSD), B either
 * way, fused; not with -amx-int8 (the widened GEMM, exact too), nor for skylake-avx512. Their
 * results are checked on the device machine's Xeon by tools/cpu_device_test.sh
 * (tests/cpu/cases/dot_s8_gemm.hlo). */
Test(cpu_gemm_lowp, s8_on_amx_tiles, .timeout = 120) {
  for (int v = 0; v < 3; v++) {
    char *t = tg_lowp_text("s8", "s32", v == 2 ? 2 : 0, 64, 192, 96, false, v == 1, v == 2);
    char *a = tg_asm(t, "sapphirerapids", "");
    cr_expect(strstr(a, "tdpbssd") && strstr(a, "ldtilecfg"), "variant %d: no AMX-INT8 GEMM", v);
    free(a);
    a = tg_asm(t, "sapphirerapids", "-amx-int8");
    cr_expect(!strstr(a, "tdpbssd"), "variant %d, -amx-int8: AMX-INT8 GEMM", v);
    free(a);
    free(t);
  }
}

/* s8 dots compiled for a CPU with AVX512-VNNI and no AMX-INT8 run on VPDPBUSD (B biased to u8,
 * the rows' sums of A taken off); not without the feature. Their results are checked on the
 * device machine's Xeon by tools/cpu_device_test.sh built with -amx-int8. */
Test(cpu_gemm_lowp, s8_on_avx512vnni, .timeout = 120) {
  char *t = tg_lowp_text("s8", "s32", 0, 64, 192, 96, false, true, true);
  const char *cpus[3][2] = {
      {"icelake-server", ""}, {"znver4", ""}, {"sapphirerapids", "-amx-int8"}};
  for (int i = 0; i < 3; i++) {
    char *a = tg_asm(t, cpus[i][0], cpus[i][1]);
    cr_expect(strstr(a, "vpdpbusd") && strstr(a, "model_gemm_s8_dp:") && !strstr(a, "tdpbssd"),
              "%s %s: no AVX512-VNNI GEMM", cpus[i][0], cpus[i][1]);
    free(a);
  }
  char *a = tg_asm(t, "icelake-server", "-avx512vnni");
  cr_expect(!strstr(a, "vpdpbusd"), "icelake-server -avx512vnni: VNNI GEMM");
  free(a);
  free(t);
}

/* Whether text compiled for cpu with features feat has the AVX512-BF16 GEMM (VDPBF16PS, no
 * tiles). */
static bool tg_dpbf16(const char *text, const char *cpu, const char *feat) {
  char *t = tg_asm(text, cpu, feat);
  bool has = strstr(t, "vdpbf16ps") && !strstr(t, "tdpbf16ps") && strstr(t, "model_gemm_bf16_dp:");
  free(t);
  return has;
}

/* bf16 dots compiled for a CPU with AVX512-BF16 and no AMX run on VDPBF16PS (gemm/dpbf16.c);
 * not where AMX is there, nor on an AMX CPU told -amx-bf16 (its VDPBF16PS is slower than the
 * widened FMAs), nor without the feature, nor for f16. Results are checked on the device
 * machine's Xeon by tools/cpu_device_test.sh built with +avx512bf16 for x86-64-v4 (this
 * machine has no AVX-512). */
Test(cpu_gemm_lowp, bf16_on_avx512bf16, .timeout = 120) {
  char *t = tg_lowp_text("bf16", "f32", 0, 64, 128, 64, false, false, false);
  cr_expect(tg_dpbf16(t, "cooperlake", ""), "cooperlake: no AVX512-BF16 GEMM");
  cr_expect(tg_dpbf16(t, "znver4", ""), "znver4: no AVX512-BF16 GEMM");
  cr_expect(!tg_dpbf16(t, "sapphirerapids", "-amx-bf16"), "sapphirerapids -amx-bf16: slow path");
  cr_expect(tg_dpbf16(t, "x86-64-v4", "+avx512bf16"), "x86-64-v4 +avx512bf16: none");
  cr_expect(!tg_dpbf16(t, "sapphirerapids", ""), "sapphirerapids: AVX512-BF16, not AMX");
  cr_expect(!tg_dpbf16(t, "cooperlake", "-avx512bf16"), "cooperlake -avx512bf16: AVX512-BF16");
  cr_expect(!tg_dpbf16(t, "icelake-server", ""), "icelake-server: AVX512-BF16");
  free(t);
  t = tg_lowp_text("bf16", "bf16", 0, 64, 128, 64, false, true, true);
  cr_expect(tg_dpbf16(t, "cooperlake", ""), "cooperlake, B transposed, fused: none");
  free(t);
  t = tg_lowp_text("f16", "f32", 0, 64, 128, 64, false, false, false);
  cr_expect(!tg_dpbf16(t, "cooperlake", ""), "cooperlake, f16: AVX512-BF16 GEMM");
  free(t);
}

/* Where the host runs AVX512-BF16 without AMX (Zen 4, Cooper Lake), the bf16 GEMM it takes
 * (gemm/dpbf16.c) runs against the interpreter: the shapes of bf16_blocked (two K blocks, edge
 * panels, B transposed, batched inside an output fusion) and a bf16 -> f32 one (a transposed A
 * takes the widened GEMM). */
Test(cpu_gemm_lowp, bf16_dp_runs_on_the_host, .timeout = 300) {
  if (!__builtin_cpu_supports("avx512bf16") || __builtin_cpu_supports("amx-bf16"))
    cr_skip_test("the host has no AVX512-BF16, or AMX instead");
  static const struct {
    const char *rty;
    int nb, M, K, N;
    bool ta, tb, fused;
  } cs[] = {{"bf16", 0, 37, 450, 70, false, false, false},
            {"bf16", 0, 37, 450, 70, false, true, false},
            {"bf16", 3, 29, 100, 33, false, true, true},
            {"f32", 0, 40, 130, 50, false, false, true}};
  for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
    char *t = tg_lowp_text("bf16", cs[i].rty, cs[i].nb, cs[i].M, cs[i].K, cs[i].N, cs[i].ta,
                           cs[i].tb, cs[i].fused),
         what[96];
    snprintf(what, sizeof what, "AVX512-BF16 GEMM, case %zu", i);
    tg_check_gemm(what, t, strcmp(cs[i].rty, "f32") ? 3e-2 : 1e-4, "model_gemm_bf16_dp", true,
                  NULL);
    free(t);
  }
}

/* Few rows on depth-group instructions (gemm/few_dp.c) where the host has them: bf16 on
 * VDPBF16PS (a CPU of AVX512-BF16 without AMX), s8 x s8 -> s32 on VPDPBUSD (AVX512-VNNI),
 * against the interpreter: M = 1, 5 and 8; K with a last partial group of depths (37, 301;
 * 37 and 301 are also no multiple of the dot form's vector) and deeper than GM_S8_KC (1030);
 * N = 100 (a masked edge); B [K, N] (the streaming form) and [N, K] (the dot form); batched,
 * and fused; compiled for icelake-server, an s8 product of 8 rows has the VNNI few-rows kernel
 * in its assembly. */
Test(cpu_gemm_lowp, few_rows_dp_runs_on_the_host, .timeout = 300) {
  static const struct {
    const char *ty, *rty;
    int nb, M, K, N;
    bool tb, fused;
  } cs[] = {
      {"bf16", "bf16", 0, 1, 301, 100, false, false}, {"bf16", "f32", 0, 8, 37, 100, false, true},
      {"bf16", "bf16", 2, 5, 301, 100, true, false},  {"bf16", "f32", 0, 8, 301, 70, true, true},
      {"s8", "s32", 0, 1, 301, 100, false, false},    {"s8", "s32", 0, 8, 1030, 100, false, true},
      {"s8", "s32", 2, 5, 37, 100, false, false},     {"s8", "s32", 0, 8, 301, 100, true, false},
      {"s8", "s32", 0, 3, 1030, 70, true, true}};
  bool bf = __builtin_cpu_supports("avx512bf16") && !__builtin_cpu_supports("amx-bf16");
  bool vnni = __builtin_cpu_supports("avx512vnni");
  char *t8 = tg_lowp_text("s8", "s32", 0, 8, 301, 100, false, false, false);
  char *a = tg_asm(t8, "icelake-server", "");
  cr_expect(strstr(a, "vpdpbusd") && !strstr(a, "model_gemm_s8"),
            "icelake-server: no VNNI few rows");
  free(a);
  free(t8);
  if (!bf && !vnni) cr_skip_test("the host has neither AVX512-BF16 (without AMX) nor AVX512-VNNI");
  for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
    bool s8 = cs[i].ty[0] == 's';
    if (s8 ? !vnni : !bf) continue;
    char *t = tg_lowp_text(cs[i].ty, cs[i].rty, cs[i].nb, cs[i].M, cs[i].K, cs[i].N, false,
                           cs[i].tb, cs[i].fused),
         what[96], fn[32];
    snprintf(what, sizeof what, "few rows on %s, case %zu", s8 ? "VPDPBUSD" : "VDPBF16PS", i);
    cr_expect(tg_ir_contains(t, cs[i].tb ? "fddb" : "fdqb"), "%s: not the few-rows kernel's", what);
    snprintf(fn, sizeof fn, "model_gemm_%s", cs[i].ty);
    tg_check_gemm(what, t, strcmp(cs[i].rty, "bf16") ? 1e-5 : 3e-2, fn, false, NULL);
    free(t);
  }
}

/* 16-bit convolutions go through the GEMM, their input packed and widened by the 16-bit
 * family's convolution packing (their values: tests/cpu/cases/conv_16bit_gemm.hlo); an f32
 * convolution's module has no 16-bit packing, and a 16-bit 3x3 one takes no Winograd. */
Test(cpu_gemm_lowp, conv_16bit_on_the_gemm, .timeout = 120) {
  static const char *const tys[2] = {"bf16", "f16"};
  for (int i = 0; i < 2; i++) {
    char t[1024], fn[64];
    snprintf(t, sizeof t,
             "HloModule m\nENTRY e {\n  x = %s[2,12,12,32] parameter(0)\n"
             "  w = %s[3,3,32,48] parameter(1)\n  ROOT c = %s[2,12,12,48] convolution(x, w), "
             "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f\n}\n",
             tys[i], tys[i], tys[i]);
    char *ir = ct_cpu_text(t, (CpuOpts){.knobs = &ct_knobs,
                                        .name = "model",
                                        .opt_level = 0,
                                        .emit = CPU_EMIT_LLVM,
                                        .cpu = "x86-64-v3",
                                        .features = ""});
    snprintf(fn, sizeof fn, "define internal void @model_gemm_%s_pack_conv(", tys[i]);
    cr_expect(strstr(ir, fn), "%s convolution: no convolution packing of its type", tys[i]);
    cr_expect(!strstr(ir, "wino"), "%s convolution: Winograd", tys[i]);
    free(ir);
  }
}

/* Few rows (decode): M = 1 and 3 with B [K, N] (the streaming form, B's rows read once, K in
 * blocks of 16 rows summed into the f32 scratch) and B [N, K] (the dot form), batched and
 * fused; M = 8, which takes the few-rows kernel with AVX-512's 32 registers and the blocked
 * path with AVX2's 16 (either way through the GEMM); few columns (N = 10). */
Test(cpu_gemm_lowp, bf16_few_rows_and_columns, .timeout = 300) {
  tg_lowp("bf16", "bf16", 0, 1, 300, 100, false, false, false, false);
  tg_lowp("bf16", "bf16", 0, 1, 300, 100, false, true, false, false);
  tg_lowp("bf16", "f32", 2, 3, 70, 45, false, false, true, false);
  tg_lowp("f16", "f16", 0, 3, 70, 45, false, true, true, false);
  char *t = tg_lowp_text("bf16", "bf16", 0, 8, 300, 100, false, false, false);
  bool few = tg_few_kernel(t);
  free(t);
  tg_lowp("bf16", "bf16", 0, 8, 300, 100, false, false, false, !few);
  tg_lowp("bf16", "bf16", 0, 50, 70, 10, false, false, false, false);
  tg_lowp("bf16", "bf16", 0, 50, 70, 10, false, true, true, false);
}

/* Mixed operand types stay with the elemental kernels: no GEMM function of either type. */
Test(cpu_gemm_lowp, mixed_types_elemental, .timeout = 300) {
  const char *t =
      "HloModule m\nENTRY e {\n  x = bf16[20,30] parameter(0)\n  y = f16[30,40] parameter(1)\n"
      "  ROOT d = f32[20,40] dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n";
  cr_expect(!tg_ir_contains(t, "model_gemm_bf16") && !tg_ir_contains(t, "model_gemm_f16") &&
                !tg_ir_contains(t, "model_gemm_f32") && !tg_few_kernel(t),
            "mixed bf16 x f16 went through the GEMM");
  tg_check_gemm("bf16 x f16 -> f32", t, 1e-4, "model_gemm_bf16", false, NULL);
}
