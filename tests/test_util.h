// Helpers for tests: temp dirs, running the dskc binary, reading files, GPU skip.
#pragma once
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "compiler/errors.h"
#include "compiler/scoped_env.h"
#include <sys/wait.h>
#include <unistd.h>

namespace dskc_test {
namespace fs = std::filesystem;

inline std::string source_dir() { return DSKC_SOURCE_DIR; }
inline std::string dskc_binary() { return DSKC_BINARY; }

// A fresh directory under the build tree's temp dir, removed at scope exit.
struct TempDir {
  fs::path path;
  TempDir() {
    static int counter = 0;
    path = fs::temp_directory_path() /
           ("dskc-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

inline std::string read_file(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}
inline void write_file(const std::string& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary);
  f << text;
}

struct RunResult {
  int exit_code;
  std::string output;  // stdout + stderr
};
// Runs `dskc <args>` through the shell; args are passed verbatim (quote them yourself).
inline RunResult run_dskc(const std::string& args, const std::string& env = "") {
  TempDir tmp;
  std::string out = tmp / "out.txt";
  std::string cmd = env + " " + dskc_binary() + " " + args + " >" + out + " 2>&1";
  int rc = std::system(cmd.c_str());
  int code = WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
  return {code, read_file(out)};
}

// Sets or unsets an environment variable for one scope, restoring the old value after.
using dskc::ScopedEnv;

// Runs f, requires it to throw dskc::Error of `kind`, returns the message.
template <class F>
std::string error_of(F&& f, dskc::ErrorKind kind) {
  try {
    f();
  } catch (const dskc::Error& e) {
    CHECK(static_cast<int>(e.kind()) == static_cast<int>(kind));
    return e.what();
  }
  FAIL("no dskc::Error was thrown");
  return "";
}

}  // namespace dskc_test
