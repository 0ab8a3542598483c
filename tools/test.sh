#!/usr/bin/env bash
# tools/test.sh: the test command (CI runs exactly this through .ci/run).
#  1. installs what is missing and builds everything with -Werror (Release); checks that
#     docs/architecture.md names every source file and that the C sources are as clang-format
#     (.clang-format) writes them;
#  2. runs the Criterion suite (readers, verifier, interpreter, targets, tools);
#  3. rebuilds with AddressSanitizer + UndefinedBehaviorSanitizer and runs the suite again;
#  4. runs each libFuzzer target for a bounded time on the corpus seeds.
# Set HLOC_QUICK=1 to skip steps 3 and 4; HLOC_FUZZ_SECONDS to change the fuzzing budget.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
jobs=$(nproc)
fuzz_s=${HLOC_FUZZ_SECONDS:-45}
corpus=$root/../shared/corpus

echo "== setup and build (Release, -Werror)"
"$root/tools/setup.sh" "$root/build-test" -DHLOC_WERROR=ON
cmake --build "$root/build-test" -j"$jobs" 2>&1 | grep -E "warning|error|Error" || true
cmake --build "$root/build-test" -j"$jobs" >/dev/null

echo "== docs"; bash "$root/tools/check_docs.sh"

echo "== format (clang-format --dry-run --Werror)"
(cd "$root" && git ls-files '*.c' '*.h' 2>/dev/null || find proto hlo optimizer layout memplan targets tools tests bench -name '*.[ch]') |
  (cd "$root" && xargs clang-format --dry-run --Werror)

echo "== tests"
"$root/build-test/hloc_tests" --jobs "$jobs"

if [ "${HLOC_QUICK:-0}" = 1 ]; then exit 0; fi

echo "== tests under ASan + UBSan"
cmake -S "$root" -B "$root/build-asan" -DCMAKE_BUILD_TYPE=Debug -DHLOC_SANITIZE=ON \
  -DHLOC_WERROR=ON >/dev/null
cmake --build "$root/build-asan" -j"$jobs" --target hloc_tests hloc hloc-run >/dev/null
ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS=suppressions="$root/tests/lsan.supp" \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 "$root/build-asan/hloc_tests" --jobs "$jobs"

echo "== fuzzing (${fuzz_s}s per reader)"
CC=clang cmake -S "$root" -B "$root/build-fuzz" -DCMAKE_BUILD_TYPE=Debug -DHLOC_FUZZ=ON \
  -DHLOC_TESTS=OFF >/dev/null
cmake --build "$root/build-fuzz" -j"$jobs" --target fuzz_text fuzz_proto fuzz_npy >/dev/null
seeds=$(mktemp -d)
trap 'rm -rf "$seeds"' EXIT
for target in "$root"/build-fuzz/fuzz_*; do
  name=$(basename "$target")
  mkdir -p "$seeds/$name"
  case $name in
    fuzz_text) cp "$corpus"/fixtures/*/module.hlo "$seeds/$name/" 2>/dev/null || true ;;
    fuzz_proto) cp "$corpus"/fixtures/*/module.pb "$seeds/$name/" 2>/dev/null || true ;;
    fuzz_npy) cp "$corpus"/fixtures/mlp/*.npy "$seeds/$name/" 2>/dev/null || true ;;
  esac
  chmod -R u+w "$seeds/$name"
  echo "-- $name"
  "$target" -max_total_time="$fuzz_s" -timeout=10 -rss_limit_mb=4096 -print_final_stats=0 \
    "$seeds/$name" 2>&1 | tail -n 2
done
echo "fuzz: no crashes"
