#!/usr/bin/env bash
# Ran in session 35 (NOTES v32). Prepared in session 34 for the next GPU session (bench/NOTES.md "After v31"): applies
# exp/gemm_cluster.patch (DSKC_GEMM_CLUSTER), then every gemm_sm90 GPU test (the default path included) and DSKC_GEMM_CLUSTER=2's (bitwise against single-CTA blocks) under a timeout (a
# cluster pipeline bug hangs rather than fails), a memcheck at partial tiles, the gemm_sm90 profile
# lines, and the layer A/B with the control row in both states (burst: 10 warm-up iterations;
# sustained: 300), with the cuBLASLt forward GEMMs as the third variant.
. "$(dirname "$0")/common.sh"
git apply exp/gemm_cluster.patch 2>/dev/null || patch -p1 -N < exp/gemm_cluster.patch || { echo "exp/gemm_cluster.patch does not apply"; exit 1; }
build_gpu dskc gpu_test_layer_numerics
el "GPU tests: every gemm_sm90 case (the default path's tile indexing changed with the option), DSKC_GEMM_CLUSTER=2 bitwise"
gemm_sm90_tests
el "memcheck cluster 3x77"
DSKC_GEMM_CLUSTER=2 DSKC_FFN_GEMM=sm90 DSKC_DGRAD_GEMM=sm90 timeout 240 compute-sanitizer --tool memcheck \
  --error-exitcode 9 build-gpu/dskc bench $L128 --batch 3 --seq 77 --iters 1 --warmup 1 > "$OUT/memcheck_cluster.log" 2>&1
echo "memcheck rc=$?"; grep -E "ERROR SUMMARY" "$OUT/memcheck_cluster.log"
el "profile lines 1 / 2"
for r in 1 2; do for f in $L128 $L512; do for v in 1 2; do
  echo "$r $(basename $f) cluster=$v: $(fwd_gemm_line DSKC_GEMM_CLUSTER=$v $f 300)"
done; done; done | tee "$OUT/profile_cluster.txt"
for wu in 10 300; do
  el "layer A/B, warm-up $wu"
  python3 bench/layer_matrix.py --dskc build-gpu/dskc --rounds 4 --warmup $wu --only "fp16 Pre-LN,cluster 2,linear cublas" \
    --env "cluster 2:DSKC_GEMM_CLUSTER=2" --env "linear cublas:DSKC_LINEAR_GEMM=cublas" 2>&1 | tee "$OUT/matrix_cluster_wu$wu.txt"
done
el done
