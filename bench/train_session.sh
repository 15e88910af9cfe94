#!/usr/bin/env bash
# GPU-machine run for the trainer: build, all GPU tests, the guide's command line with a tiny
# model (kernel and plain layers), BERT-Large seq 128 micro-batch 64 fp16 throughput with
# `dskc train` (the last 4 steps profiled by phase), and the PyTorch eager BERT-Large step on the same
# shapes. Logs under $OUT.
set -u
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
export DSKC_CACHE_DIR=$PWD/build-gpu/cache
step() { echo; echo "=== $* ==="; }
step build
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > "$OUT/configure.log" 2>&1 || { tail -20 "$OUT/configure.log"; exit 1; }
targets="dskc $(ninja -C build-gpu -t targets all | grep -o '^gpu_test_[a-z_0-9]*' | sort -u | tr '\n' ' ')"
ninja -C build-gpu $targets > "$OUT/build.log" 2>&1 || { grep -E "error|FAILED" "$OUT/build.log" | head -30; exit 1; }
step "ctest -L gpu"
(cd build-gpu && ctest -L gpu -V --timeout 900) > "$OUT/ctest_gpu.log" 2>&1
grep -E "tests passed|tests failed|\*\*\*Failed|Test #" "$OUT/ctest_gpu.log" | head -20
step "guide command, tiny model, kernel vs plain layer"
for k in --deepspeed_transformer_kernel ""; do
  d=$OUT/tiny${k:+_kernel}
  timeout 120 build-gpu/dskc train --deepspeed --deepspeed_config examples/deepspeed_tiny_config.json \
    --cf examples/bert_tiny_model.json --train_batch_size 8 --max_seq_length 128 --gradient_accumulation_steps 2 \
    --max_grad_norm 1.0 --fp16 --loss_scale 0 --max_steps 30 --print_steps 10 $k --output_dir "$d" \
    --backend cuda > "$d.log" 2>&1
  echo "rc=$? $k"; grep -E "step +(10|20|30)|error" "$d.log" | tail -4
done
step "BERT-Large seq 128, micro-batch 64, fp16: dskc train"
timeout 300 build-gpu/dskc train --deepspeed --deepspeed_config examples/deepspeed_bsz4096_adam_config.json \
  --cf examples/bert_large_adam_seq128.json --train_batch_size 256 --gradient_accumulation_steps 4 \
  --max_seq_length 128 --max_grad_norm 1.0 --fp16 --loss_scale 0 --max_steps 8 --print_steps 2 --profile_steps 4 \
  --deepspeed_transformer_kernel --output_dir "$OUT/large" --backend cuda --checkpoint_steps 1000 > "$OUT/large.log" 2>&1
echo "rc=$?"; grep -E "^step [0-9]+/|^\| (encoder|final|embeddings backward|optimizer|whole)" "$OUT/large.log"
rm -rf "$OUT/large" "$OUT"/tiny*/  # keep logs only (checkpoints are large)
step "PyTorch eager BERT-Large step"
PYTHONUNBUFFERED=1 python3 bench/bert_train_torch.py --batch 64 --seq 128 2>&1 | tail -4 | tee "$OUT/torch_train.log"
