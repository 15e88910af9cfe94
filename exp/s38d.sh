#!/usr/bin/env bash
# Session 38, call 4: DSKC_ATTN_DQ=fused as the default (clusters of two blocks at S <= 128 on Hopper):
# every GPU test, then the new default against the dQ GEMM (DSKC_ATTN_DQ=gemm) by kernel sums and a
# burst wall A/B.
. "$(dirname "$0")/common.sh"
build_gpu
ctest_gpu
el "kernel sums"
l=$L128; s=$(basename $l .json)
ncu_step "" $l ${s}_default
ncu_step "DSKC_ATTN_DQ=gemm" $l ${s}_dq_gemm
ncu_step "" $l ${s}_all --attention_dropout_checkpoint --normalize_invertible --gelu_checkpoint
ncu_step "" $L512 bert_large_layer_seq512_default
python3 exp/ncu_step.py $OUT/ncu_${s}_default.csv | grep -E "attn_flash_bwd|sum"
if [ $(( $(date +%s) - t0 )) -lt 300 ]; then
  el "A/B burst"
  ab_matrix "dq gemm" "DSKC_ATTN_DQ=gemm" 3 10 ab_burst.log | tail -8
fi
el done
