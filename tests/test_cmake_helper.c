/* tests/test_cmake_helper.c: hloc in a user's CMake project.
 *
 * From a checkout: a tiny project includes tools/hloc.cmake, compiles the bundled example model
 * with hloc_add_model, links it into a program and runs it. Installed: `cmake --install` of
 * this build into a temporary prefix, the prefix moved elsewhere (the package config's paths
 * are relative), then a project that knows hloc only through find_package(hloc CONFIG)
 * compiles a corpus model, links it and runs it on the corpus input against XLA's output;
 * where the build has the CUDA target, the same model's CUDA object is built too (not run).
 * The installed hloc answers --version with this build's version. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hlo.h"

static void write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  cr_assert(f, "%s", path);
  fputs(text, f);
  fclose(f);
}

Test(cmake_helper, builds_and_runs_a_model, .timeout = 300) {
  char dir[] = "/tmp/hloc_cmake_XXXXXX";
  cr_assert(mkdtemp(dir));
  char path[512], cmd[4096];
  snprintf(path, sizeof path, "%s/CMakeLists.txt", dir);
  write_text(path,
             "cmake_minimum_required(VERSION 3.20)\n"
             "project(user C)\n"
             "include(" HLOC_TEST_DIR "/../tools/hloc.cmake)\n"
             "hloc_add_model(model_lib " HLOC_TEST_DIR "/../docs/example/frozen_mlp.pb NAME model\n"
             "               HLOC " HLOC_BIN_DIR "/hloc)\n"
             "add_executable(app main.c)\n"
             "target_link_libraries(app PRIVATE model_lib)\n");
  snprintf(path, sizeof path, "%s/main.c", dir);
  write_text(path, "#include \"model.h\"\n#include <stdio.h>\n#include <stdlib.h>\n"
                   "int main(void) {\n"
                   "  static float x[4 * 64], y[4 * 10];\n"
                   "  for (int i = 0; i < 4 * 64; i++) x[i] = (float)(i % 7) * 0.1f;\n"
                   "  const void *a[MODEL_NUM_ARGS] = {x}; void *r[MODEL_NUM_RESULTS] = {y};\n"
                   "  void *t = aligned_alloc(64, MODEL_TEMP_BYTES + 64);\n"
                   "  if (model_run(a, r, t)) return 2;\n"
                   "  double s = 0; for (int i = 0; i < 10; i++) s += __builtin_exp(y[i]);\n"
                   "  printf(\"sum %.4f\\n\", s); free(t); return 0;\n}\n");
  snprintf(
      cmd, sizeof cmd,
      "cd %s && cmake -S . -B b >/dev/null && cmake --build b >/dev/null 2>&1 && ./b/app > out.txt",
      dir);
  cr_assert_eq(system(cmd), 0, "configure/build/run failed in %s", dir);
  snprintf(path, sizeof path, "%s/out.txt", dir);
  FILE *f = fopen(path, "r");
  cr_assert(f);
  char line[128] = {0};
  cr_assert(fgets(line, sizeof line, f));
  fclose(f);
  /* the model ends in log-softmax: each row's probabilities sum to 1 */
  double s = 0;
  cr_assert_eq(sscanf(line, "sum %lf", &s), 1, "%s", line);
  cr_expect(s > 0.999 && s < 1.001, "row 0 probabilities sum to %f", s);
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  cr_expect_eq(system(cmd), 0);
}

/* The user's program: frozen_mlp's input from in0.npy, its result against out0.npy. */
static const char *ti_main =
    "#include \"model.h\"\n#include <math.h>\n#include <stdio.h>\n#include <stdlib.h>\n"
    "#include <string.h>\n"
    "static float *npy(const char *p, long n) {\n"
    "  FILE *f = fopen(p, \"rb\"); if (!f) exit(3);\n"
    "  unsigned char h[10]; if (fread(h, 1, 10, f) != 10) exit(3);\n"
    "  fseek(f, 10 + h[8] + 256 * h[9], SEEK_SET);\n"
    "  float *v = malloc(4 * n); if (fread(v, 4, n, f) != (size_t)n) exit(3);\n"
    "  fclose(f); return v;\n}\n"
    "int main(int argc, char **argv) {\n"
    "  long nx = model_arg_info[0].bytes / 4, ny = model_result_info[0].bytes / 4;\n"
    "  float *x = npy(argv[1], nx), *want = npy(argv[2], ny), *y = malloc(4 * ny);\n"
    "  const void *a[MODEL_NUM_ARGS] = {x}; void *r[MODEL_NUM_RESULTS] = {y};\n"
    "  void *t = aligned_alloc(64, MODEL_TEMP_BYTES + 64);\n"
    "  if (model_run(a, r, t)) return 2;\n"
    "  double worst = 0;\n"
    "  for (long i = 0; i < ny; i++) {\n"
    "    double e = fabs(y[i] - want[i]) / (1e-3 + fabs(want[i])); if (e > worst) worst = e;\n"
    "  }\n"
    "  printf(\"worst %g\\n\", worst); return worst < 1e-4 ? 0 : 4;\n}\n";

Test(install, find_package_builds_and_runs_a_model, .timeout = 600) {
  char dir[] = "/tmp/hloc_install_XXXXXX";
  cr_assert(mkdtemp(dir));
  char cmd[8192], path[512];
  /* install, then move the tree: nothing may point back at the build or the prefix */
  snprintf(cmd, sizeof cmd,
           "cmake --install %s --prefix %s/p >%s/install.log 2>&1 && mv %s/p %s/moved",
           HLOC_BIN_DIR, dir, dir, dir, dir);
  cr_assert_eq(system(cmd), 0, "cmake --install failed (%s/install.log)", dir);
  snprintf(cmd, sizeof cmd, "%s/moved/bin/hloc --version > %s/version.txt", dir, dir);
  cr_assert_eq(system(cmd), 0, "installed hloc --version failed");
  snprintf(path, sizeof path, "%s/version.txt", dir);
  FILE *f = fopen(path, "r");
  cr_assert(f);
  char line[256] = {0}, want[128];
  cr_assert(fgets(line, sizeof line, f));
  fclose(f);
  snprintf(want, sizeof want, "hloc %s (commit %s)", hlo_version(), hlo_commit());
  cr_expect(!strncmp(line, want, strlen(want)), "--version says '%s', not '%s'", line, want);

  snprintf(path, sizeof path, "%s/CMakeLists.txt", dir);
  snprintf(cmd, sizeof cmd,
           "cmake_minimum_required(VERSION 3.20)\n"
           "project(user C)\n"
           "find_package(hloc %s CONFIG REQUIRED)\n"
           "hloc_add_model(model_lib %s/fixtures/frozen_mlp/module.pb NAME model)\n"
           "add_executable(app main.c)\n"
           "target_link_libraries(app PRIVATE model_lib)\n"
#ifdef HLOC_HAVE_CUDA
           "hloc_add_model(cuda_lib %s/fixtures/frozen_mlp/module.pb NAME cmodel "
           "FLAGS --target=cuda)\n"
#endif
           ,
           hlo_version(), HLOC_CORPUS_DIR
#ifdef HLOC_HAVE_CUDA
           ,
           HLOC_CORPUS_DIR
#endif
  );
  write_text(path, cmd);
  snprintf(path, sizeof path, "%s/main.c", dir);
  write_text(path, ti_main);
  snprintf(cmd, sizeof cmd,
           "cd %s && cmake -S . -B b -DCMAKE_PREFIX_PATH=%s/moved >cfg.log 2>&1 && "
           "cmake --build b >build.log 2>&1 && ./b/app %s/fixtures/frozen_mlp/in0.npy "
           "%s/fixtures/frozen_mlp/out0.npy > run.txt",
           dir, dir, HLOC_CORPUS_DIR, HLOC_CORPUS_DIR);
  cr_assert_eq(system(cmd), 0, "configure/build/run failed in %s (cfg.log, build.log, run.txt)",
               dir);
#ifdef HLOC_HAVE_CUDA
  snprintf(path, sizeof path, "%s/b/hloc/cuda_lib/cmodel.o", dir);
  cr_expect_eq(access(path, R_OK), 0, "no CUDA object at %s", path);
#endif
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  cr_expect_eq(system(cmd), 0);
}
