#!/usr/bin/env bash
# Session 48, call 6: compare_torch sustained (warm-up 300) on the final code, the second half of the
# README's s48 side-by-side rows. Run under exp/pack.sh.
. "$(dirname "$0")/common.sh"
build_gpu dskc
el "compare_torch, warm-up 300"
timeout 400 python3 bench/compare_torch.py --dskc build-gpu/dskc --ln pre --warmup 300 2>&1 | tee "$OUT/compare_wu300.txt" | tail -14
el done
