// Plain-layer codegen: the CUDA source of the unfused, PyTorch-style transformer layer's kernels
// (runtime/plain_layer.h, templates/plain/*.cuh) — one simple kernel per elementary op. Like the
// model codegen (model_codegen.h) it is pure: config -> one self-contained translation unit with
// a provenance header, a generated constants header (dskc_config.cuh: T, LayerNorm eps, GELU
// form, dropout thresholds and scales) and one extern "C" kernel per entry of plain_kernels(),
// each taking one params struct by value whose size is pinned by a static_assert
// (runtime/plain_kernel_params.h mirrors the structs on the host). Shapes are runtime arguments,
// so one module serves every batch and sequence length of a config. Byte-stable output.
// Every kernel runs blocks of kPlainBlock threads.
#pragma once
#include <string>
#include <vector>

#include "compiler/codegen.h"
#include "compiler/config.h"

namespace dskc {

inline constexpr int kPlainBlock = 256;  // == kPlainThreads in templates/plain/util.cuh

struct PlainModuleConfig {
  DType dtype = DType::F32;
  double layer_norm_eps = 1e-12;
  GeluForm gelu = GeluForm::Erf;
  double attn_dropout = 0.0;    // 0 when not training
  double hidden_dropout = 0.0;  // 0 when not training
};

// The module config of a layer config (dropout ratios 0 when cfg.training is false).
PlainModuleConfig plain_module_config(const LayerConfig& cfg);

using PlainKernel = FixedKernel;

// Every kernel of the plain module, in emission order.
const std::vector<PlainKernel>& plain_kernels();

std::string emit_plain_config_header(const PlainModuleConfig& c);

struct GeneratedPlainModule {
  std::string source;
  std::string config_header;
  std::vector<std::string> kernel_names;
  std::vector<std::string> templates;  // inlined, in order
};

// `arch` and `nvrtc_options` go into the provenance header.
GeneratedPlainModule emit_plain_module(const PlainModuleConfig& c, const std::string& arch = "sm_90",
                                       const std::vector<std::string>& nvrtc_options = {});

}  // namespace dskc
