// CPU reference of one BERT transformer layer (SPEC §4, docs/DESIGN.md "Layer math"): forward and
// backward in plain C++ with double accumulation. It is the oracle for GPU tests and the CPU
// backend of the trainer. Dropout masks come from templates/common/philox.cuh with the element
// indices of DESIGN.md, so they agree bit for bit with the GPU kernels; nothing is stored between
// steps, and backward uses the masks of the preceding forward call.
//
// Storage emulation: with storage = F16 or BF16 every tensor a GPU implementation stores between
// steps (LN outputs, qkv, scaled scores, probabilities before and after dropout, context, each
// linear output, residual sums, GELU input and output, the output; in backward every gradient
// between steps and each parameter gradient) is rounded to that format, while every sum stays
// in double: "a plain same-precision implementation" to set fp16/bf16 error budgets against.
// storage = F32 means no rounding at all (the exact double reference, used for FD checks).
//
// Invariants: backward() refers to the most recent forward(); params are copied by forward().
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "compiler/config.h"

namespace dskc {

class CpuReferenceLayer {
 public:
  using Tensors = std::map<std::string, std::vector<double>>;

  CpuReferenceLayer(const LayerConfig& cfg, uint32_t layer_id = 0, DType storage = DType::F32);

  // input [B,S,H] row-major; mask [B,S] additive per (batch, key) or nullptr; params by the
  // names of layer_param_specs. Returns the output [B,S,H]. Throws Error(Input) when batch or
  // seq exceed the config's maxima, or a tensor has the wrong size.
  std::vector<double> forward(const std::vector<double>& input, const std::vector<double>* mask,
                              int batch, int seq, uint32_t step, const Tensors& params);

  // grad_output [B,S,H] of the last forward. Returns "grad_input" and "grad_<param>" for every
  // parameter.
  Tensors backward(const std::vector<double>& grad_output);

  // Intermediate tensors of the last forward (for kernel-level GPU tests), row-major:
  //   "input" [B,S,H], "qkv" [B,S,3H], "scores" [B,heads,S,S] (Q·Kᵀ/√d, before the mask),
  //   "probs" and "probs_dropped" [B,heads,S,S], "context" [B,S,H], "attn_out" (after bias),
  //   "attn_dropped", "attn_residual" (residual input + attn_dropped), "ln_attn" (LN with
  //   attn_nw/attn_nb: the FFN input in both orders), "inter" (GELU input) [B,S,I], "gelu",
  //   "ffn_out", "ffn_dropped", "ffn_residual" (ln_attn or attention residual + ffn_dropped),
  //   "ln_norm" (LN with norm_w/norm_b: Pre-LN attention input, Post-LN output), "output".
  const std::vector<double>& activation(const std::string& name) const;
  std::vector<std::string> activation_names() const;

  const LayerConfig& config() const { return cfg_; }
  int intermediate_size() const { return inter_; }

 private:
  struct LnStats {
    std::vector<double> mean, rstd;
  };
  void store(std::vector<double>& v) const;  // storage-precision rounding (no-op for F32)
  std::vector<double>& act(const std::string& name) { return acts_[name]; }
  void check_params(const Tensors& params) const;
  std::vector<uint8_t> make_mask(uint32_t stream, uint64_t count, double ratio) const;
  std::vector<double> apply_dropout(const std::vector<double>& x, const std::vector<uint8_t>& keep,
                                    double ratio) const;
  void attention_forward(const std::vector<double>& h);
  std::vector<double> attention_backward(const std::vector<double>& d_attn_dropped, Tensors& grads);
  void ffn_forward(const std::vector<double>& h);
  std::vector<double> ffn_backward(const std::vector<double>& d_ffn_dropped, Tensors& grads);

  LayerConfig cfg_;
  uint32_t layer_id_;
  DType storage_;
  int hidden_, heads_, head_dim_, inter_;
  // State of the last forward.
  int batch_ = 0, seq_ = 0;
  uint32_t step_ = 0;
  bool have_forward_ = false;
  double attn_ratio_ = 0.0, hidden_ratio_ = 0.0;  // 0 when not training
  Tensors params_;
  std::vector<double> mask_;  // [B,S] or empty
  Tensors acts_;
  std::vector<uint8_t> keep_probs_, keep_attn_, keep_ffn_;  // empty when that dropout is off
  LnStats ln_attn_stats_, ln_norm_stats_;
};

}  // namespace dskc
