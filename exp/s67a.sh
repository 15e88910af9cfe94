#!/usr/bin/env bash
# Session 67, call 1 (`bash exp/pack.sh 590 exp/s67a.sh`): exp/lamb_multi.patch's first GPU run
# (prepared in session 66, see exp/s66e.sh), then, since the patch touches the trainer, the whole
# `ctest -L gpu` on the patched tree in the same build: the CUDA backend's and plain layer's GPU tests
# first (they hold the Lamb multi-vs-per-tensor cases), the seq-128 Lamb training A/B of this build
# against DSKC_OPTIMIZER=per_tensor, then the GPU tests of the trainer and the layers' runtime
# (`ctest -L gpu -E "flash|numerics"`: the attention and layer-numerics shards never reach the
# optimizer, and their code is main's, whose whole suite passed on 36951c8 in session 66).
. "$(dirname "$0")/common.sh"
git apply exp/lamb_multi.patch || { echo "exp/lamb_multi.patch does not apply"; exit 1; }
gpu_head
build_gpu -j16
gpu_test bert_cuda.log 120 gpu_test_bert_cuda
gpu_test plain_layer.log 60 gpu_test_plain_layer
run_dir s67
large_train_data "$D"
lamb_train multi128 128 64 "$D/data"
profile_lines multi128 "optimizer|whole"
DSKC_OPTIMIZER=per_tensor lamb_train per128 128 64 "$D/data"
profile_lines per128 "optimizer|whole"
lamb_train multi128b 128 64 "$D/data"
profile_lines multi128b "optimizer|whole"
rm -rf "$D"
el "ctest -L gpu -E flash|numerics"
(cd build-gpu && timeout 200 ctest -L gpu -E "flash|numerics" -j8 --timeout 190) > "$OUT/ctest_gpu.log" 2>&1
echo "ctest rc=$?"
grep -E "Test +#|tests passed|tests failed" "$OUT/ctest_gpu.log" | sed 's/  */ /g' | tail -20
el done
