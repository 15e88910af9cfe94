// The DeepSpeed JSON config as `dskc train` reads it (SPEC §5): batch sizes, printing,
// optimizer, gradient clipping, fp16 / bf16, and the sparse_attention incompatibility.
//
// Fields read (DeepSpeed's names and defaults):
//   train_batch_size, train_micro_batch_size_per_gpu, gradient_accumulation_steps
//   steps_per_print (10)
//   optimizer {type: Adam | AdamW | Lamb (any case), params: {lr, betas [b1, b2], eps,
//              weight_decay, bias_correction (true), adam_w_mode (true), max_grad_norm,
//              max_coeff (10), min_coeff (0.01)}}
//   gradient_clipping (0 = off; wins over optimizer.params.max_grad_norm)
//   fp16 {enabled, loss_scale (0 = dynamic), initial_scale_power (16), loss_scale_window
//         (1000), hysteresis (2), min_loss_scale (1)}
//   bf16 / bfloat16 {enabled}
//   sparse_attention (any value but false: incompatible with the transformer kernel)
//   fp32_allreduce (false): multi-GPU gradient all-reduce in fp32 instead of the fp16/bf16 dtype
// Other top-level keys (DeepSpeed has many) are listed in `ignored_keys` for a warning; they
// are never an error. Malformed values are Error(Config) naming the file and key.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "trainer/loss_scaler.h"
#include "trainer/optimizer.h"

namespace dskc {

struct DsConfig {
  std::string source;  // the file, for messages
  std::optional<int> train_batch_size, micro_batch, gradient_accumulation_steps;
  int steps_per_print = 10;
  bool has_optimizer = false;
  OptimizerSettings optimizer;  // max_grad_norm resolved from gradient_clipping / params
  bool fp16 = false, bf16 = false;
  LossScalerConfig fp16_scaler;  // enabled == fp16
  bool sparse_attention = false;
  bool fp32_allreduce = false;
  std::vector<std::string> ignored_keys;
};

DsConfig parse_ds_config(const std::string& json_text, const std::string& source);
DsConfig load_ds_config(const std::string& path);

struct BatchSizes {
  int train_batch_size = 0;  // micro × accumulation × world
  int micro_batch = 0;
  int accumulation = 0;
  int world_size = 1;
};

// DeepSpeed's rule: any one of the three may be left out and is derived from the others
// (only train_batch_size: accumulation 1; only the micro batch: accumulation 1); all given
// must satisfy train_batch_size == micro × accumulation × world_size. Error(Config) naming
// `source` and the numbers otherwise. `origin` says where each value came from, e.g.
// "--train_batch_size" or "train_batch_size in ds.json", for the message.
struct BatchSizeInputs {
  std::optional<int> train_batch_size, micro_batch, accumulation;
  std::string train_batch_size_origin = "train_batch_size", micro_batch_origin = "train_micro_batch_size_per_gpu",
              accumulation_origin = "gradient_accumulation_steps";
};
BatchSizes resolve_batch_sizes(const BatchSizeInputs& in, int world_size, const std::string& source);

}  // namespace dskc
