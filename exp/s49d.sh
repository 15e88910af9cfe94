#!/usr/bin/env bash
# Session 49, call 4: v47 as the default (the persistent clustered attention backward, first form):
# (1) ctest -L gpu, the whole suite; (2) compute-sanitizer racecheck on the persistent cases of
# d64-m128-s65-adc (hazards reported in the dskc kernels, if any; cuBLAS's own are listed apart).
# Run under exp/pack.sh.
. "$(dirname "$0")/common.sh"
build_gpu -j16
ctest_gpu 16 340 330
el "racecheck"
FLASH_TC="persistent clustered attention backward*" flash_sanitize d64-m128-s65-adc racecheck 150
echo "hazards in dskc kernels: $(grep -E 'Race reported' $OUT/san_d64-m128-s65-adc_racecheck.log | grep -vc nvjet)"
el done
