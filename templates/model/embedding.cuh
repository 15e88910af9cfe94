// model/embedding: BERT's embedding layer forward, one block per token row:
//   sum = word[id] + position[s] + token_type[seg]   (fp32, saved for backward)
//   out = dropout(LayerNorm(sum))                     (Philox stream kStream, layer 0,
//         element index row·kH + c, keyed by (seed, step): bert_model.h's rule)
// Its backward is model_layernorm_bwd (dropout mode) + model_grouped_rows_part / _finish.
// All config arrives as template arguments, so the file compiles with any dskc_config.cuh
// that defines T.
#pragma once
#include "dskc_config.cuh"
#include "common/dropout.cuh"
#include "common/model_util.cuh"

namespace dskc {

struct EmbeddingFwdParams {
  const int* input_ids;    // [rows]
  const int* segment_ids;  // [rows]
  const T* word;           // [V, kH]
  const T* pos;            // [P, kH]
  const T* type;           // [types, kH]
  const T* gamma;          // [kH]
  const T* beta;           // [kH]
  float* sum;              // [rows, kH] LayerNorm input (saved)
  float* mean;             // [rows]
  float* rstd;             // [rows]
  T* out;                  // [rows, kH]
  DropoutArgs rng;
  int rows;
  int seq;
};

template <int kH, bool kDropout, uint32_t kThreshold, uint32_t kStream>
__device__ __forceinline__ void embedding_fwd_impl(const EmbeddingFwdParams& p, float scale, float eps) {
  constexpr int kPer = (kH + kModelThreads - 1) / kModelThreads;
  const int row = blockIdx.x;
  if (row >= p.rows) return;
  const size_t base = static_cast<size_t>(row) * kH;
  const T* w = p.word + static_cast<size_t>(p.input_ids[row]) * kH;
  const T* ps = p.pos + static_cast<size_t>(row % p.seq) * kH;
  const T* ty = p.type + static_cast<size_t>(p.segment_ids[row]) * kH;
  float v[kPer];
  float s = 0.f;
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const int c = threadIdx.x + k * kModelThreads;
    v[k] = 0.f;
    if (c < kH) {
      v[k] = to_f(w[c]) + to_f(ps[c]) + to_f(ty[c]);
      p.sum[base + c] = v[k];
      s += v[k];
    }
  }
  const float mean = model_block_sum(s) * (1.f / kH);
  float q = 0.f;
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const int c = threadIdx.x + k * kModelThreads;
    if (c < kH) q += (v[k] - mean) * (v[k] - mean);
  }
  const float rstd = rsqrtf(model_block_sum(q) * (1.f / kH) + eps);
  const dskc_rng::DropoutKey key{p.rng.seed, p.rng.layer, p.rng.step};
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const int c = threadIdx.x + k * kModelThreads;
    if (c < kH) {
      float y = (v[k] - mean) * rstd * to_f(p.gamma[c]) + to_f(p.beta[c]);
      if constexpr (kDropout) {
        const bool keep = dskc_rng::dropout_keep(key, kStream, base + c, kThreshold);
        y = keep ? y * scale : 0.f;
      }
      p.out[base + c] = from_f<T>(y);
    }
  }
  if (threadIdx.x == 0) {
    p.mean[row] = mean;
    p.rstd[row] = rstd;
  }
}

}  // namespace dskc
