#!/usr/bin/env bash
# tools/check_same_bytes.sh BASE_BUILD NEW_BUILD OUTDIR: whether two builds of hloc generate the
# same bytes. Compiles every corpus module (fixtures and bench module.pb) and every test HLO file
# (tests/cuda/cases/*.hlo, tests/xla_cases/*/module.hlo) with the hloc of each build under
# several option sets, then compares each output file (.o, .h, .s, .ptx, manifest) with cmp, and
# the prebuilt GEMM library's generated C source. A refactoring that must not change the output
# runs this against a build of the commit before it. Prints identical / different / failed-in-both
# counts; exits 1 on any difference (a compilation failing with one build only counts as one).
set -u
[ $# -eq 3 ] || { echo "usage: $0 BASE_BUILD NEW_BUILD OUTDIR" >&2; exit 2; }
base=$(cd "$1" && pwd) new=$(cd "$2" && pwd) out=$3
root=$(cd "$(dirname "$0")/.." && pwd)
corpus=${HLOC_CORPUS_DIR:-/work/shared/corpus}
mkdir -p "$out" && out=$(cd "$out" && pwd)

inputs=("$corpus"/fixtures/*/module.pb "$corpus"/bench/*/module.pb "$root"/tests/cuda/cases/*.hlo
        "$root"/tests/xla_cases/*/module.hlo)
# label, environment, flags, output file name
opts=("default||" "O1||-O1" "O3||-O3" "haswell||--cpu=haswell" "skx||--cpu=skylake-avx512"
      "x86-64||--cpu=x86-64" "direct||--conv-algo=direct" "profile||--profile" "asm||--emit=asm"
      "noprebuilt|HLOC_CPU_PREBUILT=0|")
# the CUDA target where the new build has it (a build without a toolkit rejects --target=cuda)
mkdir -p "$out/probe"
"$new/hloc" "$root/tests/cuda/cases/column_max.hlo" --target=cuda --emit=ptx -o "$out/probe/m.ptx" >/dev/null 2>&1 &&
  opts+=("cuda||--target=cuda --emit=ptx")

# compile SIDE BIN INPUT: every option set into $out/SIDE/<case>/<label>/ (m.<ext>, rc)
compile() {
  local side=$1 bin=$2 in=$3 case label env flags ext dir
  case=$(echo "${in#"$corpus"/}" | sed "s|^$root/||; s|/module\.[a-z]*$||; s|\.hlo$||; s|/|_|g")
  for o in "${opts[@]}"; do
    IFS='|' read -r label env flags <<<"$o"
    ext=o
    [[ $flags == *asm* ]] && ext=s
    [[ $flags == *ptx* ]] && ext=ptx
    dir=$out/$side/$case/$label
    rm -rf "$dir" && mkdir -p "$dir"
    # shellcheck disable=SC2086
    (cd "$dir" && env $env "$bin" "$in" --name m $flags -o "m.$ext" >log 2>&1; echo $? >rc)
  done
}

for side in base new; do
  bin=$base/hloc
  [ $side = new ] && bin=$new/hloc
  for in in "${inputs[@]}"; do
    compile $side "$bin" "$in" &
    [ "$(jobs -rp | wc -l)" -ge "${JOBS:-2}" ] && wait -n
  done
done
wait

same=0 diff=0 failed=0
for bdir in "$out"/base/*/*/; do
  rel=${bdir#"$out"/base/} ndir=$out/new/$rel
  if [ "$(cat "$bdir/rc")" != 0 ] || [ "$(cat "$ndir/rc" 2>/dev/null)" != 0 ]; then
    if [ "$(cat "$bdir/rc")" != 0 ] && [ "$(cat "$ndir/rc" 2>/dev/null)" != 0 ]; then
      failed=$((failed + 1))
    else
      diff=$((diff + 1)) && echo "DIFFERENT (fails in one build): $rel"
    fi
    continue
  fi
  for f in "$bdir"/m.* "$ndir"/m.*; do
    [ -e "$f" ] || continue
    n=${f##*/}
    [[ $f == "$ndir"* ]] && [ -e "$bdir/$n" ] && continue # counted from the base side
    if cmp -s "$bdir/$n" "$ndir/$n"; then same=$((same + 1)); else diff=$((diff + 1)) && echo "DIFFERENT: $rel$n"; fi
  done
done
if cmp -s "$base/prebuilt/cpu_prebuilt_data.c" "$new/prebuilt/cpu_prebuilt_data.c"; then
  same=$((same + 1))
else
  diff=$((diff + 1)) && echo "DIFFERENT: prebuilt/cpu_prebuilt_data.c"
fi
echo "check_same_bytes: $same identical, $diff different, $failed failed in both builds"
[ $diff -eq 0 ]
