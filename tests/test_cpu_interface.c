/* tests/test_cpu_interface.c: what the CPU target gives a user, and what it refuses.
 *
 * The header (C and C++, two models in one program, names that are not C identifiers), the
 * tensor tables, one argument per leaf of a tuple parameter, --profile's entry point and task
 * names, --emit=llvm/asm, deterministic objects, the benchmark driver's lockstep mode; and the
 * located errors: unsupported and elided inputs, ops the target compiles only outside fusions or
 * conditionals, an unwritable output (which leaves no file behind), a bad symbol prefix. Each
 * builds a small program against the generated header and object with the system compiler. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu_test_util.h"
#include "hlo.h"
#include "optimizer.h"
#include "proto.h"
#include "target.h"

/* ------------------------------------------------------------------ the header and the object */

static const char *ti_small =
    "HloModule small\n"
    "ENTRY e {\n"
    "  x = f32[4,8] parameter(0)\n"
    "  c = f32[4,8] "
    "constant({{1,2,3,4,5,6,7,8},{1,2,3,4,5,6,7,8},{1,2,3,4,5,6,7,8},{1,2,3,4,5,6,7,8}})\n"
    "  a = f32[4,8] add(x, c)\n"
    "  ROOT t = f32[4,8] tanh(a)\n"
    "}\n";

Test(cpu, header_contents_and_two_models_in_one_program) {
  char *dir = ct_tmpdir("hloc_cpu");
  HErr err = {0};
  HModule *m1 = ct_parse(ti_small), *m2 = ct_parse(ti_small);
  cr_assert(ct_compile(m1, dir, "alpha", 0, &err), "%s", err.msg);
  cr_assert(ct_compile(m2, dir, "beta", 0, &err), "%s", err.msg);
  char path[512];
  snprintf(path, sizeof path, "%s/alpha.h", dir);
  char *h = ct_slurp(path, NULL);
  cr_expect(strstr(h, "#define ALPHA_NUM_ARGS 1"), "%s", h);
  cr_expect(strstr(h, "#define ALPHA_NUM_RESULTS 1"));
  cr_expect(strstr(h, "#define ALPHA_TEMP_BYTES "));
  cr_expect(
      strstr(h, "int alpha_run(const void *const args[], void *const results[], void *temp);"));
  cr_expect(strstr(h, "int alpha_run_mt("));
  cr_expect(strstr(h, "extern const hloc_tensor_info alpha_arg_info[];"));
  cr_expect(strstr(h, "extern \"C\""));
  cr_expect(strstr(h, "#ifndef HLOC_RUNTIME_TYPES_DEFINED"));
  free(h);
  /* both headers in one C and one C++ translation unit; both objects in one program */
  const char *src =
      "#include \"alpha.h\"\n#include \"beta.h\"\n#include <math.h>\n#include <stdio.h>\n#include "
      "<string.h>\n"
      "int main(void) {\n"
      "  float x[32], ya[32], yb[32];\n"
      "  for (int i = 0; i < 32; i++) x[i] = (float)i / 16 - 1;\n"
      "  const void *args[1] = {x}; void *ra[1] = {ya}, *rb[1] = {yb};\n"
      "  static char temp[ALPHA_TEMP_BYTES + BETA_TEMP_BYTES + 64] __attribute__((aligned(64)));\n"
      "  if (alpha_run(args, ra, temp) || beta_run(args, rb, temp)) return 1;\n"
      "  if (alpha_run(NULL, ra, temp) == 0) return 2;\n"
      "  if (strcmp(alpha_arg_info[0].name, \"x\") || strcmp(alpha_arg_info[0].dtype, \"f32\")) "
      "return 3;\n"
      "  if (alpha_arg_info[0].rank != 2 || alpha_arg_info[0].dims[1] != 8 || "
      "alpha_result_info[0].bytes != 128) return 4;\n"
      "  for (int i = 0; i < 32; i++) {\n"
      "    float want = tanhf(x[i] + (float)(i % 8 + 1));\n"
      "    if (fabsf(ya[i] - want) > 1e-6f || ya[i] != yb[i]) { printf(\"%d %g %g\\n\", i, ya[i], "
      "want); return 5; }\n"
      "  }\n"
      "  return 0;\n}\n";
  ct_main_build(dir, src, "alpha.o beta.o", true);
  hlo_module_free(m1);
  hlo_module_free(m2);
  ct_rmdir(dir);
  free(dir);
}

/* The benchmark's driver (bench/cpu/bench_model.c, built against a model as bench/cpu.sh does)
 * in --lockstep mode, which bench/cpu/ort_pair.py drives: after the warm-up, each line of
 * stdin asks for that many runs (blank and zero lines are skipped), and the driver answers
 * with their seconds on one line; at EOF its usual result line covers every run made. Given
 * no line asking for runs it fails. */
Test(cpu, bench_driver_lockstep, .timeout = 300) {
  char *dir = ct_tmpdir("hloc_cpu");
  HErr err = {0};
  HModule *m = ct_parse(
      "HloModule m\nENTRY e {\n  x = f32[8,16] parameter(0)\n  w = f32[16,8] parameter(1)\n"
      "  ROOT d = f32[8,8] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n");
  cr_assert(ct_compile(m, dir, "m", 0, &err), "%s", err.msg);
  char build[2048], cmd[4096];
  snprintf(build, sizeof build,
           "cc -O1 -std=gnu17 -I. -I%s/../bench/cpu -DBENCH_HEADER='\"m.h\"' -DBENCH_NAME=m "
           "-DBENCH_UNAME=M "
           "%s/../bench/cpu/bench_model.c m.o -lm -lpthread -o bench && "
           "./bench --lockstep --packed < asks.txt > out.txt && ! ./bench --lockstep < /dev/null "
           "2>/dev/null",
           HLOC_TEST_DIR, HLOC_TEST_DIR);
  cr_assert_eq(ct_build_run(dir, "asks.txt", "2\n\n0\n3\n", build, cmd, sizeof cmd), 0, "%s", cmd);
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
  cr_expect(strncmp(l3, "model=", 6) == 0 && strstr(l3, " runs=5 ") && strstr(l3, " packed=1 "),
            "result line: %s", l3);
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
  HModule *m = ct_parse(ti_small);
  m->name = "mod */ int broken; /*";
  m->entry->params[0]->name = "x*/\nint bad;";
  m->entry->instrs[m->entry->ninstrs - 1]->name = "t*//";
  cr_assert(ct_compile(m, dir, "odd", 0, &err), "%s", err.msg);
  const char *src =
      "#include \"odd.h\"\n#include <string.h>\n"
      "int main(void) { return strcmp(odd_arg_info[0].name, \"x*/\\nint bad;\") != 0; }\n";
  ct_main_build(dir, src, "odd.o", true);
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
  cr_assert(ct_compile(m, dir, "model", 0, &err), "%s", err.msg);
  hlo_module_free(m);
  m = proto_load_file(HLOC_CORPUS_DIR "/fixtures/mlp/module.pb", &err);
  CpuOpts o = {
      .knobs = &ct_knobs, .name = "model", .out_path = p2, .opt_level = 2, .emit = CPU_EMIT_OBJ};
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

Test(cpu, emit_llvm_and_asm) {
  char *dir = ct_tmpdir("hloc_cpu");
  HErr err = {0};
  char ll[512], s[512];
  snprintf(ll, sizeof ll, "%s/m.ll", dir);
  snprintf(s, sizeof s, "%s/m.s", dir);
  HModule *m = ct_parse(ti_small);
  CpuOpts o = {
      .knobs = &ct_knobs, .name = "small", .out_path = ll, .opt_level = 2, .emit = CPU_EMIT_LLVM};
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
    cr_assert(ct_compile(m, dir, "model", 1, &err), "%s", err.msg);
    char hp[512];
    snprintf(hp, sizeof hp, "%s/model.h", dir);
    char *h = ct_slurp(hp, NULL);
    cr_expect(strstr(h, "#define MODEL_NUM_ARGS 5"), "one argument per leaf");
    free(h);
    ct_build_driver(dir);
    ct_check_driver(dir, dir, 0, "cpu",
                    optimize ? "tuple parameters, optimized" : "tuple parameters");
    ct_rmdir(dir);
    free(dir);
    hlo_arena_free(a);
    hlo_module_free(ref);
    hlo_module_free(m);
  }
}

/* ------------------------------------------------------------------ --profile */

/* Build src (a main.c beside model.o in dir) strictly, run it and expect exit status 0; then
 * free m and dir. */
static void ti_main_ok(HModule *m, char *dir, const char *src) {
  ct_main_build(dir, src, "model.o", false);
  hlo_module_free(m);
  ct_rmdir(dir);
  free(dir);
}

/* An object computing in bf16 links into a plain C program with any libgcc (GCC 12's lacks
 * the __truncsfbf2 that x86 code without AVX512-BF16 calls; the object defines it, weak), and
 * its values round to nearest even: 1 + 2^-8 is a tie (rounds to 1), 1 + 3 * 2^-8 rounds up. */
Test(cpu, bf16_object_links_alone, .timeout = 300) {
  HModule *m =
      ct_parse("HloModule m\nENTRY e {\n  x = bf16[8] parameter(0)\n  y = bf16[8] parameter(1)\n"
               "  s = bf16[8] add(x, y)\n  ROOT r = bf16[8] multiply(s, s)\n}\n");
  char *dir = ct_tmpdir("hloc_cpu");
  HErr err = {0};
  cr_assert(ct_compile(m, dir, "model", 1, &err), "%s", err.msg);
  const char *src =
      "#include \"model.h\"\n#include <stdint.h>\n"
      "int main(void) {\n"
      "  uint16_t x[8] = {0x3f80, 0x3f80, 0x4000, 0xbf80, 0x3f80, 0, 0x7fc0, 0x3f80};\n"
      "  uint16_t y[8] = {0x3b80, 0x3c40, 0x4000, 0x3f80, 0, 0, 0, 0x3f80};\n"
      "  uint16_t r[8];\n  const void *args[2] = {x, y};\n  void *res[1] = {r};\n"
      "  static char temp[MODEL_TEMP_BYTES + 64] __attribute__((aligned(64)));\n"
      "  if (model_run(args, res, temp)) return 1;\n"
      /* (1 + 2^-8) -> 1, squared 1; (1 + 3*2^-8) -> 1 + 2^-6, squared 1 + 2^-5 + 2^-12 -> 0x3f84;
         4*4=16; 0; 1; 0; NaN; 4 */
      "  uint16_t want[8] = {0x3f80, 0x3f84, 0x4180, 0, 0x3f80, 0, 0x7fc0, 0x4080};\n"
      "  for (int i = 0; i < 8; i++) if ((r[i] & 0x7fff) > 0x7f80 ? (want[i] & 0x7fff) <= 0x7f80 : "
      "r[i] != want[i]) return 10 + i;\n"
      "  return 0;\n}\n";
  ti_main_ok(m, dir, src);
}

/* m compiled with --profile into a fresh folder (returned, malloc'd); par_min_elems as
 * ct_compile_ex takes it. */
static char *ti_profile_compile(HModule *m, int64_t par_min) {
  char *dir = ct_tmpdir("hloc_cpu");
  HErr err = {0};
  cr_assert(ct_compile_ex(m, dir, "model", par_min, true, &err), "%s", err.msg);
  return dir;
}

/* --profile: NAME_run_profile adds each task's ticks to the caller's array, names every task
 * (kernels by instruction and op, the loop's copies, exit test and back edge by the loop), and
 * computes what NAME_run computes; NULL ticks is allowed. */
Test(cpu, profile_entry_point, .timeout = 300) {
  HModule *m = ct_parse(
      "HloModule m\n"
      "b {\n  p = f32[4] parameter(0)\n  two = f32[] constant(2)\n  tb = f32[4] broadcast(two), "
      "dimensions={}\n"
      "  ROOT r = f32[4] multiply(p, tb)\n}\n"
      "add {\n  a = f32[] parameter(0)\n  b2 = f32[] parameter(1)\n  ROOT s = f32[] add(a, b2)\n}\n"
      "c {\n  q = f32[4] parameter(0)\n  z = f32[] constant(0)\n"
      "  s3 = f32[] reduce(q, z), dimensions={0}, to_apply=add\n"
      "  h = f32[] constant(100)\n  ROOT lt = pred[] compare(s3, h), direction=LT\n}\n"
      "ENTRY e {\n  x = f32[4] parameter(0)\n  sq = f32[4] multiply(x, x)\n"
      "  wl = f32[4] while(sq), condition=c, body=b\n  out = f32[4] add(wl, x)\n"
      "  xm = f32[2,2] reshape(x)\n  d = f32[2,2] dot(xm, xm), lhs_contracting_dims={1}, "
      "rhs_contracting_dims={0}\n"
      "  ROOT o = (f32[4], f32[2,2]) tuple(out, d)\n}\n");
  char *dir = ti_profile_compile(m, 0);
  char hdr[512];
  snprintf(hdr, sizeof hdr, "%s/model.h", dir);
  char *h = ct_slurp(hdr, NULL);
  cr_expect(strstr(h, "#define MODEL_NUM_TASKS "), "%s", h);
  cr_expect(strstr(h, "extern const char *const model_task_names[];"));
  cr_expect(strstr(h, "extern const double model_task_flops[];"));
  cr_expect(strstr(
      h, "int model_run_profile(const void *const args[], void *const results[], void *temp,"));
  free(h);
  /* x = 1..4: sq sums to 30, doubled twice (60, 120): the loop's kernels run 2 or 3 times */
  const char *src =
      "#include \"model.h\"\n#include <stdio.h>\n#include <string.h>\n"
      "static void serial(void *r, int64_t n, hloc_task_fn fn, void *ctx) { (void)r; for (int64_t "
      "i = 0; i < n; i++) fn(ctx, i); }\n"
      "int main(void) {\n"
      "  float x[4] = {1, 2, 3, 4}, y[4], z[4], dy[4], dz[4];\n"
      "  const void *args[1] = {x}; void *ry[2] = {y, dy}, *rz[2] = {z, dz};\n"
      "  static char temp[MODEL_TEMP_BYTES + 64] __attribute__((aligned(64)));\n"
      "  uint64_t ticks[MODEL_NUM_TASKS] = {0};\n"
      "  if (model_run(args, ry, temp)) return 1;\n"
      "  if (model_run_profile(args, rz, temp, NULL, serial, NULL, ticks)) return 2;\n"
      "  if (memcmp(y, z, sizeof y) || y[0] != 5 || y[3] != 68) return 3;\n"
      "  if (model_run_profile(args, rz, temp, NULL, NULL, NULL, NULL) || model_run_mt(args, rz, "
      "temp, serial, NULL)) return 4;\n"
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
  ti_main_ok(m, dir, src);
}

/* --profile's task names say how a kernel computes its instruction: a 3x3 convolution through
 * Winograd (its taps' kernel, then its own), a dot over several chunks whose B is packed
 * once ahead; the tasks of the default paths carry no note. */
Test(cpu, profile_task_names_say_how, .timeout = 300) {
  HModule *m =
      ct_parse("HloModule m\nENTRY e {\n  x = f32[2,6,6,16] parameter(0)\n  w = f32[3,3,16,16] "
               "parameter(1)\n"
               "  c = f32[2,6,6,16] convolution(x, w), window={size=3x3 pad=1_1x1_1}, "
               "dim_labels=b01f_01io->b01f\n"
               "  a = f32[300,64] parameter(2)\n  b = f32[64,64] parameter(3)\n"
               "  d = f32[300,64] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
               "  ROOT o = (f32[2,6,6,16], f32[300,64]) tuple(c, d)\n}\n");
  char *dir = ti_profile_compile(m, 1);
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
  ti_main_ok(m, dir, src);
}

/* ------------------------------------------------------------------ located errors */

Test(cpu, unsupported_op_is_a_located_error) {
  char *dir = ct_tmpdir("hloc_cpu");
  HErr err = {0};
  HModule *m = ct_parse("HloModule bad\nENTRY e {\n  x = f32[4] parameter(0)\n"
                        "  ROOT cc = f32[4] custom-call(x), custom_call_target=\"mystery\"\n}\n");
  cr_expect(!ct_compile(m, dir, "model", 0, &err));
  cr_expect(strstr(err.msg, "'cc'") && strstr(err.msg, "custom-call"), "%s", err.msg);
  char path[512];
  snprintf(path, sizeof path, "%s/model.o", dir);
  cr_expect(!ct_exists(path));
  snprintf(path, sizeof path, "%s/model.h", dir);
  cr_expect(!ct_exists(path));
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
  cr_expect(!ct_compile(m, dir, "model", 0, &err));
  cr_expect(strstr(err.msg, "'w'") && strstr(err.msg, "elided"), "%s", err.msg);
  char path[512];
  snprintf(path, sizeof path, "%s/model.o", dir);
  cr_expect(!ct_exists(path));
  hlo_module_free(m);
  ct_rmdir(dir);
  free(dir);
}

Test(cpu, unwritable_output_leaves_no_file) {
  char *dir = ct_tmpdir("hloc_cpu");
  HErr err = {0};
  HModule *m = ct_parse(ti_small);
  char hdr[512];
  snprintf(hdr, sizeof hdr, "%s/model.h", dir);
  CpuOpts o = {.knobs = &ct_knobs,
               .name = "model",
               .out_path = "/nonexistent-dir/model.o",
               .header_path = hdr,
               .opt_level = 1,
               .emit = CPU_EMIT_OBJ};
  cr_expect(!cpu_compile(m, &o, &err));
  cr_expect(strstr(err.msg, "/nonexistent-dir/model.o"), "%s", err.msg);
  cr_expect(!ct_exists(hdr), "header left behind");
  char cmd[600];
  snprintf(cmd, sizeof cmd, "test -z \"$(ls -A '%s')\"", dir);
  cr_expect_eq(system(cmd), 0, "temporary files left behind");
  hlo_module_free(m);
  ct_rmdir(dir);
  free(dir);
}

Test(cpu, bad_symbol_prefix) {
  HErr err = {0};
  HModule *m = ct_parse(ti_small);
  CpuOpts o = {.knobs = &ct_knobs, .name = "my-model", .out_path = "/tmp/unused.o", .opt_level = 1};
  cr_expect(!cpu_compile(m, &o, &err));
  cr_expect(strstr(err.msg, "my-model"), "%s", err.msg);
  hlo_module_free(m);
}

/* A conditional the optimizer cannot flatten (its branch has side effects) runs as branches on
 * the CPU; an op in a branch that the target cannot compile (rng) is a located error naming
 * that instruction. */
Test(cpu, op_conditional_branch_unsupported_op_is_a_located_error) {
  ct_expect_located_error(
      "HloModule m\n"
      "t {\n  q = f32[4] parameter(0)\n  lo = f32[] constant(0)\n  hi = f32[] constant(1)\n"
      "  ROOT r = f32[4] rng(lo, hi), distribution=rng_uniform\n}\n"
      "f {\n  q = f32[4] parameter(0)\n  ROOT r = f32[4] negate(q)\n}\n"
      "ENTRY e {\n  x = f32[4] parameter(0)\n  c = pred[] parameter(1)\n"
      "  ROOT cd = f32[4] conditional(c, x, x), true_computation=t, false_computation=f\n}\n",
      "computation 't', instruction 'r'", "rng");
}

/* An op the CPU target cannot compile inside a loop body is still a located error. */
Test(cpu, op_while_unsupported_body_op_is_a_located_error) {
  ct_expect_located_error(
      "HloModule m\n"
      "b {\n  p = f32[4] parameter(0)\n  cc = f32[4] custom-call(p), custom_call_target=\"foo\"\n"
      "  ROOT r = f32[4] add(p, cc)\n}\n"
      "add {\n  a = f32[] parameter(0)\n  b2 = f32[] parameter(1)\n  ROOT s = f32[] add(a, b2)\n}\n"
      "c {\n  q = f32[4] parameter(0)\n  z = f32[] constant(0)\n  s3 = f32[] reduce(q, z), "
      "dimensions={0}, to_apply=add\n"
      "  h = f32[] constant(100)\n  ROOT lt = pred[] compare(s3, h), direction=LT\n}\n"
      "ENTRY e {\n  x = f32[4] parameter(0)\n  ROOT wl = f32[4] while(x), condition=c, body=b\n}\n",
      "'cc'", "custom-call");
}

/* A sort inside a fusion (never made by the fusion pass) stays a located error. */
Test(cpu, sort_in_fusion_is_a_located_error) {
  char *dir = ct_tmpdir("hloc_cpu");
  HErr err = {0};
  HModule *m = ct_parse(
      "HloModule bad\n" CT_SORT_CMPS
      "f { p = f32[8] parameter(0)\n ROOT fs = f32[8] sort(p), dimensions={0}, to_apply=lt }\n"
      "ENTRY e {\n  x = f32[8] parameter(0)\n"
      "  ROOT r = f32[8] fusion(x), kind=kLoop, calls=f\n}\n");
  cr_expect(!ct_compile(m, dir, "model", 0, &err));
  cr_expect(strstr(err.msg, "'fs'") && strstr(err.msg, "CPU target"), "%s", err.msg);
  hlo_module_free(m);
  ct_rmdir(dir);
  free(dir);
}

/* A select-and-scatter inside a fusion (never made by the fusion pass) stays a located
 * error. */
Test(cpu, select_and_scatter_in_fusion_is_a_located_error) {
  char *dir = ct_tmpdir("hloc_cpu");
  HErr err = {0};
  HModule *m = ct_parse("HloModule bad\n" CT_SAS_COMPS(
      "f32") "f { p = f32[4] parameter(0)\n q = f32[2] parameter(1)\n z = f32[] constant(0)\n"
             "  ROOT fs = f32[4] select-and-scatter(p, q, z), window={size=2 stride=2}, select=ge, "
             "scatter=add }\n"
             "ENTRY e {\n  x = f32[4] parameter(0)\n  y = f32[2] parameter(1)\n"
             "  ROOT r = f32[4] fusion(x, y), kind=kLoop, calls=f\n}\n");
  cr_expect(!ct_compile(m, dir, "model", 0, &err));
  cr_expect(strstr(err.msg, "'fs'") && strstr(err.msg, "CPU target"), "%s", err.msg);
  hlo_module_free(m);
  ct_rmdir(dir);
  free(dir);
}
