#!/usr/bin/env bash
# Session 65, last call (`bash exp/pack.sh 590 exp/s65d.sh`, asked as nvidia-h200): the landed tree
# (e3d390e: the word table's gradient assigned after zero_grads) built whole; on an H200
# compare_torch's side-by-side table (3 rounds, until S65D_CMP_END s) first; then `ctest -L gpu`;
# on any other GPU after it the BERT-Large seq 128 mb 64 fp16 acc 1 training profile.
. "$(dirname "$0")/common.sh"
gpu_head
build_gpu -j16
h200=0; grep -q H200 "$OUT/gpu.txt" && h200=1
[ $h200 = 1 ] && compare_r3 "${S65D_CMP_END:-270}"
ctest_gpu 8 300 280
if [ $h200 = 0 ]; then
  run_dir s65
  large_train_data "$D"
  large_train landed
  profile_lines landed
  rm -rf "$D"
fi
el done
