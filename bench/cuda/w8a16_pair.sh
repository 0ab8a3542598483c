#!/bin/sh
# bench/cuda/w8a16_pair.sh: int8-weight (W8A16) products on the GPU, hloc beside XLA in one run.
#
# For every shape MxKxN: x bf16[M,K] times an s8[K,N] weight converted to bf16 and scaled per
# column (bf16), the product bf16, as weight-only quantized models export it. hloc compiles it
# three times (--gemm-prologues=auto: the prologue fused into its tensor-core GEMM where
# estimated faster; =fused: always; =staged: the weight dequantized by a kernel, then cuBLAS),
# linked with
# bench/cuda/bench_driver.c into device/w8a16/ (git-ignored); device/w8a16/run.sh, on the GPU
# machine, times all three (CUDA events, medians) and then, where JAX is installed, XLA's fused
# product and its own staged form (bench/cuda/w8a16_xla.py, the same shapes and values' kind)
# and prints one table.
# Usage: bench/cuda/w8a16_pair.sh [BUILD_DIR] [SHAPES]   (default build-cudarel; SHAPES a list
#        of MxKxN, default the Llama-3-8B projections at 16 to 2048 rows)
#        sh device/w8a16/run.sh [ITERS]
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/bench/cuda/lib.sh"
BUILD=${1:-$ROOT/build-cudarel}
SHAPES=${2:-"16x4096x14336 64x4096x14336 256x4096x14336 1024x4096x14336 2048x4096x14336 16x14336x4096 256x14336x4096 1024x14336x4096 256x4096x4096 2048x4096x4096"}
CUDA=${CUDA_HOME:-/usr/local/cuda}
OUT=$ROOT/device/w8a16
[ -f "$BUILD/CMakeCache.txt" ] || cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" --target hloc -j2 >/dev/null
rm -rf "$OUT"
mkdir -p "$OUT"
cp "$ROOT/bench/cuda/lib.sh" "$OUT/"
cp "$ROOT/bench/cuda/w8a16_xla.py" "$OUT/"
echo "$SHAPES" >"$OUT/shapes.txt"
for s in $SHAPES; do
  M=${s%%x*} r=${s#*x}
  K=${r%%x*} N=${r#*x}
  cat >"$OUT/$s.hlo" <<HLO
HloModule w8a16_$M
ENTRY e {
  x = bf16[$M,$K] parameter(0)
  wq = s8[$K,$N] parameter(1)
  scale = bf16[$N] parameter(2)
  wc = bf16[$K,$N] convert(wq)
  sb = bf16[$K,$N] broadcast(scale), dimensions={1}
  w = bf16[$K,$N] multiply(wc, sb)
  ROOT d = bf16[$M,$N] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
HLO
  for mode in auto fused staged; do
    d=$OUT/${s}_$mode
    mkdir -p "$d"
    "$BUILD/hloc" "$OUT/$s.hlo" --target=cuda --gemm-prologues=$mode --name model -o "$d/model.o" \
      --stats 2>"$d/stats.txt"
    cuda_bench_link "$d"
  done
done
cat >"$OUT/run.sh" <<'RUN'
#!/bin/sh
# Time hloc's fused and staged W8A16 products, then XLA's, and print the table.
cd "$(dirname "$0")"
ITERS=${1:-50}
. ./lib.sh
cuda_bench_start
for s in $(cat shapes.txt); do
  for mode in auto fused staged; do
    "./${s}_$mode/bench" "${s}_$mode" "$ITERS" >>results.txt 2>&1 || echo "label=${s}_$mode failed" >>results.txt
  done
done
python3 w8a16_xla.py $(cat shapes.txt) >>results.txt 2>xla_stderr.txt || echo "xla: not run ($(tail -n 1 xla_stderr.txt))"
python3 - <<'PY'
import re
r = {}
for line in open("results.txt"):
    kv = dict(re.findall(r"(\w+)=(\S+)", line))
    if "label" in kv: r[kv["label"]] = kv
print(f"{'shape (MxKxN)':18} {'hloc':>9} {'fused':>9} {'staged':>9} {'XLA':>9} {'XLA st.':>9}   ms, back to back")
for s in open("shapes.txt").read().split():
    M, K, N = map(int, s.split("x"))
    def ms(lbl, key="b2b_ms"):
        v = r.get(lbl, {}).get(key)
        return float(v) if v else float("nan")
    a, f, b = ms(s + "_auto"), ms(s + "_fused"), ms(s + "_staged")
    x, y = ms("xla_" + s, "fused_ms"), ms("xla_" + s, "staged_ms")
    tf = 2 * M * K * N / f / 1e9 if f == f else float("nan")
    print(f"{s:18} {a:9.4f} {f:9.4f} {b:9.4f} {x:9.4f} {y:9.4f}   fused {tf:4.0f} TFLOP/s; hloc {x / a:4.2f}x XLA's speed")
PY
RUN
chmod +x "$OUT/run.sh"
du -sh "$OUT" | sed 's/^/bench folder: /'
