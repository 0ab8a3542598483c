/* optimizer/flatten_params.c: the flatten-params pass, the optimizer's first: tuple-shaped
 * entry parameters become one array parameter per leaf (hlo_flatten_entry_params in
 * hlo/flatten.c, which the targets and tools also call on modules given unoptimized). */
#include "optimizer.h"

bool opt_flatten_params(HModule *m, PassCtx *pc) {
  return hlo_flatten_entry_params(m, pc->scratch);
}
