#!/usr/bin/env bash
# The FP64 operations per model-module kernel in its PTX (no GPU needed; the machine here has no
# cuobjdump): builds exp/model_ptx_ops.cpp against build/libdskc_compiler.a (templates as built) and
# counts, in each named kernel's body, the PTX instructions on f64 and the 16-byte global loads.
#   bash exp/model_ptx_ops.sh [KERNEL...]   (default: model_adamw_multi model_sumsq_partial)
# Session 60: HEAD's Adam spends per element 3 div.rn.f64, 1 sqrt.rn.f64 and 7 conversions.
set -e
cd "$(dirname "$0")/.."
ninja -C build dskc_compiler > /dev/null
g++ -std=c++20 -O1 -I. -I/usr/local/cuda/include exp/model_ptx_ops.cpp build/libdskc_compiler.a \
  -L/usr/local/cuda/lib64 -lnvrtc -lfmt -lcuda -o build/model_ptx_ops
build/model_ptx_ops build/model.ptx
python3 - build/model.ptx "${@:-model_adamw_multi model_sumsq_partial}" <<'PY'
import collections, re, sys
src = open(sys.argv[1]).read()
for name in " ".join(sys.argv[2:]).split():
    i = src.index(".entry " + name + "(")
    body = src[i:src.index("\n}\n", i)]
    ops = collections.Counter(re.findall(r"^\s+(?:@!?%p\d+\s+)?([a-z]+(?:\.[a-z0-9]+)*)", body, re.M))
    f64 = {o: c for o, c in sorted(ops.items()) if "f64" in o}
    v4 = sum(c for o, c in ops.items() if o.startswith("ld.global") and ".v4" in o)
    print(f"{name}: {sum(ops.values())} PTX instructions; f64: {f64}; 16-byte global loads: {v4}")
PY
