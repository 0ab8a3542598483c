/* targets/cuda/cuda_attention.h: what the attention kernels share (private to
 * cuda_attention.c, the CUDA-core kernels and the slices' combination, and
 * cuda_attention_mma.c, the tensor-core kernel).
 *
 * A plan (AttK) is the matched attention (OptAttn, whose batch, query and key dims let a kernel
 * turn a batch item, a query row and a key number into the S index the fusion's elementwise
 * ops are generated at) with the kernel's tiles and key slices. The helpers are the few IR
 * pieces both kernels build with. */
#ifndef HLOC_CUDA_ATTENTION_H
#define HLOC_CUDA_ATTENTION_H

#include "cuda_impl.h"
#include "optimizer.h"

typedef struct AttK {
  OptAttn a;
  const HInstr *q, *kk, *v; /* the products' operands in the fusion's body */
  int srank;                /* the scores' rank */
  int64_t qt, nqt;          /* query rows per block, query tiles */
  int64_t ns, chunk;        /* key slices, keys per slice */
  int dt, dvt;              /* head elements per lane: ceil(dh / 32), ceil(dv / 32) */
  int kb; /* CUDA cores: keys per step of a warp (qt * kb pairs, a power of two) */
} AttK;

/* One query row of a block: its S index (batch and query dims set), whether it exists (the last
 * tile may be short) and its row number. */
typedef struct AttRow {
  LLVMValueRef sidx[HLO_MAX_RANK];
  LLVMValueRef valid;
  LLVMValueRef qrow;
} AttRow;

/* The dims of the match (tiles and slices are the kernel's to set). */
void cuda_at_plan(AttK *t, const OptAttn *match);
/* Key slices for t->nqt query tiles: the fewest waves of `resident` blocks per SM times the keys
 * per slice (the slowest SM's time), ties to fewer slices; at least minkeys per slice. */
void cuda_at_slices(AttK *t, int64_t resident, int64_t minkeys);

LLVMValueRef cuda_at_f(GenKern *k, double v);         /* an f32 constant */
LLVMValueRef cuda_at_exp(GenKern *k, LLVMValueRef x); /* exp(x) on the special function unit */
LLVMValueRef cuda_at_max(GenKern *k, LLVMValueRef x, LLVMValueRef y);
LLVMValueRef cuda_at_ld(GenKern *k, LLVMValueRef p); /* f32 load */
void cuda_at_st(GenKern *k, LLVMValueRef p, LLVMValueRef v);
/* The S index of row r (query row qrow of batch item b, clamped into range). */
void cuda_at_row(GenKern *k, const AttK *t, LLVMValueRef b, LLVMValueRef qrow, AttRow *r);
/* Store f32 v into the output at row r, head element c, when ok. */
void cuda_at_store1(GenKern *k, HInstr *in, const OptAttn *a, LLVMValueRef out, const AttRow *r,
                    LLVMValueRef c, LLVMValueRef ok, LLVMValueRef v);
LLVMValueRef cuda_at_slot(GenKern *k, LLVMValueRef p, LLVMValueRef i); /* f32 slot i of p */
/* A row's state as the kernels keep it in shared memory and the slices write it for the
 * combining kernel: max, sum and 32 * dvt accumulators, in f32 slots; and the bytes of every
 * row's slices' states (0 without slices). */
int64_t cuda_at_slots(const AttK *t);
int64_t cuda_at_part_bytes(const AttK *t);
/* x combined over the lanes of each group of w (a power of two) with max or add. */
LLVMValueRef cuda_at_group(GenKern *k, LLVMValueRef x, int w, bool max);
/* The second kernel of a split: combines each row's slices (partials at pp: per row and slice,
 * max, sum and 32 * dvt accumulators) and writes the row. */
bool cuda_at_finish(CudaCg *cc, HInstr *in, const AttK *t, CuPtr pp);

/* The tensor-core kernel for 16-bit operands (cuda_attention_mma.c): whether it takes plan t,
 * and its kernels. */
bool cuda_attention_mma_ok(const AttK *t);
bool cuda_attention_mma(CudaCg *cc, HInstr *in, AttK *t);

#endif
