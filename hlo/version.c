/* hlo/version.c: the compiler's version and the commit it was built from, for `hloc --version`
 * and the generated headers (so an object can be traced to its compiler). The values come
 * from gen/hloc_version.h, which tools/version.cmake rewrites in every build where they
 * change. */
#include "hlo.h"
#include "hloc_version.h"

const char *hlo_version(void) { return HLOC_VERSION; }

const char *hlo_commit(void) { return HLOC_COMMIT; }
