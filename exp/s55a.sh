#!/usr/bin/env bash
# Session 55, call 1: the GELU'(h) patch with its fixed bias-gradient test (exp/s54a.sh found the
# partials case comparing two FFN paths): the whole GPU suite, then the side-by-side table with 3
# interleaved rounds (medians), as exp/s51b.sh. Run under exp/pack.sh. (The patch landed after this call; exp/gelu_save_grad.patch is gone.)
. "$(dirname "$0")/common.sh"
apply_patch exp/gelu_save_grad.patch
build_gpu -j16
ctest_gpu 16 300 290
el "compare_torch, warm-up 10, 3 rounds"
timeout $(( 585 - $(date +%s) + t0 )) python3 bench/compare_torch.py --dskc build-gpu/dskc --ln pre --warmup 10 \
  --rounds 3 2>&1 | tee "$OUT/compare_wu10_r3.txt" | tail -6
el done
