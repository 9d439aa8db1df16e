// SHA-256 through OpenSSL's EVP interface: the stand-ins identify graphs and
// NEFFs by it, the way the real cache identifies modules by hash.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>

namespace standin {

inline constexpr std::size_t kSha256Bytes = 32;
using Sha256Digest = std::array<unsigned char, kSha256Bytes>;

Sha256Digest sha256(std::string_view data);

// Lower-case hex, 64 characters.
std::string sha256_hex(std::string_view data);

}  // namespace standin
