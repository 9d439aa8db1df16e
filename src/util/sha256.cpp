#include <npc/util/sha256.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdexcept>
#include <unistd.h>
#include <vector>

#include <npc/util/fs.hpp>

namespace npc::util {

namespace {

// The compile entry starts once per graph of a training run, and OpenSSL's
// default start (reading openssl.cnf, registering every cipher and digest by
// name) cost more than the rest of a cache hit. We only ever hash: start it
// without the config file and the name tables, and fetch each digest once.
// (Without the config no FIPS provider is loaded either, so MD5, which we use
// only to name cache entries as torch-neuronx does, stays available.)
const EVP_MD* fetch_method(const char* name) {
  [[maybe_unused]] static const bool started = [] {
    OPENSSL_init_crypto(OPENSSL_INIT_NO_LOAD_CONFIG | OPENSSL_INIT_NO_ADD_ALL_CIPHERS |
                            OPENSSL_INIT_NO_ADD_ALL_DIGESTS,
                        nullptr);
    return true;
  }();
  return static_cast<const EVP_MD*>(EVP_MD_fetch(nullptr, name, nullptr));
}

const EVP_MD* sha256_method() {
  static const EVP_MD* method = fetch_method("SHA256");
  return method;
}

const EVP_MD* md5_method() {
  static const EVP_MD* method = fetch_method("MD5");
  return method;
}

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

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  const EVP_MD* method = sha256_method();
  if (ctx_ == nullptr || method == nullptr || EVP_DigestInit_ex(ctx_, method, nullptr) != 1)
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
  return to_hex(digest, length);
}

std::string sha256_hex(std::string_view data) {
  Sha256 sha;
  sha.update(data);
  return sha.hex_digest();
}

std::string md5_hex(std::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  const EVP_MD* method = md5_method();
  if (method == nullptr || EVP_Digest(data.data(), data.size(), digest, &length, method, nullptr) != 1)
    throw std::runtime_error("OpenSSL could not compute an MD5 digest");
  return to_hex(digest, length);
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
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return fail(errno_text("cannot open", path, errno));
  auto digest = sha256_fd(fd.get());
  if (!digest) return fail("cannot hash " + path.string() + ": " + digest.error());
  return digest;
}

} // namespace npc::util
