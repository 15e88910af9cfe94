#!/usr/bin/env bash
# Session 40, call 1: the two patches prepared in session 39 (never run on a GPU), applied together:
# exp/gelu_recompute_pass.patch (DSKC_GELU_RECOMPUTE=pass) and exp/dot_obar.patch (O tiles of the fused
# dK/dV/dQ kernel on their own mbarriers). Their GPU tests, the kernel sums (default at both shapes, all
# flags with and without the pass), the burst matrix A/B of the pass (3 rounds), then racecheck.
# Predictions: attn_flash_bwd_dkdv 0.0839 -> ~0.077 ms at (64,128); all flags +3.3% / +4.2% -> ~+2% / +3%.
. "$(dirname "$0")/common.sh"
for p in exp/gelu_recompute_pass.patch exp/dot_obar.patch; do apply_patch $p; done
build_gpu -j16 dskc gpu_test_layer_numerics gpu_test_flash_attention
el "bitwise test (gelu pass)"
gpu_test test_regelu.log 120 gpu_test_layer_numerics -tc="gelu_checkpoint with GELU(h)*"
el "flash wgmma tests (obar)"
gpu_test test_flash_wg.log 200 gpu_test_flash_attention -tc="fused attention backward on warpgroup MMA*"
el "kernel sums"
for l in $L128 $L512; do ncu_step "" $l obar_$(basename $l .json); done
python3 exp/ncu_step.py $OUT/ncu_obar_bert_large_layer.csv | grep -E "attn|sum"
python3 exp/ncu_step.py $OUT/ncu_obar_bert_large_layer_seq512.csv | grep -E "attn|sum"
ALL="--attention_dropout_checkpoint --normalize_invertible --gelu_checkpoint"
ncu_step "" $L128 all_store $ALL
ncu_step "DSKC_GELU_RECOMPUTE=pass" $L128 all_pass $ALL
for t in all_store all_pass; do echo "$t"; python3 exp/ncu_step.py $OUT/ncu_$t.csv | grep -E "gelu|sum"; done
el "matrix A/B burst"
timeout 160 python3 bench/layer_matrix.py --dskc build-gpu/dskc --rounds 3 \
  --only "fp16 Pre-LN,gelu_checkpoint,gc pass,all three flags,all pass" \
  --env "gc pass@gelu_checkpoint:DSKC_GELU_RECOMPUTE=pass" --env "all pass@all three flags:DSKC_GELU_RECOMPUTE=pass" \
  2>&1 | tee "$OUT/ab_regelu.txt" | tail -14
el "racecheck (obar)"
for case in d64-m128-s50 d64-m128-s65-adc; do flash_sanitize $case racecheck; done
el done
