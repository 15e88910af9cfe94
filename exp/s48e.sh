#!/usr/bin/env bash
# Session 48, call 5 (the final code, v46): (1) the burst layer matrix, 3 rounds, every variant plus
# DSKC_LN_BITS_BLOCKS=all on the default and on all three flags (the wall A/B of v46); (2)
# compare_torch burst (the README's side-by-side table). Run under exp/pack.sh.
. "$(dirname "$0")/common.sh"
build_gpu dskc
el "layer matrix, 3 rounds"
timeout 330 python3 bench/layer_matrix.py --dskc build-gpu/dskc --rounds 3 \
  --env "bits all:DSKC_LN_BITS_BLOCKS=all" --env "all flags, bits all@all three flags:DSKC_LN_BITS_BLOCKS=all" 2>&1 | tee $OUT/matrix.txt | tail -30
el "compare_torch, warm-up 10"
timeout 170 python3 bench/compare_torch.py --dskc build-gpu/dskc --ln pre --warmup 10 2>&1 | tee "$OUT/compare_wu10.txt" | tail -14
el done
