#!/usr/bin/env bash
# Session 43, call 2: stochastic_mode's TMA-reduced dQ (FlashDq kDqReduce in attn_flash_bwd_dkdv +
# attn_dq_convert; bench/NOTES.md v41). Its GPU cases (against the unfused path, the CPU reference and
# the default mode); on a failure, compute-sanitizer memcheck on the first case. Then Nsight Compute
# kernel times of one (16,512) step: default, stochastic_mode (reduce), stochastic_mode with
# DSKC_ATTN_DQ=gemm (its previous form), 2 rounds; then 7 interleaved burst rounds of the layer matrix's
# default and stochastic_mode rows (+ the dQ GEMM form).
. "$(dirname "$0")/common.sh"
build_gpu -j16 dskc gpu_test_flash_attention
el "reduce cases"
timeout 240 build-gpu/tests/gpu_test_flash_attention -tc="stochastic_mode + DSKC_ATTN_DQ=reduce*" > $OUT/flash_red.log 2>&1
rc=$?; echo "rc=$rc"; tail -3 $OUT/flash_red.log; grep -E "dQ vs default" $OUT/flash_red.log | head -8
if [ $rc != 0 ]; then
  grep -B3 -A10 ERROR $OUT/flash_red.log | head -60
  cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  DSKC_FLASH_CASE=d64-s509-red timeout 150 $cs --tool memcheck --error-exitcode 9 build-gpu/tests/gpu_test_flash_attention \
    -tc="stochastic_mode + DSKC_ATTN_DQ=reduce*" > $OUT/san_red.log 2>&1
  echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|Invalid|at 0x" $OUT/san_red.log | head -20
  exit 1
fi
el "ncu A/B (16,512)"
for r in 1 2; do
  for v in default reduce gemm; do
    e=""; f=""; [ $v != default ] && f=--stochastic_mode; [ $v = gemm ] && e="DSKC_ATTN_DQ=gemm"
    ncu_step "$e" $L512 ${v}_$r $f > /dev/null
    python3 exp/ncu_step.py "$OUT/ncu_${v}_$r.csv" > "$OUT/kernels_${v}_$r.txt" 2>&1
    echo "$v $r $(grep -E ' (attn_flash_bwd_dkdv|attn_flash_bwd_dot|attn_dq_convert)$' "$OUT/kernels_${v}_$r.txt" | awk '{printf "%s %s  ", $NF, $1}') $(grep -E 'ptrBatch' "$OUT/kernels_${v}_$r.txt" | awk '{print "dqgemm", $1}') $(tail -1 "$OUT/kernels_${v}_$r.txt" | awk '{print "sum", $1}')"
    rm -f "$OUT/ncu_${v}_$r.csv"
  done
done | tee "$OUT/ncu_ab.txt"
el "7 burst rounds"
timeout 260 python3 bench/layer_matrix.py --dskc build-gpu/dskc --rounds 7 --only "fp16 Pre-LN,stochastic_mode,sto gemm" \
  --env "sto gemm@stochastic_mode:DSKC_ATTN_DQ=gemm" 2>&1 | tee $OUT/ab7.txt | tail -14
el done
