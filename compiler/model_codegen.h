// Model-level codegen: the CUDA source of the BERT trainer's "model module" — embeddings,
// model LayerNorms, pre-training heads, gradient accumulation, gradient norms and the
// optimizer (templates/model/*.cuh). Like the layer codegen (codegen.h) it is pure: config ->
// one self-contained translation unit with a provenance header, a generated constants header
// (the dskc_config.cuh of this module: T and kModel* constants) and one extern "C" kernel per
// entry of model_kernels(), each taking one params struct by value whose size is pinned by a
// static_assert (trainer/bert_cuda_params.h mirrors the structs on the host).
// Output is byte-stable for equal inputs. Every kernel runs blocks of kModelBlock threads.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "compiler/codegen.h"
#include "compiler/config.h"

namespace dskc {

inline constexpr int kModelBlock = 256;  // == kModelThreads in templates/common/model_util.cuh

struct ModelModuleConfig {
  DType dtype = DType::F32;
  int hidden_size = 0;
  double layer_norm_eps = 1e-12;
  double hidden_dropout = 0.0;        // the embedding output's dropout ratio
  GeluForm gelu = GeluForm::Erf;      // the MLM transform's activation
  uint32_t embedding_stream = 4;      // Philox stream of the embedding dropout (bert_model.h)
};

using ModelKernel = FixedKernel;

// Every kernel of the model module, in emission order.
const std::vector<ModelKernel>& model_kernels();

// The generated dskc_config.cuh of a model module.
std::string emit_model_config_header(const ModelModuleConfig& c);

struct GeneratedModelModule {
  std::string source;
  std::string config_header;
  std::vector<std::string> kernel_names;
  std::vector<std::string> templates;  // inlined, in order
};

// Error(Config) for a hidden size < 1. `arch` and `nvrtc_options` go into the provenance header.
GeneratedModelModule emit_model_module(const ModelModuleConfig& c, const std::string& arch = "sm_90",
                                       const std::vector<std::string>& nvrtc_options = {});

}  // namespace dskc
