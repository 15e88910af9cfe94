#!/usr/bin/env bash
# Session 55, call 2: the burst layer matrix (3 rounds: default, each flag, all three, stochastic_mode,
# Post-LN, bf16, the same-code control) of the landed code (v49 on main) on the H100 the device tool
# gives this session. Run under exp/pack.sh.
. "$(dirname "$0")/common.sh"
build_gpu -j16
el "layer matrix, 3 rounds"
timeout $(( 570 - $(date +%s) + t0 )) python3 bench/layer_matrix.py --dskc build-gpu/dskc --rounds 3 \
  2>&1 | tee $OUT/matrix.txt | tail -26
el done
