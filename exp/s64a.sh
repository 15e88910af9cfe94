#!/usr/bin/env bash
# Session 64, first call: where the BERT step's heads phase (1.40 ms on an H100, t4) spends its time.
# Nsight Compute times every kernel of a 3-step `dskc train` of a one-layer BERT-Large (vocab 30522,
# seq 128, micro-batch 64, fp16; the heads do not depend on the layer count) and prints the last step
# in launch order (exp/ncu_step.py --from-last model_embedding_fwd). On an H200 it then runs
# exp/s63c.sh's owed measurements in the time left.
. "$(dirname "$0")/common.sh"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
git log --oneline -1; git status --short | head
build_gpu -j16 dskc
D=/tmp/s64; avail=$(df -BG --output=avail /dev/shm 2>/dev/null | tail -1 | tr -dc 0-9)
[ "${avail:-0}" -ge 16 ] && D=/dev/shm/s64
large_train_data "$D"
sed 's/"num_hidden_layers": 24/"num_hidden_layers": 1/' examples/bert_large_adam_seq128.json > "$D/bert1.json"
el "ncu, one-layer BERT-Large, 3 steps"
timeout 240 "$NCU" --csv --metrics gpu__time_duration.sum --cache-control none --clock-control none \
  build-gpu/dskc train --deepspeed --deepspeed_config examples/deepspeed_bsz4096_adam_config.json \
  --cf "$D/bert1.json" --train_batch_size 64 --gradient_accumulation_steps 1 --max_seq_length 128 \
  --max_grad_norm 1.0 --fp16 --loss_scale 0 --max_steps 3 --print_steps 1 --deepspeed_transformer_kernel \
  --backend cuda --checkpoint_steps 1000000 --data_dir "$D/data" --output_dir "$D/ncu1" \
  > "$OUT/ncu_train1.csv" 2> "$OUT/ncu_train1.err"; echo "ncu rc=$?"
python3 exp/ncu_step.py "$OUT/ncu_train1.csv" --from-last model_embedding_fwd | tee "$OUT/ncu_step1.txt"
rm -rf "$D/ncu1"
if grep -q H200 "$OUT/gpu.txt"; then
  mode() { local tag=$1 m=$2; shift 2; DSKC_OPTIMIZER_OVERLAP=$m large_train "$tag" "$@"; }
  mode sync1 sync; mode ovl1 overlap
  DSKC_LAYER_GRADS=accumulate large_train acc1
  mode sync2 sync; mode ovl2 overlap
  for t in sync2 ovl2 acc1; do echo "== $t"; grep -h -A17 "^step profile" "$OUT/train_$t.log" | tail -15 | cut -c1-90; done
  rm -rf "$D"
  compare_r3 585
else
  large_train base1 | tee /dev/null
  grep -h -A17 "^step profile" "$OUT/train_base1.log" | tail -15 | cut -c1-90
  rm -rf "$D"
fi
el done
