#include "sha256.h"

#include <openssl/evp.h>

#include "error.h"
#include "md_ctx.h"

namespace standin {

Sha256Digest sha256(std::string_view data) {
  MdCtx ctx(EVP_MD_CTX_new());
  Sha256Digest digest{};
  unsigned int length = 0;
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1 ||
      EVP_DigestUpdate(ctx.get(), data.data(), data.size()) != 1 ||
      EVP_DigestFinal_ex(ctx.get(), digest.data(), &length) != 1 ||
      length != kSha256Bytes) {
    throw failure("SHA-256 computation failed in OpenSSL");
  }
  return digest;
}

std::string sha256_hex(std::string_view data) {
  static constexpr char kHexDigits[] = "0123456789abcdef";
  const Sha256Digest digest = sha256(data);
  std::string hex;
  hex.reserve(kSha256Bytes * 2);
  for (unsigned char byte : digest) {
    hex.push_back(kHexDigits[byte >> 4]);
    hex.push_back(kHexDigits[byte & 0x0f]);
  }
  return hex;
}

}  // namespace standin
