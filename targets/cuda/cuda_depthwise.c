/* targets/cuda/cuda_depthwise.c: depthwise convolutions (one input channel per group) as one
 * generated kernel with their fusion's epilogue.
 *
 * cuDNN's grouped algorithms ran depthwise convolutions at a third of XLA's speed; the
 * elemental generator's form (one output element a thread, the taps' indices recomputed per
 * element) at two thirds. Here a thread of a grid-stride loop takes four consecutive channels
 * of one output pixel: per tap, the input's four channels and the tap's four weights are read
 * as one 16-byte vector each (channels are minor: the conv-layout pass keeps depthwise
 * convolutions NHWC for this target, OptOpts.depthwise_nhwc) and multiplied-added into four
 * f32 sums; taps outside the input (padding) read a clamped address and add zero. The taps are
 * unrolled (at most CD_MAX_TAPS). The four sums enter the elemental cache at their output
 * indices and the fusion's elementwise epilogue (bias, activation) is generated per channel.
 * Taken for f32 2-D convolutions b01f_01io->b01f of unit base dilation whose input and kernel
 * are entry values with storage (cuda_direct_value) and whose channels are a multiple of 4 (a
 * depthwise multiplier of 1); addresses not 16-byte aligned take the same loop with element loads.
 */
#include "cuda_impl.h"
#include "layout.h"

#include <string.h>

#define CD_MAX_TAPS 49 /* window elements unrolled, at most (7 x 7) */

typedef struct CdCtx {
  HInstr *in;              /* the entry instruction (the conv, or its fusion) */
  const HInstr *conv;      /* the convolution (a member of in's body, or in) */
  const HInstr *x, *w;     /* its operands as entry values */
  const HInstr *root;      /* what the kernel stores: the fusion's root, or the conv */
  LLVMValueRef out;        /* the output's storage */
  int64_t H, W, C, KH, KW; /* input size, channels, window */
  int64_t sh, sw, ph, pw;  /* strides, low paddings */
  int64_t dh, dw;          /* window dilations */
  bool vec;                /* this copy of the loop uses vector loads */
  CuStep *st;              /* the kernel's step */
  Shape grid;              /* [N, P, Q, C / 4]: a thread's four channels */
} CdCtx;

/* f32 elements [i, i + 4) of entry value x (a vector, or four loads). */
static LLVMValueRef cd_load4(GenKern *k, const CdCtx *c, const HInstr *x, LLVMValueRef i) {
  LLVMBuilderRef B = k->B;
  LLVMValueRef base = k->cg->buffer_fn(k, x);
  LLVMTypeRef f32 = k->cg->f32, vt = LLVMVectorType(f32, 4);
  if (c->vec) {
    LLVMValueRef v = LLVMBuildLoad2(B, vt, LLVMBuildInBoundsGEP2(B, f32, base, &i, 1, ""), "");
    LLVMSetAlignment(v, 16);
    return v;
  }
  LLVMValueRef v = LLVMGetUndef(vt);
  for (int j = 0; j < 4; j++) {
    LLVMValueRef ij = LLVMBuildNSWAdd(B, i, gen_i64(k, j), "");
    LLVMValueRef e = LLVMBuildLoad2(B, f32, LLVMBuildInBoundsGEP2(B, f32, base, &ij, 1, ""), "");
    v = LLVMBuildInsertElement(B, v, e, gen_i64(k, j), "");
  }
  return v;
}

static LLVMValueRef cd_fma4(GenKern *k, LLVMValueRef a, LLVMValueRef b, LLVMValueRef acc) {
  LLVMTypeRef vt = LLVMTypeOf(acc);
  LLVMValueRef args[3] = {a, b, acc};
  return cuda_intrinsic(k, "llvm.fma", vt, args, 3);
}

/* idx = (n, p, q, channel group): the four sums, then the epilogue per channel. */
static bool cd_body(GenKern *k, LLVMValueRef *idx, void *vctx) {
  CdCtx *c = vctx;
  LLVMBuilderRef B = k->B;
  LLVMValueRef c0 = LLVMBuildNSWMul(B, idx[3], gen_i64(k, 4), "");
  LLVMValueRef acc = LLVMConstNull(LLVMVectorType(k->cg->f32, 4));
  LLVMValueRef zero = gen_i64(k, 0);
  LLVMValueRef nrow = LLVMBuildNSWMul(B, idx[0], gen_i64(k, c->H), "");
  for (int64_t r = 0; r < c->KH; r++) {
    LLVMValueRef ih = LLVMBuildNSWAdd(B, LLVMBuildNSWMul(B, idx[1], gen_i64(k, c->sh), ""),
                                      gen_i64(k, r * c->dh - c->ph), "");
    LLVMValueRef okh = LLVMBuildICmp(B, LLVMIntULT, ih, gen_i64(k, c->H), "");
    LLVMValueRef ihc = LLVMBuildSelect(B, okh, ih, zero, "");
    LLVMValueRef row = LLVMBuildNSWMul(B, LLVMBuildNSWAdd(B, nrow, ihc, ""), gen_i64(k, c->W), "");
    for (int64_t s = 0; s < c->KW; s++) {
      LLVMValueRef iw = LLVMBuildNSWAdd(B, LLVMBuildNSWMul(B, idx[2], gen_i64(k, c->sw), ""),
                                        gen_i64(k, s * c->dw - c->pw), "");
      LLVMValueRef ok =
          LLVMBuildAnd(B, okh, LLVMBuildICmp(B, LLVMIntULT, iw, gen_i64(k, c->W), ""), "");
      LLVMValueRef iwc = LLVMBuildSelect(B, ok, iw, zero, "");
      LLVMValueRef xi = LLVMBuildNSWAdd(
          B, LLVMBuildNSWMul(B, LLVMBuildNSWAdd(B, row, iwc, ""), gen_i64(k, c->C), ""), c0, "");
      LLVMValueRef xv = cd_load4(k, c, c->x, xi);
      xv = LLVMBuildSelect(B, ok, xv, LLVMConstNull(LLVMTypeOf(xv)), "");
      LLVMValueRef wi = LLVMBuildNSWAdd(B, gen_i64(k, (r * c->KW + s) * c->C), c0, "");
      acc = cd_fma4(k, xv, cd_load4(k, c, c->w, wi), acc);
    }
  }
  for (int j = 0; j < 4 && !k->failed; j++) {
    LLVMValueRef oidx[4] = {idx[0], idx[1], idx[2], LLVMBuildNSWAdd(B, c0, gen_i64(k, j), "")};
    int mark = k->ncache;
    gen_cache_add(k, c->conv, 4, oidx, LLVMBuildExtractElement(B, acc, gen_i64(k, j), ""));
    LLVMValueRef v = gen_value(k, c->root, oidx);
    if (v) gen_store_elem(k, c->out, &c->in->shape, oidx, v);
    k->ncache = mark;
  }
  return !k->failed;
}

/* One copy of the grid loop: with vector loads or element loads (cuda_vec_split). */
static void cd_loop(GenKern *k, bool vec, void *vctx) {
  CdCtx *c = vctx;
  c->vec = vec;
  cuda_grid_loop(k, c->st, &c->grid, cd_body, c);
}

bool cuda_depthwise_kernel(CudaCg *cc, HInstr *in, const HInstr *conv, bool *taken) {
  *taken = false;
  const HInstr *root = in->op == OP_FUSION ? in->calls[0]->root : in;
  if (!opt_conv_depthwise(conv) || in->shape.dt == DT_TUPLE || conv->shape.rank != 4 ||
      !layout_conv_is_canonical(conv, OPT_CONV_NHWC) || conv->shape.dt != DT_F32 ||
      !hlo_shape_same_dims(&root->shape, &conv->shape))
    return true;
  const HInstr *x = cuda_direct_value(in, conv->ops[0]), *w = cuda_direct_value(in, conv->ops[1]);
  CuPtr px, pw;
  if (!x || !w || x->shape.dt != DT_F32 || w->shape.dt != DT_F32 || !cuda_ptr_of(cc, x, &px) ||
      !cuda_ptr_of(cc, w, &pw))
    return true;
  const Shape *xs = &conv->ops[0]->shape, *ks = &conv->ops[1]->shape;
  const WinDim *wd = conv->window->d;
  int64_t C = xs->dims[3];
  if (C % 4 || ks->dims[3] != C || ks->dims[0] * ks->dims[1] > CD_MAX_TAPS) return true;
  for (int i = 0; i < 2; i++)
    if (wd[i].base_dil != 1 || wd[i].reversal || wd[i].pad_lo < 0) return true;
  *taken = true;
  CuStep *st;
  GenKern *k = cuda_kbegin(cc, in, "depthwise", 0, NULL, NULL, &st);
  cuda_kbind_fusion(k, in);
  CdCtx c = {in,
             conv,
             x,
             w,
             root,
             cuda_kbuffer(k, in),
             xs->dims[1],
             xs->dims[2],
             C,
             ks->dims[0],
             ks->dims[1],
             wd[0].stride,
             wd[1].stride,
             wd[0].pad_lo,
             wd[1].pad_lo,
             wd[0].win_dil,
             wd[1].win_dil,
             false,
             NULL,
             {0}};
  int64_t gd[4] = {conv->shape.dims[0], conv->shape.dims[1], conv->shape.dims[2], C / 4};
  c.st = st;
  c.grid = hlo_shape_array(DT_F32, 4, gd);
  const HInstr *leaf[2] = {x, w};
  cuda_vec_split(k, cuda_vec_aligned(k, leaf, 2, 4), cd_loop, &c);
  cc->ndepthwise++;
  return cuda_kend(k);
}
