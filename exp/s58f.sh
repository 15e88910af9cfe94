#!/usr/bin/env bash
# Session 58 (`bash exp/pack.sh 330 exp/s58f.sh`), the short form of exp/s58e.sh for the device time left
# after that call's machine stopped answering: the GPU test binaries that hold the new cases (every case
# of each), then one `dskc train` pair, plain vs --cuda_graphs (BERT-Large seq 128, micro-batch 64,
# fp16, 20 steps, seq/s over steps 11-20).
. "$(dirname "$0")/common.sh"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/gpu.txt"
build_gpu -j16 dskc gpu_test_layer_behaviour gpu_test_bert_cuda
el "GPU tests"
gpu_test test_layer_behaviour.log 150 gpu_test_layer_behaviour
gpu_test test_bert_cuda.log 80 gpu_test_bert_cuda
el "train A/B"
W=/tmp/s58f; mkdir -p $W
timeout 60 build-gpu/dskc prepare-data --input examples/corpus --output_dir $W/data --vocab_size 30522 --max_seq_length 128 \
  --max_predictions_per_seq 20 --dupe_factor 2 > $OUT/prepare.log 2>&1 || { tail -5 $OUT/prepare.log; exit 1; }
train() {  # train TAG ARGS...
  local tag=$1; shift
  timeout $(( 320 - $(date +%s) + t0 )) build-gpu/dskc train --deepspeed --deepspeed_config examples/deepspeed_bsz4096_adam_config.json \
    --cf examples/bert_large_adam_seq128.json --train_batch_size 64 --gradient_accumulation_steps 1 \
    --max_seq_length 128 --max_grad_norm 1.0 --fp16 --loss_scale 0 --max_steps 20 --print_steps 10 \
    --deepspeed_transformer_kernel --backend cuda --checkpoint_steps 1000000 --data_dir $W/data \
    --output_dir $W/$tag "$@" > $OUT/train_$tag.log 2>&1
  echo "[$(( $(date +%s) - t0 )) s] $tag rc=$? $(grep -E 'step 20/20' $OUT/train_$tag.log | tail -1)"
  rm -rf $W/$tag
}
train plain; train graphs --cuda_graphs; train flags_plain $FL_ALL; train flags_graphs $FL_ALL --cuda_graphs
el done
