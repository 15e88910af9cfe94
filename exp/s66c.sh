#!/usr/bin/env bash
# Session 66, third call (`bash exp/pack.sh 590 exp/s66c.sh`, asked as nvidia-h200): what the two GELU
# GEMMs' epilogues cost on this card. Nsight Compute put gemm_output_dgrad at 0.123 ms on an H100
# (exp/s66b.sh) against 0.103 in session 54's H200 run of the same kernel (gemm_inter_fwd 0.135 against
# 0.132). Timing-only sources (exp/s66_variants.py, by DSKC_OVERRIDE_SOURCE): dplain (no GELU'(h) load,
# no multiply), dnoload (no load), fbias (the forward GEMM writing h only); and the cuBLASLt FFN path
# (DSKC_FFN_GEMM=cublas) for the same shapes. Two alternations per shape. On an H200 compare_torch's
# side-by-side table (3 rounds) first.
. "$(dirname "$0")/common.sh"
gpu_head
build_gpu -j16 dskc
grep -q H200 "$OUT/gpu.txt" && compare_r3 "${S66C_CMP_END:-280}"
line() {  # the GELU GEMMs' lines and the sum of one kernel list
  grep -E 'gemm_inter_fwd|gemm_output_dgrad|bias_gelu|hsh_.*(bias|gelu|GELU)|sum of' "$1" | awk '{printf "%s %s  ", $NF, $1}'
}
for n in 128 512; do
  L=$L128; [ $n = 512 ] && L=$L512
  mkdir -p build-gpu/s66c_$n
  build-gpu/dskc compile $L --arch sm_90 --emit cuda -o build-gpu/s66c_$n/gen.cu --manifest none --quiet || exit 1
  python3 exp/s66_variants.py build-gpu/s66c_$n/gen.cu build-gpu/s66c_$n > /dev/null || exit 1
  for r in 1 2; do
    for v in base dplain dnoload fbias cublas; do
      e="DSKC_OVERRIDE_SOURCE=$PWD/build-gpu/s66c_$n/$v.cu"; [ $v = cublas ] && e="DSKC_FFN_GEMM=cublas"
      [ $v = cublas ] && [ $r = 2 ] && continue
      ncu_step "$e" $L ${v}_${n}_$r > /dev/null
      python3 exp/ncu_step.py "$OUT/ncu_${v}_${n}_$r.csv" > "$OUT/kernels_${v}_${n}_$r.txt" 2>&1
      rm -f "$OUT/ncu_${v}_${n}_$r.csv"
      echo "$n $r $v: $(line "$OUT/kernels_${v}_${n}_$r.txt")"
    done
  done
done
el done
