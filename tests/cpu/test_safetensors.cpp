// Tests of runtime/safetensors.h and runtime/host_float.h: round trips of every dtype, each
// malformed-file case is Error(Input) naming the file, failed writes leave no file behind, and
// fp16/bf16 conversion vectors (exact values, subnormals, ties to even, inf, NaN) plus an
// exhaustive fp16 round trip and a nearest-value check on a sweep of floats.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <sys/stat.h>

#include "compiler/errors.h"
#include "runtime/host_float.h"
#include "runtime/safetensors.h"
#include "tests/test_util.h"

using dskc_test::TempDir;
namespace fs = std::filesystem;

namespace {

dskc::Error catch_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const dskc::Error& e) {
    return e;
  }
  FAIL("expected dskc::Error");
  return dskc::Error(dskc::ErrorKind::Internal, "");
}

// A file with the given header text (length prefix added) followed by `data`.
void write_raw(const std::string& path, const std::string& header, const std::string& data) {
  std::string blob(8, '\0');
  const uint64_t n = header.size();
  std::memcpy(blob.data(), &n, 8);
  dskc_test::write_file(path, blob + header + data);
}

// Reading `path` must fail with Error(Input) whose message starts with the path and mentions `what`.
void expect_input_error(const std::string& path, const std::string& what) {
  const dskc::Error e = catch_error([&] { dskc::read_safetensors(path); });
  CHECK(e.kind() == dskc::ErrorKind::Input);
  const std::string msg = e.what();
  CAPTURE(msg);
  CHECK(msg.rfind(path + ": ", 0) == 0);
  CHECK(msg.find(what) != std::string::npos);
}

// h is a nearest 16-bit value to x (comparing with its two neighbours), the even one on a tie.
bool is_nearest_even(double x, uint16_t h, float (*to_float)(uint16_t)) {
  const double err = std::fabs(x - to_float(h));
  const double up = std::fabs(x - to_float(static_cast<uint16_t>(h + 1)));
  const double down = (h & 0x7FFF) ? std::fabs(x - to_float(static_cast<uint16_t>(h - 1))) : 1e300;
  if (err < up && err < down) return true;
  return (err == up || err == down) && (h & 1) == 0;
}

size_t files_in(const fs::path& dir) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
  return n;
}

}  // namespace

TEST_CASE("safetensors round trip of every dtype, shapes and metadata") {
  TempDir tmp;
  const std::string path = tmp / "t.safetensors";
  dskc::SafeTensorsFile f;
  const std::vector<double> vals = {1.0, -2.5, 0.15625, 61440.0, -0.0, 3.0};
  for (const char* d : {"F32", "F16", "BF16", "F64", "I32", "I64"}) {
    std::vector<double> v = vals;
    if (std::string(d)[0] == 'I') v = {1, -2, 3, 40000, 0, -7};
    f.tensors[std::string("t_") + d] = dskc::tensor_from_doubles(v, {2, 3}, d);
  }
  f.tensors["raw_u8"] = {"U8", {3}, std::string("\x01\x02\xff", 3)};
  f.tensors["raw_bool"] = {"BOOL", {2}, std::string("\x01\x00", 2)};
  f.tensors["raw_f8"] = {"F8_E4M3", {1}, std::string("\x38", 1)};
  f.tensors["raw_u64"] = {"U64", {1}, std::string("\x05\0\0\0\0\0\0\0", 8)};
  f.tensors["scalar"] = dskc::tensor_from_doubles({0.5}, {}, dskc::DType::F32);
  f.tensors["empty"] = dskc::tensor_from_doubles({}, {0, 4}, dskc::DType::F16);
  f.metadata = {{"format", "pt"}, {"dskc", "layer 0"}};
  dskc::write_safetensors(path, f);
  CHECK(files_in(tmp.path) == 1);  // no temporary left behind

  const dskc::SafeTensorsFile g = dskc::read_safetensors(path);
  CHECK(g.metadata == f.metadata);
  REQUIRE(g.tensors.size() == f.tensors.size());
  for (const auto& [name, t] : f.tensors) {
    CAPTURE(name);
    const dskc::StTensor& u = g.tensors.at(name);
    CHECK(u.dtype == t.dtype);
    CHECK(u.shape == t.shape);
    CHECK(u.bytes == t.bytes);
  }
  for (const std::string d : {"F32", "F16", "BF16", "F64"}) {
    CAPTURE(d);
    const std::vector<double> back = dskc::tensor_to_doubles(g.tensors.at("t_" + d));
    CHECK(back == vals);  // every value is exactly representable in each format
    CHECK(std::signbit(back[4]));
  }
  CHECK(dskc::tensor_to_doubles(g.tensors.at("t_I64")) == std::vector<double>{1, -2, 3, 40000, 0, -7});
  CHECK(dskc::tensor_to_doubles(g.tensors.at("raw_u8")) == std::vector<double>{1, 2, 255});
  CHECK(dskc::tensor_to_doubles(g.tensors.at("raw_bool")) == std::vector<double>{1, 0});
  CHECK(dskc::tensor_to_doubles(g.tensors.at("raw_u64")) == std::vector<double>{5});
  CHECK(dskc::tensor_to_doubles(g.tensors.at("scalar")) == std::vector<double>{0.5});
  CHECK(dskc::tensor_to_doubles(g.tensors.at("empty")).empty());
  CHECK(catch_error([&] { dskc::tensor_to_doubles(g.tensors.at("raw_f8")); }).kind() == dskc::ErrorKind::Input);

  // Layout: 8-byte little-endian length, JSON header padded to 8 bytes, offsets tile the data.
  const std::string raw = dskc_test::read_file(path);
  uint64_t n = 0;
  std::memcpy(&n, raw.data(), 8);
  CHECK(n % 8 == 0);
  const auto header = nlohmann::json::parse(raw.substr(8, n));
  CHECK(header["t_F16"]["dtype"] == "F16");
  CHECK(header["t_F16"]["shape"] == nlohmann::json::array({2, 3}));
  CHECK(header["__metadata__"]["format"] == "pt");
  uint64_t total = 0;
  for (const auto& [name, e] : header.items()) {
    if (name != "__metadata__") total += e["data_offsets"][1].get<uint64_t>() - e["data_offsets"][0].get<uint64_t>();
  }
  CHECK(raw.size() == 8 + n + total);
}

TEST_CASE("tensor_from_doubles rounds to nearest even and rejects bad input") {
  const dskc::StTensor h = dskc::tensor_from_doubles({1.0 + 0x1p-11, 1.0 + 3 * 0x1p-11}, {2}, "F16");
  CHECK(dskc::tensor_to_doubles(h) == std::vector<double>{1.0, 1.0 + 0x1p-9});
  CHECK(catch_error([] { dskc::tensor_from_doubles({1, 2, 3}, {2, 2}, "F32"); }).kind() == dskc::ErrorKind::Input);
  CHECK(catch_error([] { dskc::tensor_from_doubles({1.5}, {1}, "I32"); }).kind() == dskc::ErrorKind::Input);
  CHECK(catch_error([] { dskc::tensor_from_doubles({1}, {1}, "F8_E4M3"); }).kind() == dskc::ErrorKind::Input);
}

TEST_CASE("malformed safetensors files are input errors naming the file and the problem") {
  TempDir tmp;
  const std::string p = tmp / "bad.safetensors";
  const std::string f32x2(8, '\0');
  SUBCASE("empty file") {
    dskc_test::write_file(p, "");
    expect_input_error(p, "shorter than the 8-byte header length");
  }
  SUBCASE("file shorter than 8 bytes") {
    dskc_test::write_file(p, "abc");
    expect_input_error(p, "shorter than the 8-byte header length");
  }
  SUBCASE("header length beyond the file") {
    std::string blob(8, '\0');
    const uint64_t n = 1000;
    std::memcpy(blob.data(), &n, 8);
    dskc_test::write_file(p, blob + "{}");
    expect_input_error(p, "header length 1000 goes beyond the end of the file");
  }
  SUBCASE("huge header length") {
    dskc_test::write_file(p, std::string(8, '\xff') + "{}");
    expect_input_error(p, "goes beyond the end of the file");
  }
  SUBCASE("malformed JSON") {
    write_raw(p, R"({"a": {"dtype": "F32", )", "");
    expect_input_error(p, "malformed JSON header");
  }
  SUBCASE("header not an object") {
    write_raw(p, "[1, 2]", "");
    expect_input_error(p, "not an object");
  }
  SUBCASE("unknown dtype") {
    write_raw(p, R"({"a": {"dtype": "F17", "shape": [2], "data_offsets": [0, 8]}})", f32x2);
    expect_input_error(p, "unknown dtype 'F17'");
  }
  SUBCASE("missing field") {
    write_raw(p, R"({"a": {"dtype": "F32", "data_offsets": [0, 8]}})", f32x2);
    expect_input_error(p, "tensor 'a' has no 'shape' array");
  }
  SUBCASE("negative shape") {
    write_raw(p, R"({"a": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}})", f32x2);
    expect_input_error(p, "non-negative integer");
  }
  SUBCASE("offsets do not match shape x dtype") {
    write_raw(p, R"({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", f32x2);
    expect_input_error(p, "span 8 bytes but shape [3] of F32 needs 12 bytes");
  }
  SUBCASE("end before begin") {
    write_raw(p, R"({"a": {"dtype": "F32", "shape": [0], "data_offsets": [8, 0]}})", f32x2);
    expect_input_error(p, "end before begin");
  }
  SUBCASE("offsets out of range") {
    write_raw(p, R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [64, 72]}})", f32x2);
    expect_input_error(p, "go beyond the data section (8 bytes)");
  }
  SUBCASE("overlapping offsets") {
    write_raw(p,
              R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                  "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
              std::string(12, '\0'));
    expect_input_error(p, "overlap tensor 'a'");
  }
  SUBCASE("gap between tensors") {
    write_raw(p, R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})", std::string(12, '\0'));
    expect_input_error(p, "4 unused bytes before tensor 'a'");
  }
  SUBCASE("trailing bytes") {
    write_raw(p, R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", std::string(12, '\0'));
    expect_input_error(p, "trailing bytes");
  }
  SUBCASE("truncated data") {
    dskc::SafeTensorsFile f;
    f.tensors["w"] = dskc::tensor_from_doubles(std::vector<double>(16, 1.0), {4, 4}, dskc::DType::F32);
    dskc::write_safetensors(p, f);
    const std::string full = dskc_test::read_file(p);
    dskc_test::write_file(p, full.substr(0, full.size() - 5));
    expect_input_error(p, "the file is truncated");
  }
  SUBCASE("metadata not strings") {
    write_raw(p, R"({"__metadata__": {"k": 3}})", "");
    expect_input_error(p, "__metadata__ value for 'k' is not a string");
  }
  SUBCASE("missing file is an I/O error") {
    const dskc::Error e = catch_error([&] { dskc::read_safetensors(tmp / "nope.safetensors"); });
    CHECK(e.kind() == dskc::ErrorKind::Io);
    CHECK(std::string(e.what()).find("nope.safetensors") != std::string::npos);
  }
}

TEST_CASE("failed writes report an error and leave no file behind") {
  TempDir tmp;
  dskc::SafeTensorsFile f;
  f.tensors["x"] = dskc::tensor_from_doubles({1, 2}, {2}, dskc::DType::F32);
  SUBCASE("directory does not exist") {
    const std::string p = tmp / "missing/out.safetensors";
    const dskc::Error e = catch_error([&] { dskc::write_safetensors(p, f); });
    CHECK(e.kind() == dskc::ErrorKind::Io);
    CHECK(std::string(e.what()).rfind(p + ": ", 0) == 0);
    CHECK(files_in(tmp.path) == 0);
  }
  SUBCASE("parent is a regular file") {
    dskc_test::write_file(tmp / "file", "x");
    const dskc::Error e = catch_error([&] { dskc::write_safetensors(tmp / "file/out.safetensors", f); });
    CHECK(e.kind() == dskc::ErrorKind::Io);
    CHECK(files_in(tmp.path) == 1);
  }
  SUBCASE("read-only directory") {
    const fs::path ro = tmp.path / "ro";
    fs::create_directories(ro);
    ::chmod(ro.c_str(), 0500);
    if (::access(ro.c_str(), W_OK) == 0) {
      MESSAGE("running with permission to write a 0500 directory (root?): read-only case not testable");
    } else {
      const dskc::Error e = catch_error([&] { dskc::write_safetensors((ro / "out.safetensors").string(), f); });
      CHECK(e.kind() == dskc::ErrorKind::Io);
      CHECK(files_in(ro) == 0);
    }
    ::chmod(ro.c_str(), 0700);
  }
  SUBCASE("target is a directory: the finished temporary is removed") {
    fs::create_directories(tmp.path / "target");
    const dskc::Error e = catch_error([&] { dskc::write_safetensors(tmp / "target", f); });
    CHECK(e.kind() == dskc::ErrorKind::Io);
    CHECK(files_in(tmp.path) == 1);  // only the directory itself
    CHECK(files_in(tmp.path / "target") == 0);
  }
  SUBCASE("invalid tensor leaves an existing file untouched") {
    const std::string p = tmp / "keep.safetensors";
    dskc::write_safetensors(p, f);
    const std::string before = dskc_test::read_file(p);
    dskc::SafeTensorsFile bad = f;
    bad.tensors["y"] = {"F32", {3}, std::string(8, '\0')};
    const dskc::Error e = catch_error([&] { dskc::write_safetensors(p, bad); });
    CHECK(e.kind() == dskc::ErrorKind::Input);
    CHECK(std::string(e.what()).find("tensor 'y'") != std::string::npos);
    CHECK(dskc_test::read_file(p) == before);
    CHECK(files_in(tmp.path) == 1);
  }
}

TEST_CASE("fp16 conversion vectors") {
  using dskc::float_to_half_bits;
  using dskc::half_bits_to_float;
  CHECK(float_to_half_bits(1.0f) == 0x3C00);
  CHECK(float_to_half_bits(-2.0f) == 0xC000);
  CHECK(float_to_half_bits(0.0f) == 0x0000);
  CHECK(float_to_half_bits(-0.0f) == 0x8000);
  CHECK(float_to_half_bits(65504.0f) == 0x7BFF);
  CHECK(float_to_half_bits(65519.0f) == 0x7BFF);  // below the halfway point to 65536
  CHECK(float_to_half_bits(65520.0f) == 0x7C00);  // halfway: ties to even overflows to inf
  CHECK(float_to_half_bits(1e6f) == 0x7C00);
  CHECK(float_to_half_bits(-1e6f) == 0xFC00);
  CHECK(float_to_half_bits(0x1p-14f) == 0x0400);          // smallest normal
  CHECK(float_to_half_bits(0x1p-24f) == 0x0001);          // smallest subnormal
  CHECK(float_to_half_bits(1023 * 0x1p-24f) == 0x03FF);   // largest subnormal
  CHECK(float_to_half_bits(0x1p-25f) == 0x0000);          // tie between 0 and 2^-24: even is 0
  CHECK(float_to_half_bits(0x1.8p-25f) == 0x0001);        // above the tie
  CHECK(float_to_half_bits(3 * 0x1p-25f) == 0x0002);      // 1.5 ulp: tie rounds to even 2
  CHECK(float_to_half_bits(5 * 0x1p-25f) == 0x0002);      // 2.5 ulp: tie rounds to even 2
  CHECK(float_to_half_bits(1e-10f) == 0x0000);
  CHECK(float_to_half_bits(1.0f + 0x1p-11f) == 0x3C00);   // tie: 0x3C00 is even
  CHECK(float_to_half_bits(1.0f + 3 * 0x1p-11f) == 0x3C02);  // tie: 0x3C02 is even
  CHECK(float_to_half_bits(1.0f + 0x1p-11f + 0x1p-20f) == 0x3C01);
  CHECK(float_to_half_bits(2047 * 0x1p-25f) == 0x0400);   // rounds up out of the subnormals
  CHECK(dskc::double_to_half_bits(1.0 + 0x1p-11 + 0x1p-40) == 0x3C01);  // no double rounding
  CHECK(dskc::double_to_half_bits(65520.0) == 0x7C00);
  CHECK(dskc::double_to_half_bits(1e300) == 0x7C00);
  CHECK(float_to_half_bits(std::numeric_limits<float>::infinity()) == 0x7C00);
  CHECK(float_to_half_bits(-std::numeric_limits<float>::infinity()) == 0xFC00);
  const uint16_t nan = float_to_half_bits(std::numeric_limits<float>::quiet_NaN());
  CHECK((nan & 0x7C00) == 0x7C00);
  CHECK((nan & 0x03FF) != 0);
  CHECK((float_to_half_bits(std::bit_cast<float>(0x7F800001u)) & 0x03FF) != 0);  // sNaN stays NaN

  CHECK(half_bits_to_float(0x3C00) == 1.0f);
  CHECK(half_bits_to_float(0x0001) == 0x1p-24f);
  CHECK(half_bits_to_float(0x03FF) == 1023 * 0x1p-24f);
  CHECK(half_bits_to_float(0x7BFF) == 65504.0f);
  CHECK(half_bits_to_float(0xC000) == -2.0f);
  CHECK(std::isinf(half_bits_to_float(0x7C00)));
  CHECK(std::isnan(half_bits_to_float(0x7E00)));
  CHECK(std::signbit(half_bits_to_float(0x8000)));

  // Every non-NaN half survives half -> float -> half.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = half_bits_to_float(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    if (float_to_half_bits(f) != h) FAIL_CHECK("half 0x" << std::hex << h << " does not round-trip");
  }
  // Random floats and doubles round to a nearest half, ties to the even one.
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> expo(-27.0, 16.0);
  for (int k = 0; k < 200000; ++k) {
    double x = std::exp2(expo(rng)) * (rng() & 1 ? 1.0 : -1.0);
    if (k % 2) x = static_cast<float>(x);
    if (std::fabs(x) >= 65504.0) continue;
    const uint16_t h = k % 2 ? float_to_half_bits(static_cast<float>(x)) : dskc::double_to_half_bits(x);
    if (!is_nearest_even(x, h, half_bits_to_float)) FAIL_CHECK("value " << x << " rounded to half 0x" << std::hex << h);
  }
}

TEST_CASE("bf16 conversion vectors and round_to_dtype") {
  using dskc::bf16_bits_to_float;
  using dskc::float_to_bf16_bits;
  CHECK(float_to_bf16_bits(1.0f) == 0x3F80);
  CHECK(float_to_bf16_bits(-2.0f) == 0xC000);
  CHECK(float_to_bf16_bits(1.0f + 0x1p-8f) == 0x3F80);           // tie: even
  CHECK(float_to_bf16_bits(1.0f + 3 * 0x1p-8f) == 0x3F82);       // tie: even
  CHECK(float_to_bf16_bits(1.0f + 0x1p-8f + 0x1p-20f) == 0x3F81);
  CHECK(float_to_bf16_bits(std::numeric_limits<float>::max()) == 0x7F80);  // RNE overflows to inf
  CHECK(float_to_bf16_bits(std::numeric_limits<float>::infinity()) == 0x7F80);
  CHECK(float_to_bf16_bits(0x1p-133f) == 0x0001);  // subnormal bf16
  const uint16_t nan = float_to_bf16_bits(std::numeric_limits<float>::quiet_NaN());
  CHECK(std::isnan(bf16_bits_to_float(nan)));
  CHECK(std::isnan(bf16_bits_to_float(float_to_bf16_bits(std::bit_cast<float>(0x7F800001u)))));
  CHECK(bf16_bits_to_float(0x3F80) == 1.0f);
  CHECK(bf16_bits_to_float(0x4049) == 3.140625f);
  CHECK(dskc::double_to_bf16_bits(1.0 + 0x1p-8 + 0x1p-40) == 0x3F81);  // no double rounding
  std::mt19937_64 rng(9);
  std::uniform_real_distribution<double> expo(-130.0, 127.0);
  for (int k = 0; k < 200000; ++k) {
    const double x = std::exp2(expo(rng)) * (rng() & 1 ? 1.0 : -1.0);
    const uint16_t b = dskc::double_to_bf16_bits(x);
    if (!is_nearest_even(x, b, bf16_bits_to_float)) FAIL_CHECK("value " << x << " rounded to bf16 0x" << std::hex << b);
  }

  CHECK(dskc::round_to_dtype(0.1, dskc::DType::F32) == static_cast<double>(0.1f));
  CHECK(dskc::round_to_dtype(1.0 + 0x1p-11, dskc::DType::F16) == 1.0);
  CHECK(dskc::round_to_dtype(1.0 + 0x1p-11 + 0x1p-40, dskc::DType::F16) == 1.0 + 0x1p-10);
  CHECK(dskc::round_to_dtype(1.0 + 0x1p-8 + 0x1p-40, dskc::DType::BF16) == 1.0 + 0x1p-7);
  CHECK(dskc::round_to_dtype(70000.0, dskc::DType::F16) == std::numeric_limits<double>::infinity());
  CHECK(dskc::round_to_dtype(70000.0, dskc::DType::BF16) == 70144.0);
}
