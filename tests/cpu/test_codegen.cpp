// Compiler tests that need no GPU (SPEC §3, STYLE "Tests"): emit() is byte-stable and its
// provenance header names what built it; every template compiles on its own through NVRTC for
// sm_80 and sm_90 in fp32/fp16/bf16 (and each op template instantiates its plan kernels with no
// other op template present); a covering matrix of whole generated modules compiles to cubins
// without spills; the plan's kernel lists and exact activation bytes per memory flag;
// float_literal round trips; the NVRTC error path and the ptxas log parser.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "compiler/codegen.h"
#include "compiler/errors.h"
#include "compiler/nvrtc_compile.h"
#include "compiler/plan.h"
#include "compiler/templates.h"
#include "compiler/version.h"
#include "test_util.h"

using namespace dskc;

using dskc_test::error_of;

namespace {

// Memory flags as a bit set, for compact test tables.
enum Flags : unsigned { kNoFlag = 0, kAttnCkpt = 1, kInvertible = 2, kGeluCkpt = 4, kAllFlags = 7 };

// The examples/bert_large_layer.json layer: BERT-Large, fp16, Pre-LN, dropout 0.1.
LayerConfig bert_large() {
  LayerConfig c;
  c.batch_size = 64;
  c.max_seq_length = 128;
  c.hidden_size = 1024;
  c.heads = 16;
  c.intermediate_size = 4096;
  c.attn_dropout_ratio = 0.1;
  c.hidden_dropout_ratio = 0.1;
  c.num_hidden_layers = 24;
  c.initializer_range = 0.02;
  c.seed = 42;
  c.fp16 = true;
  return c;
}

LayerConfig with_flags(LayerConfig c, unsigned f) {
  c.attn_dropout_checkpoint = f & kAttnCkpt;
  c.normalize_invertible = f & kInvertible;
  c.gelu_checkpoint = f & kGeluCkpt;
  return c;
}

LayerConfig with_dtype(LayerConfig c, DType t) {
  c.fp16 = t == DType::F16;
  c.bf16 = t == DType::BF16;
  return c;
}

// BERT-Large with one combination of the plan sweeps' axes.
LayerConfig bert_large_variant(DType t, bool pre_ln, unsigned flags, double attn_drop, double hidden_drop) {
  LayerConfig c = with_dtype(with_flags(bert_large(), flags), t);
  c.pre_layer_norm = pre_ln;
  c.attn_dropout_ratio = attn_drop;
  c.hidden_dropout_ratio = hidden_drop;
  return c;
}

std::vector<std::string> kernel_names(const LayerPlan& p) {
  std::vector<std::string> v;
  for (const auto& k : p.kernels) v.push_back(k.name);
  return v;
}

bool has_kernel(const LayerPlan& p, const std::string& name) { return p.find_kernel(name) != nullptr; }

// The kernels of a wgmma-backward plan with the dQ GEMM, less attn_dq_wgmma (its dQ GEMM, a plan kernel;
// cuBLAS's batched GEMM, DSKC_ATTN_DQ_GEMM=cublas, is none): what a plan without the dQ GEMM shares with it.
std::vector<std::string> without_dq_wgmma(const LayerPlan& p) {
  std::vector<std::string> v = kernel_names(p);
  REQUIRE(p.attn_dq_wgmma);
  REQUIRE(std::count(v.begin(), v.end(), "attn_dq_wgmma") == 1);
  v.erase(std::find(v.begin(), v.end(), "attn_dq_wgmma"));
  return v;
}

// Plans with an explicit attention path and dropout-mask source (make_plan(c) alone would honour
// DSKC_ATTENTION and DSKC_ATTN_MASK).
LayerPlan fused_plan(const LayerConfig& c, AttnMask mask = AttnMask::Inline) {
  return make_plan(c, {AttentionPath::FusedWhereSupported, mask});
}
// stochastic_mode's single-pass backward (DSKC_ATTN_DQ=atomic) where the config allows it.
LayerPlan atomic_dq_plan(const LayerConfig& c) {
  return make_plan(c, {AttentionPath::FusedWhereSupported, AttnMask::Inline, AttnDq::Atomic});
}
LayerPlan unfused_plan(const LayerConfig& c) { return make_plan(c, {AttentionPath::Unfused, AttnMask::Inline}); }
// Plan options with fused attention for `arch` (the rest as the callers set them).
PlanOptions fused_options(const std::string& arch) {
  PlanOptions o;
  o.attention = AttentionPath::FusedWhereSupported;
  o.arch = arch;
  return o;
}
// The plan for an sm_90 target, whose FFN GELU GEMMs are gemm_sm90 kernels where the layer allows
// (and with LinearGemm::Sm90 the forward's other linear GEMMs too).
LayerPlan sm90_plan(const LayerConfig& c, FfnGemm ffn = FfnGemm::Sm90, LinearGemm lin = LinearGemm::Cublas,
                    GeluSave save = GeluSave::Grad, Sm90Weight weight = Sm90Weight::InPlace) {
  PlanOptions o = fused_options("sm_90");
  o.attn_mask = AttnMask::Inline;
  o.ffn_gemm = ffn;
  o.linear_gemm = lin;
  o.gelu_save = save;
  o.sm90_weight = weight;
  return make_plan(c, o);
}

// A bad value of an environment switch the plan reads: make_plan(bert_large()) fails with a config
// error naming "VAR=value:" and both quoted words, the same message as the variable's own reader.
template <class Reader>
void check_env_error(const char* var, const char* bad, const char* word1, const char* word2, Reader reader) {
  CAPTURE(bad);
  dskc_test::ScopedEnv env(var, bad);
  const std::string m = dskc_test::error_of([] { make_plan(bert_large()); }, ErrorKind::Config);
  CHECK(m.find(std::string(var) + "=" + bad + ":") != std::string::npos);
  CHECK(m.find(std::string("\"") + word1 + "\"") != std::string::npos);
  CHECK(m.find(std::string("\"") + word2 + "\"") != std::string::npos);
  CHECK(dskc_test::error_of(reader, ErrorKind::Config) == m);
}

size_t count_of(const std::string& hay, const std::string& needle) {
  size_t n = 0;
  for (size_t p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + 1)) ++n;
  return n;
}

std::string join(const std::vector<std::string>& v, const std::string& sep) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + v[i];
  return s;
}

// Every embedded template by its path, plus the generated constants header: what a
// translation unit that #includes templates needs from NVRTC.
std::vector<std::pair<std::string, std::string>> template_headers(const LayerPlan& plan) {
  std::vector<std::pair<std::string, std::string>> h;
  for (const auto& t : embedded_templates()) h.emplace_back(t.path, t.text);
  h.emplace_back("dskc_config.cuh", emit_config_header(plan));
  return h;
}

// The generated wrapper of one kernel (comment, static_assert, extern "C" kernel).
std::string wrapper_of(const std::string& source, const std::string& kernel) {
  const auto a = source.find("\n// " + kernel + " (");
  REQUIRE_MESSAGE(a != std::string::npos, "no wrapper for " << kernel);
  const auto e = source.find("\n}\n", a);
  REQUIRE(e != std::string::npos);
  return source.substr(a + 1, e + 3 - (a + 1));
}


}  // namespace

// ---------------------------------------------------------------------------------------------
// emit(): byte stability, sensitivity, provenance

TEST_CASE("emit is byte-stable: same plan twice, and a plan rebuilt from the same config") {
  EmitOptions eo;
  eo.arch = "sm_80";
  eo.nvrtc_options = nvrtc_options({"sm_80", EmitKind::Cubin, {}});
  eo.nvrtc_version = nvrtc_version_string();
  for (unsigned f : {kNoFlag, kAllFlags}) {
    CAPTURE(f);
    const LayerPlan plan = make_plan(with_flags(bert_large(), f));
    const GeneratedModule a = emit(plan, eo), b = emit(plan, eo);
    CHECK(a.source == b.source);
    CHECK(a.config_header == b.config_header);
    CHECK(a.kernel_names == b.kernel_names);
    CHECK(a.templates == b.templates);
    const GeneratedModule c = emit(make_plan(with_flags(bert_large(), f)), eo);
    CHECK(a.source == c.source);
    CHECK(emit_config_header(plan) == a.config_header);
  }
}

TEST_CASE("different configs and emit options give different sources") {
  const LayerConfig base = bert_large();
  std::vector<std::pair<std::string, LayerConfig>> variants;
  auto add = [&](const std::string& what, auto&& change) {
    LayerConfig c = base;
    change(c);
    variants.emplace_back(what, c);
  };
  add("base", [](LayerConfig&) {});
  add("hidden", [](LayerConfig& c) { c.hidden_size = 768, c.heads = 12, c.intermediate_size = 3072; });
  add("heads", [](LayerConfig& c) { c.heads = 8; });
  add("intermediate", [](LayerConfig& c) { c.intermediate_size = 3072; });
  add("seq", [](LayerConfig& c) { c.max_seq_length = 512; });
  add("batch", [](LayerConfig& c) { c.batch_size = 16; });
  add("bf16", [](LayerConfig& c) { c.fp16 = false, c.bf16 = true; });
  add("fp32", [](LayerConfig& c) { c.fp16 = false; });
  add("post-ln", [](LayerConfig& c) { c.pre_layer_norm = false; });
  add("attn ckpt", [](LayerConfig& c) { c.attn_dropout_checkpoint = true; });
  add("invertible", [](LayerConfig& c) { c.normalize_invertible = true; });
  add("gelu ckpt", [](LayerConfig& c) { c.gelu_checkpoint = true; });
  add("stochastic", [](LayerConfig& c) { c.stochastic_mode = true; });
  add("eps", [](LayerConfig& c) { c.layer_norm_eps = 1e-5; });
  add("attn dropout", [](LayerConfig& c) { c.attn_dropout_ratio = 0.2; });
  add("hidden dropout", [](LayerConfig& c) { c.hidden_dropout_ratio = 0.0; });
  add("tanh", [](LayerConfig& c) { c.gelu_approximation = GeluForm::Tanh; });
  add("inference", [](LayerConfig& c) { c.training = false; });
  std::map<std::string, std::string> seen;  // source -> variant
  for (const auto& [what, c] : variants) {
    CAPTURE(what);
    const GeneratedModule m = emit(make_plan(c));
    auto [it, fresh] = seen.emplace(m.source, what);
    CHECK_MESSAGE(fresh, what << " generates the same source as " << it->second);
  }
  // The options a module records are part of its source too.
  const LayerPlan plan = make_plan(base);
  EmitOptions a, b;
  a.arch = "sm_80";
  b.arch = "sm_90";
  CHECK(emit(plan, a).source != emit(plan, b).source);
  b = a;
  b.nvrtc_options = {"--use_fast_math"};
  CHECK(emit(plan, a).source != emit(plan, b).source);
}

TEST_CASE("provenance header names dskc version, config hash, arch, NVRTC version, options, flags") {
  LayerConfig c = with_flags(bert_large(), kAttnCkpt | kGeluCkpt);
  const LayerPlan plan = make_plan(c);
  CompileOptions co{"sm_80", EmitKind::Cubin, {"-lineinfo"}};
  EmitOptions eo;
  eo.arch = co.arch;
  eo.nvrtc_options = nvrtc_options(co);
  eo.nvrtc_version = nvrtc_version_string();
  const GeneratedModule m = emit(plan, eo);
  // The header is the leading comment block, before the first inlined template.
  const std::string header = m.source.substr(0, m.source.find("\n// ----------------"));
  INFO(header);
  CHECK(m.source.rfind("// ==== dskc generated module ====\n", 0) == 0);
  CHECK(header.find(std::string("// dskc ") + kDskcVersion + " | config " + plan.config_hash + " | arch sm_80 | NVRTC " +
                    eo.nvrtc_version + "\n") != std::string::npos);
  CHECK(header.find("// options: " + join(eo.nvrtc_options, " ") + "\n") != std::string::npos);
  CHECK(header.find("-lineinfo") != std::string::npos);
  CHECK(header.find("--gpu-architecture=sm_80") != std::string::npos);
  CHECK(header.find("// flags: attn_dropout_checkpoint on, normalize_invertible off, gelu_checkpoint on, "
                    "stochastic_mode off\n") != std::string::npos);
  CHECK(header.find("hidden 1024, heads 16 (head dim 64), intermediate 4096, batch <= 64, seq <= 128, fp16, "
                    "Pre-LN") != std::string::npos);
  CHECK(header.find("// kernels (" + std::to_string(plan.kernels.size()) + "): " + join(kernel_names(plan), " ")) !=
        std::string::npos);
  CHECK(plan.config_hash.size() == 16);
  CHECK(plan.config_hash == config_hash(c));
  // Every kernel has one extern "C" wrapper, in plan order; every template is inlined once.
  CHECK(m.kernel_names == kernel_names(plan));
  size_t last = 0;
  for (const auto& k : plan.kernels) {
    CAPTURE(k.name);
    const std::string bounds = std::to_string(k.block) + (k.min_blocks.empty() ? "" : ", " + k.min_blocks);
    const std::string decl = "__launch_bounds__(" + bounds + ") " + k.name + "(const " + k.params_type + " p) {\n  " +
                             k.instantiation + "(p);\n}";
    CHECK(count_of(m.source, decl) == 1);
    const size_t at = m.source.find(decl);
    CHECK(at > last);
    last = at;
  }
  for (const auto& t : m.templates) CHECK(count_of(m.source, "// ---------------- " + t + " ----------------\n") == 1);
  CHECK(m.templates.front() == "common/philox.cuh");  // dskc_config.cuh's own include comes first
  CHECK(std::find(m.templates.begin(), m.templates.end(), "dskc_config.cuh") != m.templates.end());
  // Without emit options the header says so rather than inventing values.
  CHECK(emit(plan).source.find("| NVRTC unknown") != std::string::npos);
}

TEST_CASE("generated constants specialize the layer") {
  LayerConfig c = bert_large();
  std::string h = emit_config_header(make_plan(c));
  for (const char* line : {"using T = __half;", "constexpr int kHidden = 1024;", "constexpr int kHeads = 16;",
                           "constexpr int kHeadDim = 64;", "constexpr int kInter = 4096;", "constexpr int kBatch = 64;",
                           "constexpr int kMaxSeq = 128;", "constexpr float kLayerNormEps = 1e-12f;",
                           "constexpr bool kPreLayerNorm = true;", "constexpr bool kAttnDropoutOn = true;",
                           "constexpr bool kHiddenDropoutOn = true;", "constexpr uint32_t kAttnDropoutThreshold = 6553u;",
                           "constexpr float kAttnDropoutScale = 1.1111112f;"})
    CHECK_MESSAGE(h.find(line) != std::string::npos, line << "\n" << h);
  // A ratio of 0 and inference both turn dropout off at compile time.
  c.attn_dropout_ratio = 0;
  h = emit_config_header(make_plan(c));
  CHECK(h.find("constexpr bool kAttnDropoutOn = false;") != std::string::npos);
  CHECK(h.find("constexpr bool kHiddenDropoutOn = true;") != std::string::npos);
  c = bert_large();
  c.training = false;
  h = emit_config_header(make_plan(c));
  CHECK(h.find("constexpr bool kAttnDropoutOn = false;") != std::string::npos);
  CHECK(h.find("constexpr bool kHiddenDropoutOn = false;") != std::string::npos);
  CHECK(h.find("constexpr bool kTraining = false;") != std::string::npos);
  c = with_dtype(bert_large(), DType::BF16);
  c.pre_layer_norm = false;
  c.gelu_approximation = GeluForm::Tanh;
  h = emit_config_header(make_plan(c));
  CHECK(h.find("using T = __nv_bfloat16;") != std::string::npos);
  CHECK(h.find("constexpr bool kPreLayerNorm = false;") != std::string::npos);
  CHECK(h.find("constexpr bool kGeluTanh = true;") != std::string::npos);
  CHECK(emit_config_header(make_plan(with_dtype(bert_large(), DType::F32))).find("using T = float;") !=
        std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// float_literal

TEST_CASE("float_literal prints floats that round-trip") {
  CHECK(float_literal(0.1f) == "0.1f");
  CHECK(float_literal(1.0f) == "1.0f");
  CHECK(float_literal(1e-12f) == "1e-12f");
  CHECK(float_literal(0.5f) == "0.5f");
  for (float v : {0.1f, 1.0f, 1e-12f, 0.5f, 1e-5f, 1.0f / 3.0f, 1.1111112f, 3.4028235e38f, 1.17549435e-38f, 1e-45f,
                  -2.5f, 0.0f, 100000000.0f, 123456.79f}) {
    const std::string s = float_literal(v);
    CAPTURE(s);
    REQUIRE(s.size() >= 2);
    CHECK(s.back() == 'f');
    CHECK(s.find_first_of(".eE") != std::string::npos);  // a floating literal, never an integer
    CHECK(std::strtof(s.substr(0, s.size() - 1).c_str(), nullptr) == v);
  }
}

// ---------------------------------------------------------------------------------------------
// Plan: kernel lists per flag, saved tensors and exact activation bytes

namespace {
// The kernel list of a training layer with no memory flag. fp16/bf16 take the bias gradients
// from cuBLASLt (column-sum GEMMs): no bias_grad_qkv and no param_grad_reduce of biases;
// dropout_bias_grad_ffn_out exists only to apply the hidden-dropout mask and the attention
// output's mask is applied inside layernorm_bwd_attn.
// fp32 sums bias-gradient partials (dropout_bias_grad_*, bias_gelu_bwd, bias_grad_qkv) and
// reduces them with param_grad_reduce_{hidden,qkv,inter}, with or without dropout.
// With fused attention (fp16/bf16, head dim 64 here) attn_flash_fwd replaces the softmax forward
// and attn_flash_bwd_{dot,dkdv,dq} the softmax backward.
std::vector<std::string> expected_kernels(bool pre_ln, DType t, bool hidden_dropout, bool fused = false) {
  const bool partials = t == DType::F32;
  const bool masks = partials || hidden_dropout;
  std::vector<std::string> v;
  auto add = [&](bool on, const char* name) {
    if (on) v.push_back(name);
  };
  add(pre_ln, "layernorm_fwd_norm");
  add(!fused, "attn_softmax_dropout_fwd");
  add(fused, "attn_flash_fwd");
  add(true, "bias_dropout_residual_layernorm_fwd_attn");
  add(true, "bias_gelu_fwd");
  add(pre_ln, "bias_dropout_residual_fwd_ffn");
  add(!pre_ln, "bias_dropout_residual_layernorm_fwd_ffn");
  add(!pre_ln, "layernorm_bwd_norm");
  add(masks, "dropout_bias_grad_ffn_out");
  add(true, "bias_gelu_bwd");
  add(true, "layernorm_bwd_attn");
  add(partials, "dropout_bias_grad_attn_out");
  add(!fused, "attn_softmax_dropout_bwd");
  add(fused, "attn_flash_bwd_dot");
  add(fused, "attn_flash_bwd_dkdv");  // + dSᵀ for the dQ GEMM (the default AttnDq::Gemm)
  add(partials, "bias_grad_qkv");
  add(pre_ln, "layernorm_bwd_norm");
  add(partials, "param_grad_reduce_hidden");
  add(true, "param_grad_reduce_layernorm");
  add(partials, "param_grad_reduce_qkv");
  add(partials, "param_grad_reduce_inter");
  return v;
}

const char* const kBiasReduceKernels[] = {"bias_grad_qkv", "param_grad_reduce_hidden", "param_grad_reduce_qkv",
                                          "param_grad_reduce_inter"};
}  // namespace

TEST_CASE("plan kernel lists follow LN placement, the memory flags and dropout") {
  const LayerPlan pre = unfused_plan(bert_large());  // fp16, hidden dropout 0.1, unfused attention
  CHECK(kernel_names(pre) ==
        std::vector<std::string>{"layernorm_fwd_norm", "attn_softmax_dropout_fwd",
                                 "bias_dropout_residual_layernorm_fwd_attn", "bias_gelu_fwd",
                                 "bias_dropout_residual_fwd_ffn", "dropout_bias_grad_ffn_out", "bias_gelu_bwd",
                                 "layernorm_bwd_attn", "attn_softmax_dropout_bwd", "layernorm_bwd_norm",
                                 "param_grad_reduce_layernorm"});
  const LayerPlan pre32 = make_plan(with_dtype(bert_large(), DType::F32));  // fp32: always unfused
  CHECK_FALSE(pre32.fused_attention);
  CHECK_FALSE(pre.fused_attention);
  CHECK(kernel_names(pre32) ==
        std::vector<std::string>{"layernorm_fwd_norm", "attn_softmax_dropout_fwd",
                                 "bias_dropout_residual_layernorm_fwd_attn", "bias_gelu_fwd",
                                 "bias_dropout_residual_fwd_ffn", "dropout_bias_grad_ffn_out", "bias_gelu_bwd",
                                 "layernorm_bwd_attn", "dropout_bias_grad_attn_out", "attn_softmax_dropout_bwd",
                                 "bias_grad_qkv", "layernorm_bwd_norm", "param_grad_reduce_hidden",
                                 "param_grad_reduce_layernorm", "param_grad_reduce_qkv", "param_grad_reduce_inter"});
  // Forward kernels come first, then backward.
  for (const LayerPlan* p : {&pre, &pre32}) {
    bool backward_seen = false;
    for (const auto& k : p->kernels) {
      if (k.pass == Pass::Backward) backward_seen = true;
      CHECK_MESSAGE(!(backward_seen && k.pass == Pass::Forward), k.name << " is forward after a backward kernel");
    }
  }

  LayerConfig post_cfg = bert_large();
  post_cfg.pre_layer_norm = false;
  const LayerPlan post = unfused_plan(post_cfg);
  CHECK(has_kernel(post, "bias_dropout_residual_layernorm_fwd_ffn"));
  CHECK_FALSE(has_kernel(post, "bias_dropout_residual_fwd_ffn"));
  CHECK_FALSE(has_kernel(post, "layernorm_fwd_norm"));
  CHECK(has_kernel(pre, "layernorm_fwd_norm"));
  CHECK_FALSE(has_kernel(pre, "bias_dropout_residual_layernorm_fwd_ffn"));
  // Post-LN: the output LayerNorm's backward runs first and the attention LayerNorm adds the
  // residual gradient to dy; Pre-LN adds it to dx.
  CHECK(kernel_names(post) ==
        std::vector<std::string>{"attn_softmax_dropout_fwd", "bias_dropout_residual_layernorm_fwd_attn",
                                 "bias_gelu_fwd", "bias_dropout_residual_layernorm_fwd_ffn", "layernorm_bwd_norm",
                                 "dropout_bias_grad_ffn_out", "bias_gelu_bwd", "layernorm_bwd_attn",
                                 "attn_softmax_dropout_bwd", "param_grad_reduce_layernorm"});
  CHECK(kernel_names(make_plan(with_dtype(post_cfg, DType::F32))) ==
        std::vector<std::string>{"attn_softmax_dropout_fwd", "bias_dropout_residual_layernorm_fwd_attn",
                                 "bias_gelu_fwd", "bias_dropout_residual_layernorm_fwd_ffn", "layernorm_bwd_norm",
                                 "dropout_bias_grad_ffn_out", "bias_gelu_bwd", "layernorm_bwd_attn",
                                 "dropout_bias_grad_attn_out", "attn_softmax_dropout_bwd", "bias_grad_qkv",
                                 "param_grad_reduce_hidden", "param_grad_reduce_layernorm", "param_grad_reduce_qkv",
                                 "param_grad_reduce_inter"});
  CHECK(post.find_kernel("layernorm_bwd_attn")->instantiation.find("kLnAddToDy") != std::string::npos);
  CHECK(pre.find_kernel("layernorm_bwd_attn")->instantiation.find("kLnAddToDx") != std::string::npos);
  CHECK(post.find_kernel("layernorm_bwd_norm")->instantiation.find("kLnNoResidual") != std::string::npos);

  for (DType t : {DType::F16, DType::BF16, DType::F32})
    for (bool pre_ln : {true, false})
      for (unsigned f = 0; f <= kAllFlags; ++f)
        for (double attn_drop : {0.1, 0.0})
          for (double hidden_drop : {0.1, 0.0})
            for (AttentionPath path : {AttentionPath::FusedWhereSupported, AttentionPath::Unfused}) {
            const bool fused = path == AttentionPath::FusedWhereSupported && t != DType::F32;
            CAPTURE(fused);
            CAPTURE(dtype_name(t));
            CAPTURE(pre_ln);
            CAPTURE(f);
            CAPTURE(attn_drop);
            CAPTURE(hidden_drop);
            LayerConfig c = bert_large_variant(t, pre_ln, f, attn_drop, hidden_drop);
            const LayerPlan p = make_plan(c, {path, AttnMask::Inline});
            CHECK(p.fused_attention == fused);
            CHECK(p.bias_grad_in_gemm == (t != DType::F32));
            // gelu_checkpoint: no kernel of its own; the GELU backward also rebuilds GELU(h). With the
            // inter_b gradient from cuBLASLt (fp16/bf16) it is an elementwise pass, else 8-row tiles
            // that also write the bias partials.
            const KernelInfo* gk = p.find_kernel("bias_gelu_bwd");
            REQUIRE(gk);
            const std::string ck = f & kGeluCkpt ? ", true>" : ">";
            CHECK(gk->instantiation == (t == DType::F32 ? "bias_gelu_bwd_impl<kInter, true" + ck
                                                        : "bias_gelu_bwd_elem_impl<kInter" + ck));
            CHECK(gk->grid == (t == DType::F32 ? GridKind::RowTiles : GridKind::Elementwise));
            // attn_dropout_checkpoint recomputes dropout(P) on the unfused path only: the fused
            // backward regenerates the mask itself and keeps no P.
            const bool adc = (f & kAttnCkpt) && attn_drop > 0 && !fused;
            CHECK(has_kernel(p, "attn_dropout_recompute") == adc);
            // Fused: the backward reads the keep mask as bits; the forward saves them unless
            // attn_dropout_checkpoint, which adds attn_dropout_bits_bwd to rewrite them instead
            // (DSKC_ATTN_BITS_BWD=auto with no LayerNorm re-run writing them: the mask is inline here).
            const bool bits = fused && attn_drop > 0, saved = bits && !(f & kAttnCkpt), rebits = bits && !saved;
            CHECK(p.attn_keep_bits == bits);
            CHECK(p.attn_keep_bits_saved == saved);
            CHECK_FALSE(p.attn_mask_kernel);
            CHECK_FALSE(p.attn_bits_bwd_in_dot);
            CHECK_FALSE(p.attn_bits_bwd_in_ln);
            if (fused) CHECK(p.find_kernel("attn_flash_bwd_dot")->op == "attn_flash_bwd_dot");
            CHECK((p.find_saved("attn_dropout_bits") != nullptr) == saved);
            CHECK(std::any_of(p.workspace.begin(), p.workspace.end(),
                              [](const TensorInfo& w) { return w.name == "attn_dropout_bits"; }) == rebits);
            CHECK(emit_config_header(p).find(std::string("constexpr bool kAttnFwdStoresBits = ") +
                                             (saved ? "true;" : "false;")) != std::string::npos);
            CHECK(emit_config_header(p).find("constexpr bool kAttnFwdLoadsBits = false;") != std::string::npos);
            // The flags add only their recompute kernels, each right before the kernel that needs
            // it; normalize_invertible changes no kernel list, only the LayerNorm backward's
            // template argument.
            std::vector<std::string> want = expected_kernels(pre_ln, t, hidden_drop > 0, fused);
            if (adc)
              want.insert(std::find(want.begin(), want.end(), "attn_softmax_dropout_bwd"), "attn_dropout_recompute");
            if (rebits) want.insert(std::find(want.begin(), want.end(), "attn_flash_bwd_dkdv"), "attn_dropout_bits_bwd");
            CHECK(kernel_names(p) == want);
            // 5 (Pre-LN) or 4 forward kernels; backward: fp32 11, fp16/bf16 5 (+ the FFN output's
            // hidden-dropout mask kernel when hidden dropout is on; the attention output's runs inside
            // layernorm_bwd_attn; + 1 when fused: attn_flash_bwd_dot and _dkdv for one softmax
            // backward, dQ from a GEMM); plus the recompute kernels (attn_dropout_bits_bwd).
            const size_t backward = (t == DType::F32 ? 11u : hidden_drop > 0 ? 6u : 5u) + (fused ? 1u : 0u);
            CHECK(p.attn_out_dropout_in_ln == (t != DType::F32 && hidden_drop > 0));
            CHECK(p.bias_grad_gemv == (t != DType::F32));
            CHECK(p.kernels.size() == (pre_ln ? 5u : 4u) + backward + adc + rebits);
            for (const auto& k : p.kernels)
              if (k.op.rfind("attn_flash", 0) == 0) {
                CAPTURE(k.name);
                CHECK(k.grid == GridKind::FlashTiles);
                CHECK(k.instantiation.find("<T") != std::string::npos);  // the element type is a parameter
                CHECK(k.block == 128);  // head dim 64: 4 warps in every attn_flash kernel
                CHECK(k.rows_per_block == (k.name == "attn_flash_fwd" ? 64 : k.name == "attn_flash_bwd_dot" ? 16 : 64));
                CHECK(!k.rows_check.empty());
              }
            c.training = false;
            const LayerPlan inf = make_plan(c, {path, AttnMask::Inline});
            for (const auto& k : inf.kernels) CHECK_MESSAGE(k.pass == Pass::Forward, k.name);
            CHECK(inf.kernels.size() == (pre_ln ? 5u : 4u));
            CHECK(kernel_names(inf) == std::vector<std::string>(want.begin(), want.begin() + (pre_ln ? 5 : 4)));
            CHECK(inf.bias_grad_in_gemm == (t != DType::F32));
            CHECK(inf.saved.empty());
          }
  // The recompute kernel sits where backward needs it.
  for (DType t : {DType::F16, DType::F32}) {
    CAPTURE(dtype_name(t));
    const LayerPlan all = unfused_plan(with_dtype(with_flags(bert_large(), kAllFlags), t));
    auto index = [&](const std::string& n) {
      for (size_t i = 0; i < all.kernels.size(); ++i)
        if (all.kernels[i].name == n) return static_cast<int>(i);
      return -1;
    };
    CHECK(index("attn_dropout_recompute") >= 0);
    CHECK(index("attn_dropout_recompute") == index("attn_softmax_dropout_bwd") - 1);
  }
}

TEST_CASE("fp16/bf16 take bias gradients from cuBLASLt column-sum GEMMs (or the wgrad GEMM epilogue), fp32 "
          "and DSKC_BIAS_GRAD=partials from partials + reducers") {
  for (bool pre_ln : {true, false})
    for (unsigned f : {kNoFlag, kAllFlags}) {
      CAPTURE(pre_ln);
      CAPTURE(f);
      LayerConfig c = with_flags(bert_large(), f);
      c.pre_layer_norm = pre_ln;
      // gelu_checkpoint (in kAllFlags): the GELU backward also rebuilds GELU(h).
      const std::string regelu = f & kGeluCkpt ? ", true>" : ">";
      const std::string regelu_text = f & kGeluCkpt ? " + GELU(h) recomputed for the output_w gradient" : "";
      // fp16 / bf16: no bias partials, no bias reducers; the LayerNorm gamma/beta reducer stays.
      for (DType t : {DType::F16, DType::BF16}) {
        CAPTURE(dtype_name(t));
        for (BiasGrad src : {BiasGrad::Gemv, BiasGrad::Epilogue}) {
          CAPTURE(static_cast<int>(src));
          const LayerPlan p = make_plan(with_dtype(c, t), {AttentionPath::FromEnvironment, AttnMask::FromEnvironment,
                                                           AttnDq::FromEnvironment, src});
          CHECK(p.bias_grad_in_gemm);
          CHECK(p.bias_grad_gemv == (src == BiasGrad::Gemv));
          const std::string by = src == BiasGrad::Gemv ? "a column-sum GEMM" : "the wgrad GEMM epilogue";
          for (const char* k : kBiasReduceKernels) CHECK_MESSAGE(!has_kernel(p, k), k);
          REQUIRE(has_kernel(p, "param_grad_reduce_layernorm"));
          CHECK(p.find_kernel("param_grad_reduce_layernorm")->instantiation == "param_grad_reduce_impl<kHidden, 2>");
          // Hidden dropout on: the FFN output's mask kernel stays, without partials; the attention
          // output's mask is applied by the LayerNorm backward that produces its input.
          REQUIRE(has_kernel(p, "dropout_bias_grad_ffn_out"));
          CHECK_FALSE(has_kernel(p, "dropout_bias_grad_attn_out"));
          CHECK(p.attn_out_dropout_in_ln);
          const KernelInfo& ffn = *p.find_kernel("dropout_bias_grad_ffn_out");
          CHECK(ffn.instantiation == "dropout_bwd_impl<kHidden, dskc_rng::kStreamFfnOutput>");
          CHECK(ffn.fuses == "hidden dropout backward (mask regenerated; output_b bias gradient by " + by + ")");
          const KernelInfo& ln = *p.find_kernel("layernorm_bwd_attn");
          CHECK(ln.instantiation == std::string("layernorm_bwd_impl<kHidden, kNormalizeInvertible, ") +
                                        (pre_ln ? "kLnAddToDx" : "kLnAddToDy") + ", true, dskc_rng::kStreamAttnOutput>");
          CHECK(ln.fuses.find("+ the attention output's hidden dropout backward (mask regenerated)") != std::string::npos);
          CHECK(ffn.op == "dropout_bias_grad");
          CHECK(ffn.pass == Pass::Backward);
          CHECK(ffn.grid == GridKind::Elementwise);  // masking only: no row tiles for partials
          const KernelInfo& gelu = *p.find_kernel("bias_gelu_bwd");
          CHECK(gelu.instantiation == "bias_gelu_bwd_elem_impl<kInter" + regelu);
          CHECK(gelu.grid == GridKind::Elementwise);  // no partials: no row tiles
          CHECK(gelu.fuses == "GELU backward (inter_b gradient by " + by + ")" + regelu_text);
        }
        // DSKC_BIAS_GRAD=partials: the fp32 scheme (partials + the bias reducers, the attention
        // output's own mask kernel with partials).
        {
          dskc_test::ScopedEnv env("DSKC_BIAS_GRAD", "partials");
          const LayerPlan p = make_plan(with_dtype(c, t));
          CHECK_FALSE(p.bias_grad_in_gemm);
          CHECK_FALSE(p.bias_grad_gemv);
          CHECK_FALSE(p.attn_out_dropout_in_ln);
          for (const char* k : kBiasReduceKernels) CHECK_MESSAGE(has_kernel(p, k), k);
          REQUIRE(has_kernel(p, "dropout_bias_grad_attn_out"));
          CHECK(p.find_kernel("dropout_bias_grad_attn_out")->instantiation ==
                "dropout_bias_grad_impl<kHidden, kHiddenDropoutOn, dskc_rng::kStreamAttnOutput>");
          CHECK(p.find_kernel("dropout_bias_grad_attn_out")->grid == GridKind::RowTiles);
          CHECK(p.find_kernel("layernorm_bwd_attn")->instantiation.find("true") == std::string::npos);
        }
        const LayerPlan p = make_plan(with_dtype(c, t));
        CHECK(p.find_kernel("bias_gelu_fwd")->instantiation == "bias_gelu_fwd_impl<kInter, false>");
        // Hidden dropout off (ratio 0): nothing is left for the mask kernels to do.
        LayerConfig nd = with_dtype(c, t);
        nd.hidden_dropout_ratio = 0;
        const LayerPlan q = make_plan(nd);
        CHECK(q.bias_grad_in_gemm);
        CHECK_FALSE(has_kernel(q, "dropout_bias_grad_ffn_out"));
        CHECK_FALSE(has_kernel(q, "dropout_bias_grad_attn_out"));
        for (const char* k : kBiasReduceKernels) CHECK_MESSAGE(!has_kernel(q, k), k);
        for (const auto& k : q.kernels) CHECK_MESSAGE(k.op != "dropout_bias_grad", k.name);
        CHECK(q.find_kernel("bias_gelu_bwd")->instantiation == "bias_gelu_bwd_elem_impl<kInter" + regelu);
        // Nor in inference, which has no backward at all.
        nd = with_dtype(c, t);
        nd.training = false;
        for (const auto& k : make_plan(nd).kernels) CHECK_MESSAGE(k.pass == Pass::Forward, k.name);
      }
      // fp32: partials everywhere, finished by the three bias reducers, dropout or not.
      for (double hidden_drop : {0.1, 0.0}) {
        CAPTURE(hidden_drop);
        LayerConfig c32 = with_dtype(c, DType::F32);
        c32.hidden_dropout_ratio = hidden_drop;
        const LayerPlan p = make_plan(c32);
        const std::string hd = hidden_drop > 0 ? "hidden dropout + " : "";
        CHECK_FALSE(p.bias_grad_in_gemm);
        for (const char* k : kBiasReduceKernels) CHECK_MESSAGE(has_kernel(p, k), k);
        REQUIRE(has_kernel(p, "dropout_bias_grad_ffn_out"));
        REQUIRE(has_kernel(p, "dropout_bias_grad_attn_out"));
        CHECK(p.find_kernel("dropout_bias_grad_ffn_out")->instantiation ==
              "dropout_bias_grad_impl<kHidden, kHiddenDropoutOn, dskc_rng::kStreamFfnOutput>");
        CHECK(p.find_kernel("dropout_bias_grad_attn_out")->instantiation ==
              "dropout_bias_grad_impl<kHidden, kHiddenDropoutOn, dskc_rng::kStreamAttnOutput>");
        CHECK(p.find_kernel("dropout_bias_grad_ffn_out")->fuses == hd + "output_b bias-gradient partials");
        CHECK(p.find_kernel("dropout_bias_grad_attn_out")->fuses == hd + "attn_ob bias-gradient partials");
        CHECK(p.find_kernel("bias_gelu_bwd")->instantiation == "bias_gelu_bwd_impl<kInter, true" + regelu);
        CHECK(p.find_kernel("bias_gelu_bwd")->fuses == "GELU backward + inter_b bias-gradient partials" + regelu_text);
        CHECK(p.find_kernel("bias_gelu_fwd")->instantiation == "bias_gelu_fwd_impl<kInter, false>");
        const KernelInfo& qkv = *p.find_kernel("bias_grad_qkv");
        CHECK(qkv.op == "dropout_bias_grad");
        CHECK(qkv.instantiation == "dropout_bias_grad_impl<3 * kHidden, false, 0>");
        CHECK(qkv.fuses == "attn_qkvb bias-gradient partials");
        CHECK(qkv.cols == 3 * 1024);
        const KernelInfo& rh = *p.find_kernel("param_grad_reduce_hidden");
        const KernelInfo& rq = *p.find_kernel("param_grad_reduce_qkv");
        const KernelInfo& ri = *p.find_kernel("param_grad_reduce_inter");
        CHECK(rh.instantiation == "param_grad_reduce_impl<kHidden, 1>");
        CHECK(rq.instantiation == "param_grad_reduce_impl<3 * kHidden, 1>");
        CHECK(ri.instantiation == "param_grad_reduce_impl<kInter, 1>");
        CHECK(rh.cols == 1024);
        CHECK(rq.cols == 3 * 1024);
        CHECK(ri.cols == 4096);
        for (const KernelInfo* r : {&rh, &rq, &ri}) {
          CHECK(r->grid == GridKind::ColumnTiles);
          CHECK(r->arrays == 1);
          CHECK(r->block == 256);
        }
      }
    }
}

namespace {
// BERT-Large, batch 64, seq 128, fp16 by hand: 8192 tokens; H = 1024, I = 4096, 16 heads.
constexpr int64_t kTok = 64 * 128;
constexpr int64_t kH = kTok * 1024 * 2;          // [B, S, H] fp16           16 MiB
constexpr int64_t kQkv = kTok * 3 * 1024 * 2;    // [B, S, 3H] fp16          48 MiB
constexpr int64_t kI = kTok * 4096 * 2;          // [B, S, I] fp16           64 MiB
constexpr int64_t kScores = kTok * 16 * 128 * 2; // [B, heads, S, S] fp16    32 MiB
constexpr int64_t kStat = kTok * 4;              // [B, S] fp32              32 KiB
constexpr int64_t kLse = kTok * 16 * 4;          // [B, heads, S] fp32       512 KiB
constexpr int64_t kBits = kTok * 16 * 4 * 4;     // [B, heads, S, ceil(S/32)] uint32  2 MiB

using Saved = std::map<std::string, int64_t>;

Saved saved_bytes(const LayerPlan& p, int batch, int seq) {
  Saved m;
  for (const auto& t : p.saved) {
    CHECK_MESSAGE(!m.count(t.name), "tensor saved twice: " << t.name);
    m[t.name] = t.bytes(batch, seq);
  }
  return m;
}
}  // namespace

TEST_CASE("activation bytes of the BERT-Large layer (batch 64, seq 128, fp16) per memory flag, by hand") {
  // Unfused attention, Pre-LN with no flag keeps every tensor backward reads.
  const Saved no_flag = {
      {"ln_norm_out", kH},    {"ln_norm_mean", kStat},  {"ln_norm_rstd", kStat},         {"qkv", kQkv},
      {"attn_probs", kScores}, {"attn_probs_dropped", kScores}, {"attn_context", kH},   {"attn_residual", kH},
      {"ln_attn_out", kH},    {"ln_attn_mean", kStat},  {"ln_attn_rstd", kStat},         {"ffn_pre_gelu", kI},
      {"ffn_gelu_out", kI}};
  constexpr int64_t kNoFlagTotal = 318898176;  // 304.125 MiB
  static_assert(4 * kH + kQkv + 2 * kScores + 2 * kI + 4 * kStat == kNoFlagTotal);
  auto without = [](Saved s, std::initializer_list<const char*> names) {
    for (const char* n : names) REQUIRE(s.erase(n) == 1);
    return s;
  };
  struct Row {
    unsigned flags;
    Saved expected;
    int64_t total;
  };
  const Row rows[] = {
      {kNoFlag, no_flag, kNoFlagTotal},
      {kAttnCkpt, without(no_flag, {"attn_probs_dropped"}), kNoFlagTotal - kScores},                  // 272 MiB
      // normalize_invertible: the attn LayerNorm's input and mean; Pre-LN's first LayerNorm keeps
      // its mean/rstd instead of its output (backward re-runs it from the caller's input).
      {kInvertible, without(no_flag, {"attn_residual", "ln_norm_out", "ln_attn_mean"}), kNoFlagTotal - 2 * kH - kStat},
      {kGeluCkpt, without(no_flag, {"ffn_gelu_out"}), kNoFlagTotal - kI},                              // 240.1 MiB
      {kAllFlags, without(no_flag, {"attn_probs_dropped", "attn_residual", "ln_norm_out", "ln_attn_mean", "ffn_gelu_out"}),
       184647680},                                                                                      // 176.09 MiB
  };
  static_assert(kNoFlagTotal - kScores - 2 * kH - kStat - kI == 184647680);
  const LayerPlan base = unfused_plan(bert_large());
  for (const auto& r : rows) {
    CAPTURE(r.flags);
    const LayerPlan p = unfused_plan(with_flags(bert_large(), r.flags));
    CHECK(saved_bytes(p, 64, 128) == r.expected);
    CHECK(p.activation_bytes() == r.total);
    CHECK(p.activation_bytes(64, 128) == r.total);
    if (r.flags != kNoFlag) CHECK(p.activation_bytes() < base.activation_bytes());
  }
  // Each flag strictly lowers the total from any starting set that lacks it.
  for (unsigned f = 0; f <= kAllFlags; ++f)
    for (unsigned add : {kAttnCkpt, kInvertible, kGeluCkpt})
      if (!(f & add)) {
        CAPTURE(f);
        CAPTURE(add);
        CHECK(unfused_plan(with_flags(bert_large(), f | add)).activation_bytes() <
              unfused_plan(with_flags(bert_large(), f)).activation_bytes());
      }

  // Fused attention (the default for this fp16 layer): attn_lse [B, heads, S] fp32 replaces P and
  // dropout(P), plus the dropout keep mask as bits (attn_dropout_bits [B, heads, S, ceil(S/32)]
  // uint32), which attn_dropout_checkpoint drops (attn_dropout_bits_bwd rewrites them into the
  // workspace in backward instead).
  const Saved fused_no_flag = [&] {
    Saved s = without(no_flag, {"attn_probs", "attn_probs_dropped"});
    s["attn_lse"] = kLse;
    s["attn_dropout_bits"] = kBits;
    return s;
  }();
  constexpr int64_t kFusedTotal = kNoFlagTotal - 2 * kScores + kLse + kBits;  // 242.62 MiB
  static_assert(kFusedTotal == 254410752);
  const Row fused_rows[] = {
      {kNoFlag, fused_no_flag, kFusedTotal},
      {kAttnCkpt, without(fused_no_flag, {"attn_dropout_bits"}), kFusedTotal - kBits},  // 240.62 MiB
      {kInvertible, without(fused_no_flag, {"attn_residual", "ln_norm_out", "ln_attn_mean"}), kFusedTotal - 2 * kH - kStat},
      {kGeluCkpt, without(fused_no_flag, {"ffn_gelu_out"}), kFusedTotal - kI},
      {kAllFlags,
       without(fused_no_flag, {"attn_dropout_bits", "attn_residual", "ln_norm_out", "ln_attn_mean", "ffn_gelu_out"}),
       151617536},  // 144.59 MiB
  };
  static_assert(kFusedTotal - kBits == 252313600);
  static_assert(kFusedTotal - kBits - 2 * kH - kStat - kI == 151617536);
  CHECK(make_plan(bert_large()).fused_attention == (std::getenv("DSKC_ATTENTION") == nullptr));  // the default
  for (const auto& r : fused_rows) {
    CAPTURE(r.flags);
    const LayerPlan p = fused_plan(with_flags(bert_large(), r.flags));
    REQUIRE(p.fused_attention);
    CHECK(saved_bytes(p, 64, 128) == r.expected);
    CHECK(p.activation_bytes() == r.total);
    CHECK(p.activation_bytes() < unfused_plan(with_flags(bert_large(), r.flags)).activation_bytes());
    const TensorInfo* lse = p.find_saved("attn_lse");
    REQUIRE(lse);
    CHECK(lse->extent == Extent::HeadRows);
    CHECK(lse->shape == "[B, heads, S] fp32");
    CHECK(lse->bytes(3, 51) == int64_t{3} * 16 * 51 * 4);
    if (const TensorInfo* bits = p.find_saved("attn_dropout_bits")) {
      CHECK(!(r.flags & kAttnCkpt));
      CHECK(bits->extent == Extent::HeadRowWords);
      CHECK(bits->shape == "[B,heads,S,W] u32");  // W = ceil(S/32); fits inspect's 18-char column
      // ceil(S/32) words per row, exactly, for any S.
      for (auto [bb, ss, w] : {std::tuple{3, 51, 2}, {1, 1, 1}, {2, 32, 1}, {2, 33, 2}, {1, 127, 4}, {4, 381, 12},
                               {1, 509, 16}, {64, 512, 16}})
        CHECK(bits->bytes(bb, ss) == int64_t{bb} * 16 * ss * w * 4);
    } else {
      CHECK((r.flags & kAttnCkpt));
    }
    // attn_dropout_checkpoint moves the bits into the workspace (shared by all layers).
    const auto ws_bits = std::find_if(p.workspace.begin(), p.workspace.end(),
                                      [](const TensorInfo& w) { return w.name == "attn_dropout_bits"; });
    CHECK((ws_bits != p.workspace.end()) == bool(r.flags & kAttnCkpt));
    if (ws_bits != p.workspace.end()) {
      CHECK(ws_bits->extent == Extent::HeadRowWords);
      CHECK(ws_bits->bytes(64, 128) == kBits);
      CHECK(p.workspace_bytes(64, 128) ==
            fused_plan(with_flags(bert_large(), r.flags & ~kAttnCkpt)).workspace_bytes(64, 128) + kBits);
    }
    // Workspace: one score-sized tensor, the dSᵀ the dQ GEMM reads (DSKC_ATTN_DQ=kernel: none),
    // and the backward's D = rowsum(dO ⊙ O).
    for (const auto& w : p.workspace) CHECK_MESSAGE((w.extent != Extent::Scores || w.name == "grad_scores"), w.name);
    CHECK(std::any_of(p.workspace.begin(), p.workspace.end(), [](const TensorInfo& w) { return w.name == "attn_row_dot"; }));
  }
  // Shapes and the element size follow the dtype; stats stay fp32.
  for (const LayerPlan& pl : {base, fused_plan(bert_large())})
    for (const auto& t : pl.saved) {
      CAPTURE(t.name);
      if (t.extent == Extent::RowStats || t.extent == Extent::HeadRows || t.extent == Extent::HeadRowWords)
        CHECK(t.elem_bytes == 4);
      else
        CHECK(t.elem_bytes == 2);
      CHECK(!t.shape.empty());
      CHECK(!t.why.empty());
    }
}

namespace {
// BERT-Large with another hidden width (intermediate 4·hidden): heads of 64 where they divide it,
// else 8, 4 or 2 heads.
LayerConfig with_width(int hidden, DType dtype) {
  LayerConfig c = with_dtype(bert_large(), dtype);
  c.hidden_size = hidden;
  c.heads = hidden % 64 == 0 ? hidden / 64 : hidden % 8 == 0 ? 8 : hidden % 4 == 0 ? 4 : 2;
  c.intermediate_size = 4 * hidden;
  return c;
}
}  // namespace

TEST_CASE("LayerNorm forward kernels: a row per warp (four per block) up to 128 vectors per row, else a block per row") {
  // {hidden, dtype, block, rows per block}: 1024 fp16 / bf16 and 768 fp16 are 128 / 96 vectors of 8;
  // 1016 fp16 is 127 (the last lane has three). 1024 fp32 is 256 vectors of 4, 4096 fp16 512 of 8,
  // 1032 fp16 129 of 8, 1020 fp16 255 of 4: a block each.
  const std::vector<std::tuple<int, DType, int, int>> cases = {{1024, DType::F16, 128, 4}, {1024, DType::BF16, 128, 4},
                                                               {768, DType::F16, 128, 4},  {1024, DType::F32, 256, 1},
                                                               {4096, DType::F16, 512, 1}, {1016, DType::F16, 128, 4},
                                                               {1032, DType::F16, 160, 1}, {1020, DType::F16, 256, 1}};
  for (const auto& [hidden, dtype, block, rows] : cases) {
    const LayerConfig c = with_width(hidden, dtype);
    CAPTURE(hidden);
    CAPTURE(dtype_name(dtype));
    const LayerPlan plan = make_plan(c);
    for (const char* name : {"layernorm_fwd_norm", "bias_dropout_residual_layernorm_fwd_attn"}) {
      CAPTURE(name);
      const KernelInfo* k = plan.find_kernel(name);
      REQUIRE(k != nullptr);
      CHECK(k->grid == GridKind::Rows);
      CHECK(k->block == block);
      CHECK(k->rows_per_block == rows);
      CHECK(k->rows_check == "LayerNormShape<kHidden>::kRowsPerBlock");
    }
    // The generated source checks both against the template's shape.
    const std::string src = emit(plan).source;
    CHECK(src.find("static_assert(LayerNormShape<kHidden>::kRowsPerBlock == " + std::to_string(rows) + ",") != std::string::npos);
  }
}

TEST_CASE("LayerNorm backward kernels: a row per warp (four warps, two rows each) up to 128 vectors, else a block per row") {
  // {hidden, dtype, block with warp rows}: as the forward's rule (rows of <= 128 vectors), always
  // four warps per block of kGradRowsPerBlock rows; the block-per-row form's RowTile threads otherwise.
  const std::vector<std::tuple<int, DType, int>> cases = {{1024, DType::F16, 128}, {1024, DType::BF16, 128},
                                                          {768, DType::F16, 128},  {126, DType::F16, 128},
                                                          {1016, DType::F16, 128}, {1024, DType::F32, 256},
                                                          {4096, DType::F16, 512}, {1032, DType::F16, 160}};
  for (const auto& [hidden, dtype, block] : cases) {
    const LayerConfig c = with_width(hidden, dtype);
    CAPTURE(hidden);
    CAPTURE(dtype_name(dtype));
    const int v = vec_width(dtype, hidden);
    for (LnBwd mode : {LnBwd::WarpRows, LnBwd::BlockRows}) {
      PlanOptions o;
      o.ln_bwd = mode;
      const LayerPlan plan = make_plan(c, o);
      CHECK(plan.ln_bwd_warp_rows == (mode == LnBwd::WarpRows));
      for (const char* name : {"layernorm_bwd_attn", "layernorm_bwd_norm"}) {
        CAPTURE(name);
        const KernelInfo* k = plan.find_kernel(name);
        REQUIRE(k != nullptr);
        CHECK(k->grid == GridKind::RowTiles);  // same grid and partials either way
        CHECK(k->shape_check == "LayerNormBwdShape<kHidden>::kThreads");
        CHECK(k->block == (mode == LnBwd::WarpRows ? block : row_threads(hidden / v)));
      }
      const std::string src = emit(plan).source;
      CHECK(src.find(fmt::format("constexpr bool kLnBwdWarpRows = {};", mode == LnBwd::WarpRows)) != std::string::npos);
    }
  }
  {
    const dskc_test::ScopedEnv env("DSKC_LN_BWD", "block");
    CHECK_FALSE(make_plan(bert_large()).ln_bwd_warp_rows);
  }
  {
    const dskc_test::ScopedEnv env("DSKC_LN_BWD", "");
    CHECK(make_plan(bert_large()).ln_bwd_warp_rows);
  }
  const dskc_test::ScopedEnv env("DSKC_LN_BWD", "rows");
  CHECK_THROWS_WITH_AS(make_plan(bert_large()), doctest::Contains("DSKC_LN_BWD=rows"), Error);
}

TEST_CASE("Post-LN, fp32/bf16 and no-dropout activation plans") {
  // Post-LN keeps the residual sums of both LayerNorms (their inputs) and both stats.
  LayerConfig c = bert_large();
  c.pre_layer_norm = false;
  const Saved post = {{"qkv", kQkv},          {"attn_probs", kScores},  {"attn_probs_dropped", kScores},
                      {"attn_context", kH},   {"attn_residual", kH},    {"ln_attn_out", kH},
                      {"ln_attn_mean", kStat}, {"ln_attn_rstd", kStat}, {"ffn_pre_gelu", kI},
                      {"ffn_gelu_out", kI},   {"ffn_residual", kH},     {"ln_norm_mean", kStat},
                      {"ln_norm_rstd", kStat}};
  CHECK(saved_bytes(unfused_plan(c), 64, 128) == post);
  const Saved post_inv = {{"qkv", kQkv},         {"attn_probs", kScores},  {"attn_probs_dropped", kScores},
                          {"attn_context", kH},  {"ln_attn_out", kH},      {"ln_attn_rstd", kStat},
                          {"ffn_pre_gelu", kI},  {"ffn_gelu_out", kI},     {"ln_norm_rstd", kStat}};
  CHECK(saved_bytes(unfused_plan(with_flags(c, kInvertible)), 64, 128) == post_inv);
  // Fused: the same with attn_lse and the keep bits for P and dropout(P); the flag drops the bits.
  Saved post_fused = post;
  post_fused.erase("attn_probs");
  post_fused.erase("attn_probs_dropped");
  post_fused["attn_lse"] = kLse;
  post_fused["attn_dropout_bits"] = kBits;
  CHECK(saved_bytes(fused_plan(c), 64, 128) == post_fused);
  post_fused.erase("attn_dropout_bits");
  CHECK(saved_bytes(fused_plan(with_flags(c, kAttnCkpt)), 64, 128) == post_fused);

  // fp32 doubles every activation but the fp32 stats; bf16 matches fp16 (both attention paths).
  const int64_t f16 = unfused_plan(bert_large()).activation_bytes();
  CHECK(unfused_plan(with_dtype(bert_large(), DType::BF16)).activation_bytes() == f16);
  CHECK(fused_plan(with_dtype(bert_large(), DType::BF16)).activation_bytes() ==
        fused_plan(bert_large()).activation_bytes());
  CHECK(make_plan(with_dtype(bert_large(), DType::F32)).activation_bytes() == 2 * f16 - 4 * kStat);
  // fp32 is never fused, whatever the request.
  CHECK_FALSE(fused_plan(with_dtype(bert_large(), DType::F32)).fused_attention);

  // Without attention dropout there is no dropped copy of P to keep, with or without the flag.
  c = bert_large();
  c.attn_dropout_ratio = 0;
  CHECK(unfused_plan(c).find_saved("attn_probs_dropped") == nullptr);
  CHECK(unfused_plan(c).activation_bytes() == f16 - kScores);
  CHECK(unfused_plan(with_flags(c, kAttnCkpt)).activation_bytes() == f16 - kScores);
  // Fused attention keeps the same logsumexp with or without dropout, and no keep bits without it.
  CHECK(fused_plan(c).find_saved("attn_dropout_bits") == nullptr);
  CHECK(fused_plan(c).activation_bytes() == fused_plan(bert_large()).activation_bytes() - kBits);
  CHECK(fused_plan(with_flags(c, kAttnCkpt)).activation_bytes() == fused_plan(c).activation_bytes());

  // Inference keeps nothing, whatever the flags; its workspace holds no P when fused.
  for (unsigned f : {kNoFlag, kAllFlags}) {
    c = with_flags(bert_large(), f);
    c.training = false;
    for (const LayerPlan& p : {unfused_plan(c), fused_plan(c)}) {
      CHECK(p.saved.empty());
      CHECK(p.activation_bytes() == 0);
      CHECK(p.activation_bytes(3, 51) == 0);
    }
    for (const auto& w : fused_plan(c).workspace) CHECK_MESSAGE(w.extent != Extent::Scores, w.name);
  }
}

TEST_CASE("activation bytes scale with (batch, seq); attention rows pad seq to a multiple of 8") {
  CHECK(padded_seq(1) == 8);
  CHECK(padded_seq(7) == 8);
  CHECK(padded_seq(8) == 8);
  CHECK(padded_seq(51) == 56);
  CHECK(padded_seq(127) == 128);
  CHECK(padded_seq(128) == 128);
  CHECK(padded_seq(509) == 512);
  for (bool fused : {false, true})
    for (unsigned f : {kNoFlag, kAttnCkpt, kInvertible, kGeluCkpt, kAllFlags}) {
      const LayerPlan p = fused ? fused_plan(with_flags(bert_large(), f)) : unfused_plan(with_flags(bert_large(), f));
      const bool inv = f & kInvertible, adc = f & kAttnCkpt, gc = f & kGeluCkpt;
      // Per token: H-wide tensors, the 3H qkv, the I-wide FFN tensors (fp16), fp32 row stats;
      // unfused: 1 or 2 padded score rows per head; fused: one fp32 logsumexp per head.
      // normalize_invertible drops attn_residual, ln_norm_out and ln_attn_mean.
      const int64_t h_tensors = inv ? 2 : 4, i_tensors = 1 + !gc, stats = inv ? 3 : 4, score_tensors = 1 + !adc;
      for (auto [b, s] : {std::pair{64, 128}, {1, 1}, {3, 51}, {7, 7}, {64, 127}, {2, 128}, {64, 9}}) {
        CAPTURE(fused);
        CAPTURE(f);
        CAPTURE(b);
        CAPTURE(s);
        const int64_t tok = int64_t{b} * s;
        // Fused: the logsumexp, and unless the flag, ceil(S/32) words of keep bits per row and head.
        const int64_t attention = fused ? tok * 16 * 4 + (adc ? 0 : tok * 16 * ((s + 31) / 32) * 4)
                                        : score_tensors * tok * 16 * padded_seq(s) * 2;
        const int64_t expected =
            tok * (h_tensors * 1024 + 3 * 1024 + i_tensors * 4096) * 2 + tok * stats * 4 + attention;
        CHECK(p.activation_bytes(b, s) == expected);
      }
      // Smaller batches scale linearly; a shorter sequence never costs more.
      CHECK(p.activation_bytes(32, 128) * 2 == p.activation_bytes(64, 128));
      CHECK(p.activation_bytes(64, 121) <= p.activation_bytes(64, 128));
    }
}

TEST_CASE("attention path: fp16/bf16 with head dim % 16 == 0 and <= 128 fuse; DSKC_ATTENTION=unfused forces the old path") {
  struct Case {
    int hidden, heads;
    DType t;
    bool fused;
  } cases[] = {
      {1024, 16, DType::F16, true},   // d 64
      {1024, 16, DType::BF16, true},  // d 64
      {1024, 16, DType::F32, false},  // fp32: unfused
      {256, 16, DType::F16, true},    // d 16
      {160, 2, DType::F16, true},     // d 80
      {2560, 20, DType::BF16, true},  // d 128
      {128, 16, DType::F16, false},   // d 8
      {1024, 32, DType::F16, true},   // d 32
      {160, 8, DType::F16, false},    // d 20
      {768, 8, DType::F16, true},     // d 96
  };
  for (const auto& k : cases) {
    LayerConfig c = with_dtype(bert_large(), k.t);
    c.hidden_size = k.hidden;
    c.heads = k.heads;
    c.intermediate_size = 4 * k.hidden;
    CAPTURE(k.hidden);
    CAPTURE(k.heads);
    CAPTURE(dtype_name(k.t));
    CHECK(fused_attention_supported(c) == k.fused);
    CHECK(fused_plan(c).fused_attention == k.fused);
    CHECK_FALSE(unfused_plan(c).fused_attention);
  }
  LayerConfig big = bert_large();
  big.batch_size = 4096;  // 4096 · 16 heads > 65535 blocks in grid.y
  CHECK_FALSE(fused_attention_supported(big));
  // Backward block shapes follow the head dim (common/flash.cuh: 4 warps up to d 64, else 2).
  LayerConfig d128 = bert_large();
  d128.heads = 8;
  const LayerPlan p128 = fused_plan(d128);
  CHECK(p128.find_kernel("attn_flash_bwd_dkdv")->block == 64);
  CHECK(p128.find_kernel("attn_flash_bwd_dkdv")->rows_per_block == 32);
  CHECK(make_plan(d128, {AttentionPath::FusedWhereSupported, AttnMask::Inline, AttnDq::Kernel})
            .find_kernel("attn_flash_bwd_dq")
            ->block == 64);
  CHECK(p128.find_kernel("attn_flash_fwd")->block == 128);

  // The environment variable (read when the options leave the path to it).
  auto with_env = [](const char* v, auto fn) {
    const char* old = std::getenv("DSKC_ATTENTION");
    const std::string saved = old ? old : "";
    if (v)
      setenv("DSKC_ATTENTION", v, 1);
    else
      unsetenv("DSKC_ATTENTION");
    fn();
    if (old)
      setenv("DSKC_ATTENTION", saved.c_str(), 1);
    else
      unsetenv("DSKC_ATTENTION");
  };
  with_env(nullptr, [] { CHECK(make_plan(bert_large()).fused_attention); });
  with_env("auto", [] { CHECK(make_plan(bert_large()).fused_attention); });
  with_env("fused", [] { CHECK(make_plan(bert_large()).fused_attention); });
  with_env("unfused", [] {
    CHECK_FALSE(make_plan(bert_large()).fused_attention);
    CHECK(make_plan(bert_large(), {AttentionPath::FusedWhereSupported}).fused_attention);  // explicit wins
  });
  with_env("flash2", [] {
    const std::string m = error_of([] { make_plan(bert_large()); }, ErrorKind::Config);
    CHECK(m.find("DSKC_ATTENTION=flash2") != std::string::npos);
    CHECK(m.find("unfused") != std::string::npos);
  });
  // The choice changes the generated source, hence the cache key (a hash of the source).
  CHECK(emit(fused_plan(bert_large())).source != emit(unfused_plan(bert_large())).source);
}

TEST_CASE("fused attention dropout keep bits: attn_dropout_bits_bwd under attn_dropout_checkpoint, "
          "attn_dropout_bits_fwd with DSKC_ATTN_MASK=kernel") {
  auto index = [](const LayerPlan& p, const std::string& n) {
    for (size_t i = 0; i < p.kernels.size(); ++i)
      if (p.kernels[i].name == n) return static_cast<int>(i);
    return -1;
  };
  auto in_workspace = [](const LayerPlan& p) {
    return std::any_of(p.workspace.begin(), p.workspace.end(),
                       [](const TensorInfo& w) { return w.name == "attn_dropout_bits"; });
  };
  const int64_t bits_bytes = int64_t{64} * 16 * 128 * 4 * 4;  // B·heads·S·ceil(S/32) words
  for (AttnMask mask : {AttnMask::Inline, AttnMask::Kernel})
    for (bool adc : {false, true}) {
      const bool kernel = mask == AttnMask::Kernel;
      CAPTURE(kernel);
      CAPTURE(adc);
      const LayerPlan p = fused_plan(with_flags(bert_large(), adc ? kAttnCkpt : kNoFlag), mask);
      REQUIRE(p.fused_attention);
      CHECK(p.attn_keep_bits);
      CHECK(p.attn_keep_bits_saved == !adc);
      CHECK(p.attn_mask_kernel == kernel);
      CHECK(p.attn_fwd_stores_bits() == (!adc && !kernel));
      // The bits are saved (2 MiB per layer here) or, with the flag, a workspace tensor.
      CHECK((p.find_saved("attn_dropout_bits") != nullptr) == !adc);
      CHECK(in_workspace(p) == adc);
      CHECK(p.activation_bytes() == fused_plan(bert_large()).activation_bytes() - (adc ? bits_bytes : 0));
      // attn_dropout_bits_fwd right before attn_flash_fwd with DSKC_ATTN_MASK=kernel; with the flag
      // attn_dropout_bits_bwd right before attn_flash_bwd_dkdv (after the D = rowsum(dO ⊙ O) kernel).
      CHECK((index(p, "attn_dropout_bits_fwd") >= 0) == kernel);
      CHECK((index(p, "attn_dropout_bits_bwd") >= 0) == adc);
      if (kernel) CHECK(index(p, "attn_dropout_bits_fwd") == index(p, "attn_flash_fwd") - 1);
      if (adc) CHECK(index(p, "attn_dropout_bits_bwd") == index(p, "attn_flash_bwd_dkdv") - 1);
      CHECK(p.kernels.size() == fused_plan(bert_large()).kernels.size() + kernel + adc);
      for (const char* name : {"attn_dropout_bits_fwd", "attn_dropout_bits_bwd"})
        if (const KernelInfo* k = p.find_kernel(name)) {
          CAPTURE(name);
          CHECK(k->op == "attn_dropout_bits");
          CHECK(k->pass == (std::string(name) == "attn_dropout_bits_fwd" ? Pass::Forward : Pass::Backward));
          CHECK(k->params_type == "AttnDropoutBitsParams");
          CHECK(k->instantiation == "attn_dropout_bits_impl");
          CHECK(k->grid == GridKind::FlashTiles);
          CHECK(k->block == 256);
          CHECK(k->rows_per_block == 64);
        }
      // Constants: the forward stores bits only inline without the flag, loads them only with the kernel;
      // the backward kernels always read them (no third constant, no Philox there).
      const std::string h = emit_config_header(p);
      CHECK(h.find(std::string("constexpr bool kAttnFwdStoresBits = ") + (!adc && !kernel ? "true;" : "false;")) !=
            std::string::npos);
      CHECK(h.find(std::string("constexpr bool kAttnFwdLoadsBits = ") + (kernel ? "true;" : "false;")) !=
            std::string::npos);
      CHECK(p.find_kernel("attn_flash_fwd")->instantiation ==
            "attn_flash_fwd_impl<T, kAttnDropoutOn, kAttnFwdStoresBits, kAttnFwdLoadsBits, kAttnFwdStages>");
      CHECK(p.find_kernel("attn_flash_bwd_dkdv")->instantiation ==
            "attn_flash_bwd_dkdv_impl<T, kAttnDropoutOn, kDqGemm>");
    }
  // Each setting is its own module (the cache key hashes the source): a module generated for one
  // must never be loaded for another.
  std::set<std::string> sources;
  for (AttnMask mask : {AttnMask::Inline, AttnMask::Kernel})
    for (unsigned f : {kNoFlag, kAttnCkpt}) sources.insert(emit(fused_plan(with_flags(bert_large(), f), mask)).source);
  CHECK(sources.size() == 4);

  // Without fused attention dropout (no ratio, inference, fp32, forced unfused) there are no bits
  // and DSKC_ATTN_MASK=kernel changes nothing, down to the generated source.
  LayerConfig nodrop = bert_large();
  nodrop.attn_dropout_ratio = 0;
  LayerConfig inference = bert_large();
  inference.training = false;
  for (const LayerConfig& c : {nodrop, with_flags(nodrop, kAttnCkpt), inference, with_dtype(bert_large(), DType::F32)}) {
    const LayerPlan k = fused_plan(c, AttnMask::Kernel);
    CHECK_FALSE(k.attn_keep_bits);
    CHECK_FALSE(k.attn_mask_kernel);
    CHECK(k.find_saved("attn_dropout_bits") == nullptr);
    CHECK_FALSE(in_workspace(k));
    CHECK(index(k, "attn_dropout_bits_fwd") < 0);
    CHECK(index(k, "attn_dropout_bits_bwd") < 0);
    CHECK(emit(k).source == emit(fused_plan(c, AttnMask::Inline)).source);
  }
  CHECK_FALSE(make_plan(bert_large(), {AttentionPath::Unfused, AttnMask::Kernel}).attn_keep_bits);

  // DSKC_ATTN_MASK, read when the options leave the choice to it; a bad value is a config error.
  auto from_env = [](const char* v) {
    dskc_test::ScopedEnv env("DSKC_ATTN_MASK", v);
    return make_plan(bert_large(), {AttentionPath::FusedWhereSupported});
  };
  CHECK(from_env(nullptr).attn_mask_kernel);  // the default: bits read by attn_flash_fwd, written by the LayerNorm
  CHECK(from_env(nullptr).attn_bits_in_ln);
  CHECK(from_env("").attn_bits_in_ln);
  CHECK(from_env("ln").attn_bits_in_ln);
  CHECK_FALSE(from_env("kernel").attn_bits_in_ln);
  CHECK_FALSE(from_env("inline").attn_bits_in_ln);
  CHECK_FALSE(from_env("inline").attn_mask_kernel);
  CHECK(from_env("inline").find_kernel("attn_dropout_bits_fwd") == nullptr);
  CHECK(from_env("kernel").attn_mask_kernel);
  CHECK(from_env("kernel").find_kernel("attn_dropout_bits_fwd") != nullptr);
  {
    dskc_test::ScopedEnv env("DSKC_ATTN_MASK", "kernel");
    CHECK_FALSE(make_plan(bert_large(), {AttentionPath::FusedWhereSupported, AttnMask::Inline}).attn_mask_kernel);
  }
  {
    dskc_test::ScopedEnv env("DSKC_ATTN_MASK", "inline");
    CHECK(make_plan(bert_large(), {AttentionPath::FusedWhereSupported, AttnMask::Kernel}).attn_mask_kernel);
  }
  for (const char* bad : {"Kernel", "philox", "kernel ", "LN", "layernorm"}) {
    check_env_error("DSKC_ATTN_MASK", bad, "inline", "kernel", [] { attn_mask_from_env(); });
    check_env_error("DSKC_ATTN_MASK", bad, "ln", "kernel", [] { attn_mask_from_env(); });
    // Validated even where it would not matter (like DSKC_ATTENTION): a typo never passes silently.
    dskc_test::ScopedEnv env("DSKC_ATTN_MASK", bad);
    error_of([] { make_plan(with_dtype(bert_large(), DType::F32)); }, ErrorKind::Config);
  }
}

// DSKC_ATTN_MASK=ln (the default): in Pre-LN training with attention dropout the first LayerNorm's
// launch writes the keep bits (layernorm_fwd_bits, params LayerNormFwdBitsParams) and there is no
// attn_dropout_bits_fwd; under attn_dropout_checkpoint + normalize_invertible the LayerNorm's re-run
// in backward rewrites them (no attn_dropout_bits_bwd). Everywhere else the plan is DSKC_ATTN_MASK=kernel's.
TEST_CASE("DSKC_ATTN_MASK=ln: the keep bits from the first LayerNorm's launch in Pre-LN, the bits kernel elsewhere") {
  auto plan = [](LayerConfig c, AttnMask m) { return make_plan(c, {AttentionPath::FusedWhereSupported, m}); };
  auto ln_op = [](const LayerPlan& p) {
    const KernelInfo* k = p.find_kernel("layernorm_fwd_norm");
    return k ? k->op + " " + k->params_type + " " + k->instantiation : std::string("none");
  };
  const std::string fused_ln = "layernorm_fwd_bits LayerNormFwdBitsParams layernorm_fwd_bits_impl<kHidden>";
  const std::string plain_ln = "layernorm_fwd LayerNormFwdParams layernorm_fwd_impl<kHidden>";
  for (DType t : {DType::F16, DType::BF16}) {
    CAPTURE(dtype_name(t));
    const LayerConfig base = with_dtype(bert_large(), t);
    const LayerPlan ln = plan(base, AttnMask::LayerNorm), kernel = plan(base, AttnMask::Kernel);
    CHECK(ln.attn_bits_in_ln);
    CHECK_FALSE(ln.attn_bits_bwd_in_ln);
    CHECK(ln.attn_mask_kernel);  // attn_flash_fwd reads the bits either way
    CHECK(ln_op(ln) == fused_ln);
    CHECK(ln_op(kernel) == plain_ln);
    CHECK_FALSE(has_kernel(ln, "attn_dropout_bits_fwd"));
    CHECK(has_kernel(kernel, "attn_dropout_bits_fwd"));
    CHECK(kernel_names(ln).size() + 1 == kernel_names(kernel).size());
    CHECK(ln.activation_bytes(64, 128) == kernel.activation_bytes(64, 128));
    CHECK(ln.workspace_bytes(64, 128) == kernel.workspace_bytes(64, 128));
    const std::string src = emit(ln).source;
    CHECK(src.find("layernorm_fwd_norm(const LayerNormFwdBitsParams p)") != std::string::npos);
    CHECK(src.find("static_assert(sizeof(LayerNormFwdBitsParams) == 96") != std::string::npos);
    CHECK(src.find("attn_dropout_bits_strided") != std::string::npos);
    CHECK(emit(kernel).source.find("layernorm_fwd_norm(const LayerNormFwdParams p)") != std::string::npos);
    // attn_dropout_checkpoint: the bits kernel in backward unless normalize_invertible re-runs the LayerNorm.
    // attn_dropout_checkpoint: the bits kernel in backward unless normalize_invertible re-runs the LayerNorm.
    LayerConfig adc = base;
    adc.attn_dropout_checkpoint = true;
    const LayerPlan a = plan(adc, AttnMask::LayerNorm);
    CHECK(a.attn_bits_in_ln);
    CHECK_FALSE(a.attn_bits_bwd_in_ln);
    CHECK_FALSE(a.attn_bits_bwd_in_dot);
    CHECK(has_kernel(a, "attn_dropout_bits_bwd"));
    adc.normalize_invertible = true;
    const LayerPlan ai = plan(adc, AttnMask::LayerNorm), ak = plan(adc, AttnMask::Kernel);
    CHECK(ai.attn_bits_bwd_in_ln);
    CHECK_FALSE(ai.attn_bits_bwd_in_dot);
    CHECK_FALSE(has_kernel(ai, "attn_dropout_bits_bwd"));
    CHECK_FALSE(has_kernel(ai, "attn_dropout_bits_fwd"));
    CHECK(has_kernel(ak, "attn_dropout_bits_bwd"));  // no LayerNorm launch with the bits
    CHECK(ln_op(ai) == fused_ln);
    CHECK(ai.find_kernel("layernorm_fwd_norm")->fuses.find("rewriting the keep bits") != std::string::npos);
    CHECK(ai.activation_bytes(64, 128) == ak.activation_bytes(64, 128));
    // normalize_invertible alone: the re-run is the fused kernel with no bits (nothing to rewrite).
    LayerConfig inv = base;
    inv.normalize_invertible = true;
    CHECK_FALSE(plan(inv, AttnMask::LayerNorm).attn_bits_bwd_in_ln);
    // Post-LN has no LayerNorm before attention: the bits kernel, as with "kernel".
    LayerConfig post_cfg = base;
    post_cfg.pre_layer_norm = false;
    const LayerPlan post = plan(post_cfg, AttnMask::LayerNorm);
    CHECK_FALSE(post.attn_bits_in_ln);
    CHECK(post.attn_mask_kernel);
    CHECK(has_kernel(post, "attn_dropout_bits_fwd"));
    CHECK(kernel_names(post) == kernel_names(plan(post_cfg, AttnMask::Kernel)));
    // No attention dropout, or inference: no bits at all, the plain LayerNorm.
    LayerConfig nodrop = base;
    nodrop.attn_dropout_ratio = 0;
    CHECK_FALSE(plan(nodrop, AttnMask::LayerNorm).attn_bits_in_ln);
    CHECK(ln_op(plan(nodrop, AttnMask::LayerNorm)) == plain_ln);
    LayerConfig infer = base;
    infer.training = false;
    CHECK_FALSE(plan(infer, AttnMask::LayerNorm).attn_bits_in_ln);
    CHECK(ln_op(plan(infer, AttnMask::LayerNorm)) == plain_ln);
  }
}

// DSKC_ATTN_BITS_BWD: where attn_dropout_checkpoint's backward rewrites the keep bits. auto (the
// default): in the LayerNorm re-run of Pre-LN + normalize_invertible (with DSKC_ATTN_MASK=ln), else the
// standalone attn_dropout_bits_bwd; dot: in attn_flash_bwd_dot's launch (attn_flash_bwd_dot_bits, params
// AttnFlashDotBitsParams); kernel: always the standalone kernel. stochastic_mode's single pass keeps the kernel.
TEST_CASE("DSKC_ATTN_BITS_BWD: attn_dropout_checkpoint's keep bits from the LayerNorm re-run, the dot kernel or their own") {
  auto plan = [](LayerConfig c, AttnBitsBwd src, AttnMask m = AttnMask::LayerNorm, AttnDq dq = AttnDq::Gemm) {
    PlanOptions o{AttentionPath::FusedWhereSupported, m, dq};
    o.attn_bits_bwd = src;
    return make_plan(c, o);
  };
  auto where = [](const LayerPlan& p) {
    const bool k = p.find_kernel("attn_dropout_bits_bwd") != nullptr;
    const KernelInfo* dot = p.find_kernel("attn_flash_bwd_dot");
    const bool d = dot && dot->op == "attn_flash_bwd_dot_bits";
    CHECK(d == p.attn_bits_bwd_in_dot);
    if (d) {
      CHECK(dot->params_type == "AttnFlashDotBitsParams");
      CHECK(dot->instantiation == "attn_flash_bwd_dot_bits_impl<T>");
    }
    CHECK(int(k) + int(d) + int(p.attn_bits_bwd_in_ln) <= 1);
    return k ? "kernel" : d ? "dot" : p.attn_bits_bwd_in_ln ? "ln" : "none";
  };
  LayerConfig adc = with_flags(bert_large(), kAttnCkpt);
  LayerConfig all = with_flags(bert_large(), kAttnCkpt | kInvertible);
  CHECK(std::string(where(plan(adc, AttnBitsBwd::Auto))) == "kernel");
  CHECK(std::string(where(plan(adc, AttnBitsBwd::Dot))) == "dot");
  CHECK(std::string(where(plan(adc, AttnBitsBwd::Kernel))) == "kernel");
  CHECK(std::string(where(plan(all, AttnBitsBwd::Auto))) == "ln");
  CHECK(std::string(where(plan(all, AttnBitsBwd::Dot))) == "dot");
  CHECK(std::string(where(plan(all, AttnBitsBwd::Kernel))) == "kernel");
  CHECK(std::string(where(plan(all, AttnBitsBwd::Auto, AttnMask::Kernel))) == "kernel");
  CHECK(std::string(where(plan(all, AttnBitsBwd::Auto, AttnMask::Inline))) == "kernel");
  CHECK(std::string(where(plan(all, AttnBitsBwd::Dot, AttnMask::Inline))) == "dot");
  LayerConfig post = adc;
  post.pre_layer_norm = false;
  post.normalize_invertible = true;
  CHECK(std::string(where(plan(post, AttnBitsBwd::Auto))) == "kernel");
  CHECK(std::string(where(plan(post, AttnBitsBwd::Dot))) == "dot");
  // Nothing to rewrite without the flag, without attention dropout, in inference.
  CHECK(std::string(where(plan(bert_large(), AttnBitsBwd::Dot))) == "none");
  LayerConfig nodrop = adc;
  nodrop.attn_dropout_ratio = 0;
  CHECK(std::string(where(plan(nodrop, AttnBitsBwd::Dot))) == "none");
  LayerConfig infer = adc;
  infer.training = false;
  CHECK(std::string(where(plan(infer, AttnBitsBwd::Dot))) == "none");
  // stochastic_mode's single pass (its dot kernel zeroes the dQ accumulator): the standalone kernel.
  LayerConfig sto = adc;
  sto.stochastic_mode = true;
  CHECK(std::string(where(plan(sto, AttnBitsBwd::Dot, AttnMask::LayerNorm, AttnDq::Atomic))) == "kernel");
  // saved: the forward's bits are kept (as DeepSpeed's attn_dropout_checkpoint keeps its dropout mask)
  // and nothing rewrites them: the plan of the layer without the flag, kernel for kernel and tensor for
  // tensor, 2 MiB of bits per BERT-Large layer at (64, 128) more than the default form keeps.
  for (const LayerConfig& c : {adc, all}) {
    INFO("normalize_invertible " << c.normalize_invertible);
    LayerConfig none = c;
    none.attn_dropout_checkpoint = false;
    const LayerPlan saved = plan(c, AttnBitsBwd::Saved), base = plan(none, AttnBitsBwd::Auto);
    CHECK(std::string(where(saved)) == "none");
    CHECK(saved.attn_keep_bits_saved);
    CHECK(saved.find_saved("attn_dropout_bits") != nullptr);
    CHECK(saved.find_kernel("attn_dropout_bits_bwd") == nullptr);
    REQUIRE(saved.kernels.size() == base.kernels.size());
    for (size_t i = 0; i < base.kernels.size(); ++i) {
      CHECK(saved.kernels[i].name == base.kernels[i].name);
      CHECK(saved.kernels[i].op == base.kernels[i].op);
    }
    CHECK(saved.activation_bytes(64, 128) == base.activation_bytes(64, 128));
    CHECK(saved.workspace_bytes(64, 128) == base.workspace_bytes(64, 128));
    CHECK(saved.activation_bytes(64, 128) == plan(c, AttnBitsBwd::Auto).activation_bytes(64, 128) + (2 << 20));
  }
  // The same memory either way; the generated wrapper takes the combined params.
  CHECK(plan(adc, AttnBitsBwd::Dot).activation_bytes(64, 128) == plan(adc, AttnBitsBwd::Kernel).activation_bytes(64, 128));
  CHECK(plan(adc, AttnBitsBwd::Dot).workspace_bytes(64, 128) == plan(adc, AttnBitsBwd::Kernel).workspace_bytes(64, 128));
  const std::string src = emit(plan(adc, AttnBitsBwd::Dot)).source;
  CHECK(src.find("attn_flash_bwd_dot(const AttnFlashDotBitsParams p)") != std::string::npos);
  CHECK(src.find("static_assert(sizeof(AttnFlashDotBitsParams) == 80") != std::string::npos);
  // The environment.
  {
    dskc_test::ScopedEnv env("DSKC_ATTN_BITS_BWD", nullptr);
    CHECK(attn_bits_bwd_from_env() == AttnBitsBwd::Auto);
    CHECK_FALSE(make_plan(adc, {AttentionPath::FusedWhereSupported}).attn_bits_bwd_in_dot);
  }
  {
    dskc_test::ScopedEnv env("DSKC_ATTN_BITS_BWD", "dot");
    CHECK(make_plan(adc, {AttentionPath::FusedWhereSupported}).attn_bits_bwd_in_dot);
  }
  {
    dskc_test::ScopedEnv env("DSKC_ATTN_BITS_BWD", "saved");
    CHECK(attn_bits_bwd_from_env() == AttnBitsBwd::Saved);
    CHECK(make_plan(adc, {AttentionPath::FusedWhereSupported}).attn_keep_bits_saved);
  }
  for (const char* bad : {"Dot", "ln", "auto "})
    check_env_error("DSKC_ATTN_BITS_BWD", bad, "auto", "kernel", [] { attn_bits_bwd_from_env(); });
  check_env_error("DSKC_ATTN_BITS_BWD", "save", "dot", "saved", [] { attn_bits_bwd_from_env(); });
}

// DSKC_OUTPUT_GEMM=fused: on sm_90 in Pre-LN the gemm_sm90 output GEMM's epilogue (kBiasDropoutResidual)
// writes the layer output; no bias_dropout_residual_fwd_ffn. Post-LN, the cuBLASLt linear GEMMs and
// other targets keep the separate pass; the default is separate.
TEST_CASE("DSKC_OUTPUT_GEMM=fused: the output GEMM's epilogue adds output_b, the dropout and the residual") {
  auto plan = [](LayerConfig c, OutputGemm og, LinearGemm lg = LinearGemm::Sm90, const char* arch = "sm_90") {
    PlanOptions o{AttentionPath::FusedWhereSupported, AttnMask::LayerNorm};
    o.arch = arch;
    o.linear_gemm = lg;
    o.output_gemm = og;
    return make_plan(c, o);
  };
  for (DType t : {DType::F16, DType::BF16}) {
    CAPTURE(dtype_name(t));
    const LayerConfig c = with_dtype(bert_large(), t);
    const LayerPlan f = plan(c, OutputGemm::Fused), s = plan(c, OutputGemm::Separate);
    CHECK(f.output_gemm_fused);
    CHECK_FALSE(s.output_gemm_fused);
    const KernelInfo* g = f.find_kernel("gemm_output_fwd");
    REQUIRE(g);
    CHECK(g->instantiation == "gemm_sm90_impl<kHidden, kInter, GemmEpi::kBiasDropoutResidual>");
    // two regions and five stages, as the plain epilogue
    CHECK(g->dynamic_smem == s.find_kernel("gemm_output_fwd")->dynamic_smem);
    CHECK(g->dynamic_smem == gemm_sm90_smem_bytes(2));
    CHECK_FALSE(has_kernel(f, "bias_dropout_residual_fwd_ffn"));
    CHECK(has_kernel(s, "bias_dropout_residual_fwd_ffn"));
    CHECK(kernel_names(f).size() + 1 == kernel_names(s).size());
    CHECK(f.activation_bytes(64, 128) == s.activation_bytes(64, 128));
    const std::string src = emit(f).source;
    CHECK(src.find("gemm_sm90_impl<kHidden, kInter, GemmEpi::kBiasDropoutResidual>(p);") != std::string::npos);
    CHECK(src.find("GemmSm90Tile::smem_bytes(GemmEpi::kBiasDropoutResidual)") != std::string::npos);
    // Elsewhere: the separate pass.
    LayerConfig post = c;
    post.pre_layer_norm = false;
    CHECK_FALSE(plan(post, OutputGemm::Fused).output_gemm_fused);
    CHECK_FALSE(plan(c, OutputGemm::Fused, LinearGemm::Cublas).output_gemm_fused);
    CHECK_FALSE(plan(c, OutputGemm::Fused, LinearGemm::Sm90, "sm_80").output_gemm_fused);
    LayerConfig infer = c;
    infer.training = false;
    CHECK(plan(infer, OutputGemm::Fused).output_gemm_fused);  // no dropout then: kHiddenDropoutOn is false
  }
  CHECK_FALSE(plan(with_dtype(bert_large(), DType::F32), OutputGemm::Fused).output_gemm_fused);
  {
    dskc_test::ScopedEnv env("DSKC_OUTPUT_GEMM", nullptr);
    CHECK(output_gemm_from_env() == OutputGemm::Separate);
  }
  {
    dskc_test::ScopedEnv env("DSKC_OUTPUT_GEMM", "fused");
    PlanOptions o;
    o.arch = "sm_90";
    CHECK_FALSE(make_plan(bert_large(), o).output_gemm_fused);  // the default output GEMM is cuBLASLt's
    dskc_test::ScopedEnv linear("DSKC_LINEAR_GEMM", "sm90");
    CHECK(make_plan(bert_large(), o).output_gemm_fused);
  }
  for (const char* bad : {"Fused", "sm90", "fused "})
    check_env_error("DSKC_OUTPUT_GEMM", bad, "separate", "fused", [] { output_gemm_from_env(); });
}

// DSKC_DGRAD_GEMM=sm90: in training on sm_90 the intermediate, attention-output and (Pre-LN) QKV data
// gradients are gemm_sm90 kPlain kernels on the weights as stored (read N-major: kBNMajor, no
// transpose, no workspace; the default DSKC_SM90_WEIGHT=in_place) or, with DSKC_SM90_WEIGHT=transpose,
// on transposed weights (three weight_transpose launches, three workspace tensors); the activations
// unchanged; Post-LN's QKV data gradient, inference, cuBLASLt-only targets and fp32 keep cuBLASLt; the
// default is cuBLASLt.
TEST_CASE("DSKC_DGRAD_GEMM=sm90 plans the data gradients as gemm_sm90 kernels on the weights as stored or transposed") {
  auto plan = [](LayerConfig c, DgradGemm dg, const char* arch = "sm_90", Sm90Weight w = Sm90Weight::InPlace) {
    PlanOptions o{AttentionPath::FusedWhereSupported, AttnMask::LayerNorm};
    o.arch = arch;
    o.dgrad_gemm = dg;
    o.sm90_weight = w;
    return make_plan(c, o);
  };
  for (DType t : {DType::F16, DType::BF16}) {
    CAPTURE(dtype_name(t));
    const LayerConfig c = with_dtype(bert_large(), t);
    const LayerPlan g = plan(c, DgradGemm::Sm90), cb = plan(c, DgradGemm::Cublas),
                    gt = plan(c, DgradGemm::Sm90, "sm_90", Sm90Weight::Transpose),
                    cbt = plan(c, DgradGemm::Cublas, "sm_90", Sm90Weight::Transpose);  // (output_w transposed too)
    CHECK(g.dgrad_gemm_sm90);
    CHECK(gt.dgrad_gemm_sm90);
    CHECK(g.sm90_weight_in_place);
    CHECK_FALSE(gt.sm90_weight_in_place);
    CHECK_FALSE(cb.dgrad_gemm_sm90);
    const struct {
      const char *gemm, *inst, *transpose, *tinst, *tensor;
      int64_t elems;
    } want[] = {
        {"gemm_inter_dgrad", "gemm_sm90_impl<kHidden, kInter, GemmEpi::kPlain", "transpose_inter_w",
         "weight_transpose_impl<kInter, kHidden>", "inter_w_t", 1024 * 4096},
        {"gemm_attn_out_dgrad", "gemm_sm90_impl<kHidden, kHidden, GemmEpi::kPlain", "transpose_attn_ow",
         "weight_transpose_impl<kHidden, kHidden>", "attn_ow_t", 1024 * 1024},
        {"gemm_qkv_dgrad", "gemm_sm90_impl<kHidden, 3 * kHidden, GemmEpi::kPlain", "transpose_attn_qkvw",
         "weight_transpose_impl<3 * kHidden, kHidden>", "attn_qkvw_t", 3 * 1024 * 1024},
    };
    int64_t extra = 0;
    for (const auto& w : want) {
      CAPTURE(w.gemm);
      const KernelInfo* k = g.find_kernel(w.gemm);
      REQUIRE(k);
      CHECK(k->instantiation == std::string(w.inst) + ", true>");
      CHECK(k->pass == Pass::Backward);
      CHECK(gt.find_kernel(w.gemm)->instantiation == std::string(w.inst) + ">");
      CHECK_FALSE(has_kernel(cb, w.gemm));
      CHECK_FALSE(has_kernel(g, w.transpose));
      const KernelInfo* tr = gt.find_kernel(w.transpose);
      REQUIRE(tr);
      CHECK(tr->instantiation == w.tinst);
      // grid: (cols / 64, rows / 64) tiles of the weight [rows, cols]
      CHECK(static_cast<int64_t>(tr->grid_x) * tr->grid_y * 64 * 64 == w.elems);
      bool found = false;
      for (const auto& ws : gt.workspace)
        if (ws.name == w.tensor) found = ws.bytes(64, 128) == w.elems * 2;
      CHECK(found);
      for (const auto& ws : g.workspace) CHECK(ws.name != w.tensor);
      extra += w.elems * 2;
    }
    CHECK(kernel_names(g).size() == kernel_names(cb).size() + 3);
    CHECK(kernel_names(gt).size() == kernel_names(cbt).size() + 6);
    CHECK(g.activation_bytes(64, 128) == cb.activation_bytes(64, 128));
    CHECK(gt.activation_bytes(64, 128) == cb.activation_bytes(64, 128));
    CHECK(g.workspace_bytes(64, 128) == cb.workspace_bytes(64, 128));
    CHECK(gt.workspace_bytes(64, 128) == cbt.workspace_bytes(64, 128) + extra);
    CHECK(emit(g).source.find("gemm_sm90_impl<kHidden, 3 * kHidden, GemmEpi::kPlain, true>(p);") != std::string::npos);
    const std::string src = emit(gt).source;
    CHECK(src.find("gemm_sm90_impl<kHidden, 3 * kHidden, GemmEpi::kPlain>(p);") != std::string::npos);
    CHECK(src.find("weight_transpose_impl<kInter, kHidden>(p);") != std::string::npos);
    // Post-LN: no QKV transpose or gemm_sm90 QKV data gradient (it accumulates into grad_input in cuBLASLt).
    LayerConfig post = c;
    post.pre_layer_norm = false;
    const LayerPlan gp = plan(post, DgradGemm::Sm90, "sm_90", Sm90Weight::Transpose);
    CHECK(gp.dgrad_gemm_sm90);
    CHECK(has_kernel(gp, "gemm_inter_dgrad"));
    CHECK_FALSE(has_kernel(gp, "gemm_qkv_dgrad"));
    CHECK_FALSE(has_kernel(gp, "transpose_attn_qkvw"));
    // Elsewhere: cuBLASLt.
    LayerConfig infer = c;
    infer.training = false;
    CHECK_FALSE(plan(infer, DgradGemm::Sm90).dgrad_gemm_sm90);
    CHECK_FALSE(plan(infer, DgradGemm::Sm90).sm90_weight_in_place);
    CHECK_FALSE(plan(c, DgradGemm::Sm90, "sm_80").dgrad_gemm_sm90);
  }
  CHECK_FALSE(plan(with_dtype(bert_large(), DType::F32), DgradGemm::Sm90).dgrad_gemm_sm90);
  {
    dskc_test::ScopedEnv a("DSKC_DGRAD_GEMM", nullptr);
    CHECK(dgrad_gemm_from_env() == DgradGemm::Cublas);
    PlanOptions o;
    o.arch = "sm_90";
    CHECK_FALSE(make_plan(bert_large(), o).dgrad_gemm_sm90);
  }
  {
    dskc_test::ScopedEnv a("DSKC_DGRAD_GEMM", "sm90");
    PlanOptions o;
    o.arch = "sm_90";
    CHECK(make_plan(bert_large(), o).dgrad_gemm_sm90);
  }
  for (const char* bad : {"Sm90", "cublasLt", "sm90 "})
    check_env_error("DSKC_DGRAD_GEMM", bad, "cublas", "sm90", [] { dgrad_gemm_from_env(); });
  // DSKC_SM90_WEIGHT: unset or "" is the default (kSm90WeightDefault); "in_place" reads the weights as
  // stored, "transpose" has the weight_transpose kernels write Wᵀ first.
  for (const char* v : {static_cast<const char*>(nullptr), ""}) {
    const dskc_test::ScopedEnv a("DSKC_SM90_WEIGHT", v);
    CHECK(sm90_weight_from_env() == kSm90WeightDefault);
    CHECK(sm90_plan(bert_large(), FfnGemm::Sm90, LinearGemm::Cublas, GeluSave::Grad, Sm90Weight::FromEnvironment)
              .sm90_weight_in_place == (kSm90WeightDefault == Sm90Weight::InPlace));
  }
  for (const char* v : {"in_place", "transpose"}) {
    const dskc_test::ScopedEnv a("DSKC_SM90_WEIGHT", v);
    const bool in_place = std::string(v) == "in_place";
    CHECK(sm90_weight_from_env() == (in_place ? Sm90Weight::InPlace : Sm90Weight::Transpose));
    const LayerPlan p =
        sm90_plan(bert_large(), FfnGemm::Sm90, LinearGemm::Cublas, GeluSave::Grad, Sm90Weight::FromEnvironment);
    CHECK(p.sm90_weight_in_place == in_place);
    CHECK(has_kernel(p, "transpose_output_w") == !in_place);
  }
  for (const char* bad : {"inplace", "Transpose", "in_place "})
    check_env_error("DSKC_SM90_WEIGHT", bad, "in_place", "transpose", [] { sm90_weight_from_env(); });
}

TEST_CASE("attn_flash_fwd: one K/V buffer by default; DSKC_ATTN_FWD_STAGES=2 double-buffers where two fit in 48 KB") {
  auto stages = [](LayerConfig c, int head_dim, AttnMask m, double attn_p = 0.1, int opt_stages = 2) {
    c.heads = c.hidden_size / head_dim;
    c.attn_dropout_ratio = attn_p;
    PlanOptions o{AttentionPath::FusedWhereSupported, m};
    o.attn_fwd_stages = opt_stages;
    return make_plan(c, o).attn_fwd_stages;
  };
  const LayerConfig c = bert_large();  // hidden 1024
  CHECK(stages(c, 64, AttnMask::Kernel) == 2);  // BERT-Large, the default mask source
  CHECK(stages(c, 32, AttnMask::Kernel) == 2);
  CHECK(stages(c, 16, AttnMask::Kernel) == 2);
  CHECK(stages(c, 128, AttnMask::Kernel) == 1);  // 52 KB with two
  CHECK(stages(c, 64, AttnMask::Inline) == 1);   // the byte flags of the kernel's own Philox draw
  CHECK(stages(c, 64, AttnMask::Inline, 0.0) == 2);  // no attention dropout: no flags
  CHECK(stages(c, 64, AttnMask::Kernel, 0.1, 1) == 1);
  LayerConfig hd = c;
  hd.hidden_size = 960;
  CHECK(stages(hd, 80, AttnMask::Kernel) == 2);
  CHECK(stages(hd, 96, AttnMask::Kernel) == 2);
  LayerConfig inf = c;
  inf.training = false;
  CHECK(stages(inf, 64, AttnMask::Inline) == 2);  // inference: no dropout flags
  PlanOptions two{AttentionPath::Unfused};
  two.attn_fwd_stages = 2;
  CHECK(make_plan(c, two).attn_fwd_stages == 1);
  two.attention = AttentionPath::FusedWhereSupported;
  CHECK(make_plan(with_dtype(c, DType::F32), two).attn_fwd_stages == 1);  // fp32: unfused attention
  // The mirror against the kernel's arrays at BERT-Large: Q 64x72, 2x2 K/V 64x72 (fp16), the
  // fp32 mask row, 64x2 bit words, the unused byte-flag placeholder.
  CHECK(flash_fwd_smem_bytes(64, 2, false, true) == 2 * 72 * (64 + 256) + 256 + 16 + 512);
  CHECK(flash_fwd_smem_bytes(64, 2, true, false) > 48 * 1024);
  // The environment, read when the options leave it open (0).
  {
    dskc_test::ScopedEnv env("DSKC_ATTN_FWD_STAGES", nullptr);
    CHECK(stages(c, 64, AttnMask::Kernel, 0.1, 0) == 1);  // the default: one buffer (measured faster)
    CHECK(make_plan(c).attn_fwd_stages == 1);
  }
  {
    dskc_test::ScopedEnv env("DSKC_ATTN_FWD_STAGES", "2");
    CHECK(stages(c, 64, AttnMask::Kernel, 0.1, 0) == 2);
    CHECK(stages(c, 128, AttnMask::Kernel, 0.1, 0) == 1);  // still only where it fits
    CHECK(stages(c, 64, AttnMask::Kernel, 0.1, 1) == 1);   // explicit options win over the environment
  }
  {
    dskc_test::ScopedEnv env("DSKC_ATTN_FWD_STAGES", "1");
    CHECK(stages(c, 64, AttnMask::Kernel, 0.1, 0) == 1);
  }
  for (const char* bad : {"3", "0", "two", " 2"})
    check_env_error("DSKC_ATTN_FWD_STAGES", bad, "1", "2", [] { attn_fwd_stages_from_env(); });
}

TEST_CASE("tanh GELU runs in cuBLASLt's GELU_AUX_BIAS / DGELU epilogues where the layer allows; DSKC_GELU=kernel keeps "
          "the kernels") {
  auto plan_of = [](LayerConfig c, GeluPath g = GeluPath::Kernel, BiasGrad bg = BiasGrad::Gemv) {
    PlanOptions o;
    o.gelu = g;
    o.bias_grad = bg;
    return make_plan(c, o);
  };
  LayerConfig tanh = bert_large();
  tanh.gelu_approximation = GeluForm::Tanh;
  const LayerPlan epi = plan_of(tanh, GeluPath::EpilogueWhereSupported);
  CHECK(epi.gelu_in_gemm);
  CHECK_FALSE(has_kernel(epi, "bias_gelu_fwd"));
  CHECK_FALSE(has_kernel(epi, "bias_gelu_bwd"));
  // The same tensors as the kernels keep: h for GELU', GELU(h) for the output_w gradient.
  const LayerPlan ker = plan_of(tanh, GeluPath::Kernel);
  CHECK_FALSE(ker.gelu_in_gemm);
  CHECK(has_kernel(ker, "bias_gelu_fwd"));
  CHECK(has_kernel(ker, "bias_gelu_bwd"));
  CHECK(epi.find_saved("ffn_pre_gelu") != nullptr);
  CHECK(epi.find_saved("ffn_gelu_out") != nullptr);
  CHECK(epi.activation_bytes() == ker.activation_bytes());
  CHECK(epi.kernels.size() + 2 == ker.kernels.size());
  CHECK(emit(epi).source.find("bias_gelu_") == std::string::npos);
  CHECK(emit_config_header(epi).find("constexpr bool kGeluInGemm = true;") != std::string::npos);
  CHECK(emit_config_header(ker).find("constexpr bool kGeluInGemm = false;") != std::string::npos);
  CHECK(plan_of(with_dtype(tanh, DType::BF16), GeluPath::EpilogueWhereSupported).gelu_in_gemm);
  LayerConfig inf = tanh;
  inf.training = false;
  CHECK(plan_of(inf, GeluPath::EpilogueWhereSupported).gelu_in_gemm);
  // Where it does not apply: the erf GELU (cuBLASLt's is the tanh form), fp32, gelu_checkpoint (its
  // GELU backward pass rebuilds GELU(h)), bias partials (bias_gelu_bwd writes inter_b's), and an
  // intermediate size that is not a multiple of 8 (the aux matrix's leading dimension).
  CHECK_FALSE(plan_of(bert_large(), GeluPath::EpilogueWhereSupported).gelu_in_gemm);
  CHECK_FALSE(plan_of(with_dtype(tanh, DType::F32), GeluPath::EpilogueWhereSupported).gelu_in_gemm);
  LayerConfig ck = tanh;
  ck.gelu_checkpoint = true;
  CHECK_FALSE(plan_of(ck, GeluPath::EpilogueWhereSupported).gelu_in_gemm);
  CHECK(has_kernel(plan_of(ck, GeluPath::EpilogueWhereSupported), "bias_gelu_bwd"));
  CHECK_FALSE(plan_of(tanh, GeluPath::EpilogueWhereSupported, BiasGrad::Partials).gelu_in_gemm);
  CHECK(plan_of(tanh, GeluPath::EpilogueWhereSupported, BiasGrad::Epilogue).gelu_in_gemm);
  LayerConfig odd = tanh;
  odd.intermediate_size = 4092;
  CHECK_FALSE(plan_of(odd, GeluPath::EpilogueWhereSupported).gelu_in_gemm);
  // The environment: the epilogue by default.
  {
    dskc_test::ScopedEnv env("DSKC_GELU", nullptr);
    CHECK(make_plan(tanh).gelu_in_gemm);
  }
  {
    dskc_test::ScopedEnv env("DSKC_GELU", "kernel");
    CHECK_FALSE(make_plan(tanh).gelu_in_gemm);
    CHECK(plan_of(tanh, GeluPath::EpilogueWhereSupported).gelu_in_gemm);  // explicit options win
  }
  for (const char* bad : {"tanh", "EPILOGUE", " kernel"})
    check_env_error("DSKC_GELU", bad, "epilogue", "kernel", [] { gelu_path_from_env(); });
}

TEST_CASE("sm_90 with DSKC_FFN_GEMM=sm90 / sm90_fwd: the FFN's GELU GEMMs are gemm_sm90 kernels (GELU in the "
          "epilogue) where the layer allows; both by default") {
  for (bool tanh : {false, true}) {
    LayerConfig c = bert_large();
    if (tanh) c.gelu_approximation = GeluForm::Tanh;
    CAPTURE(tanh);
    const LayerPlan g = sm90_plan(c), cu = sm90_plan(c, FfnGemm::Cublas);
    CHECK(g.ffn_gemm_sm90);
    CHECK_FALSE(g.gelu_in_gemm);  // gemm_sm90 takes the tanh form's cuBLASLt epilogues' place too
    CHECK_FALSE(cu.ffn_gemm_sm90);
    CHECK(cu.gelu_in_gemm == tanh);
    for (const char* k : {"bias_gelu_fwd", "bias_gelu_bwd"}) CHECK_FALSE(has_kernel(g, k));
    CHECK(has_kernel(cu, "bias_gelu_fwd") == !tanh);
    const std::vector<std::string> names = kernel_names(g);
    // Launch order: forward GEMM after the attention LayerNorm, then the backward runs the data
    // gradient where bias_gelu_bwd ran (on output_w as stored, Sm90Weight::InPlace: no transpose).
    auto at = [&](const char* n) { return std::find(names.begin(), names.end(), n) - names.begin(); };
    CHECK(at("gemm_inter_fwd") == at("bias_dropout_residual_layernorm_fwd_attn") + 1);
    CHECK_FALSE(has_kernel(g, "transpose_output_w"));
    CHECK(g.sm90_weight_in_place);
    CHECK(at("gemm_output_dgrad") == at("dropout_bias_grad_ffn_out") + 1);
    const KernelInfo& f = *g.find_kernel("gemm_inter_fwd");
    CHECK(f.op == "gemm_sm90");
    CHECK(f.grid == GridKind::Persistent);
    CHECK(f.block == 384);
    CHECK(f.rows_per_block == 128);
    CHECK(f.tile_cols == 128);
    CHECK(f.cols == c.intermediate_size);
    // The GELU epilogue's regions: DSKC_GEMM_GELU_REGIONS, default 2 (five stages); the backward's
    // epilogue multiplies by the kept GELU′(h) in two (five stages), and with GELU′ computed from h
    // (DSKC_GELU_SAVE=input) keeps three (h's halves and the products), four stages.
    const LayerPlan gi = sm90_plan(c, FfnGemm::Sm90, LinearGemm::Cublas, GeluSave::Input);
    CHECK(g.gemm_gelu_regions == 2);
    CHECK(f.dynamic_smem == gemm_sm90_smem_bytes(2));
    CHECK(g.find_kernel("gemm_output_dgrad")->dynamic_smem == gemm_sm90_smem_bytes(2));
    CHECK(gi.find_kernel("gemm_inter_fwd")->dynamic_smem == gemm_sm90_smem_bytes(2));
    CHECK(gi.find_kernel("gemm_output_dgrad")->dynamic_smem == gemm_sm90_smem_bytes(3));
    CHECK(f.dynamic_smem <= 227 * 1024);
    CHECK(f.grid_constant);
    // GELU′(h) kept in h's place (GeluSave::Grad, the default), or h (Input): the same bytes
    CHECK(g.gelu_grad_saved);
    CHECK_FALSE(gi.gelu_grad_saved);
    CHECK(f.instantiation == "gemm_sm90_impl<kInter, kHidden, GemmEpi::kBiasGeluSaveGrad>");
    CHECK(g.find_kernel("gemm_output_dgrad")->instantiation ==
          "gemm_sm90_impl<kInter, kHidden, GemmEpi::kDGeluSaved, true>");
    CHECK(gi.find_kernel("gemm_inter_fwd")->instantiation == "gemm_sm90_impl<kInter, kHidden, GemmEpi::kBiasGelu>");
    CHECK(gi.find_kernel("gemm_output_dgrad")->instantiation == "gemm_sm90_impl<kInter, kHidden, GemmEpi::kDGelu, true>");
    CHECK(g.find_saved("ffn_gelu_grad") != nullptr);
    CHECK(g.find_saved("ffn_pre_gelu") == nullptr);
    CHECK(gi.find_saved("ffn_pre_gelu") != nullptr);
    CHECK(gi.find_saved("ffn_gelu_grad") == nullptr);
    CHECK(gi.activation_bytes() == g.activation_bytes());
    CHECK(emit(gi).source.find("static_assert(GemmSm90Tile::smem_bytes(GemmEpi::kDGelu) == " +
                               std::to_string(gemm_sm90_smem_bytes(3))) != std::string::npos);
    // Same saved tensors, the same workspace (output_w read where it is).
    CHECK(g.activation_bytes() == cu.activation_bytes());
    CHECK(g.workspace_bytes(64, 128) == cu.workspace_bytes(64, 128));
    CHECK(g.find_kernel("gemm_output_dgrad")->fuses.find("output_w read N-major as stored") != std::string::npos);
    // DSKC_SM90_WEIGHT=transpose: transpose_output_w writes output_wᵀ [I, H] into the shared workspace
    // before the FFN backward, and the data gradient reads it K-major.
    const LayerPlan gt = sm90_plan(c, FfnGemm::Sm90, LinearGemm::Cublas, GeluSave::Grad, Sm90Weight::Transpose);
    CHECK_FALSE(gt.sm90_weight_in_place);
    const KernelInfo& tr = *gt.find_kernel("transpose_output_w");
    CHECK(tr.grid == GridKind::Fixed);
    CHECK(tr.grid_x == c.intermediate_size / 64);
    CHECK(tr.grid_y == c.hidden_size / 64);
    const std::vector<std::string> tnames = kernel_names(gt);
    auto tat = [&](const char* n) { return std::find(tnames.begin(), tnames.end(), n) - tnames.begin(); };
    CHECK(tat("transpose_output_w") < tat("dropout_bias_grad_ffn_out"));
    CHECK(gt.find_kernel("gemm_output_dgrad")->instantiation == "gemm_sm90_impl<kInter, kHidden, GemmEpi::kDGeluSaved>");
    CHECK(gt.find_kernel("gemm_output_dgrad")->fuses.find("output_wᵀ from output_w_t") != std::string::npos);
    CHECK(gt.activation_bytes() == cu.activation_bytes());
    CHECK(gt.workspace_bytes(64, 128) ==
          cu.workspace_bytes(64, 128) + int64_t{2} * c.intermediate_size * c.hidden_size);
    CHECK(names.size() + 1 == tnames.size());
    const std::string src = emit(g).source;
    CHECK(src.find("void __launch_bounds__(384, 1) gemm_inter_fwd(const __grid_constant__ GemmSm90Params p)") !=
          std::string::npos);
    CHECK(src.find("static_assert(GemmSm90Tile::smem_bytes(GemmEpi::kBiasGeluSaveGrad) == " +
                   std::to_string(gemm_sm90_smem_bytes(2))) !=
          std::string::npos);
    CHECK(src.find("static_assert(GemmSm90Tile::smem_bytes(GemmEpi::kDGeluSaved) == " +
                   std::to_string(gemm_sm90_smem_bytes(2))) !=
          std::string::npos);
    CHECK(emit_config_header(g).find("constexpr int kGemmGeluRegions = 2;") != std::string::npos);
    for (int regions : {2, 3}) {
      CAPTURE(regions);
      const dskc_test::ScopedEnv env("DSKC_GEMM_GELU_REGIONS", std::to_string(regions).c_str());
      const LayerPlan r = sm90_plan(c);
      CHECK(r.gemm_gelu_regions == regions);
      CHECK(r.find_kernel("gemm_inter_fwd")->dynamic_smem == gemm_sm90_smem_bytes(regions));
      CHECK(r.find_kernel("gemm_output_dgrad")->dynamic_smem == gemm_sm90_smem_bytes(2));
      CHECK(emit_config_header(r).find("constexpr int kGemmGeluRegions = " + std::to_string(regions) + ";") !=
            std::string::npos);
      CHECK(emit(r).source.find("static_assert(GemmSm90Tile::smem_bytes(GemmEpi::kBiasGeluSaveGrad) == " +
                                std::to_string(gemm_sm90_smem_bytes(regions))) != std::string::npos);
    }
    for (const char* bad : {"1", "4", "two"})
      check_env_error("DSKC_GEMM_GELU_REGIONS", bad, "2", "3", [] { gemm_gelu_regions_from_env(); });
    CHECK(emit_config_header(g).find("constexpr bool kFfnGemmSm90 = true;") != std::string::npos);
    CHECK(emit_config_header(cu).find("constexpr bool kFfnGemmSm90 = false;") != std::string::npos);
  }
  // gelu_checkpoint: the forward keeps h (not GELU(h), nor GELU′(h)) and the data gradient rebuilds
  // GELU(h) as well; inference: the forward writes GELU(h) only.
  LayerConfig ck = bert_large();
  ck.gelu_checkpoint = true;
  const LayerPlan pk = sm90_plan(ck);
  CHECK_FALSE(pk.gelu_grad_saved);
  CHECK(pk.find_saved("ffn_pre_gelu") != nullptr);
  CHECK(pk.find_saved("ffn_gelu_grad") == nullptr);
  CHECK(pk.find_kernel("gemm_inter_fwd")->instantiation == "gemm_sm90_impl<kInter, kHidden, GemmEpi::kBiasGelu>");
  CHECK(pk.find_kernel("gemm_output_dgrad")->instantiation ==
        "gemm_sm90_impl<kInter, kHidden, GemmEpi::kDGeluStoreGelu, true>");
  LayerConfig inf = bert_large();
  inf.training = false;
  const LayerPlan pi = sm90_plan(inf);
  CHECK(pi.find_kernel("gemm_inter_fwd")->instantiation == "gemm_sm90_impl<kInter, kHidden, GemmEpi::kBiasGeluNoPre>");
  CHECK_FALSE(has_kernel(pi, "transpose_output_w"));
  CHECK_FALSE(has_kernel(pi, "gemm_output_dgrad"));
  CHECK_FALSE(pi.gelu_grad_saved);
  // Where it does not apply: other targets (and no target), fp32, bias partials (bias_gelu_bwd writes
  // inter_b's), an intermediate size that is not a multiple of 128, a hidden size not a multiple of 64.
  CHECK(sm90_plan(with_dtype(bert_large(), DType::BF16)).ffn_gemm_sm90);
  CHECK_FALSE(sm90_plan(with_dtype(bert_large(), DType::F32)).ffn_gemm_sm90);
  for (const char* arch : {"", "sm_80", "sm_86", "sm_89"}) {
    PlanOptions o;
    o.arch = arch;
    o.ffn_gemm = FfnGemm::Sm90;
    CHECK_FALSE(make_plan(bert_large(), o).ffn_gemm_sm90);
  }
  {
    PlanOptions o;
    o.arch = "sm_90";
    o.ffn_gemm = FfnGemm::Sm90;
    o.bias_grad = BiasGrad::Partials;
    CHECK_FALSE(make_plan(bert_large(), o).ffn_gemm_sm90);
    o.bias_grad = BiasGrad::Epilogue;
    CHECK(make_plan(bert_large(), o).ffn_gemm_sm90);
  }
  LayerConfig odd = bert_large();
  odd.intermediate_size = 4000;  // a multiple of 8 and 32, not of 128
  CHECK_FALSE(sm90_plan(odd).ffn_gemm_sm90);
  LayerConfig base = bert_large();
  base.hidden_size = 768;
  base.heads = 12;
  base.intermediate_size = 3072;  // BERT-Base: 3072 = 24 x 128, 768 = 12 x 64
  CHECK(sm90_plan(base).ffn_gemm_sm90);
  LayerConfig narrow = bert_large();
  narrow.hidden_size = 1120;
  narrow.heads = 16;  // I = 4096 = 32 x 128, but 1120 % 64 != 0
  CHECK_FALSE(sm90_plan(narrow).ffn_gemm_sm90);
  CHECK(ffn_gemm_sm90_supported(bert_large(), "sm_90"));
  CHECK_FALSE(ffn_gemm_sm90_supported(bert_large(), "sm_80"));
  // sm90_fwd: the forward GEMM only; the backward keeps cuBLASLt + bias_gelu_bwd (no transpose, no
  // output_wᵀ workspace). Inference plans have no backward either way.
  {
    const LayerPlan f = sm90_plan(bert_large(), FfnGemm::Sm90Forward), both = sm90_plan(bert_large());
    CHECK(f.ffn_gemm_sm90);
    CHECK_FALSE(f.ffn_gemm_sm90_bwd);
    CHECK(both.ffn_gemm_sm90_bwd);
    CHECK(has_kernel(f, "gemm_inter_fwd"));
    CHECK_FALSE(has_kernel(f, "bias_gelu_fwd"));
    CHECK(has_kernel(f, "bias_gelu_bwd"));
    CHECK_FALSE(has_kernel(f, "transpose_output_w"));
    CHECK_FALSE(has_kernel(f, "gemm_output_dgrad"));
    CHECK_FALSE(f.sm90_weight_in_place);  // no gemm_sm90 data gradient to read a weight
    CHECK(f.workspace_bytes(64, 128) == both.workspace_bytes(64, 128));
    CHECK_FALSE(f.gelu_in_gemm);
    // bias_gelu_bwd reads h: sm90_fwd keeps it
    CHECK_FALSE(f.gelu_grad_saved);
    CHECK(f.find_saved("ffn_pre_gelu") != nullptr);
    CHECK(f.find_kernel("gemm_inter_fwd")->instantiation == "gemm_sm90_impl<kInter, kHidden, GemmEpi::kBiasGelu>");
    CHECK(emit_config_header(f).find("constexpr bool kFfnGemmSm90 = true;  // the intermediate GEMM") != std::string::npos);
    CHECK_FALSE(pi.ffn_gemm_sm90_bwd);
  }
  // The environment: gemm_sm90 for both GELU GEMMs by default (kFfnGemmDefault: the measured choice,
  // bench/NOTES.md v48; the intermediate GEMM only from v26, cuBLASLt before the GELU got cheaper, v17).
  CHECK(kFfnGemmDefault == FfnGemm::Sm90);
  PlanOptions env_opt;
  env_opt.arch = "sm_90";
  {
    dskc_test::ScopedEnv env("DSKC_FFN_GEMM", nullptr);
    const LayerPlan d = make_plan(bert_large(), env_opt);
    CHECK(d.ffn_gemm_sm90);
    CHECK(d.ffn_gemm_sm90_bwd);
    CHECK(has_kernel(d, "gemm_output_dgrad"));
    CHECK_FALSE(has_kernel(d, "bias_gelu_bwd"));
  }
  {
    dskc_test::ScopedEnv env("DSKC_FFN_GEMM", "cublas");
    CHECK_FALSE(make_plan(bert_large(), env_opt).ffn_gemm_sm90);
  }
  {
    dskc_test::ScopedEnv env("DSKC_FFN_GEMM", "sm90");
    CHECK(make_plan(bert_large(), env_opt).ffn_gemm_sm90_bwd);
    CHECK_FALSE(sm90_plan(bert_large(), FfnGemm::Cublas).ffn_gemm_sm90);  // explicit options win
  }
  {
    dskc_test::ScopedEnv env("DSKC_FFN_GEMM", "sm90_fwd");
    const LayerPlan f = make_plan(bert_large(), env_opt);
    CHECK(f.ffn_gemm_sm90);
    CHECK_FALSE(f.ffn_gemm_sm90_bwd);
  }
  for (const char* bad : {"cuBLAS", "sm_90", "wgmma"})
    check_env_error("DSKC_FFN_GEMM", bad, "sm90", "cublas", [] { ffn_gemm_from_env(); });
  // DSKC_GELU_SAVE: GELU′(h) by default (kGeluSaveDefault), h with "input"
  CHECK(kGeluSaveDefault == GeluSave::Grad);
  {
    dskc_test::ScopedEnv env("DSKC_GELU_SAVE", nullptr);
    CHECK(make_plan(bert_large(), env_opt).gelu_grad_saved);
  }
  {
    dskc_test::ScopedEnv env("DSKC_GELU_SAVE", "input");
    CHECK_FALSE(make_plan(bert_large(), env_opt).gelu_grad_saved);
    CHECK(sm90_plan(bert_large()).gelu_grad_saved);  // explicit options win
  }
  {
    dskc_test::ScopedEnv env("DSKC_GELU_SAVE", "grad");
    CHECK(make_plan(bert_large(), env_opt).gelu_grad_saved);
  }
  for (const char* bad : {"h", "GRAD", "gelu"})
    check_env_error("DSKC_GELU_SAVE", bad, "grad", "input", [] { gelu_save_from_env(); });
}

TEST_CASE("DSKC_LINEAR_GEMM=sm90: the forward's QKV, attention-output and output GEMMs become "
          "gemm_sm90 kernels with plain epilogues on sm_90; DSKC_LINEAR_GEMM=cublas keeps cuBLASLt") {
  for (DType t : {DType::F16, DType::BF16})
    for (bool pre : {true, false})
      for (bool train : {true, false}) {
        CAPTURE(t);
        CAPTURE(pre);
        CAPTURE(train);
        LayerConfig c = with_dtype(bert_large(), t);
        c.pre_layer_norm = pre;
        c.training = train;
        const LayerPlan l = sm90_plan(c, FfnGemm::Cublas, LinearGemm::Sm90), cu = sm90_plan(c, FfnGemm::Cublas);
        CHECK(l.linear_gemm_sm90);
        CHECK_FALSE(cu.linear_gemm_sm90);
        CHECK_FALSE(l.ffn_gemm_sm90);  // independent of DSKC_FFN_GEMM
        // The three GEMMs join the kernel list where cuBLASLt ran them; nothing else changes.
        std::vector<std::string> names = kernel_names(l);
        auto at = [&](const char* n) { return std::find(names.begin(), names.end(), n) - names.begin(); };
        CHECK(at("gemm_qkv_fwd") == (pre ? at("layernorm_fwd_norm") + 1 : 0));
        CHECK(at("gemm_attn_out_fwd") + 1 == at("bias_dropout_residual_layernorm_fwd_attn"));
        CHECK(at("gemm_output_fwd") == at(pre ? "bias_dropout_residual_fwd_ffn" : "bias_dropout_residual_layernorm_fwd_ffn") - 1);
        CHECK(at("gemm_output_fwd") == at("bias_gelu_fwd") + 1);
        for (const char* k : {"gemm_qkv_fwd", "gemm_attn_out_fwd", "gemm_output_fwd"})
          names.erase(std::find(names.begin(), names.end(), k));
        CHECK(names == kernel_names(cu));
        CHECK(l.activation_bytes() == cu.activation_bytes());
        CHECK(l.workspace_bytes(64, 128) == cu.workspace_bytes(64, 128));
        struct Want {
          const char* name;
          const char* inst;
          const char* epi;
          int cols;
        };
        for (const Want& w :
             {Want{"gemm_qkv_fwd", "gemm_sm90_impl<3 * kHidden, kHidden, GemmEpi::kBias>", "kBias", 3072},
              Want{"gemm_attn_out_fwd", "gemm_sm90_impl<kHidden, kHidden, GemmEpi::kPlain>", "kPlain", 1024},
              Want{"gemm_output_fwd", "gemm_sm90_impl<kHidden, kInter, GemmEpi::kPlain>", "kPlain", 1024}}) {
          CAPTURE(w.name);
          const KernelInfo& k = *l.find_kernel(w.name);
          CHECK(k.op == "gemm_sm90");
          CHECK(k.pass == Pass::Forward);
          CHECK(k.instantiation == w.inst);
          CHECK(k.cols == w.cols);
          CHECK(k.grid == GridKind::Persistent);
          CHECK(k.tile_cols == 128);
          CHECK(k.grid_constant);
          // Two regions per warpgroup, five stages: 16 bytes more than the GELU′ epilogues' four stages
          // and three regions, within the 227 KB an SM gives one block.
          CHECK(k.dynamic_smem == gemm_sm90_smem_bytes(2));
          CHECK(k.smem_check == std::string("GemmSm90Tile::smem_bytes(GemmEpi::") + w.epi + ")");
        }
        CHECK(gemm_sm90_smem_bytes(2) == gemm_sm90_smem_bytes(3) + 16);
        const std::string src = emit(l).source;
        CHECK(src.find("void __launch_bounds__(384, 1) gemm_output_fwd(const __grid_constant__ GemmSm90Params p)") !=
              std::string::npos);
        CHECK(src.find("static_assert(GemmSm90Tile::smem_bytes(GemmEpi::kPlain) == 230496") != std::string::npos);
        CHECK(emit_config_header(l).find("constexpr bool kLinearGemmSm90 = true;") != std::string::npos);
        CHECK(emit_config_header(cu).find("constexpr bool kLinearGemmSm90 = false;") != std::string::npos);
        CHECK(emit(l).source != emit(cu).source);  // two modules, two cache entries
        // With the FFN's gemm_sm90 kernels as well: six gemm_sm90 kernels, the same in the forward order.
        const LayerPlan both = sm90_plan(c, FfnGemm::Sm90, LinearGemm::Sm90);
        const std::vector<std::string> bn = kernel_names(both);
        auto at2 = [&](const char* n) { return std::find(bn.begin(), bn.end(), n) - bn.begin(); };
        CHECK(at2("gemm_output_fwd") == at2("gemm_inter_fwd") + 1);
      }
  // Where it does not apply: other targets, fp32, a hidden size that is not a multiple of 128 (the
  // output GEMMs' N), an intermediate size not a multiple of 64 (the output GEMM's K).
  CHECK(linear_gemm_sm90_supported(bert_large(), "sm_90"));
  for (const char* arch : {"", "sm_80", "sm_86", "sm_89"}) CHECK_FALSE(linear_gemm_sm90_supported(bert_large(), arch));
  CHECK_FALSE(sm90_plan(with_dtype(bert_large(), DType::F32), FfnGemm::Cublas, LinearGemm::Sm90).linear_gemm_sm90);
  LayerConfig base = bert_large();
  base.hidden_size = 768;
  base.heads = 12;
  base.intermediate_size = 3072;
  CHECK(sm90_plan(base, FfnGemm::Cublas, LinearGemm::Sm90).linear_gemm_sm90);  // 768 = 6 x 128
  LayerConfig narrow = bert_large();
  narrow.hidden_size = 1088;  // 17 x 64, not a multiple of 128
  narrow.heads = 16;
  CHECK_FALSE(sm90_plan(narrow, FfnGemm::Cublas, LinearGemm::Sm90).linear_gemm_sm90);
  LayerConfig odd = bert_large();
  odd.intermediate_size = 4000;  // not a multiple of 64
  CHECK_FALSE(sm90_plan(odd, FfnGemm::Cublas, LinearGemm::Sm90).linear_gemm_sm90);
  // The environment: cuBLASLt by default (the measured choice since bench/NOTES.md v33; gemm_sm90 in v19-v32).
  CHECK(kLinearGemmDefault == LinearGemm::Cublas);
  PlanOptions o;
  o.arch = "sm_90";
  for (const char* unset_or_cublas : {static_cast<const char*>(nullptr), "", "cublas"}) {
    dskc_test::ScopedEnv env("DSKC_LINEAR_GEMM", unset_or_cublas);
    CHECK_FALSE(make_plan(bert_large(), o).linear_gemm_sm90);
    CHECK_FALSE(make_plan(bert_large(), o).find_kernel("gemm_qkv_fwd"));
    CHECK(sm90_plan(bert_large(), FfnGemm::Cublas, LinearGemm::Sm90).linear_gemm_sm90);  // explicit options win
  }
  {
    dskc_test::ScopedEnv env("DSKC_LINEAR_GEMM", "sm90");
    CHECK(make_plan(bert_large(), o).linear_gemm_sm90);
    o.arch = "sm_80";
    CHECK_FALSE(make_plan(bert_large(), o).linear_gemm_sm90);
  }
  for (const char* bad : {"cuBLAS", "sm_90", "sm90_fwd"})
    check_env_error("DSKC_LINEAR_GEMM", bad, "sm90", "cublas", [] { linear_gemm_from_env(); });
}

TEST_CASE("default fused backward: attn_flash_bwd_dkdv stores dSᵀ for the dQ GEMM; DSKC_ATTN_DQ=kernel keeps "
          "attn_flash_bwd_dq") {
  auto plan_with = [](const LayerConfig& c, AttnDq dq) {
    return make_plan(c, {AttentionPath::FusedWhereSupported, AttnMask::Inline, dq});
  };
  auto scores_ws = [](const LayerPlan& p) -> const TensorInfo* {
    for (const auto& w : p.workspace)
      if (w.name == "grad_scores") return &w;
    return nullptr;
  };
  for (unsigned f : {kNoFlag, kAttnCkpt, kAllFlags})
    for (bool pre_ln : {true, false}) {
      CAPTURE(f);
      CAPTURE(pre_ln);
      LayerConfig c = with_flags(bert_large(), f);
      c.pre_layer_norm = pre_ln;
      const LayerPlan g = plan_with(c, AttnDq::Gemm), k = plan_with(c, AttnDq::Kernel);
      CHECK(g.attn_dq_gemm);
      CHECK_FALSE(k.attn_dq_gemm);
      // Gemm: one kernel fewer (attn_flash_bwd_dq), otherwise the same list in the same order.
      std::vector<std::string> want = kernel_names(k);
      want.erase(std::find(want.begin(), want.end(), "attn_flash_bwd_dq"));
      CHECK(kernel_names(g) == want);
      CHECK(g.find_kernel("attn_flash_bwd_dkdv")->instantiation == "attn_flash_bwd_dkdv_impl<T, kAttnDropoutOn, kDqGemm>");
      CHECK(k.find_kernel("attn_flash_bwd_dkdv")->instantiation == "attn_flash_bwd_dkdv_impl<T, kAttnDropoutOn>");
      // Only the variant with the dSᵀ stores carries a register cap (3 blocks per SM on sm_90).
      CHECK(g.find_kernel("attn_flash_bwd_dkdv")->min_blocks == "FlashBwdTile::kMinBlocksDqGemm");
      CHECK(k.find_kernel("attn_flash_bwd_dkdv")->min_blocks.empty());
      CHECK(g.find_kernel("attn_flash_bwd_dkdv")->fuses.find("dSᵀ into grad_scores") != std::string::npos);
      // dSᵀ is workspace (shared by the layers), [B, heads, S, padded S] of the dtype: no activation memory.
      CHECK(g.activation_bytes() == k.activation_bytes());
      const TensorInfo* w = scores_ws(g);
      REQUIRE(w);
      CHECK(scores_ws(k) == nullptr);
      CHECK(w->elem_bytes == 2);
      CHECK(w->bytes(3, 51) == int64_t{3} * 16 * 51 * 56 * 2);
      CHECK(g.workspace_bytes(64, 128) == k.workspace_bytes(64, 128) + int64_t{64} * 16 * 128 * 128 * 2);
      if (const KernelInfo* rb = g.find_kernel("attn_dropout_bits_bwd"))
        CHECK(rb->fuses.find("for attn_flash_bwd_dkdv (") != std::string::npos);
      CHECK(emit(g).source != emit(k).source);  // two modules, two cache entries
    }
  // stochastic_mode takes the same choice (its default is the dQ GEMM too): the same kernels and
  // workspace; its module differs only by the flag itself.
  {
    LayerConfig sto = bert_large();
    sto.stochastic_mode = true;
    for (AttnDq dq : {AttnDq::Gemm, AttnDq::Kernel}) {
      const LayerPlan s = plan_with(sto, dq), d = plan_with(bert_large(), dq);
      CHECK(s.attn_dq_gemm == (dq == AttnDq::Gemm));
      CHECK_FALSE(s.attn_dq_atomic);
      CHECK(kernel_names(s) == kernel_names(d));
      CHECK(s.workspace_bytes(64, 128) == d.workspace_bytes(64, 128));
    }
    CHECK(fused_plan(sto).attn_dq_gemm);
  }
  // DSKC_ATTN_DQ=atomic is stochastic_mode's alone: the default mode stays bitwise reproducible.
  {
    const std::string e = error_of([] { atomic_dq_plan(bert_large()); }, ErrorKind::Config);
    CHECK(e.find("DSKC_ATTN_DQ=atomic needs stochastic_mode") != std::string::npos);
  }
  // Where the fused backward does not run, the option changes nothing.
  LayerConfig inference = bert_large();
  inference.training = false;
  for (const LayerConfig& c : {inference, with_dtype(bert_large(), DType::F32)}) {
    const LayerPlan g = plan_with(c, AttnDq::Gemm), k = plan_with(c, AttnDq::Kernel), a = plan_with(c, AttnDq::Atomic);
    CHECK_FALSE(g.attn_dq_gemm);
    CHECK_FALSE(a.attn_dq_atomic);
    CHECK(kernel_names(g) == kernel_names(k));
    CHECK(kernel_names(g) == kernel_names(a));
    CHECK(emit(g).source == emit(k).source);
  }
  CHECK_FALSE(make_plan(bert_large(), {AttentionPath::Unfused, AttnMask::Inline, AttnDq::Gemm}).attn_dq_gemm);
  // DSKC_ATTN_DQ, read when the options leave the choice to it; a bad value is a config error.
  auto from_env = [](const char* v) {
    dskc_test::ScopedEnv env("DSKC_ATTN_DQ", v);
    return make_plan(bert_large(), {AttentionPath::FusedWhereSupported}).attn_dq_gemm;
  };
  CHECK(from_env(nullptr));
  CHECK(from_env(""));
  CHECK(from_env("gemm"));
  CHECK_FALSE(from_env("kernel"));
  {
    dskc_test::ScopedEnv env("DSKC_ATTN_DQ", "atomic");
    LayerConfig sto = bert_large();
    sto.stochastic_mode = true;
    CHECK(make_plan(sto, {AttentionPath::FusedWhereSupported}).attn_dq_atomic);
    error_of([] { make_plan(bert_large(), {AttentionPath::FusedWhereSupported}); }, ErrorKind::Config);
  }
  {
    dskc_test::ScopedEnv env("DSKC_ATTN_DQ", "kernel");
    CHECK(plan_with(bert_large(), AttnDq::Gemm).attn_dq_gemm);
  }
  for (const char* bad : {"GEMM", "atomics", "gemm "})
    check_env_error("DSKC_ATTN_DQ", bad, "gemm", "atomic", [] { attn_dq_from_env(); });
}

TEST_CASE("DSKC_BIAS_GRAD: gemv (default), epilogue, partials; anything else is a config error") {
  CHECK(bias_grad_from_env() == BiasGrad::Gemv);
  for (auto [word, want] : {std::pair{"gemv", BiasGrad::Gemv}, std::pair{"epilogue", BiasGrad::Epilogue},
                            std::pair{"partials", BiasGrad::Partials}, std::pair{"", BiasGrad::Gemv}}) {
    dskc_test::ScopedEnv env("DSKC_BIAS_GRAD", word);
    CHECK(bias_grad_from_env() == want);
    const LayerPlan p = make_plan(bert_large());
    CHECK(p.bias_grad_in_gemm == (want != BiasGrad::Partials));
    CHECK(p.bias_grad_gemv == (want == BiasGrad::Gemv));
  }
  for (const char* bad : {"GEMV", "bgradb", "gemv "})
    check_env_error("DSKC_BIAS_GRAD", bad, "gemv", "partials", [] { bias_grad_from_env(); });
}

TEST_CASE("Pre-LN gelu_checkpoint + normalize_invertible: the attention block's gradient in the free attn_residual "
          "workspace (DSKC_GELU_CKPT_SCRATCH)") {
  CHECK(gelu_ckpt_own_scratch_from_env());
  for (unsigned f : {0u, 4u, 6u, 7u, 2u})  // none, gelu, gelu + invertible, all, invertible
    for (bool pre : {true, false})
      for (DType t : {DType::F16, DType::F32}) {
        CAPTURE(f);
        CAPTURE(pre);
        CAPTURE(dtype_name(t));
        LayerConfig c = with_dtype(with_flags(bert_large(), f), t);
        c.pre_layer_norm = pre;
        const LayerPlan own = make_plan(c);
        CHECK(own.attn_grad_own_scratch == (pre && (f & kGeluCkpt) && (f & kInvertible)));
        // The scratch it takes is a workspace tensor backward does not read: no tensor is added.
        if (own.attn_grad_own_scratch) {
          CHECK(!own.find_saved("attn_residual"));
          CHECK(std::any_of(own.workspace.begin(), own.workspace.end(),
                            [](const TensorInfo& w) { return w.name == "attn_residual"; }));
        }
        dskc_test::ScopedEnv env("DSKC_GELU_CKPT_SCRATCH", "shared");
        const LayerPlan shared = make_plan(c);
        CHECK(!shared.attn_grad_own_scratch);
        CHECK(own.activation_bytes() == shared.activation_bytes());
        CHECK(own.workspace_bytes(64, 128) == shared.workspace_bytes(64, 128));
      }
  {  // inference keeps no gradient scratch
    LayerConfig c = with_flags(bert_large(), kAllFlags);
    c.training = false;
    CHECK(!make_plan(c).attn_grad_own_scratch);
  }
  for (const char* bad : {"OWN", "separate", "own "})
    check_env_error("DSKC_GELU_CKPT_SCRATCH", bad, "own", "shared", [] { gelu_ckpt_own_scratch_from_env(); });
}

// The layers the Hopper attention kernels apply to: fp16/bf16 BERT-Large with no flag,
// attn_dropout_checkpoint and all three flags, Pre- and Post-LN; fn(config) runs under CAPTUREs of each.
template <typename Fn>
void for_each_fused_bert_large(Fn&& fn) {
  for (DType t : {DType::F16, DType::BF16})
    for (unsigned f : {kNoFlag, kAttnCkpt, kAllFlags})
      for (bool pre_ln : {true, false}) {
        CAPTURE(dtype_name(t));
        CAPTURE(f);
        CAPTURE(pre_ln);
        LayerConfig c = with_dtype(with_flags(bert_large(), f), t);
        c.pre_layer_norm = pre_ln;
        fn(c);
      }
}

// Two plans that differ only in one kernel's code: the same kernels in the same order, the same memory.
void check_same_schedule(const LayerPlan& a, const LayerPlan& b) {
  CHECK(kernel_names(a) == kernel_names(b));
  CHECK(a.activation_bytes() == b.activation_bytes());
  CHECK(a.workspace_bytes(64, 128) == b.workspace_bytes(64, 128));
}

// A fused-attention plan for `arch` with the given dK/dV kernel and dQ source.
LayerPlan attn_bwd_plan(const LayerConfig& c, const std::string& arch, AttnBwd bwd, AttnDq dq = AttnDq::Gemm) {
  PlanOptions o = fused_options(arch);
  o.attn_dq = dq;
  o.attn_bwd = bwd;
  return make_plan(c, o);
}

TEST_CASE("sm_90 at head dim 64: attn_flash_bwd_dkdv on warpgroup MMA (DSKC_ATTN_BWD=wgmma, the default; wgmma2; "
          "sync)") {
  for_each_fused_bert_large([&](const LayerConfig& c) {
    const LayerPlan w1 = attn_bwd_plan(c, "sm_90", AttnBwd::Wgmma), w2 = attn_bwd_plan(c, "sm_90", AttnBwd::Wgmma2),
                    s = attn_bwd_plan(c, "sm_90", AttnBwd::Sync);
    CHECK(w1.attn_bwd_wgmma);
    CHECK(w1.attn_bwd_wgs == 1);
    CHECK(w2.attn_bwd_wgmma);
    CHECK(w2.attn_bwd_wgs == 2);
    CHECK_FALSE(s.attn_bwd_wgmma);
    // Only attn_flash_bwd_dkdv's code differs, and the dQ GEMM: attn_dq_wgmma after the wgmma kernel
    // (the mma.sync kernel's stays cuBLAS's).
    CHECK_FALSE(s.attn_dq_wgmma);
    CHECK(without_dq_wgmma(w1) == kernel_names(s));
    CHECK(w1.activation_bytes() == s.activation_bytes());
    CHECK(w1.workspace_bytes(64, 128) == s.workspace_bytes(64, 128));
    const KernelInfo* k1 = w1.find_kernel("attn_flash_bwd_dkdv");
    const KernelInfo* k2 = w2.find_kernel("attn_flash_bwd_dkdv");
    const KernelInfo* ks = s.find_kernel("attn_flash_bwd_dkdv");
    REQUIRE(k1);
    REQUIRE(k2);
    REQUIRE(ks);
    CHECK(ks->op == "attn_flash_bwd");
    CHECK(ks->instantiation == "attn_flash_bwd_dkdv_impl<T, kAttnDropoutOn, kDqGemm>");
    for (const KernelInfo* k : {k1, k2}) {
      const int wgs = k == k1 ? 1 : 2;
      CHECK(k->op == "attn_flash_bwd_wgmma");
      CHECK(k->params_type == "AttnFlashBwdWgParams");
      CHECK(k->instantiation == fmt::format("attn_flash_bwd_wgmma_impl<T, kAttnDropoutOn, {}>", wgs));
      CHECK(k->block == 128 * wgs);
      CHECK(k->rows_per_block == 64 * wgs);
      CHECK(k->grid == GridKind::FlashTiles);
      CHECK(k->grid_constant);
      CHECK(k->min_blocks == fmt::format("FlashWgBwdTile<{}>::kMinBlocks", wgs));
      CHECK(k->dynamic_smem == flash_wg_bwd_smem_bytes(wgs));
      CHECK(k->fuses.find("dSᵀ into grad_scores by TMA for the dQ GEMM") != std::string::npos);
    }
  });
  // Shared memory: K/V, three Q/dO stages, two dSᵀ regions per warpgroup (8 KB tiles), per stage the
  // queries' L, D and keep words, and the small rest; two one-warpgroup blocks fit on an SM (228 KB), one of two.
  CHECK(flash_wg_bwd_smem_bytes(1) == 1024 + 2 * 8192 + 6 * 8192 + 2 * 8192 + 3 * 1024 + 256 + 16 + 32);
  CHECK(flash_wg_bwd_smem_bytes(2) == 1024 + 4 * 8192 + 6 * 8192 + 4 * 8192 + 3 * 1536 + 512 + 16 + 32);
  CHECK(2 * flash_wg_bwd_smem_bytes(1) <= 228 * 1024);
  // The default (DSKC_ATTN_BWD unset) on sm_90 is the one-warpgroup kernel; the source differs.
  {
    const dskc_test::ScopedEnv env("DSKC_ATTN_BWD", nullptr);
    const LayerPlan d = attn_bwd_plan(bert_large(), "sm_90", AttnBwd::FromEnvironment);
    CHECK(d.attn_bwd_wgmma);
    CHECK(d.attn_bwd_wgs == 1);
    CHECK(emit(d).source != emit(attn_bwd_plan(bert_large(), "sm_90", AttnBwd::Sync)).source);
  }
  // Where it does not apply, the option changes nothing: other archs, head dims other than 64, dQ by
  // its own kernel or stochastic_mode's atomics, inference, fp32 (unfused attention).
  LayerConfig d32 = bert_large(), d128 = bert_large(), sto = bert_large(), inference = bert_large();
  d32.heads = 32;
  d128.heads = 8;
  sto.stochastic_mode = true;
  inference.training = false;
  const std::pair<LayerConfig, AttnDq> off[] = {{d32, AttnDq::Gemm},  {d128, AttnDq::Gemm},
                                                {bert_large(), AttnDq::Kernel}, {sto, AttnDq::Atomic},
                                                {inference, AttnDq::Gemm}, {with_dtype(bert_large(), DType::F32), AttnDq::Gemm}};
  for (const auto& [c, dq] : off) {
    CAPTURE(c.head_dim());
    CAPTURE(static_cast<int>(dq));
    const LayerPlan w = attn_bwd_plan(c, "sm_90", AttnBwd::Wgmma, dq), s = attn_bwd_plan(c, "sm_90", AttnBwd::Sync, dq);
    CHECK_FALSE(w.attn_bwd_wgmma);
    CHECK(emit(w).source == emit(s).source);
  }
  for (const char* arch : {"sm_80", "sm_86", "sm_89"}) {
    CAPTURE(arch);
    const LayerPlan w = attn_bwd_plan(bert_large(), arch, AttnBwd::Wgmma2);
    CHECK_FALSE(w.attn_bwd_wgmma);
    CHECK(w.find_kernel("attn_flash_bwd_dkdv")->op == "attn_flash_bwd");
  }
  // DSKC_ATTN_BWD, read when the options leave the choice to it; a bad value is a config error.
  auto from_env = [&](const char* v) {
    const dskc_test::ScopedEnv env("DSKC_ATTN_BWD", v);
    const LayerPlan p = attn_bwd_plan(bert_large(), "sm_90", AttnBwd::FromEnvironment);
    return p.attn_bwd_wgmma ? p.attn_bwd_wgs : 0;
  };
  CHECK(from_env("") == 1);
  CHECK(from_env("wgmma") == 1);
  CHECK(from_env("wgmma2") == 2);
  CHECK(from_env("sync") == 0);
  for (const char* bad : {"WGMMA", "mma", "wgmma "})
    check_env_error("DSKC_ATTN_BWD", bad, "wgmma", "sync", [] { attn_bwd_from_env(); });
}

// A layer where a fused dQ form does not apply (its max_seq_length, arch, DSKC_ATTN_BWD choice or head
// dim): the plan with that DSKC_ATTN_DQ value is the dQ GEMM's, source and all.
struct DqOff {
  LayerConfig c;
  int max_seq;
  const char* arch;
  AttnBwd bwd;
};
LayerConfig bert_large_d128() {
  LayerConfig c = bert_large();
  c.heads = 8;  // head dim 128
  return c;
}
void check_dq_gemm_fallback(const DqOff& o, AttnDq dq) {
  CAPTURE(o.max_seq);
  CAPTURE(o.arch);
  LayerConfig c = o.c;
  c.max_seq_length = o.max_seq;
  const LayerPlan f = attn_bwd_plan(c, o.arch, o.bwd, dq), g = attn_bwd_plan(c, o.arch, o.bwd, AttnDq::Gemm);
  CHECK_FALSE(f.attn_dq_fused);
  CHECK_FALSE(f.attn_dq_ring);
  CHECK(f.attn_dq_gemm);
  CHECK(emit(f).source == emit(g).source);
}

TEST_CASE("DSKC_ATTN_DQ=fused: dQ inside the wgmma dK/dV kernel where its block covers every key (S <= 128), "
          "else the dQ GEMM") {
  auto plan_for = [](LayerConfig c, int max_seq, AttnDq dq, const std::string& arch = "sm_90",
                     AttnBwd bwd = AttnBwd::Wgmma) {
    c.max_seq_length = max_seq;
    return attn_bwd_plan(c, arch, bwd, dq);
  };
  // The per-head form (a cluster per head); the persistent one, the default where it applies, has its
  // own test case (DSKC_ATTN_BWD_PERSIST).
  const dskc_test::ScopedEnv persist_env("DSKC_ATTN_BWD_PERSIST", "off");
  for_each_fused_bert_large([&](const LayerConfig& c) {
    for (int max_seq : {128, 100, 65, 64, 1})
      for (AttnBwd bwd : {AttnBwd::Wgmma, AttnBwd::Wgmma2}) {
        CAPTURE(max_seq);
        CAPTURE(bwd == AttnBwd::Wgmma2);
        const LayerPlan f = plan_for(c, max_seq, AttnDq::Fused, "sm_90", bwd),
                        g = plan_for(c, max_seq, AttnDq::Gemm, "sm_90", bwd);
        // Two 64-key halves above 64: a cluster of two one-warpgroup blocks (wgmma) or one block of
        // two warpgroups (wgmma2); one warpgroup holds every key up to 64.
        const bool halves = max_seq > 64;
        const int wgs = halves && bwd == AttnBwd::Wgmma2 ? 2 : 1, cluster = halves && wgs == 1 ? 2 : 1;
        CHECK(f.attn_dq_fused);
        CHECK_FALSE(f.attn_dq_gemm);
        CHECK(f.attn_bwd_wgmma);
        CHECK(f.attn_bwd_wgs == wgs);
        CHECK(f.attn_bwd_cluster == cluster);
        CHECK(g.attn_dq_gemm);
        CHECK_FALSE(g.attn_dq_fused);
        CHECK(g.attn_bwd_cluster == 1);
        // The same kernels but attn_flash_bwd_dot where one warpgroup per block also computes D
        // (attn_dot_in_dkdv); no dSᵀ workspace (one [B, heads, S, padded S] tensor less).
        const bool dot_in = wgs == 1;
        CHECK(f.attn_dot_in_dkdv == dot_in);
        CHECK_FALSE(g.attn_dot_in_dkdv);
        std::vector<std::string> names = without_dq_wgmma(g);
        REQUIRE(std::count(names.begin(), names.end(), "attn_flash_bwd_dot") == 1);
        if (dot_in) names.erase(std::find(names.begin(), names.end(), "attn_flash_bwd_dot"));
        CHECK(kernel_names(f) == names);
        CHECK(f.activation_bytes() == g.activation_bytes());
        const int64_t scores =
            int64_t{c.batch_size} * c.heads * max_seq * padded_seq(max_seq) * dtype_bytes(c.dtype());
        CHECK(g.workspace_bytes(c.batch_size, max_seq) - f.workspace_bytes(c.batch_size, max_seq) >= scores);
        CHECK(std::none_of(f.workspace.begin(), f.workspace.end(), [](const auto& w) { return w.name == "grad_scores"; }));
        const KernelInfo* k = f.find_kernel("attn_flash_bwd_dkdv");
        REQUIRE(k);
        const std::string args = fmt::format("{}, true{}", wgs, cluster == 2 ? ", 2" : "");
        CHECK(k->op == "attn_flash_bwd_wgmma");
        CHECK(k->instantiation == "attn_flash_bwd_wgmma_impl<T, kAttnDropoutOn, " + args + ">");
        CHECK(k->min_blocks == "FlashWgBwdTile<" + args + ">::kMinBlocks");
        CHECK(k->block == 128 * wgs);
        CHECK(k->rows_per_block == 64 * wgs);
        CHECK(k->cluster == cluster);
        CHECK(k->dynamic_smem == flash_wg_bwd_smem_bytes(wgs, true, cluster));
        CHECK(k->fuses.find("dQ = dS·K/√d") != std::string::npos);
        CHECK((k->fuses.find("D = rowsum(dO ⊙ O)") != std::string::npos) == dot_in);
        if (dot_in && c.attn_dropout_checkpoint && c.attn_dropout_ratio > 0) {
          // attn_dropout_checkpoint's bits rewritten in attn_flash_bwd_dot's launch: it stays (its D unread).
          const dskc_test::ScopedEnv bits_env("DSKC_ATTN_BITS_BWD", "dot");
          const LayerPlan d = plan_for(c, max_seq, AttnDq::Fused, "sm_90", bwd);
          CHECK(d.attn_dot_in_dkdv);
          CHECK(d.attn_bits_bwd_in_dot);
          CHECK(d.find_kernel("attn_flash_bwd_dot"));
        }
        const std::string src = emit(f).source;
        CHECK((src.find("DSKC_CLUSTER_DIMS(2) attn_flash_bwd_dkdv(") != std::string::npos) == (cluster == 2));
      }
  });
  // Two halves add a 64 x 64 fp32 dQ share per warpgroup of a block of two, or one per clustered
  // block; one warpgroup holding every key needs none. Two clustered blocks still fit on an SM.
  const int share = 64 * 64 * 4;
  CHECK(flash_wg_bwd_smem_bytes(2, true) == flash_wg_bwd_smem_bytes(2) + 2 * share);
  CHECK(flash_wg_bwd_smem_bytes(1, true, 2) == flash_wg_bwd_smem_bytes(1) + share);
  CHECK(flash_wg_bwd_smem_bytes(1, true) == flash_wg_bwd_smem_bytes(1));
  CHECK(flash_wg_bwd_smem_bytes(2, true) <= 227 * 1024);
  CHECK(2 * (flash_wg_bwd_smem_bytes(1, true, 2) + 1024) <= 228 * 1024);
  // Elsewhere, the dQ GEMM as with DSKC_ATTN_DQ=gemm: longer sequences, the mma.sync kernel, other
  // archs and head dims.
  for (const DqOff& o : {DqOff{bert_large(), 129, "sm_90", AttnBwd::Wgmma}, DqOff{bert_large(), 512, "sm_90", AttnBwd::Wgmma},
                         DqOff{bert_large(), 128, "sm_90", AttnBwd::Sync}, DqOff{bert_large(), 128, "sm_80", AttnBwd::Wgmma},
                         DqOff{bert_large_d128(), 128, "sm_90", AttnBwd::Wgmma}})
    check_dq_gemm_fallback(o, AttnDq::Fused);
  {
    const dskc_test::ScopedEnv env("DSKC_ATTN_DQ", "fused");
    CHECK(attn_dq_from_env() == AttnDq::Fused);
  }
}

TEST_CASE("DSKC_ATTN_DQ=ring: from 129 to 512 keys the wgmma dK/dV kernel's cluster blocks sum dQ around a ring") {
  auto plan_for = [](LayerConfig c, int max_seq, AttnDq dq, const std::string& arch = "sm_90",
                     AttnBwd bwd = AttnBwd::Wgmma) {
    c.max_seq_length = max_seq;
    return attn_bwd_plan(c, arch, bwd, dq);
  };
  for_each_fused_bert_large([&](const LayerConfig& c) {
    for (int max_seq : {512, 509, 384, 300, 256, 193, 129}) {
      CAPTURE(max_seq);
      const LayerPlan r = plan_for(c, max_seq, AttnDq::Ring), g = plan_for(c, max_seq, AttnDq::Gemm);
      const int blocks = (max_seq + 63) / 64;
      CHECK(r.attn_dq_fused);
      CHECK(r.attn_dq_ring);
      CHECK_FALSE(r.attn_dq_gemm);
      CHECK(r.attn_bwd_wgmma);
      CHECK(r.attn_bwd_wgs == 1);
      CHECK(r.attn_bwd_cluster == blocks);
      // D from attn_flash_bwd_dot as with the GEMM: the same kernels but the dQ GEMM's attn_dq_wgmma, the
      // same saved tensors, and no dSᵀ workspace.
      CHECK_FALSE(r.attn_dot_in_dkdv);
      CHECK_FALSE(g.attn_dq_ring);
      CHECK_FALSE(r.attn_dq_wgmma);
      CHECK(kernel_names(r) == without_dq_wgmma(g));
      CHECK(r.activation_bytes() == g.activation_bytes());
      const int64_t scores = int64_t{c.batch_size} * c.heads * max_seq * padded_seq(max_seq) * dtype_bytes(c.dtype());
      CHECK(g.workspace_bytes(c.batch_size, max_seq) - r.workspace_bytes(c.batch_size, max_seq) == scores);
      CHECK(std::none_of(r.workspace.begin(), r.workspace.end(), [](const auto& w) { return w.name == "grad_scores"; }));
      const KernelInfo* k = r.find_kernel("attn_flash_bwd_dkdv");
      REQUIRE(k);
      const std::string args = fmt::format("1, false, {}", blocks);
      CHECK(k->instantiation == "attn_flash_bwd_wgmma_impl<T, kAttnDropoutOn, " + args + ">");
      CHECK(k->min_blocks == "FlashWgBwdTile<" + args + ">::kMinBlocks");
      CHECK(k->smem_check == "FlashWgBwdTile<" + args + ">::smem_bytes");
      CHECK(k->block == 128);
      CHECK(k->rows_per_block == 64);
      CHECK(k->cluster == blocks);
      CHECK(k->dynamic_smem == flash_wg_bwd_smem_bytes(1, true, blocks));
      CHECK(k->fuses.find("around a ring") != std::string::npos);
      CHECK(emit(r).source.find(fmt::format("DSKC_CLUSTER_DIMS({}) attn_flash_bwd_dkdv(", blocks)) != std::string::npos);
    }
    // Up to 128 keys the ring is the fused dQ of one block or two.
    for (int max_seq : {128, 100, 64, 1}) {
      CAPTURE(max_seq);
      const LayerPlan r = plan_for(c, max_seq, AttnDq::Ring), f = plan_for(c, max_seq, AttnDq::Fused);
      CHECK(r.attn_dq_fused);
      CHECK_FALSE(r.attn_dq_ring);
      CHECK(emit(r).source == emit(f).source);
    }
  });
  // Rings keep two blocks per SM: one dS region (no dSᵀ stores) and two 16 KB partial-sum slots.
  const int share = 64 * 64 * 4, tile = 64 * 128;
  CHECK(flash_wg_bwd_smem_bytes(1, true, 8) == flash_wg_bwd_smem_bytes(1) - tile + 2 * share + 4 * 8);
  CHECK(flash_wg_bwd_smem_bytes(1, true, 3) == flash_wg_bwd_smem_bytes(1, true, 8));
  CHECK(2 * (flash_wg_bwd_smem_bytes(1, true, 8) + 1024) <= 228 * 1024);
  // Elsewhere the dQ GEMM: two warpgroups per block, the mma.sync kernel, other archs and head dims.
  for (const DqOff& o : {DqOff{bert_large(), 200, "sm_90", AttnBwd::Wgmma2}, DqOff{bert_large(), 512, "sm_90", AttnBwd::Sync},
                         DqOff{bert_large(), 512, "sm_80", AttnBwd::Wgmma}, DqOff{bert_large_d128(), 512, "sm_90", AttnBwd::Wgmma}})
    check_dq_gemm_fallback(o, AttnDq::Ring);
  // Deterministic (a fixed order of additions), so stochastic_mode may use it too.
  {
    LayerConfig s = bert_large();
    s.stochastic_mode = true;
    CHECK(plan_for(s, 512, AttnDq::Ring).attn_dq_ring);
  }
  {
    const dskc_test::ScopedEnv env("DSKC_ATTN_DQ", "ring");
    CHECK(attn_dq_from_env() == AttnDq::Ring);
  }
  for (const char* bad : {"RING", "rings"})
    check_env_error("DSKC_ATTN_DQ", bad, "ring", "fused", [] { attn_dq_from_env(); });
}

TEST_CASE("stochastic_mode on Hopper: dQ shares added by TMA reductions when asked for (DSKC_ATTN_DQ=reduce)") {
  auto plan_for = [](LayerConfig c, int max_seq, bool stochastic, AttnDq dq, const std::string& arch = "sm_90",
                     AttnBwd bwd = AttnBwd::Wgmma) {
    c.max_seq_length = max_seq;
    c.stochastic_mode = stochastic;
    return attn_bwd_plan(c, arch, bwd, dq);
  };
  for_each_fused_bert_large([&](const LayerConfig& c) {
    for (int max_seq : {512, 381, 129, 128, 64}) {
      CAPTURE(max_seq);
      // Asked for (DSKC_ATTN_DQ=reduce): at every length. stochastic_mode's default stays the default
      // mode's choice (the fused dQ up to 128 keys, else the dQ GEMM; measured faster, bench/NOTES.md v41).
      const LayerPlan r = plan_for(c, max_seq, true, AttnDq::Reduce), s = plan_for(c, max_seq, true, AttnDq::Fused),
                      d = plan_for(c, max_seq, false, AttnDq::Fused), g = plan_for(c, max_seq, false, AttnDq::Gemm);
      CHECK(r.attn_dq_reduce);
      CHECK_FALSE(r.attn_dq_gemm);
      CHECK_FALSE(r.attn_dq_fused);
      CHECK_FALSE(r.attn_dq_atomic);
      CHECK(r.attn_bwd_wgmma);
      CHECK(r.attn_bwd_wgs == 1);
      CHECK(r.attn_bwd_cluster == 1);
      CHECK_FALSE(r.attn_dot_in_dkdv);
      CHECK_FALSE(s.attn_dq_reduce);
      CHECK(s.attn_dq_fused == (max_seq <= 128));
      CHECK(s.attn_dq_gemm == (max_seq > 128));
      CHECK(kernel_names(s) == kernel_names(d));
      CHECK_FALSE(d.attn_dq_reduce);
      CHECK_FALSE(g.attn_dq_reduce);
      // The GEMM plan's kernels (less its attn_dq_wgmma), with attn_dq_convert right after the dK/dV
      // kernel; no dSᵀ workspace but the fp32 accumulator [B, S, H].
      CHECK_FALSE(r.attn_dq_wgmma);
      std::vector<std::string> names = without_dq_wgmma(g);
      const auto dkdv = std::find(names.begin(), names.end(), "attn_flash_bwd_dkdv");
      REQUIRE(dkdv != names.end());
      names.insert(dkdv + 1, "attn_dq_convert");
      CHECK(kernel_names(r) == names);
      CHECK(r.activation_bytes() == g.activation_bytes());
      CHECK(std::none_of(r.workspace.begin(), r.workspace.end(), [](const auto& w) { return w.name == "grad_scores"; }));
      const auto acc = std::find_if(r.workspace.begin(), r.workspace.end(), [](const auto& w) { return w.name == "attn_dq_acc"; });
      REQUIRE(acc != r.workspace.end());
      CHECK(acc->bytes(3, 51) == int64_t{3} * 51 * c.hidden_size * 4);
      CHECK(std::none_of(r.workspace.begin(), r.workspace.end(), [](const auto& w) { return w.name == "attn_dq_tickets"; }));
      const KernelInfo* k = r.find_kernel("attn_flash_bwd_dkdv");
      REQUIRE(k);
      CHECK(k->instantiation == "attn_flash_bwd_wgmma_impl<T, kAttnDropoutOn, 1, false, 1, true>");
      CHECK(k->min_blocks == "FlashWgBwdTile<1, false, 1, true>::kMinBlocks");
      CHECK(k->dynamic_smem == flash_wg_bwd_smem_bytes(1, false, 1, true));
      CHECK(k->fuses.find("by TMA reductions") != std::string::npos);
      const KernelInfo* dot = r.find_kernel("attn_flash_bwd_dot");
      REQUIRE(dot);
      CHECK(dot->instantiation.find("kDqReduce>") != std::string::npos);
      const KernelInfo* cv = r.find_kernel("attn_dq_convert");
      REQUIRE(cv);
      CHECK(cv->grid == GridKind::Elementwise);
      CHECK(cv->cols == c.hidden_size);
      CHECK(cv->pass == Pass::Backward);
      if (c.attn_dropout_checkpoint && c.attn_dropout_ratio > 0) {
        // attn_dropout_checkpoint's bits rewritten in attn_flash_bwd_dot's launch: that launch zeroes the
        // accumulator too.
        const dskc_test::ScopedEnv bits_env("DSKC_ATTN_BITS_BWD", "dot");
        const LayerPlan b = plan_for(c, max_seq, true, AttnDq::Reduce);
        CHECK(b.attn_bits_bwd_in_dot);
        CHECK(b.find_kernel("attn_flash_bwd_dot")->instantiation == "attn_flash_bwd_dot_bits_impl<T, kDqReduce>");
      }
    }
  });
  // The staging share (64 x 64 fp32) on top of the GEMM form's shared memory: two blocks per SM still fit.
  CHECK(flash_wg_bwd_smem_bytes(1, false, 1, true) == flash_wg_bwd_smem_bytes(1) + 64 * 64 * 4);
  CHECK(2 * (flash_wg_bwd_smem_bytes(1, false, 1, true) + 1024) <= 228 * 1024);
  // Where the one-warpgroup wgmma kernel does not run (the mma.sync kernel, two warpgroups, sm_80, head
  // dim 128), reduce falls back to the dQ GEMM; the default mode rejects it (not bitwise reproducible).
  LayerConfig d128 = bert_large();
  d128.heads = 8;
  for (const auto& [c, arch, bwd] : {std::tuple{bert_large(), "sm_90", AttnBwd::Sync},
                                     std::tuple{bert_large(), "sm_90", AttnBwd::Wgmma2},
                                     std::tuple{bert_large(), "sm_80", AttnBwd::Wgmma},
                                     std::tuple{d128, "sm_90", AttnBwd::Wgmma}}) {
    CAPTURE(arch);
    const LayerPlan r = plan_for(c, 512, true, AttnDq::Reduce, arch, bwd);
    CHECK_FALSE(r.attn_dq_reduce);
    CHECK(r.attn_dq_gemm);
    CHECK_FALSE(r.find_kernel("attn_dq_convert"));
  }
  const std::string e = error_of([&] { plan_for(bert_large(), 512, false, AttnDq::Reduce); }, ErrorKind::Config);
  CHECK(e.find("DSKC_ATTN_DQ=reduce needs stochastic_mode") != std::string::npos);
  {
    const dskc_test::ScopedEnv env("DSKC_ATTN_DQ", "reduce");
    CHECK(attn_dq_from_env() == AttnDq::Reduce);
  }
  // The module builds for sm_90 (the TMA reductions, 64 x 64 fp32 staged in shared memory, no spill).
  LayerConfig c = bert_large();
  c.max_seq_length = 512;
  c.stochastic_mode = true;
  const LayerPlan r = attn_bwd_plan(c, "sm_90", AttnBwd::Wgmma, AttnDq::Reduce);
  REQUIRE(r.attn_dq_reduce);
  const BuildResult b = build_module(r, {"sm_90", EmitKind::Ptx, {}}, /*use_cache=*/false);
  const std::string ptx(b.module.image.begin(), b.module.image.end());
  CHECK(ptx.find("cp.reduce.async.bulk.tensor.3d.global.shared::cta.add.tile.bulk_group") != std::string::npos);
  const BuildResult cb = build_module(r, {"sm_90", EmitKind::Cubin, {}}, /*use_cache=*/false);
  for (const auto& k : cb.module.resources)
    if (k.name == "attn_flash_bwd_dkdv") {
      CHECK(k.spill_bytes == 0);
      CHECK(k.registers <= 255);
    }
}

TEST_CASE("DSKC_ATTN_DQ_GEMM: above 128 keys the wgmma backward's dQ GEMM is attn_dq_wgmma (default) or cuBLAS's "
          "batched GEMM") {
  auto plan_for = [](const LayerConfig& c, int max_seq, AttnDqGemm g, const std::string& arch = "sm_90",
                     AttnBwd bwd = AttnBwd::Wgmma) {
    LayerConfig l = c;
    l.max_seq_length = max_seq;
    PlanOptions o = fused_options(arch);
    o.attn_bwd = bwd;
    o.attn_dq_gemm = g;
    return make_plan(l, o);
  };
  for_each_fused_bert_large([&](const LayerConfig& c) {
    for (int max_seq : {512, 381, 129, 128, 64}) {
      CAPTURE(max_seq);
      const LayerPlan w = plan_for(c, max_seq, AttnDqGemm::Wgmma), b = plan_for(c, max_seq, AttnDqGemm::Cublas);
      CHECK_FALSE(b.attn_dq_wgmma);
      // Up to 128 keys the wgmma dK/dV kernel computes dQ itself (no dQ GEMM to replace).
      CHECK(w.attn_dq_wgmma == (max_seq > 128));
      CHECK(w.attn_dq_gemm == (max_seq > 128));
      CHECK(w.attn_dq_gemm == b.attn_dq_gemm);
      // The same schedule with the kernel right after the dK/dV kernel (cuBLAS's GEMM is not a plan
      // kernel), the same saved tensors and workspace (dSᵀ in grad_scores either way).
      std::vector<std::string> names = kernel_names(b);
      if (max_seq > 128) {
        const auto dkdv = std::find(names.begin(), names.end(), "attn_flash_bwd_dkdv");
        REQUIRE(dkdv != names.end());
        names.insert(dkdv + 1, "attn_dq_wgmma");
      }
      CHECK(kernel_names(w) == names);
      CHECK(w.activation_bytes() == b.activation_bytes());
      CHECK(w.workspace_bytes(64, 128) == b.workspace_bytes(64, 128));
      if (max_seq <= 128) continue;
      const KernelInfo* k = w.find_kernel("attn_dq_wgmma");
      REQUIRE(k);
      CHECK(k->op == "attn_dq_wgmma");
      CHECK(k->params_type == "AttnDqWgParams");
      CHECK(k->instantiation == "attn_dq_wgmma_impl<T>");
      CHECK(k->pass == Pass::Backward);
      CHECK(k->block == 128);
      CHECK(k->rows_per_block == 128);
      CHECK(k->grid == GridKind::FlashTiles);
      CHECK(k->grid_constant);
      CHECK(k->min_blocks == "2");
      CHECK(k->dynamic_smem == attn_dq_wgmma_smem_bytes());
    }
  });
  // Four stages of 24 KB: two blocks per SM fit (228 KB, 1 KB reserved per block).
  CHECK(attn_dq_wgmma_smem_bytes() == 1024 + 4 * 3 * 8192 + 32);
  CHECK(2 * (attn_dq_wgmma_smem_bytes() + 1024) <= 228 * 1024);
  // With two warpgroups per dK/dV block the dSᵀ is the same: the kernel runs there too. Where the
  // wgmma dK/dV kernel does not (the mma.sync kernel, sm_80, head dim 128), cuBLAS's GEMM stays.
  CHECK(plan_for(bert_large(), 512, AttnDqGemm::Wgmma, "sm_90", AttnBwd::Wgmma2).attn_dq_wgmma);
  LayerConfig d128 = bert_large();
  d128.heads = 8;
  for (const auto& [c, arch, bwd] : {std::tuple{bert_large(), "sm_90", AttnBwd::Sync},
                                     std::tuple{bert_large(), "sm_80", AttnBwd::Wgmma},
                                     std::tuple{d128, "sm_90", AttnBwd::Wgmma}}) {
    CAPTURE(arch);
    const LayerPlan p = plan_for(c, 512, AttnDqGemm::Wgmma, arch, bwd);
    CHECK(p.attn_dq_gemm);
    CHECK_FALSE(p.attn_dq_wgmma);
    CHECK_FALSE(p.find_kernel("attn_dq_wgmma"));
  }
  // The switch: unset or "" is the default (attn_dq_wgmma), anything but the two words an Error(Config).
  LayerConfig l512 = bert_large();
  l512.max_seq_length = 512;
  {
    const dskc_test::ScopedEnv env("DSKC_ATTN_DQ_GEMM", nullptr);
    CHECK(attn_dq_gemm_from_env() == kAttnDqGemmDefault);
    CHECK(kAttnDqGemmDefault == AttnDqGemm::Wgmma);
    CHECK(make_plan(l512, fused_options("sm_90")).attn_dq_wgmma);
  }
  {
    const dskc_test::ScopedEnv env("DSKC_ATTN_DQ_GEMM", "cublas");
    CHECK(attn_dq_gemm_from_env() == AttnDqGemm::Cublas);
    const LayerPlan p = make_plan(l512, fused_options("sm_90"));
    CHECK(p.attn_dq_gemm);
    CHECK_FALSE(p.attn_dq_wgmma);
  }
  {
    const dskc_test::ScopedEnv env("DSKC_ATTN_DQ_GEMM", "cuBLAS");
    const std::string e = error_of([] { attn_dq_gemm_from_env(); }, ErrorKind::Config);
    CHECK(e.find("DSKC_ATTN_DQ_GEMM=cuBLAS: expected \"wgmma\"") != std::string::npos);
    CHECK_THROWS_AS(make_plan(bert_large(), fused_options("sm_90")), Error);
  }
  // The module builds for sm_90a: the transposed-operand wgmmas fed by 3-D TMA loads, dQ stored by
  // TMA, no spill.
  LayerConfig c = bert_large();
  c.max_seq_length = 512;
  const LayerPlan w = plan_for(c, 512, AttnDqGemm::Wgmma);
  const BuildResult p = build_module(w, {"sm_90", EmitKind::Ptx, {}}, /*use_cache=*/false);
  const std::string ptx(p.module.image.begin(), p.module.image.end());
  const size_t at = ptx.find(".entry attn_dq_wgmma(");
  REQUIRE(at != std::string::npos);
  const std::string body = ptx.substr(at, ptx.find(".entry", at + 10) - at);
  CHECK(body.find("wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16") != std::string::npos);
  CHECK(body.find("cp.async.bulk.tensor.3d.shared::cluster.global") != std::string::npos);
  CHECK(body.find("cp.async.bulk.tensor.3d.global.shared::cta") != std::string::npos);
  const BuildResult cb = build_module(w, {"sm_90", EmitKind::Cubin, {}}, /*use_cache=*/false);
  bool seen = false;
  for (const auto& k : cb.module.resources)
    if (k.name == "attn_dq_wgmma") {
      seen = true;
      CHECK(k.spill_bytes == 0);
      CHECK(k.registers <= 128);  // __launch_bounds__(128, 2): two blocks' registers always fit
    }
  CHECK(seen);
}

TEST_CASE("sm_90 at head dim 64: attn_flash_fwd on warpgroup MMA (DSKC_ATTN_FWD=wgmma, the default; wgmma3; sync)") {
  auto plan_for = [](const LayerConfig& c, const std::string& arch, AttnFwd fwd, AttnMask mask = AttnMask::Kernel) {
    PlanOptions o = fused_options(arch);
    o.attn_mask = mask;
    o.attn_fwd = fwd;
    return make_plan(c, o);
  };
  for_each_fused_bert_large([&](const LayerConfig& c) {
    const LayerPlan w2 = plan_for(c, "sm_90", AttnFwd::Wgmma), w3 = plan_for(c, "sm_90", AttnFwd::Wgmma3),
                    s = plan_for(c, "sm_90", AttnFwd::Sync);
    CHECK(w2.attn_fwd_wgmma);
    CHECK(w2.attn_fwd_wg_stages == 2);
    CHECK(w3.attn_fwd_wgmma);
    CHECK(w3.attn_fwd_wg_stages == 3);
    CHECK_FALSE(s.attn_fwd_wgmma);
    check_same_schedule(w2, s);  // only attn_flash_fwd's code differs
    const KernelInfo* ks = s.find_kernel("attn_flash_fwd");
    REQUIRE(ks);
    CHECK(ks->op == "attn_flash_fwd");
    CHECK(ks->params_type == "AttnFlashFwdParams");
    for (const LayerPlan* w : {&w2, &w3}) {
      const int stages = w->attn_fwd_wg_stages;
      const KernelInfo* k = w->find_kernel("attn_flash_fwd");
      REQUIRE(k);
      CHECK(k->op == "attn_flash_fwd_wgmma");
      CHECK(k->params_type == "AttnFlashFwdWgParams");
      CHECK(k->instantiation == fmt::format("attn_flash_fwd_wgmma_impl<T, kAttnDropoutOn, {}>", stages));
      CHECK(k->block == 128);
      CHECK(k->rows_per_block == 64);
      CHECK(k->grid == GridKind::FlashTiles);
      CHECK(k->grid_constant);
      CHECK(k->min_blocks == fmt::format("FlashWgFwdTile<{}>::kMinBlocks", stages));
      CHECK(k->dynamic_smem == flash_wg_fwd_smem_bytes(stages, 128));
      CHECK(k->fuses.find("attention dropout (mask from the keep bits)") != std::string::npos);
    }
  });
  // Shared memory: the Q tile, two (three) K/V stages of 8 KB tiles, the row's fp32 key mask and the
  // small rest; four blocks of two stages fit on an SM at seq 512 (228 KB), three of three.
  CHECK(flash_wg_fwd_smem_bytes(2, 128) == 1024 + 8192 + 4 * 8192 + 512 + 8 + 24);
  CHECK(flash_wg_fwd_smem_bytes(3, 100) == 1024 + 8192 + 6 * 8192 + 512 + 16 + 32);
  CHECK(flash_wg_fwd_smem_bytes(2, 513) == 1024 + 8192 + 4 * 8192 + 4 * 576 + 8 + 24);
  CHECK(4 * flash_wg_fwd_smem_bytes(2, 512) <= 228 * 1024);
  CHECK(3 * flash_wg_fwd_smem_bytes(3, 512) <= 228 * 1024);
  // The default (DSKC_ATTN_FWD unset) on sm_90 is the two-stage kernel; the source differs.
  {
    const dskc_test::ScopedEnv env("DSKC_ATTN_FWD", nullptr);
    const LayerPlan d = plan_for(bert_large(), "sm_90", AttnFwd::FromEnvironment);
    CHECK(d.attn_fwd_wgmma);
    CHECK(d.attn_fwd_wg_stages == 2);
    CHECK(emit(d).source != emit(plan_for(bert_large(), "sm_90", AttnFwd::Sync)).source);
  }
  // Inference and layers without attention dropout take it too (no keep bits at all).
  LayerConfig inference = bert_large(), nodrop = bert_large();
  inference.training = false;
  nodrop.attn_dropout_ratio = 0;
  for (const LayerConfig& c : {inference, nodrop}) {
    const LayerPlan w = plan_for(c, "sm_90", AttnFwd::Wgmma, AttnMask::Inline);
    CHECK(w.attn_fwd_wgmma);
    CHECK_FALSE(w.attn_keep_bits);
  }
  // Where it does not apply, the option changes nothing: the forward that draws the mask itself
  // (DSKC_ATTN_MASK=inline) with attention dropout, other archs, head dims other than 64, fp32.
  LayerConfig d32 = bert_large(), d128 = bert_large();
  d32.heads = 32;
  d128.heads = 8;
  const std::pair<LayerConfig, AttnMask> off[] = {{bert_large(), AttnMask::Inline},
                                                  {d32, AttnMask::Kernel},
                                                  {d128, AttnMask::Kernel},
                                                  {with_dtype(bert_large(), DType::F32), AttnMask::Kernel}};
  for (const auto& [c, mask] : off) {
    CAPTURE(c.head_dim());
    CAPTURE(static_cast<int>(mask));
    const LayerPlan w = plan_for(c, "sm_90", AttnFwd::Wgmma, mask), s = plan_for(c, "sm_90", AttnFwd::Sync, mask);
    CHECK_FALSE(w.attn_fwd_wgmma);
    CHECK(emit(w).source == emit(s).source);
  }
  for (const char* arch : {"sm_80", "sm_86", "sm_89"}) {
    CAPTURE(arch);
    const LayerPlan w = plan_for(bert_large(), arch, AttnFwd::Wgmma3);
    CHECK_FALSE(w.attn_fwd_wgmma);
    CHECK(w.find_kernel("attn_flash_fwd")->op == "attn_flash_fwd");
  }
  // DSKC_ATTN_FWD, read when the options leave the choice to it; a bad value is a config error.
  auto from_env = [&](const char* v) {
    const dskc_test::ScopedEnv env("DSKC_ATTN_FWD", v);
    const LayerPlan p = plan_for(bert_large(), "sm_90", AttnFwd::FromEnvironment);
    return p.attn_fwd_wgmma ? p.attn_fwd_wg_stages : 0;
  };
  CHECK(from_env("") == 2);
  CHECK(from_env("wgmma") == 2);
  CHECK(from_env("wgmma3") == 3);
  CHECK(from_env("sync") == 0);
  for (const char* bad : {"WGMMA", "wgmma4", "sync "})
    check_env_error("DSKC_ATTN_FWD", bad, "wgmma", "sync", [] { attn_fwd_from_env(); });
}

TEST_CASE("stochastic_mode with DSKC_ATTN_DQ=atomic: single-pass fused attention backward attn_flash_bwd_dkdvdq "
          "with an fp32 dQ accumulator in the workspace") {
  // The deterministic list with attn_flash_bwd_dkdv (+ the dQ GEMM) replaced by the one kernel,
  // for every dtype / LN placement / memory flag / dropout combination that fuses.
  for (DType t : {DType::F16, DType::BF16})
    for (bool pre_ln : {true, false})
      for (unsigned f = 0; f <= kAllFlags; ++f)
        for (double attn_drop : {0.1, 0.0})
          for (double hidden_drop : {0.1, 0.0}) {
            CAPTURE(dtype_name(t));
            CAPTURE(pre_ln);
            CAPTURE(f);
            CAPTURE(attn_drop);
            CAPTURE(hidden_drop);
            LayerConfig c = bert_large_variant(t, pre_ln, f, attn_drop, hidden_drop);
            const LayerPlan det = fused_plan(c);
            c.stochastic_mode = true;
            const LayerPlan sto = atomic_dq_plan(c);
            REQUIRE(sto.fused_attention);
            CHECK_FALSE(det.attn_dq_atomic);
            CHECK(sto.attn_dq_atomic);
            std::vector<std::string> want = kernel_names(det);
            const auto dkdv = std::find(want.begin(), want.end(), "attn_flash_bwd_dkdv");
            REQUIRE(dkdv != want.end());
            *dkdv = "attn_flash_bwd_dkdvdq";
            CHECK(kernel_names(sto) == want);
            // The zeroing rides on attn_flash_bwd_dot; the single pass reads the same bits.
            CHECK(det.find_kernel("attn_flash_bwd_dot")->instantiation == "attn_flash_bwd_dot_impl<T>");
            CHECK(sto.find_kernel("attn_flash_bwd_dot")->instantiation == "attn_flash_bwd_dot_impl<T, kDqAtomic>");
            CHECK(sto.find_kernel("attn_flash_bwd_dot")->fuses.find("zeroes the fp32 dQ accumulator") !=
                  std::string::npos);
            const KernelInfo* k = sto.find_kernel("attn_flash_bwd_dkdvdq");
            const KernelInfo* d = det.find_kernel("attn_flash_bwd_dkdv");
            CHECK(k->op == "attn_flash_bwd");
            CHECK(k->pass == Pass::Backward);
            CHECK(k->params_type == "AttnFlashBwdParams");
            CHECK(k->instantiation == "attn_flash_bwd_dkdv_impl<T, kAttnDropoutOn, kDqAtomic>");
            CHECK(d->instantiation == "attn_flash_bwd_dkdv_impl<T, kAttnDropoutOn, kDqGemm>");
            CHECK(k->grid == GridKind::FlashTiles);
            CHECK(k->block == d->block);
            CHECK(k->rows_per_block == d->rows_per_block);
            CHECK(k->shape_check == d->shape_check);
            CHECK(k->rows_check == d->rows_check);
            CHECK(k->fuses.find("atomics") != std::string::npos);
            CHECK(k->fuses.find("no atomics") == std::string::npos);
            CHECK(d->fuses.find("no atomics") != std::string::npos);
            if (const KernelInfo* rb = sto.find_kernel("attn_dropout_bits_bwd"))
              CHECK(rb->fuses.find("attn_flash_bwd_dkdvdq") != std::string::npos);
            // No activation memory: the accumulator and the tickets are workspace (shared by layers).
            CHECK(sto.activation_bytes() == det.activation_bytes());
            CHECK(sto.saved.size() == det.saved.size());
            // The single pass has no dSᵀ buffer (grad_scores, [B, heads, S, S] of 2-byte elements).
            CHECK(sto.workspace_bytes(64, 128) == det.workspace_bytes(64, 128) + int64_t{64} * 128 * 1024 * 4 +
                                                       int64_t{64} * 16 * 4 - int64_t{64} * 16 * 128 * 128 * 2);
            // Bytes at (batch 3, seq 51): fp32 [B, S, H] and one u32 per (batch, head).
            for (auto [name, shape, bytes] : {std::tuple{"attn_dq_acc", "[B, S, H] fp32", int64_t{3} * 51 * 1024 * 4},
                                              {"attn_dq_tickets", "[B, heads] u32", int64_t{3} * 16 * 4}}) {
              CAPTURE(name);
              const auto w = std::find_if(sto.workspace.begin(), sto.workspace.end(),
                                          [&](const TensorInfo& x) { return x.name == name; });
              REQUIRE(w != sto.workspace.end());
              CHECK(w->shape == shape);
              CHECK(w->elem_bytes == 4);
              CHECK(w->bytes(3, 51) == bytes);
              CHECK(!w->why.empty());
              CHECK(std::none_of(det.workspace.begin(), det.workspace.end(),
                                 [&](const TensorInfo& x) { return x.name == name; }));
            }
          }
  // Head dim 128: the single pass keeps the dK/dV kernel's 2-warp, 32-key tiles.
  LayerConfig d128 = bert_large();
  d128.heads = 8;
  d128.stochastic_mode = true;
  const KernelInfo* k128 = atomic_dq_plan(d128).find_kernel("attn_flash_bwd_dkdvdq");
  REQUIRE(k128);
  CHECK(k128->block == 64);
  CHECK(k128->rows_per_block == 32);
  // Nothing changes where the fused backward does not run: fp32, the unfused path, inference.
  LayerConfig inference = bert_large();
  inference.training = false;
  const std::pair<LayerConfig, AttentionPath> same[] = {
      {with_dtype(bert_large(), DType::F32), AttentionPath::FusedWhereSupported},
      {bert_large(), AttentionPath::Unfused},
      {inference, AttentionPath::FusedWhereSupported}};
  for (const auto& [base, path] : same) {
    LayerConfig c = base;
    c.stochastic_mode = true;
    const LayerPlan sto = make_plan(c, {path, AttnMask::Inline, AttnDq::Atomic}),
                    det = make_plan(base, {path, AttnMask::Inline});
    CHECK_FALSE(sto.attn_dq_atomic);
    CHECK(kernel_names(sto) == kernel_names(det));
    CHECK(sto.workspace_bytes(64, 128) == det.workspace_bytes(64, 128));
  }
  // The default module is the deterministic backward: no kDqAtomic instantiation in its kernel
  // wrappers (the template text itself is inlined either way).
  const std::string det_src = emit(fused_plan(bert_large())).source;
  const std::string kernels_part = det_src.substr(det_src.find("// ================ kernels ================"));
  CHECK(kernels_part.find("kDqAtomic") == std::string::npos);
  CHECK(kernels_part.find("attn_flash_bwd_dkdv_impl<T, kAttnDropoutOn, kDqGemm>(p);") != std::string::npos);
  CHECK(kernels_part.find("attn_flash_bwd_dq_impl") == std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// Every template compiles on its own (SPEC §3, STYLE "Every template is compiled through NVRTC for
// sm_80 and sm_90"). The translation unit includes only the generated constants and the file;
// for an op template it also holds that op's generated kernel wrappers (from a plan that uses
// every op), so the template instantiates with no other op template present.

TEST_CASE("every template compiles standalone through NVRTC for sm_80 and sm_90 in fp32, fp16 and bf16") {
  LayerConfig c = with_flags(bert_large(), kAllFlags);  // Pre-LN + all flags: every op is used
  c.hidden_size = 256;
  c.heads = 4;
  c.intermediate_size = 1024;
  std::set<std::string> ops_seen;
  for (DType t : {DType::F32, DType::F16, DType::BF16}) {
    // fp16/bf16: the fused attention plan and the unfused one between them use every op; fp32 has
    // no fused attention, so its attn_flash_* templates compile with no kernel instantiating them.
    const LayerPlan plan = fused_plan(with_dtype(c, t));
    const LayerPlan plan_unfused = unfused_plan(with_dtype(c, t));
    LayerConfig cs = with_dtype(c, t);
    cs.stochastic_mode = true;
    const LayerPlan plan_stochastic = atomic_dq_plan(cs);
    const LayerPlan plan_dq_kernel =
        make_plan(with_dtype(c, t), {AttentionPath::FusedWhereSupported, AttnMask::Inline, AttnDq::Kernel});
    // gemm_sm90 (every epilogue; the data gradients on the weights as stored), and with
    // DSKC_SM90_WEIGHT=transpose weight_transpose + the data gradients on Wᵀ (fp16/bf16)
    PlanOptions sm90_opt{AttentionPath::FusedWhereSupported, AttnMask::Inline};
    sm90_opt.arch = "sm_90";
    sm90_opt.ffn_gemm = FfnGemm::Sm90;
    sm90_opt.linear_gemm = LinearGemm::Sm90;
    sm90_opt.output_gemm = OutputGemm::Fused;  // + kBiasDropoutResidual
    sm90_opt.dgrad_gemm = DgradGemm::Sm90;
    sm90_opt.sm90_weight = Sm90Weight::InPlace;
    const LayerPlan plan_sm90 = make_plan(with_dtype(c, t), sm90_opt);
    sm90_opt.sm90_weight = Sm90Weight::Transpose;
    const LayerPlan plan_sm90_t = make_plan(with_dtype(c, t), sm90_opt);
    const std::string module_sm90_t = emit(plan_sm90_t).source;
    // the wgmma attention forward (sm_90, keep flags from the first LayerNorm's launch: layernorm_fwd_bits;
    // the backward's from attn_flash_bwd_dot's: attn_flash_bwd_dot_bits)
    PlanOptions fwd_wg{AttentionPath::FusedWhereSupported, AttnMask::LayerNorm};
    fwd_wg.attn_bits_bwd = AttnBitsBwd::Dot;
    fwd_wg.arch = "sm_90";
    fwd_wg.attn_fwd = AttnFwd::Wgmma;
    const LayerPlan plan_fwd_wg = make_plan(with_dtype(c, t), fwd_wg);
    // stochastic_mode's TMA-reduced dQ (sm_90: the wgmma dK/dV kernel's kDqReduce, attn_dq_convert)
    PlanOptions red = fused_options("sm_90");
    red.attn_dq = AttnDq::Reduce;
    const LayerPlan plan_reduce = make_plan(cs, red);
    const std::string module_reduce = emit(plan_reduce).source;
    // attn_dq_wgmma (sm_90: the wgmma backward's dQ GEMM by dskc's own kernel)
    PlanOptions dqwg = fused_options("sm_90");
    dqwg.attn_dq = AttnDq::Gemm;
    dqwg.attn_dq_gemm = AttnDqGemm::Wgmma;
    const LayerPlan plan_dq_wgmma = make_plan(with_dtype(c, t), dqwg);
    const std::string module_dq_wgmma = emit(plan_dq_wgmma).source;
    const std::string module = emit(plan).source, module_unfused = emit(plan_unfused).source,
                      module_stochastic = emit(plan_stochastic).source, module_dq_kernel = emit(plan_dq_kernel).source,
                      module_sm90 = emit(plan_sm90).source, module_fwd_wg = emit(plan_fwd_wg).source;
    const auto headers = template_headers(plan);
    for (const auto& tpl : embedded_templates()) {
      // The BERT model's own kernels (templates/model/) have their own config header and their
      // own compile test (test_model_kernels_compile.cpp).
      if (tpl.path.rfind("model/", 0) == 0) continue;
      // Likewise the plain (unfused) layer's kernels (templates/plain/,
      // test_plain_kernels_compile.cpp).
      if (tpl.path.rfind("plain/", 0) == 0) continue;
      std::string tu = "#include \"dskc_config.cuh\"\n#include \"" + tpl.path + "\"\n";
      std::vector<std::string> wrapped;
      if (tpl.path.rfind("common/", 0) != 0) {
        tu += "using namespace dskc;\n";
        for (const auto& k : plan.kernels)
          if (k.op + ".cuh" == tpl.path) {
            tu += wrapper_of(module, k.name);
            wrapped.push_back(k.name);
          }
        for (const auto& k : plan_unfused.kernels)
          if (k.op + ".cuh" == tpl.path && std::find(wrapped.begin(), wrapped.end(), k.name) == wrapped.end()) {
            tu += wrapper_of(module_unfused, k.name);
            wrapped.push_back(k.name);
          }
        for (const auto& k : plan_stochastic.kernels)  // attn_flash_bwd_dkdvdq
          if (k.op + ".cuh" == tpl.path && std::find(wrapped.begin(), wrapped.end(), k.name) == wrapped.end()) {
            tu += wrapper_of(module_stochastic, k.name);
            wrapped.push_back(k.name);
          }
        for (const auto& k : plan_dq_kernel.kernels)  // attn_flash_bwd_dq (DSKC_ATTN_DQ=kernel)
          if (k.op + ".cuh" == tpl.path && std::find(wrapped.begin(), wrapped.end(), k.name) == wrapped.end()) {
            tu += wrapper_of(module_dq_kernel, k.name);
            wrapped.push_back(k.name);
          }
        for (const auto& k : plan_sm90.kernels)  // gemm_*_fwd, gemm_*_dgrad (kBNMajor)
          if (k.op + ".cuh" == tpl.path && std::find(wrapped.begin(), wrapped.end(), k.name) == wrapped.end()) {
            tu += wrapper_of(module_sm90, k.name);
            wrapped.push_back(k.name);
          }
        for (const auto& k : plan_sm90_t.kernels)  // transpose_* (the gemm_*_dgrad names are taken above)
          if (k.op + ".cuh" == tpl.path && std::find(wrapped.begin(), wrapped.end(), k.name) == wrapped.end()) {
            tu += wrapper_of(module_sm90_t, k.name);
            wrapped.push_back(k.name);
          }
        for (const auto& k : plan_fwd_wg.kernels)  // attn_flash_fwd on wgmma
          if (k.op + ".cuh" == tpl.path && std::find(wrapped.begin(), wrapped.end(), k.name) == wrapped.end()) {
            tu += wrapper_of(module_fwd_wg, k.name);
            wrapped.push_back(k.name);
          }
        for (const auto& k : plan_reduce.kernels)  // attn_dq_convert
          if (k.op + ".cuh" == tpl.path && std::find(wrapped.begin(), wrapped.end(), k.name) == wrapped.end()) {
            tu += wrapper_of(module_reduce, k.name);
            wrapped.push_back(k.name);
          }
        for (const auto& k : plan_dq_wgmma.kernels)  // attn_dq_wgmma
          if (k.op + ".cuh" == tpl.path && std::find(wrapped.begin(), wrapped.end(), k.name) == wrapped.end()) {
            tu += wrapper_of(module_dq_wgmma, k.name);
            wrapped.push_back(k.name);
          }
        // fp32 layers have no fused attention and no gemm_sm90: those templates compile with no
        // kernel instantiating them.
        const bool fp16_only = tpl.path.rfind("attn_flash", 0) == 0 || tpl.path == "attn_dropout_bits.cuh" ||
                               tpl.path == "attn_dq_convert.cuh" || tpl.path == "attn_dq_wgmma.cuh" ||
                               tpl.path == "layernorm_fwd_bits.cuh" ||
                               tpl.path == "gemm_sm90.cuh" || tpl.path == "weight_transpose.cuh";
        CHECK_MESSAGE((!wrapped.empty() || (fp16_only && t == DType::F32)),
                      tpl.path << " is used by no kernel of a plan with every flag");
        if (!wrapped.empty()) ops_seen.insert(tpl.path);
      }
      for (const char* arch : {"sm_80", "sm_90"}) {
        CAPTURE(tpl.path);
        CAPTURE(dtype_name(t));
        CAPTURE(arch);
        CompiledModule m;
        try {
          m = nvrtc_compile(tu, "standalone_" + tpl.path, {arch, EmitKind::Cubin, {}}, headers);
        } catch (const Error& e) {
          FAIL_CHECK(std::string(e.what()));
          continue;
        }
        CHECK(!m.image.empty());
        for (const auto& k : wrapped) {
          const auto r = std::find_if(m.resources.begin(), m.resources.end(),
                                      [&](const KernelResources& x) { return x.name == k; });
          CHECK_MESSAGE(r != m.resources.end(), k << " missing from the ptxas log");
        }
      }
    }
  }
  // Every non-common embedded template is an op of some kernel (no dead templates).
  std::set<std::string> ops;
  for (const auto& tpl : embedded_templates())
    if (tpl.path.rfind("common/", 0) != 0 && tpl.path.rfind("model/", 0) != 0 && tpl.path.rfind("plain/", 0) != 0)
      ops.insert(tpl.path);
  CHECK(ops_seen == ops);
  CHECK(ops.size() >= 15);
}

// ---------------------------------------------------------------------------------------------
// NVRTC failures and ptxas logs

TEST_CASE("an NVRTC failure throws Error(Compile) showing the offending source line and its number") {
  const std::string src =
      "// line 1\n"
      "extern \"C\" __global__ void ok(float* p) { p[0] = 1.f; }\n"
      "extern \"C\" __global__ void bad(float* p) { p[0] = undeclared_thing_xyz; }\n"
      "// line 4\n";
  for (const char* arch : {"sm_80", "sm_90"}) {
    CAPTURE(arch);
    const std::string msg =
        error_of([&] { nvrtc_compile(src, "broken_layer.cu", {arch, EmitKind::Cubin, {}}); }, ErrorKind::Compile);
    INFO(msg);
    CHECK(msg.find("broken_layer.cu") != std::string::npos);
    CHECK(msg.find(arch) != std::string::npos);
    CHECK(msg.find("broken_layer.cu(3): error") != std::string::npos);  // NVRTC's log
    CHECK(msg.find("undeclared_thing_xyz") != std::string::npos);
    // annotate_errors: the numbered source around line 3, the line itself marked.
    CHECK(msg.find(">     3 | extern \"C\" __global__ void bad(float* p) { p[0] = undeclared_thing_xyz; }") !=
          std::string::npos);
    CHECK(msg.find("      2 | extern \"C\" __global__ void ok") != std::string::npos);
    CHECK(msg.find("      4 | // line 4") != std::string::npos);
  }
  // PTX output goes through the same path.
  CHECK(error_of([&] { nvrtc_compile(src, "broken_layer.cu", {"sm_90", EmitKind::Ptx, {}}); }, ErrorKind::Compile)
            .find(">     3 |") != std::string::npos);
  // A bad option is a compile error too, not a crash.
  error_of([&] { nvrtc_compile("", "empty.cu", {"sm_90", EmitKind::Cubin, {"--no-such-nvrtc-option"}}); },
           ErrorKind::Compile);
}

TEST_CASE("annotate_errors marks each error line of the named source, clamped to the file") {
  const std::string source = "a\nb\nc\nd\ne\nf\n";
  const std::string log =
      "gen.cu(1): error: first\n"
      "other.cuh(3): error: in another file, not annotated\n"
      "gen.cu(6): catastrophic error: last\n"
      "gen.cu(4): warning: not an error\n";
  const std::string out = annotate_errors(log, source, "gen.cu");
  INFO(out);
  CHECK(out.find("gen.cu(1): error: first\n>     1 | a\n      2 | b\n      3 | c\n") != std::string::npos);
  CHECK(out.find("gen.cu(6): catastrophic error: last\n      4 | d\n      5 | e\n>     6 | f\n") != std::string::npos);
  CHECK(out.find("other.cuh") == std::string::npos);
  CHECK(out.find("warning") == std::string::npos);
  // Names with regex characters are matched literally.
  CHECK(annotate_errors("dskc_layer_(1).cu(2): error: x\n", source, "dskc_layer_(1).cu").find(">     2 | b") !=
        std::string::npos);
  CHECK(annotate_errors("", source, "gen.cu").empty());
}

TEST_CASE("parse_ptxas_log reads registers, shared memory, stack and spills per entry") {
  // CUDA 12/13 ptxas -v output as NVRTC returns it (a spilling entry, a shared-memory entry, and the
  // older "cmem" form).
  const std::string log =
      "ptxas info    : 0 bytes gmem\n"
      "ptxas info    : Compiling entry function 'layernorm_fwd_norm' for 'sm_90'\n"
      "ptxas info    : Function properties for layernorm_fwd_norm\n"
      "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 30 registers, used 1 barriers, 16 bytes smem\n"
      "ptxas info    : Compile time = 2.245 ms\n"
      "ptxas info    : Compiling entry function 'bias_gelu_bwd' for 'sm_90'\n"
      "ptxas info    : Function properties for bias_gelu_bwd\n"
      "ptxas         .     48 bytes stack frame, 40 bytes spill stores, 44 bytes spill loads\n"
      "ptxas info    : Used 255 registers, used 0 barriers, 48 bytes cumulative stack size\n"
      "ptxas info    : Compiling entry function 'param_grad_reduce_qkv' for 'sm_80'\n"
      "ptxas info    : Function properties for param_grad_reduce_qkv\n"
      "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 31 registers, 1056 bytes smem, 380 bytes cmem[0]\n";
  const auto r = parse_ptxas_log(log);
  REQUIRE(r.size() == 3);
  CHECK(r[0].name == "layernorm_fwd_norm");
  CHECK(r[0].registers == 30);
  CHECK(r[0].shared_bytes == 16);
  CHECK(r[0].stack_bytes == 0);
  CHECK(r[0].spill_bytes == 0);
  CHECK(r[1].name == "bias_gelu_bwd");
  CHECK(r[1].registers == 255);
  CHECK(r[1].shared_bytes == 0);
  CHECK(r[1].stack_bytes == 48);
  CHECK(r[1].spill_bytes == 40);
  CHECK(r[2].name == "param_grad_reduce_qkv");
  CHECK(r[2].registers == 31);
  CHECK(r[2].shared_bytes == 1056);
  CHECK(r[2].spill_bytes == 0);
  CHECK(parse_ptxas_log("").empty());
  CHECK(parse_ptxas_log("ptxas info    : 0 bytes gmem\n").empty());
}

// ptxas prints "Function properties for <f>" blocks for non-inlined device functions too; an
// entry's stack/spill numbers come from its own block only.
TEST_CASE("parse_ptxas_log keeps an entry's properties when a device function follows") {
  const std::string log =
      "ptxas info    : Compiling entry function 'k' for 'sm_90'\n"
      "ptxas info    : Function properties for k\n"
      "ptxas         .     256 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads\n"
      "ptxas info    : Used 40 registers, used 0 barriers, 256 bytes cumulative stack size\n"
      "ptxas info    : Function properties for _Z1fPfi\n"
      "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n";
  const auto r = parse_ptxas_log(log);
  REQUIRE(r.size() == 1);
  CHECK(r[0].stack_bytes == 256);
  CHECK(r[0].spill_bytes == 8);
}

TEST_CASE("a real compile's log parses into one resource entry per kernel") {
  const CompiledModule m =
      nvrtc_compile("extern \"C\" __global__ void a(float* p) { p[threadIdx.x] *= 2.f; }\n"
                    "extern \"C\" __global__ void b(float* p) { __shared__ float s[64]; s[threadIdx.x] = p[0];"
                    " __syncthreads(); p[1] = s[threadIdx.x ^ 1]; }\n",
                    "two.cu", {"sm_80", EmitKind::Cubin, {}});
  INFO(m.log);
  REQUIRE(m.resources.size() == 2);
  std::map<std::string, KernelResources> by;
  for (const auto& r : m.resources) by[r.name] = r;
  REQUIRE(by.count("a"));
  REQUIRE(by.count("b"));
  CHECK(by["a"].registers > 0);
  CHECK(by["a"].shared_bytes == 0);
  CHECK(by["a"].spill_bytes == 0);
  CHECK(by["b"].shared_bytes == 256);
  CHECK(m.image.rfind("\x7f" "ELF", 0) == 0);
  // PTX output has no ptxas pass, hence no resources.
  const CompiledModule ptx = nvrtc_compile("extern \"C\" __global__ void a(float* p) { p[0] = 1.f; }\n", "one.cu",
                                           {"sm_80", EmitKind::Ptx, {}});
  CHECK(ptx.resources.empty());
  CHECK(ptx.image.find(".entry a(") != std::string::npos);
  CHECK(ptx.image.find(".target sm_80") != std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// Whole generated modules through NVRTC to cubins (instantiation of every kernel). Not the full
// cross product (each compile takes 1-5 s on a 2-core CI machine): a covering set in which every
// hidden size, head dim, sequence length, dtype, LN placement, flag set, arch, inference, zero
// dropout, tanh GELU and intermediate != 4H appears at least once.

namespace {

struct ModuleCase {
  int hidden, heads, seq;
  DType dtype;
  const char* arch;
  bool pre_ln = true;
  unsigned flags = kNoFlag;
  int inter = 0;  // 0: 4 * hidden
  bool training = true;
  double attn_drop = 0.1, hidden_drop = 0.1;
  bool tanh = false;
  bool stochastic = false;
  bool unfused = false;  // force the unfused attention path (fp16/bf16 would fuse where supported)
  bool mask_kernel = false;  // DSKC_ATTN_MASK=kernel: attn_dropout_bits_fwd + attn_flash_fwd reading bits
  bool dq_kernel = false;    // DSKC_ATTN_DQ=kernel: attn_flash_bwd_dkdv without dSᵀ + attn_flash_bwd_dq
  bool dq_atomic = false;    // DSKC_ATTN_DQ=atomic (with stochastic): the single pass attn_flash_bwd_dkdvdq
  bool dq_fused = false;     // DSKC_ATTN_DQ=fused: dQ inside the wgmma dK/dV kernel (sm_90, S <= 128)
  bool dq_ring = false;      // DSKC_ATTN_DQ=ring: above 128 keys the ring of cluster blocks (sm_90, S <= 512)
  int fwd_stages = 1;        // PlanOptions::attn_fwd_stages (2: attn_flash_fwd's two K/V buffers where they fit)
  AttnBwd attn_bwd = AttnBwd::FromEnvironment;  // sm_90, head dim 64: the wgmma dK/dV kernel by default
  AttnFwd attn_fwd = AttnFwd::FromEnvironment;  // sm_90, head dim 64, bits or no dropout: the wgmma forward
  OutputGemm output_gemm = OutputGemm::Separate;  // Fused: sm_90 Pre-LN, the residual epilogue in gemm_sm90
  DgradGemm dgrad_gemm = DgradGemm::Cublas;        // Sm90: the data gradients as gemm_sm90 (+ the transposes)
  LinearGemm linear_gemm = LinearGemm::Cublas;     // Sm90 (needed by output_gemm Fused): the forward's QKV,
                                                   // attention-output and output GEMMs as gemm_sm90
  AttnStore attn_store = AttnStore::Tma;           // Rows: the wgmma attention kernels' 4-byte output stores
  AttnBwdPersist attn_bwd_persist = AttnBwdPersist::Off;  // On: the persistent clustered dK/dV kernel
};

void compile_module(const ModuleCase& mc) {
  LayerConfig c = with_flags(bert_large(), mc.flags);
  c = with_dtype(c, mc.dtype);
  c.batch_size = 8;
  c.hidden_size = mc.hidden;
  c.heads = mc.heads;
  c.intermediate_size = mc.inter ? mc.inter : 4 * mc.hidden;
  c.max_seq_length = mc.seq;
  c.pre_layer_norm = mc.pre_ln;
  c.training = mc.training;
  c.attn_dropout_ratio = mc.attn_drop;
  c.hidden_dropout_ratio = mc.hidden_drop;
  c.gelu_approximation = mc.tanh ? GeluForm::Tanh : GeluForm::Erf;
  c.stochastic_mode = mc.stochastic;
  INFO(std::string(mc.arch) << " " << to_json_text(c, -1));
  PlanOptions opt{mc.unfused ? AttentionPath::Unfused : AttentionPath::FusedWhereSupported,
                  mc.mask_kernel ? AttnMask::Kernel : AttnMask::Inline, mc.dq_kernel   ? AttnDq::Kernel
                  : mc.dq_atomic ? AttnDq::Atomic
                  : mc.dq_ring   ? AttnDq::Ring
                  : mc.dq_fused  ? AttnDq::Fused
                                 : AttnDq::Gemm};
  opt.attn_fwd_stages = mc.fwd_stages;
  opt.attn_bwd = mc.attn_bwd;
  opt.attn_fwd = mc.attn_fwd;
  opt.output_gemm = mc.output_gemm;
  opt.dgrad_gemm = mc.dgrad_gemm;
  opt.linear_gemm = mc.linear_gemm;
  opt.attn_store = mc.attn_store;
  opt.attn_bwd_persist = mc.attn_bwd_persist;
  opt.arch = mc.arch;  // sm_90: gemm_sm90 where the layer allows (built for sm_90a)
  const LayerPlan plan = make_plan(c, opt);
  if (mc.output_gemm == OutputGemm::Fused) REQUIRE(plan.output_gemm_fused);
  if (mc.dgrad_gemm == DgradGemm::Sm90) REQUIRE(plan.dgrad_gemm_sm90);
  if (mc.dq_fused) REQUIRE(plan.attn_dq_fused);
  if (mc.dq_ring) REQUIRE(plan.attn_dq_ring);
  if (mc.attn_bwd_persist == AttnBwdPersist::On) REQUIRE(plan.attn_bwd_persist);
  BuildResult r;
  try {
    r = build_module(plan, {mc.arch, EmitKind::Cubin, {}}, /*use_cache=*/false);
  } catch (const Error& e) {
    FAIL_CHECK(e.what());
    return;
  }
  CHECK_FALSE(r.module.from_cache);
  CHECK(r.module.arch == mc.arch);
  CHECK(r.module.cache_key.size() == 64);
  REQUIRE(!r.module.image.empty());
  CHECK(r.module.image.rfind("\x7f" "ELF", 0) == 0);
  CHECK(r.generated.kernel_names == kernel_names(plan));
  CHECK(r.module.resources.size() == plan.kernels.size());
  for (const auto& k : plan.kernels) {
    CAPTURE(k.name);
    const auto it = std::find_if(r.module.resources.begin(), r.module.resources.end(),
                                 [&](const KernelResources& x) { return x.name == k.name; });
    REQUIRE_MESSAGE(it != r.module.resources.end(), "no ptxas resources for " << k.name);
    CHECK(it->registers > 0);
    CHECK(it->registers <= 65536 / k.block);  // __launch_bounds__ holds
    // The dK/dV kernel with the dSᵀ stores is capped for 3 resident 4-warp blocks on sm_90, the forward
    // (keep flags from the bits, head dim <= 64) for 4 everywhere.
    if (k.op == "attn_flash_bwd" && k.name == "attn_flash_bwd_dkdv" && !k.min_blocks.empty() && k.block == 128 &&
        std::string(mc.arch) == "sm_90")
      CHECK(it->registers <= 168);
    // The wgmma dK/dV kernel (8 warps per SM) gets the registers its wgmmas need: with fewer, ptxas
    // serializes them (C7512, "wgmma.mma_async instructions are serialized"), which costs most of its speed.
    // The wgmma forward: no serialized wgmmas either (its bound: 4 or 3 blocks of 128 threads per SM).
    if (k.op == "attn_flash_fwd_wgmma")
      CHECK_MESSAGE(r.module.log.find("serialized due to insufficient register resources for the function '" + k.name +
                                      "'") == std::string::npos,
                    "ptxas serialized the wgmmas of " << k.name);
    if (k.op == "attn_flash_bwd_wgmma") {
      CHECK_MESSAGE(r.module.log.find("serialized due to insufficient register resources for the function '" + k.name +
                                      "'") == std::string::npos,
                    "ptxas serialized the wgmmas of " << k.name);
    }
    if (k.op == "attn_flash_fwd" && !k.min_blocks.empty() && plan.cfg.head_dim() <= 64) CHECK(it->registers <= 128);
    // Known exceptions: ptxas spills 12 bytes (8-byte stack) in layernorm_fwd at hidden 8192 fp16
    // (40 registers, no local memory in the PTX), and as much in layernorm_bwd_attn at hidden 8192
    // on sm_80 once it also draws the attention output's dropout mask (1024 threads: 64 registers
    // each); every other kernel and shape must not spill.
    const bool known = (k.op == "layernorm_fwd" || k.name == "layernorm_bwd_attn") && plan.cfg.hidden_size == 8192 &&
                       it->spill_bytes <= 16;
    CHECK_MESSAGE((it->spill_bytes == 0 || known), k.name << " spills " << it->spill_bytes << " bytes");
    CHECK(r.module.image.find(k.name) != std::string::npos);  // the symbol is in the cubin
    if (k.op == "attn_flash_fwd") {
      // The plan's mirror of the kernel's static shared memory (which picks its K/V buffers) is an
      // upper bound within 32 bytes (the flag arrays' placeholders, which ptxas drops when unused),
      // and two buffers stay within 48 KB.
      const bool drop = plan.cfg.training && plan.cfg.attn_dropout_ratio > 0;
      const int est = flash_fwd_smem_bytes(plan.cfg.head_dim(), plan.attn_fwd_stages, drop && !plan.attn_mask_kernel,
                                           plan.attn_mask_kernel);
      CHECK(it->shared_bytes <= est);
      CHECK(it->shared_bytes >= est - 32);
      if (plan.attn_fwd_stages == 2) CHECK(it->shared_bytes <= 48 * 1024);
    }
  }
  CHECK(r.module.manifest_json.find("\"config_hash\": \"" + plan.config_hash + "\"") != std::string::npos);
}

}  // namespace

TEST_CASE("whole modules compile: every hidden size on sm_80 and sm_90, head dims 8..128") {
  const ModuleCase cases[] = {
      {128, 16, 128, DType::F16, "sm_80"},                                    // d 8
      {128, 16, 51, DType::BF16, "sm_90", false},                             // d 8, Post-LN
      {160, 2, 51, DType::BF16, "sm_80", true, kNoFlag, 600},                 // d 80, I != 4H
      {160, 2, 128, DType::F32, "sm_90", false, kAllFlags},                   // d 80
      {768, 12, 128, DType::F32, "sm_80"},                                    // d 64 (BERT-Base)
      {768, 12, 512, DType::F16, "sm_90", false, kAttnCkpt},                  // d 64
      {1024, 8, 512, DType::F16, "sm_80", true, kGeluCkpt},                   // d 128
      {1024, 16, 128, DType::F16, "sm_90"},                                   // d 64 (BERT-Large)
      {1600, 25, 381, DType::BF16, "sm_80", true, kInvertible},               // d 64, 25 heads
      {1600, 25, 128, DType::F16, "sm_90", false},                            // d 64
      {2560, 32, 509, DType::F16, "sm_80"},                                   // d 80
      {2560, 32, 128, DType::BF16, "sm_90", true, kAllFlags},                 // d 80
      {4096, 32, 7, DType::F32, "sm_80", false},                              // d 128
      {4096, 64, 128, DType::BF16, "sm_90", true, kGeluCkpt},                 // d 64
      {8192, 64, 128, DType::F16, "sm_80", true, kAllFlags},                  // d 128
      {8192, 64, 51, DType::F32, "sm_90", false, kInvertible},                // d 128, fp32: widest rows
  };
  for (const auto& c : cases) compile_module(c);
}

TEST_CASE("whole modules compile: sequence lengths 1 .. 2048, more head dims") {
  const ModuleCase cases[] = {
      {768, 12, 1, DType::F32, "sm_90"},                        // one token
      {128, 2, 7, DType::BF16, "sm_80"},                        // d 64, seq < one vector of 8
      {1024, 32, 51, DType::F16, "sm_90", false},               // d 32
      {160, 8, 128, DType::F32, "sm_80", true, kAttnCkpt},      // d 20
      {2560, 64, 381, DType::BF16, "sm_90", false, kGeluCkpt},  // d 40
      {768, 8, 512, DType::F16, "sm_80"},                       // d 96
      {1024, 64, 509, DType::F32, "sm_90", true, kInvertible},  // d 16, odd seq near 512
      {1024, 16, 2048, DType::F16, "sm_80", true, kAllFlags},   // longest rows in registers
      {1024, 16, 2048, DType::F32, "sm_90", false},             // fp32: 4-wide vectors, 16 iterations
      {126, 2, 64, DType::F16, "sm_90", true, kInvertible},     // 2-wide vectors: warp-row LayerNorm backward, scalar partials
      {126, 2, 33, DType::BF16, "sm_80", false},                // same, Post-LN
  };
  for (const auto& c : cases) compile_module(c);
}

TEST_CASE("whole modules compile: dtypes x LN placement x memory flags") {
  std::vector<ModuleCase> cases;
  const DType dtypes[] = {DType::F32, DType::F16, DType::BF16};
  int i = 0;
  for (bool pre : {true, false})
    for (unsigned f : {kNoFlag, kAttnCkpt, kInvertible, kGeluCkpt, kAllFlags}) {
      ModuleCase m{1024, 16, 128, dtypes[i % 3], i % 2 ? "sm_90" : "sm_80", pre, f};
      cases.push_back(m);
      ++i;
    }
  for (const auto& c : cases) compile_module(c);
}

TEST_CASE("whole modules compile: inference, no dropout, tanh GELU, intermediate != 4H, stochastic mode") {
  using enum DType;
  const ModuleCase cases[] = {
      // Inference: forward kernels only, dropout compiled out.
      {.hidden = 1024, .heads = 16, .seq = 128, .dtype = F16, .arch = "sm_80", .training = false},
      {.hidden = 1024, .heads = 16, .seq = 128, .dtype = BF16, .arch = "sm_90", .pre_ln = false, .flags = kAllFlags,
       .training = false},
      // No dropout at all (the flags stay legal), attention dropout off (no recompute kernel), hidden off.
      {.hidden = 1024, .heads = 16, .seq = 128, .dtype = F32, .arch = "sm_80", .flags = kAllFlags, .attn_drop = 0,
       .hidden_drop = 0},
      {.hidden = 1024, .heads = 16, .seq = 128, .dtype = F16, .arch = "sm_90", .pre_ln = false, .flags = kAttnCkpt,
       .attn_drop = 0},
      {.hidden = 1024, .heads = 16, .seq = 128, .dtype = BF16, .arch = "sm_80", .hidden_drop = 0},
      // tanh GELU (also in the recompute kernel); large ratios.
      {.hidden = 1024, .heads = 16, .seq = 128, .dtype = F16, .arch = "sm_90", .flags = kGeluCkpt, .tanh = true},
      {.hidden = 1024, .heads = 16, .seq = 128, .dtype = BF16, .arch = "sm_80", .pre_ln = false, .attn_drop = 0.5,
       .hidden_drop = 0.9, .tanh = true},
      // I != 4H: still 8-wide, 2-wide vectors, odd (scalar access).
      {.hidden = 1024, .heads = 16, .seq = 128, .dtype = F16, .arch = "sm_90", .inter = 3072,
       .linear_gemm = LinearGemm::Sm90},
      {.hidden = 1024, .heads = 16, .seq = 128, .dtype = F16, .arch = "sm_80", .flags = kGeluCkpt, .inter = 1030},
      {.hidden = 1024, .heads = 16, .seq = 128, .dtype = F32, .arch = "sm_90", .pre_ln = false, .inter = 1025},
      // stochastic_mode (the dQ GEMM, autotuned GEMMs at run time) and its single-pass attention
      // backward (DSKC_ATTN_DQ=atomic: attn_flash_bwd_dkdvdq) at head dims 16, 32, 80, 128, both archs, bf16, without attention dropout and with attn_dropout_checkpoint
      // (attn_dropout_bits_bwd before it) or DSKC_ATTN_MASK=kernel.
      {.hidden = 1024, .heads = 16, .seq = 128, .dtype = F16, .arch = "sm_90", .stochastic = true},
      // The wgmma dK/dV kernel with two warpgroups per block (DSKC_ATTN_BWD=wgmma2), fp16 / bf16, and
      // the mma.sync one on sm_90 (DSKC_ATTN_BWD=sync).
      {.hidden = 1024, .heads = 16, .seq = 128, .dtype = F16, .arch = "sm_90", .attn_bwd = AttnBwd::Wgmma2},
      {.hidden = 768, .heads = 12, .seq = 512, .dtype = BF16, .arch = "sm_90", .flags = kAllFlags,
       .attn_bwd = AttnBwd::Wgmma2},
      {.hidden = 1024, .heads = 16, .seq = 128, .dtype = F16, .arch = "sm_90", .attn_bwd = AttnBwd::Sync},
      // DSKC_ATTN_DQ=fused: dQ in the wgmma dK/dV kernel, clusters of two blocks (S <= 128), one block
      // (S <= 64) or blocks of two warpgroups (wgmma2), fp16 / bf16, every memory flag, Post-LN, no
      // attention dropout.
      {.hidden = 1024, .heads = 16, .seq = 128, .dtype = F16, .arch = "sm_90", .dq_fused = true},
      {.hidden = 768, .heads = 12, .seq = 100, .dtype = BF16, .arch = "sm_90", .pre_ln = false, .flags = kAllFlags,
       .dq_fused = true},
      {.hidden = 256, .heads = 4, .seq = 64, .dtype = F16, .arch = "sm_90", .attn_drop = 0, .dq_fused = true},
      {.hidden = 1024, .heads = 16, .seq = 128, .dtype = BF16, .arch = "sm_90", .dq_fused = true,
       .attn_bwd = AttnBwd::Wgmma2},
      // DSKC_OUTPUT_GEMM=fused (the output GEMM's residual epilogue, setmaxnreg): fp16 / bf16, with and
      // without hidden dropout, inference, BERT-Base width.
      {.hidden = 1024, .heads = 16, .seq = 128, .dtype = F16, .arch = "sm_90", .output_gemm = OutputGemm::Fused,
       .linear_gemm = LinearGemm::Sm90},
      {.hidden = 768, .heads = 12, .seq = 512, .dtype = BF16, .arch = "sm_90", .flags = kAllFlags, .hidden_drop = 0,
       .output_gemm = OutputGemm::Fused, .linear_gemm = LinearGemm::Sm90},
      {.hidden = 1024, .heads = 16, .seq = 128, .dtype = BF16, .arch = "sm_90", .training = false,
       .output_gemm = OutputGemm::Fused, .linear_gemm = LinearGemm::Sm90},
      // DSKC_DGRAD_GEMM=sm90 (the data gradients' kPlain gemm_sm90 kernels and weight transposes):
      // fp16 BERT-Large Pre-LN, bf16 BERT-Base Post-LN with all flags.
      {.hidden = 1024, .heads = 16, .seq = 128, .dtype = F16, .arch = "sm_90", .dgrad_gemm = DgradGemm::Sm90},
      {.hidden = 768, .heads = 12, .seq = 512, .dtype = BF16, .arch = "sm_90", .pre_ln = false, .flags = kAllFlags,
       .dgrad_gemm = DgradGemm::Sm90},
      // The wgmma forward (keep flags from attn_dropout_bits_fwd): two stages (the default) and three,
      // fp16 / bf16, the longest rows (an 8 KB key mask), and the mma.sync forward there (DSKC_ATTN_FWD=sync).
      {.hidden = 1024, .heads = 16, .seq = 128, .dtype = F16, .arch = "sm_90", .mask_kernel = true},
      {.hidden = 768, .heads = 12, .seq = 512, .dtype = BF16, .arch = "sm_90", .pre_ln = false, .flags = kAllFlags,
       .mask_kernel = true, .attn_fwd = AttnFwd::Wgmma3},
      {.hidden = 1024, .heads = 16, .seq = 2048, .dtype = BF16, .arch = "sm_90", .mask_kernel = true},
      {.hidden = 1024, .heads = 16, .seq = 128, .dtype = F16, .arch = "sm_90", .mask_kernel = true,
       .attn_fwd = AttnFwd::Sync},
      {.hidden = 1024, .heads = 16, .seq = 128, .dtype = BF16, .arch = "sm_80", .pre_ln = false, .stochastic = true,
       .dq_atomic = true},
      {.hidden = 1024, .heads = 8, .seq = 512, .dtype = F16, .arch = "sm_80", .flags = kAttnCkpt, .stochastic = true,
       .dq_atomic = true},
      {.hidden = 1024, .heads = 8, .seq = 381, .dtype = BF16, .arch = "sm_90", .attn_drop = 0, .stochastic = true,
       .dq_atomic = true},
      {.hidden = 256, .heads = 16, .seq = 33, .dtype = F16, .arch = "sm_90", .flags = kAllFlags, .stochastic = true,
       .dq_atomic = true},
      {.hidden = 1024, .heads = 32, .seq = 51, .dtype = BF16, .arch = "sm_80", .stochastic = true, .mask_kernel = true,
       .dq_atomic = true},
      {.hidden = 2560, .heads = 32, .seq = 127, .dtype = F16, .arch = "sm_90", .flags = kGeluCkpt, .stochastic = true,
       .dq_atomic = true},
      // The per-query-tile dQ kernel (DSKC_ATTN_DQ=kernel) at head dims 64, 128 and 16, odd S.
      {.hidden = 1024, .heads = 16, .seq = 128, .dtype = F16, .arch = "sm_90", .dq_kernel = true},
      {.hidden = 1024, .heads = 8, .seq = 381, .dtype = BF16, .arch = "sm_80", .flags = kAttnCkpt, .dq_kernel = true},
      {.hidden = 256, .heads = 16, .seq = 33, .dtype = F16, .arch = "sm_90", .pre_ln = false, .dq_kernel = true},
      // The unfused attention path of layers that would fuse (DSKC_ATTENTION=unfused).
      {.hidden = 1024, .heads = 16, .seq = 128, .dtype = F16, .arch = "sm_80", .flags = kAttnCkpt, .unfused = true},
      {.hidden = 2560, .heads = 20, .seq = 509, .dtype = BF16, .arch = "sm_90", .pre_ln = false, .unfused = true},
      // Fused attention without attention dropout, in inference, and at head dim 128 / 16.
      {.hidden = 1024, .heads = 8, .seq = 512, .dtype = BF16, .arch = "sm_90", .attn_drop = 0},
      {.hidden = 2560, .heads = 20, .seq = 7, .dtype = F16, .arch = "sm_80", .training = false},
      {.hidden = 256, .heads = 16, .seq = 33, .dtype = F16, .arch = "sm_90", .flags = kAllFlags},
      // Fused attention dropout keep bits saved by the forward and read by the backward (no
      // attn_dropout_checkpoint) at head dims 128 and 16 on the other arch than above.
      {.hidden = 1024, .heads = 8, .seq = 381, .dtype = F16, .arch = "sm_90"},
      {.hidden = 256, .heads = 16, .seq = 33, .dtype = BF16, .arch = "sm_80", .pre_ln = false},
      // DSKC_ATTN_MASK=kernel: attn_dropout_bits_fwd and the forward reading the bits, with the keep
      // bits saved (d 64, 32) and with attn_dropout_checkpoint (both bits kernels; d 128).
      {.hidden = 1024, .heads = 16, .seq = 128, .dtype = F16, .arch = "sm_90", .mask_kernel = true},
      {.hidden = 256, .heads = 8, .seq = 33, .dtype = BF16, .arch = "sm_80", .pre_ln = false, .mask_kernel = true},
      {.hidden = 1024, .heads = 8, .seq = 381, .dtype = F16, .arch = "sm_80", .flags = kAttnCkpt, .mask_kernel = true},
  };
  for (const auto& c : cases) compile_module(c);
}

// DSKC_GEMM_TILES=dynamic: gemm_sm90's producer takes each tile from a global counter; every epilogue
// (the FFN's GELU GEMMs with and without gelu_checkpoint, the forward's linear GEMMs, the data
// gradients on weights read N-major) builds for sm_90 with it, and the config says which schedule.
TEST_CASE("whole modules compile with gemm_sm90's dynamic tile schedule (DSKC_GEMM_TILES=dynamic)") {
  using enum DType;
  {
    const dskc_test::ScopedEnv unset("DSKC_GEMM_TILES", nullptr);
    LayerPlan p = make_plan(bert_large(), PlanOptions{.arch = "sm_90"});
    CHECK_FALSE(p.gemm_dynamic_tiles);
    CHECK(emit_config_header(p).find("constexpr bool kGemmDynamicTiles = false;") != std::string::npos);
  }
  for (const char* bad : {"1", "stream-k", "Dynamic"})
    check_env_error("DSKC_GEMM_TILES", bad, "static", "dynamic", [] { gemm_dynamic_tiles_from_env(); });
  const dskc_test::ScopedEnv env("DSKC_GEMM_TILES", "dynamic");
  const LayerPlan p = make_plan(bert_large(), PlanOptions{.arch = "sm_90"});
  CHECK(p.gemm_dynamic_tiles);
  CHECK(emit_config_header(p).find("constexpr bool kGemmDynamicTiles = true;") != std::string::npos);
  const ModuleCase cases[] = {
      {.hidden = 1024, .heads = 16, .seq = 128, .dtype = F16, .arch = "sm_90"},
      {.hidden = 1024, .heads = 16, .seq = 512, .dtype = BF16, .arch = "sm_90", .flags = kAllFlags},
      {.hidden = 768, .heads = 12, .seq = 128, .dtype = F16, .arch = "sm_90", .pre_ln = false,
       .dgrad_gemm = DgradGemm::Sm90, .linear_gemm = LinearGemm::Sm90},
  };
  for (const auto& c : cases) compile_module(c);
}

TEST_CASE("whole modules compile with attn_flash_fwd's two K/V buffers (DSKC_ATTN_FWD_STAGES=2), head dims 16..128") {
  constexpr DType F16 = DType::F16, BF16 = DType::BF16;
  const ModuleCase cases[] = {
      // BERT-Large (d 64) with the bits kernel's mask, both arches; attn_dropout_checkpoint.
      {.hidden = 1024, .heads = 16, .seq = 128, .dtype = F16, .arch = "sm_90", .mask_kernel = true, .fwd_stages = 2},
      {.hidden = 1024, .heads = 16, .seq = 512, .dtype = BF16, .arch = "sm_80", .flags = kAttnCkpt, .mask_kernel = true,
       .fwd_stages = 2},
      // d 16, 32 (64-key tiles), 80, 96 (32-key tiles); no attention dropout; inference.
      {.hidden = 256, .heads = 16, .seq = 33, .dtype = F16, .arch = "sm_90", .mask_kernel = true, .fwd_stages = 2},
      {.hidden = 256, .heads = 8, .seq = 509, .dtype = BF16, .arch = "sm_80", .pre_ln = false, .mask_kernel = true,
       .fwd_stages = 2},
      {.hidden = 2560, .heads = 32, .seq = 381, .dtype = BF16, .arch = "sm_90", .mask_kernel = true, .fwd_stages = 2},
      {.hidden = 768, .heads = 8, .seq = 128, .dtype = F16, .arch = "sm_80", .attn_drop = 0, .fwd_stages = 2},
      {.hidden = 1024, .heads = 16, .seq = 7, .dtype = F16, .arch = "sm_90", .training = false, .fwd_stages = 2},
      // Where two do not fit the plan keeps one: d 128; the byte flags of DSKC_ATTN_MASK=inline.
      {.hidden = 1024, .heads = 8, .seq = 200, .dtype = F16, .arch = "sm_90", .mask_kernel = true, .fwd_stages = 2},
      {.hidden = 1024, .heads = 16, .seq = 128, .dtype = F16, .arch = "sm_90", .fwd_stages = 2},
  };
  for (const auto& c : cases) compile_module(c);
}

// DSKC_ATTN_STORE (LayerPlan::attn_tma_stores, kAttnTmaStores): the wgmma attention kernels store
// their output tiles by TMA (default) or by 4-byte stores (rows); both forms compile, without spills,
// for the kernels' shapes (one and two warpgroups, the fused dQ in clusters, the dQ GEMM path, bf16).
TEST_CASE("DSKC_ATTN_BWD_PERSIST: the clustered fused-dQ attention backward as a persistent kernel whose clusters walk "
          "the heads") {
  const LayerConfig c = bert_large();
  auto plan_with = [](const LayerConfig& cfg, int max_seq, AttnBwdPersist persist, AttnDq dq = AttnDq::Fused,
                      AttnBwd bwd = AttnBwd::Wgmma, const std::string& arch = "sm_90") {
    LayerConfig x = cfg;
    x.max_seq_length = max_seq;
    PlanOptions o = fused_options(arch);
    o.attn_mask = AttnMask::LayerNorm;
    o.attn_dq = dq;
    o.attn_bwd = bwd;
    o.attn_bwd_persist = persist;
    return make_plan(x, o);
  };
  for (const int max_seq : {65, 100, 128}) {
    CAPTURE(max_seq);
    const LayerPlan on = plan_with(c, max_seq, AttnBwdPersist::On), off = plan_with(c, max_seq, AttnBwdPersist::Off);
    REQUIRE(off.attn_bwd_cluster == 2);
    REQUIRE(off.attn_dot_in_dkdv);
    CHECK_FALSE(off.attn_bwd_persist);
    CHECK(on.attn_bwd_persist);
    // Only the dK/dV kernel differs: the same kernels in the same order, the same memory.
    CHECK(kernel_names(on) == kernel_names(off));
    CHECK(on.activation_bytes() == off.activation_bytes());
    CHECK(on.workspace_bytes(c.batch_size, max_seq) == off.workspace_bytes(c.batch_size, max_seq));
    const KernelInfo* k = on.find_kernel("attn_flash_bwd_dkdv");
    const KernelInfo* g = off.find_kernel("attn_flash_bwd_dkdv");
    REQUIRE(k);
    REQUIRE(g);
    CHECK(k->instantiation == "attn_flash_bwd_wgmma_persist_impl<T, kAttnDropoutOn>");
    CHECK(k->op == "attn_flash_bwd_wgmma");
    CHECK(k->grid == GridKind::FlashHeads);
    CHECK(g->grid == GridKind::FlashTiles);
    CHECK(k->cluster == 2);
    CHECK(k->block == 128);
    CHECK(k->rows_per_block == 64);
    CHECK(k->min_blocks == "FlashWgBwdPersistTile::kMinBlocks");
    CHECK(k->smem_check == "FlashWgBwdPersistTile::smem_bytes");
    CHECK(k->dynamic_smem == flash_wg_bwd_persist_smem_bytes());
    CHECK(k->fuses.find("persistent: each cluster walks heads") != std::string::npos);
    const std::string src = emit(on).source;
    CHECK(src.find("DSKC_CLUSTER_DIMS(2) attn_flash_bwd_dkdv(") != std::string::npos);
    CHECK(src.find("grid = 2 · min(B·heads, resident clusters)") != std::string::npos);
  }
  // Two K/V buffers, two stages and the share slot that doubles as the dQ tile: two blocks still fit
  // on an SM (the per-head form's third stage and separate share slot are gone).
  CHECK(flash_wg_bwd_persist_smem_bytes() == 1024 + 10 * 8192 + 64 * 64 * 4 + 2 * 1024 + 32);
  CHECK(2 * (flash_wg_bwd_persist_smem_bytes() + 1024) <= 228 * 1024);
  // Elsewhere the switch changes nothing: one key half (max_seq <= 64), the ring or the dQ GEMM above
  // 128 keys, two warpgroups per block, the dQ GEMM asked for, other archs.
  const std::pair<int, AttnDq> same[] = {{64, AttnDq::Fused}, {200, AttnDq::Fused}, {256, AttnDq::Ring}, {128, AttnDq::Gemm}};
  for (const auto& [max_seq, dq] : same) {
    CAPTURE(max_seq);
    const LayerPlan on = plan_with(c, max_seq, AttnBwdPersist::On, dq);
    CHECK_FALSE(on.attn_bwd_persist);
    CHECK(on.find_kernel("attn_flash_bwd_dkdv")->instantiation ==
          plan_with(c, max_seq, AttnBwdPersist::Off, dq).find_kernel("attn_flash_bwd_dkdv")->instantiation);
  }
  CHECK_FALSE(plan_with(c, 128, AttnBwdPersist::On, AttnDq::Fused, AttnBwd::Wgmma2).attn_bwd_persist);
  CHECK_FALSE(plan_with(c, 128, AttnBwdPersist::On, AttnDq::Fused, AttnBwd::Sync).attn_bwd_persist);
  CHECK_FALSE(plan_with(c, 128, AttnBwdPersist::On, AttnDq::Fused, AttnBwd::Wgmma, "sm_80").attn_bwd_persist);
  // The switch: on by default; "off"; a cluster count (on, at most that many clusters).
  {
    const dskc_test::ScopedEnv env("DSKC_ATTN_BWD_PERSIST", nullptr);
    CHECK(attn_bwd_persist_from_env() == -1);
    CHECK(plan_with(c, 128, AttnBwdPersist::FromEnvironment).attn_bwd_persist);
  }
  const std::pair<const char*, int> words[] = {{"", -1}, {"off", 0}, {"on", -1}, {"1", 1}, {"3", 3}, {"1048576", 1048576}};
  for (const auto& [v, want] : words) {
    CAPTURE(v);
    const dskc_test::ScopedEnv env("DSKC_ATTN_BWD_PERSIST", v);
    CHECK(attn_bwd_persist_from_env() == want);
    CHECK(plan_with(c, 128, AttnBwdPersist::FromEnvironment).attn_bwd_persist == (want != 0));
  }
  for (const char* bad : {"ON", "0", "-1", "1x", "1048577", "99999999", "yes"})
    check_env_error("DSKC_ATTN_BWD_PERSIST", bad, "off", "on", [] { attn_bwd_persist_from_env(); });
  // Compiled through NVRTC for sm_90a: dropout and attn_dropout_checkpoint, none, fp16 and bf16, Pre- and Post-LN.
  constexpr DType F16 = DType::F16, BF16 = DType::BF16;
  const ModuleCase cases[] = {
      {.hidden = 1024, .heads = 16, .seq = 128, .dtype = F16, .arch = "sm_90", .mask_kernel = true, .dq_fused = true,
       .attn_bwd_persist = AttnBwdPersist::On},
      {.hidden = 256, .heads = 4, .seq = 100, .dtype = BF16, .arch = "sm_90", .flags = kAttnCkpt, .mask_kernel = true,
       .dq_fused = true, .attn_bwd_persist = AttnBwdPersist::On},
      {.hidden = 256, .heads = 4, .seq = 128, .dtype = F16, .arch = "sm_90", .pre_ln = false, .attn_drop = 0.0,
       .mask_kernel = true, .dq_fused = true, .attn_bwd_persist = AttnBwdPersist::On},
  };
  for (const auto& mc : cases) compile_module(mc);
}

TEST_CASE("DSKC_ATTN_STORE: TMA output stores of the wgmma attention kernels (default) or 4-byte stores") {
  const LayerConfig c = bert_large();
  const LayerPlan def = sm90_plan(c);
  CHECK(def.attn_tma_stores);
  CHECK(emit_config_header(def).find("constexpr bool kAttnTmaStores = true;") != std::string::npos);
  {
    const dskc_test::ScopedEnv env("DSKC_ATTN_STORE", "rows");
    const LayerPlan rows = sm90_plan(c);
    CHECK_FALSE(rows.attn_tma_stores);
    CHECK(emit_config_header(rows).find("constexpr bool kAttnTmaStores = false;") != std::string::npos);
    // Only the constant differs: the kernels, their launch shapes and memory are the same.
    REQUIRE(rows.kernels.size() == def.kernels.size());
    for (size_t i = 0; i < rows.kernels.size(); ++i) {
      CHECK(rows.kernels[i].name == def.kernels[i].name);
      CHECK(rows.kernels[i].dynamic_smem == def.kernels[i].dynamic_smem);
    }
    CHECK(rows.activation_bytes() == def.activation_bytes());
  }
  {
    const dskc_test::ScopedEnv env("DSKC_ATTN_STORE", "tma");
    CHECK(sm90_plan(c).attn_tma_stores);
  }
  for (const char* bad : {"TMA", "row", "1"})
    check_env_error("DSKC_ATTN_STORE", bad, "tma", "rows", [] { attn_store_from_env(); });
  constexpr DType F16 = DType::F16, BF16 = DType::BF16;
  for (const AttnStore st : {AttnStore::Tma, AttnStore::Rows}) {
    const ModuleCase cases[] = {
        {.hidden = 1024, .heads = 16, .seq = 128, .dtype = F16, .arch = "sm_90", .mask_kernel = true, .dq_fused = true,
         .attn_store = st},
        {.hidden = 256, .heads = 4, .seq = 128, .dtype = BF16, .arch = "sm_90", .mask_kernel = true, .dq_fused = true,
         .attn_bwd = AttnBwd::Wgmma2, .attn_store = st},
        {.hidden = 1024, .heads = 16, .seq = 512, .dtype = BF16, .arch = "sm_90", .flags = kAttnCkpt,
         .mask_kernel = true, .attn_store = st},
        {.hidden = 256, .heads = 4, .seq = 200, .dtype = F16, .arch = "sm_90", .mask_kernel = true,
         .attn_bwd = AttnBwd::Wgmma2, .attn_store = st},
        // The ring of cluster blocks (DSKC_ATTN_DQ=ring): 8, 4 and 3 blocks.
        {.hidden = 1024, .heads = 16, .seq = 512, .dtype = F16, .arch = "sm_90", .mask_kernel = true, .dq_ring = true,
         .attn_store = st},
        {.hidden = 256, .heads = 4, .seq = 256, .dtype = BF16, .arch = "sm_90", .flags = kAttnCkpt,
         .mask_kernel = true, .dq_ring = true, .attn_store = st},
        {.hidden = 256, .heads = 4, .seq = 150, .dtype = F16, .arch = "sm_90", .attn_drop = 0.0, .mask_kernel = true,
         .dq_ring = true, .attn_store = st},
    };
    for (const auto& mc : cases) compile_module(mc);
  }
}
