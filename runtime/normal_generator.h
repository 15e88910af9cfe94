// Standard normal draws from mt19937_64 via Box-Muller (both outputs used): the same values on
// every platform, so parameter initialization is reproducible everywhere. Shared by the layer
// init (runtime/layer_params.cpp) and the BERT model init (trainer/bert_model.cpp).
#pragma once
#include <cmath>
#include <cstdint>
#include <numbers>
#include <random>

namespace dskc {

class NormalGenerator {
 public:
  explicit NormalGenerator(uint64_t seed) : rng_(seed) {}
  double next() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    // u1 in (0, 1], u2 in [0, 1), each from the top 53 bits of one draw.
    const double u1 = (static_cast<double>(rng_() >> 11) + 1.0) * 0x1.0p-53;
    const double u2 = static_cast<double>(rng_() >> 11) * 0x1.0p-53;
    const double r = std::sqrt(-2.0 * std::log(u1));
    const double theta = 2.0 * std::numbers::pi * u2;
    spare_ = r * std::sin(theta);
    has_spare_ = true;
    return r * std::cos(theta);
  }

 private:
  std::mt19937_64 rng_;
  double spare_ = 0.0;
  bool has_spare_ = false;
};

}  // namespace dskc
