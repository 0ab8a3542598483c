/* tests/test_cpu_fixtures.c: the CPU target on modules with XLA's outputs.
 *
 * Each corpus fixture (../shared/corpus/fixtures/NAME: module.pb, in<k>.npy, out<k>.npy) and
 * each exported JAX case (tests/xla_cases/NAME, module.hlo) is compiled with every kernel split
 * into chunks down to one element, linked with tests/cpu_driver.c, run serially and with a
 * 2-thread parallel-for, and compared with XLA's outputs: as read, and after the optimizer
 * (fusion instructions of every kind reach the code generator). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu_test_util.h"
#include "hlo.h"
#include "optimizer.h"
#include "proto.h"
#include "target.h"

/* Compile datadir/file (optimized or not), run it through the driver on datadir's inputs and
 * compare with its outputs, serially and on 2 threads. */
static void tf_case(const char *datadir, const char *file, const char *name, double rtol,
                    bool optimize) {
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
  cr_assert(ct_compile(m, dir, "model", 1, &err), "%s", err.msg);
  hlo_module_free(m);
  ct_build_driver(dir);
  ct_check_driver(dir, datadir, rtol, "cpu", name);
  ct_rmdir(dir);
  free(dir);
}

static void tf_fixture_ex(const char *name, double rtol, bool optimize) {
  char datadir[512];
  snprintf(datadir, sizeof datadir, HLOC_CORPUS_DIR "/fixtures/%s", name);
  tf_case(datadir, "module.pb", name, rtol, optimize);
}

static void tf_fixture(const char *name, double rtol) { tf_fixture_ex(name, rtol, false); }

/* After the optimizer: fusion instructions (loop, input with reduce heroes, output with
 * dot/convolution heroes and epilogues, multi-output) reach the code generator. */
static void tf_fixture_opt(const char *name, double rtol) { tf_fixture_ex(name, rtol, true); }

Test(cpu, fused_elementwise_chain, .timeout = 300) { tf_fixture_opt("elementwise_chain", 1e-4); }
Test(cpu, fused_mlp, .timeout = 300) { tf_fixture_opt("mlp", 1e-4); }
Test(cpu, fused_frozen_mlp, .timeout = 300) { tf_fixture_opt("frozen_mlp", 1e-4); }
Test(cpu, fused_simple_cnn, .timeout = 300) { tf_fixture_opt("simple_cnn", 1e-4); }
Test(cpu, fused_transformer_layer, .timeout = 300) { tf_fixture_opt("transformer_layer", 1e-4); }
Test(cpu, fused_resnet_block, .timeout = 300) { tf_fixture_opt("resnet_block", 1e-4); }
Test(cpu, fused_resnet18, .timeout = 300) { tf_fixture_opt("resnet18", 1e-4); }
Test(cpu, fused_bert_base, .timeout = 300) { tf_fixture_opt("bert_base", 1e-4); }
Test(cpu, fused_simple_cnn_train_step, .timeout = 300) {
  tf_fixture_opt("simple_cnn_train_step", 1e-3);
}

/* tests/xla_cases/NAME for each of names[0..n): after the optimizer, and also as written when
 * as_written. */
static void tf_xla_cases(const char *const *names, size_t n, double rtol, bool as_written) {
  for (size_t i = 0; i < n; i++) {
    char datadir[512];
    snprintf(datadir, sizeof datadir, HLOC_TEST_DIR "/xla_cases/%s", names[i]);
    if (as_written) tf_case(datadir, "module.hlo", names[i], rtol, false);
    tf_case(datadir, "module.hlo", names[i], rtol, true);
  }
}

/* tests/xla_cases: grouped convolutions (batch_group_count, feature_group_count) exported by
 * JAX with XLA's outputs, as written and after the optimizer. */
Test(cpu, xla_grouped_convolution_cases, .timeout = 300) {
  const char *names[] = {"bgc2_nhwc", "bgc3_nchw_stride_pad", "bgc2_dilated", "fgc3_nhwc",
                         "grouped_wgrad"};
  tf_xla_cases(names, sizeof names / sizeof *names, 1e-4, true);
}

/* tests/xla_cases: JAX's lax.cond (data-dependent predicate, tuple results, both outcomes) and
 * lax.switch (run-time index in range, past the end and negative; a cond nested in a branch)
 * with XLA's outputs, through the optimizer (conditional-select runs every branch). */
Test(cpu, xla_conditional_cases, .timeout = 300) {
  const char *names[] = {"cond_pred_true", "cond_pred_false", "switch_0", "switch_1",
                         "switch_2",       "switch_7",        "switch_m3"};
  tf_xla_cases(names, sizeof names / sizeof *names, 1e-5, false);
}

Test(cpu, fixture_elementwise_chain, .timeout = 300) { tf_fixture("elementwise_chain", 1e-4); }
Test(cpu, fixture_mlp, .timeout = 300) { tf_fixture("mlp", 1e-4); }
Test(cpu, fixture_frozen_mlp, .timeout = 300) { tf_fixture("frozen_mlp", 1e-4); }
Test(cpu, fixture_simple_cnn, .timeout = 300) { tf_fixture("simple_cnn", 1e-4); }
Test(cpu, fixture_transformer_layer, .timeout = 300) { tf_fixture("transformer_layer", 1e-4); }
Test(cpu, fixture_resnet_block, .timeout = 300) { tf_fixture("resnet_block", 1e-4); }
Test(cpu, fixture_resnet18, .timeout = 300) { tf_fixture("resnet18", 1e-4); }
Test(cpu, fixture_bert_base, .timeout = 300) { tf_fixture("bert_base", 1e-4); }
Test(cpu, fixture_simple_cnn_train_step, .timeout = 300) {
  tf_fixture("simple_cnn_train_step", 1e-3);
}
/* bf16 Llama layers (prefill and decode; XLA's outputs bf16, as bits): the bf16 bar, 3e-2 of
 * each result's scale. Their dots go through the GEMM (bf16 operands, f32 sums). */
Test(cpu, fixture_llama_layer_bf16, .timeout = 300) { tf_fixture("llama_layer_bf16", 3e-2); }
Test(cpu, fixture_llama_decode_bf16, .timeout = 300) { tf_fixture("llama_decode_bf16", 3e-2); }
Test(cpu, fused_llama_layer_bf16, .timeout = 300) { tf_fixture_opt("llama_layer_bf16", 3e-2); }
Test(cpu, fused_llama_decode_bf16, .timeout = 300) { tf_fixture_opt("llama_decode_bf16", 3e-2); }

/* tests/xla_cases/w8a16_decode: a decode step whose weights are int8 with bf16 scales
 * (tools/export_w8a16.py; XLA's outputs on the GPU), at the bf16 bar, as written and optimized. */
Test(cpu, xla_w8a16_decode, .timeout = 300) {
  const char *names[] = {"w8a16_decode"};
  tf_xla_cases(names, 1, 3e-2, true);
}

/* tests/xla_cases: JAX's lax.fori_loop, lax.scan and a lax.while_loop counting down, with XLA's
 * outputs, through the optimizer (while-unroll); and two lax.while_loops whose trip count
 * depends on the data (Newton's square root to a tolerance; a bound given as an argument, a
 * matrix product in the body, a nested tuple state), run as loops, as written and optimized. */
Test(cpu, xla_loop_cases, .timeout = 300) {
  const char *names[] = {"fori_loop", "scan", "while_down"};
  tf_xla_cases(names, sizeof names / sizeof *names, 1e-5, false);
  const char *dynamic[] = {"while_newton", "while_arg_bound"};
  tf_xla_cases(dynamic, sizeof dynamic / sizeof *dynamic, 1e-5, true);
}
