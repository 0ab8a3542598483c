/* tests/fuzz/fuzz_npy.c: libFuzzer target for the .npy reader.
 * Any input must yield a literal or a located error, never a crash or a leak. */
#include "hlo.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  HArena *a = hlo_arena_new();
  HErr err = {0};
  Literal *l = hlo_npy_parse(a, data, size, "fuzz.npy", &err);
  if (!l && !err.set) __builtin_trap(); /* failures must say why */
  hlo_arena_free(a);
  return 0;
}
