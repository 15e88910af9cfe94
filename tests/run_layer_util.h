// Writes run-layer input files (random input, mask, parameters, grad_output) for tests.
#pragma once
#include <random>
#include <string>
#include <vector>

#include "compiler/config.h"
#include "runtime/host_float.h"
#include "runtime/layer_params.h"
#include "runtime/safetensors.h"

namespace dskc_test {

inline std::vector<double> random_values(size_t n, uint64_t seed, double scale) {
  std::mt19937_64 g(seed);
  std::normal_distribution<double> d(0.0, scale);
  std::vector<double> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

// Inputs for a [batch, seq] call of `cfg`; values are representable in the config's dtype.
inline dskc::SafeTensorsFile make_run_layer_inputs(const dskc::LayerConfig& cfg, int batch, int seq,
                                                   uint64_t seed) {
  using namespace dskc;
  SafeTensorsFile f;
  const DType t = cfg.dtype();
  auto put = [&](const std::string& name, std::vector<double> v, std::vector<int64_t> shape) {
    for (auto& x : v) x = round_to_dtype(x, t);
    f.tensors[name] = tensor_from_doubles(v, shape, t);
  };
  const int64_t n = static_cast<int64_t>(batch) * seq * cfg.hidden_size;
  put("input", random_values(static_cast<size_t>(n), seed, 1.0), {batch, seq, cfg.hidden_size});
  std::vector<double> mask(static_cast<size_t>(batch) * seq, 0.0);
  for (int b = 0; b < batch; ++b)
    for (int s = seq - b; s < seq; ++s) mask[static_cast<size_t>(b) * seq + s] = -10000.0;
  put("input_mask", mask, {batch, 1, 1, seq});
  uint64_t k = seed + 10;
  for (const auto& p : layer_param_specs(cfg)) {
    int64_t count = 1;
    for (auto d : p.shape) count *= d;
    const bool is_ln_w = p.name == "attn_nw" || p.name == "norm_w";
    auto v = random_values(static_cast<size_t>(count), k++, is_ln_w ? 0.1 : 0.05);
    if (is_ln_w)
      for (auto& x : v) x += 1.0;
    put(p.name, v, p.shape);
  }
  put("grad_output", random_values(static_cast<size_t>(n), seed + 1, 1.0), {batch, seq, cfg.hidden_size});
  return f;
}

}  // namespace dskc_test
