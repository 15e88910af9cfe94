#!/usr/bin/env bash
# Session 68, for the device time left (~260 s after a start): only on an H200, dskc built and
# compare_torch's side-by-side table (3 rounds, graph columns included) of the landed code; on any
# other card it stops after the card's name. `bash exp/pack.sh 250 exp/s68f.sh`
. "$(dirname "$0")/common.sh"
gpu_head
grep -q H200 "$OUT/gpu.txt" || { echo "not an H200: nothing run"; exit 0; }
build_gpu -j16 dskc
compare_r3 245
el done
