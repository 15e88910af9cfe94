#!/usr/bin/env bash
# Session 65, first call (`bash exp/pack.sh 590 exp/s65a.sh`, asked as nvidia-h200): the GPU run owed
# by session 64's review mend (1efd317). The whole tree built; on an H200 first compare_torch's
# side-by-side table (3 rounds, until S65A_CMP_END s), then the CUDA backend's GPU tests; on any
# other GPU the whole `ctest -L gpu`; then the BERT-Large seq 128 mb 64 fp16 acc 1 training profile.
. "$(dirname "$0")/common.sh"
gpu_head
build_gpu -j16
if grep -q H200 "$OUT/gpu.txt"; then
  compare_r3 "${S65A_CMP_END:-330}"
  gpu_test bert_cuda.log 150 gpu_test_bert_cuda
else
  ctest_gpu 8 330 300
fi
run_dir s65
large_train_data "$D"
large_train head
profile_lines head
rm -rf "$D"
el done
