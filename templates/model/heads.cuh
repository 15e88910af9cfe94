// model/heads: the pieces of BERT's pre-training heads that are not GEMMs (those run in
// cuBLASLt between these kernels):
//   gather_rows        dst[i] = src[idx[i]]            (masked positions, [CLS] tokens)
//   activation         y = GELU(x) or tanh(x), elementwise
//   xent               per row: loss = logsumexp(l) − l[label] (fp32); the logits are
//                      overwritten by d = (softmax(l) − onehot(label))·coef, padding zero
//   nsp                classifier H→2 on the pooled [CLS] + cross-entropy + its backward
//                      through tanh: dpooled = (dl·W)·(1 − pooled²); dl kept for the weights
//   nsp_param_grad     dW += dlᵀ·pooled, db += Σ dl (column-parallel, fixed order)
//   head_grad_scatter  the encoder output gradient, every row written: row b·S gets the pooler's
//                      input gradient, each masked position its MLM gradient (a row's block walks
//                      its sample's predictions in order: repeated positions add deterministically)
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
  T* logits;          // [rows, ld] in: logits, out: d loss·coef / d logits (zero past cols)
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
  T* dy;                 // [B·S, kH], every row written
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

// xent: one 16-byte vector of logits (elements j0..j0+kV-1) into a thread's running max and Σ exp
// over the first `cols` columns.
template <int kV>
__device__ __forceinline__ void xent_add(const float (&x)[kV], int j0, int cols, float& mx, float& s) {
  float vm = neg_inf();
#pragma unroll
  for (int i = 0; i < kV; ++i)
    if (j0 + i < cols) vm = fmaxf(vm, x[i]);
  if (vm > mx) {
    s *= expf(mx - vm);
    mx = vm;
  }
#pragma unroll
  for (int i = 0; i < kV; ++i)
    if (j0 + i < cols) s += expf(x[i] - mx);
}

// ... and the vector's gradient d = (softmax − onehot)·coef, 0 past `cols`, in place.
template <int kV>
__device__ __forceinline__ void xent_grad(float (&x)[kV], int j0, const XentParams& p, int label, float mx,
                                          float inv) {
#pragma unroll
  for (int i = 0; i < kV; ++i) {
    const int j = j0 + i;
    float d = j < p.cols ? expf(x[i] - mx) * inv * p.coef : 0.f;
    if (j == label) d -= p.coef;
    x[i] = d;
  }
}

// One block per row. 16-byte vectors over the row stride `ld` (a multiple of 16 bytes, rows
// 16-byte aligned): pass 1 keeps a running max and Σ exp over the `cols` logits; pass 2 re-reads
// the row (mostly from L2) and writes d = (softmax − onehot)·coef, and zeros into the padding
// columns [cols, ld). (Holding the row in registers between the passes, 16 vectors per thread,
// measured slower on an H100: 0.104 against 0.085 ms at 1067 x 30522, 96 registers.)
__device__ __forceinline__ void xent_impl(const XentParams& p) {
  constexpr int kV = 16 / static_cast<int>(sizeof(T));
  const int row = blockIdx.x;
  if (row >= p.rows) return;
  T* l = p.logits + static_cast<size_t>(row) * p.ld;
  const int nv = p.ld / kV;
  const int label = p.labels[row];
  const float l_label = to_f(l[label]);
  float mx = neg_inf(), s = 0.f;
#pragma unroll 4
  for (int v = threadIdx.x; v < nv; v += kModelThreads) {
    float x[kV];
    load_f<T, kV>(l + v * kV, x);
    xent_add<kV>(x, v * kV, p.cols, mx, s);
  }
  const float m_all = model_block_max(mx);
  s = mx == neg_inf() ? 0.f : s * expf(mx - m_all);
  s = model_block_sum(s);  // its barriers: every thread has read l[label] before the writes
  mx = m_all;
  if (threadIdx.x == 0) p.loss[row] = mx + logf(s) - l_label;
  const float inv = 1.f / s;
#pragma unroll 4
  for (int v = threadIdx.x; v < nv; v += kModelThreads) {
    float x[kV];
    load_f<T, kV>(l + v * kV, x);
    xent_grad<kV>(x, v * kV, p, label, mx, inv);
    store_f<T, kV>(l + v * kV, x);
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

// One block per token row r = b·S + pos (grid = B·S): the row's gradient is the pooler's input
// gradient (pos 0) plus each of sample b's predictions at r in order, each add rounded to T as
// the former zeroed-buffer-then-add form did, so the bits are the same; rows without either are 0.
template <int kH>
__device__ __forceinline__ void head_grad_scatter_impl(const HeadScatterParams& p) {
  constexpr int kV = VecWidth<T, kH>::value;
  const int r = blockIdx.x, b = r / p.seq, pos = r - b * p.seq;
  const int i0 = p.pred_start[b], i1 = p.pred_start[b + 1];
  for (int v = threadIdx.x; v < kH / kV; v += kModelThreads) {
    float acc[kV] = {};
    if (pos == 0) {
      const Vec<T, kV> c = reinterpret_cast<const Vec<T, kV>*>(p.dcls + static_cast<size_t>(b) * kH)[v];
#pragma unroll
      for (int k = 0; k < kV; ++k) acc[k] = onto_zero(c.v[k]);  // as the former 0 + dcls
    }
    for (int i = i0; i < i1; ++i) {
      if (p.pred_rows[i] != r) continue;
      float g[kV];
      load_f<T, kV>(p.dhm + static_cast<size_t>(i) * kH + v * kV, g);
#pragma unroll
      for (int k = 0; k < kV; ++k) acc[k] = round_to<T>(acc[k] + g[k]);
    }
    store_f<T, kV>(p.dy + static_cast<size_t>(r) * kH + v * kV, acc);
  }
}

}  // namespace dskc
