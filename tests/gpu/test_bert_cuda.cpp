// CudaBackend vs CpuBackend (the reference) on a tiny BERT: same imported parameters and
// batches, then losses, every gradient tensor, optimizer updates (Adam, Lamb), micro-batch
// accumulation, grad_norm / grads_finite / overflow injection and run-to-run determinism.
// Shapes break assumptions on purpose: vocab 203 (not a multiple of 8: padded logits rows),
// batch 3 below the micro batch 4, sequence 24 below the maximum 32, padded inputs, padding
// predictions (a 0 position ends a sample's list), repeated token ids (grouped embedding
// gradients). fp32 must match to 1e-5 (losses) / 1e-4 (normwise per gradient tensor); fp16
// and bf16 (loss scale 1024, divided back) are compared with the fp32 CPU math (measured on an
// H200: fp32 gradients within 3.3e-7, fp16 1.2e-3, bf16 8.2e-3; tolerances 1e-4, 1e-2, 5e-2).
// Every compared tensor's error is printed, so the log shows the numbers.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>

#include "compiler/errors.h"
#include "gpu_util.h"
#include "test_util.h"
#include "trainer/bert_cpu.h"
#include "trainer/bert_cuda.h"

using namespace dskc;

namespace {

BertShape tiny_shape(bool pre_ln, double dropout) {
  BertShape s;
  s.vocab_size = 203;
  s.hidden_size = 64;
  s.num_hidden_layers = 2;
  s.num_attention_heads = 4;
  s.intermediate_size = 256;
  s.max_position_embeddings = 40;
  s.type_vocab_size = 2;
  s.hidden_dropout_prob = dropout;
  s.attention_probs_dropout_prob = dropout;
  s.pre_layer_norm = pre_ln;
  return s;
}

BackendOptions options(const BertShape& s, DType t) {
  BackendOptions o;
  o.shape = s;
  o.micro_batch = 4;
  o.max_seq_length = 32;
  o.dtype = t;
  o.seed = 777;
  return o;
}

// BERT's init plus non-trivial LayerNorm weights and biases (init has 1 and 0), so every
// gradient path is exercised.
ParamMap test_params(const BertShape& s, uint64_t seed) {
  ParamMap p = init_model_params(s, seed);
  std::mt19937_64 g(seed + 1);
  std::normal_distribution<float> d(0.f, 1.f);
  for (auto& [name, v] : p) {
    const bool ln_weight = name.find("LayerNorm.weight") != std::string::npos || name.ends_with("attn_nw") ||
                           name.ends_with("norm_w");
    const bool vec = !ln_weight && (name.ends_with("bias") || name.ends_with("_b") || name.ends_with("attn_qkvb"));
    if (ln_weight) for (float& x : v) x = 1.f + 0.1f * d(g);
    else if (vec) for (float& x : v) x = 0.05f * d(g);
  }
  return p;
}

// AdamW with weight decay and bias correction, and the same as Adam with L2 decay: the updates the
// one-launch optimizer tests compare.
OptimizerSettings adamw_settings() {
  OptimizerSettings s;
  s.type = OptimizerType::Adam;
  s.lr = 1e-3;
  s.weight_decay = 0.01;
  s.bias_correction = true;
  return s;
}
OptimizerSettings adam_l2_settings() {
  OptimizerSettings s = adamw_settings();
  s.adam_w_mode = false;
  return s;
}

// Random batch: sample b has length len[b] (input_mask 1 there, padding after), predictions at
// distinct random positions in [1, len) followed by 0-padding (sample 1 uses every slot).
Batch make_batch(int B, int S, int P, int vocab, uint64_t seed) {
  std::mt19937_64 g(seed);
  Batch b;
  b.batch = B;
  b.seq_len = S;
  b.max_pred = P;
  b.input_ids.resize(static_cast<size_t>(B) * S);
  b.input_mask.resize(b.input_ids.size());
  b.segment_ids.resize(b.input_ids.size());
  b.masked_lm_positions.assign(static_cast<size_t>(B) * P, 0);
  b.masked_lm_ids.assign(static_cast<size_t>(B) * P, 0);
  for (int i = 0; i < B; ++i) {
    const int len = S - static_cast<int>(g() % 7);
    const int cut = 1 + static_cast<int>(g() % static_cast<uint64_t>(len - 1));
    for (int s = 0; s < S; ++s) {
      const size_t r = static_cast<size_t>(i) * S + s;
      b.input_ids[r] = s < len ? static_cast<int32_t>(g() % 40) : 0;  // few ids: many repeats
      if (s == 0) b.input_ids[r] = 2;                                  // [CLS]
      b.input_mask[r] = s < len;
      b.segment_ids[r] = s < len && s >= cut;
    }
    const int real = i == 1 ? P : std::max(1, P - 1 - 2 * i);
    std::vector<int> cand;
    for (int s = 1; s < len; ++s) cand.push_back(s);
    std::shuffle(cand.begin(), cand.end(), g);
    for (int k = 0; k < real && k < static_cast<int>(cand.size()); ++k) {
      b.masked_lm_positions[static_cast<size_t>(i) * P + k] = cand[k];
      b.masked_lm_ids[static_cast<size_t>(i) * P + k] = static_cast<int32_t>(g() % static_cast<uint64_t>(vocab));
    }
  }
  for (int i = 0; i < B; ++i) b.next_sentence_labels.push_back(static_cast<int32_t>(g() % 2));
  return b;
}

struct Rel {
  double rel = 0, max_abs = 0, ref_norm = 0;
  size_t at = 0;
  double got = 0, want = 0;
};

Rel rel_error(const std::vector<float>& a, const std::vector<float>& ref, double scale = 1.0) {
  Rel r;
  REQUIRE(a.size() == ref.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double x = a[i] / scale, y = ref[i] / scale, d = x - y;
    if (!std::isfinite(x)) {
      r.rel = r.max_abs = INFINITY;
      r.at = i;
      r.got = x;
      r.want = y;
      return r;
    }
    num += d * d;
    den += y * y;
    if (std::fabs(d) > r.max_abs) {
      r.max_abs = std::fabs(d);
      r.at = i;
      r.got = x;
      r.want = y;
    }
  }
  r.ref_norm = std::sqrt(den);
  r.rel = den > 0 ? std::sqrt(num / den) : std::sqrt(num);  // absolute when the reference is 0
  return r;
}

// Compares every tensor of two maps; prints one line each; returns the worst relative error.
double compare_maps(const char* what, const ParamMap& gpu, const ParamMap& cpu, double tol, double scale = 1.0) {
  REQUIRE(gpu.size() == cpu.size());
  double worst = 0;
  for (const auto& [name, ref] : cpu) {
    REQUIRE_MESSAGE(gpu.count(name), what << ": the CUDA backend lacks " << name);
    const Rel r = rel_error(gpu.at(name), ref, scale);
    std::printf("  %-8s %-52s rel %.3e  max abs %.3e at [%zu] (gpu %.6g cpu %.6g)  |ref| %.3e\n", what, name.c_str(),
                r.rel, r.max_abs, r.at, r.got, r.want, r.ref_norm);
    CHECK_MESSAGE(r.rel <= tol, what << " " << name << ": normwise relative error " << r.rel << " > " << tol
                                     << " (max abs " << r.max_abs << " at [" << r.at << "]: gpu " << r.got
                                     << " vs cpu " << r.want << ")");
    worst = std::max(worst, r.rel);
  }
  return worst;
}

void check_loss(const char* what, const StepLoss& g, const StepLoss& c, double tol) {
  const double em = std::fabs(g.mlm_loss - c.mlm_loss) / std::max(std::fabs(c.mlm_loss), 1e-30);
  const double en = std::fabs(g.nsp_loss - c.nsp_loss) / std::max(std::fabs(c.nsp_loss), 1e-30);
  std::printf("  %-8s mlm loss gpu %.9g cpu %.9g (rel %.3e) | nsp loss gpu %.9g cpu %.9g (rel %.3e) | preds %lld\n",
              what, g.mlm_loss, c.mlm_loss, em, g.nsp_loss, c.nsp_loss, en, static_cast<long long>(c.predictions));
  CHECK(g.predictions == c.predictions);
  CHECK(g.sequences == c.sequences);
  CHECK_MESSAGE(em <= tol, what << ": MLM loss " << g.mlm_loss << " vs cpu " << c.mlm_loss << " (rel " << em << ")");
  CHECK_MESSAGE(en <= tol, what << ": NSP loss " << g.nsp_loss << " vs cpu " << c.nsp_loss << " (rel " << en << ")");
}

struct Pair {
  std::unique_ptr<CudaBackend> gpu;
  std::unique_ptr<CpuBackend> cpu;
};

Pair make_pair(const BertShape& s, DType gpu_dtype, uint64_t seed) {
  Pair p;
  const ParamMap params = test_params(s, seed);
  p.gpu = std::make_unique<CudaBackend>(options(s, gpu_dtype));
  p.cpu = std::make_unique<CpuBackend>(options(s, DType::F32));
  p.gpu->import_params(params, "test params");
  p.cpu->import_params(params, "test params");
  return p;
}

void forward_backward_matches(const char* what, const BertShape& s, DType t, double loss_tol, double grad_tol,
                              double loss_scale) {
  std::printf("== %s: %s, %s, dropout %.2f, loss scale %g\n", what, dtype_name(t), s.pre_layer_norm ? "Pre-LN" : "Post-LN",
              s.hidden_dropout_prob, loss_scale);
  Pair p = make_pair(s, t, 11);
  const Batch b = make_batch(3, 24, 6, s.vocab_size, 5);
  MicroStep m;
  m.loss_scale = loss_scale;
  m.rng_step = 3;
  const StepLoss lg = p.gpu->forward_backward(b, m), lc = p.cpu->forward_backward(b, m);
  check_loss(what, lg, lc, loss_tol);
  compare_maps(what, p.gpu->export_grads(), p.cpu->export_grads(), grad_tol, loss_scale);
}

}  // namespace

TEST_CASE("CudaBackend forward/backward equals CpuBackend in fp32 (Pre-LN and Post-LN, dropout 0)") {
  dskc_test::require_gpu();
  forward_backward_matches("fp32", tiny_shape(true, 0.0), DType::F32, 1e-5, 1e-4, 1.0);
  forward_backward_matches("fp32", tiny_shape(false, 0.0), DType::F32, 1e-5, 1e-4, 1.0);
}

TEST_CASE("CudaBackend forward/backward equals CpuBackend in fp32 with dropout 0.1 (identical Philox masks)") {
  dskc_test::require_gpu();
  forward_backward_matches("fp32+do", tiny_shape(true, 0.1), DType::F32, 1e-5, 1e-4, 1.0);
  forward_backward_matches("fp32+do", tiny_shape(false, 0.1), DType::F32, 1e-5, 1e-4, 1.0);
}

TEST_CASE("CudaBackend fp16 and bf16 stay close to the fp32 CPU math (loss scale 1024)") {
  dskc_test::require_gpu();
  forward_backward_matches("fp16", tiny_shape(true, 0.1), DType::F16, 1e-2, 1e-2, 1024.0);
  forward_backward_matches("bf16", tiny_shape(true, 0.1), DType::BF16, 5e-2, 5e-2, 1024.0);
}

TEST_CASE("CudaBackend MLM decoder GEMMs over the padded and the exact vocabulary (DSKC_HEAD_GEMMS)") {
  // vocab 203 -> 208 padded columns (logits) and rows (word table, weight gradient). Each form
  // matches the fp32 CPU math; in fp16 the two stay close (they run other cuBLASLt kernels).
  dskc_test::require_gpu();
  std::map<std::string, ParamMap> grads16;
  for (const char* form : {"plain", "padded"}) {
    const dskc_test::ScopedEnv env("DSKC_HEAD_GEMMS", form);
    std::printf("== DSKC_HEAD_GEMMS=%s\n", form);
    forward_backward_matches(form, tiny_shape(true, 0.1), DType::F32, 1e-5, 1e-4, 1.0);
    forward_backward_matches(form, tiny_shape(false, 0.0), DType::F32, 1e-5, 1e-4, 1.0);
    Pair p = make_pair(tiny_shape(true, 0.1), DType::F16, 11);
    MicroStep m;
    m.loss_scale = 1024;
    m.rng_step = 4;
    p.gpu->forward_backward(make_batch(4, 32, 6, 203, 17), m);
    grads16[form] = p.gpu->export_grads();
  }
  compare_maps("padded", grads16["padded"], grads16["plain"], 1e-2, 1024.0);
  const dskc_test::ScopedEnv bad("DSKC_HEAD_GEMMS", "aligned");
  CHECK_THROWS_AS(CudaBackend(options(tiny_shape(true, 0.1), DType::F16)), Error);
}

TEST_CASE("CudaBackend: export_params round-trips the import; a fresh backend's moments are zero") {
  dskc_test::require_gpu();
  const BertShape s = tiny_shape(true, 0.1);
  Pair p = make_pair(s, DType::F16, 3);
  compare_maps("params", p.gpu->export_params(), p.cpu->export_params(), 0.0);
  for (const auto& [name, v] : p.gpu->export_optimizer_state())
    for (float x : v) REQUIRE_MESSAGE(x == 0.f, name << " is not zero in a fresh backend");
}

TEST_CASE("CudaBackend Adam and Lamb steps equal the CPU's (fp32)") {
  dskc_test::require_gpu();
  const BertShape s = tiny_shape(true, 0.1);
  Pair p = make_pair(s, DType::F32, 21);
  const Batch b = make_batch(4, 32, 5, s.vocab_size, 9);
  OptimizerSettings adam;
  adam.type = OptimizerType::Adam;
  adam.lr = 1e-3;
  adam.weight_decay = 0.01;
  OptimizerSettings lamb = adam;
  lamb.type = OptimizerType::Lamb;
  lamb.bias_correction = true;
  OptimizerSettings adam_l2 = adam;
  adam_l2.adam_w_mode = false;
  const OptimizerSettings* settings[] = {&adam, &lamb, &adam_l2};
  const char* names[] = {"adam", "lamb", "adam-l2"};
  for (int step = 1; step <= 3; ++step) {
    std::printf("== optimizer step %d: %s\n", step, names[step - 1]);
    p.gpu->zero_grads();
    p.cpu->zero_grads();
    MicroStep m;
    m.loss_scale = 8.0;
    m.rng_step = static_cast<uint32_t>(step);
    p.gpu->forward_backward(b, m);
    p.cpu->forward_backward(b, m);
    UpdateArgs a;
    a.lr = 2e-3;
    a.grad_scale = 8.0;
    a.step = step;
    a.clip_coef = clip_coefficient(p.cpu->grad_norm(8.0), 1.0);
    p.gpu->optimizer_step(*settings[step - 1], a);
    p.cpu->optimizer_step(*settings[step - 1], a);
    // 3e-5: Adam divides by sqrt(v), so an element whose gradient is near eps turns the fp32-vs-
    // double gradient difference into an update difference of up to ~1% of lr (pooler weight [2056]
    // at seed 21: 1.1e-5 of the tensor's norm). A wrong update rule or a missed term moves whole
    // tensors by ~lr (2e-3 here), two orders above this bound.
    compare_maps(names[step - 1], p.gpu->export_params(), p.cpu->export_params(), 3e-5);
  }
  compare_maps("moments", p.gpu->export_optimizer_state(), p.cpu->export_optimizer_state(), 1e-4);
}

TEST_CASE("CudaBackend accumulates two micro-batches like the CPU (fp32, dropout 0.1)") {
  dskc_test::require_gpu();
  const BertShape s = tiny_shape(true, 0.1);
  Pair p = make_pair(s, DType::F32, 31);
  const Batch b1 = make_batch(4, 20, 6, s.vocab_size, 41), b2 = make_batch(2, 32, 6, s.vocab_size, 42);
  for (int micro = 0; micro < 2; ++micro) {
    MicroStep m;
    m.accumulation = 2;
    m.rng_step = static_cast<uint32_t>(10 + micro);
    const Batch& b = micro == 0 ? b1 : b2;
    check_loss("accum", p.gpu->forward_backward(b, m), p.cpu->forward_backward(b, m), 1e-5);
  }
  compare_maps("accum", p.gpu->export_grads(), p.cpu->export_grads(), 1e-4);
}

TEST_CASE("CudaBackend fp16/bf16 with dropout: a micro-batch's result does not depend on what ran before") {
  // One GPU accumulating micro-batches must compute each exactly as a fresh process would (a
  // data-parallel rank runs the second micro-batch first): same losses and gradients, bitwise.
  dskc_test::require_gpu();
  const BertShape s = tiny_shape(true, 0.1);
  for (DType t : {DType::F16, DType::BF16}) {
    CAPTURE(dtype_name(t));
    const ParamMap params = test_params(s, 91);
    const Batch b1 = make_batch(4, 32, 6, s.vocab_size, 92), b2 = make_batch(4, 32, 6, s.vocab_size, 93);
    MicroStep m1, m2;
    m1.rng_step = 0;
    m2.rng_step = 1;
    m1.loss_scale = m2.loss_scale = 64.0;
    CudaBackend warm(options(s, t)), fresh(options(s, t));
    warm.import_params(params, "test params");
    fresh.import_params(params, "test params");
    warm.forward_backward(b1, m1);
    warm.zero_grads();
    const StepLoss lw = warm.forward_backward(b2, m2), lf = fresh.forward_backward(b2, m2);
    CHECK(lw.mlm_loss == lf.mlm_loss);
    CHECK(lw.nsp_loss == lf.nsp_loss);
    const ParamMap gw = warm.export_grads(), gf = fresh.export_grads();
    for (const auto& [name, v] : gw) CHECK_MESSAGE(v == gf.at(name), name << " depends on the previous micro-batch");
  }
}

TEST_CASE("CudaBackend grad_norm, grads_finite, inject_grad_overflow, zero_grads, determinism") {
  dskc_test::require_gpu();
  const BertShape s = tiny_shape(true, 0.1);
  Pair p = make_pair(s, DType::F32, 51);
  const Batch b = make_batch(3, 24, 6, s.vocab_size, 61);
  MicroStep m;
  m.loss_scale = 4.0;
  const StepLoss l1 = p.gpu->forward_backward(b, m);
  p.cpu->forward_backward(b, m);
  const ParamMap g1 = p.gpu->export_grads();
  CHECK(p.gpu->grads_finite());
  const double ng = p.gpu->grad_norm(4.0), nc = p.cpu->grad_norm(4.0);
  std::printf("  grad_norm gpu %.9g cpu %.9g (rel %.3e)\n", ng, nc, std::fabs(ng - nc) / nc);
  CHECK(std::fabs(ng - nc) <= 1e-5 * nc);
  // bitwise run-to-run determinism
  p.gpu->zero_grads();
  CHECK(p.gpu->grad_norm(1.0) == 0.0);
  const StepLoss l2 = p.gpu->forward_backward(b, m);
  CHECK(l1.mlm_loss == l2.mlm_loss);
  CHECK(l1.nsp_loss == l2.nsp_loss);
  const ParamMap g2 = p.gpu->export_grads();
  for (const auto& [name, v] : g1) CHECK_MESSAGE(v == g2.at(name), name << " differs between two identical runs");
  // zero_grads straight before forward_backward: its memset deferred, that call clears the other
  // parameters and assigns the layers' gradients; nothing of the previous step may remain
  p.gpu->zero_grads();
  p.gpu->forward_backward(b, m);
  const ParamMap g3 = p.gpu->export_grads();
  for (const auto& [name, v] : g1) CHECK_MESSAGE(v == g3.at(name), name << " keeps the previous step after zero_grads");
  p.gpu->inject_grad_overflow();
  CHECK_FALSE(p.gpu->grads_finite());
  CHECK_FALSE(std::isfinite(p.gpu->grad_norm(1.0)));
  p.gpu->zero_grads();
  CHECK(p.gpu->grads_finite());
}

TEST_CASE("CudaBackend fp16: a loss scale that overflows fp16 leaves non-finite gradients") {
  dskc_test::require_gpu();
  const BertShape s = tiny_shape(true, 0.0);
  Pair p = make_pair(s, DType::F16, 71);
  const Batch b = make_batch(2, 16, 4, s.vocab_size, 81);
  MicroStep m;
  m.loss_scale = 1e9;  // far beyond fp16's 65504
  p.gpu->forward_backward(b, m);
  CHECK_FALSE(p.gpu->grads_finite());
}

TEST_CASE("CudaBackend rejects a batch larger than the micro batch with Error(Input)") {
  dskc_test::require_gpu();
  const BertShape s = tiny_shape(true, 0.0);
  CudaBackend gpu(options(s, DType::F32));
  const Batch b = make_batch(5, 16, 4, s.vocab_size, 1);
  CHECK_THROWS_AS(gpu.forward_backward(b, MicroStep{}), Error);
}

TEST_CASE("CudaBackend with cuda_graphs: bitwise the losses and gradients of plain launches, step by step") {
  // dskc train --cuda_graphs: after its first step every layer's forward and backward is captured with
  // that step's arguments and launched as a CUDA graph. Each step has its own dropout masks (rng_step),
  // so a graph replayed with stale arguments would differ from the second step on.
  dskc_test::require_gpu();
  const BertShape s = tiny_shape(true, 0.1);
  for (DType t : {DType::F16, DType::BF16}) {
    CAPTURE(dtype_name(t));
    const ParamMap params = test_params(s, 95);
    BackendOptions plain_opt = options(s, t), graph_opt = options(s, t);
    plain_opt.cuda_graphs = 0;
    graph_opt.cuda_graphs = 1;
    CudaBackend plain(plain_opt), graphed(graph_opt);
    plain.import_params(params, "test params");
    graphed.import_params(params, "test params");
    StepLoss first{};
    for (uint32_t step = 0; step < 4; ++step) {
      CAPTURE(step);
      const Batch b = make_batch(4, 32, 6, s.vocab_size, 96 + step % 2);
      MicroStep m;
      m.rng_step = step;
      m.loss_scale = 64.0;
      plain.zero_grads();
      graphed.zero_grads();
      const StepLoss lp = plain.forward_backward(b, m), lg = graphed.forward_backward(b, m);
      CHECK(lg.mlm_loss == lp.mlm_loss);
      CHECK(lg.nsp_loss == lp.nsp_loss);
      const ParamMap gp = plain.export_grads(), gg = graphed.export_grads();
      for (const auto& [name, v] : gp) CHECK_MESSAGE(gg.at(name) == v, name);
      if (step == 0) first = lp;
      if (step == 2) CHECK(lp.mlm_loss != first.mlm_loss);  // same batch, another step: other masks
    }
    // Steps 1-3 ran every layer's forward and backward as graphs; step 0 warmed the shapes.
    CHECK(graphed.layer_graph_launches() == static_cast<size_t>(3 * 2 * s.num_hidden_layers));
    CHECK(plain.layer_graph_launches() == 0);
  }
}

TEST_CASE("CudaBackend phase marks (dskc train --profile_steps): every phase in order, on the GPU's timeline") {
  dskc_test::require_gpu();
  const BertShape s = tiny_shape(true, 0.1);
  CudaBackend gpu(options(s, DType::F16));
  gpu.import_params(test_params(s, 97), "test params");
  const Batch b = make_batch(4, 32, 6, s.vocab_size, 98);
  MicroStep m;
  m.loss_scale = 64.0;
  gpu.mark("ignored");  // before start_phase_marks: nothing
  CHECK(gpu.take_phase_marks().empty());
  gpu.start_phase_marks();
  for (int rep = 0; rep < 2; ++rep) {  // the second sequence reuses the first one's events
    CAPTURE(rep);
    gpu.mark(phase::kStepStart);
    gpu.forward_backward(b, m);
    gpu.mark("after");
    const std::vector<PhaseMark> marks = gpu.take_phase_marks();
    std::vector<std::string> names;
    for (const PhaseMark& k : marks) names.push_back(k.phase);
    const std::vector<std::string> want = {phase::kStepStart,     phase::kBatchUpload, phase::kEmbeddingsFwd,
                                           phase::kEncoderFwd,    phase::kHeads,       phase::kEncoderBwd,
                                           phase::kEmbeddingsBwd, phase::kLossDownload, "after"};
    REQUIRE(names == want);
    CHECK(marks[0].device_ms == 0.0);
    CHECK(marks[0].host_ms == 0.0);
    for (size_t i = 1; i < marks.size(); ++i) {
      CHECK_MESSAGE(marks[i].device_ms >= marks[i - 1].device_ms, marks[i].phase);
      CHECK_MESSAGE(marks[i].host_ms >= marks[i - 1].host_ms, marks[i].phase);
    }
    // The encoder's passes take GPU time; the loss download waits for the GPU, so by then the GPU's
    // timeline cannot be ahead of the host's by more than the event's own resolution.
    CHECK(marks[3].device_ms > marks[2].device_ms);
    CHECK(marks[5].device_ms > marks[4].device_ms);
    CHECK(marks[7].device_ms <= marks[7].host_ms + 0.5);
    CHECK(gpu.take_phase_marks().empty());
  }
}

TEST_CASE("CudaBackend: tables prepared ahead (trainer read-ahead) give bitwise the plain call; one norm pass per step") {
  dskc_test::require_gpu();
  const BertShape s = tiny_shape(true, 0.1);
  for (DType t : {DType::F16, DType::BF16}) {
    CAPTURE(dtype_name(t));
    const ParamMap params = test_params(s, 99);
    CudaBackend plain(options(s, t)), ahead(options(s, t));
    plain.import_params(params, "test params");
    ahead.import_params(params, "test params");
    for (uint32_t step = 0; step < 3; ++step) {
      CAPTURE(step);
      const Batch b = make_batch(4, 32, 6, s.vocab_size, 100 + step);
      MicroStep m;
      m.rng_step = step;
      m.loss_scale = 64.0;
      plain.zero_grads();
      ahead.zero_grads();
      // Prepared on another thread, as the trainer's read-ahead worker does.
      std::unique_ptr<PreparedBatch> prep;
      std::thread([&] { prep = ahead.prepare(b); }).join();
      REQUIRE(prep != nullptr);
      const StepLoss lp = plain.forward_backward(b, m), la = ahead.forward_backward_prepared(b, m, prep.get());
      CHECK(la.mlm_loss == lp.mlm_loss);
      CHECK(la.nsp_loss == lp.nsp_loss);
      CHECK(ahead.export_grads() == plain.export_grads());
      // grads_finite and grad_norm share one pass; the norm is that of these gradients.
      CHECK(ahead.grads_finite());
      CHECK(ahead.grad_norm(64.0) == plain.grad_norm(64.0));
    }
    // The shared pass is dropped when the gradients change.
    ahead.inject_grad_overflow();
    CHECK_FALSE(ahead.grads_finite());
    ahead.zero_grads();
    CHECK(ahead.grads_finite());
    CHECK(ahead.grad_norm(1.0) == 0.0);
  }
  // A batch the backend rejects is not prepared; forward_backward reports it.
  CudaBackend gpu(options(s, DType::F16));
  Batch bad = make_batch(4, 32, 6, s.vocab_size, 1);
  bad.input_ids[5] = s.vocab_size + 3;
  CHECK(gpu.prepare(bad) == nullptr);
  CHECK_THROWS_AS(gpu.forward_backward_prepared(bad, MicroStep{}, nullptr), Error);
}

TEST_CASE("CudaBackend multi-tensor Adam and Lamb (compute copies included): bitwise the per-tensor launches") {
  dskc_test::require_gpu();
  const BertShape s = tiny_shape(true, 0.1);
  for (DType t : {DType::F16, DType::BF16}) {
    CAPTURE(dtype_name(t));
    const ParamMap params = test_params(s, 31);
    BackendOptions multi_opt = options(s, t), per_opt = options(s, t);
    multi_opt.multi_tensor_optimizer = 1;
    per_opt.multi_tensor_optimizer = 0;
    CudaBackend multi(multi_opt), per(per_opt);
    multi.import_params(params, "test params");
    per.import_params(params, "test params");
    const OptimizerSettings adamw = adamw_settings(), adam_l2 = adam_l2_settings();
    // Lamb with and without bias correction (the guide's seq-512 config has none), between Adam
    // steps: the three-launch form reads the layers' pending gradients in place, the per-tensor one
    // widens them first.
    OptimizerSettings lamb = adamw, lamb_nobc = adamw;
    lamb.type = lamb_nobc.type = OptimizerType::Lamb;
    lamb_nobc.bias_correction = false;
    const OptimizerSettings* settings[] = {&adamw, &lamb, &adam_l2, &lamb_nobc, &adamw};
    StepLoss before{};
    for (int step = 1; step <= 5; ++step) {
      CAPTURE(step);
      const Batch b = make_batch(4, 32, 6, s.vocab_size, 40 + step);
      MicroStep m;
      m.loss_scale = 64.0;
      m.rng_step = static_cast<uint32_t>(step);
      multi.zero_grads();
      per.zero_grads();
      // The losses read the compute copies the previous step's update wrote (cast fused in, or not).
      const StepLoss lm = multi.forward_backward(b, m), lp = per.forward_backward(b, m);
      CHECK(lm.mlm_loss == lp.mlm_loss);
      CHECK(lm.nsp_loss == lp.nsp_loss);
      if (step > 1) CHECK(lm.mlm_loss != before.mlm_loss);  // the update moved the weights
      before = lm;
      UpdateArgs a;
      a.lr = 2e-3;
      a.grad_scale = 64.0;
      a.step = step;
      a.clip_coef = clip_coefficient(per.grad_norm(64.0), 1.0);
      multi.optimizer_step(*settings[step - 1], a);
      per.optimizer_step(*settings[step - 1], a);
      CHECK(multi.export_params() == per.export_params());
      CHECK(multi.export_optimizer_state() == per.export_optimizer_state());
    }
  }
}

TEST_CASE("CudaBackend deferred layer gradients (one micro-batch per step): bitwise the accumulated form") {
  dskc_test::require_gpu();
  const BertShape s = tiny_shape(true, 0.1);
  for (DType t : {DType::F16, DType::BF16}) {
    CAPTURE(dtype_name(t));
    const ParamMap params = test_params(s, 37);
    BackendOptions def_opt = options(s, t), acc_opt = options(s, t);
    def_opt.defer_layer_grads = 1;  // the layers' gradients stay in their dtype buffers
    acc_opt.defer_layer_grads = 0;  // widened into the fp32 accumulators after each layer
    CudaBackend def(def_opt), acc(acc_opt);
    def.import_params(params, "test params");
    acc.import_params(params, "test params");
    const OptimizerSettings adamw = adamw_settings(), adam_l2 = adam_l2_settings();
    OptimizerSettings lamb = adamw;
    lamb.type = OptimizerType::Lamb;
    // Step 1 and 5: the norm and the one-launch Adam read the pending gradients. Step 2:
    // export_grads widens them first. Step 3: a second micro-batch widens them before its backward.
    // Step 4: Lamb reads them in place (three launches; DSKC_OPTIMIZER=per_tensor widens them).
    const OptimizerSettings* settings[] = {&adamw, &adamw, &adam_l2, &lamb, &adam_l2};
    for (int step = 1; step <= 5; ++step) {
      CAPTURE(step);
      MicroStep m;
      m.loss_scale = 64.0;
      m.rng_step = static_cast<uint32_t>(step);
      def.zero_grads();
      acc.zero_grads();
      const int micro = step == 3 ? 2 : 1;
      m.accumulation = micro;
      for (int k = 0; k < micro; ++k) {
        const Batch b = make_batch(4, 32, 6, s.vocab_size, 90 + 10 * step + k);
        const StepLoss ld = def.forward_backward(b, m), la = acc.forward_backward(b, m);
        CHECK(ld.mlm_loss == la.mlm_loss);  // the compute copies the updates wrote agree
        CHECK(ld.nsp_loss == la.nsp_loss);
      }
      if (step == 2) {
        const ParamMap gd = def.export_grads(), ga = acc.export_grads();
        for (const auto& [name, v] : ga) CHECK_MESSAGE(v == gd.at(name), name << ": widened late vs at once");
      }
      // The same Σ g² over other ranges in another order: equal to rounding.
      CHECK(def.grads_finite());
      const double nd = def.grad_norm(64.0), na = acc.grad_norm(64.0);
      CHECK(na > 0.0);
      CHECK(std::fabs(nd - na) <= 1e-12 * na);
      UpdateArgs a;
      a.lr = 2e-3;
      a.grad_scale = 64.0;
      a.step = step;
      a.clip_coef = clip_coefficient(na, 1.0);
      def.optimizer_step(*settings[step - 1], a);
      acc.optimizer_step(*settings[step - 1], a);
      CHECK(def.export_params() == acc.export_params());
      CHECK(def.export_optimizer_state() == acc.export_optimizer_state());
      // after the update the gradients are still the step's (a reader widens them now)
      const ParamMap gd = def.export_grads(), ga = acc.export_grads();
      for (const auto& [name, v] : ga) CHECK_MESSAGE(v == gd.at(name), name << " after the update");
    }
    // zero_grads drops pending gradients: the next step's norm is its own
    def.zero_grads();
    CHECK(def.grad_norm(1.0) == 0.0);
  }
}

TEST_CASE("CudaBackend after zero_grads: the word table's gradient assigned by the MLM decoder (cleared after the "
          "heads without predictions), nothing of the step before left") {
  // zero_grads' deferred memset skips the word table's elements; the call's decoder assigns them
  // (model_accumulate_first) or, with no masked-LM prediction, clears them before the embeddings'
  // rows are added. A backend that ran other steps before gives a fresh backend's gradients, bitwise.
  dskc_test::require_gpu();
  const BertShape s = tiny_shape(true, 0.1);
  for (DType t : {DType::F16, DType::BF16}) {
    CAPTURE(dtype_name(t));
    const ParamMap params = test_params(s, 43);
    CudaBackend used(options(s, t));
    used.import_params(params, "test params");
    MicroStep m;
    m.loss_scale = 64.0;
    m.rng_step = 3;
    used.forward_backward(make_batch(4, 32, 6, s.vocab_size, 70), m);
    // The micro-batches of one step after zero_grads: with predictions; without; without, then with
    // (the second adds onto what the first left).
    const std::vector<std::vector<bool>> steps = {{true}, {false}, {false, true}};
    for (const std::vector<bool>& preds : steps) {
      CAPTURE(preds.size());
      CAPTURE(preds[0]);
      CudaBackend fresh(options(s, t));
      fresh.import_params(params, "test params");
      used.zero_grads();
      m.accumulation = static_cast<int>(preds.size());
      for (size_t k = 0; k < preds.size(); ++k) {
        Batch b = make_batch(4, 32, 6, s.vocab_size, 80 + k);
        if (!preds[k]) std::fill(b.masked_lm_positions.begin(), b.masked_lm_positions.end(), 0);
        const StepLoss lu = used.forward_backward(b, m), lf = fresh.forward_backward(b, m);
        CHECK(lu.mlm_loss == lf.mlm_loss);
        CHECK(lu.predictions == lf.predictions);
        CHECK((lu.predictions > 0) == preds[k]);
      }
      const ParamMap gu = used.export_grads(), gf = fresh.export_grads();
      for (const auto& [name, v] : gf) CHECK_MESSAGE(v == gu.at(name), name << " keeps an earlier step");
      const std::vector<float>& w = gf.at("bert.embeddings.word_embeddings.weight");
      CHECK(std::any_of(w.begin(), w.end(), [](float x) { return x != 0.f; }));
    }
  }
}

TEST_CASE("CudaBackend update queued without the host (async) and under the next forward (overlap): bitwise the "
          "host-synchronized update") {
  dskc_test::require_gpu();
  const BertShape s = tiny_shape(true, 0.1);
  for (DType t : {DType::F16, DType::BF16}) {
    CAPTURE(dtype_name(t));
    const ParamMap params = test_params(s, 41);
    // [0] sync, the reference; [1] async; [2] overlap; [3] overlap_low; [4] overlap with each update
    // held until the next forward has been queued and waited 100 ms (test_hold_optimizer).
    std::vector<std::unique_ptr<CudaBackend>> b;
    for (int mode : {0, 1, 2, 3, 2}) {
      BackendOptions o = options(s, t);
      o.optimizer_overlap = mode;
      o.test_hold_optimizer = b.size() == 4;
      b.push_back(std::make_unique<CudaBackend>(o));
      b.back()->import_params(params, "test params");
    }
    CudaBackend& held = *b[4];
    const OptimizerSettings adamw = adamw_settings(), adam_l2 = adam_l2_settings();
    for (int step = 1; step <= 5; ++step) {
      CAPTURE(step);
      MicroStep m;
      m.loss_scale = 64.0;
      m.rng_step = static_cast<uint32_t>(step);
      const int micro = step == 3 ? 2 : 1;  // step 3: two micro-batches (widened gradients)
      m.accumulation = micro;
      for (auto& x : b) x->zero_grads();
      for (int k = 0; k < micro; ++k) {
        const Batch batch = make_batch(4, 32, 6, s.vocab_size, 300 + 10 * step + k);
        const StepLoss ref = b[0]->forward_backward(batch, m);
        for (size_t i = 1; i < b.size(); ++i) {
          CAPTURE(i);
          StepLoss l;
          if (i == 4 && k == 0 && step > 1) {  // the previous update is still held
            const auto t0 = std::chrono::steady_clock::now();
            std::thread release([&] {
              std::this_thread::sleep_for(std::chrono::milliseconds(100));
              held.release_held_optimizer();
            });
            l = held.forward_backward(batch, m);
            release.join();
            const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            CHECK(waited >= 0.09);  // the forward waited for the update
          } else {
            l = b[i]->forward_backward(batch, m);
          }
          CHECK(l.mlm_loss == ref.mlm_loss);  // computed from the updated compute copies
          CHECK(l.nsp_loss == ref.nsp_loss);
        }
      }
      const double n0 = b[0]->grad_norm(64.0);
      CHECK(n0 > 0.0);
      for (size_t i = 1; i < b.size(); ++i) CHECK(b[i]->grad_norm(64.0) == n0);
      UpdateArgs a;
      a.lr = 2e-3;
      a.grad_scale = 64.0;
      a.step = step;
      a.clip_coef = clip_coefficient(n0, 1.0);
      for (auto& x : b) x->optimizer_step(step % 2 ? adamw : adam_l2, a);
      if (step == 4) {  // read right after the update is queued: the export waits for it
        const ParamMap p0 = b[0]->export_params(), m0 = b[0]->export_optimizer_state(), g0 = b[0]->export_grads();
        for (size_t i = 1; i < 4; ++i) {
          CAPTURE(i);
          CHECK(b[i]->export_params() == p0);
          CHECK(b[i]->export_optimizer_state() == m0);
          CHECK(b[i]->export_grads() == g0);
        }
      }
    }
    held.release_held_optimizer();
    const ParamMap p0 = b[0]->export_params(), m0 = b[0]->export_optimizer_state();
    for (size_t i = 1; i < b.size(); ++i) {
      CAPTURE(i);
      CHECK(b[i]->export_params() == p0);
      CHECK(b[i]->export_optimizer_state() == m0);
    }
  }
}
