// The training loop (see trainer.h): setup, resume, steps, progress, metrics, checkpoints, plot.
#include "trainer/trainer.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "compiler/errors.h"
#include "compiler/fileio.h"
#include "runtime/driver.h"
#include "trainer/checkpoint.h"
#include "trainer/loss_scaler.h"
#include "trainer/png.h"
#include "trainer/trainer_setup.h"

namespace dskc {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr const char* kMetricsHeader =
    "step,loss,mlm_loss,nsp_loss,loss_scale,lr,grad_norm,skipped,seq_per_s,tflops,seconds";

std::string metrics_row(const StepRecord& r) {
  return fmt::format("{},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{},{:.6g},{:.6g},{:.6g}", r.step, r.loss,
                     r.mlm_loss, r.nsp_loss, r.loss_scale, r.lr, r.grad_norm, r.skipped ? 1 : 0, r.seq_per_s,
                     r.tflops, r.seconds);
}

// Starts output_dir/metrics.csv: fresh (header only), or on resume keeping the rows of steps
// up to `keep_through` (a longer earlier run's later rows are dropped: they are redone now).
void start_metrics(const std::string& path, bool resume, int64_t keep_through) {
  std::string out = std::string(kMetricsHeader) + "\n";
  std::error_code ec;
  if (resume && fs::exists(path, ec)) {
    std::istringstream in(read_file_bytes(path));
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      try {
        if (std::stoll(line.substr(0, line.find(','))) <= keep_through) out += line + "\n";
      } catch (const std::exception&) {
      }
    }
  }
  write_file_atomic(path, out);
}

// Reads step, loss, mlm, nsp columns back for the plot.
std::vector<CurveSeries> read_curves(const std::string& path) {
  std::vector<CurveSeries> s(3);
  s[0] = {"loss", {}, {}, 31, 119, 180};
  s[1] = {"mlm", {}, {}, 255, 127, 14};
  s[2] = {"nsp", {}, {}, 44, 160, 44};
  std::istringstream in(read_file_bytes(path));
  std::string line;
  std::getline(in, line);
  while (std::getline(in, line)) {
    std::vector<double> v;
    std::istringstream ls(line);
    std::string cell;
    while (std::getline(ls, cell, ',') && v.size() < 4) {
      try {
        v.push_back(std::stod(cell));
      } catch (const std::exception&) {
        v.push_back(std::nan(""));
      }
    }
    if (v.size() < 4) continue;
    for (int k = 0; k < 3; ++k) {
      s[k].x.push_back(v[0]);
      s[k].y.push_back(v[k + 1]);
    }
  }
  return s;
}

std::unique_ptr<TrainBackend> choose_backend(const TrainOptions& opt, const BackendOptions& bo, const LogFn& log) {
  std::string kind = opt.backend;
  if (kind == "auto") kind = gpu_available() ? "cuda" : "cpu";
  std::unique_ptr<TrainBackend> b = make_backend(kind, bo);
  if (b) return b;
  if (opt.backend == "auto") {
    log("note: a GPU is present but the CUDA training backend is not available yet; using the CPU backend");
    return make_backend("cpu", bo);
  }
  if (!gpu_available())
    throw Error(ErrorKind::Device,
                "--backend cuda: no CUDA device (no NVIDIA driver or no GPU found); train with --backend cpu");
  throw Error(ErrorKind::Device, "--backend cuda: the CUDA training backend is not implemented yet; use --backend cpu");
}

}  // namespace

TrainResult train(const TrainOptions& opt) {
  const LogFn log = opt.log ? opt.log : LogFn([](const std::string& l) {
    std::printf("%s\n", l.c_str());
    std::fflush(stdout);
  });
  TrainSetup setup = resolve_setup(opt, log);
  const BertShape& shape = setup.model.shape;

  // A checkpoint to resume from is validated before anything is written.
  std::optional<CheckpointData> ckpt;
  if (!opt.load_training_checkpoint.empty()) {
    const std::string dir = resolve_checkpoint_dir(opt.load_training_checkpoint, opt.load_checkpoint_id);
    ckpt = load_checkpoint(dir, shape);
    if (opt.seed && *opt.seed != ckpt->state.seed)
      log(fmt::format("note: --seed {} ignored: resuming with the checkpoint's seed {}", *opt.seed, ckpt->state.seed));
    setup.seed = ckpt->state.seed;
    if (ckpt->state.config_hash != setup.config_hash)
      log(fmt::format("note: the configuration differs from the one {} was trained with (hash {} vs {})", dir,
                      setup.config_hash, ckpt->state.config_hash));
  }

  TrainResult result;
  if (ckpt && ckpt->state.step >= opt.max_steps) {
    log(fmt::format("nothing to do: {} is at step {} and --max_steps is {}", ckpt->dir, ckpt->state.step,
                    opt.max_steps));
    result.start_step = result.final_step = ckpt->state.step;
    return result;
  }
  result.data_dir = find_or_prepare_data(opt, setup, log);
  ShardDataset data(result.data_dir, setup.max_seq_length, setup.seed, opt.rank, opt.world_size);

  BackendOptions bo;
  bo.shape = shape;
  bo.micro_batch = setup.batch.micro_batch;
  bo.max_seq_length = setup.max_seq_length;
  bo.dtype = setup.dtype;
  bo.transformer_kernel = opt.transformer_kernel;
  bo.attention_dropout_checkpoint = opt.attention_dropout_checkpoint;
  bo.normalize_invertible = opt.normalize_invertible;
  bo.gelu_checkpoint = opt.gelu_checkpoint;
  bo.stochastic_mode = opt.stochastic_mode;
  bo.seed = setup.seed;
  bo.local_rank = opt.local_rank;
  std::unique_ptr<TrainBackend> backend = choose_backend(opt, bo, log);
  result.backend_name = backend->name();

  LossScaler scaler(setup.scaler);
  TrainerState state;
  state.seed = setup.seed;
  if (ckpt) {
    backend->import_params(ckpt->params, ckpt->dir + "/optimizer.safetensors");
    backend->import_optimizer_state(ckpt->optimizer_state, ckpt->dir + "/optimizer.safetensors");
    const TrainerState& cs = ckpt->state;
    state.step = cs.step;
    state.optimizer_steps = cs.optimizer_steps;
    state.skipped_steps = cs.skipped_steps;
    state.lr_origin_step = opt.rewarmup ? cs.step : cs.lr_origin_step;
    if (cs.dtype == dtype_name(setup.dtype) && setup.scaler.enabled) scaler.set_state(cs.scaler);
    if (cs.max_seq_length == setup.max_seq_length && cs.micro_batch == setup.batch.micro_batch &&
        cs.world_size == setup.batch.world_size && cs.data_total_samples == data.total_samples()) {
      data.seek(cs.data);
    } else {
      log(fmt::format("note: the data set or batch geometry differs from the checkpoint's (max_seq_length {} vs {}, "
                      "micro batch {} vs {}, {} vs {} samples); reading the data from its beginning",
                      setup.max_seq_length, cs.max_seq_length, setup.batch.micro_batch, cs.micro_batch,
                      data.total_samples(), cs.data_total_samples));
    }
    log(fmt::format("resumed from {} at step {} (loss scale {}, lr schedule origin {})", ckpt->dir, cs.step,
                    scaler.scale(), state.lr_origin_step));
    ckpt.reset();  // free the copies
  } else {
    backend->import_params(init_model_params(shape, setup.seed), "initialization");
  }
  setup.schedule.origin_step = state.lr_origin_step;
  result.start_step = state.step;

  const BatchSizes& bs = setup.batch;
  const int64_t n_params = count_parameters(shape);
  log(fmt::format("dskc train: backend {}; BERT {} layers, hidden {}, heads {}, vocab {}, {:.2f}M parameters, {}",
                  backend->name(), shape.num_hidden_layers, shape.hidden_size, shape.num_attention_heads,
                  shape.vocab_size, n_params / 1e6, shape.pre_layer_norm ? "Pre-LN" : "Post-LN"));
  log(fmt::format("batch {} = micro {} x accumulation {} x world {}; seq {}; {} {} lr {} ({} schedule); {}{}; data "
                  "{} ({} samples)",
                  bs.train_batch_size, bs.micro_batch, bs.accumulation, bs.world_size, setup.max_seq_length,
                  optimizer_name(setup.optimizer.type),
                  setup.optimizer.max_grad_norm > 0 ? fmt::format("clip {}", setup.optimizer.max_grad_norm) : "no clip",
                  setup.schedule.base_lr, lr_schedule_name(setup.schedule.kind), dtype_name(setup.dtype),
                  setup.scaler.enabled
                      ? (setup.scaler.dynamic() ? fmt::format(" (dynamic loss scale from {})", scaler.scale())
                                                : fmt::format(" (static loss scale {})", scaler.scale()))
                      : "",
                  result.data_dir, data.total_samples()));
  if (opt.delay_allreduce && opt.world_size == 1) log("note: --delay_allreduce has no effect with one process");

  std::error_code ec;
  fs::create_directories(opt.output_dir, ec);
  if (ec) throw Error(ErrorKind::Io, fmt::format("{}: cannot create directory: {}", opt.output_dir, ec.message()));
  const std::string metrics_path = (fs::path(opt.output_dir) / "metrics.csv").string();
  start_metrics(metrics_path, result.start_step > 0, result.start_step);
  std::ofstream metrics(metrics_path, std::ios::app);
  if (!metrics) throw Error(ErrorKind::Io, fmt::format("{}: cannot open for appending", metrics_path));

  const double flops_per_seq = 6.0 * static_cast<double>(n_params) * setup.max_seq_length +
                               12.0 * shape.num_hidden_layers * static_cast<double>(setup.max_seq_length) *
                                   setup.max_seq_length * shape.hidden_size;
  auto save = [&](int64_t step) {
    state.data = data.position();
    state.data_total_samples = data.total_samples();
    state.max_seq_length = setup.max_seq_length;
    state.micro_batch = bs.micro_batch;
    state.accumulation = bs.accumulation;
    state.world_size = bs.world_size;
    state.scaler = scaler.state();
    state.lr_schedule = lr_schedule_name(setup.schedule.kind);
    state.dtype = dtype_name(setup.dtype);
    state.config_hash = setup.config_hash;
    const std::string tag = fmt::format("global_step{}", step);
    save_checkpoint(opt.output_dir, tag, shape, setup.dtype, backend->export_params(),
                    backend->export_optimizer_state(), state);
    result.last_checkpoint = (fs::path(opt.output_dir) / tag).string();
    log(fmt::format("saved checkpoint {}", result.last_checkpoint));
  };

  auto interval_start = Clock::now();
  int64_t interval_steps = 0;
  int64_t last_saved = -1;
  while (state.step < opt.max_steps) {
    const auto t0 = Clock::now();
    StepRecord rec;
    rec.step = state.step + 1;
    rec.loss_scale = scaler.scale();
    rec.lr = setup.schedule.lr_at(state.step);
    backend->zero_grads();
    for (int micro = 0; micro < bs.accumulation; ++micro) {
      const DataPosition where = data.position();
      Batch batch = data.next_batch(bs.micro_batch);
      MicroStep m;
      m.loss_scale = scaler.scale();
      m.accumulation = bs.accumulation;
      m.rng_step = static_cast<uint32_t>(state.step * bs.accumulation + micro);
      StepLoss l;
      try {
        l = backend->forward_backward(batch, m);
      } catch (const Error& e) {
        if (e.kind() != ErrorKind::Input) throw;
        throw Error(ErrorKind::Input, fmt::format("{}: data at epoch {}, shard {}, sample {}: {}", result.data_dir,
                                                  where.epoch, where.shard, where.sample, e.what()));
      }
      rec.mlm_loss += l.mlm_loss / bs.accumulation;
      rec.nsp_loss += l.nsp_loss / bs.accumulation;
    }
    rec.loss = rec.mlm_loss + rec.nsp_loss;
    if (rec.step == opt.inject_overflow_at_step) backend->inject_grad_overflow();

    const bool overflow = !backend->grads_finite();
    const double old_scale = scaler.scale();
    rec.skipped = scaler.update(overflow);
    if (rec.skipped) {
      rec.grad_norm = std::nan("");
      state.skipped_steps += 1;
      log(fmt::format("step {}: gradient overflow; skipping the update{}", rec.step,
                      setup.scaler.dynamic() ? fmt::format(" (loss scale {} -> {})", old_scale, scaler.scale()) : ""));
    } else {
      rec.grad_norm = backend->grad_norm(old_scale);
      UpdateArgs a;
      a.lr = rec.lr;
      a.grad_scale = old_scale;
      a.clip_coef = clip_coefficient(rec.grad_norm, setup.optimizer.max_grad_norm);
      a.step = ++state.optimizer_steps;
      backend->optimizer_step(setup.optimizer, a);
    }
    state.step += 1;
    rec.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    rec.seq_per_s = rec.seconds > 0 ? bs.train_batch_size / rec.seconds : 0.0;
    rec.tflops = rec.seconds > 0 ? flops_per_seq * bs.train_batch_size / rec.seconds / 1e12 : 0.0;
    metrics << metrics_row(rec) << "\n" << std::flush;
    result.steps.push_back(rec);
    if (opt.after_step) opt.after_step(rec, *backend);

    interval_steps += 1;
    if (state.step % setup.print_every == 0 || state.step == opt.max_steps) {
      const double secs = std::chrono::duration<double>(Clock::now() - interval_start).count();
      const double seqs = static_cast<double>(interval_steps) * bs.train_batch_size;
      log(fmt::format("step {}/{} | loss {:.4f} (mlm {:.4f}, nsp {:.4f}) | scale {:g} | lr {:.3e} | grad norm {:.3g} | "
                      "{:.1f} seq/s | {:.4f} TFLOP/s",
                      state.step, opt.max_steps, rec.loss, rec.mlm_loss, rec.nsp_loss, rec.loss_scale, rec.lr,
                      rec.grad_norm, secs > 0 ? seqs / secs : 0.0, secs > 0 ? seqs * flops_per_seq / secs / 1e12 : 0.0));
      interval_start = Clock::now();
      interval_steps = 0;
    }
    if (opt.checkpoint_steps && state.step % *opt.checkpoint_steps == 0) {
      save(state.step);
      last_saved = state.step;
    }
  }
  metrics.close();
  if (last_saved != state.step) save(state.step);
  result.final_step = state.step;

  if (opt.plot) {
    const std::string png = (fs::path(opt.output_dir) / "loss_curve.png").string();
    write_file_atomic(png, plot_curves(read_curves(metrics_path)));
    log(fmt::format("wrote {} and {}", metrics_path, png));
  }
  return result;
}

}  // namespace dskc
