#pragma once
// Cache keys. The graph hash is the first 20 hex digits of SHA-256 of the
// graph bytes; the flags hash the first 8 hex digits of SHA-256 of the
// canonical flag list, in which every flag is written as "<length>:<bytes>;"
// so that no two different lists encode alike. Nothing machine- or
// path-specific enters a key.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <npc/util/result.hpp>

namespace npc::cache {

namespace fs = std::filesystem;

inline constexpr size_t kGraphHashDigits = 20;
inline constexpr size_t kFlagsHashDigits = 8;

struct CacheKey {
  std::string compiler_version;
  std::string graph_hash;
  std::string flags_hash;

  [[nodiscard]] std::string version_dir() const;  // "neuronxcc-<version>"
  [[nodiscard]] std::string module_name() const;  // "MODULE_<graph>+<flags>"
  [[nodiscard]] std::string str() const;          // "neuronxcc-<v>/MODULE_<g>+<f>"
  [[nodiscard]] fs::path relative_path() const;
  bool operator==(const CacheKey&) const = default;
  auto operator<=>(const CacheKey&) const = default;
};

// Everything that went into a key, to explain a miss.
struct KeyInputs {
  std::string graph_sha256;
  std::uint64_t graph_bytes = 0;
  std::vector<std::string> flags;
  std::string flags_encoding;
  std::string flags_sha256;
  std::string compiler_version;
};

[[nodiscard]] std::string canonical_flags(const std::vector<std::string>& flags);

// A compiler version must be usable as part of one directory name.
[[nodiscard]] bool valid_compiler_version(std::string_view version);

[[nodiscard]] CacheKey make_key(std::string_view graph_sha256,
                                const std::vector<std::string>& flags,
                                const std::string& compiler_version,
                                KeyInputs* inputs = nullptr);
// Hashes the graph bytes itself.
[[nodiscard]] CacheKey make_key_for_graph(std::string_view graph_bytes,
                                          const std::vector<std::string>& flags,
                                          const std::string& compiler_version,
                                          KeyInputs* inputs = nullptr);

// "neuronxcc-<v>/MODULE_<g>+<f>" (or the entry's directory path ending so)
// back to a key; nullopt when it is not of that form.
[[nodiscard]] std::optional<CacheKey> parse_key(std::string_view text);
// Module directory name alone -> (graph hash, flags hash).
[[nodiscard]] bool parse_module_name(std::string_view name, std::string& graph_hash,
                                     std::string& flags_hash);

[[nodiscard]] std::string explain_key(const KeyInputs& inputs, const CacheKey& key);

} // namespace npc::cache
