#!/usr/bin/env bash
# Session 82's call: (1) where the memory flags' regeneration goes on the side stream
# (DSKC_LAYER_REGEN, DSKC_OUTPUT_BIAS_EARLY: session 81's exp/regen_ctor.patch made product switches
# read when a layer is built, defaults unchanged; session 75's exp/regen_priority.patch read them at
# each backward call, after `--versus` had restored B's variables, so its B ran as A), and (2)
# gemm_sm90's dynamic tile schedule (DSKC_GEMM_TILES=dynamic), both by paired A/Bs; the dynamic
# schedule's bitwise GPU case first (no timing if it fails), each placement's two-stream bitwise case,
# then the whole ctest -L gpu in what is left of the call. Session 83 added DSKC_ATTN_BITS_BWD=saved
# (its bitwise cases, then its pairs under all three flags, alone and with DSKC_LAYER_REGEN=main).
# Session 81's pairs (t21) put the first-on-the-side-stream regeneration of attention_dropout_checkpoint
# and normalize_invertible at ~+2.7% of the replayed step beyond what it costs on one stream; a static
# tile schedule makes a persistent gemm_sm90 whose blocks start late (SMs held by side-stream kernels)
# finish late.
# bash exp/pack.sh 590 exp/s82a.sh [END]   (END: seconds after the start by which ctest stops; 585)
. "$(dirname "$0")/common.sh"
gpu_head
build_gpu -j16
F3="--attention_dropout_checkpoint --normalize_invertible --gelu_checkpoint"
el "dynamic tiles: bitwise"
DYN=(":DSKC_GEMM_TILES=dynamic" "$F3:DSKC_GEMM_TILES=dynamic" "$F3:DSKC_GEMM_TILES=dynamic,DSKC_LAYER_REGEN=main")
( gpu_test dynamic_tiles.log 120 gpu_test_layer_behaviour -tc="gemm_sm90's dynamic*" ) || DYN=()
# Session 83's DSKC_ATTN_BITS_BWD=saved (attn_dropout_checkpoint keeps the forward's keep bits): its
# bitwise cases first, no pairs of it if they fail.
el "saved keep bits: bitwise"
SAVED=("$F3:DSKC_ATTN_BITS_BWD=saved" "$F3:DSKC_ATTN_BITS_BWD=saved,DSKC_LAYER_REGEN=main")
( gpu_test bits_saved.log 150 gpu_test_layer_numerics -tc="fused attention: keep-bit sources*" &&
  gpu_test bits_saved_mask.log 150 gpu_test_layer_behaviour -tc="fused attention keep bits are exactly*" ) || SAVED=()
el "pairs"
versus_runs versus_s82.txt "${DYN[@]}" "$F3:DSKC_LAYER_REGEN=dgrad" "$F3:DSKC_LAYER_REGEN=main" \
  "--normalize_invertible:DSKC_LAYER_REGEN=main" "$F3:DSKC_OUTPUT_BIAS_EARLY=0" "${SAVED[@]}"
# Each placement keeps the results bitwise those of one stream (the case builds its layers after the
# variable is set, so the constructor reads it).
for r in dgrad main; do
  el "two streams, DSKC_LAYER_REGEN=$r"
  ( export DSKC_LAYER_REGEN=$r; gpu_test two_streams_$r.log 150 gpu_test_layer_behaviour -tc="backward on two streams*" )
done
# The whole GPU suite on this build, in what is left of the call.
ctest_gpu 16 $(( ${1:-585} - $(date +%s) + t0 )) 300
el done
