#!/usr/bin/env bash
# Session 43, call 4: the final code (DSKC_ATTN_DQ=reduce opt-in only; stochastic_mode back on the dQ
# GEMM above 128 keys): the full GPU suite, then as many interleaved burst rounds of the layer matrix's
# main rows as the call's time allows (default, stochastic_mode, Post-LN, bf16, all three flags).
. "$(dirname "$0")/common.sh"
build_gpu -j16
ctest_gpu 16 230 220
left=$(( 310 - ($(date +%s) - t0) ))
el "layer matrix, 3 rounds (${left} s left)"
[ $left -gt 60 ] && timeout $left python3 bench/layer_matrix.py --dskc build-gpu/dskc --rounds 3 \
  --only "fp16 Pre-LN,stochastic_mode,Post-LN,bf16,all three flags" 2>&1 | tee $OUT/matrix3.txt | tail -14
el done
