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

// A kernel of a module with a fixed kernel list (the BERT model module, the plain layer): an
// extern "C" wrapper calling `instantiation` with its params struct, whose size is pinned.
struct FixedKernel {
  std::string name;           // extern "C" symbol
  std::string params_type;    // device struct
  int params_bytes = 0;       // pinned size (static_assert in the generated source)
  std::string instantiation;  // call of the template with the module's constants
  std::string what;           // one-line comment
};

// The kernels section of such a module: `using namespace dskc;`, a static_assert that the
// templates' block size constant `block_const` equals `block`, then one commented wrapper per
// kernel with its params-size check (naming the host mirror `host_header`).
std::string emit_fixed_kernels(const std::vector<FixedKernel>& kernels, int block, const std::string& block_const,
                               const std::string& block_what, const std::string& host_header);

// Float literal that round-trips: 0.1f, 1.0f, 1e-12f.
std::string float_literal(float v);

}  // namespace dskc
