/* hlo/interp_impl.h: internal interface between the interpreter's core (interp.c) and its
 * window/indexing ops (interp_window.c). Not part of the public hlo.h API.
 *
 * interp.c owns evaluation order, the per-run state and the elementwise/data-movement/
 * reduction/dot/control-flow ops. interp_window.c implements the ops whose index arithmetic
 * is the hard part, interp_complex.c the complex numbers and fft. Each op function receives the
 * already evaluated operand values and returns a new literal (allocated in interp_arena(st)) or
 * NULL with a located error. */
#ifndef HLOC_INTERP_IMPL_H
#define HLOC_INTERP_IMPL_H

#include "hlo.h"

typedef struct IState IState; /* per-run interpreter state, defined in interp.c */

HArena *interp_arena(IState *st);

/* Call computation c on args (scalars, or any values) and return its result. */
Literal *interp_call(IState *st, HComp *c, Literal *const *args, int nargs, HErr *err);

/* When c is `ROOT r = OP(parameter(0), parameter(1))` for a binary elementwise OP (add,
 * multiply, maximum, minimum, and, or, ...), store OP and return true: callers then combine
 * scalars with interp_binop instead of calling the computation per element. */
bool interp_binop_of(const HComp *c, HOp *op);
/* Apply binary elementwise op to two scalars of type dt (floats as double, ints as int64
 * carried in double only when exact; use interp_binop_i64 for 64-bit integers). */
double interp_binop_f64(HOp op, DType dt, double a, double b);
int64_t interp_binop_i64(HOp op, DType dt, int64_t a, int64_t b);

/* Checks that operand k, o, can be read elementwise for in's n result elements: same dims,
 * or a rank-0 scalar (*stride 0; else 1). */
bool interp_elem_operand(const HInstr *in, int k, const Literal *o, int64_t n, int64_t *stride,
                         HErr *err);

/* interp_complex.c: called when an operand or the result is complex (real and imag of floats
 * too). */
Literal *interp_complex_unary(IState *st, const HInstr *in, Literal *x, HErr *err);
Literal *interp_complex_binary(IState *st, const HInstr *in, Literal *x, Literal *y, HErr *err);
Literal *interp_complex_compare(IState *st, const HInstr *in, Literal *x, Literal *y, HErr *err);
Literal *interp_complex_make(IState *st, const HInstr *in, Literal *re, Literal *im, HErr *err);
Literal *interp_complex_convert(IState *st, const HInstr *in, Literal *x, HErr *err);
/* r[b][i][j] = sum over k of x[b][i][k] y[b][k][j], x and y read in the order of the dims
 * lperm (batch, free, contracting) and rperm (batch, contracting, free), as eval_dot. */
void interp_complex_dot(const Literal *x, const Literal *y, const int *lperm, const int *rperm,
                        int64_t B, int64_t M, int64_t K, int64_t N, Literal *r);
Literal *interp_fft(IState *st, const HInstr *in, Literal *x, HErr *err);

/* interp_window.c */
Literal *interp_convolution(IState *st, const HInstr *in, Literal *const *ops, HErr *err);
Literal *interp_reduce_window(IState *st, const HInstr *in, Literal *const *ops, HErr *err);
Literal *interp_select_and_scatter(IState *st, const HInstr *in, Literal *const *ops, HErr *err);
Literal *interp_gather(IState *st, const HInstr *in, Literal *const *ops, HErr *err);
Literal *interp_scatter(IState *st, const HInstr *in, Literal *const *ops, HErr *err);
Literal *interp_dynamic_slice(IState *st, const HInstr *in, Literal *const *ops, HErr *err);
Literal *interp_dynamic_update_slice(IState *st, const HInstr *in, Literal *const *ops, HErr *err);
Literal *interp_pad(IState *st, const HInstr *in, Literal *const *ops, HErr *err);

#endif
