// PlainTransformerLayer: the unfused schedule (see plain_layer.h; math in docs/DESIGN.md).
// Notation: rows = batch·seq, H hidden, I intermediate, d head dim, n = batch·heads; "[n,S,S]"
// tensors are dense at the call's sequence length S, so their flat element index is the
// attention-probability dropout index of DESIGN.md, and "[rows,H]" tensors' flat index is the
// hidden-dropout index. GEMMs follow runtime/gemm.h: row-major C[M,N] = op(A)[M,K]·op(B)[K,N].
#include "runtime/plain_layer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <mutex>

#include "compiler/errors.h"
#include "compiler/nvrtc_compile.h"
#include "compiler/plain_codegen.h"
#include "runtime/driver.h"
#include "runtime/host_tensor.h"
#include "runtime/layer_params.h"
#include "runtime/plain_kernel_params.h"

namespace dskc {

namespace {
constexpr size_t kAlign = 256;
size_t align_up(size_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

// Process-wide cache of compiled plain modules (one per source text and arch): the N layers
// of a model share one NVRTC compile.
std::string compiled_plain_module(const LayerConfig& cfg, const std::string& arch) {
  static std::mutex mu;
  static std::map<std::string, std::string> images;
  CompileOptions co;
  co.arch = arch;
  const GeneratedPlainModule gen = emit_plain_module(plain_module_config(cfg), arch, nvrtc_options(co));
  std::lock_guard<std::mutex> lock(mu);
  auto it = images.find(gen.source);
  if (it != images.end()) return it->second;
  const CompiledModule cm = compile_cached(gen.source, "dskc_plain_layer.cu", co);
  images[gen.source] = cm.image;
  return cm.image;
}

// The buffers of one call: name -> elements and element bytes.
struct BufferSpec {
  std::string name;
  size_t count;
  size_t elem_bytes;
};

// Tensors kept from forward to backward (and forward's own intermediates).
std::vector<BufferSpec> forward_buffers(const LayerConfig& c, int batch, int seq) {
  const size_t rows = static_cast<size_t>(batch) * seq, H = c.hidden_size, I = c.intermediate_size;
  const size_t nss = static_cast<size_t>(batch) * c.heads * seq * seq;
  const size_t eb = dtype_bytes(c.dtype());
  std::vector<BufferSpec> v = {
      {"ln_norm_out", rows * H, eb},  {"qkv", rows * 3 * H, eb},     {"q", rows * H, eb},
      {"k", rows * H, eb},            {"v", rows * H, eb},           {"scores", nss, eb},
      {"probs", nss, eb},             {"probs_drop", nss, eb},       {"ctx_heads", rows * H, eb},
      {"ctx", rows * H, eb},          {"attn_lin", rows * H, eb},    {"attn_drop", rows * H, eb},
      {"attn_sum", rows * H, eb},     {"ln_attn_out", rows * H, eb}, {"inter", rows * I, eb},
      {"gelu", rows * I, eb},         {"ffn_lin", rows * H, eb},     {"ffn_drop", rows * H, eb},
      {"ffn_sum", rows * H, eb},      {"ln_norm_mean", rows, 4},     {"ln_norm_rstd", rows, 4},
      {"ln_attn_mean", rows, 4},      {"ln_attn_rstd", rows, 4},
  };
  return v;
}

// Gradient tensors that live only inside backward() (in the Context's shared scratch).
std::vector<BufferSpec> backward_buffers(const LayerConfig& c, int batch, int seq) {
  const size_t rows = static_cast<size_t>(batch) * seq, H = c.hidden_size, I = c.intermediate_size;
  const size_t nss = static_cast<size_t>(batch) * c.heads * seq * seq;
  const size_t eb = dtype_bytes(c.dtype());
  return {
      {"d_s2", rows * H, eb},         {"d_ffn_lin", rows * H, eb},    {"d_gelu", rows * I, eb},
      {"d_inter", rows * I, eb},      {"d_h2", rows * H, eb},         {"d_ln", rows * H, eb},
      {"d_a", rows * H, eb},          {"d_s1", rows * H, eb},         {"d_attn_lin", rows * H, eb},
      {"d_ctx", rows * H, eb},        {"d_ctx_heads", rows * H, eb},  {"d_probs_drop", nss, eb},
      {"d_probs", nss, eb},           {"d_scores", nss, eb},          {"d_q", rows * H, eb},
      {"d_k", rows * H, eb},          {"d_v", rows * H, eb},          {"d_qkv", rows * 3 * H, eb},
      {"d_h1", rows * H, eb},
  };
}

unsigned stride_grid(size_t n) {
  return static_cast<unsigned>(std::clamp<size_t>((n + kPlainBlock - 1) / kPlainBlock, 1, 65535));
}
unsigned column_grid(int cols) { return static_cast<unsigned>((cols + 31) / 32); }
}  // namespace

PlainTransformerLayer::PlainTransformerLayer(Context& ctx, const LayerConfig& cfg, const LayerOptions& opt)
    : ctx_(ctx), cfg_(cfg), opt_(opt) {
  validate(cfg_, "layer config");
  ctx_.make_current();
  const std::string arch = detect_gpu_arch(ctx_.device()).value_or("sm_90");
  module_ = std::make_unique<LoadedModule>(ctx_, compiled_plain_module(cfg_, arch));
  gemm_ = std::make_unique<Gemm>(ctx_, cfg_.dtype(), false);
  const size_t eb = dtype_bytes(cfg_.dtype());
  size_t off = 0;
  for (const auto& p : layer_param_specs(cfg_)) {
    param_offset_[p.name] = off;
    off += align_up(static_cast<size_t>(p.numel()) * eb);
  }
  params_ = DeviceBuffer(ctx_, off);
  grads_ = cfg_.training ? DeviceBuffer(ctx_, off) : DeviceBuffer();
  size_t boff = 0;
  for (const auto& s : forward_buffers(cfg_, cfg_.batch_size, cfg_.max_seq_length)) {
    buffer_offset_[s.name] = boff;
    boff += align_up(s.count * s.elem_bytes);
  }
  buffers_ = DeviceBuffer(ctx_, boff);
  DSKC_CU(cuMemsetD8Async(params_.ptr(), 0, params_.bytes(), ctx_.stream()));
  if (grads_.bytes()) DSKC_CU(cuMemsetD8Async(grads_.ptr(), 0, grads_.bytes(), ctx_.stream()));
  ctx_.synchronize();
}

PlainTransformerLayer::~PlainTransformerLayer() = default;

CUdeviceptr PlainTransformerLayer::param(const std::string& name) const {
  auto it = param_offset_.find(name);
  if (it == param_offset_.end()) throw Error(ErrorKind::Input, fmt::format("no layer parameter '{}'", name));
  return params_.ptr() + it->second;
}

CUdeviceptr PlainTransformerLayer::grad(const std::string& name) const {
  auto it = param_offset_.find(name);
  if (it == param_offset_.end()) throw Error(ErrorKind::Input, fmt::format("no layer parameter '{}'", name));
  if (!grads_.bytes()) throw Error(ErrorKind::Input, "this layer was built with training = false: no gradients");
  return grads_.ptr() + it->second;
}

void PlainTransformerLayer::set_params(const std::map<std::string, std::vector<float>>& host) {
  for (const auto& p : layer_param_specs(cfg_)) {
    auto it = host.find(p.name);
    if (it == host.end()) throw Error(ErrorKind::Input, fmt::format("parameter '{}' is missing", p.name));
    const size_t n = static_cast<size_t>(p.numel());
    if (it->second.size() != n)
      throw Error(ErrorKind::Input,
                  fmt::format("parameter '{}' has {} values, expected {}", p.name, it->second.size(), n));
    upload(ctx_, param(p.name), it->second, cfg_.dtype());
  }
}

std::map<std::string, std::vector<float>> PlainTransformerLayer::get_params() const {
  std::map<std::string, std::vector<float>> out;
  for (const auto& p : layer_param_specs(cfg_))
    out[p.name] = download(ctx_, param(p.name), static_cast<size_t>(p.numel()), cfg_.dtype());
  return out;
}

std::map<std::string, std::vector<float>> PlainTransformerLayer::get_grads() const {
  std::map<std::string, std::vector<float>> out;
  for (const auto& p : layer_param_specs(cfg_))
    out[p.name] = download(ctx_, grad(p.name), static_cast<size_t>(p.numel()), cfg_.dtype());
  return out;
}

CUdeviceptr PlainTransformerLayer::b(const std::string& name) const {
  auto it = buffer_offset_.find(name);
  DSKC_ASSERT(it != buffer_offset_.end(), "plain layer has no buffer " + name);
  return buffers_.ptr() + it->second;
}

void PlainTransformerLayer::launch(const char* kernel, size_t grid, const void* params) {
  if (grid == 0) return;
  DSKC_ASSERT(grid <= 0x7fffffffu, "grid too large");
  CUfunction f = module_->function(kernel);
  void* args[] = {const_cast<void*>(params)};
  if (prof_) prof_->begin(kernel, ctx_.stream());
  DSKC_CU(cuLaunchKernel(f, static_cast<unsigned>(grid), 1, 1, kPlainBlock, 1, 1, 0, ctx_.stream(), args, nullptr));
  if (prof_) prof_->end(ctx_.stream());
}

void PlainTransformerLayer::gemm(const char* name, const GemmShape& s, CUdeviceptr a, CUdeviceptr b_, CUdeviceptr c,
                                 float alpha, float beta) {
  if (prof_) prof_->begin(name, ctx_.stream());
  gemm_->run(s, a, b_, c, alpha, beta);
  if (prof_) prof_->end(ctx_.stream());
}

void PlainTransformerLayer::gemm_strided(const char* name, const GemmShape& s, CUdeviceptr a, long long sa,
                                         CUdeviceptr b_, long long sb, CUdeviceptr c, long long sc, int count,
                                         float alpha) {
  if (prof_) prof_->begin(name, ctx_.stream());
  gemm_->run_strided_batched(s, a, sa, b_, sb, c, sc, count, alpha, 0.f);
  if (prof_) prof_->end(ctx_.stream());
}

#define P(x) reinterpret_cast<pkp::Ptr>(x)
#define M(x) reinterpret_cast<pkp::MPtr>(x)
#define F(x) reinterpret_cast<float*>(x)

void PlainTransformerLayer::bias_add(CUdeviceptr x, const char* bias, CUdeviceptr y, int rows, int cols) {
  pkp::BiasAdd p{P(x), P(param(bias)), M(y), static_cast<uint64_t>(rows) * cols, cols};
  launch("plain_bias_add", stride_grid(p.n), &p);
}

void PlainTransformerLayer::add(CUdeviceptr a, CUdeviceptr b_, CUdeviceptr y, size_t n) {
  pkp::Add p{P(a), P(b_), M(y), n};
  launch("plain_add", stride_grid(n), &p);
}

void PlainTransformerLayer::dropout(bool attn, uint32_t stream, CUdeviceptr x, CUdeviceptr y, size_t n) {
  pkp::Dropout p{P(x), M(y), n, kp::DropoutArgs{cfg_.seed, opt_.layer_id, step_}, stream};
  launch(attn ? "plain_dropout_attn" : "plain_dropout_hidden", stride_grid((n + 3) / 4), &p);
}

void PlainTransformerLayer::layernorm_fwd(CUdeviceptr x, const char* gamma, const char* beta, CUdeviceptr y,
                                          const char* stats, int rows) {
  pkp::LnFwd p{P(x), P(param(gamma)), P(param(beta)), M(y), F(b(std::string(stats) + "_mean")),
               F(b(std::string(stats) + "_rstd")), rows, cfg_.hidden_size};
  launch("plain_layernorm_fwd", static_cast<size_t>(rows), &p);
}

void PlainTransformerLayer::layernorm_bwd(CUdeviceptr dy, CUdeviceptr x, const char* gamma, const char* beta,
                                          const char* stats, CUdeviceptr dx, int rows) {
  const float* mean = F(b(std::string(stats) + "_mean"));
  const float* rstd = F(b(std::string(stats) + "_rstd"));
  const int H = cfg_.hidden_size;
  pkp::LnBwd p{P(dy), P(x), mean, rstd, P(param(gamma)), M(dx), rows, H};
  launch("plain_layernorm_bwd", static_cast<size_t>(rows), &p);
  pkp::LnParamGrad g{P(dy), P(x), mean, rstd, M(grad(gamma)), M(grad(beta)), rows, H};
  launch("plain_layernorm_param_grad", column_grid(H), &g);
}

void PlainTransformerLayer::colsum(CUdeviceptr x, int rows, int cols, const char* bias) {
  pkp::ColSum p{P(x), M(grad(bias)), rows, cols};
  launch("plain_colsum", column_grid(cols), &p);
}

void PlainTransformerLayer::heads(bool to, CUdeviceptr src, CUdeviceptr dst, int ld, int col0) {
  pkp::Heads p{P(src), M(dst), batch_, seq_, cfg_.heads, cfg_.head_dim(), ld, col0};
  launch(to ? "plain_to_heads" : "plain_from_heads",
         stride_grid(static_cast<size_t>(batch_) * seq_ * cfg_.hidden_size), &p);
}

void PlainTransformerLayer::forward(CUdeviceptr input, CUdeviceptr mask, CUdeviceptr output, int batch, int seq,
                                    uint32_t step) {
  const LayerConfig& c = cfg_;
  if (batch < 1 || batch > c.batch_size)
    throw Error(ErrorKind::Input,
                fmt::format("batch {} exceeds the layer's batch_size {}: raise batch_size in the layer config (the "
                            "layer's buffers are sized for it) or lower the prediction batch to {} or less",
                            batch, c.batch_size, c.batch_size));
  if (seq < 1 || seq > c.max_seq_length)
    throw Error(ErrorKind::Input,
                fmt::format("sequence length {} exceeds the layer's max_seq_length {}: raise max_seq_length in the "
                            "layer config or shorten the inputs",
                            seq, c.max_seq_length));
  ctx_.make_current();
  batch_ = batch;
  seq_ = seq;
  step_ = step;
  input_ = input;
  mask_ = mask;
  output_ = output;
  const int H = c.hidden_size, I = c.intermediate_size, rows = batch * seq, d = c.head_dim(), n = batch * c.heads;
  const size_t rh = static_cast<size_t>(rows) * H, nss = static_cast<size_t>(n) * seq * seq;
  const bool pre = c.pre_layer_norm;
  const bool attn_drop = c.training && c.attn_dropout_ratio > 0, hid_drop = c.training && c.hidden_dropout_ratio > 0;
  const float scale = 1.f / std::sqrt(static_cast<float>(d));
  const long long sd = static_cast<long long>(seq) * d, ss = static_cast<long long>(seq) * seq;

  // ---- attention block ----
  // h1 = LN(x; norm) in Pre-LN, x in Post-LN
  CUdeviceptr h1 = input;
  if (pre) {
    h1 = b("ln_norm_out");
    layernorm_fwd(input, "norm_w", "norm_b", h1, "ln_norm", rows);
  }
  // qkv = h1 · attn_qkvwᵀ + attn_qkvb                                           [rows, 3H]
  gemm("plain_qkv_fwd", {false, true, rows, 3 * H, H, H, H, 3 * H}, h1, param("attn_qkvw"), b("qkv"));
  bias_add(b("qkv"), "attn_qkvb", b("qkv"), rows, 3 * H);
  // q, k, v: [n, S, d]
  heads(true, b("qkv"), b("q"), 3 * H, 0);
  heads(true, b("qkv"), b("k"), 3 * H, H);
  heads(true, b("qkv"), b("v"), 3 * H, 2 * H);
  // scores = q · kᵀ / sqrt(d) (+ mask)                                         [n, S, S]
  gemm_strided("plain_attn_scores_fwd", {false, true, seq, seq, d, d, d, seq}, b("q"), sd, b("k"), sd, b("scores"),
               ss, n, scale);
  if (mask) {
    pkp::MaskAdd p{M(b("scores")), P(mask), batch, c.heads, seq};
    launch("plain_mask_add", stride_grid(nss), &p);
  }
  {
    pkp::SoftmaxFwd p{P(b("scores")), M(b("probs")), n * seq, seq};
    launch("plain_softmax_fwd", static_cast<size_t>(n) * seq, &p);
  }
  const CUdeviceptr pd = attn_drop ? b("probs_drop") : b("probs");
  if (attn_drop) dropout(true, 1 /* kStreamAttnProbs */, b("probs"), pd, nss);
  // ctx_heads = probs_drop · v                                                  [n, S, d]
  gemm_strided("plain_attn_context_fwd", {false, false, seq, d, seq, seq, d, d}, pd, ss, b("v"), sd, b("ctx_heads"),
               sd, n);
  heads(false, b("ctx_heads"), b("ctx"), H, 0);  // ctx [rows, H]
  // attn_lin = ctx · attn_owᵀ + attn_ob; dropout; attn_sum = x + attn_drop       [rows, H]
  gemm("plain_attn_out_fwd", {false, true, rows, H, H, H, H, H}, b("ctx"), param("attn_ow"), b("attn_lin"));
  bias_add(b("attn_lin"), "attn_ob", b("attn_lin"), rows, H);
  const CUdeviceptr ad = hid_drop ? b("attn_drop") : b("attn_lin");
  if (hid_drop) dropout(false, 2 /* kStreamAttnOutput */, b("attn_lin"), ad, rh);
  add(input, ad, b("attn_sum"), rh);
  // ln_attn_out = LN(attn_sum; attn_n): the FFN input (Pre-LN: h2; Post-LN: a)
  layernorm_fwd(b("attn_sum"), "attn_nw", "attn_nb", b("ln_attn_out"), "ln_attn", rows);

  // ---- FFN block ----
  gemm("plain_inter_fwd", {false, true, rows, I, H, H, H, I}, b("ln_attn_out"), param("inter_w"), b("inter"));
  bias_add(b("inter"), "inter_b", b("inter"), rows, I);
  {
    pkp::GeluFwd p{P(b("inter")), M(b("gelu")), static_cast<uint64_t>(rows) * I};
    launch("plain_gelu_fwd", stride_grid(p.n), &p);
  }
  gemm("plain_output_fwd", {false, true, rows, H, I, I, I, H}, b("gelu"), param("output_w"), b("ffn_lin"));
  bias_add(b("ffn_lin"), "output_b", b("ffn_lin"), rows, H);
  const CUdeviceptr fd = hid_drop ? b("ffn_drop") : b("ffn_lin");
  if (hid_drop) dropout(false, 3 /* kStreamFfnOutput */, b("ffn_lin"), fd, rh);
  if (pre) {
    add(b("attn_sum"), fd, output, rh);  // out = a + drop(FFN(LN(a)))
  } else {
    add(b("ln_attn_out"), fd, b("ffn_sum"), rh);  // s2 = a + drop(FFN(a))
    layernorm_fwd(b("ffn_sum"), "norm_w", "norm_b", output, "ln_norm", rows);
  }
  have_forward_ = c.training;
}

void PlainTransformerLayer::backward(CUdeviceptr grad_output, CUdeviceptr grad_input) {
  const LayerConfig& c = cfg_;
  if (!c.training) throw Error(ErrorKind::Input, "backward() on a layer built with training = false");
  if (!have_forward_) throw Error(ErrorKind::Input, "backward() without a preceding forward()");
  ctx_.make_current();
  const int H = c.hidden_size, I = c.intermediate_size, seq = seq_, rows = batch_ * seq_, d = c.head_dim(),
            n = batch_ * c.heads;
  const size_t rh = static_cast<size_t>(rows) * H, nss = static_cast<size_t>(n) * seq * seq;
  const bool pre = c.pre_layer_norm;
  const bool attn_drop = c.attn_dropout_ratio > 0, hid_drop = c.hidden_dropout_ratio > 0;
  const float scale = 1.f / std::sqrt(static_cast<float>(d));
  const long long sd = static_cast<long long>(seq) * d, ss = static_cast<long long>(seq) * seq;

  // Backward-only tensors in the Context's shared scratch.
  std::map<std::string, CUdeviceptr> g;
  {
    const auto specs = backward_buffers(c, batch_, seq_);
    size_t total = 0;
    for (const auto& s : specs) total += align_up(s.count * s.elem_bytes);
    CUdeviceptr base = ctx_.scratch(total);
    size_t off = 0;
    for (const auto& s : specs) {
      g[s.name] = base + off;
      off += align_up(s.count * s.elem_bytes);
    }
  }

  // ---- FFN block ----
  // d_s2: gradient wrt the FFN residual sum (Pre-LN: the output itself)
  CUdeviceptr d_s2 = grad_output;
  if (!pre) {
    layernorm_bwd(grad_output, b("ffn_sum"), "norm_w", "norm_b", "ln_norm", g["d_s2"], rows);
    d_s2 = g["d_s2"];
  }
  const CUdeviceptr d_fl = hid_drop ? g["d_ffn_lin"] : d_s2;  // gradient wrt ffn_lin (after bias)
  if (hid_drop) dropout(false, 3, d_s2, d_fl, rh);
  colsum(d_fl, rows, H, "output_b");
  // output_w grad [H, I] = d_flᵀ · gelu ; d_gelu [rows, I] = d_fl · output_w
  gemm("plain_output_wgrad", {true, false, H, I, rows, H, I, I}, d_fl, b("gelu"), grad("output_w"));
  gemm("plain_output_dgrad", {false, false, rows, I, H, H, I, I}, d_fl, param("output_w"), g["d_gelu"]);
  {
    pkp::GeluBwd p{P(g["d_gelu"]), P(b("inter")), M(g["d_inter"]), static_cast<uint64_t>(rows) * I};
    launch("plain_gelu_bwd", stride_grid(p.n), &p);
  }
  colsum(g["d_inter"], rows, I, "inter_b");
  // inter_w grad [I, H] = d_interᵀ · ln_attn_out ; d_h2 [rows, H] = d_inter · inter_w
  gemm("plain_inter_wgrad", {true, false, I, H, rows, I, H, H}, g["d_inter"], b("ln_attn_out"), grad("inter_w"));
  gemm("plain_inter_dgrad", {false, false, rows, H, I, I, H, H}, g["d_inter"], param("inter_w"), g["d_h2"]);

  // ---- attention LayerNorm ----
  if (pre) {
    // a = attn_sum feeds LN_attn (-> FFN) and the residual: d_s1 = LN_attn_bwd(d_h2) + d_s2
    layernorm_bwd(g["d_h2"], b("attn_sum"), "attn_nw", "attn_nb", "ln_attn", g["d_ln"], rows);
    add(g["d_ln"], d_s2, g["d_s1"], rh);
  } else {
    // a = LN_attn(attn_sum) feeds the FFN and the residual: d_a = d_h2 + d_s2; d_s1 = LN_attn_bwd(d_a)
    add(g["d_h2"], d_s2, g["d_a"], rh);
    layernorm_bwd(g["d_a"], b("attn_sum"), "attn_nw", "attn_nb", "ln_attn", g["d_s1"], rows);
  }
  const CUdeviceptr d_s1 = g["d_s1"];

  // ---- attention block ----
  const CUdeviceptr d_al = hid_drop ? g["d_attn_lin"] : d_s1;  // gradient wrt attn_lin (after bias)
  if (hid_drop) dropout(false, 2, d_s1, d_al, rh);
  colsum(d_al, rows, H, "attn_ob");
  // attn_ow grad [H, H] = d_alᵀ · ctx ; d_ctx [rows, H] = d_al · attn_ow
  gemm("plain_attn_out_wgrad", {true, false, H, H, rows, H, H, H}, d_al, b("ctx"), grad("attn_ow"));
  gemm("plain_attn_out_dgrad", {false, false, rows, H, H, H, H, H}, d_al, param("attn_ow"), g["d_ctx"]);
  heads(true, g["d_ctx"], g["d_ctx_heads"], H, 0);  // [n, S, d]
  const CUdeviceptr pd = attn_drop ? b("probs_drop") : b("probs");
  // d_probs_drop [n, S, S] = d_ctx_heads · vᵀ ; d_v [n, S, d] = probs_dropᵀ · d_ctx_heads
  gemm_strided("plain_attn_dprobs", {false, true, seq, seq, d, d, d, seq}, g["d_ctx_heads"], sd, b("v"), sd,
               g["d_probs_drop"], ss, n);
  gemm_strided("plain_attn_dv", {true, false, seq, d, seq, seq, d, d}, pd, ss, g["d_ctx_heads"], sd, g["d_v"], sd, n);
  const CUdeviceptr d_probs = attn_drop ? g["d_probs"] : g["d_probs_drop"];
  if (attn_drop) dropout(true, 1, g["d_probs_drop"], d_probs, nss);
  {
    // the mask add passes the gradient through unchanged
    pkp::SoftmaxBwd p{P(d_probs), P(b("probs")), M(g["d_scores"]), n * seq, seq};
    launch("plain_softmax_bwd", static_cast<size_t>(n) * seq, &p);
  }
  // d_q = d_scores · k / sqrt(d) ; d_k = d_scoresᵀ · q / sqrt(d)                  [n, S, d]
  gemm_strided("plain_attn_dq", {false, false, seq, d, seq, seq, d, d}, g["d_scores"], ss, b("k"), sd, g["d_q"], sd,
               n, scale);
  gemm_strided("plain_attn_dk", {true, false, seq, d, seq, seq, d, d}, g["d_scores"], ss, b("q"), sd, g["d_k"], sd,
               n, scale);
  heads(false, g["d_q"], g["d_qkv"], 3 * H, 0);
  heads(false, g["d_k"], g["d_qkv"], 3 * H, H);
  heads(false, g["d_v"], g["d_qkv"], 3 * H, 2 * H);
  colsum(g["d_qkv"], rows, 3 * H, "attn_qkvb");
  // attn_qkvw grad [3H, H] = d_qkvᵀ · h1 ; d_h1 [rows, H] = d_qkv · attn_qkvw
  const CUdeviceptr h1 = pre ? b("ln_norm_out") : input_;
  gemm("plain_qkv_wgrad", {true, false, 3 * H, H, rows, 3 * H, H, H}, g["d_qkv"], h1, grad("attn_qkvw"));
  gemm("plain_qkv_dgrad", {false, false, rows, H, 3 * H, 3 * H, H, H}, g["d_qkv"], param("attn_qkvw"), g["d_h1"]);
  if (pre) {
    // x feeds LN_norm (-> attention) and the residual: dx = LN_norm_bwd(d_h1) + d_s1
    layernorm_bwd(g["d_h1"], input_, "norm_w", "norm_b", "ln_norm", g["d_ln"], rows);
    add(g["d_ln"], d_s1, grad_input, rh);
  } else {
    add(g["d_h1"], d_s1, grad_input, rh);  // x feeds the attention and the residual
  }
}

}  // namespace dskc
