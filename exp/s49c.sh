#!/usr/bin/env bash
# Session 49, call 3: v47 (c), the persistent kernel back in its first form (the next head's loads and
# the share hand-over before the second step's softmax): (1) the bitwise case against a cluster per
# head; (2) Nsight Compute step lists at (64,128), 3 alternations: off / on / `late` (exp/s49_variants.py:
# the loads issued after the second step's dV/dK products; DSKC_OVERRIDE_SOURCE). Run under exp/pack.sh.
. "$(dirname "$0")/common.sh"
build_gpu -j16
el "persist vs grid"
gpu_test persist.log 300 gpu_test_flash_attention -tc="persistent clustered attention backward*"
mkdir -p build-gpu/v49
DSKC_ATTN_BWD_PERSIST=on build-gpu/dskc compile $L128 --arch sm_90 --emit cuda -o build-gpu/v49/src128.cu > /dev/null || exit 1
python3 exp/s49_variants.py build-gpu/v49/src128.cu build-gpu/v49 || exit 1
el "ncu A/B"
for r in 1 2 3; do
  for v in off on late; do
    e="DSKC_ATTN_BWD_PERSIST=$v"
    [ $v = late ] && e="DSKC_ATTN_BWD_PERSIST=on DSKC_OVERRIDE_SOURCE=$PWD/build-gpu/v49/late.cu"
    kernel_line "$e" $L128 def l128_${v}_$r attn_flash_bwd_dkdv 128 $v $r
  done
done | tee $OUT/ab.txt
el done
