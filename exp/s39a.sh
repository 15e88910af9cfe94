#!/usr/bin/env bash
# Session 39, call 1: DSKC_ATTN_DQ=fused as the default: every GPU test, then the kernel sums.
. "$(dirname "$0")/common.sh"
build_gpu -j16
el "ctest -L gpu"
(cd build-gpu && timeout 380 ctest -L gpu -j16 --timeout 370) > "$OUT/ctest_gpu.log" 2>&1
echo "ctest rc=$?"
grep -E "Test +#|tests passed|tests failed" "$OUT/ctest_gpu.log" | sed 's/  */ /g' | tail -40
el "kernel sums"
ncu_step "" $L128 l128_default
ncu_step "" $L128 l128_all --attention_dropout_checkpoint --normalize_invertible --gelu_checkpoint
el done
