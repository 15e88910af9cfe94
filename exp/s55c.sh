#!/usr/bin/env bash
# Session 55, call 3 (not run: the device tool started no H200 in four tries and the session's device
# time ran low): the side-by-side table of the landed code on the H200. Run under exp/pack.sh.
. "$(dirname "$0")/common.sh"
build_gpu -j16
el "compare_torch, warm-up 10, 3 rounds"
timeout $(( 480 - $(date +%s) + t0 )) python3 bench/compare_torch.py --dskc build-gpu/dskc --ln pre --warmup 10 \
  --rounds 3 2>&1 | tee "$OUT/compare_wu10_r3.txt" | tail -6
el done
