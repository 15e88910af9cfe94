#!/usr/bin/env bash
# Session 64, third call (`bash exp/pack.sh 590 exp/s64c.sh`): the MLM heads with aligned decoder
# GEMMs (DSKC_HEAD_GEMMS), the one-pass-read cross-entropy and the row-wise head gradient scatter.
# The CUDA backend's GPU tests; Nsight Compute over a one-layer BERT-Large's 3 training steps for each
# DSKC_HEAD_GEMMS form (the heads' kernels printed); then the BERT-Large seq 128 mb 64 fp16 acc 1
# profile, this build alternated with the previous commit's dskc (built from `git archive 03d8096`),
# (s64c: the register-cached cross-entropy and the weight gradient over padded rows).
# (The DSKC_HEAD_GEMMS forms vocab / rows / aligned existed only in session 64's working tree; the landed
# options are padded, the old rows form, and plain: bench/NOTES.md t5.)
. "$(dirname "$0")/common.sh"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
git log --oneline -1; git status --short | head
build_gpu -j16 dskc gpu_test_bert_cuda
el "old build (03d8096)"
rm -rf /tmp/old && mkdir -p /tmp/old && git archive 03d8096 | tar -x -C /tmp/old
(cd /tmp/old && cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > "$OUT/configure_old.log" 2>&1 &&
  ninja -C build-gpu dskc > "$OUT/build_old.log" 2>&1) || { echo "old build failed"; tail -20 "$OUT/build_old.log"; }
el "gpu_test_bert_cuda"
gpu_test bert_cuda.log 300 gpu_test_bert_cuda
D=/tmp/s64; avail=$(df -BG --output=avail /dev/shm 2>/dev/null | tail -1 | tr -dc 0-9)
[ "${avail:-0}" -ge 16 ] && D=/dev/shm/s64
large_train_data "$D"
sed 's/"num_hidden_layers": 24/"num_hidden_layers": 1/' examples/bert_large_adam_seq128.json > "$D/bert1.json"
ncu_heads() {  # ncu_heads TAG BINARY
  el "ncu $1"
  timeout 120 "$NCU" --csv --metrics gpu__time_duration.sum --cache-control none --clock-control none \
    "$2" train --deepspeed --deepspeed_config examples/deepspeed_bsz4096_adam_config.json \
    --cf "$D/bert1.json" --train_batch_size 64 --gradient_accumulation_steps 1 --max_seq_length 128 \
    --max_grad_norm 1.0 --fp16 --loss_scale 0 --max_steps 3 --print_steps 1 --deepspeed_transformer_kernel \
    --backend cuda --checkpoint_steps 1000000 --data_dir "$D/data" --output_dir "$D/ncu_$1" \
    > "$OUT/ncu_$1.csv" 2> "$OUT/ncu_$1.err"; echo "ncu rc=$?"
  python3 exp/ncu_step.py "$OUT/ncu_$1.csv" --from-last model_embedding_fwd > "$OUT/ncu_step_$1.txt"
  sed -n '/(8192, 1, 1)  model_layernorm_fwd/,/model_layernorm_bwd/p' "$OUT/ncu_step_$1.txt" | cut -c1-110
  tail -1 "$OUT/ncu_step_$1.txt"
  rm -rf "$D/ncu_$1"
}
for f in vocab rows aligned; do DSKC_HEAD_GEMMS=$f ncu_heads $f build-gpu/dskc; done

for r in 1 2; do large_train new$r; DSKC_BIN=/tmp/old/build-gpu/dskc large_train old$r; done

for t in new2 old2; do echo "== $t"; grep -h -A17 "^step profile" "$OUT/train_$t.log" | grep -E "heads|encoder|whole" | cut -c1-90; done
rm -rf "$D"
el done
