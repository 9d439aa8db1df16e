#include "cache_key.h"

#include "md5.h"
#include "sha256.h"

namespace standin::train {
namespace {

constexpr std::size_t kGraphHashBytes = 8;
constexpr std::size_t kFlagsHashHexDigits = 8;

}  // namespace

std::uint64_t graph_hash(std::string_view graph_bytes) {
  const Sha256Digest digest = sha256(graph_bytes);
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < kGraphHashBytes; ++i) value = (value << 8) | digest[i];
  return value;
}

std::string flags_hash(const std::vector<std::string>& compiler_flags) {
  std::string joined;
  for (std::size_t i = 0; i < compiler_flags.size(); ++i) {
    if (i > 0) joined += ' ';
    joined += compiler_flags[i];
  }
  return md5_hex(joined).substr(0, kFlagsHashHexDigits);
}

std::string entry_directory(const std::string& root, const std::string& compiler_version,
                            std::string_view graph_bytes, const std::vector<std::string>& compiler_flags) {
  return root + "/neuronxcc-" + compiler_version + "/MODULE_" + std::to_string(graph_hash(graph_bytes)) +
         "+" + flags_hash(compiler_flags);
}

}  // namespace standin::train
