/* targets/cuda/cuda_run.c: a module compiled for the GPU as a bundle that runs wherever the
 * GPU is, for `hloc verify`'s kernel bisection.
 *
 * hloc often runs where no GPU is (a build machine), so the run is a folder: the module
 * compiled as any user's (hv.o, hv.h), its arguments as raw row-major bytes (in<k>.bin), a
 * small driver program generated here and linked here against the toolkit's stub libcuda
 * (run), and run.sh, which finds the CUDA libraries on the machine it is carried to, runs the
 * module once on its first GPU and writes every result as got<k>.bin. The folder's id (a hash
 * of the module's text, the arguments, the compile options and hloc's commit) is written at
 * preparation and checked when the results are read back, so results of another module or
 * another hloc are refused rather than compared. Nothing of the generated code differs from
 * what a user links: a kernel computes here what it computes in their program. */
#include "cuda_impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* The driver: reads in<k>.bin, runs hv_cuda_run once on the first GPU, writes got<k>.bin;
 * exit 3 when the machine has no usable GPU. */
static const char *const cr_driver =
    "/* run: written by hloc verify --target=cuda; runs hv.o once on the first GPU. */\n"
    "#include \"hv.h\"\n"
    "#include <cuda.h>\n"
    "#include <stdio.h>\n"
    "#include <stdlib.h>\n\n"
    "static int ck(CUresult r, const char *what) {\n"
    "  const char *s = NULL;\n"
    "  if (r == CUDA_SUCCESS) return 0;\n"
    "  cuGetErrorString(r, &s);\n"
    "  fprintf(stderr, \"run: %s: CUDA error %d (%s)\\n\", what, (int)r, s ? s : \"?\");\n"
    "  return 1;\n"
    "}\n\n"
    "/* dir/<what><k>.bin read (want bytes) or written (from buf) */\n"
    "static int file_io(const char *dir, const char *what, int k, void *buf, size_t want,\n"
    "                   int write) {\n"
    "  char p[4096], tmp[4200];\n"
    "  snprintf(p, sizeof p, \"%s/%s%d.bin\", dir, what, k);\n"
    "  snprintf(tmp, sizeof tmp, \"%s.tmp\", p);\n"
    "  FILE *f = fopen(write ? tmp : p, write ? \"wb\" : \"rb\");\n"
    "  size_t got = f ? (write ? fwrite(buf, 1, want, f) : fread(buf, 1, want, f)) : 0;\n"
    "  int extra = f && !write && fgetc(f) != EOF;\n"
    "  if (f && fclose(f)) got = 0;\n"
    "  if (got != want || extra || (write && rename(tmp, p))) {\n"
    "    fprintf(stderr, \"run: %s: cannot %s %zu bytes\\n\", p, write ? \"write\" : \"read\", "
    "want);\n"
    "    return 1;\n"
    "  }\n"
    "  return 0;\n"
    "}\n\n"
    "int main(int argc, char **argv) {\n"
    "  const char *dir = argc > 1 ? argv[1] : \".\";\n"
    "  CUdevice dev;\n"
    "  CUcontext ctx;\n"
    "  CUstream s;\n"
    "  CUdeviceptr d[HV_NUM_ARGS + HV_NUM_RESULTS + 1], temp;\n"
    "  int ndev = 0;\n"
    "  char name[256] = \"?\";\n"
    "  if (cuInit(0) != CUDA_SUCCESS || cuDeviceGetCount(&ndev) != CUDA_SUCCESS || !ndev) {\n"
    "    fprintf(stderr, \"run: no CUDA device on this machine\\n\");\n"
    "    return 3;\n"
    "  }\n"
    "  if (ck(cuDeviceGet(&dev, 0), \"cuDeviceGet\") || ck(cuDevicePrimaryCtxRetain(&ctx, dev), "
    "\"context\") ||\n"
    "      ck(cuCtxSetCurrent(ctx), \"context\") ||\n"
    "      ck(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), \"cuStreamCreate\"))\n"
    "    return 1;\n"
    "  cuDeviceGetName(name, sizeof name, dev);\n"
    "  for (int i = 0; i < HV_NUM_ARGS + HV_NUM_RESULTS; i++) {\n"
    "    int res = i >= HV_NUM_ARGS;\n"
    "    size_t n = res ? hv_result_info[i - HV_NUM_ARGS].bytes : hv_arg_info[i].bytes;\n"
    "    void *h = malloc(n ? n : 1);\n"
    "    if (!h || ck(cuMemAlloc(&d[i], n ? n : 1), \"cuMemAlloc\")) return 1;\n"
    "    if (!res && (file_io(dir, \"in\", i, h, n, 0) || ck(cuMemcpyHtoD(d[i], h, n), "
    "\"copy in\")))\n"
    "      return 1;\n"
    "    if (res && ck(cuMemsetD8(d[i], 0xff, n), \"cuMemsetD8\")) return 1; /* unwritten: NaN */\n"
    "    free(h);\n"
    "  }\n"
    "  if (ck(cuMemAlloc(&temp, HV_TEMP_BYTES ? HV_TEMP_BYTES : 256), \"cuMemAlloc (temp)\"))\n"
    "    return 1;\n"
    "  void *ap[HV_NUM_ARGS + 1], *rp[HV_NUM_RESULTS + 1];\n"
    "  for (int i = 0; i < HV_NUM_ARGS; i++) ap[i] = (void *)d[i];\n"
    "  for (int k = 0; k < HV_NUM_RESULTS; k++) rp[k] = (void *)d[HV_NUM_ARGS + k];\n"
    "  int rc = hv_cuda_run((const void *const *)ap, rp, (void *)temp, s);\n"
    "  if (rc) {\n"
    "    fprintf(stderr, \"run: hv_cuda_run returned %d\\n\", rc);\n"
    "    return 1;\n"
    "  }\n"
    "  if (ck(cuStreamSynchronize(s), \"the module's run\")) return 1;\n"
    "  for (int k = 0; k < HV_NUM_RESULTS; k++) {\n"
    "    size_t n = hv_result_info[k].bytes;\n"
    "    void *h = malloc(n ? n : 1);\n"
    "    if (!h || ck(cuMemcpyDtoH(h, d[HV_NUM_ARGS + k], n), \"copy out\") ||\n"
    "        file_io(dir, \"got\", k, h, n, 1))\n"
    "      return 1;\n"
    "    free(h);\n"
    "  }\n"
    "  printf(\"ran on %s: %d results in %s\\n\", name, HV_NUM_RESULTS, dir);\n"
    "  return 0;\n"
    "}\n";

/* run.sh: the CUDA libraries the driver needs and this machine lacks on its default paths
 * are searched for (not libcuda, the driver's own: without it there is no GPU to run on),
 * then the driver runs on the folder. */
static const char *const cr_script =
    "#!/bin/sh\n"
    "# Written by hloc verify --target=cuda: runs the module once on this machine's first GPU\n"
    "# and writes its results as got<k>.bin beside it. Exit 3: no GPU here.\n"
    "d=$(cd \"$(dirname \"$0\")\" && pwd)\n"
    "for lib in $(ldd \"$d/run\" 2>/dev/null | awk '/not found/ && !/libcuda[.]/ {print $1}'); do\n"
    "  f=$(find / -name \"$lib\" -not -path '/proc/*' 2>/dev/null | head -n 1)\n"
    "  [ -n \"$f\" ] && LD_LIBRARY_PATH=\"$(dirname "
    "\"$f\")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}\"\n"
    "done\n"
    "export LD_LIBRARY_PATH\n"
    "rm -f \"$d\"/got*.bin\n"
    "exec \"$d/run\" \"$d\"\n";

uint64_t cuda_bundle_id(const HModule *m, const CudaOpts *o, Literal *const *args, int nargs) {
  size_t len = 0;
  char *text = hlo_module_text(m, NULL, &len);
  uint64_t h = hlo_hash_bytes(HLO_HASH_START, text, text ? len : 0);
  free(text);
  for (int i = 0; i < nargs; i++)
    h = hlo_hash_bytes(h, args[i]->data, (size_t)hlo_shape_bytes(&args[i]->shape));
  char opts[256];
  snprintf(opts, sizeof opts, "%s %d %d %d %d %s", o->gpu_arch ? o->gpu_arch : "sm_90",
           (int)o->precision, o->no_cublas, o->opt_level, (int)o->gemm_prologues, hlo_commit());
  return hlo_hash_bytes(h, opts, strlen(opts));
}

/* dir/name into p; false with a located error when it does not fit or would break quoting. */
static bool cr_path(char *p, size_t np, const char *dir, const char *name, const HModule *m,
                    HErr *err) {
  if ((size_t)snprintf(p, np, "%s/%s", dir, name) >= np || strchr(dir, '\'')) {
    hlo_err(err, m->file, NULL, NULL, "kernel bisection: unusable bundle folder '%s'", dir);
    return false;
  }
  return true;
}

/* The arguments as dir/in<k>.bin. */
static bool cr_write_args(const HModule *m, Literal *const *args, int nargs, const char *dir,
                          HErr *err) {
  for (int i = 0; i < nargs; i++) {
    char name[32], p[4096];
    snprintf(name, sizeof name, "in%d.bin", i);
    if (!cr_path(p, sizeof p, dir, name, m, err) ||
        !hlo_write_file_atomic(p, args[i]->data, (size_t)hlo_shape_bytes(&args[i]->shape), err))
      return false;
  }
  return true;
}

/* The libraries header h says to link (its "#define HV_CUDA_LIBS "..."", -lcuda among them)
 * into libs; false when it says none. */
static bool cr_libs(const char *h, char *libs, size_t n) {
  const char *key = "#define HV_CUDA_LIBS \"", *p = strstr(h, key);
  const char *q = p ? strchr(p + strlen(key), '"') : NULL;
  if (!q || (size_t)(q - p) - strlen(key) >= n) return false;
  p += strlen(key);
  memcpy(libs, p, (size_t)(q - p)), libs[q - p] = 0;
  return true;
}

/* The driver, run.sh and the link of run (with $CC, else cc). */
static bool cr_link(const HModule *m, const CudaOpts *o, const char *dir, HErr *err) {
  char p[4096], hdr[4096], libs[512], cmd[16384];
  char *h = NULL;
  size_t hl = 0;
  if (!cr_path(hdr, sizeof hdr, dir, "hv.h", m, err) || !hlo_read_file(hdr, &h, &hl, err))
    return false;
  bool have_libs = cr_libs(h, libs, sizeof libs);
  free(h);
  if (!have_libs) {
    hlo_err(err, hdr, NULL, NULL, "kernel bisection: the header names no CUDA libraries");
    return false;
  }
  if (!cr_path(p, sizeof p, dir, "driver.c", m, err) ||
      !hlo_write_file_atomic(p, cr_driver, strlen(cr_driver), err) ||
      !cr_path(p, sizeof p, dir, "run.sh", m, err) ||
      !hlo_write_file_atomic(p, cr_script, strlen(cr_script), err))
    return false;
  chmod(p, 0755);
  const char *home = cuda_toolkit_home(o), *cc = getenv("CC");
  snprintf(cmd, sizeof cmd,
           "%s -O2 -std=gnu17 -I'%s' -I'%s/include' -o '%s/run' '%s/driver.c' '%s/hv.o' "
           "-L'%s/lib64/stubs' -L'%s/lib64' -Wl,-rpath,'%s/lib64' %s -lpthread -lm",
           cc && *cc ? cc : "cc", dir, home, dir, dir, dir, home, home, home, libs);
  if (system(cmd) != 0) {
    hlo_err(err, m->file, NULL, NULL, "kernel bisection: linking the GPU run failed (%s)", cmd);
    return false;
  }
  return true;
}

bool cuda_bundle_prepare(HModule *m, const CudaOpts *base, Literal *const *args, int nargs,
                         const char *dir, uint64_t bid, HErr *err) {
  char obj[4096], hdr[4096], idp[4096], id[32];
  if (mkdir(dir, 0755) && errno != EEXIST) {
    hlo_err(err, m->file, NULL, NULL, "kernel bisection: cannot make the bundle folder '%s': %s",
            dir, strerror(errno));
    return false;
  }
  if (!cr_path(obj, sizeof obj, dir, "hv.o", m, err) ||
      !cr_path(hdr, sizeof hdr, dir, "hv.h", m, err) ||
      !cr_path(idp, sizeof idp, dir, "bundle.id", m, err))
    return false;
  snprintf(id, sizeof id, "%016llx\n", (unsigned long long)bid);
  CudaOpts o = *base;
  o.name = "hv", o.out_path = obj, o.header_path = hdr, o.manifest_path = NULL;
  o.emit = CUDA_EMIT_OBJ, o.stats = NULL;
  unlink(idp); /* a folder half rewritten is no bundle */
  return cr_write_args(m, args, nargs, dir, err) && cuda_compile(m, &o, err) &&
         cr_link(m, &o, dir, err) && hlo_write_file_atomic(idp, id, strlen(id), err);
}

int cuda_bundle_run(const HModule *m, const char *dir, char *why, size_t nwhy, HErr *err) {
  char cmd[8400], log[4096];
  if (!cr_path(log, sizeof log, dir, "run.log", m, err)) return -1;
  snprintf(cmd, sizeof cmd, "sh '%s/run.sh' >'%s' 2>&1", dir, log);
  int st = system(cmd), rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  char *text = NULL;
  size_t len = 0;
  HErr lerr = {0};
  hlo_read_file(log, &text, &len, &lerr);
  const char *last = text ? text : "";
  for (size_t i = 0; i + 1 < len; i++) /* the log's last line */
    if (text[i] == '\n') last = text + i + 1;
  snprintf(why, nwhy, "%.*s", (int)strcspn(last, "\n"), last);
  free(text);
  if (rc == 0) return 1;
  if (rc == 3 || rc == 127) return 0; /* no GPU, or no CUDA driver to load */
  hlo_err(err, m->file, NULL, NULL, "kernel bisection: the GPU run failed (exit %d): %s", rc, why);
  return -1;
}

bool cuda_bundle_results(const HModule *m, const char *dir, uint64_t bid, HArena *a, Literal ***out,
                         int *n, HErr *err) {
  char p[4096], want[32];
  char *id = NULL;
  size_t len = 0;
  snprintf(want, sizeof want, "%016llx\n", (unsigned long long)bid);
  if (!cr_path(p, sizeof p, dir, "bundle.id", m, err) || !hlo_read_file(p, &id, &len, err))
    return false;
  bool same = len == strlen(want) && !memcmp(id, want, len);
  free(id);
  if (!same) {
    hlo_err(err, p, NULL, NULL,
            "this bundle was prepared from another module, other arguments or options, or "
            "another hloc; prepare it again");
    return false;
  }
  const Shape *root = &m->entry->root->shape;
  const Shape **leaf = hlo_arena_alloc(a, sizeof *leaf * (size_t)(hlo_shape_leaves(root) + 1));
  *n = hlo_shape_leaf_shapes(root, leaf, 0);
  *out = hlo_arena_alloc(a, sizeof **out * (size_t)(*n + 1));
  for (int k = 0; k < *n; k++) {
    char name[32], *data = NULL;
    size_t got = 0;
    snprintf(name, sizeof name, "got%d.bin", k);
    if (!cr_path(p, sizeof p, dir, name, m, err)) return false;
    if (access(p, F_OK)) {
      hlo_err(err, p, NULL, NULL, "no result: the bundle has not run (sh %s/run.sh, on a GPU)",
              dir);
      return false;
    }
    if (!hlo_read_file(p, &data, &got, err)) return false;
    (*out)[k] = hlo_literal_new(a, leaf[k]);
    size_t bytes = (size_t)hlo_shape_bytes(leaf[k]);
    if (got == bytes) memcpy((*out)[k]->data, data, bytes);
    free(data);
    if (got != bytes) {
      hlo_err(err, p, NULL, NULL, "%zu bytes, the result needs %zu", got, bytes);
      return false;
    }
  }
  return true;
}
