#!/usr/bin/env bash
# Session 54, call 3: gpu.test_layer_numerics.2 failed in exp/s51b.sh's ctest with the GELU'(h) patch
# applied (every other GPU test passed). Its output with the patch, then on
# main's code without the patch (pre-existing or the patch's). Run under exp/pack.sh.
. "$(dirname "$0")/common.sh"
apply_patch exp/gelu_save_grad.patch
build_gpu -j16
el "shard 2 with the patch"
(cd build-gpu && timeout 150 ctest -R "test_layer_numerics\.2" --output-on-failure) > "$OUT/shard2_patch_1.log" 2>&1
echo "rc=$?"; grep -E "ERROR|CHECK|test cases|assertions|TEST CASE|values|with expansion" "$OUT/shard2_patch_1.log" | head -40
git apply --reverse exp/gelu_save_grad.patch
build_gpu -j16
el "shard 2 without the patch"
(cd build-gpu && timeout 150 ctest -R "test_layer_numerics\.2" --output-on-failure) > "$OUT/shard2_main.log" 2>&1
echo "rc=$?"; grep -E "ERROR|test cases|assertions" "$OUT/shard2_main.log" | head -20
el done
