// Gradient bucket plan and tracker: every parameter once, reverse order, cap respected except
// single oversized tensors, deterministic; buckets released in plan order whatever the ready
// order; missing parameters named at the end of a step.
#include <doctest/doctest.h>

#include <algorithm>
#include <random>
#include <set>

#include "compiler/errors.h"
#include "trainer/grad_buckets.h"

using namespace dskc;

namespace {
// A BERT-like parameter list: embeddings, then per layer several tensors, then the heads.
std::vector<GradParam> bert_like(int layers, size_t hidden) {
  std::vector<GradParam> p;
  p.push_back({"embeddings.word", 30522 * hidden, 2});
  p.push_back({"embeddings.position", 512 * hidden, 2});
  p.push_back({"embeddings.ln.weight", hidden, 2});
  for (int l = 0; l < layers; ++l) {
    std::string n = "layer" + std::to_string(l) + ".";
    p.push_back({n + "qkv.weight", 3 * hidden * hidden, 2});
    p.push_back({n + "qkv.bias", 3 * hidden, 2});
    p.push_back({n + "attn_out.weight", hidden * hidden, 2});
    p.push_back({n + "inter.weight", 4 * hidden * hidden, 2});
    p.push_back({n + "output.weight", 4 * hidden * hidden, 2});
    p.push_back({n + "ln.weight", hidden, 2});
  }
  p.push_back({"cls.nsp.weight", 2 * hidden, 2});
  return p;
}
}  // namespace

TEST_CASE("plan covers every parameter once, in reverse order, within the cap") {
  auto params = bert_like(4, 256);
  size_t cap = 1u << 20;
  BucketPlan plan = make_bucket_plan(params, cap);
  std::vector<int> seen;
  size_t expect_offset = 0;
  for (size_t b = 0; b < plan.buckets.size(); ++b) {
    const auto& g = plan.buckets[b];
    CHECK(g.offset_bytes == expect_offset);
    size_t sum = 0;
    for (int i : g.params) {
      CHECK(plan.bucket_of[i] == static_cast<int>(b));
      CHECK(plan.offset_of[i] == expect_offset + sum);
      sum += params[i].bytes();
      seen.push_back(i);
    }
    CHECK(sum == g.size_bytes);
    if (g.params.size() > 1) CHECK(g.size_bytes <= cap);
    else if (g.size_bytes > cap) CHECK(g.params.size() == 1);
    expect_offset += g.size_bytes;
  }
  CHECK(expect_offset == plan.total_bytes);
  REQUIRE(seen.size() == params.size());
  for (size_t k = 0; k < seen.size(); ++k) CHECK(seen[k] == static_cast<int>(params.size() - 1 - k));
  // The word embedding (15.6 MB) exceeds the 1 MiB cap and sits alone in the last bucket.
  CHECK(plan.buckets.back().params == std::vector<int>{0});
  CHECK(plan.buckets.size() > 4);
}

TEST_CASE("plan is deterministic and defaults to 25 MB") {
  auto params = bert_like(24, 1024);
  BucketPlan a = make_bucket_plan(params), b = make_bucket_plan(params);
  CHECK(a.cap_bytes == 25000000u);
  REQUIRE(a.buckets.size() == b.buckets.size());
  for (size_t i = 0; i < a.buckets.size(); ++i) {
    CHECK(a.buckets[i].params == b.buckets[i].params);
    CHECK(a.buckets[i].offset_bytes == b.buckets[i].offset_bytes);
  }
  CHECK(a.offset_of == b.offset_of);
  CHECK_FALSE(a.describe(params).empty());
}

TEST_CASE("a change of dtype size starts a new bucket") {
  std::vector<GradParam> p = {{"a", 10, 4}, {"b", 10, 2}, {"c", 10, 2}};
  BucketPlan plan = make_bucket_plan(p, 1000);
  REQUIRE(plan.buckets.size() == 2);
  CHECK(plan.buckets[0].params == std::vector<int>{2, 1});
  CHECK(plan.buckets[1].params == std::vector<int>{0});
  CHECK(plan.buckets[1].dtype_bytes == 4);
}

TEST_CASE("bad plans are errors") {
  CHECK_THROWS_AS(make_bucket_plan({}, 100), Error);
  CHECK_THROWS_AS(make_bucket_plan({{"a", 1, 2}}, 0), Error);
  CHECK_THROWS_AS(make_bucket_plan({{"a", 0, 2}}, 10), Error);
}

TEST_CASE("tracker: reverse readiness releases buckets as they complete") {
  auto params = bert_like(3, 64);
  BucketPlan plan = make_bucket_plan(params, 64 * 64 * 2 * 5);
  BucketTracker t(plan, params);
  std::vector<int> released;
  for (int i = static_cast<int>(params.size()) - 1; i >= 0; --i) {
    auto r = t.mark_ready(i);
    // The bucket of i is complete exactly when i is its last (lowest-index) parameter.
    bool last_of_bucket = plan.buckets[plan.bucket_of[i]].params.back() == i;
    CHECK(r.size() == (last_of_bucket ? 1u : 0u));
    if (!r.empty()) CHECK(r[0] == plan.bucket_of[i]);
    released.insert(released.end(), r.begin(), r.end());
  }
  CHECK(released.size() == plan.buckets.size());
  for (size_t b = 0; b < released.size(); ++b) CHECK(released[b] == static_cast<int>(b));
  CHECK_NOTHROW(t.finish_step());
  CHECK(t.released() == 0);  // reset for the next step
}

TEST_CASE("tracker: arbitrary ready orders still release in plan order") {
  auto params = bert_like(3, 64);
  BucketPlan plan = make_bucket_plan(params, 64 * 64 * 2 * 5);
  BucketTracker t(plan, params);
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<int> order(params.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<int> released;
    std::set<int> ready;
    for (int i : order) {
      ready.insert(i);
      for (int b : t.mark_ready(i)) {
        for (int q : plan.buckets[b].params) CHECK(ready.count(q));  // only complete buckets
        released.push_back(b);
      }
    }
    REQUIRE(released.size() == plan.buckets.size());
    for (size_t b = 0; b < released.size(); ++b) CHECK(released[b] == static_cast<int>(b));
    t.finish_step();
  }
}

TEST_CASE("tracker: delay_allreduce releases everything after backward") {
  auto params = bert_like(2, 32);
  BucketPlan plan = make_bucket_plan(params, 1000, /*delay_allreduce=*/true);
  CHECK(plan.buckets.size() == 1);
  BucketTracker t(plan, params);
  for (int i = static_cast<int>(params.size()) - 1; i > 0; --i) CHECK(t.mark_ready(i).empty());
  CHECK(t.mark_ready(0) == std::vector<int>{0});
  t.finish_step();
}

TEST_CASE("tracker: missing parameter and double marks are errors") {
  auto params = bert_like(2, 32);
  BucketPlan plan = make_bucket_plan(params, 4096);
  BucketTracker t(plan, params);
  for (int i = static_cast<int>(params.size()) - 1; i >= 0; --i)
    if (params[i].name != "layer1.qkv.bias") t.mark_ready(i);
  try {
    t.finish_step();
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("layer1.qkv.bias") != std::string::npos);
  }
  t.mark_ready(3);
  CHECK_THROWS_AS(t.mark_ready(3), Error);
  CHECK_THROWS_AS(t.mark_ready(-1), Error);
  CHECK_THROWS_AS(t.mark_ready(static_cast<int>(params.size())), Error);
}

TEST_CASE("union_rows: the ranks' used ids ascending, each with this rank's group or -1") {
  // vocab 10; rank A used ids 1, 4, 7; the other rank 4, 9 (all-reduced use counts below)
  const std::vector<int32_t> counts = {0, 1, 0, 0, 2, 0, 0, 1, 0, 1};
  const std::vector<int32_t> mine = {1, 4, 7};
  CHECK(union_rows(counts.data(), 10, mine) == std::vector<int32_t>{1, 4, 7, 9, 0, 1, 2, -1});
  const std::vector<int32_t> other = {4, 9};
  CHECK(union_rows(counts.data(), 10, other) == std::vector<int32_t>{1, 4, 7, 9, -1, 0, -1, 1});
  // an id of this rank missing from the union is an internal error (the all-reduce went wrong)
  CHECK_THROWS_AS(union_rows(counts.data(), 10, std::vector<int32_t>{2}), Error);
  const std::vector<int32_t> none(10, 0);
  CHECK(union_rows(none.data(), 10, {}).empty());
}
