#!/usr/bin/env bash
# Session 34, call 3 (bench/NOTES.md v31): the layer's implementation choices A/B'd again in the
# sustained (power-capped) state: 300 untimed iterations before each run's 30 timed ones, where
# the spread of one variant over the rounds is <1% (call 2), three interleaved rounds.
. "$(dirname "$0")/common.sh"
build_gpu dskc
el "sustained A/B"
envs=("1 stream:DSKC_LAYER_STREAMS=1" "linear cublas:DSKC_LINEAR_GEMM=cublas" "ffn cublas:DSKC_FFN_GEMM=cublas"
      "ffn sm90:DSKC_FFN_GEMM=sm90" "output fused:DSKC_OUTPUT_GEMM=fused" "dgrad sm90:DSKC_DGRAD_GEMM=sm90"
      "attn bwd sync:DSKC_ATTN_BWD=sync" "mask kernel:DSKC_ATTN_MASK=kernel" "bias epilogue:DSKC_BIAS_GRAD=epilogue"
      "all flags 1 stream@all three flags:DSKC_LAYER_STREAMS=1")
args=(); only="fp16 Pre-LN"
for e in "${envs[@]}"; do args+=(--env "$e"); n=${e%%:*}; only="$only,${n%%@*}"; done
only="$only,all three flags"
python3 bench/layer_matrix.py --dskc build-gpu/dskc --rounds 3 --warmup 300 --only "$only" "${args[@]}" 2>&1 | tee "$OUT/sustained_ab.txt"
el done
