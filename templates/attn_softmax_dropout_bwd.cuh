// attn_softmax_dropout_bwd: given d(P_drop) (written over by the result), recomputes the
// dropout mask from the counter RNG, dP = mask·d(P_drop)/(1-p), and writes
// d(scores) = P ⊙ (dP − Σ_j dP·P). One warp per row, the row in registers.
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
  constexpr int kV = AttnRows::kV, kIters = AttnRows::kIters;
  const int lane = threadIdx.x % 32;
  const int row = blockIdx.x * kAttnRowsPerBlock + threadIdx.x / 32;
  if (row >= p.batch * kHeads * p.seq) return;
  T* grow = p.grad + static_cast<size_t>(row) * p.seq_pad;
  const T* prow = p.probs + static_cast<size_t>(row) * p.seq_pad;
  const uint64_t row_elem0 = static_cast<uint64_t>(row) * p.seq;
  float dp[kIters][kV], pr[kIters][kV];
  float dot = 0.f;
#pragma unroll
  for (int k = 0; k < kIters; ++k) {
    const int c = (k * 32 + lane) * kV;
    if (c < p.seq) {
      load_f<T, kV>(grow + c, dp[k]);
      load_f<T, kV>(prow + c, pr[k]);
      if constexpr (kDropout) {
        bool keep[kV];
        dropout_keep_n<kV>(p.rng, dskc_rng::kStreamAttnProbs, row_elem0 + c, kAttnDropoutThreshold, keep);
#pragma unroll
        for (int i = 0; i < kV; ++i) dp[k][i] = keep[i] ? dp[k][i] * kAttnDropoutScale : 0.f;
      }
#pragma unroll
      for (int i = 0; i < kV; ++i) {
        if (c + i >= p.seq) dp[k][i] = 0.f;
        dot += dp[k][i] * pr[k][i];
      }
    }
  }
  dot = warp_sum(dot);
#pragma unroll
  for (int k = 0; k < kIters; ++k) {
    const int c = (k * 32 + lane) * kV;
    if (c < p.seq) {
      float o[kV];
#pragma unroll
      for (int i = 0; i < kV; ++i) o[i] = pr[k][i] * (dp[k][i] - dot);
      store_f<T, kV>(grow + c, o);
    }
  }
}

}  // namespace dskc
