/* targets/cpu/gemm/epilogue.c: what the GEMM kernels share around the products.
 *
 * Every GEMM kernel splits its items into chunks for the parallel-for (chunk nchunks being the
 * serial run that does them all), finds the loop dimensions' offsets, and applies the output
 * fusion's elementwise epilogue to each finished block of C while it is in cache. A fusion
 * whose root reduces the epilogue (a sum, maximum or minimum: a global pool after a
 * convolution) has no C at all: each block is reduced into its chunk's partial results, and
 * a last kernel combines the chunks' partials with the init in chunk order, so the result does
 * not depend on the thread count. A product whose result is bf16 or f16 has its f32 sums in
 * scratch: the epilogue reads them as the product's value rounded once to its type (XLA's
 * round to nearest even: cpu_kern_materialized_as), then stores the fusion's root, or that
 * value alone, in the instruction's buffer. */
#include "gemm_impl.h"

/* idx[d0 .. d0 + n) of shape s from their row-major linear index r. */
static void gm_unflatten(GenKern *k, const Shape *s, LLVMValueRef r, int d0, int n,
                         LLVMValueRef *idx) {
  for (int d = d0 + n - 1; d >= d0; d--) {
    if (d == d0) {
      idx[d] = r;
      break;
    }
    idx[d] = LLVMBuildSRem(k->B, r, gi(k, s->dims[d]), "");
    r = LLVMBuildSDiv(k->B, r, gi(k, s->dims[d]), "");
  }
}

/* A chunk's items [*lo, *hi) of items split into nchunks (chunk nchunks, the serial run: all
 * of them); *chunk is the chunk number, 0 for the serial run; returns whether this is the
 * serial run. gm_chunk_items_v: the item count known at run time. */
LLVMValueRef gm_chunk_items_v(GenKern *k, LLVMValueRef items, int64_t nchunks, LLVMValueRef *chunk,
                              LLVMValueRef *lo, LLVMValueRef *hi) {
  LLVMBuilderRef B = k->B;
  LLVMValueRef whole = LLVMBuildICmp(B, LLVMIntSGE, cpu_kern(k)->chunk, gi(k, nchunks), "");
  *chunk = LLVMBuildSelect(B, whole, gi(k, 0), cpu_kern(k)->chunk, "");
  *lo = LLVMBuildSDiv(B, gmul(k, *chunk, items), gi(k, nchunks), "");
  *hi = LLVMBuildSelect(
      B, whole, items,
      LLVMBuildSDiv(B, gmul(k, gadd(k, *chunk, gi(k, 1)), items), gi(k, nchunks), ""), "");
  return whole;
}

LLVMValueRef gm_chunk_items(GenKern *k, int64_t items, int64_t nchunks, LLVMValueRef *chunk,
                            LLVMValueRef *lo, LLVMValueRef *hi) {
  return gm_chunk_items_v(k, gi(k, items), nchunks, chunk, lo, hi);
}

/* The loop dimensions' indices lidx from their linear index bi, and the element offsets they
 * give in A, B and C. */
void gm_loop_offsets(GenKern *k, const GmProb *p, LLVMValueRef bi, LLVMValueRef *lidx,
                     LLVMValueRef *offa, LLVMValueRef *offb, LLVMValueRef *offc) {
  LLVMValueRef r = bi;
  *offa = *offb = *offc = gi(k, 0);
  for (int j = p->nloop - 1; j >= 0; j--) {
    lidx[j] = j == 0 ? r : LLVMBuildSRem(k->B, r, gi(k, p->lext[j]), "");
    if (j > 0) r = LLVMBuildSDiv(k->B, r, gi(k, p->lext[j]), "");
    *offa = gadd(k, *offa, gmul(k, lidx[j], gi(k, p->lsa[j])));
    *offb = gadd(k, *offb, gmul(k, lidx[j], gi(k, p->lsb[j])));
    *offc = gadd(k, *offc, gmul(k, lidx[j], gi(k, p->lsc[j])));
  }
}

/* The root of fusion `in` when it is a reduction that cpu_gemm_kernel can take block by
 * block: a reduce in f32 whose reducer adds, takes the maximum or the minimum, of the hero's
 * epilogue value (hero dims, reached from the hero through elementwise ops), with a scalar
 * init. */
const HInstr *gm_reduce_root(const HInstr *in, const HInstr *hero) {
  if (in->op != OP_FUSION || in->ncalls < 1 || !hlo_shape_is_array(&in->shape)) return NULL;
  const HComp *c = in->calls[0];
  const HInstr *r = c->root;
  if (!r || r->op != OP_REDUCE || r->nops != 2 || r->ncalls != 1 || r->shape.dt != DT_F32)
    return NULL;
  const HInstr *v = r->ops[0];
  if (v->shape.dt != DT_F32 || r->ops[1]->shape.rank != 0 ||
      !hlo_comp_identity(r->calls[0], DT_F32, NULL) ||
      !hlo_shape_same_dims(&v->shape, &hero->shape) || !cpu_elem_path(c, hero, v))
    return NULL;
  return r;
}

/* a (+) b with reduction red's reducer. */
static LLVMValueRef gm_reduce_combine(GenKern *k, const HInstr *red, LLVMValueRef a,
                                      LLVMValueRef b) {
  LLVMValueRef args[2] = {a, b}, out = NULL;
  return gen_scalar_comp(k, red->calls[0], args, 2, &out) ? out : NULL;
}

const HInstr *cpu_gemm_reduce_hero(const HInstr *in) {
  const HInstr *hero = gen_fusion_hero(in);
  return hero && gm_reduce_root(in, hero) ? hero : NULL;
}

/* The epilogue of an output fusion on the block [m0, m1) x [n0, n1) of the product just
 * computed (at the loop indices lidx), which generation reads from C: every element of the
 * fusion's root, stored in place in C; or, for a fusion whose root reduces the hero's
 * epilogue (red), every element of the reduced value combined into this chunk's partial
 * results P (red's shape, row-major). Rows are outer, columns inner: the columns of one row go
 * to consecutive elements (vectors: the feature dimension is minor and, when reducing, not
 * reduced). */
void gm_epilogue(GenKern *k, HInstr *in, const HInstr *hero, const HInstr *red, const GmProb *p,
                 const LLVMValueRef *lidx, LLVMValueRef m0, LLVMValueRef m1, LLVMValueRef n0,
                 LLVMValueRef n1, LLVMValueRef C, LLVMValueRef P) {
  bool low = gm_cbuf(p);
  cpu_kern_materialized_as(k, hero, C, low ? DT_F32 : DT_INVALID);
  LLVMValueRef out = low && !red ? cpu_buffer(k, in) : C;
  const Shape *s = &hero->shape;
  int64_t rst[HLO_MAX_RANK];
  if (red) gm_rowmajor(&red->shape, rst);
  LLVMValueRef idx[HLO_MAX_RANK];
  for (int d = 0; d < s->rank; d++)
    idx[d] = gi(k, 0);
  for (int j = 0; j < p->nloop; j++)
    idx[p->lout[j]] = lidx[j];
  GenLoop lm, ln;
  gm_unflatten(k, s, gloop(k, &lm, m0, m1, 1), p->mdim0, p->nm, idx);
  gm_unflatten(k, s, gloop(k, &ln, n0, n1, 1), p->ndim0, p->nn, idx);
  LLVMValueRef v = gen_value(k, red ? red->ops[0] : hero == in ? in : in->calls[0]->root, idx);
  if (v && !red) gen_store_elem(k, out, &in->shape, idx, v);
  if (v && red) {
    LLVMValueRef pos = gi(k, 0);
    for (int d = 0, o = 0; d < s->rank; d++)
      if (!hlo_ilist_has(&red->dims, d)) pos = gadd(k, pos, gmul(k, idx[d], gi(k, rst[o++])));
    LLVMValueRef q = gfp(k, P, pos), r = gm_reduce_combine(k, red, gload(k, k->cg->f32, q, 4), v);
    if (r) gstore(k, r, q, 4);
  }
  gen_loop_close(k, &ln);
  gen_loop_close(k, &lm);
}

/* The partial results P of a reducing kernel's chunk set to the reducer's identity. */
void gm_reduce_init(GenKern *k, const HInstr *red, LLVMValueRef P, int64_t part_bytes) {
  double id = 0;
  hlo_comp_identity(red->calls[0], DT_F32, &id);
  GenLoop lz;
  LLVMValueRef z = gloop(k, &lz, gi(k, 0), gi(k, part_bytes / 4), 1);
  gstore(k, LLVMConstReal(k->cg->f32, id), gfp(k, P, z), 4);
  gen_loop_close(k, &lz);
}

/* The kernel after a reducing GEMM's: red's output = init (+) the chunks' partial results, in
 * chunk order (the same at any thread count). */
bool gm_reduce_finish(CpuCg *cg, HInstr *in, const HInstr *red, int64_t part_off,
                      int64_t part_bytes, int64_t nchunks) {
  GenKern *k = cpu_kern_begin(cg, in);
  k->bind[k->nbind++] = (GenBind){in->calls[0], in, NULL, 0, 0};
  LLVMValueRef P = cpu_slot(k, (CpuSlot){CPU_SLOT_TEMP, NULL, NULL, cg->temp_base + part_off});
  LLVMValueRef out = cpu_buffer(k, in);
  LLVMValueRef idx[HLO_MAX_RANK];
  GenLoop l;
  LLVMValueRef pos = gloop(k, &l, gi(k, 0), gi(k, hlo_shape_elems(&red->shape)), 1);
  gm_unflatten(k, &red->shape, pos, 0, red->shape.rank, idx);
  LLVMValueRef acc = gen_value(k, red->ops[1], idx);
  for (int64_t j = 0; acc && j < nchunks; j++)
    acc = gm_reduce_combine(
        k, red, acc, gload(k, cg->g.f32, gfp(k, P, gadd(k, pos, gi(k, j * part_bytes / 4))), 4));
  if (acc) gen_store_elem(k, out, &in->shape, idx, acc);
  gen_loop_close(k, &l);
  k->nbind--;
  if (!cpu_kern_end(k, 1)) return false;
  cg->tasks[cg->ntasks - 1].finish = true;
  cg->tasks[cg->ntasks - 1].note = "partial results combined";
  return true;
}
