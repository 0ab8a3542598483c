"""tools/export_xla_complex.py: export the cases of tests/xla_complex with JAX.

Complex numbers and FFTs as JAX exports them, with XLA's own results:
  - c64 elementwise work: complex(), real(), imag(), abs(), exp(), log(), sqrt(), conj (a
    complex of the real part and the negated imaginary one), the four arithmetic ops, tanh,
    power, comparisons for (in)equality, converts from real types, sums over an axis;
  - a complex matrix product (dot with a batch dimension too);
  - fft in its four kinds: FFT and IFFT of c64, RFFT of f32 and IRFFT back (even and odd
    lengths, the length given explicitly), over 1, 2 and 3 innermost dimensions, lengths that
    are not powers of two, axes other than the last (JAX transposes around the fft);
  - c128 and f64 (jax_enable_x64): an FFT and an RFFT.
Each case is jitted, its HLO text written to OUT/<case>/module.hlo, its arguments to in<k>.npy
and XLA's results (JAX on the CPU) to out<k>.npy. Run where JAX is installed:

    JAX_PLATFORMS=cpu OUT=tests/xla_complex python3 tools/export_xla_complex.py
"""
import os
import numpy as np
import jax
import jax.numpy as jnp
from jax import lax

from jax_export import hlo_text

out = os.environ.get("OUT", ".")
HI = lax.Precision.HIGHEST


def cplx(rng, shape, dt=np.complex64):
    re = rng.standard_normal(shape)
    im = rng.standard_normal(shape)
    return (re + 1j * im).astype(dt)


rng = np.random.default_rng(11)
cases = []
x = rng.standard_normal((4, 5), dtype=np.float32)
y = rng.standard_normal((4, 5), dtype=np.float32)
z = cplx(rng, (4, 5))
w = cplx(rng, (4, 5))


def elementwise(x, y, w):
    z = lax.complex(x, y)
    return (jnp.real(z * w), jnp.imag(jnp.exp(z)), jnp.abs(z), z / (w + 1), -z + jnp.conj(w),
            jnp.log(z), jnp.sqrt(z), z - w * 2)


cases.append(("c64_elementwise", elementwise, (x, y, w)))
cases.append(("c64_more", lambda z, w, x: (jnp.tanh(z), z ** 3, (z == w) | (z != z * 1),
                                          x.astype(jnp.complex64) * z, jnp.sum(z, axis=1),
                                          jnp.angle(z)), (z, w, x)))
a = cplx(rng, (3, 4))
b = cplx(rng, (4, 5))
cases.append(("c64_dot", lambda a, b: jnp.dot(a, b, precision=HI), (a, b)))
a = cplx(rng, (2, 3, 6))
b = cplx(rng, (2, 6, 4))
cases.append(("c64_batch_dot", lambda a, b: jnp.matmul(a, b, precision=HI), (a, b)))

# ---------------------------------------------------------------- fft
cases.append(("fft_1d", jnp.fft.fft, (cplx(rng, (4, 16)),)))
cases.append(("ifft_1d_len10", jnp.fft.ifft, (cplx(rng, (3, 10)),)))
cases.append(("rfft_1d", jnp.fft.rfft, (rng.standard_normal((5, 12), dtype=np.float32),)))
cases.append(("rfft_1d_len7", jnp.fft.rfft, (rng.standard_normal((3, 7), dtype=np.float32),)))
cases.append(("irfft_1d", jnp.fft.irfft, (cplx(rng, (5, 7)),)))
cases.append(("irfft_1d_len11", lambda x: jnp.fft.irfft(x, n=11), (cplx(rng, (2, 6)),)))
cases.append(("fft2", jnp.fft.fft2, (cplx(rng, (2, 8, 6)),)))
cases.append(("ifft2", jnp.fft.ifft2, (cplx(rng, (2, 5, 4)),)))
cases.append(("fftn_3d", jnp.fft.fftn, (cplx(rng, (3, 4, 5)),)))
cases.append(("rfftn_3d", lambda x: jnp.fft.rfftn(x, axes=(1, 2, 3)),
              (rng.standard_normal((2, 4, 6, 8), dtype=np.float32),)))
cases.append(("irfftn_3d", lambda x: jnp.fft.irfftn(x, s=(4, 6, 8), axes=(1, 2, 3)),
              (cplx(rng, (2, 4, 6, 5)),)))
cases.append(("fft_axis0", lambda x: jnp.fft.fft(x, axis=0), (cplx(rng, (9, 3)),)))
cases.append(("rfft_then_irfft", lambda x: jnp.fft.irfft(jnp.fft.rfft(x) * 2.0, n=x.shape[-1]),
              (rng.standard_normal((4, 32), dtype=np.float32),)))


def save(name, f, args):
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    open(os.path.join(d, "module.hlo"), "w").write(hlo_text(f, *args))
    for i, a in enumerate(args):
        np.save(os.path.join(d, f"in{i}.npy"), np.asarray(a))
    ys = jax.jit(f)(*args)
    ys = ys if isinstance(ys, (tuple, list)) else (ys,)
    for k, y in enumerate(ys):
        np.save(os.path.join(d, f"out{k}.npy"), np.asarray(y))
    print(name, [np.asarray(a).dtype.str for a in args], "->",
          [np.asarray(y).dtype.str for y in ys])


for name, f, args in cases:
    save(name, f, args)

# ---------------------------------------------------------------- 64-bit
jax.config.update("jax_enable_x64", True)
rng = np.random.default_rng(12)
save("c128_fft", jnp.fft.fft, (cplx(rng, (3, 9), np.complex128),))
save("f64_rfft", jnp.fft.rfft, (rng.standard_normal((4, 10)),))
save("c128_elementwise", lambda z, w: (z * w + jnp.exp(z), jnp.abs(w)),
     (cplx(rng, (6,), np.complex128), cplx(rng, (6,), np.complex128)))
