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

// The same flags for a vector that lies inside one group of eight indices: kV divides 8 and
// `first` is a multiple of kV (every 16-byte vector of a row-major [rows, cols] tensor whose
// cols are a multiple of kV: the hidden-dropout kernels). One Philox call, no branches: the general
// form above cannot know that the group stays the same and keeps a conditional Philox call per
// element, which the compiler expands into kV copies (layernorm_bwd_attn had 27 in its PTX).
template <int kV>
__device__ __forceinline__ void dropout_keep_vec(DropoutArgs a, uint32_t stream, uint64_t first, uint32_t threshold,
                                                 bool (&keep)[kV]) {
  static_assert(8 % kV == 0, "a vector inside one group of eight draws");
  const dskc_rng::DropoutKey key{a.seed, a.layer, a.step};
  const dskc_rng::U32x4 d = dskc_rng::dropout_draws(key, stream, first >> 3);
  const int lead = static_cast<int>(first & 7);  // a multiple of kV
#pragma unroll
  for (int i = 0; i < kV; ++i) {
    // draw lead + i of the group, without a dynamic index: lead is a multiple of kV
    uint32_t w;
    if constexpr (kV == 8) {
      w = dskc_rng::select_draw(d, i);
    } else {
      w = dskc_rng::select_draw(d, (lead + i) & 7);
    }
    keep[i] = w >= threshold;
  }
}

}  // namespace dskc
