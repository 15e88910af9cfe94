#!/usr/bin/env bash
# Session 38, call 2: DSKC_ATTN_DQ=fused (dQ inside the wgmma dK/dV kernel at S <= 128, no dSᵀ round
# trip, no dQ GEMM). Correctness first (the wgmma flash-attention GPU cases incl. the fused variant,
# memcheck + racecheck on two small fused cases), then the one-stream kernel sums (ncu) and a burst /
# sustained wall A/B at (64,128). Prediction: dkdv +0.005-0.01 ms, dQ GEMM -0.022 ms: sum -0.012 to -0.017.
. "$(dirname "$0")/common.sh"
build_gpu dskc gpu_test_flash_attention
el "flash wgmma tests"
timeout 300 build-gpu/tests/gpu_test_flash_attention -tc="fused attention backward on warpgroup MMA*" > "$OUT/test_flash_wg.log" 2>&1
rc=$?; echo "rc=$rc"; grep -E "fused dQ|test cases|assertions" "$OUT/test_flash_wg.log" | head -40
[ $rc = 0 ] || { grep -B3 -A8 "ERROR" "$OUT/test_flash_wg.log" | head -80; exit 1; }
el "sanitizers"
for case in d64-m128-s50 d64-s127-nodrop; do
  tools="memcheck"; [ $case = d64-m128-s50 ] && tools="memcheck racecheck"
  for tool in $tools; do flash_sanitize $case $tool 150 DSKC_ATTN_DQ=fused; done
done
el "kernel sums"
for l in $L128; do
  s=$(basename $l .json)
  ncu_step "" $l ${s}_default
  ncu_step "DSKC_ATTN_DQ=fused" $l ${s}_dq_fused
  ncu_step "DSKC_ATTN_DQ=fused" $l ${s}_dq_fused_all --attention_dropout_checkpoint --normalize_invertible --gelu_checkpoint
  ncu_step "" $l ${s}_all --attention_dropout_checkpoint --normalize_invertible --gelu_checkpoint
done
for f in default dq_fused; do echo "-- $f"; python3 exp/ncu_step.py $OUT/ncu_bert_large_layer_$f.csv | grep -E "attn|dot|sum"; done
el "A/B burst"
ab_matrix "dq fused" "DSKC_ATTN_DQ=fused" 3 10 ab_burst.log | tail -8
el "A/B sustained"
ab_matrix "dq fused" "DSKC_ATTN_DQ=fused" 2 300 ab_sustained.log | tail -8
el done
