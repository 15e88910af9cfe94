#!/usr/bin/env bash
# Session 51, call 2 (prepared, not run): if exp/s51a.sh shows the kept GELU'(h) faster, the whole GPU
# suite on it, then the side-by-side table with 3 interleaved rounds (medians; the single samples of
# sessions 48-50 put dskc's (64,128) column 3-4% above the same build's matrix). Run under exp/pack.sh.
. "$(dirname "$0")/common.sh"
apply_patch exp/gelu_save_grad.patch
build_gpu -j16
ctest_gpu 16 300 290
el "compare_torch, warm-up 10, 3 rounds"
timeout $(( 585 - $(date +%s) + t0 )) python3 bench/compare_torch.py --dskc build-gpu/dskc --ln pre --warmup 10 \
  --rounds 3 2>&1 | tee "$OUT/compare_wu10_r3.txt" | tail -6
el done
