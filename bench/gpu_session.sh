#!/usr/bin/env bash
# One call on the GPU machine: configure + build (ninja, Release), then by MODE:
#   all (default): GPU tests, compute-sanitizer, dskc bench with per-step profile, PyTorch comparison
#   tests: GPU tests + compute-sanitizer only;   bench: layer benchmarks only
#   dp: data-parallel scaling (bench/dp_scaling.sh, needs 2 GPUs);   memory: bench/memory_table.sh
#   final: all + dp (one call on nvidia-h200-x2)
#   gemm: the gemm_sm90 FFN GEMMs (bench/NOTES.md v17, v18): their GPU test against the cuBLASLt path, a
#     memcheck of partial tiles (both under timeouts: a pipeline bug hangs rather than fails), the
#     layer A/B of DSKC_FFN_GEMM=cublas (default) / sm90_fwd / sm90 in $ROUNDS interleaved rounds,
#     and each one's per-kernel profile
#   linear: the same for DSKC_LINEAR_GEMM (bench/NOTES.md v19): its GPU test, a memcheck at partial
#     tiles, the layer A/B of cublas / sm90 / sm90 with DSKC_FFN_GEMM=sm90 too, and the GEMMs' profile lines
#   attn: the wgmma dK/dV kernel (bench/NOTES.md v20): its GPU test against the mma.sync kernel, a memcheck at
#     partial tiles, each DSKC_ATTN_BWD variant's attn_flash_bwd_dkdv profile line and the layer A/B (sync / wgmma /
#     wgmma2) in $ROUNDS interleaved rounds
#   attn_fwd: the same for the wgmma forward (bench/NOTES.md v21): DSKC_ATTN_FWD sync / wgmma / wgmma3
#   ncu: Nsight Compute of the kernels matching $KERNELS (regex; default bias_gelu) in one step of $LAYER,
#     SOURCE=1 adds per-instruction stall reasons; report in $OUT/ncu.txt
#   override: hand-edited module sources against each other (DSKC_OVERRIDE_SOURCE; bench/NOTES.md v23, v24): for
#     every NAME with $OVERRIDE_DIR/NAME_128.cu and NAME_512.cu (the `dskc inspect --source --arch sm_90` of
#     examples/bert_large_layer.json / _seq512.json, edited), `dskc bench --profile` of that layer in ${ROUNDS:-2}
#     interleaved rounds, one line per run with the profile lines matching $PATTERN (default: the layer total)
# MASK_AB=1 also runs the layer matrix with DSKC_ATTN_MASK=inline (the dropout-mask A/B).
# Logs go to $OUT (or ./out). Usage: bash bench/gpu_session.sh [all|tests|bench|dp|memory|final|gemm|linear|attn|attn_fwd|override|ncu]
set -u
MODE=${1:-all}
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
export DSKC_CACHE_DIR=$PWD/build-gpu/cache
step() { echo; echo "=== $* ==="; }
step configure
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > "$OUT/configure.log" 2>&1 || { tail -30 "$OUT/configure.log"; exit 1; }
step build
targets="dskc $(ninja -C build-gpu -t targets all | grep -o '^gpu_test_[a-z_0-9]*' | sort -u | tr '\n' ' ')"
ninja -C build-gpu $targets > "$OUT/build.log" 2>&1 || { grep -E "error|FAILED" "$OUT/build.log" | head -30; exit 1; }
if [ "$MODE" = dp ]; then
  step "data-parallel scaling"
  GPUS="1 2" bash bench/dp_scaling.sh
  exit 0
fi
LAYERS="examples/bert_large_layer.json examples/bert_large_layer_seq512.json"
# The A/B modes' steps. ab_test BINARY FILTER LOG PATTERN: one GPU test binary's test cases under a
# timeout (a pipeline bug hangs rather than fails), no timings after a failure.
ab_test() {
  timeout 300 "build-gpu/tests/$1" -tc="$2" > "$OUT/$3" 2>&1
  local rc=$?
  echo "rc=$rc"; grep -E "$4" "$OUT/$3" | head -40
  [ $rc = 0 ] || exit 1
}
# memcheck_3x77 LOG [VAR=VALUE ...]: compute-sanitizer memcheck of the BERT-Large layer at 3 x 77 rows
# (partial tiles) under those variables.
memcheck_3x77() {
  local log=$1; shift
  env "$@" timeout 240 compute-sanitizer --tool memcheck --error-exitcode 9 build-gpu/dskc bench \
    examples/bert_large_layer.json --batch 3 --seq 77 --iters 1 --warmup 1 > "$OUT/$log" 2>&1
  echo "memcheck rc=$?"; grep -E "ERROR SUMMARY" "$OUT/$log"
}
# layer_ab ROUNDS CSV VAR VALUE...: `dskc bench --csv` of both layers under VAR=VALUE for each value,
# interleaved rounds, one csv line per run prefixed with the value.
layer_ab() {
  local rounds=$1 csv=$2 var=$3; shift 3
  for r in $(seq "$rounds"); do
    for f in $LAYERS; do
      for v in "$@"; do
        echo "$v,$(env "$var=$v" timeout 60 build-gpu/dskc bench $f --iters 30 --csv 2>&1 | tail -1)"
      done
    done
  done | tee "$OUT/$csv"
}
# profile_lines PATTERN VAR VALUE...: in ${ROUNDS:-2} rounds, both layers' `dskc bench --profile` under
# VAR=VALUE for each value, one line per run with the profile lines matching PATTERN.
profile_lines() {
  local pattern=$1 var=$2; shift 2
  for r in $(seq "${ROUNDS:-2}"); do
    for f in $LAYERS; do
      for v in "$@"; do
        echo "$r $f $v: $(env "$var=$v" timeout 60 build-gpu/dskc bench $f --iters 20 --profile 2>&1 | grep -E "$pattern")"
      done
    done
  done
}
if [ "$MODE" = gemm ]; then
  step "gemm_sm90 vs cuBLASLt (GPU test)"
  ab_test gpu_test_layer_numerics 'gemm_sm90*' gemm_ab.log "^case|test cases|assertions|ERROR"
  step "memcheck: DSKC_FFN_GEMM=sm90, BERT-Large layer at 3 x 77 rows (partial tiles)"
  memcheck_3x77 memcheck_gemm.log DSKC_FFN_GEMM=sm90
  step "layer A/B (csv: mode,B,S,H,dtype,LN,fwd,bwd,total,TFLOP/s,MiB)"
  layer_ab "${ROUNDS:-3}" layer_ab.csv DSKC_FFN_GEMM cublas sm90_fwd sm90
  step "profiles"
  for f in $LAYERS; do
    for g in cublas sm90_fwd sm90; do
      echo "-- $f DSKC_FFN_GEMM=$g"
      DSKC_FFN_GEMM=$g timeout 60 build-gpu/dskc bench $f --iters 20 --profile 2>&1 |
        grep -E "gemm_inter_fwd|gemm_output_dgrad|bias_gelu|transpose_output_w|  sum|^\| +[0-9]"
    done
  done
  exit 0
fi
if [ "$MODE" = linear ]; then
  step "gemm_sm90 linear GEMMs vs cuBLASLt (GPU test)"
  ab_test gpu_test_layer_numerics 'gemm_sm90 linear*' linear_ab.log "^case|test cases|assertions|ERROR"
  step "memcheck: DSKC_LINEAR_GEMM=sm90 DSKC_FFN_GEMM=sm90, BERT-Large layer at 3 x 77 rows (partial tiles)"
  memcheck_3x77 memcheck_linear.log DSKC_LINEAR_GEMM=sm90 DSKC_FFN_GEMM=sm90
  step "layer A/B (csv: linear/ffn,B,S,H,dtype,LN,fwd,bwd,total,TFLOP/s,MiB)"
  for r in $(seq "${ROUNDS:-3}"); do
    for f in $LAYERS; do
      for g in cublas/cublas sm90/cublas sm90/sm90_fwd sm90/sm90; do
        echo "$g,$(DSKC_LINEAR_GEMM=${g%/*} DSKC_FFN_GEMM=${g#*/} timeout 60 build-gpu/dskc bench $f --iters 30 --csv 2>&1 | tail -1)"
      done
    done
  done | tee "$OUT/linear_layer_ab.csv"
  step "profiles"
  for f in $LAYERS; do
    for g in cublas sm90; do
      echo "-- $f DSKC_LINEAR_GEMM=$g"
      DSKC_LINEAR_GEMM=$g timeout 60 build-gpu/dskc bench $f --iters 20 --profile 2>&1 |
        grep -E "gemm_qkv_fwd|gemm_attn_out_fwd|gemm_output_fwd|  sum|^\| +[0-9]"
    done
  done
  exit 0
fi
if [ "$MODE" = attn ]; then
  step "attn_flash_bwd_dkdv on wgmma vs mma.sync (GPU test)"
  ab_test gpu_test_flash_attention '*backward on warpgroup MMA*' attn_bwd_ab.log "vs sync:|test cases|assertions|ERROR"
  step "memcheck: DSKC_ATTN_BWD=wgmma, BERT-Large layer at 3 x 77 rows (partial tiles)"
  memcheck_3x77 memcheck_attn_bwd.log DSKC_ATTN_BWD=wgmma
  step "profiles (attn_flash_bwd_dkdv)"
  profile_lines dkdv DSKC_ATTN_BWD sync wgmma wgmma2
  step "layer A/B (csv: variant,B,S,H,dtype,LN,fwd,bwd,total,TFLOP/s,MiB)"
  layer_ab "${ROUNDS:-2}" attn_bwd_layer_ab.csv DSKC_ATTN_BWD sync wgmma wgmma2
  exit 0
fi
if [ "$MODE" = override ]; then
  dir=${OVERRIDE_DIR:-exp/ov}
  names=$(ls "$dir" 2>/dev/null | sed -n 's/_128\.cu$//p' | while read -r n; do [ -f "$dir/${n}_512.cu" ] && echo "$n"; done)
  [ -n "$names" ] || { echo "no NAME_128.cu + NAME_512.cu pairs in $dir"; exit 1; }
  step "DSKC_OVERRIDE_SOURCE A/B: $(echo $names)"
  for r in $(seq "${ROUNDS:-2}"); do
    for S in 128 512; do
      f=examples/bert_large_layer.json; [ $S = 512 ] && f=examples/bert_large_layer_seq512.json
      for n in $names; do
        echo "$r $S $n: $(DSKC_OVERRIDE_SOURCE=$PWD/$dir/${n}_$S.cu timeout 90 build-gpu/dskc bench $f --iters 30 --profile 2>&1 |
          grep -E "${PATTERN:-^\| +[0-9]}|rror" | tr -s ' ' | tr '\n' ' ')"
      done
    done
  done | tee "$OUT/override_ab.txt"
  exit 0
fi
if [ "$MODE" = attn_fwd ]; then
  step "attn_flash_fwd on wgmma vs mma.sync (GPU test)"
  ab_test gpu_test_flash_attention '*forward on warpgroup MMA*' attn_fwd_ab.log "vs sync:|test cases|assertions|ERROR"
  step "memcheck: DSKC_ATTN_FWD=wgmma / wgmma3, BERT-Large layer at 3 x 77 rows (partial tiles)"
  memcheck_3x77 memcheck_attn_fwd.log DSKC_ATTN_FWD=wgmma
  memcheck_3x77 memcheck_attn_fwd3.log DSKC_ATTN_FWD=wgmma3
  step "profiles (attn_flash_fwd)"
  profile_lines attn_flash_fwd DSKC_ATTN_FWD sync wgmma wgmma3
  step "layer A/B (csv: variant,B,S,H,dtype,LN,fwd,bwd,total,TFLOP/s,MiB)"
  layer_ab "${ROUNDS:-2}" attn_fwd_layer_ab.csv DSKC_ATTN_FWD sync wgmma wgmma3
  exit 0
fi
if [ "$MODE" = ncu ]; then
  # Nsight Compute of the kernels matching $KERNELS (regex, default the GELU passes) in one layer step
  # of $LAYER (default the (64,128) layer): speed of light, issue / warp-state statistics, occupancy,
  # and with SOURCE=1 the per-instruction stall reasons (SourceCounters). Summary lines here, the
  # whole report in $OUT/ncu.txt (bench/NOTES.md v25: how the GELU passes showed issue-bound).
  step "ncu: ${KERNELS:-bias_gelu}"
  NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
  sections="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy \
    --section LaunchStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis"
  [ -n "${SOURCE:-}" ] && sections="$sections --section SourceCounters"
  timeout 300 $NCU $sections -k "regex:${KERNELS:-bias_gelu}" -c "${COUNT:-4}" \
    build-gpu/dskc bench "${LAYER:-examples/bert_large_layer.json}" --iters 1 --warmup 0 > "$OUT/ncu.txt" 2>&1
  echo "ncu rc=$?"
  grep -E "^  [a-z_0-9]+ \(|Duration|DRAM Throughput|Compute \(SM\) Throughput|Issue Slots Busy|Issued Ipc Active|Warp Cycles Per Issued|No Eligible|Achieved Occupancy|Registers Per Thread|Stall" "$OUT/ncu.txt" | head -80
  exit 0
fi
if [ "$MODE" = memory ]; then
  step "memory table"
  bash bench/memory_table.sh
  exit 0
fi
if [ "$MODE" != bench ]; then
  step "ctest -L gpu"
  (cd build-gpu && ctest -L gpu -V -j6 --timeout 400) > "$OUT/ctest_gpu.log" 2>&1
  grep -E "tests passed|tests failed|Failed|\*\*\*Failed|ERROR|error:" "$OUT/ctest_gpu.log" | head -40
  grep -E "gpu rel" "$OUT/ctest_gpu.log" | awk '{printf "%s %s %s | plain %s\n", $2, $3, $5, $NF}' | sort -k3 -g -r | head -8
  step "compute-sanitizer"
  if command -v compute-sanitizer > /dev/null; then
    compute-sanitizer --tool memcheck --error-exitcode 9 build-gpu/dskc bench examples/tiny_layer.json --iters 2 --warmup 1 > "$OUT/memcheck.log" 2>&1
    echo "memcheck rc=$?"; tail -2 "$OUT/memcheck.log"
    # the fused attention kernels at partial tiles (S = 7, 33, 127, ...)
    timeout 240 compute-sanitizer --tool memcheck --error-exitcode 9 build-gpu/tests/gpu_test_flash_attention \
      -tc='*sequence lengths*' > "$OUT/memcheck_flash.log" 2>&1
    echo "memcheck flash rc=$?"; grep -E "ERROR SUMMARY|test cases" "$OUT/memcheck_flash.log" | tail -2
  fi
fi
[ "$MODE" = tests ] && exit 0
[ "$MODE" = final ] && [ ! -x build-gpu/dskc ] && exit 1
step "dskc bench"
for f in examples/bert_large_layer.json examples/bert_large_layer_seq512.json; do
  build-gpu/dskc bench $f --iters 30 --profile 2>&1 | tee -a "$OUT/bench.log" | tail -42 | sort -k2 -g -r | head -14
  echo "-- same with DSKC_ATTENTION=unfused (v3 attention):"
  DSKC_ATTENTION=unfused build-gpu/dskc bench $f --iters 30 2>&1 | tee -a "$OUT/bench_unfused.log" | grep -E "^\|" | tail -1
  echo "-- same with DSKC_ATTN_MASK=inline (attn_flash_fwd draws the dropout mask itself; default: attn_dropout_bits_fwd):"
  DSKC_ATTN_MASK=inline build-gpu/dskc bench $f --iters 30 --profile 2>&1 | tee -a "$OUT/bench_maskinline.log" | tail -42 | grep -E "attn_|^\|" | tail -8
done
step "layer matrix"
PYTHONUNBUFFERED=1 python3 bench/layer_matrix.py --dskc build-gpu/dskc 2>&1 | tee "$OUT/layer_matrix.log"
if [ -n "${MASK_AB:-}" ]; then
  echo "-- layer matrix with DSKC_ATTN_MASK=inline:"
  DSKC_ATTN_MASK=inline PYTHONUNBUFFERED=1 python3 bench/layer_matrix.py --dskc build-gpu/dskc 2>&1 | tee "$OUT/layer_matrix_maskinline.log"
fi
step "compare_torch"
PYTHONUNBUFFERED=1 python3 bench/compare_torch.py --dskc build-gpu/dskc --rounds ${ROUNDS:-3} 2>&1 | tee "$OUT/compare_torch.log" | tail -8
echo "-- tanh GELU on every side (dskc: cuBLASLt GELU epilogues), Pre-LN:"
PYTHONUNBUFFERED=1 python3 bench/compare_torch.py --dskc build-gpu/dskc --ln pre --gelu tanh --rounds ${ROUNDS:-3} 2>&1 |
  tee "$OUT/compare_torch_tanh.log" | tail -4
if [ "$MODE" = final ]; then
  step "data-parallel scaling"
  GPUS="1 2" STEPS=${STEPS:-16} MODES=${MODES:-"overlap delay fp32"} bash bench/dp_scaling.sh
fi
