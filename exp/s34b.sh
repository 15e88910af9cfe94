#!/usr/bin/env bash
# Session 34, call 2 (bench/NOTES.md v31): the power limit and clocks; dskc bench's NVML line; the
# warm-up curve (untimed iterations before the 50 timed ones, 3 s of idle between runs); the layer
# matrix and the side-by-side comparison after 10 and after 300 warm-up iterations.
. "$(dirname "$0")/common.sh"
nvidia-smi -q -d POWER,CLOCK,PERFORMANCE > "$OUT/smi_q.txt" 2>&1
grep -E "Current Power Limit|Requested Power Limit|Default Power Limit|Max Power Limit|Min Power Limit|Power Draw|SM  |Max Clocks|SW Power Cap|HW Slowdown|Thermal" "$OUT/smi_q.txt" | head -30
build_gpu dskc
el "bench table mode"
build-gpu/dskc bench $L128 --iters 50
build-gpu/dskc bench $L128 --iters 50 --warmup 300 | tail -2
el "warm-up curve"
for wu in 0 25 50 100 200 400 800 1600; do for f in $L128 $L512; do
  sleep 3; echo "wu=$wu $(basename $f) $(timeout 60 build-gpu/dskc bench $f --iters 50 --warmup $wu --csv | tail -1)"
done; done | tee "$OUT/warmup_curve.txt"
el "matrix, warm-up 10 and 300"
python3 bench/layer_matrix.py --dskc build-gpu/dskc --rounds 2 2>&1 | tee "$OUT/matrix_wu10.txt"
python3 bench/layer_matrix.py --dskc build-gpu/dskc --rounds 2 --warmup 300 2>&1 | tee "$OUT/matrix_wu300.txt"
el "compare_torch, warm-up 10 and 300"
PYTHONUNBUFFERED=1 timeout 200 python3 bench/compare_torch.py --dskc build-gpu/dskc --ln pre --rounds 1 2>&1 | tail -5 | tee "$OUT/compare_wu10.txt"
PYTHONUNBUFFERED=1 timeout 200 python3 bench/compare_torch.py --dskc build-gpu/dskc --ln pre --rounds 1 --warmup 300 2>&1 | tail -5 | tee "$OUT/compare_wu300.txt"
el done
