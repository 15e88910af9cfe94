#!/usr/bin/env bash
# Cold (empty cache) and warm (cache hit) JIT compile time of a whole layer module through the
# CLI, as a user sees it: `dskc compile` wall time, median of N runs. Usage:
#   bash bench/compile_time.sh [build/dskc] [layer.json] [runs]
set -euo pipefail
DSKC=${1:-build/dskc}
LAYER=${2:-examples/bert_large_layer.json}
N=${3:-5}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
now() { date +%s.%N; }
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
cold=() warm=()
for i in $(seq "$N"); do
  rm -rf "$tmp/cache"
  t0=$(now); DSKC_CACHE_DIR=$tmp/cache "$DSKC" compile "$LAYER" -o "$tmp/m.cubin" --quiet --arch sm_90; t1=$(now)
  cold+=("$(echo "($t1 - $t0) * 1000" | bc -l)")
  t0=$(now); DSKC_CACHE_DIR=$tmp/cache "$DSKC" compile "$LAYER" -o "$tmp/m.cubin" --quiet --arch sm_90; t1=$(now)
  warm+=("$(echo "($t1 - $t0) * 1000" | bc -l)")
done
printf "| layer | machine | cold compile ms (median of %d) | warm (cache hit) ms |\n|---|---|---:|---:|\n" "$N"
printf "| %s | %s cores | %.0f | %.0f |\n" "$(basename "$LAYER")" "$(nproc)" \
  "$(printf '%s\n' "${cold[@]}" | median)" "$(printf '%s\n' "${warm[@]}" | median)"
