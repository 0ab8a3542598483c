#!/usr/bin/env bash
# tools/example.sh: the main job. Installs what is missing, builds hloc, compiles the bundled
# example model (docs/example/frozen_mlp.pb) to an object and header, links it into a small C
# program and runs it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
"$root/tools/setup.sh" "$build"
cmake --build "$build" -j"$(nproc)" --target hloc >/dev/null
out="$build/example"
mkdir -p "$out"
"$build/hloc" "$root/docs/example/frozen_mlp.pb" -o "$out/model.o"
cc -O2 -I"$out" "$root/docs/example/main.c" "$out/model.o" -lm -o "$out/example"
echo "built $out/example from docs/example/frozen_mlp.pb; running it:"
"$out/example"
