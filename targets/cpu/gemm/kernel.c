/* targets/cpu/gemm/kernel.c: the GEMM kernels of a dot or convolution (cpu_gemm_kernel).
 *
 * cpu_gemm_kernel plans the product in plain C (plan.c: the problem, its chunks and blocks, the
 * scratch it needs), stages the operands that are not views, then hands it to the few-rows,
 * few-columns or Winograd kernels where they fit, else emits the blocked kernels: an optional
 * kernel that packs an operand once for all the chunks (a dot split by rows would otherwise
 * pack its B in every chunk), then the kernel whose chunks call the GEMM function on their
 * items, with the output fusion's epilogue (or the reduction by slices) after each call. */
#include "gemm_impl.h"

enum { GM_RED_KEEP = 1 << 20 }; /* elements a reduction over a product may keep */
enum { GM_TINY_MACS = 1 << 16 }; /* products below this many multiply-adds: cpu_gemm_kernel */

/* Stage operand v of the hero of entry instruction `fusion` (a fusion, or the dot/convolution
 * itself) row-major into kernel-private scratch at byte offset off of the private area: a
 * fused computation that is not a plain view (a layer normalization feeding a dot), or a view
 * whose strides do not merge (OIHW weights of a convolution, an NCHW input). A kernel of its
 * own, split over its first dimension, run before the GEMM kernel. */
static bool gm_stage(CpuCg *cg, HInstr *fusion, const HInstr *v, int64_t off, GmView *out) {
  const Shape *s = &v->shape;
  CpuKern *k = cpu_kern_begin(cg, fusion);
  if (fusion->op == OP_FUSION && v->parent != cg->entry)
    k->bind[k->nbind++] = (CpuBind){fusion->calls[0], fusion, NULL, 0, 0};
  LLVMValueRef dst = cpu_slot(k, (CpuSlot){CPU_SLOT_TEMP, NULL, NULL, cg->temp_base + off});
  int64_t min = cg->o->par_min_elems > 0 ? cg->o->par_min_elems : 32768;
  int64_t d0 = s->rank > 0 ? s->dims[0] : 1;
  int64_t nch = hlo_shape_elems(s) < min ? 1 : d0 < 8 ? d0 : 8;
  if (nch < 1) nch = 1;
  CpuLoop loops[HLO_MAX_RANK];
  LLVMValueRef idx[HLO_MAX_RANK];
  int nl = 0;
  for (int d = 0; d < s->rank; d++) {
    LLVMValueRef lo = gi(k, 0), hi = gi(k, s->dims[d]);
    if (d == 0 && nch > 1) {
      lo = LLVMBuildSDiv(k->B, gmul(k, k->chunk, gi(k, d0)), gi(k, nch), "");
      hi = LLVMBuildSDiv(k->B, gmul(k, gadd(k, k->chunk, gi(k, 1)), gi(k, d0)), gi(k, nch), "");
    }
    idx[d] = gloop(k, &loops[nl++], lo, hi, 1);
  }
  LLVMValueRef val = cpu_gen(k, v, idx);
  if (val) cpu_store_elem(k, dst, s, idx, val);
  for (int j = nl - 1; j >= 0; j--) cpu_loop_close(k, &loops[j]);
  if (!cpu_kern_end(k, nch)) return false;
  cg->tasks[cg->ntasks - 1].note = "operand staged";
  *out = (GmView){NULL, false, off, 0, {0}};
  gm_rowmajor(s, out->st);
  return true;
}

int cpu_gemm_kernel(CpuCg *cg, HInstr *in, const HInstr *hero) {
  if (getenv("HLOC_CPU_NO_GEMM")) return 0;
  const HInstr *fusion = hero == in ? NULL : in;
  /* a fusion reducing the epilogue: the product is computed in slices into private scratch,
     each slice reduced into its chunk's partial results, which a last kernel combines */
  const HInstr *red = fusion ? gm_reduce_root(in, hero) : NULL;
  /* (partial results per chunk: a reduction keeping many elements goes to the generic kernels) */
  if (red && hlo_shape_elems(&red->shape) > GM_RED_KEEP) return 0;
  GmProb p;
  memset(&p, 0, sizeof p);
  /* operands as views where possible, else staged row-major (which makes them mergeable) */
  bool ok = false;
  /* a convolution Winograd may take is first seen as such (B through any strides); the
     implicit GEMM's view is the fallback (gm_wino_fits) */
  for (int wino = hero->op == OP_CONVOLUTION && gm_wino_conv(cg, hero); wino >= 0 && !ok; wino--)
    for (int stage = 0; stage < 4 && !ok; stage++) {
      memset(&p, 0, sizeof p);
      ok = hero->op == OP_DOT ? gm_dot_prob(cg, fusion, hero, stage, &p)
                              : gm_conv_prob(cg, fusion, hero, stage, wino, &p);
      if (ok && wino && !gm_wino_fits(&p)) ok = false;
    }
  if (!ok || p.M < 1 || p.N < 1) return 0;
  GmCfg c = gm_cfg(cg);
  /* work items: (loop index, row block, column block) */
  int64_t nb = 1;
  for (int j = 0; j < p.nloop; j++) nb *= p.lext[j];
  double flops = 2.0 * (double)nb * (double)p.M * (double)p.N * (double)p.K;
  int64_t min = cg->o->par_min_elems > 0 ? cg->o->par_min_elems : 32768;
  int64_t want = flops / 64.0 < (double)min ? 1 : flops < 2.5e8 ? 4 : 8;
  const char *tune = getenv("HLOC_CPU_GEMM_CHUNKS"); /* experiments: chunks of a split product */
  bool tuned = want > 1 && tune && atoi(tune) > 0;
  if (tuned) want = atoi(tune);
  int64_t mblk = p.M, nblk = p.N;
  if (nblk > c.nc) nblk = c.nc;
  if (!p.conv && p.N > c.nc) {
    /* column blocks of equal width (3072 columns: 1536 + 1536, not 2048 + 1024), so items,
       and the chunks made of them, do equal work */
    int64_t q = (p.N + c.nc - 1) / c.nc;
    nblk = gm_roundup((p.N + q - 1) / q, c.nr);
  }
  int64_t nblk0 = nblk; /* before any split */
  if (want > 1) {
    /* split until there are enough items, halving first the dimension whose split repacks
       the smaller operand (a row split repacks B, a column split repacks A) */
    bool cols_first = p.M * p.K <= p.K * p.N;
    for (int pass = 0; pass < 2; pass++) {
      bool cols = (pass == 0) == cols_first;
      while (nb * ((p.M + mblk - 1) / mblk) * ((p.N + nblk - 1) / nblk) < want) {
        if (cols && nblk >= 4 * c.nr) nblk = gm_roundup((nblk + 1) / 2, c.nr);
        else if (!cols && mblk >= 4 * c.mr) mblk = gm_roundup((mblk + 1) / 2, c.mr);
        else break;
      }
    }
  }
  int64_t nmb = (p.M + mblk - 1) / mblk, nnb = (p.N + nblk - 1) / nblk;
  int64_t items = nb * nmb * nnb;
  /* up to twice as many items as chunks wanted: one chunk per item, rather than chunks of one
     and two items (12 items in 8 chunks leave 2 threads with 7 and 5) */
  int64_t nchunks = items <= 2 * want && !tuned ? items : items < want ? items : want;
  if (want <= 1) nchunks = 1;
  if (nchunks < 1) nchunks = 1;
  /* A dot whose B is read packed (frozen weights, packed at compile time, or weights the
     caller packed ahead, known at run time) repacks nothing when its rows are split: when the
     split above narrowed the column blocks (only the columns split, A packed once ahead), a
     run with B packed splits into as many items of rows of the full-width column blocks
     instead (alt: A packed once ahead for those row blocks), and its serial run makes one
     call per full-width column block with A packed once ahead (for all the rows). The
     packed B is laid out for the full-width blocks: rows are then split without any
     operand packed twice. */
  int64_t nnb0 = (p.N + nblk0 - 1) / nblk0, mblk1 = p.M;
  while (nnb0 * ((p.M + mblk1 - 1) / mblk1) < items && mblk1 >= 4 * c.mr) mblk1 = gm_roundup((mblk1 + 1) / 2, c.mr);
  int64_t nmb1 = (p.M + mblk1 - 1) / mblk1;
  bool alt = !p.conv && nb == 1 && !red && nchunks > 1 && nblk < nblk0 && nmb == 1 && nnb0 * nmb1 == items && p.N > c.nc &&
             (gm_view_const(&p.b) || gm_pack_param(cg, &p) >= 0) && !getenv("HLOC_CPU_GEMM_NO_PREPACK") &&
             !getenv("HLOC_CPU_GEMM_NO_ALT");
  int64_t lnblk = alt ? nblk0 : nblk, lnnb = alt ? nnb0 : nnb; /* the packed B's column blocks */
  /* rows: a chunk's call can span several consecutive row blocks (and the serial run all of
     them), so its A block is sized for the whole M, not for mblk */
  int64_t pack = gm_pack_bytes(&c, p.M, nblk, p.K, p.conv);
  /* private scratch: staged operands, then one packing area per chunk */
  int64_t stage_bytes = 0;
  GmView *ops[2] = {&p.a, &p.b};
  for (int j = 0; j < 2; j++)
    if (ops[j]->staged == -2) {
      int64_t off = stage_bytes;
      stage_bytes += memplan_align((int64_t)hlo_shape_bytes(&ops[j]->base->shape));
      if (!gm_stage(cg, in, ops[j]->base, off, ops[j])) return -1;
    }
  /* a product of a few microseconds' work (at most GM_TINY_MACS multiply-adds) takes the
     blocked GEMM when it is prebuilt: the few-rows and few-columns kernels are made for each
     product, compile time spent for nothing measurable at run time */
  bool tiny = cg->prebuilt && nb * p.M * p.N * p.K <= GM_TINY_MACS;
  if (!tiny && !red && gm_small_m_fits(&c, &p)) return gm_small_m(cg, in, hero, &p, &c, nb, want, stage_bytes);
  if (!tiny && !red && gm_few_n_fits(&c, &p)) return gm_few_n(cg, in, hero, &p, &c, want, stage_bytes);
  if (p.wino) return gm_winograd(cg, in, hero, red, &p, &c, stage_bytes, want);
  /* a dot split over several chunks that would each pack the same operand (B when the rows
     are split, A when only the columns are) packs it once, in a kernel of its own run before
     the GEMM's (chunks over the operand's blocks and K blocks). The serial run (the whole
     work at once) skips it for B, which its calls pack once per block anyway, and uses the
     packed A, which its calls (one per column block) would each pack again. */
  int pre = 0; /* 1: B packed beforehand, 2: A */
  int64_t kstep = gm_kstep(&c, p.K), nkb = p.K < 1 ? 1 : (p.K + kstep - 1) / kstep;
  LLVMValueRef bconst = !p.conv && nb == 1 ? gm_const_packed_b(cg, &c, &p, lnblk, lnnb, kstep) : NULL;
  if (!p.conv && nb == 1 && nchunks > 1 && !getenv("HLOC_CPU_GEMM_NO_PREPACK"))
    pre = !bconst ? (nmb > 1 ? 1 : nnb > 1 ? 2 : 0) : (nmb == 1 && nnb > 1 ? 2 : 0);
  int64_t pre_off = stage_bytes + pack * nchunks, pre_bytes = 0, Kp = p.K < 1 ? 1 : p.K;
  if (pre == 1) pre_bytes = (nnb > 1 ? nnb * nblk : gm_roundup(p.N, c.nr)) * Kp * 4;
  if (pre == 2) pre_bytes = gm_roundup(p.M, c.mr) * Kp * 4;
  int64_t need = pre_off + memplan_align(pre_bytes);
  /* the serial run of a dot split by columns with A packed beforehand makes one call over all
     its columns instead of one per chunk's block (with N within one column block of the GEMM,
     A is then packed once, inside the call, each block used while in cache; the packing
     kernel does nothing in that run), in the chunks' packing areas, which that run does not
     use otherwise, when they hold it (else in an area of its own after the rest). Not with a
     B packed at compile time: its layout is per chunk's column block (its K blocks within
     each), which a call over all the columns would read as one block */
  bool merge = pre == 2 && !red && !bconst && p.N <= c.nc;
  int64_t merge_bytes = merge ? gm_pack_bytes(&c, p.M, p.N, p.K, false) : 0;
  bool merge_apart = merge_bytes > pack * nchunks; /* else at chunk 0's, the serial run's own */
  int64_t merge_off = need;
  if (merge_apart) need += merge_bytes;
  /* reducing: a slice buffer (2 * MC rows of C) and the partial results per chunk */
  bool resident = gm_resident(&c, nblk, p.K);
  int64_t slice_rows = gm_min(2 * c.mc, p.M), slice_off = need, slice_bytes = memplan_align(slice_rows * p.ldc * 4);
  int64_t part_off = slice_off + nchunks * slice_bytes, part_bytes = red ? memplan_align(hlo_shape_elems(&red->shape) * 4) : 0;
  if (red) need = part_off + nchunks * part_bytes;
  if (need > cg->extra_temp) cg->extra_temp = need;
  /* B an entry parameter: the caller may pass it packed ahead of the runs (NAME_pack,
     NAME_run_packed), in the layout of a B packed beforehand for the items' column blocks;
     when it does, nothing packs B (the packing kernel below does nothing). Not where the
     serial run merges the column blocks into one call, which reads B as one block */
  int64_t pk_off = !bconst && !merge && nb == 1 ? gm_pack_job(cg, &p, lnblk, lnnb) : -1;
  if (pre) {
    /* B: chunk (column block of the items, K block); A: (MC row block, K block) */
    int64_t nx = pre == 1 ? nnb : (p.M + c.mc - 1) / c.mc, xb = pre == 1 ? nblk : c.mc;
    int64_t pch = (alt && nmb1 > nx ? nmb1 : nx) * nkb;
    if (pch < 2) pch = 2;
    CpuKern *k = cpu_kern_begin(cg, in);
    LLVMBuilderRef B = k->B;
    LLVMValueRef X = gm_view_ptr(k, pre == 1 ? &p.b : &p.a);
    LLVMValueRef dst = cpu_slot(k, (CpuSlot){CPU_SLOT_TEMP, NULL, NULL, cg->temp_base + pre_off});
    /* a chunk packs its block, [c0, c1); nothing when B comes packed (pre == 1). With alt,
       the serial run (the task's whole call, chunk pch) packs every block, and a parallel
       run with B packed packs A for alt's row blocks (mblk1 rows each, laid out as a call
       starting at the block's first row reads it: MC blocks within) */
    LLVMValueRef v_xb = gi(k, xb), v_nx = gi(k, nx);
    LLVMValueRef c0 = k->chunk, c1 = NULL, skip = NULL;
    LLVMValueRef pks = gm_packed_base(k, pk_off);
    if (pre == 1 && pks) skip = LLVMBuildIsNotNull(B, pks, "");
    LLVMValueRef serial = NULL;
    if (alt) {
      serial = LLVMBuildICmp(B, LLVMIntEQ, k->chunk, gi(k, pch), "");
      LLVMValueRef pkv = gm_b_packed(k, bconst, pks);
      LLVMValueRef rows = LLVMBuildAnd(B, pkv, LLVMBuildNot(B, serial, ""), "");
      v_xb = LLVMBuildSelect(B, rows, gi(k, mblk1), v_xb, "");
      v_nx = LLVMBuildSelect(B, rows, gi(k, nmb1), v_nx, "");
      c0 = LLVMBuildSelect(B, serial, gi(k, 0), c0, "");
    }
    LLVMValueRef nxk = gmul(k, v_nx, gi(k, nkb));
    c1 = gmin(k, gadd(k, k->chunk, gi(k, 1)), nxk);
    if (serial) c1 = LLVMBuildSelect(B, serial, nxk, c1, "");
    if (skip) c1 = LLVMBuildSelect(B, skip, c0, c1, "");
    CpuLoop lcc;
    LLVMValueRef cc = gloop(k, &lcc, c0, c1, 1);
    LLVMValueRef xi = LLVMBuildSDiv(B, cc, gi(k, nkb), ""), kb = LLVMBuildSRem(B, cc, gi(k, nkb), "");
    int64_t ext = pre == 1 ? p.N : p.M;
    LLVMValueRef x0 = gmul(k, xi, v_xb), x1 = gmin(k, gadd(k, x0, v_xb), gi(k, ext));
    LLVMValueRef a[GB_COUNT];
    a[GB_X] = gfp(k, X, gmul(k, x0, gi(k, pre == 1 ? p.bcs : p.ars)));
    a[GB_RS] = gi(k, pre == 1 ? p.brs : p.ars);
    a[GB_CS] = gi(k, pre == 1 ? p.bcs : p.acs);
    a[GB_N] = gsub(k, x1, x0);
    a[GB_K] = gi(k, p.K);
    a[GB_DST] = gfp(k, dst, gmul(k, x0, gi(k, p.K)));
    a[GB_KB0] = kb;
    a[GB_KB1] = gadd(k, kb, gi(k, 1));
    LLVMValueRef pf = gm_packx_function(cg, pre == 1);
    LLVMBuildCall2(B, LLVMGlobalGetValueType(pf), pf, a, GB_COUNT, "");
    gm_close(k, &lcc);
    if (!cpu_kern_end(k, pch)) return -1;
    /* the serial run: nothing to do for B (unless reducing: its chunks run one by one and
       read the packed B); A is used by every column block, once packed */
    cg->tasks[cg->ntasks - 1].whole = (pre == 1 && !red) || merge || alt;
    cg->tasks[cg->ntasks - 1].note = pre == 1 ? "B packed" : "A packed";
  }

  CpuKern *k = cpu_kern_begin(cg, in);
  LLVMBuilderRef B = k->B;
  if (fusion) k->bind[k->nbind++] = (CpuBind){in->calls[0], in, NULL, 0, 0};
  /* a B packed at compile time is all the calls read: the constant itself is not referenced
     (and leaves the object when nothing else reads it) */
  LLVMValueRef A = gm_view_ptr(k, &p.a), Bm = bconst ? LLVMConstNull(cg->ptr) : gm_view_ptr(k, &p.b);
  LLVMValueRef C = red ? NULL : cpu_buffer(k, in);
  LLVMValueRef scratch = cpu_slot(k, (CpuSlot){CPU_SLOT_TEMP, NULL, NULL, cg->temp_base + stage_bytes});
  LLVMValueRef geo = NULL;
  if (p.conv) {
    geo = cpu_alloca(k, LLVMArrayType2(cg->i64, GC_COUNT));
    for (int j = 0; j < GC_M0; j++) {
      LLVMValueRef ix = gi(k, j);
      LLVMBuildStore(B, gi(k, p.geo[j]), LLVMBuildInBoundsGEP2(B, cg->i64, geo, &ix, 1, ""));
    }
  }
  /* items of this chunk: [chunk * items / nchunks, (chunk + 1) * items / nchunks), ordered
     (loop index, column block, row block); consecutive row blocks of one column block are
     done by one GEMM call (B packed once); chunk nchunks (the serial run) does every item
     with the packing area of chunk 0 */
  LLVMValueRef chunk, lo, hi;
  LLVMValueRef pkd = gm_packed_base(k, pk_off);
  /* the items' blocks: mblk x nblk, nmb x nnb of them; with alt and B packed, rows of
     full-width column blocks (chunks) or the full-width blocks (the serial run) */
  LLVMValueRef v_mblk = gi(k, mblk), v_nblk = gi(k, nblk), v_nmb = gi(k, nmb), v_nnb = gi(k, nnb), v_items = gi(k, items);
  LLVMValueRef use1 = NULL; /* alt's chunks (rows of full-width blocks) */
  if (alt) {
    LLVMValueRef pkv = gm_b_packed(k, bconst, pkd);
    LLVMValueRef ser = LLVMBuildICmp(B, LLVMIntSGE, k->chunk, gi(k, nchunks), "");
    use1 = LLVMBuildAnd(B, pkv, LLVMBuildNot(B, ser, ""), "");
    v_mblk = LLVMBuildSelect(B, use1, gi(k, mblk1), v_mblk, "");
    v_nmb = LLVMBuildSelect(B, use1, gi(k, nmb1), v_nmb, "");
    v_nblk = LLVMBuildSelect(B, pkv, gi(k, nblk0), v_nblk, "");
    v_nnb = LLVMBuildSelect(B, pkv, gi(k, nnb0), v_nnb, "");
    v_items = LLVMBuildSelect(B, LLVMBuildAnd(B, pkv, ser, ""), gi(k, nnb0), v_items, "");
  }
  LLVMValueRef whole = gm_chunk_items_v(k, v_items, nchunks, &chunk, &lo, &hi);
  LLVMValueRef packp = LLVMBuildInBoundsGEP2(B, cg->i8, scratch, (LLVMValueRef[]){gmul(k, chunk, gi(k, pack))}, 1, "");
  /* reducing: the chunk's slice buffer and its partial results, which start from the
     reducer's identity (offsets in the private scratch, as scratch's own) */
  LLVMValueRef Cs = NULL, P = NULL;
  if (red) {
    Cs = LLVMBuildInBoundsGEP2(B, cg->i8, scratch, (LLVMValueRef[]){gadd(k, gi(k, slice_off - stage_bytes), gmul(k, chunk, gi(k, slice_bytes)))}, 1, "");
    P = LLVMBuildInBoundsGEP2(B, cg->i8, scratch, (LLVMValueRef[]){gadd(k, gi(k, part_off - stage_bytes), gmul(k, chunk, gi(k, part_bytes)))}, 1, "");
    gm_reduce_init(k, red, P, part_bytes);
  }
  LLVMValueRef itv = gvar(k, lo);
  GWhile items_loop;
  LLVMValueRef it = gwhile_open(k, &items_loop, itv, hi, "item", "itemb", "iteme");
  int cache_mark = k->ncache;
  LLVMValueRef mi = LLVMBuildSRem(B, it, v_nmb, "");
  LLVMValueRef rest = LLVMBuildSDiv(B, it, v_nmb, "");
  LLVMValueRef ni = LLVMBuildSRem(B, rest, v_nnb, "");
  LLVMValueRef bi = LLVMBuildSDiv(B, rest, v_nnb, "");
  LLVMValueRef gend = gmin(k, hi, gmul(k, gadd(k, rest, gi(k, 1)), v_nmb));
  LLVMValueRef mlast = LLVMBuildSRem(B, gsub(k, gend, gi(k, 1)), v_nmb, "");
  LLVMBuildStore(B, merge ? LLVMBuildSelect(B, whole, hi, gend, "") : gend, itv);
  LLVMValueRef lidx[HLO_MAX_RANK], offa, offb, offc;
  gm_loop_offsets(k, &p, bi, lidx, &offa, &offb, &offc);
  LLVMValueRef m0 = gmul(k, mi, v_mblk), n0 = gmul(k, ni, v_nblk);
  LLVMValueRef m1 = gmin(k, gmul(k, gadd(k, mlast, gi(k, 1)), v_mblk), gi(k, p.M)), n1 = gmin(k, gadd(k, n0, v_nblk), gi(k, p.N));
  if (merge) {
    n0 = LLVMBuildSelect(B, whole, gi(k, 0), n0, "");
    n1 = LLVMBuildSelect(B, whole, gi(k, p.N), n1, "");
    if (merge_apart)
      packp = LLVMBuildSelect(B, whole, cpu_slot(k, (CpuSlot){CPU_SLOT_TEMP, NULL, NULL, cg->temp_base + merge_off}), packp, "");
  }
  /* an output fusion with B resident: the rows in slices of 2 * MC, each finished (GEMM, then
     the epilogue) while its C block is in cache, B packed by the first slice only */
  bool slices = fusion && ((p.conv && resident) || red);
  CpuLoop lsl;
  LLVMValueRef s0 = m0, s1 = m1;
  if (slices) {
    s0 = gloop(k, &lsl, m0, m1, 2 * c.mc);
    s1 = gmin(k, gadd(k, s0, gi(k, 2 * c.mc)), m1);
  }
  LLVMValueRef args[GP_COUNT];
  args[GP_M] = gsub(k, s1, s0);
  args[GP_N] = gsub(k, n1, n0);
  args[GP_K] = gi(k, p.K);
  if (p.conv) {
    /* the packer decodes output pixels from s0 + row; the image is passed whole */
    args[GP_A] = gfp(k, A, offa);
    LLVMValueRef ix = gi(k, GC_M0);
    LLVMBuildStore(B, s0, LLVMBuildInBoundsGEP2(B, cg->i64, geo, &ix, 1, ""));
  } else {
    args[GP_A] = gfp(k, A, gadd(k, offa, gmul(k, s0, gi(k, p.ars))));
  }
  args[GP_ARS] = gi(k, p.ars);
  args[GP_ACS] = gi(k, p.acs);
  args[GP_B] = bconst ? Bm : gfp(k, Bm, gadd(k, offb, gmul(k, n0, gi(k, p.bcs))));
  args[GP_BRS] = gi(k, p.brs);
  args[GP_BCS] = gi(k, p.bcs);
  args[GP_C] = red ? gfp(k, Cs, n0) : gfp(k, C, gadd(k, offc, gadd(k, gmul(k, s0, gi(k, p.ldc)), n0)));
  args[GP_LDC] = gi(k, p.ldc);
  args[GP_PACK] = packp;
  args[GP_CONV] = p.conv ? geo : LLVMConstNull(cg->ptr);
  args[GP_BKEEP] = slices && p.conv && resident ? LLVMBuildZExt(B, LLVMBuildICmp(B, LLVMIntSGT, s0, m0, ""), cg->i64, "") : gi(k, 0);
  args[GP_BPRE] = args[GP_APRE] = LLVMConstNull(cg->ptr);
  if (bconst) args[GP_BPRE] = gfp(k, cpu_slot(k, (CpuSlot){CPU_SLOT_GLOBAL, NULL, bconst, 0}), gmul(k, n0, gi(k, p.K)));
  if (pre) {
    /* the call's block of the packed operand (A: all rows, pre == 2 means nmb == 1) */
    LLVMValueRef prep = cpu_slot(k, (CpuSlot){CPU_SLOT_TEMP, NULL, NULL, cg->temp_base + pre_off});
    if (pre == 1) prep = LLVMBuildSelect(B, whole, LLVMConstNull(cg->ptr), gfp(k, prep, gmul(k, n0, gi(k, p.K))), "");
    args[pre == 1 ? GP_BPRE : GP_APRE] = merge ? LLVMBuildSelect(B, whole, LLVMConstNull(cg->ptr), prep, "") : prep;
    /* alt's chunks: their row block's A, packed for a call starting at its first row */
    if (use1) args[GP_APRE] = LLVMBuildSelect(B, use1, gfp(k, prep, gmul(k, m0, gi(k, p.K))), args[GP_APRE], "");
  }
  if (pkd) args[GP_BPRE] = gm_or_packed(k, pkd, pk_off, gmul(k, n0, gi(k, p.K)), args[GP_BPRE]);
  LLVMBuildCall2(B, gm_fn_type(cg), gm_function(cg), args, GP_COUNT, "");
  if (fusion && !k->failed) {
    /* reducing: the slice buffer seen as the whole product (element (s0, 0) of the loop index
       at Cs) */
    LLVMValueRef V = !red ? C : LLVMBuildGEP2(B, cg->f32, Cs, (LLVMValueRef[]){gsub(k, gi(k, 0), gadd(k, offc, gmul(k, s0, gi(k, p.ldc))))}, 1, "");
    gm_epilogue(k, in, hero, red, &p, lidx, s0, s1, n0, n1, V, P);
  }
  if (slices) cpu_loop_close(k, &lsl);
  gwhile_close(k, &items_loop);
  k->ncache = cache_mark;
  if (!cpu_kern_end(k, nchunks)) return -1;
  /* reducing: every chunk runs, the serial run too (each fills its own partial results) */
  cg->tasks[cg->ntasks - 1].whole = nchunks > 1 && !red;
  if (red && !gm_reduce_finish(cg, in, red, part_off, part_bytes, nchunks)) return -1;
  return 1;
}
