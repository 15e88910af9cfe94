#!/usr/bin/env bash
# Session 41, call 3: 7 interleaved rounds of the default, stochastic_mode and all three flags (own
# scratch, the default now; and DSKC_GELU_CKPT_SCRATCH=shared) in both states; then the memory table's
# gelu_checkpoint cells again (the own scratch adds one [B, S, H] workspace tensor without
# normalize_invertible).
. "$(dirname "$0")/common.sh"
build_gpu -j16 dskc
for w in 0 300; do
  el "7 rounds, warm-up $w"
  timeout 200 python3 bench/layer_matrix.py --dskc build-gpu/dskc --rounds 7 $([ $w = 0 ] || echo --warmup $w) \
    --only "fp16 Pre-LN,stochastic_mode,all three flags,all shared" \
    --env "all shared@all three flags:DSKC_GELU_CKPT_SCRATCH=shared" 2>&1 | tee $OUT/ab7_w$w.txt
done
el "memory table, gelu_checkpoint"
FLAG_SETS=gelu_checkpoint TORCH=0 DSKC_TIMEOUT=100 bash bench/memory_table.sh 2>&1 | tail -12
el done
