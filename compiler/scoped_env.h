// An environment variable set (or unset) for one scope and restored after: the tests' switches, and
// `dskc bench --versus`, which builds its second layer under DSKC_* variables (the plan and the
// runtime read them when a layer is built, so the first layer keeps what the process had).
#pragma once
#include <cstdlib>
#include <optional>
#include <string>

namespace dskc {

struct ScopedEnv {
  std::string name;
  std::optional<std::string> old;
  ScopedEnv(const char* n, const char* value) : name(n) {
    if (const char* v = std::getenv(n)) old = v;
    if (value)
      ::setenv(n, value, 1);
    else
      ::unsetenv(n);
  }
  ~ScopedEnv() {
    if (old)
      ::setenv(name.c_str(), old->c_str(), 1);
    else
      ::unsetenv(name.c_str());
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
};

}  // namespace dskc
