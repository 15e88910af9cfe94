// Loss scaling for fp16 training, with DeepSpeed's DynamicLossScaler semantics.
//
// fp16 with "loss_scale": 0 (the default) is dynamic: the scale starts at
// 2^initial_scale_power (default 16). Each step reports whether its gradients overflowed
// (inf/NaN). On overflow the step is skipped (no update) and, once `hysteresis` overflows
// have been absorbed (DeepSpeed's delayed shift; default 2, so 1 halves at the first
// overflow), the scale halves, never below min_loss_scale (default 1). After
// loss_scale_window (default 1000) consecutive steps without overflow it doubles:
// precisely, with iterations counted from 0 and the last overflow's iteration (−1 before
// any), a good iteration i doubles it when (i − last_overflow) % window == 0. As in
// DeepSpeed (consecutive_hysteresis false), the hysteresis budget refills only when the scale
// doubles.
// A non-zero "loss_scale" is static: that scale always, and an overflowing step is still
// skipped. bf16 and fp32 use no scaling (scale 1); a non-finite step is skipped too, so a
// single bad batch cannot poison the weights.
// The whole state is four numbers (state()/set_state()), saved in checkpoints.
#pragma once
#include <cstdint>

namespace dskc {

struct LossScalerConfig {
  bool enabled = false;        // fp16
  double static_scale = 0.0;   // 0: dynamic
  int initial_scale_power = 16;
  int64_t loss_scale_window = 1000;
  int hysteresis = 2;
  double min_loss_scale = 1.0;
  bool dynamic() const { return enabled && static_scale == 0.0; }
};

struct LossScalerState {
  double scale = 1.0;
  int64_t iteration = 0;
  int64_t last_overflow_iteration = -1;
  int hysteresis_left = 2;
  bool operator==(const LossScalerState&) const = default;
};

class LossScaler {
 public:
  explicit LossScaler(const LossScalerConfig& c);
  double scale() const { return state_.scale; }
  // Records one step's outcome and adjusts the scale; returns true when that step must be
  // skipped (its gradients overflowed).
  bool update(bool overflow);
  const LossScalerState& state() const { return state_; }
  void set_state(const LossScalerState& s) { state_ = s; }
  const LossScalerConfig& config() const { return cfg_; }

 private:
  LossScalerConfig cfg_;
  LossScalerState state_;
};

}  // namespace dskc
