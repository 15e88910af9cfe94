#!/usr/bin/env bash
# Session 64, fourth call (`bash exp/pack.sh 590 exp/s64d.sh`): the landed form of the MLM heads
# (decoder GEMMs over the padded vocabulary, two-pass 16-byte cross-entropy, row-wise head gradient
# scatter). Nsight Compute over a one-layer BERT-Large's 3 training steps (the heads' kernels printed);
# the BERT-Large seq 128 mb 64 fp16 acc 1 profile, this build then the previous commit's dskc (built
# from `git archive 03d8096`); then `ctest -L gpu` in the time left.
. "$(dirname "$0")/common.sh"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
git log --oneline -1; git status --short | head
build_gpu -j16
el "old build (03d8096)"
rm -rf /tmp/old && mkdir -p /tmp/old && git archive 03d8096 | tar -x -C /tmp/old
(cd /tmp/old && cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > "$OUT/configure_old.log" 2>&1 &&
  ninja -C build-gpu dskc > "$OUT/build_old.log" 2>&1) || { echo "old build failed"; tail -20 "$OUT/build_old.log"; }
D=/tmp/s64; avail=$(df -BG --output=avail /dev/shm 2>/dev/null | tail -1 | tr -dc 0-9)
[ "${avail:-0}" -ge 16 ] && D=/dev/shm/s64
large_train_data "$D"
sed 's/"num_hidden_layers": 24/"num_hidden_layers": 1/' examples/bert_large_adam_seq128.json > "$D/bert1.json"
el "ncu padded"
timeout 120 "$NCU" --csv --metrics gpu__time_duration.sum --cache-control none --clock-control none \
  build-gpu/dskc train --deepspeed --deepspeed_config examples/deepspeed_bsz4096_adam_config.json \
  --cf "$D/bert1.json" --train_batch_size 64 --gradient_accumulation_steps 1 --max_seq_length 128 \
  --max_grad_norm 1.0 --fp16 --loss_scale 0 --max_steps 3 --print_steps 1 --deepspeed_transformer_kernel \
  --backend cuda --checkpoint_steps 1000000 --data_dir "$D/data" --output_dir "$D/ncu" \
  > "$OUT/ncu_padded.csv" 2> "$OUT/ncu_padded.err"; echo "ncu rc=$?"
python3 exp/ncu_step.py "$OUT/ncu_padded.csv" --from-last model_embedding_fwd > "$OUT/ncu_step_padded.txt"
sed -n '/(8192, 1, 1)  model_layernorm_fwd/,/model_layernorm_bwd/p' "$OUT/ncu_step_padded.txt" |
  grep -E "xent|nvjet_sm90_hsh_1|cutlass|scatter|accumulate \(|splitK" | head -8 | cut -c1-100
tail -1 "$OUT/ncu_step_padded.txt"; rm -rf "$D/ncu"
large_train new1; DSKC_BIN=/tmp/old/build-gpu/dskc large_train old1
for t in new1 old1; do echo "== $t"; grep -h -A17 "^step profile" "$OUT/train_$t.log" | grep -E "heads|encoder|whole" | cut -c1-90; done
rm -rf "$D"
ctest_gpu 8 $(( 575 - $(date +%s) + t0 ))
el done
