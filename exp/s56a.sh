#!/usr/bin/env bash
# Session 56 (never ran: the device tool started no machine in time for it): the landed HEAD (v49 in place, review commit ad5f7c6) on the H200: the whole GPU
# suite, then the side-by-side table with 3 interleaved rounds (medians). Run under exp/pack.sh.
. "$(dirname "$0")/common.sh"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/gpu.txt"
build_gpu -j16
ctest_gpu 16 300 290
compare_r3 585
el done
