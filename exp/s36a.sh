#!/usr/bin/env bash
# Session 36, call 1 (~8 min): main with cuBLASLt as the default for the forward's QKV, attention-output
# and output GEMMs (kLinearGemmDefault, bench/NOTES.md v32 f). A/B against DSKC_LINEAR_GEMM=sm90 (the
# old default) in both states, the per-kernel profile of the new default, then every GPU test.
. "$(dirname "$0")/common.sh"
build_gpu
for wu in 300 10; do
  el "layer A/B linear sm90 (the old default), warm-up $wu"
  ab_matrix "linear sm90" DSKC_LINEAR_GEMM=sm90 5 $wu matrix_sm90_wu$wu.txt | tail -8
done
for l in $L128 $L512; do
  el "profile $l, warm-up 300"
  timeout 60 build-gpu/dskc bench $l --iters 20 --warmup 300 --profile > "$OUT/profile_$(basename $l .json).txt" 2>&1
  grep -E "^ *[a-z_]+ .*[0-9]|sum" "$OUT/profile_$(basename $l .json).txt" | head -60
done
ctest_gpu
el done
