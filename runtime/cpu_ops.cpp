// CPU building blocks (see cpu_ops.h).
#include "runtime/cpu_ops.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numbers>

namespace dskc::cpu_ops {
namespace {
constexpr int kRowBlock = 8;  // rows per block: each weight row is reused 8 times
constexpr double kGeluTanhC = 0.044715;
}  // namespace

void linear_forward(const double* x, const double* w, const double* b, int n, int in, int out, double* y) {
  std::vector<double> wt(static_cast<size_t>(in) * out);  // [in, out]: contiguous over outputs
  for (int o = 0; o < out; ++o)
    for (int i = 0; i < in; ++i) wt[static_cast<size_t>(i) * out + o] = w[static_cast<size_t>(o) * in + i];
  for (int r = 0; r < n; ++r) {
    double* yr = y + static_cast<size_t>(r) * out;
    if (b) {
      std::copy(b, b + out, yr);
    } else {
      std::fill(yr, yr + out, 0.0);
    }
  }
  for (int r0 = 0; r0 < n; r0 += kRowBlock) {
    const int r1 = std::min(n, r0 + kRowBlock);
    for (int i = 0; i < in; ++i) {
      const double* __restrict wr = &wt[static_cast<size_t>(i) * out];
      for (int r = r0; r < r1; ++r) {
        const double xv = x[static_cast<size_t>(r) * in + i];
        double* __restrict yr = y + static_cast<size_t>(r) * out;
        for (int o = 0; o < out; ++o) yr[o] += xv * wr[o];
      }
    }
  }
}

void linear_backward(const double* dy, const double* x, const double* w, int n, int in, int out, double* dx,
                     double* dw, double* db) {
  if (dx) std::fill(dx, dx + static_cast<size_t>(n) * in, 0.0);
  for (int r0 = 0; r0 < n; r0 += kRowBlock) {
    const int r1 = std::min(n, r0 + kRowBlock);
    for (int o = 0; o < out; ++o) {
      const double* __restrict wr = w + static_cast<size_t>(o) * in;
      double* __restrict dwr = dw + static_cast<size_t>(o) * in;
      for (int r = r0; r < r1; ++r) {
        const double g = dy[static_cast<size_t>(r) * out + o];
        if (g == 0.0) continue;
        const double* __restrict xr = x + static_cast<size_t>(r) * in;
        for (int i = 0; i < in; ++i) dwr[i] += g * xr[i];
        if (dx) {
          double* __restrict dxr = dx + static_cast<size_t>(r) * in;
          for (int i = 0; i < in; ++i) dxr[i] += g * wr[i];
        }
        if (db) db[o] += g;
      }
    }
  }
}

void layer_norm_forward(const double* x, const double* w, const double* b, int n, int h, double eps, double* y,
                        double* mean, double* rstd) {
  for (int r = 0; r < n; ++r) {
    const double* xr = x + static_cast<size_t>(r) * h;
    double mu = 0.0;
    for (int c = 0; c < h; ++c) mu += xr[c];
    mu /= h;
    double var = 0.0;
    for (int c = 0; c < h; ++c) var += (xr[c] - mu) * (xr[c] - mu);
    var /= h;
    const double rs = 1.0 / std::sqrt(var + eps);
    double* yr = y + static_cast<size_t>(r) * h;
    for (int c = 0; c < h; ++c) yr[c] = (xr[c] - mu) * rs * w[c] + b[c];
    mean[r] = mu;
    rstd[r] = rs;
  }
}

void layer_norm_backward(const double* dy, const double* x, const double* mean, const double* rstd, const double* w,
                         int n, int h, double* dx, double* dw, double* db) {
  std::vector<double> xhat(h), dxhat(h);
  for (int r = 0; r < n; ++r) {
    const double* xr = x + static_cast<size_t>(r) * h;
    const double* dyr = dy + static_cast<size_t>(r) * h;
    double sum_d = 0.0, sum_dx = 0.0;
    for (int c = 0; c < h; ++c) {
      xhat[c] = (xr[c] - mean[r]) * rstd[r];
      dxhat[c] = dyr[c] * w[c];
      dw[c] += dyr[c] * xhat[c];
      db[c] += dyr[c];
      sum_d += dxhat[c];
      sum_dx += dxhat[c] * xhat[c];
    }
    sum_d /= h;
    sum_dx /= h;
    double* dxr = dx + static_cast<size_t>(r) * h;
    for (int c = 0; c < h; ++c) dxr[c] = rstd[r] * (dxhat[c] - sum_d - xhat[c] * sum_dx);
  }
}

std::vector<uint8_t> dropout_keep_mask(const dskc_rng::DropoutKey& key, uint32_t stream, uint64_t count,
                                       double ratio) {
  std::vector<uint8_t> keep;
  if (ratio <= 0.0) return keep;
  keep.resize(count);
  const uint32_t threshold = dskc_rng::dropout_threshold(ratio);
  constexpr int kPer = dskc_rng::kDrawsPerCall;
  for (uint64_t g = 0; g * kPer < count; ++g) {
    const dskc_rng::U32x4 d = dskc_rng::dropout_draws(key, stream, g);
    for (int k = 0; k < kPer && g * kPer + k < count; ++k)
      keep[g * kPer + k] = dskc_rng::select_draw(d, k) >= threshold ? 1 : 0;
  }
  return keep;
}

double gelu(double x, GeluForm form) {
  if (form == GeluForm::Tanh) {
    const double k = std::sqrt(2.0 / std::numbers::pi);
    return 0.5 * x * (1.0 + std::tanh(k * (x + kGeluTanhC * x * x * x)));
  }
  return 0.5 * x * (1.0 + std::erf(x / std::numbers::sqrt2));
}

double gelu_grad(double x, GeluForm form) {
  if (form == GeluForm::Tanh) {
    const double k = std::sqrt(2.0 / std::numbers::pi);
    const double t = std::tanh(k * (x + kGeluTanhC * x * x * x));
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * k * (1.0 + 3.0 * kGeluTanhC * x * x);
  }
  const double pdf = std::exp(-0.5 * x * x) / std::sqrt(2.0 * std::numbers::pi);
  return 0.5 * (1.0 + std::erf(x / std::numbers::sqrt2)) + x * pdf;
}

}  // namespace dskc::cpu_ops
