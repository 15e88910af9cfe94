#!/usr/bin/env bash
# The main job on the bundled example:
#  1. build;
#  2. compile the guide's BERT-Large layer (Pre-LN, hidden 1024, 16 heads, seq 128, batch 64,
#     fp16) to a cubin with its manifest and print its inspection (kernels, activation memory
#     per flag, registers);
#  3. pre-train a small BERT on the bundled real-text corpus with the guide's command line
#     (`dskc train` in place of `deepspeed deepspeed_train.py`): on the GPU when there is one,
#     else on the CPU backend. Output (checkpoint, metrics.csv, loss_curve.png) in out/train.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
mkdir -p out
build/dskc compile examples/bert_large_layer.json -o out/bert_large_layer.cubin
build/dskc inspect examples/bert_large_layer.json --kernels --memory --resources
rm -rf out/train
build/dskc train --deepspeed --deepspeed_config examples/deepspeed_tiny_config.json \
  --cf examples/bert_tiny_model.json --train_batch_size 8 --max_seq_length 128 \
  --gradient_accumulation_steps 2 --max_grad_norm 1.0 --fp16 --loss_scale 0 \
  --max_steps 30 --print_steps 5 --deepspeed_transformer_kernel --output_dir out/train
