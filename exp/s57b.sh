#!/usr/bin/env bash
# Session 57, call 2 (`bash exp/pack.sh 560 exp/s57b.sh`, H200 asked for): the landed HEAD's burst layer
# matrix (3 rounds) and then the side-by-side table (3 interleaved rounds, medians) in one call. Call 1
# (exp/s56a.sh) ran the whole GPU suite and the side-by-side table on an H100. Run under exp/pack.sh.
. "$(dirname "$0")/common.sh"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/gpu.txt"
build_gpu -j16 dskc
el "layer matrix, 3 rounds"
timeout $(( 360 - $(date +%s) + t0 )) python3 bench/layer_matrix.py --dskc build-gpu/dskc --rounds 3 \
  2>&1 | tee $OUT/matrix.txt | tail -26
compare_r3 550
el done
