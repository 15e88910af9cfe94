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
  python3 exp/ncu_step.py "$OUT/ncu_$(basename $l .json).csv"
done
el done
