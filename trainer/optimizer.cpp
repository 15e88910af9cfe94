// Adam / AdamW / Lamb updates and clipping (formulas in optimizer.h).
#include "trainer/optimizer.h"

#include <cmath>
#include <vector>

namespace dskc {

const char* optimizer_name(OptimizerType t) {
  switch (t) {
    case OptimizerType::AdamW: return "AdamW";
    case OptimizerType::Lamb: return "Lamb";
    default: return "Adam";
  }
}

double clip_coefficient(double grad_norm, double max_grad_norm) {
  if (!(max_grad_norm > 0.0) || !std::isfinite(grad_norm)) return 1.0;
  const double clip = (grad_norm + 1e-6) / max_grad_norm;
  return clip > 1.0 ? 1.0 / clip : 1.0;
}

void optimizer_update(const OptimizerSettings& s, const UpdateArgs& a, bool decay, float* p, const float* g,
                      float* m, float* v, size_t n) {
  const double gmul = a.clip_coef / a.grad_scale;
  const double b1 = s.beta1, b2 = s.beta2;
  const double t = static_cast<double>(a.step);
  const double bc1 = s.bias_correction ? 1.0 - std::pow(b1, t) : 1.0;
  const double bc2 = s.bias_correction ? 1.0 - std::pow(b2, t) : 1.0;
  const double wd = decay ? s.weight_decay : 0.0;

  if (s.type == OptimizerType::Lamb) {
    std::vector<double> u(n);
    double w_sq = 0.0, u_sq = 0.0;
    for (size_t i = 0; i < n; ++i) {
      const double gi = g[i] * gmul;
      const double mi = b1 * m[i] + (1.0 - b1) * gi;
      const double vi = b2 * v[i] + (1.0 - b2) * gi * gi;
      m[i] = static_cast<float>(mi);
      v[i] = static_cast<float>(vi);
      u[i] = mi / (std::sqrt(vi) + s.eps) + wd * p[i];
      w_sq += static_cast<double>(p[i]) * p[i];
      u_sq += u[i] * u[i];
    }
    double trust = 1.0;
    if (w_sq != 0.0 && u_sq != 0.0) {
      trust = std::sqrt(w_sq) / std::sqrt(u_sq);
      if (trust > s.max_coeff) trust = s.max_coeff;
      if (trust < s.min_coeff) trust = s.min_coeff;
    }
    const double step_size = s.bias_correction ? a.lr * std::sqrt(bc2) / bc1 : a.lr;
    for (size_t i = 0; i < n; ++i) p[i] = static_cast<float>(p[i] - step_size * trust * u[i]);
    return;
  }

  const bool adamw = s.type == OptimizerType::AdamW || s.adam_w_mode;
  const double sqrt_bc2 = std::sqrt(bc2);
  for (size_t i = 0; i < n; ++i) {
    double gi = g[i] * gmul;
    if (!adamw) gi += wd * p[i];
    const double mi = b1 * m[i] + (1.0 - b1) * gi;
    const double vi = b2 * v[i] + (1.0 - b2) * gi * gi;
    m[i] = static_cast<float>(mi);
    v[i] = static_cast<float>(vi);
    double u = (mi / bc1) / (std::sqrt(vi) / sqrt_bc2 + s.eps);
    if (adamw) u += wd * p[i];
    p[i] = static_cast<float>(p[i] - a.lr * u);
  }
}

}  // namespace dskc
