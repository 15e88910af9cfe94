#!/usr/bin/env bash
# Session 42, call 3: the wgmma attention forward with its keep words loaded a tile ahead (v39).
# The full GPU suite on the new code, then A/B against the module source of the previous template
# (build-gpu/v39/base_{128,512}.cu from v39_sources in exp/common.sh, by DSKC_OVERRIDE_SOURCE):
# Nsight Compute kernel times of one step (attn_flash_fwd and the sum), 3 alternations per shape, and
# the layer's wall time (`dskc bench --csv`, burst), 4 alternations per shape (WALL=0 leaves it out).
# Call 4 (the final code: loading ahead only at max_seq <= 128) ran it again as `WALL=0 bash exp/s42c.sh`.
. "$(dirname "$0")/common.sh"
build_gpu -j16
v39_sources
ctest_gpu 16 300 290
el "ncu A/B"
for n in 128 512; do
  L=$L128; [ $n = 512 ] && L=$L512
  for r in 1 2 3; do
    for v in base new; do
      e=""; [ $v = base ] && e="DSKC_OVERRIDE_SOURCE=$PWD/build-gpu/v39/base_$n.cu"
      ncu_step "$e" $L ${v}_${n}_$r > /dev/null
      python3 exp/ncu_step.py "$OUT/ncu_${v}_${n}_$r.csv" > "$OUT/kernels_${v}_${n}_$r.txt"
      echo "$n $v $r $(grep -E ' attn_flash_fwd$' "$OUT/kernels_${v}_${n}_$r.txt" | awk '{print "fwd", $1}') $(tail -1 "$OUT/kernels_${v}_${n}_$r.txt" | awk '{print "sum", $1}')"
    done
  done
done | tee "$OUT/ncu_ab.txt"
if [ "${WALL:-1}" = 1 ]; then
  el "wall A/B"
  for n in 128 512; do
    L=$L128; [ $n = 512 ] && L=$L512
    for r in 1 2 3 4; do
      for v in base new; do
        e=""; [ $v = base ] && e="DSKC_OVERRIDE_SOURCE=$PWD/build-gpu/v39/base_$n.cu"
        echo "$n $v $r $(env $e timeout 60 build-gpu/dskc bench $L --csv 2>/dev/null | tail -1)"
      done
    done
  done | tee "$OUT/wall_ab.txt"
fi
el done
