#!/usr/bin/env bash
# Session 68, run on the H100 that the third call asking for an H200 got (`bash exp/pack.sh 570
# exp/s68e.sh`; written there from exp/s68d.sh by dropping its H200 check and ending compare_torch at
# 560 s, as this file does): the landed tree's training runs (Adam, the default; Lamb at seq 128,
# micro-batch 64; both profiled), then compare_torch's side-by-side table (3 rounds, graph columns
# included) for the code of sessions 58-68 on that card.
. "$(dirname "$0")/common.sh"
gpu_head
train_and_table 560
el done
