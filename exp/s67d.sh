#!/usr/bin/env bash
# Session 67, call 4 (`bash exp/pack.sh 200 exp/s67d.sh`): the three Lamb launches' durations by
# Nsight Compute (BERT-Large, seq 128, micro-batch 64, Lamb, 3 steps; only the lamb_multi kernels
# profiled) against the ~13.4 GB they move per step.
. "$(dirname "$0")/common.sh"
gpu_head
build_gpu -j16 dskc
run_dir s67
large_train_data "$D"
sed "s/\"train_micro_batch_size_per_gpu\": 16/\"train_micro_batch_size_per_gpu\": 64/" \
  examples/deepspeed_bsz32K_lamb_config_seq512.json > "$D/lamb_mb64.json"
timeout 150 "$NCU" --csv --metrics gpu__time_duration.sum,dram__bytes.sum --cache-control none --clock-control none \
  --kernel-name regex:lamb_multi build-gpu/dskc train --deepspeed --deepspeed_config "$D/lamb_mb64.json" \
  --cf examples/bert_large_lamb.json --train_batch_size 64 --gradient_accumulation_steps 1 --max_seq_length 128 \
  --max_grad_norm 1.0 --fp16 --loss_scale 0 --max_steps 3 --print_steps 1 --deepspeed_transformer_kernel \
  --backend cuda --checkpoint_steps 1000000 --data_dir "$D/data" --output_dir "$D/ncu" > "$OUT/ncu_lamb.csv" 2> "$OUT/ncu_lamb.err"
echo "ncu rc=$?"
grep -E "lamb_multi" "$OUT/ncu_lamb.csv" | awk -F'","' '{print $5, $(NF-2), $NF}' | tail -12
rm -rf "$D"
el done
