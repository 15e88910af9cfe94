#!/usr/bin/env python3
"""Session 49 variant of the persistent attention backward (attn_flash_bwd_wgmma_persist_impl) for
DSKC_OVERRIDE_SOURCE: reads a generated module source (dskc compile LAYER --emit cuda, with
DSKC_ATTN_BWD_PERSIST=on) and writes
  base.cu    as built,
  late.cu    the next head's K/V, first tile and row values issued after the second step's dV/dK
             products instead of before its softmax (the share hand-over stays where it is).
    python3 exp/s49_variants.py IN.cu OUT_DIR"""
import sys, pathlib

src = pathlib.Path(sys.argv[1]).read_text()
out = pathlib.Path(sys.argv[2])
pre = """        // Head next's K/V and first tile while this step and the head's end run.
        if (next < heads) {
          if (tid == 0) {
            sm90::fence_proxy_async();
            load_kv(next, x ^ 1);
            load_stage(next, tile_of(0));
          }
          if (warp == 0) load_rows(next, tile_of(0));
          mask_of(next, mask_next);
        }
"""
anchor = "      flash_wg_bwd::dv_dk<E>(dv, dk, pa, sa, q_tile, do_tile);\n"
# The same block, one level out, guarded by the second step.
body = pre.split("\n", 1)[1].replace("        if (next < heads) {", "        if (it == 1 && next < heads) {", 1)
late = anchor + "\n".join(l[2:] if l.startswith("  ") else l for l in body.split("\n"))
def sub(text, pairs):
    for a, b in pairs:
        assert text.count(a) == 1, a
        text = text.replace(a, b)
    return text
for name, pairs in [("base", []), ("late", [(pre, ""), (anchor, late)])]:
    (out / f"{name}.cu").write_text(sub(src, pairs))
    print("wrote", out / f"{name}.cu")
