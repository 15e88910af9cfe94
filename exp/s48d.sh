#!/usr/bin/env bash
# Session 48, call 4: v46, layernorm_fwd_bits' keep words only in the grid's whole waves
# (DSKC_LN_BITS_BLOCKS=waves, the default, against all): (1) Nsight Compute step lists, default and
# all three flags at both shapes, 2 alternations (layernorm_fwd_norm and the sum); (2) ctest -L gpu,
# the whole suite. Run under exp/pack.sh.
. "$(dirname "$0")/common.sh"
build_gpu -j16
el "ncu A/B"
for r in 1 2; do
  for L in $L128 $L512; do
    n=$(basename $L .json)
    for fl in def all; do
      for v in all waves; do
        tag=${n}_${fl}_${v}_$r
        ncu_step "DSKC_LN_BITS_BLOCKS=$v" $L $tag $( [ $fl = all ] && echo $FL_ALL ) > /dev/null
        python3 exp/ncu_step.py $OUT/ncu_$tag.csv > $OUT/k_$tag.txt 2>&1
        echo "$n $fl $v $r ln $(grep -E ' layernorm_fwd_norm$' $OUT/k_$tag.txt | awk '{printf "%.4f ", $1}') sum $(tail -1 $OUT/k_$tag.txt | awk '{print $1}')"
        rm -f $OUT/ncu_$tag.csv
      done
    done
  done
done | tee $OUT/ab.txt
ctest_gpu 16 340 330
el done
