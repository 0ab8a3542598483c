#!/bin/bash
# tools/xla_hlo_table.sh: docs/xla_hlo.md from a sweep's results (tools/xla_hlo_sweep.sh).
#
#   bash tools/xla_hlo_table.sh RESULTS.tsv "WHEN, WHERE" > docs/xla_hlo.md
#
# Counts per folder and outcome, the reasons for refusing with their counts (the located
# message without file, computation and instruction), and every file that did not pass with
# its outcome and the last line of what failed.
set -euo pipefail
tsv=$1
when=$2
reason() { sed 's/^hloc: [^ :]*:[0-9]*:[0-9]*: //; s/^hloc: [^:]*: //; s/computation [^:]*: //; s/instruction [^:]*: //'; }
cat <<EOF
# XLA's own HLO files through hloc

What \`bash tools/xla_hlo_sweep.sh\` gives on the files of \`../shared/xla-hlo\` (XLA's CPU and GPU
benchmark modules and its code-generation tests): each file compiled for the CPU target
(\`--elided-constants=random\`, so that benchmark dumps without their weights compile), run on 2
threads against the reference interpreter on the benchmark's deterministic inputs (1e-3 of
each result's scale; 3e-2 for modules with 16-bit or fp8 values). Outcomes: \`pass\`; \`fail\`
(outside the tolerance); \`refused\` (hloc's located error: what it does not compile yet);
\`reference failed\` (the interpreter could not evaluate it: an op it lacks, or over 120 s);
\`timeout\` (the compiled run over 300 s). The CI test \`tests/test_xla_hlo.c\` runs the files
of \`tests/xla_hlo_subset.txt\`, a share of those that pass. A file of several modules (lit's
\`// -----\` separators) counts each module, as FILE#N.

Sweep of $when.

| folder | files | pass | fail | refused | reference failed | timeout |
|---|---|---|---|---|---|---|
EOF
awk -F'\t' '{
  d = $1; sub(/\/[^\/]*$/, "", d); f[d]++; n[d, $2]++; tot++; all[$2]++
} END {
  for (d in f) printf "| `%s` | %d | %d | %d | %d | %d | %d |\n", d, f[d], n[d, "pass"], n[d, "fail"],
    n[d, "refused"], n[d, "reference failed"], n[d, "timeout"] | "sort"
  close("sort")
  printf "| all | %d | %d | %d | %d | %d | %d |\n", tot, all["pass"], all["fail"], all["refused"],
    all["reference failed"], all["timeout"]
}' "$tsv"
echo
echo "## Why files are refused"
echo
echo "| files | reason |"
echo "|---|---|"
awk -F'\t' '$2 == "refused" { print $3 }' "$tsv" | reason | cut -c1-110 | sed 's/|/\\|/g' |
  sort | uniq -c | sort -rn | awk '{ n = $1; $1 = ""; sub(/^ /, ""); printf "| %d | %s |\n", n, $0 }'
echo
echo "## Files that do not pass"
echo
echo "| file | outcome | last line |"
echo "|---|---|---|"
awk -F'\t' '$2 != "pass"' "$tsv" | while IFS=$'\t' read -r file outcome why; do
  printf '| `%s` | %s | %s |\n' "$file" "$outcome" "$(printf '%s' "$why" | reason | cut -c1-140 | sed 's/|/\\|/g')"
done
