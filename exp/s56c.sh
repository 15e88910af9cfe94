#!/usr/bin/env bash
# Session 56: the side-by-side table of the landed HEAD alone (3 interleaved rounds, medians), for
# when the device time left does not fit exp/s56a.sh's GPU suite as well. Run under exp/pack.sh.
. "$(dirname "$0")/common.sh"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/gpu.txt"
build_gpu -j16 dskc
el "compare_torch, warm-up 10, 3 rounds"
timeout $(( ${LIMIT:-330} - $(date +%s) + t0 )) python3 bench/compare_torch.py --dskc build-gpu/dskc --ln pre \
  --warmup 10 --rounds 3 2>&1 | tee "$OUT/compare_wu10_r3.txt" | tail -6
el done
