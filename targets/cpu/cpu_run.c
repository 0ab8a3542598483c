/* targets/cpu/cpu_run.c: run a module compiled for the host CPU inside this process, for
 * `hloc verify`'s kernel bisection.
 *
 * The module is compiled as any user's (cpu_compile into a private temporary folder), linked
 * into a shared object by the system's C compiler ($CC, else cc; the object is position
 * independent), loaded with dlopen and called through NAME_run with the arguments' row-major
 * data; the sizes the header defines (results, temp) are read back from the header. Each
 * result leaf becomes a literal of the entry root's leaf shape. Nothing of the generated code
 * differs from what a user links, so a kernel computes here what it computes there. */
#include "cpu_impl.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The value of "#define NAME value" in header text h, or -1. */
static long long cr_define(const char *h, const char *name) {
  char key[160];
  snprintf(key, sizeof key, "#define %s ", name);
  const char *p = strstr(h, key);
  return p ? strtoll(p + strlen(key), NULL, 10) : -1;
}

typedef int (*CrRunFn)(const void *const args[], void *const results[], void *temp);

/* Call the loaded run function on args; the result leaves into *out. */
static bool cr_call(void *so, const char *hdr, const HModule *m, Literal *const *args, int nargs,
                    HArena *a, Literal ***out, int *n, HErr *err) {
  CrRunFn run = (CrRunFn)dlsym(so, "hv_run");
  long long nres = cr_define(hdr, "HV_NUM_RESULTS"), temp = cr_define(hdr, "HV_TEMP_BYTES");
  const Shape *root = &m->entry->root->shape;
  const Shape **leaf = hlo_arena_alloc(a, sizeof *leaf * (size_t)(hlo_shape_leaves(root) + 1));
  int nl = hlo_shape_leaf_shapes(root, leaf, 0);
  if (!run || nres != nl || temp < 0) {
    hlo_err(err, m->file, NULL, NULL,
            "kernel bisection: the compiled module's interface is not "
            "the one expected (%lld results, %d leaves)",
            nres, nl);
    return false;
  }
  const void **ap = hlo_arena_alloc(a, sizeof *ap * (size_t)(nargs + 1));
  for (int i = 0; i < nargs; i++)
    ap[i] = args[i]->data;
  *out = hlo_arena_alloc(a, sizeof **out * (size_t)(nl + 1));
  void **rp = hlo_arena_alloc(a, sizeof *rp * (size_t)(nl + 1));
  for (int k = 0; k < nl; k++) {
    (*out)[k] = hlo_literal_new(a, leaf[k]);
    rp[k] = (*out)[k]->data;
  }
  void *t = hlo_arena_alloc(a, (size_t)temp + 64); /* 64-byte aligned */
  *n = nl;
  if (run(ap, rp, t)) {
    hlo_err(err, m->file, NULL, NULL, "kernel bisection: the compiled module's run failed");
    return false;
  }
  return true;
}

bool cpu_run_module(HModule *m, const CpuOpts *base, Literal *const *args, int nargs, HArena *a,
                    Literal ***out, int *n, HErr *err) {
  const char *tmp = getenv("TMPDIR");
  char dir[512], obj[600], hdr[600], so[600], cmd[2048];
  snprintf(dir, sizeof dir, "%s/hloc_run_XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(dir)) {
    hlo_err(err, m->file, NULL, NULL, "kernel bisection: cannot make a temporary folder");
    return false;
  }
  snprintf(obj, sizeof obj, "%s/hv.o", dir);
  snprintf(hdr, sizeof hdr, "%s/hv.h", dir);
  snprintf(so, sizeof so, "%s/hv.so", dir);
  CpuOpts o = *base;
  o.name = "hv", o.out_path = obj, o.header_path = hdr, o.emit = CPU_EMIT_OBJ;
  bool ok = cpu_compile(m, &o, err);
  const char *cc = getenv("CC");
  snprintf(cmd, sizeof cmd, "%s -shared -o '%s' '%s' -lm", cc && *cc ? cc : "cc", so, obj);
  if (ok && system(cmd) != 0) {
    hlo_err(err, m->file, NULL, NULL, "kernel bisection: linking the compiled module failed (%s)",
            cmd);
    ok = false;
  }
  char *h = NULL;
  size_t hl = 0;
  void *lib = ok ? dlopen(so, RTLD_NOW | RTLD_LOCAL) : NULL;
  if (ok && !lib) {
    hlo_err(err, m->file, NULL, NULL, "kernel bisection: cannot load the compiled module: %s",
            dlerror());
    ok = false;
  }
  ok = ok && hlo_read_file(hdr, &h, &hl, err) && cr_call(lib, h, m, args, nargs, a, out, n, err);
  free(h);
  if (lib) dlclose(lib);
  unlink(obj), unlink(hdr), unlink(so), rmdir(dir);
  return ok;
}
