// bias_gelu_fwd: h = x + bias (written back over x: the saved GELU input), g = GELU(h).
// With kAddBias false the intermediate GEMM's cuBLASLt epilogue has already added the bias
// and h is only read. Elementwise over [rows, kInter] with 16-byte vectors, kElementwiseUnroll per
// thread and grid-stride step.
#pragma once
#include "dskc_config.cuh"
#include "common/gelu.cuh"
#include "common/types.cuh"

namespace dskc {

struct BiasGeluFwdParams {
  T* h;           // [rows, kCols] in: x·Wᵀ, out: x·Wᵀ + bias
  const T* bias;  // [kCols]
  T* g;           // [rows, kCols] GELU(h)
  int rows;
};

template <int kCols, bool kAddBias>
__device__ __forceinline__ void bias_gelu_fwd_impl(const BiasGeluFwdParams& p) {
  constexpr int kV = VecWidth<T, kCols>::value, kU = kElementwiseUnroll;
  const size_t n_vec = static_cast<size_t>(p.rows) * (kCols / kV);
  // kU vectors per thread per step, blockDim apart (coalesced), all loads issued before any math.
  for (size_t v0 = blockIdx.x * static_cast<size_t>(blockDim.x) * kU + threadIdx.x; v0 < n_vec;
       v0 += static_cast<size_t>(gridDim.x) * blockDim.x * kU) {
    float x[kU][kV];
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const size_t vi = v0 + static_cast<size_t>(u) * blockDim.x;
      if (vi < n_vec) load_f<T, kV>(p.h + vi * kV, x[u]);
    }
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const size_t vi = v0 + static_cast<size_t>(u) * blockDim.x;
      if (vi >= n_vec) continue;
      const size_t e = vi * kV;
      if constexpr (kAddBias) {
        const int c = static_cast<int>(e % kCols);
        float b[kV];
        load_f<T, kV>(p.bias + c, b);
#pragma unroll
        for (int i = 0; i < kV; ++i) x[u][i] = round_to<T>(x[u][i] + b[i]);  // GELU sees the stored pre-activation
        store_f<T, kV>(p.h + e, x[u]);
      }
      float g[kV];
#pragma unroll
      for (int i = 0; i < kV; ++i) g[i] = gelu<kGeluTanh>(x[u][i]);
      store_f<T, kV>(p.g + e, g);
    }
  }
}

}  // namespace dskc
