// Helpers of the model-level kernels (templates/model/*.cuh: embeddings, heads, gradient
// accumulation, optimizer). Invariants: every model kernel runs blocks of kModelThreads
// threads; block reductions combine in a fixed order (bitwise reproducible run to run); an
// fp32 gradient accumulator is rounded to the storage type T after every add (acc_add), so
// fp16 accumulators overflow to inf exactly where the CPU backend's do.
#pragma once
#include "dskc_config.cuh"
#include "common/reduce.cuh"
#include "common/types.cuh"

namespace dskc {

constexpr int kModelThreads = 256;

template <typename V>
__device__ __forceinline__ V model_warp_sum(V v) {
  return warp_sum(v);
}

// Sum / max over the block (kModelThreads threads); every thread receives the result.
template <typename V>
__device__ __forceinline__ V model_block_sum(V v) {
  return block_sum_shared<kModelThreads>(v);
}

__device__ __forceinline__ float model_block_max(float v) { return block_max_shared<kModelThreads>(v); }

// A T value as an fp32 accumulator holds it after adding it onto a zeroed one: 0 + g, so −0
// becomes +0 (model_accumulate_first writes this; adam_multi reads pending layer gradients so; the
// head gradient scatter starts a row from it).
__device__ __forceinline__ float onto_zero(T g) { return 0.f + to_f(g); }

// fp32 gradient accumulator += v, rounded to the storage type (the CPU backend's add_grad).
__device__ __forceinline__ void acc_add(float* dst, float v) { *dst = round_to<T>(*dst + v); }

}  // namespace dskc
