/* bench/cpu/bench_ref.c: the reference side of the benchmark (hloc-bench-ref).
 *
 *   hloc-bench-ref FILE                   work of the module: FLOPs of dot and convolution,
 *                                         bytes of parameters and results
 *   hloc-bench-ref FILE --interp [--expect DIR] [--rtol R] [--atol A] [--save DIR]
 *                                         also run the reference interpreter on the
 *                                         benchmark's inputs (bench_fill.h, the values the
 *                                         compiled driver uses) and time it; with --expect,
 *                                         compare its results with DIR/out<k>.npy (what
 *                                         bench_model --save-outputs wrote); with --save,
 *                                         write the inputs and the interpreter's results as
 *                                         DIR/in<k>.npy and DIR/out<k>.npy (test cases for
 *                                         drivers that compare against .npy files)
 *
 * Output: one line of key=value fields for bench/cpu.sh: flops, param_bytes, result_bytes,
 * dots, convs, while_loops (dots/convs inside while bodies are counted once: the trip count is
 * not known statically), then with --interp: interp_s (wall time of hlo_interp_run alone,
 * inputs built beforehand), and with --expect: max_abs, max_rel, bad (elements outside
 * tolerance, all results together) and check=ok|FAIL.
 *
 * FLOPs are counted the usual way (a multiply-add is 2): dot: 2 * result elements * product
 * of the contracting dimensions; convolution: 2 * result elements * kernel elements / kernel
 * output features (spatial window times input features per group, which also holds for
 * batch-grouped convolutions). Called computations (call, fusion, conditional branches,
 * while bodies) are walked from the entry with their call sites; reducers and comparators
 * hold no dot. The module is counted as read, before hloc optimizes it. */
#include "bench_fill.h"
#include "hlo.h"
#include "proto.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "bench_time.h"

typedef struct Work {
  double flops;    /* dot + convolution floating-point operations */
  int dots;        /* dot instructions reached */
  int convs;       /* convolution instructions reached */
  int while_loops; /* while instructions reached (bodies counted once) */
} Work;

static void ref_count(const HComp *c, Work *w, int depth) {
  if (depth > 64) return; /* the verifier rejects recursion; this only bounds the walk */
  for (int i = 0; i < c->ninstrs; i++) {
    const HInstr *in = c->instrs[i];
    w->flops += hlo_instr_flops(in);
    if (in->op == OP_DOT && in->dot && in->nops == 2) {
      w->dots++;
    } else if (in->op == OP_CONVOLUTION && in->conv && in->nops == 2) {
      w->convs++;
    } else if (in->op == OP_CALL || in->op == OP_FUSION || in->op == OP_CONDITIONAL ||
               in->op == OP_WHILE) {
      if (in->op == OP_WHILE) w->while_loops++;
      for (int k = 0; k < in->ncalls; k++)
        ref_count(in->calls[k], w, depth + 1);
    }
  }
}

/* Bytes of all array leaves of a shape. */
static size_t ref_shape_bytes(const Shape *s) {
  if (s->dt != DT_TUPLE) return hlo_shape_bytes(s);
  size_t b = 0;
  for (int i = 0; i < s->ntuple; i++)
    b += ref_shape_bytes(&s->tuple[i]);
  return b;
}

/* Leaves of a (possibly nested) tuple result in flattened order, as the generated code
 * numbers its results. */
static void ref_flatten(Literal *l, Literal **out, int *n, int cap) {
  if (l->shape.dt == DT_TUPLE) {
    for (int i = 0; i < l->shape.ntuple; i++)
      ref_flatten(l->elems[i], out, n, cap);
  } else if (*n < cap) {
    out[(*n)++] = l;
  }
}

int main(int argc, char **argv) {
  const char *file = NULL, *expect = NULL, *save = NULL;
  bool interp = false;
  double rtol = 1e-3, atol = 1e-4;
  HElided elided = {0};
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      puts("usage: hloc-bench-ref FILE [--interp [--expect DIR] [--rtol R] [--atol A] [--save "
           "DIR]] [--elided-constants=error|zero|random[:SEED]]");
      return 0;
    } else if (!strncmp(argv[i], "--elided-constants=", 19)) {
      HErr perr = {0};
      if (!hlo_elided_parse(argv[i] + 19, &elided, &perr)) {
        fprintf(stderr, "hloc-bench-ref: %s\n", perr.msg);
        return 1;
      }
    } else if (!strcmp(argv[i], "--interp")) {
      interp = true;
    } else if (!strcmp(argv[i], "--expect") && i + 1 < argc) {
      expect = argv[++i];
    } else if (!strcmp(argv[i], "--save") && i + 1 < argc) {
      save = argv[++i];
    } else if ((!strcmp(argv[i], "--rtol") || !strcmp(argv[i], "--atol")) && i + 1 < argc) {
      char *end;
      double v = strtod(argv[i + 1], &end);
      if (*end || v < 0) {
        fprintf(stderr, "hloc-bench-ref: bad tolerance '%s'\n", argv[i + 1]);
        return 1;
      }
      if (argv[i][2] == 'r')
        rtol = v;
      else
        atol = v;
      i++;
    } else if (argv[i][0] == '-' || file) {
      fprintf(stderr, "hloc-bench-ref: unexpected argument '%s'\n", argv[i]);
      return 1;
    } else {
      file = argv[i];
    }
  }
  if (!file) {
    fputs("usage: hloc-bench-ref FILE [--interp [--expect DIR] [--rtol R] [--atol A]]\n", stderr);
    return 1;
  }
  HErr err = {0};
  HModule *m = proto_load_file(file, &err);
  if (!m || !hlo_verify(m, &err)) {
    fprintf(stderr, "hloc-bench-ref: %s\n", err.msg);
    return 1;
  }
  hlo_fill_elided(m, &elided);
  { /* tuple-shaped parameters leaf by leaf, as the compiled code takes them */
    HArena *fa = hlo_arena_new();
    hlo_flatten_entry_params(m, fa);
    hlo_arena_free(fa);
  }
  Work w = {0};
  ref_count(m->entry, &w, 0);
  size_t pbytes = 0;
  for (int i = 0; i < m->entry->nparams; i++)
    pbytes += hlo_shape_bytes(&m->entry->params[i]->shape);
  size_t rbytes = ref_shape_bytes(&m->entry->root->shape);
  printf("flops=%.0f param_bytes=%zu result_bytes=%zu dots=%d convs=%d while_loops=%d", w.flops,
         pbytes, rbytes, w.dots, w.convs, w.while_loops);
  fflush(stdout);
  if (!interp) {
    putchar('\n');
    hlo_module_free(m);
    return 0;
  }

  HArena *a = hlo_arena_new();
  int np = m->entry->nparams;
  Literal **args = hlo_arena_alloc(a, sizeof(Literal *) * (size_t)(np ? np : 1));
  for (int k = 0; k < np; k++) {
    const Shape *s = &m->entry->params[k]->shape;
    if (!hlo_shape_is_array(s)) {
      fprintf(stderr, "\nhloc-bench-ref: %s: parameter %d is not an array\n", file, k);
      return 1;
    }
    Shape rm = *s;
    rm.has_layout = false; /* the benchmark's data is dense row-major */
    args[k] = hlo_literal_new(a, &rm);
    int64_t n = hlo_shape_elems(s);
    bool fl = hlo_dtype_is_float(s->dt);
    for (int64_t i = 0; i < n; i++) {
      double v = bench_fill_value(k, s->rank, s->dims, i, fl);
      if (fl)
        hlo_literal_set_f64(args[k], i, v);
      else
        hlo_literal_set_i64(args[k], i, s->dt == DT_PRED ? v != 0 : (int64_t)v);
    }
  }
  double t0 = now_s();
  Literal *res = hlo_interp_run(m, a, args, np, &err);
  double dt = now_s() - t0;
  if (!res) {
    fprintf(stderr, "\nhloc-bench-ref: %s\n", err.msg);
    return 1;
  }
  printf(" interp_s=%.6f", dt);
  fflush(stdout);
  int rc = 0;
  if (save) {
    static Literal *outs[4096];
    int no = 0;
    ref_flatten(res, outs, &no, 4096);
    mkdir(save, 0777);
    for (int k = 0; k < np + no && !err.set; k++) {
      char path[4096];
      snprintf(path, sizeof path, "%s/%s%d.npy", save, k < np ? "in" : "out", k < np ? k : k - np);
      hlo_npy_write(path, k < np ? args[k] : outs[k - np], &err);
    }
    if (err.set) {
      fprintf(stderr, "\nhloc-bench-ref: %s\n", err.msg);
      return 1;
    }
  }
  if (expect) {
    static Literal *leaves[4096];
    int nl = 0;
    ref_flatten(res, leaves, &nl, 4096);
    double max_abs = 0, max_rel = 0;
    long long bad = 0;
    for (int k = 0; k < nl; k++) {
      char path[4096];
      snprintf(path, sizeof path, "%s/out%d.npy", expect, k);
      Literal *want = hlo_npy_read(a, path, &err);
      HCompare c;
      /* the compiled result is "got"; the interpreter is the reference */
      if (!want || !hlo_literal_compare(want, leaves[k], rtol, atol, &c, &err)) {
        fprintf(stderr, "\nhloc-bench-ref: result %d: %s\n", k, err.msg);
        return 1;
      }
      if (c.max_abs > max_abs) max_abs = c.max_abs;
      if (c.max_rel > max_rel) max_rel = c.max_rel;
      bad += c.bad;
    }
    printf(" max_abs=%.3g max_rel=%.3g bad=%lld check=%s", max_abs, max_rel, bad,
           bad ? "FAIL" : "ok");
    rc = bad ? 3 : 0;
  }
  putchar('\n');
  hlo_arena_free(a);
  hlo_module_free(m);
  return rc;
}
