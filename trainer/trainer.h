// `dskc train`: BERT pre-training driven the way DeepSpeed users drive bing_bert's
// deepspeed_train.py (the guide's command line). The loop only orchestrates; all math is in
// a TrainBackend (backend.h).
//
// One step: zero the gradients; for each of the accumulation micro-batches take the next
// micro batch from the shards (read ahead on a worker thread while the backend computes the one
// before: batch_prefetch.h) and forward_backward it with the current loss scale; then, if
// the gradients are not finite, skip the update (the loss scaler lowers the scale), else
// compute the unscaled global norm, the clipping coefficient and this step's learning rate
// and let the backend update. Every print interval a progress line; every step a row of
// output_dir/metrics.csv; every --checkpoint_steps steps and at the end a checkpoint
// (checkpoint.h); at the end output_dir/loss_curve.png.
//
// Order of work, so that bad input never costs output: every config, flag, the checkpoint to
// load and the data set are validated before anything is written under output_dir.
// Resume (--load_training_checkpoint) restores weights, moments, step counters, loss-scaler
// state, seed and LR-schedule origin, and the data position when the data set and batch
// geometry are the ones the checkpoint was taken with; the steps that follow are then
// bit-identical to those of the uninterrupted run.
//
// Progress numbers: seq/s counts sequences (train_batch_size per step); TFLOP/s counts
// 6 × parameters × tokens + 12 × layers × seq² × hidden per sequence (forward and backward
// of every weight, plus the two attention products), divided by the wall time.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "trainer/backend.h"
#include "trainer/dist_env.h"

namespace dskc {

struct StepRecord {
  int64_t step = 0;  // 1-based number of this step
  double loss = 0.0, mlm_loss = 0.0, nsp_loss = 0.0;  // means over the step's micro-batches
  double loss_scale = 1.0;  // the scale this step ran with
  double lr = 0.0;
  double grad_norm = 0.0;  // unscaled, before clipping; NaN when skipped
  bool skipped = false;    // gradient overflow: no update
  double seconds = 0.0, seq_per_s = 0.0, tflops = 0.0;
};

struct TrainOptions {
  // Files.
  std::string deepspeed_config;  // --deepspeed_config (required)
  std::string model_config;      // --cf (required)
  std::string output_dir;        // --output_dir (required)
  std::string data_dir;          // --data_dir: HDF5 shards; empty: prepared from the demo corpus
  std::string corpus;            // --corpus: text for that preparation (default: examples/corpus)
  std::string load_training_checkpoint, load_checkpoint_id;
  // Command-line values that override the DeepSpeed JSON (as deepspeed_train.py does).
  std::optional<int> train_batch_size, gradient_accumulation_steps;
  std::optional<double> max_grad_norm, loss_scale;
  bool fp16 = false;
  // The run.
  std::optional<int> max_seq_length;  // required
  int64_t max_steps = 0;              // required, > 0
  std::optional<int> print_steps;     // default: steps_per_print of the JSON
  std::optional<int> checkpoint_steps;
  // --profile_steps N: the last N steps are profiled by phase (step_profile.h) and the table is
  // printed at the end (unset: off).
  std::optional<int> profile_steps;
  std::optional<uint64_t> seed;       // default 42 (a resumed run keeps its checkpoint's)
  std::string backend = "auto";       // auto | cpu | cuda
  bool transformer_kernel = false;    // --deepspeed_transformer_kernel
  bool cuda_graphs = false;           // --cuda_graphs (with the transformer kernel)
  bool attention_dropout_checkpoint = false, normalize_invertible = false, gelu_checkpoint = false,
       stochastic_mode = false;
  bool delay_allreduce = false;  // data parallel: one all-reduce after backward, no overlap
  bool allreduce_in_place = true;  // BackendOptions::allreduce_in_place (test hook: false)
  bool peer_copy = true;           // BackendOptions::peer_copy (test hook: false)
  bool word_split = false;         // BackendOptions::word_split (test hook: true)
  // Read the next micro-batch on a worker thread while the backend computes (batch_prefetch.h);
  // -1: from DSKC_TRAIN_PREFETCH (default on). The batches and results are the same either way.
  int prefetch = -1;
  std::string lr_schedule = "LE";
  double lr_offset = 0.0;
  bool rewarmup = false;
  std::optional<double> warmup_proportion;  // default 0.01 (or the config's training section)
  int local_rank = -1;
  // The job (dist_env.h: RANK, WORLD_SIZE, MASTER_ADDR, ... from the launcher). World size > 1:
  // data-parallel training over NCCL, one process per GPU (CUDA backend only).
  DistEnv dist;
  std::chrono::milliseconds dist_timeout{300000};  // bound on every wait for other ranks
  bool plot = true;              // write loss_curve.png at the end
  // One progress line per call (no newline); default: stdout.
  std::function<void(const std::string&)> log;

  // Test hooks.
  int64_t inject_overflow_at_step = -1;  // make that step's gradients overflow
  int inject_overflow_rank = -1;         // ... on this rank only (-1: every rank)
  int64_t fail_at_step = -1, hang_at_step = -1;  // before that step: throw / sleep forever
  int fault_rank = -1;                           // ... on this rank only (-1: every rank)
  std::function<void(const StepRecord&, TrainBackend&)> after_step;
};

struct TrainResult {
  std::vector<StepRecord> steps;  // the steps this run took
  int64_t start_step = 0;         // step count at start (the loaded checkpoint's)
  int64_t final_step = 0;
  std::string last_checkpoint;    // directory of the last checkpoint written ("" if none)
  std::string backend_name;
  std::string data_dir;           // shards used
  StepProfile profile;            // --profile_steps: the steps profiled (none otherwise)
};

TrainResult train(const TrainOptions& opt);

}  // namespace dskc
