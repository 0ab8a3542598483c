#!/bin/sh
# tools/cuda_device_test.sh: build the CUDA execution test of every corpus fixture into
# device/ (git-ignored), ready to be carried to a GPU machine and run there with
#   sh device/run.sh
# which prints a pass/fail table with timings. Everything is compiled here (the GPU machine
# needs neither LLVM nor protobuf-c): hloc --target=cuda per fixture, the driver
# tests/cuda/cuda_driver.c linked with the model object, hloc's hlo library, -lcuda (the
# toolkit's stub library) and the libraries the model's header lists (MODEL_CUDA_LIBS:
# -lcublas, -lcudnn, -lcufft); the fixtures' in/out .npy files are copied beside; the same for
# the cases of tests/xla_cases and tests/xla_complex (XLA's outputs, as xla_<case>). Then the same for
# every tests/cuda/cases/*.hlo (kernel shapes the fixtures are too small to reach: split
# reductions, column reductions, weight gradients), each compiled twice (--conv-layout=nchw
# and nhwc), its inputs and expected outputs made here by the reference interpreter
# (hloc-bench-ref --save: the benchmark's deterministic inputs); the gemm_epilogue_* cases a
# third time with --gemm-epilogues=fallback (the fused GEMMs' fallback path). device/bench
# (bench/cuda.sh) is left alone.
# Usage: tools/cuda_device_test.sh [BUILD_DIR]   (default build-cuda, configured if needed)
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build-cuda}
CUDA=${CUDA_HOME:-/usr/local/cuda}
CORPUS=${HLOC_CORPUS:-$ROOT/../shared/corpus}/fixtures
OUT=$ROOT/device
[ -f "$BUILD/CMakeCache.txt" ] || cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" --target hloc hloc_hlo hloc-bench-ref -j2 >/dev/null
CUBLAS_DIR=$(dirname "$(ls "$CUDA"/lib64/libcublas.so "$CUDA"/lib/libcublas.so 2>/dev/null | head -n 1)")
mkdir -p "$OUT"
cp "$ROOT/bench/cuda/lib.sh" "$OUT/"
for d in "$OUT"/*/; do [ "$d" = "$OUT/bench/" ] || rm -rf "$d"; done
# build_one NAME MODULE [hloc flags...]: device/NAME/ with the model object and its driver
build_one() {
  local n=$1 mod=$2 libs
  shift 2
  mkdir -p "$OUT/$n"
  "$BUILD/hloc" "$mod" --target=cuda "$@" --name model -o "$OUT/$n/model.o" --stats 2>"$OUT/$n/stats.txt"
  libs=$(sed -n 's/^#define MODEL_CUDA_LIBS "\(.*\)"/\1/p' "$OUT/$n/model.h")
  cc -O2 -std=gnu17 -I"$OUT/$n" -I"$ROOT/hlo" -I"$CUDA/include" "$ROOT/tests/cuda/cuda_driver.c" \
    "$OUT/$n/model.o" "$BUILD/libhloc_hlo.a" -L"$CUDA/lib64/stubs" -L"$CUBLAS_DIR" $libs \
    -lpthread -lm -o "$OUT/$n/run"
}
for f in "$CORPUS"/*/; do
  n=$(basename "$f")
  build_one "$n" "$f/module.pb"
  cp "$f"/in*.npy "$f"/out*.npy "$OUT/$n/" 2>/dev/null || true
done
for f in "$ROOT"/tests/xla_cases/*/ "$ROOT"/tests/xla_complex/*/; do
  n=xla_$(basename "$f")
  build_one "$n" "$f/module.hlo"
  cp "$f"/in*.npy "$f"/out*.npy "$OUT/$n/"
done
for f in "$ROOT"/tests/cuda/cases/*.hlo; do
  for layout in nchw nhwc; do
    n=case_$(basename "$f" .hlo)_$layout
    build_one "$n" "$f" --conv-layout=$layout
    "$BUILD/hloc-bench-ref" "$f" --interp --save "$OUT/$n" >/dev/null
  done
done
# the prologue GEMM wherever it applies (the cost model stages some of these small cases)
for f in "$ROOT"/tests/cuda/cases/gemm_w8a16*.hlo "$ROOT"/tests/cuda/cases/gemm_prologue_*.hlo; do
  n=case_$(basename "$f" .hlo)_fused
  build_one "$n" "$f" --gemm-prologues=fused
  "$BUILD/hloc-bench-ref" "$f" --interp --save "$OUT/$n" >/dev/null
done
# the fused GEMM epilogues' fallback path (cuBLAS, then the epilogue kernel) on the GPU too
for f in "$ROOT"/tests/cuda/cases/gemm_epilogue_*.hlo; do
  n=case_$(basename "$f" .hlo)_fallback
  build_one "$n" "$f" --gemm-epilogues=fallback
  "$BUILD/hloc-bench-ref" "$f" --interp --save "$OUT/$n" >/dev/null
done
cat >"$OUT/run.sh" <<'RUN'
#!/bin/sh
# Run every fixture compiled by tools/cuda_device_test.sh; prints a table and exits 1 if
# any failed. RTOL 1e-4 (1e-3 for the train step, whose reductions are long).
cd "$(dirname "$0")"
. ./lib.sh
cuda_runtime_libs
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null
fail=0
printf '%-24s %s\n' fixture result
for d in */; do
  n=${d%/}
  [ -x "$n/run" ] || continue
  tol=1e-4
  [ "$n" = simple_cnn_train_step ] && tol=1e-3
  line=$("./$n/run" "$n" "$tol" 20 2>"$n/stderr.txt") || fail=1
  printf '%-24s %s\n' "$n" "${line:-FAIL (no output: $(tail -n 1 "$n/stderr.txt"))}"
  [ -n "$line" ] || fail=1
done
[ $fail = 0 ] && echo "all fixtures passed" || echo "SOME FIXTURES FAILED"
exit $fail
RUN
chmod +x "$OUT/run.sh"
du -sh "$OUT" | sed 's/^/device folder: /'
