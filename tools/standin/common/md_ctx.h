#pragma once
// An OpenSSL digest context that frees itself: what md5.cc and sha256.cc
// both hash with.

#include <openssl/evp.h>

#include <memory>

namespace standin {

struct MdCtxDeleter {
  void operator()(EVP_MD_CTX* ctx) const { EVP_MD_CTX_free(ctx); }
};
using MdCtx = std::unique_ptr<EVP_MD_CTX, MdCtxDeleter>;

}  // namespace standin
