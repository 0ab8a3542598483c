/* hlo/types.c: lookups over the dtype and opcode tables and the small attribute enums.
 *
 * The tables themselves live in dtypes.def and ops.def; this file expands them into arrays
 * and offers name <-> enum conversions used by both readers, the printer and the verifier. */
#include "hlo.h"

#include <string.h>

static const struct {
  const char *name;
  size_t size;
  int proto;
  DKind kind;
  int bits;
} dtypes[DT_COUNT] = {
    [DT_INVALID] = {"invalid", 0, 0, DK_OTHER, 0},
#define DT(E, name, bytes, proto, kind, bits) [DT_##E] = {name, bytes, proto, kind, bits},
#include "dtypes.def"
#undef DT
};

const char *hlo_dtype_name(DType t) { return t < DT_COUNT ? dtypes[t].name : "invalid"; }
size_t hlo_dtype_size(DType t) { return t < DT_COUNT ? dtypes[t].size : 0; }
DKind hlo_dtype_kind(DType t) { return t < DT_COUNT ? dtypes[t].kind : DK_OTHER; }
int hlo_dtype_bits(DType t) { return t < DT_COUNT ? dtypes[t].bits : 0; }
int hlo_dtype_proto(DType t) { return t < DT_COUNT ? dtypes[t].proto : 0; }

bool hlo_float_format(DType t, int *nbits, int *exp, int *man) {
  if (t == DT_F16)
    *nbits = 16, *exp = 5, *man = 10;
  else if (t == DT_BF16)
    *nbits = 16, *exp = 8, *man = 7;
  else if (t == DT_F32)
    *nbits = 32, *exp = 8, *man = 23;
  else if (t == DT_F64)
    *nbits = 64, *exp = 11, *man = 52;
  else
    return false;
  return true;
}

DType hlo_dtype_from_proto(int v) {
  for (int t = 1; t < DT_COUNT; t++)
    if (dtypes[t].proto == v) return (DType)t;
  return DT_INVALID;
}

DType hlo_dtype_from_name(const char *s, size_t n) {
  for (int t = 1; t < DT_COUNT; t++)
    if (t != DT_TUPLE && strlen(dtypes[t].name) == n && !memcmp(dtypes[t].name, s, n))
      return (DType)t;
  return DT_INVALID;
}

const char *hlo_proto_type_name(int v) {
  static const char *names[] = {"invalid",    "pred", "s8",       "s16",           "s32",
                                "s64",        "u8",   "u16",      "u32",           "u64",
                                "f16",        "f32",  "f64",      "tuple",         "opaque",
                                "c64",        "bf16", "token",    "c128",          "f8e5m2",
                                "f8e4m3fn",   "s4",   "u4",       "f8e4m3b11fnuz", "f8e5m2fnuz",
                                "f8e4m3fnuz", "s2",   "u2",       "f8e4m3",        "f8e3m4",
                                "s1",         "u1",   "f4e2m1fn", "f8e8m0fnu",     "buffer"};
  if (v >= 0 && v < (int)(sizeof names / sizeof *names)) return names[v];
  return "unknown";
}

static const struct {
  const char *name;
  int arity;
  unsigned flags;
} ops[OP_COUNT] = {
#define OP(E, name, arity, flags) [OP_##E] = {name, arity, flags},
#include "ops.def"
#undef OP
};

const char *hlo_op_name(HOp op) { return op < OP_COUNT ? ops[op].name : "?"; }
int hlo_op_arity(HOp op) { return ops[op].arity; }
unsigned hlo_op_flags(HOp op) { return ops[op].flags; }

bool hlo_op_from_name(const char *s, size_t n, HOp *out) {
  for (int i = 0; i < OP_COUNT; i++)
    if (strlen(ops[i].name) == n && !memcmp(ops[i].name, s, n)) {
      *out = (HOp)i;
      return true;
    }
  return false;
}

static bool lookup(const char *const *names, int count, const char *s, size_t n, int *out) {
  for (int i = 0; i < count; i++)
    if (strlen(names[i]) == n && !memcmp(names[i], s, n)) {
      *out = i;
      return true;
    }
  return false;
}

static const char *const cmp_dirs[] = {"EQ", "NE", "GE", "GT", "LE", "LT"};
static const char *const cmp_types[] = {"", "FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED"};
static const char *const fusion_kinds[] = {"", "kLoop", "kInput", "kOutput", "kCustom"};
static const char *const fft_types[] = {"FFT", "IFFT", "RFFT", "IRFFT"};

static const char *const dot_algs[] = {"",
                                       "dot_any_f8_any_f8_f32",
                                       "dot_any_f8_any_f8_f32_fast_accum",
                                       "dot_f16_f16_f16",
                                       "dot_f16_f16_f32",
                                       "dot_bf16_bf16_bf16",
                                       "dot_bf16_bf16_f32",
                                       "dot_bf16_bf16_f32_x3",
                                       "dot_bf16_bf16_f32_x6",
                                       "dot_tf32_tf32_f32",
                                       "dot_tf32_tf32_f32_x3",
                                       "dot_f32_f32_f32",
                                       "dot_f64_f64_f64",
                                       "dot_bf16_bf16_f32_x9"};

const char *hlo_dot_alg_name(DotAlg a) { return (unsigned)a < DALG_COUNT ? dot_algs[a] : "?"; }

bool hlo_dot_alg_from_name(const char *s, size_t n, DotAlg *out) {
  int v;
  if (n == 0 || !lookup(dot_algs, DALG_COUNT, s, n, &v)) return false;
  *out = (DotAlg)v;
  return true;
}

const char *hlo_cmp_dir_name(CmpDir d) { return cmp_dirs[d]; }
const char *hlo_cmp_type_name(CmpType t) { return cmp_types[t]; }
const char *hlo_fusion_kind_name(FusionKind k) { return fusion_kinds[k]; }
const char *hlo_fft_type_name(FftType t) { return (unsigned)t < 4 ? fft_types[t] : "?"; }

bool hlo_cmp_dir_from_name(const char *s, size_t n, CmpDir *out) {
  int v;
  if (!lookup(cmp_dirs, 6, s, n, &v)) return false;
  *out = (CmpDir)v;
  return true;
}

bool hlo_cmp_type_from_name(const char *s, size_t n, CmpType *out) {
  int v;
  if (n == 0 || !lookup(cmp_types, 5, s, n, &v)) return false;
  *out = (CmpType)v;
  return true;
}

bool hlo_fusion_kind_from_name(const char *s, size_t n, FusionKind *out) {
  int v;
  if (n == 0 || !lookup(fusion_kinds, 5, s, n, &v)) return false;
  *out = (FusionKind)v;
  return true;
}

bool hlo_fft_type_from_name(const char *s, size_t n, FftType *out) {
  int v;
  if (!lookup(fft_types, 4, s, n, &v)) return false;
  *out = (FftType)v;
  return true;
}
