// Micro-batches read one ahead (see batch_prefetch.h).
#include "trainer/batch_prefetch.h"

#include "compiler/env_choice.h"

namespace dskc {

BatchPrefetcher::BatchPrefetcher(ShardDataset& data, int batch_size, bool ahead, Prepare prepare)
    : data_(data), batch_size_(batch_size), ahead_(ahead), prepare_(std::move(prepare)), next_pos_(data.position()) {}

BatchPrefetcher::~BatchPrefetcher() {
  if (pending_.valid()) pending_.wait();
}

BatchPrefetcher::Item BatchPrefetcher::read() {
  Item it;
  it.where = data_.position();
  it.batch = data_.next_batch(batch_size_);
  if (prepare_) it.prepared = prepare_(it.batch);
  return it;
}

void BatchPrefetcher::start() { pending_ = std::async(std::launch::async, [this] { return read(); }); }

BatchPrefetcher::Item BatchPrefetcher::next(bool another) {
  if (!ahead_) {
    Item it = read();
    next_pos_ = data_.position();
    return it;
  }
  if (!pending_.valid()) start();
  Item it = pending_.get();  // the worker is done: the dataset is the caller's until start()
  next_pos_ = data_.position();
  if (another) start();
  return it;
}

bool train_prefetch_from_env() {
  return env_choice("DSKC_TRAIN_PREFETCH", true, {{"1", true}, {"0", false}},
                    "1 (the default: the next micro-batch is read on a worker thread while the backend computes) or 0 "
                    "(read when needed)");
}

}  // namespace dskc
