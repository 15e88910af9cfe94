#!/usr/bin/env bash
# Session 81, calls 3-5 (after exp/s79c.sh and exp/s80b.sh on the same H100), as one script: paired
# A/Bs (`dskc bench --versus`, 60 pairs) at both shapes, launched and replayed from CUDA graphs, of
# (1) each memory flag alone, all three and stochastic_mode against the default; (2) one stream
# (DSKC_LAYER_STREAMS=1) against two, with no flag, each flag and all three; (3) where
# attn_dropout_checkpoint's backward redraws its keep bits (DSKC_ATTN_BITS_BWD=dot / kernel); then the
# side-by-side table (2 rounds). Readings: bench/NOTES.md t21.
# bash exp/pack.sh 590 exp/s81a.sh
. "$(dirname "$0")/common.sh"
gpu_head
build_gpu -j16 dskc
F3="--attention_dropout_checkpoint --normalize_invertible --gelu_checkpoint"
ADC=--attention_dropout_checkpoint
versus_runs versus_flags.txt :attention_dropout_checkpoint :normalize_invertible :gelu_checkpoint \
  :all_memory_flags :stochastic_mode
versus_runs versus_streams.txt ":DSKC_LAYER_STREAMS=1" "$ADC:DSKC_LAYER_STREAMS=1" \
  "--normalize_invertible:DSKC_LAYER_STREAMS=1" "--gelu_checkpoint:DSKC_LAYER_STREAMS=1" "$F3:DSKC_LAYER_STREAMS=1"
versus_runs versus_bits.txt "$ADC:DSKC_ATTN_BITS_BWD=dot" "$F3:DSKC_ATTN_BITS_BWD=dot" "$F3:DSKC_ATTN_BITS_BWD=kernel" \
  "$ADC --normalize_invertible:DSKC_ATTN_BITS_BWD=dot"
compare_r3 585 2
el done
