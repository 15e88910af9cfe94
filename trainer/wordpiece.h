// BERT's tokenizer: BasicTokenizer (clean-up, CJK, lower-casing, accent stripping,
// punctuation splitting) followed by WordPiece (greedy longest-match-first with "##"
// continuations), as in Google's tokenization.py; plus a vocab loader and a small vocab
// builder for corpora that come without one.
//
// Text is UTF-8; invalid bytes are dropped like U+FFFD. Unicode coverage follows Google's
// rules with built-in tables: punctuation = ASCII non-alphanumeric symbols plus Unicode
// category P*; controls = Cc/Cf (tab, CR, LF count as whitespace); lower-casing covers
// ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic; accent stripping maps Latin-1 and
// Latin Extended-A letters to their base letter and drops combining diacritical marks
// (U+0300-036F and the other combining-mark blocks). Letters outside those tables pass
// through unchanged (Google's NFD would also decompose e.g. Vietnamese or Greek tonos).
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace dskc {

struct TokenizerOptions {
  bool lower_case = true;              // also strips accents, as BERT's uncased models do
  int max_input_chars_per_word = 100;  // longer words become [UNK]
};

// The special tokens every BERT vocab built here starts with, in this order ([PAD] = 0).
inline const std::vector<std::string>& special_tokens() {
  static const std::vector<std::string> k = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
  return k;
}

class Vocab {
 public:
  Vocab() = default;
  explicit Vocab(std::vector<std::string> tokens);
  // One token per line (trailing whitespace stripped); the line number is the id. A missing,
  // unreadable or empty file is Error(Input) naming it.
  static Vocab load(const std::string& path);
  // Writes one token per line, atomically (temp file + rename).
  void save(const std::string& path) const;

  int size() const { return static_cast<int>(tokens_.size()); }
  const std::vector<std::string>& tokens() const { return tokens_; }
  const std::string& token(int id) const { return tokens_.at(static_cast<size_t>(id)); }
  bool contains(const std::string& token) const { return ids_.count(token) != 0; }
  // -1 when absent.
  int find(const std::string& token) const;
  // Error(Input) naming the vocab's origin when absent (e.g. "vocab.txt: has no [MASK] token").
  int id(const std::string& token) const;
  const std::string& origin() const { return origin_; }

 private:
  std::vector<std::string> tokens_;
  std::unordered_map<std::string, int> ids_;  // a repeated token maps to its last line, as in BERT
  std::string origin_ = "vocab";
};

// Google's BasicTokenizer: words and punctuation marks.
std::vector<std::string> basic_tokenize(const std::string& text, const TokenizerOptions& opt = {});
// WordPiece of one basic token: pieces ("un", "##want", ...) or {"[UNK]"}.
std::vector<std::string> wordpiece_tokenize(const std::string& word, const Vocab& vocab,
                                            const TokenizerOptions& opt = {});

// basic_tokenize then wordpiece_tokenize. Keeps a reference: `vocab` must outlive it.
class FullTokenizer {
 public:
  explicit FullTokenizer(const Vocab& vocab, TokenizerOptions opt = {});
  std::vector<std::string> tokenize(const std::string& text) const;
  std::vector<int32_t> encode(const std::string& text) const;
  std::vector<int32_t> convert_tokens_to_ids(const std::vector<std::string>& tokens) const;
  const Vocab& vocab() const { return vocab_; }

 private:
  const Vocab& vocab_;
  TokenizerOptions opt_;
  int unk_id_;
};

// Builds a WordPiece vocab of at most vocab_size tokens from raw texts. What it does:
//  1. basic_tokenize every text and count word frequencies;
//  2. vocab = the special tokens, every character seen (ordered by code point), and "##c"
//     for every character seen inside a word: so any text tokenizes without [UNK];
//  3. fill the rest with byte-pair-style merges (as Hugging Face's WordPiece trainer does):
//     words start as [c1, ##c2, ##c3, ...]; repeatedly the most frequent adjacent pair
//     (ties: the earlier-created pair) becomes a new token ("t" + "##h" -> "th",
//     "##i" + "##n" -> "##in"), until the vocab is full or no pair occurs twice.
// Deterministic: the same texts give the same vocab. Error(Usage) when vocab_size is too
// small for the special tokens and characters, Error(Input) when the texts hold no word.
Vocab build_vocab(const std::vector<std::string>& texts, int vocab_size, const TokenizerOptions& opt = {});

// UTF-8 helpers shared with prepare_data: decode drops invalid bytes.
std::u32string utf8_decode(const std::string& s);
std::string utf8_encode(const std::u32string& s);

}  // namespace dskc
