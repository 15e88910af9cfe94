// attn_softmax_dropout_fwd: P = softmax(scores + mask) over each query row (the 1/sqrt(d) scale
// is folded into the Q·Kᵀ GEMM), written over the scores; with attention dropout also
// P_drop = dropout(P) into probs_drop. Rows live in registers (see common/attn_rows.cuh).
#pragma once
#include "dskc_config.cuh"
#include "common/attn_rows.cuh"
#include "common/dropout.cuh"
#include "common/reduce.cuh"

namespace dskc {

struct AttnSoftmaxFwdParams {
  T* scores;        // [B*heads*S, seq_pad] in: Q·Kᵀ/√d, out: P
  const T* mask;    // [B, S] additive (0 keep, large negative drop)
  T* probs_drop;    // [B*heads*S, seq_pad] dropout(P); unused without attention dropout
  int batch;
  int seq;
  int seq_pad;
  DropoutArgs rng;
};

template <bool kDropout>
__device__ __forceinline__ void attn_softmax_dropout_fwd_impl(const AttnSoftmaxFwdParams& p) {
  using A = AttnRows;
  constexpr int kV = A::kV, kIters = A::kIters, kR = A::kRowsPerWarp;
  const int rows = p.batch * kHeads * p.seq;
  const int row0 = A::first_row();
  float v[kR][kIters][kV];
#pragma unroll
  for (int r = 0; r < kR; ++r) {
    const int row = row0 + r;
    const bool valid = row < rows;  // warp-uniform
    const T* srow = p.scores + static_cast<size_t>(row) * p.seq_pad;
    const T* mrow = p.mask + static_cast<size_t>(valid ? row / (kHeads * p.seq) : 0) * p.seq;
#pragma unroll
    for (int k = 0; k < kIters; ++k) {
      const int c = A::col(k);
      if (valid && c < p.seq) {
        load_f<T, kV>(srow + c, v[r][k]);
#pragma unroll
        for (int i = 0; i < kV; ++i) v[r][k][i] = (c + i < p.seq) ? v[r][k][i] + to_f(mrow[c + i]) : neg_inf();
      } else {
#pragma unroll
        for (int i = 0; i < kV; ++i) v[r][k][i] = neg_inf();
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kR; ++r) {
    const int row = row0 + r;
    if (row >= rows) break;  // warp-uniform
    float mx = neg_inf();
#pragma unroll
    for (int k = 0; k < kIters; ++k)
#pragma unroll
      for (int i = 0; i < kV; ++i) mx = fmaxf(mx, v[r][k][i]);
    mx = warp_max(mx);
    float sum = 0.f;
#pragma unroll
    for (int k = 0; k < kIters; ++k)
#pragma unroll
      for (int i = 0; i < kV; ++i) {
        v[r][k][i] = __expf(v[r][k][i] - mx);
        sum += v[r][k][i];
      }
    const float inv = 1.f / warp_sum(sum);
    const uint64_t row_elem0 = static_cast<uint64_t>(row) * p.seq;
    T* srow = p.scores + static_cast<size_t>(row) * p.seq_pad;
#pragma unroll
    for (int k = 0; k < kIters; ++k) {
      const int c = A::col(k);
      if (c < p.seq) {
#pragma unroll
        for (int i = 0; i < kV; ++i) v[r][k][i] *= inv;
        store_f<T, kV>(srow + c, v[r][k]);
        if constexpr (kDropout) {
          bool keep[kV];
          dropout_keep_n<kV>(p.rng, dskc_rng::kStreamAttnProbs, row_elem0 + c, kAttnDropoutThreshold, keep);
          float d[kV];
#pragma unroll
          for (int i = 0; i < kV; ++i) d[i] = keep[i] ? round_to<T>(v[r][k][i]) * kAttnDropoutScale : 0.f;
          store_f<T, kV>(p.probs_drop + static_cast<size_t>(row) * p.seq_pad + c, d);
        }
      }
    }
  }
}

}  // namespace dskc
