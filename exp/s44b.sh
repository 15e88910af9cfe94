#!/usr/bin/env bash
# Session 44, call 2: v42 (b) gemm_inter_fwd's pipeline depth: the GELU epilogue in 1, 2 or 3 regions
# per warpgroup (DSKC_GEMM_GELU_REGIONS; 6, 5 or 4 stages), against main (s44_main_sources: f82940e's
# generated sources, 3 regions and the degree-9 GELU). The one-region form was removed after this run
# (DSKC_GEMM_GELU_REGIONS=1 is now a config error, so its rows fail on the final tree) — (1) the gemm_sm90 FFN GPU test (every region
# count against cuBLASLt); (2) clock64 brackets for 1 and 2 regions; (3) Nsight Compute gemm_inter_fwd
# and step sums, 3 alternations; (4) burst layer A/B at both shapes; (5) ctest -L gpu.
. "$(dirname "$0")/common.sh"
build_gpu -j16
el "gemm_sm90 FFN test (regions 1, 2, 3)"
gpu_test test_ffn_sm90.log 200 gpu_test_layer_numerics -tc="gemm_sm90 FFN GEMMs*"
V=build-gpu/s44; mkdir -p $V
s44_main_sources
build-gpu/dskc compile $L128 --arch sm_90 --emit cuda -o $V/new.cu > /dev/null || exit 1
for r in 1 2; do
  DSKC_GEMM_GELU_REGIONS=$r build-gpu/dskc compile $L128 --arch sm_90 --emit cuda -o $V/r$r.cu > /dev/null || exit 1
  python3 exp/s44_variants.py $V/r$r.cu $V/r${r}_diag.cu diag || exit 1
done
el "clock64 brackets"
for r in 1 2; do
  DSKC_GEMM_GELU_REGIONS=$r DSKC_OVERRIDE_SOURCE=$PWD/$V/r${r}_diag.cu timeout 60 build-gpu/dskc bench $L128 --warmup 10 --iters 20 > $OUT/diag_r$r.txt 2>&1
  echo "== regions $r"; grep "^dbg" $OUT/diag_r$r.txt | sort -k5,5n | head -4
done | tee $OUT/diag.txt
el "ncu: gemm_inter_fwd and the step sum"
for r in 1 2 3; do
  for v in main r1 r2 r3; do
    e="DSKC_GEMM_GELU_REGIONS=${v#r}"; [ $v = main ] && e="DSKC_OVERRIDE_SOURCE=$PWD/$V/main_128.cu"
    ncu_step "$e" $L128 ${v}_$r > /dev/null
    python3 exp/ncu_step.py "$OUT/ncu_${v}_$r.csv" > "$OUT/kernels_${v}_$r.txt" 2>&1
    echo "$v $r $(grep -E ' gemm_inter_fwd$' "$OUT/kernels_${v}_$r.txt" | awk '{print "inter", $1}') $(tail -1 "$OUT/kernels_${v}_$r.txt" | awk '{print "sum", $1}')"
    rm -f "$OUT/ncu_${v}_$r.csv" "$OUT/kernels_${v}_$r.txt"
  done
done | tee $OUT/ncu_ab.txt
el "burst A/B, 3 rounds per shape"
for n in 128 512; do
  timeout 150 python3 bench/layer_matrix.py --dskc build-gpu/dskc --rounds 3 --shapes $([ $n = 128 ] && echo 64x128 || echo 16x512) \
    --only "fp16 Pre-LN,main,1 region,3 regions" --env "main@fp16 Pre-LN:DSKC_OVERRIDE_SOURCE=$PWD/$V/main_$n.cu" \
    --env "1 region@fp16 Pre-LN:DSKC_GEMM_GELU_REGIONS=1" --env "3 regions@fp16 Pre-LN:DSKC_GEMM_GELU_REGIONS=3" 2>&1 |
    tee $OUT/ab_$n.txt | grep "^| [0-9]"
done
ctest_gpu 16 250 240
el done
