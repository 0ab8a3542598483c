# The depthwise-separable block of bench/cuda/depthwise.sh as HLO text:
#   python3 gen.py N H W C CO STRIDE [only]
# x f32[N,H,W,C] (NHWC), a depthwise 3x3 convolution (padding 1, the stride given) + bias + ReLU,
# then a pointwise 1x1 convolution to CO channels + ReLU; with "only", the depthwise part alone.
import sys

N, H, W, C, CO, S = [int(v) for v in sys.argv[1:7]]
only = len(sys.argv) > 7
Ho, Wo = (H + 2 - 3) // S + 1, (W + 2 - 3) // S + 1
y = f"f32[{N},{Ho},{Wo},{C}]"
lines = [
    "HloModule dwsep",
    "ENTRY e {",
    f"  x = f32[{N},{H},{W},{C}] parameter(0)",
    f"  kd = f32[3,3,1,{C}] parameter(1)",
    f"  bd = f32[{C}] parameter(2)",
]
if not only:
    lines.append(f"  kp = f32[1,1,{C},{CO}] parameter(3)")
lines += [
    f"  d = {y} convolution(x, kd), window={{size=3x3 stride={S}x{S} pad=1_1x1_1}}, "
    f"dim_labels=b01f_01io->b01f, feature_group_count={C}",
    f"  bb = {y} broadcast(bd), dimensions={{3}}",
    f"  a = {y} add(d, bb)",
    "  z = f32[] constant(0)",
    f"  zb = {y} broadcast(z), dimensions={{}}",
    f"  {'ROOT ' if only else ''}r = {y} maximum(a, zb)",
]
if not only:
    o = f"f32[{N},{Ho},{Wo},{CO}]"
    lines += [
        f"  p = {o} convolution(r, kp), window={{size=1x1}}, dim_labels=b01f_01io->b01f",
        f"  zp = {o} broadcast(z), dimensions={{}}",
        f"  ROOT o = {o} maximum(p, zp)",
    ]
print("\n".join(lines + ["}"]))
