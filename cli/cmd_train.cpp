// `dskc train`: the guide's deepspeed_train.py command line (with `dskc train` in place of
// `deepspeed deepspeed_train.py`). Thin: flags map onto TrainOptions (trainer/trainer.h
// documents the loop; trainer/trainer_setup.h the precedence of flags over the JSON).
// The job (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT or Open MPI's variables) comes
// from the environment (trainer/dist_env.h; launchers set it; default: one process).
// Test hook: DSKC_TEST_FAULT="overflow|fail|hang:STEP[:RANK]" injects a gradient overflow, a
// failure or a hang at that step (on that rank only when RANK is given);
// DSKC_TEST_ALLREDUCE=staged all-reduces every gradient whole through the fp32 -> dtype staging
// copy (no in-place layers, no split word-embedding table), =nccl sums layer gradients in place
// over NCCL even where copy engines could (trainer/peer_sum.h), =split_word sums the word-
// embedding table in two parts (BackendOptions::word_split); comma-separated, for the tests and
// benchmarks comparing them.
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "cli/args.h"
#include "cli/commands.h"
#include "compiler/errors.h"
#include "trainer/trainer.h"

namespace dskc::cli {
namespace {

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  try {
    size_t pos = 0;
    int x = std::stoi(v, &pos);
    if (pos == std::string(v).size()) return x;
  } catch (const std::exception&) {
  }
  throw Error(ErrorKind::Usage, fmt::format("environment variable {}='{}' is not an integer", name, v));
}

void apply_fault_hook(TrainOptions& o) {
  const char* v = std::getenv("DSKC_TEST_FAULT");
  if (!v || !*v) return;
  const std::string s(v);
  const auto bad = [&] {
    return Error(ErrorKind::Usage,
                 fmt::format("DSKC_TEST_FAULT='{}': expected overflow|fail|hang:STEP[:RANK], e.g. hang:3:1", s));
  };
  const size_t c1 = s.find(':');
  if (c1 == std::string::npos) throw bad();
  const std::string kind = s.substr(0, c1);
  const size_t c2 = s.find(':', c1 + 1);
  int64_t step = 0;
  int rank = -1;
  try {
    step = std::stoll(s.substr(c1 + 1, c2 == std::string::npos ? std::string::npos : c2 - c1 - 1));
    if (c2 != std::string::npos) rank = std::stoi(s.substr(c2 + 1));
  } catch (const std::exception&) {
    throw bad();
  }
  if (step < 1) throw bad();
  if (kind == "overflow") {
    o.inject_overflow_at_step = step;
    o.inject_overflow_rank = rank;
  } else if (kind == "fail" || kind == "hang") {
    (kind == "fail" ? o.fail_at_step : o.hang_at_step) = step;
    o.fault_rank = rank;
  } else {
    throw bad();
  }
}

void apply_allreduce_hook(TrainOptions& o) {
  const char* v = std::getenv("DSKC_TEST_ALLREDUCE");
  if (!v || !*v) return;
  // A comma-separated list: staged | nccl | split_word
  std::string rest = v;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string mode = rest.substr(0, comma);
    rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
    if (mode == "staged") {
      o.allreduce_in_place = false;
      o.peer_copy = false;
    } else if (mode == "nccl") {
      o.peer_copy = false;
    } else if (mode == "split_word") {
      o.word_split = true;
    } else {
      throw Error(ErrorKind::Usage, fmt::format("DSKC_TEST_ALLREDUCE='{}': expected a comma-separated list of "
                                                "\"staged\", \"nccl\", \"split_word\"", v));
    }
  }
}

}  // namespace

int cmd_train(const Args& args) {
  TrainOptions o;
  bool deepspeed = false;
  std::optional<int> tbs, gas, max_seq, max_steps, print_steps, profile_steps, ckpt_steps, local_rank, seed;
  std::optional<double> max_grad_norm, loss_scale, lr_offset, warmup, dist_timeout;
  ArgParser p("train",
              "Pre-train BERT (masked LM + next-sentence prediction) with a DeepSpeed JSON config and a BERT\n"
              "model config, launched like DeepSpeed's deepspeed_train.py. Writes progress lines, OUTPUT_DIR/\n"
              "metrics.csv, checkpoints OUTPUT_DIR/global_stepN/ and OUTPUT_DIR/loss_curve.png.\n"
              "Several GPUs: one process per GPU under a launcher (torchrun, deepspeed, mpirun, or\n"
              "`dskc launch --nproc_per_node N -- dskc train ...`), data parallel over NCCL.");
  p.add_switch("deepspeed", &deepspeed, "run in DeepSpeed mode (accepted; always on)");
  p.add_option("deepspeed_config", &o.deepspeed_config, "FILE", "DeepSpeed JSON config (batch, optimizer, fp16)");
  p.add_option("cf", &o.model_config, "FILE", "BERT model config (flat, or bing_bert's with bert_model_config)");
  p.add_int("train_batch_size", &tbs, "global batch size (overrides the JSON)");
  p.add_int("max_seq_length", &max_seq, "sequence length of the data and the kernel (required)");
  p.add_int("gradient_accumulation_steps", &gas, "micro-batches per step (overrides the JSON)");
  p.add_double("max_grad_norm", &max_grad_norm, "clip gradients to this global norm (0: off; overrides the JSON)");
  p.add_switch("fp16", &o.fp16, "fp16 mixed precision (also enabled by fp16.enabled in the JSON)");
  p.add_double("loss_scale", &loss_scale, "fp16 loss scale; 0 = dynamic (overrides fp16.loss_scale)");
  p.add_switch("delay_allreduce", &o.delay_allreduce, "all-reduce gradients after backward (multi-GPU)");
  p.add_int("max_steps", &max_steps, "train until this global step (required)");
  p.add_int("print_steps", &print_steps, "progress line every N steps (default: steps_per_print)");
  p.add_int("profile_steps", &profile_steps,
            "profile the last N steps by phase (embeddings, encoder forward and backward, heads, optimizer, host "
            "work between them) and print the table at the end");
  p.add_switch("deepspeed_transformer_kernel", &o.transformer_kernel, "use the fused DeepSpeed transformer layer");
  p.add_switch("cuda_graphs", &o.cuda_graphs,
               "with --deepspeed_transformer_kernel: launch each layer's forward and backward as one CUDA graph "
               "(captured every step with that step's dropout masks; fewer launch and stream-wait costs)");
  p.add_option("output_dir", &o.output_dir, "DIR", "checkpoints, metrics.csv, loss_curve.png (required)");
  p.add_switch("attention_dropout_checkpoint", &o.attention_dropout_checkpoint, "recompute attention dropout in backward");
  p.add_switch("normalize_invertible", &o.normalize_invertible, "reconstruct LayerNorm inputs in backward");
  p.add_switch("gelu_checkpoint", &o.gelu_checkpoint, "recompute GELU outputs in backward");
  p.add_switch("stochastic_mode", &o.stochastic_mode, "allow faster, non-deterministic kernels");
  p.add_switch("rewarmup", &o.rewarmup, "restart LR warmup from the loaded checkpoint's step");
  p.add_option("lr_schedule", &o.lr_schedule, "NAME", "LE (default), EE, EP, LL or constant (trainer/lr_schedule.h)");
  p.add_double("lr_offset", &lr_offset, "added to the scheduled learning rate (default 0)");
  p.add_double("warmup_proportion", &warmup, "fraction of max_steps spent warming up (default 0.01)");
  p.add_option("load_training_checkpoint", &o.load_training_checkpoint, "DIR", "resume from a checkpoint under DIR");
  p.add_option("load_checkpoint_id", &o.load_checkpoint_id, "TAG", "checkpoint tag under DIR (default: DIR/latest)");
  p.add_option("data_dir", &o.data_dir, "DIR", "HDF5 shards (default: prepare from the demo corpus)");
  p.add_option("corpus", &o.corpus, "PATH", "text to prepare shards from when --data_dir is absent");
  p.add_option("backend", &o.backend, "NAME", "auto (default: cuda with a GPU, else cpu), cpu or cuda");
  p.add_int("seed", &seed, "dropout and data-order seed (default 42)");
  p.add_int("checkpoint_steps", &ckpt_steps, "save a checkpoint every N steps (always at the end)");
  p.add_int("local_rank", &local_rank, "GPU index (set by launchers)");
  p.add_double("dist_timeout", &dist_timeout,
               "multi-GPU: seconds to wait for other ranks before failing with their names (default 300)");
  if (!p.parse(args)) return 0;

  if (o.backend != "auto" && o.backend != "cpu" && o.backend != "cuda")
    throw Error(ErrorKind::Usage, fmt::format("--backend '{}' is not known: use auto, cpu or cuda", o.backend));
  o.train_batch_size = tbs;
  o.gradient_accumulation_steps = gas;
  o.max_grad_norm = max_grad_norm;
  o.loss_scale = loss_scale;
  o.max_seq_length = max_seq;
  if (max_steps) o.max_steps = *max_steps;
  o.print_steps = print_steps;
  o.profile_steps = profile_steps;
  o.checkpoint_steps = ckpt_steps;
  if (seed) {
    if (*seed < 0) throw Error(ErrorKind::Usage, fmt::format("--seed must be >= 0, got {}", *seed));
    o.seed = static_cast<uint64_t>(*seed);
  }
  if (lr_offset) o.lr_offset = *lr_offset;
  o.warmup_proportion = warmup;
  o.dist = read_dist_env();
  o.local_rank = local_rank ? *local_rank : (o.dist.distributed() ? o.dist.local_rank : env_int("LOCAL_RANK", -1));
  if (dist_timeout) {
    if (!(*dist_timeout > 0 && *dist_timeout <= 86400))
      throw Error(ErrorKind::Usage, fmt::format("--dist_timeout must be in (0, 86400] seconds, got {}", *dist_timeout));
    o.dist_timeout = std::chrono::milliseconds(static_cast<int64_t>(*dist_timeout * 1000));
  }
  apply_fault_hook(o);
  apply_allreduce_hook(o);

  TrainResult r = train(o);
  std::printf("dskc train: done at step %lld%s%s\n", static_cast<long long>(r.final_step),
              r.last_checkpoint.empty() ? "" : "; last checkpoint ", r.last_checkpoint.c_str());
  return 0;
}

}  // namespace dskc::cli
