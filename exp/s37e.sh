#!/usr/bin/env bash
# Session 37, call 6: compare_torch with the CUDA-graph columns on by default and torch's gradients
# set to None before each step (no accumulation adds), both states.
. "$(dirname "$0")/common.sh"
build_gpu dskc
for wu in 10 300; do
  el "compare_torch, warm-up $wu"
  timeout 200 python3 bench/compare_torch.py --dskc build-gpu/dskc --ln pre --warmup $wu 2>&1 | tee "$OUT/compare_wu$wu.txt" | tail -6
done
el done
