#!/usr/bin/env bash
# Session 54, call 4: exp/s54a.sh showed the one failure of the GELU'(h) patch's ctest run
# (exp/s51b.sh) to be the bias-gradient test's partials case: DSKC_BIAS_GRAD=partials leaves the FFN on
# cuBLASLt + bias_gelu_bwd (unrounded GELU'), its gemv reference on gemm_sm90 (the kept, rounded
# GELU'). The patch's test now runs the reference on the same FFN path. Shard 2 again, then the
# other layer_numerics shards and layer_behaviour as far as the time allows. Run under exp/pack.sh.
. "$(dirname "$0")/common.sh"
apply_patch exp/gelu_save_grad.patch
build_gpu -j16
el "layer_numerics shard 2"
(cd build-gpu && timeout 150 ctest -R "test_layer_numerics\.2" --output-on-failure) > "$OUT/shard2.log" 2>&1
echo "rc=$?"; grep -E "ERROR|test cases|assertions" "$OUT/shard2.log" | head -20
el "layer_numerics 1, 3, layer_behaviour"
(cd build-gpu && timeout $(( 400 - $(date +%s) + t0 )) ctest -j8 -R "test_layer_numerics\.[13]|test_layer_behaviour" --output-on-failure) > "$OUT/rest.log" 2>&1
echo "rc=$?"; grep -E "Test +#|tests passed|ERROR" "$OUT/rest.log" | head -20
el done
