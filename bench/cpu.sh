#!/usr/bin/env bash
# bench/cpu.sh: hloc's CPU benchmark (a command to run by hand; the tests and CI do not).
#
#   bash bench/cpu.sh [--build-dir DIR] [--no-build] [--models "mlp bert_base ..."]
#                       [--update-docs] [--quick]
#   bash bench/cpu.sh --device-bundle DIR [--build-dir DIR] [--no-build] [--models ...]
#
# For every module in ../shared/corpus/bench it measures, in one run on this machine:
#   - compile time: wall time of `hloc module.pb -o m.o --name m`, median of 3;
#   - run time of the generated code: bench/cpu/bench_model.c linked against the object,
#     serial (m_run) and with a 2-thread parallel-for (m_run_mt): median of the timed runs
#     that fit a time budget (see bench_model.c);
#   - GFLOP/s (dot + convolution FLOPs counted from the HLO by hloc-bench-ref) or, for models
#     without dot/convolution, GB/s (bytes of parameters + results);
#   - the reference interpreter on the same inputs (hloc-bench-ref --interp, capped), which also
#     checks the 2-thread run's results against the interpreter's; the serial run's are checked
#     against those, element by element (bench_model --expect);
#   - ONNX Runtime on the same workloads at 1 and 2 threads (../shared/peers/ort_bench.mjs;
#     onnxruntime-node is installed into the build folder when missing);
#   - for the models ONNX Runtime has, a row MODEL_frozen: the same model compiled with its
#     weights frozen (--freeze of arguments 1.., the driver's values), as ONNX Runtime's
#     initializers are constants it pre-packs; both its runs checked against the unfrozen
#     2-thread run's results, element by element; and, where the model has weights to pack
#     (M_PACKED_BYTES > 0), and for the bf16 models too, a row MODEL_packed: the same object,
#     its weights packed once
#     before the runs (bench_model --packed: NAME_pack, then NAME_run_packed[_mt]), checked
#     the same way;
#   - OpenBLAS SGEMM 2048^3 GFLOP/s and 64 MiB memcpy GB/s (bench/cpu/sgemm.c, memcpy.c); in
#     the device bundle also the bf16 multiply-add peak (bench/cpu/bf16_peak.c);
# and prints one table beside XLA's CPU figures from ../shared/corpus/baselines.json. The table
# goes to BUILD/bench/results.md (with date, machine and command); --update-docs also puts it
# into docs/benchmarks.md between the <!-- cpu-bench --> and <!-- /cpu-bench --> markers.
#
# --device-bundle DIR builds what the hloc part needs on another x86-64 machine without LLVM or
# protobuf: objects compiled for that CPU (default --cpu sapphirerapids --features=-prefer-256-bit,
# i.e. everything LLVM derives for the CPU with 512-bit vectors allowed; override with
# HLOC_BENCH_BUNDLE_CPU / HLOC_BENCH_BUNDLE_FEATURES), statically linked drivers, SGEMM and
# memcpy, and DIR/run.sh, which runs each model pinned to cores 0,1 (taskset) and prints a table
# beside xla_cpu_2c_run_s and ONNX Runtime there (its Python package, when the machine has it:
# bench/cpu/ort_bench.py on the peers' ONNX models, pinned the same way), and hloc's compile
# time there (a statically linked hloc, default
# flags: the host CPU; median of 5, on all cores and pinned to the same two). Result checksums
# from this host are recorded so run.sh can flag a result that differs.
#
# Limits (environment): HLOC_BENCH_BUDGET seconds of timed runs per model and thread count
# (default 5), HLOC_BENCH_RUN_CAP seconds per driver process (default 60; a model slower than
# that is reported as "> cap"), HLOC_BENCH_FROZEN (the models given weights-frozen and -packed twins;
# default every model ONNX Runtime has), HLOC_BENCH_PROFILE=1 (models compiled with --profile and
# drivers built with -DBENCH_PROFILE: each driver's stderr, BUILD/bench/MODEL/run1.log and
# run2.log, then holds the time per task; for finding hot kernels, not for the figures),
# HLOC_BENCH_INTERP_CAP (default 60), HLOC_BENCH_COMPILE_REPS
# (default 3). --quick sets 1 s / 30 s / 30 s / 1 for a smoke run. OPENBLAS_CORETYPE is left as
# the environment sets it.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
corpus=$root/../shared/corpus
peers=$root/../shared/peers
build=${BUILD_DIR:-$root/build}
do_build=1 update_docs=0 bundle=""
models="elementwise_chain mlp simple_cnn transformer_layer resnet_block resnet18 bert_base simple_cnn_train_step llama_layer_bf16 llama_decode_bf16"
budget=${HLOC_BENCH_BUDGET:-5}
run_cap=${HLOC_BENCH_RUN_CAP:-60}
interp_cap=${HLOC_BENCH_INTERP_CAP:-60}
compile_reps=${HLOC_BENCH_COMPILE_REPS:-3}
profile=; [ "${HLOC_BENCH_PROFILE:-0}" != 0 ] && profile=1
command_line="bash bench/cpu.sh $*"
while [ $# -gt 0 ]; do
  case $1 in
    --build-dir) build=$(realpath -m "$2"); shift ;;
    --no-build) do_build=0 ;;
    --models) models=$2; shift ;;
    --update-docs) update_docs=1 ;;
    --quick) budget=1 run_cap=30 interp_cap=30 compile_reps=1 ;;
    --device-bundle) bundle=$(realpath -m "$2"); shift ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
out=$build/bench
mkdir -p "$out"
cc=${CC:-cc}

# ------------------------------------------------------------------ helpers
now() { date +%s.%N; }
# value of key=value field $1 in line $2 ("" when absent)
kv() { printf '%s\n' "$2" | tr ' ' '\n' | sed -n "s/^$1=//p" | head -n 1; }
# A run's check of its results against the 2-thread run's (bench_model --expect): "ok" or
# "DIFF (N elements)".
expect_check() { [ "$(kv expect "$1")" = ok ] && echo ok || echo "DIFF ($(kv expect_bad "$1") elements, $(kv expect "$1"))"; }
# $1 - $2 for decimal seconds
minus() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.6f\n", a - b }'; }
# median of the numbers on stdin
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print ""; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# field $2 of model $1 in baselines.json (pretty-printed: one key per line, models indented 2)
baseline() {
  awk -v m="$1" -v k="$2" '
    /^  "[^"]+": \{/ { match($0, /"[^"]+"/); cur = substr($0, RSTART + 1, RLENGTH - 2) }
    cur == m && index($0, "\"" k "\":") { sub(/.*": */, ""); sub(/,[ \t]*$/, ""); print; exit }
  ' "$corpus/baselines.json"
}
machine_line() {
  local name cores avx512=no
  name=$(lscpu 2>/dev/null | sed -n 's/^Model name:[ \t]*//p' | head -n 1)
  cores=$(nproc)
  grep -q avx512f /proc/cpuinfo 2>/dev/null && avx512=yes
  local host
  host=$( (llc-19 --version 2>/dev/null || llc --version 2>/dev/null) | sed -n 's/^ *Host CPU: //p' | head -n 1)
  echo "${name:-unknown CPU}, $cores cores (nproc), AVX-512: $avx512${host:+, LLVM host CPU $host}"
}
build_tools() {
  if [ "$do_build" = 1 ]; then
    echo "== build (Release) in $build"
    "$root/tools/setup.sh" "$build" || exit 1
    cmake --build "$build" -j"$(nproc)" --target hloc hloc-bench-ref >"$out/build.log" 2>&1 ||
      { tail -n 30 "$out/build.log"; echo "bench: build failed (log: $out/build.log)"; exit 1; }
  fi
  for t in hloc hloc-bench-ref; do
    [ -x "$build/$t" ] || { echo "bench: $build/$t is missing (build it, or drop --no-build)"; exit 1; }
  done
}
# hloc linked statically against LLVM 19's static libraries (for a machine without LLVM):
# into $1; false (log in $1.log) when it does not link
link_static_hloc() {
  local o=$1 libs
  libs=$(llvm-config-19 --link-static --libs all 2>/dev/null | tr ' ' '\n' | grep -v -i polly | tr '\n' ' ')
  [ -n "$libs" ] && [ -f "$build/CMakeFiles/hloc.dir/tools/hloc.c.o" ] || return 1
  (cd "$build" && c++ -O2 -no-pie -o "$o" CMakeFiles/hloc.dir/tools/hloc.c.o libhloc_proto.a libhloc_targets.a libhloc_prebuilt.a \
    libhloc_optimizer.a libhloc_layout.a libhloc_memplan.a libhloc_hlo.a /usr/lib/x86_64-linux-gnu/libprotobuf-c.a \
    libhloc_optimizer.a libhloc_layout.a libhloc_memplan.a libhloc_hlo.a -L"$(llvm-config-19 --libdir)" $libs \
    -static-libstdc++ -static-libgcc -lrt -ldl -lm -lz -l:libzstd.so.1 -lpthread -Wl,--gc-sections) >"$o.log" 2>&1 &&
    strip "$o"
}
# compile model $1 into dir $2 with extra hloc flags $3...; prints the median wall time, or
# "F" on failure (message in $2/compile.log)
compile_model() {
  local m=$1 w=$2; shift 2
  local times=() t0 t1 r
  mkdir -p "$w"
  for ((r = 0; r < compile_reps; r++)); do
    t0=$(now)
    if ! timeout 300 "$build/hloc" "$corpus/bench/$m/module.pb" -o "$w/m.o" --name m \
        --header "$w/m.h" ${profile:+--profile} "$@" >"$w/compile.log" 2>&1; then
      echo F; return
    fi
    t1=$(now)
    times+=("$(minus "$t1" "$t0")")
  done
  printf '%s\n' "${times[@]}" | median
}
# link the driver for the model compiled in $1 to $2 (extra cc flags after)
link_driver() {
  local w=$1 exe=$2 m=$3; shift 3
  $cc -O2 -std=gnu17 -I"$root/bench/cpu" -DBENCH_HEADER="\"$w/m.h\"" -DBENCH_NAME=m \
    -DBENCH_UNAME=M -DBENCH_LABEL="\"$m\"" ${profile:+-DBENCH_PROFILE} "$root/bench/cpu/bench_model.c" "$w/m.o" \
    "$@" -lm -lpthread -o "$exe" >"$w/link.log" 2>&1
}
# run a driver with a time cap; prints its key=value line, "T" on timeout, "F" on failure
run_capped() {
  local cap=$1 log=$2; shift 2
  local line rc
  line=$(timeout "$cap" "$@" 2>"$log")
  rc=$?
  if [ $rc = 124 ] || [ $rc = 137 ]; then echo T
  elif [ $rc != 0 ] || [ -z "$line" ]; then echo F
  else echo "$line"; fi
}

# Whether model $1 gets weights-frozen and -packed twins: ONNX Runtime has it (its weights are
# initializers, constants it pre-packs) and HLOC_BENCH_FROZEN names it (default: all).
twins() {
  [ -f "$peers/onnx/$1.onnx" ] || return 1
  case " ${HLOC_BENCH_FROZEN-$1} " in *" $1 "*) return 0 ;; esac
  return 1
}

# The weights-frozen twin of model $1 (compiled in $2 with its driver $2/bench): when it gets
# twins (twins), writes the
# driver's arguments 1.. (the weights; argument 0 is the input) to $2/inputs and prints the
# hloc flags that freeze them (--freeze k=FILE); prints nothing otherwise.
freeze_flags() {
  local m=$1 w=$2 n k
  twins "$m" || return 0
  n=$(sed -n 's/^#define M_NUM_ARGS \([0-9]*\).*/\1/p' "$w/m.h")
  [ "${n:-0}" -gt 1 ] || return 0
  rm -rf "$w/inputs"
  run_capped "$run_cap" "$w/inputs.log" "$w/bench" --budget 0 --min-runs 1 --max-runs 1 --save-inputs "$w/inputs" >/dev/null
  for ((k = 1; k < n; k++)); do
    [ -f "$w/inputs/in$k.npy" ] || return 0
  done
  for ((k = 1; k < n; k++)); do printf -- '--freeze %s=%s ' "$k" "$w/inputs/in$k.npy"; done
}

# Whether model $1 (compiled in $2) gets a row with its weights packed ahead of the runs:
# it gets twins or is a bf16 model, and its header packs something (prints "yes" then).
packed_twin() {
  case $1 in *_bf16) ;; *) twins "$1" || return 0 ;; esac
  [ "$(sed -n 's/^#define M_PACKED_BYTES \([0-9]*\).*/\1/p' "$2/m.h")" -gt 0 ] 2>/dev/null && echo yes
}

# A twin of model $m (frozen or packed) timed with its driver $3 (options after $4) on 2 threads
# and serially, its results checked against the model's 2-thread run ($w/out); logs
# $1/run2$2.log and $1/run1$2.log. Sets t1 t2 r1 r2, check ("ok (= $4)" when both match) and
# line (the serial run's).
twin_runs() {
  local d=$1 sfx=$2 exe=$3 what=$4 s1
  shift 4
  t1=- t2=- r1=0 r2=0 check=-
  line=$(run_capped "$run_cap" "$d/run2$sfx.log" "$exe" "$@" --threads 2 --budget "$budget" --expect "$w/out")
  case $line in T|F) t2=$line ;; *) t2=$(kv median_s "$line"); r2=$(kv runs "$line"); check=$(expect_check "$line") ;; esac
  line=$(run_capped "$run_cap" "$d/run1$sfx.log" "$exe" "$@" --threads 1 --budget "$budget" --expect "$w/out")
  case $line in T|F) t1=$line ;; *) t1=$(kv median_s "$line"); r1=$(kv runs "$line")
    s1=$(expect_check "$line"); [ "$s1" != ok ] && check="serial run $s1" ;; esac
  [ "$check" = ok ] && check="ok (= $what)"
}

# The table row of twin $1 (compile time $2) from twin_runs's figures (no interpreter or XLA
# figure: XLA's takes the weights as arguments).
twin_row() {
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t-\t%s\t-\t-\t-\t-\t-\t-\n' "$1" "$2" "$t1" "$r1" "$t2" "$r2" \
    "$flops" "$bytes" "$check" >>"$tsv"
}

# ------------------------------------------------------------------ device bundle
if [ -n "$bundle" ]; then
  build_tools
  bcpu=${HLOC_BENCH_BUNDLE_CPU:-sapphirerapids}
  bfeat=${HLOC_BENCH_BUNDLE_FEATURES--prefer-256-bit}
  rm -rf "$bundle"
  mkdir -p "$bundle/bin"
  work=$out/bundle-work
  : >"$bundle/models.tsv"
  echo "== device bundle in $bundle (hloc --cpu $bcpu --features='$bfeat')"
  for m in $models; do
    w=$work/$m
    ct=$(compile_model "$m" "$w/target" --cpu "$bcpu" --features="$bfeat")
    if [ "$ct" = F ]; then echo "  $m: compile failed: $(tail -n 1 "$w/target/compile.log")"; continue; fi
    if ! link_driver "$w/target" "$bundle/bin/$m" "$m" -static; then
      echo "  $m: static link failed ($w/target/link.log)"; continue
    fi
    strip "$bundle/bin/$m" 2>/dev/null || true
    # this host's result checksum for run.sh's check: from the last benchmark run when it
    # has one, else from one run of host-compiled code (capped like the benchmark's runs)
    asum=$(awk -F'\t' -v m="$m" '$1 == m && NF >= 16 { print $15 }' "$out/results.tsv" 2>/dev/null)
    nonfin=$(awk -F'\t' -v m="$m" '$1 == m && NF >= 16 { print $16 }' "$out/results.tsv" 2>/dev/null)
    if [ -z "$asum" ] || [ "$asum" = - ]; then
      asum=- nonfin=-
      if [ "$(compile_model "$m" "$w/host")" != F ] && link_driver "$w/host" "$w/host/bench" "$m"; then
        line=$(run_capped "$run_cap" "$w/host/run.log" "$w/host/bench" --threads 2 --budget 0 --min-runs 1 --max-runs 1)
        case $line in T|F) ;; *) asum=$(kv asum "$line"); nonfin=$(kv nonfinite "$line") ;; esac
      fi
    fi
    info=$("$build/hloc-bench-ref" "$corpus/bench/$m/module.pb" 2>/dev/null)
    flops=$(kv flops "$info"); bytes=$(( $(kv param_bytes "$info") + $(kv result_bytes "$info") ))
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$m" "${flops:-0}" "$bytes" "$asum" "$nonfin" \
      "$(baseline "$m" xla_cpu_2c_run_s)" "$(baseline "$m" xla_cpu_16c_run_s)" >>"$bundle/models.tsv"
    echo "  $m: compiled in ${ct}s, $(du -h "$bundle/bin/$m" | cut -f1), host checksum $asum"
    # its weights packed ahead of the runs (run.sh runs bin/$m --packed for the row)
    if [ -n "$(packed_twin "$m" "$w/target")" ]; then
      printf '%s\t%s\t%s\t%s\t%s\t-\t-\n' "${m}_packed" "${flops:-0}" "$bytes" "$asum" "$nonfin" >>"$bundle/models.tsv"
      echo "  ${m}_packed: weights packed ahead ($(sed -n 's/^#define M_PACKED_BYTES //p' "$w/target/m.h") bytes)"
    fi
    # its weights-frozen twin (for the comparison with ONNX Runtime's pre-packed initializers)
    if twins "$m" && { [ -x "$w/host/bench" ] ||
        { [ "$(compile_model "$m" "$w/host")" != F ] && link_driver "$w/host" "$w/host/bench" "$m"; }; }; then
      # shellcheck disable=SC2046
      ff=$(freeze_flags "$m" "$w/host")
      if [ -n "$ff" ]; then
        # shellcheck disable=SC2086
        if [ "$(compile_model "$m" "$w/frozen" --cpu "$bcpu" --features="$bfeat" $ff)" != F ] &&
            link_driver "$w/frozen" "$bundle/bin/${m}_frozen" "${m}_frozen" -static; then
          strip "$bundle/bin/${m}_frozen" 2>/dev/null || true
          printf '%s\t%s\t%s\t%s\t%s\t-\t-\n' "${m}_frozen" "${flops:-0}" "$bytes" "$asum" "$nonfin" >>"$bundle/models.tsv"
          echo "  ${m}_frozen: weights frozen ($(echo "$ff" | wc -w | awk '{ print $1 / 2 }') arguments)"
        else
          echo "  ${m}_frozen: failed ($w/frozen/compile.log)"
        fi
      fi
    fi
  done
  # SGEMM against the device's own OpenBLAS (it has one; a static copy from here picked its
  # Prescott kernels there, and took 25 MB of the bundle), statically where asked
  blas_a=$(ls /usr/lib/x86_64-linux-gnu/libopenblas.a 2>/dev/null | head -n 1)
  if [ "${HLOC_BENCH_BUNDLE_STATIC_BLAS:-0}" = 1 ] && [ -n "$blas_a" ] &&
      $cc -O2 -static "$root/bench/cpu/sgemm.c" "$blas_a" -lpthread -lm -o "$bundle/bin/sgemm" 2>"$work/sgemm-link.log"; then
    echo "  sgemm: static OpenBLAS"
  else
    $cc -O2 "$root/bench/cpu/sgemm.c" -lopenblas -lm -o "$bundle/bin/sgemm" &&
      echo "  sgemm: linked against the machine's libopenblas.so"
  fi
  # ONNX Runtime on the same machine when it has the Python package: the peers' models
  if [ -d "$peers/onnx" ]; then
    mkdir -p "$bundle/onnx"
    for m in $models; do [ -f "$peers/onnx/$m.onnx" ] && cp "$peers/onnx/$m.onnx" "$bundle/onnx/"; done
    cp "$root/bench/cpu/ort_bench.py" "$root/bench/cpu/ort_pair.py" "$bundle/"
  fi
  $cc -O2 -static "$root/bench/cpu/memcpy.c" -lpthread -o "$bundle/bin/memcpy"
  $cc -O2 -static "$root/bench/cpu/bf16_peak.c" -lpthread -o "$bundle/bin/bf16_peak"
  strip "$bundle/bin/sgemm" "$bundle/bin/memcpy" "$bundle/bin/bf16_peak" 2>/dev/null || true
  cat >"$bundle/README.txt" <<EOF
hloc CPU benchmark bundle. Run: bash run.sh   (or CORES=0-15 THREADS=16 bash run.sh)
Built $(date -u '+%Y-%m-%d %H:%M UTC') on $(machine_line)
from hloc $(git -C "$root" rev-parse --short HEAD 2>/dev/null)$(git -C "$root" status --porcelain 2>/dev/null | grep -q . && echo ' (uncommitted changes)'),
objects compiled with: hloc module.pb -o m.o --name m --cpu $bcpu --features='$bfeat'
command: $command_line
bin/<model>  driver + model (static): --threads N --budget S; prints key=value
bin/sgemm    OpenBLAS SGEMM 2048^3 at 1 and 2 threads; bin/memcpy  64 MiB memcpy GB/s
models.tsv   model, FLOPs, bytes in+out, this host's result checksum, non-finite count,
             XLA cpu 2c and 16c run seconds (../shared/corpus/baselines.json)
EOF
  # compile time on that machine: hloc linked statically against LLVM (xz-compressed; libzstd
  # beside it), and the bench modules
  if link_static_hloc "$work/hloc-static"; then
    xz -T2 -6 -c "$work/hloc-static" >"$bundle/bin/hloc.xz"
    zstd_so=$(ldd "$work/hloc-static" | awk '/libzstd/ { print $3 }')
    [ -n "$zstd_so" ] && cp "$zstd_so" "$bundle/bin/"
    mkdir -p "$bundle/modules"
    for m in $models; do cp "$corpus/bench/$m/module.pb" "$bundle/modules/$m.pb"; done
    echo "  hloc: statically linked, $(du -h "$bundle/bin/hloc.xz" | cut -f1) compressed (compile times on the device)"
  else
    echo "  hloc: static link failed ($work/hloc-static.log): no compile times on the device"
  fi
  cp "$root/bench/cpu/run.sh" "$bundle/run.sh"
  chmod +x "$bundle/run.sh"
  echo "bundle: $(du -sh "$bundle" | cut -f1) in $bundle; on the device: bash $bundle/run.sh"
  exit 0
fi

# ------------------------------------------------------------------ the benchmark
build_tools
started=$(date -u '+%Y-%m-%d %H:%M UTC')
load0=$(cut -d' ' -f1-3 /proc/loadavg)
t_start=$(now)
machine=$(machine_line)
echo "== $started, $machine, load average $load0"
echo "== peers: OpenBLAS SGEMM and memcpy"
$cc -O2 "$root/bench/cpu/sgemm.c" -lopenblas -lm -o "$out/sgemm" &&
  sgemm=$("$out/sgemm" 2048 5) || sgemm=""
$cc -O2 "$root/bench/cpu/memcpy.c" -lpthread -o "$out/memcpy" && memcpy=$("$out/memcpy") || memcpy=""
printf '%s\n%s\n' "$sgemm" "$memcpy"

tsv=$out/results.tsv
printf 'model\tcompile_s\tt1_s\tt1_runs\tt2_s\tt2_runs\tflops\tbytes\tinterp_s\tcheck\tort1_s\tort2_s\txla2c_s\txla16c_s\tasum\tnonfinite\n' >"$tsv"
for m in $models; do
  [ -f "$corpus/bench/$m/module.pb" ] || { echo "bench: no module for $m"; continue; }
  w=$out/$m
  rm -rf "$w"
  mkdir -p "$w"
  echo "== $m"
  info=$("$build/hloc-bench-ref" "$corpus/bench/$m/module.pb" 2>"$w/ref.log")
  flops=$(kv flops "$info"); flops=${flops:-0}
  bytes=$(( $(kv param_bytes "$info") + $(kv result_bytes "$info") ))
  ct=$(compile_model "$m" "$w")
  t1=- t2=- r1=0 r2=0 it=- check=- asum=- nonfin=- s1=ok
  if [ "$ct" = F ]; then
    echo "  compile failed: $(tail -n 1 "$w/compile.log")"
  elif ! link_driver "$w" "$w/bench" "$m"; then
    echo "  driver link failed: $(tail -n 1 "$w/link.log")"; ct=F
  else
    echo "  compile ${ct}s"
    line=$(run_capped "$run_cap" "$w/run2.log" "$w/bench" --threads 2 --budget "$budget" --save-outputs "$w/out")
    case $line in
      T|F) t2=$line ;;
      *) t2=$(kv median_s "$line"); r2=$(kv runs "$line"); asum=$(kv asum "$line"); nonfin=$(kv nonfinite "$line") ;;
    esac
    echo "  2 threads: $line"
    if [ "$t2" != T ]; then # a model over the cap on 2 threads is not retried serially
      # the serial run's results checked too, against the 2-thread run's
      line=$(run_capped "$run_cap" "$w/run1.log" "$w/bench" --threads 1 --budget "$budget" --expect "$w/out")
      case $line in T|F) t1=$line ;; *) t1=$(kv median_s "$line"); r1=$(kv runs "$line"); s1=$(expect_check "$line") ;; esac
      echo "  serial:    $line"
    fi
    if [ "$t1" != T ] && [ "$t2" != T ] && [ "$t2" != F ]; then
      # the interpreter may need far more memory than the compiled code: cap it at 3/4 of RAM
      mem_kb=$(awk '/MemTotal/ { print int($2 * 3 / 4) }' /proc/meminfo)
      line=$( (ulimit -v "$mem_kb"; timeout "$interp_cap" "$build/hloc-bench-ref" \
          "$corpus/bench/$m/module.pb" --interp --expect "$w/out") 2>"$w/interp.log")
      rc=$?
      if [ $rc = 124 ] || [ $rc = 137 ]; then it=T; line="stopped after $interp_cap s"
      elif [ -z "$(kv interp_s "$line")" ]; then it=F; echo "  interpreter failed: $(tail -n 1 "$w/interp.log")"
      else it=$(kv interp_s "$line"); check=$(kv check "$line")
        [ "$check" = FAIL ] && check="FAIL (max rel $(kv max_rel "$line"))"
      fi
      [ "$s1" != ok ] && check="serial run $s1"
      echo "  interpreter: ${line:-timed out or failed}"
    fi
  fi
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t-\t-\t%s\t%s\t%s\t%s\n' "$m" "$ct" "$t1" "$r1" "$t2" "$r2" \
    "$flops" "$bytes" "$it" "$check" "$(baseline "$m" xla_cpu_2c_run_s)" \
    "$(baseline "$m" xla_cpu_16c_run_s)" "$asum" "$nonfin" >>"$tsv"
  # the same object with its weights packed once ahead of the runs, beside ONNX Runtime's
  # pre-packed initializers; checked against the same results
  if [ -n "$(packed_twin "$m" "$w")" ] && [ "$t2" != T ] && [ "$t2" != F ]; then
    twin_runs "$w" p "$w/bench" unpacked --packed
    echo "  weights packed ahead: 2 threads ${t2}s, serial ${t1}s, pack $(kv pack_s "$line")s, $check"
    twin_row "${m}_packed" "$ct"
  fi
  # the weights-frozen twin, beside ONNX Runtime's pre-packed initializers (no XLA figure:
  # XLA's takes the weights as arguments); checked against the same results
  ff=""
  [ "$ct" != F ] && ff=$(freeze_flags "$m" "$w")
  if [ -n "$ff" ]; then
    wf=$w/frozen
    # shellcheck disable=SC2086
    ctf=$(compile_model "$m" "$wf" $ff)
    t1=- t2=- r1=0 r2=0 check=-
    if [ "$ctf" != F ] && link_driver "$wf" "$wf/bench" "${m}_frozen"; then
      twin_runs "$wf" "" "$wf/bench" unfrozen
      echo "  weights frozen: compile ${ctf}s, 2 threads ${t2}s, serial ${t1}s, $check"
    else
      ctf=F; echo "  weights frozen: compile or link failed ($wf/compile.log)"
    fi
    twin_row "${m}_frozen" "$ctf"
  fi
done

echo "== ONNX Runtime (onnxruntime-node 1.30.0)"
ort=$out/ort
ortver=""
if command -v node >/dev/null && command -v npm >/dev/null; then
  if [ ! -d "$ort/node_modules/onnxruntime-node" ]; then
    mkdir -p "$ort"
    (cd "$ort" && npm install --ignore-scripts --no-audit --no-fund onnxruntime-node@1.30.0 >npm.log 2>&1) ||
      echo "  npm install failed ($ort/npm.log)"
  fi
  ort_models=""
  for m in $models; do [ -f "$peers/onnx/$m.onnx" ] && ort_models="$ort_models $m"; done
  if [ -d "$ort/node_modules/onnxruntime-node" ] && [ -n "$ort_models" ]; then
    for th in 1 2; do
      # shellcheck disable=SC2086
      (cd "$ort" && timeout 600 node "$peers/ort_bench.mjs" "$th" $ort_models) >"$ort/ort$th.jsonl" 2>"$ort/ort$th.log"
      cat "$ort/ort$th.jsonl"
    done
    ortver=$(sed -n 's/.*"ort_version":"\([^"]*\)".*/\1/p' "$ort/ort2.jsonl" | head -n 1)
    # merge the medians into the table
    for th in 1 2; do
      col=$((th == 1 ? 11 : 12))
      while IFS= read -r j; do
        m=$(printf '%s' "$j" | sed -n 's/.*"model":"\([^"]*\)".*/\1/p')
        v=$(printf '%s' "$j" | sed -n 's/.*"run_median_s":\([-0-9.eE+]*\).*/\1/p')
        [ -n "$m" ] && [ -n "$v" ] && awk -F'\t' -v OFS='\t' -v m="$m" -v v="$v" -v c="$col" \
          '$1 == m || $1 == m "_frozen" || $1 == m "_packed" { $c = v } { print }' "$tsv" >"$tsv.tmp" && mv "$tsv.tmp" "$tsv"
      done <"$ort/ort$th.jsonl"
    done
  fi
else
  echo "  node/npm not found: ONNX Runtime columns left empty"
fi
load1=$(cut -d' ' -f1-3 /proc/loadavg)
elapsed=$(printf '%.0f' "$(minus "$(now)" "$t_start")")

# ------------------------------------------------------------------ the table
table() {
  awk -F'\t' -v rcap="$run_cap" -v icap="$interp_cap" '
    function ms(x) {
      if (x == "-" || x == "") return "–"
      if (x == "T") return "> " rcap " s"
      if (x == "F") return "failed"
      x *= 1000
      return x < 1 ? sprintf("%.3f", x) : x < 10 ? sprintf("%.2f", x) : x < 100 ? sprintf("%.1f", x) : sprintf("%.0f", x)
    }
    function num(x) { return x != "" && x != "-" && x != "T" && x != "F" }
    NR == 1 { next }
    {
      m = $1; ct = $2; t1 = $3; t2 = $5; fl = $7; by = $8; it = $9; ck = $10; o1 = $11; o2 = $12
      cs = ct == "F" ? "failed" : sprintf("%.2f", ct)
      rate = "–"
      if (num(t2)) rate = fl > 0 ? sprintf("%.1f GFLOP/s", fl / t2 * 1e-9) : sprintf("%.1f GB/s", by / t2 * 1e-9)
      itx = it == "T" ? "> " icap " s" : ms(it)
      if (ck == "-" || ck == "") ck = "–"
      sp = "–"
      if (num(t1) && num(it)) sp = sprintf("%.1fx", it / t1)
      else if (num(t1) && it == "T") sp = sprintf("≥ %.1fx", icap / t1)
      rt = (num(o2) && num(t2)) ? sprintf("%.2f", o2 / t2) : "–"
      printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", m, cs, ms(t1), ms(t2), rate, itx, sp, ck, ms(o1), ms(o2), rt, ms($13), ms($14)
    }' "$tsv"
}
sg1=$(printf '%s\n' "$sgemm" | awk '/sgemm_threads=1/' ); sg2=$(printf '%s\n' "$sgemm" | awk '/sgemm_threads=2/')
mc1=$(printf '%s\n' "$memcpy" | awk '/memcpy_threads=1/'); mc2=$(printf '%s\n' "$memcpy" | awk '/memcpy_threads=2/')
{
  echo "Measured $started by \`$command_line\` (${elapsed} s) on: $machine."
  echo "Load average $load0 at the start, $load1 at the end."
  echo "hloc $(git -C "$root" rev-parse --short HEAD 2>/dev/null)$(git -C "$root" status --porcelain 2>/dev/null | grep -q . && echo ' with uncommitted changes'), Release build; ONNX Runtime ${ortver:-not run}."
  echo
  echo "| model | compile s | hloc 1t ms | hloc 2t ms | GFLOP/s or GB/s (2t) | interpreter ms | hloc 1t vs interpreter | check | ORT 1t ms | ORT 2t ms | ORT 2t / hloc 2t | XLA cpu 2c ms | XLA cpu 16c ms |"
  echo "|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|"
  table
  echo
  echo "Same run: OpenBLAS SGEMM 2048³ $(kv gflops "$sg1") GFLOP/s on 1 thread, $(kv gflops "$sg2") GFLOP/s on 2 (kernels $(kv kernels "$sg2"), OPENBLAS_CORETYPE $(kv coretype "$sg2"));" \
    "memcpy of 64 MiB $(kv gbps "$mc1") GB/s on 1 thread, $(kv gbps "$mc2") GB/s on 2 (read + write)."
  echo "Limits: $budget s of timed runs per model and thread count, driver runs capped at $run_cap s, interpreter at $interp_cap s, compile time the median of $compile_reps."
} >"$out/results.md"
echo
cat "$out/results.md"
echo
echo "results: $out/results.md (raw: $tsv and $out/<model>/)"

if [ "$update_docs" = 1 ]; then
  doc=$root/docs/benchmarks.md
  if ! grep -q '^<!-- cpu-bench -->$' "$doc" 2>/dev/null || ! grep -q '^<!-- /cpu-bench -->$' "$doc"; then
    echo "bench: $doc has no '<!-- cpu-bench -->' ... '<!-- /cpu-bench -->' section; not updated"
    exit 1
  fi
  # replace what lies between the markers, nothing else (other sections belong to others)
  awk -v f="$out/results.md" '
    /^<!-- cpu-bench -->$/ { print; print ""; while ((getline l < f) > 0) print l; print ""; skip = 1; next }
    /^<!-- \/cpu-bench -->$/ { skip = 0 }
    !skip { print }' "$doc" >"$doc.tmp.$$" && mv "$doc.tmp.$$" "$doc"
  echo "updated $doc"
fi
