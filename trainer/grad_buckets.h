// Gradient bucketing for data-parallel all-reduce overlapped with backward (like PyTorch DDP
// and DeepSpeed). The plan packs parameters, walked in reverse forward order (the order
// backward produces their gradients), into buckets of at most `cap_bytes`, never splitting a
// tensor; a tensor larger than the cap gets a bucket of its own; a change of dtype size also
// starts a new bucket (one all-reduce has one dtype). Buckets tile one flat gradient buffer:
// bucket b occupies [offset_bytes, offset_bytes + size_bytes) and its parameters lie there
// contiguously in backward order. The plan is a pure function of its inputs, so every rank
// computes the same one. With delay_allreduce every parameter of a dtype size goes into one
// bucket and the tracker releases buckets only once backward has finished.
// BucketTracker releases buckets strictly in plan order (bucket 0 first): all ranks must
// launch NCCL collectives in the same order, whatever order gradients become ready in.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace dskc {

struct GradParam {
  std::string name;
  size_t numel = 0;
  size_t dtype_bytes = 2;
  size_t bytes() const { return numel * dtype_bytes; }
};

struct GradBucket {
  size_t offset_bytes = 0;  // into the flat gradient buffer
  size_t size_bytes = 0;
  size_t dtype_bytes = 0;
  std::vector<int> params;  // indices into the forward-order parameter list, backward order
};

struct BucketPlan {
  std::vector<GradBucket> buckets;
  std::vector<int> bucket_of;          // per parameter (forward index)
  std::vector<size_t> offset_of;       // per parameter: byte offset in the flat buffer
  size_t total_bytes = 0;
  size_t cap_bytes = 0;
  bool delay_allreduce = false;
  std::string describe(const std::vector<GradParam>& params) const;  // one line per bucket
};

constexpr size_t kDefaultBucketCapBytes = 25u * 1000u * 1000u;  // DeepSpeed / DDP: 25 MB

// Throws Error(Config) for cap_bytes == 0 or an empty parameter list, Error(Internal) for a
// parameter with zero elements or zero dtype size.
BucketPlan make_bucket_plan(const std::vector<GradParam>& params,
                            size_t cap_bytes = kDefaultBucketCapBytes,
                            bool delay_allreduce = false);

// Rows of an embedding table that a data-parallel step sums across ranks (only the rows some
// rank's batch used): `ranks_using[id]` = how many ranks used token id (the all-reduced 0/1 use
// flags), `local_targets` = this rank's ids, ascending (its gradient groups). Returns [2U]: the
// U used ids ascending, then for each this rank's group index or -1 when it did not use it.
std::vector<int32_t> union_rows(const int32_t* ranks_using, int vocab, const std::vector<int32_t>& local_targets);

class BucketTracker {
 public:
  BucketTracker(const BucketPlan& plan, std::vector<GradParam> params);
  // Marks parameter `param` (forward index) as having its final gradient for this step and
  // returns the buckets that may now be all-reduced, in plan order. Marking twice or an
  // out-of-range index is Error(Internal).
  std::vector<int> mark_ready(int param);
  // Checks that every bucket was released this step; Error(Internal) names the parameters
  // that never got a gradient. Then resets for the next step.
  void finish_step();
  void reset();
  int released() const { return next_bucket_; }

 private:
  const BucketPlan& plan_;
  std::vector<GradParam> params_;
  std::vector<char> ready_;
  std::vector<int> pending_;  // per bucket: parameters not yet ready
  int next_bucket_ = 0;       // first bucket not yet released
  int ready_count_ = 0;
};

}  // namespace dskc
