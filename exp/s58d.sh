#!/usr/bin/env bash
# Session 58 (`bash exp/pack.sh 590 exp/s58d.sh`), only on an H200 (stops before the build on any other
# card): the side-by-side table (3 interleaved rounds, with dskc replayed from CUDA graphs next to
# torch's graph columns), then the burst layer matrix replayed from graphs (3 rounds) in the time left.
. "$(dirname "$0")/common.sh"
only_on_h200
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/gpu.txt"
build_gpu -j16 dskc
compare_r3 420
el "layer matrix --graph, 3 rounds"
timeout $(( 580 - $(date +%s) + t0 )) python3 bench/layer_matrix.py --dskc build-gpu/dskc --rounds 3 --graph \
  2>&1 | tee $OUT/matrix_graph.txt | tail -22
el done
