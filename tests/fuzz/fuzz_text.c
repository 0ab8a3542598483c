/* tests/fuzz/fuzz_text.c: libFuzzer target for the HLO text parser and printer.
 *
 * Any input must yield a module or a located error, never a crash, hang or leak. A module
 * that parses is printed and the text reparsed: the printer's output must always be accepted
 * by the parser and print back byte-identically (the round-trip property the tests check on
 * the corpus, here on whatever the fuzzer invents). */
#include <stdlib.h>
#include <string.h>

#include "hlo.h"

static char *print_mem(const HModule *m, size_t *n) {
  char *b = NULL;
  FILE *f = open_memstream(&b, n);
  if (!f) abort();
  hlo_print_module(f, m, NULL);
  fclose(f);
  return b;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  HErr err = {0};
  HModule *m = hlo_parse_text((const char *)data, size, "fuzz.hlo", &err);
  if (!m) {
    if (!err.set) __builtin_trap(); /* failures must say why */
    return 0;
  }
  size_t n1 = 0, n2 = 0;
  char *p1 = print_mem(m, &n1);
  HErr err2 = {0};
  HModule *m2 = hlo_parse_text(p1, n1, "printed.hlo", &err2);
  if (!m2) {
    fprintf(stderr, "printed module does not reparse: %s\n", err2.msg);
    __builtin_trap();
  }
  char *p2 = print_mem(m2, &n2);
  if (n1 != n2 || memcmp(p1, p2, n1)) {
    fprintf(stderr, "print/parse/print differs\n--- first\n%s\n--- second\n%s\n", p1, p2);
    __builtin_trap();
  }
  free(p1);
  free(p2);
  hlo_module_free(m2);
  hlo_module_free(m);
  return 0;
}
