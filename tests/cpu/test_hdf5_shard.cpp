// HDF5 shard I/O and ShardDataset: round trip, one clear error (naming the file) for every
// kind of bad shard, shuffling is a permutation per epoch, ranks are disjoint and cover the
// data, and resuming from position() replays the same batches.
#include <doctest/doctest.h>
#include <hdf5.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <thread>

#include "compiler/errors.h"
#include "tests/test_util.h"
#include "trainer/batch_prefetch.h"
#include "trainer/hdf5_shard.h"

using dskc::Error;
using dskc::ErrorKind;
using dskc::PretrainShard;
using dskc_test::TempDir;

namespace {

// Sample n of a shard made here carries its global id `base + n` at input_ids[n][1].
PretrainShard make_shard(int64_t n, int S, int P, int base = 0) {
  PretrainShard sh;
  sh.num_samples = n;
  sh.seq_len = S;
  sh.max_pred = P;
  for (int64_t i = 0; i < n; ++i) {
    for (int t = 0; t < S; ++t) {
      sh.input_ids.push_back(t == 0 ? 2 : t == 1 ? static_cast<int32_t>(base + i) : 100 + t);
      sh.input_mask.push_back(t < S - 1 ? 1 : 0);
      sh.segment_ids.push_back(t >= S / 2 ? 1 : 0);
    }
    for (int k = 0; k < P; ++k) {
      sh.masked_lm_positions.push_back(k + 2 < S ? k + 2 : 0);
      sh.masked_lm_ids.push_back(static_cast<int32_t>(7 * i + k));
    }
    sh.next_sentence_labels.push_back(static_cast<int32_t>(i % 2));
  }
  return sh;
}

// A dataset with explicit file type and dims, for writing malformed shards.
struct RawSet {
  std::string name;
  std::vector<hsize_t> dims;
  std::vector<int64_t> data;
  hid_t file_type = H5T_STD_I32LE;
};

std::vector<RawSet> raw_sets(const PretrainShard& sh) {
  auto conv = [](const std::vector<int32_t>& v) { return std::vector<int64_t>(v.begin(), v.end()); };
  hsize_t n = sh.num_samples, s = sh.seq_len, p = sh.max_pred;
  return {{"input_ids", {n, s}, conv(sh.input_ids)},
          {"input_mask", {n, s}, conv(sh.input_mask)},
          {"segment_ids", {n, s}, conv(sh.segment_ids)},
          {"masked_lm_positions", {n, p}, conv(sh.masked_lm_positions)},
          {"masked_lm_ids", {n, p}, conv(sh.masked_lm_ids)},
          {"next_sentence_labels", {n}, conv(sh.next_sentence_labels)}};
}

void write_raw(const std::string& path, const std::vector<RawSet>& sets) {
  hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  REQUIRE(f >= 0);
  for (const auto& s : sets) {
    hid_t space = H5Screate_simple(static_cast<int>(s.dims.size()), s.dims.data(), nullptr);
    hid_t ds = H5Dcreate2(f, s.name.c_str(), s.file_type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    REQUIRE(ds >= 0);
    if (!s.data.empty())
      REQUIRE(H5Dwrite(ds, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, s.data.data()) >= 0);
    H5Dclose(ds);
    H5Sclose(space);
  }
  H5Fclose(f);
}

RawSet& set_named(std::vector<RawSet>& sets, const std::string& name) {
  for (auto& s : sets)
    if (s.name == name) return s;
  FAIL("no set " << name);
  return sets[0];
}

template <class F>
Error error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  FAIL("expected a dskc::Error");
  return Error(ErrorKind::Internal, "");
}

// The message of read_shard on a file made from `sets`.
std::string read_error(const TempDir& dir, std::vector<RawSet> sets) {
  std::string path = dir / "bad.hdf5";
  write_raw(path, sets);
  Error e = error_of([&] { dskc::read_shard(path); });
  CHECK(e.kind() == ErrorKind::Input);
  std::string msg = e.what();
  CHECK(msg.find(path) != std::string::npos);
  return msg;
}

std::vector<int32_t> sample_ids(const dskc::Batch& b) {
  std::vector<int32_t> ids;
  for (int i = 0; i < b.batch; ++i) ids.push_back(b.input_ids[static_cast<size_t>(i) * b.seq_len + 1]);
  return ids;
}

void write_dataset(const TempDir& dir, const std::vector<int64_t>& sizes, int S, int P) {
  int base = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    dskc::write_shard(dir / ("part_" + std::to_string(i) + (i % 2 ? ".h5" : ".hdf5")),
                      make_shard(sizes[i], S, P, base));
    base += static_cast<int>(sizes[i]);
  }
  dskc_test::write_file(dir / "README.txt", "not a shard");
}

}  // namespace

TEST_CASE("shard round trip, atomic write, byte-stable") {
  TempDir dir;
  PretrainShard sh = make_shard(37, 16, 5);
  std::string path = dir / "a.hdf5";
  dskc::write_shard(path, sh);
  PretrainShard back = dskc::read_shard(path);
  CHECK(back.num_samples == 37);
  CHECK(back.seq_len == 16);
  CHECK(back.max_pred == 5);
  CHECK(back.input_ids == sh.input_ids);
  CHECK(back.input_mask == sh.input_mask);
  CHECK(back.segment_ids == sh.segment_ids);
  CHECK(back.masked_lm_positions == sh.masked_lm_positions);
  CHECK(back.masked_lm_ids == sh.masked_lm_ids);
  CHECK(back.next_sentence_labels == sh.next_sentence_labels);
  auto info = dskc::read_shard_info(path);
  CHECK(info.num_samples == 37);
  CHECK(info.seq_len == 16);
  CHECK(info.max_pred == 5);
  // No temp file left behind; the same shard written twice gives the same bytes.
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path)) files += e.is_regular_file();
  CHECK(files == 1);
  dskc::write_shard(dir / "b.hdf5", sh);
  CHECK(dskc_test::read_file(path) == dskc_test::read_file(dir / "b.hdf5"));
  // An empty shard is valid too.
  dskc::write_shard(dir / "empty.hdf5", make_shard(0, 8, 2));
  CHECK(dskc::read_shard(dir / "empty.hdf5").num_samples == 0);
}

TEST_CASE("shards written by other tools: any integer type is read") {
  TempDir dir;
  auto sets = raw_sets(make_shard(4, 8, 3));
  for (auto& s : sets)
    s.file_type = s.name == "input_ids"    ? H5T_STD_I64LE
                  : s.name == "input_mask" ? H5T_STD_U8LE
                                           : H5T_STD_I16BE;
  write_raw(dir / "x.h5", sets);
  PretrainShard back = dskc::read_shard(dir / "x.h5");
  CHECK(back.input_ids == make_shard(4, 8, 3).input_ids);
  CHECK(back.masked_lm_ids == make_shard(4, 8, 3).masked_lm_ids);
}

TEST_CASE("bad shards: one clear message naming the file") {
  TempDir dir;
  const PretrainShard good = make_shard(6, 8, 3);

  SUBCASE("missing dataset") {
    auto sets = raw_sets(good);
    sets.erase(sets.begin() + 3);
    CHECK(read_error(dir, sets).find("missing dataset 'masked_lm_positions'") != std::string::npos);
  }
  SUBCASE("wrong rank") {
    auto sets = raw_sets(good);
    set_named(sets, "next_sentence_labels").dims = {3, 2};
    CHECK(read_error(dir, sets).find("'next_sentence_labels' has rank 2, expected 1") != std::string::npos);
    sets = raw_sets(good);
    set_named(sets, "input_ids").dims = {48};
    CHECK(read_error(dir, sets).find("'input_ids' has rank 1, expected 2") != std::string::npos);
  }
  SUBCASE("inconsistent first dimensions") {
    auto sets = raw_sets(good);
    auto& s = set_named(sets, "segment_ids");
    s.dims = {5, 8};
    s.data.resize(40);
    CHECK(read_error(dir, sets).find("inconsistent first dimensions") != std::string::npos);
  }
  SUBCASE("inconsistent sequence length") {
    auto sets = raw_sets(good);
    auto& s = set_named(sets, "input_mask");
    s.dims = {6, 4};
    s.data.resize(24);
    CHECK(read_error(dir, sets).find("'input_mask' has sequence length 4 but 'input_ids' has 8") !=
          std::string::npos);
  }
  SUBCASE("masked position out of range") {
    auto sets = raw_sets(good);
    set_named(sets, "masked_lm_positions").data[4] = 8;
    CHECK(read_error(dir, sets).find("masked_lm_positions[1][1] = 8 is out of range [0,8)") !=
          std::string::npos);
    set_named(sets, "masked_lm_positions").data[4] = -1;
    CHECK(read_error(dir, sets).find("out of range") != std::string::npos);
  }
  SUBCASE("negative ids") {
    auto sets = raw_sets(good);
    set_named(sets, "input_ids").data[10] = -3;
    CHECK(read_error(dir, sets).find("input_ids[1][2] = -3 is negative") != std::string::npos);
    sets = raw_sets(good);
    set_named(sets, "masked_lm_ids").data[0] = -1;
    CHECK(read_error(dir, sets).find("masked_lm_ids[0][0] = -1 is negative") != std::string::npos);
  }
  SUBCASE("labels and masks that are not 0/1") {
    auto sets = raw_sets(good);
    set_named(sets, "next_sentence_labels").data[5] = 2;
    CHECK(read_error(dir, sets).find("next_sentence_labels[5] = 2 is not 0 or 1") != std::string::npos);
  }
  SUBCASE("values too wide for int32") {
    auto sets = raw_sets(good);
    auto& s = set_named(sets, "input_ids");
    s.file_type = H5T_STD_I64LE;
    s.data[3] = int64_t{1} << 40;
    CHECK(read_error(dir, sets).find("does not fit in int32") != std::string::npos);
  }
  SUBCASE("float data") {
    auto sets = raw_sets(good);
    set_named(sets, "input_mask").file_type = H5T_IEEE_F32LE;
    CHECK(read_error(dir, sets).find("'input_mask' does not hold integers") != std::string::npos);
  }
  SUBCASE("not an HDF5 file, truncated file, missing file") {
    std::string text = dir / "text.hdf5";
    dskc_test::write_file(text, "input_ids,input_mask\n1,2\n");
    Error e = error_of([&] { dskc::read_shard(text); });
    CHECK(e.kind() == ErrorKind::Input);
    CHECK(std::string(e.what()) == text + ": not an HDF5 file");

    std::string full = dir / "full.hdf5", cut = dir / "cut.hdf5";
    dskc::write_shard(full, make_shard(2000, 64, 10));
    std::string bytes = dskc_test::read_file(full);
    dskc_test::write_file(cut, bytes.substr(0, bytes.size() / 2));
    e = error_of([&] { dskc::read_shard(cut); });
    CHECK(e.kind() == ErrorKind::Input);
    CHECK(std::string(e.what()).rfind(cut + ": ", 0) == 0);

    e = error_of([&] { dskc::read_shard(dir / "nope.hdf5"); });
    CHECK(std::string(e.what()) == dir / "nope.hdf5" + ": no such file");
  }
  SUBCASE("write into a missing directory leaves nothing") {
    Error e = error_of([&] { dskc::write_shard(dir / "no/such/dir/x.hdf5", good); });
    CHECK(e.kind() == ErrorKind::Io);
    CHECK(std::string(e.what()).find(dir / "no/such/dir/x.hdf5") != std::string::npos);
  }
}

TEST_CASE("dataset: each epoch is a permutation, epochs differ, seeds reproduce") {
  TempDir dir;
  write_dataset(dir, {7, 5, 9}, 8, 3);
  dskc::ShardDataset ds(dir.path.string(), 8, 42);
  CHECK(ds.files().size() == 3);
  CHECK(ds.total_samples() == 21);
  CHECK(ds.samples_per_epoch() == 21);
  std::vector<int32_t> seen;
  while (seen.size() < 63) {  // three epochs in batches of 4 that straddle shards and epochs
    auto b = ds.next_batch(4);
    CHECK(b.batch == 4);
    CHECK(b.seq_len == 8);
    CHECK(b.max_pred == 3);
    CHECK(b.input_ids.size() == 32);
    CHECK(b.masked_lm_ids.size() == 12);
    for (int32_t id : sample_ids(b)) seen.push_back(id);
  }
  std::vector<std::vector<int32_t>> epochs;
  for (int e = 0; e < 3; ++e) {
    std::vector<int32_t> ep(seen.begin() + 21 * e, seen.begin() + 21 * (e + 1));
    epochs.push_back(ep);
    std::sort(ep.begin(), ep.end());
    for (int i = 0; i < 21; ++i) CHECK(ep[i] == i);
  }
  CHECK(epochs[0] != epochs[1]);
  CHECK(epochs[1] != epochs[2]);
  // Fields travel with their sample.
  dskc::ShardDataset again(dir.path.string(), 8, 42);
  auto b = again.next_batch(21);
  CHECK(sample_ids(b) == epochs[0]);
  for (int i = 0; i < 21; ++i) {
    int32_t id = b.input_ids[static_cast<size_t>(i) * 8 + 1];
    int local = id < 7 ? id : id < 12 ? id - 7 : id - 12;
    CHECK(b.next_sentence_labels[i] == local % 2);
    CHECK(b.masked_lm_ids[static_cast<size_t>(i) * 3 + 2] == 7 * local + 2);
  }
  dskc::ShardDataset other(dir.path.string(), 8, 43);
  CHECK(sample_ids(other.next_batch(21)) != epochs[0]);
}

TEST_CASE("dataset: ranks are disjoint and together cover every sample") {
  TempDir dir;
  write_dataset(dir, {7, 5, 9, 2}, 8, 3);
  for (int world : {2, 3, 5}) {
    std::multiset<int32_t> all;
    for (int rank = 0; rank < world; ++rank) {
      dskc::ShardDataset ds(dir.path.string(), 8, 7, rank, world);
      uint64_t n = ds.samples_per_epoch();
      auto b = ds.next_batch(static_cast<int>(n));
      for (int32_t id : sample_ids(b)) all.insert(id);
    }
    CHECK(all.size() == 23);
    for (int i = 0; i < 23; ++i) CHECK(all.count(i) == 1);
  }
}

TEST_CASE("dataset: resume from position() replays the same batches") {
  TempDir dir;
  write_dataset(dir, {7, 5, 9}, 8, 3);
  for (int world : {1, 2}) {
    dskc::ShardDataset a(dir.path.string(), 8, 5, world - 1, world);
    for (int i = 0; i < 7; ++i) a.next_batch(3);  // well into the second epoch
    dskc::DataPosition pos = a.position();
    std::vector<std::vector<int32_t>> expect;
    for (int i = 0; i < 9; ++i) expect.push_back(a.next_batch(3).input_ids);

    dskc::ShardDataset b(dir.path.string(), 8, 5, world - 1, world);
    b.seek(pos);
    CHECK(b.position() == pos);
    for (int i = 0; i < 9; ++i) CHECK(b.next_batch(3).input_ids == expect[i]);
    CHECK(b.position() == a.position());
  }
  dskc::ShardDataset d(dir.path.string(), 8, 5);
  CHECK(error_of([&] { d.seek({0, 3, 0}); }).kind() == ErrorKind::Input);
  CHECK(error_of([&] { d.seek({0, 0, 100}); }).kind() == ErrorKind::Input);
}

TEST_CASE("dataset: seek_taken(n) continues exactly where n samples left every rank") {
  TempDir dir;
  write_dataset(dir, {7, 5, 9, 2}, 8, 3);
  for (int world : {1, 2, 3}) {
    for (int rank = 0; rank < world; ++rank) {
      // Counts inside a shard, at shard ends, and in later epochs (23 samples in all).
      for (uint64_t n : {0, 1, 3, 4, 5, 6, 11, 12, 23, 30, 47}) {
        CAPTURE(world);
        CAPTURE(rank);
        CAPTURE(n);
        dskc::ShardDataset a(dir.path.string(), 8, 9, rank, world);
        if (n > 0) a.next_batch(static_cast<int>(n));
        CHECK(a.position().taken == n);
        const auto expect = a.next_batch(13).input_ids;
        dskc::ShardDataset b(dir.path.string(), 8, 9, rank, world);
        b.seek_taken(n);
        CHECK(b.position().taken == n);
        CHECK(b.next_batch(13).input_ids == expect);
        CHECK(b.position().taken == n + 13);
      }
    }
  }
}

TEST_CASE("dataset: bad directories and mismatched shards") {
  TempDir dir;
  Error e = error_of([&] { dskc::ShardDataset(dir / "missing", 8, 1); });
  CHECK(std::string(e.what()).find("no such data directory") != std::string::npos);
  e = error_of([&] { dskc::ShardDataset(dir.path.string(), 8, 1); });
  CHECK(std::string(e.what()).find("no *.hdf5 or *.h5 shard files") != std::string::npos);

  dskc::write_shard(dir / "a.hdf5", make_shard(4, 8, 3));
  dskc::write_shard(dir / "b.hdf5", make_shard(4, 16, 3));
  e = error_of([&] { dskc::ShardDataset(dir.path.string(), 8, 1); });
  CHECK(e.kind() == ErrorKind::Input);
  CHECK(std::string(e.what()) ==
        dir / "b.hdf5" + ": shard has sequence length 16, but the requested max_seq_length is 8");

  TempDir small;
  dskc::write_shard(small / "a.hdf5", make_shard(2, 8, 3));
  e = error_of([&] { dskc::ShardDataset(small.path.string(), 8, 1, 3, 4); });
  CHECK(std::string(e.what()).find("leave none for rank 3 of 4") != std::string::npos);
  CHECK(error_of([&] { dskc::ShardDataset(small.path.string(), 8, 1, 4, 4); }).kind() == ErrorKind::Usage);
}

TEST_CASE("BatchPrefetcher: the batches and positions of synchronous reads, across shards and epochs") {
  TempDir dir;
  write_dataset(dir, {7, 5, 9}, 8, 3);
  dskc::ShardDataset ref(dir.path.string(), 8, 5);
  std::vector<dskc::DataPosition> where, after;
  std::vector<std::vector<int32_t>> ids;
  for (int i = 0; i < 12; ++i) {  // 36 samples: into the second epoch
    where.push_back(ref.position());
    ids.push_back(ref.next_batch(3).input_ids);
    after.push_back(ref.position());
  }
  for (bool ahead : {false, true}) {
    CAPTURE(ahead);
    dskc::ShardDataset d(dir.path.string(), 8, 5);
    {
      dskc::BatchPrefetcher p(d, 3, ahead);
      CHECK(p.position() == where[0]);
      for (int i = 0; i < 12; ++i) {
        CAPTURE(i);
        const dskc::BatchPrefetcher::Item it = p.next(i + 1 < 12);
        CHECK(it.batch.input_ids == ids[i]);
        CHECK(it.where == where[i]);
        // What a checkpoint records now: the next batch's position, although a read may be in flight.
        CHECK(p.position() == after[i]);
      }
    }
    // The last next() started no read: the dataset stands right after the last batch taken.
    CHECK(d.position() == after[11]);
  }
  dskc::ShardDataset d(dir.path.string(), 8, 5);
  {
    dskc::BatchPrefetcher p(d, 3, true);
    p.next();  // leaves a read in flight; the destructor waits for it
  }
  CHECK(d.position() == after[1]);
}

TEST_CASE("BatchPrefetcher: a read's error comes out of the next() that would have returned its batch") {
  TempDir dir;
  dskc::write_shard(dir / "a.hdf5", make_shard(4, 8, 3));
  dskc::write_shard(dir / "b.hdf5", make_shard(4, 8, 3, 100));
  for (bool ahead : {false, true}) {
    CAPTURE(ahead);
    dskc::ShardDataset d(dir.path.string(), 8, 5);
    dskc::BatchPrefetcher p(d, 4, ahead);
    // Whichever shard the epoch reads second is replaced by one of another size after the dataset
    // planned the epoch: loading it fails.
    const dskc::Batch first = p.next(false).batch;  // no read in flight while the file changes
    const bool a_first = first.input_ids[1] < 100;
    dskc::write_shard(dir / (a_first ? "b.hdf5" : "a.hdf5"), make_shard(6, 8, 3));
    const Error e = error_of([&] { p.next(); });
    CHECK(std::string(e.what()).find("shard changed while the dataset was open") != std::string::npos);
    dskc::write_shard(dir / (a_first ? "b.hdf5" : "a.hdf5"), make_shard(4, 8, 3, a_first ? 100 : 0));
  }
}

TEST_CASE("DSKC_TRAIN_PREFETCH: 1 or unset reads ahead, 0 does not, another word is an error") {
  dskc_test::ScopedEnv unset("DSKC_TRAIN_PREFETCH", nullptr);
  CHECK(dskc::train_prefetch_from_env());
  dskc_test::ScopedEnv zero("DSKC_TRAIN_PREFETCH", "0");
  CHECK_FALSE(dskc::train_prefetch_from_env());
  dskc_test::ScopedEnv bad("DSKC_TRAIN_PREFETCH", "yes");
  const Error e = error_of([] { dskc::train_prefetch_from_env(); });
  CHECK(e.kind() == ErrorKind::Config);
  CHECK(std::string(e.what()).find("DSKC_TRAIN_PREFETCH=yes: expected 1") != std::string::npos);
}

TEST_CASE("BatchPrefetcher: the prepare step runs on the reading thread and travels with its batch") {
  TempDir dir;
  write_dataset(dir, {7, 5}, 8, 3);
  struct Tag : dskc::PreparedBatch {
    std::vector<int32_t> ids;
    std::thread::id thread;
  };
  for (bool ahead : {false, true}) {
    CAPTURE(ahead);
    dskc::ShardDataset d(dir.path.string(), 8, 5);
    dskc::BatchPrefetcher p(d, 3, ahead, [](const dskc::Batch& b) {
      auto t = std::make_unique<Tag>();
      t->ids = sample_ids(b);
      t->thread = std::this_thread::get_id();
      return t;
    });
    for (int i = 0; i < 5; ++i) {
      const dskc::BatchPrefetcher::Item it = p.next();
      const auto* tag = dynamic_cast<const Tag*>(it.prepared.get());
      REQUIRE(tag != nullptr);
      CHECK(tag->ids == sample_ids(it.batch));  // prepared from this very batch
      // Read ahead, the worker prepares it; else the caller, when it asks.
      CHECK((tag->thread == std::this_thread::get_id()) == !ahead);
    }
  }
}
