#!/usr/bin/env bash
# Session 79 (v54): the backward's gemm_sm90 data gradient reads output_w as stored (N-major B,
# DSKC_SM90_WEIGHT=in_place) instead of output_wᵀ from transpose_output_w (transpose, the default before v54).
# 1. the new GPU case (in_place bitwise the transpose form, which the gemm_sm90 cases had checked against
#    cuBLASLt);
# 2. Nsight Compute step lists, in_place vs transpose, both shapes, two alternations (gemm_output_dgrad,
#    transpose_output_w, sum);
# 3. the graph-replayed layer A/B, both shapes, ROUNDS interleaved rounds (default 5), to END s (440);
# 4. if time is left, the attn_dq_wgmma flash case (01f889c's refactored test file).
# bash exp/pack.sh 560 exp/s79b.sh [ROUNDS [END]]
. "$(dirname "$0")/common.sh"
gpu_head
build_gpu -j16 dskc gpu_test_layer_numerics gpu_test_flash_attention
el "GPU cases"
( gpu_test weight_test.log 150 gpu_test_layer_numerics -tc="gemm_sm90 data gradients on the weights as stored*" )
el "ncu A/B"
for r in 1 2; do
  for n in 128 512; do
    env_ab $n in_place "DSKC_SM90_WEIGHT=in_place" $r gemm_output_dgrad transpose_output_w
    env_ab $n transpose "DSKC_SM90_WEIGHT=transpose" $r gemm_output_dgrad transpose_output_w
  done
done | tee "$OUT/ncu_ab.txt"
graph_matrix "${1:-5}" "${2:-440}" weight_graph.txt --only "fp16 Pre-LN,in_place" --no-control \
  --env "in_place@fp16 Pre-LN:DSKC_SM90_WEIGHT=in_place"
el "flash case"
( gpu_test dqwg_test.log 100 gpu_test_flash_attention -tc="dQ by attn_dq_wgmma*" )
el done
