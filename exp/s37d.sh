#!/usr/bin/env bash
# Session 37, call 5: kernel durations of one dskc layer step by Nsight Compute (gpu__time_duration,
# boost clock, caches not flushed; exp/common.sh ncu_step), the same measure torch.profiler gave
# torch.compile's kernels (exp/s37_torch_profile.py), instead of dskc bench --profile's event brackets.
. "$(dirname "$0")/common.sh"
build_gpu dskc
for l in $L128 $L512; do
  el "ncu $l"
  ncu_step "" $l "$(basename $l .json)"
  python3 exp/ncu_step.py "$OUT/ncu_$(basename $l .json).csv"
done
el done
