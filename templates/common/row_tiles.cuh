// Row tiles for backward kernels that also produce per-column (bias / LayerNorm parameter)
// gradient partial sums: a block owns kGradRowsPerBlock consecutive rows, its threads cover the
// kCols columns in vectors, and each thread keeps its columns' sums in registers. Partials go
// to part[blockIdx.x, kCols] (float) and param_grad_reduce sums them in a fixed order, so the
// result is bitwise reproducible run to run.
#pragma once
#include "dskc_config.cuh"
#include "common/types.cuh"

namespace dskc {

constexpr int kGradRowsPerBlock = 8;

template <int kCols>
struct RowTile {
  static constexpr int kV = VecWidth<T, kCols>::value;
  static constexpr int kThreads = RowThreads<kCols / kV>::value;
  static constexpr int kPer = RowThreads<kCols / kV>::kPerThread;
  __device__ static int col(int k) { return (threadIdx.x + k * kThreads) * kV; }
};

// Number of partial rows a row-tiled kernel writes for `rows` input rows.
__host__ __device__ constexpr int grad_parts(int rows) {
  return (rows + kGradRowsPerBlock - 1) / kGradRowsPerBlock;
}

}  // namespace dskc
