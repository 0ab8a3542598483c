/* targets/cpu/gemm/kernel.c: the GEMM kernels of a dot or convolution (cpu_gemm_kernel).
 *
 * cpu_gemm_kernel plans the product in plain C (plan.c: the problem, its chunks and blocks, the
 * scratch it needs), stages the operands that are not views, then hands it to the few-rows,
 * few-columns or Winograd kernels where they fit, else emits the blocked kernels: an optional
 * kernel that packs an operand once for all the chunks (a dot split by rows would otherwise
 * pack its B in every chunk), then the kernel whose chunks call the GEMM function on their
 * items, with the output fusion's epilogue (or the reduction by slices) after each call. A
 * product whose result is bf16 or f16 goes the way of the reduction by slices: each call of
 * at most 2 * MC rows writes its f32 sums into the chunk's slice buffer, from which the
 * epilogue rounds them once into the result (alone, or as the fusion's value of the product)
 * while they are in cache. The GEMM accumulates into C across its K blocks, so a 16-bit C
 * could not be stored along the way without rounding each block's partial sum. */
#include "gemm_impl.h"

/* Stage operand v of the hero of entry instruction `fusion` (a fusion, or the dot/convolution
 * itself) row-major into kernel-private scratch at byte offset off of the private area: a
 * fused computation that is not a plain view (a layer normalization feeding a dot), or a view
 * whose strides do not merge (OIHW weights of a convolution, an NCHW input). A kernel of its
 * own, split over its first dimension, run before the GEMM kernel. */
static bool gm_stage(CpuCg *cg, HInstr *fusion, const HInstr *v, int64_t off, GmView *out) {
  const Shape *s = &v->shape;
  GenKern *k = cpu_kern_begin(cg, fusion);
  if (fusion->op == OP_FUSION && v->parent != cg->g.entry)
    k->bind[k->nbind++] = (GenBind){fusion->calls[0], fusion, NULL, 0, 0};
  LLVMValueRef dst = cpu_slot(k, (CpuSlot){CPU_SLOT_TEMP, NULL, NULL, cg->temp_base + off});
  int64_t min = cg->o->par_min_elems > 0 ? cg->o->par_min_elems : 32768;
  int64_t d0 = s->rank > 0 ? s->dims[0] : 1;
  int64_t nch = hlo_shape_elems(s) < min ? 1 : d0 < 8 ? d0 : 8;
  if (nch < 1) nch = 1;
  GenLoop loops[HLO_MAX_RANK];
  LLVMValueRef idx[HLO_MAX_RANK];
  int nl = 0;
  for (int d = 0; d < s->rank; d++) {
    LLVMValueRef lo = gi(k, 0), hi = gi(k, s->dims[d]);
    if (d == 0 && nch > 1) {
      lo = LLVMBuildSDiv(k->B, gmul(k, cpu_kern(k)->chunk, gi(k, d0)), gi(k, nch), "");
      hi = LLVMBuildSDiv(k->B, gmul(k, gadd(k, cpu_kern(k)->chunk, gi(k, 1)), gi(k, d0)),
                         gi(k, nch), "");
    }
    idx[d] = gloop(k, &loops[nl++], lo, hi, 1);
  }
  LLVMValueRef val = gen_value(k, v, idx);
  if (val) gen_store_elem(k, dst, s, idx, val);
  for (int j = nl - 1; j >= 0; j--)
    gen_loop_close(k, &loops[j]);
  if (!cpu_kern_end(k, nch)) return false;
  cg->tasks[cg->ntasks - 1].note = "operand staged";
  *out = (GmView){NULL, false, off, 0, {0}, gm_elt(s->dt)};
  gm_rowmajor(s, out->st);
  return true;
}

/* The kernel that packs the operand a split dot's chunks share once (pl->pre: 1 B, 2 A) into
 * the private scratch at pl->pre_off, its chunks over (block, K block). */
static bool gm_prepack(CpuCg *cg, HInstr *in, const GmPlan *pl, LLVMValueRef bconst,
                       int64_t pk_off) {
  const GmProb p = pl->p;
  const GmCfg c = pl->c;
  const HInstr *red = pl->red;
  int pre = pl->pre;
  int64_t nnb = pl->nnb, nblk = pl->nblk, nkb = pl->nkb, nmb1 = pl->nmb1, mblk1 = pl->mblk1,
          pre_off = pl->pre_off;
  bool alt = pl->alt, merge = pl->merge;
  /* B: chunk (column block of the items, K block); A: (MC row block, K block) */
  int64_t nx = pre == 1 ? nnb : (p.M + c.mc - 1) / c.mc, xb = pre == 1 ? nblk : c.mc;
  int64_t pch = (alt && nmb1 > nx ? nmb1 : nx) * nkb;
  if (pch < 2) pch = 2;
  GenKern *k = cpu_kern_begin(cg, in);
  LLVMBuilderRef B = k->B;
  LLVMValueRef X = gm_view_ptr(k, pre == 1 ? &p.b : &p.a);
  LLVMValueRef dst = cpu_slot(k, (CpuSlot){CPU_SLOT_TEMP, NULL, NULL, cg->temp_base + pre_off});
  /* a chunk packs its block, [c0, c1); nothing when B comes packed (pre == 1). With alt,
     the serial run (the task's whole call, chunk pch) packs every block, and a parallel
     run with B packed packs A for alt's row blocks (mblk1 rows each, laid out as a call
     starting at the block's first row reads it: MC blocks within) */
  LLVMValueRef v_xb = gi(k, xb), v_nx = gi(k, nx);
  LLVMValueRef c0 = cpu_kern(k)->chunk, c1 = NULL, skip = NULL;
  LLVMValueRef pks = gm_packed_base(k, pk_off);
  if (pre == 1 && pks) skip = LLVMBuildIsNotNull(B, pks, "");
  LLVMValueRef serial = NULL;
  if (alt) {
    serial = LLVMBuildICmp(B, LLVMIntEQ, cpu_kern(k)->chunk, gi(k, pch), "");
    LLVMValueRef pkv = gm_b_packed(k, bconst, pks);
    LLVMValueRef rows = LLVMBuildAnd(B, pkv, LLVMBuildNot(B, serial, ""), "");
    v_xb = LLVMBuildSelect(B, rows, gi(k, mblk1), v_xb, "");
    v_nx = LLVMBuildSelect(B, rows, gi(k, nmb1), v_nx, "");
    c0 = LLVMBuildSelect(B, serial, gi(k, 0), c0, "");
  }
  LLVMValueRef nxk = gmul(k, v_nx, gi(k, nkb));
  c1 = gmin(k, gadd(k, cpu_kern(k)->chunk, gi(k, 1)), nxk);
  if (serial) c1 = LLVMBuildSelect(B, serial, nxk, c1, "");
  if (skip) c1 = LLVMBuildSelect(B, skip, c0, c1, "");
  GenLoop lcc;
  LLVMValueRef cc = gloop(k, &lcc, c0, c1, 1);
  LLVMValueRef xi = LLVMBuildSDiv(B, cc, gi(k, nkb), ""), kb = LLVMBuildSRem(B, cc, gi(k, nkb), "");
  int64_t ext = pre == 1 ? p.N : p.M;
  LLVMValueRef x0 = gmul(k, xi, v_xb), x1 = gmin(k, gadd(k, x0, v_xb), gi(k, ext));
  LLVMValueRef a[GB_COUNT];
  a[GB_X] = gep_e(k, p.et, X, gmul(k, x0, gi(k, pre == 1 ? p.bcs : p.ars)));
  a[GB_RS] = gi(k, pre == 1 ? p.brs : p.ars);
  a[GB_CS] = gi(k, pre == 1 ? p.bcs : p.acs);
  a[GB_N] = gsub(k, x1, x0);
  a[GB_K] = gi(k, p.K);
  a[GB_DST] = gfp(k, dst, gmul(k, x0, gi(k, p.K)));
  a[GB_KB0] = kb;
  a[GB_KB1] = gadd(k, kb, gi(k, 1));
  LLVMValueRef pf = gm_packx_function(cg, p.et, pre == 1);
  LLVMBuildCall2(B, LLVMGlobalGetValueType(pf), pf, a, GB_COUNT, "");
  gm_close(k, &lcc);
  if (!cpu_kern_end(k, pch)) return false;
  /* the serial run: nothing to do for B (unless reducing: its chunks run one by one and
     read the packed B); A is used by every column block, once packed */
  cg->tasks[cg->ntasks - 1].whole = (pre == 1 && !red) || merge || alt;
  cg->tasks[cg->ntasks - 1].note = pre == 1 ? "B packed" : "A packed";
  return true;
}

/* The blocked GEMM kernel being emitted: the values its items' calls share. */
typedef struct GmRun {
  GenKern *k;            /* the kernel */
  LLVMValueRef A, Bm, C; /* the operands' and the output's addresses (C NULL when reducing) */
  LLVMValueRef geo;      /* convolution: the geometry array (GC_*), else NULL */
  LLVMValueRef bconst;   /* B packed at compile time, or NULL */
  LLVMValueRef pkd;      /* the caller's packed weights' base (gm_packed_base), or NULL */
  int64_t pk_off;        /* B's place in them, or -1 */
  LLVMValueRef v_mblk, v_nblk, v_nmb, v_nnb; /* the items' blocks (run-time values with alt) */
  LLVMValueRef use1;                         /* alt's chunks (rows of full-width blocks), or NULL */
  LLVMValueRef whole;                        /* i1: the serial run */
  LLVMValueRef lo, hi;                       /* the chunk's items */
  LLVMValueRef packp;                        /* the chunk's packing area */
  LLVMValueRef Cs, P; /* reducing: the chunk's slice buffer and partial results */
} GmRun;

/* Open the blocked kernel: bindings, operand addresses, the convolution geometry, the chunk's
 * items and scratch (reducing: its partial results set to the reducer's identity). */
static void gm_run_begin(CpuCg *cg, HInstr *in, const GmPlan *pl, GmRun *r) {
  const GmProb *p = &pl->p;
  const HInstr *red = pl->red;
  GenKern *k = r->k = cpu_kern_begin(cg, in);
  LLVMBuilderRef B = k->B;
  if (pl->fusion) k->bind[k->nbind++] = (GenBind){in->calls[0], in, NULL, 0, 0};
  /* a B packed at compile time is all the calls read: the constant itself is not referenced
     (and leaves the object when nothing else reads it) */
  r->A = gm_view_ptr(k, &p->a);
  r->Bm = r->bconst ? LLVMConstNull(cg->g.ptr) : gm_view_ptr(k, &p->b);
  r->C = red ? NULL : cpu_buffer(k, in);
  LLVMValueRef scratch =
      cpu_slot(k, (CpuSlot){CPU_SLOT_TEMP, NULL, NULL, cg->temp_base + pl->stage_bytes});
  r->geo = NULL;
  if (p->conv) {
    r->geo = gen_alloca(k, LLVMArrayType2(cg->g.i64, GC_COUNT));
    for (int j = 0; j < GC_M0; j++) {
      LLVMValueRef ix = gi(k, j);
      LLVMBuildStore(B, gi(k, p->geo[j]), LLVMBuildInBoundsGEP2(B, cg->g.i64, r->geo, &ix, 1, ""));
    }
  }
  /* items of this chunk: [chunk * items / nchunks, (chunk + 1) * items / nchunks), ordered
     (loop index, column block, row block); consecutive row blocks of one column block are
     done by one GEMM call (B packed once); chunk nchunks (the serial run) does every item
     with the packing area of chunk 0 */
  LLVMValueRef chunk;
  r->pkd = gm_packed_base(k, r->pk_off);
  /* the items' blocks: mblk x nblk, nmb x nnb of them; with alt and B packed, rows of
     full-width column blocks (chunks) or the full-width blocks (the serial run) */
  r->v_mblk = gi(k, pl->mblk), r->v_nblk = gi(k, pl->nblk), r->v_nmb = gi(k, pl->nmb),
  r->v_nnb = gi(k, pl->nnb);
  LLVMValueRef v_items = gi(k, pl->items);
  r->use1 = NULL;
  if (pl->alt) {
    LLVMValueRef pkv = gm_b_packed(k, r->bconst, r->pkd);
    LLVMValueRef ser = LLVMBuildICmp(B, LLVMIntSGE, cpu_kern(k)->chunk, gi(k, pl->nchunks), "");
    r->use1 = LLVMBuildAnd(B, pkv, LLVMBuildNot(B, ser, ""), "");
    r->v_mblk = LLVMBuildSelect(B, r->use1, gi(k, pl->mblk1), r->v_mblk, "");
    r->v_nmb = LLVMBuildSelect(B, r->use1, gi(k, pl->nmb1), r->v_nmb, "");
    r->v_nblk = LLVMBuildSelect(B, pkv, gi(k, pl->nblk0), r->v_nblk, "");
    r->v_nnb = LLVMBuildSelect(B, pkv, gi(k, pl->nnb0), r->v_nnb, "");
    v_items = LLVMBuildSelect(B, LLVMBuildAnd(B, pkv, ser, ""), gi(k, pl->nnb0), v_items, "");
  }
  r->whole = gm_chunk_items_v(k, v_items, pl->nchunks, &chunk, &r->lo, &r->hi);
  r->packp = LLVMBuildInBoundsGEP2(B, cg->g.i8, scratch,
                                   (LLVMValueRef[]){gmul(k, chunk, gi(k, pl->pack))}, 1, "");
  /* reducing: the chunk's slice buffer and its partial results, which start from the
     reducer's identity (offsets in the private scratch, as scratch's own) */
  r->Cs = r->P = NULL;
  if (pl->cbuf)
    r->Cs = LLVMBuildInBoundsGEP2(B, cg->g.i8, scratch,
                                  (LLVMValueRef[]){gadd(k, gi(k, pl->slice_off - pl->stage_bytes),
                                                        gmul(k, chunk, gi(k, pl->slice_bytes)))},
                                  1, "");
  if (red) {
    r->P = LLVMBuildInBoundsGEP2(B, cg->g.i8, scratch,
                                 (LLVMValueRef[]){gadd(k, gi(k, pl->part_off - pl->stage_bytes),
                                                       gmul(k, chunk, gi(k, pl->part_bytes)))},
                                 1, "");
    gm_reduce_init(k, red, r->P, pl->part_bytes);
  }
}

/* The GEMM call on rows [s0, s1) (of the item's rows from m0) and columns [n0, n1) of the
 * item at offsets offa, offb, offc of the loop dimensions. */
static void gm_run_call(CpuCg *cg, const GmPlan *pl, const GmRun *r, LLVMValueRef s0,
                        LLVMValueRef s1, LLVMValueRef m0, LLVMValueRef n0, LLVMValueRef n1,
                        LLVMValueRef packp, LLVMValueRef offa, LLVMValueRef offb,
                        LLVMValueRef offc) {
  const GmProb *p = &pl->p;
  GenKern *k = r->k;
  LLVMBuilderRef B = k->B;
  LLVMValueRef args[GP_COUNT];
  args[GP_M] = gsub(k, s1, s0);
  args[GP_N] = gsub(k, n1, n0);
  args[GP_K] = gi(k, p->K);
  if (p->conv) {
    /* the packer decodes output pixels from s0 + row; the image is passed whole */
    args[GP_A] = gfp(k, r->A, offa);
    LLVMValueRef ix = gi(k, GC_M0);
    LLVMBuildStore(B, s0, LLVMBuildInBoundsGEP2(B, cg->g.i64, r->geo, &ix, 1, ""));
  } else {
    args[GP_A] = gep_e(k, p->et, r->A, gadd(k, offa, gmul(k, s0, gi(k, p->ars))));
  }
  args[GP_ARS] = gi(k, p->ars);
  args[GP_ACS] = gi(k, p->acs);
  args[GP_B] =
      r->bconst ? r->Bm : gep_e(k, p->et, r->Bm, gadd(k, offb, gmul(k, n0, gi(k, p->bcs))));
  args[GP_BRS] = gi(k, p->brs);
  args[GP_BCS] = gi(k, p->bcs);
  args[GP_C] = pl->cbuf ? gfp(k, r->Cs, n0)
                        : gfp(k, r->C, gadd(k, offc, gadd(k, gmul(k, s0, gi(k, p->ldc)), n0)));
  args[GP_LDC] = gi(k, p->ldc);
  args[GP_PACK] = packp;
  args[GP_CONV] = p->conv ? r->geo : LLVMConstNull(cg->g.ptr);
  args[GP_BKEEP] = pl->slices && p->conv && pl->resident
                       ? LLVMBuildZExt(B, LLVMBuildICmp(B, LLVMIntSGT, s0, m0, ""), cg->g.i64, "")
                       : gi(k, 0);
  args[GP_BPRE] = args[GP_APRE] = LLVMConstNull(cg->g.ptr);
  /* (the pairs' layout: the item's block at n0 times a column's bytes, in floats) */
  int64_t col = pl->pairs ? gm_pairs_col_bytes(p->et, p->K) / 4 : p->K;
  if (r->bconst)
    args[GP_BPRE] = gfp(k, cpu_slot(k, (CpuSlot){CPU_SLOT_GLOBAL, NULL, r->bconst, 0}),
                        gmul(k, n0, gi(k, col)));
  if (pl->pre) {
    /* the call's block of the packed operand (A: all rows, pre == 2 means nmb == 1) */
    LLVMValueRef prep =
        cpu_slot(k, (CpuSlot){CPU_SLOT_TEMP, NULL, NULL, cg->temp_base + pl->pre_off});
    if (pl->pre == 1)
      prep = LLVMBuildSelect(B, r->whole, LLVMConstNull(cg->g.ptr),
                             gfp(k, prep, gmul(k, n0, gi(k, p->K))), "");
    args[pl->pre == 1 ? GP_BPRE : GP_APRE] =
        pl->merge ? LLVMBuildSelect(B, r->whole, LLVMConstNull(cg->g.ptr), prep, "") : prep;
    /* alt's chunks: their row block's A, packed for a call starting at its first row */
    if (r->use1)
      args[GP_APRE] =
          LLVMBuildSelect(B, r->use1, gfp(k, prep, gmul(k, m0, gi(k, p->K))), args[GP_APRE], "");
  }
  if (r->pkd)
    args[GP_BPRE] = gm_or_packed(k, r->pkd, r->pk_off, gmul(k, n0, gi(k, col)), args[GP_BPRE]);
  LLVMBuildCall2(B, gm_fn_type(cg),
                 pl->pairs ? gm_pairs_function(cg, p->et) : gm_function(cg, p->et), args, GP_COUNT,
                 "");
}

/* The chunk's items, each a GEMM call over consecutive row blocks of one column block (in
 * slices of 2 * MC rows with pl->slices), each followed by the epilogue. */
static void gm_run_items(CpuCg *cg, HInstr *in, const HInstr *hero, const GmPlan *pl,
                         const GmRun *r) {
  const GmProb *p = &pl->p;
  GenKern *k = r->k;
  LLVMBuilderRef B = k->B;
  LLVMValueRef itv = gvar(k, r->lo);
  GWhile items_loop;
  LLVMValueRef it = gwhile_open(k, &items_loop, itv, r->hi, "item", "itemb", "iteme");
  int cache_mark = k->ncache;
  LLVMValueRef mi = LLVMBuildSRem(B, it, r->v_nmb, "");
  LLVMValueRef rest = LLVMBuildSDiv(B, it, r->v_nmb, "");
  LLVMValueRef ni = LLVMBuildSRem(B, rest, r->v_nnb, "");
  LLVMValueRef bi = LLVMBuildSDiv(B, rest, r->v_nnb, "");
  LLVMValueRef gend = gmin(k, r->hi, gmul(k, gadd(k, rest, gi(k, 1)), r->v_nmb));
  LLVMValueRef mlast = LLVMBuildSRem(B, gsub(k, gend, gi(k, 1)), r->v_nmb, "");
  LLVMBuildStore(B, pl->merge ? LLVMBuildSelect(B, r->whole, r->hi, gend, "") : gend, itv);
  LLVMValueRef lidx[HLO_MAX_RANK], offa, offb, offc;
  gm_loop_offsets(k, p, bi, lidx, &offa, &offb, &offc);
  LLVMValueRef m0 = gmul(k, mi, r->v_mblk), n0 = gmul(k, ni, r->v_nblk);
  LLVMValueRef m1 = gmin(k, gmul(k, gadd(k, mlast, gi(k, 1)), r->v_mblk), gi(k, p->M)),
               n1 = gmin(k, gadd(k, n0, r->v_nblk), gi(k, p->N));
  LLVMValueRef packp = r->packp;
  if (pl->merge) {
    n0 = LLVMBuildSelect(B, r->whole, gi(k, 0), n0, "");
    n1 = LLVMBuildSelect(B, r->whole, gi(k, p->N), n1, "");
    if (pl->merge_apart)
      packp = LLVMBuildSelect(
          B, r->whole,
          cpu_slot(k, (CpuSlot){CPU_SLOT_TEMP, NULL, NULL, cg->temp_base + pl->merge_off}), packp,
          "");
  }
  GenLoop lsl;
  LLVMValueRef s0 = m0, s1 = m1;
  if (pl->slices) {
    s0 = gloop(k, &lsl, m0, m1, 2 * pl->c.mc);
    s1 = gmin(k, gadd(k, s0, gi(k, 2 * pl->c.mc)), m1);
  }
  gm_run_call(cg, pl, r, s0, s1, m0, n0, n1, packp, offa, offb, offc);
  if ((pl->fusion || gm_cbuf(p)) && !k->failed) {
    /* reducing or a 16-bit result: the slice buffer seen as the whole product (element (s0, 0)
       of the loop index at Cs) */
    LLVMValueRef V =
        !pl->cbuf ? r->C
                  : LLVMBuildGEP2(B, cg->g.f32, r->Cs,
                                  (LLVMValueRef[]){
                                      gsub(k, gi(k, 0), gadd(k, offc, gmul(k, s0, gi(k, p->ldc))))},
                                  1, "");
    gm_epilogue(k, in, hero, pl->red, p, lidx, s0, s1, n0, n1, V, r->P);
  }
  if (pl->slices) gen_loop_close(k, &lsl);
  gwhile_close(k, &items_loop);
  k->ncache = cache_mark;
}

/* The blocked kernels of a planned product: B packed at compile time where it is a constant,
 * B registered for packing ahead of the runs where it is a parameter, the kernel packing a
 * shared operand once, the GEMM kernel, and (reducing) the kernel combining the partials. */
static int gm_blocked(CpuCg *cg, HInstr *in, const HInstr *hero, const GmPlan *pl) {
  GmRun r = {0};
  r.bconst = pl->bconst
                 ? gm_const_packed_b(cg, &pl->c, &pl->p, pl->pairs, pl->lnblk, pl->lnnb, pl->kstep)
                 : NULL;
  if (pl->need > cg->extra_temp) cg->extra_temp = pl->need;
  /* B an entry parameter: the caller may pass it packed ahead of the runs (NAME_pack,
     NAME_run_packed); when it does, nothing packs B (the packing kernel does nothing) */
  r.pk_off = pl->pack_ahead ? gm_pack_job(cg, &pl->p, pl->lnblk, pl->lnnb, pl->pairs) : -1;
  if (pl->pre && !gm_prepack(cg, in, pl, r.bconst, r.pk_off)) return -1;
  gm_run_begin(cg, in, pl, &r);
  gm_run_items(cg, in, hero, pl, &r);
  if (!cpu_kern_end(r.k, pl->nchunks)) return -1;
  /* reducing: every chunk runs, the serial run too (each fills its own partial results) */
  cg->tasks[cg->ntasks - 1].whole = pl->nchunks > 1 && !pl->red;
  bool tiles = gm_pairs_tiles(&pl->c, pl->p.et);
  if (pl->pairs)
    cg->tasks[cg->ntasks - 1].note = tiles               ? "AMX tiles"
                                     : pl->p.et == GE_S8 ? "AVX512-VNNI"
                                                         : "AVX512-BF16";
  if (pl->red && !gm_reduce_finish(cg, in, pl->red, pl->part_off, pl->part_bytes, pl->nchunks))
    return -1;
  return 1;
}

/* Stage the operands of problem p that are not views (staged == -2), A then B, one after the
 * other at the start of the private scratch. */
static bool gm_stage_operands(CpuCg *cg, HInstr *in, GmProb *p) {
  int64_t off = 0;
  GmView *ops[2] = {&p->a, &p->b};
  for (int j = 0; j < 2; j++)
    if (ops[j]->staged == -2) {
      int64_t at = off;
      off += memplan_align((int64_t)hlo_shape_bytes(&ops[j]->base->shape));
      if (!gm_stage(cg, in, ops[j]->base, at, ops[j])) return false;
    }
  return true;
}

int cpu_gemm_kernel(CpuCg *cg, HInstr *in, const HInstr *hero) {
  if (cpu_knob(cg, CPU_KNOB_NO_GEMM)) return 0;
  GmPlan pl;
  if (!gm_plan(cg, in, hero, &pl)) return 0;
  if (!gm_stage_operands(cg, in, &pl.p)) return -1;
  switch (pl.path) {
  case GM_PATH_FEW_ROWS:
    cg->products[CPU_PROD_FEW]++;
    return gm_small_m(cg, in, hero, &pl.p, &pl.c, pl.nb, pl.want, pl.stage_bytes);
  case GM_PATH_FEW_COLS:
    cg->products[CPU_PROD_FEW]++;
    return gm_few_n(cg, in, hero, &pl.p, &pl.c, pl.want, pl.stage_bytes);
  case GM_PATH_WINOGRAD:
    cg->products[CPU_PROD_WINO]++;
    return gm_winograd(cg, in, hero, pl.red, &pl.p, &pl.c, pl.stage_bytes, pl.want);
  case GM_PATH_BLOCKED: break;
  }
  cg->products[pl.pairs ? (gm_pairs_tiles(&pl.c, pl.p.et) ? CPU_PROD_AMX : CPU_PROD_DPBF16)
               : pl.p.et == GE_F32 ? CPU_PROD_GEMM
                                   : CPU_PROD_GEMM_WIDE]++;
  return gm_blocked(cg, in, hero, &pl);
}
