#!/usr/bin/env bash
# Session 39, call 6: gelu_checkpoint's GELU(h) from its own pass on the side stream
# (DSKC_GELU_RECOMPUTE=pass) instead of bias_gelu_bwd's store on the main stream. Its bitwise GPU test,
# then a burst matrix A/B (3 rounds) of gelu_checkpoint and all three flags with and without it, and
# the all-flags kernel sums. Prediction: bias_gelu_bwd 0.065 -> 0.046 ms on the main stream, the pass
# (~0.03 ms) next to the output data gradient on the side stream: all flags +3.3% -> ~+2.0% at (64,128).
# Prepared in session 39 after its device time was spent (never run on a GPU): the option lives in
# exp/gelu_recompute_pass.patch (the plan option, the kernel, the runtime order, a CPU plan test, the GPU
# bitwise test, README), applied here; land it (git apply, commit) only if the test passes.
. "$(dirname "$0")/common.sh"
git apply exp/gelu_recompute_pass.patch || { echo "patch does not apply"; exit 1; }
build_gpu -j16 dskc gpu_test_layer_numerics
el "bitwise test"
gpu_test test_regelu.log 120 gpu_test_layer_numerics -tc="gelu_checkpoint with GELU(h)*"
el "matrix A/B burst"
timeout 150 python3 bench/layer_matrix.py --dskc build-gpu/dskc --rounds 3 \
  --only "fp16 Pre-LN,gelu_checkpoint,gc pass,all three flags,all pass" \
  --env "gc pass@gelu_checkpoint:DSKC_GELU_RECOMPUTE=pass" --env "all pass@all three flags:DSKC_GELU_RECOMPUTE=pass" \
  2>&1 | tee "$OUT/ab_regelu.txt" | tail -14
el "kernel sums"
ncu_step "DSKC_GELU_RECOMPUTE=pass" $L128 all_pass --attention_dropout_checkpoint --normalize_invertible --gelu_checkpoint
python3 exp/ncu_step.py $OUT/ncu_all_pass.csv | grep -E "gelu|sum"
el done
