#!/usr/bin/env bash
# Prepared in session 69 for an H200 (`bash exp/pack.sh 400 exp/s70a.sh`): why compare_torch's
# side-by-side runs read the three memory flags at +12% at (16,512) on the H200 (session 69: 1.457-
# 1.469 ms against the default's 1.304-1.309, replayed from graphs) where the graph layer matrix read
# +5.6% minutes later (1.392 against 1.318; bench/NOTES.md t10). compare_torch runs each dskc bench
# after 3 s of idle with 50 timed iterations; layer_matrix.py with no idle and 30. This alternates
# the default and all three flags (`dskc bench --graph`, (16,512), 10 warm-up) under the four
# combinations of idle (0 / 3 s) and timed iterations (30 / 50), 3 rounds, and prints every run's
# total, SM clock and power (CSV columns of `dskc bench --csv`). Session 70: runs on any card (an H100
# reading says whether the settings matter there too); gpu.txt names the card.
# Session 72: ran twice on an H100 and once on an H200; no consistent effect of the setting on either
# card (bench/NOTES.md t13).
. "$(dirname "$0")/common.sh"
gpu_head
build_gpu -j16 dskc
FLAGS=$OUT/all_flags_512.json
python3 - "$L512" "$FLAGS" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c.update(attn_dropout_checkpoint=True, normalize_invertible=True, gelu_checkpoint=True)
json.dump(c, open(sys.argv[2], "w"))
PY
el "alternation: idle x iterations x {default, all flags}, 3 rounds"
echo "round,idle_s,iters,variant,csv" > "$OUT/idle_iters.csv"
for r in 1 2 3; do
  for idle in 0 3; do
    for it in 30 50; do
      for v in default flags; do
        cfg=$L512; [ $v = flags ] && cfg=$FLAGS
        sleep $idle
        line=$(timeout 60 build-gpu/dskc bench "$cfg" --graph --csv --iters $it --warmup 10 2>&1 | tail -1)
        echo "$r,$idle,$it,$v,$line" >> "$OUT/idle_iters.csv"
      done
    done
  done
  el "round $r"
done
# Medians per setting of the total (fields 6 + 7 of dskc bench --csv: forward and backward ms).
python3 - "$OUT/idle_iters.csv" <<'PY'
import csv, statistics, sys
rows = list(csv.reader(open(sys.argv[1])))[1:]
t = {}
for r in rows:
    try:
        t.setdefault((r[1], r[2], r[3]), []).append(float(r[4 + 5]) + float(r[4 + 6]))
    except (IndexError, ValueError):
        print("bad run:", r)
print("| idle s | iters | default ms | all flags ms | flags cost |")
print("|---:|---:|---:|---:|---:|")
for idle in ("0", "3"):
    for it in ("30", "50"):
        d = statistics.median(t.get((idle, it, "default"), [float("nan")]))
        f = statistics.median(t.get((idle, it, "flags"), [float("nan")]))
        print(f"| {idle} | {it} | {d:.3f} | {f:.3f} | {100 * (f / d - 1):+.1f}% |")
PY
el done
