#pragma once
// Cache bundles: one file (tar compressed with zstd, written and read through
// libarchive) holding chosen cache entries, so a CI job can pre-compile on one
// machine and training nodes start from its results.
//
// Layout of a bundle, in this order:
//   manifest.json                              format, tool version, creation
//                                              time, and per entry: key,
//                                              compiler version, state, flags,
//                                              and every file's size and SHA-256
//   entries/neuronxcc-<v>/MODULE_<g>+<f>/<file> the entry's files
// where <file> is one of model.hlo_module.pb, compile_flags.json, model.neff,
// model.log, npc-entry.json. model.done is never in a bundle: the importer
// writes it last, itself.
//
// What a bundle is trusted for: the importer checks every member against the
// manifest of the same archive, so it detects corruption and truncation, not
// a malicious producer (signing is out of scope). Whatever the archive says,
// nothing lands outside the cache: member names are matched against the form
// above, and only regular files are taken.
//
// Reading an entry consistently and publishing prepared files into one are in
// entry_transfer.hpp, shared with the read-only secondary tier.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include <npc/cache/entry_meta.hpp>
#include <npc/cache/entry_transfer.hpp>
#include <npc/cache/key.hpp>
#include <npc/cache/store.hpp>
#include <npc/util/error.hpp>
#include <npc/util/fs.hpp>
#include <npc/util/result.hpp>

namespace npc::cache {

namespace fs = std::filesystem;

inline constexpr int kBundleFormat = 1;
inline constexpr std::string_view kManifestName = "manifest.json";
inline constexpr std::string_view kBundleEntriesDir = "entries";
// A manifest larger than this is refused unread.
inline constexpr std::uint64_t kMaxManifestBytes = 64ULL * 1024 * 1024;
// Staging folders of imports under <root>/.npc: "import-XXXXXX".
inline constexpr std::string_view kImportStagingPrefix = "import-";

// The files an entry may carry in a bundle.
[[nodiscard]] bool is_bundle_file_name(std::string_view name);

// --- the manifest -----------------------------------------------------------

struct BundleFile {
  std::uint64_t bytes = 0;
  std::string sha256;
};

struct BundleEntry {
  CacheKey key;
  bool failed = false;                           // a cached failure (model.log, no NEFF)
  std::optional<std::vector<std::string>> flags; // compile_flags.json, when readable
  std::map<std::string, BundleFile> files;       // by file name
};

struct BundleManifest {
  int format = kBundleFormat;
  std::string tool_version;
  std::string created; // ISO 8601, UTC
  std::vector<BundleEntry> entries;
};

[[nodiscard]] std::string serialize_manifest(const BundleManifest& manifest);

// A parsed manifest. An entry that is malformed does not spoil the others:
// it is listed in `bad` with its key (as written) and the reason.
struct ParsedManifest {
  BundleManifest manifest;
  struct Bad {
    std::string key;
    std::string reason;
  };
  std::vector<Bad> bad;
};
// Fails when the whole document is unusable (not JSON, wrong format number,
// no entry list, duplicate keys).
[[nodiscard]] Result<ParsedManifest> parse_manifest(std::string_view json_text);

// Splits "entries/neuronxcc-<v>/MODULE_<g>+<f>/<file>" into key and file
// name; nullopt for any other name (absolute, "..", extra components,
// unknown file name, non-canonical spelling).
struct MemberName {
  CacheKey key;
  std::string file;
};
[[nodiscard]] std::optional<MemberName> parse_member_name(std::string_view name);
[[nodiscard]] std::string member_name(const CacheKey& key, std::string_view file);

// --- export -------------------------------------------------------------------

struct KeyReason {
  std::string key;
  std::string reason;
};

// Which entries to export.
struct ExportSelection {
  enum class Kind { all, used_since, from_report, keys } kind = Kind::all;
  double used_since_days = 0;      // used_since
  fs::path report;                 // from_report: a neuron_parallel_compile --report file
  std::vector<CacheKey> keys;      // keys
};

struct ExportOptions {
  bool include_failed = false; // also cached failures (model.log, no NEFF)
};

struct ExportReport {
  fs::path output;
  std::vector<std::string> exported;  // keys, in bundle order
  std::size_t failed_exported = 0;    // of them, cached failures
  std::size_t unverified = 0;         // done entries with no integrity record (hashed now)
  std::uint64_t bytes = 0;            // uncompressed file bytes in the bundle
  std::uint64_t bundle_bytes = 0;     // size of the bundle file
  std::vector<KeyReason> skipped;     // selected but not exported: a problem
  std::vector<KeyReason> left_out;    // failures not asked for (--include-failed)
};

// Writes the bundle atomically (nothing at `output` unless it is whole).
// Entries that cannot be exported are skipped and reported; the others are
// written. Throws npc::Error when no bundle can be written at all (a bad
// report file: usage; an unwritable output: environment).
[[nodiscard]] ExportReport export_bundle(const Cache& cache, const ExportSelection& selection,
                                         const fs::path& output, const ExportOptions& options);

// The keys a launcher report names, with whether the run left each done.
struct ReportedGraph {
  CacheKey key;
  std::string status; // compiled, cached, compiled_elsewhere, failed, failed_cached, ...
};
[[nodiscard]] Result<std::vector<ReportedGraph>> read_launcher_report(const fs::path& report);

// --- import -------------------------------------------------------------------

struct ImportOptions {
  bool include_failed = false;
  // How long to wait for a compile of the same entry running here; after
  // that the entry is skipped (the compile will publish it).
  std::chrono::milliseconds lock_wait{std::chrono::seconds(60)};
};

struct ImportReport {
  std::vector<std::string> imported;
  std::vector<KeyReason> skipped;  // already done here, failures not asked for, busy
  std::vector<KeyReason> rejected; // corrupt, truncated, unsafe: nothing of them is visible
  std::optional<std::string> error; // the bundle as a whole is unusable
  ExitCode error_code = ExitCode::failure;
  std::string tool_version;  // from the manifest
  std::string created;
  [[nodiscard]] int exit_code() const; // 0, 1 (rejections or a bad bundle), 3
};

// Stages every wanted member under <root>/.npc/import-XXXXXX while checking
// it against the manifest, then publishes each whole entry under its lock.
[[nodiscard]] ImportReport import_bundle(const Cache& cache, const fs::path& bundle,
                                         const ImportOptions& options);

// Removes staging folders left by imports that died (not locked, older than
// a few minutes).
void remove_stale_import_staging(const Cache& cache);

[[nodiscard]] nlohmann::json to_json(const ExportReport& report);
[[nodiscard]] nlohmann::json to_json(const ImportReport& report);

} // namespace npc::cache
