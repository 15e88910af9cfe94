#!/usr/bin/env bash
# Session 49, call 5: the numbers on the final code (v47 the default): the burst layer matrix,
# 3 rounds (with DSKC_ATTN_BWD_PERSIST=off as one more variant), and compare_torch, warm-up 10.
# Run under exp/pack.sh.
. "$(dirname "$0")/common.sh"
build_gpu dskc
el "layer matrix, 3 rounds"
timeout 330 python3 bench/layer_matrix.py --dskc build-gpu/dskc --rounds 3 \
  --env "persist off:DSKC_ATTN_BWD_PERSIST=off" 2>&1 | tee $OUT/matrix.txt | tail -30
el "compare_torch, warm-up 10"
timeout 170 python3 bench/compare_torch.py --dskc build-gpu/dskc --ln pre --warmup 10 2>&1 | tee "$OUT/compare_wu10.txt" | tail -14
el done
