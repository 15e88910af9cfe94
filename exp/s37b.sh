#!/usr/bin/env bash
# Session 37, call 2 (~8 min): burst profiles of the default at both shapes, then compare_torch with
# --graphs (torch's forward + backward replayed from a CUDA graph: torch without its launch overhead)
# in both states.
. "$(dirname "$0")/common.sh"
build_gpu dskc
for l in $L128 $L512; do
  el "profile $l, warm-up 10"
  timeout 60 build-gpu/dskc bench $l --warmup 10 --profile 2>&1 | tee -a "$OUT/profile_wu10.txt" | tail -40
done
for wu in 10 300; do
  el "compare_torch --graphs, warm-up $wu"
  timeout 260 python3 bench/compare_torch.py --dskc build-gpu/dskc --ln pre --warmup $wu --graphs 2>&1 | tee "$OUT/compare_graphs_wu$wu.txt" | tail -8
done
el done
