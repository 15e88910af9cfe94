// Row geometry of the attention score tensors: [batch*heads*seq, seq_pad] with seq_pad a
// multiple of kSeqPad (rows start 16-byte aligned). A warp owns kRowsPerWarp rows of `seq`
// valid columns, its lanes holding kV-element vectors, kIters vectors per lane; the vector is
// as narrow as keeps all 32 lanes busy on short rows, and short rows come two per warp so
// each warp has two independent loads in flight. Columns >= seq are padding, never read by
// the GEMMs.
#pragma once
#include "dskc_config.cuh"
#include "common/types.cuh"

namespace dskc {

struct AttnRows {
  static constexpr int kMaxV = VecWidth<T, kSeqPad>::value;
  static constexpr int kV = kMaxSeq >= 32 * kMaxV ? kMaxV
                            : (kMaxSeq >= 128 && kMaxV >= 4) ? 4
                            : (kMaxSeq >= 64 && kMaxV >= 2) ? 2 : 1;
  static constexpr int kIters = (kMaxSeq + 32 * kV - 1) / (32 * kV);
  static constexpr int kRowsPerWarp = kIters == 1 ? 2 : 1;
  static constexpr int kWarps = 4;
  static constexpr int kRowsPerBlock = kWarps * kRowsPerWarp;
  __device__ static int first_row() { return (blockIdx.x * kWarps + threadIdx.x / 32) * kRowsPerWarp; }
  __device__ static int col(int k) { return (k * 32 + threadIdx.x % 32) * kV; }
};

}  // namespace dskc
