#!/usr/bin/env bash
# (Session 71: the patch landed in templates/model/params.cuh, so this now runs main as it is.)
# Session 70, short call (`bash exp/pack.sh 480 exp/s70d.sh`): exp/lamb_store_partials.patch (both
# Lamb stage-1 kernels end in one helper, lamb_store_partials) applied and built whole;
# gpu_test_bert_cuda (multi-tensor vs per-tensor Lamb bitwise reads the stage-1 partials); then the
# whole `ctest -L gpu` in the time left.
. "$(dirname "$0")/common.sh"
gpu_head
bert_cuda_check
left=$(( 470 - $(date +%s) + t0 ))
[ $left -gt 60 ] && ctest_gpu 8 $left 400 || echo "no time left for ctest -L gpu"
el done
