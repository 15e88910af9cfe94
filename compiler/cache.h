// Content-addressed on-disk kernel cache (SPEC §3). The key is the SHA-256 of everything that
// determines the compiled bytes (generated source, NVRTC options, arch, emit kind, NVRTC and dskc
// versions), so an entry never needs invalidating: a change in any input is a different key.
//
// Layout: <dir>/<key[0:2]>/<key>.dskcmod, one self-checking file per entry (header with magic,
// format version, key, lengths and a SHA-256 checksum, then image bytes, then manifest JSON).
// Invariants:
//  - A final entry path only ever appears through rename() of a fully written, fsync'ed temp file
//    (".tmp-<pid>-<random>" in the same directory), so readers see a whole entry or none, and
//    any number of processes storing the same key leave exactly one valid entry.
//  - load() never returns bytes that fail verification; a bad entry is deleted (a miss, so the
//    caller rebuilds it) and counted in the "corrupt-removed.log" sidecar.
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace dskc {

struct CacheKeyInputs {
  std::string source;                // generated CUDA source
  std::vector<std::string> options;  // NVRTC options, in order
  std::string arch;                  // e.g. "sm_80"
  std::string emit;                  // "cubin" or "ptx"
  std::string nvrtc_version;         // e.g. "12.4"
  std::string dskc_version;
};

// SHA-256 hex of a length-prefixed serialization of every field (no two distinct inputs share
// a serialization, e.g. options {"ab","c"} and {"a","bc"} differ).
std::string cache_key(const CacheKeyInputs& in);

// $DSKC_CACHE_DIR, else $XDG_CACHE_HOME/dskc (if absolute), else $HOME/.cache/dskc.
std::filesystem::path default_cache_dir();

struct CacheEntry {
  std::string image;          // cubin or PTX bytes
  std::string manifest_json;  // manifest written by `dskc compile`
};

struct CacheListing {
  std::string key;
  uint64_t bytes = 0;  // size of the entry file
  std::string arch;    // manifest "arch", "" if absent
  std::string emit;    // manifest "emit", "" if absent
  std::string config_hash;      // manifest "config_hash", "" if absent
  std::string kernels_summary;  // e.g. "7 kernels" from the manifest "kernels" array
  std::filesystem::file_time_type mtime;
  bool valid = true;  // false: the entry fails verification (load() will delete it)
};

struct CacheStats {
  size_t entries = 0;
  uint64_t bytes = 0;
  size_t corrupt_removed = 0;  // corrupt entries deleted by load() since the last clear()
};

class KernelCache {
 public:
  explicit KernelCache(std::filesystem::path dir);
  const std::filesystem::path& dir() const { return dir_; }

  // The verified entry, or nullopt on a miss. A corrupt or truncated entry is deleted and
  // reported as a miss. Throws Error(Io) only when an existing entry cannot be read.
  std::optional<CacheEntry> load(const std::string& key);
  // Atomically writes the entry (temp file + fsync + rename). Throws Error(Io, "<path>: ...").
  void store(const std::string& key, const CacheEntry& e);

  // Entries sorted by key (does not modify the cache).
  std::vector<CacheListing> list() const;
  CacheStats stats() const;
  // Removes every entry, stale temp files and the sidecar; returns the number of entries removed.
  size_t clear();

  // Where the entry for `key` lives (whether or not it exists).
  std::filesystem::path entry_path(const std::string& key) const;

 private:
  std::filesystem::path dir_;
};

}  // namespace dskc
