#!/usr/bin/env bash
# Session 74: the 9-round A/B of all three memory flags against no flag, replayed from CUDA graphs, both
# shapes (on an H100 in session 74: +2.2% / +1.6%; bench/NOTES.md t15), then (time allowing, END seconds
# after the start, default 250) the side-by-side table with 2 rounds on an H200.
# bash exp/pack.sh LIMIT exp/s74a.sh [END]
. "$(dirname "$0")/common.sh"
gpu_head
build_gpu -j16 dskc
graph_matrix 9 170 flags_graph_r9.txt --only "fp16 Pre-LN,all three flags" --no-control
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then compare_r3 "${1:-250}" 2; fi
el done
