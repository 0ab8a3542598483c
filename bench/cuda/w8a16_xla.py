"""bench/cuda/w8a16_xla.py: XLA's W8A16 products on this GPU, for bench/cuda/w8a16_pair.sh.

For each shape MxKxN: x bf16[M,K] times an s8[K,N] weight converted and scaled per column
(bf16), jitted (XLA fuses the dequantization into its GEMM), and the same product staged by
hand (the dequantization jitted alone, then a bf16 dot). Times are back to back: ITERS calls
dispatched, then one wait, divided by ITERS (device time with launches overlapped, as
bench_driver's b2b_ms). One line per shape: label=xla_<shape> fused_ms=... staged_ms=...

    python3 w8a16_xla.py 256x4096x14336 ...
"""
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

BF = jnp.bfloat16
ITERS = 50


def b2b(fn, *a):
    for _ in range(5):
        jax.block_until_ready(fn(*a))
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(ITERS):
            out = fn(*a)
        jax.block_until_ready(out)
        best = min(best, (time.perf_counter() - t0) / ITERS)
    return best * 1e3


def main():
    rng = np.random.default_rng(1)
    fused = jax.jit(lambda x, w, s: x @ (w.astype(BF) * s))
    deq = jax.jit(lambda w, s: w.astype(BF) * s)
    dot = jax.jit(lambda x, w: x @ w)
    for shape in sys.argv[1:]:
        M, K, N = map(int, shape.split("x"))
        x = jax.device_put(jnp.asarray(rng.standard_normal((M, K)), BF))
        w = jax.device_put(jnp.asarray(rng.integers(-127, 128, (K, N), dtype=np.int8)))
        s = jax.device_put(jnp.asarray(rng.uniform(0.5, 1.5, N) / 4096, BF))
        a = b2b(fused, x, w, s)
        st = b2b(lambda x, w, s: dot(x, deq(w, s)), x, w, s)
        print(f"label=xla_{shape} fused_ms={a:.5f} staged_ms={st:.5f} device={jax.devices()[0]}")


if __name__ == "__main__":
    main()
