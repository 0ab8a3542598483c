/* optimizer/schedule.c: the schedule pass, the last of the pipeline.
 *
 * Reorders the entry computation for a small scratch heap with memplan_schedule (the
 * current order, a greedy list schedule and a DFS post-order, each planned by memplan_assign;
 * the least TEMP_BYTES wins). The CPU target plans and emits kernels in the entry's order, so
 * the order chosen here is the one the compiled code runs. Only the entry is scheduled (the
 * buffer plan covers the entry only); the decision goes to the pass log. */
#include "memplan.h"
#include "optimizer.h"

bool opt_schedule(HModule *m, PassCtx *pc) {
  if (!m->entry) return false;
  int64_t temp = 0;
  bool changed = memplan_schedule(m->entry, pc->scratch, &temp);
  if (pc->log)
    fprintf(pc->log, "schedule: entry %s: %s, TEMP_BYTES %lld\n", m->entry->name,
            changed ? "reordered" : "order kept", (long long)temp);
  return changed;
}
