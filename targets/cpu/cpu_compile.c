/* targets/cpu/cpu_compile.c: the CPU target's driver, cpu_compile().
 *
 * Pipeline, top to bottom:
 *   1. lower: tuple-shaped parameters flattened (hlo_flatten_entry_params), every call inlined
 *      into the entry, fused computations and loop bodies (a call is a plain
 *      function call in HLO; inlining lets the buffer plan and the fusion design see through
 *      it), then check every instruction reachable from the entry is compilable (a located
 *      error otherwise, never a wrong object);
 *   2. plan: memplan_assign() places every entry value (args, results, rodata, scratch);
 *   3. kernels: one internal function per computing entry instruction, in entry order
 *      (cpu_kernel.c, with the elemental generator of cpu_elemental.c; dots and convolutions
 *      through the shared blocked GEMM of gemm/). Kernels see memory only through a
 *      per-task table of pointers (their ctx), so kernels whose IR is identical (repeated
 *      layers), or identical but for integer constants (a layer at another size), are merged
 *      into one function before optimization (cpu_share.c); kernel-private scratch
 *      (GEMM packing, staged operands) is appended to the plan's heap. A while loop the
 *      optimizer did not unroll gets plans for its condition and body, and
 *      their kernels are tasks too, between the copies, branch and jump of the loop (see
 *      "while loops" below);
 *   4. interface: NAME_run_packed_mt(args, results, temp, packed, pf, runner) fills each
 *      task's pointer table and calls every kernel in order,
 *      chunked kernels through pf when given, then copies result leaves that were not
 *      computed in place; NAME_run(), NAME_run_mt() and NAME_run_packed() call it without
 *      what they lack (packed: the weights NAME_pack() packed ahead, gemm/weights.c; NULL packs
 *      them in each run); NAME_arg_info[] and NAME_result_info[] describe the tensors;
 *   5. cpu_emit() (cpu_emit.c): LLVMVerifyModule, the new pass manager's default<On> pipeline
 *      with the target machine (host CPU and features unless told otherwise, so loops
 *      vectorize for the host) on the kernels and run functions, a light cleanup pipeline on
 *      the already vectorized GEMM function, then object / assembly / IR emitted to memory;
 *      objects of larger modules are optimized and code-generated in two parts on two
 *      threads and joined into one object (cpu_elf.c). The driver writes the output
 *      atomically with the header.
 * Output is deterministic: names and order depend on the module only.
 *
 * Knobs (cpu_knobs.def, in CpuOpts.knobs; `hloc --list-knobs`): TIME prints the phase times and
 * kernel counts to stderr, SMALL sets the small-kernel limit; the others steer cpu_share.c,
 * gemm/ and cpu_emit.c. */
#include "cpu_impl.h"

#include <llvm-c/TargetMachine.h>

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------------ lowering */

/* Replace the first call instruction of c by a copy of its callee. false when none left. */
static bool cp_inline_one(HModule *m, HComp *c) {
  int at = -1;
  for (int i = 0; i < c->ninstrs; i++)
    if (c->instrs[i]->op == OP_CALL && c->instrs[i]->ncalls == 1) {
      at = i;
      break;
    }
  if (at < 0) return false;
  HInstr *call = c->instrs[at];
  HComp *callee = call->calls[0];
  HArena *a = m->arena;
  int n = c->ninstrs - 1 + callee->ninstrs;
  HInstr **arr = hlo_arena_alloc(a, sizeof(HInstr *) * (size_t)n);
  HInstr **map = hlo_arena_alloc(a, sizeof(HInstr *) * (size_t)(callee->ninstrs + 1));
  hlo_comp_renumber(callee);
  int o = 0;
  for (int i = 0; i < at; i++)
    arr[o++] = c->instrs[i];
  for (int i = 0; i < callee->ninstrs; i++) {
    HInstr *ci = callee->instrs[i];
    if (ci->op == OP_PARAMETER && ci->param_num < call->nops) {
      map[i] = call->ops[ci->param_num];
      continue;
    }
    HInstr *ni = hlo_arena_memdup(a, ci, sizeof *ci);
    ni->parent = c;
    ni->name = hlo_module_unique_name(m, ci->name);
    ni->uid = m->next_uid++;
    ni->ops = hlo_arena_alloc(a, sizeof(HInstr *) * (size_t)(ci->nops ? ci->nops : 1));
    for (int k = 0; k < ci->nops; k++)
      ni->ops[k] = map[ci->ops[k]->idx];
    ni->nctrl = 0;
    ni->ctrl = NULL;
    map[i] = ni;
    arr[o++] = ni;
  }
  HInstr *res = map[callee->root->idx];
  for (int i = at + 1; i < c->ninstrs; i++)
    arr[o++] = c->instrs[i];
  c->instrs = arr;
  c->ninstrs = o;
  c->cap = n;
  for (int i = 0; i < o; i++) {
    HInstr *u = arr[i];
    for (int k = 0; k < u->nops; k++)
      if (u->ops[k] == call) u->ops[k] = res;
    for (int k = 0; k < u->nctrl; k++)
      if (u->ctrl[k] == call) u->ctrl[k] = res;
  }
  if (c->root == call) c->root = res;
  hlo_comp_renumber(c);
  return true;
}

static bool cp_check_comp(CpuCg *cg, HComp *c, int depth) {
  if (depth > 64) {
    hlo_err_comp(cg->g.err, c, "CPU target: computations nested too deeply");
    return false;
  }
  for (int i = 0; i < c->ninstrs; i++) {
    HInstr *in = c->instrs[i];
    /* (a conditional the optimizer left, one whose branches hold loops, runs as branches
       between kernel sequences: cp_emit_cond) */
    if (in->op != OP_CONDITIONAL && !gen_op_supported_ex(in, "CPU", true, cg->g.err)) return false;
    for (int j = 0; j < in->ncalls; j++)
      if (!cp_check_comp(cg, in->calls[j], depth + 1)) return false;
  }
  return true;
}

/* Inline every call into c, into the computations its fusions call and, recursively, into
 * the condition and body of its while loops. */
static void cp_inline_all(HModule *m, HComp *c, int depth) {
  while (cp_inline_one(m, c)) {
  }
  for (int i = 0; i < c->ninstrs; i++) {
    HInstr *in = c->instrs[i];
    if (in->op == OP_FUSION)
      for (int j = 0; j < in->ncalls; j++)
        while (cp_inline_one(m, in->calls[j])) {
        }
    if ((in->op == OP_WHILE || in->op == OP_CONDITIONAL) && depth < 64)
      for (int j = 0; j < in->ncalls; j++)
        cp_inline_all(m, in->calls[j], depth + 1);
  }
}

static bool cp_lower(CpuCg *cg) {
  HModule *m = cg->g.m;
  hlo_flatten_entry_params(m, cg->g.scratch); /* tuple-shaped parameters passed leaf by leaf */
  cp_inline_all(m, cg->g.entry, 0);
  hlo_module_renumber(m);
  return cp_check_comp(cg, cg->g.entry, 0);
}

/* ------------------------------------------------------------------ while loops
 *
 * A while loop the optimizer could not unroll (its trip count depends on the data) runs in
 * the run function: its condition's and body's kernels are tasks like the entry's, between
 * control tasks of the schedule (CpuTaskOp):
 *     copy init leaves -> state;  C: condition kernels; [copy root -> pred];
 *     branch to E when pred is false;  body kernels;  [copy moved leaves -> next];
 *     [copy next -> state, leaf by leaf];  jump to C;  E:
 * The state is the while instruction's own storage in its computation's plan (a tuple-shaped
 * value: one block, leaves back to back), which the condition and the body see as their
 * tuple parameter (memplan plans them like the entry, the parameter being that block). The
 * body's result leaves are computed into a next-state block of the same layout (the body
 * still reads the state while it computes them) and copied over the state once the body is
 * done; a leaf the body passes through at its own place is not copied at all (the weights a
 * loop carries along). The condition's result is the predicate byte. Each loop's next-state
 * block, predicate byte and one heap for its condition and body (they never run at once) get
 * scratch above the entry's heap (CpLoop; a nested loop's above its loop's; loops that never
 * run at once, in one computation or in a loop's condition and body, from the same offset),
 * below the kernels' private scratch; the regions are planned before any kernel is made, so
 * that private scratch offsets are known. */

static void cp_resolve(CpuCg *cg, const CpuRegion *rg, const CpuSlot *sl, int64_t *kind,
                       int64_t *index, int64_t *off, LLVMValueRef *gv);

typedef struct CpLoop {
  const HInstr *w; /* the while instruction */
  MemPlan cond_plan, body_plan;
  CpuRegion cond, body;       /* where the condition's and the body's values live */
  int64_t next_off, pred_off; /* scratch offsets of the next-state block and the predicate */
  MemLoopInit init;           /* where its init value's leaves are, which are invariant */
} CpLoop;

/* Per flat leaf of loop L's state, where the loop reads it: the init value's storage for an
 * invariant leaf (memplan_loop_init), neither copied in nor kept twice (that storage stays as it
 * is while the loop runs: it is live up to the loop instruction); in == NULL for the others. */
static CpuSlot *cp_invariant_leaves(CpuCg *cg, const CpLoop *L) {
  const MemLoopInit *li = &L->init;
  CpuSlot *src = hlo_arena_alloc(cg->g.scratch, sizeof *src * (size_t)(li->n + 1));
  for (int j = 0; j < li->n; j++)
    src[j] = (CpuSlot){CPU_SLOT_INSTR, li->invariant[j] ? li->src[j] : NULL, NULL, li->off[j]};
  return src;
}

/* Flat leaf k of (nested) tuple shape s. */
static const Shape *cp_leaf_shape(const Shape *s, int k) {
  if (s->dt != DT_TUPLE) return s;
  for (int j = 0; j < s->ntuple; j++) {
    int n = hlo_shape_leaves(&s->tuple[j]);
    if (k < n) return cp_leaf_shape(&s->tuple[j], k);
    k -= n;
  }
  return s;
}

static bool cp_plan_cond(CpuCg *cg, HInstr *c, const CpuRegion *rg, int depth);

/* Plan the loops (and conditionals) of computation c (placed by region rg), recursively: their
 * conditions, bodies and branches, and scratch for each above cg->loop_top. */
static bool cp_plan_loops(CpuCg *cg, HComp *c, const CpuRegion *rg, int depth) {
  /* loops of one computation run one after the other: their regions (with the regions of
     the loops nested in them above) all start at the same offset */
  int64_t base = cg->loop_top, top = base;
  for (int i = 0; i < c->ninstrs; i++) {
    HInstr *w = c->instrs[i];
    if (w->op == OP_CONDITIONAL) {
      cg->loop_top = base;
      if (!cp_plan_cond(cg, w, rg, depth)) return false;
      if (cg->loop_top > top) top = cg->loop_top;
      continue;
    }
    if (w->op != OP_WHILE) continue;
    cg->loop_top = base;
    if (depth > 16) {
      hlo_err_at(cg->g.err, w, "CPU target: while loops nested more than 16 deep");
      return false;
    }
    HComp *body = w->calls[0], *cond = w->calls[1];
    CpLoop *L = hlo_arena_alloc(cg->g.scratch, sizeof *L);
    L->w = w;
    int64_t skind, sindex, soff;
    LLVMValueRef sgv = NULL;
    cp_resolve(cg, rg, &(CpuSlot){CPU_SLOT_INSTR, w, NULL, 0}, &skind, &sindex, &soff, &sgv);
    if (skind != 1 && skind != 2) {
      hlo_err_at(
          cg->g.err, w,
          "CPU target: internal error, a while loop's state is neither scratch nor a result");
      return false;
    }
    if (!memplan_assign(cond, cg->g.scratch, &L->cond_plan, cg->g.err) ||
        !memplan_assign_body(body, cg->g.scratch, &L->body_plan, cg->g.err))
      return false;
    int nleaves = hlo_shape_leaves(&w->shape);
    if (L->body_plan.nresults != nleaves || L->cond_plan.nresults != 1) {
      hlo_err_at(cg->g.err, w,
                 "CPU target: internal error, while loop results do not match its state");
      return false;
    }
    /* the next state: a place for each leaf the body does not leave where it is */
    int64_t *next = hlo_arena_alloc(cg->g.scratch, sizeof(int64_t) * (size_t)nleaves);
    L->next_off = memplan_align(cg->loop_top);
    int64_t at = L->next_off;
    for (int k = 0; k < nleaves; k++) {
      next[k] = at;
      if (!memplan_leaf_stays(&L->body_plan, &w->shape, k))
        at += memplan_align(memplan_value_bytes(cp_leaf_shape(&w->shape, k)));
    }
    L->pred_off = memplan_align(at);
    /* the condition and the body never run at once: one heap for both */
    int64_t heap = L->pred_off + MEMPLAN_ALIGN;
    int64_t hsize = L->cond_plan.temp_bytes > L->body_plan.temp_bytes ? L->cond_plan.temp_bytes
                                                                      : L->body_plan.temp_bytes;
    cg->loop_top = heap + memplan_align(hsize);
    int64_t *pred = hlo_arena_alloc(cg->g.scratch, sizeof(int64_t));
    *pred = L->pred_off;
    memplan_loop_init(cg->g.scratch, w, &L->init);
    const CpuSlot *inv = cp_invariant_leaves(cg, L);
    L->cond = (CpuRegion){cond, &L->cond_plan, false, heap, (int)skind, sindex,
                          soff, pred,          rg,    inv,  &w->shape};
    L->body = (CpuRegion){body, &L->body_plan, false, heap, (int)skind, sindex,
                          soff, next,          rg,    inv,  &w->shape};
    cg->loops =
        hlo_arena_grow(cg->g.scratch, cg->loops, cg->nloops, &cg->loop_cap, 16, sizeof *cg->loops);
    cg->loops[cg->nloops++] = L;
    /* the loops nested in the condition and in the body: above this loop's heap, and (the
       two never running at once) from the same offset */
    int64_t above = cg->loop_top;
    if (!cp_plan_loops(cg, cond, &L->cond, depth + 1)) return false;
    int64_t cond_top = cg->loop_top;
    cg->loop_top = above;
    if (!cp_plan_loops(cg, body, &L->body, depth + 1)) return false;
    if (cond_top > cg->loop_top) cg->loop_top = cond_top;
    if (cg->loop_top > top) top = cg->loop_top;
  }
  cg->loop_top = top;
  return true;
}

CpuTask *cpu_task_push(CpuCg *cg) {
  cg->tasks =
      hlo_arena_grow(cg->g.scratch, cg->tasks, cg->ntasks, &cg->task_cap, 64, sizeof *cg->tasks);
  CpuTask *t = &cg->tasks[cg->ntasks++];
  *t = (CpuTask){.region = cg->region, .nchunks = 1};
  return t;
}

/* Append a control task (copy, branch, jump) with its slots. */
static CpuTask *cp_add_task(CpuCg *cg, CpuTaskOp op, const CpuSlot *slots, int nslots,
                            int64_t bytes) {
  CpuTask *t = cpu_task_push(cg);
  t->op = op;
  t->bytes = bytes;
  t->nslots = nslots;
  t->slots =
      nslots ? hlo_arena_memdup(cg->g.scratch, slots, sizeof(CpuSlot) * (size_t)nslots) : NULL;
  return t;
}

static void cp_copy(CpuCg *cg, CpuSlot dst, CpuSlot src, int64_t bytes) {
  if (bytes <= 0) return;
  CpuSlot s[2] = {dst, src};
  cp_add_task(cg, CPU_TASK_COPY, s, 2, bytes);
}

/* Copies of loop L's init value into its state block, but for the invariant leaves (read where
 * they are: cp_invariant_leaves); at_exit: the invariant leaves the loop's users read, copied
 * into the state block after the loop. */
static void cp_state_copies(CpuCg *cg, const CpLoop *L, bool at_exit) {
  const HInstr *w = L->w;
  const MemLoopInit *li = &L->init;
  for (int j = 0; j < li->n; j++) {
    if (li->invariant[j] != at_exit || (at_exit && !memplan_leaf_read(cg->g.entry, w, j))) continue;
    cp_copy(cg, (CpuSlot){CPU_SLOT_INSTR, w, NULL, memplan_leaf_offset(&w->shape, j)},
            (CpuSlot){CPU_SLOT_INSTR, li->src[j], NULL, li->off[j]}, li->bytes[j]);
  }
}

static bool cp_emit_comp(CpuCg *cg, const CpuRegion *rg);

/* The tasks of while loop w (see above). */
static bool cp_emit_while(CpuCg *cg, HInstr *w) {
  CpLoop *L = NULL;
  for (int i = 0; i < cg->nloops && !L; i++)
    if (cg->loops[i]->w == w) L = cg->loops[i];
  HLO_ASSERT(L);
  int first = cg->ntasks;
  cp_state_copies(cg, L, false);
  int top = cg->ntasks;
  if (!cp_emit_comp(cg, &L->cond)) return false;
  const MemResult *pr = &L->cond_plan.results[0];
  if (pr->copy) {
    const CpuRegion *outer = cg->region;
    cg->region = &L->cond;
    cp_copy(cg, (CpuSlot){CPU_SLOT_TEMP, NULL, NULL, L->pred_off},
            (CpuSlot){CPU_SLOT_INSTR, L->cond.comp->instrs[pr->instr], NULL, pr->offset}, pr->size);
    cg->region = outer;
  }
  int branch = cg->ntasks;
  cp_add_task(cg, CPU_TASK_BRANCH, &(CpuSlot){CPU_SLOT_TEMP, NULL, NULL, L->pred_off}, 1, 0);
  if (!cp_emit_comp(cg, &L->body)) return false;
  /* the new state: leaves the body passes through unchanged at their own place stay where
     they are; leaves it takes from elsewhere in the state (or from a constant) are gathered
     into the next-state block first, then every other leaf goes from there to the state */
  const CpuRegion *outer = cg->region;
  int n = L->body_plan.nresults;
  bool *stays = hlo_arena_alloc(cg->g.scratch, (size_t)n + 1);
  cg->region = &L->body;
  for (int r = 0; r < n; r++) {
    const MemResult *mr = &L->body_plan.results[r];
    if (!mr->copy) continue;
    stays[r] = memplan_leaf_stays(&L->body_plan, &w->shape, r);
    if (!stays[r])
      cp_copy(cg, (CpuSlot){CPU_SLOT_TEMP, NULL, NULL, L->body.result_off[r]},
              (CpuSlot){CPU_SLOT_INSTR, L->body.comp->instrs[mr->instr], NULL, mr->offset},
              mr->size);
  }
  cg->region = outer;
  for (int r = 0; r < n; r++)
    if (!stays[r])
      cp_copy(cg, (CpuSlot){CPU_SLOT_INSTR, w, NULL, memplan_leaf_offset(&w->shape, r)},
              (CpuSlot){CPU_SLOT_TEMP, NULL, NULL, L->body.result_off[r]},
              L->body_plan.results[r].size);
  cp_add_task(cg, CPU_TASK_JUMP, NULL, 0, 0)->target = top;
  cg->tasks[branch].target = cg->ntasks;
  cp_state_copies(cg, L, true);
  /* the loop's control tasks are named after it (a nested loop's already are) */
  for (int t = first; t < cg->ntasks; t++)
    if (cg->tasks[t].op != CPU_TASK_KERNEL && !cg->tasks[t].root) cg->tasks[t].root = w;
  return true;
}

/* ------------------------------------------------------------------ conditionals
 *
 * A conditional the optimizer left (a branch holds a loop, which may not run when its branch is
 * not taken) runs in the run function as branches between kernel sequences:
 *     pred selector:  branch to B1 when it is false;  B0;  jump to E;  B1;
 *     s32 selector:   T0: test = (index == 0); branch to T1 when not;  B0;  jump to E;
 *                     T1: ...;  B(n-1) (also every index out of range, as XLA);
 *     E: copy the result block -> the conditional's storage
 * where Bi is branch i's kernels and the copies of its result leaves that it does not compute
 * in place into the result block. A branch's computation is planned like a loop's condition,
 * its parameter read where the conditional's operand is (every leaf of its CpuRegion invariant,
 * resolved in the outer region), its results into one block of scratch; the branches never run
 * at once, so the block, one heap and the loops nested in them share one range of scratch,
 * above the outer region's heap. */

typedef struct CpCond {
  const HInstr *c; /* the conditional */
  int n;           /* branches */
  MemPlan *plans;  /* per branch: its values' plan */
  CpuRegion *rgs;  /* and where they live */
  int64_t *out;    /* scratch offset of each result leaf (the block) */
  int64_t test;    /* scratch offset of the selector test's byte */
} CpCond;

/* Branch b's region: its parameter's leaves where the operand's are; false (a located error)
 * for a nested tuple operand. */
static bool cp_cond_region(CpuCg *cg, CpCond *C, int b, int64_t heap, const CpuRegion *rg) {
  const HInstr *x = C->c->ops[b + 1];
  MemLoopInit li;
  memplan_value_leaves(cg->g.scratch, x, &li);
  Shape *st = hlo_arena_alloc(cg->g.scratch, sizeof *st);
  if (x->shape.dt == DT_TUPLE) {
    for (int j = 0; j < x->shape.ntuple; j++)
      if (x->shape.tuple[j].dt == DT_TUPLE) {
        hlo_err_at(cg->g.err, C->c, "CPU target: a conditional's operand %d is a nested tuple",
                   b + 1);
        return false;
      }
    *st = x->shape;
  } else {
    *st = hlo_shape_tuple(cg->g.scratch, 1, &x->shape);
  }
  CpuSlot *inv = hlo_arena_alloc(cg->g.scratch, sizeof *inv * (size_t)(li.n + 1));
  for (int j = 0; j < li.n; j++)
    inv[j] = (CpuSlot){CPU_SLOT_INSTR, li.src[j], NULL, li.off[j]};
  C->rgs[b] = (CpuRegion){C->c->calls[b], &C->plans[b], false, heap, 2, 0, 0, C->out, rg, inv, st};
  return true;
}

static bool cp_plan_cond(CpuCg *cg, HInstr *c, const CpuRegion *rg, int depth) {
  if (depth > 16) {
    hlo_err_at(cg->g.err, c, "CPU target: conditionals and loops nested more than 16 deep");
    return false;
  }
  CpCond *C = hlo_arena_alloc(cg->g.scratch, sizeof *C);
  int n = c->ncalls, nl = hlo_shape_leaves(&c->shape);
  *C = (CpCond){c,
                n,
                hlo_arena_alloc(cg->g.scratch, sizeof(MemPlan) * (size_t)n),
                hlo_arena_alloc(cg->g.scratch, sizeof(CpuRegion) * (size_t)n),
                hlo_arena_alloc(cg->g.scratch, sizeof(int64_t) * (size_t)(nl + 1)),
                0};
  int64_t at = memplan_align(cg->loop_top), hsize = 0;
  for (int k = 0; k < nl; k++) {
    C->out[k] = at;
    at += memplan_align(memplan_value_bytes(cp_leaf_shape(&c->shape, k)));
  }
  C->test = memplan_align(at);
  int64_t heap = C->test + MEMPLAN_ALIGN;
  for (int b = 0; b < n; b++) {
    if (!memplan_assign(c->calls[b], cg->g.scratch, &C->plans[b], cg->g.err)) return false;
    if (C->plans[b].nresults != nl) {
      hlo_err_at(cg->g.err, c, "CPU target: internal error, branch %d's results do not match", b);
      return false;
    }
    if (C->plans[b].temp_bytes > hsize) hsize = C->plans[b].temp_bytes;
    if (!cp_cond_region(cg, C, b, heap, rg)) return false;
  }
  cg->conds =
      hlo_arena_grow(cg->g.scratch, cg->conds, cg->nconds, &cg->cond_cap, 8, sizeof *cg->conds);
  cg->conds[cg->nconds++] = C;
  int64_t above = heap + memplan_align(hsize), top = above;
  for (int b = 0; b < n; b++) {
    cg->loop_top = above;
    if (!cp_plan_loops(cg, c->calls[b], &C->rgs[b], depth + 1)) return false;
    if (cg->loop_top > top) top = cg->loop_top;
  }
  cg->loop_top = top;
  return true;
}

/* The kernel setting the test byte to (index == b). */
static bool cp_cond_test(CpuCg *cg, const CpCond *C, int b) {
  GenKern *k = cpu_kern_begin(cg, C->c);
  LLVMTypeRef i32 = cg->g.i32;
  LLVMValueRef sel = LLVMBuildLoad2(k->B, i32, cpu_buffer(k, C->c->ops[0]), "");
  LLVMValueRef eq = LLVMBuildICmp(k->B, LLVMIntEQ, sel, LLVMConstInt(i32, (uint64_t)b, 0), "");
  LLVMValueRef dst = cpu_slot(k, (CpuSlot){CPU_SLOT_TEMP, NULL, NULL, C->test});
  LLVMBuildStore(k->B, LLVMBuildZExt(k->B, eq, cg->g.i8, ""), dst);
  return cpu_kern_end(k, 1);
}

/* Branch b's kernels, then the copies of its results that are not in the block already. */
static bool cp_cond_branch(CpuCg *cg, const CpCond *C, int b) {
  if (!cp_emit_comp(cg, &C->rgs[b])) return false;
  const CpuRegion *outer = cg->region;
  cg->region = &C->rgs[b];
  for (int k = 0; k < C->plans[b].nresults; k++) {
    const MemResult *mr = &C->plans[b].results[k];
    if (mr->copy)
      cp_copy(cg, (CpuSlot){CPU_SLOT_TEMP, NULL, NULL, C->out[k]},
              (CpuSlot){CPU_SLOT_INSTR, C->rgs[b].comp->instrs[mr->instr], NULL, mr->offset},
              mr->size);
  }
  cg->region = outer;
  return true;
}

/* The tasks of conditional c (see above). */
static bool cp_emit_cond(CpuCg *cg, HInstr *c) {
  CpCond *C = NULL;
  for (int i = 0; i < cg->nconds && !C; i++)
    if (cg->conds[i]->c == c) C = cg->conds[i];
  HLO_ASSERT(C);
  int first = cg->ntasks, *to_end = hlo_arena_alloc(cg->g.scratch, sizeof(int) * (size_t)C->n);
  bool pred = c->ops[0]->shape.dt == DT_PRED;
  for (int b = 0; b < C->n; b++) {
    int test = -1;
    if (b < C->n - 1) {
      CpuSlot t = {CPU_SLOT_INSTR, c->ops[0], NULL, 0};
      if (!pred) {
        if (!cp_cond_test(cg, C, b)) return false;
        t = (CpuSlot){CPU_SLOT_TEMP, NULL, NULL, C->test};
      }
      test = cg->ntasks;
      cp_add_task(cg, CPU_TASK_BRANCH, &t, 1, 0);
    }
    if (!cp_cond_branch(cg, C, b)) return false;
    to_end[b] = -1;
    if (b < C->n - 1) {
      to_end[b] = cg->ntasks;
      cp_add_task(cg, CPU_TASK_JUMP, NULL, 0, 0);
    }
    if (test >= 0) cg->tasks[test].target = cg->ntasks;
  }
  for (int b = 0; b < C->n; b++)
    if (to_end[b] >= 0) cg->tasks[to_end[b]].target = cg->ntasks;
  int nl = hlo_shape_leaves(&c->shape);
  for (int k = 0; k < nl; k++)
    cp_copy(cg, (CpuSlot){CPU_SLOT_INSTR, c, NULL, memplan_leaf_offset(&c->shape, k)},
            (CpuSlot){CPU_SLOT_TEMP, NULL, NULL, C->out[k]},
            memplan_value_bytes(cp_leaf_shape(&c->shape, k)));
  for (int t = first; t < cg->ntasks; t++)
    if (cg->tasks[t].op != CPU_TASK_KERNEL && !cg->tasks[t].root) cg->tasks[t].root = c;
  return true;
}

/* The kernels (and loops) of the computation placed by rg, in order. */
static bool cp_emit_comp(CpuCg *cg, const CpuRegion *rg) {
  const CpuRegion *saved_rg = cg->region;
  HComp *saved_comp = cg->g.entry;
  MemPlan saved_plan = cg->plan;
  cg->region = rg;
  cg->g.entry = (HComp *)rg->comp;
  cg->plan = *rg->plan;
  bool ok = true;
  for (int i = 0; i < cg->g.entry->ninstrs && ok; i++) {
    HInstr *in = cg->g.entry->instrs[i];
    ok = in->op == OP_WHILE         ? cp_emit_while(cg, in)
         : in->op == OP_CONDITIONAL ? cp_emit_cond(cg, in)
                                    : cpu_emit_instr(cg, in);
  }
  cg->region = saved_rg;
  cg->g.entry = saved_comp;
  cg->plan = saved_plan;
  return ok && !cg->g.err->set;
}

/* ------------------------------------------------------------------ types and constants */

LLVMValueRef cpu_rodata(CpuCg *cg, const char *name, const void *data, size_t n) {
  if (cg->raw_ok && n >= CPU_RAW_MIN) {
    /* declared here, defined by the data block that cpu_emit() joins to the object */
    LLVMValueRef gv = LLVMAddGlobal(cg->g.M, LLVMArrayType2(cg->g.i8, n), name);
    LLVMSetGlobalConstant(gv, 1);
    LLVMSetVisibility(gv, LLVMHiddenVisibility);
    LLVMSetAlignment(gv, 64);
    cg->raw_sym = hlo_arena_grow(cg->g.scratch, cg->raw_sym, cg->nraw, &cg->raw_symcap, 16,
                                 sizeof *cg->raw_sym);
    cg->raw_sym[cg->nraw++] = (CpuElfSym){hlo_arena_strdup(cg->g.scratch, name), data, n};
    return gv;
  }
  return gen_rodata(&cg->g, name, data, n);
}

/* The generator's hooks (GenCg): storage through the kernel's slots, read-only data through
 * cpu_rodata. */
static LLVMValueRef cp_rodata_hook(GenCg *g, const char *name, const void *data, size_t n) {
  return cpu_rodata(cpu_cg(g), name, data, n);
}

/* ------------------------------------------------------------------ interface */

static LLVMValueRef cp_str(CpuCg *cg, const char *s, const char *gname) {
  LLVMValueRef init = LLVMConstStringInContext(cg->g.C, s, (unsigned)strlen(s), 0);
  LLVMValueRef gv = LLVMAddGlobal(cg->g.M, LLVMTypeOf(init), gname);
  LLVMSetInitializer(gv, init);
  LLVMSetGlobalConstant(gv, 1);
  LLVMSetLinkage(gv, LLVMPrivateLinkage);
  LLVMSetUnnamedAddress(gv, LLVMGlobalUnnamedAddr);
  return gv;
}

/* NAME_arg_info / NAME_result_info: arrays of hloc_tensor_info. */
static void cp_info_table(CpuCg *cg, const char *which, int n, const char **names,
                          const Shape **shapes) {
  LLVMTypeRef fields[5] = {cg->g.ptr, cg->g.ptr, cg->g.i32, LLVMArrayType2(cg->g.i64, 8),
                           cg->g.i64};
  LLVMTypeRef st = LLVMStructTypeInContext(cg->g.C, fields, 5, 0);
  LLVMValueRef *elems = hlo_arena_alloc(cg->g.scratch, sizeof(LLVMValueRef) * (size_t)(n ? n : 1));
  for (int i = 0; i < n; i++) {
    char g[512];
    snprintf(g, sizeof g, "%s_%s_name%d", cg->o->name, which, i);
    LLVMValueRef nm = cp_str(cg, names[i], g);
    snprintf(g, sizeof g, "%s_%s_dtype%d", cg->o->name, which, i);
    LLVMValueRef dt = cp_str(cg, hlo_dtype_name(shapes[i]->dt), g);
    LLVMValueRef dims[8];
    for (int d = 0; d < 8; d++)
      dims[d] = LLVMConstInt(cg->g.i64,
                             d < shapes[i]->rank ? (unsigned long long)shapes[i]->dims[d] : 0, 0);
    LLVMValueRef vals[5] = {nm, dt, LLVMConstInt(cg->g.i32, (unsigned)shapes[i]->rank, 0),
                            LLVMConstArray2(cg->g.i64, dims, 8),
                            LLVMConstInt(cg->g.i64, hlo_shape_bytes(shapes[i]), 0)};
    elems[i] = LLVMConstNamedStruct(st, vals, 5);
  }
  LLVMValueRef arr = LLVMConstArray2(st, elems, (uint64_t)n);
  char g[512];
  snprintf(g, sizeof g, "%s_%s_info", cg->o->name, which);
  LLVMValueRef gv = LLVMAddGlobal(cg->g.M, LLVMTypeOf(arr), g);
  LLVMSetInitializer(gv, arr);
  LLVMSetGlobalConstant(gv, 1);
}

static LLVMValueRef cp_i64(CpuCg *cg, int64_t v) {
  return LLVMConstInt(cg->g.i64, (unsigned long long)v, 1);
}

/* Pointer to the storage of entry instruction i inside the run function. */
static LLVMValueRef cp_instr_ptr(CpuCg *cg, int i, LLVMValueRef args, LLVMValueRef results,
                                 LLVMValueRef temp) {
  LLVMBuilderRef B = cg->g.B;
  int64_t off = 0;
  int b = memplan_base(&cg->plan, i, &off);
  const MemBuf *mb = &cg->plan.bufs[b];
  LLVMValueRef src = NULL, ix;
  switch (mb->kind) {
  case MEM_PARAM:
    ix = cp_i64(cg, mb->param);
    src = LLVMBuildLoad2(B, cg->g.ptr, LLVMBuildInBoundsGEP2(B, cg->g.ptr, args, &ix, 1, ""), "");
    break;
  case MEM_RESULT:
    ix = cp_i64(cg, mb->result);
    src =
        LLVMBuildLoad2(B, cg->g.ptr, LLVMBuildInBoundsGEP2(B, cg->g.ptr, results, &ix, 1, ""), "");
    break;
  case MEM_TEMP:
    ix = cp_i64(cg, mb->offset);
    src = LLVMBuildInBoundsGEP2(B, cg->g.i8, temp, &ix, 1, "");
    break;
  case MEM_CONST: src = gen_const_global(&cg->g, cg->g.entry->instrs[b]); break;
  case MEM_NONE:
  case MEM_ALIAS: HLO_ASSERT(!"value without storage"); break;
  }
  if (off) {
    ix = cp_i64(cg, off);
    src = LLVMBuildInBoundsGEP2(B, cg->g.i8, src, &ix, 1, "");
  }
  return src;
}

/* Where a loop region's slot at byte off of the state block is read when that falls in an
 * invariant leaf (the init value's storage in rg->outer, cp_invariant_leaves): true and *to. */
static bool cp_invariant_slot(const CpuRegion *rg, int64_t off, CpuSlot *to) {
  if (!rg->inv) return false;
  for (int j = 0; j < rg->state->ntuple; j++) {
    int64_t lo = memplan_leaf_offset(rg->state, j);
    if (!rg->inv[j].in || off < lo || off >= lo + (int64_t)hlo_shape_bytes(&rg->state->tuple[j]))
      continue;
    *to = rg->inv[j];
    to->off += off - lo;
    return true;
  }
  return false;
}

/* Where slot sl of a task placed by region rg points, as an entry of the run function's slot
 * table: *kind 0 args[*index], 1 results[*index], 2 the scratch, 3 the global *gv, 4 the packed
 * weights' base (NULL when none were given); plus *off bytes. */
static void cp_resolve(CpuCg *cg, const CpuRegion *rg, const CpuSlot *sl, int64_t *kind,
                       int64_t *index, int64_t *off, LLVMValueRef *gv) {
  *kind = 2, *index = 0, *off = 0;
  if (sl->kind == CPU_SLOT_GLOBAL) {
    *kind = 3, *gv = sl->gv;
    return;
  }
  if (sl->kind == CPU_SLOT_PACKED) {
    *kind = 4;
    return;
  }
  if (sl->kind == CPU_SLOT_TEMP) {
    *off = sl->off;
    return;
  }
  int bi = memplan_base(rg->plan, sl->in->idx, off);
  const MemBuf *mb = &rg->plan->bufs[bi];
  *off += sl->off;
  switch (mb->kind) {
  case MEM_PARAM: {
    CpuSlot to;
    if (rg->entry)
      *kind = 0, *index = mb->param;
    else if (cp_invariant_slot(rg, *off, &to))
      cp_resolve(cg, rg->outer, &to, kind, index, off, gv); /* where the init value is */
    else
      *kind = rg->param_kind, *index = rg->param_index, *off += rg->param_off; /* a loop's state */
    break;
  }
  case MEM_RESULT:
    if (rg->entry)
      *kind = 1, *index = mb->result;
    else
      *off += rg->result_off[mb->result]; /* the next state, or the predicate */
    break;
  case MEM_TEMP: *off += mb->offset + (rg->entry ? 0 : rg->heap_off); break;
  case MEM_CONST: *kind = 3, *gv = gen_const_global(&cg->g, rg->comp->instrs[bi]); break;
  case MEM_NONE:
  case MEM_ALIAS: HLO_ASSERT(!"value without storage"); break;
  }
}

bool cpu_slots_same_address(CpuCg *cg, const CpuSlot *a, const CpuSlot *b) {
  if (!cg->region || a->kind == CPU_SLOT_PACKED || b->kind == CPU_SLOT_PACKED) return false;
  int64_t ka, ia, oa, kb, ib, ob;
  LLVMValueRef ga = NULL, gb = NULL;
  cp_resolve(cg, cg->region, a, &ka, &ia, &oa, &ga);
  cp_resolve(cg, cg->region, b, &kb, &ib, &ob, &gb);
  return ka == kb && ia == ib && oa == ob && ga == gb;
}

/* Slot sl's memory in a loop's region rg: the state (a result's or the scratch's bytes), the
 * next state and the heap (scratch), constants; [lo, hi) is the slot's value from its offset. */
static CpuMem cp_loop_mem(const CpuCg *cg, const CpuRegion *rg, const CpuSlot *sl) {
  int64_t off = 0;
  int bi = memplan_base(rg->plan, sl->in->idx, &off);
  const MemBuf *mb = &rg->plan->bufs[bi];
  off += sl->off;
  int64_t size = memplan_value_bytes(&sl->in->shape) - sl->off;
  CpuSlot to;
  switch (mb->kind) {
  case MEM_PARAM: /* the loop's state, or where an invariant leaf is read */
    if (cp_invariant_slot(rg, off, &to)) return cpu_slot_mem(cg, rg->outer, &to);
    off += rg->param_off;
    if (rg->param_kind == 1) return (CpuMem){CPU_MEM_RESULT, rg->param_index, off, off + size};
    return (CpuMem){CPU_MEM_SCRATCH, 0, off, off + size};
  case MEM_RESULT:
    off += rg->result_off[mb->result];
    return (CpuMem){CPU_MEM_SCRATCH, 0, off, off + size};
  case MEM_TEMP:
    off += mb->offset + rg->heap_off;
    return (CpuMem){CPU_MEM_SCRATCH, 0, off, off + size};
  case MEM_CONST: return (CpuMem){CPU_MEM_RODATA, 0, 0, 0};
  case MEM_NONE:
  case MEM_ALIAS: break;
  }
  return (CpuMem){CPU_MEM_UNKNOWN, 0, 0, 0};
}

CpuMem cpu_slot_mem(const CpuCg *cg, const CpuRegion *rg, const CpuSlot *sl) {
  CpuMem m = {CPU_MEM_UNKNOWN, 0, 0, 0};
  if (sl->kind == CPU_SLOT_GLOBAL || sl->kind == CPU_SLOT_PACKED) {
    m.kind = CPU_MEM_RODATA; /* never written by a run */
  } else if (sl->kind == CPU_SLOT_TEMP) {
    /* kernel-private scratch: above every plan's heap, its extent not recorded */
    if (sl->off >= cg->temp_base) m = (CpuMem){CPU_MEM_SCRATCH, 0, sl->off, INT64_MAX};
  } else if (rg && !rg->entry) {
    m = cp_loop_mem(cg, rg, sl);
  } else if (rg) {
    int64_t off = 0;
    int bi = memplan_base(rg->plan, sl->in->idx, &off);
    const MemBuf *mb = &rg->plan->bufs[bi];
    switch (mb->kind) {
    case MEM_PARAM: m = (CpuMem){CPU_MEM_ARG, mb->param, 0, 0}; break;
    case MEM_RESULT: m = (CpuMem){CPU_MEM_RESULT, mb->result, 0, INT64_MAX}; break;
    case MEM_TEMP: m = (CpuMem){CPU_MEM_SCRATCH, 0, mb->offset, mb->offset + mb->size}; break;
    case MEM_CONST: m.kind = CPU_MEM_RODATA; break;
    case MEM_NONE:
    case MEM_ALIAS: break;
    }
  }
  return m;
}

bool cpu_mem_disjoint(const CpuCg *cg, const CpuMem *a, const CpuMem *b) {
  if (a->kind == CPU_MEM_UNKNOWN || b->kind == CPU_MEM_UNKNOWN) return false;
  if (a->kind != b->kind) {
    const CpuMem *arg = a->kind == CPU_MEM_ARG ? a : b->kind == CPU_MEM_ARG ? b : NULL;
    const CpuMem *res = a->kind == CPU_MEM_RESULT ? a : b->kind == CPU_MEM_RESULT ? b : NULL;
    /* input_output_alias: the caller may pass one buffer as both */
    return !(arg && res && cg->plan.results[res->index].alias_param == arg->index);
  }
  switch (a->kind) {
  case CPU_MEM_ARG:
  case CPU_MEM_RODATA: return true; /* never written */
  case CPU_MEM_RESULT: return a->index != b->index || a->hi <= b->lo || b->hi <= a->lo;
  case CPU_MEM_SCRATCH: return a->hi <= b->lo || b->hi <= a->lo;
  case CPU_MEM_UNKNOWN: break;
  }
  return false;
}

/* --profile: NAME_task_names[t], what task t does: the instruction a kernel computes and
 * what computes it (the dot or convolution of a fusion, else its root's opcode) and how
 * (CpuTask.note: "fusion.72 (convolution, Winograd) 2/2"), numbered when one instruction has
 * several kernels; a loop's copies, exit test and back edge by the loop's name.
 * NAME_task_flops[t]: the floating-point operations of the dots and convolutions it computes,
 * counted on the last kernel of its instruction (the earlier ones pack operands) that does not
 * only finish another's work (CpuTask.finish). */
static void cp_task_names(CpuCg *cg) {
  LLVMValueRef *v = hlo_arena_alloc(cg->g.scratch, sizeof *v * (size_t)(cg->ntasks + 1));
  LLVMValueRef *fl = hlo_arena_alloc(cg->g.scratch, sizeof *fl * (size_t)(cg->ntasks + 1));
  for (int t = 0; t < cg->ntasks; t++) {
    const CpuTask *task = &cg->tasks[t];
    const HInstr *r = task->root;
    char s[512], g[512];
    double flops = 0;
    if (task->op != CPU_TASK_KERNEL) {
      const char *what = task->op == CPU_TASK_COPY     ? "copy"
                         : task->op == CPU_TASK_BRANCH ? "exit test"
                                                       : "back edge";
      snprintf(s, sizeof s, "%s: %s", r ? r->name : "while", what);
    } else {
      const HInstr *hero = r;
      if (r->op == OP_FUSION) {
        hero = r->calls[0]->root;
        for (int i = 0; i < r->calls[0]->ninstrs; i++) {
          HOp op = r->calls[0]->instrs[i]->op;
          if (op == OP_DOT || op == OP_CONVOLUTION) hero = r->calls[0]->instrs[i];
        }
      }
      int nth = 1, of = 0, last = -1;
      for (int u = 0; u < cg->ntasks; u++)
        if (cg->tasks[u].op == CPU_TASK_KERNEL && cg->tasks[u].root == r) {
          of++, nth += u < t;
          if (!cg->tasks[u].finish) last = u;
        }
      int at = snprintf(s, sizeof s, "%s (%s%s%s)", r->name, hlo_op_name(hero->op),
                        task->note ? ", " : "", task->note ? task->note : "");
      if (of > 1 && at > 0 && (size_t)at < sizeof s)
        snprintf(s + at, sizeof s - (size_t)at, " %d/%d", nth, of);
      if (t == last) {
        flops = hlo_instr_flops(r);
        if (r->op == OP_FUSION)
          for (int i = 0; i < r->calls[0]->ninstrs; i++)
            flops += hlo_instr_flops(r->calls[0]->instrs[i]);
      }
    }
    snprintf(g, sizeof g, "%s_task_name%d", cg->o->name, t);
    v[t] = cp_str(cg, s, g);
    fl[t] = LLVMConstReal(cg->g.f64, flops);
  }
  const char *which[2] = {"names", "flops"};
  for (int j = 0; j < 2; j++) {
    char g[512];
    snprintf(g, sizeof g, "%s_task_%s", cg->o->name, which[j]);
    LLVMValueRef arr = LLVMConstArray2(j ? cg->g.f64 : cg->g.ptr, j ? fl : v, (uint64_t)cg->ntasks);
    LLVMValueRef gv = LLVMAddGlobal(cg->g.M, LLVMTypeOf(arr), g);
    LLVMSetInitializer(gv, arr);
    LLVMSetGlobalConstant(gv, 1);
  }
}

static void cp_run_functions(CpuCg *cg) {
  LLVMBuilderRef B = cg->g.B;
  const char *n = cg->o->name;
  char name[512];
  LLVMTypeRef pf_ps[4] = {cg->g.ptr, cg->g.i64, cg->g.ptr, cg->g.ptr};
  LLVMTypeRef pf_ty = LLVMFunctionType(cg->g.vd, pf_ps, 4, 0);
  /* The walk over the tasks is NAME_run_packed_mt(args, results, temp, packed, pf, runner);
     with --profile it is NAME_run_profile, with a seventh parameter (ticks), and
     NAME_run_packed_mt calls it with ticks NULL. NAME_run, NAME_run_mt and NAME_run_packed
     call the walk with NULL for what they lack. */
  bool prof = cg->o->profile;
  LLVMTypeRef mt_ps[7] = {cg->g.ptr, cg->g.ptr, cg->g.ptr, cg->g.ptr,
                          cg->g.ptr, cg->g.ptr, cg->g.ptr};
  LLVMTypeRef walk_ty = LLVMFunctionType(cg->g.i32, mt_ps, prof ? 7 : 6, 0);
  snprintf(name, sizeof name, prof ? "%s_run_profile" : "%s_run_packed_mt", n);
  LLVMValueRef mt = LLVMAddFunction(cg->g.M, name, walk_ty);
  LLVMValueRef args = LLVMGetParam(mt, 0), results = LLVMGetParam(mt, 1),
               temp = LLVMGetParam(mt, 2);
  LLVMValueRef packed = LLVMGetParam(mt, 3), pf = LLVMGetParam(mt, 4), runner = LLVMGetParam(mt, 5);
  LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(cg->g.C, mt, "entry");
  LLVMBasicBlockRef bad = LLVMAppendBasicBlockInContext(cg->g.C, mt, "bad");
  LLVMBasicBlockRef go = LLVMAppendBasicBlockInContext(cg->g.C, mt, "go");
  LLVMPositionBuilderAtEnd(B, entry);
  int maxslots = 1;
  for (int t = 0; t < cg->ntasks; t++)
    if (cg->tasks[t].nslots > maxslots) maxslots = cg->tasks[t].nslots;
  LLVMValueRef ctx = LLVMBuildAlloca(B, LLVMArrayType2(cg->g.ptr, (uint64_t)maxslots), "ctx");
  /* profile: the counter (the time-stamp counter on x86) read before and after each task;
     the difference goes to ticks[t], or to a local when ticks is NULL */
  LLVMValueRef ticks = prof ? LLVMGetParam(mt, 6) : NULL, tick_sink = NULL, tick_fn = NULL,
               tick0 = NULL;
  LLVMTypeRef tick_ty = NULL;
  if (prof) {
    tick_sink = LLVMBuildAlloca(B, cg->g.i64, "tick_sink");
    unsigned id = LLVMLookupIntrinsicID("llvm.readcyclecounter", 21);
    tick_fn = LLVMGetIntrinsicDeclaration(cg->g.M, id, NULL, 0);
    tick_ty = LLVMIntrinsicGetType(cg->g.C, id, NULL, 0);
  }
  LLVMValueRef isbad = LLVMConstInt(cg->g.i1, 0, 0);
  LLVMValueRef nul = LLVMConstNull(cg->g.ptr);
  if (cg->g.entry->nparams > 0)
    isbad = LLVMBuildOr(B, isbad, LLVMBuildICmp(B, LLVMIntEQ, args, nul, ""), "");
  if (cg->plan.nresults > 0)
    isbad = LLVMBuildOr(B, isbad, LLVMBuildICmp(B, LLVMIntEQ, results, nul, ""), "");
  if (cg->plan.temp_bytes > 0)
    isbad = LLVMBuildOr(B, isbad, LLVMBuildICmp(B, LLVMIntEQ, temp, nul, ""), "");
  /* packed weights: 64-byte aligned (the GEMM's aligned loads) */
  LLVMValueRef pmis =
      LLVMBuildAnd(B, LLVMBuildPtrToInt(B, packed, cg->g.i64, ""), cp_i64(cg, 63), "");
  isbad = LLVMBuildOr(B, isbad, LLVMBuildICmp(B, LLVMIntNE, pmis, cp_i64(cg, 0), ""), "");
  LLVMBuildCondBr(B, isbad, bad, go);
  LLVMPositionBuilderAtEnd(B, bad);
  LLVMBuildRet(B, LLVMConstInt(cg->g.i32, 1, 0));
  LLVMPositionBuilderAtEnd(B, go);
  /* The schedule is data: a table of tasks {fn, nchunks, whole, first slot, slot count} and
     one of slots {kind, index, byte offset, global}, walked by one loop, so this function's
     size does not grow with the module (kinds: 0 args[index], 1 results[index], 2 temp,
     3 the global, 4 the packed weights: their base, NULL when none were given). */
  LLVMTypeRef sf[4] = {cg->g.i64, cg->g.i64, cg->g.i64, cg->g.ptr};
  LLVMTypeRef slot_ty = LLVMStructTypeInContext(cg->g.C, sf, 4, 0);
  LLVMTypeRef tf[6] = {cg->g.ptr, cg->g.i64, cg->g.i64, cg->g.i64, cg->g.i64, cg->g.i64};
  LLVMTypeRef tab_ty = LLVMStructTypeInContext(cg->g.C, tf, 6, 0);
  int nsl = 0;
  for (int t = 0; t < cg->ntasks; t++)
    nsl += cg->tasks[t].nslots;
  LLVMValueRef *sv = hlo_arena_alloc(cg->g.scratch, sizeof *sv * (size_t)(nsl + 1));
  LLVMValueRef *tv = hlo_arena_alloc(cg->g.scratch, sizeof *tv * (size_t)(cg->ntasks + 1));
  int at = 0;
  for (int t = 0; t < cg->ntasks; t++) {
    const CpuTask *task = &cg->tasks[t];
    /* op; a kernel's fn, chunks and whole flag; a copy's bytes (in the chunks field); a
       branch's or jump's target (in the whole field) */
    bool jumps = task->op == CPU_TASK_BRANCH || task->op == CPU_TASK_JUMP;
    LLVMValueRef f[6] = {task->fn ? task->fn : nul,
                         cp_i64(cg, task->op == CPU_TASK_COPY ? task->bytes : task->nchunks),
                         cp_i64(cg, jumps ? task->target : task->whole),
                         cp_i64(cg, at),
                         cp_i64(cg, task->nslots),
                         cp_i64(cg, task->op)};
    tv[t] = LLVMConstNamedStruct(tab_ty, f, 6);
    const CpuRegion *rg = task->region;
    for (int j = 0; j < task->nslots; j++) {
      int64_t kind, index, off;
      LLVMValueRef gv = nul;
      cp_resolve(cg, rg, &task->slots[j], &kind, &index, &off, &gv);
      LLVMValueRef e[4] = {cp_i64(cg, kind), cp_i64(cg, index), cp_i64(cg, off), gv};
      sv[at++] = LLVMConstNamedStruct(slot_ty, e, 4);
    }
  }
  char gname[512];
  snprintf(gname, sizeof gname, "%s_tasks", n);
  LLVMValueRef ttab = LLVMAddGlobal(cg->g.M, LLVMArrayType2(tab_ty, (uint64_t)cg->ntasks), gname);
  LLVMSetInitializer(ttab, LLVMConstArray2(tab_ty, tv, (uint64_t)cg->ntasks));
  snprintf(gname, sizeof gname, "%s_slots", n);
  LLVMValueRef stab = LLVMAddGlobal(cg->g.M, LLVMArrayType2(slot_ty, (uint64_t)nsl), gname);
  LLVMSetInitializer(stab, LLVMConstArray2(slot_ty, sv, (uint64_t)nsl));
  LLVMValueRef tabs[2] = {ttab, stab};
  for (int j = 0; j < 2; j++) {
    LLVMSetGlobalConstant(tabs[j], 1);
    LLVMSetLinkage(tabs[j], LLVMPrivateLinkage);
  }
  LLVMValueRef haspf = LLVMBuildICmp(B, LLVMIntNE, pf, nul, "");
  LLVMValueRef zero64 = cp_i64(cg, 0), one64 = cp_i64(cg, 1);
  /* for t in tasks */
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(B);
  LLVMBasicBlockRef thdr = LLVMAppendBasicBlockInContext(cg->g.C, mt, "task");
  LLVMBasicBlockRef tbody = LLVMAppendBasicBlockInContext(cg->g.C, mt, "taskb");
  LLVMBasicBlockRef tdone = LLVMAppendBasicBlockInContext(cg->g.C, mt, "tasks_done");
  LLVMBuildBr(B, thdr);
  LLVMPositionBuilderAtEnd(B, thdr);
  LLVMValueRef ti = LLVMBuildPhi(B, cg->g.i64, "t");
  LLVMAddIncoming(ti, &zero64, &pre, 1);
  LLVMBuildCondBr(B, LLVMBuildICmp(B, LLVMIntSLT, ti, cp_i64(cg, cg->ntasks), ""), tbody, tdone);
  LLVMPositionBuilderAtEnd(B, tbody);
  if (prof) tick0 = LLVMBuildCall2(B, tick_ty, tick_fn, NULL, 0, "tick0");
  LLVMValueRef tf_v[6];
  for (int j = 0; j < 6; j++) {
    LLVMValueRef gp = LLVMBuildInBoundsGEP2(B, LLVMArrayType2(tab_ty, (uint64_t)cg->ntasks), ttab,
                                            (LLVMValueRef[]){zero64, ti}, 2, "");
    tf_v[j] = LLVMBuildLoad2(B, tf[j], LLVMBuildStructGEP2(B, tab_ty, gp, (unsigned)j, ""), "");
  }
  /* for j in slots: ctx[j] = base(kind) + off */
  LLVMBasicBlockRef spre = LLVMGetInsertBlock(B);
  LLVMBasicBlockRef shdr = LLVMAppendBasicBlockInContext(cg->g.C, mt, "slot");
  LLVMBasicBlockRef sbody = LLVMAppendBasicBlockInContext(cg->g.C, mt, "slotb");
  LLVMBasicBlockRef k0 = LLVMAppendBasicBlockInContext(cg->g.C, mt, "arg");
  LLVMBasicBlockRef k1 = LLVMAppendBasicBlockInContext(cg->g.C, mt, "res");
  LLVMBasicBlockRef kj = LLVMAppendBasicBlockInContext(cg->g.C, mt, "slotj");
  LLVMBasicBlockRef sdone = LLVMAppendBasicBlockInContext(cg->g.C, mt, "slots_done");
  LLVMBuildBr(B, shdr);
  LLVMPositionBuilderAtEnd(B, shdr);
  LLVMValueRef sj = LLVMBuildPhi(B, cg->g.i64, "j");
  LLVMAddIncoming(sj, &zero64, &spre, 1);
  LLVMBuildCondBr(B, LLVMBuildICmp(B, LLVMIntSLT, sj, tf_v[4], ""), sbody, sdone);
  LLVMPositionBuilderAtEnd(B, sbody);
  LLVMValueRef sgp =
      LLVMBuildInBoundsGEP2(B, LLVMArrayType2(slot_ty, (uint64_t)nsl), stab,
                            (LLVMValueRef[]){zero64, LLVMBuildNSWAdd(B, tf_v[3], sj, "")}, 2, "");
  LLVMValueRef skind =
      LLVMBuildLoad2(B, cg->g.i64, LLVMBuildStructGEP2(B, slot_ty, sgp, 0, ""), "");
  LLVMValueRef sidx = LLVMBuildLoad2(B, cg->g.i64, LLVMBuildStructGEP2(B, slot_ty, sgp, 1, ""), "");
  LLVMValueRef soff = LLVMBuildLoad2(B, cg->g.i64, LLVMBuildStructGEP2(B, slot_ty, sgp, 2, ""), "");
  LLVMValueRef sgv = LLVMBuildLoad2(B, cg->g.ptr, LLVMBuildStructGEP2(B, slot_ty, sgp, 3, ""), "");
  LLVMValueRef tg =
      LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntEQ, skind, cp_i64(cg, 2), ""), temp, sgv, "");
  tg = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntEQ, skind, cp_i64(cg, 4), ""), packed, tg, "");
  LLVMValueRef sw = LLVMBuildSwitch(B, skind, kj, 2);
  LLVMAddCase(sw, zero64, k0);
  LLVMAddCase(sw, one64, k1);
  LLVMPositionBuilderAtEnd(B, k0);
  LLVMValueRef va =
      LLVMBuildLoad2(B, cg->g.ptr, LLVMBuildInBoundsGEP2(B, cg->g.ptr, args, &sidx, 1, ""), "");
  LLVMBuildBr(B, kj);
  LLVMPositionBuilderAtEnd(B, k1);
  LLVMValueRef vr =
      LLVMBuildLoad2(B, cg->g.ptr, LLVMBuildInBoundsGEP2(B, cg->g.ptr, results, &sidx, 1, ""), "");
  LLVMBuildBr(B, kj);
  LLVMPositionBuilderAtEnd(B, kj);
  LLVMValueRef base = LLVMBuildPhi(B, cg->g.ptr, "");
  LLVMValueRef inc[3] = {va, vr, tg};
  LLVMBasicBlockRef incb[3] = {k0, k1, sbody};
  LLVMAddIncoming(base, inc, incb, 3);
  LLVMValueRef sp = LLVMBuildInBoundsGEP2(B, cg->g.i8, base, &soff, 1, "");
  LLVMBuildStore(B, sp, LLVMBuildInBoundsGEP2(B, cg->g.ptr, ctx, &sj, 1, ""));
  LLVMValueRef sjn = LLVMBuildNSWAdd(B, sj, one64, "");
  LLVMAddIncoming(sj, &sjn, &kj, 1);
  LLVMBuildBr(B, shdr);
  LLVMPositionBuilderAtEnd(B, sdone);
  LLVMValueRef fn = tf_v[0], nch = tf_v[1], whole = tf_v[2], op = tf_v[5];
  LLVMBasicBlockRef kern = LLVMAppendBasicBlockInContext(cg->g.C, mt, "kernel");
  LLVMBasicBlockRef next = LLVMAppendBasicBlockInContext(cg->g.C, mt, "next");
  LLVMValueRef tn = LLVMBuildNSWAdd(B, ti, one64, ""); /* (made here: dominates next) */
  /* control tasks only where the module has while loops or conditionals: the run function
     stays a plain walk over the kernels otherwise */
  bool control = cg->nloops > 0 || cg->nconds > 0;
  LLVMBasicBlockRef cpy = NULL, brn = NULL, jmp = NULL;
  LLVMValueRef bt = NULL;
  if (!control) {
    LLVMBuildBr(B, kern);
  } else {
    cpy = LLVMAppendBasicBlockInContext(cg->g.C, mt, "copy");
    brn = LLVMAppendBasicBlockInContext(cg->g.C, mt, "branch");
    jmp = LLVMAppendBasicBlockInContext(cg->g.C, mt, "jump");
    LLVMValueRef opsw = LLVMBuildSwitch(B, op, kern, 3);
    LLVMAddCase(opsw, cp_i64(cg, CPU_TASK_COPY), cpy);
    LLVMAddCase(opsw, cp_i64(cg, CPU_TASK_BRANCH), brn);
    LLVMAddCase(opsw, cp_i64(cg, CPU_TASK_JUMP), jmp);
    /* a loop's copy: memmove(ctx[0], ctx[1], bytes) */
    LLVMPositionBuilderAtEnd(B, cpy);
    LLVMValueRef i0 = zero64;
    LLVMValueRef cdst =
        LLVMBuildLoad2(B, cg->g.ptr, LLVMBuildInBoundsGEP2(B, cg->g.ptr, ctx, &i0, 1, ""), "");
    LLVMValueRef csrc =
        LLVMBuildLoad2(B, cg->g.ptr, LLVMBuildInBoundsGEP2(B, cg->g.ptr, ctx, &one64, 1, ""), "");
    LLVMBuildMemMove(B, cdst, 1, csrc, 1, nch);
    LLVMBuildBr(B, next);
    /* a loop's exit test: to the target when the predicate byte is zero */
    LLVMPositionBuilderAtEnd(B, brn);
    LLVMValueRef pp =
        LLVMBuildLoad2(B, cg->g.ptr, LLVMBuildInBoundsGEP2(B, cg->g.ptr, ctx, &i0, 1, ""), "");
    LLVMValueRef pv = LLVMBuildLoad2(B, cg->g.i8, pp, "");
    bt = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntEQ, pv, LLVMConstInt(cg->g.i8, 0, 0), ""),
                         whole, tn, "");
    LLVMBuildBr(B, next);
    LLVMPositionBuilderAtEnd(B, jmp);
    LLVMBuildBr(B, next);
  }
  /* a kernel: one call, the parallel-for, the whole work at once, or chunk by chunk */
  LLVMPositionBuilderAtEnd(B, kern);
  LLVMBasicBlockRef one = LLVMAppendBasicBlockInContext(cg->g.C, mt, "one");
  LLVMBasicBlockRef many = LLVMAppendBasicBlockInContext(cg->g.C, mt, "many");
  LLVMBasicBlockRef par = LLVMAppendBasicBlockInContext(cg->g.C, mt, "par");
  LLVMBasicBlockRef ser = LLVMAppendBasicBlockInContext(cg->g.C, mt, "ser");
  LLVMBasicBlockRef all = LLVMAppendBasicBlockInContext(cg->g.C, mt, "all");
  LLVMBasicBlockRef sloop = LLVMAppendBasicBlockInContext(cg->g.C, mt, "sloop");
  LLVMBuildCondBr(B, LLVMBuildICmp(B, LLVMIntSLE, nch, one64, ""), one, many);
  LLVMPositionBuilderAtEnd(B, one);
  LLVMBuildCall2(B, cg->task_ty, fn, (LLVMValueRef[]){ctx, zero64}, 2, "");
  LLVMBuildBr(B, next);
  LLVMPositionBuilderAtEnd(B, many);
  LLVMBuildCondBr(B, haspf, par, ser);
  LLVMPositionBuilderAtEnd(B, par);
  LLVMBuildCall2(B, pf_ty, pf, (LLVMValueRef[]){runner, nch, fn, ctx}, 4, "");
  LLVMBuildBr(B, next);
  LLVMPositionBuilderAtEnd(B, ser);
  LLVMBuildCondBr(B, LLVMBuildICmp(B, LLVMIntNE, whole, zero64, ""), all, sloop);
  LLVMPositionBuilderAtEnd(B, all);
  LLVMBuildCall2(B, cg->task_ty, fn, (LLVMValueRef[]){ctx, nch}, 2, "");
  LLVMBuildBr(B, next);
  LLVMPositionBuilderAtEnd(B, sloop);
  LLVMValueRef ci = LLVMBuildPhi(B, cg->g.i64, "c");
  LLVMAddIncoming(ci, &zero64, &ser, 1);
  LLVMBuildCall2(B, cg->task_ty, fn, (LLVMValueRef[]){ctx, ci}, 2, "");
  LLVMValueRef cn = LLVMBuildNSWAdd(B, ci, one64, "");
  LLVMAddIncoming(ci, &cn, &sloop, 1);
  LLVMBuildCondBr(B, LLVMBuildICmp(B, LLVMIntSLT, cn, nch, ""), sloop, next);
  LLVMPositionBuilderAtEnd(B, next);
  LLVMValueRef tnext = LLVMBuildPhi(B, cg->g.i64, "tnext");
  LLVMValueRef tin[7] = {tn, tn, tn, tn, tn, bt, whole};
  LLVMBasicBlockRef tinb[7] = {one, par, all, sloop, cpy, brn, jmp};
  LLVMAddIncoming(tnext, tin, tinb, control ? 7 : 4);
  if (prof) {
    LLVMValueRef dt =
        LLVMBuildNUWSub(B, LLVMBuildCall2(B, tick_ty, tick_fn, NULL, 0, "tick1"), tick0, "");
    LLVMValueRef slot = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntEQ, ticks, nul, ""), tick_sink,
                                        LLVMBuildInBoundsGEP2(B, cg->g.i64, ticks, &ti, 1, ""), "");
    LLVMBuildStore(B, LLVMBuildAdd(B, LLVMBuildLoad2(B, cg->g.i64, slot, ""), dt, ""), slot);
  }
  LLVMAddIncoming(ti, &tnext, &next, 1);
  LLVMBuildBr(B, thdr);
  LLVMPositionBuilderAtEnd(B, tdone);
  /* result leaves not computed in place */
  for (int r = 0; r < cg->plan.nresults; r++) {
    const MemResult *mr = &cg->plan.results[r];
    if (!mr->copy || mr->size == 0) continue;
    LLVMValueRef src = cp_instr_ptr(cg, mr->instr, args, results, temp), ix;
    if (mr->offset) {
      ix = cp_i64(cg, mr->offset);
      src = LLVMBuildInBoundsGEP2(B, cg->g.i8, src, &ix, 1, "");
    }
    ix = cp_i64(cg, r);
    LLVMValueRef dst =
        LLVMBuildLoad2(B, cg->g.ptr, LLVMBuildInBoundsGEP2(B, cg->g.ptr, results, &ix, 1, ""), "");
    LLVMBuildMemCpy(B, dst, 1, src, 1, cp_i64(cg, mr->size));
  }
  LLVMBuildRet(B, LLVMConstInt(cg->g.i32, 0, 0));

  /* the entry points that call the walk: which of its parameters each takes (-1: NULL) */
  static const struct {
    const char *suffix;
    int nparams;
    int from[7];
  } entries[4] = {
      {"run", 3, {0, 1, 2, -1, -1, -1, -1}},
      {"run_mt", 5, {0, 1, 2, -1, 3, 4, -1}},
      {"run_packed", 4, {0, 1, 2, 3, -1, -1, -1}},
      {"run_packed_mt", 6, {0, 1, 2, 3, 4, 5, -1}},
  };
  for (int e = 0; e < 4; e++) {
    if (!prof && e == 3) break; /* the walk itself */
    snprintf(name, sizeof name, "%s_%s", n, entries[e].suffix);
    LLVMValueRef w = LLVMAddFunction(
        cg->g.M, name, LLVMFunctionType(cg->g.i32, mt_ps, (unsigned)entries[e].nparams, 0));
    LLVMPositionBuilderAtEnd(B, LLVMAppendBasicBlockInContext(cg->g.C, w, "entry"));
    LLVMValueRef ca[7];
    for (int j = 0; j < 7; j++)
      ca[j] = entries[e].from[j] < 0 ? nul : LLVMGetParam(w, (unsigned)entries[e].from[j]);
    LLVMBuildRet(B, LLVMBuildCall2(B, walk_ty, mt, ca, prof ? 7 : 6, ""));
  }
  if (prof) cp_task_names(cg);
  cpu_gemm_pack_function(cg);

  /* tensor tables */
  HComp *e = cg->g.entry;
  int na = e->nparams, nr = cg->plan.nresults;
  const char **names = hlo_arena_alloc(cg->g.scratch, sizeof(char *) * (size_t)(na + nr + 1));
  const Shape **shapes = hlo_arena_alloc(cg->g.scratch, sizeof(Shape *) * (size_t)(na + nr + 1));
  for (int i = 0; i < na; i++) {
    names[i] = e->params[i]->name;
    shapes[i] = &e->params[i]->shape;
  }
  cp_info_table(cg, "arg", na, names, shapes);
  for (int r = 0; r < nr; r++) {
    names[r] = e->instrs[cg->plan.results[r].name]->name;
    shapes[r] = &cg->plan.results[r].shape;
  }
  cp_info_table(cg, "result", nr, names, shapes);
}

/* Wall time, for the phase report printed when HLOC_CPU_TIME is set in the environment. */
static double cp_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* ------------------------------------------------------------------ small kernels */

/* Kernels whose work is small (a weight's layout change, a bias gradient's last step, a
 * scalar) run for microseconds, but LLVM's vectorizing pipeline spends several milliseconds on
 * each (runtime checks, vector bodies, remainder loops), and a training step has dozens of
 * them. A kernel of elementwise, data-movement and reduce operations only, whose operands and
 * result hold at most CP_SMALL_ELEMS elements, is marked CPU_SMALL_ATTR (cpu_emit.c gives it
 * a scalar pipeline), smallest first while the marked kernels' elements stay under
 * 1/CP_SMALL_SHARE of the module's (so at most that share of the element traffic runs
 * unvectorized; a module of one elementwise kernel keeps its vector loop). Products,
 * convolutions, windows and sorts are never marked, nor the kernels of a while loop's body or
 * condition, which run once a trip. HLOC_CPU_SMALL=N sets CP_SMALL_ELEMS (0:
 * none). */
#define CP_SMALL_ELEMS 32768
#define CP_SMALL_SHARE 64

static int64_t cp_leaf_elems(const Shape *s) {
  if (s->dt == DT_TUPLE) {
    int64_t n = 0;
    for (int i = 0; i < s->ntuple; i++)
      n += cp_leaf_elems(&s->tuple[i]);
    return n;
  }
  return s->dt == DT_TOKEN ? 0 : hlo_shape_elems(s);
}

/* Whether in is elementwise, data movement or a reduce. */
static bool cp_simple_op(const HInstr *in) {
  return (hlo_op_flags(in->op) & (OPF_ELEM | OPF_MOVE)) || in->op == OP_PARAMETER ||
         in->op == OP_CONSTANT || in->op == OP_IOTA || in->op == OP_TUPLE ||
         in->op == OP_GET_TUPLE_ELEMENT || in->op == OP_BITCAST || in->op == OP_REDUCE;
}

/* The same of a task's root: of every instruction of a fusion's computation. */
static bool cp_simple(const HInstr *r) {
  if (r->op != OP_FUSION) return cp_simple_op(r);
  const HComp *c = r->calls[0];
  for (int i = 0; i < c->ninstrs; i++)
    if (!cp_simple_op(c->instrs[i])) return false;
  return true;
}

/* Elements a task's kernel reads and writes; -1 when it is not a simple kernel. */
static int64_t cp_task_elems(const CpuTask *t) {
  const HInstr *r = t->root;
  if (t->op != CPU_TASK_KERNEL || !r || !cp_simple(r)) return -1;
  int64_t n = cp_leaf_elems(&r->shape);
  for (int i = 0; i < r->nops; i++)
    n += cp_leaf_elems(&r->ops[i]->shape);
  return n;
}

/* Whether shape s is or holds a bf16 array. */
static bool cp_shape_bf16(const Shape *s) {
  if (s->dt == DT_TUPLE) {
    for (int i = 0; i < s->ntuple; i++)
      if (cp_shape_bf16(&s->tuple[i])) return true;
    return false;
  }
  return s->dt == DT_BF16;
}

/* x86 without AVX512-BF16 rounds f32 to bf16 (the result of every bf16 op, which LLVM computes
 * in f32) through the runtime function __truncsfbf2, which GCC 13's libgcc has and GCC 12's
 * lacks: a module with bf16 values defines it, weak and hidden (a toolchain's own wins at the
 * link), rounding to nearest even with NaNs made quiet, so that its object links anywhere. */
static void cp_bf16_runtime(CpuCg *cg) {
  if (strncmp(cg->triple, "x86_64", 6)) return;
  bool has = false;
  for (int c = 0; c < cg->g.m->ncomps && !has; c++)
    for (int i = 0; i < cg->g.m->comps[c]->ninstrs && !has; i++)
      has = cp_shape_bf16(&cg->g.m->comps[c]->instrs[i]->shape);
  if (!has || LLVMGetNamedFunction(cg->g.M, "__truncsfbf2")) return;
  LLVMTypeRef ft = LLVMFunctionType(cg->g.bf16, &cg->g.f32, 1, 0);
  LLVMValueRef f = LLVMAddFunction(cg->g.M, "__truncsfbf2", ft);
  LLVMSetLinkage(f, LLVMWeakAnyLinkage);
  LLVMSetVisibility(f, LLVMHiddenVisibility);
  LLVMBuilderRef B = LLVMCreateBuilderInContext(cg->g.C);
  LLVMPositionBuilderAtEnd(B, LLVMAppendBasicBlockInContext(cg->g.C, f, "entry"));
  GenKern k = {.cg = &cg->g, .B = B}; /* gen_round_bf16 needs no more of a kernel */
  LLVMBuildRet(B, gen_round_bf16(&k, LLVMGetParam(f, 0)));
  LLVMDisposeBuilder(B);
}

static void cp_mark_small(CpuCg *cg) {
  int64_t limit = CP_SMALL_ELEMS;
  const char *e = cpu_knob(cg, CPU_KNOB_SMALL);
  if (e && *e) limit = atoll(e);
  int n = cg->ntasks;
  int64_t total = 0;
  int64_t *fe = hlo_arena_alloc(cg->g.scratch,
                                sizeof *fe * (size_t)(n + 1)); /* per function, at its first task */
  int *first = hlo_arena_alloc(cg->g.scratch, sizeof *first * (size_t)(n + 1));
  for (int t = 0; t < n; t++) {
    const CpuTask *task = &cg->tasks[t];
    /* a loop body's kernel runs once a trip: its work is not what its elements say */
    int64_t w = task->region && !task->region->entry ? -1 : cp_task_elems(task);
    if (task->root) total += w > 0 ? w : cp_leaf_elems(&task->root->shape);
    first[t] = -1;
    fe[t] = 0;
    if (!task->fn) continue;
    int f = t;
    for (int u = 0; u < t && f == t; u++)
      if (cg->tasks[u].fn == task->fn) f = u;
    first[t] = f;
    fe[f] = w < 0 || fe[f] < 0 ? -1 : fe[f] > w ? fe[f] : w;
  }
  /* smallest first, ties in task order, while the share allows */
  int64_t used = 0;
  for (;;) {
    int best = -1;
    for (int t = 0; t < n; t++)
      if (first[t] == t && fe[t] > 0 && fe[t] <= limit && (best < 0 || fe[t] < fe[best])) best = t;
    if (best < 0 || (used + fe[best]) * CP_SMALL_SHARE > total) break;
    used += fe[best];
    LLVMAddTargetDependentFunctionAttr(cg->tasks[best].fn, CPU_SMALL_ATTR, "1");
    fe[best] = 0;
  }
}

/* ------------------------------------------------------------------ driver */

static bool cp_valid_name(const char *s) {
  if (!s || !*s) return false;
  if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_')) return false;
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
          *s == '_'))
      return false;
  return true;
}

int cpu_feature_said(const char *feat, const char *f) {
  int said = 0;
  size_t fl = strlen(f);
  for (const char *p = feat; *p;) {
    const char *e = strchr(p, ',');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    if (n == fl + 1 && (*p == '+' || *p == '-') && !memcmp(p + 1, f, fl)) said = *p == '+' ? 1 : -1;
    p += n + (e != NULL);
  }
  return said;
}

void cpu_cg_init(CpuCg *cg, const CpuOpts *o, HErr *err, const char *modname) {
  memset(cg, 0, sizeof *cg);
  cg->o = o;
  cg->g.name = o->name;
  cg->g.err = err;
  cg->g.buffer_fn = cpu_buffer;
  cg->g.const_ptr_fn = cpu_const_ptr;
  cg->g.rodata_fn = cp_rodata_hook;
  cg->g.scratch = hlo_arena_new();
  /* the target: the host's triple, CPU and features where the options leave them unset (the
     host's features only for the host CPU itself: for a named CPU, LLVM derives the features
     from the name, and an explicit --features adds to or removes from them) */
  char *deftriple = LLVMGetDefaultTargetTriple(), *hostcpu = LLVMGetHostCPUName();
  bool host = !o->triple || !strcmp(o->triple, deftriple);
  bool host_cpu = host && (!o->cpu || !strcmp(o->cpu, hostcpu));
  cg->triple = hlo_arena_strdup(cg->g.scratch, o->triple ? o->triple : deftriple);
  cg->tcpu = hlo_arena_strdup(cg->g.scratch, o->cpu ? o->cpu : host ? hostcpu : "generic");
  if (o->features || !host_cpu) {
    cg->tfeat = hlo_arena_strdup(cg->g.scratch, o->features ? o->features : "");
  } else {
    char *hf = LLVMGetHostCPUFeatures();
    cg->tfeat = hlo_arena_strdup(cg->g.scratch, hf);
    LLVMDisposeMessage(hf);
  }
  LLVMDisposeMessage(deftriple);
  LLVMDisposeMessage(hostcpu);
  cg->g.C = LLVMContextCreate();
  cg->g.M = LLVMModuleCreateWithNameInContext(modname ? modname : "hloc", cg->g.C);
  LLVMSetSourceFileName(cg->g.M, "hloc", 4);
  cg->g.B = LLVMCreateBuilderInContext(cg->g.C);
  gen_cg_types(&cg->g);
  LLVMTypeRef cf[3] = {cg->g.ptr, cg->g.ptr, cg->g.ptr};
  cg->ctx_ty = LLVMStructTypeInContext(cg->g.C, cf, 3, 0);
  LLVMTypeRef tp[2] = {cg->g.ptr, cg->g.i64};
  cg->task_ty = LLVMFunctionType(cg->g.vd, tp, 2, 0);
}

void cpu_cg_free(CpuCg *cg) {
  LLVMDisposeBuilder(cg->g.B);
  LLVMDisposeModule(cg->g.M);
  LLVMContextDispose(cg->g.C);
  hlo_arena_free(cg->g.scratch);
}

/* --stats: the kernels the products got, and the first products left to loop nests (a type
 * or form no fast path takes: worth knowing before timing the model). */
static void cp_print_products(const CpuCg *cg, FILE *f) {
  const int *n = cg->products;
  int gemm = n[CPU_PROD_GEMM] + n[CPU_PROD_GEMM_WIDE] + n[CPU_PROD_AMX] + n[CPU_PROD_DPBF16];
  fprintf(f,
          "cpu: products %d: GEMM %d (f32 %d, 16-bit or s8 widened to f32 %d, bf16 or s8 on AMX "
          "tiles %d, "
          "bf16 on AVX512-BF16 or s8 on AVX512-VNNI %d), few rows or columns %d, Winograd %d, loop "
          "nests %d",
          gemm + n[CPU_PROD_FEW] + n[CPU_PROD_WINO] + n[CPU_PROD_LOOPS], gemm, n[CPU_PROD_GEMM],
          n[CPU_PROD_GEMM_WIDE], n[CPU_PROD_AMX], n[CPU_PROD_DPBF16], n[CPU_PROD_FEW],
          n[CPU_PROD_WINO], n[CPU_PROD_LOOPS]);
  for (int i = 0; i < n[CPU_PROD_LOOPS] && i < 4; i++)
    fprintf(f, "%s%s", i ? ", " : " (", cg->loop_products[i]);
  if (n[CPU_PROD_LOOPS]) fprintf(f, "%s)", n[CPU_PROD_LOOPS] > 4 ? ", ..." : "");
  if (n[CPU_PROD_ATTENTION])
    fprintf(f, "; attention kernels %d (blocked, online softmax)", n[CPU_PROD_ATTENTION]);
  fprintf(f, "\n");
}

void cpu_optimizer_options(OptOpts *oo) {
  /* the blocked attention kernel (cpu_attention.c) against batched products and the softmax's
   * kernels: from a tile's worth of query rows per batch item (with fewer, a decode step's, the
   * few-rows products read the cache once at no wasted lanes) */
  oo->attention_rows = INT64_MAX;
  oo->attention_head = 512;
  oo->attention_min_rows = 16;
}

bool cpu_compile(HModule *m, const CpuOpts *o, HErr *err) {
  if (!m->entry) {
    hlo_err(err, m->file, NULL, NULL, "CPU target: module has no entry computation");
    return false;
  }
  if (!cp_valid_name(o->name)) {
    hlo_err(err, m->file, NULL, NULL, "CPU target: symbol prefix '%s' is not a C identifier",
            o->name ? o->name : "");
    return false;
  }
  if (!o->out_path) {
    hlo_err(err, m->file, NULL, NULL, "CPU target: no output path");
    return false;
  }
  double tstart = cp_now();
  CpuCg cg;
  cpu_cg_init(&cg, o, err, m->name);
  cg.g.m = m;
  cg.g.entry = m->entry;
  bool ok = false;
  char *obj = NULL, *hdr = NULL;
  size_t objlen = 0, hdrlen = 0;
  cg.prebuilt = cpu_prebuilt_find(&cg);
  cg.raw_ok = o->emit == CPU_EMIT_OBJ && cpu_elf64le(cg.triple);

  if (!cp_lower(&cg)) goto done;
  if (!memplan_assign(cg.g.entry, cg.g.scratch, &cg.plan, err)) goto done;
  cg.entry_plan = cg.plan; /* a copy: cg.plan becomes each loop computation's while emitted */
  cg.entry_region =
      (CpuRegion){cg.g.entry, &cg.entry_plan, true, 0, 0, 0, 0, NULL, NULL, NULL, NULL};
  cg.region = &cg.entry_region;
  /* the loops' scratch above the plan's heap, kernel-private scratch (GEMM packing areas)
     above both */
  cg.loop_top = memplan_align(cg.plan.temp_bytes);
  if (!cp_plan_loops(&cg, cg.g.entry, &cg.entry_region, 0)) goto done;
  cg.temp_base = memplan_align(cg.loop_top);
  if (!cp_emit_comp(&cg, &cg.entry_region)) goto done;
  if (cg.prebuilt && !cpu_gemm_made(&cg)) cg.prebuilt = NULL; /* no product: no library */
  if (cg.extra_temp > 0 || cg.nloops > 0 || cg.nconds > 0)
    cg.plan.temp_bytes = cg.temp_base + memplan_align(cg.extra_temp);
  double tk = cp_now();
  int nk = 0;
  for (LLVMValueRef f = LLVMGetFirstFunction(cg.g.M); f; f = LLVMGetNextFunction(f))
    nk += LLVMCountBasicBlocks(f) > 0;
  cpu_share_kernels(&cg);
  if (o->opt_level >= 2) cp_mark_small(&cg);
  cp_bf16_runtime(&cg);
  if (cpu_knob(&cg, CPU_KNOB_TIME)) {
    int nk2 = 0;
    for (LLVMValueRef f = LLVMGetFirstFunction(cg.g.M); f; f = LLVMGetNextFunction(f))
      nk2 += LLVMCountBasicBlocks(f) > 0;
    fprintf(stderr,
            "hloc cpu: %d tasks, %d functions, %d after sharing (%.3f s); IR built in %.3f s\n",
            cg.ntasks, nk, nk2, cp_now() - tk, tk - tstart);
  }
  cp_run_functions(&cg);
  if (o->stats) cp_print_products(&cg, o->stats);
  if (!cpu_emit(&cg, &obj, &objlen)) goto done;
  if (o->header_path)
    hdr = cpu_header_text(m, &cg.plan, o, cg.ntasks, cg.packs, cg.npacks, cg.packed_bytes, &hdrlen);
  /* write the header first: a failure then leaves neither file half-made under its name */
  if (hdr && !hlo_write_file_atomic(o->header_path, hdr, hdrlen, err)) goto done;
  if (!hlo_write_file_atomic(o->out_path, obj, objlen, err)) {
    if (hdr) remove(o->header_path);
    goto done;
  }
  ok = true;
done:
  free(obj);
  free(hdr);
  cpu_cg_free(&cg);
  return ok;
}
