"""tools/export_rp_cases.py: export reduce-precision cases for tests/xla_cases with JAX.

jax.lax.reduce_precision on f32 and f16 inputs holding the values where the rounding is
decided (signed zeros, infinities, NaNs with payloads, denormals, the smallest normal, ties
rounding both ways, all-ones mantissas that carry into the next binade, values around the
reduced format's overflow and underflow limits) plus random bit patterns, for formats
narrower and wider than the input's own. Each case is jitted, its HLO text written to
OUT/<case>/module.hlo, the argument to in0.npy and XLA's result (JAX on the CPU) to out0.npy.
Run where JAX is installed (the GPU machine has it):

    JAX_PLATFORMS=cpu OUT=tests/xla_cases python3 tools/export_rp_cases.py

tests/test_interp.c and tests/test_cpu.c compare the interpreter and the CPU target with
these results bit for bit (any NaN matching any NaN).
"""
import os
import numpy as np
import jax
from jax import lax

out = os.environ.get("OUT", ".")
rng = np.random.default_rng(1)


def hlo_text(f, *args):
    lo = jax.jit(f).lower(*args)
    try:
        return lo.as_text(dialect="hlo")
    except Exception:
        return lo.compiler_ir("hlo").as_hlo_text()


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
cases = []
for e, m in ((8, 7), (5, 10), (4, 3), (2, 1), (5, 0), (8, 23), (11, 30)):
    cases.append((f"rp_f32_e{e}m{m}", e, m, f32))
for e, m in ((5, 10), (4, 3), (8, 7), (5, 2), (3, 0), (11, 52)):
    cases.append((f"rp_f16_e{e}m{m}", e, m, f16))

for name, e, m, x in cases:
    f = lambda x, e=e, m=m: lax.reduce_precision(x, exponent_bits=e, mantissa_bits=m)
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    open(os.path.join(d, "module.hlo"), "w").write(hlo_text(f, x))
    np.save(os.path.join(d, "in0.npy"), x)
    y = np.asarray(jax.jit(f)(x))
    np.save(os.path.join(d, "out0.npy"), y)
    print(name, x.dtype, y.shape, int(np.isnan(y).sum()), jax.devices()[0].platform)
