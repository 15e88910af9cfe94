#!/usr/bin/env bash
# probe (untracked): build, A/B of attn_flash_fwd warp rows + forward side-stream bits, GPU tests
set -u
OUT=${OUT:-$PWD/out}; mkdir -p $OUT
export DSKC_CACHE_DIR=$PWD/build-gpu/cache
t0=$(date +%s)
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $OUT/configure.log 2>&1 || { tail -20 $OUT/configure.log; exit 1; }
targets="dskc $(ninja -C build-gpu -t targets all | grep -o '^gpu_test_[a-z_0-9]*' | sort -u | tr '\n' ' ')"
ninja -C build-gpu $targets > $OUT/build.log 2>&1 || { grep -E "error|FAILED" $OUT/build.log | head -30; exit 1; }
echo "built in $(( $(date +%s) - t0 )) s"
# correctness of the new kernel first (fast)
timeout 200 build-gpu/tests/gpu_test_flash_attention -tc='*32 query rows*' > $OUT/flash_w32.log 2>&1; echo "w32 test rc=$?"; tail -3 $OUT/flash_w32.log
for f in examples/bert_large_layer.json examples/bert_large_layer_seq512.json; do
  for w in 16 32; do
    echo "-- $f warp rows $w"
    DSKC_ATTN_FWD_WARP_ROWS=$w build-gpu/dskc bench $f --iters 30 --profile 2>&1 | tee -a $OUT/prof_w$w.log | grep -E "attn_flash_fwd|attn_dropout_bits|^\|" | tail -4
  done
done
PYTHONUNBUFFERED=1 timeout 200 python3 bench/layer_matrix.py --dskc build-gpu/dskc --rounds 3 --only "fp16 Pre-LN,w32,one stream,all three flags,w32 all" \
  --env "w32:DSKC_ATTN_FWD_WARP_ROWS=32" --env "one stream:DSKC_LAYER_STREAMS=1" --env "w32 all@all three flags:DSKC_ATTN_FWD_WARP_ROWS=32" 2>&1 | tee $OUT/matrix.log | tail -16
echo "elapsed $(( $(date +%s) - t0 )) s"
(cd build-gpu && timeout $(( 560 - ($(date +%s) - t0) )) ctest -L gpu -j6 --timeout 300) > $OUT/ctest_gpu.log 2>&1
grep -E "tests passed|tests failed|Failed|Timeout|Not Run" $OUT/ctest_gpu.log | head -30
echo "elapsed $(( $(date +%s) - t0 )) s"
