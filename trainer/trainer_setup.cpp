// Trainer setup: option/config resolution and data preparation (see trainer_setup.h).
#include "trainer/trainer_setup.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "compiler/errors.h"
#include "compiler/sha256.h"
#include "trainer/prepare_data.h"
#include "trainer/wordpiece.h"

namespace dskc {
namespace {

namespace fs = std::filesystem;

[[noreturn]] void usage_error(const std::string& msg) { throw Error(ErrorKind::Usage, msg); }

std::string config_hash(const TrainSetup& s) {
  nlohmann::ordered_json j;
  j["model"] = nlohmann::json::parse(to_json_text(s.model.shape));
  j["batch"] = {s.batch.train_batch_size, s.batch.micro_batch, s.batch.accumulation, s.batch.world_size};
  j["max_seq_length"] = s.max_seq_length;
  j["dtype"] = dtype_name(s.dtype);
  const OptimizerSettings& o = s.optimizer;
  j["optimizer"] = {optimizer_name(o.type), o.lr, o.beta1, o.beta2, o.eps, o.weight_decay, o.bias_correction,
                    o.adam_w_mode, o.max_coeff, o.min_coeff, o.max_grad_norm};
  j["loss_scale"] = {s.scaler.enabled, s.scaler.static_scale, s.scaler.initial_scale_power,
                     s.scaler.loss_scale_window, s.scaler.hysteresis, s.scaler.min_loss_scale};
  const LrSchedule& l = s.schedule;
  j["lr_schedule"] = {lr_schedule_name(l.kind), l.base_lr, l.warmup_proportion, l.total_steps, l.decay_rate,
                      l.decay_step, l.lr_offset};
  return sha256_hex(j.dump()).substr(0, 16);
}

std::vector<std::string> corpus_candidates(const TrainOptions& opt) {
  std::vector<std::string> c;
  if (!opt.corpus.empty()) return {opt.corpus};
  if (const char* env = std::getenv("DSKC_CORPUS"); env && *env) c.push_back(env);
  c.push_back("examples/corpus");
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (fs::path d = exe.parent_path(); !d.empty() && d != d.root_path(); d = d.parent_path()) {
      c.push_back((d / "examples/corpus").string());
      if (c.size() > 8) break;
    }
  }
  c.push_back("/usr/share/dskc/corpus");
  return c;
}

bool has_shards(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return false;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string ext = e.path().extension().string();
    if (ext == ".hdf5" || ext == ".h5") return true;
  }
  return false;
}

}  // namespace

TrainSetup resolve_setup(const TrainOptions& opt, const LogFn& log) {
  if (opt.deepspeed_config.empty()) usage_error("dskc train: --deepspeed_config FILE is required");
  if (opt.model_config.empty()) usage_error("dskc train: --cf FILE (the BERT model config) is required");
  if (opt.output_dir.empty()) usage_error("dskc train: --output_dir DIR is required");
  if (!opt.max_seq_length) usage_error("dskc train: --max_seq_length N is required");
  if (*opt.max_seq_length < 1 || *opt.max_seq_length > 8192)
    usage_error(fmt::format("dskc train: --max_seq_length must be in [1, 8192], got {}", *opt.max_seq_length));
  if (opt.max_steps < 1) usage_error("dskc train: --max_steps N (N >= 1) is required");
  if (opt.print_steps && *opt.print_steps < 1)
    usage_error(fmt::format("dskc train: --print_steps must be >= 1, got {}", *opt.print_steps));
  if (opt.checkpoint_steps && *opt.checkpoint_steps < 1)
    usage_error(fmt::format("dskc train: --checkpoint_steps must be >= 1, got {}", *opt.checkpoint_steps));
  if (opt.train_batch_size && *opt.train_batch_size < 1)
    usage_error(fmt::format("dskc train: --train_batch_size must be >= 1, got {}", *opt.train_batch_size));
  if (opt.gradient_accumulation_steps && *opt.gradient_accumulation_steps < 1)
    usage_error(fmt::format("dskc train: --gradient_accumulation_steps must be >= 1, got {}",
                            *opt.gradient_accumulation_steps));
  if (opt.loss_scale && *opt.loss_scale < 0.0)
    usage_error(fmt::format("dskc train: --loss_scale must be 0 (dynamic) or positive, got {}", *opt.loss_scale));
  if (opt.max_grad_norm && *opt.max_grad_norm < 0.0)
    usage_error(fmt::format("dskc train: --max_grad_norm must be >= 0, got {}", *opt.max_grad_norm));
  if (opt.warmup_proportion && !(*opt.warmup_proportion >= 0.0 && *opt.warmup_proportion <= 1.0))
    usage_error(fmt::format("dskc train: --warmup_proportion must be in [0, 1], got {}", *opt.warmup_proportion));
  if (opt.cuda_graphs && !opt.transformer_kernel)
    usage_error("dskc train: --cuda_graphs launches the DeepSpeed transformer layers as CUDA graphs; add "
                "--deepspeed_transformer_kernel");
  if (opt.cuda_graphs && opt.backend == "cpu")
    usage_error("dskc train: --cuda_graphs needs the CUDA backend (--backend cuda or auto on a GPU machine)");
  if (opt.profile_steps && *opt.profile_steps < 1)
    usage_error(fmt::format("dskc train: --profile_steps must be >= 1 (the last N steps are profiled), got {}",
                            *opt.profile_steps));
  if (opt.rewarmup && opt.load_training_checkpoint.empty())
    log("note: --rewarmup has no effect without --load_training_checkpoint");

  TrainSetup s;
  s.ds = load_ds_config(opt.deepspeed_config);
  s.model = load_bert_model_config(opt.model_config);
  const std::string& ds = opt.deepspeed_config;
  if (s.ds.sparse_attention) {
    if (opt.transformer_kernel)
      throw Error(ErrorKind::Config,
                  fmt::format("{}: enables \"sparse_attention\", which the DeepSpeed transformer kernel does not "
                              "support (the two cannot be used together); remove \"sparse_attention\" from the "
                              "DeepSpeed config, or train without --deepspeed_transformer_kernel",
                              ds));
    log(fmt::format("warning: {}: \"sparse_attention\" is not implemented by dskc; training uses dense attention",
                    ds));
  }
  for (const std::string& k : s.ds.ignored_keys)
    log(fmt::format("note: {}: ignoring DeepSpeed key \"{}\" (not used by dskc train)", ds, k));
  if (!s.ds.has_optimizer)
    throw Error(ErrorKind::Config, fmt::format("{}: has no \"optimizer\" section; dskc train needs one, e.g. "
                                               "\"optimizer\": {{\"type\": \"Adam\", \"params\": {{\"lr\": 1e-4}}}}",
                                               ds));

  BatchSizeInputs in;
  in.train_batch_size = s.ds.train_batch_size;
  in.micro_batch = s.ds.micro_batch;
  in.accumulation = s.ds.gradient_accumulation_steps;
  in.train_batch_size_origin = "train_batch_size in " + ds;
  in.micro_batch_origin = "train_micro_batch_size_per_gpu in " + ds;
  in.accumulation_origin = "gradient_accumulation_steps in " + ds;
  if (opt.train_batch_size) {
    in.train_batch_size = opt.train_batch_size;
    in.train_batch_size_origin = "--train_batch_size";
  }
  if (opt.gradient_accumulation_steps) {
    in.accumulation = opt.gradient_accumulation_steps;
    in.accumulation_origin = "--gradient_accumulation_steps";
  }
  s.batch = resolve_batch_sizes(in, opt.dist.world_size, ds);
  if (opt.dist.distributed() && opt.backend == "cpu")
    usage_error(fmt::format("dskc train: WORLD_SIZE={}: data-parallel training runs one process per GPU and needs the "
                            "CUDA backend; drop --backend cpu (or run one process)",
                            opt.dist.world_size));

  if (opt.fp16 && s.ds.bf16)
    throw Error(ErrorKind::Config, fmt::format("{}: bf16.enabled is true but --fp16 was given; use one of them", ds));
  s.dtype = (opt.fp16 || s.ds.fp16) ? DType::F16 : (s.ds.bf16 ? DType::BF16 : DType::F32);
  s.scaler = s.ds.fp16_scaler;
  s.scaler.enabled = s.dtype == DType::F16;
  if (opt.loss_scale) {
    s.scaler.static_scale = *opt.loss_scale;
    if (!s.scaler.enabled) log("note: --loss_scale has no effect without fp16 (--fp16 or fp16.enabled)");
  }

  s.optimizer = s.ds.optimizer;
  if (opt.max_grad_norm) s.optimizer.max_grad_norm = *opt.max_grad_norm;

  const BertShape& shape = s.model.shape;
  s.max_seq_length = *opt.max_seq_length;
  if (s.max_seq_length > shape.max_position_embeddings)
    throw Error(ErrorKind::Config, fmt::format("{}: --max_seq_length {} exceeds max_position_embeddings {} of the model",
                                               opt.model_config, s.max_seq_length, shape.max_position_embeddings));
  s.print_every = opt.print_steps ? *opt.print_steps : s.ds.steps_per_print;
  s.seed = opt.seed ? *opt.seed : 42;

  const BertTrainingHints& h = s.model.training;
  LrSchedule& l = s.schedule;
  l.kind = parse_lr_schedule(opt.lr_schedule);
  l.base_lr = h.learning_rate ? *h.learning_rate : s.optimizer.lr;
  l.warmup_proportion = opt.warmup_proportion ? *opt.warmup_proportion
                                              : (h.warmup_proportion ? *h.warmup_proportion : 0.01);
  l.total_steps = h.total_training_steps ? *h.total_training_steps : opt.max_steps;
  if (h.decay_rate) l.decay_rate = *h.decay_rate;
  if (h.decay_step) l.decay_step = *h.decay_step;
  l.lr_offset = opt.lr_offset;
  s.optimizer.lr = l.base_lr;
  s.config_hash = config_hash(s);
  return s;
}

std::string find_or_prepare_data(const TrainOptions& opt, const TrainSetup& setup, const LogFn& log) {
  const BertShape& shape = setup.model.shape;
  std::string dir = opt.data_dir;
  std::error_code ec;
  if (dir.empty()) {
    const int S = setup.max_seq_length;
    const fs::path target = fs::path(opt.output_dir) / "data" / fmt::format("seq{}", S);
    if (has_shards(target)) {
      log(fmt::format("data: no --data_dir given; using the shards prepared earlier in {}", target.string()));
    } else {
      std::string corpus;
      const std::vector<std::string> candidates = corpus_candidates(opt);
      for (const std::string& c : candidates)
        if (fs::exists(c, ec)) {
          corpus = c;
          break;
        }
      if (corpus.empty())
        throw Error(ErrorKind::Usage,
                    fmt::format("dskc train: no --data_dir given and no text corpus to prepare shards from (looked "
                                "for {}); pass --data_dir DIR of HDF5 shards (see dskc prepare-data) or --corpus "
                                "FILE_OR_DIR",
                                fmt::join(candidates, ", ")));
      PrepareDataOptions p;
      p.inputs = {corpus};
      p.output_dir = target.string();
      p.vocab_size = shape.vocab_size;
      p.max_seq_length = S;
      p.max_predictions_per_seq = std::max(1, S * 20 / 128);  // BERT's 20 at 128, 80 at 512
      p.dupe_factor = 2;
      p.seed = setup.seed;
      p.progress = [&](const std::string& line) { log("prepare-data: " + line); };
      log(fmt::format("data: no --data_dir given; preparing shards from {} into {} (WordPiece vocab of {} tokens, "
                      "max_seq_length {}, {} predictions per sequence, dupe_factor {})",
                      corpus, p.output_dir, p.vocab_size, S, p.max_predictions_per_seq, p.dupe_factor));
      prepare_data(p);
    }
    dir = target.string();
  }
  const fs::path vocab = fs::path(dir) / "vocab.txt";
  if (fs::is_regular_file(vocab, ec)) {
    const Vocab v = Vocab::load(vocab.string());
    if (v.size() > shape.vocab_size)
      throw Error(ErrorKind::Input,
                  fmt::format("{}: the shards' vocab has {} tokens but the model's vocab_size is {} ({}); make the "
                              "shards with a vocab of at most vocab_size tokens or raise vocab_size",
                              vocab.string(), v.size(), shape.vocab_size, opt.model_config));
  }
  return dir;
}

}  // namespace dskc
