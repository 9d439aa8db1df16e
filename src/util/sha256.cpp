#include <npc/util/sha256.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
// The compile entry starts once per graph of a training run, and a hit
// hashes the graph. Through EVP, OpenSSL 3 first builds its table of every
// algorithm name (EVP_MD_fetch fills it from all legacy ciphers, digests and
// key types, whatever the init flags say), and the program must load
// libcrypto.so, whose mapping and relocations cost more than the rest of a
// hit. The low-level functions run the same code (the assembly that uses the
// CPU's SHA extensions, chosen by OPENSSL_ia32cap as EVP's is), need no
// start-up, and link from libcrypto.a alone (src/CMakeLists.txt). OpenSSL 3
// deprecates them in favour of EVP; they are still OpenSSL's digests.
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/md5.h>
#include <openssl/sha.h>
#include <stdexcept>
#include <unistd.h>
#include <vector>

#include <npc/util/fs.hpp>

namespace npc::util {

namespace {

std::string to_hex(const unsigned char* digest, unsigned length) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(length * 2);
  for (unsigned i = 0; i < length; ++i) {
    hex.push_back(kHex[digest[i] >> 4]);
    hex.push_back(kHex[digest[i] & 0xf]);
  }
  return hex;
}

} // namespace

Sha256::Sha256() : ctx_(std::make_unique<SHA256state_st>()) {
  if (SHA256_Init(ctx_.get()) != 1) throw std::runtime_error("OpenSSL could not start a SHA-256 digest");
}

Sha256::~Sha256() = default;

void Sha256::update(std::string_view data) {
  if (SHA256_Update(ctx_.get(), data.data(), data.size()) != 1)
    throw std::runtime_error("OpenSSL SHA-256 update failed");
}

std::string Sha256::hex_digest() {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  if (SHA256_Final(digest, ctx_.get()) != 1) throw std::runtime_error("OpenSSL SHA-256 final failed");
  return to_hex(digest, SHA256_DIGEST_LENGTH);
}

std::string sha256_hex(std::string_view data) {
  Sha256 sha;
  sha.update(data);
  return sha.hex_digest();
}

std::string md5_hex(std::string_view data) {
  unsigned char digest[MD5_DIGEST_LENGTH];
  MD5_CTX ctx;
  if (MD5_Init(&ctx) != 1 || MD5_Update(&ctx, data.data(), data.size()) != 1 || MD5_Final(digest, &ctx) != 1)
    throw std::runtime_error("OpenSSL could not compute an MD5 digest");
  return to_hex(digest, MD5_DIGEST_LENGTH);
}

Result<FileDigest> sha256_fd(int fd, int copy_to, IoSide* failed_side) {
  // 1 MiB reads keep syscall overhead negligible next to hashing.
  // A small file gets a buffer its size: filling 1 MiB would cost more than
  // hashing a few kilobytes.
  constexpr size_t kChunk = 1 << 20;
  size_t chunk = kChunk;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && static_cast<size_t>(st.st_size) < kChunk)
    chunk = std::max<size_t>(static_cast<size_t>(st.st_size) + 1, 4096);
  std::vector<char> buffer(chunk);
  Sha256 sha;
  FileDigest digest;
  off_t offset = 0;
  for (;;) {
    ssize_t n = ::pread(fd, buffer.data(), buffer.size(), offset);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (failed_side) *failed_side = IoSide::read;
      return fail(std::string("read failed: ") + std::strerror(errno));
    }
    if (n == 0) break;
    std::string_view chunk(buffer.data(), static_cast<size_t>(n));
    sha.update(chunk);
    if (copy_to >= 0 && !write_all(copy_to, chunk)) {
      if (failed_side) *failed_side = IoSide::write;
      return fail(std::string("write failed: ") + std::strerror(errno));
    }
    offset += n;
    digest.size += static_cast<uint64_t>(n);
  }
  digest.sha256 = sha.hex_digest();
  return digest;
}

Result<FileDigest> sha256_file(const std::filesystem::path& path) {
  UniqueFd fd(open_for_reading(path));
  if (!fd.valid()) return fail(errno_text("cannot open", path, errno));
  auto digest = sha256_fd(fd.get());
  if (!digest) return fail("cannot hash " + path.string() + ": " + digest.error());
  return digest;
}

} // namespace npc::util
