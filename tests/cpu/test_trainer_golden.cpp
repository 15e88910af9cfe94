// Golden test of the CPU backend: fixed tiny weights and a fixed batch give the loss of a
// separate, deliberately plain implementation of the BERT pre-training model written here
// (per sample, per token, per head loops in double, straight from the formulas of
// docs/DESIGN.md and trainer/bert_model.h), and the backend's gradients match central finite
// differences of that implementation's loss for elements of every parameter group, for Pre-LN
// and Post-LN and both GELU forms. Dropout is off (dropout masks are tested with the layer).
#include <doctest/doctest.h>

#include <cmath>
#include <numbers>
#include <random>

#include "tests/cpu/test_trainer_util.h"
#include "trainer/bert_cpu.h"
#include "trainer/bert_model.h"

using namespace dskc;
using trainer_test::contains;

namespace {

using D = std::vector<double>;
using DMap = std::map<std::string, D>;

double gelu(double x, GeluForm f) {
  if (f == GeluForm::Tanh)
    return 0.5 * x * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (x + 0.044715 * x * x * x)));
  return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
}

// y = W x + b for one vector (W [out, in]).
D affine(const D& w, const D& b, const D& x, int out) {
  const int in = static_cast<int>(x.size());
  D y(out);
  for (int o = 0; o < out; ++o) {
    double acc = b.empty() ? 0.0 : b[o];
    for (int i = 0; i < in; ++i) acc += w[static_cast<size_t>(o) * in + i] * x[i];
    y[o] = acc;
  }
  return y;
}

D layer_norm(const D& x, const D& w, const D& b, double eps) {
  double mean = 0, var = 0;
  for (double v : x) mean += v;
  mean /= x.size();
  for (double v : x) var += (v - mean) * (v - mean);
  var /= x.size();
  D y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = (x[i] - mean) / std::sqrt(var + eps) * w[i] + b[i];
  return y;
}

D plus(const D& a, const D& b) {
  D y(a.size());
  for (size_t i = 0; i < a.size(); ++i) y[i] = a[i] + b[i];
  return y;
}

// Cross-entropy of one row of logits against a label.
double xent(const D& logits, int label) {
  double mx = logits[0];
  for (double v : logits) mx = std::max(mx, v);
  double sum = 0;
  for (double v : logits) sum += std::exp(v - mx);
  return mx + std::log(sum) - logits[label];
}

// The whole model's MLM + NSP loss for one batch.
double reference_loss(const BertShape& s, const DMap& P, const Batch& batch, double* mlm_out = nullptr,
                      double* nsp_out = nullptr) {
  const int S = batch.seq_len, H = s.hidden_size, NH = s.num_attention_heads, Dh = H / NH, I = s.intermediate_size;
  const double eps = s.layer_norm_eps;
  auto p = [&](const std::string& n) -> const D& { return P.at(n); };
  auto row = [&](const std::string& n, int r) {
    const D& t = p(n);
    return D(t.begin() + static_cast<ptrdiff_t>(r) * H, t.begin() + static_cast<ptrdiff_t>(r + 1) * H);
  };
  double mlm_sum = 0, nsp_sum = 0;
  int predictions = 0;
  for (int b = 0; b < batch.batch; ++b) {
    std::vector<D> x(S);
    for (int t = 0; t < S; ++t) {
      const int id = batch.input_ids[b * S + t], seg = batch.segment_ids[b * S + t];
      D e = plus(plus(row("bert.embeddings.word_embeddings.weight", id), row("bert.embeddings.position_embeddings.weight", t)),
                 row("bert.embeddings.token_type_embeddings.weight", seg));
      x[t] = layer_norm(e, p("bert.embeddings.LayerNorm.weight"), p("bert.embeddings.LayerNorm.bias"), eps);
    }
    for (int l = 0; l < s.num_hidden_layers; ++l) {
      auto lp = [&](const char* n) -> const D& { return p(encoder_param_name(l, n)); };
      auto attention = [&](const std::vector<D>& h) {
        std::vector<D> qkv(S), out(S);
        for (int t = 0; t < S; ++t) qkv[t] = affine(lp("attn_qkvw"), lp("attn_qkvb"), h[t], 3 * H);
        for (int i = 0; i < S; ++i) {
          D ctx(H, 0.0);
          for (int hd = 0; hd < NH; ++hd) {
            D score(S);
            for (int j = 0; j < S; ++j) {
              double dot = 0;
              for (int c = 0; c < Dh; ++c) dot += qkv[i][hd * Dh + c] * qkv[j][H + hd * Dh + c];
              score[j] = dot / std::sqrt(static_cast<double>(Dh)) + (batch.input_mask[b * S + j] ? 0.0 : -10000.0);
            }
            double mx = score[0], sum = 0;
            for (double v : score) mx = std::max(mx, v);
            for (double& v : score) sum += (v = std::exp(v - mx));
            for (int j = 0; j < S; ++j)
              for (int c = 0; c < Dh; ++c) ctx[hd * Dh + c] += score[j] / sum * qkv[j][2 * H + hd * Dh + c];
          }
          out[i] = affine(lp("attn_ow"), lp("attn_ob"), ctx, H);
        }
        return out;
      };
      auto ffn = [&](const D& h) {
        D inter = affine(lp("inter_w"), lp("inter_b"), h, I);
        for (double& v : inter) v = gelu(v, s.gelu);
        return affine(lp("output_w"), lp("output_b"), inter, H);
      };
      if (s.pre_layer_norm) {
        std::vector<D> h1(S);
        for (int t = 0; t < S; ++t) h1[t] = layer_norm(x[t], lp("norm_w"), lp("norm_b"), eps);
        std::vector<D> att = attention(h1);
        for (int t = 0; t < S; ++t) {
          D a = plus(x[t], att[t]);
          x[t] = plus(a, ffn(layer_norm(a, lp("attn_nw"), lp("attn_nb"), eps)));
        }
      } else {
        std::vector<D> att = attention(x);
        for (int t = 0; t < S; ++t) {
          D a = layer_norm(plus(x[t], att[t]), lp("attn_nw"), lp("attn_nb"), eps);
          x[t] = layer_norm(plus(a, ffn(a)), lp("norm_w"), lp("norm_b"), eps);
        }
      }
    }
    if (s.pre_layer_norm)
      for (int t = 0; t < S; ++t)
        x[t] = layer_norm(x[t], p("bert.encoder.FinalLayerNorm.weight"), p("bert.encoder.FinalLayerNorm.bias"), eps);
    for (int k = 0; k < batch.max_pred; ++k) {
      const int pos = batch.masked_lm_positions[b * batch.max_pred + k];
      if (pos == 0) break;
      D t = affine(p("cls.predictions.transform.dense.weight"), p("cls.predictions.transform.dense.bias"), x[pos], H);
      for (double& v : t) v = gelu(v, s.gelu);
      D u = layer_norm(t, p("cls.predictions.transform.LayerNorm.weight"), p("cls.predictions.transform.LayerNorm.bias"),
                       eps);
      D logits = affine(p("bert.embeddings.word_embeddings.weight"), p("cls.predictions.bias"), u, s.vocab_size);
      mlm_sum += xent(logits, batch.masked_lm_ids[b * batch.max_pred + k]);
      ++predictions;
    }
    D pooled = affine(p("bert.pooler.dense.weight"), p("bert.pooler.dense.bias"), x[0], H);
    for (double& v : pooled) v = std::tanh(v);
    nsp_sum += xent(affine(p("cls.seq_relationship.weight"), p("cls.seq_relationship.bias"), pooled, 2),
                    batch.next_sentence_labels[b]);
  }
  const double mlm = predictions ? mlm_sum / predictions : 0.0, nsp = nsp_sum / batch.batch;
  if (mlm_out) *mlm_out = mlm;
  if (nsp_out) *nsp_out = nsp;
  return mlm + nsp;
}

Batch fixed_batch() {
  // Two sequences of 8 tokens (the second padded after 6), 3 prediction slots each.
  Batch b;
  b.batch = 2;
  b.seq_len = 8;
  b.max_pred = 3;
  b.input_ids = {2, 17, 4, 33, 3, 25, 9, 3, /**/ 2, 40, 4, 12, 3, 4, 0, 0};
  b.input_mask = {1, 1, 1, 1, 1, 1, 1, 1, /**/ 1, 1, 1, 1, 1, 1, 0, 0};
  b.segment_ids = {0, 0, 0, 0, 0, 1, 1, 1, /**/ 0, 0, 0, 0, 0, 1, 0, 0};
  b.masked_lm_positions = {2, 6, 0, /**/ 2, 5, 0};  // one padding slot each
  b.masked_lm_ids = {21, 9, 0, /**/ 30, 44, 0};
  b.next_sentence_labels = {0, 1};
  return b;
}

BertShape tiny_shape(bool pre_ln, GeluForm gelu) {
  BertShape s;
  s.vocab_size = 50;
  s.hidden_size = 8;
  s.num_hidden_layers = 2;
  s.num_attention_heads = 2;
  s.intermediate_size = 12;
  s.max_position_embeddings = 10;
  s.type_vocab_size = 2;
  s.hidden_dropout_prob = 0.0;
  s.attention_probs_dropout_prob = 0.0;
  s.initializer_range = 0.3;  // large enough for every path to matter
  s.pre_layer_norm = pre_ln;
  s.gelu = gelu;
  return s;
}

// BERT init plus noise on every tensor, so LayerNorm weights and biases are not 1 / 0.
ParamMap fixed_weights(const BertShape& s) {
  ParamMap p = init_model_params(s, 7);
  std::mt19937 rng(11);
  std::normal_distribution<float> n(0.0f, 0.1f);
  for (auto& [name, v] : p)
    for (float& x : v) x += n(rng);
  return p;
}

DMap to_double(const ParamMap& p) {
  DMap d;
  for (const auto& [n, v] : p) d[n] = D(v.begin(), v.end());
  return d;
}

}  // namespace

TEST_CASE("golden: loss and gradients of the CPU backend against a separate implementation") {
  for (bool pre_ln : {true, false}) {
    for (GeluForm gelu : {GeluForm::Erf, GeluForm::Tanh}) {
      CAPTURE(pre_ln);
      CAPTURE(static_cast<int>(gelu));
      const BertShape s = tiny_shape(pre_ln, gelu);
      const ParamMap w = fixed_weights(s);
      const Batch batch = fixed_batch();
      BackendOptions bo;
      bo.shape = s;
      bo.micro_batch = 2;
      bo.max_seq_length = 8;
      CpuBackend backend(bo);
      backend.import_params(w, "fixed weights");
      backend.zero_grads();
      MicroStep m;
      const StepLoss l = backend.forward_backward(batch, m);
      CHECK(l.predictions == 4);
      CHECK(l.sequences == 2);
      double mlm = 0, nsp = 0;
      DMap ref = to_double(w);
      reference_loss(s, ref, batch, &mlm, &nsp);
      CHECK(l.mlm_loss == doctest::Approx(mlm).epsilon(1e-12));
      CHECK(l.nsp_loss == doctest::Approx(nsp).epsilon(1e-12));
      const ParamMap grads = backend.export_grads();

      // Central differences of the reference loss for 3 elements of every parameter tensor.
      std::mt19937 rng(5);
      double worst = 0.0;
      std::string worst_name;
      int checked = 0;
      for (const ModelParamSpec& spec : model_param_specs(s)) {
        std::uniform_int_distribution<int64_t> pick(0, spec.numel() - 1);
        for (int k = 0; k < 3; ++k) {
          const int64_t i = pick(rng);
          D& v = ref.at(spec.name);
          const double saved = v[i], h = 1e-5;
          v[i] = saved + h;
          const double up = reference_loss(s, ref, batch);
          v[i] = saved - h;
          const double down = reference_loss(s, ref, batch);
          v[i] = saved;
          const double fd = (up - down) / (2 * h);
          const double g = grads.at(spec.name)[i];
          const double err = std::fabs(fd - g) / (1e-3 + std::fabs(fd));
          if (err > worst) {
            worst = err;
            worst_name = spec.name + "[" + std::to_string(i) + "]";
          }
          ++checked;
        }
      }
      MESSAGE("pre_ln ", pre_ln, " gelu ", static_cast<int>(gelu), ": loss ", l.mlm_loss + l.nsp_loss, ", ", checked,
              " gradient elements, worst relative error ", worst, " at ", worst_name);
      CHECK(worst < 1e-4);

      // Loss scale and accumulation only scale the gradients: scale 8 / accumulation 2 = 4x.
      ParamMap before = grads;
      backend.zero_grads();
      m.loss_scale = 8.0;
      m.accumulation = 2;
      backend.forward_backward(batch, m);
      const ParamMap scaled = backend.export_grads();
      double worst_scale = 0.0;
      for (const auto& [name, g] : before)
        for (size_t i = 0; i < g.size(); ++i)
          worst_scale = std::max(worst_scale, std::fabs(scaled.at(name)[i] - 4.0 * g[i]) / (1e-6 + std::fabs(4.0 * g[i])));
      CHECK(worst_scale < 1e-5);
    }
  }
}

TEST_CASE("CPU backend rejects out-of-range batches with a clear message") {
  const BertShape s = tiny_shape(true, GeluForm::Erf);
  BackendOptions bo;
  bo.shape = s;
  bo.micro_batch = 2;
  bo.max_seq_length = 8;
  CpuBackend backend(bo);
  backend.import_params(fixed_weights(s), "w");
  Batch b = fixed_batch();
  b.input_ids[3] = 50;
  CHECK(contains(trainer_test::error_of([&] { backend.forward_backward(b, {}); }).what(),
                 "token id 50 is outside the model's vocab_size 50"));
  b = fixed_batch();
  b.next_sentence_labels[0] = 2;
  CHECK(contains(trainer_test::error_of([&] { backend.forward_backward(b, {}); }).what(), "next_sentence_label 2"));
  ParamMap w = fixed_weights(s);
  w.erase("cls.seq_relationship.bias");
  CHECK(contains(trainer_test::error_of([&] { backend.import_params(w, "x.safetensors"); }).what(),
                 "x.safetensors: tensor 'cls.seq_relationship.bias' is missing"));
}
