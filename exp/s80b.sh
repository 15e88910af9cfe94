#!/usr/bin/env bash
# Session 80, the follow-up call on the machine exp/s79c.sh warmed (build-gpu already there). The
# owed 9-round A/B replayed from CUDA graphs of all three memory flags and stochastic_mode against the
# default (both shapes), with `DSKC_DGRAD_GEMM=sm90` as a third variant (the three linear data
# gradients on gemm_sm90: +2.1% / +1.5% in v31 with the three weight transposes it needed then, which
# v54 removed); then Nsight Compute step lists (default / all flags, both shapes) if the time allows.
# Rows from an H100 are marked so.
# bash exp/pack.sh 590 exp/s80b.sh [MATRIX_END]
. "$(dirname "$0")/common.sh"
gpu_head
build_gpu -j16 dskc
E=(--env "dgrad sm90@fp16 Pre-LN:DSKC_DGRAD_GEMM=sm90")
graph_matrix 9 "${1:-420}" flags_stoch_graph_r9.txt \
  --only "fp16 Pre-LN,all three flags,stochastic_mode,dgrad sm90" --no-control "${E[@]}"
ncu_lists
el done
