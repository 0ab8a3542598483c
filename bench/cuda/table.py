#!/usr/bin/env python3
"""bench/cuda/table.py: the benchmark table of device/bench/run.sh.

Reads results.txt (one key=value line per bench_driver run), compile.txt (model precision
seconds, measured where hloc ran) and baselines.json (XLA's and torch's host-timed medians),
and prints a Markdown table: hloc's medians (CUDA events; host wall clock around a
synchronized call), XLA's figure for the same precision, torch's default (compiled) figure,
XLA / hloc on the host-timed figures (above 1: hloc is faster), hloc's compile time, then
the copy bandwidth and elementwise_chain's bandwidth as a share of it. The last two columns
put the run against the H200's limits: the GEMMs' TFLOP/s (2 m n k batch of each cuBLAS or
cuBLASLt step in the model's --stats) as a share of the dense bf16 tensor-core peak measured on
it, and the arguments' and results' bytes per run as a share of its HBM bandwidth (a decode
step's floor)."""
import json
import re

TC_PEAK_TFLOPS = 790.0  # dense bf16 tensor-core peak measured on this H200
HBM_GBPS = 4300.0       # its HBM bandwidth

def gemm_flops(label):
    try:
        text = open(label + "/stats.txt").read()
    except OSError:
        return None
    f = 0
    for m in re.finditer(r"cublas(?:Lt)? gemm \S+ m=(\d+) n=(\d+) k=(\d+) batch=(\d+)", text):
        a, b, c, d = map(int, m.groups())
        f += 2 * a * b * c * d
    return f

base = json.load(open("baselines.json"))
models = base["models"]
rows = {}
copy = None
errors = []
for line in open("results.txt"):
    kv = dict(p.split("=", 1) for p in line.split() if "=" in p)
    if "label" not in kv:
        errors.append(line.strip())
        continue
    if kv["label"] == "copy":
        copy = kv
    elif "event_ms" in kv:
        rows[kv["label"]] = kv
    else:
        errors.append(line.strip())
comp = {}
for line in open("compile.txt"):
    n, p, t = line.split()
    comp[(n, p)] = float(t)

def ms(x):
    return "-" if x is None else "%.3f" % x

print("| model | precision | hloc events ms | hloc host ms | back-to-back ms | XLA ms | torch ms | XLA/hloc | compile s | first call ms | GEMM TFLOP/s (of peak) | I/O GB/s (of HBM) |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for label in sorted(rows):
    r = rows[label]
    n, p = label.rsplit("_", 1)
    b = models.get(n, {})
    full = p in ("highest", "bf16x3")  # bf16x3: beside the f32 references
    xla = b.get("xla_gpu_bf16_run_s") or b.get("xla_gpu_f32_run_s" if full else "xla_gpu_tf32_run_s")
    torch = (b.get("torch_gpu_default_run_s") or b.get("torch_compile_gpu_run_s")) if full else None
    host = float(r["host_ms"])
    ratio = "%.2f" % (xla * 1e3 / host) if xla else "-"
    ev = float(r["event_ms"])
    fl = gemm_flops(label)
    tf = "%.1f (%.0f%%)" % (fl / ev / 1e9, 100 * fl / ev / 1e9 / TC_PEAK_TFLOPS) if fl else "-"
    gb = "%s (%.0f%%)" % (r["GBps_io"], 100 * float(r["GBps_io"]) / HBM_GBPS) if "GBps_io" in r else "-"
    print("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
        n, p, ms(float(r["event_ms"])), ms(host), ms(float(r["b2b_ms"])), ms(xla * 1e3 if xla else None),
        ms(torch * 1e3 if torch else None), ratio, "%.2f" % comp[(n, p)] if (n, p) in comp else "-",
        r.get("first_ms", "-"), tf, gb))
if copy:
    print()
    print("device-to-device copy of 16M f32: %s ms events (%s GB/s), %s ms host (%s GB/s); baselines.json: %.4f ms host"
          % (copy["event_ms"], copy["event_GBps"], copy["host_ms"], copy["host_GBps"], base["gpu_copy_16M_f32_s"] * 1e3))
    ew = rows.get("elementwise_chain_highest")
    if ew:
        print("elementwise_chain: %s GB/s (events) = %.0f%% of the copy's %s GB/s"
              % (ew["GBps_io"], 100 * float(ew["GBps_io"]) / float(copy["event_GBps"]), copy["event_GBps"]))
for e in errors:
    print("ERROR:", e)
