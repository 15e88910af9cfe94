#!/usr/bin/env bash
# Session 58 (`bash exp/pack.sh 200 exp/s58g.sh`), the last of the device time: the new CUDA-graph GPU
# cases of the layer and the CUDA backend, then one `dskc train` pair, plain vs --cuda_graphs
# (BERT-Large seq 128, micro-batch 64, fp16, 16 steps, seq/s over steps 9-16).
. "$(dirname "$0")/common.sh"
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$OUT/gpu.txt"
build_gpu -j16 dskc gpu_test_layer_behaviour gpu_test_bert_cuda
el "GPU cases"
gpu_test test_layer_graphs.log 60 gpu_test_layer_behaviour -tc="*CUDA graph*"
gpu_test test_bert_graphs.log 40 gpu_test_bert_cuda -tc="*cuda_graphs*"
el "train A/B"
W=/tmp/s58g; mkdir -p $W
timeout 40 build-gpu/dskc prepare-data --input examples/corpus --output_dir $W/data --vocab_size 30522 --max_seq_length 128 \
  --max_predictions_per_seq 20 --dupe_factor 1 > $OUT/prepare.log 2>&1 || { tail -5 $OUT/prepare.log; exit 1; }
for tag in plain graphs; do
  timeout $(( 195 - $(date +%s) + t0 )) build-gpu/dskc train --deepspeed --deepspeed_config examples/deepspeed_bsz4096_adam_config.json \
    --cf examples/bert_large_adam_seq128.json --train_batch_size 64 --gradient_accumulation_steps 1 \
    --max_seq_length 128 --max_grad_norm 1.0 --fp16 --loss_scale 0 --max_steps 16 --print_steps 8 \
    --deepspeed_transformer_kernel --backend cuda --checkpoint_steps 1000000 --data_dir $W/data \
    --output_dir $W/$tag $([ $tag = graphs ] && echo --cuda_graphs) > $OUT/train_$tag.log 2>&1
  echo "[$(( $(date +%s) - t0 )) s] $tag rc=$? $(grep -E 'step 16/16' $OUT/train_$tag.log | tail -1)"
done
el done
