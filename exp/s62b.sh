#!/usr/bin/env bash
# Session 62, the call that ran (`bash exp/pack.sh 590 exp/s62b.sh`, on an H100; s62a.sh, removed,
# had built a half-edited tree): the deferred layer gradients (bench/NOTES.md t3: a step of one micro-batch
# leaves the encoder layers' gradients in their dtype buffers, read there by the norm and the
# one-launch Adam) A/B'd against DSKC_LAYER_GRADS=accumulate in one build: BERT-Large seq 128 mb 64
# fp16 acc 1 `dskc train` profiles (steps 21-40), alternated twice, with the SM clock and power
# sampled every 100 ms (clocks.csv, marks.txt; exp/clock_summary.py); then all three memory flags,
# launched and with --cuda_graphs (never measured in training); then the whole `ctest -L gpu`.
. "$(dirname "$0")/common.sh"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
git log --oneline -1; git status --short | head
build_gpu -j16
Q=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active
nvidia-smi --query-gpu=$Q --format=csv,noheader > /dev/null 2>&1 || Q=${Q%,*},clocks_throttle_reasons.active
nvidia-smi --query-gpu=$Q --format=csv,noheader -lms 100 > "$OUT/clocks.csv" 2> "$OUT/clocks.err" &
SMI=$!
mark() { echo "$(date +%s.%N) $*" >> "$OUT/marks.txt"; }
large_train_data /tmp/s62b
tr() { mark start "$1"; large_train "$@"; mark end "$1"; }
acc() { mark start "$1"; DSKC_LAYER_GRADS=accumulate large_train "$@"; mark end "$1"; }
for r in 1 2; do acc acc$r; tr def$r; done
tr flags $FL_ALL; tr flagsg $FL_ALL --cuda_graphs
kill $SMI 2>/dev/null
for t in acc2 def2 flags flagsg; do echo "== $t"; grep -h -A20 "^step profile" "$OUT/train_$t.log" | head -22; done
python3 exp/clock_summary.py "$OUT"
ctest_gpu 8 $(( 585 - $(date +%s) + t0 )) 300
el done
