// layernorm_fwd: y = (x - mean) * rstd * gamma + beta over rows of kCols, one block per row,
// the row held in registers (two-pass mean/variance). Saves mean and rstd per row for backward.
#pragma once
#include "dskc_config.cuh"
#include "common/reduce.cuh"
#include "common/types.cuh"

namespace dskc {

struct LayerNormFwdParams {
  const T* x;      // [rows, kCols]
  const T* gamma;  // [kCols]
  const T* beta;   // [kCols]
  T* y;            // [rows, kCols]
  float* mean;     // [rows]
  float* rstd;     // [rows]
  int rows;
};

// Normalizes the kPer*kV values a thread holds (v) in place; the block covers one row.
template <int kCols, int kThreads, int kPer, int kV>
__device__ __forceinline__ void layernorm_row(float (&v)[kPer][kV], const T* gamma, const T* beta,
                                              float* mean_out, float* rstd_out) {
  __shared__ float scratch[kThreads / 32];
  float s = 0.f;
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const int c = (threadIdx.x + k * kThreads) * kV;
    if (c < kCols) {
#pragma unroll
      for (int i = 0; i < kV; ++i) s += v[k][i];
    }
  }
  const float mean = block_sum<kThreads>(s, scratch) * (1.f / kCols);
  float q = 0.f;
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const int c = (threadIdx.x + k * kThreads) * kV;
    if (c < kCols) {
#pragma unroll
      for (int i = 0; i < kV; ++i) {
        const float d = v[k][i] - mean;
        q += d * d;
      }
    }
  }
  const float rstd = rsqrtf(block_sum<kThreads>(q, scratch) * (1.f / kCols) + kLayerNormEps);
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const int c = (threadIdx.x + k * kThreads) * kV;
    if (c < kCols) {
      float g[kV], b[kV];
      load_f<T, kV>(gamma + c, g);
      load_f<T, kV>(beta + c, b);
#pragma unroll
      for (int i = 0; i < kV; ++i) v[k][i] = (v[k][i] - mean) * rstd * g[i] + b[i];
    }
  }
  if (threadIdx.x == 0) {
    *mean_out = mean;
    *rstd_out = rstd;
  }
}

template <int kCols>
struct LayerNormShape {
  static constexpr int kV = VecWidth<T, kCols>::value;
  static constexpr int kThreads = RowThreads<kCols / kV>::value;
  static constexpr int kPer = RowThreads<kCols / kV>::kPerThread;
};

template <int kCols>
__device__ __forceinline__ void layernorm_fwd_impl(const LayerNormFwdParams& p) {
  using S = LayerNormShape<kCols>;
  const int row = blockIdx.x;
  if (row >= p.rows) return;
  const T* x = p.x + static_cast<size_t>(row) * kCols;
  float v[S::kPer][S::kV] = {};
#pragma unroll
  for (int k = 0; k < S::kPer; ++k) {
    const int c = (threadIdx.x + k * S::kThreads) * S::kV;
    if (c < kCols) load_f<T, S::kV>(x + c, v[k]);
  }
  layernorm_row<kCols, S::kThreads, S::kPer, S::kV>(v, p.gamma, p.beta, p.mean + row, p.rstd + row);
  T* y = p.y + static_cast<size_t>(row) * kCols;
#pragma unroll
  for (int k = 0; k < S::kPer; ++k) {
    const int c = (threadIdx.x + k * S::kThreads) * S::kV;
    if (c < kCols) store_f<T, S::kV>(y + c, v[k]);
  }
}

}  // namespace dskc
