#!/usr/bin/env bash
# Session 45, call 1: (a) the full GPU suite on HEAD (the v42 tidy and the shortened FFN test loop had
# not run on a GPU); (b) Nsight Compute --set full of gemm_inter_fwd as built, of its nopass variant
# (exp/s44_variants.py) and of the forward's cuBLASLt GEMMs with DSKC_FFN_GEMM=cublas (the reference
# rate); (c) the module's SASS for reading the mainloop. Reports in $OUT (run it under exp/pack.sh).
. "$(dirname "$0")/common.sh"
build_gpu -j16
V=build-gpu/s44; mkdir -p $V
build-gpu/dskc compile $L128 --arch sm_90 --emit cuda -o $V/new.cu --manifest none > /dev/null || exit 1
build-gpu/dskc compile $L128 --arch sm_90 --emit cubin -o $V/new.cubin --manifest none > /dev/null || exit 1
python3 exp/s44_variants.py $V/new.cu $V/new_nopass.cu nopass || exit 1
CUOBJ=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
$CUOBJ -sass -fun gemm_inter_fwd $V/new.cubin > $OUT/sass_inter.txt 2>&1; wc -l $OUT/sass_inter.txt
for v in new new_nopass; do
  el "ncu $v"
  DSKC_OVERRIDE_SOURCE=$PWD/$V/$v.cu timeout 150 $NCU --clock-control none --set full --import-source no \
    -k regex:gemm_inter_fwd -c 1 build-gpu/dskc bench $L128 --iters 1 --warmup 1 > $OUT/ncu_$v.txt 2>&1
  grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|Issue Slots Busy|No Eligible|Shared Memory|L2 Hit|Registers" $OUT/ncu_$v.txt | head -20
done
el "ncu cublas"
DSKC_FFN_GEMM=cublas timeout 150 $NCU --clock-control none --set full --import-source no \
  -k regex:'nvjet|xmma|cutlass|sm90' -c 4 build-gpu/dskc bench $L128 --iters 1 --warmup 0 > $OUT/ncu_cublas.txt 2>&1
grep -E "^  [a-z_A-Z0-9]+.*\(|Duration" $OUT/ncu_cublas.txt | head -20
ctest_gpu 16 470 450
el done
