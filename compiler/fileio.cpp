// Whole-file read and atomic write (see fileio.h).
#include "compiler/fileio.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "compiler/errors.h"

namespace dskc {

std::string read_file_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(ErrorKind::Io, fmt::format("{}: cannot open for reading: {}", path, std::strerror(errno)));
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

namespace {
// Writes `bytes` to a fresh temp file beside `path`; returns the temp path.
std::string write_temp(const std::string& path, const std::string& bytes) {
  namespace fs = std::filesystem;
  fs::path p(path);
  fs::path dir = p.parent_path().empty() ? fs::path(".") : p.parent_path();
  std::random_device rd;
  fs::path tmp = dir / fmt::format(".{}.tmp-{}-{:x}", p.filename().string(), ::getpid(), rd());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (fd < 0) throw Error(ErrorKind::Io, fmt::format("{}: cannot write: {}", path, std::strerror(errno)));
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + off, bytes.size() - off);
    if (n < 0) {
      int e = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      throw Error(ErrorKind::Io, fmt::format("{}: write failed: {}", path, std::strerror(e)));
    }
    off += static_cast<size_t>(n);
  }
  ::fsync(fd);
  ::close(fd);
  return tmp.string();
}
}  // namespace

void write_file_atomic(const std::string& path, const std::string& bytes) { write_files_atomic({{path, bytes}}); }

void write_files_atomic(const std::vector<std::pair<std::string, std::string>>& files) {
  std::vector<std::string> temps;
  try {
    for (const auto& [path, bytes] : files) temps.push_back(write_temp(path, bytes));
  } catch (...) {
    for (const auto& t : temps) ::unlink(t.c_str());
    throw;
  }
  for (size_t i = 0; i < files.size(); ++i) {
    if (::rename(temps[i].c_str(), files[i].first.c_str()) != 0) {
      int e = errno;
      for (size_t j = i; j < temps.size(); ++j) ::unlink(temps[j].c_str());
      for (size_t j = 0; j < i; ++j) ::unlink(files[j].first.c_str());
      throw Error(ErrorKind::Io, fmt::format("{}: cannot rename into place: {}", files[i].first, std::strerror(e)));
    }
  }
}

}  // namespace dskc
