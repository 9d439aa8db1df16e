#pragma once
// The bundle format: what a bundle holds, the manifest that describes it, and
// the names its members have. Pure: no libarchive, no filesystem, so that the
// parser can be fuzzed on its own (tests/fuzz, target bundle_manifest).
//
// Layout of a bundle (a tar compressed with zstd), in this order:
//   manifest.json                              format, tool version, creation
//                                              time, and per entry: key,
//                                              compiler version, state, flags,
//                                              and every file's size and SHA-256
//   entries/neuronxcc-<v>/MODULE_<g>+<f>/<file> the entry's files
// where <file> is one of model.hlo_module.pb, compile_flags.json, model.neff,
// model.log, npc-entry.json. model.done is never in a bundle: the importer
// writes it last, itself.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <npc/cache/key.hpp>
#include <npc/util/result.hpp>

namespace npc::bundle {

inline constexpr int kBundleFormat = 1;
inline constexpr std::string_view kManifestName = "manifest.json";
inline constexpr std::string_view kBundleEntriesDir = "entries";
// A manifest larger than this is refused unread: a real one lists a few
// thousand entries in a few MiB.
inline constexpr std::uint64_t kMaxManifestBytes = 64ULL * 1024 * 1024;

// --- the manifest -----------------------------------------------------------

struct BundleFile {
  std::uint64_t bytes = 0;
  std::string sha256;
  bool operator==(const BundleFile&) const = default;
};

struct BundleEntry {
  cache::CacheKey key;
  bool failed = false;                           // a cached failure (model.log, no NEFF)
  std::optional<std::vector<std::string>> flags; // compile_flags.json, when readable
  std::map<std::string, BundleFile> files;       // by file name
  bool operator==(const BundleEntry&) const = default;
};

struct BundleManifest {
  int format = kBundleFormat;
  std::string tool_version;
  std::string created; // ISO 8601, UTC
  std::vector<BundleEntry> entries;
  bool operator==(const BundleManifest&) const = default;
};

[[nodiscard]] std::string serialize_manifest(const BundleManifest& manifest);

// A parsed manifest. An entry that is malformed does not spoil the others:
// it is listed in `bad` with its key (as written, made printable) and the
// reason.
struct ParsedManifest {
  BundleManifest manifest;
  struct Bad {
    std::string key;
    std::string reason;
  };
  std::vector<Bad> bad;
};
// Fails when the whole document is unusable (not JSON, wrong format number,
// no entry list, duplicate keys). Never throws.
[[nodiscard]] Result<ParsedManifest> parse_manifest(std::string_view json_text);

// --- member names -------------------------------------------------------------

// The files an entry may carry in a bundle.
[[nodiscard]] bool is_bundle_file_name(std::string_view name);

// Splits "entries/neuronxcc-<v>/MODULE_<g>+<f>/<file>" into key and file
// name; nullopt for any other name (absolute, "..", extra components,
// unknown file name, non-canonical spelling).
struct MemberName {
  cache::CacheKey key;
  std::string file;
};
[[nodiscard]] std::optional<MemberName> parse_member_name(std::string_view name);
[[nodiscard]] std::string member_name(const cache::CacheKey& key, std::string_view file);

} // namespace npc::bundle
