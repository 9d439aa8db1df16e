#include <npc/util/sha256.hpp>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdexcept>
#include <unistd.h>
#include <vector>

#include <npc/util/fs.hpp>

namespace npc::util {

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  if (ctx_ == nullptr || EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr) != 1)
    throw std::runtime_error("OpenSSL could not start a SHA-256 digest");
}

Sha256::~Sha256() { EVP_MD_CTX_free(ctx_); }

void Sha256::update(std::string_view data) {
  if (EVP_DigestUpdate(ctx_, data.data(), data.size()) != 1)
    throw std::runtime_error("OpenSSL SHA-256 update failed");
}

std::string Sha256::hex_digest() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_DigestFinal_ex(ctx_, digest, &length) != 1)
    throw std::runtime_error("OpenSSL SHA-256 final failed");
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(length * 2);
  for (unsigned i = 0; i < length; ++i) {
    hex.push_back(kHex[digest[i] >> 4]);
    hex.push_back(kHex[digest[i] & 0xf]);
  }
  return hex;
}

std::string sha256_hex(std::string_view data) {
  Sha256 sha;
  sha.update(data);
  return sha.hex_digest();
}

Result<FileDigest> sha256_fd(int fd, int copy_to) {
  // 1 MiB reads keep syscall overhead negligible next to hashing.
  constexpr size_t kChunk = 1 << 20;
  std::vector<char> buffer(kChunk);
  Sha256 sha;
  FileDigest digest;
  off_t offset = 0;
  for (;;) {
    ssize_t n = ::pread(fd, buffer.data(), buffer.size(), offset);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail(std::string("read failed: ") + std::strerror(errno));
    }
    if (n == 0) break;
    std::string_view chunk(buffer.data(), static_cast<size_t>(n));
    sha.update(chunk);
    if (copy_to >= 0 && !write_all(copy_to, chunk))
      return fail(std::string("write failed: ") + std::strerror(errno));
    offset += n;
    digest.size += static_cast<uint64_t>(n);
  }
  digest.sha256 = sha.hex_digest();
  return digest;
}

Result<FileDigest> sha256_file(const std::filesystem::path& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return fail(errno_text("cannot open", path, errno));
  auto digest = sha256_fd(fd.get());
  if (!digest) return fail("cannot hash " + path.string() + ": " + digest.error());
  return digest;
}

} // namespace npc::util
