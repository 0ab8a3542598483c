/* targets/cuda/cuda_loop.c: while loops on the GPU, driven by the host.
 *
 * A while loop the optimizer left (a data-dependent trip count, or a counted loop kept as a
 * loop) runs in NAME_cuda_run as steps between control steps:
 *     copy init leaves -> state;  [set counter = trips]
 *     T: C's steps, [copy root -> pred], branch to E when pred is 0 (read back: a stream sync)
 *        or, counted: to E when the counter is 0, else counter - 1 (no condition, no sync);
 *     body's steps;  [copy moved leaves -> next];  [copy next -> state];  jump to T;  E:
 * as the CPU target's run function does (cpu_compile.c). The state is the while instruction's
 * storage in its computation's plan; the condition and body get plans of their own, whose heaps
 * (one for both: they never run at once), next-state block and predicate byte lie in temp above
 * the entry's heap (a nested loop's above its loop's). A leaf the body passes through unchanged
 * (weights, the scanned inputs) is read where the init value is, never copied in (and copied
 * into the state after the loop only when something reads it there). Every computation is
 * emitted with its region current (cc->region, cg.entry and cc->plan are its), so that the
 * kernels resolve their operands through cuda_ptr_of like the entry's. A copy whose source is
 * a constant (a loop counter's start) goes from the host. */
#include "cuda_impl.h"

#include <string.h>

typedef struct CuLoop {
  const HInstr *w; /* the while instruction */
  MemPlan cond_plan, body_plan;
  CuRegion cond, body;        /* the condition's and the body's values */
  int64_t next_off, pred_off; /* temp offsets of the next-state block and the predicate */
  int64_t trips;              /* a counted loop's trips (-1: data-dependent) */
  MemLoopInit init;           /* where its init value's leaves are, which are invariant */
} CuLoop;

enum { CL_MAX_TRIPS = 1 << 24 }; /* counted loops simulated up to this many trips */

/* ------------------------------------------------------------------ addresses */

/* The flat state leaf of region rg holding byte off of the state, when it is an invariant one
 * (read from its init value): its index, else -1; *lo its first byte. */
static int cl_invariant_leaf(const CuRegion *rg, int64_t off, int64_t *lo) {
  if (!rg->inv) return -1;
  for (int j = 0; j < rg->sshape->ntuple; j++) {
    *lo = memplan_leaf_offset(rg->sshape, j);
    if (rg->inv[j] && off >= *lo && off < *lo + (int64_t)hlo_shape_bytes(&rg->sshape->tuple[j]))
      return j;
  }
  return -1;
}

/* The device address of byte extra of instruction in's storage in region rg. */
static bool cl_ptr_in(const CuRegion *rg, const HInstr *in, int64_t extra, CuPtr *out) {
  const MemPlan *p = rg->plan;
  int64_t off = 0, lo = 0;
  int b = memplan_base(p, in->idx, &off);
  const MemBuf *mb = &p->bufs[b];
  off += extra;
  switch (mb->kind) {
  case MEM_PARAM: {
    if (rg->entry) {
      *out = (CuPtr){CU_ARG, (int)mb->param, off};
      return true;
    }
    int j = cl_invariant_leaf(rg, off, &lo);
    if (j >= 0) return cl_ptr_in(rg->outer, rg->inv[j], rg->inv_off[j] + off - lo, out);
    *out = rg->state;
    out->offset += off;
    return true;
  }
  case MEM_RESULT:
    *out = rg->entry ? (CuPtr){CU_RESULT, mb->result, off}
                     : (CuPtr){CU_TEMP, 0, rg->result_off[mb->result] + off};
    return true;
  case MEM_TEMP: *out = (CuPtr){CU_TEMP, 0, rg->heap_off + mb->offset + off}; return true;
  case MEM_CONST:
  case MEM_NONE:
  case MEM_ALIAS: break;
  }
  return false;
}

bool cuda_ptr_of(CudaCg *cc, const HInstr *in, CuPtr *out) {
  return cl_ptr_in(cc->region, in, 0, out);
}

/* The constant whose storage holds byte off of in's in region rg (NULL: none); *coff its byte. */
static const Literal *cl_const_in(const CuRegion *rg, const HInstr *in, int64_t off,
                                  int64_t *coff) {
  int64_t o = 0;
  int b = memplan_base(rg->plan, in->idx, &o);
  const HInstr *c = rg->comp->instrs[b];
  if (rg->plan->bufs[b].kind != MEM_CONST || !c->literal || c->literal->shape.dt == DT_TUPLE)
    return NULL;
  *coff = o + off;
  return c->literal;
}

/* A copy of bytes from (src, soff) in region srg to dst: device to device, or from the host
 * when the source is a constant. */
static bool cl_copy(CudaCg *cc, const HInstr *owner, CuPtr dst, const CuRegion *srg,
                    const HInstr *src, int64_t soff, int64_t bytes) {
  if (bytes <= 0) return true;
  CuPtr sp;
  int64_t coff = 0;
  const Literal *lit = NULL;
  if (!cl_ptr_in(srg, src, soff, &sp) && !(lit = cl_const_in(srg, src, soff, &coff))) {
    hlo_err_at(cc->cg.err, src, "CUDA target: internal error, a loop value without storage");
    return false;
  }
  CuStep *s = cuda_add_step(cc, CU_STEP_COPY, owner);
  s->dst = dst;
  s->bytes = bytes;
  s->hconst = lit;
  s->src = lit ? (CuPtr){CU_TEMP, 0, coff} : sp;
  return true;
}

/* ------------------------------------------------------------------ planning */

/* The invariant leaves of loop L (in region rg) that the regions read where the init value is
 * (memplan_loop_init): those whose init value has a device address (not a constant). */
static void cl_invariants(CudaCg *cc, CuLoop *L, const CuRegion *rg) {
  const MemLoopInit *li = &L->init;
  const HInstr **src = hlo_arena_alloc(cc->cg.scratch, sizeof *src * (size_t)(li->n + 1));
  for (int j = 0; j < li->n; j++) {
    CuPtr p;
    src[j] = li->invariant[j] && cl_ptr_in(rg, li->src[j], li->off[j], &p) ? li->src[j] : NULL;
  }
  L->body.inv = L->cond.inv = src;
  L->body.inv_off = L->cond.inv_off = li->off;
}

static bool cl_plan(CudaCg *cc, const HComp *c, const CuRegion *rg, int64_t *top, int depth);

/* Plan loop w of region rg: its regions from *top up, then the loops nested in it. */
static bool cl_plan_one(CudaCg *cc, const HInstr *w, const CuRegion *rg, int64_t *top, int depth) {
  GenCg *cg = &cc->cg;
  HComp *body = w->calls[0], *cond = w->calls[1];
  CuLoop *L = hlo_arena_alloc(cg->scratch, sizeof *L);
  memset(L, 0, sizeof *L);
  L->w = w;
  L->trips = opt_while_trips(w, CL_MAX_TRIPS);
  CuPtr state;
  if (!cl_ptr_in(rg, w, 0, &state)) {
    hlo_err_at(cg->err, w, "CUDA target: internal error, a while loop's state has no storage");
    return false;
  }
  if (!memplan_assign_body(body, cg->scratch, &L->body_plan, cg->err) ||
      !memplan_assign(cond, cg->scratch, &L->cond_plan, cg->err))
    return false;
  int n = hlo_shape_leaves(&w->shape);
  if (L->body_plan.nresults != n || L->cond_plan.nresults != 1) {
    hlo_err_at(cg->err, w,
               "CUDA target: internal error, while loop results do not match its state");
    return false;
  }
  int64_t *next = hlo_arena_alloc(cg->scratch, sizeof *next * (size_t)n);
  int64_t at = L->next_off = memplan_align(*top);
  for (int k = 0; k < n; k++) {
    next[k] = at;
    if (!memplan_leaf_stays(&L->body_plan, &w->shape, k))
      at += memplan_align(L->body_plan.results[k].size);
  }
  L->pred_off = memplan_align(at);
  int64_t *pred = hlo_arena_alloc(cg->scratch, sizeof *pred);
  *pred = L->pred_off;
  int64_t heap = L->pred_off + MEMPLAN_ALIGN;
  int64_t hsize = L->cond_plan.temp_bytes > L->body_plan.temp_bytes ? L->cond_plan.temp_bytes
                                                                    : L->body_plan.temp_bytes;
  L->cond = (CuRegion){cond, &L->cond_plan, false, heap, state, pred, rg, NULL, NULL, &w->shape};
  L->body = (CuRegion){body, &L->body_plan, false, heap, state, next, rg, NULL, NULL, &w->shape};
  memplan_loop_init(cg->scratch, w, &L->init);
  cl_invariants(cc, L, rg);
  cc->loops =
      hlo_arena_grow(cg->scratch, cc->loops, cc->nloops, &cc->loop_cap, 8, sizeof *cc->loops);
  cc->loops[cc->nloops++] = L;
  /* loops nested in the condition and in the body: above this loop's heap, from one offset */
  int64_t above = heap + memplan_align(hsize), ctop = above, btop = above;
  if (!cl_plan(cc, cond, &L->cond, &ctop, depth + 1) ||
      !cl_plan(cc, body, &L->body, &btop, depth + 1))
    return false;
  *top = ctop > btop ? ctop : btop;
  return true;
}

/* Plan the loops of computation c (region rg) from *top: loops of one computation run one after
 * the other, so all start at *top; *top becomes the highest end. */
static bool cl_plan(CudaCg *cc, const HComp *c, const CuRegion *rg, int64_t *top, int depth) {
  int64_t base = *top, high = base;
  for (int i = 0; i < c->ninstrs; i++) {
    const HInstr *w = c->instrs[i];
    if (w->op != OP_WHILE) continue;
    if (depth > 16) {
      hlo_err_at(cc->cg.err, w, "CUDA target: while loops nested more than 16 deep");
      return false;
    }
    int64_t t = base;
    if (!cl_plan_one(cc, w, rg, &t, depth)) return false;
    if (t > high) high = t;
  }
  *top = high;
  return true;
}

bool cuda_plan_loops(CudaCg *cc) {
  MemPlan *ep = &cc->plan;
  cc->entry_region = (CuRegion){cc->cg.entry, ep, true, 0, {0}, NULL, NULL, NULL, NULL, NULL};
  cc->region = &cc->entry_region;
  int64_t top = ep->temp_bytes;
  if (!cl_plan(cc, cc->cg.entry, &cc->entry_region, &top, 0)) return false;
  top = memplan_align(top);
  ep->temp_bytes = top; /* staging scratch (at every plan's temp_bytes) above every region */
  for (int i = 0; i < cc->nloops; i++)
    cc->loops[i]->cond_plan.temp_bytes = cc->loops[i]->body_plan.temp_bytes = top;
  /* the entry region keeps a copy: plan becomes each loop computation's while it is emitted */
  cc->entry_plan = *ep;
  cc->entry_region.plan = &cc->entry_plan;
  return true;
}

/* ------------------------------------------------------------------ steps */

/* Copies of loop L's init leaves into its state but for the invariant ones (at_exit: the
 * invariant leaves read after the loop, into the state then). */
static bool cl_state_copies(CudaCg *cc, const CuLoop *L, bool at_exit) {
  const HInstr *w = L->w;
  const MemLoopInit *li = &L->init;
  for (int j = 0; j < li->n; j++) {
    bool inv = L->body.inv[j] != NULL;
    if (inv != at_exit || (at_exit && !memplan_leaf_read(cc->region->comp, w, j))) continue;
    CuPtr dst = L->body.state;
    dst.offset += memplan_leaf_offset(&w->shape, j);
    if (!cl_copy(cc, w, dst, cc->region, li->src[j], li->off[j], li->bytes[j])) return false;
  }
  return true;
}

/* The body's moved leaves into the next-state block, then the next state over the state. */
static bool cl_next_state(CudaCg *cc, const CuLoop *L) {
  const HInstr *w = L->w;
  const MemPlan *bp = &L->body_plan;
  for (int r = 0; r < bp->nresults; r++) {
    const MemResult *mr = &bp->results[r];
    if (mr->copy && !memplan_leaf_stays(bp, &w->shape, r) &&
        !cl_copy(cc, w, (CuPtr){CU_TEMP, 0, L->body.result_off[r]}, &L->body,
                 L->body.comp->instrs[mr->instr], mr->offset, mr->size))
      return false;
  }
  for (int r = 0; r < bp->nresults; r++) {
    if (memplan_leaf_stays(bp, &w->shape, r)) continue;
    CuStep *s = cuda_add_step(cc, CU_STEP_COPY, w);
    s->src = (CuPtr){CU_TEMP, 0, L->body.result_off[r]};
    s->dst = L->body.state;
    s->dst.offset += memplan_leaf_offset(&w->shape, r);
    s->bytes = bp->results[r].size;
  }
  return true;
}

/* The steps of while loop w (see above). */
static bool cl_emit_while(CudaCg *cc, const HInstr *w) {
  CuLoop *L = NULL;
  for (int i = 0; i < cc->nloops && !L; i++)
    if (cc->loops[i]->w == w) L = cc->loops[i];
  HLO_ASSERT(L);
  if (!cl_state_copies(cc, L, false)) return false;
  int counter = -1;
  if (L->trips >= 0) {
    CuStep *s = cuda_add_step(cc, CU_STEP_SET, w);
    s->counter = counter = cc->ncounters++;
    s->trips = L->trips;
  }
  int top = cc->nsteps, exit_test;
  if (counter >= 0) {
    exit_test = cc->nsteps;
    cuda_add_step(cc, CU_STEP_COUNT, w)->counter = counter;
  } else {
    if (!cuda_emit_comp(cc, &L->cond)) return false;
    const MemResult *pr = &L->cond_plan.results[0];
    if (pr->copy && !cl_copy(cc, w, (CuPtr){CU_TEMP, 0, L->pred_off}, &L->cond,
                             L->cond.comp->instrs[pr->instr], pr->offset, 1))
      return false;
    exit_test = cc->nsteps;
    cuda_add_step(cc, CU_STEP_BRANCH, w)->src = (CuPtr){CU_TEMP, 0, L->pred_off};
  }
  if (!cuda_emit_comp(cc, &L->body) || !cl_next_state(cc, L)) return false;
  cuda_add_step(cc, CU_STEP_JUMP, w)->target = top;
  cc->steps[exit_test].target = cc->nsteps;
  return cl_state_copies(cc, L, true);
}

bool cuda_emit_comp(CudaCg *cc, const CuRegion *rg) {
  GenCg *cg = &cc->cg;
  const CuRegion *saved_rg = cc->region;
  HComp *saved_comp = cg->entry;
  MemPlan saved_plan = cc->plan;
  cc->region = rg;
  cg->entry = (HComp *)rg->comp;
  cc->plan = *rg->plan;
  bool ok = true;
  for (int i = 0; i < rg->comp->ninstrs && ok; i++) {
    HInstr *in = rg->comp->instrs[i];
    ok = in->op == OP_WHILE ? cl_emit_while(cc, in) : cuda_emit_instr(cc, in);
  }
  cc->region = saved_rg;
  cg->entry = saved_comp;
  cc->plan = saved_plan;
  return ok && !cg->err->set;
}
