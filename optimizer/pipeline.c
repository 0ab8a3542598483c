/* optimizer/pipeline.c: the pass runner and hloc's optimization pipeline.
 *
 * The pipeline is a list of stages; a stage is a list of pass names run once or repeated to a
 * fixed point (bounded). The runner, not the passes, does the debugging work: it skips
 * disabled passes, stops after a named pass, verifies the module after every pass that
 * changed it (when asked: debug builds and tests do), times each pass, and writes dumps in
 * XLA's naming style so that files sort in pipeline order:
 *   DIR/module_NAME.0000.before_optimizations.hlo
 *   DIR/module_NAME.0003.simplify.after_dce.hlo     (only passes that changed something)
 *   DIR/module_NAME.after_optimizations.hlo
 *   DIR/module_NAME.dot                              (Graphviz, final entry computation)
 *   DIR/module_NAME.fusion-decisions.txt             (passes that explain their decisions)
 *   DIR/module_NAME.buffer-assignment.txt            (memplan of the final entry: every
 *                                                     buffer, TEMP_BYTES, peak-live bound)
 * Each pass gets a scratch arena that is freed when it returns, and the decision log (NULL
 * when not dumping).
 *
 * Stages: "normalize" (tuple-shaped entry parameters flattened into leaves, interior layouts
 * row-major, entry interface row-major or as declared, topk as a sort), "simplify"
 * (inline calls, algebraic simplification, constant folding, CSE, DCE to a fixed point),
 * "inference" (batch-norm folding into constant weights, then the clean-up passes again, to
 * a fixed point), "layout" (once: transposes folded into dot/convolution dimension numbers,
 * convolutions put in the CPU's NHWC/HWIO form), "layout-cleanup" (transposes sunk towards
 * their users until they cancel, and per-output factors pulled out of sums (reduce-factor),
 * with the clean-up passes, to a fixed point), "fusion" (once:
 * fusion, then DCE) and "schedule" (once: the entry reordered for the least scratch). */
#include "memplan.h"
#include "optimizer.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static const OptPass passes[] = {
#define PASS(name, fn, summary) {name, fn, summary},
#include "passes.def"
#undef PASS
};
enum { NPASSES = sizeof passes / sizeof *passes };

const OptPass *opt_find_pass(const char *name) {
  for (int i = 0; i < NPASSES; i++)
    if (!strcmp(passes[i].name, name)) return &passes[i];
  return NULL;
}
int opt_pass_count(void) { return NPASSES; }
const OptPass *opt_pass_at(int i) { return &passes[i]; }

typedef struct Stage {
  const char *name;      /* stage name, used in dump file names */
  bool fixpoint;         /* repeat until no pass changes anything */
  const char *passes[8]; /* pass names, NULL-terminated */
} Stage;

/* hloc's pipeline, top to bottom. */
static const Stage pipeline[] = {
    {"normalize", false, {"flatten-params", "layout-normalize", "topk-expand", NULL}},
    {"simplify",
     true,
     {"conditional-select", "while-unroll", "inline-call", "algsimp", "constant-fold", "cse", "dce",
      NULL}},
    {"inference", true, {"fold-batchnorm", "algsimp", "constant-fold", "cse", "dce", NULL}},
    {"layout", false, {"transpose-fold", "conv-layout", NULL}},
    {"layout-cleanup",
     true,
     {"transpose-sink", "transpose-fold", "algsimp", "reduce-factor", "constant-fold", "cse", "dce",
      NULL}},
    {"fusion", false, {"attention", "dot-algorithm", "fusion", "dce", NULL}},
    {"schedule", false, {"schedule", NULL}},
};
enum { NSTAGES = sizeof pipeline / sizeof *pipeline, MAX_ROUNDS = 8 };

typedef struct Runner {
  HModule *m;
  const OptOpts *o;
  HErr *err;
  int step;             /* dump counter */
  double secs[NPASSES]; /* wall time per pass */
  int runs[NPASSES];    /* runs per pass */
  int changes[NPASSES]; /* runs that changed the module */
  bool stopped;         /* --stop-after reached */
  FILE *log;            /* decision log in the dump folder (NULL when not dumping) */
} Runner;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static bool dump(Runner *r, const char *suffix) {
  if (!r->o->dump_dir) return true;
  char path[4096];
  snprintf(path, sizeof path, "%s/module_%s.%s.hlo", r->o->dump_dir, r->m->name, suffix);
  size_t len = 0;
  char *buf = hlo_module_text(r->m, NULL, &len);
  bool ok = buf && hlo_write_file_atomic(path, buf, len, r->err);
  free(buf);
  return ok;
}

static bool disabled(const OptOpts *o, const char *name) {
  for (int i = 0; i < o->ndisabled; i++)
    if (!strcmp(o->disabled[i], name)) return true;
  return false;
}

/* Run one pass; returns whether it changed the module (err set on failure). */
static bool run_pass(Runner *r, const Stage *st, const OptPass *p) {
  PassCtx pc = {r->o, hlo_arena_new(), r->err, r->log};
  double t0 = now();
  hlo_module_renumber(r->m);
  bool changed = p->fn(r->m, &pc);
  hlo_module_renumber(r->m);
  int id = (int)(p - passes);
  r->secs[id] += now() - t0;
  r->runs[id]++;
  r->changes[id] += changed;
  hlo_arena_free(pc.scratch);
  if (r->err->set) return false;
  if (changed) {
    if (r->o->verify_each && !hlo_verify(r->m, r->err)) {
      char msg[sizeof r->err->msg];
      snprintf(msg, sizeof msg, "%s", r->err->msg);
      r->err->set = false;
      hlo_err(r->err, NULL, NULL, NULL, "after pass '%s': %s", p->name, msg);
      return false;
    }
    char suffix[256];
    snprintf(suffix, sizeof suffix, "%04d.%s.after_%s", ++r->step, st->name, p->name);
    if (!dump(r, suffix)) return false;
    if (r->o->after_pass && !r->o->after_pass(r->o->after_ctx, p->name, r->m)) r->stopped = true;
  }
  if (r->o->stop_after && !strcmp(r->o->stop_after, p->name)) r->stopped = true;
  return changed;
}

static bool dump_dot(Runner *r) {
  if (!r->o->dump_dir) return true;
  char path[4096];
  snprintf(path, sizeof path, "%s/module_%s.dot", r->o->dump_dir, r->m->name);
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  opt_write_dot(f, r->m->entry);
  fclose(f);
  bool ok = hlo_write_file_atomic(path, buf, len, r->err);
  free(buf);
  return ok;
}

/* The buffer plan the CPU target will make for the final entry computation, as text. */
static bool dump_buffers(Runner *r) {
  if (!r->o->dump_dir || !r->m->entry) return true;
  char path[4096];
  snprintf(path, sizeof path, "%s/module_%s.buffer-assignment.txt", r->o->dump_dir, r->m->name);
  HArena *a = hlo_arena_new();
  MemPlan plan;
  HErr perr = {0};
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (memplan_assign(r->m->entry, a, &plan, &perr))
    memplan_dump(&plan, r->m->entry, f);
  else
    fprintf(f, "no buffer assignment: %s\n", perr.msg);
  fclose(f);
  bool ok = hlo_write_file_atomic(path, buf, len, r->err);
  free(buf);
  hlo_arena_free(a);
  return ok;
}

static bool run_stages(Runner *r);

bool opt_optimize(HModule *m, const OptOpts *o, HErr *err) {
  static const OptOpts defaults = {0};
  if (!o) o = &defaults;
  Runner r = {.m = m, .o = o, .err = err};
  for (int i = 0; i < o->ndisabled; i++)
    if (!opt_find_pass(o->disabled[i])) {
      hlo_err(err, NULL, NULL, NULL, "unknown pass '%s' in --disable-pass", o->disabled[i]);
      return false;
    }
  if (o->stop_after && !opt_find_pass(o->stop_after)) {
    hlo_err(err, NULL, NULL, NULL, "unknown pass '%s' in --stop-after", o->stop_after);
    return false;
  }
  if (o->dump_dir && mkdir(o->dump_dir, 0777) != 0 && errno != EEXIST) {
    hlo_err(err, o->dump_dir, NULL, NULL, "cannot create dump folder: %s", strerror(errno));
    return false;
  }
  if (!dump(&r, "0000.before_optimizations")) return false;
  if (o->dump_dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/module_%s.fusion-decisions.txt", o->dump_dir, m->name);
    r.log = fopen(path, "w");
    if (!r.log) {
      hlo_err(err, path, NULL, NULL, "cannot write decision log: %s", strerror(errno));
      return false;
    }
  }
  bool ok = run_stages(&r);
  if (r.log) fclose(r.log);
  if (!ok) return false;
  if (!dump(&r, "after_optimizations") || !dump_dot(&r) || !dump_buffers(&r)) return false;
  if (o->time_passes) {
    fprintf(stderr, "%-24s %6s %8s %10s\n", "pass", "runs", "changed", "ms");
    for (int i = 0; i < NPASSES; i++)
      if (r.runs[i])
        fprintf(stderr, "%-24s %6d %8d %10.3f\n", passes[i].name, r.runs[i], r.changes[i],
                1e3 * r.secs[i]);
  }
  return true;
}

static bool run_stages(Runner *r) {
  for (int s = 0; s < NSTAGES && !r->stopped; s++) {
    const Stage *st = &pipeline[s];
    for (int round = 0; round < (st->fixpoint ? MAX_ROUNDS : 1) && !r->stopped; round++) {
      bool any = false;
      for (int k = 0; st->passes[k] && !r->stopped; k++) {
        const OptPass *p = opt_find_pass(st->passes[k]);
        HLO_ASSERT(p);
        if (disabled(r->o, p->name)) continue;
        any |= run_pass(r, st, p);
        if (r->err->set) return false;
      }
      if (!any) break;
    }
  }
  return true;
}
