#!/usr/bin/env bash
# Session 46, call 2: v44, the wgmma attention kernels' outputs by TMA stores (DSKC_ATTN_STORE=tma, the
# default) against the 4-byte stores from the accumulator layout (rows; s46a: the dK/dV kernel −25%
# without any stores at (64,128)). (1) Nsight Compute step lists, tma / rows alternating, 3 rounds at
# both shapes (attn_flash_fwd, attn_flash_bwd_dkdv and the sum); (2) burst layer A/B, 3 rounds;
# (3) compute-sanitizer memcheck + racecheck of the new bitwise test on two cases; (4) ctest -L gpu
# (the new test case included). Run under exp/pack.sh.
. "$(dirname "$0")/common.sh"
build_gpu -j16
el "ncu: tma vs rows"
for r in 1 2 3; do
  for n in 128 512; do for v in tma rows; do store_ab $n $v $r; done; done
done | tee $OUT/ncu_ab.txt
el "burst A/B, 3 rounds"
timeout 150 python3 bench/layer_matrix.py --dskc build-gpu/dskc --rounds 3 --only "fp16 Pre-LN,rows" \
  --env "rows:DSKC_ATTN_STORE=rows" 2>&1 | tee $OUT/ab.txt | tail -8
el "sanitizers"
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for cs in "d64-m128-s50 memcheck" "d64-s509 memcheck" "d64-m128-s65-adc racecheck"; do
  set -- $cs
  DSKC_FLASH_CASE=$1 timeout 100 $CS --tool $2 --error-exitcode 9 build-gpu/tests/gpu_test_flash_attention \
    -tc="wgmma attention kernels: outputs stored by TMA*" > $OUT/san_$1_$2.log 2>&1
  echo "$1 $2 rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/san_$1_$2.log | tail -1) $(grep -E 'assertions' $OUT/san_$1_$2.log | tail -1)"
done
ctest_gpu 16 $(( 560 - ($(date +%s) - t0) )) 300
el done
