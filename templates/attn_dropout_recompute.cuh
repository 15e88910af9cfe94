// attn_dropout_recompute: with attn_dropout_checkpoint, backward rebuilds
// P_drop = dropout(P) from the saved P and the counter RNG instead of keeping it.
#pragma once
#include "dskc_config.cuh"
#include "common/attn_rows.cuh"
#include "common/dropout.cuh"

namespace dskc {

struct AttnDropoutRecomputeParams {
  const T* probs;   // [B*heads*S, seq_pad] P
  T* probs_drop;    // [B*heads*S, seq_pad] dropout(P)
  int batch;
  int seq;
  int seq_pad;
  DropoutArgs rng;
};

__device__ __forceinline__ void attn_dropout_recompute_impl(const AttnDropoutRecomputeParams& p) {
  constexpr int kV = AttnRows::kV, kIters = AttnRows::kIters;
  const int lane = threadIdx.x % 32;
  const int row = blockIdx.x * kAttnRowsPerBlock + threadIdx.x / 32;
  if (row >= p.batch * kHeads * p.seq) return;
  const T* prow = p.probs + static_cast<size_t>(row) * p.seq_pad;
  T* drow = p.probs_drop + static_cast<size_t>(row) * p.seq_pad;
  const uint64_t row_elem0 = static_cast<uint64_t>(row) * p.seq;
#pragma unroll
  for (int k = 0; k < kIters; ++k) {
    const int c = (k * 32 + lane) * kV;
    if (c < p.seq) {
      float v[kV];
      bool keep[kV];
      load_f<T, kV>(prow + c, v);
      dropout_keep_n<kV>(p.rng, dskc_rng::kStreamAttnProbs, row_elem0 + c, kAttnDropoutThreshold, keep);
#pragma unroll
      for (int i = 0; i < kV; ++i) v[i] = keep[i] ? v[i] * kAttnDropoutScale : 0.f;
      store_f<T, kV>(drow + c, v);
    }
  }
}

}  // namespace dskc
