#!/usr/bin/env bash
# Session 46, call 1: where attn_flash_bwd_dkdv's block life goes at (64,128) and (16,512) (the largest
# non-GEMM kernel of the step, ~2.5x its DRAM bound at (64,128)). Module-source variants of the
# wgmma dK/dV template by DSKC_OVERRIDE_SOURCE (exp/s46_variants.py): diag = clock64 brackets of
# thread 0 per block, averaged over a launch, plus the blocks that ran on SM 0 with their globaltimer
# start / end; nostore / loadonly timing only. (1) Nsight Compute kernel lists of the default step at
# both shapes; (2) the brackets; (3) dK/dV kernel time of base / nostore / loadonly, 3 alternations;
# (4) the dK/dV kernel's SASS (for instruction counts). Run under exp/pack.sh.
. "$(dirname "$0")/common.sh"
build_gpu -j16 dskc
V=build-gpu/s46; mkdir -p $V
build-gpu/dskc compile $L128 --arch sm_90 --emit cuda -o $V/base_128.cu --manifest none > /dev/null || exit 1
build-gpu/dskc compile $L512 --arch sm_90 --emit cuda -o $V/base_512.cu --manifest none > /dev/null || exit 1
for n in 128 512; do python3 exp/s46_variants.py $V/base_$n.cu $V/diag_$n.cu diag || exit 1; done
python3 exp/s46_variants.py $V/base_128.cu $V/nostore_128.cu nostore || exit 1
python3 exp/s46_variants.py $V/base_128.cu $V/loadonly_128.cu loadonly || exit 1
el "ncu kernel lists, default step"
for n in 128 512; do
  L=$L128; [ $n = 512 ] && L=$L512
  ncu_step "" $L list_$n
  python3 exp/ncu_step.py "$OUT/ncu_list_$n.csv" > "$OUT/kernels_$n.txt" 2>&1; rm -f "$OUT/ncu_list_$n.csv"
  cat "$OUT/kernels_$n.txt"
done
el "clock64 brackets (cycles per block, averages of the 20th launch)"
for n in 128 512; do
  L=$L128; [ $n = 512 ] && L=$L512
  DSKC_OVERRIDE_SOURCE=$PWD/$V/diag_$n.cu timeout 60 build-gpu/dskc bench $L --warmup 10 --iters 20 > $OUT/diag_$n.txt 2>&1
  echo "== $n"; grep "^dbgavg" $OUT/diag_$n.txt; grep "^dbgsm0" $OUT/diag_$n.txt | sort -k5,5n | head -24
done | tee $OUT/diag.txt
el "dK/dV kernel time: base / nostore / loadonly at (64,128)"
for r in 1 2 3; do
  for v in base nostore loadonly; do
    d=$(DSKC_OVERRIDE_SOURCE=$PWD/$V/${v}_128.cu timeout 60 $NCU --clock-control none --metrics gpu__time_duration.sum \
      -k regex:attn_flash_bwd_dkdv --launch-skip 1 -c 1 build-gpu/dskc bench $L128 --iters 1 --warmup 1 2>&1 |
      grep gpu__time_duration | awk '{print $(NF-1), $NF}')
    echo "round $r $v dkdv $d"
  done
done | tee $OUT/variants.txt
el "SASS"
build-gpu/dskc compile $L128 --arch sm_90 -o $V/base_128.cubin --manifest none > /dev/null
CUOBJ=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
$CUOBJ -sass -fun attn_flash_bwd_dkdv $V/base_128.cubin > $OUT/dkdv_128.sass 2>&1
wc -l $OUT/dkdv_128.sass
el done
