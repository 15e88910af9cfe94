#!/usr/bin/env bash
# Prepared in session 72 for the next H200 (`bash exp/pack.sh 560 exp/s73a.sh`; on any other card it stops
# after the card's name): the side-by-side table with 3 rounds (session 72's H200 run had time for 2: dskc
# graph 1.155 / 1.361 ms against session 69's 1.149 / 1.309), then the graph-replayed layer matrix at both
# shapes, every variant, 3 rounds, with the same-code control row (the last full H200 matrix is session
# 55's, launched; session 69's graph matrix covered only the memory flags at (16,512)).
. "$(dirname "$0")/common.sh"
only_on_h200
gpu_head
build_gpu -j16 dskc
compare_r3 300
el "layer matrix --graph, both shapes, 3 rounds"
timeout $(( 550 - $(date +%s) + t0 )) python3 bench/layer_matrix.py --dskc build-gpu/dskc --rounds 3 --graph \
  2>&1 | tee "$OUT/matrix_graph.txt" | tail -30
el done
