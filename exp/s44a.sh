#!/usr/bin/env bash
# Session 44, call 1: where gemm_inter_fwd's time goes, and v42 (the GELU with a degree-7 fit and
# max(x,0) − |x|·Φ(−|x|)). Variants of the (64,128) module source by DSKC_OVERRIDE_SOURCE
# (exp/s44_variants.py): main = f82940e's generated source (s44_main_sources), new = this build's,
# u2 = new with the GELU pass unrolled by two, ident / nopass = main with the GELU arithmetic / the
# whole pass left out (timing only). (1) clock64 brackets per warpgroup and tile (turn wait,
# mainloop, epilogue) printed on the 20th launch; (2) Nsight Compute kernel times, 3 alternations;
# (3) the GELU and gemm_sm90 GPU tests on the new build; (4) burst layer A/B (64,128) main vs new.
. "$(dirname "$0")/common.sh"
build_gpu -j16
V=build-gpu/s44; mkdir -p $V
build-gpu/dskc compile $L128 --arch sm_90 --emit cuda -o $V/new.cu > /dev/null || exit 1
s44_main_sources
cp $V/main_128.cu $V/main.cu
for spec in "main diag" "new diag" "new u2" "new u2+diag" "main ident" "main ident+diag" "main nopass" "main nopass+diag"; do
  set -- $spec; python3 exp/s44_variants.py $V/$1.cu $V/$1_${2//+/_}.cu $2 || exit 1
done
el "clock64 brackets (cycles per tile, averages)"
for v in main_diag new_diag new_u2_diag main_ident_diag main_nopass_diag; do
  DSKC_OVERRIDE_SOURCE=$PWD/$V/$v.cu timeout 60 build-gpu/dskc bench $L128 --warmup 10 --iters 20 > $OUT/diag_$v.txt 2>&1
  echo "== $v"; grep "^dbg" $OUT/diag_$v.txt | sort -k5,5n | head -6
done | tee $OUT/diag.txt
el "ncu: gemm_inter_fwd and the step sum"
for r in 1 2 3; do
  for v in main new new_u2 main_ident main_nopass; do
    [ $r -gt 1 ] && [[ $v == main_* ]] && continue
    ncu_step "DSKC_OVERRIDE_SOURCE=$PWD/$V/$v.cu" $L128 ${v}_$r > /dev/null
    python3 exp/ncu_step.py "$OUT/ncu_${v}_$r.csv" > "$OUT/kernels_${v}_$r.txt" 2>&1
    echo "$v $r $(grep -E ' gemm_inter_fwd$' "$OUT/kernels_${v}_$r.txt" | awk '{print "inter", $1}') $(tail -1 "$OUT/kernels_${v}_$r.txt" | awk '{print "sum", $1}')"
    rm -f "$OUT/ncu_${v}_$r.csv"
  done
done | tee $OUT/ncu_ab.txt
el "GPU tests: GELU device functions, gemm_sm90"
gpu_test test_gelu.log 120 gpu_test_layer_numerics -tc="GELU device functions*"
grep "GELU worst" $OUT/test_gelu.log
gemm_sm90_tests
el "burst A/B (64,128): main vs new, 5 rounds"
timeout 150 python3 bench/layer_matrix.py --dskc build-gpu/dskc --rounds 5 --shapes 64x128 --only "fp16 Pre-LN,main" \
  --env "main:DSKC_OVERRIDE_SOURCE=$PWD/$V/main.cu" 2>&1 | tee $OUT/ab128.txt | tail -5
el "ncu details of gemm_inter_fwd (main)"
DSKC_OVERRIDE_SOURCE=$PWD/$V/main.cu timeout 120 $NCU --section SpeedOfLight --section WarpStateStats --section SchedulerStats \
  --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section SourceCounters -k regex:gemm_inter_fwd -c 1 \
  build-gpu/dskc bench $L128 --iters 1 --warmup 1 > $OUT/ncu_inter_main.txt 2>&1
grep -E "Duration|Throughput|Issue Slots Busy|Issued Ipc|Warp Cycles Per Issued|No Eligible|Stall|Pipe" $OUT/ncu_inter_main.txt | head -40
el done
