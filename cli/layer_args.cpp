// LayerArgs: the two ways to name a layer on the command line (see layer_args.h).
#include "cli/layer_args.h"

#include "compiler/errors.h"

namespace dskc::cli {

void LayerArgs::add_to(ArgParser& p) {
  p.add_positionals(&positionals, "[LAYER.json]", "layer config (DeepSpeedTransformerConfig fields)");
  p.add_option("layer", &layer, "FILE", "layer config JSON (same as the positional)");
  p.add_option("deepspeed_config", &deepspeed_config, "FILE", "DeepSpeed JSON (with --cf): derive the layer");
  p.add_option("cf", &model_config, "FILE", "BERT model config JSON (with --deepspeed_config)");
  p.add_int("max_seq_length", &max_seq_length, "longest sequence (when the config has none)");
  p.add_switch("attention_dropout_checkpoint", &attention_dropout_checkpoint, "set attn_dropout_checkpoint");
  p.add_switch("normalize_invertible", &normalize_invertible, "set normalize_invertible");
  p.add_switch("gelu_checkpoint", &gelu_checkpoint, "set gelu_checkpoint");
  p.add_switch("stochastic_mode", &stochastic_mode, "set stochastic_mode");
  p.add_switch("post_layer_norm", &post_layer_norm, "Post-LN instead of Pre-LN");
  p.add_switch("inference", &inference, "training = false (inference)");
  p.add_int("local_rank", &local_rank, "GPU to place the layer on (-1 = current)");
}

LayerConfig LayerArgs::load() const {
  std::string file = layer;
  if (positionals.size() > 1) throw Error(ErrorKind::Usage, "more than one layer config given");
  if (!positionals.empty()) {
    if (!file.empty()) throw Error(ErrorKind::Usage, "give the layer config either as --layer or positionally");
    file = positionals[0];
  }
  const bool derive = !deepspeed_config.empty() || !model_config.empty();
  if (!file.empty() && derive)
    throw Error(ErrorKind::Usage, "give either a layer config or --deepspeed_config with --cf, not both");
  if (!file.empty()) {
    // The switches turn the corresponding fields on over what the file says.
    LayerConfig c = load_layer_config(file, max_seq_length);
    c.attn_dropout_checkpoint |= attention_dropout_checkpoint;
    c.normalize_invertible |= normalize_invertible;
    c.gelu_checkpoint |= gelu_checkpoint;
    c.stochastic_mode |= stochastic_mode;
    if (post_layer_norm) c.pre_layer_norm = false;
    if (inference) c.training = false;
    if (local_rank) c.local_rank = *local_rank;
    validate(c, file);
    return c;
  }
  if (!derive)
    throw Error(ErrorKind::Usage,
                "no layer given: pass LAYER.json, or --deepspeed_config ds.json --cf model.json --max_seq_length N");
  if (deepspeed_config.empty()) throw Error(ErrorKind::Usage, "--cf needs --deepspeed_config");
  if (model_config.empty()) throw Error(ErrorKind::Usage, "--deepspeed_config needs --cf (the BERT model config)");
  DeriveOptions o;
  o.deepspeed_config_path = deepspeed_config;
  o.model_config_path = model_config;
  o.max_seq_length = max_seq_length;
  o.attention_dropout_checkpoint = attention_dropout_checkpoint;
  o.normalize_invertible = normalize_invertible;
  o.gelu_checkpoint = gelu_checkpoint;
  o.stochastic_mode = stochastic_mode;
  o.pre_layer_norm = !post_layer_norm;
  if (local_rank) o.local_rank = *local_rank;
  LayerConfig c = derive_layer_config(o);
  if (inference) c.training = false;
  return c;
}

}  // namespace dskc::cli
