// `dskc prepare-data`: plain text -> HDF5 pre-training shards (hdf5_shard.h), following
// Google BERT's create_pretraining_data.py.
//
// Input text: documents separated by blank lines, one sentence per line; a document that
// is one long line is split into sentences at sentence-ending punctuation. A directory
// input means its *.txt files (sorted). For each of dupe_factor passes over the shuffled
// documents, chunks of sentences up to a target length become (A, B) pairs, B being the
// true continuation or (50%, always for a one-sentence chunk) text from a random other
// document; pairs are truncated to max_seq_length - 3 tokens and laid out as
// [CLS] A [SEP] B [SEP] with segment ids 0/1. Then 15% of the tokens (at most
// max_predictions_per_seq, at least one; never [CLS]/[SEP]) are predicted: 80% of them
// become [MASK], 10% a random vocab token (special "[...]" tokens excluded), 10% stay.
// Positions are sorted; unused slots hold position 0 / id 0, padding tokens id 0.
// All instances are shuffled and cut into DIR/shard_00000.hdf5, ... of samples_per_shard.
// Deterministic for a given seed. Nothing is written before the whole corpus has been
// read and turned into samples, and every file is written atomically.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "trainer/wordpiece.h"

namespace dskc {

struct PrepareDataOptions {
  std::vector<std::string> inputs;  // files or directories (of *.txt)
  std::string output_dir;
  std::string vocab_file;  // use this vocab, or else
  int vocab_size = 0;      // build one of this size from the input and write output_dir/vocab.txt
  int max_seq_length = 128;
  int max_predictions_per_seq = 20;
  double masked_lm_prob = 0.15;
  int dupe_factor = 10;
  double short_seq_prob = 0.1;
  uint64_t seed = 12345;
  int samples_per_shard = 8192;
  bool lower_case = true;
  bool whole_word_mask = false;                      // mask all pieces of a word together
  bool overwrite = false;                            // replace shard_*.hdf5 already in output_dir
  std::function<void(const std::string&)> progress;  // one line per call; may be empty
};

struct PrepareDataResult {
  int64_t documents = 0;
  int64_t sentences = 0;
  int64_t tokens = 0;
  int64_t samples = 0;
  std::vector<std::string> shards;
  std::string vocab_file;  // the vocab used (given or written)
  int vocab_size = 0;
};

PrepareDataResult prepare_data(const PrepareDataOptions& opt);

// Sentences of one line of running text: cut after '.', '!' or '?' (plus closing quotes or
// brackets) that is followed by whitespace and then an upper-case letter, digit, quote or
// bracket. Pieces are trimmed; empty ones dropped.
std::vector<std::string> split_sentences(const std::string& text);

// The input files `inputs` stands for (directories -> their *.txt, sorted). Error(Input)
// for a missing path or a directory with no *.txt file.
std::vector<std::string> list_input_files(const std::vector<std::string>& inputs);

}  // namespace dskc
