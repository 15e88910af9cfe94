// plain/util: helpers of the plain (unfused, PyTorch-style) layer's kernels (runtime/plain_layer.h,
// compiler/plain_codegen.h). Every plain kernel runs blocks of kPlainThreads threads; block
// reductions combine in a fixed order, so results are bitwise reproducible run to run.
#pragma once
#include "dskc_config.cuh"
#include "common/reduce.cuh"
#include "common/types.cuh"

namespace dskc {

constexpr int kPlainThreads = 256;

__device__ __forceinline__ float plain_warp_sum(float v) { return warp_sum(v); }

// Sum / max over the block (kPlainThreads threads); every thread receives the result.
__device__ __forceinline__ float plain_block_sum(float v) { return block_sum_shared<kPlainThreads>(v); }
__device__ __forceinline__ float plain_block_max(float v) { return block_max_shared<kPlainThreads>(v); }

// Column sums of one or two [rows, cols] quantities, in a fixed order: a block owns 32 columns;
// its 8 warps each sum every 8th row, then warp 0 adds the 8 partials in order.
// f(row, col, &a, &b) adds the row's contributions to a and b.
template <typename F>
__device__ __forceinline__ void plain_column_sums(int rows, int cols, F f, float* out_a, float* out_b) {
  __shared__ float pa[kPlainThreads / 32][32], pb[kPlainThreads / 32][32];
  const int lane = threadIdx.x % 32, slice = threadIdx.x / 32;
  const int c = blockIdx.x * 32 + lane;
  float a = 0.f, b = 0.f;
  if (c < cols)
    for (int r = slice; r < rows; r += kPlainThreads / 32) f(r, c, a, b);
  pa[slice][lane] = a;
  pb[slice][lane] = b;
  __syncthreads();
  if (slice == 0) {
    float sa = 0.f, sb = 0.f;
#pragma unroll
    for (int i = 0; i < kPlainThreads / 32; ++i) {
      sa += pa[i][lane];
      sb += pb[i][lane];
    }
    *out_a = sa;
    *out_b = sb;
  }
}

}  // namespace dskc

#define DSKC_PLAIN_STRIDE(i, n)                                                                       \
  for (unsigned long long i = blockIdx.x * static_cast<unsigned long long>(kPlainThreads) + threadIdx.x; \
       i < (n); i += static_cast<unsigned long long>(gridDim.x) * kPlainThreads)
