#!/usr/bin/env bash
# Prepared in session 44, not run yet (the session's device time was spent): what limits
# gemm_inter_fwd's mainloop (bench/NOTES.md "After v42"). Nsight Compute of gemm_inter_fwd as built
# (two regions) and of the timing-only variant without the GELU pass (exp/s44_variants.py nopass):
# speed of light, pipe utilization (tensor / shared memory), memory tables (L2 and shared-memory
# bandwidth), warp states. Summary lines here, the reports in $OUT/ncu_inter_*.txt.
. "$(dirname "$0")/common.sh"
build_gpu -j16 dskc
V=build-gpu/s44; mkdir -p $V
build-gpu/dskc compile $L128 --arch sm_90 --emit cuda -o $V/new.cu --manifest none > /dev/null || exit 1
python3 exp/s44_variants.py $V/new.cu $V/new_nopass.cu nopass || exit 1
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
for v in new new_nopass; do
  el "ncu $v"
  DSKC_OVERRIDE_SOURCE=$PWD/$V/$v.cu timeout 150 $NCU --clock-control none --section SpeedOfLight \
    --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables \
    --section WarpStateStats --section SchedulerStats -k regex:gemm_inter_fwd -c 1 \
    build-gpu/dskc bench $L128 --iters 1 --warmup 1 > $OUT/ncu_inter_$v.txt 2>&1
  grep -E "Duration|Throughput|Pipe|Shared|Issue Slots|Stall|No Eligible|Bank" $OUT/ncu_inter_$v.txt | head -40
done
el done
