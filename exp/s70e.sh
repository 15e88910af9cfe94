#!/usr/bin/env bash
# (Session 71: the patch landed in templates/model/params.cuh, so this now runs main as it is.)
# Session 70, the shortest call for exp/lamb_store_partials.patch (`bash exp/pack.sh 230 exp/s70e.sh`):
# the patch applied, dskc and gpu_test_bert_cuda built; gpu_test_bert_cuda (the only GPU test that runs
# Lamb: multi-tensor vs per-tensor bitwise, both reading the stage-1 partials the patch's helper stores);
# then Lamb training (BERT-Large seq 128, micro-batch 64), which should end at sessions 68-69's loss
# 7.2324 and gradient norm 2.53.
. "$(dirname "$0")/common.sh"
gpu_head
bert_cuda_check dskc gpu_test_bert_cuda
run_dir s70
large_train_data "$D"
lamb_train lamb 128 64 "$D/data"
profile_lines lamb "encoder|optimizer|whole"
rm -rf "$D"
el done
