#!/usr/bin/env bash
# Session 67, call 3 (`bash exp/pack.sh 250 exp/s68c.sh`): the guide's seq-512 Lamb phase (as
# exp/s66d.sh: BERT-Large, micro-batch 16, fp16, accumulation 1) on the landed three-launch Lamb.
. "$(dirname "$0")/common.sh"
gpu_head
build_gpu -j16 dskc
run_dir s67
mkdir -p "$D"; LT_DIR=$D
build-gpu/dskc prepare-data --input examples/corpus --output_dir "$D/data512" --vocab_size 30522 \
  --max_seq_length 512 --max_predictions_per_seq 80 --dupe_factor 4 > "$OUT/prepare512.log" 2>&1 || { tail "$OUT/prepare512.log"; exit 1; }
lamb_train lamb512 512 16 "$D/data512"
profile_lines lamb512
rm -rf "$D"
el done
