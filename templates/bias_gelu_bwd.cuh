// bias_gelu_bwd: dh = dg · GELU'(h) written over dg, plus per-block partial sums of dh (the
// inter_b gradient; param_grad_reduce finishes it) unless the weight-gradient GEMM's BGRADB
// epilogue sums it (kPartials false). h is the saved pre-activation (x·Wᵀ + b).
// kStoreGelu (gelu_checkpoint): also writes g = GELU(h), the output_w gradient's operand that
// forward did not keep, from the h values this pass reads anyway (no separate recompute pass).
#pragma once
#include "dskc_config.cuh"
#include "common/gelu.cuh"
#include "common/row_tiles.cuh"
#include "common/types.cuh"

namespace dskc {

struct BiasGeluBwdParams {
  T* dg;        // [rows, kCols] in: d(GELU output), out: d(pre-activation)
  const T* h;   // [rows, kCols] saved pre-activation
  T* g;         // [rows, kCols] GELU(h) (kStoreGelu)
  float* part;  // [grad_parts(rows), kCols]
  int rows;
};

// One vector of kV elements at element e: dh = dg · GELU'(h) over dg (returned in d, unrounded;
// stored rounded) and with kStoreGelu g = GELU(h).
template <int kV, bool kStoreGelu>
__device__ __forceinline__ void gelu_bwd_vec(const BiasGeluBwdParams& p, size_t e, float (&d)[kV]) {
  float h[kV];
  load_f<T, kV>(p.dg + e, d);
  load_f<T, kV>(p.h + e, h);
  if constexpr (kStoreGelu) {
    float g[kV];
#pragma unroll
    for (int i = 0; i < kV; ++i) g[i] = gelu<kGeluTanh>(h[i]);
    store_f<T, kV>(p.g + e, g);
  }
#pragma unroll
  for (int i = 0; i < kV; ++i) d[i] *= gelu_grad<kGeluTanh>(h[i]);
  store_f<T, kV>(p.dg + e, d);
}

template <int kCols, bool kPartials = true, bool kStoreGelu = false>
__device__ __forceinline__ void bias_gelu_bwd_impl(const BiasGeluBwdParams& p) {
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
        gelu_bwd_vec<kV, kStoreGelu>(p, base + c, d);
#pragma unroll
        for (int i = 0; i < kV; ++i) acc[k][i] += round_to<T>(d[i]);  // dh as stored
      }
    }
  }
  if constexpr (!kPartials) return;
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

// bias_gelu_bwd_elem: the same dh (and kStoreGelu's g) without the bias partials, for the layers
// whose inter_b gradient cuBLASLt sums: an elementwise pass over 16-byte vectors in a grid-stride
// loop (one vector per thread at BERT-Large), like dropout_bwd_impl. The tiles above walk each
// block's eight rows one after another (the loads of a row wait behind the previous row's GELU′
// arithmetic and stores), which only the partial sums need.
template <int kCols, bool kStoreGelu = false>
__device__ __forceinline__ void bias_gelu_bwd_elem_impl(const BiasGeluBwdParams& p) {
  constexpr int kV = VecWidth<T, kCols>::value;
  for_each_vec<T, kCols>(p.rows, [&](size_t e) {
    float d[kV];
    gelu_bwd_vec<kV, kStoreGelu>(p, e, d);
  });
}

}  // namespace dskc
