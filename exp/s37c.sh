#!/usr/bin/env bash
# Session 37, call 4: torch.compile's GEMMs (nvjet kernels from the cuBLAS in torch's wheel) ran
# 0.85 ms of GEMMs per (64,128) step against dskc's ~0.97: is it the cuBLAS version? dskc dlopens
# libcublasLt.so.13, so LD_LIBRARY_PATH can point it at torch's copy.
. "$(dirname "$0")/common.sh"
build_gpu dskc
TL=$(dirname "$(find / -name 'libcublasLt.so.13*' -path '*site-packages*' 2>/dev/null | head -1)")
echo "torch's cuBLAS: $TL"; ls "$TL" | head
for d in /usr/local/cuda/lib64 "$TL"; do
  python3 - "$d" <<'PY'
import ctypes, sys
lt = ctypes.CDLL(sys.argv[1] + "/libcublasLt.so.13")
print(sys.argv[1], "cublasLtGetVersion", lt.cublasLtGetVersion())
PY
done
for l in $L128 $L512; do
  el "profile $l: system cuBLAS, then torch's"
  timeout 60 build-gpu/dskc bench $l --warmup 10 --profile 2>&1 | grep -E "gemm|sum|  [0-9]+ \|" | tee -a "$OUT/prof_sys.txt" | awk '{printf "%s %s | ", $1, $2}'; echo
  LD_LIBRARY_PATH=$TL timeout 60 build-gpu/dskc bench $l --warmup 10 --profile 2>&1 | grep -E "gemm|sum|  [0-9]+ \|" | tee -a "$OUT/prof_torchblas.txt" | awk '{printf "%s %s | ", $1, $2}'; echo
done
el "A/B, 4 interleaved rounds, burst"
for r in 1 2 3 4; do
  for l in $L128 $L512; do
    sleep 2; echo "sys   $(build-gpu/dskc bench $l --csv --warmup 10)"
    sleep 2; echo "torch $(LD_LIBRARY_PATH=$TL build-gpu/dskc bench $l --csv --warmup 10)"
  done
done | tee "$OUT/ab.txt"
el done
