#!/usr/bin/env bash
# Ran on a tree with exp/gemm_cluster.patch applied, at its state then (bench/NOTES.md v32); the
# DSKC_TMP_* hooks were throwaway code that neither the patch nor main keeps.
# Session 35: DSKC_GEMM_CLUSTER=2 with the producer warpgroup's idle threads exiting at once
# (s35c: in s35a/b they waited at the cluster barrier; ncu showed 24.5 cycles per issue vs 7.8).
. "$(dirname "$0")/common.sh"
build_gpu dskc gpu_test_layer_numerics
el "profile lines (warm-up 10)"
for f in $L128 $L512; do for v in 1 2; do
  echo "$(basename $f) cluster=$v: $(fwd_gemm_line DSKC_GEMM_CLUSTER=$v $f 10)"
done; done | tee "$OUT/profile_cluster.txt"
for wu in 10 300; do
  el "layer A/B, warm-up $wu"
  ab_matrix "cluster 2" DSKC_GEMM_CLUSTER=2 3 $wu matrix_cluster_wu$wu.txt
done
el "GPU tests gemm_sm90*"
gemm_sm90_tests
el done
