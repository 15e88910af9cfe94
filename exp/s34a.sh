#!/usr/bin/env bash
# Session 34, call 1 (bench/NOTES.md v31): build; the DSKC_GELU_EPI=regs GPU test; gemm_inter_fwd's
# profile line pass / regs; the layer A/B with the control row; the warm-up A/B (10 vs 300 untimed
# iterations, clocks read around each run); ncu of the forward gemm_sm90 kernels.
. "$(dirname "$0")/common.sh"
build_gpu dskc gpu_test_layer_numerics
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active --format=csv
el "GPU test: DSKC_GELU_EPI=regs bitwise"
timeout 240 build-gpu/tests/gpu_test_layer_numerics -tc="*DSKC_GELU_EPI*" > "$OUT/test_regs.log" 2>&1; rc=$?
echo "rc=$rc"; tail -3 "$OUT/test_regs.log"; [ $rc = 0 ] || { grep -B2 -A6 ERROR "$OUT/test_regs.log" | head -40; }
el "memcheck regs 3x77"
DSKC_GELU_EPI=regs timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 build-gpu/dskc bench $L128 --batch 3 --seq 77 --iters 1 --warmup 1 > "$OUT/memcheck_regs.log" 2>&1
echo "memcheck rc=$?"; grep -E "ERROR SUMMARY" "$OUT/memcheck_regs.log"
[ $rc = 0 ] || exit 1
el "profile gemm_inter_fwd pass / regs"
for r in 1 2 3; do for f in $L128 $L512; do for v in pass regs; do
  echo "$r $(basename $f) $v: $(DSKC_GELU_EPI=$v timeout 60 build-gpu/dskc bench $f --iters 20 --profile 2>&1 | grep -E "gemm_inter_fwd|gemm_qkv_fwd|gemm_output_fwd|  sum" | awk '{printf "%s %s  ", $1, $2}')"
done; done; done | tee "$OUT/profile_ab.txt"
el "layer A/B"
python3 bench/layer_matrix.py --dskc build-gpu/dskc --rounds 4 --only "fp16 Pre-LN,gelu regs" --env "gelu regs:DSKC_GELU_EPI=regs" 2>&1 | tee "$OUT/matrix_ab.txt"
el "warm-up A/B"
for r in 1 2 3 4; do for f in $L128 $L512; do for wu in 10 300; do
  c0=$(nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv,noheader | tr -d ' ')
  res=$(timeout 60 build-gpu/dskc bench $f --iters 50 --warmup $wu --csv | tail -1)
  c1=$(nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv,noheader | tr -d ' ')
  echo "$r $(basename $f) wu=$wu $res | before $c0 after $c1"
done; done; done | tee "$OUT/warmup_ab.txt"
el "ncu forward gemm_sm90"
for v in pass regs; do
  DSKC_GELU_EPI=$v timeout 150 $NCU --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats \
    -k "regex:gemm_.*_fwd" -c 4 build-gpu/dskc bench $L128 --iters 1 --warmup 0 > "$OUT/ncu_$v.txt" 2>&1
  echo "ncu $v rc=$?"
  grep -E "^  gemm_[a-z_]+ |Duration|Memory Throughput|DRAM Throughput|L1/TEX Cache Throughput|L2 Cache Throughput|Compute \(SM\) Throughput|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|Shared Memory" "$OUT/ncu_$v.txt" | head -60
done
el done
