#!/usr/bin/env bash
# Session 72, third call on the warm H100 (`bash exp/pack.sh 560 exp/s72a.sh`): compare_torch's side-by-side
# table (warm-up 10, 3 rounds; the README's H100 "s72" row pair (1)) on the current main, then the Adam and
# Lamb training profiles (bench/NOTES.md t13).
. "$(dirname "$0")/common.sh"
gpu_head
build_gpu -j16 dskc
compare_r3 300
train_and_table 0
grep -h "step 40/40" "$OUT"/train_*.log | tail -2
el done
