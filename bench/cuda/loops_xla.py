"""bench/cuda/loops_xla.py: XLA's scanned LSTM on this GPU, for bench/cuda/loops.sh.

For each shape TxBxH: the LSTM bench/cuda/loops.sh compiles (lax.scan over T steps of
concatenate(x[t], h) @ w + b, gates i, f, o and the cell input in that order, h into the
outputs), f32 at the highest matmul precision, jitted. Two times per shape: call_ms (each call
waited for, as bench_driver's event_ms) and b2b_ms (ITERS calls dispatched, then one wait,
divided by ITERS). One line per shape: label=xla_lstm_<shape> call_ms=... b2b_ms=...

    python3 loops_xla.py [--cpu] 64x8x256 ...

--cpu labels the lines xla_cpu_lstm_<shape> (run it with JAX_PLATFORMS=cpu, pinned as wanted).
"""
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

ITERS = 50


def lstm(xs, h0, c0, w, b):
    def step(carry, x):
        h, c = carry
        g = jnp.dot(jnp.concatenate([x, h], axis=1), w, precision="highest") + b
        gi, gf, go, gc = jnp.split(g, 4, axis=1)
        c2 = jax.nn.sigmoid(gf) * c + jax.nn.sigmoid(gi) * jnp.tanh(gc)
        h2 = jax.nn.sigmoid(go) * jnp.tanh(c2)
        return (h2, c2), h2

    (hf, _), ys = jax.lax.scan(step, (h0, c0), xs)
    return hf, ys


def timed(fn, args, wait_each):
    for _ in range(5):
        jax.block_until_ready(fn(*args))
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(ITERS):
            out = fn(*args)
            if wait_each:
                jax.block_until_ready(out)
        jax.block_until_ready(out)
        best = min(best, (time.perf_counter() - t0) / ITERS)
    return best * 1e3


def main():
    rng = np.random.default_rng(1)
    fn = jax.jit(lstm)
    cpu = "--cpu" in sys.argv
    for shape in [a for a in sys.argv[1:] if a != "--cpu"]:
        T, B, H = map(int, shape.split("x"))
        args = [
            rng.standard_normal((T, B, H), np.float32),
            rng.standard_normal((B, H), np.float32) * 0.1,
            rng.standard_normal((B, H), np.float32) * 0.1,
            rng.standard_normal((2 * H, 4 * H), np.float32) / np.sqrt(2 * H),
            rng.standard_normal((4 * H,), np.float32) * 0.1,
        ]
        args = [jax.device_put(a) for a in args]
        call, b2b = timed(fn, args, True), timed(fn, args, False)
        tag = "xla_cpu_lstm" if cpu else "xla_lstm"
        print(f"label={tag}_{shape} call_ms={call:.5f} b2b_ms={b2b:.5f}", flush=True)


if __name__ == "__main__":
    main()
