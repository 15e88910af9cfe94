// `dskc prepare-data`: plain text -> HDF5 pre-training shards. Thin: flags map onto
// PrepareDataOptions (trainer/prepare_data.h, which documents the algorithm); progress
// lines go to stdout. --input may be repeated, so it is collected before ArgParser runs.
#include <fmt/format.h>

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/commands.h"
#include "compiler/errors.h"
#include "trainer/prepare_data.h"

namespace dskc::cli {

int cmd_prepare_data(const Args& args) {
  PrepareDataOptions opt;
  // Pull out every --input (ArgParser keeps only the last value of an option).
  Args rest;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--input") {
      if (i + 1 >= args.size()) throw Error(ErrorKind::Usage, "dskc prepare-data: --input needs a value");
      opt.inputs.push_back(args[++i]);
    } else if (args[i].rfind("--input=", 0) == 0) {
      opt.inputs.push_back(args[i].substr(8));
    } else {
      rest.push_back(args[i]);
    }
  }

  std::string unused_input, lower = "true";
  std::optional<int> vocab_size, max_seq, max_pred, dupe, per_shard, seed;
  std::optional<double> mlm_prob, short_prob;
  bool wwm = false, overwrite = false;
  ArgParser p("prepare-data",
              "Make HDF5 pre-training shards (NVIDIA/DeepSpeed BERT format) from plain text: documents\n"
              "separated by blank lines, one sentence per line. Follows Google BERT's\n"
              "create_pretraining_data (NSP pairs, 15% masking with 80/10/10 replacement).");
  p.add_option("input", &unused_input, "FILE_OR_DIR", "text file, or directory of *.txt (repeatable)");
  p.add_option("output_dir", &opt.output_dir, "DIR", "where shard_00000.hdf5, ... are written");
  p.add_option("vocab", &opt.vocab_file, "FILE", "WordPiece vocab.txt (one token per line)");
  p.add_int("vocab_size", &vocab_size, "build a vocab of N tokens from the input, written to DIR/vocab.txt");
  p.add_int("max_seq_length", &max_seq, "tokens per sample incl. [CLS]/[SEP] (default 128)");
  p.add_int("max_predictions_per_seq", &max_pred, "masked-LM predictions per sample (default 20)");
  p.add_double("masked_lm_prob", &mlm_prob, "fraction of tokens to predict (default 0.15)");
  p.add_int("dupe_factor", &dupe, "passes over the corpus, each with new masks (default 10)");
  p.add_double("short_seq_prob", &short_prob, "probability of a shorter target length (default 0.1)");
  p.add_int("seed", &seed, "random seed (default 12345)");
  p.add_int("samples_per_shard", &per_shard, "samples per HDF5 file (default 8192)");
  p.add_option("do_lower_case", &lower, "true|false", "lower-case and strip accents (default true)");
  p.add_switch("do_whole_word_mask", &wwm, "mask all WordPiece pieces of a word together");
  p.add_switch("overwrite", &overwrite, "replace shard files already in --output_dir");
  if (!p.parse(rest)) return 0;

  if (lower != "true" && lower != "false")
    throw Error(ErrorKind::Usage, fmt::format("--do_lower_case expects true or false, got '{}'", lower));
  opt.lower_case = lower == "true";
  if (vocab_size) {
    if (*vocab_size < 1)
      throw Error(ErrorKind::Usage, fmt::format("--vocab_size {} must be positive", *vocab_size));
    opt.vocab_size = *vocab_size;
  }
  if (max_seq) opt.max_seq_length = *max_seq;
  if (max_pred) opt.max_predictions_per_seq = *max_pred;
  if (mlm_prob) opt.masked_lm_prob = *mlm_prob;
  if (dupe) opt.dupe_factor = *dupe;
  if (short_prob) opt.short_seq_prob = *short_prob;
  if (seed) opt.seed = static_cast<uint64_t>(static_cast<int64_t>(*seed));
  if (per_shard) opt.samples_per_shard = *per_shard;
  opt.whole_word_mask = wwm;
  opt.overwrite = overwrite;
  opt.progress = [](const std::string& line) {
    std::printf("prepare-data: %s\n", line.c_str());
    std::fflush(stdout);
  };

  PrepareDataResult r = prepare_data(opt);
  std::printf("prepare-data: done: %lld samples in %zu shards under %s (vocab %s, %d tokens)\n",
              static_cast<long long>(r.samples), r.shards.size(), opt.output_dir.c_str(),
              r.vocab_file.c_str(), r.vocab_size);
  return 0;
}

}  // namespace dskc::cli
