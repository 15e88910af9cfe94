// Dynamic / static loss scaling (semantics in loss_scaler.h; DeepSpeed's
// runtime/fp16/loss_scaler.py DynamicLossScaler.update_scale).
#include "trainer/loss_scaler.h"

#include <algorithm>
#include <cmath>

namespace dskc {

LossScaler::LossScaler(const LossScalerConfig& c) : cfg_(c) {
  if (!c.enabled) {
    state_.scale = 1.0;
  } else if (c.static_scale != 0.0) {
    state_.scale = c.static_scale;
  } else {
    state_.scale = std::ldexp(1.0, c.initial_scale_power);
  }
  state_.hysteresis_left = std::max(1, c.hysteresis);
}

bool LossScaler::update(bool overflow) {
  if (cfg_.dynamic()) {
    const int64_t window = std::max<int64_t>(1, cfg_.loss_scale_window);
    if (overflow) {
      if (cfg_.hysteresis <= 1 || state_.hysteresis_left <= 1) {
        state_.scale = std::max(state_.scale / 2.0, cfg_.min_loss_scale);
      } else {
        state_.hysteresis_left -= 1;
      }
      state_.last_overflow_iteration = state_.iteration;
    } else if ((state_.iteration - state_.last_overflow_iteration) % window == 0) {
      state_.hysteresis_left = std::max(1, cfg_.hysteresis);
      state_.scale *= 2.0;
    }
  }
  state_.iteration += 1;
  return overflow;
}

}  // namespace dskc
