#!/usr/bin/env bash
# Session 48, call 1: where the memory flags' cost goes now. Nsight Compute step lists (every kernel)
# of the default and of all three flags at (64,128) and (16,512), and each flag alone; the two-stream
# timelines of both. Run under exp/pack.sh.
. "$(dirname "$0")/common.sh"
build_gpu dskc
for L in $L128 $L512; do
  n=$(basename $L .json)
  for v in "def:" "all:$FL_ALL" "adc:--attention_dropout_checkpoint" "ni:--normalize_invertible" "gc:--gelu_checkpoint"; do
    tag=${v%%:*}; fl=${v#*:}
    ncu_step "" $L ${n}_$tag $fl
    python3 exp/ncu_step.py "$OUT/ncu_${n}_$tag.csv" > "$OUT/list_${n}_$tag.txt" 2>&1
  done
  timeline_all "" $L $n
  timeout 60 build-gpu/dskc bench "$L" --warmup 20 --iters 20 --timeline > "$OUT/timeline_${n}_def.txt" 2>&1
done
el done
