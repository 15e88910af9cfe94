// layernorm_bwd: dx = rstd·(g − mean(g) − x̂·mean(g·x̂)), g = dy·gamma, for rows of kCols, plus
// partial dgamma = Σ dy·x̂ and dbeta = Σ dy per block (param_grad_reduce finishes them).
// x̂ comes from the saved input and mean/rstd, or — with normalize_invertible — from the saved
// output: x̂ = (y − beta)/gamma. The residual variant adds a gradient to dy before (Post-LN)
// or to dx after (Pre-LN) so the residual branch costs no extra pass.
#pragma once
#include "dskc_config.cuh"
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
};

template <int kCols, bool kInvertible, int kResidual>
__device__ __forceinline__ void layernorm_bwd_impl(const LayerNormBwdParams& p) {
  using R = RowTile<kCols>;
  constexpr int kV = R::kV, kPer = R::kPer, kThreads = R::kThreads;
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
  for (int row = row0; row < row_end; ++row) {
    const size_t base = static_cast<size_t>(row) * kCols;
    const float rstd = p.rstd[row];
    float mean = 0.f;
    if constexpr (!kInvertible) mean = p.mean[row];
    float dy[kPer][kV], xh[kPer][kV];
    float s1 = 0.f, s2 = 0.f;
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int c = R::col(k);
      if (c < kCols) {
        load_f<T, kV>(p.dy + base + c, dy[k]);
        if constexpr (kResidual == kLnAddToDy) {
          float r[kV];
          load_f<T, kV>(p.residual + base + c, r);
#pragma unroll
          for (int i = 0; i < kV; ++i) dy[k][i] += r[i];
        }
        load_f<T, kV>(p.xy + base + c, xh[k]);
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
          load_f<T, kV>(p.residual + base + c, r);
#pragma unroll
          for (int i = 0; i < kV; ++i) dx[i] += r[i];
        }
        store_f<T, kV>(p.dx + base + c, dx);
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
