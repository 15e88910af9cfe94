#!/usr/bin/env bash
# Prepared in session 37 for the next GPU session (~3 min): the one-stream kernel-time sum of a layer
# step (Nsight Compute, exp/ncu_step.py) for the default and the implementation options that earlier
# wall-time A/Bs could not tell apart from the ±1-2% spread (bench/NOTES.md v34: the wall is close to
# this sum, which has no run-to-run spread). An option whose sum is lower by more than ~0.01 ms is
# then worth a 5-round wall A/B (ab_matrix).
. "$(dirname "$0")/common.sh"
build_gpu dskc
for l in $L128 $L512; do
  s=$(basename $l .json)
  el "kernel sums, $s"
  ncu_step "" $l ${s}_default
  ncu_step "" $l ${s}_default_again
  ncu_step "DSKC_FFN_GEMM=sm90" $l ${s}_ffn_sm90
  ncu_step "DSKC_LINEAR_GEMM=sm90" $l ${s}_linear_sm90
  ncu_step "DSKC_LINEAR_GEMM=sm90 DSKC_OUTPUT_GEMM=fused" $l ${s}_output_fused
  ncu_step "DSKC_BIAS_GRAD=epilogue" $l ${s}_bias_epilogue
  ncu_step "" $l ${s}_post_ln --post_layer_norm
  ncu_step "" $l ${s}_all_flags --attention_dropout_checkpoint --normalize_invertible --gelu_checkpoint
done
el done
