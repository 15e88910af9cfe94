// weight_transpose: out[kCols, kRows] = in[kRows, kCols]ᵀ for a weight matrix, in 64 x 64 tiles
// through shared memory (16-byte loads and stores). gemm_sm90 multiplies by Bᵀ with B K-major, so
// a data gradient dY·W on gemm_sm90 takes Wᵀ from here, once per backward, on the side stream ahead
// of the kernel that needs it: output_w [H, I] -> [I, H] (8 MiB for BERT-Large, DSKC_FFN_GEMM=sm90);
// inter_w, attn_ow, attn_qkvw (DSKC_DGRAD_GEMM=sm90).
#pragma once
#include "dskc_config.cuh"
#include "common/types.cuh"

namespace dskc {

struct WeightTransposeTile {
  static constexpr int kTile = 64;
  static constexpr int kThreads = 256;
};

struct WeightTransposeParams {
  const T* in;  // [kRows, kCols]
  T* out;       // [kCols, kRows]
};

template <int kRows, int kCols>
__device__ __forceinline__ void weight_transpose_impl(const WeightTransposeParams& p) {
  constexpr int kTile = WeightTransposeTile::kTile, kV = 16 / static_cast<int>(sizeof(T));
  constexpr int kVecsPerRow = kTile / kV, kSteps = kTile * kVecsPerRow / WeightTransposeTile::kThreads;
  static_assert(kRows % kTile == 0 && kCols % kTile == 0, "weight_transpose works in whole 64 x 64 tiles");
  // +1 element per row: the column reads of the second phase spread over the banks.
  __shared__ T tile[kTile][kTile + 1];
  const int r0 = blockIdx.y * kTile, c0 = blockIdx.x * kTile;
#pragma unroll
  for (int s = 0; s < kSteps; ++s) {
    const int i = threadIdx.x + s * WeightTransposeTile::kThreads, r = i / kVecsPerRow, v = i % kVecsPerRow;
    const Vec<T, kV> x = *reinterpret_cast<const Vec<T, kV>*>(p.in + static_cast<size_t>(r0 + r) * kCols + c0 + v * kV);
#pragma unroll
    for (int e = 0; e < kV; ++e) tile[r][v * kV + e] = x.v[e];
  }
  __syncthreads();
#pragma unroll
  for (int s = 0; s < kSteps; ++s) {
    const int i = threadIdx.x + s * WeightTransposeTile::kThreads, r = i / kVecsPerRow, v = i % kVecsPerRow;
    Vec<T, kV> y;
#pragma unroll
    for (int e = 0; e < kV; ++e) y.v[e] = tile[v * kV + e][r];
    *reinterpret_cast<Vec<T, kV>*>(p.out + static_cast<size_t>(c0 + r) * kRows + r0 + v * kV) = y;
  }
}

}  // namespace dskc
