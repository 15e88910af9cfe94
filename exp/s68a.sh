#!/usr/bin/env bash
# Prepared in session 67 (`bash exp/pack.sh 420 exp/s68a.sh`), not yet run: Lamb in fp32 math with
# a vectorized stage 1 (exp/lamb_f32.patch; bench/NOTES.md t9). Main's dskc built first and kept
# as /tmp/dskc_main (the device's checkout may have an older git HEAD, so no `git archive`), then
# the patch applied, dskc and gpu_test_bert_cuda rebuilt, the CUDA backend's GPU tests (the Lamb
# multi-vs-per-tensor cases bitwise, the fp32 CPU comparison within 3e-5), the patched Lamb kernels
# by Nsight Compute, then Lamb training at seq 128 alternated twice, patched against main.
. "$(dirname "$0")/common.sh"
gpu_head
build_gpu -j16 dskc
cp build-gpu/dskc /tmp/dskc_main
git apply exp/lamb_f32.patch || { echo "exp/lamb_f32.patch does not apply"; exit 1; }
build_gpu -j16 dskc gpu_test_bert_cuda
gpu_test bert_cuda.log 120 gpu_test_bert_cuda
run_dir s68
large_train_data "$D"
ncu_lamb f32
for r in 1 2; do
  lamb_train f32_$r 128 64 "$D/data"
  profile_lines f32_$r "encoder|optimizer|whole"
  DSKC_BIN=/tmp/dskc_main lamb_train main_$r 128 64 "$D/data"
  profile_lines main_$r "encoder|optimizer|whole"
done
rm -rf "$D"
el done
