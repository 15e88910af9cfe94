// Row geometry of the attention score tensors: [batch*heads*seq, seq_pad] with seq_pad a
// multiple of kSeqPad (so rows start 16-byte aligned), one warp per row of `seq` valid
// columns, kAttnRowsPerBlock rows per block. Columns >= seq are padding, never read by GEMMs.
#pragma once
#include "dskc_config.cuh"
#include "common/types.cuh"

namespace dskc {

constexpr int kAttnRowsPerBlock = 4;

struct AttnRows {
  static constexpr int kV = VecWidth<T, kSeqPad>::value;
  static constexpr int kIters = (kMaxSeq + 32 * kV - 1) / (32 * kV);
};

}  // namespace dskc
