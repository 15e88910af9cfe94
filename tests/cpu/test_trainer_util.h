// Helpers shared by the trainer tests: tiny model / DeepSpeed configs written to a temp dir,
// shards prepared once per test process from the shipped corpus, synthetic shards with a fixed
// number of predictions per sample, and error capture.
#pragma once
#include <doctest/doctest.h>

#include <filesystem>
#include <map>
#include <random>
#include <string>

#include "compiler/errors.h"
#include "tests/test_util.h"
#include "trainer/hdf5_shard.h"
#include "trainer/prepare_data.h"
#include "trainer/trainer.h"

namespace trainer_test {
namespace fs = std::filesystem;
using dskc_test::TempDir;

// Shards of the shipped corpus: vocab 1000, seq 32, 5 predictions per sample. Prepared on
// first use, removed when the process exits.
inline const std::string& corpus_shards() {
  static TempDir dir;
  static const std::string path = [] {
    dskc::PrepareDataOptions o;
    o.inputs = {dskc_test::source_dir() + "/examples/corpus"};
    o.output_dir = dir / "shards";
    o.vocab_size = 1000;
    o.max_seq_length = 32;
    o.max_predictions_per_seq = 5;
    o.dupe_factor = 1;
    o.samples_per_shard = 1000;
    o.seed = 3;
    dskc::prepare_data(o);
    return o.output_dir;
  }();
  return path;
}

struct TinyModel {
  int vocab = 1000, hidden = 32, layers = 2, heads = 2, intermediate = 64, max_pos = 64;
  double dropout = 0.1;
  bool pre_ln = true;
};

inline std::string write_model_config(const std::string& path, const TinyModel& m) {
  dskc_test::write_file(path, "{\"vocab_size\": " + std::to_string(m.vocab) + ", \"hidden_size\": " +
                                  std::to_string(m.hidden) + ", \"num_hidden_layers\": " + std::to_string(m.layers) +
                                  ", \"num_attention_heads\": " + std::to_string(m.heads) +
                                  ", \"intermediate_size\": " + std::to_string(m.intermediate) +
                                  ", \"hidden_act\": \"gelu\", \"hidden_dropout_prob\": " + std::to_string(m.dropout) +
                                  ", \"attention_probs_dropout_prob\": " + std::to_string(m.dropout) +
                                  ", \"max_position_embeddings\": " + std::to_string(m.max_pos) +
                                  ", \"type_vocab_size\": 2, \"initializer_range\": 0.02, \"pre_layer_norm\": " +
                                  (m.pre_ln ? "true" : "false") + "}");
  return path;
}

// A DeepSpeed config: batch sizes, Adam, optional fp16 section (given as JSON text or "").
inline std::string write_ds_config(const std::string& path, int train_batch, int micro, const std::string& fp16 = "",
                                   double lr = 1e-3, const std::string& extra = "") {
  std::string s = "{\"train_batch_size\": " + std::to_string(train_batch) +
                  ", \"train_micro_batch_size_per_gpu\": " + std::to_string(micro) +
                  ", \"steps_per_print\": 1000, \"optimizer\": {\"type\": \"Adam\", \"params\": {\"lr\": " +
                  std::to_string(lr) + ", \"weight_decay\": 0.01, \"max_grad_norm\": 1.0}}";
  if (!fp16.empty()) s += ", \"fp16\": " + fp16;
  if (!extra.empty()) s += ", " + extra;
  s += "}";
  dskc_test::write_file(path, s);
  return path;
}

// Options for a quiet run on the CPU backend.
inline dskc::TrainOptions base_options(const std::string& ds, const std::string& cf, const std::string& data,
                                       const std::string& out, int64_t steps, int seq = 32) {
  dskc::TrainOptions o;
  o.deepspeed_config = ds;
  o.model_config = cf;
  o.data_dir = data;
  o.output_dir = out;
  o.max_seq_length = seq;
  o.max_steps = steps;
  o.backend = "cpu";
  o.transformer_kernel = true;
  o.plot = false;
  o.log = [](const std::string&) {};
  return o;
}

// N random samples of length seq, each with exactly `preds` predictions (positions 1..preds),
// written as one shard in dir.
inline void write_synthetic_shard(const std::string& dir, int n, int seq, int preds, int vocab, uint64_t seed) {
  dskc::PretrainShard s;
  s.num_samples = n;
  s.seq_len = seq;
  s.max_pred = preds + 2;  // two padding slots
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::uniform_int_distribution<int> tok(5, vocab - 1);
  for (int i = 0; i < n; ++i) {
    const int len = seq - (i % 3) * 4;  // some padding
    for (int t = 0; t < seq; ++t) {
      s.input_ids.push_back(t < len ? (t == 0 ? 2 : tok(rng)) : 0);
      s.input_mask.push_back(t < len ? 1 : 0);
      s.segment_ids.push_back(t < len && t > len / 2 ? 1 : 0);
    }
    for (int k = 0; k < s.max_pred; ++k) {
      s.masked_lm_positions.push_back(k < preds ? 1 + 2 * k : 0);
      s.masked_lm_ids.push_back(k < preds ? tok(rng) : 0);
    }
    s.next_sentence_labels.push_back(static_cast<int32_t>(rng() & 1));
  }
  fs::create_directories(dir);
  dskc::write_shard(dir + "/shard_00000.hdf5", s);
}

template <class F>
dskc::Error error_of(F&& f) {
  try {
    f();
  } catch (const dskc::Error& e) {
    return e;
  }
  FAIL("expected a dskc::Error");
  return dskc::Error(dskc::ErrorKind::Internal, "");
}

inline bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// Every file under dir with its bytes (for "left untouched" checks).
inline std::map<std::string, std::string> snapshot(const std::string& dir) {
  std::map<std::string, std::string> m;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) m[fs::relative(e.path(), dir).string()] = dskc_test::read_file(e.path().string());
  return m;
}

}  // namespace trainer_test
