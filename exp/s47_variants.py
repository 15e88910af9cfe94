#!/usr/bin/env python3
"""Timing-only variants of the ring dK/dV kernel (v45) for DSKC_OVERRIDE_SOURCE: reads a generated module
source (dskc compile --emit cuda, DSKC_ATTN_DQ=ring) and writes `noxchg`: the ring's hand-overs left out
(each block stores its own share as if it were the whole dQ: wrong results), the cluster barriers kept.
    python3 exp/s47_variants.py IN.cu OUT_DIR"""
import sys, pathlib

src = pathlib.Path(sys.argv[1]).read_text()
out = pathlib.Path(sys.argv[2])
subs = [
    ("    if (k >= 1) {\n      const int s = (k - 1) & 1;", "    if (false) {\n      const int s = (k - 1) & 1;"),
    ("    if (k < tiles - 1) {\n      const int s = k & 1;", "    if (false) {\n      const int s = k & 1;"),
    ("    } else {\n      sm90::cluster_arrive_release();  // this block's",
     "    }\n    if (k == tiles - 1) {\n      sm90::cluster_arrive_release();  // this block's"),
]
v = src
for a, b in subs:
    assert v.count(a) == 1, a
    v = v.replace(a, b)
(out / "noxchg.cu").write_text(v)
print("wrote", out / "noxchg.cu")
