/* bench/cpu/compile_bench.c: time hloc's CPU compilation of one module (a manual tool).
 *
 * Loads a module (binary proto or text), runs the optimizer (opt_optimize, default options)
 * and cpu_compile at -O2 for the host, writing OUT.o and OUT.h with symbol prefix "model",
 * and prints the wall time of each phase. Built by CMake against the project's libraries as
 * BUILD/hloc-bench-compile.
 * Usage: hloc-bench-compile MODULE OUT_BASE [OPT_LEVEL] */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "hlo.h"
#include "optimizer.h"
#include "proto.h"
#include "target.h"

static double cb_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s MODULE OUT_BASE [OPT_LEVEL]\n", argv[0]);
    return 2;
  }
  HErr err = {0};
  double t0 = cb_now();
  HModule *m = proto_load_file(argv[1], &err);
  if (!m) {
    fprintf(stderr, "%s\n", err.msg);
    return 1;
  }
  double t1 = cb_now();
  OptOpts oo = {0};
  if (!opt_optimize(m, &oo, &err)) {
    fprintf(stderr, "%s\n", err.msg);
    return 1;
  }
  double t2 = cb_now();
  char obj[1024], hdr[1024];
  snprintf(obj, sizeof obj, "%s.o", argv[2]);
  snprintf(hdr, sizeof hdr, "%s.h", argv[2]);
  static CpuKnobs knobs;
  cpu_knobs_from_env(&knobs);
  CpuOpts o = {0};
  o.knobs = &knobs;
  o.name = "model";
  o.out_path = obj;
  o.header_path = hdr;
  o.opt_level = argc > 3 ? atoi(argv[3]) : 2;
  if (!cpu_compile(m, &o, &err)) {
    fprintf(stderr, "%s\n", err.msg);
    return 1;
  }
  double t3 = cb_now();
  printf("load %.3f s, optimize %.3f s, cpu_compile %.3f s, total %.3f s\n", t1 - t0, t2 - t1,
         t3 - t2, t3 - t0);
  hlo_module_free(m);
  return 0;
}
