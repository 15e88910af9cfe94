// The training loop (see trainer.h): setup, resume, steps, progress, metrics, checkpoints, plot.
#include "trainer/trainer.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "compiler/errors.h"
#include "compiler/fileio.h"
#include "runtime/driver.h"
#include "trainer/batch_prefetch.h"
#include "trainer/checkpoint.h"
#include "trainer/loss_scaler.h"
#include "trainer/png.h"
#include "trainer/process_group.h"
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
  if (opt.dist.distributed()) kind = "cuda";  // train() checked that a GPU is present
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
  const DistEnv& dist = opt.dist;
  const bool lead = dist.rank == 0;  // rank 0 logs progress, writes metrics and checkpoints
  const LogFn quiet = [](const std::string&) {};
  TrainSetup setup = resolve_setup(opt, lead ? log : quiet);
  const BertShape& shape = setup.model.shape;
  const bool prefetch = opt.prefetch < 0 ? train_prefetch_from_env() : opt.prefetch != 0;

  // A checkpoint to resume from is validated before anything is written.
  std::optional<CheckpointData> ckpt;
  if (!opt.load_training_checkpoint.empty()) {
    const std::string dir = resolve_checkpoint_dir(opt.load_training_checkpoint, opt.load_checkpoint_id);
    ckpt = load_checkpoint(dir, shape);
    if (lead && opt.seed && *opt.seed != ckpt->state.seed)
      log(fmt::format("note: --seed {} ignored: resuming with the checkpoint's seed {}", *opt.seed, ckpt->state.seed));
    setup.seed = ckpt->state.seed;
    if (lead && ckpt->state.config_hash != setup.config_hash)
      log(fmt::format("note: the configuration differs from the one {} was trained with (hash {} vs {})", dir,
                      setup.config_hash, ckpt->state.config_hash));
  }

  TrainResult result;
  if (ckpt && ckpt->state.step >= opt.max_steps) {
    if (lead) log(fmt::format("nothing to do: {} is at step {} and --max_steps is {}", ckpt->dir, ckpt->state.step,
                    opt.max_steps));
    result.start_step = result.final_step = ckpt->state.step;
    return result;
  }
  // Data parallel: join the job (bounded: a rank that never comes is named). Rank 0 prepares
  // the data (if needed) while the others wait, so no two processes write the same shards.
  std::unique_ptr<ProcessGroup> pg;
  if (dist.distributed()) {
    if (!gpu_available())
      throw Error(ErrorKind::Device, fmt::format("rank {}: data-parallel training needs a GPU per process, but this "
                                                 "machine has no CUDA device",
                                                 dist.rank));
    if (lead) log(fmt::format("data parallel: {} ranks, rendezvous at {}:{} (launcher: {})", dist.world_size,
                              dist.master_addr, dist.master_port, dist.source));
    pg = std::make_unique<ProcessGroup>(dist, opt.dist_timeout);
    if (!lead) pg->barrier("data");
  }
  result.data_dir = find_or_prepare_data(opt, setup, lead ? log : quiet);
  if (pg && lead) pg->barrier("data");
  ShardDataset data(result.data_dir, setup.max_seq_length, setup.seed, dist.rank, dist.world_size);

  BackendOptions bo;
  bo.shape = shape;
  bo.micro_batch = setup.batch.micro_batch;
  bo.max_seq_length = setup.max_seq_length;
  bo.dtype = setup.dtype;
  bo.transformer_kernel = opt.transformer_kernel;
  if (opt.cuda_graphs) bo.cuda_graphs = 1;
  bo.attention_dropout_checkpoint = opt.attention_dropout_checkpoint;
  bo.normalize_invertible = opt.normalize_invertible;
  bo.gelu_checkpoint = opt.gelu_checkpoint;
  bo.stochastic_mode = opt.stochastic_mode;
  bo.seed = setup.seed;
  bo.local_rank = opt.local_rank >= 0 ? opt.local_rank : (dist.distributed() ? dist.local_rank : -1);
  bo.process_group = pg.get();
  bo.delay_allreduce = opt.delay_allreduce;
  bo.fp32_allreduce = setup.ds.fp32_allreduce;
  bo.allreduce_in_place = opt.allreduce_in_place;
  bo.peer_copy = opt.peer_copy;
  bo.word_split = opt.word_split;
  std::unique_ptr<TrainBackend> backend = choose_backend(opt, bo, lead ? log : quiet);
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
    const bool same_data = cs.max_seq_length == setup.max_seq_length && cs.data_total_samples == data.total_samples();
    const bool same_geometry = cs.micro_batch == setup.batch.micro_batch && cs.world_size == setup.batch.world_size;
    const bool has_taken = cs.data.taken > 0 || (cs.data.epoch == 0 && cs.data.shard == 0 && cs.data.sample == 0);
    if (same_data && has_taken) {
      // Every rank took cs.data.taken samples; with another world size each new rank continues
      // at the same point of the stream (all samples the old job took, split over the new ranks).
      const uint64_t global = cs.data.taken * static_cast<uint64_t>(cs.world_size);
      data.seek_taken(global / static_cast<uint64_t>(setup.batch.world_size));
      if (lead && cs.world_size != setup.batch.world_size)
        log(fmt::format("note: the checkpoint was taken with {} ranks, this job has {}: every rank continues after "
                        "{} samples of the data stream ({} in all); the assignment of samples to ranks differs from "
                        "the earlier job's",
                        cs.world_size, setup.batch.world_size, global / setup.batch.world_size, global));
    } else if (same_data && same_geometry && dist.world_size == 1) {
      data.seek(cs.data);  // a state from before "taken" was recorded
    } else if (lead) {
      log(fmt::format("note: the data set or batch geometry differs from the checkpoint's (max_seq_length {} vs {}, "
                      "micro batch {} vs {}, {} vs {} samples); reading the data from its beginning",
                      setup.max_seq_length, cs.max_seq_length, setup.batch.micro_batch, cs.micro_batch,
                      data.total_samples(), cs.data_total_samples));
    }
    if (lead) log(fmt::format("resumed from {} at step {} (loss scale {}, lr schedule origin {})", ckpt->dir, cs.step,
                    scaler.scale(), state.lr_origin_step));
    ckpt.reset();  // free the copies
  } else {
    backend->import_params(init_model_params(shape, setup.seed), "initialization");
  }
  setup.schedule.origin_step = state.lr_origin_step;
  result.start_step = state.step;
  // From here on the dataset is read through `batches` only (a worker may be reading it).
  BatchPrefetcher batches(data, setup.batch.micro_batch, prefetch,
                          [b = backend.get()](const Batch& batch) { return b->prepare(batch); });

  const BatchSizes& bs = setup.batch;
  const int64_t n_params = count_parameters(shape);
  if (!lead)
    log(fmt::format("rank {}/{} (local rank {}): backend {}, {} samples per epoch on this rank", dist.rank,
                    dist.world_size, dist.local_rank, backend->name(), data.samples_per_epoch()));
  if (lead) log(fmt::format("dskc train: backend {}; BERT {} layers, hidden {}, heads {}, vocab {}, {:.2f}M parameters, {}",
                  backend->name(), shape.num_hidden_layers, shape.hidden_size, shape.num_attention_heads,
                  shape.vocab_size, n_params / 1e6, shape.pre_layer_norm ? "Pre-LN" : "Post-LN"));
  if (lead) log(fmt::format("batch {} = micro {} x accumulation {} x world {}; seq {}; {} {} lr {} ({} schedule); {}{}; data "
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
  if (lead && opt.delay_allreduce && !dist.distributed())
    log("note: --delay_allreduce has no effect with one process");
  if (lead && dist.distributed())
    log(fmt::format("gradient all-reduce in {}: {}{}",
                    setup.ds.fp32_allreduce || setup.dtype == DType::F32 ? "fp32" : dtype_name(setup.dtype),
                    opt.delay_allreduce ? "one all-reduce after backward (--delay_allreduce)"
                                        : "buckets of 25 MB (fp32 gradient bytes), overlapped with backward",
                    backend->data_parallel_path().empty()
                        ? ""
                        : "; steps of one micro-batch: " + backend->data_parallel_path()));

  std::error_code ec;
  fs::create_directories(opt.output_dir, ec);
  if (ec) throw Error(ErrorKind::Io, fmt::format("{}: cannot create directory: {}", opt.output_dir, ec.message()));
  const std::string metrics_path = (fs::path(opt.output_dir) / "metrics.csv").string();
  std::ofstream metrics;
  if (lead) {
    start_metrics(metrics_path, result.start_step > 0, result.start_step);
    metrics.open(metrics_path, std::ios::app);
    if (!metrics) throw Error(ErrorKind::Io, fmt::format("{}: cannot open for appending", metrics_path));
  }

  const double flops_per_seq = 6.0 * static_cast<double>(n_params) * setup.max_seq_length +
                               12.0 * shape.num_hidden_layers * static_cast<double>(setup.max_seq_length) *
                                   setup.max_seq_length * shape.hidden_size;
  // Rank 0 writes (atomically, checkpoint.h); the others wait for it, so a checkpoint that a
  // later failure leaves behind is complete and any rank can resume from it.
  auto save = [&](int64_t step) {
    const std::string tag = fmt::format("global_step{}", step);
    result.last_checkpoint = (fs::path(opt.output_dir) / tag).string();
    if (!lead) {
      pg->barrier("checkpoint");
      return;
    }
    state.data = batches.position();
    state.data_total_samples = data.total_samples();
    state.max_seq_length = setup.max_seq_length;
    state.micro_batch = bs.micro_batch;
    state.accumulation = bs.accumulation;
    state.world_size = bs.world_size;
    state.scaler = scaler.state();
    state.lr_schedule = lr_schedule_name(setup.schedule.kind);
    state.dtype = dtype_name(setup.dtype);
    state.config_hash = setup.config_hash;
    save_checkpoint(opt.output_dir, tag, shape, setup.dtype, backend->export_params(),
                    backend->export_optimizer_state(), state);
    log(fmt::format("saved checkpoint {}", result.last_checkpoint));
    if (pg) pg->barrier("checkpoint");
  };
  const auto on_this_rank = [&](int r) { return r < 0 || r == dist.rank; };
  const int world = dist.world_size;
  double exposed_comm = 0.0;  // all-reduce time not hidden by backward, this interval (seconds)

  auto interval_start = Clock::now();
  int64_t interval_steps = 0;
  int64_t last_saved = -1;
  while (state.step < opt.max_steps) {
    const auto t0 = Clock::now();
    const bool profiled = opt.profile_steps && state.step + 1 > opt.max_steps - *opt.profile_steps;
    if (profiled) {
      backend->start_phase_marks();
      backend->mark(phase::kStepStart);
    }
    StepRecord rec;
    rec.step = state.step + 1;
    rec.loss_scale = scaler.scale();
    rec.lr = setup.schedule.lr_at(state.step);
    if (rec.step == opt.fail_at_step && on_this_rank(opt.fault_rank))
      throw Error(ErrorKind::Device, fmt::format("rank {}: injected failure before step {} (test hook)", dist.rank,
                                                 rec.step));
    if (rec.step == opt.hang_at_step && on_this_rank(opt.fault_rank)) {
      log(fmt::format("rank {}: hanging before step {} (test hook)", dist.rank, rec.step));
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
    }
    backend->zero_grads();
    backend->mark(phase::kZeroGrads);
    for (int micro = 0; micro < bs.accumulation; ++micro) {
      // The run's last micro-batch starts no read of a batch that no step would use.
      BatchPrefetcher::Item item = batches.next(state.step + 1 < opt.max_steps || micro + 1 < bs.accumulation);
      const DataPosition& where = item.where;
      const Batch& batch = item.batch;
      backend->mark(phase::kNextBatch);
      MicroStep m;
      m.loss_scale = scaler.scale();
      m.accumulation = bs.accumulation * world;  // the all-reduce sums over ranks: a mean over all
      // Each rank's micro-batches get the dropout keys the same micro-batches would get in a
      // one-GPU run accumulating over all ranks' batches: (step·world + rank)·accumulation + micro.
      m.rng_step = static_cast<uint32_t>((state.step * world + dist.rank) * bs.accumulation + micro);
      m.sync_grads = micro == bs.accumulation - 1;
      StepLoss l;
      try {
        l = backend->forward_backward_prepared(batch, m, item.prepared.get());
      } catch (const Error& e) {
        if (e.kind() != ErrorKind::Input) throw;
        throw Error(ErrorKind::Input, fmt::format("{}: data at epoch {}, shard {}, sample {}: {}", result.data_dir,
                                                  where.epoch, where.shard, where.sample, e.what()));
      }
      rec.mlm_loss += l.mlm_loss / bs.accumulation;
      rec.nsp_loss += l.nsp_loss / bs.accumulation;
    }
    if (rec.step == opt.inject_overflow_at_step && on_this_rank(opt.inject_overflow_rank))
      backend->inject_grad_overflow();

    bool overflow = !backend->grads_finite();
    if (pg) {
      // Losses are means over all ranks; an overflow on any rank skips the step on every rank.
      const std::vector<double> r = pg->all_reduce_host({rec.mlm_loss, rec.nsp_loss, overflow ? 1.0 : 0.0},
                                                        fmt::format("the loss all-reduce of step {}", rec.step));
      rec.mlm_loss = r[0] / world;
      rec.nsp_loss = r[1] / world;
      overflow = r[2] > 0;
      exposed_comm += pg->take_exposed_seconds();
    }
    backend->mark(phase::kOverflowCheck);
    rec.loss = rec.mlm_loss + rec.nsp_loss;
    const double old_scale = scaler.scale();
    rec.skipped = scaler.update(overflow);
    if (rec.skipped) {
      rec.grad_norm = std::nan("");
      state.skipped_steps += 1;
      if (lead) log(fmt::format("step {}: gradient overflow{}; skipping the update{}", rec.step,
                      pg ? " (on at least one rank)" : "",
                      setup.scaler.dynamic() ? fmt::format(" (loss scale {} -> {})", old_scale, scaler.scale()) : ""));
    } else {
      rec.grad_norm = backend->grad_norm(old_scale);
      backend->mark(phase::kGradNorm);
      UpdateArgs a;
      a.lr = rec.lr;
      a.grad_scale = old_scale;
      a.clip_coef = clip_coefficient(rec.grad_norm, setup.optimizer.max_grad_norm);
      a.step = ++state.optimizer_steps;
      backend->optimizer_step(setup.optimizer, a);
      backend->mark(phase::kOptimizer);
    }
    state.step += 1;
    rec.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    rec.seq_per_s = rec.seconds > 0 ? bs.train_batch_size / rec.seconds : 0.0;
    rec.tflops = rec.seconds > 0 ? flops_per_seq * bs.train_batch_size / rec.seconds / 1e12 : 0.0;
    if (lead) metrics << metrics_row(rec) << "\n" << std::flush;
    result.steps.push_back(rec);
    if (opt.after_step) opt.after_step(rec, *backend);

    interval_steps += 1;
    if (state.step % setup.print_every == 0 || state.step == opt.max_steps) {
      const double secs = std::chrono::duration<double>(Clock::now() - interval_start).count();
      const double seqs = static_cast<double>(interval_steps) * bs.train_batch_size;
      if (lead)
        log(fmt::format("step {}/{} | loss {:.4f} (mlm {:.4f}, nsp {:.4f}) | scale {:g} | lr {:.3e} | grad norm {:.3g} "
                        "| {:.1f} seq/s | {:.4f} TFLOP/s{}",
                        state.step, opt.max_steps, rec.loss, rec.mlm_loss, rec.nsp_loss, rec.loss_scale, rec.lr,
                        rec.grad_norm, secs > 0 ? seqs / secs : 0.0, secs > 0 ? seqs * flops_per_seq / secs / 1e12 : 0.0,
                        pg ? fmt::format(" | exposed all-reduce {:.2f} ms/step", 1e3 * exposed_comm / interval_steps)
                           : ""));
      interval_start = Clock::now();
      interval_steps = 0;
      exposed_comm = 0.0;
    }
    if (profiled) {
      backend->mark(phase::kBookkeeping);
      result.profile.add_step(backend->take_phase_marks());
    }
    if (opt.checkpoint_steps && state.step % *opt.checkpoint_steps == 0) {
      save(state.step);
      last_saved = state.step;
    }
  }
  if (lead) metrics.close();
  if (lead && result.profile.steps() > 0) {
    const int64_t first = state.step - result.profile.steps() + 1;
    log(fmt::format("step profile, steps {}-{}{}, mean per step. device ms: time between the phase marks on the "
                    "backend's timeline (the GPU's stream for the CUDA backend, with the GPU's idle waits for the host "
                    "included; the host clock for the CPU backend); host ms: time between the host calls that set them",
                    first, state.step,
                    result.profile.steps() < *opt.profile_steps
                        ? fmt::format(" (--profile_steps {}: this run took only {} steps)", *opt.profile_steps,
                                      result.profile.steps())
                        : ""));
    std::istringstream table(result.profile.table());
    for (std::string line; std::getline(table, line);) log(line);
  }
  if (last_saved != state.step) save(state.step);
  result.final_step = state.step;
  if (pg) {
    // Every replica must hold the same weights: compare a hash of the fp32 masters.
    uint64_t h = 1469598103934665603ull;  // FNV-1a over names and bytes, in name order
    for (const auto& [name, v] : backend->export_params()) {
      for (char c : name) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
      const auto* b = reinterpret_cast<const unsigned char*>(v.data());
      for (size_t i = 0; i < v.size() * sizeof(float); ++i) h = (h ^ b[i]) * 1099511628211ull;
    }
    pg->check_identical(h, fmt::format("the parameters after step {}", state.step));
    if (lead)
      log(fmt::format("parameters identical on all {} ranks after step {} (hash {:016x})", world, state.step, h));
  }

  if (lead && opt.plot) {
    const std::string png = (fs::path(opt.output_dir) / "loss_curve.png").string();
    write_file_atomic(png, plot_curves(read_curves(metrics_path)));
    log(fmt::format("wrote {} and {}", metrics_path, png));
  }
  return result;
}

}  // namespace dskc
