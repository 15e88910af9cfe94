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
        ln_bits_line "DSKC_LN_BITS_BLOCKS=$v" $L $fl ${n}_${fl}_${v}_$r $n $fl $v $r
      done
    done
  done
done | tee $OUT/ab.txt
ctest_gpu 16 340 330
el done
