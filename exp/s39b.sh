#!/usr/bin/env bash
# Session 39, call 2: D = rowsum(dO ⊙ O) inside the clustered wgmma dK/dV kernel (attn_dot_in_dkdv, with
# the fused dQ now the default): every GPU test, memcheck + racecheck on small fused cases, then the
# one-stream kernel sums at both shapes, no flag and all flags.
# Prediction: attn_flash_bwd_dot (0.0118 ms) goes, dkdv +0.001-0.003 ms: sum -0.009 to -0.011 at (64,128).
. "$(dirname "$0")/common.sh"
build_gpu -j16
ctest_gpu 16 300 290
el "sanitizers"
for run in "d64-m128-s50 memcheck" "d64-m128-s50 racecheck" "d64-s127-nodrop memcheck" "d64-m128-s65-adc racecheck"; do
  flash_sanitize $run
done
el "kernel sums"
for l in $L128 $L512; do
  s=$(basename $l .json)
  ncu_step "" $l ${s}_default
  ncu_step "" $l ${s}_all --attention_dropout_checkpoint --normalize_invertible --gelu_checkpoint
done
python3 exp/ncu_step.py $OUT/ncu_bert_large_layer_default.csv | grep -E "attn|sum"
el done
