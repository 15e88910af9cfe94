#!/usr/bin/env bash
set -u
OUT=${OUT:-$PWD/out}; mkdir -p $OUT
export DSKC_CACHE_DIR=$PWD/build-gpu/cache
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $OUT/configure.log 2>&1 || exit 1
ninja -C build-gpu dskc gpu_test_data_parallel gpu_test_bert_cuda > $OUT/build.log 2>&1 || { grep -E "error|FAILED" $OUT/build.log | head; exit 1; }
echo "built $(date +%T)"
(cd build-gpu && timeout 400 ctest -R "data_parallel" -V --timeout 380) > $OUT/ctest_dp.log 2>&1
grep -E "tests passed|tests failed|Failed|ERROR|error:|test cases|fp16 step|step 1:|step 2:|SKIPPED|MESSAGE|copy engines" $OUT/ctest_dp.log | head -40
