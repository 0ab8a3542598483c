#!/bin/bash
# tools/xla_hlo_sweep.sh: every HLO file of XLA's own repository (../shared/xla-hlo) through
# the CPU target, each one that compiles checked against the reference interpreter.
#
#   bash tools/xla_hlo_sweep.sh [BUILD_DIR] [OUT_DIR]   (defaults build-test and
#                                                        BUILD_DIR/xla-hlo-sweep)
#
# Per file: `hloc FILE -o model.o --name model --elided-constants=random` (benchmark dumps
# elide their weights: both sides fill the same values); a file of several modules (lit's
# --split-input-file: '// -----' lines between them) module by module, each listed as FILE#N.
# Where that succeeds, the interpreter's outputs
# on the benchmark's deterministic inputs (hloc-bench-ref --interp --save) and the object run
# by tests/cpu_driver.c on 2 threads against them (1e-3 of the results' scale; 3e-2 for a
# module with 16-bit or fp8 values, the corpus's bar). Writes OUT_DIR/results.tsv (file,
# outcome, the last line of what failed) and prints the counts of each outcome: compiled,
# refused (hloc's located error; the most frequent reasons listed), pass, fail, reference
# failed (the interpreter could not evaluate it), timeout. Takes ~10 minutes on 2 cores; not
# part of the tests.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build-test}
OUT=${2:-$BUILD/xla-hlo-sweep}
SRC=${HLOC_XLA_HLO:-$ROOT/../shared/xla-hlo}
cmake --build "$BUILD" --target hloc hloc-bench-ref -j2 >/dev/null || exit 1
mkdir -p "$OUT"
tsv=$OUT/results.tsv
: >"$tsv"
w=$OUT/work
pieces=$OUT/pieces
# one_file FILE LABEL: compile, reference, run; one line of results.tsv
one_file() {
  local f=$1 rel=$2 rc tol
  rm -rf "$w"
  mkdir -p "$w"
  if ! timeout 120 "$BUILD/hloc" "$f" -o "$w/model.o" --name model --elided-constants=random \
    >"$w/compile.log" 2>&1; then
    printf '%s\trefused\t%s\n' "$rel" "$(tail -n 1 "$w/compile.log" | tr '\t' ' ')" >>"$tsv"
    return
  fi
  if ! timeout 120 "$BUILD/hloc-bench-ref" "$f" --interp --save "$w" --elided-constants=random \
    >/dev/null 2>"$w/ref.log"; then
    printf '%s\treference failed\t%s\n' "$rel" "$(tail -n 1 "$w/ref.log" | tr '\t' ' ')" >>"$tsv"
    return
  fi
  cc -O1 -I"$w" "$ROOT/tests/cpu_driver.c" "$w/model.o" -lm -lpthread -o "$w/run" 2>"$w/cc.log" ||
    { printf '%s\tlink failed\t%s\n' "$rel" "$(tail -n 1 "$w/cc.log")" >>"$tsv"; return; }
  tol=1e-3
  grep -q 'bf16\|f16\|f8e' "$w/model.h" "$f" && tol=3e-2
  timeout 300 "$w/run" "$w" 2 "$tol" >"$w/run.log" 2>&1
  rc=$?
  case $rc in
    0) printf '%s\tpass\t\n' "$rel" >>"$tsv" ;;
    124) printf '%s\ttimeout\t\n' "$rel" >>"$tsv" ;;
    *) printf '%s\tfail\t%s\n' "$rel" "$(grep -m1 'MISMATCH\|error\|cannot' "$w/run.log" | tr '\t' ' ')" >>"$tsv" ;;
  esac
}
while IFS= read -r f; do
  rel=${f#"$SRC"/}
  if ! grep -q '^// -----' "$f"; then
    one_file "$f" "$rel"
    continue
  fi
  # lit's --split-input-file: each module between '// -----' lines on its own, as FILE#N
  rm -rf "$pieces"
  mkdir -p "$pieces"
  awk -v d="$pieces" 'BEGIN { n = 1 } /^\/\/ -----/ { n++; next } { print > (d "/" n ".hlo") }' "$f"
  for p in $(ls "$pieces" | sort -n); do
    grep -q 'ENTRY\|HloModule' "$pieces/$p" && one_file "$pieces/$p" "$rel#${p%.hlo}"
  done
done < <(find "$SRC" -name '*.hlo' | sort)
rm -rf "$w" "$pieces"
echo "files: $(wc -l <"$tsv"), compiled: $(awk -F'\t' '$2 != "refused"' "$tsv" | wc -l)"
cut -f2 "$tsv" | sort | uniq -c | sort -rn
echo "most frequent reasons for refusing:"
awk -F'\t' '$2 == "refused" { print $3 }' "$tsv" |
  sed 's/^hloc: [^:]*: //; s/computation [^:]*: //; s/instruction [^:]*: //' | cut -c1-70 |
  sort | uniq -c | sort -rn | head -n 10
echo "results: $tsv"
