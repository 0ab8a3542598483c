# bench/cuda/lib.sh: shell pieces the GPU bundles share, sourced by bench/cuda.sh,
# bench/cuda/w8a16_pair.sh, bench/cuda/loops.sh, bench/cuda/depthwise.sh and
# tools/cuda_device_test.sh (here) and copied into each bundle
# for its run.sh (there).
#
#   cuda_bundle_begin OUT     here: hloc built in $BUILD (configured Release if new), the bundle
#                             folder OUT made afresh with this file in it
#   cuda_bench_link DIR       link bench/cuda/bench_driver.c with DIR/model.o into DIR/bench
#                             (the libraries DIR/model.h lists), then drop the object
#   cuda_runtime_libs         on the GPU machine: LD_LIBRARY_PATH gains the folders of the CUDA
#                             libraries the objects link (cuBLAS, cuBLASLt, cuDNN, cuFFT)
#   cuda_bench_start          on the GPU machine, a bench run.sh's start: the libraries, the
#                             GPU and its clocks printed, results.txt emptied
#   cuda_bench_all ITERS      on the GPU machine: every folder's bench run ITERS times with
#                             the folder's name as its label, into results.txt (a failed one
#                             as a 'label=NAME failed: ...' line)

cuda_bundle_begin() {
  [ -f "$BUILD/CMakeCache.txt" ] || cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$BUILD" --target hloc -j2 >/dev/null
  rm -rf "$1"
  mkdir -p "$1"
  cp "$ROOT/bench/cuda/lib.sh" "$1/"
}

cuda_bench_link() {
  local d=$1 libs
  libs=$(sed -n 's/^#define MODEL_CUDA_LIBS "\(.*\)"/\1/p' "$d/model.h")
  cc -O2 -std=gnu17 -I"$d" -I"${CUDA:-/usr/local/cuda}/include" "$ROOT/bench/cuda/bench_driver.c" \
    "$d/model.o" -L"${CUDA:-/usr/local/cuda}/lib64/stubs" -L"${CUDA:-/usr/local/cuda}/lib64" $libs \
    -lpthread -lm -o "$d/bench"
  rm -f "$d/model.o"
}

cuda_runtime_libs() {
  local found= lib f
  for lib in libcublas.so.13 libcublasLt.so.13 libcudnn.so.9 libcufft.so.12; do
    f=$(ls /usr/local/cuda/lib64/$lib /usr/local/cuda/lib/$lib 2>/dev/null | head -n 1)
    [ -n "$f" ] || f=$(find / -name "$lib*" -not -path '/proc/*' 2>/dev/null | head -n 1)
    [ -n "$f" ] && found="${found:+$found:}$(dirname "$f")"
  done
  export LD_LIBRARY_PATH="${found}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
}

cuda_bench_start() {
  cuda_runtime_libs
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader 2>/dev/null
  : >results.txt
}

cuda_bench_all() {
  local d n
  for d in */; do
    n=${d%/}
    [ -x "$n/bench" ] || continue
    "./$n/bench" "$n" "$1" >>results.txt 2>"$n/stderr.txt" ||
      echo "label=$n failed: $(tail -n 2 "$n/stderr.txt" | tr '\n' ' ')" >>results.txt
  done
}
