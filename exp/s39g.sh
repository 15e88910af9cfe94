#!/usr/bin/env bash
# Prepared in session 39 after its device time was spent (never run on a GPU): exp/dot_obar.patch gives
# each O tile of the fused dK/dV/dQ kernel's D sums its own mbarrier (v36 put O on the stage barrier,
# so the step's first products waited for three tiles instead of two). Applied here; its GPU cases,
# racecheck on a two-tile case, then the kernel sums. Land it (git apply, commit) only if all pass.
# Prediction: attn_flash_bwd_dkdv 0.0839 -> ~0.076-0.078 ms at (64,128) (most of v36's +0.0098 was
# the wait for O), so dkdv alone ~0.006-0.008 below v35's dkdv + dot.
. "$(dirname "$0")/common.sh"
git apply exp/dot_obar.patch || { echo "patch does not apply"; exit 1; }
build_gpu -j16 dskc gpu_test_flash_attention
el "flash wgmma tests"
gpu_test test_flash_wg.log 300 gpu_test_flash_attention -tc="fused attention backward on warpgroup MMA*"
el "racecheck"
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for case in d64-m128-s50 d64-s127-nodrop; do
  DSKC_FLASH_CASE=$case timeout 150 $cs --tool racecheck --error-exitcode 9 \
    build-gpu/tests/gpu_test_flash_attention -tc="fused attention backward on warpgroup MMA*" > "$OUT/race_$case.log" 2>&1
  echo "$case rc=$? $(grep -E 'RACECHECK SUMMARY' "$OUT/race_$case.log" | tail -1)"
done
el "kernel sums"
for l in $L128; do
  ncu_step "" $l obar_default
  python3 exp/ncu_step.py $OUT/ncu_obar_default.csv | grep -E "attn|sum"
done
el done
