// Learning-rate schedules of `dskc train --lr_schedule NAME` (bing_bert's deepspeed_train.py).
//
// README text:
//   The learning rate of the update that takes the model from step k to k+1 is
//       lr(k) = base_lr · f(k − origin) + lr_offset
//   base_lr is the "training.learning_rate" of a bing_bert-style --cf file when present, else
//   the DeepSpeed JSON's optimizer.params.lr. origin is 0, except that --rewarmup together
//   with --load_training_checkpoint sets it to the loaded step, so warmup starts over from
//   the checkpoint (the origin is saved in the checkpoint, so a later plain resume keeps it).
//   --lr_offset adds a constant after scaling (bing_bert's --lr_offset).
//   With x = (k − origin) / total_steps and w = warmup proportion (--warmup_proportion,
//   default 0.01, or "training.warmup_proportion"); total_steps = --max_steps (or the
//   config's "training.total_training_steps"); decay_rate 0.99 and decay_step 1000 unless the
//   config's "training" section sets them; past warmup, e = (k − origin − w·total) / decay_step:
//     LE (default)  linear warmup x/w, then exponential decay decay_rate^e
//                   (bing_bert's warmup_linear_decay_exp)
//     EE            warmup (x/w)^2, then decay_rate^e (bing_bert's warmup_exp_decay_exp)
//     EP            warmup (x/w)^1.5, then polynomial decay (1 − x)^2
//                   (bing_bert's warmup_exp_decay_poly)
//     LL            linear warmup x/w, then linear decay to 0 at total_steps:
//                   max(0, (1 − x) / (1 − w)) (Google BERT / NVIDIA's "poly" with power 1)
//     constant      linear warmup x/w, then 1 (w = 0: constant from the start)
//   As in bing_bert, the first update (k = 0) uses lr_offset alone when warmup is on.
#pragma once
#include <cstdint>
#include <string>

namespace dskc {

enum class LrScheduleKind { LE, EE, EP, LL, Constant };

// "LE", "EE", "EP", "LL", "constant" (case-insensitive); Error(Usage) otherwise.
LrScheduleKind parse_lr_schedule(const std::string& name);
const char* lr_schedule_name(LrScheduleKind k);

struct LrSchedule {
  LrScheduleKind kind = LrScheduleKind::LE;
  double base_lr = 1e-3;
  double warmup_proportion = 0.01;
  int64_t total_steps = 1;
  double decay_rate = 0.99;
  int64_t decay_step = 1000;
  double lr_offset = 0.0;
  int64_t origin_step = 0;

  // The multiplier f of the formula above for `steps_since_origin`.
  double factor(int64_t steps_since_origin) const;
  // The learning rate of the update taken at global step k (0-based count of finished steps).
  double lr_at(int64_t k) const { return base_lr * factor(k - origin_step) + lr_offset; }
};

}  // namespace dskc
