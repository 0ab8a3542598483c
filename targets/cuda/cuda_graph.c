/* targets/cuda/cuda_graph.c: NAME_cuda_run's steps replayed as a CUDA graph.
 *
 * Launched one by one, every step costs the host a launch (a few microseconds), which is what
 * a host-bound model pays per step: a scanned loop runs about ten small steps a trip. Where
 * every step can be captured (no data-dependent loop, whose exit test reads the device back; a
 * constant's copy is a memset, not a pageable copy) and a call launches at most CG_MAX_NODES
 * of them (a counted loop's trips unrolled as the host drives them), NAME_cuda_run keeps per
 * context one graph of its steps:
 *   - a call whose device pointers (each argument, each result, temp) are those of the graph
 *     launches the graph on the caller's stream;
 *   - a call whose pointers are those of the previous call captures the steps on a stream of
 *     its own (thread-local mode: nothing runs while capturing), updates the instance (or
 *     instantiates a new one where the update is refused) and launches it;
 *   - any other call runs the steps directly.
 * So the first call (which loads the module and lets the libraries make their workspaces) runs
 * directly, and a caller that alternates buffers never pays for capturing (every call's pointers
 * are remembered, a replayed one's too). A failed capture or
 * instantiation turns graphs off for that context (its calls run directly from then on); a call
 * on a stream the caller is capturing runs its steps directly into the caller's graph. The
 * graph state is taken under a mutex of its own (the steps take the module's lock around the
 * library calls inside it). --cuda-graphs=off compiles the direct path only. */
#include "cuda_host.h"

#include <stdlib.h>
#include <string.h>

enum { CG_MAX_NODES = 20000 }; /* steps a captured call launches, at most */

bool cuda_graph_memset(const CuStep *s, int *width, uint32_t *value) {
  const unsigned char *b = (const unsigned char *)s->hconst->data + s->src.offset;
  for (int w = 4; w >= 1; w /= 2) {
    if (s->bytes % w || s->dst.offset % w) continue;
    bool same = true;
    for (int64_t i = w; i < s->bytes && same; i++)
      same = b[i] == b[i % w];
    if (!same) continue;
    uint32_t v = 0;
    memcpy(&v, b, (size_t)w);
    *width = w, *value = v;
    return true;
  }
  return false;
}

int64_t cuda_graph_nodes(const CudaCg *cc) {
  if (cc->o->graphs == CUDA_GRAPHS_OFF || !cc->nsteps) return 0;
  int64_t *counter = calloc((size_t)(cc->ncounters ? cc->ncounters : 1), sizeof *counter);
  int64_t nodes = 0;
  int w;
  uint32_t v;
  for (int pc = 0; pc < cc->nsteps && nodes >= 0;) {
    const CuStep *s = &cc->steps[pc++];
    if (s->kind == CU_STEP_BRANCH ||
        (s->kind == CU_STEP_COPY && s->hconst && !cuda_graph_memset(s, &w, &v)))
      nodes = -1; /* a device read back, a pageable copy */
    else if (s->kind == CU_STEP_SET)
      counter[s->counter] = s->trips;
    else if (s->kind == CU_STEP_COUNT && counter[s->counter]-- == 0)
      pc = s->target;
    else if (s->kind == CU_STEP_JUMP)
      pc = s->target;
    else if (s->kind != CU_STEP_COUNT && (s->kind != CU_STEP_COPY || s->bytes > 0) &&
             (s->kind != CU_STEP_KERNEL || s->fb < 0))
      nodes += s->kind == CU_STEP_GEMM && s->epi ? 2 : 1; /* (unfused: the GEMM, its kernel) */
    if (nodes > CG_MAX_NODES) nodes = -1;
  }
  free(counter);
  return nodes >= 2 ? nodes : 0; /* (one launch gains nothing from a graph) */
}

/* The replay function's values and the graph state's globals. */
typedef struct Cg {
  Host *h;
  LLVMValueRef steps, args, results, temp, stream, slot;
  LLVMValueRef state, exec, gstream, seen, key, glock; /* globals */
  LLVMValueRef cur, curkey, curseen;                   /* this call's pointers; the slot's */
  LLVMValueRef cap, gp, info;                          /* stack: capture status, graph, update */
  LLVMBasicBlockRef direct, disable, launch;
  int nkey;
} Cg;

static LLVMBasicBlockRef cg_block(Cg *g, const char *name) {
  return LLVMAppendBasicBlockInContext(g->h->C, g->h->fn, name);
}

static LLVMValueRef cg_slot_global(Cg *g, const char *what, LLVMTypeRef t) {
  char name[320];
  snprintf(name, sizeof name, "%s_cuda_graph_%s", g->h->cc->o->name, what);
  return h_global(g->h, LLVMArrayType2(t, CU_SLOTS), name, NULL, false);
}

/* memcmp(a, b, the key's bytes) == 0, or memcpy(dst, src, the key's bytes). */
static LLVMValueRef cg_key_op(Cg *g, bool cmp, LLVMValueRef a, LLVMValueRef b) {
  Host *h = g->h;
  LLVMTypeRef ps[3] = {h->ptr, h->ptr, h->i64};
  LLVMValueRef as[3] = {a, b, h_i64(h, (long long)g->nkey * 8)};
  if (!cmp) return h_call(h, "memcpy", h->ptr, ps, as, 3);
  return LLVMBuildICmp(h->B, LLVMIntEQ, h_call(h, "memcmp", h->i32, ps, as, 3), h_i32(h, 0), "");
}

/* Entry: this call's pointers into cur; under the graph lock to launch, to capture, or
 * (remembering them) to the direct path. */
static void cg_entry(Cg *g, LLVMBasicBlockRef capture) {
  Host *h = g->h;
  LLVMBuilderRef B = h->B;
  const int np = h->cc->cg.entry->nparams, nr = h->cc->plan.nresults;
  LLVMTypeRef kt = LLVMArrayType2(h->ptr, (uint64_t)g->nkey);
  g->cur = LLVMBuildAlloca(B, kt, "key");
  g->cap = LLVMBuildAlloca(B, h->i32, "capturing");
  g->gp = LLVMBuildAlloca(B, h->ptr, "graph");
  g->info = LLVMBuildAlloca(B, LLVMArrayType2(h->i64, 4), "update_info");
  LLVMBuildStore(B, h_i32(h, 0), g->cap);
  LLVMTypeRef p2[2] = {h->ptr, h->ptr};
  LLVMValueRef a2[2] = {g->stream, g->cap};
  h_branch(h, h_nonzero(h, h_call(h, "cuStreamIsCapturing", h->i32, p2, a2, 2)), g->direct);
  h_branch(h, h_nonzero(h, LLVMBuildLoad2(B, h->i32, g->cap, "")), g->direct);
  for (int i = 0; i < g->nkey; i++) {
    LLVMValueRef v = g->temp, arr = i < np ? g->args : g->results;
    if (i < np + nr) {
      LLVMValueRef ix = h_i64(h, i < np ? i : i - np);
      v = LLVMBuildLoad2(B, h->ptr, LLVMBuildInBoundsGEP2(B, h->ptr, arr, &ix, 1, ""), "");
    }
    LLVMValueRef ix[2] = {h_i64(h, 0), h_i64(h, i)};
    LLVMBuildStore(B, v, LLVMBuildInBoundsGEP2(B, kt, g->cur, ix, 2, ""));
  }
  LLVMValueRef kix[3] = {h_i64(h, 0), g->slot, h_i64(h, 0)};
  g->curkey = LLVMBuildInBoundsGEP2(B, LLVMGlobalGetValueType(g->key), g->key, kix, 3, "");
  g->curseen = LLVMBuildInBoundsGEP2(B, LLVMGlobalGetValueType(g->seen), g->seen, kix, 3, "");
  h_mutex(h, g->glock, true);
  LLVMValueRef st = LLVMBuildLoad2(B, h->i32, h_slot_ptr(h, g->state, g->slot), "");
  LLVMValueRef ready = LLVMBuildICmp(B, LLVMIntEQ, st, h_i32(h, 1), "");
  LLVMValueRef launch = LLVMBuildAnd(B, ready, cg_key_op(g, true, g->cur, g->curkey), "");
  LLVMValueRef on = LLVMBuildICmp(B, LLVMIntSGE, st, h_i32(h, 0), "");
  LLVMValueRef again = LLVMBuildAnd(B, on, cg_key_op(g, true, g->cur, g->curseen), "");
  cg_key_op(g, false, g->curseen, g->cur); /* (a launch too: alternating buffers never capture) */
  h_branch(h, launch, g->launch);
  h_branch(h, again, capture);
  h_mutex(h, g->glock, false);
  LLVMBuildBr(B, g->direct);
}

/* Capture: the steps on the slot's stream into a graph, the instance updated or made. */
static void cg_capture(Cg *g) {
  Host *h = g->h;
  LLVMBuilderRef B = h->B;
  LLVMTypeRef p2[2] = {h->ptr, h->i32}, p3[3] = {h->ptr, h->ptr, h->ptr};
  LLVMValueRef gsp = h_slot_ptr(h, g->gstream, g->slot);
  LLVMBasicBlockRef make = cg_block(g, "make_stream"), have = cg_block(g, "have_stream");
  LLVMValueRef none =
      LLVMBuildICmp(B, LLVMIntEQ, LLVMBuildLoad2(B, h->ptr, gsp, ""), LLVMConstNull(h->ptr), "");
  LLVMBuildCondBr(B, none, make, have);
  LLVMPositionBuilderAtEnd(B, make);
  LLVMValueRef ca[2] = {gsp, h_i32(h, 1)}; /* CU_STREAM_NON_BLOCKING */
  h_branch(h, h_nonzero(h, h_call(h, "cuStreamCreate", h->i32, p2, ca, 2)), g->disable);
  LLVMBuildBr(B, have);
  LLVMPositionBuilderAtEnd(B, have);
  LLVMValueRef gs = LLVMBuildLoad2(B, h->ptr, gsp, "");
  LLVMValueRef ba[2] = {gs, h_i32(h, 1)}; /* CU_STREAM_CAPTURE_MODE_THREAD_LOCAL */
  h_branch(h, h_nonzero(h, h_call(h, "cuStreamBeginCapture_v2", h->i32, p2, ba, 2)), g->disable);
  LLVMValueRef sa[5] = {g->args, g->results, g->temp, gs, g->slot};
  LLVMValueRef rc = LLVMBuildCall2(B, LLVMGlobalGetValueType(g->steps), g->steps, sa, 5, "");
  LLVMValueRef gp = g->gp;
  LLVMBuildStore(B, LLVMConstNull(h->ptr), gp);
  LLVMValueRef ea[2] = {gs, gp};
  LLVMTypeRef pp[2] = {h->ptr, h->ptr};
  LLVMValueRef rc2 = h_call(h, "cuStreamEndCapture", h->i32, pp, ea, 2);
  LLVMValueRef graph = LLVMBuildLoad2(B, h->ptr, gp, "");
  LLVMBasicBlockRef drop = cg_block(g, "drop_graph");
  h_branch(h, h_nonzero(h, LLVMBuildOr(B, rc, rc2, "")), drop);
  LLVMValueRef ep = h_slot_ptr(h, g->exec, g->slot);
  LLVMBasicBlockRef update = cg_block(g, "update"), fresh = cg_block(g, "instantiate");
  LLVMBasicBlockRef made = cg_block(g, "made");
  LLVMValueRef old = LLVMBuildLoad2(B, h->ptr, ep, "");
  LLVMBuildCondBr(B, LLVMBuildICmp(B, LLVMIntEQ, old, LLVMConstNull(h->ptr), ""), fresh, update);
  LLVMPositionBuilderAtEnd(B, update); /* refused (other nodes): a new instance instead */
  LLVMValueRef ua[3] = {old, graph, g->info};
  h_branch(h,
           LLVMBuildICmp(B, LLVMIntEQ, h_call(h, "cuGraphExecUpdate_v2", h->i32, p3, ua, 3),
                         h_i32(h, 0), ""),
           made);
  LLVMTypeRef p1[1] = {h->ptr};
  h_call(h, "cuGraphExecDestroy", h->i32, p1, &old, 1);
  LLVMBuildStore(B, LLVMConstNull(h->ptr), ep);
  LLVMBuildBr(B, fresh);
  LLVMPositionBuilderAtEnd(B, fresh);
  LLVMTypeRef ip[3] = {h->ptr, h->ptr, h->i64};
  LLVMValueRef ia[3] = {ep, graph, h_i64(h, 0)};
  h_branch(h, h_nonzero(h, h_call(h, "cuGraphInstantiateWithFlags", h->i32, ip, ia, 3)), drop);
  LLVMBuildBr(B, made);
  LLVMPositionBuilderAtEnd(B, made);
  h_call(h, "cuGraphDestroy", h->i32, p1, &graph, 1);
  cg_key_op(g, false, g->curkey, g->cur);
  LLVMBuildStore(B, h_i32(h, 1), h_slot_ptr(h, g->state, g->slot));
  LLVMBuildBr(B, g->launch);
  LLVMPositionBuilderAtEnd(B, drop);
  LLVMBasicBlockRef destroy = cg_block(g, "destroy");
  LLVMBuildCondBr(B, LLVMBuildICmp(B, LLVMIntEQ, graph, LLVMConstNull(h->ptr), ""), g->disable,
                  destroy);
  LLVMPositionBuilderAtEnd(B, destroy);
  h_call(h, "cuGraphDestroy", h->i32, p1, &graph, 1);
  LLVMBuildBr(B, g->disable);
}

LLVMValueRef cuda_graph_fn(Host *h, LLVMValueRef steps) {
  LLVMBuilderRef B = h->B;
  Cg g = {.h = h, .steps = steps};
  g.nkey = h->cc->cg.entry->nparams + h->cc->plan.nresults + 1;
  LLVMTypeRef ft = LLVMGlobalGetValueType(steps);
  LLVMValueRef f = LLVMAddFunction(h->M, "hloc_cuda_graph_run", ft);
  LLVMSetLinkage(f, LLVMInternalLinkage);
  h->fn = f;
  g.args = LLVMGetParam(f, 0), g.results = LLVMGetParam(f, 1), g.temp = LLVMGetParam(f, 2);
  g.stream = LLVMGetParam(f, 3), g.slot = LLVMGetParam(f, 4);
  g.state = cg_slot_global(&g, "state", h->i32); /* 1: exec holds the graph of key; -1: off */
  g.exec = cg_slot_global(&g, "exec", h->ptr);
  g.gstream = cg_slot_global(&g, "stream", h->ptr);
  g.seen = cg_slot_global(&g, "seen", LLVMArrayType2(h->ptr, (uint64_t)g.nkey));
  g.key = cg_slot_global(&g, "key", LLVMArrayType2(h->ptr, (uint64_t)g.nkey));
  char name[320];
  snprintf(name, sizeof name, "%s_cuda_graph_lock", h->cc->o->name);
  g.glock = h_global(h, LLVMArrayType2(h->i8, 64), name, NULL, false);
  LLVMSetAlignment(g.glock, 16);
  LLVMPositionBuilderAtEnd(B, cg_block(&g, "entry"));
  g.direct = cg_block(&g, "direct"), g.disable = cg_block(&g, "disable");
  g.launch = cg_block(&g, "launch");
  LLVMBasicBlockRef capture = cg_block(&g, "capture");
  cg_entry(&g, capture);
  LLVMPositionBuilderAtEnd(B, capture);
  cg_capture(&g);
  LLVMPositionBuilderAtEnd(B, g.launch); /* (under the graph lock) */
  LLVMTypeRef p2[2] = {h->ptr, h->ptr};
  LLVMValueRef la[2] = {LLVMBuildLoad2(B, h->ptr, h_slot_ptr(h, g.exec, g.slot), ""), g.stream};
  LLVMValueRef rc = h_call(h, "cuGraphLaunch", h->i32, p2, la, 2);
  h_mutex(h, g.glock, false);
  LLVMBuildRet(B, rc);
  LLVMPositionBuilderAtEnd(B, g.disable); /* (under the graph lock) */
  LLVMBuildStore(B, h_i32(h, -1), h_slot_ptr(h, g.state, g.slot));
  h_mutex(h, g.glock, false);
  LLVMBuildBr(B, g.direct);
  LLVMPositionBuilderAtEnd(B, g.direct);
  LLVMValueRef sa[5] = {g.args, g.results, g.temp, g.stream, g.slot};
  LLVMBuildRet(B, LLVMBuildCall2(B, ft, steps, sa, 5, ""));
  return f;
}
