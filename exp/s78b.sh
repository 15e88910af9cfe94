#!/usr/bin/env bash
# Session 78: the dQ GEMM above 128 keys by dskc's own attn_dq_wgmma (DSKC_ATTN_DQ_GEMM=wgmma) against
# cuBLAS's batched GEMM (the default). Prediction: the GEMM reads dSᵀ (128 MiB at (16,512)) at ~2.5 TB/s
# on an H100 (0.067 ms, t18) / ~3.5 on an H200 (0.048, v39); streamed through a TMA ring at ~90% of
# the DRAM rate, heads last-written first (some dSᵀ still in L2): −0.01 to −0.015 ms per (16,512) step.
# 1. the GPU case (bitwise / within rounding against cuBLAS, vs unfused and the CPU reference);
# 2. Nsight Compute step lists at (16,512), both settings, two alternations (dQ kernel time, step sum);
# 3. A/Bs at (16,512): launched and replayed from graphs, ROUNDS interleaved rounds each.
# bash exp/pack.sh LIMIT exp/s78b.sh [END [ROUNDS]]
. "$(dirname "$0")/common.sh"
END=${1:-300} R=${2:-9}
gpu_head
build_gpu -j16 dskc gpu_test_flash_attention
el "GPU case"
( gpu_test dqwg_test.log 240 gpu_test_flash_attention -tc="dQ by attn_dq_wgmma*" ) || { el "GPU case failed: no timings"; exit 1; }
grep -E "attn_dq_wgmma vs cuBLAS:" "$OUT/dqwg_test.log"
for r in 1 2; do
  for v in cublas wgmma; do
    ncu_step "DSKC_ATTN_DQ_GEMM=$v" $L512 dq_${v}_$r > /dev/null
    python3 exp/ncu_step.py "$OUT/ncu_dq_${v}_$r.csv" > "$OUT/kernels_dq_${v}_$r.txt" 2>&1
    rm -f "$OUT/ncu_dq_${v}_$r.csv"
    echo "$v $r dkdv $(grep -E ' attn_flash_bwd_dkdv$' "$OUT/kernels_dq_${v}_$r.txt" | awk '{print $1}')" \
      "dQ $(grep -E 'ptrBatch| attn_dq_wgmma$' "$OUT/kernels_dq_${v}_$r.txt" | awk '{print $1}')" \
      "sum $(tail -1 "$OUT/kernels_dq_${v}_$r.txt" | awk '{print $1}')"
  done
done
E=(--env "dq wgmma@fp16 Pre-LN:DSKC_ATTN_DQ_GEMM=wgmma")
launched_matrix "$R" $(( END * 55 / 100 )) dqwg_r$R.txt --shapes 16x512 --only "fp16 Pre-LN,dq wgmma" --no-control "${E[@]}"
graph_matrix "$R" "$END" dqwg_graph_r$R.txt --shapes 16x512 --only "fp16 Pre-LN,dq wgmma" --no-control "${E[@]}"
el done
