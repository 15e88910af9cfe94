// Helpers of the model-level kernels (templates/model/*.cuh: embeddings, heads, gradient
// accumulation, optimizer). Invariants: every model kernel runs blocks of kModelThreads
// threads; block reductions combine in a fixed order (bitwise reproducible run to run); an
// fp32 gradient accumulator is rounded to the storage type T after every add (acc_add), so
// fp16 accumulators overflow to inf exactly where the CPU backend's do.
#pragma once
#include "dskc_config.cuh"
#include "common/types.cuh"

namespace dskc {

constexpr int kModelThreads = 256;

template <typename V>
__device__ __forceinline__ V model_warp_sum(V v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Sum over the block (kModelThreads threads); every thread receives the result.
template <typename V>
__device__ __forceinline__ V model_block_sum(V v) {
  __shared__ V scratch[kModelThreads / 32];
  v = model_warp_sum(v);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < kModelThreads / 32 ? scratch[lane] : V(0);
  return model_warp_sum(v);
}

__device__ __forceinline__ float model_block_max(float v) {
  __shared__ float scratch[kModelThreads / 32];
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < kModelThreads / 32 ? scratch[lane] : neg_inf();
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// fp32 gradient accumulator += v, rounded to the storage type (the CPU backend's add_grad).
__device__ __forceinline__ void acc_add(float* dst, float v) { *dst = round_to<T>(*dst + v); }

}  // namespace dskc
