#!/usr/bin/env bash
# Ran on a tree with exp/gemm_cluster.patch applied, at its state then (bench/NOTES.md v32); the
# DSKC_TMP_* hooks were throwaway code that neither the patch nor main keeps.
# Session 35: why DSKC_GEMM_CLUSTER=2 doubles gemm_sm90's time: ncu of gemm_qkv_fwd, cluster 1 vs 2.
. "$(dirname "$0")/common.sh"
build_gpu dskc
for v in 1 2; do
  el "ncu cluster=$v"
  DSKC_GEMM_CLUSTER=$v timeout 200 $NCU --section SpeedOfLight --section WarpStateStats --section LaunchStats --section Occupancy \
    --section MemoryWorkloadAnalysis --section SchedulerStats -k "regex:gemm_qkv_fwd" -c 1 \
    build-gpu/dskc bench $L128 --iters 1 --warmup 0 > "$OUT/ncu_c$v.txt" 2>&1
  echo "rc=$?"
  grep -E "Duration|SM Frequency|Compute \(SM\) Throughput|Memory Throughput|Cluster|Grid Size|Stall|Warp Cycles Per Issued|Issued Warp|No Eligible|Achieved Occupancy|L2 Hit|Waves" "$OUT/ncu_c$v.txt" | head -40
done
el done
