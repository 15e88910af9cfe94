#!/usr/bin/env bash
# Session 69 (`bash exp/pack.sh 590 exp/s69a.sh`): the working tree (main plus the upload_table tidy
# of trainer/bert_cuda.cpp) built; gpu_test_bert_cuda (Adam's and Lamb's multi-tensor tables, the
# gradient-norm range table); then the Adam and Lamb training profiles (seq 128, micro-batch 64) and
# compare_torch's side-by-side table, 3 rounds with the graph columns: on an H200 these are the rows
# the README still owes. On an H100 the table is left out (session 68 has its H100 rows): the training
# runs check the tidy against session 68's numbers (Adam ~1831 seq/s; Lamb ~1750, loss 7.2324).
. "$(dirname "$0")/common.sh"
gpu_head
build_gpu -j16 dskc gpu_test_bert_cuda
el "gpu_test_bert_cuda"
gpu_test bert_cuda.log 120 gpu_test_bert_cuda
if grep -q H200 "$OUT/gpu.txt"; then train_and_table 585; else train_and_table 0; fi
el done
