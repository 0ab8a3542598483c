/* targets/cuda/cuda_scatter.c: scatter on the GPU, its updates applied in parallel.
 *
 * The output is first set to the operand (a grid loop), then the updates are applied: out[start(u)
 * + window(u)] = f(out, upd[u]), the index arithmetic and the combiner shared with the CPU
 * target (gen_scatter_update, gen_scatter_combine). XLA leaves the order of two updates of one
 * element unspecified; so an update kernel is a grid loop over the update's elements, a thread
 * each, wherever the result does not depend on that order:
 *   - unique_indices: no two updates meet, each is combined by a plain load and store;
 *   - a combiner that adds its two parameters: an atomic add (atomicrmw fadd/add; the sums of
 *     floats then round in the order the updates land, as XLA's GPU atomics do);
 *   - one that multiplies, takes the maximum or minimum, ands, ors or xors them, on 32- or
 *     64-bit elements: a compare-and-swap loop around the combiner itself (its exact
 *     semantics: NaN propagation, signed zeros).
 * Any other scatter (a replacing combiner whose indices may repeat, variadic scatters, 8- and
 * 16-bit elements under a combiner other than unique updates) applies its updates in order on
 * one thread, as the interpreter does. */
#include "cuda_impl.h"

typedef enum CsMode {
  CS_SERIAL, /* every update in order, one thread */
  CS_PLAIN,  /* unique indices: a load, the combiner, a store */
  CS_ADD,    /* an atomic add */
  CS_CAS,    /* a compare-and-swap loop around the combiner */
} CsMode;

static CsMode cs_mode(const HInstr *in) {
  if (gen_scatter_n(in) != 1) return CS_SERIAL;
  if (in->unique_indices) return CS_PLAIN;
  DType t = in->shape.dt;
  size_t size = hlo_dtype_size(t);
  if ((size != 4 && size != 8) || hlo_dtype_is_complex(t) || t == DT_PRED) return CS_SERIAL;
  const HInstr *r = in->calls[0]->root;
  if (r->nops != 2 || r->ops[0]->op != OP_PARAMETER || r->ops[1]->op != OP_PARAMETER ||
      r->ops[0] == r->ops[1])
    return CS_SERIAL;
  HOp op = r->op;
  if (op == OP_ADD) return CS_ADD;
  bool assoc = op == OP_MULTIPLY || op == OP_MAXIMUM || op == OP_MINIMUM || op == OP_AND ||
               op == OP_OR || op == OP_XOR;
  return assoc ? CS_CAS : CS_SERIAL;
}

typedef struct ScatterCtx {
  const HInstr *in; /* the scatter */
  LLVMValueRef out; /* its storage */
  int n;            /* its operands (gen_scatter_n) */
  CsMode mode;
} ScatterCtx;

static bool cs_copy_body(GenKern *k, LLVMValueRef *idx, void *vctx) {
  ScatterCtx *c = vctx;
  const Shape *s = &c->in->shape;
  for (int j = 0; j < c->n; j++) {
    LLVMValueRef v = gen_value(k, c->in->ops[j], idx);
    if (!v) return false;
    gen_store_elem(k, c->n > 1 ? cuda_leaf_ptr(k, c->out, s, j) : c->out,
                   c->n > 1 ? &s->tuple[j] : s, idx, v);
  }
  return true;
}

/* Update v into q (an element of type t) by a compare-and-swap loop around the combiner. */
static bool cs_cas(GenKern *k, const HInstr *in, LLVMValueRef q, LLVMValueRef v) {
  LLVMBuilderRef B = k->B;
  DType t = in->shape.dt;
  LLVMTypeRef it = LLVMIntTypeInContext(k->cg->C, (unsigned)(8 * hlo_dtype_size(t)));
  LLVMTypeRef vt = gen_mem_type(k->cg, t);
  LLVMValueRef old = LLVMBuildLoad2(B, it, q, "");
  LLVMSetAlignment(old, (unsigned)hlo_dtype_size(t));
  LLVMBasicBlockRef from = LLVMGetInsertBlock(B);
  LLVMBasicBlockRef loop = LLVMAppendBasicBlockInContext(k->cg->C, k->fn, "cas");
  LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(k->cg->C, k->fn, "cas_done");
  LLVMBuildBr(B, loop);
  LLVMPositionBuilderAtEnd(B, loop);
  LLVMValueRef cur = LLVMBuildPhi(B, it, "");
  LLVMValueRef args[2] = {LLVMBuildBitCast(B, cur, vt, ""), v}, res[1];
  int mark = k->ncache; /* (the combiner's values belong to this trip of the loop) */
  bool ok = gen_scalar_comp(k, in->calls[0], args, 2, res);
  k->ncache = mark;
  if (!ok) return false;
  LLVMValueRef pair =
      LLVMBuildAtomicCmpXchg(B, q, cur, LLVMBuildBitCast(B, res[0], it, ""),
                             LLVMAtomicOrderingMonotonic, LLVMAtomicOrderingMonotonic, 0);
  LLVMValueRef seen = LLVMBuildExtractValue(B, pair, 0, "");
  LLVMAddIncoming(cur, &old, &from, 1);
  LLVMBasicBlockRef again = LLVMGetInsertBlock(B);
  LLVMAddIncoming(cur, &seen, &again, 1);
  LLVMBuildCondBr(B, LLVMBuildExtractValue(B, pair, 1, ""), done, loop);
  LLVMPositionBuilderAtEnd(B, done);
  return true;
}

/* One update element ui, combined into its place as c->mode says. */
static bool cs_update_body(GenKern *k, LLVMValueRef *ui, void *vctx) {
  ScatterCtx *c = vctx;
  const HInstr *in = c->in;
  LLVMValueRef oi[HLO_MAX_RANK], ok;
  if (!gen_scatter_update(k, in, ui, oi, &ok)) return false;
  int mark;
  LLVMBasicBlockRef join = cuda_if(k, ok, &mark);
  bool good = true;
  if (c->mode == CS_PLAIN) {
    gen_scatter_combine(k, in, &c->out, oi, ui);
  } else {
    LLVMValueRef v = gen_value(k, in->ops[2], ui);
    LLVMValueRef lin = gen_linear(k, &in->shape, oi);
    LLVMValueRef q =
        LLVMBuildInBoundsGEP2(k->B, gen_mem_type(k->cg, in->shape.dt), c->out, &lin, 1, "");
    good = v != NULL;
    if (good && c->mode == CS_ADD)
      LLVMBuildAtomicRMW(
          k->B, hlo_dtype_is_float(in->shape.dt) ? LLVMAtomicRMWBinOpFAdd : LLVMAtomicRMWBinOpAdd,
          q, v, LLVMAtomicOrderingMonotonic, 0);
    else if (good)
      good = cs_cas(k, in, q, v);
  }
  cuda_endif(k, join, mark);
  return good && !k->failed;
}

/* Every update in order on one thread (variadic scatter updates its N outputs together). */
static void cs_serial(GenKern *k, ScatterCtx *c) {
  const HInstr *in = c->in;
  const Shape *us = &in->ops[c->n + 1]->shape;
  LLVMValueRef out[16];
  for (int j = 0; j < c->n; j++)
    out[j] = c->n > 1 ? cuda_leaf_ptr(k, c->out, &in->shape, j) : c->out;
  GenLoop loops[HLO_MAX_RANK];
  LLVMValueRef ui[HLO_MAX_RANK], oi[HLO_MAX_RANK], ok;
  for (int d = 0; d < us->rank; d++)
    ui[d] = gen_loop_open_step(k, &loops[d], gen_i64(k, 0), gen_i64(k, us->dims[d]), gen_i64(k, 1));
  if (!gen_scatter_update(k, in, ui, oi, &ok)) return;
  int mark;
  LLVMBasicBlockRef join = cuda_if(k, ok, &mark);
  gen_scatter_combine(k, in, out, oi, ui);
  cuda_endif(k, join, mark);
  for (int d = us->rank - 1; d >= 0; d--)
    gen_loop_close(k, &loops[d]);
}

bool cuda_scatter(CudaCg *cc, HInstr *in) {
  int n = gen_scatter_check(in, cc->cg.err, "CUDA");
  if (!n) return false;
  const Shape *s = n > 1 ? &in->shape.tuple[0] : &in->shape, *us = &in->ops[n + 1]->shape;
  CuStep *st;
  GenKern *k = cuda_kbegin(cc, in, "copy", 0, NULL, NULL, &st);
  ScatterCtx c = {in, cuda_kbuffer(k, in), n, cs_mode(in)};
  cuda_grid_loop(k, st, s, cs_copy_body, &c);
  if (!cuda_kend(k)) return false;
  if (!hlo_shape_elems(us)) return true;
  k = cuda_kbegin(cc, in, c.mode == CS_SERIAL ? "scatter" : "scatter-par", 0, NULL, NULL, &st);
  c.out = cuda_kbuffer(k, in);
  if (c.mode == CS_SERIAL) {
    st->grid = st->block = 1;
    cs_serial(k, &c);
  } else {
    cuda_grid_loop(k, st, us, cs_update_body, &c);
  }
  return cuda_kend(k);
}
