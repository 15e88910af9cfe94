#!/usr/bin/env bash
# Prepared in session 35 for the next GPU session (one call, ~9 min): every GPU test on main,
# bench/compare_torch.py in both states (its per-side SM clock column, bench/nvml_clock.py, has
# not yet run on a GPU), then DSKC_LINEAR_GEMM=cublas against the default in both states
# (bench/NOTES.md v32 f: ahead sustained in three calls, equal in burst).
. "$(dirname "$0")/common.sh"
build_gpu
ctest_gpu
for wu in 10 300; do
  el "compare_torch, warm-up $wu"
  timeout 150 python3 bench/compare_torch.py --dskc build-gpu/dskc --ln pre --warmup $wu 2>&1 | tee "$OUT/compare_wu$wu.txt" | tail -12
done
for wu in 10 300; do
  el "layer A/B linear cublas, warm-up $wu"
  ab_matrix "linear cublas" DSKC_LINEAR_GEMM=cublas 5 $wu matrix_cublas_wu$wu.txt | tail -8
done
el done
