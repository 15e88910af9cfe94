// param_grad_reduce: sums float partials [parts, kArrays, kCols] over parts, in a fixed order,
// into kArrays parameter gradients of kCols elements (bias grads: 1 array; LayerNorm: gamma and
// beta). A block owns tiles of kTileCols = 16 columns of one array (grid-stride over the tiles,
// so any grid.x is correct; the runtime launches one block per tile): its 256 threads cover the
// tile with 16-byte loads where kCols % 4 == 0 (4 threads across, 64 partial rows at a time) or
// 4-byte loads otherwise (16 across, 16 rows), keep four loads in flight, and the per-thread sums
// are combined through shared memory by one thread per column in thread order. Every order is
// fixed by the thread mapping alone, so the result is bitwise reproducible run to run. (The
// earlier 32-column tiles with one load in flight per thread left BERT-Large's LayerNorm reduction
// at 64 blocks, latency-bound: ~0.02 ms for 8 MiB of partials.)
#pragma once
#include "dskc_config.cuh"
#include "common/types.cuh"

namespace dskc {

struct ParamGradReduceParams {
  const float* part;  // [parts, kArrays, kCols]
  T* out0;            // [kCols] first array's gradient
  T* out1;            // [kCols] second array's gradient (kArrays == 2)
  int parts;
};

struct ParamGradReduceTile {
  static constexpr int kThreads = 256;
  static constexpr int kTileCols = 16;
};

template <int kCols, int kArrays>
__device__ __forceinline__ void param_grad_reduce_impl(const ParamGradReduceParams& p) {
  using G = ParamGradReduceTile;
  constexpr int kV = kCols % 4 == 0 ? 4 : 1;  // floats per load
  constexpr int kLanes = G::kTileCols / kV;   // threads across a tile
  constexpr int kPar = G::kThreads / kLanes;  // partial rows read at a time
  constexpr size_t kStride = static_cast<size_t>(kArrays) * kCols;  // floats between partial rows
  __shared__ float acc[kPar][G::kTileCols + 1];
  const int tx = threadIdx.x % kLanes, ty = threadIdx.x / kLanes;
  const int array = blockIdx.y;
  for (int tile = blockIdx.x; tile * G::kTileCols < kCols; tile += gridDim.x) {
    const int col = tile * G::kTileCols + tx * kV;  // kV == 4: kCols % 4 == 0, so col + 3 < kCols too
    float s[kV];
#pragma unroll
    for (int v = 0; v < kV; ++v) s[v] = 0.f;
    if (col < kCols) {
      const float* src = p.part + static_cast<size_t>(array) * kCols + col;
      auto add = [&](int i) {
        float x[kV];
        load_f<float, kV>(src + static_cast<size_t>(i) * kStride, x);
#pragma unroll
        for (int v = 0; v < kV; ++v) s[v] += x[v];
      };
      int i = ty;
      for (; i + 3 * kPar < p.parts; i += 4 * kPar) {
        float x[4][kV];
#pragma unroll
        for (int u = 0; u < 4; ++u) load_f<float, kV>(src + static_cast<size_t>(i + u * kPar) * kStride, x[u]);
#pragma unroll
        for (int u = 0; u < 4; ++u)
#pragma unroll
          for (int v = 0; v < kV; ++v) s[v] += x[u][v];
      }
      for (; i < p.parts; i += kPar) add(i);
    }
#pragma unroll
    for (int v = 0; v < kV; ++v) acc[ty][tx * kV + v] = s[v];
    __syncthreads();
    const int c = tile * G::kTileCols + threadIdx.x;
    if (threadIdx.x < G::kTileCols && c < kCols) {
      float t = 0.f;
      for (int j = 0; j < kPar; ++j) t += acc[j][threadIdx.x];
      T* out = array == 0 ? p.out0 : p.out1;
      out[c] = from_f<T>(t);
    }
    __syncthreads();
  }
}

}  // namespace dskc
