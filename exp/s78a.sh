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
el "ncu lists"
ncu_lists
el done
