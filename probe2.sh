#!/usr/bin/env bash
# probe (untracked): upper bounds (XSKIP hack) for stochastic/flags ideas
set -u
OUT=${OUT:-$PWD/out}; mkdir -p $OUT
export DSKC_CACHE_DIR=$PWD/build-gpu/cache
t0=$(date +%s)
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $OUT/configure.log 2>&1 || { tail -20 $OUT/configure.log; exit 1; }
ninja -C build-gpu dskc > $OUT/build.log 2>&1 || { grep -E "error|FAILED" $OUT/build.log | head -30; exit 1; }
echo "built in $(( $(date +%s) - t0 )) s"
PYTHONUNBUFFERED=1 timeout 400 python3 bench/layer_matrix.py --dskc build-gpu/dskc --rounds 3 \
  --only "fp16 Pre-LN,stochastic_mode,attn_dropout_checkpoint,normalize_invertible,gelu_checkpoint,all three flags,no colsum,no lnreduce,all no bitsbwd,all no lnregen" \
  --env "no colsum:XSKIP=colsum" --env "no lnreduce:XSKIP=lnreduce" \
  --env "all no bitsbwd@all three flags:XSKIP=bitsbwd" --env "all no lnregen@all three flags:XSKIP=lnregen" 2>&1 | tee $OUT/matrix.log | tail -24
echo "elapsed $(( $(date +%s) - t0 )) s"
