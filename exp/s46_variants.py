#!/usr/bin/env python3
"""Session 46: throwaway module-source variants of the wgmma attn_flash_bwd_dkdv (for DSKC_OVERRIDE_SOURCE).

  s46_variants.py MODULE.cu OUT.cu T[+T...]

writes OUT.cu: a generated module source (`dskc compile --emit cuda`) with the transforms T applied to
the wgmma dK/dV template (templates/attn_flash_bwd_wgmma.cuh as embedded there). The anchors are the
template before v44 (its 4-byte output stores: exp/s46a.sh ran these on it); with v44's TMA output
stores (kTmaOut) `diag` and `nostore` need new ones for the fused-dQ form.
  diag      clock64 brackets of thread 0 per block: prologue issue, K/V wait, per tile the stage wait,
            the Sᵀ/dPᵀ products' wait, the softmax (to the dV/dK issue), the rest of the tile; after the
            loop the last products, the cluster exchange, the dQ stores, the dK/dV stores. On the 20th
            launch every block adds its spans into device counters, the last block prints the averages
            (one line), and blocks that ran on SM 0 print their globaltimer start / end (ns)
  nostore   no dK / dV / dQ global stores (wrong results, timing only)
  loadonly  the prologue's loads and the stage waits only: no products, softmax or stores (timing only)
"""
import sys

HEAD = "// attn_flash_bwd_dkdv on Hopper's warpgroup MMA"


def split(src):
    a = src.index(HEAD)
    b = src.index("}  // namespace dskc", a)
    return src[:a], src[a:b], src[b:]


def sub(text, old, new, count=1):
    if text.count(old) != count:
        sys.exit(f"expected {count} of {old!r}, found {text.count(old)}")
    return text.replace(old, new)


PRE = r'''__device__ unsigned long long g_dkdv_dbg[16];
__device__ unsigned g_dkdv_ticket, g_dkdv_fin;
__device__ __forceinline__ unsigned long long dkdv_gtime() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
'''

NAMES = ["prologue", "kv_wait", "stage_wait", "products", "softmax", "tile_rest", "last_products", "xchg",
         "dq_store", "dkdv_store", "total", "tiles"]


def diag(body):
    body = sub(body, "  extern __shared__ unsigned char attn_wg_smem[];\n",
               "  extern __shared__ unsigned char attn_wg_smem[];\n"
               "  long long dg[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};\n"
               "  const long long dg_t0 = clock64();\n  const unsigned long long dg_g0 = dkdv_gtime();\n"
               "  long long dg_t = dg_t0;\n"
               "  auto dg_mark = [&](int i) { const long long n = clock64(); dg[i] += n - dg_t; dg_t = n; };\n"
               "  unsigned dg_launch = 0;\n"
               "  if (threadIdx.x == 0) dg_launch = atomicAdd(&g_dkdv_ticket, 1u) / (gridDim.x * gridDim.y);\n")
    body = sub(body, "  __syncthreads();  // barriers initialized, mask staged\n",
               "  __syncthreads();  // barriers initialized, mask staged\n  dg_mark(0);\n")
    body = sub(body, "  sm90::mbar_wait(kv_bar, 0);\n", "  sm90::mbar_wait(kv_bar, 0);\n  dg_mark(1);\n")
    body = sub(body, "    sm90::mbar_wait(full(stage), phase);\n",
               "    sm90::mbar_wait(full(stage), phase);\n    dg_mark(2);\n    ++dg[11];\n")
    body = sub(body, "    sm90::wgmma_wait<0>();  // this tile's Sᵀ, dPᵀ and the previous tile's dK/dV products\n",
               "    sm90::wgmma_wait<0>();  // this tile's Sᵀ, dPᵀ and the previous tile's dK/dV products\n"
               "    dg_mark(3);\n")
    body = sub(body, "    sm90::wgmma_fence();\n#pragma unroll\n    for (int kk = 0; kk < 4; ++kk) sm90::wgmma_m64n64k16_rs_tn<E>(dv, pa[kk]",
               "    dg_mark(4);\n    sm90::wgmma_fence();\n#pragma unroll\n    for (int kk = 0; kk < 4; ++kk) sm90::wgmma_m64n64k16_rs_tn<E>(dv, pa[kk]")
    body = sub(body, "  }\n  sm90::wgmma_wait<0>();\n  sm90::fence_operands(dk);\n  sm90::fence_operands(dv);\n",
               "    dg_mark(5);\n  }\n  sm90::wgmma_wait<0>();\n  sm90::fence_operands(dk);\n  sm90::fence_operands(dv);\n"
               "  dg_mark(6);\n")
    body = sub(body, "        const int slot = kWG == 2 ? 1 - c : 0;\n",
               "        dg_mark(7);\n        const int slot = kWG == 2 ? 1 - c : 0;\n")
    body = sub(body, "  // dK = scale·dSᵀ·Q, dV = (1/(1−p))·(P ⊙ Z)ᵀ·dO into grad_qkv",
               "  dg_mark(8);\n  // dK = scale·dSᵀ·Q, dV = (1/(1−p))·(P ⊙ Z)ᵀ·dO into grad_qkv")
    tail = ("      flash::store2<E>(row + kHidden + n * 8, dv[4 * n + 2 * r] * v_scale, dv[4 * n + 2 * r + 1] * v_scale);\n"
            "    }\n  }\n")
    body = sub(body, tail, tail +
               "  dg_mark(9);\n"
               "  dg[10] = clock64() - dg_t0;\n"
               "  if (threadIdx.x == 0 && dg_launch == 20) {\n"
               "    for (int i = 0; i < 12; ++i) atomicAdd(&g_dkdv_dbg[i], static_cast<unsigned long long>(dg[i]));\n"
               "    unsigned sm;\n    asm volatile(\"mov.u32 %0, %%smid;\" : \"=r\"(sm));\n"
               "    if (sm == 0)\n"
               "      printf(\"dbgsm0 block %d %d start %llu end %llu cycles %lld\\n\", blockIdx.x, blockIdx.y, dg_g0,\n"
               "             dkdv_gtime(), dg[10]);\n"
               "    __threadfence();\n"
               "    const unsigned nb = gridDim.x * gridDim.y;\n"
               "    if (atomicAdd(&g_dkdv_fin, 1u) == nb - 1) {\n"
               "      unsigned long long s[12];\n"
               "      for (int i = 0; i < 12; ++i) s[i] = atomicAdd(&g_dkdv_dbg[i], 0ull);\n"
               "      printf(\"dbgavg blocks %u " + " ".join(n + " %.0f" for n in NAMES[:11]) + " tiles/block %.2f\\n\", nb, " +
               ", ".join(f"(double)s[{i}] / nb" for i in range(12)) + ");\n"
               "    }\n"
               "  }\n")
    return body


def nostore(body):
    body = sub(body, "        for (int n = 0; n < 8; ++n) flash::store2<E>(row + n * 8, dq[4 * n + 2 * r] * scale, dq[4 * n + 2 * r + 1] * scale);\n",
               "        for (int n = 0; n < 8; ++n) if (dq[4 * n] == 12345.f) flash::store2<E>(row + n * 8, dq[4 * n + 2 * r] * scale, dq[4 * n + 2 * r + 1] * scale);\n")
    body = sub(body, "    for (int n = 0; n < 8; ++n) {\n      flash::store2<E>(row + n * 8, dk[4 * n + 2 * r] * scale",
               "    for (int n = 0; n < 8; ++n) if (dk[4 * n] == 12345.f) {\n      flash::store2<E>(row + n * 8, dk[4 * n + 2 * r] * scale")
    return body


def loadonly(body):
    # After the stage wait of each tile, skip the rest of the tile (the stage refills stay: tiles <= 2
    # need none at seq 128), and return before the exchange and the stores.
    body = sub(body, "    sm90::mbar_wait(full(stage), phase);\n",
               "    sm90::mbar_wait(full(stage), phase);\n    if (seq > 0) continue;\n")
    body = sub(body, "  }\n  sm90::wgmma_wait<0>();\n  sm90::fence_operands(dk);\n  sm90::fence_operands(dv);\n",
               "  }\n  if (seq > 0) { if constexpr (kCluster == 2) { if (tiles == 2) { sm90::cluster_wait(); "
               "sm90::cluster_arrive_release(); sm90::cluster_wait(); } } return; }\n"
               "  sm90::wgmma_wait<0>();\n  sm90::fence_operands(dk);\n  sm90::fence_operands(dv);\n")
    return body


def main():
    src = open(sys.argv[1]).read()
    pre, body, post = split(src)
    for f in sys.argv[3].split("+"):
        body = {"diag": diag, "nostore": nostore, "loadonly": loadonly}[f](body)
    if "diag" in sys.argv[3].split("+"):
        pre = pre + PRE
    open(sys.argv[2], "w").write(pre + body + post)


if __name__ == "__main__":
    main()
