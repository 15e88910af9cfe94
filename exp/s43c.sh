#!/usr/bin/env bash
# Session 43, call 3: the TMA-reduced dQ (v41) — Nsight Compute kernel times of one (16,512) step,
# default against stochastic_mode (reduce), 3 rounds (the step from the last layernorm_fwd_norm on:
# stochastic_mode's first step also runs the GEMM autotuner's candidates); the full GPU suite; then
# 5 interleaved rounds of default / stochastic_mode / stochastic_mode with the dQ GEMM at (16,512),
# burst and sustained (--warmup 300).
. "$(dirname "$0")/common.sh"
build_gpu -j16
el "ncu A/B (16,512)"
for r in 1 2 3; do
  for v in default reduce; do
    f=""; [ $v = reduce ] && f=--stochastic_mode
    ncu_step "" $L512 ${v}_$r $f > /dev/null
    python3 exp/ncu_step.py "$OUT/ncu_${v}_$r.csv" --from-last layernorm_fwd_norm > "$OUT/kernels_${v}_$r.txt" 2>&1
    echo "$v $r $(grep -E ' (attn_flash_bwd_dkdv|attn_flash_bwd_dot|attn_dq_convert)$' "$OUT/kernels_${v}_$r.txt" | awk '{printf "%s %s  ", $NF, $1}') $(grep -E 'ptrBatch' "$OUT/kernels_${v}_$r.txt" | awk '{print "dqgemm", $1}') $(tail -1 "$OUT/kernels_${v}_$r.txt" | awk '{print "sum", $1}')"
    rm -f "$OUT/ncu_${v}_$r.csv"
  done
done | tee "$OUT/ncu_ab.txt"
ctest_gpu 16 260 250
for w in 0 300; do
  el "5 rounds (16,512), warm-up $w"
  timeout 100 python3 bench/layer_matrix.py --dskc build-gpu/dskc --rounds 5 --shapes 16x512 $([ $w = 0 ] || echo --warmup $w) \
    --only "fp16 Pre-LN,stochastic_mode,sto gemm" --env "sto gemm@stochastic_mode:DSKC_ATTN_DQ=gemm" 2>&1 | tee $OUT/ab5_w$w.txt | tail -5
done
el done
