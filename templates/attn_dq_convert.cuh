// attn_dq_convert: dQ = acc / √d, rounded to T, into the Q columns of grad_qkv ([B·S, 3H], columns
// 0 .. H − 1), from the fp32 accumulator [B·S, H] that stochastic_mode's wgmma dK/dV kernel adds each
// key tile's dS·K into by TMA reductions (FlashDq kDqReduce, templates/attn_flash_bwd_wgmma.cuh).
// Elementwise over [rows, kHidden] with 16-byte output vectors; the same scaling as the dQ GEMM's
// alpha and the fused kernels' stores.
#pragma once
#include "dskc_config.cuh"
#include "common/types.cuh"

namespace dskc {

struct AttnDqConvertParams {
  const float* acc;  // [rows, H] fp32 Σ dS·K
  T* dqkv;           // [rows, 3H] out: the dQ columns
  int rows;
};

__device__ __forceinline__ void attn_dq_convert_impl(const AttnDqConvertParams& p) {
  constexpr int kV = VecWidth<T, kHidden>::value;
  const float scale = 1.f / sqrtf(static_cast<float>(kHeadDim));
  for_each_vec<T, kHidden>(p.rows, [&](size_t e) {
    const size_t row = e / kHidden, col = e % kHidden;
    float v[kV];
    load_f<float, kV>(p.acc + e, v);
#pragma unroll
    for (int i = 0; i < kV; ++i) v[i] *= scale;
    store_f<T, kV>(p.dqkv + row * 3 * kHidden + col, v);
  });
}

}  // namespace dskc
