/* layout/layout.h: layout assignment, realised as logical rewrites.
 *
 * hloc reads every array row-major (the interpreter and the CPU code generator alike), so a
 * "layout" is chosen by rewriting the graph: the physical order of a value is its logical
 * order, and changing it means inserting a transpose. The passes of this directory (listed
 * in optimizer/passes.def, run by the optimizer's pipeline in its "layout" stage) are:
 *   layout-normalize   interior layouts become row-major (the entry interface must be);
 *   transpose-fold     transposes feeding dot/convolution operands become dimension numbers;
 *   conv-layout        every convolution takes the target's canonical form (OptOpts.conv_layout:
 *                      NHWC = input b01f, kernel 01io, output b01f, the default; or NCHW = bf01,
 *                      oi01, bf01), with transposes around it;
 *   transpose-sink     transposes move towards the users through elementwise ops, broadcasts,
 *                      reductions, windows, pads, slices and reverses, so that opposite
 *                      transposes meet and cancel (algsimp) and activations stay NHWC.
 * Pass entry points are declared in optimizer.h (from passes.def); this header holds the
 * helpers the files share. Transposes use HLO's convention: out dim i is operand dim p[i]. */
#ifndef HLOC_LAYOUT_H
#define HLOC_LAYOUT_H

#include "optimizer.h"

/* ------------------------------------------------------------------ transpose.c helpers */

/* inv[p[i]] = i. */
void layout_perm_inverse(int n, const int64_t *p, int64_t *inv);
/* The row-major array shape with dims[p[i]] as dimension i. */
Shape layout_permuted_shape(DType dt, int n, const int64_t *dims, const int64_t *p);
/* Whether p is 0, 1, ..., n-1. */
bool layout_perm_is_identity(int n, const int64_t *p);
/* transpose(x, p) as a new instruction appended to c. A constant x gives a new constant with
 * the transposed literal (so weights fold without the constant folder's size limit), a
 * transpose x is composed with, an identity permutation returns x itself. */
HInstr *layout_transpose(HComp *c, HInstr *x, const int64_t *p);
/* The literal transpose(l, p), allocated in a. */
Literal *layout_literal_transpose(HArena *a, const Literal *l, const int64_t *p);
/* Where a canonical form puts the dimensions of a rank-r convolution: input and output
 * share batch 0, feature `feat` and spatial dims sp0, sp0+1, ...; the kernel has spatial
 * dims ksp0, ..., input feature kin and output feature kout. */
typedef struct LayoutConvPos {
  int feat, sp0;       /* input/output feature dim, first spatial dim */
  int ksp0, kin, kout; /* kernel: first spatial dim, input and output feature dims */
} LayoutConvPos;
LayoutConvPos layout_conv_pos(int r, OptConvLayout form);
/* Whether convolution in has the canonical dimension numbers of form (b01f_01io->b01f for
 * NHWC, bf01_oi01->bf01 for NCHW). */
bool layout_conv_is_canonical(const HInstr *in, OptConvLayout form);

#endif
