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
#include "layernorm_fwd.cuh"  // LayerNormShape

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

// Stores kV elements of dx at element e and, with kDropOut, the gradient through the dropout
// before the LayerNorm: dx_drop = Z·round(dx)/(1−p), Z regenerated from stream kDropStream.
template <int kV, bool kDropOut, uint32_t kDropStream>
__device__ __forceinline__ void store_dx(const LayerNormBwdParams& p, size_t e, float (&dx)[kV]) {
  store_f<T, kV>(p.dx + e, dx);
  if constexpr (kDropOut) {
    bool keep[kV];
    dropout_keep_vec<kV>(p.rng, kDropStream, e, kHiddenDropoutThreshold, keep);
#pragma unroll
    for (int i = 0; i < kV; ++i) dx[i] = keep[i] ? round_to<T>(dx[i]) * kHiddenDropoutScale : 0.f;
    store_f<T, kV>(p.dx_drop + e, dx);
  }
}

// dst[0..N) = v (first) or += v, in 16-byte pieces where N allows.
template <int N>
__device__ __forceinline__ void acc_add(float* dst, const float (&v)[N], bool first) {
  if constexpr (N % 4 == 0) {
#pragma unroll
    for (int i = 0; i < N; i += 4) {
      float4* d = reinterpret_cast<float4*>(dst + i);
      float4 a = make_float4(v[i], v[i + 1], v[i + 2], v[i + 3]);
      if (!first) {
        const float4 o = *d;
        a = make_float4(o.x + a.x, o.y + a.y, o.z + a.z, o.w + a.w);
      }
      *d = a;
    }
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) dst[i] = first ? v[i] : dst[i] + v[i];
  }
}

// Threads of a layernorm_bwd block. Rows of at most 128 vectors (LayerNormShape's warp rows) with
// kLnBwdWarpRows: four warps, two rows each (the block's kGradRowsPerBlock rows, so the partials
// and param_grad_reduce are the same); else RowTile's block per row.
template <int kCols>
struct LayerNormBwdShape {
  static constexpr bool kWarpRows = kLnBwdWarpRows && LayerNormShape<kCols>::kWarpRows;
  static constexpr int kWarps = 4;
  static constexpr int kThreads = kWarpRows ? 32 * kWarps : RowTile<kCols>::kThreads;
};

// A row per warp: each lane holds kPer 16-byte vectors of the row's dy, x/y (and residual), all
// loaded at once and kept packed until used; the two row sums are warp shuffles (no block barrier
// per row). dgamma / dbeta: each warp adds its rows' dy·x̂ and dy into its own slice of shared
// memory, then the block sums the four slices in a fixed order into its partial row (deterministic,
// like the block-per-row form, but not bitwise equal to it: the sums are grouped differently).
template <int kCols, bool kInvertible, int kResidual, bool kDropOut, uint32_t kDropStream>
__device__ __forceinline__ void layernorm_bwd_warp_rows(const LayerNormBwdParams& p) {
  const int block = blockIdx.x;
  using S = LayerNormShape<kCols>;
  using B = LayerNormBwdShape<kCols>;
  constexpr int kV = S::kV, kPer = S::kPer, kWarps = B::kWarps;
  constexpr int kRowsPerWarp = kGradRowsPerBlock / kWarps;
  static_assert(kGradRowsPerBlock % kWarps == 0, "whole rows per warp");
  using V = Vec<T, kV>;
  __shared__ alignas(16) float acc[kWarps][2][kCols];  // per warp: dgamma, dbeta over its rows
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  auto col = [&](int k) { return (lane + k * 32) * kV; };
  V gam[kPer], bet[kPer];
#pragma unroll
  for (int k = 0; k < kPer; ++k)
    if (col(k) < kCols) {
      gam[k] = *reinterpret_cast<const V*>(p.gamma + col(k));
      if constexpr (kInvertible) bet[k] = *reinterpret_cast<const V*>(p.beta + col(k));
    }
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int row = block * kGradRowsPerBlock + warp * kRowsPerWarp + r;
    if (row >= p.rows) {  // past the last row: the slice still needs zeros
      if (r == 0)
#pragma unroll
        for (int k = 0; k < kPer; ++k)
          if (col(k) < kCols)
#pragma unroll
            for (int i = 0; i < kV; ++i) acc[warp][0][col(k) + i] = acc[warp][1][col(k) + i] = 0.f;
      continue;
    }
    const size_t base = static_cast<size_t>(row) * kCols;
    V dyv[kPer], xv[kPer], rv[kPer];
#pragma unroll
    for (int k = 0; k < kPer; ++k)
      if (col(k) < kCols) {
        dyv[k] = *reinterpret_cast<const V*>(p.dy + base + col(k));
        xv[k] = *reinterpret_cast<const V*>(p.xy + base + col(k));
        if constexpr (kResidual != kLnNoResidual) rv[k] = *reinterpret_cast<const V*>(p.residual + base + col(k));
      }
    const float rstd = p.rstd[row];
    float mean = 0.f;
    if constexpr (!kInvertible) mean = p.mean[row];
    // dy (with a kLnAddToDy residual) and x̂ of element i of vector k.
    auto dy_at = [&](int k, int i) {
      float d = to_f(dyv[k].v[i]);
      if constexpr (kResidual == kLnAddToDy) d += to_f(rv[k].v[i]);
      return d;
    };
    auto xh_at = [&](int k, int i) {
      if constexpr (kInvertible) return (to_f(xv[k].v[i]) - to_f(bet[k].v[i])) / to_f(gam[k].v[i]);
      else return (to_f(xv[k].v[i]) - mean) * rstd;
    };
    float s1 = 0.f, s2 = 0.f;
#pragma unroll
    for (int k = 0; k < kPer; ++k)
      if (col(k) < kCols) {
        float pg[kV], dd[kV];
#pragma unroll
        for (int i = 0; i < kV; ++i) {
          dd[i] = dy_at(k, i);
          const float xh = xh_at(k, i), g = dd[i] * to_f(gam[k].v[i]);
          s1 += g;
          s2 += g * xh;
          pg[i] = dd[i] * xh;
        }
        acc_add<kV>(&acc[warp][0][col(k)], pg, r == 0);
        acc_add<kV>(&acc[warp][1][col(k)], dd, r == 0);
      }
    s1 = warp_sum(s1);
    s2 = warp_sum(s2);
    const float mg = s1 * (1.f / kCols), mgx = s2 * (1.f / kCols);
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int c = col(k);
      if (c < kCols) {
        float dx[kV];
#pragma unroll
        for (int i = 0; i < kV; ++i) {
          dx[i] = rstd * (dy_at(k, i) * to_f(gam[k].v[i]) - mg - xh_at(k, i) * mgx);
          if constexpr (kResidual == kLnAddToDx) dx[i] += to_f(rv[k].v[i]);
        }
        store_dx<kV, kDropOut, kDropStream>(p, base + c, dx);
      }
    }
  }
  __syncthreads();
  float* part = p.part + static_cast<size_t>(block) * 2 * kCols;
  // dgamma then dbeta columns, four at a time where the row width allows (16-byte aligned).
  constexpr int kStep = kCols % 4 == 0 ? 4 : 1;
  using F = Vec<float, kStep>;
  for (int c = kStep * threadIdx.x; c < 2 * kCols; c += kStep * B::kThreads) {
    const float* a = &acc[0][0][0] + c;
    F v = *reinterpret_cast<const F*>(a);
#pragma unroll
    for (int w = 1; w < kWarps; ++w) {
      const F o = *reinterpret_cast<const F*>(a + w * 2 * kCols);
#pragma unroll
      for (int i = 0; i < kStep; ++i) v.v[i] += o.v[i];
    }
    *reinterpret_cast<F*>(part + c) = v;
  }
}

template <int kCols, bool kInvertible, int kResidual, bool kDropOut, uint32_t kDropStream>
__device__ __forceinline__ void layernorm_bwd_block_rows(const LayerNormBwdParams& p) {
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
        store_dx<kV, kDropOut, kDropStream>(p, base + c, dx);
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

template <int kCols, bool kInvertible, int kResidual, bool kDropOut = false, uint32_t kDropStream = 0>
__device__ __forceinline__ void layernorm_bwd_impl(const LayerNormBwdParams& p) {
  if constexpr (LayerNormBwdShape<kCols>::kWarpRows)
    layernorm_bwd_warp_rows<kCols, kInvertible, kResidual, kDropOut, kDropStream>(p);
  else
    layernorm_bwd_block_rows<kCols, kInvertible, kResidual, kDropOut, kDropStream>(p);
}

}  // namespace dskc
