#!/usr/bin/env bash
# Session 58 (`bash exp/pack.sh 590 exp/s58b.sh`): `dskc bench --graph` (the layer's forward and backward
# replayed from CUDA graphs) on the GPU: its GPU test case, then how much of the layer's time the
# host's launch gaps are: plain vs graph, both shapes, no flag and all three flags, 5 interleaved
# rounds of `dskc bench --csv` (burst, 10 warm-up + 50 timed iterations), medians.
. "$(dirname "$0")/common.sh"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/gpu.txt"
build_gpu -j16 dskc gpu_test_layer_behaviour
el "graph test"
gpu_test test_graph.log 200 gpu_test_layer_behaviour -tc="*CUDA graphs*"
el "plain vs graph"
for r in 1 2 3 4 5; do
  for L in $L128 $L512; do
    for fl in "" "$FL_ALL"; do
      for g in "" "--graph"; do
        v=$(timeout 60 build-gpu/dskc bench $L $fl $g --csv 2>&1 | tail -1)
        echo "$r|$L|${fl:+all}|${g:-plain}|$v" >> "$OUT/ab.txt"
      done
    done
  done
done
python3 - "$OUT/ab.txt" <<'PY'
import sys, statistics as st, collections
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    r, L, fl, g, v = line.rstrip('\n').split('|')
    f = v.split(',')
    try: d[(L, fl or 'none', g)].append((float(f[5]), float(f[6]), float(f[7]), f[10]))
    except Exception: print('bad', line.strip())
print('| layer | flags | mode | fwd ms | bwd ms | total ms (median) | totals | MHz |')
for k in sorted(d):
    v = d[k]
    print('| %s | %s | %s | %.4f | %.4f | **%.4f** | %s | %s |' % (k[0].split('/')[-1], k[1], k[2],
          st.median(x[0] for x in v), st.median(x[1] for x in v), st.median(x[2] for x in v),
          ' '.join('%.3f' % x[2] for x in v), ' '.join(x[3] for x in v)))
PY
build-gpu/dskc bench $L128 --graph | tail -4
el done
