// Optimizer, clipping, LR schedule, loss scaler and DeepSpeed-config unit tests: single steps of
// Adam / AdamW / Lamb against values computed by hand here (bias correction on and off, weight
// decay modes, loss-scale and clip factors), DeepSpeed's clipping rule, bing_bert's schedules,
// DynamicLossScaler's hysteresis and window, and DeepSpeed's batch-size rule and messages.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "tests/cpu/test_trainer_util.h"
#include "trainer/bert_model.h"
#include "trainer/ds_config.h"
#include "trainer/loss_scaler.h"
#include "trainer/lr_schedule.h"
#include "trainer/optimizer.h"

using namespace dskc;
using trainer_test::contains;
using trainer_test::error_of;

namespace {

struct One {
  float p, g, m = 0.0f, v = 0.0f;
};

One adam_step(const OptimizerSettings& s, const UpdateArgs& a, bool decay, One x) {
  optimizer_update(s, a, decay, &x.p, &x.g, &x.m, &x.v, 1);
  return x;
}

}  // namespace

TEST_CASE("Adam: one step with and without bias correction") {
  OptimizerSettings s;
  s.type = OptimizerType::Adam;
  s.adam_w_mode = true;
  UpdateArgs a;
  a.lr = 0.1;
  a.step = 1;
  // bias correction: m̂ = g, v̂ = g², u = g / (|g| + eps)
  One r = adam_step(s, a, true, {1.0f, 0.5f});
  CHECK(r.m == doctest::Approx(0.05));
  CHECK(r.v == doctest::Approx(0.00025));
  CHECK(r.p == doctest::Approx(1.0 - 0.1 * (0.5 / (0.5 + 1e-8))).epsilon(1e-7));
  // no bias correction: u = 0.05 / (sqrt(0.00025) + eps)
  s.bias_correction = false;
  r = adam_step(s, a, true, {1.0f, 0.5f});
  CHECK(r.p == doctest::Approx(1.0 - 0.1 * 0.05 / (std::sqrt(0.00025) + 1e-8)).epsilon(1e-7));
  // second step with bias correction (t = 2) from stored moments
  s.bias_correction = true;
  a.step = 2;
  One x{0.9f, -0.25f, 0.05f, 0.00025f};
  r = adam_step(s, a, true, x);
  const double m = 0.9 * 0.05 + 0.1 * -0.25, v = 0.999 * 0.00025 + 0.001 * 0.0625;
  const double u = (m / (1 - 0.81)) / (std::sqrt(v) / std::sqrt(1 - 0.998001) + 1e-8);
  CHECK(r.m == doctest::Approx(m));
  CHECK(r.v == doctest::Approx(v));
  CHECK(r.p == doctest::Approx(0.9 - 0.1 * u).epsilon(1e-6));
}

TEST_CASE("Adam weight decay: decoupled (AdamW, DeepSpeed's default) vs L2 (adam_w_mode false)") {
  OptimizerSettings s;
  s.weight_decay = 0.1;
  s.bias_correction = false;
  UpdateArgs a;
  a.lr = 0.01;
  // AdamW: u = m/(sqrt(v)+eps) + wd·p
  for (OptimizerType t : {OptimizerType::Adam, OptimizerType::AdamW}) {
    s.type = t;
    One r = adam_step(s, a, true, {2.0f, 0.4f});
    const double m = 0.04, v = 0.001 * 0.16;
    CHECK(r.p == doctest::Approx(2.0 - 0.01 * (m / (std::sqrt(v) + 1e-8) + 0.1 * 2.0)).epsilon(1e-7));
    // no decay for this tensor (biases, LayerNorm)
    One nd = adam_step(s, a, false, {2.0f, 0.4f});
    CHECK(nd.p == doctest::Approx(2.0 - 0.01 * (m / (std::sqrt(v) + 1e-8))).epsilon(1e-7));
  }
  // L2: g' = g + wd·p enters the moments
  s.type = OptimizerType::Adam;
  s.adam_w_mode = false;
  One r = adam_step(s, a, true, {2.0f, 0.4f});
  const double g = 0.4 + 0.1 * 2.0, m = 0.1 * g, v = 0.001 * g * g;
  CHECK(r.m == doctest::Approx(m));
  CHECK(r.p == doctest::Approx(2.0 - 0.01 * m / (std::sqrt(v) + 1e-8)).epsilon(1e-7));
  // AdamW ignores adam_w_mode = false
  s.type = OptimizerType::AdamW;
  CHECK(adam_step(s, a, true, {2.0f, 0.4f}).m == doctest::Approx(0.04));
}

TEST_CASE("loss scale and clip coefficient divide and scale the gradient") {
  OptimizerSettings s;
  s.bias_correction = false;
  UpdateArgs a;
  a.lr = 0.1;
  a.grad_scale = 1024.0;
  a.clip_coef = 0.5;
  One r = adam_step(s, a, false, {1.0f, 1024.0f * 0.8f});
  CHECK(r.m == doctest::Approx(0.1 * 0.4));  // g used = 0.8 · 0.5
  CHECK(r.v == doctest::Approx(0.001 * 0.16));
}

TEST_CASE("Lamb: trust ratio, its clamp, bias correction on the step size") {
  OptimizerSettings s;
  s.type = OptimizerType::Lamb;
  s.weight_decay = 0.01;
  s.bias_correction = false;
  s.max_coeff = 10.0;
  s.min_coeff = 0.01;
  UpdateArgs a;
  a.lr = 0.1;
  std::vector<float> p = {3.0f, 4.0f}, g = {0.2f, -0.1f}, m(2, 0.0f), v(2, 0.0f);
  std::vector<double> u(2);
  double un = 0.0;
  for (int i = 0; i < 2; ++i) {
    const double mi = 0.1 * g[i], vi = 0.001 * g[i] * g[i];
    u[i] = mi / (std::sqrt(vi) + 1e-8) + 0.01 * p[i];
    un += u[i] * u[i];
  }
  const double trust = 5.0 / std::sqrt(un);  // ‖p‖ = 5; ‖u‖ ≈ 4.47 -> inside [0.01, 10]
  REQUIRE(trust > 0.01);
  REQUIRE(trust < 10.0);
  std::vector<float> q = p;
  optimizer_update(s, a, true, q.data(), g.data(), m.data(), v.data(), 2);
  for (int i = 0; i < 2; ++i) CHECK(q[i] == doctest::Approx(p[i] - 0.1 * trust * u[i]).epsilon(1e-6));

  // Clamp at max_coeff: large weights, small update.
  s.max_coeff = 0.3;
  std::fill(m.begin(), m.end(), 0.0f);
  std::fill(v.begin(), v.end(), 0.0f);
  q = p;
  optimizer_update(s, a, true, q.data(), g.data(), m.data(), v.data(), 2);
  for (int i = 0; i < 2; ++i) CHECK(q[i] == doctest::Approx(p[i] - 0.1 * 0.3 * u[i]).epsilon(1e-6));

  // Zero weights: trust 1. Bias correction scales the step by sqrt(bc2)/bc1.
  s.bias_correction = true;
  s.max_coeff = 10.0;
  std::vector<float> z = {0.0f, 0.0f};
  std::fill(m.begin(), m.end(), 0.0f);
  std::fill(v.begin(), v.end(), 0.0f);
  optimizer_update(s, a, true, z.data(), g.data(), m.data(), v.data(), 2);
  const double step_size = 0.1 * std::sqrt(0.001) / 0.1;
  for (int i = 0; i < 2; ++i) {
    const double mi = 0.1 * g[i], vi = 0.001 * g[i] * g[i];
    CHECK(z[i] == doctest::Approx(-step_size * mi / (std::sqrt(vi) + 1e-8)).epsilon(1e-6));
  }
}

TEST_CASE("gradient clipping: DeepSpeed's coefficient") {
  CHECK(clip_coefficient(2.0, 1.0) == doctest::Approx(1.0 / (2.0 + 1e-6)));
  CHECK(clip_coefficient(0.5, 1.0) == 1.0);
  CHECK(clip_coefficient(5.0, 0.0) == 1.0);  // off
  CHECK(clip_coefficient(std::nan(""), 1.0) == 1.0);
}

TEST_CASE("LR schedules (bing_bert) with warmup, decay, offset and rewarmup origin") {
  LrSchedule l;
  l.base_lr = 1e-3;
  l.warmup_proportion = 0.1;
  l.total_steps = 100;
  l.decay_rate = 0.5;
  l.decay_step = 10;
  l.kind = LrScheduleKind::LE;
  CHECK(l.lr_at(0) == 0.0);
  CHECK(l.lr_at(5) == doctest::Approx(1e-3 * 0.5));
  CHECK(l.lr_at(10) == doctest::Approx(1e-3));
  CHECK(l.lr_at(20) == doctest::Approx(1e-3 * 0.5));  // one decay_step past warmup
  l.kind = LrScheduleKind::EE;
  CHECK(l.lr_at(5) == doctest::Approx(1e-3 * 0.25));
  CHECK(l.lr_at(30) == doctest::Approx(1e-3 * 0.25));
  l.kind = LrScheduleKind::EP;
  CHECK(l.lr_at(5) == doctest::Approx(1e-3 * std::pow(0.5, 1.5)));
  CHECK(l.lr_at(50) == doctest::Approx(1e-3 * 0.25));
  l.kind = LrScheduleKind::LL;
  CHECK(l.lr_at(55) == doctest::Approx(1e-3 * 0.5));
  CHECK(l.lr_at(100) == doctest::Approx(0.0));
  l.kind = LrScheduleKind::Constant;
  CHECK(l.lr_at(77) == doctest::Approx(1e-3));
  l.lr_offset = 1e-5;
  l.origin_step = 50;  // --rewarmup at step 50
  CHECK(l.lr_at(50) == doctest::Approx(1e-5));
  CHECK(l.lr_at(55) == doctest::Approx(1e-3 * 0.5 + 1e-5));
  CHECK(parse_lr_schedule("ee") == LrScheduleKind::EE);
  CHECK(contains(error_of([] { parse_lr_schedule("XX"); }).what(), "LE"));
}

TEST_CASE("dynamic loss scaler: hysteresis, halving, window, floor; static and disabled") {
  LossScalerConfig c;
  c.enabled = true;
  c.initial_scale_power = 4;
  c.loss_scale_window = 3;
  c.hysteresis = 2;
  c.min_loss_scale = 4.0;
  LossScaler s(c);
  CHECK(s.scale() == 16.0);
  CHECK(s.update(true));  // first overflow: absorbed by hysteresis, step skipped
  CHECK(s.scale() == 16.0);
  CHECK(s.update(true));  // second: halves
  CHECK(s.scale() == 8.0);
  CHECK(!s.update(false));
  CHECK(!s.update(false));
  CHECK(s.scale() == 8.0);
  CHECK(!s.update(false));  // third good step since the overflow: doubles
  CHECK(s.scale() == 16.0);
  s.update(true);
  s.update(true);
  s.update(true);
  s.update(true);
  CHECK(s.scale() == 4.0);  // floor
  c.hysteresis = 1;
  LossScaler h1(c);
  CHECK(h1.update(true));
  CHECK(h1.scale() == 8.0);

  LossScalerConfig st = c;
  st.static_scale = 128.0;
  LossScaler fixed(st);
  CHECK(fixed.update(true));
  CHECK(fixed.scale() == 128.0);
  for (int i = 0; i < 10; ++i) fixed.update(false);
  CHECK(fixed.scale() == 128.0);

  LossScaler off(LossScalerConfig{});
  CHECK(off.scale() == 1.0);
  CHECK(off.update(true));  // a non-finite fp32 step is skipped too
  CHECK(off.scale() == 1.0);
}

TEST_CASE("DeepSpeed configs: the guide's files parse with DeepSpeed's defaults") {
  const std::string ex = dskc_test::source_dir() + "/examples/";
  DsConfig a = load_ds_config(ex + "deepspeed_bsz4096_adam_config.json");
  CHECK(*a.train_batch_size == 4096);
  CHECK(*a.micro_batch == 64);
  CHECK(!a.gradient_accumulation_steps);
  CHECK(a.steps_per_print == 1000);
  CHECK(a.optimizer.type == OptimizerType::Adam);
  CHECK(a.optimizer.lr == 2e-4);
  CHECK(a.optimizer.max_grad_norm == 1.0);
  CHECK(!a.optimizer.bias_correction);
  CHECK(a.optimizer.beta2 == 0.999);
  CHECK(a.fp16);
  CHECK(a.fp16_scaler.dynamic());
  CHECK(a.fp16_scaler.initial_scale_power == 16);
  CHECK(a.fp16_scaler.loss_scale_window == 1000);
  CHECK(a.fp16_scaler.hysteresis == 2);
  DsConfig l = load_ds_config(ex + "deepspeed_bsz32K_lamb_config_seq512.json");
  CHECK(l.optimizer.type == OptimizerType::Lamb);
  CHECK(l.optimizer.max_coeff == 0.3);
  CHECK(l.optimizer.min_coeff == 0.01);
  CHECK(l.optimizer.max_grad_norm == 1.0);  // from gradient_clipping
  CHECK(load_ds_config(ex + "deepspeed_sparse_attention_config.json").sparse_attention);

  DsConfig u = parse_ds_config(R"({"train_batch_size": 8, "wall_clock_breakdown": false, "zero_optimization":
      {"stage": 0}, "optimizer": {"type": "adamw", "params": {"betas": [0.8, 0.99]}}, "bf16": {"enabled": true}})",
                               "u.json");
  CHECK(u.ignored_keys == std::vector<std::string>{"wall_clock_breakdown", "zero_optimization"});
  CHECK(u.optimizer.type == OptimizerType::AdamW);
  CHECK(u.optimizer.beta1 == 0.8);
  CHECK(u.bf16);
  CHECK(!u.fp32_allreduce);
  CHECK(parse_ds_config(R"({"train_batch_size": 8, "fp32_allreduce": true})", "f.json").fp32_allreduce);
  CHECK(contains(error_of([] { parse_ds_config(R"({"fp32_allreduce": "yes"})", "x.json"); }).what(), "fp32_allreduce"));
  CHECK(contains(error_of([] { parse_ds_config(R"({"optimizer": {"type": "Adagrad"}})", "x.json"); }).what(),
                 "x.json: optimizer.type \"Adagrad\""));
  CHECK(contains(error_of([] { parse_ds_config(R"({"optimizer": {"type": "Adam", "params": {"lrr": 1}}})", "x.json"); })
                     .what(),
                 "did you mean 'lr'"));
  CHECK(contains(error_of([] { parse_ds_config(R"({"fp16": {"enabled": true}, "bf16": {"enabled": true}})", "x.json"); })
                     .what(),
                 "both true"));
}

TEST_CASE("DeepSpeed batch-size rule: derivation and inconsistency messages") {
  BatchSizeInputs in;
  in.train_batch_size = 4096;
  in.micro_batch = 64;
  BatchSizes b = resolve_batch_sizes(in, 16, "ds.json");
  CHECK(b.accumulation == 4);
  in = {};
  in.train_batch_size = 64;
  in.accumulation = 4;
  CHECK(resolve_batch_sizes(in, 2, "ds.json").micro_batch == 8);
  in = {};
  in.micro_batch = 8;
  in.accumulation = 2;
  CHECK(resolve_batch_sizes(in, 1, "ds.json").train_batch_size == 16);
  in = {};
  in.micro_batch = 8;
  b = resolve_batch_sizes(in, 1, "ds.json");
  CHECK((b.train_batch_size == 8 && b.accumulation == 1));
  in = {};
  in.train_batch_size = 4096;
  in.micro_batch = 64;
  in.accumulation = 4;
  in.accumulation_origin = "--gradient_accumulation_steps";
  auto e = error_of([&] { resolve_batch_sizes(in, 1, "ds.json"); });
  CHECK(e.kind() == ErrorKind::Config);
  MESSAGE(std::string(e.what()));
  CHECK(contains(e.what(), "ds.json: inconsistent batch sizes"));
  CHECK(contains(e.what(), "4096 (from train_batch_size) != micro batch 64"));
  CHECK(contains(e.what(), "gradient_accumulation_steps 4 (from --gradient_accumulation_steps)"));
  CHECK(contains(e.what(), "(= 256)"));
  CHECK(contains(error_of([] { resolve_batch_sizes({}, 1, "ds.json"); }).what(), "neither train_batch_size"));
  in = {};
  in.train_batch_size = 10;
  in.micro_batch = 4;  // 10 is not a multiple of 4
  CHECK(contains(error_of([&] { resolve_batch_sizes(in, 1, "ds.json"); }).what(), "10 (from train_batch_size)"));
}

TEST_CASE("BERT model configs: flat, bing_bert's nested form, errors") {
  const std::string ex = dskc_test::source_dir() + "/examples/";
  BertModelConfig flat = load_bert_model_config(ex + "bert_large_adam_seq128.json");
  CHECK(flat.shape.hidden_size == 1024);
  CHECK(flat.shape.intermediate_size == 4096);
  CHECK(flat.shape.pre_layer_norm);
  CHECK(count_parameters(flat.shape) > 330'000'000);
  BertModelConfig nested = parse_bert_model_config(
      R"({"name": "bing_bert", "bert_model_config": {"vocab_size": 100, "hidden_size": 16, "num_hidden_layers": 1,
          "num_attention_heads": 2, "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
          "hidden_act": "gelu_new"}, "training": {"learning_rate": 4e-4, "warmup_proportion": 0.02,
          "decay_rate": 0.9, "decay_step": 250, "total_training_steps": 1000}})",
      "n.json");
  CHECK(nested.shape.intermediate_size == 64);
  CHECK(nested.shape.gelu == GeluForm::Tanh);
  CHECK(*nested.training.learning_rate == 4e-4);
  CHECK(*nested.training.decay_step == 250);
  CHECK(parse_bert_shape(to_json_text(nested.shape), "rt") == nested.shape);
  CHECK(contains(error_of([] { parse_bert_model_config(R"({"hidden_size": 16})", "m.json"); }).what(),
                 "m.json: missing required key 'vocab_size'"));
}
