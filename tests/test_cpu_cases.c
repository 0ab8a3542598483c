/* tests/test_cpu_cases.c: the CPU target against the interpreter on tests/cpu/cases/NAME.hlo.
 *
 * Every file of the folder is one case, run as its own Criterion test (cpu::cases, one
 * parameter per file, in name order): the module is compiled with every kernel split into
 * chunks down to one element, linked with tests/cpu_driver.c, run serially and with a 2-thread
 * parallel-for, and compared with the reference interpreter on deterministic arguments
 * (ct_check_text_ex). Adding a case is adding a file. A case says how it is checked in one
 * comment line of its own, beside the module's description:
 *
 *     // case: rtol=1e-5 int_range=4 modes=written,optimized
 *
 * rtol: the relative tolerance (0: exact); int_range: integer arguments are drawn from
 * [0, int_range) (floats from [-2, 2)); modes: written (the module as read), optimized (after
 * opt_optimize), or both, in that order. All three are required, and nothing else is allowed
 * on the line. A case that fails names its file in every message; a folder without cases fails
 * (as one parameter that names the folder). Tests that check more than the values (a kernel
 * path taken, a header's text, an error) are C tests beside this file. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu_test_util.h"

#define CS_DIR HLOC_TEST_DIR "/cpu/cases"

/* One parameter: a case's file name without ".hlo"; empty when the folder has none. Inline
 * text, no pointers: Criterion copies parameters into its workers. */
typedef struct CpuCase {
  char name[128]; /* NAME of CS_DIR/NAME.hlo */
} CpuCase;

static int cs_cmp(const void *a, const void *b) {
  return strcmp(((const CpuCase *)a)->name, ((const CpuCase *)b)->name);
}

static void cs_free(struct criterion_test_params *p) { cr_free(p->params); }

/* Whether a folder entry is a case file NAME.hlo (a NAME too long for a CpuCase is cut, and
 * its case fails: no such file). */
static bool cs_is_case(const char *f) {
  size_t l = strlen(f);
  return l > 4 && !strcmp(f + l - 4, ".hlo");
}

ParameterizedTestParameters(cpu, cases) {
  /* counted first, then filled: one cr_calloc (Criterion's shared heap, which its workers
   * read the parameters from) */
  int n = 0, got = 0;
  DIR *d = opendir(CS_DIR);
  for (struct dirent *e; d && (e = readdir(d));)
    n += cs_is_case(e->d_name);
  CpuCase *cs = cr_calloc((size_t)(n ? n : 1), sizeof *cs);
  if (d) rewinddir(d);
  for (struct dirent *e; d && got < n && (e = readdir(d));)
    if (cs_is_case(e->d_name))
      snprintf(cs[got].name, sizeof cs[got].name, "%.*s", (int)(strlen(e->d_name) - 4), e->d_name),
          got++;
  if (d) closedir(d);
  qsort(cs, (size_t)got, sizeof *cs, cs_cmp);
  /* no case: the one parameter, its name empty, fails */
  return cr_make_param_array(CpuCase, cs, (size_t)(got ? got : 1), cs_free);
}

/* The case's "// case:" line read into *rtol, *int_range and the modes (written, optimized);
 * any other form fails the test, naming the case. */
static void cs_directive(const char *name, const char *text, double *rtol, int *int_range,
                         bool *written, bool *optimized) {
  const char *p = strstr(text, "// case:");
  cr_assert(p && (p == text || p[-1] == '\n'), "%s.hlo: no '// case:' line", name);
  cr_assert(!strstr(p + 1, "// case:"), "%s.hlo: more than one '// case:' line", name);
  char line[512];
  size_t l = strcspn(p + 8, "\n");
  cr_assert_lt(l, sizeof line, "%s.hlo: '// case:' line too long", name);
  memcpy(line, p + 8, l);
  line[l] = 0;
  bool have_rtol = false, have_range = false, have_modes = false;
  *written = *optimized = false;
  for (char *w = strtok(line, " \t"); w; w = strtok(NULL, " \t")) {
    char *end;
    if (!strncmp(w, "rtol=", 5)) {
      *rtol = strtod(w + 5, &end);
      cr_assert(end != w + 5 && !*end && *rtol >= 0, "%s.hlo: bad '%s'", name, w);
      have_rtol = true;
    } else if (!strncmp(w, "int_range=", 10)) {
      long v = strtol(w + 10, &end, 10);
      cr_assert(end != w + 10 && !*end && v >= 0 && v < 1000000, "%s.hlo: bad '%s'", name, w);
      *int_range = (int)v;
      have_range = true;
    } else if (!strncmp(w, "modes=", 6)) {
      for (char *m = w + 6; *m;) {
        size_t ml = strcspn(m, ",");
        if (ml == 7 && !strncmp(m, "written", 7))
          *written = true;
        else if (ml == 9 && !strncmp(m, "optimized", 9))
          *optimized = true;
        else
          cr_assert(false, "%s.hlo: mode '%.*s' is neither 'written' nor 'optimized'", name,
                    (int)ml, m);
        m += ml + (m[ml] == ',');
      }
      have_modes = *written || *optimized;
    } else {
      cr_assert(false, "%s.hlo: unknown '%s' on the '// case:' line", name, w);
    }
  }
  cr_assert(have_rtol && have_range && have_modes,
            "%s.hlo: the '// case:' line needs rtol=, int_range= and modes=", name);
}

ParameterizedTest(CpuCase *c, cpu, cases, .timeout = 300) {
  cr_assert(c->name[0], "no case files (NAME.hlo) in " CS_DIR);
  char path[sizeof CS_DIR + sizeof c->name + 8];
  snprintf(path, sizeof path, CS_DIR "/%s.hlo", c->name);
  char *text = ct_slurp(path, NULL);
  double rtol = 0;
  int int_range = 0;
  bool written, optimized;
  cs_directive(c->name, text, &rtol, &int_range, &written, &optimized);
  char what[sizeof c->name + 32];
  if (written) {
    snprintf(what, sizeof what, "cases/%s.hlo", c->name);
    ct_check_text_ex(what, text, rtol, int_range, false);
  }
  if (optimized) {
    snprintf(what, sizeof what, "cases/%s.hlo, optimized", c->name);
    ct_check_text_ex(what, text, rtol, int_range, true);
  }
  free(text);
}
