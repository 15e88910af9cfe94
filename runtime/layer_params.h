// The parameters of one transformer layer: names, shapes (DeepSpeed's kernel layout, SPEC §4)
// and DeepSpeed's initialization. Invariant: layer_param_specs lists the twelve parameters in the
// fixed order below, which every file format and backend in dskc uses.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "compiler/config.h"

namespace dskc {

struct ParamSpec {
  std::string name;
  std::vector<int64_t> shape;
  int64_t numel() const;
};

// attn_qkvw [3H,H], attn_qkvb [3H], attn_ow [H,H], attn_ob [H], attn_nw [H], attn_nb [H],
// inter_w [I,H], inter_b [I], output_w [H,I], output_b [H], norm_w [H], norm_b [H].
std::vector<ParamSpec> layer_param_specs(const LayerConfig& cfg);

// DeepSpeed's init_transformer_weights: weights ~ normal(0, initializer_range), the output
// projections (attn_ow, output_w) with std initializer_range / sqrt(2 * num_hidden_layers) when
// adjust_init_range (and num_hidden_layers > 0); biases 0; LayerNorm weights 1, biases 0.
// Deterministic on every platform: std::mt19937_64 (fully specified by the standard) drives a
// Box-Muller transform, drawing tensors in layer_param_specs order. Values are fp32; round them
// to the config's dtype (round_to_dtype) before use in fp16/bf16.
std::map<std::string, std::vector<float>> init_layer_params(const LayerConfig& cfg, uint64_t seed);

}  // namespace dskc
