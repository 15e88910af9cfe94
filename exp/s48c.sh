#!/usr/bin/env bash
# Session 48, call 3: layernorm_fwd_bits variants (exp/s48_variants.py: lnfirst, swar, both) against
# the generated source (base), Nsight Compute step lists through DSKC_OVERRIDE_SOURCE, default and all
# three flags at both shapes, 3 alternations; Nsight Compute sections of base's layernorm_fwd_norm at
# (16,512). Run under exp/pack.sh.
. "$(dirname "$0")/common.sh"
build_gpu dskc
for L in $L128 $L512; do
  n=$(basename $L .json)
  for fl in def all; do
    d=build-gpu/v48/${n}_$fl; mkdir -p $d
    build-gpu/dskc inspect $L --source $( [ $fl = all ] && echo $FL_ALL ) > $d/src.cu
    python3 exp/s48_variants.py $d/src.cu $d > /dev/null
  done
done
el "ncu sections, base layernorm_fwd_norm (16,512)"
timeout 120 $NCU --kernel-name layernorm_fwd_norm --launch-skip 2 --launch-count 1 --section SpeedOfLight --section Occupancy \
  --section LaunchStats --section WarpStateStats --section InstructionStats --section ComputeWorkloadAnalysis \
  build-gpu/dskc bench $L512 --warmup 2 --iters 1 > $OUT/ncu_ln512.txt 2>&1; echo "rc=$?"
el "variants"
for r in 1 2 3; do
  for L in $L128 $L512; do
    n=$(basename $L .json)
    for fl in def all; do
      for v in base lnfirst swar both; do
        ln_bits_line "DSKC_OVERRIDE_SOURCE=build-gpu/v48/${n}_$fl/$v.cu" $L $fl ${n}_${fl}_${v}_$r $n $fl $v $r
      done
    done
  done
done | tee $OUT/variants.txt
el done
