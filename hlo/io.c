/* hlo/io.c: whole-file reads and atomic writes.
 *
 * Outputs are written to a temporary file beside the target and renamed into place, so a
 * failure never leaves a partial file under the requested name. A path that exists and is
 * not a regular file (/dev/null, a FIFO, a terminal) is written in place instead: renaming
 * over it would replace the device node with a file (as root, `-o /dev/null` did). */
#include "hlo.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

bool hlo_read_file(const char *path, char **buf, size_t *len, HErr *err) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    hlo_err(err, path, NULL, NULL, "cannot open: %s", strerror(errno));
    return false;
  }
  /* a regular file's size known: one buffer of that size, filled by one read (a growing
     buffer copied a 28 MB .npy of frozen weights several times over) */
  size_t cap = 1 << 16, n = 0;
  struct stat st;
  if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0)
    cap = (size_t)st.st_size + 1;
  char *b = malloc(cap + 1);
  if (!b) {
    fclose(f);
    hlo_err(err, path, NULL, NULL, "out of memory reading the file");
    return false;
  }
  for (;;) {
    if (n == cap) {
      cap *= 2;
      char *nb = realloc(b, cap + 1);
      if (!nb) {
        free(b);
        fclose(f);
        hlo_err(err, path, NULL, NULL, "out of memory reading the file");
        return false;
      }
      b = nb;
    }
    size_t r = fread(b + n, 1, cap - n, f);
    n += r;
    if (r == 0) break;
  }
  if (ferror(f)) {
    hlo_err(err, path, NULL, NULL, "read error: %s", strerror(errno));
    free(b);
    fclose(f);
    return false;
  }
  fclose(f);
  b[n] = 0;
  *buf = b;
  *len = n;
  return true;
}

bool hlo_write_file_atomic(const char *path, const void *data, size_t len, HErr *err) {
  struct stat st;
  if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
    if (S_ISDIR(st.st_mode)) {
      hlo_err(err, path, NULL, NULL, "cannot write: it is a directory");
      return false;
    }
    FILE *f = fopen(path, "wb");
    bool ok = f && fwrite(data, 1, len, f) == len;
    if (f) ok = (fclose(f) == 0) && ok;
    if (!ok) hlo_err(err, path, NULL, NULL, "cannot write: %s", strerror(errno ? errno : EIO));
    return ok;
  }
  size_t n = strlen(path);
  char *tmp = malloc(n + 32);
  snprintf(tmp, n + 32, "%s.tmp.%ld", path, (long)getpid());
  FILE *f = fopen(tmp, "wb");
  if (!f) {
    hlo_err(err, path, NULL, NULL, "cannot write: %s", strerror(errno));
    free(tmp);
    return false;
  }
  bool ok = fwrite(data, 1, len, f) == len;
  ok = (fclose(f) == 0) && ok;
  if (!ok || rename(tmp, path) != 0) {
    hlo_err(err, path, NULL, NULL, "cannot write: %s", strerror(errno ? errno : EIO));
    unlink(tmp);
    free(tmp);
    return false;
  }
  free(tmp);
  return true;
}

void hlo_str_printf(HStr *s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int need = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (need < 0) return;
  if (s->n + (size_t)need + 1 > s->cap) {
    size_t cap = (s->cap ? s->cap * 2 : 4096) + (size_t)need;
    char *p = realloc(s->p, cap);
    HLO_ASSERT(p);
    s->p = p;
    s->cap = cap;
  }
  va_start(ap, fmt);
  vsnprintf(s->p + s->n, (size_t)need + 1, fmt, ap);
  va_end(ap);
  s->n += (size_t)need;
}
