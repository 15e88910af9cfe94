// Parameter specs and deterministic DeepSpeed-style initialization (see layer_params.h).
#include "runtime/normal_generator.h"
#include "runtime/layer_params.h"

#include <cmath>
#include <numbers>
#include <random>

namespace dskc {

int64_t ParamSpec::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<ParamSpec> layer_param_specs(const LayerConfig& cfg) {
  const int64_t h = cfg.hidden_size;
  const int64_t i = cfg.intermediate_size > 0 ? cfg.intermediate_size : 4 * h;
  return {
      {"attn_qkvw", {3 * h, h}}, {"attn_qkvb", {3 * h}}, {"attn_ow", {h, h}}, {"attn_ob", {h}},
      {"attn_nw", {h}},          {"attn_nb", {h}},       {"inter_w", {i, h}}, {"inter_b", {i}},
      {"output_w", {h, i}},      {"output_b", {h}},      {"norm_w", {h}},     {"norm_b", {h}},
  };
}


std::map<std::string, std::vector<float>> init_layer_params(const LayerConfig& cfg, uint64_t seed) {
  NormalGenerator gen(seed);
  const double std_in = cfg.initializer_range;
  double std_out = cfg.initializer_range;
  if (cfg.adjust_init_range && cfg.num_hidden_layers > 0) {
    std_out = cfg.initializer_range / std::sqrt(2.0 * cfg.num_hidden_layers);
  }
  std::map<std::string, std::vector<float>> out;
  for (const ParamSpec& spec : layer_param_specs(cfg)) {
    std::vector<float> v(static_cast<size_t>(spec.numel()), 0.0f);
    const std::string& n = spec.name;
    if (n == "attn_qkvw" || n == "inter_w" || n == "attn_ow" || n == "output_w") {
      const double sd = (n == "attn_ow" || n == "output_w") ? std_out : std_in;
      for (float& x : v) x = static_cast<float>(gen.next() * sd);
    } else if (n == "attn_nw" || n == "norm_w") {
      for (float& x : v) x = 1.0f;
    }
    out.emplace(n, std::move(v));
  }
  return out;
}

}  // namespace dskc
