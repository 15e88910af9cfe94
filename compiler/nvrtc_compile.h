// NVRTC driver: compiles a GeneratedModule to a cubin (real arch) or PTX, reports per-kernel
// resource usage from ptxas, and on failure raises Error(Compile) with the NVRTC log and the
// offending generated-source lines. build_module() adds the disk cache (SPEC §3).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "compiler/codegen.h"
#include "compiler/plan.h"

namespace dskc {

enum class EmitKind { Cubin, Ptx };

struct KernelResources {
  std::string name;
  int registers = -1;
  int shared_bytes = -1;
  int stack_bytes = -1;
  int spill_bytes = -1;
};

struct CompileOptions {
  std::string arch = "sm_90";  // sm_80 | sm_86 | sm_89 | sm_90
  EmitKind emit = EmitKind::Cubin;
  std::vector<std::string> extra_options;
};

struct CompiledModule {
  std::string arch;
  EmitKind emit = EmitKind::Cubin;
  std::string image;  // cubin bytes or PTX text
  std::string log;
  std::vector<KernelResources> resources;
  std::string manifest_json;
  std::string cache_key;
  bool from_cache = false;
  double compile_ms = 0;
};

std::string nvrtc_version_string();                       // e.g. "13.0"
void check_arch(const std::string& arch);                 // Error(Usage) for unknown archs
std::vector<std::string> nvrtc_options(const CompileOptions& opt);  // the exact option list
std::string cuda_include_dir();  // $DSKC_CUDA_INCLUDE or the build toolkit dirs, ;-separated

// Compiles `source` (named `name` in messages) with NVRTC. Throws Error(Compile).
CompiledModule nvrtc_compile(const std::string& source, const std::string& name, const CompileOptions& opt,
                             const std::vector<std::pair<std::string, std::string>>& headers = {});

// Parses ptxas -v output in an NVRTC log into per-kernel resources.
std::vector<KernelResources> parse_ptxas_log(const std::string& log);

// Generated source lines around each `name(LINE): error` in an NVRTC log.
std::string annotate_errors(const std::string& log, const std::string& source, const std::string& name);

struct BuildResult {
  GeneratedModule generated;
  CompiledModule module;
};

// plan -> source -> (cache | NVRTC) -> module + manifest. `cache_dir` empty: default dir;
// use_cache false: always compile (nothing written).
BuildResult build_module(const LayerPlan& plan, const CompileOptions& opt, bool use_cache = true,
                         const std::string& cache_dir = "");

std::string make_manifest(const LayerPlan& plan, const CompiledModule& m);

// A non-layer module (the trainer's model module, the plain layer's module) through the same
// disk cache as build_module: key = hash of source, options, arch, emit, NVRTC and dskc
// versions; on a miss NVRTC compiles and the entry is stored with a small manifest naming it.
CompiledModule compile_cached(const std::string& source, const std::string& name, const CompileOptions& opt);

}  // namespace dskc
