#!/usr/bin/env bash
# Ran on a tree with exp/gemm_cluster.patch applied, at its state then (bench/NOTES.md v32); the
# DSKC_TMP_* hooks were throwaway code that neither the patch nor main keeps.
# Session 35: DSKC_GEMM_CLUSTER=2 with the grid sized by cuOccupancyMaxActiveClusters (s35a ran
# the cluster kernels 2x slower: 66 clusters on 132 SMs, presumably a second wave).
. "$(dirname "$0")/common.sh"
build_gpu dskc gpu_test_layer_numerics
el "resident clusters"
DSKC_TMP_CLUSTERS=1 DSKC_GEMM_CLUSTER=2 build-gpu/dskc bench $L128 --iters 1 --warmup 1 2>&1 | grep TMP
el "GPU tests gemm_sm90*"
gemm_sm90_tests
el "profile lines"
for f in $L128 $L512; do for v in 1 2; do
  echo "$(basename $f) cluster=$v: $(fwd_gemm_line DSKC_GEMM_CLUSTER=$v $f 300)"
done; done | tee "$OUT/profile_cluster.txt"
for wu in 10 300; do
  el "layer A/B, warm-up $wu"
  ab_matrix "cluster 2" DSKC_GEMM_CLUSTER=2 4 $wu matrix_cluster_wu$wu.txt
done
el done
