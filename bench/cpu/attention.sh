#!/usr/bin/env bash
# bench/cpu/attention.sh: the CPU attention kernel's bundle for the device host (by hand; the
# tests and CI do not run it).
#
#   bash bench/cpu/attention.sh [BUILD_DIR]     -> device/att, then on the device host:
#   sh device/att/run.sh
#
# Builds, for Sapphire Rapids (--cpu sapphirerapids --features=-prefer-256-bit), each model
# twice, with the attention fusion (the blocked kernel, targets/cpu/cpu_attention.c) and with
# --disable-pass=attention (batched products and the softmax's kernels): causal self-attention
# [2, 1024, 8, 64] in f32 and bf16 (attention/gen.py) and the corpus's transformer_layer,
# bert_base and llama_layer_bf16; statically linked bench/cpu/bench_model.c drivers. run.sh runs
# each pinned to cores 0,1 with 2 threads, then XLA on the causal modules (attention/xla_att.py,
# JAX on the CPU, the same cores); the corpus models' XLA figures are baselines.json's
# xla_cpu_2c_run_s.
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$here/build}" && pwd)
hloc=$build/hloc
out=$here/device/att
corpus=$here/../shared/corpus/bench
rm -rf "$out" && mkdir -p "$out/bin" "$out/obj"
cp "$here/bench/cpu/attention/gen.py" "$here/bench/cpu/attention/xla_att.py" "$out/"
python3 "$out/gen.py" 2 1024 8 64 f32 >"$out/causal_f32.hlo"
python3 "$out/gen.py" 2 1024 8 64 bf16 >"$out/causal_bf16.hlo"
cd "$out/obj"
for spec in "causal_f32:../causal_f32.hlo" "causal_bf16:../causal_bf16.hlo" \
  "tl:$corpus/transformer_layer/module.pb" "bert:$corpus/bert_base/module.pb" \
  "llama:$corpus/llama_layer_bf16/module.pb"; do
  n=${spec%%:*} f=${spec#*:}
  for mode in fused unfused; do
    nm=${n}_$mode extra=()
    [ "$mode" = unfused ] && extra=(--disable-pass=attention)
    "$hloc" "$f" -o "$nm.o" --name "$nm" --cpu sapphirerapids --features=-prefer-256-bit "${extra[@]}"
    cc -static -O2 -DBENCH_HEADER="\"$nm.h\"" -DBENCH_NAME="$nm" \
      -DBENCH_UNAME="$(echo "$nm" | tr a-z A-Z)" -I. -I"$here" "$here/bench/cpu/bench_model.c" \
      "$nm.o" -lm -lpthread -o "../bin/$nm"
  done
done
cat >"$out/run.sh" <<'RUN'
#!/bin/sh
# hloc's blocked attention kernel against the unfused path and XLA, 2 cores (taskset 0,1).
cd "$(dirname "$0")"
for m in bin/*; do taskset -c 0,1 $m --threads 2 --budget 3 | head -1 | cut -d' ' -f1-4; done
JAX_PLATFORMS=cpu XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=2" \
  taskset -c 0,1 python3 xla_att.py 2>&1 | grep xla_cpu
RUN
echo "bundle: $out ($(du -sh "$out" | cut -f1))"
