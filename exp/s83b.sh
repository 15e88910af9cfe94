#!/usr/bin/env bash
# The readings owed since session 78 on whatever card the call gets (the targets are an H200's): the
# side-by-side table (compare_torch.py, 2 interleaved rounds) and the paired A/Bs (`dskc bench
# --versus`, 60 pairs, launched and replayed from CUDA graphs, both shapes) of each memory flag, all
# three and stochastic_mode against the default; extra "ARGS:SPEC" pairs (say a lever that
# exp/s82a.sh found to win, under all three flags) from the command line run first.
# Meant as the second call after exp/s82a.sh on the same warm machine (its build-gpu is reused when
# there). Readings: bench/NOTES.md t22.
# bash exp/pack.sh 590 exp/s83b.sh ["ARGS:SPEC"...]
. "$(dirname "$0")/common.sh"
gpu_head
build_gpu -j16 dskc
[ $# -gt 0 ] && versus_runs versus_levers.txt "$@"
versus_runs versus_flags.txt :attention_dropout_checkpoint :normalize_invertible :gelu_checkpoint \
  :all_memory_flags :stochastic_mode
compare_r3 585 2
el done
