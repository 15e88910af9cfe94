// NVRTC compilation, ptxas resource parsing, error annotation and the cached build path.
// NVRTC needs no GPU: this file runs on CPU-only machines (CI) too.
#include "compiler/nvrtc_compile.h"

#include <fmt/format.h>
#include <nvrtc.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "compiler/cache.h"
#include "compiler/errors.h"
#include "compiler/fileio.h"
#include "compiler/version.h"

#include "cuda_paths.h"  // generated: DSKC_CUDA_INCLUDE_DIRS

namespace dskc {

#define DSKC_NVRTC_CHECK(call)                                                                       \
  do {                                                                                               \
    nvrtcResult r_ = (call);                                                                         \
    if (r_ != NVRTC_SUCCESS)                                                                         \
      throw Error(ErrorKind::Compile, fmt::format("{} failed: {} ({}:{})", #call, nvrtcGetErrorString(r_), \
                                                  __FILE__, __LINE__));                              \
  } while (0)

std::string nvrtc_version_string() {
  int major = 0, minor = 0;
  DSKC_NVRTC_CHECK(nvrtcVersion(&major, &minor));
  return fmt::format("{}.{}", major, minor);
}

void check_arch(const std::string& arch) {
  static const char* known[] = {"sm_80", "sm_86", "sm_89", "sm_90"};
  for (const char* k : known)
    if (arch == k) return;
  throw Error(ErrorKind::Usage,
              fmt::format("unknown --arch '{}': dskc builds for sm_80, sm_86, sm_89 and sm_90", arch));
}

std::string cuda_include_dir() {
  if (const char* e = std::getenv("DSKC_CUDA_INCLUDE"); e && *e) return e;
  return DSKC_CUDA_INCLUDE_DIRS;
}

std::vector<std::string> nvrtc_options(const CompileOptions& opt) {
  check_arch(opt.arch);
  std::vector<std::string> o;
  // sm_90 builds for sm_90a, Hopper's architecture-specific target: the same code for every kernel,
  // plus the wgmma and bulk tensor copies gemm_sm90 needs (its PTX and cubin run on sm_90 GPUs only).
  const std::string target = opt.arch == "sm_90" ? std::string("90a") : opt.arch.substr(3);
  if (opt.emit == EmitKind::Cubin) {
    o.push_back("--gpu-architecture=sm_" + target);
    o.push_back("-Xptxas=-v");
  } else {
    o.push_back("--gpu-architecture=compute_" + target);
  }
  o.push_back("--std=c++17");
  o.push_back("-default-device");
  o.push_back("--diag-suppress=177");  // unused generated constants are expected
  const std::string dirs = cuda_include_dir();  // ';'-separated
  size_t a = 0;
  while (a <= dirs.size()) {
    size_t b = dirs.find(';', a);
    if (b == std::string::npos) b = dirs.size();
    if (b > a) o.push_back("-I" + dirs.substr(a, b - a));
    a = b + 1;
  }
  for (const auto& e : opt.extra_options) o.push_back(e);
  return o;
}

std::vector<KernelResources> parse_ptxas_log(const std::string& log) {
  // ptxas prints, per entry: "Compiling entry function 'K'", then "Function properties for F"
  // blocks (F may be K or a device function it calls) each followed by a stack/spill line, and
  // "Used N registers ... M bytes smem" for K. Stack and spills are taken from K's own block.
  std::vector<KernelResources> out;
  std::istringstream in(log);
  std::string line, props_for;
  static const std::regex entry(R"(Compiling entry function '([^']+)')");
  static const std::regex props_head(R"(Function properties for (\S+))");
  static const std::regex props(R"((\d+) bytes stack frame, (\d+) bytes spill stores)");
  static const std::regex regs(R"(Used (\d+) registers)");
  static const std::regex smem(R"((\d+) bytes smem)");
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_search(line, m, entry)) {
      out.push_back({m[1].str()});
      props_for.clear();
      continue;
    }
    if (std::regex_search(line, m, props_head)) {
      props_for = m[1].str();
      continue;
    }
    if (out.empty()) continue;
    auto& k = out.back();
    if (std::regex_search(line, m, props)) {
      if (props_for == k.name) {
        k.stack_bytes = std::stoi(m[1].str());
        k.spill_bytes = std::stoi(m[2].str());
      }
      continue;
    }
    if (std::regex_search(line, m, regs)) {
      k.registers = std::stoi(m[1].str());
      k.shared_bytes = std::regex_search(line, m, smem) ? std::stoi(m[1].str()) : 0;
    }
  }
  return out;
}

std::string annotate_errors(const std::string& log, const std::string& source, const std::string& name) {
  std::vector<std::string> lines;
  {
    std::istringstream in(source);
    std::string l;
    while (std::getline(in, l)) lines.push_back(l);
  }
  std::string out;
  const std::regex loc(std::regex_replace(name, std::regex(R"([.^$|()\[\]{}*+?\\])"), R"(\$&)") +
                       R"(\((\d+)\): (error|catastrophic error))");
  std::istringstream in(log);
  std::string l;
  std::smatch m;
  int shown = 0;
  while (std::getline(in, l) && shown < 10) {
    if (!std::regex_search(l, m, loc)) continue;
    int n = std::stoi(m[1].str());
    out += fmt::format("\n{}\n", l);
    for (int i = std::max(1, n - 2); i <= std::min<int>(lines.size(), n + 2); ++i)
      out += fmt::format("{} {:5} | {}\n", i == n ? ">" : " ", i, lines[i - 1]);
    ++shown;
  }
  return out;
}

CompiledModule nvrtc_compile(const std::string& source, const std::string& name, const CompileOptions& opt,
                             const std::vector<std::pair<std::string, std::string>>& headers) {
  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::string> opts = nvrtc_options(opt);
  std::vector<const char*> copts;
  for (const auto& s : opts) copts.push_back(s.c_str());
  std::vector<const char*> hsrc, hname;
  for (const auto& [n, s] : headers) {
    hname.push_back(n.c_str());
    hsrc.push_back(s.c_str());
  }
  nvrtcProgram prog;
  DSKC_NVRTC_CHECK(nvrtcCreateProgram(&prog, source.c_str(), name.c_str(), static_cast<int>(headers.size()),
                                      hsrc.data(), hname.data()));
  struct Guard {
    nvrtcProgram* p;
    ~Guard() { nvrtcDestroyProgram(p); }
  } guard{&prog};
  nvrtcResult rc = nvrtcCompileProgram(prog, static_cast<int>(copts.size()), copts.data());
  size_t log_size = 0;
  DSKC_NVRTC_CHECK(nvrtcGetProgramLogSize(prog, &log_size));
  std::string log(log_size, '\0');
  if (log_size) DSKC_NVRTC_CHECK(nvrtcGetProgramLog(prog, log.data()));
  while (!log.empty() && log.back() == '\0') log.pop_back();
  if (rc != NVRTC_SUCCESS) {
    throw Error(ErrorKind::Compile, fmt::format("NVRTC failed to compile {} for {} ({}):\n{}\noffending generated "
                                                "source:{}\n(write the source with `dskc compile --emit cuda` "
                                                "or DSKC_DUMP=source)",
                                                name, opt.arch, nvrtcGetErrorString(rc), log,
                                                annotate_errors(log, source, name)));
  }
  CompiledModule m;
  m.arch = opt.arch;
  m.emit = opt.emit;
  m.log = log;
  if (opt.emit == EmitKind::Cubin) {
    size_t n = 0;
    DSKC_NVRTC_CHECK(nvrtcGetCUBINSize(prog, &n));
    m.image.resize(n);
    DSKC_NVRTC_CHECK(nvrtcGetCUBIN(prog, m.image.data()));
    m.resources = parse_ptxas_log(log);
  } else {
    size_t n = 0;
    DSKC_NVRTC_CHECK(nvrtcGetPTXSize(prog, &n));
    m.image.resize(n);
    DSKC_NVRTC_CHECK(nvrtcGetPTX(prog, m.image.data()));
    while (!m.image.empty() && m.image.back() == '\0') m.image.pop_back();
  }
  m.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return m;
}

static const char* grid_name(GridKind g) {
  switch (g) {
    case GridKind::Rows: return "rows";
    case GridKind::AttnRows: return "attn_rows";
    case GridKind::Elementwise: return "elementwise";
    case GridKind::RowTiles: return "row_tiles";
    case GridKind::ColumnTiles: return "column_tiles";
    case GridKind::FlashTiles: return "flash_tiles";
    case GridKind::Persistent: return "persistent";
    case GridKind::Fixed: return "fixed";
    case GridKind::FlashHeads: return "flash_heads";
  }
  return "";
}

std::string make_manifest(const LayerPlan& plan, const CompiledModule& m) {
  nlohmann::ordered_json j;
  j["dskc_version"] = kDskcVersion;
  j["config_hash"] = plan.config_hash;
  j["config"] = nlohmann::ordered_json::parse(to_json_text(plan.cfg));
  j["arch"] = m.arch;
  j["emit"] = m.emit == EmitKind::Cubin ? "cubin" : "ptx";
  j["nvrtc_version"] = nvrtc_version_string();
  j["cache_key"] = m.cache_key;
  auto& ks = j["kernels"] = nlohmann::ordered_json::array();
  for (const auto& k : plan.kernels) {
    nlohmann::ordered_json e;
    e["name"] = k.name;
    e["op"] = k.op;
    e["pass"] = k.pass == Pass::Forward ? "forward" : "backward";
    e["fuses"] = k.fuses;
    e["block"] = k.block;
    e["grid"] = grid_name(k.grid);
    e["rows_per_block"] = k.rows_per_block;
    if (k.dynamic_smem) e["dynamic_shared_bytes"] = k.dynamic_smem;
    for (const auto& r : m.resources) {
      if (r.name != k.name) continue;
      e["registers"] = r.registers;
      e["shared_bytes"] = r.shared_bytes;
      e["stack_bytes"] = r.stack_bytes;
      e["spill_bytes"] = r.spill_bytes;
    }
    ks.push_back(e);
  }
  auto& sv = j["saved"] = nlohmann::ordered_json::array();
  for (const auto& t : plan.saved)
    sv.push_back({{"name", t.name}, {"shape", t.shape}, {"bytes", t.bytes(plan.cfg.batch_size, plan.cfg.max_seq_length)}});
  j["activation_bytes"] = plan.activation_bytes();
  j["workspace_bytes"] = plan.workspace_bytes(plan.cfg.batch_size, plan.cfg.max_seq_length);
  return j.dump(2);
}

namespace {
// DSKC_DUMP=source,ptx,log (any subset) writes what a build produced into $DSKC_DUMP_DIR (default
// the working directory) as dskc_layer_<hash>.{cu,ptx,log}.
bool dump_wants(const char* what) {
  const char* d = std::getenv("DSKC_DUMP");
  return d && std::string(",") .append(d).append(",").find(std::string(",") + what + ",") != std::string::npos;
}
void dump(const std::string& name, const std::string& bytes) {
  const char* dir = std::getenv("DSKC_DUMP_DIR");
  const std::string path = (dir && *dir ? std::string(dir) + "/" : std::string()) + name;
  write_file_atomic(path, bytes);
  std::fprintf(stderr, "dskc: DSKC_DUMP wrote %s\n", path.c_str());
}
}  // namespace

BuildResult build_module(const LayerPlan& plan, const CompileOptions& opt, bool use_cache,
                         const std::string& cache_dir) {
  auto t0 = std::chrono::steady_clock::now();
  BuildResult r;
  EmitOptions eo;
  eo.arch = opt.arch;
  eo.nvrtc_options = nvrtc_options(opt);
  eo.nvrtc_version = nvrtc_version_string();
  r.generated = emit(plan, eo);
  // DSKC_OVERRIDE_SOURCE=file.cu swaps in a hand-edited module source (debugging); the cache key
  // is the hash of the source, so an edited file never collides with a generated one.
  if (const char* ov = std::getenv("DSKC_OVERRIDE_SOURCE"); ov && *ov) {
    r.generated.source = read_file_bytes(ov);
    std::fprintf(stderr, "dskc: DSKC_OVERRIDE_SOURCE: using %s instead of the generated source\n", ov);
  }
  const std::string name = fmt::format("dskc_layer_{}.cu", plan.config_hash);
  if (dump_wants("source")) dump(name, r.generated.source);
  CacheKeyInputs ki{r.generated.source, eo.nvrtc_options, opt.arch, opt.emit == EmitKind::Cubin ? "cubin" : "ptx",
                    eo.nvrtc_version, kDskcVersion};
  const std::string key = cache_key(ki);
  if (use_cache) {
    KernelCache cache(cache_dir.empty() ? default_cache_dir() : std::filesystem::path(cache_dir));
    if (auto e = cache.load(key)) {
      r.module.arch = opt.arch;
      r.module.emit = opt.emit;
      r.module.image = std::move(e->image);
      r.module.manifest_json = std::move(e->manifest_json);
      r.module.cache_key = key;
      r.module.from_cache = true;
      // Resources are recorded in the manifest.
      auto j = nlohmann::json::parse(r.module.manifest_json, nullptr, false);
      if (j.is_object() && j.contains("kernels"))
        for (const auto& k : j["kernels"])
          r.module.resources.push_back({k.value("name", ""), k.value("registers", -1), k.value("shared_bytes", -1),
                                        k.value("stack_bytes", -1), k.value("spill_bytes", -1)});
      r.module.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      return r;
    }
  }
  r.module = nvrtc_compile(r.generated.source, name, opt);
  if (dump_wants("log")) dump(fmt::format("dskc_layer_{}.log", plan.config_hash), r.module.log);
  if (dump_wants("ptx")) {
    CompileOptions po = opt;
    po.emit = EmitKind::Ptx;
    dump(fmt::format("dskc_layer_{}.ptx", plan.config_hash), nvrtc_compile(r.generated.source, name, po).image);
  }
  r.module.cache_key = key;
  r.module.manifest_json = make_manifest(plan, r.module);
  if (use_cache) {
    KernelCache cache(cache_dir.empty() ? default_cache_dir() : std::filesystem::path(cache_dir));
    cache.store(key, CacheEntry{r.module.image, r.module.manifest_json});
  }
  r.module.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

CompiledModule compile_cached(const std::string& source, const std::string& name, const CompileOptions& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string emit = opt.emit == EmitKind::Cubin ? "cubin" : "ptx";
  const std::string key =
      cache_key(CacheKeyInputs{source, nvrtc_options(opt), opt.arch, emit, nvrtc_version_string(), kDskcVersion});
  KernelCache cache(default_cache_dir());
  CompiledModule m;
  if (auto e = cache.load(key)) {
    m.arch = opt.arch;
    m.emit = opt.emit;
    m.image = std::move(e->image);
    m.manifest_json = std::move(e->manifest_json);
    m.from_cache = true;
  } else {
    m = nvrtc_compile(source, name, opt);
    nlohmann::ordered_json j;
    j["module"] = name;
    j["arch"] = opt.arch;
    j["emit"] = emit;
    j["kernels"] = nlohmann::json::array();
    m.manifest_json = j.dump();
    cache.store(key, CacheEntry{m.image, m.manifest_json});
  }
  m.cache_key = key;
  m.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return m;
}

}  // namespace dskc
