// bias_dropout_residual_fwd: out = resid + dropout(x + bias), elementwise over [rows, kCols]
// with 16-byte vectors and a grid-stride loop. Pre-LN's final residual add after the FFN.
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
  constexpr int kV = VecWidth<T, kCols>::value;
  for_each_vec<T, kCols>(p.rows, [&](size_t e) {
    const int c = static_cast<int>(e % kCols);
    float x[kV], b[kV], r[kV];
    load_f<T, kV>(p.x + e, x);
    load_f<T, kV>(p.bias + c, b);
    load_f<T, kV>(p.resid + e, r);
    if constexpr (kDropout) {
      bool keep[kV];
      dropout_keep_vec<kV>(p.rng, kStream, e, kHiddenDropoutThreshold, keep);
#pragma unroll
      for (int i = 0; i < kV; ++i) x[i] = r[i] + (keep[i] ? (x[i] + b[i]) * kHiddenDropoutScale : 0.f);
    } else {
#pragma unroll
      for (int i = 0; i < kV; ++i) x[i] = r[i] + x[i] + b[i];
    }
    store_f<T, kV>(p.out + e, x);
  });
}

}  // namespace dskc
