// Codegen: one entry point, emit(plan) -> GeneratedModule. The module is one self-contained CUDA
// translation unit: a provenance header, the generated constants (dskc_config.cuh), the
// templates it needs inlined once each in dependency order, and one extern "C" kernel per plan
// entry that instantiates its template. Output is byte-stable for equal inputs.
#pragma once
#include <string>
#include <vector>

#include "compiler/plan.h"

namespace dskc {

struct EmitOptions {
  std::string arch = "sm_90";              // recorded in the provenance header
  std::vector<std::string> nvrtc_options;  // recorded in the provenance header
  std::string nvrtc_version;               // recorded in the provenance header
};

struct GeneratedModule {
  std::string source;                     // the whole translation unit
  std::string config_header;              // dskc_config.cuh alone
  std::vector<std::string> kernel_names;  // in plan order
  std::vector<std::string> templates;     // template files inlined, in order
};

GeneratedModule emit(const LayerPlan& plan, const EmitOptions& opt = {});

// The generated constants header for a plan (also used to compile templates standalone).
std::string emit_config_header(const LayerPlan& plan);

// Resolves `#include "x"` of embedded templates (and "dskc_config.cuh" -> config_header)
// recursively, inlining each file once. Used by emit() and by tests.
std::string inline_templates(const std::vector<std::string>& roots, const std::string& config_header,
                             std::vector<std::string>* inlined = nullptr);

// Float literal that round-trips: 0.1f, 1.0f, 1e-12f.
std::string float_literal(float v);

}  // namespace dskc
