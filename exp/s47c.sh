#!/usr/bin/env bash
# Session 47, call 3: the final build (the ring as an opt-in, DSKC_ATTN_DQ=ring; the default kernels
# unchanged): (1) ctest -L gpu, the whole suite; (2) compare_torch burst (the README's side-by-side
# table), then sustained if the time allows. Run under exp/pack.sh.
. "$(dirname "$0")/common.sh"
build_gpu -j16
ctest_gpu 16 330 320
el "compare_torch, warm-up 10"
timeout 150 python3 bench/compare_torch.py --dskc build-gpu/dskc --ln pre --warmup 10 2>&1 | tee "$OUT/compare_wu10.txt" | tail -12
left=$(( 545 - ($(date +%s) - t0) ))
if [ $left -gt 100 ]; then
  el "compare_torch, warm-up 300"
  timeout $left python3 bench/compare_torch.py --dskc build-gpu/dskc --ln pre --warmup 300 2>&1 | tee "$OUT/compare_wu300.txt" | tail -12
fi
el done
