// GPU test helpers: skip (exit 77, counted as skipped by CTest) without a device; random data;
// error metrics against the CPU reference with the worst element's index.
#pragma once
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "runtime/driver.h"

namespace dskc_test {

inline void require_gpu() {
  if (!dskc::gpu_available()) {
    std::printf("SKIPPED: no CUDA device on this machine (GPU tests run on the GPU machine)\n");
    std::exit(77);
  }
}

inline std::vector<float> randn(size_t n, uint64_t seed, float scale = 1.f, float mean = 0.f) {
  std::mt19937_64 g(seed);
  std::normal_distribution<float> d(0.f, 1.f);
  std::vector<float> v(n);
  for (auto& x : v) x = mean + scale * d(g);
  return v;
}

struct ErrorStats {
  double rel = 0;      // ||a - ref|| / ||ref||
  double max_abs = 0;  // max |a - ref|
  size_t index = 0;    // where max_abs occurs
  double at_value = 0, at_ref = 0;
};

template <typename A, typename B>
ErrorStats compare(const std::vector<A>& a, const std::vector<B>& ref) {
  ErrorStats s;
  double num = 0, den = 0;
  REQUIRE(a.size() == ref.size());
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = static_cast<double>(a[i]) - static_cast<double>(ref[i]);
    if (!std::isfinite(static_cast<double>(a[i]))) {
      s.rel = INFINITY;
      s.max_abs = INFINITY;
      s.index = i;
      s.at_value = a[i];
      s.at_ref = ref[i];
      return s;
    }
    num += d * d;
    den += static_cast<double>(ref[i]) * static_cast<double>(ref[i]);
    if (std::fabs(d) > s.max_abs) {
      s.max_abs = std::fabs(d);
      s.index = i;
      s.at_value = a[i];
      s.at_ref = ref[i];
    }
  }
  s.rel = std::sqrt(num / std::max(den, 1e-300));
  return s;
}

inline std::string describe(const std::string& name, const ErrorStats& gpu, const ErrorStats& plain) {
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "%-16s gpu rel %.3e (max abs %.3e at [%zu]: %.6g vs %.6g) | plain same-precision rel %.3e", name.c_str(),
                gpu.rel, gpu.max_abs, gpu.index, gpu.at_value, gpu.at_ref, plain.rel);
  return buf;
}

}  // namespace dskc_test
