#!/usr/bin/env bash
# Session 78, by card. On an H200: the owed 9-round A/B of all three memory flags against no flag,
# replayed from CUDA graphs, both shapes (H100 readings t15–t18: +2.2/+1.6, +1.4/+2.6, +1.5/+3.3 %),
# the side-by-side table (2 rounds), then Nsight Compute kernel lists of one step (default and all
# three flags, both shapes: the "where the time goes" table of bench/NOTES.md, last taken at v10).
# On any other card only the kernel lists.
# bash exp/pack.sh 580 exp/s78a.sh [FLAGS_END [COMPARE_END]]   (seconds after the start; 210, 430)
. "$(dirname "$0")/common.sh"
gpu_head
build_gpu -j16 dskc
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  graph_matrix 9 "${1:-210}" flags_graph_r9.txt --only "fp16 Pre-LN,all three flags" --no-control
  compare_r3 "${2:-430}" 2
fi
for n in 128 512; do
  L=$L128; [ $n = 512 ] && L=$L512
  for fl in def all; do
    el "ncu list $n $fl"
    ncu_step "" $L ${fl}_$n $( [ $fl = all ] && echo $FL_ALL )
    python3 exp/ncu_step.py "$OUT/ncu_${fl}_$n.csv" > "$OUT/kernels_${fl}_$n.txt" 2>&1
    rm -f "$OUT/ncu_${fl}_$n.csv"
  done
done
el done
