#!/usr/bin/env bash
# Historical: exp/lamb_multi.patch landed in session 67 (7d19d46) and was removed, so `git apply`
# fails on later trees; the landed tree runs the same tests and A/B without it.
# Session 66 (`bash exp/pack.sh 260 exp/s66e.sh`): Lamb over every tensor in three launches
# (lamb_multi: the layers' pending gradients read in place, the compute copies written by the
# update; bitwise the per-tensor kernels) after exp/s66d.sh measured the per-tensor Lamb step at
# 10.7-11.1 ms against Adam's 3.2 on an H100. The CUDA backend's GPU tests (the multi-vs-per-tensor
# and CPU cases now run Lamb) and the plain-layer ones (Adam's refactored table), then the seq-128
# Lamb training run, this build against DSKC_OPTIMIZER=per_tensor (the old path, same binary).
# Prepared in session 66 and never run (no machine could be started): the change is kept off main as
# exp/lamb_multi.patch, which this script applies first.
. "$(dirname "$0")/common.sh"
git apply exp/lamb_multi.patch || { echo "exp/lamb_multi.patch does not apply"; exit 1; }
gpu_head
build_gpu -j16 dskc gpu_test_bert_cuda gpu_test_plain_layer
gpu_test bert_cuda.log 120 gpu_test_bert_cuda
gpu_test plain_layer.log 60 gpu_test_plain_layer
run_dir s66
large_train_data "$D"
lamb_train multi128 128 64 "$D/data"
profile_lines multi128 "optimizer|whole"
DSKC_OPTIMIZER=per_tensor lamb_train per128 128 64 "$D/data"
profile_lines per128 "optimizer|whole"
rm -rf "$D"
el done
