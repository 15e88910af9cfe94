// BERT tokenizer: the cases of Google's tokenization_test.py, plus accents, punctuation,
// CJK, control characters, invalid UTF-8, vocab loading and the vocab builder.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "compiler/errors.h"
#include "tests/test_util.h"
#include "trainer/wordpiece.h"

using dskc::basic_tokenize;
using dskc::Vocab;
using Tokens = std::vector<std::string>;

namespace {
dskc::TokenizerOptions cased() {
  dskc::TokenizerOptions o;
  o.lower_case = false;
  return o;
}
}  // namespace

TEST_CASE("full tokenizer (Google's test_full_tokenizer)") {
  Vocab v({"[UNK]", "[CLS]", "[SEP]", "want", "##want", "##ed", "wa", "un", "runn", "##ing", ","});
  dskc::FullTokenizer tok(v);
  Tokens t = tok.tokenize("UNwant\u00E9d,running");
  CHECK(t == Tokens{"un", "##want", "##ed", ",", "runn", "##ing"});
  CHECK(tok.convert_tokens_to_ids(t) == std::vector<int32_t>{7, 4, 5, 10, 8, 9});
  CHECK(tok.encode("UNwant\u00E9d,running") == std::vector<int32_t>{7, 4, 5, 10, 8, 9});
}

TEST_CASE("basic tokenizer (Google's tests)") {
  CHECK(basic_tokenize("ah\u535A\u63A8zz") == Tokens{"ah", "\u535A", "\u63A8", "zz"});
  CHECK(basic_tokenize(" \tHeLLo!how  \n Are yoU?  ") == Tokens{"hello", "!", "how", "are", "you", "?"});
  CHECK(basic_tokenize("H\u00E9llo") == Tokens{"hello"});
  CHECK(basic_tokenize(" \tHeLLo!how  \n Are yoU?  ", cased()) ==
        Tokens{"HeLLo", "!", "how", "Are", "yoU", "?"});
  CHECK(basic_tokenize("").empty());
  CHECK(basic_tokenize("  \t\n ").empty());
}

TEST_CASE("wordpiece (Google's test_wordpiece_tokenizer)") {
  Vocab v({"[UNK]", "[CLS]", "[SEP]", "want", "##want", "##ed", "wa", "un", "runn", "##ing"});
  dskc::FullTokenizer tok(v);
  CHECK(tok.tokenize("").empty());
  CHECK(tok.tokenize("unwanted running") == Tokens{"un", "##want", "##ed", "runn", "##ing"});
  CHECK(tok.tokenize("unwantedX running") == Tokens{"[UNK]", "runn", "##ing"});
  CHECK(dskc::wordpiece_tokenize("wa", v) == Tokens{"wa"});
  CHECK(dskc::wordpiece_tokenize(std::string(101, 'a'), v) == Tokens{"[UNK]"});
  Vocab a({"[UNK]", "a", "##a"});
  CHECK(dskc::wordpiece_tokenize(std::string(100, 'a'), a).size() == 100);
}

TEST_CASE("accent stripping and lower-casing") {
  CHECK(basic_tokenize("\u00C5ngstr\u00F6m \u0141\u00F3d\u017A \u0152uvre na\u00EFve") ==
        Tokens{"angstrom", "\u0142odz", "\u0153uvre", "naive"});
  CHECK(basic_tokenize("Cr\u00E8me BR\u00DBL\u00C9E") == Tokens{"creme", "brulee"});
  // Decomposed input: combining marks are dropped.
  CHECK(basic_tokenize("Cafe\u0301") == Tokens{"cafe"});
  CHECK(basic_tokenize("\u0391\u0392\u0393 \u041F\u0440\u0438\u0432\u0435\u0442") ==
        Tokens{"\u03B1\u03B2\u03B3", "\u043F\u0440\u0438\u0432\u0435\u0442"});
  // Cased mode keeps accents and case.
  CHECK(basic_tokenize("Cr\u00E8me", cased()) == Tokens{"Cr\u00E8me"});
  CHECK(basic_tokenize("stra\u00DFe") == Tokens{"stra\u00DFe"});  // no decomposition: kept
}

TEST_CASE("punctuation, symbols, whitespace and control characters") {
  CHECK(basic_tokenize("don't stop-me (now)") == Tokens{"don", "'", "t", "stop", "-", "me", "(", "now", ")"});
  CHECK(basic_tokenize("$5 ^2 `x` ~y") == Tokens{"$", "5", "^", "2", "`", "x", "`", "~", "y"});
  CHECK(basic_tokenize("hello\u2014world \u00BFqu\u00E9?") ==
        Tokens{"hello", "\u2014", "world", "\u00BF", "que", "?"});
  CHECK(basic_tokenize("\u201Cquoted\u201D \u00ABguillemets\u00BB") ==
        Tokens{"\u201C", "quoted", "\u201D", "\u00AB", "guillemets", "\u00BB"});
  // Currency and math symbols are not punctuation in BERT (category S, not P).
  CHECK(basic_tokenize("\u20AC5 a\u00D7b") == Tokens{"\u20AC5", "a\u00D7b"});
  // No-break and ideographic spaces split; controls, zero-width and BOM vanish.
  CHECK(basic_tokenize("a\u00A0b\u3000c") == Tokens{"a", "b", "c"});
  CHECK(basic_tokenize("\xEF\xBB\xBFpre\x05"
                       "fix zero\u200Bwidth\x7F") == Tokens{"prefix", "zerowidth"});
  // Invalid UTF-8 bytes are dropped like U+FFFD.
  CHECK(basic_tokenize("ab\xFF\xC3 cd\xE2\x82 ef\uFFFD") == Tokens{"ab", "cd", "ef"});
  // CJK ideographs are single tokens; kana and hangul are not split (as in BERT).
  CHECK(basic_tokenize("\u4E2D\u6587abc\u3072\u3089\u304C\u306A") ==
        Tokens{"\u4E2D", "\u6587", "abc\u3072\u3089\u304C\u306A"});
  CHECK(basic_tokenize("x\U00020001y") == Tokens{"x", "\U00020001", "y"});
  CHECK(dskc::utf8_encode(dskc::utf8_decode("h\u00E9\u4E2D\U0001F600")) == "h\u00E9\u4E2D\U0001F600");
}

TEST_CASE("vocab file") {
  dskc_test::TempDir dir;
  std::string path = dir / "vocab.txt";
  dskc_test::write_file(path, "[PAD]\r\n[UNK]\r\n[CLS]\r\n[SEP]\r\n[MASK]\r\nthe  \r\n##s\r\n");
  Vocab v = Vocab::load(path);
  CHECK(v.size() == 7);
  CHECK(v.id("[PAD]") == 0);
  CHECK(v.id("[MASK]") == 4);
  CHECK(v.id("the") == 5);
  CHECK(v.token(6) == "##s");
  CHECK(v.find("nope") == -1);
  auto e = [&](auto f) -> std::string {
    try {
      f();
    } catch (const dskc::Error& err) {
      CHECK(err.kind() == dskc::ErrorKind::Input);
      return err.what();
    }
    FAIL("expected an error");
    return "";
  };
  CHECK(e([&] { v.id("[NOPE]"); }) == path + ": has no [NOPE] token");
  CHECK(e([&] { Vocab::load(dir / "missing.txt"); }) == dir / "missing.txt" + ": no such vocab file");
  dskc_test::write_file(dir / "empty.txt", "");
  CHECK(e([&] { Vocab::load(dir / "empty.txt"); }) == dir / "empty.txt" + ": vocab file is empty");
  Vocab google({"[UNK]", "want"});
  CHECK(e([&] { google.id("[MASK]"); }).find("has no [MASK] token") != std::string::npos);

  v.save(dir / "copy.txt");
  CHECK(Vocab::load(dir / "copy.txt").tokens() == v.tokens());
}

TEST_CASE("vocab builder") {
  std::vector<std::string> texts = {
      "The quick brown fox jumps over the lazy dog.",
      "The dog sleeps; the fox runs away quickly.",
      "Jumping foxes and sleeping dogs: the end of the story!",
      "Caf\u00E9 owners serve the coffee, and the dogs wait.",
  };
  // 5 special tokens + 31 characters + 23 "##" characters = 59 leave room for 21 merges.
  Vocab v = dskc::build_vocab(texts, 80);
  CHECK(v.size() == 80);
  const auto& sp = dskc::special_tokens();
  for (size_t i = 0; i < sp.size(); ++i) CHECK(v.token(static_cast<int>(i)) == sp[i]);
  CHECK(v.id("[PAD]") == 0);
  CHECK(v.contains("e"));
  CHECK(v.contains("##e"));
  CHECK(v.contains("the"));  // the most frequent word becomes one token
  CHECK(v.contains("."));
  CHECK_FALSE(v.contains("\u00E9"));  // accents stripped before building
  dskc::FullTokenizer tok(v);
  for (const auto& t : texts) {
    for (const auto& piece : tok.tokenize(t)) CHECK(piece != "[UNK]");
  }
  CHECK(tok.tokenize("the") == Tokens{"the"});
  // Deterministic, and a larger budget only adds tokens.
  CHECK(dskc::build_vocab(texts, 80).tokens() == v.tokens());
  Vocab big = dskc::build_vocab(texts, 100000);
  CHECK(big.size() > v.size());
  CHECK(std::vector<std::string>(big.tokens().begin(), big.tokens().begin() + v.size()) == v.tokens());

  try {
    dskc::build_vocab(texts, 20);
    FAIL("expected an error");
  } catch (const dskc::Error& e) {
    CHECK(e.kind() == dskc::ErrorKind::Usage);
    CHECK(std::string(e.what()).find("vocab size 20 is too small") != std::string::npos);
  }
  CHECK_THROWS_AS(dskc::build_vocab({"", "   "}, 100), dskc::Error);
}
