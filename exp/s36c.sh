#!/usr/bin/env bash
# Session 36, call 3 (~6 min): DSKC_ATTN_BWD=wgmma_s2 (attn_flash_bwd_dkdv with two Q/dO stages, three
# blocks per SM instead of two; ptxas: 166 registers, no spill, but C7512 "wgmma serialized") — its GPU
# test (vs the mma.sync kernel, the unfused path, the reference, and bitwise vs wgmma), the kernel's
# --profile time, then the layer A/B in both states.
# The option is not on main (bench/NOTES.md v33 d): exp/attn_bwd_s2.patch is applied first.
. "$(dirname "$0")/common.sh"
git apply exp/attn_bwd_s2.patch || exit 1
build_gpu
el "GPU test: wgmma backward variants"
timeout 240 build-gpu/tests/gpu_test_flash_attention -tc="fused attention backward on warpgroup MMA*" > "$OUT/test_s2.log" 2>&1
echo "rc=$?"; tail -4 "$OUT/test_s2.log"; grep -B3 -A8 "ERROR" "$OUT/test_s2.log" | head -40
for v in wgmma wgmma_s2; do
  for l in $L128 $L512; do
    echo "$v $(basename $l): $(DSKC_ATTN_BWD=$v timeout 60 build-gpu/dskc bench $l --iters 20 --warmup 10 --profile 2>&1 | grep -E "attn_flash_bwd_dkdv|  sum" | awk '{printf "%s %s  ", $1, $2}')"
  done
done
for wu in 300 10; do
  el "layer A/B, warm-up $wu"
  timeout 200 python3 bench/layer_matrix.py --dskc build-gpu/dskc --rounds 3 --warmup $wu --only "fp16 Pre-LN,attn bwd s2" \
    --env "attn bwd s2:DSKC_ATTN_BWD=wgmma_s2" 2>&1 | tee "$OUT/matrix_s2_wu$wu.txt" | tail -10
done
el done
