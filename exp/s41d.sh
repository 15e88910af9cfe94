#!/usr/bin/env bash
# Session 41, call 4, on the final code (the own scratch only with normalize_invertible: attn_residual):
# the layer behaviour GPU suite (flags bitwise vs no flag, two streams bitwise vs one, with fp16 / fp32
# gelu_checkpoint and all-flags cases), then 3 alternating two-stream timelines of all three flags,
# own vs shared, at both shapes (the walls of the timeline runs: events around every step).
. "$(dirname "$0")/common.sh"
build_gpu -j16 dskc gpu_test_layer_behaviour
el "layer behaviour"
gpu_test layer_behaviour.log 200 gpu_test_layer_behaviour
el timelines
for L in $L128 $L512; do
  for r in 1 2 3; do
    for v in own shared; do timeline_all DSKC_GELU_CKPT_SCRATCH=$v $L "$(basename $L .json)_${v}_$r"; done
  done
done | tee $OUT/timelines.txt
el done
