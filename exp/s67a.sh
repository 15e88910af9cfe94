#!/usr/bin/env bash
# Session 67, call 1 (`bash exp/pack.sh 590 exp/s67a.sh`): exp/lamb_multi.patch's first GPU run
# (prepared in session 66, see exp/s66e.sh), then, since the patch touches the trainer, the whole
# `ctest -L gpu` on the patched tree in the same build: the CUDA backend's and plain layer's GPU tests
# first (they hold the Lamb multi-vs-per-tensor cases), the seq-128 Lamb training A/B of this build
# against DSKC_OPTIMIZER=per_tensor, then the whole GPU suite.
. "$(dirname "$0")/common.sh"
git apply exp/lamb_multi.patch || { echo "exp/lamb_multi.patch does not apply"; exit 1; }
gpu_head
build_gpu -j16
gpu_test bert_cuda.log 120 gpu_test_bert_cuda
gpu_test plain_layer.log 60 gpu_test_plain_layer
run_dir s67
large_train_data "$D"
lamb_train multi128 128 64 "$D/data"
profile_lines multi128 "optimizer|whole"
DSKC_OPTIMIZER=per_tensor lamb_train per128 128 64 "$D/data"
profile_lines per128 "optimizer|whole"
lamb_train multi128b 128 64 "$D/data"
profile_lines multi128b "optimizer|whole"
rm -rf "$D"
ctest_gpu 8 300 280
el done
