"""bench/cpu/ort_bench.py: ONNX Runtime (CPU, Python package) on the bench workloads, the
same measurement as ../shared/peers/ort_bench.mjs for machines with the onnxruntime Python
package instead of Node (the device host): argument 0 filled with sin(i * 0.37), one warm-up
run, then the median of 10 runs (3 for simple_cnn; ORT_BENCH_RUNS=N sets another count),
intra-op threads as given, inter-op 1, sequential execution, all graph optimizations. Prints
one JSON line per model.

    python3 ort_bench.py ONNX_DIR THREADS [MODEL ...]
"""
import json
import os
import sys
import time

import numpy as np
import onnxruntime as ort

SHAPES = {
    "elementwise_chain": [16 * 1024 * 1024],
    "mlp": [256, 784],
    "simple_cnn": [32, 3, 224, 224],
    "transformer_layer": [8, 128, 768],
    "resnet_block": [32, 64, 112, 112],
}


def session(onnx_dir, name, threads):
    """The model's session (intra-op threads as given, inter-op 1, sequential, all graph
    optimizations), its feeds and the seconds its creation took; None when there is no model."""
    path = os.path.join(onnx_dir, name + ".onnx")
    if name not in SHAPES or not os.path.exists(path):
        return None
    dims = SHAPES[name]
    n = int(np.prod(dims))
    x = np.sin(np.arange(n, dtype=np.float64) * 0.37).astype(np.float32).reshape(dims)
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    t0 = time.perf_counter()
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    return s, {"x": x}, time.perf_counter() - t0


def timed_runs(s, feeds, runs):
    """Seconds of each of runs calls of the session."""
    ts = []
    for _ in range(runs):
        t = time.perf_counter()
        s.run(None, feeds)
        ts.append(time.perf_counter() - t)
    return ts


def main():
    onnx_dir, threads = sys.argv[1], int(sys.argv[2])
    names = sys.argv[3:] or list(SHAPES)
    for name in names:
        made = session(onnx_dir, name, threads)
        if made is None:
            continue
        s, feeds, tload = made
        s.run(None, feeds)
        runs = int(os.environ.get("ORT_BENCH_RUNS", "0")) or (3 if name == "simple_cnn" else 10)
        ts = sorted(timed_runs(s, feeds, runs))
        print(json.dumps({"model": name, "threads": threads, "ort_version": ort.__version__,
                          "session_create_s": tload, "run_median_s": ts[len(ts) // 2],
                          "run_min_s": ts[0]}), flush=True)


if __name__ == "__main__":
    main()
