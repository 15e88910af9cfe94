#!/usr/bin/env bash
# Session 45, call 4: the README's side-by-side table on the current code (session 39's was at
# 75e649b): compare_torch burst (torch eager / torch.compile, each launched from Python and replayed
# from a CUDA graph; dskc no flag and all flags), then sustained unless the first argument is `burst`.
. "$(dirname "$0")/common.sh"
build_gpu -j16 dskc
el "compare_torch, warm-up 10"
timeout 240 python3 bench/compare_torch.py --dskc build-gpu/dskc --ln pre --warmup 10 2>&1 | tee "$OUT/compare_wu10.txt" | tail -8
[ "${1:-}" = burst ] && { el done; exit 0; }
el "compare_torch, warm-up 300"
timeout 230 python3 bench/compare_torch.py --dskc build-gpu/dskc --ln pre --warmup 300 2>&1 | tee "$OUT/compare_wu300.txt" | tail -8
el done
