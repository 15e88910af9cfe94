// attn_softmax_dropout_bwd: given d(P_drop) (written over by the result), recomputes the
// dropout mask from the counter RNG, dP = mask·d(P_drop)/(1-p), and writes
// d(scores) = P ⊙ (dP − Σ_j dP·P). Rows live in registers (see common/attn_rows.cuh).
#pragma once
#include "dskc_config.cuh"
#include "common/attn_rows.cuh"
#include "common/dropout.cuh"
#include "common/reduce.cuh"

namespace dskc {

struct AttnSoftmaxBwdParams {
  T* grad;         // [B*heads*S, seq_pad] in: d(P_drop), out: d(scores)
  const T* probs;  // [B*heads*S, seq_pad] P (softmax output)
  int batch;
  int seq;
  int seq_pad;
  DropoutArgs rng;
};

template <bool kDropout>
__device__ __forceinline__ void attn_softmax_dropout_bwd_impl(const AttnSoftmaxBwdParams& p) {
  using A = AttnRows;
  constexpr int kV = A::kV, kIters = A::kIters, kR = A::kRowsPerWarp;
  const int rows = p.batch * kHeads * p.seq;
  const int row0 = A::first_row();
  float dp[kR][kIters][kV], pr[kR][kIters][kV];
#pragma unroll
  for (int r = 0; r < kR; ++r) {
    const int row = row0 + r;
    const size_t base = static_cast<size_t>(row) * p.seq_pad;
#pragma unroll
    for (int k = 0; k < kIters; ++k) {
      const int c = A::col(k);
      if (row < rows && c < p.seq) {
        load_f<T, kV>(p.grad + base + c, dp[r][k]);
        load_f<T, kV>(p.probs + base + c, pr[r][k]);
      } else {
#pragma unroll
        for (int i = 0; i < kV; ++i) dp[r][k][i] = pr[r][k][i] = 0.f;
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kR; ++r) {
    const int row = row0 + r;
    if (row >= rows) break;  // warp-uniform
    const uint64_t row_elem0 = static_cast<uint64_t>(row) * p.seq;
    float dot = 0.f;
#pragma unroll
    for (int k = 0; k < kIters; ++k) {
      const int c = A::col(k);
      if (c < p.seq) {
        if constexpr (kDropout) {
          bool keep[kV];
          dropout_keep_n<kV>(p.rng, dskc_rng::kStreamAttnProbs, row_elem0 + c, kAttnDropoutThreshold, keep);
#pragma unroll
          for (int i = 0; i < kV; ++i) dp[r][k][i] = keep[i] ? dp[r][k][i] * kAttnDropoutScale : 0.f;
        }
#pragma unroll
        for (int i = 0; i < kV; ++i) {
          if (c + i >= p.seq) dp[r][k][i] = 0.f;
          dot += dp[r][k][i] * pr[r][k][i];
        }
      }
    }
    dot = warp_sum(dot);
    T* grow = p.grad + static_cast<size_t>(row) * p.seq_pad;
#pragma unroll
    for (int k = 0; k < kIters; ++k) {
      const int c = A::col(k);
      if (c < p.seq) {
        float o[kV];
#pragma unroll
        for (int i = 0; i < kV; ++i) o[i] = pr[r][k][i] * (dp[r][k][i] - dot);
        store_f<T, kV>(grow + c, o);
      }
    }
  }
}

}  // namespace dskc
