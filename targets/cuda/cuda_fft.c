/* targets/cuda/cuda_fft.c: XLA's fft (FFT, IFFT, RFFT, IRFFT) on the GPU through cuFFT.
 *
 * XLA transforms the innermost len(fft_length) dims (1 to 3) of its operand; in dense row-major
 * storage those are, line after line, exactly cuFFT's "basic data layout": batch transforms of
 * prod(fft_length) contiguous elements, a real transform's complex side holding n/2 + 1 bins of
 * its last dim (what XLA's RFFT returns and IRFFT takes). So one entry fft becomes one
 * CU_STEP_FFT: cufftPlanMany(rank, fft_length, NULL embeds, type, batch) made once per CUDA
 * context by NAME_cuda_init (cuda_host.c), cufftSetStream and cufftExec{C2C,Z2Z,R2C,D2Z,C2R,Z2D}
 * on the caller's stream under the lock (a plan is not safe to use from two threads at once).
 * Arithmetic is in the component type (f32 for c64), as XLA's GPU FFT, which is cuFFT too.
 *
 * cuFFT computes unnormalized inverses; XLA's IFFT and IRFFT divide by N = prod(fft_length),
 * so those steps are followed by a kernel scaling the result by 1/N (rounded once from double).
 * cuFFT's C2R transforms overwrite their input: IRFFT's operand is first copied to scratch after
 * the heap (cuda_scratch) and transformed from there. cuFFT allocates each plan's work area
 * itself, in the context, at init. Lengths, batch and the operand's element count must fit
 * cuFFT's int sizes; the operand and result must be row-major (what the CUDA target's plans
 * hold; a located error otherwise). */
#include "cuda_impl.h"

#include <string.h>

/* Whether s is laid out row-major (no layout, or the descending one). */
static bool cf_row_major(const Shape *s) {
  if (!s->has_layout) return true;
  for (int i = 0; i < s->rank; i++)
    if (s->m2m[i] != s->rank - 1 - i) return false;
  return true;
}

/* cuFFT's transform types: the cufftType value, its name and its exec function. */
static const struct {
  int type;
  const char *name, *exec;
} cf_types[] = {{0x29, "CUFFT_C2C", "cufftExecC2C"}, {0x69, "CUFFT_Z2Z", "cufftExecZ2Z"},
                {0x2a, "CUFFT_R2C", "cufftExecR2C"}, {0x6a, "CUFFT_D2Z", "cufftExecD2Z"},
                {0x2c, "CUFFT_C2R", "cufftExecC2R"}, {0x6c, "CUFFT_Z2D", "cufftExecZ2D"}};

/* The cufftType of fft kind ft computed in component type pt (f32 or f64). */
static int cf_type(FftType ft, DType pt) {
  int i = ft == FFT_RFFT ? 2 : ft == FFT_IRFFT ? 4 : 0; /* R2C, C2R, else C2C */
  return cf_types[i + (pt == DT_F64)].type;
}

static int cf_index(const CuStep *s) {
  for (int i = 0; i < (int)(sizeof cf_types / sizeof *cf_types); i++)
    if (cf_types[i].type == s->fft_kind) return i;
  return 0;
}

const char *cuda_fft_exec_name(const CuStep *s) { return cf_types[cf_index(s)].exec; }
const char *cuda_fft_type_name(const CuStep *s) { return cf_types[cf_index(s)].name; }

typedef struct ScaleCtx {
  const HInstr *in; /* the fft */
  LLVMValueRef out; /* its storage */
  double scale;     /* 1 / N */
} ScaleCtx;

/* out[idx] *= 1/N, both parts of a complex value. */
static bool cf_scale_body(GenKern *k, LLVMValueRef *idx, void *vctx) {
  ScaleCtx *c = vctx;
  const Shape *s = &c->in->shape;
  bool cplx = hlo_dtype_is_complex(s->dt);
  DType pt = cplx ? hlo_dtype_component(s->dt) : s->dt;
  LLVMValueRef f = LLVMConstReal(gen_reg_type(k->cg, pt), c->scale);
  LLVMValueRef v = gen_load_elem(k, c->out, s, idx);
  if (!cplx) {
    v = LLVMBuildFMul(k->B, v, f, "");
  } else {
    for (unsigned j = 0; j < 2; j++) {
      LLVMValueRef p = LLVMBuildFMul(k->B, LLVMBuildExtractValue(k->B, v, j, ""), f, "");
      v = LLVMBuildInsertValue(k->B, v, p, j, "");
    }
  }
  gen_store_elem(k, c->out, s, idx, v);
  return true;
}

/* The fft's form, checked: its component type, lengths and batch count (false: reported). */
static bool cf_form(CudaCg *cc, const HInstr *in, DType *pt, int64_t *batch) {
  const Shape *xs = &in->ops[0]->shape, *os = &in->shape;
  int R = os->rank, r = in->fft_length.n;
  DType ct = in->fft_type == FFT_IRFFT ? xs->dt : os->dt;
  const char *why = NULL;
  if (r < 1 || r > 3 || r > R || xs->rank != R || !hlo_dtype_is_complex(ct))
    why = "only 1 to 3 innermost dims of c64/c128 values (f32/f64 for the real side)";
  else if (!cf_row_major(xs) || !cf_row_major(os))
    why = "operand and result must be row-major";
  int64_t b = 1;
  for (int i = 0; i < R - r && !why; i++)
    b *= os->dims[i];
  for (int i = 0; i < r && !why; i++)
    if (in->fft_length.v[i] < 1 || in->fft_length.v[i] > INT32_MAX) why = "a length beyond int";
  if (!why && (b > INT32_MAX || hlo_shape_elems(xs) > INT32_MAX || hlo_shape_elems(os) > INT32_MAX))
    why = "more elements than cuFFT's int sizes take";
  if (why) {
    hlo_err_at(cc->cg.err, in, "CUDA target: fft: %s over %d dims of %s: %s",
               hlo_fft_type_name(in->fft_type), r, hlo_dtype_name(xs->dt), why);
    return false;
  }
  *pt = hlo_dtype_component(ct);
  *batch = b;
  return true;
}

bool cuda_fft(CudaCg *cc, HInstr *in) {
  DType pt;
  int64_t batch;
  if (!cf_form(cc, in, &pt, &batch)) return false;
  const HInstr *x = in->ops[0];
  CuPtr src, dst;
  if (!cuda_ptr_of(cc, x, &src) || !cuda_ptr_of(cc, in, &dst)) {
    hlo_err_at(cc->cg.err, in,
               "CUDA target: fft: an operand without device storage (a constant) "
               "is not supported");
    return false;
  }
  if (hlo_shape_elems(&x->shape) == 0) return true;
  FftType ft = in->fft_type;
  if (ft == FFT_IRFFT) { /* C2R overwrites its input: transform a copy */
    CuStep *c = cuda_add_step(cc, CU_STEP_COPY, in);
    c->bytes = (int64_t)hlo_shape_bytes(&x->shape);
    c->src = src, c->dst = cuda_scratch(cc, memplan_align(c->bytes));
    src = c->dst;
  }
  CuStep *s = cuda_add_step(cc, CU_STEP_FFT, in);
  s->fidx = cc->nffts++;
  s->fft_kind = cf_type(ft, pt);
  s->fft_dir = ft == FFT_IFFT || ft == FFT_IRFFT ? 1 : -1; /* (C2R takes no direction) */
  s->fft_rank = in->fft_length.n;
  double N = 1;
  for (int i = 0; i < s->fft_rank; i++)
    s->fft_n[i] = in->fft_length.v[i], N *= (double)in->fft_length.v[i];
  s->batch = batch;
  s->x = src, s->y = dst;
  if (ft != FFT_IFFT && ft != FFT_IRFFT) return true;
  CuStep *st;
  GenKern *k = cuda_kbegin(cc, in, "fft-scale", 0, NULL, NULL, &st);
  ScaleCtx c = {in, cuda_kbuffer(k, in), 1.0 / N};
  cuda_grid_loop(k, st, &in->shape, cf_scale_body, &c);
  return cuda_kend(k);
}
