#!/usr/bin/env bash
# Data-parallel scaling of `dskc train` (issues #6/#7): BERT-Large, seq 128, micro-batch 64 per GPU,
# fp16, DeepSpeed transformer kernel; sequences/s on each GPU count in $GPUS with bucketed
# all-reduce overlapped with backward (fp16 gradients, DeepSpeed's default), with
# --delay_allreduce, and overlapped with "fp32_allreduce": true (MODES="overlap delay fp32";
# "staged" adds the overlapped fp16 all-reduce without the in-place layer path,
# DSKC_TEST_ALLREDUCE=staged, "nccl" the in-place layer sums over NCCL instead of copy engines,
# DSKC_TEST_ALLREDUCE=nccl, "split" the word-embedding table summed in two parts,
# DSKC_TEST_ALLREDUCE=split_word, for comparison). Prints a markdown table and
# writes it to $OUT/dp_scaling.md (logs in $OUT/dp_*.log).
#   GPUS="1 2" STEPS=12 ACC=1 DSKC=build-gpu/dskc bash bench/dp_scaling.sh
# seq/s is the rate over the second half of the steps (print interval STEPS/2), so start-up and
# the first steps' autotuning/allocation are not counted.
set -u
OUT=${OUT:-$PWD/out}
BIN=${DSKC:-build-gpu/dskc}
GPUS=${GPUS:-1 2}
STEPS=${STEPS:-12}
ACC=${ACC:-1}
MICRO=64
mkdir -p "$OUT"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export DSKC_CACHE_DIR=${DSKC_CACHE_DIR:-$PWD/build-gpu/cache}
half=$((STEPS / 2))

python3 - "$WORK/ds_fp32_allreduce.json" <<'PY'
import json, sys
c = json.load(open("examples/deepspeed_bsz4096_adam_config.json"))
c["fp32_allreduce"] = True
json.dump(c, open(sys.argv[1], "w"))
PY
common="--deepspeed --cf examples/bert_large_adam_seq128.json
  --max_seq_length 128 --max_grad_norm 1.0 --fp16 --loss_scale 0 --max_steps $STEPS --print_steps $half
  --deepspeed_transformer_kernel --backend cuda --checkpoint_steps 1000000 --gradient_accumulation_steps $ACC"

# Shards once (the 1-GPU run's default preparation), reused by every run.
echo "preparing seq-128 shards from the bundled corpus ..."
$BIN prepare-data --input examples/corpus --output_dir "$WORK/data" --vocab_size 30522 --max_seq_length 128 \
  --max_predictions_per_seq 20 --dupe_factor 2 > "$OUT/dp_prepare.log" 2>&1 || { tail -5 "$OUT/dp_prepare.log"; exit 1; }

rate() { grep -E "step $STEPS/$STEPS" "$1" | sed -E 's/.*\| ([0-9.]+) seq\/s.*/\1/' | tail -1; }
wait_ms() { grep -E "step $STEPS/$STEPS" "$1" | sed -nE 's/.*exposed all-reduce ([0-9.]+) ms\/step.*/\1/p' | tail -1; }

declare -A SEQ
printf "| GPUs | all-reduce | global batch | seq/s | scaling vs 1 GPU | efficiency | exposed all-reduce |\n" | tee "$OUT/dp_scaling.md"
printf "|---:|---|---:|---:|---:|---:|---:|\n" | tee -a "$OUT/dp_scaling.md"
for n in $GPUS; do
  modes="overlap"
  [ "$n" -gt 1 ] && modes=${MODES:-"overlap delay fp32"}
  for mode in $modes; do
    tb=$((MICRO * ACC * n))
    extra="--deepspeed_config examples/deepspeed_bsz4096_adam_config.json"
    [ "$mode" = delay ] && extra="$extra --delay_allreduce"
    [ "$mode" = fp32 ] && extra="--deepspeed_config $WORK/ds_fp32_allreduce.json"
    log="$OUT/dp_${n}gpu_${mode}.log"
    port=$((29700 + n * 4)); [ "$mode" = delay ] && port=$((port + 1)); [ "$mode" = fp32 ] && port=$((port + 2))
    [ "$mode" = staged ] && port=$((port + 3))
    [ "$mode" = nccl ] && port=$((port + 40))
    [ "$mode" = split ] && port=$((port + 41))
    envv=""; [ "$mode" = staged ] && envv="DSKC_TEST_ALLREDUCE=staged"; [ "$mode" = nccl ] && envv="DSKC_TEST_ALLREDUCE=nccl"
    [ "$mode" = split ] && envv="DSKC_TEST_ALLREDUCE=split_word"
    if [ "$n" -eq 1 ]; then
      timeout 400 $BIN train $common $extra --train_batch_size $tb --data_dir "$WORK/data" --output_dir "$WORK/o1" > "$log" 2>&1
    else
      env $envv timeout 400 $BIN launch --nproc_per_node $n --master_port $port -- $BIN train $common --train_batch_size $tb \
        --data_dir "$WORK/data" --output_dir "$WORK/o${n}${mode}" $extra > "$log" 2>&1
    fi
    rc=$?
    r=$(rate "$log")
    if [ $rc -ne 0 ] || [ -z "$r" ]; then
      echo "run $n GPU(s) $mode failed (rc $rc):"; tail -5 "$log"; continue
    fi
    [ "$n" -eq 1 ] && SEQ[1]=$r
    base=${SEQ[1]:-}
    scale="-"; eff="-"
    if [ -n "$base" ]; then
      scale=$(awk -v a="$r" -v b="$base" 'BEGIN{printf "%.3fx", a/b}')
      eff=$(awk -v a="$r" -v b="$base" -v n="$n" 'BEGIN{printf "%.3f", a/b/n}')
    fi
    w=$(wait_ms "$log"); [ -z "$w" ] && w="-" || w="$w ms/step"
    case $mode in
      delay) label="fp16, after backward (--delay_allreduce)" ;;
      fp32) label="fp32 (fp32_allreduce), 25 MB buckets overlapped" ;;
      staged) label="fp16, 25 MB buckets overlapped, staging copies (no in-place layers)" ;;
      nccl) label="fp16, overlapped: layers in place over NCCL, 25 MB buckets for the rest" ;;
      split) label="fp16, overlapped: layers in place (copy engines), word-embedding table split (decoder share early, token rows at the end)" ;;
      *) label="fp16, overlapped: layers in place ($(grep -o 'by copy engines\|over NCCL' "$log" | head -1)), 25 MB buckets for the rest" ;;
    esac
    [ "$n" -eq 1 ] && label="none"
    printf "| %d | %s | %d | %s | %s | %s | %s |\n" "$n" "$label" "$tb" "$r" "$scale" "$eff" "$w" | tee -a "$OUT/dp_scaling.md"
    rm -rf "$WORK"/o*
  done
done
