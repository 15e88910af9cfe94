#!/usr/bin/env bash
# Historical: exp/lamb_multi.patch landed in session 67 (7d19d46) and was removed, so `git apply`
# fails on later trees; the landed tree runs the same tests and A/B without it.
# Session 67, call 1 (`bash exp/pack.sh 330 exp/s67a.sh`): exp/lamb_multi.patch's first GPU run
# (prepared in session 66 with a longer exp/s66e.sh, removed with the patch), kept short because most of the session's device time
# went on failed starts: the patch applied, dskc and the two GPU test binaries that reach the
# optimizer built (gpu_test_bert_cuda holds the Lamb multi-vs-per-tensor, CPU-backend and
# deferred-gradient cases; gpu_test_plain_layer the unfused layers' training, through Adam's
# refactored table), then the seq-128 Lamb training A/B of this build against
# DSKC_OPTIMIZER=per_tensor. No other GPU test reaches the trainer's optimizer or the model module's
# update kernels; their code is main's, whose whole suite passed on 36951c8 in session 66.
. "$(dirname "$0")/common.sh"
git apply exp/lamb_multi.patch || { echo "exp/lamb_multi.patch does not apply"; exit 1; }
gpu_head
build_gpu -j16 dskc gpu_test_bert_cuda gpu_test_plain_layer
gpu_test bert_cuda.log 120 gpu_test_bert_cuda
gpu_test plain_layer.log 60 gpu_test_plain_layer
run_dir s67
large_train_data "$D"
lamb_train multi128 128 64 "$D/data"
profile_lines multi128 "optimizer|whole"
DSKC_OPTIMIZER=per_tensor lamb_train per128 128 64 "$D/data"
profile_lines per128 "optimizer|whole"
rm -rf "$D"
el done
