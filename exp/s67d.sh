#!/usr/bin/env bash
# Session 67, call 4 (`bash exp/pack.sh 200 exp/s67d.sh`): the three Lamb launches' durations by
# Nsight Compute (ncu_lamb in exp/common.sh: BERT-Large, seq 128, micro-batch 64, Lamb, 3 steps;
# only the lamb_multi kernels profiled) against the ~13.4 GB they move per step. (As run, the ncu
# command was inline here; it moved into ncu_lamb for exp/s68a.sh unchanged.)
. "$(dirname "$0")/common.sh"
gpu_head
build_gpu -j16 dskc
run_dir s67
large_train_data "$D"
ncu_lamb landed
rm -rf "$D"
el done
