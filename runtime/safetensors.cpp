// safetensors reader/writer (see safetensors.h for the format, validation rules and atomicity).
#include "runtime/safetensors.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <sys/stat.h>
#include <unistd.h>

#include "compiler/errors.h"
#include "runtime/host_float.h"

static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian host");

namespace dskc {
namespace {

using nlohmann::json;

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw Error(ErrorKind::Input, path + ": " + what);
}

// Element count with overflow detection; -1 on overflow or a negative dim.
int64_t checked_numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return -1;
  }
  return n;
}

std::string read_whole_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(ErrorKind::Io, fmt::format("{}: cannot open for reading: {}", path, std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(ErrorKind::Io, fmt::format("{}: not a regular file", path));
  }
  std::string data(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < data.size()) {
    const ssize_t r = ::read(fd, data.data() + got, data.size() - got);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) break;  // file shrank while reading: validation below reports the truncation
    if (r < 0) {
      const int err = errno;
      ::close(fd);
      throw Error(ErrorKind::Io, fmt::format("{}: read failed: {}", path, std::strerror(err)));
    }
    got += static_cast<size_t>(r);
  }
  data.resize(got);
  ::close(fd);
  return data;
}

// A non-negative JSON integer, or fail naming `what`.
uint64_t json_uint(const json& v, const std::string& path, const std::string& what) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer() && v.get<int64_t>() >= 0) return static_cast<uint64_t>(v.get<int64_t>());
  fail(path, fmt::format("{} must be a non-negative integer, got {}", what, v.dump()));
}

struct Entry {
  std::string name;
  uint64_t begin, end;
};

}  // namespace

int st_dtype_size(const std::string& dtype) {
  static const std::map<std::string, int> kSizes = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},   {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"I16", 2}, {"U16", 2}, {"F16", 2},
      {"BF16", 2}, {"I32", 4}, {"U32", 4},  {"F32", 4},     {"F64", 8},     {"I64", 8}, {"U64", 8},
  };
  auto it = kSizes.find(dtype);
  return it == kSizes.end() ? 0 : it->second;
}

const char* st_dtype_name(DType t) {
  switch (t) {
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    case DType::F32: break;
  }
  return "F32";
}

int64_t st_numel(const std::vector<int64_t>& shape) { return checked_numel(shape); }

SafeTensorsFile read_safetensors(const std::string& path) {
  const std::string data = read_whole_file(path);
  if (data.size() < 8) {
    fail(path, fmt::format("file is {} bytes, shorter than the 8-byte header length: not a safetensors file",
                           data.size()));
  }
  uint64_t header_len = 0;
  std::memcpy(&header_len, data.data(), 8);
  if (header_len > data.size() - 8) {
    fail(path, fmt::format("header length {} goes beyond the end of the file ({} bytes): truncated or not "
                           "a safetensors file",
                           header_len, data.size()));
  }
  const std::string header = data.substr(8, header_len);
  json j;
  try {
    j = json::parse(header);
  } catch (const json::parse_error& e) {
    fail(path, fmt::format("malformed JSON header: {}", e.what()));
  }
  if (!j.is_object()) fail(path, "JSON header is not an object");

  SafeTensorsFile out;
  std::vector<Entry> entries;
  const uint64_t buffer_size = data.size() - 8 - header_len;
  for (const auto& [name, v] : j.items()) {
    if (name == "__metadata__") {
      if (!v.is_object()) fail(path, "__metadata__ must be an object of strings");
      for (const auto& [k, s] : v.items()) {
        if (!s.is_string()) fail(path, fmt::format("__metadata__ value for '{}' is not a string", k));
        out.metadata[k] = s.get<std::string>();
      }
      continue;
    }
    const std::string where = fmt::format("tensor '{}'", name);
    if (!v.is_object()) fail(path, where + " header entry is not an object");
    if (!v.contains("dtype") || !v["dtype"].is_string()) fail(path, where + " has no string 'dtype'");
    if (!v.contains("shape") || !v["shape"].is_array()) fail(path, where + " has no 'shape' array");
    if (!v.contains("data_offsets") || !v["data_offsets"].is_array() || v["data_offsets"].size() != 2) {
      fail(path, where + " has no 'data_offsets' [begin, end] pair");
    }
    StTensor t;
    t.dtype = v["dtype"].get<std::string>();
    const int esize = st_dtype_size(t.dtype);
    if (esize == 0) {
      fail(path, fmt::format("{} has unknown dtype '{}' (known: BOOL, U8, I8, F8_E5M2, F8_E4M3, I16, U16, F16, "
                             "BF16, I32, U32, F32, F64, I64, U64)",
                             where, t.dtype));
    }
    for (const json& d : v["shape"]) {
      const uint64_t dim = json_uint(d, path, where + " shape entry");
      if (dim > static_cast<uint64_t>(INT64_MAX)) fail(path, where + " shape entry is too large");
      t.shape.push_back(static_cast<int64_t>(dim));
    }
    const uint64_t begin = json_uint(v["data_offsets"][0], path, where + " data_offsets[0]");
    const uint64_t end = json_uint(v["data_offsets"][1], path, where + " data_offsets[1]");
    if (end < begin) fail(path, fmt::format("{} has data_offsets [{}, {}] with end before begin", where, begin, end));
    const int64_t numel = checked_numel(t.shape);
    int64_t nbytes = 0;
    if (numel < 0 || __builtin_mul_overflow(numel, static_cast<int64_t>(esize), &nbytes)) {
      fail(path, fmt::format("{} shape [{}] is too large", where, fmt::join(t.shape, ", ")));
    }
    if (end - begin != static_cast<uint64_t>(nbytes)) {
      fail(path, fmt::format("{} data_offsets [{}, {}] span {} bytes but shape [{}] of {} needs {} bytes", where,
                             begin, end, end - begin, fmt::join(t.shape, ", "), t.dtype, nbytes));
    }
    if (end > buffer_size) {
      fail(path, fmt::format("{} data_offsets [{}, {}] go beyond the data section ({} bytes): the file is "
                             "truncated or the offsets are wrong",
                             where, begin, end, buffer_size));
    }
    entries.push_back({name, begin, end});
    out.tensors.emplace(name, std::move(t));
  }
  // Ranges must tile [0, buffer_size) exactly, as the reference implementation requires.
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t pos = 0;
  std::string prev;
  for (const Entry& e : entries) {
    if (e.begin < pos) {
      fail(path, fmt::format("tensor '{}' data_offsets [{}, {}] overlap tensor '{}' (which ends at {})", e.name,
                             e.begin, e.end, prev, pos));
    }
    if (e.begin > pos) {
      fail(path, fmt::format("{} unused bytes before tensor '{}' (data_offsets [{}, {}]): offsets must be "
                             "contiguous",
                             e.begin - pos, e.name, e.begin, e.end));
    }
    out.tensors[e.name].bytes = data.substr(8 + header_len + e.begin, e.end - e.begin);
    pos = e.end;
    prev = e.name;
  }
  if (pos != buffer_size) {
    fail(path, fmt::format("data section is {} bytes but the tensors cover {} bytes: trailing bytes",
                           buffer_size, pos));
  }
  return out;
}

void write_safetensors(const std::string& path, const SafeTensorsFile& file) {
  json header = json::object();
  uint64_t offset = 0;
  for (const auto& [name, t] : file.tensors) {
    if (name == "__metadata__") fail(path, "a tensor cannot be named __metadata__");
    const int esize = st_dtype_size(t.dtype);
    if (esize == 0) fail(path, fmt::format("tensor '{}' has unknown dtype '{}'", name, t.dtype));
    const int64_t numel = checked_numel(t.shape);
    if (numel < 0 || static_cast<uint64_t>(numel) * esize != t.bytes.size()) {
      fail(path, fmt::format("tensor '{}' has {} bytes but shape [{}] of {} needs {}", name, t.bytes.size(),
                             fmt::join(t.shape, ", "), t.dtype, numel * esize));
    }
    header[name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  if (!file.metadata.empty()) header["__metadata__"] = file.metadata;
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // keep the data section 8-byte aligned
  const uint64_t len = text.size();
  std::string blob(8, '\0');
  std::memcpy(blob.data(), &len, 8);
  blob += text;
  blob.reserve(blob.size() + offset);
  for (const auto& [name, t] : file.tensors) blob += t.bytes;

  namespace fs = std::filesystem;
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::string tmp_name = ".";  // built piecewise: GCC 12 warns falsely (-Wrestrict) on "." + str
  tmp_name += target.filename().string();
  tmp_name += ".tmp.XXXXXX";
  std::string tmp = (dir / tmp_name).string();
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0) {
    throw Error(ErrorKind::Io, fmt::format("{}: cannot create a file in directory {}: {}", path, dir.string(),
                                           std::strerror(errno)));
  }
  auto abandon = [&](const std::string& what, int err) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw Error(ErrorKind::Io, fmt::format("{}: {}: {}", path, what, std::strerror(err)));
  };
  size_t done = 0;
  while (done < blob.size()) {
    const ssize_t w = ::write(fd, blob.data() + done, blob.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) abandon("write failed", w < 0 ? errno : ENOSPC);
    done += static_cast<size_t>(w);
  }
  if (::fchmod(fd, 0644) != 0) abandon("cannot set permissions", errno);
  if (::fsync(fd) != 0) abandon("fsync failed", errno);
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw Error(ErrorKind::Io, fmt::format("{}: close failed: {}", path, std::strerror(err)));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw Error(ErrorKind::Io, fmt::format("{}: cannot rename the finished file into place: {}", path,
                                           std::strerror(err)));
  }
}

std::vector<double> tensor_to_doubles(const StTensor& t) {
  const int esize = st_dtype_size(t.dtype);
  const int64_t numel = checked_numel(t.shape);
  if (esize == 0) throw Error(ErrorKind::Input, fmt::format("unknown tensor dtype '{}'", t.dtype));
  if (numel < 0 || static_cast<uint64_t>(numel) * esize != t.bytes.size()) {
    throw Error(ErrorKind::Input, fmt::format("tensor has {} bytes but shape [{}] of {} needs {}", t.bytes.size(),
                                              fmt::join(t.shape, ", "), t.dtype, numel * esize));
  }
  std::vector<double> out(static_cast<size_t>(numel));
  const char* p = t.bytes.data();
  auto load = [&]<typename T>(T) {
    for (size_t i = 0; i < out.size(); ++i) {
      T v;
      std::memcpy(&v, p + i * sizeof(T), sizeof(T));
      out[i] = static_cast<double>(v);
    }
  };
  const std::string& d = t.dtype;
  if (d == "F32") load(float{});
  else if (d == "F64") load(double{});
  else if (d == "F16" || d == "BF16") {
    for (size_t i = 0; i < out.size(); ++i) {
      uint16_t v;
      std::memcpy(&v, p + i * 2, 2);
      out[i] = d == "F16" ? half_bits_to_float(v) : bf16_bits_to_float(v);
    }
  } else if (d == "BOOL") {
    for (size_t i = 0; i < out.size(); ++i) out[i] = p[i] != 0 ? 1.0 : 0.0;
  } else if (d == "U8") load(uint8_t{});
  else if (d == "I8") load(int8_t{});
  else if (d == "I16") load(int16_t{});
  else if (d == "U16") load(uint16_t{});
  else if (d == "I32") load(int32_t{});
  else if (d == "U32") load(uint32_t{});
  else if (d == "I64") load(int64_t{});
  else if (d == "U64") load(uint64_t{});
  else throw Error(ErrorKind::Input, fmt::format("cannot convert dtype {} to numbers (8-bit floats are not supported)", d));
  return out;
}

StTensor tensor_from_doubles(const std::vector<double>& values, const std::vector<int64_t>& shape,
                             const std::string& dtype) {
  const int64_t numel = checked_numel(shape);
  if (numel < 0 || static_cast<uint64_t>(numel) != values.size()) {
    throw Error(ErrorKind::Input, fmt::format("{} values do not fill shape [{}]", values.size(), fmt::join(shape, ", ")));
  }
  StTensor t{dtype, shape, {}};
  auto put = [&](const auto& v) { t.bytes.append(reinterpret_cast<const char*>(&v), sizeof(v)); };
  auto integral = [&](double x, double lo, double hi) {
    if (!(x == std::floor(x) && x >= lo && x <= hi)) {
      throw Error(ErrorKind::Input, fmt::format("value {} cannot be stored exactly as {}", x, dtype));
    }
  };
  if (dtype == "F32") for (double x : values) put(static_cast<float>(x));
  else if (dtype == "F64") for (double x : values) put(x);
  else if (dtype == "F16") for (double x : values) put(double_to_half_bits(x));
  else if (dtype == "BF16") for (double x : values) put(double_to_bf16_bits(x));
  else if (dtype == "I32") {
    for (double x : values) integral(x, INT32_MIN, INT32_MAX), put(static_cast<int32_t>(x));
  } else if (dtype == "I64") {
    for (double x : values) integral(x, -0x1p63, 0x1p63 - 1024), put(static_cast<int64_t>(x));
  } else {
    throw Error(ErrorKind::Input, fmt::format("cannot store numbers as dtype '{}' (use F32, F16, BF16, F64, I32 or I64)", dtype));
  }
  return t;
}

StTensor tensor_from_doubles(const std::vector<double>& values, const std::vector<int64_t>& shape, DType dtype) {
  return tensor_from_doubles(values, shape, st_dtype_name(dtype));
}

}  // namespace dskc
