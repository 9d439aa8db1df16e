#pragma once
// Cache bundles: one file (tar compressed with zstd, written and read through
// libarchive) holding chosen cache entries, so a CI job can pre-compile on one
// machine and training nodes start from its results. What a bundle holds is
// in manifest.hpp.
//
// What a bundle is trusted for: the importer checks every member against the
// manifest of the same archive, so it detects corruption and truncation, not
// a malicious producer (signing is out of scope). Whatever the archive says,
// nothing lands outside the cache: member names are matched against the form
// in manifest.hpp, and only regular files are taken.
//
// This library (npc_bundle) is the only code that links libarchive, and only
// neuron_cache links it: the compile entry starts once per graph and must not
// load libarchive (with libxml2 and ICU behind it) each time.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include <npc/cache/key.hpp>
#include <npc/util/error.hpp>

namespace npc::cache {
class Cache;
}

namespace npc::bundle {

namespace fs = std::filesystem;

struct KeyReason {
  std::string key;
  std::string reason;
};

// --- export -------------------------------------------------------------------

// Which entries to export.
struct ExportSelection {
  enum class Kind { all, used_since, from_report, keys } kind = Kind::all;
  double used_since_days = 0;         // used_since
  fs::path report;                    // from_report: a neuron_parallel_compile --report file
  std::vector<cache::CacheKey> keys;  // keys
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
[[nodiscard]] ExportReport export_bundle(const cache::Cache& cache, const ExportSelection& selection,
                                         const fs::path& output, const ExportOptions& options);

// --- import -------------------------------------------------------------------

struct ImportOptions {
  bool include_failed = false;
  // How long to wait for a compile of the same entry running here; after
  // that the entry is skipped (the compile will publish it).
  std::chrono::milliseconds lock_wait{std::chrono::seconds(60)};
};

// Why an entry was skipped when the cache has a result for it already.
inline constexpr std::string_view kSkippedDoneHere = "already done in this cache";
inline constexpr std::string_view kSkippedFailedHere = "a failure is cached here already";

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
[[nodiscard]] ImportReport import_bundle(const cache::Cache& cache, const fs::path& bundle,
                                         const ImportOptions& options);

// --- reports as JSON (neuron_cache --json) ------------------------------------

[[nodiscard]] nlohmann::json to_json(const ExportReport& report);
[[nodiscard]] nlohmann::json to_json(const ImportReport& report);

} // namespace npc::bundle
