// The training loop on the CPU backend with tiny models: the loss falls on the shipped corpus;
// resuming from a checkpoint reproduces the uninterrupted run bit for bit (fp16 dynamic
// scaling, dropout, accumulation); 4 × B accumulation equals 1 × 4B; an injected overflow skips
// the update and lowers the loss scale.
#include <doctest/doctest.h>

#include <cmath>

#include "runtime/safetensors.h"
#include "tests/cpu/test_trainer_util.h"

using namespace trainer_test;
using dskc::ParamMap;
using dskc::StepRecord;
using dskc::TrainBackend;

TEST_CASE("loss falls on the shipped corpus") {
  TempDir dir;
  TinyModel m;
  m.hidden = 64;
  m.intermediate = 128;
  const std::string cf = write_model_config(dir / "model.json", m);
  const std::string ds = write_ds_config(dir / "ds.json", 16, 16, "", 5e-3);
  auto o = base_options(ds, cf, corpus_shards(), dir / "out", 60);
  o.warmup_proportion = 0.05;
  dskc::TrainResult r = dskc::train(o);
  REQUIRE(r.steps.size() == 60);
  double first = 0.0, last = 0.0;
  for (int i = 0; i < 5; ++i) {
    first += r.steps[i].loss / 5;
    last += r.steps[55 + i].loss / 5;
  }
  MESSAGE("mean loss of steps 1-5: ", first, ", of steps 56-60: ", last);
  CHECK(first > 7.0);  // ≈ ln(1000) + ln(2)
  CHECK(last < first - 0.5);  // the MLM loss reaches the unigram level; NSP starts to be learned
  for (const StepRecord& s : r.steps) CHECK(!s.skipped);
}

TEST_CASE("resume from a checkpoint continues bit-identically (fp16 dynamic scale, dropout, accumulation)") {
  TempDir dir;
  const std::string cf = write_model_config(dir / "model.json", TinyModel{});
  const std::string ds = write_ds_config(dir / "ds.json", 8, 4, R"({"enabled": true, "loss_scale": 0,
      "initial_scale_power": 12, "loss_scale_window": 3})");
  auto o = base_options(ds, cf, corpus_shards(), dir / "out", 10);
  o.checkpoint_steps = 5;
  o.seed = 1234;
  o.lr_schedule = "EE";
  o.warmup_proportion = 0.3;
  dskc::TrainResult full = dskc::train(o);
  REQUIRE(full.steps.size() == 10);
  CHECK(full.steps[9].loss_scale > full.steps[0].loss_scale);  // the window doubled it: state matters
  CHECK(fs::exists(dir / "out/global_step5/model.safetensors"));
  CHECK(dskc_test::read_file(dir / "out/latest") == "global_step10\n");
  const std::string model10 = dskc_test::read_file(dir / "out/global_step10/model.safetensors");
  const std::string optim10 = dskc_test::read_file(dir / "out/global_step10/optimizer.safetensors");
  const std::string state10 = dskc_test::read_file(dir / "out/global_step10/trainer_state.json");

  // Resume into the same output dir from step 5: steps 6-10 again, global_step10 replaced.
  auto r = o;
  r.load_training_checkpoint = dir / "out";
  r.load_checkpoint_id = "global_step5";
  r.seed.reset();
  dskc::TrainResult resumed = dskc::train(r);
  REQUIRE(resumed.start_step == 5);
  REQUIRE(resumed.steps.size() == 5);
  for (int i = 0; i < 5; ++i) {
    const StepRecord &a = full.steps[5 + i], &b = resumed.steps[i];
    CHECK(b.step == a.step);
    CHECK(b.mlm_loss == a.mlm_loss);  // bit-identical
    CHECK(b.nsp_loss == a.nsp_loss);
    CHECK(b.loss_scale == a.loss_scale);
    CHECK(b.lr == a.lr);
    CHECK(b.grad_norm == a.grad_norm);
  }
  CHECK(dskc_test::read_file(dir / "out/global_step10/model.safetensors") == model10);
  CHECK(dskc_test::read_file(dir / "out/global_step10/optimizer.safetensors") == optim10);
  CHECK(dskc_test::read_file(dir / "out/global_step10/trainer_state.json") == state10);
  // metrics.csv: one row per step, the redone steps replacing the earlier ones.
  const std::string csv = dskc_test::read_file(dir / "out/metrics.csv");
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 11);
  // No temporary directories left behind.
  for (const auto& e : fs::directory_iterator(dir / "out")) CHECK(e.path().filename().string()[0] != '.');
}

TEST_CASE("gradient accumulation: 4 micro-batches of B equal one batch of 4B") {
  TempDir dir;
  TinyModel m;
  m.dropout = 0.0;
  const std::string cf = write_model_config(dir / "model.json", m);
  write_synthetic_shard(dir / "data", 64, 32, 4, m.vocab, 5);
  const std::string ds1 = write_ds_config(dir / "ds1.json", 8, 8);
  const std::string ds4 = write_ds_config(dir / "ds4.json", 8, 2);
  std::vector<ParamMap> grads1, grads4, params1, params4;
  auto run = [&](const std::string& ds, std::vector<ParamMap>& grads, std::vector<ParamMap>& params) {
    auto o = base_options(ds, cf, dir / "data", dir / ("out-" + ds.substr(ds.size() - 8)), 3);
    o.after_step = [&](const StepRecord&, TrainBackend& b) {
      grads.push_back(b.export_grads());
      params.push_back(b.export_params());
    };
    return dskc::train(o);
  };
  dskc::TrainResult a = run(ds1, grads1, params1);
  dskc::TrainResult b = run(ds4, grads4, params4);
  REQUIRE(a.steps.size() == 3);
  REQUIRE(b.steps.size() == 3);
  for (int s = 0; s < 3; ++s) {
    CHECK(b.steps[s].mlm_loss == doctest::Approx(a.steps[s].mlm_loss).epsilon(1e-6));
    CHECK(b.steps[s].nsp_loss == doctest::Approx(a.steps[s].nsp_loss).epsilon(1e-6));
    CHECK(b.steps[s].grad_norm == doctest::Approx(a.steps[s].grad_norm).epsilon(1e-5));
    double worst_g = 0.0, worst_p = 0.0;
    std::string where;
    for (const auto& [name, g1] : grads1[s]) {
      const std::vector<float>& g4 = grads4[s].at(name);
      const std::vector<float>& p1 = params1[s].at(name);
      const std::vector<float>& p4 = params4[s].at(name);
      double scale = 1e-6;
      for (float v : g1) scale = std::max(scale, static_cast<double>(std::fabs(v)));
      for (size_t i = 0; i < g1.size(); ++i) {
        const double e = std::fabs(g1[i] - g4[i]) / scale;
        if (e > worst_g) {
          worst_g = e;
          where = name;
        }
        worst_p = std::max(worst_p, static_cast<double>(std::fabs(p1[i] - p4[i])));
      }
    }
    MESSAGE("step ", s + 1, ": worst gradient difference ", worst_g, " (of the tensor's max) in ", where,
            ", worst parameter difference ", worst_p);
    CHECK(worst_g < 1e-4);
    CHECK(worst_p < 1e-5);
  }
}

TEST_CASE("an injected gradient overflow skips the update and halves the loss scale") {
  TempDir dir;
  const std::string cf = write_model_config(dir / "model.json", TinyModel{});
  const std::string ds =
      write_ds_config(dir / "ds.json", 4, 4, R"({"enabled": true, "loss_scale": 0, "initial_scale_power": 10,
      "hysteresis": 1})");
  auto o = base_options(ds, cf, corpus_shards(), dir / "out", 5);
  o.inject_overflow_at_step = 3;
  std::vector<ParamMap> params, moments;
  o.after_step = [&](const StepRecord&, TrainBackend& b) {
    params.push_back(b.export_params());
    moments.push_back(b.export_optimizer_state());
  };
  dskc::TrainResult r = dskc::train(o);
  REQUIRE(r.steps.size() == 5);
  CHECK(!r.steps[1].skipped);
  CHECK(r.steps[2].skipped);
  CHECK(std::isnan(r.steps[2].grad_norm));
  CHECK(r.steps[2].loss_scale == 1024.0);
  CHECK(r.steps[3].loss_scale == 512.0);
  CHECK(!r.steps[3].skipped);
  CHECK(params[2] == params[1]);    // step 3 changed nothing
  CHECK(moments[2] == moments[1]);
  CHECK(params[3] != params[2]);    // step 4 updates again
  // The checkpoint records the skip and the scaler state.
  const std::string state = dskc_test::read_file(dir / "out/global_step5/trainer_state.json");
  CHECK(contains(state, "\"skipped_steps\": 1"));
  CHECK(contains(state, "\"scale\": 512.0"));
  CHECK(contains(state, "\"optimizer_steps\": 4"));
}

TEST_CASE("reading micro-batches ahead (DSKC_TRAIN_PREFETCH) changes nothing: losses, weights, data position") {
  // Three shards of 10 samples, 8 samples per step: steps cross shard files and an epoch, and the
  // checkpoints at steps 2 and 5 are taken while the next batch's read is in flight.
  TempDir dir;
  fs::create_directories(dir / "data");
  for (int i = 0; i < 3; ++i) {
    const std::string part = dir / ("part" + std::to_string(i));
    write_synthetic_shard(part, 10, 32, 3, 1000, 50 + static_cast<uint64_t>(i));
    fs::rename(part + "/shard_00000.hdf5", dir / ("data/shard_0000" + std::to_string(i) + ".hdf5"));
  }
  const std::string cf = write_model_config(dir / "model.json", TinyModel{});
  const std::string ds = write_ds_config(dir / "ds.json", 8, 4);  // accumulation 2
  std::map<std::string, std::string> files[2];
  std::vector<StepRecord> steps[2];
  for (int ahead : {0, 1}) {
    CAPTURE(ahead);
    auto o = base_options(ds, cf, dir / "data", dir / ("out" + std::to_string(ahead)), 5);
    o.prefetch = ahead;
    o.checkpoint_steps = 2;
    steps[ahead] = dskc::train(o).steps;
    REQUIRE(steps[ahead].size() == 5);
    for (const char* f : {"global_step2/trainer_state.json", "global_step4/trainer_state.json",
                          "global_step5/trainer_state.json", "global_step5/model.safetensors"})
      files[ahead][f] = dskc_test::read_file(dir / ("out" + std::to_string(ahead) + "/" + f));
  }
  for (int i = 0; i < 5; ++i) {
    CHECK(steps[1][i].mlm_loss == steps[0][i].mlm_loss);
    CHECK(steps[1][i].nsp_loss == steps[0][i].nsp_loss);
    CHECK(steps[1][i].grad_norm == steps[0][i].grad_norm);
  }
  CHECK(files[1] == files[0]);
  // The synchronous run's positions are the ground truth: 16 samples after step 2, 40 (an epoch of 30
  // and 10 more) after step 5.
  CHECK(contains(files[0]["global_step2/trainer_state.json"], "\"taken\": 16"));
  CHECK(contains(files[0]["global_step5/trainer_state.json"], "\"epoch\": 1"));
  CHECK(contains(files[0]["global_step5/trainer_state.json"], "\"taken\": 40"));
}
