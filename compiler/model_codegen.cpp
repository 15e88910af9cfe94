// emit_model_module(): model config -> CUDA source of the trainer's model module (see
// model_codegen.h). Constants live in the generated header; the templates branch with
// `if constexpr` on template arguments that the wrappers below fill from those constants.
#include "compiler/model_codegen.h"

#include <fmt/format.h>

#include <algorithm>
#include <sstream>

#include "compiler/codegen.h"
#include "compiler/errors.h"
#include "compiler/version.h"
#include "templates/common/philox.cuh"  // dropout_threshold

namespace dskc {

const std::vector<ModelKernel>& model_kernels() {
  static const std::vector<ModelKernel> k = {
      {"model_embedding_fwd", "EmbeddingFwdParams", 112,
       "embedding_fwd_impl<kModelHidden, kModelDropoutOn, kModelDropoutThreshold, kModelDropoutStream>(p, "
       "kModelDropoutScale, kModelLayerNormEps)",
       "word + position + type embeddings, LayerNorm, dropout; grid = B·S"},
      {"model_layernorm_fwd", "ModelLnFwdParams", 56, "model_ln_fwd_impl<kModelHidden>(p, kModelLayerNormEps)",
       "LayerNorm forward (final LayerNorm, MLM transform); grid = rows"},
      {"model_layernorm_bwd", "ModelLnBwdParams", 80,
       "model_ln_bwd_impl<kModelHidden, T, T, kLnBwdPlain, kModelGeluTanh, 0u, 0u>(p, 1.0f)",
       "LayerNorm backward, input gradient; grid = rows"},
      {"model_layernorm_gelu_bwd", "ModelLnBwdParams", 80,
       "model_ln_bwd_impl<kModelHidden, T, T, kLnBwdGelu, kModelGeluTanh, 0u, 0u>(p, 1.0f)",
       "LayerNorm backward times GELU' (MLM transform); grid = rows"},
      {"model_embedding_layernorm_bwd", "ModelLnBwdParams", 80,
       "model_ln_bwd_impl<kModelHidden, float, float, kModelDropoutOn ? kLnBwdDropout : kLnBwdPlain, "
       "kModelGeluTanh, kModelDropoutThreshold, kModelDropoutStream>(p, kModelDropoutScale)",
       "embedding dropout + LayerNorm backward (fp32 input and output); grid = B·S"},
      {"model_layernorm_param_grad_part", "ModelLnParamGradParams", 64,
       "model_ln_param_grad_part_impl<kModelHidden, T>(p)",
       "LayerNorm gamma/beta gradient partial sums per row chunk; grid = ceil(H / 256) * chunks"},
      {"model_embedding_layernorm_param_grad_part", "ModelLnParamGradParams", 64,
       "model_ln_param_grad_part_impl<kModelHidden, float>(p)",
       "embedding LayerNorm (fp32 input) gamma/beta gradient partial sums; grid = ceil(H / 256) * chunks"},
      {"model_layernorm_param_grad_finish", "ModelLnParamGradParams", 64,
       "model_ln_param_grad_finish_impl<kModelHidden>(p)",
       "the partial sums in chunk order += gamma/beta gradients; grid = ceil(H / 256)"},
      {"model_gather_rows", "GatherRowsParams", 32, "gather_rows_impl<kModelHidden>(p)",
       "dst[i] = src[idx[i]]; grid = n"},
      {"model_gelu_fwd", "ActivationParams", 24, "activation_impl<kModelGeluTanh ? kActGeluTanh : kActGeluErf>(p)",
       "GELU elementwise; grid-stride"},
      {"model_tanh_fwd", "ActivationParams", 24, "activation_impl<kActTanh>(p)", "tanh elementwise; grid-stride"},
      {"model_xent", "XentParams", 40, "xent_impl(p)", "softmax cross-entropy forward + backward, padding columns zeroed; grid = rows"},
      {"model_nsp", "NspParams", 64, "nsp_impl<kModelHidden>(p)",
       "NSP classifier + cross-entropy + backward to the pooler; grid = B"},
      {"model_nsp_param_grad", "NspParamGradParams", 40, "nsp_param_grad_impl<kModelHidden>(p)",
       "NSP classifier gradients += ; grid = ceil(H / 256)"},
      {"model_head_grad_scatter", "HeadScatterParams", 48, "head_grad_scatter_impl<kModelHidden>(p)",
       "head gradients into the encoder output gradient, every row; grid = B·S"},
      {"model_cast_params", "CastParams", 24, "cast_params_impl(p)", "fp32 master -> T; grid-stride"},
      {"model_accumulate", "AccumulateParams", 24, "accumulate_impl<false>(p)", "fp32 accumulator += T; grid-stride"},
      {"model_widen", "AccumulateParams", 24, "accumulate_impl<true>(p)", "fp32 = T (all-reduced gradients back); grid-stride"},
      {"model_accumulate_first", "AccumulateParams", 24, "accumulate_impl<true, true>(p)",
       "fp32 accumulator = 0 + T: the first gradient after zero_grads (region not zeroed); grid-stride"},
      {"model_add_pair", "AddPairParams", 32, "add_pair_impl(p)",
       "fp32 = T(a + b): two ranks' gradients summed (copy-engine exchange); grid-stride"},
      {"model_colsum_accumulate", "ColSumParams", 32, "colsum_accumulate_impl(p)",
       "bias gradient += column sums; grid = ceil(cols / 32)"},
      {"model_grouped_rows_part", "GroupedRowsPartParams", 40, "grouped_rows_part_impl<kModelHidden>(p)",
       "sums of pieces (at most 64 rows) of the embedding-gradient groups; grid = pieces"},
      {"model_grouped_rows_finish", "GroupedRowsFinishParams", 40, "grouped_rows_finish_impl<kModelHidden>(p)",
       "embedding-table gradient += grouped row sums; grid = groups"},
      {"model_grouped_rows_compact", "GroupedRowsCompactParams", 48, "grouped_rows_compact_impl<kModelHidden>(p)",
       "grouped row sums into a compact [n, H] T buffer (word-embedding rows of the ranks' union); grid = n"},
      {"model_scatter_add_rows", "ScatterRowsParams", 32, "scatter_add_rows_impl<kModelHidden>(p)",
       "fp32 accumulator rows += compact T rows; grid = n"},
      {"model_sumsq_partial", "SumSqParams", 24, "sumsq_partial_impl(p)",
       "Σ x² per block (double) over a table of fp32 / T ranges; grid = ranges · fixed blocks per range"},
      {"model_reduce_partials", "ReducePartialsParams", 24, "reduce_partials_impl(p)",
       "ordered sum of partials; grid = stride"},
      {"model_adam_step", "AdamParams", 104, "adam_step_impl<false>(p)", "Adam, L2 weight decay; grid-stride"},
      {"model_adamw_step", "AdamParams", 104, "adam_step_impl<true>(p)", "AdamW (decoupled decay); grid-stride"},
      {"model_adam_multi", "AdamMultiParams", 120, "adam_multi_impl<false>(p)",
       "Adam over every tensor + compute copies (layers' T gradients with dtype_grads); grid = Σ chunks"},
      {"model_adamw_multi", "AdamMultiParams", 120, "adam_multi_impl<true>(p)",
       "AdamW over every tensor + compute copies (layers' T gradients with dtype_grads); grid = Σ chunks"},
      {"model_lamb_stage1", "LambParams", 120, "lamb_stage1_impl(p)", "Lamb moments + norm partials; fixed grid"},
      {"model_lamb_stage2", "LambParams", 120, "lamb_stage2_impl(p)", "Lamb trust ratio + update; grid-stride"},
      {"model_lamb_multi_stage1", "LambMultiParams", 144, "lamb_multi_stage1_impl(p)",
       "Lamb moments + norm partials over every tensor (each its per-tensor grid); grid = Σ parts"},
      {"model_lamb_multi_trust", "LambMultiParams", 144, "lamb_multi_trust_impl(p)",
       "Lamb trust ratio per tensor from its partials; grid = tensors"},
      {"model_lamb_multi_stage2", "LambMultiParams", 144, "lamb_multi_stage2_impl(p)",
       "Lamb update over every tensor + compute copies; grid = Σ chunks"},
  };
  return k;
}

std::string emit_model_config_header(const ModelModuleConfig& c) {
  const bool drop = c.hidden_dropout > 0;
  // The keep rule's threshold, computed by the same function the kernels and CPU reference use.
  auto thr = [](double r) { return dskc_rng::dropout_threshold(r); };
  std::ostringstream o;
  o << "// dskc_config.cuh: compile-time constants of the model module (generated).\n"
    << "#pragma once\n#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n#include \"common/philox.cuh\"\n\n"
    << fmt::format("using T = {};  // storage type: {}\n", dtype_cuda_type(c.dtype), dtype_name(c.dtype))
    << fmt::format("constexpr int kModelHidden = {};\n", c.hidden_size)
    << fmt::format("constexpr float kModelLayerNormEps = {};\n", float_literal(static_cast<float>(c.layer_norm_eps)))
    << fmt::format("constexpr bool kModelGeluTanh = {};  // MLM transform GELU: {}\n", c.gelu == GeluForm::Tanh,
                   c.gelu == GeluForm::Tanh ? "tanh" : "erf")
    << fmt::format("constexpr bool kModelDropoutOn = {};  // embedding dropout ratio {}\n", drop, c.hidden_dropout)
    << fmt::format("constexpr uint32_t kModelDropoutThreshold = {}u;  // keep iff draw >= ratio * 2^16 (16-bit draw)\n",
                   drop ? thr(c.hidden_dropout) : 0u)
    << fmt::format("constexpr float kModelDropoutScale = {};  // 1 / (1 - ratio)\n",
                   float_literal(drop ? static_cast<float>(1.0 / (1.0 - c.hidden_dropout)) : 1.f))
    << fmt::format("constexpr uint32_t kModelDropoutStream = {}u;  // Philox stream of the embedding output\n",
                   c.embedding_stream);
  return o.str();
}

GeneratedModelModule emit_model_module(const ModelModuleConfig& c, const std::string& arch,
                                       const std::vector<std::string>& nvrtc_options) {
  if (c.hidden_size < 1)
    throw Error(ErrorKind::Config, fmt::format("model module: hidden_size must be >= 1, got {}", c.hidden_size));
  GeneratedModelModule m;
  m.config_header = emit_model_config_header(c);
  const std::vector<std::string> roots{"dskc_config.cuh", "model/embedding.cuh", "model/layernorm.cuh",
                                       "model/heads.cuh", "model/params.cuh"};
  const std::string body = inline_templates(roots, m.config_header, &m.templates);
  std::ostringstream o;
  o << "// ==== dskc generated model module ====\n"
    << fmt::format("// dskc {} | arch {} | {} | hidden {} | eps {} | embedding dropout {} | GELU {}\n", kDskcVersion,
                   arch, dtype_name(c.dtype), c.hidden_size, c.layer_norm_eps, c.hidden_dropout,
                   c.gelu == GeluForm::Tanh ? "tanh" : "erf")
    << "// options:";
  for (const auto& s : nvrtc_options) o << " " << s;
  o << "\n// BERT embeddings, model LayerNorms, pre-training heads, gradient accumulation and the\n"
    << "// optimizer; GEMMs run in cuBLASLt between these kernels (trainer/bert_cuda*.cpp).\n"
    << body << emit_fixed_kernels(model_kernels(), kModelBlock, "kModelThreads", "model", "trainer/bert_cuda_params.h");
  for (const ModelKernel& k : model_kernels()) m.kernel_names.push_back(k.name);
  m.source = o.str();
  return m;
}

}  // namespace dskc
