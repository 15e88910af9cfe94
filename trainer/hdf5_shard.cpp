// HDF5 shard reading/writing and ShardDataset (see hdf5_shard.h for the format).
// All HDF5 handles are owned by H5Id (closed on scope exit, also on throw). HDF5's own error
// printing is silenced; each failure becomes one dskc::Error naming the file.
#include "trainer/hdf5_shard.h"

#include <fmt/format.h>
#include <hdf5.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <numeric>
#include <system_error>

#include "compiler/errors.h"

namespace dskc {
namespace fs = std::filesystem;

namespace {

// Owns one hid_t and closes it with the matching H5?close.
class H5Id {
 public:
  H5Id(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  H5Id(const H5Id&) = delete;
  H5Id& operator=(const H5Id&) = delete;
  H5Id(H5Id&& o) noexcept : id_(o.id_), close_(o.close_) { o.id_ = H5I_INVALID_HID; }
  H5Id& operator=(H5Id&&) = delete;
  ~H5Id() {
    if (id_ >= 0) close_(id_);
  }
  hid_t get() const { return id_; }
  bool ok() const { return id_ >= 0; }
  // Closes now and reports whether the close succeeded (file close flushes data).
  bool close() {
    hid_t id = id_;
    id_ = H5I_INVALID_HID;
    return id < 0 || close_(id) >= 0;
  }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

void quiet_hdf5() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw Error(ErrorKind::Input, fmt::format("{}: {}", path, what));
}

// The six datasets, with their rank and the shape they should have.
struct Field {
  const char* name;
  int rank;
  const char* shape;
};
constexpr std::array<Field, 6> kFields = {{
    {"input_ids", 2, "[N,S]"},
    {"input_mask", 2, "[N,S]"},
    {"segment_ids", 2, "[N,S]"},
    {"masked_lm_positions", 2, "[N,P]"},
    {"masked_lm_ids", 2, "[N,P]"},
    {"next_sentence_labels", 1, "[N]"},
}};

H5Id open_file(const std::string& path) {
  quiet_hdf5();
  std::error_code ec;
  if (!fs::exists(path, ec)) fail(path, "no such file");
  if (fs::is_directory(path, ec)) fail(path, "is a directory, expected an HDF5 shard file");
  htri_t is = H5Fis_hdf5(path.c_str());
  if (is <= 0) fail(path, is == 0 ? "not an HDF5 file" : "cannot be opened (unreadable or truncated)");
  H5Id f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (!f.ok()) fail(path, "cannot be opened as HDF5 (truncated or corrupt file?)");
  return f;
}

// Opens dataset `field` and checks it exists, holds integers and has the expected rank.
H5Id open_dataset(hid_t file, const std::string& path, const Field& field, std::vector<hsize_t>* dims) {
  htri_t exists = H5Lexists(file, field.name, H5P_DEFAULT);
  if (exists <= 0)
    fail(path, fmt::format("missing dataset '{}' (expected {} integers)", field.name, field.shape));
  H5Id ds(H5Dopen2(file, field.name, H5P_DEFAULT), H5Dclose);
  if (!ds.ok()) fail(path, fmt::format("cannot open dataset '{}' (corrupt file?)", field.name));
  H5Id type(H5Dget_type(ds.get()), H5Tclose);
  if (!type.ok() || H5Tget_class(type.get()) != H5T_INTEGER)
    fail(path, fmt::format("dataset '{}' does not hold integers", field.name));
  H5Id space(H5Dget_space(ds.get()), H5Sclose);
  int rank = space.ok() ? H5Sget_simple_extent_ndims(space.get()) : -1;
  if (rank < 0) fail(path, fmt::format("cannot read the shape of dataset '{}'", field.name));
  if (rank != field.rank)
    fail(path, fmt::format("dataset '{}' has rank {}, expected {} ({})", field.name, rank, field.rank,
                           field.shape));
  dims->assign(static_cast<size_t>(rank), 0);
  H5Sget_simple_extent_dims(space.get(), dims->data(), nullptr);
  return ds;
}

// Reads a whole integer dataset as int32. Wide or unsigned source types are read as int64
// first so that out-of-range values are reported rather than silently clipped.
std::vector<int32_t> read_ints(hid_t ds, size_t count, const std::string& path, const char* name) {
  std::vector<int32_t> out(count);
  if (count == 0) return out;
  H5Id type(H5Dget_type(ds), H5Tclose);
  bool narrow =
      H5Tget_size(type.get()) < 4 || (H5Tget_size(type.get()) == 4 && H5Tget_sign(type.get()) == H5T_SGN_2);
  if (narrow) {
    if (H5Dread(ds, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()) < 0)
      fail(path, fmt::format("cannot read dataset '{}' (truncated or corrupt file?)", name));
    return out;
  }
  std::vector<int64_t> wide(count);
  if (H5Dread(ds, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, wide.data()) < 0)
    fail(path, fmt::format("cannot read dataset '{}' (truncated or corrupt file?)", name));
  for (size_t i = 0; i < count; ++i) {
    if (wide[i] > INT32_MAX || wide[i] < INT32_MIN)
      fail(path, fmt::format("dataset '{}' element {} = {} does not fit in int32", name, i, wide[i]));
    out[i] = static_cast<int32_t>(wide[i]);
  }
  return out;
}

// First element of `v` (laid out [rows, cols]) outside [lo, hi), reported by name and index.
void check_range(const std::string& path, const char* name, const std::vector<int32_t>& v, int64_t cols,
                 int64_t lo, int64_t hi, const std::string& expected) {
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] >= lo && v[i] < hi) continue;
    std::string where = cols > 0 ? fmt::format("{}[{}][{}]", name, static_cast<int64_t>(i) / cols,
                                               static_cast<int64_t>(i) % cols)
                                 : fmt::format("{}[{}]", name, i);
    fail(path, fmt::format("{} = {} {}", where, v[i], expected));
  }
}

ShardInfo shapes(hid_t file, const std::string& path, std::array<std::vector<hsize_t>, 6>* dims,
                 std::vector<H5Id>* datasets) {
  for (size_t i = 0; i < kFields.size(); ++i) {
    H5Id ds = open_dataset(file, path, kFields[i], &(*dims)[i]);
    if (datasets) datasets->push_back(std::move(ds));
  }
  const auto& d = *dims;
  hsize_t n = d[0][0], s = d[0][1], p = d[3][1];
  for (size_t i = 1; i < kFields.size(); ++i) {
    if (d[i][0] != n)
      fail(path, fmt::format("inconsistent first dimensions: '{}' has {} samples but '{}' has {}",
                             kFields[0].name, n, kFields[i].name, d[i][0]));
  }
  for (size_t i : {1, 2})
    if (d[i][1] != s)
      fail(path, fmt::format("dataset '{}' has sequence length {} but 'input_ids' has {}", kFields[i].name,
                             d[i][1], s));
  if (d[4][1] != p)
    fail(path, fmt::format("dataset 'masked_lm_ids' has {} predictions per sample but "
                           "'masked_lm_positions' has {}",
                           d[4][1], p));
  if (s == 0) fail(path, "sequence length (second dimension of 'input_ids') is 0");
  if (s > INT32_MAX || p > INT32_MAX) fail(path, "dimensions too large");
  return {static_cast<int64_t>(n), static_cast<int>(s), static_cast<int>(p)};
}

}  // namespace

ShardInfo read_shard_info(const std::string& path) {
  H5Id file = open_file(path);
  std::array<std::vector<hsize_t>, 6> dims;
  return shapes(file.get(), path, &dims, nullptr);
}

PretrainShard read_shard(const std::string& path) {
  H5Id file = open_file(path);
  std::array<std::vector<hsize_t>, 6> dims;
  std::vector<H5Id> ds;
  ShardInfo info = shapes(file.get(), path, &dims, &ds);
  PretrainShard sh;
  sh.num_samples = info.num_samples;
  sh.seq_len = info.seq_len;
  sh.max_pred = info.max_pred;
  size_t ns = static_cast<size_t>(info.num_samples) * info.seq_len;
  size_t np = static_cast<size_t>(info.num_samples) * info.max_pred;
  sh.input_ids = read_ints(ds[0].get(), ns, path, kFields[0].name);
  sh.input_mask = read_ints(ds[1].get(), ns, path, kFields[1].name);
  sh.segment_ids = read_ints(ds[2].get(), ns, path, kFields[2].name);
  sh.masked_lm_positions = read_ints(ds[3].get(), np, path, kFields[3].name);
  sh.masked_lm_ids = read_ints(ds[4].get(), np, path, kFields[4].name);
  sh.next_sentence_labels =
      read_ints(ds[5].get(), static_cast<size_t>(info.num_samples), path, kFields[5].name);

  const int64_t S = sh.seq_len, P = sh.max_pred;
  check_range(path, "input_ids", sh.input_ids, S, 0, INT32_MAX, "is negative");
  check_range(path, "input_mask", sh.input_mask, S, 0, 2, "is not 0 or 1");
  check_range(path, "segment_ids", sh.segment_ids, S, 0, 2, "is not 0 or 1");
  check_range(path, "masked_lm_positions", sh.masked_lm_positions, P, 0, S,
              fmt::format("is out of range [0,{})", S));
  check_range(path, "masked_lm_ids", sh.masked_lm_ids, P, 0, INT32_MAX, "is negative");
  check_range(path, "next_sentence_labels", sh.next_sentence_labels, 0, 0, 2, "is not 0 or 1");
  return sh;
}

void write_shard(const std::string& path, const PretrainShard& sh) {
  const size_t n = static_cast<size_t>(sh.num_samples);
  DSKC_ASSERT(sh.num_samples >= 0 && sh.seq_len > 0 && sh.max_pred >= 0, "bad shard shape");
  DSKC_ASSERT(sh.input_ids.size() == n * sh.seq_len && sh.input_mask.size() == n * sh.seq_len &&
                  sh.segment_ids.size() == n * sh.seq_len,
              "shard [N,S] field has the wrong size");
  DSKC_ASSERT(sh.masked_lm_positions.size() == n * sh.max_pred && sh.masked_lm_ids.size() == n * sh.max_pred,
              "shard [N,P] field has the wrong size");
  DSKC_ASSERT(sh.next_sentence_labels.size() == n, "shard [N] field has the wrong size");
  quiet_hdf5();

  fs::path target(path);
  fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  fs::path tmp = dir / fmt::format(".{}.tmp-{}", target.filename().string(), ::getpid());
  auto io_fail = [&](const std::string& what) {
    std::error_code ec;
    fs::remove(tmp, ec);
    throw Error(ErrorKind::Io, fmt::format("{}: cannot write shard: {}", path, what));
  };
  {
    H5Id file(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
    if (!file.ok()) io_fail(fmt::format("cannot create {}", tmp.string()));
    const std::array<const std::vector<int32_t>*, 6> data = {&sh.input_ids,     &sh.input_mask,
                                                             &sh.segment_ids,   &sh.masked_lm_positions,
                                                             &sh.masked_lm_ids, &sh.next_sentence_labels};
    const bool deflate = H5Zfilter_avail(H5Z_FILTER_DEFLATE) > 0;
    for (size_t i = 0; i < kFields.size(); ++i) {
      hsize_t cols = i < 3 ? static_cast<hsize_t>(sh.seq_len) : static_cast<hsize_t>(sh.max_pred);
      hsize_t dims[2] = {n, cols};
      H5Id space(H5Screate_simple(kFields[i].rank, dims, nullptr), H5Sclose);
      H5Id dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
      H5Pset_obj_track_times(dcpl.get(), false);  // no timestamps: same shard, same bytes
      // gzip as NVIDIA's writer does; chunks need a non-empty extent.
      if (deflate && n > 0 && (kFields[i].rank == 1 || cols > 0)) {
        hsize_t chunk[2] = {std::min<hsize_t>(n, kFields[i].rank == 1 ? 65536 : 1024), cols};
        H5Pset_chunk(dcpl.get(), kFields[i].rank, chunk);
        H5Pset_deflate(dcpl.get(), 4);
      }
      H5Id ds(H5Dcreate2(file.get(), kFields[i].name, H5T_STD_I32LE, space.get(), H5P_DEFAULT, dcpl.get(),
                         H5P_DEFAULT),
              H5Dclose);
      if (!space.ok() || !ds.ok()) io_fail(fmt::format("cannot create dataset '{}'", kFields[i].name));
      if (!data[i]->empty() &&
          H5Dwrite(ds.get(), H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, data[i]->data()) < 0)
        io_fail(fmt::format("cannot write dataset '{}' (disk full?)", kFields[i].name));
      if (!ds.close()) io_fail(fmt::format("cannot finish dataset '{}'", kFields[i].name));
    }
    if (H5Fflush(file.get(), H5F_SCOPE_LOCAL) < 0 || !file.close()) io_fail("cannot flush (disk full?)");
  }
  std::error_code ec;
  fs::rename(tmp, target, ec);
  if (ec) io_fail(fmt::format("cannot rename {} into place: {}", tmp.string(), ec.message()));
}

// ---------------------------------------------------------------------------------------------
// ShardDataset

namespace {

uint64_t splitmix64(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// A permutation of [0,n) that depends only on (seed, epoch, stream): Fisher-Yates driven by
// splitmix64, with an unbiased-enough multiply-shift bound (std::shuffle's output differs
// between standard libraries, which would break resuming elsewhere).
std::vector<uint32_t> shuffled(uint64_t n, uint64_t seed, uint64_t epoch, uint64_t stream) {
  std::vector<uint32_t> v(n);
  std::iota(v.begin(), v.end(), 0u);
  uint64_t s = seed;
  s = splitmix64(s) ^ (epoch * 0xd1b54a32d192ed03ull);
  s = splitmix64(s) ^ (stream * 0x8cb92ba72f3d8dd7ull);
  for (uint64_t i = n; i > 1; --i) {
    uint64_t j = static_cast<uint64_t>((static_cast<unsigned __int128>(splitmix64(s)) * i) >> 64);
    std::swap(v[i - 1], v[j]);
  }
  return v;
}

constexpr uint64_t kShardOrderStream = ~uint64_t{0};

}  // namespace

ShardDataset::ShardDataset(const std::string& dir, int seq_len, uint64_t seed, int rank, int world_size)
    : dir_(dir), seq_len_(seq_len), seed_(seed), rank_(rank), world_size_(world_size) {
  if (world_size < 1 || rank < 0 || rank >= world_size)
    throw Error(ErrorKind::Usage, fmt::format("data rank {} is not in [0, world size {})", rank, world_size));
  if (seq_len < 1) throw Error(ErrorKind::Usage, fmt::format("sequence length {} must be positive", seq_len));
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw Error(ErrorKind::Input, fmt::format("{}: no such data directory", dir));
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::string ext = e.path().extension().string();
    if ((ext == ".hdf5" || ext == ".h5") && e.is_regular_file() && e.path().filename().string()[0] != '.')
      files_.push_back(e.path().string());
  }
  if (ec) throw Error(ErrorKind::Input, fmt::format("{}: cannot list directory: {}", dir, ec.message()));
  std::sort(files_.begin(), files_.end());
  if (files_.empty()) throw Error(ErrorKind::Input, fmt::format("{}: no *.hdf5 or *.h5 shard files", dir));

  for (const auto& f : files_) {
    ShardInfo info = read_shard_info(f);
    if (info.seq_len != seq_len)
      fail(f, fmt::format("shard has sequence length {}, but the requested max_seq_length is {}",
                          info.seq_len, seq_len));
    if (infos_.empty()) max_pred_ = info.max_pred;
    if (info.max_pred != max_pred_)
      fail(f, fmt::format("shard has {} predictions per sample, but {} has {}", info.max_pred, files_[0],
                          max_pred_));
    infos_.push_back(info);
    total_samples_ += static_cast<uint64_t>(info.num_samples);
    rank_samples_ += rank_count(info.num_samples);
  }
  if (rank_samples_ == 0)
    throw Error(ErrorKind::Input, fmt::format("{}: {} samples in {} shards leave none for rank {} of {}", dir,
                                              total_samples_, files_.size(), rank, world_size));
}

uint64_t ShardDataset::rank_count(int64_t n) const {
  return n > rank_ ? static_cast<uint64_t>(n - rank_ + world_size_ - 1) / world_size_ : 0;
}

void ShardDataset::start_epoch(uint64_t epoch) {
  if (order_epoch_ == epoch) return;
  shard_order_ = shuffled(files_.size(), seed_, epoch, kShardOrderStream);
  order_epoch_ = epoch;
}

void ShardDataset::load_shard() {
  start_epoch(pos_.epoch);
  int64_t file = shard_order_[pos_.shard];
  if (file == loaded_file_ && loaded_epoch_ == pos_.epoch) return;
  if (file != loaded_file_) {
    loaded_file_ = -1;
    shard_ = read_shard(files_[file]);
    const ShardInfo& info = infos_[file];
    if (shard_.num_samples != info.num_samples || shard_.seq_len != info.seq_len ||
        shard_.max_pred != info.max_pred)
      fail(files_[file], "shard changed while the dataset was open");
  }
  sample_order_ = shuffled(static_cast<uint64_t>(shard_.num_samples), seed_, pos_.epoch, file);
  loaded_file_ = file;
  loaded_epoch_ = pos_.epoch;
}

Batch ShardDataset::next_batch(int batch_size) {
  if (batch_size < 1)
    throw Error(ErrorKind::Usage, fmt::format("batch size {} must be positive", batch_size));
  const size_t S = seq_len_, P = max_pred_, B = batch_size;
  Batch b;
  b.batch = batch_size;
  b.seq_len = seq_len_;
  b.max_pred = max_pred_;
  b.input_ids.resize(B * S);
  b.input_mask.resize(B * S);
  b.segment_ids.resize(B * S);
  b.masked_lm_positions.resize(B * P);
  b.masked_lm_ids.resize(B * P);
  b.next_sentence_labels.resize(B);
  size_t filled = 0;
  while (filled < B) {
    start_epoch(pos_.epoch);
    if (pos_.sample >= rank_count(infos_[shard_order_[pos_.shard]].num_samples)) {
      pos_.sample = 0;
      if (++pos_.shard == files_.size()) {
        pos_.shard = 0;
        ++pos_.epoch;
      }
      continue;
    }
    load_shard();
    size_t idx = sample_order_[rank_ + pos_.sample * world_size_];
    auto copy = [&](const std::vector<int32_t>& from, std::vector<int32_t>& to, size_t width) {
      std::copy_n(from.begin() + idx * width, width, to.begin() + filled * width);
    };
    copy(shard_.input_ids, b.input_ids, S);
    copy(shard_.input_mask, b.input_mask, S);
    copy(shard_.segment_ids, b.segment_ids, S);
    copy(shard_.masked_lm_positions, b.masked_lm_positions, P);
    copy(shard_.masked_lm_ids, b.masked_lm_ids, P);
    copy(shard_.next_sentence_labels, b.next_sentence_labels, 1);
    ++pos_.sample;
    ++pos_.taken;
    ++filled;
  }
  return b;
}

void ShardDataset::seek_taken(uint64_t taken) {
  DataPosition p;
  p.taken = taken;
  p.epoch = taken / rank_samples_;
  uint64_t rest = taken % rank_samples_;
  start_epoch(p.epoch);
  for (size_t k = 0; k < shard_order_.size(); ++k) {
    const uint64_t count = rank_count(infos_[shard_order_[k]].num_samples);
    if (rest < count) {
      p.shard = k;
      p.sample = rest;
      break;
    }
    rest -= count;
  }
  pos_ = p;
}

void ShardDataset::seek(const DataPosition& pos) {
  if (pos.shard >= files_.size())
    throw Error(ErrorKind::Input,
                fmt::format("{}: data position names shard {}, but the dataset has {} shards", dir_,
                            pos.shard, files_.size()));
  start_epoch(pos.epoch);
  uint64_t count = rank_count(infos_[shard_order_[pos.shard]].num_samples);
  if (pos.sample > count)
    throw Error(ErrorKind::Input,
                fmt::format("{}: data position names sample {} of shard {}, but this rank has {} there", dir_,
                            pos.sample, pos.shard, count));
  pos_ = pos;
}

}  // namespace dskc
