#!/usr/bin/env bash
# Session 50, call 3: with v48's leaner wgmma issue, do dskc's own GEMMs now beat cuBLASLt where
# they were level? (1) Nsight Compute step sums at both shapes, 2 alternations: the default and
# DSKC_LINEAR_GEMM=sm90 (the forward's QKV, attention-output and output GEMMs), DSKC_DGRAD_GEMM=sm90
# (the backward's data gradients) and DSKC_FFN_GEMM=sm90 (the FFN data gradient with GELU′);
# (2) the burst layer matrix, 3 rounds, with those three as variants; (3) compare_torch, warm-up 10.
# Run under exp/pack.sh.
. "$(dirname "$0")/common.sh"
build_gpu dskc
el "ncu sums"
for r in 1 2; do
  for n in 128 512; do
    for v in def linear dgrad ffn; do
      e=""
      [ $v = linear ] && e="DSKC_LINEAR_GEMM=sm90"
      [ $v = dgrad ] && e="DSKC_DGRAD_GEMM=sm90"
      [ $v = ffn ] && e="DSKC_FFN_GEMM=sm90"
      env_ab $n $v "$e" $r gemm_inter_fwd
    done
  done
done | tee $OUT/ab.txt
el "layer matrix, 3 rounds"
timeout 260 python3 bench/layer_matrix.py --dskc build-gpu/dskc --rounds 3 \
  --env "linear sm90:DSKC_LINEAR_GEMM=sm90" --env "dgrad sm90:DSKC_DGRAD_GEMM=sm90" \
  --env "ffn sm90:DSKC_FFN_GEMM=sm90" 2>&1 | tee $OUT/matrix.txt | tail -30
el "compare_torch, warm-up 10"
timeout $(( 585 - $(date +%s) + t0 )) python3 bench/compare_torch.py --dskc build-gpu/dskc --ln pre --warmup 10 2>&1 |
  tee "$OUT/compare_wu10.txt" | tail -14
el done
