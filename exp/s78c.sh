#!/usr/bin/env bash
# Session 78, after attn_dq_wgmma became the default (v53). By card:
# on an H200: the owed 9-round A/B of all three memory flags against no flag replayed from CUDA graphs
# (both shapes), the side-by-side table (2 rounds) and Nsight Compute step lists (default / all flags,
# both shapes); elsewhere: the dQ GEMM A/B at (16,512) with more rounds (DSKC_ATTN_DQ_GEMM=cublas
# against the default), launched and replayed.
# First the attn_dq_wgmma GPU case (after 857f4b0's launch refactor).
# bash exp/pack.sh 520 exp/s78c.sh [FLAGS_END [COMPARE_END]]
. "$(dirname "$0")/common.sh"
gpu_head
build_gpu -j16 dskc gpu_test_flash_attention
el "GPU case"
( gpu_test dqwg_test.log 120 gpu_test_flash_attention -tc="dQ by attn_dq_wgmma*" )
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  graph_matrix 9 "${1:-230}" flags_graph_r9.txt --only "fp16 Pre-LN,all three flags" --no-control
  compare_r3 "${2:-450}" 2
  ncu_lists
else
  E=(--env "dq cublas@fp16 Pre-LN:DSKC_ATTN_DQ_GEMM=cublas")
  launched_matrix 15 230 dq_r15.txt --shapes 16x512 --only "fp16 Pre-LN,dq cublas" --no-control "${E[@]}"
  graph_matrix 15 390 dq_graph_r15.txt --shapes 16x512 --only "fp16 Pre-LN,dq cublas" --no-control "${E[@]}"
fi
el done
