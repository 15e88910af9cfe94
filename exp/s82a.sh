#!/usr/bin/env bash
# Next call (prepared in session 81, revised in session 82): where the memory flags' regeneration goes
# on the side stream, read by paired A/Bs. Session 82 made exp/regen_ctor.patch's two switches product
# switches read when a layer is built (DSKC_LAYER_REGEN, DSKC_OUTPUT_BIAS_EARLY; defaults unchanged),
# so `--versus` builds B under them (session 75's exp/regen_priority.patch read them at each backward
# call, after `--versus` had restored B's variables, so its B ran as A).
# Session 81's pairs (t21) put the first-on-the-side-stream regeneration of attention_dropout_checkpoint
# and normalize_invertible at ~+2.7% of the replayed step beyond what it costs on one stream.
# On an H200 also the flags' and stochastic_mode's pairs; then the whole ctest -L gpu.
# bash exp/pack.sh 590 exp/s82a.sh
. "$(dirname "$0")/common.sh"
gpu_head
build_gpu -j16
F3="--attention_dropout_checkpoint --normalize_invertible --gelu_checkpoint"
versus_runs versus_regen.txt "$F3:DSKC_LAYER_REGEN=dgrad" "$F3:DSKC_LAYER_REGEN=main" \
  "--normalize_invertible:DSKC_LAYER_REGEN=main" "--attention_dropout_checkpoint:DSKC_LAYER_REGEN=main" \
  "--normalize_invertible:DSKC_LAYER_REGEN=dgrad" "$F3:DSKC_OUTPUT_BIAS_EARLY=0"
# Each placement keeps the results bitwise those of one stream (the case builds its layers after the
# variable is set, so the constructor reads it).
for r in dgrad main; do
  el "two streams, DSKC_LAYER_REGEN=$r"
  ( export DSKC_LAYER_REGEN=$r; gpu_test two_streams_$r.log 150 gpu_test_layer_behaviour -tc="backward on two streams*" )
done
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  versus_runs versus_flags_h200.txt :all_memory_flags :stochastic_mode
fi
# The whole GPU suite on this build, in what is left of the call.
ctest_gpu 16 $(( 585 - $(date +%s) + t0 )) 300
el done
