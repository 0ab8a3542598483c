/* tests/test_verify_kernels.c: hloc verify's kernel bisection (optimizer/trace.c with the CPU
 * target's in-process run, targets/cpu/cpu_run.c).
 *
 * A three-kernel module (an elementwise kernel, two GEMMs with epilogues) agrees kernel by
 * kernel; with a deliberately wrong kernel injected through the test hook (the second
 * kernel's fused constant changed in the module the target compiles, not in the one the
 * interpreter evaluates) the bisection names that kernel, counts the one after it as out too,
 * and passes the first. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "optimizer.h"
#include "target.h"
#include "test_util.h"

static const char *tk_text = "HloModule kb\n"
                             "ENTRY e {\n"
                             "  x = f32[8,16] parameter(0)\n"
                             "  w = f32[16,16] parameter(1)\n"
                             "  a = f32[8,16] tanh(x)\n"
                             "  d = f32[8,16] dot(a, w), lhs_contracting_dims={1}, "
                             "rhs_contracting_dims={0}\n"
                             "  c = f32[] constant(0.5)\n"
                             "  cb = f32[8,16] broadcast(c), dimensions={}\n"
                             "  e = f32[8,16] multiply(d, cb)\n"
                             "  d2 = f32[8,16] dot(e, w), lhs_contracting_dims={1}, "
                             "rhs_contracting_dims={0}\n"
                             "  ROOT r = f32[8,16] exponential(d2)\n"
                             "}\n";

static bool tk_run(void *ctx, HModule *m, Literal *const *args, int nargs, HArena *a,
                   Literal ***out, int *n, HErr *err) {
  (void)ctx;
  CpuOpts o = {.opt_level = 2};
  return cpu_run_module(m, &o, args, nargs, a, out, n, err);
}

/* The hook: the fused constant 0.5 of the compiled module's kernels becomes 0.75. */
static void tk_corrupt(void *ctx, HModule *m) {
  for (int c = 0; c < m->ncomps; c++)
    for (int i = 0; i < m->comps[c]->ninstrs; i++) {
      HInstr *x = m->comps[c]->instrs[i];
      if (m->comps[c] != m->entry && x->op == OP_CONSTANT && x->literal &&
          hlo_literal_get_f64(x->literal, 0) == 0.5) {
        hlo_literal_set_f64(x->literal, 0, 0.75);
        *(const char **)ctx = x->parent->name;
      }
    }
}

/* The module of text read twice and optimized with o: *mi for the interpreter, *mc for the
 * target. */
static void tk_pair(const char *text, const OptOpts *o, HModule **mi, HModule **mc) {
  HErr err = {0};
  *mi = tu_parse(text), *mc = tu_parse(text);
  cr_assert(opt_optimize(*mi, o, &err) && opt_optimize(*mc, o, &err), "%s", err.msg);
}

/* The two arguments of tk_text: a ramp of values in [lo, lo + 0.01 (mod - 1)]. */
static void tk_args(HArena *ar, const HModule *m, Literal **args, int mul, int mod, double lo) {
  for (int p = 0; p < 2; p++) {
    args[p] = hlo_literal_new(ar, &m->entry->params[p]->shape);
    for (int64_t k = 0; k < hlo_shape_elems(&args[p]->shape); k++)
      hlo_literal_set_f64(args[p], k, 0.01 * (double)((k * mul + p) % mod) + lo);
  }
}

/* The kernel b names is the fusion of the computation the hook corrupted. */
static void tk_expect_found(const HModule *mi, const OptBisect *b, const char *corrupted) {
  cr_assert(corrupted, "no constant to corrupt");
  cr_assert(b->bad_kernel, "no kernel found");
  const HInstr *bad = NULL;
  for (int i = 0; i < mi->entry->ninstrs; i++)
    if (!strcmp(mi->entry->instrs[i]->name, b->bad_kernel)) bad = mi->entry->instrs[i];
  cr_assert(bad && bad->op == OP_FUSION, "%s is not a fusion", b->bad_kernel);
  cr_expect_str_eq(bad->calls[0]->name, corrupted, "found %s, the corrupted kernel is %s",
                   bad->calls[0]->name, corrupted);
}

Test(verify_kernels, finds_the_kernel_that_is_wrong, .timeout = 120) {
  for (int inject = 0; inject < 2; inject++) {
    HModule *mi, *mc;
    HErr err = {0};
    tk_pair(tk_text, &(OptOpts){0}, &mi, &mc);
    HArena *ar = hlo_arena_new();
    Literal *args[2];
    tk_args(ar, mi, args, 7, 23, -0.1);
    const char *corrupted = NULL;
    OptBisect b = {.rtol = 1e-4, .atol = 1e-5, .tol16 = 3e-2};
    if (inject) b.inject_module = tk_corrupt, b.inject_ctx = &corrupted;
    int rc = opt_bisect_kernels(mi, mc, args, 2, tk_run, NULL, &b, &err);
    cr_expect_eq(rc, inject, "inject=%d: rc %d (%s)", inject, rc, err.msg);
    cr_expect_eq(b.kernels_checked, 3, "inject=%d: %d kernels", inject, b.kernels_checked);
    if (inject) {
      tk_expect_found(mi, &b, corrupted);
      cr_expect_eq(b.bad_kernel_idx, 2);
      cr_expect_gt(b.kernel_worst.bad, 0);
    } else {
      cr_expect_null(b.bad_kernel);
    }
    hlo_arena_free(ar);
    hlo_module_free(mi);
    hlo_module_free(mc);
  }
}

/* Differences of 16-bit results in units in the last place: one rounding is at most 1. */
Test(verify_kernels, ulps_of_bf16_results) {
  HArena *a = hlo_arena_new();
  int64_t dims[1] = {3};
  Shape s = hlo_shape_array(DT_BF16, 1, dims), f = hlo_shape_array(DT_F32, 1, dims);
  Literal *want = hlo_literal_new(a, &s), *got = hlo_literal_new(a, &s);
  const double w[3] = {1.0, 256.0, -0.0078125}, g1[3] = {1.0078125, 258.0, -0.0078125};
  for (int i = 0; i < 3; i++)
    hlo_literal_set_f64(want, i, w[i]), hlo_literal_set_f64(got, i, g1[i]);
  cr_expect_float_eq(opt_bisect_ulps(got, want), 1.0, 1e-12);
  hlo_literal_set_f64(got, 1, 260.0); /* two ulps of 256 */
  cr_expect_float_eq(opt_bisect_ulps(got, want), 2.0, 1e-12);
  cr_expect_float_eq(opt_bisect_ulps(want, want), 0.0, 1e-12);
  Literal *x = hlo_literal_new(a, &f);
  cr_expect_lt(opt_bisect_ulps(x, x), 0, "f32 results have no ulp verdict");
  hlo_arena_free(a);
}

#ifdef HLOC_HAVE_CUDA
/* The GPU's side of the bisection (targets/cuda/cuda_run.c): the bundle is prepared and run
 * here; where this machine has no GPU (CI) the GPU is stood in for by the CPU target on the
 * same module, whose results are written where the bundle's run writes them. */
typedef struct TkGpu {
  char dir[256];
  CudaOpts o;
} TkGpu;

/* The results as a bundle's run writes them: got<k>.bin, raw. */
static bool tk_write_got(const char *dir, Literal **res, int n) {
  for (int k = 0; k < n; k++) {
    char p[512];
    HErr e = {0};
    snprintf(p, sizeof p, "%s/got%d.bin", dir, k);
    if (!hlo_write_file_atomic(p, res[k]->data, (size_t)hlo_shape_bytes(&res[k]->shape), &e))
      return false;
  }
  return true;
}

static bool tk_run_gpu(void *ctx, HModule *m, Literal *const *args, int nargs, HArena *a,
                       Literal ***out, int *n, HErr *err) {
  TkGpu *g = ctx;
  uint64_t id = cuda_bundle_id(m, &g->o, args, nargs);
  char why[256];
  size_t len = 0;
  char *text = hlo_module_text(m, NULL, &len);
  HModule *host = hlo_parse_text(text, len, "<copy>", err); /* the stand-in's own copy */
  free(text);
  if (!host || !cuda_bundle_prepare(m, &g->o, args, nargs, g->dir, id, err)) return false;
  int ran = cuda_bundle_run(m, g->dir, why, sizeof why, err);
  cr_assert_geq(ran, 0, "%s", err->msg);
  CpuOpts co = {.opt_level = 2};
  if (!ran &&
      (!cpu_run_module(host, &co, args, nargs, a, out, n, err) || !tk_write_got(g->dir, *out, *n)))
    return false;
  hlo_module_free(host);
  return cuda_bundle_results(m, g->dir, id, a, out, n, err);
}

Test(verify_kernels, finds_the_kernel_through_a_gpu_bundle, .timeout = 120) {
  HModule *mi, *mc;
  HErr err = {0};
  OptOpts o = {0};
  cuda_optimizer_options(&o, CUDA_PRECISION_HIGHEST);
  tk_pair(tk_text, &o, &mi, &mc);
  HArena *ar = hlo_arena_new();
  Literal *args[2];
  tk_args(ar, mi, args, 5, 19, -0.08);
  TkGpu g = {.o = {.opt_level = 2}};
  snprintf(g.dir, sizeof g.dir, "/tmp/hloc_tk_XXXXXX");
  cr_assert(mkdtemp(g.dir));
  const char *corrupted = NULL;
  OptBisect b = {.rtol = 1e-4, .atol = 1e-5, .tol16 = 3e-2};
  b.inject_module = tk_corrupt, b.inject_ctx = &corrupted;
  int rc = opt_bisect_kernels(mi, mc, args, 2, tk_run_gpu, &g, &b, &err);
  cr_expect_eq(rc, 1, "rc %d (%s)", rc, err.msg);
  tk_expect_found(mi, &b, corrupted);
  /* results of another bundle (its id changed) and a short result are refused */
  char p[512], cmd[600];
  snprintf(p, sizeof p, "%s/bundle.id", g.dir);
  cr_assert(hlo_write_file_atomic(p, "0\n", 2, &err));
  Literal **out = NULL;
  int n = 0;
  HErr e2 = {0};
  cr_expect_not(cuda_bundle_results(mc, g.dir, 1, ar, &out, &n, &e2));
  cr_expect(strstr(e2.msg, "prepared from another module"), "%s", e2.msg);
  cr_assert(hlo_write_file_atomic(p, "0000000000000001\n", 17, &err));
  snprintf(p, sizeof p, "%s/got0.bin", g.dir);
  cr_assert(hlo_write_file_atomic(p, "abc", 3, &err));
  memset(&e2, 0, sizeof e2);
  cr_expect_not(cuda_bundle_results(mc, g.dir, 1, ar, &out, &n, &e2));
  cr_expect(strstr(e2.msg, "got0.bin") && strstr(e2.msg, "3 bytes"), "%s", e2.msg);
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", g.dir);
  cr_expect_eq(system(cmd), 0);
  hlo_arena_free(ar);
  hlo_module_free(mi);
  hlo_module_free(mc);
}
#endif

/* A bf16 kernel off by about one percent (inside bf16's tolerance) feeds an f32 product, which
 * is out of the f32 tolerance only through that input: the product is marked as agreeing on
 * its compiled inputs, and no kernel is named. */
static const char *tk_bf16_text =
    "HloModule kb16\n"
    "ENTRY e {\n"
    "  x = f32[8,16] parameter(0)\n"
    "  w = f32[16,16] parameter(1)\n"
    "  c = f32[] constant(0.5)\n"
    "  cb = f32[8,16] broadcast(c), dimensions={}\n"
    "  m = f32[8,16] multiply(x, cb)\n"
    "  h = bf16[8,16] convert(m)\n"
    "  wb = bf16[16,16] convert(w)\n"
    "  d = f32[8,16] dot(h, wb), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  d2 = f32[8,16] dot(h, wb), lhs_contracting_dims={1}, rhs_contracting_dims={1}\n"
    "  ROOT t = (f32[8,16], f32[8,16], bf16[8,16]) tuple(d, d2, h)\n"
    "}\n";

static void tk_nudge(void *ctx, HModule *m) {
  for (int c = 0; c < m->ncomps; c++)
    for (int i = 0; i < m->comps[c]->ninstrs; i++) {
      HInstr *x = m->comps[c]->instrs[i];
      if (x->op == OP_CONSTANT && x->literal && hlo_literal_get_f64(x->literal, 0) == 0.5)
        hlo_literal_set_f64(x->literal, 0, 0.505), *(int *)ctx += 1;
    }
}

Test(verify_kernels, a_difference_carried_by_the_inputs_names_no_kernel, .timeout = 120) {
  HModule *mi, *mc;
  HErr err = {0};
  tk_pair(tk_bf16_text, &(OptOpts){0}, &mi, &mc);
  HArena *ar = hlo_arena_new();
  Literal *args[2];
  tk_args(ar, mi, args, 7, 23, 0.05);
  int nudged = 0;
  char *rep = NULL;
  size_t len = 0;
  OptBisect b = {.rtol = 1e-4, .atol = 1e-5, .tol16 = 3e-2, .report = open_memstream(&rep, &len)};
  b.inject_module = tk_nudge, b.inject_ctx = &nudged;
  int rc = opt_bisect_kernels(mi, mc, args, 2, tk_run, NULL, &b, &err);
  fclose(b.report);
  cr_expect_gt(nudged, 0, "no constant to nudge");
  cr_expect_eq(rc, 0, "rc %d (%s): %s", rc, err.msg, rep);
  cr_expect_geq(b.kernels_checked, 2, "%s", rep);
  cr_expect(strstr(rep, "agrees on its compiled inputs"), "%s", rep);
  free(rep);
  hlo_arena_free(ar);
  hlo_module_free(mi);
  hlo_module_free(mc);
}

/* A reference of exact zeros has no rounding to count: its elements are left to the
 * tolerance (a zero's "ulp" is the smallest normal's, which made counts of 1e37). */
Test(verify_kernels, ulps_skip_exact_zeros) {
  HArena *a = hlo_arena_new();
  int64_t dims[1] = {2};
  Shape s = hlo_shape_array(DT_BF16, 1, dims);
  Literal *want = hlo_literal_new(a, &s), *got = hlo_literal_new(a, &s);
  hlo_literal_set_f64(want, 0, 0.0), hlo_literal_set_f64(got, 0, 0.03125);
  hlo_literal_set_f64(want, 1, 1.0), hlo_literal_set_f64(got, 1, 1.0078125);
  cr_expect_float_eq(opt_bisect_ulps(got, want), 1.0, 1e-12);
  hlo_arena_free(a);
}
