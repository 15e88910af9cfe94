// bias_dropout_residual_fwd: out = resid + dropout(x + bias), elementwise over [rows, kCols]
// with 16-byte vectors, kElementwiseUnroll per thread and grid-stride step. Pre-LN's final residual add after the FFN.
#pragma once
#include "dskc_config.cuh"
#include "common/dropout.cuh"
#include "common/types.cuh"

namespace dskc {

struct BiasDropoutResidualParams {
  const T* x;      // [rows, kCols] linear-layer output (no bias yet)
  const T* bias;   // [kCols]
  const T* resid;  // [rows, kCols]
  T* out;          // [rows, kCols]
  int rows;
  DropoutArgs rng;
};

template <int kCols, bool kDropout, uint32_t kStream>
__device__ __forceinline__ void bias_dropout_residual_fwd_impl(const BiasDropoutResidualParams& p) {
  constexpr int kV = VecWidth<T, kCols>::value, kU = kElementwiseUnroll;
  const size_t n_vec = static_cast<size_t>(p.rows) * (kCols / kV);
  // kU vectors per thread per step, blockDim apart (coalesced), all loads issued before any math.
  for (size_t v0 = blockIdx.x * static_cast<size_t>(blockDim.x) * kU + threadIdx.x; v0 < n_vec;
       v0 += static_cast<size_t>(gridDim.x) * blockDim.x * kU) {
    float x[kU][kV], r[kU][kV];
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const size_t vi = v0 + static_cast<size_t>(u) * blockDim.x;
      if (vi < n_vec) {
        load_f<T, kV>(p.x + vi * kV, x[u]);
        load_f<T, kV>(p.resid + vi * kV, r[u]);
      }
    }
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const size_t vi = v0 + static_cast<size_t>(u) * blockDim.x;
      if (vi >= n_vec) continue;
      const size_t e = vi * kV;
      const int c = static_cast<int>(e % kCols);
      float b[kV];
      load_f<T, kV>(p.bias + c, b);
      if constexpr (kDropout) {
        bool keep[kV];
        dropout_keep_n<kV>(p.rng, kStream, e, kHiddenDropoutThreshold, keep);
#pragma unroll
        for (int i = 0; i < kV; ++i) x[u][i] = r[u][i] + (keep[i] ? (x[u][i] + b[i]) * kHiddenDropoutScale : 0.f);
      } else {
#pragma unroll
        for (int i = 0; i < kV; ++i) x[u][i] = r[u][i] + x[u][i] + b[i];
      }
      store_f<T, kV>(p.out + e, x[u]);
    }
  }
}

}  // namespace dskc
