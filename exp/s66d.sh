#!/usr/bin/env bash
# Session 66 (`bash exp/pack.sh 560 exp/s66d.sh`): the guide's second phase, never profiled on a GPU
# before: BERT-Large at seq 512, micro-batch 16 (deepspeed_bsz32K_lamb_config_seq512.json's), fp16,
# Lamb, accumulation 1 (so every step runs the optimizer and the profile shows it), 40 steps, the last
# 20 profiled by phase; then Lamb at seq 128 mb 64 against the Adam run of large_train (the same
# model and data) for the optimizer's share. One run each.
. "$(dirname "$0")/common.sh"
gpu_head
build_gpu -j16 dskc
run_dir s66
large_train_data "$D"
build-gpu/dskc prepare-data --input examples/corpus --output_dir "$D/data512" --vocab_size 30522 \
  --max_seq_length 512 --max_predictions_per_seq 80 --dupe_factor 4 > "$OUT/prepare512.log" 2>&1 || { tail "$OUT/prepare512.log"; exit 1; }
lamb_train() {  # lamb_train TAG SEQ MICRO DATA [flags...]
  local tag=$1 seq=$2 mb=$3 data=$4; shift 4
  sed "s/\"train_micro_batch_size_per_gpu\": 16/\"train_micro_batch_size_per_gpu\": $mb/" \
    examples/deepspeed_bsz32K_lamb_config_seq512.json > "$LT_DIR/lamb_mb$mb.json"
  timeout 200 ${DSKC_BIN:-build-gpu/dskc} train --deepspeed --deepspeed_config "$LT_DIR/lamb_mb$mb.json" \
    --cf examples/bert_large_lamb.json --train_batch_size "$mb" --gradient_accumulation_steps 1 \
    --max_seq_length "$seq" --max_grad_norm 1.0 --fp16 --loss_scale 0 --max_steps 40 --print_steps 20 \
    --profile_steps 20 --deepspeed_transformer_kernel --backend ${LAMB_BACKEND:-cuda} --checkpoint_steps 1000000 \
    --data_dir "$data" --output_dir "$D/$tag" "$@" > "$OUT/train_$tag.log" 2>&1
  local rc=$?  # before any other expansion resets $?
  echo "[$(( $(date +%s) - t0 )) s] $tag rc=$rc $(grep -E 'step 40/40' "$OUT/train_$tag.log" | tail -1)"
  rm -rf "${D:?}/$tag"
}
lamb_train lamb512 512 16 "$D/data512"
profile_lines lamb512
lamb_train lamb128 128 64 "$D/data"
profile_lines lamb128 "optimizer|whole"
large_train adam128
profile_lines adam128 "optimizer|whole"
rm -rf "$D"
el done
