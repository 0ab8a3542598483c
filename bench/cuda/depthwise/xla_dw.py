# XLA's GPU time for gen.py's block (same shapes), at highest and default precision: the
# median of single synchronized calls and the back-to-back time of 200 calls (one sync), for the
# block and for the depthwise convolution alone; both are bound by JAX's dispatch (~50 us) at
# these sizes, so for stride 1 also the depthwise part chained 20 times in one executable
# (y = f(y), one launch of 20 convolutions), per convolution: XLA's device time.
import sys, time
import numpy as np, jax, jax.numpy as jnp

DN = ("NHWC", "HWIO", "NHWC")


def block(x, kd, bd, kp, S, prec):
    d = jax.lax.conv_general_dilated(x, kd, (S, S), ((1, 1), (1, 1)), dimension_numbers=DN,
                                     feature_group_count=x.shape[3], precision=prec)
    r = jnp.maximum(d + bd, 0)
    p = jax.lax.conv_general_dilated(r, kp, (1, 1), "VALID", dimension_numbers=DN, precision=prec)
    return jnp.maximum(p, 0)


def only(x, kd, bd, S, prec):
    d = jax.lax.conv_general_dilated(x, kd, (S, S), ((1, 1), (1, 1)), dimension_numbers=DN,
                                     feature_group_count=x.shape[3], precision=prec)
    return jnp.maximum(d + bd, 0)


def times(f, args):
    f(*args).block_until_ready()
    ts = []
    for _ in range(100):
        t = time.perf_counter()
        f(*args).block_until_ready()
        ts.append(time.perf_counter() - t)
    t = time.perf_counter()
    for _ in range(200):
        y = f(*args)
    y.block_until_ready()
    return np.median(ts) * 1e3, (time.perf_counter() - t) / 200 * 1e3


for spec in sys.argv[1:]:
    N, H, W, C, CO, S = [int(v) for v in spec.split(",")]
    r = np.random.default_rng(0)
    a = [jnp.asarray(r.uniform(-1, 1, s), jnp.float32)
         for s in [(N, H, W, C), (3, 3, 1, C), (C,), (1, 1, C, CO)]]
    for prec in ("highest", "default"):
        fb = jax.jit(lambda x, kd, bd, kp: block(x, kd, bd, kp, S, prec))
        fo = jax.jit(lambda x, kd, bd: only(x, kd, bd, S, prec))
        b1, bb = times(fb, a)
        o1, ob = times(fo, a[:3])
        chain = ""
        if S == 1:
            def twenty(x, kd, bd):
                for _ in range(20):
                    x = only(x, kd, bd, 1, prec)
                return x
            c1, cb = times(jax.jit(twenty), a[:3])
            chain = f", chained {cb / 20:.4f} per convolution"
        print(f"xla {spec} {prec}: block {b1:.4f} ms (back-to-back {bb:.4f}), "
              f"depthwise+bias+relu {o1:.4f} ms (back-to-back {ob:.4f}{chain})")
