#!/usr/bin/env bash
# Session 68, a call that asked for an H200 (`bash exp/pack.sh 590 exp/s68d.sh`): on an H100 it stops
# after the GPU's name (what that card had to give this session already ran: exp/s68a-c.sh). On an
# H200: the landed tree's training runs (Adam, the default; Lamb at seq 128, micro-batch 64; both
# profiled) and then compare_torch's side-by-side table (3 rounds, graph columns included) in the
# time left: the H200 rows the README still owes for sessions 58-68's code.
. "$(dirname "$0")/common.sh"
gpu_head
grep -q H200 "$OUT/gpu.txt" || { echo "not an H200: nothing run"; exit 0; }
train_and_table 585
el done
