#!/usr/bin/env bash
# Session 45, call 3: bias_gelu_bwd (the GELU backward pass, 0.0706 ms at 2.85 TB/s) — Nsight Compute
# --set full of it as built, and its duration under three source variants (exp/s45_variants.py: nopdf
# and ident timing-only, onexp the one-exp2 GELU′ candidate), alternating; the step's kernel sum for
# the built module against onexp. Run under exp/pack.sh.
. "$(dirname "$0")/common.sh"
build_gpu -j16 dskc
V=build-gpu/s45; mkdir -p $V
build-gpu/dskc compile $L128 --arch sm_90 --emit cuda -o $V/base.cu --manifest none > /dev/null || exit 1
for v in nopdf ident onexp; do python3 exp/s45_variants.py $V/base.cu $V/$v.cu $v || exit 1; done
el "ncu --set full bias_gelu_bwd"
DSKC_OVERRIDE_SOURCE=$PWD/$V/base.cu timeout 120 $NCU --clock-control none --set full --import-source no \
  -k regex:bias_gelu_bwd --launch-skip 1 -c 1 build-gpu/dskc bench $L128 --iters 1 --warmup 1 > $OUT/ncu_gelu_bwd.txt 2>&1
grep -E "Duration|DRAM Throughput|Memory Throughput|Issue Slots|Executed Ipc A|highest-utilized|No Eligible|Achieved Occupancy|Registers Per" $OUT/ncu_gelu_bwd.txt | head -20
el "durations"
for r in 1 2 3; do
  for v in base nopdf ident onexp; do
    d=$(DSKC_OVERRIDE_SOURCE=$PWD/$V/$v.cu timeout 60 $NCU --clock-control none --metrics gpu__time_duration.sum \
      -k regex:bias_gelu_bwd --launch-skip 1 -c 1 build-gpu/dskc bench $L128 --iters 1 --warmup 1 2>&1 |
      grep gpu__time_duration | awk '{print $(NF-1), $NF}')
    echo "round $r $v bias_gelu_bwd $d"
  done
done | tee $OUT/durations.txt
el "step sums"
for r in 1 2 3; do
  for v in base onexp; do ncu_step "DSKC_OVERRIDE_SOURCE=$PWD/$V/$v.cu" $L128 ${v}_$r; done
done
el done
