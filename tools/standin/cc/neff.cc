#include "neff.h"

#include <algorithm>

#include "sha256.h"

namespace standin::cc {
namespace {

// Padding block i is SHA-256(header || i as 8 little-endian bytes): cheap,
// deterministic, and incompressible like real machine code.
std::string padding_stream(const std::string& header, std::uint64_t length) {
  static constexpr int kCounterBytes = 8;
  static constexpr int kBitsPerByte = 8;
  std::string padding;
  padding.reserve(length);
  std::string block_input = header;
  block_input.resize(header.size() + kCounterBytes);
  for (std::uint64_t counter = 0; padding.size() < length; ++counter) {
    for (int b = 0; b < kCounterBytes; ++b) {
      block_input[header.size() + b] = static_cast<char>((counter >> (kBitsPerByte * b)) & 0xff);
    }
    const Sha256Digest block = sha256(block_input);
    const std::size_t take = std::min<std::uint64_t>(block.size(), length - padding.size());
    padding.append(reinterpret_cast<const char*>(block.data()), take);
  }
  return padding;
}

}  // namespace

std::string render_header(const NeffHeader& header) {
  std::string flags;
  for (const std::string& word : header.flag_words) flags += (flags.empty() ? "" : " ") + word;
  return std::string(kNeffMagic) + "\n" +
         "compiler-version: " + header.compiler_version + "\n" +
         "graph-sha256: " + header.graph_sha256 + "\n" +
         "graph-bytes: " + std::to_string(header.graph_bytes) + "\n" +
         "flags: " + flags + "\n" +
         "target: " + header.target + "\n" +
         "end-header\n";
}

std::string build_neff(const NeffHeader& header) {
  const std::string text = render_header(header);
  const std::uint64_t total = std::max<std::uint64_t>(kMinNeffBytes, header.graph_bytes / 2);
  if (text.size() >= total) return text;
  return text + padding_stream(text, total - text.size());
}

}  // namespace standin::cc
