#!/usr/bin/env bash
# Session 72, second warm call on an H100 (`bash exp/pack.sh 560 exp/s72a.sh`): compare_torch's side-by-side
# table (warm-up 10, 3 rounds) on the current main, then the Adam and Lamb training profiles.
. "$(dirname "$0")/common.sh"
gpu_head
build_gpu -j16 dskc
compare_r3 300
train_and_table 0
grep -h "step 40/40" "$OUT"/train_*.log | tail -2
el done
