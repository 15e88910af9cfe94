// model/layernorm: the model-level LayerNorms (final LayerNorm of Pre-LN, the MLM transform's
// LayerNorm, the embedding LayerNorm's backward). One block per row, fp32 math, the row held
// in registers; parameter gradients by a column kernel that walks the rows in order
// (deterministic), added into the fp32 accumulators with acc_add.
//   fwd:  y = (x − mean)·rstd·gamma + beta (biased variance), mean/rstd saved
//   bwd:  dx = rstd·(g − mean(g) − x̂·mean(g·x̂)), g = dy·gamma; modes:
//         kLnBwdGelu    — dx *= gelu'(gelu_in) (the MLM transform: LN(GELU(t)))
//         kLnBwdDropout — dy is first replaced, in place, by the gradient through the
//                         embedding dropout (keep ? dy·scale : 0) so the parameter-gradient
//                         kernel reads the right dy
//   param grad: dgamma += Σ_rows dy·x̂, dbeta += Σ_rows dy
// X (the saved input) is float (embeddings) or T; D (dx) is float (embeddings) or T.
#pragma once
#include "dskc_config.cuh"
#include "common/dropout.cuh"
#include "common/gelu.cuh"
#include "common/model_util.cuh"

namespace dskc {

enum ModelLnBwdMode { kLnBwdPlain = 0, kLnBwdGelu = 1, kLnBwdDropout = 2 };

struct ModelLnFwdParams {
  const T* x;      // [rows, kH]
  const T* gamma;  // [kH]
  const T* beta;   // [kH]
  T* y;            // [rows, kH]
  float* mean;     // [rows]
  float* rstd;     // [rows]
  int rows;
};

struct ModelLnBwdParams {
  T* dy;               // [rows, kH] (kLnBwdDropout: overwritten with the gradient after dropout)
  const void* x;       // [rows, kH] LayerNorm input, X
  const float* mean;   // [rows]
  const float* rstd;   // [rows]
  const T* gamma;      // [kH]
  const T* gelu_in;    // [rows, kH] kLnBwdGelu only
  void* dx;            // [rows, kH] D
  DropoutArgs rng;     // kLnBwdDropout only
  int rows;
};

struct ModelLnParamGradParams {
  const T* dy;        // [rows, kH]
  const void* x;      // [rows, kH] X
  const float* mean;  // [rows]
  const float* rstd;  // [rows]
  float* dgamma;      // [kH] fp32 accumulator
  float* dbeta;       // [kH] fp32 accumulator
  float* part;        // [ceil(rows / chunk_rows), 2, kH] partial sums (workspace)
  int rows;
  int chunk_rows;     // rows per partial sum
};

template <typename X>
__device__ __forceinline__ float load_any(const X* p) {
  return to_f(*p);
}

template <int kH>
__device__ __forceinline__ void model_ln_fwd_impl(const ModelLnFwdParams& p, float eps) {
  constexpr int kPer = (kH + kModelThreads - 1) / kModelThreads;
  const int row = blockIdx.x;
  if (row >= p.rows) return;
  const size_t base = static_cast<size_t>(row) * kH;
  float v[kPer];
  float s = 0.f;
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const int c = threadIdx.x + k * kModelThreads;
    v[k] = c < kH ? to_f(p.x[base + c]) : 0.f;
    s += v[k];
  }
  const float mean = model_block_sum(s) * (1.f / kH);
  float q = 0.f;
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const int c = threadIdx.x + k * kModelThreads;
    if (c < kH) q += (v[k] - mean) * (v[k] - mean);
  }
  const float rstd = rsqrtf(model_block_sum(q) * (1.f / kH) + eps);
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const int c = threadIdx.x + k * kModelThreads;
    if (c < kH) p.y[base + c] = from_f<T>((v[k] - mean) * rstd * to_f(p.gamma[c]) + to_f(p.beta[c]));
  }
  if (threadIdx.x == 0) {
    p.mean[row] = mean;
    p.rstd[row] = rstd;
  }
}

template <int kH, typename X, typename D, int kMode, bool kTanh, uint32_t kThreshold, uint32_t kStream>
__device__ __forceinline__ void model_ln_bwd_impl(const ModelLnBwdParams& p, float scale) {
  constexpr int kPer = (kH + kModelThreads - 1) / kModelThreads;
  const int row = blockIdx.x;
  if (row >= p.rows) return;
  const size_t base = static_cast<size_t>(row) * kH;
  const X* x = static_cast<const X*>(p.x);
  D* dx = static_cast<D*>(p.dx);
  const float mean = p.mean[row], rstd = p.rstd[row];
  const dskc_rng::DropoutKey key{p.rng.seed, p.rng.layer, p.rng.step};
  float g[kPer], xh[kPer];
  float s1 = 0.f, s2 = 0.f;
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const int c = threadIdx.x + k * kModelThreads;
    g[k] = xh[k] = 0.f;
    if (c < kH) {
      float d = to_f(p.dy[base + c]);
      if constexpr (kMode == kLnBwdDropout) {
        d = dskc_rng::dropout_keep(key, kStream, base + c, kThreshold) ? d * scale : 0.f;
        const T stored = from_f<T>(d);
        p.dy[base + c] = stored;
        d = to_f(stored);
      }
      xh[k] = (load_any(x + base + c) - mean) * rstd;
      g[k] = d * to_f(p.gamma[c]);
      s1 += g[k];
      s2 += g[k] * xh[k];
    }
  }
  const float mg = model_block_sum(s1) * (1.f / kH);
  const float mgx = model_block_sum(s2) * (1.f / kH);
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const int c = threadIdx.x + k * kModelThreads;
    if (c < kH) {
      float r = rstd * (g[k] - mg - xh[k] * mgx);
      if constexpr (kMode == kLnBwdGelu) r *= gelu_grad<kTanh>(to_f(p.gelu_in[base + c]));
      dx[base + c] = from_f<D>(r);
    }
  }
}

// LayerNorm gamma/beta gradients in two deterministic stages: the partial sums of each chunk of
// chunk_rows rows (block b: column block b % ceil(kH / 256), chunk b / ceil(kH / 256); every block
// of the grid busy, where one block per 256 columns walked all rows), then the chunks' sums in
// chunk order added into the accumulators.
template <int kH, typename X>
__device__ __forceinline__ void model_ln_param_grad_part_impl(const ModelLnParamGradParams& p) {
  constexpr int kColBlocks = (kH + kModelThreads - 1) / kModelThreads;
  const int c = (blockIdx.x % kColBlocks) * kModelThreads + threadIdx.x;
  const int chunk = blockIdx.x / kColBlocks;
  if (c >= kH) return;
  const X* x = static_cast<const X*>(p.x);
  const int r0 = chunk * p.chunk_rows, r1 = min(p.rows, r0 + p.chunk_rows);
  float sg = 0.f, sb = 0.f;
  for (int r = r0; r < r1; ++r) {
    const size_t i = static_cast<size_t>(r) * kH + c;
    const float d = to_f(p.dy[i]);
    sg += d * (load_any(x + i) - p.mean[r]) * p.rstd[r];
    sb += d;
  }
  p.part[(2 * static_cast<size_t>(chunk)) * kH + c] = sg;
  p.part[(2 * static_cast<size_t>(chunk) + 1) * kH + c] = sb;
}

template <int kH>
__device__ __forceinline__ void model_ln_param_grad_finish_impl(const ModelLnParamGradParams& p) {
  const int c = blockIdx.x * kModelThreads + threadIdx.x;
  if (c >= kH) return;
  const int chunks = (p.rows + p.chunk_rows - 1) / p.chunk_rows;
  float sg = 0.f, sb = 0.f;
  for (int k = 0; k < chunks; ++k) {
    sg += p.part[(2 * static_cast<size_t>(k)) * kH + c];
    sb += p.part[(2 * static_cast<size_t>(k) + 1) * kH + c];
  }
  acc_add(p.dgamma + c, sg);
  acc_add(p.dbeta + c, sb);
}

}  // namespace dskc
