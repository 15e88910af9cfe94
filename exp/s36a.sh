#!/usr/bin/env bash
# Prepared in session 35 for the next GPU session (one call, ~9 min): every GPU test on main
# (6ca5dcb's pci_bus_id() is shared by dskc bench and the two-GPU peer discovery), then
# bench/compare_torch.py in both states (its per-side SM clock column, bench/nvml_clock.py, has
# not yet run on a GPU), then DSKC_LINEAR_GEMM=cublas against the default in both states
# (bench/NOTES.md v32 f: ahead sustained in three calls, equal in burst).
. "$(dirname "$0")/common.sh"
build_gpu
el "ctest -L gpu"
(cd build-gpu && timeout 380 ctest -L gpu -j8 --timeout 360) > "$OUT/ctest_gpu.log" 2>&1
echo "ctest rc=$?"
grep -E "tests passed|tests failed|\*\*\*|Failed|Skipped" "$OUT/ctest_gpu.log" | sed 's/  */ /g' | tail -20
for wu in 10 300; do
  el "compare_torch, warm-up $wu"
  timeout 150 python3 bench/compare_torch.py --dskc build-gpu/dskc --ln pre --warmup $wu 2>&1 | tee "$OUT/compare_wu$wu.txt" | tail -12
done
for wu in 10 300; do
  el "layer A/B linear cublas, warm-up $wu"
  timeout 150 python3 bench/layer_matrix.py --dskc build-gpu/dskc --rounds 5 --warmup $wu --only "fp16 Pre-LN,linear cublas" \
    --env "linear cublas:DSKC_LINEAR_GEMM=cublas" 2>&1 | tee "$OUT/matrix_cublas_wu$wu.txt" | tail -8
done
el done
