// layernorm_bwd: dx = rstd·(g − mean(g) − x̂·mean(g·x̂)), g = dy·gamma, for rows of kCols, plus
// partial dgamma = Σ dy·x̂ and dbeta = Σ dy per block (param_grad_reduce finishes them).
// x̂ comes from the saved input and mean/rstd, or — with normalize_invertible — from the saved
// output: x̂ = (y − beta)/gamma. The residual variant adds a gradient to dy before (Post-LN)
// or to dx after (Pre-LN) so the residual branch costs no extra pass. kDropOut (the attention
// LayerNorm of fp16/bf16 layers with hidden dropout) also writes the gradient through the dropout
// before it, dx_drop = Z·round(dx)/(1−p) with Z regenerated from stream kDropStream: what the
// standalone dropout_bias_grad pass would write next, bit for bit, without reading dx back.
#pragma once
#include "dskc_config.cuh"
#include "common/dropout.cuh"
#include "common/reduce.cuh"
#include "common/row_tiles.cuh"

namespace dskc {

enum LnResidual { kLnNoResidual = 0, kLnAddToDy = 1, kLnAddToDx = 2 };

struct LayerNormBwdParams {
  const T* dy;        // [rows, kCols]
  const T* residual;  // [rows, kCols] added to dy or dx (per LnResidual), else unused
  const T* xy;        // [rows, kCols] LayerNorm input x, or output y when invertible
  const T* gamma;     // [kCols]
  const T* beta;      // [kCols]
  const float* mean;  // [rows] (unused when invertible)
  const float* rstd;  // [rows]
  T* dx;              // [rows, kCols] (may alias dy)
  float* part;        // [grad_parts(rows), 2, kCols]: dgamma then dbeta partials
  int rows;
  T* dx_drop;         // [rows, kCols] dropout backward of dx (kDropOut only; may alias residual)
  DropoutArgs rng;    // (kDropOut only)
};

// Rows run one after another in a block (the partials stay in registers), so each row's loads
// would wait behind the previous row's reduction and stores: instead, while a row is reduced, the
// next row's dy, x/y (and residual) are already on their way into shared memory (cp.async, two
// buffers; each thread reads back only its own vectors) and its mean / rstd into registers.
// Where a vector is not 4, 8 or 16 bytes, or the two buffers would pass 24 KB, rows load directly.
template <int kCols, bool kInvertible, int kResidual, bool kDropOut = false, uint32_t kDropStream = 0>
__device__ __forceinline__ void layernorm_bwd_impl(const LayerNormBwdParams& p) {
  using R = RowTile<kCols>;
  constexpr int kV = R::kV, kPer = R::kPer, kThreads = R::kThreads;
  constexpr int kBytes = kV * static_cast<int>(sizeof(T));
  constexpr int kIn = kResidual == kLnNoResidual ? 2 : 3;  // dy, x/y (, residual)
  constexpr bool kStage = (kBytes == 4 || kBytes == 8 || kBytes == 16) && 2 * kIn * kPer * kThreads * kBytes <= 24576;
  using V = Vec<T, kV>;
  __shared__ V stage[kStage ? 2 : 1][kIn][kPer][kStage ? kThreads : 1];
  __shared__ float2 scratch[kThreads / 32];
  float gam[kPer][kV], bet[kPer][kV], dg[kPer][kV], db[kPer][kV];
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const int c = R::col(k);
#pragma unroll
    for (int i = 0; i < kV; ++i) dg[k][i] = db[k][i] = 0.f;
    if (c < kCols) {
      load_f<T, kV>(p.gamma + c, gam[k]);
      if constexpr (kInvertible) load_f<T, kV>(p.beta + c, bet[k]);
    }
  }
  const int row0 = blockIdx.x * kGradRowsPerBlock;
  const int row_end = min(row0 + kGradRowsPerBlock, p.rows);
  // The row's input `which` (0 dy, 1 x/y, 2 residual) at column c, from the stage or memory.
  const T* const src[3] = {p.dy, p.xy, p.residual};
  auto stage_row = [&](int row, int buf) {
    const size_t base = static_cast<size_t>(row) * kCols;
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int c = R::col(k);
      if (c < kCols)
#pragma unroll
        for (int w = 0; w < kIn; ++w) cp_async<kBytes>(&stage[buf][w][k][threadIdx.x], src[w] + base + c);
    }
    cp_async_commit();
  };
  auto input = [&](int buf, int which, int k, size_t base, int c, float (&out)[kV]) {
    if constexpr (kStage) {
      const V v = stage[buf][which][k][threadIdx.x];
#pragma unroll
      for (int i = 0; i < kV; ++i) out[i] = to_f(v.v[i]);
    } else {
      load_f<T, kV>(src[which] + base + c, out);
    }
  };
  if (row0 >= row_end) return;
  if constexpr (kStage) stage_row(row0, 0);
  float rstd_next = p.rstd[row0], mean_next = 0.f;
  if constexpr (!kInvertible) mean_next = p.mean[row0];
  for (int row = row0, it = 0; row < row_end; ++row, ++it) {
    const int buf = it & 1;
    const size_t base = static_cast<size_t>(row) * kCols;
    const float rstd = rstd_next, mean = mean_next;
    if (row + 1 < row_end) {
      rstd_next = p.rstd[row + 1];
      if constexpr (!kInvertible) mean_next = p.mean[row + 1];
    }
    if constexpr (kStage) {
      if (row + 1 < row_end) {
        stage_row(row + 1, buf ^ 1);
        cp_async_wait<1>();
      } else {
        cp_async_wait<0>();
      }
    }
    float dy[kPer][kV], xh[kPer][kV];
    float s1 = 0.f, s2 = 0.f;
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int c = R::col(k);
      if (c < kCols) {
        input(buf, 0, k, base, c, dy[k]);
        if constexpr (kResidual == kLnAddToDy) {
          float r[kV];
          input(buf, 2, k, base, c, r);
#pragma unroll
          for (int i = 0; i < kV; ++i) dy[k][i] += r[i];
        }
        input(buf, 1, k, base, c, xh[k]);
#pragma unroll
        for (int i = 0; i < kV; ++i) {
          if constexpr (kInvertible) {
            xh[k][i] = (xh[k][i] - bet[k][i]) / gam[k][i];
          } else {
            xh[k][i] = (xh[k][i] - mean) * rstd;
          }
          const float g = dy[k][i] * gam[k][i];
          s1 += g;
          s2 += g * xh[k][i];
          dg[k][i] += dy[k][i] * xh[k][i];
          db[k][i] += dy[k][i];
        }
      }
    }
    const float2 sums = block_sum2<kThreads>(s1, s2, scratch);
    const float mg = sums.x * (1.f / kCols), mgx = sums.y * (1.f / kCols);
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int c = R::col(k);
      if (c < kCols) {
        float dx[kV];
#pragma unroll
        for (int i = 0; i < kV; ++i) dx[i] = rstd * (dy[k][i] * gam[k][i] - mg - xh[k][i] * mgx);
        if constexpr (kResidual == kLnAddToDx) {
          float r[kV];
          input(buf, 2, k, base, c, r);
#pragma unroll
          for (int i = 0; i < kV; ++i) dx[i] += r[i];
        }
        store_f<T, kV>(p.dx + base + c, dx);
        if constexpr (kDropOut) {
          bool keep[kV];
          dropout_keep_n<kV>(p.rng, kDropStream, base + c, kHiddenDropoutThreshold, keep);
#pragma unroll
          for (int i = 0; i < kV; ++i) dx[i] = keep[i] ? round_to<T>(dx[i]) * kHiddenDropoutScale : 0.f;
          store_f<T, kV>(p.dx_drop + base + c, dx);
        }
      }
    }
  }
  float* part = p.part + static_cast<size_t>(blockIdx.x) * 2 * kCols;
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const int c = R::col(k);
    if (c < kCols) {
#pragma unroll
      for (int i = 0; i < kV; ++i) {
        part[c + i] = dg[k][i];
        part[kCols + c + i] = db[k][i];
      }
    }
  }
}

}  // namespace dskc
