#!/usr/bin/env bash
# Ran on a tree with exp/gemm_cluster.patch applied, at its state then (bench/NOTES.md v32); the
# DSKC_TMP_* hooks were throwaway code that neither the patch nor main keeps.
# Session 35: DSKC_GEMM_CLUSTER=2 with the producer warpgroup's idle threads exiting at once
# (s35c: in s35a/b they waited at the cluster barrier; ncu showed 24.5 cycles per issue vs 7.8).
. "$(dirname "$0")/common.sh"
build_gpu dskc gpu_test_layer_numerics
el "profile lines (warm-up 10)"
for f in $L128 $L512; do for v in 1 2; do
  echo "$(basename $f) cluster=$v: $(DSKC_GEMM_CLUSTER=$v timeout 60 build-gpu/dskc bench $f --iters 20 --warmup 10 --profile 2>&1 | grep -E "gemm_[a-z_]+_fwd|  sum" | awk '{printf "%s %s  ", $1, $2}')"
done; done | tee "$OUT/profile_cluster.txt"
for wu in 10 300; do
  el "layer A/B, warm-up $wu"
  python3 bench/layer_matrix.py --dskc build-gpu/dskc --rounds 3 --warmup $wu --only "fp16 Pre-LN,cluster 2" \
    --env "cluster 2:DSKC_GEMM_CLUSTER=2" 2>&1 | tee "$OUT/matrix_cluster_wu$wu.txt"
done
el "GPU tests gemm_sm90*"
timeout 300 build-gpu/tests/gpu_test_layer_numerics -tc="gemm_sm90*" > "$OUT/test_cluster.log" 2>&1; rc=$?
echo "rc=$rc"; tail -3 "$OUT/test_cluster.log"; [ $rc = 0 ] || { grep -B2 -A6 ERROR "$OUT/test_cluster.log" | head -40; exit 1; }
el done
