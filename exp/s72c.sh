#!/usr/bin/env bash
# Session 72, short H200 call (`bash exp/pack.sh 330 exp/s72c.sh`): compare_torch's side-by-side table
# (warm-up 10, 3 rounds) first, then exp/s70a.sh's idle x iterations crossing if the limit leaves time.
. "$(dirname "$0")/common.sh"
gpu_head
build_gpu -j16 dskc
compare_r3 320
bash exp/s70a.sh
el done
