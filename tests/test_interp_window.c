/* tests/test_interp_window.c: the interpreter's window and indexing ops (hlo/interp_window.c).
 *
 * Small HLO text modules, each with hand-computed expected values written beside it:
 * convolution (1-D/2-D, dim_labels, stride, padding, lhs/rhs dilation, reversal, feature and
 * batch groups), reduce-window, select-and-scatter, gather, scatter, dynamic-slice,
 * dynamic-update-slice and pad. A property test checks convolution against a naive reference
 * written here (explicit lhs dilation + padding, explicit kernel dilation and reversal, then
 * a plain strided sliding window) on random inputs over random dimension-number
 * permutations, groups and windows, with a fixed seed. Invalid attributes must produce a
 * located error. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hlo.h"

/* A parsed module and its result; freed by run_end. */
typedef struct Run {
  HModule *m; /* the module */
  HArena *a;  /* interpreter arena holding the result */
  Literal *r; /* the result */
  HErr err;   /* error from parsing or running */
} Run;

static Run run_args(const char *text, Literal *const *args, int nargs, HArena *a) {
  Run r = {0};
  r.a = a ? a : hlo_arena_new();
  r.m = hlo_parse_text(text, strlen(text), "window_test.hlo", &r.err);
  cr_assert(r.m, "parse failed: %s\n%s", r.err.msg, text);
  r.r = hlo_interp_run(r.m, r.a, args, nargs, &r.err);
  return r;
}

static Run run_ok(const char *text) {
  Run r = run_args(text, NULL, 0, NULL);
  cr_assert(r.r, "interpreter failed: %s", r.err.msg);
  return r;
}

static void run_end(Run *r) {
  hlo_module_free(r->m);
  hlo_arena_free(r->a);
}

/* Expect an array result of n elements equal (within 1e-5 relative) to want. */
static void expect_vals(const Literal *l, const double *want, int64_t n) {
  cr_assert(l && hlo_shape_is_array(&l->shape));
  cr_assert_eq(hlo_shape_elems(&l->shape), n, "result has %lld elements, want %lld",
               (long long)hlo_shape_elems(&l->shape), (long long)n);
  for (int64_t i = 0; i < n; i++) {
    double g = hlo_literal_get_f64(l, i);
    cr_expect(fabs(g - want[i]) <= 1e-5 * (1 + fabs(want[i])), "element %lld: got %g, want %g",
              (long long)i, g, want[i]);
  }
}

#define EXPECT(l, ...)                                                                             \
  do {                                                                                             \
    const double want_[] = {__VA_ARGS__};                                                          \
    expect_vals((l), want_, (int64_t)(sizeof want_ / sizeof *want_));                              \
  } while (0)

static void expect_dims(const Literal *l, int rank, const int64_t *dims) {
  cr_assert_eq(l->shape.rank, rank);
  for (int d = 0; d < rank; d++)
    cr_expect_eq(l->shape.dims[d], dims[d], "dim %d", d);
}

/* ------------------------------------------------------------------ convolution */

#define CONV1D(win, kvals, out)                                                                    \
  "HloModule m\n"                                                                                  \
  "ENTRY e {\n"                                                                                    \
  "  x = f32[1,1,5] constant({ { {1, 2, 3, 4, 5} } })\n"                                           \
  "  k = f32[1,1,3] constant({ { " kvals " } })\n"                                                 \
  "  ROOT out1d = f32[1,1," #out "] convolution(x, k), window={" win                               \
  "}, dim_labels=bf0_oi0->bf0\n"                                                                   \
  "}\n"

Test(interp_window, conv1d_valid) {
  /* out[i] = x[i] + 2 x[i+1] + 3 x[i+2] */
  Run r = run_ok(CONV1D("size=3", "{1, 2, 3}", 3));
  EXPECT(r.r, 14, 20, 26);
  run_end(&r);
}

Test(interp_window, conv1d_stride_padding) {
  /* padded input 0 1 2 3 4 5 0, taps at -1, 1, 3: 0+2+6, 2+6+12, 4+10+0 */
  Run r = run_ok(CONV1D("size=3 stride=2 pad=1_1", "{1, 2, 3}", 3));
  EXPECT(r.r, 8, 20, 14);
  run_end(&r);
}

Test(interp_window, conv1d_negative_padding_crops) {
  /* input cropped to 2 3 4 5: 2+6+12, 3+8+15 */
  Run r = run_ok(CONV1D("size=3 pad=-1_0", "{1, 2, 3}", 2));
  EXPECT(r.r, 20, 26);
  run_end(&r);
}

Test(interp_window, conv1d_window_reversal) {
  /* kernel used as 3 2 1 */
  Run r = run_ok(CONV1D("size=3 rhs_reversal=1", "{1, 2, 3}", 3));
  EXPECT(r.r, 10, 16, 22);
  run_end(&r);
}

Test(interp_window, conv1d_rhs_dilation) {
  /* taps x0, x2, x4: 1 + 6 + 15 */
  Run r = run_ok(CONV1D("size=3 rhs_dilate=2", "{1, 2, 3}", 1));
  EXPECT(r.r, 22);
  run_end(&r);
}

Test(interp_window, conv1d_lhs_dilation_transposed) {
  /* dilated and padded input: 0 0 1 0 2 0 3 0 4 0 5 0 0; out[j] = d[j] + 2 d[j+1] + 3 d[j+2] */
  Run r = run_ok(CONV1D("size=3 pad=2_2 lhs_dilate=2", "{1, 2, 3}", 11));
  EXPECT(r.r, 3, 2, 7, 4, 11, 6, 15, 8, 19, 10, 5);
  run_end(&r);
}

Test(interp_window, conv2d_nchw_oihw) {
  /* x = [[1,2,3],[4,5,6],[7,8,9]]; kernel 0 = identity diagonal, kernel 1 = all ones */
  Run r = run_ok("HloModule m\n"
                 "ENTRY e {\n"
                 "  x = f32[1,1,3,3] constant({ { { {1,2,3}, {4,5,6}, {7,8,9} } } })\n"
                 "  k = f32[2,1,2,2] constant({ { { {1,0}, {0,1} } }, { { {1,1}, {1,1} } } })\n"
                 "  ROOT c = f32[1,2,2,2] convolution(x, k), window={size=2x2}, "
                 "dim_labels=bf01_oi01->bf01\n"
                 "}\n");
  EXPECT(r.r, 6, 8, 12, 14, 12, 16, 24, 28);
  run_end(&r);
}

Test(interp_window, conv2d_nhwc_hwio) {
  /* the same convolution in NHWC / HWIO: output element [h][w][o] */
  Run r =
      run_ok("HloModule m\n"
             "ENTRY e {\n"
             "  x = f32[1,3,3,1] constant({ { {{1},{2},{3}}, {{4},{5},{6}}, {{7},{8},{9}} } })\n"
             "  k = f32[2,2,1,2] constant({ { {{1,1}}, {{0,1}} }, { {{0,1}}, {{1,1}} } })\n"
             "  ROOT c = f32[1,2,2,2] convolution(x, k), window={size=2x2}, "
             "dim_labels=b01f_01io->b01f\n"
             "}\n");
  EXPECT(r.r, 6, 12, 8, 16, 12, 24, 14, 28);
  run_end(&r);
}

Test(interp_window, conv_feature_groups) {
  /* 4 input channels, 2 groups: out0 = 1*x0 + 10*x1, out1 = 100*x2 + 1000*x3 */
  Run r = run_ok("HloModule m\n"
                 "ENTRY e {\n"
                 "  x = f32[1,4,1] constant({ { {1}, {2}, {3}, {4} } })\n"
                 "  k = f32[2,2,1] constant({ { {1}, {10} }, { {100}, {1000} } })\n"
                 "  ROOT c = f32[1,2,1] convolution(x, k), window={size=1}, "
                 "dim_labels=bf0_oi0->bf0, feature_group_count=2\n"
                 "}\n");
  EXPECT(r.r, 21, 4300);
  run_end(&r);
}

Test(interp_window, conv_depthwise) {
  /* depthwise 2-tap filter per channel: ch0 with {1,1}, ch1 with {1,-1} */
  Run r = run_ok("HloModule m\n"
                 "ENTRY e {\n"
                 "  x = f32[1,3,2] constant({ { {1, 10}, {2, 20}, {4, 40} } })\n"
                 "  k = f32[2,1,2] constant({ { {1, 1} }, { {1, -1} } })\n"
                 "  ROOT c = f32[1,2,2] convolution(x, k), window={size=2}, "
                 "dim_labels=b0f_0io->b0f, feature_group_count=2\n"
                 "}\n");
  /* output [w][f]: w0: 1+2=3, 10-20=-10; w1: 2+4=6, 20-40=-20 */
  EXPECT(r.r, 3, -10, 6, -20);
  run_end(&r);
}

Test(interp_window, conv_batch_groups) {
  /* batch 4 split in 2 groups of 2; output feature o uses batch group o:
   * out[b][o] = x[o*2 + b] * w[o] */
  Run r = run_ok("HloModule m\n"
                 "ENTRY e {\n"
                 "  x = f32[4,1,1] constant({ {{1}}, {{2}}, {{3}}, {{4}} })\n"
                 "  k = f32[2,1,1] constant({ {{10}}, {{100}} })\n"
                 "  ROOT c = f32[2,2,1] convolution(x, k), window={size=1}, "
                 "dim_labels=bf0_oi0->bf0, batch_group_count=2\n"
                 "}\n");
  EXPECT(r.r, 10, 300, 20, 400);
  run_end(&r);
}

Test(interp_window, conv_weight_gradient_fb01) {
  /* the form JAX emits for weight gradients: NCW activations labelled fb0 (the batch is
   * contracted), NOW output gradients labelled io0. x[n][c=1][3]: n0 = 1 2 3, n1 = 4 5 6;
   * dy[n][o=1][2]: n0 = 1 0, n1 = 0 1. dw[o][c][w] = sum_n sum_t x[n][w+t] dy[n][t]:
   * w0 = 1 + 5 = 6, w1 = 2 + 6 = 8 */
  Run r = run_ok("HloModule m\n"
                 "ENTRY e {\n"
                 "  x = f32[2,1,3] constant({ { {1,2,3} }, { {4,5,6} } })\n"
                 "  dy = f32[2,1,2] constant({ { {1,0} }, { {0,1} } })\n"
                 "  ROOT c = f32[1,1,2] convolution(x, dy), window={size=2}, "
                 "dim_labels=fb0_io0->fb0\n"
                 "}\n");
  EXPECT(r.r, 6, 8);
  run_end(&r);
}

Test(interp_window, conv_integer_and_f64) {
  Run r =
      run_ok("HloModule m\n"
             "ENTRY e {\n"
             "  x = s32[1,1,4] constant({ { {1, -2, 3, 4} } })\n"
             "  k = s32[1,1,2] constant({ { {3, 5} } })\n"
             "  ROOT c = s32[1,1,3] convolution(x, k), window={size=2}, dim_labels=bf0_oi0->bf0\n"
             "}\n");
  cr_expect_eq(r.r->shape.dt, DT_S32);
  EXPECT(r.r, 3 - 10, -6 + 15, 9 + 20);
  run_end(&r);
  r = run_ok("HloModule m\n"
             "ENTRY e {\n"
             "  x = f64[1,1,3] constant({ { {0.5, 0.25, 2} } })\n"
             "  k = f64[1,1,2] constant({ { {4, 8} } })\n"
             "  ROOT c = f64[1,1,2] convolution(x, k), window={size=2}, dim_labels=bf0_oi0->bf0\n"
             "}\n");
  EXPECT(r.r, 4, 17);
  run_end(&r);
  /* bf16 operands accumulate wide and round once: 256 + 1 + 1 = 258 is representable */
  r = run_ok("HloModule m\n"
             "ENTRY e {\n"
             "  x = bf16[1,1,3] constant({ { {256, 1, 1} } })\n"
             "  k = bf16[1,1,3] constant({ { {1, 1, 1} } })\n"
             "  ROOT c = bf16[1,1,1] convolution(x, k), window={size=3}, dim_labels=bf0_oi0->bf0\n"
             "}\n");
  cr_expect_eq(r.r->shape.dt, DT_BF16);
  EXPECT(r.r, 258);
  run_end(&r);
}

/* ---- property test: random convolutions against a naive reference */

static uint64_t rng_state;
static uint64_t rnd(void) {
  rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
  return rng_state >> 33;
}
static int64_t rint_in(int64_t lo, int64_t hi) {
  return lo + (int64_t)(rnd() % (uint64_t)(hi - lo + 1));
}

/* One random convolution in canonical terms; 3 spatial dims always (unused ones size 1). */
typedef struct RConv {
  int ns;                      /* real spatial dims */
  int64_t N, C, O, KI, G, B;   /* batch, in features, out features, per-group */
  int64_t in[3], k[3], out[3]; /* spatial sizes */
  int64_t st[3], lo[3], hi[3], ld[3], rd[3];
  bool rev[3];
  int lperm[5], kperm[5], operm[5]; /* position -> role: 0 batch/o, 1 feature/i, 2+s */
} RConv;

static void shuffle(int *p, int n) {
  for (int i = n - 1; i > 0; i--) {
    int j = (int)(rnd() % (uint64_t)(i + 1)), t = p[i];
    p[i] = p[j];
    p[j] = t;
  }
}

/* Naive reference: out[nb][o][y] in canonical order, computed by materialising the dilated
 * and padded input and the dilated (and reversed) kernel, then sliding with stride. */
static double *naive_conv(const RConv *c, const double *X /*[N][C][in]*/,
                          const double *K /*[O][KI][k]*/) {
  int64_t D[3], P[3], KD[3];
  for (int s = 0; s < 3; s++) {
    D[s] = (c->in[s] - 1) * c->ld[s] + 1;
    P[s] = D[s] + c->lo[s] + c->hi[s];
    KD[s] = (c->k[s] - 1) * c->rd[s] + 1;
  }
  int64_t insz = c->in[0] * c->in[1] * c->in[2], ksz = c->k[0] * c->k[1] * c->k[2];
  int64_t psz = P[0] * P[1] * P[2], kdsz = KD[0] * KD[1] * KD[2];
  int64_t outsz = c->out[0] * c->out[1] * c->out[2], NB = c->N / c->B;
  double *pad = calloc((size_t)(c->N * c->C * psz), sizeof(double));
  double *kd = calloc((size_t)(c->O * c->KI * kdsz), sizeof(double));
  double *y = calloc((size_t)(NB * c->O * outsz), sizeof(double));
  /* forward placement: input element j lands at j*ld + lo in the padded array */
  for (int64_t nc = 0; nc < c->N * c->C; nc++)
    for (int64_t a = 0; a < c->in[0]; a++)
      for (int64_t b = 0; b < c->in[1]; b++)
        for (int64_t d = 0; d < c->in[2]; d++) {
          int64_t q0 = a * c->ld[0] + c->lo[0], q1 = b * c->ld[1] + c->lo[1],
                  q2 = d * c->ld[2] + c->lo[2];
          if (q0 < 0 || q0 >= P[0] || q1 < 0 || q1 >= P[1] || q2 < 0 || q2 >= P[2]) continue;
          pad[nc * psz + (q0 * P[1] + q1) * P[2] + q2] =
              X[nc * insz + (a * c->in[1] + b) * c->in[2] + d];
        }
  for (int64_t oi = 0; oi < c->O * c->KI; oi++)
    for (int64_t a = 0; a < c->k[0]; a++)
      for (int64_t b = 0; b < c->k[1]; b++)
        for (int64_t d = 0; d < c->k[2]; d++) {
          int64_t sa = c->rev[0] ? c->k[0] - 1 - a : a, sb = c->rev[1] ? c->k[1] - 1 - b : b,
                  sd = c->rev[2] ? c->k[2] - 1 - d : d;
          kd[oi * kdsz + (a * c->rd[0] * KD[1] + b * c->rd[1]) * KD[2] + d * c->rd[2]] =
              K[oi * ksz + (sa * c->k[1] + sb) * c->k[2] + sd];
        }
  for (int64_t nb = 0; nb < NB; nb++)
    for (int64_t o = 0; o < c->O; o++) {
      int64_t g = o / (c->O / c->G), bg = o / (c->O / c->B), n = bg * NB + nb;
      for (int64_t y0 = 0; y0 < c->out[0]; y0++)
        for (int64_t y1 = 0; y1 < c->out[1]; y1++)
          for (int64_t y2 = 0; y2 < c->out[2]; y2++) {
            double acc = 0;
            for (int64_t i = 0; i < c->KI; i++) {
              const double *pp = pad + (n * c->C + g * c->KI + i) * psz;
              const double *kk = kd + (o * c->KI + i) * kdsz;
              for (int64_t t0 = 0; t0 < KD[0]; t0++)
                for (int64_t t1 = 0; t1 < KD[1]; t1++)
                  for (int64_t t2 = 0; t2 < KD[2]; t2++)
                    acc += pp[((y0 * c->st[0] + t0) * P[1] + y1 * c->st[1] + t1) * P[2] +
                              y2 * c->st[2] + t2] *
                           kk[(t0 * KD[1] + t1) * KD[2] + t2];
            }
            y[(nb * c->O + o) * outsz + (y0 * c->out[1] + y1) * c->out[2] + y2] = acc;
          }
    }
  free(pad);
  free(kd);
  return y;
}

/* Layout helpers: dims of a tensor whose position p holds role perm[p]. */
static void role_dims(const int *perm, int rank, const int64_t *role_size, int64_t *dims) {
  for (int p = 0; p < rank; p++)
    dims[p] = role_size[perm[p]];
}

static int64_t role_offset(const int *perm, int rank, const int64_t *dims,
                           const int64_t *role_idx) {
  int64_t off = 0;
  for (int p = 0; p < rank; p++)
    off = off * dims[p] + role_idx[perm[p]];
  return off;
}

static int append_dims(char *b, int rank, const int64_t *dims) {
  int k = 0;
  for (int p = 0; p < rank; p++)
    k += sprintf(b + k, "%s%lld", p ? "," : "", (long long)dims[p]);
  return k;
}

static bool random_conv(RConv *c) {
  memset(c, 0, sizeof *c);
  c->ns = (int)rint_in(1, 3);
  int mode = (int)rint_in(0, 2);
  c->G = mode == 1 ? rint_in(2, 3) : 1;
  c->B = mode == 2 ? rint_in(2, 3) : 1;
  c->KI = rint_in(1, 2);
  c->C = c->G * c->KI;
  c->O = c->G * c->B * rint_in(1, 2);
  c->N = c->B * rint_in(1, 2);
  for (int s = 0; s < 3; s++) {
    c->in[s] = c->k[s] = c->st[s] = c->ld[s] = c->rd[s] = 1;
    c->lo[s] = c->hi[s] = 0;
    c->rev[s] = false;
    if (s >= c->ns) {
      c->out[s] = 1;
      continue;
    }
    int64_t big = c->ns == 3 ? 4 : 6;
    c->in[s] = rint_in(1, big);
    c->k[s] = rint_in(1, 3);
    c->st[s] = rint_in(1, 2);
    c->ld[s] = rint_in(1, 2);
    c->rd[s] = rint_in(1, 2);
    c->lo[s] = rint_in(-1, 2);
    c->hi[s] = rint_in(-1, 2);
    c->rev[s] = rnd() & 1;
    int64_t padded = (c->in[s] - 1) * c->ld[s] + 1 + c->lo[s] + c->hi[s];
    int64_t win = (c->k[s] - 1) * c->rd[s] + 1;
    if (padded < win) return false;
    c->out[s] = (padded - win) / c->st[s] + 1;
  }
  int rank = c->ns + 2;
  for (int p = 0; p < rank; p++)
    c->lperm[p] = c->kperm[p] = c->operm[p] = p;
  shuffle(c->lperm, rank);
  shuffle(c->kperm, rank);
  shuffle(c->operm, rank);
  return true;
}

static char *conv_text(const RConv *c) {
  static const char lrole[] = "bf", krole[] = "oi";
  int rank = c->ns + 2;
  int64_t lsz[5] = {c->N, c->C}, ksz[5] = {c->O, c->KI}, osz[5] = {c->N / c->B, c->O};
  for (int s = 0; s < c->ns; s++) {
    lsz[2 + s] = c->in[s];
    ksz[2 + s] = c->k[s];
    osz[2 + s] = c->out[s];
  }
  int64_t ld[5], kd[5], od[5];
  role_dims(c->lperm, rank, lsz, ld);
  role_dims(c->kperm, rank, ksz, kd);
  role_dims(c->operm, rank, osz, od);
  char *t = malloc(4096);
  int k = sprintf(t, "HloModule prop\nENTRY e {\n  x = f32[");
  k += append_dims(t + k, rank, ld);
  k += sprintf(t + k, "] parameter(0)\n  w = f32[");
  k += append_dims(t + k, rank, kd);
  k += sprintf(t + k, "] parameter(1)\n  ROOT c = f32[");
  k += append_dims(t + k, rank, od);
  k += sprintf(t + k, "] convolution(x, w), window={size=");
  for (int s = 0; s < c->ns; s++)
    k += sprintf(t + k, "%s%lld", s ? "x" : "", (long long)c->k[s]);
  k += sprintf(t + k, " stride=");
  for (int s = 0; s < c->ns; s++)
    k += sprintf(t + k, "%s%lld", s ? "x" : "", (long long)c->st[s]);
  k += sprintf(t + k, " pad=");
  for (int s = 0; s < c->ns; s++)
    k += sprintf(t + k, "%s%lld_%lld", s ? "x" : "", (long long)c->lo[s], (long long)c->hi[s]);
  k += sprintf(t + k, " lhs_dilate=");
  for (int s = 0; s < c->ns; s++)
    k += sprintf(t + k, "%s%lld", s ? "x" : "", (long long)c->ld[s]);
  k += sprintf(t + k, " rhs_dilate=");
  for (int s = 0; s < c->ns; s++)
    k += sprintf(t + k, "%s%lld", s ? "x" : "", (long long)c->rd[s]);
  k += sprintf(t + k, " rhs_reversal=");
  for (int s = 0; s < c->ns; s++)
    k += sprintf(t + k, "%s%d", s ? "x" : "", c->rev[s] ? 1 : 0);
  k += sprintf(t + k, "}, dim_labels=");
  for (int p = 0; p < rank; p++)
    t[k++] = c->lperm[p] < 2 ? lrole[c->lperm[p]] : (char)('0' + c->lperm[p] - 2);
  t[k++] = '_';
  for (int p = 0; p < rank; p++)
    t[k++] = c->kperm[p] < 2 ? krole[c->kperm[p]] : (char)('0' + c->kperm[p] - 2);
  k += sprintf(t + k, "->");
  for (int p = 0; p < rank; p++)
    t[k++] = c->operm[p] < 2 ? lrole[c->operm[p]] : (char)('0' + c->operm[p] - 2);
  k += sprintf(t + k, ", feature_group_count=%lld, batch_group_count=%lld\n}\n", (long long)c->G,
               (long long)c->B);
  return t;
}

Test(interp_window, conv_property_random_dim_numbers) {
  rng_state = 12345;
  int done = 0;
  for (int iter = 0; done < 300 && iter < 3000; iter++) {
    RConv c;
    if (!random_conv(&c)) continue;
    int rank = c.ns + 2;
    int64_t lsz[5] = {c.N, c.C}, ksz[5] = {c.O, c.KI}, osz[5] = {c.N / c.B, c.O};
    for (int s = 0; s < c.ns; s++) {
      lsz[2 + s] = c.in[s];
      ksz[2 + s] = c.k[s];
      osz[2 + s] = c.out[s];
    }
    int64_t ldims[5], kdims[5], odims[5];
    role_dims(c.lperm, rank, lsz, ldims);
    role_dims(c.kperm, rank, ksz, kdims);
    role_dims(c.operm, rank, osz, odims);
    HArena *a = hlo_arena_new();
    Shape ls = hlo_shape_array(DT_F32, rank, ldims), ks = hlo_shape_array(DT_F32, rank, kdims);
    Literal *args[2] = {hlo_literal_new(a, &ls), hlo_literal_new(a, &ks)};
    int64_t insz = c.in[0] * c.in[1] * c.in[2], kwsz = c.k[0] * c.k[1] * c.k[2];
    double *X = malloc(sizeof(double) * (size_t)(c.N * c.C * insz));
    double *K = malloc(sizeof(double) * (size_t)(c.O * c.KI * kwsz));
    /* fill canonical arrays with small integers / 8 (exact in f32) and the literals alike */
    int64_t ri[5] = {0};
    for (ri[0] = 0; ri[0] < c.N; ri[0]++)
      for (ri[1] = 0; ri[1] < c.C; ri[1]++)
        for (int64_t sp = 0; sp < insz; sp++) {
          ri[2] = sp / (c.in[1] * c.in[2]);
          ri[3] = sp / c.in[2] % c.in[1];
          ri[4] = sp % c.in[2];
          double v = (double)rint_in(-16, 16) / 8;
          X[(ri[0] * c.C + ri[1]) * insz + sp] = v;
          hlo_literal_set_f64(args[0], role_offset(c.lperm, rank, ldims, ri), v);
        }
    for (ri[0] = 0; ri[0] < c.O; ri[0]++)
      for (ri[1] = 0; ri[1] < c.KI; ri[1]++)
        for (int64_t sp = 0; sp < kwsz; sp++) {
          ri[2] = sp / (c.k[1] * c.k[2]);
          ri[3] = sp / c.k[2] % c.k[1];
          ri[4] = sp % c.k[2];
          double v = (double)rint_in(-16, 16) / 8;
          K[(ri[0] * c.KI + ri[1]) * kwsz + sp] = v;
          hlo_literal_set_f64(args[1], role_offset(c.kperm, rank, kdims, ri), v);
        }
    double *Y = naive_conv(&c, X, K);
    char *text = conv_text(&c);
    Run r = run_args(text, args, 2, a);
    cr_assert(r.r, "iteration %d: %s\n%s", iter, r.err.msg, text);
    expect_dims(r.r, rank, odims);
    int64_t outsz = c.out[0] * c.out[1] * c.out[2];
    int bad = 0;
    for (ri[0] = 0; ri[0] < c.N / c.B; ri[0]++)
      for (ri[1] = 0; ri[1] < c.O; ri[1]++)
        for (int64_t sp = 0; sp < outsz; sp++) {
          ri[2] = sp / (c.out[1] * c.out[2]);
          ri[3] = sp / c.out[2] % c.out[1];
          ri[4] = sp % c.out[2];
          double want = Y[(ri[0] * c.O + ri[1]) * outsz + sp];
          double got = hlo_literal_get_f64(r.r, role_offset(c.operm, rank, odims, ri));
          if (fabs(got - want) > 1e-4 && bad++ < 3)
            cr_expect(false, "iteration %d: out[%lld][%lld][%lld] = %g, want %g\n%s", iter,
                      (long long)ri[0], (long long)ri[1], (long long)sp, got, want, text);
        }
    cr_assert_eq(bad, 0, "iteration %d: %d wrong elements", iter, bad);
    free(X);
    free(K);
    free(Y);
    free(text);
    run_end(&r);
    done++;
  }
  cr_expect_geq(done, 300, "only %d random convolutions were valid", done);
}

/* ------------------------------------------------------------------ reduce-window */

#define MAXC                                                                                       \
  "mx {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT m = f32[] maximum(a, b)\n}\n"
#define ADDC                                                                                       \
  "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n"

Test(interp_window, reduce_window_maxpool_padding) {
  /* 4x4 of 1..16, 3x3 window stride 2 with padding 1: maxima of the clipped windows */
  Run r = run_ok("HloModule m\n" MAXC "ENTRY e {\n"
                 "  x = f32[1,1,4,4] constant({ { { {1,2,3,4}, {5,6,7,8}, {9,10,11,12}, "
                 "{13,14,15,16} } } })\n"
                 "  init = f32[] constant(-inf)\n"
                 "  ROOT r = f32[1,1,2,2] reduce-window(x, init), "
                 "window={size=1x1x3x3 stride=1x1x2x2 pad=0_0x0_0x1_1x1_1}, to_apply=mx\n"
                 "}\n");
  EXPECT(r.r, 6, 8, 14, 16);
  run_end(&r);
}

Test(interp_window, reduce_window_avgpool_sum) {
  Run r = run_ok("HloModule m\n" ADDC "ENTRY e {\n"
                 "  x = f32[4,4] constant({ {1,2,3,4}, {5,6,7,8}, {9,10,11,12}, {13,14,15,16} })\n"
                 "  zero = f32[] constant(0)\n"
                 "  ROOT r = f32[2,2] reduce-window(x, zero), window={size=2x2 stride=2x2}, "
                 "to_apply=add\n"
                 "}\n");
  EXPECT(r.r, 14, 22, 46, 54);
  run_end(&r);
}

Test(interp_window, reduce_window_padding_is_skipped) {
  /* init 100 is added once per window, padding contributes nothing */
  Run r = run_ok("HloModule m\n" ADDC "ENTRY e {\n"
                 "  x = f32[3] constant({1, 2, 3})\n"
                 "  init = f32[] constant(100)\n"
                 "  ROOT r = f32[4] reduce-window(x, init), window={size=2 pad=1_1}, to_apply=add\n"
                 "}\n");
  EXPECT(r.r, 101, 103, 105, 103);
  run_end(&r);
}

Test(interp_window, reduce_window_base_and_window_dilation) {
  /* base dilation 2: 1 _ 2 _ 3; windows of 2: 1, 2, 2, 3 */
  Run r = run_ok("HloModule m\n" ADDC "ENTRY e {\n"
                 "  x = f32[3] constant({1, 2, 3})\n"
                 "  zero = f32[] constant(0)\n"
                 "  ROOT r = f32[4] reduce-window(x, zero), window={size=2 lhs_dilate=2}, "
                 "to_apply=add\n"
                 "}\n");
  EXPECT(r.r, 1, 2, 2, 3);
  run_end(&r);
  /* window dilation 2 over 1 2 3 4 5: x0+x2, x1+x3, x2+x4 */
  r = run_ok("HloModule m\n" ADDC "ENTRY e {\n"
             "  x = f32[5] constant({1, 2, 3, 4, 5})\n"
             "  zero = f32[] constant(0)\n"
             "  ROOT r = f32[3] reduce-window(x, zero), window={size=2 rhs_dilate=2}, "
             "to_apply=add\n"
             "}\n");
  EXPECT(r.r, 4, 6, 8);
  run_end(&r);
}

Test(interp_window, reduce_window_variadic_call_path) {
  /* (max of x, min of y) over windows of 2: a tuple-returning reducer goes through calls */
  Run r = run_ok("HloModule m\n"
                 "red {\n  a0 = f32[] parameter(0)\n  a1 = s32[] parameter(1)\n"
                 "  b0 = f32[] parameter(2)\n  b1 = s32[] parameter(3)\n"
                 "  m = f32[] maximum(a0, b0)\n  n = s32[] minimum(a1, b1)\n"
                 "  ROOT t = (f32[], s32[]) tuple(m, n)\n}\n"
                 "ENTRY e {\n"
                 "  x = f32[5] constant({3, 1, 4, 1, 5})\n"
                 "  y = s32[5] constant({2, 7, 1, 8, 2})\n"
                 "  ix = f32[] constant(-inf)\n"
                 "  iy = s32[] constant(2147483647)\n"
                 "  ROOT r = (f32[4], s32[4]) reduce-window(x, y, ix, iy), window={size=2}, "
                 "to_apply=red\n"
                 "}\n");
  cr_assert_eq(r.r->shape.dt, DT_TUPLE);
  cr_assert_eq(r.r->shape.ntuple, 2);
  EXPECT(r.r->elems[0], 3, 4, 4, 5);
  cr_expect_eq(r.r->elems[1]->shape.dt, DT_S32);
  EXPECT(r.r->elems[1], 2, 1, 1, 2);
  run_end(&r);
}

Test(interp_window, reduce_window_integer) {
  Run r = run_ok("HloModule m\n"
                 "mn {\n  a = s32[] parameter(0)\n  b = s32[] parameter(1)\n"
                 "  ROOT m = s32[] minimum(a, b)\n}\n"
                 "ENTRY e {\n"
                 "  x = s32[2,3] constant({ {5, -1, 7}, {3, 2, 0} })\n"
                 "  init = s32[] constant(2147483647)\n"
                 "  ROOT r = s32[1,2] reduce-window(x, init), window={size=2x2}, to_apply=mn\n"
                 "}\n");
  EXPECT(r.r, -1, -1);
  run_end(&r);
}

/* ------------------------------------------------------------------ select-and-scatter */

#define GEC                                                                                        \
  "ge {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"                                     \
  "  ROOT c = pred[] compare(a, b), direction=GE\n}\n"

Test(interp_window, select_and_scatter_maxpool_grad) {
  Run r = run_ok("HloModule m\n" GEC ADDC "ENTRY e {\n"
                 "  x = f32[6] constant({1, 5, 2, 5, 3, 0})\n"
                 "  s = f32[3] constant({10, 20, 30})\n"
                 "  z = f32[] constant(0)\n"
                 "  ROOT r = f32[6] select-and-scatter(x, s, z), window={size=2 stride=2}, "
                 "select=ge, scatter=add\n"
                 "}\n");
  EXPECT(r.r, 0, 10, 0, 20, 30, 0);
  run_end(&r);
}

Test(interp_window, select_and_scatter_ties_and_overlap) {
  /* GE keeps the first of equal elements; overlapping windows accumulate */
  Run r = run_ok("HloModule m\n" GEC ADDC "ENTRY e {\n"
                 "  x = f32[4] constant({2, 2, 2, 2})\n"
                 "  s = f32[3] constant({1, 2, 3})\n"
                 "  z = f32[] constant(0)\n"
                 "  ROOT r = f32[4] select-and-scatter(x, s, z), window={size=2}, select=ge, "
                 "scatter=add\n"
                 "}\n");
  EXPECT(r.r, 1, 2, 3, 0);
  run_end(&r);
  /* GT replaces the candidate on ties: the last of equal elements wins */
  r = run_ok("HloModule m\n"
             "gt {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
             "  ROOT c = pred[] compare(a, b), direction=GT\n}\n" ADDC "ENTRY e {\n"
             "  x = f32[4] constant({2, 2, 2, 2})\n"
             "  s = f32[3] constant({1, 2, 3})\n"
             "  z = f32[] constant(0)\n"
             "  ROOT r = f32[4] select-and-scatter(x, s, z), window={size=2}, select=gt, "
             "scatter=add\n"
             "}\n");
  EXPECT(r.r, 0, 1, 2, 3);
  run_end(&r);
}

Test(interp_window, select_and_scatter_padding_never_selected) {
  /* negative values with padding: [pad,-1] -> 0, [-1,-2] -> 0, [-2,pad] -> 1 */
  Run r = run_ok("HloModule m\n" GEC ADDC "ENTRY e {\n"
                 "  x = f32[2] constant({-1, -2})\n"
                 "  s = f32[3] constant({1, 10, 100})\n"
                 "  z = f32[] constant(0.5)\n"
                 "  ROOT r = f32[2] select-and-scatter(x, s, z), window={size=2 pad=1_1}, "
                 "select=ge, scatter=add\n"
                 "}\n");
  EXPECT(r.r, 11.5, 100.5);
  run_end(&r);
}

Test(interp_window, select_and_scatter_2d_called_select) {
  /* select written as LE with swapped operands: not the direct fast form, same meaning as GE */
  Run r = run_ok("HloModule m\n"
                 "sel {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
                 "  ROOT c = pred[] compare(b, a), direction=LE\n}\n" ADDC "ENTRY e {\n"
                 "  x = f32[4,4] constant({ {1,2,3,4}, {8,7,6,5}, {9,1,1,9}, {1,9,9,1} })\n"
                 "  s = f32[2,2] constant({ {1, 2}, {3, 4} })\n"
                 "  z = f32[] constant(0)\n"
                 "  ROOT r = f32[4,4] select-and-scatter(x, s, z), window={size=2x2 stride=2x2}, "
                 "select=sel, scatter=add\n"
                 "}\n");
  /* window maxima: (1,0)=8, (1,2)=6, (2,0)=9 first, (2,3)=9 first */
  EXPECT(r.r, 0, 0, 0, 0, 1, 0, 2, 0, 3, 0, 0, 4, 0, 0, 0, 0);
  run_end(&r);
}

/* ------------------------------------------------------------------ gather */

#define TABLE                                                                                      \
  "  t = f32[5,3] constant({ {0,1,2}, {10,11,12}, {20,21,22}, {30,31,32}, {40,41,42} })\n"

Test(interp_window, gather_embedding_index_vector_dim_1) {
  Run r = run_ok("HloModule m\nENTRY e {\n" TABLE "  i = s32[2,1] constant({ {3}, {1} })\n"
                 "  ROOT g = f32[2,3] gather(t, i), offset_dims={1}, collapsed_slice_dims={0}, "
                 "start_index_map={0}, index_vector_dim=1, slice_sizes={1,3}\n"
                 "}\n");
  EXPECT(r.r, 30, 31, 32, 10, 11, 12);
  run_end(&r);
}

Test(interp_window, gather_index_vector_dim_rank_and_clamping) {
  /* index_vector_dim == rank(indices): each index is a 1-vector; 7 clamps to 4, -2 to 0 */
  Run r = run_ok("HloModule m\nENTRY e {\n" TABLE "  i = s32[3] constant({4, 7, -2})\n"
                 "  ROOT g = f32[3,3] gather(t, i), offset_dims={1}, collapsed_slice_dims={0}, "
                 "start_index_map={0}, index_vector_dim=1, slice_sizes={1,3}\n"
                 "}\n");
  EXPECT(r.r, 40, 41, 42, 40, 41, 42, 0, 1, 2);
  run_end(&r);
}

Test(interp_window, gather_2d_starts_clamped_to_fit_slice) {
  /* slices of 1x2 at (1,2) -> clamped to (1,1); (-1,1) -> (0,1) */
  Run r = run_ok("HloModule m\nENTRY e {\n" TABLE "  i = s64[2,2] constant({ {1, 2}, {-1, 1} })\n"
                 "  ROOT g = f32[2,2] gather(t, i), offset_dims={1}, collapsed_slice_dims={0}, "
                 "start_index_map={0,1}, index_vector_dim=1, slice_sizes={1,2}\n"
                 "}\n");
  EXPECT(r.r, 11, 12, 1, 2);
  run_end(&r);
}

Test(interp_window, gather_index_vector_dim_0_and_unsigned) {
  /* index vectors along dim 0 of the indices: columns (2,0) and (0,2) */
  Run r = run_ok("HloModule m\nENTRY e {\n" TABLE "  i = u32[2,2] constant({ {2, 0}, {0, 2} })\n"
                 "  ROOT g = f32[2] gather(t, i), offset_dims={}, collapsed_slice_dims={0,1}, "
                 "start_index_map={0,1}, index_vector_dim=0, slice_sizes={1,1}\n"
                 "}\n");
  EXPECT(r.r, 20, 2);
  run_end(&r);
}

Test(interp_window, gather_batching_dims) {
  /* the form JAX emits for take_along_axis: row b reads column idx[b] */
  Run r = run_ok("HloModule m\nENTRY e {\n"
                 "  x = f32[2,3] constant({ {0, 1, 2}, {10, 11, 12} })\n"
                 "  i = s32[2,1,1] constant({ { {2} }, { {0} } })\n"
                 "  ROOT g = f32[2,1] gather(x, i), offset_dims={}, collapsed_slice_dims={1}, "
                 "start_index_map={1}, operand_batching_dims={0}, start_indices_batching_dims={0}, "
                 "index_vector_dim=2, slice_sizes={1,1}\n"
                 "}\n");
  EXPECT(r.r, 2, 10);
  run_end(&r);
}

Test(interp_window, gather_offset_dim_first) {
  /* offset dim placed before the batch dim: result [3 columns][2 indices] */
  Run r = run_ok("HloModule m\nENTRY e {\n" TABLE "  i = s32[2] constant({1, 4})\n"
                 "  ROOT g = f32[3,2] gather(t, i), offset_dims={0}, collapsed_slice_dims={0}, "
                 "start_index_map={0}, index_vector_dim=1, slice_sizes={1,3}\n"
                 "}\n");
  EXPECT(r.r, 10, 40, 11, 41, 12, 42);
  run_end(&r);
}

/* ------------------------------------------------------------------ scatter */

Test(interp_window, scatter_add_duplicate_indices) {
  Run r = run_ok("HloModule m\n" ADDC "ENTRY e {\n"
                 "  x = f32[4] constant({1, 2, 3, 4})\n"
                 "  i = s32[3,1] constant({ {1}, {1}, {3} })\n"
                 "  u = f32[3] constant({10, 20, 30})\n"
                 "  ROOT s = f32[4] scatter(x, i, u), update_window_dims={}, "
                 "inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, "
                 "to_apply=add\n"
                 "}\n");
  EXPECT(r.r, 1, 32, 3, 34);
  run_end(&r);
}

Test(interp_window, scatter_out_of_bounds_window_skipped) {
  /* windows of 2 at 0, 4 (half outside: skipped entirely), 3, -1 (skipped) */
  Run r = run_ok("HloModule m\n" ADDC "ENTRY e {\n"
                 "  x = f32[5] constant({0, 0, 0, 0, 0})\n"
                 "  i = s32[4] constant({0, 4, 3, -1})\n"
                 "  u = f32[4,2] constant({ {1, 2}, {10, 20}, {100, 200}, {1000, 2000} })\n"
                 "  ROOT s = f32[5] scatter(x, i, u), update_window_dims={1}, "
                 "inserted_window_dims={}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, "
                 "to_apply=add\n"
                 "}\n");
  EXPECT(r.r, 1, 2, 0, 100, 200);
  run_end(&r);
}

Test(interp_window, scatter_assign_rows) {
  /* combiner returning the update: x.at[idx].set(rows) */
  Run r = run_ok("HloModule m\n"
                 "set {\n  a = f32[] parameter(0)\n  ROOT b = f32[] parameter(1)\n}\n"
                 "ENTRY e {\n"
                 "  x = f32[3,2] constant({ {1, 1}, {2, 2}, {3, 3} })\n"
                 "  i = s32[2,1] constant({ {2}, {0} })\n"
                 "  u = f32[2,2] constant({ {7, 8}, {9, 6} })\n"
                 "  ROOT s = f32[3,2] scatter(x, i, u), update_window_dims={1}, "
                 "inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, "
                 "to_apply=set\n"
                 "}\n");
  EXPECT(r.r, 9, 6, 2, 2, 7, 8);
  run_end(&r);
}

Test(interp_window, scatter_variadic) {
  Run r = run_ok("HloModule m\n"
                 "comb {\n  a0 = f32[] parameter(0)\n  a1 = s32[] parameter(1)\n"
                 "  b0 = f32[] parameter(2)\n  b1 = s32[] parameter(3)\n"
                 "  s = f32[] add(a0, b0)\n  m = s32[] maximum(a1, b1)\n"
                 "  ROOT t = (f32[], s32[]) tuple(s, m)\n}\n"
                 "ENTRY e {\n"
                 "  x = f32[3] constant({0, 0, 0})\n"
                 "  y = s32[3] constant({5, 5, 5})\n"
                 "  i = s32[3,1] constant({ {2}, {0}, {2} })\n"
                 "  u = f32[3] constant({1, 2, 3})\n"
                 "  v = s32[3] constant({7, 1, 9})\n"
                 "  ROOT s = (f32[3], s32[3]) scatter(x, y, i, u, v), update_window_dims={}, "
                 "inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, "
                 "to_apply=comb\n"
                 "}\n");
  cr_assert_eq(r.r->shape.dt, DT_TUPLE);
  EXPECT(r.r->elems[0], 2, 0, 4);
  EXPECT(r.r->elems[1], 5, 5, 9);
  run_end(&r);
}

Test(interp_window, scatter_batching_dims) {
  /* the form JAX emits for the gradient of take_along_axis */
  Run r = run_ok("HloModule m\n" ADDC "ENTRY e {\n"
                 "  x = f32[2,4] constant({ {0, 0, 0, 0}, {0, 0, 0, 0} })\n"
                 "  i = s32[2,2,1] constant({ { {1}, {3} }, { {0}, {1} } })\n"
                 "  u = f32[2,2] constant({ {1, 2}, {3, 4} })\n"
                 "  ROOT s = f32[2,4] scatter(x, i, u), update_window_dims={}, "
                 "inserted_window_dims={1}, scatter_dims_to_operand_dims={1}, "
                 "input_batching_dims={0}, scatter_indices_batching_dims={0}, index_vector_dim=2, "
                 "to_apply=add\n"
                 "}\n");
  EXPECT(r.r, 0, 1, 0, 2, 3, 4, 0, 0);
  run_end(&r);
}

Test(interp_window, scatter_2d_index_vectors) {
  /* points (0,1) and (2,0) with s64 indices and a multiply combiner */
  Run r = run_ok("HloModule m\n"
                 "mul {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
                 "  ROOT m = f32[] multiply(a, b)\n}\n"
                 "ENTRY e {\n"
                 "  x = f32[3,2] constant({ {1, 2}, {3, 4}, {5, 6} })\n"
                 "  i = s64[2,2] constant({ {0, 1}, {2, 0} })\n"
                 "  u = f32[2] constant({10, 100})\n"
                 "  ROOT s = f32[3,2] scatter(x, i, u), update_window_dims={}, "
                 "inserted_window_dims={0,1}, scatter_dims_to_operand_dims={0,1}, "
                 "index_vector_dim=1, to_apply=mul\n"
                 "}\n");
  EXPECT(r.r, 1, 20, 3, 4, 500, 6);
  run_end(&r);
}

/* ------------------------------------------------------------------ dynamic slices */

Test(interp_window, dynamic_slice_clamps) {
  const char *fmt = "HloModule m\nENTRY e {\n"
                    "  x = s32[5] constant({0, 1, 2, 3, 4})\n"
                    "  i = s32[] constant(%d)\n"
                    "  ROOT d = s32[2] dynamic-slice(x, i), dynamic_slice_sizes={2}\n"
                    "}\n";
  int starts[] = {1, 4, -3, 100};
  double want[][2] = {{1, 2}, {3, 4}, {0, 1}, {3, 4}};
  for (int k = 0; k < 4; k++) {
    char text[512];
    snprintf(text, sizeof text, fmt, starts[k]);
    Run r = run_ok(text);
    expect_vals(r.r, want[k], 2);
    run_end(&r);
  }
  Run r = run_ok("HloModule m\nENTRY e {\n"
                 "  x = f32[3,3] constant({ {1,2,3}, {4,5,6}, {7,8,9} })\n"
                 "  i = s32[] constant(2)\n"
                 "  j = u8[] constant(1)\n"
                 "  ROOT d = f32[2,2] dynamic-slice(x, i, j), dynamic_slice_sizes={2,2}\n"
                 "}\n");
  EXPECT(r.r, 5, 6, 8, 9);
  run_end(&r);
}

Test(interp_window, dynamic_update_slice_clamps) {
  const char *fmt = "HloModule m\nENTRY e {\n"
                    "  x = f32[5] constant({0, 0, 0, 0, 0})\n"
                    "  u = f32[2] constant({7, 8})\n"
                    "  i = s64[] constant(%d)\n"
                    "  ROOT d = f32[5] dynamic-update-slice(x, u, i)\n"
                    "}\n";
  int starts[] = {1, 10, -1};
  double want[][5] = {{0, 7, 8, 0, 0}, {0, 0, 0, 7, 8}, {7, 8, 0, 0, 0}};
  for (int k = 0; k < 3; k++) {
    char text[512];
    snprintf(text, sizeof text, fmt, starts[k]);
    Run r = run_ok(text);
    expect_vals(r.r, want[k], 5);
    run_end(&r);
  }
  Run r = run_ok("HloModule m\nENTRY e {\n"
                 "  x = s32[2,3] constant({ {1,2,3}, {4,5,6} })\n"
                 "  u = s32[1,2] constant({ {-1, -2} })\n"
                 "  i = s32[] constant(1)\n"
                 "  j = s32[] constant(5)\n"
                 "  ROOT d = s32[2,3] dynamic-update-slice(x, u, i, j)\n"
                 "}\n");
  EXPECT(r.r, 1, 2, 3, 4, -1, -2);
  run_end(&r);
}

/* ------------------------------------------------------------------ pad */

Test(interp_window, pad_interior_and_edges) {
  Run r = run_ok("HloModule m\nENTRY e {\n"
                 "  x = f32[3] constant({1, 2, 3})\n"
                 "  z = f32[] constant(0)\n"
                 "  ROOT p = f32[8] pad(x, z), padding=1_2_1\n"
                 "}\n");
  EXPECT(r.r, 0, 1, 0, 2, 0, 3, 0, 0);
  run_end(&r);
}

Test(interp_window, pad_negative_crops) {
  /* 1 0 2 0 3 with the first element cropped and one pad element added at the end */
  Run r = run_ok("HloModule m\nENTRY e {\n"
                 "  x = f32[3] constant({1, 2, 3})\n"
                 "  z = f32[] constant(-5)\n"
                 "  ROOT p = f32[5] pad(x, z), padding=-1_1_1\n"
                 "}\n");
  EXPECT(r.r, -5, 2, -5, 3, -5);
  run_end(&r);
  r = run_ok("HloModule m\nENTRY e {\n"
             "  x = s32[2,2] constant({ {1, 2}, {3, 4} })\n"
             "  z = s32[] constant(9)\n"
             "  ROOT p = s32[3,1] pad(x, z), padding=1_0x0_-1\n"
             "}\n");
  EXPECT(r.r, 9, 1, 3);
  run_end(&r);
}

/* ------------------------------------------------------------------ invalid input */

/* Parse a valid module, corrupt the root's attributes with `corrupt`, expect a located error
 * naming the root instruction (from the interpreter, or earlier from a verifier it runs). */
static void expect_error(const char *text, void (*corrupt)(HInstr *)) {
  HErr err = {0};
  HModule *m = hlo_parse_text(text, strlen(text), "bad.hlo", &err);
  cr_assert(m, "parse failed: %s", err.msg);
  HInstr *root = m->entry->root;
  corrupt(root);
  HArena *a = hlo_arena_new();
  Literal *r = hlo_interp_run(m, a, NULL, 0, &err);
  cr_expect_null(r, "corrupted '%s' evaluated without error", root->name);
  cr_expect(err.set);
  cr_expect(strstr(err.msg, root->name) != NULL, "error does not name '%s': %s", root->name,
            err.msg);
  hlo_arena_free(a);
  hlo_module_free(m);
}

static void bad_ivd(HInstr *in) { in->gather->index_vector_dim = 7; }
static void bad_slice(HInstr *in) { in->gather->slice_sizes.v[1] = 9; }
static void bad_offset(HInstr *in) { in->gather->offset_dims.v[0] = 5; }
static void bad_sc_map(HInstr *in) { in->scatter->scatter_dims_to_operand_dims.v[0] = 3; }
static void bad_conv_dim(HInstr *in) { in->conv->in_feat = 9; }
static void bad_conv_groups(HInstr *in) { in->feature_groups = 0; }
static void bad_stride(HInstr *in) { in->window->d[0].stride = 0; }
static void bad_pad(HInstr *in) { in->pad->interior[0] = -1; }
static void bad_pad_hi(HInstr *in) { in->pad->hi[0] = -100; }
static void bad_win_size(HInstr *in) { in->window->d[0].size = 2; }
static void bad_collapsed(HInstr *in) { in->gather->slice_sizes.v[0] = 0; }
static void bad_upd_win(HInstr *in) { in->scatter->update_window_dims.n = 1; }
static void bad_ds_sizes(HInstr *in) { in->dslice_sizes.v[0] = 7; }
static void bad_rw_window(HInstr *in) { in->window->n = 1; }
static void bad_groups(HInstr *in) { in->feature_groups = 2; }
static void bad_ivd_batch(HInstr *in) { in->gather->index_vector_dim = 0; }

Test(interp_window, invalid_attributes_are_located_errors) {
  const char *gather = "HloModule m\nENTRY e {\n" TABLE "  i = s32[2,1] constant({ {3}, {1} })\n"
                       "  ROOT bad_gather = f32[2,3] gather(t, i), offset_dims={1}, "
                       "collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, "
                       "slice_sizes={1,3}\n}\n";
  expect_error(gather, bad_ivd);
  expect_error(gather, bad_slice);
  expect_error(gather, bad_offset);
  expect_error("HloModule m\n" ADDC "ENTRY e {\n"
               "  x = f32[4] constant({1, 2, 3, 4})\n"
               "  i = s32[3,1] constant({ {1}, {1}, {3} })\n"
               "  u = f32[3] constant({10, 20, 30})\n"
               "  ROOT bad_scatter = f32[4] scatter(x, i, u), update_window_dims={}, "
               "inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, "
               "to_apply=add\n}\n",
               bad_sc_map);
  const char *conv = CONV1D("size=3", "{1, 2, 3}", 3);
  expect_error(conv, bad_conv_dim);
  expect_error(conv, bad_conv_groups);
  expect_error(conv, bad_stride);
  expect_error(conv, bad_win_size);
  expect_error(conv, bad_groups);
  expect_error(gather, bad_collapsed);
  expect_error("HloModule m\nENTRY e {\n"
               "  x = f32[2,3] constant({ {0, 1, 2}, {10, 11, 12} })\n"
               "  i = s32[2,1,1] constant({ { {2} }, { {0} } })\n"
               "  ROOT bad_bgather = f32[2,1] gather(x, i), offset_dims={}, "
               "collapsed_slice_dims={1}, start_index_map={1}, operand_batching_dims={0}, "
               "start_indices_batching_dims={0}, index_vector_dim=2, slice_sizes={1,1}\n}\n",
               bad_ivd_batch);
  expect_error("HloModule m\n" ADDC "ENTRY e {\n"
               "  x = f32[4] constant({1, 2, 3, 4})\n"
               "  i = s32[3,1] constant({ {1}, {1}, {3} })\n"
               "  u = f32[3] constant({10, 20, 30})\n"
               "  ROOT bad_scatter2 = f32[4] scatter(x, i, u), update_window_dims={0}, "
               "inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, "
               "to_apply=add\n}\n",
               bad_upd_win);
  expect_error("HloModule m\nENTRY e {\n"
               "  x = s32[5] constant({0, 1, 2, 3, 4})\n"
               "  i = s32[] constant(1)\n"
               "  ROOT bad_ds = s32[2] dynamic-slice(x, i), dynamic_slice_sizes={2}\n}\n",
               bad_ds_sizes);
  expect_error("HloModule m\n" ADDC "ENTRY e {\n"
               "  x = f32[4,4] constant({ {1,2,3,4}, {5,6,7,8}, {9,10,11,12}, {13,14,15,16} })\n"
               "  zero = f32[] constant(0)\n"
               "  ROOT bad_rw = f32[2,2] reduce-window(x, zero), window={size=2x2 stride=2x2}, "
               "to_apply=add\n}\n",
               bad_rw_window);
  expect_error("HloModule m\nENTRY e {\n"
               "  x = f32[3] constant({1, 2, 3})\n"
               "  z = f32[] constant(0)\n"
               "  ROOT bad_pad2 = f32[8] pad(x, z), padding=1_2_1\n}\n",
               bad_pad_hi);
  expect_error("HloModule m\nENTRY e {\n"
               "  x = f32[3] constant({1, 2, 3})\n"
               "  z = f32[] constant(0)\n"
               "  ROOT bad_pad = f32[8] pad(x, z), padding=1_2_1\n}\n",
               bad_pad);
}
