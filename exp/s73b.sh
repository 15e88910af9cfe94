#!/usr/bin/env bash
# Session 73's fallback where the call gets an H100 instead of an H200: the graph-replayed layer matrix
# at both shapes, every variant, ROUNDS interleaved rounds, stopped at END s: bash exp/pack.sh LIMIT
# exp/s73b.sh [ROUNDS [END]] (defaults 2, 290). The last H100 graph matrix is session 58's (v51).
. "$(dirname "$0")/common.sh"
gpu_head
build_gpu -j16 dskc
graph_matrix "${1:-2}" "${2:-290}"
el done
