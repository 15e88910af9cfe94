#!/usr/bin/env bash
# (Session 71: the patch landed in templates/model/params.cuh, so this now runs main as it is.)
# Session 70, first call (`bash exp/pack.sh 590 exp/s70b.sh`; no machine came in session 70): main with
# exp/lamb_store_partials.patch applied (both Lamb stage-1 kernels end in one helper), built whole;
# gpu_test_bert_cuda (multi-tensor vs per-tensor Lamb bitwise reads those partials); the
# Adam and Lamb training profiles (the Lamb run should end at session 68/69's loss 7.2324, gnorm 2.53);
# then exp/s70a.sh on any card (the memory flags under compare_torch's and layer_matrix's settings).
. "$(dirname "$0")/common.sh"
gpu_head
bert_cuda_check
train_and_table 0
grep -h "step 40/40" "$OUT"/train_lamb.log | tail -1
el "exp/s70a.sh"
bash exp/s70a.sh
