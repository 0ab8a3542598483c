/* targets/cpu/cpu_kernel.c: one kernel function per computed entry instruction.
 *
 * Every entry instruction that computes a value (a fusion, or a lone instruction treated as a
 * fusion of one) becomes an internal function `void NAME_kN(ctx, i64 chunk)`. The context
 * holds the caller's args[], results[] and scratch pointer; buffer pointers are derived from
 * the memory plan once, in the function's entry block. Kernel shapes:
 *   - loop kernel: a loop nest over the output shape storing cpu_gen(root, index) (for a
 *     tuple-shaped root, every leaf at the same index);
 *   - accumulating kernel (dot, convolution): outer loops over all output dims but the last,
 *     then the reduction loops, then the last output dim innermost, accumulating into the
 *     output row (i-k-j order for a matrix product), so the innermost loop streams through
 *     contiguous memory and vectorizes;
 *   - scatter: the operand is copied into the output, then the updates are combined in order
 *     (serially, as XLA's order of updates is sequential).
 * Parallelism: the first output dimension of extent > 1 is split into chunks (at most 64);
 * chunk c covers a contiguous range of it. Small nests run as one chunk. */
#include "cpu_impl.h"

#include <string.h>

LLVMValueRef cpu_i64(CpuKern *k, int64_t v) { return LLVMConstInt(k->cg->i64, (unsigned long long)v, 1); }

/* ------------------------------------------------------------------ loops */

LLVMValueRef cpu_loop_open(CpuKern *k, CpuLoop *l, LLVMValueRef lo, LLVMValueRef hi) {
  LLVMBuilderRef B = k->B;
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(B);
  l->header = LLVMAppendBasicBlockInContext(k->cg->C, k->fn, "loop");
  LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(k->cg->C, k->fn, "body");
  l->exit = LLVMAppendBasicBlockInContext(k->cg->C, k->fn, "exit");
  l->hi = hi;
  l->cache_mark = k->ncache;
  LLVMBuildBr(B, l->header);
  LLVMPositionBuilderAtEnd(B, l->header);
  l->iv = LLVMBuildPhi(B, k->cg->i64, "i");
  LLVMAddIncoming(l->iv, &lo, &pre, 1);
  LLVMBuildCondBr(B, LLVMBuildICmp(B, LLVMIntSLT, l->iv, hi, ""), body, l->exit);
  LLVMPositionBuilderAtEnd(B, body);
  return l->iv;
}

void cpu_loop_close(CpuKern *k, CpuLoop *l) {
  LLVMBuilderRef B = k->B;
  LLVMValueRef next = LLVMBuildNSWAdd(B, l->iv, cpu_i64(k, 1), "");
  LLVMBasicBlockRef latch = LLVMGetInsertBlock(B);
  LLVMBuildBr(B, l->header);
  LLVMAddIncoming(l->iv, &next, &latch, 1);
  LLVMPositionBuilderAtEnd(B, l->exit);
  k->ncache = l->cache_mark; /* values made inside the loop do not dominate its exit */
}

/* ------------------------------------------------------------------ buffers */

LLVMValueRef cpu_alloca(CpuKern *k, LLVMTypeRef t) {
  LLVMBasicBlockRef cur = LLVMGetInsertBlock(k->B);
  LLVMPositionBuilderBefore(k->B, k->entry_br);
  LLVMValueRef a = LLVMBuildAlloca(k->B, t, "acc");
  LLVMPositionBuilderAtEnd(k->B, cur);
  return a;
}

static LLVMValueRef kn_ctx_field(CpuKern *k, int f) {
  LLVMValueRef p = LLVMBuildStructGEP2(k->B, k->cg->ctx_ty, k->ctx, (unsigned)f, "");
  return LLVMBuildLoad2(k->B, k->cg->ptr, p, "");
}

static LLVMValueRef kn_ptr_at(CpuKern *k, LLVMValueRef arr, int64_t i) {
  LLVMValueRef ix = cpu_i64(k, i);
  LLVMValueRef p = LLVMBuildInBoundsGEP2(k->B, k->cg->ptr, arr, &ix, 1, "");
  LLVMValueRef v = LLVMBuildLoad2(k->B, k->cg->ptr, p, "");
  return v;
}

static LLVMValueRef kn_byte_off(CpuKern *k, LLVMValueRef p, int64_t off) {
  if (off == 0) return p;
  LLVMValueRef ix = cpu_i64(k, off);
  return LLVMBuildInBoundsGEP2(k->B, k->cg->i8, p, &ix, 1, "");
}

LLVMValueRef cpu_buffer(CpuKern *k, const HInstr *in) {
  CpuCg *cg = k->cg;
  HLO_ASSERT(in->parent == cg->entry);
  if (k->bufs[in->idx]) return k->bufs[in->idx];
  LLVMBasicBlockRef cur = LLVMGetInsertBlock(k->B);
  LLVMPositionBuilderBefore(k->B, k->entry_br);
  int64_t off = 0;
  int b = memplan_base(&cg->plan, in->idx, &off);
  const MemBuf *mb = &cg->plan.bufs[b];
  LLVMValueRef p = NULL;
  switch (mb->kind) {
  case MEM_PARAM: p = kn_ptr_at(k, kn_ctx_field(k, 0), mb->param); break;
  case MEM_RESULT: p = kn_ptr_at(k, kn_ctx_field(k, 1), mb->result); break;
  case MEM_TEMP: p = kn_byte_off(k, kn_ctx_field(k, 2), mb->offset); break;
  case MEM_CONST: p = cpu_const_global(cg, cg->entry->instrs[b]); break;
  case MEM_NONE:
  case MEM_ALIAS: HLO_ASSERT(!"value without storage"); break;
  }
  p = kn_byte_off(k, p, off);
  LLVMPositionBuilderAtEnd(k->B, cur);
  k->bufs[in->idx] = p;
  return p;
}

static LLVMValueRef kn_linear(CpuKern *k, const Shape *s, LLVMValueRef *idx) {
  /* the root index passed down unchanged (elementwise ops) to a same-dims value: its
     linear form is known, and keeps the access contiguous for the vectorizer */
  if (idx && idx == k->lin_idx && hlo_shape_same_dims(s, k->lin_shape)) return k->lin;
  int64_t st[HLO_MAX_RANK];
  hlo_shape_strides(s, st);
  LLVMValueRef lin = NULL;
  for (int d = 0; d < s->rank; d++) {
    if (s->dims[d] == 1) continue;
    LLVMValueRef t = st[d] == 1 ? idx[d] : LLVMBuildNSWMul(k->B, idx[d], cpu_i64(k, st[d]), "");
    lin = lin ? LLVMBuildNSWAdd(k->B, lin, t, "") : t;
  }
  return lin ? lin : cpu_i64(k, 0);
}

LLVMValueRef cpu_load_elem(CpuKern *k, LLVMValueRef p, const Shape *s, LLVMValueRef *idx) {
  LLVMTypeRef mt = cpu_mem_type(k->cg, s->dt);
  LLVMValueRef lin = kn_linear(k, s, idx);
  LLVMValueRef q = LLVMBuildInBoundsGEP2(k->B, mt, p, &lin, 1, "");
  LLVMValueRef v = LLVMBuildLoad2(k->B, mt, q, "");
  LLVMSetAlignment(v, (unsigned)hlo_dtype_size(s->dt));
  if (s->dt == DT_PRED) v = LLVMBuildICmp(k->B, LLVMIntNE, v, LLVMConstInt(k->cg->i8, 0, 0), "");
  return v;
}

void cpu_store_elem(CpuKern *k, LLVMValueRef p, const Shape *s, LLVMValueRef *idx, LLVMValueRef v) {
  LLVMTypeRef mt = cpu_mem_type(k->cg, s->dt);
  LLVMValueRef lin = kn_linear(k, s, idx);
  LLVMValueRef q = LLVMBuildInBoundsGEP2(k->B, mt, p, &lin, 1, "");
  if (s->dt == DT_PRED) v = LLVMBuildZExt(k->B, v, k->cg->i8, "");
  LLVMValueRef st = LLVMBuildStore(k->B, v, q);
  LLVMSetAlignment(st, (unsigned)hlo_dtype_size(s->dt));
}

/* ------------------------------------------------------------------ kernel functions */

static CpuKern *kn_begin(CpuCg *cg, const HInstr *root) {
  CpuKern *k = hlo_arena_alloc(cg->scratch, sizeof *k);
  k->cg = cg;
  k->B = cg->B;
  k->root = root;
  k->bufs = hlo_arena_alloc(cg->scratch, sizeof(LLVMValueRef) * (size_t)(cg->entry->ninstrs + 1));
  char name[512];
  snprintf(name, sizeof name, "%s_k%d", cg->o->name, cg->ntasks);
  k->fn = LLVMAddFunction(cg->M, name, cg->task_ty);
  LLVMSetLinkage(k->fn, LLVMInternalLinkage);
  /* kernels stay separate functions: each is optimized on its own (keeps compile time
     linear in the module size) and is what the parallel-for runs anyway */
  unsigned ni = LLVMGetEnumAttributeKindForName("noinline", 8);
  LLVMAddAttributeAtIndex(k->fn, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(cg->C, ni, 0));
  k->ctx = LLVMGetParam(k->fn, 0);
  k->chunk = LLVMGetParam(k->fn, 1);
  k->entry = LLVMAppendBasicBlockInContext(cg->C, k->fn, "entry");
  LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(cg->C, k->fn, "start");
  LLVMPositionBuilderAtEnd(k->B, k->entry);
  k->entry_br = LLVMBuildBr(k->B, body);
  LLVMPositionBuilderAtEnd(k->B, body);
  return k;
}

static bool kn_end(CpuKern *k, int64_t nchunks) {
  LLVMBuildRetVoid(k->B);
  if (k->failed) return false;
  CpuCg *cg = k->cg;
  if (cg->ntasks == cg->task_cap) {
    int nc = cg->task_cap ? cg->task_cap * 2 : 64;
    CpuTask *t = hlo_arena_alloc(cg->scratch, sizeof *t * (size_t)nc);
    if (cg->ntasks) memcpy(t, cg->tasks, sizeof *t * (size_t)cg->ntasks);
    cg->tasks = t;
    cg->task_cap = nc;
  }
  cg->tasks[cg->ntasks++] = (CpuTask){k->fn, nchunks};
  return true;
}

/* How a loop nest over shape s is split: the dimension split (-1: none), chunk size and
 * chunk count. */
typedef struct KnSplit {
  int dim;        /* split dimension, -1 when not split */
  int64_t size;   /* chunk extent along dim */
  int64_t n;      /* number of chunks */
} KnSplit;

static KnSplit kn_split(CpuCg *cg, const Shape *s, int64_t work) {
  KnSplit sp = {-1, 0, 1};
  int64_t min = cg->o->par_min_elems > 0 ? cg->o->par_min_elems : 32768;
  if (work < min) return sp;
  for (int d = 0; d < s->rank; d++) {
    if (s->dims[d] <= 1) continue;
    int64_t D = s->dims[d];
    int64_t want = D < 64 ? D : 64;
    sp.dim = d;
    sp.size = (D + want - 1) / want;
    sp.n = (D + sp.size - 1) / sp.size;
    if (sp.n <= 1) sp.dim = -1, sp.n = 1;
    break;
  }
  return sp;
}

/* Range of dimension d in the current chunk. */
static void kn_range(CpuKern *k, const Shape *s, const KnSplit *sp, int d, LLVMValueRef *lo,
                     LLVMValueRef *hi) {
  if (d != sp->dim) {
    *lo = cpu_i64(k, 0);
    *hi = cpu_i64(k, s->dims[d]);
    return;
  }
  LLVMValueRef l = LLVMBuildNSWMul(k->B, k->chunk, cpu_i64(k, sp->size), "");
  LLVMValueRef h = LLVMBuildNSWAdd(k->B, l, cpu_i64(k, sp->size), "");
  LLVMValueRef D = cpu_i64(k, s->dims[d]);
  h = LLVMBuildSelect(k->B, LLVMBuildICmp(k->B, LLVMIntSLT, h, D, ""), h, D, "");
  *lo = l;
  *hi = h;
}

/* Open loops over dims [0, n) of s; size-1 dims get index 0 and no loop. */
static int kn_open_nest(CpuKern *k, const Shape *s, const KnSplit *sp, int n, CpuLoop *loops,
                        LLVMValueRef *idx) {
  int nl = 0;
  for (int d = 0; d < n; d++) {
    if (s->dims[d] == 1 && d != sp->dim) {
      idx[d] = cpu_i64(k, 0);
      continue;
    }
    LLVMValueRef lo, hi;
    kn_range(k, s, sp, d, &lo, &hi);
    idx[d] = cpu_loop_open(k, &loops[nl++], lo, hi);
  }
  return nl;
}

static void kn_close_nest(CpuKern *k, CpuLoop *loops, int nl) {
  for (int j = nl - 1; j >= 0; j--) cpu_loop_close(k, &loops[j]);
}

/* Open the loops of an output nest over ls: nested loops, or for short rows one loop over the
 * linear index (long enough to vectorize) with the multi-dimensional index derived from it
 * where an op needs it. Fills *sp with the split used. */
static int kn_open_out(CpuKern *k, const Shape *ls, KnSplit *sp, CpuLoop *loops, LLVMValueRef *idx) {
  CpuCg *cg = k->cg;
  int64_t total = hlo_shape_elems(ls);
  if (!(ls->rank >= 2 && ls->dims[ls->rank - 1] < 16)) {
    *sp = kn_split(cg, ls, total);
    return kn_open_nest(k, ls, sp, ls->rank, loops, idx);
  }
  KnSplit lsp = kn_split(cg, ls, total);
  Shape flat = hlo_shape_array(ls->dt, 1, &total);
  *sp = kn_split(cg, &flat, lsp.n > 1 ? total : 0);
  int nl = kn_open_nest(k, &flat, sp, 1, loops, idx);
  LLVMValueRef lin = idx[0], rem = lin;
  for (int d = ls->rank - 1; d >= 0; d--) {
    if (d == 0) {
      idx[d] = rem;
      break;
    }
    LLVMValueRef dim = cpu_i64(k, ls->dims[d]);
    idx[d] = LLVMBuildURem(k->B, rem, dim, "");
    rem = LLVMBuildUDiv(k->B, rem, dim, "");
  }
  k->lin_idx = idx;
  k->lin = lin;
  k->lin_shape = ls;
  return nl;
}

/* Pointer (in the entry block) to leaf j of a tuple-shaped entry value. */
static LLVMValueRef kn_leaf_ptr(CpuKern *k, const HInstr *in, int j) {
  LLVMValueRef out = cpu_buffer(k, in);
  LLVMBasicBlockRef cur = LLVMGetInsertBlock(k->B);
  LLVMPositionBuilderBefore(k->B, k->entry_br);
  LLVMValueRef lp = kn_byte_off(k, out, memplan_tuple_offset(&in->shape, j));
  LLVMPositionBuilderAtEnd(k->B, cur);
  return lp;
}

static void kn_materialized(CpuKern *k, const HInstr *in, LLVMValueRef p) {
  if (k->nmat < CPU_MAX_MAT) k->mat[k->nmat++] = (CpuMat){in, p};
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
      hlo_err_at(cg->err, in, "CPU target: tuple-shaped %s is not supported", hlo_op_name(in->op));
      return false;
    }
    if (s->ntuple > 64) {
      hlo_err_at(cg->err, in, "CPU target: too many outputs");
      return false;
    }
    for (int j = 0; j < s->ntuple; j++)
      if (s->tuple[j].dt == DT_TUPLE) {
        hlo_err_at(cg->err, in, "CPU target: nested tuple outputs are not supported");
        return false;
      }
  }
  CpuKern *k = kn_begin(cg, in);
  CpuLoop loops[HLO_MAX_RANK];
  LLVMValueRef idx[HLO_MAX_RANK];
  KnSplit sp;
  int nl = kn_open_out(k, ls, &sp, loops, idx);
  if (!multi) {
    LLVMValueRef v = cpu_gen(k, in, idx);
    if (v) cpu_store_elem(k, cpu_buffer(k, in), s, idx, v);
  } else {
    LLVMValueRef vals[64];
    if (in->op == OP_REDUCE) {
      cpu_gen_multi(k, in, idx, vals);
    } else {
      k->bind[k->nbind++] = (CpuBind){in->calls[0], in, NULL, 0, k->ncache};
      for (int j = 0; j < s->ntuple && !k->failed; j++) vals[j] = cpu_gen(k, froot->ops[j], idx);
      k->nbind--;
    }
    for (int j = 0; j < s->ntuple && !k->failed; j++) cpu_store_elem(k, kn_leaf_ptr(k, in, j), &s->tuple[j], idx, vals[j]);
  }
  kn_close_nest(k, loops, nl);
  return kn_end(k, sp.n);
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
      CpuKern *k = kn_begin(cg, in);
      for (int d = 0; d < n; d++)
        if (done[d]) kn_materialized(k, root->ops[d], kn_leaf_ptr(k, in, d));
      CpuLoop loops[HLO_MAX_RANK];
      LLVMValueRef idx[HLO_MAX_RANK];
      KnSplit sp;
      int nl = kn_open_out(k, ls, &sp, loops, idx);
      k->bind[k->nbind++] = (CpuBind){in->calls[0], in, NULL, 0, k->ncache};
      bool group[64] = {0};
      for (int g = j; g < n && !k->failed; g++) {
        if (done[g] || (pass == 0) == (root->ops[g]->op == OP_REDUCE) || !hlo_shape_same_dims(&s->tuple[g], ls))
          continue;
        LLVMValueRef v = cpu_gen(k, root->ops[g], idx);
        if (v) cpu_store_elem(k, kn_leaf_ptr(k, in, g), &s->tuple[g], idx, v);
        group[g] = true;
      }
      k->nbind--;
      kn_close_nest(k, loops, nl);
      if (!kn_end(k, sp.n)) return false;
      for (int g = 0; g < n; g++) done[g] = done[g] || group[g];
    }
  }
  return true;
}

/* Whether v reaches the root of c through elementwise ops of v's dimensions only. */
static bool kn_elem_path(const HComp *c, const HInstr *v) {
  bool used = false;
  for (int i = 0; i < c->ninstrs; i++) {
    const HInstr *u = c->instrs[i];
    for (int q = 0; q < u->nops; q++) {
      if (u->ops[q] != v) continue;
      used = true;
      if (!(hlo_op_flags(u->op) & OPF_ELEM) || !hlo_shape_same_dims(&u->shape, &v->shape)) return false;
      if (!kn_elem_path(c, u)) return false;
    }
  }
  return used || v == c->root;
}

/* The dot/convolution of an output fusion whose epilogue is elementwise in it (NULL if the
 * fusion is not of that form). */
static const HInstr *kn_output_hero(const HInstr *in) {
  if (in->op != OP_FUSION || in->shape.dt == DT_TUPLE || in->shape.rank < 1) return NULL;
  const HComp *c = in->calls[0];
  const HInstr *hero = NULL;
  for (int i = 0; i < c->ninstrs; i++) {
    const HInstr *x = c->instrs[i];
    if (x->op == OP_DOT || x->op == OP_CONVOLUTION) {
      if (hero) return NULL;
      hero = x;
    }
  }
  if (!hero || hero->shape.dt != in->shape.dt || hero->shape.dt == DT_PRED ||
      !hlo_shape_same_dims(&hero->shape, &in->shape) || !kn_elem_path(c, hero))
    return NULL;
  return hero;
}

/* Accumulating kernel for a dot or convolution, alone or as the hero of an output fusion:
 * outer loops over all output dims but the last, the reduction loops, the last dim
 * innermost accumulating into the output row; then the fusion's elementwise epilogue is
 * applied to the finished row in place. */
static bool kn_accum_kernel(CpuCg *cg, HInstr *in, const HInstr *hero) {
  const Shape *s = &in->shape;
  int64_t ext[HLO_MAX_RANK * 2];
  int nr = hero->op == OP_DOT ? cpu_dot_red_dims(hero, ext) : cpu_conv_red_dims(hero, ext);
  int64_t work = hlo_shape_elems(s);
  for (int j = 0; j < nr; j++) work *= ext[j] > 0 ? ext[j] : 1;
  CpuKern *k = kn_begin(cg, in);
  bool fused = hero != in;
  if (fused) k->bind[k->nbind++] = (CpuBind){in->calls[0], in, NULL, 0, 0};
  KnSplit sp = kn_split(cg, s, work);
  DType t = s->dt;
  CpuLoop loops[HLO_MAX_RANK], red_loops[HLO_MAX_RANK * 2], jl;
  LLVMValueRef idx[HLO_MAX_RANK], red[HLO_MAX_RANK * 2];
  int last = s->rank - 1;
  int nl = kn_open_nest(k, s, &sp, last, loops, idx);
  LLVMValueRef lo, hi;
  kn_range(k, s, &sp, last, &lo, &hi);
  LLVMValueRef out = cpu_buffer(k, in);
  /* zero the output row */
  idx[last] = cpu_loop_open(k, &jl, lo, hi);
  LLVMValueRef zero = hlo_dtype_is_float(t) ? LLVMConstReal(cpu_reg_type(cg, t), 0.0)
                                            : LLVMConstInt(cpu_reg_type(cg, t), 0, 0);
  cpu_store_elem(k, out, s, idx, zero);
  cpu_loop_close(k, &jl);
  for (int j = 0; j < nr; j++) red[j] = cpu_loop_open(k, &red_loops[j], cpu_i64(k, 0), cpu_i64(k, ext[j]));
  idx[last] = cpu_loop_open(k, &jl, lo, hi);
  LLVMValueRef term = hero->op == OP_DOT ? cpu_dot_term(k, hero, idx, red) : cpu_conv_term(k, hero, idx, red);
  if (term) {
    LLVMValueRef cur = cpu_load_elem(k, out, s, idx);
    cpu_store_elem(k, out, s, idx, cpu_add(k, t, cur, term));
  }
  cpu_loop_close(k, &jl);
  for (int j = nr - 1; j >= 0; j--) cpu_loop_close(k, &red_loops[j]);
  if (fused && !k->failed) {
    kn_materialized(k, hero, out);
    idx[last] = cpu_loop_open(k, &jl, lo, hi);
    LLVMValueRef v = cpu_gen(k, in->calls[0]->root, idx);
    if (v) cpu_store_elem(k, out, s, idx, v);
    cpu_loop_close(k, &jl);
  }
  kn_close_nest(k, loops, nl);
  return kn_end(k, sp.n);
}

static bool il_has(const IList *l, int64_t v) {
  for (int i = 0; i < l->n; i++)
    if (l->v[i] == v) return true;
  return false;
}

/* Scatter: copy the operand, then combine every update in order. */
static bool kn_scatter_kernel(CpuCg *cg, HInstr *in) {
  if (in->nops != 3 || in->shape.dt == DT_TUPLE) {
    hlo_err_at(cg->err, in, "CPU target: variadic scatter is not supported");
    return false;
  }
  const ScatterDims *sd = in->scatter;
  const HInstr *ind = in->ops[1], *upd = in->ops[2];
  const Shape *s = &in->shape, *is = &ind->shape, *us = &upd->shape;
  CpuKern *k = kn_begin(cg, in);
  LLVMBuilderRef B = k->B;
  KnSplit none = {-1, 0, 1};
  CpuLoop loops[HLO_MAX_RANK];
  LLVMValueRef idx[HLO_MAX_RANK];
  LLVMValueRef out = cpu_buffer(k, in);
  int nl = kn_open_nest(k, s, &none, s->rank, loops, idx);
  LLVMValueRef v = cpu_gen(k, in->ops[0], idx);
  if (v) cpu_store_elem(k, out, s, idx, v);
  kn_close_nest(k, loops, nl);
  if (k->failed) return kn_end(k, 1);

  LLVMValueRef ui[HLO_MAX_RANK];
  nl = kn_open_nest(k, us, &none, us->rank, loops, ui);
  LLVMValueRef sidx[HLO_MAX_RANK]; /* update scatter dims, in order */
  int ns = 0;
  for (int d = 0; d < us->rank; d++)
    if (!il_has(&sd->update_window_dims, d)) sidx[ns++] = ui[d];
  int64_t ivd = sd->index_vector_dim;
  LLVMValueRef start[HLO_MAX_RANK];
  for (int d = 0; d < s->rank; d++) start[d] = cpu_i64(k, 0);
  for (int c = 0; c < sd->scatter_dims_to_operand_dims.n; c++) {
    LLVMValueRef ii[HLO_MAX_RANK];
    int b = 0;
    for (int d = 0; d < is->rank; d++) ii[d] = d == ivd ? cpu_i64(k, c) : sidx[b++];
    LLVMValueRef sv = cpu_gen(k, ind, ii);
    if (!sv) return kn_end(k, 1);
    start[sd->scatter_dims_to_operand_dims.v[c]] = cpu_convert(k, sv, is->dt, DT_S64);
  }
  for (int j = 0; j < sd->input_batching_dims.n; j++) {
    int64_t id = sd->scatter_indices_batching_dims.v[j];
    int pos = (int)(id < ivd || ivd >= is->rank ? id : id - 1);
    start[sd->input_batching_dims.v[j]] = sidx[pos];
  }
  LLVMValueRef oi[HLO_MAX_RANK], ok = NULL;
  int w = 0;
  for (int d = 0; d < s->rank; d++) {
    int64_t wsize = 1;
    LLVMValueRef o = start[d];
    if (!il_has(&sd->inserted_window_dims, d) && !il_has(&sd->input_batching_dims, d)) {
      int64_t ud = sd->update_window_dims.v[w++];
      wsize = us->dims[ud];
      o = LLVMBuildNSWAdd(B, start[d], ui[ud], "");
    }
    LLVMValueRef a = LLVMBuildICmp(B, LLVMIntSGE, start[d], cpu_i64(k, 0), "");
    LLVMValueRef c = LLVMBuildICmp(B, LLVMIntSLE, start[d], cpu_i64(k, s->dims[d] - wsize), "");
    LLVMValueRef both = LLVMBuildAnd(B, a, c, "");
    ok = ok ? LLVMBuildAnd(B, ok, both, "") : both;
    oi[d] = o;
  }
  LLVMBasicBlockRef doit = LLVMAppendBasicBlockInContext(cg->C, k->fn, "upd");
  LLVMBasicBlockRef skip = LLVMAppendBasicBlockInContext(cg->C, k->fn, "skip");
  LLVMBuildCondBr(B, ok ? ok : LLVMConstInt(cg->i1, 1, 0), doit, skip);
  LLVMPositionBuilderAtEnd(B, doit);
  int mark = k->ncache;
  LLVMValueRef args[2] = {cpu_load_elem(k, out, s, oi), cpu_gen(k, upd, ui)}, res[1];
  if (args[1] && cpu_gen_scalar_comp(k, in->calls[0], args, 2, res)) cpu_store_elem(k, out, s, oi, res[0]);
  k->ncache = mark;
  LLVMBuildBr(B, skip);
  LLVMPositionBuilderAtEnd(B, skip);
  kn_close_nest(k, loops, nl);
  return kn_end(k, 1);
}

bool cpu_emit_instr(CpuCg *cg, HInstr *in) {
  const MemBuf *b = &cg->plan.bufs[in->idx];
  bool computes = b->kind == MEM_TEMP || b->kind == MEM_RESULT || (b->kind == MEM_ALIAS && !b->view);
  if (!computes) return true;
  if (hlo_shape_elems(&in->shape) == 0 && in->shape.dt != DT_TUPLE) return true;
  if ((in->op == OP_DOT || in->op == OP_CONVOLUTION) && in->shape.rank >= 1 && in->shape.dt != DT_PRED)
    return kn_accum_kernel(cg, in, in);
  const HInstr *hero = kn_output_hero(in);
  if (hero) return kn_accum_kernel(cg, in, hero);
  if (in->op == OP_SCATTER) return kn_scatter_kernel(cg, in);
  if (in->op == OP_FUSION && in->shape.dt == DT_TUPLE && in->calls[0]->root->op == OP_TUPLE) {
    for (int j = 1; j < in->shape.ntuple; j++)
      if (!hlo_shape_same_dims(&in->shape.tuple[j], &in->shape.tuple[0])) return kn_multi_fusion(cg, in);
  }
  return kn_loop_kernel(cg, in);
}
