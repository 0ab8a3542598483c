"""bench/cpu/ort_pair.py: hloc's model and ONNX Runtime's timed alternately, in one run, on
the same cores: the ratio of the two on a host whose speed drifts.

    python3 ort_pair.py ONNX_DIR MODEL THREADS BENCH_DRIVER [DRIVER_ARGS ...]

BENCH_DRIVER is the model's bench driver (bench/cpu/bench_model.c), started here with
--lockstep --threads THREADS and DRIVER_ARGS (e.g. --packed): after its warm-up it makes the
runs asked for on its stdin. ONNX Runtime runs the same model in this process (ort_bench.py's
session: argument 0 filled with sin(i * 0.37), THREADS intra-op threads). Then PAIR_ROUNDS
rounds (default 60), each a block of PAIR_BLOCK + 1 runs of hloc (default 3 + 1) and the same
of ONNX Runtime, in alternating order (hloc first in odd rounds), each block after a pause of
PAIR_GAP_S seconds (default 0.05: ONNX Runtime's idle workers spin for a while after a run,
and on the same cores they would take one from hloc's next block); the first run of each
block is dropped (its caches, its workers waking), each block's median is its figure. A
block of 3 runs of mlp takes about 20 ms, far less than the drifts seen on the device host
(its speed moved by 1.5x within a minute), so each round's ratio compares the two at nearly
one speed. The rounds are shared by PAIR_PROCS driver processes (default 3) started one after
the other: on the device host one process of the same driver ran mlp at 8.5 ms for its whole
life while the processes after it ran 6.0-6.1 ms (its physical pages, or the host's state
when it started), a state that alternating blocks within one process cannot average out.
PAIR_SECONDS (default 0: none) stops after the round that spends that many seconds,
once PAIR_MIN_ROUNDS (default 6) are done: a model of seconds per run gets its few rounds in a
bounded time. Prints one JSON line: the medians over the rounds of each
side's block medians, the ratio ONNX Runtime / hloc per round with its median, quartiles and
the share of rounds in which hloc was faster, and each side's tenth percentile of its block
medians (the figure of the host's quieter moments; their ratio beside the median's). The
line carries PAIR_LABEL (default MODEL) as its label.
"""
import json
import os
import statistics
import subprocess
import sys
import time

import ort_bench


def quartiles(xs):
    xs = sorted(xs)
    return xs[len(xs) // 4], xs[(3 * len(xs)) // 4]


def p10(xs):
    return sorted(xs)[len(xs) // 10]


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    onnx_dir, model, threads, driver = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    rounds = int(os.environ.get("PAIR_ROUNDS", "60"))
    block = int(os.environ.get("PAIR_BLOCK", "3"))
    gap = float(os.environ.get("PAIR_GAP_S", "0.05"))
    seconds = float(os.environ.get("PAIR_SECONDS", "0"))
    min_rounds = int(os.environ.get("PAIR_MIN_ROUNDS", "6"))
    made = ort_bench.session(onnx_dir, model, threads)
    if made is None:
        sys.exit("ort_pair: no ONNX model %s in %s" % (model, onnx_dir))
    s, feeds, _ = made
    s.run(None, feeds)
    cmd = [driver, "--lockstep", "--threads", str(threads)] + sys.argv[5:]
    procs = max(1, int(os.environ.get("PAIR_PROCS", "3")))
    p, tails = None, []

    def start():
        nonlocal p
        p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def stop():
        p.stdin.close()
        tails.append(p.stdout.read().strip())
        if p.wait() != 0:
            sys.exit("ort_pair: the driver failed")

    def hloc_block():
        time.sleep(gap)
        p.stdin.write("%d\n" % (block + 1))
        p.stdin.flush()
        line = p.stdout.readline()
        if not line:
            sys.exit("ort_pair: the driver stopped")
        return [float(x) for x in line.split()][1:]

    def ort_block():
        time.sleep(gap)
        return ort_bench.timed_runs(s, feeds, block + 1)[1:]

    hl, ox, ratio = [], [], []
    t0 = time.perf_counter()
    start()
    part, part_rounds = 0, 0
    for r in range(rounds):
        spent = time.perf_counter() - t0
        if seconds > 0 and r >= min_rounds and spent > seconds:
            break
        # the next driver process after this one's share of the rounds (or of the seconds)
        due = r >= (part + 1) * -(-rounds // procs) or (seconds > 0 and spent > (part + 1) * seconds / procs)
        if part + 1 < procs and part_rounds >= 2 and due:
            stop()
            start()
            part, part_rounds = part + 1, 0
        if r % 2 == 0:
            h = statistics.median(hloc_block())
            o = statistics.median(ort_block())
        else:
            o = statistics.median(ort_block())
            h = statistics.median(hloc_block())
        hl.append(h)
        ox.append(o)
        ratio.append(o / h)
        part_rounds += 1
    stop()
    q1, q3 = quartiles(ratio)
    print(json.dumps({"label": os.environ.get("PAIR_LABEL", model), "model": model, "threads": threads, "rounds": len(ratio), "block": block, "gap_s": gap,
                      "hloc_median_s": statistics.median(hl), "ort_median_s": statistics.median(ox),
                      "ratio_median": statistics.median(ratio), "ratio_q1": q1, "ratio_q3": q3,
                      "hloc_faster_share": sum(x > 1 for x in ratio) / len(ratio),
                      "hloc_p10_s": p10(hl), "ort_p10_s": p10(ox),
                      "ort_version": ort_bench.ort.__version__,
                      "procs": part + 1, "driver": " | ".join(tails)}), flush=True)


if __name__ == "__main__":
    main()
