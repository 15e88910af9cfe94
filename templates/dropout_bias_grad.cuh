// dropout_bias_grad: backward of y = dropout(x + bias): dx = mask·dy/(1−p) (regenerated from
// the counter RNG; written over dy's copy in dx) and per-block partial bias gradients Σ dx.
// Without dropout (the QKV bias) it only sums columns and writes nothing else. fp16/bf16 layers,
// whose bias gradients cuBLASLt sums, run only the masking: the elementwise dropout_bwd_impl below.
#pragma once
#include "dskc_config.cuh"
#include "common/dropout.cuh"
#include "common/row_tiles.cuh"

namespace dskc {

struct DropoutBiasGradParams {
  const T* dy;  // [rows, kCols]
  T* dx;        // [rows, kCols] masked gradient (dropout variants only; may alias dy)
  float* part;  // [grad_parts(rows), kCols]
  int rows;
  DropoutArgs rng;
};

template <int kCols, bool kDropout, uint32_t kStream>
__device__ __forceinline__ void dropout_bias_grad_impl(const DropoutBiasGradParams& p) {
  using R = RowTile<kCols>;
  constexpr int kV = R::kV, kPer = R::kPer;
  float acc[kPer][kV];
#pragma unroll
  for (int k = 0; k < kPer; ++k)
#pragma unroll
    for (int i = 0; i < kV; ++i) acc[k][i] = 0.f;
  const int row0 = blockIdx.x * kGradRowsPerBlock;
  const int row_end = min(row0 + kGradRowsPerBlock, p.rows);
  for (int row = row0; row < row_end; ++row) {
    const size_t base = static_cast<size_t>(row) * kCols;
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int c = R::col(k);
      if (c < kCols) {
        float d[kV];
        load_f<T, kV>(p.dy + base + c, d);
        if constexpr (kDropout) {
          bool keep[kV];
          dropout_keep_vec<kV>(p.rng, kStream, base + c, kHiddenDropoutThreshold, keep);
#pragma unroll
          for (int i = 0; i < kV; ++i) d[i] = keep[i] ? d[i] * kHiddenDropoutScale : 0.f;
          store_f<T, kV>(p.dx + base + c, d);
#pragma unroll
          for (int i = 0; i < kV; ++i) d[i] = round_to<T>(d[i]);
        }
#pragma unroll
        for (int i = 0; i < kV; ++i) acc[k][i] += d[i];
      }
    }
  }
  float* part = p.part + static_cast<size_t>(blockIdx.x) * kCols;
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const int c = R::col(k);
    if (c < kCols) {
#pragma unroll
      for (int i = 0; i < kV; ++i) part[c + i] = acc[k][i];
    }
  }
}

// dropout_bwd: the masking alone (dropout_bias_grad_impl's dx, without the bias partials), as an
// elementwise pass: 16-byte vectors, a grid-stride loop over the whole tensor, so each thread has
// one load in flight per vector instead of eight rows of a tile one after another.
template <int kCols, uint32_t kStream>
__device__ __forceinline__ void dropout_bwd_impl(const DropoutBiasGradParams& p) {
  constexpr int kV = VecWidth<T, kCols>::value;
  for_each_vec<T, kCols>(p.rows, [&](size_t e) {
    float d[kV];
    load_f<T, kV>(p.dy + e, d);
    bool keep[kV];
    dropout_keep_vec<kV>(p.rng, kStream, e, kHiddenDropoutThreshold, keep);
#pragma unroll
    for (int i = 0; i < kV; ++i) d[i] = keep[i] ? d[i] * kHiddenDropoutScale : 0.f;
    store_f<T, kV>(p.dx + e, d);
  });
}

}  // namespace dskc
