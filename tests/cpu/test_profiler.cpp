// runtime/profiler.h's host-side parts: busy_time, the union of a timeline's intervals (dskc bench
// --timeline reports it per stream and for both streams together), chrome_trace_json (--trace), and
// gpu_monitor.h's summary of the GPU clock and power.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "runtime/gpu_monitor.h"
#include "runtime/profiler.h"

using dskc::busy_time;

TEST_CASE("busy_time is the length of the union of the intervals") {
  CHECK(busy_time({}) == 0.0);
  CHECK(busy_time({{1.0, 3.0}}) == doctest::Approx(2.0));
  // disjoint, in any order
  CHECK(busy_time({{5.0, 6.5}, {1.0, 2.0}}) == doctest::Approx(2.5));
  // overlapping and nested
  CHECK(busy_time({{0.0, 4.0}, {1.0, 2.0}, {3.0, 7.0}}) == doctest::Approx(7.0));
  // touching intervals count once, a zero-length one adds nothing
  CHECK(busy_time({{0.0, 1.0}, {1.0, 2.0}, {5.0, 5.0}}) == doctest::Approx(2.0));
  // a later interval that starts inside an earlier, longer one
  CHECK(busy_time({{0.0, 10.0}, {2.0, 3.0}, {9.0, 12.0}, {20.0, 21.0}}) == doctest::Approx(13.0));
}

TEST_CASE("stream_busy: the wall, each stream's busy time and the overlap of the two") {
  const std::vector<dskc::Profiler::Step> steps = {{"a", false, 0.0, 1.0},
                                                   {"b", false, 1.5, 3.0},
                                                   {"w", true, 0.5, 2.0},
                                                   {"v", true, 2.5, 4.0}};
  const dskc::StreamBusy b = dskc::stream_busy(steps);
  CHECK(b.wall == doctest::Approx(4.0));
  CHECK(b.main == doctest::Approx(2.5));
  CHECK(b.side == doctest::Approx(3.0));
  CHECK(b.both == doctest::Approx(1.5));  // [0.5, 1] + [1.5, 2] + [2.5, 3]
  CHECK(dskc::stream_busy({}).wall == 0.0);
}

TEST_CASE("chrome_trace_json: one complete event per step in microseconds, a thread per stream") {
  std::vector<dskc::Profiler::Step> steps = {{"layernorm_fwd_norm", false, 0.0079, 0.0342},
                                             {"gemm_output_wgrad", true, 0.5910, 0.7204},
                                             {"gemm_output_dgrad", false, 0.4755, 0.5808}};
  const auto j = nlohmann::json::parse(dskc::chrome_trace_json(steps, "dskc bench 64 x 128"));
  CHECK(j.at("displayTimeUnit") == "ms");
  const auto& ev = j.at("traceEvents");
  std::vector<nlohmann::json> x, meta;
  for (const auto& e : ev) (e.at("ph") == "X" ? x : meta).push_back(e);
  REQUIRE(x.size() == 3);
  REQUIRE(meta.size() == 3);
  CHECK(meta[0].at("args").at("name") == "dskc bench 64 x 128");
  CHECK(meta[1].at("tid") == 0);
  CHECK(meta[1].at("args").at("name") == "main stream");
  CHECK(meta[2].at("tid") == 1);
  CHECK(meta[2].at("args").at("name") == "side stream");
  CHECK(x[0].at("name") == "layernorm_fwd_norm");
  CHECK(x[0].at("tid") == 0);
  CHECK(x[0].at("ts").get<double>() == doctest::Approx(7.9));
  CHECK(x[0].at("dur").get<double>() == doctest::Approx(26.3));
  CHECK(x[1].at("name") == "gemm_output_wgrad");
  CHECK(x[1].at("tid") == 1);
  CHECK(x[1].at("ts").get<double>() == doctest::Approx(591.0));
  CHECK(x[1].at("dur").get<double>() == doctest::Approx(129.4));
  CHECK(x[2].at("tid") == 0);
  for (const auto& e : x) CHECK(e.at("pid") == 0);
}

// runtime/gpu_monitor.h: what dskc bench says about the GPU's clock and power during the timed
// iterations (the summary and its line are pure; NVML itself is only on GPU machines).
TEST_CASE("summarize_samples: means, extremes and every clock-slowdown reason of the samples") {
  using dskc::GpuSample;
  const std::vector<GpuSample> s = {{0, 1980, 300.0, 0x1}, {5, 1500, 690.0, 0x4}, {10, 1530, 700.0, 0x4 | 0x20}};
  const dskc::GpuMonitorSummary r = dskc::summarize_samples(s, 700.0);
  CHECK(r.available);
  CHECK(r.samples == 3);
  CHECK(r.sm_mhz_mean == doctest::Approx(1670.0));
  CHECK(r.sm_mhz_min == 1500);
  CHECK(r.sm_mhz_max == 1980);
  CHECK(r.power_w_mean == doctest::Approx(563.333333));
  CHECK(r.power_limit_w == 700.0);
  CHECK(r.reasons == (0x1 | 0x4 | 0x20));
  CHECK(dskc::clock_reason_names(r.reasons) == "sw power cap, sw thermal slowdown");
  const std::string line = dskc::describe_gpu_state(r);
  CHECK(line == "GPU during the timed iterations (3 samples): SM clock 1670 MHz mean (1500-1980), power 563 W mean "
                "(limit 700 W), clock lowered by: sw power cap, sw thermal slowdown");
  // idle and the application clock setting are not slowdowns
  CHECK(dskc::clock_reason_names(0x1 | 0x2).empty());
  CHECK(dskc::describe_gpu_state(dskc::summarize_samples({{0, 1980, 0.0, 0x1}}, 0)) ==
        "GPU during the timed iterations (1 samples): SM clock 1980 MHz mean (1980-1980), no clock slowdown reported");
  CHECK(dskc::describe_gpu_state(dskc::summarize_samples({}, 0)).find("no sample") != std::string::npos);
}

TEST_CASE("GpuMonitor without NVML for the device says why and records nothing") {
  // No GPU here (and on a GPU machine no device has this bus id): never available, start/stop harmless.
  dskc::GpuMonitor m("0000:FF:1F.7");
  CHECK_FALSE(m.available());
  m.start();
  const dskc::GpuMonitorSummary r = m.stop();
  CHECK_FALSE(r.available);
  CHECK_FALSE(r.why.empty());
  CHECK(m.samples().empty());
  CHECK(dskc::describe_gpu_state(r) == "GPU clock and power: not read (" + r.why + ")");
}
