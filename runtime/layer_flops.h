// FLOP count of one layer (2 FLOPs per multiply-add): the four linear layers and the two
// attention products; backward counts twice forward (SPEC / issue: dskc bench).
#pragma once
#include "compiler/config.h"

namespace dskc {
inline double layer_forward_flops(const LayerConfig& c, int batch, int seq) {
  const double t = static_cast<double>(batch) * seq, H = c.hidden_size, I = c.intermediate_size;
  const double linear = 2.0 * t * (H * 3 * H + H * H + 2 * H * I);
  const double attention = 2.0 * 2.0 * batch * static_cast<double>(seq) * seq * H;  // Q·Kᵀ and P·V over all heads
  return linear + attention;
}
}  // namespace dskc
