#!/usr/bin/env bash
# Session 67, call 2 (`bash exp/pack.sh 470 exp/s68b.sh`): the three-launch Lamb landed; the whole
# tree built and `ctest -L gpu` on it.
. "$(dirname "$0")/common.sh"
gpu_head
build_gpu -j16
ctest_gpu 8 330 320
el done
