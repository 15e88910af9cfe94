#!/usr/bin/env bash
# Session 64, last call (`bash exp/pack.sh LIMIT exp/s64e.sh`, asked as nvidia-h200): only on an H200
# (on any other GPU it stops at once): the landed BERT-Large seq 128 mb 64 fp16 acc 1 training
# profile (the first H200 one since session 59), then compare_torch's side-by-side table (3 rounds)
# in the time left (until S64E_END seconds, default 410).
. "$(dirname "$0")/common.sh"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
grep -q H200 "$OUT/gpu.txt" || { echo "not an H200: nothing run"; exit 0; }
git log --oneline -1; git status --short | head
build_gpu -j16 dskc
D=/tmp/s64; avail=$(df -BG --output=avail /dev/shm 2>/dev/null | tail -1 | tr -dc 0-9)
[ "${avail:-0}" -ge 16 ] && D=/dev/shm/s64
large_train_data "$D"
large_train h200
grep -h -A17 "^step profile" "$OUT/train_h200.log" | tail -15 | cut -c1-90
rm -rf "$D"
compare_r3 $(( ${S64E_END:-410} ))
el done
