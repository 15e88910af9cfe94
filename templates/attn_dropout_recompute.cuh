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
  using A = AttnRows;
  constexpr int kV = A::kV, kIters = A::kIters, kR = A::kRowsPerWarp;
  const int rows = p.batch * kHeads * p.seq;
#pragma unroll
  for (int r = 0; r < kR; ++r) {
    const int row = A::first_row() + r;
    if (row >= rows) break;
    const size_t base = static_cast<size_t>(row) * p.seq_pad;
    const uint64_t row_elem0 = static_cast<uint64_t>(row) * p.seq;
#pragma unroll
    for (int k = 0; k < kIters; ++k) {
      const int c = A::col(k);
      if (c < p.seq) {
        float v[kV];
        bool keep[kV];
        load_f<T, kV>(p.probs + base + c, v);
        dropout_keep_n<kV>(p.rng, dskc_rng::kStreamAttnProbs, row_elem0 + c, kAttnDropoutThreshold, keep);
#pragma unroll
        for (int i = 0; i < kV; ++i) v[i] = keep[i] ? v[i] * kAttnDropoutScale : 0.f;
        store_f<T, kV>(p.probs_drop + base + c, v);
      }
    }
  }
}

}  // namespace dskc
