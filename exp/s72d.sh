#!/usr/bin/env bash
# Session 72, the last short H200 call (`bash exp/pack.sh 215 exp/s72d.sh`, ran on an H200: bench/NOTES.md
# t13, the README's H200 "s72" rows): compare_torch's side-by-side table with 2 rounds (warm-up 10), all
# the device time left allowed after a start.
. "$(dirname "$0")/common.sh"
gpu_head
build_gpu -j16 dskc
compare_r3 215 2
el done
