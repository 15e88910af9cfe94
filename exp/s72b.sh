#!/usr/bin/env bash
# Session 72 (`bash exp/pack.sh 420 exp/s72b.sh`; asked for an H200, ran on the H100 already held):
# exp/s70a.sh (the memory flags at (16,512) under idle 0/3 s x 30/50 timed iterations: its run B in
# bench/NOTES.md t13, which showed no effect of the setting), then compare_torch's side-by-side table
# (warm-up 10, 3 rounds; the README's H100 "s72" row pair (2)).
. "$(dirname "$0")/common.sh"
gpu_head
bash exp/s70a.sh
compare_r3 400
el done
