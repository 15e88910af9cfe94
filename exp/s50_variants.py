#!/usr/bin/env python3
"""Session 50 A/B source for DSKC_OVERRIDE_SOURCE (bench/NOTES.md v48): the warpgroup index as it was
before v48. gemm_sm90_impl took its warpgroup from threadIdx.x / 128 and the wgmma attention
backward its warpgroup c (and kWG == 2's part) from warp / 4: values ptxas cannot tell are the same
in every lane, so the wgmma descriptors built from them were vector-register values moved to uniform
registers before each HGMMA. v48 broadcasts the index from lane 0 (sm90::warpgroup_index()).
Reads a generated module source (dskc compile LAYER --emit cuda) and writes
  base.cu   as built (v48),
  old.cu    the indices from threadIdx as before.
    python3 exp/s50_variants.py IN.cu OUT_DIR"""
import sys, pathlib

src = pathlib.Path(sys.argv[1]).read_text()
out = pathlib.Path(sys.argv[2])
old = [
    ("  const int wg = sm90::warpgroup_index(), t = threadIdx.x % 128;\n",
     "  const int wg = threadIdx.x / 128, t = threadIdx.x % 128;\n"),
    ("      kWG == 2 ? sm90::warpgroup_index() : kCluster >= 2",
     "      kWG == 2 ? warp / 4 : kCluster >= 2"),
    ("  const int c = kWG == 1 ? 0 : sm90::warpgroup_index();\n",
     "  const int c = warp / 4;\n"),
]
def sub(text, pairs):
    for a, b in pairs:
        assert text.count(a) == 1, a
        text = text.replace(a, b)
    return text
for name, ps in [("base", []), ("old", old)]:
    (out / f"{name}.cu").write_text(sub(src, ps))
    print("wrote", out / f"{name}.cu")
