// GPU layer vs the double-precision CPU reference: output, grad_input and every parameter
// gradient over a sweep of shapes that break assumptions (odd sequence lengths, head dims 8..128,
// hidden sizes that are not powers of two, intermediate != 4H, batch below the maximum, a random
// additive mask), both LayerNorm placements, fp32/fp16/bf16, with and without dropout (the same
// counter-RNG masks on both sides). fp16/bf16 layers with head dim % 16 == 0 (<= 128) run the fused
// attention kernels (attn_flash_*); the cases below cover head dims 16/32/64/80/128, seq
// 1/7/33/127/381/509, attention dropout on and off (the backward reading the keep bits the forward
// saves, or that attn_dropout_bits_bwd rewrites under attn_dropout_checkpoint; the forward drawing the
// mask or, with DSKC_ATTN_MASK=kernel, reading the bits attn_dropout_bits_fwd writes), masks, the
// forced-unfused path of a layer that would fuse, and stochastic_mode (single-pass attention backward
// attn_flash_bwd_dkdvdq, dQ by fp32 atomics; autotuned GEMMs) under the same limits. Tolerance
// (STYLE.md): for fp16/bf16 the GPU's normwise error must be at most ~2x that of a plain
// same-precision implementation (the CPU reference rounding every stored tensor to the dtype);
// fp32 must be within 1e-5 relative.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>
#include <vector>

#include "compiler/nvrtc_compile.h"
#include "compiler/plan.h"
#include "compiler/templates.h"
#include "runtime/driver.h"
#include "gpu_util.h"
#include "test_util.h"
#include "runtime/context.h"
#include "runtime/cpu_ops.h"
#include "runtime/cpu_reference.h"
#include "runtime/host_float.h"
#include "runtime/host_tensor.h"
#include "runtime/layer_params.h"
#include "runtime/transformer_layer.h"

using namespace dskc;
using dskc_test::compare;

namespace {

LayerConfig make_cfg(int B, int S, int H, int heads, int I, DType t, bool pre, double attn_p, double hid_p) {
  LayerConfig c;
  c.batch_size = B;
  c.max_seq_length = S;
  c.hidden_size = H;
  c.heads = heads;
  c.intermediate_size = I;
  c.attn_dropout_ratio = attn_p;
  c.hidden_dropout_ratio = hid_p;
  c.num_hidden_layers = 4;
  c.initializer_range = 0.02;
  c.seed = 1234;
  c.fp16 = t == DType::F16;
  c.bf16 = t == DType::BF16;
  c.pre_layer_norm = pre;
  return c;
}

std::vector<double> rounded(const std::vector<float>& v, DType t) {
  std::vector<double> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = round_to_dtype(v[i], t);
  return out;
}

// Parameters with non-trivial LayerNorm weights and biases (the default init has 1 and 0), rounded
// to the layer's dtype (what the GPU stores, so the CPU reference sees the same values).
std::map<std::string, std::vector<float>> test_params(const LayerConfig& c, uint64_t seed) {
  auto p = init_layer_params(c, seed);
  int k = 0;
  for (auto& [name, v] : p) {
    ++k;
    if (name == "attn_nw" || name == "norm_w") v = dskc_test::randn(v.size(), seed + k, 0.2f, 1.f);
    if (name.size() > 1 && name.back() == 'b') v = dskc_test::randn(v.size(), seed + k, 0.1f);
    if (name.find("_w") != std::string::npos && name != "attn_nw" && name != "norm_w")
      v = dskc_test::randn(v.size(), seed + k, 1.f / std::sqrt(static_cast<float>(c.hidden_size)));
  }
  p["attn_qkvw"] = dskc_test::randn(p["attn_qkvw"].size(), seed + 99, 1.f / std::sqrt(static_cast<float>(c.hidden_size)));
  for (auto& [name, v] : p)
    for (auto& e : v) e = static_cast<float>(round_to_dtype(e, c.dtype()));
  return p;
}

struct GpuResult {
  std::vector<float> output, grad_input;
  std::map<std::string, std::vector<float>> grads;
  std::map<std::string, std::vector<float>> tensors;  // run_gpu's `read` list
};
// The FFN tensors gemm_sm90 writes: h or GELU'(h), and GELU(h) (saved), dh (workspace grad_inter).
// A name ending in '?' is read where the plan has it (LayerPlan::gelu_grad_saved keeps ffn_gelu_grad
// in ffn_pre_gelu's place).
const std::vector<std::string> kFfnTensors = {"ffn_pre_gelu?", "ffn_gelu_grad?", "ffn_gelu_out", "grad_inter"};
bool optional_read(const std::string& name) { return !name.empty() && name.back() == '?'; }
std::string read_name(const std::string& name) { return optional_read(name) ? name.substr(0, name.size() - 1) : name; }

struct Inputs {
  std::vector<float> x, mask, dy;
};

Inputs make_inputs(const LayerConfig& c, int B, int S, bool mask, uint64_t seed) {
  Inputs in;
  in.x = dskc_test::randn(static_cast<size_t>(B) * S * c.hidden_size, seed);
  in.dy = dskc_test::randn(in.x.size(), seed + 1);
  in.mask.assign(static_cast<size_t>(B) * S, 0.f);
  if (mask) {
    std::mt19937 g(static_cast<uint32_t>(seed));
    for (int b = 0; b < B; ++b) {
      int keep = 1 + static_cast<int>(g() % S);  // keep a prefix, drop the rest (padding)
      for (int s = keep; s < S; ++s) in.mask[static_cast<size_t>(b) * S + s] = -10000.f;
    }
  }
  for (auto* v : {&in.x, &in.dy, &in.mask})
    for (auto& e : *v) e = static_cast<float>(round_to_dtype(e, c.dtype()));
  return in;
}

// `read`: plan tensors to return, every byte set to 0xFF (NaN in fp16 and bf16)
// before the pass that writes them (saved tensors before forward, workspace before backward), so
// an element the layer does not write shows up as NaN. A name ending in '?' is optional: returned
// (without the '?') only where the plan has it.
GpuResult run_gpu(Context& ctx, const LayerConfig& c, const std::map<std::string, std::vector<float>>& params,
                  const Inputs& in, int B, int S, uint32_t step, AttentionPath path, bool backward = true,
                  const std::vector<std::string>& read = {}) {
  LayerOptions opt;
  opt.attention = path;
  TransformerLayer layer(ctx, c, opt);
  std::printf("attention path: %s; FFN GELU GEMMs: %s\n", layer.plan().fused_attention ? "fused (attn_flash_*)" : "unfused",
              layer.plan().ffn_gemm_sm90 ? "gemm_sm90" : "cuBLASLt");
  layer.set_params(params);
  const DType t = c.dtype();
  const size_t n = in.x.size(), eb = dtype_bytes(t);
  // A plan tensor (saved or workspace) by name; nullptr where the plan has none.
  auto find_tensor = [&](const std::string& name) -> const TensorInfo* {
    if (const TensorInfo* s = layer.plan().find_saved(name)) return s;
    for (const auto& w : layer.plan().workspace)
      if (w.name == name) return &w;
    return nullptr;
  };
  // A `read` tensor's bytes at (B, S).
  auto bytes_of = [&](const std::string& name) -> size_t {
    if (const TensorInfo* info = find_tensor(name)) return static_cast<size_t>(info->bytes(B, S));
    FAIL("no plan tensor " << name);
    return 0;
  };
  std::vector<std::string> names;  // `read` without the optional names the plan lacks
  for (const auto& name : read)
    if (!optional_read(name) || find_tensor(read_name(name))) names.push_back(read_name(name));
  auto poison = [&](bool saved) {
    for (const auto& name : names)
      if ((layer.plan().find_saved(name) != nullptr) == saved)
        DSKC_CU(cuMemsetD8Async(layer.tensor(name), 0xFF, bytes_of(name), ctx.stream()));
  };
  DeviceBuffer x(ctx, n * eb), y(ctx, n * eb), m(ctx, in.mask.size() * eb), dy(ctx, n * eb), dx(ctx, n * eb);
  upload(ctx, x.ptr(), in.x, t);
  upload(ctx, m.ptr(), in.mask, t);
  upload(ctx, dy.ptr(), in.dy, t);
  if (c.training) poison(true);
  layer.forward(x.ptr(), m.ptr(), y.ptr(), B, S, step);
  GpuResult r;
  if (backward && c.training) {
    poison(false);
    layer.backward(dy.ptr(), dx.ptr());
    r.grad_input = download(ctx, dx.ptr(), n, t);
    r.grads = layer.get_grads();
  }
  r.output = download(ctx, y.ptr(), n, t);
  for (const auto& name : names) r.tensors[name] = download(ctx, layer.tensor(name), bytes_of(name) / eb, t);
  return r;
}

// Two runs of one layer on the same inputs bitwise equal: the named `tensors` (read by both), the
// output and, in training, the input gradient and every parameter gradient.
void check_bitwise(const GpuResult& got, const GpuResult& want, const std::vector<std::string>& tensors = {},
                   bool training = true) {
  for (const auto& name : tensors) {
    REQUIRE_MESSAGE((got.tensors.count(name) && want.tensors.count(name)), name << " not read");
    CHECK_MESSAGE(got.tensors.at(name) == want.tensors.at(name), name);
  }
  CHECK(got.output == want.output);
  if (!training) return;
  CHECK(got.grad_input == want.grad_input);
  REQUIRE(got.grads.size() == want.grads.size());
  for (const auto& [name, v] : want.grads) CHECK_MESSAGE(got.grads.at(name) == v, name);
}

// A gemm_sm90 path (`got`) against the cuBLASLt path (`want`) on the same inputs: the `read` tensors
// within fp16/bf16 rounding of each other, the layer output and (training) every gradient within a
// few roundings (the products differ only in fp32 summation order).
// (read_after: the read tensors come after other gemm_sm90 products, so they get the layer's limit.)
// Where `got` kept GELU'(h) (ffn_gelu_grad) and `want` h (ffn_pre_gelu), the first is checked against
// GELU' (of the layer's form) of the second, in double.
void check_sm90_agrees(const GpuResult& got, const GpuResult& want, const std::vector<std::string>& read, DType t,
                       bool training, bool read_after = false, GeluForm form = GeluForm::Erf) {
  const double layer = t == DType::F16 ? 4e-3 : 2e-2, direct = read_after ? layer : t == DType::F16 ? 1e-3 : 8e-3;
  auto agree = [&](const std::string& what, const std::vector<float>& g, const std::vector<float>& w, double limit) {
    const auto e = compare(g, std::vector<double>(w.begin(), w.end()));
    std::printf("  %-22s rel %.3g  max abs %.3g at %zu (%g vs %g)\n", what.c_str(), e.rel, e.max_abs, e.index,
                e.at_value, e.at_ref);
    CHECK_MESSAGE(e.rel <= limit, what << ": gemm_sm90 vs cuBLASLt " << e.rel << " above " << limit);
  };
  for (const auto& [name, v] : got.tensors)
    if (want.tensors.count(name)) agree(name, v, want.tensors.at(name), direct);
  for (const auto& name : read)
    CHECK_MESSAGE((got.tensors.count(read_name(name)) || optional_read(name)), read_name(name) << " not read");
  if (got.tensors.count("ffn_gelu_grad") && want.tensors.count("ffn_pre_gelu")) {
    std::vector<float> grad;
    for (float h : want.tensors.at("ffn_pre_gelu")) grad.push_back(static_cast<float>(cpu_ops::gelu_grad(h, form)));
    agree("ffn_gelu_grad vs GELU'(h)", got.tensors.at("ffn_gelu_grad"), grad, direct);
  }
  agree("output", got.output, want.output, layer);
  if (!training) return;
  agree("grad_input", got.grad_input, want.grad_input, layer);
  for (const auto& [name, v] : want.grads) agree("grad_" + name, got.grads.at(name), v, layer);
}

// Runs one case and checks every tensor.
void check_case(const std::string& name, const LayerConfig& c, int B, int S, bool mask,
                AttentionPath path = AttentionPath::FusedWhereSupported) {
  INFO("case " << name << ": B=" << B << " S=" << S << " H=" << c.hidden_size << " heads=" << c.heads
               << " I=" << c.intermediate_size << " " << dtype_name(c.dtype()) << (c.pre_layer_norm ? " Pre-LN" : " Post-LN"));
  Context ctx;
  const auto params = test_params(c, 7);
  const DType t = c.dtype();
  Inputs in = make_inputs(c, B, S, mask, 11);
  const uint32_t step = 3;
  GpuResult g = run_gpu(ctx, c, params, in, B, S, step, path);

  CpuReferenceLayer::Tensors dparams;
  for (auto& [k, v] : params) dparams[k] = std::vector<double>(v.begin(), v.end());
  std::vector<double> xd(in.x.begin(), in.x.end()), md(in.mask.begin(), in.mask.end()), dyd(in.dy.begin(), in.dy.end());
  CpuReferenceLayer exact(c, 0, DType::F32), plain(c, 0, t);
  auto out_exact = exact.forward(xd, &md, B, S, step, dparams);
  auto out_plain = plain.forward(xd, &md, B, S, step, dparams);
  auto gr_exact = exact.backward(dyd);
  auto gr_plain = plain.backward(dyd);

  auto check = [&](const std::string& what, const std::vector<float>& gpu, const std::vector<double>& ex,
                   const std::vector<double>& pl) {
    auto eg = compare(gpu, ex);
    auto ep = compare(pl, ex);
    const double limit = t == DType::F32 ? 1e-5 : 2.0 * ep.rel + 1e-6;
    std::printf("%s\n", dskc_test::describe(what, eg, ep).c_str());
    CHECK_MESSAGE(eg.rel <= limit, what << ": GPU error " << eg.rel << " above limit " << limit);
  };
  check("output", g.output, out_exact, out_plain);
  check("grad_input", g.grad_input, gr_exact.at("grad_input"), gr_plain.at("grad_input"));
  for (const auto& [pname, v] : g.grads) check("grad_" + pname, v, gr_exact.at("grad_" + pname), gr_plain.at("grad_" + pname));
}

}  // namespace

TEST_CASE("fp32 Pre-LN, tiny, no dropout, batch below max, odd seq") {
  dskc_test::require_gpu();
  check_case("fp32-pre", make_cfg(3, 16, 64, 4, 128, DType::F32, true, 0, 0), 2, 7, true);
}

TEST_CASE("fp32 Post-LN, hidden 160 (head dim 80), dropout, seq 51") {
  dskc_test::require_gpu();
  check_case("fp32-post", make_cfg(4, 64, 160, 2, 600, DType::F32, false, 0.1, 0.1), 3, 51, true);
}

TEST_CASE("fp16 Pre-LN BERT-Large width, dropout, seq 127") {
  dskc_test::require_gpu();
  check_case("fp16-large", make_cfg(2, 128, 1024, 16, 4096, DType::F16, true, 0.1, 0.1), 2, 127, true);
}

TEST_CASE("fp16 Pre-LN BERT-Large width, tanh GELU in cuBLASLt's epilogues, seq 127") {
  dskc_test::require_gpu();
  const dskc_test::ScopedEnv env("DSKC_FFN_GEMM", "cublas");  // on sm_90 gemm_sm90 would take their place
  auto c = make_cfg(2, 128, 1024, 16, 4096, DType::F16, true, 0.1, 0.1);
  c.gelu_approximation = GeluForm::Tanh;
  REQUIRE(make_plan(c).gelu_in_gemm);  // GELU_AUX_BIAS forward, DGELU backward
  check_case("fp16-tanh-epilogue", c, 2, 127, true);
}

TEST_CASE("bf16 Post-LN head dim 8, seq 381, tanh GELU") {
  dskc_test::require_gpu();
  auto c = make_cfg(1, 384, 256, 32, 1024, DType::BF16, false, 0.1, 0.1);
  c.gelu_approximation = GeluForm::Tanh;
  check_case("bf16-post", c, 1, 381, true);
}

TEST_CASE("fp16 Post-LN hidden 1600 (25 heads), seq 1") {
  dskc_test::require_gpu();
  check_case("fp16-1600", make_cfg(4, 32, 1600, 25, 6400, DType::F16, false, 0.1, 0.1), 4, 1, false);
}

TEST_CASE("fp16 Pre-LN hidden 2560, head dim 128, seq 7") {
  dskc_test::require_gpu();
  check_case("fp16-2560", make_cfg(2, 8, 2560, 20, 2560, DType::F16, true, 0.1, 0.0), 1, 7, true);
}

TEST_CASE("bf16 Pre-LN seq 509 of 512, head dim 32") {
  dskc_test::require_gpu();
  check_case("bf16-509", make_cfg(1, 512, 128, 4, 512, DType::BF16, true, 0.1, 0.1), 1, 509, true);
}

TEST_CASE("fp32 Pre-LN with all memory flags, seq 33") {
  dskc_test::require_gpu();
  auto c = make_cfg(2, 40, 96, 3, 384, DType::F32, true, 0.2, 0.1);
  c.attn_dropout_checkpoint = c.normalize_invertible = c.gelu_checkpoint = true;
  check_case("fp32-flags", c, 2, 33, true);
}

// Hidden 126 fp16: 2-wide vectors, 63 per row, so the LayerNorm backward runs a warp per row with
// partly idle lanes and sums its dgamma / dbeta partials one float at a time; rows not a multiple
// of the block's 8 (B·S = 21), so the last block has idle warps.
TEST_CASE("fp16 Pre-LN hidden 126 (2-wide vectors), normalize_invertible, seq 7") {
  dskc_test::require_gpu();
  auto c = make_cfg(3, 8, 126, 2, 504, DType::F16, true, 0.1, 0.1);
  c.normalize_invertible = true;
  REQUIRE(make_plan(c).ln_bwd_warp_rows);
  check_case("fp16-126", c, 3, 7, true);
}

// Fused attention (attn_flash_*) specifically: head dims 16 and 80, no attention dropout, and the
// forced-unfused path of a layer that would fuse (both must meet the same limits).
TEST_CASE("fp16 Pre-LN head dim 16, seq 33, no attention dropout (fused)") {
  dskc_test::require_gpu();
  check_case("fp16-d16", make_cfg(3, 40, 128, 8, 512, DType::F16, true, 0.0, 0.1), 2, 33, true);
}

TEST_CASE("bf16 Post-LN head dim 80, seq 381, masked, attention dropout (fused)") {
  dskc_test::require_gpu();
  check_case("bf16-d80", make_cfg(2, 384, 160, 2, 640, DType::BF16, false, 0.1, 0.1), 2, 381, true);
}

TEST_CASE("fp16 Pre-LN head dim 64, seq 127, attention dropout 0.3, batch below max (fused)") {
  dskc_test::require_gpu();
  check_case("fp16-d64-p3", make_cfg(3, 128, 256, 4, 1024, DType::F16, true, 0.3, 0.0), 2, 127, true);
}

// attn_dropout_checkpoint on the fused path: the keep bits are not kept; attn_dropout_bits_bwd
// rewrites them in backward (the cases above without the flag read the bits the forward saved).
TEST_CASE("fp16 Pre-LN head dim 64, seq 127, attention dropout 0.3, attn_dropout_checkpoint (fused, bits rewritten)") {
  dskc_test::require_gpu();
  auto c = make_cfg(3, 128, 256, 4, 1024, DType::F16, true, 0.3, 0.0);
  c.attn_dropout_checkpoint = true;
  check_case("fp16-d64-p3-adc", c, 2, 127, true);
}

TEST_CASE("bf16 Post-LN head dim 80, seq 381, masked, attn_dropout_checkpoint (fused, bits rewritten)") {
  dskc_test::require_gpu();
  auto c = make_cfg(2, 384, 160, 2, 640, DType::BF16, false, 0.1, 0.1);
  c.attn_dropout_checkpoint = true;
  check_case("bf16-d80-adc", c, 2, 381, true);
}

TEST_CASE("bf16 Pre-LN head dim 128, seq 509 of 512 (fused)") {
  dskc_test::require_gpu();
  check_case("bf16-d128", make_cfg(1, 512, 256, 2, 1024, DType::BF16, true, 0.1, 0.1), 1, 509, true);
}

TEST_CASE("fp16 Pre-LN BERT-Large width, seq 127, forced unfused attention") {
  dskc_test::require_gpu();
  check_case("fp16-large-unfused", make_cfg(2, 128, 1024, 16, 4096, DType::F16, true, 0.1, 0.1), 2, 127, true,
             AttentionPath::Unfused);
}

// stochastic_mode: autotuned GEMMs and the default dQ GEMM; with DSKC_ATTN_DQ=atomic the single-pass
// attn_flash_bwd_dkdvdq (dQ accumulated with fp32 atomics, order varies run to run) instead of
// attn_flash_bwd_dkdv + the dQ GEMM. The same limits as the default mode.
TEST_CASE("fp16 Pre-LN BERT-Large width, dropout, seq 127, stochastic_mode (autotuned GEMMs)") {
  dskc_test::require_gpu();
  auto c = make_cfg(2, 128, 1024, 16, 4096, DType::F16, true, 0.1, 0.1);
  c.stochastic_mode = true;
  check_case("fp16-large-stochastic", c, 2, 127, true);
}

TEST_CASE("bf16 Post-LN head dim 64, seq 127, attention dropout 0.3, stochastic_mode, DSKC_ATTN_DQ=atomic") {
  dskc_test::require_gpu();
  const dskc_test::ScopedEnv env("DSKC_ATTN_DQ", "atomic");
  auto c = make_cfg(3, 128, 256, 4, 1024, DType::BF16, false, 0.3, 0.1);
  c.stochastic_mode = true;
  check_case("bf16-d64-p3-stochastic", c, 2, 127, true);
}

TEST_CASE("bf16 Post-LN head dim 80, seq 381, masked, stochastic_mode + attn_dropout_checkpoint, DSKC_ATTN_DQ=atomic") {
  dskc_test::require_gpu();
  const dskc_test::ScopedEnv env("DSKC_ATTN_DQ", "atomic");
  auto c = make_cfg(2, 384, 160, 2, 640, DType::BF16, false, 0.1, 0.1);
  c.stochastic_mode = c.attn_dropout_checkpoint = true;
  check_case("bf16-d80-adc-stochastic", c, 2, 381, true);
}

TEST_CASE("fp16 Pre-LN head dim 128, seq 509 of 512, all memory flags, stochastic_mode") {
  dskc_test::require_gpu();
  auto c = make_cfg(1, 512, 256, 2, 1024, DType::F16, true, 0.1, 0.1);
  c.stochastic_mode = c.attn_dropout_checkpoint = c.normalize_invertible = c.gelu_checkpoint = true;
  check_case("fp16-d128-flags-stochastic", c, 1, 509, true);
}

// DSKC_ATTN_MASK=kernel: attn_dropout_bits_fwd writes the keep bits and attn_flash_fwd reads them.
TEST_CASE("fp16 Pre-LN head dim 64, seq 127, attention dropout 0.3, DSKC_ATTN_MASK=kernel (fused)") {
  dskc_test::require_gpu();
  const dskc_test::ScopedEnv env("DSKC_ATTN_MASK", "kernel");
  check_case("fp16-d64-p3-kernel", make_cfg(3, 128, 256, 4, 1024, DType::F16, true, 0.3, 0.0), 2, 127, true);
}

TEST_CASE("bf16 Post-LN head dim 128, seq 381, masked, DSKC_ATTN_MASK=kernel + attn_dropout_checkpoint (fused)") {
  dskc_test::require_gpu();
  const dskc_test::ScopedEnv env("DSKC_ATTN_MASK", "kernel");
  auto c = make_cfg(2, 384, 256, 2, 1024, DType::BF16, false, 0.1, 0.1);
  c.attn_dropout_checkpoint = true;
  check_case("bf16-d128-kernel-adc", c, 2, 381, true);
}

// The bias gradients' source (DSKC_BIAS_GRAD): the default column-sum GEMMs, the weight-gradient
// GEMMs' BGRADB epilogue, or partial sums + param_grad_reduce (with the attention output's own
// dropout kernel). None touches the forward or the data-gradient chain: output, grad_input and the
// LayerNorm parameter gradients are bitwise equal; the biases (each summed in fp32, rounded once)
// and weights (the weight GEMMs may take another cuBLASLt algorithm without the epilogue) agree to
// fp16/bf16 rounding. The CPU-reference check of the epilogue path is the case below.
TEST_CASE("bias-gradient sources (DSKC_BIAS_GRAD) agree; everything else bitwise") {
  dskc_test::require_gpu();
  Context ctx;
  for (DType t : {DType::F16, DType::BF16}) {
    for (bool pre : {true, false}) {
      const LayerConfig c = make_cfg(3, 96, 256, 4, 1024, t, pre, 0.1, 0.1);
      const auto params = test_params(c, 29);
      const int B = 3, S = 93;
      const Inputs in = make_inputs(c, B, S, true, 31);
      for (const char* src : {"epilogue", "partials"}) {
        INFO(dtype_name(t) << (pre ? " Pre-LN" : " Post-LN") << " DSKC_BIAS_GRAD=" << src);
        // partials leaves cuBLASLt no bias epilogue, so the plan takes the cuBLASLt FFN GEMMs with the
        // bias_gelu kernels (LayerPlan::ffn_gemm_sm90 needs the epilogue sources); its gemv reference
        // runs that FFN path too, whose bias_gelu_bwd multiplies by the unrounded GELU'(h) where the
        // default gemm_sm90 path multiplies by the kept, rounded one.
        const bool part = std::string(src) == "partials";
        const dskc_test::ScopedEnv ffn("DSKC_FFN_GEMM", part ? "cublas" : nullptr);
        GpuResult want;
        {
          const dskc_test::ScopedEnv env("DSKC_BIAS_GRAD", "gemv");
          want = run_gpu(ctx, c, params, in, B, S, 2, AttentionPath::FusedWhereSupported);
        }
        const dskc_test::ScopedEnv env("DSKC_BIAS_GRAD", src);
        const GpuResult got = run_gpu(ctx, c, params, in, B, S, 2, AttentionPath::FusedWhereSupported);
        CHECK(got.output == want.output);
        CHECK(got.grad_input == want.grad_input);
        REQUIRE(got.grads.size() == want.grads.size());
        for (const auto& [name, v] : want.grads) {
          CAPTURE(name);
          const bool ln = name.find("_nw") != std::string::npos || name.find("_nb") != std::string::npos ||
                          name == "norm_w" || name == "norm_b";
          if (ln) {
            CHECK(got.grads.at(name) == v);
          } else {
            const auto e = compare(got.grads.at(name), std::vector<double>(v.begin(), v.end()));
            CHECK(e.rel <= (t == DType::F16 ? 4e-3 : 2e-2));
          }
        }
      }
    }
  }
}

TEST_CASE("fp16 Post-LN head dim 64, seq 127, dropout, DSKC_BIAS_GRAD=epilogue (BGRADB)") {
  dskc_test::require_gpu();
  const dskc_test::ScopedEnv env("DSKC_BIAS_GRAD", "epilogue");
  check_case("fp16-post-epilogue", make_cfg(2, 128, 512, 8, 2048, DType::F16, false, 0.1, 0.1), 2, 127, true);
}

// Where the keep bits come from changes no bit of the layer: attn_dropout_checkpoint (bits rewritten
// in backward), DSKC_ATTN_MASK=kernel (bits from attn_dropout_bits_fwd) and =ln (from the first
// LayerNorm's launch in Pre-LN) against bits drawn and saved by attn_flash_fwd (=inline), same seed,
// step and inputs: output, grad_input and every parameter gradient bitwise equal. With
// normalize_invertible too (whose LayerNorm backward differs from the no-flag one), ln's re-run of the
// LayerNorm rewrites the bits in backward: bitwise equal to the bits kernel's.
TEST_CASE("fused attention: keep-bit sources give bitwise identical outputs and gradients") {
  dskc_test::require_gpu();
  // The mma.sync forward under every source (the wgmma forward, Hopper's default at head dim 64, reads
  // the bits only: test_flash_attention compares it with this one).
  const dskc_test::ScopedEnv env_fwd("DSKC_ATTN_FWD", "sync");
  Context ctx;
  for (DType t : {DType::F16, DType::BF16}) {
    const LayerConfig base = make_cfg(3, 96, 256, 4, 512, t, t == DType::F16, 0.3, 0.1);  // d 64, odd seq below
    const auto params = test_params(base, 17);
    const int B = 2, S = 93;
    const Inputs in = make_inputs(base, B, S, true, 23);
    const uint32_t step = 5;
    GpuResult want;
    {
      const dskc_test::ScopedEnv env("DSKC_ATTN_MASK", "inline");
      want = run_gpu(ctx, base, params, in, B, S, step, AttentionPath::FusedWhereSupported);
    }
    for (bool adc : {false, true})
      for (const char* mask_src : {"inline", "kernel", "ln"})
        for (const char* bits_bwd : {"auto", "dot", "saved"}) {  // saved: the forward's bits kept
        if (!adc && std::string(mask_src) == "inline") continue;
        if (!adc && std::string(bits_bwd) != "auto") continue;  // nothing to rewrite
        INFO(dtype_name(t) << (adc ? " attn_dropout_checkpoint" : " no flag") << " DSKC_ATTN_MASK=" << mask_src
                           << " DSKC_ATTN_BITS_BWD=" << bits_bwd);
        LayerConfig c = base;
        c.attn_dropout_checkpoint = adc;
        const dskc_test::ScopedEnv env("DSKC_ATTN_MASK", mask_src), env_bwd("DSKC_ATTN_BITS_BWD", bits_bwd);
        const GpuResult got = run_gpu(ctx, c, params, in, B, S, step, AttentionPath::FusedWhereSupported);
        check_bitwise(got, want);
      }
    LayerConfig ci = base;
    ci.attn_dropout_checkpoint = true;
    ci.normalize_invertible = true;
    GpuResult by_kernel;
    {
      const dskc_test::ScopedEnv env("DSKC_ATTN_MASK", "kernel");
      by_kernel = run_gpu(ctx, ci, params, in, B, S, step, AttentionPath::FusedWhereSupported);
    }
    INFO(dtype_name(t) << " attn_dropout_checkpoint + normalize_invertible, DSKC_ATTN_MASK=ln vs kernel");
    const dskc_test::ScopedEnv env("DSKC_ATTN_MASK", "ln");
    {
      TransformerLayer probe(ctx, ci);
      CHECK(probe.plan().attn_bits_bwd_in_ln == ci.pre_layer_norm);
    }
    const GpuResult got = run_gpu(ctx, ci, params, in, B, S, step, AttentionPath::FusedWhereSupported);
    CHECK(got.output == by_kernel.output);
    CHECK(got.grad_input == by_kernel.grad_input);
    REQUIRE(got.grads.size() == by_kernel.grads.size());
    for (const auto& [name, v] : by_kernel.grads) CHECK_MESSAGE(got.grads.at(name) == v, name);
    // The forward's bits kept (the LayerNorm re-run then writes none): the same bits, the same layer.
    INFO("... and DSKC_ATTN_BITS_BWD=saved");
    const dskc_test::ScopedEnv env_saved("DSKC_ATTN_BITS_BWD", "saved");
    check_bitwise(run_gpu(ctx, ci, params, in, B, S, step, AttentionPath::FusedWhereSupported), by_kernel);
  }
}

// common/gelu.cuh's exact GELU (the erfc fit, no erff) and its derivative, evaluated by the GPU over
// [-12, 12] in steps of 1/1024 against erfc in double: GELU within 1e-5 relative down to x = -10
// (GELU ~ -8e-23) and 5e-5 relative below (GELU(-12) ~ -2e-32: relative also in the tail), GELU'
// within 1e-5 relative + 2e-7 absolute, and the tanh form against
// its own formula (absolute 1e-6 there); gelu_and_grad gives the same GELU bitwise and GELU′ within
// its degree-7 tail's error. A wrong coefficient or sign in the fit moves some point by far more.
TEST_CASE("GELU device functions: exact form within 1e-5 relative of erfc in double over [-10, 12], 5e-5 to -12") {
  dskc_test::require_gpu();
  Context ctx;
  const std::string src = R"(#include "common/gelu.cuh"
extern "C" __global__ void gelu_eval(const float* x, float* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  out[i] = dskc::gelu<false>(x[i]);
  out[n + i] = dskc::gelu_grad<false>(x[i]);
  out[2 * n + i] = dskc::gelu<true>(x[i]);
  out[3 * n + i] = dskc::gelu_grad<true>(x[i]);
  dskc::gelu_and_grad<false>(x[i], out[4 * n + i], out[5 * n + i]);
  dskc::gelu_and_grad<true>(x[i], out[6 * n + i], out[7 * n + i]);
}
)";
  std::vector<std::pair<std::string, std::string>> headers;
  for (const auto& t : embedded_templates()) headers.emplace_back(t.path, t.text);
  const std::string arch = detect_gpu_arch(ctx.device()).value_or("sm_90");
  const CompiledModule m = nvrtc_compile(src, "gelu_eval.cu", {arch, EmitKind::Cubin, {}}, headers);
  LoadedModule mod(ctx, m.image);
  std::vector<float> xs;
  for (int i = -12 * 1024; i <= 12 * 1024; ++i) xs.push_back(static_cast<float>(i) / 1024.f);
  for (float v : {-0.7517915f, 1e-30f, -1e-30f, 0.f, -0.f}) xs.push_back(v);  // gelu' = 0 near -0.7518
  const int n = static_cast<int>(xs.size());
  DeviceBuffer x(ctx, n * sizeof(float)), out(ctx, 8 * n * sizeof(float));
  upload(ctx, x.ptr(), xs, DType::F32);
  CUdeviceptr xp = x.ptr(), op = out.ptr();
  void* args[] = {&xp, &op, const_cast<int*>(&n)};
  DSKC_CU(cuLaunchKernel(mod.function("gelu_eval"), (n + 255) / 256, 1, 1, 256, 1, 1, 0, ctx.stream(), args, nullptr));
  const std::vector<float> got = download(ctx, out.ptr(), 8 * n, DType::F32);
  double worst_g = 0, worst_d = 0, worst_tg = 0, worst_td = 0;
  for (int i = 0; i < n; ++i) {
    const double v = xs[i];
    const double cdf = 0.5 * std::erfc(-v / std::sqrt(2.0)), pdf = std::exp(-0.5 * v * v) / std::sqrt(2.0 * M_PI);
    const double g = v * cdf, d = cdf + v * pdf;
    const double k0 = 0.7978845608028654, k1 = 0.044715, u = k0 * (v + k1 * v * v * v), th = std::tanh(u);
    const double tg = 0.5 * v * (1 + th), td = 0.5 * (1 + th) + 0.5 * v * (1 - th * th) * k0 * (1 + 3 * k1 * v * v);
    auto excess = [](double got, double want, double rel, double abs_) {
      return std::fabs(got - want) / (rel * std::fabs(want) + abs_);
    };
    CAPTURE(v);
    if (v >= -10) worst_g = std::max(worst_g, excess(got[i], g, 1e-5, 1e-37));
    worst_d = std::max(worst_d, excess(got[n + i], d, 1e-5, 2e-7));
    // (the tanh form cancels in 1 + tanh(u) for x << 0, in fp32 as in PyTorch: absolute bound only)
    worst_tg = std::max(worst_tg, excess(got[2 * n + i], tg, 1e-5, 1e-6));
    worst_td = std::max(worst_td, excess(got[3 * n + i], td, 1e-5, 1e-6));
    // 1e-5 relative down to x = -10; below, the exponential's argument (-z² + P, about -50 to -72)
    // carries fp32 rounding of a few 1e-6 into the result: 5e-5 relative (1.4e-5 at -12 with the natural-base
    // form; the base-2 form with log2(e) in the coefficients: 5.2e-6 worst at x >= -10 on the H200).
    CHECK(std::fabs(got[i] - g) <= (v >= -10 ? 1e-5 : 5e-5) * std::fabs(g) + 1e-37);
    CHECK(std::fabs(got[n + i] - d) <= 1e-5 * std::fabs(d) + 2e-7);
    // gelu_and_grad: GELU bitwise gelu's (both forms), GELU' from the degree-7 tail (erf: 1e-5
    // relative + 4e-7 absolute, the fit's 3.2e-7 in Φ near GELU' = 0) and tanh bitwise gelu_grad's
    CHECK(got[4 * n + i] == got[i]);
    CHECK(got[6 * n + i] == got[2 * n + i]);
    CHECK(std::fabs(got[5 * n + i] - d) <= 1e-5 * std::fabs(d) + 4e-7);
    CHECK(got[7 * n + i] == got[3 * n + i]);
  }
  std::printf("GELU worst error / bound: exact %.3f, exact' %.3f, tanh %.3f, tanh' %.3f\n", worst_g, worst_d, worst_tg,
              worst_td);
  CHECK(worst_tg <= 1.0);
  CHECK(worst_td <= 1.0);
}

// One layer run with `var` = `want_value` (the reference path) and one per `got_values` entry, on
// the same parameters (test_params(c, seed)) and inputs (make_inputs(c, ..., seed + 2)). One Context
// for the reference and one for the tested values, both alive: a run cannot find the other path's
// values in a shared scratch buffer (e.g. inference's GELU(h), workspace written within forward,
// unpoisoned). check_plan sees each tested value's sm_90 plan before its run; compare(got, want)
// checks the results.
void compare_env_paths(const LayerConfig& c, int B, int S, uint64_t seed, uint32_t step, const char* var,
                       const char* want_value, std::initializer_list<const char*> got_values,
                       const std::vector<std::string>& read,
                       const std::function<void(const LayerPlan&, const std::string&)>& check_plan,
                       const std::function<void(const GpuResult&, const GpuResult&)>& compare) {
  Context ctx_want, ctx_got;
  const auto params = test_params(c, seed);
  const Inputs in = make_inputs(c, B, S, true, seed + 2);
  GpuResult want;
  {
    const dskc_test::ScopedEnv env(var, want_value);
    want = run_gpu(ctx_want, c, params, in, B, S, step, AttentionPath::FusedWhereSupported, true, read);
  }
  for (const char* value : got_values) {
    INFO(var << "=" << value);
    std::printf(" %s=%s\n", var, value);
    const dskc_test::ScopedEnv env(var, value);
    PlanOptions po;
    po.arch = "sm_90";
    check_plan(make_plan(c, po), value);
    const GpuResult got = run_gpu(ctx_got, c, params, in, B, S, step, AttentionPath::FusedWhereSupported, true, read);
    compare(got, want);
  }
}

// gemm_sm90 runs on sm_90 GPUs only: elsewhere its tests print a visible skip.
bool gemm_sm90_gpu() {
  if (detect_gpu_arch().value_or("") == "sm_90") return true;
  std::printf("SKIPPED: gemm_sm90 runs on sm_90 GPUs only (this one is %s)\n", detect_gpu_arch().value_or("?").c_str());
  return false;
}

// gemm_sm90 (the FFN's GELU GEMMs as dskc's own TMA + wgmma kernels on sm_90: both with
// DSKC_FFN_GEMM=sm90, the forward one with sm90_fwd) against the cuBLASLt path (the default) on the
// same inputs: h, GELU(h) and dh (poisoned first: every element
// written), then the layer's output and every gradient, within fp16/bf16 rounding of each other (the
// products differ only in fp32 summation order; the GELU and its derivative are the same device
// functions of the same rounded values). Row counts that are not multiples of the 128-row tile,
// fewer rows than one tile, BERT-Large and BERT-Base widths, both GELU forms, gelu_checkpoint,
// Post-LN, inference; one tile per block (fewer tiles than SMs) and 15-16 per block (ping-pong of the
// two math warpgroups over an odd or even count); the forward's GELU epilogue in two regions per
// warpgroup (the default) and, for three of the cases, in three (DSKC_GEMM_GELU_REGIONS=3).
TEST_CASE("gemm_sm90 FFN GEMMs (DSKC_FFN_GEMM=sm90, sm90_fwd) agree with the cuBLASLt path (h, GELU(h), dh, outputs, "
          "gradients)") {
  dskc_test::require_gpu();
  if (!gemm_sm90_gpu()) return;
  struct Case {
    const char* name;
    int H, heads, I, B, S;
    DType t;
    bool pre, tanh, gelu_ckpt, training, three_regions;
  };
  const Case cases[] = {
      {"fp16 BERT-Large Pre-LN, 3 x 77 rows", 1024, 16, 4096, 3, 77, DType::F16, true, false, false, true, false},
      {"fp16 BERT-Large Pre-LN, 64 x 128 rows", 1024, 16, 4096, 64, 128, DType::F16, true, false, false, true, true},
      {"bf16 BERT-Base Post-LN tanh, 2 x 200 rows", 768, 12, 3072, 2, 200, DType::BF16, false, true, false, true, false},
      {"fp16 BERT-Large gelu_checkpoint, 1 x 7 rows", 1024, 16, 4096, 1, 7, DType::F16, true, false, true, true, false},
      {"bf16 hidden 256 Pre-LN gelu_checkpoint, 2 x 128 rows", 256, 4, 1024, 2, 128, DType::BF16, true, false, true, true,
       true},
      {"fp16 BERT-Large inference, 5 x 33 rows", 1024, 16, 4096, 5, 33, DType::F16, true, false, false, false, true},
  };
  for (const Case& k : cases)
    for (int regions : {2, 3}) {
      if (regions == 3 && !k.three_regions) continue;
      INFO(k.name << ", " << regions << " GELU epilogue region(s)");
      std::printf("case %s, %d region(s)\n", k.name, regions);
      const dskc_test::ScopedEnv env("DSKC_GEMM_GELU_REGIONS", std::to_string(regions).c_str());
      LayerConfig c = make_cfg(k.B, k.S, k.H, k.heads, k.I, k.t, k.pre, 0.1, 0.1);
      c.gelu_approximation = k.tanh ? GeluForm::Tanh : GeluForm::Erf;
      c.gelu_checkpoint = k.gelu_ckpt;
      c.training = k.training;
      // Inference keeps only GELU(h), in the workspace.
      const std::vector<std::string> read =
          k.training ? kFfnTensors : std::vector<std::string>{"ffn_gelu_out"};
      compare_env_paths(
          c, k.B, k.S, 41, 4, "DSKC_FFN_GEMM", "cublas", {"sm90", "sm90_fwd"}, read,
          [&](const LayerPlan& plan, const std::string& mode) {
            REQUIRE(plan.ffn_gemm_sm90);
            REQUIRE(plan.ffn_gemm_sm90_bwd == (k.training && mode == "sm90"));
            REQUIRE(plan.gelu_grad_saved == (k.training && mode == "sm90" && !k.gelu_ckpt));
            REQUIRE(plan.gemm_gelu_regions == regions);
          },
          [&](const GpuResult& got, const GpuResult& want) {
            check_sm90_agrees(got, want, read, k.t, k.training, false, c.gelu_approximation);
          });
    }
}

// gemm_sm90's two ways to the GELU backward: GELU'(h) computed by the forward and kept
// (DSKC_GELU_SAVE=grad, the default: kBiasGeluSaveGrad + kDGeluSaved) or computed by the backward from
// the kept h (input: kBiasGelu + kDGelu) give bitwise the same GELU(h), dh, output and gradients
// (the same rounded GELU'(h) multiplies the same rounded products); the kept GELU'(h) is GELU' of h
// within its rounding. fp16 erf (a partial row tile, one tile per block) and bf16 tanh (~3 per block).
TEST_CASE("gemm_sm90 GELU backward from the saved GELU'(h) (DSKC_GELU_SAVE=grad) is bitwise the one from h") {
  dskc_test::require_gpu();
  if (!gemm_sm90_gpu()) return;
  struct Case {
    const char* name;
    int H, heads, I, B, S;
    DType t;
    bool tanh;
  };
  const Case cases[] = {
      {"fp16 BERT-Large erf, 3 x 77 rows", 1024, 16, 4096, 3, 77, DType::F16, false},
      {"bf16 BERT-Base tanh, 16 x 128 rows", 768, 12, 3072, 16, 128, DType::BF16, true},
  };
  const dskc_test::ScopedEnv ffn("DSKC_FFN_GEMM", "sm90");
  for (const Case& k : cases) {
    INFO(k.name);
    std::printf("case %s\n", k.name);
    LayerConfig c = make_cfg(k.B, k.S, k.H, k.heads, k.I, k.t, true, 0.1, 0.1);
    c.gelu_approximation = k.tanh ? GeluForm::Tanh : GeluForm::Erf;
    compare_env_paths(
        c, k.B, k.S, 43, 6, "DSKC_GELU_SAVE", "input", {"grad"}, kFfnTensors,
        [&](const LayerPlan& plan, const std::string&) {
          REQUIRE(plan.gelu_grad_saved);
          REQUIRE(plan.find_saved("ffn_gelu_grad"));
          REQUIRE_FALSE(plan.find_saved("ffn_pre_gelu"));
          REQUIRE(plan.find_kernel("gemm_output_dgrad")->instantiation.find("kDGeluSaved") != std::string::npos);
        },
        [&](const GpuResult& got, const GpuResult& want) {
          REQUIRE(want.tensors.count("ffn_pre_gelu"));
          REQUIRE(got.tensors.count("ffn_gelu_grad"));
          check_bitwise(got, want, {"ffn_gelu_out", "grad_inter"});
          // GELU'(h) as kept: within the dtype's rounding of GELU' of the h the other run kept
          check_sm90_agrees(got, want, {}, k.t, true, false, c.gelu_approximation);
        });
  }
}

// gemm_sm90's plain epilogues (DSKC_LINEAR_GEMM=sm90: the forward's QKV + bias, attention-output and
// output GEMMs) against cuBLASLt on the same inputs: qkv (poisoned first: every element written),
// the layer's output and every gradient, within fp16/bf16 rounding (the products differ only in fp32
// summation order). Partial and sub-tile row counts, BERT-Large and BERT-Base widths (3H = 18 or 24
// column tiles, K = 768 .. 4096), Post-LN, inference, and with the FFN's gemm_sm90 kernels as well.
TEST_CASE("gemm_sm90 linear GEMMs (DSKC_LINEAR_GEMM=sm90) agree with the cuBLASLt path (qkv, outputs, gradients)") {
  dskc_test::require_gpu();
  if (!gemm_sm90_gpu()) return;
  struct Case {
    const char* name;
    int H, heads, I, B, S;
    DType t;
    bool pre, training;
    const char* ffn;
  };
  const Case cases[] = {
      {"fp16 BERT-Large Pre-LN, 3 x 77 rows", 1024, 16, 4096, 3, 77, DType::F16, true, true, "cublas"},
      {"fp16 BERT-Large Pre-LN, 64 x 128 rows", 1024, 16, 4096, 64, 128, DType::F16, true, true, "cublas"},
      {"bf16 BERT-Base Post-LN, 2 x 200 rows", 768, 12, 3072, 2, 200, DType::BF16, false, true, "cublas"},
      {"fp16 BERT-Large, 1 x 7 rows, FFN gemm_sm90 too", 1024, 16, 4096, 1, 7, DType::F16, true, true, "sm90"},
      {"bf16 BERT-Large, 16 x 512 rows, FFN gemm_sm90 too", 1024, 16, 4096, 16, 512, DType::BF16, true, true, "sm90"},
      {"fp16 BERT-Large inference, 5 x 33 rows", 1024, 16, 4096, 5, 33, DType::F16, true, false, "cublas"},
  };
  for (const Case& k : cases) {
    INFO(k.name);
    std::printf("case %s\n", k.name);
    LayerConfig c = make_cfg(k.B, k.S, k.H, k.heads, k.I, k.t, k.pre, 0.1, 0.1);
    c.training = k.training;
    const std::vector<std::string> read = k.training ? std::vector<std::string>{"qkv"} : std::vector<std::string>{};
    const dskc_test::ScopedEnv ffn("DSKC_FFN_GEMM", k.ffn);
    compare_env_paths(
        c, k.B, k.S, 51, 4, "DSKC_LINEAR_GEMM", "cublas", {"sm90"}, read,
        [&](const LayerPlan& plan, const std::string&) {
          REQUIRE(plan.linear_gemm_sm90);
          REQUIRE(plan.find_kernel("gemm_output_fwd"));
        },
        [&](const GpuResult& got, const GpuResult& want) { check_sm90_agrees(got, want, read, k.t, k.training); });
  }
}

// DSKC_OUTPUT_GEMM=fused (Pre-LN, gemm_sm90 output GEMM): the epilogue's output_b + hidden dropout +
// residual add is the arithmetic of bias_dropout_residual_fwd_ffn on the same rounded product, so the
// layer output and every gradient are bitwise equal to the separate pass; partial tiles (3 x 77,
// 1 x 7), both element types, inference (no dropout) and no hidden dropout.
TEST_CASE("gemm_sm90 output GEMM with the bias + dropout + residual epilogue (DSKC_OUTPUT_GEMM=fused): bitwise equal") {
  dskc_test::require_gpu();
  if (!gemm_sm90_gpu()) return;
  struct Case {
    const char* name;
    int H, heads, I, B, S;
    DType t;
    bool training;
    double hidden_drop;
  };
  const Case cases[] = {
      {"fp16 BERT-Large, 3 x 77 rows", 1024, 16, 4096, 3, 77, DType::F16, true, 0.1},
      {"fp16 BERT-Large, 64 x 128 rows", 1024, 16, 4096, 64, 128, DType::F16, true, 0.1},
      {"bf16 BERT-Base, 2 x 200 rows", 768, 12, 3072, 2, 200, DType::BF16, true, 0.1},
      {"fp16 BERT-Large, 1 x 7 rows, no hidden dropout", 1024, 16, 4096, 1, 7, DType::F16, true, 0.0},
      {"bf16 BERT-Large inference, 5 x 33 rows", 1024, 16, 4096, 5, 33, DType::BF16, false, 0.1},
  };
  for (const Case& k : cases) {
    INFO(k.name);
    std::printf("case %s\n", k.name);
    LayerConfig c = make_cfg(k.B, k.S, k.H, k.heads, k.I, k.t, true, 0.1, k.hidden_drop);
    c.training = k.training;
    const dskc_test::ScopedEnv linear("DSKC_LINEAR_GEMM", "sm90");  // the fused epilogue is gemm_sm90's
    compare_env_paths(
        c, k.B, k.S, 61, 6, "DSKC_OUTPUT_GEMM", "separate", {"fused"}, {},
        [&](const LayerPlan& plan, const std::string&) {
          REQUIRE(plan.output_gemm_fused);
          REQUIRE(plan.find_kernel("bias_dropout_residual_fwd_ffn") == nullptr);
        },
        [&](const GpuResult& got, const GpuResult& want) { check_bitwise(got, want, {}, k.training); });
  }
}

// DSKC_DGRAD_GEMM=sm90: the backward's intermediate, attention-output and (Pre-LN) QKV data
// gradients as gemm_sm90 kPlain kernels on the weights as stored (DSKC_SM90_WEIGHT=in_place, the
// default; the transposed form is bitwise the same, tested below), against cuBLASLt on the same inputs:
// d_ctx (linear_out after backward: gemm_attn_out_dgrad's output) and, in Pre-LN, grad_h_b (the QKV
// data gradient), both poisoned before backward (every element written), the output and every
// gradient within a few fp16/bf16 roundings. Partial and sub-tile row counts (fewer tiles than SMs),
// BERT-Large and BERT-Base widths, Post-LN (its QKV data gradient stays in cuBLASLt), with the FFN's
// gemm_sm90 backward. (On the H200 three of these five cases came out bitwise equal to cuBLASLt: the
// same fp32 accumulation order over k.)
TEST_CASE("gemm_sm90 data-gradient GEMMs (DSKC_DGRAD_GEMM=sm90) agree with the cuBLASLt path") {
  dskc_test::require_gpu();
  if (!gemm_sm90_gpu()) return;
  struct Case {
    const char* name;
    int H, heads, I, B, S;
    DType t;
    bool pre;
    const char* ffn;
  };
  const Case cases[] = {
      {"fp16 BERT-Large Pre-LN, 3 x 77 rows", 1024, 16, 4096, 3, 77, DType::F16, true, "sm90_fwd"},
      {"fp16 BERT-Large Pre-LN, 64 x 128 rows", 1024, 16, 4096, 64, 128, DType::F16, true, "sm90_fwd"},
      {"bf16 BERT-Base Post-LN, 2 x 200 rows", 768, 12, 3072, 2, 200, DType::BF16, false, "sm90_fwd"},
      {"fp16 BERT-Large, 1 x 7 rows, FFN gemm_sm90 too", 1024, 16, 4096, 1, 7, DType::F16, true, "sm90"},
      {"bf16 BERT-Large, 16 x 512 rows, FFN gemm_sm90 too", 1024, 16, 4096, 16, 512, DType::BF16, true, "sm90"},
  };
  for (const Case& k : cases) {
    INFO(k.name);
    std::printf("case %s\n", k.name);
    LayerConfig c = make_cfg(k.B, k.S, k.H, k.heads, k.I, k.t, k.pre, 0.1, 0.1);
    const std::vector<std::string> read =
        k.pre ? std::vector<std::string>{"linear_out", "grad_h_b"} : std::vector<std::string>{"linear_out"};
    const dskc_test::ScopedEnv ffn("DSKC_FFN_GEMM", k.ffn);
    compare_env_paths(
        c, k.B, k.S, 71, 4, "DSKC_DGRAD_GEMM", "cublas", {"sm90"}, read,
        [&](const LayerPlan& plan, const std::string&) {
          REQUIRE(plan.dgrad_gemm_sm90);
          REQUIRE(plan.find_kernel("gemm_inter_dgrad"));
          REQUIRE((plan.find_kernel("gemm_qkv_dgrad") != nullptr) == k.pre);
        },
        [&](const GpuResult& got, const GpuResult& want) { check_sm90_agrees(got, want, read, k.t, true, true); });
  }
}

// DSKC_SM90_WEIGHT: the backward's gemm_sm90 data gradients reading each weight W [k, n] as stored
// (in_place, the default: two [64 k][64 n] TMA boxes per stage, read N-major by the wgmmas) against
// reading Wᵀ that weight_transpose wrote first (transpose): the same products over the same k order,
// so dh (grad_inter, poisoned first: every element written), d_ctx (linear_out), Pre-LN's QKV data
// gradient (grad_h_b), the output and every gradient are bitwise equal. gemm_output_dgrad with each of
// its epilogues (kDGeluSaved; kDGelu with DSKC_GELU_SAVE=input; kDGeluStoreGelu under gelu_checkpoint),
// the three kPlain data gradients (DSKC_DGRAD_GEMM=sm90: N = H, I; K = H, 3H, I), partial and sub-tile
// row counts, BERT-Large and BERT-Base widths (I = 3072: 24 column tiles), both element types, Post-LN.
TEST_CASE("gemm_sm90 data gradients on the weights as stored (DSKC_SM90_WEIGHT=in_place) are bitwise the ones on Wᵀ") {
  dskc_test::require_gpu();
  if (!gemm_sm90_gpu()) return;
  struct Case {
    const char* name;
    int H, heads, I, B, S;
    DType t;
    bool pre, gelu_ckpt;
    const char* dgrad;
    const char* gelu_save;
  };
  const Case cases[] = {
      {"fp16 BERT-Large Pre-LN, 3 x 77 rows", 1024, 16, 4096, 3, 77, DType::F16, true, false, "sm90", "grad"},
      {"bf16 BERT-Base Post-LN, 2 x 200 rows, h kept", 768, 12, 3072, 2, 200, DType::BF16, false, false, "sm90", "input"},
      {"fp16 BERT-Large Pre-LN gelu_checkpoint, 1 x 7 rows", 1024, 16, 4096, 1, 7, DType::F16, true, true, "cublas",
       "grad"},
      {"bf16 BERT-Large Pre-LN, 16 x 128 rows", 1024, 16, 4096, 16, 128, DType::BF16, true, false, "sm90", "grad"},
  };
  const dskc_test::ScopedEnv ffn("DSKC_FFN_GEMM", "sm90");
  for (const Case& k : cases) {
    INFO(k.name);
    std::printf("case %s\n", k.name);
    LayerConfig c = make_cfg(k.B, k.S, k.H, k.heads, k.I, k.t, k.pre, 0.1, 0.1);
    c.gelu_checkpoint = k.gelu_ckpt;
    const bool dgrad = std::string(k.dgrad) == "sm90";
    std::vector<std::string> read = {"grad_inter"};
    if (dgrad) read.push_back("linear_out");
    if (dgrad && k.pre) read.push_back("grad_h_b");
    const dskc_test::ScopedEnv dg("DSKC_DGRAD_GEMM", k.dgrad), save("DSKC_GELU_SAVE", k.gelu_save);
    compare_env_paths(
        c, k.B, k.S, 73, 5, "DSKC_SM90_WEIGHT", "transpose", {"in_place"}, read,
        [&](const LayerPlan& plan, const std::string&) {
          REQUIRE(plan.ffn_gemm_sm90_bwd);
          REQUIRE(plan.dgrad_gemm_sm90 == dgrad);
          REQUIRE(plan.sm90_weight_in_place);
          for (const auto& kern : plan.kernels) {
            CHECK_MESSAGE(kern.op != "weight_transpose", kern.name);
            if (kern.op == "gemm_sm90" && kern.pass == Pass::Backward)
              CHECK_MESSAGE(kern.instantiation.find(", true>") != std::string::npos, kern.name);
          }
          for (const auto& w : plan.workspace)
            for (const char* wt : {"output_w_t", "inter_w_t", "attn_ow_t", "attn_qkvw_t"}) CHECK(w.name != wt);
        },
        [&](const GpuResult& got, const GpuResult& want) { check_bitwise(got, want, read); });
  }
}
