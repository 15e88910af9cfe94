// SHA-256 (FIPS 180-4), self-contained: used for content-addressed cache keys and payload
// checksums. One-shot sha256_hex() and an incremental Sha256 (update any number of times,
// then hex_digest() once; after that the object must not be updated again).
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace dskc {

class Sha256 {
 public:
  Sha256();
  void update(std::string_view data);
  // Finalizes and returns the 64-character lowercase hex digest.
  std::string hex_digest();

 private:
  void compress(const uint8_t* block);
  std::array<uint32_t, 8> h_;
  std::array<uint8_t, 64> buf_{};
  size_t buf_len_ = 0;
  uint64_t total_bytes_ = 0;
  bool finalized_ = false;
};

std::string sha256_hex(std::string_view data);

}  // namespace dskc
