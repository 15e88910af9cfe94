#!/usr/bin/env bash
# Ran on a tree with exp/gemm_cluster.patch applied, at its state then (bench/NOTES.md v32); the
# DSKC_TMP_* hooks were throwaway code that neither the patch nor main keeps.
# Session 35 bisection: clusters of 2 with no multicast and no cross-CTA barrier traffic
# (DSKC_TMP_NOMC: each CTA loads its whole B tile, local releases) vs with, vs no clusters.
. "$(dirname "$0")/common.sh"
build_gpu dskc
el "profile lines (warm-up 10)"
for f in $L128; do for v in "DSKC_GEMM_CLUSTER=1" "DSKC_GEMM_CLUSTER=2" "DSKC_GEMM_CLUSTER=2 DSKC_TMP_NOMC=1"; do
  echo "$v: $(env $v timeout 60 build-gpu/dskc bench $f --iters 20 --warmup 10 --profile 2>&1 | grep -E "gemm_[a-z_]+_fwd|  sum" | awk '{printf "%s %s  ", $1, $2}')"
done; done | tee "$OUT/profile_nomc.txt"
el "sustained A/B linear cublas, 5 rounds"
python3 bench/layer_matrix.py --dskc build-gpu/dskc --rounds 5 --warmup 300 --only "fp16 Pre-LN,linear cublas" \
    --env "linear cublas:DSKC_LINEAR_GEMM=cublas" 2>&1 | tee "$OUT/matrix_cublas_wu300.txt"
el done
