#!/usr/bin/env bash
# Session 36, call 2 (~6 min): bench/compare_torch.py in both states (its per-side SM clock column,
# bench/nvml_clock.py, has not run on a GPU before) and the whole layer matrix sustained (3 rounds),
# with cuBLASLt's forward GEMMs as the default (stochastic_mode now autotunes those too).
. "$(dirname "$0")/common.sh"
build_gpu
for wu in 300 10; do
  el "compare_torch, warm-up $wu"
  timeout 170 python3 bench/compare_torch.py --dskc build-gpu/dskc --ln pre --warmup $wu 2>&1 | tee "$OUT/compare_wu$wu.txt" | tail -12
done
el "layer matrix, warm-up 300"
timeout 280 python3 bench/layer_matrix.py --dskc build-gpu/dskc --rounds 3 --warmup 300 2>&1 | tee "$OUT/matrix_wu300.txt" | tail -26
el done
