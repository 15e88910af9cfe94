// prepare-data on the shipped corpus (examples/corpus): shards readable by read_shard and
// ShardDataset with BERT's layout ([CLS] A [SEP] B [SEP], segment ids, padding), ~15%
// predictions with the 80/10/10 replacement split, about half random next sentences,
// deterministic output; clear errors for bad input; and the CLI end to end.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "compiler/errors.h"
#include "tests/test_util.h"
#include "trainer/hdf5_shard.h"
#include "trainer/prepare_data.h"
#include "trainer/wordpiece.h"

using dskc::ErrorKind;
using dskc_test::TempDir;

namespace {

std::string corpus_dir() { return dskc_test::source_dir() + "/examples/corpus"; }

dskc::PrepareDataOptions corpus_options(const std::string& out) {
  dskc::PrepareDataOptions o;
  o.inputs = {corpus_dir()};
  o.output_dir = out;
  o.vocab_size = 4000;
  o.dupe_factor = 2;
  o.samples_per_shard = 1000;
  o.seed = 7;
  return o;
}

template <class F>
dskc::Error error_of(F&& f) {
  try {
    f();
  } catch (const dskc::Error& e) {
    return e;
  }
  FAIL("expected a dskc::Error");
  return dskc::Error(ErrorKind::Internal, "");
}

}  // namespace

TEST_CASE("sentence splitting of one-line documents") {
  using V = std::vector<std::string>;
  CHECK(dskc::split_sentences("One here. Two there! Three? \"Four.\" Five") ==
        V{"One here.", "Two there!", "Three?", "\"Four.\"", "Five"});
  CHECK(dskc::split_sentences("Mr. Smith met J. Doe, e.g. at 3.5 km. Then left.") ==
        V{"Mr. Smith met J. Doe, e.g. at 3.5 km.", "Then left."});
  CHECK(dskc::split_sentences("no capital. after this") == V{"no capital. after this"});
  CHECK(dskc::split_sentences("   ").empty());
}

TEST_CASE("prepare_data on the shipped corpus") {
  TempDir dir;
  std::vector<std::string> log;
  auto opt = corpus_options(dir / "out");
  opt.progress = [&](const std::string& l) { log.push_back(l); };
  dskc::PrepareDataResult r = dskc::prepare_data(opt);
  CHECK(r.documents >= 40);
  CHECK(r.sentences >= 2000);
  CHECK(r.samples > 1000);
  CHECK(r.shards.size() == static_cast<size_t>((r.samples + 999) / 1000));
  CHECK(r.vocab_file == dir / "out/vocab.txt");
  CHECK(log.size() >= 3);

  dskc::Vocab vocab = dskc::Vocab::load(r.vocab_file);
  CHECK(vocab.size() == 4000);
  const int32_t cls = vocab.id("[CLS]"), sep = vocab.id("[SEP]"), mask = vocab.id("[MASK]");
  const int32_t pad = vocab.id("[PAD]"), unk = vocab.id("[UNK]");
  CHECK(pad == 0);

  int64_t samples = 0, tokens = 0, predictions = 0, as_mask = 0, kept = 0, random_nsp = 0, short_ones = 0;
  for (const auto& path : r.shards) {
    dskc::PretrainShard sh = dskc::read_shard(path);
    REQUIRE(sh.seq_len == 128);
    REQUIRE(sh.max_pred == 20);
    for (int64_t n = 0; n < sh.num_samples; ++n) {
      const int32_t* ids = &sh.input_ids[n * 128];
      const int32_t* m = &sh.input_mask[n * 128];
      const int32_t* seg = &sh.segment_ids[n * 128];
      const int32_t* pos = &sh.masked_lm_positions[n * 20];
      const int32_t* lab = &sh.masked_lm_ids[n * 20];
      int len = 0;
      while (len < 128 && m[len]) ++len;
      for (int t = len; t < 128; ++t) {  // padding
        REQUIRE(m[t] == 0);
        REQUIRE(ids[t] == 0);
        REQUIRE(seg[t] == 0);
      }
      REQUIRE(ids[0] == cls);
      REQUIRE(ids[len - 1] == sep);
      std::vector<int> seps;
      for (int t = 0; t < len; ++t)
        if (ids[t] == sep) seps.push_back(t);
      REQUIRE(seps.size() == 2);
      REQUIRE(seps[0] >= 2);            // A is not empty
      REQUIRE(seps[1] >= seps[0] + 2);  // B is not empty
      for (int t = 0; t < len; ++t) REQUIRE(seg[t] == (t > seps[0] ? 1 : 0));
      int np = 0;
      while (np < 20 && pos[np] != 0) ++np;
      for (int k = np; k < 20; ++k) REQUIRE((pos[k] == 0 && lab[k] == 0));
      const int expect = std::min(20, std::max(1, static_cast<int>(std::nearbyint(len * 0.15))));
      REQUIRE(np == expect);
      for (int k = 0; k < np; ++k) {
        REQUIRE(pos[k] > 0);
        REQUIRE(pos[k] < len);
        if (k) REQUIRE(pos[k] > pos[k - 1]);
        REQUIRE(ids[pos[k]] != cls);
        REQUIRE(ids[pos[k]] != sep);
        REQUIRE(lab[k] != cls);
        REQUIRE(lab[k] != sep);
        REQUIRE(lab[k] != mask);
        REQUIRE(lab[k] != pad);
        as_mask += ids[pos[k]] == mask;
        kept += ids[pos[k]] == lab[k];  // unchanged: the input still holds the original token
      }
      for (int t = 1; t < len; ++t) {
        if (ids[t] != mask) continue;
        REQUIRE(std::find(pos, pos + np, t) != pos + np);  // [MASK] only where predicted
      }
      for (int t = 0; t < len; ++t) CHECK(ids[t] != unk);  // the built vocab covers the corpus
      samples += 1;
      tokens += len;
      predictions += np;
      random_nsp += sh.next_sentence_labels[n];
      short_ones += len < 100;
    }
  }
  CHECK(samples == r.samples);
  const double frac_pred = static_cast<double>(predictions) / tokens;
  const double frac_mask = static_cast<double>(as_mask) / predictions;
  const double frac_kept = static_cast<double>(kept) / predictions;
  const double frac_nsp = static_cast<double>(random_nsp) / samples;
  MESSAGE("samples ", samples, ", predicted ", frac_pred, ", [MASK] ", frac_mask, ", kept ", frac_kept,
          ", random next ", frac_nsp, ", short ", short_ones);
  CHECK(frac_pred > 0.14);
  CHECK(frac_pred < 0.16);
  CHECK(frac_mask > 0.77);
  CHECK(frac_mask < 0.83);
  CHECK(frac_kept > 0.08);  // 10% kept, plus the rare random pick of the same token
  CHECK(frac_kept < 0.12);
  CHECK(frac_nsp > 0.4);
  CHECK(frac_nsp < 0.62);
  CHECK(short_ones > 0);  // short_seq_prob and document ends

  // The trainer's reader takes the output as it is.
  dskc::ShardDataset ds(dir / "out", 128, 1);
  CHECK(ds.total_samples() == static_cast<uint64_t>(r.samples));
  CHECK(ds.next_batch(8).input_ids[0] == cls);
}

TEST_CASE("prepare_data is deterministic and reuses a given vocab") {
  TempDir dir;
  auto a = corpus_options(dir / "a");
  a.dupe_factor = 1;
  auto ra = dskc::prepare_data(a);
  auto b = a;
  b.output_dir = dir / "b";
  b.vocab_size = 0;
  b.vocab_file = ra.vocab_file;
  auto rb = dskc::prepare_data(b);
  REQUIRE(ra.shards.size() == rb.shards.size());
  for (size_t i = 0; i < ra.shards.size(); ++i)
    CHECK(dskc_test::read_file(ra.shards[i]) == dskc_test::read_file(rb.shards[i]));
  CHECK_FALSE(std::filesystem::exists(dir / "b/vocab.txt"));

  auto c = b;
  c.output_dir = dir / "c";
  c.seed = 8;
  auto rc = dskc::prepare_data(c);
  CHECK(dskc_test::read_file(rc.shards[0]) != dskc_test::read_file(ra.shards[0]));

  // A second run into the same directory must be asked for, and replaces the shards.
  auto e = error_of([&] { dskc::prepare_data(b); });
  CHECK(std::string(e.what()).find("already holds") != std::string::npos);
  b.overwrite = true;
  b.samples_per_shard = 100000;
  auto rb2 = dskc::prepare_data(b);
  CHECK(rb2.shards.size() == 1);
  int shards = 0;
  for (const auto& f : std::filesystem::directory_iterator(dir / "b"))
    shards += f.path().extension() == ".hdf5";
  CHECK(shards == 1);
}

TEST_CASE("prepare_data: bad input gives a clear error and writes nothing") {
  TempDir dir;
  auto opt = corpus_options(dir / "out");
  opt.inputs = {dir / "missing.txt"};
  auto e = error_of([&] { dskc::prepare_data(opt); });
  CHECK(e.kind() == ErrorKind::Input);
  CHECK(std::string(e.what()) == dir / "missing.txt" + ": no such input file or directory");

  dskc_test::write_file(dir / "blank.txt", "\n\n   \n\t\n");
  opt.inputs = {dir / "blank.txt"};
  e = error_of([&] { dskc::prepare_data(opt); });
  CHECK(e.kind() == ErrorKind::Input);
  CHECK(std::string(e.what()) == dir / "blank.txt" + ": empty corpus (no text found)");

  opt.inputs = {corpus_dir()};
  opt.max_seq_length = 4;
  e = error_of([&] { dskc::prepare_data(opt); });
  CHECK(e.kind() == ErrorKind::Usage);
  CHECK(std::string(e.what()).find("--max_seq_length 4 is out of range") != std::string::npos);

  opt = corpus_options(dir / "out");
  opt.vocab_size = 0;
  opt.vocab_file = dir / "nope.txt";
  e = error_of([&] { dskc::prepare_data(opt); });
  CHECK(std::string(e.what()) == dir / "nope.txt" + ": no such vocab file");

  dskc_test::write_file(dir / "v.txt", "[UNK]\nthe\n");
  opt.vocab_file = dir / "v.txt";
  e = error_of([&] { dskc::prepare_data(opt); });
  CHECK(std::string(e.what()) == dir / "v.txt" + ": has no [CLS] token");
  CHECK_FALSE(std::filesystem::exists(dir / "out"));
}

TEST_CASE("small corpus: one-line documents, a single document") {
  TempDir dir;
  dskc_test::write_file(dir / "one.txt",
                        "The first sentence is here. The second one follows it. A third closes the text.\n");
  dskc::PrepareDataOptions o;
  o.inputs = {dir / "one.txt"};
  o.output_dir = dir / "out";
  o.vocab_size = 200;
  o.max_seq_length = 16;
  o.max_predictions_per_seq = 3;
  auto r = dskc::prepare_data(o);
  CHECK(r.documents == 1);
  CHECK(r.sentences == 3);
  CHECK(r.samples > 0);
  auto sh = dskc::read_shard(r.shards[0]);
  CHECK(sh.seq_len == 16);
  CHECK(sh.max_pred == 3);
}

TEST_CASE("dskc prepare-data (CLI)") {
  TempDir dir;
  dskc_test::write_file(dir / "a.txt",
                        "Alpha beta gamma.\nDelta epsilon zeta.\n\nEta theta iota.\nKappa lambda mu.\n");
  auto r = dskc_test::run_dskc(
      "prepare-data --input " + dir / "a.txt" + " --input=" + corpus_dir() +
      "/debian_handbook.txt --output_dir " + dir / "out" +
      " --vocab_size 3000 --dupe_factor 1 --max_seq_length 64 --max_predictions_per_seq 10"
      " --samples_per_shard 500 --seed 3");
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(r.output.find("read ") != std::string::npos);
  CHECK(r.output.find("done: ") != std::string::npos);
  CHECK(dskc::read_shard(dir / "out/shard_00000.hdf5").seq_len == 64);
  CHECK(dskc::Vocab::load(dir / "out/vocab.txt").size() == 3000);

  r = dskc_test::run_dskc("prepare-data --input " + dir / "missing.txt" + " --output_dir " + dir / "o2" +
                          " --vocab_size 100");
  CHECK(r.exit_code == 4);
  CHECK(r.output.find(dir / "missing.txt") != std::string::npos);
  r = dskc_test::run_dskc("prepare-data --input " + dir / "a.txt" + " --output_dir " + dir / "o3" +
                          " --vocab_size 100 --max_seq_length 4");
  CHECK(r.exit_code == 2);
  r = dskc_test::run_dskc("prepare-data --input " + dir / "a.txt" + " --output_dir " + dir / "o4");
  CHECK(r.exit_code == 2);
  CHECK(r.output.find("--vocab") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir / "o3"));
  r = dskc_test::run_dskc("prepare-data --help");
  CHECK(r.exit_code == 0);
  CHECK(r.output.find("--max_predictions_per_seq") != std::string::npos);
}

TEST_CASE("whole-word masking masks every piece of a word") {
  TempDir dir;
  auto opt = corpus_options(dir / "out");
  opt.dupe_factor = 1;
  opt.vocab_size = 1500;  // small vocab: many words split into pieces
  opt.whole_word_mask = true;
  auto r = dskc::prepare_data(opt);
  dskc::Vocab vocab = dskc::Vocab::load(r.vocab_file);
  const int32_t cls = vocab.id("[CLS]"), sep = vocab.id("[SEP]");
  int64_t continuation_labels = 0;
  for (const auto& path : r.shards) {
    dskc::PretrainShard sh = dskc::read_shard(path);
    for (int64_t n = 0; n < sh.num_samples; ++n) {
      const int32_t* ids = &sh.input_ids[n * 128];
      const int32_t* pos = &sh.masked_lm_positions[n * 20];
      const int32_t* lab = &sh.masked_lm_ids[n * 20];
      int np = 0;
      while (np < 20 && pos[np] != 0) ++np;
      REQUIRE(np >= 1);
      for (int k = 0; k < np; ++k) {
        if (vocab.token(lab[k]).rfind("##", 0) != 0) continue;
        ++continuation_labels;
        int prev = pos[k] - 1;
        if (ids[prev] == cls || ids[prev] == sep) continue;  // B may start mid-word after truncation
        REQUIRE(k > 0);
        REQUIRE(pos[k - 1] == prev);
      }
    }
  }
  CHECK(continuation_labels > 100);
}
