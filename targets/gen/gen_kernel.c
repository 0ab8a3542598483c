/* targets/gen/gen_kernel.c: the kernel being emitted (GenKern) and its basic IR helpers.
 *
 * A kernel is one LLVM function with an entry block for allocas and pointers (closed by
 * entry_br) and a body the builder walks. What both targets' kernels build with lives here:
 * i64 constants, counted loops (whose constant-bound induction variables feed the index
 * range analysis that lets the elemental generator drop bounds tests), allocas, row-major
 * element loads and stores (pred, fp8, s4 and u4 stored as bytes), and the one dot or convolution
 * of a fusion. How a kernel is called and where its pointers come from is the target's: the CPU's
 * slot table, the CUDA kernel's parameters. */
#include "gen.h"

#include <string.h>

LLVMValueRef gen_i64(GenKern *k, int64_t v) {
  return LLVMConstInt(k->cg->i64, (unsigned long long)v, 1);
}

LLVMValueRef gen_smin(GenKern *k, LLVMValueRef a, LLVMValueRef b) {
  return LLVMBuildSelect(k->B, LLVMBuildICmp(k->B, LLVMIntSLT, a, b, ""), a, b, "");
}

LLVMValueRef gen_loop_open(GenKern *k, GenLoop *l, LLVMValueRef lo, LLVMValueRef hi) {
  l->step = 1;
  l->step_v = NULL;
  LLVMBuilderRef B = k->B;
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(B);
  l->header = LLVMAppendBasicBlockInContext(k->cg->C, k->fn, "loop");
  LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(k->cg->C, k->fn, "body");
  l->exit = LLVMAppendBasicBlockInContext(k->cg->C, k->fn, "exit");
  l->hi = hi;
  l->cache_mark = k->ncache;
  l->range_mark = k->nranges;
  LLVMBuildBr(B, l->header);
  LLVMPositionBuilderAtEnd(B, l->header);
  l->iv = LLVMBuildPhi(B, k->cg->i64, "i");
  if (LLVMIsAConstantInt(lo) && LLVMIsAConstantInt(hi) &&
      LLVMConstIntGetSExtValue(lo) < LLVMConstIntGetSExtValue(hi)) {
    k->ranges =
        hlo_arena_grow(k->cg->scratch, k->ranges, k->nranges, &k->range_cap, 16, sizeof *k->ranges);
    k->ranges[k->nranges++] =
        (GenRange){l->iv, LLVMConstIntGetSExtValue(lo), LLVMConstIntGetSExtValue(hi) - 1};
  }
  LLVMAddIncoming(l->iv, &lo, &pre, 1);
  LLVMBuildCondBr(B, LLVMBuildICmp(B, LLVMIntSLT, l->iv, hi, ""), body, l->exit);
  LLVMPositionBuilderAtEnd(B, body);
  return l->iv;
}

void gen_loop_close(GenKern *k, GenLoop *l) {
  LLVMBuilderRef B = k->B;
  LLVMValueRef step = l->step_v ? l->step_v : gen_i64(k, l->step > 1 ? l->step : 1);
  LLVMValueRef next = LLVMBuildNSWAdd(B, l->iv, step, "");
  LLVMBasicBlockRef latch = LLVMGetInsertBlock(B);
  LLVMValueRef br = LLVMBuildBr(B, l->header);
  LLVMAddIncoming(l->iv, &next, &latch, 1);
  LLVMPositionBuilderAtEnd(B, l->exit);
  k->ncache = l->cache_mark;  /* values made inside the loop do not dominate its exit */
  k->nranges = l->range_mark; /* past the loop, its variable is out of its range */
  l->latch_br = br;
}

#define GK_RANGE_MAX ((int64_t)1 << 40) /* bounds beyond this are "unknown" (no overflow) */

static bool gk_range_rec(GenKern *k, LLVMValueRef v, int64_t *lo, int64_t *hi, int depth) {
  if (LLVMIsAConstantInt(v)) {
    *lo = *hi = LLVMConstIntGetSExtValue(v);
    return *lo > -GK_RANGE_MAX && *lo < GK_RANGE_MAX;
  }
  for (int i = k->nranges - 1; i >= 0; i--)
    if (k->ranges[i].iv == v) {
      *lo = k->ranges[i].lo, *hi = k->ranges[i].hi;
      return true;
    }
  if (depth > 16 || !LLVMIsAInstruction(v) || LLVMGetNumOperands(v) != 2) return false;
  LLVMOpcode op = LLVMGetInstructionOpcode(v);
  int64_t al, ah, bl, bh;
  if (!gk_range_rec(k, LLVMGetOperand(v, 0), &al, &ah, depth + 1) ||
      !gk_range_rec(k, LLVMGetOperand(v, 1), &bl, &bh, depth + 1))
    return false;
  if (op == LLVMAdd) {
    *lo = al + bl, *hi = ah + bh;
  } else if (op == LLVMSub) {
    *lo = al - bh, *hi = ah - bl;
  } else if (op == LLVMMul) {
    if (al < -(1 << 20) || ah > (1 << 20) || bl < -(1 << 20) || bh > (1 << 20)) return false;
    int64_t c[4] = {al * bl, al * bh, ah * bl, ah * bh};
    *lo = *hi = c[0];
    for (int j = 1; j < 4; j++)
      *lo = c[j] < *lo ? c[j] : *lo, *hi = c[j] > *hi ? c[j] : *hi;
  } else if (op == LLVMUDiv || op == LLVMURem) { /* of non-negative values by a constant */
    if (al < 0 || bl != bh || bl <= 0) return false;
    if (op == LLVMUDiv)
      *lo = al / bl, *hi = ah / bl;
    else
      *lo = ah < bl ? al : 0, *hi = ah < bl ? ah : bl - 1;
  } else {
    return false;
  }
  return *lo > -GK_RANGE_MAX && *hi < GK_RANGE_MAX;
}

bool gen_index_range(GenKern *k, LLVMValueRef v, int64_t *lo, int64_t *hi) {
  return gk_range_rec(k, v, lo, hi, 0);
}

LLVMValueRef gen_loop_open_step(GenKern *k, GenLoop *l, LLVMValueRef lo, LLVMValueRef hi,
                                LLVMValueRef step) {
  LLVMValueRef iv = gen_loop_open(k, l, lo, hi);
  l->step_v = step;
  return iv;
}

LLVMValueRef gen_alloca(GenKern *k, LLVMTypeRef t) {
  LLVMBasicBlockRef cur = LLVMGetInsertBlock(k->B);
  LLVMPositionBuilderBefore(k->B, k->entry_br);
  LLVMValueRef a = LLVMBuildAlloca(k->B, t, "acc");
  LLVMPositionBuilderAtEnd(k->B, cur);
  return a;
}

LLVMValueRef gen_linear(GenKern *k, const Shape *s, LLVMValueRef *idx) {
  /* the root index passed down unchanged (elementwise ops) to a same-dims value: its
     linear form is known, and keeps the access contiguous for the vectorizer */
  if (idx && idx == k->lin_idx && hlo_shape_same_dims(s, k->lin_shape)) return k->lin;
  int64_t st[HLO_MAX_RANK];
  hlo_shape_strides(s, st);
  LLVMValueRef lin = NULL;
  for (int d = 0; d < s->rank; d++) {
    if (s->dims[d] == 1) continue;
    LLVMValueRef t = st[d] == 1 ? idx[d] : LLVMBuildNSWMul(k->B, idx[d], gen_i64(k, st[d]), "");
    lin = lin ? LLVMBuildNSWAdd(k->B, lin, t, "") : t;
  }
  return lin ? lin : gen_i64(k, 0);
}

/* A complex element at q as its two parts, loaded as scalars (so that loops of them vectorize
 * as interleaved accesses), and stored likewise. */
static LLVMValueRef gk_load_complex(GenKern *k, LLVMTypeRef mt, LLVMValueRef q, DType t) {
  LLVMValueRef z = LLVMGetPoison(mt);
  for (unsigned j = 0; j < 2; j++) {
    LLVMTypeRef pt = LLVMStructGetTypeAtIndex(mt, j);
    LLVMValueRef v = LLVMBuildLoad2(k->B, pt, LLVMBuildStructGEP2(k->B, mt, q, j, ""), "");
    LLVMSetAlignment(v, (unsigned)hlo_dtype_size(t) / 2);
    z = LLVMBuildInsertValue(k->B, z, v, j, "");
  }
  return z;
}

static void gk_store_complex(GenKern *k, LLVMTypeRef mt, LLVMValueRef q, DType t, LLVMValueRef z) {
  for (unsigned j = 0; j < 2; j++) {
    LLVMValueRef v = LLVMBuildExtractValue(k->B, z, j, "");
    LLVMValueRef st = LLVMBuildStore(k->B, v, LLVMBuildStructGEP2(k->B, mt, q, j, ""));
    LLVMSetAlignment(st, (unsigned)hlo_dtype_size(t) / 2);
  }
}

LLVMValueRef gen_load_elem(GenKern *k, LLVMValueRef p, const Shape *s, LLVMValueRef *idx) {
  LLVMTypeRef mt = gen_mem_type(k->cg, s->dt);
  LLVMValueRef lin = gen_linear(k, s, idx);
  LLVMValueRef q = LLVMBuildInBoundsGEP2(k->B, mt, p, &lin, 1, "");
  if (hlo_dtype_is_complex(s->dt)) return gk_load_complex(k, mt, q, s->dt);
  LLVMValueRef v = LLVMBuildLoad2(k->B, mt, q, "");
  LLVMSetAlignment(v, (unsigned)hlo_dtype_size(s->dt));
  if (s->dt == DT_PRED) v = LLVMBuildICmp(k->B, LLVMIntNE, v, LLVMConstInt(k->cg->i8, 0, 0), "");
  if (hlo_dtype_is_fp8(s->dt)) v = gen_fp8_decode(k, s->dt, v);
  if (hlo_dtype_is_int4(s->dt)) v = LLVMBuildTrunc(k->B, v, gen_reg_type(k->cg, s->dt), "");
  return v;
}

void gen_store_elem(GenKern *k, LLVMValueRef p, const Shape *s, LLVMValueRef *idx, LLVMValueRef v) {
  LLVMTypeRef mt = gen_mem_type(k->cg, s->dt);
  LLVMValueRef lin = gen_linear(k, s, idx);
  LLVMValueRef q = LLVMBuildInBoundsGEP2(k->B, mt, p, &lin, 1, "");
  if (hlo_dtype_is_complex(s->dt)) {
    gk_store_complex(k, mt, q, s->dt, v);
    return;
  }
  if (s->dt == DT_PRED) v = LLVMBuildZExt(k->B, v, k->cg->i8, "");
  if (hlo_dtype_is_fp8(s->dt)) v = gen_fp8_encode(k, s->dt, v);
  /* the byte holds the 4-bit value itself, as the interpreter's literals do */
  if (s->dt == DT_S4) v = LLVMBuildSExt(k->B, v, k->cg->i8, "");
  if (s->dt == DT_U4) v = LLVMBuildZExt(k->B, v, k->cg->i8, "");
  LLVMValueRef st = LLVMBuildStore(k->B, v, q);
  LLVMSetAlignment(st, (unsigned)hlo_dtype_size(s->dt));
}

/* The dot/convolution of an output fusion whose epilogue is elementwise in it (NULL if the
 * fusion is not of that form). */
const HInstr *gen_fusion_hero(const HInstr *in) {
  if (in->op != OP_FUSION || in->ncalls < 1) return NULL;
  const HComp *c = in->calls[0];
  const HInstr *hero = NULL;
  for (int i = 0; i < c->ninstrs; i++) {
    const HInstr *x = c->instrs[i];
    if (x->op == OP_DOT || x->op == OP_CONVOLUTION) {
      if (hero) return NULL;
      hero = x;
    }
  }
  return hero;
}

/* Row-major delinearization of lin over dims[0..n). */
void gen_delin(GenKern *k, LLVMValueRef lin, const int64_t *dims, int n, LLVMValueRef *idx) {
  LLVMValueRef rem = lin;
  for (int d = n - 1; d >= 0; d--) {
    if (dims[d] == 1) {
      idx[d] = gen_i64(k, 0);
      continue;
    }
    bool outer = true;
    for (int e = 0; e < d; e++)
      if (dims[e] != 1) outer = false;
    if (outer) {
      idx[d] = rem;
      continue;
    }
    LLVMValueRef D = gen_i64(k, dims[d]);
    idx[d] = LLVMBuildURem(k->B, rem, D, "");
    rem = LLVMBuildUDiv(k->B, rem, D, "");
  }
}

void gen_delin_dims(GenKern *k, LLVMValueRef lin, const int *dims, const int64_t *ext, int n,
                    LLVMValueRef *idx) {
  LLVMValueRef sub[HLO_MAX_RANK];
  gen_delin(k, lin, ext, n, sub);
  for (int i = 0; i < n; i++)
    idx[dims[i]] = sub[i];
}

void gen_cache_add(GenKern *k, const HInstr *in, int rank, LLVMValueRef *idx, LLVMValueRef v) {
  k->cache =
      hlo_arena_grow(k->cg->scratch, k->cache, k->ncache, &k->cache_cap, 64, sizeof *k->cache);
  GenCacheEnt *e = &k->cache[k->ncache++];
  e->in = in;
  for (int d = 0; d < rank; d++)
    e->idx[d] = idx[d];
  e->v = v;
}

LLVMValueRef gen_value_mapped(GenKern *k, const HInstr *x, const int8_t *map, LLVMValueRef *sidx,
                              LLVMValueRef c) {
  LLVMValueRef idx[HLO_MAX_RANK];
  for (int d = 0; d < x->shape.rank; d++)
    idx[d] = map[d] < 0 ? c : sidx[map[d]];
  return gen_value(k, x, idx);
}
