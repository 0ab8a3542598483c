#!/usr/bin/env bash
# tools/check_docs.sh: checks that docs/architecture.md stays the map of the tree.
#  1. Every source file tracked by git under proto/ hlo/ optimizer/ layout/ memplan/ targets/
#     tools/ tests/ is named in docs/architecture.md by its path from the repository root, in
#     backquotes (`targets/cpu/cpu_gemm.c`). Data files are not source files and are left out:
#     *.hlo, *.npy, *.pb, *.txt, *.json, *.pyc (for the find fallback outside a git checkout),
#     and everything inside a test case folder (tests/xla_cases/<case>/..., tests/cuda/cases/...),
#     which architecture.md describes as a whole.
#  2. No line of docs/architecture.md is longer than 400 characters.
# Prints each offender and exits 1 if there is any; run by tools/test.sh after the build.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
doc=$root/docs/architecture.md
dirs=(proto hlo optimizer layout memplan targets tools tests bench)
if git -C "$root" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  files=$(git -C "$root" ls-files -- "${dirs[@]}")
else
  files=$(cd "$root" && find "${dirs[@]}" -type f | sort)
fi
bad=0
while IFS= read -r f; do
  case $f in
    '' | *.hlo | *.npy | *.pb | *.txt | *.json | *.pyc | tests/xla_cases/*/* | tests/cuda/cases/*) continue ;;
  esac
  if ! grep -qF "\`$f\`" "$doc"; then
    echo "check_docs: $f is not named in docs/architecture.md"
    bad=1
  fi
done <<<"$files"
LC_ALL=C.UTF-8 # ${#line} counts characters, not bytes (where the locale exists)
n=0
while IFS= read -r line || [ -n "$line" ]; do
  n=$((n + 1))
  if [ ${#line} -gt 400 ]; then
    echo "check_docs: docs/architecture.md:$n is ${#line} characters long (at most 400)"
    bad=1
  fi
done <"$doc"
if [ $bad = 0 ]; then echo "docs: architecture.md names every source file"; fi
exit $bad
