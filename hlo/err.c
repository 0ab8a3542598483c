/* hlo/err.c: located error messages and the internal assertion handler.
 *
 * Every error that comes from the input is reported as one line naming the file, the
 * computation and the instruction, and travels back as a return value; the first error
 * recorded in an HErr wins so that follow-on failures do not bury the cause. */
#include "hlo.h"

#include <stdlib.h>
#include <string.h>

void hlo_verr(HErr *e, const char *file, const char *comp, const char *instr, const char *fmt,
              va_list ap) {
  if (!e || e->set) return;
  size_t n = sizeof e->msg, k = 0;
  int w;
  if (file && *file) {
    w = snprintf(e->msg + k, n - k, "%s: ", file);
    k += w > 0 ? (size_t)w : 0;
  }
  if (comp && *comp && k < n) {
    w = snprintf(e->msg + k, n - k, "computation '%s'%s", comp, instr ? ", " : ": ");
    k += w > 0 ? (size_t)w : 0;
  }
  if (instr && *instr && k < n) {
    w = snprintf(e->msg + k, n - k, "instruction '%s': ", instr);
    k += w > 0 ? (size_t)w : 0;
  }
  if (k < n) vsnprintf(e->msg + k, n - k, fmt, ap);
  /* one line: fold any newline that slipped into a message */
  for (char *p = e->msg; *p; p++)
    if (*p == '\n' || *p == '\r') *p = ' ';
  e->set = true;
}

void hlo_err(HErr *e, const char *file, const char *comp, const char *instr, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  hlo_verr(e, file, comp, instr, fmt, ap);
  va_end(ap);
}

void hlo_err_at(HErr *e, const HInstr *in, const char *fmt, ...) {
  const HComp *c = in ? in->parent : NULL;
  const char *file = c && c->mod ? c->mod->file : NULL;
  va_list ap;
  va_start(ap, fmt);
  hlo_verr(e, file, c ? c->name : NULL, in ? in->name : NULL, fmt, ap);
  va_end(ap);
}

void hlo_err_comp(HErr *e, const HComp *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  hlo_verr(e, c && c->mod ? c->mod->file : NULL, c ? c->name : NULL, NULL, fmt, ap);
  va_end(ap);
}

_Noreturn void hlo_assert_fail(const char *file, int line, const char *what) {
  fprintf(stderr, "hloc: internal error at %s:%d: assertion '%s' failed\n", file, line, what);
  abort();
}
