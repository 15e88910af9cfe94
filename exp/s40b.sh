#!/usr/bin/env bash
# Session 40, call 2, on main (kernels as at 8f981eb, which passed ctest -L gpu in session 39): the burst
# layer matrix (3 rounds) with two all-flags variants for where the backward rewrites the attention keep
# bits (DSKC_ATTN_BITS_BWD=kernel: the standalone bits kernel first on the side stream; =dot: in the
# dot kernel's launch, on the main stream; default: in the first LayerNorm's re-run), then the sustained
# matrix (warm-up 300, 3 rounds), whose last run was session 36's (before the fused dQ and D in the
# dK/dV kernel became the default).
. "$(dirname "$0")/common.sh"
build_gpu -j16 dskc
el "layer matrix, warm-up 10"
timeout 200 python3 bench/layer_matrix.py --dskc build-gpu/dskc --rounds 3 \
  --env "all bits=kernel@all three flags:DSKC_ATTN_BITS_BWD=kernel" --env "all bits=dot@all three flags:DSKC_ATTN_BITS_BWD=dot" \
  2>&1 | tee "$OUT/matrix_wu10.txt" | tail -30
el "layer matrix, warm-up 300"
timeout 320 python3 bench/layer_matrix.py --dskc build-gpu/dskc --rounds 3 --warmup 300 2>&1 | tee "$OUT/matrix_wu300.txt" | tail -26
el done
