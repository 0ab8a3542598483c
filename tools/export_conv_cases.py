"""tools/export_conv_cases.py: export the grouped-convolution cases of tests/xla_cases with JAX.

Convolutions with batch_group_count (the weight gradient of a grouped convolution) and
feature_group_count, in NHWC and NCHW, with stride, padding and dilation: each case is
jitted, its HLO text (as lowered for XLA) written to OUT/<case>/module.hlo, its arguments to
in<k>.npy and XLA's result (JAX on the CPU) to out0.npy. Run where JAX is installed (the GPU
machine has it):

    JAX_PLATFORMS=cpu OUT=tests/xla_cases python3 tools/export_conv_cases.py

tests/test_interp.c and tests/test_cpu.c check the interpreter and the CPU target against
these outputs; tools/cuda_device_test.sh the CUDA target.
"""
import os
import numpy as np
import jax
import jax.numpy as jnp
from jax import lax

out = os.environ.get("OUT", ".")
rng = np.random.default_rng(0)
HI = lax.Precision.HIGHEST

def hlo_text(f, *args):
    lo = jax.jit(f).lower(*args)
    try:
        return lo.as_text(dialect="hlo")
    except Exception:
        return lo.compiler_ir("hlo").as_hlo_text()

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

for name, f, args in cases:
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    txt = hlo_text(f, *args)
    open(os.path.join(d, "module.hlo"), "w").write(txt)
    for i, a in enumerate(args):
        np.save(os.path.join(d, f"in{i}.npy"), a)
    y = np.asarray(jax.jit(f)(*args))
    np.save(os.path.join(d, "out0.npy"), y)
    print(name, y.shape, "batch_group_count" in txt, "feature_group_count" in txt, jax.devices()[0].platform)
