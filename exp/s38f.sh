#!/usr/bin/env bash
# Session 38, last device minutes: the whole-layer numerics suite (GPU vs the double-precision CPU
# reference, every config of tests/gpu/test_layer_numerics.cpp) with DSKC_ATTN_DQ=fused.
. "$(dirname "$0")/common.sh"
build_gpu -j16 gpu_test_layer_numerics
el "layer numerics, DSKC_ATTN_DQ=fused"
DSKC_ATTN_DQ=fused timeout 170 build-gpu/tests/gpu_test_layer_numerics > "$OUT/numerics_fused.log" 2>&1
echo "rc=$?"; grep -E "test cases|assertions" "$OUT/numerics_fused.log"; grep -B2 -A8 ERROR "$OUT/numerics_fused.log" | head -40
el done
