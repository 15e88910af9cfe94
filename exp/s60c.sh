#!/usr/bin/env bash
# Session 60, one call for the three prepared patches (`END=575 bash exp/pack.sh 585 exp/s60c.sh`;
# END: seconds from the start by which ctest must stop; SUITE=0 for a short call: dskc and the CUDA
# backend's tests built, no suite), when the
# device time left does not hold two calls:
#  - exp/model_reductions_split.patch: the model module's reductions in two stages (LayerNorm
#    parameter gradients in 64-row chunk partials, embedding-gradient groups in pieces of <= 64 rows,
#    bias column sums on 32-column blocks with row slices);
#  - exp/optimizer_f32.patch: Adam in fp32 math, 16-byte loads; the sum of squares with 16-byte loads;
#  - exp/lazy_zero.patch: zero_grads' memset deferred, the layers' gradients assigned by the first call.
# Predictions: heads and embeddings backward -1 to -2.5 ms each; optimizer 3.06 -> ~2.4 ms, overflow
# check 0.62 -> ~0.35, zero gradients 0.32 -> ~0.03; together +8-12% seq/s.
# Steps: build with all three, the CUDA backend's GPU tests (on a failure: lazy_zero, then
# optimizer_f32 reversed and tested again); a profiled BERT-Large train run; every applied patch
# reversed, dskc rebuilt, the same run (main: the A/B on one machine); the patches again and
# `ctest -L gpu` but the CUDA backend's tests (run first) with the time left (exp/s59c.sh, whose
# CTEST_ARGS adds ctest arguments).
. "$(dirname "$0")/common.sh"
apply_patch exp/model_reductions_split.patch
apply_patch exp/optimizer_f32.patch
apply_patch exp/lazy_zero.patch
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/gpu.txt"
targets=""; [ "${SUITE:-1}" = 0 ] && targets="dskc gpu_test_bert_cuda"
build_gpu -j16 $targets
bert_tests() {  # bert_tests LOG: the CUDA backend's GPU tests; rc 0 when they pass
  timeout 120 build-gpu/tests/gpu_test_bert_cuda > "$OUT/$1" 2>&1; local rc=$?
  echo "$1 rc=$rc"; tail -3 "$OUT/$1"
  [ $rc = 0 ] || grep -B3 -A8 ERROR "$OUT/$1" | head -40
  return $rc
}
el "CUDA backend GPU tests"
applied="model_reductions_split optimizer_f32 lazy_zero"
if ! bert_tests test_bert_cuda.log; then
  git apply -R exp/lazy_zero.patch && ninja -C build-gpu $targets > "$OUT/build_nolazy.log" 2>&1 || exit 1
  applied="model_reductions_split optimizer_f32"
  if ! bert_tests test_bert_cuda_nolazy.log; then
    git apply -R exp/optimizer_f32.patch && ninja -C build-gpu $targets > "$OUT/build_split.log" 2>&1 || exit 1
    applied="model_reductions_split"
    bert_tests test_bert_cuda_split.log || exit 1
  fi
fi
echo "applied: $applied"
large_train_data /tmp/s60c
train() { train_phases "heads|embeddings backward|optimizer|overflow|zero grad|encoder|whole step" "$@"; }
el "train with: $applied"
train new1
for p in lazy_zero optimizer_f32 model_reductions_split; do
  case " $applied " in *" $p "*) git apply -R exp/$p.patch || exit 1 ;; esac
done
ninja -C build-gpu dskc > $OUT/build_main.log 2>&1 || exit 1
el "train main"
train main1
[ "${SUITE:-1}" = 0 ] && { el done; exit 0; }
for p in $applied; do git apply exp/$p.patch || exit 1; done
ninja -C build-gpu > $OUT/build_again.log 2>&1 || exit 1
el "ctest -L gpu"
CTEST_ARGS="-E gpu.test_bert_cuda" bash exp/s59c.sh $(( ${END:-575} - $(date +%s) + t0 ))
el done
