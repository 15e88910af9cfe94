// Command-line options shared by subcommands that take a layer: a layer JSON (positional or
// --layer), or the guide's form --deepspeed_config ds.json --cf model.json --max_seq_length N
// with --attention_dropout_checkpoint --normalize_invertible --gelu_checkpoint --stochastic_mode.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "cli/args.h"
#include "compiler/config.h"

namespace dskc::cli {

struct LayerArgs {
  std::vector<std::string> positionals;
  std::string layer, deepspeed_config, model_config;
  std::optional<int> max_seq_length, local_rank;
  bool attention_dropout_checkpoint = false, normalize_invertible = false, gelu_checkpoint = false,
       stochastic_mode = false, post_layer_norm = false, inference = false;

  void add_to(ArgParser& p);
  LayerConfig load() const;  // Error(Usage) when neither form is given
};

}  // namespace dskc::cli
