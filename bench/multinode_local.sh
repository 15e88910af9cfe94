#!/usr/bin/env bash
# The guide's multi-node form (`deepspeed --num_nodes N ...`) emulated on one host: NNODES
# launcher invocations of NPROC GPUs each (CUDA_VISIBLE_DEVICES slices), MASTER_ADDR on loopback,
# training BERT-Large seq 128 micro-batch 64 fp16 together. Prints each node's last progress line
# and rank 0's throughput; logs under $OUT/node*.log.
#   NNODES=2 NPROC=4 STEPS=12 DSKC=build-gpu/dskc bash bench/multinode_local.sh
set -u
OUT=${OUT:-$PWD/out}
BIN=${DSKC:-build-gpu/dskc}
NNODES=${NNODES:-2}
NPROC=${NPROC:-1}
STEPS=${STEPS:-12}
PORT=${PORT:-29800}
mkdir -p "$OUT"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export DSKC_CACHE_DIR=${DSKC_CACHE_DIR:-$PWD/build-gpu/cache}
$BIN prepare-data --input examples/corpus --output_dir "$WORK/data" --vocab_size 30522 --max_seq_length 128 \
  --max_predictions_per_seq 20 --dupe_factor 2 > "$OUT/multinode_prepare.log" 2>&1 || exit 1
world=$((NNODES * NPROC))
pids=()
for ((node = NNODES - 1; node >= 0; node--)); do
  first=$((node * NPROC))
  devs=$(seq -s, $first $((first + NPROC - 1)))
  CUDA_VISIBLE_DEVICES=$devs timeout 600 $BIN launch --nnodes $NNODES --node_rank $node --nproc_per_node $NPROC \
    --master_addr 127.0.0.1 --master_port $PORT -- $BIN train --deepspeed \
    --deepspeed_config examples/deepspeed_bsz4096_adam_config.json --cf examples/bert_large_adam_seq128.json \
    --train_batch_size $((64 * world)) --gradient_accumulation_steps 1 --max_seq_length 128 --max_grad_norm 1.0 \
    --fp16 --loss_scale 0 --max_steps $STEPS --print_steps $((STEPS / 2)) --deepspeed_transformer_kernel \
    --backend cuda --data_dir "$WORK/data" --output_dir "$WORK/out" --checkpoint_steps 1000000 \
    > "$OUT/node$node.log" 2>&1 &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
for ((node = 0; node < NNODES; node++)); do
  echo "node $node: $(grep -E 'job (failed|finished)|error' "$OUT/node$node.log" | tail -1)"
done
grep -E "step $STEPS/$STEPS|parameters identical" "$OUT/node0.log" | tail -2
exit $rc
