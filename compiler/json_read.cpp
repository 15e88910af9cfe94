// JSON reading helpers (see json_read.h).
#include "compiler/json_read.h"

#include <fmt/format.h>

#include <set>
#include <vector>

#include "compiler/fileio.h"

namespace dskc::json_read {

Json parse(const std::string& text, const std::string& source, ErrorKind kind) {
  std::vector<std::set<std::string>> open_objects;
  auto callback = [&](int /*depth*/, Json::parse_event_t event, Json& parsed) {
    switch (event) {
      case Json::parse_event_t::object_start: open_objects.emplace_back(); break;
      case Json::parse_event_t::object_end:
        if (!open_objects.empty()) open_objects.pop_back();
        break;
      case Json::parse_event_t::key: {
        std::string key = parsed.get<std::string>();
        if (!open_objects.empty() && !open_objects.back().insert(key).second)
          throw Error(kind, fmt::format("{}: duplicate key '{}' (each key may appear once)", source, key));
        break;
      }
      default: break;
    }
    return true;
  };
  try {
    return Json::parse(text, callback);
  } catch (const Json::parse_error& e) {
    std::string detail = e.what();
    if (auto p = detail.find("] "); p != std::string::npos) detail = detail.substr(p + 2);
    size_t line = 1, col = 1;
    const size_t end = std::min(e.byte == 0 ? 0 : e.byte - 1, text.size());
    for (size_t i = 0; i < end; ++i) {
      if (text[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    throw Error(kind, fmt::format("{}:{}:{}: malformed JSON: {}", source, line, col, detail));
  }
}

Json parse_object_file(const std::string& path, const char* what, ErrorKind kind) {
  Json j = parse(read_file_bytes(path), path, kind);
  if (!j.is_object()) throw Error(kind, fmt::format("{}: a {} must be a JSON object, got {}", path, what, describe(j)));
  return j;
}

std::string describe(const Json& j) {
  switch (j.type()) {
    case Json::value_t::string: {
      std::string s = j.dump();
      if (s.size() > 40) s = s.substr(0, 37) + "...";
      return "the string " + s;
    }
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
    case Json::value_t::number_float: return "the number " + j.dump();
    case Json::value_t::boolean: return j.get<bool>() ? "true" : "false";
    case Json::value_t::null: return "null";
    case Json::value_t::array: return "an array";
    default: return "an object";
  }
}

const Json* find(const Json& obj, const std::string& key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

int64_t get_int(const Json& v, const std::string& source, const std::string& key, int64_t lo, int64_t hi,
                ErrorKind kind) {
  // DeepSpeed configs sometimes write integers as 1e3 or 64.0: accept integral floats.
  int64_t x = 0;
  if (v.is_number_integer()) {
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
      throw Error(kind, fmt::format("{}: {} = {} is out of range", source, key, v.dump()));
    x = v.get<int64_t>();
  } else if (v.is_number_float() && v.get<double>() == static_cast<double>(static_cast<int64_t>(v.get<double>()))) {
    x = static_cast<int64_t>(v.get<double>());
  } else {
    throw Error(kind, fmt::format("{}: {} must be an integer, got {}", source, key, describe(v)));
  }
  if (x < lo || x > hi)
    throw Error(kind, fmt::format("{}: {} = {} is out of range [{}, {}]", source, key, x, lo, hi));
  return x;
}

double get_number(const Json& v, const std::string& source, const std::string& key, ErrorKind kind) {
  if (!v.is_number()) throw Error(kind, fmt::format("{}: {} must be a number, got {}", source, key, describe(v)));
  return v.get<double>();
}

bool get_bool(const Json& v, const std::string& source, const std::string& key, ErrorKind kind) {
  if (!v.is_boolean())
    throw Error(kind, fmt::format("{}: {} must be true or false, got {}", source, key, describe(v)));
  return v.get<bool>();
}

std::string get_string(const Json& v, const std::string& source, const std::string& key, ErrorKind kind) {
  if (!v.is_string()) throw Error(kind, fmt::format("{}: {} must be a string, got {}", source, key, describe(v)));
  return v.get<std::string>();
}

}  // namespace dskc::json_read
