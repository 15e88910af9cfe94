// The plain (unfused, PyTorch-style) GPU layer (runtime/plain_layer.h) against the fused JIT
// TransformerLayer on the same parameters, inputs, mask and dropout step (same Philox masks):
// fp32 Pre-LN and Post-LN with dropout 0.1 agree to 1e-5 normwise (output, grad_input, every
// parameter gradient); fp16 within 2e-2. The plain layer against the double CPU reference for
// one fp32 case (1e-5). Trainer level: CudaBackend with transformer_kernel = false vs true on a
// tiny BERT for 5 optimizer steps (fp32, dropout on): losses agree to 1e-4 relative each step.
// Every compared tensor's error is printed.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <random>

#include "gpu_util.h"
#include "runtime/context.h"
#include "runtime/cpu_reference.h"
#include "runtime/host_float.h"
#include "runtime/host_tensor.h"
#include "runtime/layer_params.h"
#include "runtime/plain_layer.h"
#include "runtime/transformer_layer.h"
#include "trainer/bert_cuda.h"
#include "trainer/optimizer.h"

using namespace dskc;
using dskc_test::compare;

namespace {

LayerConfig make_cfg(int B, int S, int H, int heads, int I, DType t, bool pre, double p) {
  LayerConfig c;
  c.batch_size = B;
  c.max_seq_length = S;
  c.hidden_size = H;
  c.heads = heads;
  c.intermediate_size = I;
  c.attn_dropout_ratio = p;
  c.hidden_dropout_ratio = p;
  c.num_hidden_layers = 4;
  c.initializer_range = 0.02;
  c.seed = 1234;
  c.fp16 = t == DType::F16;
  c.bf16 = t == DType::BF16;
  c.pre_layer_norm = pre;
  return c;
}

// Non-trivial LayerNorm weights and biases (init has 1 and 0), weights ~ 1/sqrt(H).
std::map<std::string, std::vector<float>> test_params(const LayerConfig& c, uint64_t seed) {
  auto p = init_layer_params(c, seed);
  int k = 0;
  for (auto& [name, v] : p) {
    ++k;
    if (name == "attn_nw" || name == "norm_w") v = dskc_test::randn(v.size(), seed + k, 0.2f, 1.f);
    else if (name.back() == 'b') v = dskc_test::randn(v.size(), seed + k, 0.1f);
    else v = dskc_test::randn(v.size(), seed + k, 1.f / std::sqrt(static_cast<float>(c.hidden_size)));
  }
  for (auto& [name, v] : p)
    for (auto& e : v) e = static_cast<float>(round_to_dtype(e, c.dtype()));
  return p;
}

struct Inputs {
  std::vector<float> x, mask, dy;
};

Inputs make_inputs(const LayerConfig& c, int B, int S, uint64_t seed) {
  Inputs in;
  in.x = dskc_test::randn(static_cast<size_t>(B) * S * c.hidden_size, seed);
  in.dy = dskc_test::randn(in.x.size(), seed + 1);
  in.mask.assign(static_cast<size_t>(B) * S, 0.f);
  std::mt19937 g(static_cast<uint32_t>(seed));
  for (int b = 0; b < B; ++b) {
    const int keep = 1 + static_cast<int>(g() % S);  // keep a prefix, mask the rest (padding)
    for (int s = keep; s < S; ++s) in.mask[static_cast<size_t>(b) * S + s] = -10000.f;
  }
  for (auto* v : {&in.x, &in.dy, &in.mask})
    for (auto& e : *v) e = static_cast<float>(round_to_dtype(e, c.dtype()));
  return in;
}

struct Result {
  std::vector<float> output, grad_input;
  std::map<std::string, std::vector<float>> grads;
};

Result run(Context& ctx, GpuLayer& layer, const std::map<std::string, std::vector<float>>& params, const Inputs& in,
           int B, int S, uint32_t step) {
  layer.set_params(params);
  const DType t = layer.config().dtype();
  const size_t n = in.x.size(), eb = dtype_bytes(t);
  DeviceBuffer x(ctx, n * eb), y(ctx, n * eb), m(ctx, in.mask.size() * eb), dy(ctx, n * eb), dx(ctx, n * eb);
  upload(ctx, x.ptr(), in.x, t);
  upload(ctx, m.ptr(), in.mask, t);
  upload(ctx, dy.ptr(), in.dy, t);
  layer.forward(x.ptr(), m.ptr(), y.ptr(), B, S, step);
  layer.backward(dy.ptr(), dx.ptr());
  Result r;
  r.output = download(ctx, y.ptr(), n, t);
  r.grad_input = download(ctx, dx.ptr(), n, t);
  r.grads = layer.get_grads();
  return r;
}

void check(const std::string& what, const std::vector<float>& got, const std::vector<float>& ref, double tol) {
  const auto e = compare(got, ref);
  std::printf("  %-18s rel %.3e (max abs %.3e at [%zu]: %.6g vs %.6g)\n", what.c_str(), e.rel, e.max_abs, e.index,
              e.at_value, e.at_ref);
  CHECK_MESSAGE(e.rel <= tol, what << ": normwise relative error " << e.rel << " > " << tol);
}

// Plain vs fused on one case.
void plain_vs_fused(const std::string& name, const LayerConfig& c, int B, int S, double tol) {
  std::printf("== %s: B=%d S=%d H=%d heads=%d I=%d %s %s dropout %.2f\n", name.c_str(), B, S, c.hidden_size, c.heads,
              c.intermediate_size, dtype_name(c.dtype()), c.pre_layer_norm ? "Pre-LN" : "Post-LN",
              c.attn_dropout_ratio);
  Context ctx;
  const auto params = test_params(c, 7);
  const Inputs in = make_inputs(c, B, S, 11);
  const uint32_t step = 5;
  LayerOptions lo;
  lo.layer_id = 2;
  lo.use_cache = false;
  PlainTransformerLayer plain(ctx, c, lo);
  TransformerLayer fused(ctx, c, lo);
  const Result rp = run(ctx, plain, params, in, B, S, step);
  const Result rf = run(ctx, fused, params, in, B, S, step);
  check("output", rp.output, rf.output, tol);
  check("grad_input", rp.grad_input, rf.grad_input, tol);
  REQUIRE(rp.grads.size() == 12);
  for (const auto& [k, v] : rf.grads) check("grad_" + k, rp.grads.at(k), v, tol);
}

}  // namespace

TEST_CASE("plain layer equals the fused layer: fp32 Pre-LN, dropout 0.1") {
  dskc_test::require_gpu();
  plain_vs_fused("fp32-pre", make_cfg(3, 40, 128, 4, 384, DType::F32, true, 0.1), 3, 37, 1e-5);
}

TEST_CASE("plain layer equals the fused layer: fp32 Post-LN, dropout 0.1, batch below max") {
  dskc_test::require_gpu();
  plain_vs_fused("fp32-post", make_cfg(4, 64, 160, 2, 600, DType::F32, false, 0.1), 3, 51, 1e-5);
}

TEST_CASE("plain layer stays close to the fused layer in fp16 (Pre-LN and Post-LN, dropout 0.1)") {
  dskc_test::require_gpu();
  plain_vs_fused("fp16-pre", make_cfg(2, 128, 256, 4, 1024, DType::F16, true, 0.1), 2, 127, 2e-2);
  plain_vs_fused("fp16-post", make_cfg(2, 64, 256, 8, 1024, DType::F16, false, 0.1), 2, 64, 2e-2);
}

TEST_CASE("plain layer equals the double CPU reference (fp32 Post-LN, dropout 0.1)") {
  dskc_test::require_gpu();
  const LayerConfig c = make_cfg(2, 24, 96, 3, 256, DType::F32, false, 0.1);
  const int B = 2, S = 21;
  const uint32_t step = 9;
  std::printf("== plain vs CPU reference: B=%d S=%d H=%d fp32 Post-LN dropout 0.1\n", B, S, c.hidden_size);
  Context ctx;
  const auto params = test_params(c, 17);
  const Inputs in = make_inputs(c, B, S, 23);
  LayerOptions lo;
  lo.layer_id = 1;
  PlainTransformerLayer plain(ctx, c, lo);
  const Result r = run(ctx, plain, params, in, B, S, step);
  CpuReferenceLayer ref(c, 1, DType::F32);
  CpuReferenceLayer::Tensors dp;
  for (const auto& [k, v] : params) dp[k] = std::vector<double>(v.begin(), v.end());
  const std::vector<double> xd(in.x.begin(), in.x.end()), md(in.mask.begin(), in.mask.end()),
      dyd(in.dy.begin(), in.dy.end());
  const auto out = ref.forward(xd, &md, B, S, step, dp);
  const auto gr = ref.backward(dyd);
  auto chk = [&](const std::string& what, const std::vector<float>& got, const std::vector<double>& want) {
    const auto e = compare(got, want);
    std::printf("  %-18s rel %.3e (max abs %.3e at [%zu])\n", what.c_str(), e.rel, e.max_abs, e.index);
    CHECK_MESSAGE(e.rel <= 1e-5, what << ": normwise relative error " << e.rel);
  };
  chk("output", r.output, out);
  chk("grad_input", r.grad_input, gr.at("grad_input"));
  for (const auto& [k, v] : r.grads) chk("grad_" + k, v, gr.at("grad_" + k));
}

TEST_CASE("CudaBackend: plain layer (transformer_kernel = false) vs fused layer, 5 Adam steps, fp32, dropout") {
  dskc_test::require_gpu();
  BertShape s;
  s.vocab_size = 203;
  s.hidden_size = 64;
  s.num_hidden_layers = 2;
  s.num_attention_heads = 4;
  s.intermediate_size = 256;
  s.max_position_embeddings = 40;
  s.type_vocab_size = 2;
  s.hidden_dropout_prob = 0.1;
  s.attention_probs_dropout_prob = 0.1;
  s.pre_layer_norm = true;
  for (bool pre : {true, false}) {
    s.pre_layer_norm = pre;
    BackendOptions o;
    o.shape = s;
    o.micro_batch = 4;
    o.max_seq_length = 32;
    o.dtype = DType::F32;
    o.seed = 777;
    o.transformer_kernel = true;
    CudaBackend fused(o);
    o.transformer_kernel = false;
    CudaBackend plain(o);
    std::printf("== trainer %s: fused '%s' vs plain '%s'\n", pre ? "Pre-LN" : "Post-LN", fused.name().c_str(),
                plain.name().c_str());
    CHECK(fused.name() != plain.name());
    const ParamMap params = init_model_params(s, 5);
    fused.import_params(params, "test params");
    plain.import_params(params, "test params");
    OptimizerSettings adam;
    adam.type = OptimizerType::Adam;
    adam.lr = 1e-3;
    adam.weight_decay = 0.01;
    std::mt19937_64 g(99);
    for (int step = 1; step <= 5; ++step) {
      // A random batch: lengths 26..32 of 32, a few masked positions per sample.
      Batch b;
      const int B = 4, S = 32, Pn = 5;
      b.batch = B;
      b.seq_len = S;
      b.max_pred = Pn;
      b.input_ids.resize(static_cast<size_t>(B) * S);
      b.input_mask.resize(b.input_ids.size());
      b.segment_ids.resize(b.input_ids.size());
      b.masked_lm_positions.assign(static_cast<size_t>(B) * Pn, 0);
      b.masked_lm_ids.assign(static_cast<size_t>(B) * Pn, 0);
      for (int i = 0; i < B; ++i) {
        const int len = S - static_cast<int>(g() % 7);
        for (int t = 0; t < S; ++t) {
          const size_t r = static_cast<size_t>(i) * S + t;
          b.input_ids[r] = t == 0 ? 2 : t < len ? static_cast<int32_t>(g() % 203) : 0;
          b.input_mask[r] = t < len;
          b.segment_ids[r] = t < len && t >= len / 2;
        }
        for (int k = 0; k < Pn; ++k) {
          b.masked_lm_positions[static_cast<size_t>(i) * Pn + k] = 1 + k * 5;
          b.masked_lm_ids[static_cast<size_t>(i) * Pn + k] = static_cast<int32_t>(g() % 203);
        }
        b.next_sentence_labels.push_back(static_cast<int32_t>(g() % 2));
      }
      MicroStep m;
      m.rng_step = static_cast<uint32_t>(step);
      fused.zero_grads();
      plain.zero_grads();
      const StepLoss lf = fused.forward_backward(b, m), lp = plain.forward_backward(b, m);
      const double tf = lf.mlm_loss + lf.nsp_loss, tp = lp.mlm_loss + lp.nsp_loss;
      const double rel = std::fabs(tp - tf) / std::max(std::fabs(tf), 1e-30);
      const double rm = std::fabs(lp.mlm_loss - lf.mlm_loss) / std::max(std::fabs(lf.mlm_loss), 1e-30);
      const double rn = std::fabs(lp.nsp_loss - lf.nsp_loss) / std::max(std::fabs(lf.nsp_loss), 1e-30);
      std::printf("  step %d: loss fused %.9g plain %.9g (rel %.3e) | mlm %.9g vs %.9g (rel %.3e) | nsp %.9g vs %.9g "
                  "(rel %.3e)\n",
                  step, tf, tp, rel, lf.mlm_loss, lp.mlm_loss, rm, lf.nsp_loss, lp.nsp_loss, rn);
      CHECK_MESSAGE(rel <= 1e-4, "step " << step << ": loss " << tp << " vs fused " << tf << " (rel " << rel << ")");
      CHECK_MESSAGE(rm <= 1e-4, "step " << step << ": MLM loss rel " << rm);
      CHECK_MESSAGE(rn <= 1e-4, "step " << step << ": NSP loss rel " << rn);
      UpdateArgs a;
      a.lr = 1e-3;
      a.step = step;
      a.clip_coef = clip_coefficient(fused.grad_norm(1.0), 1.0);
      fused.optimizer_step(adam, a);
      plain.optimizer_step(adam, a);
    }
    // After 5 steps the parameters still agree closely.
    const ParamMap pf = fused.export_params(), pp = plain.export_params();
    double worst = 0;
    for (const auto& [k, v] : pf) worst = std::max(worst, compare(pp.at(k), v).rel);
    std::printf("  params after 5 steps: worst normwise rel %.3e\n", worst);
    CHECK(worst <= 1e-3);
  }
}
