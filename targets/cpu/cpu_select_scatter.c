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
 * gen_scalar_comp, the operand and the source through gen_value, and the output element
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

bool cpu_select_scatter_kernel(CpuCg *cg, HInstr *in) {
  if (!gen_sas_check(in, &cg->plan, cg->g.err, "CPU")) return false;
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

  GenKern *k = cpu_kern_begin(cg, in);
  LLVMBuilderRef B = k->B;
  LLVMValueRef out = cpu_buffer(k, in);
  GenLoop loops[HLO_MAX_RANK];
  LLVMValueRef idx[HLO_MAX_RANK], sidx[HLO_MAX_RANK];

  /* every output element of this chunk = init */
  LLVMValueRef zero[1] = {gen_i64(k, 0)};
  LLVMValueRef iv = gen_value(k, init, zero);
  if (!iv) return cpu_kern_end(k, P);
  bool flat = true; /* this chunk's output slice is contiguous: one loop (a memset) */
  for (int d = 0; d < split; d++)
    flat = flat && os->dims[d] == 1;
  int nl;
  if (flat) {
    Shape fs = hlo_shape_array(os->dt, 1, &total);
    int64_t row = split >= 0 ? total / os->dims[split] : total;
    LLVMValueRef lo =
        LLVMBuildNSWMul(B, cpu_kern(k)->chunk, gen_i64(k, split >= 0 ? csize * row : 0), "");
    LLVMValueRef hi = LLVMBuildNSWAdd(B, lo, gen_i64(k, split >= 0 ? csize * row : total), "");
    LLVMValueRef T = gen_i64(k, total);
    hi = gen_smin(k, hi, T);
    GenLoop fl;
    idx[0] = gen_loop_open(k, &fl, lo, hi);
    gen_store_elem(k, out, &fs, idx, iv);
    gen_loop_close(k, &fl);
  } else {
    nl = gen_sas_open(k, os->dims, rank, split, cpu_kern(k)->chunk, csize, loops, idx);
    gen_store_elem(k, out, os, idx, iv);
    gen_sas_close(k, loops, nl);
  }
  if (!scan) return cpu_kern_end(k, P);

  /* the candidate: whether there is one, its operand index and value */
  LLVMTypeRef vt = gen_reg_type(&cg->g, xs->dt);
  LLVMValueRef have_a = gen_alloca(k, cg->g.i1), val_a = gen_alloca(k, vt);
  LLVMValueRef sel_a[HLO_MAX_RANK];
  for (int d = 0; d < rank; d++)
    sel_a[d] = gen_alloca(k, cg->g.i64);

  nl = gen_sas_open(k, ss->dims, rank, split, cpu_kern(k)->chunk, csize, loops, sidx);
  if (!gen_sas_select(k, in, sidx, have_a, val_a, sel_a, "CPU")) return cpu_kern_end(k, P);

  /* out[sel] = scatter(out[sel], source) when the window had a real tap */
  LLVMBasicBlockRef updb = LLVMAppendBasicBlockInContext(cg->g.C, k->fn, "sas_scatter");
  LLVMBasicBlockRef doneb = LLVMAppendBasicBlockInContext(cg->g.C, k->fn, "sas_done");
  LLVMBuildCondBr(B, LLVMBuildLoad2(B, cg->g.i1, have_a, ""), updb, doneb);
  LLVMPositionBuilderAtEnd(B, updb);
  int mark = k->ncache;
  LLVMValueRef oi[HLO_MAX_RANK];
  for (int d = 0; d < rank; d++)
    oi[d] = LLVMBuildLoad2(B, cg->g.i64, sel_a[d], "");
  LLVMValueRef sargs[2] = {gen_load_elem(k, out, os, oi), gen_value(k, src, sidx)}, r[1] = {NULL};
  if (sargs[1] && gen_scalar_comp(k, in->calls[1], sargs, 2, r))
    gen_store_elem(k, out, os, oi, r[0]);
  k->ncache = mark;
  LLVMBuildBr(B, doneb);
  LLVMPositionBuilderAtEnd(B, doneb);
  gen_sas_close(k, loops, nl);
  return cpu_kern_end(k, P);
}
