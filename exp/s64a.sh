#!/usr/bin/env bash
# Session 64, first call: where the BERT step's heads phase (1.40 ms on an H100, t4) spends its time.
# Nsight Compute times every kernel of a 3-step `dskc train` of a one-layer BERT-Large (vocab 30522,
# seq 128, micro-batch 64, fp16; the heads do not depend on the layer count) and prints the last step
# in launch order (exp/ncu_step.py --from-last model_embedding_fwd). On an H200 it then runs
# exp/s63c.sh's owed measurements in the time left.
. "$(dirname "$0")/common.sh"
gpu_head
build_gpu -j16 dskc
run_dir s64
large_train_data "$D"
ncu_train1 train1 build-gpu/dskc 240
cat "$OUT/ncu_step_train1.txt"
if grep -q H200 "$OUT/gpu.txt"; then
  rm -rf "$D"
  bash "$(dirname "$0")/s63c.sh"  # its own clock: pack.sh's limit ends its side-by-side run
else
  large_train base1
  profile_lines base1
  rm -rf "$D"
fi
el done
