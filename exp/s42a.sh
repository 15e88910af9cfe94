#!/usr/bin/env bash
# Session 42, call 1, on HEAD: the full GPU suite, then where a default step's kernel time goes (Nsight
# Compute, one step, both shapes) and the attention kernels' speed-of-light / occupancy / warp-state
# sections at both shapes (are they memory-, latency- or issue-bound?).
. "$(dirname "$0")/common.sh"
build_gpu -j16
ctest_gpu 16 300 290
el "kernel sums"
for L in $L128 $L512; do
  T=$(basename $L .json)
  ncu_step "" $L def_$T
  python3 exp/ncu_step.py "$OUT/ncu_def_$T.csv" > "$OUT/kernels_def_$T.txt"
done
el "attention sections"
for L in $L128 $L512; do
  T=$(basename $L .json)
  timeout 150 $NCU -k regex:attn_flash --launch-skip 4 --launch-count 4 --cache-control none --clock-control none \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
    --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section SchedulerStats \
    build-gpu/dskc bench $L --warmup 2 --iters 1 > "$OUT/attn_sections_$T.txt" 2>&1
  echo "$T rc=$?"
done
el done
