/* targets/cpu/gemm/plan.c: the plan of a GEMM kernel, in plain C (no LLVM).
 *
 * Everything cpu_gemm_kernel decides before it emits IR is decided here from the instruction
 * and the configuration, into a GmPlan: the problem (operands as views, or staged), the work
 * items (loop index, row block, column block) and the chunks of the parallel-for made of them,
 * which of the kernels takes the product, and, for the blocked kernels, which operand is
 * packed once for all the chunks and where each part of the kernel-private scratch lies. The
 * items are split until there are enough for the chunks wanted, halving first the dimension
 * whose split repacks the smaller operand, with column blocks of equal width so that the
 * threads get equal work. Keeping the plan apart from the emission lets a test check the
 * decisions without compiling anything. */
#include "gemm_impl.h"

enum { GM_RED_KEEP = 1 << 20 };  /* elements a reduction over a product may keep */
enum { GM_TINY_MACS = 1 << 16 }; /* products below this many multiply-adds: the blocked GEMM */

/* The problem of hero: operands as views where possible, else staged row-major (which makes
 * them mergeable); a convolution Winograd may take is first seen as such (B through any
 * strides), the implicit GEMM's view being the fallback (gm_wino_fits). */
static bool gm_plan_problem(CpuCg *cg, const HInstr *hero, GmPlan *pl) {
  GmProb *p = &pl->p;
  bool ok = false;
  memset(p, 0, sizeof *p);
  for (int wino = hero->op == OP_CONVOLUTION && gm_wino_conv(cg, hero); wino >= 0 && !ok; wino--)
    for (int stage = 0; stage < 4 && !ok; stage++) {
      memset(p, 0, sizeof *p);
      ok = hero->op == OP_DOT ? gm_dot_prob(cg, pl->fusion, hero, stage, p)
                              : gm_conv_prob(cg, pl->fusion, hero, stage, wino, p);
      if (ok && wino && !gm_wino_fits(p)) ok = false;
    }
  return ok && p->M >= 1 && p->N >= 1;
}

/* The chunks wanted for the product's work, its row and column blocks and the chunks made of
 * the items. */
static void gm_plan_chunks(CpuCg *cg, GmPlan *pl) {
  const GmProb *p = &pl->p;
  const GmCfg *c = &pl->c;
  pl->nb = 1;
  for (int j = 0; j < p->nloop; j++)
    pl->nb *= p->lext[j];
  int64_t nb = pl->nb;
  double flops = 2.0 * (double)nb * (double)p->M * (double)p->N * (double)p->K;
  int64_t min = cg->o->par_min_elems > 0 ? cg->o->par_min_elems : 32768;
  int64_t want = flops / 64.0 < (double)min ? 1 : flops < 2.5e8 ? 4 : 8;
  bool tuned = want > 1 && c->chunks > 0;
  if (tuned) want = c->chunks;
  int64_t mblk = p->M, nblk = p->N;
  if (nblk > c->nc) nblk = c->nc;
  if (!p->conv && p->N > c->nc) {
    /* column blocks of equal width (3072 columns: 1536 + 1536, not 2048 + 1024), so items,
       and the chunks made of them, do equal work */
    int64_t q = (p->N + c->nc - 1) / c->nc;
    nblk = gm_roundup((p->N + q - 1) / q, c->nr);
  }
  pl->nblk0 = nblk;
  if (want > 1) {
    /* split until there are enough items, halving first the dimension whose split repacks
       the smaller operand (a row split repacks B, a column split repacks A) */
    bool cols_first = p->M * p->K <= p->K * p->N;
    for (int pass = 0; pass < 2; pass++) {
      bool cols = (pass == 0) == cols_first;
      while (nb * ((p->M + mblk - 1) / mblk) * ((p->N + nblk - 1) / nblk) < want) {
        if (cols && nblk >= 4 * c->nr)
          nblk = gm_roundup((nblk + 1) / 2, c->nr);
        else if (!cols && mblk >= 4 * c->mr)
          mblk = gm_roundup((mblk + 1) / 2, c->mr);
        else
          break;
      }
    }
  }
  pl->want = want;
  pl->mblk = mblk;
  pl->nblk = nblk;
  pl->nmb = (p->M + mblk - 1) / mblk;
  pl->nnb = (p->N + nblk - 1) / nblk;
  pl->items = nb * pl->nmb * pl->nnb;
  /* up to twice as many items as chunks wanted: one chunk per item, rather than chunks of one
     and two items (12 items in 8 chunks leave 2 threads with 7 and 5) */
  int64_t items = pl->items;
  pl->nchunks = items <= 2 * want && !tuned ? items : items < want ? items : want;
  if (want <= 1) pl->nchunks = 1;
  if (pl->nchunks < 1) pl->nchunks = 1;
}

/* A dot whose B is read packed (frozen weights, packed at compile time, or weights the caller
 * packed ahead, known at run time) repacks nothing when its rows are split: when the split
 * narrowed the column blocks (only the columns split, A packed once ahead), a run with B
 * packed splits into as many items of rows of the full-width column blocks instead (alt: A
 * packed once ahead for those row blocks), and its serial run makes one call per full-width
 * column block with A packed once ahead (for all the rows). The packed B is laid out for the
 * full-width blocks. */
static void gm_plan_alt(CpuCg *cg, GmPlan *pl) {
  const GmProb *p = &pl->p;
  const GmCfg *c = &pl->c;
  pl->nnb0 = (p->N + pl->nblk0 - 1) / pl->nblk0;
  pl->mblk1 = p->M;
  while (pl->nnb0 * ((p->M + pl->mblk1 - 1) / pl->mblk1) < pl->items && pl->mblk1 >= 4 * c->mr)
    pl->mblk1 = gm_roundup((pl->mblk1 + 1) / 2, c->mr);
  pl->nmb1 = (p->M + pl->mblk1 - 1) / pl->mblk1;
  pl->alt = !p->conv && pl->nb == 1 && !pl->red && !gm_cbuf(p) && pl->nchunks > 1 &&
            pl->nblk < pl->nblk0 && pl->nmb == 1 && pl->nnb0 * pl->nmb1 == pl->items &&
            p->N > c->nc && (gm_view_const(c, &p->b) || gm_pack_param(cg, p) >= 0);
  pl->alt = pl->alt && !pl->pairs;
  pl->lnblk = pl->alt ? pl->nblk0 : pl->nblk;
  pl->lnnb = pl->alt ? pl->nnb0 : pl->nnb;
}

/* The kernel that takes the product, after the staged operands' scratch. A product of a few
 * microseconds' work (at most GM_TINY_MACS multiply-adds) takes the blocked GEMM when it is
 * prebuilt: the few-rows and few-columns kernels are made for each product, compile time spent
 * for nothing measurable at run time. */
static void gm_plan_path(CpuCg *cg, GmPlan *pl) {
  const GmProb *p = &pl->p;
  /* rows: a chunk's call can span several consecutive row blocks (and the serial run all of
     them), so its A block is sized for the whole M, not for mblk */
  pl->pack = pl->pairs ? gm_pairs_pack_bytes(&pl->c, p->et, p->M, pl->nblk, p->K)
                       : gm_pack_bytes(&pl->c, p->M, pl->nblk, p->K, p->conv);
  /* private scratch: staged operands, then one packing area per chunk */
  pl->stage_bytes = 0;
  const GmView *ops[2] = {&p->a, &p->b};
  for (int j = 0; j < 2; j++)
    if (ops[j]->staged == -2)
      pl->stage_bytes += memplan_align((int64_t)hlo_shape_bytes(&ops[j]->base->shape));
  bool tiny = cg->prebuilt && pl->nb * p->M * p->N * p->K <= GM_TINY_MACS;
  pl->path = GM_PATH_BLOCKED;
  /* (s8: the few kernels sum all of K in f32, exact only up to GM_S8_KC; the few-rows kernel
     on VPDPBUSD sums in s32) */
  bool few = !tiny && !pl->red;
  if (few && (p->et != GE_S8 || gm_few_dp(&pl->c, p)) && gm_small_m_fits(&pl->c, p))
    pl->path = GM_PATH_FEW_ROWS;
  else if (few && p->et != GE_S8 && gm_few_n_fits(&pl->c, p))
    pl->path = GM_PATH_FEW_COLS;
  else if (p->wino)
    pl->path = GM_PATH_WINOGRAD;
}

/* The blocked kernels' operand packed once and the private scratch after the packing areas. A
 * dot split over several chunks that would each pack the same operand (B when the rows are
 * split, A when only the columns are) packs it once, in a kernel of its own run before the
 * GEMM's (chunks over the operand's blocks and K blocks). The serial run (the whole work at
 * once) skips it for B, which its calls pack once per block anyway, and uses the packed A,
 * which its calls (one per column block) would each pack again. */
static void gm_plan_blocked(GmPlan *pl) {
  const GmProb *p = &pl->p;
  const GmCfg *c = &pl->c;
  pl->kstep = gm_kstep(c, p->K);
  pl->nkb = p->K < 1 ? 1 : (p->K + pl->kstep - 1) / pl->kstep;
  /* (gm_const_packed_b packs exactly such a B: f32, or bf16 for the depth-group function) */
  pl->bconst = !p->conv && pl->nb == 1 && p->K >= 1 && p->N >= 1 &&
               (pl->pairs ? p->et == GE_BF16 && gm_view_const_bf16(c, &p->b)
                          : gm_view_const(c, &p->b) != NULL);
  pl->pre = 0;
  if (!p->conv && pl->nb == 1 && pl->nchunks > 1 && !pl->pairs)
    pl->pre = !pl->bconst ? (pl->nmb > 1   ? 1
                             : pl->nnb > 1 ? 2
                                           : 0)
                          : (pl->nmb == 1 && pl->nnb > 1 ? 2 : 0);
  pl->pre_off = pl->stage_bytes + pl->pack * pl->nchunks;
  int64_t pre_bytes = 0, Kp = p->K < 1 ? 1 : p->K;
  if (pl->pre == 1)
    pre_bytes = (pl->nnb > 1 ? pl->nnb * pl->nblk : gm_roundup(p->N, c->nr)) * Kp * 4;
  if (pl->pre == 2) pre_bytes = gm_roundup(p->M, c->mr) * Kp * 4;
  int64_t need = pl->pre_off + memplan_align(pre_bytes);
  /* the serial run of a dot split by columns with A packed beforehand makes one call over all
     its columns instead of one per chunk's block (with N within one column block of the GEMM,
     A is then packed once, inside the call, each block used while in cache; the packing
     kernel does nothing in that run), in the chunks' packing areas, which that run does not
     use otherwise, when they hold it (else in an area of its own after the rest). Not with a
     B packed at compile time: its layout is per chunk's column block (its K blocks within
     each), which a call over all the columns would read as one block */
  pl->merge = pl->pre == 2 && !pl->red && !gm_cbuf(p) && !pl->bconst && p->N <= c->nc;
  int64_t merge_bytes = pl->merge ? gm_pack_bytes(c, p->M, p->N, p->K, false) : 0;
  pl->merge_apart =
      merge_bytes > pl->pack * pl->nchunks; /* else at chunk 0's, the serial run's own */
  pl->merge_off = need;
  if (pl->merge_apart) need += merge_bytes;
  /* reducing: a slice buffer (2 * MC rows of C) and the partial results per chunk; a 16-bit
     result: the slice buffer (f32 sums, rounded by the epilogue) */
  pl->cbuf = pl->red || gm_cbuf(p);
  pl->resident = gm_resident(c, pl->nblk, p->K);
  int64_t slice_rows = gm_min(2 * c->mc, p->M);
  pl->slice_off = need;
  pl->slice_bytes = memplan_align(slice_rows * p->ldc * 4);
  pl->part_off = pl->slice_off + pl->nchunks * pl->slice_bytes;
  pl->part_bytes = pl->red ? memplan_align(hlo_shape_elems(&pl->red->shape) * 4) : 0;
  if (pl->cbuf) need = pl->part_off + pl->nchunks * pl->part_bytes;
  pl->need = need;
  /* B an entry parameter: the caller may pass it packed ahead of the runs, in the layout of a
     B packed beforehand for the items' column blocks; not where the serial run merges the
     column blocks into one call, which reads B as one block */
  pl->pack_ahead = !pl->bconst && !pl->merge && pl->nb == 1;
  /* an output fusion with B resident: the rows in slices of 2 * MC, each finished (GEMM, then
     the epilogue) while its C block is in cache, B packed by the first slice only */
  pl->slices = (pl->fusion && ((p->conv && pl->resident) || pl->red)) || gm_cbuf(p);
}

bool gm_plan(CpuCg *cg, const HInstr *in, const HInstr *hero, GmPlan *pl) {
  memset(pl, 0, sizeof *pl);
  pl->fusion = hero == in ? NULL : in;
  /* a fusion reducing the epilogue: the product is computed in slices into private scratch,
     each slice reduced into its chunk's partial results, which a last kernel combines */
  pl->red = pl->fusion ? gm_reduce_root(in, hero) : NULL;
  /* (partial results per chunk: a reduction keeping many elements goes to the generic kernels) */
  if (pl->red && hlo_shape_elems(&pl->red->shape) > GM_RED_KEEP) return false;
  if (!gm_plan_problem(cg, hero, pl)) return false;
  pl->c = gm_cfg(cg);
  /* s8: K blocks within GM_S8_KC (exact f32 sums), no reducing epilogue (its f32 partials) */
  if (pl->p.et == GE_S8 && (pl->red || pl->c.kc > GM_S8_KC)) return false;
  /* bf16 (or s8) on AMX tiles or AVX512-BF16: the function packs its own operands (B may be
     packed ahead, in its layout; nothing is packed once for the chunks), fast for A's rows
     read along their depth and for B's read along either dimension; a few rows would leave
     the tiles mostly padding; column blocks of whole tiles (NR 32: a B packed ahead has its
     blocks there) */
  GmElt et = pl->p.et;
  pl->pairs = ((et == GE_BF16 && (pl->c.amx || pl->c.dpbf16)) ||
               (et == GE_S8 && (pl->c.amx_int8 || pl->c.dpbusd))) &&
              !pl->p.conv && pl->p.acs == 1 && (pl->p.bcs == 1 || pl->p.brs == 1) &&
              pl->p.M >= 16 && pl->c.nr % 32 == 0;
  if (pl->pairs) {
    /* items of up to 1024 columns (the f32 blocks' 256 would have each call read A again for
       a quarter of the work) and slices of 256 rows (2 * MC), so a 256-token prefill packs B
       once */
    pl->c.mc = 128;
    pl->c.nc = 1024;
  }
  gm_plan_chunks(cg, pl);
  gm_plan_alt(cg, pl);
  gm_plan_path(cg, pl);
  gm_plan_blocked(pl);
  return true;
}
