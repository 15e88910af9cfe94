// bias_dropout_residual_layernorm_fwd: s = resid + dropout(x + bias); y = LayerNorm(s).
// One warp per row (one block for wide rows; register-resident: LayerNormShape). Used after the
// attention output projection (both LayerNorm placements) and after the FFN in Post-LN. s is the
// residual stream (saved or scratch per the plan), y the normalized output; mean/rstd saved for
// backward.
#pragma once
#include "dskc_config.cuh"
#include "common/dropout.cuh"
#include "layernorm_fwd.cuh"

namespace dskc {

struct BiasDropoutResidualLnParams {
  const T* x;      // [rows, kCols] linear-layer output (no bias yet)
  const T* bias;   // [kCols]
  const T* resid;  // [rows, kCols]
  T* s;            // [rows, kCols] resid + dropout(x + bias)
  const T* gamma;  // [kCols]
  const T* beta;   // [kCols]
  T* y;            // [rows, kCols] LayerNorm(s)
  float* mean;     // [rows]
  float* rstd;     // [rows]
  int rows;
  DropoutArgs rng;
};

template <int kCols, bool kDropout, uint32_t kStream>
__device__ __forceinline__ void bias_dropout_residual_layernorm_fwd_impl(
    const BiasDropoutResidualLnParams& p) {
  using S = LayerNormShape<kCols>;
  const int row = S::row();
  if (row >= p.rows) return;
  const size_t base = static_cast<size_t>(row) * kCols;
  float v[S::kPer][S::kV];
#pragma unroll
  for (int k = 0; k < S::kPer; ++k) {
    const int c = S::col(k);
    if (c < kCols) {
      float x[S::kV], b[S::kV], r[S::kV];
      load_f<T, S::kV>(p.x + base + c, x);
      load_f<T, S::kV>(p.bias + c, b);
      load_f<T, S::kV>(p.resid + base + c, r);
      if constexpr (kDropout) {
        bool keep[S::kV];
        dropout_keep_vec<S::kV>(p.rng, kStream, base + c, kHiddenDropoutThreshold, keep);
#pragma unroll
        for (int i = 0; i < S::kV; ++i) x[i] = keep[i] ? (x[i] + b[i]) * kHiddenDropoutScale : 0.f;
      } else {
#pragma unroll
        for (int i = 0; i < S::kV; ++i) x[i] += b[i];
      }
#pragma unroll
      for (int i = 0; i < S::kV; ++i) v[k][i] = round_to<T>(r[i] + x[i]);  // as stored in s
      store_f<T, S::kV>(p.s + base + c, v[k]);
    }
  }
  layernorm_row<kCols>(v, p.gamma, p.beta, p.mean + row, p.rstd + row);
#pragma unroll
  for (int k = 0; k < S::kPer; ++k) {
    const int c = S::col(k);
    if (c < kCols) store_f<T, S::kV>(p.y + base + c, v[k]);
  }
}

}  // namespace dskc
