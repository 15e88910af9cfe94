// CPU reference layer: forward and backward of docs/DESIGN.md's layer math in double (see
// cpu_reference.h for the storage-precision emulation and the activation names). Loops run over
// contiguous rows; map lookups happen once per step, never per element.
#include "runtime/cpu_reference.h"

#include "runtime/cpu_ops.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <limits>
#include <numbers>

#include "compiler/errors.h"
#include "runtime/host_float.h"
#include "runtime/layer_params.h"
#include "templates/common/philox.cuh"

namespace dskc {
namespace {

using Vec = std::vector<double>;

// Vector-returning forms of runtime/cpu_ops.h (shared with the trainer's CPU model).
Vec linear_forward(const Vec& x, const Vec& w, const Vec& b, int n_rows, int in, int out) {
  Vec y(static_cast<size_t>(n_rows) * out);
  cpu_ops::linear_forward(x.data(), w.data(), b.data(), n_rows, in, out, y.data());
  return y;
}

// Returns dx = dy·W; accumulates dW += dyᵀ·x and db += sum over rows of dy.
Vec linear_backward(const Vec& dy, const Vec& x, const Vec& w, int n_rows, int in, int out, Vec& dw,
                    Vec& db) {
  Vec dx(static_cast<size_t>(n_rows) * in);
  cpu_ops::linear_backward(dy.data(), x.data(), w.data(), n_rows, in, out, dx.data(), dw.data(), db.data());
  return dx;
}

// LN over the last dim with biased variance; records mean and 1/sqrt(var + eps) per row.
Vec layer_norm_forward(const Vec& x, const Vec& w, const Vec& b, int n_rows, int h, double eps,
                       Vec& mean_out, Vec& rstd_out) {
  Vec y(x.size());
  mean_out.assign(n_rows, 0.0);
  rstd_out.assign(n_rows, 0.0);
  cpu_ops::layer_norm_forward(x.data(), w.data(), b.data(), n_rows, h, eps, y.data(), mean_out.data(),
                              rstd_out.data());
  return y;
}

// dx = rstd·(dxhat − mean(dxhat) − xhat·mean(dxhat·xhat)), dxhat = dy·w; dw, db accumulate.
Vec layer_norm_backward(const Vec& dy, const Vec& x, const Vec& mean, const Vec& rstd, const Vec& w,
                        int n_rows, int h, Vec& dw, Vec& db) {
  Vec dx(x.size());
  cpu_ops::layer_norm_backward(dy.data(), x.data(), mean.data(), rstd.data(), w.data(), n_rows, h, dx.data(),
                               dw.data(), db.data());
  return dx;
}

using cpu_ops::gelu;
using cpu_ops::gelu_grad;

Vec add(const Vec& a, const Vec& b) {
  Vec y(a.size());
  for (size_t i = 0; i < a.size(); ++i) y[i] = a[i] + b[i];
  return y;
}

}  // namespace

CpuReferenceLayer::CpuReferenceLayer(const LayerConfig& cfg, uint32_t layer_id, DType storage)
    : cfg_(cfg), layer_id_(layer_id), storage_(storage) {
  hidden_ = cfg.hidden_size;
  heads_ = cfg.heads;
  inter_ = cfg.intermediate_size > 0 ? cfg.intermediate_size : 4 * cfg.hidden_size;
  if (hidden_ <= 0 || heads_ <= 0 || hidden_ % heads_ != 0) {
    throw Error(ErrorKind::Config, fmt::format("hidden_size {} is not a positive multiple of heads {}",
                                               hidden_, heads_));
  }
  head_dim_ = hidden_ / heads_;
}

void CpuReferenceLayer::store(std::vector<double>& v) const {
  if (storage_ == DType::F32) return;
  for (double& x : v) x = round_to_dtype(x, storage_);
}

void CpuReferenceLayer::check_params(const Tensors& params) const {
  for (const ParamSpec& spec : layer_param_specs(cfg_)) {
    auto it = params.find(spec.name);
    if (it == params.end()) {
      throw Error(ErrorKind::Input, fmt::format("parameter {} is missing", spec.name));
    }
    if (static_cast<int64_t>(it->second.size()) != spec.numel()) {
      throw Error(ErrorKind::Input, fmt::format("parameter {} has {} values, expected {} (shape [{}])",
                                                spec.name, it->second.size(), spec.numel(),
                                                fmt::join(spec.shape, ",")));
    }
  }
}

std::vector<uint8_t> CpuReferenceLayer::make_mask(uint32_t stream, uint64_t count, double ratio) const {
  return cpu_ops::dropout_keep_mask({cfg_.seed, layer_id_, step_}, stream, count, ratio);
}

// y = keep ? x / (1 − ratio) : 0; identity (a rounded copy) when the mask is empty.
std::vector<double> CpuReferenceLayer::apply_dropout(const Vec& x, const std::vector<uint8_t>& keep,
                                                     double ratio) const {
  Vec y = x;
  if (!keep.empty()) {
    const double scale = ratio < 1.0 ? 1.0 / (1.0 - ratio) : 0.0;
    for (size_t i = 0; i < y.size(); ++i) y[i] = keep[i] ? y[i] * scale : 0.0;
  }
  store(y);
  return y;
}

std::vector<double> CpuReferenceLayer::forward(const Vec& input, const Vec* mask, int batch, int seq,
                                               uint32_t step, const Tensors& params) {
  if (batch > cfg_.batch_size) {
    throw Error(ErrorKind::Input,
                fmt::format("batch {} exceeds the layer's batch_size {}: raise batch_size in the layer "
                            "config or lower the prediction batch",
                            batch, cfg_.batch_size));
  }
  if (seq > cfg_.max_seq_length) {
    throw Error(ErrorKind::Input,
                fmt::format("sequence length {} exceeds the layer's max_seq_length {}: raise "
                            "max_seq_length in the layer config or shorten the input sequences",
                            seq, cfg_.max_seq_length));
  }
  if (batch <= 0 || seq <= 0) {
    throw Error(ErrorKind::Input, fmt::format("batch {} and sequence length {} must be positive", batch, seq));
  }
  const size_t n_act = static_cast<size_t>(batch) * seq * hidden_;
  if (input.size() != n_act) {
    throw Error(ErrorKind::Input, fmt::format("input has {} values, expected batch {} x seq {} x hidden {} = {}",
                                              input.size(), batch, seq, hidden_, n_act));
  }
  if (mask && mask->size() != static_cast<size_t>(batch) * seq) {
    throw Error(ErrorKind::Input, fmt::format("input_mask has {} values, expected batch {} x seq {} = {}",
                                              mask->size(), batch, seq, static_cast<size_t>(batch) * seq));
  }
  check_params(params);

  batch_ = batch;
  seq_ = seq;
  step_ = step;
  attn_ratio_ = cfg_.training ? cfg_.attn_dropout_ratio : 0.0;
  hidden_ratio_ = cfg_.training ? cfg_.hidden_dropout_ratio : 0.0;
  params_.clear();
  for (const ParamSpec& spec : layer_param_specs(cfg_)) {
    Vec p = params.at(spec.name);
    store(p);  // callers pass rounded values; rounding again is a no-op
    params_.emplace(spec.name, std::move(p));
  }
  mask_ = mask ? *mask : Vec{};
  acts_.clear();
  keep_probs_ = make_mask(dskc_rng::kStreamAttnProbs, static_cast<uint64_t>(batch) * heads_ * seq * seq,
                          attn_ratio_);
  keep_attn_ = make_mask(dskc_rng::kStreamAttnOutput, n_act, hidden_ratio_);
  keep_ffn_ = make_mask(dskc_rng::kStreamFfnOutput, n_act, hidden_ratio_);

  const int rows = batch * seq;
  Vec x = input;
  store(x);
  act("input") = x;
  const double eps = cfg_.layer_norm_eps;
  if (cfg_.pre_layer_norm) {
    Vec h1 = layer_norm_forward(x, params_["norm_w"], params_["norm_b"], rows, hidden_, eps,
                                ln_norm_stats_.mean, ln_norm_stats_.rstd);
    store(h1);
    act("ln_norm") = h1;
    attention_forward(h1);
    Vec a = add(x, acts_["attn_dropped"]);
    store(a);
    act("attn_residual") = a;
    Vec h2 = layer_norm_forward(a, params_["attn_nw"], params_["attn_nb"], rows, hidden_, eps,
                                ln_attn_stats_.mean, ln_attn_stats_.rstd);
    store(h2);
    act("ln_attn") = h2;
    ffn_forward(h2);
    Vec out = add(a, acts_["ffn_dropped"]);
    store(out);
    act("ffn_residual") = out;
    act("output") = out;
  } else {
    attention_forward(x);
    Vec s1 = add(x, acts_["attn_dropped"]);
    store(s1);
    act("attn_residual") = s1;
    Vec a = layer_norm_forward(s1, params_["attn_nw"], params_["attn_nb"], rows, hidden_, eps,
                               ln_attn_stats_.mean, ln_attn_stats_.rstd);
    store(a);
    act("ln_attn") = a;
    ffn_forward(a);
    Vec s2 = add(a, acts_["ffn_dropped"]);
    store(s2);
    act("ffn_residual") = s2;
    Vec out = layer_norm_forward(s2, params_["norm_w"], params_["norm_b"], rows, hidden_, eps,
                                 ln_norm_stats_.mean, ln_norm_stats_.rstd);
    store(out);
    act("ln_norm") = out;
    act("output") = out;
  }
  have_forward_ = true;
  return acts_["output"];
}

void CpuReferenceLayer::attention_forward(const Vec& h) {
  const int B = batch_, S = seq_, H = hidden_, NH = heads_, D = head_dim_, rows = B * S;
  Vec qkv = linear_forward(h, params_["attn_qkvw"], params_["attn_qkvb"], rows, H, 3 * H);
  store(qkv);
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  const size_t n_probs = static_cast<size_t>(B) * NH * S * S;
  Vec scores(n_probs), probs(n_probs);
  for (int b = 0; b < B; ++b) {
    for (int hd = 0; hd < NH; ++hd) {
      for (int i = 0; i < S; ++i) {
        const double* q = &qkv[(static_cast<size_t>(b) * S + i) * 3 * H + hd * D];
        double* sr = &scores[((static_cast<size_t>(b) * NH + hd) * S + i) * S];
        for (int j = 0; j < S; ++j) {
          const double* k = &qkv[(static_cast<size_t>(b) * S + j) * 3 * H + H + hd * D];
          double acc = 0.0;
          for (int c = 0; c < D; ++c) acc += q[c] * k[c];
          sr[j] = acc * scale;
        }
      }
    }
  }
  store(scores);
  for (int b = 0; b < B; ++b) {
    const double* m = mask_.empty() ? nullptr : &mask_[static_cast<size_t>(b) * S];
    for (int hd = 0; hd < NH; ++hd) {
      for (int i = 0; i < S; ++i) {
        const size_t row = ((static_cast<size_t>(b) * NH + hd) * S + i) * S;
        double mx = -std::numeric_limits<double>::infinity();
        for (int j = 0; j < S; ++j) {
          probs[row + j] = scores[row + j] + (m ? m[j] : 0.0);
          mx = std::max(mx, probs[row + j]);
        }
        if (mx == -std::numeric_limits<double>::infinity()) {  // every key masked with -inf
          for (int j = 0; j < S; ++j) probs[row + j] = 0.0;
          continue;
        }
        double sum = 0.0;
        for (int j = 0; j < S; ++j) sum += (probs[row + j] = std::exp(probs[row + j] - mx));
        for (int j = 0; j < S; ++j) probs[row + j] /= sum;
      }
    }
  }
  store(probs);
  Vec pd = apply_dropout(probs, keep_probs_, attn_ratio_);
  Vec ctx(static_cast<size_t>(rows) * H, 0.0);
  for (int b = 0; b < B; ++b) {
    for (int hd = 0; hd < NH; ++hd) {
      for (int i = 0; i < S; ++i) {
        const double* pr = &pd[((static_cast<size_t>(b) * NH + hd) * S + i) * S];
        double* cr = &ctx[(static_cast<size_t>(b) * S + i) * H + hd * D];
        for (int j = 0; j < S; ++j) {
          const double* v = &qkv[(static_cast<size_t>(b) * S + j) * 3 * H + 2 * H + hd * D];
          for (int c = 0; c < D; ++c) cr[c] += pr[j] * v[c];
        }
      }
    }
  }
  store(ctx);
  Vec out = linear_forward(ctx, params_["attn_ow"], params_["attn_ob"], rows, H, H);
  store(out);
  act("attn_dropped") = apply_dropout(out, keep_attn_, hidden_ratio_);
  act("qkv") = std::move(qkv);
  act("scores") = std::move(scores);
  act("probs") = std::move(probs);
  act("probs_dropped") = std::move(pd);
  act("context") = std::move(ctx);
  act("attn_out") = std::move(out);
}

void CpuReferenceLayer::ffn_forward(const Vec& h) {
  const int rows = batch_ * seq_;
  Vec inter = linear_forward(h, params_["inter_w"], params_["inter_b"], rows, hidden_, inter_);
  store(inter);
  Vec g(inter.size());
  for (size_t i = 0; i < inter.size(); ++i) g[i] = gelu(inter[i], cfg_.gelu_approximation);
  store(g);
  Vec out = linear_forward(g, params_["output_w"], params_["output_b"], rows, inter_, hidden_);
  store(out);
  act("ffn_dropped") = apply_dropout(out, keep_ffn_, hidden_ratio_);
  act("inter") = std::move(inter);
  act("gelu") = std::move(g);
  act("ffn_out") = std::move(out);
}

CpuReferenceLayer::Tensors CpuReferenceLayer::backward(const Vec& grad_output) {
  if (!have_forward_) {
    throw Error(ErrorKind::Input, "backward called before forward: run forward on the batch first");
  }
  const int rows = batch_ * seq_;
  if (grad_output.size() != static_cast<size_t>(rows) * hidden_) {
    throw Error(ErrorKind::Input, fmt::format("grad_output has {} values, expected batch {} x seq {} x hidden {} = {}",
                                              grad_output.size(), batch_, seq_, hidden_,
                                              static_cast<size_t>(rows) * hidden_));
  }
  Tensors grads;
  for (const ParamSpec& spec : layer_param_specs(cfg_)) {
    grads["grad_" + spec.name].assign(static_cast<size_t>(spec.numel()), 0.0);
  }
  Vec dout = grad_output;
  store(dout);
  Vec dx;
  if (cfg_.pre_layer_norm) {
    // out = a + drop(FFN(LN_attn(a))); a = x + drop(Attn(LN_norm(x)))
    Vec dh2 = ffn_backward(dout, grads);
    Vec da = layer_norm_backward(dh2, acts_["attn_residual"], ln_attn_stats_.mean, ln_attn_stats_.rstd,
                                 params_["attn_nw"], rows, hidden_, grads["grad_attn_nw"],
                                 grads["grad_attn_nb"]);
    for (size_t i = 0; i < da.size(); ++i) da[i] += dout[i];
    store(da);
    Vec dh1 = attention_backward(da, grads);
    dx = layer_norm_backward(dh1, acts_["input"], ln_norm_stats_.mean, ln_norm_stats_.rstd,
                             params_["norm_w"], rows, hidden_, grads["grad_norm_w"], grads["grad_norm_b"]);
    for (size_t i = 0; i < dx.size(); ++i) dx[i] += da[i];
  } else {
    // out = LN_norm(s2), s2 = a + drop(FFN(a)); a = LN_attn(s1), s1 = x + drop(Attn(x))
    Vec ds2 = layer_norm_backward(dout, acts_["ffn_residual"], ln_norm_stats_.mean, ln_norm_stats_.rstd,
                                  params_["norm_w"], rows, hidden_, grads["grad_norm_w"],
                                  grads["grad_norm_b"]);
    store(ds2);
    Vec da = ffn_backward(ds2, grads);
    for (size_t i = 0; i < da.size(); ++i) da[i] += ds2[i];
    store(da);
    Vec ds1 = layer_norm_backward(da, acts_["attn_residual"], ln_attn_stats_.mean, ln_attn_stats_.rstd,
                                  params_["attn_nw"], rows, hidden_, grads["grad_attn_nw"],
                                  grads["grad_attn_nb"]);
    store(ds1);
    dx = attention_backward(ds1, grads);
    for (size_t i = 0; i < dx.size(); ++i) dx[i] += ds1[i];
  }
  store(dx);
  for (auto& [name, g] : grads) store(g);
  grads["grad_input"] = std::move(dx);
  return grads;
}

// Returns the gradient wrt the FFN input (rounded); accumulates FFN parameter gradients.
std::vector<double> CpuReferenceLayer::ffn_backward(const Vec& d_ffn_dropped, Tensors& grads) {
  const int rows = batch_ * seq_;
  Vec d_out = apply_dropout(d_ffn_dropped, keep_ffn_, hidden_ratio_);
  Vec dg = linear_backward(d_out, acts_["gelu"], params_["output_w"], rows, inter_, hidden_,
                           grads["grad_output_w"], grads["grad_output_b"]);
  store(dg);
  const Vec& inter = acts_["inter"];
  for (size_t i = 0; i < dg.size(); ++i) dg[i] *= gelu_grad(inter[i], cfg_.gelu_approximation);
  store(dg);
  Vec dh = linear_backward(dg, acts_["ln_attn"], params_["inter_w"], rows, hidden_, inter_,
                           grads["grad_inter_w"], grads["grad_inter_b"]);
  store(dh);
  return dh;
}

// Returns the gradient wrt the attention input (rounded); accumulates attention parameter grads.
std::vector<double> CpuReferenceLayer::attention_backward(const Vec& d_attn_dropped, Tensors& grads) {
  const int B = batch_, S = seq_, H = hidden_, NH = heads_, D = head_dim_, rows = B * S;
  Vec d_out = apply_dropout(d_attn_dropped, keep_attn_, hidden_ratio_);
  Vec dctx = linear_backward(d_out, acts_["context"], params_["attn_ow"], rows, H, H,
                             grads["grad_attn_ow"], grads["grad_attn_ob"]);
  store(dctx);
  const Vec& qkv = acts_["qkv"];
  const Vec& probs = acts_["probs"];
  const Vec& pd = acts_["probs_dropped"];
  const size_t n_probs = probs.size();
  // d(probs_dropped) = dctx·Vᵀ per head; dV = probs_droppedᵀ·dctx.
  Vec dqkv(static_cast<size_t>(rows) * 3 * H, 0.0);
  Vec dpd(n_probs);
  for (int b = 0; b < B; ++b) {
    for (int hd = 0; hd < NH; ++hd) {
      for (int i = 0; i < S; ++i) {
        const size_t row = ((static_cast<size_t>(b) * NH + hd) * S + i) * S;
        const double* dc = &dctx[(static_cast<size_t>(b) * S + i) * H + hd * D];
        for (int j = 0; j < S; ++j) {
          const size_t vj = (static_cast<size_t>(b) * S + j) * 3 * H + 2 * H + hd * D;
          double acc = 0.0;
          for (int c = 0; c < D; ++c) {
            acc += dc[c] * qkv[vj + c];
            dqkv[vj + c] += pd[row + j] * dc[c];
          }
          dpd[row + j] = acc;
        }
      }
    }
  }
  store(dpd);
  Vec dp = apply_dropout(dpd, keep_probs_, attn_ratio_);
  // Softmax backward: ds = p·(dp − Σ_j dp·p); the mask is additive so it passes ds through.
  Vec ds(n_probs);
  for (size_t r = 0; r < n_probs; r += S) {
    double dot = 0.0;
    for (int j = 0; j < S; ++j) dot += dp[r + j] * probs[r + j];
    for (int j = 0; j < S; ++j) ds[r + j] = probs[r + j] * (dp[r + j] - dot);
  }
  store(ds);
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  for (int b = 0; b < B; ++b) {
    for (int hd = 0; hd < NH; ++hd) {
      for (int i = 0; i < S; ++i) {
        const size_t row = ((static_cast<size_t>(b) * NH + hd) * S + i) * S;
        const size_t qi = (static_cast<size_t>(b) * S + i) * 3 * H + hd * D;
        for (int j = 0; j < S; ++j) {
          const double g = ds[row + j] * scale;
          if (g == 0.0) continue;
          const size_t kj = (static_cast<size_t>(b) * S + j) * 3 * H + H + hd * D;
          for (int c = 0; c < D; ++c) {
            dqkv[qi + c] += g * qkv[kj + c];
            dqkv[kj + c] += g * qkv[qi + c];
          }
        }
      }
    }
  }
  store(dqkv);
  const Vec& h = cfg_.pre_layer_norm ? acts_["ln_norm"] : acts_["input"];
  Vec dh = linear_backward(dqkv, h, params_["attn_qkvw"], rows, H, 3 * H, grads["grad_attn_qkvw"],
                           grads["grad_attn_qkvb"]);
  store(dh);
  return dh;
}

const std::vector<double>& CpuReferenceLayer::activation(const std::string& name) const {
  auto it = acts_.find(name);
  if (it == acts_.end()) {
    throw Error(ErrorKind::Input, fmt::format("no activation named '{}' (run forward first; names: {})",
                                              name, fmt::join(activation_names(), ", ")));
  }
  return it->second;
}

std::vector<std::string> CpuReferenceLayer::activation_names() const {
  std::vector<std::string> names;
  for (const auto& [name, v] : acts_) names.push_back(name);
  return names;
}

}  // namespace dskc
