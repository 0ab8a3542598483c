#!/bin/sh
# bench/cuda.sh: build the CUDA benchmark of every bench model into device/bench
# (git-ignored), ready to be carried to a GPU machine and run there with
#   sh device/bench/run.sh [ITERS]
# which prints, per model and precision, hloc's run time (median of ITERS runs, CUDA events
# and host wall clock around a synchronized call) beside XLA's and torch's figures from
# baselines.json, hloc's compile time (measured here) and the device-to-device copy
# bandwidth; the elementwise_chain line gives its GB/s against that copy.
# Everything is compiled here (the GPU machine needs neither LLVM nor protobuf-c): hloc
# --target=cuda per model (--precision=highest, --precision=tf32 where baselines.json has
# xla_gpu_tf32_run_s, and --dot-algorithm=bf16x3 for f32 models with dots), timed with the wall clock (hloc's whole run: load, optimize,
# LLVM, ptxas, object); bench/cuda/bench_driver.c linked with each model object.
# Usage: bench/cuda.sh [BUILD_DIR]   (default build-cudarel, configured Release if needed)
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/bench/cuda/lib.sh"
BUILD=${1:-$ROOT/build-cudarel}
CUDA=${CUDA_HOME:-/usr/local/cuda}
CORPUS=${HLOC_CORPUS:-$ROOT/../shared/corpus}
OUT=$ROOT/device/bench
[ -f "$BUILD/CMakeCache.txt" ] || cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" --target hloc -j2 >/dev/null
rm -rf "$OUT"
mkdir -p "$OUT"
cp "$ROOT/bench/cuda/lib.sh" "$OUT/"
cp "$CORPUS/baselines.json" "$ROOT/bench/cuda/table.py" "$OUT/"
: >"$OUT/compile.txt"
for f in "$CORPUS"/bench/*/; do
  n=$(basename "$f")
  precs=highest
  grep -A 20 "\"$n\": {" "$CORPUS/baselines.json" | sed '/}/q' | grep -q xla_gpu_tf32_run_s && precs="highest tf32"
  # f32 products also as XLA's dot_bf16_bf16_f32_x3 (--dot-algorithm=bf16x3: tensor cores)
  case $n in *bf16*) ;; *) grep -q " dot(" "$f/module.hlo" && precs="$precs bf16x3" ;; esac
  for p in $precs; do
    d=$OUT/${n}_$p
    mkdir -p "$d"
    t0=$(date +%s.%N)
    flags="--precision=$p"
    [ "$p" = bf16x3 ] && flags="--precision=highest --dot-algorithm=bf16x3"
    "$BUILD/hloc" "$f/module.pb" --target=cuda $flags --name model -o "$d/model.o" --stats 2>"$d/stats.txt"
    t1=$(date +%s.%N)
    echo "$n $p $(echo "$t1 - $t0" | bc)" >>"$OUT/compile.txt"
    cuda_bench_link "$d"
  done
done
cat >"$OUT/run.sh" <<'RUN'
#!/bin/sh
# Run every benchmark built by bench/cuda.sh and print the table (table.py).
cd "$(dirname "$0")"
ITERS=${1:-50}
. ./lib.sh
cuda_bench_start
first=$(ls -d */ | head -n 1)
"./${first}bench" copy "$ITERS" >>results.txt 2>&1
cuda_bench_all "$ITERS"
python3 table.py
RUN
chmod +x "$OUT/run.sh"
cat "$OUT/compile.txt"
du -sh "$OUT" | sed 's/^/bench folder: /'
