// Kernel cache tests: key derivation, hit/miss, corruption detection (truncation, every-region
// bit flips, junk, misplaced files), default directory precedence, clear/list/stats, failed
// writes leaving no temp files, and multi-process stores racing on one key or many keys.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <set>

#include "compiler/cache.h"
#include "compiler/nvrtc_compile.h"
#include "compiler/errors.h"
#include "test_util.h"

namespace fs = std::filesystem;
using dskc::CacheEntry;
using dskc::CacheKeyInputs;
using dskc::KernelCache;
using dskc_test::ScopedEnv;
using dskc_test::TempDir;

namespace {

CacheKeyInputs base_inputs() {
  return {"extern \"C\" __global__ void k() {}",
          {"--std=c++17", "-arch=sm_80", "--use_fast_math"},
          "sm_80",
          "cubin",
          "12.4",
          "0.1.0"};
}

// Distinct valid keys for tests, derived like real keys.
std::string key_for(int i) {
  CacheKeyInputs in = base_inputs();
  in.source += std::to_string(i);
  return dskc::cache_key(in);
}

CacheEntry sample_entry(size_t image_bytes = 4096, char fill = 'x') {
  std::string image(image_bytes, fill);
  for (size_t i = 0; i < image.size(); i += 97) image[i] = static_cast<char>(i & 0xff);
  return {image,
          R"({"arch":"sm_80","emit":"cubin","config_hash":"c0ffee1234567890abcd",)"
          R"("kernels":[{"name":"a"},{"name":"b"}]})"};
}

size_t count_files(const fs::path& dir, const std::string& prefix, const std::string& suffix) {
  size_t n = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.rfind(prefix, 0) == 0 && name.size() >= suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
      ++n;
  }
  return n;
}
size_t temp_files(const fs::path& dir) { return count_files(dir, ".tmp-", ""); }
size_t entry_files(const fs::path& dir) { return count_files(dir, "", ".dskcmod"); }

bool same_entry(const std::optional<CacheEntry>& a, const CacheEntry& b) {
  return a && a->image == b.image && a->manifest_json == b.manifest_json;
}

// Forks `n` children that block on a pipe until all exist, then run body(i) at once; returns
// how many exited with status 0. Children never return into doctest (they _exit).
template <class Body>
int run_in_children(int n, Body body) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  std::vector<pid_t> pids;
  for (int i = 0; i < n; ++i) {
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::close(fds[1]);
      char c;
      while (::read(fds[0], &c, 1) < 0 && errno == EINTR) {
      }  // EOF when the parent closes the write end: everyone starts together
      int rc = 1;
      try {
        rc = body(i);
      } catch (...) {
        rc = 3;
      }
      ::_exit(rc);
    }
    pids.push_back(pid);
  }
  ::close(fds[0]);
  ::close(fds[1]);  // release the barrier
  int ok = 0;
  for (pid_t pid : pids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) ++ok;
  }
  return ok;
}

}  // namespace

TEST_CASE("cache key: deterministic hex, changes with every input") {
  const CacheKeyInputs base = base_inputs();
  const std::string k = dskc::cache_key(base);
  CHECK(k.size() == 64);
  CHECK(k.find_first_not_of("0123456789abcdef") == std::string::npos);
  CHECK(dskc::cache_key(base) == k);

  std::vector<CacheKeyInputs> variants;
  auto vary = [&](auto mutate) {
    CacheKeyInputs v = base;
    mutate(v);
    variants.push_back(v);
  };
  vary([](auto& v) { v.source += " "; });
  for (size_t i = 0; i < base.options.size(); ++i) vary([i](auto& v) { v.options[i] += "x"; });
  vary([](auto& v) { v.options.push_back(""); });
  vary([](auto& v) { v.options.pop_back(); });
  vary([](auto& v) { std::swap(v.options[0], v.options[1]); });
  vary([](auto& v) { v.arch = "sm_90"; });
  vary([](auto& v) { v.emit = "ptx"; });
  vary([](auto& v) { v.nvrtc_version = "12.5"; });
  vary([](auto& v) { v.dskc_version = "0.1.1"; });
  std::set<std::string> keys = {k};
  for (const auto& v : variants) keys.insert(dskc::cache_key(v));
  CHECK(keys.size() == variants.size() + 1);
}

TEST_CASE("cache key: field boundaries are unambiguous") {
  CacheKeyInputs a = base_inputs(), b = base_inputs();
  a.options = {"ab", "c"};
  b.options = {"a", "bc"};
  CHECK(dskc::cache_key(a) != dskc::cache_key(b));
  b.options = {"abc"};
  CHECK(dskc::cache_key(a) != dskc::cache_key(b));

  CacheKeyInputs c = base_inputs(), d = base_inputs();
  c.arch = "sm_80";
  c.emit = "";
  d.arch = "";
  d.emit = "sm_80";
  CHECK(dskc::cache_key(c) != dskc::cache_key(d));

  CacheKeyInputs e = base_inputs(), f = base_inputs();
  e.options = {};
  e.source = "x";
  f.options = {""};
  f.source = "x";
  CHECK(dskc::cache_key(e) != dskc::cache_key(f));

  CacheKeyInputs g = base_inputs(), h = base_inputs();
  g.nvrtc_version = "12.4";
  g.dskc_version = "0.1";
  h.nvrtc_version = "12.40";
  h.dskc_version = ".1";
  CHECK(dskc::cache_key(g) != dskc::cache_key(h));
}

TEST_CASE("cache: miss, store, hit, overwrite") {
  TempDir tmp;
  KernelCache cache(tmp.path / "cache");
  const std::string key = key_for(1);
  CHECK_FALSE(cache.load(key).has_value());  // directory does not even exist yet
  const CacheEntry e = sample_entry();
  cache.store(key, e);
  CHECK(fs::exists(tmp.path / "cache" / key.substr(0, 2) / (key + ".dskcmod")));
  CHECK(cache.entry_path(key) == tmp.path / "cache" / key.substr(0, 2) / (key + ".dskcmod"));
  CHECK(same_entry(cache.load(key), e));
  CHECK_FALSE(cache.load(key_for(2)).has_value());

  // Empty image and manifest round-trip; binary bytes with NULs round-trip.
  cache.store(key_for(3), CacheEntry{});
  auto empty = cache.load(key_for(3));
  REQUIRE(empty);
  CHECK(empty->image.empty());
  CHECK(empty->manifest_json.empty());
  CacheEntry bin{std::string("\0\x01\xff\0", 4), "{}"};
  cache.store(key_for(4), bin);
  CHECK(same_entry(cache.load(key_for(4)), bin));

  CacheEntry e2 = sample_entry(100, 'y');
  cache.store(key, e2);
  CHECK(same_entry(cache.load(key), e2));
  CHECK(entry_files(cache.dir()) == 3);
  CHECK(temp_files(cache.dir()) == 0);
}

TEST_CASE("cache: invalid keys cannot escape the directory") {
  TempDir tmp;
  KernelCache cache(tmp.path);
  for (const std::string& bad :
       std::vector<std::string>{"", "a", "../etc/passwd", "ab/cd", "a b", std::string(200, 'a')})
    CHECK_THROWS_AS(cache.store(bad, sample_entry()), dskc::Error);
}

TEST_CASE("cache: truncated entries are detected, deleted and rebuilt") {
  TempDir tmp;
  KernelCache cache(tmp.path);
  const std::string key = key_for(5);
  const CacheEntry e = sample_entry(10000);
  cache.store(key, e);
  const fs::path p = cache.entry_path(key);
  const uintmax_t full = fs::file_size(p);
  for (uintmax_t size : {uintmax_t{0}, uintmax_t{5}, uintmax_t{40}, uintmax_t{96}, uintmax_t{200},
                         full / 2, full - 1}) {
    CAPTURE(size);
    cache.store(key, e);
    fs::resize_file(p, size);
    CHECK_FALSE(cache.load(key).has_value());
    CHECK_FALSE(fs::exists(p));
    CHECK_FALSE(cache.load(key).has_value());  // still a plain miss
    cache.store(key, e);
    CHECK(same_entry(cache.load(key), e));
  }
  // Appended junk is as bad as missing bytes.
  {
    std::ofstream f(p, std::ios::binary | std::ios::app);
    f << "junk";
  }
  CHECK_FALSE(cache.load(key).has_value());
  CHECK_FALSE(fs::exists(p));
}

TEST_CASE("cache: a single flipped bit anywhere is detected") {
  TempDir tmp;
  KernelCache cache(tmp.path);
  const std::string key = key_for(6);
  const CacheEntry e = sample_entry(300);
  cache.store(key, e);
  const fs::path p = cache.entry_path(key);
  const std::string good = dskc_test::read_file(p.string());
  // Every byte of the header (magic, version, lengths, checksum, key) and a sample of the
  // image and manifest, with a different bit each time.
  std::vector<size_t> offsets;
  for (size_t i = 0; i < 96 + key.size(); ++i) offsets.push_back(i);
  for (size_t i = 96 + key.size(); i < good.size(); i += 7) offsets.push_back(i);
  offsets.push_back(good.size() - 1);
  size_t detected = 0;
  for (size_t off : offsets) {
    std::string bad = good;
    bad[off] = static_cast<char>(bad[off] ^ (1 << (off % 8)));
    dskc_test::write_file(p.string(), bad);
    auto got = cache.load(key);
    if (!got && !fs::exists(p))
      ++detected;
    else
      FAIL_CHECK("flip at offset " << off << " not detected");
    dskc_test::write_file(p.string(), good);
  }
  CHECK(detected == offsets.size());
  CHECK(same_entry(cache.load(key), e));
  CHECK(cache.stats().corrupt_removed == offsets.size());
  // And a subsequent store works normally.
  fs::remove(p);
  cache.store(key, e);
  CHECK(same_entry(cache.load(key), e));
}

TEST_CASE("cache: an entry copied to another key's path is rejected") {
  TempDir tmp;
  KernelCache cache(tmp.path);
  const std::string a = key_for(7), b = key_for(8);
  cache.store(a, sample_entry());
  fs::create_directories(cache.entry_path(b).parent_path());
  fs::copy_file(cache.entry_path(a), cache.entry_path(b));
  CHECK_FALSE(cache.load(b).has_value());
  CHECK_FALSE(fs::exists(cache.entry_path(b)));
  CHECK(cache.load(a).has_value());
}

TEST_CASE("cache: default_cache_dir precedence") {
  ScopedEnv d("DSKC_CACHE_DIR", "/tmp/dskc-explicit");
  ScopedEnv x("XDG_CACHE_HOME", "/tmp/xdg");
  ScopedEnv h("HOME", "/tmp/home");
  CHECK(dskc::default_cache_dir() == fs::path("/tmp/dskc-explicit"));
  {
    ScopedEnv unset("DSKC_CACHE_DIR", nullptr);
    CHECK(dskc::default_cache_dir() == fs::path("/tmp/xdg/dskc"));
    {
      ScopedEnv empty("DSKC_CACHE_DIR", "");  // empty counts as unset
      CHECK(dskc::default_cache_dir() == fs::path("/tmp/xdg/dskc"));
    }
    {
      ScopedEnv rel("XDG_CACHE_HOME", "relative/path");  // XDG spec: ignore relative values
      CHECK(dskc::default_cache_dir() == fs::path("/tmp/home/.cache/dskc"));
    }
    ScopedEnv no_xdg("XDG_CACHE_HOME", nullptr);
    CHECK(dskc::default_cache_dir() == fs::path("/tmp/home/.cache/dskc"));
  }
}

TEST_CASE("cache: list and stats read the manifest") {
  TempDir tmp;
  KernelCache cache(tmp.path / "c");
  CHECK(cache.list().empty());
  CHECK(cache.stats().entries == 0);
  cache.store(key_for(10), sample_entry());
  cache.store(key_for(11), CacheEntry{"ptx text", "not json"});
  auto l = cache.list();
  REQUIRE(l.size() == 2);
  uint64_t total = 0;
  for (const auto& e : l) {
    total += e.bytes;
    CHECK(e.valid);
    CHECK(e.bytes == fs::file_size(cache.entry_path(e.key)));
    if (e.key == key_for(10)) {
      CHECK(e.arch == "sm_80");
      CHECK(e.emit == "cubin");
      CHECK(e.config_hash == "c0ffee1234567890abcd");
      CHECK(e.kernels_summary == "2 kernels");
    } else {
      CHECK(e.key == key_for(11));
      CHECK(e.arch.empty());
      CHECK(e.kernels_summary.empty());
    }
  }
  auto s = cache.stats();
  CHECK(s.entries == 2);
  CHECK(s.bytes == total);
  CHECK(s.corrupt_removed == 0);

  // A corrupt entry is listed as invalid but list() does not remove it; load() does.
  fs::resize_file(cache.entry_path(key_for(11)), 50);
  l = cache.list();
  REQUIRE(l.size() == 2);
  CHECK(std::count_if(l.begin(), l.end(), [](const auto& e) { return !e.valid; }) == 1);
  CHECK_FALSE(cache.load(key_for(11)).has_value());
  CHECK(cache.stats().entries == 1);
  CHECK(cache.stats().corrupt_removed == 1);
}

TEST_CASE("cache: clear removes entries and stale temp files only") {
  TempDir tmp;
  KernelCache cache(tmp.path);
  CHECK(KernelCache(tmp.path / "missing").clear() == 0);
  for (int i = 0; i < 3; ++i) cache.store(key_for(20 + i), sample_entry());
  const fs::path shard = cache.entry_path(key_for(20)).parent_path();
  dskc_test::write_file((shard / ".tmp-999999999-dead").string(), "stale");  // writer is gone
  const fs::path live = shard / (".tmp-" + std::to_string(::getpid()) + "-live");
  dskc_test::write_file(live.string(), "in progress");  // a live writer's file
  dskc_test::write_file((tmp.path / "unrelated.txt").string(), "keep me");
  CHECK(cache.clear() == 3);
  CHECK(entry_files(tmp.path) == 0);
  CHECK_FALSE(fs::exists(shard / ".tmp-999999999-dead"));
  CHECK(fs::exists(live));
  CHECK(fs::exists(tmp.path / "unrelated.txt"));
  CHECK(cache.list().empty());
  CHECK(cache.stats().entries == 0);
  CHECK_FALSE(cache.load(key_for(20)).has_value());
  cache.store(key_for(20), sample_entry());  // usable after clear
  CHECK(cache.load(key_for(20)).has_value());
}

TEST_CASE("cache: write errors throw Io with the path") {
  TempDir tmp;
  dskc_test::write_file(tmp / "afile", "x");  // a file where a directory should be (works as root)
  KernelCache cache(tmp.path / "afile" / "cache");
  try {
    cache.store(key_for(30), sample_entry());
    FAIL("store into an impossible directory succeeded");
  } catch (const dskc::Error& e) {
    CHECK(e.kind() == dskc::ErrorKind::Io);
    CHECK(std::string(e.what()).find((tmp.path / "afile").string()) != std::string::npos);
  }
}

TEST_CASE("cache: a write failing part-way leaves no temp file and no entry") {
  TempDir tmp;
  const std::string key = key_for(31);
  // In a child, cap the file size so write() fails with EFBIG after ~1 KiB.
  int ok = run_in_children(1, [&](int) {
    ::signal(SIGXFSZ, SIG_IGN);
    rlimit lim{1024, 1024};
    if (::setrlimit(RLIMIT_FSIZE, &lim) != 0) return 4;
    try {
      KernelCache(tmp.path).store(key, sample_entry(1 << 20));
    } catch (const dskc::Error& e) {
      return e.kind() == dskc::ErrorKind::Io ? 0 : 5;
    }
    return 6;
  });
  CHECK(ok == 1);
  CHECK(temp_files(tmp.path) == 0);
  CHECK(entry_files(tmp.path) == 0);
  CHECK_FALSE(KernelCache(tmp.path).load(key).has_value());
}

TEST_CASE("cache: 8 processes storing the same key leave one valid entry") {
  TempDir tmp;
  const std::string key = key_for(40);
  const CacheEntry e = sample_entry(2 << 20);  // 2 MiB widens the write window
  int ok = run_in_children(8, [&](int) {
    KernelCache cache(tmp.path);
    for (int round = 0; round < 5; ++round) {
      cache.store(key, e);
      // Readers racing with renames see the whole entry, never a partial one.
      if (!same_entry(cache.load(key), e)) return 2;
    }
    return 0;
  });
  CHECK(ok == 8);
  KernelCache cache(tmp.path);
  CHECK(entry_files(tmp.path) == 1);
  CHECK(temp_files(tmp.path) == 0);
  CHECK(same_entry(cache.load(key), e));
  auto l = cache.list();
  REQUIRE(l.size() == 1);
  CHECK(l[0].valid);
  CHECK(cache.stats().corrupt_removed == 0);
}

TEST_CASE("cache: 8 processes storing different keys") {
  TempDir tmp;
  int ok = run_in_children(8, [&](int i) {
    KernelCache cache(tmp.path);
    CacheEntry e = sample_entry(256 << 10, static_cast<char>('a' + i));
    cache.store(key_for(50 + i), e);
    return same_entry(cache.load(key_for(50 + i)), e) ? 0 : 2;
  });
  CHECK(ok == 8);
  KernelCache cache(tmp.path);
  CHECK(entry_files(tmp.path) == 8);
  CHECK(temp_files(tmp.path) == 0);
  for (int i = 0; i < 8; ++i)
    CHECK(same_entry(cache.load(key_for(50 + i)),
                     sample_entry(256 << 10, static_cast<char>('a' + i))));
  CHECK(cache.stats().entries == 8);
}

TEST_CASE("cli: dskc cache ls|stats|clear") {
  const std::string bin = dskc_test::dskc_binary();
  if (bin == "/bin/false" || !fs::exists(bin)) {
    MESSAGE("dskc binary not built; skipping CLI checks");
    return;
  }
  TempDir tmp;
  const fs::path dir = tmp.path / "cli-cache";
  KernelCache cache(dir);
  cache.store(key_for(60), sample_entry());
  cache.store(key_for(61), sample_entry());
  const std::string d = " --dir " + dir.string();

  auto ls = dskc_test::run_dskc("cache ls" + d);
  CHECK(ls.exit_code == 0);
  CHECK(ls.output.find(key_for(60).substr(0, 16)) != std::string::npos);
  CHECK(ls.output.find("sm_80") != std::string::npos);
  CHECK(ls.output.find("c0ffee1234567890") != std::string::npos);

  auto st = dskc_test::run_dskc("cache stats", "DSKC_CACHE_DIR=" + dir.string());  // default dir
  CHECK(st.exit_code == 0);
  CHECK(st.output.find(dir.string()) != std::string::npos);
  CHECK(st.output.find("entries:         2") != std::string::npos);

  auto cl = dskc_test::run_dskc("cache clear" + d);
  CHECK(cl.exit_code == 0);
  CHECK(cl.output.find("removed 2 entries") != std::string::npos);
  CHECK(cache.stats().entries == 0);

  CHECK(dskc_test::run_dskc("cache --help").exit_code == 0);
  CHECK(dskc_test::run_dskc("cache lss" + d).exit_code == 2);
  CHECK(dskc_test::run_dskc("cache" + d).exit_code == 2);
  CHECK(dskc_test::run_dskc("cache ls --nope").exit_code == 2);
}

TEST_CASE("compile_cached: a non-layer module is compiled once, then loaded from the cache") {
  TempDir dir;
  ScopedEnv env("DSKC_CACHE_DIR", dir.path.c_str());
  const std::string src = "extern \"C\" __global__ void dskc_probe(float* x) { x[threadIdx.x] += 1.f; }\n";
  dskc::CompileOptions o;
  o.arch = "sm_80";
  const dskc::CompiledModule a = dskc::compile_cached(src, "probe.cu", o);
  CHECK(!a.from_cache);
  CHECK(!a.image.empty());
  const dskc::CompiledModule b = dskc::compile_cached(src, "probe.cu", o);
  CHECK(b.from_cache);
  CHECK(b.image == a.image);
  CHECK(b.cache_key == a.cache_key);
  o.arch = "sm_90";  // another arch is another entry
  const dskc::CompiledModule c = dskc::compile_cached(src, "probe.cu", o);
  CHECK(!c.from_cache);
  CHECK(c.cache_key != a.cache_key);
  CHECK(dskc::KernelCache(dir.path).stats().entries == 2);
}
