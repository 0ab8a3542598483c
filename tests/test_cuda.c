/* tests/test_cuda.c: the CUDA target (--target=cuda).
 *
 * Without a GPU (CI): every corpus fixture is optimized and compiled to PTX and through
 * ptxas to a cubin (an ELF image for the requested sm_XX), with a manifest that must be
 * valid JSON listing the steps; the host object + header of a model must compile and link
 * as a user program would (against the toolkit's stub libcuda and libcublas); --stats
 * reports registers; a bad architecture and an unsupported op give located errors; output
 * is deterministic. With a GPU driver and device (dlopen libcuda.so.1 + cuInit succeed),
 * the execution tests build tests/cuda/cuda_driver.c against compiled fixtures, run them
 * and require XLA's outputs to within 1e-4; without one they are reported as skipped
 * (cr_skip_test), never as passed. The full device run of every fixture is
 * tools/cuda_device_test.sh (README). Built without CUDA, every test here skips. */
#define _GNU_SOURCE /* memmem */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cpu/cpu_test_util.h"
#include "hlo.h"
#include "optimizer.h"
#include "proto.h"
#include "target.h"

#ifdef HLOC_HAVE_CUDA

static HModule *tu_load(const char *fixture) {
  char p[1024];
  snprintf(p, sizeof p, HLOC_CORPUS_DIR "/fixtures/%s/module.pb", fixture);
  HErr err = {0};
  HModule *m = proto_load_file(p, &err);
  cr_assert(m, "%s", err.msg);
  cr_assert(hlo_verify(m, &err), "%s", err.msg);
  OptOpts oo = {0};
  cr_assert(opt_optimize(m, &oo, &err), "%s", err.msg);
  return m;
}

/* ------------------------------------------------------------------ a small JSON checker */

typedef struct Js {
  const char *p; /* cursor */
  int depth;     /* nesting */
} Js;

static void js_ws(Js *j) {
  while (*j->p == ' ' || *j->p == '\n' || *j->p == '\t' || *j->p == '\r')
    j->p++;
}

static bool js_value(Js *j);

static bool js_string(Js *j) {
  if (*j->p != '"') return false;
  for (j->p++; *j->p && *j->p != '"'; j->p++) {
    if ((unsigned char)*j->p < 0x20) return false;
    if (*j->p == '\\' && !*++j->p) return false;
  }
  if (*j->p != '"') return false;
  j->p++;
  return true;
}

static bool js_value(Js *j) {
  js_ws(j);
  if (++j->depth > 64) return false;
  bool ok = true;
  if (*j->p == '{' || *j->p == '[') {
    char close = *j->p == '{' ? '}' : ']';
    bool obj = close == '}';
    j->p++;
    js_ws(j);
    if (*j->p == close) {
      j->p++;
    } else {
      for (;;) {
        if (obj) {
          js_ws(j);
          if (!js_string(j)) return false;
          js_ws(j);
          if (*j->p++ != ':') return false;
        }
        if (!js_value(j)) return false;
        js_ws(j);
        if (*j->p == ',') {
          j->p++;
          continue;
        }
        if (*j->p++ != close) return false;
        break;
      }
    }
  } else if (*j->p == '"') {
    ok = js_string(j);
  } else if (*j->p == '-' || (*j->p >= '0' && *j->p <= '9')) {
    char *e;
    strtod(j->p, &e);
    ok = e != j->p;
    j->p = e;
  } else if (!strncmp(j->p, "true", 4) || !strncmp(j->p, "null", 4)) {
    j->p += 4;
  } else if (!strncmp(j->p, "false", 5)) {
    j->p += 5;
  } else {
    ok = false;
  }
  j->depth--;
  return ok;
}

static bool js_valid(const char *text) {
  Js j = {text, 0};
  if (!js_value(&j)) return false;
  js_ws(&j);
  return *j.p == 0;
}

static int tu_count(const char *hay, const char *needle) {
  int n = 0;
  for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
    n++;
  return n;
}

/* ------------------------------------------------------------------ PTX and cubin per fixture */

/* m compiled to kernels (emit: CUDA_EMIT_PTX or CUDA_EMIT_CUBIN) with their manifest (m is
 * freed): the manifest's text, checked to be JSON, and the PTX or cubin in *bin (*n bytes)
 * when bin is given. */
static char *tu_kernels_ex(HModule *m, const char *what, CudaEmit emit, int opt_level,
                           CudaGemmPrologues gp, char **bin, size_t *n) {
  char *d = ct_tmpdir("hloc_cuda");
  char out[600], man[600];
  snprintf(out, sizeof out, "%s/m.%s", d, emit == CUDA_EMIT_PTX ? "ptx" : "cubin");
  snprintf(man, sizeof man, "%s/m.json", d);
  CudaOpts o = {0};
  o.name = "m";
  o.out_path = out;
  o.manifest_path = man;
  o.emit = emit;
  o.opt_level = opt_level;
  o.gemm_prologues = gp;
  HErr err = {0};
  cr_assert(cuda_compile(m, &o, &err), "%s: %s", what, err.msg);
  if (bin) *bin = ct_slurp(out, n);
  char *js = ct_slurp(man, NULL);
  cr_assert(js_valid(js), "%s: manifest is not valid JSON", what);
  ct_rmdir(d);
  free(d);
  hlo_module_free(m);
  return js;
}

static char *tu_kernels(HModule *m, const char *what, CudaEmit emit, int opt_level, char **bin,
                        size_t *n) {
  return tu_kernels_ex(m, what, emit, opt_level, CUDA_PROLOGUES_AUTO, bin, n);
}

static void tu_fixture_cubin(const char *fixture) {
  size_t n = 0;
  char *bin;
  char *js = tu_kernels(tu_load(fixture), fixture, CUDA_EMIT_CUBIN, 3, &bin, &n);
  cr_assert(n > 64 && !memcmp(bin,
                              "\x7f"
                              "ELF",
                              4),
            "%s: the cubin is not an ELF image", fixture);
  cr_expect(strstr(js, "\"arch\": \"sm_90\""), "%s: manifest arch", fixture);
  cr_expect_gt(tu_count(js, "\"kind\": \"kernel\""), 0, "%s: no kernel in the manifest", fixture);
  /* every kernel of the manifest is a symbol of the cubin */
  for (const char *p = js; (p = strstr(p, "\"kind\": \"kernel\", \"name\": \"")); p++) {
    char name[128];
    const char *s = p + 28;
    size_t l = strcspn(s, "\"");
    snprintf(name, sizeof name, "%.*s", (int)l, s);
    cr_expect(memmem(bin, n, name, strlen(name)), "%s: kernel %s missing from the cubin", fixture,
              name);
  }
  free(bin);
  free(js);
}

#define FIXTURE_TEST(f)                                                                            \
  Test(cuda_ptx, f) { tu_fixture_cubin(#f); }
FIXTURE_TEST(elementwise_chain)
FIXTURE_TEST(mlp)
FIXTURE_TEST(frozen_mlp)
FIXTURE_TEST(simple_cnn)
FIXTURE_TEST(transformer_layer)
FIXTURE_TEST(resnet_block)
FIXTURE_TEST(resnet18)
FIXTURE_TEST(bert_base)
FIXTURE_TEST(simple_cnn_train_step)
FIXTURE_TEST(llama_layer_bf16)
FIXTURE_TEST(llama_decode_bf16)

/* bf16 dots run on the tensor cores through cuBLAS with f32 accumulation: a bf16 result
 * rounded once (CUDA_R_16BF C), a preferred f32 result kept f32; none is a loop kernel; the two
 * whose fusion adds the residual stream run through cuBLASLt, the residual as C (beta 1). The
 * decode step's key cache ([batch, seq, kv_heads, dim], batch dims 0 and 2) is read in place,
 * one strided-batched call per sequence, not staged; the value cache, which the product reads
 * transposed, is staged (one call) through shared-memory tiles. */
Test(cuda_ptx, bf16_dots_through_cublas) {
  static const char *const fx[] = {"llama_layer_bf16", "llama_decode_bf16"};
  static const int calls[] = {7, 8}, bf16_out[] = {8, 8}, f32_out[] = {1, 2}, stages[] = {10, 9};
  for (int f = 0; f < 2; f++) {
    size_t n = 0;
    char *bin;
    char *js = tu_kernels(tu_load(fx[f]), fx[f], CUDA_EMIT_CUBIN, 3, &bin, &n);
    free(bin);
    cr_expect_eq(tu_count(js, "\"kind\": \"gemm\", \"function\": \"cublasGemmStridedBatchedEx\""),
                 calls[f], "%s: %s", fx[f], js);
    /* the attention output and down projections take their residual adds as cuBLASLt's C */
    cr_expect_eq(tu_count(js, "\"kind\": \"gemm\", \"function\": \"cublasLtMatmul\""), 2, "%s",
                 fx[f]);
    cr_expect_eq(tu_count(js, "\"beta\": 1, "), 2, "%s", fx[f]);
    cr_expect_eq(tu_count(js, "\"epilogue\": \"residual\", "), 2, "%s", fx[f]);
    cr_expect_eq(tu_count(js, "\"type\": \"CUDA_R_16BF\", \"type_c\": \"CUDA_R_16BF\", "
                              "\"compute\": \"CUBLAS_COMPUTE_32F\""),
                 bf16_out[f], "%s: bf16 x bf16 -> bf16 products", fx[f]);
    cr_expect_eq(tu_count(js, "\"type\": \"CUDA_R_16BF\", \"type_c\": \"CUDA_R_32F\""), f32_out[f],
                 "%s: the scores, bf16 x bf16 -> f32", fx[f]);
    cr_expect_eq(tu_count(js, "\"shape\": \"stage"), stages[f], "%s: staged operands", fx[f]);
    /* the rotary-embedded keys, the values and the probabilities are read across their minor
     * dim: staged through shared-memory tiles */
    cr_expect_eq(tu_count(js, "\"shape\": \"stage-tiled\""), 3, "%s: tiled staging", fx[f]);
    free(js);
  }
}

/* ------------------------------------------------------------------ PTX text, stats, determinism
 */

static char *tu_ptx(const char *fixture, const char *arch, FILE *stats, size_t *len) {
  HModule *m = tu_load(fixture);
  char *d = ct_tmpdir("hloc_cuda");
  char out[600];
  snprintf(out, sizeof out, "%s/m.ptx", d);
  CudaOpts o = {0};
  o.name = "m";
  o.out_path = out;
  o.emit = CUDA_EMIT_PTX;
  o.gpu_arch = arch;
  o.opt_level = 3;
  o.stats = stats;
  HErr err = {0};
  cr_assert(cuda_compile(m, &o, &err), "%s", err.msg);
  char *t = ct_slurp(out, len);
  ct_rmdir(d);
  free(d);
  hlo_module_free(m);
  return t;
}

Test(cuda_ptx, text_math_and_determinism) {
  size_t n1, n2;
  char *a = tu_ptx("transformer_layer", NULL, NULL, &n1);
  cr_expect(strstr(a, ".target sm_90"), "PTX target");
  cr_expect(strstr(a, ".entry m_k0("), "first kernel");
  cr_expect(strstr(a, "shfl.sync.down"), "row reductions use warp shuffles");
  /* libdevice is linked in and inlined: no external function remains */
  cr_expect_null(strstr(a, ".extern .func"), "unresolved math function in the PTX");
  char *b = tu_ptx("transformer_layer", NULL, NULL, &n2);
  cr_expect(n1 == n2 && !memcmp(a, b, n1), "PTX differs between two compilations");
  free(a);
  free(b);
}

Test(cuda_ptx, elementwise_fusion_uses_128_bit_accesses) {
  /* f32[1000]: tanh((x + 1) * 2), one loop fusion; 1000 is a multiple of 4 */
  char *t = tu_ptx("elementwise_chain", NULL, NULL, NULL);
  /* the argument is only read and overlaps no written buffer: readonly noalias, so its loads
     take the non-coherent (read-only) cache path */
  cr_expect(strstr(t, "ld.global.nc.v4.f32"), "vector load missing:\n%s", t);
  cr_expect(strstr(t, "st.global.v4.f32"), "vector store missing");
  /* the unaligned fallback loop is there too: scalar accesses of the same buffers */
  cr_expect(strstr(t, "ld.global.nc.f32"), "scalar fallback load missing");
  cr_expect(strstr(t, "st.global.f32"), "scalar fallback store missing");
  free(t);
}

Test(cuda_ptx, other_arch_and_stats) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  char *t = tu_ptx("simple_cnn", "sm_80", f, NULL);
  fclose(f);
  cr_expect(strstr(t, ".target sm_80"));
  cr_expect(strstr(buf, "regs "), "stats lack register counts: %s", buf);
  cr_expect(strstr(buf, "m_k0"), "stats lack the kernels: %s", buf);
  free(t);
  free(buf);
}

Test(cuda_ptx, bad_arch_is_a_located_error) {
  HModule *m = tu_load("elementwise_chain");
  char *d = ct_tmpdir("hloc_cuda");
  char out[600];
  snprintf(out, sizeof out, "%s/m.cubin", d);
  CudaOpts o = {0};
  o.name = "m";
  o.out_path = out;
  o.emit = CUDA_EMIT_CUBIN;
  o.gpu_arch = "sm_1"; /* below the oldest GPU supported */
  HErr err = {0};
  cr_expect_not(cuda_compile(m, &o, &err));
  cr_expect(strstr(err.msg, "CUDA target") && strstr(err.msg, "sm_XX"), "%s", err.msg);
  o.gpu_arch = "compute_90";
  err = (HErr){0};
  cr_expect_not(cuda_compile(m, &o, &err));
  cr_expect(strstr(err.msg, "sm_XX"), "%s", err.msg);
  o.gpu_arch = "sm_95"; /* well-formed, but ptxas knows no such GPU */
  err = (HErr){0};
  cr_expect_not(cuda_compile(m, &o, &err));
  cr_expect(strstr(err.msg, "ptxas"), "%s", err.msg);
  cr_expect(access(out, F_OK) != 0, "a failed compilation left a file");
  ct_rmdir(d);
  free(d);
  hlo_module_free(m);
}

/* fp8 through the shared elemental generator (f32 in registers, bytes in memory): a dot of
 * f8e4m3fn and f8e5m2 operands with an f32 epilogue converted to fp8, and fp8 arithmetic,
 * compile to PTX and through ptxas. */
Test(cuda_ptx, fp8_module_compiles) {
  static const char text[] =
      "HloModule fp8m\n"
      "ENTRY e {\n"
      "  x = f8e4m3fn[64,32] parameter(0)\n  y = f8e5m2[32,16] parameter(1)\n  s = f32[64] "
      "parameter(2)\n"
      "  d = f32[64,16] dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
      "  sb = f32[64,16] broadcast(s), dimensions={0}\n  m = f32[64,16] multiply(d, sb)\n"
      "  q = f8e4m3fn[64,16] convert(m)\n  a = f8e4m3fn[64,32] add(x, x)\n"
      "  ROOT t = (f8e4m3fn[64,16], f8e4m3fn[64,32]) tuple(q, a)\n"
      "}\n";
  HErr err = {0};
  HModule *m = hlo_parse_text(text, sizeof text - 1, "fp8.hlo", &err);
  cr_assert(m && hlo_verify(m, &err), "%s", err.msg);
  OptOpts oo = {0};
  cr_assert(opt_optimize(m, &oo, &err), "%s", err.msg);
  size_t n = 0;
  char *bin;
  char *js = tu_kernels(m, "fp8", CUDA_EMIT_CUBIN, 2, &bin, &n);
  cr_expect(n > 64 && !memcmp(bin,
                              "\x7f"
                              "ELF",
                              4),
            "the cubin is not an ELF image");
  cr_expect_geq(tu_count(js, "\"kind\": \"kernel\""), 2, "%s", js);
  free(bin);
  free(js);
}

Test(cuda_ptx, unsupported_op_is_a_located_error) {
  static const char text[] = "HloModule s\n"
                             "ENTRY e { a = f32[] parameter(0)\n b = f32[] parameter(1)\n"
                             " ROOT s = f32[8]{0} rng(a, b), distribution=rng_uniform }\n";
  HErr err = {0};
  HModule *m = hlo_parse_text(text, sizeof text - 1, "rng.hlo", &err);
  cr_assert(m, "%s", err.msg);
  CudaOpts o = {0};
  o.name = "m";
  o.out_path = "/nonexistent/m.ptx";
  o.emit = CUDA_EMIT_PTX;
  cr_expect_not(cuda_compile(m, &o, &err));
  cr_expect(strstr(err.msg, "rng.hlo") && strstr(err.msg, "CUDA target") && strstr(err.msg, "'s'"),
            "%s", err.msg);
  hlo_module_free(m);
}

/* A sort (topk's stable sort of values and indices, rows of 50000) is one initializing kernel,
 * the bitonic network's 136 stages (rows padded to 65536 slots: 16 x 17 / 2) launching one
 * shared kernel with their (k, j), and a gathering kernel. */
Test(cuda_ptx, sort_as_a_bitonic_network) {
  HErr err = {0};
  HModule *m = proto_load_file(HLOC_TEST_DIR "/cuda/cases/topk_long_rows.hlo", &err);
  cr_assert(m && hlo_verify(m, &err), "%s", err.msg);
  OptOpts oo = {0};
  cuda_optimizer_options(&oo, CUDA_PRECISION_HIGHEST);
  cr_assert(opt_optimize(m, &oo, &err), "%s", err.msg);
  char *js = tu_kernels(m, "topk_long_rows", CUDA_EMIT_PTX, 3, NULL, NULL);
  cr_expect_eq(tu_count(js, "\"shape\": \"sort-init\""), 1, "%s", js);
  cr_expect_eq(tu_count(js, "\"shape\": \"sort-stage\""), 136, "%s", js);
  cr_expect_eq(tu_count(js, "\"shape\": \"sort-gather\""), 1, "%s", js);
  const char *first = strstr(js, "\"shape\": \"sort-stage\"");
  cr_assert(first);
  const char *name = strstr(first - 80 > js ? first - 80 : js, "\"name\": \"");
  cr_assert(name);
  char kname[64] = {0};
  sscanf(name, "\"name\": \"%63[^\"]", kname);
  char want[128];
  snprintf(want, sizeof want, "\"name\": \"%s\", \"shape\": \"sort-stage\"", kname);
  cr_expect_eq(tu_count(js, want), 136, "every stage launches %s", kname);
  free(js);
}

/* While loops run as steps the host walks: a data-dependent one (Newton's square root) tests its
 * predicate read back from the device, then jumps back; a counted loop whose trips run a
 * product stays a loop and counts on the host, without a condition kernel; the scanned weights
 * are read in place (no copy of the [64, 128] weight or the [16, 4, 32] inputs into the state),
 * the outputs and the state updated in place (no copy in a trip), and the counter starts from a
 * constant (a memset). */
Test(cuda_ptx, while_loops_as_host_driven_steps) {
  HErr err = {0};
  HModule *m = proto_load_file(HLOC_TEST_DIR "/xla_cases/while_newton/module.hlo", &err);
  cr_assert(m && hlo_verify(m, &err), "%s", err.msg);
  OptOpts oo = {0};
  cuda_optimizer_options(&oo, CUDA_PRECISION_HIGHEST);
  cr_assert(opt_optimize(m, &oo, &err), "%s", err.msg);
  char *js = tu_kernels(m, "while_newton", CUDA_EMIT_PTX, 3, NULL, NULL);
  cr_expect_eq(tu_count(js, "\"kind\": \"exit_unless\""), 1, "%s", js);
  cr_expect_eq(tu_count(js, "\"kind\": \"jump\""), 1, "%s", js);
  cr_expect_eq(tu_count(js, "\"kind\": \"count\""), 0, "%s", js);
  free(js);
  m = proto_load_file(HLOC_TEST_DIR "/cuda/cases/while_lstm_scan.hlo", &err);
  cr_assert(m && hlo_verify(m, &err), "%s", err.msg);
  cr_assert(opt_optimize(m, &oo, &err), "%s", err.msg);
  js = tu_kernels(m, "while_lstm_scan", CUDA_EMIT_PTX, 3, NULL, NULL);
  cr_expect_eq(tu_count(js, "\"kind\": \"count\", \"counter\": 0, \"trips\": 16"), 1, "%s", js);
  cr_expect_eq(tu_count(js, "\"kind\": \"exit_after\""), 1, "%s", js);
  cr_expect_eq(tu_count(js, "\"kind\": \"exit_unless\""), 0, "%s", js);
  cr_expect_eq(tu_count(js, "\"kind\": \"copy_constant\""), 1, "%s", js);
  cr_expect_eq(tu_count(js, "\"kind\": \"copy\", \"bytes\": 32768"), 0, "%s", js);
  /* the outputs' zeros into the state, and the state's outputs into the result: none per trip */
  cr_expect_eq(tu_count(js, "\"kind\": \"copy\", \"bytes\": 8192"), 2, "%s", js);
  /* no copy in a trip: c2 computed in place of c, h2 into h's place (h read before by the dot) */
  const char *trip = strstr(js, "\"kind\": \"exit_after\""),
             *back = strstr(js, "\"kind\": \"jump\"");
  cr_assert(trip && back && trip < back, "%s", js);
  char *body = strndup(trip, (size_t)(back - trip));
  cr_expect_eq(tu_count(body, "\"kind\": \"copy\""), 0, "%s", body);
  free(body);
  free(js);
}

/* Scatter applies its updates in parallel where their order cannot matter: an adding combiner by
 * atomic adds, a maximum or a product by a compare-and-swap loop, declared-unique indices by
 * plain stores; a variadic scatter stays on one thread. */
Test(cuda_ptx, scatters_in_parallel) {
  static const struct {
    const char *c, *kind, *atom;
    int n;
  } cases[] = {{"scatter_add_rows", "scatter-par", "atom.global.add.f32", 1},
               {"scatter_max_mul", "scatter-par", "atom.global.cas.b32", 2},
               {"scatter_set_unique", "scatter-par", NULL, 1},
               {"scatter_variadic", "scatter", NULL, 1}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char path[512], kind[64];
    snprintf(path, sizeof path, HLOC_TEST_DIR "/cuda/cases/%s.hlo", cases[i].c);
    HErr err = {0};
    HModule *m = proto_load_file(path, &err);
    cr_assert(m && hlo_verify(m, &err), "%s", err.msg);
    char *ptx;
    size_t n;
    char *js = tu_kernels(m, cases[i].c, CUDA_EMIT_PTX, 3, &ptx, &n);
    snprintf(kind, sizeof kind, "\"shape\": \"%s\"", cases[i].kind);
    cr_expect_eq(tu_count(js, kind), cases[i].n, "%s: %s", cases[i].c, js);
    cr_expect_eq(tu_count(ptx, "atom.global.cas") + tu_count(ptx, "atom.global.add"),
                 cases[i].atom ? cases[i].n : 0, "%s", cases[i].c);
    if (cases[i].atom)
      cr_expect(strstr(ptx, cases[i].atom), "%s: no %s", cases[i].c, cases[i].atom);
    free(js);
    free(ptx);
  }
}

/* ------------------------------------------------------------------ host object and header */

static char *tu_object(const char *fixture, const char *name, char **dir_out) {
  HModule *m = tu_load(fixture);
  char *d = ct_tmpdir("hloc_cuda");
  char obj[600], hdr[600];
  snprintf(obj, sizeof obj, "%s/%s.o", d, name);
  snprintf(hdr, sizeof hdr, "%s/%s.h", d, name);
  CudaOpts o = {0};
  o.name = name;
  o.out_path = obj;
  o.header_path = hdr;
  o.emit = CUDA_EMIT_OBJ;
  o.opt_level = 3;
  HErr err = {0};
  cr_assert(cuda_compile(m, &o, &err), "%s", err.msg);
  hlo_module_free(m);
  *dir_out = d;
  return d;
}

#define TU_LIBS                                                                                    \
  "-L" HLOC_CUDA_HOME "/lib64/stubs -lcuda -L" HLOC_CUDA_HOME "/lib64 -L" HLOC_CUDA_HOME           \
  "/lib -lcublas -lcublasLt -lcudnn -lcufft -lpthread -lm"

Test(cuda_host, header_and_object_link_as_a_user_program) {
  char *d;
  tu_object("mlp", "model", &d);
  char hp[700];
  snprintf(hp, sizeof hp, "%s/model.h", d);
  char *h = ct_slurp(hp, NULL);
  cr_expect(strstr(h, "#define MODEL_TEMP_BYTES "));
  cr_expect(strstr(h, "int model_cuda_run(const void *const args[], void *const results[], void "
                      "*temp, CUstream s);"));
  cr_expect(strstr(h, "-lcublas"), "mlp's dots go through cuBLAS");
  free(h);
  char src[700], cmd[4096];
  snprintf(src, sizeof src, "%s/user.c", d);
  FILE *f = fopen(src, "w");
  cr_assert(f);
  /* cuda.h first, then the model header: the CUstream declarations must agree */
  fputs("#include <cuda.h>\n#include \"model.h\"\n#include <stdio.h>\n"
        "int main(void) {\n"
        "  printf(\"%d %d %lld %s\\n\", MODEL_NUM_ARGS, MODEL_NUM_RESULTS, (long "
        "long)MODEL_TEMP_BYTES,\n"
        "         model_arg_info[0].dtype);\n"
        "  return MODEL_NUM_ARGS > 0 ? 0 : model_cuda_run(0, 0, 0, (CUstream)0) + "
        "model_cuda_init();\n"
        "}\n",
        f);
  fclose(f);
  snprintf(cmd, sizeof cmd,
           "cc -std=c11 -Wall -Werror -I'%s' -I" HLOC_CUDA_HOME
           "/include '%s' '%s/model.o' " TU_LIBS " -o '%s/user'"
           " && c++ -x c++ -fsyntax-only -Wall -Werror -I'%s' -include model.h /dev/null",
           d, src, d, d, d);
  cr_expect_eq(system(cmd), 0, "%s", cmd);
  ct_rmdir(d);
  free(d);
}

/* path compiled to an object (graphs: --cuda-graphs) with its manifest: the manifest's count
 * of launches a graph replays, and whether the object calls each of the n symbols in sym
 * (bit i of *calls). */
static long long tu_graph_object(const char *path, CudaGraphs graphs, const char *const *sym, int n,
                                 unsigned *calls) {
  HErr err = {0};
  HModule *m = proto_load_file(path, &err);
  cr_assert(m && hlo_verify(m, &err), "%s", err.msg);
  OptOpts oo = {0};
  cuda_optimizer_options(&oo, CUDA_PRECISION_HIGHEST);
  cr_assert(opt_optimize(m, &oo, &err), "%s", err.msg);
  char *d = ct_tmpdir("hloc_cuda");
  char obj[600], man[600], cmd[1400];
  snprintf(obj, sizeof obj, "%s/m.o", d);
  snprintf(man, sizeof man, "%s/m.json", d);
  CudaOpts o = {.name = "m", .out_path = obj, .manifest_path = man, .emit = CUDA_EMIT_OBJ};
  o.opt_level = 3, o.graphs = graphs;
  cr_assert(cuda_compile(m, &o, &err), "%s: %s", path, err.msg);
  hlo_module_free(m);
  char *js = ct_slurp(man, NULL);
  const char *g = strstr(js, "\"graph_launches\": ");
  cr_assert(g, "%s", js);
  long long launches = atoll(g + strlen("\"graph_launches\": "));
  free(js);
  *calls = 0;
  for (int i = 0; i < n; i++) {
    snprintf(cmd, sizeof cmd, "nm -u %s | grep -qw %s", obj, sym[i]);
    if (system(cmd) == 0) *calls |= 1u << i;
  }
  ct_rmdir(d);
  free(d);
  return launches;
}

/* A counted loop's steps are replayed as a CUDA graph: the LSTM scan's 16 trips of at least
 * five launches each, captured from the steps (cuStreamBeginCapture_v2, cuGraphLaunch), its
 * counter's start set by a memset (no pageable copy, which a capture refuses). A loop whose exit
 * test reads the device back, and --cuda-graphs=off, launch step by step. */
Test(cuda_host, counted_loops_replayed_as_a_graph) {
  static const char *const sym[] = {"cuGraphLaunch", "cuStreamBeginCapture_v2", "cuMemsetD32Async",
                                    "cuMemcpyHtoDAsync_v2"};
  unsigned calls;
  const char *lstm = HLOC_TEST_DIR "/cuda/cases/while_lstm_scan.hlo";
  long long n = tu_graph_object(lstm, CUDA_GRAPHS_AUTO, sym, 4, &calls);
  cr_expect_gt(n, 16 * 5, "%lld launches", n);
  cr_expect_eq(calls, 7u, "calls %x", calls);
  cr_expect_eq(tu_graph_object(lstm, CUDA_GRAPHS_OFF, sym, 4, &calls), 0);
  cr_expect_eq(calls, 4u, "calls %x", calls);
  const char *newton = HLOC_TEST_DIR "/xla_cases/while_newton/module.hlo";
  cr_expect_eq(tu_graph_object(newton, CUDA_GRAPHS_AUTO, sym, 4, &calls), 0);
  cr_expect_eq(calls & 3u, 0u, "calls %x", calls);
}

/* Convolutions go to cuDNN: resnet_block's three convolutions are conv steps in the manifest
 * with the NHWC/KRSC layouts and FMA math at the default precision, TEMP_BYTES covers the
 * workspace, and the header of a model with convolutions asks for -lcudnn and links. */
Test(cuda_host, convolutions_through_cudnn) {
  char *js = tu_kernels(tu_load("resnet_block"), "resnet_block", CUDA_EMIT_PTX, 0, NULL, NULL);
  cr_expect_eq(tu_count(js, "\"kind\": \"conv\""), 3, "resnet_block has three convolutions");
  cr_expect_eq(tu_count(js, "\"math\": \"CUDNN_FMA_MATH\""), 3);
  cr_expect_eq(tu_count(js, "\"filter_layout\": \"KRSC\""), 3);
  const char *tb = strstr(js, "\"temp_bytes\": "), *wb = strstr(js, "\"workspace_bytes\": ");
  cr_assert(tb && wb);
  cr_expect_geq(atoll(tb + 14), atoll(wb + 19), "temp covers the workspace");
  cr_expect_geq(atoll(wb + 19), 64ll << 20, "at least 64 MiB of cuDNN workspace");
  free(js);
  char *d2;
  tu_object("simple_cnn", "model", &d2);
  char hp[700];
  snprintf(hp, sizeof hp, "%s/model.h", d2);
  char *h = ct_slurp(hp, NULL);
  cr_expect(strstr(h, "#define MODEL_CUDA_LIBS \"-lcuda -lcublas -lcudnn\""),
            "simple_cnn: cuBLAS and cuDNN (its f32 classifier's bias stays an epilogue kernel)");
  free(h);
  char cmd[2048];
  snprintf(
      cmd, sizeof cmd,
      "printf 'int model_cuda_init(void);\\nint main(void){return model_cuda_init() * 0;}\\n' | "
      "cc -x c - -x none '%s/model.o' " TU_LIBS " -o '%s/user'",
      d2, d2);
  cr_expect_eq(system(cmd), 0, "%s", cmd);
  ct_rmdir(d2);
  free(d2);
}

/* The layers of a deep model compile once: bert_base's kernel steps launch fewer distinct
 * kernels than there are steps, and every launched name is one the PTX defines. */
Test(cuda_ptx, identical_kernels_generated_once) {
  char *text;
  char *js = tu_kernels(tu_load("bert_base"), "bert_base", CUDA_EMIT_PTX, 0, &text, NULL);
  int steps = tu_count(js, "\"kind\": \"kernel\"");
  int entries = tu_count(text, ".entry ");
  cr_expect_gt(entries, 0);
  cr_expect_lt(entries, steps, "%d kernels for %d kernel steps: nothing shared", entries, steps);
  const char *needle = "\"kind\": \"kernel\", \"name\": \"";
  for (const char *p = js; (p = strstr(p, needle)); p++) {
    char name[160];
    const char *s = p + strlen(needle);
    snprintf(name, sizeof name, ".entry %.*s(", (int)strcspn(s, "\""), s);
    cr_expect(strstr(text, name), "%s launched but not defined", name);
  }
  free(js);
  free(text);
}

/* ------------------------------------------------------------------ kernel shapes of
 * tests/cuda/cases */

/* The manifest of tests/cuda/cases/NAME.hlo compiled with the target's optimizer options
 * (cuda_optimizer_options) and the given conv layout. */
/* tests/cuda/cases/NAME.hlo loaded, verified and optimized for the CUDA target. */
static HModule *tu_case_module(const char *name, OptConvLayout layout) {
  char p[1024];
  snprintf(p, sizeof p, HLOC_TEST_DIR "/cuda/cases/%s.hlo", name);
  HErr err = {0};
  HModule *m = proto_load_file(p, &err);
  cr_assert(m && hlo_verify(m, &err), "%s", err.msg);
  OptOpts oo = {0};
  cuda_optimizer_options(&oo, CUDA_PRECISION_HIGHEST);
  oo.conv_layout = layout;
  cr_assert(opt_optimize(m, &oo, &err), "%s", err.msg);
  return m;
}

static char *tu_case_manifest(const char *name, OptConvLayout layout) {
  return tu_kernels(tu_case_module(name, layout), name, CUDA_EMIT_CUBIN, 3, NULL, NULL);
}

/* hloc run on tests/cuda/cases/NAME.hlo as a user would (--target=cuda --stats, -o DIR/m.o
 * --name m, then flags): its --stats text and the generated header (malloc'd); the folder
 * (*dir, to ct_rmdir and free) keeps the object. */
static void tu_case_cli(const char *name, const char *flags, char **stats, char **header,
                        char **dir) {
  char *d = ct_tmpdir("hloc_cuda"), out[700], cmd[2048];
  snprintf(cmd, sizeof cmd,
           "'" HLOC_BIN_DIR "/hloc' '" HLOC_TEST_DIR
           "/cuda/cases/%s.hlo' --target=cuda --stats -o '%s/m.o' --name m %s > "
           "'%s/stats.txt' 2>&1",
           name, d, flags, d);
  cr_assert_eq(system(cmd), 0, "%s", cmd);
  snprintf(out, sizeof out, "%s/stats.txt", d);
  *stats = ct_slurp(out, NULL);
  snprintf(out, sizeof out, "%s/m.h", d);
  *header = ct_slurp(out, NULL);
  *dir = d;
}

Test(cuda_ptx, long_reductions_split_over_blocks) {
  /* 64 outputs of 16384 elements: each output's elements over several blocks, then a
     finishing kernel; rows (NCHW statistics) and columns (NHWC statistics) */
  for (int l = 0; l < 2; l++) {
    char *js = tu_case_manifest("bn_stats_nchw", (OptConvLayout)l);
    cr_expect_eq(tu_count(js, "\"shape\": \"split-reduce\""), 1, "%s", js);
    cr_expect_eq(tu_count(js, "\"shape\": \"split-finish\""), 1);
    free(js);
    js = tu_case_manifest("bn_stats_nhwc", (OptConvLayout)l);
    cr_expect_eq(tu_count(js, "\"shape\": \"split-col-reduce\""), 1, "%s", js);
    cr_expect_eq(tu_count(js, "\"shape\": \"split-finish\""), 1);
    free(js);
  }
  char *js = tu_case_manifest("column_max", OPT_CONV_NHWC);
  cr_expect_eq(tu_count(js, "\"shape\": \"col-reduce\""), 1, "%s", js);
  free(js);
}

Test(cuda_ptx, weight_gradients_through_backward_filter) {
  static const char *const cases[] = {"weight_gradient", "strided_weight_gradient"};
  for (int c = 0; c < 2; c++)
    for (int l = 0; l < 2; l++) {
      char *js = tu_case_manifest(cases[c], (OptConvLayout)l);
      cr_expect_eq(tu_count(js, "\"function\": \"cudnnConvolutionBackwardFilter\""), 1, "%s %d: %s",
                   cases[c], l, js);
      cr_expect_eq(tu_count(js, "\"function\": \"cudnnConvolutionForward\""), 0);
      cr_expect(strstr(js, l ? "\"layout\": \"NCHW\"" : "\"layout\": \"NHWC\""));
      free(js);
    }
}

/* s8 x s8 -> s32 dots on the integer tensor cores, every call TN (both operands K-contiguous;
 * run on a GPU against the interpreter by tools/cuda_device_test.sh); f16 dots likewise. */
Test(cuda_ptx, integer_and_f16_dots_through_cublas) {
  char *js = tu_case_manifest("dot_s8", OPT_CONV_NHWC);
  cr_expect_eq(tu_count(js, "\"type\": \"CUDA_R_8I\", \"type_c\": \"CUDA_R_32I\", \"compute\": "
                            "\"CUBLAS_COMPUTE_32I\", "
                            "\"transa\": \"T\", \"transb\": \"N\""),
               3, "%s", js);
  free(js);
  js = tu_case_manifest("dot_f16", OPT_CONV_NHWC);
  cr_expect_eq(tu_count(js, "\"type\": \"CUDA_R_16F\", \"type_c\": \"CUDA_R_16F\""), 1, "%s", js);
  cr_expect_eq(tu_count(js, "\"type\": \"CUDA_R_16F\", \"type_c\": \"CUDA_R_32F\""), 1, "%s", js);
  free(js);
}

/* f8e4m3fn dots through cuBLASLt (f32, f16 and bf16 results, batched, 5 and 1 rows; every
 * call TN), and an f8e4m3fn x f8e5m2 one; an f8e5m2 x f8e5m2 dot, which cuBLASLt has no kernel for,
 * a loop kernel that --stats names; the header asks for -lcublasLt (run on a GPU against the
 * interpreter by tools/cuda_device_test.sh). */
Test(cuda_ptx, fp8_dots_through_cublaslt) {
  char *js = tu_case_manifest("dot_fp8", OPT_CONV_NHWC);
  cr_expect_eq(tu_count(js, "\"function\": \"cublasLtMatmul\", \"type_a\": \"CUDA_R_8F_E4M3\", "
                            "\"type\": \"CUDA_R_8F_E4M3\""),
               5, "%s", js);
  /* (A is the dot's rhs in cuBLAS's column-major terms) */
  cr_expect_eq(tu_count(js, "\"type_a\": \"CUDA_R_8F_E5M2\", \"type\": \"CUDA_R_8F_E4M3\""), 1,
               "%s", js);
  cr_expect_eq(tu_count(js, "\"transa\": \"T\", \"transb\": \"N\""), 6, "%s", js);
  cr_expect_eq(tu_count(js, "\"type_c\": \"CUDA_R_16BF\""), 3, "%s", js);
  cr_expect_eq(tu_count(js, "\"kind\": \"gemm\""), 6, "%s", js);
  free(js);
  char *d, *st, *h;
  tu_case_cli("dot_fp8", "", &st, &h, &d);
  cr_expect(strstr(st, "6 cuBLASLt fp8 GEMMs"), "%s", st);
  cr_expect(strstr(st, "products as loop kernels (no cuBLAS, cuBLASLt or cuDNN path for their "
                       "type or form) 1: e5"),
            "%s", st);
  free(st);
  cr_expect(strstr(h, "#define M_CUDA_LIBS \"-lcuda -lcublasLt\""), "%s", h);
  free(h);
  ct_rmdir(d);
  free(d);
}

/* ------------------------------------------------------------------ fused GEMM epilogues */

/* A manifest substring and how often it occurs. */
typedef struct TuCount {
  const char *what;
  int n;
} TuCount;

static void tu_expect_counts(const char *name, const char *js, const TuCount *c) {
  for (; c->what; c++)
    cr_expect_eq(tu_count(js, c->what), c->n, "%s: %d x %s in %s", name, tu_count(js, c->what),
                 c->what, js);
}

/* Bias, residual and ReLU epilogues of dots computed in cuBLASLt's GEMM
 * (cuda_gemm_epilogue.c), in bf16 and f16 (f32 products keep their epilogue kernels): each fused
 * GEMM with its epilogue mode, beta 1 where a residual is C, the bias in D's type, a bias that is
 * an expression staged first, and every epilogue kernel kept as the fallback of its GEMM; the
 * products a final convert rounds back to bf16/f16 write D in the 16-bit type (their fallback keeps
 * the f32 product). Run on a GPU against the interpreter by tools/cuda_device_test.sh. */
Test(cuda_ptx, gemm_epilogues_through_cublaslt) {
  /* f32 products keep cublasGemmEx and their epilogue kernels (measured faster) */
  static const TuCount f32[] = {
      {"\"kind\": \"gemm\", \"function\": \"cublasLtMatmul\"", 0},
      {"\"kind\": \"gemm\", \"function\": \"cublasGemmStridedBatchedEx\"", 6},
      {"\"shape\": \"epilogue", 6},
      {"\"epilogue\": ", 0},
      {"\"fallback_for\": ", 0},
      {NULL, 0}};
  static const TuCount bf16[] = {
      {"\"kind\": \"gemm\", \"function\": \"cublasLtMatmul\"", 5},
      {"\"epilogue\": \"bias+relu\",", 2},
      {"\"epilogue\": \"bias+residual\",", 1},
      {"\"epilogue\": \"bias+residual+relu\",", 2},
      {"\"beta\": 1,", 3},
      {"\"type\": \"CUDA_R_16BF\", \"type_c\": \"CUDA_R_16BF\", \"compute\": "
       "\"CUBLAS_COMPUTE_32F\"",
       4},
      {"\"bias_type\": \"CUDA_R_16BF\"", 4},
      {"\"bias_type\": \"CUDA_R_32F\"", 1},
      /* the bf16 x bf16 -> f32 product, and the one converted back to bf16 */
      {"\"unfused\": {\"function\": \"cublasGemmStridedBatchedEx\", \"type_c\": \"CUDA_R_32F\"", 2},
      {"\"shape\": \"stage-bias\"", 0},
      {"\"fallback_for\": ", 5},
      {NULL, 0}};
  static const TuCount f16[] = {{"\"kind\": \"gemm\", \"function\": \"cublasLtMatmul\"", 4},
                                {"\"epilogue\": \"bias+relu\",", 2},
                                {"\"epilogue\": \"bias+residual\",", 1},
                                {"\"epilogue\": \"residual\",", 1},
                                {"\"cublaslt_epilogue\": \"CUBLASLT_EPILOGUE_DEFAULT\"", 1},
                                {"\"bias_type\": \"CUDA_R_16F\"", 3},
                                {"\"type\": \"CUDA_R_16F\", \"type_c\": \"CUDA_R_32F\"", 1},
                                {"\"fallback_for\": ", 4},
                                {NULL, 0}};
  static const struct {
    const char *name;
    const TuCount *c;
  } cases[] = {
      {"gemm_epilogue_f32", f32}, {"gemm_epilogue_bf16", bf16}, {"gemm_epilogue_f16", f16}};
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    char *js = tu_case_manifest(cases[c].name, OPT_CONV_NHWC);
    tu_expect_counts(cases[c].name, js, cases[c].c);
    free(js);
  }
}

/* Epilogues cuBLASLt cannot take (a bias along the rows, a multiply, a residual of another
 * type) stay a cuBLAS GEMM and an epilogue kernel, which runs always. */
Test(cuda_ptx, gemm_epilogues_left_to_kernels) {
  static const TuCount unfused[] = {
      {"\"kind\": \"gemm\", \"function\": \"cublasLtMatmul\"", 0},
      {"\"kind\": \"gemm\", \"function\": \"cublasGemmStridedBatchedEx\"", 3},
      {"\"shape\": \"epilogue", 3},
      {"\"epilogue\": ", 0},
      {"\"fallback_for\": ", 0},
      {NULL, 0}};
  char *js = tu_case_manifest("gemm_epilogue_unfused", OPT_CONV_NHWC);
  tu_expect_counts("gemm_epilogue_unfused", js, unfused);
  free(js);
}

/* hloc's --stats names each fused GEMM's epilogue and marks the fallback kernels, the header
 * lists the fused products and asks for -lcublasLt (and -lcublas, the fallback's); a module
 * without a fused epilogue says none; at --precision=tf32 the f32 GEMMs take tf32 on
 * cublasGemmEx, their epilogue kernels kept; --gemm-epilogues=fallback (which
 * tools/cuda_device_test.sh runs on the GPU too) is said in the header. */
Test(cuda_ptx, gemm_epilogues_in_stats_and_header) {
  static const char *const cases[] = {"gemm_epilogue_bf16", "gemm_epilogue_unfused",
                                      "gemm_epilogue_f32", "gemm_epilogue_bf16"};
  static const char *const flags[] = {"", "", "--precision=tf32 --emit=ptx",
                                      "--gemm-epilogues=fallback"};
  for (int c = 0; c < 4; c++) {
    char *d = ct_tmpdir("hloc_cuda"), out[700], cmd[2048];
    snprintf(out, sizeof out, "%s/m.o", d);
    snprintf(cmd, sizeof cmd,
             "'" HLOC_BIN_DIR "/hloc' '" HLOC_TEST_DIR
             "/cuda/cases/%s.hlo' --target=cuda --stats -o '%s' --name m %s > '%s/stats.txt' 2>&1",
             cases[c], out, flags[c], d);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
    snprintf(out, sizeof out, "%s/stats.txt", d);
    char *st = ct_slurp(out, NULL);
    if (c == 0) {
      cr_expect(strstr(st, "cuda: cublasLt gemm NN m=160 n=64 k=96 batch=2 bf16 x bf16 -> bf16 "
                           "epilogue bias+residual+relu  ("),
                "%s", st);
      cr_expect(strstr(st, "0 cuBLAS GEMMs, 0 cuBLASLt fp8 GEMMs, 5 cuBLASLt GEMMs with a fused "
                           "epilogue"),
                "%s", st);
      cr_expect_eq(tu_count(st, "; only where its GEMM runs unfused)"), 5, "%s", st);
      snprintf(out, sizeof out, "%s/m.h", d);
      char *h = ct_slurp(out, NULL);
      cr_expect(strstr(h, "#define M_CUDA_LIBS \"-lcuda -lcublas -lcublasLt\""), "%s", h);
      cr_expect(strstr(h, "Matrix products computing their fusion's epilogue in cuBLASLt"), "%s",
                h);
      cr_expect_eq(tu_count(h, ": cublasLt gemm, epilogue "), 5, "%s", h);
      cr_expect(strstr(h, ": cublasLt gemm, epilogue bias+residual+relu"), "%s", h);
      free(h);
    } else if (c == 1) {
      cr_expect(strstr(st, "3 cuBLAS GEMMs, 0 cuBLASLt fp8 GEMMs, 0 cuBLASLt GEMMs with a fused "
                           "epilogue"),
                "%s", st);
      cr_expect(!strstr(st, " epilogue bias") && !strstr(st, "runs unfused"), "%s", st);
      snprintf(out, sizeof out, "%s/m.h", d);
      char *h = ct_slurp(out, NULL);
      cr_expect(strstr(h, "#define M_CUDA_LIBS \"-lcuda -lcublas\""), "%s", h);
      cr_expect(!strstr(h, "cuBLASLt ("), "%s", h);
      free(h);
    } else if (c == 3) {
      snprintf(out, sizeof out, "%s/m.h", d);
      char *h = ct_slurp(out, NULL);
      cr_expect(strstr(h, "and always here (--gemm-epilogues=fallback)"), "%s", h);
      cr_expect_eq(tu_count(h, ": cublasLt gemm, epilogue "), 5, "%s", h);
      free(h);
    } else {
      snprintf(out, sizeof out, "%s/m.json", d);
      char *js = ct_slurp(out, NULL);
      /* tf32 products stay on cublasGemmEx too */
      cr_expect_eq(tu_count(js, "\"function\": \"cublasLtMatmul\""), 0, "%s", js);
      cr_expect_eq(tu_count(js, "\"compute\": \"CUBLAS_COMPUTE_32F_FAST_TF32\""), 6, "%s", js);
      free(js);
    }
    free(st);
    ct_rmdir(d);
    free(d);
  }
}

/* Variadic scatter: one copy step writing both operands, one single-thread scatter step
 * updating both outputs (run on a GPU by tools/cuda_device_test.sh against the interpreter). */
/* The attention pass's kCustom fusion becomes the fused kernel (a split over the keys for a
 * decode step, then the kernel combining the slices); with the pass off, the products go to
 * cuBLAS and the softmax to reductions. */
Test(cuda_ptx, attention_through_the_fused_kernel) {
  for (int off = 0; off < 2; off++) {
    char *d = ct_tmpdir("hloc_cuda"), out[700], cmd[2048];
    snprintf(out, sizeof out, "%s/m.o", d);
    snprintf(cmd, sizeof cmd,
             "'" HLOC_BIN_DIR "/hloc' '" HLOC_TEST_DIR
             "/cuda/cases/attention_decode.hlo' --target=cuda --stats -o '%s' --name m %s > "
             "'%s/stats.txt' 2>&1",
             out, off ? "--disable-pass=attention" : "", d);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
    snprintf(out, sizeof out, "%s/stats.txt", d);
    char *st = ct_slurp(out, NULL);
    if (off) {
      cr_expect(!strstr(st, " attention-") && strstr(st, "2 cuBLAS GEMMs"), "%s", st);
    } else {
      cr_expect(strstr(st, "kCustom 1") && strstr(st, " attention-split ") &&
                    strstr(st, " attention-finish ") && strstr(st, "0 cuBLAS GEMMs"),
                "%s", st);
    }
    free(st);
    ct_rmdir(d);
    free(d);
  }
}

/* 16-bit prefill attention: a staging kernel and the tensor-core kernel (mma.sync, ldmatrix
 * from cp.async tiles), and the slices' combination where the keys are split; f16 on the f16
 * instruction. */
Test(cuda_ptx, prefill_attention_on_the_tensor_cores) {
  static const struct {
    const char *name, *main, *mma;
    int finish;
  } cases[] = {{"attention_prefill_bf16", "attention-mma", "f32.bf16.bf16.f32", 0},
               {"attention_prefill_f16", "attention-mma", "f32.f16.f16.f32", 0},
               {"attention_prefill_split", "attention-mma-split", "f32.bf16.bf16.f32", 1},
               {"attention_prefill_steps", "attention-mma", "f32.bf16.bf16.f32", 0}};
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    char p[1024], *ptx, shape[64];
    snprintf(p, sizeof p, HLOC_TEST_DIR "/cuda/cases/%s.hlo", cases[c].name);
    HErr err = {0};
    HModule *m = proto_load_file(p, &err);
    cr_assert(m && hlo_verify(m, &err), "%s", err.msg);
    OptOpts oo = {0};
    cuda_optimizer_options(&oo, CUDA_PRECISION_HIGHEST);
    cr_assert(opt_optimize(m, &oo, &err), "%s", err.msg);
    char *js = tu_kernels(m, cases[c].name, CUDA_EMIT_PTX, 3, &ptx, NULL);
    cr_expect_eq(tu_count(js, "\"shape\": \"attention-stage\""), 1, "%s", js);
    snprintf(shape, sizeof shape, "\"shape\": \"%s\"", cases[c].main);
    cr_expect_eq(tu_count(js, shape), 1, "%s: %s", cases[c].name, js);
    cr_expect_eq(tu_count(js, "\"shape\": \"attention-finish\""), cases[c].finish, "%s", js);
    snprintf(shape, sizeof shape, "mma.sync.aligned.m16n8k16.row.col.%s", cases[c].mma);
    cr_expect(strstr(ptx, shape) && strstr(ptx, "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16") &&
                  strstr(ptx, "cp.async.cg.shared.global"),
              "%s: no tensor-core attention in the PTX", cases[c].name);
    free(js);
    free(ptx);
  }
}

/* Dots of a few rows (16-bit ones up to 16, 13 here): the skinny kernel (split over K, then
 * the partials' sum) instead of cuBLAS; the s8 weight's prologue (convert, scale) and the
 * residual add fused, the weight read by vector accesses; more rows than the kernel takes stay
 * on cuBLAS (run on a GPU against the interpreter by tools/cuda_device_test.sh). */
Test(cuda_ptx, few_row_dots_through_the_skinny_kernel) {
  static const struct {
    const char *name;
    int splits;
  } cases[] = {
      {"skinny_w8a16", 1}, {"skinny_w8a16_rows16", 1}, {"skinny_gemv", 2}, {"skinny_heads", 1}};
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    char *js = tu_case_manifest(cases[c].name, OPT_CONV_NHWC);
    cr_expect_eq(tu_count(js, "\"shape\": \"skinny-split\""), cases[c].splits, "%s", js);
    cr_expect_eq(tu_count(js, "\"shape\": \"skinny-finish\""), cases[c].splits, "%s", js);
    cr_expect_eq(tu_count(js, "\"kind\": \"gemm\""), 0, "%s", js);
    cr_expect_eq(tu_count(js, "\"kind\": \"kernel\""), 2 * cases[c].splits, "%s", js);
    free(js);
  }
  char *ptx;
  free(tu_kernels(tu_case_module("skinny_w8a16", OPT_CONV_NHWC), "skinny_w8a16", CUDA_EMIT_PTX, 3,
                  &ptx, NULL));
  /* up to 8 rows the s8 values become floats through f32 bits (0x4B000080 = 2^23 + 128), not
   * integer-to-float conversions */
  cr_expect(strstr(ptx, "ld.global.nc.u32") && strstr(ptx, ", 1258291328;") &&
                !strstr(ptx, "cvt.rn.bf16.s16"),
            "no 4-byte accesses of the s8 weight, or not the f32-bits conversion: %.2000s", ptx);
  free(ptx);
  /* nine rows: cuBLAS */
  static const char *nine = "HloModule nine\n"
                            "ENTRY e {\n"
                            "  x = bf16[9,1024] parameter(0)\n"
                            "  w = bf16[1024,1024] parameter(1)\n"
                            "  ROOT d = bf16[9,1024] dot(x, w), lhs_contracting_dims={1}, "
                            "rhs_contracting_dims={0}\n"
                            "}\n";
  HErr err = {0};
  HModule *m = hlo_parse_text(nine, strlen(nine), "nine.hlo", &err);
  cr_assert(m && hlo_verify(m, &err), "%s", err.msg);
  OptOpts oo = {0};
  cuda_optimizer_options(&oo, CUDA_PRECISION_HIGHEST);
  cr_assert(opt_optimize(m, &oo, &err), "%s", err.msg);
  char *js = tu_kernels(m, "nine", CUDA_EMIT_CUBIN, 3, NULL, NULL);
  cr_expect_eq(tu_count(js, "\"kind\": \"gemm\""), 1, "%s", js);
  cr_expect_eq(tu_count(js, "skinny"), 0, "%s", js);
  free(js);
}

/* The text module of a W8A16 product x bf16[M,K] . (convert(s8[K,N]) * scale[N]), optimized. */
static HModule *tu_w8a16(int64_t M, int64_t K, int64_t N) {
  char t[1024];
  snprintf(t, sizeof t,
           "HloModule w\nENTRY e {\n  x = bf16[%lld,%lld] parameter(0)\n"
           "  wq = s8[%lld,%lld] parameter(1)\n  s = bf16[%lld] parameter(2)\n"
           "  wc = bf16[%lld,%lld] convert(wq)\n"
           "  sb = bf16[%lld,%lld] broadcast(s), dimensions={1}\n"
           "  w = bf16[%lld,%lld] multiply(wc, sb)\n"
           "  ROOT d = bf16[%lld,%lld] dot(x, w), lhs_contracting_dims={1}, "
           "rhs_contracting_dims={0}\n}\n",
           (long long)M, (long long)K, (long long)K, (long long)N, (long long)N, (long long)K,
           (long long)N, (long long)K, (long long)N, (long long)K, (long long)N, (long long)M,
           (long long)N);
  HErr err = {0};
  HModule *m = hlo_parse_text(t, strlen(t), "w8a16.hlo", &err);
  cr_assert(m && hlo_verify(m, &err), "%s", err.msg);
  OptOpts oo = {0};
  cuda_optimizer_options(&oo, CUDA_PRECISION_HIGHEST);
  cr_assert(opt_optimize(m, &oo, &err), "%s", err.msg);
  return m;
}

/* 16-bit dots whose operand a prologue computes (an s8 weight converted and scaled, an f32
 * weight rounded to f16) on hloc's tensor-core GEMM with the prologue fused: mma.sync on
 * ldmatrix fragments (.trans for operands whose free dim is minor), the activation's tiles by
 * cp.async, a split over K summed by a second kernel; --gemm-prologues=staged keeps cuBLAS; by
 * default the cost model takes the kernel for a 64-row projection and stages the weight of a
 * 256-row one (as measured on the H200: docs/benchmarks.md; run on a GPU against the
 * interpreter by tools/cuda_device_test.sh). */
Test(cuda_ptx, prologue_dots_through_the_tensor_core_gemm) {
  static const struct {
    const char *name, *mma;
    bool trans;
  } cases[] = {{"gemm_w8a16", "f32.bf16.bf16.f32", true},
               {"gemm_w8a16_split", "f32.bf16.bf16.f32", false},
               {"gemm_prologue_f16", "f32.f16.f16.f32", true}};
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    const char *n = cases[c].name;
    char *ptx, *js = tu_kernels_ex(tu_case_module(n, OPT_CONV_NHWC), n, CUDA_EMIT_PTX, 3,
                                   CUDA_PROLOGUES_FUSED, &ptx, NULL);
    cr_expect_eq(tu_count(js, "\"shape\": \"gemm-mma-split\""), 1, "%s: %s", n, js);
    cr_expect_eq(tu_count(js, "\"shape\": \"gemm-mma-finish\""), 1, "%s: %s", n, js);
    cr_expect_eq(tu_count(js, "\"kind\": \"gemm\""), 0, "%s: %s", n, js);
    char mma[96];
    snprintf(mma, sizeof mma, "mma.sync.aligned.m16n8k16.row.col.%s", cases[c].mma);
    cr_expect(strstr(ptx, mma), "%s: no %s", n, mma);
    cr_expect_eq(!!strstr(ptx, "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16"), cases[c].trans,
                 "%s", n);
    cr_expect(strstr(ptx, "cp.async.cg.shared.global"), "%s: no cp.async", n);
    free(js);
    free(ptx);
    js = tu_kernels_ex(tu_case_module(n, OPT_CONV_NHWC), n, CUDA_EMIT_PTX, 3, CUDA_PROLOGUES_STAGED,
                       NULL, NULL);
    cr_expect_eq(tu_count(js, "\"kind\": \"gemm\""), 1, "%s: %s", n, js);
    cr_expect_eq(tu_count(js, "gemm-mma"), 0, "%s: %s", n, js);
    free(js);
  }
  char *js = tu_kernels(tu_w8a16(64, 4096, 14336), "w8a16 64", CUDA_EMIT_PTX, 3, NULL, NULL);
  cr_expect_eq(tu_count(js, "\"shape\": \"gemm-mma-split\""), 1, "%s", js);
  cr_expect_eq(tu_count(js, "\"kind\": \"gemm\""), 0, "%s", js);
  free(js);
  js = tu_kernels(tu_w8a16(256, 4096, 14336), "w8a16 256", CUDA_EMIT_PTX, 3, NULL, NULL);
  cr_expect_eq(tu_count(js, "\"kind\": \"gemm\""), 1, "%s", js);
  cr_expect_eq(tu_count(js, "\"shape\": \"stage-v8\""), 1, "%s", js);
  cr_expect_eq(tu_count(js, "gemm-mma"), 0, "%s", js);
  free(js);
}

/* Softmax's two reductions and its division: one row-chain kernel. */
Test(cuda_ptx, softmax_as_one_row_kernel) {
  char *js = tu_case_manifest("softmax_rows", OPT_CONV_NHWC);
  cr_expect_eq(tu_count(js, "\"shape\": \"row-chain\""), 1, "%s", js);
  cr_expect_eq(tu_count(js, "\"kind\": \"kernel\""), 1, "%s", js);
  free(js);
}

/* Complex values and 4-bit integers go through the elemental generator (complex dots as loop
 * kernels, reported so), ffts through cuFFT: one fft step per transform in the manifest with its
 * cufftExec function, a scaling kernel after each inverse, a scratch copy before each C2R;
 * --stats names the steps and the header asks for -lcufft and links as a user program. */
Test(cuda_ptx, complex_fft_and_int4_cases) {
  char *js = tu_case_manifest("complex_dot", OPT_CONV_NHWC);
  cr_expect_eq(tu_count(js, "\"kind\": \"gemm\""), 0, "%s", js);
  cr_expect_eq(tu_count(js, "\"shape\": \"loop\""), 2, "%s", js);
  free(js);
  static const char *const plain[] = {"complex_elementwise", "complex_reduce", "int4_s4_u4"};
  for (int c = 0; c < 3; c++)
    free(tu_case_manifest(plain[c], OPT_CONV_NHWC));
  js = tu_case_manifest("fft_real", OPT_CONV_NHWC);
  cr_expect_eq(tu_count(js, "\"kind\": \"fft\""), 6, "%s", js);
  cr_expect_eq(tu_count(js, "\"function\": \"cufftExecR2C\""), 3, "%s", js);
  cr_expect_eq(tu_count(js, "\"function\": \"cufftExecC2R\", \"type\": \"CUFFT_C2R\", "
                            "\"direction\": \"inverse\", \"n\": [4, 6, 9], \"batch\": 2"),
               1, "%s", js);
  cr_expect_eq(tu_count(js, "\"shape\": \"fft-scale\""), 3, "%s", js);
  cr_expect_eq(tu_count(js, "\"kind\": \"copy\""), 3, "a copy before each C2R: %s", js);
  free(js);
  js = tu_case_manifest("fft_c128", OPT_CONV_NHWC);
  cr_expect_eq(tu_count(js, "\"function\": \"cufftExecZ2Z\""), 2, "%s", js);
  cr_expect_eq(tu_count(js, "\"function\": \"cufftExecD2Z\""), 1, "%s", js);
  cr_expect_eq(tu_count(js, "\"function\": \"cufftExecZ2D\""), 1, "%s", js);
  free(js);
  char *d, *st, *h, cmd[2048];
  tu_case_cli("fft_c64_2d_3d", "", &st, &h, &d);
  cr_expect(strstr(st, "cuda: cufft cufftExecC2C forward rank=3 n=6,10,14 batch=2  (g)"), "%s", st);
  cr_expect(strstr(st, "cuda: cufft cufftExecC2C inverse rank=3 n=5,7,9 batch=1  (i)"), "%s", st);
  cr_expect(strstr(st, "4 cuFFT transforms"), "%s", st);
  free(st);
  cr_expect(strstr(h, "#define M_CUDA_LIBS \"-lcuda -lcufft\""), "%s", h);
  cr_expect(strstr(h, "200000 + a cufftResult"), "%s", h);
  free(h);
  snprintf(cmd, sizeof cmd,
           "printf 'int m_cuda_init(void);\\nint main(void){return m_cuda_init() * 0;}\\n' | "
           "cc -x c - -x none '%s/m.o' " TU_LIBS " -o '%s/user'",
           d, d);
  cr_expect_eq(system(cmd), 0, "%s", cmd);
  ct_rmdir(d);
  free(d);
}

Test(cuda_ptx, variadic_scatter_steps) {
  char *js = tu_case_manifest("scatter_variadic", OPT_CONV_NHWC);
  cr_expect_eq(tu_count(js, "\"shape\": \"copy\""), 1, "%s", js);
  cr_expect_eq(tu_count(js, "\"shape\": \"scatter\""), 1, "%s", js);
  free(js);
}

/* Tuple-shaped entry parameters: one argument per leaf, depth first, named after the tuple
 * index (run on a GPU by tools/cuda_device_test.sh against the interpreter). */
Test(cuda_ptx, tuple_parameters_leaf_by_leaf) {
  char *js = tu_case_manifest("tuple_params", OPT_CONV_NHWC);
  const char *order[5] = {"\"name\": \"x\"", "\"name\": \"p.0\"", "\"name\": \"p.1.0\"",
                          "\"name\": \"p.1.1\"", "\"name\": \"y\""};
  const char *at = strstr(js, "\"args\"");
  cr_assert(at, "%s", js);
  for (int i = 0; i < 5; i++) {
    const char *n = strstr(at, order[i]);
    cr_expect(n, "argument %d (%s) in order: %s", i, order[i], js);
    if (n) at = n;
  }
  free(js);
}

/* ------------------------------------------------------------------ execution (GPU only) */

/* Skip unless a CUDA driver and a device are present. */
static void tu_need_gpu(void) {
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) cr_skip_test("no CUDA driver (libcuda.so.1): GPU execution not tested here");
  int (*init)(unsigned) = (int (*)(unsigned))dlsym(lib, "cuInit");
  int (*count)(int *) = (int (*)(int *))dlsym(lib, "cuDeviceGetCount");
  int n = 0;
  if (!init || !count || init(0) != 0 || count(&n) != 0 || n < 1) {
    dlclose(lib);
    cr_skip_test("no usable CUDA device: GPU execution not tested here");
  }
  dlclose(lib);
}

static void tu_exec(const char *fixture, const char *rtol) {
  tu_need_gpu();
  char *d;
  tu_object(fixture, "model", &d);
  char cmd[4096];
  snprintf(cmd, sizeof cmd,
           "cc -std=gnu17 -O1 -I'%s' -I" HLOC_TEST_DIR "/../hlo -I" HLOC_CUDA_HOME
           "/include '" HLOC_TEST_DIR "/cuda/cuda_driver.c' '%s/model.o' '" HLOC_BIN_DIR
           "/libhloc_hlo.a' " TU_LIBS " -o '%s/run' && "
           "'%s/run' '" HLOC_CORPUS_DIR "/fixtures/%s' %s 2 | grep -q '^PASS'",
           d, d, d, d, fixture, rtol);
  cr_expect_eq(system(cmd), 0, "%s did not match XLA's outputs on the GPU", fixture);
  ct_rmdir(d);
  free(d);
}

Test(cuda_exec, elementwise_chain) { tu_exec("elementwise_chain", "1e-4"); }
Test(cuda_exec, mlp) { tu_exec("mlp", "1e-4"); }
Test(cuda_exec, transformer_layer) { tu_exec("transformer_layer", "1e-4"); }
Test(cuda_exec, simple_cnn_train_step) { tu_exec("simple_cnn_train_step", "1e-3"); }
Test(cuda_exec, llama_layer_bf16) { tu_exec("llama_layer_bf16", "1e-4"); }

#else

Test(cuda_ptx, not_built) {
  cr_skip_test("hloc was built without a CUDA toolkit: --target=cuda not tested");
}
Test(cuda_exec, not_built) {
  cr_skip_test("hloc was built without a CUDA toolkit: GPU execution not tested");
}

#endif
