// Kernel cache implementation (see cache.h for the layout and invariants).
//
// Entry file format, version 1 (integers little-endian):
//   offset  0  8 bytes   magic "DSKCMOD1"
//           8  u32       format version (kFormatVersion)
//          12  u32       key length K
//          16  u64       image length I
//          24  u64       manifest length M
//          32  64 bytes  lowercase hex SHA-256 of bytes [0,32) + key + image + manifest
//          96  K bytes   key (must equal the file's name)
//              I bytes   image, then M bytes manifest JSON
// The file size must be exactly 96 + K + I + M, so truncation and appended junk are caught
// before the checksum is computed; the checksum covers the header fields as well as the payload.
#include "compiler/cache.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <random>

#include "compiler/errors.h"
#include "compiler/sha256.h"

namespace dskc {
namespace fs = std::filesystem;

namespace {

constexpr char kMagic[8] = {'D', 'S', 'K', 'C', 'M', 'O', 'D', '1'};
constexpr uint32_t kFormatVersion = 1;
constexpr size_t kFixedHeaderBytes = 32;                 // magic .. manifest length
constexpr size_t kHeaderBytes = kFixedHeaderBytes + 64;  // + checksum hex
constexpr const char* kEntrySuffix = ".dskcmod";
constexpr const char* kTempPrefix = ".tmp-";
constexpr const char* kCorruptLog = "corrupt-removed.log";
// A temp file whose writer is gone, or older than this, is left over from a crash.
constexpr auto kStaleTempAge = std::chrono::hours(1);

[[noreturn]] void throw_io(const fs::path& p, const std::string& what, int err) {
  throw Error(ErrorKind::Io, fmt::format("{}: {}: {}", p.string(), what, std::strerror(err)));
}

// Keys become file names: restrict them so no key can escape the cache directory.
bool valid_key(const std::string& key) {
  if (key.size() < 2 || key.size() > 128) return false;
  return std::all_of(key.begin(), key.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
           c == '-';
  });
}

void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint64_t get_le(std::string_view s, size_t off, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= uint64_t(static_cast<unsigned char>(s[off + i])) << (8 * i);
  return v;
}

std::string checksum(std::string_view fixed_header, std::string_view key, std::string_view image,
                     std::string_view manifest) {
  Sha256 h;
  h.update(fixed_header);
  h.update(key);
  h.update(image);
  h.update(manifest);
  return h.hex_digest();
}

std::string encode_entry(const std::string& key, const CacheEntry& e) {
  std::string fixed(kMagic, sizeof kMagic);
  put_u32(fixed, kFormatVersion);
  put_u32(fixed, static_cast<uint32_t>(key.size()));
  put_u64(fixed, e.image.size());
  put_u64(fixed, e.manifest_json.size());
  std::string out = fixed;
  out.reserve(kHeaderBytes + key.size() + e.image.size() + e.manifest_json.size());
  out += checksum(fixed, key, e.image, e.manifest_json);
  out += key;
  out += e.image;
  out += e.manifest_json;
  return out;
}

// Verifies a whole entry file's bytes; on failure returns nullopt and sets *why.
std::optional<CacheEntry> decode_entry(std::string_view bytes, const std::string& key,
                                       std::string* why) {
  if (bytes.size() < kHeaderBytes) {
    *why = fmt::format("truncated header ({} bytes)", bytes.size());
    return std::nullopt;
  }
  if (std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) {
    *why = "bad magic";
    return std::nullopt;
  }
  const uint64_t version = get_le(bytes, 8, 4), key_len = get_le(bytes, 12, 4);
  const uint64_t image_len = get_le(bytes, 16, 8), manifest_len = get_le(bytes, 24, 8);
  if (version != kFormatVersion) {
    *why = fmt::format("format version {} (expected {})", version, kFormatVersion);
    return std::nullopt;
  }
  // Compare sizes without overflow: each length is bounded by the file size first.
  const uint64_t body = bytes.size() - kHeaderBytes;
  if (key_len > body || image_len > body - key_len || manifest_len != body - key_len - image_len) {
    *why = fmt::format("lengths (key {}, image {}, manifest {}) do not match file size {}", key_len,
                       image_len, manifest_len, bytes.size());
    return std::nullopt;
  }
  std::string_view stored_key = bytes.substr(kHeaderBytes, key_len);
  if (stored_key != key) {
    *why = "key mismatch";
    return std::nullopt;
  }
  std::string_view image = bytes.substr(kHeaderBytes + key_len, image_len);
  std::string_view manifest = bytes.substr(kHeaderBytes + key_len + image_len);
  std::string_view stored_sum = bytes.substr(kFixedHeaderBytes, 64);
  if (checksum(bytes.substr(0, kFixedHeaderBytes), stored_key, image, manifest) != stored_sum) {
    *why = "checksum mismatch";
    return std::nullopt;
  }
  return CacheEntry{std::string(image), std::string(manifest)};
}

// Reads a whole file. Returns false (errno set) if it cannot be opened; throws on read errors.
bool read_whole(const fs::path& p, std::string* out, struct stat* st) {
  int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  if (::fstat(fd, st) != 0) {
    int err = errno;
    ::close(fd);
    throw_io(p, "cannot stat cache entry", err);
  }
  out->assign(static_cast<size_t>(st->st_size), '\0');
  size_t done = 0;
  while (done < out->size()) {
    ssize_t n = ::read(fd, out->data() + done, out->size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      throw_io(p, "cannot read cache entry", err);
    }
    if (n == 0) break;  // shrank under us: verification will reject it
    done += static_cast<size_t>(n);
  }
  out->resize(done);
  ::close(fd);
  return true;
}

void write_all(int fd, std::string_view data, const fs::path& p) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_io(p, "cannot write", errno);
    done += static_cast<size_t>(n);
  }
}

std::string temp_name() {
  static std::atomic<uint64_t> counter{0};
  std::random_device rd;
  uint64_t r = (uint64_t(rd()) << 32) ^ rd() ^ (counter.fetch_add(1) << 48);
  return fmt::format("{}{}-{:016x}", kTempPrefix, ::getpid(), r);
}

bool is_entry_file(const fs::path& p, const std::string& shard, std::string* key) {
  const std::string name = p.filename().string();
  const std::string suffix = kEntrySuffix;
  if (name.size() <= suffix.size() ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return false;
  *key = name.substr(0, name.size() - suffix.size());
  return valid_key(*key) && key->compare(0, 2, shard) == 0;
}

// A temp file is stale when the process named in it is gone or it is old.
bool is_stale_temp(const fs::directory_entry& de) {
  const std::string name = de.path().filename().string();
  if (name.rfind(kTempPrefix, 0) != 0) return false;
  long pid = std::strtol(name.c_str() + std::strlen(kTempPrefix), nullptr, 10);
  if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) return true;
  std::error_code ec;
  auto mtime = fs::last_write_time(de.path(), ec);
  return !ec && fs::file_time_type::clock::now() - mtime > kStaleTempAge;
}

// Shard directories: two-character names directly under the cache dir.
std::vector<fs::path> shard_dirs(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code ec2;
    if (it->path().filename().string().size() == 2 && it->is_directory(ec2))
      out.push_back(it->path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

void fill_from_manifest(const std::string& manifest, CacheListing* l) {
  auto j = nlohmann::json::parse(manifest, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return;
  auto str = [&](const char* field) -> std::string {
    auto it = j.find(field);
    return it != j.end() && it->is_string() ? it->get<std::string>() : "";
  };
  l->arch = str("arch");
  l->emit = str("emit");
  l->config_hash = str("config_hash");
  auto k = j.find("kernels");
  if (k != j.end() && k->is_array())
    l->kernels_summary = fmt::format("{} kernel{}", k->size(), k->size() == 1 ? "" : "s");
}

}  // namespace

std::string cache_key(const CacheKeyInputs& in) {
  // Every field is "<name>:<byte length>:<bytes>\n"; options are preceded by their count.
  // Names and lengths make the serialization injective (no field can absorb a neighbour).
  Sha256 h;
  auto field = [&h](std::string_view name, std::string_view value) {
    h.update(fmt::format("{}:{}:", name, value.size()));
    h.update(value);
    h.update("\n");
  };
  h.update("dskc-cache-key-v1\n");
  field("source", in.source);
  h.update(fmt::format("options#{}\n", in.options.size()));
  for (const auto& o : in.options) field("option", o);
  field("arch", in.arch);
  field("emit", in.emit);
  field("nvrtc_version", in.nvrtc_version);
  field("dskc_version", in.dskc_version);
  return h.hex_digest();
}

fs::path default_cache_dir() {
  auto env = [](const char* name) -> std::string {
    const char* v = std::getenv(name);
    return v ? v : "";
  };
  if (std::string d = env("DSKC_CACHE_DIR"); !d.empty()) return d;
  // The XDG base-directory spec says relative values are invalid and must be ignored.
  if (std::string x = env("XDG_CACHE_HOME"); !x.empty() && fs::path(x).is_absolute())
    return fs::path(x) / "dskc";
  std::string home = env("HOME");
  if (home.empty()) {
    if (const passwd* pw = ::getpwuid(::getuid()); pw && pw->pw_dir) home = pw->pw_dir;
  }
  if (home.empty())
    throw Error(ErrorKind::Io,
                "cannot locate the kernel cache: set DSKC_CACHE_DIR (HOME is not set)");
  return fs::path(home) / ".cache" / "dskc";
}

KernelCache::KernelCache(fs::path dir) : dir_(std::move(dir)) {}

fs::path KernelCache::entry_path(const std::string& key) const {
  DSKC_ASSERT(valid_key(key), fmt::format("invalid cache key '{}'", key));
  return dir_ / key.substr(0, 2) / (key + kEntrySuffix);
}

std::optional<CacheEntry> KernelCache::load(const std::string& key) {
  const fs::path p = entry_path(key);
  std::string bytes;
  struct stat st {};
  if (!read_whole(p, &bytes, &st)) {
    if (errno == ENOENT || errno == ENOTDIR) return std::nullopt;
    throw_io(p, "cannot open cache entry", errno);
  }
  std::string why;
  if (auto e = decode_entry(bytes, key, &why)) return e;

  // Corrupt: delete it so the caller's rebuild replaces it. Only unlink the file we read; if
  // another process has meanwhile renamed a fresh entry into place, leave that one alone.
  struct stat now {};
  if (::lstat(p.c_str(), &now) == 0 && now.st_ino == st.st_ino && now.st_dev == st.st_dev &&
      ::unlink(p.c_str()) == 0) {
    int fd = ::open((dir_ / kCorruptLog).c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) {  // best effort: the log only feeds `dskc cache stats`
      std::string line = fmt::format("{} {}\n", key, why);
      [[maybe_unused]] ssize_t n = ::write(fd, line.data(), line.size());
      ::close(fd);
    }
  }
  return std::nullopt;
}

void KernelCache::store(const std::string& key, const CacheEntry& e) {
  const fs::path final_path = entry_path(key);
  const fs::path shard = final_path.parent_path();
  const std::string bytes = encode_entry(key, e);

  // A concurrent clear() may remove the (empty) shard directory between creating it and
  // opening the temp file, so retry a few times on ENOENT.
  fs::path tmp;
  int fd = -1;
  for (int attempt = 0; fd < 0; ++attempt) {
    std::error_code ec;
    fs::create_directories(shard, ec);
    if (ec)
      throw Error(ErrorKind::Io, fmt::format("{}: cannot create cache directory: {}",
                                             shard.string(), ec.message()));
    tmp = shard / temp_name();
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && !((errno == ENOENT || errno == EEXIST) && attempt < 3))
      throw_io(tmp, "cannot create cache temp file", errno);
  }
  try {
    write_all(fd, bytes, tmp);
    if (::fsync(fd) != 0) throw_io(tmp, "fsync failed", errno);
    int rc = ::close(fd);
    fd = -1;
    if (rc != 0) throw_io(tmp, "close failed", errno);
    // rename() atomically replaces any existing entry: concurrent writers of the same key all
    // write identical bytes, and whichever rename lands last wins.
    if (::rename(tmp.c_str(), final_path.c_str()) != 0)
      throw_io(final_path, "cannot rename temp file into place", errno);
  } catch (...) {
    if (fd >= 0) ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  // Make the rename durable; failure here loses at most a cache entry, so it is not an error.
  int dfd = ::open(shard.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

std::vector<CacheListing> KernelCache::list() const {
  std::vector<CacheListing> out;
  for (const fs::path& shard : shard_dirs(dir_)) {
    std::error_code ec;
    for (fs::directory_iterator it(shard, ec), end; !ec && it != end; it.increment(ec)) {
      CacheListing l;
      if (!is_entry_file(it->path(), shard.filename().string(), &l.key)) continue;
      std::string bytes;
      struct stat st {};
      // Entries may vanish under a concurrent clear() or corrupt-entry removal: skip them.
      if (!read_whole(it->path(), &bytes, &st)) continue;
      l.bytes = static_cast<uint64_t>(st.st_size);
      std::error_code ec2;
      l.mtime = fs::last_write_time(it->path(), ec2);
      std::string why;
      auto entry = decode_entry(bytes, l.key, &why);
      l.valid = entry.has_value();
      if (entry) fill_from_manifest(entry->manifest_json, &l);
      out.push_back(std::move(l));
    }
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.key < b.key; });
  return out;
}

CacheStats KernelCache::stats() const {
  CacheStats s;
  for (const fs::path& shard : shard_dirs(dir_)) {
    std::error_code ec;
    for (fs::directory_iterator it(shard, ec), end; !ec && it != end; it.increment(ec)) {
      std::string key;
      if (!is_entry_file(it->path(), shard.filename().string(), &key)) continue;
      std::error_code ec2;
      uintmax_t size = it->file_size(ec2);
      if (ec2) continue;
      ++s.entries;
      s.bytes += size;
    }
  }
  std::string log;
  struct stat st {};
  if (read_whole(dir_ / kCorruptLog, &log, &st))
    s.corrupt_removed = std::count(log.begin(), log.end(), '\n');
  return s;
}

size_t KernelCache::clear() {
  size_t removed = 0;
  for (const fs::path& shard : shard_dirs(dir_)) {
    std::vector<fs::path> victims;
    std::error_code ec;
    for (fs::directory_iterator it(shard, ec), end; !ec && it != end; it.increment(ec)) {
      std::string key;
      if (is_entry_file(it->path(), shard.filename().string(), &key) || is_stale_temp(*it))
        victims.push_back(it->path());
    }
    for (const fs::path& p : victims) {
      if (::unlink(p.c_str()) == 0) {
        if (p.extension() == kEntrySuffix) ++removed;
      } else if (errno != ENOENT) {  // ENOENT: someone else removed it first
        throw_io(p, "cannot remove", errno);
      }
    }
    ::rmdir(shard.c_str());  // only succeeds when empty (e.g. no live writer's temp file)
  }
  if (::unlink((dir_ / kCorruptLog).c_str()) != 0 && errno != ENOENT)
    throw_io(dir_ / kCorruptLog, "cannot remove", errno);
  return removed;
}

}  // namespace dskc
