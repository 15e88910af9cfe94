#!/usr/bin/env python3
"""Kernel durations of one layer step from `ncu --csv --metrics gpu__time_duration.sum` over
`dskc bench LAYER --warmup 2 --iters 1` (3 steps with the same launches; the last is printed).
Nsight Compute runs the kernels one after the other, so the sum is the one-stream step's kernel time,
without the ~5 µs per kernel that `dskc bench --profile`'s event brackets add, and without the
run-to-run spread of wall times (bench/NOTES.md v34): the layer's wall time is close to this sum.
    python3 exp/ncu_step.py FILE.csv [--steps 3] [--sum-only] [--from-last KERNEL]
--from-last KERNEL: the step is the launches from the last launch of KERNEL on (the first kernel of a
step), for runs whose first step launches more (stochastic_mode's GEMM autotuning)."""
import argparse
import csv

ap = argparse.ArgumentParser()
ap.add_argument("csv")
ap.add_argument("--steps", type=int, default=3)
ap.add_argument("--sum-only", action="store_true")
ap.add_argument("--from-last", default=None)
args = ap.parse_args()
rows = [r for r in csv.reader(open(args.csv)) if len(r) > 10]
if not rows:
    raise SystemExit(f"{args.csv}: no ncu rows (did the profiled command fail?)")
head, rows = rows[0], rows[1:]
k, g, v = head.index("Kernel Name"), head.index("Grid Size"), head.index("Metric Value")
rows = [(r[k], r[g], float(r[v].replace(",", "")) / 1e6) for r in rows]  # ns -> ms
if args.from_last:
    starts = [i for i, r in enumerate(rows) if r[0] == args.from_last]
    if not starts:
        raise SystemExit(f"{args.csv}: no launch of {args.from_last}")
    step = rows[starts[-1]:]
elif len(rows) % args.steps:
    raise SystemExit(f"{args.csv}: {len(rows)} launches do not split into {args.steps} equal steps")
else:
    step = rows[-(len(rows) // args.steps):]
total = sum(ms for _, _, ms in step)
if args.sum_only:
    print(f"{total:.4f} ms in {len(step)} kernels")
else:
    for name, grid, ms in step:
        print(f"  {ms:8.4f}  {grid:>14}  {name[:100]}")
    print(f"  {total:8.4f}  sum of {len(step)} kernels")
