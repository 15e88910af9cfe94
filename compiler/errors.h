// Errors for dskc. Two tiers (STYLE.md): UserError for input a user can fix (bad config, file,
// shape, flag) with an actionable message, and DSKC_ASSERT for internal invariants. Both stay
// on in release builds. The CLI maps ErrorKind to a documented exit code.
#pragma once
#include <stdexcept>
#include <string>

namespace dskc {

enum class ErrorKind {
  Usage = 2,      // bad command line
  Config = 3,     // bad layer / DeepSpeed / model config
  Input = 4,      // bad tensor file, data shard, checkpoint, shape
  Compile = 5,    // NVRTC failure
  Device = 6,     // no GPU, CUDA / cuBLAS / NCCL failure
  Io = 7,         // cannot read or write a file
  Internal = 70,  // a dskc bug
};

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const { return kind_; }
  int exit_code() const { return static_cast<int>(kind_); }

 private:
  ErrorKind kind_;
};

[[noreturn]] void throw_internal(const char* expr, const char* file, int line, const std::string& msg);

}  // namespace dskc

#define DSKC_ASSERT(cond, msg)                                         \
  do {                                                                 \
    if (!(cond)) ::dskc::throw_internal(#cond, __FILE__, __LINE__, msg); \
  } while (0)
