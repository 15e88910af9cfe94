# Sourced by the session scripts exp/s34*.sh: $OUT, the kernel cache in build-gpu, the two layers,
# `el` (elapsed seconds + a step name) and `build_gpu TARGET...` (configure + ninja, logs in $OUT).
set -u
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
export DSKC_CACHE_DIR=$PWD/build-gpu/cache
L128=examples/bert_large_layer.json; L512=examples/bert_large_layer_seq512.json
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)  # Nsight Compute
build_gpu() {
  el build
  cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > "$OUT/configure.log" 2>&1 || { tail -30 "$OUT/configure.log"; exit 1; }
  ninja -C build-gpu "$@" > "$OUT/build.log" 2>&1 || { grep -E "error|FAILED" "$OUT/build.log" | head -30; exit 1; }
}
# The forward gemm_sm90 kernels' `dskc bench --profile` times and the profile sum, on one line:
# fwd_gemm_line "ENV=... ..." LAYER WARMUP (ENV may be empty).
fwd_gemm_line() {
  env $1 timeout 60 build-gpu/dskc bench "$2" --iters 20 --warmup "$3" --profile 2>&1 |
    grep -E "gemm_[a-z_]+_fwd|  sum|rror" | awk '{printf "%s %s  ", $1, $2}'
}
# Every gemm_sm90 GPU test case (log in $OUT/test_cluster.log); exits the script on a failure.
gemm_sm90_tests() {
  gpu_test test_cluster.log 300 gpu_test_layer_numerics -tc="gemm_sm90*"
}
# One GPU test binary (log in $OUT/LOG): gpu_test LOG TIMEOUT BINARY [doctest args...]; prints rc and
# the summary, and exits the script (with the failures) unless it passed.
gpu_test() {
  local log=$1 limit=$2 bin=$3; shift 3
  timeout "$limit" "build-gpu/tests/$bin" "$@" > "$OUT/$log" 2>&1; local rc=$?
  echo "rc=$rc"; tail -3 "$OUT/$log"
  [ $rc = 0 ] || { grep -B3 -A8 ERROR "$OUT/$log" | head -60; exit 1; }
}
# ctest -L gpu on build-gpu (log in $OUT/ctest_gpu.log) and its summary lines:
# ctest_gpu [JOBS [LIMIT [PER_TEST]]] (seconds; defaults 8, 380, 360).
ctest_gpu() {
  el "ctest -L gpu"
  (cd build-gpu && timeout "${2:-380}" ctest -L gpu -j"${1:-8}" --timeout "${3:-360}") > "$OUT/ctest_gpu.log" 2>&1
  echo "ctest rc=$?"
  grep -E "Test +#|tests passed|tests failed" "$OUT/ctest_gpu.log" | sed 's/  */ /g' | tail -40
}
# layer_matrix.py A/B of the default against one DSKC_* setting: ab_matrix NAME ENV ROUNDS WARMUP LOGNAME
ab_matrix() {
  timeout 150 python3 bench/layer_matrix.py --dskc build-gpu/dskc --rounds "$3" --warmup "$4" --only "fp16 Pre-LN,$1" \
    --env "$1:$2" 2>&1 | tee "$OUT/$5"
}
# One layer step's kernel durations by Nsight Compute (exp/ncu_step.py), one line:
# ncu_step "ENV=... ..." LAYER TAG [dskc bench flags...] (ENV may be empty; CSV in $OUT/ncu_TAG.csv).
ncu_step() {
  local envs=$1 layer=$2 tag=$3; shift 3
  env $envs timeout 120 "$NCU" --csv --metrics gpu__time_duration.sum --cache-control none --clock-control none \
    build-gpu/dskc bench "$layer" --warmup 2 --iters 1 "$@" > "$OUT/ncu_$tag.csv" 2>> "$OUT/ncu_err.txt"
  printf '%-40s %s\n' "$tag" "$(python3 exp/ncu_step.py "$OUT/ncu_$tag.csv" --sum-only 2>&1)"
}
# compute-sanitizer on the fused wgmma attention-backward GPU cases of one DSKC_FLASH_CASE (log in
# $OUT/san_CASE_TOOL.log), one line: flash_sanitize CASE TOOL [TIMEOUT [ENV=...]...]; FLASH_TC picks
# another test case (a doctest -tc pattern).
flash_sanitize() {
  local case=$1 tool=$2 limit=${3:-100} cs log; shift $(( $# < 3 ? $# : 3 ))
  cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  log="$OUT/san_${case}_$tool.log"
  env DSKC_FLASH_CASE=$case "$@" timeout "$limit" $cs --tool $tool --error-exitcode 9 \
    build-gpu/tests/gpu_test_flash_attention -tc="${FLASH_TC:-fused attention backward on warpgroup MMA*}" > "$log" 2>&1
  echo "$case $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tail -1) $(grep -E 'assertions' "$log" | tail -1)"
}
# One flash GPU shard N by ctest (log in $OUT/ctest_LOG.log) and its summary: flash_shard N LOG LIMIT.
flash_shard() {
  (cd build-gpu && timeout "$3" ctest -R "gpu.test_flash_attention.$1\$" --timeout $(( $3 - 10 )) --output-on-failure) > "$OUT/ctest_$2.log" 2>&1
  echo "ctest rc=$?"; grep -E "Test +#|tests passed|tests failed|ERROR" "$OUT/ctest_$2.log" | head -20
}
# All three memory flags, as dskc bench switches.
FL_ALL="--attention_dropout_checkpoint --normalize_invertible --gelu_checkpoint"
# One step's Nsight Compute kernel list of the default and of all three flags at both shapes, into
# $OUT/kernels_{def,all}_{128,512}.txt, and each step's sum on one line: ncu_lists
ncu_lists() {
  local n L fl
  for n in 128 512; do
    L=$L128; [ $n = 512 ] && L=$L512
    for fl in def all; do
      ncu_step "" $L ${fl}_$n $( [ $fl = all ] && echo $FL_ALL )
      python3 exp/ncu_step.py "$OUT/ncu_${fl}_$n.csv" > "$OUT/kernels_${fl}_$n.txt" 2>&1
      rm -f "$OUT/ncu_${fl}_$n.csv"
    done
  done
}
# The two-stream timeline's summary line of one all-flags step (full output in $OUT/timeline_TAG.txt):
# timeline_all "ENV=... ..." LAYER TAG (ENV may be empty).
timeline_all() {
  env $1 timeout 60 build-gpu/dskc bench "$2" $FL_ALL --warmup 20 --iters 20 --timeline > "$OUT/timeline_$3.txt" 2>&1
  echo "$3 $(grep -oE "wall [0-9.]+ ms: main stream busy [0-9.]+ \(idle [0-9.]+\)" "$OUT/timeline_$3.txt")"
}
# v39's A/B module sources (for DSKC_OVERRIDE_SOURCE) from this tree's build-gpu/dskc: build-gpu/v39/main_N.cu
# (the generated source) and base_N.cu (the attention forward before v39: main's + exp/s42/base_N.diff),
# N = 128 / 512 (the two layers).
v39_sources() {
  mkdir -p build-gpu/v39
  local n L
  for n in 128 512; do
    L=$L128; [ $n = 512 ] && L=$L512
    build-gpu/dskc compile $L --arch sm_90 --emit cuda -o build-gpu/v39/main_$n.cu > /dev/null || exit 1
    cp build-gpu/v39/main_$n.cu build-gpu/v39/base_$n.cu
    git apply exp/s42/base_$n.diff || exit 1
  done
}
# Nsight Compute A/B of attn_flash_fwd and the step's kernel sum at both shapes, alternating ROUNDS times:
# base / ahead (v39_sources' base_N.cu / main_N.cu by DSKC_OVERRIDE_SOURCE) / new (this build's module),
# one line each, also into $OUT/ncu_ab.txt: v39_ncu_ab ROUNDS.
v39_ncu_ab() {
  local r n v e L
  for r in $(seq "$1"); do
    for n in 128 512; do
      L=$L128; [ $n = 512 ] && L=$L512
      for v in base ahead new; do
        e=""; [ $v = base ] && e="DSKC_OVERRIDE_SOURCE=$PWD/build-gpu/v39/base_$n.cu"
        [ $v = ahead ] && e="DSKC_OVERRIDE_SOURCE=$PWD/build-gpu/v39/main_$n.cu"
        ncu_step "$e" $L ${v}_${n}_$r > /dev/null
        python3 exp/ncu_step.py "$OUT/ncu_${v}_${n}_$r.csv" > "$OUT/kernels_${v}_${n}_$r.txt" 2>&1
        echo "$n $v $r $(grep -E ' attn_flash_fwd$' "$OUT/kernels_${v}_${n}_$r.txt" | awk '{print "fwd", $1}') $(tail -1 "$OUT/kernels_${v}_${n}_$r.txt" | awk '{print "sum", $1}')"
        rm -f "$OUT/ncu_${v}_${n}_$r.csv"
      done
    done
  done | tee "$OUT/ncu_ab.txt"
}
# Session 44's A/B base: f82940e's generated module sources (before v42), rebuilt from this tree's
# build-gpu/dskc output and exp/s44/main_N.diff, into build-gpu/s44/main_N.cu (N = 128 / 512).
s44_main_sources() {
  mkdir -p build-gpu/s44
  local n L
  for n in 128 512; do
    L=$L128; [ $n = 512 ] && L=$L512
    build-gpu/dskc compile $L --arch sm_90 --emit cuda -o build-gpu/s44/main_$n.cu --manifest none > /dev/null || exit 1
    patch -s build-gpu/s44/main_$n.cu < exp/s44/main_$n.diff || exit 1
  done
}
# One step's Nsight Compute kernel list under DSKC_ATTN_STORE=V (bench/NOTES.md v44) of the layer with
# max_seq N (128 / 512), round R, into $OUT/kernels_V_N_R.txt, and one line: attn_flash_fwd,
# attn_flash_bwd_dkdv and the step's sum. store_ab N V R
store_ab() {
  local n=$1 v=$2 r=$3 L=$L128 k
  [ "$1" = 512 ] && L=$L512
  k="$OUT/kernels_${v}_${n}_$r.txt"
  ncu_step "DSKC_ATTN_STORE=$v" $L ${v}_${n}_$r > /dev/null
  python3 exp/ncu_step.py "$OUT/ncu_${v}_${n}_$r.csv" > "$k" 2>&1
  echo "$n $v $r $(grep -E ' attn_flash_fwd$' "$k" | awk '{print "fwd", $1}') $(grep -E ' attn_flash_bwd_dkdv$' "$k" | awk '{print "dkdv", $1}') $(tail -1 "$k" | awk '{print "sum", $1}')"
  rm -f "$OUT/ncu_${v}_${n}_$r.csv"
}
# One step's Nsight Compute kernel list of the layer with max_seq N (128 / 512) under the environment
# ENV (may be empty), tagged TAG, round R, into $OUT/kernels_TAG_N_R.txt, and one line: the listed
# KERNELS' durations (default: attn_flash_bwd_dkdv) and the step's sum. env_ab N TAG "ENV" R [KERNELS...]
env_ab() {
  local n=$1 tag=$2 envs=$3 r=$4 L=$L128 k name line
  shift 4
  [ "$n" = 512 ] && L=$L512
  k="$OUT/kernels_${tag}_${n}_$r.txt"
  ncu_step "$envs" $L ${tag}_${n}_$r > /dev/null
  python3 exp/ncu_step.py "$OUT/ncu_${tag}_${n}_$r.csv" > "$k" 2>&1
  line="$n $tag $r"
  for name in "${@:-attn_flash_bwd_dkdv}"; do
    line="$line $name $(grep -E " $name\$" "$k" | awk '{s += $1} END {printf "%.4f", s}')"
  done
  echo "$line sum $(tail -1 "$k" | awk '{print $1}')"
  rm -f "$OUT/ncu_${tag}_${n}_$r.csv"
}
# One ncu step list of layer L (default or all three flags) and one kernel's launches and the sum on
# one line (kernels in $OUT/k_TAG.txt): kernel_line "ENV=..." L FLAGS(def|all) TAG KERNEL WORDS...
# (WORDS: what the line starts with).
kernel_line() {
  local envs=$1 L=$2 fl=$3 tag=$4 kernel=$5; shift 5
  ncu_step "$envs" $L $tag $( [ $fl = all ] && echo $FL_ALL ) > /dev/null
  python3 exp/ncu_step.py $OUT/ncu_$tag.csv > $OUT/k_$tag.txt 2>&1
  echo "$* $kernel $(grep -E " $kernel\$" $OUT/k_$tag.txt | awk '{printf "%.4f ", $1}') sum $(tail -1 $OUT/k_$tag.txt | awk '{print $1}')"
  rm -f $OUT/ncu_$tag.csv
}
# The same for layernorm_fwd_norm: ln_bits_line "ENV=..." L FLAGS(def|all) TAG WORDS...
ln_bits_line() {
  local envs=$1 L=$2 fl=$3 tag=$4; shift 4
  kernel_line "$envs" $L $fl $tag layernorm_fwd_norm "$@"
}
# One kernel's SASS from a cubin (cuobjdump) into $OUT/sass/KERNEL_TAG.sass, and one line of counts:
# sass_line CUBIN KERNEL TAG [WORDS...] (WORDS: what the line starts with; bench/NOTES.md v48).
sass_line() {
  local cubin=$1 k=$2 tag=$3 cuobj f; shift 3
  cuobj=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
  mkdir -p "$OUT/sass"; f=$OUT/sass/${k}_$tag.sass
  "$cuobj" -sass -fun "$k" "$cubin" > "$f" 2>&1
  echo "$* $k instr $(grep -cE '^\s+/\*[0-9a-f]{4}\*/' "$f") HGMMA $(grep -c HGMMA "$f") R2UR $(grep -c R2UR "$f") UIADD $(grep -cE 'UIADD|ULEA|UMOV' "$f")"
}
# Stops the script (exit 3, before any build) unless the GPU is an H200, whose numbers the targets are:
# only_on_h200
only_on_h200() {
  local gpu; gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
  echo "card: $gpu"
  case "$gpu" in *H200*) ;; *) echo "not an H200: nothing run"; exit 3 ;; esac
}
# Applies a prepared patch unless the tree has it already; exits the script if it does not apply:
# apply_patch exp/NAME.patch
apply_patch() {
  git apply --reverse --check "$1" 2>/dev/null || git apply "$1" || { echo "$1 does not apply"; exit 1; }
}
# bench/layer_matrix.py with ROUNDS interleaved rounds and ARGS into $OUT/LOG, stopped at END seconds
# after the script's start (the body of graph_matrix and launched_matrix): matrix_run WHAT ROUNDS END LOG [ARGS...]
matrix_run() {
  local what=$1 rounds=$2 end=$3 log=$4; shift 4
  local left=$(( end - $(date +%s) + t0 ))
  el "layer matrix $what, $rounds rounds $*"
  # --time-limit: fewer rounds rather than no table when time runs short (the timeout is the backstop;
  # never 0, which layer_matrix.py reads as no limit).
  timeout $left python3 bench/layer_matrix.py --dskc build-gpu/dskc --rounds "$rounds" --time-limit $(( left > 30 ? left - 15 : 15 )) \
    "$@" 2>&1 | tee "$OUT/$log" | tail -30
}
# The graph-replayed layer matrix (both shapes, every variant unless ARGS say --only ..., ROUNDS
# interleaved rounds) into $OUT/LOG (default matrix_graph.txt), stopped at END seconds after the
# script's start: graph_matrix ROUNDS END [LOG [layer_matrix.py ARGS...]]
graph_matrix() {
  local rounds=$1 end=$2 log=${3:-matrix_graph.txt}; shift 2; shift $(( $# > 0 ? 1 : 0 ))
  matrix_run "--graph, both shapes," "$rounds" "$end" "$log" --graph "$@"
}
# The same launched by the host every step: launched_matrix ROUNDS END LOG [layer_matrix.py ARGS...]
launched_matrix() {
  local rounds=$1 end=$2 log=$3; shift 3
  matrix_run launched "$rounds" "$end" "$log" "$@"
}
# Paired A/Bs (`dskc bench --versus`, 60 pairs of 4-step blocks) at both shapes, launched and replayed
# from CUDA graphs, one per item "ARGS:SPEC" (ARGS: layer switches both layers get, may be empty; SPEC:
# what B adds). Whole outputs into $OUT/LOG, one B-vs-A line per A/B on stdout:
# versus_runs LOG ITEM... (SPEC's variables must be ones a layer reads when it is built: --versus refuses others.)
versus_runs() {
  local log=$1 L form c a s; shift
  for L in $L128 $L512; do for form in "" --graph; do for c in "$@"; do
    a=${c%%:*}; s=${c#*:}
    echo "== $L ${form:-launched} [$a] $s"
    timeout 60 build-gpu/dskc bench $L $a $form --pairs 60 --versus "$s" 2>&1 | tail -9
  done; done; done > "$OUT/$log" 2>&1
  grep -E "^==|B vs A" "$OUT/$log" | paste - - | sed 's/(median of the 60 pairs. ratios; ~95% interval/(/'
}
# compare_torch.py's side-by-side table, burst, ROUNDS (default 3) interleaved rounds (medians), into
# $OUT/compare_wu10_rROUNDS.txt, stopped at END seconds after the script's start: compare_r3 END [ROUNDS]
compare_r3() {
  local r=${2:-3}
  el "compare_torch, warm-up 10, $r rounds"
  timeout $(( $1 - $(date +%s) + t0 )) python3 bench/compare_torch.py --dskc build-gpu/dskc --ln pre --warmup 10 \
    --rounds "$r" 2>&1 | tee "$OUT/compare_wu10_r$r.txt" | tail -6
}
# BERT-Large seq 128, micro-batch 64, fp16 `dskc train` at accumulation 1 on the bundled corpus, 40
# steps, the last 20 profiled by phase (log in $OUT/train_TAG.log; prints the step-40 progress line):
# large_train_data DIR (prepares the corpus once, vocab 30522, into DIR/data), then
# large_train TAG [dskc train flags...] (runs in DIR/TAG, removed after; DSKC_BIN: another dskc;
# LT_CONFIG, LT_CF, LT_MB, LT_SEQ, LT_DATA: another DeepSpeed config, model config, micro-batch,
# sequence length or shard folder than the defaults).
large_train_data() {
  LT_DIR=$1; mkdir -p "$LT_DIR"
  build-gpu/dskc prepare-data --input examples/corpus --output_dir "$LT_DIR/data" --vocab_size 30522 \
    --max_seq_length 128 --max_predictions_per_seq 20 --dupe_factor 2 > "$OUT/prepare.log" 2>&1 ||
    { tail -5 "$OUT/prepare.log"; exit 1; }
}
large_train() {
  local tag=$1; shift
  timeout 150 "${DSKC_BIN:-build-gpu/dskc}" train --deepspeed \
    --deepspeed_config "${LT_CONFIG:-examples/deepspeed_bsz4096_adam_config.json}" \
    --cf "${LT_CF:-examples/bert_large_adam_seq128.json}" --train_batch_size "${LT_MB:-64}" --gradient_accumulation_steps 1 \
    --max_seq_length "${LT_SEQ:-128}" --max_grad_norm 1.0 --fp16 --loss_scale 0 --max_steps 40 --print_steps 20 \
    --profile_steps 20 --deepspeed_transformer_kernel --backend cuda --checkpoint_steps 1000000 \
    --data_dir "${LT_DATA:-$LT_DIR/data}" --output_dir "$LT_DIR/$tag" "$@" > "$OUT/train_$tag.log" 2>&1
  local rc=$?  # before any other expansion resets $?
  echo "[$(( $(date +%s) - t0 )) s] $tag rc=$rc $(grep -E 'step 40/40' "$OUT/train_$tag.log" | tail -1)"
  rm -rf "${LT_DIR:?}/$tag"
}
# examples/deepspeed_bsz32K_lamb_config_seq512.json at micro-batch MB, as $LT_DIR/lamb_mbMB.json:
# lamb_config MB
lamb_config() {
  sed "s/\"train_micro_batch_size_per_gpu\": 16/\"train_micro_batch_size_per_gpu\": $1/" \
    examples/deepspeed_bsz32K_lamb_config_seq512.json > "$LT_DIR/lamb_mb$1.json"
}
# large_train with Lamb (lamb_config MB, examples/bert_large_lamb.json), sequence length SEQ, shards
# in DATA: lamb_train TAG SEQ MB DATA [flags...]
lamb_train() {
  local tag=$1 seq=$2 mb=$3 data=$4; shift 4
  lamb_config "$mb"
  LT_CONFIG=$LT_DIR/lamb_mb$mb.json LT_CF=examples/bert_large_lamb.json LT_MB=$mb LT_SEQ=$seq LT_DATA=$data \
    large_train "$tag" "$@"
}
# large_train, then the profile lines matching PHASES (an egrep pattern): train_phases PHASES TAG [flags...]
train_phases() {
  local phases=$1; shift
  large_train "$@"
  grep -E "$phases" "$OUT/train_$1.log"
}
# The call's GPU (into $OUT/gpu.txt) and the tree it runs: gpu_head
gpu_head() {
  nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
  git log --oneline -1; git status --short | head
}
# A folder for training runs, in /dev/shm when it has room (a BERT-Large checkpoint is 4 GB):
# run_dir NAME sets D.
run_dir() {
  D=/tmp/$1; local avail; avail=$(df -BG --output=avail /dev/shm 2>/dev/null | tail -1 | tr -dc 0-9)
  [ "${avail:-0}" -ge 16 ] && D=/dev/shm/$1
}
# Another commit's dskc, built from `git archive` in /tmp/old: old_dskc COMMIT (binary
# /tmp/old/build-gpu/dskc).
old_dskc() {
  el "old build ($1)"
  rm -rf /tmp/old && mkdir -p /tmp/old && git archive "$1" | tar -x -C /tmp/old
  (cd /tmp/old && cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > "$OUT/configure_old.log" 2>&1 &&
    ninja -C build-gpu dskc > "$OUT/build_old.log" 2>&1) || { echo "old build failed"; tail -20 "$OUT/build_old.log"; }
}
# Nsight Compute over 3 training steps of a one-layer BERT-Large (vocab 30522, seq 128, mb 64, fp16;
# needs large_train_data first); the last step in launch order into $OUT/ncu_step_TAG.txt:
# ncu_train1 TAG [BINARY [LIMIT]] (default build-gpu/dskc, 120 s).
ncu_train1() {
  local tag=$1 bin=${2:-build-gpu/dskc}
  sed 's/"num_hidden_layers": 24/"num_hidden_layers": 1/' examples/bert_large_adam_seq128.json > "$LT_DIR/bert1.json"
  el "ncu $tag, one-layer BERT-Large, 3 steps"
  timeout "${3:-120}" "$NCU" --csv --metrics gpu__time_duration.sum --cache-control none --clock-control none \
    "$bin" train --deepspeed --deepspeed_config examples/deepspeed_bsz4096_adam_config.json \
    --cf "$LT_DIR/bert1.json" --train_batch_size 64 --gradient_accumulation_steps 1 --max_seq_length 128 \
    --max_grad_norm 1.0 --fp16 --loss_scale 0 --max_steps 3 --print_steps 1 --deepspeed_transformer_kernel \
    --backend cuda --checkpoint_steps 1000000 --data_dir "$LT_DIR/data" --output_dir "$LT_DIR/ncu_$tag" \
    > "$OUT/ncu_$tag.csv" 2> "$OUT/ncu_$tag.err"; echo "ncu rc=$?"
  python3 exp/ncu_step.py "$OUT/ncu_$tag.csv" --from-last model_embedding_fwd > "$OUT/ncu_step_$tag.txt"
  rm -rf "${LT_DIR:?}/ncu_$tag"
}
# The three-launch Lamb's kernels by Nsight Compute (BERT-Large, seq 128, micro-batch 64, Lamb,
# 3 steps; only kernels matching lamb_multi profiled; needs large_train_data first), one line per
# kernel and metric: ncu_lamb TAG [BINARY] (CSV in $OUT/ncu_lamb_TAG.csv).
ncu_lamb() {
  local tag=$1 bin=${2:-build-gpu/dskc}
  lamb_config 64
  timeout 150 "$NCU" --csv --metrics gpu__time_duration.sum,dram__bytes.sum --cache-control none --clock-control none \
    --kernel-name regex:lamb_multi "$bin" train --deepspeed --deepspeed_config "$LT_DIR/lamb_mb64.json" \
    --cf examples/bert_large_lamb.json --train_batch_size 64 --gradient_accumulation_steps 1 --max_seq_length 128 \
    --max_grad_norm 1.0 --fp16 --loss_scale 0 --max_steps 3 --print_steps 1 --deepspeed_transformer_kernel \
    --backend cuda --checkpoint_steps 1000000 --data_dir "$LT_DIR/data" --output_dir "$LT_DIR/ncu_$tag" \
    > "$OUT/ncu_lamb_$tag.csv" 2> "$OUT/ncu_lamb_$tag.err"
  echo "ncu $tag rc=$?"
  grep -E "lamb_multi" "$OUT/ncu_lamb_$tag.csv" | awk -F'","' '{print $5, $(NF-2), $NF}' | tail -6
  rm -rf "${LT_DIR:?}/ncu_$tag"
}
# ... and the heads' kernels of that step (final LayerNorm forward to its backward) with the sum:
# ncu_heads TAG [BINARY]
ncu_heads() {
  ncu_train1 "$@"
  sed -n '/(8192, 1, 1)  model_layernorm_fwd/,/model_layernorm_bwd/p' "$OUT/ncu_step_$1.txt" | cut -c1-110
  tail -1 "$OUT/ncu_step_$1.txt"
}
# The phase lines of a large_train run's profile: profile_lines TAG [egrep pattern]
profile_lines() {
  grep -h -A17 "^step profile" "$OUT/train_$1.log" | tail -15 | grep -E "${2:-.}" | cut -c1-90
}
# The bundled corpus prepared at seq 512 (vocab 30522, 80 predictions) into DIR/data512:
# seq512_data DIR
seq512_data() {
  build-gpu/dskc prepare-data --input examples/corpus --output_dir "$1/data512" --vocab_size 30522 \
    --max_seq_length 512 --max_predictions_per_seq 80 --dupe_factor 4 > "$OUT/prepare512.log" 2>&1 ||
    { tail "$OUT/prepare512.log"; exit 1; }
}
# The guide's seq-512 Lamb phase (BERT-Large, micro-batch 16, fp16, accumulation 1), its whole
# profile printed, in run_dir NAME (removed after): lamb512_phase NAME
lamb512_phase() {
  run_dir "$1"
  mkdir -p "$D"; LT_DIR=$D
  seq512_data "$D"
  lamb_train lamb512 512 16 "$D/data512"
  profile_lines lamb512
  rm -rf "$D"
}
# The landed tree's Adam (default config) and Lamb (seq 128, micro-batch 64) training profiles, then
# compare_torch's side-by-side table stopped at END seconds after the script's start (END 0: no
# table): train_and_table END
train_and_table() {
  build_gpu -j16 dskc
  run_dir s68
  large_train_data "$D"
  large_train adam
  profile_lines adam "encoder|optimizer|whole"
  lamb_train lamb 128 64 "$D/data"
  profile_lines lamb "encoder|optimizer|whole"
  rm -rf "$D"
  [ "$1" = 0 ] || compare_r3 "$1"
}
# TARGETS built (none: everything) and gpu_test_bert_cuda run, the only GPU test that runs Lamb:
# bert_cuda_check [TARGETS...] (was lamb_patch_check while session 70's Lamb patch lived in exp/).
bert_cuda_check() {
  build_gpu -j16 "$@"
  el "gpu_test_bert_cuda"
  gpu_test bert_cuda.log 120 gpu_test_bert_cuda
}
