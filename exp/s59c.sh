#!/usr/bin/env bash
# Session 59: after `bash exp/pack.sh 330 exp/s59a.sh` in the same call (patches applied, build-gpu
# built): the whole `ctest -L gpu`, its log written straight into the device tool's $OUT (one file,
# so what a call cut short by its time limit has written still comes back). LIMIT seconds at most;
# CTEST_ARGS: more ctest arguments (session 60: `-E gpu.test_bert_cuda`).
cd "$(dirname "$0")/.." || exit 1
L=${1:-240}
[ -x build-gpu/dskc ] || { echo "no build-gpu: run exp/s59a.sh first"; exit 1; }
echo "ctest -L gpu, limit $L s" > "$OUT/ctest_gpu.log"
(cd build-gpu && timeout "$L" ctest -L gpu -j16 --timeout 300 ${CTEST_ARGS:-}) >> "$OUT/ctest_gpu.log" 2>&1
echo "ctest rc=$?" | tee -a "$OUT/ctest_gpu.log"
grep -E "tests passed|tests failed|\*\*\*|Failed" "$OUT/ctest_gpu.log" | head -20
