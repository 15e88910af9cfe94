// Internal to the trainer: turning TrainOptions + the DeepSpeed JSON + the model config into
// the numbers a run uses (precedence rules below), and finding or preparing the data.
//
// Precedence (command line over JSON, as bing_bert's deepspeed_train.py):
//   batch sizes   --train_batch_size / --gradient_accumulation_steps over the JSON's values,
//                 then DeepSpeed's rule (ds_config.h) with WORLD_SIZE
//   precision     --fp16 or fp16.enabled -> fp16; bf16.enabled -> bf16; else fp32
//   loss scale    --loss_scale over fp16.loss_scale (0 = dynamic)
//   clipping      --max_grad_norm over gradient_clipping over optimizer.params.max_grad_norm
//   printing      --print_steps over steps_per_print
//   LR            "training" section of a bing_bert --cf file over optimizer.params.lr;
//                 --warmup_proportion over training.warmup_proportion over 0.01
#pragma once
#include <functional>
#include <string>

#include "trainer/bert_model.h"
#include "trainer/ds_config.h"
#include "trainer/lr_schedule.h"
#include "trainer/trainer.h"

namespace dskc {

using LogFn = std::function<void(const std::string&)>;

struct TrainSetup {
  DsConfig ds;
  BertModelConfig model;
  BatchSizes batch;
  DType dtype = DType::F32;
  LossScalerConfig scaler;
  OptimizerSettings optimizer;
  LrSchedule schedule;
  int max_seq_length = 0;
  int print_every = 1;
  uint64_t seed = 42;
  std::string config_hash;  // of everything that shapes the computation
};

// Validates options and configs (Error(Usage) / Error(Config) naming the flag or file).
TrainSetup resolve_setup(const TrainOptions& opt, const LogFn& log);

// The shard directory to train on: --data_dir, or output_dir/data/seq<N> prepared from the demo
// corpus (found via --corpus, $DSKC_CORPUS, ./examples/corpus or next to the dskc binary) on
// first use, with a WordPiece vocab of the model's vocab_size. Also checks a vocab.txt next
// to the shards against the model's vocab_size.
std::string find_or_prepare_data(const TrainOptions& opt, const TrainSetup& setup, const LogFn& log);

}  // namespace dskc
