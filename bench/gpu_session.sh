#!/usr/bin/env bash
# One call on the GPU machine: configure + build (ninja, sm_90 default arch), GPU tests,
# compute-sanitizer on a small layer, dskc bench on the guide's shapes, the PyTorch comparison.
# Logs go to $OUT (or ./out). Usage: bash bench/gpu_session.sh [quick]
set -u
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
export DSKC_CACHE_DIR=$PWD/build-gpu/cache
step() { echo; echo "=== $* ==="; }
step configure
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > "$OUT/configure.log" 2>&1 || { tail -30 "$OUT/configure.log"; exit 1; }
step build
ninja -C build-gpu > "$OUT/build.log" 2>&1 || { grep -E "error|FAILED" "$OUT/build.log" | head -30; exit 1; }
step "ctest -L gpu"
(cd build-gpu && ctest -L gpu --output-on-failure --timeout 900) > "$OUT/ctest_gpu.log" 2>&1
grep -E "tests passed|Failed|Passed|\*\*\*|FAILED|ERROR|rel [0-9]" "$OUT/ctest_gpu.log" | head -80
step "compute-sanitizer"
if command -v compute-sanitizer > /dev/null; then
  compute-sanitizer --tool memcheck --error-exitcode 9 build-gpu/dskc bench examples/tiny_layer.json --iters 2 --warmup 1 > "$OUT/memcheck.log" 2>&1
  echo "memcheck rc=$?"; tail -4 "$OUT/memcheck.log"
fi
[ "${1:-}" = quick ] && exit 0
step "dskc bench"
for f in examples/bert_large_layer.json examples/bert_large_layer_seq512.json; do
  build-gpu/dskc bench $f --iters 30 2>&1 | tee -a "$OUT/bench.log" | tail -3
done
step "compare_torch"
PYTHONUNBUFFERED=1 python3 bench/compare_torch.py --dskc build-gpu/dskc 2>&1 | tee "$OUT/compare_torch.log" | tail -12
