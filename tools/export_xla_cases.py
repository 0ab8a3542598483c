"""tools/export_xla_cases.py: export the cases of tests/xla_cases with JAX.

What the corpus fixtures do not exercise, with XLA's own results:
  - grouped convolutions: batch_group_count (the weight gradient of a grouped convolution,
    grouped_wgrad produced by jax.grad) and feature_group_count, in NHWC and NCHW, with
    stride, padding and dilation;
  - reduce-precision (rp_*): f32 and f16 values where the rounding is decided (signed zeros,
    infinities, NaNs with payloads, denormals, the smallest normal, ties rounding both ways,
    all-ones mantissas that carry into the next binade, values around the reduced format's
    overflow and underflow limits) plus random bit patterns, to formats narrower and wider
    than the input's own;
  - conditionals (cond_*, switch_*): lax.cond on a data-dependent predicate with tuple
    results (both outcomes), lax.switch with a run-time index (in range, past the end,
    negative) and a cond nested in a branch;
  - counted loops: lax.fori_loop, lax.scan (dynamic slices of the stacked values) and a
    lax.while_loop counting down by 2;
  - data-dependent loops (the CPU target runs them as loops): Newton's square root until the
    residuals are small, and a loop bounded by an argument with a matrix product in its body
    and a nested tuple state.
Each case is jitted, its HLO text (as lowered for XLA) written to OUT/<case>/module.hlo, its
arguments to in<k>.npy and XLA's results (JAX on the CPU) to out<k>.npy. Run where JAX is
installed (the GPU machine has it):

    JAX_PLATFORMS=cpu OUT=tests/xla_cases python3 tools/export_xla_cases.py

tests/test_interp.c and tests/test_cpu_fixtures.c (test_cpu_reduce_precision.c for rp_*) check
the interpreter and the CPU target against these outputs (the rp_* cases bit for bit);
tools/cuda_device_test.sh the CUDA target.
"""
import os
import numpy as np
import jax
import jax.numpy as jnp
from jax import lax

from jax_export import hlo_text

out = os.environ.get("OUT", ".")
HI = lax.Precision.HIGHEST


# ---------------------------------------------------------------- grouped convolutions
rng = np.random.default_rng(0)
cases = []
# 1: batch groups, NHWC/HWIO, valid
x = rng.standard_normal((4, 7, 6, 3), dtype=np.float32)
w = rng.standard_normal((3, 2, 3, 6), dtype=np.float32)
cases.append(("bgc2_nhwc", lambda x, w: lax.conv_general_dilated(x, w, (1, 1), "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC"), batch_group_count=2, precision=HI), (x, w)))
# 2: batch groups 3, NCHW/OIHW, stride 2, padding
x = rng.standard_normal((6, 2, 9, 8), dtype=np.float32)
w = rng.standard_normal((6, 2, 3, 3), dtype=np.float32)
cases.append(("bgc3_nchw_stride_pad", lambda x, w: lax.conv_general_dilated(x, w, (2, 2), ((1, 1), (0, 2)), dimension_numbers=("NCHW", "OIHW", "NCHW"), batch_group_count=3, precision=HI), (x, w)))
# 3: batch groups with rhs dilation (a grouped weight gradient's shape)
x = rng.standard_normal((4, 3, 10, 10), dtype=np.float32)
w = rng.standard_normal((4, 3, 2, 2), dtype=np.float32)
cases.append(("bgc2_dilated", lambda x, w: lax.conv_general_dilated(x, w, (1, 1), "SAME", rhs_dilation=(2, 3), dimension_numbers=("NCHW", "OIHW", "NCHW"), batch_group_count=2, precision=HI), (x, w)))
# 4: feature groups
x = rng.standard_normal((2, 8, 8, 6), dtype=np.float32)
w = rng.standard_normal((3, 3, 2, 9), dtype=np.float32)
cases.append(("fgc3_nhwc", lambda x, w: lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"), feature_group_count=3, precision=HI), (x, w)))
# 5: a grouped convolution's weight gradient through autodiff (JAX emits batch_group_count)
x = rng.standard_normal((2, 4, 6, 6), dtype=np.float32)
w = rng.standard_normal((6, 2, 3, 3), dtype=np.float32)
def loss(w, x):
    y = lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NCHW", "OIHW", "NCHW"), feature_group_count=2, precision=HI)
    return jnp.sum(y * y)
cases.append(("grouped_wgrad", lambda w, x: jax.grad(loss)(w, x), (w, x)))


# ---------------------------------------------------------------- reduce-precision
rng = np.random.default_rng(1)


def values(ubits, nbits, exp, man):
    """Bit patterns of a binary format with exp exponent and man mantissa bits."""
    sign = 1 << (nbits - 1)
    expmask = ((1 << exp) - 1) << man
    bias = (1 << (exp - 1)) - 1
    v = [0, sign, expmask, sign | expmask, expmask | 1, expmask | (1 << (man - 1)) | 5,
         sign | expmask | 3, 1, sign | 1, (1 << man) - 1, 1 << man, bias << man,
         (bias << man) | ((1 << man) - 1), expmask - 1, sign | (expmask - 1)]
    # every exponent, with mantissas at and around the halfway points of narrower formats
    for e in range(0, (1 << exp) - 1, max(1, ((1 << exp) - 1) // 40)):
        for m in (0, 1, (1 << man) - 1, 1 << (man - 1), (1 << (man - 1)) + 1, (1 << (man - 1)) - 1,
                  0b11 << (man - 4), 0b01 << (man - 4), 0b011 << (man - 4), 0b101 << (man - 5)):
            for s in (0, sign):
                v.append(s | (e << man) | (m & ((1 << man) - 1)))
    v += list(rng.integers(0, 1 << nbits, 400, dtype=np.uint64))
    return np.array(v, dtype=np.uint64).astype(ubits)


f32 = values(np.uint32, 32, 8, 23).view(np.float32)
f16 = values(np.uint16, 16, 5, 10).view(np.float16)
for x, fmts in ((f32, ((8, 7), (5, 10), (4, 3), (2, 1), (5, 0), (8, 23), (11, 30))),
                (f16, ((5, 10), (4, 3), (8, 7), (5, 2), (3, 0), (11, 52)))):
    for e, m in fmts:
        cases.append((f"rp_{'f32' if x.dtype == np.float32 else 'f16'}_e{e}m{m}",
                      lambda x, e=e, m=m: lax.reduce_precision(x, exponent_bits=e, mantissa_bits=m), (x,)))

# ---------------------------------------------------------------- conditionals
rng = np.random.default_rng(2)
x = rng.standard_normal((6, 5), dtype=np.float32)
y = rng.standard_normal((5,), dtype=np.float32)
# lax.cond on a data-dependent predicate, tuple results; both outcomes (the sign flips)
def cond_tuple(x, y):
    return lax.cond(jnp.sum(x) > 0, lambda x, y: (jnp.sin(x) * 2, y + 1), lambda x, y: (jnp.cos(x) + 1, y * y), x, y)
cases.append(("cond_pred_true", cond_tuple, (np.abs(x), y)))
cases.append(("cond_pred_false", cond_tuple, (-np.abs(x), y)))
# lax.switch with a run-time index (JAX clamps it into range) and a nested cond in a branch
def switch3(i, x):
    return lax.switch(i, [lambda x: x * x, lambda x: jnp.tanh(x),
                          lambda x: lax.cond(x[0, 0] > 0, lambda x: x + 1, lambda x: x - 1, x)], x)
for i in (0, 1, 2, 7, -3):
    cases.append((f"switch_{'m' if i < 0 else ''}{abs(i)}", switch3, (np.int32(i), x)))

# ---------------------------------------------------------------- counted loops
rng = np.random.default_rng(3)
x = rng.standard_normal((4, 6), dtype=np.float32)
xs = rng.standard_normal((12, 6), dtype=np.float32)
cases.append(("fori_loop", lambda x: lax.fori_loop(0, 10, lambda i, c: c * 0.9 + jnp.sin(c + i.astype(jnp.float32)), x), (x,)))
def scan_steps(c0, xs):
    return lax.scan(lambda c, v: (c * 0.5 + v, jnp.tanh(c * v)), c0, xs)
cases.append(("scan", scan_steps, (x[0], xs)))
cases.append(("while_down", lambda x: lax.while_loop(lambda s: s[0] > 0, lambda s: (s[0] - 2, s[1] * 1.1 + 1), (9, x))[1], (x,)))

# ---------------------------------------------------------------- data-dependent loops
rng = np.random.default_rng(4)
a = (rng.random((16,), dtype=np.float32) * 9 + 1).astype(np.float32)
# Newton's square root until every residual is small: the trip count depends on the values
def newton_sqrt(a):
    def body(s):
        x, i = s
        return (0.5 * (x + a / x), i + 1)
    def cond(s):
        x, i = s
        return jnp.logical_and(jnp.max(jnp.abs(x * x - a)) > 1e-4, i < 50)
    return lax.while_loop(cond, body, (a, 0))
cases.append(("while_newton", newton_sqrt, (a,)))
# a loop bounded by an argument, a matrix product in its body, a nested tuple state
m = (rng.standard_normal((8, 8)) * 0.3).astype(np.float32)
v = rng.standard_normal((8, 5)).astype(np.float32)
def arg_bound(n, m, v):
    def body(s):
        i, (u, t) = s
        u2 = jnp.tanh(jnp.dot(m, u, precision=HI))
        return (i + 1, (u2, t + jnp.sum(u2)))
    return lax.while_loop(lambda s: s[0] < n, body, (0, (v, jnp.float32(0))))
cases.append(("while_arg_bound", arg_bound, (np.int32(7), m, v)))


for name, f, args in cases:
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    open(os.path.join(d, "module.hlo"), "w").write(hlo_text(f, *args))
    for i, a in enumerate(args):
        np.save(os.path.join(d, f"in{i}.npy"), a)
    ys = jax.jit(f)(*args)
    ys = [np.asarray(v) for v in jax.tree_util.tree_leaves(ys)]  # nested tuples: leaves in order
    for k, y in enumerate(ys):
        np.save(os.path.join(d, f"out{k}.npy"), y)
    print(name, [(y.dtype, y.shape) for y in ys], jax.devices()[0].platform)
