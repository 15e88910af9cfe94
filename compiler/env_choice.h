// Environment switches with a fixed set of words (DSKC_ATTENTION, DSKC_ATTN_MASK, DSKC_ATTN_DQ,
// DSKC_LAYER_STREAMS): unset or "" is the default; any other word is an Error(Config) naming the
// variable, so a typo never passes silently.
#pragma once
#include <fmt/format.h>

#include <cstdlib>
#include <initializer_list>
#include <string>
#include <utility>

#include "compiler/errors.h"

namespace dskc {

// Unset or "" gives `fallback`; each word of `words` maps to its value; any other value throws
// Error(Config) "VAR=value: expected <expected>".
template <typename E>
E env_choice(const char* var, E fallback, std::initializer_list<std::pair<const char*, E>> words,
             const char* expected) {
  const char* v = std::getenv(var);
  const std::string s = v ? v : "";
  if (s.empty()) return fallback;
  for (const auto& [word, value] : words)
    if (s == word) return value;
  throw Error(ErrorKind::Config, fmt::format("{}={}: expected {}", var, s, expected));
}

}  // namespace dskc
