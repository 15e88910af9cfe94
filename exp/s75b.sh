#!/usr/bin/env bash
# Session 75, second call: exp/regen_priority.patch's LayerNorm re-run placements replayed from CUDA graphs
# (9 rounds, both shapes), then launched with the output_b column sum left next to its weight gradient
# (DSKC_OUTPUT_BIAS_EARLY=0) as well (9 rounds, both shapes), and its bitwise two-stream check.
# bash exp/pack.sh LIMIT exp/s75b.sh [END]
. "$(dirname "$0")/common.sh"
gpu_head
apply_patch exp/regen_priority.patch
build_gpu -j16 dskc tests/gpu_test_layer_behaviour
export DSKC_OUTPUT_BIAS_EARLY=0 DSKC_LAYER_REGEN=dgrad
gpu_test streams_nob.txt 150 gpu_test_layer_behaviour -tc="backward on two streams*"
unset DSKC_OUTPUT_BIAS_EARLY DSKC_LAYER_REGEN
V="fp16 Pre-LN,all three flags,flags dgrad,flags main"
E=(--env "flags dgrad@all three flags:DSKC_LAYER_REGEN=dgrad" --env "flags main@all three flags:DSKC_LAYER_REGEN=main")
graph_matrix 9 $(( ${1:-400} / 2 )) regen_graph_r9.txt --only "$V" --no-control "${E[@]}"
launched_matrix 9 "${1:-400}" regen_r9.txt --only "$V,flags dgrad nob" --no-control "${E[@]}" \
  --env "flags dgrad nob@all three flags:DSKC_LAYER_REGEN=dgrad,DSKC_OUTPUT_BIAS_EARLY=0"
el done
