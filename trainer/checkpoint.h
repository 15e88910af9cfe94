// Training checkpoints: output_dir/<tag>/ with
//   model.safetensors      the weights in the kernel layout (bert_model.h names), stored in the
//                          training dtype; __metadata__ {"layout": "dskc-kernel", "dtype",
//                          "model_config": the BertShape JSON, "format": "pt"}
//   optimizer.safetensors  fp32 "master.<p>", "exp_avg.<p>", "exp_avg_sq.<p>" for every p
//   trainer_state.json     step counters, loss-scaler state, data position, seed, LR schedule
//                          state, batch geometry, config hash (TrainerState)
// and output_dir/latest naming the newest tag (DeepSpeed's convention).
//
// Atomicity: everything is written into output_dir/.<tag>.tmp-<pid>/ first; only when it is
// complete does the directory move into place (an existing <tag> is moved aside first and
// deleted after), and `latest` is rewritten last (atomically). A failure leaves the previous
// checkpoints and `latest` as they were and removes the temporary directory.
//
// Loading validates before anything is used: a file that holds Hugging Face names (or says
// layout "hf") is a clear error that names `dskc convert`; the model shape must match the
// --cf config's architecture; every tensor must be present with its shape, and none extra.
// Every problem is Error(Input) naming the file and the tensor or key.
#pragma once
#include <cstdint>
#include <string>

#include "compiler/config.h"
#include "runtime/safetensors.h"
#include "trainer/bert_model.h"
#include "trainer/hdf5_shard.h"
#include "trainer/loss_scaler.h"

namespace dskc {

inline constexpr const char* kKernelLayout = "dskc-kernel";
inline constexpr const char* kHfLayout = "hf";

struct TrainerState {
  int64_t step = 0;             // finished steps (skipped ones included)
  int64_t optimizer_steps = 0;  // applied updates (Adam's t)
  int64_t skipped_steps = 0;
  LossScalerState scaler;
  DataPosition data;
  uint64_t data_total_samples = 0;  // of the data set the position refers to
  int max_seq_length = 0;
  int micro_batch = 0, accumulation = 0, world_size = 1;
  uint64_t seed = 0;  // dropout and data-order RNG (both counter-based: no other RNG state)
  std::string lr_schedule;
  int64_t lr_origin_step = 0;
  std::string dtype;
  std::string config_hash;
  bool operator==(const TrainerState&) const = default;
};

std::string to_json_text(const TrainerState& s);
TrainerState parse_trainer_state(const std::string& text, const std::string& source);

struct CheckpointData {
  std::string dir;
  ParamMap params;           // fp32 master weights
  ParamMap optimizer_state;  // exp_avg.* / exp_avg_sq.*
  TrainerState state;
};

void save_checkpoint(const std::string& output_dir, const std::string& tag, const BertShape& shape, DType dtype,
                     const ParamMap& params, const ParamMap& optimizer_state, const TrainerState& state);

// The checkpoint directory of --load_training_checkpoint DIR [--load_checkpoint_id TAG]:
// DIR/TAG; without a tag DIR/<contents of DIR/latest>, or DIR itself when it holds
// model.safetensors. Error(Input) naming what is missing.
std::string resolve_checkpoint_dir(const std::string& dir, const std::string& tag);

// Loads and validates a checkpoint directory against the model `expected`.
CheckpointData load_checkpoint(const std::string& checkpoint_dir, const BertShape& expected);

// Which parameter naming a weights file uses (by metadata, else by tensor names).
enum class WeightLayout { Kernel, HuggingFace, Unknown };
WeightLayout detect_layout(const SafeTensorsFile& f);

// The weights of model.safetensors-style file as fp32 (any float dtype), validated against
// the model: layout, model_config metadata, names and shapes.
ParamMap load_kernel_weights(const SafeTensorsFile& f, const std::string& path, const BertShape& expected);

}  // namespace dskc
