#!/usr/bin/env bash
# Session 76: the attention backward above 128 keys in chunks of sequences (DSKC_ATTN_DQ_CHUNK) and the
# dQ GEMM's heads last first (DSKC_ATTN_DQ_ORDER=reverse): bitwise GPU case, Nsight Compute step lists at
# (16,512), then wall A/Bs at (16,512) launched and replayed from graphs.
# bash exp/pack.sh LIMIT exp/s76a.sh [END [quick]]   (applies exp/dq_chunks.patch unless the tree has it)
. "$(dirname "$0")/common.sh"
END=${1:-500} QUICK=$2  # (the ncu loop below resets $1 and $2)
gpu_head
apply_patch exp/dq_chunks.patch
build_gpu -j16 dskc tests/gpu_test_flash_attention
el "chunk test"
( gpu_test chunks.txt 200 gpu_test_flash_attention -tc="attention backward in chunks*" )  # on: timings even if it fails
grep " dQ: " "$OUT/chunks.txt"
el "ncu"
V=("off forward" "off reverse" "4 forward" "4 reverse" "2 forward" "2 reverse" "auto forward")
[ "$QUICK" = quick ] && V=("off forward" "4 forward" "auto forward")  # when little device time is left
for v in "${V[@]}"; do
  set -- $v
  env_ab 512 c$1_$2 "DSKC_ATTN_DQ_CHUNK=$1 DSKC_ATTN_DQ_ORDER=$2" 1  # kernel lists in $OUT/kernels_*.txt
done
E=(--env "chunk4@fp16 Pre-LN:DSKC_ATTN_DQ_CHUNK=4" --env "chunk2@fp16 Pre-LN:DSKC_ATTN_DQ_CHUNK=2"
   --env "auto@fp16 Pre-LN:DSKC_ATTN_DQ_CHUNK=auto" --env "rev@fp16 Pre-LN:DSKC_ATTN_DQ_ORDER=reverse" --env "chunk4 rev@fp16 Pre-LN:DSKC_ATTN_DQ_CHUNK=4,DSKC_ATTN_DQ_ORDER=reverse")
O="fp16 Pre-LN,chunk4,chunk2,auto,rev,chunk4 rev"
[ "$QUICK" = quick ] && O="fp16 Pre-LN,chunk4,chunk2,auto,rev"
launched_matrix 7 $(( END * 65 / 100 )) chunk_r7.txt --shapes 16x512 --only "$O" --no-control "${E[@]}"
graph_matrix 7 $END chunk_graph_r7.txt --shapes 16x512 --only "$O" --no-control "${E[@]}"
el done
