// util/sha256 and util/openssl_cpu_vector: OpenSSL's digests give the
// standard answers (FIPS 180-2 and RFC 1321 vectors), on every code path
// OpenSSL's CPU vector can choose, and the vector made from glibc's record
// matches OpenSSL's own probe where SHA-256 looks.

#include <npc/util/openssl_cpu_vector.hpp>
#include <npc/util/sha256.hpp>

#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#if defined(__x86_64__)
// OpenSSL's CPU vector (OPENSSL_ia32cap(3)), filled by its start-up probe.
extern "C" unsigned int OPENSSL_ia32cap_P[4];
#endif

namespace npc::util {
namespace {

TEST(Sha256, StandardVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, PiecesGiveTheDigestOfTheWhole) {
  std::string data(100000, '\0');
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7 + 3);
  Sha256 pieces;
  for (std::size_t at = 0; at < data.size(); at += 777) pieces.update(std::string_view(data).substr(at, 777));
  EXPECT_EQ(pieces.hex_digest(), sha256_hex(data));
}

TEST(Md5, StandardVectors) {
  EXPECT_EQ(md5_hex(""), "d41d8cd98f00b204e9800998ecf8427e");
  EXPECT_EQ(md5_hex("abc"), "900150983cd24fb0d6963f7d28e17f72");
  EXPECT_EQ(md5_hex("12345678901234567890123456789012345678901234567890123456789012345678901234567890"),
            "57edf4a22be3c955ac49da2e2107b67a");
}

#if defined(__x86_64__)

// Every path the vector can select (SHA extensions, AVX2+BMI, SSSE3, plain
// x86-64) gives the same digests: each is forced in turn, where the CPU has it.
TEST(OpensslCpu, EveryCodePathGivesTheStandardDigest) {
  std::ignore = sha256_hex(""); // OpenSSL's probe has filled the vector by now
  const unsigned int saved[4] = {OPENSSL_ia32cap_P[0], OPENSSL_ia32cap_P[1], OPENSSL_ia32cap_P[2],
                                 OPENSSL_ia32cap_P[3]};
  struct Path {
    const char* name;
    unsigned int word1, word2;
  };
  const Path paths[] = {
      {"as probed", saved[1], saved[2]},
      {"without SHA extensions", saved[1], saved[2] & ~(1u << 29)},
      {"SSSE3 only", saved[1] & (1u << 9), 0},
      {"plain x86-64", 0, 0},
  };
  std::string million(1000000, 'a');
  for (const auto& path : paths) {
    OPENSSL_ia32cap_P[1] = path.word1;
    OPENSSL_ia32cap_P[2] = path.word2;
    EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad") << path.name;
    EXPECT_EQ(sha256_hex(million), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
        << path.name;
  }
  for (int i = 0; i < 4; ++i) OPENSSL_ia32cap_P[i] = saved[i];
}

// The vector the static wrapper gives OpenSSL instead of its probe
// (main/openssl_cpu_at_start.cpp) has each bit OpenSSL's SHA-256 chooses its
// path by as the probe found it, and those only; its digests are the standard.
TEST(OpensslCpu, TheVectorFromGlibcHasTheProbesBitsForSha256) {
  auto vector = openssl_cpu_vector();
#if !__has_include(<sys/platform/x86.h>)
  // glibc before 2.33 keeps no CPU record: OpenSSL probes the CPU itself.
  EXPECT_FALSE(vector.has_value()) << *vector;
  return;
#endif
  ASSERT_TRUE(vector.has_value());
  ASSERT_EQ(std::getenv("OPENSSL_ia32cap"), nullptr) << "the probe's vector is the one to compare with";
  std::ignore = sha256_hex("");
  const auto colon = vector->find(':');
  ASSERT_NE(colon, std::string::npos) << *vector;
  const unsigned long long first = std::strtoull(vector->c_str(), nullptr, 0);
  const unsigned long long second = std::strtoull(vector->c_str() + colon + 1, nullptr, 0);
  const unsigned int word1 = static_cast<unsigned int>(first >> 32);
  const unsigned int word2 = static_cast<unsigned int>(second);
  const unsigned int sha256_bits1 = (1u << 9) | (1u << 28);
  const unsigned int sha256_bits2 = (1u << 3) | (1u << 5) | (1u << 8) | (1u << 29);
  EXPECT_EQ(static_cast<unsigned int>(first), 0u) << *vector;
  EXPECT_EQ(second >> 32, 0u) << *vector;
  EXPECT_EQ(word1, OPENSSL_ia32cap_P[1] & sha256_bits1) << *vector;
  EXPECT_EQ(word2, OPENSSL_ia32cap_P[2] & sha256_bits2) << *vector;
  const unsigned int saved[4] = {OPENSSL_ia32cap_P[0], OPENSSL_ia32cap_P[1], OPENSSL_ia32cap_P[2],
                                 OPENSSL_ia32cap_P[3]};
  OPENSSL_ia32cap_P[0] = 1u << 10; // what OpenSSL sets from a vector given to it
  OPENSSL_ia32cap_P[1] = word1;
  OPENSSL_ia32cap_P[2] = word2;
  OPENSSL_ia32cap_P[3] = 0;
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  for (int i = 0; i < 4; ++i) OPENSSL_ia32cap_P[i] = saved[i];
}

#endif

} // namespace
} // namespace npc::util
