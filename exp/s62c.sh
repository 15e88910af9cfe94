#!/usr/bin/env bash
# Prepared in session 62 for a call on an H200 (`bash exp/pack.sh 590 exp/s62c.sh`), right after
# `bash exp/pack.sh 590 exp/s62b.sh` on the same warm machine (its build-gpu is reused; built here
# otherwise): test_layer_numerics.3, the one GPU shard that ran out of time in session 62's calls;
# compare_torch's side-by-side table (3 rounds; the README's table has no H200 rows since session
# 56); then the graph-replayed layer matrix of the default, all three flags and stochastic_mode in
# the time left.
. "$(dirname "$0")/common.sh"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/gpu.txt"
[ -x build-gpu/dskc ] && [ -x build-gpu/tests/gpu_test_layer_numerics ] || build_gpu -j16 dskc gpu_test_layer_numerics
el "test_layer_numerics.3"
(cd build-gpu && timeout 280 ctest -R "gpu.test_layer_numerics.3" --timeout 270) > "$OUT/ctest_num3.log" 2>&1
echo "rc=$?"; tail -3 "$OUT/ctest_num3.log"
compare_r3 480
el "layer matrix --graph, default / all flags / stochastic_mode, 3 rounds"
timeout $(( 580 - $(date +%s) + t0 )) python3 bench/layer_matrix.py --dskc build-gpu/dskc --rounds 3 --graph \
  --only "fp16 Pre-LN,all three flags,stochastic_mode" 2>&1 | tee "$OUT/matrix_graph.txt" | tail -8
el done
