// `dskc bench --versus SPEC`: a paired A/B of two layers in one process. Layer A is the command
// line's; layer B is A with SPEC's changes: layer switches (the memory flags, stochastic_mode,
// Post-LN, bf16, tanh GELU) and DSKC_* environment variables, which the plan and the runtime read
// when B is built. The timed part alternates blocks of steps of A and of B (A first in even pairs, B
// first in odd ones, so a drift of the GPU's clock through the run hits both alike) and compares
// each pair's two blocks: the ratio's median and a distribution-free interval for it. Separate
// processes, as bench/layer_matrix.py runs them, differ by ±1-3% from each other for the same code
// (bench/NOTES.md v30, v37), which is the size of what the SPEC's targets ask about.
// Pure and header-only so the CPU tests drive the parsing and the statistics.
#pragma once
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "compiler/config.h"
#include "compiler/errors.h"

namespace dskc::cli {

struct VersusSpec {
  std::vector<std::string> switches;                        // in SPEC's order, as given
  std::vector<std::pair<std::string, std::string>> env;     // DSKC_NAME, value ("" allowed: the default)
  std::string text;                                         // SPEC itself, for the output
};

// The words SPEC may hold besides DSKC_NAME=VALUE.
inline const std::vector<std::string>& versus_switch_names() {
  static const std::vector<std::string> names = {
      "attention_dropout_checkpoint", "normalize_invertible", "gelu_checkpoint", "all_memory_flags",
      "stochastic_mode",              "post_layer_norm",      "bf16",            "tanh_gelu"};
  return names;
}

// The DSKC_* variables that change what a layer runs. Each is read when the layer is built (the plan,
// compiler/plan.cpp; the TransformerLayer constructor and its Gemm, runtime/*.cpp; the module
// build's source override, compiler/nvrtc_compile.cpp), so it acts on B alone. Any other DSKC_*
// variable is read elsewhere (the trainer, the cache, dumps), later (B would run as A: an
// experiment's switch read at each backward call, as in session 81), or by nothing.
// tests/cpu/test_bench_versus.cpp checks this list against the sources.
inline const std::vector<std::string>& versus_variable_names() {
  static const std::vector<std::string> names = {
      "DSKC_ATTENTION",      "DSKC_ATTN_BITS_BWD",   "DSKC_ATTN_BWD",          "DSKC_ATTN_BWD_PERSIST",
      "DSKC_ATTN_DQ",        "DSKC_ATTN_DQ_GEMM",    "DSKC_ATTN_FWD",          "DSKC_ATTN_FWD_STAGES",
      "DSKC_ATTN_MASK",      "DSKC_ATTN_STORE",      "DSKC_BIAS_GRAD",         "DSKC_DGRAD_GEMM",
      "DSKC_FFN_GEMM",       "DSKC_GELU",            "DSKC_GELU_CKPT_SCRATCH", "DSKC_GELU_SAVE",
      "DSKC_GEMM_GELU_REGIONS", "DSKC_GEMM_TUNE_LOG", "DSKC_LAYER_GRAPHS",     "DSKC_LAYER_STREAMS",
      "DSKC_LINEAR_GEMM",    "DSKC_LN_BITS_BLOCKS",  "DSKC_LN_BWD",            "DSKC_OUTPUT_GEMM",
      "DSKC_SM90_WEIGHT",    "DSKC_OVERRIDE_SOURCE", "DSKC_LAYER_REGEN",       "DSKC_OUTPUT_BIAS_EARLY",
      "DSKC_GEMM_TILES"};
  return names;
}

// SPEC: comma-separated items, each a switch word or DSKC_NAME=VALUE. Throws Error(Usage) naming
// the item for anything else, an empty item, a variable given twice, or a DSKC_* variable that is
// not read when a layer is built (versus_variable_names: B would be timed as A).
inline VersusSpec parse_versus(const std::string& spec) {
  VersusSpec v;
  v.text = spec;
  auto usage = [&](const std::string& why) {
    std::string words;
    for (const auto& n : versus_switch_names()) words += (words.empty() ? "" : ", ") + n;
    return Error(ErrorKind::Usage, fmt::format("--versus {}: {} (items: {} or DSKC_NAME=VALUE, comma-separated)",
                                               spec, why, words));
  };
  if (spec.empty()) throw usage("nothing to compare against");
  size_t start = 0;
  while (start <= spec.size()) {
    const size_t end = std::min(spec.find(',', start), spec.size());
    const std::string item = spec.substr(start, end - start);
    start = end + 1;
    if (item.empty()) throw usage("an empty item");
    const size_t eq = item.find('=');
    if (eq != std::string::npos) {
      const std::string name = item.substr(0, eq);
      if (name.rfind("DSKC_", 0) != 0 || name.size() == 5)
        throw usage(fmt::format("'{}': only DSKC_* environment variables can be set", item));
      for (const auto& [n, value] : v.env)
        if (n == name) throw usage(fmt::format("{} given twice", name));
      const auto& vars = versus_variable_names();
      if (std::find(vars.begin(), vars.end(), name) == vars.end()) {
        std::string known;
        for (const auto& k : vars) known += (known.empty() ? "" : ", ") + k;
        throw usage(fmt::format("'{}': {} is not read when a layer is built, so B would run as A (the variables "
                                "that are: {})",
                                item, name, known));
      }
      v.env.emplace_back(name, item.substr(eq + 1));
      continue;
    }
    const auto& names = versus_switch_names();
    if (std::find(names.begin(), names.end(), item) == names.end()) throw usage(fmt::format("unknown item '{}'", item));
    v.switches.push_back(item);
  }
  return v;
}

// Layer A's config with SPEC's switches on. Throws Error(Usage) when a switch changes nothing
// (A has it already: the comparison would not be what SPEC says) and Error(Config) when the result
// is not a valid layer. (So B differs from A by every switch; a SPEC of variables only gives A's
// config, and the variables act when B is built.)
inline LayerConfig versus_config(LayerConfig c, const VersusSpec& v) {
  for (const auto& s : v.switches) {
    const LayerConfig before = c;
    if (s == "attention_dropout_checkpoint") c.attn_dropout_checkpoint = true;
    if (s == "normalize_invertible") c.normalize_invertible = true;
    if (s == "gelu_checkpoint") c.gelu_checkpoint = true;
    if (s == "all_memory_flags") c.attn_dropout_checkpoint = c.normalize_invertible = c.gelu_checkpoint = true;
    if (s == "stochastic_mode") c.stochastic_mode = true;
    if (s == "post_layer_norm") c.pre_layer_norm = false;
    if (s == "bf16") c.fp16 = false, c.bf16 = true;
    if (s == "tanh_gelu") c.gelu_approximation = GeluForm::Tanh;
    if (c == before)
      throw Error(ErrorKind::Usage, fmt::format("--versus {}: the layer has {} already", v.text, s));
  }
  validate(c, "--versus " + v.text);
  return c;
}

struct PairedSummary {
  size_t pairs = 0;
  double a_ms = 0, b_ms = 0;  // medians of the blocks' per-step times
  double rel = 0;             // median of b/a over the pairs, minus 1
  double lo = 0, hi = 0;      // ~95% interval of that median (order statistics), minus 1
  size_t b_faster = 0;        // pairs whose B block was the shorter
};

inline double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// a_ms[i], b_ms[i]: pair i's per-step times. The interval for the median ratio is distribution-free:
// sorted ratios r(1) <= ... <= r(n), ranks n/2 ∓ 0.98·√n (the normal approximation of the binomial
// with p = 1/2), the whole range when n < 6. Throws Error(Usage) for no pairs or unequal lengths.
inline PairedSummary summarize_pairs(const std::vector<double>& a_ms, const std::vector<double>& b_ms) {
  if (a_ms.empty() || a_ms.size() != b_ms.size())
    throw Error(ErrorKind::Usage, "summarize_pairs: need as many A blocks as B blocks, at least one");
  PairedSummary s;
  s.pairs = a_ms.size();
  std::vector<double> r(s.pairs);
  for (size_t i = 0; i < s.pairs; ++i) {
    r[i] = b_ms[i] / a_ms[i];
    if (b_ms[i] < a_ms[i]) ++s.b_faster;
  }
  s.a_ms = median_of(a_ms);
  s.b_ms = median_of(b_ms);
  s.rel = median_of(r) - 1;
  std::sort(r.begin(), r.end());
  const double n = static_cast<double>(s.pairs), half = 0.98 * std::sqrt(n);
  size_t j = 1, k = s.pairs;  // 1-based ranks
  if (s.pairs >= 6) {
    j = static_cast<size_t>(std::max(1.0, std::floor(n / 2 - half)));
    k = static_cast<size_t>(std::min(n, std::ceil(n / 2 + 1 + half)));
  }
  s.lo = r[j - 1] - 1;
  s.hi = r[k - 1] - 1;
  return s;
}

}  // namespace dskc::cli
