#!/usr/bin/env bash
# Session 60, the smallest call for the three prepared patches (s60c without the suite), for when
# the session's device time is nearly spent: `bash exp/pack.sh L exp/s60d.sh`. Builds dskc and the
# CUDA backend's GPU tests only, runs those tests with all three patches, then the profiled BERT-Large
# train run with them and, the patches reversed and dskc rebuilt, on main (the A/B on one machine).
. "$(dirname "$0")/common.sh"
for p in model_reductions_split optimizer_f32 lazy_zero; do apply_patch exp/$p.patch; done
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/gpu.txt"
build_gpu -j16 dskc gpu_test_bert_cuda
el "CUDA backend GPU tests"
gpu_test test_bert_cuda.log 120 gpu_test_bert_cuda
large_train_data /tmp/s60d
train() {  # train TAG ARGS...: large_train, then the main phases
  large_train "$@"
  grep -E "heads|embeddings backward|optimizer|overflow|zero grad|encoder|whole step" "$OUT/train_$1.log"
}
el "train with the three patches"
train new1
for p in lazy_zero optimizer_f32 model_reductions_split; do git apply -R exp/$p.patch || exit 1; done
ninja -C build-gpu dskc > $OUT/build_main.log 2>&1 || exit 1
el "train main"
train main1
el done
