/* tests/test_cmake_helper.c: tools/hloc.cmake's hloc_add_model in a user's CMake project.
 * Configures and builds a tiny project that compiles the bundled example model through the
 * helper and links it into a program, then runs the program. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
