// HDF5 pre-training shards (the format of NVIDIA's and DeepSpeed's BERT pipelines) and a
// dataset over a directory of them.
//
// Format: one HDF5 file holds N samples of sequence length S with at most P masked-LM
// predictions each, as six integer datasets:
//   input_ids [N,S]  input_mask [N,S]  segment_ids [N,S]
//   masked_lm_positions [N,P]  masked_lm_ids [N,P]  next_sentence_labels [N]
// Unused prediction slots hold position 0 and id 0 (position 0 is always [CLS], never a
// prediction). next_sentence_labels is 1 when sentence B is a random sentence.
// NVIDIA writes int32 ("i4"); any integer type is accepted on read (converted to int32).
//
// Invariants after read_shard: every vector has the size its shape says, input_mask,
// segment_ids and next_sentence_labels are 0/1, ids are non-negative and masked positions
// lie in [0,S). Every problem is one Error(Input) naming the file and the problem.
// write_shard is atomic (a temp file in the same directory, then rename; a failure is
// Error(Io) and leaves nothing) and byte-stable (no timestamps in the file).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace dskc {

struct PretrainShard {
  int64_t num_samples = 0;
  int seq_len = 0;
  int max_pred = 0;
  std::vector<int32_t> input_ids;             // [N, S]
  std::vector<int32_t> input_mask;            // [N, S]
  std::vector<int32_t> segment_ids;           // [N, S]
  std::vector<int32_t> masked_lm_positions;   // [N, P]
  std::vector<int32_t> masked_lm_ids;         // [N, P]
  std::vector<int32_t> next_sentence_labels;  // [N]
};

// Shapes only (no data read): what ShardDataset needs to plan an epoch.
struct ShardInfo {
  int64_t num_samples = 0;
  int seq_len = 0;
  int max_pred = 0;
};

PretrainShard read_shard(const std::string& path);
ShardInfo read_shard_info(const std::string& path);
void write_shard(const std::string& path, const PretrainShard& shard);

// Where a ShardDataset stands, for checkpoints. `shard` indexes the epoch's shuffled shard
// order; `sample` counts the samples this rank already took from that shard; `taken` counts
// every sample this rank took since the start of the stream (what seek_taken() replays).
struct DataPosition {
  uint64_t epoch = 0;
  uint64_t shard = 0;
  uint64_t sample = 0;
  uint64_t taken = 0;
  bool operator==(const DataPosition&) const = default;
};

struct Batch {
  int batch = 0;
  int seq_len = 0;
  int max_pred = 0;
  std::vector<int32_t> input_ids;             // [B, S]
  std::vector<int32_t> input_mask;            // [B, S]
  std::vector<int32_t> segment_ids;           // [B, S]
  std::vector<int32_t> masked_lm_positions;   // [B, P]
  std::vector<int32_t> masked_lm_ids;         // [B, P]
  std::vector<int32_t> next_sentence_labels;  // [B]
};

// Every *.hdf5 / *.h5 file of a directory (sorted by name), read as one endless stream of
// samples. Each epoch shuffles the shard order and, within each shard, the sample order,
// with a counter-based RNG keyed by (seed, epoch[, file]) so the order depends on nothing
// but those numbers. Rank r of W takes the samples at shuffled places r, r+W, r+2W, ... of
// each shard: ranks are disjoint and together cover every sample once per epoch.
// next_batch always returns a full batch, crossing shard and epoch boundaries, so every
// rank takes the same number of steps. Only the current shard is held in memory.
class ShardDataset {
 public:
  ShardDataset(const std::string& dir, int seq_len, uint64_t seed, int rank = 0, int world_size = 1);

  Batch next_batch(int batch_size);
  DataPosition position() const { return pos_; }
  // Resume exactly at a position() taken earlier (with the same files, seed, rank, world).
  void seek(const DataPosition& pos);
  // Moves to where this rank stands after taking `taken` samples from the start of the stream
  // (no data read). Every rank of a job takes the same number of samples, so rank 0's count
  // places every rank; with another world size it places each rank at the same point of the
  // epoch (the sample-to-rank assignment then differs from an uninterrupted run).
  void seek_taken(uint64_t taken);

  const std::vector<std::string>& files() const { return files_; }
  int seq_len() const { return seq_len_; }
  int max_pred() const { return max_pred_; }
  uint64_t total_samples() const { return total_samples_; }
  // Samples this rank sees per epoch.
  uint64_t samples_per_epoch() const { return rank_samples_; }

 private:
  uint64_t rank_count(int64_t shard_samples) const;
  void start_epoch(uint64_t epoch);
  void load_shard();  // loads file shard_order_[pos_.shard] if not loaded yet

  std::string dir_;
  int seq_len_ = 0, max_pred_ = 0;
  uint64_t seed_ = 0;
  int rank_ = 0, world_size_ = 1;
  std::vector<std::string> files_;
  std::vector<ShardInfo> infos_;
  uint64_t total_samples_ = 0, rank_samples_ = 0;

  DataPosition pos_;
  uint64_t order_epoch_ = ~uint64_t{0};  // epoch whose shard order is in shard_order_
  std::vector<uint32_t> shard_order_;
  int64_t loaded_file_ = -1;  // file index held in shard_, -1 for none
  uint64_t loaded_epoch_ = 0;
  PretrainShard shard_;
  std::vector<uint32_t> sample_order_;  // shuffled sample indices of shard_
};

}  // namespace dskc
