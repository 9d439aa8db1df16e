#pragma once
// SHA-256 through OpenSSL's SHA256_* functions (they use the CPU's SHA
// extensions when it has them), and MD5 for the one place a format we must
// match uses it.

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include <npc/util/result.hpp>

struct SHA256state_st;

namespace npc::util {

class Sha256 {
public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void update(std::string_view data);
  // Lower-case hex of the 32-byte digest. The object is spent afterwards.
  [[nodiscard]] std::string hex_digest();

private:
  std::unique_ptr<SHA256state_st> ctx_; // OpenSSL's SHA256_CTX
};

[[nodiscard]] std::string sha256_hex(std::string_view data);
// Lower-case hex of MD5. Only for names other tools compute the same way
// (torch-neuronx's flags part of a cache key), never for integrity.
[[nodiscard]] std::string md5_hex(std::string_view data);

struct FileDigest {
  std::string sha256;
  std::uint64_t size = 0;
};

enum class IoSide { read, write };
// Hashes an open descriptor from its start; if `copy_to` >= 0 the bytes are
// also written there (one read pass serves both integrity check and copy).
// On failure, `failed_side` (if given) tells whether reading or writing
// failed: a copy from a remote mount blames the source, a full disk here ours.
[[nodiscard]] Result<FileDigest> sha256_fd(int fd, int copy_to = -1, IoSide* failed_side = nullptr);
[[nodiscard]] Result<FileDigest> sha256_file(const std::filesystem::path& path);

} // namespace npc::util
