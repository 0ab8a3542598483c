"""tools/export_w8a16.py: a Llama-style decode step with int8 weights (W8A16), exported with JAX.

Every projection's weight is int8 with a bf16 scale per output channel, dequantized in bf16
(convert, multiply) right before its bf16 product, as weight-only quantized checkpoints run
in JAX: RMSNorm, q/k/v projections, RoPE at the step's position, the new key and value
written into bf16 caches with dynamic-update-slice, grouped-query attention over the cache
masked to the positions written, the output projection and residual, RMSNorm, SwiGLU and the
down projection with its residual. Returns (out, key cache, value cache).

Writes OUT/w8a16_decode/ (small shapes: module.hlo, in<k>.npy, out<k>.npy with XLA's
results on the platform JAX runs on) and, with BENCH=1, BENCH_OUT/module.hlo at Llama-3-8B
shapes (8 sequences, a 2048-entry cache) and XLA's time for it (median of 200 calls, each
waited for, as baselines.json's figures are taken) on one line: `xla_w8a16_decode_s=...`.

    OUT=tests/xla_cases python3 tools/export_w8a16.py                    # on the GPU machine
    BENCH=1 BENCH_OUT=out/w8 OUT=/tmp python3 tools/export_w8a16.py
"""
import os
import time
import numpy as np
import jax
import jax.numpy as jnp
from jax import lax

from jax_export import hlo_text

BF = jnp.bfloat16


def qlinear(x, wq, s):
    return x @ (wq.astype(BF) * s)


def rms(x, g):
    xf = x.astype(jnp.float32)
    y = xf * lax.rsqrt(jnp.mean(xf * xf, axis=-1, keepdims=True) + 1e-5)
    return (y * g.astype(jnp.float32)).astype(BF)


def rope(x, pos, hd):
    half = hd // 2
    inv = 1.0 / (10000.0 ** (jnp.arange(half, dtype=jnp.float32) / half))
    ang = pos.astype(jnp.float32)[0] * inv
    c, s = jnp.cos(ang), jnp.sin(ang)
    xf = x.astype(jnp.float32)
    a, b = xf[..., :half], xf[..., half:]
    return jnp.concatenate([a * c - b * s, a * s + b * c], axis=-1).astype(BF)


def make(B, D, H, KVH, F, T):
    hd = D // H

    def step(x, pos, kc, vc, g1, g2, wq, sq, wk, sk, wv, sv, wo, so, wg, sg, wu, su, wd, sd):
        h = rms(x, g1)
        q = qlinear(h, wq, sq).reshape(B, H, hd)
        k = qlinear(h, wk, sk).reshape(B, KVH, hd)
        v = qlinear(h, wv, sv).reshape(B, KVH, hd)
        q, k = rope(q, pos, hd), rope(k, pos, hd)
        kc = lax.dynamic_update_slice(kc, k[:, None], (0, pos[0], 0, 0))
        vc = lax.dynamic_update_slice(vc, v[:, None], (0, pos[0], 0, 0))
        qg = q.reshape(B, KVH, H // KVH, hd)
        sc = jnp.einsum("bgrd,btgd->bgrt", qg, kc, preferred_element_type=jnp.float32)
        sc = sc / np.float32(np.sqrt(hd))
        mask = jnp.arange(T)[None, None, None, :] <= pos[0]
        sc = jnp.where(mask, sc, -1e30)
        p = jax.nn.softmax(sc, axis=-1).astype(BF)
        o = jnp.einsum("bgrt,btgd->bgrd", p, vc).reshape(B, D)
        x = x + qlinear(o, wo, so)
        h = rms(x, g2)
        m = jax.nn.silu(qlinear(h, wg, sg)) * qlinear(h, wu, su)
        return x + qlinear(m, wd, sd), kc, vc

    rng = np.random.default_rng(7)

    def w(k, n):
        return rng.integers(-127, 128, size=(k, n), dtype=np.int8)

    def s(k, n):  # scales so that every product stays of order one
        return jnp.asarray(rng.uniform(0.5, 1.5, size=(n,)) / (64.0 * np.sqrt(k)), dtype=BF)

    args = [
        jnp.asarray(rng.standard_normal((B, D)), dtype=BF),
        jnp.asarray([T // 2 + 1], dtype=jnp.int32),
        jnp.asarray(rng.standard_normal((B, T, KVH, hd)), dtype=BF),
        jnp.asarray(rng.standard_normal((B, T, KVH, hd)), dtype=BF),
        jnp.asarray(rng.uniform(0.5, 1.5, size=(D,)), dtype=BF),
        jnp.asarray(rng.uniform(0.5, 1.5, size=(D,)), dtype=BF),
    ]
    for k, n in [(D, D), (D, KVH * hd), (D, KVH * hd), (D, D), (D, F), (D, F), (F, D)]:
        args += [w(k, n), s(k, n)]
    return step, args


def save_npy(path, a):
    a = np.asarray(a)
    if a.dtype == BF:  # ml_dtypes bf16: stored as its bit patterns
        a = a.view(np.uint16)
    np.save(path, a)


out = os.environ.get("OUT", ".")
step, args = make(2, 512, 8, 2, 1024, 64)
d = os.path.join(out, "w8a16_decode")
os.makedirs(d, exist_ok=True)
with open(os.path.join(d, "module.hlo"), "w") as f:
    f.write(hlo_text(step, *args))
res = jax.jit(step)(*args)
for i, a in enumerate(args):
    save_npy(os.path.join(d, "in%d.npy" % i), a)
for i, r in enumerate(res):
    save_npy(os.path.join(d, "out%d.npy" % i), r)

if os.environ.get("BENCH"):
    bo = os.environ.get("BENCH_OUT", ".")
    os.makedirs(bo, exist_ok=True)
    step, args = make(8, 4096, 32, 8, 14336, 2048)
    with open(os.path.join(bo, "module.hlo"), "w") as f:
        f.write(hlo_text(step, *args))
    dev = [jax.device_put(a) for a in args]
    fn = jax.jit(step)
    for _ in range(20):
        jax.block_until_ready(fn(*dev))
    ts = []
    for _ in range(200):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*dev))
        ts.append(time.perf_counter() - t0)
    print("xla_w8a16_decode_s=%.6g platform=%s" % (float(np.median(ts)), jax.devices()[0].platform))
