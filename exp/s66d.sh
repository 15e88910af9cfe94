#!/usr/bin/env bash
# Session 66 (`bash exp/pack.sh 420 exp/s66d.sh`): the guide's second phase, never profiled on a GPU
# before: BERT-Large at seq 512, micro-batch 16 (deepspeed_bsz32K_lamb_config_seq512.json's), fp16,
# Lamb, accumulation 1 (so every step runs the optimizer and the profile shows it), 40 steps, the last
# 20 profiled by phase; then Lamb at seq 128 mb 64 against the Adam run of large_train (the same
# model and data) for the optimizer's share. One run each (lamb_train in exp/common.sh).
. "$(dirname "$0")/common.sh"
gpu_head
build_gpu -j16 dskc
run_dir s66
large_train_data "$D"
seq512_data "$D"
lamb_train lamb512 512 16 "$D/data512"
profile_lines lamb512
lamb_train lamb128 128 64 "$D/data"
profile_lines lamb128 "optimizer|whole"
large_train adam128
profile_lines adam128 "optimizer|whole"
rm -rf "$D"
el done
