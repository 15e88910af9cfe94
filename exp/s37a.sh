#!/usr/bin/env bash
# Prepared in session 36 for the next GPU session (one call, ~8 min): the burst layer matrix on the
# cuBLASLt-linear default (the README's burst rows are still session 34's, on gemm_sm90 linear GEMMs),
# then compare_torch in both states with its new --idle (3 s before each side; not yet run on a GPU).
. "$(dirname "$0")/common.sh"
build_gpu dskc
el "layer matrix, warm-up 10"
timeout 200 python3 bench/layer_matrix.py --dskc build-gpu/dskc --rounds 3 2>&1 | tee "$OUT/matrix_wu10.txt" | tail -26
for wu in 10 300; do
  el "compare_torch, warm-up $wu, 3 s idle before each side"
  timeout 200 python3 bench/compare_torch.py --dskc build-gpu/dskc --ln pre --warmup $wu 2>&1 | tee "$OUT/compare_wu$wu.txt" | tail -8
done
el done
