#!/usr/bin/env bash
# tools/setup.sh: install what hloc needs from Debian's packages (idempotent), then configure.
# Usage: tools/setup.sh [BUILD_DIR] [extra cmake args...]
# HLOC_SETUP_EXTRA="pkg ..." adds packages that only some scripts need (bench/cpu/dnnl_pair.sh:
# libdnnl-dev).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
pkgs=(cmake make gcc pkg-config protobuf-c-compiler libprotobuf-c-dev llvm-19-dev
      libopenblas-dev libcriterion-dev clang libclang-rt-14-dev clang-format ${HLOC_SETUP_EXTRA:-})
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi
if [ $# -ge 1 ]; then
  build=$1; shift
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
fi
