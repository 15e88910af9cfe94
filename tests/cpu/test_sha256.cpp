// SHA-256 against the FIPS 180-2 / NIST example vectors, one-shot and incremental (including
// splits that straddle block boundaries and the 55/56/64-byte padding edge cases).
#include <doctest/doctest.h>

#include <string>

#include "compiler/sha256.h"

using dskc::Sha256;
using dskc::sha256_hex;

TEST_CASE("sha256: FIPS vectors") {
  CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  CHECK(
      sha256_hex("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopq"
                 "klmnopqrlmnopqrsmnopqrstnopqrstu") ==
      "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
}

TEST_CASE("sha256: one million 'a'") {
  const std::string expected = "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0";
  CHECK(sha256_hex(std::string(1000000, 'a')) == expected);
  Sha256 s;  // incremental, in uneven chunks
  std::string chunk(997, 'a');
  size_t done = 0;
  while (done + chunk.size() <= 1000000) {
    s.update(chunk);
    done += chunk.size();
  }
  s.update(std::string(1000000 - done, 'a'));
  CHECK(s.hex_digest() == expected);
}

TEST_CASE("sha256: incremental equals one-shot for every split point") {
  std::string msg;
  for (int i = 0; i < 200; ++i) msg.push_back(static_cast<char>(i * 37 + 11));
  for (size_t len : {0, 1, 55, 56, 57, 63, 64, 65, 119, 120, 128, 200}) {
    std::string m = msg.substr(0, len);
    const std::string whole = sha256_hex(m);
    for (size_t cut = 0; cut <= len; ++cut) {
      Sha256 s;
      s.update(std::string_view(m).substr(0, cut));
      s.update(std::string_view(m).substr(cut));
      CHECK_MESSAGE(s.hex_digest() == whole, "len=" << len << " cut=" << cut);
    }
  }
}

TEST_CASE("sha256: binary data with embedded NULs") {
  std::string with_nul("a\0b", 3);
  CHECK(sha256_hex(with_nul) != sha256_hex("ab"));
  CHECK(sha256_hex(with_nul).size() == 64);
}
