// Tests of the CPU reference layer (runtime/cpu_reference.h), the GPU tests' oracle:
// - central finite differences (double, h = 1e-6) of grad_input and every parameter gradient,
//   sampled entries plus a directional derivative of the whole tensor, loss = sum(out * w),
//   for Pre-LN/Post-LN, erf/tanh GELU, with and without dropout and mask, and batch/seq below max;
// - the forward against an independent naive implementation and against hand-computed values;
// - dropout masks against philox.cuh with DESIGN.md's element indices, kept fraction ~ 1 - p;
// - inference has no dropout; batch/seq above the maximum throw; fp16/bf16 storage emulation
//   moves results by about the format's rounding; layer_params specs and initialization.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numbers>
#include <random>

#include "compiler/errors.h"
#include "runtime/cpu_reference.h"
#include "runtime/host_float.h"
#include "runtime/layer_params.h"
#include "templates/common/philox.cuh"

using dskc::CpuReferenceLayer;
using dskc::LayerConfig;
using Vec = std::vector<double>;
using Tensors = CpuReferenceLayer::Tensors;

namespace {

LayerConfig tiny_config(bool pre_ln, dskc::GeluForm gelu, double attn_p, double hidden_p) {
  LayerConfig c;
  c.batch_size = 2;
  c.max_seq_length = 5;
  c.hidden_size = 12;
  c.heads = 3;
  c.intermediate_size = 20;
  c.attn_dropout_ratio = attn_p;
  c.hidden_dropout_ratio = hidden_p;
  c.num_hidden_layers = 2;
  c.layer_norm_eps = 1e-12;
  c.seed = 1234;
  c.pre_layer_norm = pre_ln;
  c.gelu_approximation = gelu;
  c.training = true;
  return c;
}

Vec uniform(std::mt19937_64& rng, size_t n, double lo, double hi) {
  std::uniform_real_distribution<double> d(lo, hi);
  Vec v(n);
  for (double& x : v) x = d(rng);
  return v;
}

// Random parameters of a moderate scale (activations O(1)); LN weights away from 1.
Tensors random_params(const LayerConfig& cfg, std::mt19937_64& rng) {
  Tensors p;
  for (const dskc::ParamSpec& s : dskc::layer_param_specs(cfg)) {
    const size_t n = static_cast<size_t>(s.numel());
    if (s.shape.size() == 2) {
      const double a = 1.5 / std::sqrt(static_cast<double>(s.shape[1]));
      p[s.name] = uniform(rng, n, -a, a);
    } else if (s.name == "attn_nw" || s.name == "norm_w") {
      p[s.name] = uniform(rng, n, 0.5, 1.5);
    } else {
      p[s.name] = uniform(rng, n, -0.3, 0.3);
    }
  }
  return p;
}

Vec random_mask(std::mt19937_64& rng, int batch, int seq) {
  Vec m(static_cast<size_t>(batch) * seq, 0.0);
  std::uniform_int_distribution<int> pick(0, 3);
  for (double& x : m) {
    const int k = pick(rng);
    x = k == 0 ? -10000.0 : k == 1 ? -1.5 : 0.0;
  }
  for (int b = 0; b < batch; ++b) m[static_cast<size_t>(b) * seq] = 0.0;  // one key always visible
  return m;
}

double dot(const Vec& a, const Vec& b) {
  double s = 0.0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

double max_abs(const Vec& v) {
  double m = 0.0;
  for (double x : v) m = std::max(m, std::fabs(x));
  return m;
}

struct GradCase {
  bool pre_ln;
  dskc::GeluForm gelu;
  double attn_p, hidden_p;
  int batch, seq;
  bool use_mask;
};

void check_gradients(const GradCase& gc) {
  const LayerConfig cfg = tiny_config(gc.pre_ln, gc.gelu, gc.attn_p, gc.hidden_p);
  std::mt19937_64 rng(42 + gc.batch * 7 + gc.seq);
  Tensors params = random_params(cfg, rng);
  Vec x = uniform(rng, static_cast<size_t>(gc.batch) * gc.seq * cfg.hidden_size, -2.0, 2.0);
  const Vec mask = random_mask(rng, gc.batch, gc.seq);
  const Vec* mp = gc.use_mask ? &mask : nullptr;
  const Vec w = uniform(rng, x.size(), -1.0, 1.0);
  const uint32_t step = 3;

  CpuReferenceLayer layer(cfg, /*layer_id=*/1);
  layer.forward(x, mp, gc.batch, gc.seq, step, params);
  if (gc.attn_p > 0) {  // the dropout really is active in this case
    const Vec& pd = layer.activation("probs_dropped");
    const Vec& pr = layer.activation("probs");
    int dropped = 0;
    for (size_t i = 0; i < pd.size(); ++i) dropped += (pd[i] == 0.0 && pr[i] > 0.0);
    CHECK(dropped > 0);
  }
  const Tensors grads = layer.backward(w);
  REQUIRE(grads.size() == 13);

  auto loss = [&](const Vec& xin, const Tensors& p) { return dot(layer.forward(xin, mp, gc.batch, gc.seq, step, p), w); };
  const double h = 1e-6;
  std::vector<std::string> names = {"input"};
  for (const dskc::ParamSpec& s : dskc::layer_param_specs(cfg)) names.push_back(s.name);
  for (const std::string& name : names) {
    CAPTURE(name);
    const bool is_input = name == "input";
    const Vec& g = grads.at(is_input ? "grad_input" : "grad_" + name);
    Vec base = is_input ? x : params.at(name);
    REQUIRE(g.size() == base.size());
    const double scale = 1.0 + max_abs(g);
    auto eval = [&](const Vec& t) {
      if (is_input) return loss(t, params);
      Tensors p = params;
      p[name] = t;
      return loss(x, p);
    };
    // Sampled entries.
    std::vector<size_t> idx(base.size());
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
    std::shuffle(idx.begin(), idx.end(), rng);
    idx.resize(std::min<size_t>(idx.size(), 20));
    for (size_t i : idx) {
      Vec tp = base, tm = base;
      tp[i] += h;
      tm[i] -= h;
      const double fd = (eval(tp) - eval(tm)) / (2 * h);
      CAPTURE(i);
      CHECK(std::fabs(fd - g[i]) <= 1e-7 * scale);  // observed < 1e-8
    }
    // Directional derivative over the whole tensor.
    const Vec v = uniform(rng, base.size(), -1.0, 1.0);
    Vec tp = base, tm = base;
    for (size_t i = 0; i < base.size(); ++i) {
      tp[i] += h * v[i];
      tm[i] -= h * v[i];
    }
    const double fd = (eval(tp) - eval(tm)) / (2 * h);
    const double an = dot(g, v);
    CHECK(std::fabs(fd - an) <= 1e-7 * (1.0 + std::fabs(an) + max_abs(g)));
  }
}

// Straightforward forward pass (no dropout) written independently of the reference's loops.
Vec naive_forward(const LayerConfig& c, const Tensors& p, const Vec& x, const Vec* mask, int B, int S) {
  const int H = c.hidden_size, NH = c.heads, D = H / NH, I = c.intermediate_size;
  auto ln = [&](const Vec& v, const Vec& w, const Vec& b) {
    Vec y(v.size());
    for (int r = 0; r < B * S; ++r) {
      double m = 0, s = 0;
      for (int k = 0; k < H; ++k) m += v[r * H + k] / H;
      for (int k = 0; k < H; ++k) s += std::pow(v[r * H + k] - m, 2) / H;
      for (int k = 0; k < H; ++k) y[r * H + k] = (v[r * H + k] - m) / std::sqrt(s + c.layer_norm_eps) * w[k] + b[k];
    }
    return y;
  };
  auto lin = [&](const Vec& v, const Vec& W, const Vec& b, int in, int out) {
    Vec y(static_cast<size_t>(B) * S * out);
    for (int r = 0; r < B * S; ++r)
      for (int o = 0; o < out; ++o) {
        double s = b[o];
        for (int k = 0; k < in; ++k) s += W[o * in + k] * v[r * in + k];
        y[r * out + o] = s;
      }
    return y;
  };
  auto attn = [&](const Vec& hin) {
    const Vec qkv = lin(hin, p.at("attn_qkvw"), p.at("attn_qkvb"), H, 3 * H);
    auto Q = [&](int b, int s, int hd, int k) { return qkv[(b * S + s) * 3 * H + hd * D + k]; };
    auto K = [&](int b, int s, int hd, int k) { return qkv[(b * S + s) * 3 * H + H + hd * D + k]; };
    auto V = [&](int b, int s, int hd, int k) { return qkv[(b * S + s) * 3 * H + 2 * H + hd * D + k]; };
    Vec ctx(static_cast<size_t>(B) * S * H, 0.0);
    for (int b = 0; b < B; ++b)
      for (int hd = 0; hd < NH; ++hd)
        for (int i = 0; i < S; ++i) {
          Vec e(S);
          double z = 0;
          for (int j = 0; j < S; ++j) {
            double s = 0;
            for (int k = 0; k < D; ++k) s += Q(b, i, hd, k) * K(b, j, hd, k);
            e[j] = std::exp(s / std::sqrt(double(D)) + (mask ? (*mask)[b * S + j] : 0.0));
            z += e[j];
          }
          for (int j = 0; j < S; ++j)
            for (int k = 0; k < D; ++k) ctx[(b * S + i) * H + hd * D + k] += e[j] / z * V(b, j, hd, k);
        }
    return lin(ctx, p.at("attn_ow"), p.at("attn_ob"), H, H);
  };
  auto ffn = [&](const Vec& hin) {
    Vec t = lin(hin, p.at("inter_w"), p.at("inter_b"), H, I);
    for (double& v : t) {
      v = c.gelu_approximation == dskc::GeluForm::Tanh
              ? 0.5 * v * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (v + 0.044715 * v * v * v)))
              : v * 0.5 * std::erfc(-v / std::sqrt(2.0));
    }
    return lin(t, p.at("output_w"), p.at("output_b"), I, H);
  };
  auto plus = [](Vec a, const Vec& b) {
    for (size_t i = 0; i < a.size(); ++i) a[i] += b[i];
    return a;
  };
  if (c.pre_layer_norm) {
    const Vec a = plus(x, attn(ln(x, p.at("norm_w"), p.at("norm_b"))));
    return plus(a, ffn(ln(a, p.at("attn_nw"), p.at("attn_nb"))));
  }
  const Vec a = ln(plus(x, attn(x)), p.at("attn_nw"), p.at("attn_nb"));
  return ln(plus(a, ffn(a)), p.at("norm_w"), p.at("norm_b"));
}

dskc::Error catch_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const dskc::Error& e) {
    return e;
  }
  FAIL("expected dskc::Error");
  return dskc::Error(dskc::ErrorKind::Internal, "");
}

}  // namespace

TEST_CASE("gradients match finite differences: Pre-LN, erf, no dropout, mask") {
  check_gradients({true, dskc::GeluForm::Erf, 0.0, 0.0, 2, 5, true});
}
TEST_CASE("gradients match finite differences: Pre-LN, tanh, dropout, mask") {
  check_gradients({true, dskc::GeluForm::Tanh, 0.2, 0.15, 2, 5, true});
}
TEST_CASE("gradients match finite differences: Post-LN, erf, dropout, mask") {
  check_gradients({false, dskc::GeluForm::Erf, 0.2, 0.15, 2, 5, true});
}
TEST_CASE("gradients match finite differences: Post-LN, tanh, no dropout, no mask") {
  check_gradients({false, dskc::GeluForm::Tanh, 0.0, 0.0, 2, 5, false});
}
TEST_CASE("gradients match finite differences: batch and seq below the maximum") {
  SUBCASE("Pre-LN, dropout") { check_gradients({true, dskc::GeluForm::Erf, 0.25, 0.1, 1, 3, true}); }
  SUBCASE("Post-LN, dropout") { check_gradients({false, dskc::GeluForm::Tanh, 0.25, 0.1, 1, 4, true}); }
  SUBCASE("Pre-LN, seq 1") { check_gradients({true, dskc::GeluForm::Tanh, 0.1, 0.1, 2, 1, false}); }
}

TEST_CASE("forward matches an independent naive implementation") {
  for (bool pre : {true, false}) {
    for (auto gelu : {dskc::GeluForm::Erf, dskc::GeluForm::Tanh}) {
      CAPTURE(pre);
      LayerConfig cfg = tiny_config(pre, gelu, 0.3, 0.3);
      cfg.training = false;  // inference: no dropout even with nonzero ratios
      std::mt19937_64 rng(7);
      const Tensors p = random_params(cfg, rng);
      const Vec x = uniform(rng, 2 * 4 * 12, -2, 2);
      const Vec mask = random_mask(rng, 2, 4);
      CpuReferenceLayer layer(cfg);
      const Vec out = layer.forward(x, &mask, 2, 4, 0, p);
      const Vec ref = naive_forward(cfg, p, x, &mask, 2, 4);
      REQUIRE(out.size() == ref.size());
      for (size_t i = 0; i < out.size(); ++i) CHECK(out[i] == doctest::Approx(ref[i]).epsilon(1e-11));
    }
  }
}

TEST_CASE("hand-computed tiny layer: hidden 2, one head, seq 1") {
  LayerConfig cfg;
  cfg.batch_size = 1;
  cfg.max_seq_length = 1;
  cfg.hidden_size = 2;
  cfg.heads = 1;
  cfg.intermediate_size = 3;
  cfg.training = false;
  cfg.layer_norm_eps = 1e-12;
  // With one key the softmax is 1, so the context is V and the Q/K rows do not matter.
  Tensors p;
  p["attn_qkvw"] = {0.3, -0.7, 1.1, 0.2, -0.4, 0.9, 0.8, 0.5, 1, 0, 0, 1};  // V = identity
  p["attn_qkvb"] = {0.1, 0.2, 0.3, 0.4, 0, 0};
  p["attn_ow"] = {1, 1, 0, 2};
  p["attn_ob"] = {0.5, -0.5};
  p["attn_nw"] = {1, 1};
  p["attn_nb"] = {0, 0};
  p["inter_w"] = {1, 0, 0, 1, 1, 1};
  p["inter_b"] = {0, 0, 0.5};
  p["output_w"] = {1, 1, 0, 0, 0, 2};
  p["output_b"] = {0, 1};
  p["norm_w"] = {2, 1};
  p["norm_b"] = {0.5, 0};
  const Vec x = {1, 3};
  // gelu(-1) + gelu(1) = erf(1/sqrt 2) = 0.6826894921370859; 2 gelu(0.5) + 1 = 1.6914624612740131.
  SUBCASE("Pre-LN") {
    // h1 = LN(1,3)·(2,1)+(0.5,0) = (-1.5, 1); v = h1; attn = (0, 1.5); a = (1, 4.5);
    // LN(a) = (-1, 1); inter = (-1, 1, 0.5); ffn = (0.68269, 1.69146); out = a + ffn.
    cfg.pre_layer_norm = true;
    CpuReferenceLayer layer(cfg);
    const Vec out = layer.forward(x, nullptr, 1, 1, 0, p);
    CHECK(out[0] == doctest::Approx(1.6826894921370859).epsilon(1e-11));
    CHECK(out[1] == doctest::Approx(6.191462461274013).epsilon(1e-11));
    CHECK(layer.activation("attn_residual")[1] == doctest::Approx(4.5).epsilon(1e-12));
  }
  SUBCASE("Post-LN") {
    // v = x; attn = (4.5, 5.5); s1 = (5.5, 8.5); a = LN(s1) = (-1, 1); same FFN as above;
    // s2 = (-0.31731, 2.69146); out = LN(s2)·(2,1)+(0.5,0) = (-1.5, 1).
    cfg.pre_layer_norm = false;
    CpuReferenceLayer layer(cfg);
    const Vec out = layer.forward(x, nullptr, 1, 1, 0, p);
    CHECK(out[0] == doctest::Approx(-1.5).epsilon(1e-11));
    CHECK(out[1] == doctest::Approx(1.0).epsilon(1e-11));
    CHECK(layer.activation("ffn_residual")[0] == doctest::Approx(-0.31731050786291415).epsilon(1e-11));
  }
}

TEST_CASE("dropout masks follow philox.cuh with DESIGN.md's indices; kept fraction ~ 1 - p") {
  LayerConfig cfg;
  cfg.batch_size = 4;
  cfg.max_seq_length = 48;
  cfg.hidden_size = 64;
  cfg.heads = 4;
  cfg.intermediate_size = 96;
  cfg.attn_dropout_ratio = 0.1;
  cfg.hidden_dropout_ratio = 0.3;
  cfg.seed = 99;
  const int B = 3, S = 37, H = 64, NH = 4;  // below the maxima: indices use the actual S
  const uint32_t layer_id = 5, step = 11;
  std::mt19937_64 rng(3);
  const Tensors p = random_params(cfg, rng);
  const Vec x = uniform(rng, static_cast<size_t>(B) * S * H, -1, 1);
  CpuReferenceLayer layer(cfg, layer_id);
  layer.forward(x, nullptr, B, S, step, p);
  const dskc_rng::DropoutKey key{cfg.seed, layer_id, step};

  auto check_stream = [&](const char* before, const char* after, uint32_t stream, double ratio) {
    CAPTURE(after);
    const Vec& in = layer.activation(before);
    const Vec& out = layer.activation(after);
    const uint32_t thr = dskc_rng::dropout_threshold(ratio);
    size_t kept = 0, mismatches = 0;
    for (size_t i = 0; i < in.size(); ++i) {
      const bool keep = dskc_rng::dropout_keep(key, stream, i, thr);
      kept += keep;
      const double expect = keep ? in[i] / (1.0 - ratio) : 0.0;
      mismatches += std::fabs(out[i] - expect) > 1e-15 * (1 + std::fabs(expect));
    }
    CHECK(mismatches == 0);
    const double frac = static_cast<double>(kept) / in.size();
    CHECK(frac == doctest::Approx(1.0 - ratio).epsilon(0.02));
  };
  // Stream 1 index ((b*heads + h)*S + i)*S + j is the row-major index of [B,heads,S,S]; streams
  // 2 and 3 use (b*S + s)*H + c, the row-major index of [B,S,H]: check_stream's i is both.
  REQUIRE(layer.activation("probs").size() == static_cast<size_t>(B) * NH * S * S);
  check_stream("probs", "probs_dropped", dskc_rng::kStreamAttnProbs, 0.1);
  check_stream("attn_out", "attn_dropped", dskc_rng::kStreamAttnOutput, 0.3);
  check_stream("ffn_out", "ffn_dropped", dskc_rng::kStreamFfnOutput, 0.3);
}

TEST_CASE("keep rule: 16-bit draws, eight per Philox call, threshold floor(p * 2^16)") {
  CHECK(dskc_rng::dropout_threshold(0.0) == 0u);
  CHECK(dskc_rng::dropout_threshold(0.1) == 6553u);
  CHECK(dskc_rng::dropout_threshold(0.5) == 32768u);
  CHECK(dskc_rng::dropout_threshold(0.9999999) == 65535u);  // never above the largest draw
  const dskc_rng::DropoutKey key{0x1234567890abcdefull, 3, 7};
  for (uint64_t g : {uint64_t{0}, uint64_t{1}, uint64_t{123456789}, (uint64_t{1} << 33) + 5}) {
    const dskc_rng::U32x4 d = dskc_rng::dropout_draws(key, dskc_rng::kStreamFfnOutput, g);
    const uint32_t words[4] = {d.x, d.y, d.z, d.w};
    for (int i = 0; i < 8; ++i) {
      CAPTURE(i);
      const uint32_t draw = i % 2 ? words[i / 2] >> 16 : words[i / 2] & 0xFFFFu;  // low half first
      CHECK(dskc_rng::select_draw(d, i) == draw);
      // Element 8g + i keeps iff its draw reaches the threshold: exactly at it keeps, one below drops.
      const uint64_t idx = 8 * g + i;
      CHECK(dskc_rng::dropout_keep(key, dskc_rng::kStreamFfnOutput, idx, draw));
      if (draw < 65535u) CHECK_FALSE(dskc_rng::dropout_keep(key, dskc_rng::kStreamFfnOutput, idx, draw + 1));
    }
  }
  // All 65536 draw values are reachable and roughly uniform: over 2^17 draws each 4096-wide bin
  // holds 8192 ± 5%.
  std::vector<int> bins(16, 0);
  for (uint64_t g = 0; g < (1u << 14); ++g) {
    const dskc_rng::U32x4 d = dskc_rng::dropout_draws(key, dskc_rng::kStreamAttnProbs, g);
    for (int i = 0; i < 8; ++i) ++bins[dskc_rng::select_draw(d, i) >> 12];
  }
  for (int b : bins) CHECK(std::abs(b - 8192) < 410);
}

TEST_CASE("dropout depends on the step in training and is absent in inference") {
  LayerConfig cfg = tiny_config(true, dskc::GeluForm::Erf, 0.2, 0.2);
  std::mt19937_64 rng(5);
  const Tensors p = random_params(cfg, rng);
  const Vec x = uniform(rng, 2 * 5 * 12, -1, 1);
  CpuReferenceLayer train(cfg);
  const Vec t0 = train.forward(x, nullptr, 2, 5, 0, p);
  const Vec t0b = train.forward(x, nullptr, 2, 5, 0, p);
  const Vec t1 = train.forward(x, nullptr, 2, 5, 1, p);
  CHECK(t0 == t0b);  // same step: same masks
  CHECK(t0 != t1);
  cfg.training = false;
  CpuReferenceLayer infer(cfg);
  const Vec i0 = infer.forward(x, nullptr, 2, 5, 0, p);
  CHECK(infer.activation("probs_dropped") == infer.activation("probs"));
  CHECK(infer.activation("attn_dropped") == infer.activation("attn_out"));
  const Vec i7 = infer.forward(x, nullptr, 2, 5, 7, p);
  CHECK(i0 == i7);
  cfg.training = true;
  cfg.attn_dropout_ratio = cfg.hidden_dropout_ratio = 0.0;
  CpuReferenceLayer no_drop(cfg);
  CHECK(no_drop.forward(x, nullptr, 2, 5, 3, p) == i0);  // ratio 0 in training = inference
}

TEST_CASE("batch or sequence above the maximum is an input error naming both numbers") {
  const LayerConfig cfg = tiny_config(true, dskc::GeluForm::Erf, 0, 0);  // batch 2, seq 5
  std::mt19937_64 rng(1);
  const Tensors p = random_params(cfg, rng);
  CpuReferenceLayer layer(cfg);
  dskc::Error e = catch_error([&] { layer.forward(Vec(3 * 5 * 12), nullptr, 3, 5, 0, p); });
  CHECK(e.kind() == dskc::ErrorKind::Input);
  CHECK(std::string(e.what()) ==
        "batch 3 exceeds the layer's batch_size 2: raise batch_size in the layer config or lower the "
        "prediction batch");
  e = catch_error([&] { layer.forward(Vec(2 * 6 * 12), nullptr, 2, 6, 0, p); });
  CHECK(e.kind() == dskc::ErrorKind::Input);
  const std::string msg = e.what();
  CHECK(msg.find("sequence length 6") != std::string::npos);
  CHECK(msg.find("max_seq_length 5") != std::string::npos);
  e = catch_error([&] { layer.forward(Vec(7), nullptr, 2, 5, 0, p); });
  CHECK(e.kind() == dskc::ErrorKind::Input);
  Tensors bad = p;
  bad.erase("inter_b");
  e = catch_error([&] { layer.forward(Vec(2 * 5 * 12), nullptr, 2, 5, 0, bad); });
  CHECK(std::string(e.what()).find("inter_b") != std::string::npos);
}

TEST_CASE("fp16/bf16 storage emulation moves results by about the format's rounding") {
  const LayerConfig cfg = tiny_config(false, dskc::GeluForm::Tanh, 0.1, 0.1);
  std::mt19937_64 rng(11);
  for (auto [t, lo, hi] : {std::tuple{dskc::DType::F16, 1e-4, 5e-3}, std::tuple{dskc::DType::BF16, 1e-3, 4e-2}}) {
    CAPTURE(static_cast<int>(t));
    Tensors p = random_params(cfg, rng);
    for (auto& [n, v] : p)
      for (double& e : v) e = dskc::round_to_dtype(e, t);
    Vec x = uniform(rng, 2 * 5 * 12, -2, 2);
    for (double& e : x) e = dskc::round_to_dtype(e, t);
    const Vec dy = uniform(rng, x.size(), -1, 1);
    CpuReferenceLayer exact(cfg), low(cfg, 0, t);
    const Vec o64 = exact.forward(x, nullptr, 2, 5, 2, p);
    const Vec o16 = low.forward(x, nullptr, 2, 5, 2, p);
    for (double v : o16) CHECK(dskc::round_to_dtype(v, t) == v);
    Vec diff(o64.size());
    for (size_t i = 0; i < diff.size(); ++i) diff[i] = o64[i] - o16[i];
    const double rel = max_abs(diff) / max_abs(o64);
    MESSAGE("storage ", t == dskc::DType::F16 ? "fp16" : "bf16",
            ": output max relative change ", rel);
    CHECK(rel > lo);
    CHECK(rel < hi);
    const Tensors g64 = exact.backward(dy), g16 = low.backward(dy);
    for (const auto& [name, g] : g64) {
      CAPTURE(name);
      const Vec& gl = g16.at(name);
      Vec d(g.size());
      for (size_t i = 0; i < g.size(); ++i) d[i] = g[i] - gl[i];
      const double r = max_abs(d) / max_abs(g);
      CHECK(r > lo);
      CHECK(r < 2 * hi);
    }
  }
}

TEST_CASE("layer_param_specs order and shapes; deterministic DeepSpeed-style init") {
  LayerConfig cfg;
  cfg.hidden_size = 64;
  cfg.heads = 4;
  cfg.intermediate_size = 256;
  cfg.num_hidden_layers = 8;
  cfg.initializer_range = 0.02;
  const auto specs = dskc::layer_param_specs(cfg);
  const std::vector<std::string> names = {"attn_qkvw", "attn_qkvb", "attn_ow",  "attn_ob",  "attn_nw", "attn_nb",
                                          "inter_w",   "inter_b",   "output_w", "output_b", "norm_w",  "norm_b"};
  REQUIRE(specs.size() == names.size());
  for (size_t i = 0; i < names.size(); ++i) CHECK(specs[i].name == names[i]);
  CHECK(specs[0].shape == std::vector<int64_t>{192, 64});
  CHECK(specs[6].shape == std::vector<int64_t>{256, 64});
  CHECK(specs[8].shape == std::vector<int64_t>{64, 256});
  CHECK(specs[7].shape == std::vector<int64_t>{256});

  const auto a = dskc::init_layer_params(cfg, 17), b = dskc::init_layer_params(cfg, 17);
  const auto c = dskc::init_layer_params(cfg, 18);
  CHECK(a == b);
  CHECK(a.at("attn_qkvw") != c.at("attn_qkvw"));
  auto stddev = [](const std::vector<float>& v) {
    double s = 0, m = 0;
    for (float x : v) m += x / static_cast<double>(v.size());
    for (float x : v) s += (x - m) * (x - m) / static_cast<double>(v.size());
    return std::sqrt(s);
  };
  CHECK(stddev(a.at("attn_qkvw")) == doctest::Approx(0.02).epsilon(0.03));
  CHECK(stddev(a.at("inter_w")) == doctest::Approx(0.02).epsilon(0.03));
  CHECK(stddev(a.at("output_w")) == doctest::Approx(0.02 / 4.0).epsilon(0.03));
  CHECK(stddev(a.at("attn_ow")) == doctest::Approx(0.02 / 4.0).epsilon(0.05));
  for (const char* n : {"attn_qkvb", "attn_ob", "inter_b", "output_b", "attn_nb", "norm_b"}) {
    for (float v : a.at(n)) CHECK(v == 0.0f);
  }
  for (const char* n : {"attn_nw", "norm_w"}) {
    for (float v : a.at(n)) CHECK(v == 1.0f);
  }
  cfg.adjust_init_range = false;
  CHECK(stddev(dskc::init_layer_params(cfg, 17).at("output_w")) == doctest::Approx(0.02).epsilon(0.03));
}
