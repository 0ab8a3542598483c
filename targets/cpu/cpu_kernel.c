/* targets/cpu/cpu_kernel.c: one kernel function per computed entry instruction.
 *
 * Every entry instruction that computes a value (a fusion, or a lone instruction treated as a
 * fusion of one) becomes an internal function `void NAME_kN(ctx, i64 chunk)`. The context is
 * a table of pointers filled by the run function (CpuSlot: an entry value's storage per the
 * memory plan, a constant's global, kernel-private scratch); the kernel loads the ones it uses
 * once, in its entry block, and never names a module-specific address. Kernel shapes:
 *   - loop kernel: a loop nest over the output shape storing gen_value(root, index) (for a
 *     tuple-shaped root, every leaf at the same index);
 *   - transposing kernel: an f32 loop kernel whose root is a transpose of the minor dimension,
 *     computed in tiles along the operand's rows and transposed in registers
 *     (kn_transpose_kernel);
 *   - dot / convolution: the blocked GEMM of gemm/ when the operands allow it, else an
 *     accumulating kernel: outer loops over all output dims but the last,
 *     then the reduction loops, then the last output dim innermost, accumulating into the
 *     output row (i-k-j order for a matrix product), so the innermost loop streams through
 *     contiguous memory and vectorizes;
 *   - column reduction (a reduce keeping the minor dimension): the output row is combined with
 *     each reduced operand row in turn, the inner loop contiguous;
 *   - scatter: the operand is copied into the output, then the updates are combined in order
 *     (serially, as XLA's order of updates is sequential).
 * Parallelism: the first output dimension of extent > 1 is split into chunks (at most 64);
 * chunk c covers a contiguous range of it. Small nests run as one chunk. */
#include "cpu_impl.h"

#include <llvm-c/DebugInfo.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ loops */

void cpu_loop_hint(GenKern *k, LLVMValueRef br, const char *name, LLVMValueRef value) {
  LLVMContextRef C = k->cg->C;
  LLVMMetadataRef tmp = LLVMTemporaryMDNode(C, NULL, 0);
  LLVMMetadataRef opt[2] = {LLVMMDStringInContext2(C, name, strlen(name)),
                            value ? LLVMValueAsMetadata(value) : NULL};
  LLVMMetadataRef ops[2] = {tmp, LLVMMDNodeInContext2(C, opt, value ? 2 : 1)};
  LLVMMetadataRef loop = LLVMMDNodeInContext2(C, ops, 2);
  LLVMMetadataReplaceAllUsesWith(tmp, loop);
  LLVMSetMetadata(br, LLVMGetMDKindIDInContext(C, "llvm.loop", 9), LLVMMetadataAsValue(C, loop));
}

/* ------------------------------------------------------------------ vectors */

LLVMValueRef cpu_splat(GenKern *k, LLVMValueRef x, int n) {
  LLVMTypeRef vt = LLVMVectorType(LLVMTypeOf(x), (unsigned)n);
  LLVMValueRef v =
      LLVMBuildInsertElement(k->B, LLVMGetUndef(vt), x, LLVMConstInt(k->cg->i32, 0, 0), "");
  return LLVMBuildShuffleVector(k->B, v, LLVMGetUndef(vt),
                                LLVMConstNull(LLVMVectorType(k->cg->i32, (unsigned)n)), "");
}

LLVMValueRef cpu_lane_mask(GenKern *k, int n, int m) {
  LLVMValueRef bits[64];
  for (int q = 0; q < n; q++)
    bits[q] = LLVMConstInt(k->cg->i1, q < m, 0);
  return LLVMConstVector(bits, (unsigned)n);
}

/* The alignment a masked access of vector type vt claims: one element's. */
static unsigned cpu_elt_align(LLVMTypeRef vt) {
  LLVMTypeRef e = LLVMGetElementType(vt);
  LLVMTypeKind t = LLVMGetTypeKind(e);
  if (t == LLVMIntegerTypeKind) return LLVMGetIntTypeWidth(e) >= 8 ? LLVMGetIntTypeWidth(e) / 8 : 1;
  return t == LLVMHalfTypeKind || t == LLVMBFloatTypeKind ? 2 : t == LLVMDoubleTypeKind ? 8 : 4;
}

LLVMValueRef cpu_masked_load(GenKern *k, LLVMTypeRef vt, LLVMValueRef p, LLVMValueRef mask) {
  LLVMTypeRef ty[2] = {vt, k->cg->ptr};
  LLVMValueRef f =
      LLVMGetIntrinsicDeclaration(k->cg->M, LLVMLookupIntrinsicID("llvm.masked.load", 16), ty, 2);
  LLVMValueRef a[4] = {p, LLVMConstInt(k->cg->i32, cpu_elt_align(vt), 0), mask, LLVMConstNull(vt)};
  return LLVMBuildCall2(k->B, LLVMGlobalGetValueType(f), f, a, 4, "");
}

void cpu_masked_store(GenKern *k, LLVMValueRef v, LLVMValueRef p, LLVMValueRef mask) {
  LLVMTypeRef ty[2] = {LLVMTypeOf(v), k->cg->ptr};
  LLVMValueRef f =
      LLVMGetIntrinsicDeclaration(k->cg->M, LLVMLookupIntrinsicID("llvm.masked.store", 17), ty, 2);
  LLVMValueRef a[4] = {v, p, LLVMConstInt(k->cg->i32, cpu_elt_align(LLVMTypeOf(v)), 0), mask};
  LLVMBuildCall2(k->B, LLVMGlobalGetValueType(f), f, a, 4, "");
}

/* ------------------------------------------------------------------ buffers */

static LLVMValueRef kn_byte_off(GenKern *k, LLVMValueRef p, int64_t off) {
  if (off == 0) return p;
  LLVMValueRef ix = gen_i64(k, off);
  return LLVMBuildInBoundsGEP2(k->B, k->cg->i8, p, &ix, 1, "");
}

static bool kn_same_slot(const CpuSlot *a, const CpuSlot *b) {
  if (a->kind != b->kind) return false;
  switch (a->kind) {
  case CPU_SLOT_INSTR: return a->in == b->in && a->off == b->off;
  case CPU_SLOT_GLOBAL: return a->gv == b->gv;
  case CPU_SLOT_TEMP: return a->off == b->off;
  case CPU_SLOT_PACKED: return true;
  }
  return false;
}

LLVMValueRef cpu_slot(GenKern *k, CpuSlot s) {
  CpuKern *ck = cpu_kern(k);
  for (int i = 0; i < ck->nslots; i++) /* one pointer for one address */
    if (kn_same_slot(&ck->slots[i], &s) || cpu_slots_same_address(cpu_cg(k->cg), &ck->slots[i], &s))
      return ck->slot_vals[i];
  if (ck->nslots == ck->slot_cap) {
    int nc = ck->slot_cap ? ck->slot_cap * 2 : 16;
    CpuSlot *ns = hlo_arena_alloc(k->cg->scratch, sizeof *ns * (size_t)nc);
    LLVMValueRef *nv = hlo_arena_alloc(k->cg->scratch, sizeof *nv * (size_t)nc);
    if (ck->nslots) {
      memcpy(ns, ck->slots, sizeof *ns * (size_t)ck->nslots);
      memcpy(nv, ck->slot_vals, sizeof *nv * (size_t)ck->nslots);
    }
    ck->slots = ns;
    ck->slot_vals = nv;
    ck->slot_cap = nc;
  }
  LLVMBasicBlockRef cur = LLVMGetInsertBlock(k->B);
  LLVMPositionBuilderBefore(k->B, k->entry_br);
  LLVMValueRef ix = gen_i64(k, ck->nslots);
  LLVMValueRef p = LLVMBuildInBoundsGEP2(k->B, k->cg->ptr, ck->ctx, &ix, 1, "");
  LLVMValueRef v = LLVMBuildLoad2(k->B, k->cg->ptr, p, "");
  LLVMPositionBuilderAtEnd(k->B, cur);
  ck->slots[ck->nslots] = s;
  ck->slot_vals[ck->nslots] = v;
  ck->nslots++;
  return v;
}

LLVMValueRef cpu_const_ptr(GenKern *k, const HInstr *in) {
  return cpu_slot(k, (CpuSlot){CPU_SLOT_GLOBAL, NULL, gen_const_global(k->cg, (HInstr *)in), 0});
}

LLVMValueRef cpu_buffer(GenKern *k, const HInstr *in) {
  HLO_ASSERT(in->parent == k->cg->entry);
  if (k->bufs[in->idx]) return k->bufs[in->idx];
  LLVMValueRef p = cpu_slot(k, (CpuSlot){CPU_SLOT_INSTR, in, NULL, 0});
  k->bufs[in->idx] = p;
  return p;
}

/* ------------------------------------------------------------------ kernel functions */

GenKern *cpu_kern_begin(CpuCg *cg, const HInstr *root) {
  CpuKern *ck = hlo_arena_alloc(cg->g.scratch, sizeof *ck);
  GenKern *k = &ck->g;
  k->cg = &cg->g;
  k->B = cg->g.B;
  k->root = root;
  k->bufs =
      hlo_arena_alloc(cg->g.scratch, sizeof(LLVMValueRef) * (size_t)(cg->g.entry->ninstrs + 1));
  char name[512];
  snprintf(name, sizeof name, "%s_k%d", cg->o->name, cg->ntasks);
  k->fn = LLVMAddFunction(cg->g.M, name, cg->task_ty);
  LLVMSetLinkage(k->fn, LLVMInternalLinkage);
  /* kernels stay separate functions: each is optimized on its own (keeps compile time
     linear in the module size) and is what the parallel-for runs anyway */
  unsigned ni = LLVMGetEnumAttributeKindForName("noinline", 8);
  LLVMAddAttributeAtIndex(k->fn, LLVMAttributeFunctionIndex,
                          LLVMCreateEnumAttribute(cg->g.C, ni, 0));
  ck->ctx = LLVMGetParam(k->fn, 0);
  ck->chunk = LLVMGetParam(k->fn, 1);
  k->entry = LLVMAppendBasicBlockInContext(cg->g.C, k->fn, "entry");
  LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(cg->g.C, k->fn, "start");
  LLVMPositionBuilderAtEnd(k->B, k->entry);
  k->entry_br = LLVMBuildBr(k->B, body);
  LLVMPositionBuilderAtEnd(k->B, body);
  return k;
}

/* Alias scopes from the memory plan: every load and store addressed from one of the kernel's
 * slot pointers (through GEPs) gets !alias.scope {slot i} and !noalias {every slot whose
 * memory is disjoint from slot i's, cpu_mem_disjoint}. The pointers come from the ctx table,
 * so LLVM cannot tell them apart by itself: the loop vectorizer emitted a runtime overlap
 * check and a scalar copy of nearly every loop (27 of resnet18's 32 vector loops), which
 * also cost compile time (resnet18 2683 -> 2348 M instructions executed by hloc, bert_base
 * 1533 -> 1409 M). Slots that may overlap (a value computed in place of its operand, views
 * of one buffer, kernel-private scratch, a while loop's values) keep no claim between them,
 * and accesses through other pointers (phis, calls) carry no metadata, so nothing is
 * assumed of them. The scopes are named by slot number (the same nodes in every kernel, so
 * that identical kernels stay identical for cp_share_kernels); that holds because kernels
 * are never inlined into each other (noinline, cpu_kern_begin). */
static void kn_alias_scopes(GenKern *k) {
  enum { MAXS = 64 };
  const CpuKern *ck = cpu_kern(k);
  int n = ck->nslots;
  if (n < 2 || n > MAXS) return;
  CpuCg *cg = cpu_cg(k->cg);
  LLVMContextRef C = cg->g.C;
  CpuMem mem[MAXS];
  for (int i = 0; i < n; i++)
    mem[i] = cpu_slot_mem(cg, cg->region, &ck->slots[i]);
  LLVMMetadataRef scope[MAXS],
      domain = LLVMMDNodeInContext2(
          C, (LLVMMetadataRef[]){LLVMMDStringInContext2(C, "hloc.slots", 10)}, 1);
  LLVMValueRef as[MAXS], na[MAXS];
  for (int i = 0; i < n; i++) {
    char name[32];
    int len = snprintf(name, sizeof name, "hloc.slot.%d", i);
    LLVMMetadataRef ops[2] = {LLVMMDStringInContext2(C, name, (size_t)len), domain};
    scope[i] = LLVMMDNodeInContext2(C, ops, 2);
  }
  for (int i = 0; i < n; i++) {
    LLVMMetadataRef apart[MAXS];
    int na_n = 0;
    for (int j = 0; j < n; j++)
      if (j != i && cpu_mem_disjoint(cg, &mem[i], &mem[j])) apart[na_n++] = scope[j];
    as[i] = na_n ? LLVMMetadataAsValue(C, LLVMMDNodeInContext2(C, &scope[i], 1)) : NULL;
    na[i] = na_n ? LLVMMetadataAsValue(C, LLVMMDNodeInContext2(C, apart, (size_t)na_n)) : NULL;
  }
  unsigned kas = LLVMGetMDKindIDInContext(C, "alias.scope", 11),
           kna = LLVMGetMDKindIDInContext(C, "noalias", 7);
  for (LLVMBasicBlockRef b = LLVMGetFirstBasicBlock(k->fn); b; b = LLVMGetNextBasicBlock(b))
    for (LLVMValueRef in = LLVMGetFirstInstruction(b); in; in = LLVMGetNextInstruction(in)) {
      LLVMOpcode op = LLVMGetInstructionOpcode(in);
      if (op != LLVMLoad && op != LLVMStore) continue;
      LLVMValueRef p = LLVMGetOperand(in, op == LLVMLoad ? 0 : 1);
      while (LLVMIsAGetElementPtrInst(p))
        p = LLVMGetOperand(p, 0);
      for (int i = 0; i < n; i++)
        if (ck->slot_vals[i] == p && as[i]) {
          LLVMSetMetadata(in, kas, as[i]);
          LLVMSetMetadata(in, kna, na[i]);
          break;
        }
    }
}

bool cpu_kern_end(GenKern *k, int64_t nchunks) {
  LLVMBuildRetVoid(k->B);
  if (k->failed) return false;
  kn_alias_scopes(k);
  CpuTask *t = cpu_task_push(cpu_cg(k->cg));
  t->fn = k->fn;
  t->nchunks = nchunks;
  t->nslots = cpu_kern(k)->nslots;
  t->slots = cpu_kern(k)->slots;
  t->root = k->root;
  return true;
}

/* How a loop nest over shape s is split: the dimension split (-1: none), chunk size and
 * chunk count. */
typedef struct KnSplit {
  int dim;      /* split dimension, -1 when not split */
  int64_t size; /* chunk extent along dim */
  int64_t n;    /* number of chunks */
} KnSplit;

/* Chunks of a nest over s doing work elements of work: at most maxn along the first dimension
 * of extent > 1. */
static KnSplit kn_split_n(CpuCg *cg, const Shape *s, int64_t work, int64_t maxn) {
  KnSplit sp = {-1, 0, 1};
  int64_t min = cg->o->par_min_elems > 0 ? cg->o->par_min_elems : 32768;
  if (work < min) return sp;
  for (int d = 0; d < s->rank; d++) {
    if (s->dims[d] <= 1) continue;
    int64_t D = s->dims[d];
    int64_t want = D < maxn ? D : maxn;
    sp.dim = d;
    sp.size = (D + want - 1) / want;
    sp.n = (D + sp.size - 1) / sp.size;
    if (sp.n <= 1) sp.dim = -1, sp.n = 1;
    break;
  }
  return sp;
}

static KnSplit kn_split(CpuCg *cg, const Shape *s, int64_t work) {
  return kn_split_n(cg, s, work, 64);
}

/* Range of dimension d in the current chunk. */
static void kn_range(GenKern *k, const Shape *s, const KnSplit *sp, int d, LLVMValueRef *lo,
                     LLVMValueRef *hi) {
  if (d != sp->dim) {
    *lo = gen_i64(k, 0);
    *hi = gen_i64(k, s->dims[d]);
    return;
  }
  LLVMValueRef l = LLVMBuildNSWMul(k->B, cpu_kern(k)->chunk, gen_i64(k, sp->size), "");
  LLVMValueRef h = LLVMBuildNSWAdd(k->B, l, gen_i64(k, sp->size), "");
  LLVMValueRef D = gen_i64(k, s->dims[d]);
  h = LLVMBuildSelect(k->B, LLVMBuildICmp(k->B, LLVMIntSLT, h, D, ""), h, D, "");
  *lo = l;
  *hi = h;
}

/* Open loops over dims [0, n) of s; size-1 dims get index 0 and no loop. */
static int kn_open_nest(GenKern *k, const Shape *s, const KnSplit *sp, int n, GenLoop *loops,
                        LLVMValueRef *idx) {
  int nl = 0;
  for (int d = 0; d < n; d++) {
    if (s->dims[d] == 1 && d != sp->dim) {
      idx[d] = gen_i64(k, 0);
      continue;
    }
    LLVMValueRef lo, hi;
    kn_range(k, s, sp, d, &lo, &hi);
    idx[d] = gen_loop_open(k, &loops[nl++], lo, hi);
  }
  return nl;
}

static void kn_close_nest(GenKern *k, GenLoop *loops, int nl) {
  for (int j = nl - 1; j >= 0; j--)
    gen_loop_close(k, &loops[j]);
}

/* The work of a loop kernel writing ls: its elements, or the elements the largest reduction
 * it computes reads (a row reduction's 1024 results of 768 sums each are 786K elements of
 * work, worth splitting like any loop of that size). */
static int64_t kn_work(const HInstr *in, const Shape *ls) {
  int64_t w = hlo_shape_elems(ls);
  if (in->op == OP_REDUCE && hlo_shape_is_array(&in->ops[0]->shape) &&
      hlo_shape_elems(&in->ops[0]->shape) > w)
    w = hlo_shape_elems(&in->ops[0]->shape);
  if (in->op == OP_FUSION)
    for (int i = 0; i < in->calls[0]->ninstrs; i++) {
      const HInstr *x = in->calls[0]->instrs[i];
      if (x->op == OP_REDUCE && hlo_shape_is_array(&x->ops[0]->shape) &&
          hlo_shape_elems(&x->ops[0]->shape) > w)
        w = hlo_shape_elems(&x->ops[0]->shape);
    }
  return w;
}

/* Open the loops of an output nest over ls for work elements of work (kn_work): nested loops,
 * or for short rows one loop over the linear index (long enough to vectorize) with the
 * multi-dimensional index derived from it where an op needs it. Fills *sp with the split
 * used. */
static int kn_open_out(GenKern *k, const Shape *ls, int64_t work, KnSplit *sp, GenLoop *loops,
                       LLVMValueRef *idx) {
  CpuCg *cg = cpu_cg(k->cg);
  int64_t total = hlo_shape_elems(ls);
  if (!(ls->rank >= 2 && ls->dims[ls->rank - 1] < 16)) {
    *sp = kn_split(cg, ls, work);
    return kn_open_nest(k, ls, sp, ls->rank, loops, idx);
  }
  KnSplit lsp = kn_split(cg, ls, work);
  Shape flat = hlo_shape_array(ls->dt, 1, &total);
  *sp = kn_split(cg, &flat, lsp.n > 1 ? work : 0);
  int nl = kn_open_nest(k, &flat, sp, 1, loops, idx);
  LLVMValueRef lin = idx[0], rem = lin;
  for (int d = ls->rank - 1; d >= 0; d--) {
    if (d == 0) {
      idx[d] = rem;
      break;
    }
    LLVMValueRef dim = gen_i64(k, ls->dims[d]);
    idx[d] = LLVMBuildURem(k->B, rem, dim, "");
    rem = LLVMBuildUDiv(k->B, rem, dim, "");
  }
  k->lin_idx = idx;
  k->lin = lin;
  k->lin_shape = ls;
  return nl;
}

/* Pointer (in the entry block) to leaf j of a tuple-shaped entry value. */
static LLVMValueRef kn_leaf_ptr(GenKern *k, const HInstr *in, int j) {
  LLVMValueRef out = cpu_buffer(k, in);
  LLVMBasicBlockRef cur = LLVMGetInsertBlock(k->B);
  LLVMPositionBuilderBefore(k->B, k->entry_br);
  LLVMValueRef lp = kn_byte_off(k, out, memplan_tuple_offset(&in->shape, j));
  LLVMPositionBuilderAtEnd(k->B, cur);
  return lp;
}

void cpu_kern_materialized(GenKern *k, const HInstr *in, LLVMValueRef p) {
  cpu_kern_materialized_as(k, in, p, DT_INVALID);
}

void cpu_kern_materialized_as(GenKern *k, const HInstr *in, LLVMValueRef p, DType dt) {
  if (k->nmat < GEN_MAX_MAT) k->mat[k->nmat++] = (GenMat){in, p, dt};
}

/* Where a loop over an output dimension of extent n of kernel in is split, so that its
 * middle part reads every reduce-window and pad of the kernel inside their operands: the
 * segments [seg[i], seg[i + 1]), i < the count returned (1: not split). Every reduce-window
 * or pad dimension of extent n that can reach outside its operand narrows the middle part
 * (the loop may compute another dimension: the split is then only a cost, since the bounds
 * tests come from the loop variables' ranges, gen_index_range). Inside the middle part the
 * operand index is affine in the loop variable, so an 8- or 16-wide loop loads vectors
 * where a clamped index made it gather (a 3x3 max-pool with a padded last column). */
static int kn_segments(const HInstr *in, int64_t n, int64_t seg[4]) {
  seg[0] = 0, seg[1] = n;
  if (n < 2) return 1;
  const HComp *c = in->op == OP_FUSION ? in->calls[0] : NULL;
  int64_t lo = 0, hi = n; /* the middle part [lo, hi) */
  bool any = false;
  for (int i = 0; i < (c ? c->ninstrs : 1); i++) {
    const HInstr *x = c ? c->instrs[i] : in;
    for (int d = 0; d < x->shape.rank && hlo_shape_is_array(&x->shape); d++) {
      if (x->shape.dims[d] != n) continue;
      int64_t dim = x->nops ? x->ops[0]->shape.dims[d] : 0, ilo, ihi; /* interior [ilo, ihi) */
      if (x->op == OP_REDUCE_WINDOW && x->window && x->window->d[d].base_dil == 1) {
        const WinDim *wd = &x->window->d[d];
        ilo = wd->pad_lo > 0 ? (wd->pad_lo + wd->stride - 1) / wd->stride : 0;
        int64_t top = dim - 1 + wd->pad_lo - (wd->size - 1) * wd->win_dil;
        ihi = top < 0 ? 0 : top / wd->stride + 1;
      } else if (x->op == OP_PAD && x->pad->interior[d] == 0) {
        ilo = x->pad->lo[d] > 0 ? x->pad->lo[d] : 0;
        ihi = x->pad->lo[d] + dim;
      } else {
        continue;
      }
      if (ilo <= 0 && ihi >= n) continue;
      any = true;
      if (ilo > lo) lo = ilo;
      if (ihi < hi) hi = ihi;
    }
  }
  if (!any || lo >= hi) return 1;
  int ns = 0;
  if (lo > 0) seg[ns++] = 0;
  seg[ns++] = lo;
  if (hi < n) seg[ns++] = hi;
  seg[ns] = n;
  return ns;
}

/* Loop kernel: store gen(in) over its array shape, or every leaf of a tuple-shaped reduce or
 * multi-output fusion whose leaves share their dimensions. */
static bool kn_loop_kernel(CpuCg *cg, HInstr *in) {
  const Shape *s = &in->shape;
  const HInstr *froot = in->op == OP_FUSION ? in->calls[0]->root : NULL;
  bool multi = s->dt == DT_TUPLE;
  const Shape *ls = multi ? &s->tuple[0] : s;
  if (multi) {
    if (!(in->op == OP_REDUCE || (froot && froot->op == OP_TUPLE))) {
      hlo_err_at(cg->g.err, in, "CPU target: tuple-shaped %s is not supported",
                 hlo_op_name(in->op));
      return false;
    }
    if (s->ntuple > 64) {
      hlo_err_at(cg->g.err, in, "CPU target: too many outputs");
      return false;
    }
    for (int j = 0; j < s->ntuple; j++)
      if (s->tuple[j].dt == DT_TUPLE) {
        hlo_err_at(cg->g.err, in, "CPU target: nested tuple outputs are not supported");
        return false;
      }
  }
  GenKern *k = cpu_kern_begin(cg, in);
  GenLoop loops[HLO_MAX_RANK], inner;
  LLVMValueRef idx[HLO_MAX_RANK];
  KnSplit sp;
  int r = ls->rank, nseg = 1;
  int64_t seg[4];
  /* rows of 16 or more (kn_open_out's nested form) split where a window or pad reaches out */
  if (r >= 1 && !(r >= 2 && ls->dims[r - 1] < 16)) nseg = kn_segments(in, ls->dims[r - 1], seg);
  int64_t work = kn_work(in, ls);
  if (nseg > 1) sp = kn_split(cg, ls, work);
  int nl;
  if (nseg > 1 && sp.dim != r - 1) {
    nl = kn_open_nest(k, ls, &sp, r - 1, loops, idx);
  } else {
    nseg = 1;
    nl = kn_open_out(k, ls, work, &sp, loops, idx);
  }
  for (int g = 0; g < nseg; g++) {
    if (nseg > 1) idx[r - 1] = gen_loop_open(k, &inner, gen_i64(k, seg[g]), gen_i64(k, seg[g + 1]));
    if (!multi) {
      LLVMValueRef v = gen_value(k, in, idx);
      if (v) gen_store_elem(k, cpu_buffer(k, in), s, idx, v);
    } else {
      LLVMValueRef vals[64];
      if (in->op == OP_REDUCE) {
        gen_value_multi(k, in, idx, vals);
      } else {
        k->bind[k->nbind++] = (GenBind){in->calls[0], in, NULL, 0, k->ncache};
        for (int j = 0; j < s->ntuple && !k->failed; j++)
          vals[j] = gen_value(k, froot->ops[j], idx);
        k->nbind--;
      }
      for (int j = 0; j < s->ntuple && !k->failed; j++)
        gen_store_elem(k, kn_leaf_ptr(k, in, j), &s->tuple[j], idx, vals[j]);
    }
    if (nseg > 1) gen_loop_close(k, &inner);
  }
  kn_close_nest(k, loops, nl);
  return cpu_kern_end(k, sp.n);
}

/* The output dimension b that a transposing kernel (a lone f32 transpose, or a fusion whose
 * root is one) reads along its operand's minor dimension, when that is not the output's
 * minor dimension and the kernel is large enough to tile; -1 otherwise. */
static int kn_transposed_dim(const HInstr *in) {
  const HInstr *root = in->op == OP_FUSION ? in->calls[0]->root : in;
  const Shape *s = &in->shape;
  if (root->op != OP_TRANSPOSE || s->dt != DT_F32 || s->rank < 2 || hlo_shape_elems(s) < 4096)
    return -1;
  int r = s->rank;
  if (root->dims.v[r - 1] == r - 1) return -1;
  for (int j = 0; j < r; j++)
    if (root->dims.v[j] == r - 1) return s->dims[j] > 1 && s->dims[r - 1] > 1 ? j : -1;
  return -1;
}

/* Tiled transposing kernel: the output is computed in tiles of VW elements of its minor
 * dimension a (VW = cpu_vector_width) by a strip of dimension b, the one read along the
 * operand's minor dimension (whole operand rows up to KN_TSTRIP * VW), by H steps of the
 * dimension before b in the operand's order when the strip holds whole rows (H up to a tile of
 * KN_TTILE elements). A tile is computed into kernel-private scratch with the inner loop along
 * b (contiguous operand reads, vectorized), then each VW x VW block is transposed in registers
 * and stored as vector rows along a: masked to the lanes inside a at its edge, rows past the
 * edge of b not stored. The tiles are visited in the transpose operand's dimension order, so
 * that its reads stream through whole planes (a max-pool of an NCHW input written in NHWC
 * reads one run of H rows per channel plane; a loop kernel in output order would gather
 * across 64 channel planes, and tiles of one row fell behind the plain NCHW pool by 2x on the
 * 2-core EPYC); the parallel-for splits the first dimension of that order, in at most
 * KN_TCHUNKS chunks, each with its own tile. */
enum {
  KN_TSTRIP = 16,        /* VW x VW blocks per strip of a transposing kernel */
  KN_TTILE = 65536,      /* f32 elements of its tile, at most (when H > 1) */
  KN_TCHUNKS = 16,       /* its parallel-for chunks, at most (each has a tile in scratch) */
  KN_NT_BYTES = 8 << 20, /* outputs of at least this size are stored past the caches */
};

static bool kn_transpose_kernel(CpuCg *cg, HInstr *in, int b) {
  const Shape *s = &in->shape;
  int r = s->rank, a = r - 1, VW = cpu_vector_width(cg);
  const HInstr *root = in->op == OP_FUSION ? in->calls[0]->root : in;
  /* a strip of BT along b: whole operand rows up to KN_TSTRIP blocks */
  int64_t nblk = (s->dims[b] + VW - 1) / VW;
  int BT = VW * (int)(nblk < KN_TSTRIP ? nblk : KN_TSTRIP);
  /* the strip grid, in the transpose operand's dimension order, a counted in VW, b in BT (b
     comes last); when a strip holds whole rows, it also holds H steps of the dimension
     before b in that order (hd), so each operand plane is read in runs of H rows */
  int gdim[HLO_MAX_RANK], ga = 0, hd = -1, H = 1; /* gdim: the inverse permutation */
  for (int j = 0; j < r; j++)
    gdim[root->dims.v[j]] = j;
  if (r >= 3 && gdim[r - 2] != a && BT >= s->dims[b]) {
    hd = gdim[r - 2];
    int64_t hmax = KN_TTILE / ((int64_t)VW * BT), dh = s->dims[hd];
    if (hmax < 1) hmax = 1;
    int64_t nh = (dh + hmax - 1) / hmax;
    H = (int)((dh + nh - 1) / nh);
  }
  int64_t gd[HLO_MAX_RANK];
  for (int i = 0; i < r; i++) {
    int j = gdim[i];
    gd[i] = j == a    ? (s->dims[j] + VW - 1) / VW
            : j == b  ? (s->dims[j] + BT - 1) / BT
            : j == hd ? (s->dims[j] + H - 1) / H
                      : s->dims[j];
    if (j == a) ga = i;
  }
  GenKern *k = cpu_kern_begin(cg, in);
  LLVMBuilderRef B = k->B;
  LLVMTypeRef f32 = cg->g.f32, vt = LLVMVectorType(f32, (unsigned)VW);
  Shape grid = hlo_shape_array(s->dt, r, gd);
  KnSplit sp = kn_split_n(cg, &grid, hlo_shape_elems(s), KN_TCHUNKS);
  GenLoop loops[HLO_MAX_RANK], lt, lu, lh;
  LLVMValueRef gi[HLO_MAX_RANK], idx[HLO_MAX_RANK];
  int nl = kn_open_nest(k, &grid, &sp, r, loops, gi);
  for (int i = 0; i < r; i++)
    idx[gdim[i]] = gi[i];
  LLVMValueRef vw = gen_i64(k, VW), bt = gen_i64(k, BT), hh = gen_i64(k, 0), h0 = NULL, nh = NULL;
  LLVMValueRef a0 = LLVMBuildNSWMul(B, gi[ga], vw, ""), b0 = LLVMBuildNSWMul(B, gi[r - 1], bt, "");
  LLVMValueRef na = gen_smin(k, vw, LLVMBuildNSWSub(B, gen_i64(k, s->dims[a]), a0, ""));
  LLVMValueRef nb = gen_smin(k, bt, LLVMBuildNSWSub(B, gen_i64(k, s->dims[b]), b0, ""));
  if (hd >= 0) {
    h0 = LLVMBuildNSWMul(B, gi[r - 2], gen_i64(k, H), "");
    nh = gen_smin(k, gen_i64(k, H), LLVMBuildNSWSub(B, gen_i64(k, s->dims[hd]), h0, ""));
  }
  /* the chunk's tile in kernel-private scratch */
  int64_t tbytes = (int64_t)VW * H * BT * 4;
  if (tbytes * sp.n > cg->extra_temp) cg->extra_temp = tbytes * sp.n;
  LLVMValueRef toff = LLVMBuildNSWMul(B, cpu_kern(k)->chunk, gen_i64(k, tbytes), "");
  LLVMValueRef tile = LLVMBuildInBoundsGEP2(
      B, cg->g.i8, cpu_slot(k, (CpuSlot){CPU_SLOT_TEMP, NULL, NULL, cg->temp_base}), &toff, 1, "");
  /* tile[t][h][u] = out[.., h0 + h, .., b0 + u, .., a0 + t] (row (t * H + h) * BT) */
#define KN_ROW(t)                                                                                  \
  LLVMBuildNSWMul(B, LLVMBuildNSWAdd(B, LLVMBuildNSWMul(B, (t), gen_i64(k, H), ""), hh, ""), bt, "")
  LLVMValueRef t = gen_loop_open(k, &lt, gen_i64(k, 0), na);
  idx[a] = LLVMBuildNSWAdd(B, a0, t, "");
  if (hd >= 0) {
    hh = gen_loop_open(k, &lh, gen_i64(k, 0), nh);
    idx[hd] = LLVMBuildNSWAdd(B, h0, hh, "");
  }
  /* a strip of whole rows (b0 = 0) is split where a window or pad reaches out (kn_segments) */
  int64_t seg[4];
  int nseg = BT >= s->dims[b] ? kn_segments(in, s->dims[b], seg) : 1;
  for (int g = 0; g < nseg; g++) {
    LLVMValueRef u = nseg > 1 ? gen_loop_open(k, &lu, gen_i64(k, seg[g]), gen_i64(k, seg[g + 1]))
                              : gen_loop_open(k, &lu, gen_i64(k, 0), nb);
    idx[b] = LLVMBuildNSWAdd(B, b0, u, "");
    LLVMValueRef v = gen_value(k, in, idx);
    if (v) {
      LLVMValueRef off = LLVMBuildNSWAdd(B, KN_ROW(t), u, "");
      LLVMSetAlignment(LLVMBuildStore(B, v, LLVMBuildInBoundsGEP2(B, f32, tile, &off, 1, "")), 4);
    }
    gen_loop_close(k, &lu);
  }
  if (hd >= 0) gen_loop_close(k, &lh);
  gen_loop_close(k, &lt);
  /* the tile's VW x VW blocks; the whole vectors of a large output in scratch (aligned to a
     vector when its rows are whole vectors) are stored past the caches where the CPU gains
     from it (cpu_stream_stores): the output would not stay in them, and a cached store first
     reads the line it fills (device Xeon, the resnet_block max-pool written in NHWC, 32 x 56
     x 56 x 64: 19.7-21.2 -> 15.7-20.2 ms on one core, 9.1-12.0 -> 8.3-9.6 ms on two) */
  LLVMValueRef out = cpu_buffer(k, in);
  int64_t boff = 0;
  int bi = memplan_base(&cg->plan, in->idx, &boff);
  bool nt = bi >= 0 && cg->plan.bufs[bi].kind == MEM_TEMP && boff % (VW * 4) == 0 &&
            s->dims[a] % VW == 0 && (int64_t)hlo_shape_bytes(s) >= KN_NT_BYTES &&
            cpu_stream_stores(cg);
  if (hd >= 0) {
    hh = gen_loop_open(k, &lh, gen_i64(k, 0), nh);
    idx[hd] = LLVMBuildNSWAdd(B, h0, hh, "");
  }
  GenLoop ls;
  LLVMValueRef sb = gen_loop_open_step(k, &ls, gen_i64(k, 0), nb, vw);
  LLVMValueRef nsb = gen_smin(k, vw, LLVMBuildNSWSub(B, nb, sb, ""));
  /* VW rows transposed in registers (rows past na, and lanes past nsb, read tile memory
     that holds no value of this block: they land in lanes and rows not stored); row e goes
     to b = b0 + sb + e when e < nsb, as one vector, or masked to its first na lanes at the
     edge of a */
  LLVMValueRef rows[16];
  for (int q = 0; q < VW; q++) {
    LLVMValueRef off = LLVMBuildNSWAdd(B, KN_ROW(gen_i64(k, q)), sb, "");
    rows[q] = LLVMBuildLoad2(B, vt, LLVMBuildInBoundsGEP2(B, f32, tile, &off, 1, ""), "");
    LLVMSetAlignment(rows[q], 4);
  }
  cpu_transpose_regs(k, rows, VW);
  LLVMValueRef lanes[16];
  for (int q = 0; q < VW; q++)
    lanes[q] = LLVMConstInt(cg->g.i64, (unsigned)q, 0);
  LLVMValueRef lane_ix = LLVMConstVector(lanes, (unsigned)VW);
  LLVMValueRef mask = LLVMBuildICmp(B, LLVMIntSLT, lane_ix, cpu_splat(k, na, VW), "");
  LLVMValueRef full_a = LLVMBuildICmp(B, LLVMIntEQ, na, vw, "");
  idx[a] = a0;
  LLVMValueRef bs = LLVMBuildNSWAdd(B, b0, sb, "");
  for (int e = 0; e < VW; e++) {
    LLVMBasicBlockRef st = LLVMAppendBasicBlockInContext(cg->g.C, k->fn, "row");
    LLVMBasicBlockRef vec = LLVMAppendBasicBlockInContext(cg->g.C, k->fn, "rowv");
    LLVMBasicBlockRef msk = LLVMAppendBasicBlockInContext(cg->g.C, k->fn, "rowm");
    LLVMBasicBlockRef next = LLVMAppendBasicBlockInContext(cg->g.C, k->fn, "rown");
    LLVMBuildCondBr(B, LLVMBuildICmp(B, LLVMIntSLT, gen_i64(k, e), nsb, ""), st, next);
    LLVMPositionBuilderAtEnd(B, st);
    idx[b] = LLVMBuildNSWAdd(B, bs, gen_i64(k, e), "");
    LLVMValueRef lin = gen_linear(k, s, idx);
    LLVMValueRef dst = LLVMBuildInBoundsGEP2(B, f32, out, &lin, 1, "");
    LLVMBuildCondBr(B, full_a, vec, msk);
    LLVMPositionBuilderAtEnd(B, vec);
    LLVMValueRef vst = LLVMBuildStore(B, rows[e], dst);
    LLVMSetAlignment(vst, nt ? (unsigned)VW * 4 : 4);
    if (nt) {
      LLVMMetadataRef one = LLVMValueAsMetadata(LLVMConstInt(cg->g.i32, 1, 0));
      LLVMSetMetadata(vst, LLVMGetMDKindIDInContext(cg->g.C, "nontemporal", 11),
                      LLVMMetadataAsValue(cg->g.C, LLVMMDNodeInContext2(cg->g.C, &one, 1)));
    }
    LLVMBuildBr(B, next);
    LLVMPositionBuilderAtEnd(B, msk);
    cpu_masked_store(k, rows[e], dst, mask);
    LLVMBuildBr(B, next);
    LLVMPositionBuilderAtEnd(B, next);
  }
  LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(cg->g.C, k->fn, "tiled");
  LLVMBuildBr(B, done);
  LLVMPositionBuilderAtEnd(B, done);
  gen_loop_close(k, &ls);
  if (hd >= 0) gen_loop_close(k, &lh);
#undef KN_ROW
  kn_close_nest(k, loops, nl);
  /* stores past the caches are weakly ordered: fenced before the chunk returns, so the kernels
     after it (on any thread, past the caller's parallel-for) see them */
  if (nt) LLVMBuildFence(B, LLVMAtomicOrderingSequentiallyConsistent, 0, "");
  return cpu_kern_end(k, sp.n);
}

/* A multi-output fusion whose leaves differ in dimensions (a reduction and its input, as in
 * softmax): one kernel per group of same-dims leaves, non-reductions first; later kernels
 * read leaves already written instead of recomputing them. */
static bool kn_multi_fusion(CpuCg *cg, HInstr *in) {
  const Shape *s = &in->shape;
  const HInstr *root = in->calls[0]->root;
  int n = s->ntuple;
  bool done[64] = {0};
  for (int pass = 0; pass < 2; pass++) {
    for (int j = 0; j < n; j++) {
      if (done[j] || (pass == 0) == (root->ops[j]->op == OP_REDUCE)) continue;
      const Shape *ls = &s->tuple[j];
      GenKern *k = cpu_kern_begin(cg, in);
      for (int d = 0; d < n; d++)
        if (done[d]) cpu_kern_materialized(k, root->ops[d], kn_leaf_ptr(k, in, d));
      GenLoop loops[HLO_MAX_RANK];
      LLVMValueRef idx[HLO_MAX_RANK];
      KnSplit sp;
      int nl = kn_open_out(k, ls, kn_work(in, ls), &sp, loops, idx);
      k->bind[k->nbind++] = (GenBind){in->calls[0], in, NULL, 0, k->ncache};
      bool group[64] = {0};
      for (int g = j; g < n && !k->failed; g++) {
        if (done[g] || (pass == 0) == (root->ops[g]->op == OP_REDUCE) ||
            !hlo_shape_same_dims(&s->tuple[g], ls))
          continue;
        LLVMValueRef v = gen_value(k, root->ops[g], idx);
        if (v) gen_store_elem(k, kn_leaf_ptr(k, in, g), &s->tuple[g], idx, v);
        group[g] = true;
      }
      k->nbind--;
      kn_close_nest(k, loops, nl);
      if (!cpu_kern_end(k, sp.n)) return false;
      for (int g = 0; g < n; g++)
        done[g] = done[g] || group[g];
    }
  }
  return true;
}

bool cpu_elem_path(const HComp *c, const HInstr *v, const HInstr *to) {
  if (v == to) return true;
  bool used = false;
  for (int i = 0; i < c->ninstrs; i++) {
    const HInstr *u = c->instrs[i];
    for (int q = 0; q < u->nops; q++) {
      if (u->ops[q] != v) continue;
      used = true;
      if (!(hlo_op_flags(u->op) & OPF_ELEM) || !hlo_shape_same_dims(&u->shape, &v->shape))
        return false;
      if (!cpu_elem_path(c, u, to)) return false;
    }
  }
  return used;
}

static bool kn_elem_path(const HComp *c, const HInstr *v) { return cpu_elem_path(c, v, c->root); }

static const HInstr *kn_output_hero(const HInstr *in) {
  if (in->op != OP_FUSION || in->shape.dt == DT_TUPLE || in->shape.rank < 1) return NULL;
  const HInstr *hero = gen_fusion_hero(in);
  if (!hero || hero->shape.dt != in->shape.dt || hero->shape.dt == DT_PRED ||
      !hlo_shape_same_dims(&hero->shape, &in->shape) || !kn_elem_path(in->calls[0], hero))
    return NULL;
  return hero;
}

/* The output dimension to block over in an accumulating kernel: one the streamed operand
 * does not depend on (a dot's last lhs free dim, a convolution's output feature), so R rows
 * share every load of it; -1 when there is none besides the innermost dim. */
static int kn_block_dim(const HInstr *hero) {
  int last = hero->shape.rank - 1, d = -1;
  if (hero->op == OP_DOT) {
    const DotDims *dd = hero->dot;
    int nfree = hero->ops[0]->shape.rank - dd->lhs_batch.n - dd->lhs_contract.n;
    if (nfree > 0) d = dd->lhs_batch.n + nfree - 1;
  } else {
    d = (int)hero->conv->out_feat;
  }
  return d >= 0 && d < last ? d : -1;
}

/* Accumulating kernel for a dot or convolution, alone or as the hero of an output fusion:
 * outer loops over all output dims but the last, the reduction loops, the last dim
 * innermost accumulating into the output row; then the fusion's elementwise epilogue is
 * applied to the finished rows in place. The outer loop of the block dimension steps by R
 * (4, 2 or 1 dividing its extent) and R output rows are accumulated together, so each load
 * of the streamed operand (a dot's rhs row, a convolution's input row) feeds R rows. */
static bool kn_accum_kernel(CpuCg *cg, HInstr *in, const HInstr *hero) {
  const Shape *s = &in->shape;
  int64_t ext[HLO_MAX_RANK * 2];
  int nr = hero->op == OP_DOT ? gen_dot_red_dims(hero, ext) : gen_conv_red_dims(hero, ext);
  int64_t work = hlo_shape_elems(s);
  for (int j = 0; j < nr; j++)
    work *= ext[j] > 0 ? ext[j] : 1;
  GenKern *k = cpu_kern_begin(cg, in);
  bool fused = hero != in;
  if (fused) k->bind[k->nbind++] = (GenBind){in->calls[0], in, NULL, 0, 0};
  KnSplit sp = kn_split(cg, s, work);
  int bd = kn_block_dim(hero);
  int R = 1;
  if (bd >= 0) R = s->dims[bd] % 4 == 0 ? 4 : s->dims[bd] % 2 == 0 ? 2 : 1;
  if (R > 1 && sp.dim == bd) { /* chunks hold whole blocks */
    sp.size = (sp.size + R - 1) / R * R;
    sp.n = (s->dims[bd] + sp.size - 1) / sp.size;
  }
  DType t = s->dt;
  GenLoop loops[HLO_MAX_RANK], red_loops[HLO_MAX_RANK * 2], jl;
  LLVMValueRef idx[HLO_MAX_RANK], red[HLO_MAX_RANK * 2];
  int last = s->rank - 1, nl = 0;
  for (int d = 0; d < last; d++) {
    if (s->dims[d] == 1 && d != sp.dim) {
      idx[d] = gen_i64(k, 0);
      continue;
    }
    LLVMValueRef lo, hi;
    kn_range(k, s, &sp, d, &lo, &hi);
    idx[d] = gen_loop_open(k, &loops[nl], lo, hi);
    if (d == bd) loops[nl].step = R;
    nl++;
  }
  LLVMValueRef rows[4][HLO_MAX_RANK];
  int nrow = bd >= 0 ? R : 1;
  for (int r = 0; r < nrow; r++) {
    memcpy(rows[r], idx, sizeof(LLVMValueRef) * (size_t)s->rank);
    if (bd >= 0 && r > 0) rows[r][bd] = LLVMBuildNSWAdd(k->B, idx[bd], gen_i64(k, r), "");
  }
  LLVMValueRef lo, hi;
  kn_range(k, s, &sp, last, &lo, &hi);
  LLVMValueRef out = cpu_buffer(k, in);
  /* zero the output rows */
  LLVMValueRef jv = gen_loop_open(k, &jl, lo, hi);
  LLVMValueRef zero = gen_zero(k, t);
  for (int r = 0; r < nrow; r++) {
    rows[r][last] = jv;
    gen_store_elem(k, out, s, rows[r], zero);
  }
  gen_loop_close(k, &jl);
  for (int j = 0; j < nr; j++)
    red[j] = gen_loop_open(k, &red_loops[j], gen_i64(k, 0), gen_i64(k, ext[j]));
  jv = gen_loop_open(k, &jl, lo, hi);
  for (int r = 0; r < nrow && !k->failed; r++) {
    rows[r][last] = jv;
    LLVMValueRef term = hero->op == OP_DOT ? gen_dot_term(k, hero, rows[r], red)
                                           : gen_conv_term(k, hero, rows[r], red);
    if (term) {
      LLVMValueRef cur = gen_load_elem(k, out, s, rows[r]);
      gen_store_elem(k, out, s, rows[r], gen_add(k, t, cur, term));
    }
  }
  gen_loop_close(k, &jl);
  for (int j = nr - 1; j >= 0; j--)
    gen_loop_close(k, &red_loops[j]);
  if (fused && !k->failed) {
    cpu_kern_materialized(k, hero, out);
    jv = gen_loop_open(k, &jl, lo, hi);
    for (int r = 0; r < nrow && !k->failed; r++) {
      rows[r][last] = jv;
      LLVMValueRef v = gen_value(k, in->calls[0]->root, rows[r]);
      if (v) gen_store_elem(k, out, s, rows[r], v);
    }
    gen_loop_close(k, &jl);
  }
  kn_close_nest(k, loops, nl);
  return cpu_kern_end(k, sp.n);
}

/* Scatter: copy the operand, then combine every update in order. */
/* A reduce over dimensions that leave the operand's minor dimension in place (a column
 * reduction: a global pool over NHWC, batch statistics), computed by the kernel of entry
 * instruction in: the reduce itself or the hero of a fusion whose root is elementwise in it.
 * NULL when the kernel is not of that form. */
static const HInstr *kn_column_reduce(const HInstr *in) {
  const HInstr *r = in;
  const HComp *c = NULL;
  if (in->op == OP_FUSION) {
    c = in->calls[0];
    r = NULL;
    for (int i = 0; i < c->ninstrs; i++)
      if (c->instrs[i]->op == OP_REDUCE) {
        if (r) return NULL;
        r = c->instrs[i];
      }
    if (!r || !kn_elem_path(c, r)) return NULL;
  }
  if (r->op != OP_REDUCE || r->nops != 2 || r->shape.dt == DT_TUPLE || r->shape.rank < 1)
    return NULL;
  if (r->shape.dt != in->shape.dt || in->shape.dt == DT_TUPLE ||
      !hlo_shape_same_dims(&r->shape, &in->shape))
    return NULL;
  const Shape *os = &r->ops[0]->shape;
  int minor = os->rank - 1;
  if (hlo_ilist_has(&r->dims, minor)) return NULL;
  if (r->dims.n == 0 || os->dims[minor] < 8) return NULL;
  return r;
}

/* Column reduction: the output row (the kept minor dimension) starts at the init value, then
 * for every reduced index (outer loops) the whole row is combined with the operand's row
 * (inner loop, contiguous, vectorized), instead of one strided reduction per output element.
 * A fusion's elementwise epilogue is applied to the finished row in place. */
static bool kn_column_kernel(CpuCg *cg, HInstr *in, const HInstr *r) {
  const Shape *s = &in->shape, *os = &r->ops[0]->shape;
  GenKern *k = cpu_kern_begin(cg, in);
  bool fused = r != in;
  if (fused) k->bind[k->nbind++] = (GenBind){in->calls[0], in, NULL, 0, 0};
  KnSplit sp = kn_split(cg, s, hlo_shape_elems(os));
  GenLoop loops[HLO_MAX_RANK], red[HLO_MAX_RANK], jl;
  LLVMValueRef idx[HLO_MAX_RANK], full[HLO_MAX_RANK];
  int last = s->rank - 1;
  int nl = kn_open_nest(k, s, &sp, last, loops, idx);
  LLVMValueRef lo, hi;
  kn_range(k, s, &sp, last, &lo, &hi);
  LLVMValueRef out = cpu_buffer(k, in);
  LLVMValueRef init = gen_value(k, r->ops[1], NULL);
  idx[last] = gen_loop_open(k, &jl, lo, hi);
  if (init) gen_store_elem(k, out, s, idx, init);
  gen_loop_close(k, &jl);
  bool isred[HLO_MAX_RANK] = {0};
  for (int j = 0; j < r->dims.n; j++)
    isred[r->dims.v[j]] = true;
  int nr = 0;
  for (int d = 0, o = 0; d < os->rank; d++) {
    if (isred[d])
      full[d] = gen_loop_open(k, &red[nr++], gen_i64(k, 0), gen_i64(k, os->dims[d]));
    else
      full[d] = o == last ? NULL : idx[o], o++;
  }
  idx[last] = gen_loop_open(k, &jl, lo, hi);
  full[os->rank - 1] = idx[last];
  LLVMValueRef v = gen_value(k, r->ops[0], full);
  if (v && !k->failed) {
    LLVMValueRef args[2] = {gen_load_elem(k, out, s, idx), v}, res[1];
    if (gen_scalar_comp(k, r->calls[0], args, 2, res)) gen_store_elem(k, out, s, idx, res[0]);
  }
  gen_loop_close(k, &jl);
  for (int j = nr - 1; j >= 0; j--)
    gen_loop_close(k, &red[j]);
  if (fused && !k->failed) {
    cpu_kern_materialized(k, r, out);
    idx[last] = gen_loop_open(k, &jl, lo, hi);
    LLVMValueRef e = gen_value(k, in->calls[0]->root, idx);
    if (e) gen_store_elem(k, out, s, idx, e);
    gen_loop_close(k, &jl);
  }
  kn_close_nest(k, loops, nl);
  return cpu_kern_end(k, sp.n);
}

/* ------------------------------------------------------------------ split column reductions */

#define KN_MAX_RED 16 /* reductions sharing one pass */

/* Column reductions computed in one pass over their common operand shape: the reduce itself,
 * or every reduce of a fusion (batch-norm statistics: several sums over the same [N,H,W,C]
 * data, results tuple-shaped or reshaped and scaled). */
typedef struct KnColRed {
  int n;                       /* reductions */
  const HInstr *r[KN_MAX_RED]; /* them */
  int nleaves;                 /* leaves written (tuple elements, or the one result) */
  const HInstr *leaf[64];      /* the value of each leaf */
  const Shape *os;             /* their operand shape */
  int64_t out_elems;           /* elements of each reduction's result */
} KnColRed;

/* Whether v (inside computation c) depends on a reduce. */
static bool kn_uses_reduce(const HInstr *v, int depth) {
  if (depth > 256) return true; /* too deep to tell: treat as dependent */
  if (v->op == OP_REDUCE) return true;
  for (int q = 0; q < v->nops; q++)
    if (kn_uses_reduce(v->ops[q], depth + 1)) return true;
  return false;
}

static bool kn_colred_match(const HInstr *in, KnColRed *cr) {
  memset(cr, 0, sizeof *cr);
  if (in->op == OP_REDUCE) {
    if (in->shape.dt == DT_TUPLE) return false;
    cr->r[cr->n++] = in;
    cr->leaf[cr->nleaves++] = in;
  } else if (in->op == OP_FUSION) {
    const HComp *c = in->calls[0];
    for (int i = 0; i < c->ninstrs; i++)
      if (c->instrs[i]->op == OP_REDUCE) {
        if (cr->n == KN_MAX_RED) return false;
        cr->r[cr->n++] = c->instrs[i];
      }
    if (cr->n == 0) return false;
    const HInstr *root = c->root;
    if (root->op == OP_TUPLE) {
      if (root->nops > 64 || in->shape.dt != DT_TUPLE || in->shape.ntuple != root->nops)
        return false;
      for (int j = 0; j < root->nops; j++)
        cr->leaf[cr->nleaves++] = root->ops[j];
    } else {
      if (in->shape.dt == DT_TUPLE) return false;
      cr->leaf[cr->nleaves++] = root;
    }
  } else {
    return false;
  }
  const HInstr *r0 = cr->r[0];
  const Shape *os = &r0->ops[0]->shape;
  if (os->rank < 2) return false;
  int minor = os->rank - 1;
  for (int i = 0; i < cr->n; i++) {
    const HInstr *r = cr->r[i];
    if (r->nops != 2 || r->shape.dt == DT_TUPLE || r->shape.dt == DT_PRED || r->ncalls != 1)
      return false;
    if (!hlo_shape_same_dims(&r->ops[0]->shape, os) || r->dims.n != r0->dims.n || r->dims.n == 0)
      return false;
    for (int j = 0; j < r->dims.n; j++)
      if (!hlo_ilist_has(&r0->dims, r->dims.v[j]) || r->dims.v[j] == minor) return false;
    /* a reduction whose operand needs another one (variance from a mean computed in the
       same fusion) is not one pass */
    if (kn_uses_reduce(r->ops[0], 0) || kn_uses_reduce(r->ops[1], 0)) return false;
  }
  if (os->dims[minor] < 8) return false;
  cr->os = os;
  cr->out_elems = hlo_shape_elems(&r0->shape);
  for (int j = 0; j < cr->nleaves; j++) {
    const Shape *ls = &cr->leaf[j]->shape;
    if (ls->dt == DT_TUPLE || hlo_shape_elems(ls) > cr->out_elems) return false;
  }
  return true;
}

/* Column reductions split over their operand's outer dimension: task 1 runs P chunks, each
 * reducing a slab of the operand into its own partial results (private scratch) with the
 * output row (the kept minor dimension) as the contiguous, vectorized inner loop and every
 * reduction of the fusion fed from the same generated operand values; task 2 combines the P
 * partials with the reducer (the init value must be the reducer's identity, as XLA assumes
 * for its parallel reductions), then writes each leaf from the materialized results. When
 * the split dimension is kept (a per-image pool), chunks own disjoint results and there are
 * no partials to combine. false: not of that form or not worth it (cr->n == 0), or a located
 * error. */
static int kn_colred_kernel(CpuCg *cg, HInstr *in) {
  KnColRed cr;
  if (!kn_colred_match(in, &cr)) return 0;
  const Shape *os = cr.os;
  int minor = os->rank - 1;
  const HInstr *r0 = cr.r[0];
  bool red[HLO_MAX_RANK] = {0};
  for (int j = 0; j < r0->dims.n; j++)
    red[r0->dims.v[j]] = true;
  int64_t total = hlo_shape_elems(os);
  int64_t min = cg->o->par_min_elems > 0 ? cg->o->par_min_elems : 32768;
  int sd = -1;
  for (int d = 0; d < minor && sd < 0; d++)
    if (os->dims[d] > 1) sd = d;
  int64_t P = 1;
  if (sd >= 0 && total >= min) P = os->dims[sd] < 16 ? os->dims[sd] : 16;
  bool partial = P > 1 && red[sd];
  /* partial results cost P * out_elems per reduction: only for real reductions */
  if (partial && cr.out_elems * P * 4 > total) return 0;
  if (!partial && P > 1) P = os->dims[sd] < 64 ? os->dims[sd] : 64;
  int64_t csize = P > 1 ? (os->dims[sd] + P - 1) / P : 0;
  if (P > 1) P = (os->dims[sd] + csize - 1) / csize;
  /* scratch: per reduction its results, then (partial) per chunk its partials */
  int64_t roff[KN_MAX_RED], res_bytes = 0;
  for (int i = 0; i < cr.n; i++) {
    roff[i] = res_bytes;
    res_bytes += memplan_align(cr.out_elems * (int64_t)hlo_dtype_size(cr.r[i]->shape.dt));
  }
  int64_t need = res_bytes * (partial ? P + 1 : 1);
  if (need > cg->extra_temp) cg->extra_temp = need;
  bool fused = in->op == OP_FUSION;

  /* task 1: the reductions of chunk c into partials (or the shared results) */
  GenKern *k = cpu_kern_begin(cg, in);
  LLVMBuilderRef B = k->B;
  if (fused) k->bind[k->nbind++] = (GenBind){in->calls[0], in, NULL, 0, 0};
  LLVMValueRef scratch = cpu_slot(k, (CpuSlot){CPU_SLOT_TEMP, NULL, NULL, cg->temp_base});
  LLVMValueRef base = scratch;
  if (partial) {
    LLVMValueRef off = LLVMBuildNSWMul(B, LLVMBuildNSWAdd(B, cpu_kern(k)->chunk, gen_i64(k, 1), ""),
                                       gen_i64(k, res_bytes), "");
    base = LLVMBuildInBoundsGEP2(B, cg->g.i8, scratch, &off, 1, "");
  }
  LLVMValueRef acc[KN_MAX_RED], init[KN_MAX_RED];
  for (int i = 0; i < cr.n; i++) {
    LLVMValueRef o = gen_i64(k, roff[i]);
    acc[i] = LLVMBuildInBoundsGEP2(B, cg->g.i8, base, &o, 1, "");
    init[i] = gen_value(k, cr.r[i]->ops[1], NULL);
    if (!init[i]) {
      cpu_kern_end(k, 1);
      return -1;
    }
  }
  LLVMValueRef lo = gen_i64(k, 0), hi = gen_i64(k, 0);
  if (P > 1) {
    lo = LLVMBuildNSWMul(B, cpu_kern(k)->chunk, gen_i64(k, csize), "");
    hi = LLVMBuildNSWAdd(B, lo, gen_i64(k, csize), "");
    LLVMValueRef D = gen_i64(k, os->dims[sd]);
    hi = gen_smin(k, hi, D);
  }
  /* the result index of operand index full[]: the kept dims in order */
  const Shape *rs = &r0->shape;
  GenLoop loops[HLO_MAX_RANK];
  LLVMValueRef full[HLO_MAX_RANK], ridx[HLO_MAX_RANK];
  int nl = 0;
  /* init: partials whole; shared results only in this chunk's range of the kept split dim */
  for (int pass = 0; pass < 2; pass++) {
    nl = 0;
    for (int d = 0, o = 0; d < minor; d++) {
      if (pass == 0 && red[d]) continue;
      LLVMValueRef l = gen_i64(k, 0), h = gen_i64(k, os->dims[d]);
      if (d == sd && P > 1 && !(pass == 0 && partial)) l = lo, h = hi;
      if (os->dims[d] == 1)
        full[d] = gen_i64(k, 0);
      else
        full[d] = gen_loop_open(k, &loops[nl++], l, h);
      if (!red[d]) ridx[o++] = full[d];
    }
    LLVMValueRef j = gen_loop_open(k, &loops[nl++], gen_i64(k, 0), gen_i64(k, os->dims[minor]));
    full[minor] = j;
    ridx[rs->rank - 1] = j;
    for (int i = 0; i < cr.n && !k->failed; i++) {
      const Shape *s = &cr.r[i]->shape;
      if (pass == 0) {
        gen_store_elem(k, acc[i], s, ridx, init[i]);
        continue;
      }
      LLVMValueRef v = gen_value(k, cr.r[i]->ops[0], full);
      if (!v) break;
      LLVMValueRef args[2] = {gen_load_elem(k, acc[i], s, ridx), v}, res[1];
      if (gen_scalar_comp(k, cr.r[i]->calls[0], args, 2, res))
        gen_store_elem(k, acc[i], s, ridx, res[0]);
    }
    kn_close_nest(k, loops, nl);
  }
  if (!cpu_kern_end(k, P)) return -1;

  /* task 2: combine the partials, then the leaves from the materialized results */
  k = cpu_kern_begin(cg, in);
  B = k->B;
  scratch = cpu_slot(k, (CpuSlot){CPU_SLOT_TEMP, NULL, NULL, cg->temp_base});
  LLVMValueRef rp[KN_MAX_RED];
  for (int i = 0; i < cr.n; i++) {
    LLVMValueRef o = gen_i64(k, roff[i]);
    rp[i] = LLVMBuildInBoundsGEP2(B, cg->g.i8, scratch, &o, 1, "");
  }
  if (partial) {
    /* chunk 0's partials are copied, the others combined into them in chunk order: one
       rolled loop over the chunks (unrolled, P x reductions vector loops made this small
       kernel one of the costliest to compile), all reductions in its vectorized inner loop */
    Shape flat = hlo_shape_array(DT_F32, 1, &cr.out_elems);
    for (int pass = 0; pass < 2 && !k->failed; pass++) {
      GenLoop lc, le;
      LLVMValueRef off = gen_i64(k, res_bytes);
      if (pass == 1) {
        LLVMValueRef c = gen_loop_open(k, &lc, gen_i64(k, 2), gen_i64(k, P + 1));
        off = LLVMBuildNSWMul(B, c, off, "");
      }
      LLVMValueRef e = gen_loop_open(k, &le, gen_i64(k, 0), gen_i64(k, cr.out_elems));
      for (int i = 0; i < cr.n && !k->failed; i++) {
        flat.dt = cr.r[i]->shape.dt;
        LLVMValueRef o = LLVMBuildNSWAdd(B, off, gen_i64(k, roff[i]), "");
        LLVMValueRef pp = LLVMBuildInBoundsGEP2(B, cg->g.i8, scratch, &o, 1, "");
        LLVMValueRef pv = gen_load_elem(k, pp, &flat, &e), res[1] = {pv};
        LLVMValueRef args[2] = {pass ? gen_load_elem(k, rp[i], &flat, &e) : NULL, pv};
        if (!pass || gen_scalar_comp(k, cr.r[i]->calls[0], args, 2, res))
          gen_store_elem(k, rp[i], &flat, &e, res[0]);
      }
      gen_loop_close(k, &le);
      if (pass == 1) {
        gen_loop_close(k, &lc);
        cpu_loop_hint(k, lc.latch_br, "llvm.loop.unroll.disable", NULL);
      }
    }
  }
  for (int i = 0; i < cr.n; i++)
    cpu_kern_materialized(k, cr.r[i], rp[i]);
  if (fused) k->bind[k->nbind++] = (GenBind){in->calls[0], in, NULL, 0, k->ncache};
  KnSplit none = {-1, 0, 1};
  for (int j = 0; j < cr.nleaves && !k->failed; j++) {
    const Shape *ls = &cr.leaf[j]->shape;
    LLVMValueRef idx[HLO_MAX_RANK];
    nl = kn_open_nest(k, ls, &none, ls->rank, loops, idx);
    LLVMValueRef v = gen_value(k, cr.leaf[j], idx);
    LLVMValueRef dst = in->shape.dt == DT_TUPLE ? kn_leaf_ptr(k, in, j) : cpu_buffer(k, in);
    if (v) gen_store_elem(k, dst, ls, idx, v);
    kn_close_nest(k, loops, nl);
  }
  return cpu_kern_end(k, 1) ? 1 : -1;
}

/* Scatter, serially: the output set to the operand, then every update element combined into
 * its place (gen_scatter_update, gen_scatter_combine). */
static bool kn_scatter_kernel(CpuCg *cg, HInstr *in) {
  int n = gen_scatter_check(in, cg->g.err, "CPU");
  if (!n) return false;
  const Shape *s = n > 1 ? &in->shape.tuple[0] : &in->shape, *us = &in->ops[n + 1]->shape;
  GenKern *k = cpu_kern_begin(cg, in);
  LLVMBuilderRef B = k->B;
  KnSplit none = {-1, 0, 1};
  GenLoop loops[HLO_MAX_RANK];
  LLVMValueRef idx[HLO_MAX_RANK], out[16];
  for (int j = 0; j < n; j++)
    out[j] = n > 1 ? kn_leaf_ptr(k, in, j) : cpu_buffer(k, in);
  int nl = kn_open_nest(k, s, &none, s->rank, loops, idx);
  for (int j = 0; j < n && !k->failed; j++) {
    LLVMValueRef v = gen_value(k, in->ops[j], idx);
    if (v) gen_store_elem(k, out[j], n > 1 ? &in->shape.tuple[j] : &in->shape, idx, v);
  }
  kn_close_nest(k, loops, nl);
  if (k->failed) return cpu_kern_end(k, 1);
  LLVMValueRef ui[HLO_MAX_RANK], oi[HLO_MAX_RANK], ok;
  nl = kn_open_nest(k, us, &none, us->rank, loops, ui);
  if (!gen_scatter_update(k, in, ui, oi, &ok)) return cpu_kern_end(k, 1);
  LLVMBasicBlockRef doit = LLVMAppendBasicBlockInContext(cg->g.C, k->fn, "upd");
  LLVMBasicBlockRef skip = LLVMAppendBasicBlockInContext(cg->g.C, k->fn, "skip");
  LLVMBuildCondBr(B, ok, doit, skip);
  LLVMPositionBuilderAtEnd(B, doit);
  int mark = k->ncache;
  gen_scatter_combine(k, in, out, oi, ui);
  k->ncache = mark;
  LLVMBuildBr(B, skip);
  LLVMPositionBuilderAtEnd(B, skip);
  kn_close_nest(k, loops, nl);
  return cpu_kern_end(k, 1);
}

/* A lone dynamic-update-slice computed in place of its operand (a scan's outputs, a KV cache):
 * only the update's elements, written where they go (the elementwise kernel would read and
 * write every element of the operand, a whole [T, ...] output per trip of a scan); 0 when it
 * is not in place (the elementwise kernel then copies and updates in one pass). */
static int kn_dus_kernel(CpuCg *cg, HInstr *in) {
  if (in->op != OP_DYNAMIC_UPDATE_SLICE || !hlo_shape_elems(&in->ops[1]->shape)) return 0;
  int64_t o0 = 0, o1 = 0;
  if (memplan_base(&cg->plan, in->idx, &o1) != memplan_base(&cg->plan, in->ops[0]->idx, &o0) ||
      o0 != o1)
    return 0;
  GenKern *k = cpu_kern_begin(cg, in);
  const Shape *us = &in->ops[1]->shape;
  KnSplit none = {-1, 0, 1};
  GenLoop loops[HLO_MAX_RANK];
  LLVMValueRef ui[HLO_MAX_RANK], oi[HLO_MAX_RANK];
  int nl = kn_open_nest(k, us, &none, us->rank, loops, ui);
  LLVMValueRef v = gen_dus_index(k, in, ui, oi) ? gen_value(k, in->ops[1], ui) : NULL;
  if (v) gen_store_elem(k, cpu_buffer(k, in), &in->shape, oi, v);
  kn_close_nest(k, loops, nl);
  return cpu_kern_end(k, 1) ? 1 : -1;
}

void cpu_note_loop_product(CpuCg *cg, const char *name) {
  if (cg->products[CPU_PROD_LOOPS] < 4) cg->loop_products[cg->products[CPU_PROD_LOOPS]] = name;
  cg->products[CPU_PROD_LOOPS]++;
}

bool cpu_emit_instr(CpuCg *cg, HInstr *in) {
  const MemBuf *b = &cg->plan.bufs[in->idx];
  bool computes =
      b->kind == MEM_TEMP || b->kind == MEM_RESULT || (b->kind == MEM_ALIAS && !b->view);
  if (!computes) return true;
  if (hlo_shape_elems(&in->shape) == 0 && in->shape.dt != DT_TUPLE) return true;
  int at = cpu_attention_kernel(cg, in);
  if (at != 0) return at > 0;
  const HInstr *hero = NULL;
  if ((in->op == OP_DOT || in->op == OP_CONVOLUTION) && in->shape.rank >= 1 &&
      in->shape.dt != DT_PRED)
    hero = in;
  else
    hero = kn_output_hero(in);
  if (hero) {
    int g = cpu_gemm_kernel(cg, in, hero);
    if (g != 0) return g > 0;
    cpu_note_loop_product(cg, hero->name);
    /* (a product accumulating in a wider type than its result, bf16 or fp8 say, is elemental,
       its sum kept in f32 and rounded once: the accumulating kernel adds into the result's
       own storage) */
    if (gen_dot_acc_type(hero) == hero->shape.dt) return kn_accum_kernel(cg, in, hero);
  }
  /* a product whose epilogue a reduction reduces (else the reduction's generic kernels) */
  if ((hero = cpu_gemm_reduce_hero(in))) {
    int g = cpu_gemm_kernel(cg, in, hero);
    if (g != 0) return g > 0;
  }
  if (in->op == OP_SCATTER) return kn_scatter_kernel(cg, in);
  if (in->op == OP_SORT) return cpu_sort_kernel(cg, in);
  if (in->op == OP_FFT) return cpu_fft_kernel(cg, in);
  if (in->op == OP_SELECT_AND_SCATTER) return cpu_select_scatter_kernel(cg, in);
  int du = kn_dus_kernel(cg, in);
  if (du != 0) return du > 0;
  if (b->kind != MEM_ALIAS) {
    int cr = kn_colred_kernel(cg, in);
    if (cr != 0) return cr > 0;
  }
  /* (not when computed in place of an operand: the row is written before the epilogue reads) */
  const HInstr *col = b->kind == MEM_ALIAS ? NULL : kn_column_reduce(in);
  if (col) return kn_column_kernel(cg, in, col);
  if (in->op == OP_FUSION && in->shape.dt == DT_TUPLE && in->calls[0]->root->op == OP_TUPLE) {
    for (int j = 1; j < in->shape.ntuple; j++)
      if (!hlo_shape_same_dims(&in->shape.tuple[j], &in->shape.tuple[0]))
        return kn_multi_fusion(cg, in);
  }
  if (b->kind != MEM_ALIAS) {
    int tb = kn_transposed_dim(in);
    if (tb >= 0) return kn_transpose_kernel(cg, in, tb);
  }
  return kn_loop_kernel(cg, in);
}
