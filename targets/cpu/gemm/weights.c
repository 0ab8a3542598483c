/* targets/cpu/gemm/weights.c: B packed at compile time or by the caller ahead of the runs.
 *
 * Weights are usually the B of a product, and packing them is work every run would repeat. A
 * constant B (frozen weights) is packed at compile time into read-only data in the layout of a
 * B packed beforehand, and replaces the constant; a B that is an entry parameter is registered
 * as a pack job (CpuCg.packs), which NAME_pack packs into the caller's buffer once, and the
 * kernels read it there when the run is given it (CPU_SLOT_PACKED), packing it themselves
 * otherwise. Winograd's taps go the same two ways, transformed. A B of a product on depth
 * groups (AMX, AVX512-BF16) is packed ahead into the tiles it reads (gm_pairs_packb_function),
 * and a frozen bf16 one at compile time into the same tiles (gm_pairs_panels: its own size).
 * Another B of bf16, f16 or s8 is packed ahead the same way, widened to the f32 panels the GEMM
 * reads (twice or four times its size: a weight read packed costs that memory, and its bandwidth,
 * for the packing it saves); such a frozen constant is packed by the GEMM at run time (so is a
 * frozen s8 B of the depth-group function: AMX-INT8 and VNNI read it in two layouts).
 */
#include "gemm_impl.h"

/* The K x N matrix B (element (k, n) at src[k * rs + n * cs]) in the layout of a B packed
 * beforehand (GP_BPRE) for nnb column blocks of nblk columns, K blocks kstep deep, into dst
 * (zeroed by the caller: the panels' columns past N stay zero). */
void gm_panels(const GmCfg *c, const float *src, int64_t rs, int64_t cs, int64_t K, int64_t N,
               int64_t nblk, int64_t nnb, int64_t kstep, float *dst) {
  int64_t NR = c->nr;
  for (int64_t ni = 0; ni < nnb; ni++) {
    int64_t n0 = ni * nblk, ncall = gm_min(nblk, N - n0), ncr = gm_roundup(ncall, NR);
    for (int64_t pc = 0; pc < K; pc += kstep) {
      int64_t kc = gm_min(kstep, K - pc);
      float *blk = dst + n0 * K + pc * ncr;
      for (int64_t jr = 0; jr < ncr; jr += NR)
        for (int64_t kk = 0; kk < kc; kk++)
          for (int64_t cc = 0; cc < NR && jr + cc < ncall; cc++)
            blk[jr * kc + kk * NR + cc] = src[(pc + kk) * rs + (n0 + jr + cc) * cs];
    }
  }
}

/* (whether view v reads a constant literal of type dt in place) */
static bool gm_view_const_of(const GmCfg *c, const GmView *v, DType dt) {
  return v->staged == -1 && v->base && v->base->op == OP_CONSTANT && v->base->literal &&
         v->base->shape.dt == dt && c->const_pack;
}

/* The bf16 elements of a view reading a constant literal in place, for the depth-group
 * functions' layout (gm_pairs_panels), else NULL. */
const void *gm_view_const_bf16(const GmCfg *c, const GmView *v) {
  if (!gm_view_const_of(c, v, DT_BF16)) return NULL;
  return (const uint16_t *)v->base->literal->data + v->off;
}

/* The floats of view v when it reads a constant literal in place (frozen weights: what the
 * dots' constant B and Winograd's constant taps are made from at compile time), else NULL. */
const float *gm_view_const(const GmCfg *c, const GmView *v) {
  if (!gm_view_const_of(c, v, DT_F32)) return NULL;
  return (const float *)v->base->literal->data + v->off;
}

/* A constant B (frozen weights) packed at compile time into read-only data, in the layout of
 * a B packed beforehand (GP_BPRE) for the column blocks of the items (nnb blocks of nblk
 * columns from column 0; each a single column block of the GEMM function, nblk <= NC): block
 * n0 at n0 * K, its K blocks (kstep deep, as gm_kstep) at pc * roundup(ncall, NR), NR-wide
 * panels kc deep within, zero columns past the block. Every call then reads B in place and
 * packs nothing, which matters most to inference with frozen weights. NULL when B is not a
 * constant literal read in place. */
LLVMValueRef gm_const_packed_b(CpuCg *cg, const GmCfg *c, const GmProb *p, bool pairs, int64_t nblk,
                               int64_t nnb, int64_t kstep) {
  char name[512];
  snprintf(name, sizeof name, "%s_cb%d", cg->o->name, cg->ntasks);
  if (pairs) {
    /* a bf16 B of the depth-group function: its tiles, the same size as the constant */
    const void *s16 = gm_view_const_bf16(c, &p->b);
    if (!s16 || p->K < 1 || p->N < 1) return NULL;
    int64_t bytes = gm_pairs_packed_bytes(GE_BF16, p->N, nblk, nnb, p->K);
    uint8_t *buf = hlo_arena_alloc(cg->g.scratch, (size_t)bytes);
    memset(buf, 0, (size_t)bytes);
    gm_pairs_panels(c, GE_BF16, s16, p->brs, p->bcs, p->K, p->N, nblk, nnb, buf);
    return cpu_rodata(cg, name, buf, (size_t)bytes);
  }
  const float *src = gm_view_const(c, &p->b);
  if (!src || p->K < 1 || p->N < 1) return NULL;
  int64_t K = p->K, N = p->N, NR = c->nr;
  int64_t total = (nnb > 1 ? nnb * nblk : gm_roundup(N, NR)) * K;
  float *buf = hlo_arena_alloc(cg->g.scratch, sizeof(float) * (size_t)total);
  memset(buf, 0, sizeof(float) * (size_t)total);
  gm_panels(c, src, p->brs, p->bcs, K, N, nblk, nnb, kstep, buf);
  return cpu_rodata(cg, name, buf, sizeof(float) * (size_t)total);
}

/* The byte offset in the packed weights (NAME_pack) of B of product p (no batch) when B is an
 * entry parameter read in place by the entry's kernels (not one a result may alias: the run would
 * change it; gm_pack_param: that parameter, else -1), packed for nnb column blocks of nblk
 * columns, or for a Winograd convolution its taps transformed (as GW_U does); -1 otherwise. A B
 * already registered with the same view and blocks (a weight two products share) keeps its
 * place. */
int gm_pack_param(const CpuCg *cg, const GmProb *p) {
  const GmView *v = &p->b;
  if ((p->conv && !p->wino) || v->staged != -1 || v->global || !v->base ||
      v->base->op != OP_PARAMETER || v->base->parent != cg->g.entry ||
      cg->region != &cg->entry_region || p->K < 1 || p->N < 1)
    return -1;
  int64_t boff = 0;
  const MemBuf *mb = &cg->plan.bufs[memplan_base(&cg->plan, v->base->idx, &boff)];
  if (mb->kind != MEM_PARAM || boff != 0) return -1;
  for (int r = 0; r < cg->plan.nresults; r++)
    if (cg->plan.results[r].alias_param == mb->param) return -1;
  return (int)mb->param;
}

int64_t gm_pack_job(CpuCg *cg, const GmProb *p, int64_t nblk, int64_t nnb, bool pairs) {
  int param = gm_pack_param(cg, p);
  if (param < 0) return -1;
  const GmView *v = &p->b;
  int kind = p->wino ? 1 : pairs ? 2 : 0;
  int64_t K = p->wino ? p->geo[GC_CI] : p->K, NR = gm_cfg(cg).nr;
  int64_t wk[4] = {0};
  if (p->wino) memcpy(wk, p->wk, sizeof wk);
  for (int i = 0; i < cg->npacks; i++) {
    const CpuPackJob *j = &cg->packs[i];
    if (j->kind == kind && j->param == param && j->off == v->off && j->rs == p->brs &&
        j->cs == p->bcs && j->K == K && j->N == p->N && j->nblk == nblk && j->nnb == nnb &&
        !memcmp(j->wk, wk, sizeof wk))
      return j->dst;
  }
  if (cg->npacks == cg->pack_cap) {
    int nc = cg->pack_cap ? 2 * cg->pack_cap : 8;
    CpuPackJob *np = hlo_arena_alloc(cg->g.scratch, sizeof *np * (size_t)nc);
    if (cg->npacks) memcpy(np, cg->packs, sizeof *np * (size_t)cg->npacks);
    cg->packs = np;
    cg->pack_cap = nc;
  }
  int64_t floats = kind == 1   ? 16 * K * gm_roundup(p->N, NR)
                   : kind == 2 ? gm_pairs_packed_bytes(p->et, p->N, nblk, nnb, K) / 4
                               : (nnb > 1 ? nnb * nblk : gm_roundup(p->N, NR)) * K;
  CpuPackJob *j = &cg->packs[cg->npacks++];
  *j = (CpuPackJob){kind,
                    param,
                    v->off,
                    p->brs,
                    p->bcs,
                    K,
                    p->N,
                    nblk,
                    nnb,
                    cg->packed_bytes,
                    {wk[0], wk[1], wk[2], wk[3]},
                    (int)p->et};
  cg->packed_bytes += memplan_align(floats * 4);
  return j->dst;
}

/* The caller's packed weights as a kernel sees them (CPU_SLOT_PACKED: NULL when the run was
 * given none), or NULL when the operand has no place there (pk_off < 0). */
LLVMValueRef gm_packed_base(GenKern *k, int64_t pk_off) {
  return pk_off >= 0 ? cpu_slot(k, (CpuSlot){CPU_SLOT_PACKED, NULL, NULL, 0}) : NULL;
}

/* Element eoff of the operand's place at byte pk_off of the packed weights base when the run
 * was given them, else other. */
LLVMValueRef gm_or_packed(GenKern *k, LLVMValueRef base, int64_t pk_off, LLVMValueRef eoff,
                          LLVMValueRef other) {
  LLVMValueRef p =
      gfp(k, LLVMBuildGEP2(k->B, k->cg->i8, base, (LLVMValueRef[]){gi(k, pk_off)}, 1, ""), eoff);
  return LLVMBuildSelect(k->B, LLVMBuildIsNull(k->B, base, ""), other, p, "");
}

/* Whether a product's B is read packed in this run: packed at compile time (bconst), or by
 * the caller ahead of the runs (the packed weights' base pkb not NULL). */
LLVMValueRef gm_b_packed(GenKern *k, LLVMValueRef bconst, LLVMValueRef pkb) {
  if (bconst || !pkb) return LLVMConstInt(k->cg->i1, bconst ? 1 : 0, 0);
  return LLVMBuildIsNotNull(k->B, pkb, "");
}

void cpu_gemm_pack_function(CpuCg *cg) {
  char name[512];
  snprintf(name, sizeof name, "%s_pack", cg->o->name);
  LLVMTypeRef ps[2] = {cg->g.ptr, cg->g.ptr};
  LLVMBasicBlockRef saved = LLVMGetInsertBlock(cg->g.B);
  GenKern *k = gm_fn_begin(cg, name, LLVMFunctionType(cg->g.i32, ps, 2, 0));
  LLVMValueRef fn = k->fn;
  LLVMSetLinkage(fn, LLVMExternalLinkage); /* part of the interface */
  LLVMBasicBlockRef bad = LLVMAppendBasicBlockInContext(cg->g.C, fn, "bad");
  LLVMBasicBlockRef go = LLVMAppendBasicBlockInContext(cg->g.C, fn, "go");
  LLVMBuilderRef B = cg->g.B;
  LLVMValueRef args = LLVMGetParam(fn, 0), packed = LLVMGetParam(fn, 1),
               nul = LLVMConstNull(cg->g.ptr);
  LLVMValueRef isbad = LLVMBuildICmp(
      B, LLVMIntNE, LLVMBuildAnd(B, LLVMBuildPtrToInt(B, packed, cg->g.i64, ""), gi(k, 63), ""),
      gi(k, 0), "");
  if (cg->npacks) {
    isbad = LLVMBuildOr(B, isbad, LLVMBuildICmp(B, LLVMIntEQ, args, nul, ""), "");
    isbad = LLVMBuildOr(B, isbad, LLVMBuildICmp(B, LLVMIntEQ, packed, nul, ""), "");
  }
  LLVMBuildCondBr(B, isbad, bad, go);
  LLVMPositionBuilderAtEnd(B, bad);
  LLVMBuildRet(B, LLVMConstInt(cg->g.i32, 1, 0));
  LLVMPositionBuilderAtEnd(B, go);
  /* (the functions called are made on first use; their makers leave the builder where it was) */
  GmCfg c = gm_cfg(cg);
  for (int i = 0; i < cg->npacks; i++) {
    const CpuPackJob *j = &cg->packs[i];
    LLVMValueRef ix = gi(k, j->param);
    LLVMValueRef X =
        LLVMBuildLoad2(B, cg->g.ptr, LLVMBuildInBoundsGEP2(B, cg->g.ptr, args, &ix, 1, ""), "");
    if (j->kind == 1) {
      /* a Winograd convolution's taps, transformed for all input channels */
      gm_wino_taps(
          k, &c, gfp(k, X, gi(k, j->off)),
          LLVMBuildInBoundsGEP2(B, cg->g.i8, packed, (LLVMValueRef[]){gi(k, j->dst)}, 1, ""),
          gi(k, 0), gi(k, j->K), j->K, j->N, j->wk);
      continue;
    }
    int64_t ks = gm_kstep(&c, j->K), nkb = (j->K + ks - 1) / ks;
    LLVMValueRef pf = j->kind == 2 ? gm_pairs_packb_function(cg, (GmElt)j->et)
                                   : gm_packx_function(cg, (GmElt)j->et, true);
    /* (an item's block at x0 times K's floats, or on depth groups x0 times a column's bytes) */
    int64_t per_col = j->kind == 2 ? gm_pairs_col_bytes((GmElt)j->et, j->K) : j->K * 4;
    for (int64_t xi = 0; xi < j->nnb; xi++) {
      int64_t x0 = xi * j->nblk, x1 = gm_min(x0 + j->nblk, j->N);
      LLVMValueRef a[GB_COUNT];
      a[GB_X] = gep_e(k, (GmElt)j->et, X, gi(k, j->off + x0 * j->cs));
      a[GB_RS] = gi(k, j->rs);
      a[GB_CS] = gi(k, j->cs);
      a[GB_N] = gi(k, x1 - x0);
      a[GB_K] = gi(k, j->K);
      a[GB_DST] = LLVMBuildInBoundsGEP2(B, cg->g.i8, packed,
                                        (LLVMValueRef[]){gi(k, j->dst + x0 * per_col)}, 1, "");
      a[GB_KB0] = gi(k, 0);
      a[GB_KB1] = gi(k, nkb);
      LLVMBuildCall2(B, LLVMGlobalGetValueType(pf), pf, a, GB_COUNT, "");
    }
  }
  LLVMBuildRet(B, LLVMConstInt(cg->g.i32, 0, 0));
  if (saved) LLVMPositionBuilderAtEnd(cg->g.B, saved);
}
