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

// Asynchronous global -> shared copies (cp.async, sm_80+) of kBytes = 4, 8 or 16 per thread, for
// kernels that stage the next row while they reduce the current one. Each thread reads back only
// what it copied itself, so cp_async_wait<N>() (at most N groups still pending) is all the
// synchronization it needs.
template <int kBytes>
__device__ __forceinline__ void cp_async(void* smem, const void* gmem) {
  static_assert(kBytes == 4 || kBytes == 8 || kBytes == 16, "cp.async copies 4, 8 or 16 bytes");
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  if constexpr (kBytes == 16)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(gmem) : "memory");
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(dst), "l"(gmem), "n"(kBytes) : "memory");
}
// 16 bytes, or (valid false) 16 zero bytes: cp.async's source size 0 reads nothing from gmem, which
// must still be a valid address (callers pass a row inside the tensor).
__device__ __forceinline__ void cp_async_zfill16(void* smem, const void* gmem, bool valid) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem), "r"(valid ? 16 : 0)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// Number of partial rows a row-tiled kernel writes for `rows` input rows.
__host__ __device__ constexpr int grad_parts(int rows) {
  return (rows + kGradRowsPerBlock - 1) / kGradRowsPerBlock;
}

}  // namespace dskc
