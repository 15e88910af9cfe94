// BERT BasicTokenizer + WordPiece (see wordpiece.h), vocab I/O and the vocab builder.
// The Unicode tables below are generated from Python's unicodedata (Unicode 14) and cover
// only what BERT's tokenizer asks about; see wordpiece.h for what falls outside them.
#include "trainer/wordpiece.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <queue>
#include <set>
#include <system_error>

#include "compiler/errors.h"

namespace dskc {
namespace {

struct Range {
  char32_t lo, hi;
};

template <size_t N>
bool in_ranges(const Range (&table)[N], char32_t c) {
  // Tables are sorted and disjoint: binary search for the last range starting at or before c.
  auto it = std::upper_bound(std::begin(table), std::end(table), c,
                             [](char32_t x, const Range& r) { return x < r.lo; });
  return it != std::begin(table) && c <= (it - 1)->hi;
}

// Unicode general category P* (punctuation) above ASCII.
// clang-format off
constexpr Range kPunctuation[] = {
    {0xA1, 0xA1}, {0xA7, 0xA7}, {0xAB, 0xAB}, {0xB6, 0xB7}, {0xBB, 0xBB}, {0xBF, 0xBF},
    {0x37E, 0x37E}, {0x387, 0x387}, {0x55A, 0x55F}, {0x589, 0x58A}, {0x5BE, 0x5BE}, {0x5C0, 0x5C0},
    {0x5C3, 0x5C3}, {0x5C6, 0x5C6}, {0x5F3, 0x5F4}, {0x609, 0x60A}, {0x60C, 0x60D}, {0x61B, 0x61B},
    {0x61D, 0x61F}, {0x66A, 0x66D}, {0x6D4, 0x6D4}, {0x700, 0x70D}, {0x7F7, 0x7F9}, {0x830, 0x83E},
    {0x85E, 0x85E}, {0x964, 0x965}, {0x970, 0x970}, {0x9FD, 0x9FD}, {0xA76, 0xA76}, {0xAF0, 0xAF0},
    {0xC77, 0xC77}, {0xC84, 0xC84}, {0xDF4, 0xDF4}, {0xE4F, 0xE4F}, {0xE5A, 0xE5B}, {0xF04, 0xF12},
    {0xF14, 0xF14}, {0xF3A, 0xF3D}, {0xF85, 0xF85}, {0xFD0, 0xFD4}, {0xFD9, 0xFDA},
    {0x104A, 0x104F}, {0x10FB, 0x10FB}, {0x1360, 0x1368}, {0x1400, 0x1400}, {0x166E, 0x166E},
    {0x169B, 0x169C}, {0x16EB, 0x16ED}, {0x1735, 0x1736}, {0x17D4, 0x17D6}, {0x17D8, 0x17DA},
    {0x1800, 0x180A}, {0x1944, 0x1945}, {0x1A1E, 0x1A1F}, {0x1AA0, 0x1AA6}, {0x1AA8, 0x1AAD},
    {0x1B5A, 0x1B60}, {0x1B7D, 0x1B7E}, {0x1BFC, 0x1BFF}, {0x1C3B, 0x1C3F}, {0x1C7E, 0x1C7F},
    {0x1CC0, 0x1CC7}, {0x1CD3, 0x1CD3}, {0x2010, 0x2027}, {0x2030, 0x2043}, {0x2045, 0x2051},
    {0x2053, 0x205E}, {0x207D, 0x207E}, {0x208D, 0x208E}, {0x2308, 0x230B}, {0x2329, 0x232A},
    {0x2768, 0x2775}, {0x27C5, 0x27C6}, {0x27E6, 0x27EF}, {0x2983, 0x2998}, {0x29D8, 0x29DB},
    {0x29FC, 0x29FD}, {0x2CF9, 0x2CFC}, {0x2CFE, 0x2CFF}, {0x2D70, 0x2D70}, {0x2E00, 0x2E2E},
    {0x2E30, 0x2E4F}, {0x2E52, 0x2E5D}, {0x3001, 0x3003}, {0x3008, 0x3011}, {0x3014, 0x301F},
    {0x3030, 0x3030}, {0x303D, 0x303D}, {0x30A0, 0x30A0}, {0x30FB, 0x30FB}, {0xA4FE, 0xA4FF},
    {0xA60D, 0xA60F}, {0xA673, 0xA673}, {0xA67E, 0xA67E}, {0xA6F2, 0xA6F7}, {0xA874, 0xA877},
    {0xA8CE, 0xA8CF}, {0xA8F8, 0xA8FA}, {0xA8FC, 0xA8FC}, {0xA92E, 0xA92F}, {0xA95F, 0xA95F},
    {0xA9C1, 0xA9CD}, {0xA9DE, 0xA9DF}, {0xAA5C, 0xAA5F}, {0xAADE, 0xAADF}, {0xAAF0, 0xAAF1},
    {0xABEB, 0xABEB}, {0xFD3E, 0xFD3F}, {0xFE10, 0xFE19}, {0xFE30, 0xFE52}, {0xFE54, 0xFE61},
    {0xFE63, 0xFE63}, {0xFE68, 0xFE68}, {0xFE6A, 0xFE6B}, {0xFF01, 0xFF03}, {0xFF05, 0xFF0A},
    {0xFF0C, 0xFF0F}, {0xFF1A, 0xFF1B}, {0xFF1F, 0xFF20}, {0xFF3B, 0xFF3D}, {0xFF3F, 0xFF3F},
    {0xFF5B, 0xFF5B}, {0xFF5D, 0xFF5D}, {0xFF5F, 0xFF65}, {0x10100, 0x10102}, {0x1039F, 0x1039F},
    {0x103D0, 0x103D0}, {0x1056F, 0x1056F}, {0x10857, 0x10857}, {0x1091F, 0x1091F},
    {0x1093F, 0x1093F}, {0x10A50, 0x10A58}, {0x10A7F, 0x10A7F}, {0x10AF0, 0x10AF6},
    {0x10B39, 0x10B3F}, {0x10B99, 0x10B9C}, {0x10EAD, 0x10EAD}, {0x10F55, 0x10F59},
    {0x10F86, 0x10F89}, {0x11047, 0x1104D}, {0x110BB, 0x110BC}, {0x110BE, 0x110C1},
    {0x11140, 0x11143}, {0x11174, 0x11175}, {0x111C5, 0x111C8}, {0x111CD, 0x111CD},
    {0x111DB, 0x111DB}, {0x111DD, 0x111DF}, {0x11238, 0x1123D}, {0x112A9, 0x112A9},
    {0x1144B, 0x1144F}, {0x1145A, 0x1145B}, {0x1145D, 0x1145D}, {0x114C6, 0x114C6},
    {0x115C1, 0x115D7}, {0x11641, 0x11643}, {0x11660, 0x1166C}, {0x116B9, 0x116B9},
    {0x1173C, 0x1173E}, {0x1183B, 0x1183B}, {0x11944, 0x11946}, {0x119E2, 0x119E2},
    {0x11A3F, 0x11A46}, {0x11A9A, 0x11A9C}, {0x11A9E, 0x11AA2}, {0x11C41, 0x11C45},
    {0x11C70, 0x11C71}, {0x11EF7, 0x11EF8}, {0x11FFF, 0x11FFF}, {0x12470, 0x12474},
    {0x12FF1, 0x12FF2}, {0x16A6E, 0x16A6F}, {0x16AF5, 0x16AF5}, {0x16B37, 0x16B3B},
    {0x16B44, 0x16B44}, {0x16E97, 0x16E9A}, {0x16FE2, 0x16FE2}, {0x1BC9F, 0x1BC9F},
    {0x1DA87, 0x1DA8B}, {0x1E95E, 0x1E95F},
};

// Unicode Cc and Cf (controls and format characters) other than tab, LF, CR.
constexpr Range kControl[] = {
    {0x0, 0x8},         {0xB, 0xC},         {0xE, 0x1F},        {0x7F, 0x9F},       {0xAD, 0xAD},
    {0x600, 0x605},     {0x61C, 0x61C},     {0x6DD, 0x6DD},     {0x70F, 0x70F},     {0x890, 0x891},
    {0x8E2, 0x8E2},     {0x180E, 0x180E},   {0x200B, 0x200F},   {0x202A, 0x202E},   {0x2060, 0x2064},
    {0x2066, 0x206F},   {0xFEFF, 0xFEFF},   {0xFFF9, 0xFFFB},   {0x110BD, 0x110BD}, {0x110CD, 0x110CD},
    {0x13430, 0x13438}, {0x1BCA0, 0x1BCA3}, {0x1D173, 0x1D17A}, {0xE0001, 0xE0001}, {0xE0020, 0xE007F},
};

// Unicode Zs (space separators); tab, LF and CR are whitespace too.
constexpr Range kSpace[] = {{0x20, 0x20},     {0xA0, 0xA0},     {0x1680, 0x1680}, {0x2000, 0x200A},
                            {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}};

// The CJK Unified Ideograph blocks of Google's _is_chinese_char (Hangul and kana are not in it).
constexpr Range kCjk[] = {{0x3400, 0x4DBF},   {0x4E00, 0x9FFF},   {0xF900, 0xFAFF},   {0x20000, 0x2A6DF},
                          {0x2A700, 0x2B73F}, {0x2B740, 0x2B81F}, {0x2B820, 0x2CEAF}, {0x2F800, 0x2FA1F}};

// Combining marks dropped by accent stripping (the blocks of Mn marks that NFD produces for
// Latin, Greek and Cyrillic letters).
constexpr Range kCombining[] = {{0x300, 0x36F}, {0x1AB0, 0x1AFF}, {0x1DC0, 0x1DFF}, {0x20D0, 0x20FF},
                                {0xFE20, 0xFE2F}};

// strip_accents(lower(c)) for U+00C0..U+017F, e.g. U+00C9 'É' -> 'e', U+0141 'Ł' -> U+0142 'ł'
// (letters without a decomposition keep their own lower-case form).
constexpr char16_t kFoldLatin[] = {
    0x061, 0x061, 0x061, 0x061, 0x061, 0x061, 0x0E6, 0x063, 0x065, 0x065, 0x065, 0x065, 0x069, 0x069, 0x069, 0x069,  // U+00C0
    0x0F0, 0x06E, 0x06F, 0x06F, 0x06F, 0x06F, 0x06F, 0x0D7, 0x0F8, 0x075, 0x075, 0x075, 0x075, 0x079, 0x0FE, 0x0DF,  // U+00D0
    0x061, 0x061, 0x061, 0x061, 0x061, 0x061, 0x0E6, 0x063, 0x065, 0x065, 0x065, 0x065, 0x069, 0x069, 0x069, 0x069,  // U+00E0
    0x0F0, 0x06E, 0x06F, 0x06F, 0x06F, 0x06F, 0x06F, 0x0F7, 0x0F8, 0x075, 0x075, 0x075, 0x075, 0x079, 0x0FE, 0x079,  // U+00F0
    0x061, 0x061, 0x061, 0x061, 0x061, 0x061, 0x063, 0x063, 0x063, 0x063, 0x063, 0x063, 0x063, 0x063, 0x064, 0x064,  // U+0100
    0x111, 0x111, 0x065, 0x065, 0x065, 0x065, 0x065, 0x065, 0x065, 0x065, 0x065, 0x065, 0x067, 0x067, 0x067, 0x067,  // U+0110
    0x067, 0x067, 0x067, 0x067, 0x068, 0x068, 0x127, 0x127, 0x069, 0x069, 0x069, 0x069, 0x069, 0x069, 0x069, 0x069,  // U+0120
    0x069, 0x131, 0x133, 0x133, 0x06A, 0x06A, 0x06B, 0x06B, 0x138, 0x06C, 0x06C, 0x06C, 0x06C, 0x06C, 0x06C, 0x140,  // U+0130
    0x140, 0x142, 0x142, 0x06E, 0x06E, 0x06E, 0x06E, 0x06E, 0x06E, 0x149, 0x14B, 0x14B, 0x06F, 0x06F, 0x06F, 0x06F,  // U+0140
    0x06F, 0x06F, 0x153, 0x153, 0x072, 0x072, 0x072, 0x072, 0x072, 0x072, 0x073, 0x073, 0x073, 0x073, 0x073, 0x073,  // U+0150
    0x073, 0x073, 0x074, 0x074, 0x074, 0x074, 0x167, 0x167, 0x075, 0x075, 0x075, 0x075, 0x075, 0x075, 0x075, 0x075,  // U+0160
    0x075, 0x075, 0x075, 0x075, 0x077, 0x077, 0x079, 0x079, 0x079, 0x07A, 0x07A, 0x07A, 0x07A, 0x07A, 0x07A, 0x17F,  // U+0170
};

// clang-format on

bool is_whitespace(char32_t c) { return c == '\t' || c == '\n' || c == '\r' || in_ranges(kSpace, c); }
bool is_control(char32_t c) { return c != '\t' && c != '\n' && c != '\r' && in_ranges(kControl, c); }
bool is_cjk(char32_t c) { return c >= 0x3400 && in_ranges(kCjk, c); }
bool is_punctuation(char32_t c) {
  // Google treats every ASCII non-letter/number symbol as punctuation ("$", "^", "`", ...).
  if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126))
    return true;
  return c >= 0x80 && in_ranges(kPunctuation, c);
}

// lower() then strip_accents() for one code point; 0 means "drop it" (a combining mark).
char32_t fold(char32_t c) {
  if (c < 0x80) return c >= 'A' && c <= 'Z' ? c + 32 : c;
  if (c >= 0xC0 && c <= 0x17F) return kFoldLatin[c - 0xC0];
  if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 0x20;  // Greek capitals
  if (c >= 0x410 && c <= 0x42F) return c + 0x20;                // Cyrillic А..Я
  if (c >= 0x400 && c <= 0x40F) return c + 0x50;                // Cyrillic Ѐ..Џ
  if (in_ranges(kCombining, c)) return 0;
  return c;
}

std::vector<std::u32string> split_whitespace(const std::u32string& s) {
  std::vector<std::u32string> out;
  std::u32string cur;
  for (char32_t c : s) {
    if (is_whitespace(c)) {
      if (!cur.empty()) out.push_back(std::move(cur));
      cur.clear();
    } else {
      cur.push_back(c);
    }
  }
  if (!cur.empty()) out.push_back(std::move(cur));
  return out;
}

void write_atomically(const std::string& path, const std::string& text) {
  namespace fs = std::filesystem;
  fs::path target(path);
  fs::path tmp = (target.has_parent_path() ? target.parent_path() : fs::path(".")) /
                 fmt::format(".{}.tmp-{}", target.filename().string(), ::getpid());
  {
    std::ofstream f(tmp, std::ios::binary);
    f << text;
    f.flush();
    if (!f) {
      std::error_code ec;
      fs::remove(tmp, ec);
      throw Error(ErrorKind::Io, fmt::format("{}: cannot write (disk full or no permission?)", path));
    }
  }
  std::error_code ec;
  fs::rename(tmp, target, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw Error(ErrorKind::Io, fmt::format("{}: cannot write: {}", path, ec.message()));
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// UTF-8

std::u32string utf8_decode(const std::string& s) {
  std::u32string out;
  out.reserve(s.size());
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  for (size_t i = 0; i < n;) {
    unsigned char b = p[i];
    int len = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 0;
    if (len == 0 || i + len > n) {  // stray continuation byte, bad lead byte or cut sequence
      ++i;
      continue;
    }
    char32_t c = len == 1 ? b : len == 2 ? (b & 0x1F) : len == 3 ? (b & 0x0F) : (b & 0x07);
    bool ok = true;
    for (int k = 1; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) ok = false;
      c = (c << 6) | (p[i + k] & 0x3F);
    }
    static constexpr char32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (!ok || c < kMin[len] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) {
      ++i;  // overlong, surrogate or out of range: drop the lead byte, resync on the next
      continue;
    }
    out.push_back(c);
    i += len;
  }
  return out;
}

std::string utf8_encode(const std::u32string& s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) {
    if (c < 0x80) {
      out.push_back(static_cast<char>(c));
    } else if (c < 0x800) {
      out.push_back(static_cast<char>(0xC0 | (c >> 6)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else if (c < 0x10000) {
      out.push_back(static_cast<char>(0xE0 | (c >> 12)));
      out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xF0 | (c >> 18)));
      out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Vocab

Vocab::Vocab(std::vector<std::string> tokens) : tokens_(std::move(tokens)) {
  for (size_t i = 0; i < tokens_.size(); ++i) ids_[tokens_[i]] = static_cast<int>(i);
}

Vocab Vocab::load(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw Error(ErrorKind::Input, fmt::format("{}: no such vocab file", path));
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(ErrorKind::Input, fmt::format("{}: cannot open vocab file", path));
  std::vector<std::string> tokens;
  std::string line;
  while (std::getline(f, line)) {
    // Google strips the whole token; only trailing whitespace (incl. CR) is meaningful here.
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t'))
      line.pop_back();
    size_t start = line.find_first_not_of(" \t");
    tokens.push_back(start == std::string::npos ? std::string() : line.substr(start));
  }
  if (f.bad()) throw Error(ErrorKind::Input, fmt::format("{}: read error", path));
  if (tokens.empty()) throw Error(ErrorKind::Input, fmt::format("{}: vocab file is empty", path));
  Vocab v(std::move(tokens));
  v.origin_ = path;
  return v;
}

void Vocab::save(const std::string& path) const {
  std::string text;
  for (const auto& t : tokens_) text += t + "\n";
  write_atomically(path, text);
}

int Vocab::find(const std::string& token) const {
  auto it = ids_.find(token);
  return it == ids_.end() ? -1 : it->second;
}

int Vocab::id(const std::string& token) const {
  int i = find(token);
  if (i < 0) throw Error(ErrorKind::Input, fmt::format("{}: has no {} token", origin_, token));
  return i;
}

// ---------------------------------------------------------------------------------------------
// Tokenizers

std::vector<std::string> basic_tokenize(const std::string& text, const TokenizerOptions& opt) {
  // _clean_text and _tokenize_chinese_chars.
  std::u32string clean;
  for (char32_t c : utf8_decode(text)) {
    if (c == 0 || c == 0xFFFD || is_control(c)) continue;
    if (is_whitespace(c)) {
      clean.push_back(' ');
    } else if (is_cjk(c)) {
      clean.push_back(' ');
      clean.push_back(c);
      clean.push_back(' ');
    } else {
      clean.push_back(c);
    }
  }
  std::vector<std::string> out;
  for (const auto& token : split_whitespace(clean)) {
    std::u32string word;
    if (opt.lower_case) {
      for (char32_t c : token)
        if (char32_t f = fold(c)) word.push_back(f);
    } else {
      word = token;
    }
    // _run_split_on_punc: every punctuation mark is its own token.
    std::u32string cur;
    for (char32_t c : word) {
      if (is_punctuation(c)) {
        if (!cur.empty()) out.push_back(utf8_encode(cur));
        cur.clear();
        out.push_back(utf8_encode(std::u32string(1, c)));
      } else {
        cur.push_back(c);
      }
    }
    if (!cur.empty()) out.push_back(utf8_encode(cur));
  }
  return out;
}

std::vector<std::string> wordpiece_tokenize(const std::string& word, const Vocab& vocab,
                                            const TokenizerOptions& opt) {
  std::u32string chars = utf8_decode(word);
  if (chars.empty()) return {};
  if (static_cast<int>(chars.size()) > opt.max_input_chars_per_word) return {"[UNK]"};
  // Byte offset of each code point, to cut substrings of `word` without re-encoding.
  std::vector<size_t> offset(chars.size() + 1, 0);
  std::string enc = utf8_encode(chars);
  for (size_t i = 0, b = 0; i < chars.size(); ++i) {
    offset[i] = b;
    b += chars[i] < 0x80 ? 1 : chars[i] < 0x800 ? 2 : chars[i] < 0x10000 ? 3 : 4;
  }
  offset[chars.size()] = enc.size();
  std::vector<std::string> pieces;
  size_t start = 0;
  std::string candidate;
  while (start < chars.size()) {
    size_t end = chars.size();
    bool found = false;
    while (start < end) {
      candidate = start > 0 ? "##" : "";
      candidate.append(enc, offset[start], offset[end] - offset[start]);
      if (vocab.contains(candidate)) {
        found = true;
        break;
      }
      --end;
    }
    if (!found) return {"[UNK]"};
    pieces.push_back(candidate);
    start = end;
  }
  return pieces;
}

FullTokenizer::FullTokenizer(const Vocab& vocab, TokenizerOptions opt)
    : vocab_(vocab), opt_(opt), unk_id_(vocab.id("[UNK]")) {}

std::vector<std::string> FullTokenizer::tokenize(const std::string& text) const {
  std::vector<std::string> out;
  for (const auto& word : basic_tokenize(text, opt_))
    for (auto& piece : wordpiece_tokenize(word, vocab_, opt_)) out.push_back(std::move(piece));
  return out;
}

std::vector<int32_t> FullTokenizer::convert_tokens_to_ids(const std::vector<std::string>& tokens) const {
  std::vector<int32_t> ids;
  ids.reserve(tokens.size());
  for (const auto& t : tokens) {
    int i = vocab_.find(t);
    ids.push_back(i < 0 ? unk_id_ : i);
  }
  return ids;
}

std::vector<int32_t> FullTokenizer::encode(const std::string& text) const {
  return convert_tokens_to_ids(tokenize(text));
}

// ---------------------------------------------------------------------------------------------
// Vocab builder (byte-pair-style merges over WordPiece symbols; see wordpiece.h)

Vocab build_vocab(const std::vector<std::string>& texts, int vocab_size, const TokenizerOptions& opt) {
  std::map<std::string, int64_t> word_counts;  // ordered: the result must not depend on hashing
  for (const auto& text : texts)
    for (auto& w : basic_tokenize(text, opt)) ++word_counts[w];
  if (word_counts.empty()) throw Error(ErrorKind::Input, "cannot build a vocab: the corpus holds no words");

  std::set<char32_t> initial, inner;
  std::vector<std::pair<std::u32string, int64_t>> words;
  for (const auto& [w, n] : word_counts) {
    std::u32string cs = utf8_decode(w);
    for (size_t i = 0; i < cs.size(); ++i) (i == 0 ? initial : inner).insert(cs[i]);
    if (static_cast<int>(cs.size()) <= opt.max_input_chars_per_word) words.emplace_back(std::move(cs), n);
  }
  std::set<char32_t> all = initial;
  all.insert(inner.begin(), inner.end());

  std::vector<std::string> tokens = special_tokens();
  std::map<std::string, int> symbol_of;  // token text -> symbol id (index into sym_text)
  std::vector<std::string> sym_text;
  auto add_symbol = [&](const std::string& t) {
    auto [it, fresh] = symbol_of.emplace(t, static_cast<int>(sym_text.size()));
    if (fresh) {
      sym_text.push_back(t);
      tokens.push_back(t);
    }
    return it->second;
  };
  for (char32_t c : all) add_symbol(utf8_encode(std::u32string(1, c)));
  for (char32_t c : inner) add_symbol("##" + utf8_encode(std::u32string(1, c)));
  if (static_cast<int>(tokens.size()) > vocab_size)
    throw Error(ErrorKind::Usage,
                fmt::format("vocab size {} is too small: the corpus has {} distinct characters, so the vocab "
                            "needs at least {} tokens",
                            vocab_size, all.size(), tokens.size()));

  // Each word as a sequence of symbols.
  std::vector<std::vector<int>> seqs(words.size());
  for (size_t w = 0; w < words.size(); ++w)
    for (size_t i = 0; i < words[w].first.size(); ++i)
      seqs[w].push_back(symbol_of.at((i ? "##" : "") + utf8_encode(std::u32string(1, words[w].first[i]))));

  auto key = [](int a, int b) { return (static_cast<uint64_t>(a) << 32) | static_cast<uint32_t>(b); };
  std::unordered_map<uint64_t, int64_t> pair_count;
  std::unordered_map<uint64_t, std::vector<uint32_t>> pair_words;
  for (size_t w = 0; w < seqs.size(); ++w)
    for (size_t i = 0; i + 1 < seqs[w].size(); ++i) {
      uint64_t k = key(seqs[w][i], seqs[w][i + 1]);
      pair_count[k] += words[w].second;
      pair_words[k].push_back(static_cast<uint32_t>(w));
    }
  // Max-heap on (count, then smaller key) with lazy deletion: an entry is live only while
  // its count equals pair_count.
  using Entry = std::pair<int64_t, uint64_t>;
  auto cmp = [](const Entry& x, const Entry& y) {
    return x.first != y.first ? x.first < y.first : x.second > y.second;
  };
  std::priority_queue<Entry, std::vector<Entry>, decltype(cmp)> heap(cmp);
  for (const auto& [k, n] : pair_count) heap.push({n, k});

  std::vector<uint32_t> stamp(seqs.size(), 0);
  uint32_t round = 0;
  while (static_cast<int>(tokens.size()) < vocab_size && !heap.empty()) {
    auto [n, k] = heap.top();
    heap.pop();
    auto it = pair_count.find(k);
    if (it == pair_count.end() || it->second != n) continue;  // stale
    if (n < 2) break;
    int a = static_cast<int>(k >> 32), b = static_cast<int>(k & 0xffffffffu);
    const std::string& tb = sym_text[b];
    int merged = add_symbol(sym_text[a] + tb.substr(2));  // b is always a "##" symbol
    ++round;
    std::set<uint64_t> changed;
    std::vector<uint32_t> affected = std::move(pair_words[k]);
    pair_words.erase(k);
    for (uint32_t w : affected) {
      if (stamp[w] == round) continue;
      stamp[w] = round;
      auto& s = seqs[w];
      const int64_t f = words[w].second;
      std::vector<int> next;
      next.reserve(s.size());
      for (size_t i = 0; i < s.size(); ++i) {
        if (i + 1 < s.size() && s[i] == a && s[i + 1] == b) {
          next.push_back(merged);
          ++i;
        } else {
          next.push_back(s[i]);
        }
      }
      if (next.size() == s.size()) continue;
      for (size_t i = 0; i + 1 < s.size(); ++i) {
        uint64_t old = key(s[i], s[i + 1]);
        pair_count[old] -= f;
        changed.insert(old);
      }
      for (size_t i = 0; i + 1 < next.size(); ++i) {
        uint64_t nk = key(next[i], next[i + 1]);
        pair_count[nk] += f;
        changed.insert(nk);
        if (nk != k) pair_words[nk].push_back(w);
      }
      s = std::move(next);
    }
    for (uint64_t c : changed) {
      auto pc = pair_count.find(c);
      if (pc->second > 0)
        heap.push({pc->second, c});
      else
        pair_count.erase(pc);
    }
  }
  return Vocab(std::move(tokens));
}

}  // namespace dskc
