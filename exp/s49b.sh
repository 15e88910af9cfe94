#!/usr/bin/env bash
# Session 49, call 2: v47 (b), the persistent kernel with its next-head loads and the share hand-over
# moved behind the second step's dV/dK products: (1) the bitwise case against a cluster per head;
# (2) Nsight Compute step lists at (64,128), off / on, 2 alternations default + 1 all flags
# (attn_flash_bwd_dkdv and the sum); (3) ctest -L gpu, the whole suite, with DSKC_ATTN_BWD_PERSIST=on
# for every layer that does not set it itself; (4) a 3-round burst matrix A/B at (64,128).
# Run under exp/pack.sh.
. "$(dirname "$0")/common.sh"
build_gpu -j16
el "persist vs grid"
gpu_test persist.log 300 gpu_test_flash_attention -tc="persistent clustered attention backward*"
el "ncu A/B"
for r in 1 2 3; do
  for fl in def all; do
    [ $fl = all ] && [ $r != 1 ] && continue
    for v in off on; do
      kernel_line "DSKC_ATTN_BWD_PERSIST=$v" $L128 $fl l128_${fl}_${v}_$r attn_flash_bwd_dkdv 128 $fl $v $r
    done
  done
done | tee $OUT/ab.txt
DSKC_ATTN_BWD_PERSIST=on ctest_gpu 16 340 330
el "matrix"
timeout 150 python3 bench/layer_matrix.py --dskc build-gpu/dskc --rounds 3 --warmup 10 --shapes 64x128 \
  --only "fp16 Pre-LN,persist" --env "persist:DSKC_ATTN_BWD_PERSIST=on" 2>&1 | tee "$OUT/matrix.txt"
el done
