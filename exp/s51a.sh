#!/usr/bin/env bash
# Session 51, call 1: GELU'(h) kept by the forward instead of h (DSKC_GELU_SAVE=grad, v49): gemm_inter_fwd
# computes GELU(h) and GELU'(h) from one tail (kBiasGeluSaveGrad), gemm_output_dgrad multiplies its
# products by the kept factor in registers (kDGeluSaved: no GELU arithmetic, two regions, five stages).
# (1) the GPU tests that cover it (GELU device functions, gemm_sm90 FFN vs cuBLASLt, grad vs input
# bitwise, memory flags vs no flag bitwise); (2) Nsight Compute step sums, input vs grad, both shapes;
# (3) the burst layer matrix, 3 rounds, with input as a variant. Run under exp/pack.sh.
# Prepared in session 51 (the device machine was lost before its first call): the change is
# exp/gelu_save_grad.patch, applied here unless the tree has it already. Prediction: gemm_output_dgrad
# 0.125 -> ~0.100-0.105 ms (no GELU arithmetic, no pass), gemm_inter_fwd +0.003-0.006 (a third MUFU and
# one more 16-byte store per 8 elements), the step -0.015 to -0.02 ms at both shapes; all three flags
# unchanged in absolute time (gelu_checkpoint keeps h), so their relative cost rises by about as much.
. "$(dirname "$0")/common.sh"
apply_patch exp/gelu_save_grad.patch
build_gpu -j16
el "GPU tests"
gpu_test t_numerics.log 300 gpu_test_layer_numerics -tc="GELU device*,gemm_sm90 FFN*,gemm_sm90 GELU backward*"
gpu_test t_flags.log 120 gpu_test_layer_behaviour -tc="memory flags*"
el "ncu sums"
for r in 1 2; do
  for n in 128 512; do
    for v in input grad; do env_ab $n $v "DSKC_GELU_SAVE=$v" $r gemm_inter_fwd gemm_output_dgrad; done
  done
done | tee $OUT/ab.txt
el "layer matrix, 3 rounds"
timeout $(( 585 - $(date +%s) + t0 )) python3 bench/layer_matrix.py --dskc build-gpu/dskc --rounds 3 \
  --env "gelu save input:DSKC_GELU_SAVE=input" 2>&1 | tee $OUT/matrix.txt | tail -26
el done
