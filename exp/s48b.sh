#!/usr/bin/env bash
# Session 48, call 2: (1) exp/s48/philox_bench.cu: the keep words' Philox cost by variant (mul.wide,
# compares on the raw words, 7 rounds) and each variant's SASS instruction mix; (2) Nsight Compute
# step lists with the FFN data gradient's GELU' (and gelu_checkpoint's GELU(h) store) in gemm_sm90's
# epilogue (DSKC_FFN_GEMM=sm90) against the default, default / gelu_checkpoint / all flags, both
# shapes. Run under exp/pack.sh.
. "$(dirname "$0")/common.sh"
export PATH=/usr/local/cuda/bin:$PATH
el "philox bench"
nvcc -arch=sm_90 -O3 -o $OUT/pb exp/s48/philox_bench.cu && $OUT/pb | tee $OUT/philox.txt
cuobjdump -sass $OUT/pb > $OUT/pb.sass 2>&1
python3 - $OUT/pb.sass <<'PY' | tee $OUT/sass_mix.txt
import re, sys, collections
fn, mix = None, collections.OrderedDict()
for line in open(sys.argv[1]):
    m = re.search(r"Function : (\S+)", line)
    if m: fn = m.group(1); mix[fn] = collections.Counter(); continue
    m = re.match(r"\s+/\*[0-9a-f]{4}\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)(\.[A-Z0-9_.]+)?", line)
    if m and fn: mix[fn][m.group(2) + (m.group(3) or "")] += 1
for f, c in mix.items():
    print(f, sum(c.values()), " ".join(f"{k}:{v}" for k, v in c.most_common(12)))
PY
build_gpu dskc
for L in $L128 $L512; do
  n=$(basename $L .json)
  for v in "def:" "gc:--gelu_checkpoint" "all:$FL_ALL"; do
    tag=${v%%:*}; fl=${v#*:}
    for e in cublas sm90; do
      ncu_step "DSKC_FFN_GEMM=$( [ $e = cublas ] && echo sm90_fwd || echo sm90)" $L ${n}_${tag}_$e $fl
      python3 exp/ncu_step.py "$OUT/ncu_${n}_${tag}_$e.csv" > "$OUT/list_${n}_${tag}_$e.txt" 2>&1; rm -f "$OUT/ncu_${n}_${tag}_$e.csv"
    done
  done
done
el done
