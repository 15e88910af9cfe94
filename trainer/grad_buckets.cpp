// Gradient bucket plan and tracker (see grad_buckets.h for the invariants).
#include "trainer/grad_buckets.h"

#include <fmt/format.h>

#include "compiler/errors.h"

namespace dskc {

BucketPlan make_bucket_plan(const std::vector<GradParam>& params, size_t cap_bytes,
                            bool delay_allreduce) {
  if (params.empty()) throw Error(ErrorKind::Config, "gradient bucketing: the model has no parameters");
  if (cap_bytes == 0) throw Error(ErrorKind::Config, "gradient bucket size must be positive");
  BucketPlan plan;
  plan.cap_bytes = cap_bytes;
  plan.delay_allreduce = delay_allreduce;
  plan.bucket_of.assign(params.size(), -1);
  plan.offset_of.assign(params.size(), 0);
  size_t offset = 0;
  for (int i = static_cast<int>(params.size()) - 1; i >= 0; --i) {
    const GradParam& p = params[i];
    DSKC_ASSERT(p.numel > 0 && p.dtype_bytes > 0,
                fmt::format("parameter '{}' has no elements or no dtype size", p.name));
    size_t b = p.bytes();
    bool fresh = plan.buckets.empty();
    if (!fresh) {
      const GradBucket& cur = plan.buckets.back();
      fresh = cur.dtype_bytes != p.dtype_bytes ||
              (!delay_allreduce && cur.size_bytes + b > cap_bytes);
    }
    if (fresh) {
      GradBucket nb;
      nb.offset_bytes = offset;
      nb.dtype_bytes = p.dtype_bytes;
      plan.buckets.push_back(nb);
    }
    GradBucket& cur = plan.buckets.back();
    plan.bucket_of[i] = static_cast<int>(plan.buckets.size()) - 1;
    plan.offset_of[i] = offset;
    cur.params.push_back(i);
    cur.size_bytes += b;
    offset += b;
  }
  plan.total_bytes = offset;
  return plan;
}

std::string BucketPlan::describe(const std::vector<GradParam>& params) const {
  std::string s;
  for (size_t b = 0; b < buckets.size(); ++b) {
    const GradBucket& g = buckets[b];
    s += fmt::format("bucket {}: {} bytes at {}, {} params ({} .. {})\n", b, g.size_bytes,
                     g.offset_bytes, g.params.size(), params[g.params.front()].name,
                     params[g.params.back()].name);
  }
  return s;
}

BucketTracker::BucketTracker(const BucketPlan& plan, std::vector<GradParam> params)
    : plan_(plan), params_(std::move(params)) {
  DSKC_ASSERT(params_.size() == plan_.bucket_of.size(), "bucket plan made for other parameters");
  reset();
}

void BucketTracker::reset() {
  ready_.assign(params_.size(), 0);
  pending_.clear();
  for (const auto& b : plan_.buckets) pending_.push_back(static_cast<int>(b.params.size()));
  next_bucket_ = 0;
  ready_count_ = 0;
}

std::vector<int> BucketTracker::mark_ready(int param) {
  if (param < 0 || param >= static_cast<int>(params_.size()))
    throw Error(ErrorKind::Internal,
                fmt::format("gradient ready for parameter index {} of {}", param, params_.size()));
  if (ready_[param])
    throw Error(ErrorKind::Internal,
                fmt::format("gradient of parameter '{}' marked ready twice in one step "
                            "(mark only on the last micro-step of gradient accumulation)",
                            params_[param].name));
  ready_[param] = 1;
  ++ready_count_;
  --pending_[plan_.bucket_of[param]];
  std::vector<int> out;
  if (plan_.delay_allreduce && ready_count_ < static_cast<int>(params_.size())) return out;
  while (next_bucket_ < static_cast<int>(pending_.size()) && pending_[next_bucket_] == 0)
    out.push_back(next_bucket_++);
  return out;
}

void BucketTracker::finish_step() {
  if (next_bucket_ != static_cast<int>(plan_.buckets.size())) {
    std::string missing;
    int n = 0;
    for (size_t i = 0; i < params_.size(); ++i) {
      if (ready_[i]) continue;
      if (n < 8) missing += (n ? ", " : "") + params_[i].name;
      ++n;
    }
    if (n > 8) missing += fmt::format(", ... ({} in all)", n);
    std::string msg = fmt::format(
        "gradient all-reduce incomplete: {} of {} buckets reduced; parameters without a "
        "gradient this step: {}",
        next_bucket_, plan_.buckets.size(), missing);
    reset();
    throw Error(ErrorKind::Internal, msg);
  }
  reset();
}

std::vector<int32_t> union_rows(const int32_t* ranks_using, int vocab, const std::vector<int32_t>& local_targets) {
  std::vector<int32_t> h;
  for (int id = 0; id < vocab; ++id)
    if (ranks_using[id] > 0) h.push_back(id);
  const size_t U = h.size();
  h.resize(2 * U, -1);
  size_t g = 0, found = 0;
  for (size_t u = 0; u < U; ++u) {
    while (g < local_targets.size() && local_targets[g] < h[u]) ++g;
    if (g < local_targets.size() && local_targets[g] == h[u]) {
      h[U + u] = static_cast<int32_t>(g);
      ++found;
    }
  }
  DSKC_ASSERT(found == local_targets.size(), "every id of this rank's batch is in the union");
  return h;
}

}  // namespace dskc
