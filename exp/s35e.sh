#!/usr/bin/env bash
# Ran on a tree with exp/gemm_cluster.patch applied, at its state then (bench/NOTES.md v32); the
# DSKC_TMP_* hooks were throwaway code that neither the patch nor main keeps.
# Session 35 bisection: clusters of 2 with no multicast and no cross-CTA barrier traffic
# (DSKC_TMP_NOMC: each CTA loads its whole B tile, local releases) vs with, vs no clusters.
. "$(dirname "$0")/common.sh"
build_gpu dskc
el "profile lines (warm-up 10)"
for f in $L128; do for v in "DSKC_GEMM_CLUSTER=1" "DSKC_GEMM_CLUSTER=2" "DSKC_GEMM_CLUSTER=2 DSKC_TMP_NOMC=1"; do
  echo "$v: $(fwd_gemm_line "$v" $f 10)"
done; done | tee "$OUT/profile_nomc.txt"
el "sustained A/B linear cublas, 5 rounds"
ab_matrix "linear cublas" DSKC_LINEAR_GEMM=cublas 5 300 matrix_cublas_wu300.txt
el done
