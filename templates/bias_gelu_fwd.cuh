// bias_gelu_fwd: h = x + bias (written back over x: the saved GELU input), g = GELU(h).
// With kAddBias false the intermediate GEMM's cuBLASLt epilogue has already added the bias
// and h is only read. Elementwise over [rows, kInter] with 16-byte vectors.
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
  constexpr int kV = VecWidth<T, kCols>::value;
  for_each_vec<T, kCols>(p.rows, [&](size_t e) {
    const int c = static_cast<int>(e % kCols);
    float x[kV], g[kV];
    load_f<T, kV>(p.h + e, x);
    if constexpr (kAddBias) {
      float b[kV];
      load_f<T, kV>(p.bias + c, b);
#pragma unroll
      for (int i = 0; i < kV; ++i) x[i] = round_to<T>(x[i] + b[i]);  // GELU sees the stored pre-activation
      store_f<T, kV>(p.h + e, x);
    }
#pragma unroll
    for (int i = 0; i < kV; ++i) g[i] = gelu<kGeluTanh>(x[i]);
    store_f<T, kV>(p.g + e, g);
  });
}

}  // namespace dskc
