#!/bin/sh
# bench/cuda/loops.sh: scanned recurrent models on the GPU, hloc beside XLA in one run.
#
# For every shape TxBxH: an LSTM scanned over T steps (lax.scan's form: a counted while loop
# whose trip concatenates x[t] and h, multiplies by an f32 [2H, 4H] weight, adds the bias,
# applies the gates and writes h into the outputs by a dynamic-update-slice), batch B, hidden
# and input size H. hloc compiles it twice (--cuda-graphs=auto: the steps replayed as a CUDA
# graph; =off: launched one by one), linked with bench/cuda/bench_driver.c into device/loops/
# (git-ignored); device/loops/run.sh, on the GPU machine, times both (CUDA events, medians)
# and then, where JAX is installed, XLA's jitted lax.scan of the same LSTM
# (bench/cuda/loops_xla.py) at the highest precision, and prints one table. The same module is
# compiled for the GPU machine's CPU too (--cpu sapphirerapids --features=-prefer-256-bit, as
# bench/cpu.sh's device bundle, linked with bench/cpu/bench_model.c) and timed pinned to two
# cores beside XLA's CPU backend on the same two cores (and again with hloc's per-kernel
# profile, lstm_*_cpu/bench_profile, into cpu_profile.txt).
# Usage: bench/cuda/loops.sh [BUILD_DIR] [SHAPES]   (default build-cudarel; SHAPES a list of
#        TxBxH, default 64x8x256 64x1x1024 256x32x512)
#        sh device/loops/run.sh [ITERS]
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/bench/cuda/lib.sh"
BUILD=${1:-$ROOT/build-cudarel}
SHAPES=${2:-"64x8x256 64x1x1024 256x32x512"}
OUT=$ROOT/device/loops
cuda_bundle_begin "$OUT"
cp "$ROOT/bench/cuda/loops_xla.py" "$OUT/"
echo "$SHAPES" >"$OUT/shapes.txt"
# lstm T B H: the scanned LSTM's HLO text
lstm() {
  local T=$1 B=$2 H=$3
  local H2=$((2 * H)) H4=$((4 * H)) H3=$((3 * H))
  local ST="(s32[], f32[$B,$H], f32[$B,$H], f32[$T,$B,$H], f32[$H2,$H4], f32[$H4], f32[$T,$B,$H])"
  cat <<HLO
HloModule lstm_scan_${T}x${B}x${H}
body {
  st = $ST parameter(0)
  i = s32[] get-tuple-element(st), index=0
  h = f32[$B,$H] get-tuple-element(st), index=1
  c = f32[$B,$H] get-tuple-element(st), index=2
  xs = f32[$T,$B,$H] get-tuple-element(st), index=3
  w = f32[$H2,$H4] get-tuple-element(st), index=4
  b = f32[$H4] get-tuple-element(st), index=5
  ys = f32[$T,$B,$H] get-tuple-element(st), index=6
  z = s32[] constant(0)
  xd = f32[1,$B,$H] dynamic-slice(xs, i, z, z), dynamic_slice_sizes={1,$B,$H}
  x = f32[$B,$H] reshape(xd)
  hx = f32[$B,$H2] concatenate(x, h), dimensions={1}
  g0 = f32[$B,$H4] dot(hx, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  bb = f32[$B,$H4] broadcast(b), dimensions={1}
  g = f32[$B,$H4] add(g0, bb)
  gi = f32[$B,$H] slice(g), slice={[0:$B], [0:$H]}
  gf = f32[$B,$H] slice(g), slice={[0:$B], [$H:$H2]}
  go = f32[$B,$H] slice(g), slice={[0:$B], [$H2:$H3]}
  gc = f32[$B,$H] slice(g), slice={[0:$B], [$H3:$H4]}
  si = f32[$B,$H] logistic(gi)
  sf = f32[$B,$H] logistic(gf)
  so = f32[$B,$H] logistic(go)
  tc = f32[$B,$H] tanh(gc)
  fc = f32[$B,$H] multiply(sf, c)
  ic = f32[$B,$H] multiply(si, tc)
  c2 = f32[$B,$H] add(fc, ic)
  t2 = f32[$B,$H] tanh(c2)
  h2 = f32[$B,$H] multiply(so, t2)
  h3 = f32[1,$B,$H] reshape(h2)
  ys2 = f32[$T,$B,$H] dynamic-update-slice(ys, h3, i, z, z)
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  ROOT r = $ST tuple(i2, h2, c2, xs, w, b, ys2)
}
cond {
  st = $ST parameter(0)
  i = s32[] get-tuple-element(st), index=0
  n = s32[] constant($T)
  ROOT lt = pred[] compare(i, n), direction=LT
}
ENTRY main {
  xs = f32[$T,$B,$H] parameter(0)
  h0 = f32[$B,$H] parameter(1)
  c0 = f32[$B,$H] parameter(2)
  w = f32[$H2,$H4] parameter(3)
  b = f32[$H4] parameter(4)
  z = s32[] constant(0)
  zf = f32[] constant(0)
  ys = f32[$T,$B,$H] broadcast(zf), dimensions={}
  init = $ST tuple(z, h0, c0, xs, w, b, ys)
  wl = $ST while(init), condition=cond, body=body
  hf = f32[$B,$H] get-tuple-element(wl), index=1
  yf = f32[$T,$B,$H] get-tuple-element(wl), index=6
  ROOT out = (f32[$B,$H], f32[$T,$B,$H]) tuple(hf, yf)
}
HLO
}
# cpu_bench DIR SHAPE BINARY HLOC_FLAG [CC_FLAGS]: the LSTM for the GPU machine's CPU, linked with
# bench/cpu/bench_model.c into DIR/BINARY
cpu_bench() {
  "$BUILD/hloc" "$OUT/lstm_$2.hlo" --cpu sapphirerapids --features=-prefer-256-bit --name m \
    -o "$1/m.o" "$4" 2>"$1/hloc_$3.txt"
  cc -O2 -std=gnu17 -I"$ROOT/bench/cpu" -DBENCH_HEADER="\"$1/m.h\"" -DBENCH_NAME=m -DBENCH_UNAME=M \
    -DBENCH_LABEL="\"lstm_$2_cpu\"" ${5:-} "$ROOT/bench/cpu/bench_model.c" "$1/m.o" -lm -lpthread \
    -static -o "$1/$3"
}
for s in $SHAPES; do
  T=${s%%x*} r=${s#*x}
  B=${r%%x*} H=${r#*x}
  lstm "$T" "$B" "$H" >"$OUT/lstm_$s.hlo"
  for mode in auto off; do
    d=$OUT/lstm_${s}_$mode
    mkdir -p "$d"
    "$BUILD/hloc" "$OUT/lstm_$s.hlo" --target=cuda --cuda-graphs=$mode --name model \
      -o "$d/model.o" --stats 2>"$d/stats.txt"
    cuda_bench_link "$d"
  done
  d=$OUT/lstm_${s}_cpu
  mkdir -p "$d"
  cpu_bench "$d" "$s" bench --stats
  cpu_bench "$d" "$s" bench_profile --profile -DBENCH_PROFILE
  rm -f "$d/m.o"
done
cat >"$OUT/run.sh" <<'RUN'
#!/bin/sh
# Time hloc's scans with and without CUDA graphs, then XLA's, and print the table.
cd "$(dirname "$0")"
ITERS=${1:-50}
. ./lib.sh
cuda_bench_start
: >cpu_profile.txt
for s in $(cat shapes.txt); do
  for mode in auto off; do
    "./lstm_${s}_$mode/bench" "lstm_${s}_$mode" "$ITERS" >>results.txt 2>&1 || echo "label=lstm_${s}_$mode failed" >>results.txt
  done
done
python3 loops_xla.py $(cat shapes.txt) >>results.txt 2>xla_stderr.txt || echo "xla: not run ($(tail -n 1 xla_stderr.txt))"
for s in $(cat shapes.txt); do
  taskset -c 0,1 "./lstm_${s}_cpu/bench" --threads 2 --budget 3 >>results.txt 2>&1 || echo "model=lstm_${s}_cpu failed" >>results.txt
done
for s in $(cat shapes.txt); do
  taskset -c 0,1 "./lstm_${s}_cpu/bench_profile" --threads 2 --budget 3 >>cpu_profile.txt 2>&1 || true
done
JAX_PLATFORMS=cpu \
  taskset -c 0,1 python3 loops_xla.py --cpu $(cat shapes.txt) >>results.txt 2>>xla_stderr.txt || echo "xla cpu: not run"
python3 - <<'PY'
import re
r = {}
for line in open("results.txt"):
    kv = dict(re.findall(r"(\w+)=(\S+)", line))
    if "label" in kv: r[kv["label"]] = kv
    elif "model" in kv: r[kv["model"]] = kv
print(f"{'LSTM (TxBxH)':14} {'graph ev.':>9} {'graph b2b':>9} {'steps ev.':>9} {'steps b2b':>9} {'XLA ev.':>9} {'XLA b2b':>9}   ms")
for s in open("shapes.txt").read().split():
    def ms(lbl, key):
        v = r.get(lbl, {}).get(key)
        return float(v) if v else float("nan")
    g, gb = ms(f"lstm_{s}_auto", "event_ms"), ms(f"lstm_{s}_auto", "b2b_ms")
    o, ob = ms(f"lstm_{s}_off", "event_ms"), ms(f"lstm_{s}_off", "b2b_ms")
    x, xb = ms(f"xla_lstm_{s}", "call_ms"), ms(f"xla_lstm_{s}", "b2b_ms")
    print(f"{s:14} {g:9.4f} {gb:9.4f} {o:9.4f} {ob:9.4f} {x:9.4f} {xb:9.4f}   hloc {x / g:4.2f}x XLA's speed")
print(f"{'CPU, 2 cores':14} {'hloc':>9} {'XLA':>9}   ms (medians)")
for s in open("shapes.txt").read().split():
    h = r.get(f"lstm_{s}_cpu", {}).get("median_s")
    x = r.get(f"xla_cpu_lstm_{s}", {}).get("call_ms")
    h = float(h) * 1e3 if h else float("nan")
    x = float(x) if x else float("nan")
    print(f"{s:14} {h:9.3f} {x:9.3f}   hloc {x / h:4.2f}x XLA's speed")
PY
RUN
chmod +x "$OUT/run.sh"
du -sh "$OUT" | sed 's/^/bench folder: /'
