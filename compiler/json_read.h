// Small JSON reading helpers for dskc's config files (layer config, DeepSpeed JSON, BERT model
// config, trainer_state.json). Every problem is Error(Config) (Error(Io) for an unreadable
// file) whose message starts with the file it is about and names the key. Duplicate keys are
// rejected (nlohmann would silently keep the last one; DeepSpeed rejects them).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "compiler/errors.h"

namespace dskc::json_read {

using Json = nlohmann::json;

// Parses text; malformed JSON or a duplicate key is Error(kind) naming source:line:col.
Json parse(const std::string& text, const std::string& source, ErrorKind kind = ErrorKind::Config);
// Reads and parses a file that must hold a JSON object; `what` names it in messages.
Json parse_object_file(const std::string& path, const char* what, ErrorKind kind = ErrorKind::Config);

// "the string \"x\"", "the number 1.5", "true", "an array", ... for messages.
std::string describe(const Json& j);

// The value at `key`, or nullptr when absent or null.
const Json* find(const Json& obj, const std::string& key);

// Typed reads; `key` is the dotted name used in messages ("optimizer.params.lr").
int64_t get_int(const Json& v, const std::string& source, const std::string& key, int64_t lo, int64_t hi,
                ErrorKind kind = ErrorKind::Config);
double get_number(const Json& v, const std::string& source, const std::string& key,
                  ErrorKind kind = ErrorKind::Config);
bool get_bool(const Json& v, const std::string& source, const std::string& key, ErrorKind kind = ErrorKind::Config);
std::string get_string(const Json& v, const std::string& source, const std::string& key,
                       ErrorKind kind = ErrorKind::Config);

}  // namespace dskc::json_read
