// CPU backend: BERT forward, losses and backward (model and precision notes in bert_cpu.h).
// Buffers are flat row-major doubles; map lookups happen once per tensor per micro-batch.
#include "trainer/bert_cpu.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "compiler/errors.h"
#include "runtime/host_float.h"
#include "runtime/layer_params.h"
#include "templates/common/philox.cuh"
#include "runtime/cpu_ops.h"

namespace dskc {
namespace {

using Vec = std::vector<double>;
constexpr double kMaskedScore = -10000.0;

// Cross-entropy of each row of logits [n, k] against labels; returns Σ loss and writes
// d = (softmax − onehot) · coef.
double softmax_xent(const Vec& logits, const std::vector<int>& labels, int n, int k, double coef, Vec& d) {
  d.assign(static_cast<size_t>(n) * k, 0.0);
  double total = 0.0;
  for (int r = 0; r < n; ++r) {
    const double* l = &logits[static_cast<size_t>(r) * k];
    double* dr = &d[static_cast<size_t>(r) * k];
    double mx = -std::numeric_limits<double>::infinity();
    for (int j = 0; j < k; ++j) mx = std::max(mx, l[j]);
    double sum = 0.0;
    for (int j = 0; j < k; ++j) sum += (dr[j] = std::exp(l[j] - mx));
    const double lse = mx + std::log(sum);
    total += lse - l[labels[r]];
    for (int j = 0; j < k; ++j) dr[j] = dr[j] / sum * coef;
    dr[labels[r]] -= coef;
  }
  return total;
}

}  // namespace

CpuBackend::CpuBackend(const BackendOptions& opt) : opt_(opt) {
  layer_cfg_ = backend_layer_config(opt);
  specs_ = model_param_specs(opt.shape);
  for (const ParamSpec& p : layer_param_specs(layer_cfg_)) layer_param_names_.push_back(p.name);
  DSKC_ASSERT(layer_param_names_.size() == kLayerParams, "twelve layer parameters");

  const size_t n = specs_.size();
  params_.resize(n);
  grads_.resize(n);
  exp_avg_.resize(n);
  exp_avg_sq_.resize(n);
  layer_idx_.assign(static_cast<size_t>(opt.shape.num_hidden_layers), {});
  for (size_t i = 0; i < n; ++i) {
    const size_t numel = static_cast<size_t>(specs_[i].numel());
    params_[i].assign(numel, 0.0f);
    grads_[i].assign(numel, 0.0f);
    exp_avg_[i].assign(numel, 0.0f);
    exp_avg_sq_[i].assign(numel, 0.0f);
    const ModelParamSpec& s = specs_[i];
    if (s.layer >= 0) {
      auto it = std::find(layer_param_names_.begin(), layer_param_names_.end(), s.layer_param);
      layer_idx_[static_cast<size_t>(s.layer)][static_cast<size_t>(it - layer_param_names_.begin())] =
          static_cast<int>(i);
    }
  }
  word_ = index_of("bert.embeddings.word_embeddings.weight");
  pos_ = index_of("bert.embeddings.position_embeddings.weight");
  type_ = index_of("bert.embeddings.token_type_embeddings.weight");
  emb_ln_w_ = index_of("bert.embeddings.LayerNorm.weight");
  emb_ln_b_ = index_of("bert.embeddings.LayerNorm.bias");
  if (opt.shape.pre_layer_norm) {
    final_ln_w_ = index_of("bert.encoder.FinalLayerNorm.weight");
    final_ln_b_ = index_of("bert.encoder.FinalLayerNorm.bias");
  }
  pool_w_ = index_of("bert.pooler.dense.weight");
  pool_b_ = index_of("bert.pooler.dense.bias");
  tr_w_ = index_of("cls.predictions.transform.dense.weight");
  tr_b_ = index_of("cls.predictions.transform.dense.bias");
  tr_ln_w_ = index_of("cls.predictions.transform.LayerNorm.weight");
  tr_ln_b_ = index_of("cls.predictions.transform.LayerNorm.bias");
  dec_b_ = index_of("cls.predictions.bias");
  nsp_w_ = index_of("cls.seq_relationship.weight");
  nsp_b_ = index_of("cls.seq_relationship.bias");
  layers_.reserve(static_cast<size_t>(opt.shape.num_hidden_layers));
  for (int i = 0; i < opt.shape.num_hidden_layers; ++i)
    layers_.emplace_back(layer_cfg_, static_cast<uint32_t>(i), opt.dtype);
}

int CpuBackend::index_of(const std::string& name) const {
  for (size_t i = 0; i < specs_.size(); ++i)
    if (specs_[i].name == name) return static_cast<int>(i);
  DSKC_ASSERT(false, "unknown parameter " + name);
  return -1;
}

std::string CpuBackend::name() const {
  return fmt::format("cpu ({}, {})", opt_.transformer_kernel ? "DeepSpeed transformer kernel layer" : "plain BertLayer",
                     dtype_name(opt_.dtype));
}

void CpuBackend::import_params(const ParamMap& params, const std::string& source) {
  check_param_map(params, specs_, source);
  for (size_t i = 0; i < specs_.size(); ++i) params_[i] = params.at(specs_[i].name);
}

ParamMap CpuBackend::export_params() const {
  ParamMap out;
  for (size_t i = 0; i < specs_.size(); ++i) out[specs_[i].name] = params_[i];
  return out;
}

void CpuBackend::import_optimizer_state(const ParamMap& state, const std::string& source) {
  std::vector<ModelParamSpec> both;
  for (const ModelParamSpec& s : specs_) {
    both.push_back({exp_avg_name(s.name), s.shape, -1, ""});
    both.push_back({exp_avg_sq_name(s.name), s.shape, -1, ""});
  }
  check_param_map(state, both, source);
  for (size_t i = 0; i < specs_.size(); ++i) {
    exp_avg_[i] = state.at(exp_avg_name(specs_[i].name));
    exp_avg_sq_[i] = state.at(exp_avg_sq_name(specs_[i].name));
  }
}

ParamMap CpuBackend::export_optimizer_state() const {
  ParamMap out;
  for (size_t i = 0; i < specs_.size(); ++i) {
    out[exp_avg_name(specs_[i].name)] = exp_avg_[i];
    out[exp_avg_sq_name(specs_[i].name)] = exp_avg_sq_[i];
  }
  return out;
}

void CpuBackend::zero_grads() {
  for (auto& g : grads_) std::fill(g.begin(), g.end(), 0.0f);
}

CpuBackend::Vec CpuBackend::param(int idx) const {
  const std::vector<float>& p = params_[static_cast<size_t>(idx)];
  Vec out(p.size());
  if (opt_.dtype == DType::F32) {
    std::copy(p.begin(), p.end(), out.begin());
  } else {
    for (size_t i = 0; i < p.size(); ++i) out[i] = round_to_dtype(p[i], opt_.dtype);
  }
  return out;
}

void CpuBackend::add_grad(int idx, const Vec& g) {
  std::vector<float>& acc = grads_[static_cast<size_t>(idx)];
  DSKC_ASSERT(acc.size() == g.size(), "gradient size of " + specs_[static_cast<size_t>(idx)].name);
  const DType t = opt_.dtype;
  for (size_t i = 0; i < g.size(); ++i) acc[i] = static_cast<float>(round_to_dtype(acc[i] + g[i], t));
}

StepLoss CpuBackend::forward_backward(const Batch& batch, const MicroStep& m) {
  check_batch(batch, opt_);
  mark(phase::kBatchUpload);
  const BertShape& shape = opt_.shape;
  const int B = batch.batch, S = batch.seq_len, P = batch.max_pred, H = shape.hidden_size, V = shape.vocab_size;
  const int rows = B * S;
  const size_t nact = static_cast<size_t>(rows) * H;
  const double eps = shape.layer_norm_eps;
  const double coef = m.loss_scale / m.accumulation;
  const double hidden_p = shape.hidden_dropout_prob;

  // ---- embeddings: LN(word[id] + pos[s] + type[seg]), then dropout (stream 4, layer 0)
  const Vec word = param(word_), posw = param(pos_), typew = param(type_);
  const Vec emb_w = param(emb_ln_w_), emb_b = param(emb_ln_b_);
  Vec emb(nact);
  for (int r = 0; r < rows; ++r) {
    const double* wr = &word[static_cast<size_t>(batch.input_ids[r]) * H];
    const double* pr = &posw[static_cast<size_t>(r % S) * H];
    const double* tr = &typew[static_cast<size_t>(batch.segment_ids[r]) * H];
    double* er = &emb[static_cast<size_t>(r) * H];
    for (int c = 0; c < H; ++c) er[c] = wr[c] + pr[c] + tr[c];
  }
  Vec emb_mean(rows), emb_rstd(rows), x(nact);
  cpu_ops::layer_norm_forward(emb.data(), emb_w.data(), emb_b.data(), rows, H, eps, x.data(), emb_mean.data(),
                              emb_rstd.data());
  const std::vector<uint8_t> keep =
      cpu_ops::dropout_keep_mask({opt_.seed, 0, m.rng_step}, kStreamEmbeddingOutput, nact, hidden_p);
  if (hidden_p > 0.0) {
    const double scale = 1.0 / (1.0 - hidden_p);
    for (size_t i = 0; i < nact; ++i) x[i] = keep[i] ? x[i] * scale : 0.0;
  }
  mark(phase::kEmbeddingsFwd);

  // ---- encoder
  Vec mask(static_cast<size_t>(rows));
  for (int r = 0; r < rows; ++r) mask[r] = batch.input_mask[r] ? 0.0 : kMaskedScore;
  for (size_t l = 0; l < layers_.size(); ++l) {
    CpuReferenceLayer::Tensors tensors;
    for (int k = 0; k < kLayerParams; ++k) tensors[layer_param_names_[k]] = param(layer_idx_[l][k]);
    x = layers_[l].forward(x, &mask, B, S, m.rng_step, tensors);
  }
  mark(phase::kEncoderFwd);
  Vec y = x, fin_mean, fin_rstd, fin_w, fin_b;
  if (final_ln_w_ >= 0) {
    fin_w = param(final_ln_w_);
    fin_b = param(final_ln_b_);
    fin_mean.resize(rows);
    fin_rstd.resize(rows);
    cpu_ops::layer_norm_forward(x.data(), fin_w.data(), fin_b.data(), rows, H, eps, y.data(), fin_mean.data(),
                                fin_rstd.data());
  }

  // ---- MLM head at the real predictions (slots before the first position 0)
  std::vector<int> pred_rows, pred_labels;
  for (int b = 0; b < B; ++b) {
    for (int k = 0; k < P; ++k) {
      const int p = batch.masked_lm_positions[static_cast<size_t>(b) * P + k];
      if (p == 0) break;
      pred_rows.push_back(b * S + p);
      pred_labels.push_back(batch.masked_lm_ids[static_cast<size_t>(b) * P + k]);
    }
  }
  const int M = static_cast<int>(pred_rows.size());
  StepLoss loss;
  loss.predictions = M;
  loss.sequences = B;
  Vec dy(nact, 0.0);
  Vec g_word(word.size(), 0.0), g_dec_b(static_cast<size_t>(V), 0.0);
  Vec g_tr_w(static_cast<size_t>(H) * H, 0.0), g_tr_b(H, 0.0), g_tr_ln_w(H, 0.0), g_tr_ln_b(H, 0.0);
  if (M > 0) {
    const Vec tr_w = param(tr_w_), tr_b = param(tr_b_), tr_ln_w = param(tr_ln_w_), tr_ln_b = param(tr_ln_b_);
    const Vec dec_b = param(dec_b_);
    const size_t mh = static_cast<size_t>(M) * H;
    Vec hm(mh), t(mh), g(mh), u(mh), u_mean(M), u_rstd(M), logits(static_cast<size_t>(M) * V), dlogits;
    for (int i = 0; i < M; ++i)
      std::copy_n(&y[static_cast<size_t>(pred_rows[i]) * H], H, &hm[static_cast<size_t>(i) * H]);
    cpu_ops::linear_forward(hm.data(), tr_w.data(), tr_b.data(), M, H, H, t.data());
    for (size_t i = 0; i < mh; ++i) g[i] = cpu_ops::gelu(t[i], shape.gelu);
    cpu_ops::layer_norm_forward(g.data(), tr_ln_w.data(), tr_ln_b.data(), M, H, eps, u.data(), u_mean.data(),
                                u_rstd.data());
    cpu_ops::linear_forward(u.data(), word.data(), dec_b.data(), M, H, V, logits.data());
    loss.mlm_loss = softmax_xent(logits, pred_labels, M, V, coef / M, dlogits) / M;
    // backward through the head
    Vec du(mh), dg(mh), dhm(mh);
    cpu_ops::linear_backward(dlogits.data(), u.data(), word.data(), M, H, V, du.data(), g_word.data(), g_dec_b.data());
    cpu_ops::layer_norm_backward(du.data(), g.data(), u_mean.data(), u_rstd.data(), tr_ln_w.data(), M, H, dg.data(),
                                 g_tr_ln_w.data(), g_tr_ln_b.data());
    for (size_t i = 0; i < mh; ++i) dg[i] *= cpu_ops::gelu_grad(t[i], shape.gelu);
    cpu_ops::linear_backward(dg.data(), hm.data(), tr_w.data(), M, H, H, dhm.data(), g_tr_w.data(), g_tr_b.data());
    for (int i = 0; i < M; ++i) {
      double* d = &dy[static_cast<size_t>(pred_rows[i]) * H];
      const double* s = &dhm[static_cast<size_t>(i) * H];
      for (int c = 0; c < H; ++c) d[c] += s[c];
    }
  }

  // ---- NSP head: classifier(tanh(pooler(h_[CLS])))
  const Vec pool_w = param(pool_w_), pool_b = param(pool_b_), nsp_w = param(nsp_w_), nsp_b = param(nsp_b_);
  Vec cls(static_cast<size_t>(B) * H), pooled(static_cast<size_t>(B) * H), l2(static_cast<size_t>(B) * 2), dl2;
  for (int b = 0; b < B; ++b) std::copy_n(&y[static_cast<size_t>(b) * S * H], H, &cls[static_cast<size_t>(b) * H]);
  cpu_ops::linear_forward(cls.data(), pool_w.data(), pool_b.data(), B, H, H, pooled.data());
  for (double& v : pooled) v = std::tanh(v);
  cpu_ops::linear_forward(pooled.data(), nsp_w.data(), nsp_b.data(), B, H, 2, l2.data());
  std::vector<int> nsp_labels(batch.next_sentence_labels.begin(), batch.next_sentence_labels.end());
  loss.nsp_loss = softmax_xent(l2, nsp_labels, B, 2, coef / B, dl2) / B;
  Vec g_nsp_w(static_cast<size_t>(2) * H, 0.0), g_nsp_b(2, 0.0), g_pool_w(static_cast<size_t>(H) * H, 0.0),
      g_pool_b(H, 0.0), dpooled(static_cast<size_t>(B) * H), dcls(static_cast<size_t>(B) * H);
  cpu_ops::linear_backward(dl2.data(), pooled.data(), nsp_w.data(), B, H, 2, dpooled.data(), g_nsp_w.data(),
                           g_nsp_b.data());
  for (size_t i = 0; i < dpooled.size(); ++i) dpooled[i] *= 1.0 - pooled[i] * pooled[i];
  cpu_ops::linear_backward(dpooled.data(), cls.data(), pool_w.data(), B, H, H, dcls.data(), g_pool_w.data(),
                           g_pool_b.data());
  for (int b = 0; b < B; ++b) {
    double* d = &dy[static_cast<size_t>(b) * S * H];
    for (int c = 0; c < H; ++c) d[c] += dcls[static_cast<size_t>(b) * H + c];
  }

  // ---- encoder backward
  Vec dx(nact);
  if (final_ln_w_ >= 0) {
    Vec g_w(H, 0.0), g_b(H, 0.0);
    cpu_ops::layer_norm_backward(dy.data(), x.data(), fin_mean.data(), fin_rstd.data(), fin_w.data(), rows, H,
                                 dx.data(), g_w.data(), g_b.data());
    add_grad(final_ln_w_, g_w);
    add_grad(final_ln_b_, g_b);
  } else {
    dx = std::move(dy);
  }
  mark(phase::kHeads);
  for (size_t l = layers_.size(); l-- > 0;) {
    CpuReferenceLayer::Tensors grads = layers_[l].backward(dx);
    for (int k = 0; k < kLayerParams; ++k) add_grad(layer_idx_[l][k], grads.at("grad_" + layer_param_names_[k]));
    dx = std::move(grads.at("grad_input"));
  }
  mark(phase::kEncoderBwd);

  // ---- embeddings backward
  if (!keep.empty()) {
    const double scale = 1.0 / (1.0 - hidden_p);
    for (size_t i = 0; i < nact; ++i) dx[i] = keep[i] ? dx[i] * scale : 0.0;
  }
  Vec demb(nact), g_emb_w(H, 0.0), g_emb_b(H, 0.0), g_pos(posw.size(), 0.0), g_type(typew.size(), 0.0);
  cpu_ops::layer_norm_backward(dx.data(), emb.data(), emb_mean.data(), emb_rstd.data(), emb_w.data(), rows, H,
                               demb.data(), g_emb_w.data(), g_emb_b.data());
  for (int r = 0; r < rows; ++r) {
    const double* d = &demb[static_cast<size_t>(r) * H];
    double* gw = &g_word[static_cast<size_t>(batch.input_ids[r]) * H];
    double* gp = &g_pos[static_cast<size_t>(r % S) * H];
    double* gt = &g_type[static_cast<size_t>(batch.segment_ids[r]) * H];
    for (int c = 0; c < H; ++c) {
      gw[c] += d[c];
      gp[c] += d[c];
      gt[c] += d[c];
    }
  }
  add_grad(word_, g_word);
  add_grad(pos_, g_pos);
  add_grad(type_, g_type);
  add_grad(emb_ln_w_, g_emb_w);
  add_grad(emb_ln_b_, g_emb_b);
  add_grad(tr_w_, g_tr_w);
  add_grad(tr_b_, g_tr_b);
  add_grad(tr_ln_w_, g_tr_ln_w);
  add_grad(tr_ln_b_, g_tr_ln_b);
  add_grad(dec_b_, g_dec_b);
  add_grad(pool_w_, g_pool_w);
  add_grad(pool_b_, g_pool_b);
  add_grad(nsp_w_, g_nsp_w);
  add_grad(nsp_b_, g_nsp_b);
  mark(phase::kEmbeddingsBwd);
  return loss;
}

bool CpuBackend::grads_finite() {
  for (const auto& g : grads_)
    for (float v : g)
      if (!std::isfinite(v)) return false;
  return true;
}

double CpuBackend::grad_norm(double grad_scale) {
  double sum = 0.0;
  for (const auto& g : grads_)
    for (float v : g) sum += static_cast<double>(v) * v;
  return std::sqrt(sum) / grad_scale;
}

void CpuBackend::optimizer_step(const OptimizerSettings& s, const UpdateArgs& a) {
  for (size_t i = 0; i < specs_.size(); ++i)
    optimizer_update(s, a, specs_[i].weight_decay(), params_[i].data(), grads_[i].data(), exp_avg_[i].data(),
                     exp_avg_sq_[i].data(), params_[i].size());
}

ParamMap CpuBackend::export_grads() const {
  ParamMap out;
  for (size_t i = 0; i < specs_.size(); ++i) out[specs_[i].name] = grads_[i];
  return out;
}

void CpuBackend::inject_grad_overflow() { grads_[0][0] = std::numeric_limits<float>::infinity(); }

}  // namespace dskc
