#!/usr/bin/env bash
# Prepared in session 59, for the call after exp/s59a.sh (`bash exp/pack.sh 595 exp/s59b.sh`): on main
# with the four session-59 changes (graphs in training, step profile, tables ahead, one-launch Adam), the whole
# `ctest -L gpu`, then the burst layer matrix replayed from CUDA graphs (the form training runs with
# --cuda_graphs) for the default, stochastic_mode and all three memory flags, 3 interleaved rounds.
. "$(dirname "$0")/common.sh"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/gpu.txt"
build_gpu -j16
ctest_gpu 16 420 300
el "layer matrix, CUDA graphs"
timeout $(( 590 - $(date +%s) + t0 )) python3 bench/layer_matrix.py --dskc build-gpu/dskc --graph --rounds 3 \
  --only "fp16 Pre-LN,stochastic_mode,all three flags" 2>&1 | tee "$OUT/matrix_graph.txt" | tail -12
el done
