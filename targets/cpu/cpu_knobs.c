/* targets/cpu/cpu_knobs.c: the CPU target's knobs (cpu_knobs.def): read from the environment
 * by the tools, looked up by the generator, listed by `hloc --list-knobs`.
 *
 * The library receives the knobs in CpuOpts.knobs and never calls getenv, so a program that
 * links hloc's libraries (or a test) decides them itself, and the prebuilt GEMM library, made
 * with none set, is used exactly when no knob that changes the code is set (cpu_knobs_tuned). */
#include "cpu_impl.h"

#include <stdlib.h>

typedef enum { KNOB_USER, KNOB_DEBUG, KNOB_TEST } KnobClass;

static const struct {
  const char *env;     /* environment variable */
  KnobClass cls;       /* who it is for */
  bool tuning;         /* setting it changes the generated code */
  const char *summary; /* values and effect */
} ck_table[CPU_KNOB_COUNT] = {
#define KNOB(id, env, cls, tuning, summary) [CPU_KNOB_##id] = {env, KNOB_##cls, tuning, summary},
#include "cpu_knobs.def"
#undef KNOB
};

void cpu_knobs_from_env(CpuKnobs *k) {
  for (int i = 0; i < CPU_KNOB_COUNT; i++) {
    const char *v = getenv(ck_table[i].env);
    k->v[i] = v && *v ? v : NULL;
  }
}

void cpu_knobs_print(FILE *f) {
  static const char *const cls[] = {"user", "debug", "test"};
  fprintf(f, "%-28s %-6s %-6s %s\n", "variable", "class", "code", "values: effect");
  for (int i = 0; i < CPU_KNOB_COUNT; i++)
    fprintf(f, "%-28s %-6s %-6s %s\n", ck_table[i].env, cls[ck_table[i].cls],
            ck_table[i].tuning ? "yes" : "no", ck_table[i].summary);
}

const char *cpu_knob(const CpuCg *cg, CpuKnob k) { return cpu_knob_of(cg->o, k); }

const char *cpu_knob_of(const CpuOpts *o, CpuKnob k) {
  return o && o->knobs ? o->knobs->v[k] : NULL;
}

bool cpu_knobs_tuned(const CpuOpts *o) {
  for (int i = 0; i < CPU_KNOB_COUNT; i++)
    if (ck_table[i].tuning && cpu_knob_of(o, (CpuKnob)i)) return true;
  return false;
}
