// Dropout masks for N consecutive elements starting at any element index, from the shared
// Philox keep rule (common/philox.cuh). Reuses one Philox call per group of eight indices.
#pragma once
#include "common/philox.cuh"

namespace dskc {

struct DropoutArgs {
  unsigned long long seed;
  unsigned int layer;
  unsigned int step;
};

template <int N>
__device__ __forceinline__ void dropout_keep_n(DropoutArgs a, uint32_t stream, uint64_t first,
                                               uint32_t threshold, bool (&keep)[N]) {
  const dskc_rng::DropoutKey key{a.seed, a.layer, a.step};
  uint64_t group = first >> 3;
  dskc_rng::U32x4 d = dskc_rng::dropout_draws(key, stream, group);
#pragma unroll
  for (int i = 0; i < N; ++i) {
    const uint64_t idx = first + i;
    if ((idx >> 3) != group) {
      group = idx >> 3;
      d = dskc_rng::dropout_draws(key, stream, group);
    }
    keep[i] = dskc_rng::select_draw(d, static_cast<int>(idx & 7)) >= threshold;
  }
}

}  // namespace dskc
