/* tests/test_cpu_kernels.c: the CPU target's kernel paths, seen to be taken.
 *
 * Beside the values (against the interpreter, serially and on 2 threads, as in
 * tests/cpu/cases), each test checks that the code generator took the path it is about: the
 * blocked GEMM and the implicit-GEMM convolution, kernels merged up to constants (cpu_share.c),
 * the scalar pipeline of small kernels, the tiled and nontemporal transposes, alias scopes from
 * the memory plan, and sorts and select-and-scatters left as kernels of their own by the
 * optimizer. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu_test_util.h"
#include "hlo.h"
#include "optimizer.h"
#include "proto.h"
#include "target.h"

/* ------------------------------------------------------------------ GEMM and implicit-GEMM paths
 */

/* Whether compiling text emits the shared function named by suffix (e.g. "_gemm_f32"): the
 * blocked path was taken rather than the generic accumulating loops. */
static bool tk_emits(const char *text, const char *suffix) {
  HModule *m = ct_parse(text);
  char *dir = ct_tmpdir("hloc_cpu");
  char path[512];
  snprintf(path, sizeof path, "%s/m.ll", dir);
  CpuOpts o = {.knobs = &ct_knobs};
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
  static const int sz[][3] = {{1, 1, 1},    {3, 17, 64},   {17, 3, 65},  {64, 65, 257},
                              {65, 257, 3}, {257, 64, 17}, {1, 257, 65}, {257, 1, 64},
                              {17, 17, 17}, {65, 65, 1},   {3, 64, 257}, {257, 257, 257}};
  int n = (int)(sizeof sz / sizeof sz[0]);
  char text[8192];
  int o = snprintf(text, sizeof text, "HloModule m\nENTRY e {\n");
  char root[2048] = "", rshape[2048] = "";
  for (int i = 0; i < n; i++) {
    int M = sz[i][0], N = sz[i][1], K = sz[i][2];
    o += snprintf(
        text + o, sizeof text - (size_t)o,
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
  cr_assert(tk_emits(text, "_gemm_f32"));
  ct_check_text("gemm sizes", text, 1e-4, 4);
}

/* Batch dimensions, transposed operands through the dimension numbers, several lhs free
 * dimensions (merged into M) and a contracting pair that does not merge (generic path). */
Test(cpu, gemm_batch_and_transposes, .timeout = 300) {
  const char *text =
      "HloModule m\n"
      "ENTRY e {\n"
      "  a = f32[3,17,20] parameter(0)\n"
      "  b = f32[3,20,33] parameter(1)\n"
      "  at = f32[3,20,17] parameter(2)\n"
      "  bt = f32[3,33,20] parameter(3)\n"
      "  x = f32[4,5,65] parameter(4)\n"
      "  w = f32[33,65] parameter(5)\n"
      "  bb = f32[3,17,33] dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={2}, "
      "rhs_batch_dims={0}, rhs_contracting_dims={1}\n"
      "  tt = f32[3,17,33] dot(at, bt), lhs_batch_dims={0}, lhs_contracting_dims={1}, "
      "rhs_batch_dims={0}, rhs_contracting_dims={2}\n"
      "  mm = f32[4,5,33] dot(x, w), lhs_contracting_dims={2}, rhs_contracting_dims={1}\n"
      "  bl = f32[3,33,17] dot(b, a), lhs_batch_dims={0}, lhs_contracting_dims={1}, "
      "rhs_batch_dims={0}, rhs_contracting_dims={2}\n"
      "  nm = f32[17,33] dot(a, b), lhs_contracting_dims={0,2}, rhs_contracting_dims={0,1}\n"
      "  ROOT o = (f32[3,17,33], f32[3,17,33], f32[4,5,33], f32[3,33,17], f32[17,33]) tuple(bb, "
      "tt, mm, bl, nm)\n"
      "}\n";
  cr_assert(tk_emits(text, "_gemm_f32"));
  ct_check_text("gemm batch/transposes", text, 1e-4, 4);
}

/* Output fusions: a transposed weight and a broadcast inside the fusion (strided views), a
 * layer-norm-like prologue (staged), epilogues bias + relu, tanh-GELU and a residual add. */
Test(cpu, gemm_fused_prologue_epilogue, .timeout = 300) {
  const char *text =
      "HloModule m\n"
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
  cr_assert(tk_emits(text, "_gemm_f32"));
  ct_check_text("gemm fusions", text, 1e-4, 4);
}

/* NHWC / HWIO convolutions through the implicit GEMM: stride 2 with padding, dilation,
 * asymmetric padding, 1x1; a grouped one takes the generic path. */
Test(cpu, conv_implicit_gemm, .timeout = 300) {
  const char *text =
      "HloModule m\n"
      "ENTRY e {\n"
      "  x = f32[2,11,9,5] parameter(0)\n"
      "  w = f32[3,3,5,19] parameter(1)\n"
      "  w1 = f32[1,1,5,33] parameter(2)\n"
      "  wg = f32[3,3,1,10] parameter(3)\n"
      "  s2 = f32[2,6,5,19] convolution(x, w), window={size=3x3 stride=2x2 pad=1_1x1_1}, "
      "dim_labels=b01f_01io->b01f\n"
      "  dl = f32[2,7,5,19] convolution(x, w), window={size=3x3 pad=0_0x0_0 rhs_dilate=2x2}, "
      "dim_labels=b01f_01io->b01f\n"
      "  ap = f32[2,11,5,19] convolution(x, w), window={size=3x3 stride=1x2 pad=2_0x3_1 "
      "rhs_dilate=1x2}, dim_labels=b01f_01io->b01f\n"
      "  pw = f32[2,11,9,33] convolution(x, w1), window={size=1x1}, dim_labels=b01f_01io->b01f\n"
      "  gr = f32[2,9,7,10] convolution(x, wg), window={size=3x3}, dim_labels=b01f_01io->b01f, "
      "feature_group_count=5\n"
      "  ROOT o = (f32[2,6,5,19], f32[2,7,5,19], f32[2,11,5,19], f32[2,11,9,33], f32[2,9,7,10]) "
      "tuple(s2, dl, ap, pw, gr)\n"
      "}\n";
  cr_assert(tk_emits(text, "_gemm_f32"));
  ct_check_text("implicit-GEMM convolutions", text, 1e-4, 4);
}

/* ------------------------------------------------------------------ kernels merged up to constants
 */

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
  for (int64_t d = 1; d <= 3000; d++)
    ds[nd++] = d;
  const int64_t big[] = {4095,
                         4097,
                         65535,
                         1000003,
                         (1ll << 31) - 1,
                         1ll << 31,
                         (1ll << 31) + 1,
                         1000000007ll * 1000,
                         (1ll << 62) - 1,
                         1ll << 62,
                         INT64_MAX - 1,
                         INT64_MAX};
  for (size_t i = 0; i < sizeof big / sizeof *big; i++)
    ds[nd++] = big[i];
  uint64_t x = 88172645463325252ull;
  int bad = 0;
  for (int i = 0; i < nd; i++) {
    int64_t d = ds[i], mv[4];
    cpu_sdiv_magic(d, mv);
    int64_t ns[64];
    int nn = 0;
    const int64_t fixed[] = {0, 1, -1, 2, -2, INT64_MIN, INT64_MIN + 1, INT64_MAX, INT64_MAX - 1};
    for (size_t j = 0; j < sizeof fixed / sizeof *fixed; j++)
      ns[nn++] = fixed[j];
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
        cr_log_error("%lld / %lld: %lld, want %lld", (long long)ns[j], (long long)d, (long long)got,
                     (long long)want);
    }
  }
  cr_expect_eq(bad, 0, "%d wrong quotients", bad);
}

/* Kernels merged up to integer constants (cpu_share.c): loop fusions of one structure at other
 * sizes and constants (a subtraction, then signed division or remainder by 7, 13 and 3 over
 * dividends of both signs; a broadcast add of two shapes) are one function each at -O2,
 * reading their constants at run time, and compute what the interpreter does serially and on
 * two threads; at -O3, or with HLOC_CPU_SHARE=exact, every fusion keeps its own function. */
static const char *tk_share_text =
    "HloModule share\n"
    "fd7 {\n  p_fd7 = s64[40] parameter(0)\n  c_fd7 = s64[] constant(500)\n  q_fd7 = s64[] "
    "constant(7)\n"
    "  bc_fd7 = s64[40] broadcast(c_fd7), dimensions={}\n  bq_fd7 = s64[40] broadcast(q_fd7), "
    "dimensions={}\n"
    "  s_fd7 = s64[40] subtract(p_fd7, bc_fd7)\n  ROOT d_fd7 = s64[40] divide(s_fd7, bq_fd7)\n}\n"
    "fd13 {\n  p_fd13 = s64[150] parameter(0)\n  c_fd13 = s64[] constant(300)\n  q_fd13 = s64[] "
    "constant(13)\n"
    "  bc_fd13 = s64[150] broadcast(c_fd13), dimensions={}\n  bq_fd13 = s64[150] "
    "broadcast(q_fd13), dimensions={}\n"
    "  s_fd13 = s64[150] subtract(p_fd13, bc_fd13)\n  ROOT d_fd13 = s64[150] divide(s_fd13, "
    "bq_fd13)\n}\n"
    "fd1 {\n  p_fd1 = s64[33] parameter(0)\n  c_fd1 = s64[] constant(100)\n  q_fd1 = s64[] "
    "constant(3)\n"
    "  bc_fd1 = s64[33] broadcast(c_fd1), dimensions={}\n  bq_fd1 = s64[33] broadcast(q_fd1), "
    "dimensions={}\n"
    "  s_fd1 = s64[33] subtract(p_fd1, bc_fd1)\n  ROOT d_fd1 = s64[33] divide(s_fd1, bq_fd1)\n}\n"
    "fr7 {\n  p_fr7 = s64[40] parameter(0)\n  c_fr7 = s64[] constant(500)\n  q_fr7 = s64[] "
    "constant(7)\n"
    "  bc_fr7 = s64[40] broadcast(c_fr7), dimensions={}\n  bq_fr7 = s64[40] broadcast(q_fr7), "
    "dimensions={}\n"
    "  s_fr7 = s64[40] subtract(p_fr7, bc_fr7)\n  ROOT d_fr7 = s64[40] remainder(s_fr7, "
    "bq_fr7)\n}\n"
    "fr13 {\n  p_fr13 = s64[150] parameter(0)\n  c_fr13 = s64[] constant(300)\n  q_fr13 = s64[] "
    "constant(13)\n"
    "  bc_fr13 = s64[150] broadcast(c_fr13), dimensions={}\n  bq_fr13 = s64[150] "
    "broadcast(q_fr13), dimensions={}\n"
    "  s_fr13 = s64[150] subtract(p_fr13, bc_fr13)\n  ROOT d_fr13 = s64[150] remainder(s_fr13, "
    "bq_fr13)\n}\n"
    "fa1 {\n  x_fa1 = f32[12,20] parameter(0)\n  u_fa1 = f32[20] parameter(1)\n"
    "  bu_fa1 = f32[12,20] broadcast(u_fa1), dimensions={1}\n  ROOT a_fa1 = f32[12,20] add(x_fa1, "
    "bu_fa1)\n}\n"
    "fa2 {\n  x_fa2 = f32[7,33] parameter(0)\n  u_fa2 = f32[33] parameter(1)\n"
    "  bu_fa2 = f32[7,33] broadcast(u_fa2), dimensions={1}\n  ROOT a_fa2 = f32[7,33] add(x_fa2, "
    "bu_fa2)\n}\n"
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
static const char *tk_define_line(const char *p, const char *prefix) {
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
static int tk_count_defs(const char *t, const char *prefix) {
  int n = 0;
  for (const char *p = tk_define_line(t, prefix); p; p = tk_define_line(strchr(p, '\n'), prefix))
    n++;
  return n;
}

Test(cpu, share_kernels_up_to_constants, .timeout = 300) {
  ct_check_text("kernels merged up to constants", tk_share_text, 0, 1000);
  char *t = ct_llvm_ir(tk_share_text, "share", 2);
  cr_expect_eq(tk_count_defs(t, "@share_k"), 3, "%s", t);
  cr_expect(strstr(t, "@share_kp") != NULL, "no constant tables");
  /* the divisors by their magic numbers, not by a division instruction */
  cr_expect(!strstr(t, "sdiv") && !strstr(t, "srem"), "%s", t);
  free(t);
  t = ct_llvm_ir(tk_share_text, "share", 3);
  cr_expect_eq(tk_count_defs(t, "@share_k"), 7);
  free(t);
  ct_knob(CPU_KNOB_SHARE, "exact");
  t = ct_llvm_ir(tk_share_text, "share", 2);
  ct_knob(CPU_KNOB_SHARE, NULL);
  cr_expect_eq(tk_count_defs(t, "@share_k"), 7);
  cr_expect(!strstr(t, "@share_kp"));
  free(t);
}

/* The body of function @name in IR text t (from its define line to its closing brace), or an
 * empty string; malloc'd. */
static char *tk_ir_function(const char *t, const char *name) {
  char key[256];
  snprintf(key, sizeof key, "@%s(", name);
  const char *p = tk_define_line(t, key), *end = p ? strstr(p, "\n}\n") : NULL;
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
static const char *tk_small_pair = "HloModule sp\n"
                                   "ENTRY e {\n"
                                   "  a = f32[8,8] parameter(0)\n  b = f32[512,512] parameter(1)\n"
                                   "  s = f32[8,8] add(a, a)\n  t = f32[512,512] multiply(b, b)\n"
                                   "  ROOT r = (f32[8,8], f32[512,512]) tuple(s, t)\n"
                                   "}\n";

Test(cpu, small_kernels_scalar_pipeline, .timeout = 300) {
  ct_check_text("small kernel beside a large one", tk_small_pair, 0, 4);
  char *t = ct_llvm_ir(tk_small_pair, "sp", 2);
  char *k0 = tk_ir_function(t, "sp_k0"), *k1 = tk_ir_function(t, "sp_k1");
  cr_expect(k0[0] && !strstr(k0, "x float>"), "the small kernel is vectorized:\n%s", k0);
  cr_expect(strstr(k1, "x float>") != NULL, "the large kernel is not vectorized:\n%s", k1);
  free(k0);
  free(k1);
  free(t);
  ct_knob(CPU_KNOB_SMALL, "0");
  t = ct_llvm_ir(tk_small_pair, "sp", 2);
  ct_knob(CPU_KNOB_SMALL, NULL);
  k0 = tk_ir_function(t, "sp_k0");
  cr_expect(strstr(k0, "x float>") != NULL, "HLOC_CPU_SMALL=0: not vectorized:\n%s", k0);
  free(k0);
  free(t);
  t = ct_llvm_ir(
      "HloModule one\nENTRY e {\n  a = f32[8,8] parameter(0)\n  ROOT s = f32[8,8] add(a, a)\n}\n",
      "one", 2);
  k0 = tk_ir_function(t, "one_k0");
  cr_expect(strstr(k0, "x float>") != NULL, "a module's only kernel is not vectorized:\n%s", k0);
  free(k0);
  free(t);
}

/* A small kernel inside a while loop's body runs once a trip, so it keeps the vectorizing
 * pipeline: the body's 8x8 tanh beside a large multiply outside the loop has vector code (and
 * the results match the interpreter). */
static const char *tk_small_loop =
    "HloModule sl\n"
    "body {\n  st = (s32[], f32[8,8]) parameter(0)\n  i = s32[] get-tuple-element(st), index=0\n"
    "  a = f32[8,8] get-tuple-element(st), index=1\n  s = f32[8,8] tanh(a)\n"
    "  one = s32[] constant(1)\n  i2 = s32[] add(i, one)\n"
    "  ROOT r = (s32[], f32[8,8]) tuple(i2, s)\n}\n"
    "cond {\n  st = (s32[], f32[8,8]) parameter(0)\n  i = s32[] get-tuple-element(st), index=0\n"
    "  n = s32[] constant(4)\n  ROOT lt = pred[] compare(i, n), direction=LT\n}\n"
    "ENTRY e {\n  a = f32[8,8] parameter(0)\n  b = f32[512,512] parameter(1)\n"
    "  z = s32[] constant(0)\n  t0 = (s32[], f32[8,8]) tuple(z, a)\n"
    "  w = (s32[], f32[8,8]) while(t0), condition=cond, body=body\n"
    "  s = f32[8,8] get-tuple-element(w), index=1\n  t = f32[512,512] multiply(b, b)\n"
    "  ROOT r = (f32[8,8], f32[512,512]) tuple(s, t)\n}\n";

Test(cpu, small_kernels_in_loops_vectorized, .timeout = 300) {
  ct_check_text("small kernel in a loop body", tk_small_loop, 1e-5, 4);
  char *t = ct_llvm_ir(tk_small_loop, "sl", 2);
  cr_expect(strstr(t, "fdiv <") != NULL, "the loop body's tanh is not vectorized:\n%.4000s", t);
  free(t);
}

/* Logistic (sigmoid, SiLU's gate) below f64 computes e^-x as exp does, branch-free, so its
 * loops vectorize instead of calling libm's expf per element; results match the interpreter. */
Test(cpu, logistic_vectorized, .timeout = 300) {
  static const char *txt = "HloModule lg\nENTRY e {\n  a = f32[4096] parameter(0)\n"
                           "  b = bf16[4096] parameter(1)\n  la = f32[4096] logistic(a)\n"
                           "  lb = bf16[4096] logistic(b)\n"
                           "  ROOT r = (f32[4096], bf16[4096]) tuple(la, lb)\n}\n";
  ct_check_text("logistic f32 and bf16", txt, 1e-2, 4);
  char *t = ct_llvm_ir(txt, "lg", 2);
  cr_expect(!strstr(t, "@llvm.exp.") && !strstr(t, "@expf") && strstr(t, "x float>"),
            "logistic calls libm:\n%.4000s", t);
  free(t);
}

/* ------------------------------------------------------------------ transposes and alias scopes */

/* Transposes of the minor dimension (the tiled kernel of cpu_kernel.c): tiles cut at both
 * edges, strips of several blocks and a last partial one, H-row blocks of the dimension
 * before the operand's minor one (one whole, several with a partial last), rank 2; serially
 * and in chunks on 2 threads, against the interpreter (and a max-pool fused under a transpose:
 * tests/cpu/cases/transpose_max_pool.hlo). At -O0 the kernel is seen to be tiled. */
static const char tk_transposes[] = "HloModule m\n"
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
                                    "  ROOT o = (f32[2,125,19], f32[2,13,30,24], f32[3,300,20], "
                                    "f32[1,300,64,16], f32[170,37]) tuple(tx, ty, tz, tw, tv)\n"
                                    "}\n";

Test(cpu, transpose_tiled, .timeout = 300) {
  ct_check_text("tiled transposes", tk_transposes, 0, 4);
  char *t = ct_llvm_ir(tk_transposes, "tt", 0);
  int tiled = 0;
  for (const char *q = t; (q = strstr(q, "\ntiled")); q++)
    tiled++;
  cr_expect_eq(tiled, 5, "each transpose in a tiled kernel: %d", tiled);
  free(t);
}

/* A transposing kernel whose output (8 MiB in scratch, rows of whole vectors) is stored past
 * the caches, then read by a reduction: results as the interpreter's (with such stores forced
 * on, whatever the host), and the stores marked nontemporal in the IR, with the fence after
 * them, for a Xeon; not for an AMD Zen, where they were slower. */
Test(cpu, transpose_tiled_nontemporal, .timeout = 300) {
  const char *text =
      "HloModule m\n"
      "add { a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT s = f32[] add(a, b) }\n"
      "ENTRY e {\n"
      "  x = f32[8,64,64,64] parameter(0)\n"
      "  t = f32[8,64,64,64] transpose(x), dimensions={0,2,3,1}\n"
      "  z = f32[] constant(0)\n"
      "  ROOT r = f32[8,64] reduce(t, z), dimensions={1,2}, to_apply=add\n"
      "}\n";
  ct_knob(CPU_KNOB_STREAM_STORES, "1");
  ct_check_text("nontemporal transpose", text, 1e-5, 0);
  ct_knob(CPU_KNOB_STREAM_STORES, NULL);
  char *dir = ct_tmpdir("hloc_cpu");
  HErr err = {0};
  char ll[512];
  snprintf(ll, sizeof ll, "%s/m.ll", dir);
  const char *cpus[2] = {"sapphirerapids", "znver3"};
  for (int i = 0; i < 2; i++) {
    HModule *m = ct_parse(text);
    CpuOpts o = {.knobs = &ct_knobs,
                 .name = "nt",
                 .out_path = ll,
                 .opt_level = 0,
                 .emit = CPU_EMIT_LLVM,
                 .cpu = cpus[i]};
    cr_assert(cpu_compile(m, &o, &err), "%s", err.msg);
    char *ir = ct_slurp(ll, NULL);
    cr_expect_eq(strstr(ir, "!nontemporal") != NULL, i == 0, "%s: nontemporal stores %s", cpus[i],
                 i ? "made" : "missing");
    cr_expect_eq(strstr(ir, "fence seq_cst") != NULL, i == 0, "%s: fence %s", cpus[i],
                 i ? "made" : "missing");
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
      b += snprintf(out_s + b, sizeof out_s - (size_t)b, "%s%lld", i ? "," : "",
                    (long long)d[pm[i]]);
      q += snprintf(perm + q, sizeof perm - (size_t)q, "%s%lld", i ? "," : "", (long long)pm[i]);
    }
    n +=
        snprintf(text + n, sizeof text - (size_t)n,
                 "  p%d = f32[%s] parameter(%d)\n  t%d = f32[%s] transpose(p%d), dimensions={%s}\n",
                 nt, in_s, nt, nt, out_s, nt, perm);
    snprintf(root + strlen(root), sizeof root - strlen(root), "%st%d", nt ? ", " : "", nt);
    snprintf(rshape + strlen(rshape), sizeof rshape - strlen(rshape), "%sf32[%s]", nt ? ", " : "",
             out_s);
    nt++;
  }
  cr_assert_eq(nt, 8);
  n += snprintf(text + n, sizeof text - (size_t)n, "  ROOT o = (%s) tuple(%s)\n}\n", rshape, root);
  cr_assert_lt((size_t)n, sizeof text);
  ct_check_text("random transposes", text, 0, 4);
}

/* Alias scopes from the memory plan (cpu_kernel.c's kn_alias_scopes): a kernel reading an
 * argument and writing scratch, or reading scratch and an argument and writing a result,
 * vectorizes without a runtime overlap check; so does the one computed in place of its operand
 * (b takes a's buffer): it reads and writes through one pointer (cpu_slots_same_address), where
 * two pointers to the same memory would fail the check and run the scalar copy. */
Test(cpu, alias_scopes_from_the_plan) {
  static const char *src = "HloModule alias\n"
                           "ENTRY e {\n"
                           "  p = f32[4096] parameter(0)\n"
                           "  a = f32[4096] exponential(p)\n"
                           "  b = f32[4096] negate(a)\n"
                           "  ROOT c = f32[4096] multiply(b, p)\n"
                           "}\n";
  char *t = ct_llvm_ir(src, "alias", 2);
  int checks = 0;
  for (const char *q = t; (q = strstr(q, "define internal")); q++) {
    const char *end = strstr(q, "\n}");
    const char *c1 = strstr(q, "found.conflict"), *c2 = strstr(q, "diff.check");
    checks += (c1 && c1 < end) || (c2 && c2 < end);
  }
  cr_expect_eq(checks, 0, "kernels with a runtime overlap check: %d\n%s", checks, t);
  free(t);
}

/* Slices of a wider row read by an elementwise kernel (an LSTM's gates from one [B, 4H]
 * product) are contiguous vector loads: the kernel pipeline has no reassociate, which dropped the
 * `disjoint` flag of the row offset's or and turned every such load into a gather. */
Test(cpu, sliced_rows_load_as_vectors) {
  static const char *src = "HloModule gates\n"
                           "gates {\n"
                           "  g = f32[8,1024] parameter(0)\n"
                           "  c = f32[8,256] parameter(1)\n"
                           "  gi = f32[8,256] slice(g), slice={[0:8], [0:256]}\n"
                           "  gf = f32[8,256] slice(g), slice={[0:8], [256:512]}\n"
                           "  gc = f32[8,256] slice(g), slice={[0:8], [768:1024]}\n"
                           "  si = f32[8,256] logistic(gi)\n"
                           "  sf = f32[8,256] logistic(gf)\n"
                           "  tc = f32[8,256] tanh(gc)\n"
                           "  fc = f32[8,256] multiply(sf, c)\n"
                           "  ic = f32[8,256] multiply(si, tc)\n"
                           "  ROOT c2 = f32[8,256] add(fc, ic)\n"
                           "}\n"
                           "ENTRY e {\n"
                           "  g = f32[8,1024] parameter(0)\n"
                           "  c = f32[8,256] parameter(1)\n"
                           "  ROOT f = f32[8,256] fusion(g, c), kind=kLoop, calls=gates\n"
                           "}\n";
  char *t = ct_llvm_ir(src, "gates", 2);
  cr_expect(!strstr(t, "masked.gather"), "a sliced read became a gather:\n%s", t);
  cr_expect(strstr(t, "x float>"), "the kernel is not vectorized:\n%s", t);
  free(t);
}

/* A loop's outputs updated in place by a dynamic-update-slice: the kernel writes the update's
 * elements only (kn_dus_kernel), where the elementwise kernel chose per row between the update
 * and the old value over the whole [32, 8, 64] output every trip; starts clamped as XLA
 * clamps them (the last trips' start 30 + 2 > 32 - 2 is moved back), results as the
 * interpreter's. */
Test(cpu, loop_outputs_updated_in_place) {
  static const char *src =
      "HloModule scan\n"
      "body {\n"
      "  st = (s32[], f32[32,8,64], f32[32,8,64]) parameter(0)\n"
      "  i = s32[] get-tuple-element(st), index=0\n"
      "  xs = f32[32,8,64] get-tuple-element(st), index=1\n"
      "  ys = f32[32,8,64] get-tuple-element(st), index=2\n"
      "  z = s32[] constant(0)\n"
      "  x = f32[2,8,64] dynamic-slice(xs, i, z, z), dynamic_slice_sizes={2,8,64}\n"
      "  t = f32[2,8,64] tanh(x)\n"
      "  ys2 = f32[32,8,64] dynamic-update-slice(ys, t, i, z, z)\n"
      "  one = s32[] constant(1)\n"
      "  i2 = s32[] add(i, one)\n"
      "  ROOT r = (s32[], f32[32,8,64], f32[32,8,64]) tuple(i2, xs, ys2)\n"
      "}\n"
      "cond {\n"
      "  st = (s32[], f32[32,8,64], f32[32,8,64]) parameter(0)\n"
      "  i = s32[] get-tuple-element(st), index=0\n"
      "  n = s32[] constant(32)\n"
      "  ROOT lt = pred[] compare(i, n), direction=LT\n"
      "}\n"
      "ENTRY e {\n"
      "  xs = f32[32,8,64] parameter(0)\n"
      "  ys = f32[32,8,64] parameter(1)\n"
      "  z = s32[] constant(0)\n"
      "  init = (s32[], f32[32,8,64], f32[32,8,64]) tuple(z, xs, ys)\n"
      "  w = (s32[], f32[32,8,64], f32[32,8,64]) while(init), condition=cond, body=body\n"
      "  ROOT y = f32[32,8,64] get-tuple-element(w), index=2\n"
      "}\n";
  char *t = ct_llvm_ir(src, "scan", 2);
  int rowsel = 0;
  for (const char *q = t; (q = strstr(q, "select i1 ")); q++) {
    const char *eol = strchr(q, '\n'), *f = strstr(q, " x float>");
    rowsel += f && eol && f < eol;
  }
  cr_expect_eq(rowsel, 0, "a kernel choosing whole vectors between update and operand:\n%s", t);
  free(t);
  ct_check_text("loop outputs updated in place", src, 1e-5, 0);
}

/* ------------------------------------------------------------------ sort and select-and-scatter
 * after the optimizer (cpu_sort.c, cpu_select_scatter.c) */

/* After the optimizer: the sort stays a kernel of its own between fusions (the fusion pass
 * does not fuse it), and the compiled module matches the interpreter. */
Test(cpu, sort_after_optimizer, .timeout = 300) {
  const char *text =
      "HloModule m\n"
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
  for (int i = 0; i < m->entry->ninstrs; i++)
    nsort += m->entry->instrs[i]->op == OP_SORT;
  cr_expect_eq(nsort, 1, "the sort is not an entry instruction of its own after the optimizer");
  hlo_comp_renumber(ref->entry);
  Literal *arg = ct_arg(a, &ref->entry->params[0]->shape, 0, 4);
  char path[512];
  snprintf(path, sizeof path, "%s/in0.npy", dir);
  cr_assert(hlo_npy_write(path, arg, &err), "%s", err.msg);
  Literal *res = hlo_interp_run(ref, a, &arg, 1, &err);
  cr_assert(res, "interpreter: %s", err.msg);
  ct_write_leaves(dir, res, 0);
  cr_assert(ct_compile(m, dir, "model", 1, &err), "%s", err.msg);
  ct_build_driver(dir);
  ct_check_driver(dir, dir, 1e-6, "cpu", "sort after the optimizer"); /* exp may differ by an ulp */
  ct_rmdir(dir);
  free(dir);
  hlo_arena_free(a);
  hlo_module_free(ref);
  hlo_module_free(m);
}

/* After the optimizer (ct_check_text compiles the module as written): JAX's max-pool forward
 * and backward around the select-and-scatter, which stays a kernel of its own between
 * fusions (the fusion pass does not fuse it) and matches the interpreter. */
Test(cpu, select_and_scatter_after_optimizer, .timeout = 300) {
  const char *text = "HloModule m\n" CT_SAS_COMPS(
      "f32") "ENTRY e {\n"
             "  x = f32[4,8,8,6] parameter(0)\n"
             "  d = f32[4,4,4,6] parameter(1)\n"
             "  ninf = f32[] constant(-inf)\n"
             "  zero = f32[] constant(0)\n"
             "  t = f32[4,8,8,6] tanh(x)\n"
             "  mp = f32[4,4,4,6] reduce-window(t, ninf), window={size=1x2x2x1 stride=1x2x2x1}, "
             "to_apply=max\n"
             "  g = f32[4,4,4,6] multiply(d, mp)\n"
             "  s = f32[4,8,8,6] select-and-scatter(t, g, zero), window={size=1x2x2x1 "
             "stride=1x2x2x1}, select=ge, scatter=add\n"
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
  for (int i = 0; i < m->entry->ninstrs; i++)
    nsas += m->entry->instrs[i]->op == OP_SELECT_AND_SCATTER;
  cr_expect_eq(nsas, 1,
               "the select-and-scatter is not an entry instruction of its own after the optimizer");
  ct_reference(ref, a, dir, 4);
  cr_assert(ct_compile(m, dir, "model", 1, &err), "%s", err.msg);
  ct_build_driver(dir);
  ct_check_driver(dir, dir, 1e-5, "cpu",
                  "select-and-scatter after the optimizer"); /* tanh may differ by an ulp */
  ct_rmdir(dir);
  free(dir);
  hlo_arena_free(a);
  hlo_module_free(ref);
  hlo_module_free(m);
}
