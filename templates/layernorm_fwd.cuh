// layernorm_fwd: y = (x - mean) * rstd * gamma + beta over rows of kCols, one warp (or, for wide
// rows, one block) per row, the row held in registers (two-pass mean/variance). Saves mean and
// rstd per row for backward.
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

// Which threads hold which columns of which row. Rows of at most 128 vectors (BERT-Large's 1024
// fp16 columns: four 16-byte vectors per lane) run one per warp, four per 128-thread block: the
// reductions are warp shuffles (no block barriers) and every thread has all its loads in flight at
// once. Wider rows run one per block. The plan sizes the grid the same way (rows per block).
template <int kCols>
struct LayerNormShape {
  static constexpr int kV = VecWidth<T, kCols>::value;
  static constexpr int kVecs = kCols / kV;
  static constexpr bool kWarpRows = kVecs <= 128;
  static constexpr int kRowsPerBlock = kWarpRows ? 4 : 1;
  static constexpr int kThreads = kWarpRows ? 32 * kRowsPerBlock : RowThreads<kVecs>::value;
  static constexpr int kRowThreads = kWarpRows ? 32 : kThreads;  // threads sharing one row
  static constexpr int kPer = (kVecs + kRowThreads - 1) / kRowThreads;
  __device__ static int row() { return kWarpRows ? blockIdx.x * kRowsPerBlock + threadIdx.x / 32 : blockIdx.x; }
  __device__ static int lane() { return kWarpRows ? threadIdx.x % 32 : threadIdx.x; }
  __device__ static int col(int k) { return (lane() + k * kRowThreads) * kV; }
};

// Sum over the threads of one row (S's layout); every thread of the row receives it.
template <typename S>
__device__ __forceinline__ float row_sum(float v) {
  if constexpr (S::kWarpRows) return warp_sum(v);
  else return block_sum_shared<S::kThreads>(v);
}

// Normalizes the kPer*kV values a thread holds (v) in place; the threads of S::row() cover the row.
template <int kCols, typename S = LayerNormShape<kCols>>
__device__ __forceinline__ void layernorm_row(float (&v)[S::kPer][S::kV], const T* gamma, const T* beta,
                                              float* mean_out, float* rstd_out) {
  float s = 0.f;
#pragma unroll
  for (int k = 0; k < S::kPer; ++k) {
    if (S::col(k) < kCols) {
#pragma unroll
      for (int i = 0; i < S::kV; ++i) s += v[k][i];
    }
  }
  const float mean = row_sum<S>(s) * (1.f / kCols);
  float q = 0.f;
#pragma unroll
  for (int k = 0; k < S::kPer; ++k) {
    if (S::col(k) < kCols) {
#pragma unroll
      for (int i = 0; i < S::kV; ++i) {
        const float d = v[k][i] - mean;
        q += d * d;
      }
    }
  }
  const float rstd = rsqrtf(row_sum<S>(q) * (1.f / kCols) + kLayerNormEps);
#pragma unroll
  for (int k = 0; k < S::kPer; ++k) {
    const int c = S::col(k);
    if (c < kCols) {
      float g[S::kV], b[S::kV];
      load_f<T, S::kV>(gamma + c, g);
      load_f<T, S::kV>(beta + c, b);
#pragma unroll
      for (int i = 0; i < S::kV; ++i) v[k][i] = (v[k][i] - mean) * rstd * g[i] + b[i];
    }
  }
  if (S::lane() == 0) {
    *mean_out = mean;
    *rstd_out = rstd;
  }
}

// between(): work of every thread of the grid (rows past p.rows included) that needs nothing of the
// row, run while the row's loads are in flight (layernorm_fwd_bits.cuh: the attention keep bits).
template <int kCols, typename Between>
__device__ __forceinline__ void layernorm_fwd_impl(const LayerNormFwdParams& p, Between&& between) {
  using S = LayerNormShape<kCols>;
  const int row = S::row();
  const bool live = row < p.rows;  // a whole warp (warp rows) or block
  const T* x = p.x + static_cast<size_t>(row) * kCols;
  // The row stays packed (one 16-byte vector per k) while between() runs: half the registers of
  // the fp32 values.
  Vec<T, S::kV> raw[S::kPer];
#pragma unroll
  for (int k = 0; k < S::kPer; ++k) {
    const int c = S::col(k);
    if (live && c < kCols) raw[k] = *reinterpret_cast<const Vec<T, S::kV>*>(x + c);
  }
  between();
  if (!live) return;
  float v[S::kPer][S::kV] = {};
#pragma unroll
  for (int k = 0; k < S::kPer; ++k) {
    if (S::col(k) < kCols) {
#pragma unroll
      for (int i = 0; i < S::kV; ++i) v[k][i] = to_f(raw[k].v[i]);
    }
  }
  layernorm_row<kCols>(v, p.gamma, p.beta, p.mean + row, p.rstd + row);
  T* y = p.y + static_cast<size_t>(row) * kCols;
#pragma unroll
  for (int k = 0; k < S::kPer; ++k) {
    const int c = S::col(k);
    if (c < kCols) store_f<T, S::kV>(y + c, v[k]);
  }
}

template <int kCols>
__device__ __forceinline__ void layernorm_fwd_impl(const LayerNormFwdParams& p) {
  layernorm_fwd_impl<kCols>(p, [] {});
}

}  // namespace dskc
