#!/usr/bin/env bash
# Session 50, call 2: v48 as a whole. Nsight Compute step lists at both shapes, 3 alternations of
# old (the module as at the session's start), uni (+ the warpgroup index from lane 0; s50a's base) and
# new (this build: + wgmma descriptors advanced in place, the persistent dK/dV kernel's tile index
# without a division); the two old sources come from exp/s50src (generated on the CPU machine: the
# runtime is unchanged, so they match this build's kernel parameters). Then ctest -L gpu. Run under
# exp/pack.sh.
. "$(dirname "$0")/common.sh"
build_gpu -j16
mkdir -p build-gpu/v50b
for n in 128 512; do
  L=$L128; [ $n = 512 ] && L=$L512
  build-gpu/dskc compile $L --arch sm_90 -o build-gpu/v50b/new_$n.cubin > /dev/null || exit 1
  for k in gemm_inter_fwd attn_flash_bwd_dkdv attn_flash_fwd; do sass_line build-gpu/v50b/new_$n.cubin $k ${n}_new $n new; done
done | tee $OUT/sass_counts.txt
el "ncu A/B"
for r in 1 2 3; do
  for n in 128 512; do
    for v in old uni new; do
      e=""; [ $v != new ] && e="DSKC_OVERRIDE_SOURCE=$PWD/exp/s50src/${v}_$n.cu"
      env_ab $n $v "$e" $r gemm_inter_fwd attn_flash_bwd_dkdv attn_flash_fwd
    done
  done
done | tee $OUT/ab.txt
ctest_gpu 16 $(( 585 - $(date +%s) + t0 )) 290
el done
