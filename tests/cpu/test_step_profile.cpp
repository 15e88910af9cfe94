// The step profile (trainer/step_profile.h, `dskc train --profile_steps`): intervals between
// marks go to the later mark's phase, repeated phases add up, means are per step; and through
// the trainer on the CPU backend, every phase of a step in order, per-micro-batch phases once per
// micro-batch, phases that add up to the step, only the last N steps.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "tests/cpu/test_trainer_util.h"
#include "trainer/step_profile.h"

using namespace trainer_test;
using dskc::PhaseMark;
using dskc::StepProfile;
namespace phase = dskc::phase;

TEST_CASE("StepProfile: each interval goes to the phase of the mark that ends it; means per step") {
  StepProfile p;
  // device: start 0, a ends 2, b ends 5, a again ends 6, c ends 10; host: 0, 1, 1.5, 2, 2.5
  p.add_step({{"start", 0, 0}, {"a", 2, 1}, {"b", 5, 1.5}, {"a", 6, 2}, {"c", 10, 2.5}});
  // the second step: a 4, b 0, a 4, c 2 (device), origin at 0 again
  p.add_step({{"start", 0, 0}, {"a", 4, 1}, {"b", 4, 2}, {"a", 8, 3}, {"c", 10, 3.5}});
  REQUIRE(p.steps() == 2);
  const auto& rows = p.rows();
  REQUIRE(rows.size() == 3);
  CHECK(rows[0].phase == "a");  // first-seen order; the start mark is not a phase
  CHECK(rows[1].phase == "b");
  CHECK(rows[2].phase == "c");
  CHECK(rows[0].marks == 4);
  CHECK(rows[0].device_ms == doctest::Approx(2 + 1 + 4 + 4));
  CHECK(rows[0].host_ms == doctest::Approx(1 + 0.5 + 1 + 1));
  CHECK(rows[1].device_ms == doctest::Approx(3 + 0));
  CHECK(rows[2].device_ms == doctest::Approx(4 + 2));
  CHECK(p.mean_step_device_ms() == doctest::Approx(10));
  CHECK(p.mean_step_host_ms() == doctest::Approx(3));
  const std::string t = p.table();
  // a: 2 marks per step, 5.5 ms per step = 55% of the 10 ms step, host 1.75 ms
  CHECK_MESSAGE(t.find("| a | 2 | 5.500 | 55.0 | 1.750 |") != std::string::npos, t);
  CHECK_MESSAGE(t.find("| b | 1 | 1.500 | 15.0 | 0.750 |") != std::string::npos, t);
  CHECK_MESSAGE(t.find("| whole step | | 10.000 | 100.0 | 3.000 |") != std::string::npos, t);
  // A mark earlier than the one before it is a bug in whoever set it.
  StepProfile bad;
  const std::string msg =
      dskc_test::error_of([&] { bad.add_step({{"start", 0, 0}, {"x", 3, 1}, {"y", 2, 2}}); }, dskc::ErrorKind::Internal);
  CHECK_MESSAGE(msg.find("\"y\"") != std::string::npos, msg);
  CHECK(StepProfile{}.table().empty());
}

TEST_CASE("HostPhaseTimer: times after the first mark, a new sequence after take()") {
  dskc::HostPhaseTimer t;
  t.mark("start");
  t.mark("x");
  const auto a = t.take();
  REQUIRE(a.size() == 2);
  CHECK(a[0].phase == "start");
  CHECK(a[0].device_ms == 0.0);
  CHECK(a[1].device_ms >= 0.0);
  CHECK(a[1].device_ms == a[1].host_ms);
  CHECK(t.take().empty());
}

TEST_CASE("dskc train --profile_steps on the CPU backend: every phase of the last N steps, adding up to the step") {
  TempDir dir;
  const std::string cf = write_model_config(dir / "model.json", TinyModel{});
  const std::string ds = write_ds_config(dir / "ds.json", 8, 4);  // accumulation 2
  auto o = base_options(ds, cf, corpus_shards(), dir / "out", 4);
  o.profile_steps = 3;
  std::vector<std::string> lines;
  o.log = [&](const std::string& s) { lines.push_back(s); };
  const dskc::TrainResult r = dskc::train(o);
  REQUIRE(r.steps.size() == 4);
  REQUIRE(r.profile.steps() == 3);
  std::vector<std::string> phases;
  for (const auto& row : r.profile.rows()) phases.push_back(row.phase);
  const std::vector<std::string> want = {phase::kZeroGrads,     phase::kNextBatch,     phase::kBatchUpload,
                                         phase::kEmbeddingsFwd, phase::kEncoderFwd,    phase::kHeads,
                                         phase::kEncoderBwd,    phase::kEmbeddingsBwd, phase::kOverflowCheck,
                                         phase::kGradNorm,      phase::kOptimizer,     phase::kBookkeeping};
  CHECK(phases == want);
  double sum = 0.0;
  for (const auto& row : r.profile.rows()) {
    const bool per_micro = row.phase == phase::kNextBatch || row.phase == phase::kBatchUpload ||
                           row.phase == phase::kEmbeddingsFwd || row.phase == phase::kEncoderFwd ||
                           row.phase == phase::kHeads || row.phase == phase::kEncoderBwd ||
                           row.phase == phase::kEmbeddingsBwd;
    CHECK_MESSAGE(row.marks == 3 * (per_micro ? 2 : 1), row.phase);
    sum += row.device_ms;
  }
  // The phases cover the step: their sum is the whole step, which is the trainer's own step time
  // (steps 2-4) plus the bookkeeping after it.
  CHECK(sum / 3 == doctest::Approx(r.profile.mean_step_device_ms()));
  const double step_ms = 1e3 * (r.steps[1].seconds + r.steps[2].seconds + r.steps[3].seconds) / 3;
  CHECK(r.profile.mean_step_device_ms() >= 0.95 * step_ms);
  CHECK(r.profile.mean_step_device_ms() <= 1.05 * step_ms + 2.0);
  // The encoder's two passes are most of a CPU step.
  const auto enc = [&](const char* name) {
    return std::find_if(r.profile.rows().begin(), r.profile.rows().end(), [&](const auto& x) { return x.phase == name; })
        ->device_ms;
  };
  CHECK(enc(phase::kEncoderFwd) + enc(phase::kEncoderBwd) > 0.3 * sum);
  // The table is printed at the end, after its title line.
  const auto title = std::find_if(lines.begin(), lines.end(),
                                  [](const std::string& s) { return s.rfind("step profile, steps 2-4,", 0) == 0; });
  REQUIRE(title != lines.end());
  REQUIRE(title + 3 < lines.end());
  CHECK(title[1] == "| phase | marks per step | device ms | % of step | host ms |");
  CHECK(title[3].rfind("| zero gradients | 1 | ", 0) == 0);

  // Asking for more steps than the run takes profiles those it takes, and says so.
  TempDir dir2;
  auto o2 = base_options(ds, cf, corpus_shards(), dir2 / "out", 2);
  o2.profile_steps = 5;
  lines.clear();
  o2.log = o.log;
  CHECK(dskc::train(o2).profile.steps() == 2);
  CHECK(std::any_of(lines.begin(), lines.end(), [](const std::string& s) {
    return s.find("step profile, steps 1-2 (--profile_steps 5: this run took only 2 steps)") != std::string::npos;
  }));
  // Without the option nothing is profiled.
  TempDir dir3;
  CHECK(dskc::train(base_options(ds, cf, corpus_shards(), dir3 / "out", 1)).profile.steps() == 0);
}
