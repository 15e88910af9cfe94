// `dskc bench-memory` without a GPU: the batch search (cli/batch_search.h) against fake memory
// models (exact answer, few probes, history reused across caps, nothing fits, everything fits),
// the command's bad-input table (exit 2 usage / 7 I/O, naming the option, no --json file), and
// the "no CUDA device" error (exit 6) on a machine without one.
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "cli/batch_search.h"
#include "runtime/driver.h"
#include "test_util.h"

using dskc::cli::find_largest_batch;
using dskc::cli::ProbeOutcome;
using dskc::cli::SearchLimits;
using dskc_test::run_dskc;
using dskc_test::source_dir;
using dskc_test::TempDir;

namespace {

constexpr size_t kGiB = size_t{1} << 30;
constexpr size_t kMiB = size_t{1} << 20;

// A training step's memory as dskc's accounting sees it: fixed bytes, bytes per sequence, an
// optional superlinear part (a scratch buffer that takes over at large batches), and a
// physical limit that stands for the whole GPU.
struct FakeGpu {
  double fixed = 6.5 * kGiB, per_seq = 115.0 * kMiB, quad = 0.0;
  size_t physical = 139 * kGiB;
  size_t overhead = 600 * kMiB;  // device memory outside dskc's accounting (counts only without a cap)
  int calls = 0;
  size_t peak(int b) const { return static_cast<size_t>(fixed + per_seq * b + quad * b * b); }
  ProbeOutcome operator()(int b, size_t cap) {
    ++calls;
    ProbeOutcome o;
    const size_t need = peak(b);
    o.fits = need + overhead <= physical && (cap == 0 || need <= cap);
    if (o.fits) {
      o.peak_bytes = need;
      o.overhead_bytes = overhead;
    } else {
      o.note = "out of memory";
    }
    return o;
  }
  // Brute force: the largest batch in [0, max] that fits.
  int truth(size_t cap, int max_batch) const {
    int best = 0;
    for (int b = 1; b <= max_batch; ++b)
      if (peak(b) + overhead <= physical && (cap == 0 || peak(b) <= cap)) best = b;
    return best;
  }
};

SearchLimits limits(size_t cap, const FakeGpu& g, int max_batch = 4096, int start = 8) {
  SearchLimits l;
  l.start_batch = start;
  l.max_batch = max_batch;
  l.cap_bytes = cap;
  l.predict_bytes = cap ? cap : g.physical;
  return l;
}

}  // namespace

TEST_CASE("batch search: linear memory, exact answer in few probes, history reused across caps") {
  FakeGpu g;
  std::vector<ProbeOutcome> history;
  auto fn = [&](int b, size_t c) { return g(b, c); };
  const auto r32 = find_largest_batch(fn, limits(32 * kGiB, g), history);
  CHECK(r32.largest_batch == g.truth(32 * kGiB, 4096));
  CHECK(r32.probes <= 5);
  CHECK(r32.peak_bytes == g.peak(r32.largest_batch));
  CHECK(std::abs(r32.marginal_bytes_per_seq - g.per_seq) < 0.01 * g.per_seq);
  CHECK_FALSE(r32.at_max_batch);
  const auto rall = find_largest_batch(fn, limits(0, g), history);
  CHECK(rall.largest_batch == g.truth(0, 4096));
  CHECK(rall.probes <= 2);  // the model points come from the 32 GiB search, the overhead is measured
  CHECK(g.calls == r32.probes + rall.probes);
}

TEST_CASE("batch search: a known fixed part (another flag set's) saves a model probe") {
  FakeGpu first, second;
  second.per_seq = 72.0 * kMiB;  // memory flags: fewer activation bytes, the same fixed bytes
  std::vector<ProbeOutcome> h1, h2;
  const auto r1 = find_largest_batch([&](int b, size_t c) { return first(b, c); }, limits(32 * kGiB, first), h1);
  SearchLimits l = limits(32 * kGiB, second);
  l.prior_fixed_bytes = r1.fixed_bytes;
  const auto r2 = find_largest_batch([&](int b, size_t c) { return second(b, c); }, l, h2);
  CHECK(r2.largest_batch == second.truth(32 * kGiB, 4096));
  CHECK(r2.probes <= 3);
  // A wrong prior costs probes, never the answer.
  std::vector<ProbeOutcome> h3;
  l.prior_fixed_bytes = 0.5 * r1.fixed_bytes;
  const auto r3 = find_largest_batch([&](int b, size_t c) { return second(b, c); }, l, h3);
  CHECK(r3.largest_batch == r2.largest_batch);
}

TEST_CASE("batch search: a model that extrapolates badly still gives the exact answer") {
  for (double quad : {2.0e5, 3.0e6, -1.0e4}) {  // the last: concave, still increasing up to 4096
    CAPTURE(quad);
    FakeGpu g;
    g.quad = quad;
    std::vector<ProbeOutcome> history;
    auto fn = [&](int b, size_t c) { return g(b, c); };
    const auto r = find_largest_batch(fn, limits(32 * kGiB, g), history);
    CHECK(r.largest_batch == g.truth(32 * kGiB, 4096));
    CHECK(r.probes <= 24);  // about 2 log2(range): exponential steps plus bisection
    const auto r2 = find_largest_batch(fn, limits(0, g), history);
    CHECK(r2.largest_batch == g.truth(0, 4096));
    CHECK(r2.probes <= 24);
  }
}

TEST_CASE("batch search: random memory models agree with brute force") {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  int worst = 0;
  for (int t = 0; t < 300; ++t) {
    FakeGpu g;
    g.fixed = (0.1 + 10 * u(rng)) * kGiB;
    g.per_seq = (1 + 800 * u(rng)) * kMiB;
    g.quad = u(rng) < 0.5 ? 0.0 : u(rng) * 1e5;
    const int max_batch = 1 + static_cast<int>(u(rng) * 3000);
    const int start = 1 + static_cast<int>(u(rng) * 64);
    std::vector<ProbeOutcome> history;
    auto fn = [&](int b, size_t c) { return g(b, c); };
    for (size_t cap : {size_t{16} * kGiB, size_t{32} * kGiB, size_t{0}}) {
      CAPTURE(t);
      CAPTURE(cap);
      const auto r = find_largest_batch(fn, limits(cap, g, max_batch, std::min(start, max_batch)), history);
      CHECK(r.largest_batch == g.truth(cap, max_batch));
      CHECK(r.at_max_batch == (r.largest_batch == max_batch));
      worst = std::max(worst, r.probes);
    }
  }
  CHECK(worst <= 2 * 12 + 6);  // never worse than exponential steps plus bisection over the range
}

TEST_CASE("batch search: nothing fits, everything fits") {
  FakeGpu g;
  std::vector<ProbeOutcome> history;
  auto fn = [&](int b, size_t c) { return g(b, c); };
  const auto none = find_largest_batch(fn, limits(4 * kGiB, g), history);  // below the fixed bytes
  CHECK(none.largest_batch == 0);
  CHECK(none.peak_bytes == 0);
  CHECK(none.probes <= 5);
  FakeGpu small;
  small.per_seq = 1.0 * kMiB;
  std::vector<ProbeOutcome> h2;
  auto fn2 = [&](int b, size_t c) { return small(b, c); };
  const auto all = find_largest_batch(fn2, limits(0, small, 512), h2);
  CHECK(all.largest_batch == 512);
  CHECK(all.at_max_batch);
  CHECK(all.probes <= 4);
}

TEST_CASE("bench-memory: bad arguments exit 2 (or 7 for a missing file), name the problem, write no JSON") {
  struct Case {
    const char* args;
    int code;
    std::vector<std::string> needles;
  };
  const std::string cf = "--cf " + source_dir() + "/examples/bert_large_adam_seq128.json";
  const std::vector<Case> cases = {
      {"", 2, {"--cf"}},
      {"--memory-cap-gib -3", 2, {"--memory-cap-gib", "'-3'"}},
      {"--memory-cap-gib 32x", 2, {"--memory-cap-gib", "'32x'"}},
      {"--memory-cap-gib 32,,none", 2, {"--memory-cap-gib", "empty item"}},
      {"--memory-cap-gib nan", 2, {"--memory-cap-gib", "'nan'"}},
      {"--flag-sets none,gelu", 2, {"--flag-sets", "'gelu'"}},
      {"--flag-sets all --gelu_checkpoint", 2, {"not both"}},
      {"--flag-sets normalize_invertibel", 2, {"normalize_invertibel", "did you mean 'normalize_invertible'"}},
      {"--seq 1024", 2, {"--seq 1024", "max_position_embeddings 512"}},
      {"--seq 1", 2, {"--seq"}},
      {"--max-predictions 0", 2, {"--max-predictions"}},
      {"--max-predictions 128", 2, {"--max-predictions", "127"}},
      {"--max-batch 0", 2, {"--max-batch"}},
      {"--start-batch 100 --max-batch 10", 2, {"--start-batch"}},
      {"--dtype fp8", 2, {"--dtype", "'fp8'"}},
      {"--optimizer sgd", 2, {"--optimizer", "'sgd'"}},
      {"--memory-cap 32", 2, {"unknown option --memory-cap"}},
  };
  for (const auto& c : cases) {
    CAPTURE(c.args);
    TempDir dir;
    const std::string json = dir / "table.json";
    const std::string args =
        std::string("bench-memory ") + (std::string(c.args).empty() ? "" : cf + " ") + c.args + " --json " + json;
    const auto r = run_dskc(args);
    INFO("dskc " << args << "\n" << r.output);
    CHECK(r.exit_code == c.code);
    CHECK(r.output.find("error") != std::string::npos);
    for (const auto& n : c.needles) CHECK_MESSAGE(r.output.find(n) != std::string::npos, "missing: " << n);
    CHECK_FALSE(std::filesystem::exists(json));
  }
  TempDir dir;
  const auto r = run_dskc("bench-memory --cf " + (dir / "no-such-model.json") + " --json " + (dir / "t.json"));
  CHECK(r.exit_code == 7);
  CHECK(r.output.find(dir / "no-such-model.json") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir / "t.json"));
}

TEST_CASE("bench-memory without a GPU: 'no CUDA device', exit 6, no JSON") {
  if (dskc::gpu_available()) return;  // on a GPU machine the command would measure
  TempDir dir;
  const auto r = run_dskc("bench-memory --cf " + source_dir() + "/examples/bert_large_adam_seq128.json --seq 512 " +
                          "--flag-sets none,all --memory-cap-gib 32,none --json " + (dir / "t.json"));
  INFO(r.output);
  CHECK(r.exit_code == 6);
  CHECK(r.output.find("no CUDA device") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir / "t.json"));
}
