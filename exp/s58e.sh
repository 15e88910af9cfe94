#!/usr/bin/env bash
# Session 58 (`bash exp/pack.sh 595 exp/s58e.sh`): layers launched as CUDA graphs in training
# (LayerOptions::cuda_graphs, `dskc train --cuda_graphs`). The new GPU cases first (stops on a
# failure), then BERT-Large seq 128, micro-batch 64, fp16 `dskc train` with and without
# --cuda_graphs (20 steps, seq/s over steps 11-20; 2 alternations; then all three memory flags, one
# each), then the whole `ctest -L gpu` in the time left.
. "$(dirname "$0")/common.sh"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/gpu.txt"
targets="dskc $(cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > /dev/null 2>&1; ninja -C build-gpu -t targets all | grep -o '^gpu_test_[a-z_0-9]*' | sort -u | tr '\n' ' ')"
build_gpu -j16 $targets
el "new GPU cases"
gpu_test test_layer_graphs.log 200 gpu_test_layer_behaviour -tc="*CUDA graph*"
gpu_test test_bert_graphs.log 120 gpu_test_bert_cuda -tc="*cuda_graphs*"
el "train A/B"
W=/tmp/s58e; mkdir -p $W
build-gpu/dskc prepare-data --input examples/corpus --output_dir $W/data --vocab_size 30522 --max_seq_length 128 \
  --max_predictions_per_seq 20 --dupe_factor 2 > $OUT/prepare.log 2>&1 || { tail -5 $OUT/prepare.log; exit 1; }
train() {  # train TAG ARGS...
  local tag=$1; shift
  timeout 120 build-gpu/dskc train --deepspeed --deepspeed_config examples/deepspeed_bsz4096_adam_config.json \
    --cf examples/bert_large_adam_seq128.json --train_batch_size 64 --gradient_accumulation_steps 1 \
    --max_seq_length 128 --max_grad_norm 1.0 --fp16 --loss_scale 0 --max_steps 20 --print_steps 10 \
    --deepspeed_transformer_kernel --backend cuda --checkpoint_steps 1000000 --data_dir $W/data \
    --output_dir $W/$tag "$@" > $OUT/train_$tag.log 2>&1
  echo "$tag rc=$? $(grep -E 'step 20/20' $OUT/train_$tag.log | tail -1)"
  rm -rf $W/$tag
}
for r in 1 2; do train plain$r; train graphs$r --cuda_graphs; done
train flags_plain $FL_ALL; train flags_graphs $FL_ALL --cuda_graphs
ctest_gpu 16 $(( 590 - $(date +%s) + t0 )) 300
el done
