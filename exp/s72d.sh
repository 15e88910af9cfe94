#!/usr/bin/env bash
# Session 72, the last short H200 call (`bash exp/pack.sh 220 exp/s72d.sh`): compare_torch's
# side-by-side table with 2 rounds (warm-up 10), all the device time left allows after a start.
. "$(dirname "$0")/common.sh"
gpu_head
build_gpu -j16 dskc
el "compare_torch, warm-up 10, 2 rounds"
timeout $(( 215 - $(date +%s) + t0 )) python3 bench/compare_torch.py --dskc build-gpu/dskc --ln pre --warmup 10 \
  --rounds 2 2>&1 | tee "$OUT/compare_wu10_r2.txt" | tail -6
el done
