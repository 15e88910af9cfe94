#!/usr/bin/env bash
# Session 46, call 3: v44 final form (TMA output stores in the wgmma forward and in the fused-dQ dK/dV
# kernel; the dQ GEMM form keeps its 4-byte stores, slower with TMA in call 2): (1) Nsight Compute
# step lists tma / rows at (16,512) (2 rounds: back to the baseline) and (64,128) (1 round);
# (2) compare_torch burst (the README's side-by-side table); (3) the wgmma flash GPU shards (the
# wgmma backward and forward cases and the new tma-vs-rows bitwise case); (4) compare_torch sustained
# if the time allows. Run under exp/pack.sh.
. "$(dirname "$0")/common.sh"
build_gpu -j16
el "ncu: tma vs rows"
for spec in "512 1" "512 2" "128 1"; do
  set -- $spec
  for v in tma rows; do store_ab $1 $v $2; done
done | tee $OUT/ncu_ab.txt
el "compare_torch, warm-up 10"
timeout 150 python3 bench/compare_torch.py --dskc build-gpu/dskc --ln pre --warmup 10 2>&1 | tee "$OUT/compare_wu10.txt" | tail -12
el "flash GPU shards 9-11"
(cd build-gpu && timeout 200 ctest -R "gpu.test_flash_attention.(9|10|11)" -j3 --timeout 190) > $OUT/ctest_flash.log 2>&1
echo "ctest rc=$?"; grep -E "Test +#|tests passed|tests failed" $OUT/ctest_flash.log
left=$(( 450 - ($(date +%s) - t0) ))
if [ $left -gt 120 ]; then
  el "compare_torch, warm-up 300"
  timeout $left python3 bench/compare_torch.py --dskc build-gpu/dskc --ln pre --warmup 300 2>&1 | tee "$OUT/compare_wu300.txt" | tail -12
fi
el done
