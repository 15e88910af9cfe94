#!/usr/bin/env python3
"""Session 44: throwaway module-source variants of gemm_inter_fwd (for DSKC_OVERRIDE_SOURCE).

  s44_variants.py MODULE.cu OUT.cu T[+T...]

writes OUT.cu: a generated module source (`dskc compile --emit cuda`) with the transforms T applied:
  diag    the kernel as it is, plus clock64 brackets per math warpgroup and tile: the wait for the
          mainloop turn, the mainloop (turn to last MMA done), the epilogue; block 0, 66 and 131
          print their averages (cycles) on the 20th launch (printf, one line per warpgroup)
  ident   the GELU pass copies h (no GELU arithmetic; wrong values, timing only)
  nopass  no GELU pass at all (GELU(h) region stored as it is; timing only)
  u2      the GELU pass unrolled by two (16 elements per iteration)
"""
import os
import sys


def sub(text, old, new, count=1):
    if text.count(old) != count:
        sys.exit(f"expected {count} of {old!r}, found {text.count(old)}")
    return text.replace(old, new)


def diag(src):
    src = sub(src, "namespace dskc {\n\nstruct GemmEpi {",
              "__device__ unsigned g_dbg_launch;\nnamespace dskc {\n\nstruct GemmEpi {")
    src = sub(src, "  float acc0[64], acc1[64];\n  uint32_t hphase = 0;\n",
              "  float acc0[64], acc1[64];\n  uint32_t hphase = 0;\n"
              "  long long dbg_wait = 0, dbg_main = 0, dbg_issue = 0, dbg_epi = 0, dbg_d3 = 0; int dbg_n = 0;\n"
              "  const unsigned dbg_launch = *reinterpret_cast<volatile unsigned*>(&g_dbg_launch);\n")
    src = sub(src, "    const int m0 = tile_m0(tile), n0 = tile_n0(tile);\n    int stage = j * kKBlocks % kStages, prev = 0;\n",
              "    const int m0 = tile_m0(tile), n0 = tile_n0(tile);\n    int stage = j * kKBlocks % kStages, prev = 0;\n"
              "    const long long dbg_d0 = clock64();\n    if (dbg_n > 0) dbg_epi += dbg_d0 - dbg_d3;\n")
    src = sub(src, "    if (j > 0) sm90::turn_wait(c);\n",
              "    if (j > 0) sm90::turn_wait(c);\n    const long long dbg_d1 = clock64();\n    dbg_wait += dbg_d1 - dbg_d0;\n")
    src = sub(src, "    if (tile + gridDim.x < tiles) sm90::turn_give(1 - c);  // the other warpgroup has a next tile\n",
              "    if (tile + gridDim.x < tiles) sm90::turn_give(1 - c);  // the other warpgroup has a next tile\n"
              "    dbg_issue += clock64() - dbg_d1;\n")
    src = sub(src, "    if (t == 0) sm90::mbar_arrive(empty(prev));\n\n",
              "    if (t == 0) sm90::mbar_arrive(empty(prev));\n    dbg_d3 = clock64();\n    dbg_main += dbg_d3 - dbg_d1;\n    ++dbg_n;\n\n")
    src = sub(src, "  if (t == 0) sm90::tma_store_wait<0>();  // every store has landed before the block's memory goes\n",
              "  if (t == 0) sm90::tma_store_wait<0>();  // every store has landed before the block's memory goes\n"
              "  if (wg > 0 && t == 0 && dbg_n > 0) {\n"
              "    dbg_epi += clock64() - dbg_d3;\n"
              "    if (dbg_launch == 20 && (blockIdx.x == 0 || blockIdx.x == 66 || blockIdx.x == 131))\n"
              "      printf(\"dbg epi %d block %d wg %d tiles %d wait %lld main %lld issue %lld epi %lld\\n\", kEpi, blockIdx.x,\n"
              "             wg, dbg_n, dbg_wait / dbg_n, dbg_main / dbg_n, dbg_issue / dbg_n, dbg_epi / dbg_n);\n"
              "    if (blockIdx.x == 0 && wg == 1) atomicAdd(&g_dbg_launch, 1u);\n"
              "  }\n")
    return src


def ident(src):
    return sub(src, "for (int e = 0; e < 8; ++e) g.v[e] = from_f<T>(gelu<kGeluTanh>(to_f(h.v[e])));",
               "for (int e = 0; e < 8; ++e) g.v[e] = h.v[e];")


def nopass(src):
    # every GELU pass of the training epilogues (three regions: two passes; two regions: two more)
    n = src.count("      gelu_pass(region(0), region(1));\n")
    if n < 1:
        sys.exit("nopass: no GELU pass found")
    return src.replace("      gelu_pass(region(0), region(1));\n", "").replace("      gelu_pass(region(2), region(0));\n", "")


def u2(src):
    return sub(src, "#pragma unroll 1\n      for (int it = 0; it < 8; ++it) {\n        const uint32_t o = chunk_off(it);\n        const Vec<T, 8> h = vec_at(src + o);",
               "#pragma unroll 2\n      for (int it = 0; it < 8; ++it) {\n        const uint32_t o = chunk_off(it);\n        const Vec<T, 8> h = vec_at(src + o);")


def main():
    src = open(sys.argv[1]).read()
    for f in sys.argv[3].split("+"):
        src = {"diag": diag, "ident": ident, "nopass": nopass, "u2": u2}[f](src)
    open(sys.argv[2], "w").write(src)


if __name__ == "__main__":
    main()
