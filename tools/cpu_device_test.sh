#!/bin/sh
# tools/cpu_device_test.sh: build the CPU target's execution test of every corpus fixture and
# every tests/cpu/cases/*.hlo for another x86-64 CPU (default sapphirerapids, AVX-512 and AMX)
# into device/cpu/ (git-ignored), ready to be carried to that machine and run there with
#   sh device/cpu/run.sh
# which prints a pass/fail table. Everything is compiled here (the other machine needs
# neither LLVM nor protobuf-c): hloc --cpu CPU per module, tests/cpu_driver.c linked
# statically with the object; the fixtures' in/out .npy files (XLA's outputs) copied beside,
# the cases' inputs and expected outputs made here by the reference interpreter (hloc-bench-ref
# --save). Each runs serially and on 2 threads (cpu_driver's own checks of the packed-weights
# interface included); tolerance: the fixtures' (1e-4, 1e-3 for the train step, 3e-2 for the
# bf16 models), the cases' own rtol line.
# Usage: tools/cpu_device_test.sh [BUILD_DIR]   (default build-test; HLOC_DEVICE_CPU,
#        HLOC_DEVICE_FEATURES: the target, default sapphirerapids and -prefer-256-bit, e.g.
#        -prefer-256-bit,-amx-bf16 for its AVX512-BF16 path; HLOC_DEVICE_OUT: the folder,
#        default device/cpu)
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build-test}
CPU=${HLOC_DEVICE_CPU:-sapphirerapids}
FEAT=${HLOC_DEVICE_FEATURES--prefer-256-bit}
CORPUS=${HLOC_CORPUS:-$ROOT/../shared/corpus}/fixtures
OUT=${HLOC_DEVICE_OUT:-$ROOT/device/cpu}
cmake --build "$BUILD" --target hloc hloc-bench-ref -j2 >/dev/null
rm -rf "$OUT"
mkdir -p "$OUT"
# build_one NAME MODULE TOL: device/cpu/NAME/ with the driver linked with the model object
build_one() {
  mkdir -p "$OUT/$1"
  if ! "$BUILD/hloc" "$2" --cpu "$CPU" --features="$FEAT" --name model -o "$OUT/$1/model.o" \
      2>"$OUT/$1/compile.txt"; then
    echo "$1: compile failed: $(tail -n 1 "$OUT/$1/compile.txt")" >&2
    rm -rf "${OUT:?}/$1"
    return 1
  fi
  cc -O1 -static -I"$OUT/$1" "$ROOT/tests/cpu_driver.c" "$OUT/$1/model.o" -lm -lpthread \
    -o "$OUT/$1/run"
  rm -f "$OUT/$1/model.o"
  echo "$3" >"$OUT/$1/tol"
}
for f in "$CORPUS"/*/; do
  n=$(basename "$f")
  case $n in
    simple_cnn_train_step) tol=1e-3 ;;
    *_bf16) tol=3e-2 ;;
    *) tol=1e-4 ;;
  esac
  build_one "$n" "$f/module.pb" "$tol" || continue
  cp "$f"/in*.npy "$f"/out*.npy "$OUT/$n/"
done
for f in "$ROOT"/tests/cpu/cases/*.hlo; do
  n=case_$(basename "$f" .hlo)
  tol=$(sed -n 's/^\/\/ case: rtol=\([^ ]*\) .*/\1/p' "$f")
  [ "$tol" = 0 ] && tol=1e-7
  build_one "$n" "$f" "$tol" || continue
  "$BUILD/hloc-bench-ref" "$f" --interp --save "$OUT/$n" >/dev/null
done
cat >"$OUT/run.sh" <<'RUN'
#!/bin/sh
# Run every module built by tools/cpu_device_test.sh, serially and on 2 threads; prints a
# table and exits 1 if any failed.
cd "$(dirname "$0")"
grep -m1 'model name' /proc/cpuinfo
grep -o -m1 'amx_bf16\|avx512_bf16' /proc/cpuinfo | sort -u | tr '\n' ' '; echo
fail=0
for d in */; do
  n=${d%/}
  [ -x "$n/run" ] || continue
  for t in 0 2; do
    if "./$n/run" "$n" "$t" "$(cat "$n/tol")" >"$n/log$t.txt" 2>&1; then r=ok; else r=FAIL; fail=1; fi
    printf '%-44s %dt %s %s\n' "$n" "$t" "$r" "$(grep -m1 -i 'worst\|max' "$n/log$t.txt" | cut -c1-60)"
    [ $r = ok ] || tail -n 5 "$n/log$t.txt"
  done
done
[ $fail = 0 ] && echo "all passed" || echo "SOME FAILED"
exit $fail
RUN
chmod +x "$OUT/run.sh"
du -sh "$OUT" | sed 's/^/device folder: /'
