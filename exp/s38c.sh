#!/usr/bin/env bash
# Session 38, call 3: DSKC_ATTN_DQ=fused with the two 64-key halves as a cluster of two one-warpgroup
# blocks (2 blocks per SM, dQ share by a distributed-shared-memory store), the default under
# DSKC_ATTN_BWD=wgmma; wgmma2 keeps the two-warpgroup block (call 2: dkdv 0.0825 ms vs 0.0564 + the
# dQ GEMM 0.022). Prediction: clustered dkdv ~0.065 ms, kernel sum -0.01 ms.
. "$(dirname "$0")/common.sh"
build_gpu dskc gpu_test_flash_attention
el "flash wgmma tests"
timeout 300 build-gpu/tests/gpu_test_flash_attention -tc="fused attention backward on warpgroup MMA*" > "$OUT/test_flash_wg.log" 2>&1
rc=$?; echo "rc=$rc"; grep -E "fused dQ: dQ|test cases|assertions" "$OUT/test_flash_wg.log" | head -40
[ $rc = 0 ] || { grep -B3 -A8 "ERROR" "$OUT/test_flash_wg.log" | head -80; exit 1; }
el "sanitizers"
for case in d64-m128-s50 d64-s127-nodrop; do
  for tool in memcheck racecheck; do flash_sanitize $case $tool 150; done
done
el "kernel sums"
l=$L128; s=$(basename $l .json)
ncu_step "" $l ${s}_default
ncu_step "DSKC_ATTN_DQ=fused" $l ${s}_dq_fused
ncu_step "DSKC_ATTN_DQ=fused DSKC_ATTN_BWD=wgmma2" $l ${s}_dq_fused_wg2
ncu_step "DSKC_ATTN_BWD=wgmma2" $l ${s}_wg2
for f in default dq_fused dq_fused_wg2 wg2; do echo "-- $f"; python3 exp/ncu_step.py $OUT/ncu_${s}_$f.csv | grep -E "attn_flash_bwd|gemm.*(128|8, 1024|1024, 1)|sum"; done
el "A/B burst"
ab_matrix "dq fused" "DSKC_ATTN_DQ=fused" 3 10 ab_burst.log | tail -8
el "A/B sustained"
ab_matrix "dq fused" "DSKC_ATTN_DQ=fused" 2 300 ab_sustained.log | tail -8
el done
