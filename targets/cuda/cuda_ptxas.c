/* targets/cuda/cuda_ptxas.c: assembling the kernels' PTX into a cubin with ptxas.
 *
 * The PTX goes into a private folder made by mkdtemp (mode 0700) under $TMPDIR or /tmp;
 * ptxas runs there through fork/execv (no shell, so no quoting issues) with
 *   -arch=<sm_XX> -O3 -v --split-compile 0 -o kernels.cubin kernels.ptx
 * (--split-compile 0: one optimizer thread per CPU)
 * and its stdout/stderr captured into a log file. The cubin is read back, every file and
 * the folder are removed whatever happened. The -v report is parsed per function:
 *   ptxas info    : Compiling entry function 'NAME' for 'sm_90'
 *   ptxas info    : Function properties for NAME
 *       0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
 *   ptxas info    : Used 12 registers, used 0 barriers, 380 bytes cmem[0]
 * and the figures stored on the kernel steps (for --stats). A failing ptxas is reported
 * with the first lines of its log. */
#include "cuda_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static CuStep *px_kernel(CudaCg *cc, const char *name, size_t n) {
  for (int i = 0; i < cc->nsteps; i++) {
    CuStep *s = &cc->steps[i];
    if (s->kind == CU_STEP_KERNEL && strlen(s->name) == n && !strncmp(s->name, name, n)) return s;
  }
  return NULL;
}

/* Parse the -v report into the kernel steps. */
static void px_parse(CudaCg *cc, const char *log) {
  CuStep *cur = NULL;
  for (const char *l = log; l && *l;) {
    const char *e = strchr(l, '\n');
    size_t len = e ? (size_t)(e - l) : strlen(l);
    const char *q;
    char line[512];
    snprintf(line, sizeof line, "%.*s", (int)(len < 511 ? len : 511), l);
    if ((q = strstr(line, "Compiling entry function '")) ||
        (q = strstr(line, "Function properties for "))) {
      const char *s = q[0] == 'C' ? q + 26 : q + 24;
      size_t n = strcspn(s, "' \r");
      cur = px_kernel(cc, s, n);
    } else if (cur && (q = strstr(line, "bytes spill stores"))) {
      /* "  N bytes stack frame, S bytes spill stores, L bytes spill loads" */
      const char *c = strchr(line, ',');
      if (c) cur->spill_st = atoi(c + 1);
      const char *c2 = c ? strchr(c + 1, ',') : NULL;
      if (c2) cur->spill_ld = atoi(c2 + 1);
    } else if (cur && (q = strstr(line, "Used "))) {
      cur->regs = atoi(q + 5);
    }
    l = e ? e + 1 : NULL;
  }
}

static bool px_slurp(const char *path, char **buf, size_t *len) {
  HErr e = {0};
  return hlo_read_file(path, buf, len, &e);
}

bool cuda_ptxas(CudaCg *cc, const char *ptxas, const char *ptx, size_t len, char **cubin,
                size_t *cubin_len, HErr *err) {
  const HModule *m = cc->cg.m;
  if (access(ptxas, X_OK) != 0) {
    hlo_err(err, m->file, NULL, NULL, "CUDA target: ptxas not found at '%s' (set CUDA_HOME)",
            ptxas);
    return false;
  }
  const char *tmp = getenv("TMPDIR");
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/hloc-cuda-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(dir)) {
    hlo_err(err, m->file, NULL, NULL, "CUDA target: cannot make a temporary folder: %s",
            strerror(errno));
    return false;
  }
  char in[4200], out[4200], logp[4200], arch[64];
  snprintf(in, sizeof in, "%s/kernels.ptx", dir);
  snprintf(out, sizeof out, "%s/kernels.cubin", dir);
  snprintf(logp, sizeof logp, "%s/ptxas.log", dir);
  snprintf(arch, sizeof arch, "-arch=%s", cc->arch);
  bool ok = false;
  char *log = NULL;
  size_t log_len = 0;
  FILE *f = fopen(in, "wb");
  if (!f || fwrite(ptx, 1, len, f) != len) {
    if (f) fclose(f);
    hlo_err(err, m->file, NULL, NULL, "CUDA target: cannot write '%s': %s", in, strerror(errno));
    goto cleanup;
  }
  fclose(f);
  pid_t pid = fork();
  if (pid < 0) {
    hlo_err(err, m->file, NULL, NULL, "CUDA target: fork failed: %s", strerror(errno));
    goto cleanup;
  }
  if (pid == 0) {
    int fd = open(logp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
      close(fd);
    }
    char *argv[] = {(char *)ptxas, arch, "-O3", "-v", "--split-compile", "0", "-o", out, in, NULL};
    execv(ptxas, argv);
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  px_slurp(logp, &log, &log_len);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    /* the first error lines of the log, on one line */
    char first[600] = "";
    size_t o = 0;
    for (size_t i = 0; log && i < log_len && o + 1 < sizeof first; i++)
      first[o++] = log[i] == '\n' ? ' ' : log[i];
    first[o] = 0;
    hlo_err(err, m->file, NULL, NULL, "CUDA target: ptxas %s failed (status %d): %s", cc->arch,
            WIFEXITED(status) ? WEXITSTATUS(status) : -1, first);
    goto cleanup;
  }
  if (!px_slurp(out, cubin, cubin_len)) {
    hlo_err(err, m->file, NULL, NULL, "CUDA target: ptxas wrote no cubin");
    goto cleanup;
  }
  if (log) px_parse(cc, log);
  /* steps sharing a kernel share its report */
  for (int i = 0; i < cc->nsteps; i++) {
    CuStep *s = &cc->steps[i];
    if (s->kind != CU_STEP_KERNEL) continue;
    const CuStep *f = px_kernel(cc, s->name, strlen(s->name));
    if (f && f != s) s->regs = f->regs, s->spill_st = f->spill_st, s->spill_ld = f->spill_ld;
  }
  ok = true;
cleanup:
  free(log);
  unlink(in);
  unlink(out);
  unlink(logp);
  rmdir(dir);
  return ok;
}
