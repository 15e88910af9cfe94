// emit_plain_module(): config -> CUDA source of the plain layer's kernels (see plain_codegen.h).
#include "compiler/plain_codegen.h"

#include <fmt/format.h>

#include <algorithm>
#include <sstream>

#include "compiler/codegen.h"
#include "compiler/version.h"
#include "templates/common/philox.cuh"  // dropout_threshold

namespace dskc {

PlainModuleConfig plain_module_config(const LayerConfig& cfg) {
  PlainModuleConfig c;
  c.dtype = cfg.dtype();
  c.layer_norm_eps = cfg.layer_norm_eps;
  c.gelu = cfg.gelu_approximation;
  c.attn_dropout = cfg.training ? cfg.attn_dropout_ratio : 0.0;
  c.hidden_dropout = cfg.training ? cfg.hidden_dropout_ratio : 0.0;
  return c;
}

const std::vector<PlainKernel>& plain_kernels() {
  static const std::vector<PlainKernel> k = {
      {"plain_bias_add", "PlainBiasAddParams", 40, "bias_add_impl(p)", "y = x + bias (broadcast over rows)"},
      {"plain_add", "PlainAddParams", 32, "add_impl(p)", "y = a + b (residual add)"},
      {"plain_dropout_attn", "PlainDropoutParams", 48,
       "dropout_impl<kPlainAttnDropoutThreshold>(p, kPlainAttnDropoutScale)",
       "attention-probability dropout (forward and backward)"},
      {"plain_dropout_hidden", "PlainDropoutParams", 48,
       "dropout_impl<kPlainHiddenDropoutThreshold>(p, kPlainHiddenDropoutScale)",
       "hidden dropout of a branch output (forward and backward)"},
      {"plain_gelu_fwd", "PlainGeluFwdParams", 24, "gelu_fwd_impl<kPlainGeluTanh>(p)", "y = GELU(x)"},
      {"plain_gelu_bwd", "PlainGeluBwdParams", 32, "gelu_bwd_impl<kPlainGeluTanh>(p)", "dx = dy * GELU'(x)"},
      {"plain_mask_add", "PlainMaskAddParams", 32, "mask_add_impl(p)", "scores += additive mask (per key)"},
      {"plain_colsum", "PlainColSumParams", 24, "colsum_impl(p)",
       "bias gradient = column sums; grid = ceil(cols / 32)"},
      {"plain_layernorm_fwd", "PlainLnFwdParams", 56, "layernorm_fwd_impl(p, kPlainLayerNormEps)",
       "LayerNorm forward, stats saved; grid = rows"},
      {"plain_layernorm_bwd", "PlainLnBwdParams", 56, "layernorm_bwd_impl(p)", "LayerNorm input gradient; grid = rows"},
      {"plain_layernorm_param_grad", "PlainLnParamGradParams", 56, "layernorm_param_grad_impl(p)",
       "LayerNorm gamma/beta gradients; grid = ceil(cols / 32)"},
      {"plain_softmax_fwd", "PlainSoftmaxFwdParams", 24, "softmax_fwd_impl(p)", "row softmax; grid = rows"},
      {"plain_softmax_bwd", "PlainSoftmaxBwdParams", 32, "softmax_bwd_impl(p)", "row softmax backward; grid = rows"},
      {"plain_to_heads", "PlainHeadsParams", 40, "to_heads_impl(p)", "[B, S, ld] columns -> [B, heads, S, d]"},
      {"plain_from_heads", "PlainHeadsParams", 40, "from_heads_impl(p)", "[B, heads, S, d] -> [B, S, ld] columns"},
  };
  return k;
}

std::string emit_plain_config_header(const PlainModuleConfig& c) {
  // The keep rule's threshold, computed by the same function the kernels and CPU reference use.
  auto thr = [](double r) { return dskc_rng::dropout_threshold(r); };
  auto scale = [](double r) { return float_literal(r > 0 ? static_cast<float>(1.0 / (1.0 - r)) : 1.f); };
  std::ostringstream o;
  o << "// dskc_config.cuh: compile-time constants of the plain layer module (generated).\n"
    << "#pragma once\n#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n#include \"common/philox.cuh\"\n\n"
    << fmt::format("using T = {};  // storage type: {}\n", dtype_cuda_type(c.dtype), dtype_name(c.dtype))
    << fmt::format("constexpr float kPlainLayerNormEps = {};\n", float_literal(static_cast<float>(c.layer_norm_eps)))
    << fmt::format("constexpr bool kPlainGeluTanh = {};  // GELU: {}\n", c.gelu == GeluForm::Tanh,
                   c.gelu == GeluForm::Tanh ? "tanh" : "erf")
    << fmt::format("constexpr uint32_t kPlainAttnDropoutThreshold = {}u;  // ratio {}: keep iff draw >= ratio * 2^16 (16-bit draw)\n",
                   c.attn_dropout > 0 ? thr(c.attn_dropout) : 0u, c.attn_dropout)
    << fmt::format("constexpr float kPlainAttnDropoutScale = {};  // 1 / (1 - ratio)\n", scale(c.attn_dropout))
    << fmt::format("constexpr uint32_t kPlainHiddenDropoutThreshold = {}u;  // ratio {}\n",
                   c.hidden_dropout > 0 ? thr(c.hidden_dropout) : 0u, c.hidden_dropout)
    << fmt::format("constexpr float kPlainHiddenDropoutScale = {};\n", scale(c.hidden_dropout));
  return o.str();
}

GeneratedPlainModule emit_plain_module(const PlainModuleConfig& c, const std::string& arch,
                                       const std::vector<std::string>& nvrtc_options) {
  GeneratedPlainModule m;
  m.config_header = emit_plain_config_header(c);
  const std::vector<std::string> roots{"dskc_config.cuh", "plain/elementwise.cuh", "plain/layernorm.cuh",
                                       "plain/softmax.cuh", "plain/heads.cuh"};
  const std::string body = inline_templates(roots, m.config_header, &m.templates);
  std::ostringstream o;
  o << "// ==== dskc generated plain layer module ====\n"
    << fmt::format("// dskc {} | arch {} | {} | eps {} | GELU {} | attention dropout {} | hidden dropout {}\n",
                   kDskcVersion, arch, dtype_name(c.dtype), c.layer_norm_eps, c.gelu == GeluForm::Tanh ? "tanh" : "erf",
                   c.attn_dropout, c.hidden_dropout)
    << "// options:";
  for (const auto& s : nvrtc_options) o << " " << s;
  o << "\n// The unfused (PyTorch-style) BERT layer: one kernel per elementary op; GEMMs run in cuBLAS\n"
    << "// between these kernels (runtime/plain_layer.cpp).\n"
    << body << emit_fixed_kernels(plain_kernels(), kPlainBlock, "kPlainThreads", "plain", "runtime/plain_kernel_params.h");
  for (const PlainKernel& k : plain_kernels()) m.kernel_names.push_back(k.name);
  m.source = o.str();
  return m;
}

}  // namespace dskc
