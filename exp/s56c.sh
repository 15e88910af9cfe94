#!/usr/bin/env bash
# Session 56, the session's one GPU call (`LIMIT=250 bash exp/pack.sh 260 exp/s56c.sh`, H200): the
# side-by-side table of the landed HEAD alone (3 interleaved rounds, medians), for
# when the device time left does not fit exp/s56a.sh's GPU suite as well. Run under exp/pack.sh.
. "$(dirname "$0")/common.sh"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/gpu.txt"
build_gpu -j16 dskc
compare_r3 ${LIMIT:-330}
el done
