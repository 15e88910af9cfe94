#!/usr/bin/env bash
# Session 39, call 4: the burst layer matrix (3 rounds) on the new default.
. "$(dirname "$0")/common.sh"
build_gpu -j16 dskc
el "layer matrix, warm-up 10"
timeout 280 python3 bench/layer_matrix.py --dskc build-gpu/dskc --rounds 3 2>&1 | tee "$OUT/matrix_wu10.txt" | tail -26
el done
