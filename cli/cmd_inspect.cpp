// `dskc inspect`: what dskc generates for a layer — kernel list and schedule, the generated CUDA
// source (whole or one kernel), the activation-memory plan per flag, compiler resource usage,
// PTX. Needs no GPU.
#include <fmt/format.h>

#include <cstdio>
#include <sstream>

#include "cli/commands.h"
#include "cli/layer_args.h"
#include "compiler/errors.h"
#include "compiler/nvrtc_compile.h"

namespace dskc::cli {

std::string default_arch();

namespace {

double mib(int64_t b) { return static_cast<double>(b) / (1024.0 * 1024.0); }

void print_kernels(const LayerPlan& plan) {
  std::printf("kernels (%zu, launch order; %s):\n", plan.kernels.size(),
              plan.ffn_gemm_sm90 || plan.linear_gemm_sm90
                  ? "gemm_sm90 kernels are dskc's own GEMMs, the other GEMMs run in cuBLAS between them"
                  : "GEMMs run in cuBLAS between them");
  std::printf("  %-42s %-9s %-6s %s\n", "kernel", "pass", "block", "fuses");
  for (const auto& k : plan.kernels)
    std::printf("  %-42s %-9s %-6d %s\n", k.name.c_str(), k.pass == Pass::Forward ? "forward" : "backward", k.block,
                k.fuses.c_str());
}

LayerConfig with_flags(LayerConfig c, bool a, bool n, bool g) {
  c.attn_dropout_checkpoint = a;
  c.normalize_invertible = n;
  c.gelu_checkpoint = g;
  return c;
}

void print_memory(const LayerPlan& plan, const PlanOptions& po, int batch, int seq) {
  const LayerConfig& c = plan.cfg;
  std::printf("activation memory per layer at batch %d, seq %d (%s, %s):\n", batch, seq, dtype_name(c.dtype()),
              c.training ? "training" : "inference: nothing is kept");
  std::printf("  %-20s %-18s %12s  %s\n", "saved tensor", "shape", "bytes", "kept for");
  for (const auto& t : plan.saved)
    std::printf("  %-20s %-18s %12lld  %s\n", t.name.c_str(), t.shape.c_str(),
                static_cast<long long>(t.bytes(batch, seq)), t.why.c_str());
  std::printf("  %-20s %-18s %12lld  (%.2f MiB)\n", "total", "", static_cast<long long>(plan.activation_bytes(batch, seq)),
              mib(plan.activation_bytes(batch, seq)));
  std::printf("  workspace (shared by all layers): %.2f MiB\n", mib(plan.workspace_bytes(batch, seq)));
  if (!c.training) return;
  std::printf("\nactivation MiB per layer by memory flag at batch %d, seq %d:\n", batch, seq);
  struct Row {
    const char* name;
    bool a, n, g;
  } rows[] = {{"no flag", false, false, false},
              {"attn_dropout_checkpoint", true, false, false},
              {"normalize_invertible", false, true, false},
              {"gelu_checkpoint", false, false, true},
              {"all three", true, true, true}};
  for (const auto& r : rows) {
    LayerPlan p = make_plan(with_flags(c, r.a, r.n, r.g), po);
    std::printf("  %-26s %9.2f MiB\n", r.name, mib(p.activation_bytes(batch, seq)));
  }
}

// The section of the generated source that belongs to one kernel: its template and wrapper.
std::string kernel_source(const GeneratedModule& g, const KernelInfo& k) {
  std::string out;
  const std::string tpl_marker = "// ---------------- " + k.op + ".cuh ----------------";
  auto a = g.source.find(tpl_marker);
  if (a != std::string::npos) {
    auto b = g.source.find("// ----------------", a + tpl_marker.size());
    auto e = g.source.find("// ================ kernels", a);
    out += g.source.substr(a, std::min(b, e) - a);
  }
  const std::string wrap = "\n// " + k.name + " (";
  auto w = g.source.find(wrap);
  if (w != std::string::npos) {
    auto end = g.source.find("\n}\n", w);
    out += g.source.substr(w + 1, end + 3 - (w + 1));
  }
  return out;
}

}  // namespace

int cmd_inspect(const Args& args) {
  ArgParser p("inspect", "Show what dskc generates for a layer: kernels, generated CUDA source, the activation "
                         "memory plan per flag, compiler resource usage and PTX. With no selection: kernels + memory.");
  LayerArgs la;
  la.add_to(p);
  bool source = false, memory = false, resources = false, ptx = false, kernels = false, config = false;
  std::string kernel, arch;
  std::optional<int> batch, seq;
  p.add_switch("source", &source, "print the generated CUDA source (whole module, or --kernel's part)");
  p.add_option("kernel", &kernel, "NAME", "limit --source / --ptx to one kernel");
  p.add_switch("kernels", &kernels, "list the kernels with what each fuses");
  p.add_switch("memory", &memory, "activation bytes per saved tensor and per memory flag");
  p.add_switch("resources", &resources, "registers, shared memory, stack and spills per kernel (compiles)");
  p.add_switch("ptx", &ptx, "print the PTX (compiles)");
  p.add_switch("config", &config, "print the resolved layer config JSON");
  p.add_option("arch", &arch, "ARCH",
               "target for the kernel list, --resources and --ptx (default: this GPU, else sm_90)");
  p.add_int("batch", &batch, "batch for --memory (default: the config's batch_size)");
  p.add_int("seq", &seq, "sequence length for --memory (default: max_seq_length)");
  if (!p.parse(args)) return 0;
  LayerConfig cfg = la.load();
  if (arch.empty()) arch = default_arch();
  check_arch(arch);
  PlanOptions po;
  po.arch = arch;  // the kernel list depends on the target (gemm_sm90 on sm_90)
  LayerPlan plan = make_plan(cfg, po);
  const KernelInfo* only = nullptr;
  if (!kernel.empty()) {
    only = plan.find_kernel(kernel);
    if (!only) {
      std::vector<std::string> names;
      for (const auto& k : plan.kernels) names.push_back(k.name);
      std::string hint = closest_match(kernel, names);
      throw Error(ErrorKind::Usage, fmt::format("no kernel '{}' in this layer{}", kernel,
                                                hint.empty() ? "" : "; did you mean '" + hint + "'?"));
    }
  }
  const int b = batch.value_or(cfg.batch_size), s = seq.value_or(cfg.max_seq_length);
  if (b < 1 || b > cfg.batch_size || s < 1 || s > cfg.max_seq_length)
    throw Error(ErrorKind::Usage, fmt::format("--batch/--seq must be within the layer's batch_size {} and "
                                              "max_seq_length {}", cfg.batch_size, cfg.max_seq_length));
  if (!source && !memory && !resources && !ptx && !kernels && !config) kernels = memory = true;
  CompileOptions co;
  co.arch = arch;
  if (config) std::printf("%s\n", to_json_text(cfg).c_str());
  if (kernels) {
    std::printf("layer %s: hidden %d, heads %d, intermediate %d, batch <= %d, seq <= %d, %s, %s\n",
                plan.config_hash.c_str(), cfg.hidden_size, cfg.heads, cfg.intermediate_size, cfg.batch_size,
                cfg.max_seq_length, dtype_name(cfg.dtype()), cfg.pre_layer_norm ? "Pre-LN" : "Post-LN");
    print_kernels(plan);
    std::printf("\n");
  }
  if (memory) {
    print_memory(plan, po, b, s);
    std::printf("\n");
  }
  if (source) {
    EmitOptions eo;
    eo.arch = arch;
    eo.nvrtc_options = nvrtc_options(co);
    eo.nvrtc_version = nvrtc_version_string();
    GeneratedModule g = emit(plan, eo);
    std::fputs(only ? kernel_source(g, *only).c_str() : g.source.c_str(), stdout);
  }
  if (resources) {
    BuildResult r = build_module(plan, co);
    std::printf("resources for %s (%s):\n  %-42s %6s %8s %8s %8s\n", arch.c_str(),
                r.module.from_cache ? "cache hit" : "compiled", "kernel", "regs", "smem", "stack", "spill");
    for (const auto& k : r.module.resources)
      if (!only || k.name == only->name)
        std::printf("  %-42s %6d %8d %8d %8d\n", k.name.c_str(), k.registers, k.shared_bytes, k.stack_bytes,
                    k.spill_bytes);
  }
  if (ptx) {
    CompileOptions po = co;
    po.emit = EmitKind::Ptx;
    BuildResult r = build_module(plan, po);
    if (!only) {
      std::fputs(r.module.image.c_str(), stdout);
    } else {
      // From the kernel's .entry to the closing brace of its body: the last "\n}\n" before the next
      // entry's "// .globl" line (inline asm blocks inside the body also close with a brace).
      const std::string& t = r.module.image;
      auto a = t.find(".entry " + only->name + "(");
      if (a != std::string::npos) {
        const auto next = t.find("// .globl", a);
        auto e = t.rfind("\n}\n", next == std::string::npos ? std::string::npos : next);
        if (e == std::string::npos || e < a) e = t.size() - 3;
        std::fputs(t.substr(a, e + 3 - a).c_str(), stdout);
      }
    }
  }
  return 0;
}

}  // namespace dskc::cli
