#!/usr/bin/env bash
# Session 77: what the device time left after s77a allowed: all three flags against no flag replayed from
# CUDA graphs at both shapes, as many of 9 interleaved rounds as END seconds allow (bench/NOTES.md t15/t16).
# bash exp/pack.sh LIMIT exp/s77b.sh [END]
. "$(dirname "$0")/common.sh"
gpu_head
build_gpu -j16 dskc
graph_matrix 9 "${1:-110}" flags_graph_r9.txt --only "fp16 Pre-LN,all three flags" --no-control
el done
