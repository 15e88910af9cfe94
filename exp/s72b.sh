#!/usr/bin/env bash
# Session 72, for an H200 (`bash exp/pack.sh 420 exp/s72b.sh`): exp/s70a.sh (the memory flags at (16,512)
# under idle 0/3 s x 30/50 timed iterations; on session 72's H100 the 50-iteration runs read the flags
# at +4.4/+6.6% against +2.9/+3.3% at 30), then compare_torch's side-by-side table (warm-up 10, 3 rounds).
. "$(dirname "$0")/common.sh"
gpu_head
bash exp/s70a.sh
compare_r3 400
el done
