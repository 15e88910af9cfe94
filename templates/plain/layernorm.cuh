// plain/layernorm: textbook LayerNorm, no residual fusion. One block per row, two passes over
// the row in fp32, statistics saved for backward:
//   fwd:  mean = Σx/n; var = Σ(x − mean)²/n; rstd = 1/sqrt(var + eps);
//         y = (x − mean)·rstd·gamma + beta
//   bwd:  x̂ = (x − mean)·rstd, g = dy·gamma; dx = rstd·(g − mean(g) − x̂·mean(g·x̂))
//   param grad (column kernel, fixed order): dgamma = Σ_rows dy·x̂, dbeta = Σ_rows dy
#pragma once
#include "dskc_config.cuh"
#include "plain/util.cuh"

namespace dskc {

struct PlainLnFwdParams {
  const T* x;      // [rows, cols]
  const T* gamma;  // [cols]
  const T* beta;   // [cols]
  T* y;            // [rows, cols]
  float* mean;     // [rows]
  float* rstd;     // [rows]
  int rows, cols;
};

struct PlainLnBwdParams {
  const T* dy;        // [rows, cols]
  const T* x;         // [rows, cols] LayerNorm input
  const float* mean;  // [rows]
  const float* rstd;  // [rows]
  const T* gamma;     // [cols]
  T* dx;              // [rows, cols]
  int rows, cols;
};

struct PlainLnParamGradParams {
  const T* dy;        // [rows, cols]
  const T* x;         // [rows, cols] LayerNorm input
  const float* mean;  // [rows]
  const float* rstd;  // [rows]
  T* dgamma;          // [cols]
  T* dbeta;           // [cols]
  int rows, cols;
};

__device__ __forceinline__ void layernorm_fwd_impl(const PlainLnFwdParams& p, float eps) {
  const int row = blockIdx.x;
  if (row >= p.rows) return;
  const size_t base = static_cast<size_t>(row) * p.cols;
  float s = 0.f;
  for (int c = threadIdx.x; c < p.cols; c += kPlainThreads) s += to_f(p.x[base + c]);
  const float mean = plain_block_sum(s) / static_cast<float>(p.cols);
  float q = 0.f;
  for (int c = threadIdx.x; c < p.cols; c += kPlainThreads) {
    const float d = to_f(p.x[base + c]) - mean;
    q += d * d;
  }
  const float rstd = rsqrtf(plain_block_sum(q) / static_cast<float>(p.cols) + eps);
  for (int c = threadIdx.x; c < p.cols; c += kPlainThreads)
    p.y[base + c] = from_f<T>((to_f(p.x[base + c]) - mean) * rstd * to_f(p.gamma[c]) + to_f(p.beta[c]));
  if (threadIdx.x == 0) {
    p.mean[row] = mean;
    p.rstd[row] = rstd;
  }
}

__device__ __forceinline__ void layernorm_bwd_impl(const PlainLnBwdParams& p) {
  const int row = blockIdx.x;
  if (row >= p.rows) return;
  const size_t base = static_cast<size_t>(row) * p.cols;
  const float mean = p.mean[row], rstd = p.rstd[row];
  float s1 = 0.f, s2 = 0.f;
  for (int c = threadIdx.x; c < p.cols; c += kPlainThreads) {
    const float g = to_f(p.dy[base + c]) * to_f(p.gamma[c]);
    const float xh = (to_f(p.x[base + c]) - mean) * rstd;
    s1 += g;
    s2 += g * xh;
  }
  const float mg = plain_block_sum(s1) / static_cast<float>(p.cols);
  const float mgx = plain_block_sum(s2) / static_cast<float>(p.cols);
  for (int c = threadIdx.x; c < p.cols; c += kPlainThreads) {
    const float g = to_f(p.dy[base + c]) * to_f(p.gamma[c]);
    const float xh = (to_f(p.x[base + c]) - mean) * rstd;
    p.dx[base + c] = from_f<T>(rstd * (g - mg - xh * mgx));
  }
}

__device__ __forceinline__ void layernorm_param_grad_impl(const PlainLnParamGradParams& p) {
  float sg = 0.f, sb = 0.f;
  const PlainLnParamGradParams q = p;
  plain_column_sums(
      p.rows, p.cols,
      [q](int r, int c, float& a, float& b) {
        const size_t i = static_cast<size_t>(r) * q.cols + c;
        const float d = to_f(q.dy[i]);
        a += d * (to_f(q.x[i]) - q.mean[r]) * q.rstd[r];
        b += d;
      },
      &sg, &sb);
  const int c = blockIdx.x * 32 + threadIdx.x;
  if (threadIdx.x < 32 && c < p.cols) {
    p.dgamma[c] = from_f<T>(sg);
    p.dbeta[c] = from_f<T>(sb);
  }
}

}  // namespace dskc
