/* optimizer/cse.c: common subexpression elimination.
 *
 * Two instructions of one computation compute the same value when they have the same
 * opcode, the same operands (after earlier merges), the same result shape and layout and the
 * same attributes; constants compare by value, and called computations (reduce regions,
 * comparators) compare structurally, since JAX emits one identical region per reduce. The
 * later instruction is replaced by the earlier one. Parameters, instructions with side
 * effects, random numbers, custom calls and instructions with control dependencies are never
 * merged.
 *
 * Algorithm: one forward sweep per computation (opt_rewrite_comp) with an open-addressing
 * hash table keyed by (opcode, shape, operand identities, a few attributes); candidates with
 * equal hash are compared in full. Operands are redirected to their representative before an
 * instruction is hashed, so chains of duplicates collapse in one sweep. O(n) expected.
 * Replaced instructions are left for DCE. */
#include "optimizer.h"

#include <string.h>

static bool str_eq(const char *a, const char *b) {
  if (!a || !b) return a == b;
  return !strcmp(a, b);
}

static bool ilist_eq(const IList *a, const IList *b) {
  if (a->n != b->n) return false;
  for (int i = 0; i < a->n; i++)
    if (a->v[i] != b->v[i]) return false;
  return true;
}

static bool window_eq(const Window *a, const Window *b) {
  if (!a || !b) return a == b;
  if (a->n != b->n) return false;
  for (int i = 0; i < a->n; i++) {
    const WinDim *x = &a->d[i], *y = &b->d[i];
    if (x->size != y->size || x->stride != y->stride || x->pad_lo != y->pad_lo ||
        x->pad_hi != y->pad_hi || x->win_dil != y->win_dil || x->base_dil != y->base_dil ||
        x->reversal != y->reversal)
      return false;
  }
  return true;
}

static bool literal_eq(const Literal *a, const Literal *b) {
  if (!a || !b) return a == b;
  if (!hlo_shape_eq(&a->shape, &b->shape)) return false;
  if (hlo_shape_is_tuple(&a->shape)) {
    for (int i = 0; i < a->shape.ntuple; i++)
      if (!literal_eq(a->elems[i], b->elems[i])) return false;
    return true;
  }
  return a == b || !memcmp(a->data, b->data, hlo_shape_bytes(&a->shape));
}

/* Verbatim attributes that change the value (sharding and frontend attributes do not). */
static bool raw_counts(const HAttr *r) {
  return strcmp(r->name, "sharding") && strcmp(r->name, "frontend_attributes") &&
         strcmp(r->name, "metadata") && strcmp(r->name, "statistics") &&
         strcmp(r->name, "parameter_replication");
}

static bool raw_eq(const HInstr *a, const HInstr *b) {
  int i = 0, j = 0;
  for (;;) {
    while (i < a->nraw && !raw_counts(&a->raw[i]))
      i++;
    while (j < b->nraw && !raw_counts(&b->raw[j]))
      j++;
    if (i == a->nraw || j == b->nraw) return i == a->nraw && j == b->nraw;
    if (strcmp(a->raw[i].name, b->raw[j].name) || !str_eq(a->raw[i].value, b->raw[j].value))
      return false;
    i++, j++;
  }
}

static bool comp_eq(const HComp *a, const HComp *b, int depth);

static bool attrs_eq(const HInstr *a, const HInstr *b, int depth) {
  /* constants whose value was elided in the input are unknown: never equal */
  if (a->op == OP_CONSTANT && (!a->literal || !b->literal)) return false;
  if (a->param_num != b->param_num || a->tuple_index != b->tuple_index ||
      a->iota_dim != b->iota_dim || !ilist_eq(&a->dims, &b->dims) ||
      !ilist_eq(&a->dslice_sizes, &b->dslice_sizes) || !literal_eq(a->literal, b->literal) ||
      !window_eq(a->window, b->window) || a->feature_groups != b->feature_groups ||
      a->batch_groups != b->batch_groups || !ilist_eq(&a->precision, &b->precision) ||
      a->dot_alg != b->dot_alg || a->cmp_dir != b->cmp_dir || a->cmp_type != b->cmp_type ||
      a->fusion_kind != b->fusion_kind || a->is_stable != b->is_stable ||
      a->indices_are_sorted != b->indices_are_sorted || a->unique_indices != b->unique_indices ||
      a->exponent_bits != b->exponent_bits || a->mantissa_bits != b->mantissa_bits ||
      a->epsilon != b->epsilon || a->feature_index != b->feature_index ||
      a->fft_type != b->fft_type || !ilist_eq(&a->fft_length, &b->fft_length) ||
      !str_eq(a->custom_call_target, b->custom_call_target) ||
      !str_eq(a->backend_config, b->backend_config) || !raw_eq(a, b))
    return false;
  if (!a->conv != !b->conv || !a->dot != !b->dot || !a->slice != !b->slice || !a->pad != !b->pad ||
      !a->gather != !b->gather || !a->scatter != !b->scatter)
    return false;
  if (a->conv) {
    const ConvDims *x = a->conv, *y = b->conv;
    if (x->in_batch != y->in_batch || x->in_feat != y->in_feat || x->k_in != y->k_in ||
        x->k_out != y->k_out || x->out_batch != y->out_batch || x->out_feat != y->out_feat ||
        !ilist_eq(&x->in_sp, &y->in_sp) || !ilist_eq(&x->k_sp, &y->k_sp) ||
        !ilist_eq(&x->out_sp, &y->out_sp))
      return false;
  }
  if (a->dot) {
    const DotDims *x = a->dot, *y = b->dot;
    if (!ilist_eq(&x->lhs_batch, &y->lhs_batch) || !ilist_eq(&x->rhs_batch, &y->rhs_batch) ||
        !ilist_eq(&x->lhs_contract, &y->lhs_contract) ||
        !ilist_eq(&x->rhs_contract, &y->rhs_contract))
      return false;
  }
  if (a->slice) {
    const SliceDims *x = a->slice, *y = b->slice;
    if (x->n != y->n) return false;
    for (int i = 0; i < x->n; i++)
      if (x->start[i] != y->start[i] || x->limit[i] != y->limit[i] || x->stride[i] != y->stride[i])
        return false;
  }
  if (a->pad) {
    const PadDims *x = a->pad, *y = b->pad;
    if (x->n != y->n) return false;
    for (int i = 0; i < x->n; i++)
      if (x->lo[i] != y->lo[i] || x->hi[i] != y->hi[i] || x->interior[i] != y->interior[i])
        return false;
  }
  if (a->gather) {
    const GatherDims *x = a->gather, *y = b->gather;
    if (!ilist_eq(&x->offset_dims, &y->offset_dims) ||
        !ilist_eq(&x->collapsed_slice_dims, &y->collapsed_slice_dims) ||
        !ilist_eq(&x->start_index_map, &y->start_index_map) ||
        !ilist_eq(&x->operand_batching_dims, &y->operand_batching_dims) ||
        !ilist_eq(&x->start_indices_batching_dims, &y->start_indices_batching_dims) ||
        x->index_vector_dim != y->index_vector_dim || !ilist_eq(&x->slice_sizes, &y->slice_sizes))
      return false;
  }
  if (a->scatter) {
    const ScatterDims *x = a->scatter, *y = b->scatter;
    if (!ilist_eq(&x->update_window_dims, &y->update_window_dims) ||
        !ilist_eq(&x->inserted_window_dims, &y->inserted_window_dims) ||
        !ilist_eq(&x->scatter_dims_to_operand_dims, &y->scatter_dims_to_operand_dims) ||
        !ilist_eq(&x->input_batching_dims, &y->input_batching_dims) ||
        !ilist_eq(&x->scatter_indices_batching_dims, &y->scatter_indices_batching_dims) ||
        x->index_vector_dim != y->index_vector_dim)
      return false;
  }
  if (a->ncalls != b->ncalls) return false;
  for (int i = 0; i < a->ncalls; i++)
    if (a->calls[i] != b->calls[i] && !comp_eq(a->calls[i], b->calls[i], depth + 1)) return false;
  return true;
}

/* Structural equality of two computations: same instructions in the same order with the same
 * operand positions. Only small computations are compared (regions, comparators). */
static bool comp_eq(const HComp *a, const HComp *b, int depth) {
  if (depth > 4 || a->ninstrs != b->ninstrs || a->ninstrs > 32 || a->nparams != b->nparams)
    return false;
  for (int i = 0; i < a->ninstrs; i++) {
    const HInstr *x = a->instrs[i], *y = b->instrs[i];
    if (x->op != y->op || x->nops != y->nops || x->idx != i || y->idx != i ||
        !hlo_shape_eq(&x->shape, &y->shape) || (x == a->root) != (y == b->root) || x->nctrl ||
        y->nctrl)
      return false;
    for (int k = 0; k < x->nops; k++)
      if (x->ops[k]->idx != y->ops[k]->idx) return false;
    if (!attrs_eq(x, y, depth)) return false;
  }
  return true;
}

static bool mergeable(const HInstr *in) {
  /* ops whose result is not a function of their operands alone */
  static const HOp never[] = {
      OP_PARAMETER, OP_RNG,     OP_RNG_BIT_GENERATOR, OP_RNG_GET_AND_UPDATE_STATE, OP_CUSTOM_CALL,
      OP_INFEED,    OP_OUTFEED, OP_AFTER_ALL,         OP_ADD_DEPENDENCY,           OP_OPT_BARRIER,
      OP_SEND,      OP_RECV};
  if (in->nctrl || (hlo_op_flags(in->op) & OPF_SIDE)) return false;
  for (size_t i = 0; i < sizeof never / sizeof *never; i++)
    if (never[i] == in->op) return false;
  return true;
}

static uint64_t mix(uint64_t h, uint64_t v) { return (h ^ v) * 0x100000001b3ull; }

static uint64_t hash_instr(const HInstr *in) {
  uint64_t h = 0xcbf29ce484222325ull;
  h = mix(h, (uint64_t)in->op);
  h = mix(h, (uint64_t)in->shape.dt);
  for (int i = 0; i < in->shape.rank; i++)
    h = mix(h, (uint64_t)in->shape.dims[i]);
  for (int k = 0; k < in->nops; k++)
    h = mix(h, (uint64_t)(uintptr_t)in->ops[k]);
  for (int i = 0; i < in->dims.n; i++)
    h = mix(h, (uint64_t)in->dims.v[i]);
  h = mix(h, (uint64_t)in->tuple_index);
  if (in->op == OP_CONSTANT && in->literal && hlo_shape_is_array(&in->literal->shape)) {
    const uint8_t *d = in->literal->data;
    size_t n = hlo_shape_bytes(&in->literal->shape);
    for (size_t i = 0; i < n && i < 4096; i++)
      h = mix(h, d[i]);
  }
  return h;
}

static bool same(const HInstr *a, const HInstr *b) {
  if (a->op != b->op || a->nops != b->nops || !hlo_shape_eq_layout(&a->shape, &b->shape))
    return false;
  for (int k = 0; k < a->nops; k++)
    if (a->ops[k] != b->ops[k]) return false;
  return attrs_eq(a, b, 0);
}

/* Open-addressing table of the representatives of one computation. */
typedef struct CseTable {
  size_t cap;   /* slots, a power of two at least twice the instruction count */
  HInstr **tab; /* representative per slot (NULL: empty) */
  uint64_t *hs; /* its hash */
} CseTable;

/* The rewrite rule (opt_rewrite_comp): the earlier equal instruction, or NULL after making in
 * the representative of its value. */
static HInstr *cse_rule(HComp *c, HInstr *in, PassCtx *pc, void *ctx) {
  (void)c, (void)pc;
  CseTable *t = ctx;
  if (!mergeable(in)) return NULL;
  uint64_t h = hash_instr(in);
  size_t j = h & (t->cap - 1);
  for (; t->tab[j]; j = (j + 1) & (t->cap - 1))
    if (t->hs[j] == h && same(t->tab[j], in)) return t->tab[j];
  t->tab[j] = in;
  t->hs[j] = h;
  return NULL;
}

bool opt_cse(HModule *m, PassCtx *pc) {
  bool changed = false;
  for (int i = 0; i < m->ncomps; i++) {
    HComp *c = m->comps[i];
    CseTable t = {16, NULL, NULL};
    while (t.cap < 2 * (size_t)c->ninstrs)
      t.cap *= 2;
    t.tab = hlo_arena_alloc(pc->scratch, sizeof(HInstr *) * t.cap);
    t.hs = hlo_arena_alloc(pc->scratch, sizeof(uint64_t) * t.cap);
    changed |= opt_rewrite_comp(c, pc, cse_rule, &t);
  }
  return changed;
}
