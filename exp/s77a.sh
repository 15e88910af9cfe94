#!/usr/bin/env bash
# Session 77: DSKC_ATTN_DQ_ORDER=reverse alone (exp/dq_chunks.patch; s76a's one-call reading: −1.2%
# launched, −0.1% replayed at (16,512), inside the rounds' spread) with more rounds, and its ncu step list.
# bash exp/pack.sh LIMIT exp/s77a.sh [END]
. "$(dirname "$0")/common.sh"
END=${1:-140}
gpu_head
apply_patch exp/dq_chunks.patch
build_gpu -j16 dskc
env_ab 512 crev 'DSKC_ATTN_DQ_ORDER=reverse' 1  # the dQ GEMM is cuBLAS's nvjet ptrBatch kernel in the list
E=(--env "rev@fp16 Pre-LN:DSKC_ATTN_DQ_ORDER=reverse")
launched_matrix 15 $(( END * 60 / 100 )) rev_r15.txt --shapes 16x512 --only "fp16 Pre-LN,rev" --no-control "${E[@]}"
graph_matrix 15 $END rev_graph_r15.txt --shapes 16x512 --only "fp16 Pre-LN,rev" --no-control "${E[@]}"
el done
