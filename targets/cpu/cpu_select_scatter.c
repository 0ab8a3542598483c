/* targets/cpu/cpu_select_scatter.c: the kernel of a select-and-scatter instruction.
 *
 * XLA's select-and-scatter (the gradient of max/min pooling) takes an operand, a source of
 * the windowed operand's shape, a scalar init value and two computations: select(a, b) ->
 * pred, "a is selected over b", and scatter, a reducer. The result has the operand's shape;
 * every element starts at init, then for each source element, in row-major order, the
 * operand's window of that source position is scanned in row-major window order, keeping
 * the current candidate while select(candidate, tap) holds (the first tap is the first
 * candidate; padding taps and taps between base-dilated elements are never selected), and
 * the selected element becomes out[sel] = scatter(out[sel], source); a window with no real
 * tap scatters nothing. A lone select-and-scatter of the entry computation becomes one
 * kernel (the fusion pass does not fuse it, and one reached inside a fusion stays a located
 * error of the elemental generator): an init loop over the output (one flat loop where the
 * chunk's slice is contiguous), then a loop nest over the source with the window nest
 * inside it. The candidate (whether there is one, its operand index and value) lives in
 * allocas that LLVM promotes to registers; select and scatter are generated inline through
 * cpu_gen_scalar_comp, the operand and the source through cpu_gen, and the output element
 * is loaded and stored directly (never through the elemental cache: the kernel rewrites
 * it). Bounds checks are emitted only for window dimensions that can leave the operand.
 * Updates of one element must happen in XLA's order, so the kernel is serial, except along
 * a dimension whose window is the identity (size 1, stride 1, no padding, no base dilation:
 * batch or channels): a source element there scatters only into the output slice of its
 * own index, so with enough work (par_min_elems, as the other kernels) the first such
 * dimension of extent > 1 is split into up to 64 parallel-for chunks, each initializing and
 * updating its own slice in source row-major order. The result never shares a buffer with
 * what the kernel reads (the memory plan computes in place only for elementwise readers);
 * the kernel checks the plan anyway. Any element type the elemental generator handles. */
#include "cpu_impl.h"

bool cpu_sas_check(CpuCg *cg, const HInstr *in, const char *target) {
  if (in->nops != 3 || in->ncalls != 2 || !in->calls[0] || !in->calls[1] ||
      (!in->window && in->ops[0]->shape.rank != 0)) {
    hlo_err_at(cg->err, in,
               "%s target: select-and-scatter needs 3 operands, a window, select and scatter",
               target);
    return false;
  }
  const Shape *xs = &in->ops[0]->shape, *ss = &in->ops[1]->shape, *is = &in->ops[2]->shape;
  if (!hlo_shape_is_array(&in->shape) || !hlo_shape_is_array(xs) || !hlo_shape_is_array(ss) ||
      !hlo_shape_is_array(is) || is->rank != 0 || !hlo_shape_same_dims(&in->shape, xs) ||
      ss->rank != xs->rank || (in->window && in->window->n != xs->rank) || xs->dt != in->shape.dt ||
      ss->dt != in->shape.dt || is->dt != in->shape.dt) {
    hlo_err_at(cg->err, in,
               "%s target: select-and-scatter operand, source, init and result do not match",
               target);
    return false;
  }
  for (int d = 0; d < xs->rank; d++) {
    const WinDim *w = &in->window->d[d];
    if (w->size < 0 || w->stride < 1 || w->win_dil < 1 || w->base_dil < 1) {
      hlo_err_at(cg->err, in, "%s target: select-and-scatter window dimension %d is invalid",
                 target, d);
      return false;
    }
  }
  const MemPlan *p = &cg->plan;
  int self = memplan_base(p, in->idx, NULL);
  for (int o = 0; o < 3; o++)
    if (memplan_base(p, in->ops[o]->idx, NULL) == self) {
      hlo_err_at(cg->err, in,
                 "%s target: select-and-scatter result planned in the buffer of operand %d", target,
                 o);
      return false;
    }
  return true;
}

static LLVMValueRef cpu_sas_and(CpuKern *k, LLVMValueRef a, LLVMValueRef b) {
  return a ? LLVMBuildAnd(k->B, a, b, "") : b;
}

/* Open loops over dims of extent > 1 of dims[0..rank) (index 0 for the others); dimension
 * split (if >= 0) covers the chunk's range [chunk * csize, min(+csize, extent)). */
static int cpu_sas_open(CpuKern *k, const int64_t *dims, int rank, int split, int64_t csize,
                        CpuLoop *loops, LLVMValueRef *idx) {
  LLVMBuilderRef B = k->B;
  int nl = 0;
  for (int d = 0; d < rank; d++) {
    if (d == split) {
      LLVMValueRef lo = LLVMBuildNSWMul(B, k->chunk, cpu_i64(k, csize), "");
      LLVMValueRef hi = LLVMBuildNSWAdd(B, lo, cpu_i64(k, csize), "");
      LLVMValueRef D = cpu_i64(k, dims[d]);
      hi = cpu_smin(k, hi, D);
      idx[d] = cpu_loop_open(k, &loops[nl++], lo, hi);
    } else if (dims[d] == 1) {
      idx[d] = cpu_i64(k, 0);
    } else {
      idx[d] = cpu_loop_open(k, &loops[nl++], cpu_i64(k, 0), cpu_i64(k, dims[d]));
    }
  }
  return nl;
}

static void cpu_sas_close(CpuKern *k, CpuLoop *loops, int nl) {
  for (int j = nl - 1; j >= 0; j--)
    cpu_loop_close(k, &loops[j]);
}

bool cpu_sas_select(CpuKern *k, const HInstr *in, const LLVMValueRef *sidx, LLVMValueRef have_a,
                    LLVMValueRef val_a, const LLVMValueRef *sel_a, const char *target) {
  CpuCg *cg = k->cg;
  LLVMBuilderRef B = k->B;
  const HInstr *x = in->ops[0];
  const Shape *xs = &x->shape, *ss = &in->ops[1]->shape;
  const Window *win = in->window;
  int rank = xs->rank;
  LLVMTypeRef vt = cpu_reg_type(cg, xs->dt);
  CpuLoop wloops[HLO_MAX_RANK];
  LLVMValueRef widx[HLO_MAX_RANK], pidx[HLO_MAX_RANK];
  LLVMBuildStore(B, LLVMConstInt(cg->i1, 0, 0), have_a);
  int64_t wdims[HLO_MAX_RANK] = {0};
  for (int d = 0; d < rank; d++)
    wdims[d] = win->d[d].size;
  int nw = cpu_sas_open(k, wdims, rank, -1, 0, wloops, widx);

  /* operand position of the tap, and whether it is a real element */
  LLVMValueRef ok = NULL;
  for (int d = 0; d < rank; d++) {
    const WinDim *w = &win->d[d];
    int64_t D = xs->dims[d];
    LLVMValueRef p = LLVMBuildNSWMul(B, sidx[d], cpu_i64(k, w->stride), "");
    if (w->size > 1)
      p = LLVMBuildNSWAdd(B, p, LLVMBuildNSWMul(B, widx[d], cpu_i64(k, w->win_dil), ""), "");
    if (w->pad_lo) p = LLVMBuildNSWSub(B, p, cpu_i64(k, w->pad_lo), "");
    if (w->base_dil > 1) {
      LLVMValueRef nonneg = LLVMBuildICmp(B, LLVMIntSGE, p, cpu_i64(k, 0), "");
      LLVMValueRef pc = LLVMBuildSelect(B, nonneg, p, cpu_i64(k, 0), "");
      LLVMValueRef bd = cpu_i64(k, w->base_dil);
      ok = cpu_sas_and(k, ok, nonneg);
      LLVMValueRef rem = LLVMBuildURem(B, pc, bd, "");
      ok = cpu_sas_and(k, ok, LLVMBuildICmp(B, LLVMIntEQ, rem, cpu_i64(k, 0), ""));
      p = LLVMBuildUDiv(B, pc, bd, "");
      ok = cpu_sas_and(k, ok, LLVMBuildICmp(B, LLVMIntSLT, p, cpu_i64(k, D), ""));
    } else {
      int64_t pmin = -w->pad_lo;
      int64_t pmax = (ss->dims[d] - 1) * w->stride - w->pad_lo + (w->size - 1) * w->win_dil;
      if (pmin < 0 || pmax >= D) /* unsigned: also rejects negative positions */
        ok = cpu_sas_and(k, ok, LLVMBuildICmp(B, LLVMIntULT, p, cpu_i64(k, D), ""));
    }
    pidx[d] = p;
  }
  LLVMBasicBlockRef tapb = LLVMAppendBasicBlockInContext(cg->C, k->fn, "sas_tap");
  LLVMBasicBlockRef cmpb = LLVMAppendBasicBlockInContext(cg->C, k->fn, "sas_select");
  LLVMBasicBlockRef takeb = LLVMAppendBasicBlockInContext(cg->C, k->fn, "sas_take");
  LLVMBasicBlockRef nextb = LLVMAppendBasicBlockInContext(cg->C, k->fn, "sas_next");
  LLVMBuildCondBr(B, ok ? ok : LLVMConstInt(cg->i1, 1, 0), tapb, nextb);

  /* a real tap: taken when there is no candidate yet or select(candidate, tap) is false */
  LLVMPositionBuilderAtEnd(B, tapb);
  int mark = k->ncache;
  LLVMValueRef v = cpu_gen(k, x, pidx);
  LLVMValueRef have = LLVMBuildLoad2(B, cg->i1, have_a, "");
  LLVMBuildCondBr(B, have, cmpb, takeb);
  LLVMPositionBuilderAtEnd(B, cmpb);
  LLVMValueRef args[2] = {LLVMBuildLoad2(B, vt, val_a, ""), v}, res[1] = {NULL};
  if (v && cpu_gen_scalar_comp(k, in->calls[0], args, 2, res) && LLVMTypeOf(res[0]) != cg->i1) {
    hlo_err_at(cg->err, in, "%s target: select-and-scatter select computation does not return pred",
               target);
    k->failed = true;
  }
  LLVMBuildCondBr(B, res[0] && !k->failed ? res[0] : LLVMConstInt(cg->i1, 1, 0), nextb, takeb);
  LLVMPositionBuilderAtEnd(B, takeb);
  LLVMBuildStore(B, LLVMConstInt(cg->i1, 1, 0), have_a);
  if (v) LLVMBuildStore(B, v, val_a);
  for (int d = 0; d < rank; d++)
    LLVMBuildStore(B, pidx[d], sel_a[d]);
  LLVMBuildBr(B, nextb);
  LLVMPositionBuilderAtEnd(B, nextb);
  k->ncache = mark; /* values of the tap block do not dominate the rest */
  cpu_sas_close(k, wloops, nw);

  return !k->failed;
}

bool cpu_select_scatter_kernel(CpuCg *cg, HInstr *in) {
  if (!cpu_sas_check(cg, in, "CPU")) return false;
  const HInstr *x = in->ops[0], *src = in->ops[1], *init = in->ops[2];
  const Shape *xs = &x->shape, *ss = &src->shape, *os = &in->shape;
  const Window *win = in->window;
  int rank = xs->rank;
  int64_t total = hlo_shape_elems(os), nsrc = hlo_shape_elems(ss), wel = 1;
  for (int d = 0; d < rank; d++)
    wel *= win->d[d].size;
  bool scan = nsrc > 0 && wel > 0;

  /* the split: the first identity-window dimension of extent > 1, when the work is large */
  int split = -1;
  int64_t csize = 0, P = 1;
  int64_t min = cg->o->par_min_elems > 0 ? cg->o->par_min_elems : 32768;
  int64_t work = total + (scan ? nsrc * wel : 0);
  for (int d = 0; d < rank && work >= min; d++) {
    const WinDim *w = &win->d[d];
    if (xs->dims[d] <= 1 || w->size != 1 || w->stride != 1 || w->pad_lo != 0 || w->pad_hi != 0 ||
        w->base_dil != 1 || ss->dims[d] != xs->dims[d])
      continue;
    int64_t D = xs->dims[d], want = D < 64 ? D : 64;
    csize = (D + want - 1) / want;
    P = (D + csize - 1) / csize;
    if (P > 1)
      split = d;
    else
      P = 1;
    break;
  }

  CpuKern *k = cpu_kern_begin(cg, in);
  LLVMBuilderRef B = k->B;
  LLVMValueRef out = cpu_buffer(k, in);
  CpuLoop loops[HLO_MAX_RANK];
  LLVMValueRef idx[HLO_MAX_RANK], sidx[HLO_MAX_RANK];

  /* every output element of this chunk = init */
  LLVMValueRef zero[1] = {cpu_i64(k, 0)};
  LLVMValueRef iv = cpu_gen(k, init, zero);
  if (!iv) return cpu_kern_end(k, P);
  bool flat = true; /* this chunk's output slice is contiguous: one loop (a memset) */
  for (int d = 0; d < split; d++)
    flat = flat && os->dims[d] == 1;
  int nl;
  if (flat) {
    Shape fs = hlo_shape_array(os->dt, 1, &total);
    int64_t row = split >= 0 ? total / os->dims[split] : total;
    LLVMValueRef lo = LLVMBuildNSWMul(B, k->chunk, cpu_i64(k, split >= 0 ? csize * row : 0), "");
    LLVMValueRef hi = LLVMBuildNSWAdd(B, lo, cpu_i64(k, split >= 0 ? csize * row : total), "");
    LLVMValueRef T = cpu_i64(k, total);
    hi = cpu_smin(k, hi, T);
    CpuLoop fl;
    idx[0] = cpu_loop_open(k, &fl, lo, hi);
    cpu_store_elem(k, out, &fs, idx, iv);
    cpu_loop_close(k, &fl);
  } else {
    nl = cpu_sas_open(k, os->dims, rank, split, csize, loops, idx);
    cpu_store_elem(k, out, os, idx, iv);
    cpu_sas_close(k, loops, nl);
  }
  if (!scan) return cpu_kern_end(k, P);

  /* the candidate: whether there is one, its operand index and value */
  LLVMTypeRef vt = cpu_reg_type(cg, xs->dt);
  LLVMValueRef have_a = cpu_alloca(k, cg->i1), val_a = cpu_alloca(k, vt);
  LLVMValueRef sel_a[HLO_MAX_RANK];
  for (int d = 0; d < rank; d++)
    sel_a[d] = cpu_alloca(k, cg->i64);

  nl = cpu_sas_open(k, ss->dims, rank, split, csize, loops, sidx);
  if (!cpu_sas_select(k, in, sidx, have_a, val_a, sel_a, "CPU")) return cpu_kern_end(k, P);

  /* out[sel] = scatter(out[sel], source) when the window had a real tap */
  LLVMBasicBlockRef updb = LLVMAppendBasicBlockInContext(cg->C, k->fn, "sas_scatter");
  LLVMBasicBlockRef doneb = LLVMAppendBasicBlockInContext(cg->C, k->fn, "sas_done");
  LLVMBuildCondBr(B, LLVMBuildLoad2(B, cg->i1, have_a, ""), updb, doneb);
  LLVMPositionBuilderAtEnd(B, updb);
  int mark = k->ncache;
  LLVMValueRef oi[HLO_MAX_RANK];
  for (int d = 0; d < rank; d++)
    oi[d] = LLVMBuildLoad2(B, cg->i64, sel_a[d], "");
  LLVMValueRef sargs[2] = {cpu_load_elem(k, out, os, oi), cpu_gen(k, src, sidx)}, r[1] = {NULL};
  if (sargs[1] && cpu_gen_scalar_comp(k, in->calls[1], sargs, 2, r))
    cpu_store_elem(k, out, os, oi, r[0]);
  k->ncache = mark;
  LLVMBuildBr(B, doneb);
  LLVMPositionBuilderAtEnd(B, doneb);
  cpu_sas_close(k, loops, nl);
  return cpu_kern_end(k, P);
}
