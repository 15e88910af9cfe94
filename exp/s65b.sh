#!/usr/bin/env bash
# Session 65, second call (`bash exp/pack.sh 590 exp/s65b.sh`): the layers' share of the gradient
# norm summed during the backward (DSKC_GRAD_SUMSQ=early) and the word table's gradient assigned
# after zero_grads (bench/NOTES.md t6). The CUDA backend's GPU tests, then BERT-Large seq 128 mb 64
# fp16 acc 1 training alternated three ways (this build; this build with DSKC_GRAD_SUMSQ=end;
# 1efd317's dskc) ROUNDS times (default 2).
# The DSKC_GRAD_SUMSQ switch was measured slower and removed before commit (bench/NOTES.md t6):
# the script needs that working tree, which is not in git.
. "$(dirname "$0")/common.sh"
gpu_head
build_gpu -j16
gpu_test bert_cuda.log 150 gpu_test_bert_cuda
old_dskc 1efd317
run_dir s65
large_train_data "$D"
for r in $(seq "${ROUNDS:-2}"); do
  large_train new$r
  DSKC_GRAD_SUMSQ=end large_train end$r
  DSKC_BIN=/tmp/old/build-gpu/dskc large_train old$r
done
for t in new end old; do echo "== $t"; profile_lines ${t}${ROUNDS:-2} "tables|heads|encoder|overflow|optimizer|whole"; done
rm -rf "$D"
el done
