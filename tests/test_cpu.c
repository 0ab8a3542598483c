/* tests/test_cpu.c: the CPU target end to end.
 *
 * Every test compiles a module with cpu_compile() into an object and a header in a fresh
 * temporary folder, builds tests/cpu_driver.c against them with the system C compiler (as a
 * user would, through the header only), runs it serially and with a 2-thread parallel-for,
 * and compares the results: with XLA's outputs for the corpus fixtures, with the reference
 * interpreter for the small per-op modules. Objects for these tests are split into chunks
 * down to one element (par_min_elems = 1), so the chunking code is exercised on every
 * kernel. Also checked: the header (C and C++, two models in one program), determinism,
 * --emit=llvm/asm output, located errors for unsupported ops, that a failed write leaves no
 * file behind, and reduce-precision bit for bit (through a driver of its own, below). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hlo.h"
#include "optimizer.h"
#include "proto.h"
#include "target.h"
#include "cpu/cpu_test_util.h"



static bool tc_exists(const char *p) {
  struct stat st;
  return stat(p, &st) == 0;
}

/* Write src to DIR/name and run `build` (a shell command, in DIR) on it: 0 when it succeeds
 * (the command is left in cmd, for the failure message). */
static int tc_build_run(const char *dir, const char *name, const char *src, const char *build, char *cmd, size_t n) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  cr_assert(f);
  fputs(src, f);
  fclose(f);
  snprintf(cmd, n, "cd '%s' && %s", dir, build);
  return system(cmd);
}

/* Compile m to DIR/NAME.o + DIR/NAME.h (with --profile's entry point when profile). */
static bool tc_compile_ex(HModule *m, const char *dir, const char *name, int64_t par_min, bool profile, HErr *err) {
  char obj[512], hdr[512];
  snprintf(obj, sizeof obj, "%s/%s.o", dir, name);
  snprintf(hdr, sizeof hdr, "%s/%s.h", dir, name);
  CpuOpts o = {0};
  o.name = name;
  o.out_path = obj;
  o.header_path = hdr;
  o.opt_level = 2;
  o.emit = CPU_EMIT_OBJ;
  o.par_min_elems = par_min;
  o.profile = profile;
  return cpu_compile(m, &o, err);
}

static bool tc_compile(HModule *m, const char *dir, const char *name, int64_t par_min, HErr *err) {
  return tc_compile_ex(m, dir, name, par_min, false, err);
}

/* ------------------------------------------------------------------ corpus fixtures */

/* The LLVM IR cpu_compile() emits for HLO text src at opt_level (the caller frees it). */
static char *tc_llvm_ir(const char *src, const char *name, int opt_level) {
  return ct_cpu_text(src, (CpuOpts){.name = name, .opt_level = opt_level, .emit = CPU_EMIT_LLVM});
}

/* Compile datadir/file (optimized or not), run it through the driver on datadir's inputs and
 * compare with its outputs, serially and on 2 threads. */
static void tc_case(const char *datadir, const char *file, const char *name, double rtol, bool optimize) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", datadir, file);
  HErr err = {0};
  HModule *m = proto_load_file(path, &err);
  cr_assert(m, "%s", err.msg);
  if (optimize) {
    OptOpts oo = {0};
    cr_assert(opt_optimize(m, &oo, &err), "optimizer: %s", err.msg);
  }
  char *dir = ct_tmpdir("hloc_cpu");
  cr_assert(tc_compile(m, dir, "model", 1, &err), "%s", err.msg);
  hlo_module_free(m);
  ct_build_driver(dir);
  ct_check_driver(dir, datadir, rtol, "cpu", name);
  ct_rmdir(dir);
  free(dir);
}

static void tc_fixture_ex(const char *name, double rtol, bool optimize) {
  char datadir[512];
  snprintf(datadir, sizeof datadir, HLOC_CORPUS_DIR "/fixtures/%s", name);
  tc_case(datadir, "module.pb", name, rtol, optimize);
}

static void tc_fixture(const char *name, double rtol) { tc_fixture_ex(name, rtol, false); }

/* After the optimizer: fusion instructions (loop, input with reduce heroes, output with
 * dot/convolution heroes and epilogues, multi-output) reach the code generator. */
static void tc_fixture_opt(const char *name, double rtol) { tc_fixture_ex(name, rtol, true); }

Test(cpu, fused_elementwise_chain, .timeout = 300) { tc_fixture_opt("elementwise_chain", 1e-4); }
Test(cpu, fused_mlp, .timeout = 300) { tc_fixture_opt("mlp", 1e-4); }
Test(cpu, fused_frozen_mlp, .timeout = 300) { tc_fixture_opt("frozen_mlp", 1e-4); }
Test(cpu, fused_simple_cnn, .timeout = 300) { tc_fixture_opt("simple_cnn", 1e-4); }
Test(cpu, fused_transformer_layer, .timeout = 300) { tc_fixture_opt("transformer_layer", 1e-4); }
Test(cpu, fused_resnet_block, .timeout = 300) { tc_fixture_opt("resnet_block", 1e-4); }
Test(cpu, fused_resnet18, .timeout = 300) { tc_fixture_opt("resnet18", 1e-4); }
Test(cpu, fused_bert_base, .timeout = 300) { tc_fixture_opt("bert_base", 1e-4); }
Test(cpu, fused_simple_cnn_train_step, .timeout = 300) { tc_fixture_opt("simple_cnn_train_step", 1e-3); }

/* tests/xla_cases: grouped convolutions (batch_group_count, feature_group_count) exported by
 * JAX with XLA's outputs, as written and after the optimizer. */
/* tests/xla_cases/NAME for each of names[0..n): after the optimizer, and also as written when
 * as_written. */
static void tc_xla_cases(const char *const *names, size_t n, double rtol, bool as_written) {
  for (size_t i = 0; i < n; i++) {
    char datadir[512];
    snprintf(datadir, sizeof datadir, HLOC_TEST_DIR "/xla_cases/%s", names[i]);
    if (as_written) tc_case(datadir, "module.hlo", names[i], rtol, false);
    tc_case(datadir, "module.hlo", names[i], rtol, true);
  }
}

Test(cpu, xla_grouped_convolution_cases, .timeout = 300) {
  const char *names[] = {"bgc2_nhwc", "bgc3_nchw_stride_pad", "bgc2_dilated", "fgc3_nhwc", "grouped_wgrad"};
  tc_xla_cases(names, sizeof names / sizeof *names, 1e-4, true);
}

/* tests/xla_cases: JAX's lax.cond (data-dependent predicate, tuple results, both outcomes) and
 * lax.switch (run-time index in range, past the end and negative; a cond nested in a branch)
 * with XLA's outputs, through the optimizer (conditional-select runs every branch). */
Test(cpu, xla_conditional_cases, .timeout = 300) {
  const char *names[] = {"cond_pred_true", "cond_pred_false", "switch_0", "switch_1", "switch_2", "switch_7", "switch_m3"};
  tc_xla_cases(names, sizeof names / sizeof *names, 1e-5, false);
}

Test(cpu, fixture_elementwise_chain, .timeout = 300) { tc_fixture("elementwise_chain", 1e-4); }
Test(cpu, fixture_mlp, .timeout = 300) { tc_fixture("mlp", 1e-4); }
Test(cpu, fixture_frozen_mlp, .timeout = 300) { tc_fixture("frozen_mlp", 1e-4); }
Test(cpu, fixture_simple_cnn, .timeout = 300) { tc_fixture("simple_cnn", 1e-4); }
Test(cpu, fixture_transformer_layer, .timeout = 300) { tc_fixture("transformer_layer", 1e-4); }
Test(cpu, fixture_resnet_block, .timeout = 300) { tc_fixture("resnet_block", 1e-4); }
Test(cpu, fixture_resnet18, .timeout = 300) { tc_fixture("resnet18", 1e-4); }
Test(cpu, fixture_bert_base, .timeout = 300) { tc_fixture("bert_base", 1e-4); }
Test(cpu, fixture_simple_cnn_train_step, .timeout = 300) { tc_fixture("simple_cnn_train_step", 1e-3); }
/* bf16 Llama layers (prefill and decode; XLA's outputs bf16, as bits): the bf16 bar, 3e-2 of
 * each result's scale. Their dots go through the GEMM (bf16 operands, f32 sums). */
Test(cpu, fixture_llama_layer_bf16, .timeout = 300) { tc_fixture("llama_layer_bf16", 3e-2); }
Test(cpu, fixture_llama_decode_bf16, .timeout = 300) { tc_fixture("llama_decode_bf16", 3e-2); }
Test(cpu, fused_llama_layer_bf16, .timeout = 300) { tc_fixture_opt("llama_layer_bf16", 3e-2); }
Test(cpu, fused_llama_decode_bf16, .timeout = 300) { tc_fixture_opt("llama_decode_bf16", 3e-2); }

/* ------------------------------------------------------------------ single ops vs the interpreter */




/* Compile text (after the optimizer when optimize), evaluate it with the interpreter on
 * generated arguments, compare. */
static void tc_check_text_ex(const char *what, const char *text, double rtol, int int_range, bool optimize) {
  HModule *ref = ct_parse(text);
  HModule *m = ct_parse(text);
  HArena *a = hlo_arena_new();
  char *dir = ct_tmpdir("hloc_cpu");
  HErr err = {0};
  if (optimize) {
    OptOpts oo = {0};
    cr_assert(opt_optimize(m, &oo, &err), "optimizer: %s", err.msg);
  }
  ct_reference(ref, a, dir, int_range);
  cr_assert(tc_compile(m, dir, "model", 1, &err), "%s: %s", what, err.msg);
  ct_build_driver(dir);
  ct_check_driver(dir, dir, rtol, "cpu", what);
  ct_rmdir(dir);
  free(dir);
  hlo_arena_free(a);
  hlo_module_free(ref);
  hlo_module_free(m);
}

static void tc_check_text(const char *what, const char *text, double rtol, int int_range) {
  tc_check_text_ex(what, text, rtol, int_range, false);
}

/* tc_check_text as written, then through the optimizer (labelled "WHAT, optimized"). */
static void tc_check_text_both(const char *what, const char *text, double rtol, int int_range) {
  char opt[256];
  snprintf(opt, sizeof opt, "%s, optimized", what);
  tc_check_text_ex(what, text, rtol, int_range, false);
  tc_check_text_ex(opt, text, rtol, int_range, true);
}

/* Global pools after convolutions, as JAX writes them (NCHW, bias, relu, then a reduction
 * over the image), through the optimizer, which joins each reduction to its convolution's
 * fusion: a sum whose init is an argument, a maximum with -inf. As written they go through the
 * generic kernels. */
Test(cpu, conv_global_pools, .timeout = 300) {
  tc_check_text_both("convolution pools",
                     "HloModule pools\n"
                     "add {\n  p = f32[] parameter(0)\n  q = f32[] parameter(1)\n  ROOT s = f32[] add(p, q)\n}\n"
                     "mx {\n  p1 = f32[] parameter(0)\n  q1 = f32[] parameter(1)\n  ROOT s1 = f32[] maximum(p1, q1)\n}\n"
                     "ENTRY e {\n"
                     "  x = f32[2,5,14,11] parameter(0)\n"
                     "  w = f32[16,5,3,3] parameter(1)\n"
                     "  b = f32[16] parameter(2)\n"
                     "  h = f32[] parameter(3)\n"
                     "  w2 = f32[16,5,3,3] parameter(4)\n"
                     "  c = f32[2,16,14,11] convolution(x, w), window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01\n"
                     "  bb = f32[2,16,14,11] broadcast(b), dimensions={1}\n"
                     "  cb = f32[2,16,14,11] add(c, bb)\n"
                     "  z = f32[] constant(0)\n"
                     "  zb = f32[2,16,14,11] broadcast(z), dimensions={}\n"
                     "  r = f32[2,16,14,11] maximum(cb, zb)\n"
                     "  sum = f32[2,16] reduce(r, h), dimensions={2,3}, to_apply=add\n"
                     "  c2 = f32[2,16,14,11] convolution(x, w2), window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01\n"
                     "  ninf = f32[] constant(-inf)\n"
                     "  big = f32[2,16] reduce(c2, ninf), dimensions={2,3}, to_apply=mx\n"
                     "  ROOT t = (f32[2,16], f32[2,16]) tuple(sum, big)\n"
                     "}\n",
                     1e-4, 0);
}

/* maximum and minimum as XLA and the interpreter define them: isnan(a) || a >= b ? a : b, so
 * NaN in either operand propagates and of +0 and -0 the first operand wins (seen through
 * 1 / result, +-inf); elementwise, in clamp and in an unrolled max-pool window. x * 0 is a
 * zero of x's sign, sqrt(x) a NaN where x < 0. */
Test(cpu, op_minmax_nan_and_signed_zero) {
  tc_check_text("maximum/minimum semantics", "HloModule m\n"
    "max { a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT m = f32[] maximum(a, b) }\n"
    "ENTRY e {\n"
    "  x = f32[6,37] parameter(0)\n"
    "  y = f32[6,37] parameter(1)\n"
    "  zero = f32[] constant(0)\n"
    "  one = f32[] constant(1)\n"
    "  z0 = f32[6,37] broadcast(zero), dimensions={}\n"
    "  o = f32[6,37] broadcast(one), dimensions={}\n"
    "  zx = f32[6,37] multiply(x, z0)\n"
    "  zy = f32[6,37] multiply(y, z0)\n"
    "  nx = f32[6,37] sqrt(x)\n"
    "  ny = f32[6,37] sqrt(y)\n"
    "  mz = f32[6,37] maximum(zx, zy)\n"
    "  nz = f32[6,37] minimum(zx, zy)\n"
    "  imz = f32[6,37] divide(o, mz)\n"
    "  inz = f32[6,37] divide(o, nz)\n"
    "  m1 = f32[6,37] maximum(nx, y)\n"
    "  m2 = f32[6,37] maximum(y, nx)\n"
    "  m3 = f32[6,37] minimum(nx, ny)\n"
    "  m4 = f32[6,37] minimum(x, ny)\n"
    "  cl = f32[6,37] clamp(zy, zx, ny)\n"
    "  icl = f32[6,37] divide(o, cl)\n"
    "  gt = pred[6,37] compare(x, y), direction=GT\n"
    "  mix = f32[6,37] select(gt, nx, zx)\n"
    "  ninf = f32[] constant(-inf)\n"
    "  pool = f32[6,37] reduce-window(mix, ninf), window={size=3x3 pad=1_1x1_1}, to_apply=max\n"
    "  ipool = f32[6,37] divide(o, pool)\n"
    "  ROOT out = (f32[6,37], f32[6,37], f32[6,37], f32[6,37], f32[6,37], f32[6,37], f32[6,37], f32[6,37]) "
    "tuple(imz, inz, m1, m2, m3, m4, icl, ipool)\n"
    "}\n", 0, 4);
}

Test(cpu, op_elementwise_math) {
  tc_check_text("elementwise", "HloModule m\n"
    "ENTRY e {\n"
    "  x = f32[4,33] parameter(0)\n"
    "  y = f32[4,33] parameter(1)\n"
    "  ax = f32[4,33] abs(x)\n"
    "  e = f32[4,33] exponential(x)\n"
    "  l = f32[4,33] log(ax)\n"
    "  t = f32[4,33] tanh(y)\n"
    "  r = f32[4,33] rsqrt(ax)\n"
    "  s = f32[4,33] sqrt(ax)\n"
    "  n = f32[4,33] negate(x)\n"
    "  d = f32[4,33] divide(x, y)\n"
    "  mx = f32[4,33] maximum(x, y)\n"
    "  mn = f32[4,33] minimum(e, t)\n"
    "  c = pred[4,33] compare(x, y), direction=LT\n"
    "  c2 = pred[4,33] compare(x, n), direction=GE\n"
    "  a = pred[4,33] and(c, c2)\n"
    "  sel = f32[4,33] select(a, d, mx)\n"
    "  ci = s32[4,33] convert(e)\n"
    "  cf = f32[4,33] convert(ci)\n"
    "  lg = f32[4,33] logistic(x)\n"
    "  fl = f32[4,33] floor(y)\n"
    "  sg = f32[4,33] sign(x)\n"
    "  lp = f32[4,33] log-plus-one(ax)\n"
    "  em = f32[4,33] exponential-minus-one(y)\n"
    "  sub = f32[4,33] subtract(l, r)\n"
    "  mul = f32[4,33] multiply(s, t)\n"
    "  sum = f32[4,33] add(sub, mul)\n"
    "  ROOT out = (f32[4,33], f32[4,33], pred[4,33], s32[4,33], f32[4,33], f32[4,33], f32[4,33], f32[4,33], f32[4,33], f32[4,33], f32[4,33]) "
    "tuple(sum, sel, a, ci, cf, lg, fl, sg, lp, em, mn)\n"
    "}\n", 1e-5, 4);
}

Test(cpu, op_integer_math) {
  tc_check_text("integer", "HloModule m\n"
    "ENTRY e {\n"
    "  x = s32[40] parameter(0)\n"
    "  y = s32[40] parameter(1)\n"
    "  d = s32[40] divide(x, y)\n"
    "  r = s32[40] remainder(x, y)\n"
    "  m = s32[40] multiply(x, y)\n"
    "  mx = s32[40] maximum(d, r)\n"
    "  sh = s32[40] shift-left(x, y)\n"
    "  n = s32[40] negate(m)\n"
    "  ROOT t = (s32[40], s32[40], s32[40], s32[40], s32[40]) tuple(d, r, mx, sh, n)\n"
    "}\n", 0, 5);
}

Test(cpu, op_data_movement) {
  tc_check_text("movement", "HloModule m\n"
    "ENTRY e {\n"
    "  x = f32[3,4,5] parameter(0)\n"
    "  y = f32[3,4,2] parameter(1)\n"
    "  z = f32[] parameter(2)\n"
    "  b = f32[3,4,5,2] broadcast(y), dimensions={0,1,3}\n"
    "  r = f32[12,10] reshape(b)\n"
    "  t = f32[5,3,4] transpose(x), dimensions={2,0,1}\n"
    "  s = f32[2,2,2] slice(x), slice={[1:3], [0:4:2], [1:5:3]}\n"
    "  c = f32[3,4,7] concatenate(x, y), dimensions={2}\n"
    "  p = f32[5,10,6] pad(x, z), padding=1_1x2_1_1x0_1\n"
    "  v = f32[3,4,5] reverse(x), dimensions={0,2}\n"
    "  i = s32[3,4] iota(), iota_dimension=1\n"
    "  ROOT o = (f32[12,10], f32[5,3,4], f32[2,2,2], f32[3,4,7], f32[5,10,6], f32[3,4,5], s32[3,4]) "
    "tuple(r, t, s, c, p, v, i)\n"
    "}\n", 0, 4);
}

/* Rows of 16 or more whose reduce-windows or pads reach outside their operand: their loops are
 * split (kn_segments) and the bounds tests dropped where the loop variable's range shows they
 * cannot fail (cpu_index_range). Windows padded low, high and both, strided, dilated and
 * negatively padded, pads with negative edges, loop kernels and a transposing one, as
 * written and through the optimizer (which fuses the pads into their users). */
static const char tc_window_edges[] = "HloModule m\n"
    "add { a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT s = f32[] add(a, b) }\n"
    "max { a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT s = f32[] maximum(a, b) }\n"
    "ENTRY e {\n"
    "  x = f32[2,3,9,40] parameter(0)\n"
    "  z = f32[] constant(0)\n"
    "  ninf = f32[] constant(-inf)\n"
    "  m1 = f32[2,3,4,20] reduce-window(x, ninf), window={size=1x1x3x3 stride=1x1x2x2 pad=0_0x0_0x0_1x0_1}, to_apply=max\n"
    "  m2 = f32[2,3,9,40] reduce-window(x, ninf), window={size=1x1x1x5 pad=0_0x0_0x0_0x2_2}, to_apply=max\n"
    "  a1 = f32[2,3,9,14] reduce-window(x, z), window={size=1x1x3x4 stride=1x1x1x3 pad=0_0x0_0x1_1x5_0}, to_apply=add\n"
    "  a2 = f32[2,3,9,40] reduce-window(x, z), window={size=1x1x1x3 pad=0_0x0_0x0_0x2_2 rhs_dilate=1x1x1x2}, to_apply=add\n"
    "  a3 = f32[2,3,9,18] reduce-window(x, z), window={size=1x1x1x4 stride=1x1x1x2 pad=0_0x0_0x0_0x-3_1}, to_apply=add\n"
    "  p1 = f32[2,3,9,42] pad(x, z), padding=0_0x0_0x0_0x5_-3\n"
    "  p2 = f32[2,3,9,45] pad(x, z), padding=0_0x0_0x0_0x-2_7\n"
    "  e1 = f32[2,3,9,42] exponential(p1)\n"
    "  s2 = f32[2,3,9,45] sine(p2)\n"
    "  t1 = f32[2,4,20,3] transpose(m1), dimensions={0,2,3,1}\n"
    "  ROOT o = (f32[2,3,4,20], f32[2,3,9,40], f32[2,3,9,14], f32[2,3,9,40], f32[2,3,9,18], f32[2,3,9,42], f32[2,3,9,45], f32[2,4,20,3]) "
    "tuple(m1, m2, a1, a2, a3, e1, s2, t1)\n"
    "}\n";

Test(cpu, op_window_and_pad_edges, .timeout = 300) {
  tc_check_text_both("window and pad edges", tc_window_edges, 1e-5, 0);
}

Test(cpu, op_reduce) {
  tc_check_text("reduce", "HloModule m\n"
    "add { a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT s = f32[] add(a, b) }\n"
    "max { a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT s = f32[] maximum(a, b) }\n"
    "argmax {\n"
    "  a = f32[] parameter(0)\n  ai = s32[] parameter(1)\n"
    "  b = f32[] parameter(2)\n  bi = s32[] parameter(3)\n"
    "  gt = pred[] compare(a, b), direction=GE\n"
    "  v = f32[] select(gt, a, b)\n  i = s32[] select(gt, ai, bi)\n"
    "  ROOT t = (f32[], s32[]) tuple(v, i)\n}\n"
    "ENTRY e {\n"
    "  x = f32[6,7,8] parameter(0)\n"
    "  zero = f32[] constant(0)\n"
    "  ninf = f32[] constant(-inf)\n"
    "  r0 = f32[7,8] reduce(x, zero), dimensions={0}, to_apply=add\n"
    "  r1 = f32[7] reduce(x, ninf), dimensions={0,2}, to_apply=max\n"
    "  r2 = f32[] reduce(x, zero), dimensions={0,1,2}, to_apply=add\n"
    "  io = s32[6,7,8] iota(), iota_dimension=2\n"
    "  zi = s32[] constant(0)\n"
    "  am = (f32[6,7], s32[6,7]) reduce(x, io, ninf, zi), dimensions={2}, to_apply=argmax\n"
    "  amv = f32[6,7] get-tuple-element(am), index=0\n"
    "  ami = s32[6,7] get-tuple-element(am), index=1\n"
    "  ROOT o = (f32[7,8], f32[7], f32[], f32[6,7], s32[6,7]) tuple(r0, r1, r2, amv, ami)\n"
    "}\n", 1e-5, 4);
}

Test(cpu, op_reduce_window) {
  tc_check_text("reduce-window", "HloModule m\n"
    "add { a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT s = f32[] add(a, b) }\n"
    "max { a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT s = f32[] maximum(a, b) }\n"
    "ENTRY e {\n"
    "  x = f32[2,3,9,9] parameter(0)\n"
    "  zero = f32[] constant(0)\n"
    "  ninf = f32[] constant(-inf)\n"
    "  mp = f32[2,3,5,5] reduce-window(x, ninf), window={size=1x1x3x3 stride=1x1x2x2 pad=0_0x0_0x1_1x1_1}, to_apply=max\n"
    "  ap = f32[2,3,4,4] reduce-window(x, zero), window={size=1x1x2x2 stride=1x1x2x2}, to_apply=add\n"
    "  dl = f32[2,3,6,9] reduce-window(x, zero), window={size=1x1x2x3 pad=0_0x0_0x0_0x1_1 lhs_dilate=1x1x1x1 rhs_dilate=1x1x3x1}, to_apply=add\n"
    "  ROOT o = (f32[2,3,5,5], f32[2,3,4,4], f32[2,3,6,9]) tuple(mp, ap, dl)\n"
    "}\n", 1e-5, 4);
}

Test(cpu, op_dot) {
  tc_check_text("dot", "HloModule m\n"
    "ENTRY e {\n"
    "  a = f32[2,5,7] parameter(0)\n"
    "  b = f32[2,7,3] parameter(1)\n"
    "  c = f32[9,7] parameter(2)\n"
    "  v = f32[7] parameter(3)\n"
    "  bm = f32[2,5,3] dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}\n"
    "  nt = f32[2,5,9] dot(a, c), lhs_contracting_dims={2}, rhs_contracting_dims={1}\n"
    "  tn = f32[5,3] dot(a, b), lhs_contracting_dims={0,2}, rhs_contracting_dims={0,1}\n"
    "  mv = f32[9] dot(c, v), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  vv = f32[] dot(v, v), lhs_contracting_dims={0}, rhs_contracting_dims={0}\n"
    "  ROOT o = (f32[2,5,3], f32[2,5,9], f32[5,3], f32[9], f32[]) tuple(bm, nt, tn, mv, vv)\n"
    "}\n", 1e-5, 4);
}

Test(cpu, op_convolution) {
  tc_check_text("convolution", "HloModule m\n"
    "ENTRY e {\n"
    "  x = f32[2,9,8,4] parameter(0)\n"
    "  w = f32[3,3,4,6] parameter(1)\n"
    "  wg = f32[3,3,2,6] parameter(2)\n"
    "  xn = f32[2,4,7,7] parameter(3)\n"
    "  wn = f32[5,4,2,3] parameter(4)\n"
    "  nhwc = f32[2,5,4,6] convolution(x, w), window={size=3x3 stride=2x2 pad=1_1x1_1}, dim_labels=b01f_01io->b01f\n"
    "  grp = f32[2,9,8,6] convolution(x, wg), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, feature_group_count=2\n"
    "  dil = f32[2,5,12,5] convolution(xn, wn), window={size=2x3 pad=0_0x1_1 lhs_dilate=2x1 rhs_dilate=1x2}, dim_labels=bf01_oi01->bf01\n"
    "  ROOT o = (f32[2,5,4,6], f32[2,9,8,6], f32[2,5,12,5]) tuple(nhwc, grp, dil)\n"
    "}\n", 1e-5, 4);
}

Test(cpu, op_gather_scatter_dynamic) {
  tc_check_text("gather/scatter", "HloModule m\n"
    "add { a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT s = f32[] add(a, b) }\n"
    "ENTRY e {\n"
    "  tab = f32[10,6] parameter(0)\n"
    "  ids = s32[4,3] parameter(1)\n"
    "  upd = f32[4,3,6] parameter(2)\n"
    "  x = f32[5,7] parameter(3)\n"
    "  g = f32[4,3,6] gather(tab, ids), offset_dims={2}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=2, slice_sizes={1,6}\n"
    "  s = f32[10,6] scatter(tab, ids, upd), update_window_dims={2}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=2, to_apply=add\n"
    "  i1 = s32[] constant(3)\n"
    "  i2 = s32[] constant(9)\n"
    "  ds = f32[3,2] dynamic-slice(x, i1, i2), dynamic_slice_sizes={3,2}\n"
    "  dus = f32[5,7] dynamic-update-slice(x, ds, i2, i1)\n"
    "  ROOT o = (f32[4,3,6], f32[10,6], f32[3,2], f32[5,7]) tuple(g, s, ds, dus)\n"
    "}\n", 1e-5, 10);
}

Test(cpu, op_fusion_and_call) {
  tc_check_text("fusion/call", "HloModule m\n"
    "add { a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT s = f32[] add(a, b) }\n"
    "relu { a = f32[8,16] parameter(0)\n z = f32[] constant(0)\n zb = f32[8,16] broadcast(z), dimensions={}\n"
    "  ROOT m = f32[8,16] maximum(a, zb) }\n"
    "fused {\n"
    "  p0 = f32[8,16] parameter(0)\n"
    "  p1 = f32[16] parameter(1)\n"
    "  b = f32[8,16] broadcast(p1), dimensions={1}\n"
    "  s = f32[8,16] add(p0, b)\n"
    "  t = f32[16,8] transpose(s), dimensions={1,0}\n"
    "  z = f32[] constant(0)\n"
    "  r = f32[16] reduce(t, z), dimensions={1}, to_apply=add\n"
    "  rb = f32[8,16] broadcast(r), dimensions={1}\n"
    "  ROOT e = f32[8,16] multiply(s, rb)\n"
    "}\n"
    "ENTRY e {\n"
    "  x = f32[8,16] parameter(0)\n"
    "  y = f32[16] parameter(1)\n"
    "  f = f32[8,16] fusion(x, y), kind=kLoop, calls=fused\n"
    "  c = f32[8,16] call(f), to_apply=relu\n"
    "  ROOT o = (f32[8,16], f32[8,16], f32[16]) tuple(c, x, y)\n"
    "}\n", 1e-5, 4);
}

/* Variadic scatter: two operands updated together by a combiner of four scalars that keeps the
 * index of the larger value and the larger value less half the operand's (an argmax scatter,
 * made order-dependent), rows updated twice (indices 0 2 0 5 2: the order of application
 * shows), an out-of-range row skipped; as written and after the optimizer. */
static const char *const tc_vscatter =
    "HloModule m\n"
    "comb {\n"
    "  a = f32[] parameter(0)\n  ai = s32[] parameter(1)\n  b = f32[] parameter(2)\n  bi = s32[] parameter(3)\n"
    "  gt = pred[] compare(b, a), direction=GT\n"
    "  m = f32[] select(gt, b, a)\n  h = f32[] constant(0.5)\n  ah = f32[] multiply(a, h)\n"
    "  v = f32[] subtract(m, ah)\n  i = s32[] select(gt, bi, ai)\n"
    "  ROOT t = (f32[], s32[]) tuple(v, i)\n"
    "}\n"
    "ENTRY e {\n"
    "  x = f32[6,4] parameter(0)\n"
    "  xi = s32[6,4] parameter(1)\n"
    "  u = f32[6,4] parameter(2)\n"
    "  ui = s32[6,4] parameter(3)\n"
    "  k = s32[6,1] constant({ {0}, {2}, {0}, {5}, {2}, {9} })\n"
    "  ROOT s = (f32[6,4], s32[6,4]) scatter(x, xi, k, u, ui), update_window_dims={1}, inserted_window_dims={0}, "
    "scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=comb\n"
    "}\n";

Test(cpu, op_scatter_variadic, .timeout = 300) {
  tc_check_text_both("variadic scatter", tc_vscatter, 1e-6, 100);
}

/* text, after the optimizer, does not compile for the CPU: the error names instr and holds
 * word, and no object is left. */
static void tc_expect_located_error(const char *text, const char *instr, const char *word) {
  HModule *m = ct_parse(text);
  char *dir = ct_tmpdir("hloc_cpu");
  HErr err = {0};
  OptOpts oo = {0};
  cr_assert(opt_optimize(m, &oo, &err), "optimizer: %s", err.msg);
  cr_expect(!tc_compile(m, dir, "model", 1, &err));
  cr_expect(strstr(err.msg, instr) && strstr(err.msg, word), "%s", err.msg);
  hlo_module_free(m);
  ct_rmdir(dir);
  free(dir);
}

/* conditional (lax.cond, lax.switch), compiled by the optimizer's conditional-select pass as
 * every branch followed by selects: pred conditionals with tuple operands and results (k[0]
 * is 3: one takes its true branch, the other its false one), and s32 switches of three
 * branches whose selectors k[i] - o[i] (the generated k = 3 2 2 6 4 3 2 5) are -1, 0, 1, 2,
 * 3 and -2: every branch, and past both ends (which take the last branch); the last branch
 * holds a conditional of its own. */
Test(cpu, op_conditional, .timeout = 300) {
  tc_check_text_ex("conditional", "HloModule m\n"
    "t {\n"
    "  p = (f32[4,5], f32[5]) parameter(0)\n"
    "  a = f32[4,5] get-tuple-element(p), index=0\n"
    "  b = f32[5] get-tuple-element(p), index=1\n"
    "  bb = f32[4,5] broadcast(b), dimensions={1}\n"
    "  ab = f32[4,5] add(a, bb)\n"
    "  e = f32[4,5] exponential(ab)\n"
    "  ROOT o = (f32[4,5], f32[5]) tuple(e, b)\n"
    "}\n"
    "f {\n"
    "  q = f32[4,5] parameter(0)\n"
    "  n = f32[4,5] negate(q)\n"
    "  z = f32[5] constant({1, 2, 3, 4, 5})\n"
    "  ROOT o = (f32[4,5], f32[5]) tuple(n, z)\n"
    "}\n"
    "b0 {\n  q = f32[4,5] parameter(0)\n  ROOT r = f32[4,5] multiply(q, q)\n}\n"
    "b1 {\n  q = f32[4,5] parameter(0)\n  ROOT r = f32[4,5] tanh(q)\n}\n"
    "b2 {\n"
    "  q = f32[4,5] parameter(0)\n"
    "  g = pred[] constant(false)\n"
    "  r = f32[4,5] conditional(g, q, q), true_computation=b0, false_computation=b1\n"
    "  one = f32[] constant(1)\n"
    "  ob = f32[4,5] broadcast(one), dimensions={}\n"
    "  ROOT r2 = f32[4,5] add(r, ob)\n"
    "}\n"
    "ENTRY e {\n"
    "  x = f32[4,5] parameter(0)\n"
    "  y = f32[5] parameter(1)\n"
    "  k = s32[8] parameter(2)\n"
    "  two = s32[] constant(2)\n"
    "  k0s = s32[1] slice(k), slice={[0:1]}\n"
    "  k0 = s32[] reshape(k0s)\n"
    "  c = pred[] compare(k0, two), direction=GT\n"
    "  tp = (f32[4,5], f32[5]) tuple(x, y)\n"
    "  r = (f32[4,5], f32[5]) conditional(c, tp, x), true_computation=t, false_computation=f\n"
    "  r0 = f32[4,5] get-tuple-element(r), index=0\n"
    "  r1 = f32[5] get-tuple-element(r), index=1\n"
    "  cn = pred[] compare(k0, two), direction=LE\n"
    "  rn = (f32[4,5], f32[5]) conditional(cn, tp, x), true_computation=t, false_computation=f\n"
    "  rn0 = f32[4,5] get-tuple-element(rn), index=0\n"
    "  k1s = s32[1] slice(k), slice={[1:2]}\n"
    "  k1 = s32[] reshape(k1s)\n"
    "  o1 = s32[] constant(3)\n"
    "  s1 = s32[] subtract(k1, o1)\n"
    "  w1 = f32[4,5] conditional(s1, x, x, x), branch_computations={b0, b1, b2}\n"
    "  k2s = s32[1] slice(k), slice={[2:3]}\n"
    "  k2 = s32[] reshape(k2s)\n"
    "  o2 = s32[] constant(2)\n"
    "  s2 = s32[] subtract(k2, o2)\n"
    "  w2 = f32[4,5] conditional(s2, x, x, x), branch_computations={b0, b1, b2}\n"
    "  k3s = s32[1] slice(k), slice={[3:4]}\n"
    "  k3 = s32[] reshape(k3s)\n"
    "  o3 = s32[] constant(5)\n"
    "  s3 = s32[] subtract(k3, o3)\n"
    "  w3 = f32[4,5] conditional(s3, x, x, x), branch_computations={b0, b1, b2}\n"
    "  k4s = s32[1] slice(k), slice={[4:5]}\n"
    "  k4 = s32[] reshape(k4s)\n"
    "  o4 = s32[] constant(2)\n"
    "  s4 = s32[] subtract(k4, o4)\n"
    "  w4 = f32[4,5] conditional(s4, x, x, x), branch_computations={b0, b1, b2}\n"
    "  k5s = s32[1] slice(k), slice={[5:6]}\n"
    "  k5 = s32[] reshape(k5s)\n"
    "  o5 = s32[] constant(0)\n"
    "  s5 = s32[] subtract(k5, o5)\n"
    "  w5 = f32[4,5] conditional(s5, x, x, x), branch_computations={b0, b1, b2}\n"
    "  k6s = s32[1] slice(k), slice={[6:7]}\n"
    "  k6 = s32[] reshape(k6s)\n"
    "  o6 = s32[] constant(4)\n"
    "  s6 = s32[] subtract(k6, o6)\n"
    "  w6 = f32[4,5] conditional(s6, x, x, x), branch_computations={b0, b1, b2}\n"
    "  ROOT o = (f32[4,5], f32[5], f32[4,5], f32[4,5], f32[4,5], f32[4,5], f32[4,5], f32[4,5], f32[4,5], s32[8]) "
    "tuple(r0, r1, rn0, w1, w2, w3, w4, w5, w6, k)\n"
    "}\n", 1e-5, 7, true);
}

/* A conditional whose branch has side effects (an rng) is not run speculatively: the CPU target
 * reports it, naming the instruction. */
Test(cpu, op_conditional_with_side_effects_is_a_located_error) {
  tc_expect_located_error("HloModule m\n"
    "t {\n  q = f32[4] parameter(0)\n  lo = f32[] constant(0)\n  hi = f32[] constant(1)\n"
    "  ROOT r = f32[4] rng(lo, hi), distribution=rng_uniform\n}\n"
    "f {\n  q = f32[4] parameter(0)\n  ROOT r = f32[4] negate(q)\n}\n"
    "ENTRY e {\n  x = f32[4] parameter(0)\n  c = pred[] parameter(1)\n"
    "  ROOT cd = f32[4] conditional(c, x, x), true_computation=t, false_computation=f\n}\n",
    "'cd'", "conditional");
}

/* Counted while loops, compiled by the optimizer's while-unroll pass: the bound an element the
 * body passes through (5 trips), a count down by 2 with the bound on the left of the
 * comparison (2 trips), a loop that never runs (0 trips); their state tuples mixed with
 * other values. */
Test(cpu, op_while_counted, .timeout = 300) {
  tc_check_text_ex("counted while loops", "HloModule m\n"
    "b1 {\n"
    "  p = (s32[], s32[], f32[3,4]) parameter(0)\n"
    "  i = s32[] get-tuple-element(p), index=0\n"
    "  n = s32[] get-tuple-element(p), index=1\n"
    "  x = f32[3,4] get-tuple-element(p), index=2\n"
    "  one = s32[] constant(1)\n"
    "  i1 = s32[] add(i, one)\n"
    "  fi = f32[] convert(i)\n"
    "  fb = f32[3,4] broadcast(fi), dimensions={}\n"
    "  y = f32[3,4] add(x, fb)\n"
    "  z = f32[3,4] sine(y)\n"
    "  ROOT r = (s32[], s32[], f32[3,4]) tuple(i1, n, z)\n"
    "}\n"
    "c1 {\n"
    "  p = (s32[], s32[], f32[3,4]) parameter(0)\n"
    "  i = s32[] get-tuple-element(p), index=0\n"
    "  n = s32[] get-tuple-element(p), index=1\n"
    "  ROOT lt = pred[] compare(i, n), direction=LT\n"
    "}\n"
    "b2 {\n"
    "  p = (s32[], f32[3,4]) parameter(0)\n"
    "  i = s32[] get-tuple-element(p), index=0\n"
    "  x = f32[3,4] get-tuple-element(p), index=1\n"
    "  two = s32[] constant(2)\n"
    "  i1 = s32[] subtract(i, two)\n"
    "  h = f32[] constant(1.5)\n"
    "  hb = f32[3,4] broadcast(h), dimensions={}\n"
    "  y = f32[3,4] multiply(x, hb)\n"
    "  ROOT r = (s32[], f32[3,4]) tuple(i1, y)\n"
    "}\n"
    "c2 {\n"
    "  p = (s32[], f32[3,4]) parameter(0)\n"
    "  i = s32[] get-tuple-element(p), index=0\n"
    "  three = s32[] constant(3)\n"
    "  ROOT lt = pred[] compare(three, i), direction=LT\n"
    "}\n"
    "c3 {\n"
    "  p = (s32[], f32[3,4]) parameter(0)\n"
    "  i = s32[] get-tuple-element(p), index=0\n"
    "  four = s32[] constant(4)\n"
    "  ROOT lt = pred[] compare(i, four), direction=LT\n"
    "}\n"
    "ENTRY e {\n"
    "  x = f32[3,4] parameter(0)\n"
    "  zero = s32[] constant(0)\n"
    "  five = s32[] constant(5)\n"
    "  seven = s32[] constant(7)\n"
    "  four = s32[] constant(4)\n"
    "  t1 = (s32[], s32[], f32[3,4]) tuple(zero, five, x)\n"
    "  w1 = (s32[], s32[], f32[3,4]) while(t1), condition=c1, body=b1\n"
    "  t2 = (s32[], f32[3,4]) tuple(seven, x)\n"
    "  w2 = (s32[], f32[3,4]) while(t2), condition=c2, body=b2\n"
    "  t3 = (s32[], f32[3,4]) tuple(four, x)\n"
    "  w3 = (s32[], f32[3,4]) while(t3), condition=c3, body=b2\n"
    "  r1 = f32[3,4] get-tuple-element(w1), index=2\n"
    "  i1 = s32[] get-tuple-element(w1), index=0\n"
    "  r2 = f32[3,4] get-tuple-element(w2), index=1\n"
    "  i2 = s32[] get-tuple-element(w2), index=0\n"
    "  r3 = f32[3,4] get-tuple-element(w3), index=1\n"
    "  ROOT o = (f32[3,4], s32[], f32[3,4], s32[], f32[3,4]) tuple(r1, i1, r2, i2, r3)\n"
    "}\n", 1e-5, 4, true);
}

/* A while loop whose trip count is not a compile-time constant (its condition reads the
 * data) is reported by the CPU target, naming the instruction. */
/* While loops whose trip count depends on the data run in the run function (cpu_compile.c):
 * an array state doubled until its sum passes 100; a nested tuple state whose body swaps two
 * leaves and passes one through, stopping on a reduction of the state or a counter started
 * from an argument, its leaves used after the loop and returned; a body with a matrix product
 * (the GEMM and its private scratch), a loop nested in it, parallel chunks and a trip count
 * from an argument; a loop that never runs its body. As written and after the optimizer,
 * serially and on 2 threads, against the interpreter. */
static const char tc_while_array[] = "HloModule m\n"
    "b {\n  p = f32[4] parameter(0)\n  two = f32[] constant(2)\n  tb = f32[4] broadcast(two), dimensions={}\n"
    "  ROOT r = f32[4] multiply(p, tb)\n}\n"
    "add {\n  a = f32[] parameter(0)\n  b2 = f32[] parameter(1)\n  ROOT s = f32[] add(a, b2)\n}\n"
    "c {\n  q = f32[4] parameter(0)\n  z = f32[] constant(0)\n  ab = f32[4] abs(q)\n"
    "  s3 = f32[] reduce(ab, z), dimensions={0}, to_apply=add\n"
    "  h = f32[] constant(100)\n  ROOT lt = pred[] compare(s3, h), direction=LT\n}\n"
    "ENTRY e {\n  x = f32[4] parameter(0)\n  ROOT wl = f32[4] while(x), condition=c, body=b\n}\n";

static const char tc_while_tuple[] = "HloModule m\n"
    "body {\n"
    "  st = (s32[], f32[8], (f32[8], s32[3])) parameter(0)\n"
    "  i = s32[] get-tuple-element(st), index=0\n"
    "  x = f32[8] get-tuple-element(st), index=1\n"
    "  yz = (f32[8], s32[3]) get-tuple-element(st), index=2\n"
    "  y = f32[8] get-tuple-element(yz), index=0\n"
    "  z = s32[3] get-tuple-element(yz), index=1\n"
    "  one = s32[] constant(1)\n"
    "  i1 = s32[] add(i, one)\n"
    "  h = f32[] constant(0.75)\n"
    "  hb = f32[8] broadcast(h), dimensions={}\n"
    "  xh = f32[8] multiply(x, hb)\n"
    "  x1 = f32[8] add(xh, y)\n"
    "  inner = (f32[8], s32[3]) tuple(x, z)\n"
    "  ROOT r = (s32[], f32[8], (f32[8], s32[3])) tuple(i1, x1, inner)\n"
    "}\n"
    "mx {\n  ma = f32[] parameter(0)\n  mb = f32[] parameter(1)\n  ROOT mm = f32[] maximum(ma, mb)\n}\n"
    "cond {\n"
    "  cs = (s32[], f32[8], (f32[8], s32[3])) parameter(0)\n"
    "  ci = s32[] get-tuple-element(cs), index=0\n"
    "  cx = f32[8] get-tuple-element(cs), index=1\n"
    "  ninf = f32[] constant(-inf)\n"
    "  m = f32[] reduce(cx, ninf), dimensions={0}, to_apply=mx\n"
    "  lim = f32[] constant(6)\n"
    "  small = pred[] compare(m, lim), direction=LT\n"
    "  n = s32[] constant(40)\n"
    "  few = pred[] compare(ci, n), direction=LT\n"
    "  ROOT go = pred[] and(small, few)\n"
    "}\n"
    "ENTRY e {\n"
    "  k = s32[] parameter(0)\n"
    "  x0 = f32[8] parameter(1)\n"
    "  y0 = f32[8] parameter(2)\n"
    "  z0 = s32[3] parameter(3)\n"
    "  yz0 = (f32[8], s32[3]) tuple(y0, z0)\n"
    "  s0 = (s32[], f32[8], (f32[8], s32[3])) tuple(k, x0, yz0)\n"
    "  w = (s32[], f32[8], (f32[8], s32[3])) while(s0), condition=cond, body=body\n"
    "  wi = s32[] get-tuple-element(w), index=0\n"
    "  wx = f32[8] get-tuple-element(w), index=1\n"
    "  wyz = (f32[8], s32[3]) get-tuple-element(w), index=2\n"
    "  two = f32[] constant(2)\n"
    "  tb = f32[8] broadcast(two), dimensions={}\n"
    "  o = f32[8] multiply(wx, tb)\n"
    "  ROOT out = (s32[], f32[8], (f32[8], s32[3])) tuple(wi, o, wyz)\n"
    "}\n";

static const char tc_while_gemm[] = "HloModule m\n"
    "inner_body {\n"
    "  ib = (f32[64,64], s32[]) parameter(0)\n"
    "  im = f32[64,64] get-tuple-element(ib), index=0\n"
    "  ic = s32[] get-tuple-element(ib), index=1\n"
    "  ione = s32[] constant(1)\n"
    "  ic1 = s32[] add(ic, ione)\n"
    "  ih = f32[] constant(0.9)\n"
    "  ihb = f32[64,64] broadcast(ih), dimensions={}\n"
    "  im1 = f32[64,64] multiply(im, ihb)\n"
    "  ROOT ir = (f32[64,64], s32[]) tuple(im1, ic1)\n"
    "}\n"
    "inner_cond {\n"
    "  icp = (f32[64,64], s32[]) parameter(0)\n"
    "  icc = s32[] get-tuple-element(icp), index=1\n"
    "  icm = f32[64,64] get-tuple-element(icp), index=0\n"
    "  ie = f32[1,1] slice(icm), slice={[0:1], [0:1]}\n"
    "  ies = f32[] reshape(ie)\n"
    "  iz = f32[] constant(-10)\n"
    "  ipos = pred[] compare(ies, iz), direction=GT\n"
    "  ilim = s32[] constant(3)\n"
    "  ilt = pred[] compare(icc, ilim), direction=LT\n"
    "  ROOT igo = pred[] and(ilt, ipos)\n"
    "}\n"
    "body {\n"
    "  st = (f32[64,64], f32[64,64], s32[], s32[]) parameter(0)\n"
    "  m = f32[64,64] get-tuple-element(st), index=0\n"
    "  wt = f32[64,64] get-tuple-element(st), index=1\n"
    "  k = s32[] get-tuple-element(st), index=2\n"
    "  n = s32[] get-tuple-element(st), index=3\n"
    "  d = f32[64,64] dot(m, wt), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  t = f32[64,64] tanh(d)\n"
    "  z = s32[] constant(0)\n"
    "  iw0 = (f32[64,64], s32[]) tuple(t, z)\n"
    "  iw = (f32[64,64], s32[]) while(iw0), condition=inner_cond, body=inner_body\n"
    "  t2 = f32[64,64] get-tuple-element(iw), index=0\n"
    "  one = s32[] constant(1)\n"
    "  k1 = s32[] add(k, one)\n"
    "  ROOT r = (f32[64,64], f32[64,64], s32[], s32[]) tuple(t2, wt, k1, n)\n"
    "}\n"
    "cond {\n"
    "  cs = (f32[64,64], f32[64,64], s32[], s32[]) parameter(0)\n"
    "  ck = s32[] get-tuple-element(cs), index=2\n"
    "  cn = s32[] get-tuple-element(cs), index=3\n"
    "  ROOT lt = pred[] compare(ck, cn), direction=LT\n"
    "}\n"
    "ENTRY e {\n"
    "  m0 = f32[64,64] parameter(0)\n"
    "  w0 = f32[64,64] parameter(1)\n"
    "  n0 = s32[] parameter(2)\n"
    "  z0 = s32[] constant(0)\n"
    "  s0 = (f32[64,64], f32[64,64], s32[], s32[]) tuple(m0, w0, z0, n0)\n"
    "  w = (f32[64,64], f32[64,64], s32[], s32[]) while(s0), condition=cond, body=body\n"
    "  ROOT res = f32[64,64] get-tuple-element(w), index=0\n"
    "}\n";

static const char tc_while_never[] = "HloModule m\n"
    "b {\n  p = (f32[5], s32[]) parameter(0)\n  v = f32[5] get-tuple-element(p), index=0\n"
    "  nv = f32[5] negate(v)\n  j = s32[] get-tuple-element(p), index=1\n"
    "  ROOT r = (f32[5], s32[]) tuple(nv, j)\n}\n"
    "c {\n  q = (f32[5], s32[]) parameter(0)\n  qj = s32[] get-tuple-element(q), index=1\n"
    "  big = s32[] constant(1000)\n  ROOT gt = pred[] compare(qj, big), direction=GT\n}\n"
    "ENTRY e {\n  x = f32[5] parameter(0)\n  j0 = s32[] parameter(1)\n"
    "  s0 = (f32[5], s32[]) tuple(x, j0)\n"
    "  w = (f32[5], s32[]) while(s0), condition=c, body=b\n"
    "  ROOT wv = f32[5] get-tuple-element(w), index=0\n}\n";

/* Scalar and pred leaves (pred is stored as bytes), the state halved until it is small. */
static const char tc_while_scalars[] = "HloModule m\n"
    "b {\n  p = (s32[], pred[4], f32[]) parameter(0)\n  i = s32[] get-tuple-element(p), index=0\n"
    "  m = pred[4] get-tuple-element(p), index=1\n  f = f32[] get-tuple-element(p), index=2\n"
    "  one = s32[] constant(1)\n  i1 = s32[] add(i, one)\n  nm = pred[4] not(m)\n"
    "  half = f32[] constant(0.5)\n  f1 = f32[] multiply(f, half)\n"
    "  ROOT r = (s32[], pred[4], f32[]) tuple(i1, nm, f1)\n}\n"
    "c {\n  q = (s32[], pred[4], f32[]) parameter(0)\n  qf = f32[] get-tuple-element(q), index=2\n"
    "  qa = f32[] abs(qf)\n  lim = f32[] constant(0.01)\n  ROOT gt = pred[] compare(qa, lim), direction=GT\n}\n"
    "ENTRY e {\n  x = f32[] parameter(0)\n  mk = pred[4] parameter(1)\n  zero = s32[] constant(0)\n"
    "  s0 = (s32[], pred[4], f32[]) tuple(zero, mk, x)\n"
    "  w = (s32[], pred[4], f32[]) while(s0), condition=c, body=b\n"
    "  wi = s32[] get-tuple-element(w), index=0\n  wm = pred[4] get-tuple-element(w), index=1\n"
    "  ROOT o = (s32[], pred[4]) tuple(wi, wm)\n}\n";

/* Two loops one after the other (their scratch regions overlap), the second starting from
 * the first's result, each with a nested loop. */
static const char tc_while_two[] = "HloModule m\n"
    "ib {\n  ip = (f32[16], s32[]) parameter(0)\n  iv = f32[16] get-tuple-element(ip), index=0\n"
    "  ii = s32[] get-tuple-element(ip), index=1\n  ione = s32[] constant(1)\n  ii1 = s32[] add(ii, ione)\n"
    "  ic = f32[] constant(1.5)\n  icb = f32[16] broadcast(ic), dimensions={}\n  iv1 = f32[16] add(iv, icb)\n"
    "  ROOT ir = (f32[16], s32[]) tuple(iv1, ii1)\n}\n"
    "icn {\n  iq = (f32[16], s32[]) parameter(0)\n  iqi = s32[] get-tuple-element(iq), index=1\n"
    "  ilim = s32[] constant(2)\n  ROOT ilt = pred[] compare(iqi, ilim), direction=LT\n}\n"
    "b {\n  p = (f32[16], s32[]) parameter(0)\n  v = f32[16] get-tuple-element(p), index=0\n"
    "  j = s32[] get-tuple-element(p), index=1\n  z = s32[] constant(0)\n  s0 = (f32[16], s32[]) tuple(v, z)\n"
    "  iw = (f32[16], s32[]) while(s0), condition=icn, body=ib\n  v2 = f32[16] get-tuple-element(iw), index=0\n"
    "  h = f32[] constant(0.5)\n  hb = f32[16] broadcast(h), dimensions={}\n  v3 = f32[16] multiply(v2, hb)\n"
    "  one = s32[] constant(1)\n  j1 = s32[] add(j, one)\n  ROOT r = (f32[16], s32[]) tuple(v3, j1)\n}\n"
    "add {\n  a = f32[] parameter(0)\n  b2 = f32[] parameter(1)\n  ROOT s = f32[] add(a, b2)\n}\n"
    "c {\n  q = (f32[16], s32[]) parameter(0)\n  qv = f32[16] get-tuple-element(q), index=0\n"
    "  zf = f32[] constant(0)\n  qa = f32[16] abs(qv)\n  sm = f32[] reduce(qa, zf), dimensions={0}, to_apply=add\n"
    "  lim = f32[] constant(5)\n  big = pred[] compare(sm, lim), direction=GT\n"
    "  qj = s32[] get-tuple-element(q), index=1\n  n = s32[] constant(30)\n  few = pred[] compare(qj, n), direction=LT\n"
    "  ROOT go = pred[] and(big, few)\n}\n"
    "ENTRY e {\n  x = f32[16] parameter(0)\n  k = s32[] parameter(1)\n"
    "  t0 = (f32[16], s32[]) tuple(x, k)\n  w1 = (f32[16], s32[]) while(t0), condition=c, body=b\n"
    "  x1 = f32[16] get-tuple-element(w1), index=0\n  ten = f32[] constant(10)\n  tb = f32[16] broadcast(ten), dimensions={}\n"
    "  x2 = f32[16] multiply(x1, tb)\n  t1 = (f32[16], s32[]) tuple(x2, k)\n"
    "  w2 = (f32[16], s32[]) while(t1), condition=c, body=b\n"
    "  n1 = s32[] get-tuple-element(w1), index=1\n  y2 = f32[16] get-tuple-element(w2), index=0\n"
    "  n2 = s32[] get-tuple-element(w2), index=1\n"
    "  ROOT o = (f32[16], s32[], f32[16], s32[]) tuple(x1, n1, y2, n2)\n}\n";

Test(cpu, op_while_data_dependent, .timeout = 300) {
  const char *texts[6] = {tc_while_array, tc_while_tuple, tc_while_gemm, tc_while_never, tc_while_scalars, tc_while_two};
  const char *what[6] = {"while: array state", "while: nested tuple state", "while: GEMM body, nested loop",
                         "while: no trip", "while: scalar and pred leaves", "while: two loops in sequence"};
  int range[6] = {4, 6, 7, 100, 4, 5};
  for (int t = 0; t < 6; t++)
    tc_check_text_both(what[t], texts[t], 1e-5, range[t]);
}

/* DIR/main.c from src, built as C11 with the objects objs (warnings as errors) and run (it
 * must exit 0); with cxx also compiled as C++. */
static void tc_main_build(const char *dir, const char *src, const char *objs, bool cxx) {
  char build[512], cmd[2048];
  snprintf(build, sizeof build, "cc -std=c11 -Wall -Wextra -Werror main.c %s -lm -o main && ./main%s", objs,
           cxx ? " && c++ -x c++ -Wall -Wextra -Werror -fsyntax-only main.c" : "");
  cr_expect_eq(tc_build_run(dir, "main.c", src, build, cmd, sizeof cmd), 0, "%s", cmd);
}

/* Build src (a main.c beside model.o in dir) strictly, run it and expect exit status 0; then
 * free m and dir. */
static void tc_main_ok(HModule *m, char *dir, const char *src) {
  tc_main_build(dir, src, "model.o", false);
  hlo_module_free(m);
  ct_rmdir(dir);
  free(dir);
}

/* m compiled with --profile into a fresh folder (returned, malloc'd); par_min_elems as
 * tc_compile_ex takes it. */
static char *tc_profile_compile(HModule *m, int64_t par_min) {
  char *dir = ct_tmpdir("hloc_cpu");
  HErr err = {0};
  cr_assert(tc_compile_ex(m, dir, "model", par_min, true, &err), "%s", err.msg);
  return dir;
}

/* --profile: NAME_run_profile adds each task's ticks to the caller's array, names every task
 * (kernels by instruction and op, the loop's copies, exit test and back edge by the loop), and
 * computes what NAME_run computes; NULL ticks is allowed. */
Test(cpu, profile_entry_point, .timeout = 300) {
  HModule *m = ct_parse("HloModule m\n"
    "b {\n  p = f32[4] parameter(0)\n  two = f32[] constant(2)\n  tb = f32[4] broadcast(two), dimensions={}\n"
    "  ROOT r = f32[4] multiply(p, tb)\n}\n"
    "add {\n  a = f32[] parameter(0)\n  b2 = f32[] parameter(1)\n  ROOT s = f32[] add(a, b2)\n}\n"
    "c {\n  q = f32[4] parameter(0)\n  z = f32[] constant(0)\n"
    "  s3 = f32[] reduce(q, z), dimensions={0}, to_apply=add\n"
    "  h = f32[] constant(100)\n  ROOT lt = pred[] compare(s3, h), direction=LT\n}\n"
    "ENTRY e {\n  x = f32[4] parameter(0)\n  sq = f32[4] multiply(x, x)\n"
    "  wl = f32[4] while(sq), condition=c, body=b\n  out = f32[4] add(wl, x)\n"
    "  xm = f32[2,2] reshape(x)\n  d = f32[2,2] dot(xm, xm), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  ROOT o = (f32[4], f32[2,2]) tuple(out, d)\n}\n");
  char *dir = tc_profile_compile(m, 0);
  char hdr[512];
  snprintf(hdr, sizeof hdr, "%s/model.h", dir);
  char *h = ct_slurp(hdr, NULL);
  cr_expect(strstr(h, "#define MODEL_NUM_TASKS "), "%s", h);
  cr_expect(strstr(h, "extern const char *const model_task_names[];"));
  cr_expect(strstr(h, "extern const double model_task_flops[];"));
  cr_expect(strstr(h, "int model_run_profile(const void *const args[], void *const results[], void *temp,"));
  free(h);
  /* x = 1..4: sq sums to 30, doubled twice (60, 120): the loop's kernels run 2 or 3 times */
  const char *src =
          "#include \"model.h\"\n#include <stdio.h>\n#include <string.h>\n"
          "static void serial(void *r, int64_t n, hloc_task_fn fn, void *ctx) { (void)r; for (int64_t i = 0; i < n; i++) fn(ctx, i); }\n"
          "int main(void) {\n"
          "  float x[4] = {1, 2, 3, 4}, y[4], z[4], dy[4], dz[4];\n"
          "  const void *args[1] = {x}; void *ry[2] = {y, dy}, *rz[2] = {z, dz};\n"
          "  static char temp[MODEL_TEMP_BYTES + 64] __attribute__((aligned(64)));\n"
          "  uint64_t ticks[MODEL_NUM_TASKS] = {0};\n"
          "  if (model_run(args, ry, temp)) return 1;\n"
          "  if (model_run_profile(args, rz, temp, NULL, serial, NULL, ticks)) return 2;\n"
          "  if (memcmp(y, z, sizeof y) || y[0] != 5 || y[3] != 68) return 3;\n"
          "  if (model_run_profile(args, rz, temp, NULL, NULL, NULL, NULL) || model_run_mt(args, rz, temp, serial, NULL)) return 4;\n"
          "  int exit_test = 0, back = 0, copy = 0, mul = 0, dot = 0;\n"
          "  for (int t = 0; t < MODEL_NUM_TASKS; t++) {\n"
          "    printf(\"%d %llu %s\\n\", t, (unsigned long long)ticks[t], model_task_names[t]);\n"
          "    if (ticks[t] == 0) return 5;\n"
          "    exit_test += !strcmp(model_task_names[t], \"wl: exit test\");\n"
          "    back += !strcmp(model_task_names[t], \"wl: back edge\");\n"
          "    copy += !strncmp(model_task_names[t], \"wl: copy\", 8);\n"
          "    mul += !strcmp(model_task_names[t], \"sq (multiply)\");\n"
          "    if (!strncmp(model_task_names[t], \"d (dot)\", 7)) dot += model_task_flops[t] == 16;\n"
          "    else if (model_task_flops[t] != 0) return 7;\n"
          "  }\n"
          "  return exit_test == 1 && back == 1 && copy >= 1 && mul == 1 && dot == 1 ? 0 : 6;\n}\n";
  tc_main_ok(m, dir, src);
}

/* --profile's task names say how a kernel computes its instruction: a 3x3 convolution through
 * Winograd (its taps' kernel, then its own), a dot over several chunks whose B is packed
 * once ahead; the tasks of the default paths carry no note. */
Test(cpu, profile_task_names_say_how, .timeout = 300) {
  HModule *m = ct_parse("HloModule m\nENTRY e {\n  x = f32[2,6,6,16] parameter(0)\n  w = f32[3,3,16,16] parameter(1)\n"
    "  c = f32[2,6,6,16] convolution(x, w), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f\n"
    "  a = f32[300,64] parameter(2)\n  b = f32[64,64] parameter(3)\n"
    "  d = f32[300,64] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  ROOT o = (f32[2,6,6,16], f32[300,64]) tuple(c, d)\n}\n");
  char *dir = tc_profile_compile(m, 1);
  const char *src =
          "#include \"model.h\"\n#include <stdio.h>\n#include <string.h>\n"
          "int main(void) {\n"
          "  int taps = 0, wino = 0, packed = 0, plain = 0;\n"
          "  for (int t = 0; t < MODEL_NUM_TASKS; t++) {\n"
          "    printf(\"%s\\n\", model_task_names[t]);\n"
          "    taps += !strcmp(model_task_names[t], \"c (convolution, Winograd taps) 1/2\");\n"
          "    wino += !strcmp(model_task_names[t], \"c (convolution, Winograd) 2/2\");\n"
          "    packed += !strcmp(model_task_names[t], \"d (dot, B packed) 1/2\");\n"
          "    plain += !strcmp(model_task_names[t], \"d (dot) 2/2\");\n"
          "  }\n"
          "  return taps == 1 && wino == 1 && packed == 1 && plain == 1 ? 0 : 1;\n}\n";
  tc_main_ok(m, dir, src);
}

/* An op the CPU target cannot compile inside a loop body is still a located error. */
Test(cpu, op_while_unsupported_body_op_is_a_located_error) {
  tc_expect_located_error("HloModule m\n"
    "b {\n  p = f32[4] parameter(0)\n  cc = f32[4] custom-call(p), custom_call_target=\"foo\"\n"
    "  ROOT r = f32[4] add(p, cc)\n}\n"
    "add {\n  a = f32[] parameter(0)\n  b2 = f32[] parameter(1)\n  ROOT s = f32[] add(a, b2)\n}\n"
    "c {\n  q = f32[4] parameter(0)\n  z = f32[] constant(0)\n  s3 = f32[] reduce(q, z), dimensions={0}, to_apply=add\n"
    "  h = f32[] constant(100)\n  ROOT lt = pred[] compare(s3, h), direction=LT\n}\n"
    "ENTRY e {\n  x = f32[4] parameter(0)\n  ROOT wl = f32[4] while(x), condition=c, body=b\n}\n",
    "'cc'", "custom-call");
}

/* tests/xla_cases: JAX's lax.fori_loop, lax.scan and a lax.while_loop counting down, with XLA's
 * outputs, through the optimizer (while-unroll); and two lax.while_loops whose trip count
 * depends on the data (Newton's square root to a tolerance; a bound given as an argument, a
 * matrix product in the body, a nested tuple state), run as loops, as written and optimized. */
Test(cpu, xla_loop_cases, .timeout = 300) {
  const char *names[] = {"fori_loop", "scan", "while_down"};
  tc_xla_cases(names, sizeof names / sizeof *names, 1e-5, false);
  const char *dynamic[] = {"while_newton", "while_arg_bound"};
  tc_xla_cases(dynamic, sizeof dynamic / sizeof *dynamic, 1e-5, true);
}

/* ------------------------------------------------------------------ GEMM and implicit-GEMM paths */

/* Whether compiling text emits the shared function named by suffix (e.g. "_gemm_f32"): the
 * blocked path was taken rather than the generic accumulating loops. */
static bool tc_emits(const char *text, const char *suffix) {
  HModule *m = ct_parse(text);
  char *dir = ct_tmpdir("hloc_cpu");
  char path[512];
  snprintf(path, sizeof path, "%s/m.ll", dir);
  CpuOpts o = {0};
  o.name = "model";
  o.out_path = path;
  o.opt_level = 2;
  o.emit = CPU_EMIT_LLVM;
  HErr err = {0};
  cr_assert(cpu_compile(m, &o, &err), "%s", err.msg);
  hlo_module_free(m);
  char *ll = ct_slurp(path, NULL);
  char want[64];
  snprintf(want, sizeof want, "@model%s(", suffix);
  bool found = strstr(ll, want) != NULL;
  free(ll);
  ct_rmdir(dir);
  free(dir);
  return found;
}

/* Plain products of odd sizes (every edge of the 6x16 / 12x32 micro-tiles and of the cache
 * blocks), M, N, K from {1, 3, 17, 64, 65, 257}. */
Test(cpu, gemm_odd_sizes, .timeout = 300) {
  static const int sz[][3] = {{1, 1, 1},   {3, 17, 64},  {17, 3, 65},  {64, 65, 257}, {65, 257, 3},
                              {257, 64, 17}, {1, 257, 65}, {257, 1, 64}, {17, 17, 17}, {65, 65, 1},
                              {3, 64, 257}, {257, 257, 257}};
  int n = (int)(sizeof sz / sizeof sz[0]);
  char text[8192];
  int o = snprintf(text, sizeof text, "HloModule m\nENTRY e {\n");
  char root[2048] = "", rshape[2048] = "";
  for (int i = 0; i < n; i++) {
    int M = sz[i][0], N = sz[i][1], K = sz[i][2];
    o += snprintf(text + o, sizeof text - (size_t)o,
                  "  a%d = f32[%d,%d] parameter(%d)\n  b%d = f32[%d,%d] parameter(%d)\n"
                  "  d%d = f32[%d,%d] dot(a%d, b%d), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n",
                  i, M, K, 2 * i, i, K, N, 2 * i + 1, i, M, N, i, i);
    char t[64];
    snprintf(t, sizeof t, "%sd%d", i ? ", " : "", i);
    strcat(root, t);
    snprintf(t, sizeof t, "%sf32[%d,%d]", i ? ", " : "", M, N);
    strcat(rshape, t);
  }
  snprintf(text + o, sizeof text - (size_t)o, "  ROOT o = (%s) tuple(%s)\n}\n", rshape, root);
  cr_assert(tc_emits(text, "_gemm_f32"));
  tc_check_text("gemm sizes", text, 1e-4, 4);
}

/* Batch dimensions, transposed operands through the dimension numbers, several lhs free
 * dimensions (merged into M) and a contracting pair that does not merge (generic path). */
Test(cpu, gemm_batch_and_transposes, .timeout = 300) {
  const char *text = "HloModule m\n"
    "ENTRY e {\n"
    "  a = f32[3,17,20] parameter(0)\n"
    "  b = f32[3,20,33] parameter(1)\n"
    "  at = f32[3,20,17] parameter(2)\n"
    "  bt = f32[3,33,20] parameter(3)\n"
    "  x = f32[4,5,65] parameter(4)\n"
    "  w = f32[33,65] parameter(5)\n"
    "  bb = f32[3,17,33] dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}\n"
    "  tt = f32[3,17,33] dot(at, bt), lhs_batch_dims={0}, lhs_contracting_dims={1}, rhs_batch_dims={0}, rhs_contracting_dims={2}\n"
    "  mm = f32[4,5,33] dot(x, w), lhs_contracting_dims={2}, rhs_contracting_dims={1}\n"
    "  bl = f32[3,33,17] dot(b, a), lhs_batch_dims={0}, lhs_contracting_dims={1}, rhs_batch_dims={0}, rhs_contracting_dims={2}\n"
    "  nm = f32[17,33] dot(a, b), lhs_contracting_dims={0,2}, rhs_contracting_dims={0,1}\n"
    "  ROOT o = (f32[3,17,33], f32[3,17,33], f32[4,5,33], f32[3,33,17], f32[17,33]) tuple(bb, tt, mm, bl, nm)\n"
    "}\n";
  cr_assert(tc_emits(text, "_gemm_f32"));
  tc_check_text("gemm batch/transposes", text, 1e-4, 4);
}

/* Output fusions: a transposed weight and a broadcast inside the fusion (strided views), a
 * layer-norm-like prologue (staged), epilogues bias + relu, tanh-GELU and a residual add. */
Test(cpu, gemm_fused_prologue_epilogue, .timeout = 300) {
  const char *text = "HloModule m\n"
    "add { a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT s = f32[] add(a, b) }\n"
    "f1 {\n"
    "  x = f32[37,70] parameter(0)\n"
    "  w = f32[50,70] parameter(1)\n"
    "  bias = f32[50] parameter(2)\n"
    "  wt = f32[70,50] transpose(w), dimensions={1,0}\n"
    "  d = f32[37,50] dot(x, wt), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  bb = f32[37,50] broadcast(bias), dimensions={1}\n"
    "  s = f32[37,50] add(d, bb)\n"
    "  z = f32[] constant(0)\n"
    "  zb = f32[37,50] broadcast(z), dimensions={}\n"
    "  ROOT r = f32[37,50] maximum(s, zb)\n"
    "}\n"
    "f2 {\n"
    "  x = f32[37,70] parameter(0)\n"
    "  w = f32[70,50] parameter(1)\n"
    "  res = f32[37,50] parameter(2)\n"
    "  z = f32[] constant(0)\n"
    "  sum = f32[37] reduce(x, z), dimensions={1}, to_apply=add\n"
    "  sb = f32[37,70] broadcast(sum), dimensions={0}\n"
    "  xc = f32[37,70] subtract(x, sb)\n"
    "  d = f32[37,50] dot(xc, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  h = f32[] constant(0.5)\n"
    "  hb = f32[37,50] broadcast(h), dimensions={}\n"
    "  t = f32[37,50] tanh(d)\n"
    "  one = f32[] constant(1)\n"
    "  ob = f32[37,50] broadcast(one), dimensions={}\n"
    "  t1 = f32[37,50] add(t, ob)\n"
    "  g = f32[37,50] multiply(hb, t1)\n"
    "  gd = f32[37,50] multiply(g, d)\n"
    "  ROOT o = f32[37,50] add(gd, res)\n"
    "}\n"
    "ENTRY e {\n"
    "  x = f32[37,70] parameter(0)\n"
    "  w = f32[50,70] parameter(1)\n"
    "  bias = f32[50] parameter(2)\n"
    "  w2 = f32[70,50] parameter(3)\n"
    "  res = f32[37,50] parameter(4)\n"
    "  a = f32[37,50] fusion(x, w, bias), kind=kOutput, calls=f1\n"
    "  b = f32[37,50] fusion(x, w2, res), kind=kOutput, calls=f2\n"
    "  ROOT o = (f32[37,50], f32[37,50]) tuple(a, b)\n"
    "}\n";
  cr_assert(tc_emits(text, "_gemm_f32"));
  tc_check_text("gemm fusions", text, 1e-4, 4);
}

/* NHWC / HWIO convolutions through the implicit GEMM: stride 2 with padding, dilation,
 * asymmetric padding, 1x1; a grouped one takes the generic path. */
Test(cpu, conv_implicit_gemm, .timeout = 300) {
  const char *text = "HloModule m\n"
    "ENTRY e {\n"
    "  x = f32[2,11,9,5] parameter(0)\n"
    "  w = f32[3,3,5,19] parameter(1)\n"
    "  w1 = f32[1,1,5,33] parameter(2)\n"
    "  wg = f32[3,3,1,10] parameter(3)\n"
    "  s2 = f32[2,6,5,19] convolution(x, w), window={size=3x3 stride=2x2 pad=1_1x1_1}, dim_labels=b01f_01io->b01f\n"
    "  dl = f32[2,7,5,19] convolution(x, w), window={size=3x3 pad=0_0x0_0 rhs_dilate=2x2}, dim_labels=b01f_01io->b01f\n"
    "  ap = f32[2,11,5,19] convolution(x, w), window={size=3x3 stride=1x2 pad=2_0x3_1 rhs_dilate=1x2}, dim_labels=b01f_01io->b01f\n"
    "  pw = f32[2,11,9,33] convolution(x, w1), window={size=1x1}, dim_labels=b01f_01io->b01f\n"
    "  gr = f32[2,9,7,10] convolution(x, wg), window={size=3x3}, dim_labels=b01f_01io->b01f, feature_group_count=5\n"
    "  ROOT o = (f32[2,6,5,19], f32[2,7,5,19], f32[2,11,5,19], f32[2,11,9,33], f32[2,9,7,10]) tuple(s2, dl, ap, pw, gr)\n"
    "}\n";
  cr_assert(tc_emits(text, "_gemm_f32"));
  tc_check_text("implicit-GEMM convolutions", text, 1e-4, 4);
}

/* Reductions keeping the minor dimension (column reductions: global pooling over NHWC, batch
 * statistics), alone and in a fusion with an epilogue, with sum and max reducers. */
Test(cpu, column_reductions, .timeout = 300) {
  tc_check_text("column reductions", "HloModule m\n"
    "add { a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT s = f32[] add(a, b) }\n"
    "max { a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT s = f32[] maximum(a, b) }\n"
    "mean {\n"
    "  x = f32[3,7,5,19] parameter(0)\n"
    "  y = f32[3,19] parameter(1)\n"
    "  e = f32[3,7,5,19] exponential(x)\n"
    "  z = f32[] constant(0)\n"
    "  r = f32[3,19] reduce(e, z), dimensions={1,2}, to_apply=add\n"
    "  n = f32[] constant(0.0285714)\n"
    "  nb = f32[3,19] broadcast(n), dimensions={}\n"
    "  m = f32[3,19] multiply(r, nb)\n"
    "  ROOT o = f32[3,19] add(m, y)\n"
    "}\n"
    "ENTRY e {\n"
    "  x = f32[3,7,5,19] parameter(0)\n"
    "  y = f32[3,19] parameter(1)\n"
    "  z = f32[] constant(0)\n"
    "  mi = f32[] constant(-inf)\n"
    "  s0 = f32[7,5,19] reduce(x, z), dimensions={0}, to_apply=add\n"
    "  mx = f32[19] reduce(x, mi), dimensions={0,1,2}, to_apply=max\n"
    "  f = f32[3,19] fusion(x, y), kind=kInput, calls=mean\n"
    "  ROOT o = (f32[7,5,19], f32[19], f32[3,19]) tuple(s0, mx, f)\n"
    "}\n", 1e-5, 4);
}

/* ------------------------------------------------------------------ interface and errors */

static const char *tc_small =
    "HloModule small\n"
    "ENTRY e {\n"
    "  x = f32[4,8] parameter(0)\n"
    "  c = f32[4,8] constant({{1,2,3,4,5,6,7,8},{1,2,3,4,5,6,7,8},{1,2,3,4,5,6,7,8},{1,2,3,4,5,6,7,8}})\n"
    "  a = f32[4,8] add(x, c)\n"
    "  ROOT t = f32[4,8] tanh(a)\n"
    "}\n";

Test(cpu, header_contents_and_two_models_in_one_program) {
  char *dir = ct_tmpdir("hloc_cpu");
  HErr err = {0};
  HModule *m1 = ct_parse(tc_small), *m2 = ct_parse(tc_small);
  cr_assert(tc_compile(m1, dir, "alpha", 0, &err), "%s", err.msg);
  cr_assert(tc_compile(m2, dir, "beta", 0, &err), "%s", err.msg);
  char path[512];
  snprintf(path, sizeof path, "%s/alpha.h", dir);
  char *h = ct_slurp(path, NULL);
  cr_expect(strstr(h, "#define ALPHA_NUM_ARGS 1"), "%s", h);
  cr_expect(strstr(h, "#define ALPHA_NUM_RESULTS 1"));
  cr_expect(strstr(h, "#define ALPHA_TEMP_BYTES "));
  cr_expect(strstr(h, "int alpha_run(const void *const args[], void *const results[], void *temp);"));
  cr_expect(strstr(h, "int alpha_run_mt("));
  cr_expect(strstr(h, "extern const hloc_tensor_info alpha_arg_info[];"));
  cr_expect(strstr(h, "extern \"C\""));
  cr_expect(strstr(h, "#ifndef HLOC_RUNTIME_TYPES_DEFINED"));
  free(h);
  /* both headers in one C and one C++ translation unit; both objects in one program */
  const char *src =
          "#include \"alpha.h\"\n#include \"beta.h\"\n#include <math.h>\n#include <stdio.h>\n#include <string.h>\n"
          "int main(void) {\n"
          "  float x[32], ya[32], yb[32];\n"
          "  for (int i = 0; i < 32; i++) x[i] = (float)i / 16 - 1;\n"
          "  const void *args[1] = {x}; void *ra[1] = {ya}, *rb[1] = {yb};\n"
          "  static char temp[ALPHA_TEMP_BYTES + BETA_TEMP_BYTES + 64] __attribute__((aligned(64)));\n"
          "  if (alpha_run(args, ra, temp) || beta_run(args, rb, temp)) return 1;\n"
          "  if (alpha_run(NULL, ra, temp) == 0) return 2;\n"
          "  if (strcmp(alpha_arg_info[0].name, \"x\") || strcmp(alpha_arg_info[0].dtype, \"f32\")) return 3;\n"
          "  if (alpha_arg_info[0].rank != 2 || alpha_arg_info[0].dims[1] != 8 || alpha_result_info[0].bytes != 128) return 4;\n"
          "  for (int i = 0; i < 32; i++) {\n"
          "    float want = tanhf(x[i] + (float)(i % 8 + 1));\n"
          "    if (fabsf(ya[i] - want) > 1e-6f || ya[i] != yb[i]) { printf(\"%d %g %g\\n\", i, ya[i], want); return 5; }\n"
          "  }\n"
          "  return 0;\n}\n";
  tc_main_build(dir, src, "alpha.o beta.o", true);
  hlo_module_free(m1);
  hlo_module_free(m2);
  ct_rmdir(dir);
  free(dir);
}

/* The benchmark's driver (tools/bench/bench_model.c, built against a model as bench.sh does)
 * in --lockstep mode, which tools/bench/ort_pair.py drives: after the warm-up, each line of
 * stdin asks for that many runs (blank and zero lines are skipped), and the driver answers
 * with their seconds on one line; at EOF its usual result line covers every run made. Given
 * no line asking for runs it fails. */
Test(cpu, bench_driver_lockstep, .timeout = 300) {
  char *dir = ct_tmpdir("hloc_cpu");
  HErr err = {0};
  HModule *m = ct_parse("HloModule m\nENTRY e {\n  x = f32[8,16] parameter(0)\n  w = f32[16,8] parameter(1)\n"
                        "  ROOT d = f32[8,8] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n");
  cr_assert(tc_compile(m, dir, "m", 0, &err), "%s", err.msg);
  char build[2048], cmd[4096];
  snprintf(build, sizeof build,
           "cc -O1 -std=gnu17 -I. -I%s/../tools/bench -DBENCH_HEADER='\"m.h\"' -DBENCH_NAME=m -DBENCH_UNAME=M "
           "%s/../tools/bench/bench_model.c m.o -lm -lpthread -o bench && "
           "./bench --lockstep --packed < asks.txt > out.txt && ! ./bench --lockstep < /dev/null 2>/dev/null",
           HLOC_TEST_DIR, HLOC_TEST_DIR);
  cr_assert_eq(tc_build_run(dir, "asks.txt", "2\n\n0\n3\n", build, cmd, sizeof cmd), 0, "%s", cmd);
  char path[512];
  snprintf(path, sizeof path, "%s/out.txt", dir);
  char *buf = ct_slurp(path, NULL);
  char *l1 = buf, *l2 = strchr(l1, '\n');
  cr_assert(l2, "no second line: %s", buf);
  *l2++ = 0;
  char *l3 = strchr(l2, '\n');
  cr_assert(l3, "no third line: %s", buf);
  *l3++ = 0;
  int words[2] = {0, 0};
  const char *ls[2] = {l1, l2};
  for (int i = 0; i < 2; i++) {
    char copy[1024];
    snprintf(copy, sizeof copy, "%s", ls[i]);
    for (char *t = strtok(copy, " "); t; t = strtok(NULL, " ")) {
      char *end;
      double v = strtod(t, &end);
      cr_expect(*end == 0 && v > 0 && v < 10, "not a run's seconds: '%s'", t);
      words[i]++;
    }
  }
  cr_expect_eq(words[0], 2, "first line: %s", l1);
  cr_expect_eq(words[1], 3, "second line: %s", l2);
  cr_expect(strncmp(l3, "model=", 6) == 0 && strstr(l3, " runs=5 ") && strstr(l3, " packed=1 "), "result line: %s", l3);
  free(buf);
  hlo_module_free(m);
  ct_rmdir(dir);
  free(dir);
}

/* Names are arbitrary strings in a module proto: a module, argument or result name holding the
 * end of a C comment or a line break still gives a header that compiles (C and C++), and the
 * tensor tables keep the names as they are. */
Test(cpu, header_comments_survive_any_name) {
  char *dir = ct_tmpdir("hloc_cpu");
  HErr err = {0};
  HModule *m = ct_parse(tc_small);
  m->name = "mod */ int broken; /*";
  m->entry->params[0]->name = "x*/\nint bad;";
  m->entry->instrs[m->entry->ninstrs - 1]->name = "t*//";
  cr_assert(tc_compile(m, dir, "odd", 0, &err), "%s", err.msg);
  const char *src = "#include \"odd.h\"\n#include <string.h>\n"
                    "int main(void) { return strcmp(odd_arg_info[0].name, \"x*/\\nint bad;\") != 0; }\n";
  tc_main_build(dir, src, "odd.o", true);
  hlo_module_free(m);
  ct_rmdir(dir);
  free(dir);
}

Test(cpu, deterministic_output) {
  char *dir = ct_tmpdir("hloc_cpu");
  HErr err = {0};
  char p1[512], p2[512];
  snprintf(p1, sizeof p1, "%s/model.o", dir);
  snprintf(p2, sizeof p2, "%s/again.o", dir);
  HModule *m = proto_load_file(HLOC_CORPUS_DIR "/fixtures/mlp/module.pb", &err);
  cr_assert(m, "%s", err.msg);
  cr_assert(tc_compile(m, dir, "model", 0, &err), "%s", err.msg);
  hlo_module_free(m);
  m = proto_load_file(HLOC_CORPUS_DIR "/fixtures/mlp/module.pb", &err);
  CpuOpts o = {.name = "model", .out_path = p2, .opt_level = 2, .emit = CPU_EMIT_OBJ};
  cr_assert(cpu_compile(m, &o, &err), "%s", err.msg);
  hlo_module_free(m);
  size_t n1, n2;
  char *a = ct_slurp(p1, &n1), *b = ct_slurp(p2, &n2);
  cr_expect(n1 == n2 && memcmp(a, b, n1) == 0, "objects differ");
  free(a);
  free(b);
  ct_rmdir(dir);
  free(dir);
}

/* cpu_share.c's magic numbers for signed division (internal to the target, declared here for
 * their test). */
void cpu_sdiv_magic(int64_t d, int64_t mv[4]);
int64_t cpu_sdiv_by_magic(int64_t n, const int64_t mv[4]);

/* The magic-number division merged kernels use for a divisor that differs between them equals
 * C's truncating division for every divisor 1..3000 and a spread of large ones, on dividends
 * of both signs, the extremes and the neighbours of multiples. */
Test(cpu, share_magic_division) {
  int64_t ds[3000 + 12];
  int nd = 0;
  for (int64_t d = 1; d <= 3000; d++) ds[nd++] = d;
  const int64_t big[] = {4095, 4097, 65535, 1000003, (1ll << 31) - 1, 1ll << 31, (1ll << 31) + 1,
                         1000000007ll * 1000, (1ll << 62) - 1, 1ll << 62, INT64_MAX - 1, INT64_MAX};
  for (size_t i = 0; i < sizeof big / sizeof *big; i++) ds[nd++] = big[i];
  uint64_t x = 88172645463325252ull;
  int bad = 0;
  for (int i = 0; i < nd; i++) {
    int64_t d = ds[i], mv[4];
    cpu_sdiv_magic(d, mv);
    int64_t ns[64];
    int nn = 0;
    const int64_t fixed[] = {0, 1, -1, 2, -2, INT64_MIN, INT64_MIN + 1, INT64_MAX, INT64_MAX - 1};
    for (size_t j = 0; j < sizeof fixed / sizeof *fixed; j++) ns[nn++] = fixed[j];
    for (int64_t m = -3; m <= 3; m++) {
      if (d > INT64_MAX / 4) break; /* d * m would overflow */
      int64_t c = d * m;
      ns[nn++] = c - 1, ns[nn++] = c, ns[nn++] = c + 1;
    }
    while (nn < 64) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      ns[nn] = (int64_t)(nn & 1 ? x : x >> (x % 60));
      nn++;
    }
    for (int j = 0; j < nn; j++) {
      int64_t got = cpu_sdiv_by_magic(ns[j], mv), want = ns[j] / d;
      if (got != want && bad++ < 5)
        cr_log_error("%lld / %lld: %lld, want %lld", (long long)ns[j], (long long)d, (long long)got, (long long)want);
    }
  }
  cr_expect_eq(bad, 0, "%d wrong quotients", bad);
}

/* Kernels merged up to integer constants (cpu_share.c): loop fusions of one structure at other
 * sizes and constants (a subtraction, then signed division or remainder by 7, 13 and 3 over
 * dividends of both signs; a broadcast add of two shapes) are one function each at -O2,
 * reading their constants at run time, and compute what the interpreter does serially and on
 * two threads; at -O3, or with HLOC_CPU_SHARE=exact, every fusion keeps its own function. */
static const char *tc_share_text =
    "HloModule share\n"
    "fd7 {\n  p_fd7 = s64[40] parameter(0)\n  c_fd7 = s64[] constant(500)\n  q_fd7 = s64[] constant(7)\n"
    "  bc_fd7 = s64[40] broadcast(c_fd7), dimensions={}\n  bq_fd7 = s64[40] broadcast(q_fd7), dimensions={}\n"
    "  s_fd7 = s64[40] subtract(p_fd7, bc_fd7)\n  ROOT d_fd7 = s64[40] divide(s_fd7, bq_fd7)\n}\n"
    "fd13 {\n  p_fd13 = s64[150] parameter(0)\n  c_fd13 = s64[] constant(300)\n  q_fd13 = s64[] constant(13)\n"
    "  bc_fd13 = s64[150] broadcast(c_fd13), dimensions={}\n  bq_fd13 = s64[150] broadcast(q_fd13), dimensions={}\n"
    "  s_fd13 = s64[150] subtract(p_fd13, bc_fd13)\n  ROOT d_fd13 = s64[150] divide(s_fd13, bq_fd13)\n}\n"
    "fd1 {\n  p_fd1 = s64[33] parameter(0)\n  c_fd1 = s64[] constant(100)\n  q_fd1 = s64[] constant(3)\n"
    "  bc_fd1 = s64[33] broadcast(c_fd1), dimensions={}\n  bq_fd1 = s64[33] broadcast(q_fd1), dimensions={}\n"
    "  s_fd1 = s64[33] subtract(p_fd1, bc_fd1)\n  ROOT d_fd1 = s64[33] divide(s_fd1, bq_fd1)\n}\n"
    "fr7 {\n  p_fr7 = s64[40] parameter(0)\n  c_fr7 = s64[] constant(500)\n  q_fr7 = s64[] constant(7)\n"
    "  bc_fr7 = s64[40] broadcast(c_fr7), dimensions={}\n  bq_fr7 = s64[40] broadcast(q_fr7), dimensions={}\n"
    "  s_fr7 = s64[40] subtract(p_fr7, bc_fr7)\n  ROOT d_fr7 = s64[40] remainder(s_fr7, bq_fr7)\n}\n"
    "fr13 {\n  p_fr13 = s64[150] parameter(0)\n  c_fr13 = s64[] constant(300)\n  q_fr13 = s64[] constant(13)\n"
    "  bc_fr13 = s64[150] broadcast(c_fr13), dimensions={}\n  bq_fr13 = s64[150] broadcast(q_fr13), dimensions={}\n"
    "  s_fr13 = s64[150] subtract(p_fr13, bc_fr13)\n  ROOT d_fr13 = s64[150] remainder(s_fr13, bq_fr13)\n}\n"
    "fa1 {\n  x_fa1 = f32[12,20] parameter(0)\n  u_fa1 = f32[20] parameter(1)\n"
    "  bu_fa1 = f32[12,20] broadcast(u_fa1), dimensions={1}\n  ROOT a_fa1 = f32[12,20] add(x_fa1, bu_fa1)\n}\n"
    "fa2 {\n  x_fa2 = f32[7,33] parameter(0)\n  u_fa2 = f32[33] parameter(1)\n"
    "  bu_fa2 = f32[7,33] broadcast(u_fa2), dimensions={1}\n  ROOT a_fa2 = f32[7,33] add(x_fa2, bu_fa2)\n}\n"
    "ENTRY e {\n"
    "  a = s64[40] parameter(0)\n  b = s64[150] parameter(1)\n  c = s64[33] parameter(2)\n"
    "  x = f32[12,20] parameter(3)\n  y = f32[7,33] parameter(4)\n"
    "  u = f32[20] parameter(5)\n  w = f32[33] parameter(6)\n"
    "  d1 = s64[40] fusion(a), kind=kLoop, calls=fd7\n"
    "  d2 = s64[150] fusion(b), kind=kLoop, calls=fd13\n"
    "  d3 = s64[33] fusion(c), kind=kLoop, calls=fd1\n"
    "  r1 = s64[40] fusion(a), kind=kLoop, calls=fr7\n"
    "  r2 = s64[150] fusion(b), kind=kLoop, calls=fr13\n"
    "  xu = f32[12,20] fusion(x, u), kind=kLoop, calls=fa1\n"
    "  yw = f32[7,33] fusion(y, w), kind=kLoop, calls=fa2\n"
    "  ROOT t = (s64[40], s64[150], s64[33], s64[40], s64[150], f32[12,20], f32[7,33]) "
    "tuple(d1, d2, d3, r1, r2, xu, yw)\n"
    "}\n";

/* The first line at or after p of IR text that defines a function whose name starts with
 * prefix ("@share_k", "@sp_k0("), or NULL. */
static const char *tc_define_line(const char *p, const char *prefix) {
  while (p && *p) {
    const char *eol = strchr(p, '\n');
    if (!strncmp(p, "define ", 7)) {
      const char *at = strstr(p, prefix);
      if (at && (!eol || at < eol)) return p;
    }
    p = eol ? eol + 1 : NULL;
  }
  return NULL;
}

/* Functions defined in IR text t whose name starts with prefix. */
static int tc_count_defs(const char *t, const char *prefix) {
  int n = 0;
  for (const char *p = tc_define_line(t, prefix); p; p = tc_define_line(strchr(p, '\n'), prefix)) n++;
  return n;
}

Test(cpu, share_kernels_up_to_constants, .timeout = 300) {
  tc_check_text("kernels merged up to constants", tc_share_text, 0, 1000);
  char *t = tc_llvm_ir(tc_share_text, "share", 2);
  cr_expect_eq(tc_count_defs(t, "@share_k"), 3, "%s", t);
  cr_expect(strstr(t, "@share_kp") != NULL, "no constant tables");
  /* the divisors by their magic numbers, not by a division instruction */
  cr_expect(!strstr(t, "sdiv") && !strstr(t, "srem"), "%s", t);
  free(t);
  t = tc_llvm_ir(tc_share_text, "share", 3);
  cr_expect_eq(tc_count_defs(t, "@share_k"), 7);
  free(t);
  setenv("HLOC_CPU_SHARE", "exact", 1);
  t = tc_llvm_ir(tc_share_text, "share", 2);
  unsetenv("HLOC_CPU_SHARE");
  cr_expect_eq(tc_count_defs(t, "@share_k"), 7);
  cr_expect(!strstr(t, "@share_kp"));
  free(t);
}

/* The body of function @name in IR text t (from its define line to its closing brace), or an
 * empty string; malloc'd. */
static char *tc_ir_function(const char *t, const char *name) {
  char key[256];
  snprintf(key, sizeof key, "@%s(", name);
  const char *p = tc_define_line(t, key), *end = p ? strstr(p, "\n}\n") : NULL;
  size_t n = !p ? 0 : end ? (size_t)(end - p) : strlen(p);
  char *b = malloc(n + 1);
  cr_assert(b);
  if (n) memcpy(b, p, n);
  b[n] = 0;
  return b;
}

/* Small kernels (cpu_compile.c's cp_mark_small) get the scalar pipeline: beside a large
 * multiply, an 8x8 add's kernel has no vector code, the multiply's has, and the results match
 * the interpreter; the same add alone in its module (all of its work) stays vectorized, and so
 * does it with HLOC_CPU_SMALL=0. */
static const char *tc_small_pair =
    "HloModule sp\n"
    "ENTRY e {\n"
    "  a = f32[8,8] parameter(0)\n  b = f32[512,512] parameter(1)\n"
    "  s = f32[8,8] add(a, a)\n  t = f32[512,512] multiply(b, b)\n"
    "  ROOT r = (f32[8,8], f32[512,512]) tuple(s, t)\n"
    "}\n";

Test(cpu, small_kernels_scalar_pipeline, .timeout = 300) {
  tc_check_text("small kernel beside a large one", tc_small_pair, 0, 4);
  char *t = tc_llvm_ir(tc_small_pair, "sp", 2);
  char *k0 = tc_ir_function(t, "sp_k0"), *k1 = tc_ir_function(t, "sp_k1");
  cr_expect(k0[0] && !strstr(k0, "x float>"), "the small kernel is vectorized:\n%s", k0);
  cr_expect(strstr(k1, "x float>") != NULL, "the large kernel is not vectorized:\n%s", k1);
  free(k0);
  free(k1);
  free(t);
  setenv("HLOC_CPU_SMALL", "0", 1);
  t = tc_llvm_ir(tc_small_pair, "sp", 2);
  unsetenv("HLOC_CPU_SMALL");
  k0 = tc_ir_function(t, "sp_k0");
  cr_expect(strstr(k0, "x float>") != NULL, "HLOC_CPU_SMALL=0: not vectorized:\n%s", k0);
  free(k0);
  free(t);
  t = tc_llvm_ir("HloModule one\nENTRY e {\n  a = f32[8,8] parameter(0)\n  ROOT s = f32[8,8] add(a, a)\n}\n", "one", 2);
  k0 = tc_ir_function(t, "one_k0");
  cr_expect(strstr(k0, "x float>") != NULL, "a module's only kernel is not vectorized:\n%s", k0);
  free(k0);
  free(t);
}

/* Tuple-shaped entry parameters (flatten-params): the object takes one argument per leaf,
 * depth first, as the module was read (the target flattens it) and after the optimizer; a leaf
 * passed through to the result is copied. Against the interpreter on the flattened module
 * (test_opt_passes shows it computes what the tuple form does). */
Test(cpu, tuple_entry_parameters, .timeout = 300) {
  static const char *text = "HloModule m\n"
    "ENTRY e {\n"
    "  x = f32[4,8] parameter(0)\n"
    "  p = (f32[4,8], (f32[8], s32[3])) parameter(1)\n"
    "  y = s32[3] parameter(2)\n"
    "  a = f32[4,8] get-tuple-element(p), index=0\n"
    "  q = (f32[8], s32[3]) get-tuple-element(p), index=1\n"
    "  b = f32[8] get-tuple-element(q), index=0\n"
    "  c = s32[3] get-tuple-element(q), index=1\n"
    "  bb = f32[4,8] broadcast(b), dimensions={1}\n"
    "  s = f32[4,8] add(a, bb)\n"
    "  t = f32[4,8] multiply(s, x)\n"
    "  d = s32[3] add(c, y)\n"
    "  ROOT r = (f32[4,8], s32[3], (f32[8], s32[3])) tuple(t, d, q)\n"
    "}\n";
  for (int optimize = 0; optimize < 2; optimize++) {
    HModule *ref = ct_parse(text), *m = ct_parse(text);
    HArena *a = hlo_arena_new();
    HErr err = {0};
    cr_assert(hlo_flatten_entry_params(ref, a));
    cr_assert_eq(ref->entry->nparams, 5);
    char *dir = ct_tmpdir("hloc_cpu");
    ct_reference(ref, a, dir, 7);
    if (optimize) {
      OptOpts oo = {0};
      cr_assert(opt_optimize(m, &oo, &err), "optimizer: %s", err.msg);
    }
    cr_assert(tc_compile(m, dir, "model", 1, &err), "%s", err.msg);
    char hp[512];
    snprintf(hp, sizeof hp, "%s/model.h", dir);
    char *h = ct_slurp(hp, NULL);
    cr_expect(strstr(h, "#define MODEL_NUM_ARGS 5"), "one argument per leaf");
    free(h);
    ct_build_driver(dir);
    ct_check_driver(dir, dir, 0, "cpu", optimize ? "tuple parameters, optimized" : "tuple parameters");
    ct_rmdir(dir);
    free(dir);
    hlo_arena_free(a);
    hlo_module_free(ref);
    hlo_module_free(m);
  }
}

/* Transposes of the minor dimension (the tiled kernel of cpu_kernel.c): tiles cut at both
 * edges, strips of several blocks and a last partial one, H-row blocks of the dimension
 * before the operand's minor one (one whole, several with a partial last), rank 2, and a
 * max-pool fused under the transpose by the optimizer (padding at the edge); serially and in
 * chunks on 2 threads, against the interpreter. At -O0 the kernel is seen to be tiled. */
static const char tc_transposes[] = "HloModule m\n"
    "ENTRY e {\n"
    "  x = f32[2,19,125] parameter(0)\n"
    "  y = f32[2,24,13,30] parameter(1)\n"
    "  z = f32[3,20,300] parameter(2)\n"
    "  w = f32[1,16,300,64] parameter(3)\n"
    "  v = f32[37,170] parameter(4)\n"
    "  tx = f32[2,125,19] transpose(x), dimensions={0,2,1}\n"
    "  ty = f32[2,13,30,24] transpose(y), dimensions={0,2,3,1}\n"
    "  tz = f32[3,300,20] transpose(z), dimensions={0,2,1}\n"
    "  tw = f32[1,300,64,16] transpose(w), dimensions={0,2,3,1}\n"
    "  tv = f32[170,37] transpose(v), dimensions={1,0}\n"
    "  ROOT o = (f32[2,125,19], f32[2,13,30,24], f32[3,300,20], f32[1,300,64,16], f32[170,37]) tuple(tx, ty, tz, tw, tv)\n"
    "}\n";

Test(cpu, transpose_tiled, .timeout = 300) {
  tc_check_text("tiled transposes", tc_transposes, 0, 4);
  tc_check_text_ex("max-pool written transposed", "HloModule m\n"
    "max { a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT m = f32[] maximum(a, b) }\n"
    "ENTRY e {\n"
    "  x = f32[3,24,23,23] parameter(0)\n"
    "  c = f32[] constant(-inf)\n"
    "  p = f32[3,24,11,11] reduce-window(x, c), window={size=1x1x3x3 stride=1x1x2x2 pad=0_0x0_0x0_1x0_1}, to_apply=max\n"
    "  ROOT t = f32[3,11,11,24] transpose(p), dimensions={0,2,3,1}\n"
    "}\n", 0, 4, true);
  char *t = tc_llvm_ir(tc_transposes, "tt", 0);
  int tiled = 0;
  for (const char *q = t; (q = strstr(q, "\ntiled")); q++) tiled++;
  cr_expect_eq(tiled, 5, "each transpose in a tiled kernel: %d", tiled);
  free(t);
}

/* A transposing kernel whose output (8 MiB in scratch, rows of whole vectors) is stored past
 * the caches, then read by a reduction: results as the interpreter's (with such stores forced
 * on, whatever the host), and the stores marked nontemporal in the IR, with the fence after
 * them, for a Xeon; not for an AMD Zen, where they were slower. */
Test(cpu, transpose_tiled_nontemporal, .timeout = 300) {
  const char *text = "HloModule m\n"
    "add { a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT s = f32[] add(a, b) }\n"
    "ENTRY e {\n"
    "  x = f32[8,64,64,64] parameter(0)\n"
    "  t = f32[8,64,64,64] transpose(x), dimensions={0,2,3,1}\n"
    "  z = f32[] constant(0)\n"
    "  ROOT r = f32[8,64] reduce(t, z), dimensions={1,2}, to_apply=add\n"
    "}\n";
  setenv("HLOC_CPU_STREAM_STORES", "1", 1);
  tc_check_text("nontemporal transpose", text, 1e-5, 0);
  unsetenv("HLOC_CPU_STREAM_STORES");
  char *dir = ct_tmpdir("hloc_cpu");
  HErr err = {0};
  char ll[512];
  snprintf(ll, sizeof ll, "%s/m.ll", dir);
  const char *cpus[2] = {"sapphirerapids", "znver3"};
  for (int i = 0; i < 2; i++) {
    HModule *m = ct_parse(text);
    CpuOpts o = {.name = "nt", .out_path = ll, .opt_level = 0, .emit = CPU_EMIT_LLVM, .cpu = cpus[i]};
    cr_assert(cpu_compile(m, &o, &err), "%s", err.msg);
    char *ir = ct_slurp(ll, NULL);
    cr_expect_eq(strstr(ir, "!nontemporal") != NULL, i == 0, "%s: nontemporal stores %s", cpus[i], i ? "made" : "missing");
    cr_expect_eq(strstr(ir, "fence seq_cst") != NULL, i == 0, "%s: fence %s", cpus[i], i ? "made" : "missing");
    free(ir);
    hlo_module_free(m);
  }
  ct_rmdir(dir);
  free(dir);
}

/* Transposing kernels of pseudo-random shapes and permutations (ranks 2 to 5, extents 1 to
 * 37, at least 4096 elements so that they are tiled), against the interpreter. */
Test(cpu, transpose_tiled_random, .timeout = 300) {
  char text[8192];
  int n = 0, nt = 0;
  char root[2048] = "", rshape[2048] = "";
  n += snprintf(text + n, sizeof text - (size_t)n, "HloModule m\nENTRY e {\n");
  uint32_t x = 2024u;
  for (int c = 0; nt < 8 && c < 1000; c++) {
    x = x * 1664525u + 1013904223u;
    int r = 2 + (int)((x >> 8) % 4);
    int64_t d[5], pm[5], elems = 1;
    for (int i = 0; i < r; i++) {
      x = x * 1664525u + 1013904223u;
      d[i] = 1 + (int64_t)((x >> 8) % 37);
      elems *= d[i];
      pm[i] = i;
    }
    for (int i = r - 1; i > 0; i--) { /* Fisher-Yates */
      x = x * 1664525u + 1013904223u;
      int j = (int)((x >> 8) % (uint32_t)(i + 1));
      int64_t t = pm[i];
      pm[i] = pm[j];
      pm[j] = t;
    }
    if (elems < 4096 || elems > 200000 || pm[r - 1] == r - 1) continue;
    char in_s[128] = "", out_s[128] = "", perm[64] = "";
    int a = 0, b = 0, q = 0;
    for (int i = 0; i < r; i++) {
      a += snprintf(in_s + a, sizeof in_s - (size_t)a, "%s%lld", i ? "," : "", (long long)d[i]);
      b += snprintf(out_s + b, sizeof out_s - (size_t)b, "%s%lld", i ? "," : "", (long long)d[pm[i]]);
      q += snprintf(perm + q, sizeof perm - (size_t)q, "%s%lld", i ? "," : "", (long long)pm[i]);
    }
    n += snprintf(text + n, sizeof text - (size_t)n, "  p%d = f32[%s] parameter(%d)\n  t%d = f32[%s] transpose(p%d), dimensions={%s}\n",
                  nt, in_s, nt, nt, out_s, nt, perm);
    snprintf(root + strlen(root), sizeof root - strlen(root), "%st%d", nt ? ", " : "", nt);
    snprintf(rshape + strlen(rshape), sizeof rshape - strlen(rshape), "%sf32[%s]", nt ? ", " : "", out_s);
    nt++;
  }
  cr_assert_eq(nt, 8);
  n += snprintf(text + n, sizeof text - (size_t)n, "  ROOT o = (%s) tuple(%s)\n}\n", rshape, root);
  cr_assert_lt((size_t)n, sizeof text);
  tc_check_text("random transposes", text, 0, 4);
}

Test(cpu, emit_llvm_and_asm) {
  char *dir = ct_tmpdir("hloc_cpu");
  HErr err = {0};
  char ll[512], s[512];
  snprintf(ll, sizeof ll, "%s/m.ll", dir);
  snprintf(s, sizeof s, "%s/m.s", dir);
  HModule *m = ct_parse(tc_small);
  CpuOpts o = {.name = "small", .out_path = ll, .opt_level = 2, .emit = CPU_EMIT_LLVM};
  cr_assert(cpu_compile(m, &o, &err), "%s", err.msg);
  o.out_path = s;
  o.emit = CPU_EMIT_ASM;
  o.opt_level = 0;
  cr_assert(cpu_compile(m, &o, &err), "%s", err.msg);
  char *t = ct_slurp(ll, NULL);
  cr_expect(strstr(t, "define") && strstr(t, " @small_run_mt("), "%s", t);
  cr_expect(strstr(t, "@small_arg_info"));
  cr_expect(strstr(t, "<8 x float>") || strstr(t, "<4 x float>") || strstr(t, "<16 x float>"),
            "expected vectorized loops");
  free(t);
  t = ct_slurp(s, NULL);
  cr_expect(strstr(t, "small_run:"), "%s", t);
  free(t);
  hlo_module_free(m);
  ct_rmdir(dir);
  free(dir);
}

/* Alias scopes from the memory plan (cpu_kernel.c's kn_alias_scopes): a kernel reading an
 * argument and writing scratch, or reading scratch and an argument and writing a result,
 * vectorizes without a runtime overlap check; the one computed in place of its operand (b
 * takes a's buffer) keeps its check, since its two pointers are the same memory. */
Test(cpu, alias_scopes_from_the_plan) {
  static const char *src =
      "HloModule alias\n"
      "ENTRY e {\n"
      "  p = f32[4096] parameter(0)\n"
      "  a = f32[4096] exponential(p)\n"
      "  b = f32[4096] negate(a)\n"
      "  ROOT c = f32[4096] multiply(b, p)\n"
      "}\n";
  char *t = tc_llvm_ir(src, "alias", 2);
  int checks = 0;
  for (const char *q = t; (q = strstr(q, "define internal")); q++) {
    const char *end = strstr(q, "\n}");
    const char *c1 = strstr(q, "found.conflict"), *c2 = strstr(q, "diff.check");
    checks += (c1 && c1 < end) || (c2 && c2 < end);
  }
  cr_expect_eq(checks, 1, "kernels with a runtime overlap check: %d (expected only the in-place one)\n%s", checks, t);
  free(t);
}

Test(cpu, unsupported_op_is_a_located_error) {
  char *dir = ct_tmpdir("hloc_cpu");
  HErr err = {0};
  HModule *m = ct_parse("HloModule bad\nENTRY e {\n  x = f32[4] parameter(0)\n"
                        "  ROOT cc = f32[4] custom-call(x), custom_call_target=\"mystery\"\n}\n");
  cr_expect(!tc_compile(m, dir, "model", 0, &err));
  cr_expect(strstr(err.msg, "'cc'") && strstr(err.msg, "custom-call"), "%s", err.msg);
  char path[512];
  snprintf(path, sizeof path, "%s/model.o", dir);
  cr_expect(!tc_exists(path));
  snprintf(path, sizeof path, "%s/model.h", dir);
  cr_expect(!tc_exists(path));
  hlo_module_free(m);
  ct_rmdir(dir);
  free(dir);
}

Test(cpu, elided_constant_is_a_located_error) {
  /* XLA prints large constants as {...}: the text carries no value to embed */
  char *dir = ct_tmpdir("hloc_cpu");
  HErr err = {0};
  HModule *m = ct_parse("HloModule elided\nENTRY e {\n  x = f32[64] parameter(0)\n"
                        "  w = f32[64] constant({...})\n  ROOT a = f32[64] add(x, w)\n}\n");
  cr_expect(!tc_compile(m, dir, "model", 0, &err));
  cr_expect(strstr(err.msg, "'w'") && strstr(err.msg, "elided"), "%s", err.msg);
  char path[512];
  snprintf(path, sizeof path, "%s/model.o", dir);
  cr_expect(!tc_exists(path));
  hlo_module_free(m);
  ct_rmdir(dir);
  free(dir);
}

Test(cpu, unwritable_output_leaves_no_file) {
  char *dir = ct_tmpdir("hloc_cpu");
  HErr err = {0};
  HModule *m = ct_parse(tc_small);
  char hdr[512];
  snprintf(hdr, sizeof hdr, "%s/model.h", dir);
  CpuOpts o = {.name = "model", .out_path = "/nonexistent-dir/model.o", .header_path = hdr,
               .opt_level = 1, .emit = CPU_EMIT_OBJ};
  cr_expect(!cpu_compile(m, &o, &err));
  cr_expect(strstr(err.msg, "/nonexistent-dir/model.o"), "%s", err.msg);
  cr_expect(!tc_exists(hdr), "header left behind");
  char cmd[600];
  snprintf(cmd, sizeof cmd, "test -z \"$(ls -A '%s')\"", dir);
  cr_expect_eq(system(cmd), 0, "temporary files left behind");
  hlo_module_free(m);
  ct_rmdir(dir);
  free(dir);
}

Test(cpu, bad_symbol_prefix) {
  HErr err = {0};
  HModule *m = ct_parse(tc_small);
  CpuOpts o = {.name = "my-model", .out_path = "/tmp/unused.o", .opt_level = 1};
  cr_expect(!cpu_compile(m, &o, &err));
  cr_expect(strstr(err.msg, "my-model"), "%s", err.msg);
  hlo_module_free(m);
}

/* ------------------------------------------------------------------ sort (cpu_sort.c) */

#define TC_SORT_CMPS \
  "lt { a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT c = pred[] compare(a, b), direction=LT }\n" \
  "gt { a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT c = pred[] compare(a, b), direction=GT }\n"

/* One operand along either dimension, ascending and descending, rows split into chunks. */
Test(cpu, sort_f32_rows_and_columns, .timeout = 300) {
  tc_check_text("sort f32", "HloModule m\n" TC_SORT_CMPS
    "ENTRY e {\n"
    "  x = f32[8,37] parameter(0)\n"
    "  s1 = f32[8,37] sort(x), dimensions={1}, to_apply=lt\n"
    "  s0 = f32[8,37] sort(x), dimensions={0}, to_apply=lt\n"
    "  d1 = f32[8,37] sort(x), dimensions={1}, is_stable=true, to_apply=gt\n"
    "  ROOT o = (f32[8,37], f32[8,37], f32[8,37]) tuple(s1, s0, d1)\n"
    "}\n", 0, 4);
}

/* Argsort: float keys with many duplicates, values an iota; stable, so equal keys keep their
 * positions in order (an unstable sort fails the exact comparison of the indices). */
Test(cpu, sort_stable_argsort, .timeout = 300) {
  tc_check_text("stable argsort", "HloModule m\n"
    "lt2 { a = f32[] parameter(0)\n b = f32[] parameter(1)\n i = s32[] parameter(2)\n"
    "  j = s32[] parameter(3)\n ROOT c = pred[] compare(a, b), direction=LT }\n"
    "ENTRY e {\n"
    "  p = s32[8,37] parameter(0)\n"
    "  k = f32[8,37] convert(p)\n"
    "  i1 = s32[8,37] iota(), iota_dimension=1\n"
    "  i0 = s32[8,37] iota(), iota_dimension=0\n"
    "  a = (f32[8,37], s32[8,37]) sort(k, i1), dimensions={1}, is_stable=true, to_apply=lt2\n"
    "  b = (f32[8,37], s32[8,37]) sort(k, i0), dimensions={0}, is_stable=true, to_apply=lt2\n"
    "  ak = f32[8,37] get-tuple-element(a), index=0\n"
    "  av = s32[8,37] get-tuple-element(a), index=1\n"
    "  bk = f32[8,37] get-tuple-element(b), index=0\n"
    "  bv = s32[8,37] get-tuple-element(b), index=1\n"
    "  ROOT o = (f32[8,37], s32[8,37], f32[8,37], s32[8,37]) tuple(ak, av, bk, bv)\n"
    "}\n", 0, 4);
}

/* Integers; three operands of rank 3 sorted along the middle dimension with a comparator
 * reading a tie-breaking second key; the whole tuple as the result. */
Test(cpu, sort_s32_and_three_operands, .timeout = 300) {
  tc_check_text("sort s32", "HloModule m\n"
    "lts { a = s32[] parameter(0)\n b = s32[] parameter(1)\n ROOT c = pred[] compare(a, b), direction=LT }\n"
    "lex { a = s32[] parameter(0)\n b = s32[] parameter(1)\n c = f32[] parameter(2)\n"
    "  d = f32[] parameter(3)\n e = f32[] parameter(4)\n f = f32[] parameter(5)\n"
    "  lt = pred[] compare(a, b), direction=LT\n eq = pred[] compare(a, b), direction=EQ\n"
    "  gt2 = pred[] compare(c, d), direction=GT\n t = pred[] and(eq, gt2)\n ROOT r = pred[] or(lt, t) }\n"
    "ENTRY e {\n"
    "  x = s32[6,50] parameter(0)\n"
    "  k = s32[3,40,5] parameter(1)\n"
    "  v = f32[3,40,5] parameter(2)\n"
    "  w = f32[3,40,5] parameter(3)\n"
    "  s = s32[6,50] sort(x), dimensions={1}, to_apply=lts\n"
    "  t = (s32[3,40,5], f32[3,40,5], f32[3,40,5]) sort(k, v, w), dimensions={1}, to_apply=lex\n"
    "  t0 = s32[3,40,5] get-tuple-element(t), index=0\n"
    "  t1 = f32[3,40,5] get-tuple-element(t), index=1\n"
    "  t2 = f32[3,40,5] get-tuple-element(t), index=2\n"
    "  ROOT o = (s32[6,50], s32[3,40,5], f32[3,40,5], f32[3,40,5]) tuple(s, t0, t1, t2)\n"
    "}\n", 0, 7);
  tc_check_text("sort tuple root", "HloModule m\n"
    "lts { a = s32[] parameter(0)\n b = s32[] parameter(1)\n c = s32[] parameter(2)\n"
    "  d = s32[] parameter(3)\n ROOT r = pred[] compare(a, b), direction=LT }\n"
    "ENTRY e {\n"
    "  k = s32[4,33] parameter(0)\n"
    "  v = s32[4,33] parameter(1)\n"
    "  ROOT t = (s32[4,33], s32[4,33]) sort(k, v), dimensions={1}, is_stable=true, to_apply=lts\n"
    "}\n", 0, 9);
}

/* Row lengths 1 and 1000 (not a power of two: the last merge pass has a short right run),
 * a single long row, and f64. */
Test(cpu, sort_lengths, .timeout = 300) {
  tc_check_text("sort lengths", "HloModule m\n" TC_SORT_CMPS
    "gt64 { a = f64[] parameter(0)\n b = f64[] parameter(1)\n ROOT c = pred[] compare(a, b), direction=GT }\n"
    "ENTRY e {\n"
    "  a = f32[5,1] parameter(0)\n"
    "  b = f32[3,1000] parameter(1)\n"
    "  c = f32[1000] parameter(2)\n"
    "  d = f64[1000] parameter(3)\n"
    "  sa = f32[5,1] sort(a), dimensions={1}, to_apply=lt\n"
    "  sb = f32[3,1000] sort(b), dimensions={1}, to_apply=lt\n"
    "  sc = f32[1000] sort(c), dimensions={0}, to_apply=gt\n"
    "  sd = f64[1000] sort(d), dimensions={0}, to_apply=gt64\n"
    "  ROOT o = (f32[5,1], f32[3,1000], f32[1000], f64[1000]) tuple(sa, sb, sc, sd)\n"
    "}\n", 0, 4);
}

/* JAX's float comparator: a total order (-NaN < -inf < ... < -0 < +0 < ... < NaN), on
 * values holding NaNs (square roots of negative numbers) and signed zeros. */
Test(cpu, sort_total_order_with_nans, .timeout = 300) {
  tc_check_text("sort total order", "HloModule m\n"
    "tot { a = f32[] parameter(0)\n b = f32[] parameter(1)\n"
    "  ROOT c = pred[] compare(a, b), direction=LT, type=TOTALORDER }\n"
    "ENTRY e {\n"
    "  x = f32[4,65] parameter(0)\n"
    "  q = f32[4,65] sqrt(x)\n"
    "  z = f32[4,65] floor(x)\n"
    "  n = f32[4,65] negate(z)\n"
    "  m = f32[4,65] multiply(n, z)\n"
    "  cc = f32[8,65] concatenate(q, m), dimensions={0}\n"
    "  ROOT s = f32[8,65] sort(cc), dimensions={1}, to_apply=tot\n"
    "}\n", 0, 4);
}

/* After the optimizer: the sort stays a kernel of its own between fusions (the fusion pass
 * does not fuse it), and the compiled module matches the interpreter. */
Test(cpu, sort_after_optimizer, .timeout = 300) {
  const char *text = "HloModule m\n"
    "lt2 { a = f32[] parameter(0)\n b = f32[] parameter(1)\n i = s32[] parameter(2)\n"
    "  j = s32[] parameter(3)\n ROOT c = pred[] compare(a, b), direction=LT }\n"
    "ENTRY e {\n"
    "  x = f32[16,100] parameter(0)\n"
    "  y = f32[16,100] exponential(x)\n"
    "  io = s32[16,100] iota(), iota_dimension=1\n"
    "  s = (f32[16,100], s32[16,100]) sort(y, io), dimensions={1}, is_stable=true, to_apply=lt2\n"
    "  k = f32[16,100] get-tuple-element(s), index=0\n"
    "  v = s32[16,100] get-tuple-element(s), index=1\n"
    "  n = f32[16,100] negate(k)\n"
    "  ROOT o = (f32[16,100], s32[16,100]) tuple(n, v)\n"
    "}\n";
  HModule *ref = ct_parse(text);
  HModule *m = ct_parse(text);
  HArena *a = hlo_arena_new();
  char *dir = ct_tmpdir("hloc_cpu");
  HErr err = {0};
  OptOpts oo = {0};
  cr_assert(opt_optimize(m, &oo, &err), "optimizer: %s", err.msg);
  int nsort = 0;
  for (int i = 0; i < m->entry->ninstrs; i++) nsort += m->entry->instrs[i]->op == OP_SORT;
  cr_expect_eq(nsort, 1, "the sort is not an entry instruction of its own after the optimizer");
  hlo_comp_renumber(ref->entry);
  Literal *arg = ct_arg(a, &ref->entry->params[0]->shape, 0, 4);
  char path[512];
  snprintf(path, sizeof path, "%s/in0.npy", dir);
  cr_assert(hlo_npy_write(path, arg, &err), "%s", err.msg);
  Literal *res = hlo_interp_run(ref, a, &arg, 1, &err);
  cr_assert(res, "interpreter: %s", err.msg);
  ct_write_leaves(dir, res, 0);
  cr_assert(tc_compile(m, dir, "model", 1, &err), "%s", err.msg);
  ct_build_driver(dir);
  ct_check_driver(dir, dir, 1e-6, "cpu", "sort after the optimizer"); /* exp may differ by an ulp */
  ct_rmdir(dir);
  free(dir);
  hlo_arena_free(a);
  hlo_module_free(ref);
  hlo_module_free(m);
}

/* A sort inside a fusion (never made by the fusion pass) stays a located error. */
Test(cpu, sort_in_fusion_is_a_located_error) {
  char *dir = ct_tmpdir("hloc_cpu");
  HErr err = {0};
  HModule *m = ct_parse("HloModule bad\n" TC_SORT_CMPS
                        "f { p = f32[8] parameter(0)\n ROOT fs = f32[8] sort(p), dimensions={0}, to_apply=lt }\n"
                        "ENTRY e {\n  x = f32[8] parameter(0)\n"
                        "  ROOT r = f32[8] fusion(x), kind=kLoop, calls=f\n}\n");
  cr_expect(!tc_compile(m, dir, "model", 0, &err));
  cr_expect(strstr(err.msg, "'fs'") && strstr(err.msg, "CPU target"), "%s", err.msg);
  hlo_module_free(m);
  ct_rmdir(dir);
  free(dir);
}

/* ------------------------------------------------------------------ select-and-scatter
 * (cpu_select_scatter.c) */

#define TC_SAS_COMPS(T) \
  "ge { a = " T "[] parameter(0)\n b = " T "[] parameter(1)\n ROOT c = pred[] compare(a, b), direction=GE }\n" \
  "gt { a = " T "[] parameter(0)\n b = " T "[] parameter(1)\n ROOT c = pred[] compare(a, b), direction=GT }\n" \
  "le { a = " T "[] parameter(0)\n b = " T "[] parameter(1)\n ROOT c = pred[] compare(a, b), direction=LE }\n" \
  "add { a = " T "[] parameter(0)\n b = " T "[] parameter(1)\n ROOT s = " T "[] add(a, b) }\n" \
  "max { a = " T "[] parameter(0)\n b = " T "[] parameter(1)\n ROOT s = " T "[] maximum(a, b) }\n"

/* JAX's max-pool gradient: 2x2 windows, stride 2, NHWC; the batch dimension is split into
 * chunks (an identity window), the spatial windows do not overlap. */
Test(cpu, select_and_scatter_max_pool_grad, .timeout = 300) {
  tc_check_text("max-pool gradient", "HloModule m\n" TC_SAS_COMPS("f32")
    "ENTRY e {\n"
    "  x = f32[2,8,8,3] parameter(0)\n"
    "  g = f32[2,4,4,3] parameter(1)\n"
    "  zero = f32[] constant(0)\n"
    "  ROOT s = f32[2,8,8,3] select-and-scatter(x, g, zero), window={size=1x2x2x1 stride=1x2x2x1}, select=ge, scatter=add\n"
    "}\n", 0, 4);
}

/* Overlapping windows (3x3, stride 2, padding 1): several source elements scatter into the
 * same output element, in source order; padding taps are never selected. Also NCHW
 * (channels an identity window too), and min pooling (LE) with padding. */
Test(cpu, select_and_scatter_overlap_padding_layouts, .timeout = 300) {
  tc_check_text("select-and-scatter overlap", "HloModule m\n" TC_SAS_COMPS("f32")
    "ENTRY e {\n"
    "  x = f32[2,9,9,4] parameter(0)\n"
    "  g = f32[2,5,5,4] parameter(1)\n"
    "  xc = f32[2,3,10,10] parameter(2)\n"
    "  gc = f32[2,3,4,4] parameter(3)\n"
    "  xm = f32[2,7,7,3] parameter(4)\n"
    "  gm = f32[2,4,4,3] parameter(5)\n"
    "  zero = f32[] constant(0)\n"
    "  one = f32[] constant(1)\n"
    "  a = f32[2,9,9,4] select-and-scatter(x, g, zero), window={size=1x3x3x1 stride=1x2x2x1 pad=0_0x1_1x1_1x0_0}, select=ge, scatter=add\n"
    "  b = f32[2,3,10,10] select-and-scatter(xc, gc, zero), window={size=1x1x3x3 stride=1x1x2x2}, select=ge, scatter=add\n"
    "  c = f32[2,7,7,3] select-and-scatter(xm, gm, one), window={size=1x3x3x1 stride=1x2x2x1 pad=0_0x1_1x1_1x0_0}, select=le, scatter=add\n"
    "  ROOT o = (f32[2,9,9,4], f32[2,3,10,10], f32[2,7,7,3]) tuple(a, b, c)\n"
    "}\n", 0, 4);
}

/* f64, and s32 with a maximum scatter: windows overlapping along a leading dimension with the
 * identity window in the middle (split there), and a case with no identity dimension at all
 * (one serial chunk). */
Test(cpu, select_and_scatter_f64_and_s32, .timeout = 300) {
  tc_check_text("select-and-scatter f64", "HloModule m\n" TC_SAS_COMPS("f64")
    "ENTRY e {\n"
    "  x = f64[3,6,6,2] parameter(0)\n"
    "  g = f64[3,3,3,2] parameter(1)\n"
    "  half = f64[] constant(0.5)\n"
    "  ROOT s = f64[3,6,6,2] select-and-scatter(x, g, half), window={size=1x2x2x1 stride=1x2x2x1}, select=ge, scatter=add\n"
    "}\n", 0, 4);
  tc_check_text("select-and-scatter s32", "HloModule m\n" TC_SAS_COMPS("s32")
    "ENTRY e {\n"
    "  x = s32[4,3,6] parameter(0)\n"
    "  g = s32[3,3,3] parameter(1)\n"
    "  y = s32[6,6] parameter(2)\n"
    "  h = s32[3,3] parameter(3)\n"
    "  m1 = s32[] constant(-1)\n"
    "  zero = s32[] constant(0)\n"
    "  a = s32[4,3,6] select-and-scatter(x, g, zero), window={size=2x1x2 stride=1x1x2}, select=ge, scatter=add\n"
    "  b = s32[4,3,6] select-and-scatter(x, g, m1), window={size=2x1x2 stride=1x1x2}, select=le, scatter=max\n"
    "  c = s32[6,6] select-and-scatter(y, h, m1), window={size=2x2 stride=2x2}, select=gt, scatter=max\n"
    "  ROOT o = (s32[4,3,6], s32[4,3,6], s32[6,6]) tuple(a, b, c)\n"
    "}\n", 0, 50);
}

/* Ties: the operand holds integers 0..2 as floats, so most windows have several equal
 * maxima. GE keeps the first one of the window (row-major), GT the last: selecting the wrong
 * one moves the gradient and fails the exact comparison. */
Test(cpu, select_and_scatter_ties, .timeout = 300) {
  tc_check_text("select-and-scatter ties", "HloModule m\n" TC_SAS_COMPS("f32")
    "ENTRY e {\n"
    "  p = s32[2,8,8,3] parameter(0)\n"
    "  q = s32[2,4,4,3] parameter(1)\n"
    "  x = f32[2,8,8,3] convert(p)\n"
    "  g = f32[2,4,4,3] convert(q)\n"
    "  zero = f32[] constant(0)\n"
    "  a = f32[2,8,8,3] select-and-scatter(x, g, zero), window={size=1x2x2x1 stride=1x2x2x1}, select=ge, scatter=add\n"
    "  b = f32[2,8,8,3] select-and-scatter(x, g, zero), window={size=1x3x3x1 stride=1x2x2x1 pad=0_0x1_1x1_1x0_0}, select=gt, scatter=add\n"
    "  ROOT o = (f32[2,8,8,3], f32[2,8,8,3]) tuple(a, b)\n"
    "}\n", 0, 3);
}

/* Edge windows: windows lying entirely in the padding (their source elements scatter
 * nowhere), one window larger than the operand covering all of it with padding, window and
 * base dilation (taps between dilated elements are never selected). */
Test(cpu, select_and_scatter_edge_windows, .timeout = 300) {
  tc_check_text("select-and-scatter edges", "HloModule m\n" TC_SAS_COMPS("f32")
    "ENTRY e {\n"
    "  x = f32[2,5] parameter(0)\n"
    "  g = f32[2,8] parameter(1)\n"
    "  y = f32[3,4] parameter(2)\n"
    "  h = f32[1,1] parameter(3)\n"
    "  z = f32[2,9,9] parameter(4)\n"
    "  k = f32[2,4,4] parameter(5)\n"
    "  w = f32[2,9,9] parameter(6)\n"
    "  l = f32[2,9,8] parameter(7)\n"
    "  zero = f32[] constant(0)\n"
    "  a = f32[2,5] select-and-scatter(x, g, zero), window={size=1x2 pad=0_0x2_2}, select=ge, scatter=add\n"
    "  b = f32[3,4] select-and-scatter(y, h, zero), window={size=3x5 pad=0_0x1_0}, select=ge, scatter=add\n"
    "  c = f32[2,9,9] select-and-scatter(z, k, zero), window={size=1x2x2 stride=1x2x2 rhs_dilate=1x2x2}, select=ge, scatter=add\n"
    "  d = f32[2,9,9] select-and-scatter(w, l, zero), window={size=1x3x2 stride=1x2x1 pad=0_0x1_1x0_0 lhs_dilate=1x2x1}, select=ge, scatter=add\n"
    "  ROOT o = (f32[2,5], f32[3,4], f32[2,9,9], f32[2,9,9]) tuple(a, b, c, d)\n"
    "}\n", 0, 4);
}

/* After the optimizer (tc_check_text compiles the module as written): JAX's max-pool forward
 * and backward around the select-and-scatter, which stays a kernel of its own between
 * fusions (the fusion pass does not fuse it) and matches the interpreter. */
Test(cpu, select_and_scatter_after_optimizer, .timeout = 300) {
  const char *text = "HloModule m\n" TC_SAS_COMPS("f32")
    "ENTRY e {\n"
    "  x = f32[4,8,8,6] parameter(0)\n"
    "  d = f32[4,4,4,6] parameter(1)\n"
    "  ninf = f32[] constant(-inf)\n"
    "  zero = f32[] constant(0)\n"
    "  t = f32[4,8,8,6] tanh(x)\n"
    "  mp = f32[4,4,4,6] reduce-window(t, ninf), window={size=1x2x2x1 stride=1x2x2x1}, to_apply=max\n"
    "  g = f32[4,4,4,6] multiply(d, mp)\n"
    "  s = f32[4,8,8,6] select-and-scatter(t, g, zero), window={size=1x2x2x1 stride=1x2x2x1}, select=ge, scatter=add\n"
    "  one = f32[] constant(1)\n"
    "  ones = f32[4,8,8,6] broadcast(one), dimensions={}\n"
    "  tt = f32[4,8,8,6] multiply(t, t)\n"
    "  dt = f32[4,8,8,6] subtract(ones, tt)\n"
    "  ROOT dx = f32[4,8,8,6] multiply(s, dt)\n"
    "}\n";
  HModule *ref = ct_parse(text);
  HModule *m = ct_parse(text);
  HArena *a = hlo_arena_new();
  char *dir = ct_tmpdir("hloc_cpu");
  HErr err = {0};
  OptOpts oo = {0};
  cr_assert(opt_optimize(m, &oo, &err), "optimizer: %s", err.msg);
  int nsas = 0;
  for (int i = 0; i < m->entry->ninstrs; i++) nsas += m->entry->instrs[i]->op == OP_SELECT_AND_SCATTER;
  cr_expect_eq(nsas, 1, "the select-and-scatter is not an entry instruction of its own after the optimizer");
  ct_reference(ref, a, dir, 4);
  cr_assert(tc_compile(m, dir, "model", 1, &err), "%s", err.msg);
  ct_build_driver(dir);
  ct_check_driver(dir, dir, 1e-5, "cpu", "select-and-scatter after the optimizer"); /* tanh may differ by an ulp */
  ct_rmdir(dir);
  free(dir);
  hlo_arena_free(a);
  hlo_module_free(ref);
  hlo_module_free(m);
}

/* A select-and-scatter inside a fusion (never made by the fusion pass) stays a located
 * error. */
Test(cpu, select_and_scatter_in_fusion_is_a_located_error) {
  char *dir = ct_tmpdir("hloc_cpu");
  HErr err = {0};
  HModule *m = ct_parse("HloModule bad\n" TC_SAS_COMPS("f32")
                        "f { p = f32[4] parameter(0)\n q = f32[2] parameter(1)\n z = f32[] constant(0)\n"
                        "  ROOT fs = f32[4] select-and-scatter(p, q, z), window={size=2 stride=2}, select=ge, scatter=add }\n"
                        "ENTRY e {\n  x = f32[4] parameter(0)\n  y = f32[2] parameter(1)\n"
                        "  ROOT r = f32[4] fusion(x, y), kind=kLoop, calls=f\n}\n");
  cr_expect(!tc_compile(m, dir, "model", 0, &err));
  cr_expect(strstr(err.msg, "'fs'") && strstr(err.msg, "CPU target"), "%s", err.msg);
  hlo_module_free(m);
  ct_rmdir(dir);
  free(dir);
}

/* ------------------------------------------------------------------ reduce-precision, bit for bit
 *
 * The compiled values must equal the interpreter's bit for bit (a NaN matching any NaN), which
 * the tolerance of tests/cpu_driver.c cannot check (-0 passes for +0; f16/bf16 results are not
 * read at all). These tests therefore run a driver of their own: it reads each argument's raw
 * bytes, runs model_run and model_run_mt (its parallel-for running the tasks in reverse
 * order), and writes each result's raw bytes; the test compares them with the interpreter's.
 * Arguments are chosen bit patterns: the special values of the argument's type, for every
 * reduce-precision format of the module the values around its rounding ties, binade carries,
 * overflow and underflow thresholds, then random bit patterns (every exponent, NaNs and
 * denormals included). */

static const char *tc_rp_driver =
    "#include \"model.h\"\n"
    "#include <stdio.h>\n"
    "#include <stdlib.h>\n"
    "#include <string.h>\n"
    "static void rev_for(void *runner, int64_t n, hloc_task_fn fn, void *ctx) {\n"
    "  (void)runner;\n"
    "  for (int64_t i = n - 1; i >= 0; i--) fn(ctx, i);\n"
    "}\n"
    "int main(int argc, char **argv) {\n"
    "  char path[4096];\n"
    "  const void *args[MODEL_NUM_ARGS + 1];\n"
    "  void *res[MODEL_NUM_RESULTS + 1];\n"
    "  if (argc != 2) return 2;\n"
    "  for (int i = 0; i < MODEL_NUM_ARGS; i++) {\n"
    "    size_t n = model_arg_info[i].bytes;\n"
    "    void *d = malloc(n + 1);\n"
    "    snprintf(path, sizeof path, \"%s/in%d.bin\", argv[1], i);\n"
    "    FILE *f = fopen(path, \"rb\");\n"
    "    if (!f || fread(d, 1, n, f) != n) return 2;\n"
    "    fclose(f);\n"
    "    args[i] = d;\n"
    "  }\n"
    "  size_t al = MODEL_TEMP_ALIGN, tb = ((size_t)MODEL_TEMP_BYTES + al - 1) / al * al;\n"
    "  void *temp = aligned_alloc(al, tb ? tb : al);\n"
    "  for (int mt = 0; mt < 2; mt++) {\n"
    "    for (int k = 0; k < MODEL_NUM_RESULTS; k++) {\n"
    "      res[k] = malloc(model_result_info[k].bytes + 1);\n"
    "      memset(res[k], 0xff, model_result_info[k].bytes);\n"
    "    }\n"
    "    int rc = mt ? model_run_mt(args, res, temp, rev_for, NULL) : model_run(args, res, temp);\n"
    "    if (rc) return 1;\n"
    "    for (int k = 0; k < MODEL_NUM_RESULTS; k++) {\n"
    "      size_t n = model_result_info[k].bytes;\n"
    "      snprintf(path, sizeof path, \"%s/got%d_%d.bin\", argv[1], k, mt);\n"
    "      FILE *f = fopen(path, \"wb\");\n"
    "      if (!f || fwrite(res[k], 1, n, f) != n) return 2;\n"
    "      fclose(f);\n"
    "      free(res[k]);\n"
    "    }\n"
    "  }\n"
    "  free(temp);\n"
    "  for (int i = 0; i < MODEL_NUM_ARGS; i++) free((void *)args[i]);\n"
    "  return 0;\n"
    "}\n";

/* Exponent and mantissa widths of a float type. */
static void tc_rp_format(DType t, int *exp, int *man) {
  int nbits;
  cr_assert(hlo_float_format(t, &nbits, exp, man), "a float argument is expected");
}

static void tc_rp_push(uint64_t *v, int *n, int cap, uint64_t x) {
  cr_assert_lt(*n, cap, "too many edge values");
  v[(*n)++] = x;
}

/* Edge bit patterns of type t (se exponent, sm mantissa bits) for reduce-precision to (e, m). */
static void tc_rp_edges(uint64_t *v, int *n, int cap, int se, int sm, int e, int m) {
  uint64_t maxe = (UINT64_C(1) << se) - 2, bias = (UINT64_C(1) << (se - 1)) - 1;
  uint64_t exps[12], mans[10];
  int ne = 0, nm = 0;
  exps[ne++] = 0, exps[ne++] = 1, exps[ne++] = bias, exps[ne++] = bias + 1, exps[ne++] = maxe;
  if (e < se) { /* around the reduced format's largest and smallest normal binades */
    uint64_t rb = (UINT64_C(1) << (e - 1)) - 1;
    for (int d = -1; d <= 1; d++) {
      exps[ne++] = (uint64_t)((int64_t)(bias + rb) + d);
      if ((int64_t)(bias - rb) + d >= 0) exps[ne++] = (uint64_t)((int64_t)(bias - rb) + d);
    }
  }
  uint64_t all = (UINT64_C(1) << sm) - 1;
  mans[nm++] = 0, mans[nm++] = 1, mans[nm++] = all, mans[nm++] = UINT64_C(1) << (sm - 1);
  if (m < sm) { /* ties to even both ways, just below and above a tie */
    uint64_t half = UINT64_C(1) << (sm - m - 1), last = UINT64_C(1) << (sm - m);
    uint64_t top = all & ~(last - 1); /* the kept bits all ones: a tie carries out */
    mans[nm++] = half, mans[nm++] = last | half, mans[nm++] = last | (half - 1);
    mans[nm++] = half + 1, mans[nm++] = top | half, mans[nm++] = top | (half - 1);
  }
  for (int i = 0; i < ne; i++)
    for (int j = 0; j < nm; j++) {
      if (exps[i] > maxe) continue;
      uint64_t x = exps[i] << sm | mans[j];
      tc_rp_push(v, n, cap, x);
      tc_rp_push(v, n, cap, x | UINT64_C(1) << (se + sm));
    }
}

/* The distinct reduce-precision formats of every computation of m. */
static int tc_rp_formats(const HModule *m, int (*fmt)[2], int cap) {
  int n = 0;
  for (int c = 0; c < m->ncomps; c++)
    for (int i = 0; i < m->comps[c]->ninstrs; i++) {
      const HInstr *in = m->comps[c]->instrs[i];
      if (in->op != OP_REDUCE_PRECISION || n == cap) continue;
      bool seen = false;
      for (int f = 0; f < n; f++)
        seen |= fmt[f][0] == in->exponent_bits && fmt[f][1] == in->mantissa_bits;
      if (!seen) fmt[n][0] = in->exponent_bits, fmt[n][1] = in->mantissa_bits, n++;
    }
  return n;
}

/* An argument of shape s for module m: the special values and m's edge values, then random bit
 * patterns. */
static Literal *tc_rp_arg(HArena *a, const Shape *s, const HModule *m, int seed) {
  int se, sm, fmt[32][2];
  tc_rp_format(s->dt, &se, &sm);
  int nf = tc_rp_formats(m, fmt, 32), cap = 8192, n = 0;
  uint64_t *v = hlo_arena_alloc(a, sizeof *v * (size_t)cap);
  uint64_t sign = UINT64_C(1) << (se + sm), inf = ((UINT64_C(1) << se) - 1) << sm;
  uint64_t qnan = inf | UINT64_C(1) << (sm - 1);
  uint64_t specials[] = {0,           sign,     inf,     sign | inf,     qnan,
                         sign | qnan, qnan | 5, inf | 3, sign | inf | 1, 1};
  for (size_t i = 0; i < sizeof specials / sizeof *specials; i++)
    tc_rp_push(v, &n, cap, specials[i]);
  for (int f = 0; f < nf; f++)
    tc_rp_edges(v, &n, cap, se, sm, fmt[f][0], fmt[f][1]);
  int64_t ne = hlo_shape_elems(s);
  cr_assert_geq(ne, n, "argument of %lld elements is too small for %d edge values", (long long)ne,
                n);
  Literal *l = hlo_literal_new(a, s);
  int bytes = (int)hlo_dtype_size(s->dt);
  uint64_t x = 0x9e3779b97f4a7c15u * (uint64_t)(seed + 1);
  for (int64_t i = 0; i < ne; i++) {
    uint64_t b = i < n ? v[i] : 0;
    if (i >= n) { /* xorshift64 */
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      b = x;
    }
    memcpy((char *)l->data + i * bytes, &b, (size_t)bytes); /* little-endian: the low bytes */
  }
  return l;
}

/* Build tc_rp_driver against DIR/model.o and run it on DIR (its in<k>.bin to got<k>_<mt>.bin). */
static void tc_rp_run(const char *dir, const char *what) {
  char cmd[2048];
  cr_assert_eq(tc_build_run(dir, "driver.c", tc_rp_driver,
                            "cc -std=c11 -O1 -Wall -Werror -I. driver.c model.o -lm -o driver && ./driver .", cmd, sizeof cmd),
               0, "%s: %s", what, cmd);
}

/* Compare result leaf l with the raw bytes of DIR/got<k>_<mt>.bin, bit for bit (NaN as NaN). */
static int tc_rp_compare(HArena *a, const char *dir, const Literal *l, int k, const char *what) {
  if (l->shape.dt == DT_TUPLE) {
    for (int i = 0; i < l->shape.ntuple; i++)
      k = tc_rp_compare(a, dir, l->elems[i], k, what);
    return k;
  }
  size_t bytes = hlo_shape_bytes(&l->shape), es = hlo_dtype_size(l->shape.dt);
  bool fl = hlo_dtype_is_float(l->shape.dt);
  for (int mt = 0; mt < 2; mt++) {
    char path[512];
    snprintf(path, sizeof path, "%s/got%d_%d.bin", dir, k, mt);
    size_t n = 0;
    char *got = ct_slurp(path, &n);
    cr_assert_eq(n, bytes, "%s: result %d has %zu bytes, want %zu", what, k, n, bytes);
    Literal *g = hlo_literal_new(a, &l->shape);
    memcpy(g->data, got, bytes);
    free(got);
    int bad = 0;
    for (int64_t i = 0; i < hlo_shape_elems(&l->shape); i++) {
      uint64_t wb = 0, gb = 0;
      memcpy(&wb, (const char *)l->data + i * (int64_t)es, es);
      memcpy(&gb, (const char *)g->data + i * (int64_t)es, es);
      if (wb == gb || (fl && isnan(hlo_literal_get_f64(l, i)) && isnan(hlo_literal_get_f64(g, i))))
        continue;
      if (bad++ < 8)
        cr_expect(false, "%s: result %d (%s) element %lld: got 0x%llx (%.9g), want 0x%llx (%.9g)",
                  what, k, mt ? "run_mt" : "run", (long long)i, (unsigned long long)gb,
                  hlo_literal_get_f64(g, i), (unsigned long long)wb, hlo_literal_get_f64(l, i));
    }
    cr_expect_eq(bad, 0, "%s: result %d (%s): %d elements differ", what, k, mt ? "run_mt" : "run",
                 bad);
  }
  return k + 1;
}

/* Compile text (after the optimizer when optimize), run it on chosen arguments and compare with
 * the interpreter bit for bit. Returns the number of reduce-precision instructions compiled
 * inside fusions with other instructions (after the optimizer). */
static int tc_check_bits(const char *what, const char *text, bool optimize) {
  HModule *ref = ct_parse(text);
  HModule *m = ct_parse(text);
  HArena *a = hlo_arena_new();
  char *dir = ct_tmpdir("hloc_cpu_rp");
  HErr err = {0};
  if (optimize) {
    OptOpts oo = {0};
    cr_assert(opt_optimize(m, &oo, &err), "optimizer: %s", err.msg);
  }
  int fused = 0;
  for (int i = 0; i < m->entry->ninstrs; i++) {
    const HInstr *in = m->entry->instrs[i];
    if (in->op != OP_FUSION || in->calls[0]->ninstrs < 3) continue;
    for (int j = 0; j < in->calls[0]->ninstrs; j++)
      fused += in->calls[0]->instrs[j]->op == OP_REDUCE_PRECISION;
  }
  int np = ref->entry->nparams;
  hlo_comp_renumber(ref->entry);
  Literal **args = hlo_arena_alloc(a, sizeof(Literal *) * (size_t)(np + 1));
  for (int i = 0; i < np; i++) {
    args[i] = tc_rp_arg(a, &ref->entry->params[i]->shape, ref, i);
    char path[512];
    snprintf(path, sizeof path, "%s/in%d.bin", dir, i);
    FILE *f = fopen(path, "wb");
    cr_assert(f);
    cr_assert_eq(fwrite(args[i]->data, 1, hlo_shape_bytes(&args[i]->shape), f),
                 hlo_shape_bytes(&args[i]->shape));
    fclose(f);
  }
  Literal *res = hlo_interp_run(ref, a, args, np, &err);
  cr_assert(res, "interpreter: %s", err.msg);
  cr_assert(tc_compile(m, dir, "model", 1, &err), "%s: %s", what, err.msg);
  tc_rp_run(dir, what);
  tc_rp_compare(a, dir, res, 0, what);
  ct_rmdir(dir);
  free(dir);
  hlo_arena_free(a);
  hlo_module_free(ref);
  hlo_module_free(m);
  return fused;
}

/* f32 to bf16-like (8,7), f16-like (5,10), fp8-like (4,3) and (5,2), a tiny (2,1), the one
 * exponent bit format (1,0) (only zeros and infinities), (8,0) (a NaN becomes an infinity)
 * and the identity (8,23). */
Test(cpu, reduce_precision_f32_formats, .timeout = 300) {
  tc_check_bits("reduce-precision f32", "HloModule m\n"
    "ENTRY e {\n"
    "  x = f32[4099] parameter(0)\n"
    "  a = f32[4099] reduce-precision(x), exponent_bits=8, mantissa_bits=7\n"
    "  b = f32[4099] reduce-precision(x), exponent_bits=5, mantissa_bits=10\n"
    "  c = f32[4099] reduce-precision(x), exponent_bits=4, mantissa_bits=3\n"
    "  d = f32[4099] reduce-precision(x), exponent_bits=5, mantissa_bits=2\n"
    "  f = f32[4099] reduce-precision(x), exponent_bits=2, mantissa_bits=1\n"
    "  g = f32[4099] reduce-precision(x), exponent_bits=1, mantissa_bits=0\n"
    "  h = f32[4099] reduce-precision(x), exponent_bits=8, mantissa_bits=0\n"
    "  i = f32[4099] reduce-precision(x), exponent_bits=8, mantissa_bits=23\n"
    "  ROOT o = (f32[4099], f32[4099], f32[4099], f32[4099], f32[4099], f32[4099], f32[4099], f32[4099]) "
    "tuple(a, b, c, d, f, g, h, i)\n"
    "}\n", false);
}

/* f64 to f32-like (8,23), bf16-like (8,7), f16-like (5,10), a tiny (2,1), (11,0), a wide
 * exponent with a short mantissa (10,30) and the identity (11,52). */
Test(cpu, reduce_precision_f64_formats, .timeout = 300) {
  tc_check_bits("reduce-precision f64", "HloModule m\n"
    "ENTRY e {\n"
    "  x = f64[4099] parameter(0)\n"
    "  a = f64[4099] reduce-precision(x), exponent_bits=8, mantissa_bits=23\n"
    "  b = f64[4099] reduce-precision(x), exponent_bits=8, mantissa_bits=7\n"
    "  c = f64[4099] reduce-precision(x), exponent_bits=5, mantissa_bits=10\n"
    "  d = f64[4099] reduce-precision(x), exponent_bits=2, mantissa_bits=1\n"
    "  f = f64[4099] reduce-precision(x), exponent_bits=11, mantissa_bits=0\n"
    "  g = f64[4099] reduce-precision(x), exponent_bits=10, mantissa_bits=30\n"
    "  h = f64[4099] reduce-precision(x), exponent_bits=11, mantissa_bits=52\n"
    "  ROOT o = (f64[4099], f64[4099], f64[4099], f64[4099], f64[4099], f64[4099], f64[4099]) tuple(a, b, c, d, f, g, h)\n"
    "}\n", false);
}

/* f16 and bf16 (computed through f32, as the interpreter does): formats narrower than the type,
 * wider in the exponent (f16 to (8,7): rounding past 65504 gives an infinity), (8,0), and
 * the identity (8,23). */
Test(cpu, reduce_precision_f16_bf16, .timeout = 300) {
  tc_check_bits("reduce-precision f16/bf16", "HloModule m\n"
    "ENTRY e {\n"
    "  x = f16[2051] parameter(0)\n"
    "  y = bf16[2051] parameter(1)\n"
    "  a = f16[2051] reduce-precision(x), exponent_bits=5, mantissa_bits=10\n"
    "  b = f16[2051] reduce-precision(x), exponent_bits=4, mantissa_bits=3\n"
    "  c = f16[2051] reduce-precision(x), exponent_bits=8, mantissa_bits=7\n"
    "  d = f16[2051] reduce-precision(x), exponent_bits=2, mantissa_bits=1\n"
    "  f = bf16[2051] reduce-precision(y), exponent_bits=8, mantissa_bits=7\n"
    "  g = bf16[2051] reduce-precision(y), exponent_bits=5, mantissa_bits=10\n"
    "  h = bf16[2051] reduce-precision(y), exponent_bits=5, mantissa_bits=2\n"
    "  i = bf16[2051] reduce-precision(y), exponent_bits=8, mantissa_bits=0\n"
    "  j = bf16[2051] reduce-precision(y), exponent_bits=8, mantissa_bits=23\n"
    "  ROOT o = (f16[2051], f16[2051], f16[2051], f16[2051], bf16[2051], bf16[2051], bf16[2051], bf16[2051], bf16[2051]) "
    "tuple(a, b, c, d, f, g, h, i, j)\n"
    "}\n", false);
}

/* reduce-precision among exact elementwise ops (x*2 and x/4 move the edge values by whole
 * binades; negate, abs, subtract, select on a compare, converts to and from f16). */
#define TC_RP_CHAIN                                                          \
  "  x = f32[2051] parameter(0)\n"                                           \
  "  y = f16[2051] parameter(1)\n"                                           \
  "  two = f32[] constant(2)\n"                                              \
  "  b2 = f32[2051] broadcast(two), dimensions={}\n"                         \
  "  m = f32[2051] multiply(x, b2)\n"                                        \
  "  r1 = f32[2051] reduce-precision(m), exponent_bits=5, mantissa_bits=10\n" \
  "  n = f32[2051] negate(r1)\n"                                             \
  "  r2 = f32[2051] reduce-precision(n), exponent_bits=8, mantissa_bits=7\n" \
  "  s = f32[2051] subtract(r2, r1)\n"                                       \
  "  q = f32[] constant(0.25)\n"                                             \
  "  bq = f32[2051] broadcast(q), dimensions={}\n"                           \
  "  d = f32[2051] multiply(x, bq)\n"                                        \
  "  ab = f32[2051] abs(d)\n"                                                \
  "  r3 = f32[2051] reduce-precision(ab), exponent_bits=2, mantissa_bits=1\n" \
  "  lt = pred[2051] compare(r3, ab), direction=LT\n"                        \
  "  sel = f32[2051] select(lt, r3, s)\n"                                    \
  "  yf = f32[2051] convert(y)\n"                                            \
  "  r4 = f32[2051] reduce-precision(yf), exponent_bits=4, mantissa_bits=3\n" \
  "  yh = f16[2051] convert(r4)\n"                                           \
  "  r5 = f16[2051] reduce-precision(yh), exponent_bits=3, mantissa_bits=2\n" \
  "  r5f = f32[2051] convert(r5)\n"                                          \
  "  o = f32[2051] add(sel, r5f)\n"

/* The chain in a loop fusion as written (one loop nest), and reduce-precision of a constant of
 * edge values. */
Test(cpu, reduce_precision_in_loop_fusion, .timeout = 300) {
  tc_check_bits("reduce-precision in a loop fusion", "HloModule m\n"
    "fused {\n" TC_RP_CHAIN "  ROOT t = (f32[2051], f16[2051]) tuple(o, r5)\n}\n"
    "fused1 {\n" TC_RP_CHAIN "  ROOT neg = f32[2051] negate(o)\n}\n"
    "ENTRY e {\n"
    "  x = f32[2051] parameter(0)\n"
    "  y = f16[2051] parameter(1)\n"
    "  f = (f32[2051], f16[2051]) fusion(x, y), kind=kLoop, calls=fused\n"
    "  f0 = f32[2051] get-tuple-element(f), index=0\n"
    "  f1 = f16[2051] get-tuple-element(f), index=1\n"
    "  g = f32[2051] fusion(x, y), kind=kLoop, calls=fused1\n"
    "  k = f32[9] constant({nan, -inf, inf, -0, 1e-45, 65520, 3.75, 0.99999, 1e-38})\n"
    "  kr = f32[9] reduce-precision(k), exponent_bits=5, mantissa_bits=10\n"
    "  ROOT t = (f32[2051], f16[2051], f32[2051], f32[9]) tuple(f0, f1, g, kr)\n"
    "}\n", false);
}

/* The chain after the optimizer: the fusion pass puts the reduce-precision instructions into
 * fusions with the ops around them. */
Test(cpu, reduce_precision_after_optimizer, .timeout = 300) {
  int fused = tc_check_bits("reduce-precision after the optimizer", "HloModule m\n"
    "ENTRY e {\n" TC_RP_CHAIN
    "  ROOT t = (f32[2051], f16[2051], f32[2051]) tuple(o, r5, r2)\n"
    "}\n", true);
  cr_expect_geq(fused, 5, "only %d reduce-precision instructions fused with other ops", fused);
}

/* tests/xla_cases/rp_*: XLA's own reduce-precision results (tools/export_xla_cases.py) on f32
 * and f16 values where the rounding is decided, formats narrower and wider than the input's
 * (f16 to (8,7) keeps its exponent; NaNs stay NaNs at mantissa_bits 0): compiled, run on the
 * exported argument and compared bit for bit. */
Test(cpu, reduce_precision_xla_cases, .timeout = 300) {
  static const char *const names[] = {"rp_f32_e8m7", "rp_f32_e5m10", "rp_f32_e4m3", "rp_f32_e2m1",
                                      "rp_f32_e5m0", "rp_f32_e8m23", "rp_f32_e11m30", "rp_f16_e5m10",
                                      "rp_f16_e4m3", "rp_f16_e8m7", "rp_f16_e5m2", "rp_f16_e3m0",
                                      "rp_f16_e11m52"};
  for (size_t c = 0; c < sizeof names / sizeof *names; c++) {
    char path[4096];
    HErr err = {0};
    HArena *a = hlo_arena_new();
    snprintf(path, sizeof path, HLOC_TEST_DIR "/xla_cases/%s/module.hlo", names[c]);
    size_t len = 0;
    char *text = ct_slurp(path, &len);
    HModule *m = ct_parse(text);
    free(text);
    snprintf(path, sizeof path, HLOC_TEST_DIR "/xla_cases/%s/in0.npy", names[c]);
    Literal *x = hlo_npy_read(a, path, &err);
    cr_assert(x, "%s", err.msg);
    snprintf(path, sizeof path, HLOC_TEST_DIR "/xla_cases/%s/out0.npy", names[c]);
    Literal *want = hlo_npy_read(a, path, &err);
    cr_assert(want, "%s", err.msg);
    char *dir = ct_tmpdir("hloc_cpu_rpx");
    snprintf(path, sizeof path, "%s/in0.bin", dir);
    FILE *f = fopen(path, "wb");
    cr_assert(f);
    cr_assert_eq(fwrite(x->data, 1, hlo_shape_bytes(&x->shape), f), hlo_shape_bytes(&x->shape));
    fclose(f);
    cr_assert(tc_compile(m, dir, "model", 1, &err), "%s: %s", names[c], err.msg);
    tc_rp_run(dir, names[c]);
    tc_rp_compare(a, dir, want, 0, names[c]);
    ct_rmdir(dir);
    free(dir);
    hlo_module_free(m);
    hlo_arena_free(a);
  }
}
