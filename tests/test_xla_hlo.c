/* tests/test_xla_hlo.c: HLO files of XLA's own repository through the CPU target.
 *
 * tests/xla_hlo_subset.txt names a CI-sized share of the files in ../shared/xla-hlo (XLA's
 * emitter and codegen lit tests, small modules of its CPU benchmarks) that
 * tools/xla_hlo_sweep.sh, which takes them all, compiles and passes. Each is one Criterion
 * test (cpu::xla_hlo, a parameter per line): the file through the optimizer and the CPU target,
 * run serially and on 2 threads against the reference interpreter (ct_check_text_ex), within
 * 1e-3 of the results' scale (3e-2 where the module holds 16-bit or fp8 values: the corpus's
 * bar). Where ../shared/xla-hlo is absent the tests are skipped, saying so; a listed file that
 * is missing there fails. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu_test_util.h"

#define XH_LIST HLOC_TEST_DIR "/xla_hlo_subset.txt"
#define XH_DIR HLOC_XLA_HLO_DIR

/* One parameter: a file's path under XH_DIR (inline text: Criterion copies parameters). */
typedef struct XlaFile {
  char path[256];
} XlaFile;

static void xh_free(struct criterion_test_params *p) { cr_free(p->params); }

/* The list's lines that name files (no blank or '#' lines), into f (NULL: counted only). */
static int xh_read(XlaFile *f, int cap) {
  FILE *in = fopen(XH_LIST, "r");
  int n = 0;
  char line[512];
  while (in && fgets(line, sizeof line, in)) {
    line[strcspn(line, "\r\n")] = 0;
    if (!line[0] || line[0] == '#') continue;
    if (f && n < cap) snprintf(f[n].path, sizeof f[n].path, "%.255s", line);
    n++;
  }
  if (in) fclose(in);
  return n;
}

ParameterizedTestParameters(cpu, xla_hlo) {
  int n = xh_read(NULL, 0);
  XlaFile *fs = cr_calloc((size_t)(n ? n : 1), sizeof *fs);
  xh_read(fs, n);
  /* no list: the one parameter, its path empty, fails */
  return cr_make_param_array(XlaFile, fs, (size_t)(n ? n : 1), xh_free);
}

ParameterizedTest(XlaFile *f, cpu, xla_hlo, .timeout = 300) {
  cr_assert(f->path[0], "no files listed in " XH_LIST);
  FILE *probe = fopen(XH_DIR "/README.md", "r");
  if (!probe) cr_skip_test("no " XH_DIR ": XLA's HLO files not checked");
  fclose(probe);
  char path[sizeof XH_DIR + sizeof f->path + 2];
  snprintf(path, sizeof path, XH_DIR "/%s", f->path);
  char *text = ct_slurp(path, NULL);
  bool low = strstr(text, "bf16[") || strstr(text, "f16[") || strstr(text, "f8e");
  ct_check_text_ex(f->path, text, low ? 3e-2 : 1e-3, 4, true);
  free(text);
}
