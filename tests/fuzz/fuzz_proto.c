/* tests/fuzz/fuzz_proto.c: libFuzzer target for the protobuf reader.
 *
 * Any input must yield a module or a located error, never a crash, a leak or a hang. A module
 * that is accepted must also hold the invariants the rest of hloc relies on: operands before
 * users in the same computation, callees before callers, a root and an entry. It is also
 * written back (proto/write.c): the writer succeeds or says why, and what it writes reads back
 * and writes again to the same bytes. Seed with the corpus module.pb files. */
#include "proto.h"

#include <stdlib.h>
#include <string.h>

static void check(const HModule *m) {
  if (!m->entry || m->entry->mod != m) __builtin_trap();
  for (int c = 0; c < m->ncomps; c++) {
    const HComp *cp = m->comps[c];
    if (!cp->root || cp->root->parent != cp || cp->idx != c) __builtin_trap();
    for (int i = 0; i < cp->ninstrs; i++) {
      const HInstr *in = cp->instrs[i];
      for (int j = 0; j < in->nops; j++)
        if (in->ops[j]->parent != cp || in->ops[j]->idx >= i) __builtin_trap();
      for (int j = 0; j < in->ncalls; j++)
        if (in->calls[j]->idx >= c) __builtin_trap();
    }
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  HErr err = {0};
  HModule *m = proto_read_module(data, size, "fuzz.pb", &err);
  if (!m && !err.set) __builtin_trap(); /* failures must say why */
  if (m && err.set) __builtin_trap();   /* success must not carry an error */
  if (m) check(m);
  uint8_t *b1 = NULL, *b2 = NULL;
  size_t n1 = 0, n2 = 0;
  HErr werr = {0};
  if (m && !proto_write_module(m, &b1, &n1, &werr) && !werr.set) __builtin_trap();
  if (b1) {
    HModule *back = proto_read_module(b1, n1, "fuzz-written.pb", &werr);
    if (!back) __builtin_trap(); /* what the writer writes, the reader reads */
    if (!proto_write_module(back, &b2, &n2, &werr) || n2 != n1 || memcmp(b1, b2, n1))
      __builtin_trap();
    hlo_module_free(back);
  }
  free(b1);
  free(b2);
  hlo_module_free(m);
  return 0;
}
