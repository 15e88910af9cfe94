// model/heads: the pieces of BERT's pre-training heads that are not GEMMs (those run in
// cuBLASLt between these kernels):
//   gather_rows        dst[i] = src[idx[i]]            (masked positions, [CLS] tokens)
//   activation         y = GELU(x) or tanh(x), elementwise
//   xent               per row: loss = logsumexp(l) − l[label] (fp32); the logits are
//                      overwritten by d = (softmax(l) − onehot(label))·coef
//   nsp                classifier H→2 on the pooled [CLS] + cross-entropy + its backward
//                      through tanh: dpooled = (dl·W)·(1 − pooled²); dl kept for the weights
//   nsp_param_grad     dW += dlᵀ·pooled, db += Σ dl (column-parallel, fixed order)
//   head_grad_scatter  the encoder output gradient: row b·S gets the pooler's input gradient,
//                      each masked position its MLM gradient (block b walks its sample's
//                      predictions in order, so repeated positions add deterministically)
#pragma once
#include "dskc_config.cuh"
#include "common/gelu.cuh"
#include "common/model_util.cuh"

namespace dskc {

struct GatherRowsParams {
  const T* src;    // [*, kH]
  const int* idx;  // [n]
  T* dst;          // [n, kH]
  int n;
};

struct ActivationParams {
  const T* x;  // [n]
  T* y;        // [n]
  unsigned long long n;
};

struct XentParams {
  T* logits;          // [rows, ld] in: logits, out: d loss·coef / d logits
  const int* labels;  // [rows]
  float* loss;        // [rows]
  float coef;
  int rows, cols, ld;
};

struct NspParams {
  const T* pooled;    // [B, kH] tanh output
  const T* w;         // [2, kH]
  const T* b;         // [2]
  const int* labels;  // [B]
  float* loss;        // [B]
  float* dl;          // [B, 2] d loss·coef / d logits
  T* dpooled;         // [B, kH] gradient wrt the pooler's pre-tanh output
  float coef;
  int batch;
};

struct NspParamGradParams {
  const T* pooled;  // [B, kH]
  const float* dl;  // [B, 2]
  float* dw;        // [2, kH] fp32 accumulator
  float* db;        // [2] fp32 accumulator
  int batch;
};

struct HeadScatterParams {
  T* dy;                 // [B·S, kH], zero on entry
  const T* dcls;         // [B, kH]
  const T* dhm;          // [M, kH]
  const int* pred_start; // [B + 1] sample b owns predictions [pred_start[b], pred_start[b+1])
  const int* pred_rows;  // [M] token row (b·S + position) of each prediction
  int seq;
};

template <int kH>
__device__ __forceinline__ void gather_rows_impl(const GatherRowsParams& p) {
  const int i = blockIdx.x;
  if (i >= p.n) return;
  const T* s = p.src + static_cast<size_t>(p.idx[i]) * kH;
  T* d = p.dst + static_cast<size_t>(i) * kH;
  for (int c = threadIdx.x; c < kH; c += kModelThreads) d[c] = s[c];
}

enum ModelActivation { kActGeluErf = 0, kActGeluTanh = 1, kActTanh = 2 };

template <int kAct>
__device__ __forceinline__ void activation_impl(const ActivationParams& p) {
  for (unsigned long long i = blockIdx.x * static_cast<unsigned long long>(kModelThreads) + threadIdx.x; i < p.n;
       i += static_cast<unsigned long long>(gridDim.x) * kModelThreads) {
    const float x = to_f(p.x[i]);
    float y;
    if constexpr (kAct == kActTanh) {
      y = tanhf(x);
    } else {
      y = gelu<kAct == kActGeluTanh>(x);
    }
    p.y[i] = from_f<T>(y);
  }
}

__device__ __forceinline__ void xent_impl(const XentParams& p) {
  const int row = blockIdx.x;
  if (row >= p.rows) return;
  T* l = p.logits + static_cast<size_t>(row) * p.ld;
  float mx = neg_inf();
  for (int j = threadIdx.x; j < p.cols; j += kModelThreads) mx = fmaxf(mx, to_f(l[j]));
  mx = model_block_max(mx);
  float s = 0.f;
  for (int j = threadIdx.x; j < p.cols; j += kModelThreads) s += expf(to_f(l[j]) - mx);
  s = model_block_sum(s);
  const int label = p.labels[row];
  const float l_label = to_f(l[label]);
  __syncthreads();  // every thread has read l[label] before it is overwritten
  if (threadIdx.x == 0) p.loss[row] = mx + logf(s) - l_label;
  const float inv = 1.f / s;
  for (int j = threadIdx.x; j < p.cols; j += kModelThreads) {
    float d = expf(to_f(l[j]) - mx) * inv * p.coef;
    if (j == label) d -= p.coef;
    l[j] = from_f<T>(d);
  }
}

template <int kH>
__device__ __forceinline__ void nsp_impl(const NspParams& p) {
  const int b = blockIdx.x;
  if (b >= p.batch) return;
  const T* x = p.pooled + static_cast<size_t>(b) * kH;
  float s0 = 0.f, s1 = 0.f;
  for (int c = threadIdx.x; c < kH; c += kModelThreads) {
    const float v = to_f(x[c]);
    s0 += v * to_f(p.w[c]);
    s1 += v * to_f(p.w[kH + c]);
  }
  const float l0 = model_block_sum(s0) + to_f(p.b[0]);
  const float l1 = model_block_sum(s1) + to_f(p.b[1]);
  const float mx = fmaxf(l0, l1);
  const float e0 = expf(l0 - mx), e1 = expf(l1 - mx), sum = e0 + e1;
  const int label = p.labels[b];
  float d0 = e0 / sum * p.coef, d1 = e1 / sum * p.coef;
  if (label == 0) d0 -= p.coef; else d1 -= p.coef;
  if (threadIdx.x == 0) {
    p.loss[b] = mx + logf(sum) - (label == 0 ? l0 : l1);
    p.dl[2 * b] = d0;
    p.dl[2 * b + 1] = d1;
  }
  for (int c = threadIdx.x; c < kH; c += kModelThreads) {
    const float v = to_f(x[c]);
    const float g = d0 * to_f(p.w[c]) + d1 * to_f(p.w[kH + c]);
    p.dpooled[static_cast<size_t>(b) * kH + c] = from_f<T>(g * (1.f - v * v));
  }
}

template <int kH>
__device__ __forceinline__ void nsp_param_grad_impl(const NspParamGradParams& p) {
  const int c = blockIdx.x * kModelThreads + threadIdx.x;
  if (c < kH) {
    float g0 = 0.f, g1 = 0.f;
    for (int b = 0; b < p.batch; ++b) {
      const float v = to_f(p.pooled[static_cast<size_t>(b) * kH + c]);
      g0 += p.dl[2 * b] * v;
      g1 += p.dl[2 * b + 1] * v;
    }
    acc_add(p.dw + c, g0);
    acc_add(p.dw + kH + c, g1);
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    float g0 = 0.f, g1 = 0.f;
    for (int b = 0; b < p.batch; ++b) {
      g0 += p.dl[2 * b];
      g1 += p.dl[2 * b + 1];
    }
    acc_add(p.db, g0);
    acc_add(p.db + 1, g1);
  }
}

template <int kH>
__device__ __forceinline__ void head_grad_scatter_impl(const HeadScatterParams& p) {
  const int b = blockIdx.x;
  const int i0 = p.pred_start[b], i1 = p.pred_start[b + 1];
  for (int c = threadIdx.x; c < kH; c += kModelThreads) {
    T* cls_row = p.dy + static_cast<size_t>(b) * p.seq * kH;
    cls_row[c] = from_f<T>(to_f(cls_row[c]) + to_f(p.dcls[static_cast<size_t>(b) * kH + c]));
    for (int i = i0; i < i1; ++i) {
      T* d = p.dy + static_cast<size_t>(p.pred_rows[i]) * kH + c;
      *d = from_f<T>(to_f(*d) + to_f(p.dhm[static_cast<size_t>(i) * kH + c]));
    }
  }
}

}  // namespace dskc
