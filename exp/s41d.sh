#!/usr/bin/env bash
# Session 41, call 4, on the final code (the own scratch only with normalize_invertible: attn_residual):
# the layer behaviour GPU suite (flags bitwise vs no flag, two streams bitwise vs one, with fp16 / fp32
# gelu_checkpoint and all-flags cases), then 3 alternating two-stream timelines of all three flags,
# own vs shared, at both shapes (the walls of the timeline runs: events around every step).
. "$(dirname "$0")/common.sh"
build_gpu -j16 dskc gpu_test_layer_behaviour
el "layer behaviour"
gpu_test layer_behaviour.log 200 gpu_test_layer_behaviour
FL="--attention_dropout_checkpoint --normalize_invertible --gelu_checkpoint"
el timelines
for L in $L128 $L512; do
  for r in 1 2 3; do
    for v in own shared; do
      w=$(DSKC_GELU_CKPT_SCRATCH=$v timeout 60 build-gpu/dskc bench $L $FL --warmup 20 --iters 20 --timeline 2>&1 |
        grep -oE "wall [0-9.]+ ms: main stream busy [0-9.]+ \(idle [0-9.]+\)")
      echo "$(basename $L) $v $w"
    done
  done
done | tee $OUT/timelines.txt
el done
