#!/usr/bin/env bash
# Session 70, the call for correctness when device time is short (`bash exp/pack.sh 590 exp/s70c.sh`):
# the tree with the lamb_store_partials tidy built whole, gpu_test_bert_cuda (multi-tensor vs
# per-tensor Lamb bitwise), then the whole `ctest -L gpu`. exp/s70b.sh's training profiles and
# exp/s70a.sh follow in another call if time is left.
. "$(dirname "$0")/common.sh"
gpu_head
build_gpu -j16
el "gpu_test_bert_cuda"
gpu_test bert_cuda.log 120 gpu_test_bert_cuda
ctest_gpu 8 450 420
el done
