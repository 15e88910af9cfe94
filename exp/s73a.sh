#!/usr/bin/env bash
# Prepared in session 72 for the next H200 (`bash exp/pack.sh 560 exp/s73a.sh`; on any other card it stops
# after the card's name): the side-by-side table with 3 rounds (session 72's H200 run had time for 2: dskc
# graph 1.155 / 1.361 ms against session 69's 1.149 / 1.309), then the graph-replayed layer matrix at both
# shapes, every variant, 3 rounds, with the same-code control row (the last full H200 matrix is session
# 55's, launched; session 69's graph matrix covered only the memory flags at (16,512)).
# With less device time: bash exp/pack.sh LIMIT exp/s73a.sh [MATRIX_ROUNDS [MATRIX_END [COMPARE_END [COMPARE_ROUNDS]]]]
# (defaults 3, 550 s, 300 s, 3; MATRIX_ROUNDS 0 leaves the matrix out).
. "$(dirname "$0")/common.sh"
only_on_h200
gpu_head
build_gpu -j16 dskc
compare_r3 "${3:-300}" "${4:-3}"
[ "${1:-3}" = 0 ] || graph_matrix "${1:-3}" "${2:-550}"
el done
