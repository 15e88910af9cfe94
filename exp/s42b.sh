#!/usr/bin/env bash
# Session 42, call 2: why the three largest non-cuBLAS kernels of a default (64,128) step sit above
# their bounds (attn_flash_bwd_dkdv 0.0835 ms against ~0.04 of DRAM traffic, attn_flash_fwd 0.032
# against ~0.02, gemm_inter_fwd 0.133 against cuBLASLt's ~0.095 without the GELU epilogue):
# per-pipe utilization, stall reasons per issued instruction and the top stall locations (Nsight
# Compute), the same for dkdv at (16,512), and the SASS of the cached module (cuobjdump).
. "$(dirname "$0")/common.sh"
build_gpu -j16 dskc
STALLS='regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio'
for L in $L128 $L512; do
  T=$(basename $L .json)
  el "ncu $T"
  timeout 200 $NCU -k 'regex:attn_flash_bwd_dkdv|gemm_inter_fwd|attn_flash_fwd' --launch-skip 6 --launch-count 3 \
    --cache-control none --clock-control none --section ComputeWorkloadAnalysis --section WarpStateStats \
    --section SourceCounters --section InstructionStats --metrics "$STALLS" --print-details all \
    build-gpu/dskc bench $L --warmup 2 --iters 2 > "$OUT/detail_$T.txt" 2>&1
  echo "$T rc=$?"
done
el sass
CUOBJ=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
for L in $L128 $L512; do
  T=$(basename $L .json)
  build-gpu/dskc compile $L --arch sm_90 -o "$OUT/$T.cubin" > /dev/null 2>&1 || echo "compile $T failed"
  $CUOBJ -sass "$OUT/$T.cubin" > "$OUT/sass_$T.txt" 2>&1; echo "sass $T rc=$? $(wc -l < "$OUT/sass_$T.txt") lines"
  rm -f "$OUT/$T.cubin"
done
el done
