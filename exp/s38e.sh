#!/usr/bin/env bash
# Session 38, last call (device time nearly spent): every GPU test with the fused dQ as the default.
. "$(dirname "$0")/common.sh"
build_gpu -j16
el "ctest -L gpu"
(cd build-gpu && timeout 250 ctest -L gpu -j16 --timeout 240) > "$OUT/ctest_gpu.log" 2>&1
echo "ctest rc=$?"
grep -E "Test +#|tests passed|tests failed" "$OUT/ctest_gpu.log" | sed 's/  */ /g' | tail -40
el done
