#!/usr/bin/env bash
# Prepared in session 59, for the next session's first call (`bash exp/pack.sh 560 exp/s60a.sh`):
# exp/model_reductions_split.patch, two of the model module's deterministic reductions in two stages:
#  - the LayerNorm gamma/beta gradients (embedding, final and MLM transform LayerNorms): partial sums
#    of 64-row chunks over every block of the grid, then their sum in chunk order
#    (model_layernorm_param_grad_part / _finish), where one block per 256 columns walked all 8192 rows
#    (4 blocks on the whole GPU);
#  - the embedding-table gradients: each token-id / position / token-type group cut into pieces of at
#    most 64 rows summed by one block each, then each group's pieces in order
#    (model_grouped_rows_part / _finish), where one block per group walked it alone (the padding id
#    and the two token types hold thousands of rows). Groups of at most 64 rows sum as before;
#  - (added in session 60) the bias-gradient column sums: 32 columns per block, its 8 warps on row
#    slices added in slice order, where one thread per column walked all rows (~120 blocks for the
#    decoder bias's 30522 columns).
# Session 59's step profile (H200, bench/NOTES.md t1) put the heads at 3.16 ms and the embeddings
# backward at 3.09 ms of a 38.5 ms step. Prediction: both phases -1 to -2.5 ms, +5-10% seq/s.
# Steps: build with the patch, the CUDA backend's GPU tests (gradients against the CPU backend), a
# profiled BERT-Large train run (seq 128, micro-batch 64, fp16, accumulation 1, steps 21-40 of 40);
# the patch reversed, dskc rebuilt, the same run (the A/B on one machine); then the patch again, the
# run once more, and the model module's kernels over 3 training steps by Nsight Compute (what the
# heads and the embeddings backward still spend). The whole `ctest -L gpu` with all three of session
# 60's patches: exp/s60c.sh.
. "$(dirname "$0")/common.sh"
apply_patch exp/model_reductions_split.patch
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/gpu.txt"
build_gpu -j16
el "CUDA backend GPU tests"
gpu_test test_bert_cuda.log 150 gpu_test_bert_cuda
large_train_data /tmp/s60a
train() { train_phases "heads|embeddings backward|whole step" "$@"; }  # the phases the patch is about
el "train with the split"
train split1
git apply -R exp/model_reductions_split.patch && ninja -C build-gpu dskc > $OUT/build_rev.log 2>&1 || exit 1
el "train without (the patch reversed)"
train serial1
git apply exp/model_reductions_split.patch && ninja -C build-gpu dskc > $OUT/build_fwd.log 2>&1 || exit 1
train split2
el "the model module's kernels in 3 training steps by Nsight Compute (with the split)"
timeout 150 "$NCU" --csv --metrics gpu__time_duration.sum --cache-control none --clock-control none -k regex:model_ \
  build-gpu/dskc train --deepspeed --deepspeed_config examples/deepspeed_bsz4096_adam_config.json \
  --cf examples/bert_large_adam_seq128.json --train_batch_size 64 --gradient_accumulation_steps 1 \
  --max_seq_length 128 --max_grad_norm 1.0 --fp16 --loss_scale 0 --max_steps 3 --print_steps 1 \
  --deepspeed_transformer_kernel --backend cuda --checkpoint_steps 1000000 --data_dir "$LT_DIR/data" \
  --output_dir "$LT_DIR/ncu" > "$OUT/ncu_model.csv" 2> "$OUT/ncu_model_err.txt"
echo "ncu rc=$?"
python3 exp/ncu_kernels.py "$OUT/ncu_model.csv" --steps 3 --top 30 | tee "$OUT/ncu_model.txt"
el done
