// `dskc cache ls|stats|clear [--dir DIR]`: inspect or empty the on-disk kernel cache
// (compiler/cache.h). Thin: all cache logic lives in KernelCache; this file only formats.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/commands.h"
#include "compiler/cache.h"
#include "compiler/config.h"
#include "compiler/errors.h"

namespace dskc::cli {
namespace {

std::string human_bytes(uint64_t b) {
  if (b < 1024) return fmt::format("{} B", b);
  const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(b);
  int u = -1;
  while (v >= 1024 && u < 3) {
    v /= 1024;
    ++u;
  }
  return fmt::format("{:.1f} {}", v, units[u]);
}

std::string human_age(std::filesystem::file_time_type mtime) {
  using namespace std::chrono;
  auto secs = duration_cast<seconds>(std::filesystem::file_time_type::clock::now() - mtime).count();
  if (secs < 0) secs = 0;
  if (secs < 60) return fmt::format("{}s", secs);
  if (secs < 3600) return fmt::format("{}m", secs / 60);
  if (secs < 86400) return fmt::format("{}h", secs / 3600);
  return fmt::format("{}d", secs / 86400);
}

std::string or_dash(const std::string& s) { return s.empty() ? "-" : s; }

int cache_ls(const KernelCache& cache) {
  auto entries = cache.list();
  if (entries.empty()) {
    std::printf("no entries in %s\n", cache.dir().c_str());
    return 0;
  }
  std::string out = fmt::format("{:<16}  {:>10}  {:<8}  {:<5}  {:<16}  {:<11}  {:>5}\n", "KEY",
                                "SIZE", "ARCH", "EMIT", "CONFIG HASH", "KERNELS", "AGE");
  for (const auto& e : entries) {
    std::string hash = e.config_hash.substr(0, 16);
    out += fmt::format("{:<16}  {:>10}  {:<8}  {:<5}  {:<16}  {:<11}  {:>5}\n", e.key.substr(0, 16),
                       human_bytes(e.bytes), e.valid ? or_dash(e.arch) : "CORRUPT", or_dash(e.emit),
                       or_dash(hash), or_dash(e.kernels_summary), human_age(e.mtime));
  }
  out += fmt::format("{} entr{} in {}\n", entries.size(), entries.size() == 1 ? "y" : "ies",
                     cache.dir().string());
  std::fputs(out.c_str(), stdout);
  return 0;
}

int cache_stats(const KernelCache& cache) {
  CacheStats s = cache.stats();
  std::printf("dir:             %s\n", cache.dir().c_str());
  std::printf("entries:         %zu\n", s.entries);
  std::printf("total bytes:     %llu (%s)\n", static_cast<unsigned long long>(s.bytes),
              human_bytes(s.bytes).c_str());
  std::printf("corrupt removed: %zu\n", s.corrupt_removed);
  return 0;
}

int cache_clear(KernelCache& cache) {
  size_t n = cache.clear();
  std::printf("removed %zu entr%s from %s\n", n, n == 1 ? "y" : "ies", cache.dir().c_str());
  return 0;
}

}  // namespace

int cmd_cache(const Args& args) {
  std::string dir;
  std::vector<std::string> actions;
  ArgParser p("cache",
              "List, summarize or clear the on-disk kernel cache. The cache lives in\n"
              "$DSKC_CACHE_DIR, else $XDG_CACHE_HOME/dskc, else ~/.cache/dskc.\n\n"
              "actions:\n"
              "  ls      one line per entry: key, size, arch, emit, config hash, kernels, age\n"
              "  stats   directory, number of entries, total bytes\n"
              "  clear   remove every entry");
  p.add_positionals(&actions, "ls|stats|clear", "what to do");
  p.add_option("dir", &dir, "DIR", "cache directory (overrides the default)");
  if (!p.parse(args)) return 0;

  const std::vector<std::string> known = {"ls", "stats", "clear"};
  if (actions.size() != 1) {
    throw Error(ErrorKind::Usage, actions.empty()
                                      ? "missing action (ls, stats or clear; see dskc cache --help)"
                                      : fmt::format("expected one action, got {}", actions.size()));
  }
  const std::string& action = actions[0];
  KernelCache cache(dir.empty() ? default_cache_dir() : std::filesystem::path(dir));
  if (action == "ls") return cache_ls(cache);
  if (action == "stats") return cache_stats(cache);
  if (action == "clear") return cache_clear(cache);
  std::string hint = closest_match(action, known);
  throw Error(ErrorKind::Usage,
              fmt::format("unknown action '{}'{} (expected ls, stats or clear)", action,
                          hint.empty() ? "" : "; did you mean '" + hint + "'?"));
}

}  // namespace dskc::cli
