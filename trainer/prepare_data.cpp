// prepare_data: plain text -> HDF5 pre-training shards (algorithm in prepare_data.h).
// Mirrors Google's create_pretraining_data.py step by step (names in comments refer to
// it); the RNG is our own splitmix64 stream, so outputs are reproducible across platforms
// but not bit-identical to the Python script's.
#include "trainer/prepare_data.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "compiler/errors.h"
#include "trainer/hdf5_shard.h"

namespace dskc {
namespace fs = std::filesystem;

namespace {

// splitmix64: tiny, fast, and the same on every platform (unlike std::*_distribution).
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t next() {
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  // Uniform integer in [lo, hi], like Python's random.randint.
  int64_t randint(int64_t lo, int64_t hi) {
    auto span = static_cast<uint64_t>(hi - lo) + 1;
    return lo + static_cast<int64_t>((static_cast<unsigned __int128>(next()) * span) >> 64);
  }
  template <class T>
  void shuffle(std::vector<T>& v) {
    for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[static_cast<size_t>(randint(0, i - 1))]);
  }

 private:
  uint64_t s_;
};

using Sentence = std::vector<int32_t>;
using Document = std::vector<Sentence>;

struct Instance {
  std::vector<int32_t> tokens;  // [CLS] A [SEP] B [SEP], after masking
  size_t len_a = 0;             // tokens[len_a + 2 ..] have segment id 1
  std::vector<int32_t> positions, labels;
  bool random_next = false;
};

struct Ctx {
  const PrepareDataOptions& opt;
  const Vocab& vocab;
  int32_t cls, sep, mask;
  std::vector<int32_t> random_ids;  // replacement candidates for the 10% random case
};

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n\f\v");
  if (b == std::string::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t\r\n\f\v") - b + 1);
}

// truncate_seq_pair: drop tokens from the front or back of the longer segment.
void truncate_pair(std::vector<int32_t>& a, std::vector<int32_t>& b, size_t max_tokens, Rng& rng) {
  while (a.size() + b.size() > max_tokens) {
    auto& t = a.size() > b.size() ? a : b;
    if (rng.uniform() < 0.5)
      t.erase(t.begin());
    else
      t.pop_back();
  }
}

// create_masked_lm_predictions.
void mask_tokens(Instance& inst, const Ctx& c, Rng& rng) {
  std::vector<std::vector<size_t>> cand;
  for (size_t i = 0; i < inst.tokens.size(); ++i) {
    int32_t t = inst.tokens[i];
    if (t == c.cls || t == c.sep) continue;
    bool cont = c.opt.whole_word_mask && !cand.empty() && cand.back().back() + 1 == i &&
                c.vocab.token(t).rfind("##", 0) == 0;
    if (cont)
      cand.back().push_back(i);
    else
      cand.push_back({i});
  }
  rng.shuffle(cand);
  const auto num_to_predict = static_cast<size_t>(std::min<double>(
      c.opt.max_predictions_per_seq,
      std::max(1.0, std::nearbyint(static_cast<double>(inst.tokens.size()) * c.opt.masked_lm_prob))));
  std::vector<std::pair<size_t, int32_t>> masked;  // (position, original id)
  std::vector<int32_t> out = inst.tokens;
  for (const auto& set : cand) {
    if (masked.size() >= num_to_predict) break;
    if (masked.size() + set.size() > num_to_predict) continue;
    for (size_t idx : set) {
      int32_t replacement;
      if (rng.uniform() < 0.8) {
        replacement = c.mask;
      } else if (rng.uniform() < 0.5) {
        replacement = inst.tokens[idx];
      } else {
        replacement =
            c.random_ids[static_cast<size_t>(rng.randint(0, static_cast<int64_t>(c.random_ids.size()) - 1))];
      }
      out[idx] = replacement;
      masked.emplace_back(idx, inst.tokens[idx]);
    }
  }
  std::sort(masked.begin(), masked.end());
  inst.tokens = std::move(out);
  for (const auto& [pos, id] : masked) {
    inst.positions.push_back(static_cast<int32_t>(pos));
    inst.labels.push_back(id);
  }
}

// create_instances_from_document.
void instances_from_document(const std::vector<Document>& docs, size_t di, const Ctx& c, Rng& rng,
                             std::vector<Instance>& out) {
  const Document& doc = docs[di];
  const int64_t max_num_tokens = c.opt.max_seq_length - 3;
  // Mostly fill the sequence; sometimes (short_seq_prob) aim shorter so the model also
  // sees short inputs.
  int64_t target = max_num_tokens;
  if (rng.uniform() < c.opt.short_seq_prob) target = rng.randint(2, max_num_tokens);

  std::vector<const Sentence*> chunk;
  int64_t chunk_len = 0;
  for (size_t i = 0; i < doc.size(); ++i) {
    chunk.push_back(&doc[i]);
    chunk_len += static_cast<int64_t>(doc[i].size());
    if (i + 1 != doc.size() && chunk_len < target) continue;
    size_t a_end = 1;
    if (chunk.size() >= 2)
      a_end = static_cast<size_t>(rng.randint(1, static_cast<int64_t>(chunk.size()) - 1));
    std::vector<int32_t> a, b;
    for (size_t j = 0; j < a_end; ++j) a.insert(a.end(), chunk[j]->begin(), chunk[j]->end());
    bool random_next = chunk.size() == 1 || rng.uniform() < 0.5;
    if (random_next) {
      const int64_t target_b = target - static_cast<int64_t>(a.size());
      // Up to 10 tries for another document (a corpus of one document uses itself).
      size_t rdi = di;
      for (int t = 0; t < 10; ++t) {
        rdi = static_cast<size_t>(rng.randint(0, static_cast<int64_t>(docs.size()) - 1));
        if (rdi != di) break;
      }
      const Document& rd = docs[rdi];
      for (auto j = static_cast<size_t>(rng.randint(0, static_cast<int64_t>(rd.size()) - 1)); j < rd.size();
           ++j) {
        b.insert(b.end(), rd[j].begin(), rd[j].end());
        if (static_cast<int64_t>(b.size()) >= target_b) break;
      }
      // The sentences of this chunk that B did not use go back to the document.
      i -= chunk.size() - a_end;
    } else {
      for (size_t j = a_end; j < chunk.size(); ++j) b.insert(b.end(), chunk[j]->begin(), chunk[j]->end());
    }
    truncate_pair(a, b, static_cast<size_t>(max_num_tokens), rng);
    DSKC_ASSERT(!a.empty() && !b.empty(), "empty segment after truncation");

    Instance inst;
    inst.tokens.reserve(a.size() + b.size() + 3);
    inst.tokens.push_back(c.cls);
    inst.tokens.insert(inst.tokens.end(), a.begin(), a.end());
    inst.tokens.push_back(c.sep);
    inst.tokens.insert(inst.tokens.end(), b.begin(), b.end());
    inst.tokens.push_back(c.sep);
    inst.len_a = a.size();
    inst.random_next = random_next;
    mask_tokens(inst, c, rng);
    out.push_back(std::move(inst));
    chunk.clear();
    chunk_len = 0;
  }
}

void check_options(const PrepareDataOptions& o) {
  auto usage = [](const std::string& m) { throw Error(ErrorKind::Usage, m); };
  if (o.inputs.empty()) usage("no input given (--input FILE_OR_DIR)");
  if (o.output_dir.empty()) usage("no output directory given (--output_dir DIR)");
  if (o.vocab_file.empty() == (o.vocab_size <= 0))
    usage("give exactly one of --vocab FILE (an existing vocab) or --vocab_size N (build one)");
  if (o.max_seq_length < 8 || o.max_seq_length > 65536)
    usage(fmt::format("--max_seq_length {} is out of range [8, 65536]", o.max_seq_length));
  if (o.max_predictions_per_seq < 1 || o.max_predictions_per_seq > o.max_seq_length)
    usage(fmt::format("--max_predictions_per_seq {} is out of range [1, max_seq_length]",
                      o.max_predictions_per_seq));
  if (!(o.masked_lm_prob > 0 && o.masked_lm_prob <= 1))
    usage(fmt::format("--masked_lm_prob {} is out of range (0, 1]", o.masked_lm_prob));
  if (!(o.short_seq_prob >= 0 && o.short_seq_prob <= 1))
    usage(fmt::format("--short_seq_prob {} is out of range [0, 1]", o.short_seq_prob));
  if (o.dupe_factor < 1) usage(fmt::format("--dupe_factor {} must be at least 1", o.dupe_factor));
  if (o.samples_per_shard < 1)
    usage(fmt::format("--samples_per_shard {} must be at least 1", o.samples_per_shard));
}

// shard_<1..9 digits>.hdf5, the names step 6 writes.
bool is_shard_name(const std::string& name) {
  const std::string pre = "shard_", post = ".hdf5";
  if (name.size() <= pre.size() + post.size() || name.size() > pre.size() + 9 + post.size()) return false;
  if (name.compare(0, pre.size(), pre) != 0 ||
      name.compare(name.size() - post.size(), post.size(), post) != 0)
    return false;
  return std::all_of(name.begin() + pre.size(), name.end() - post.size(),
                     [](char ch) { return ch >= '0' && ch <= '9'; });
}

}  // namespace

std::vector<std::string> split_sentences(const std::string& text) {
  static const char* kAbbrev[] = {"mr", "mrs", "ms",  "dr",  "prof", "sr",  "jr",
                                  "st", "vs",  "e.g", "i.e", "cf",   "fig", "no"};
  std::vector<std::string> out;
  size_t start = 0;
  const size_t n = text.size();
  auto is_space = [](char ch) { return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r'; };
  for (size_t i = 0; i < n; ++i) {
    char ch = text[i];
    if (ch != '.' && ch != '!' && ch != '?') continue;
    size_t end = i + 1;
    while (end < n && (text[end] == '"' || text[end] == '\'' || text[end] == ')' || text[end] == ']')) ++end;
    // UTF-8 closing quotes ’ ” (E2 80 99 / E2 80 9D).
    while (end + 2 < n && static_cast<unsigned char>(text[end]) == 0xE2 &&
           static_cast<unsigned char>(text[end + 1]) == 0x80 &&
           (static_cast<unsigned char>(text[end + 2]) == 0x99 ||
            static_cast<unsigned char>(text[end + 2]) == 0x9D))
      end += 3;
    if (end >= n || !is_space(text[end])) continue;
    size_t next = end;
    while (next < n && is_space(text[next])) ++next;
    if (next >= n) continue;
    auto nc = static_cast<unsigned char>(text[next]);
    bool starts = (nc >= 'A' && nc <= 'Z') || (nc >= '0' && nc <= '9') || nc == '"' || nc == '\'' ||
                  nc == '(' || nc == '[' || nc >= 0x80;
    if (!starts) continue;
    if (ch == '.') {  // not after an initial ("J. Smith") or a common abbreviation
      size_t w = i;
      while (w > start && !is_space(text[w - 1])) --w;
      std::string word = text.substr(w, i - w);
      std::transform(word.begin(), word.end(), word.begin(), [](unsigned char x) { return std::tolower(x); });
      if (word.size() == 1 && std::isalpha(static_cast<unsigned char>(word[0]))) continue;
      if (std::find(std::begin(kAbbrev), std::end(kAbbrev), word) != std::end(kAbbrev)) continue;
    }
    std::string s = trim(text.substr(start, end - start));
    if (!s.empty()) out.push_back(std::move(s));
    start = next;
    i = next - 1;
  }
  std::string s = trim(text.substr(std::min(start, n)));
  if (!s.empty()) out.push_back(std::move(s));
  return out;
}

std::vector<std::string> list_input_files(const std::vector<std::string>& inputs) {
  std::vector<std::string> files;
  for (const auto& in : inputs) {
    std::error_code ec;
    if (fs::is_directory(in, ec)) {
      std::vector<std::string> found;
      for (const auto& e : fs::directory_iterator(in, ec))
        if (e.is_regular_file() && e.path().extension() == ".txt") found.push_back(e.path().string());
      if (found.empty()) throw Error(ErrorKind::Input, fmt::format("{}: directory has no *.txt files", in));
      std::sort(found.begin(), found.end());
      files.insert(files.end(), found.begin(), found.end());
    } else if (fs::is_regular_file(in, ec)) {
      files.push_back(in);
    } else {
      throw Error(ErrorKind::Input, fmt::format("{}: no such input file or directory", in));
    }
  }
  return files;
}

PrepareDataResult prepare_data(const PrepareDataOptions& opt) {
  check_options(opt);
  auto say = [&](const std::string& line) {
    if (opt.progress) opt.progress(line);
  };
  PrepareDataResult res;

  // 1. Documents as lists of sentence strings; each file starts a new document.
  const std::vector<std::string> files = list_input_files(opt.inputs);
  std::vector<std::vector<std::string>> texts;
  for (const auto& path : files) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw Error(ErrorKind::Input, fmt::format("{}: cannot open", path));
    texts.emplace_back();
    std::string line;
    while (std::getline(f, line)) {
      line = trim(line);
      if (line.empty()) {
        if (!texts.back().empty()) texts.emplace_back();
      } else {
        texts.back().push_back(std::move(line));
      }
    }
    if (f.bad()) throw Error(ErrorKind::Input, fmt::format("{}: read error", path));
    if (texts.back().empty()) texts.pop_back();
  }
  for (auto& doc : texts)
    if (doc.size() == 1) doc = split_sentences(doc[0]);  // one long line of running text
  std::string where = files.size() == 1 ? files[0] : fmt::format("{} input files", files.size());
  if (texts.empty()) throw Error(ErrorKind::Input, fmt::format("{}: empty corpus (no text found)", where));

  // 2. The vocab: given, or built from the corpus.
  TokenizerOptions topt;
  topt.lower_case = opt.lower_case;
  Vocab vocab;
  if (!opt.vocab_file.empty()) {
    vocab = Vocab::load(opt.vocab_file);
    res.vocab_file = opt.vocab_file;
  } else {
    std::vector<std::string> all;
    for (const auto& doc : texts) all.insert(all.end(), doc.begin(), doc.end());
    vocab = build_vocab(all, opt.vocab_size, topt);
    res.vocab_file = (fs::path(opt.output_dir) / "vocab.txt").string();
    say(vocab.size() < opt.vocab_size
            ? fmt::format(
                  "built a WordPiece vocab of {} tokens (of {} asked: no piece left that occurs twice)",
                  vocab.size(), opt.vocab_size)
            : fmt::format("built a WordPiece vocab of {} tokens", vocab.size()));
  }
  res.vocab_size = vocab.size();
  Ctx c{opt, vocab, vocab.id("[CLS]"), vocab.id("[SEP]"), vocab.id("[MASK]"), {}};
  for (int i = 0; i < vocab.size(); ++i) {
    const std::string& t = vocab.token(i);
    if (!(t.size() >= 2 && t.front() == '[' && t.back() == ']')) c.random_ids.push_back(i);
  }
  if (c.random_ids.empty())
    throw Error(ErrorKind::Input, fmt::format("{}: vocab has only special tokens", vocab.origin()));

  // 3. Tokenize.
  FullTokenizer tok(vocab, topt);
  std::vector<Document> docs;
  for (const auto& doc : texts) {
    Document d;
    for (const auto& s : doc) {
      Sentence ids = tok.encode(s);
      if (ids.empty()) continue;
      res.tokens += static_cast<int64_t>(ids.size());
      d.push_back(std::move(ids));
    }
    res.sentences += static_cast<int64_t>(d.size());
    if (!d.empty()) docs.push_back(std::move(d));
  }
  if (docs.empty()) throw Error(ErrorKind::Input, fmt::format("{}: empty corpus (no tokens)", where));
  res.documents = static_cast<int64_t>(docs.size());
  say(fmt::format("read {} documents, {} sentences, {} tokens from {} files", res.documents, res.sentences,
                  res.tokens, files.size()));

  // 4. Instances: dupe_factor passes over the shuffled documents, then one global shuffle.
  Rng rng(opt.seed);
  rng.shuffle(docs);
  std::vector<Instance> instances;
  for (int pass = 0; pass < opt.dupe_factor; ++pass)
    for (size_t di = 0; di < docs.size(); ++di) instances_from_document(docs, di, c, rng, instances);
  rng.shuffle(instances);
  res.samples = static_cast<int64_t>(instances.size());
  say(fmt::format("created {} samples ({} passes)", res.samples, opt.dupe_factor));

  // 5. Output directory: refuse to mix with an earlier run unless asked to replace it.
  std::error_code ec;
  fs::create_directories(opt.output_dir, ec);
  if (!fs::is_directory(opt.output_dir, ec))
    throw Error(ErrorKind::Io, fmt::format("{}: cannot create output directory", opt.output_dir));
  std::vector<std::string> old_shards;
  for (const auto& e : fs::directory_iterator(opt.output_dir, ec)) {
    std::string name = e.path().filename().string();
    if (is_shard_name(name)) old_shards.push_back(name);
  }
  if (!opt.overwrite && !old_shards.empty())
    throw Error(ErrorKind::Usage,
                fmt::format("{}: already holds {} shard files; use an empty directory or --overwrite",
                            opt.output_dir, old_shards.size()));
  if (!opt.overwrite && opt.vocab_file.empty() && fs::exists(res.vocab_file, ec))
    throw Error(ErrorKind::Usage,
                fmt::format("{}: already exists; use an empty directory or --overwrite", res.vocab_file));
  if (opt.vocab_file.empty()) vocab.save(res.vocab_file);

  // 6. Shards.
  const int S = opt.max_seq_length, P = opt.max_predictions_per_seq;
  for (size_t first = 0, k = 0; first < instances.size(); first += opt.samples_per_shard, ++k) {
    size_t n = std::min(instances.size() - first, static_cast<size_t>(opt.samples_per_shard));
    PretrainShard sh;
    sh.num_samples = static_cast<int64_t>(n);
    sh.seq_len = S;
    sh.max_pred = P;
    sh.input_ids.assign(n * S, 0);
    sh.input_mask.assign(n * S, 0);
    sh.segment_ids.assign(n * S, 0);
    sh.masked_lm_positions.assign(n * P, 0);
    sh.masked_lm_ids.assign(n * P, 0);
    sh.next_sentence_labels.assign(n, 0);
    for (size_t r = 0; r < n; ++r) {
      const Instance& in = instances[first + r];
      for (size_t t = 0; t < in.tokens.size(); ++t) {
        sh.input_ids[r * S + t] = in.tokens[t];
        sh.input_mask[r * S + t] = 1;
        sh.segment_ids[r * S + t] = t >= in.len_a + 2 ? 1 : 0;
      }
      std::copy(in.positions.begin(), in.positions.end(), sh.masked_lm_positions.begin() + r * P);
      std::copy(in.labels.begin(), in.labels.end(), sh.masked_lm_ids.begin() + r * P);
      sh.next_sentence_labels[r] = in.random_next ? 1 : 0;
    }
    std::string path = (fs::path(opt.output_dir) / fmt::format("shard_{:05d}.hdf5", k)).string();
    write_shard(path, sh);
    res.shards.push_back(path);
    say(fmt::format("wrote {} ({} samples, {}/{})", path, n, first + n, instances.size()));
  }
  // Shards of an earlier, larger run that were not replaced.
  for (const auto& name : old_shards)
    if (std::stoul(name.substr(6)) >= res.shards.size()) fs::remove(fs::path(opt.output_dir) / name, ec);
  return res;
}

}  // namespace dskc
