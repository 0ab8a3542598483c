/* targets/cuda/cuda_gemm_epilogue.c: dot epilogues that cuBLASLt computes in the GEMM itself.
 *
 * On the cuBLAS path a kOutput fusion whose hero is a dot is a GEMM writing the product, then a
 * loop kernel reading it back to compute the rest of the fusion (cuda_kernel.c, ck_epilogue).
 * The epilogues of dense layers need no second pass: cublasLtMatmul computes
 *     D = relu(A B + beta C + bias)
 * with a bias vector along D's rows (cuBLAS's m: the product's minor dims, the same vector for
 * every row and batch item; CUBLASLT_EPILOGUE_BIAS), C a matrix of D's layout and type read with
 * beta = 1 (a residual; C and D separate buffers) and the ReLU optional (_RELU, _RELU_BIAS).
 * cuda_gemm_epilogue_match accepts a fusion computing exactly that:
 *     root := relu(sum) | sum,   relu := maximum(x, broadcast(+0)) in either operand order
 *     sum  := a tree of adds, in any order and association, over the dot, at most one bias
 *             broadcast(b) (b: the product's trailing dims, the rhs's free ones, broadcast along
 *             them) and at most one residual (a fusion operand read directly: the product's
 *             dims and type)
 * with bf16 / f16 operands (f32 sums, a bf16/f16 or f32 result; f32 products keep the epilogue
 * kernel: cublasGemmEx's f32 kernels measured faster than cuBLASLt's); the bias has D's type
 * (cuBLASLt's rule for these kernels). A final convert of an f32 sum to bf16/f16 (a dot with an f32
 * preferred type rounded to its operands' type) is accepted where every addend but the dot is a
 * bf16/f16 value widened by a convert: the fused GEMM then computes the HLO's value, one rounding
 * at the end, with D, C and the bias in the 16-bit type. Anything else (a bias along another dim, a
 * multiply, a residual of another type or read through an expression, GELU, a product that
 * takes several cuBLAS calls) keeps the epilogue kernel. A bias that is not an entry value in
 * memory (a constant: frozen weights; an expression of the fusion's operands) is first computed by
 * a small kernel into private scratch.
 *
 * Rounding: the HLO rounds a 16-bit result at every add; the fused GEMM rounds once, from the
 * f32 sum plus bias plus residual, as XLA's GPU gemm rewriter does (docs/numerics.md).
 *
 * Fallback: whether cuBLASLt has an algorithm is known only on the device, when
 * NAME_cuda_init asks its heuristic. The fused GEMM therefore keeps the epilogue kernel
 * (generated as before, its step marked by fb): where the heuristic has no algorithm for the
 * epilogue in a context, or a pointer at run time is less aligned than the heuristic was told,
 * the host runs the GEMM unfused (cublasGemmStridedBatchedEx into uc, beta 0) and launches that
 * kernel (cuda_host.c; --gemm-epilogues=fallback takes that path everywhere, for testing).
 * Init never fails for want of a fused algorithm, and no value is computed differently from
 * the unfused path but for the rounding above (and a NaN through the ReLU: docs/numerics.md). */
#include "cuda_impl.h"
#include "optimizer.h"

#include <math.h>
#include <string.h>

/* The state of one match. */
typedef struct GeMatch {
  CudaCg *cc;             /* the compilation */
  const HInstr *in, *dot; /* the fusion, its hero */
  DType dt;               /* D's type (the fusion's) */
  DType ct;               /* the sum's type (the dot's) */
  bool widened;           /* ct != dt: addends but the dot are convert(dt value) */
  bool have_dot;          /* the dot was a leaf */
  int flags;              /* CU_EPI_* so far */
  CuGemmEpi *e;           /* the result */
  bool *seen;             /* ge_reaches: members that do not read the dot */
} GeMatch;

/* The operand and result types a fused cuBLASLt GEMM computes as the HLO does: at x at -> ct,
 * the fusion's type dt. */
static bool ge_types_ok(DType at, DType ct, DType dt) {
  bool h16 = at == DT_BF16 || at == DT_F16;
  /* (f32 operands stay on cublasGemmEx: its kernels were faster than cuBLASLt's with the
     epilogue, docs/benchmarks.md) */
  if (ct == dt) return h16 && (at == ct || ct == DT_F32);
  return h16 && ct == DT_F32 && dt == at; /* a final convert back to the operands' type */
}

/* Whether x is maximum(v, +0) or maximum(+0, v): *v the other operand. A -0 is not ReLU's. */
static bool ge_relu(const HInstr *x, const HInstr **v) {
  if (x->op != OP_MAXIMUM || x->nops != 2) return false;
  for (int j = 0; j < 2; j++) {
    double z;
    if (opt_uniform_value(x->ops[1 - j], &z) && z == 0 && !signbit(z)) {
      *v = x->ops[j];
      return true;
    }
  }
  return false;
}

/* The dt value an addend v of the sum holds: v itself, or under a final convert the operand of
 * the convert widening it; NULL when it is none. */
static const HInstr *ge_narrow(const GeMatch *g, const HInstr *v) {
  if (!g->widened) return v->shape.dt == g->dt ? v : NULL;
  return v->op == OP_CONVERT && v->ops[0]->shape.dt == g->dt ? v->ops[0] : NULL;
}

/* Whether expression x (inside the fusion) reads the dot: a bias must not. seen marks the
 * members known not to. */
static bool ge_reaches(GeMatch *g, const HInstr *x) {
  if (x == g->dot) return true;
  if (g->seen[x->idx]) return false;
  for (int j = 0; j < x->nops; j++)
    if (ge_reaches(g, x->ops[j])) return true;
  g->seen[x->idx] = true;
  return false;
}

/* broadcast bc of b (type dt) as the bias: b has the product's trailing dims, the rhs's free
 * ones (cuBLAS's m), and bc broadcasts it along them. */
static bool ge_bias(GeMatch *g, const HInstr *bc, const HInstr *b) {
  const DotDims *dd = g->dot->dot;
  const Shape *ps = &g->dot->shape;
  int nf = g->dot->ops[1]->shape.rank - dd->rhs_batch.n - dd->rhs_contract.n;
  if ((g->flags & CU_EPI_BIAS) || nf < 1 || b->shape.rank != nf || bc->dims.n != nf) return false;
  for (int i = 0; i < nf; i++) {
    int d = ps->rank - nf + i;
    if (bc->dims.v[i] != d || b->shape.dims[i] != ps->dims[d]) return false;
  }
  if (ge_reaches(g, b)) return false;
  g->flags |= CU_EPI_BIAS;
  g->e->bias = b;
  return true;
}

/* u (type dt, an addend's value) as the residual: an entry value the fusion reads directly, of
 * the product's dims, with a device address. */
static bool ge_residual(GeMatch *g, const HInstr *u) {
  if ((g->flags & CU_EPI_RESIDUAL) || !hlo_shape_same_dims(&u->shape, &g->dot->shape)) return false;
  const HInstr *r = cuda_direct_value(g->in, u);
  if (!r || !cuda_ptr_of(g->cc, r, &g->e->res_ptr)) return false;
  g->flags |= CU_EPI_RESIDUAL;
  return true;
}

/* An addend of the sum: the dot, the bias (broadcast(b); widened: of convert(b), or the
 * convert of the broadcast) or the residual, each at most once. */
static bool ge_leaf(GeMatch *g, const HInstr *v) {
  if (v == g->dot) {
    bool first = !g->have_dot;
    g->have_dot = true;
    return first;
  }
  const HInstr *u = ge_narrow(g, v);
  if (v->op == OP_BROADCAST) {
    const HInstr *b = ge_narrow(g, v->ops[0]);
    return b && ge_bias(g, v, b);
  }
  if (!u) return false;
  if (u->op == OP_BROADCAST) return ge_bias(g, u, u->ops[0]);
  return ge_residual(g, u);
}

/* v as a tree of adds (the product's dims, the sum's type) over the addends. */
static bool ge_sum(GeMatch *g, const HInstr *v, int depth) {
  if (v->op == OP_ADD && depth < 4 && v->shape.dt == g->ct &&
      hlo_shape_same_dims(&v->shape, &g->dot->shape))
    return ge_sum(g, v->ops[0], depth + 1) && ge_sum(g, v->ops[1], depth + 1);
  return ge_leaf(g, v);
}

bool cuda_gemm_epilogue_match(CudaCg *cc, const HInstr *in, const HInstr *dot, CuGemmEpi *e) {
  memset(e, 0, sizeof *e);
  /* (an output fusion is never computed in place of an operand; D must not overlap A or B) */
  if (in->op != OP_FUSION || in->shape.dt == DT_TUPLE || in == dot ||
      cc->plan.bufs[in->idx].kind == MEM_ALIAS)
    return false;
  DType dt = in->shape.dt, ct = dot->shape.dt;
  if (!ge_types_ok(dot->ops[0]->shape.dt, ct, dt) || !hlo_shape_same_dims(&in->shape, &dot->shape))
    return false;
  const HComp *c = in->calls[0];
  GeMatch g = {cc, in, dot, dt, ct, ct != dt, false, 0, e, NULL};
  g.seen = hlo_arena_alloc(cc->cg.scratch, (size_t)c->ninstrs); /* zeroed */
  const HInstr *x = c->root;
  if (ge_relu(x, &x)) g.flags |= CU_EPI_RELU;
  if (g.widened) { /* convert(sum) or convert(relu(sum)), f32 to the 16-bit type */
    if (x->op != OP_CONVERT || x->ops[0]->shape.dt != ct) return false;
    x = x->ops[0];
    if (!(g.flags & CU_EPI_RELU) && ge_relu(x, &x)) g.flags |= CU_EPI_RELU;
  }
  if (!ge_sum(&g, x, 0) || !g.have_dot || !g.flags) return false;
  e->flags = g.flags;
  e->dt = dt;
  return true;
}

/* ------------------------------------------------------------------ the bias and the step */

typedef struct GeStage {
  const HInstr *b;  /* the bias's expression */
  LLVMValueRef dst; /* where it goes */
} GeStage;

static bool ge_stage_body(GenKern *k, LLVMValueRef *idx, void *vctx) {
  GeStage *c = vctx;
  LLVMValueRef v = gen_value(k, c->b, idx);
  if (v) gen_store_elem(k, c->dst, &c->b->shape, idx, v);
  return v != NULL;
}

bool cuda_gemm_epilogue_bias(CudaCg *cc, HInstr *in, CuGemmEpi *e, int64_t stage, int64_t *used) {
  if (!(e->flags & CU_EPI_BIAS)) return true;
  const HInstr *d = cuda_direct_value(in, e->bias);
  if (d && cuda_ptr_of(cc, d, &e->bias_ptr)) return true;
  /* a constant or an expression: computed before the GEMM, which reads it from scratch */
  e->bias_ptr = (CuPtr){CU_TEMP, 0, stage + *used};
  *used += memplan_align(hlo_shape_elems(&e->bias->shape) * (int64_t)hlo_dtype_size(e->dt));
  CuStep *st;
  LLVMValueRef dst;
  GenKern *k = cuda_kbegin(cc, in, "stage-bias", 1, &e->bias_ptr, &dst, &st);
  cuda_kbind_fusion(k, in);
  GeStage c = {e->bias, dst};
  cuda_grid_loop(k, st, &e->bias->shape, ge_stage_body, &c);
  return cuda_kend(k);
}

bool cuda_gemm_epilogue_fuse(CudaCg *cc, const HInstr *in, const CuGemmEpi *e, int gi, CuPtr uc) {
  int ki = cc->nsteps - 1;
  CuStep *s = &cc->steps[gi], *k = &cc->steps[ki];
  HLO_ASSERT(s->kind == CU_STEP_GEMM && k->kind == CU_STEP_KERNEL && s->lidx < 0);
  s->udt = s->dt;
  s->uc = uc;
  if (!cuda_ptr_of(cc, in, &s->c)) {
    hlo_err_at(cc->cg.err, in, "CUDA target: internal: a fused GEMM's result has no address");
    return false;
  }
  s->dt = e->dt;
  s->epi = e->flags;
  s->bias = e->bias_ptr;
  s->res = e->res_ptr;
  s->lidx = cc->nlt++;
  cc->nepi++;
  s->fb = ki;
  k->fb = gi;
  return true;
}

const char *cuda_epilogue_name(int flags) {
  static const char *const names[8] = {"none", "bias",      "residual",      "bias+residual",
                                       "relu", "bias+relu", "residual+relu", "bias+residual+relu"};
  return names[flags & 7];
}

int cuda_epilogue_lt(int flags, const char **name) {
  bool b = flags & CU_EPI_BIAS, r = flags & CU_EPI_RELU; /* the residual is C, not a mode */
  *name = b && r ? "CUBLASLT_EPILOGUE_RELU_BIAS"
          : b    ? "CUBLASLT_EPILOGUE_BIAS"
          : r    ? "CUBLASLT_EPILOGUE_RELU"
                 : "CUBLASLT_EPILOGUE_DEFAULT";
  return b && r ? 6 : b ? 4 : r ? 2 : 1;
}
