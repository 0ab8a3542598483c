#!/usr/bin/env bash
# run.sh: the hloc CPU benchmark on a machine without the toolchain (from a device bundle that
# `bench/cpu.sh --device-bundle DIR` built; this file is bench/cpu/run.sh of the hloc tree).
#
#   bash run.sh                      every model pinned to cores 0,1, serial and 2 threads
#   CORES=0-15 THREADS=16 bash run.sh
#   BUDGET=5 CAP=300 bash run.sh     seconds of timed runs per model and thread count; cap per run
#   ROUNDS=3 bash run.sh             three interleaved rounds, the median of each figure over them,
#                                    and ONNX Runtime / hloc of each round's pair with their median
#   COMPILE_ONLY=1 bash run.sh       only the machine line and the compile times
#   PAIRED="mlp mlp_packed" bash run.sh   also those models against ONNX Runtime alternated in
#                                    blocks of a few runs (ort_pair.py), serial and THREADS
#
# Prints, and writes to results-<host>-<time>.md beside this script: the machine, OpenBLAS
# SGEMM, memcpy and the bf16 multiply-add peak (bf16_peak.c: AMX or AVX512-BF16; the bf16
# models' GFLOP/s are also given as its fraction) on the same cores, hloc's compile time per model on this machine (when the
# bundle has the statically linked hloc), ONNX Runtime on the same cores (when the machine has
# its Python package; ort_bench.py, serial and THREADS, each run right after hloc's run of the
# same model and thread count: on a shared host a figure taken a few seconds apart can see
# another machine), then per model the median run time serial and on
# THREADS threads, GFLOP/s (or GB/s for models without dot/convolution), XLA's CPU time on 2
# cores from baselines.json (measured pinned to 2 cores on the 16-core Xeon of the H200 host),
# the ratio, and a check of the results against the checksum recorded on the build host
# ("ok" within 1e-3 relative; "DIFF" is worth a look, summation order differs with the vector
# width). Rows MODEL_frozen are the model compiled with its weights frozen (constants, as ONNX
# Runtime's initializers are), rows MODEL_packed the model's own driver run with --packed (its
# weights packed once before the runs, NAME_pack, as ONNX Runtime packs its initializers at
# session creation); both set beside the same ONNX Runtime figures.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cores=${CORES:-0,1}
threads=${THREADS:-2}
budget=${BUDGET:-5}
cap=${CAP:-300}
rounds=${ROUNDS:-1}
pin=(taskset -c "$cores")
command -v taskset >/dev/null || { echo "run.sh: taskset not found: running unpinned"; pin=(); }
kv() { printf '%s\n' "$2" | tr ' ' '\n' | sed -n "s/^$1=//p" | head -n 1; }
run() { # cap, command...: the key=value line, T on timeout, F on failure
  local c=$1 line rc; shift
  line=$(timeout "$c" "$@" 2>>"$here/run.log"); rc=$?
  if [ $rc = 124 ] || [ $rc = 137 ]; then echo T; elif [ $rc != 0 ] || [ -z "$line" ]; then echo F; else echo "$line"; fi
}

ort_run() { # threads: ONNX Runtime on model $ort_m, its median appended to $ort (with round $rd) and printed
  timeout 900 "${pin[@]}" python3 "$here/ort_bench.py" "$here/onnx" "$1" "$ort_m" 2>>"$here/run.log" | tee -a "$here/ort.jsonl" |
    python3 -c 'import json,sys
for l in sys.stdin:
    d = json.loads(l); print("%s\t%s\t%.9f\t%s\t%s" % (d["model"], d["threads"], d["run_median_s"], d["ort_version"], sys.argv[1]))' "$rd" >>"$ort"
  echo "   ONNX Runtime:$(tail -n 1 "$ort" | awk -F'\t' '{ printf " %st %s s", $2, $3 }')"
}

stamp=$(date -u '+%Y-%m-%d %H:%M UTC')
cpu=$(lscpu 2>/dev/null | sed -n 's/^Model name:[ \t]*//p' | head -n 1)
avx512=no; grep -q avx512f /proc/cpuinfo && avx512=yes
amx=no; grep -q amx_tile /proc/cpuinfo && amx=yes
: >"$here/run.log"
echo "== $stamp on $(hostname): ${cpu:-unknown CPU}, $(nproc) cores, AVX-512 $avx512, AMX $amx; pinned to cores $cores, $threads threads"
echo "   load average $(cut -d' ' -f1-3 /proc/loadavg)"
sg="" mc="" bp=""
if [ "${COMPILE_ONLY:-0}" != 1 ]; then
  sg=$(run 600 "${pin[@]}" "$here/bin/sgemm" 2048 5)
  mc=$(run 300 "${pin[@]}" "$here/bin/memcpy")
  bp=""; [ -x "$here/bin/bf16_peak" ] && bp=$(run 60 "${pin[@]}" "$here/bin/bf16_peak")
  printf '%s\n%s\n%s\n' "$sg" "$mc" "$bp"
fi

# hloc's compile time on this machine (default flags: this host's CPU), all cores and pinned
ctimes=$here/compile.tsv
: >"$ctimes"
if [ -f "$here/bin/hloc.xz" ]; then
  hl=$here/bin/hloc
  [ -x "$hl" ] || { xz -dc "$here/bin/hloc.xz" >"$hl" 2>/dev/null ||
    python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" "$here/bin/hloc.xz" "$hl"; chmod +x "$hl"; }
  export LD_LIBRARY_PATH="$here/bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  ctime() { # model, pin...: median wall seconds of 5 compilations
    local m=$1; shift
    for r in 1 2 3 4 5; do
      local t0 t1; t0=$(date +%s.%N)
      "$@" "$hl" "$here/modules/$m.pb" -o "$here/ct-$m.o" --name m >/dev/null 2>>"$here/run.log" || { echo F; return; }
      t1=$(date +%s.%N); awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f\n", b - a }'
    done | sort -n | sed -n 3p
  }
  echo "== compile time (median of 5; all $(nproc) cores / pinned to $cores)"
  for f in "$here"/modules/*.pb; do
    m=$(basename "$f" .pb)
    a=$(ctime "$m") b=$(ctime "$m" "${pin[@]}")
    printf '%s\t%s\t%s\n' "$m" "$a" "$b" >>"$ctimes"
    echo "   $m: $a s / $b s"
  done
fi

[ "${COMPILE_ONLY:-0}" = 1 ] && exit 0

# per round: every model, hloc on THREADS threads and serial, then ONNX Runtime on the same
# cores (when this machine has its Python package) on the same model, serial and THREADS;
# ROUNDS > 1 repeats the whole and reports the median over the rounds of each figure (each
# round's figure is the median of its timed runs): the host is shared, and interleaving
# both compilers' runs round by round exposes them to the same load
ort=$here/ort.tsv
rows=$here/rows.tsv
raw=$here/rounds.tsv
fast=$here/fastest.tsv
: >"$ort"
: >"$rows"
: >"$raw"
: >"$fast"
: >"$here/ort.jsonl"
have_ort=0
if [ -f "$here/ort_bench.py" ] && [ -d "$here/onnx" ] && python3 -c 'import onnxruntime' 2>/dev/null; then have_ort=1; fi
for rd in $(seq 1 "$rounds"); do
  [ "$rounds" -gt 1 ] && echo "== round $rd of $rounds"
  while IFS=$'\t' read -r m flops bytes asum nonfin x2 x16; do
    bin=$m opt=()
    case $m in *_packed) bin=${m%_packed} opt=(--packed) ;; esac
    [ -x "$here/bin/$bin" ] || continue
    echo "== $m"
    # ONNX Runtime right after hloc at each thread count (not for MODEL_frozen or
    # MODEL_packed), so that each pair of figures comes from the same moment of a shared host
    ort_m=""
    [ "$have_ort" = 1 ] && [ -f "$here/onnx/$m.onnx" ] && ort_m=$m
    l2=$(run "$cap" "${pin[@]}" "$here/bin/$bin" "${opt[@]}" --threads "$threads" --budget "$budget")
    echo "   $threads threads: $l2"
    [ -n "$ort_m" ] && ort_run "$threads"
    l1=T
    if [ "$l2" != T ]; then
      l1=$(run "$cap" "${pin[@]}" "$here/bin/$bin" "${opt[@]}" --threads 1 --budget "$budget")
      echo "   serial:    $l1"
    fi
    [ -n "$ort_m" ] && ort_run 1
    t1=$l1 t2=$l2 ck="–"
    case $l1 in T|F) ;; *) t1=$(kv median_s "$l1") ;; esac
    case $l2 in T|F) ;; *) t2=$(kv median_s "$l2") ;; esac
    # the results of both runs against this host's checksums (the threaded run's, then the
    # serial run's where the threaded one matched)
    for l in "$l2" "$l1"; do
      case $l in T|F) continue ;; esac
      [ "$ck" = "–" ] || [ "$ck" = ok ] || continue
      ck=$(awk -v a="$(kv asum "$l")" -v b="$asum" -v n="$(kv nonfinite "$l")" -v nb="$nonfin" -v t="$(kv threads "$l")" 'BEGIN {
        if (b == "-" || b == "") { print "no reference"; exit }
        d = a - b; if (d < 0) d = -d; s = b < 0 ? -b : b
        print (d <= 1e-3 * s + 1e-6 && n == nb) ? "ok" : "DIFF (" t "t: " a " vs " b ")" }')
    done
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$m" "$t1" "$t2" "$flops" "$bytes" "$x2" "$x16" "$ck" "$rd" >>"$raw"
    for l in "$l1" "$l2"; do # the fastest single runs, for the table of minima
      case $l in T|F) ;; *) printf '%s\t%s\t%s\n' "$m" "$(kv threads "$l")" "$(kv min_s "$l")" >>"$fast" ;; esac
    done
  done <"$here/models.tsv"
done
# the median over the rounds of each figure: med("v1 v2 ..."), a timeout (T) or failure (F)
# in any round stands
awk_med='
  function med(s,   n, a, i, j, t) {
    n = split(s, a, " ")
    for (i = 1; i <= n; i++) { if (a[i] == "T" || a[i] == "F") return a[i]; for (j = i; j > 1 && a[j - 1] + 0 > a[j] + 0; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t } }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }'
awk -F'\t' "$awk_med"'
  !($1 in seen) { seen[$1] = 1; order[++nm] = $1 }
  { t1[$1] = t1[$1] " " $2; t2[$1] = t2[$1] " " $3; rest[$1] = $4 "\t" $5 "\t" $6 "\t" $7; ck[$1] = (ck[$1] == "" || ck[$1] == "ok") ? $8 : ck[$1] }
  END { for (i = 1; i <= nm; i++) { m = order[i]; printf "%s\t%s\t%s\t%s\t%s\n", m, med(t1[m]), med(t2[m]), rest[m], ck[m] } }' "$raw" >"$rows"
awk -F'\t' "$awk_med"'
  !(($1, $2) in seen) { seen[$1, $2] = 1; key[++nk] = $1 "\t" $2 }
  { v[$1, $2] = v[$1, $2] " " $3; ver = $4 }
  END { for (i = 1; i <= nk; i++) { split(key[i], k, "\t"); printf "%s\t%s\t%.9f\t%s\n", k[1], k[2], med(v[k[1], k[2]]), ver } }' "$ort" >"$ort.med"
mv "$ort" "$here/ort_rounds.tsv" # each round's figure (model, threads, median, version, round)

# PAIRED models: ONNX Runtime and hloc alternated in blocks of runs, one process each, the
# ratio per round (ort_pair.py; PAIR_SECONDS bounds each, default 30 s)
: >"$here/paired.jsonl"
if [ -n "${PAIRED:-}" ] && [ "$have_ort" = 1 ] && [ -f "$here/ort_pair.py" ]; then
  for m in $PAIRED; do
    bin=$m opt=()
    case $m in *_packed) bin=${m%_packed} opt=(--packed) ;; esac
    b=${bin%_frozen}
    [ -x "$here/bin/$bin" ] && [ -f "$here/onnx/$b.onnx" ] || { echo "   paired: no $m or no $b.onnx"; continue; }
    for t in 1 "$threads"; do
      PAIR_LABEL=$m PAIR_SECONDS=${PAIR_SECONDS:-30} timeout 900 "${pin[@]}" python3 "$here/ort_pair.py" "$here/onnx" "$b" "$t" "$here/bin/$bin" "${opt[@]}" 2>>"$here/run.log" |
        tee -a "$here/paired.jsonl" | python3 -c 'import json,sys
for l in sys.stdin:
    d = json.loads(l); print("   paired %s %dt: ORT / hloc %.3f [%.3f, %.3f] over %d rounds" % (d["label"], d["threads"], d["ratio_median"], d["ratio_q1"], d["ratio_q3"], d["rounds"]))'
    done
  done
fi
mv "$ort.med" "$ort"

out=$here/results-$(hostname)-$(date -u +%Y%m%d-%H%M).md
{
  echo "hloc device run, $stamp, $(hostname): ${cpu:-unknown CPU}, $(nproc) cores, AVX-512 $avx512, AMX $amx."
  echo "Pinned: taskset -c $cores; $threads threads; budget $budget s per configuration, cap $cap s; $rounds round(s), hloc and ONNX Runtime interleaved model by model and thread count (each ONNX Runtime figure right after hloc's), each figure the median over the rounds. Bundle: $(sed -n 2,4p "$here/README.txt" | tr '\n' ' ')"
  echo
  echo "| model | hloc 1t ms | hloc ${threads}t ms | GFLOP/s or GB/s (${threads}t) | XLA cpu 2c ms | hloc ${threads}t / XLA 2c | at or below XLA 2c | ORT 1t ms | ORT ${threads}t ms | ORT / hloc (1t, ${threads}t) | check |"
  echo "|---|---:|---:|---:|---:|---:|---|---:|---:|---|---|"
  bfpk=$(kv gflops "$(printf '%s\n' "$bp" | grep "bf16_threads=$([ "$threads" -ge 2 ] && echo 2 || echo 1)")")
  awk -F'\t' -v cap="$cap" -v th="$threads" -v ortf="$ort" -v bfpk="${bfpk:-0}" '
    function ms(x) {
      if (x == "T") return "> " cap " s"
      if (x == "F" || x == "") return "failed"
      x *= 1000
      return x < 10 ? sprintf("%.2f", x) : x < 100 ? sprintf("%.1f", x) : sprintf("%.0f", x)
    }
    function num(x) { return x != "" && x != "T" && x != "F" && x != "-" }
    BEGIN { while ((getline l < ortf) > 0) { split(l, f, "\t"); o[f[1], f[2]] = f[3] } }
    {
      rate = "–"; r = "–"; v = "–"
      if (num($3)) rate = $4 > 0 ? sprintf("%.1f GFLOP/s", $4 / $3 * 1e-9) : sprintf("%.1f GB/s", $5 / $3 * 1e-9)
      if (num($3) && $4 > 0 && bfpk > 0 && $1 ~ /bf16/) rate = rate sprintf(" (%.0f%% of bf16 peak)", 100 * $4 / $3 * 1e-9 / bfpk)
      if (num($3) && num($6)) { r = sprintf("%.2f", $3 / $6); v = $3 <= $6 ? "yes" : "no" }
      else if ($3 == "T" && num($6)) v = "no"
      b = $1; sub(/_(frozen|packed)$/, "", b) # the frozen and packed twins meet the same ONNX Runtime run
      o1 = o[b, 1]; o2 = o[b, th]; q = "–"
      if (num(o1) && num(o2) && num($2) && num($3)) q = sprintf("%.2f, %.2f", o1 / $2, o2 / $3)
      printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", $1, ms($2), ms($3), rate, num($6) ? ms($6) : "–", r, v,
        num(o1) ? ms(o1) : "–", num(o2) ? ms(o2) : "–", q, $8
    }' "$rows"
  if [ "$rounds" -gt 1 ]; then
    echo
    echo "Each round's figures (hloc ${threads}t and 1t ms; ONNX Runtime in ort.jsonl beside this file):"
    echo
    awk -F'\t' '{ r[$1] = r[$1] sprintf(" %.4g/%.4g", $3 * 1000, $2 * 1000) } !($1 in s) { s[$1] = 1; o[++n] = $1 }
      END { for (i = 1; i <= n; i++) printf "- %s:%s\n", o[i], r[o[i]] }' "$raw"
  fi
  if [ -s "$fast" ] && [ -s "$here/ort.jsonl" ] && command -v python3 >/dev/null; then
    # the fastest single runs; with ROUNDS > 1 also each round's pair (ONNX Runtime's median
    # over hloc's, measured one right after the other) and the median of those ratios
    python3 - "$fast" "$here/ort.jsonl" "$raw" "$here/ort_rounds.tsv" "$threads" "$rounds" <<'PY'
import json, statistics, sys
fast, ortf, raw, ortr, th, rounds = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6])
h, o, order = {}, {}, []
for l in open(fast):
    m, t, v = l.split("\t")
    if m not in order: order.append(m)
    h[m, int(t)] = min(h.get((m, int(t)), 1e30), float(v))
for l in open(ortf):
    d = json.loads(l)
    k = (d["model"], int(d["threads"]))
    o[k] = min(o.get(k, 1e30), float(d["run_min_s"]))
def base(m): return m[:-7] if m.endswith(("_frozen", "_packed")) else m  # a twin meets its model's ONNX Runtime figure
def ms(x):
    if x >= 1e29: return "–"
    x *= 1e3
    return "%.2f" % x if x < 10 else "%.1f" % x if x < 100 else "%.0f" % x
print("\nFastest single run of each over all rounds (hloc's driver and ONNX Runtime both report their minimum; on a shared host, the figure least disturbed by the neighbours):\n")
print("| model | hloc 1t ms | hloc %dt ms | ORT 1t ms | ORT %dt ms | ORT / hloc (1t, %dt) |" % (th, th, th))
print("|---|---:|---:|---:|---:|---|")
for m in order:
    a1, a2, o1, o2 = h.get((m, 1), 1e30), h.get((m, th), 1e30), o.get((base(m), 1), 1e30), o.get((base(m), th), 1e30)
    q = "%.2f, %.2f" % (o1 / a1, o2 / a2) if max(a1, a2, o1, o2) < 1e29 else "–"
    print("| %s | %s | %s | %s | %s | %s |" % (m, ms(a1), ms(a2), ms(o1), ms(o2), q))
if rounds > 1:
    hr, orr = {}, {}  # (model, threads, round) -> that round's median
    for l in open(raw):
        f = l.rstrip("\n").split("\t")
        for t, v in ((1, f[1]), (th, f[2])):
            if v not in ("T", "F", ""): hr[f[0], t, f[8]] = float(v)
    for l in open(ortr):
        f = l.rstrip("\n").split("\t")
        orr[f[0], int(f[1]), f[4]] = float(f[2])
    def pairs(m, t):
        r = [orr[base(m), t, rd] / hr[m, t, rd] for rd in map(str, range(1, rounds + 1)) if (m, t, rd) in hr and (base(m), t, rd) in orr]
        return "%s (median %.2f)" % (", ".join("%.2f" % x for x in r), statistics.median(r)) if r else None
    print("\nRound pairs: ONNX Runtime's median over hloc's in each round (the two measured one right after the other, so both saw the same moment of a shared host), and the median of those ratios:\n")
    print("| model | ORT / hloc, 1t | ORT / hloc, %dt |" % th)
    print("|---|---|---|")
    for m in order:
        p1, p2 = pairs(m, 1), pairs(m, th)
        if p1 or p2: print("| %s | %s | %s |" % (m, p1 or "–", p2 or "–"))
PY
  fi
  if [ -s "$here/paired.jsonl" ]; then
    python3 -c 'import json,sys
ds = [json.loads(l) for l in open(sys.argv[1])]
print("\nPaired (ort_pair.py: hloc and ONNX Runtime alternated in blocks of %d runs after a pause, the first run of each block dropped, each block'"'"'s median its figure; the rounds shared by %d driver processes in turn; per round the ratio ONNX Runtime / hloc; quartiles over the rounds):\n" % (ds[0]["block"], ds[0]["procs"]))
print("| model | threads | rounds | hloc ms | ORT ms | ORT / hloc, median [q1, q3] | rounds hloc faster | hloc p10 ms | ORT p10 ms | ORT / hloc, p10 |")
print("|---|---:|---:|---:|---:|---|---:|---:|---:|---:|")
for d in ds:
    print("| %s | %d | %d | %.3f | %.3f | %.3f [%.3f, %.3f] | %.0f%% | %.3f | %.3f | %.3f |" % (d["label"], d["threads"], d["rounds"], 1e3 * d["hloc_median_s"], 1e3 * d["ort_median_s"], d["ratio_median"], d["ratio_q1"], d["ratio_q3"], 100 * d["hloc_faster_share"], 1e3 * d["hloc_p10_s"], 1e3 * d["ort_p10_s"], d["ort_p10_s"] / d["hloc_p10_s"]))' "$here/paired.jsonl"
  fi
  if [ -s "$ctimes" ]; then
    echo
    echo "hloc compile time on this machine (statically linked hloc, default flags; median of 5 wall seconds):"
    echo
    echo "| model | all $(nproc) cores | pinned to $cores |"
    echo "|---|---:|---:|"
    awk -F'\t' '{ printf "| %s | %s | %s |\n", $1, $2, $3 }' "$ctimes"
  fi
  echo
  echo "Same cores: OpenBLAS SGEMM 2048³ $(kv gflops "$(printf '%s\n' "$sg" | grep 'sgemm_threads=1')") GFLOP/s on 1 thread, $(kv gflops "$(printf '%s\n' "$sg" | grep 'sgemm_threads=2')") on 2 (kernels $(kv kernels "$(printf '%s\n' "$sg" | grep 'sgemm_threads=2')"), OPENBLAS_CORETYPE $(kv coretype "$(printf '%s\n' "$sg" | grep 'sgemm_threads=2')")); memcpy 64 MiB $(kv gbps "$(printf '%s\n' "$mc" | grep 'memcpy_threads=1')") GB/s on 1 thread, $(kv gbps "$(printf '%s\n' "$mc" | grep 'memcpy_threads=2')") on 2 (read + write)$([ -n "$bp" ] && echo "; bf16 peak ($(kv isa "$bp")) $(kv gflops "$(printf '%s\n' "$bp" | grep 'bf16_threads=1')") GFLOP/s on 1 thread, $(kv gflops "$(printf '%s\n' "$bp" | grep 'bf16_threads=2')") on 2")."
} >"$out"
echo
cat "$out"
echo
echo "written to $out"
