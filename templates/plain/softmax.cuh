// plain/softmax: row softmax and its backward, one block per row, fp32 math (no mask, no
// dropout: those are separate kernels in the plain layer):
//   fwd:  y = exp(x − max) / Σ exp(x − max)
//   bwd:  dx = y·(dy − Σ dy·y)
#pragma once
#include "dskc_config.cuh"
#include "plain/util.cuh"

namespace dskc {

struct PlainSoftmaxFwdParams {
  const T* x;  // [rows, cols]
  T* y;        // [rows, cols]
  int rows, cols;
};

struct PlainSoftmaxBwdParams {
  const T* dy;  // [rows, cols]
  const T* y;   // [rows, cols] softmax output
  T* dx;        // [rows, cols]
  int rows, cols;
};

__device__ __forceinline__ void softmax_fwd_impl(const PlainSoftmaxFwdParams& p) {
  const int row = blockIdx.x;
  if (row >= p.rows) return;
  const size_t base = static_cast<size_t>(row) * p.cols;
  float mx = neg_inf();
  for (int c = threadIdx.x; c < p.cols; c += kPlainThreads) mx = fmaxf(mx, to_f(p.x[base + c]));
  mx = plain_block_max(mx);
  float s = 0.f;
  for (int c = threadIdx.x; c < p.cols; c += kPlainThreads) s += expf(to_f(p.x[base + c]) - mx);
  const float inv = 1.f / plain_block_sum(s);
  for (int c = threadIdx.x; c < p.cols; c += kPlainThreads)
    p.y[base + c] = from_f<T>(expf(to_f(p.x[base + c]) - mx) * inv);
}

__device__ __forceinline__ void softmax_bwd_impl(const PlainSoftmaxBwdParams& p) {
  const int row = blockIdx.x;
  if (row >= p.rows) return;
  const size_t base = static_cast<size_t>(row) * p.cols;
  float s = 0.f;
  for (int c = threadIdx.x; c < p.cols; c += kPlainThreads) s += to_f(p.dy[base + c]) * to_f(p.y[base + c]);
  const float dot = plain_block_sum(s);
  for (int c = threadIdx.x; c < p.cols; c += kPlainThreads)
    p.dx[base + c] = from_f<T>(to_f(p.y[base + c]) * (to_f(p.dy[base + c]) - dot));
}

}  // namespace dskc
