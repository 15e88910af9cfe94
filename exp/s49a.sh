#!/usr/bin/env bash
# Session 49, call 1: the persistent clustered attention backward (DSKC_ATTN_BWD_PERSIST, v47):
# (1) its bitwise GPU case against a cluster per head; (2) compute-sanitizer racecheck / memcheck on
# two persistent cases; (3) Nsight Compute step lists at (64,128), default and all flags, off / on
# (attn_flash_bwd_dkdv and the sum); (4) a 3-round burst matrix A/B at (64,128). Run under exp/pack.sh.
. "$(dirname "$0")/common.sh"
build_gpu -j16
el "persist vs grid"
gpu_test persist.log 300 gpu_test_flash_attention -tc="persistent clustered attention backward*"
el "sanitizers"
FLASH_TC="persistent clustered attention backward*" flash_sanitize d64-s128 racecheck 120
FLASH_TC="persistent clustered attention backward*" flash_sanitize d64-m128-s50 memcheck 120
el "ncu A/B"
for r in 1; do
  for fl in def all; do
    for v in off on; do
      kernel_line "DSKC_ATTN_BWD_PERSIST=$v" $L128 $fl l128_${fl}_${v}_$r attn_flash_bwd_dkdv 128 $fl $v $r
    done
  done
done | tee $OUT/ab.txt
el "matrix"
timeout 200 python3 bench/layer_matrix.py --dskc build-gpu/dskc --rounds 3 --warmup 10 --shapes 64x128 \
  --only "fp16 Pre-LN,persist" --env "persist:DSKC_ATTN_BWD_PERSIST=on" 2>&1 | tee "$OUT/matrix.txt"
el done
