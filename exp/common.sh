# Sourced by the session scripts exp/s34*.sh: $OUT, the kernel cache in build-gpu, the two layers,
# `el` (elapsed seconds + a step name) and `build_gpu TARGET...` (configure + ninja, logs in $OUT).
set -u
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
export DSKC_CACHE_DIR=$PWD/build-gpu/cache
L128=examples/bert_large_layer.json; L512=examples/bert_large_layer_seq512.json
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
build_gpu() {
  el build
  cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > "$OUT/configure.log" 2>&1 || { tail -30 "$OUT/configure.log"; exit 1; }
  ninja -C build-gpu "$@" > "$OUT/build.log" 2>&1 || { grep -E "error|FAILED" "$OUT/build.log" | head -30; exit 1; }
}
