// Micro-batches read one ahead: while the backend computes micro-batch k, a worker thread takes
// micro-batch k + 1 from the shards, so the GPU does not wait for the host's reads, and a shard
// boundary (loading and shuffling the next HDF5 file, seconds for a full-size shard) costs the
// step nothing. Batches come out in the dataset's order: training is bit-identical either way.
// Only the worker touches the dataset while a read is in flight; the caller must not use it
// directly until the prefetcher is destroyed.
#pragma once
#include <functional>
#include <future>
#include <memory>

#include "trainer/backend.h"
#include "trainer/hdf5_shard.h"

namespace dskc {

class BatchPrefetcher {
 public:
  // `ahead` false: every next() reads synchronously on the caller's thread (no worker). `prepare`
  // (may be empty) runs right after each read, on the same thread (TrainBackend::prepare).
  using Prepare = std::function<std::unique_ptr<PreparedBatch>(const Batch&)>;
  BatchPrefetcher(ShardDataset& data, int batch_size, bool ahead, Prepare prepare = {});
  ~BatchPrefetcher();  // waits for a read in flight (its result or error is dropped)
  BatchPrefetcher(const BatchPrefetcher&) = delete;
  BatchPrefetcher& operator=(const BatchPrefetcher&) = delete;

  struct Item {
    Batch batch;
    DataPosition where;                      // the position it was read from
    std::unique_ptr<PreparedBatch> prepared;  // from `prepare` (nullptr without)
  };
  // The next micro-batch; rethrows the error of its read. `another`: a later next() follows, so
  // the read of the following batch starts now (false for the run's last batch: nothing is read
  // that no step would use; a next() after it reads synchronously).
  Item next(bool another = true);
  // Where the next call of next() reads from: what a checkpoint records, whatever is in flight.
  DataPosition position() const { return next_pos_; }

 private:
  Item read();
  void start();

  ShardDataset& data_;
  int batch_size_;
  bool ahead_;
  Prepare prepare_;
  DataPosition next_pos_;
  std::future<Item> pending_;
};

// DSKC_TRAIN_PREFETCH: unset, "" or "1" -> true (read ahead); "0" -> false; else Error(Config).
bool train_prefetch_from_env();

}  // namespace dskc
