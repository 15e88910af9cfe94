#!/usr/bin/env bash
# Session 34, call 4: every GPU test on the final code (ctest -L gpu), logs in $OUT.
. "$(dirname "$0")/common.sh"
build_gpu 
el "ctest -L gpu"
(cd build-gpu && timeout 380 ctest -L gpu -j8 --timeout 360) > "$OUT/ctest_gpu.log" 2>&1
echo "ctest rc=$?"
grep -E "Test +#|tests passed|tests failed" "$OUT/ctest_gpu.log" | sed 's/  */ /g' | tail -40
el done
