// attn_softmax_dropout_fwd: P = softmax(scores + mask) over each query row (the 1/sqrt(d) scale
// is folded into the Q·Kᵀ GEMM), written over the scores; with attention dropout also
// P_drop = dropout(P) into probs_drop. One warp per row, the row in registers.
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
  constexpr int kV = AttnRows::kV, kIters = AttnRows::kIters;
  const int lane = threadIdx.x % 32;
  const int row = blockIdx.x * kAttnRowsPerBlock + threadIdx.x / 32;
  const int rows = p.batch * kHeads * p.seq;
  if (row >= rows) return;
  const int b = row / (kHeads * p.seq);
  T* srow = p.scores + static_cast<size_t>(row) * p.seq_pad;
  const T* mrow = p.mask + static_cast<size_t>(b) * p.seq;
  float v[kIters][kV];
  float mx = neg_inf();
#pragma unroll
  for (int k = 0; k < kIters; ++k) {
    const int c = (k * 32 + lane) * kV;
    if (c < p.seq) {
      load_f<T, kV>(srow + c, v[k]);
#pragma unroll
      for (int i = 0; i < kV; ++i) {
        v[k][i] = (c + i < p.seq) ? v[k][i] + to_f(mrow[c + i]) : neg_inf();
        mx = fmaxf(mx, v[k][i]);
      }
    } else {
#pragma unroll
      for (int i = 0; i < kV; ++i) v[k][i] = neg_inf();
    }
  }
  mx = warp_max(mx);
  float sum = 0.f;
#pragma unroll
  for (int k = 0; k < kIters; ++k) {
#pragma unroll
    for (int i = 0; i < kV; ++i) {
      v[k][i] = __expf(v[k][i] - mx);
      sum += v[k][i];
    }
  }
  const float inv = 1.f / warp_sum(sum);
  const uint64_t row_elem0 = static_cast<uint64_t>(row) * p.seq;
  T* drow = kDropout ? p.probs_drop + static_cast<size_t>(row) * p.seq_pad : nullptr;
#pragma unroll
  for (int k = 0; k < kIters; ++k) {
    const int c = (k * 32 + lane) * kV;
    if (c < p.seq) {
#pragma unroll
      for (int i = 0; i < kV; ++i) v[k][i] *= inv;
      store_f<T, kV>(srow + c, v[k]);
      if constexpr (kDropout) {
        bool keep[kV];
        dropout_keep_n<kV>(p.rng, dskc_rng::kStreamAttnProbs, row_elem0 + c, kAttnDropoutThreshold, keep);
        float d[kV];
#pragma unroll
        for (int i = 0; i < kV; ++i) d[i] = keep[i] ? round_to<T>(v[k][i]) * kAttnDropoutScale : 0.f;
        store_f<T, kV>(drow + c, d);
      }
    }
  }
}

}  // namespace dskc
