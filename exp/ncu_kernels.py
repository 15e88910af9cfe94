#!/usr/bin/env python3
"""Per-kernel totals of an `ncu --csv --metrics gpu__time_duration.sum` log: launches, total ms and
ms per step (total / --steps), sorted by total, then the sum. For a whole run (e.g. `dskc train`
for a few steps with `-k regex:model_`) where the kernels are not one repeated step.
    python3 exp/ncu_kernels.py FILE.csv [--steps N] [--top K]"""
import argparse
import csv
from collections import defaultdict

ap = argparse.ArgumentParser()
ap.add_argument("csv")
ap.add_argument("--steps", type=int, default=1)
ap.add_argument("--top", type=int, default=40)
args = ap.parse_args()
rows = [r for r in csv.reader(open(args.csv)) if len(r) > 10]
if not rows:
    raise SystemExit(f"{args.csv}: no ncu rows (did the profiled command fail?)")
head, rows = rows[0], rows[1:]
k, v = head.index("Kernel Name"), head.index("Metric Value")
total, count = defaultdict(float), defaultdict(int)
for r in rows:
    total[r[k]] += float(r[v].replace(",", "")) / 1e6  # ns -> ms
    count[r[k]] += 1
print(f"  {'ms total':>9} {'ms/step':>8} {'launches':>8}  kernel")
for name in sorted(total, key=total.get, reverse=True)[:args.top]:
    print(f"  {total[name]:9.3f} {total[name] / args.steps:8.3f} {count[name]:8d}  {name[:90]}")
s = sum(total.values())
print(f"  {s:9.3f} {s / args.steps:8.3f} {sum(count.values()):8d}  sum")
