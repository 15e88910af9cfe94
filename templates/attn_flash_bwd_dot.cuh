// attn_flash_bwd_dot: D = rowsum(dO ⊙ O) per (batch, head, query row), fp32 [B·heads·S], the
// softmax-backward term the fused attention backward needs: with P_drop = P ⊙ Z (Z the scaled
// dropout mask) and O = P_drop·V, Σ_j P_ij·dP_ij = Σ_j P_ij Z_ij (dO_i·V_j) = dO_i·O_i.
// 8 lanes per row, each summing d/8 adjacent elements (a 128-byte row per 8 lanes at d = 64);
// 16 rows per block; grid (ceil(S / 16), B·heads).
#pragma once
#include "dskc_config.cuh"
#include "common/flash.cuh"

namespace dskc {

struct AttnFlashDotParams {
  const T* ctx;   // [B*S, H] O (forward output of attention)
  const T* dctx;  // [B*S, H] dO
  float* dot;     // [B*heads*S] out: D
  int batch;
  int seq;
};

template <typename E>
__device__ __forceinline__ void attn_flash_bwd_dot_impl(const AttnFlashDotParams& p) {
  static_assert(sizeof(E) == 2 && kHeadDim % 16 == 0, "fused attention runs on fp16/bf16, head dim % 16 == 0");
  using F = FlashDotTile;
  constexpr int kPer = kHeadDim / F::kLanesPerRow;  // even: kHeadDim % 16 == 0
  const int i = blockIdx.x * F::kRows + threadIdx.x / F::kLanesPerRow;
  const int part = threadIdx.x % F::kLanesPerRow;
  const int bh = blockIdx.y, b = bh / kHeads, h = bh % kHeads;
  float acc = 0.f;
  if (i < p.seq) {
    const size_t off = (static_cast<size_t>(b) * p.seq + i) * kHidden + h * kHeadDim + part * kPer;
    const E* o = reinterpret_cast<const E*>(p.ctx) + off;
    const E* d = reinterpret_cast<const E*>(p.dctx) + off;
#pragma unroll
    for (int c = 0; c < kPer; c += 2) acc += to_f(o[c]) * to_f(d[c]) + to_f(o[c + 1]) * to_f(d[c + 1]);
  }
  // Every lane takes part in the shuffles (rows past the end contribute nothing).
#pragma unroll
  for (int s = 1; s < F::kLanesPerRow; s <<= 1) acc += __shfl_xor_sync(0xffffffffu, acc, s);
  if (i < p.seq && part == 0) p.dot[static_cast<size_t>(bh) * p.seq + i] = acc;
}

}  // namespace dskc
