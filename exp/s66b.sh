#!/usr/bin/env bash
# Session 66, second call (`bash exp/pack.sh 590 exp/s66b.sh`, asked as nvidia-h200): what a dropout
# keep rule of Philox4x32-7 instead of -10 would save (bench/NOTES.md v-after-v37 named it as the one
# lever left for stochastic_mode and the all-flags cost, "not tried"). No code change: the generated
# module source of each (shape, flags) with the Philox loop's round count edited (`r < 10` -> `r < 7`,
# one line, checked) runs by DSKC_OVERRIDE_SOURCE; the masks differ, so this times the work only.
# On an H200 compare_torch's side-by-side table (3 rounds) first. Then per shape (64,128) / (16,512)
# and flags (none / all three): Nsight Compute's kernel list of one step for 10 and 7 rounds (the
# Philox kernels' lines and the sum), then dskc bench wall times alternated over S66B_ROUNDS rounds.
. "$(dirname "$0")/common.sh"
gpu_head
build_gpu -j16 dskc
grep -q H200 "$OUT/gpu.txt" && compare_r3 "${S66B_CMP_END:-280}"
mkdir -p build-gpu/s66
flags() { [ "$1" = all ] && echo "$FL_ALL"; }
layer() { [ "$1" = 512 ] && echo $L512 || echo $L128; }
for n in 128 512; do
  for f in none all; do
    s=build-gpu/s66/r10_${n}_$f.cu
    build-gpu/dskc compile "$(layer $n)" $(flags $f) --arch sm_90 --emit cuda -o $s --manifest none --quiet || exit 1
    sed 's/for (int r = 0; r < 10; ++r) {/for (int r = 0; r < 7; ++r) {/' $s > build-gpu/s66/r7_${n}_$f.cu
    echo "$n $f: $(diff $s build-gpu/s66/r7_${n}_$f.cu | grep -c '^>') line(s) changed"
  done
done
el "Nsight Compute, one step each"
for n in 128 512; do
  for f in none all; do
    for r in r10 r7; do
      ncu_step "DSKC_OVERRIDE_SOURCE=$PWD/build-gpu/s66/${r}_${n}_$f.cu" "$(layer $n)" ${r}_${n}_$f $(flags $f) > /dev/null
      python3 exp/ncu_step.py "$OUT/ncu_${r}_${n}_$f.csv" > "$OUT/kernels_${r}_${n}_$f.txt" 2>&1
      rm -f "$OUT/ncu_${r}_${n}_$f.csv"
      echo "$n $f $r: $(grep -E 'layernorm_fwd_norm|bits|dropout_recompute|sum of' "$OUT/kernels_${r}_${n}_$f.txt" | awk '{printf "%s %s  ", $NF, $1}')"
    done
  done
done
el "wall times, dskc bench --iters 30, alternated"
for i in $(seq "${S66B_ROUNDS:-5}"); do
  for n in 128 512; do
    for f in none all; do
      for r in r10 r7; do
        v=$(DSKC_OVERRIDE_SOURCE=$PWD/build-gpu/s66/${r}_${n}_$f.cu timeout 60 build-gpu/dskc bench "$(layer $n)" $(flags $f) \
          --csv --iters 30 2>/dev/null | tail -1 | cut -d, -f6-8)
        echo "$i $n $f $r $v"
      done
    done
  done
done | tee "$OUT/wall.txt"
python3 - "$OUT/wall.txt" <<'EOF'
import statistics, sys, collections
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    p = line.split()
    if len(p) == 5 and p[4].count(",") == 2:
        d[(p[1], p[2], p[3])].append(float(p[4].split(",")[2]))
for n in ("128", "512"):
    for f in ("none", "all"):
        a, b = d[(n, f, "r10")], d[(n, f, "r7")]
        if a and b:
            ma, mb = statistics.median(a), statistics.median(b)
            print(f"{n:>4} {f:>4}: 10 rounds {ma:.4f}  7 rounds {mb:.4f}  ({(mb / ma - 1) * 100:+.1f}%)  n={len(a)}")
EOF
el done
