#!/usr/bin/env bash
# Session 79, second call: the whole `ctest -L gpu -j16` on the v54 tree (the landed 01f889c's flash
# test refactor included); on an H200 then the side-by-side table (compare_torch, 2 rounds) with it.
# bash exp/pack.sh 590 exp/s79c.sh
. "$(dirname "$0")/common.sh"
gpu_head
build_gpu -j16
ctest_gpu 16 420 400
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then compare_r3 585 2; fi
el done
