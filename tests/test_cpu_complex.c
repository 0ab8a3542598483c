/* tests/test_cpu_complex.c: complex numbers (c64, c128) and fft on the CPU target.
 *
 * The XLA test compiles every case of tests/xla_complex (JAX exports with XLA's outputs:
 * elementwise work, dots, sums, the four kinds of fft over one to three dims) as written and
 * after the optimizer, with every kernel split into chunks down to one element, links it with
 * tests/cpu_driver.c, runs it serially and on two threads and compares with XLA's outputs part
 * by part (2e-6 of each result's scale for 32-bit results, 1e-12 for 64-bit ones). The other
 * tests compare with the reference interpreter on complex arguments of their own: data
 * movement of complex arrays, sums along every kind of dimension, converts, the functions on
 * values that overflow the textbook formulas, and FFTs of lengths with every kind of factor
 * (powers of two, small primes, large primes through Bluestein's algorithm), batched and
 * along outer dims. The CUDA target's complex code is tested in test_cuda.c. */
#include <complex.h>
#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu_test_util.h"
#include "hlo.h"
#include "optimizer.h"
#include "proto.h"
#include "target.h"

#define CASES HLOC_TEST_DIR "/xla_complex"

/* ------------------------------------------------------------------ against XLA */

/* Whether case dir's results are 64-bit (c128 or f64): its outputs' dtype by name. */
static bool cc_wide(const char *name) {
  return !strncmp(name, "c128", 4) || !strncmp(name, "f64", 3);
}

/* Compile tests/xla_complex/NAME (after the optimizer when optimize) and check it against
 * XLA's outputs through the driver. */
static void cc_xla_case(const char *name, bool optimize) {
  char datadir[512], path[600];
  snprintf(datadir, sizeof datadir, "%s/%s", CASES, name);
  snprintf(path, sizeof path, "%s/module.hlo", datadir);
  HErr err = {0};
  HModule *m = proto_load_file(path, &err);
  cr_assert(m, "%s", err.msg);
  if (optimize) {
    OptOpts oo = {0};
    cr_assert(opt_optimize(m, &oo, &err), "%s: optimizer: %s", name, err.msg);
  }
  char *dir = ct_tmpdir("hloc_cpu_cplx");
  cr_assert(ct_compile(m, dir, "model", 1, &err), "%s: %s", name, err.msg);
  hlo_module_free(m);
  char what[256];
  snprintf(what, sizeof what, "%s%s", name, optimize ? ", optimized" : "");
  ct_build_driver_for(dir, what);
  ct_check_driver(dir, datadir, cc_wide(name) ? 1e-12 : 2e-6, "cpu_complex", what);
  ct_rmdir(dir);
  free(dir);
}

static int cc_cmp(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The case names of tests/xla_complex in name order (malloc'd, *n of them). */
static char **cc_case_names(int *n) {
  DIR *d = opendir(CASES);
  cr_assert(d, "no %s", CASES);
  char **names = malloc(sizeof(char *) * 64);
  *n = 0;
  for (struct dirent *de; (de = readdir(d)) && *n < 64;)
    if (de->d_name[0] != '.' && !strchr(de->d_name, '.')) names[(*n)++] = strdup(de->d_name);
  closedir(d);
  qsort(names, (size_t)*n, sizeof *names, cc_cmp);
  return names;
}

Test(cpu_complex, xla_cases, .timeout = 600) {
  int n = 0;
  char **names = cc_case_names(&n);
  cr_expect_eq(n, 20, "%d cases in %s", n, CASES);
  for (int i = 0; i < n; i++) {
    cc_xla_case(names[i], false);
    cc_xla_case(names[i], true);
    free(names[i]);
  }
  free(names);
}

/* ------------------------------------------------------------------ against the interpreter */

/* Deterministic arguments for shape s: floats in [-2, 2), complex values with both parts so,
 * integers in [0, 8); with special, also zeros, infinities, a NaN and huge parts among them. */
static Literal *cc_arg(HArena *a, const Shape *s, int seed, bool special) {
  Literal *l = hlo_literal_new(a, s);
  uint32_t x = 2654435761u * (uint32_t)(seed + 1);
  static const double odd[] = {0, -0.0, INFINITY, -INFINITY, NAN, 3e38, -2e38, 1e-30};
  for (int64_t i = 0; i < hlo_shape_elems(s); i++) {
    double p[2];
    for (int j = 0; j < 2; j++) {
      x = x * 1664525u + 1013904223u;
      p[j] = (double)(x >> 8) / (1 << 24) * 4.0 - 2.0;
      if (special && (x >> 28) < 4) p[j] = odd[(x >> 4) % 8];
    }
    if (hlo_dtype_is_complex(s->dt))
      hlo_store_c128(s->dt, l->data, i, HLO_CMPLX(p[0], p[1]));
    else if (hlo_dtype_is_float(s->dt))
      hlo_literal_set_f64(l, i, p[0]);
    else
      hlo_literal_set_i64(l, i, (int64_t)((x >> 8) % 8));
  }
  return l;
}

/* text compiled (after the optimizer when optimize) and run through the driver on cc_arg's
 * arguments, against the interpreter's results (relative tolerance rtol). */
static void cc_check_ex(const char *what, const char *text, double rtol, bool optimize,
                        bool special) {
  HModule *ref = ct_parse_named(text, what), *m = ct_parse_named(text, what);
  HArena *a = hlo_arena_new();
  char *dir = ct_tmpdir("hloc_cpu_cplx");
  HErr err = {0};
  if (optimize) {
    OptOpts oo = {0};
    cr_assert(opt_optimize(m, &oo, &err), "%s: optimizer: %s", what, err.msg);
  }
  hlo_comp_renumber(ref->entry);
  int np = ref->entry->nparams;
  Literal *args[8];
  cr_assert(np <= 8);
  for (int i = 0; i < np; i++)
    args[i] = cc_arg(a, &ref->entry->params[i]->shape, i, special);
  ct_reference_on(ref, a, dir, args);
  cr_assert(ct_compile(m, dir, "model", 1, &err), "%s: %s", what, err.msg);
  ct_build_driver_for(dir, what);
  ct_check_driver(dir, dir, rtol, "cpu_complex", what);
  ct_rmdir(dir);
  free(dir);
  hlo_arena_free(a);
  hlo_module_free(ref);
  hlo_module_free(m);
}

/* As written and after the optimizer. */
static void cc_check(const char *what, const char *text, double rtol) {
  char opt[256];
  snprintf(opt, sizeof opt, "%s, optimized", what);
  cc_check_ex(what, text, rtol, false, false);
  cc_check_ex(opt, text, rtol, true, false);
}

#define ADD_C64                                                                                    \
  "add { a = c64[] parameter(0)\n b = c64[] parameter(1)\n ROOT s = c64[] add(a, b) }\n"
#define ADD_C128                                                                                   \
  "add2 { a = c128[] parameter(0)\n b = c128[] parameter(1)\n ROOT s = c128[] add(a, b) }\n"

Test(cpu_complex, data_movement, .timeout = 300) {
  cc_check("complex data movement",
           "HloModule t\nENTRY e {\n"
           "  a = c64[6,40] parameter(0)\n  b = c64[6,8] parameter(1)\n"
           "  z = c64[] parameter(2)\n"
           "  t = c64[40,6] transpose(a), dimensions={1,0}\n"
           "  r = c64[240] reshape(t)\n  s = c64[48] slice(r), slice={[2:240:5]}\n"
           "  c = c64[6,48] concatenate(a, b), dimensions={1}\n"
           "  v = c64[6,48] reverse(c), dimensions={0,1}\n"
           "  p = c64[8,50] pad(v, z), padding=1_1x1_1\n"
           "  i = s32[] constant(2)\n"
           "  d = c64[3,20] dynamic-slice(p, i, i), dynamic_slice_sizes={3,20}\n"
           "  bz = c64[3,20] broadcast(z), dimensions={}\n  m = c64[3,20] multiply(d, bz)\n"
           "  ROOT o = (c64[48], c64[8,50], c64[3,20]) tuple(s, p, m)\n}\n",
           1e-6);
}

Test(cpu_complex, sums_and_converts, .timeout = 300) {
  cc_check("complex sums and converts",
           "HloModule t\n" ADD_C64 ADD_C128 "ENTRY e {\n"
           "  a = c64[64,300] parameter(0)\n  x = f32[64,300] parameter(1)\n"
           "  n = s32[64,300] parameter(2)\n  w = c128[64,300] parameter(3)\n"
           "  zero = c64[] constant((0, 0))\n  zero2 = c128[] constant((0, 0))\n"
           "  cx = c64[64,300] convert(x)\n  cn = c64[64,300] convert(n)\n"
           "  s1 = c64[64,300] add(a, cx)\n  s2 = c64[64,300] subtract(s1, cn)\n"
           "  rows = c64[64] reduce(s2, zero), dimensions={1}, to_apply=add\n"
           "  cols = c64[300] reduce(s2, zero), dimensions={0}, to_apply=add\n"
           "  all = c64[] reduce(a, zero), dimensions={0,1}, to_apply=add\n"
           "  wa = c128[64,300] convert(a)\n  wn = c64[64,300] convert(w)\n"
           "  wm = c128[64,300] multiply(wa, w)\n"
           "  wcols = c128[300] reduce(wm, zero2), dimensions={0}, to_apply=add2\n"
           "  ROOT o = (c64[64], c64[300], c64[], c64[64,300], c128[300]) "
           "tuple(rows, cols, all, wn, wcols)\n}\n",
           1e-5);
}

/* Every elementwise op on complex values, on ordinary values and then on zeros, infinities,
 * NaNs and parts whose squares overflow: the generated formulas agree with C's. */
static const char *cc_funcs(void) {
  return "HloModule t\nENTRY e {\n"
         "  a = c64[512] parameter(0)\n  b = c64[512] parameter(1)\n"
         "  d = c64[512] divide(a, b)\n  m = c64[512] multiply(a, b)\n"
         "  ab = f32[512] abs(a)\n  ex = c64[512] exponential(a)\n  lg = c64[512] log(a)\n"
         "  sq = c64[512] sqrt(a)\n  th = c64[512] tanh(a)\n  pw = c64[512] power(a, b)\n"
         "  sg = c64[512] sign(a)\n  rs = c64[512] rsqrt(a)\n  sn = c64[512] sine(a)\n"
         "  cs = c64[512] cosine(a)\n  em = c64[512] exponential-minus-one(a)\n"
         "  lp = c64[512] log-plus-one(a)\n  ng = c64[512] negate(a)\n"
         "  re = f32[512] real(a)\n  im = f32[512] imag(b)\n  mk = c64[512] complex(im, re)\n"
         "  eq = pred[512] compare(a, b), direction=EQ\n"
         "  ne = pred[512] compare(a, a), direction=NE\n"
         "  se = c64[512] select(eq, a, b)\n"
         "  ROOT o = (c64[512], c64[512], f32[512], c64[512], c64[512], c64[512], c64[512], "
         "c64[512], c64[512], c64[512], c64[512], c64[512], c64[512], c64[512], c64[512], "
         "c64[512], pred[512], pred[512], c64[512]) tuple(d, m, ab, ex, lg, sq, th, pw, sg, rs, "
         "sn, cs, em, lp, ng, mk, eq, ne, se)\n}\n";
}

Test(cpu_complex, functions, .timeout = 300) { cc_check("complex functions", cc_funcs(), 2e-5); }

Test(cpu_complex, functions_of_special_values, .timeout = 300) {
  /* abs and the division where the textbook formulas overflow or divide 0 by 0 */
  cc_check_ex("complex division and abs at extremes",
              "HloModule t\nENTRY e {\n"
              "  a = c64[512] parameter(0)\n  b = c64[512] parameter(1)\n"
              "  d = c64[512] divide(a, b)\n  ab = f32[512] abs(a)\n"
              "  sq = c64[512] sqrt(a)\n  ex = c64[512] exponential(a)\n"
              "  ROOT o = (c64[512], f32[512], c64[512], c64[512]) tuple(d, ab, sq, ex)\n}\n",
              1e-5, false, true);
  cc_check_ex("c128 division and abs at extremes",
              "HloModule t\nENTRY e {\n"
              "  a = c128[512] parameter(0)\n  b = c128[512] parameter(1)\n"
              "  d = c128[512] divide(a, b)\n  ab = f64[512] abs(a)\n  lg = c128[512] log(b)\n"
              "  ROOT o = (c128[512], f64[512], c128[512]) tuple(d, ab, lg)\n}\n",
              1e-12, false, true);
}

Test(cpu_complex, dots, .timeout = 300) {
  cc_check("complex dots",
           "HloModule t\nENTRY e {\n"
           "  a = c64[3,17,33] parameter(0)\n  b = c64[3,33,20] parameter(1)\n"
           "  x = c128[9,40] parameter(2)\n  y = c128[40,7] parameter(3)\n"
           "  d = c64[3,17,20] dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={2}, "
           "rhs_batch_dims={0}, rhs_contracting_dims={1}\n"
           "  e = c128[9,7] dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
           "  ROOT o = (c64[3,17,20], c128[9,7]) tuple(d, e)\n}\n",
           1e-5);
}

/* fft of kind over dims lens (innermost) of a batch of b, type c (c64, c128), against the
 * interpreter's direct transform in double. */
static void cc_fft(const char *kind, const char *c, int b, const int *lens, int r, double rtol) {
  char dims_c[96] = "", dims_r[96] = "", dims_h[96] = "", fl[64] = "";
  int k = snprintf(dims_c, sizeof dims_c, "%d", b);
  snprintf(dims_r, sizeof dims_r, "%d", b);
  snprintf(dims_h, sizeof dims_h, "%d", b);
  for (int i = 0, f = 0; i < r; i++) {
    k += snprintf(dims_c + k, sizeof dims_c - (size_t)k, ",%d", lens[i]);
    size_t lr = strlen(dims_r), lh = strlen(dims_h);
    snprintf(dims_r + lr, sizeof dims_r - lr, ",%d", lens[i]);
    snprintf(dims_h + lh, sizeof dims_h - lh, ",%d", i == r - 1 ? lens[i] / 2 + 1 : lens[i]);
    f += snprintf(fl + f, sizeof fl - (size_t)f, "%s%d", i ? "," : "", lens[i]);
  }
  const char *re = !strcmp(c, "c64") ? "f32" : "f64";
  char in_s[128], out_s[128], text[1024], what[300];
  if (!strcmp(kind, "RFFT"))
    snprintf(in_s, sizeof in_s, "%s[%s]", re, dims_r),
        snprintf(out_s, sizeof out_s, "%s[%s]", c, dims_h);
  else if (!strcmp(kind, "IRFFT"))
    snprintf(in_s, sizeof in_s, "%s[%s]", c, dims_h),
        snprintf(out_s, sizeof out_s, "%s[%s]", re, dims_r);
  else
    snprintf(in_s, sizeof in_s, "%s[%s]", c, dims_c),
        snprintf(out_s, sizeof out_s, "%s[%s]", c, dims_c);
  snprintf(text, sizeof text,
           "HloModule t\nENTRY e {\n  a = %s parameter(0)\n"
           "  ROOT r = %s fft(a), fft_type=%s, fft_length={%s}\n}\n",
           in_s, out_s, kind, fl);
  snprintf(what, sizeof what, "%s %s -> %s", kind, in_s, out_s);
  cc_check_ex(what, text, rtol, false, false);
}

/* Lengths of every kind of factor: powers of two (radix 4 and 2 passes), small primes and
 * their products (radix 3, 5, 7, 11, 13), primes beyond (Bluestein: 17, 101, 1009) and a
 * product with one (202); length 1. */
Test(cpu_complex, fft_lengths, .timeout = 600) {
  static const int lens[] = {1,   2,  3,   8,   12,  16,   30,   49,  77,
                             169, 17, 101, 202, 256, 1000, 1024, 1009};
  for (size_t i = 0; i < sizeof lens / sizeof *lens; i++) {
    int b = lens[i] > 300 ? 2 : 5;
    cc_fft("FFT", "c64", b, &lens[i], 1, 3e-6);
    cc_fft("IFFT", "c64", b, &lens[i], 1, 3e-6);
  }
  static const int wide[] = {60, 97, 4096};
  for (size_t i = 0; i < sizeof wide / sizeof *wide; i++)
    cc_fft("FFT", "c128", 2, &wide[i], 1, 1e-12);
}

/* The real kinds at even and odd lengths (Nyquist bin or none), Bluestein's too; 2 and 3 dims
 * (outer axes in place, IRFFT's through its scratch copy), c128. */
Test(cpu_complex, fft_real_and_multi_dim, .timeout = 600) {
  static const int lens[] = {2, 7, 12, 17, 64, 100, 131};
  for (size_t i = 0; i < sizeof lens / sizeof *lens; i++) {
    cc_fft("RFFT", "c64", 3, &lens[i], 1, 3e-6);
    cc_fft("IRFFT", "c64", 3, &lens[i], 1, 3e-6);
  }
  const int d2[] = {17, 12}, d3[] = {6, 5, 9}, d3b[] = {4, 19, 8};
  cc_fft("FFT", "c64", 3, d2, 2, 3e-6);
  cc_fft("IFFT", "c64", 2, d3, 3, 3e-6);
  cc_fft("RFFT", "c64", 2, d3b, 3, 3e-6);
  cc_fft("IRFFT", "c64", 2, d3b, 3, 3e-6);
  cc_fft("IRFFT", "c64", 3, d2, 2, 3e-6);
  cc_fft("RFFT", "c128", 2, d3, 3, 1e-12);
  cc_fft("IRFFT", "c128", 2, d2, 2, 1e-12);
}

/* Two ffts of one operand that differ only in kind or lengths stay two (the optimizer's CSE
 * once merged them, comparing neither fft_type nor fft_length). */
Test(cpu_complex, fft_kinds_of_one_operand_not_merged, .timeout = 300) {
  cc_check("ffts of one operand",
           "HloModule t\nENTRY e {\n  a = c64[5,7,9] parameter(0)\n"
           "  f = c64[5,7,9] fft(a), fft_type=FFT, fft_length={9}\n"
           "  i = c64[5,7,9] fft(a), fft_type=IFFT, fft_length={9}\n"
           "  g = c64[5,7,9] fft(a), fft_type=FFT, fft_length={7,9}\n"
           "  ROOT r = (c64[5,7,9], c64[5,7,9], c64[5,7,9]) tuple(f, i, g)\n}\n",
           3e-6);
}

/* ------------------------------------------------------------------ refusals */

/* Complex values the CPU target does not compute are one located error naming the op. */
Test(cpu_complex, unsupported_ops_are_located_errors) {
  ct_expect_located_error("HloModule t\nadd { a = c64[] parameter(0)\n b = c64[] parameter(1)\n"
                          " ROOT s = c64[] add(a, b) }\nENTRY e {\n  a = c64[8] parameter(0)\n"
                          "  i = s32[2,1] parameter(1)\n  u = c64[2] parameter(2)\n"
                          "  ROOT r = c64[8] scatter(a, i, u), update_window_dims={}, "
                          "inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, "
                          "index_vector_dim=1, to_apply=add\n}\n",
                          "scatter", "complex types (c64, c128) are not supported by this target");
}

#ifdef HLOC_HAVE_CUDA
/* The CUDA target compiles complex values now; what the generator has no complex code for (a
 * sort of complex keys) it refuses with the located error of the support check. */
Test(cpu_complex, cuda_refuses_complex_sort) {
  HModule *m = ct_parse("HloModule t\ncmp {\n  a = c64[] parameter(0)\n  b = c64[] parameter(1)\n"
                        "  ra = f32[] real(a)\n  rb = f32[] real(b)\n"
                        "  ROOT lt = pred[] compare(ra, rb), direction=LT\n}\n"
                        "ENTRY e {\n  a = c64[4] parameter(0)\n"
                        "  ROOT r = c64[4] sort(a), dimensions={0}, to_apply=cmp\n}\n");
  char *dir = ct_tmpdir("hloc_cuda_cplx"), out[600];
  snprintf(out, sizeof out, "%s/m.ptx", dir);
  CudaOpts o = {.name = "m", .out_path = out, .emit = CUDA_EMIT_PTX};
  HErr err = {0};
  cr_expect_not(cuda_compile(m, &o, &err));
  cr_expect(strstr(err.msg, "instruction 'r'") && strstr(err.msg, "CUDA target: sort") &&
                strstr(err.msg, "complex types (c64, c128) are not supported by this target yet"),
            "%s", err.msg);
  hlo_module_free(m);
  ct_rmdir(dir);
  free(dir);
}
#endif
