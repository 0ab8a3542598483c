/* tools/hloc_run.c: run a module with the reference interpreter.
 *
 *   hloc-run FILE in0.npy in1.npy ... [-o DIR] [--expect out0.npy ...] [--rtol R] [--atol A]
 *            [--max-tol F]
 *
 * Inputs are .npy files, one per entry parameter in parameter order; a bf16 or f16 parameter
 * also takes 2-byte bit patterns ('<u2', ml_dtypes' '|V2'), an fp8 one (f8e4m3fn, f8e5m2)
 * byte patterns ('|u1', ml_dtypes' '|V1'). Results (the root, or each leaf of a tuple root,
 * flattened in order) are written to DIR/out<k>.npy (bf16 as '<u2' bits, fp8 as '|u1'). With
 * --expect, each result is compared with a reference and the max absolute and relative
 * errors are printed; the exit code is 1 when any element is outside the tolerance. A 16-bit
 * float result is also within tolerance when off by at most F (default 3e-2) of the reference's
 * largest magnitude: the corpus's bar for bf16, where one rounding of a large value is that. */
#include "hlo.h"
#include "proto.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void flatten(Literal *l, Literal **out, int *n, int cap) {
  if (l->shape.dt == DT_TUPLE) {
    for (int i = 0; i < l->shape.ntuple; i++)
      flatten(l->elems[i], out, n, cap);
  } else if (*n < cap) {
    out[(*n)++] = l;
  } else {
    (*n)++;
  }
}

int main(int argc, char **argv) {
  const char *file = NULL, *outdir = NULL;
  double rtol = 1e-4, atol = 1e-5, max_tol = HLO_LOWP_TOL;
  int nin = 0, nexp = 0;
  const char **ins = calloc((size_t)argc, sizeof *ins);
  const char **exps = calloc((size_t)argc, sizeof *exps);
  bool in_expect = false;
  HElided elided = {0};
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      puts("usage: hloc-run FILE in0.npy ... [-o DIR] [--expect out0.npy ...] [--rtol R] "
           "[--atol A] [--max-tol F] [--elided-constants=error|zero|random[:SEED]]");
      return 0;
    } else if (!strncmp(argv[i], "--elided-constants=", 19)) {
      HErr perr = {0};
      if (!hlo_elided_parse(argv[i] + 19, &elided, &perr)) {
        fprintf(stderr, "hloc-run: %s\n", perr.msg);
        return 1;
      }
    } else if (!strcmp(argv[i], "-o") && i + 1 < argc) {
      outdir = argv[++i];
      in_expect = false;
    } else if (!strcmp(argv[i], "--expect")) {
      in_expect = true;
    } else if ((!strcmp(argv[i], "--rtol") || !strcmp(argv[i], "--atol") ||
                !strcmp(argv[i], "--max-tol")) &&
               i + 1 < argc) {
      char *end;
      double v = strtod(argv[i + 1], &end);
      if (*end || v < 0) {
        fprintf(stderr, "hloc-run: bad tolerance '%s'\n", argv[i + 1]);
        return 1;
      }
      if (argv[i][2] == 'r')
        rtol = v;
      else if (argv[i][2] == 'a')
        atol = v;
      else
        max_tol = v;
      i++;
    } else if (argv[i][0] == '-') {
      fprintf(stderr, "hloc-run: unknown or incomplete option '%s'\n", argv[i]);
      return 1;
    } else if (!file) {
      file = argv[i];
    } else if (in_expect) {
      exps[nexp++] = argv[i];
    } else {
      ins[nin++] = argv[i];
    }
  }
  if (!file) {
    fputs("usage: hloc-run FILE in0.npy ... [-o DIR] [--expect out0.npy ...]\n", stderr);
    return 1;
  }
  HErr err = {0};
  int rc = 1;
  HArena *a = hlo_arena_new();
  HModule *m = proto_load_file(file, &err);
  if (!m || !hlo_verify(m, &err)) goto fail;
  hlo_fill_elided(m, &elided);
  hlo_flatten_entry_params(m, a); /* tuple-shaped parameters leaf by leaf, as in the objects */
  Literal **args = hlo_arena_alloc(a, sizeof(Literal *) * (size_t)(nin ? nin : 1));
  for (int i = 0; i < nin; i++) {
    if (!(args[i] = hlo_npy_read(a, ins[i], &err))) goto fail;
    if (i < m->entry->nparams) hlo_literal_bits_as(args[i], m->entry->params[i]->shape.dt);
  }
  Literal *res = hlo_interp_run(m, a, args, nin, &err);
  if (!res) goto fail;
  enum { MAXR = 4096 };
  Literal **leaves = hlo_arena_alloc(a, sizeof(Literal *) * MAXR);
  int nres = 0;
  flatten(res, leaves, &nres, MAXR);
  if (nres > MAXR) {
    hlo_err(&err, file, NULL, NULL, "more than %d results", MAXR);
    goto fail;
  }
  if (outdir) {
    mkdir(outdir, 0777);
    for (int k = 0; k < nres; k++) {
      char path[4096];
      snprintf(path, sizeof path, "%s/out%d.npy", outdir, k);
      if (!hlo_npy_write(path, leaves[k], &err)) goto fail;
    }
  }
  rc = 0;
  if (nexp) {
    if (nexp != nres) {
      hlo_err(&err, file, NULL, NULL, "%d expected outputs given, the module has %d results", nexp,
              nres);
      rc = 1;
      goto fail;
    }
    for (int k = 0; k < nres; k++) {
      Literal *want = hlo_npy_read(a, exps[k], &err);
      if (want) hlo_literal_bits_as(want, leaves[k]->shape.dt);
      DType dt = leaves[k]->shape.dt;
      double at = atol;
      if (want && (dt == DT_BF16 || dt == DT_F16) && max_tol * hlo_literal_max_abs(want) > at)
        at = max_tol * hlo_literal_max_abs(want);
      HCompare c;
      if (!want || !hlo_literal_compare(leaves[k], want, rtol, at, &c, &err)) {
        rc = 1;
        goto fail;
      }
      printf("result %d: max abs err %.3g, max rel err %.3g, %lld of %lld outside tolerance%s\n", k,
             c.max_abs, c.max_rel, (long long)c.bad, (long long)hlo_shape_elems(&leaves[k]->shape),
             c.bad ? " FAIL" : "");
      if (c.bad) {
        if (hlo_dtype_is_complex(dt))
          printf("  worst element %lld: got (%.9g, %.9g), expected (%.9g, %.9g)\n",
                 (long long)c.worst, c.worst_got, c.worst_got_im, c.worst_want, c.worst_want_im);
        else
          printf("  worst element %lld: got %.9g, expected %.9g\n", (long long)c.worst, c.worst_got,
                 c.worst_want);
        rc = 1;
      }
    }
  } else if (!outdir) {
    for (int k = 0; k < nres; k++) {
      char s[256];
      hlo_shape_snprint(s, sizeof s, &leaves[k]->shape, false);
      printf("result %d: %s\n", k, s);
    }
  }
fail:
  if (err.set) fprintf(stderr, "hloc-run: %s\n", err.msg);
  hlo_arena_free(a);
  hlo_module_free(m);
  free(ins);
  free(exps);
  return rc;
}
