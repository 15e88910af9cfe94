#!/usr/bin/env bash
# Session 79, first call, on the landed HEAD (01f889c, whose GPU test file had not run on a GPU). By card:
# on an H200: the attn_dq_wgmma GPU case, then the owed H200 readings of v53 (exp/s78c.sh's H200 branch:
# the 9-round all-flags A/B replayed from graphs, the side-by-side table, 2 rounds); elsewhere: the whole
# `ctest -L gpu -j16` (01f889c's refactored flash tests included).
# bash exp/pack.sh 590 exp/s79a.sh
. "$(dirname "$0")/common.sh"
gpu_head
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  build_gpu -j16 dskc gpu_test_flash_attention
  el "GPU case"
  ( gpu_test dqwg_test.log 120 gpu_test_flash_attention -tc="dQ by attn_dq_wgmma*" )
  graph_matrix 9 300 flags_graph_r9.txt --only "fp16 Pre-LN,all three flags" --no-control
  compare_r3 560 2
else
  build_gpu -j16
  ctest_gpu 16 520 400
fi
el done
