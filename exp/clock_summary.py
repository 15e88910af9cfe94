"""Per-run SM clock and power from an nvidia-smi sampling log (exp/s62b.sh).

python3 exp/clock_summary.py OUT: reads OUT/clocks.csv (nvidia-smi --query-gpu=timestamp,clocks.sm,
clocks.mem,power.draw,temperature.gpu,<reasons> --format=csv,noheader -lms 100) and OUT/marks.txt
(lines "EPOCH start TAG" / "EPOCH end TAG"), and prints for each run its busy samples: those at
power >= 60% of the run's highest. A 40-step BERT-Large `dskc train` computes for ~1.5 s of a ~45 s
run (start-up and the JIT before, the checkpoint after), so a fixed window of the run would miss
them. Per run: the busy samples' count, mean and minimum SM MHz, mean power, and the clock-event
reasons seen among them (0x4: software power cap).
"""
import csv
import datetime
import sys

out = sys.argv[1]
marks = [line.split() for line in open(f"{out}/marks.txt")]
rows = []
for r in csv.reader(open(f"{out}/clocks.csv")):
    try:
        stamp = datetime.datetime.strptime(r[0].strip(), "%Y/%m/%d %H:%M:%S.%f")
        t = stamp.replace(tzinfo=datetime.timezone.utc).timestamp()  # nvidia-smi and date agree on UTC
        rows.append((t, float(r[1].split()[0]), float(r[3].split()[0]), r[5].strip()))
    except (ValueError, IndexError):
        pass
for i in range(0, len(marks) - 1, 2):
    t0, t1, tag = float(marks[i][0]), float(marks[i + 1][0]), marks[i][2]
    run = [x for x in rows if t0 <= x[0] <= t1]
    if not run:
        print(f"{tag:10s} no samples")
        continue
    top = max(x[2] for x in run)
    s = [x for x in run if x[2] >= 0.6 * top]
    reasons = ",".join(sorted({x[3] for x in s}))
    print(f"{tag:10s} busy samples {len(s):3d} SM MHz mean {sum(x[1] for x in s) / len(s):6.0f} min {min(x[1] for x in s):5.0f}"
          f"  W mean {sum(x[2] for x in s) / len(s):5.0f} max {top:5.0f}  reasons {reasons}")
