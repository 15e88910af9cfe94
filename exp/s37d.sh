#!/usr/bin/env bash
# Session 37, call 5: kernel durations of one dskc layer step by Nsight Compute (gpu__time_duration,
# boost clock, caches not flushed), the same measure torch.profiler gave torch.compile's kernels
# (exp/s37_torch_profile.py), instead of dskc bench --profile's event brackets.
. "$(dirname "$0")/common.sh"
build_gpu dskc
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "ncu: $NCU"
for l in $L128 $L512; do
  el "ncu $l"
  timeout 200 $NCU --csv --metrics gpu__time_duration.sum --cache-control none --clock-control none \
    build-gpu/dskc bench $l --warmup 2 --iters 1 > "$OUT/ncu_$(basename $l .json).csv" 2> "$OUT/ncu_err.txt"
  python3 - "$OUT/ncu_$(basename $l .json).csv" <<'PY'
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
head, rows = rows[0], rows[1:]
k, g, v = head.index("Kernel Name"), head.index("Grid Size"), head.index("Metric Value")
rows = [(r[k], r[g], float(r[v].replace(",", "")) / 1e6) for r in rows]
step = rows[-(len(rows) // 3):]  # the last of the 3 steps (2 warm-up, 1 timed)
print(f"{len(rows)} launches; last {len(step)}:")
tot = 0
for name, grid, ms in step:
    tot += ms
    print(f"  {ms:8.4f}  {grid:>14}  {name[:100]}")
print(f"  {tot:8.4f}  sum")
PY
done
el done
