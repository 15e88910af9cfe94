#!/usr/bin/env bash
# Session 50, call 1: v48, the warpgroup index broadcast from lane 0 (sm90::warpgroup_index()):
# (1) SASS of gemm_inter_fwd and attn_flash_bwd_dkdv, as built and as before (exp/s50_variants.py
# old.cu), both layers: instruction, HGMMA and R2UR counts, the listings in $OUT/sass; (2) Nsight
# Compute step lists, 3 alternations old / new at both shapes; (3) ctest -L gpu with the time left. Run under exp/pack.sh.
. "$(dirname "$0")/common.sh"
build_gpu -j16
mkdir -p build-gpu/v50
for n in 128 512; do
  L=$L128; [ $n = 512 ] && L=$L512
  mkdir -p build-gpu/v50/$n
  build-gpu/dskc compile $L --arch sm_90 --emit cuda -o build-gpu/v50/$n/src.cu > /dev/null || exit 1
  python3 exp/s50_variants.py build-gpu/v50/$n/src.cu build-gpu/v50/$n > /dev/null || exit 1
  for v in base old; do
    DSKC_OVERRIDE_SOURCE=$PWD/build-gpu/v50/$n/$v.cu build-gpu/dskc compile $L --arch sm_90 -o build-gpu/v50/$n/$v.cubin > /dev/null || exit 1
    for k in gemm_inter_fwd attn_flash_bwd_dkdv; do sass_line build-gpu/v50/$n/$v.cubin $k ${n}_$v $n $v; done
  done
done | tee $OUT/sass_counts.txt
el "ncu A/B"
for r in 1 2 3; do
  for n in 128 512; do
    for v in old base; do
      env_ab $n $v "DSKC_OVERRIDE_SOURCE=$PWD/build-gpu/v50/$n/$v.cu" $r gemm_inter_fwd attn_flash_bwd_dkdv
    done
  done
done | tee $OUT/ab.txt
ctest_gpu 16 $(( 585 - $(date +%s) + t0 )) 290
el done
