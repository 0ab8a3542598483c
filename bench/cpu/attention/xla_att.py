# XLA's CPU time for the causal attention modules of this bundle (gen.py's shapes), pinned to
# the cores the caller gives it with taskset; median of timed calls within a budget.
import sys, time, json
import numpy as np
import jax, jax.numpy as jnp
B, S, H, D = 2, 1024, 8, 64
def att(q, k, v):
    s = jnp.einsum("bqhd,bkhd->bhqk", q, k, preferred_element_type=jnp.float32 if q.dtype == jnp.bfloat16 else None).astype(jnp.float32) * 0.125
    mask = jnp.arange(S)[None, :] <= jnp.arange(S)[:, None]
    s = jnp.where(mask, s, -jnp.inf)
    p = jax.nn.softmax(s, axis=-1).astype(q.dtype)
    return jnp.einsum("bhqk,bkhd->bqhd", p, v)
cpu = jax.devices("cpu")[0]
for dt in (jnp.float32, jnp.bfloat16):
    r = np.random.default_rng(0)
    x = [jax.device_put(jnp.asarray(r.uniform(-2, 2, (B, S, H, D)), dt), cpu) for _ in range(3)]
    f = jax.jit(att)
    with jax.default_device(cpu):
        f(*x).block_until_ready()
        ts = []
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < 3 or len(ts) < 5:
            a = time.perf_counter(); f(*x).block_until_ready(); ts.append(time.perf_counter() - a)
    print(f"xla_cpu causal_{jnp.dtype(dt).name} runs={len(ts)} median_s={np.median(ts):.6f}")
