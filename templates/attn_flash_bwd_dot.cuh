// attn_flash_bwd_dot: D = rowsum(dO ⊙ O) per (batch, head, query row), fp32 [B·heads·S], the
// softmax-backward term the fused attention backward needs: with P_drop = P ⊙ Z (Z the scaled
// dropout mask) and O = P_drop·V, Σ_j P_ij·dP_ij = Σ_j P_ij Z_ij (dO_i·V_j) = dO_i·O_i.
// 8 lanes per row, each summing d/8 adjacent elements (a 128-byte row per 8 lanes at d = 64);
// 16 rows per block; grid (ceil(S / 16), B·heads).
// With kDqAtomic (stochastic_mode) it also zeroes what attn_flash_bwd_dkdvdq accumulates into: each
// lane the fp32 dQ accumulator elements at the [B·S, H] positions of the O and dO elements it reads,
// and block (0, bh) the head's ticket. With kDqReduce (stochastic_mode, the wgmma kernel's TMA
// reductions) it zeroes the accumulator alone.
#pragma once
#include "dskc_config.cuh"
#include "common/flash.cuh"

namespace dskc {

struct AttnFlashDotParams {
  const T* ctx;   // [B*S, H] O (forward output of attention)
  const T* dctx;  // [B*S, H] dO
  float* dot;     // [B*heads*S] out: D
  float* dq_acc;         // [B*S, H] fp32 out: zeroed (kDqAtomic, kDqReduce; else unused)
  uint32_t* dq_tickets;  // [B*heads] out: zeroed (kDqAtomic only; else unused)
  int batch;
  int seq;
};

// between(): work of every thread of the grid that needs nothing of the rows, run while the row
// loads are in flight (attn_flash_bwd_dot_bits.cuh: the attention keep bits).
template <typename E, FlashDq kDq, typename Between>
__device__ __forceinline__ void attn_flash_bwd_dot_impl(const AttnFlashDotParams& p, Between&& between) {
  static_assert(sizeof(E) == 2 && kHeadDim % 16 == 0, "fused attention runs on fp16/bf16, head dim % 16 == 0");
  using F = FlashDotTile;
  constexpr int kPer = kHeadDim / F::kLanesPerRow;  // even: kHeadDim % 16 == 0
  const int i = blockIdx.x * F::kRows + threadIdx.x / F::kLanesPerRow;
  const int part = threadIdx.x % F::kLanesPerRow;
  const int bh = blockIdx.y, b = bh / kHeads, h = bh % kHeads;
  const size_t off = (static_cast<size_t>(b) * p.seq + i) * kHidden + h * kHeadDim + part * kPer;
  E ov[kPer], dv[kPer];
  if (i < p.seq) {
    const E* o = reinterpret_cast<const E*>(p.ctx) + off;
    const E* d = reinterpret_cast<const E*>(p.dctx) + off;
#pragma unroll
    for (int c = 0; c < kPer; ++c) {
      ov[c] = o[c];
      dv[c] = d[c];
    }
  }
  between();
  float acc = 0.f;
  if (i < p.seq) {
#pragma unroll
    for (int c = 0; c < kPer; c += 2) acc = flash::dot2_acc(acc, to_f(ov[c]), to_f(dv[c]), to_f(ov[c + 1]), to_f(dv[c + 1]));
    if constexpr (kDq == kDqAtomic || kDq == kDqReduce) {
      if constexpr (kPer % 4 == 0) {
#pragma unroll
        for (int c = 0; c < kPer; c += 4)
          *reinterpret_cast<float4*>(p.dq_acc + off + c) = make_float4(0.f, 0.f, 0.f, 0.f);
      } else {
#pragma unroll
        for (int c = 0; c < kPer; c += 2) *reinterpret_cast<float2*>(p.dq_acc + off + c) = make_float2(0.f, 0.f);
      }
    }
  }
  if constexpr (kDq == kDqAtomic)
    if (blockIdx.x == 0 && threadIdx.x == 0) p.dq_tickets[bh] = 0u;
  // Every lane takes part in the shuffles (rows past the end contribute nothing).
#pragma unroll
  for (int s = 1; s < F::kLanesPerRow; s <<= 1) acc += __shfl_xor_sync(0xffffffffu, acc, s);
  if (i < p.seq && part == 0) p.dot[static_cast<size_t>(bh) * p.seq + i] = acc;
}

template <typename E, FlashDq kDq = kDqPerQueryTile>
__device__ __forceinline__ void attn_flash_bwd_dot_impl(const AttnFlashDotParams& p) {
  attn_flash_bwd_dot_impl<E, kDq>(p, [] {});
}

}  // namespace dskc
