/* targets/cuda/cuda_sort.c: sort on the GPU, a bitonic network over each row's permutation.
 *
 * XLA's sort orders one or more operands of equal dimensions together along one dimension by a
 * comparator of 2n scalars ("lhs sorts before rhs"). Every row (each index of the other dims)
 * gets an s32 permutation of np slots (np: the row length rounded up to a power of two) in
 * scratch, sorted by a bitonic network over the whole GPU: for k = 2, 4, .., np and j = k / 2,
 * .., 1 one launch of the same kernel (k and j its two i64 parameters) in which a thread takes
 * the pair (i, i + j) of a row (i with bit j clear) and orders it ascending where i & k is 0,
 * descending elsewhere. "Before" is the comparator's order made total and stable: a padding
 * slot (past the row's end) sorts after every element, and of two elements neither of which
 * the comparator puts first, the one earlier in the row comes first; so the result is XLA's
 * stable sort whatever is_stable says (the CPU target's merge sort is stable too). The
 * comparator is generated inline (gen_scalar_comp) on the operands read at the two
 * positions. A last kernel gathers every operand's row through the permutation into the
 * result. (log2(np) (log2(np) + 1) / 2 launches: 55 for rows of 1024, 136 for 65536; a
 * shared-memory network for the short strides is not done.) */
#include "cuda_impl.h"

typedef struct CsPlan {
  const HInstr *in;
  int dim;                            /* the sorted dim */
  int64_t len, np, rows;              /* row length, its power of two, rows */
  LLVMValueRef perm;                  /* s32 [rows][np] in the kernel being built */
  LLVMValueRef k, j;                  /* the stage (i64 parameters) */
  LLVMValueRef out[GEN_SORT_MAX_OPS]; /* result leaves */
} CsPlan;

/* Operand index of row r at position p: the other dims from r (row-major), dim = p. */
static void cs_index(GenKern *k, const CsPlan *s, LLVMValueRef r, LLVMValueRef p,
                     LLVMValueRef *idx) {
  const Shape *xs = &s->in->ops[0]->shape;
  for (int d = xs->rank - 1; d >= 0; d--) {
    if (d == s->dim) {
      idx[d] = p;
      continue;
    }
    LLVMValueRef n = gen_i64(k, xs->dims[d]);
    idx[d] = LLVMBuildSRem(k->B, r, n, "");
    r = LLVMBuildSDiv(k->B, r, n, "");
  }
}

static LLVMValueRef cs_slot(GenKern *k, const CsPlan *s, LLVMValueRef r, LLVMValueRef i) {
  LLVMValueRef ix = LLVMBuildNSWAdd(k->B, LLVMBuildNSWMul(k->B, r, gen_i64(k, s->np), ""), i, "");
  return LLVMBuildInBoundsGEP2(k->B, k->cg->i32, s->perm, &ix, 1, "");
}

static LLVMValueRef cs_ld(GenKern *k, const CsPlan *s, LLVMValueRef r, LLVMValueRef i) {
  return LLVMBuildSExt(k->B, LLVMBuildLoad2(k->B, k->cg->i32, cs_slot(k, s, r, i), ""), k->cg->i64,
                       "");
}

static void cs_st(GenKern *k, const CsPlan *s, LLVMValueRef r, LLVMValueRef i, LLVMValueRef v) {
  LLVMBuildStore(k->B, LLVMBuildTrunc(k->B, v, k->cg->i32, ""), cs_slot(k, s, r, i));
}

/* Whether row r's element a sorts before its element b (positions; padding last, ties in row
 * order). */
static LLVMValueRef cs_before(GenKern *k, const CsPlan *s, LLVMValueRef r, LLVMValueRef a,
                              LLVMValueRef b) {
  GenCg *cg = k->cg;
  LLVMBuilderRef B = k->B;
  LLVMValueRef len = gen_i64(k, s->len);
  LLVMValueRef aok = LLVMBuildICmp(B, LLVMIntSLT, a, len, ""),
               bok = LLVMBuildICmp(B, LLVMIntSLT, b, len, "");
  /* a padding slot last: a real a before a padding b, nothing before a padding slot */
  LLVMValueRef pad = LLVMBuildAnd(B, aok, LLVMBuildNot(B, bok, ""), "");
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(B);
  LLVMBasicBlockRef cmpb = LLVMAppendBasicBlockInContext(cg->C, k->fn, "sort_cmp");
  LLVMBasicBlockRef join = LLVMAppendBasicBlockInContext(cg->C, k->fn, "sort_order");
  LLVMBuildCondBr(B, LLVMBuildAnd(B, aok, bok, ""), cmpb, join);
  LLVMPositionBuilderAtEnd(B, cmpb);
  int mark = k->ncache;
  LLVMValueRef ia[HLO_MAX_RANK], ib[HLO_MAX_RANK], va[GEN_SORT_MAX_OPS], vb[GEN_SORT_MAX_OPS];
  cs_index(k, s, r, a, ia);
  cs_index(k, s, r, b, ib);
  LLVMValueRef first = NULL, second = NULL;
  if (gen_sort_values(k, s->in, ia, va) && gen_sort_values(k, s->in, ib, vb) &&
      (first = gen_sort_compare(k, s->in, va, vb, "CUDA")))
    second = gen_sort_compare(k, s->in, vb, va, "CUDA");
  bool ok = first && second;
  k->ncache = mark;
  if (!ok) k->failed = true;
  LLVMValueRef tie = LLVMBuildICmp(B, LLVMIntSLT, a, b, "");
  LLVMValueRef res =
      ok ? LLVMBuildOr(B, first, LLVMBuildAnd(B, LLVMBuildNot(B, second, ""), tie, ""), "")
         : LLVMConstInt(cg->i1, 0, 0);
  LLVMBasicBlockRef cmp_end = LLVMGetInsertBlock(B);
  LLVMBuildBr(B, join);
  LLVMPositionBuilderAtEnd(B, join);
  LLVMValueRef phi = LLVMBuildPhi(B, cg->i1, "before");
  LLVMValueRef inc[2] = {res, pad};
  LLVMBasicBlockRef from[2] = {cmp_end, pre};
  LLVMAddIncoming(phi, inc, from, 2);
  return phi;
}

static bool cs_init_body(GenKern *k, LLVMValueRef *idx, void *ctx) {
  cs_st(k, ctx, idx[0], idx[1], idx[1]);
  return true;
}

/* One compare-exchange of the stage (k, j): pair q of row idx[0]. */
static bool cs_stage_body(GenKern *k, LLVMValueRef *idx, void *ctx) {
  const CsPlan *s = ctx;
  LLVMBuilderRef B = k->B;
  LLVMValueRef q = idx[1], jm = LLVMBuildSub(B, s->j, gen_i64(k, 1), "");
  LLVMValueRef i = LLVMBuildOr(
      B, LLVMBuildShl(B, LLVMBuildAnd(B, q, LLVMBuildNot(B, jm, ""), ""), gen_i64(k, 1), ""),
      LLVMBuildAnd(B, q, jm, ""), "");
  LLVMValueRef l = LLVMBuildOr(B, i, s->j, "");
  LLVMValueRef asc = LLVMBuildICmp(B, LLVMIntEQ, LLVMBuildAnd(B, i, s->k, ""), gen_i64(k, 0), "");
  LLVMValueRef pa = cs_ld(k, s, idx[0], i), pb = cs_ld(k, s, idx[0], l);
  LLVMValueRef x = LLVMBuildSelect(B, asc, pb, pa, ""), y = LLVMBuildSelect(B, asc, pa, pb, "");
  LLVMValueRef swap = cs_before(k, s, idx[0], x, y);
  cs_st(k, s, idx[0], i, LLVMBuildSelect(B, swap, pb, pa, ""));
  cs_st(k, s, idx[0], l, LLVMBuildSelect(B, swap, pa, pb, ""));
  return !k->failed;
}

static bool cs_gather_body(GenKern *k, LLVMValueRef *idx, void *ctx) {
  const CsPlan *s = ctx;
  LLVMValueRef src[HLO_MAX_RANK], dst[HLO_MAX_RANK];
  cs_index(k, s, idx[0], cs_ld(k, s, idx[0], idx[1]), src);
  cs_index(k, s, idx[0], idx[1], dst);
  for (int o = 0; o < s->in->nops && !k->failed; o++) {
    LLVMValueRef v = gen_value(k, s->in->ops[o], src);
    const Shape *ls = s->in->nops == 1 ? &s->in->shape : &s->in->shape.tuple[o];
    if (v) gen_store_elem(k, s->out[o], ls, dst, v);
  }
  return !k->failed;
}

/* The shared check (gen_sort_check), and rows short enough for the s32 permutation. */
static bool cs_check(CudaCg *cc, const HInstr *in) {
  if (!gen_sort_check(in, &cc->plan, cc->cg.err, "CUDA")) return false;
  if (in->ops[0]->shape.dims[in->dims.v[0]] <= (1 << 30)) return true;
  hlo_err_at(cc->cg.err, in, "CUDA target: sort rows of more than 2^30 elements");
  return false;
}

/* A kernel of the sort over shape [rows, cols] with body fn (stage: k, j given). */
static bool cs_kernel(CudaCg *cc, HInstr *in, CsPlan *s, CuPtr pp, const char *what, int64_t cols,
                      CkBody fn, int64_t kk, int64_t jj) {
  CuStep *st;
  LLVMValueRef sv[2];
  int64_t sc[2] = {kk, jj};
  GenKern *k =
      cuda_kbegin_ex(cc, in, what, 1, &pp, &s->perm, fn == cs_stage_body ? 2 : 0, sc, sv, &st);
  s->k = sv[0], s->j = sv[1];
  LLVMValueRef out = cuda_kbuffer(k, in);
  for (int o = 0; o < s->in->nops; o++)
    s->out[o] = s->in->nops == 1
                    ? out
                    : LLVMBuildInBoundsGEP2(
                          k->B, k->cg->i8, out,
                          (LLVMValueRef[]){gen_i64(k, memplan_tuple_offset(&in->shape, o))}, 1, "");
  int64_t dims[2] = {s->rows, cols};
  Shape sh = hlo_shape_array(DT_S32, 2, dims);
  cuda_grid_loop(k, st, &sh, fn, s);
  return cuda_kend(k);
}

bool cuda_sort(CudaCg *cc, HInstr *in) {
  if (!cs_check(cc, in)) return false;
  CsPlan s = {in, (int)in->dims.v[0], 0, 1, 0, NULL, NULL, NULL, {NULL}};
  const Shape *xs = &in->ops[0]->shape;
  s.len = xs->dims[s.dim];
  while (s.np < s.len)
    s.np *= 2;
  s.rows = s.len ? (int64_t)hlo_shape_elems(xs) / s.len : 0;
  if (s.rows == 0) return true;
  CuPtr pp = cuda_scratch(cc, memplan_align(s.rows * s.np * 4));
  if (!cs_kernel(cc, in, &s, pp, "sort-init", s.np, cs_init_body, 0, 0)) return false;
  for (int64_t k = 2; k <= s.np; k *= 2)
    for (int64_t j = k / 2; j >= 1; j /= 2)
      if (!cs_kernel(cc, in, &s, pp, "sort-stage", s.np / 2, cs_stage_body, k, j)) return false;
  return cs_kernel(cc, in, &s, pp, "sort-gather", s.len, cs_gather_body, 0, 0);
}
