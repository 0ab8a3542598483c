/* hlo/hlo.h: the HLO intermediate representation and everything that works on it directly.
 *
 * One header for the hlo/ directory, sectioned by the .c file that implements each part.
 * A module owns one arena; every node, string, shape and literal of the module lives in it
 * and is freed with it. Computations hold their instructions in an array in a valid
 * dependency order (operands before users); operands are pointers into the same computation.
 * Derived facts (users, positions) are recomputed by the passes that need them, never kept in
 * sync by hand.
 *
 * Shapes are logical (row-major unless a layout says otherwise); a layout, when present, is
 * XLA's minor_to_major list. Literals always store their data densely in row-major order,
 * whatever layout their shape carries. */
#ifndef HLOC_HLO_H
#define HLOC_HLO_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ------------------------------------------------------------------ arena.c */

typedef struct HArena HArena;

HArena *hlo_arena_new(void);
void hlo_arena_free(HArena *a);
void *hlo_arena_alloc(HArena *a, size_t n); /* zeroed, 64-byte aligned */
char *hlo_arena_strdup(HArena *a, const char *s);
char *hlo_arena_strndup(HArena *a, const char *s, size_t n);
void *hlo_arena_memdup(HArena *a, const void *p, size_t n);
/* Room for one more element in the arena array arr of n elements of elem bytes (capacity
 * *cap, doubled when full, `first` the first time); returns the array, moved if it grew. */
void *hlo_arena_grow(HArena *a, void *arr, int n, int *cap, int first, size_t elem);
char *hlo_arena_printf(HArena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
size_t hlo_arena_used(const HArena *a); /* bytes handed out so far */

/* ------------------------------------------------------------------ version.c */

const char *hlo_version(void); /* "0.1.0": hloc's version */
const char *hlo_commit(void);  /* the git commit built from ("5dda4997f1c2", "-dirty" when the
                                  tree had changes, "unknown" outside a checkout) */

/* ------------------------------------------------------------------ err.c */

/* A located error: the first error reported wins, later ones are dropped.
 * Message format: "FILE: computation 'C', instruction 'I': WHAT" (parts omitted when unknown). */
typedef struct HErr {
  bool set;       /* an error has been recorded */
  char msg[1024]; /* the one-line message, without trailing newline */
} HErr;

struct HInstr;
struct HComp;

void hlo_err(HErr *e, const char *file, const char *comp, const char *instr, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
void hlo_verr(HErr *e, const char *file, const char *comp, const char *instr, const char *fmt,
              va_list ap);
/* Error located at an instruction (file and computation taken from its parents). */
void hlo_err_at(HErr *e, const struct HInstr *in, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Error located at a computation. */
void hlo_err_comp(HErr *e, const struct HComp *c, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Internal invariant: prints the C file and line and aborts. Never for input checks. */
#define HLO_ASSERT(c)                                                                              \
  do {                                                                                             \
    if (!(c)) hlo_assert_fail(__FILE__, __LINE__, #c);                                             \
  } while (0)
_Noreturn void hlo_assert_fail(const char *file, int line, const char *what);

/* ------------------------------------------------------------------ types.c: dtypes, ops */

typedef enum DKind {
  DK_PRED,    /* boolean stored as one byte, 0 or 1 */
  DK_SINT,    /* two's complement signed integer */
  DK_UINT,    /* unsigned integer */
  DK_FLOAT,   /* IEEE binary float (f16, f32, f64), bfloat16, or fp8 (f8e4m3fn, f8e5m2) */
  DK_COMPLEX, /* two floats of the component type, real part first (c64, c128) */
  DK_OTHER,   /* token, tuple: no element data */
} DKind;

typedef enum DType {
  DT_INVALID = 0, /* not a type: unset or unsupported */
#define DT(E, name, bytes, proto, kind, bits) DT_##E,
#include "dtypes.def"
#undef DT
  DT_COUNT
} DType;

const char *hlo_dtype_name(DType t);
size_t hlo_dtype_size(DType t);
/* The width of t's values in bits: hlo_dtype_size * 8, but 4 for s4 and u4 (stored a byte
 * each, the byte holding the value: sign-extended for s4). */
int hlo_dtype_bits(DType t);
/* The binary format of float type t (f16, bf16, f32, f64): total, exponent and mantissa bits;
 * false for other types, the fp8 ones included (f8e4m3fn's special values are not IEEE's,
 * and targets hold fp8 values as f32, so bit-level ops such as reduce-precision do not
 * apply to them as they are). */
bool hlo_float_format(DType t, int *nbits, int *exp, int *man);
DKind hlo_dtype_kind(DType t);
int hlo_dtype_proto(DType t);                       /* xla.PrimitiveType value */
DType hlo_dtype_from_proto(int v);                  /* DT_INVALID when unsupported */
DType hlo_dtype_from_name(const char *s, size_t n); /* DT_INVALID when unknown */
const char *hlo_proto_type_name(int v); /* any PrimitiveType's text name, for messages */
static inline bool hlo_dtype_is_float(DType t) { return hlo_dtype_kind(t) == DK_FLOAT; }
/* f8e4m3fn or f8e5m2: stored as one byte, computed through f32 (targets keep them in f32). */
static inline bool hlo_dtype_is_fp8(DType t) { return t == DT_F8E4M3FN || t == DT_F8E5M2; }
/* s4 or u4: one element per byte, the byte holding the value (sign-extended for s4). */
static inline bool hlo_dtype_is_int4(DType t) { return t == DT_S4 || t == DT_U4; }
static inline bool hlo_dtype_is_int(DType t) {
  return hlo_dtype_kind(t) == DK_SINT || hlo_dtype_kind(t) == DK_UINT;
}
static inline bool hlo_dtype_is_complex(DType t) { return hlo_dtype_kind(t) == DK_COMPLEX; }
/* The component type of a complex type (c64 -> f32, c128 -> f64); DT_INVALID for others. */
static inline DType hlo_dtype_component(DType t) {
  return t == DT_C64 ? DT_F32 : t == DT_C128 ? DT_F64 : DT_INVALID;
}
/* The complex type of a component type (f32 -> c64, f64 -> c128); DT_INVALID for others. */
static inline DType hlo_dtype_complex_of(DType t) {
  return t == DT_F32 ? DT_C64 : t == DT_F64 ? DT_C128 : DT_INVALID;
}

enum {
  OPF_ELEM = 1,   /* elementwise: result[i] depends on operands[*][i] only */
  OPF_COMMUT = 2, /* commutative binary op */
  OPF_CHEAP = 4,  /* cheap enough to recompute when fused into several consumers */
  OPF_SIDE = 8,   /* side effects or multi-device semantics: not compilable for one device */
  OPF_MOVE = 16,  /* pure data movement, no arithmetic */
};

typedef enum HOp {
#define OP(E, name, arity, flags) OP_##E,
#include "ops.def"
#undef OP
  OP_COUNT
} HOp;

const char *hlo_op_name(HOp op);
int hlo_op_arity(HOp op); /* -1: variadic */
unsigned hlo_op_flags(HOp op);
bool hlo_op_from_name(const char *s, size_t n, HOp *out); /* false when unknown */

typedef enum CmpDir { CMP_EQ, CMP_NE, CMP_GE, CMP_GT, CMP_LE, CMP_LT } CmpDir;
typedef enum CmpType {
  CMPT_DEFAULT, /* not given: FLOAT for floats, SIGNED/UNSIGNED for integers */
  CMPT_FLOAT,
  CMPT_TOTALORDER,
  CMPT_SIGNED,
  CMPT_UNSIGNED,
} CmpType;
typedef enum FusionKind { FK_NONE, FK_LOOP, FK_INPUT, FK_OUTPUT, FK_CUSTOM } FusionKind;
/* fft's kinds, numbered as xla.FftType. */
typedef enum FftType {
  FFT_FFT,   /* complex -> complex, forward */
  FFT_IFFT,  /* complex -> complex, inverse, scaled by 1/N */
  FFT_RFFT,  /* real -> complex, the innermost transformed dim n becomes n/2+1 */
  FFT_IRFFT, /* complex (n/2+1) -> real (n), inverse, scaled by 1/N */
} FftType;

const char *hlo_cmp_dir_name(CmpDir d); /* "EQ" ... */
/* x <d> y for integers of type dt (unsigned types compared unsigned). */
bool hlo_cmp_i64(CmpDir d, DType dt, int64_t x, int64_t y);
bool hlo_cmp_dir_from_name(const char *s, size_t n, CmpDir *out);
const char *hlo_cmp_type_name(CmpType t); /* "" for default, "FLOAT" ... */
bool hlo_cmp_type_from_name(const char *s, size_t n, CmpType *out);
const char *hlo_fusion_kind_name(FusionKind k); /* "kLoop" ... */
bool hlo_fusion_kind_from_name(const char *s, size_t n, FusionKind *out);
/* A dot's algorithm (precision_config.algorithm), numbered as xla.PrecisionConfig.Algorithm:
 * the operands' storage types, the accumulation type and the products a dot of f32 operands
 * is computed with (x3: the operands split into bf16 high and low parts, three products). */
typedef enum DotAlg {
  DALG_UNSET,
  DALG_ANY_F8_ANY_F8_F32,
  DALG_ANY_F8_ANY_F8_F32_FAST_ACCUM,
  DALG_F16_F16_F16,
  DALG_F16_F16_F32,
  DALG_BF16_BF16_BF16,
  DALG_BF16_BF16_F32,
  DALG_BF16_BF16_F32_X3,
  DALG_BF16_BF16_F32_X6,
  DALG_TF32_TF32_F32,
  DALG_TF32_TF32_F32_X3,
  DALG_F32_F32_F32,
  DALG_F64_F64_F64,
  DALG_BF16_BF16_F32_X9,
  DALG_COUNT
} DotAlg;
const char *hlo_dot_alg_name(DotAlg a); /* "dot_bf16_bf16_f32_x3" ... ("" for unset) */
bool hlo_dot_alg_from_name(const char *s, size_t n, DotAlg *out);
const char *hlo_fft_type_name(FftType t); /* "FFT" ... */
bool hlo_fft_type_from_name(const char *s, size_t n, FftType *out);

/* ------------------------------------------------------------------ shape.c */

#define HLO_MAX_RANK 8 /* deeper arrays are rejected with a located error */

typedef struct Shape {
  DType dt;                   /* element type; DT_TUPLE for tuples */
  int rank;                   /* number of dimensions (0 for scalars and tuples) */
  bool has_layout;            /* m2m below is meaningful */
  int64_t dims[HLO_MAX_RANK]; /* dimension sizes, dim 0 first */
  int8_t m2m[HLO_MAX_RANK];   /* layout: dimensions from minor (fastest) to major */
  const char *layout_extra;   /* layout text after ':' (tiles, memory space), kept verbatim */
  int ntuple;                 /* DT_TUPLE: number of elements */
  struct Shape *tuple;        /* DT_TUPLE: element shapes (arena) */
} Shape;

Shape hlo_shape_array(DType dt, int rank, const int64_t *dims); /* with row-major layout */
Shape hlo_shape_scalar(DType dt);
Shape hlo_shape_tuple(HArena *a, int n, const Shape *elems);  /* elems deep-copied */
void hlo_shape_copy(HArena *a, Shape *dst, const Shape *src); /* deep copy */
void hlo_shape_set_default_layout(Shape *s);                  /* recursive */
bool hlo_shape_is_array(const Shape *s);
bool hlo_shape_is_tuple(const Shape *s);
int hlo_shape_leaves(const Shape *s);    /* array leaves of a (nested) tuple; 1 for an array */
int64_t hlo_shape_elems(const Shape *s); /* product of dims (1 for scalars) */
size_t hlo_shape_bytes(const Shape *s);  /* elems * element size; 0 for tuples/tokens */
bool hlo_shape_eq(const Shape *a, const Shape *b);        /* types and dims, ignoring layout */
bool hlo_shape_eq_layout(const Shape *a, const Shape *b); /* also layouts */
bool hlo_shape_same_dims(const Shape *a, const Shape *b); /* arrays with equal dims */
bool hlo_layout_is_default(const Shape *s);               /* no layout or row-major */
bool hlo_shape_has_complex(const Shape *s);               /* a complex element type anywhere in s */
/* The leaf shapes of s in order into out[n], out[n + 1], ...; returns n plus their count. */
int hlo_shape_leaf_shapes(const Shape *s, const Shape **out, int n);
/* Row-major strides in elements. */
void hlo_shape_strides(const Shape *s, int64_t *strides);
/* Text as XLA prints it: "f32[2,3]{1,0}", "(f32[2]{0}, s32[])". with_layout adds {..}. */
int hlo_shape_snprint(char *buf, size_t n, const Shape *s, bool with_layout);
const char *hlo_shape_str(HArena *a, const Shape *s); /* with layout */
/* Shape at a tuple index path (NULL when invalid). */
const Shape *hlo_shape_subshape(const Shape *s, const int64_t *index, int depth);

/* ------------------------------------------------------------------ literal.c */

typedef struct Literal {
  Shape shape;            /* array or tuple shape */
  void *data;             /* arrays: dense row-major elements, hlo_shape_bytes(&shape) bytes */
  struct Literal **elems; /* tuples: shape.ntuple element literals */
} Literal;

Literal *hlo_literal_new(HArena *a, const Shape *s); /* zero-filled array or tuple skeleton */
Literal *hlo_literal_clone(HArena *a, const Literal *l);
/* Element access as double / int64, any dtype (bf16/f16 converted). */
double hlo_literal_get_f64(const Literal *l, int64_t i);
int64_t hlo_literal_get_i64(const Literal *l, int64_t i);
void hlo_literal_set_f64(Literal *l, int64_t i, double v);
void hlo_literal_set_i64(Literal *l, int64_t i, int64_t v);
/* Take l's elements as bit patterns of `want` when l holds unsigned integers of its size (a
 * bf16 or f16 array read from .npy as '<u2', an fp8 one as '|u1' or '|V1'), or as s4/u4 when l
 * holds bytes (s8 or u8: each byte's low 4 bits); true when l now has type want. */
bool hlo_literal_bits_as(Literal *l, DType want);
/* Largest |element| of an array literal (0 for an empty one; NaNs ignored; a complex
 * element's magnitude). */
double hlo_literal_max_abs(const Literal *l);
/* The corpus's bar for bf16 and f16 results: within this fraction of the reference's largest
 * magnitude (one bf16 rounding of a large value is about that); hloc-run, the tests and the
 * GPU driver use it as their absolute tolerance for 16-bit results. */
#define HLO_LOWP_TOL 3e-2
/* Scalar conversions for 16-bit floats. */
float hlo_f16_to_f32(uint16_t h);
uint16_t hlo_f32_to_f16(float f);
float hlo_bf16_to_f32(uint16_t h);
uint16_t hlo_f32_to_bf16(float f); /* round to nearest even, NaN preserved */
/* Scalar conversions for the fp8 types (literal.c says the rules): to f32 exact; from f32 or
 * f64 round to nearest even, subnormals kept, overflow past the largest finite value to NaN
 * (f8e4m3fn, which has no infinity) or infinity (f8e5m2), a NaN to a NaN of its sign (f8e5m2
 * keeping the top mantissa bits), so each of the 256 codes comes back through f32. */
float hlo_f8e4m3fn_to_f32(uint8_t c);
float hlo_f8e5m2_to_f32(uint8_t c);
uint8_t hlo_f32_to_f8e4m3fn(float f);
uint8_t hlo_f32_to_f8e5m2(float f);
uint8_t hlo_f64_to_f8e4m3fn(double d);
uint8_t hlo_f64_to_f8e5m2(double d);
/* Load element i of raw data of type t as double / int64; store likewise. A complex element
 * loads as its real part and a real value stores as a complex one with zero imaginary part
 * (XLA's convert from a real type); code that means both parts uses the c128 pair below. */
double hlo_load_f64(DType t, const void *data, int64_t i);
int64_t hlo_load_i64(DType t, const void *data, int64_t i);
void hlo_store_f64(DType t, void *data, int64_t i, double v);
void hlo_store_i64(DType t, void *data, int64_t i, int64_t v);
/* Element i of any array type as a complex double (a real one with zero imaginary part);
 * stored into type t, rounded per part for c64 (a real t keeps the real part only). */
/* A double complex from its parts, exactly (re + im * I would turn an infinite part into a
 * NaN one); glibc's CMPLX is missing under clang, __builtin_complex is in both compilers. */
#define HLO_CMPLX(re, im) __builtin_complex((double)(re), (double)(im))
double _Complex hlo_load_c128(DType t, const void *data, int64_t i);
void hlo_store_c128(DType t, void *data, int64_t i, double _Complex v);
/* Reorder element data given in the physical order of layout m2m into row-major. */
void hlo_literal_from_layout(const Shape *s, const void *src, void *dst_row_major);

/* ------------------------------------------------------------------ module.c: the IR */

/* A list of small integers (dimension numbers, sizes); bounded by the maximum rank. */
typedef struct IList {
  int n;                   /* number of entries */
  int64_t v[HLO_MAX_RANK]; /* entries */
} IList;
/* Whether v is one of l's entries. */
static inline bool hlo_ilist_has(const IList *l, int64_t v) {
  for (int i = 0; i < l->n; i++)
    if (l->v[i] == v) return true;
  return false;
}

typedef struct WinDim {
  int64_t size;     /* window size */
  int64_t stride;   /* >= 1 */
  int64_t pad_lo;   /* low padding (may be negative) */
  int64_t pad_hi;   /* high padding (may be negative) */
  int64_t win_dil;  /* window (rhs) dilation, >= 1 */
  int64_t base_dil; /* base (lhs) dilation, >= 1 */
  bool reversal;    /* window reversal */
} WinDim;

typedef struct Window {
  int n;                  /* number of window dimensions */
  WinDim d[HLO_MAX_RANK]; /* one per spatial dim (conv) or operand dim (reduce-window) */
} Window;

typedef struct ConvDims {
  int64_t in_batch, in_feat;   /* input batch and feature dimensions */
  int64_t k_in, k_out;         /* kernel input and output feature dimensions */
  int64_t out_batch, out_feat; /* output batch and feature dimensions */
  IList in_sp, k_sp, out_sp;   /* spatial dimensions of input, kernel, output (same count) */
} ConvDims;

typedef struct DotDims {
  IList lhs_batch, rhs_batch;       /* batch dimensions, paired in order */
  IList lhs_contract, rhs_contract; /* contracting dimensions, paired in order */
} DotDims;

typedef struct GatherDims {
  IList offset_dims;                 /* output dims that index into the slice */
  IList collapsed_slice_dims;        /* operand dims of size 1 dropped from the slice */
  IList start_index_map;             /* index vector component -> operand dim */
  IList operand_batching_dims;       /* operand dims batched with indices */
  IList start_indices_batching_dims; /* matching dims of start_indices */
  int64_t index_vector_dim;          /* dim of start_indices holding the vector */
  IList slice_sizes;                 /* gather_slice_sizes */
} GatherDims;

typedef struct ScatterDims {
  IList update_window_dims;            /* update dims that index into the window */
  IList inserted_window_dims;          /* operand dims of size 1 absent from the window */
  IList scatter_dims_to_operand_dims;  /* index vector component -> operand dim */
  IList input_batching_dims;           /* operand dims batched with indices */
  IList scatter_indices_batching_dims; /* matching dims of scatter_indices */
  int64_t index_vector_dim;            /* dim of scatter_indices holding the vector */
} ScatterDims;

typedef struct SliceDims {
  int n;                        /* = rank */
  int64_t start[HLO_MAX_RANK];  /* inclusive */
  int64_t limit[HLO_MAX_RANK];  /* exclusive */
  int64_t stride[HLO_MAX_RANK]; /* >= 1 */
} SliceDims;

typedef struct PadDims {
  int n;                          /* = rank */
  int64_t lo[HLO_MAX_RANK];       /* edge padding low (may be negative) */
  int64_t hi[HLO_MAX_RANK];       /* edge padding high (may be negative) */
  int64_t interior[HLO_MAX_RANK]; /* interior padding, >= 0 */
} PadDims;

/* An attribute carried verbatim (sharding, frontend_attributes, unmodelled attributes). */
typedef struct HAttr {
  const char *name;  /* attribute name as in HLO text */
  const char *value; /* its value text, printed back unchanged */
} HAttr;

typedef struct HComp HComp;
typedef struct HModule HModule;

typedef struct HInstr {
  HOp op;               /* opcode */
  const char *name;     /* unique within its computation; stable, printed in dumps */
  Shape shape;          /* result shape */
  int nops;             /* operand count */
  struct HInstr **ops;  /* operands, same computation */
  int ncalls;           /* called computation count */
  HComp **calls;        /* called computations (XLA's index conventions, see below) */
  int nctrl;            /* control predecessor count */
  struct HInstr **ctrl; /* control predecessors, same computation */
  HComp *parent;        /* owning computation */
  int idx;              /* position in parent->instrs (hlo_comp_renumber) */
  int64_t uid;          /* id from the input (proto id), or assigned */

  /* Attributes; which ones are meaningful depends on op. */
  int64_t param_num;       /* parameter: parameter number */
  int64_t tuple_index;     /* get-tuple-element: index */
  int64_t iota_dim;        /* iota: iota_dimension */
  IList dims;              /* broadcast, transpose, reduce, reverse, concatenate, sort, map */
  IList dslice_sizes;      /* dynamic-slice: dynamic_slice_sizes */
  Literal *literal;        /* constant: value */
  Window *window;          /* convolution, reduce-window, select-and-scatter */
  ConvDims *conv;          /* convolution: dimension numbers */
  int64_t feature_groups;  /* convolution: feature_group_count (1 default) */
  int64_t batch_groups;    /* convolution: batch_group_count (1 default) */
  DotDims *dot;            /* dot: dimension numbers */
  IList precision;         /* dot/convolution: operand_precision (0 default,1 high,2 highest) */
  DotAlg dot_alg;          /* dot: precision_config.algorithm (DALG_UNSET: none) */
  SliceDims *slice;        /* slice */
  PadDims *pad;            /* pad */
  GatherDims *gather;      /* gather */
  ScatterDims *scatter;    /* scatter */
  CmpDir cmp_dir;          /* compare: direction */
  CmpType cmp_type;        /* compare: type */
  FusionKind fusion_kind;  /* fusion: kind */
  bool is_stable;          /* sort */
  bool largest;            /* topk: the largest k (else the smallest) */
  int64_t topk_k;          /* topk: k */
  FftType fft_type;        /* fft: FFT, IFFT, RFFT or IRFFT */
  IList fft_length;        /* fft: fft_length, the lengths of the transformed innermost dims */
  bool indices_are_sorted; /* gather, scatter */
  bool unique_indices;     /* scatter */
  int32_t exponent_bits;   /* reduce-precision */
  int32_t mantissa_bits;   /* reduce-precision */
  float epsilon;           /* batch-norm-* */
  int64_t feature_index;   /* batch-norm-* */
  const char *custom_call_target; /* custom-call: target name */
  const char *backend_config;     /* raw backend_config text (NULL when absent) */
  const char *op_type;            /* metadata: op_type (NULL when absent) */
  const char *op_name;            /* metadata: op_name */
  const char *source_file;        /* metadata: source_file */
  int64_t source_line;            /* metadata: source_line (0 when absent) */
  int nraw;                       /* verbatim attributes count */
  HAttr *raw;                     /* verbatim attributes, printed back in order */
  void *aux;                      /* scratch slot for the pass currently running */
} HInstr;
/* calls[] conventions: while [0]=body [1]=condition; conditional: branches in order;
 * select-and-scatter [0]=select [1]=scatter; fusion, call, reduce, reduce-window, map, sort,
 * scatter, all-reduce: [0]=to_apply / fused computation; custom-call: called_computations. */

struct HComp {
  const char *name; /* unique within the module */
  int64_t uid;      /* id from the input, or assigned */
  int ninstrs;      /* instruction count */
  int cap;          /* capacity of instrs */
  HInstr **instrs;  /* instructions, operands before users */
  HInstr *root;     /* result instruction */
  int nparams;      /* parameter count */
  HInstr **params;  /* parameters by parameter number (hlo_comp_renumber) */
  bool is_fusion;   /* body of a fusion instruction */
  HModule *mod;     /* owning module */
  int idx;          /* position in mod->comps */
};

/* Input/output aliasing declared by the module (buffer donation). */
typedef struct HAlias {
  IList out_index;   /* result shape index */
  int64_t param;     /* parameter number */
  IList param_index; /* shape index inside the parameter */
  int kind;          /* 0 undefined, 1 may-alias, 2 must-alias */
} HAlias;

struct HModule {
  HArena *arena;              /* owns everything below */
  const char *name;           /* module name */
  const char *file;           /* path it was read from, for messages ("<input>" if none) */
  int64_t uid;                /* module id from the input */
  int ncomps;                 /* computation count */
  int cap;                    /* capacity of comps */
  HComp **comps;              /* computations, callees before callers */
  HComp *entry;               /* entry computation */
  bool has_entry_layout;      /* entry_layout_params/result below are set */
  int nentry_layout;          /* parameters in entry_computation_layout */
  Shape *entry_layout_params; /* entry parameter shapes with layouts */
  Shape entry_layout_result;  /* entry result shape with layout */
  int nalias;                 /* input/output alias entries */
  HAlias *alias;              /* input/output alias entries */
  int nraw;                   /* verbatim module attributes (text header) */
  HAttr *raw;                 /* verbatim module attributes */
  int niface, iface_cap;      /* notes on the entry interface for the generated header */
  HAttr *iface;               /* name: a parameter's name or "result"; value: the note */
  int64_t next_uid;           /* next unused instruction/computation id */
  struct HNameSet *names;     /* names in use, built on first hlo_module_unique_name call */
  int64_t next_name;          /* next suffix tried by hlo_module_unique_name */
};

HModule *hlo_module_new(const char *name, const char *file);
/* Add a note on the entry interface (key: a parameter's name, or "result"), or find one (NULL
 * when there is none). The generated headers print them beside the argument list. */
void hlo_module_iface_note(HModule *m, const char *key, const char *note);
/* A custom-call that on one device returns its one operand unchanged: XLA's sharding and
 * placement annotations (Sharding, SPMDFullToShardShape and SPMDShardToFullShape where the
 * shapes agree, MoveToDevice, MoveToHost, annotate_device_placement). */
bool hlo_custom_call_is_identity(const HInstr *in);
/* XLA's TopK custom-call: one array operand [.., n], a (values, s32 indices) result of the
 * largest k along the last dim (a topk with largest=true). */
bool hlo_custom_call_is_topk(const HInstr *in);
const char *hlo_module_iface_find(const HModule *m, const char *key);
void hlo_module_free(HModule *m);
HComp *hlo_comp_new(HModule *m, const char *name); /* appended to m->comps */
HComp *hlo_module_find_comp(const HModule *m, const char *name);
/* New instruction appended at the end of c; ops copied. Attributes zero except
 * feature_groups = batch_groups = 1. */
HInstr *hlo_instr_new(HComp *c, HOp op, const char *name, const Shape *shape, int nops,
                      HInstr *const *ops);
void hlo_instr_set_calls(HInstr *in, int n, HComp *const *calls);
/* Recompute idx of every instruction, params[] by parameter number, comp idx. */
void hlo_comp_renumber(HComp *c);
void hlo_module_renumber(HModule *m);
/* Every array shape of m's instructions without a layout gets the row-major one, the layout
 * hloc computes with (XLA needs one on every shape to run a module it reads from a proto). */
void hlo_module_fill_layouts(HModule *m);
/* A fresh name "base.N" unused in the module. */
const char *hlo_module_unique_name(HModule *m, const char *base);
/* FNV-1a of n bytes continued from h (HLO_HASH_START to begin): the hash of hloc's name
 * tables and of other byte strings. */
#define HLO_HASH_START 1469598103934665603ull
uint64_t hlo_hash_bytes(uint64_t h, const void *p, size_t n);
/* want itself when no instruction or computation has that name yet, else a fresh one. */
const char *hlo_module_name_as(HModule *m, const char *want);
/* Replace every use of `from` by `to` in from's computation (and root). */
void hlo_instr_replace_uses(HInstr *from, HInstr *to);
/* Copy src (all attributes, called computations, metadata) into computation dst with the
 * given operands; the copy gets a fresh unique name derived from src's and is appended. */
HInstr *hlo_instr_clone(HComp *dst, const HInstr *src, HInstr *const *ops);
/* Keep only the instructions of c for which keep[idx] is true (order preserved). */
void hlo_comp_filter(HComp *c, const bool *keep);
/* Remove computations that the entry does not reach through calls. true if any removed. */
bool hlo_module_remove_unreachable(HModule *m);
/* Floating-point operations of a dot or convolution (a multiply-add counts 2; a grouped
 * convolution's kernel as given); 0 for other instructions (their callees not included). */
double hlo_instr_flops(const HInstr *in);
/* The opcode of reducer computation r when it is one scalar op of type dt on its two
 * parameters (in either order), else -1; hlo_comp_is_add: whether that op is an add. */
int hlo_comp_binary_op(const HComp *r, DType dt);
bool hlo_comp_is_add(const HComp *r, DType dt);
/* Whether reducer r is a sum, maximum or minimum (hlo_comp_binary_op), with *id (unless id is
 * NULL) its identity (0, -inf, +inf): the value partial reductions start from. */
bool hlo_comp_identity(const HComp *r, DType dt, double *id);
/* flatten.c: every tuple-shaped entry parameter becomes one array parameter per leaf, depth
 * first, named NAME.i(.j...), numbered from its own position on; its users read a tuple of
 * them; the entry layout and the input/output aliases follow. true when anything changed. */
bool hlo_flatten_entry_params(HModule *m, HArena *scratch);
/* Users of every instruction of c: users[i] lists instructions using c->instrs[i]. */
typedef struct HUsers {
  int *n;         /* per instruction: number of users (with multiplicity) */
  HInstr ***list; /* per instruction: the users */
} HUsers;
HUsers hlo_comp_users(HArena *scratch, HComp *c);
/* Depth-first post-order of c's instructions over operands and control predecessors into
 * order[0 .. ninstrs): every instruction after all it depends on. The walk starts at `first`
 * (NULL: nowhere in particular), then at each instruction not yet emitted in array order, so
 * an order that is already valid comes out unchanged when first is NULL. Dependencies are
 * entered heaviest first by weight[idx] (NULL: no weights), ties in their own order
 * (operands, then control predecessors). Dependencies outside c are skipped and a cycle is
 * cut where it closes (the verifier reports both). Sets idx to array positions. */
void hlo_comp_postorder(HComp *c, HArena *scratch, const HInstr *first, const int64_t *weight,
                        HInstr **order);

/* ------------------------------------------------------------------ elided.c */

/* What to do with constants whose value an HLO dump elided (`constant({...})`): keep refusing
 * them where their value is needed (error, the default), or fill them with zeros or with
 * deterministic pseudo-random values of the seed (elided.c says which). */
typedef enum HElidedMode { HLO_ELIDED_ERROR, HLO_ELIDED_ZERO, HLO_ELIDED_RANDOM } HElidedMode;
typedef struct HElided {
  HElidedMode mode;
  uint64_t seed;
} HElided;
/* Parse error | zero | random | random:SEED (the value of --elided-constants). */
bool hlo_elided_parse(const char *s, HElided *e, HErr *err);
/* Give every elided constant of m a value as e says; returns how many were filled. */
int hlo_fill_elided(HModule *m, const HElided *e);
/* Array or tuple literal l filled with the pseudo-random values --elided-constants=random:SEED
 * gives instruction in (a parameter's argument, for hloc verify); a tuple's leaves each from
 * their own stream. */
void hlo_literal_fill_random(Literal *l, const HInstr *in, uint64_t seed);

/* ------------------------------------------------------------------ print.c */

typedef struct HPrintOpts {
  bool no_metadata;  /* omit metadata={...} */
  bool no_raw_attrs; /* omit verbatim attributes (sharding, frontend_attributes) */
  bool elide_large;  /* print constant({...}) for literals above 16 elements */
} HPrintOpts;

/* Print the module as HLO text that hlo_parse_text reads back (unless elide_large). */
void hlo_print_module(FILE *f, const HModule *m, const HPrintOpts *o);
/* The same text, malloc'd (NUL-terminated; its length into *len when len is not NULL). */
char *hlo_module_text(const HModule *m, const HPrintOpts *o, size_t *len);
void hlo_print_comp(FILE *f, const HComp *c, const HPrintOpts *o);
void hlo_print_instr(FILE *f, const HInstr *in, const HPrintOpts *o);
void hlo_print_literal(FILE *f, const Literal *l);

/* ------------------------------------------------------------------ parse.c */

/* Parse HLO text as XLA prints it. file names the input in messages. NULL on error. */
HModule *hlo_parse_text(const char *text, size_t len, const char *file, HErr *err);

/* ------------------------------------------------------------------ verify.c */

/* Check the whole module: structure (ids, operands, cycles, callee signatures) and every
 * instruction's shape against shape inference. false with a located error. */
bool hlo_verify(HModule *m, HErr *err);
/* Infer the result shape of `in` from its operands, attributes and called computations.
 * in->shape is read only where HLO has no attribute for the information: the target element
 * type of convert/bitcast-convert (and dot/convolution result types), the output dims of
 * broadcast/reshape, iota's and bitcast's whole shape, and the shapes of ops taken as given
 * (parameter, custom-call, side-effecting ops); see hlo/verify.c. Tuples go in arena a.
 * false with a located error when the operands or attributes are invalid. */
bool hlo_infer_shape(HArena *a, const HInstr *in, Shape *out, HErr *err);

/* ------------------------------------------------------------------ npy.c */

/* Read a .npy v1/v2 file (little-endian, C order) into a literal. */
Literal *hlo_npy_read(HArena *a, const char *path, HErr *err);
Literal *hlo_npy_parse(HArena *a, const void *buf, size_t len, const char *file, HErr *err);
/* Write an array literal as .npy v1.0 atomically (temp file + rename). */
bool hlo_npy_write(const char *path, const Literal *l, HErr *err);

/* ------------------------------------------------------------------ interp.c */

/* Evaluate the entry computation on args (one per parameter, in parameter order).
 * Scratch and the result live in arena a. NULL with a located error when an argument does not
 * match or an op is not supported. */
Literal *hlo_interp_run(HModule *m, HArena *a, Literal *const *args, int nargs, HErr *err);
/* Evaluate any computation (used for called computations and by constant folding). */
Literal *hlo_interp_comp(HComp *c, HArena *a, Literal *const *args, int nargs, HErr *err);

/* ------------------------------------------------------------------ compare.c */

/* Element-wise comparison of a computed array against a reference (e.g. XLA's output). */
typedef struct HCompare {
  double max_abs;       /* largest |got - want| */
  double max_rel;       /* largest |got - want| / max(|want|, tiny) */
  int64_t worst;        /* flat index of the element furthest outside tolerance (or max_abs) */
  double worst_got;     /* that element's computed value (a complex one's real part) */
  double worst_want;    /* that element's reference value (likewise) */
  double worst_got_im;  /* complex results: the computed imaginary part (else 0) */
  double worst_want_im; /* complex results: the reference imaginary part (else 0) */
  int64_t bad;          /* elements outside tolerance (NaN vs number counts as bad) */
} HCompare;

/* Compare arrays of equal dims (dtypes may differ); within tolerance when every element
 * satisfies |got - want| <= atol + rtol * |want| (complex values: the magnitudes of the
 * complex difference and of want). false (with err) when dims differ. */
bool hlo_literal_compare(const Literal *got, const Literal *want, double rtol, double atol,
                         HCompare *out, HErr *err);

/* ------------------------------------------------------------------ io.c */

/* Growable text buffer (malloc'd; free p when done), for generated sources and headers. */
typedef struct HStr {
  char *p;    /* NUL-terminated text, or NULL while empty */
  size_t n;   /* length */
  size_t cap; /* capacity */
} HStr;
void hlo_str_printf(HStr *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Read a whole file into a NUL-terminated buffer (malloc'd). false with an error. */
bool hlo_read_file(const char *path, char **buf, size_t *len, HErr *err);
/* Write bytes to path atomically: temp file in the same folder, then rename. */
bool hlo_write_file_atomic(const char *path, const void *buf, size_t len, HErr *err);

#endif
