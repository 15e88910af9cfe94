#!/usr/bin/env bash
# Session 45, call 2 (the code is on branch wip/bits-in-gelu, not on main): DSKC_ATTN_BITS_BWD=gelu (attn_dropout_checkpoint's keep bits in the GELU
# backward's launch, bias_gelu_bwd_bits) against auto (the LayerNorm re-run with normalize_invertible,
# else attn_dropout_bits_bwd on the side stream): the GPU test cases that cover it, the all-flags
# timelines, Nsight Compute kernel durations, and a burst layer matrix A/B. Run under exp/pack.sh.
. "$(dirname "$0")/common.sh"
build_gpu -j16
el "GPU tests: keep bits"
gpu_test bits_behaviour.log 240 gpu_test_layer_behaviour -tc="fused attention keep bits*"
gpu_test bits_numerics.log 240 gpu_test_layer_numerics -tc="fused attention: keep-bit sources*"
el "timelines (all flags)"
for n in 128 512; do
  L=$L128; [ $n = 512 ] && L=$L512
  for r in 1 2; do for v in auto gelu; do timeline_all "DSKC_ATTN_BITS_BWD=$v" $L ${v}_${n}_$r; done; done
done
el "ncu (all flags)"
for n in 128 512; do
  L=$L128; [ $n = 512 ] && L=$L512
  for v in auto gelu; do
    ncu_step "DSKC_ATTN_BITS_BWD=$v" $L ${v}_$n $FL_ALL
    python3 exp/ncu_step.py "$OUT/ncu_${v}_$n.csv" > "$OUT/kernels_${v}_$n.txt" 2>&1
    grep -E "bias_gelu_bwd|layernorm_fwd_norm|attn_dropout_bits|dkdv" "$OUT/kernels_${v}_$n.txt"
  done
done
el "layer matrix"
timeout 300 python3 bench/layer_matrix.py --dskc build-gpu/dskc --rounds 4 \
  --only "fp16 Pre-LN,all three flags,all+gelu,attn_dropout_checkpoint,adc+gelu" \
  --env "all+gelu@all three flags:DSKC_ATTN_BITS_BWD=gelu" \
  --env "adc+gelu@attn_dropout_checkpoint:DSKC_ATTN_BITS_BWD=gelu" 2>&1 | tee $OUT/matrix.txt
el done
