#!/usr/bin/env bash
# Session 39, call 3: the README's side-by-side table on the new default (fused dQ + D in the dK/dV
# kernel): compare_torch (torch eager / torch.compile, each launched from Python and replayed from a
# CUDA graph, dskc no flag and all flags) burst and sustained.
. "$(dirname "$0")/common.sh"
build_gpu -j16 dskc
for wu in 10 300; do
  el "compare_torch, warm-up $wu"
  timeout 250 python3 bench/compare_torch.py --dskc build-gpu/dskc --ln pre --warmup $wu 2>&1 | tee "$OUT/compare_wu$wu.txt" | tail -6
done
el done
