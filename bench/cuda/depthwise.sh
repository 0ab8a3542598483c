#!/bin/sh
# bench/cuda/depthwise.sh: depthwise-separable convolutions on the GPU, hloc beside XLA.
#
# For every shape N,H,W,C,CO,STRIDE: bench/cuda/depthwise/gen.py's block (a depthwise 3x3
# convolution with bias and ReLU, then a pointwise one) and its depthwise part alone, compiled
# here at --precision=highest and tf32 and linked with bench/cuda/bench_driver.c into
# device/dw/ (git-ignored); on the GPU machine device/dw/run.sh times each (CUDA events,
# medians, and back to back) and then, where JAX is installed, XLA on the same shapes
# (depthwise/xla_dw.py: the block and its depthwise part, at highest and default precision).
# Usage: bench/cuda/depthwise.sh [BUILD_DIR] [SHAPES]   (default build-cudarel; SHAPES a list of
#        N,H,W,C,CO,S, default MobileNet-like layers)
#        sh device/dw/run.sh [ITERS]
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/bench/cuda/lib.sh"
BUILD=${1:-$ROOT/build-cudarel}
SHAPES=${2:-"8,56,56,128,256,1 8,112,112,64,128,2 8,14,14,512,512,1 8,28,28,256,256,2"}
OUT=$ROOT/device/dw
cuda_bundle_begin "$OUT"
cp "$ROOT/bench/cuda/depthwise/xla_dw.py" "$OUT/"
echo "$SHAPES" >"$OUT/shapes.txt"
for s in $SHAPES; do
  for part in block only; do
    t=$(echo "$s" | tr ',' '_')
    arg=""
    [ "$part" = only ] && arg=only
    python3 "$ROOT/bench/cuda/depthwise/gen.py" $(echo "$s" | tr ',' ' ') $arg >"$OUT/${part}_$t.hlo"
    for p in highest tf32; do
      d=$OUT/${part}_${t}_$p
      mkdir -p "$d"
      "$BUILD/hloc" "$OUT/${part}_$t.hlo" --target=cuda --precision=$p --name model -o "$d/model.o" \
        --stats 2>"$d/stats.txt"
      cuda_bench_link "$d"
    done
  done
done
cat >"$OUT/run.sh" <<'RUN'
#!/bin/sh
# Time every depthwise benchmark built by bench/cuda/depthwise.sh, then XLA on the same shapes.
cd "$(dirname "$0")"
ITERS=${1:-50}
. ./lib.sh
cuda_bench_start
cuda_bench_all "$ITERS"
grep -o "label=[^ ]* \(event_ms=[^ ]* host_ms=[^ ]* b2b_ms=[^ ]*\|failed.*\)" results.txt
python3 xla_dw.py $(cat shapes.txt) 2>&1 | grep "^xla"
RUN
du -sh "$OUT" | sed 's/^/bundle: /'
