#pragma once
// Cache keys: MODULE_<graph hash>+<flags hash> under neuronxcc-<version>.
// The graph hash is the first 20 hex digits of SHA-256 of the graph bytes.
// The flags hash is what current torch-neuronx computes: the first 8 hex
// digits of MD5 of the flags joined by single spaces ("d41d8cd9" for none).
// That text is ambiguous ({"a b"} and {"a", "b"} join alike), but a key of
// our own encoding would never meet the framework's entries.
// Earlier releases of this tool hashed a length-prefixed encoding with
// SHA-256 instead (legacy_key): entries written so stay readable, and are
// never written again. Nothing machine- or path-specific enters a key (the
// compile target neither: it follows the machine, see compile/target.hpp).

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
  std::string flags_text; // what is hashed: the flags joined by single spaces
  std::string flags_md5;
  std::string legacy_flags_encoding; // canonical_flags(flags)
  std::string legacy_flags_sha256;
  std::string compiler_version;
};

// The flags joined by single spaces, as torch-neuronx hashes them.
[[nodiscard]] std::string joined_flags(const std::vector<std::string>& flags);
// First kFlagsHashDigits of MD5 of joined_flags(flags).
[[nodiscard]] std::string flags_hash(const std::vector<std::string>& flags);

// The legacy encoding: every flag as "<length>:<bytes>;".
[[nodiscard]] std::string canonical_flags(const std::vector<std::string>& flags);
// First kFlagsHashDigits of SHA-256 of canonical_flags(flags).
[[nodiscard]] std::string legacy_flags_hash(const std::vector<std::string>& flags);

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
// Where an earlier release of this tool stored the same graph and flags:
// looked up (read only) when the entry under make_key's key is not done.
[[nodiscard]] CacheKey legacy_key(std::string_view graph_sha256, const std::vector<std::string>& flags,
                                  const std::string& compiler_version);

// "neuronxcc-<v>/MODULE_<g>+<f>" (or the entry's directory path ending so)
// back to a key; nullopt when it is not of that form.
[[nodiscard]] std::optional<CacheKey> parse_key(std::string_view text);
// Module directory name alone -> (graph hash, flags hash). Either part is
// lower-case hex digits; decimal digits are among them, so the framework's
// decimal graph hashes (torch-xla's, MODULE_9993940051196728623+3cc9a3cb)
// parse too.
[[nodiscard]] bool parse_module_name(std::string_view name, std::string& graph_hash,
                                     std::string& flags_hash);
// A module name computed by someone else (NxD, optimum-neuron) under this
// compiler version; nullopt when `module_name` is not of the form above.
[[nodiscard]] std::optional<CacheKey> key_from_module_name(std::string_view module_name,
                                                           const std::string& compiler_version);

[[nodiscard]] std::string explain_key(const KeyInputs& inputs, const CacheKey& key);

} // namespace npc::cache
