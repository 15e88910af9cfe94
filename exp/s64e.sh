#!/usr/bin/env bash
# Session 64, last call (`bash exp/pack.sh LIMIT exp/s64e.sh`, asked as nvidia-h200): only on an H200
# (on any other GPU it stops at once): the landed BERT-Large seq 128 mb 64 fp16 acc 1 training
# profile (the first H200 one since session 59), then compare_torch's side-by-side table (3 rounds)
# in the time left (until S64E_END seconds, default 410).
. "$(dirname "$0")/common.sh"
gpu_head
grep -q H200 "$OUT/gpu.txt" || { echo "not an H200: nothing run"; exit 0; }
build_gpu -j16 dskc
run_dir s64
large_train_data "$D"
large_train h200
profile_lines h200
rm -rf "$D"
compare_r3 $(( ${S64E_END:-410} ))
el done
