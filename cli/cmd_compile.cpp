// `dskc compile`: layer config -> cubin / PTX / CUDA source, plus a JSON manifest. Needs no GPU.
#include <fmt/format.h>

#include <cstdio>

#include "cli/commands.h"
#include "cli/layer_args.h"
#include "compiler/errors.h"
#include "compiler/fileio.h"
#include "compiler/nvrtc_compile.h"
#include "runtime/driver.h"

namespace dskc::cli {

std::string default_arch() {
  if (auto a = detect_gpu_arch()) return *a;
  return "sm_90";
}

int cmd_compile(const Args& args) {
  ArgParser p("compile", "Compile a transformer layer to a module (cubin for --arch, or PTX/CUDA source) and "
                         "write a manifest (kernels, launch shapes, registers, shared memory) beside it.");
  LayerArgs la;
  la.add_to(p);
  std::string arch, emit = "cubin", output, manifest;
  bool no_cache = false, quiet = false;
  p.add_option("arch", &arch, "ARCH", "sm_80|sm_86|sm_89|sm_90 (default: this GPU, else sm_90)");
  p.add_option("emit", &emit, "KIND", "cubin (default), ptx or cuda (the generated source)");
  p.add_option("output", &output, "FILE", "output file, also -o (default: dskc_layer_<hash>.<ext>)");
  p.add_option("manifest", &manifest, "FILE", "manifest path (default: <output>.json; 'none' to skip)");
  p.add_switch("no-cache", &no_cache, "compile even when the kernel cache has the module; write nothing to it");
  p.add_switch("quiet", &quiet, "print nothing on success");
  Args a = args;
  for (auto& s : a)
    if (s == "-o") s = "--output";
  if (!p.parse(a)) return 0;
  if (emit != "cubin" && emit != "ptx" && emit != "cuda")
    throw Error(ErrorKind::Usage, fmt::format("--emit must be cubin, ptx or cuda, not '{}'", emit));
  if (arch.empty()) arch = default_arch();
  check_arch(arch);
  LayerConfig cfg = la.load();
  PlanOptions po;
  po.arch = arch;
  LayerPlan plan = make_plan(cfg, po);
  CompileOptions co;
  co.arch = arch;
  co.emit = emit == "ptx" ? EmitKind::Ptx : EmitKind::Cubin;
  std::string ext = emit == "cuda" ? "cu" : emit;
  if (output.empty()) output = fmt::format("dskc_layer_{}.{}", plan.config_hash, ext);
  if (emit == "cuda") {
    EmitOptions eo;
    eo.arch = arch;
    eo.nvrtc_options = nvrtc_options(co);
    eo.nvrtc_version = nvrtc_version_string();
    write_file_atomic(output, dskc::emit(plan, eo).source);
    if (!quiet) std::printf("wrote %s (generated CUDA source, %zu kernels)\n", output.c_str(), plan.kernels.size());
    return 0;
  }
  BuildResult r = build_module(plan, co, !no_cache);
  if (manifest.empty()) manifest = output + ".json";
  // Module and manifest appear together or not at all.
  if (manifest != "none")
    write_files_atomic({{output, r.module.image}, {manifest, r.module.manifest_json}});
  else
    write_file_atomic(output, r.module.image);
  if (!quiet) {
    std::printf("wrote %s (%s for %s, %zu bytes, %zu kernels, %s in %.0f ms)\n", output.c_str(), emit.c_str(),
                arch.c_str(), r.module.image.size(), plan.kernels.size(),
                r.module.from_cache ? "cache hit" : "compiled", r.module.compile_ms);
    if (manifest != "none") std::printf("wrote %s (manifest)\n", manifest.c_str());
  }
  return 0;
}

}  // namespace dskc::cli
