#!/usr/bin/env bash
# bench/cpu/dnnl_pair.sh: hloc's GEMMs against oneDNN's matmul on the same shapes (by hand).
#
#   bash bench/cpu/dnnl_pair.sh [--build-dir DIR] [--no-build] [--shapes "MxKxN ..."]
#                               [--types "bf16-f32 ..."]               build, then run here
#   bash bench/cpu/dnnl_pair.sh --device-bundle DIR [...]              a bundle, DIR.tar.xz
#   bash DIR/run.sh                                                    run a bundle (there)
#
# Each case is one shape and one type: operands and result of a single dot, C[M,N] =
# A[M,K] B[K,N] row-major (types bf16-f32, bf16-bf16, s8-s32, f32-f32; default every type on
# 1024^3, the Llama-3-8B layer's [256,4096]x[4096,4096], [256,4096]x[4096,14336] and down
# projection [256,14336]x[14336,4096], and decode's [8,4096]x[4096,14336]). hloc's side is
# that dot as an HLO module compiled by hloc and timed by bench/cpu/bench_model.c, B packed
# on every call (NAME_run's work) and packed ahead (--packed: NAME_pack); oneDNN's side is
# bench/cpu/dnnl_gemm.c (hloc-bench-dnnl) with B row-major and reordered ahead into oneDNN's
# blocked layout. Both fill their inputs alike, so their result checksums must agree (within
# 1e-3 relative: summation order and a bf16 result's rounding differ).
#
# The run (here, or the bundle's run.sh there): ROUNDS rounds (default 3), each running every
# case on each thread count of THREADS (default "1 2") and each layout, hloc's driver and
# oneDNN's program one right after the other on the same cores (taskset -c CORES, default
# 0,1), their order swapped every round, BUDGET seconds of timed runs each (default 1); ONLY
# (an extended regex) keeps the cases whose names (MxKxN_type) it matches. Two tables: per
# figure the median over the rounds of each run's median, and the fastest single call over the
# rounds (on a shared machine a neighbour only ever slows a run down); each says what oneDNN's
# time is over hloc's (above 1: hloc faster), beside oneDNN's kernel and the check, under the
# machine's bf16 peak (bench/cpu/bf16_peak.c). The report is written to RESULTS (default the
# run's folder) as dnnl_pair.md after every round, so a run cut short leaves the rounds it
# finished; the raw figures beside it (dnnl_pair.tsv), the programs' stderr in dnnl_pair.log.
#
# --device-bundle DIR writes DIR (objects for --cpu sapphirerapids --features=-prefer-256-bit,
# HLOC_BENCH_BUNDLE_CPU / _FEATURES as in bench/cpu.sh; drivers linked statically; the oneDNN
# program with every library it loads, the dynamic loader included, run through that loader,
# so the other machine needs no oneDNN nor a matching glibc) and DIR.tar.xz. A build here
# needs libdnnl-dev for hloc-bench-dnnl (installed through tools/setup.sh when missing).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)

# ------------------------------------------------------------------ the run
kv() { printf '%s\n' "$2" | tr ' ' '\n' | sed -n "s/^$1=//p" | head -n 1; }

# One timed run of side $1 (hloc or dnnl) of case $2 on $3 threads with B $4 (plain or
# packed): its key=value line, "F" on failure (stderr in $log).
run_side() {
  local side=$1 c=$2 th=$3 lay=$4 m k n ty line opt=()
  [ "$lay" = packed ] && opt=(--packed)
  read -r m k n ty < <(awk -F'\t' -v c="$c" '$1 == c { print $2, $3, $4, $5 }' "$dir/cases.tsv")
  if [ "$side" = hloc ]; then
    line=$("${pin[@]}" "$dir/bin/$c" --threads "$th" --budget "$budget" "${opt[@]}" 2>>"$log")
  else
    line=$("${pin[@]}" "${dnnl[@]}" --m "$m" --k "$k" --n "$n" --type "$ty" --threads "$th" \
      --weights "${lay/packed/blocked}" --budget "$budget" 2>>"$log")
  fi
  [ -n "$line" ] && echo "$line" || echo F
}

# Round $1: every case (of those ONLY matches) x thread counts x layouts, both sides back to
# back (swapped each round), into $raw: round, case, threads, layout, side, median_s, min_s,
# pack_s, asum, impl, wfmt.
run_round() {
  local r=$1 c th lay s line
  echo "== round $r of $rounds ($(date -u +%H:%M:%S) UTC)"
  for c in $(cut -f1 "$dir/cases.tsv" | grep -E "${ONLY:-.}"); do
    for th in $threads; do
      for lay in plain packed; do
        for s in $([ $((r % 2)) = 1 ] && echo hloc dnnl || echo dnnl hloc); do
          line=$(run_side "$s" "$c" "$th" "$lay")
          printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$c" "$th" "$lay" "$s" \
            "$(kv median_s "$line")" "$(kv min_s "$line")" "$(kv pack_s "$line")" \
            "$(kv asum "$line")" "$(kv impl "$line")" "$(kv wfmt "$line")" >>"$raw"
        done
      done
      echo "   $c ${th}t: $(awk -F'\t' -v r="$r" -v c="$c" -v t="$th" '$1 == r && $2 == c && $3 == t { printf " %s/%s %.3g ms", $5, $4, $6 * 1e3 }' "$raw")"
    done
  done
}

# The table from $raw and $dir/cases.tsv: of each run's median the median over the rounds,
# oneDNN / hloc the median of the rounds' ratios (each of a pair run back to back) (best=0);
# or of each run's fastest call the fastest over the rounds, and their ratio (best=1).
pair_table() {
  echo "| M x K x N | types | threads | hloc ms (B per call / packed) | oneDNN ms (B plain / blocked) | GFLOP/s packed: hloc / oneDNN | oneDNN / hloc (plain, packed)$([ "$1" = 0 ] && echo ", per round") | oneDNN kernel | check |"
  echo "|---|---|---:|---:|---:|---:|---|---|---|"
  awk -F'\t' -v best="$1" '
    function med(s,   n, a, i, j, t) {
      n = split(s, a, " ")
      for (i = 1; i <= n; i++) { if (a[i] == "F") return ""; for (j = i; j > 1 && a[j - 1] + 0 > a[j] + 0; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t } }
      return n == 0 ? "" : best ? a[1] : n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    function ms(x) { return x == "" ? "failed" : x * 1e3 < 10 ? sprintf("%.2f", x * 1e3) : sprintf("%.1f", x * 1e3) }
    function ratio(a, b) { return a == "" || b == "" ? "–" : sprintf("%.2f", a / b) }
    function paired(k, lay,   r, l, a, b) { # the median of the rounds ratios, oneDNN over hloc
      l = ""
      for (r = 1; r <= nr; r++) { a = rt[k, lay, r, "dnnl"]; b = rt[k, lay, r, "hloc"]; if (a != "" && b != "") l = l " " a / b }
      return l == "" ? "–" : sprintf("%.2f", med(l))
    }
    function close_(a, b) { d = a - b; if (d < 0) d = -d; s = b < 0 ? -b : b; return d <= 1e-3 * s + 1e-6 }
    FILENAME == ARGV[1] { shape[$1] = $2 " x " $3 " x " $4; type[$1] = $5; fl[$1] = 2 * $2 * $3 * $4; nopack[$1] = $6 == 0; order[++nc] = $1; next }
    {
      k = $2 SUBSEP $3; v = best ? $7 : $6; t[k, $4, $5] = t[k, $4, $5] " " (v == "" ? "F" : v)
      rt[k, $4, $1, $5] = v; if ($1 > nr) nr = $1
      if (!(k in seen)) { seen[k] = 1; keys[++nk] = k }
      if ($5 == "dnnl" && $4 == "packed") impl[k] = $10 ($11 == "" ? "" : ", B " $11)
      if ($9 == "") bad[k] = "a run failed"
      else if (!(k in ref)) ref[k] = $9
      else if (!close_($9, ref[k])) bad[k] = "DIFF (" $5 " " $4 " " $9 " vs " ref[k] ")"
    }
    END {
      for (i = 1; i <= nc; i++) for (j = 1; j <= nk; j++) {
        split(keys[j], kk, SUBSEP); c = kk[1]; th = kk[2]
        if (c != order[i]) continue
        hp = med(t[keys[j], "plain", "hloc"]); hq = med(t[keys[j], "packed", "hloc"])
        dp = med(t[keys[j], "plain", "dnnl"]); dq = med(t[keys[j], "packed", "dnnl"])
        gf = (hq == "" ? "–" : sprintf("%.0f", fl[c] / hq * 1e-9)) " / " (dq == "" ? "–" : sprintf("%.0f", fl[c] / dq * 1e-9))
        printf "| %s | %s | %d | %s / %s%s | %s / %s | %s | %s, %s | %s | %s |\n", shape[c], type[c], th, ms(hp), ms(hq),
          nopack[c] ? " (nothing packed)" : "", ms(dp), ms(dq), gf, best ? ratio(dp, hp) : paired(keys[j], "plain"), best ? ratio(dq, hq) : paired(keys[j], "packed"), impl[keys[j]], keys[j] in bad ? bad[keys[j]] : "ok"
      }
    }' "$dir/cases.tsv" "$raw"
}

# The report after round $1 of the run that started at $stamp into $res/dnnl_pair.md: the
# machine, the bf16 peak, both tables.
pair_report() {
  {
    echo "hloc against oneDNN, $stamp, $(hostname): ${cpu:-unknown CPU}, $(nproc) cores, AMX $(grep -q amx_tile /proc/cpuinfo && echo yes || echo no)."
    echo "Pinned: ${pin[*]:-none}; $1 of $rounds round(s) done, BUDGET=$budget s per run ($((SECONDS - t0)) s in all); load average at the start $load0, now $(cut -d' ' -f1-3 /proc/loadavg)."
    [ -s "$dir/README.txt" ] && echo "Bundle: $(head -n 1 "$dir/README.txt")"
    [ -n "$peak" ] && echo "bf16 peak on the same cores (bench/cpu/bf16_peak.c): $(printf '%s\n' "$peak" | awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^(bf16_threads|isa|gflops)=/) printf "%s ", $i; printf "; " }')"
    echo
    echo "Each figure the median over the rounds of each run's median:"
    echo
    pair_table 0
    echo
    echo "Each figure the fastest single call over the rounds (the least disturbed by a neighbour):"
    echo
    pair_table 1
  } >"$res/dnnl_pair.md"
}

# Run the cases of folder $1 (bin/, cases.tsv; lib/ in a bundle), writing the report after
# every round (a run cut short still leaves one), and print it.
pair_run() {
  dir=$1
  rounds=${ROUNDS:-3} threads=${THREADS:-"1 2"} budget=${BUDGET:-1}
  res=${RESULTS:-$dir}
  mkdir -p "$res"
  pin=(taskset -c "${CORES:-0,1}")
  command -v taskset >/dev/null || { echo "dnnl_pair: taskset not found: running unpinned"; pin=(); }
  dnnl=("$dir/bin/hloc-bench-dnnl")
  [ -x "$dir/lib/ld-linux-x86-64.so.2" ] && dnnl=("$dir/lib/ld-linux-x86-64.so.2" --library-path "$dir/lib" "${dnnl[@]}")
  raw=$res/dnnl_pair.tsv log=$res/dnnl_pair.log
  : >"$raw"
  : >"$log"
  t0=$SECONDS load0=$(cut -d' ' -f1-3 /proc/loadavg)
  stamp=$(date -u '+%Y-%m-%d %H:%M UTC')
  cpu=$(lscpu 2>/dev/null | sed -n 's/^Model name:[ \t]*//p' | head -n 1)
  echo "== $stamp on $(hostname): ${cpu:-unknown CPU}, $(nproc) cores; load average $load0"
  peak=""
  [ -x "$dir/bin/bf16_peak" ] && peak=$("${pin[@]}" "$dir/bin/bf16_peak" 2>>"$log")
  local r
  for ((r = 1; r <= rounds; r++)); do
    run_round "$r"
    pair_report "$r"
  done
  echo
  cat "$res/dnnl_pair.md"
  echo
  echo "written to $res/dnnl_pair.md (raw: $raw, stderr: $log)"
}

# Inside a bundle (cases.tsv beside this script, as DIR/run.sh): run it.
if [ -f "$here/cases.tsv" ]; then
  pair_run "$here"
  exit
fi

# ------------------------------------------------------------------ building the cases
root=$(cd "$here/../.." && pwd)
build=$root/build do_build=1 bundle=""
shapes="1024x1024x1024 256x4096x4096 256x4096x14336 256x14336x4096 8x4096x14336"
types="bf16-f32 bf16-bf16 s8-s32 f32-f32"
while [ $# -gt 0 ]; do
  case $1 in
    --build-dir) build=$(realpath -m "$2"); shift ;;
    --no-build) do_build=0 ;;
    --shapes) shapes=$2; shift ;;
    --types) types=$2; shift ;;
    --device-bundle) bundle=$(realpath -m "$2"); shift ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "dnnl_pair: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
if [ "$do_build" = 1 ]; then
  HLOC_SETUP_EXTRA=libdnnl-dev "$root/tools/setup.sh" "$build" || exit 1
  cmake --build "$build" -j"$(nproc)" --target hloc hloc-bench-dnnl hloc-bench-bf16-peak >"$build/dnnl_pair_build.log" 2>&1 ||
    { tail -n 20 "$build/dnnl_pair_build.log"; echo "dnnl_pair: build failed"; exit 1; }
fi
for t in hloc hloc-bench-dnnl; do
  [ -x "$build/$t" ] || { echo "dnnl_pair: $build/$t is missing (libdnnl-dev installed? see --help)"; exit 1; }
done

# The single-dot module of shape $1 (MxKxN) and type $2 (A-C: operands, result) on stdout.
dot_module() {
  local m k n a=${2%-*} c=${2#*-}
  IFS=x read -r m k n <<<"$1"
  printf 'HloModule dot_%s_%s\n\nENTRY main {\n  a = %s[%s,%s] parameter(0)\n  b = %s[%s,%s] parameter(1)\n' \
    "$1" "${2/-/_}" "$a" "$m" "$k" "$a" "$k" "$n"
  printf '  ROOT d = %s[%s,%s] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n' "$c" "$m" "$n"
}

# Compile every case into folder $1 (hloc flags after it) and link its driver into $1/bin
# (statically where $static is set); cases.tsv: case, M, K, N, type, packed bytes.
build_cases() {
  local d=$1 s ty c w; shift
  mkdir -p "$d/bin"
  : >"$d/cases.tsv"
  for s in $shapes; do
    for ty in $types; do
      c=${s}_$ty w=$d/work/$c
      mkdir -p "$w"
      dot_module "$s" "$ty" >"$w/m.hlo"
      if ! "$build/hloc" "$w/m.hlo" -o "$w/m.o" --name m --header "$w/m.h" "$@" >"$w/compile.log" 2>&1; then
        echo "  $c: compile failed: $(tail -n 1 "$w/compile.log")"; continue
      fi
      ${CC:-cc} -O2 -std=gnu17 -I"$root/bench/cpu" -DBENCH_HEADER="\"$w/m.h\"" -DBENCH_NAME=m \
        -DBENCH_UNAME=M -DBENCH_LABEL="\"$c\"" "$root/bench/cpu/bench_model.c" "$w/m.o" \
        ${static:+-static} -lm -lpthread -o "$d/bin/$c" >"$w/link.log" 2>&1 || { echo "  $c: link failed ($w/link.log)"; continue; }
      printf '%s\t%s\t%s\t%s\n' "$c" "${s//x/$'\t'}" "$ty" \
        "$(sed -n 's/^#define M_PACKED_BYTES \([0-9]*\).*/\1/p' "$w/m.h")" >>"$d/cases.tsv"
    done
  done
}

if [ -z "$bundle" ]; then
  static="" build_cases "$build/bench/dnnl"
  ln -sf "$build/hloc-bench-dnnl" "$build/bench/dnnl/bin/hloc-bench-dnnl"
  [ -x "$build/hloc-bench-bf16-peak" ] && ln -sf "$build/hloc-bench-bf16-peak" "$build/bench/dnnl/bin/bf16_peak"
  pair_run "$build/bench/dnnl"
  exit
fi

# ------------------------------------------------------------------ the device bundle
bcpu=${HLOC_BENCH_BUNDLE_CPU:-sapphirerapids}
bfeat=${HLOC_BENCH_BUNDLE_FEATURES--prefer-256-bit}
rm -rf "$bundle" "$bundle.tar.xz"
echo "== bundle in $bundle (hloc --cpu $bcpu --features='$bfeat')"
static=1 build_cases "$bundle" --cpu "$bcpu" --features="$bfeat"
rm -rf "$bundle/work"
strip "$bundle"/bin/* 2>/dev/null
cp "$build/hloc-bench-dnnl" "$bundle/bin/"
${CC:-cc} -O2 -static "$root/bench/cpu/bf16_peak.c" -lpthread -o "$bundle/bin/bf16_peak" && strip "$bundle/bin/bf16_peak"
# every library the program loads and the loader itself, each under its soname
mkdir -p "$bundle/lib"
ldd "$build/hloc-bench-dnnl" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 } $1 ~ /^\/.*ld-linux/ { print "ld-linux-x86-64.so.2", $1 }' |
  while read -r so path; do cp -L "$path" "$bundle/lib/$so"; done
cp "$0" "$bundle/run.sh"
printf '%s %s\n' "built $(date -u '+%Y-%m-%d %H:%M UTC') from hloc $(git -C "$root" rev-parse --short HEAD)$(git -C "$root" status --porcelain | grep -q . && echo '+')," \
  "objects for --cpu $bcpu --features='$bfeat', oneDNN $(dpkg-query -W -f='${Version}' libdnnl-dev 2>/dev/null)." >"$bundle/README.txt"
tar -C "$(dirname "$bundle")" -cJf "$bundle.tar.xz" "$(basename "$bundle")"
echo "bundle: $(wc -l <"$bundle/cases.tsv") cases, $(du -h "$bundle.tar.xz" | cut -f1) in $bundle.tar.xz; there: tar xJf it, then bash DIR/run.sh (ROUNDS, BUDGET, THREADS, CORES, RESULTS)"
